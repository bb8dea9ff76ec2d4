//! Log-stream sectors (format v4): self-describing program units, so a page of a log
//! stream can be filled one sector per synced append with partial programs, and every
//! sector checks out (or not) on its own.
//!
//! ```text
//!  sector = one program unit (one ECC step), e.g. 512 bytes:
//!  0                                   unit-20     unit-16                        unit
//!  +-----------------------------------+-----------+------------------------------+
//!  | payload (unit - 20 bytes; the     | CRC-32    | trailer: a 16-byte backpointer|
//!  | record's bytes, then FFh)         | (LE)      | (see `backpointer`), kind Log |
//!  +-----------------------------------+-----------+------------------------------+
//!  CRC-32/ISO-HDLC over the payload and the trailer's first 14 bytes.
//!
//!  trailer fields for kind Log:
//!   seq      the log head's sequence number of this sector (each sector has its own)
//!   owner    the stream (object id)
//!   lpn      the stream's logical page: the sector's LSN is lpn * sectors_per_page + slot
//!   kind|len bits 15..13 kind (5 = Log), bit 12 LAST (the last sector of its record),
//!            bits 11..0 payload bytes used (<= unit - 20)
//!   C|R|delta
//!            C (bit 15): the last sector of its group
//!            R (bit 14): the group is a copy (relocation, or the retry of a failed
//!                        partial program)
//!            bits 13..7: the sector's position in its record (0 = the record's first)
//!            bits 6..0:  seq distance to its group's first sector
//! ```
//!
//! A **group** is what one program operation wrote: consecutive sequence numbers in
//! ascending slots of one page (a copy may leave slots out, never numbers). A group
//! counts only whole: every number from its first sector to its commit (C) sector must
//! be present and valid in the page ([`complete_slots`]), so a group a cut or a failed
//! program left partly written is absent as a whole, and the records of one commit
//! (several may share it) survive or vanish together. A **record** is consecutive slots
//! from position 0 to the LAST sector, inside complete groups.
//!
//! Each sector's header lives in its own step (in-band), never in another step's data
//! or spare bytes: every ECC step of a page is written exactly once, and a torn or
//! failed program can only harm the steps it was programming.

use super::backpointer::{Backpointer, PageKind, BP_LEN, PAYLOAD_CRC_LEN, TRAILER_LEN};
use super::field::{crc_matches, get_u32, put_u32};
use super::superblock::CRC32;

/// Where the parts of a sector of `unit` bytes live (see the module docs).
mod field {
    use super::{BP_LEN, PAYLOAD_CRC_LEN, TRAILER_LEN};
    use core::ops::Range;
    pub const fn payload(unit: usize) -> Range<usize> {
        0..unit - TRAILER_LEN
    }
    pub const fn crc(unit: usize) -> Range<usize> {
        unit - TRAILER_LEN..unit - TRAILER_LEN + PAYLOAD_CRC_LEN
    }
    pub const fn trailer(unit: usize) -> Range<usize> {
        unit - BP_LEN..unit
    }
}

/// Flag in the length field: the last sector of its record.
const LAST_BIT: u16 = 1 << 12;
const LEN_MASK: u16 = LAST_BIT - 1;
/// Most sectors a page may hold (4 KiB pages of 128-byte units).
pub const MAX_SECTORS: usize = 32;
const GROUP_MASK: u16 = 0x7F;
const POS_SHIFT: u16 = 7;

/// A decoded log-sector trailer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LogSector {
    /// Log-head sequence number.
    pub seq: u32,
    /// Stream.
    pub stream: u32,
    /// Logical page of the stream.
    pub lpage: u32,
    /// Payload bytes used.
    pub len: u16,
    /// The last sector of its record.
    pub last: bool,
    /// Position of the sector in its record.
    pub pos: u8,
    /// Distance in `seq` to the group's first sector.
    pub group_delta: u8,
    /// The last sector of its group.
    pub commit: bool,
    /// The group is a copy.
    pub copy: bool,
}

impl LogSector {
    /// Sequence number of the group's first sector.
    pub const fn group_first(&self) -> u32 {
        self.seq.wrapping_sub(self.group_delta as u32)
    }

    /// Payload bytes of a sector of `unit` bytes.
    pub const fn payload(unit: usize) -> usize {
        unit - TRAILER_LEN
    }

    /// The trailer as a backpointer (how recovery's scan sees it).
    pub fn backpointer(&self) -> Backpointer {
        Backpointer {
            kind: PageKind::Log,
            owner: self.stream,
            lpn: self.lpage,
            len: (self.len & LEN_MASK) | if self.last { LAST_BIT } else { 0 },
            seq: self.seq,
            tx_delta: ((self.pos as u16) << POS_SHIFT) | (self.group_delta as u16 & GROUP_MASK),
            commit: self.commit,
            relocated: self.copy,
        }
    }

    /// Reads the log fields of a backpointer of kind `Log`.
    pub fn from_backpointer(bp: &Backpointer) -> Option<Self> {
        (bp.kind == PageKind::Log).then_some(LogSector {
            seq: bp.seq,
            stream: bp.owner,
            lpage: bp.lpn,
            len: bp.len & LEN_MASK,
            last: bp.len & LAST_BIT != 0,
            pos: (bp.tx_delta >> POS_SHIFT) as u8,
            group_delta: (bp.tx_delta & GROUP_MASK) as u8,
            commit: bp.commit,
            copy: bp.relocated,
        })
    }

    /// Writes the CRC and the trailer into `sector` (one program unit whose payload is
    /// already in place).
    pub fn seal(&self, sector: &mut [u8]) {
        let unit = sector.len();
        let bp = self.backpointer().encode();
        sector[field::trailer(unit)].copy_from_slice(&bp);
        let crc = sector_crc(&sector[field::payload(unit)], &bp);
        put_u32(sector, field::crc(unit), crc);
    }

    /// Parses one sector: `Some` only if its trailer is a valid `Log` backpointer, its
    /// length fits and its CRC matches.
    pub fn parse(sector: &[u8]) -> Option<Self> {
        let unit = sector.len();
        if unit <= TRAILER_LEN {
            return None;
        }
        let trailer = &sector[field::trailer(unit)];
        let bp = Backpointer::parse(trailer).ok()??;
        let s = Self::from_backpointer(&bp)?;
        if s.len as usize > Self::payload(unit) || s.group_delta as usize >= MAX_SECTORS {
            return None;
        }
        let stored = get_u32(sector, field::crc(unit));
        crc_matches(stored, sector_crc(&sector[field::payload(unit)], trailer)).then_some(s)
    }
}

fn sector_crc(payload: &[u8], trailer: &[u8]) -> u32 {
    let mut d = CRC32.digest();
    d.update(payload);
    d.update(&trailer[..BP_LEN - 2]);
    d.finalize()
}

/// Whether `bytes` read as never programmed: all `0xFF` but at most `flips` bits per
/// `unit` bytes (an erased step's bit errors, which on-die ECC does not correct and a
/// driver may deliver as they are; Linux's `nand_check_erased_ecc_chunk` allows the
/// same). For interpreting reads only: whether a page may be programmed again takes a
/// read that corrected nothing and all `0xFF`.
pub fn blank(bytes: &[u8], unit: usize, flips: u32) -> bool {
    bytes.chunks(unit.max(1)).all(|step| {
        let mut zeros = 0u32;
        for &b in step {
            zeros += b.count_zeros();
            if zeros > flips {
                return false;
            }
        }
        true
    })
}

/// The sector in `slot` of a page held in `buf` (sectors of `unit` bytes), if valid on
/// its own.
pub fn sector_at(buf: &[u8], unit: usize, slot: u32) -> Option<LogSector> {
    let at = slot as usize * unit;
    LogSector::parse(buf.get(at..at + unit)?)
}

/// Which slots of the page in `buf` hold sectors of complete groups (bit `s` for slot
/// `s`), all of one stream and logical page (the first complete group's; sectors of
/// others are left out as corrupt).
pub fn complete_slots(buf: &[u8], unit: usize, sectors: u32) -> u32 {
    let n = (sectors as usize).min(MAX_SECTORS);
    let mut found: [Option<LogSector>; MAX_SECTORS] = [None; MAX_SECTORS];
    for (s, f) in found.iter_mut().enumerate().take(n) {
        *f = sector_at(buf, unit, s as u32);
    }
    let mut mask = 0u32;
    let mut owner: Option<(u32, u32)> = None;
    for s in 0..n {
        let Some(t) = found[s] else { continue };
        if mask & (1 << s) != 0 || t.group_delta != 0 {
            continue;
        }
        // A group starts here: collect its numbers in ascending slots.
        let first = t.seq;
        let mut members = 0u32;
        let mut expect = first;
        let mut whole = false;
        for (k, f) in found.iter().enumerate().take(n).skip(s) {
            let Some(u) = f else { continue };
            if u.group_first() != first || u.stream != t.stream || u.lpage != t.lpage {
                continue;
            }
            if u.seq != expect {
                break;
            }
            members |= 1 << k;
            expect = expect.wrapping_add(1);
            if u.commit {
                whole = true;
                break;
            }
        }
        if !whole {
            continue;
        }
        match owner {
            None => owner = Some((t.stream, t.lpage)),
            Some(o) if o != (t.stream, t.lpage) => continue,
            Some(_) => {}
        }
        mask |= members;
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNIT: usize = 512;

    fn sec(seq: u32, gd: u8, commit: bool, pos: u8, last: bool) -> LogSector {
        LogSector {
            seq,
            stream: 7,
            lpage: 3,
            len: 10,
            last,
            pos,
            group_delta: gd,
            commit,
            copy: false,
        }
    }

    fn page(sectors: &[(u32, LogSector)]) -> Vec<u8> {
        let mut buf = vec![0xFF; 4 * UNIT];
        for &(slot, s) in sectors {
            let at = slot as usize * UNIT;
            buf[at..at + 10].fill(slot as u8);
            s.seal(&mut buf[at..at + UNIT]);
        }
        buf
    }

    #[test]
    fn round_trip_and_every_bit_matters() {
        let s = LogSector {
            copy: true,
            ..sec(0xDEAD_BEEF, 5, true, 31, true)
        };
        let buf = page(&[(1, s)]);
        assert_eq!(sector_at(&buf, UNIT, 1), Some(s));
        assert_eq!(sector_at(&buf, UNIT, 0), None);
        let sector = &buf[UNIT..2 * UNIT];
        for byte in (0..UNIT).step_by(7).chain(UNIT - 20..UNIT) {
            let mut b = sector.to_vec();
            b[byte] ^= 0x04;
            assert_eq!(LogSector::parse(&b), None, "byte {byte}");
        }
    }

    #[test]
    fn groups_count_only_whole() {
        // Slot 0: a group of one; slots 1-2: a group of two; slot 3: the first of a
        // group of two whose second sector never landed.
        let buf = page(&[
            (0, sec(10, 0, true, 0, true)),
            (1, sec(11, 0, false, 0, false)),
            (2, sec(12, 1, true, 1, true)),
            (3, sec(13, 0, false, 0, true)),
        ]);
        assert_eq!(complete_slots(&buf, UNIT, 4), 0b0111);
        // Its first sector torn: the group's second counts for nothing either.
        let mut torn = buf.clone();
        torn[UNIT + 3] ^= 1;
        assert_eq!(complete_slots(&torn, UNIT, 4), 0b0001);
    }

    #[test]
    fn a_copy_may_leave_slots_out_but_not_numbers() {
        // A copy of slots 1 and 3 (slot 2 dropped) as one group 20..21.
        let copy = |s: LogSector| LogSector { copy: true, ..s };
        let buf = page(&[
            (1, copy(sec(20, 0, false, 0, true))),
            (3, copy(sec(21, 1, true, 0, true))),
        ]);
        assert_eq!(complete_slots(&buf, UNIT, 4), 0b1010);
        // A missing number is a torn copy: nothing of it counts.
        let buf = page(&[
            (1, copy(sec(20, 0, false, 0, true))),
            (3, copy(sec(22, 2, true, 0, true))),
        ]);
        assert_eq!(complete_slots(&buf, UNIT, 4), 0);
    }

    #[test]
    fn foreign_sectors_are_left_out() {
        let other = LogSector {
            stream: 8,
            ..sec(11, 0, true, 0, true)
        };
        let buf = page(&[(0, sec(10, 0, true, 0, true)), (1, other)]);
        assert_eq!(complete_slots(&buf, UNIT, 4), 0b01);
    }
}
