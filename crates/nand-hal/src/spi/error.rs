//! The driver's error type.

use core::fmt;

use crate::error::{Error, ErrorKind};

/// What went wrong talking to an SPI NAND part. `E` is the SPI bus error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SpiNandError<E> {
    /// The SPI bus reported an error.
    Spi(E),
    /// READ ID returned bytes no table entry matches (manufacturer first, after the
    /// address/dummy byte).
    UnknownChip([u8; 4]),
    /// The table entry READ ID matched (these bytes) has capabilities that do not fit
    /// its geometry ([`crate::Capabilities::validate`]): a custom table's mistake.
    BadChipInfo([u8; 4]),
    /// The part stayed busy past twice the datasheet maximum for the operation.
    Timeout,
    /// Status P_FAIL after program execute (or the block is write-protected).
    ProgramFailed,
    /// Status E_FAIL after block erase (or the block is write-protected).
    EraseFailed,
    /// The part lost power on its own during the operation (a brown-out the MCU
    /// survived: it was found at its power-on configuration, and has been configured
    /// again): a program's effect is unknown, as after a power cut. Kind `PowerLoss`.
    PowerLost,
    /// The on-die ECC reported an uncorrectable page.
    Uncorrectable,
    /// The ECC status bits held a code the datasheet reserves (raw status register).
    /// Treated as uncorrectable.
    BadEccStatus(u8),
    /// A feature register did not read back what was written.
    ConfigRejected {
        /// Register address.
        register: u8,
        /// Value written.
        wrote: u8,
        /// Value read back.
        read: u8,
    },
    /// Page, block, column or length outside the geometry.
    OutOfBounds,
    /// Unaligned or empty program, or another breach of the `NandFlash` contract the
    /// driver can see before talking to the chip.
    Misuse,
}

impl<E: fmt::Debug> Error for SpiNandError<E> {
    fn kind(&self) -> ErrorKind {
        match self {
            SpiNandError::Spi(_) => ErrorKind::Other,
            SpiNandError::UnknownChip(_) | SpiNandError::BadChipInfo(_) => ErrorKind::Other,
            SpiNandError::Timeout => ErrorKind::Timeout,
            SpiNandError::PowerLost => ErrorKind::PowerLoss,
            SpiNandError::ProgramFailed => ErrorKind::ProgramFailed,
            SpiNandError::EraseFailed => ErrorKind::EraseFailed,
            SpiNandError::Uncorrectable | SpiNandError::BadEccStatus(_) => ErrorKind::Uncorrectable,
            SpiNandError::ConfigRejected { .. } => ErrorKind::Other,
            SpiNandError::OutOfBounds => ErrorKind::OutOfBounds,
            SpiNandError::Misuse => ErrorKind::Misuse,
        }
    }
}

impl<E: fmt::Debug> fmt::Display for SpiNandError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpiNandError::Spi(e) => write!(f, "SPI bus error: {e:?}"),
            SpiNandError::UnknownChip(id) => write!(
                f,
                "unknown SPI NAND (READ ID {:02X} {:02X} {:02X} {:02X})",
                id[0], id[1], id[2], id[3]
            ),
            SpiNandError::BadChipInfo(id) => write!(
                f,
                "the chip table's entry for READ ID {:02X} {:02X} {:02X} {:02X} does not \
                 validate (capabilities against geometry)",
                id[0], id[1], id[2], id[3]
            ),
            SpiNandError::Timeout => f.write_str("SPI NAND stayed busy past its timeout"),
            SpiNandError::PowerLost => {
                f.write_str("the SPI NAND lost power during the operation (configured again)")
            }
            SpiNandError::ProgramFailed => f.write_str("program failed (P_FAIL)"),
            SpiNandError::EraseFailed => f.write_str("erase failed (E_FAIL)"),
            SpiNandError::Uncorrectable => f.write_str("uncorrectable ECC error"),
            SpiNandError::BadEccStatus(s) => write!(f, "reserved ECC status code (C0h = {s:#04x})"),
            SpiNandError::ConfigRejected {
                register,
                wrote,
                read,
            } => write!(
                f,
                "feature register {register:#04x} reads {read:#04x} after writing {wrote:#04x}"
            ),
            SpiNandError::OutOfBounds => f.write_str("address out of bounds"),
            SpiNandError::Misuse => f.write_str("device contract violated by the caller"),
        }
    }
}

impl<E: fmt::Debug> core::error::Error for SpiNandError<E> {}
