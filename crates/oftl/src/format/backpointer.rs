//! The 16-byte per-page backpointer: who owns a page and where it belongs.
//!
//! Every page the OFTL programs carries one. It makes the index reconstructible from
//! the pages themselves, so indexes only reach flash at checkpoints, and it orders the
//! pages of a write head (`seq`) so recovery can replay the updating window.
//!
//! ```text
//!  byte  0    1    2    3    4    5    6    7    8    9   10   11   12   13   14   15
//!      +-------------------+--------------+--------------+---------+---------+---------+
//!      | seq (u32 LE)      | owner (u24)  | lpn (u24)    | kind|len| C|delta  | crc16   |
//!      +-------------------+--------------+--------------+---------+---------+---------+
//!  kind|len : u16 LE, bits 15..13 = kind, bits 12..0 = valid length in bytes (<= 4096)
//!  C|R|delta: u16 LE, bit 15 = commit (last page of a transaction), bit 14 = relocated,
//!             bits 13..0 = delta, the distance in `seq` to the transaction's first page
//!             (transaction id = seq - delta; on a commit page, count = delta + 1)
//!  crc16    : CRC-16/IBM-3740 over bytes 0..14, stored LE
//! ```
//!
//! **Relocated pages** (R = 1) are the copies garbage collection (and scrubbing,
//! retirement) writes through the cold write head. Their `seq` is not a number of
//! their own head but a *watermark*: the data head's next sequence number when the copy
//! was programmed, so the copy reflects every data-head page numbered below it. They are
//! complete on their own (C = 1, delta = 0); recovery merges them into the data head's
//! replay by watermark (see the `recovery` module).
//!
//! All-`0xFF` bytes are an erased slot ([`Backpointer::parse`] returns `Ok(None)`); any
//! other content that fails the CRC or names an unknown kind is [`Corrupted`].
//!
//! # Placement
//!
//! On parts with at least 16 ECC-protected free OOB bytes the backpointer is scattered
//! over them in layout order ([`nand_hal::OobLayout::scatter_protected`]), so a data page
//! and its backpointer go to flash in one program and the whole data area is payload.
//! Otherwise it is an in-band trailer: the last 20 bytes of the page, a CRC-32 of the
//! payload ([`PAYLOAD_CRC_LEN`]) then the backpointer. Pages that must stay
//! open for later partial programs (object metadata pages) always carry it in-band at the
//! end of their first program unit, see [`super::meta`].

use super::field::{crc_matches, get_u16, get_u24, get_u32, put_u16, put_u24, put_u32};
use crate::errors::Corrupted;

/// Encoded size.
pub const BP_LEN: usize = 16;
/// In-band trailers and log sectors put a CRC-32 of the payload before the backpointer,
/// so torn or decayed payloads are caught on parts whose ECC does not (or does not
/// exist).
pub const PAYLOAD_CRC_LEN: usize = 4;
/// In-band trailer: payload CRC-32 then backpointer.
pub const TRAILER_LEN: usize = BP_LEN + PAYLOAD_CRC_LEN;

/// CRC-32/ISO-HDLC of a payload.
pub fn payload_crc(payload: &[u8]) -> u32 {
    super::superblock::CRC32.checksum(payload)
}

/// Largest valid length the format can express.
pub const MAX_VALID_LEN: u32 = (1 << 13) - 1;
/// Largest owner id and logical page number (24 bits).
pub const MAX_U24: u32 = (1 << 24) - 1;
/// Largest transaction delta (14 bits).
pub const MAX_TX_DELTA: u32 = (1 << 14) - 1;

const COMMIT_BIT: u16 = 1 << 15;
const RELOCATED_BIT: u16 = 1 << 14;
const DELTA_MASK: u16 = (1 << 14) - 1;

const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_IBM_3740);

/// Where each field lives (see the module docs).
mod field {
    use core::ops::Range;
    pub const SEQ: Range<usize> = 0..4;
    pub const OWNER: Range<usize> = 4..7;
    pub const LPN: Range<usize> = 7..10;
    /// Bits 15..13 kind, 12..0 valid bytes.
    pub const KIND_LEN: Range<usize> = 10..12;
    /// Bit 15 commit, 14 relocated, 13..0 transaction delta.
    pub const TX: Range<usize> = 12..14;
    /// What the CRC covers.
    pub const COVERED: Range<usize> = 0..14;
    pub const CRC: Range<usize> = 14..16;
}

/// What a page holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PageKind {
    /// Object data.
    Data = 1,
    /// An object metadata page.
    Meta = 2,
    /// An object index page (root or leaf).
    Index = 3,
    /// A checkpoint page.
    Checkpoint = 4,
    /// A log-stream sector.
    Log = 5,
    /// The "mounted and dirtied" marker written after a clean checkpoint.
    Marker = 6,
    /// An object table page ([`super::table`]).
    Table = 7,
}

impl PageKind {
    fn from_bits(v: u16) -> Option<Self> {
        Some(match v {
            1 => PageKind::Data,
            2 => PageKind::Meta,
            3 => PageKind::Index,
            4 => PageKind::Checkpoint,
            5 => PageKind::Log,
            6 => PageKind::Marker,
            7 => PageKind::Table,
            _ => return None,
        })
    }
}

/// A decoded backpointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Backpointer {
    /// Page kind.
    pub kind: PageKind,
    /// Owning object (or checkpoint sequence, for checkpoint pages), 24 bits.
    pub owner: u32,
    /// Logical page number inside the owner, 24 bits.
    pub lpn: u32,
    /// Valid bytes from the start of the payload.
    pub len: u16,
    /// Write-head sequence number.
    pub seq: u32,
    /// Distance in `seq` to the first page of the transaction.
    pub tx_delta: u16,
    /// Last page of its transaction.
    pub commit: bool,
    /// A copy programmed through the cold head: `seq` is a data-head watermark.
    pub relocated: bool,
}

impl Backpointer {
    /// A page that is its own one-page transaction.
    pub const fn single(kind: PageKind, owner: u32, lpn: u32, len: u16) -> Self {
        Backpointer {
            kind,
            owner,
            lpn,
            len,
            seq: 0,
            tx_delta: 0,
            commit: true,
            relocated: false,
        }
    }

    /// The transaction id (sequence number of its first page).
    pub const fn tx_id(&self) -> u32 {
        self.seq.wrapping_sub(self.tx_delta as u32)
    }

    /// Encodes into 16 bytes. Fields wider than the format are a caller bug; they are
    /// masked (and checked in debug builds).
    pub fn encode(&self) -> [u8; BP_LEN] {
        debug_assert!(self.owner <= MAX_U24 && self.lpn <= MAX_U24);
        debug_assert!(self.len as u32 <= MAX_VALID_LEN && self.tx_delta as u32 <= MAX_TX_DELTA);
        let mut b = [0u8; BP_LEN];
        put_u32(&mut b, field::SEQ, self.seq);
        put_u24(&mut b, field::OWNER, self.owner);
        put_u24(&mut b, field::LPN, self.lpn);
        let kl = ((self.kind as u16) << 13) | (self.len & 0x1FFF);
        put_u16(&mut b, field::KIND_LEN, kl);
        let mut tx = self.tx_delta & DELTA_MASK;
        if self.commit {
            tx |= COMMIT_BIT;
        }
        if self.relocated {
            tx |= RELOCATED_BIT;
        }
        put_u16(&mut b, field::TX, tx);
        let crc = CRC16.checksum(&b[field::COVERED]);
        put_u16(&mut b, field::CRC, crc);
        b
    }

    /// Parses 16 bytes: `Ok(None)` if erased, `Err(Corrupted)` if damaged.
    pub fn parse(b: &[u8]) -> Result<Option<Self>, Corrupted> {
        let b: &[u8; BP_LEN] = b
            .get(..BP_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(Corrupted)?;
        if b.iter().all(|&x| x == 0xFF) {
            return Ok(None);
        }
        let crc = get_u16(b, field::CRC) as u32;
        if !crc_matches(crc, CRC16.checksum(&b[field::COVERED]) as u32) {
            return Err(Corrupted);
        }
        let kl = get_u16(b, field::KIND_LEN);
        let kind = PageKind::from_bits(kl >> 13).ok_or(Corrupted)?;
        let tx = get_u16(b, field::TX);
        Ok(Some(Backpointer {
            kind,
            seq: get_u32(b, field::SEQ),
            owner: get_u24(b, field::OWNER),
            lpn: get_u24(b, field::LPN),
            len: kl & 0x1FFF,
            tx_delta: tx & DELTA_MASK,
            commit: tx & COMMIT_BIT != 0,
            relocated: tx & RELOCATED_BIT != 0,
        }))
    }
}

/// Where data pages carry their backpointer (chosen at format time, recorded in the
/// superblock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Placement {
    /// In the ECC-protected free OOB bytes.
    Oob = 0,
    /// In the last 16 bytes of the page.
    InBand = 1,
}

impl Placement {
    /// Decodes the superblock byte.
    pub fn from_byte(v: u8) -> Option<Self> {
        match v {
            0 => Some(Placement::Oob),
            1 => Some(Placement::InBand),
            _ => None,
        }
    }

    /// The placement a part supports best.
    pub fn for_caps(caps: &nand_hal::Capabilities) -> Self {
        if caps.oob.protected_bytes() >= BP_LEN {
            Placement::Oob
        } else {
            Placement::InBand
        }
    }

    /// Payload bytes of a page with this placement.
    pub const fn payload(self, page_size: u32) -> u32 {
        match self {
            Placement::Oob => page_size,
            Placement::InBand => page_size - TRAILER_LEN as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Backpointer {
        Backpointer {
            kind: PageKind::Data,
            owner: 0xABCDEF,
            lpn: 0x123456,
            len: 2048,
            seq: 0xDEAD_BEEF,
            tx_delta: 0x3FFE,
            commit: true,
            relocated: false,
        }
    }

    #[test]
    fn round_trip() {
        let bp = sample();
        assert_eq!(Backpointer::parse(&bp.encode()), Ok(Some(bp)));
        let bp2 = Backpointer {
            commit: false,
            kind: PageKind::Marker,
            ..bp
        };
        assert_eq!(Backpointer::parse(&bp2.encode()), Ok(Some(bp2)));
        assert_eq!(bp.tx_id(), 0xDEAD_BEEF - 0x3FFE);
        let cold = Backpointer {
            relocated: true,
            tx_delta: 0,
            ..bp
        };
        assert_eq!(Backpointer::parse(&cold.encode()), Ok(Some(cold)));
    }

    #[test]
    fn relocated_flag_is_bit_14_and_leaves_the_rest_alone() {
        for (commit, relocated, delta) in [
            (false, false, 0),
            (true, false, MAX_TX_DELTA as u16),
            (false, true, MAX_TX_DELTA as u16),
            (true, true, 1),
            (true, true, 0),
        ] {
            let bp = Backpointer {
                commit,
                relocated,
                tx_delta: delta,
                ..sample()
            };
            let enc = bp.encode();
            let tx = u16::from_le_bytes([enc[12], enc[13]]);
            assert_eq!(tx & (1 << 14) != 0, relocated);
            assert_eq!(tx & (1 << 15) != 0, commit);
            assert_eq!(tx & 0x3FFF, delta);
            assert_eq!(Backpointer::parse(&enc), Ok(Some(bp)));
        }
        // Flipping only the flag (CRC fixed up) changes only the flag.
        let mut b = sample().encode();
        b[13] ^= 0x40;
        let crc = CRC16.checksum(&b[..14]);
        b[14..16].copy_from_slice(&crc.to_le_bytes());
        let back = Backpointer::parse(&b).unwrap().unwrap();
        assert!(back.relocated);
        assert_eq!(
            back,
            Backpointer {
                relocated: true,
                ..sample()
            }
        );
    }

    #[test]
    fn relocated_flag_is_crc_protected() {
        let cold = Backpointer {
            relocated: true,
            ..sample()
        }
        .encode();
        let mut b = cold;
        b[13] ^= 0x40;
        assert_eq!(Backpointer::parse(&b), Err(Corrupted));
    }

    #[test]
    fn erased_and_corrupt() {
        assert_eq!(Backpointer::parse(&[0xFF; 16]), Ok(None));
        assert_eq!(Backpointer::parse(&[0x00; 16]), Err(Corrupted));
        assert_eq!(Backpointer::parse(&[0xFF; 15]), Err(Corrupted));
        let good = Backpointer {
            relocated: true,
            ..sample()
        }
        .encode();
        for byte in 0..16 {
            for bit in 0..8 {
                let mut b = good;
                b[byte] ^= 1 << bit;
                assert_eq!(Backpointer::parse(&b), Err(Corrupted), "{byte}.{bit}");
            }
        }
    }

    #[test]
    fn unknown_kind_is_corrupt() {
        let mut b = sample().encode();
        b[11] &= 0x1F; // kind 0
        let crc = CRC16.checksum(&b[..14]);
        b[14..16].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(Backpointer::parse(&b), Err(Corrupted));
    }

    #[test]
    fn fits_w25n_protected_bytes() {
        let caps = nand_hal::sim::profile::W25N01GV.capabilities;
        assert_eq!(Placement::for_caps(&caps), Placement::Oob);
        let mut oob = [0xFFu8; 64];
        let enc = sample().encode();
        assert_eq!(caps.oob.scatter_protected(&enc, &mut oob), 16);
        let mut back = [0u8; 16];
        caps.oob.gather_protected(&oob, &mut back);
        assert_eq!(Backpointer::parse(&back), Ok(Some(sample())));
    }
}
