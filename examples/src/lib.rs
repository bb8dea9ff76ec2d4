//! Small StageFS programs a firmware engineer copies from.
//!
//! Each module is one example's logic: `no_std`, no allocator, generic over the store
//! (and so over the NAND below it), so the same code builds for a Cortex-M
//! (`thumbv7em-none-eabihf`, see `scripts/mcu.sh`) and runs on the host against the
//! simulated part. The host programs in `src/bin` run each example on a simulated
//! W25N01GV, cut the power where it matters and check what the example promises; each
//! exits non-zero when a check fails, so CI runs them as tests.
//!
//! | module | program | shows |
//! |---|---|---|
//! | [`data_logger`] | `cargo run -p stagefs-examples --bin data-logger` | records appended with `fsync`, rotated by size (`/log.0` to `/log.1` by `rename`); a power cut keeps every fsynced record |
//! | [`settings`] | `cargo run -p stagefs-examples --bin settings-store` | small files rewritten whole and read at boot; a cut during a save leaves the old or the new settings |
//! | [`firmware_update`] | `cargo run -p stagefs-examples --bin firmware-update` | a large image written to a temporary file, verified (CRC-32), renamed into place; a cut at any point leaves the old or the new image, never a mix |
//!
//! # Setting up a volume on a board
//!
//! The examples take a mounted [`Fs`]. On a board with a W25N01GV on
//! SPI (see `nand_hal::spi`), the volume is built once, in a `static` or on the stack of
//! `main` (the store is about 45 KiB):
//!
//! ```ignore
//! let flash = nand_hal::spi::SpiNand::new(spi_device, delay)?; // probes the chip
//! let store = oftl::W25n01gv::new(flash, const { oftl::Config::new() }, oftl::Greedy::DEFAULT);
//! let mut fs: stagefs_core::Fs<oftl::W25n01gv<_>, 2048, 4> = stagefs_core::Fs::new(store);
//! match fs.mount() {
//!     Ok(()) => {}
//!     // First boot: an empty volume. Other errors keep the data (see `fsck`).
//!     Err(stagefs_core::Error::Mount(oftl::MountError::NotFormatted))
//!     | Err(stagefs_core::Error::NotFormatted) => fs.format()?,
//!     Err(e) => return Err(e),
//! }
//! ```
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod data_logger;
pub mod firmware_update;
pub mod settings;

use stagefs_core::{Fs, OpenOptions, Store};

/// The file layer's error for store `S`.
pub type FsError<S> = stagefs_core::Error<<S as Store>::FlashError>;

/// Reads a whole file into `buf`; returns its length, or `None` when it does not exist.
/// A file longer than `buf` is cut at `buf.len()` (the caller compares with the size).
pub fn read_file<S: Store, const P: usize, const H: usize>(
    fs: &mut Fs<S, P, H>,
    path: &str,
    buf: &mut [u8],
) -> Result<Option<usize>, FsError<S>> {
    let f = match fs.open(path, OpenOptions::new().read(true)) {
        Ok(f) => f,
        Err(stagefs_core::Error::NotFound) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut n = 0;
    let read = loop {
        match fs.read(f, &mut buf[n..]) {
            Ok(0) => break Ok(()),
            Ok(k) => n += k,
            Err(e) => break Err(e),
        }
        if n == buf.len() {
            break Ok(());
        }
    };
    // Close even after a failed read (a handle is a slot in a fixed table).
    let closed = fs.close(f);
    read.and(closed)?;
    Ok(Some(n))
}

/// Replaces a file's contents with `data`, durably: open with `truncate`, write, close.
/// The truncation and the writes land together (see `stagefs_core`'s guarantees): for a
/// file of at most [`INLINE_MAX`](stagefs_core::INLINE_MAX) bytes, kept in its directory
/// entry, a power cut leaves what it held before or `data`, nothing in between. Write a
/// large file that must change all at once under another name and rename it into place
/// (see [`firmware_update`]).
pub fn write_file<S: Store, const P: usize, const H: usize>(
    fs: &mut Fs<S, P, H>,
    path: &str,
    data: &[u8],
) -> Result<(), FsError<S>> {
    let rewrite = OpenOptions::new().write(true).create(true).truncate(true);
    let f = fs.open(path, rewrite)?;
    let written = fs.write(f, data);
    let closed = fs.close(f);
    written?;
    closed
}

#[cfg(feature = "std")]
pub mod host;
