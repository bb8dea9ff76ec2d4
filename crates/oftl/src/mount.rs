//! Format, mount and unmount.
//!
//! Mount finds a superblock copy among the first good blocks, checks it against the
//! device and this build, then finds the newest complete checkpoint by reading the
//! spare areas of the two checkpoint blocks and loads it. A clean checkpoint with no
//! dirty marker after it is the whole mount: its cost does not depend on how full the
//! device is. Otherwise crash recovery runs (see [`crate::recovery`]).

use nand_hal::{BlockAddr, Error, ErrorKind, NandFlash, PageAddr};

use crate::checkpoint::CKPT_NUMBERS;
use crate::errors::{Fault, FormatError, Mismatch, MountError, WriteError};
use crate::format::backpointer::{PageKind, MAX_TX_DELTA};
use crate::format::checkpoint::{
    BlockState, BstEntry, CkptHeader, HeadRecord, HEADER_LEN, HEADS, NONE, NO_SUCCESSOR,
};
use crate::format::superblock::{
    SbParseError, Superblock, CRC32, MAX_CKPT_BLOCKS, MIN_CKPT_BLOCKS, SB_LEN, SB_SEARCH,
};
use crate::io::{FaultOf, Scan};
use crate::policy::SpacePolicy;
use crate::session::MountKind;
use crate::{Config, Damaged, Oftl, ReadOnlyReason, SalvageReport, MAX_WINDOW};

/// A complete checkpoint found on flash.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    seq: u32,
    cur: usize,
    first: u32,
    pages: u32,
}

struct Source {
    block: BlockAddr,
    first: u32,
    idx: u32,
    pages: u32,
    pos: usize,
    len: usize,
    seq: u32,
    digest: crc::Digest<'static, u32>,
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
    /// Formats the device as the store's [`Config`] says (erasing every good block)
    /// and leaves the store mounted on it. Whatever the store held before is dropped
    /// from RAM without being written (unflushed writes are lost). On error the store
    /// is left unmounted (operations fail with `Poisoned`).
    ///
    /// Power loss: a cut before the superblock is written leaves the part unformatted
    /// (a mount fails); format again.
    pub fn format(&mut self) -> Result<(), FormatError<F::Error>> {
        self.format_numbered_from(1)
    }

    /// [`Oftl::format`], with every head's and the checkpoints' sequence numbers
    /// starting at `first_seq` instead of 1: for tests of what happens when they wrap
    /// past `u32::MAX` (years of small syncs on a real part), without writing 2^32
    /// pages first. Not for products: a store formatted so behaves like any other.
    #[doc(hidden)]
    pub fn format_numbered_from(&mut self, first_seq: u32) -> Result<(), FormatError<F::Error>> {
        let r = self.format_inner(self.config, first_seq);
        self.session.ended(r.is_ok());
        r
    }

    fn format_inner(
        &mut self,
        config: Config,
        first_seq: u32,
    ) -> Result<(), FormatError<F::Error>> {
        let geo = self.dev.flash_mut().geometry();
        let caps = *self.dev.flash_mut().capabilities();
        Self::check_fit(&geo, &caps).map_err(FormatError::Unsupported)?;
        let meta_unit = Superblock::meta_unit_for(&caps, geo.page_size(), META)
            .map_err(FormatError::Unsupported)?;
        let w = config.window_blocks as u32;
        let needed = Self::min_window_blocks(geo.pages_per_block());
        if w < needed {
            return Err(FormatError::WindowTooSmall {
                needed_blocks: needed,
                given_blocks: config.window_blocks,
            });
        }
        if w > MAX_WINDOW as u32 || MAX_WINDOW as u32 * geo.pages_per_block() - 1 > MAX_TX_DELTA {
            return Err(FormatError::Unsupported(Mismatch::Capacity));
        }
        let describe = |sb_blocks, ckpt_blocks| {
            Superblock::describe(
                &geo,
                &caps,
                config.window_blocks,
                config.format_id,
                sb_blocks,
                ckpt_blocks,
                config.log_partial_programs,
                meta_unit,
            )
        };
        // The block table doubles as the factory bad-block map while the fixed blocks
        // are picked.
        let n_ckpt = config.checkpoint_blocks_for(geo.blocks());
        self.reset_state(describe(
            [BlockAddr(0); 2],
            &[BlockAddr(0); MIN_CKPT_BLOCKS],
        ));
        self.session.opened();
        for b in (0..geo.blocks()).map(BlockAddr) {
            self.dev.check_marker(b).map_err(FormatError::Flash)?;
        }
        let search = SB_SEARCH.min(geo.blocks());
        // Refuse what the part cannot hold before anything is erased, so a refused
        // format leaves the old store as it was (the erase sweep below may still find
        // blocks bad and refuse later).
        let good_at = |me: &Self, r: core::ops::Range<u32>| {
            r.filter(|&b| me.dev.table().get(BlockAddr(b)).state() != BlockState::Bad)
                .count() as u32
        };
        if good_at(self, 0..search) < 2
            || good_at(self, 0..geo.blocks()) < 2 + n_ckpt as u32 + 3 * w + 4
        {
            return Err(FormatError::NotEnoughGoodBlocks);
        }
        if CkptHeader::stream_len(geo.blocks(), w as u16).div_ceil(self.dev.payload())
            > geo.pages_per_block()
        {
            return Err(FormatError::Unsupported(Mismatch::Capacity));
        }
        let mut all_fixed = [BlockAddr(0); 2 + MAX_CKPT_BLOCKS];
        let fixed = &mut all_fixed[..2 + n_ckpt];
        for i in 0..fixed.len() {
            let to = if i < 2 { search } else { geo.blocks() };
            fixed[i] = self
                .pick_erased(to, &fixed[..i])
                .map_err(FormatError::Flash)?
                .ok_or(FormatError::NotEnoughGoodBlocks)?;
        }
        let fixed = &*fixed;
        let sb = describe([fixed[0], fixed[1]], &fixed[2..]);
        self.dev.set_superblock(sb);
        self.erase_leftovers(fixed, !config.for_image)
            .map_err(FormatError::Flash)?;
        let mut good = 0u32;
        for b in (0..geo.blocks()).map(BlockAddr) {
            if self.dev.table().get(b).state() == BlockState::Bad {
                continue;
            }
            if fixed.contains(&b) {
                self.dev.table_mut().reserved(b);
            } else {
                good += 1;
            }
        }
        if good < 3 * w + 4 {
            return Err(FormatError::NotEnoughGoodBlocks);
        }
        let total = CkptHeader::stream_len(geo.blocks(), w as u16).div_ceil(self.dev.payload());
        if total > geo.pages_per_block() {
            return Err(FormatError::Unsupported(Mismatch::Capacity));
        }
        let pu = self.dev.pu();
        let len = SB_LEN.div_ceil(pu) * pu;
        self.scratch.page_mut().fill(0xFF);
        self.scratch.page_mut()[..SB_LEN].copy_from_slice(&sb.encode());
        for b in [fixed[0], fixed[1]] {
            let page = geo.page(b, 0);
            self.dev
                .flash_mut()
                .program(page, 0, &self.scratch.page()[..len], &[])
                .map_err(FormatError::Flash)?;
        }
        // The first checkpoint goes to the first checkpoint block (already erased).
        self.ckpt.formatted(first_seq, sb.successors);
        for h in 0..HEADS {
            self.dev.heads_mut().number_from(h, first_seq);
        }
        self.checkpoint(true).map_err(|e| match e {
            Fault::Flash(e) => FormatError::Flash(e),
            _ => FormatError::NotEnoughGoodBlocks,
        })?;
        Ok(())
    }

    /// Erases every good block but the `fixed` ones (already erased), before the
    /// superblock makes the part a store: pages another store (or anything else) left
    /// must never be taken for this store's. A crash recovery walks window blocks no
    /// head has erased yet, and an old page there with a valid tag would read as written
    /// after the checkpoint (a lost page, or worse, replayed). A cut before the
    /// superblock leaves the part unformatted. Blocks whose erase fails are marked bad.
    ///
    /// These erases count (the block was good then: a later cut erase's random marker
    /// bits do not retire it, `Dev::check_block_marker`), except for an image
    /// ([`Config::for_image`]): a block the store never erased itself still has its
    /// bad-block marker read before it joins the window (a factory image written onto a
    /// part with bad blocks of its own, see `Dev::may_join_window`).
    fn erase_leftovers(&mut self, fixed: &[BlockAddr], count: bool) -> Result<(), F::Error> {
        for b in (0..self.dev.geo().blocks()).map(BlockAddr) {
            if fixed.contains(&b) || self.dev.table().get(b).state() == BlockState::Bad {
                continue;
            }
            match self.dev.flash_mut().erase(b) {
                Ok(()) if count => self.dev.table_mut().erased(b),
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::EraseFailed => {
                    self.dev.table_mut().found_bad(b);
                    self.dev.flash_mut().mark_bad(b)?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The first good block below `to` not in `taken` that erases, marking blocks whose
    /// erase fails bad on the way.
    fn pick_erased(&mut self, to: u32, taken: &[BlockAddr]) -> Result<Option<BlockAddr>, F::Error> {
        for b in (0..to).map(BlockAddr) {
            if self.dev.table().get(b).state() == BlockState::Bad || taken.contains(&b) {
                continue;
            }
            match self.dev.flash_mut().erase(b) {
                Ok(()) => return Ok(Some(b)),
                Err(e) if e.kind() == ErrorKind::EraseFailed => {
                    self.dev.table_mut().found_bad(b);
                    self.dev.flash_mut().mark_bad(b)?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// Mounts the formatted device, recovering from an unclean shutdown if needed.
    /// Whatever the store held before is dropped from RAM without being written. On
    /// error the store is left unmounted (operations fail with `Poisoned`) and may be
    /// mounted again; after [`MountError::MediaLoss`], see [`Oftl::mount_damaged`].
    ///
    /// Power loss: recovery writes only to blocks the last checkpoint calls free, so a
    /// cut during it makes the next mount start over.
    pub fn mount(&mut self) -> Result<(), MountError<F::Error>> {
        self.mount_as(MountKind::Normal)
    }

    fn mount_as(&mut self, kind: MountKind) -> Result<(), MountError<F::Error>> {
        self.session.begin_mount(kind);
        let r = self.mount_inner();
        self.session.end_mount();
        self.session.ended(r.is_ok());
        r
    }

    /// Mounts a store that fails [`Oftl::mount`] with [`MountError::MediaLoss`] (or,
    /// for `Damaged::Rebuild`, whose tables are lost), as `how` says: read-only past
    /// the loss, repaired, or rebuilt from a full scan. On error the store is left
    /// unmounted.
    pub fn mount_damaged(&mut self, how: Damaged) -> Result<(), MountError<F::Error>> {
        match how {
            Damaged::Salvage => {
                let r = self.mount_as(MountKind::Salvage);
                if r.is_ok() {
                    warn!("oftl: salvage mount: the store is read-only");
                    self.session.salvaged();
                }
                r
            }
            Damaged::Repair => self.mount_as(MountKind::Repair),
            #[cfg(feature = "alloc")]
            Damaged::Rebuild { lost_meta_attrs } => self.mount_rebuild(lost_meta_attrs),
        }
    }

    /// What the last salvage or repair mount left out (empty after a normal mount).
    pub fn salvage_report(&self) -> &SalvageReport {
        &self.salvaged
    }

    /// The first superblock copy that reads, checked against the device and this
    /// build's limits.
    pub(crate) fn checked_superblock(&mut self) -> Result<Superblock, MountError<F::Error>> {
        let flash = self.dev.flash_mut();
        let geo = flash.geometry();
        let caps = *flash.capabilities();
        let sb = find_superblock(flash)?;
        sb.check_device(&geo, &caps).map_err(MountError::Mismatch)?;
        Self::check_fit(&geo, &caps).map_err(MountError::Mismatch)?;
        // Whole-page units are programmed from whole-page slots (with in-band placement
        // the backpointer goes at the page's end).
        let whole = sb.meta_unit == crate::format::superblock::WHOLE_PAGE;
        if sb.window_blocks as usize > MAX_WINDOW
            || sb.meta_payload() as usize > META
            || (whole && META < PAGE)
            || MAX_WINDOW as u32 * geo.pages_per_block() - 1 > MAX_TX_DELTA
        {
            return Err(MountError::Mismatch(Mismatch::Capacity));
        }
        let needed = Self::min_window_blocks(geo.pages_per_block());
        if (sb.window_blocks as u32) < needed {
            return Err(MountError::WindowTooSmall {
                needed_blocks: needed,
                given_blocks: sb.window_blocks,
            });
        }
        Ok(sb)
    }

    #[inline(never)]
    fn mount_load(&mut self) -> Result<bool, MountError<F::Error>> {
        self.salvaged = SalvageReport::new();
        let sb = self.checked_superblock()?;
        self.reset_state(sb);
        self.session.opened();
        let clean = self.load_newest_checkpoint()?;
        // Checkpoint blocks retired after the loaded checkpoint still say "reserved":
        // their markers are read, and only a marker written counts
        // (`NandFlash::is_marked`). A cut erase leaves random bits in the block, its
        // marker bytes among them (the fault model's torn erase), and a healthy part
        // lost a checkpoint block at each such cut until it was read-only for good (an
        // independent review, stop 47: a TINY part with four checkpoint blocks, two
        // lost to cut erases, read-only after one more torn program). Such a block is
        // erased before use like any other (`ckpt_block_blank`).
        for i in 0..self.dev.sb().ckpt_blocks().len() {
            let b = self.dev.sb().ckpt_blocks()[i];
            self.dev
                .check_written_marker(b)
                .map_err(MountError::Flash)?;
        }
        Ok(clean)
    }

    /// Loads the newest checkpoint again for a replay in RAM only. A load that went
    /// back past one it could not read (an unstable page torn by the cut) is tried
    /// again, like the first load: the read-only session's cache write-backs go to
    /// blocks the loaded checkpoint calls free, which may hold the skipped one's index
    /// pages, and a later mount that reads the skipped one well would take that
    /// overwritten index for the newest state (the wear-out soak found acknowledged
    /// writes rolled back so, seed 2878).
    #[inline(never)]
    fn reload_for_replay(&mut self) -> Result<(), MountError<F::Error>> {
        let sb = *self.dev.sb();
        for attempt in 1..=MOUNT_ATTEMPTS {
            self.reset_state(sb);
            self.session.opened();
            self.load_newest_checkpoint()?;
            if !self.ckpt.fell_back() || attempt == MOUNT_ATTEMPTS {
                break;
            }
        }
        Ok(())
    }

    fn mount_inner(&mut self) -> Result<(), MountError<F::Error>> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let more = attempt < MOUNT_ATTEMPTS;
            let clean = match self.mount_load() {
                // A run of transient read errors longer than the retries reads like lost
                // pages; one that is over reads well the next time (an independent
                // review: six errors in a row in a recovery's scan refused an intact
                // store with `MediaLoss`, a verdict that sends users to a repair). So
                // does a superblock or checkpoint whose every read failed: eight failing
                // reads at the superblock said `Corrupted` (a later review).
                Err(MountError::MediaLoss { .. } | MountError::Corrupted) if more => continue,
                r => r?,
            };
            if self.ckpt.fell_back() && more {
                // The load went back past a checkpoint it could not read: a run of read
                // errors longer than the retries may have hidden the newest one, and the
                // recovery's first write would make the older state durable (an
                // independent review found acknowledged data rolled back for good so).
                // Load again first: a torn checkpoint stays unreadable, a transient run
                // is over.
                continue;
            }
            if clean {
                self.ckpt.clean_on_flash();
                self.dev.index_block_unchecked();
                self.check_recorded_window()?;
            } else {
                // The index head's block the loaded checkpoint recorded: its pages are
                // that checkpoint's index, not the failed attempt's cache below.
                let recorded = self.dev.index_block();
                match self.recover(more) {
                    Ok(true) => {}
                    // A page taken for a torn tail reads after all: mount again.
                    Ok(false) => continue,
                    // Lost pages, or a run of read errors: look again before saying so
                    // (recovery writes nothing the old checkpoint references before its
                    // own checkpoint, so starting over is as after a cut).
                    Err(Fault::MediaLoss(_)) if more => continue,
                    Err(Fault::ReadOnly | Fault::NoSpace | Fault::Exhausted)
                        if !self.session.salvaging() =>
                    {
                        // Too few good blocks to finish a recovery (or no checkpoint
                        // block to checkpoint it): replay again in RAM only and mount
                        // read-only, so everything readable can still be read.
                        let reason = self
                            .session
                            .read_only()
                            .unwrap_or(ReadOnlyReason::GoodBlocks);
                        // The block the failed attempt's index head started, if it
                        // started one: a recovery whose restate failed wrote nothing,
                        // and the recorded block holds the loaded checkpoint's index
                        // pages, which the erase lost when the reload loaded an older
                        // one and the first came back at a later mount (review s43).
                        let tried = self.dev.index_block().filter(|&b| Some(b) != recorded);
                        self.reload_for_replay()?;
                        self.dev.take_whole_again(tried);
                        self.session.replay_in_ram_only();
                        self.recover(false).map_err(mount_fault)?;
                        self.go_read_only(reason);
                    }
                    Err(e) => return Err(mount_fault(e)),
                }
            }
            self.check_health();
            self.settle_ids_after_mount();
            if self.dev.cache_only() {
                // A replay in RAM may leave every cache slot dirty: with one clean, a
                // read-only session loads every page through it and writes nothing (a
                // part that programs nothing at all fails here instead of at a read).
                self.cache
                    .keep_one_clean(&mut self.dev)
                    .map_err(mount_fault)?;
            }
            return Ok(());
        }
    }

    /// Writes a clean checkpoint and leaves the store unmounted: operations then fail
    /// with `Poisoned` until [`Oftl::mount`] (or a format). If this fails the store is
    /// poisoned as after any failed write; mounting again recovers.
    pub fn unmount(&mut self) -> Result<(), WriteError<F::Error>> {
        self.check_usable().map_err(|e| self.fail(e))?;
        if self.session.read_only().is_some() {
            // Nothing was written (writes are refused): nothing to make durable.
            self.session.poison();
            return Ok(());
        }
        self.flush_all().map_err(|e| self.fail(e))?;
        if !self.ckpt.needs_marker() {
            self.checkpoint(true).map_err(|e| self.fail(e))?;
        }
        self.session.poison();
        Ok(())
    }

    /// After a clean mount: reads the bad-block markers of the recorded window's blocks
    /// this store never erased. A factory image programmed onto a part with bad blocks
    /// of its own records a window chosen on another part; a marked block is retired and
    /// a fresh checkpoint picks the window again (every operation reserves room in the
    /// window, so a block found bad only when a head reaches it would shrink room
    /// already promised). A read-only mount only retires it in RAM.
    fn check_recorded_window(&mut self) -> Result<(), MountError<F::Error>> {
        let mut retired = false;
        for i in 0..self.dev.table().window_unused().len() {
            let b = self.dev.table().window_unused()[i];
            if self.dev.table().get(b).erases() > 0 {
                continue;
            }
            if self.dev.check_marker(b).map_err(MountError::Flash)? {
                retired = true;
            }
        }
        if !retired {
            return Ok(());
        }
        self.dev.table_mut().drop_bad_from_window();
        if self.session.replay_only() {
            return Ok(());
        }
        self.checkpoint(false).map_err(mount_fault)
    }

    /// Finds and loads the newest complete checkpoint; returns whether the device was
    /// shut down cleanly after it.
    ///
    /// Rules (docs/SPEC.md 3.7):
    ///
    /// - Every page of the checkpoint blocks is read with retries; only a clean read of
    ///   an erased slot counts as erased.
    /// - The next checkpoint's sequence number is past every number that may be on
    ///   flash: the newest readable checkpoint or marker page, plus four for every page
    ///   above a block's newest readable page that does not read (a torn or unstable
    ///   page could be a checkpoint newer each, as the last of four attempts whose
    ///   three first left no trace). The blocks of those pages are erased before the
    ///   session's first checkpoint attempt, but for the loaded one's and the spare's
    ///   (`purge_stale_blocks`).
    /// - Two complete checkpoints with one number (never written by this format) are
    ///   told apart by rotation: the one whose block follows the other's in the
    ///   superblock's list (or, in one block, the later one) is newer.
    /// - A marker proves its checkpoint was committed, read back and possibly used:
    ///   falling back past a checkpoint that has a marker (it no longer loads, or it is
    ///   unreadable) would pass an older state off as current, so mount fails with
    ///   [`MountError::MediaLoss`] naming the page instead. Falling back past a
    ///   checkpoint without a marker is safe: its window was never programmed.
    /// - The loaded checkpoint counts as clean only if it is the newest, was written
    ///   by unmount, has no marker, and no unreadable page sits above it.
    pub(crate) fn load_newest_checkpoint(&mut self) -> Result<bool, MountError<F::Error>> {
        let ppb = self.dev.ppb();
        let mut cands: heapless::Vec<Candidate, 8> = heapless::Vec::new();
        // Newest marker: (seq, page).
        let mut marker: Option<(u32, PageAddr)> = None;
        let mut max_seq: Option<u32> = None;
        let mut unknown = 0u32;
        let mut stale = 0u16;
        let n_ckpt = self.dev.sb().ckpt_blocks().len();
        let mut last_used = [None::<u32>; MAX_CKPT_BLOCKS];
        let mut top_ok = [false; MAX_CKPT_BLOCKS];
        // Blocks with an unreadable page right after another (see `check_lost_markers`).
        let mut pairs = 0u16;
        // The lowest-numbered readable page seen in each block.
        // Blocks with a readable marker page.
        let mut marked_blocks = 0u16;
        let (order, in_order) = self.ckpt_search_order()?;
        // Blocks still searched after the newest one in `order` that shows a marker.
        let mut after_marker: Option<usize> = None;
        for (k, &cur) in order.iter().enumerate() {
            let by_age = k < in_order;
            if by_age && after_marker == Some(0) {
                continue;
            }
            let mut saw_marker = false;
            let b = self.dev.sb().ckpt_blocks()[cur];
            // Pages are written in order from 0: binary-search the first erased page,
            // then walk back from the last used one. A page that does not read counts
            // as used (so the search may stop above the real end; the walk back then
            // passes the erased pages, and the next checkpoint goes to a fresh block).
            let (mut lo, mut hi) = (0, ppb);
            while lo < hi {
                let mid = (lo + hi) / 2;
                let page = self.dev.geo().page(b, mid);
                if self.dev.scan_read(page).map_err(MountError::from)? == Scan::Erased {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            last_used[cur] = lo.checked_sub(1);
            let mut found = 0;
            let mut readable_seen = false;
            // The page above the current one did not read, and the readable page
            // nearest above (walking down).
            let mut unreadable_above = false;
            for i in (0..lo).rev() {
                let page = self.dev.geo().page(b, i);
                let bp = match self.dev.scan_read(page).map_err(MountError::from)? {
                    Scan::Bp(bp) if matches!(bp.kind, PageKind::Marker | PageKind::Checkpoint) => {
                        bp
                    }
                    Scan::Erased => {
                        unreadable_above = false;
                        continue;
                    }
                    _ => {
                        if !readable_seen {
                            unknown += 1;
                            stale |= 1 << cur;
                        }
                        if unreadable_above {
                            pairs |= 1 << cur;
                        }
                        unreadable_above = true;
                        continue;
                    }
                };
                unreadable_above = false;
                if i + 1 == lo {
                    top_ok[cur] = true;
                }
                readable_seen = true;
                max_seq = Some(max_seq.map_or(bp.seq, |m| newer(m, bp.seq)));
                match bp.kind {
                    PageKind::Marker if marker.is_none_or(|(m, _)| seq_cmp(bp.seq, m).is_gt()) => {
                        marker = Some((bp.seq, page));
                        saw_marker = true;
                        marked_blocks |= 1 << cur;
                    }
                    PageKind::Marker => {
                        saw_marker = true;
                        marked_blocks |= 1 << cur;
                    }
                    _ if bp.commit && bp.lpn <= i => {
                        let c = Candidate {
                            seq: bp.seq,
                            cur,
                            first: i - bp.lpn,
                            pages: bp.lpn + 1,
                        };
                        if cands.is_full() {
                            let (oi, _) = cands
                                .iter()
                                .enumerate()
                                .min_by(|a, b| cand_cmp(a.1, b.1, n_ckpt))
                                .unwrap_or((0, &c));
                            if cand_cmp(&cands[oi], &c, n_ckpt).is_lt() {
                                cands[oi] = c;
                            }
                        } else {
                            let _ = cands.push(c);
                        }
                        found += 1;
                        // Two candidates, and a marker seen in the block: what lies
                        // below is older. Without the marker the walk goes on: the
                        // spare must be the newest marked checkpoint, and stopping at
                        // two unmarked ones (failed attempts appended above it) chose
                        // an older block's, whose fallback then rolled acknowledged
                        // writes back once the real one's block was erased (review
                        // s45b, `s45b_spare_hides_behind_two_checkpoints`).
                        if found >= 2 && saw_marker {
                            break;
                        }
                    }
                    _ => {}
                }
            }
            if by_age {
                after_marker = match after_marker {
                    Some(n) => Some(n.saturating_sub(1)),
                    None if saw_marker => Some(1),
                    None => None,
                };
            }
        }
        // Newest first, ties by the documented rotation rule.
        sort_small(&mut cands, |a, b| cand_cmp(a, b, n_ckpt).is_gt());
        let mut loaded = None;
        for c in cands.iter() {
            if let Some((m, page)) = marker {
                if seq_cmp(m, c.seq).is_gt() {
                    // A newer checkpoint was committed and read back, and is gone.
                    return Err(MountError::MediaLoss { page: page.0 });
                }
            }
            match self.load_checkpoint(c) {
                Ok(got) => {
                    loaded = Some((c, got));
                    break;
                }
                Err(Fault::Flash(e)) => return Err(MountError::Flash(e)),
                Err(_) => {
                    if marker.is_some_and(|(m, _)| m == c.seq) {
                        // It has a marker: committed, read back, maybe used.
                        let page = self
                            .dev
                            .geo()
                            .page(self.dev.sb().ckpt_blocks()[c.cur], c.first + c.pages - 1);
                        return Err(MountError::MediaLoss { page: page.0 });
                    }
                    continue;
                }
            }
        }
        let (c, (clean, successor)) = loaded.ok_or(MountError::Corrupted)?;
        let successor = successor.filter(|&s| s != NO_SUCCESSOR).map(usize::from);
        if !self.session.salvaging() {
            self.check_lost_markers(c, clean, pairs, &last_used, marked_blocks)?;
        }
        let newest_is_loaded = cands.first().is_some_and(|n| n.seq == c.seq);
        let marked = marker.is_some_and(|(m, _)| !seq_cmp(m, c.seq).is_lt());
        // Past every number that may be on flash (see the rules above).
        let top = max_seq.map_or(c.seq, |m| newer(m, c.seq));
        // An unmarked checkpoint may be a torn page that read well this once: the one
        // before it stays loadable until this session commits a checkpoint. The marked
        // one when it is older and in another block: the unmarked ones between may be
        // attempts whose programs failed but landed (review s43c: the spare was such
        // a page, a restate erased the marked checkpoint's block, and the mount failed
        // `Corrupted` whenever neither failed page read).
        let spare = if marked {
            None
        } else {
            let older = |o: &&Candidate| seq_cmp(o.seq, c.seq).is_lt() && o.cur != c.cur;
            cands
                .iter()
                .filter(older)
                .find(|o| marker.is_some_and(|(m, _)| m == o.seq))
                .or_else(|| cands.iter().find(older))
                .map(|o| o.cur)
        };
        // The successor as the writer keeps it (`CkptPos::loaded`): not the spare's
        // block, which a session may write to after failed attempts. And only for the
        // newest checkpoint that reads: once a newer one was written (one that does
        // not load now: unmarked, so falling back past it is safe), the writer may
        // have erased and reused the older one's successor (review s43c's sweeps on
        // the file layer refused such a fallback).
        let successor = successor.filter(|&s| Some(s) != spare && newest_is_loaded);
        if !self.session.salvaging() {
            if let Some(s) = successor {
                self.check_successor(c, s, &last_used)?;
            }
        }
        let clean = clean && !marked && newest_is_loaded && unknown == 0;
        // The block being programmed at the cut may hold unstable pages, and a page
        // that does not read is not something to append after: after an unclean
        // shutdown the next checkpoint goes to another, freshly erased block.
        self.ckpt.loaded(
            top.wrapping_add(unknown.saturating_mul(CKPT_NUMBERS)),
            c.cur,
            last_used[c.cur].map_or(0, |u| u + 1),
            spare,
            !newest_is_loaded || unknown > 0,
            !clean || !top_ok[c.cur],
            stale,
            successor,
        );
        Ok(clean)
    }

    /// Fails with [`MountError::MediaLoss`] when the successor block `s` the loaded
    /// checkpoint `c` names (format 8) holds two pages in a row that do not read, and
    /// shows it is not a block a cut erase left.
    ///
    /// The successor was erased before `c` was written and is never erased while `c`
    /// is the newest checkpoint (`checkpoint::CkptPos::protect`), so all it holds is
    /// newer than `c`: checkpoints and markers, and attempts that failed or were cut.
    /// A marker follows its commit page at once and is programmed only once the
    /// checkpoint read back; a failed attempt leaves no marker after a commit page that
    /// did not read back, and a cut tears one page. Two pages in a row that do not read
    /// are then a newer checkpoint's commit page and its marker (or two pages of one
    /// attempt that both failed to read back, a double fault): falling back to `c`
    /// would roll acknowledged writes back.
    ///
    /// One erase of the successor remains while `c` is the newest: a session erases
    /// the pages a mount could not read there before its first attempt (as any stale
    /// checkpoint block's), and a cut erase leaves nothing that reads, or old pages. So
    /// the pair counts only when the block also shows it holds what `c`'s writer left:
    /// a page that reads newer than `c`, or one that reads erased above the pair, and no
    /// page older than `c`. A block lost whole with every page programmed is not told
    /// from a cut erase (left open); one lost as pages lose their charge, with its
    /// erased pages still erased, is, and so is a checkpoint and its marker lost at a
    /// block's start, which `check_lost_markers` must take for older.
    #[inline(never)]
    fn check_successor(
        &mut self,
        c: &Candidate,
        s: usize,
        last_used: &[Option<u32>; MAX_CKPT_BLOCKS],
    ) -> Result<(), MountError<F::Error>> {
        let n = self.dev.sb().ckpt_blocks().len();
        if s >= n || s == c.cur {
            return Ok(());
        }
        // Its first page read erased (or it is bad): nothing was walked.
        let Some(used) = last_used[s] else {
            return Ok(());
        };
        // A store short of good checkpoint blocks appends its failed attempts in the
        // successor as a last resort (`checkpoint::place_checkpoint`): pairs there
        // prove nothing.
        let mut good = 0;
        for i in 0..n {
            let cb = self.dev.sb().ckpt_blocks()[i];
            if !self.dev.flash_mut().is_bad(cb).map_err(MountError::Flash)? {
                good += 1;
            }
        }
        if good <= crate::checkpoint::SHORT_OF_CKPT_BLOCKS {
            return Ok(());
        }
        let b = self.dev.sb().ckpt_blocks()[s];
        // The upper page of the first pair, and whether the block shows `c`'s writer
        // left it (the search's end reads erased).
        let mut pair = None;
        let mut unreadable_below = false;
        let mut shown = false;
        for i in 0..=used {
            let page = self.dev.geo().page(b, i);
            match self.dev.scan_read(page).map_err(MountError::from)? {
                Scan::Bp(bp) if matches!(bp.kind, PageKind::Marker | PageKind::Checkpoint) => {
                    if !seq_cmp(bp.seq, c.seq).is_gt() {
                        // Written before `c`: the block is not `c`'s successor as its
                        // writer left it (a cut erase of old pages).
                        return Ok(());
                    }
                    shown = true;
                    unreadable_below = false;
                }
                Scan::Erased => {
                    shown |= pair.is_some();
                    unreadable_below = false;
                }
                _ => {
                    if unreadable_below && pair.is_none() {
                        pair = Some(page);
                    }
                    unreadable_below = true;
                }
            }
        }
        shown |= pair.is_some() && used + 1 < self.dev.ppb();
        match pair {
            Some(page) if shown => {
                warn!("oftl: mount: the successor of the loaded checkpoint holds pages that do not read");
                Err(MountError::MediaLoss { page: page.0 })
            }
            _ => Ok(()),
        }
    }

    /// Fails with [`MountError::MediaLoss`] when a marker newer than the loaded
    /// checkpoint `c` may have landed and no longer reads.
    ///
    /// A marker proves its checkpoint's window was programmed, so falling back past it
    /// rolls acknowledged writes back; a readable one is caught by the marker rule, but
    /// a checkpoint and its marker that read uncorrectable at one mount and well at the
    /// next used to be passed over silently, and a writable session then made the older
    /// state durable (an independent review, stop 45).
    ///
    /// A marker immediately follows its checkpoint's commit page, and a torn or failed
    /// attempt leaves one unreadable page at the end of its block (the next attempt
    /// goes to a fresh block, or, as a last resort, follows failed attempts only), so
    /// two unreadable pages in a row may be a lost checkpoint and its marker. They are
    /// older than `c` when they sit below `c`'s marker slot and the next page (a
    /// checkpoint after `c` in its block comes after `c`'s marker, unless `c` is clean;
    /// failed attempts the last resort appended after `c`, when `c`'s own program
    /// reported failure, look like this), or a readable page above
    /// them in their block is no newer than `c`. In another block they count only if
    /// the block shows a readable marker (failed attempts leave none) and did not start
    /// before `c`'s (a readable page of it older than `c`'s block's first page). A
    /// block of which nothing reads is taken for older: a torn erase leaves one (its
    /// old pages read uncorrectable), and refusing it would refuse an intact store for
    /// good after a mere power cut; a whole block lost is left open.
    #[inline(never)]
    fn check_lost_markers(
        &mut self,
        c: &Candidate,
        c_clean: bool,
        pairs: u16,
        last_used: &[Option<u32>; MAX_CKPT_BLOCKS],
        marked_blocks: u16,
    ) -> Result<(), MountError<F::Error>> {
        // Above `c` in its block, a newer checkpoint's marker comes after `c`'s own
        // marker (unless `c` is clean: it has none) and the newer commit page.
        let after_c = c.first + c.pages + if c_clean { 1 } else { 2 };
        for (cur, used) in last_used.iter().enumerate() {
            if pairs & (1 << cur) == 0 || (cur != c.cur && marked_blocks & (1 << cur) == 0) {
                continue;
            }
            let b = self.dev.sb().ckpt_blocks()[cur];
            // Walk down again (rare: only blocks with such a pair) for the newest pair
            // (`idx`: its upper page), the nearest readable page above it and the lowest
            // readable page in the block.
            let (mut idx, mut above, mut low) = (0, None, None);
            let mut unreadable_above = false;
            for i in (0..used.map_or(0, |u| u + 1)).rev() {
                let page = self.dev.geo().page(b, i);
                match self.dev.scan_read(page).map_err(MountError::from)? {
                    Scan::Bp(bp) if matches!(bp.kind, PageKind::Marker | PageKind::Checkpoint) => {
                        if idx == 0 {
                            above = Some(bp.seq);
                        }
                        low = Some(bp.seq);
                        unreadable_above = false;
                    }
                    Scan::Erased => unreadable_above = false,
                    _ => {
                        if unreadable_above && idx == 0 {
                            idx = i + 1;
                        }
                        unreadable_above = true;
                    }
                }
            }
            // The nearest readable page above the pair no newer than `c`: the pair is
            // older too.
            if idx == 0
                || (cur == c.cur && idx < after_c)
                || above.is_some_and(|s| !seq_cmp(s, c.seq).is_gt())
            {
                continue;
            }
            if cur != c.cur {
                // Nothing in the block reads: its age cannot be told.
                let Some(low) = low else { continue };
                let l0 = self.dev.geo().page(self.dev.sb().ckpt_blocks()[c.cur], 0);
                if let Scan::Bp(bp) = self.dev.scan_read(l0).map_err(MountError::from)? {
                    if seq_cmp(low, bp.seq).is_lt() {
                        continue;
                    }
                }
            }
            warn!("oftl: mount: a checkpoint marker newer than the loaded checkpoint may be lost");
            return Err(MountError::MediaLoss {
                page: self.dev.geo().page(b, idx).0,
            });
        }
        Ok(())
    }

    /// The order in which [`Oftl::load_newest_checkpoint`] searches the checkpoint
    /// blocks, by the first page of each good one: first those whose first page is a
    /// checkpoint or marker page, newest first (the first `in_order` of the list), then
    /// every one whose first page is something else or does not read (searched
    /// whatever happens). A block whose first page reads erased holds nothing written
    /// since its erase (a failed first program that reads erased is never followed in
    /// its block; a cut erase leaves only older pages) and is left out.
    ///
    /// Blocks take checkpoints in turn, each erased before its first page, so every page
    /// of a block is older than the first page of any block started after it. The
    /// search goes down that order until it has searched one block past the newest
    /// block that shows a marker: a marker's checkpoint was committed and read back, and
    /// falling back past it is media loss, so nothing older can load; the block after
    /// it holds the spare an unmarked checkpoint in the marker's own block keeps. Blocks
    /// started for checkpoint attempts that failed or were cut (up to four for one
    /// checkpoint) hold no marker and do not stop the search (an independent review
    /// found the first version, which searched the three newest, missing the durable
    /// checkpoint behind three such attempts). A store with many checkpoint blocks then
    /// mounts with two reads for most of them instead of a search each.
    fn ckpt_search_order(
        &mut self,
    ) -> Result<(heapless::Vec<usize, MAX_CKPT_BLOCKS>, usize), MountError<F::Error>> {
        let n = self.dev.sb().ckpt_blocks().len();
        // By first page, newest first (an insertion: at most 16, and no sort code).
        let mut order: heapless::Vec<usize, MAX_CKPT_BLOCKS> = heapless::Vec::new();
        let mut first_seq = [0u32; MAX_CKPT_BLOCKS];
        let mut unknown: heapless::Vec<usize, MAX_CKPT_BLOCKS> = heapless::Vec::new();
        for cur in 0..n {
            let b = self.dev.sb().ckpt_blocks()[cur];
            if self.dev.flash_mut().is_bad(b).map_err(MountError::Flash)? {
                continue;
            }
            match self
                .dev
                .scan_read(self.dev.geo().page(b, 0))
                .map_err(MountError::from)?
            {
                Scan::Erased => {}
                Scan::Bp(bp) if matches!(bp.kind, PageKind::Marker | PageKind::Checkpoint) => {
                    let at = order
                        .iter()
                        .position(|&c| seq_cmp(bp.seq, first_seq[c]).is_gt())
                        .unwrap_or(order.len());
                    first_seq[cur] = bp.seq;
                    let _ = order.insert(at, cur);
                }
                _ => {
                    let _ = unknown.push(cur);
                }
            }
        }
        let in_order = order.len();
        for &cur in unknown.iter() {
            let _ = order.push(cur);
        }
        Ok((order, in_order))
    }

    /// Loads one checkpoint into RAM. Returns its clean flag and the successor it
    /// names (format 8).
    fn load_checkpoint(&mut self, c: &Candidate) -> Result<(bool, Option<u16>), FaultOf<F>> {
        let geo = self.dev.geo();
        let mut src = Source {
            block: self.dev.sb().ckpt_blocks()[c.cur],
            first: c.first,
            idx: 0,
            pages: c.pages,
            pos: 0,
            len: 0,
            seq: c.seq,
            digest: CRC32.digest(),
        };
        let mut h = [0u8; HEADER_LEN];
        self.take(&mut src, &mut h)?;
        let hdr = CkptHeader::parse(&h)?;
        if hdr.seq != c.seq
            || hdr.n_blocks != geo.blocks()
            || (hdr.table_root != NONE && hdr.table_root >= geo.pages())
            || hdr.next_obj_id == 0
            || hdr.window_len as usize > MAX_WINDOW
            || hdr.total_len.div_ceil(self.dev.payload()) != c.pages
        {
            return Err(Fault::Corrupted);
        }
        for h in 0..HEADS {
            let mut r = [0u8; 12];
            self.take(&mut src, &mut r)?;
            let rec = HeadRecord::parse(&r, geo.blocks(), geo.pages_per_block())?;
            self.dev.heads_mut().loaded(h, &rec);
        }
        self.dev.table_mut().clear_window();
        for _ in 0..hdr.window_len {
            let mut r = [0u8; 4];
            self.take(&mut src, &mut r)?;
            let b = BlockAddr(u32::from_le_bytes(r));
            if !geo.contains_block(b) {
                return Err(Fault::Corrupted);
            }
            if !self.dev.table_mut().load_window(b) {
                return Err(Fault::Corrupted);
            }
        }
        self.dev.table_mut().begin_load();
        for b in (0..geo.blocks()).map(BlockAddr) {
            let mut r = [0u8; 4];
            self.take(&mut src, &mut r)?;
            let e = BstEntry::unpack(u32::from_le_bytes(r), geo.pages_per_block())?;
            self.dev.table_mut().loaded(b, e.state, e.valid, e.erases);
        }
        let expect = src.digest.clone().finalize();
        let mut r = [0u8; 4];
        self.take(&mut src, &mut r)?;
        if !crate::format::field::crc_matches(u32::from_le_bytes(r), expect) {
            return Err(Fault::Corrupted);
        }
        // Every block the window or a head names must be in the window state.
        for &b in self.dev.table().window() {
            if self.dev.table().get(b).state() != BlockState::Window {
                return Err(Fault::Corrupted);
            }
        }
        for h in self.dev.heads().all() {
            if h.block
                .is_some_and(|b| self.dev.table().get(b).state() != BlockState::Window)
            {
                return Err(Fault::Corrupted);
            }
        }
        for &cb in self.dev.sb().ckpt_blocks() {
            if !matches!(
                self.dev.table().get(cb).state(),
                BlockState::Reserved | BlockState::Bad
            ) {
                return Err(Fault::Corrupted);
            }
        }
        self.ids
            .loaded(hdr.n_objects, hdr.next_obj_id, hdr.obj_cursor);
        self.cache.forget_all(PageAddr(hdr.table_root));
        Ok((hdr.clean, hdr.successor))
    }

    fn take(&mut self, src: &mut Source, out: &mut [u8]) -> Result<(), FaultOf<F>> {
        let mut done = 0;
        while done < out.len() {
            if src.pos == src.len {
                if src.idx == src.pages {
                    return Err(Fault::Corrupted);
                }
                let page = self.dev.geo().page(src.block, src.first + src.idx);
                let payload = self.dev.payload() as usize;
                let owner = src.seq & crate::format::backpointer::MAX_U24;
                match self.dev.read_payload(
                    page,
                    0,
                    &mut self.scratch.page_mut()[..payload],
                    Some((PageKind::Checkpoint, owner, src.idx)),
                ) {
                    Ok(_) => {}
                    Err(Fault::Flash(e)) if e.kind() == ErrorKind::Uncorrectable => {
                        return Err(Fault::Corrupted)
                    }
                    Err(e) => return Err(e),
                }
                src.idx += 1;
                src.pos = 0;
                src.len = payload;
            }
            let n = (src.len - src.pos).min(out.len() - done);
            out[done..done + n].copy_from_slice(&self.scratch.page()[src.pos..src.pos + n]);
            src.pos += n;
            done += n;
        }
        src.digest.update(out);
        Ok(())
    }
}

/// Which of two checkpoint candidates is newer: the higher sequence number; between
/// equal numbers (never written by this format's rules), the one whose block follows
/// the other's in the checkpoint block rotation, or the later one in the same block.
fn cand_cmp(a: &Candidate, b: &Candidate, n: usize) -> core::cmp::Ordering {
    use core::cmp::Ordering;
    match seq_cmp(a.seq, b.seq) {
        Ordering::Equal if a.cur == b.cur => a.first.cmp(&b.first),
        Ordering::Equal if (a.cur + n - b.cur) % n == 1 => Ordering::Greater,
        Ordering::Equal if (b.cur + n - a.cur) % n == 1 => Ordering::Less,
        o => o,
    }
}

/// A recovery failure as a mount error.
fn mount_fault<E>(e: Fault<E>) -> MountError<E> {
    match e {
        // Replay reaches these only through damaged pages whose checks passed (a
        // logical page past the index, an object id out of range).
        Fault::TooLarge | Fault::TooManyObjects => MountError::Corrupted,
        e => MountError::from(e),
    }
}

/// Sorts a short list (a few pages, checkpoint candidates) so that `before(a, b)` holds
/// for no `b` ahead of `a`, by insertion: `sort_unstable_by` costs kilobytes of code per
/// element type on a microcontroller (7 KB of a board's firmware for two of them).
pub(crate) fn sort_small<T>(v: &mut [T], before: impl Fn(&T, &T) -> bool) {
    for i in 1..v.len() {
        let mut j = i;
        while j > 0 && before(&v[j], &v[j - 1]) {
            v.swap(j - 1, j);
            j -= 1;
        }
    }
}

/// Loads (and recoveries) a mount makes when a read may have failed transiently (see
/// `mount_inner`).
const MOUNT_ATTEMPTS: u32 = 3;

/// Serial-number comparison of 32-bit sequence numbers.
pub(crate) fn seq_cmp(a: u32, b: u32) -> core::cmp::Ordering {
    (a.wrapping_sub(b) as i32).cmp(&0)
}

fn newer(a: u32, b: u32) -> u32 {
    if seq_cmp(a, b).is_lt() {
        b
    } else {
        a
    }
}

fn find_superblock<F: NandFlash>(flash: &mut F) -> Result<Superblock, MountError<F::Error>> {
    let geo = flash.geometry();
    let mut seen: Option<MountError<F::Error>> = None;
    let mut buf = [0u8; SB_LEN];
    for b in (0..SB_SEARCH.min(geo.blocks())).map(BlockAddr) {
        if flash.is_bad(b).map_err(MountError::Flash)? {
            continue;
        }
        if geo.page_size() < SB_LEN as u32 {
            return Err(MountError::Mismatch(Mismatch::Geometry));
        }
        // A read error may be transient (on a part without ECC it shows as a CRC
        // mismatch): retry before giving the copy up.
        let mut outcome = Err(SbParseError::Corrupted);
        for _ in 0..=crate::io::READ_RETRIES {
            match flash.read(geo.page(b, 0), 0, &mut buf, &mut []) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Uncorrectable => continue,
                Err(e) => return Err(MountError::Flash(e)),
            }
            outcome = Superblock::parse(&buf);
            if !matches!(outcome, Err(SbParseError::Corrupted)) {
                break;
            }
        }
        match outcome {
            Ok(Some(sb)) => return Ok(sb),
            Ok(None) => {}
            Err(SbParseError::Version) => seen = Some(MountError::Mismatch(Mismatch::Version)),
            Err(SbParseError::Corrupted) => {
                seen.get_or_insert(MountError::Corrupted);
            }
        }
    }
    Err(seen.unwrap_or(MountError::NotFormatted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::cmp::Ordering;

    #[test]
    fn sequence_numbers_compare_across_the_wrap() {
        assert_eq!(seq_cmp(5, 3), Ordering::Greater);
        assert_eq!(seq_cmp(3, 3), Ordering::Equal);
        assert_eq!(seq_cmp(2, u32::MAX - 1), Ordering::Greater);
        assert_eq!(seq_cmp(u32::MAX, 0), Ordering::Less);
        assert_eq!(newer(u32::MAX, 1), 1);
        assert_eq!(newer(7, 6), 7);
    }

    /// Ties between checkpoints with one number go by the rotation of the checkpoint
    /// blocks (SPEC 3.8 rule 9).
    #[test]
    fn checkpoint_ties_go_by_rotation() {
        let c = |seq, cur, first| Candidate {
            seq,
            cur,
            first,
            pages: 1,
        };
        assert_eq!(cand_cmp(&c(9, 0, 0), &c(8, 3, 0), 4), Ordering::Greater);
        assert_eq!(cand_cmp(&c(8, 1, 0), &c(8, 0, 5), 4), Ordering::Greater);
        assert_eq!(cand_cmp(&c(8, 0, 0), &c(8, 3, 0), 4), Ordering::Greater);
        assert_eq!(cand_cmp(&c(8, 2, 4), &c(8, 2, 1), 4), Ordering::Greater);
        assert_eq!(cand_cmp(&c(8, 2, 1), &c(8, 3, 0), 4), Ordering::Less);
    }
}
