//! The index page cache and the object index operations on it.
//!
//! Each object has a two-level index (see [`crate::format::index`]): a root page whose
//! entries are leaf pages, and leaves whose entries are data pages. Only `CACHE` index
//! pages are held in RAM. A dirty page is written out (as a new `Index` page in the data
//! head) when it must leave the cache and at every checkpoint; writing a leaf updates its
//! root entry, writing a root updates the object record. When the eviction victim is a
//! root whose object has a dirty cached leaf, that leaf is written and evicted instead
//! (one program either way), so a root is not reloaded and rewritten just to take a
//! leaf's new address. Index pages written between
//! checkpoints are only a cache: recovery rebuilds the same state from the data pages'
//! backpointers and ignores them.

use nand_hal::NandFlash;

use crate::errors::Fault;
use crate::format::backpointer::{Backpointer, PageKind};
use crate::format::checkpoint::NONE;
use crate::format::index::{self, ROOT_LPN, UNMAPPED};
use crate::io::FaultOf;
use crate::policy::SpacePolicy;
use crate::{Oftl, DATA_HEAD};

impl<
        F: NandFlash,
        P: SpacePolicy,
        const PAGE: usize,
        const BLOCKS: usize,
        const OBJECTS: usize,
        const CACHE: usize,
        const WBUF: usize,
    > Oftl<F, PAGE, BLOCKS, OBJECTS, CACHE, WBUF, P>
{
    fn find_slot(&self, obj: u32, idx: u32) -> Option<usize> {
        self.cache
            .iter()
            .position(|s| s.used && s.obj == obj && s.idx == idx)
    }

    fn touch(&mut self, s: usize) {
        self.tick = self.tick.wrapping_add(1);
        self.cache[s].lru = self.tick;
    }

    /// A slot holding index page `idx` (leaf number or [`ROOT_LPN`]) of `obj`.
    ///
    /// Freeing a slot may write other pages (and load roots for them), which can change
    /// the object's root address or cache the wanted page meanwhile: the address is
    /// only read once a slot is free, and the lookup is repeated after every eviction.
    pub(crate) fn slot_for(&mut self, obj: u32, idx: u32) -> Result<usize, FaultOf<F>> {
        self.obj_index(obj).ok_or(Fault::NotFound)?;
        loop {
            if let Some(s) = self.find_slot(obj, idx) {
                self.touch(s);
                return Ok(s);
            }
            let s = self.free_slot()?;
            if self.find_slot(obj, idx).is_some() {
                continue;
            }
            let (want, addr) = if idx == ROOT_LPN {
                (idx, self.root_addr(obj)?)
            } else {
                match self.find_slot(obj, ROOT_LPN) {
                    Some(r) => (idx, index::entry(&self.cache[r].data, idx as usize)),
                    // Load the root first, then come back for the leaf.
                    None => (ROOT_LPN, self.root_addr(obj)?),
                }
            };
            self.fill(s, obj, want, addr)?;
            if want == idx {
                return Ok(s);
            }
        }
    }

    fn root_addr(&self, obj: u32) -> Result<u32, FaultOf<F>> {
        let oi = self.obj_index(obj).ok_or(Fault::NotFound)?;
        Ok(self.objs[oi].root)
    }

    fn fill(&mut self, s: usize, obj: u32, idx: u32, addr: u32) -> Result<(), FaultOf<F>> {
        let epp = self.entries_per_index();
        if addr == UNMAPPED {
            self.cache[s].data.fill(0xFF);
        } else {
            let payload = self.dev.payload as usize;
            self.dev.read_payload(
                addr,
                0,
                &mut self.cache[s].data[..payload],
                Some((PageKind::Index, obj, idx)),
            )?;
            index::validate(&self.cache[s].data, epp, self.dev.geo.pages())?;
        }
        let sl = &mut self.cache[s];
        sl.used = true;
        sl.dirty = false;
        sl.obj = obj;
        sl.idx = idx;
        sl.addr = addr;
        self.touch(s);
        Ok(())
    }

    /// Frees a slot, writing out the least recently used dirty page if it must.
    fn free_slot(&mut self) -> Result<usize, FaultOf<F>> {
        loop {
            if let Some(s) = self.cache.iter().position(|s| !s.used) {
                return Ok(s);
            }
            let (v, _) = self
                .cache
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| s.lru)
                .ok_or(Fault::NoSpace)?;
            if self.cache[v].idx == ROOT_LPN {
                // Write one of the object's dirty leaves while its root is still cached:
                // evicting the root first would mean reloading (and rewriting) it when
                // the leaf goes.
                let obj = self.cache[v].obj;
                if let Some(l) = self
                    .cache
                    .iter()
                    .position(|s| s.used && s.dirty && s.obj == obj && s.idx != ROOT_LPN)
                {
                    // One program per freed slot, as for any dirty victim: the root is
                    // cached, so writing the leaf loads nothing, and the leaf's slot
                    // (clean now) is the one freed.
                    self.dev.stats.index_evictions += 1;
                    self.write_slot(l)?;
                    self.cache[l].used = false;
                    return Ok(l);
                }
            }
            if !self.cache[v].dirty {
                self.cache[v].used = false;
                return Ok(v);
            }
            self.dev.stats.index_evictions += 1;
            self.write_slot(v)?;
        }
    }

    /// Writes a dirty slot to flash and points its parent at the new copy.
    pub(crate) fn write_slot(&mut self, v: usize) -> Result<(), FaultOf<F>> {
        let (obj, idx, old) = (self.cache[v].obj, self.cache[v].idx, self.cache[v].addr);
        let mut bp = Backpointer::single(PageKind::Index, obj, idx, self.dev.payload as u16);
        // Index pages never close a transaction: recovery ignores them.
        bp.commit = false;
        let (page, _) = self
            .dev
            .program(DATA_HEAD, &mut self.cache[v].data, bp, false, None)?;
        self.dev.mark_invalid(old);
        self.dev.mark_valid(page);
        self.cache[v].addr = page;
        self.cache[v].dirty = false;
        if idx == ROOT_LPN {
            let oi = self.obj_index(obj).ok_or(Fault::NotFound)?;
            self.objs[oi].root = page;
        } else {
            let r = self.slot_for(obj, ROOT_LPN)?;
            index::set_entry(&mut self.cache[r].data, idx as usize, page);
            self.cache[r].dirty = true;
        }
        Ok(())
    }

    /// Writes every dirty index page (leaves first, so roots pick up their entries).
    pub(crate) fn flush_index(&mut self) -> Result<(), FaultOf<F>> {
        loop {
            let leaf = self
                .cache
                .iter()
                .position(|s| s.used && s.dirty && s.idx != ROOT_LPN);
            let any = leaf.or_else(|| self.cache.iter().position(|s| s.used && s.dirty));
            match any {
                Some(v) => self.write_slot(v)?,
                None => return Ok(()),
            }
        }
    }

    /// The data page of `lpn`, or [`UNMAPPED`].
    pub(crate) fn index_get(&mut self, obj: u32, lpn: u32) -> Result<u32, FaultOf<F>> {
        let epp = self.entries_per_index() as u32;
        let leaf = lpn / epp;
        if leaf >= epp {
            return Ok(UNMAPPED);
        }
        let s = self.slot_for(obj, leaf)?;
        Ok(index::entry(&self.cache[s].data, (lpn % epp) as usize))
    }

    /// Maps `lpn` to `page` (or unmaps it with [`UNMAPPED`]); keeps valid counts.
    pub(crate) fn index_set(&mut self, obj: u32, lpn: u32, page: u32) -> Result<(), FaultOf<F>> {
        let epp = self.entries_per_index() as u32;
        let leaf = lpn / epp;
        if leaf >= epp {
            return Err(Fault::TooLarge);
        }
        let s = self.slot_for(obj, leaf)?;
        let e = (lpn % epp) as usize;
        let old = index::entry(&self.cache[s].data, e);
        if old == page {
            return Ok(());
        }
        index::set_entry(&mut self.cache[s].data, e, page);
        self.cache[s].dirty = true;
        self.dev.mark_invalid(old);
        if page != UNMAPPED {
            self.dev.mark_valid(page);
        }
        Ok(())
    }

    /// Unmaps the pages in `from_lpn..to_lpn`; leaves left empty are dropped.
    pub(crate) fn unmap_from(
        &mut self,
        obj: u32,
        from_lpn: u32,
        to_lpn: u32,
    ) -> Result<(), FaultOf<F>> {
        let epp = self.entries_per_index() as u32;
        let mut lpn = from_lpn;
        while lpn < to_lpn && lpn / epp < epp {
            let s = self.slot_for(obj, lpn / epp)?;
            let leaf_end = ((lpn / epp) + 1) * epp;
            let mut empty = true;
            for l in (lpn / epp) * epp..leaf_end {
                let e = (l % epp) as usize;
                let old = index::entry(&self.cache[s].data, e);
                if old == UNMAPPED {
                    continue;
                }
                if l >= from_lpn && l < to_lpn {
                    index::set_entry(&mut self.cache[s].data, e, UNMAPPED);
                    self.cache[s].dirty = true;
                    self.dev.mark_invalid(old);
                } else {
                    empty = false;
                }
            }
            if empty && self.cache[s].idx != ROOT_LPN {
                self.drop_leaf(s)?;
            }
            lpn = leaf_end;
        }
        Ok(())
    }

    /// Removes an emptied leaf from the cache, the root and the valid counts.
    fn drop_leaf(&mut self, s: usize) -> Result<(), FaultOf<F>> {
        let (obj, idx, addr) = (self.cache[s].obj, self.cache[s].idx, self.cache[s].addr);
        self.cache[s].used = false;
        self.cache[s].dirty = false;
        if addr != NONE {
            self.dev.mark_invalid(addr);
        }
        let r = self.slot_for(obj, ROOT_LPN)?;
        if index::entry(&self.cache[r].data, idx as usize) != UNMAPPED {
            index::set_entry(&mut self.cache[r].data, idx as usize, UNMAPPED);
            self.cache[r].dirty = true;
        }
        Ok(())
    }

    /// Removes an object's whole index (its data pages become invalid).
    pub(crate) fn drop_index(&mut self, obj: u32, pages: u32) -> Result<(), FaultOf<F>> {
        self.unmap_from(obj, 0, pages)?;
        let epp = self.entries_per_index();
        let r = self.slot_for(obj, ROOT_LPN)?;
        // Leaves past the size should not exist; drop any left over defensively.
        for i in 0..epp {
            let e = index::entry(&self.cache[r].data, i);
            if e != UNMAPPED {
                self.dev.mark_invalid(e);
            }
        }
        let root_addr = self.cache[r].addr;
        self.dev.mark_invalid(root_addr);
        for s in self.cache.iter_mut() {
            if s.used && s.obj == obj {
                s.used = false;
                s.dirty = false;
            }
        }
        Ok(())
    }
}
