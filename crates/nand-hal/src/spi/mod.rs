//! SPI NAND: a generic driver over `embedded-hal` 1.0 with a chip table, its async twin
//! over `embedded-hal-async` (feature `async`: `SpiNandAsync`), and (feature
//! `spi-model`) a byte-accurate chip model backed by the simulator to test both.
//!
//! Both drivers run the same code: the command sequences below are written once, without
//! I/O, and each driver only carries their steps (one transaction or one delay at a time)
//! to its bus.
//!
//! # Parts
//!
//! [`chips::CHIPS`]: Winbond W25N01GV and W25M02GV (two dies, software die select
//! `C2h`), GigaDevice GD5F1GQ4xA, Micron MT29F1G01ABAFD. A part is a [`ChipInfo`]
//! entry: JEDEC ID, geometry, capabilities (OOB layout: which spare bytes are free and
//! which the on-die ECC covers), ECC status encoding, configuration bits, timings. See
//! `docs/adding-a-chip.md`.
//!
//! # Command sequences
//!
//! | operation | sequence |
//! |-----------|----------|
//! | init      | `FFh` reset, poll; `9Fh` read ID; per die: (`C2h` die) `FFh`, poll, `1Fh A0h 00h` unlock, `1Fh B0h` ECC on (+ Winbond `BUF=1`), each read back |
//! | read      | `13h` row → poll `0Fh C0h` until OIP = 0, decode ECC bits → `03h` column (+ dummy), data (and spare, in the same burst when the range ends at the page end) |
//! | program   | `06h` → `02h` column + data (+ spare if contiguous) → `84h` page-size column + spare if not → `10h` row → poll, P_FAIL → [`SpiNandError::ProgramFailed`] |
//! | erase     | `06h` → `D8h` row → poll, E_FAIL → [`SpiNandError::EraseFailed`] |
//! | is_bad    | `13h` first page → poll (ECC verdict ignored: marker bytes are outside every ECC step) → `03h` marker bytes; any byte ≠ `FFh` = bad |
//! | mark_bad  | erase (failure ignored, as Linux does) then a spare-only program of `00h` over the marker bytes |
//!
//! Before its first command to a die, an operation waits for the die if an earlier
//! operation left it possibly busy (one abandoned by a bus error or, async, a dropped
//! future), and re-selects the die if a die select may not have completed.
//!
//! Arguments are checked before the bus is touched: addresses outside the geometry are
//! [`SpiNandError::OutOfBounds`], unaligned or empty programs [`SpiNandError::Misuse`].
//! The chip itself cannot report the other contract rules (page order, NOP, ECC-step
//! rewrite): keeping them is the caller's job, as the [`crate::NandFlash`] contract says.
//!
//! # ECC status
//!
//! Vendors encode the outcome of the last page read differently (see
//! [`chips::EccStatus`]); the driver turns it into [`crate::ReadReport::corrected_bits`]
//! and reports the part's scrub threshold. Codes that stand for a range report its top
//! (GD5F1GQ4xA cannot tell 1 corrected bit from 7, so any correction reaches its
//! threshold of 6 and asks for a scrub: conservative by construction). Uncorrectable and
//! reserved codes are errors of kind `Uncorrectable`; the data is not transferred.
//!
//! # Timing
//!
//! Each array operation is followed by status polling: the first poll right away, then
//! one every sixteenth of the datasheet typical time (clamped to 1 µs..1 ms) through the
//! [`DelayNs`](embedded_hal::delay::DelayNs) given to the driver. The host therefore
//! sees an operation at most one poll interval (plus one status transfer) after the
//! chip finished it: ≤ 6.3 % of the typical time. Polling gives up after twice the
//! datasheet maximum with [`SpiNandError::Timeout`], leaving the part busy; call
//! [`SpiNand::reinit`] (which resets it) before using it again. Page reads move only the
//! bytes asked for over the bus.
//!
//! # Power loss
//!
//! The driver keeps no state in RAM that the flash depends on, so a power cut needs no
//! recovery in the driver itself. What the flash holds after a cut follows the
//! [`crate::NandFlash`] contract: an interrupted program may leave any mix of old and new
//! bits in the sectors being programmed (on-die ECC then usually reports the page
//! uncorrectable, or it reads back correctly and fails later), an interrupted erase
//! leaves the block undefined; no other page changes. After power returns the parts come
//! up with block protection set (and a Winbond `-IT` part in continuous-read mode, which
//! ignores the column): call [`SpiNand::reinit`] (or build a new driver) first. A part
//! that lost power on its own, the MCU running on (a brown-out of the NAND's supply), is
//! found by the driver itself: every page read, bad-block check, program and erase reads
//! the block protection back after its last transfer (one 3-byte transaction; every part
//! powers on protected). A part found protected again is configured again (every die;
//! the configuration bits first, the protection last, so an unprotected die is a
//! configured one) and the operation runs once more when that is safe (a read, an erase,
//! a program the protection refused), else it fails with [`SpiNandError::PowerLost`]
//! (kind `PowerLoss`: a program cut short, whose effect is unknown as after a power cut;
//! or a second loss within one operation). Before stop 40 such a part returned column
//! 0's bytes (or an empty cache) for a read, and failed every program and erase as the
//! block's own failure, which retires good blocks; a loss between write enable and
//! execute even returned `Ok` for an operation that never ran.
//! A reset (`FFh`) issued while a program or erase runs aborts it with the same effect
//! as a power cut on that page or block.

pub mod chips;
mod driver;
#[cfg(feature = "async")]
mod driver_async;
mod error;
#[cfg(feature = "sim")]
pub mod model;
pub mod opcodes;
mod seq;

pub use chips::{ChipInfo, EccOutcome, EccStatus, JedecId};
pub use driver::{Async, Blocking, SpiNand};
#[cfg(feature = "async")]
pub use driver_async::SpiNandAsync;
pub use error::SpiNandError;
#[cfg(feature = "sim")]
pub use model::{ChipModel, HostClock, ModelDelay, ModelError, ModelSpec};
