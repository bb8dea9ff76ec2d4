//! The write path: object create / write / truncate / delete / set attributes, and the
//! state changes they share with recovery (`apply_meta`, `apply_data`).
//!
//! Data pages are whole-page programs with the backpointer in the same program, so a
//! page-aligned append costs exactly one program and no metadata programs; only
//! partial pages are read-modify-written. Mapped pages always hold zeros past the
//! object's size (writes and truncates keep it so), so extending never exposes stale
//! bytes. Before anything is programmed, [`Oftl::prepare`] reserves window room and
//! collects garbage, so no checkpoint or GC interleaves with a transaction.

use nand_hal::{NandFlash, PageAddr};

use crate::errors::{Fault, WriteError};
use crate::format::backpointer::{Backpointer, PageKind};
use crate::format::checkpoint::ObjKind;
use crate::format::index::UNMAPPED;
use crate::format::meta::{MetaRecord, ATTR_LEN};
use crate::format::table::{ObjRecord, TABLE_OBJ};
use crate::io::FaultOf;
use crate::policy::SpacePolicy;
use crate::space::Room;
use crate::txn::TxOp;
use crate::{ObjectId, Oftl, DATA_HEAD};

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
    /// Creates an empty object (user attributes all zero) and returns its id. Ids are
    /// handed out in increasing order and reused once the table's bound is reached
    /// ([`Oftl::max_object_id`]); see [`crate::TxOp::Create`] to create with
    /// attributes.
    pub fn create(&mut self, kind: ObjKind) -> Result<ObjectId, WriteError<F::Error>> {
        self.create_inner(kind).map_err(|e| self.fail(e))
    }

    fn create_inner(&mut self, kind: ObjKind) -> Result<ObjectId, FaultOf<F>> {
        if kind == ObjKind::Log && !crate::log::LogTail::<LOG>::KEPT {
            return Err(Fault::NoLogStreams);
        }
        self.check_writable()?;
        if !self.ids_ready(1, true)? {
            return Err(Fault::TooManyObjects);
        }
        self.prepare(1, 1, 1, Room::Grow)?;
        let rec = MetaRecord {
            id: self.ids.next(),
            kind,
            deleted: false,
            size: 0,
            attrs: [0; ATTR_LEN],
        };
        self.write_meta(&rec, None)?;
        self.settle_ids()?;
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
            self.check_writable()?;
            let o = self.obj(obj)?;
            let mut rec = self.load_meta(&o)?;
            rec.deleted = true;
            self.prepare(1, 1, 0, Room::Shrink)?;
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
            if self.ckpt.needs_marker() || self.session.read_only().is_some() {
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
            self.check_writable()?;
            self.obj(obj)?;
            // Keep the object's history in order: buffered writes commit first.
            self.flush_obj(obj, false)?;
            let o = self.obj(obj)?;
            let mut rec = self.load_meta(&o)?;
            f(&mut rec);
            self.prepare(1, 1, 0, Room::Grow)?;
            self.write_meta(&rec, None)
        })();
        r.map_err(|e| self.fail(e))
    }

    /// Reads object `o`'s metadata page.
    pub(crate) fn load_meta(&mut self, o: &ObjRecord) -> Result<MetaRecord, FaultOf<F>> {
        let mut rec = self.dev.read_meta(o.meta, self.scratch.aside_mut()?)?;
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
        self.scratch.page_mut().fill(0xFF);
        rec.encode(&mut self.scratch.page_mut()[..pu]);
        let mut bp = Backpointer::single(PageKind::Meta, rec.id, 0, 84);
        let first = tx.map(|(f, commit)| {
            bp.commit = commit;
            f
        });
        let (page, _) = self
            .dev
            .program(DATA_HEAD, self.scratch.page_mut(), bp, true, first)?;
        self.apply_meta(rec, page)
    }

    /// Applies a metadata record found at `page` (normal path and recovery replay).
    pub(crate) fn apply_meta(
        &mut self,
        rec: &MetaRecord,
        page: PageAddr,
    ) -> Result<(), FaultOf<F>> {
        let p = self.dev.payload() as u64;
        self.ids.seen(rec.id);
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
                // Pages wholly below the new trim point (and below the end).
                let to = (rec.size / spp).min(o.size.div_ceil(spp));
                self.log_unmap(o.id, o.log_start / spp, to)?;
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
                self.ids.created(rec.id, self.max_object_id());
                let log_start = if rec.kind == ObjKind::Log {
                    rec.size
                } else {
                    0
                };
                self.obj_insert(&ObjRecord::new(rec.id, rec.kind, rec.size, page, log_start))?;
                self.dev.mark_valid(page);
            }
        }
        Ok(())
    }

    /// Applies a data page found at `page` (normal path and recovery replay).
    pub(crate) fn apply_data(
        &mut self,
        bp: &Backpointer,
        page: PageAddr,
    ) -> Result<(), FaultOf<F>> {
        if bp.owner == TABLE_OBJ || self.obj_get(bp.owner)?.is_none() {
            return Ok(());
        }
        self.index_set(bp.owner, bp.lpn, page)?;
        let end = bp.lpn as u64 * self.dev.payload() as u64 + bp.len as u64;
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
        let p = self.dev.payload() as usize;
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
                    self.scratch.page_mut()[..p].fill(0);
                } else {
                    self.dev.read_payload(
                        old,
                        0,
                        &mut self.scratch.page_mut()[..p],
                        Some((PageKind::Data, obj, lpn)),
                    )?;
                    let cur = self.obj(obj)?.size;
                    if cur < start + p as u64 {
                        let keep = cur.saturating_sub(start) as usize;
                        self.scratch.page_mut()[keep..p].fill(0);
                    }
                }
            }
            self.scratch.page_mut()[col..col + n].copy_from_slice(&data[pos..pos + n]);
            self.scratch.page_mut()[p..].fill(0xFF);
            *remaining -= 1;
            let mut bp = Backpointer::single(PageKind::Data, obj, lpn, valid);
            bp.commit = *remaining == 0;
            let (page, bp) =
                self.dev
                    .program(DATA_HEAD, self.scratch.page_mut(), bp, false, Some(first))?;
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
        let p = self.dev.payload() as u64;
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
                self.scratch.page_mut()[..ps].fill(0);
            } else {
                self.dev.read_payload(
                    tail,
                    0,
                    &mut self.scratch.page_mut()[..ps],
                    Some((PageKind::Data, obj, tail_lpn)),
                )?;
            }
            self.scratch.page_mut()[keep..ps].fill(0);
            self.scratch.page_mut()[ps..].fill(0xFF);
            *remaining -= 1;
            let mut bp = Backpointer::single(PageKind::Data, obj, tail_lpn, keep as u16);
            bp.commit = *remaining == 0;
            let (page, bp) =
                self.dev
                    .program(DATA_HEAD, self.scratch.page_mut(), bp, false, Some(first))?;
            self.apply_data(&bp, page)?;
        }
        Ok(())
    }
}
