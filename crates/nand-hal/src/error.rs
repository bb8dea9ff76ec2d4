//! Error vocabulary shared by every NAND implementation (blocking today, async later).
//!
//! Shaped like `embedded-hal`: each implementation has its own error type, and
//! [`Error::kind`] maps it onto the small, stable [`ErrorKind`] set that layers above
//! make decisions on (retire a block, relocate data, give up).

use core::fmt;

/// What went wrong, in terms an upper layer can act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ErrorKind {
    /// The chip reported a program failure (status FAIL). The page's contents are
    /// undefined and the block should be retired once its live data is moved.
    ProgramFailed,
    /// The chip reported an erase failure. The block's contents are undefined and the
    /// block should be marked bad.
    EraseFailed,
    /// ECC could not correct the data. The returned buffer content is undefined and must
    /// not be used as data.
    Uncorrectable,
    /// The operation addressed a block that is marked bad.
    BadBlock,
    /// A page, block, column or length outside the device geometry.
    OutOfBounds,
    /// The caller broke the device contract: unaligned or short program unit, more
    /// partial programs than NOP allows, pages of a block programmed out of order,
    /// reprogramming an ECC step, programming a 0 bit back to 1, or starting work on a
    /// busy die. This is a bug in the layer above, never a property of the flash.
    Misuse,
    /// The device did not become ready in time (stuck busy, no answer on the bus).
    Timeout,
    /// Power was lost before or during this operation. Nothing after the cut reached the
    /// flash; the operation itself may have landed partly. Seen from simulators and from
    /// drivers with a brown-out detector.
    PowerLoss,
    /// Anything else (bus error, unknown device, ...).
    Other,
}

impl ErrorKind {
    /// A short human-readable description.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorKind::ProgramFailed => "program failed",
            ErrorKind::EraseFailed => "erase failed",
            ErrorKind::Uncorrectable => "uncorrectable ECC error",
            ErrorKind::BadBlock => "block is marked bad",
            ErrorKind::OutOfBounds => "address out of bounds",
            ErrorKind::Misuse => "device contract violated by the caller",
            ErrorKind::Timeout => "device timed out",
            ErrorKind::PowerLoss => "power lost",
            ErrorKind::Other => "other NAND error",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl core::error::Error for ErrorKind {}

/// A NAND error: anything that can say which [`ErrorKind`] it is.
pub trait Error: fmt::Debug {
    /// The generic kind of this error.
    fn kind(&self) -> ErrorKind;
}

impl Error for ErrorKind {
    fn kind(&self) -> ErrorKind {
        *self
    }
}

impl Error for core::convert::Infallible {
    fn kind(&self) -> ErrorKind {
        match *self {}
    }
}

/// Declares the error type of a NAND implementation.
pub trait ErrorType {
    /// The error returned by every operation.
    type Error: Error;
}

impl<T: ErrorType + ?Sized> ErrorType for &mut T {
    type Error = T::Error;
}
