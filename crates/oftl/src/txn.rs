//! Transactions: one or more object updates committed atomically.
//!
//! A transaction's pages are programmed consecutively through the data head (index
//! pages evicted meanwhile may sit between them; they never commit anything). Each
//! page's backpointer carries the distance to the transaction's first page; the last
//! page carries the commit flag, so transaction id = `seq - delta` and count =
//! `delta + 1` on the commit page. Recovery applies a head's pages only up to its last
//! commit page, which makes every transaction all-or-nothing without a journal.
//!
//! Space is reserved before the first page (window room, GC, checkpoint), so no
//! checkpoint or collection ever runs inside a transaction. A flash failure inside one
//! poisons the handle: RAM is then ahead of flash and only a remount (which drops the
//! uncommitted tail) makes them agree again.

use nand_hal::NandFlash;

use crate::errors::{Fault, ReadError, WriteError};
use crate::format::backpointer::MAX_TX_DELTA;
use crate::format::checkpoint::ObjKind;
use crate::format::meta::{MetaRecord, ATTR_LEN};
use crate::io::FaultOf;
use crate::policy::SpacePolicy;
use crate::space::Room;
use crate::{ObjectId, Oftl, DATA_HEAD};

/// One update inside a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TxOp<'a> {
    /// Write `data` at byte `offset` of `obj` (extends the object if needed; a gap reads
    /// as zeros).
    Write {
        /// Object.
        obj: ObjectId,
        /// Byte offset.
        offset: u64,
        /// Bytes.
        data: &'a [u8],
    },
    /// Set the size of `obj` (shrinks or extends with zeros).
    Truncate {
        /// Object.
        obj: ObjectId,
        /// New size in bytes.
        size: u64,
    },
    /// Create an empty object of `kind` with user attributes `attrs`. The creates of a
    /// transaction take the ids [`Oftl::next_object_id`] returned before it, in op
    /// order (the first create takes that id, the next one more), so later ops of the
    /// same transaction (and the caller's own records written in it) can name the new
    /// object.
    ///
    /// Ids are reused once the table's bound is reached (2^24 - 1 with whole-page
    /// metadata units), so a caller that keeps ids in records of its own outside the
    /// store (a log) must be able to tell a new object from an old one of the same
    /// id: `attrs` are written with the creation, in the same metadata page. Once ids
    /// are reused, a transaction whose creates would take an id that is live fails with
    /// [`crate::WriteError::TooManyObjects`] and changes nothing (the cursor then moves
    /// to a free id: ask [`Oftl::next_object_id`] again); the cursor stops where
    /// [`crate::ID_RUN`] free ids follow unless the ids near it are fragmented, so up to
    /// that many creates find their ids free.
    Create {
        /// Kind of the new object.
        kind: ObjKind,
        /// Its user attributes.
        attrs: [u8; ATTR_LEN],
    },
    /// Delete `obj` (its buffered writes are dropped once the transaction is durable).
    /// Later ops of the transaction may not name it.
    Delete {
        /// Object.
        obj: ObjectId,
    },
    /// Replace the user attributes of `obj`.
    SetAttrs {
        /// Object.
        obj: ObjectId,
        /// The new attributes.
        attrs: [u8; ATTR_LEN],
    },
}

impl TxOp<'_> {
    /// The existing object the op names (`None` for a create).
    fn target(&self) -> Option<ObjectId> {
        match *self {
            TxOp::Write { obj, .. }
            | TxOp::Truncate { obj, .. }
            | TxOp::Delete { obj }
            | TxOp::SetAttrs { obj, .. } => Some(obj),
            TxOp::Create { .. } => None,
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
    /// Applies `ops` atomically: after a power cut either all of them or none are
    /// visible. On `Ok` they are durable (together with every earlier write to the
    /// objects they touch, which commits first).
    pub fn transact(&mut self, ops: &[TxOp<'_>]) -> Result<(), WriteError<F::Error>> {
        self.transact_inner(ops, false).map_err(|e| self.fail(e))
    }

    /// [`Oftl::transact`] for a transaction that removes something at the caller's
    /// level and adds no page: a file system's remove, which rewrites the directory
    /// page that named a file whose data lived inline in it. If no op extends or
    /// creates an object, it may use the delete reserve as deletes and truncates do,
    /// so it goes through on a device full enough that writes are refused `NoSpace`
    /// (a device over its capacity after grown bad blocks is full that way until data
    /// is removed). A transaction that grows is treated as by [`Oftl::transact`].
    ///
    /// Only for removals: rewrites that remove nothing would take the room the reserve
    /// keeps for them.
    pub fn transact_removing(&mut self, ops: &[TxOp<'_>]) -> Result<(), WriteError<F::Error>> {
        self.transact_inner(ops, true).map_err(|e| self.fail(e))
    }

    /// Marks the handle poisoned after a failure that may have left RAM ahead of flash.
    pub(crate) fn fail(&mut self, e: FaultOf<F>) -> WriteError<F::Error> {
        if matches!(
            e,
            Fault::Flash(_) | Fault::Corrupted | Fault::Exhausted | Fault::Internal
        ) || self.cache.ahead()
        {
            self.session.poison();
        }
        e.into()
    }

    /// [`Oftl::fail`] for reads: they change flash only by writing cached pages back,
    /// so only running out of room for that poisons the handle, or a write-back that
    /// left a page its parent does not name ([`PageCache::ahead`]).
    ///
    /// [`PageCache::ahead`]: crate::cache::PageCache::ahead
    pub(crate) fn fail_read(&mut self, e: FaultOf<F>) -> ReadError<F::Error> {
        if matches!(e, Fault::Exhausted | Fault::Internal) || self.cache.ahead() {
            self.session.poison();
        }
        e.into()
    }

    pub(crate) fn transact_inner(
        &mut self,
        ops: &[TxOp<'_>],
        removing: bool,
    ) -> Result<(), FaultOf<F>> {
        let logs = ops.iter().any(|op| {
            matches!(
                op,
                TxOp::Create {
                    kind: ObjKind::Log,
                    ..
                }
            )
        });
        if logs && !crate::log::LogTail::<LOG>::KEPT {
            return Err(Fault::NoLogStreams);
        }
        self.check_writable()?;
        let creates = ops
            .iter()
            .filter(|op| matches!(op, TxOp::Create { .. }))
            .count() as u32;
        if !self.ids_ready(creates, false)? {
            return Err(Fault::TooManyObjects);
        }
        // Each touched object's buffered writes commit first (their own transaction),
        // and the clean copies of the pages this transaction rewrites are forgotten
        // (a truncate forgets all of the object's). An
        // object this transaction truncates to 0 or deletes loses them anyway: they are
        // not programmed, and forgotten only once the transaction is durable (an error
        // before that leaves them buffered). Objects it creates have none.
        let cleared = |obj: ObjectId| {
            ops.iter().any(|op| {
                matches!(*op, TxOp::Truncate { obj: o, size: 0 } | TxOp::Delete { obj: o } if o == obj)
            })
        };
        for op in ops {
            if let Some(obj) = op.target() {
                if !cleared(obj) && !self.tx_created(obj, ops) && self.obj_get(obj)?.is_some() {
                    self.flush_obj(obj, false)?;
                    let p = self.dev.payload() as u64;
                    match *op {
                        TxOp::Write { offset, data, .. } if !data.is_empty() => {
                            let last = offset.saturating_add(data.len() as u64 - 1) / p;
                            self.wbuf_forget(
                                obj,
                                (offset / p) as u32,
                                last.min(u32::MAX as u64) as u32,
                            );
                        }
                        TxOp::Write { .. } | TxOp::SetAttrs { .. } => {}
                        _ => self.wbuf_forget(obj, 0, u32::MAX),
                    }
                }
            }
        }
        let mut total = 0u32;
        let mut growth = 0u64;
        let mut shrink = true;
        let mut freed = 0u64;
        for (i, op) in ops.iter().enumerate() {
            let (n, g, shrinks, f) = self.op_pages(op, &ops[..i])?;
            total += n;
            growth += g as u64;
            shrink &= shrinks;
            freed += f;
        }
        if total == 0 {
            for op in ops {
                if let TxOp::Truncate { obj, size: 0 } = *op {
                    self.wbuf_drop(obj);
                }
            }
            return Ok(());
        }
        if total > MAX_TX_DELTA / 2 {
            return Err(Fault::TooLarge);
        }
        // Transactions that only shrink (truncates, deletes) may use the delete
        // reserve, and so may those that grow nothing and either delete objects of at
        // least as many pages as they program or remove something at the caller's
        // level (a file system's remove rewrites the directory page that named the
        // file): on a volume over its capacity (grown bad blocks) they are what makes
        // room again.
        let room = if growth == 0 && (shrink || freed >= total as u64 || removing) {
            Room::Shrink
        } else {
            Room::Grow
        };
        self.prepare(total, ops.len() as u32, growth, room)?;
        let first = self.dev.heads().next_seq(DATA_HEAD);
        let mut remaining = total;
        for op in ops {
            match *op {
                TxOp::Write { obj, offset, data } => {
                    self.tx_write(obj, offset, data, first, &mut remaining)?
                }
                TxOp::Truncate { obj, size } => {
                    self.tx_truncate(obj, size, first, &mut remaining)?
                }
                TxOp::Create { kind, attrs } => {
                    let rec = MetaRecord {
                        id: self.ids.next(),
                        kind,
                        deleted: false,
                        size: 0,
                        attrs,
                    };
                    remaining -= 1;
                    self.write_meta(&rec, Some((first, remaining == 0)))?;
                }
                TxOp::Delete { obj } => {
                    let o = self.obj(obj)?;
                    let mut rec = self.load_meta(&o)?;
                    rec.deleted = true;
                    remaining -= 1;
                    self.write_meta(&rec, Some((first, remaining == 0)))?;
                }
                TxOp::SetAttrs { obj, attrs } => {
                    let o = self.obj(obj)?;
                    let mut rec = self.load_meta(&o)?;
                    rec.attrs = attrs;
                    remaining -= 1;
                    self.write_meta(&rec, Some((first, remaining == 0)))?;
                }
            }
        }
        debug_assert_eq!(remaining, 0);
        if creates > 0 {
            self.settle_ids()?;
        }
        for op in ops {
            if let TxOp::Truncate { obj, size: 0 } | TxOp::Delete { obj } = *op {
                self.wbuf_drop(obj);
            }
        }
        Ok(())
    }

    /// The id the next [`Oftl::create`] (or the first [`TxOp::Create`] of the next
    /// transaction) will get.
    pub fn next_object_id(&self) -> ObjectId {
        self.ids.next()
    }

    /// Whether `obj` is one of the objects `ops` create.
    fn tx_created(&self, obj: ObjectId, ops: &[TxOp<'_>]) -> bool {
        self.created_kind(obj, ops).is_some()
    }

    /// The kind of `obj` if one of `ops` creates it.
    fn created_kind(&self, obj: ObjectId, ops: &[TxOp<'_>]) -> Option<ObjKind> {
        let mut id = self.ids.next();
        for op in ops {
            if let TxOp::Create { kind, .. } = *op {
                if id == obj {
                    return Some(kind);
                }
                id += 1;
            }
        }
        None
    }

    /// Kind and size of `obj` after the `earlier` ops of a transaction (created by one
    /// of them, or existing and not deleted by them).
    fn state_after(
        &mut self,
        obj: ObjectId,
        earlier: &[TxOp<'_>],
    ) -> Result<(ObjKind, u64), FaultOf<F>> {
        if earlier
            .iter()
            .any(|op| matches!(*op, TxOp::Delete { obj: o } if o == obj))
        {
            return Err(Fault::NotFound);
        }
        let (kind, mut size) = match self.created_kind(obj, earlier) {
            Some(kind) => (kind, 0),
            None => {
                let o = self.obj(obj)?;
                (o.kind, o.size)
            }
        };
        for op in earlier {
            match *op {
                TxOp::Write {
                    obj: o,
                    offset,
                    data,
                } if o == obj && !data.is_empty() => size = size.max(offset + data.len() as u64),
                TxOp::Truncate { obj: o, size: s } if o == obj => size = s,
                _ => {}
            }
        }
        Ok((kind, size))
    }

    /// Pages an op programs, how many of them extend the store, whether it only
    /// shrinks (may use the delete reserve), and how many pages it frees (a delete: the
    /// object's pages by its size, and its metadata page).
    fn op_pages(
        &mut self,
        op: &TxOp<'_>,
        earlier: &[TxOp<'_>],
    ) -> Result<(u32, u32, bool, u64), FaultOf<F>> {
        let p = self.dev.payload() as u64;
        match *op {
            TxOp::Write { obj, offset, data } => {
                let (kind, size) = self.state_after(obj, earlier)?;
                if kind != ObjKind::Object {
                    return Err(Fault::WrongKind);
                }
                if data.is_empty() {
                    return Ok((0, 0, true, 0));
                }
                let end = offset
                    .checked_add(data.len() as u64)
                    .ok_or(Fault::TooLarge)?;
                if end > self.max_object_size() {
                    return Err(Fault::TooLarge);
                }
                let first = offset / p;
                let last = (end - 1) / p;
                let have = size.div_ceil(p);
                let mut growth = (last + 1).saturating_sub(have.max(first));
                // Holes below the end count too, for an object no earlier op of this
                // transaction touched or may have created (the index says what is
                // mapped only for those).
                if !earlier.iter().any(|e| e.target().is_none_or(|t| t == obj)) {
                    growth += self.holes_among(obj, have, growth, first..=last)?;
                }
                Ok(((last - first + 1) as u32, growth as u32, false, 0))
            }
            TxOp::Truncate { obj, size } => {
                let (kind, cur) = self.state_after(obj, earlier)?;
                if kind != ObjKind::Object {
                    return Err(Fault::WrongKind);
                }
                if size > self.max_object_size() {
                    return Err(Fault::TooLarge);
                }
                let tail = size < cur && size % p != 0;
                Ok((1 + tail as u32, 0, size <= cur, 0))
            }
            TxOp::Create { .. } => Ok((1, 1, false, 0)),
            TxOp::Delete { obj } => {
                let (_, size) = self.state_after(obj, earlier)?;
                if self.created_kind(obj, earlier).is_some() {
                    // Created and deleted in one transaction: legal, but the delete
                    // needs the object's metadata page on flash; keep it simple.
                    return Err(Fault::NotFound);
                }
                // A sparse object frees fewer: only deletes count this, and a delete
                // may use the reserve anyway.
                Ok((1, 0, true, size.div_ceil(p) + 1))
            }
            TxOp::SetAttrs { obj, .. } => {
                self.state_after(obj, earlier)?;
                if self.created_kind(obj, earlier).is_some() {
                    // The create's metadata page is not on flash before the transaction.
                    return Err(Fault::NotFound);
                }
                Ok((1, 0, true, 0))
            }
        }
    }
}
