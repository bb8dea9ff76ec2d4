//! Objects' indexes through the page cache: mapping logical pages to data pages,
//! unmapping ranges, dropping emptied leaves and whole indexes, and the direct mapping
//! of small objects (no index pages: the record maps logical pages below
//! [`DIRECT_PAGES`] itself).
//!
//! Every change keeps the block table's valid counts: a page mapped is counted valid,
//! a page unmapped or replaced is counted invalid (the old one), and an index page
//! dropped is counted invalid where it lived.

use nand_hal::{NandFlash, PageAddr};

use crate::cache::Key;
use crate::errors::Fault;
use crate::format::index::{self, ROOT_LPN, UNMAPPED};
use crate::format::table::{ObjRecord, DIRECT_PAGES, TABLE_OBJ};
use crate::io::{FaultOf, NO_PAGE};
use crate::policy::SpacePolicy;
use crate::Oftl;

impl<
        F: NandFlash,
        P: SpacePolicy,
        const PAGE: usize,
        const BLOCKS: usize,
        const CACHE: usize,
        const WBUF: usize,
        const META: usize,
        const LOG: usize,
    > Oftl<F, PAGE, BLOCKS, CACHE, WBUF, P, META, LOG>
{
    /// The data page of `lpn`, or [`UNMAPPED`].
    pub(crate) fn index_get(&mut self, obj: u32, lpn: u32) -> Result<PageAddr, FaultOf<F>> {
        if obj != TABLE_OBJ {
            let o = self.obj(obj)?;
            if o.direct {
                return Ok(o.direct_page(lpn));
            }
        }
        let epp = self.entries_per_index() as u32;
        let leaf = lpn / epp;
        if leaf >= epp {
            return Ok(UNMAPPED);
        }
        let s = self.slot_for(obj, leaf)?;
        Ok(index::entry(self.cache.data(s), (lpn % epp) as usize))
    }

    /// How many of `lpns` lie below `have` (the object's size in pages) with no page
    /// mapped: holes a write past the end or a lengthening truncate left. Programming
    /// them adds to the live data as pages past the end do, so an operation's growth
    /// counts them (an independent review filled a sparse object on a healthy part past
    /// its capacity, after which even deletes failed with `NoSpace`).
    /// Only counted near the capacity (the index lookups cost cache slots): when even
    /// all of them being holes would leave the operation, whose other growth is
    /// `growth`, well within it, they count as none.
    pub(crate) fn holes_among(
        &mut self,
        obj: u32,
        have: u64,
        growth: u64,
        lpns: impl Iterator<Item = u64> + Clone,
    ) -> Result<u64, FaultOf<F>> {
        let below = lpns.clone().filter(|&l| l < have).count() as u64;
        let margin = 2 * (below + growth) + 2 * self.dev.ppb() as u64;
        if below == 0 || self.dev.table().valid_total() + margin <= self.capacity_pages() {
            return Ok(0);
        }
        let mut n = 0;
        for l in lpns.filter(|&l| l < have) {
            if self.index_get(obj, l as u32)? == UNMAPPED {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Maps `lpn` to `page` (or unmaps it with [`UNMAPPED`]); keeps valid counts.
    pub(crate) fn index_set(
        &mut self,
        obj: u32,
        lpn: u32,
        page: PageAddr,
    ) -> Result<(), FaultOf<F>> {
        if obj != TABLE_OBJ {
            let o = self.obj(obj)?;
            if o.direct && lpn < DIRECT_PAGES {
                let old = o.direct_page(lpn);
                if old != page {
                    self.dev.mark_invalid(old);
                    if page != UNMAPPED {
                        self.dev.mark_valid(page);
                    }
                    self.obj_update(obj, |r| r.set_direct_page(lpn, page))?;
                }
                return Ok(());
            }
            if o.direct {
                if page == UNMAPPED {
                    return Ok(());
                }
                self.make_indexed(obj, &o)?;
            }
        }
        let epp = self.entries_per_index() as u32;
        let leaf = lpn / epp;
        if leaf >= epp {
            return Err(Fault::TooLarge);
        }
        let s = self.slot_for(obj, leaf)?;
        let e = (lpn % epp) as usize;
        let old = index::entry(self.cache.data(s), e);
        if old == page {
            return Ok(());
        }
        index::set_entry(self.cache.data_mut(s), e, page);
        self.dev.mark_invalid(old);
        if page != UNMAPPED {
            self.dev.mark_valid(page);
        }
        Ok(())
    }

    /// Gives direct object `o` an index holding its direct pages (already counted
    /// valid) in leaf 0, before it maps a page past them.
    fn make_indexed(&mut self, obj: u32, o: &ObjRecord) -> Result<(), FaultOf<F>> {
        self.obj_update(obj, |r| {
            r.direct = false;
            r.root = NO_PAGE;
            r.direct_more = [NO_PAGE; DIRECT_PAGES as usize - 1];
        })?;
        if (0..DIRECT_PAGES).any(|l| o.direct_page(l) != UNMAPPED) {
            let s = self.slot_for(obj, 0)?;
            for l in 0..DIRECT_PAGES {
                index::set_entry(self.cache.data_mut(s), l as usize, o.direct_page(l));
            }
        }
        Ok(())
    }

    /// Unmaps object-table page `t` (its slot and valid count are the caller's); a table
    /// leaf left empty is dropped.
    pub(crate) fn index_unmap_table_page(&mut self, t: u32) -> Result<(), FaultOf<F>> {
        let epp = self.entries_per_index() as u32;
        let l = self.slot_for_key(Key::index(TABLE_OBJ, t / epp))?;
        let e = (t % epp) as usize;
        if index::entry(self.cache.data(l), e) != UNMAPPED {
            index::set_entry(self.cache.data_mut(l), e, UNMAPPED);
        }
        if (0..epp as usize).all(|i| index::entry(self.cache.data(l), i) == UNMAPPED) {
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
                for l in from_lpn..to_lpn.min(DIRECT_PAGES) {
                    self.index_set(obj, l, UNMAPPED)?;
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
                let old = index::entry(self.cache.data(s), e);
                if old == UNMAPPED {
                    continue;
                }
                if l >= from_lpn && l < to_lpn {
                    index::set_entry(self.cache.data_mut(s), e, UNMAPPED);
                    self.dev.mark_invalid(old);
                } else {
                    empty = false;
                }
            }
            if empty && self.cache.key(s).idx != ROOT_LPN {
                self.drop_leaf(s)?;
            }
            lpn = leaf_end;
        }
        Ok(())
    }

    /// Removes an emptied leaf from the cache, the root and the valid counts.
    fn drop_leaf(&mut self, s: usize) -> Result<(), FaultOf<F>> {
        let (Key { obj, idx, .. }, addr) = (self.cache.key(s), self.cache.addr(s));
        self.cache.forget(s);
        self.dev.mark_invalid(addr);
        let r = self.slot_for(obj, ROOT_LPN)?;
        if index::entry(self.cache.data(r), idx as usize) != UNMAPPED {
            index::set_entry(self.cache.data_mut(r), idx as usize, UNMAPPED);
        }
        Ok(())
    }

    /// Removes an object's whole index (its data pages become invalid).
    pub(crate) fn drop_index(&mut self, obj: u32, pages: u32) -> Result<(), FaultOf<F>> {
        if self.obj(obj)?.direct {
            return self.unmap_from(obj, 0, DIRECT_PAGES);
        }
        self.unmap_from(obj, 0, pages)?;
        let epp = self.entries_per_index();
        let r = self.slot_for(obj, ROOT_LPN)?;
        // Leaves past the size should not exist; drop any left over defensively.
        for i in 0..epp {
            let e = index::entry(self.cache.data(r), i);
            if e != UNMAPPED {
                self.dev.mark_invalid(e);
            }
        }
        let root_addr = self.cache.addr(r);
        self.dev.mark_invalid(root_addr);
        self.cache.forget_object(obj);
        Ok(())
    }
}
