//! Blocking NAND traits.
//!
//! # The contract
//!
//! ## What an implementation (driver or simulator) guarantees
//!
//! - [`NandFlash::read`] returns the page's data and spare bytes after ECC, with the
//!   number of bits ECC corrected in the worst step it touched. It never returns
//!   uncorrectable data as good: that is [`ErrorKind::Uncorrectable`].
//! - [`NandFlash::program`] returns only when the program has finished; an error of kind
//!   [`ErrorKind::ProgramFailed`] means the page content is undefined. A successful
//!   program only cleared bits: `new = old AND written`.
//! - [`NandFlash::erase`] returns only when the block reads all `0xFF` (data and spare),
//!   or fails with [`ErrorKind::EraseFailed`] leaving the block undefined.
//! - Arguments are checked before anything reaches the chip: an address outside the
//!   geometry is [`ErrorKind::OutOfBounds`], a length or alignment the part cannot do is
//!   [`ErrorKind::Misuse`]. Implementations that can also detect rule violations
//!   (simulators) report them as [`ErrorKind::Misuse`].
//!
//! ## What the caller guarantees
//!
//! - Pages of a block are programmed in ascending order; a page may be skipped but never
//!   returned to until the block is erased.
//! - A page is programmed at most [`Capabilities::nop`] times between erases; each program
//!   covers whole program units (`column` and `data.len()` multiples of
//!   [`Capabilities::program_unit`]).
//! - With ECC, each ECC step (a program unit plus its protected spare bytes) is written at
//!   most once between erases. Bytes passed as `0xFF` are not written.
//! - No I/O other than [`NandFlash::is_bad`] / [`NandFlash::mark_bad`] to a block
//!   known to be bad.
//!
//! ## Power loss
//!
//! If power fails during an operation:
//!
//! - an interrupted **program** harms only the ECC steps it was programming (its
//!   *torn steps*: the program units it carried data for, with their protected spare
//!   bytes). On SLC NAND the inhibited cells of the page's other steps see ordinary
//!   program disturb and nothing more: their data and their ECC parity stay intact, and
//!   so do the steps earlier partial programs wrote. A torn step may hold any mix of
//!   old and new bits. With ECC it may read back correctly, fail as uncorrectable, or,
//!   when only a few of its bits landed, read back **erased with corrected bits** (the
//!   decoder "corrects" a nearly erased codeword to all `0xFF`). Its cells may be
//!   **unstable**: later reads of it may succeed and fail in any order (well, badly,
//!   well again); nothing may assume "good first, bad later". A torn step must not be
//!   trusted, nor programmed again; the page's later, unwritten steps must not be
//!   programmed either (a layer cannot tell them from a torn step that reads erased).
//!   On a part with a page-wide ECC status ([`EccReporting::PageWide`]) a torn step
//!   that fails makes [`NandFlash::read`] of *any* part of the page fail: read such a
//!   page with [`NandFlash::read_steps`], which delivers the good steps;
//! - an interrupted **erase** may leave the block with any content, including content
//!   that looks like the old data or like an erased block with a few flipped bits; the
//!   block must be erased again before use;
//! - no other page or block changes.
//!
//! A program that reports [`ErrorKind::ProgramFailed`] leaves its steps in the same
//! undefined state as an interrupted one (they may even read back right); the page's
//! other steps are unharmed.
//!
//! A layer above therefore records which blocks it may be programming or erasing, and
//! after an unclean shutdown treats exactly those as suspect (see the OFTL updating
//! window).
//!
//! ## Reads that fail
//!
//! [`ErrorKind::Uncorrectable`] may be transient: the same page can read well on the
//! next attempt (marginal cells, noise). A layer that must decide from a read whether
//! data exists retries a bounded number of times before it concludes anything, and
//! never takes one failed read for the end of its history.
//!
//! ## Reading past a failed step
//!
//! [`NandFlash::read`] never returns data from a step ECC could not correct. Where a
//! layer keeps independent, self-checking records in different steps of one page
//! (sector-granular appends), one failed step must not take the others with it:
//! [`NandFlash::read_steps`] reads the whole page and reports each step's outcome
//! ([`StepReport`]) instead of failing. On a part that reports per step
//! ([`EccReporting::PerStep`]) a step is [`StepStatus::Good`] or
//! [`StepStatus::Uncorrectable`]; on a page-wide part an uncorrectable status marks every
//! step [`StepStatus::Unknown`]: the buffer still holds what the chip made of each step
//! (corrected where it could), and the caller decides per step with its own checksums.
//! Nothing a read returns for an `Uncorrectable` or `Unknown` step may be trusted
//! without such a check.
//!
//! ## "Erased"
//!
//! A page counts as erased, and may be programmed, only if it has not been programmed
//! since its block's last erase. Reading all `0xFF` is evidence of that only with
//! [`ReadReport::corrected_bits`] == 0 ([`ReadReport::is_clean`]): an erased-looking
//! page with corrected bits may be a torn program whose few landed bits ECC hid.

use crate::capabilities::Capabilities;
#[allow(unused_imports)]
use crate::capabilities::EccReporting;
#[allow(unused_imports)]
use crate::error::ErrorKind;
use crate::error::ErrorType;
use crate::geometry::{BlockAddr, Geometry, PageAddr};
use crate::report::steps_from_read;
pub use crate::report::{ReadReport, StepReport, StepStatus};

/// A raw NAND device: page + spare read and program, block erase, bad-block marks.
///
/// One required method per job; the convenience methods are built on them.
pub trait NandFlash: ErrorType {
    /// The device geometry.
    fn geometry(&self) -> Geometry;

    /// The device capabilities (program unit, NOP, ECC, OOB layout, marker).
    fn capabilities(&self) -> &Capabilities;

    /// Reads `data.len()` bytes from offset `column` of `page`'s data area and
    /// `oob.len()` bytes from the start of its spare area. Either buffer may be empty.
    fn read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, Self::Error>;

    /// Programs `data` at offset `column` of `page`'s data area and `oob` over the start
    /// of its spare area, in one program operation (it counts once against NOP). Bytes
    /// given as `0xFF` are left as they are. `column` and `data.len()` must be multiples of
    /// the program unit; `data` may be empty to program spare bytes only.
    fn program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), Self::Error>;

    /// Erases `block` to all `0xFF`.
    fn erase(&mut self, block: BlockAddr) -> Result<(), Self::Error>;

    /// Whether `block` carries a bad-block marker (factory or grown).
    fn is_bad(&mut self, block: BlockAddr) -> Result<bool, Self::Error>;

    /// Whether `block`'s marker bytes on a marker page are all `0x00`, as
    /// [`NandFlash::mark_bad`] writes them: a marker that was written, not bits an
    /// interrupted erase left in the marker bytes (fault F3 leaves each bit of the block
    /// undefined, so such a block reads bad for [`NandFlash::is_bad`] 255 times in 256).
    /// A store that erased a block itself knows it was good, and uses this to tell a
    /// retirement it did not record from a cut erase. Allowed on a marked block, as
    /// `is_bad` is.
    ///
    /// The default answers [`NandFlash::is_bad`] (every marker counts as written): a
    /// driver that cannot read the bytes back loses a block to such a cut instead.
    fn is_marked(&mut self, block: BlockAddr) -> Result<bool, Self::Error> {
        self.is_bad(block)
    }

    /// Marks `block` bad. Its data is lost; later I/O to it other than `is_bad` is misuse.
    fn mark_bad(&mut self, block: BlockAddr) -> Result<(), Self::Error>;

    /// Reads a whole page (`data` exactly a page, `oob` up to the spare size) and
    /// reports ECC per step instead of failing on an uncorrectable one (see the module
    /// docs, "Reading past a failed step"). Errors are only those of the transfer
    /// itself (bounds, bus, power); an uncorrectable step is a [`StepStatus`].
    ///
    /// The default reads the page with [`NandFlash::read`]: every step `Good` with the
    /// read's worst count, or every step `Uncorrectable` (buffer undefined) when it
    /// fails. Implementations that can deliver the good steps of a failed page
    /// (software ECC, SPI NAND cache registers) override it.
    fn read_steps(
        &mut self,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<StepReport, Self::Error> {
        let r = self.read(page, 0, data, oob);
        steps_from_read(self.capabilities(), &self.geometry(), r)
    }

    /// Whether [`NandFlash::read_steps`] delivers the good steps of a page with a failed
    /// one (`false` for the default, built on `read`, which can only report the whole
    /// page uncorrectable). A layer that keeps independent records in the steps of one
    /// page (sector-granular appends) relies on it: without it, one torn step of a
    /// page-wide part hides the page's other steps. Wrappers forward it together with
    /// `read_steps`.
    fn delivers_good_steps(&self) -> bool {
        false
    }

    /// Reads a whole page: `data` must be exactly a page; `oob` up to the spare size.
    fn read_page(
        &mut self,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, Self::Error> {
        self.read(page, 0, data, oob)
    }

    /// Reads only the spare area (or its first `oob.len()` bytes).
    fn read_oob(&mut self, page: PageAddr, oob: &mut [u8]) -> Result<ReadReport, Self::Error> {
        self.read(page, 0, &mut [], oob)
    }

    /// Programs a whole page.
    fn program_page(&mut self, page: PageAddr, data: &[u8], oob: &[u8]) -> Result<(), Self::Error> {
        self.program(page, 0, data, oob)
    }
}

impl<T: NandFlash + ?Sized> NandFlash for &mut T {
    fn geometry(&self) -> Geometry {
        T::geometry(self)
    }
    fn capabilities(&self) -> &Capabilities {
        T::capabilities(self)
    }
    fn read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, Self::Error> {
        T::read(self, page, column, data, oob)
    }
    fn read_steps(
        &mut self,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<StepReport, Self::Error> {
        T::read_steps(self, page, data, oob)
    }
    fn delivers_good_steps(&self) -> bool {
        T::delivers_good_steps(self)
    }
    fn program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), Self::Error> {
        T::program(self, page, column, data, oob)
    }
    fn erase(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        T::erase(self, block)
    }
    fn is_bad(&mut self, block: BlockAddr) -> Result<bool, Self::Error> {
        T::is_bad(self, block)
    }
    fn is_marked(&mut self, block: BlockAddr) -> Result<bool, Self::Error> {
        T::is_marked(self, block)
    }
    fn mark_bad(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        T::mark_bad(self, block)
    }
}

/// Devices with several dies that can run array operations in the background, so work
/// on different dies (and channels) overlaps.
///
/// At most one operation is outstanding per die. `start_*` returns once the device has
/// accepted the operation (a DMA-capable controller returns before the transfer ends);
/// the transfer and the array phase (tPROG, tBERS) continue in the background. The
/// caller must keep `data` unchanged only for the duration of the call: implementations
/// copy it (into the chip's cache register or a queue) before returning.
/// [`PipelinedNand::wait_die`] reports the outcome of the die's outstanding operation.
/// Starting work on a die that still has an outstanding operation, or issuing a
/// blocking [`NandFlash`] operation on it, is [`ErrorKind::Misuse`]: wait first.
pub trait PipelinedNand: NandFlash {
    /// Starts a program (same rules as [`NandFlash::program`]).
    fn start_program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), Self::Error>;

    /// Starts an erase.
    fn start_erase(&mut self, block: BlockAddr) -> Result<(), Self::Error>;

    /// Whether die `die` (device-wide index) has an outstanding operation that has not
    /// been waited for.
    fn die_busy(&self, die: u32) -> bool;

    /// Waits for die `die`'s outstanding operation and returns its result (`Ok` if none).
    fn wait_die(&mut self, die: u32) -> Result<(), Self::Error>;

    /// Waits for every die; returns the first failure (all dies are waited for anyway).
    fn wait_all(&mut self) -> Result<(), Self::Error> {
        let mut first = Ok(());
        for d in 0..self.geometry().dies() {
            let r = self.wait_die(d);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}
