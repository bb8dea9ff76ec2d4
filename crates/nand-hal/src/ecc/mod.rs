//! Software ECC for parts without on-die ECC: a BCH codec over GF(2^13) and
//! [`SoftEcc`], a [`crate::NandFlash`] wrapper that keeps per-sector ECC in the spare
//! area.
//!
//! - [`gf`]: field arithmetic (log/antilog tables, 32 KiB of flash).
//! - [`bch`]: the BCH code (t = 1..8 bits per codeword).
//! - [`sector`]: one 512 B sector with its protected spare bytes, a CRC-16 and the BCH
//!   parity; erased-sector handling.
//! - [`soft`]: the wrapper.
//!
//! Everything is `no_std` and allocation-free.

pub mod bch;
pub mod gf;
pub mod sector;
pub mod soft;

pub use bch::Bch;
pub use sector::{SectorCodec, SectorRead, Strength};
pub use soft::{SoftEcc, SoftEccConfigError, SoftEccError};
