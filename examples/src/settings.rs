//! A settings store: a small file rewritten whole whenever a setting changes, and read
//! at boot (with defaults when it is missing or does not check out).
//!
//! The file is 36 bytes, so the file layer keeps it inline in its directory entry: a
//! rewrite programs no data page of its own, and the open-with-`truncate`, write, close
//! of [`save`] lands whole or not at all. After a power cut during a save, [`load`]
//! finds the old settings or the new ones (the host program `settings-store` checks it
//! with a cut at every program/erase of a save, in every cut kind). The CRC does not
//! guard against the file layer (it keeps its promise); it catches a file written by
//! something else, such as an older firmware with another layout.
//!
//! ```ignore
//! // At boot:
//! let settings = settings::boot(&mut fs)?; // loads (or defaults), counts the boot
//! // When the user changes something:
//! let mut s = settings;
//! s.alarm_threshold = 42;
//! settings::save(&mut fs, &s)?; // durable when it returns
//! ```

use crc::{Crc, CRC_32_ISO_HDLC};
use stagefs_core::{Fs, Store};

use crate::FsError;

/// The directory the settings live in.
pub const DIR: &str = "/config";
/// The settings file.
pub const PATH: &str = "/config/settings";
/// Bytes of the settings file.
pub const FILE_LEN: usize = 36;

const MAGIC: [u8; 4] = *b"SET1";
const CRC32: Crc<u32> = Crc::<u32>::new(&CRC_32_ISO_HDLC);

/// The device's settings.
///
/// On flash (little-endian): `SET1`, `sample_period_ms` u32, `alarm_threshold` i32,
/// `boot_count` u32, `name` (16 bytes, NUL-padded), CRC-32 (ISO-HDLC) of the 32 bytes
/// before it. A new layout gets a new magic (and [`load`] falls back to defaults or
/// converts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Settings {
    /// How often the sensor is sampled.
    pub sample_period_ms: u32,
    /// Readings above this raise the alarm.
    pub alarm_threshold: i32,
    /// Boots counted by [`boot`].
    pub boot_count: u32,
    /// The device's name, NUL-padded.
    pub name: [u8; 16],
}

impl Default for Settings {
    fn default() -> Self {
        let mut name = [0; 16];
        name[..6].copy_from_slice(b"sensor");
        Settings {
            sample_period_ms: 1000,
            alarm_threshold: 100,
            boot_count: 0,
            name,
        }
    }
}

impl Settings {
    /// The file's bytes.
    pub fn encode(&self) -> [u8; FILE_LEN] {
        let mut b = [0; FILE_LEN];
        b[0..4].copy_from_slice(&MAGIC);
        b[4..8].copy_from_slice(&self.sample_period_ms.to_le_bytes());
        b[8..12].copy_from_slice(&self.alarm_threshold.to_le_bytes());
        b[12..16].copy_from_slice(&self.boot_count.to_le_bytes());
        b[16..32].copy_from_slice(&self.name);
        let crc = CRC32.checksum(&b[..32]);
        b[32..36].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Settings from the file's bytes; `None` for a wrong length, magic or CRC.
    pub fn decode(b: &[u8]) -> Option<Settings> {
        if b.len() != FILE_LEN || b[0..4] != MAGIC {
            return None;
        }
        let word = |i: usize| [b[i], b[i + 1], b[i + 2], b[i + 3]];
        if CRC32.checksum(&b[..32]) != u32::from_le_bytes(word(32)) {
            return None;
        }
        let mut name = [0; 16];
        name.copy_from_slice(&b[16..32]);
        Some(Settings {
            sample_period_ms: u32::from_le_bytes(word(4)),
            alarm_threshold: i32::from_le_bytes(word(8)),
            boot_count: u32::from_le_bytes(word(12)),
            name,
        })
    }
}

/// Where [`load`]'s settings came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Source {
    /// The settings file.
    Stored,
    /// Defaults: there is no settings file (first boot).
    Missing,
    /// Defaults: the settings file does not check out (length, magic or CRC).
    Invalid,
}

/// Reads the settings file; defaults when it is missing or invalid (and says which).
pub fn load<S: Store, const P: usize, const H: usize>(
    fs: &mut Fs<S, P, H>,
) -> Result<(Settings, Source), FsError<S>> {
    // One byte more than the file should have, to notice a longer file.
    let mut buf = [0u8; FILE_LEN + 1];
    Ok(match crate::read_file(fs, PATH, &mut buf)? {
        None => (Settings::default(), Source::Missing),
        Some(n) => match Settings::decode(&buf[..n]) {
            Some(s) => (s, Source::Stored),
            None => (Settings::default(), Source::Invalid),
        },
    })
}

/// Replaces the settings file, durably: after a power cut the file holds the old
/// settings or these, never a mix.
pub fn save<S: Store, const P: usize, const H: usize>(
    fs: &mut Fs<S, P, H>,
    settings: &Settings,
) -> Result<(), FsError<S>> {
    match fs.create_dir(DIR) {
        Ok(()) | Err(stagefs_core::Error::Exists) => {}
        Err(e) => return Err(e),
    }
    crate::write_file(fs, PATH, &settings.encode())
}

/// What a boot does: loads the settings (defaults on the first boot), counts the boot
/// and saves them; returns them with where they came from.
pub fn boot<S: Store, const P: usize, const H: usize>(
    fs: &mut Fs<S, P, H>,
) -> Result<(Settings, Source), FsError<S>> {
    let (mut settings, source) = load(fs)?;
    settings.boot_count = settings.boot_count.wrapping_add(1);
    save(fs, &settings)?;
    Ok((settings, source))
}
