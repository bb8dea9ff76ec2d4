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
use crate::io::FaultOf;
use crate::policy::SpacePolicy;
use crate::space::Room;
use crate::{ObjectId, Oftl, DATA_HEAD};

/// One update inside a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
}

impl<
        F: NandFlash,
        P: SpacePolicy,
        const PAGE: usize,
        const BLOCKS: usize,
        const CACHE: usize,
        const WBUF: usize,
    > Oftl<F, PAGE, BLOCKS, CACHE, WBUF, P>
{
    /// Applies `ops` atomically: after a power cut either all of them or none are
    /// visible. On `Ok` they are durable (together with every earlier write to the
    /// objects they touch, which commits first).
    pub fn transact(&mut self, ops: &[TxOp<'_>]) -> Result<(), WriteError<F::Error>> {
        self.transact_inner(ops).map_err(|e| self.fail(e))
    }

    /// Marks the handle poisoned after a failure that may have left RAM ahead of flash.
    pub(crate) fn fail(&mut self, e: FaultOf<F>) -> WriteError<F::Error> {
        if matches!(e, Fault::Flash(_) | Fault::Corrupted | Fault::Exhausted) {
            self.poisoned = true;
        }
        e.into()
    }

    /// [`Oftl::fail`] for reads: they change flash only by writing cached pages back,
    /// so only running out of room for that poisons the handle.
    pub(crate) fn fail_read(&mut self, e: FaultOf<F>) -> ReadError<F::Error> {
        if matches!(e, Fault::Exhausted) {
            self.poisoned = true;
        }
        e.into()
    }

    pub(crate) fn transact_inner(&mut self, ops: &[TxOp<'_>]) -> Result<(), FaultOf<F>> {
        self.check_writable()?;
        // Each touched object's buffered writes commit first (their own transaction),
        // and its buffers are forgotten: this transaction rewrites committed pages. An
        // object this transaction truncates to 0 loses them anyway: they are not
        // programmed, and forgotten only once the transaction is durable (an error
        // before that leaves them buffered).
        let cleared = |obj: ObjectId| {
            ops.iter()
                .any(|op| matches!(*op, TxOp::Truncate { obj: o, size: 0 } if o == obj))
        };
        for op in ops {
            let (TxOp::Write { obj, .. } | TxOp::Truncate { obj, .. }) = *op;
            if !cleared(obj) && self.obj_get(obj)?.is_some() {
                self.flush_obj(obj, true)?;
            }
        }
        let mut total = 0u32;
        let mut growth = 0u64;
        for (i, op) in ops.iter().enumerate() {
            let (n, g) = self.op_pages(op, &ops[..i])?;
            total += n;
            growth += g as u64;
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
        // Only truncates that shrink may use the delete reserve.
        let mut shrink = growth == 0;
        for (i, op) in ops.iter().enumerate() {
            shrink &= match *op {
                TxOp::Truncate { obj, size } => size <= self.size_after(obj, &ops[..i])?,
                TxOp::Write { .. } => false,
            };
        }
        let room = if shrink { Room::Shrink } else { Room::Grow };
        self.prepare(total, ops.len() as u32, growth, room)?;
        let first = self.dev.heads[DATA_HEAD].next_seq;
        let mut remaining = total;
        for op in ops {
            match *op {
                TxOp::Write { obj, offset, data } => {
                    self.tx_write(obj, offset, data, first, &mut remaining)?
                }
                TxOp::Truncate { obj, size } => {
                    self.tx_truncate(obj, size, first, &mut remaining)?
                }
            }
        }
        debug_assert_eq!(remaining, 0);
        for op in ops {
            if let TxOp::Truncate { obj, size: 0 } = *op {
                self.wbuf_drop(obj);
            }
        }
        Ok(())
    }

    /// Pages an op programs, and how many of them extend the object.
    /// The size `obj` will have after `earlier` ops of the same transaction.
    fn size_after(&mut self, obj: ObjectId, earlier: &[TxOp<'_>]) -> Result<u64, FaultOf<F>> {
        let mut size = self.obj(obj)?.size;
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
        Ok(size)
    }

    fn op_pages(&mut self, op: &TxOp<'_>, earlier: &[TxOp<'_>]) -> Result<(u32, u32), FaultOf<F>> {
        let p = self.dev.payload as u64;
        match *op {
            TxOp::Write { obj, offset, data } => {
                if self.obj(obj)?.kind != ObjKind::Object {
                    return Err(Fault::WrongKind);
                }
                if data.is_empty() {
                    return Ok((0, 0));
                }
                let end = offset
                    .checked_add(data.len() as u64)
                    .ok_or(Fault::TooLarge)?;
                if end > self.max_object_size() {
                    return Err(Fault::TooLarge);
                }
                let first = offset / p;
                let last = (end - 1) / p;
                let have = self.size_after(obj, earlier)?.div_ceil(p);
                let growth = (last + 1).saturating_sub(have.max(first));
                Ok(((last - first + 1) as u32, growth as u32))
            }
            TxOp::Truncate { obj, size } => {
                if self.obj(obj)?.kind != ObjKind::Object {
                    return Err(Fault::WrongKind);
                }
                if size > self.max_object_size() {
                    return Err(Fault::TooLarge);
                }
                let cur = self.size_after(obj, earlier)?;
                let tail = size < cur && size % p != 0;
                Ok((1 + tail as u32, 0))
            }
        }
    }
}
