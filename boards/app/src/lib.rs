//! The StageFS board demo: one function, [`run`], that every firmware under `boards/`
//! calls with its own SPI bus and delay, so the code that runs on an RP2040 or STM32 with
//! a W25N01GV is the code CI runs under QEMU over the SPI NAND chip model.
//!
//! One call is one boot:
//!
//! 1. probe the part on the bus (`nand_hal::spi::SpiNand`: reset, READ ID against a
//!    chip table, protection off, ECC on);
//! 2. mount the volume (crash recovery, staging-log replay), or format it when the part
//!    holds no volume (a blank part, or a format that a reset interrupted);
//! 3. read the log file [`LOG_PATH`] back and check every record: sequence numbers
//!    0, 1, 2... without a gap, boot numbers never going down, contents as written;
//! 4. append [`Demo::records`] records of [`RECORD`] bytes, each followed by `fsync`:
//!    once [`Event::Synced`] is reported for a record it survives a reset or power cut.
//!
//! The volume lives where the firmware puts it (a `static` on a small MCU: about 50 KB
//! for the W25N01GV configuration, see [`W25n01gvVolume`]) and is built without the
//! flash, which only exists once the part answered: its store's flash is a [`Slot`]
//! that [`run`] fills with the probed driver. The firmware gets the driver (and its bus)
//! back with `vol.store_mut().flash_mut().take()`, e.g. to power-cycle a chip model.
//!
//! Progress is reported through a callback ([`Event`]) so each firmware prints it its
//! own way (defmt over RTT on the boards, semihosting under QEMU).

#![no_std]

use core::fmt;

use embedded_hal::delay::DelayNs;
use embedded_hal::spi::SpiDevice;
use nand_hal::spi::{ChipInfo, SpiNand, SpiNandError};
use nand_hal::{
    BlockAddr, Capabilities, ErrorKind, ErrorType, Geometry, NandFlash, PageAddr, ReadReport,
    StepReport,
};
use oftl::{Greedy, MountError, Oftl};
use stagefs_core::{Fs, OpenOptions};

/// Page size of the parts the demo supports (2 KiB, as the W25N01GV).
pub const PAGE: usize = 2048;
/// Open-file table of the volume (the demo opens one file at a time).
pub const HANDLES: usize = 2;
/// The log file.
pub const LOG_PATH: &str = "/log";
/// Bytes per record: sequence number (u32 LE), boot number (u32 LE), then 56 bytes
/// derived from both.
pub const RECORD: usize = 64;

/// The demo's volume over the driver for bus `SPI` and delay `D`, with object-store
/// tables for `BLOCKS` erase blocks and `CACHE` cached index pages.
pub type Volume<SPI, D, const BLOCKS: usize, const CACHE: usize> =
    Fs<Oftl<Slot<SpiNand<SPI, D>>, PAGE, BLOCKS, CACHE>, PAGE, HANDLES>;

/// The volume for a W25N01GV (oftl's default W25N01GV configuration: 1024 blocks, 12
/// cached index pages).
pub type W25n01gvVolume<SPI, D> = Volume<SPI, D, 1024, 12>;

/// A volume with no flash yet, for a `static` initializer (`geometry` and
/// `capabilities` are the part's, e.g. `nand_hal::spi::chips::W25N01GV`'s; mount and
/// format check them against the part found), formatting with `config` when the part
/// has to be formatted.
pub const fn volume<SPI: SpiDevice, D: DelayNs, const BLOCKS: usize, const CACHE: usize>(
    geometry: Geometry,
    capabilities: Capabilities,
    config: oftl::Config,
) -> Volume<SPI, D, BLOCKS, CACHE> {
    Fs::new(Oftl::new(
        Slot::empty(geometry, capabilities),
        config,
        Greedy::DEFAULT,
    ))
}

/// The store configuration the boards format with: the store's default, with an id
/// of its own.
pub const BOARD_CONFIG: oftl::Config = oftl::Config::new().format_id(0x5747_0014);

/// A volume for a W25N01GV with no flash yet, for a board's `static`.
pub const fn w25n01gv_volume<SPI: SpiDevice, D: DelayNs>() -> W25n01gvVolume<SPI, D> {
    let part = nand_hal::spi::chips::W25N01GV;
    volume(part.geometry, part.capabilities, BOARD_CONFIG)
}

/// The boards' demo: any part of the built-in chip table, 16 records per boot.
pub const BOARD_DEMO: Demo = Demo {
    chips: nand_hal::spi::chips::CHIPS,
    records: 16,
};

/// What one boot does.
#[derive(Clone, Copy, Debug)]
pub struct Demo {
    /// Parts the probe recognises (`nand_hal::spi::chips::CHIPS` on a board).
    pub chips: &'static [ChipInfo],
    /// Records appended (each with an `fsync`) per boot.
    pub records: u32,
}

/// Progress, reported as it happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Event {
    /// The part answered and is configured.
    Probed {
        /// Its chip table entry's name.
        part: &'static str,
        /// Erase blocks.
        blocks: u32,
    },
    /// The volume is mounted (`formatted`: it was formatted first).
    Mounted {
        /// Whether the part had no volume and was formatted.
        formatted: bool,
    },
    /// The log read back and checked.
    LogChecked {
        /// Records found.
        records: u32,
        /// The last record's boot number.
        last_boot: Option<u32>,
    },
    /// Record `seq` is written and fsynced: it is durable.
    Synced {
        /// Its sequence number.
        seq: u32,
    },
}

/// What one boot did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Summary {
    /// The part found.
    pub part: &'static str,
    /// Whether the volume was formatted in this boot.
    pub formatted: bool,
    /// This boot's number (one more than the last record's, 0 on an empty log).
    pub boot: u32,
    /// Records found and checked before appending.
    pub found: u32,
    /// Records appended and fsynced.
    pub appended: u32,
}

/// Why a boot stopped. `E` is the SPI bus error.
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DemoError<E> {
    /// The part did not answer, is not in the chip table, or refused its set-up.
    Probe(SpiNandError<E>),
    /// A file-system call failed.
    Fs {
        /// The call (`"mount"`, `"format"`, `"open"`, `"read"`, `"write"`, `"fsync"`,
        /// `"close"`).
        during: &'static str,
        /// Its error.
        error: stagefs_core::Error<SlotError<SpiNandError<E>>>,
    },
    /// The log holds something the demo did not write.
    Log {
        /// The first record that is wrong (or the record count, for a partial record).
        record: u32,
        /// What is wrong.
        problem: &'static str,
    },
}

impl<E: fmt::Debug> fmt::Display for DemoError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DemoError::Probe(e) => write!(f, "probe: {e}"),
            DemoError::Fs { during, error } => write!(f, "{during}: {error}"),
            DemoError::Log { record, problem } => write!(f, "log record {record}: {problem}"),
        }
    }
}

impl<E: fmt::Debug> core::error::Error for DemoError<E> {}

/// One boot of the demo (see the crate docs): probes the part on `spi`, mounts or formats
/// `vol`, checks the log and appends `demo.records` fsynced records. The probed driver
/// stays in `vol`'s [`Slot`], also when a step fails.
pub fn run<SPI: SpiDevice, D: DelayNs, const BLOCKS: usize, const CACHE: usize>(
    vol: &mut Volume<SPI, D, BLOCKS, CACHE>,
    spi: SPI,
    delay: D,
    demo: &Demo,
    mut report: impl FnMut(Event),
) -> Result<Summary, DemoError<SPI::Error>> {
    let nand = SpiNand::with_table(spi, delay, demo.chips).map_err(DemoError::Probe)?;
    let part = nand.chip().name;
    report(Event::Probed {
        part,
        blocks: nand.chip().geometry.blocks(),
    });
    vol.store_mut().flash_mut().put(nand);

    let formatted = match vol.mount() {
        Ok(()) => false,
        // Nothing to recover: a blank part, or a first format that did not finish.
        Err(stagefs_core::Error::Mount(MountError::NotFormatted))
        | Err(stagefs_core::Error::NotFormatted) => {
            vol.format().map_err(fs_error("format"))?;
            true
        }
        Err(e) => return Err(fs_error("mount")(e)),
    };
    report(Event::Mounted { formatted });

    let log = vol
        .open(
            LOG_PATH,
            OpenOptions::new().read(true).append(true).create(true),
        )
        .map_err(fs_error("open"))?;
    let len = vol.len(log).map_err(fs_error("open"))?;
    let found = (len / RECORD as u64) as u32;
    if len % RECORD as u64 != 0 {
        return Err(DemoError::Log {
            record: found,
            problem: "the log ends in a partial record",
        });
    }
    let mut rec = [0u8; RECORD];
    let mut last_boot = None;
    for seq in 0..found {
        read_record(vol, log, &mut rec)?;
        let boot = check(seq, &rec, last_boot).map_err(|problem| DemoError::Log {
            record: seq,
            problem,
        })?;
        last_boot = Some(boot);
    }
    report(Event::LogChecked {
        records: found,
        last_boot,
    });

    let boot = last_boot.map_or(0, |b| b.wrapping_add(1));
    for seq in found..found + demo.records {
        encode(seq, boot, &mut rec);
        vol.write(log, &rec).map_err(fs_error("write"))?;
        vol.fsync(log).map_err(fs_error("fsync"))?;
        report(Event::Synced { seq });
    }
    vol.close(log).map_err(fs_error("close"))?;
    Ok(Summary {
        part,
        formatted,
        boot,
        found,
        appended: demo.records,
    })
}

fn fs_error<E>(
    during: &'static str,
) -> impl FnOnce(stagefs_core::Error<SlotError<SpiNandError<E>>>) -> DemoError<E> {
    move |error| DemoError::Fs { during, error }
}

fn read_record<SPI: SpiDevice, D: DelayNs, const BLOCKS: usize, const CACHE: usize>(
    vol: &mut Volume<SPI, D, BLOCKS, CACHE>,
    log: stagefs_core::File,
    rec: &mut [u8; RECORD],
) -> Result<(), DemoError<SPI::Error>> {
    let mut at = 0;
    while at < RECORD {
        match vol.read(log, &mut rec[at..]).map_err(fs_error("read"))? {
            0 => {
                return Err(DemoError::Log {
                    record: u32::MAX,
                    problem: "the log is shorter than its length",
                })
            }
            n => at += n,
        }
    }
    Ok(())
}

/// Record `seq` of boot `boot`.
pub fn encode(seq: u32, boot: u32, rec: &mut [u8; RECORD]) {
    rec[..4].copy_from_slice(&seq.to_le_bytes());
    rec[4..8].copy_from_slice(&boot.to_le_bytes());
    let mut x = (seq as u64) << 32 | boot as u64 | 1;
    for b in rec[8..].iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = (x >> 24) as u8;
    }
}

/// Checks that `rec` is record `seq` as [`encode`] wrote it, in a boot no earlier than
/// `last_boot`; returns its boot number, or what is wrong.
pub fn check(seq: u32, rec: &[u8; RECORD], last_boot: Option<u32>) -> Result<u32, &'static str> {
    let field = |at: usize| u32::from_le_bytes([rec[at], rec[at + 1], rec[at + 2], rec[at + 3]]);
    if field(0) != seq {
        return Err("wrong sequence number (a record lost or repeated)");
    }
    let boot = field(4);
    if last_boot.is_some_and(|b| boot < b) {
        return Err("boot number goes down");
    }
    let mut want = [0u8; RECORD];
    encode(seq, boot, &mut want);
    if *rec != want {
        return Err("contents differ from what was written");
    }
    Ok(boot)
}

/// A flash that may not be there yet: the store of a volume in a `static` is built
/// before the part is probed. Every operation forwards to the flash put in it; with none,
/// operations fail with [`SlotError::Empty`] and the geometry and capabilities are the
/// ones the slot was built with.
#[derive(Debug)]
pub struct Slot<F> {
    flash: Option<F>,
    geometry: Geometry,
    capabilities: Capabilities,
}

impl<F> Slot<F> {
    /// An empty slot for a part with `geometry` and `capabilities`.
    pub const fn empty(geometry: Geometry, capabilities: Capabilities) -> Self {
        Slot {
            flash: None,
            geometry,
            capabilities,
        }
    }

    /// Puts `flash` in the slot; returns the one it replaces.
    pub fn put(&mut self, flash: F) -> Option<F> {
        self.flash.replace(flash)
    }

    /// Takes the flash out.
    pub fn take(&mut self) -> Option<F> {
        self.flash.take()
    }

    /// The flash, if there is one.
    pub fn get_mut(&mut self) -> Option<&mut F> {
        self.flash.as_mut()
    }
}

/// A [`Slot`]'s error: the flash's, or no flash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SlotError<E> {
    /// The slot is empty.
    Empty,
    /// The flash failed.
    Flash(E),
}

impl<E: nand_hal::Error> nand_hal::Error for SlotError<E> {
    fn kind(&self) -> ErrorKind {
        match self {
            SlotError::Empty => ErrorKind::Other,
            SlotError::Flash(e) => e.kind(),
        }
    }
}

impl<E: fmt::Display> fmt::Display for SlotError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SlotError::Empty => f.write_str("no flash in the slot"),
            SlotError::Flash(e) => e.fmt(f),
        }
    }
}

impl<F: NandFlash> Slot<F> {
    fn with<R>(
        &mut self,
        op: impl FnOnce(&mut F) -> Result<R, F::Error>,
    ) -> Result<R, SlotError<F::Error>> {
        match self.flash.as_mut() {
            Some(f) => op(f).map_err(SlotError::Flash),
            None => Err(SlotError::Empty),
        }
    }
}

impl<F: NandFlash> ErrorType for Slot<F> {
    type Error = SlotError<F::Error>;
}

impl<F: NandFlash> NandFlash for Slot<F> {
    fn geometry(&self) -> Geometry {
        self.flash.as_ref().map_or(self.geometry, F::geometry)
    }
    fn capabilities(&self) -> &Capabilities {
        self.flash
            .as_ref()
            .map_or(&self.capabilities, F::capabilities)
    }
    fn read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, Self::Error> {
        self.with(|f| f.read(page, column, data, oob))
    }
    fn read_steps(
        &mut self,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<StepReport, Self::Error> {
        self.with(|f| f.read_steps(page, data, oob))
    }
    fn delivers_good_steps(&self) -> bool {
        self.flash.as_ref().is_some_and(F::delivers_good_steps)
    }
    fn program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), Self::Error> {
        self.with(|f| f.program(page, column, data, oob))
    }
    fn erase(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        self.with(|f| f.erase(block))
    }
    fn is_bad(&mut self, block: BlockAddr) -> Result<bool, Self::Error> {
        self.with(|f| f.is_bad(block))
    }
    fn mark_bad(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        self.with(|f| f.mark_bad(block))
    }
}
