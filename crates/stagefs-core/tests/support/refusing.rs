//! A store that refuses one chosen transaction with `NoSpace` and passes everything
//! else through: failures between two transactions of one file-layer call (a promote
//! taken, its adoption refused) that a filled part hits only by chance. It also counts
//! the whole pages the file layer reads, for bounds on the reads of one call.

use std::cell::Cell;
use std::rc::Rc;

use oftl::{LogRecord, ObjectId, SalvageReport, TxOp, ATTR_LEN};
use stagefs_core::{Error, Fs, Store};

use super::{cfg, Sim};

/// `inner` with its `refuse`-th transaction from now (0: the next) refused.
pub struct Refusing<S> {
    pub inner: S,
    /// Transactions (`transact` and `transact_removing`) to let through before the
    /// refused one; `None`: refuse none.
    pub refuse: Option<u32>,
    /// Transactions refused so far.
    pub refused: u32,
    /// Reads of a whole page (a payload's length) so far (shared, so that a test can
    /// read it while an iterator borrows the volume).
    pub page_reads: Rc<Cell<u32>>,
}

pub type Vol<'a> = Fs<Refusing<super::Store<'a>>, 2048, 4>;

/// A volume on `sim` whose store refuses nothing until told.
pub fn vol(sim: &mut Sim) -> Vol<'_> {
    Fs::new(Refusing {
        inner: super::Store::new(sim, cfg(), oftl::Greedy::DEFAULT),
        refuse: None,
        refused: 0,
        page_reads: Rc::default(),
    })
}

impl<S: Store> Refusing<S> {
    fn gate(&mut self) -> Result<(), Error<S::FlashError>> {
        match self.refuse {
            Some(0) => {
                self.refuse = None;
                self.refused += 1;
                Err(Error::NoSpace)
            }
            Some(n) => {
                self.refuse = Some(n - 1);
                Ok(())
            }
            None => Ok(()),
        }
    }
}

impl<S: Store> Store for Refusing<S> {
    type FlashError = S::FlashError;

    fn format(&mut self) -> Result<(), Error<S::FlashError>> {
        self.inner.format()
    }
    fn mount(&mut self) -> Result<(), Error<S::FlashError>> {
        self.inner.mount()
    }
    fn mount_repair(&mut self) -> Result<(), Error<S::FlashError>> {
        self.inner.mount_repair()
    }
    #[cfg(feature = "alloc")]
    fn mount_rebuild(&mut self) -> Result<(), Error<S::FlashError>> {
        self.inner.mount_rebuild()
    }
    fn salvage_report(&self) -> &SalvageReport {
        self.inner.salvage_report()
    }
    fn unmount(&mut self) -> Result<(), Error<S::FlashError>> {
        self.inner.unmount()
    }
    fn discard(&mut self, obj: ObjectId) {
        self.inner.discard(obj)
    }
    fn payload(&self) -> usize {
        self.inner.payload()
    }
    fn max_object_size(&self) -> u64 {
        self.inner.max_object_size()
    }
    fn next_object_id(&self) -> ObjectId {
        self.inner.next_object_id()
    }
    fn read(
        &mut self,
        obj: ObjectId,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<usize, Error<S::FlashError>> {
        if buf.len() == self.inner.payload() {
            self.page_reads.set(self.page_reads.get() + 1);
        }
        self.inner.read(obj, offset, buf)
    }
    fn write(
        &mut self,
        obj: ObjectId,
        offset: u64,
        data: &[u8],
    ) -> Result<(), Error<S::FlashError>> {
        self.inner.write(obj, offset, data)
    }
    fn flush(&mut self, obj: ObjectId) -> Result<(), Error<S::FlashError>> {
        self.inner.flush(obj)
    }
    fn size(&mut self, obj: ObjectId) -> Result<u64, Error<S::FlashError>> {
        self.inner.size(obj)
    }
    fn transact(&mut self, ops: &[TxOp<'_>]) -> Result<(), Error<S::FlashError>> {
        self.gate()?;
        self.inner.transact(ops)
    }
    fn transact_removing(&mut self, ops: &[TxOp<'_>]) -> Result<(), Error<S::FlashError>> {
        self.gate()?;
        self.inner.transact_removing(ops)
    }
    fn sync(&mut self) -> Result<(), Error<S::FlashError>> {
        self.inner.sync()
    }
    fn attrs(&mut self, obj: ObjectId) -> Result<[u8; ATTR_LEN], Error<S::FlashError>> {
        self.inner.attrs(obj)
    }
    fn flush_with_attrs(
        &mut self,
        obj: ObjectId,
        attrs: &[u8; ATTR_LEN],
    ) -> Result<(), Error<S::FlashError>> {
        self.inner.flush_with_attrs(obj, attrs)
    }
    fn log_max_record(&self) -> usize {
        self.inner.log_max_record()
    }
    fn log_append(&mut self, stream: ObjectId, data: &[u8]) -> Result<u64, Error<S::FlashError>> {
        self.inner.log_append(stream, data)
    }
    fn log_read(
        &mut self,
        stream: ObjectId,
        lsn: u64,
        buf: &mut [u8],
    ) -> Result<Option<LogRecord>, Error<S::FlashError>> {
        self.inner.log_read(stream, lsn, buf)
    }
    fn is_data_loss(e: &S::FlashError) -> bool {
        S::is_data_loss(e)
    }
    fn log_bounds(&mut self, stream: ObjectId) -> Result<(u64, u64), Error<S::FlashError>> {
        self.inner.log_bounds(stream)
    }
    fn log_trim(&mut self, stream: ObjectId, lsn: u64) -> Result<(), Error<S::FlashError>> {
        self.inner.log_trim(stream, lsn)
    }
    fn is_object(&mut self, obj: ObjectId) -> Result<bool, Error<S::FlashError>> {
        self.inner.is_object(obj)
    }
    fn writable(&self) -> bool {
        self.inner.writable()
    }
    fn read_only(&self) -> bool {
        self.inner.read_only()
    }
    fn gc_step(&mut self, budget: u32) -> Result<bool, Error<S::FlashError>> {
        self.inner.gc_step(budget)
    }
    fn pages_programmed(&self) -> u64 {
        self.inner.pages_programmed()
    }
    fn block_count(&self) -> u32 {
        self.inner.block_count()
    }
    fn next_object(
        &mut self,
        after: Option<ObjectId>,
    ) -> Result<Option<ObjectId>, Error<S::FlashError>> {
        self.inner.next_object(after)
    }
}
