//! Checkpoints: persisting the lazy state and moving the updating window on.
//!
//! A checkpoint (1) writes every dirty index page, (2) settles block states (window and
//! full blocks without valid pages become free, retired ones bad), (3) picks the next
//! window: the data head's block if it has room, the old window's unused blocks, then
//! least-worn free blocks, (4) streams header, heads, window, block table and object
//! table into the next pages of the current checkpoint block (switching to the other,
//! freshly erased one when it is full or after an unclean mount), and only then (5)
//! marks retired blocks bad. Until the commit page is on flash the previous checkpoint
//! stays authoritative and no block it references has been erased.
//!
//! Markers: every non-clean checkpoint is read back and followed by a marker page (its
//! number) before its window is used; after a clean checkpoint (unmount or format) the
//! first change writes a fresh non-clean checkpoint (and so its marker), so the next
//! mount knows it must scan the window. Clean mounts therefore read only the checkpoint
//! blocks' spare areas and the checkpoint itself.

use nand_hal::{BlockAddr, Error, ErrorKind, NandFlash, PageAddr};

use crate::blocks::Settled;
use crate::errors::Fault;
use crate::format::backpointer::{Backpointer, PageKind, MAX_U24};
use crate::format::checkpoint::{
    BlockState, BstEntry, CkptHeader, HeadRecord, HEADS, NO_SUCCESSOR,
};
use crate::format::superblock::CRC32;
use crate::io::FaultOf;
use crate::log::LOG_HEAD;
use crate::policy::SpacePolicy;
use crate::{Oftl, DATA_HEAD};

struct Sink {
    block: BlockAddr,
    first: u32,
    idx: u32,
    total: u32,
    pos: usize,
    seq: u32,
    digest: crc::Digest<'static, u32>,
}

/// No checkpoint block (the successor fields of [`CkptPos`]).
const NO_BLOCK: u8 = 0xFF;

/// Good checkpoint blocks at most for the last resort to append failed attempts in the
/// successor the durable checkpoint names (and for a mount not to take two unreadable
/// pages in a row there for a lost checkpoint, `mount::check_successor`): a store
/// this short of checkpoint blocks stays writable only so (review s45b's
/// `failed_here` cases keep one block of four bad).
pub(crate) const SHORT_OF_CKPT_BLOCKS: usize = 3;

/// More attempts a checkpoint gets after one fails to program or to read back.
const CKPT_ATTEMPTS: u32 = 3;

/// The numbers one checkpoint call may take (one per attempt): a page a mount cannot
/// read may be the last of that many attempts, the others leaving no trace.
pub(crate) const CKPT_NUMBERS: u32 = CKPT_ATTEMPTS + 1;

/// Reads of each page of a loaded, unmarked checkpoint's block that must agree, with
/// nothing corrected, before its spare is given up (see `release_spare`).
const STABLE_READS: u32 = 8;

/// Whether `e` is a read that failed for good (the retries used up): a checkpoint
/// page that does not read back is written again elsewhere, like one that reads back
/// wrong.
fn unreadable<E: Error>(e: &Fault<E>) -> bool {
    matches!(e, Fault::Flash(e) if e.kind() == ErrorKind::Uncorrectable)
}

/// Where checkpoints go next. Its fields are this module's; mount, recovery and the
/// rebuild set it through the events below.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CkptPos {
    seq: u32,
    /// The checkpoint block in use (0 or 1 of the superblock's pair... see `ckpt_blocks`).
    cur: usize,
    next_page: u32,
    /// The next checkpoint goes to a freshly erased block.
    switch: bool,
    /// Check that the next checkpoint page is really erased before programming it.
    verify: bool,
    /// The checkpoint block holding the newest checkpoint a mount would load (never
    /// erased for the next one).
    durable: Option<u8>,
    /// After a mount that loaded a checkpoint without a marker (its program may have
    /// been torn by the cut and read well only this once): the block of the checkpoint
    /// before it, kept too until this session commits one.
    spare: Option<u8>,
    /// The mount went back past a checkpoint (or pages) it could not load: recovery
    /// first commits the loaded state again (see `checkpoint::restate_checkpoint`).
    fell_back: bool,
    /// Every page of the current block this session did not program is known to be
    /// erased (it erased the block, or formatted); not so for the block a mount found
    /// (a torn page may read as erased).
    frontier_known: bool,
    /// First page of the last checkpoint written (or attempted) in the current block.
    attempt_first: u32,
    /// A checkpoint of this session landed in the current block (its pages read).
    good_here: bool,
    /// Flash holds a clean checkpoint and nothing changed since: the first change
    /// writes a fresh checkpoint and its marker first (see `write_marker`).
    needs_marker: bool,
    /// Checkpoint blocks (by index) that did not read back what this session just
    /// wrote to them: not used again until the next mount.
    avoid: u16,
    /// Checkpoint blocks (by index) where the mount found pages it could not read above
    /// the newest it could: erased before this session's first checkpoint attempt
    /// (see `purge_stale_blocks`).
    stale: u16,
    /// The loaded checkpoint's and the spare's blocks among those: erased once this
    /// session's first marked checkpoint is durable in another block.
    stale_kept: u16,
    /// The successor the checkpoints this session writes to the current block name
    /// (format 8): the checkpoint block erased for the ones after them
    /// ([`NO_BLOCK`]: none).
    succ: u8,
    /// This session erased `succ` and wrote nothing to it since.
    succ_ready: bool,
    /// Checkpoint blocks (by index) holding attempts of the checkpoint call under way
    /// that failed: not erased for a successor before the call ends (a cut erase could
    /// leave a landed attempt's number unreadable, and a later session would write
    /// it again).
    tried: u16,
    /// The successor the durable checkpoint names: never erased while that checkpoint
    /// is the newest a mount would load (were a cut to tear the erase, its mount would
    /// find the block unreadable and refuse, see `mount::check_successor`).
    protect: u8,
}

impl CkptPos {
    pub const START: CkptPos = CkptPos {
        seq: 0,
        cur: 0,
        next_page: 0,
        switch: false,
        verify: false,
        durable: None,
        spare: None,
        fell_back: false,
        frontier_known: false,
        attempt_first: 0,
        good_here: false,
        needs_marker: false,
        avoid: 0,
        stale: 0,
        stale_kept: 0,
        succ: NO_BLOCK,
        succ_ready: false,
        tried: 0,
        protect: NO_BLOCK,
    };

    /// Flash holds a clean checkpoint of the current state (a clean mount, or one
    /// written at unmount).
    pub fn clean_on_flash(&mut self) {
        self.needs_marker = true;
    }

    /// The first change after a clean checkpoint is under way.
    fn changed_since_clean(&mut self) {
        self.needs_marker = false;
    }

    /// Whether the next change must write a marker first (nothing changed since a
    /// clean checkpoint).
    pub fn needs_marker(&self) -> bool {
        self.needs_marker
    }

    /// Format: the first checkpoint goes to the first checkpoint block, erased, and is
    /// numbered `first_seq`; with `successors` (format 8) it names the second, erased
    /// too.
    pub fn formatted(&mut self, first_seq: u32, successors: bool) {
        self.seq = first_seq.wrapping_sub(1);
        self.cur = 0;
        self.next_page = 0;
        self.frontier_known = true;
        self.succ = if successors { 1 } else { NO_BLOCK };
        self.succ_ready = successors;
        self.protect = NO_BLOCK;
    }

    /// A mount loaded checkpoint block `cur`'s newest checkpoint: the next one is
    /// numbered `seq` and goes to page `next_page` there, or to the other block when
    /// `switch`; `spare` is an older block kept loadable, `fell_back` says the mount
    /// went back past something it could not load; `stale` are the blocks holding
    /// pages it could not read above the newest it could; `successor` is the block
    /// the loaded checkpoint names (kept unerased until a newer one is durable).
    #[allow(clippy::too_many_arguments)]
    pub fn loaded(
        &mut self,
        seq: u32,
        cur: usize,
        next_page: u32,
        spare: Option<usize>,
        fell_back: bool,
        switch: bool,
        stale: u16,
        successor: Option<usize>,
    ) {
        let successor = successor.filter(|&s| s != cur && Some(s) != spare && s < 16);
        self.protect = successor.map_or(NO_BLOCK, |s| s as u8);
        self.succ = self.protect;
        self.succ_ready = false;
        let keep = (1u16 << cur) | spare.map_or(0, |s| 1 << s);
        self.stale = stale & !keep;
        self.stale_kept = stale & keep;
        self.seq = seq;
        self.cur = cur;
        self.durable = Some(cur as u8);
        self.spare = spare.map(|s| s as u8);
        self.fell_back = fell_back;
        self.next_page = next_page;
        self.verify = true;
        self.switch |= switch;
    }

    /// A rebuild: checkpoints are numbered from `seq` on, in a freshly erased block;
    /// none on flash is trusted.
    #[cfg(feature = "alloc")]
    pub fn rebuilt(&mut self, seq: u32) {
        self.seq = seq;
        self.stale = 0;
        // Its pages did not count: every other checkpoint block goes once its first
        // checkpoint is durable (they may hold pages that do not read).
        self.stale_kept = u16::MAX;
        self.cur = 0;
        self.next_page = 0;
        self.switch = true;
        self.verify = true;
        self.durable = None;
        self.spare = None;
        self.frontier_known = false;
        self.succ = NO_BLOCK;
        self.succ_ready = false;
        self.protect = NO_BLOCK;
    }

    /// The mount went back past a checkpoint (or pages) it could not load.
    pub fn fell_back(&self) -> bool {
        self.fell_back
    }

    /// The next checkpoint goes to a freshly erased block (after a recovery).
    pub fn switch_block(&mut self) {
        self.switch = true;
    }
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
    /// Writes a checkpoint. `clean` marks it as written by unmount.
    ///
    /// Where the checkpoint goes is settled first (a fresh checkpoint block is erased if
    /// needed), before any in-RAM state changes: if no checkpoint block is left, nothing
    /// changed and the store turns read-only ([`Fault::ReadOnly`]). Once the block
    /// states are settled for the next window, a failure poisons the handle (RAM is
    /// then ahead of flash).
    #[inline(never)]
    pub(crate) fn checkpoint(&mut self, clean: bool) -> Result<(), FaultOf<F>> {
        if self.session.read_only().is_some() {
            return Err(Fault::ReadOnly);
        }
        // The checkpoint records the log head past its last page: recovery would not
        // scan further partial programs of it.
        self.log_tail.close();
        let most = self.largest_checkpoint();
        self.place_checkpoint(most)?;
        self.flush_index()?;
        self.dev.seal_watermark();
        self.settle_window();
        // Block states are settled for a window no checkpoint records yet: from here a
        // failure leaves RAM ahead of flash. Running out of checkpoint blocks only
        // turns the store read-only (reads are served from RAM, nothing more is
        // written); anything else poisons the handle.
        match self.commit_checkpoint(clean, !clean, most) {
            Ok(()) => {}
            Err(Fault::ReadOnly) => return Err(Fault::ReadOnly),
            Err(e) => {
                self.session.poison();
                return Err(e);
            }
        }
        self.dev.stats_mut().checkpoints += 1;
        self.dev.checkpointed();
        self.gc.checkpointed();
        self.ids.checkpointed();
        if clean {
            self.ckpt.clean_on_flash();
        } else {
            self.ckpt.changed_since_clean();
        }
        for b in (0..self.dev.geo().blocks()).map(BlockAddr) {
            let bi = self.dev.table().get(b);
            if bi.state() == BlockState::Bad && bi.retire() {
                self.dev.retire_now(b)?;
            }
        }
        // Checkpoint blocks may have gone bad on the way.
        self.check_health();
        Ok(())
    }

    /// Pages the largest checkpoint takes, and the marker after it.
    pub(crate) fn largest_checkpoint(&self) -> u32 {
        CkptHeader::stream_len(self.dev.geo().blocks(), crate::MAX_WINDOW as u16)
            .div_ceil(self.dev.payload())
            + 1
    }

    /// Writes the checkpoint of the state in RAM (its place settled), reads it back and,
    /// with `mark` (its window is about to be used), programs its marker; one that fails
    /// to program, to read back or to take its marker is written again (up to
    /// [`CKPT_ATTEMPTS`] more times), under the next number (a number is never used
    /// twice), in another checkpoint block. Then the
    /// block it landed in holds the newest checkpoint a mount would load.
    fn commit_checkpoint(&mut self, clean: bool, mark: bool, most: u32) -> Result<(), FaultOf<F>> {
        let mut attempt = 0;
        loop {
            let r = self
                .write_checkpoint(clean)
                .and_then(|(first, total, seq)| self.verify_checkpoint(first, total, seq))
                .and_then(|()| {
                    if mark {
                        self.mark_checkpoint_used()
                    } else {
                        Ok(())
                    }
                });
            let again = match &r {
                Ok(()) => {
                    self.ckpt.durable = Some(self.ckpt.cur as u8);
                    self.ckpt.spare = None;
                    self.ckpt.good_here = true;
                    self.ckpt.protect = self.ckpt.succ;
                    self.ckpt.tried = 0;
                    if mark && self.ckpt.stale_kept != 0 {
                        // The blocks the mount kept as fallbacks are no longer needed:
                        // their unreadable pages go now (see `purge_stale_blocks`;
                        // never the successor this checkpoint names).
                        let n = self.dev.sb().ckpt_blocks().len() as u32;
                        let all = (1u32 << n).wrapping_sub(1) as u16;
                        self.ckpt.stale |= self.ckpt.stale_kept & all & !(1 << self.ckpt.cur);
                        self.ckpt.stale_kept = 0;
                        self.purge_stale_blocks()?;
                    }
                    return Ok(());
                }
                // It does not read back. A block this attempt erased for it (neither
                // the durable checkpoint's nor the spare's) is not used again this
                // session: an independent review found two checkpoint blocks with a
                // dead page 0 failing every mount of an intact store with `Corrupted`
                // (the attempts kept going back to them); with no block left the store
                // now turns read-only instead. Not retired for good: a second review
                // found a run of transient read errors during the read-back then
                // retiring good blocks until the volume never mounted again.
                // (A read error is reported as one when the attempts run out: a long
                // run of transient read errors during the read-backs made `gc_step`
                // report `Corrupted` flash, stop 34.)
                Err(e) if matches!(e, Fault::Corrupted) || unreadable(e) => {
                    let cur = self.ckpt.cur;
                    if self.ckpt.durable != Some(cur as u8) && self.ckpt.spare != Some(cur as u8) {
                        self.ckpt.avoid |= 1 << cur;
                    }
                    true
                }
                Err(Fault::Flash(e)) => {
                    nand_hal::Error::kind(e) == nand_hal::ErrorKind::ProgramFailed
                }
                Err(_) => false,
            };
            if !again {
                self.ckpt.tried = 0;
                return r;
            }
            self.ckpt.tried |= 1 << self.ckpt.cur;
            if attempt >= CKPT_ATTEMPTS {
                // Every attempt failed to program or to read back: a worn part. The
                // durable checkpoint and the window still hold what RAM holds, so the
                // store keeps serving reads instead of failing (a worn volume's mount,
                // whose sync needs a checkpoint, failed for good: wear-out seed 7114).
                self.go_read_only(crate::ReadOnlyReason::CheckpointBlocks);
                return Err(Fault::ReadOnly);
            }
            attempt += 1;
            self.ckpt.switch = true;
            self.place_checkpoint(most)?;
        }
    }

    /// After a mount that went back past a checkpoint it could not load (or past
    /// pages it could not read, which might be one): commits the loaded state again
    /// under a number above everything on flash, before recovery writes anything. The
    /// skipped checkpoint's own index pages lie in blocks the loaded one calls free,
    /// which recovery reuses; were the skipped one to read well at a later mount (an
    /// unstable torn page), that mount would take it for the newest and find its index
    /// overwritten. Now it can never be taken again.
    ///
    /// It is marked like any checkpoint whose window is used (recovery writes into
    /// it): unmarked, a later mount that could not read it fell back past it, to the
    /// skipped checkpoint when that one read again, and found its index pages
    /// overwritten by this recovery (`Corrupted` reads; an independent review, stop 45).
    #[inline(never)]
    pub(crate) fn restate_checkpoint(&mut self) -> Result<(), FaultOf<F>> {
        let most = self.largest_checkpoint();
        self.place_checkpoint(most)?;
        self.commit_checkpoint(false, true, most)?;
        self.dev.stats_mut().checkpoints += 1;
        Ok(())
    }

    /// Makes sure the next `pages` checkpoint pages can go to the current checkpoint
    /// block from `ckpt.next_page` on: otherwise (full, unclean mount, the next page not
    /// reliably erased, a failed attempt) moves to the next usable checkpoint block,
    /// erasing it. When no other block is usable it appends after what the current
    /// block holds if this session erased that block (so it knows which pages were
    /// programmed: a torn page can read as erased) and holds only its failed attempts,
    /// it has room and the next page reads erased (no erase: the newest checkpoint
    /// stays). Not after a checkpoint that landed there: two failed attempts that do
    /// not read above it would look to a later mount like a newer checkpoint and its
    /// marker, both lost (`mount::check_lost_markers`, stop 45); a block of failed
    /// attempts only, with nothing readable, is taken for older. In the successor the
    /// durable checkpoint names only on a store with [`SHORT_OF_CKPT_BLOCKS`] good
    /// checkpoint blocks or fewer
    /// (`mount::check_successor` takes two unreadable pages in a row there for a lost
    /// checkpoint). Failing that it gives up the
    /// spare of an unmarked checkpoint that reads stable (`release_spare`), and
    /// failing that too the store turns read-only ([`Fault::ReadOnly`],
    /// [`crate::ReadOnlyReason::CheckpointBlocks`]), nothing changed on flash.
    fn place_checkpoint(&mut self, pages: u32) -> Result<(), FaultOf<F>> {
        self.purge_stale_blocks()?;
        let ppb = self.dev.ppb();
        if self.ckpt.verify && !self.ckpt.switch {
            self.ckpt.verify = false;
            if self.ckpt.next_page < ppb
                && !self.page_erased(self.ckpt_page(self.ckpt.next_page))?
            {
                self.ckpt.switch = true;
            }
        }
        let room = self.ckpt.next_page + pages.min(ppb) <= ppb;
        if (self.ckpt.switch || !room) && !self.switch_ckpt_block()? {
            let cur = self.dev.sb().ckpt_blocks()[self.ckpt.cur];
            // In the successor the durable checkpoint names only on a store short of
            // checkpoint blocks: two unreadable pages in a row there look to a mount
            // like a lost checkpoint and its marker (`mount::check_successor`; review
            // s45b's random runs, seed 36, and review s43c's sweeps refused every mount
            // after two failed programs in a row; a failed program can read well at
            // once and not later), and such a store stays writable only so.
            let usable = room
                && (self.ckpt.cur != self.ckpt.protect as usize
                    || self.good_ckpt_blocks() <= SHORT_OF_CKPT_BLOCKS)
                && self.ckpt.avoid & (1 << self.ckpt.cur) == 0
                && self.ckpt.frontier_known
                && !self.ckpt.good_here
                && self.dev.table().get(cur).state() != BlockState::Bad
                && self.page_erased(self.ckpt_page(self.ckpt.next_page))?
                && self.failed_pages_read_used()?;
            if !usable {
                // The last resort before turning read-only for good.
                if self.release_spare()? && self.switch_ckpt_block()? {
                    return Ok(());
                }
                self.go_read_only(crate::ReadOnlyReason::CheckpointBlocks);
                return Err(Fault::ReadOnly);
            }
            self.ckpt.switch = false;
        }
        Ok(())
    }

    /// Erases the checkpoint blocks where the mount found pages it could not read above
    /// the newest it could (`ckpt.stale`; the loaded checkpoint's and the spare's only
    /// once a marked checkpoint of this session is durable in another block).
    /// Such a page may be an attempt a failed session wrote (programs that reported
    /// failure but landed, or that did not read back) under a number this session's
    /// mount could only bound: were it to read well at a later mount, it could pass
    /// for a checkpoint newer than this session's (an independent review, stop 44:
    /// three attempts leaving no trace and a fourth landing unreadable let a later
    /// session write the fourth's number again, and a mount that read the old page
    /// loaded it, rolling acknowledged writes back). Erased before anything else is
    /// written, every page a mount could not read is either gone or in a block this
    /// session never writes, whose numbers the mount's count bounds. The loaded and
    /// spare blocks' go after the first marked commit: two unreadable pages there look
    /// like a lost checkpoint and marker to later mounts, which refuse with
    /// `MediaLoss` a block whose age they cannot tell (`mount::check_lost_markers`).
    fn purge_stale_blocks(&mut self) -> Result<(), FaultOf<F>> {
        while self.ckpt.stale != 0 {
            let i = self.ckpt.stale.trailing_zeros() as usize;
            let b = self.dev.sb().ckpt_blocks()[i];
            // The successor this session erased is erased already.
            let own = i == self.ckpt.succ as usize && self.ckpt.succ_ready;
            if !own && i != self.ckpt.cur && self.dev.table().get(b).state() != BlockState::Bad {
                match self.dev.flash_mut().erase(b) {
                    Ok(()) => {
                        self.dev.table_mut().erased(b);
                        if i == self.ckpt.succ as usize {
                            self.ckpt.succ_ready = true;
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::EraseFailed => self.dev.retire_now(b)?,
                    Err(e) => return Err(Fault::Flash(e)),
                }
            }
            self.ckpt.stale &= !(1 << i);
        }
        Ok(())
    }

    /// With no other checkpoint block left to erase, gives up the spare (the block of
    /// the checkpoint before an unmarked one the mount loaded) if the loaded one reads
    /// stable: every page its block holds reads [`STABLE_READS`] times alike, with
    /// nothing corrected. A torn program that read well once reads otherwise within a
    /// few reads (its marginal cells draw a new outcome each time). Keeping the spare
    /// then left no block to write a checkpoint to: on a part with 4 checkpoint blocks,
    /// two gone bad and the other two an unmarked checkpoint and its spare, the volume
    /// mounted read-only for good (an independent review, stop 36). What is risked
    /// instead: a cut between the spare's erase and the next commit, on a loaded
    /// checkpoint that read stable that many times and fails at the next mount.
    fn release_spare(&mut self) -> Result<bool, FaultOf<F>> {
        if self.ckpt.spare.is_none() || self.ckpt.durable != Some(self.ckpt.cur as u8) {
            return Ok(false);
        }
        let payload = self.dev.payload() as usize;
        let pages = self.ckpt.next_page.min(self.dev.ppb());
        let mut stable = pages > 0;
        'pages: for i in 0..pages {
            let page = self.ckpt_page(i);
            let mut first = None;
            for _ in 0..STABLE_READS {
                let buf = &mut self.scratch.page_mut()[..payload];
                let clean = matches!(self.dev.flash_mut().read(page, 0, buf, &mut []), Ok(r) if r.is_clean());
                let sum = CRC32.checksum(buf);
                if !clean || *first.get_or_insert(sum) != sum {
                    stable = false;
                    break 'pages;
                }
            }
        }
        self.scratch.page_mut().fill(0xFF);
        if stable {
            self.ckpt.spare = None;
        }
        Ok(stable)
    }

    /// Whether every page of the last, failed attempt reads as used to a mount's
    /// search (which takes the first page that reads erased for the end of the
    /// block's checkpoints): only then may a checkpoint follow them in the block.
    fn failed_pages_read_used(&mut self) -> Result<bool, FaultOf<F>> {
        for i in self.ckpt.attempt_first..self.ckpt.next_page {
            if self.dev.scan_read(self.ckpt_page(i))? == crate::io::Scan::Erased {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Checkpoint blocks not gone bad.
    fn good_ckpt_blocks(&self) -> usize {
        let sb = self.dev.sb();
        sb.ckpt_blocks()
            .iter()
            .filter(|&&b| self.dev.table().get(b).state() != BlockState::Bad)
            .count()
    }

    /// Settles block states and picks the next window.
    fn settle_window(&mut self) {
        let ppb = self.dev.ppb();
        let carried = self.dev.heads_mut().leave_full_blocks(ppb);
        let (unused, erased) = self.dev.table_mut().restart_window();
        for b in (0..self.dev.geo().blocks()).map(BlockAddr) {
            if carried.contains(&Some(b)) || unused.contains(&b) {
                continue;
            }
            if matches!(
                self.dev.table_mut().settle(b),
                Settled::Freed | Settled::Retired
            ) {
                // Nothing left to collect in it; it is free from now on.
                self.gc.block_freed(b);
            }
        }
        // The cold head's carried block comes on top of the window target: GC copies
        // must not shrink the room a fresh window guarantees to the data head.
        // `min_window_blocks` promises an operation of the data or the log head, a
        // whole victim and the program-failure reserve in a fresh window, counting on
        // the head to carry at least one page of its block: when either head carries
        // none, the fresh blocks must make that up alone (an independent review found
        // stores at the smallest window, with the data and the log head carried,
        // refusing every write with `NoSpace` at under half their capacity, for good).
        // So at the smallest window the window may be a block or two longer than
        // configured; the pool's floors count a window of `min_window_blocks` fresh
        // blocks, which this never exceeds.
        let both_carried = carried[DATA_HEAD].is_some() && carried[LOG_HEAD].is_some();
        let fresh_floor =
            (Self::min_window_blocks(ppb) as usize).saturating_sub(usize::from(both_carried));
        let want = (self.window_target as usize)
            .saturating_sub(
                carried[..crate::gc::COLD_HEAD]
                    .iter()
                    .filter(|c| c.is_some())
                    .count(),
            )
            .max(fresh_floor.min(self.window_target as usize));
        for (i, b) in unused.into_iter().enumerate() {
            if self.dev.table().window().len() >= want
                || self.dev.table().get(b).retire()
                || !self.dev.table_mut().keep_in_window(b)
            {
                self.dev.table_mut().leave_window(b);
            } else if i < erased {
                self.dev.table_mut().kept_erased(b);
            }
        }
        // Leave as many free blocks as the window is long, plus the extra, for a
        // recovery after a crash in this window (see `recovery_extra_blocks`): carried
        // blocks go back first if the reserve is short (recovery, for one, grows its
        // window from the free blocks).
        let extra = self.recovery_extra_blocks() as usize;
        let mut free = self.free_blocks() as usize;
        while free < self.dev.table().window().len() + extra {
            if self.dev.table_mut().release_last().is_none() {
                break;
            }
            free += 1;
        }
        while self.dev.table().window().len() < want
            && free > self.dev.table().window().len() + 1 + extra
        {
            free -= 1;
            let (table, policy) = self.dev.table_and_policy();
            let Some(b) = table.pick_free(policy) else {
                break;
            };
            if self.dev.may_join_window(b) {
                self.dev.table_mut().admit(b);
            }
        }
    }

    /// Reads back the `total` pages of checkpoint `seq` written from page `first` of the
    /// current checkpoint block; `Corrupted` if one reads back as something else, the
    /// uncorrectable read error if one does not read (see [`unreadable`]).
    fn verify_checkpoint(&mut self, first: u32, total: u32, seq: u32) -> Result<(), FaultOf<F>> {
        let payload = self.dev.payload() as usize;
        for i in 0..total {
            let page = self.ckpt_page(first + i);
            self.dev.read_payload(
                page,
                0,
                &mut self.scratch.page_mut()[..payload],
                Some((PageKind::Checkpoint, seq & MAX_U24, i)),
            )?;
        }
        self.scratch.page_mut().fill(0xFF);
        Ok(())
    }

    /// Programs the marker of the checkpoint just written (its sequence number, in the
    /// next page of its block): from now on that checkpoint's window may hold data, so
    /// a mount must never fall back past it (see `mount::load_newest_checkpoint`).
    ///
    /// A marker that fails to program fails the attempt (`ProgramFailed`): the
    /// checkpoint is written again, under the next number, in a fresh block. Using the
    /// window of a checkpoint without a marker broke the mount's rule that falling
    /// back past an unmarked checkpoint is safe: with that checkpoint unreadable at a
    /// later mount, acknowledged writes rolled back (an independent review, stop 45).
    fn mark_checkpoint_used(&mut self) -> Result<(), FaultOf<F>> {
        if self.ckpt.next_page >= self.dev.ppb() {
            // `place_checkpoint` leaves room for it: never reached.
            return Err(Fault::Internal);
        }
        let page = self.ckpt_page(self.ckpt.next_page);
        self.ckpt.next_page += 1;
        let bp = Backpointer {
            seq: self.ckpt.seq,
            ..Backpointer::single(PageKind::Marker, 0, 0, 0)
        };
        self.scratch.page_mut().fill(0xFF);
        self.dev
            .program_at(page, self.scratch.page_mut(), &bp, true)
            .map_err(Fault::Flash)
    }

    /// Writes the checkpoint stream; returns its first page, page count and sequence.
    fn write_checkpoint(&mut self, clean: bool) -> Result<(u32, u32, u32), FaultOf<F>> {
        let payload = self.dev.payload() as usize;
        let ppb = self.dev.ppb();
        let n_blocks = self.dev.geo().blocks();
        let hdr = CkptHeader {
            clean,
            seq: self.ckpt.seq.wrapping_add(1),
            total_len: CkptHeader::stream_len(n_blocks, self.dev.table().window().len() as u16),
            n_blocks,
            n_objects: self.ids.live(),
            next_obj_id: self.ids.top(),
            obj_cursor: self.ids.next(),
            window_len: self.dev.table().window().len() as u16,
            table_root: self.cache.table_root().0,
            successor: self.dev.sb().successors.then_some(match self.ckpt.succ {
                NO_BLOCK => NO_SUCCESSOR,
                i => i as u16,
            }),
        };
        let total = hdr.total_len.div_ceil(payload as u32);
        if total > ppb {
            return Err(Fault::TooLarge);
        }
        if self.ckpt.next_page + total > ppb {
            // `place_checkpoint` reserved room for the largest checkpoint.
            return Err(Fault::Exhausted);
        }
        // The number and the pages are used from the first program on, whatever
        // happens to it: a retry takes the next number and the pages after these.
        let first = self.ckpt.next_page;
        self.ckpt.attempt_first = first;
        self.ckpt.next_page += total;
        self.ckpt.seq = hdr.seq;
        let mut sink = Sink {
            block: self.dev.sb().ckpt_blocks()[self.ckpt.cur],
            first,
            idx: 0,
            total,
            pos: 0,
            seq: hdr.seq,
            digest: CRC32.digest(),
        };
        self.scratch.page_mut().fill(0xFF);
        self.put(&mut sink, &hdr.encode())?;
        for h in 0..HEADS {
            let r: HeadRecord = self.dev.heads().get(h).record();
            self.put(&mut sink, &r.encode())?;
        }
        for i in 0..self.dev.table().window().len() {
            let b = self.dev.table().window()[i];
            self.put(&mut sink, &b.0.to_le_bytes())?;
        }
        for b in (0..n_blocks).map(BlockAddr) {
            let bi = self.dev.table().get(b);
            let e = BstEntry {
                state: bi.state(),
                valid: bi.valid(),
                erases: bi.erases(),
            };
            self.put(&mut sink, &e.pack().to_le_bytes())?;
        }
        let crc = sink.digest.clone().finalize();
        self.put(&mut sink, &crc.to_le_bytes())?;
        if sink.pos > 0 {
            self.emit(&mut sink)?;
        }
        debug_assert_eq!(sink.idx, total);
        Ok((first, total, hdr.seq))
    }

    /// Moves checkpointing to the next usable checkpoint block; blocks whose erase
    /// fails are retired. Never the block holding the newest checkpoint a mount would
    /// load (`ckpt.durable`): until the next commit page is on flash that one stays
    /// authoritative; nor, after a mount that loaded an unmarked checkpoint, the block
    /// of the one before it (`ckpt.spare`). `false` if there is no such block (nothing
    /// changed).
    ///
    /// Format 8: the checkpoints go on in the successor the current ones name when it
    /// is still erased (this session erased it, or its first pages read erased): it is
    /// not erased again while a checkpoint naming it is the newest (a cut erase would
    /// leave it unreadable to a mount that loads that checkpoint, see
    /// `mount::check_successor`; its pages a mount could not read are the exception,
    /// see `purge_stale_blocks`). Otherwise to the next block in rotation but that
    /// successor, erased. Then the next successor is erased (`pick_successor`).
    fn switch_ckpt_block(&mut self) -> Result<bool, FaultOf<F>> {
        let n = self.dev.sb().ckpt_blocks().len();
        let mut to = None;
        let s = self.ckpt.succ as usize;
        if s < n
            && self.ckpt_block_usable(s)?
            && (self.ckpt.succ_ready || self.ckpt_block_blank(s, self.largest_checkpoint())?)
        {
            // Erased by this session, or erased before the checkpoint naming it and
            // nothing written since (its first pages read erased): every page past
            // this session's programs is erased, as after an erase.
            to = Some(s);
        }
        // The successor the durable checkpoint names only when no other block is left
        // (a store short of checkpoint blocks keeps writing).
        'find: for last in [false, true] {
            for step in 1..n {
                if to.is_some() {
                    break 'find;
                }
                let i = (self.ckpt.cur + step) % n;
                if (i == self.ckpt.protect as usize) != last || !self.ckpt_block_usable(i)? {
                    continue;
                }
                if self.erase_ckpt_block(i)? {
                    to = Some(i);
                }
            }
        }
        let Some(i) = to else {
            return Ok(false);
        };
        self.ckpt.cur = i;
        self.ckpt.next_page = 0;
        self.ckpt.good_here = false;
        self.ckpt.switch = false;
        self.ckpt.frontier_known = true;
        self.pick_successor()?;
        Ok(true)
    }

    /// Erases a successor for the checkpoints the current block will hold (format 8):
    /// the next usable block in rotation but the one the durable checkpoint names;
    /// none (they name none) when no block is left.
    fn pick_successor(&mut self) -> Result<(), FaultOf<F>> {
        self.ckpt.succ = NO_BLOCK;
        self.ckpt.succ_ready = false;
        if !self.dev.sb().successors {
            return Ok(());
        }
        let n = self.dev.sb().ckpt_blocks().len();
        // A block that did not read back this session, and the successor the durable
        // checkpoint names, come last: erased, they may still serve (were none named,
        // a mount could not tell this block's checkpoints lost whole), and a switch
        // does not take the first. A block holding this call's failed attempts is
        // never erased (a cut erase could leave a landed attempt's number unreadable
        // to the next mount, which would write it again): it serves, unerased, only
        // when every page reads erased (nothing landed).
        let avoid = self.ckpt.avoid;
        for pass in 0..2 {
            for step in 1..n {
                let i = (self.ckpt.cur + step) % n;
                let tried = self.ckpt.tried & (1 << i) != 0;
                let late = tried || avoid & (1 << i) != 0 || i == self.ckpt.protect as usize;
                if late != (pass == 1) {
                    continue;
                }
                self.ckpt.avoid &= !(1 << i);
                let usable = self.ckpt_block_usable(i)?;
                self.ckpt.avoid = avoid;
                let erased = if !usable {
                    false
                } else if tried {
                    self.ckpt_block_blank(i, self.dev.ppb())?
                } else {
                    self.erase_ckpt_block(i)?
                };
                if erased {
                    self.ckpt.succ = i as u8;
                    self.ckpt.succ_ready = true;
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Whether checkpoint block `i` may be erased or written for a checkpoint: not the
    /// durable checkpoint's, the spare's, one that did not read back this session, or
    /// one gone bad.
    fn ckpt_block_usable(&mut self, i: usize) -> Result<bool, FaultOf<F>> {
        if self.ckpt.durable == Some(i as u8)
            || self.ckpt.spare == Some(i as u8)
            || self.ckpt.avoid & (1 << i) != 0
        {
            return Ok(false);
        }
        let b = self.dev.sb().ckpt_blocks()[i];
        if self.dev.table().get(b).state() == BlockState::Bad {
            return Ok(false);
        }
        // Retired by an earlier (failed) mount after the checkpoint we loaded: a marker
        // written, not a cut erase's bits (see `mount_load`).
        Ok(!self.dev.check_written_marker(b).map_err(Fault::Flash)?)
    }

    /// Whether the first `pages` pages of checkpoint block `i` read erased (see
    /// `page_erased`): a block taken without an erase.
    fn ckpt_block_blank(&mut self, i: usize, pages: u32) -> Result<bool, FaultOf<F>> {
        let b = self.dev.sb().ckpt_blocks()[i];
        // Bits a cut erase left in the marker bytes (not a written marker: see
        // `ckpt_block_usable`) mean the block is not as an erase leaves it.
        if self.dev.flash_mut().is_bad(b).map_err(Fault::Flash)? {
            return Ok(false);
        }
        for p in 0..pages.min(self.dev.ppb()) {
            if !self.page_erased(self.dev.geo().page(b, p))? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Erases checkpoint block `i`; `false` if the erase failed (the block is retired).
    fn erase_ckpt_block(&mut self, i: usize) -> Result<bool, FaultOf<F>> {
        let b = self.dev.sb().ckpt_blocks()[i];
        match self.dev.flash_mut().erase(b) {
            Ok(()) => {
                self.dev.table_mut().erased(b);
                Ok(true)
            }
            Err(e) if e.kind() == ErrorKind::EraseFailed => {
                self.dev.retire_now(b)?;
                Ok(false)
            }
            Err(e) => Err(Fault::Flash(e)),
        }
    }

    fn put(&mut self, sink: &mut Sink, mut bytes: &[u8]) -> Result<(), FaultOf<F>> {
        sink.digest.update(bytes);
        let payload = self.dev.payload() as usize;
        while !bytes.is_empty() {
            let n = (payload - sink.pos).min(bytes.len());
            self.scratch.page_mut()[sink.pos..sink.pos + n].copy_from_slice(&bytes[..n]);
            sink.pos += n;
            bytes = &bytes[n..];
            if sink.pos == payload {
                self.emit(sink)?;
            }
        }
        Ok(())
    }

    fn emit(&mut self, sink: &mut Sink) -> Result<(), FaultOf<F>> {
        let page = self.dev.geo().page(sink.block, sink.first + sink.idx);
        let bp = Backpointer {
            kind: PageKind::Checkpoint,
            owner: sink.seq & MAX_U24,
            lpn: sink.idx,
            len: sink.pos as u16,
            seq: sink.seq,
            tx_delta: sink.idx as u16,
            commit: sink.idx + 1 == sink.total,
            relocated: false,
        };
        self.dev
            .program_at(page, self.scratch.page_mut(), &bp, false)
            .map_err(Fault::Flash)?;
        sink.idx += 1;
        sink.pos = 0;
        self.scratch.page_mut().fill(0xFF);
        Ok(())
    }

    fn ckpt_page(&self, idx: u32) -> PageAddr {
        self.dev
            .geo()
            .page(self.dev.sb().ckpt_blocks()[self.ckpt.cur], idx)
    }

    /// Whether a page reads fully erased (data and spare).
    fn page_erased(&mut self, page: PageAddr) -> Result<bool, FaultOf<F>> {
        let span = self.dev.geo().oob_size() as usize;
        let mut oob = [0u8; 256];
        let span = span.min(256);
        // Aside: the checkpoint page being streamed is in the scratch page.
        let aside = self.scratch.aside_mut()?;
        match self.dev.flash_mut().read(page, 0, aside, &mut oob[..span]) {
            // A torn program whose few landed bits ECC "corrected" reads all 0xFF too:
            // only a read that corrected nothing counts.
            Ok(rep) => {
                Ok(rep.is_clean() && aside.iter().chain(oob[..span].iter()).all(|&x| x == 0xFF))
            }
            Err(e) if nand_hal::Error::kind(&e) == nand_hal::ErrorKind::Uncorrectable => Ok(false),
            Err(e) => Err(Fault::Flash(e)),
        }
    }

    /// Before the first change after a clean mount: writes a fresh (non-clean)
    /// checkpoint of the same state, read back and followed by its marker. The clean
    /// checkpoint the store mounted from may be a torn page that read well once (a cut
    /// during the unmount): from now on nothing depends on it, and a marker only ever
    /// names a checkpoint this session wrote and read back.
    pub(crate) fn write_marker(&mut self) -> Result<(), FaultOf<F>> {
        self.ckpt.changed_since_clean();
        let r = self.checkpoint(false);
        if r.is_err() {
            self.ckpt.clean_on_flash();
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use nand_hal::sim::{profile, FaultPlan, HeapStorage, SimNand};

    use crate::format::checkpoint::HEADS;
    use crate::{BlockInfo, Config, ObjKind, Oftl};

    type Sim = SimNand<HeapStorage>;
    type Fs<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 2>;

    /// What a checkpoint records, as the store holds it in RAM.
    #[derive(Debug, PartialEq)]
    struct Recorded {
        blocks: Vec<(crate::BlockState, u16, u32)>,
        heads: [(u32, u32, u32); HEADS],
        window: Vec<u32>,
        table_root: u32,
        live_objects: u32,
        next_obj_id: u32,
        valid_total: u64,
    }

    fn recorded(fs: &Fs) -> Recorded {
        Recorded {
            blocks: fs
                .blocks()
                .iter()
                .map(|b: &BlockInfo| (b.state(), b.valid(), b.erases()))
                .collect(),
            heads: core::array::from_fn(|h| {
                let r = fs.dev.heads().get(h).record();
                (r.block, r.next_page, r.next_seq)
            }),
            window: fs.dev.table().window_unused().iter().map(|b| b.0).collect(),
            table_root: fs.cache.table_root().0,
            live_objects: fs.ids.live(),
            next_obj_id: fs.ids.next(),
            valid_total: fs.used_pages(),
        }
    }

    #[test]
    fn a_clean_checkpoint_loads_back_to_the_same_tables() {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(7));
        let cfg = Config {
            window_blocks: 8,
            format_id: 1,
            ..Default::default()
        };
        let mut fs = Fs::formatted(&mut sim, cfg).unwrap();
        // Enough overwrites for blocks to be reused, with a deleted object and a trimmed
        // log stream.
        let ids: Vec<u32> = (0..3)
            .map(|_| fs.create(ObjKind::Object).unwrap())
            .collect();
        let gone = fs.create(ObjKind::Object).unwrap();
        fs.write(gone, 0, &[1; 5000]).unwrap();
        let log = fs.create(ObjKind::Log).unwrap();
        for round in 0..1500u32 {
            let o = ids[round as usize % ids.len()];
            let lpn = (round as u64 * 7919) % 40;
            fs.write(o, lpn * 2048, &[round as u8; 2048]).unwrap();
            fs.log_append(log, &[round as u8; 40]).unwrap();
            if round == 60 {
                fs.delete(gone).unwrap();
            }
            if round % 100 == 99 {
                let (_, end) = fs.log_bounds(log).unwrap();
                fs.log_trim(log, end.saturating_sub(8)).unwrap();
            }
        }
        assert!(fs.stats().checkpoints > 3, "{:?}", fs.stats());
        assert!(
            fs.blocks().iter().any(|b| b.erases() > 2),
            "blocks were reused"
        );
        fs.unmount().unwrap();
        let before = recorded(&fs);
        drop(fs);
        let fs = Fs::mounted(&mut sim).unwrap();
        assert_eq!(fs.stats().recovery_scanned_pages, 0, "a clean mount");
        assert_eq!(recorded(&fs), before);
    }
}
