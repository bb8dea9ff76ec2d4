//! The driver: [`NandFlash`] over an `embedded-hal` [`SpiDevice`] (and, in
//! `driver_async.rs`, its async twin). The command sequences are in `seq.rs`; a driver
//! only carries their steps to its bus.

use core::marker::PhantomData;

use embedded_hal::delay::DelayNs;
use embedded_hal::spi::SpiDevice;

use super::chips::{ChipInfo, CHIPS};
use super::error::SpiNandError;
use super::seq::{Core, Seq, Step};
use crate::blocking::{NandFlash, ReadReport, StepReport};
use crate::capabilities::Capabilities;
use crate::error::ErrorType;
use crate::geometry::{BlockAddr, Geometry, PageAddr};

/// Mode of a [`SpiNand`] over a blocking `embedded-hal` bus (the default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocking;

/// Mode of a [`SpiNand`] over an `embedded-hal-async` bus: see
/// `SpiNandAsync` (feature `async`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Async;

/// A generic SPI NAND driver.
///
/// Owns the bus (an [`SpiDevice`], so chip select and bus sharing are the HAL's
/// business) and a delay used between status polls. Built with [`SpiNand::new`] (the
/// built-in table) or [`SpiNand::with_table`]; `M` is [`Blocking`] for these, [`Async`]
/// for the async driver (`SpiNand::new_async`, feature `async`), which runs the same
/// command sequences.
///
/// See the [module documentation](super) for the command sequences, timing and
/// power-loss behaviour.
#[derive(Debug)]
pub struct SpiNand<SPI, D, M = Blocking> {
    pub(super) spi: SPI,
    pub(super) delay: D,
    pub(super) core: Core,
    mode: PhantomData<M>,
}

pub(super) type Res<T, E> = Result<T, SpiNandError<E>>;

impl<SPI, D, M> SpiNand<SPI, D, M> {
    pub(super) const fn from_parts(spi: SPI, delay: D) -> Self {
        SpiNand {
            spi,
            delay,
            core: Core::new(),
            mode: PhantomData,
        }
    }

    /// The table entry of the part found.
    pub fn chip(&self) -> &ChipInfo {
        &self.core.chip
    }

    /// The bus, e.g. to reach a chip model's controls in tests. Commands sent directly
    /// may leave the part in a state the driver does not expect.
    pub fn bus_mut(&mut self) -> &mut SPI {
        &mut self.spi
    }

    /// The bus.
    pub fn bus(&self) -> &SPI {
        &self.spi
    }

    /// Gives the bus and delay back.
    pub fn release(self) -> (SPI, D) {
        (self.spi, self.delay)
    }
}

impl<SPI: SpiDevice, D: DelayNs> SpiNand<SPI, D> {
    /// Resets the part, identifies it against the built-in table and configures it
    /// (block protection off, ECC on, Winbond buffer mode).
    pub fn new(spi: SPI, delay: D) -> Res<Self, SPI::Error> {
        Self::with_table(spi, delay, CHIPS)
    }

    /// As [`SpiNand::new`] with a caller-provided chip table.
    pub fn with_table(spi: SPI, delay: D, table: &[ChipInfo]) -> Res<Self, SPI::Error> {
        let mut this = Self::from_parts(spi, delay);
        this.run(Seq::probe(table))?;
        Ok(this)
    }

    /// Brings every die to the configuration the driver relies on. Call it again after
    /// the part lost power (the protection bits come back set).
    pub fn reinit(&mut self) -> Res<(), SPI::Error> {
        self.run(Seq::configure()).map(drop)
    }

    /// Carries `seq`'s steps to the bus until it is done.
    fn run<'b>(&mut self, mut seq: Seq<'b>) -> Res<Seq<'b>, SPI::Error> {
        loop {
            match seq.next(&mut self.core)? {
                Step::Bus(mut ops) => self
                    .spi
                    .transaction(ops.as_mut())
                    .map_err(SpiNandError::Spi)?,
                Step::Delay(ns) => self.delay.delay_ns(ns),
                Step::Done => return Ok(seq),
            }
        }
    }
}

impl<SPI: SpiDevice, D: DelayNs> ErrorType for SpiNand<SPI, D> {
    type Error = SpiNandError<SPI::Error>;
}

impl<SPI: SpiDevice, D: DelayNs> NandFlash for SpiNand<SPI, D> {
    fn geometry(&self) -> Geometry {
        self.core.chip.geometry
    }

    fn capabilities(&self) -> &Capabilities {
        &self.core.chip.capabilities
    }

    fn read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, Self::Error> {
        let seq = self.run(Seq::read(page, column, data, oob, false))?;
        Ok(seq.read_report())
    }

    fn read_steps(
        &mut self,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<StepReport, Self::Error> {
        Ok(self.run(Seq::read(page, 0, data, oob, true))?.step_report())
    }

    fn delivers_good_steps(&self) -> bool {
        true
    }

    fn program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), Self::Error> {
        self.run(Seq::program(page, column, data, oob)).map(drop)
    }

    fn erase(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        self.run(Seq::erase(block)).map(drop)
    }

    fn is_bad(&mut self, block: BlockAddr) -> Result<bool, Self::Error> {
        Ok(self.run(Seq::is_bad(block))?.bad())
    }

    fn is_marked(&mut self, block: BlockAddr) -> Result<bool, Self::Error> {
        Ok(self.run(Seq::is_bad(block))?.marked())
    }

    fn mark_bad(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        self.run(Seq::mark_bad(block)).map(drop)
    }
}
