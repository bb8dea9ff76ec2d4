//! Space: the room an operation is given before it programs anything.
//!
//! Room comes from three places:
//!
//! - the **window**: pages the data, log and cold heads may program until the next
//!   checkpoint (blocks listed in the last checkpoint, see `io`);
//! - the **pool**: free blocks, plus collected blocks (full, no valid page) that the
//!   next checkpoint frees. The next window and the recovery reserve come out of it,
//!   and the index head takes its blocks from its free part directly;
//! - the **recovery reserve**: every checkpoint leaves `window + recovery_extra` free
//!   blocks for a crash recovery to write into (see `checkpoint::settle_window`).
//!
//! # Floors (the "no dead ends" rule)
//!
//! Every operation that adds or rewrites data keeps the pool at or above the
//! **growth floor**, collecting garbage in the foreground first; if collection cannot
//! get there it fails with `NoSpace` before anything changes. Operations that only
//! remove data (deletes, truncates, log trims, transactions that grow nothing and
//! delete objects of at least as many pages as they program, and
//! [`Oftl::transact_removing`]'s, such as a file system's remove) need only the lower
//! **shrink floor**:
//! the difference, [`DELETE_RESERVE`] blocks, is room only they may use, so on a device
//! that writes refuse as full, deletes still work (and make room). The shrink floor is
//! what every collection needs to run at all: a smallest window
//! ([`Oftl::min_window_blocks`], room for an operation, a whole victim and the
//! program-failure reserve), the recovery reserve behind it, and the index head's room
//! for the write-backs of a collection and a checkpoint. So while the pool is at the
//! shrink floor a collection can always run, and garbage (invalid pages) is always
//! collectable; the capacity ([`Oftl::capacity_pages`]) leaves a window's worth above
//! the floors so that collecting at capacity gains room.
//!
//! # Bounded foreground work
//!
//! In the upper half of the band between the growth floor and the comfortable pool
//! size, and at least a window's worth of blocks above the floor (a checkpoint takes up
//! to a window from the pool), an operation collects one bounded slice
//! ([`FOREGROUND_SLICE`] copies plus twice its own pages, within one victim that the
//! next operation or [`Oftl::gc_step`] continues) instead of whole victims, so no single
//! call stalls for several collections. Whole collections run only when the slices do
//! not keep up (victims mostly valid) and the pool sinks below that; with windows of 8
//! blocks or fewer the band is too narrow and collection is whole victims as before.

use nand_hal::NandFlash;

use crate::errors::Fault;
use crate::format::checkpoint::BlockState;
use crate::gc::COLD_HEAD;
use crate::io::FaultOf;
use crate::log::LOG_HEAD;
use crate::policy::SpacePolicy;
use crate::{Oftl, DATA_HEAD, INDEX_HEAD, MAX_CKPT_BLOCKS};

/// Blocks of the pool only deletes, truncates and trims may use (see the module docs).
pub(crate) const DELETE_RESERVE: u32 = 2;

/// Foreground collections in a row that gain no room before `make_room` gives up.
const STALLED_COLLECTIONS: u32 = 3;
/// [`STALLED_COLLECTIONS`] for an operation that only makes room (`Room::Shrink`),
/// below the floor: after them it takes a fresh window (a checkpoint), as long as
/// windows gain (see [`STALLED_WINDOWS`]), instead of giving up.
const STALLED_SHRINK_COLLECTIONS: u32 = 6;
/// Fresh windows in a row, below the floor, that leave the pool no larger than it has
/// been in the call before `make_room` gives up.
const STALLED_WINDOWS: u32 = 8;
/// Most whole foreground collections one operation runs while the pool is above the
/// growth floor, within `NEAR_FLOOR_BLOCKS` of it (below it, collection runs until the
/// floor is back or collections stop gaining).
const MAX_COLLECTIONS: u32 = 16;
/// Page copies of an operation's slice while the pool a checkpoint would leave is well
/// above the floor, besides twice the pages it programs (see `foreground_slice`).
pub(crate) const FOREGROUND_SLICE: u32 = 16;
/// Page copies one operation's slice grows to as the pool a checkpoint would leave
/// nears the floor (see `foreground_slice`): about 30 ms of copies on the W25N01GV.
const PACED_SLICE_MAX: u32 = 64;
/// Blocks above the floor where slices reach [`PACED_SLICE_MAX`].
const PACE_MARGIN_BLOCKS: u64 = 4;
/// Blocks above the floor under which whole collections follow a slice.
const NEAR_FLOOR_BLOCKS: u32 = 2;

/// Times an operation makes room again when blocks it was erasing ahead failed (each
/// time the window lost blocks; past this the part is failing faster than collection
/// can make up for, and the operation fails with `NoSpace`, changing nothing).
pub(crate) const ERASE_AHEAD_TRIES: u32 = 4;

/// What an operation does to the amount of live data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Room {
    /// Adds or rewrites data: must keep the growth floor.
    Grow,
    /// Only removes data (delete, truncate, log trim): may use the delete reserve.
    Shrink,
}

/// Window pages an operation programming `pages` data or metadata pages may consume on
/// a part with `ppb` pages per block: the pages, and the rest of a block abandoned after
/// a program failure.
const fn window_need_for(pages: u64, ppb: u64) -> u64 {
    pages + ppb
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
    /// Gets ready to program `pages` pages in `ops` operations that grow the valid set
    /// by up to `growth` pages: dirty marker, capacity check, window room, pool floor.
    /// Nothing has changed when it fails.
    pub(crate) fn prepare(
        &mut self,
        pages: u32,
        ops: u32,
        growth: u64,
        room: Room,
    ) -> Result<(), FaultOf<F>> {
        self.prepare_on(DATA_HEAD, pages, ops, growth, room)
    }

    /// [`Oftl::prepare`] for an operation that programs through `head` (the data or
    /// the log head): the window room is that head's.
    pub(crate) fn prepare_on(
        &mut self,
        head: usize,
        pages: u32,
        ops: u32,
        growth: u64,
        room: Room,
    ) -> Result<(), FaultOf<F>> {
        self.check_health();
        if self.session.read_only().is_some() {
            return Err(Fault::ReadOnly);
        }
        if self.ckpt.needs_marker() {
            self.write_marker()?;
        }
        // Operations that add no pages (delete, truncate, attributes, rewrites in place)
        // are never refused for capacity: on a full device they are how room is made.
        let index_slack = 2 * (growth / self.entries_per_index() as u64 + ops as u64 + 1);
        if growth > 0
            && self.dev.table().valid_total() + growth + index_slack > self.capacity_pages()
        {
            return Err(Fault::NoSpace);
        }
        let ppb = self.dev.ppb() as u64;
        let need = self.window_need(pages);
        let blocks = (need + self.window_need(0)).div_ceil(ppb) + 1;
        if blocks > crate::MAX_WINDOW as u64 {
            return Err(Fault::TooLarge);
        }
        // A transaction larger than the configured window gets a larger one at the
        // checkpoint before it (never a checkpoint inside it).
        self.window_target = (blocks as u16).max(self.dev.sb().window_blocks);
        let mut r = self.make_room(need, room, head);
        // The blocks the operation may take are erased before it starts (see
        // `Dev::erase_ahead`); blocks lost there are made up for like any shortage.
        let mut tries = 0;
        while r.is_ok() {
            match self.dev.erase_ahead(head, need) {
                Ok(true) => break,
                Ok(false) if tries < ERASE_AHEAD_TRIES => {
                    tries += 1;
                    r = self.make_room(need, room, head);
                }
                Ok(false) => r = Err(Fault::NoSpace),
                Err(e) => r = Err(e),
            }
        }
        self.window_target = self.dev.sb().window_blocks;
        r
    }

    /// Window pages an operation of `pages` data and metadata pages may consume: the
    /// pages and one block lost to a program failure. Cache write-backs need no window
    /// room (they go to the index head, see `io`).
    pub(crate) fn window_need(&self, pages: u32) -> u64 {
        window_need_for(pages as u64, self.dev.ppb() as u64)
    }

    /// The smallest updating window ([`crate::Config::window_blocks`]) this build can
    /// work with on a part with `pages_per_block` pages per block.
    ///
    /// Every operation keeps `window_need(0) = pages_per_block` window pages in
    /// reserve (a program failure abandons the rest of a block), and `make_room` runs a
    /// foreground collection only when the window holds the operation (a one-page write:
    /// `window_need(1)`), a whole victim block and that reserve. When it does not, it
    /// checkpoints for a fresh window; a fresh window may carry the data head's block
    /// with as little as one free page, so it is only guaranteed
    /// `(window_blocks - 1)·pages_per_block + 1` pages (at the smallest window a checkpoint
    /// makes the window a block longer than configured when the data or the log head
    /// carries its block, so the fresh blocks alone keep this promise, see
    /// `settle_window`). The minimum is therefore the
    /// smallest `w` with
    /// `(w - 1)·pages_per_block + 1 >= window_need(1) + pages_per_block + window_need(0)`,
    /// i.e. 4 blocks whatever the block size or the cache (cache write-backs take no
    /// window room). `format` refuses smaller windows.
    pub const fn min_window_blocks(pages_per_block: u32) -> u32 {
        let ppb = pages_per_block as u64;
        if ppb == 0 {
            return u32::MAX;
        }
        let reserve = window_need_for(0, ppb);
        let op = window_need_for(1, ppb);
        let blocks = (op + reserve - 1).div_ceil(ppb) + 2;
        if blocks > u32::MAX as u64 {
            u32::MAX
        } else {
            blocks as u32
        }
    }

    /// Free blocks every checkpoint leaves outside its window, beyond the window's own
    /// size, for a crash recovery to write into (recovery may use only blocks the last
    /// checkpoint calls free): one block per replayed head for relocating the blocks
    /// being programmed, the closing checkpoint's cache flush (`2·CACHE` pages) and one
    /// spare. Together with one block per window block (cache write-backs while the
    /// window's pages are replayed, at most about one per replayed page) that is the
    /// recovery reserve; without it a crash on a nearly full device could leave it
    /// unmountable.
    pub(crate) fn recovery_extra_blocks(&self) -> u32 {
        let ppb = self.dev.ppb().max(1);
        3 + (2 * CACHE as u32).div_ceil(ppb) + 1
    }

    /// Index-head pages an operation or a collection step keeps free for the cache
    /// write-backs it may cause and for the next checkpoint's cache flush.
    pub(crate) fn index_need(&self, pages: u32, ops: u32) -> u64 {
        // At least 1: an unmounted store has no payload yet.
        let epp = (self.entries_per_index() as u64).max(1);
        (4 * CACHE as u64 + 24) + 2 * (pages as u64 / epp + 2 * ops as u64)
    }

    /// Blocks of the pool kept for the index head (see [`Oftl::index_need`]).
    fn index_reserve_blocks(&self) -> u32 {
        (self.index_need(0, 0).div_ceil(self.dev.ppb().max(1) as u64) + 1) as u32
    }

    /// Pages the index head can still program: the rest of its block and the free
    /// blocks.
    pub(crate) fn index_room(&self) -> u64 {
        self.dev.head_room(INDEX_HEAD) + self.free_blocks() as u64 * self.dev.ppb() as u64
    }

    /// The [`Dev::recovery_work`](crate::io::Dev::recovery_work) at which an operation
    /// checkpoints first: three-quarters of a window of pages with [`MAX_CKPT_BLOCKS`]
    /// checkpoint blocks, more with fewer (three windows with four), as the extra
    /// checkpoints' erases fall on them. Writes alone reach it at three-quarters of the
    /// window; cache write-backs ([`INDEX_WRITE_BACK_WORK`](crate::io::INDEX_WRITE_BACK_WORK)
    /// each) take it there sooner, bounding a crash recovery's replay as the window
    /// bounds its scan.
    pub(crate) fn recovery_work_bound(&self) -> u32 {
        let window = self.dev.sb().window_blocks as u32 * self.dev.ppb();
        let n = self.dev.sb().ckpt_blocks().len().max(1) as u32;
        window.saturating_mul(MAX_CKPT_BLOCKS as u32 * 3 / 4) / n
    }

    /// The pool floor for `room` (see the module docs), in blocks.
    pub(crate) fn pool_floor(&self, room: Room) -> u32 {
        let wm = Self::min_window_blocks(self.dev.ppb());
        let shrink = 2 * wm + self.recovery_extra_blocks() + self.index_reserve_blocks();
        match room {
            Room::Shrink => shrink,
            Room::Grow => shrink + DELETE_RESERVE,
        }
    }

    /// Pool size above which no foreground collection is needed: the configured
    /// window, its recovery reserve, the index head's room and the delete reserve.
    pub(crate) fn pool_comfortable(&self) -> u32 {
        2 * self.dev.sb().window_blocks as u32
            + self.recovery_extra_blocks()
            + self.index_reserve_blocks()
            + DELETE_RESERVE
    }

    /// Pages the user may fill (valid data, metadata, index and object-table pages)
    /// before writes fail with `NoSpace`: the good blocks less the window, its recovery
    /// reserve, a window's worth of collection slack, the index head's room and the
    /// delete reserve (see the `space` module docs). Near it, garbage collection gains
    /// little per victim; nothing is lost, and deleting data makes room.
    pub fn capacity_pages(&self) -> u64 {
        let ppb = self.dev.geo().pages_per_block() as u64;
        let usable = self.good_blocks() as u64;
        let reserve = 3 * self.dev.sb().window_blocks as u64
            + self.recovery_extra_blocks() as u64
            + self.index_reserve_blocks() as u64
            + DELETE_RESERVE as u64
            + 2;
        usable.saturating_sub(reserve) * ppb
    }

    /// Blocks that are free now or become free at the next checkpoint.
    pub(crate) fn reclaimable_blocks(&self) -> u32 {
        self.blocks()
            .iter()
            .filter(|b| {
                b.takeable() || (!b.retire() && b.state() == BlockState::Full && b.valid() == 0)
            })
            .count() as u32
    }

    /// Blocks that are free now.
    pub(crate) fn free_blocks(&self) -> u32 {
        self.blocks().iter().filter(|b| b.takeable()).count() as u32
    }

    /// Ensures `need` window pages for `head`, the index head's room, and a pool at the
    /// floor for `room` (collecting in the foreground when it is not). Fails with `NoSpace`, having
    /// changed nothing the user can see, when that cannot be had.
    pub(crate) fn make_room(
        &mut self,
        need: u64,
        room: Room,
        head: usize,
    ) -> Result<(), FaultOf<F>> {
        if self.dev.recovery_work() >= self.recovery_work_bound() {
            // Checkpoint before the window is used up: since the last one, the cache
            // wrote back so many pages that a crash recovery, which writes them back
            // again, would take longer than the window's scan is meant to (an object
            // table page per operation in `varmail`, whose mounts after a cut took
            // 145 ms).
            self.checkpoint(false)?;
        }
        let floor = self.pool_floor(room);
        let comfortable = self.pool_comfortable();
        let r = self.make_room_within(need, head, room, floor, comfortable);
        if matches!(r, Err(Fault::NoSpace))
            && self.recovery_drops_copies()
            && self.dev.cold_since_checkpoint()
            && self.reclaimable_blocks() > self.free_blocks()
        {
            // Where collection runs in slices a crash recovery drops the cold copies
            // made since the last checkpoint (see the `recovery` module): a refusal
            // whose collections freed a block makes them durable, or a device that is
            // refused and then loses power (or resets, as a firmware may on an error)
            // starts every attempt from the same victims and never gets the room back
            // (the wear-out soak with the copies dropped on every store: a worn part
            // left writable, every write refused, seed 2057). Not on smaller windows,
            // whose recoveries replay the copies: there a checkpoint at each of a run
            // of refusals only wore the part (review s37b's 4-block window at 90 %).
            // The refusal stands either way.
            match self.checkpoint(false) {
                Ok(()) | Err(Fault::NoSpace) => {}
                Err(e) => return Err(e),
            }
        }
        r
    }

    /// [`Oftl::make_room`] past its first checks, with the pool's floor for the
    /// operation and its comfortable size.
    fn make_room_within(
        &mut self,
        need: u64,
        head: usize,
        room: Room,
        floor: u32,
        comfortable: u32,
    ) -> Result<(), FaultOf<F>> {
        // What makes room on a full device gets more collections to find it, and fresh
        // windows: the pool can sit a block below the floor after grown bad blocks,
        // where collections of mostly valid victims gain nothing for a while, their
        // copies and cache write-backs leaving garbage in window blocks that no
        // collection takes before a checkpoint (review s52: removes refused on such
        // volumes, every one or the first few; then, once a remove refused failed the
        // sweep, one refused while five window blocks held no valid page).
        let shrink = room == Room::Shrink;
        let stall_limit = if shrink {
            STALLED_SHRINK_COLLECTIONS
        } else {
            STALLED_COLLECTIONS
        };
        let ppb = self.dev.ppb() as u64;
        let index = self.index_need(0, 1);
        // The largest pool this call had when it checkpointed for a fresh window below
        // the floor, and the fresh windows since that had no more: collections that
        // gain a little, then a fresh window that takes it back, can cycle for as long
        // as the loop runs (an independent review saw 67 checkpoints and 3,170
        // programs in one refused call). The pool moves up and down by a block or two
        // at each window, so a few are allowed to gain nothing.
        let mut refreshed: Option<(u32, u32)> = None;
        let mut fresh = false;
        let mut stalled = 0;
        let mut collections = 0;
        let mut sliced = false;
        for _ in 0..4 * BLOCKS + 8 {
            let budget = self
                .dev
                .window_budget_for(head)
                .min(self.dev.window_budget());
            let short = self.dev.window_budget_for(head) < need || self.index_room() < index;
            if short {
                if fresh {
                    // Even a fresh window (and the blocks it freed) is too small: the
                    // pool is below every floor.
                    return Err(Fault::NoSpace);
                }
                self.checkpoint(false)?;
                fresh = true;
                continue;
            }
            let pool = self.reclaimable_blocks();
            if pool >= comfortable && !self.urgent_victim() {
                return Ok(());
            }
            // Above the floor an operation collects one bounded slice
            // (`foreground_slice`), so no single call stalls for whole collections;
            // whole collections follow it only within `NEAR_FLOOR_BLOCKS` of the floor,
            // and run below it. Until stop 40, every call with the pool below the upper
            // half of the band (where a checkpoint had just taken a window of blocks)
            // collected up to 16 whole victims: random 2 KiB overwrites at 78% of
            // capacity had single writes of 140 ms, at 91% of 340 ms (review s41).
            // Where the band between the floor and comfortable is narrower than a
            // window (small windows), there are no slices: whole collections keep the
            // pool up (an independent review found slices on a 5-block window refusing
            // writes at 77% of capacity).
            if pool >= floor && self.sliced_band(floor) {
                let near = pool < floor + NEAR_FLOOR_BLOCKS;
                if (sliced || collections > 0) && !near {
                    return Ok(());
                }
                if !sliced && collections == 0 {
                    let slice = self.foreground_slice(floor, need);
                    match self.collect_for(slice, crate::policy::Urgency::Foreground, true) {
                        // No room to copy into even after a checkpoint: the pool is above
                        // the floor, so this operation goes ahead without collecting.
                        Ok(_) | Err(Fault::NoSpace) => {}
                        Err(e) => return Err(e),
                    }
                    sliced = true;
                    fresh = false;
                    continue;
                }
            }
            if pool >= floor && (collections >= MAX_COLLECTIONS || stalled >= STALLED_COLLECTIONS) {
                return Ok(());
            }
            if budget < need + ppb + self.window_need(0) {
                // The window cannot hold a whole victim on top of this operation.
                if !fresh {
                    if pool < floor && windows_stalled(&mut refreshed, pool) {
                        return Err(Fault::NoSpace);
                    }
                    self.checkpoint(false)?;
                    fresh = true;
                    continue;
                }
                return if pool >= floor {
                    Ok(())
                } else {
                    Err(Fault::NoSpace)
                };
            }
            let before = self.free_room();
            if !self.gc_collect_one()? {
                return if pool >= floor {
                    Ok(())
                } else {
                    Err(Fault::NoSpace)
                };
            }
            // Near capacity a collection can cost more (copies and the cache pages they
            // write back) than it frees: after a few such in a row, stop collecting for
            // this operation instead of spinning through the device's wear.
            collections += 1;
            if self.free_room() <= before {
                stalled += 1;
            } else {
                stalled = 0;
            }
            let pool = self.reclaimable_blocks();
            if stalled >= stall_limit && pool < floor {
                if !shrink || windows_stalled(&mut refreshed, pool) {
                    return Err(Fault::NoSpace);
                }
                self.checkpoint(false)?;
                stalled = 0;
                fresh = true;
                continue;
            }
            fresh = false;
        }
        Err(Fault::NoSpace)
    }

    /// Whether the band between `floor` and the comfortable pool is a window wide or
    /// more, so that operations collect in slices above the floor (see
    /// `make_room_within`); narrower bands (small windows) collect whole victims.
    pub(crate) fn sliced_band(&self, floor: u32) -> bool {
        let window = self.dev.sb().window_blocks as u32;
        self.pool_comfortable().saturating_sub(floor) >= window
    }

    /// Whether a crash recovery of this store drops the cold copies of its window
    /// instead of replaying them (see the `recovery` module): where collection runs in
    /// slices (a window at least twice the smallest, such as the W25N01GV's 16
    /// blocks), whose copies' cache write-backs then count as no recovery work. It
    /// depends on the configuration and geometry only, so the session that copied and
    /// the recovery after it agree.
    pub(crate) fn recovery_drops_copies(&self) -> bool {
        self.sliced_band(self.pool_floor(Room::Grow))
    }

    /// The page copies an operation of `need` window pages makes above the floor (of
    /// one victim at most; the victim carries over to the next operation).
    ///
    /// A checkpoint gives the window back its blocks from the pool, so the pool a
    /// checkpoint now would leave is the free room ([`Oftl::free_room`]) less a
    /// window. While that is half a window above the floor and its margin, 16 copies
    /// and twice the operation's pages keep pace with victims up to two-thirds valid.
    /// Closer, the slice grows in proportion to [`PACED_SLICE_MAX`] copies at the
    /// margin, which is where the work of near-full victims is spread over operations
    /// instead of run as whole collections in one (see `make_room_within`).
    fn foreground_slice(&self, floor: u32, need: u64) -> u32 {
        let ppb = self.dev.ppb() as u64;
        let w = self.dev.sb().window_blocks as u64 * ppb;
        let pages = need
            .saturating_sub(self.window_need(0))
            .min(u32::MAX as u64 / 4);
        let base = FOREGROUND_SLICE as u64 + 2 * pages;
        let max = base.max(PACED_SLICE_MAX as u64);
        let after = self.free_room().saturating_sub(w);
        let low = (floor as u64 + PACE_MARGIN_BLOCKS) * ppb;
        let high = low + w / 2;
        let slice = if after >= high {
            base
        } else {
            base + ((max - base) * (high - after.max(low))).div_ceil(high - low)
        };
        slice.min(u32::MAX as u64) as u32
    }

    /// Pages free now or at the next checkpoint: reclaimable blocks plus what is left
    /// of the window (a checkpoint moves blocks from the one to the other), including
    /// the rest of the blocks the cold and log heads have open. A collection that opens
    /// one of those blocks moves room, it does not use it up: counting only the data
    /// head's budget took the first copies through the cold and the log head after a
    /// recovery for two collections that gained nothing, and with a cache write-back
    /// after them `make_room` refused a write at 42% of capacity (found once operations
    /// erased their blocks ahead, which moved where the sweep's cuts land).
    fn free_room(&self) -> u64 {
        self.reclaimable_blocks() as u64 * self.dev.ppb() as u64
            + self.dev.window_budget()
            + self.dev.head_room(COLD_HEAD)
            + self.dev.head_room(LOG_HEAD)
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
    /// Good blocks (not bad, not superblock or checkpoint blocks) the store needs to
    /// keep writing with its live data: the blocks the live pages fill, the window the
    /// heads program (a smallest one), and the shrink floor the pool must keep beside
    /// it (the next window, the recovery reserve behind it and the index head's room).
    /// Below it the store turns read-only ([`crate::ReadOnlyReason::GoodBlocks`]): a
    /// collection or a crash recovery might find no room. (Without the window the
    /// wear-out soak found worn parts left writable with a pool that could never reach
    /// the floor: every operation, deletes included, refused with `NoSpace` for good.)
    pub fn min_good_blocks(&self) -> u32 {
        let ppb = self.dev.ppb().max(1) as u64;
        (self.dev.table().valid_total().div_ceil(ppb) as u32)
            .saturating_add(Self::min_window_blocks(self.dev.ppb()))
            .saturating_add(self.pool_floor(Room::Shrink))
    }

    /// Turns the store read-only if grown bad blocks left too few good blocks (or
    /// checkpoint blocks) to write safely.
    pub(crate) fn check_health(&mut self) {
        let good_ckpt = self
            .dev
            .sb()
            .ckpt_blocks()
            .iter()
            .filter(|&&b| self.dev.table().get(b).state() != BlockState::Bad)
            .count();
        if good_ckpt < 2 {
            self.go_read_only(crate::ReadOnlyReason::CheckpointBlocks);
            return;
        }
        if self.too_few_good_blocks() {
            self.go_read_only(crate::ReadOnlyReason::GoodBlocks);
        }
    }

    /// Whether grown bad blocks left fewer good blocks than [`Oftl::min_good_blocks`],
    /// or so few that the store has no capacity left: such a store refuses every write
    /// that adds a page, whatever is deleted, so it is worn out (a worn part in the
    /// file layer's wear-out soak stayed writable with every fsync refused `NoSpace`,
    /// seed 4509, once a crash recovery dropped the cold copies).
    pub(crate) fn too_few_good_blocks(&self) -> bool {
        self.good_blocks() < self.min_good_blocks() || self.capacity_pages() == 0
    }

    /// Blocks neither bad nor reserved (superblock and checkpoint blocks).
    pub(crate) fn good_blocks(&self) -> u32 {
        self.blocks()
            .iter()
            .filter(|b| !matches!(b.state(), BlockState::Bad | BlockState::Reserved))
            .count() as u32
    }
}

/// Notes a fresh window taken with the pool at `pool`, below the floor, in `refreshed`
/// (the largest pool at such a refresh in this call, and the refreshes since that had
/// no more); whether [`STALLED_WINDOWS`] in a row gained nothing, so the call gives up.
fn windows_stalled(refreshed: &mut Option<(u32, u32)>, pool: u32) -> bool {
    match *refreshed {
        Some((best, _)) if pool > best => *refreshed = Some((pool, 0)),
        Some((_, idle)) if idle + 1 >= STALLED_WINDOWS => return true,
        Some((best, idle)) => *refreshed = Some((best, idle + 1)),
        None => *refreshed = Some((pool, 0)),
    }
    false
}
