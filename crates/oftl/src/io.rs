//! Page I/O: placing backpointers, programming through the write heads into the
//! updating window, and reading backpointers back for scans.
//!
//! Invariants: every program goes to the next page of a head block that is in the
//! window (or a checkpoint block); a head block is erased right before its first program
//! and never before the checkpoint that put it into the window is durable; a page whose
//! program failed is never programmed again (the block is flagged for retirement, the
//! retry goes to the next page, and after [`FAILS_PER_BLOCK`] failures in a row the head
//! leaves the block for a new one); the sequence number
//! of a failed program is reused for its retry, so a head's pages carry consecutive
//! numbers. The cold head is the
//! exception: its pages carry the data head's next number as a watermark (see
//! `format::backpointer`). The data, log and cold heads draw blocks from one window;
//! GC may use for the cold head only what the data head does not need for its reserve
//! ([`Dev::copy_room`]). The index head (index and object-table pages, which recovery
//! never reads back when written after the last checkpoint) takes its blocks straight
//! from the free pool, so cache write-backs never eat into the window.

use nand_hal::{BlockAddr, Capabilities, Error, ErrorKind, Geometry, NandFlash, PageAddr};

use crate::blocks::BlockTable;
use crate::errors::Fault;
use crate::format::backpointer::{
    payload_crc, Backpointer, PageKind, Placement, BP_LEN, PAYLOAD_CRC_LEN, TRAILER_LEN,
};
use crate::format::checkpoint::BlockState;
use crate::format::checkpoint::NONE;
use crate::format::superblock::Superblock;
use crate::gc::COLD_HEAD;
use crate::heads::Heads;
use crate::policy::SpacePolicy;
use crate::{Stats, DATA_HEAD, INDEX_HEAD};

/// [`Dev::recovery_work`] of one index or object-table write-back: a program, the
/// read of the page the replay loads in its place, and the parent it dirties (about
/// 0.5 ms, measured in the benchmark's `varmail` recoveries, against 30 us per page
/// scanned and replayed).
pub const INDEX_WRITE_BACK_WORK: u32 = 12;

/// Failed programs in a row in one block after which a head leaves that block (the
/// retry takes a fresh one). Recovery relies on the bound: a cut tears one program, so a
/// head's block never ends in more unreadable pages after its last good one than this
/// (failed programs, or the torn page after fewer of them); more is media loss (see
/// `recovery`). A failing block is retired once its data has moved either way.
pub(crate) const FAILS_PER_BLOCK: u32 = 8;

/// Failed programs in a row in one block, for [`Dev::program_failed`] (8 bytes: it is
/// on the write path's stack, which recovery's relocations nest in).
#[derive(Clone, Copy, Debug)]
pub(crate) struct FailRun {
    /// The block (`u32::MAX`: none yet).
    block: u32,
    fails: u32,
}

impl Default for FailRun {
    fn default() -> Self {
        FailRun {
            block: u32::MAX,
            fails: 0,
        }
    }
}

/// How far the cold head's next number may lead the data head's at a checkpoint and
/// still be taken for new copies' watermarks (see [`Dev::seal_watermark`]); anything
/// else is a cold head left behind.
const MAX_WATERMARK_LEAD: u32 = 1 << 20;

/// The device half of the state: the flash, what the mounted store knows of it
/// (geometry, capabilities, superblock, backpointer placement), the block table, the
/// write heads, the space policy and the figures. Its fields are its own: the rest of
/// the crate reads them through the accessors below and changes the block table and
/// the heads only through their events.
pub(crate) struct Dev<F, P, const BLOCKS: usize> {
    flash: F,
    sb: Superblock,
    placement: Placement,
    payload: u32,
    oob_span: usize,
    table: BlockTable<BLOCKS>,
    heads: Heads,
    policy: P,
    stats: Stats,
    recovering: bool,
    /// The store writes nothing but cache pages from now on (a read-only session, or a
    /// recovery replaying in RAM only): see [`Dev::resume_point`].
    cache_only: bool,
    /// A block not to continue in that mode (`u16::MAX`: none): see
    /// [`Dev::take_whole_again`].
    retake: u16,
    /// The session loaded an older checkpoint than the newest on flash (see
    /// [`Dev::loaded_older_checkpoint`]).
    older: bool,
    /// In that case, the first free block left alone because an index head filled it
    /// (`u16::MAX`: none): see [`Dev::resume_point`].
    spared: u16,
    /// The index head continues a block a clean checkpoint recorded, not yet checked
    /// (see [`Dev::index_block_unchecked`]).
    index_unchecked: bool,
    /// Pages the index head programmed since the last checkpoint. They count against
    /// the window budget although they sit outside it: a crash recovery replaying the
    /// window writes about as many cache pages back, into the recovery reserve, which
    /// is sized by the window.
    index_pages: u32,
    /// What a crash recovery would redo since the last checkpoint, in tag reads (see
    /// [`Dev::recovery_work`]).
    recovery_work: u32,
    /// A collection is copying a page to the cold head: the cache write-backs it
    /// causes are not work a crash recovery redoes (see [`Dev::took_page`]).
    copying: bool,
    /// The cold head took a page since the last checkpoint (a crash recovery would
    /// drop it: see [`Dev::cold_since_checkpoint`]).
    cold_taken: bool,
    /// Payload reads so far, for the read-disturb probe (see [`Dev::probe_block`]).
    probes: u16,
    /// A block the probe found corrections in, or a window block a read flagged for
    /// scrubbing, for background collection to scrub (`u16::MAX`: none).
    disturbed: u16,
}

/// What a store writing only cache pages does with a free block (see
/// [`Dev::resume_point`]).
enum Resume {
    /// Continue it at this page, without an erase.
    At(u32),
    /// An index head filled it: leave it alone while another free block remains.
    Full,
    /// Erase it and take it whole.
    Erase,
}

impl<F, P, const BLOCKS: usize> Dev<F, P, BLOCKS> {
    /// Over `flash`, before any mount.
    pub const fn new(flash: F, policy: P) -> Self {
        Dev {
            flash,
            sb: Superblock::BLANK,
            placement: Placement::Oob,
            payload: 0,
            oob_span: 0,
            table: BlockTable::new(),
            heads: Heads::NONE,
            policy,
            stats: Stats::ZERO,
            recovering: false,
            cache_only: false,
            retake: u16::MAX,
            older: false,
            spared: u16::MAX,
            index_unchecked: false,
            index_pages: 0,
            recovery_work: 0,
            copying: false,
            cold_taken: false,
            probes: 0,
            disturbed: u16::MAX,
        }
    }

    pub fn flash(&self) -> &F {
        &self.flash
    }

    pub fn flash_mut(&mut self) -> &mut F {
        &mut self.flash
    }

    pub fn into_flash(self) -> F {
        self.flash
    }

    pub fn sb(&self) -> &Superblock {
        &self.sb
    }

    /// Format settled the superblock's fixed blocks.
    pub fn set_superblock(&mut self, sb: Superblock) {
        self.sb = sb;
    }

    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// Object payload bytes per page.
    pub fn payload(&self) -> u32 {
        self.payload
    }

    /// Payload bytes of an object-table or index page (the superblock's metadata unit).
    pub fn meta_payload(&self) -> u32 {
        self.sb.meta_payload()
    }

    pub fn table(&self) -> &BlockTable<BLOCKS> {
        &self.table
    }

    pub fn table_mut(&mut self) -> &mut BlockTable<BLOCKS> {
        &mut self.table
    }

    pub fn heads(&self) -> &Heads {
        &self.heads
    }

    pub fn heads_mut(&mut self) -> &mut Heads {
        &mut self.heads
    }

    /// The block table and the policy together (victim and free-block choices).
    pub fn table_and_policy(&mut self) -> (&mut BlockTable<BLOCKS>, &mut P) {
        (&mut self.table, &mut self.policy)
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    pub fn stats_mut(&mut self) -> &mut Stats {
        &mut self.stats
    }

    /// A crash recovery (or rebuild) is running: reads take the step-aware path.
    pub fn set_recovering(&mut self, on: bool) {
        self.recovering = on;
    }

    /// From now until the next mount or format the store writes nothing but cache
    /// pages (it went read-only, or a recovery replays in RAM only).
    pub fn writes_cache_only(&mut self) {
        self.cache_only = true;
    }

    /// Whether the store writes nothing but cache pages now (see
    /// [`Dev::writes_cache_only`]).
    pub fn cache_only(&self) -> bool {
        self.cache_only
    }

    /// The mount loaded an older checkpoint than the newest on flash, which it could
    /// not read: free blocks an index head filled are left alone while others remain
    /// (see [`Dev::resume_point`]).
    pub fn loaded_older_checkpoint(&mut self) {
        self.older = true;
    }

    /// The block the index head was filling, if any (a mount's attempt that failed).
    pub fn index_block(&self) -> Option<BlockAddr> {
        self.heads.get(INDEX_HEAD).block
    }

    /// Block `b` is not continued when writing only cache pages but erased and taken
    /// whole, as any free block: the index head of this mount's failed attempt filled
    /// it in part, so it erases well, and its pages are that attempt's cache, nothing
    /// now. (An independent review's part, `tests/review_probe.rs`, had that block as
    /// the only one of 21 free blocks that erased; continued, it lacked 9 pages for the
    /// read-only replay's write-backs, and the mount failed.)
    pub fn take_whole_again(&mut self, b: Option<BlockAddr>) {
        self.retake = b.map_or(u16::MAX, |b| b.0 as u16);
    }

    /// A clean mount: the index head continues the block the checkpoint recorded at
    /// the page it recorded, which its first program checks first: it must be the
    /// first free page (`Dev::first_free_page`: no tag above it reads other than
    /// erased, and it reads erased whole). A read-only session that loaded an older
    /// checkpoint (the newest did not read at that mount) may have continued that
    /// block, which it took for free: programming those pages again fails, or corrupts
    /// them on a part that does not report it (an independent review,
    /// `tests/review_s38.rs`), and a page it skipped for a misread would be programmed
    /// below its pages (a second review, `tests/review_s38b.rs`). The head then leaves
    /// the block, as a recovery's does. Costs the tag reads of the block's unused pages
    /// once a mount.
    pub fn index_block_unchecked(&mut self) {
        self.index_unchecked = true;
    }

    pub fn index_pages(&self) -> u32 {
        self.index_pages
    }

    /// A checkpoint made the index head's pages since the last one part of the store;
    /// a crash recovery would start from it.
    pub fn checkpointed(&mut self) {
        self.index_pages = 0;
        self.recovery_work = 0;
        self.cold_taken = false;
    }

    /// Whether the cold head took a page since the last checkpoint: collection work a
    /// crash recovery would undo (it drops the copies of its window).
    pub fn cold_since_checkpoint(&self) -> bool {
        self.cold_taken
    }

    /// What a crash recovery would redo now, in units of one page's tag read (about
    /// 30 us on SPI NAND): each page a data, log or cold head took since the last
    /// checkpoint is scanned and replayed (1), and each index or object-table page
    /// written back since (a cache eviction) is written back again by the replay, which
    /// evicts as the operations did ([`INDEX_WRITE_BACK_WORK`]). The window bounds the
    /// first; this bounds both (see `Oftl::make_room`).
    pub fn recovery_work(&self) -> u32 {
        self.recovery_work
    }

    /// Head `head` took a page (programmed or failed): recovery would redo it. A
    /// cache write-back while a collection copies a page to the cold head counts
    /// nothing: a crash recovery drops the copies of its window instead of replaying
    /// them (see the `recovery` module), so it never loads what the copy's lookups and
    /// mapping loaded. (Counted, those write-backs forced a checkpoint every two 2 KiB
    /// writes on a W25N01GV 85 % full, about 70 programs a write, stop 42.)
    pub fn took_page(&mut self, head: usize) {
        self.cold_taken |= head == COLD_HEAD;
        let w = match head {
            INDEX_HEAD if self.copying => 0,
            INDEX_HEAD => INDEX_WRITE_BACK_WORK,
            _ => 1,
        };
        self.recovery_work = self.recovery_work.saturating_add(w);
    }

    /// A collection starts (`true`) or ends (`false`) copying one page to the cold head
    /// (see [`Dev::took_page`]).
    pub fn copying(&mut self, on: bool) {
        self.copying = on;
    }
}

impl<F: NandFlash, P, const BLOCKS: usize> Dev<F, P, BLOCKS> {
    /// The device's geometry (asked of the flash: not kept in RAM).
    pub fn geo(&self) -> Geometry {
        self.flash.geometry()
    }

    /// The device's capabilities (asked of the flash: not kept in RAM).
    pub fn caps(&self) -> &Capabilities {
        self.flash.capabilities()
    }

    /// Everything known of the device starts again for superblock `sb`: the placement
    /// `sb` records, an empty block table, heads and figures (the flash and the
    /// policy stay).
    pub fn reset(&mut self, sb: Superblock) {
        let geo = self.flash.geometry();
        self.placement = sb.placement;
        self.payload = sb.placement.payload(geo.page_size());
        self.oob_span = self.flash.capabilities().oob.span();
        self.sb = sb;
        self.table.reset(geo.blocks());
        self.heads.reset();
        self.stats = Stats::default();
        self.recovering = false;
        self.cache_only = false;
        self.retake = u16::MAX;
        self.older = false;
        self.spared = u16::MAX;
        self.index_unchecked = false;
        self.index_pages = 0;
        self.recovery_work = 0;
        self.copying = false;
        self.cold_taken = false;
        self.probes = 0;
        self.disturbed = u16::MAX;
    }
}

/// What a scan read found in a page's backpointer slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scan {
    /// Nothing written where backpointers go.
    Erased,
    /// Something written that is not a valid backpointer (torn, garbage, unreadable).
    Garbage,
    /// A valid backpointer.
    Bp(Backpointer),
}

/// Extra reads of a page whose read failed or whose check failed: a read error may be
/// transient (noise, marginal cells that read well the next time), and one failed read
/// must never be taken for the end of a history.
pub(crate) const READ_RETRIES: usize = 3;

/// One payload read in this many also probes another page of its block for read
/// disturb (see [`Dev::probe_block`]): an eighth more page loads (on the W25N01GV, a
/// 60 us load and one spare byte), for read disturb found while ECC still corrects it.
/// At the simulator's `noisy` disturb rates (ten times a real part's), 9 of 100 runs of
/// 300,000 file reads still lost a page with it (`stagefs-core`'s read-disturb soak).
pub(crate) const PROBE_EVERY: u16 = 8;

/// No page (an object-table or index page never written, an unmapped entry): the
/// on-flash `NONE`/`UNMAPPED` as an address.
pub(crate) const NO_PAGE: PageAddr = PageAddr(NONE);

pub(crate) type FaultOf<F> = Fault<<F as nand_hal::ErrorType>::Error>;

impl<F: NandFlash, P: SpacePolicy, const BLOCKS: usize> Dev<F, P, BLOCKS> {
    pub fn ppb(&self) -> u32 {
        self.geo().pages_per_block()
    }

    pub fn pu(&self) -> usize {
        self.caps().program_unit as usize
    }

    /// Reads a page's backpointer: the OOB/trailer one of data-like pages, else the
    /// in-band one at the end of the first program unit (metadata, markers). One read
    /// operation on parts with OOB placement.
    pub fn scan_read(&mut self, page: PageAddr) -> Result<Scan, FaultOf<F>> {
        let mut r = self.scan_read_once(page)?;
        // A read can fail or return flipped bits once and read well the next time:
        // before calling a page garbage (which can end a recovery scan), read it again.
        for _ in 0..READ_RETRIES {
            if r != Scan::Garbage {
                break;
            }
            r = self.scan_read_once(page)?;
        }
        Ok(r)
    }

    fn scan_read_once(&mut self, page: PageAddr) -> Result<Scan, FaultOf<F>> {
        let pu = self.pu();
        let mut unit_tail = [0u8; BP_LEN];
        let mut oob = [0xFFu8; 64];
        let span = self.oob_span.min(64);
        let mut clean = true;
        let primary = match self.placement {
            Placement::Oob => {
                let r =
                    self.flash
                        .read(page, (pu - BP_LEN) as u32, &mut unit_tail, &mut oob[..span]);
                match r {
                    Ok(rep) => clean &= rep.is_clean(),
                    Err(e) => return read_fault(e),
                }
                let mut g = [0u8; BP_LEN];
                self.caps().oob.gather_protected(&oob[..span], &mut g);
                g
            }
            Placement::InBand => {
                let mut t = [0u8; BP_LEN];
                let ps = self.geo().page_size();
                match self.flash.read(page, ps - BP_LEN as u32, &mut t, &mut []) {
                    Ok(rep) => clean &= rep.is_clean(),
                    Err(e) => return read_fault(e),
                }
                match self
                    .flash
                    .read(page, (pu - BP_LEN) as u32, &mut unit_tail, &mut [])
                {
                    Ok(rep) => clean &= rep.is_clean(),
                    Err(e) => return read_fault(e),
                }
                t
            }
        };
        // A data-like page always has its primary backpointer written; only pages
        // whose primary slot is erased (metadata, markers) carry one in the first unit.
        // Erased slots count as erased only on a read ECC corrected nothing: a torn
        // program whose few landed bits ECC "corrected" reads all 0xFF too, and such a
        // page has been programmed (it must never be programmed again).
        Ok(match Backpointer::parse(&primary) {
            Ok(Some(bp)) => Scan::Bp(bp),
            Err(_) => Scan::Garbage,
            Ok(None) => match Backpointer::parse(&unit_tail) {
                Ok(Some(bp)) => Scan::Bp(bp),
                Ok(None) if clean => Scan::Erased,
                Ok(None) | Err(_) => Scan::Garbage,
            },
        })
    }

    /// Reads `data.len()` payload bytes at `column` and checks the backpointer when the
    /// placement lets one read do both. Returns the read report.
    pub fn read_payload(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        expect: Option<(PageKind, u32, u32)>,
    ) -> Result<nand_hal::ReadReport, FaultOf<F>> {
        let mut r = self.read_payload_once(page, column, data, expect);
        for _ in 0..READ_RETRIES {
            let again = match &r {
                Err(Fault::Corrupted) => true,
                Err(Fault::Flash(e)) => e.kind() == ErrorKind::Uncorrectable,
                _ => false,
            };
            if !again {
                break;
            }
            r = self.read_payload_once(page, column, data, expect);
        }
        if r.is_ok() {
            self.probe_block(page);
        }
        r
    }

    /// Every [`PROBE_EVERY`]-th payload read, one other page of the block just read is
    /// read too (one spare byte: the part reports ECC for the whole page), in turn, and
    /// a correction at the scrub threshold there has background collection scrub the
    /// block (see [`Dev::take_disturbed`]). Read disturb puts its bit errors in the
    /// *other* pages of a block read over and over; without the probe they were only
    /// found when those pages were read, by then past what ECC corrects (files read over
    /// and over on a part with 1-bit ECC became unreadable after about 20,000 reads,
    /// `stagefs-core`'s `tests/read_disturb.rs`). The hotter a block, the more often it
    /// is probed. Only blocks holding data (full or in the window) with no scrub
    /// pending, on parts that report ECC for the whole page (one spare byte then tells
    /// for the page); a probe that fails does nothing.
    fn probe_block(&mut self, page: PageAddr) {
        self.probes = self.probes.wrapping_add(1);
        if self.probes % PROBE_EVERY != 0
            || self.recovering
            || self.caps().ecc.reporting != nand_hal::EccReporting::PageWide
        {
            return;
        }
        let geo = self.geo();
        let b = geo.block_of(page);
        let info = self.table.get(b);
        let ppb = self.ppb();
        // (A full block already flagged moves anyway; a window block's flag waits for
        // a checkpoint, which a probe's finding brings forward.)
        let waiting = info.state() == BlockState::Full && info.scrub();
        if !matches!(info.state(), BlockState::Full | BlockState::Window) || waiting || ppb < 2 {
            return;
        }
        let turn = (self.probes / PROBE_EVERY) as u32 % (ppb - 1);
        let other = geo.page(b, (geo.page_in_block(page) + 1 + turn) % ppb);
        if self.disturbed == u16::MAX && self.corrected_twice(other) {
            self.disturbed = u16::try_from(b.0).unwrap_or(u16::MAX);
        }
    }

    /// Whether two reads of one spare byte of `page` both need corrections at the scrub
    /// threshold: disturb stays, a transient correction (one read in 50 on the
    /// simulator's noisy profile) rarely comes twice, and each finding can cost a
    /// checkpoint (an independent review's store took hundreds of checkpoints for
    /// them). A read that fails tells nothing.
    fn corrected_twice(&mut self, page: PageAddr) -> bool {
        let mut one = [0u8; 1];
        (0..2).all(|_| {
            self.flash
                .read(page, 0, &mut [], &mut one)
                .is_ok_and(|rep| rep.needs_scrub())
        })
    }

    /// The block the read-disturb probe found corrections in, or a window block a read
    /// flagged for scrubbing, if any (taken: background collection scrubs it). A probe's
    /// finding is not flagged right away: the probed page may be garbage (a page a cut
    /// or a failed program left, which may read corrected), and a flag makes the block
    /// an urgent victim of foreground collection (a review of full stores bounds one
    /// operation's work).
    pub fn take_disturbed(&mut self) -> Option<BlockAddr> {
        let b = core::mem::replace(&mut self.disturbed, u16::MAX);
        (b != u16::MAX).then_some(BlockAddr(b as u32))
    }

    fn read_payload_once(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        expect: Option<(PageKind, u32, u32)>,
    ) -> Result<nand_hal::ReadReport, FaultOf<F>> {
        let mut oob = [0xFFu8; 64];
        let span = match (self.placement, expect) {
            (Placement::Oob, Some(_)) => self.oob_span.min(64),
            _ => 0,
        };
        let rep = self
            .flash
            .read(page, column, data, &mut oob[..span])
            .map_err(Fault::Flash)?;
        if let Some((kind, owner, lpn)) = expect {
            let mut g = [0u8; BP_LEN];
            if span > 0 {
                self.caps().oob.gather_protected(&oob[..span], &mut g);
            } else {
                let ps = self.geo().page_size();
                let mut t = [0u8; TRAILER_LEN];
                self.flash
                    .read(page, ps - TRAILER_LEN as u32, &mut t, &mut [])
                    .map_err(Fault::Flash)?;
                g.copy_from_slice(&t[PAYLOAD_CRC_LEN..]);
                // A whole-payload read is checked against the payload CRC.
                let crc = crate::format::field::get_u32(&t, 0..PAYLOAD_CRC_LEN);
                if column == 0
                    && data.len() == self.payload as usize
                    && !crate::format::field::crc_matches(crc, payload_crc(data))
                {
                    return Err(Fault::Corrupted);
                }
            }
            match Backpointer::parse(&g) {
                Ok(Some(bp)) if bp.kind == kind && bp.owner == owner && bp.lpn == lpn => {
                    // Object-table and index pages say how long they are: a page of
                    // another metadata unit than the superblock's is not this one's.
                    let meta = matches!(kind, PageKind::Index | PageKind::Table);
                    if meta && bp.len as u32 != self.meta_payload() {
                        return Err(Fault::Corrupted);
                    }
                }
                _ => return Err(Fault::Corrupted),
            }
        }
        if rep.needs_scrub() {
            let b = self.geo().block_of(page);
            self.table.needs_scrub(b);
            // A window block is collected only once a checkpoint settles it, and a
            // store that is only read never checkpoints: `step` brings that on (see
            // `Dev::take_disturbed`). Found by the read-disturb soak: a full window block
            // flagged by reads of its own pages stayed put until they failed.
            if self.table.get(b).state() == BlockState::Window
                && self.disturbed == u16::MAX
                && self.corrected_twice(page)
            {
                self.disturbed = u16::try_from(b.0).unwrap_or(u16::MAX);
            }
        }
        Ok(rep)
    }

    /// Reads and parses the metadata record at `page` into `buf` (one program unit),
    /// re-reading on parts without ECC when the record's CRC fails.
    pub fn read_meta(
        &mut self,
        page: PageAddr,
        buf: &mut [u8],
    ) -> Result<crate::format::meta::MetaRecord, FaultOf<F>> {
        let pu = self.pu();
        let mut tries = 0;
        loop {
            self.read_payload(page, 0, &mut buf[..pu], None)?;
            match crate::format::meta::MetaRecord::parse(&buf[..pu]) {
                Ok(rec) => return Ok(rec),
                Err(_) if tries < READ_RETRIES => tries += 1,
                Err(c) => return Err(c.into()),
            }
        }
    }

    /// Free pages left in the window for `head`: the rest of its block plus the window
    /// blocks no head has taken yet (shared by all heads).
    pub fn window_free_pages(&self, head: usize) -> u64 {
        self.head_room(head) + self.unused_window_blocks() * self.ppb() as u64
    }

    /// Pages left in `head`'s current block.
    pub fn head_room(&self, head: usize) -> u64 {
        let h = self.heads.get(head);
        if h.block.is_none() {
            0
        } else {
            (self.ppb() as u64).saturating_sub(h.next_page as u64)
        }
    }

    /// Window blocks no head has taken yet.
    pub fn unused_window_blocks(&self) -> u64 {
        self.table.window_unused().len() as u64
    }

    /// Window pages the data head has for operations: its free window pages less the
    /// pages the index head wrote since the last checkpoint (see [`Dev::index_pages`]).
    pub fn window_budget(&self) -> u64 {
        self.window_budget_for(DATA_HEAD)
    }

    /// [`Dev::window_budget`] for the operations of `head` (the data or the log head):
    /// the rest of its block and the unused window blocks.
    pub fn window_budget_for(&self, head: usize) -> u64 {
        self.window_free_pages(head)
            .saturating_sub(self.index_pages as u64)
    }

    /// Pages GC may copy through `head` now while the data head keeps `reserve` window
    /// pages: the data head's own block and whole unused window blocks make up the
    /// reserve. The cold and log heads may use the rest of their block and the blocks
    /// beyond the reserve, less a block of their own for a failed program or erase on
    /// the way (a program failure abandons the rest of a block, an erase failure a
    /// whole one).
    pub fn copy_room(&self, head: usize, reserve: u64) -> u64 {
        let free = self.window_free_pages(DATA_HEAD);
        if head == DATA_HEAD {
            return free.saturating_sub(reserve);
        }
        if free < reserve {
            return 0;
        }
        let ppb = self.ppb() as u64;
        let data_blocks = reserve
            .saturating_sub(self.head_room(DATA_HEAD))
            .div_ceil(ppb);
        (self.head_room(head) + self.unused_window_blocks().saturating_sub(data_blocks) * ppb)
            .saturating_sub(ppb)
    }

    /// Before a checkpoint records the heads: moves the data head's next number past
    /// every watermark a cold copy carries, so every relocated page written before a
    /// durable checkpoint has a watermark below that checkpoint's data-head start, and
    /// recovery can tell stale copies (in window blocks not yet erased) from new ones.
    pub fn seal_watermark(&mut self) {
        // A watermark is the data head's next number when the copy was made, so the
        // cold head leads the data head by at most one (copies since its last page).
        // A cold head that copied nothing for 2^31 data pages would compare as far
        // ahead and throw the data head 2^31 forward (found by an independent review:
        // a full-scan rebuild then took overwritten pages for current): only a small
        // lead counts, and the cold head is kept level with the data head from here.
        let cold = self.heads.next_seq(COLD_HEAD);
        let data = self.heads.next_seq(DATA_HEAD);
        if cold.wrapping_sub(data) <= MAX_WATERMARK_LEAD {
            self.heads.move_past(DATA_HEAD, cold);
        }
        let data = self.heads.next_seq(DATA_HEAD);
        self.heads.number_from(COLD_HEAD, data);
    }

    /// Makes sure `head` has a page to program, taking and erasing the next window
    /// block when needed; returns the head's block.
    pub fn head_ready(&mut self, head: usize) -> Result<BlockAddr, FaultOf<F>> {
        if head == INDEX_HEAD && self.index_unchecked {
            self.index_unchecked = false;
            let h = self.heads.get(head);
            if let Some(b) = h.block.filter(|_| h.next_page < self.ppb()) {
                if self.first_free_page(b)? != Some(h.next_page) {
                    self.heads.left_block(head);
                }
            }
        }
        loop {
            let h = self.heads.get(head);
            if let Some(b) = h.block.filter(|_| h.next_page < self.ppb()) {
                return Ok(b);
            }
            if head == INDEX_HEAD {
                // Index and object-table pages need no window: recovery never reads
                // one written after the last checkpoint, so they may go to any block
                // that checkpoint calls free.
                let Some(b) = self.take_free() else {
                    // Only a block left alone below remains: erasing it is the last
                    // resort.
                    if self.spared != u16::MAX {
                        let b = BlockAddr(self.spared as u32);
                        self.spared = u16::MAX;
                        self.start_block(head, b)?;
                        continue;
                    }
                    return Err(Fault::Exhausted);
                };
                if self.cache_only {
                    match self.resume_point(b)? {
                        Resume::At(page) => {
                            self.heads.resumed_block(head, b, page);
                            continue;
                        }
                        Resume::Full if self.older => {
                            if self.spared == u16::MAX {
                                self.spared = b.0 as u16;
                            }
                            continue;
                        }
                        Resume::Full | Resume::Erase => {}
                    }
                }
                self.start_block(head, b)?;
                continue;
            }
            if self.table.window_unused().is_empty() && self.recovering {
                // Recovery records its window only in its closing checkpoint, so it
                // may take more free blocks when replay needs them.
                self.grow_window(1);
            }
            let Some((b, erased)) = self.table.take_window_block() else {
                // The callers reserve window space before they start; running out is a
                // sizing bug, reported as no space (and poisoning) rather than a panic.
                return Err(Fault::Exhausted);
            };
            if erased {
                self.heads.took_block(head, b);
                continue;
            }
            self.start_block(head, b)?;
        }
    }

    /// For a store that writes only cache pages: where the index head may continue free
    /// block `b` without erasing it, or whether to leave it alone.
    ///
    /// A read-only session, or a recovery that replays in RAM only, cannot checkpoint,
    /// so each of its mounts replays the same window into the cache and writes back
    /// what does not fit (only a cache: recovery never reads it), into free blocks it
    /// erased. On a worn part those erases fail one time in five and retire the block,
    /// and a failed program there makes its next erase fail: the wear-out soak found
    /// parts whose read-only mounts, each writing back two or three pages, retired a
    /// block or more each time until a mount found no good free block for its first
    /// write-back and failed with `NoSpace` (the data no longer readable). Every such
    /// mount starts from the same checkpoint's block table, so the policy hands its
    /// index head the same free blocks in the same order: continuing the one an earlier
    /// mount began takes no erase until it is full.
    ///
    /// `b` is continued when it is not marked bad, starts with an index or object-table
    /// page (an index head's block since its last erase, so its pages went in order)
    /// and has pages left above the topmost page whose tag does not read erased: the
    /// head starts at the first of them that reads erased whole (clean and all `0xFF`:
    /// a torn or failed program can leave its tag erased and its data not, see
    /// `nand_hal::blocking`, "Erased"). Every misread an erased page can suffer (a
    /// transient error, a corrected bit in a step never written) only moves that point
    /// up, skipping pages; nothing is programmed below a programmed page. (A first
    /// version searched every free block and halved each for its first erased page: an
    /// independent review, `tests/review_s38.rs`, had one read error make a mount skip
    /// a stretch of erased pages, into which the next mount's halving then landed,
    /// below programmed ones: out of order, and every read-only mount after failed; and
    /// the search read 18,368 pages on a 1,024-block part.) Not the block this mount's
    /// failed writing attempt filled in part ([`Dev::take_whole_again`]).
    ///
    /// Such a block with no page left ([`Resume::Full`]) is left alone, not erased,
    /// while another free block remains, when the session loaded an older checkpoint
    /// than the newest (a salvage past one that did not read,
    /// [`Dev::loaded_older_checkpoint`]): the newest one's index pages sit in a block
    /// the older one calls free. An independent review (`tests/review_s38b.rs`) had
    /// the salvage erase that block when it was full, or when one misread hid its last
    /// erased page, and the newest checkpoint read `Corrupted` once it read again.
    /// (Other sessions erase it: what the checkpoint they loaded calls free is.)
    #[inline(never)]
    fn resume_point(&mut self, b: BlockAddr) -> Result<Resume, FaultOf<F>> {
        if b.0 == self.retake as u32 {
            return Ok(Resume::Erase);
        }
        // (A block retired after the last checkpoint still looks free there; any other
        // access to a marked block is misuse. `start_block` reads the marker again.)
        if self.check_block_marker(b).map_err(Fault::Flash)? {
            return Ok(Resume::Erase);
        }
        match self.scan_read(self.geo().page(b, 0))? {
            Scan::Bp(bp) if matches!(bp.kind, PageKind::Index | PageKind::Table) => {}
            _ => return Ok(Resume::Erase),
        }
        Ok(match self.first_free_page(b)? {
            Some(page) => Resume::At(page),
            None => Resume::Full,
        })
    }

    /// The first page of `b` above the topmost page whose tag does not read erased that
    /// reads erased whole (`None`: none). A misread of an erased page only moves it up.
    fn first_free_page(&mut self, b: BlockAddr) -> Result<Option<u32>, FaultOf<F>> {
        let ppb = self.ppb();
        let geo = self.geo();
        let mut top = ppb - 1;
        while top > 0 && self.scan_read(geo.page(b, top))? == Scan::Erased {
            top -= 1;
        }
        let mut next = top + 1;
        while next < ppb && !self.page_reads_erased(geo.page(b, next))? {
            next += 1;
        }
        Ok((next < ppb).then_some(next))
    }

    /// Whether `page` reads erased, data and spare: every byte `0xFF` and nothing
    /// corrected (read in slices, so no page buffer is needed).
    #[inline(never)]
    fn page_reads_erased(&mut self, page: PageAddr) -> Result<bool, FaultOf<F>> {
        let mut buf = [0u8; 128];
        let mut oob = [0u8; 64];
        let ps = self.geo().page_size();
        let span = (self.geo().oob_size() as usize).min(oob.len());
        let mut col = 0;
        while col < ps {
            let n = (ps - col).min(buf.len() as u32) as usize;
            let spare = if col == 0 {
                &mut oob[..span]
            } else {
                &mut oob[..0]
            };
            match self.flash.read(page, col, &mut buf[..n], spare) {
                Ok(rep) if rep.is_clean() => {}
                Ok(_) => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Uncorrectable => return Ok(false),
                Err(e) => return Err(Fault::Flash(e)),
            }
            if buf[..n].iter().chain(spare.iter()).any(|&x| x != 0xFF) {
                return Ok(false);
            }
            col += n as u32;
        }
        Ok(true)
    }

    /// Reads `b`'s bad-block marker; a marked block is recorded bad in the block
    /// table. Whether it is marked.
    pub fn check_marker(&mut self, b: BlockAddr) -> Result<bool, F::Error> {
        let bad = self.flash.is_bad(b)?;
        if bad {
            self.table.found_bad(b);
        }
        Ok(bad)
    }

    /// As [`Dev::check_marker`] for a block this store erased and knows good: only a
    /// marker that reads as written ([`NandFlash::is_marked`]) counts, not the bits a
    /// cut erase left in the marker bytes (see `Oftl::mount_load`).
    pub fn check_written_marker(&mut self, b: BlockAddr) -> Result<bool, F::Error> {
        let marked = self.flash.is_marked(b)?;
        if marked {
            self.table.found_bad(b);
        }
        Ok(marked)
    }

    /// The marker check for a free or window block before this store takes it: a
    /// block it has erased before (an erase count in the block table) was good then,
    /// so only a written marker counts ([`Dev::check_written_marker`]); a block it
    /// never erased (a factory image's spare blocks, or one never used since format)
    /// may carry a factory marker of any value ([`Dev::check_marker`]).
    pub fn check_block_marker(&mut self, b: BlockAddr) -> Result<bool, F::Error> {
        if self.table.get(b).erases() > 0 {
            self.check_written_marker(b)
        } else {
            self.check_marker(b)
        }
    }

    /// Erases `b` (a window block, or a free block for the index head) and gives it to
    /// `head`; a block whose erase fails is retired instead (the caller takes another).
    fn start_block(&mut self, head: usize, b: BlockAddr) -> Result<(), FaultOf<F>> {
        // A block retired after the last checkpoint (by an interrupted recovery, for
        // one) still looks free there: check the marker before touching it.
        if self.check_block_marker(b).map_err(Fault::Flash)? {
            return Ok(());
        }
        match self.flash.erase(b) {
            Ok(()) => {
                self.table.erased(b);
                self.heads.took_block(head, b);
                Ok(())
            }
            Err(e) if e.kind() == ErrorKind::EraseFailed => {
                // Nothing the index references lives here: retire it now.
                self.retire_now(b)
            }
            Err(e) => Err(Fault::Flash(e)),
        }
    }

    /// Erases, before an operation of `head` needing `need` window pages starts, the
    /// unused window blocks it may take, so that no erase happens in the middle of it:
    /// an erase that fails there would take a whole block of the room the operation
    /// reserved (two failed erases and two failed programs in one 18-page transaction
    /// ran a window out, `Exhausted`, in a noisy power-cut sweep). Blocks found bad or
    /// failing their erase leave the window here, before anything has changed;
    /// `Ok(false)` when the window no longer holds `need` pages.
    pub fn erase_ahead(&mut self, head: usize, need: u64) -> Result<bool, FaultOf<F>> {
        let ppb = self.ppb() as u64;
        while self.head_room(head) + self.table.window_ready() as u64 * ppb < need {
            let Some(b) = self.table.next_unready() else {
                return Ok(false);
            };
            if self.check_block_marker(b).map_err(Fault::Flash)? {
                self.table.drop_unready();
                continue;
            }
            match self.flash.erase(b) {
                Ok(()) => {
                    self.table.erased(b);
                    self.table.erased_ahead();
                }
                Err(e) if e.kind() == ErrorKind::EraseFailed => {
                    self.table.drop_unready();
                    self.retire_now(b)?;
                }
                Err(e) => return Err(Fault::Flash(e)),
            }
        }
        Ok(true)
    }

    /// Takes the policy's free block out of the free pool (into the window state, so
    /// nothing collects it while a head fills it) without adding it to the window list.
    pub fn take_free(&mut self) -> Option<BlockAddr> {
        let b = self.table.pick_free(&mut self.policy)?;
        self.table.join_window(b).then_some(b)
    }

    /// Adds up to `n` least-worn free blocks to the window list (a recovery's or a
    /// rebuild's). Every block's bad-block marker is read first: a block retired after
    /// the last checkpoint (by an earlier mount that could not checkpoint, say) still
    /// looks free there, and would take a place in the window only to be skipped
    /// (the wear-out soak found recovery windows of worn parts made up of such blocks,
    /// leaving nothing to relocate into and the parts unmountable). A marked block is
    /// recorded bad and does not count: the next free block is taken instead (an
    /// independent review found six marked blocks first in line leaving a recovery no
    /// window at all, and the store read-only for good with 49 good free blocks).
    pub fn grow_window(&mut self, n: usize) {
        let mut admitted = 0;
        while admitted < n && !self.table.window_full() {
            let Some(b) = self.table.pick_free(&mut self.policy) else {
                break;
            };
            // A marker that does not read is checked again when the block is started.
            if matches!(self.check_block_marker(b), Ok(true)) {
                continue;
            }
            self.table.admit(b);
            admitted += 1;
        }
    }

    /// Whether free block `b` may join the updating window: a block this store never
    /// erased (a factory image's spare blocks, say) has its bad-block marker read first,
    /// and is retired if marked. Every operation reserves room in the window, so a
    /// block found bad only when a head reaches it would shrink room already promised.
    /// A marker that does not read is checked again when the block is started.
    pub fn may_join_window(&mut self, b: BlockAddr) -> bool {
        if self.table.get(b).erases() > 0 {
            return true;
        }
        match self.flash.is_bad(b) {
            Ok(true) => {
                self.table.found_bad(b);
                false
            }
            Ok(false) | Err(_) => true,
        }
    }

    pub fn retire_now(&mut self, b: BlockAddr) -> Result<(), FaultOf<F>> {
        self.table.retired(b);
        self.stats.retired_blocks += 1;
        self.flash.mark_bad(b).map_err(Fault::Flash)
    }

    /// Programs `page_buf` (a whole page; with in-band placement its last 16 bytes are
    /// overwritten by the backpointer) through `head`, stamping the head's next sequence
    /// number into `bp` (for [`COLD_HEAD`]: the data head's next sequence number as the
    /// copy's watermark, with the relocated flag). With `unit0_only`, only the first program unit is written and
    /// the backpointer goes in-band at its end. Returns the page and the stamped `bp`.
    pub fn program(
        &mut self,
        head: usize,
        page_buf: &mut [u8],
        mut bp: Backpointer,
        unit0_only: bool,
        tx_first: Option<u32>,
    ) -> Result<(PageAddr, Backpointer), FaultOf<F>> {
        let mut run = FailRun::default();
        loop {
            let block = self.head_ready(head)?;
            let h = self.heads.get(head);
            let page = self.geo().page(block, self.heads.take_page(head));
            self.took_page(head);
            if head == COLD_HEAD {
                // A relocated copy: its number is the data head's watermark.
                bp.seq = self.heads.next_seq(DATA_HEAD);
                bp.relocated = true;
                bp.commit = true;
                bp.tx_delta = 0;
            } else {
                bp.seq = h.next_seq;
                bp.relocated = false;
                if let Some(first) = tx_first {
                    bp.tx_delta = h.next_seq.wrapping_sub(first) as u16;
                }
            }
            let r = self.program_at(page, page_buf, &bp, unit0_only);
            match r {
                Ok(()) => {
                    // The cold head's counter mirrors one past its last watermark, so a
                    // checkpoint can move the data head past it (see `seal_watermark`).
                    self.heads.stamped(head, bp.seq);
                    self.stats.pages_programmed += 1;
                    if head == INDEX_HEAD {
                        self.index_pages = self.index_pages.saturating_add(1);
                    }
                    return Ok((page, bp));
                }
                Err(e) if e.kind() == ErrorKind::ProgramFailed => {
                    // Skip the failed page (it is never programmed again) and retry on
                    // the next one; the block is retired once its data has moved (it is
                    // collected first). Each failure costs one page of the window, not
                    // the rest of the block (until `FAILS_PER_BLOCK` in a row leave
                    // it), so the reserve an operation keeps (a block) covers a failing
                    // block's every page.
                    self.program_failed(head, block, &mut run);
                }
                Err(e) => return Err(Fault::Flash(e)),
            }
        }
    }

    /// A program of `head` in `block` failed: the block is flagged for retirement, and
    /// after [`FAILS_PER_BLOCK`] failures in a row there (`run` counts them for one
    /// program and its retries) the head leaves it, the rest of it unprogrammed.
    pub fn program_failed(&mut self, head: usize, block: BlockAddr, run: &mut FailRun) {
        self.table.program_failed(block);
        if run.block != block.0 {
            *run = FailRun {
                block: block.0,
                fails: 0,
            };
        }
        run.fails += 1;
        if run.fails >= FAILS_PER_BLOCK && self.heads.get(head).block == Some(block) {
            self.heads.left_block(head);
            *run = FailRun::default();
        }
    }

    /// Programs one page at a known address (checkpoint blocks use this directly).
    pub fn program_at(
        &mut self,
        page: PageAddr,
        page_buf: &mut [u8],
        bp: &Backpointer,
        unit0_only: bool,
    ) -> Result<(), F::Error> {
        let enc = bp.encode();
        if unit0_only {
            let pu = self.pu();
            page_buf[pu - BP_LEN..pu].copy_from_slice(&enc);
            return self.flash.program(page, 0, &page_buf[..pu], &[]);
        }
        match self.placement {
            Placement::Oob => {
                let mut oob = [0xFFu8; 64];
                let span = self.oob_span.min(64);
                self.caps().oob.scatter_protected(&enc, &mut oob[..span]);
                self.flash.program(page, 0, page_buf, &oob[..span])
            }
            Placement::InBand => {
                let n = page_buf.len();
                let crc = payload_crc(&page_buf[..n - TRAILER_LEN]);
                page_buf[n - TRAILER_LEN..n - BP_LEN].copy_from_slice(&crc.to_le_bytes());
                page_buf[n - BP_LEN..].copy_from_slice(&enc);
                self.flash.program(page, 0, page_buf, &[])
            }
        }
    }

    pub fn block_of(&self, page: PageAddr) -> BlockAddr {
        self.geo().block_of(page)
    }

    pub fn mark_valid(&mut self, page: PageAddr) {
        self.table.page_programmed(self.block_of(page));
    }

    pub fn mark_invalid(&mut self, page: PageAddr) {
        if page == NO_PAGE {
            return;
        }
        self.table.page_invalidated(self.block_of(page));
    }
}

fn read_fault<E: Error>(e: E) -> Result<Scan, Fault<E>> {
    match e.kind() {
        ErrorKind::Uncorrectable | ErrorKind::BadBlock => Ok(Scan::Garbage),
        _ => Err(Fault::Flash(e)),
    }
}
