//! An atomic firmware-update slot: the new image is written to a temporary file as it
//! arrives, made durable, read back and verified against the CRC-32 in its header, and
//! only then renamed over the active image.
//!
//! The rename is one transaction of the file layer (atomic and durable on return), so
//! whatever instant the power fails, the active image is the old one or the new one,
//! never a mix, and never a half-written one: the temporary file is the only thing a
//! cut can leave half-written, and [`boot_check`] removes it. The host program
//! `firmware-update` checks this with power cuts spread over a whole update (every cut
//! kind, the commit included), each followed by a boot that verifies the active image
//! and compares it with both images byte for byte.
//!
//! ```ignore
//! // At boot: drop a half-received update, verify what will be booted.
//! let active = firmware_update::boot_check(&mut fs)?;
//! // An update arrives in chunks (radio, UART, USB):
//! let mut up = Update::begin(&mut fs)?;
//! while let Some(chunk) = link.next_chunk() {
//!     up.write(&mut fs, chunk)?;
//! }
//! let installed = up.finish(&mut fs)?; // verified, then renamed into place
//! ```
//!
//! The image is a 16-byte header and the payload. Header (little-endian): `FWIM`,
//! `version` u32, payload length u32, CRC-32 (ISO-HDLC) of the payload.

use core::fmt;

use crc::{Crc, CRC_32_ISO_HDLC};
use stagefs_core::{File, Fs, OpenOptions, Store};

use crate::FsError;

/// The directory of the slot.
pub const DIR: &str = "/fw";
/// The image the bootloader starts.
pub const ACTIVE: &str = "/fw/active";
/// The update being received (renamed to [`ACTIVE`] once verified).
pub const PENDING: &str = "/fw/pending";
/// Bytes of the image header.
pub const HEADER_LEN: usize = 16;

const MAGIC: [u8; 4] = *b"FWIM";
const CRC32: Crc<u32> = Crc::<u32>::new(&CRC_32_ISO_HDLC);
/// Bytes read at a time when verifying (stack).
const VERIFY_CHUNK: usize = 512;

/// What an image's header says (and verification confirmed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ImageInfo {
    /// The firmware version.
    pub version: u32,
    /// Payload bytes (the file is [`HEADER_LEN`] more).
    pub len: u32,
    /// CRC-32 of the payload.
    pub crc: u32,
}

impl ImageInfo {
    /// The header of an image with this version and payload (for the build or the
    /// update server; the device only checks it).
    pub fn of(version: u32, payload: &[u8]) -> ImageInfo {
        ImageInfo {
            version,
            len: payload.len() as u32,
            crc: CRC32.checksum(payload),
        }
    }

    /// The header's bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0; HEADER_LEN];
        b[0..4].copy_from_slice(&MAGIC);
        b[4..8].copy_from_slice(&self.version.to_le_bytes());
        b[8..12].copy_from_slice(&self.len.to_le_bytes());
        b[12..16].copy_from_slice(&self.crc.to_le_bytes());
        b
    }

    /// A header from its bytes; `None` without the magic.
    pub fn decode(b: &[u8; HEADER_LEN]) -> Option<ImageInfo> {
        if b[0..4] != MAGIC {
            return None;
        }
        let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Some(ImageInfo {
            version: word(4),
            len: word(8),
            crc: word(12),
        })
    }
}

/// Why an update or a verification failed.
#[derive(Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum UpdateError<E> {
    /// The file layer failed.
    Fs(stagefs_core::Error<E>),
    /// There is no image.
    Missing,
    /// The file does not start with an image header.
    BadHeader,
    /// The file's length is not the header's.
    Length {
        /// Payload bytes the header gives.
        expected: u32,
        /// Payload bytes in the file.
        actual: u64,
    },
    /// The payload's CRC-32 is not the header's.
    Crc {
        /// The header's CRC.
        expected: u32,
        /// The CRC of the payload on flash.
        actual: u32,
    },
}

impl<E> From<stagefs_core::Error<E>> for UpdateError<E> {
    fn from(e: stagefs_core::Error<E>) -> Self {
        UpdateError::Fs(e)
    }
}

impl<E: fmt::Debug> fmt::Display for UpdateError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpdateError::Fs(e) => write!(f, "file system: {e}"),
            UpdateError::Missing => f.write_str("no image"),
            UpdateError::BadHeader => f.write_str("not an image (bad header)"),
            UpdateError::Length { expected, actual } => {
                write!(f, "payload is {actual} bytes, the header says {expected}")
            }
            UpdateError::Crc { expected, actual } => {
                write!(
                    f,
                    "payload CRC {actual:#010x}, the header says {expected:#010x}"
                )
            }
        }
    }
}

impl<E: fmt::Debug> core::error::Error for UpdateError<E> {}

/// An update being received into [`PENDING`].
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Update {
    file: File,
    received: u64,
}

impl Update {
    /// Starts an update: an empty [`PENDING`] (a previous, unfinished one is dropped).
    pub fn begin<S: Store, const P: usize, const H: usize>(
        fs: &mut Fs<S, P, H>,
    ) -> Result<Update, FsError<S>> {
        match fs.create_dir(DIR) {
            Ok(()) | Err(stagefs_core::Error::Exists) => {}
            Err(e) => return Err(e),
        }
        let fresh = OpenOptions::new().write(true).create(true).truncate(true);
        let file = fs.open(PENDING, fresh)?;
        Ok(Update { file, received: 0 })
    }

    /// Appends the next piece of the image (header first, then the payload).
    pub fn write<S: Store, const P: usize, const H: usize>(
        &mut self,
        fs: &mut Fs<S, P, H>,
        chunk: &[u8],
    ) -> Result<(), FsError<S>> {
        fs.write(self.file, chunk)?;
        self.received += chunk.len() as u64;
        Ok(())
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Finishes the update: makes [`PENDING`] durable, verifies it as read back from
    /// flash, then renames it over [`ACTIVE`]. A pending image that does not verify is
    /// removed and the active image stays.
    pub fn finish<S: Store, const P: usize, const H: usize>(
        self,
        fs: &mut Fs<S, P, H>,
    ) -> Result<ImageInfo, UpdateError<S::FlashError>> {
        // Durable before it is checked: what is verified is what is on flash.
        fs.close(self.file)?;
        let info = match verify(fs, PENDING) {
            Ok(info) => info,
            Err(e) => {
                let _ = fs.remove(PENDING);
                return Err(e);
            }
        };
        // The commit point: atomic and durable on return.
        fs.rename(PENDING, ACTIVE)?;
        Ok(info)
    }

    /// Abandons the update and removes [`PENDING`].
    pub fn abort<S: Store, const P: usize, const H: usize>(
        self,
        fs: &mut Fs<S, P, H>,
    ) -> Result<(), FsError<S>> {
        fs.close(self.file)?;
        fs.remove(PENDING)
    }
}

/// Reads the image at `path` from flash and checks its header, length and CRC.
pub fn verify<S: Store, const P: usize, const H: usize>(
    fs: &mut Fs<S, P, H>,
    path: &str,
) -> Result<ImageInfo, UpdateError<S::FlashError>> {
    let f = match fs.open(path, OpenOptions::new().read(true)) {
        Ok(f) => f,
        Err(stagefs_core::Error::NotFound) => return Err(UpdateError::Missing),
        Err(e) => return Err(e.into()),
    };
    let checked = check_open(fs, f);
    let closed = fs.close(f);
    let info = checked?;
    closed?;
    Ok(info)
}

fn check_open<S: Store, const P: usize, const H: usize>(
    fs: &mut Fs<S, P, H>,
    f: File,
) -> Result<ImageInfo, UpdateError<S::FlashError>> {
    let size = fs.len(f)?;
    let mut buf = [0u8; VERIFY_CHUNK];
    let mut got = 0;
    while got < HEADER_LEN {
        match fs.read(f, &mut buf[got..HEADER_LEN])? {
            0 => return Err(UpdateError::BadHeader),
            n => got += n,
        }
    }
    let mut header = [0; HEADER_LEN];
    header.copy_from_slice(&buf[..HEADER_LEN]);
    let info = ImageInfo::decode(&header).ok_or(UpdateError::BadHeader)?;
    let payload = size - HEADER_LEN as u64;
    if payload != u64::from(info.len) {
        return Err(UpdateError::Length {
            expected: info.len,
            actual: payload,
        });
    }
    let mut digest = CRC32.digest();
    loop {
        match fs.read(f, &mut buf)? {
            0 => break,
            n => digest.update(&buf[..n]),
        }
    }
    let actual = digest.finalize();
    if actual != info.crc {
        return Err(UpdateError::Crc {
            expected: info.crc,
            actual,
        });
    }
    Ok(info)
}

/// What a boot does before starting the application: removes an update that was being
/// received when the power failed, and verifies the active image.
pub fn boot_check<S: Store, const P: usize, const H: usize>(
    fs: &mut Fs<S, P, H>,
) -> Result<ImageInfo, UpdateError<S::FlashError>> {
    match fs.remove(PENDING) {
        // Nothing pending, or a read-only volume (the pending file stays; boot anyway).
        Ok(()) | Err(stagefs_core::Error::NotFound | stagefs_core::Error::ReadOnly) => {}
        Err(e) => return Err(e.into()),
    }
    verify(fs, ACTIVE)
}
