//! Garbage collection, scrubbing and retirement: moving a block's valid pages out so
//! the block can be reused (or retired).
//!
//! Where moved data and metadata pages go is the policy's choice per victim
//! ([`crate::policy::SpacePolicy::relocation`]): the cold head ([`COLD_HEAD`]), which
//! keeps pages that outlived their block apart from fresh writes, or the data head.
//! Index pages are rewritten from the cache through the data head, log sectors through
//! the log head. A cold copy's sequence number is the data head's next number at the
//! time (its watermark, see `format::backpointer`).
//!
//! GC never runs between the pages of one transaction: transactions reserve their
//! window room in `prepare` (which is where foreground collection runs) before their
//! first page, and nothing on the write path between a transaction's first page and
//! its commit page calls [`Oftl::gc_step`], a collection or a checkpoint (index-cache
//! evictions only program index pages). So every data-head page numbered below a cold
//! copy's watermark belongs to a transaction that was complete when the copy was made,
//! which is what recovery's merge rule relies on.
//!
//! A page is valid when the index (or object table) still points at it; its
//! backpointer says where to look. A collected block keeps its `Full` state with zero
//! valid pages until the next checkpoint makes it `Free`: the last checkpoint's index
//! may still point into it, so it must survive until then. Victims are never window
//! blocks. The caller drives collection in bounded steps ([`Oftl::gc_step`]); writes
//! also collect in the foreground when the next window could not be allocated.

use nand_hal::{BlockAddr, NandFlash, PageAddr};

use crate::cache::Key;
use crate::errors::{Fault, WriteError};
use crate::format::backpointer::{Backpointer, PageKind};
use crate::format::checkpoint::BlockState;
use crate::format::index::{self, ROOT_LPN};
use crate::format::meta::MetaRecord;
use crate::format::table::TABLE_OBJ;
use crate::io::{FaultOf, Scan};
use crate::log::Reloc;
use crate::policy::{Relocation, SpacePolicy, Urgency};
use crate::{Oftl, DATA_HEAD};

/// Write head of pages relocated by GC, scrubbing and retirement when the policy says
/// [`Relocation::Cold`].
pub(crate) const COLD_HEAD: usize = 2;

/// The block being collected: the next page to look at, and its erase count when it
/// was picked (a checkpoint may free it meanwhile; a changed count tells).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Victim {
    pub block: BlockAddr,
    pub next: u32,
    pub erases: u32,
}

/// Where collection stands between steps. Changed only through its events.
#[derive(Clone, Debug)]
pub(crate) struct Collection {
    victim: Option<Victim>,
    /// Head the victim's pages are copied to (the policy's choice).
    head: usize,
    /// A page of the victim did not read (it may be referenced).
    unreadable: bool,
    /// Blocks collection left alone (a referenced page did not read), until the next
    /// checkpoint.
    stuck: heapless::Vec<BlockAddr, STUCK>,
    /// Blocks a crash recovery found being programmed (with their erase counts), for
    /// background collection to move and erase first (see `Oftl::relocate_suspects`).
    cut: heapless::Vec<(BlockAddr, u32), CUT>,
}

/// Blocks a recovery can leave to background collection (the log head's today; one
/// for each replayed head).
const CUT: usize = 3;

/// Blocks collection remembers leaving alone at once. A step gives up after this many
/// victims in a row copied nothing more (with more such blocks than this, they would
/// otherwise take turns being picked for good).
const STUCK: usize = crate::blocks::MAX_HIDDEN;

impl Collection {
    /// Nothing being collected.
    pub const IDLE: Collection = Collection {
        victim: None,
        head: DATA_HEAD,
        unreadable: false,
        stuck: heapless::Vec::new(),
        cut: heapless::Vec::new(),
    };

    pub fn victim(&self) -> Option<Victim> {
        self.victim
    }

    pub fn head(&self) -> usize {
        self.head
    }

    /// The blocks collection leaves alone until the next checkpoint.
    pub fn stuck(&self) -> &[BlockAddr] {
        &self.stuck
    }

    /// Collection starts on `block` (erased `erases` times), copying through `head`.
    fn picked(&mut self, block: BlockAddr, erases: u32, head: usize) {
        self.victim = Some(Victim {
            block,
            next: 0,
            erases,
        });
        self.head = head;
        self.unreadable = false;
    }

    /// The victim's pages below `next` are done.
    fn advanced(&mut self, next: u32) {
        if let Some(v) = &mut self.victim {
            v.next = next;
        }
    }

    fn page_unreadable(&mut self) {
        self.unreadable = true;
    }

    /// The victim is no longer one (freed by a checkpoint, or gone under it).
    fn dropped(&mut self) {
        self.victim = None;
    }

    /// The victim holds nothing more to copy; whether a page of it did not read.
    fn finished(&mut self) -> bool {
        self.victim = None;
        core::mem::take(&mut self.unreadable)
    }

    /// Collection leaves `block` alone until the next checkpoint (when there is room
    /// to remember it: past [`STUCK`] blocks, a step's bound on fruitless victims is
    /// what stops it).
    fn left_alone(&mut self, block: BlockAddr) {
        if !self.stuck.contains(&block) {
            let _ = self.stuck.push(block);
        }
    }

    /// A crash recovery found `block` (erased `erases` times) being programmed: the next
    /// background steps collect it first.
    pub fn cut_block(&mut self, block: BlockAddr, erases: u32) {
        if !self.cut.iter().any(|&(b, _)| b == block) {
            let _ = self.cut.push((block, erases));
        }
    }

    /// The next block a recovery left to collection, if any is left: `keep` says whether
    /// it still holds what the recovery left (not freed or reused since). Blocks left
    /// alone are dropped (collection gets to them as to any other).
    fn next_cut(&mut self, keep: impl Fn(BlockAddr, u32) -> bool) -> Option<BlockAddr> {
        while let Some(&(b, e)) = self.cut.first() {
            self.cut.remove(0);
            if keep(b, e) && !self.stuck.contains(&b) {
                return Some(b);
            }
        }
        None
    }

    /// Whether blocks a recovery left to collection wait.
    fn cut_pending(&self) -> bool {
        !self.cut.is_empty()
    }

    /// A checkpoint: the blocks left alone may be tried again.
    pub fn checkpointed(&mut self) {
        self.stuck.clear();
    }

    /// A checkpoint freed (or retired) `block`: nothing left to collect in it.
    pub fn block_freed(&mut self, block: BlockAddr) {
        if self.victim.is_some_and(|v| v.block == block) {
            self.victim = None;
        }
    }
}

/// What a [`Oftl::gc_step`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GcProgress {
    /// Pages copied in this step.
    pub copied: u32,
    /// Whether more collection would be useful now (a victim is in progress or blocks
    /// are worth collecting).
    pub more: bool,
}

impl<
        F: NandFlash,
        P: SpacePolicy,
        const PAGE: usize,
        const BLOCKS: usize,
        const CACHE: usize,
        const WBUF: usize,
        const META: usize,
        const LOG: usize,
    > Oftl<F, PAGE, BLOCKS, CACHE, WBUF, P, META, LOG>
{
    /// Collects for at most `budget` page copies (scrub and retirement candidates
    /// first). Call it when idle; writes also collect when they must.
    ///
    /// `Ok` with `more == false` when nothing is worth collecting, and always with a
    /// `budget` of 0: a step that may copy nothing is not worth repeating (a caller's
    /// `while gc_step(0)?.more {}` never ended, found by an independent review).
    /// `Err(WriteError::NoSpace)` when not even a checkpoint (which frees the blocks
    /// already collected) leaves window room to copy pages into: the live data fills
    /// the device; delete or truncate objects. Nothing is lost either way.
    pub fn gc_step(&mut self, budget: u32) -> Result<GcProgress, WriteError<F::Error>> {
        let r = (|| -> Result<_, FaultOf<F>> {
            self.check_usable()?;
            if self.session.read_only().is_some() {
                return Err(Fault::ReadOnly);
            }
            if self.ckpt.needs_marker() {
                self.write_marker()?;
            }
            if let Some(b) = self.dev.take_disturbed() {
                self.scrub_disturbed(b)?;
            }
            let copied = self.collect_for(budget, Urgency::Background, false)?;
            let more = budget > 0
                && (self.gc.victim().is_some() || self.gc.cut_pending() || {
                    let ppb = self.dev.ppb();
                    let stuck = self.gc.stuck();
                    let (table, policy) = self.dev.table_and_policy();
                    table
                        .pick_victim(policy, ppb, Urgency::Background, stuck)
                        .is_some()
                });
            Ok(GcProgress { copied, more })
        })();
        r.map_err(|e| self.fail(e))
    }

    /// Scrubs `b`, where the read-disturb probe or a read found corrections (see
    /// `Dev::take_disturbed`): flagged, it is an urgent victim once full. A block of the
    /// window becomes full only at a checkpoint, and a store that is only read never
    /// checkpoints, so with room to spare the heads leave it and a checkpoint settles
    /// it (files read over and over in the data head's block became unreadable, steps
    /// or not). Near the floor it waits until its head has filled it: leaving a head's
    /// block gives up the rest of it, and the checkpoint takes a window from the pool.
    fn scrub_disturbed(&mut self, b: BlockAddr) -> Result<(), FaultOf<F>> {
        let info = self.dev.table().get(b);
        if info.valid() == 0 {
            return Ok(());
        }
        self.dev.table_mut().needs_scrub(b);
        if info.state() != BlockState::Window || self.reclaimable_blocks() < self.pool_comfortable()
        {
            return Ok(());
        }
        // Every head leaves it, the index head's included (which takes free blocks
        // outside the window list): a head's block stays in the window state through a
        // checkpoint, and an independent review's read-only workload, with the index
        // head's block flagged, checkpointed at every step without ever moving it.
        for h in 0..crate::format::checkpoint::HEADS {
            if self.dev.heads().get(h).block == Some(b) {
                self.dev.heads_mut().left_block(h);
            }
        }
        self.checkpoint(false)
    }

    /// Collects for at most `budget` page copies, continuing the current victim and
    /// picking the next ones at `urgency` (scrub and retirement candidates first);
    /// returns the pages copied. Victims in a row that end without a copy (pages that
    /// did not read, counts a damaged image got wrong) are bounded, so it always ends.
    /// With `one_victim`, it stops when a victim is done (the caller looks at the pool
    /// before another is picked).
    pub(crate) fn collect_for(
        &mut self,
        budget: u32,
        urgency: Urgency,
        one_victim: bool,
    ) -> Result<u32, FaultOf<F>> {
        let mut copied = 0;
        let mut idle = 0;
        let mut fruitless = 0;
        let mut started = false;
        while copied < budget && fruitless <= STUCK {
            if self.gc.victim().is_none() {
                if one_victim && started {
                    break;
                }
                if !self.pick_gc_victim(urgency) {
                    break;
                }
            }
            started = true;
            let at = self.gc.victim();
            let room = self.gc_room(idle > 0, budget - copied)?;
            let n = self.gc_advance(room)?;
            copied += n;
            idle = if self.gc.victim() == at { idle + 1 } else { 0 };
            if idle > 2 {
                // Neither a checkpoint nor the pool gives room to copy into.
                return Err(Fault::NoSpace);
            }
            fruitless = match (n, self.gc.victim()) {
                (0, None) => fruitless + 1,
                _ => 0,
            };
        }
        Ok(copied)
    }

    /// Collects one whole victim. `false` if there is none.
    pub(crate) fn gc_collect_one(&mut self) -> Result<bool, FaultOf<F>> {
        if self.gc.victim().is_none() && !self.pick_gc_victim(Urgency::Foreground) {
            return Ok(false);
        }
        let mut idle = 0;
        while self.gc.victim().is_some() {
            let at = self.gc.victim();
            let room = self.gc_room(idle > 0, u32::MAX)?;
            self.gc_advance(room)?;
            idle = if self.gc.victim() == at { idle + 1 } else { 0 };
            if idle > 2 {
                // Neither a checkpoint nor the pool gives room to copy into.
                return Err(Fault::NoSpace);
            }
        }
        Ok(true)
    }

    /// Starts on the policy's victim, if it names a collectable block.
    ///
    /// While the pool is below the growth floor and garbage is scarce (the block with
    /// the fewest valid pages holds more than a quarter of its pages), a wholly valid
    /// block the policy names (static wear leveling) is passed over for that block,
    /// unless it must move (scrub, retire): moving it gains no room and costs some (its
    /// copies' index write-backs, a checkpoint). On a full part such moves, set off by
    /// the erases of refused writes, sank the pool below the floor deletes need: every
    /// delete refused with `NoSpace` for good (an independent review, stop 36).
    /// Otherwise they stay, in the foreground too: a part written only in the
    /// foreground levels wear there (two reviews measured erase spreads of 628 and 282
    /// against a wear gap of 50 when they did not: at the smallest window every
    /// foreground collection runs below the growth floor).
    fn pick_gc_victim(&mut self, urgency: Urgency) -> bool {
        let short = self.reclaimable_blocks() < self.pool_floor(crate::space::Room::Grow);
        let ppb = self.dev.ppb();
        // A block left alone because a referenced page did not read is hidden from the
        // policy (shown as full of valid pages) until the next checkpoint.
        let cut = if urgency == Urgency::Background && !self.urgent_victim() {
            let table = self.dev.table();
            self.gc.next_cut(|b, e| {
                let bi = table.get(b);
                bi.state() == BlockState::Full && bi.valid() > 0 && bi.erases() == e
            })
        } else {
            None
        };
        let stuck = self.gc.stuck();
        let (table, policy) = self.dev.table_and_policy();
        let Some(mut v) = cut.or_else(|| table.pick_victim(policy, ppb, urgency, stuck)) else {
            return false;
        };
        let picked = table.get(v);
        if short && picked.valid() as u32 >= ppb && !picked.urgent() {
            let gains = table
                .all()
                .iter()
                .enumerate()
                .filter(|&(i, b)| {
                    b.state() == BlockState::Full
                        && b.valid() > 0
                        && (b.valid() as u32) < ppb
                        && !stuck.contains(&BlockAddr(i as u32))
                })
                .min_by_key(|(_, b)| (b.valid(), b.erases()));
            if let Some((i, b)) = gains {
                if b.valid() as u32 > ppb / 4 {
                    v = BlockAddr(i as u32);
                }
            }
        }
        let bi = table.get(v);
        debug!(
            "oftl: gc victim block {} ({} valid pages, scrub {}, retire {}, {:?})",
            v.0,
            bi.valid(),
            bi.scrub(),
            bi.retire(),
            urgency
        );
        let (table, policy) = self.dev.table_and_policy();
        let head = match policy.relocation(table.all(), v, ppb) {
            Relocation::Cold => COLD_HEAD,
            Relocation::Data => DATA_HEAD,
        };
        self.gc.picked(v, bi.erases(), head);
        true
    }

    /// Pages GC may copy now (at most `budget`) through the victim's head while the
    /// data head keeps its reserve, checkpointing first if there are none or the index
    /// head is short of room for the copies' write-backs (or when `stuck`: the last
    /// step made none).
    ///
    /// The window blocks those copies may take are erased first, as a transaction's
    /// are (`Dev::erase_ahead`): the room keeps one block against failures, and an
    /// erase failing in the middle of the copies takes a whole block of it. Two
    /// failed erases in a row after a failed program ran the cold head out of window
    /// (`Exhausted`, power on) in a noisy power-cut sweep of `review_id_reuse.rs`.
    /// Blocks whose erase fails here leave the window before anything is copied, and
    /// the room is counted again (a checkpoint only when none is left: one forced
    /// there took a fresh window from a nearly full part's pool, and its next write
    /// was refused with `NoSpace` in `review_s34.rs`'s noisy sweep).
    fn gc_room(&mut self, mut stuck: bool, budget: u32) -> Result<u32, FaultOf<F>> {
        for _ in 0..=crate::space::ERASE_AHEAD_TRIES {
            if stuck || self.copy_room() == 0 || self.index_room() < self.index_need(1, 1) {
                self.checkpoint(false)?;
            }
            let room = self.copy_room().min(budget as u64);
            if room == 0 {
                return Err(Fault::NoSpace);
            }
            // Log pages copy through the log head, the rest through the victim's; the
            // block kept against failures is erased too (a failed program moves the
            // copies into it).
            let need = room + self.dev.ppb() as u64;
            if self.dev.erase_ahead(self.gc.head(), need)?
                && self.dev.erase_ahead(crate::log::LOG_HEAD, need)?
                && self.copy_room() >= room
            {
                return Ok(room as u32);
            }
            stuck = false;
        }
        Err(Fault::NoSpace)
    }

    /// Pages the current victim's copies may take: through the victim's head, or the
    /// log head if it holds log pages (which head wrote a block is not recorded, so
    /// both must have the room).
    fn copy_room(&self) -> u64 {
        let reserve = self.window_need(0) + self.dev.index_pages() as u64;
        self.dev
            .copy_room(self.gc.head(), reserve)
            .min(self.dev.copy_room(crate::log::LOG_HEAD, reserve))
    }

    /// Whether a block waits to be moved because it is failing (retire) or reads at
    /// the scrub threshold.
    pub(crate) fn urgent_victim(&self) -> bool {
        self.blocks().iter().any(|b| b.urgent())
    }

    /// Moves up to `budget` valid pages of the current victim; returns pages copied.
    fn gc_advance(&mut self, budget: u32) -> Result<u32, FaultOf<F>> {
        let Some(Victim {
            block: b,
            mut next,
            erases,
        }) = self.gc.victim()
        else {
            return Ok(0);
        };
        let bi = self.dev.table().get(b);
        if bi.state() != BlockState::Full || bi.erases() != erases {
            // A checkpoint since the last step freed the victim (its remaining pages
            // were overwritten meanwhile): it may be a head's block by now, or even
            // full again with other pages (resuming it half-way would skip those and
            // then take the count for wrong).
            self.gc.dropped();
            return Ok(0);
        }
        let ppb = self.dev.ppb();
        let mut copied = 0;
        while next < ppb && copied < budget {
            if self.dev.table().get(b).valid() == 0 {
                break;
            }
            if self.index_room() < self.index_need(1, 1) {
                // Keep the index head room for this copy's write-backs and the next
                // checkpoint: stop here, the caller checkpoints and comes back.
                break;
            }
            let page = self.dev.geo().page(b, next);
            next += 1;
            let moved = match self.dev.scan_read(page)? {
                Scan::Bp(bp) if bp.kind == PageKind::Log => self.relocate_log(page, false)?,
                Scan::Bp(bp) => {
                    // A copy to the cold head is dropped by a crash recovery where
                    // collection runs in slices, so its cache write-backs are not work a
                    // recovery redoes (`Dev::took_page`). Where the pool's band is too
                    // narrow for slices (small windows) recoveries replay the copies and
                    // they count: there the checkpoints they bring also keep the cache
                    // clean for the whole collections that keep the pool up (without
                    // them, on a 4-slot cache and a 4-block window, a whole collection's
                    // write-backs could take a free block and gain no room: refusals
                    // from 74.8 % of capacity in `review_s34.rs`'s near-full sweep,
                    // 77.9 % before).
                    let head = self.gc.head();
                    self.dev
                        .copying(head == COLD_HEAD && self.recovery_drops_copies());
                    let r = self.copy_if_valid(page, &bp, head);
                    self.dev.copying(false);
                    match r? {
                        None => Reloc::Stale,
                        Some(Ok(())) => Reloc::Moved,
                        Some(Err(Fault::Corrupted)) => Reloc::Unreadable,
                        Some(Err(Fault::Flash(e)))
                            if nand_hal::Error::kind(&e) == nand_hal::ErrorKind::Uncorrectable =>
                        {
                            Reloc::Unreadable
                        }
                        Some(Err(e)) => return Err(e),
                    }
                }
                // A torn page, a page that keeps failing its reads, or a log page one
                // of whose sectors fails (its good sectors still copy).
                Scan::Garbage => self.relocate_log(page, false)?,
                Scan::Erased => Reloc::Stale,
            };
            match moved {
                Reloc::Moved => copied += 1,
                Reloc::Stale => {}
                Reloc::Unreadable => self.gc.page_unreadable(),
            }
        }
        if next >= ppb || self.dev.table().get(b).valid() == 0 {
            let unreadable = self.gc.finished();
            // Pages the counts call valid but no backpointer claims: the counts were
            // wrong (the content is unreachable anyway) and are corrected; with pages
            // that did not read they may be the same, so the block keeps its data (a
            // later collection, once they read, moves them) and collection leaves it
            // alone until the next checkpoint.
            if self.dev.table_mut().collected(b, unreadable) != 0 {
                warn!("oftl: gc leaves block {}: pages in it did not read", b.0);
                self.gc.left_alone(b);
            }
        } else {
            self.gc.advanced(next);
        }
        // A scrub or a retirement moves pages because their block is failing. A crash
        // recovery that drops the cold copies would undo the move and forget why it
        // was made (the flags and the read-disturb probe live in RAM), so a step that
        // copied such pages is made durable at once: scrubs are rare, and a checkpoint
        // is cheap beside the data it keeps (review s42: with the power lost every
        // 1,024 reads, read-disturbed data was lost on 5 of 40 seeds without it).
        if copied > 0
            && (bi.scrub() || bi.retire())
            && self.gc.head() == COLD_HEAD
            && self.recovery_drops_copies()
        {
            self.checkpoint(false)?;
        }
        Ok(copied)
    }

    /// Whether the page at `page` with backpointer `bp` is still referenced.
    pub(crate) fn is_valid(
        &mut self,
        page: PageAddr,
        bp: &Backpointer,
    ) -> Result<bool, FaultOf<F>> {
        if bp.owner == TABLE_OBJ {
            return Ok(match bp.kind {
                PageKind::Table => self.index_get(TABLE_OBJ, bp.lpn)? == page,
                PageKind::Index if bp.lpn == ROOT_LPN => self.cache.table_root() == page,
                PageKind::Index => {
                    let epp = self.entries_per_index() as u32;
                    bp.lpn < epp && {
                        let r = self.slot_for(TABLE_OBJ, ROOT_LPN)?;
                        index::entry(self.cache.data(r), bp.lpn as usize) == page
                    }
                }
                _ => false,
            });
        }
        let Some(o) = self.obj_get(bp.owner)? else {
            return Ok(false);
        };
        Ok(match bp.kind {
            PageKind::Data => self.index_get(bp.owner, bp.lpn)? == page,
            // The 24-bit field and the ring (a power of two dividing 2^24) agree.
            PageKind::Log => self.index_get(bp.owner, self.log_slot(bp.lpn as u64))? == page,
            PageKind::Meta => o.meta == page,
            PageKind::Index if o.direct => false,
            PageKind::Index if bp.lpn == ROOT_LPN => o.root == page,
            PageKind::Index => {
                let epp = self.entries_per_index() as u32;
                if bp.lpn >= epp {
                    return Ok(false);
                }
                let r = self.slot_for(bp.owner, ROOT_LPN)?;
                index::entry(self.cache.data(r), bp.lpn as usize) == page
            }
            _ => false,
        })
    }

    /// Copies `page` (tag `bp`) through `head` if it is still valid: `None` if it is
    /// not; the outer error is the validity lookup's, the inner one the copy's.
    #[allow(clippy::type_complexity)]
    fn copy_if_valid(
        &mut self,
        page: PageAddr,
        bp: &Backpointer,
        head: usize,
    ) -> Result<Option<Result<(), FaultOf<F>>>, FaultOf<F>> {
        if !self.is_valid(page, bp)? {
            return Ok(None);
        }
        Ok(Some(self.relocate(page, bp, false, head)))
    }

    /// Copies a valid page to `head` (data or cold; index pages always go through the
    /// data head, log sectors through the log head) and repoints its owner, through
    /// the aside scratch page. With `held`, the page's content is the copy recovery
    /// holds there (the data head's suspect page, see `scratch`).
    pub(crate) fn relocate(
        &mut self,
        page: PageAddr,
        bp: &Backpointer,
        held: bool,
        head: usize,
    ) -> Result<(), FaultOf<F>> {
        if bp.kind == PageKind::Log {
            // Recovery holds data-head pages only.
            if held {
                return Err(Fault::Internal);
            }
            return self.relocate_log(page, false).map(|_| ());
        }
        self.dev.stats_mut().relocated_pages += 1;
        let pu = self.dev.pu();
        let payload = self.dev.payload() as usize;
        let mut nbp = *bp;
        nbp.commit = true;
        nbp.tx_delta = 0;
        nbp.relocated = false;
        match bp.kind {
            PageKind::Data => {
                let buf = if held {
                    self.scratch.held(page).ok_or(Fault::Internal)?
                } else {
                    let buf = self.scratch.aside_mut()?;
                    self.dev.read_payload(
                        page,
                        0,
                        &mut buf[..payload],
                        Some((PageKind::Data, bp.owner, bp.lpn)),
                    )?;
                    buf
                };
                buf[payload..].fill(0xFF);
                let (np, _) = self.dev.program(head, buf, nbp, false, None)?;
                self.index_set(bp.owner, bp.lpn, np)?;
            }
            PageKind::Meta => {
                let mut rec = if held {
                    MetaRecord::parse(&self.scratch.held(page).ok_or(Fault::Internal)?[..pu])?
                } else {
                    self.dev.read_meta(page, self.scratch.aside_mut()?)?
                };
                // A metadata page's size is authoritative at its sequence number, and
                // the copy gets a new one: stamp the current size.
                let o = self.obj_get(bp.owner)?.ok_or(Fault::Corrupted)?;
                rec.size = Self::meta_size(&o);
                let buf = if held {
                    self.scratch.held(page).ok_or(Fault::Internal)?
                } else {
                    self.scratch.aside_mut()?
                };
                rec.encode(&mut buf[..pu]);
                let (np, _) = self.dev.program(head, buf, nbp, true, None)?;
                let old = self.obj(bp.owner)?.meta;
                self.dev.mark_invalid(old);
                self.dev.mark_valid(np);
                self.obj_update(bp.owner, |o| o.meta = np)?;
            }
            PageKind::Index | PageKind::Table => {
                let key = if bp.kind == PageKind::Table {
                    Key::table_page(bp.lpn)
                } else {
                    Key::index(bp.owner, bp.lpn)
                };
                let s = self.slot_for_key(key)?;
                if self.cache.addr(s) == page {
                    self.write_slot(s)?;
                }
            }
            _ => return Err(Fault::Corrupted),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use nand_hal::sim::{profile, FaultPlan, HeapStorage, SimNand};

    use super::COLD_HEAD;
    use crate::io::Scan;
    use crate::{Config, ObjKind, Oftl, DATA_HEAD};

    type Sim = SimNand<HeapStorage>;

    /// GC copies land in the cold head with the data head's next number as watermark,
    /// and every checkpoint leaves the data head past all of them.
    #[test]
    fn copies_go_cold_below_the_next_checkpoint_start() {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(5));
        let mut fs = Oftl::<&mut Sim, 2048, 64, 4, 2>::formatted(
            &mut sim,
            Config {
                window_blocks: 6,
                format_id: 1,
                ..Default::default()
            },
        )
        .unwrap();
        let o = fs.create(ObjKind::Object).unwrap();
        let data = [0x3Cu8; 2048 * 20];
        fs.write(o, 0, &data).unwrap();
        fs.sync().unwrap();
        fs.write(o, 0, &data[..2048 * 7]).unwrap();
        let w = fs.dev.heads().next_seq(DATA_HEAD);
        let moved = fs.gc_step(64).unwrap().copied;
        assert!(moved > 0);
        let cold = fs.dev.heads().get(COLD_HEAD);
        let block = cold.block.expect("the cold head has a block");
        let mut seen = 0;
        for i in 0..cold.next_page {
            let page = fs.dev.geo().page(block, i);
            if let Scan::Bp(bp) = fs.dev.scan_read(page).unwrap() {
                assert!(bp.relocated && bp.commit && bp.tx_delta == 0);
                assert!(
                    bp.seq >= w && bp.seq <= fs.dev.heads().next_seq(DATA_HEAD),
                    "watermark {} outside {w}..={}",
                    bp.seq,
                    fs.dev.heads().next_seq(DATA_HEAD)
                );
                seen += 1;
            }
        }
        assert_eq!(seen, moved);
        let last = cold.next_seq.wrapping_sub(1);
        fs.sync().unwrap();
        assert!(crate::mount::seq_cmp(fs.dev.heads().next_seq(DATA_HEAD), last).is_gt());
        let mut back = vec![0u8; data.len()];
        fs.read(o, 0, &mut back).unwrap();
        assert_eq!(back, data);
    }

    /// The checkpoint seal alone: a copy whose watermark is the data head's next number
    /// makes the data head skip it.
    #[test]
    fn seal_skips_a_watermark_in_use() {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(6));
        let mut fs = Oftl::<&mut Sim, 2048, 64, 4, 2>::formatted(
            &mut sim,
            Config {
                window_blocks: 6,
                format_id: 1,
                ..Default::default()
            },
        )
        .unwrap();
        let n = fs.dev.heads().next_seq(DATA_HEAD);
        fs.dev.seal_watermark();
        assert_eq!(fs.dev.heads().next_seq(DATA_HEAD), n, "no copy, no skip");
        fs.dev.heads_mut().number_from(COLD_HEAD, n.wrapping_add(1));
        fs.dev.seal_watermark();
        assert_eq!(fs.dev.heads().next_seq(DATA_HEAD), n.wrapping_add(1));
    }
}
