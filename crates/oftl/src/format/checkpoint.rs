//! The checkpoint: the persisted lazy state (object table root, block state table,
//! updating window record). Written as one byte stream over consecutive pages of a checkpoint
//! block; each page carries a [`super::backpointer`] of kind `Checkpoint` with
//! `owner` = 0, `lpn` = page index in the stream, `seq` = checkpoint sequence and the
//! commit flag on the last page. A checkpoint counts only when every page is present,
//! the stream CRC matches and the commit page closes it.
//!
//! ```text
//! stream offset      size            field
//!  0                    4            magic "OCKP"
//!  4                    2            version: 3, or 4 when the object ids wrapped;
//!                                    5 and 6 the same with a successor (format 8)
//!  6                    2            flags: bit 0 = clean (written by unmount)
//!  8                    4            checkpoint sequence
//! 12                    4            stream length in bytes, CRC included
//! 16                    4            n_blocks (= device blocks)
//! 20                    4            live objects
//! 24                    4            object id top: one past the highest id handed out
//!                                    (no live object has an id at or above it)
//! 28                    2            window length (blocks)
//! 30                    4            object table root index page (0xFFFFFFFF = none)
//! 34                    4            versions 4, 6: the id the next object gets (the
//!                                    id cursor, below the top: ids are being reused);
//!                                    versions 3, 5: reserved (0xFF), the cursor is
//!                                    the top
//! 38                    2            versions 5, 6: the successor, the index of the
//!                                    checkpoint block (in the superblock's list)
//!                                    erased for the checkpoints after this block's,
//!                                    before this checkpoint was written (0xFFFF:
//!                                    none); versions 3, 4: reserved (0xFF)
//! 40                   48            4 x head record (data, log, cold, index): block
//!                                    u32 (0xFFFFFFFF = none), next page u32, next
//!                                    sequence u32 (cold: one past its last watermark)
//! 88          4*window_len           window blocks, in allocation order (u32)
//! ..          4*n_blocks             block state table entries (see BstEntry)
//! len-4                 4            CRC-32/ISO-HDLC over bytes 0..len-4
//! ```
//!
//! Block state entry (u32 LE): bits 31..29 coarse state (0 free, 1 window, 2 full,
//! 3 bad, 4 reserved), bits 28..19 valid-page count, bits 18..0 erase count (saturating).
//! The paper's relaxed rule applies: counts are exact for the checkpointed state and
//! corrected by replaying the window after a crash; erase counts of blocks erased after
//! the checkpoint are lost on a crash (wear statistics only).
//!
//! The object records themselves live on flash in the object table
//! ([`super::table`]), reached through the table root recorded here.

use super::field::{get_u16, get_u32, put_u16, put_u32};
use crate::errors::Corrupted;

/// Where each header field lives (see the module docs).
mod field {
    use core::ops::Range;
    pub const MAGIC: Range<usize> = 0..4;
    pub const VERSION: Range<usize> = 4..6;
    pub const FLAGS: Range<usize> = 6..8;
    pub const SEQ: Range<usize> = 8..12;
    pub const TOTAL_LEN: Range<usize> = 12..16;
    pub const N_BLOCKS: Range<usize> = 16..20;
    pub const N_OBJECTS: Range<usize> = 20..24;
    pub const NEXT_OBJ_ID: Range<usize> = 24..28;
    pub const WINDOW_LEN: Range<usize> = 28..30;
    pub const TABLE_ROOT: Range<usize> = 30..34;
    pub const OBJ_CURSOR: Range<usize> = 34..38;
    pub const SUCCESSOR: Range<usize> = 38..40;
    /// A head record's fields.
    pub const HEAD_BLOCK: Range<usize> = 0..4;
    pub const HEAD_NEXT_PAGE: Range<usize> = 4..8;
    pub const HEAD_NEXT_SEQ: Range<usize> = 8..12;
}

/// Header size.
pub const HEADER_LEN: usize = 40;
/// Head records size.
pub const HEADS_LEN: usize = 12 * HEADS;
/// Number of write heads recorded (data, log, cold, index).
pub const HEADS: usize = 4;
/// Encoded "no page / no block".
pub const NONE: u32 = u32::MAX;
const MAGIC: [u8; 4] = *b"OCKP";
const VERSION: u16 = 3;
/// The version of a checkpoint whose object ids wrapped (it records the id cursor).
const VERSION_CURSOR: u16 = 4;
/// [`VERSION`] with a successor (format 8 images).
const VERSION_SUCC: u16 = 5;
/// [`VERSION_CURSOR`] with a successor.
const VERSION_SUCC_CURSOR: u16 = 6;
/// Encoded "no successor named".
pub const NO_SUCCESSOR: u16 = 0xFFFF;

/// The fixed checkpoint header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CkptHeader {
    /// Written by a clean unmount.
    pub clean: bool,
    /// Checkpoint sequence number.
    pub seq: u32,
    /// Stream length, CRC included.
    pub total_len: u32,
    /// Block table entries.
    pub n_blocks: u32,
    /// Live objects.
    pub n_objects: u32,
    /// One past the highest object id handed out.
    pub next_obj_id: u32,
    /// The id the next object gets: `next_obj_id` until the ids wrap, then below it.
    pub obj_cursor: u32,
    /// Window blocks recorded.
    pub window_len: u16,
    /// Root index page of the object table, or [`NONE`].
    pub table_root: u32,
    /// Format 8: the successor checkpoint block's index ([`NO_SUCCESSOR`]: none
    /// named); `None` in the format of earlier images (versions 3 and 4).
    pub successor: Option<u16>,
}

impl CkptHeader {
    /// Stream length implied by the counts.
    pub const fn stream_len(n_blocks: u32, window_len: u16) -> u32 {
        (HEADER_LEN + HEADS_LEN) as u32 + 4 * window_len as u32 + 4 * n_blocks + 4
    }

    /// Encodes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0xFFu8; HEADER_LEN];
        b[field::MAGIC].copy_from_slice(&MAGIC);
        let wrapped = self.obj_cursor != self.next_obj_id;
        let version = match (self.successor, wrapped) {
            (None, false) => VERSION,
            (None, true) => VERSION_CURSOR,
            (Some(_), false) => VERSION_SUCC,
            (Some(_), true) => VERSION_SUCC_CURSOR,
        };
        put_u16(&mut b, field::VERSION, version);
        if let Some(s) = self.successor {
            put_u16(&mut b, field::SUCCESSOR, s);
        }
        if wrapped {
            put_u32(&mut b, field::OBJ_CURSOR, self.obj_cursor);
        }
        put_u16(&mut b, field::FLAGS, self.clean as u16);
        put_u32(&mut b, field::SEQ, self.seq);
        put_u32(&mut b, field::TOTAL_LEN, self.total_len);
        put_u32(&mut b, field::N_BLOCKS, self.n_blocks);
        put_u32(&mut b, field::N_OBJECTS, self.n_objects);
        put_u32(&mut b, field::NEXT_OBJ_ID, self.next_obj_id);
        put_u16(&mut b, field::WINDOW_LEN, self.window_len);
        put_u32(&mut b, field::TABLE_ROOT, self.table_root);
        b
    }

    /// Parses and checks internal consistency (not the stream CRC).
    pub fn parse(b: &[u8]) -> Result<Self, Corrupted> {
        let b = b.get(..HEADER_LEN).ok_or(Corrupted)?;
        let version = get_u16(b, field::VERSION);
        if b[field::MAGIC] != MAGIC || !(VERSION..=VERSION_SUCC_CURSOR).contains(&version) {
            return Err(Corrupted);
        }
        let with_cursor = version == VERSION_CURSOR || version == VERSION_SUCC_CURSOR;
        let flags = get_u16(b, field::FLAGS);
        if flags > 1 {
            return Err(Corrupted);
        }
        let h = CkptHeader {
            clean: flags == 1,
            seq: get_u32(b, field::SEQ),
            total_len: get_u32(b, field::TOTAL_LEN),
            n_blocks: get_u32(b, field::N_BLOCKS),
            n_objects: get_u32(b, field::N_OBJECTS),
            next_obj_id: get_u32(b, field::NEXT_OBJ_ID),
            obj_cursor: if with_cursor {
                get_u32(b, field::OBJ_CURSOR)
            } else {
                get_u32(b, field::NEXT_OBJ_ID)
            },
            window_len: get_u16(b, field::WINDOW_LEN),
            table_root: get_u32(b, field::TABLE_ROOT),
            successor: (version >= VERSION_SUCC).then(|| get_u16(b, field::SUCCESSOR)),
        };
        if h.n_blocks > (1 << 24) || h.n_objects > (1 << 24) {
            return Err(Corrupted);
        }
        // Version 3 keeps the cursor's bytes erased; version 4 records a cursor below
        // the top.
        let cursor_ok = if with_cursor {
            h.obj_cursor != 0 && h.obj_cursor < h.next_obj_id
        } else {
            b[field::OBJ_CURSOR] == [0xFF; 4]
        };
        if !cursor_ok {
            return Err(Corrupted);
        }
        if h.total_len != Self::stream_len(h.n_blocks, h.window_len)
            || (h.successor.is_none() && b[field::SUCCESSOR] != [0xFF; 2])
        {
            return Err(Corrupted);
        }
        Ok(h)
    }
}

/// Position and sequence of one write head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HeadRecord {
    /// Block being filled, or [`NONE`].
    pub block: u32,
    /// Next page index in `block`.
    pub next_page: u32,
    /// Sequence number of the next page this head programs.
    pub next_seq: u32,
}

impl HeadRecord {
    /// Encodes.
    pub fn encode(&self) -> [u8; 12] {
        let mut b = [0u8; 12];
        put_u32(&mut b, field::HEAD_BLOCK, self.block);
        put_u32(&mut b, field::HEAD_NEXT_PAGE, self.next_page);
        put_u32(&mut b, field::HEAD_NEXT_SEQ, self.next_seq);
        b
    }
    /// Parses; `blocks`/`ppb` bound the position.
    pub fn parse(b: &[u8], blocks: u32, ppb: u32) -> Result<Self, Corrupted> {
        let b = b.get(..12).ok_or(Corrupted)?;
        let h = HeadRecord {
            block: get_u32(b, field::HEAD_BLOCK),
            next_page: get_u32(b, field::HEAD_NEXT_PAGE),
            next_seq: get_u32(b, field::HEAD_NEXT_SEQ),
        };
        if h.block != NONE && (h.block >= blocks || h.next_page > ppb) {
            return Err(Corrupted);
        }
        Ok(h)
    }
}

/// Coarse block state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BlockState {
    /// Holds nothing the index references; erased before reuse.
    Free = 0,
    /// Allocated to the updating window.
    Window = 1,
    /// Holds live pages outside the window.
    Full = 2,
    /// Factory or grown bad.
    Bad = 3,
    /// Superblock or checkpoint block.
    Reserved = 4,
}

/// One block state table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BstEntry {
    /// Coarse state.
    pub state: BlockState,
    /// Valid pages.
    pub valid: u16,
    /// Erase count.
    pub erases: u32,
}

const ERASE_MAX: u32 = (1 << 19) - 1;

impl BstEntry {
    /// Packs into a u32 (erase count saturates).
    pub fn pack(&self) -> u32 {
        ((self.state as u32) << 29)
            | ((self.valid as u32 & 0x3FF) << 19)
            | self.erases.min(ERASE_MAX)
    }
    /// Unpacks, checking `valid <= ppb`.
    pub fn unpack(v: u32, ppb: u32) -> Result<Self, Corrupted> {
        let state = match v >> 29 {
            0 => BlockState::Free,
            1 => BlockState::Window,
            2 => BlockState::Full,
            3 => BlockState::Bad,
            4 => BlockState::Reserved,
            _ => return Err(Corrupted),
        };
        let valid = ((v >> 19) & 0x3FF) as u16;
        if valid as u32 > ppb {
            return Err(Corrupted);
        }
        Ok(BstEntry {
            state,
            valid,
            erases: v & ERASE_MAX,
        })
    }
}

/// Object kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ObjKind {
    /// A byte-addressed object.
    Object = 0,
    /// A log stream (reserved for the log-stream layer).
    Log = 1,
}

impl ObjKind {
    /// Decodes.
    pub fn from_byte(v: u8) -> Option<Self> {
        match v {
            0 => Some(ObjKind::Object),
            1 => Some(ObjKind::Log),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_corruption() {
        let h = CkptHeader {
            clean: true,
            seq: 9,
            total_len: CkptHeader::stream_len(1024, 16),
            n_blocks: 1024,
            n_objects: 3,
            next_obj_id: 44,
            obj_cursor: 44,
            window_len: 16,
            table_root: 77,
            successor: None,
        };
        assert_eq!(CkptHeader::parse(&h.encode()), Ok(h));
        // Format 8: versions 5 and 6 name a successor (or none).
        for succ in [0u16, 3, 15, NO_SUCCESSOR] {
            let s = CkptHeader {
                successor: Some(succ),
                ..h
            };
            assert_eq!(&s.encode()[4..6], &[5, 0]);
            assert_eq!(&s.encode()[38..40], &succ.to_le_bytes());
            assert_eq!(CkptHeader::parse(&s.encode()), Ok(s));
            let sw = CkptHeader { obj_cursor: 9, ..s };
            assert_eq!(&sw.encode()[4..6], &[6, 0]);
            assert_eq!(CkptHeader::parse(&sw.encode()), Ok(sw));
        }
        let mut b = h.encode();
        b[38] = 2;
        assert_eq!(
            CkptHeader::parse(&b),
            Err(Corrupted),
            "version 3 with a successor"
        );
        let mut b = h.encode();
        b[4] = 7;
        assert_eq!(CkptHeader::parse(&b), Err(Corrupted), "version 7");
        // Ids wrapped: version 4 with the cursor; a cursor at or above the top, or 0,
        // does not parse.
        let w = CkptHeader { obj_cursor: 9, ..h };
        assert_eq!(&w.encode()[4..6], &[4, 0]);
        assert_eq!(CkptHeader::parse(&w.encode()), Ok(w));
        for bad in [0u32, 44, 45] {
            let mut b = w.encode();
            b[34..38].copy_from_slice(&bad.to_le_bytes());
            assert_eq!(CkptHeader::parse(&b), Err(Corrupted), "cursor {bad}");
        }
        let mut b = h.encode();
        b[34] = 1;
        assert_eq!(
            CkptHeader::parse(&b),
            Err(Corrupted),
            "version 3 with a cursor"
        );
        let mut b = h.encode();
        b[12] ^= 1;
        assert_eq!(CkptHeader::parse(&b), Err(Corrupted));
        let mut b = h.encode();
        b[0] = b'X';
        assert_eq!(CkptHeader::parse(&b), Err(Corrupted));
        assert_eq!(CkptHeader::parse(&[0xFF; HEADER_LEN]), Err(Corrupted));
        assert_eq!(CkptHeader::parse(&[0; 3]), Err(Corrupted));
    }

    #[test]
    fn head_bst_obj_round_trip() {
        let hr = HeadRecord {
            block: 7,
            next_page: 3,
            next_seq: 1000,
        };
        assert_eq!(HeadRecord::parse(&hr.encode(), 64, 16), Ok(hr));
        assert_eq!(HeadRecord::parse(&hr.encode(), 4, 16), Err(Corrupted));
        let e = BstEntry {
            state: BlockState::Full,
            valid: 61,
            erases: 12345,
        };
        assert_eq!(BstEntry::unpack(e.pack(), 64), Ok(e));
        assert_eq!(BstEntry::unpack(e.pack(), 16), Err(Corrupted));
        assert_eq!(BstEntry::unpack(0xFFFF_FFFF, 64), Err(Corrupted));
    }
}
