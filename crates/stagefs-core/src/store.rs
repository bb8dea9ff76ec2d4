//! The object store the file layer stands on, as a trait: the operations of
//! [`oftl::Oftl`] the file layer calls, with errors already in the file layer's shape.
//! Implemented for every `Oftl`.

use nand_hal::NandFlash;
use oftl::{Config, ObjectId, Oftl, SpacePolicy, TxOp};

use crate::error::Error;

/// What the file layer needs from the object store below it.
pub trait Store {
    /// The flash's error.
    type FlashError;

    /// Formats the device (everything on it is lost).
    fn format(&mut self, config: Config) -> Result<(), Error<Self::FlashError>>;
    /// Mounts (recovering after a crash).
    fn mount(&mut self) -> Result<(), Error<Self::FlashError>>;
    /// Makes everything durable and unmounts.
    fn unmount(&mut self) -> Result<(), Error<Self::FlashError>>;
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
    /// Makes everything durable and checkpoints.
    fn sync(&mut self) -> Result<(), Error<Self::FlashError>>;
}

impl<
        F: NandFlash,
        P: SpacePolicy,
        const PAGE: usize,
        const BLOCKS: usize,
        const CACHE: usize,
        const WBUF: usize,
    > Store for Oftl<F, PAGE, BLOCKS, CACHE, WBUF, P>
{
    type FlashError = F::Error;

    fn format(&mut self, config: Config) -> Result<(), Error<F::Error>> {
        self.format_in_place(config).map_err(Error::Format)
    }

    fn mount(&mut self) -> Result<(), Error<F::Error>> {
        self.mount_in_place().map_err(Error::Mount)
    }

    fn unmount(&mut self) -> Result<(), Error<F::Error>> {
        Ok(self.unmount_in_place()?)
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

    fn sync(&mut self) -> Result<(), Error<F::Error>> {
        Ok(Oftl::sync(self)?)
    }
}
