//! Write-back buffering: `WBUF` page-sized buffers holding data pages of objects.
//!
//! A [`Oftl::write`] that stays inside one page lands in a buffer (the page's current
//! contents are read in first unless the write covers it whole); nothing is programmed.
//! A buffered page is programmed
//!
//! - when a write reaches the end of the page (an append stream's page is complete),
//! - when its buffer is needed for another page (least recently used goes first),
//! - at [`Oftl::flush`] of its object, [`Oftl::sync`], [`Oftl::unmount`],
//! - before any synchronous operation on its object (`transact`, `truncate`,
//!   `set_attrs`, a write spanning pages; `delete` and `truncate` to 0 drop it instead).
//!
//! # Invariants
//!
//! - Buffers are an overlay over the committed state: the object table, index and
//!   checkpoints only ever describe committed pages, so a checkpoint or a GC pass in
//!   between never exposes buffered data, and a crash loses exactly the buffers.
//! - Programming any buffered page of an object programs *all* of that object's dirty
//!   pages as one transaction (commit flag on the last), with the size the buffered
//!   writes imply. Since every synchronous operation on the object first does the same,
//!   the committed state of each object is always its write history up to some point:
//!   a crash can lose only a suffix of an object's unflushed writes, never an earlier
//!   write while a later one survives. Objects are independent: flushing one never
//!   waits for another's buffers.
//! - A dirty page image holds zeros past the size its writes imply (like every mapped
//!   page), so reads of the overlay and of the committed page agree after the flush.
//! - After a flush the buffer stays as a clean cached copy: an append to a flushed
//!   partial page modifies it in RAM and programs a new copy at the next flush (the old
//!   copy is invalidated), so a flush costs at most one program per dirty page.
//! - A whole-page [`Oftl::read`] of a page no buffer holds keeps it as a clean copy, in
//!   a free buffer or the least recently used clean one (never a dirty one: a read
//!   programs nothing). A transaction forgets the clean copies of the pages it rewrites
//!   (all of an object's for a truncate or delete) once the object's dirty pages are
//!   programmed, so every clean copy is the committed page.

use nand_hal::{NandFlash, PageAddr};

use crate::errors::{Fault, WriteError};
use crate::format::backpointer::{Backpointer, PageKind, Placement};
use crate::format::checkpoint::ObjKind;
use crate::format::index::UNMAPPED;
use crate::format::meta::MetaRecord;
use crate::format::table::ObjRecord;
use crate::io::FaultOf;
use crate::policy::SpacePolicy;
use crate::space::Room;
use crate::txn::TxOp;
use crate::{ObjectId, Oftl, DATA_HEAD};

pub(crate) use pages::WriteBuffers;

/// The buffers themselves and their LRU clock, changed only through named events (the
/// code above decides when; this module keeps each buffer's state consistent).
mod pages {
    /// One write-back buffer.
    struct WPage<const PAGE: usize> {
        used: bool,
        /// Holds writes not yet programmed (otherwise a clean copy of the committed page).
        dirty: bool,
        obj: u32,
        lpn: u32,
        /// Bytes of the page the buffered writes reach (0 when clean): the object is
        /// at least `lpn * payload + end` bytes long. A `u16`, not the size itself, so a
        /// buffer aligns to 4 bytes on a 32-bit MCU.
        end: u16,
        lru: u32,
        /// The page's payload (first `payload` bytes used).
        data: [u8; PAGE],
    }

    impl<const PAGE: usize> WPage<PAGE> {
        const EMPTY: Self = WPage {
            used: false,
            dirty: false,
            obj: 0,
            lpn: 0,
            end: 0,
            lru: 0,
            data: [0; PAGE],
        };
    }

    /// `WBUF` page buffers and the clock that orders their use.
    pub(crate) struct WriteBuffers<const PAGE: usize, const WBUF: usize> {
        pages: [WPage<PAGE>; WBUF],
        tick: u32,
    }

    impl<const PAGE: usize, const WBUF: usize> WriteBuffers<PAGE, WBUF> {
        /// Every buffer free.
        pub const EMPTY: Self = WriteBuffers {
            pages: [WPage::EMPTY; WBUF],
            tick: 0,
        };

        /// Back to [`WriteBuffers::EMPTY`], in place.
        pub fn reset(&mut self) {
            for w in self.pages.iter_mut() {
                w.used = false;
                w.dirty = false;
                w.obj = 0;
                w.lpn = 0;
                w.end = 0;
                w.lru = 0;
                w.data.fill(0);
            }
            self.tick = 0;
        }

        /// The buffer holding `(obj, lpn)`.
        pub fn find(&self, obj: u32, lpn: u32) -> Option<usize> {
            self.pages
                .iter()
                .position(|w| w.used && w.obj == obj && w.lpn == lpn)
        }

        pub fn data(&self, s: usize) -> &[u8; PAGE] {
            &self.pages[s].data
        }

        pub fn data_mut(&mut self, s: usize) -> &mut [u8; PAGE] {
            &mut self.pages[s].data
        }

        /// Whether buffer `s` holds writes not yet programmed.
        pub fn is_dirty(&self, s: usize) -> bool {
            self.pages[s].used && self.pages[s].dirty
        }

        /// The object of buffer `s`.
        pub fn obj(&self, s: usize) -> u32 {
            self.pages[s].obj
        }

        /// The clock moves on (a use of some buffer).
        pub fn advance(&mut self) {
            self.tick = self.tick.wrapping_add(1);
        }

        /// Buffer `s` was used now.
        pub fn touch(&mut self, s: usize) {
            self.pages[s].lru = self.tick;
        }

        /// A free buffer, else the least recently used one (by age: wrap-aware).
        pub fn free_or_oldest(&self) -> usize {
            match self.pages.iter().position(|w| !w.used) {
                Some(s) => s,
                None => {
                    let tick = self.tick;
                    (0..WBUF)
                        .max_by_key(|&i| tick.wrapping_sub(self.pages[i].lru))
                        .unwrap_or(0)
                }
            }
        }

        /// A free buffer, else the least recently used clean one.
        pub fn free_or_oldest_clean(&self) -> Option<usize> {
            match self.pages.iter().position(|w| !w.used) {
                Some(s) => Some(s),
                None => {
                    let tick = self.tick;
                    (0..WBUF)
                        .filter(|&i| !self.pages[i].dirty)
                        .max_by_key(|&i| tick.wrapping_sub(self.pages[i].lru))
                }
            }
        }

        /// Buffer `s` no longer stands for any page (its contents are not committed).
        pub fn release(&mut self, s: usize) {
            self.pages[s].used = false;
        }

        /// Buffer `s` now holds a clean copy of `(obj, lpn)` (its data already in
        /// place), used now.
        pub fn hold_clean(&mut self, s: usize, obj: u32, lpn: u32) {
            let w = &mut self.pages[s];
            w.used = true;
            w.dirty = false;
            w.obj = obj;
            w.lpn = lpn;
            w.end = 0;
            w.lru = self.tick;
        }

        /// `data` was written into buffer `s` at `col` (within its page).
        pub fn wrote(&mut self, s: usize, col: usize, data: &[u8]) {
            let w = &mut self.pages[s];
            w.data[col..col + data.len()].copy_from_slice(data);
            w.dirty = true;
            w.end = w.end.max((col + data.len()) as u16);
        }

        /// Buffer `s`'s page was programmed: it stays as a clean copy.
        pub fn programmed(&mut self, s: usize) {
            self.pages[s].dirty = false;
            self.pages[s].end = 0;
        }

        /// `obj`'s dirty pages as `(lpn, buffer)`.
        pub fn dirty_of(&self, obj: u32) -> heapless::Vec<(u32, u8), WBUF> {
            let mut v = heapless::Vec::new();
            for (i, w) in self.pages.iter().enumerate() {
                if w.used && w.dirty && w.obj == obj {
                    let _ = v.push((w.lpn, i as u8));
                }
            }
            v
        }

        /// An object with dirty pages.
        pub fn any_dirty(&self) -> Option<u32> {
            self.pages.iter().find(|w| w.used && w.dirty).map(|w| w.obj)
        }

        /// `obj`'s size with its buffered writes, over the committed `size`, with
        /// `payload` bytes per page.
        pub fn pending_size(&self, obj: u32, size: u64, payload: u64) -> u64 {
            self.pages
                .iter()
                .filter(|w| w.used && w.dirty && w.obj == obj)
                .fold(size, |s, w| s.max(w.lpn as u64 * payload + w.end as u64))
        }

        /// Forgets the clean copies of `obj`'s pages `first..=last`.
        pub fn forget(&mut self, obj: u32, first: u32, last: u32) {
            for w in self.pages.iter_mut() {
                if w.used && w.obj == obj && (first..=last).contains(&w.lpn) {
                    debug_assert!(!w.dirty);
                    w.used = false;
                }
            }
        }

        /// Forgets `obj`'s buffers, dirty ones included.
        pub fn drop_obj(&mut self, obj: u32) {
            for w in self.pages.iter_mut().filter(|w| w.obj == obj) {
                w.used = false;
                w.dirty = false;
            }
        }

        /// Whether buffer `s` stands for a page (tests).
        #[cfg(test)]
        pub fn used(&self, s: usize) -> bool {
            self.pages[s].used
        }

        /// The size buffer `s`'s writes imply, with `payload` bytes per page (tests).
        #[cfg(test)]
        pub fn end(&self, s: usize, payload: u64) -> u64 {
            self.pages[s].lpn as u64 * payload + self.pages[s].end as u64
        }
    }
}

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
    /// Writes `data` at `offset`. All-or-nothing after a power cut; durable once
    /// [`flush`](Self::flush) or [`sync`](Self::sync) returns (or any synchronous
    /// operation on the object, see the crate docs). A write inside one page is
    /// buffered; a write spanning pages is committed before it returns.
    pub fn write(
        &mut self,
        obj: ObjectId,
        offset: u64,
        data: &[u8],
    ) -> Result<(), WriteError<F::Error>> {
        self.write_inner(obj, offset, data)
            .map_err(|e| self.fail(e))
    }

    fn write_inner(&mut self, obj: ObjectId, offset: u64, data: &[u8]) -> Result<(), FaultOf<F>> {
        self.check_writable()?;
        if self.obj(obj)?.kind != ObjKind::Object {
            return Err(Fault::WrongKind);
        }
        if data.is_empty() {
            return Ok(());
        }
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or(Fault::TooLarge)?;
        if end > self.max_object_size() {
            return Err(Fault::TooLarge);
        }
        let p = self.dev.payload() as u64;
        let lpn = offset / p;
        if WBUF == 0 || (end - 1) / p != lpn {
            self.flush_obj(obj, true)?;
            return self.transact_inner(&[TxOp::Write { obj, offset, data }], false);
        }
        let lpn = lpn as u32;
        let col = (offset % p) as usize;
        let fresh = self.wbuf_find(obj, lpn).is_none();
        let s = self.wbuf_load(obj, lpn, col == 0 && data.len() as u64 == p)?;
        if end % p == 0 {
            // The write completes the page, which is then programmed with the object's
            // other dirty pages: make room first, so a `NoSpace` leaves the buffer (and
            // the object) as it was rather than holding a write reported as failed.
            let have = self.obj(obj)?.size.div_ceil(p);
            let (mut n, mut growth) = (1u32, (lpn as u64 >= have) as u64);
            let dirty = self.wbuf.dirty_of(obj);
            for &(l, _) in dirty.iter() {
                if l != lpn {
                    n += 1;
                    growth += (l as u64 >= have) as u64;
                }
            }
            let others = dirty
                .iter()
                .map(|&(l, _)| l as u64)
                .filter(|&l| l != lpn as u64);
            let all = others.chain(core::iter::once(lpn as u64));
            let holes = self.holes_among(obj, have, growth, all);
            let r = holes.and_then(|h| self.prepare(n, 1, growth + h, Room::Grow));
            if let Err(e) = r {
                if fresh {
                    // Loaded for this write only (for a whole-page write, not even
                    // filled): it must not stand for the page.
                    self.wbuf.release(s);
                }
                return Err(e);
            }
        }
        self.wbuf.wrote(s, col, data);
        if end % p == 0 {
            // The page is complete: program it now (room was made above).
            self.flush_obj_with(obj, false, true)?;
        }
        Ok(())
    }

    /// The buffer holding `(obj, lpn)`, loading the committed page into the least
    /// recently used buffer (flushing its object first if it is dirty). With `whole`
    /// the caller overwrites the whole payload, so nothing is read.
    fn wbuf_load(&mut self, obj: u32, lpn: u32, whole: bool) -> Result<usize, FaultOf<F>> {
        self.wbuf.advance();
        if let Some(s) = self.wbuf_find(obj, lpn) {
            self.wbuf.touch(s);
            return Ok(s);
        }
        let s = self.wbuf.free_or_oldest();
        if self.wbuf.is_dirty(s) {
            self.flush_obj(self.wbuf.obj(s), false)?;
        }
        self.wbuf.release(s);
        if !whole {
            let old = self.index_get(obj, lpn)?;
            if old == UNMAPPED {
                let p = self.dev.payload() as usize;
                self.wbuf.data_mut(s)[..p].fill(0);
            } else {
                self.wbuf_fill(s, obj, lpn, old)?;
            }
        }
        self.wbuf.hold_clean(s, obj, lpn);
        Ok(s)
    }

    /// A buffer a read of `n` bytes may keep its page in: only for a whole page, a
    /// free buffer or else the least recently used clean one; never a dirty one (a read
    /// programs nothing). The buffer is marked unused until [`Oftl::wbuf_fill`] succeeds.
    pub(crate) fn wbuf_spare(&mut self, n: usize) -> Option<usize> {
        if n != self.dev.payload() as usize {
            return None;
        }
        let s = self.wbuf.free_or_oldest_clean();
        if let Some(s) = s {
            self.wbuf.release(s);
        }
        s
    }

    /// Reads `(obj, lpn)`, committed at `page`, into buffer `s` as a clean copy (zeros
    /// past the committed size, like [`Oftl::wbuf_load`]).
    pub(crate) fn wbuf_fill(
        &mut self,
        s: usize,
        obj: u32,
        lpn: u32,
        page: PageAddr,
    ) -> Result<(), FaultOf<F>> {
        let p = self.dev.payload() as usize;
        let expect = Some((PageKind::Data, obj, lpn));
        if self.dev.placement() == Placement::InBand {
            let aside = self.scratch.aside_mut()?;
            self.dev.read_payload(page, 0, &mut aside[..p], expect)?;
            self.wbuf.data_mut(s)[..p].copy_from_slice(&aside[..p]);
        } else {
            self.dev
                .read_payload(page, 0, &mut self.wbuf.data_mut(s)[..p], expect)?;
        }
        let size = self.obj(obj)?.size;
        let keep = size.saturating_sub(lpn as u64 * p as u64).min(p as u64) as usize;
        self.wbuf.data_mut(s)[keep..p].fill(0);
        self.wbuf.advance();
        self.wbuf.hold_clean(s, obj, lpn);
        Ok(())
    }

    pub(crate) fn wbuf_find(&self, obj: u32, lpn: u32) -> Option<usize> {
        self.wbuf.find(obj, lpn)
    }

    /// The object's size including buffered writes.
    pub(crate) fn pending_size(&self, o: &ObjRecord) -> u64 {
        self.wbuf
            .pending_size(o.id, o.size, self.dev.payload() as u64)
    }

    /// Forgets the clean copies of `obj`'s pages `first..=last` (a transaction is about
    /// to rewrite them; its dirty pages were programmed first).
    pub(crate) fn wbuf_forget(&mut self, obj: u32, first: u32, last: u32) {
        self.wbuf.forget(obj, first, last);
    }

    /// Forgets `obj`'s buffers, dirty ones included (delete, truncate to 0).
    pub(crate) fn wbuf_drop(&mut self, obj: u32) {
        self.wbuf.drop_obj(obj);
    }

    /// Programs all of `obj`'s dirty pages as one transaction; with `drop`, forgets
    /// its buffers afterwards (before an operation that changes committed pages).
    pub(crate) fn flush_obj(&mut self, obj: u32, drop: bool) -> Result<(), FaultOf<F>> {
        self.flush_obj_with(obj, drop, false)
    }

    /// [`Oftl::flush_obj`]; `prepared` when the caller has just made room for exactly
    /// these pages with `prepare` (nothing programmed since).
    fn flush_obj_with(&mut self, obj: u32, drop: bool, prepared: bool) -> Result<(), FaultOf<F>> {
        self.program_dirty(obj, prepared, None)?;
        if drop {
            self.wbuf_drop(obj);
        }
        Ok(())
    }

    /// Programs `obj`'s dirty buffered pages as one transaction, with `meta` (its size
    /// set to the object's size after the pages) as the transaction's last page when
    /// given. Nothing is programmed when there is neither.
    fn program_dirty(
        &mut self,
        obj: u32,
        prepared: bool,
        meta: Option<MetaRecord>,
    ) -> Result<(), FaultOf<F>> {
        let mut dirty = self.wbuf.dirty_of(obj);
        if dirty.is_empty() && meta.is_none() {
            return Ok(());
        }
        crate::mount::sort_small(&mut dirty, |a, b| a < b);
        let o = self.obj(obj)?;
        let p = self.dev.payload() as u64;
        let size = self.pending_size(&o);
        let have = o.size.div_ceil(p);
        let growth = dirty.iter().filter(|(l, _)| *l as u64 >= have).count() as u64;
        let total = dirty.len() as u32 + meta.is_some() as u32;
        if !prepared {
            let lpns = dirty.iter().map(|&(l, _)| l as u64);
            let holes = self.holes_among(obj, have, growth, lpns)?;
            self.prepare(total, 1, growth + holes, Room::Grow)?;
        }
        let first = self.dev.heads().next_seq(DATA_HEAD);
        for (k, &(lpn, s)) in dirty.iter().enumerate() {
            let s = s as usize;
            let pu = p as usize;
            self.scratch.page_mut()[..pu].copy_from_slice(&self.wbuf.data(s)[..pu]);
            self.scratch.page_mut()[pu..].fill(0xFF);
            let start = lpn as u64 * p;
            let valid = size.saturating_sub(start).min(p) as u16;
            let mut bp = Backpointer::single(PageKind::Data, obj, lpn, valid);
            bp.commit = meta.is_none() && k + 1 == dirty.len();
            let (page, bp) =
                self.dev
                    .program(DATA_HEAD, self.scratch.page_mut(), bp, false, Some(first))?;
            self.apply_data(&bp, page)?;
            self.wbuf.programmed(s);
        }
        if let Some(mut rec) = meta {
            rec.size = self.obj(obj)?.size;
            self.write_meta(&rec, Some((first, true)))?;
        }
        Ok(())
    }

    /// Flushes every object's buffers.
    pub(crate) fn flush_all(&mut self) -> Result<(), FaultOf<F>> {
        while let Some(obj) = self.wbuf.any_dirty() {
            self.flush_obj(obj, false)?;
        }
        Ok(())
    }

    /// Forgets `obj`'s writes still in write-back buffers: the object reads (and its
    /// size is) as if they had not been made. Writes that buffer pressure already
    /// programmed stay (writes may become durable before [`Oftl::flush`]). Changes
    /// nothing on flash; for a layer above whose commit of those writes failed and was
    /// reported (they were never acknowledged), which must not leave them for a later
    /// flush or the unmount to trip on.
    pub fn discard(&mut self, obj: ObjectId) {
        self.wbuf_drop(obj);
    }

    /// Makes `obj`'s writes durable: programs its buffered pages (one transaction, at
    /// most one program per dirty page). Costs nothing if none are dirty.
    pub fn flush(&mut self, obj: ObjectId) -> Result<(), WriteError<F::Error>> {
        let r = self.check_usable().and_then(|()| {
            self.obj(obj)?;
            self.flush_obj(obj, false)
        });
        r.map_err(|e| self.fail(e))
    }

    /// [`Oftl::flush`] and [`Oftl::set_attrs`] as one transaction: `obj`'s buffered
    /// pages and a metadata page with the new user attributes are durable together or
    /// not at all (a layer above can stamp what the flushed bytes contain, e.g. the
    /// last log record they include).
    pub fn flush_with_attrs(
        &mut self,
        obj: ObjectId,
        attrs: &[u8; crate::ATTR_LEN],
    ) -> Result<(), WriteError<F::Error>> {
        let r = self.check_writable().and_then(|()| {
            let o = self.obj(obj)?;
            if o.kind != ObjKind::Object {
                return Err(Fault::WrongKind);
            }
            let mut rec = self.load_meta(&o)?;
            rec.attrs = *attrs;
            self.program_dirty(obj, false, Some(rec))
        });
        r.map_err(|e| self.fail(e))
    }

    /// Copies buffered bytes of `(obj, lpn)` at `col` into `out`, if the page is
    /// buffered.
    pub(crate) fn wbuf_read(&mut self, obj: u32, lpn: u32, col: usize, out: &mut [u8]) -> bool {
        match self.wbuf_find(obj, lpn) {
            Some(s) => {
                self.wbuf.advance();
                self.wbuf.touch(s);
                out.copy_from_slice(&self.wbuf.data(s)[col..col + out.len()]);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use nand_hal::sim::{profile, FaultPlan, HeapStorage, SimNand};

    use crate::format::index::UNMAPPED;
    use crate::io::Scan;
    use crate::{Config, ObjKind, Oftl};

    type Sim = SimNand<HeapStorage>;
    type Fs<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 2>;

    fn store(sim: &mut Sim) -> Fs<'_> {
        let cfg = Config {
            window_blocks: 8,
            format_id: 1,
            ..Default::default()
        };
        Fs::formatted(sim, cfg).unwrap()
    }

    fn programs(fs: &Fs) -> u64 {
        fs.flash().counters().programs
    }

    /// The backpointer of `obj`'s committed logical page `lpn`.
    fn committed(fs: &mut Fs, obj: u32, lpn: u32) -> crate::format::backpointer::Backpointer {
        let page = fs.index_get(obj, lpn).unwrap();
        assert_ne!(page, UNMAPPED, "page {lpn} of {obj} is committed");
        match fs.dev.scan_read(page).unwrap() {
            Scan::Bp(bp) => bp,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_write_inside_a_page_is_buffered_and_read_from_ram() {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(1));
        let mut fs = store(&mut sim);
        let o = fs.create(ObjKind::Object).unwrap();
        let before = programs(&fs);
        fs.write(o, 100, &[7; 64]).unwrap();
        assert_eq!(programs(&fs), before, "nothing programmed");
        let s = fs.wbuf_find(o, 0).expect("buffered");
        assert!(fs.wbuf.is_dirty(s));
        assert_eq!(
            fs.wbuf.end(s, fs.payload() as u64),
            164,
            "the size the write implies"
        );
        assert_eq!(
            &fs.wbuf.data(s)[..100],
            &[0; 100][..],
            "zeros before the write"
        );
        assert_eq!(fs.index_get(o, 0).unwrap(), UNMAPPED, "nothing committed");
        let reads = fs.flash().counters().reads;
        let mut b = [0u8; 64];
        assert_eq!(fs.read(o, 100, &mut b).unwrap(), 64);
        assert_eq!(b, [7; 64]);
        assert_eq!(fs.size(o).unwrap(), 164);
        assert_eq!(fs.flash().counters().reads, reads, "served from the buffer");
    }

    #[test]
    fn flush_programs_the_objects_dirty_pages_as_one_transaction() {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(2));
        let mut fs = store(&mut sim);
        let o = fs.create(ObjKind::Object).unwrap();
        fs.write(o, 0, &[1; 64]).unwrap();
        fs.write(o, 2048, &[2; 64]).unwrap();
        let before = programs(&fs);
        fs.flush(o).unwrap();
        assert_eq!(programs(&fs) - before, 2, "one program per dirty page");
        let (first, last) = (committed(&mut fs, o, 0), committed(&mut fs, o, 1));
        assert!(
            !first.commit && last.commit,
            "the commit flag on the last page only"
        );
        assert_eq!(last.seq, first.seq + 1, "consecutive in the data head");
        assert_eq!(last.tx_delta, 1, "the last page points back to the first");
        for s in 0..2 {
            assert!(
                fs.wbuf.used(s) && !fs.wbuf.is_dirty(s),
                "both stay as clean copies"
            );
        }
        let before = programs(&fs);
        fs.flush(o).unwrap();
        assert_eq!(programs(&fs), before, "nothing dirty: nothing programmed");
    }

    #[test]
    fn a_needed_buffer_evicts_the_least_recently_used_objects_pages_only() {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(3));
        let mut fs = store(&mut sim);
        let a = fs.create(ObjKind::Object).unwrap();
        let b = fs.create(ObjKind::Object).unwrap();
        fs.write(a, 0, &[1; 64]).unwrap();
        fs.write(b, 0, &[2; 64]).unwrap();
        let before = programs(&fs);
        // A third page needs a buffer: `a`'s page 0, least recently used, goes.
        fs.write(a, 4096, &[3; 64]).unwrap();
        assert_eq!(programs(&fs) - before, 1);
        assert!(committed(&mut fs, a, 0).commit);
        assert_eq!(
            fs.index_get(b, 0).unwrap(),
            UNMAPPED,
            "b is still only in RAM"
        );
        assert!(fs.wbuf_find(b, 0).is_some_and(|s| fs.wbuf.is_dirty(s)));
        assert!(fs.wbuf_find(a, 2).is_some_and(|s| fs.wbuf.is_dirty(s)));
        assert!(fs.wbuf_find(a, 0).is_none());
        let mut x = [0u8; 64];
        fs.read(a, 0, &mut x).unwrap();
        assert_eq!(x, [1; 64]);
    }

    #[test]
    fn a_whole_page_read_keeps_a_clean_copy_and_never_evicts_a_dirty_one() {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(4));
        let mut fs = store(&mut sim);
        let a = fs.create(ObjKind::Object).unwrap();
        let c = fs.create(ObjKind::Object).unwrap();
        let data: Vec<u8> = (0..3 * 2048).map(|i| (i % 251) as u8).collect();
        fs.write(a, 0, &data).unwrap(); // spans pages: committed at once
        fs.write(c, 0, &[9; 10]).unwrap();
        let mut page = vec![0u8; 2048];
        for lpn in 0..3u32 {
            let before = programs(&fs);
            fs.read(a, lpn as u64 * 2048, &mut page).unwrap();
            assert_eq!(page, data[lpn as usize * 2048..][..2048]);
            assert_eq!(programs(&fs), before, "a read programs nothing");
            assert!(fs.wbuf_find(c, 0).is_some_and(|s| fs.wbuf.is_dirty(s)));
            let s = fs.wbuf_find(a, lpn).expect("the page read is kept");
            assert!(!fs.wbuf.is_dirty(s));
        }
        // Served from the clean copy the second time.
        let reads = fs.flash().counters().reads;
        fs.read(a, 2 * 2048, &mut page).unwrap();
        assert_eq!(fs.flash().counters().reads, reads);
    }
}
