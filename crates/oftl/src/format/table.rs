//! The object table: one fixed-size record per object id, stored on flash.
//!
//! The table is the data of an internal object, [`TABLE_OBJ`] (id 0, never handed
//! out): table page `t` holds the records of ids `t * R .. (t + 1) * R`, with
//! `R = payload / 32` records per page (64 on 2 KiB pages), record `i` at byte
//! `32 * i`. The table object has an ordinary two-level index ([`super::index`]) whose
//! root page address is in the checkpoint header. Table pages carry a backpointer of
//! kind `Table`, `owner` 0, `lpn` = table page number; its index pages are `Index`
//! pages of owner 0. Like index pages, table pages are persisted lazily (written when
//! they leave the page cache and at checkpoints): after a crash, recovery rebuilds
//! the records from the metadata and data pages in the updating window.
//!
//! A table page that holds no live record is unmapped (reads as all free), and a table
//! leaf left empty is dropped, so the table costs flash pages only for ranges of ids
//! with live objects.
//!
//! Record (32 bytes; all `0xFF` = free):
//! ```text
//!  0  4  id (u32 LE; must equal the slot's id)
//!  4  1  kind (0 object, 1 log stream)
//!  5  1  flags: bit 0 = direct (objects only: the object has no index pages;
//!           its logical pages 0, 1 and 2 are mapped in the record itself)
//!  6  2  reserved (0xFFFF)
//!  8  8  size in bytes (u64 LE; a log stream's end LSN)
//! 16  4  root index page, or with `direct` the data page of logical page 0
//!        (u32 LE, 0xFFFFFFFF = none)
//! 20  4  metadata page (u32 LE)
//! 24  8  log stream: trim point (first live LSN, u64 LE), <= size
//!        object: 0; with `direct`, the data pages of logical pages 1 and 2
//!        (2 x u32 LE, 0xFFFFFFFF = none)
//! ```
//!
//! A direct object (every object starts as one) holds up to [`DIRECT_PAGES`] pages
//! without index pages, so a small file's update costs no index program; mapping a
//! page past them gives it an index for good (the direct pages move into leaf 0).

use nand_hal::PageAddr;

use super::checkpoint::{ObjKind, NONE};
use super::field::{get_u32, get_u64, put_u32, put_u64};
use crate::errors::Corrupted;

/// Record size.
pub const REC_LEN: usize = 32;
/// Logical pages a direct object maps in its record.
pub const DIRECT_PAGES: u32 = 3;
/// The object table's own object id.
pub const TABLE_OBJ: u32 = 0;

/// Where each field of a record lives (see the module docs).
mod field {
    use core::ops::Range;
    pub const ID: Range<usize> = 0..4;
    pub const KIND: usize = 4;
    pub const FLAGS: usize = 5;
    pub const RESERVED: Range<usize> = 6..8;
    pub const SIZE: Range<usize> = 8..16;
    pub const ROOT: Range<usize> = 16..20;
    pub const META: Range<usize> = 20..24;
    pub const LOG_START: Range<usize> = 24..32;
    /// A direct object's pages 1 and 2 (over `LOG_START`).
    pub const DIRECT_MORE: [Range<usize>; 2] = [24..28, 28..32];
}

/// One object record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ObjRecord {
    /// Object id (24 bits used).
    pub id: u32,
    /// Kind.
    pub kind: ObjKind,
    /// Size in bytes (a log stream's end LSN).
    pub size: u64,
    /// Root index page or `PageAddr(NONE)`; with `direct`, the data page of logical
    /// page 0 (or [`UNMAPPED`](super::index::UNMAPPED), the same value).
    pub root: PageAddr,
    /// A small object mapped without index pages: `root` and `direct_more` are its
    /// data pages 0, 1 and 2. Set at creation; cleared (for good) when the object
    /// first maps a page past [`DIRECT_PAGES`].
    pub direct: bool,
    /// With `direct`, the data pages of logical pages 1 and 2
    /// ([`UNMAPPED`](super::index::UNMAPPED) when not mapped); unused otherwise.
    pub direct_more: [PageAddr; DIRECT_PAGES as usize - 1],
    /// Current metadata page.
    pub meta: PageAddr,
    /// A log stream's trim point (first live sequence number).
    pub log_start: u64,
}

impl ObjRecord {
    /// Encodes.
    pub fn encode(&self) -> [u8; REC_LEN] {
        let mut b = [0xFFu8; REC_LEN];
        put_u32(&mut b, field::ID, self.id);
        b[field::KIND] = self.kind as u8;
        b[field::FLAGS] = self.direct as u8;
        put_u64(&mut b, field::SIZE, self.size);
        put_u32(&mut b, field::ROOT, self.root.0);
        put_u32(&mut b, field::META, self.meta.0);
        if self.direct {
            for (r, p) in field::DIRECT_MORE.into_iter().zip(self.direct_more) {
                put_u32(&mut b, r, p.0);
            }
        } else {
            put_u64(&mut b, field::LOG_START, self.log_start);
        }
        b
    }

    /// A direct object's data page of logical page `lpn`
    /// ([`UNMAPPED`](super::index::UNMAPPED) past [`DIRECT_PAGES`]).
    pub fn direct_page(&self, lpn: u32) -> PageAddr {
        match lpn {
            0 => self.root,
            l if l < DIRECT_PAGES => self.direct_more[l as usize - 1],
            _ => PageAddr(NONE),
        }
    }

    /// Maps a direct object's logical page `lpn` (below [`DIRECT_PAGES`]).
    pub fn set_direct_page(&mut self, lpn: u32, page: PageAddr) {
        match lpn {
            0 => self.root = page,
            l if l < DIRECT_PAGES => self.direct_more[l as usize - 1] = page,
            _ => {}
        }
    }

    /// A record of a new object or log stream: no pages, no index.
    pub fn new(id: u32, kind: ObjKind, size: u64, meta: PageAddr, log_start: u64) -> Self {
        ObjRecord {
            id,
            kind,
            size,
            root: PageAddr(NONE),
            direct: kind == ObjKind::Object,
            direct_more: [PageAddr(NONE); DIRECT_PAGES as usize - 1],
            meta,
            log_start,
        }
    }

    /// Parses the record in slot `id`: `Ok(None)` for a free slot. Page addresses are
    /// checked against `pages`, the size against `max_size`.
    pub fn parse(b: &[u8], id: u32, pages: u32, max_size: u64) -> Result<Option<Self>, Corrupted> {
        let b = b.get(..REC_LEN).ok_or(Corrupted)?;
        if b.iter().all(|&x| x == 0xFF) {
            return Ok(None);
        }
        let direct = b[field::FLAGS] == 1;
        let more = field::DIRECT_MORE.map(|r| PageAddr(get_u32(b, r)));
        let r = ObjRecord {
            id: get_u32(b, field::ID),
            kind: ObjKind::from_byte(b[field::KIND]).ok_or(Corrupted)?,
            size: get_u64(b, field::SIZE),
            root: PageAddr(get_u32(b, field::ROOT)),
            direct,
            direct_more: if direct {
                more
            } else {
                [PageAddr(NONE); DIRECT_PAGES as usize - 1]
            },
            meta: PageAddr(get_u32(b, field::META)),
            log_start: if direct {
                0
            } else {
                get_u64(b, field::LOG_START)
            },
        };
        // An object's size is bounded by what its index maps; a log stream's end LSN
        // only grows (its index is a ring), so only its live range is: a first check
        // of the end against the object bound made every store holding a stream that
        // had appended 2^29 sectors (2^25 with 512-byte metadata units) unreadable.
        let size_ok = match r.kind {
            ObjKind::Object => r.log_start == 0 && r.size <= max_size,
            ObjKind::Log => r.log_start <= r.size && r.size - r.log_start <= max_size,
        };
        if r.id != id
            || id == TABLE_OBJ
            || b[field::FLAGS] > 1
            || (r.direct && r.kind != ObjKind::Object)
            || b[field::RESERVED] != [0xFF, 0xFF]
            || (r.root.0 != NONE && r.root.0 >= pages)
            || r.direct_more.iter().any(|p| p.0 != NONE && p.0 >= pages)
            || (r.direct && shares_a_page(&r))
            || r.meta.0 >= pages
            || !size_ok
        {
            return Err(Corrupted);
        }
        Ok(Some(r))
    }
}

/// Whether two of a direct record's pages are the same page (a page holds one logical
/// page: an indexed record's trim bytes read as a direct one's are zeros, for one).
fn shares_a_page(r: &ObjRecord) -> bool {
    let p = [r.root, r.direct_more[0], r.direct_more[1]];
    (0..p.len()).any(|i| p[i].0 != NONE && p[i + 1..].contains(&p[i]))
}

/// Records per table page for a page payload of `payload` bytes.
pub const fn records_per_page(payload: u32) -> u32 {
    payload / REC_LEN as u32
}

/// Checks every record of a table page read from flash: free, or valid for its slot.
pub fn validate(
    page: &[u8],
    table_page: u32,
    per_page: u32,
    pages: u32,
    max_size: u64,
) -> Result<(), Corrupted> {
    for i in 0..per_page {
        let at = i as usize * REC_LEN;
        let id = table_page * per_page + i;
        ObjRecord::parse(page.get(at..).ok_or(Corrupted)?, id, pages, max_size)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec() -> ObjRecord {
        ObjRecord {
            id: 70,
            kind: ObjKind::Log,
            size: 1 << 30,
            root: PageAddr(NONE),
            direct: false,
            direct_more: [PageAddr(NONE); 2],
            meta: PageAddr(99),
            log_start: 12,
        }
    }

    #[test]
    fn record_round_trip_and_checks() {
        let o = rec();
        assert_eq!(
            ObjRecord::parse(&o.encode(), 70, 1000, 1 << 31),
            Ok(Some(o))
        );
        assert_eq!(ObjRecord::parse(&[0xFF; REC_LEN], 70, 1000, 10), Ok(None));
        // Wrong slot, page out of range, size too large.
        assert_eq!(
            ObjRecord::parse(&o.encode(), 71, 1000, 1 << 31),
            Err(Corrupted)
        );
        assert_eq!(
            ObjRecord::parse(&o.encode(), 70, 50, 1 << 31),
            Err(Corrupted)
        );
        assert_eq!(ObjRecord::parse(&o.encode(), 70, 1000, 10), Err(Corrupted));
        // Trim point past the end; an object with a trim point; the table's own id.
        let mut bad = o;
        bad.log_start = bad.size + 1;
        assert_eq!(
            ObjRecord::parse(&bad.encode(), 70, 1000, 1 << 31),
            Err(Corrupted)
        );
        let mut bad = o;
        bad.kind = ObjKind::Object;
        assert_eq!(
            ObjRecord::parse(&bad.encode(), 70, 1000, 1 << 31),
            Err(Corrupted)
        );
        let mut direct_log = o;
        direct_log.direct = true;
        assert_eq!(
            ObjRecord::parse(&direct_log.encode(), 70, 1000, 1 << 31),
            Err(Corrupted)
        );
        let mut direct = o;
        direct.kind = ObjKind::Object;
        direct.log_start = 0;
        direct.direct = true;
        direct.root = PageAddr(500);
        assert_eq!(
            ObjRecord::parse(&direct.encode(), 70, 1000, 1 << 31),
            Ok(Some(direct))
        );
        // A direct object's pages 1 and 2 take the trim point's bytes.
        direct.set_direct_page(2, PageAddr(700));
        assert_eq!(direct.direct_page(0), PageAddr(500));
        assert_eq!(direct.direct_page(1), PageAddr(NONE));
        assert_eq!(direct.direct_page(2), PageAddr(700));
        assert_eq!(direct.direct_page(DIRECT_PAGES), PageAddr(NONE));
        let b = direct.encode();
        assert_eq!(b[24..28], [0xFF; 4]);
        assert_eq!(b[28..32], 700u32.to_le_bytes());
        assert_eq!(ObjRecord::parse(&b, 70, 1000, 1 << 31), Ok(Some(direct)));
        assert_eq!(ObjRecord::parse(&b, 70, 600, 1 << 31), Err(Corrupted));
        // Two logical pages in one page: refused (an indexed object's record with its
        // direct flag set by damage reads its zero trim bytes as pages 1 and 2).
        let mut twice = direct;
        twice.set_direct_page(1, PageAddr(700));
        assert_eq!(
            ObjRecord::parse(&twice.encode(), 70, 1000, 1 << 31),
            Err(Corrupted)
        );
        let mut flagged = o;
        flagged.kind = ObjKind::Object;
        flagged.log_start = 0;
        flagged.root = PageAddr(5);
        let mut b = flagged.encode();
        b[5] = 1;
        assert_eq!(ObjRecord::parse(&b, 70, 1000, 1 << 31), Err(Corrupted));
        // A new object is direct with nothing mapped; a new stream is not direct.
        let new = ObjRecord::new(70, ObjKind::Object, 0, PageAddr(9), 0);
        assert!(new.direct);
        assert!((0..DIRECT_PAGES).all(|l| new.direct_page(l) == PageAddr(NONE)));
        assert_eq!(ObjRecord::parse(&new.encode(), 70, 1000, 10), Ok(Some(new)));
        assert!(!ObjRecord::new(70, ObjKind::Log, 5, PageAddr(9), 5).direct);
        let mut zero = o;
        zero.id = 0;
        assert_eq!(
            ObjRecord::parse(&zero.encode(), 0, 1000, 1 << 31),
            Err(Corrupted)
        );
        for i in 0..REC_LEN {
            let mut b = o.encode();
            b[i] ^= 0x80;
            let r = ObjRecord::parse(&b, 70, 1000, 1 << 31);
            // Flipping the top bit of a size, root or start byte may still name a
            // valid record; it never names another slot's.
            if let Ok(Some(p)) = r {
                assert_eq!(p.id, 70, "byte {i}");
            }
        }
        assert_eq!(ObjRecord::parse(&[0; 3], 70, 1000, 10), Err(Corrupted));
    }

    #[test]
    fn table_page_validation() {
        let per = records_per_page(2048);
        assert_eq!(per, 64);
        let mut page = [0xFFu8; 2048];
        let mut o = rec();
        o.id = 64 + 5;
        page[5 * REC_LEN..6 * REC_LEN].copy_from_slice(&o.encode());
        assert_eq!(validate(&page, 1, per, 1000, 1 << 31), Ok(()));
        // The same bytes in table page 0 name the wrong slot.
        assert_eq!(validate(&page, 0, per, 1000, 1 << 31), Err(Corrupted));
        page[7 * REC_LEN] = 0;
        assert_eq!(validate(&page, 1, per, 1000, 1 << 31), Err(Corrupted));
    }
}
