//! The write path: object create / write / truncate / delete / set attributes, and the
//! state changes they share with recovery (`apply_meta`, `apply_data`).
//!
//! Data pages are whole-page programs with the backpointer in the same program, so a
//! page-aligned append costs exactly one program and no metadata programs; only
//! partial pages are read-modify-written. Mapped pages always hold zeros past the
//! object's size (writes and truncates keep it so), so extending never exposes stale
//! bytes. Before anything is programmed, [`Oftl::prepare`] reserves window room and
//! collects garbage, so no checkpoint or GC interleaves with a transaction.

use nand_hal::NandFlash;

use crate::errors::{Fault, WriteError};
use crate::format::backpointer::{Backpointer, PageKind, MAX_U24};
use crate::format::checkpoint::{BlockState, ObjKind, HEADS, NONE};
use crate::format::index::UNMAPPED;
use crate::format::meta::{MetaRecord, ATTR_LEN};
use crate::format::table::{ObjRecord, TABLE_OBJ};
use crate::io::FaultOf;
use crate::policy::SpacePolicy;
use crate::txn::TxOp;
use crate::{ObjectId, Oftl, DATA_HEAD};

impl<
        F: NandFlash,
        P: SpacePolicy,
        const PAGE: usize,
        const BLOCKS: usize,
        const CACHE: usize,
        const WBUF: usize,
    > Oftl<F, PAGE, BLOCKS, CACHE, WBUF, P>
{
    /// Creates an empty object and returns its id. Ids are never reused.
    pub fn create(&mut self, kind: ObjKind) -> Result<ObjectId, WriteError<F::Error>> {
        self.create_inner(kind).map_err(|e| self.fail(e))
    }

    fn create_inner(&mut self, kind: ObjKind) -> Result<ObjectId, FaultOf<F>> {
        self.check_usable()?;
        if self.next_obj_id > self.max_object_id().min(MAX_U24) {
            return Err(Fault::TooManyObjects);
        }
        self.prepare(1, 1, 1)?;
        let rec = MetaRecord {
            id: self.next_obj_id,
            kind,
            deleted: false,
            size: 0,
            attrs: [0; ATTR_LEN],
        };
        self.write_meta(&rec, None)?;
        Ok(rec.id)
    }

    /// Sets the object's size (atomically).
    /// Buffered writes to the object are committed first (or, for `size` 0, dropped
    /// once the truncate is durable: nothing of them would remain), so it is durable on
    /// return. On error nothing changed, buffered writes included.
    pub fn truncate(&mut self, obj: ObjectId, size: u64) -> Result<(), WriteError<F::Error>> {
        self.transact(&[TxOp::Truncate { obj, size }])
    }

    /// Deletes an object and frees its pages. Its buffered writes are dropped once the
    /// delete is durable (they are never programmed); on error nothing changed, buffered
    /// writes included.
    pub fn delete(&mut self, obj: ObjectId) -> Result<(), WriteError<F::Error>> {
        let r = (|| -> Result<_, FaultOf<F>> {
            self.check_usable()?;
            let o = self.obj(obj)?;
            let mut rec = self.load_meta(&o)?;
            rec.deleted = true;
            self.prepare(1, 1, 0)?;
            self.write_meta(&rec, None)?;
            self.wbuf_drop(obj);
            Ok(())
        })();
        r.map_err(|e| self.fail(e))
    }

    /// Replaces the object's user attributes.
    pub fn set_attrs(
        &mut self,
        obj: ObjectId,
        attrs: &[u8; ATTR_LEN],
    ) -> Result<(), WriteError<F::Error>> {
        let a = *attrs;
        self.meta_update(obj, move |m| m.attrs = a)
    }

    /// Makes everything durable and writes a checkpoint, so the next crash recovery
    /// scans an empty window.
    pub fn sync(&mut self) -> Result<(), WriteError<F::Error>> {
        let r = self.check_usable().and_then(|()| {
            self.flush_all()?;
            if self.need_marker {
                // Nothing changed since the clean checkpoint.
                return Ok(());
            }
            self.checkpoint(false)
        });
        r.map_err(|e| self.fail(e))
    }

    fn meta_update(
        &mut self,
        obj: ObjectId,
        f: impl FnOnce(&mut MetaRecord),
    ) -> Result<(), WriteError<F::Error>> {
        let r = (|| -> Result<_, FaultOf<F>> {
            self.check_usable()?;
            self.obj(obj)?;
            // Keep the object's history in order: buffered writes commit first.
            self.flush_obj(obj, false)?;
            let o = self.obj(obj)?;
            let mut rec = self.load_meta(&o)?;
            f(&mut rec);
            self.prepare(1, 1, 0)?;
            self.write_meta(&rec, None)
        })();
        r.map_err(|e| self.fail(e))
    }

    /// Reads object `o`'s metadata page.
    pub(crate) fn load_meta(&mut self, o: &ObjRecord) -> Result<MetaRecord, FaultOf<F>> {
        let mut rec = self.dev.read_meta(o.meta, &mut self.rbuf)?;
        if rec.id != o.id || rec.kind != o.kind {
            return Err(Fault::Corrupted);
        }
        rec.size = Self::meta_size(o);
        Ok(rec)
    }

    /// Programs a metadata page for `rec` and applies it. `tx` is `(first seq, commit)`
    /// inside a transaction; `None` makes it its own transaction.
    pub(crate) fn write_meta(
        &mut self,
        rec: &MetaRecord,
        tx: Option<(u32, bool)>,
    ) -> Result<(), FaultOf<F>> {
        let pu = self.dev.pu();
        self.pbuf.fill(0xFF);
        rec.encode(&mut self.pbuf[..pu]);
        let mut bp = Backpointer::single(PageKind::Meta, rec.id, 0, 84);
        let first = tx.map(|(f, commit)| {
            bp.commit = commit;
            f
        });
        let (page, _) = self
            .dev
            .program(DATA_HEAD, &mut self.pbuf, bp, true, first)?;
        self.apply_meta(rec, page)
    }

    /// Applies a metadata record found at `page` (normal path and recovery replay).
    pub(crate) fn apply_meta(&mut self, rec: &MetaRecord, page: u32) -> Result<(), FaultOf<F>> {
        let p = self.dev.payload as u64;
        self.next_obj_id = self.next_obj_id.max(rec.id + 1);
        match self.obj_get(rec.id)? {
            Some(o) if rec.deleted => {
                let pages = self.index_pages(&o);
                self.drop_index(o.id, pages)?;
                self.dev.mark_invalid(o.meta);
                self.obj_remove(o.id)?;
            }
            Some(o) if o.kind == ObjKind::Log => {
                // A log stream's metadata size is its trim point.
                let spp = self.sectors_per_page() as u64;
                let from = (o.log_start / spp) as u32;
                let to = ((rec.size / spp) as u32).min(self.index_pages(&o));
                if to > from {
                    self.unmap_from(o.id, from, to)?;
                }
                self.dev.mark_invalid(o.meta);
                self.dev.mark_valid(page);
                self.obj_update(o.id, |o| {
                    o.log_start = o.log_start.max(rec.size);
                    o.size = o.size.max(o.log_start);
                    o.meta = page;
                })?;
            }
            Some(o) => {
                if rec.size < o.size {
                    self.unmap_from(o.id, rec.size.div_ceil(p) as u32, o.size.div_ceil(p) as u32)?;
                }
                self.dev.mark_invalid(o.meta);
                self.dev.mark_valid(page);
                self.obj_update(o.id, |o| {
                    o.size = rec.size;
                    o.meta = page;
                })?;
            }
            None if rec.deleted => {}
            None => {
                self.obj_insert(&ObjRecord {
                    id: rec.id,
                    kind: rec.kind,
                    size: rec.size,
                    root: NONE,
                    direct: rec.kind == ObjKind::Object,
                    meta: page,
                    log_start: if rec.kind == ObjKind::Log {
                        rec.size
                    } else {
                        0
                    },
                })?;
                self.dev.mark_valid(page);
            }
        }
        Ok(())
    }

    /// Applies a data page found at `page` (normal path and recovery replay).
    pub(crate) fn apply_data(&mut self, bp: &Backpointer, page: u32) -> Result<(), FaultOf<F>> {
        if bp.owner == TABLE_OBJ || self.obj_get(bp.owner)?.is_none() {
            return Ok(());
        }
        self.index_set(bp.owner, bp.lpn, page)?;
        let end = bp.lpn as u64 * self.dev.payload as u64 + bp.len as u64;
        if end > self.obj(bp.owner)?.size {
            self.obj_update(bp.owner, |o| o.size = end)?;
        }
        Ok(())
    }

    pub(crate) fn tx_write(
        &mut self,
        obj: ObjectId,
        offset: u64,
        data: &[u8],
        first: u32,
        remaining: &mut u32,
    ) -> Result<(), FaultOf<F>> {
        let p = self.dev.payload as usize;
        let size = self.obj(obj)?.size;
        let new_size = size.max(offset + data.len() as u64);
        let mut pos = 0usize;
        while pos < data.len() {
            let abs = offset + pos as u64;
            let lpn = (abs / p as u64) as u32;
            let col = (abs % p as u64) as usize;
            let n = (p - col).min(data.len() - pos);
            let start = lpn as u64 * p as u64;
            let valid = (new_size - start).min(p as u64) as u16;
            if n < p {
                let old = self.index_get(obj, lpn)?;
                if old == UNMAPPED {
                    self.pbuf[..p].fill(0);
                } else {
                    self.dev.read_payload(
                        old,
                        0,
                        &mut self.pbuf[..p],
                        Some((PageKind::Data, obj, lpn)),
                    )?;
                    let cur = self.obj(obj)?.size;
                    if cur < start + p as u64 {
                        let keep = cur.saturating_sub(start) as usize;
                        self.pbuf[keep..p].fill(0);
                    }
                }
            }
            self.pbuf[col..col + n].copy_from_slice(&data[pos..pos + n]);
            self.pbuf[p..].fill(0xFF);
            *remaining -= 1;
            let mut bp = Backpointer::single(PageKind::Data, obj, lpn, valid);
            bp.commit = *remaining == 0;
            let (page, bp) = self
                .dev
                .program(DATA_HEAD, &mut self.pbuf, bp, false, Some(first))?;
            self.apply_data(&bp, page)?;
            pos += n;
        }
        Ok(())
    }

    pub(crate) fn tx_truncate(
        &mut self,
        obj: ObjectId,
        size: u64,
        first: u32,
        remaining: &mut u32,
    ) -> Result<(), FaultOf<F>> {
        let p = self.dev.payload as u64;
        let o = self.obj(obj)?;
        let cur = o.size;
        let tail_lpn = (size / p) as u32;
        let has_tail = size < cur && size % p != 0;
        let tail = if has_tail {
            self.index_get(obj, tail_lpn)?
        } else {
            UNMAPPED
        };
        let mut rec = self.load_meta(&o)?;
        rec.size = size;
        *remaining -= 1;
        self.write_meta(&rec, Some((first, *remaining == 0)))?;
        if has_tail {
            // The new last page, zeroed past the new size (a hole becomes a zero page),
            // so a later extension never exposes cut-off bytes.
            let ps = p as usize;
            let keep = (size % p) as usize;
            if tail == UNMAPPED {
                self.pbuf[..ps].fill(0);
            } else {
                self.dev.read_payload(
                    tail,
                    0,
                    &mut self.pbuf[..ps],
                    Some((PageKind::Data, obj, tail_lpn)),
                )?;
            }
            self.pbuf[keep..ps].fill(0);
            self.pbuf[ps..].fill(0xFF);
            *remaining -= 1;
            let mut bp = Backpointer::single(PageKind::Data, obj, tail_lpn, keep as u16);
            bp.commit = *remaining == 0;
            let (page, bp) = self
                .dev
                .program(DATA_HEAD, &mut self.pbuf, bp, false, Some(first))?;
            self.apply_data(&bp, page)?;
        }
        Ok(())
    }

    /// Gets ready to program `pages` pages in `ops` operations that grow the valid set
    /// by up to `growth` pages: dirty marker, capacity check, window room, GC.
    pub(crate) fn prepare(&mut self, pages: u32, ops: u32, growth: u64) -> Result<(), FaultOf<F>> {
        if self.read_only {
            return Err(Fault::ReadOnly);
        }
        if self.need_marker {
            self.write_marker()?;
        }
        // Operations that add no pages (delete, truncate, attributes, rewrites in place)
        // are never refused for capacity: on a full device they are how room is made.
        let index_slack = 2 * (growth / self.entries_per_index() as u64 + ops as u64 + 1);
        if growth > 0 && self.dev.valid_total + growth + index_slack > self.capacity_pages() {
            return Err(Fault::NoSpace);
        }
        let ppb = self.dev.ppb() as u64;
        let need = self.window_need(pages, ops);
        let blocks = (need + self.window_need(0, 0)).div_ceil(ppb) + 1;
        if blocks > crate::MAX_WINDOW as u64 {
            return Err(Fault::TooLarge);
        }
        // A transaction larger than the configured window gets a larger one at the
        // checkpoint before it (never a checkpoint inside it).
        self.window_target = (blocks as u16).max(self.dev.sb.window_blocks);
        let r = self.make_room(need);
        self.window_target = self.dev.sb.window_blocks;
        r
    }

    /// Window pages an operation may consume: index evictions, the final checkpoint
    /// flush and one block lost to a program failure included.
    pub(crate) fn window_need(&self, pages: u32, ops: u32) -> u64 {
        window_need_for(
            pages as u64,
            ops as u64,
            self.entries_per_index() as u64,
            self.dev.ppb() as u64,
            CACHE as u64,
        )
    }

    /// The smallest updating window ([`crate::Config::window_blocks`]) this build can
    /// work with on a part with `pages_per_block` pages per block.
    ///
    /// Every operation keeps `window_need(0, 0) = 2·CACHE + 2 + pages_per_block`
    /// window pages in reserve, and `make_room` runs a foreground collection only when
    /// the window holds the operation (a one-page write: `window_need(1, 1)`, which is
    /// `window_need(0, 0) + 5`), a whole victim block and the reserve that `gc_room`
    /// keeps while copying. When it does not, it checkpoints for a fresh window; a
    /// fresh window may carry the data head's block with as little as one free page,
    /// so it is only guaranteed `(window_blocks - 1)·pages_per_block + 1` pages. The
    /// minimum is therefore the smallest `w` with
    /// `(w - 1)·pages_per_block + 1 >= window_need(1, 1) + pages_per_block + window_need(0, 0)`,
    /// i.e. `ceil((4·CACHE + 8 + 2·pages_per_block) / pages_per_block) + 2`. Below it,
    /// `gc_step` fails with `NoSpace` or collections stop running and writes fail once
    /// the free blocks run out. The result may exceed [`crate::MAX_WINDOW`]: such a build
    /// cannot be formatted on that part at all.
    pub const fn min_window_blocks(pages_per_block: u32) -> u32 {
        let ppb = pages_per_block as u64;
        if ppb == 0 {
            return u32::MAX;
        }
        // One page per op never reaches an index page's worth of entries: `epp` only
        // matters through `pages / epp`, which is 0 here for any `epp >= 2`.
        let reserve = window_need_for(0, 0, u64::MAX, ppb, CACHE as u64);
        let op = window_need_for(1, 1, u64::MAX, ppb, CACHE as u64);
        let blocks = (op + reserve - 1).div_ceil(ppb) + 2;
        if blocks > u32::MAX as u64 {
            u32::MAX
        } else {
            blocks as u32
        }
    }

    /// Free blocks every checkpoint leaves outside its window, beyond the window's own
    /// size, for a crash recovery to write into (recovery may use only blocks the last
    /// checkpoint calls free): one block per head for relocating the blocks being
    /// programmed, the closing checkpoint's cache flush (`2·CACHE` pages) and one spare.
    /// Together with one block per window block (cache write-backs while the window's
    /// pages are replayed, at most about one per replayed page) that is the recovery
    /// reserve; without it a crash on a nearly full device could leave it unmountable.
    pub(crate) fn recovery_extra_blocks(&self) -> u32 {
        let ppb = self.dev.ppb().max(1);
        HEADS as u32 + (2 * CACHE as u32).div_ceil(ppb) + 1
    }

    /// Blocks that are free now or become free at the next checkpoint.
    pub(crate) fn reclaimable_blocks(&self) -> u32 {
        self.blocks()
            .iter()
            .filter(|b| {
                b.state == BlockState::Free || (b.state == BlockState::Full && b.valid == 0)
            })
            .count() as u32
    }

    /// Ensures `need` window pages and enough reclaimable blocks for the next window
    /// and the recovery reserve after it.
    pub(crate) fn make_room(&mut self, need: u64) -> Result<(), FaultOf<F>> {
        let w = 2 * self.dev.sb.window_blocks as u32 + self.recovery_extra_blocks();
        let ppb = self.dev.ppb() as u64;
        let mut fresh = false;
        let mut stalled = 0;
        let mut collections = 0;
        for _ in 0..4 * BLOCKS + 8 {
            if self.dev.window_free_pages(DATA_HEAD) < need {
                self.checkpoint(false)?;
                fresh = true;
                if self.dev.window_free_pages(DATA_HEAD) < need {
                    return Err(Fault::NoSpace);
                }
            }
            if self.reclaimable_blocks() > w && !self.urgent_victim() {
                return Ok(());
            }
            if self.dev.window_free_pages(DATA_HEAD) < need + ppb + self.window_need(0, 0) {
                if !fresh {
                    self.checkpoint(false)?;
                    fresh = true;
                    continue;
                }
                // A fresh window cannot hold a whole victim on top of this operation:
                // go ahead if the next window can still be allocated.
                return if self.reclaimable_blocks() > 0 {
                    Ok(())
                } else {
                    Err(Fault::NoSpace)
                };
            }
            let before = self.free_room();
            if !self.gc_collect_one()? {
                return if self.reclaimable_blocks() > 0 {
                    Ok(())
                } else {
                    Err(Fault::NoSpace)
                };
            }
            // Near capacity a collection can cost more (copies and the cache pages they
            // write back) than it frees: after a few such in a row, stop collecting for
            // this operation instead of spinning through the device's wear.
            collections += 1;
            if self.free_room() <= before {
                stalled += 1;
            } else {
                stalled = 0;
            }
            if stalled >= STALLED_COLLECTIONS || collections >= MAX_COLLECTIONS {
                return if self.reclaimable_blocks() > 0 {
                    Ok(())
                } else {
                    Err(Fault::NoSpace)
                };
            }
            fresh = false;
        }
        Err(Fault::NoSpace)
    }

    /// Pages free now or at the next checkpoint: reclaimable blocks plus what is left
    /// of the window (a checkpoint moves blocks from the one to the other).
    fn free_room(&self) -> u64 {
        self.reclaimable_blocks() as u64 * self.dev.ppb() as u64
            + self.dev.window_free_pages(DATA_HEAD)
    }
}

/// Foreground collections in a row that gain no room before `make_room` stops
/// collecting for the operation.
const STALLED_COLLECTIONS: u32 = 3;
/// Most foreground collections one operation runs (near capacity each may gain little;
/// the operation goes ahead if the window holds it, and the space reserve is kept by
/// the checkpoints' window allocation).
const MAX_COLLECTIONS: u32 = 16;

/// Window pages an operation of `pages` pages in `ops` operations may consume, with
/// `epp` entries per index page, `ppb` pages per block and `cache` cached index pages.
const fn window_need_for(pages: u64, ops: u64, epp: u64, ppb: u64, cache: u64) -> u64 {
    pages
        // Cache write-backs during the operation (index leaves its pages fill, and
        // the pages each operation loads: object leaf and root, the table page with
        // its record and the table's index). The block kept for a program failure
        // (`ppb` below) absorbs the rare operation that writes back more.
        + 2 * (pages / epp + 2 * ops)
        + 2 * cache
        + 2
        // A program failure abandons the rest of a block.
        + ppb
}
