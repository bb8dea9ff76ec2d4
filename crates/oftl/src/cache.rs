//! The page cache of object-table and index pages, and the index operations on it.
//!
//! Each object has a two-level index (see [`crate::format::index`]): a root page whose
//! entries are leaf pages, and leaves whose entries are data pages. Object records live
//! in the object table ([`crate::format::table`]), the data of the internal object
//! [`TABLE_OBJ`], which has the same kind of index; the table's root address is kept
//! in RAM and in the checkpoint. Only `CACHE` pages (table pages and index pages
//! alike) are held in RAM, in one LRU pool.
//!
//! A page's address comes from its parent, which must be cached to read it:
//! object leaf <- object root <- the table page holding the object's record <- table
//! leaf <- table root <- RAM. A missing parent is loaded first (at most four levels).
//! A dirty page is written out (a new page in the index head) when it must leave the
//! cache and at every checkpoint; writing a page updates its parent (which becomes
//! dirty), so checkpoints flush in parent order: object leaves, object roots, table
//! pages, table leaves, the table root. When the eviction victim is an object root
//! whose object has a dirty cached leaf, that leaf is written and evicted instead (one
//! program either way), so a root is not reloaded and rewritten just to take a leaf's
//! new address. Pages written between checkpoints are only a cache: recovery rebuilds
//! the same state from the data and metadata pages' backpointers and ignores them.

use nand_hal::NandFlash;

use crate::errors::Fault;
use crate::format::backpointer::{Backpointer, PageKind};
use crate::format::checkpoint::NONE;
use crate::format::index::{self, ROOT_LPN, UNMAPPED};
use crate::format::table::{self, ObjRecord, REC_LEN, TABLE_OBJ};
use crate::io::FaultOf;
use crate::policy::SpacePolicy;
use crate::{Oftl, INDEX_HEAD};

/// A cached page's identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    /// An object-table page (`idx` = table page number) rather than an index page.
    pub table: bool,
    /// Owning object ([`TABLE_OBJ`] for table pages and the table's index).
    pub obj: u32,
    /// Leaf number or [`ROOT_LPN`] (index pages), table page number (table pages).
    pub idx: u32,
}

impl Key {
    pub const fn index(obj: u32, idx: u32) -> Self {
        Key {
            table: false,
            obj,
            idx,
        }
    }
    pub const fn table_page(t: u32) -> Self {
        Key {
            table: true,
            obj: TABLE_OBJ,
            idx: t,
        }
    }
    /// Flush order: a page's parent always has a higher rank.
    fn rank(&self) -> u8 {
        match (self.table, self.obj == TABLE_OBJ, self.idx == ROOT_LPN) {
            (true, _, _) => 2,
            (false, false, false) => 0,
            (false, false, true) => 1,
            (false, true, false) => 3,
            (false, true, true) => 4,
        }
    }
}

/// A page written whose parent does not know its new address yet.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InFlight {
    key: Key,
    page: u32,
    superseded: bool,
}

/// Most nested cache write-backs in flight (each is one eviction inside another's
/// parent update).
pub(crate) const MAX_INFLIGHT: usize = 24;

/// Where a page's address comes from.
enum Addr {
    /// Known: the page (or [`UNMAPPED`]).
    At(u32),
    /// The parent must be loaded first.
    Parent(Key),
}

/// Bound on load attempts for one page: each failed attempt wrote or evicted other
/// pages, and a cache of at least 4 pages always converges well within it.
const LOAD_TRIES: usize = 256;

impl<
        F: NandFlash,
        P: SpacePolicy,
        const PAGE: usize,
        const BLOCKS: usize,
        const CACHE: usize,
        const WBUF: usize,
    > Oftl<F, PAGE, BLOCKS, CACHE, WBUF, P>
{
    fn key_of(&self, s: usize) -> Key {
        let sl = &self.cache[s];
        Key {
            table: sl.table,
            obj: sl.obj,
            idx: sl.idx,
        }
    }

    fn find_slot(&self, k: Key) -> Option<usize> {
        self.cache
            .iter()
            .position(|s| s.used && s.table == k.table && s.obj == k.obj && s.idx == k.idx)
    }

    fn touch(&mut self, s: usize) {
        self.tick = self.tick.wrapping_add(1);
        self.cache[s].lru = self.tick;
    }

    pub(crate) fn records_per_page(&self) -> u32 {
        table::records_per_page(self.dev.payload)
    }

    /// The address of `k`: a write in flight, else from its cached parent (or the
    /// parent to load first).
    fn addr_of(&mut self, k: Key) -> Result<Addr, FaultOf<F>> {
        if let Some(f) = self.inflight.iter().rev().find(|f| f.key == k) {
            return Ok(Addr::At(f.page));
        }
        let parent = if k.table {
            Key::index(TABLE_OBJ, k.idx / self.entries_per_index() as u32)
        } else if k.idx != ROOT_LPN {
            Key::index(k.obj, ROOT_LPN)
        } else if k.obj == TABLE_OBJ {
            return Ok(Addr::At(self.table_root));
        } else {
            Key::table_page(k.obj / self.records_per_page())
        };
        let Some(p) = self.find_slot(parent) else {
            return Ok(Addr::Parent(parent));
        };
        self.touch(p);
        let epp = self.entries_per_index() as u32;
        Ok(Addr::At(if k.table {
            index::entry(&self.cache[p].data, (k.idx % epp) as usize)
        } else if k.idx != ROOT_LPN {
            index::entry(&self.cache[p].data, k.idx as usize)
        } else {
            let rec = self.record_in(p, k.obj)?.ok_or(Fault::NotFound)?;
            if rec.direct {
                // A direct object has no index pages: its `root` is a data page.
                return Err(Fault::Corrupted);
            }
            rec.root
        }))
    }

    /// The record of `id` in cached table page slot `s`.
    pub(crate) fn record_in(&self, s: usize, id: u32) -> Result<Option<ObjRecord>, FaultOf<F>> {
        let at = (id % self.records_per_page()) as usize * REC_LEN;
        Ok(ObjRecord::parse(
            &self.cache[s].data[at..],
            id,
            self.dev.geo.pages(),
            self.max_object_size(),
        )?)
    }

    /// A slot holding page `k`, loading it (and its missing parents) if needed.
    ///
    /// Freeing a slot may write other pages (and load their parents), which can move
    /// the wanted page, evict its parent or cache it meanwhile: the address is read
    /// again once a slot is free, and the lookup repeated.
    pub(crate) fn slot_for_key(&mut self, k: Key) -> Result<usize, FaultOf<F>> {
        for _ in 0..LOAD_TRIES {
            if let Some(s) = self.find_slot(k) {
                self.touch(s);
                return Ok(s);
            }
            if let Addr::Parent(p) = self.addr_of(k)? {
                self.slot_for_key(p)?;
                continue;
            }
            let s = self.free_slot()?;
            if self.find_slot(k).is_some() {
                continue;
            }
            if let Addr::At(addr) = self.addr_of(k)? {
                self.fill(s, k, addr)?;
                return Ok(s);
            }
        }
        Err(Fault::Exhausted)
    }

    /// A slot holding index page `idx` (leaf number or [`ROOT_LPN`]) of `obj`.
    pub(crate) fn slot_for(&mut self, obj: u32, idx: u32) -> Result<usize, FaultOf<F>> {
        self.slot_for_key(Key::index(obj, idx))
    }

    fn fill(&mut self, s: usize, k: Key, addr: u32) -> Result<(), FaultOf<F>> {
        if addr == UNMAPPED {
            self.cache[s].data.fill(0xFF);
        } else {
            let payload = self.dev.payload as usize;
            let (kind, lpn) = if k.table {
                (PageKind::Table, k.idx)
            } else {
                (PageKind::Index, k.idx)
            };
            self.dev.read_payload(
                addr,
                0,
                &mut self.cache[s].data[..payload],
                Some((kind, k.obj, lpn)),
            )?;
            if k.table {
                table::validate(
                    &self.cache[s].data,
                    k.idx,
                    self.records_per_page(),
                    self.dev.geo.pages(),
                    self.max_object_size(),
                )?;
            } else {
                index::validate(
                    &self.cache[s].data,
                    self.entries_per_index(),
                    self.dev.geo.pages(),
                )?;
            }
        }
        let sl = &mut self.cache[s];
        sl.used = true;
        sl.dirty = false;
        sl.table = k.table;
        sl.obj = k.obj;
        sl.idx = k.idx;
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
            let vk = self.key_of(v);
            if !vk.table && vk.idx == ROOT_LPN {
                // Write one of the object's dirty leaves while its root is still cached:
                // evicting the root first would mean reloading (and rewriting) it when
                // the leaf goes.
                if let Some(l) = self.cache.iter().position(|s| {
                    s.used && s.dirty && !s.table && s.obj == vk.obj && s.idx != ROOT_LPN
                }) {
                    // One program per freed slot, as for any dirty victim: the root is
                    // cached, so writing the leaf loads nothing, and the leaf's slot
                    // (clean now) is the one freed.
                    self.dev.stats.index_evictions += 1;
                    let lk = self.key_of(l);
                    self.write_slot(l)?;
                    if self.find_slot(lk) == Some(l) && !self.cache[l].dirty {
                        self.cache[l].used = false;
                        return Ok(l);
                    }
                    continue;
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

    /// Writes the dirty page in slot `v` to flash and points its parent at the new
    /// copy.
    ///
    /// Updating the parent may load pages, and loading may evict this page (clean
    /// now) and load it again before the parent knows the new address: while the
    /// update is in flight, [`Oftl::addr_of`] answers the new address from `inflight`.
    /// If the page is written again meanwhile (a nested write that updates the
    /// parent itself), this older write leaves the parent alone.
    pub(crate) fn write_slot(&mut self, v: usize) -> Result<(), FaultOf<F>> {
        if self.inflight.is_full() {
            // Checked before programming: a page written whose parent cannot learn its
            // new address would be reloaded stale.
            return Err(Fault::Exhausted);
        }
        let k = self.key_of(v);
        let old = self.cache[v].addr;
        let kind = if k.table {
            PageKind::Table
        } else {
            PageKind::Index
        };
        let mut bp = Backpointer::single(kind, k.obj, k.idx, self.dev.payload as u16);
        // Table and index pages never close a transaction: recovery ignores them.
        bp.commit = false;
        let (page, _) = self
            .dev
            .program(INDEX_HEAD, &mut self.cache[v].data, bp, false, None)?;
        self.dev.mark_invalid(old);
        self.dev.mark_valid(page);
        self.cache[v].addr = page;
        self.cache[v].dirty = false;
        for f in self.inflight.iter_mut().filter(|f| f.key == k) {
            f.superseded = true;
        }
        self.inflight
            .push(InFlight {
                key: k,
                page,
                superseded: false,
            })
            .map_err(|_| Fault::Exhausted)?;
        let r = self.set_parent_entry(k, page);
        if let Some(i) = self
            .inflight
            .iter()
            .rposition(|f| f.key == k && f.page == page)
        {
            self.inflight.remove(i);
        }
        r
    }

    /// Points `k`'s parent at `page`, dirtying it, unless a newer write of `k` did.
    fn set_parent_entry(&mut self, k: Key, page: u32) -> Result<(), FaultOf<F>> {
        let epp = self.entries_per_index() as u32;
        let parent = if k.table {
            Key::index(TABLE_OBJ, k.idx / epp)
        } else if k.idx != ROOT_LPN {
            Key::index(k.obj, ROOT_LPN)
        } else if k.obj == TABLE_OBJ {
            self.table_root = page;
            return Ok(());
        } else {
            Key::table_page(k.obj / self.records_per_page())
        };
        let p = self.slot_for_key(parent)?;
        let superseded = self
            .inflight
            .iter()
            .rev()
            .find(|f| f.key == k && f.page == page)
            .is_none_or(|f| f.superseded);
        if superseded {
            return Ok(());
        }
        if k.table {
            index::set_entry(&mut self.cache[p].data, (k.idx % epp) as usize, page);
        } else if k.idx != ROOT_LPN {
            index::set_entry(&mut self.cache[p].data, k.idx as usize, page);
        } else {
            let mut rec = self.record_in(p, k.obj)?.ok_or(Fault::NotFound)?;
            rec.root = page;
            let at = (k.obj % self.records_per_page()) as usize * REC_LEN;
            self.cache[p].data[at..at + REC_LEN].copy_from_slice(&rec.encode());
        }
        self.cache[p].dirty = true;
        Ok(())
    }

    /// Writes every dirty page, children before parents, so parents pick up their
    /// entries.
    pub(crate) fn flush_index(&mut self) -> Result<(), FaultOf<F>> {
        loop {
            let next = (0..CACHE)
                .filter(|&s| self.cache[s].used && self.cache[s].dirty)
                .min_by_key(|&s| self.key_of(s).rank());
            match next {
                Some(v) => self.write_slot(v)?,
                None => return Ok(()),
            }
        }
    }

    /// The data page of `lpn`, or [`UNMAPPED`].
    pub(crate) fn index_get(&mut self, obj: u32, lpn: u32) -> Result<u32, FaultOf<F>> {
        if obj != TABLE_OBJ {
            let o = self.obj(obj)?;
            if o.direct {
                return Ok(if lpn == 0 { o.root } else { UNMAPPED });
            }
        }
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
        if obj != TABLE_OBJ {
            let o = self.obj(obj)?;
            if o.direct && lpn == 0 {
                if o.root != page {
                    self.dev.mark_invalid(o.root);
                    if page != UNMAPPED {
                        self.dev.mark_valid(page);
                    }
                    self.obj_update(obj, |r| r.root = page)?;
                }
                return Ok(());
            }
            if o.direct {
                if page == UNMAPPED {
                    return Ok(());
                }
                self.make_indexed(obj, o.root)?;
            }
        }
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

    /// Gives a direct object an index holding its page 0 (`first`, already counted
    /// valid), before it maps a second page.
    fn make_indexed(&mut self, obj: u32, first: u32) -> Result<(), FaultOf<F>> {
        self.obj_update(obj, |r| {
            r.direct = false;
            r.root = NONE;
        })?;
        if first != UNMAPPED {
            let s = self.slot_for(obj, 0)?;
            index::set_entry(&mut self.cache[s].data, 0, first);
            self.cache[s].dirty = true;
        }
        Ok(())
    }

    /// Unmaps object-table page `t` (its slot and valid count are the caller's); a table
    /// leaf left empty is dropped.
    pub(crate) fn index_unmap_table_page(&mut self, t: u32) -> Result<(), FaultOf<F>> {
        let epp = self.entries_per_index() as u32;
        let l = self.slot_for_key(Key::index(TABLE_OBJ, t / epp))?;
        let e = (t % epp) as usize;
        if index::entry(&self.cache[l].data, e) != UNMAPPED {
            index::set_entry(&mut self.cache[l].data, e, UNMAPPED);
            self.cache[l].dirty = true;
        }
        if (0..epp as usize).all(|i| index::entry(&self.cache[l].data, i) == UNMAPPED) {
            self.drop_leaf(l)?;
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
        if obj != TABLE_OBJ {
            let o = self.obj(obj)?;
            if o.direct {
                if from_lpn == 0 && to_lpn > 0 {
                    self.index_set(obj, 0, UNMAPPED)?;
                }
                return Ok(());
            }
        }
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
        if self.obj(obj)?.direct {
            return self.index_set(obj, 0, UNMAPPED);
        }
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
            if s.used && !s.table && s.obj == obj {
                s.used = false;
                s.dirty = false;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use nand_hal::sim::{profile, FaultPlan, HeapStorage, SimNand};

    use super::Key;
    use crate::{Config, ObjKind, Oftl};

    type Sim = SimNand<HeapStorage>;
    type Fs<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 2>;

    fn cfg() -> Config {
        Config {
            window_blocks: 8,
            format_id: 1,
            ..Default::default()
        }
    }

    fn reads(fs: &Fs) -> u64 {
        fs.flash().counters().reads
    }

    #[test]
    fn a_table_page_is_read_once_then_served_from_its_slot() {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(1));
        let mut fs = Fs::format(&mut sim, cfg()).unwrap();
        let ids: Vec<u32> = (0..3)
            .map(|_| fs.create(ObjKind::Object).unwrap())
            .collect();
        fs.unmount().unwrap();
        let mut fs = Fs::mount(&mut sim).unwrap();
        assert!(fs.cache.iter().all(|s| !s.used), "a mount caches nothing");
        let r0 = reads(&fs);
        assert_eq!(fs.obj(ids[0]).unwrap().id, ids[0]);
        let loaded = reads(&fs) - r0;
        assert!(
            loaded >= 1,
            "the table page (and its index pages) were read"
        );
        let r1 = reads(&fs);
        for &id in &ids {
            assert_eq!(fs.obj(id).unwrap().id, id);
        }
        assert_eq!(reads(&fs), r1, "records of one table page: no read");
        let s = fs.find_slot(Key::table_page(0)).expect("cached");
        assert!(!fs.cache[s].dirty, "a lookup dirties nothing");
    }

    #[test]
    fn evicted_dirty_pages_are_written_back_and_found_again() {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(2));
        let mut fs = Fs::format(&mut sim, cfg()).unwrap();
        // Records over five table pages (64 per page): with the table's index pages,
        // more than the 4 slots hold.
        let per = fs.records_per_page();
        let mut ids = Vec::new();
        for _ in 0..4 * per + 10 {
            ids.push(fs.create(ObjKind::Object).unwrap());
        }
        // Changes to records on every table page in turn keep more pages dirty than
        // the slots hold: some are written back before the next checkpoint.
        let evictions = fs.stats().index_evictions;
        for round in 0..3u8 {
            for &id in ids.iter().step_by(per as usize) {
                fs.set_attrs(id, &[round; crate::ATTR_LEN]).unwrap();
            }
        }
        assert!(
            fs.stats().index_evictions > evictions,
            "the cache overflowed"
        );
        assert!(fs.cache.iter().filter(|s| s.used).count() <= 4);
        assert!(fs.inflight.is_empty(), "no write-back left half done");
        for &id in ids.iter().step_by(37) {
            assert_eq!(fs.obj(id).unwrap().id, id);
        }
        // A clean eviction programs nothing.
        fs.sync().unwrap();
        assert!(
            fs.cache.iter().all(|s| !s.used || !s.dirty),
            "sync wrote every page back"
        );
        let programs = fs.flash().counters().programs;
        let evictions = fs.stats().index_evictions;
        for &id in ids.iter().step_by(11) {
            assert_eq!(fs.obj(id).unwrap().id, id);
        }
        assert_eq!(fs.flash().counters().programs, programs);
        assert_eq!(fs.stats().index_evictions, evictions);
        // Every record survives a remount.
        fs.unmount().unwrap();
        let mut fs = Fs::mount(&mut sim).unwrap();
        for &id in &ids {
            assert_eq!(fs.obj(id).unwrap().id, id);
        }
        for &id in ids.iter().step_by(per as usize) {
            assert_eq!(fs.attrs(id).unwrap().user, [2; crate::ATTR_LEN]);
        }
    }

    #[test]
    fn flush_order_puts_every_parent_after_its_children() {
        let leaf = Key::index(5, 0);
        let root = Key::index(5, crate::format::index::ROOT_LPN);
        let table = Key::table_page(0);
        let table_leaf = Key::index(crate::format::table::TABLE_OBJ, 0);
        let table_root = Key::index(
            crate::format::table::TABLE_OBJ,
            crate::format::index::ROOT_LPN,
        );
        let ranks: Vec<u8> = [leaf, root, table, table_leaf, table_root]
            .iter()
            .map(Key::rank)
            .collect();
        assert_eq!(ranks, [0, 1, 2, 3, 4]);
    }
}
