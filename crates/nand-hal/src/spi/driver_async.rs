//! The async driver: [`asynch::NandFlash`] over an `embedded-hal-async` [`SpiDevice`],
//! running the blocking driver's command sequences (`seq.rs`).

use embedded_hal_async::delay::DelayNs;
use embedded_hal_async::spi::SpiDevice;

use super::chips::{ChipInfo, CHIPS};
use super::driver::{Async, Res, SpiNand};
use super::error::SpiNandError;
use super::seq::{Seq, Step};
use crate::asynch::{self, ReadReport, StepReport};
use crate::capabilities::Capabilities;
use crate::error::ErrorType;
use crate::geometry::{BlockAddr, Geometry, PageAddr};

/// The SPI NAND driver over an `embedded-hal-async` bus and delay: the same command
/// sequences, chip table and decoding as the blocking [`SpiNand`], built with
/// [`SpiNand::new_async`] or [`SpiNand::with_table_async`].
///
/// # Cancel safety
///
/// Every operation may be dropped at any await point (the bus transactions and the
/// delays between status polls); the driver stays usable and the next operation
/// recovers by itself. What a dropped operation leaves on the chip, and what the next
/// one does about it:
///
/// - **Dropped at a die select** (`C2h`, W25M): either die is selected. The driver
///   forgets the selected die before it sends the select and learns it only once the
///   select completed, so the next operation selects again.
/// - **Dropped after a page read (`13h`)**: the part is busy loading the page, then holds
///   it in the cache register. The driver marks the die "maybe busy" before it sends any
///   array command and clears the mark only when a status read saw the die idle; the next
///   operation on that die, or one that must select another die first, polls the status
///   until OIP = 0 (bounded: [`SpiNandError::Timeout`]) before its first command. Its own
///   page read or program load then replaces the cache.
/// - **Dropped during a read from cache**: nothing changes on the chip.
/// - **Dropped after write enable (`06h`) or a program load**: WEL stays latched and the
///   cache holds part of the data. Reads do not care; every program and erase sends
///   write enable again, and every program starts with a first load (`02h`) that resets
///   the cache to `FFh`, so stale bytes are never programmed.
/// - **Dropped after program execute (`10h`) or block erase (`D8h`), or while polling**:
///   the operation runs to its end on the chip (done, or failed with P_FAIL/E_FAIL), and
///   the next operation waits for it as above. Its outcome is lost with the future: see
///   [`crate::asynch`] ("Cancellation") for what the caller must assume about that page
///   or block. `mark_bad` dropped after its erase leaves the block erased but not marked.
/// - **`new_async` or `reinit` dropped part way**: the part is partly configured; build
///   the driver again or call `reinit` again.
///
/// A transaction cut short inside its chip-select window is the `SpiDevice`'s business:
/// an implementation that raises chip select when its future is dropped (as embassy's
/// do) leaves a command with a short address, which the parts ignore, or a partial
/// program load, covered above.
pub type SpiNandAsync<SPI, D> = SpiNand<SPI, D, Async>;

impl<SPI: SpiDevice, D: DelayNs> SpiNand<SPI, D, Async> {
    /// As [`SpiNand::new`]: resets, identifies and configures the part.
    pub async fn new_async(spi: SPI, delay: D) -> Res<Self, SPI::Error> {
        Self::with_table_async(spi, delay, CHIPS).await
    }

    /// As [`SpiNand::with_table`].
    pub async fn with_table_async(spi: SPI, delay: D, table: &[ChipInfo]) -> Res<Self, SPI::Error> {
        let mut this = Self::from_parts(spi, delay);
        this.run(Seq::probe(table)).await?;
        Ok(this)
    }

    /// As [`SpiNand::reinit`].
    pub async fn reinit(&mut self) -> Res<(), SPI::Error> {
        self.run(Seq::configure()).await.map(drop)
    }

    /// Carries `seq`'s steps to the bus until it is done.
    async fn run<'b>(&mut self, mut seq: Seq<'b>) -> Res<Seq<'b>, SPI::Error> {
        loop {
            match seq.next(&mut self.core)? {
                Step::Bus(mut ops) => self
                    .spi
                    .transaction(ops.as_mut())
                    .await
                    .map_err(SpiNandError::Spi)?,
                Step::Delay(ns) => self.delay.delay_ns(ns).await,
                Step::Done => return Ok(seq),
            }
        }
    }
}

impl<SPI: SpiDevice, D: DelayNs> ErrorType for SpiNand<SPI, D, Async> {
    type Error = SpiNandError<SPI::Error>;
}

impl<SPI: SpiDevice, D: DelayNs> asynch::NandFlash for SpiNand<SPI, D, Async> {
    fn geometry(&self) -> Geometry {
        self.core.chip.geometry
    }

    fn capabilities(&self) -> &Capabilities {
        &self.core.chip.capabilities
    }

    async fn read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, Self::Error> {
        let seq = Seq::read(page, column, data, oob, false);
        Ok(self.run(seq).await?.read_report())
    }

    async fn read_steps(
        &mut self,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<StepReport, Self::Error> {
        let seq = Seq::read(page, 0, data, oob, true);
        Ok(self.run(seq).await?.step_report())
    }

    fn delivers_good_steps(&self) -> bool {
        true
    }

    async fn program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), Self::Error> {
        let seq = Seq::program(page, column, data, oob);
        self.run(seq).await.map(drop)
    }

    async fn erase(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        self.run(Seq::erase(block)).await.map(drop)
    }

    async fn is_bad(&mut self, block: BlockAddr) -> Result<bool, Self::Error> {
        Ok(self.run(Seq::is_bad(block)).await?.bad())
    }

    async fn is_marked(&mut self, block: BlockAddr) -> Result<bool, Self::Error> {
        Ok(self.run(Seq::is_bad(block)).await?.marked())
    }

    async fn mark_bad(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        self.run(Seq::mark_bad(block)).await.map(drop)
    }
}
