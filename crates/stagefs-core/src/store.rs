//! The object store the file layer stands on, as a trait: the operations of
//! [`oftl::Oftl`] the file layer calls, with errors already in the file layer's shape.
//! Implemented for every `Oftl`.

use nand_hal::NandFlash;
use oftl::{
    Damaged, FormatError, LogRecord, Mismatch, MountError, ObjKind, ObjectId, Oftl, SalvageReport,
    SpacePolicy, TxOp, ATTR_LEN,
};

use crate::error::Error;

/// What the file layer needs from the object store below it.
pub trait Store {
    /// The flash's error.
    type FlashError;

    /// Formats the device as the store was configured when built (everything on it is
    /// lost).
    fn format(&mut self) -> Result<(), Error<Self::FlashError>>;
    /// Mounts (recovering after a crash).
    fn mount(&mut self) -> Result<(), Error<Self::FlashError>>;
    /// Mounts a store that fails to mount for lost pages, repairing it in place (see
    /// [`oftl::Damaged::Repair`]).
    fn mount_repair(&mut self) -> Result<(), Error<Self::FlashError>>;
    /// Rebuilds the store's tables from a full scan and mounts it (see
    /// `oftl::Damaged::Rebuild`).
    #[cfg(feature = "alloc")]
    fn mount_rebuild(&mut self) -> Result<(), Error<Self::FlashError>>;
    /// What the last repair or rebuild mount left out.
    fn salvage_report(&self) -> &SalvageReport;
    /// Makes everything durable and unmounts.
    fn unmount(&mut self) -> Result<(), Error<Self::FlashError>>;
    /// Forgets an object's writes not flushed yet (their commit failed and was
    /// reported): it reads as its last flush left it.
    fn discard(&mut self, obj: ObjectId);
    /// Object payload bytes per page.
    fn payload(&self) -> usize;
    /// Largest object size.
    fn max_object_size(&self) -> u64;
    /// The id the next created object gets.
    fn next_object_id(&self) -> ObjectId;
    /// Reads from `offset`; returns the bytes read (short at the object's end).
    fn read(
        &mut self,
        obj: ObjectId,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<usize, Error<Self::FlashError>>;
    /// Writes (buffered until `flush`).
    fn write(
        &mut self,
        obj: ObjectId,
        offset: u64,
        data: &[u8],
    ) -> Result<(), Error<Self::FlashError>>;
    /// Makes an object's writes durable.
    fn flush(&mut self, obj: ObjectId) -> Result<(), Error<Self::FlashError>>;
    /// An object's size (buffered writes included).
    fn size(&mut self, obj: ObjectId) -> Result<u64, Error<Self::FlashError>>;
    /// Applies `ops` atomically and durably.
    fn transact(&mut self, ops: &[TxOp<'_>]) -> Result<(), Error<Self::FlashError>>;
    /// [`Store::transact`] for a remove: one that adds no page may use the room kept
    /// for deletes (oftl's [`Oftl::transact_removing`]).
    fn transact_removing(&mut self, ops: &[TxOp<'_>]) -> Result<(), Error<Self::FlashError>>;
    /// Makes everything durable and checkpoints.
    fn sync(&mut self) -> Result<(), Error<Self::FlashError>>;
    /// An object's user attributes.
    fn attrs(&mut self, obj: ObjectId) -> Result<[u8; ATTR_LEN], Error<Self::FlashError>>;
    /// Makes an object's writes durable together with new user attributes.
    fn flush_with_attrs(
        &mut self,
        obj: ObjectId,
        attrs: &[u8; ATTR_LEN],
    ) -> Result<(), Error<Self::FlashError>>;
    /// Largest log record.
    fn log_max_record(&self) -> usize;
    /// Appends one record to a log stream, durably; returns its LSN.
    fn log_append(&mut self, stream: ObjectId, data: &[u8])
        -> Result<u64, Error<Self::FlashError>>;
    /// The first record at or after `lsn` (copied to the start of `buf`).
    fn log_read(
        &mut self,
        stream: ObjectId,
        lsn: u64,
        buf: &mut [u8],
    ) -> Result<Option<LogRecord>, Error<Self::FlashError>>;
    /// Whether a flash error is data lost for good (an uncorrectable read after the
    /// store's retries), not a failure of the device or the bus that a retry or a
    /// remount may get past: only then may a repair drop what the page held.
    fn is_data_loss(e: &Self::FlashError) -> bool;
    /// `(first, end)` LSNs of a log stream.
    fn log_bounds(&mut self, stream: ObjectId) -> Result<(u64, u64), Error<Self::FlashError>>;
    /// Drops the records below `lsn`, durably.
    fn log_trim(&mut self, stream: ObjectId, lsn: u64) -> Result<(), Error<Self::FlashError>>;
    /// Whether an object exists (and is a plain object, not a log stream).
    fn is_object(&mut self, obj: ObjectId) -> Result<bool, Error<Self::FlashError>>;
    /// Whether the store takes writes (not read-only).
    fn writable(&self) -> bool;
    /// Whether the store is mounted read-only (too many bad blocks, a salvage): unlike
    /// `!writable()`, not when it is unmounted or poisoned.
    fn read_only(&self) -> bool;
    /// One bounded step of garbage collection (at most `budget` page copies); whether
    /// more would be useful now.
    fn gc_step(&mut self, budget: u32) -> Result<bool, Error<Self::FlashError>>;
    /// Pages programmed through the store's write heads since mount (a counter the
    /// staging layer reads before and after its own calls to learn what they cost).
    fn pages_programmed(&self) -> u64;
    /// Erase blocks the store manages (bounds loops over whole collections).
    fn block_count(&self) -> u32;
    /// The lowest live object id above `after` (the lowest of all for `None`): a walk
    /// over every object, log streams included (see `Fs::unnamed_objects`).
    fn next_object(
        &mut self,
        after: Option<ObjectId>,
    ) -> Result<Option<ObjectId>, Error<Self::FlashError>>;
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
    > Store for Oftl<F, PAGE, BLOCKS, CACHE, WBUF, P, META, LOG>
{
    type FlashError = F::Error;

    fn format(&mut self) -> Result<(), Error<F::Error>> {
        if LOG == 0 {
            // The staging log is a log stream: a store built without a log tail page
            // (`oftl::W25n01gvSmall`) cannot hold a volume. Refused before any erase.
            return Err(Error::Format(FormatError::Unsupported(Mismatch::Capacity)));
        }
        Oftl::format(self).map_err(Error::Format)
    }

    fn mount(&mut self) -> Result<(), Error<F::Error>> {
        if LOG == 0 {
            return Err(Error::Mount(MountError::Mismatch(Mismatch::Capacity)));
        }
        Oftl::mount(self).map_err(Error::Mount)?;
        let s = self.stats();
        info!(
            "stagefs: store mounted ({} pages scanned, {} replayed by crash recovery; {:?})",
            s.recovery_scanned_pages,
            s.recovery_replayed_pages,
            self.health()
        );
        Ok(())
    }

    fn mount_repair(&mut self) -> Result<(), Error<F::Error>> {
        if LOG == 0 {
            return Err(Error::Mount(MountError::Mismatch(Mismatch::Capacity)));
        }
        self.mount_damaged(Damaged::Repair).map_err(Error::Mount)?;
        let r = Oftl::salvage_report(self);
        warn!(
            "stagefs: store repaired in place (unreadable pages {:?}, back to the checkpoint: {}; rolled back: {:?}, more: {})",
            r.unreadable_pages(),
            r.to_checkpoint(),
            r.rolled_back(),
            r.more()
        );
        Ok(())
    }

    #[cfg(feature = "alloc")]
    fn mount_rebuild(&mut self) -> Result<(), Error<F::Error>> {
        // A file whose metadata page was lost comes back with its staged writes taken
        // as home (what staging held for it is gone; it is named) and as adopted by a
        // directory, so the staging replay neither re-applies old records over it nor
        // deletes it.
        if LOG == 0 {
            return Err(Error::Mount(MountError::Mismatch(Mismatch::Capacity)));
        }
        self.mount_damaged(Damaged::Rebuild {
            lost_meta_attrs: crate::stage::attrs_for(u64::MAX),
        })
        .map_err(Error::Mount)?;
        let r = Oftl::salvage_report(self);
        warn!(
            "stagefs: store rebuilt from a full scan (unreadable pages {:?}, in doubt: {:?}, more: {})",
            r.unreadable_pages(),
            r.rolled_back(),
            r.more()
        );
        Ok(())
    }

    fn salvage_report(&self) -> &SalvageReport {
        Oftl::salvage_report(self)
    }

    fn unmount(&mut self) -> Result<(), Error<F::Error>> {
        Ok(Oftl::unmount(self)?)
    }

    fn discard(&mut self, obj: ObjectId) {
        Oftl::discard(self, obj)
    }

    fn payload(&self) -> usize {
        Oftl::payload(self) as usize
    }

    fn max_object_size(&self) -> u64 {
        Oftl::max_object_size(self)
    }

    fn next_object_id(&self) -> ObjectId {
        Oftl::next_object_id(self)
    }

    fn read(
        &mut self,
        obj: ObjectId,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<usize, Error<F::Error>> {
        Ok(Oftl::read(self, obj, offset, buf)?)
    }

    fn write(&mut self, obj: ObjectId, offset: u64, data: &[u8]) -> Result<(), Error<F::Error>> {
        Ok(Oftl::write(self, obj, offset, data)?)
    }

    fn flush(&mut self, obj: ObjectId) -> Result<(), Error<F::Error>> {
        Ok(Oftl::flush(self, obj)?)
    }

    fn size(&mut self, obj: ObjectId) -> Result<u64, Error<F::Error>> {
        Ok(Oftl::size(self, obj)?)
    }

    fn transact(&mut self, ops: &[TxOp<'_>]) -> Result<(), Error<F::Error>> {
        Ok(Oftl::transact(self, ops)?)
    }

    fn transact_removing(&mut self, ops: &[TxOp<'_>]) -> Result<(), Error<F::Error>> {
        Ok(Oftl::transact_removing(self, ops)?)
    }

    fn sync(&mut self) -> Result<(), Error<F::Error>> {
        Ok(Oftl::sync(self)?)
    }

    fn attrs(&mut self, obj: ObjectId) -> Result<[u8; ATTR_LEN], Error<F::Error>> {
        Ok(Oftl::attrs(self, obj)?.user)
    }

    fn flush_with_attrs(
        &mut self,
        obj: ObjectId,
        attrs: &[u8; ATTR_LEN],
    ) -> Result<(), Error<F::Error>> {
        Ok(Oftl::flush_with_attrs(self, obj, attrs)?)
    }

    fn log_max_record(&self) -> usize {
        Oftl::log_max_record(self)
    }

    fn log_append(&mut self, stream: ObjectId, data: &[u8]) -> Result<u64, Error<F::Error>> {
        Ok(Oftl::log_append(self, stream, data)?)
    }

    fn log_read(
        &mut self,
        stream: ObjectId,
        lsn: u64,
        buf: &mut [u8],
    ) -> Result<Option<LogRecord>, Error<F::Error>> {
        Ok(Oftl::log_read(self, stream, lsn, buf)?)
    }

    fn is_data_loss(e: &F::Error) -> bool {
        nand_hal::Error::kind(e) == nand_hal::ErrorKind::Uncorrectable
    }

    fn log_bounds(&mut self, stream: ObjectId) -> Result<(u64, u64), Error<F::Error>> {
        Ok(Oftl::log_bounds(self, stream)?)
    }

    fn log_trim(&mut self, stream: ObjectId, lsn: u64) -> Result<(), Error<F::Error>> {
        Ok(Oftl::log_trim(self, stream, lsn)?)
    }

    fn writable(&self) -> bool {
        Oftl::health(self) == oftl::Health::Writable
    }

    fn read_only(&self) -> bool {
        matches!(Oftl::health(self), oftl::Health::ReadOnly(_))
    }

    fn gc_step(&mut self, budget: u32) -> Result<bool, Error<F::Error>> {
        Ok(Oftl::gc_step(self, budget)?.more)
    }

    fn pages_programmed(&self) -> u64 {
        self.stats().pages_programmed
    }

    fn block_count(&self) -> u32 {
        Oftl::blocks(self).len() as u32
    }

    fn next_object(
        &mut self,
        after: Option<ObjectId>,
    ) -> Result<Option<ObjectId>, Error<F::Error>> {
        Ok(Oftl::next_object(self, after)?)
    }

    fn is_object(&mut self, obj: ObjectId) -> Result<bool, Error<F::Error>> {
        if !Oftl::exists(self, obj)? {
            return Ok(false);
        }
        Ok(Oftl::attrs(self, obj)?.kind == ObjKind::Object)
    }
}
