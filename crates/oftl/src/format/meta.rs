//! The object metadata page: an object's identity, size and user attributes.
//!
//! Written as the first program unit of a fresh page only, with its backpointer in-band
//! at the end of that unit, so the page's other program units stay erased. They are
//! reserved for compacted partial-page updates co-located with the metadata (a later
//! format revision appends them with partial programs; today they must read erased).
//!
//! ```text
//! unit 0 (program unit, e.g. 512 B):
//!   0   4  object id (u32 LE)
//!   4   1  kind (0 object, 1 log stream)
//!   5   1  flags: bit 0 = deleted (tombstone)
//!   6   2  reserved (0xFFFF)
//!   8   8  size in bytes (u64 LE)
//!  16  64  user attributes
//!  80   4  CRC-32/ISO-HDLC over bytes 0..80
//!  84  ..  reserved (0xFF)
//!  pu-16 16 backpointer (kind Meta, owner = id, lpn 0, len 84)
//! units 1..: reserved for co-located partial-page updates (erased)
//! ```

use super::checkpoint::ObjKind;
use super::field::{crc_matches, get_u32, get_u64, put_u32, put_u64};
use super::superblock::CRC32;
use crate::errors::Corrupted;

/// User attribute bytes per object.
pub const ATTR_LEN: usize = 64;
/// Encoded metadata length (before the reserved area).
pub const META_LEN: usize = 84;

/// Where each field lives (see the module docs).
mod field {
    use core::ops::Range;
    pub const ID: Range<usize> = 0..4;
    pub const KIND: usize = 4;
    pub const FLAGS: usize = 5;
    pub const RESERVED: Range<usize> = 6..8;
    pub const SIZE: Range<usize> = 8..16;
    pub const ATTRS: Range<usize> = 16..80;
    /// What the CRC covers.
    pub const COVERED: Range<usize> = 0..80;
    pub const CRC: Range<usize> = 80..84;
}

/// A decoded metadata record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MetaRecord {
    /// Object id.
    pub id: u32,
    /// Kind.
    pub kind: ObjKind,
    /// Tombstone.
    pub deleted: bool,
    /// Size in bytes.
    pub size: u64,
    /// User attributes.
    pub attrs: [u8; ATTR_LEN],
}

impl MetaRecord {
    /// Encodes into the first `META_LEN` bytes of `out` (rest untouched).
    pub fn encode(&self, out: &mut [u8]) {
        let b = &mut out[..META_LEN];
        put_u32(b, field::ID, self.id);
        b[field::KIND] = self.kind as u8;
        b[field::FLAGS] = self.deleted as u8;
        b[field::RESERVED].fill(0xFF);
        put_u64(b, field::SIZE, self.size);
        b[field::ATTRS].copy_from_slice(&self.attrs);
        let crc = CRC32.checksum(&b[field::COVERED]);
        put_u32(b, field::CRC, crc);
    }

    /// Parses.
    pub fn parse(b: &[u8]) -> Result<Self, Corrupted> {
        let b = b.get(..META_LEN).ok_or(Corrupted)?;
        if !crc_matches(get_u32(b, field::CRC), CRC32.checksum(&b[field::COVERED]))
            || b[field::FLAGS] > 1
        {
            return Err(Corrupted);
        }
        let mut attrs = [0u8; ATTR_LEN];
        attrs.copy_from_slice(&b[field::ATTRS]);
        Ok(MetaRecord {
            id: get_u32(b, field::ID),
            kind: ObjKind::from_byte(b[field::KIND]).ok_or(Corrupted)?,
            deleted: b[field::FLAGS] == 1,
            size: get_u64(b, field::SIZE),
            attrs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let m = MetaRecord {
            id: 3,
            kind: ObjKind::Object,
            deleted: false,
            size: 123_456,
            attrs: [7; ATTR_LEN],
        };
        let mut b = [0xFFu8; 512];
        m.encode(&mut b);
        assert_eq!(MetaRecord::parse(&b), Ok(m));
        assert!(b[META_LEN..].iter().all(|&x| x == 0xFF));
        for i in 0..META_LEN {
            let mut c = b;
            c[i] ^= 0x40;
            assert_eq!(MetaRecord::parse(&c), Err(Corrupted), "byte {i}");
        }
        assert_eq!(MetaRecord::parse(&[0xFF; 512]), Err(Corrupted));
        assert_eq!(MetaRecord::parse(&[0; 10]), Err(Corrupted));
    }
}
