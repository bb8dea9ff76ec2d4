//! The volume header: object 1 of the store, written by `format` (its version once more
//! when a mount upgrades a version-1 volume).
//!
//! ```text
//!  0   4  magic "SFS1"
//!  4   2  version (3; 2 and 1 are read too: their directories have headers of
//!         version 2 at most, version 1 only)
//!  6   1  longest name (NAME_MAX)
//!  7   1  longest attributes (ATTR_MAX)
//!  8   2  largest inline file (INLINE_MAX)
//! 10   2  reserved (0)
//! 12   4  root directory (object id)
//! 16   4  staging log stream (object id)
//! 20  12  reserved (0)
//! ```

use super::{le16, le32, put16, put32, Corrupted};

/// Encoded length.
pub const LEN: usize = 32;
const MAGIC: [u8; 4] = *b"SFS1";
/// The version `format` writes: directory headers may count buckets per group (their
/// version 3).
pub const VERSION: u16 = 3;
/// Byte offset of the version.
pub const VERSION_AT: u64 = 4;

/// The volume header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Volume {
    /// Root directory.
    pub root: u32,
    /// Staging log stream.
    pub staging: u32,
    /// 3; 2 for a volume whose directory headers are of version 2 at most (firmware
    /// from stops 55 and 56 mounts those), 1 for one whose headers all count names
    /// (firmware from before stop 55 mounts only those).
    pub version: u16,
}

impl Volume {
    /// The newest directory header version that may be written (firmware that reads
    /// the volume header reads it).
    pub fn dir_version(&self) -> u8 {
        self.version.min(3) as u8
    }

    /// Encodes.
    pub fn encode(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[0..4].copy_from_slice(&MAGIC);
        put16(&mut b, 4, self.version);
        b[6] = crate::NAME_MAX as u8;
        b[7] = crate::ATTR_MAX as u8;
        put16(&mut b, 8, crate::INLINE_MAX as u16);
        put32(&mut b, 12, self.root);
        put32(&mut b, 16, self.staging);
        b
    }

    /// Parses: `Ok(None)` when it is not a volume header of this version (not
    /// formatted by this layer), `Err` when it is one but its fields are impossible.
    pub fn parse(b: &[u8]) -> Result<Option<Self>, Corrupted> {
        if b.len() < LEN || b[0..4] != MAGIC || !(1..=VERSION).contains(&le16(b, 4)) {
            return Ok(None);
        }
        if b[6] as usize != crate::NAME_MAX
            || b[7] as usize != crate::ATTR_MAX
            || le16(b, 8) as usize != crate::INLINE_MAX
        {
            return Err(Corrupted);
        }
        let v = Volume {
            root: le32(b, 12),
            staging: le32(b, 16),
            version: le16(b, 4),
        };
        if v.root == 0 || v.staging == 0 || v.root == v.staging {
            return Err(Corrupted);
        }
        Ok(Some(v))
    }
}
