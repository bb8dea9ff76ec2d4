//! The superblock: what device and format an OFTL image was made for, and where its
//! fixed structures live. Immutable after format.
//!
//! Two identical copies are written to page 0 of the first two good blocks among the
//! first [`SB_SEARCH`] blocks, programmed as the first program unit only (512 bytes;
//! no OOB), so bad blocks 0 or 1 do not make the device unusable. Mount takes the first
//! copy that parses.
//!
//! ```text
//! off  size  field
//!   0     4  magic "OFTL"
//!   4     2  format version (8; 7 is read too: the same layout, its checkpoints
//!            name no successor block; 6 and 5 as 7 with four checkpoint blocks and
//!            bytes 163..212 erased, and for 5 bytes 161..163 erased too)
//!   6     2  header length (512)
//!   8     4  page size
//!  12     2  spare (OOB) size
//!  14     2  pages per block
//!  16     4  blocks
//!  20     2  dies
//!  22     2  channels
//!  24     2  program unit
//!  26     1  NOP
//!  27     1  ECC kind (0 none, 1 on-die, 2 host)
//!  28     1  ECC strength
//!  29     1  scrub threshold
//!  30     1  backpointer placement (0 OOB, 1 in-band)
//!  31     1  OOB region count (<= 16)
//!  32    96  16 x OOB region: offset u16, len u16, ECC step u8 (0xFF = none), 0xFF
//! 128     2  updating window blocks
//! 130     2  reserved (0xFFFF; format 1 kept the object table capacity here)
//! 132     4  format id (distinguishes images)
//! 136     8  superblock blocks [u32; 2]
//! 144    16  checkpoint blocks 0..4 [u32; 4]
//! 160     1  log programs per page (1..=NOP): how many programs a log-stream page
//!            takes (partial programs, one or more sectors each); 1 = every synced
//!            append programs a fresh page
//! 161     2  metadata unit: payload bytes of an object-table or index page
//!            (0xFFFF = the whole page payload; else a multiple of the program unit
//!            below it, the page's first units programmed alone, OOB placement
//!            only): small-RAM builds cache such pages in small slots
//! 163     1  checkpoint blocks in use, n (4..=16)
//! 164    48  checkpoint blocks 4..16 [u32; 12] (0xFFFFFFFF past n)
//! 212   296  reserved (0xFF)
//! 508     4  CRC-32/ISO-HDLC over bytes 0..508
//! ```
//! All integers little-endian.

use nand_hal::{BlockAddr, Capabilities, EccKind, Geometry, OobRegion, MAX_OOB_REGIONS};

use super::backpointer::Placement;
use super::field::{crc_matches, get_u16, get_u32, put_u16, put_u32};
use crate::errors::{Corrupted, Mismatch};

/// Encoded size (one program unit on every supported part).
pub const SB_LEN: usize = 512;
/// Blocks searched for superblock copies.
pub const SB_SEARCH: u32 = 8;
/// Current format version: checkpoints name their successor block (see
/// [`super::checkpoint`]).
pub const VERSION: u16 = 8;
/// The version before successor blocks, read as this one whose checkpoints name none.
pub const VERSION_7: u16 = 7;
/// The version before checkpoint block counts, read as this one with four checkpoint
/// blocks.
pub const VERSION_6: u16 = 6;
/// The previous version, read as this one with [`WHOLE_PAGE`] metadata units.
pub const VERSION_5: u16 = 5;
/// [`Superblock::meta_unit`] for object-table and index pages as large as the page's
/// payload (every version-5 image).
pub const WHOLE_PAGE: u16 = 0xFFFF;
/// Most checkpoint blocks a superblock lists.
pub const MAX_CKPT_BLOCKS: usize = 16;
/// Fewest checkpoint blocks a superblock lists (every version-5 and -6 image has these).
pub const MIN_CKPT_BLOCKS: usize = 4;
const MAGIC: [u8; 4] = *b"OFTL";
/// An unused checkpoint block slot.
const NO_BLOCK: u32 = 0xFFFF_FFFF;
pub(crate) static CRC32: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC);

/// A decoded superblock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Superblock {
    /// Geometry fields as recorded.
    pub page_size: u32,
    /// Spare bytes per page.
    pub oob_size: u16,
    /// Pages per block.
    pub pages_per_block: u16,
    /// Blocks.
    pub blocks: u32,
    /// Dies.
    pub dies: u16,
    /// Channels.
    pub channels: u16,
    /// Program unit.
    pub program_unit: u16,
    /// Partial programs per page.
    pub nop: u8,
    /// ECC kind code.
    pub ecc_kind: u8,
    /// ECC strength.
    pub ecc_strength: u8,
    /// Scrub threshold.
    pub scrub_threshold: u8,
    /// Backpointer placement.
    pub placement: Placement,
    /// OOB regions as recorded.
    pub oob_regions: [OobRegion; MAX_OOB_REGIONS],
    /// Number of OOB regions.
    pub oob_count: u8,
    /// Updating window size in blocks.
    pub window_blocks: u16,
    /// Format id.
    pub format_id: u32,
    /// Blocks holding the superblock copies.
    pub sb_blocks: [BlockAddr; 2],
    /// The checkpoint blocks, the first [`Superblock::ckpt_count`] of them (written in
    /// rotation; any may go bad); see [`Superblock::ckpt_blocks`].
    pub ckpt_slots: [BlockAddr; MAX_CKPT_BLOCKS],
    /// How many checkpoint blocks there are ([`MIN_CKPT_BLOCKS`]..=[`MAX_CKPT_BLOCKS`]).
    pub ckpt_count: u8,
    /// Programs a log-stream page takes (1..=`nop`).
    pub log_programs: u8,
    /// Payload bytes of object-table and index pages ([`WHOLE_PAGE`]: the page's).
    pub meta_unit: u16,
    /// Checkpoints name the checkpoint block erased for their successors (format 8;
    /// `false` for images of earlier versions, whose checkpoints keep their format).
    pub successors: bool,
}

fn ecc_code(k: EccKind) -> u8 {
    match k {
        EccKind::None => 0,
        EccKind::OnDie => 1,
        EccKind::Host => 2,
    }
}

impl Superblock {
    /// An all-zero placeholder (what an unmounted store holds), usable in `const`s.
    pub(crate) const BLANK: Superblock = Superblock {
        page_size: 0,
        oob_size: 0,
        pages_per_block: 0,
        blocks: 0,
        dies: 0,
        channels: 0,
        program_unit: 0,
        nop: 0,
        ecc_kind: 0,
        ecc_strength: 0,
        scrub_threshold: 0,
        placement: Placement::Oob,
        oob_regions: [OobRegion::unprotected(0, 0); MAX_OOB_REGIONS],
        oob_count: 0,
        window_blocks: 0,
        format_id: 0,
        sb_blocks: [BlockAddr(0); 2],
        ckpt_slots: [BlockAddr(0); MAX_CKPT_BLOCKS],
        ckpt_count: MIN_CKPT_BLOCKS as u8,
        log_programs: 1,
        meta_unit: WHOLE_PAGE,
        successors: false,
    };

    /// Describes `geometry` and `caps` with the given layout choices (`partial_logs`:
    /// log-stream pages take up to NOP programs, else one; `meta_unit`: see
    /// [`Superblock::meta_unit`], checked by [`Superblock::parse`]).
    #[allow(clippy::too_many_arguments)]
    pub fn describe(
        geometry: &Geometry,
        caps: &Capabilities,
        window_blocks: u16,
        format_id: u32,
        sb_blocks: [BlockAddr; 2],
        ckpt_blocks: &[BlockAddr],
        partial_logs: bool,
        meta_unit: u16,
    ) -> Self {
        let mut oob_regions = [OobRegion::default(); MAX_OOB_REGIONS];
        let regs = caps.oob.regions();
        oob_regions[..regs.len()].copy_from_slice(regs);
        let n = ckpt_blocks.len().min(MAX_CKPT_BLOCKS);
        let mut ckpt_slots = [BlockAddr(NO_BLOCK); MAX_CKPT_BLOCKS];
        ckpt_slots[..n].copy_from_slice(&ckpt_blocks[..n]);
        Superblock {
            page_size: geometry.page_size(),
            oob_size: geometry.oob_size() as u16,
            pages_per_block: geometry.pages_per_block() as u16,
            blocks: geometry.blocks(),
            dies: geometry.dies() as u16,
            channels: geometry.channels() as u16,
            program_unit: caps.program_unit as u16,
            nop: caps.nop,
            ecc_kind: ecc_code(caps.ecc.kind),
            ecc_strength: caps.ecc.strength,
            scrub_threshold: caps.ecc.scrub_threshold,
            placement: Placement::for_caps(caps),
            oob_regions,
            oob_count: regs.len() as u8,
            window_blocks,
            format_id,
            sb_blocks,
            ckpt_slots,
            ckpt_count: n as u8,
            log_programs: if partial_logs { caps.nop.max(1) } else { 1 },
            meta_unit,
            successors: true,
        }
    }

    /// Checks that this image was made for `geometry` and `caps`.
    pub fn check_device(&self, geometry: &Geometry, caps: &Capabilities) -> Result<(), Mismatch> {
        if self.page_size != geometry.page_size()
            || self.oob_size as u32 != geometry.oob_size()
            || self.pages_per_block as u32 != geometry.pages_per_block()
            || self.blocks != geometry.blocks()
            || self.dies as u32 != geometry.dies()
            || self.channels as u32 != geometry.channels()
        {
            return Err(Mismatch::Geometry);
        }
        let regs = caps.oob.regions();
        if self.program_unit as u32 != caps.program_unit
            || self.nop != caps.nop
            || self.ecc_kind != ecc_code(caps.ecc.kind)
            || self.ecc_strength != caps.ecc.strength
            || self.scrub_threshold != caps.ecc.scrub_threshold
            || self.oob_count as usize != regs.len()
            || &self.oob_regions[..regs.len()] != regs
            || self.placement != Placement::for_caps(caps)
        {
            return Err(Mismatch::Capabilities);
        }
        Ok(())
    }

    /// Encodes into the 512-byte header.
    pub fn encode(&self) -> [u8; SB_LEN] {
        let mut b = [0xFFu8; SB_LEN];
        b[field::MAGIC].copy_from_slice(&MAGIC);
        let version = if self.successors { VERSION } else { VERSION_7 };
        put_u16(&mut b, field::VERSION, version);
        put_u16(&mut b, field::HEADER_LEN, SB_LEN as u16);
        put_u32(&mut b, field::PAGE_SIZE, self.page_size);
        put_u16(&mut b, field::OOB_SIZE, self.oob_size);
        put_u16(&mut b, field::PAGES_PER_BLOCK, self.pages_per_block);
        put_u32(&mut b, field::BLOCKS, self.blocks);
        put_u16(&mut b, field::DIES, self.dies);
        put_u16(&mut b, field::CHANNELS, self.channels);
        put_u16(&mut b, field::PROGRAM_UNIT, self.program_unit);
        b[field::NOP] = self.nop;
        b[field::ECC_KIND] = self.ecc_kind;
        b[field::ECC_STRENGTH] = self.ecc_strength;
        b[field::SCRUB_THRESHOLD] = self.scrub_threshold;
        b[field::PLACEMENT] = self.placement as u8;
        b[field::OOB_COUNT] = self.oob_count;
        for (i, r) in self.oob_regions.iter().enumerate() {
            let f = field::oob_region(i);
            put_u16(&mut b[f.clone()], 0..2, r.offset);
            put_u16(&mut b[f.clone()], 2..4, r.len);
            b[f.start + 4] = r.ecc_step.unwrap_or(0xFF);
            b[f.start + 5] = 0xFF;
        }
        put_u16(&mut b, field::WINDOW_BLOCKS, self.window_blocks);
        put_u32(&mut b, field::FORMAT_ID, self.format_id);
        for (i, &blk) in self.sb_blocks.iter().enumerate() {
            put_u32(&mut b, field::sb_block(i), blk.0);
        }
        for (i, &blk) in self.ckpt_blocks().iter().enumerate() {
            put_u32(&mut b, field::ckpt_block(i), blk.0);
        }
        b[field::CKPT_COUNT] = self.ckpt_count;
        b[field::LOG_PROGRAMS] = self.log_programs;
        put_u16(&mut b, field::META_UNIT, self.meta_unit);
        let crc = CRC32.checksum(&b[field::COVERED]);
        put_u32(&mut b, field::CRC, crc);
        b
    }

    /// Parses a header. `Ok(None)` when the bytes are not a superblock at all (erased
    /// or foreign magic), `Err(Corrupted)` when it claims to be one but fails its checks,
    /// `Err` of the version mismatch through [`SbParseError`].
    pub fn parse(b: &[u8]) -> Result<Option<Self>, SbParseError> {
        let b: &[u8; SB_LEN] = match b.get(..SB_LEN).and_then(|s| s.try_into().ok()) {
            Some(b) => b,
            None => return Err(SbParseError::Corrupted),
        };
        if b[field::MAGIC] != MAGIC {
            return Ok(None);
        }
        if !crc_matches(get_u32(b, field::CRC), CRC32.checksum(&b[field::COVERED])) {
            return Err(SbParseError::Corrupted);
        }
        let version = get_u16(b, field::VERSION);
        if ![VERSION, VERSION_7, VERSION_6, VERSION_5].contains(&version) {
            return Err(SbParseError::Version);
        }
        // Versions 7 and 8 share a layout.
        let counted_layout = version == VERSION || version == VERSION_7;
        if get_u16(b, field::HEADER_LEN) as usize != SB_LEN {
            return Err(SbParseError::Corrupted);
        }
        let placement = Placement::from_byte(b[field::PLACEMENT]).ok_or(SbParseError::Corrupted)?;
        let oob_count = b[field::OOB_COUNT];
        if oob_count as usize > MAX_OOB_REGIONS {
            return Err(SbParseError::Corrupted);
        }
        let mut oob_regions = [OobRegion::default(); MAX_OOB_REGIONS];
        for (i, r) in oob_regions.iter_mut().enumerate() {
            let f = &b[field::oob_region(i)];
            r.offset = get_u16(f, 0..2);
            r.len = get_u16(f, 2..4);
            r.ecc_step = match f[4] {
                0xFF => None,
                s => Some(s),
            };
        }
        let sb = Superblock {
            page_size: get_u32(b, field::PAGE_SIZE),
            oob_size: get_u16(b, field::OOB_SIZE),
            pages_per_block: get_u16(b, field::PAGES_PER_BLOCK),
            blocks: get_u32(b, field::BLOCKS),
            dies: get_u16(b, field::DIES),
            channels: get_u16(b, field::CHANNELS),
            program_unit: get_u16(b, field::PROGRAM_UNIT),
            nop: b[field::NOP],
            ecc_kind: b[field::ECC_KIND],
            ecc_strength: b[field::ECC_STRENGTH],
            scrub_threshold: b[field::SCRUB_THRESHOLD],
            placement,
            oob_regions,
            oob_count,
            window_blocks: get_u16(b, field::WINDOW_BLOCKS),
            format_id: get_u32(b, field::FORMAT_ID),
            sb_blocks: core::array::from_fn(|i| BlockAddr(get_u32(b, field::sb_block(i)))),
            ckpt_slots: core::array::from_fn(|i| BlockAddr(get_u32(b, field::ckpt_block(i)))),
            ckpt_count: if counted_layout {
                b[field::CKPT_COUNT]
            } else {
                MIN_CKPT_BLOCKS as u8
            },
            log_programs: b[field::LOG_PROGRAMS],
            meta_unit: get_u16(b, field::META_UNIT),
            successors: version == VERSION,
        };
        let counted = (MIN_CKPT_BLOCKS..=MAX_CKPT_BLOCKS).contains(&(sb.ckpt_count as usize));
        if !counted {
            return Err(SbParseError::Corrupted);
        }
        // Slots past the count (and, before version 7, the bytes they would take) are
        // erased.
        let n = sb.ckpt_count as usize;
        let rest_erased = if counted_layout {
            sb.ckpt_slots[n..].iter().all(|b| b.0 == NO_BLOCK)
        } else {
            b[field::CKPT_COUNT..field::ckpt_block(MAX_CKPT_BLOCKS - 1).end]
                .iter()
                .all(|&x| x == 0xFF)
        };
        let in_range = |blk: BlockAddr| blk.0 < sb.blocks;
        let fixed = || sb.sb_blocks.iter().chain(sb.ckpt_blocks().iter());
        let distinct = fixed()
            .enumerate()
            .all(|(i, a)| fixed().skip(i + 1).all(|b| a != b));
        if sb.window_blocks < 2
            || sb.log_programs == 0
            || sb.log_programs > sb.nop
            || !distinct
            || !rest_erased
            || get_u16(b, field::RESERVED_130) != 0xFFFF
            || sb.pages_per_block < 4
            || (version == VERSION_5 && sb.meta_unit != WHOLE_PAGE)
            || !sb.meta_unit_fits()
            || !sb
                .sb_blocks
                .iter()
                .chain(sb.ckpt_blocks().iter())
                .all(|&x| in_range(x))
        {
            return Err(SbParseError::Corrupted);
        }
        Ok(Some(sb))
    }
}

impl Superblock {
    /// The checkpoint blocks, in rotation order.
    pub fn ckpt_blocks(&self) -> &[BlockAddr] {
        &self.ckpt_slots[..(self.ckpt_count as usize).min(MAX_CKPT_BLOCKS)]
    }

    /// Payload bytes of an object-table or index page.
    pub fn meta_payload(&self) -> u32 {
        if self.meta_unit == WHOLE_PAGE {
            self.placement.payload(self.page_size)
        } else {
            self.meta_unit as u32
        }
    }

    /// The [`Superblock::meta_unit`] a build whose cache slots hold `slot` bytes formats
    /// with on a part with `caps` and pages of `page_size`: the whole payload when a
    /// slot is a whole page, else the slot (whole program units, OOB placement only; a
    /// slot between an in-band payload and the page fits neither).
    pub fn meta_unit_for(
        caps: &Capabilities,
        page_size: u32,
        slot: usize,
    ) -> Result<u16, Mismatch> {
        if slot >= page_size as usize {
            Ok(WHOLE_PAGE)
        } else if unit_below_page(
            Placement::for_caps(caps),
            caps.program_unit,
            slot as u32,
            page_size,
        ) {
            Ok(slot as u16)
        } else {
            Err(Mismatch::Capabilities)
        }
    }

    /// Whether [`Superblock::meta_unit`] is one this format allows: the whole payload,
    /// or whole program units below the page size, which only OOB placement can give
    /// a backpointer.
    pub fn meta_unit_fits(&self) -> bool {
        self.meta_unit == WHOLE_PAGE
            || unit_below_page(
                self.placement,
                self.program_unit as u32,
                self.meta_unit as u32,
                self.page_size,
            )
    }
}

/// Whether `unit` bytes can be a metadata unit below a page of `page_size`: whole
/// program units of `pu` bytes, with the backpointer in the spare area (OOB placement).
fn unit_below_page(placement: Placement, pu: u32, unit: u32, page_size: u32) -> bool {
    placement == Placement::Oob && pu > 0 && unit >= pu && unit % pu == 0 && unit < page_size
}

/// Where each field lives (see the module docs).
mod field {
    use core::ops::Range;
    pub const MAGIC: Range<usize> = 0..4;
    pub const VERSION: Range<usize> = 4..6;
    pub const HEADER_LEN: Range<usize> = 6..8;
    pub const PAGE_SIZE: Range<usize> = 8..12;
    pub const OOB_SIZE: Range<usize> = 12..14;
    pub const PAGES_PER_BLOCK: Range<usize> = 14..16;
    pub const BLOCKS: Range<usize> = 16..20;
    pub const DIES: Range<usize> = 20..22;
    pub const CHANNELS: Range<usize> = 22..24;
    pub const PROGRAM_UNIT: Range<usize> = 24..26;
    pub const NOP: usize = 26;
    pub const ECC_KIND: usize = 27;
    pub const ECC_STRENGTH: usize = 28;
    pub const SCRUB_THRESHOLD: usize = 29;
    pub const PLACEMENT: usize = 30;
    pub const OOB_COUNT: usize = 31;
    /// OOB region `i`: offset u16, len u16, ECC step u8, 0xFF.
    pub const fn oob_region(i: usize) -> Range<usize> {
        32 + 6 * i..38 + 6 * i
    }
    pub const WINDOW_BLOCKS: Range<usize> = 128..130;
    pub const RESERVED_130: Range<usize> = 130..132;
    pub const FORMAT_ID: Range<usize> = 132..136;
    pub const fn sb_block(i: usize) -> Range<usize> {
        136 + 4 * i..140 + 4 * i
    }
    /// Checkpoint block `i`: the first four where version 6 kept them, the rest after
    /// the count.
    pub const fn ckpt_block(i: usize) -> Range<usize> {
        if i >= 4 {
            return 164 + 4 * (i - 4)..168 + 4 * (i - 4);
        }
        144 + 4 * i..148 + 4 * i
    }
    pub const LOG_PROGRAMS: usize = 160;
    pub const META_UNIT: Range<usize> = 161..163;
    pub const CKPT_COUNT: usize = 163;
    /// What the CRC covers.
    pub const COVERED: Range<usize> = 0..508;
    pub const CRC: Range<usize> = 508..512;
}

/// Why a superblock did not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SbParseError {
    /// It failed its CRC or a field is out of range.
    Corrupted,
    /// A format version this build does not know.
    Version,
}

impl From<SbParseError> for Corrupted {
    fn from(_: SbParseError) -> Self {
        Corrupted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nand_hal::sim::profile::{GD5F1GQ4, W25N01GV};

    fn sample() -> Superblock {
        let p = W25N01GV;
        Superblock::describe(
            &p.geometry,
            &p.capabilities,
            16,
            77,
            [BlockAddr(0), BlockAddr(1)],
            &[2, 3, 4, 5].map(BlockAddr),
            true,
            WHOLE_PAGE,
        )
    }

    /// `b` as an older version wrote it: the checkpoint count and blocks 4.. erased.
    fn as_version(mut b: [u8; SB_LEN], v: u16) -> [u8; SB_LEN] {
        b[4..6].copy_from_slice(&v.to_le_bytes());
        b[163..212].fill(0xFF);
        resealed(b)
    }

    /// `b` with its CRC made right again.
    fn resealed(mut b: [u8; SB_LEN]) -> [u8; SB_LEN] {
        let crc = CRC32.checksum(&b[..508]);
        b[508..512].copy_from_slice(&crc.to_le_bytes());
        b
    }

    #[test]
    fn metadata_units() {
        // Whole program units below the page, with OOB placement: a small-RAM layout.
        let mut sb = sample();
        sb.meta_unit = 512;
        let back = Superblock::parse(&sb.encode()).unwrap().unwrap();
        assert_eq!(back.meta_unit, 512);
        assert_eq!(back, sb);
        for bad in [0u16, 100, 513, 2048, 4096] {
            let mut b = sb.encode();
            b[161..163].copy_from_slice(&bad.to_le_bytes());
            assert_eq!(
                Superblock::parse(&resealed(b)),
                Err(SbParseError::Corrupted),
                "unit {bad}"
            );
        }
        // In-band placement keeps the backpointer at the page's end: whole pages only.
        let mut inband = sb;
        inband.placement = Placement::InBand;
        assert!(!inband.meta_unit_fits());
        inband.meta_unit = WHOLE_PAGE;
        assert!(inband.meta_unit_fits());
        // Version 5 images are read, as whole-page units; a version 5 header naming a
        // unit is damaged.
        let v5 = Superblock::parse(&as_version(sample().encode(), VERSION_5))
            .unwrap()
            .unwrap();
        assert_eq!(v5.meta_unit, WHOLE_PAGE);
        assert_eq!(
            v5,
            Superblock {
                successors: false,
                ..sample()
            }
        );
        assert_eq!(
            Superblock::parse(&as_version(sb.encode(), VERSION_5)),
            Err(SbParseError::Corrupted)
        );
    }

    #[test]
    fn round_trip_and_device_check() {
        let sb = sample();
        let enc = sb.encode();
        let back = Superblock::parse(&enc).unwrap().unwrap();
        assert_eq!(back, sb);
        let p = W25N01GV;
        assert_eq!(back.check_device(&p.geometry, &p.capabilities), Ok(()));
        let g = GD5F1GQ4;
        assert_eq!(
            back.check_device(&g.geometry, &g.capabilities),
            Err(Mismatch::Capabilities)
        );
        let small = nand_hal::sim::profile::TINY;
        assert_eq!(
            back.check_device(&small.geometry, &small.capabilities),
            Err(Mismatch::Geometry)
        );
    }

    #[test]
    fn version_7_images_name_no_successors() {
        let mut b = sample().encode();
        b[4..6].copy_from_slice(&VERSION_7.to_le_bytes());
        let v7 = Superblock::parse(&resealed(b)).unwrap().unwrap();
        assert!(!v7.successors);
        assert_eq!(
            v7,
            Superblock {
                successors: false,
                ..sample()
            }
        );
        // Written back as it was read.
        assert_eq!(v7.encode(), resealed(b));
        assert!(
            Superblock::parse(&sample().encode())
                .unwrap()
                .unwrap()
                .successors
        );
    }

    #[test]
    fn checkpoint_block_counts() {
        let p = W25N01GV;
        let blocks: [BlockAddr; MAX_CKPT_BLOCKS] =
            core::array::from_fn(|i| BlockAddr(2 + i as u32));
        for n in MIN_CKPT_BLOCKS..=MAX_CKPT_BLOCKS {
            let sb = Superblock::describe(
                &p.geometry,
                &p.capabilities,
                16,
                77,
                [BlockAddr(0), BlockAddr(1)],
                &blocks[..n],
                true,
                WHOLE_PAGE,
            );
            let enc = sb.encode();
            assert_eq!(enc[163] as usize, n);
            let back = Superblock::parse(&enc).unwrap().unwrap();
            assert_eq!(back.ckpt_blocks(), &blocks[..n]);
            // A count out of range, or a block named past the count.
            for bad in [0u8, 3, 17, 0xFF] {
                let mut b = enc;
                b[163] = bad;
                assert_eq!(
                    Superblock::parse(&resealed(b)),
                    Err(SbParseError::Corrupted)
                );
            }
            if n < MAX_CKPT_BLOCKS {
                let mut b = enc;
                b[field::ckpt_block(n)].copy_from_slice(&900u32.to_le_bytes());
                assert_eq!(
                    Superblock::parse(&resealed(b)),
                    Err(SbParseError::Corrupted)
                );
            }
            // The same block twice.
            let mut b = enc;
            b[field::ckpt_block(n - 1)].copy_from_slice(&2u32.to_le_bytes());
            assert_eq!(
                Superblock::parse(&resealed(b)),
                Err(SbParseError::Corrupted)
            );
        }
        // Versions 6 and 5 have four, and nothing after byte 163 but erased bytes.
        let v6 = Superblock::parse(&as_version(sample().encode(), VERSION_6))
            .unwrap()
            .unwrap();
        assert_eq!(v6.ckpt_blocks(), &[2, 3, 4, 5].map(BlockAddr));
        let mut b = as_version(sample().encode(), VERSION_6);
        b[170] = 0;
        assert_eq!(
            Superblock::parse(&resealed(b)),
            Err(SbParseError::Corrupted)
        );
    }

    #[test]
    fn corrupt_inputs() {
        assert_eq!(Superblock::parse(&[0xFF; SB_LEN]), Ok(None));
        assert_eq!(Superblock::parse(&[0u8; 10]), Err(SbParseError::Corrupted));
        let enc = sample().encode();
        for i in 4..SB_LEN {
            let mut b = enc;
            b[i] ^= 0x10;
            assert_eq!(
                Superblock::parse(&b),
                Err(SbParseError::Corrupted),
                "byte {i}"
            );
        }
        let mut b = enc;
        b[4] = 9;
        let crc = CRC32.checksum(&b[..508]);
        b[508..512].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(Superblock::parse(&b), Err(SbParseError::Version));
        let mut b = enc;
        b[148..152].copy_from_slice(&2u32.to_le_bytes()); // duplicate checkpoint block
        let crc = CRC32.checksum(&b[..508]);
        b[508..512].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(Superblock::parse(&b), Err(SbParseError::Corrupted));
        let mut b = enc;
        b[144..148].copy_from_slice(&5000u32.to_le_bytes());
        let crc = CRC32.checksum(&b[..508]);
        b[508..512].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(Superblock::parse(&b), Err(SbParseError::Corrupted));
    }
}
