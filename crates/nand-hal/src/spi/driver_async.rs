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
/// Every operation may be dropped at any await point; the driver stays usable and the
/// next operation recovers by itself. The await points are the bus transactions and the
/// delays between status polls. What a dropped operation leaves on the chip:
///
/// | dropped                                  | left on the chip                           | the next operation                        |
/// |------------------------------------------|--------------------------------------------|-------------------------------------------|
/// | during a die select (`C2h`, W25M)         | either die selected                        | forgets the die first and selects again   |
/// | after a page read (`13h`) was sent        | the part busy reading, then a page in the cache register | waits for OIP = 0 before its first command; its own page read or program load replaces the cache |
/// | during a read from cache                 | nothing (the cache register is read-only to it) | —                                     |
/// | after write enable, before the execute   | WEL latched, a partly loaded cache         | reads ignore WEL; programs and erases send write enable and a first load (`02h`, which clears the cache to `FFh`) again |
/// | after program execute / block erase       | the operation running (OIP = 1), then done or failed (P_FAIL/E_FAIL) | waits for OIP = 0 (bounded: `Timeout`) before its first command |
/// | while polling                            | as above                                   | as above                                  |
///
/// The driver marks a die "maybe busy" before it sends an array command and clears the
/// mark only when a status read saw the die idle, and it forgets the selected die before
/// a die select and learns it only when the select completed; so what it believes is
/// true at every await point. A started program or erase therefore finishes (or fails)
/// on the chip whatever the caller does; its outcome is lost with the future. See
/// [`crate::asynch`] ("Cancellation") for what the caller must assume about that page or
/// block. `mark_bad` dropped after its erase leaves the block erased and not yet marked.
/// `new_async`/`reinit` dropped part way leave the part partly configured: build the
/// driver again or call `reinit` again.
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

    async fn mark_bad(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        self.run(Seq::mark_bad(block)).await.map(drop)
    }
}
