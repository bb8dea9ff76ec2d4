//! Async NAND trait (feature `async`): [`NandFlash`] is the blocking
//! [`crate::NandFlash`] with `async` operations, for executors such as embassy; and
//! [`BlockOn`], which makes any async implementation a blocking one.
//!
//! # The contract
//!
//! It is the blocking trait's, unchanged and written once: see the [`crate::blocking`]
//! module docs for what an implementation guarantees, what the caller guarantees, power
//! loss (both directions), reads that fail, reading past a failed step and what counts as
//! erased. The types are the same ones: [`ErrorType`], [`crate::Error::kind`],
//! [`Geometry`], [`Capabilities`], [`ReadReport`], [`StepReport`]. The async methods
//! mean exactly what the blocking methods of the same name mean; a future that completes
//! has done what the blocking call would have done when it returned.
//!
//! # Cancellation
//!
//! A future dropped before it completes (a `select` with a timeout, a task cancelled)
//! is a case the blocking trait does not have. Power stays on, so the part finishes
//! whatever array operation it had started. Implementations guarantee:
//!
//! - **The device stays usable.** The next call on the implementation works as if the
//!   cancelled one had either completed or never started; if the part is still busy with
//!   it, the next call waits for it first. No reset, no re-initialisation is needed.
//! - **A cancelled read** changes nothing on the flash; its buffers hold undefined bytes.
//! - **A cancelled program** either did not happen or ran whole; which one, and whether it
//!   failed, is lost. The caller treats the ECC steps it carried as a power cut during the
//!   program leaves them (see "Power loss" in [`crate::blocking`]): suspect until read with
//!   its own checks, counted against NOP, never programmed again before an erase. Only
//!   the steps it carried: the page's other steps and every other page are unharmed.
//! - **A cancelled erase** either did not happen or ran whole: erase the block again
//!   before use, as after an interrupted erase.
//! - **A cancelled `mark_bad`** may have erased the block without marking it: mark it
//!   again.
//!
//! Each implementation documents what it leaves on the chip at each await point (for the
//! SPI NAND driver, see `spi::SpiNandAsync`).
//!
//! # Blocking over async
//!
//! [`BlockOn`] implements the blocking [`crate::NandFlash`] over any async
//! [`NandFlash`] by polling each future to completion with [`block_on`] (a busy loop, no
//! allocator, no waker): one async driver then serves blocking code too, and the
//! blocking conformance suite ([`crate::conformance::run`]) runs on async drivers.

use core::future::Future;
use core::pin::pin;
use core::task::{Context, Poll, Waker};

use crate::capabilities::Capabilities;
use crate::error::ErrorType;
use crate::geometry::{BlockAddr, Geometry, PageAddr};
use crate::report::steps_from_read;
pub use crate::report::{ReadReport, StepReport, StepStatus};

/// A raw NAND device, async: the twin of the blocking [`crate::NandFlash`], with its
/// contract (see the [module docs](self), which add what a cancelled future leaves).
#[allow(async_fn_in_trait)]
pub trait NandFlash: ErrorType {
    /// The device geometry.
    fn geometry(&self) -> Geometry;

    /// The device capabilities (program unit, NOP, ECC, OOB layout, marker).
    fn capabilities(&self) -> &Capabilities;

    /// As [`crate::NandFlash::read`].
    async fn read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, Self::Error>;

    /// As [`crate::NandFlash::program`].
    async fn program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), Self::Error>;

    /// As [`crate::NandFlash::erase`].
    async fn erase(&mut self, block: BlockAddr) -> Result<(), Self::Error>;

    /// As [`crate::NandFlash::is_bad`].
    async fn is_bad(&mut self, block: BlockAddr) -> Result<bool, Self::Error>;

    /// As [`crate::NandFlash::is_marked`], with the same default.
    async fn is_marked(&mut self, block: BlockAddr) -> Result<bool, Self::Error> {
        self.is_bad(block).await
    }

    /// As [`crate::NandFlash::mark_bad`].
    async fn mark_bad(&mut self, block: BlockAddr) -> Result<(), Self::Error>;

    /// As [`crate::NandFlash::read_steps`], with the same default.
    async fn read_steps(
        &mut self,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<StepReport, Self::Error> {
        let r = self.read(page, 0, data, oob).await;
        steps_from_read(self.capabilities(), &self.geometry(), r)
    }

    /// As [`crate::NandFlash::delivers_good_steps`].
    fn delivers_good_steps(&self) -> bool {
        false
    }

    /// Reads a whole page: `data` must be exactly a page; `oob` up to the spare size.
    async fn read_page(
        &mut self,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, Self::Error> {
        self.read(page, 0, data, oob).await
    }

    /// Reads only the spare area (or its first `oob.len()` bytes).
    async fn read_oob(
        &mut self,
        page: PageAddr,
        oob: &mut [u8],
    ) -> Result<ReadReport, Self::Error> {
        self.read(page, 0, &mut [], oob).await
    }

    /// Programs a whole page.
    async fn program_page(
        &mut self,
        page: PageAddr,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), Self::Error> {
        self.program(page, 0, data, oob).await
    }
}

impl<T: NandFlash + ?Sized> NandFlash for &mut T {
    fn geometry(&self) -> Geometry {
        T::geometry(self)
    }
    fn capabilities(&self) -> &Capabilities {
        T::capabilities(self)
    }
    async fn read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, Self::Error> {
        T::read(self, page, column, data, oob).await
    }
    async fn read_steps(
        &mut self,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<StepReport, Self::Error> {
        T::read_steps(self, page, data, oob).await
    }
    fn delivers_good_steps(&self) -> bool {
        T::delivers_good_steps(self)
    }
    async fn program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), Self::Error> {
        T::program(self, page, column, data, oob).await
    }
    async fn erase(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        T::erase(self, block).await
    }
    async fn is_bad(&mut self, block: BlockAddr) -> Result<bool, Self::Error> {
        T::is_bad(self, block).await
    }
    async fn is_marked(&mut self, block: BlockAddr) -> Result<bool, Self::Error> {
        T::is_marked(self, block).await
    }
    async fn mark_bad(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        T::mark_bad(self, block).await
    }
}

/// Polls `future` to completion on the current thread: a busy loop with a waker that
/// does nothing, so it needs no allocator, no interrupt and no executor. Meant for
/// futures that make progress when polled again (drivers over a bus that completes by
/// itself, the chip model); under a real executor, `.await` instead.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

/// The blocking [`crate::NandFlash`] over an async [`NandFlash`]: each call polls the
/// async operation to completion with [`block_on`].
///
/// Used to run blocking code (and the conformance suite) on an async driver, and to
/// keep one async implementation for both worlds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockOn<T>(T);

impl<T> BlockOn<T> {
    /// Wraps an async device.
    pub const fn new(inner: T) -> Self {
        BlockOn(inner)
    }

    /// The async device.
    pub fn inner(&self) -> &T {
        &self.0
    }

    /// The async device, mutably.
    pub fn inner_mut(&mut self) -> &mut T {
        &mut self.0
    }

    /// Gives the async device back.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T: ErrorType> ErrorType for BlockOn<T> {
    type Error = T::Error;
}

impl<T: NandFlash> crate::blocking::NandFlash for BlockOn<T> {
    fn geometry(&self) -> Geometry {
        self.0.geometry()
    }
    fn capabilities(&self) -> &Capabilities {
        self.0.capabilities()
    }
    fn read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, Self::Error> {
        block_on(self.0.read(page, column, data, oob))
    }
    fn read_steps(
        &mut self,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<StepReport, Self::Error> {
        block_on(self.0.read_steps(page, data, oob))
    }
    fn delivers_good_steps(&self) -> bool {
        self.0.delivers_good_steps()
    }
    fn program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), Self::Error> {
        block_on(self.0.program(page, column, data, oob))
    }
    fn erase(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        block_on(self.0.erase(block))
    }
    fn is_bad(&mut self, block: BlockAddr) -> Result<bool, Self::Error> {
        block_on(self.0.is_bad(block))
    }
    fn is_marked(&mut self, block: BlockAddr) -> Result<bool, Self::Error> {
        block_on(self.0.is_marked(block))
    }
    fn mark_bad(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        block_on(self.0.mark_bad(block))
    }
}
