//! The block table: what the store knows about every block, 4 bytes each, and the
//! updating window's list.
//!
//! [`BlockTable`] owns every block's coarse state, valid-page count, erase count and
//! pending retire/scrub flags, the total of valid pages, and the window list (the blocks
//! the last checkpoint allocated, in order, and how many the heads have taken). Nothing else writes them:
//! the rest of the store reports what happened through named events (a page was
//! programmed or invalidated, a block was erased, a program failed, a read reached the
//! scrub threshold, a checkpoint settled the window, ...), and an event that does not
//! fit the block's state is refused (it returns `false` and changes nothing).
//!
//! Invariants:
//! - `valid_total` is the sum of the blocks' valid counts, except where counts read
//!   from a damaged image disagreed and a decrement saturated (see
//!   [`BlockTable::page_invalidated`]).
//! - A block with a pending `retire` is never handed out as free: the policy never sees
//!   it as a free choice ([`BlockTable::join_window`] refuses it).
//! - Blocks that must be moved (a failed program: retire; a read at the scrub
//!   threshold: scrub) are collected before any policy is asked for a victim
//!   ([`BlockTable::pick_victim`]): the one home of that safety rule.
//!
//! # Packing
//!
//! ```text
//!  31                     15 14           5   4      3      2     0
//! +-------------------------+--------------+-------+--------+-------+
//! | erases (17 bits)        | valid (10)   | scrub | retire | state |
//! +-------------------------+--------------+-------+--------+-------+
//! ```
//!
//! `valid` holds up to 1,023 (pages per block are at most 512). The erase count
//! saturates at [`BlockInfo::MAX_ERASES`] (131,071), beyond any SLC part's rated
//! cycles; the checkpoint's 19-bit field keeps its format (SPEC 3.4), a larger value
//! found there reads saturated.

use crate::format::checkpoint::BlockState;
use crate::policy::{SpacePolicy, Urgency};
use crate::MAX_WINDOW;
use nand_hal::BlockAddr;

/// The window's block numbers, in allocation order.
pub(crate) type WindowList = heapless::Vec<BlockAddr, MAX_WINDOW>;

const STATE_MASK: u32 = 0b111;
/// Blocks [`BlockTable::pick_victim`] can hide from the policy at once.
pub(crate) const MAX_HIDDEN: usize = 4;
const RETIRE: u32 = 1 << 3;
const SCRUB: u32 = 1 << 4;
const VALID_SHIFT: u32 = 5;
const VALID_MASK: u32 = 0x3FF;
const ERASE_SHIFT: u32 = 15;

/// What the store knows about one block, packed in 4 bytes (see the `blocks` module).
///
/// Policies read it through the accessors; only the store's block table changes it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct BlockInfo(u32);

impl BlockInfo {
    /// Largest valid-page count an entry holds.
    pub const MAX_VALID: u16 = VALID_MASK as u16;
    /// Erase counts saturate here.
    pub const MAX_ERASES: u32 = (1 << (32 - ERASE_SHIFT)) - 1;

    /// A free block with no history.
    pub const FREE: BlockInfo = BlockInfo::new(BlockState::Free, 0, 0);

    /// An entry in `state` with `valid` pages and `erases` erases (both saturating),
    /// no pending retire or scrub: for policies' tests and tools.
    pub const fn new(state: BlockState, valid: u16, erases: u32) -> Self {
        let valid = if valid > Self::MAX_VALID {
            Self::MAX_VALID
        } else {
            valid
        };
        let erases = if erases > Self::MAX_ERASES {
            Self::MAX_ERASES
        } else {
            erases
        };
        BlockInfo((state as u32) | ((valid as u32) << VALID_SHIFT) | (erases << ERASE_SHIFT))
    }

    /// This entry with the retire flag set to `retire`.
    pub const fn with_retire(self, retire: bool) -> Self {
        BlockInfo(if retire {
            self.0 | RETIRE
        } else {
            self.0 & !RETIRE
        })
    }

    /// This entry with the scrub flag set to `scrub`.
    pub const fn with_scrub(self, scrub: bool) -> Self {
        BlockInfo(if scrub {
            self.0 | SCRUB
        } else {
            self.0 & !SCRUB
        })
    }

    /// Coarse state.
    pub const fn state(self) -> BlockState {
        match self.0 & STATE_MASK {
            0 => BlockState::Free,
            1 => BlockState::Window,
            2 => BlockState::Full,
            3 => BlockState::Bad,
            // 4; 5-7 are never stored (every writer goes through a `BlockState`).
            _ => BlockState::Reserved,
        }
    }

    /// Valid pages (exact in RAM).
    pub const fn valid(self) -> u16 {
        ((self.0 >> VALID_SHIFT) & VALID_MASK) as u16
    }

    /// Erase count (saturating at [`BlockInfo::MAX_ERASES`]).
    pub const fn erases(self) -> u32 {
        self.0 >> ERASE_SHIFT
    }

    /// A program failed in this block: its data moves and it is retired.
    pub const fn retire(self) -> bool {
        self.0 & RETIRE != 0
    }

    /// A read reached the ECC scrub threshold: its data moves.
    pub const fn scrub(self) -> bool {
        self.0 & SCRUB != 0
    }

    /// A block holding valid pages that must move (retire or scrub) before anything
    /// else is collected.
    pub const fn urgent(self) -> bool {
        matches!(self.state(), BlockState::Full)
            && self.valid() > 0
            && (self.retire() || self.scrub())
    }

    /// Free and not waiting to be retired: a block the window may take.
    pub const fn takeable(self) -> bool {
        matches!(self.state(), BlockState::Free) && !self.retire()
    }

    fn set_state(&mut self, s: BlockState) {
        self.0 = (self.0 & !STATE_MASK) | s as u32;
    }

    fn set_valid(&mut self, v: u16) {
        let v = v.min(Self::MAX_VALID) as u32;
        self.0 = (self.0 & !(VALID_MASK << VALID_SHIFT)) | (v << VALID_SHIFT);
    }

    fn set_erases(&mut self, e: u32) {
        let e = e.min(Self::MAX_ERASES);
        self.0 = (self.0 & ((1 << ERASE_SHIFT) - 1)) | (e << ERASE_SHIFT);
    }
}

impl core::fmt::Debug for BlockInfo {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BlockInfo")
            .field("state", &self.state())
            .field("valid", &self.valid())
            .field("erases", &self.erases())
            .field("retire", &self.retire())
            .field("scrub", &self.scrub())
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for BlockInfo {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(
            f,
            "BlockInfo {{ state: {}, valid: {}, erases: {}, retire: {}, scrub: {} }}",
            self.state(),
            self.valid(),
            self.erases(),
            self.retire(),
            self.scrub()
        )
    }
}

/// What a checkpoint did to one block ([`BlockTable::settle`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Settled {
    /// Nothing changed.
    Kept,
    /// A window block became full.
    Filled,
    /// A block with no valid page left became free.
    Freed,
    /// A block with no valid page left and a failed program became bad (its marker is
    /// written after the checkpoint).
    Retired,
}

/// Every block's [`BlockInfo`] and the total of valid pages (see the module docs).
pub(crate) struct BlockTable<const BLOCKS: usize> {
    info: [BlockInfo; BLOCKS],
    /// Blocks of the device (the rest of `info` is unused).
    n: usize,
    valid_total: u64,
    /// The window's blocks, in allocation order; every one in the window state.
    window: WindowList,
    /// Window blocks the heads have taken (a prefix of `window`).
    window_next: usize,
    /// Unused window blocks already erased, a prefix of them: an operation erases the
    /// blocks it may take before it starts (see `Dev::erase_ahead`).
    window_ready: usize,
    /// Where the search for the next urgent victim starts (see
    /// [`BlockTable::pick_victim`]).
    urgent_next: u32,
}

impl<const BLOCKS: usize> BlockTable<BLOCKS> {
    pub const fn new() -> Self {
        BlockTable {
            info: [BlockInfo::FREE; BLOCKS],
            n: 0,
            valid_total: 0,
            window: heapless::Vec::new(),
            window_next: 0,
            window_ready: 0,
            urgent_next: 0,
        }
    }

    /// Every block free with no history, for a device of `n` blocks; no window.
    pub fn reset(&mut self, n: u32) {
        self.n = (n as usize).min(BLOCKS);
        self.info.fill(BlockInfo::FREE);
        self.valid_total = 0;
        self.window.clear();
        self.window_next = 0;
        self.window_ready = 0;
        self.urgent_next = 0;
    }

    // ---- the window list ----

    /// The window's blocks, in allocation order (taken ones first).
    pub fn window(&self) -> &[BlockAddr] {
        &self.window
    }

    /// Window blocks no head has taken yet.
    pub fn window_unused(&self) -> &[BlockAddr] {
        &self.window[self.window_next..]
    }

    /// Whether the window list is at [`MAX_WINDOW`].
    pub fn window_full(&self) -> bool {
        self.window.is_full()
    }

    /// A head takes the next window block (`None`: all taken), and whether it was
    /// erased ahead (else the head erases it).
    pub fn take_window_block(&mut self) -> Option<(BlockAddr, bool)> {
        let b = *self.window.get(self.window_next)?;
        self.window_next += 1;
        let erased = self.window_ready > 0;
        self.window_ready = self.window_ready.saturating_sub(1);
        Some((b, erased))
    }

    /// Unused window blocks erased ahead.
    pub fn window_ready(&self) -> usize {
        self.window_ready
    }

    /// The first unused window block not erased yet.
    pub fn next_unready(&self) -> Option<BlockAddr> {
        self.window
            .get(self.window_next + self.window_ready)
            .copied()
    }

    /// [`BlockTable::next_unready`] was erased.
    pub fn erased_ahead(&mut self) {
        if self.window_next + self.window_ready < self.window.len() {
            self.window_ready += 1;
        }
    }

    /// [`BlockTable::next_unready`] is gone (found bad, or its erase failed): it leaves
    /// the list, so no head takes it. (A recovery meets it in the window the
    /// checkpoint recorded and skips it as bad.)
    pub fn drop_unready(&mut self) {
        let i = self.window_next + self.window_ready;
        if i < self.window.len() {
            self.window.remove(i);
        }
    }

    /// Free block `b` joins the window at its end. Refused (nothing changes) unless it
    /// is free, not waiting to be retired, and the list has room.
    pub fn admit(&mut self, b: BlockAddr) -> bool {
        if self.window.is_full() || !self.get(b).takeable() || (b.0 as usize) >= self.n {
            return false;
        }
        self.join_window(b);
        let _ = self.window.push(b);
        true
    }

    /// Starts a new window list: the blocks no head took from the old one are returned
    /// (still in the window state: the caller keeps each with
    /// [`BlockTable::keep_in_window`] or frees it with [`BlockTable::leave_window`]),
    /// with how many of them (a prefix) were erased ahead. Those kept first in the new
    /// list stay erased ahead.
    pub fn restart_window(&mut self) -> (WindowList, usize) {
        let mut unused = WindowList::new();
        for &b in &self.window[self.window_next..] {
            // Same capacity: cannot overflow.
            let _ = unused.push(b);
        }
        let ready = self.window_ready;
        self.window.clear();
        self.window_next = 0;
        self.window_ready = 0;
        (unused, ready)
    }

    /// Window block `b` (from [`BlockTable::restart_window`], or recorded by the
    /// checkpoint being loaded) stays in the new list. Refused unless it is in the
    /// window state and the list has room.
    pub fn keep_in_window(&mut self, b: BlockAddr) -> bool {
        self.get(b).state() == BlockState::Window
            && (b.0 as usize) < self.n
            && self.window.push(b).is_ok()
    }

    /// A window block kept from the old list with [`BlockTable::keep_in_window`] was
    /// erased ahead there: counted as erased ahead here too while every block before
    /// it in the new list is.
    pub fn kept_erased(&mut self, b: BlockAddr) {
        if self.window_next == 0
            && self.window_ready + 1 == self.window.len()
            && self.window.last() == Some(&b)
        {
            self.window_ready += 1;
        }
    }

    /// The last block of the list goes back to the free pool (`None`: the list is
    /// empty).
    pub fn release_last(&mut self) -> Option<BlockAddr> {
        let b = self.window.pop()?;
        self.leave_window(b);
        self.window_next = self.window_next.min(self.window.len());
        self.window_ready = self.window_ready.min(self.window.len() - self.window_next);
        Some(b)
    }

    /// Empties the window list (a checkpoint is about to be loaded, or a recovery picks
    /// its own window); the blocks keep their states.
    pub fn clear_window(&mut self) {
        self.window.clear();
        self.window_next = 0;
        self.window_ready = 0;
    }

    /// Block `b` as the checkpoint being loaded lists it in its window (its state comes
    /// with the table, checked after). Refused when the list is full.
    pub fn load_window(&mut self, b: BlockAddr) -> bool {
        self.window.push(b).is_ok()
    }

    /// Drops the blocks found bad from the list (a clean mount read their markers).
    pub fn drop_bad_from_window(&mut self) {
        let info = &self.info;
        self.window.retain(|&b| {
            info.get(b.0 as usize)
                .is_none_or(|e| e.state() != BlockState::Bad)
        });
        self.window_next = self.window_next.min(self.window.len());
        self.window_ready = 0;
    }

    /// The device's blocks.
    pub fn all(&self) -> &[BlockInfo] {
        &self.info[..self.n]
    }

    /// Block `b`'s entry (a free, unused entry past the device).
    pub fn get(&self, b: BlockAddr) -> BlockInfo {
        self.info
            .get(b.0 as usize)
            .copied()
            .unwrap_or(BlockInfo::FREE)
    }

    /// Pages valid in every block.
    pub fn valid_total(&self) -> u64 {
        self.valid_total
    }

    fn entry(&mut self, b: BlockAddr) -> Option<&mut BlockInfo> {
        self.info[..self.n].get_mut(b.0 as usize)
    }

    /// Drops the valid pages of an entry from the total.
    fn drop_valid(&mut self, b: BlockAddr) {
        if let Some(e) = self.info[..self.n].get_mut(b.0 as usize) {
            self.valid_total = self.valid_total.saturating_sub(e.valid() as u64);
            e.set_valid(0);
        }
    }

    // ---- events: bad and fixed blocks ----

    /// `b` reads as bad (a factory or grown marker, or a failed erase): whatever it held
    /// is gone. A pending retire stays (its marker is written at the next checkpoint).
    pub fn found_bad(&mut self, b: BlockAddr) {
        self.drop_valid(b);
        if let Some(e) = self.entry(b) {
            e.set_state(BlockState::Bad);
        }
    }

    /// `b`'s bad-block marker was written: retired for good.
    pub fn retired(&mut self, b: BlockAddr) {
        self.found_bad(b);
        if let Some(e) = self.entry(b) {
            *e = e.with_retire(false);
        }
    }

    /// `b` holds the superblock or checkpoints.
    pub fn reserved(&mut self, b: BlockAddr) {
        self.drop_valid(b);
        if let Some(e) = self.entry(b) {
            e.set_state(BlockState::Reserved);
        }
    }

    // ---- events: loading and rebuilding ----

    /// Starts loading a checkpoint's table (counts from a failed earlier attempt go).
    pub fn begin_load(&mut self) {
        self.valid_total = 0;
    }

    /// Block `b` as a checkpoint recorded it (no pending flags).
    pub fn loaded(&mut self, b: BlockAddr, state: BlockState, valid: u16, erases: u32) {
        if let Some(e) = self.entry(b) {
            let new = BlockInfo::new(state, valid, erases);
            *e = new;
            self.valid_total += new.valid() as u64;
        }
    }

    /// A rebuild from the pages' tags decided `b` (neither bad nor reserved) holds
    /// pages it keeps (`holds`: full) or none (free); its valid pages are counted again
    /// as the rebuild maps them. Bad and reserved blocks are refused.
    #[cfg(feature = "alloc")]
    pub fn rebuilt(&mut self, b: BlockAddr, holds: bool) -> bool {
        if matches!(self.get(b).state(), BlockState::Bad | BlockState::Reserved) {
            return false;
        }
        self.drop_valid(b);
        if let Some(e) = self.entry(b) {
            e.set_state(if holds {
                BlockState::Full
            } else {
                BlockState::Free
            });
        }
        true
    }

    // ---- events: the window ----

    /// Free block `b` joins the window (or a head takes it directly). Refused unless
    /// it is free and not waiting to be retired.
    pub fn join_window(&mut self, b: BlockAddr) -> bool {
        match self.entry(b) {
            Some(e) if e.takeable() => {
                e.set_state(BlockState::Window);
                true
            }
            _ => false,
        }
    }

    /// A window block no head started goes back to the free pool. Refused unless it
    /// is in the window state.
    pub fn leave_window(&mut self, b: BlockAddr) -> bool {
        match self.entry(b) {
            Some(e) if e.state() == BlockState::Window => {
                e.set_state(BlockState::Free);
                true
            }
            _ => false,
        }
    }

    /// A checkpoint settles `b` (not a head's block, not an unused window block): a
    /// window block becomes full, a block with no valid page left becomes free, or bad
    /// if it waits to be retired.
    pub fn settle(&mut self, b: BlockAddr) -> Settled {
        let Some(e) = self.entry(b) else {
            return Settled::Kept;
        };
        match e.state() {
            BlockState::Window | BlockState::Full if e.valid() == 0 => {
                if e.retire() {
                    e.set_state(BlockState::Bad);
                    Settled::Retired
                } else {
                    e.set_state(BlockState::Free);
                    Settled::Freed
                }
            }
            BlockState::Window => {
                e.set_state(BlockState::Full);
                Settled::Filled
            }
            _ => Settled::Kept,
        }
    }

    // ---- events: programs, erases, reads ----

    /// `b` was erased.
    pub fn erased(&mut self, b: BlockAddr) {
        if let Some(e) = self.entry(b) {
            let n = e.erases().saturating_add(1);
            e.set_erases(n);
        }
    }

    /// A page of block `b` became valid (programmed, or mapped by a replay).
    pub fn page_programmed(&mut self, b: BlockAddr) {
        if let Some(e) = self.entry(b) {
            let v = e.valid().saturating_add(1);
            e.set_valid(v);
            self.valid_total += 1;
        }
    }

    /// A page of block `b` stopped being referenced. Counts come from flash
    /// (checkpoint, replay): a damaged image can make them disagree, so both
    /// decrements saturate rather than trust them.
    pub fn page_invalidated(&mut self, b: BlockAddr) {
        if let Some(e) = self.entry(b) {
            let v = e.valid().saturating_sub(1);
            e.set_valid(v);
            self.valid_total = self.valid_total.saturating_sub(1);
        }
    }

    /// A program in `b` failed: its data moves and it is retired.
    pub fn program_failed(&mut self, b: BlockAddr) {
        if let Some(e) = self.entry(b) {
            *e = e.with_retire(true);
        }
    }

    /// A read in `b` reached the ECC scrub threshold: its data moves.
    pub fn needs_scrub(&mut self, b: BlockAddr) {
        if let Some(e) = self.entry(b) {
            *e = e.with_scrub(true);
        }
    }

    /// Collection went through all of `b`. Its scrub request is met; valid pages the
    /// counts still show were claimed by no backpointer (the counts were wrong) and are
    /// dropped, unless pages of it did not read (`unreadable`: they may be those, so
    /// the block keeps its count). Returns the valid pages it keeps.
    pub fn collected(&mut self, b: BlockAddr, unreadable: bool) -> u16 {
        let Some(e) = self.entry(b) else {
            return 0;
        };
        *e = e.with_scrub(false);
        let v = e.valid();
        if v != 0 && !unreadable {
            self.drop_valid(b);
            return 0;
        }
        v
    }

    // ---- choices ----

    /// The next block to collect: a block that must move (retire or scrub; the lowest
    /// numbered) before anything the policy would choose; `hidden` (a block collection
    /// left alone) is shown to the policy as full of valid pages and never returned.
    /// Only a full block with valid pages is returned.
    pub fn pick_victim<P: SpacePolicy>(
        &mut self,
        policy: &mut P,
        ppb: u32,
        urgency: Urgency,
        hidden: &[BlockAddr],
    ) -> Option<BlockAddr> {
        // In turn from the block after the last urgent pick: by address, blocks flagged
        // early waited behind low-numbered ones flagged again and again (an independent
        // review's hot objects lost pages in blocks flagged long before).
        let n = self.n;
        let from = self.urgent_next as usize;
        let urgent = (0..n)
            .map(|k| (from + k) % n.max(1))
            .map(|i| (BlockAddr(i as u32), self.info[i]))
            .find(|&(i, b)| b.urgent() && !hidden.contains(&i))
            .map(|(i, _)| i);
        if let Some(u) = urgent {
            self.urgent_next = u.0.wrapping_add(1);
        }
        let pick = urgent.or_else(|| {
            // Hidden blocks show as full of valid pages while the policy looks.
            let mut saved = [(0usize, BlockInfo::FREE); MAX_HIDDEN];
            let mut n = 0;
            for h in hidden.iter().filter(|h| (h.0 as usize) < self.n) {
                if let Some(slot) = saved.get_mut(n) {
                    *slot = (h.0 as usize, self.info[h.0 as usize]);
                    n += 1;
                    self.info[h.0 as usize].set_valid(ppb.min(u16::MAX as u32) as u16);
                }
            }
            let p = policy.pick_victim_for(self.all(), ppb, urgency);
            for &(i, e) in saved[..n].iter().rev() {
                self.info[i] = e;
            }
            p
        });
        pick.filter(|&v| !hidden.contains(&v)).filter(|&v| {
            let b = self.get(v);
            (v.0 as usize) < self.n && b.state() == BlockState::Full && b.valid() > 0
        })
    }

    /// The policy's free block, if it is one the window may take.
    pub fn pick_free<P: SpacePolicy>(&self, policy: &mut P) -> Option<BlockAddr> {
        policy
            .pick_free(self.all())
            .filter(|&b| (b.0 as usize) < self.n && self.get(b).takeable())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Greedy;

    fn table() -> BlockTable<8> {
        let mut t = BlockTable::new();
        t.reset(6);
        t
    }

    #[test]
    fn packing_round_trips_and_saturates() {
        let b = BlockInfo::new(BlockState::Full, 512, 99_999)
            .with_retire(true)
            .with_scrub(true);
        assert_eq!(
            (b.state(), b.valid(), b.erases(), b.retire(), b.scrub()),
            (BlockState::Full, 512, 99_999, true, true)
        );
        let b = b.with_retire(false);
        assert!(!b.retire() && b.scrub());
        for s in [
            BlockState::Free,
            BlockState::Window,
            BlockState::Full,
            BlockState::Bad,
            BlockState::Reserved,
        ] {
            assert_eq!(BlockInfo::new(s, 3, 7).state(), s);
        }
        let sat = BlockInfo::new(BlockState::Free, u16::MAX, u32::MAX);
        assert_eq!(sat.valid(), BlockInfo::MAX_VALID);
        assert_eq!(sat.erases(), BlockInfo::MAX_ERASES);
        assert_eq!(BlockInfo::MAX_ERASES, 131_071);
        assert_eq!(core::mem::size_of::<BlockInfo>(), 4);
        let mut t = table();
        t.loaded(BlockAddr(0), BlockState::Free, 0, BlockInfo::MAX_ERASES);
        t.erased(BlockAddr(0));
        assert_eq!(
            t.get(BlockAddr(0)).erases(),
            BlockInfo::MAX_ERASES,
            "saturates"
        );
        assert_eq!(
            t.get(BlockAddr(0)).state(),
            BlockState::Free,
            "the rest is untouched"
        );
    }

    #[test]
    fn window_life_cycle() {
        let mut t = table();
        assert!(t.join_window(BlockAddr(1)));
        assert!(
            !t.join_window(BlockAddr(1)),
            "a window block cannot join again"
        );
        t.erased(BlockAddr(1));
        t.page_programmed(BlockAddr(1));
        t.page_programmed(BlockAddr(1));
        assert_eq!((t.get(BlockAddr(1)).valid(), t.valid_total()), (2, 2));
        assert_eq!(t.settle(BlockAddr(1)), Settled::Filled);
        assert_eq!(
            t.settle(BlockAddr(1)),
            Settled::Kept,
            "full with valid pages stays"
        );
        assert!(
            !t.leave_window(BlockAddr(1)),
            "a full block is not in the window"
        );
        t.page_invalidated(BlockAddr(1));
        t.page_invalidated(BlockAddr(1));
        assert_eq!(t.valid_total(), 0);
        assert_eq!(t.settle(BlockAddr(1)), Settled::Freed);
        assert_eq!(t.get(BlockAddr(1)).erases(), 1);
        assert!(t.join_window(BlockAddr(1)) && t.leave_window(BlockAddr(1)));
        assert_eq!(t.get(BlockAddr(1)).state(), BlockState::Free);
    }

    #[test]
    fn the_window_list() {
        let mut t = table();
        assert!(t.admit(BlockAddr(0)) && t.admit(BlockAddr(1)) && t.admit(BlockAddr(2)));
        assert!(!t.admit(BlockAddr(1)), "already in the window");
        t.program_failed(BlockAddr(3));
        assert!(!t.admit(BlockAddr(3)), "waiting to be retired");
        assert!(!t.admit(BlockAddr(9)), "past the device");
        assert_eq!(t.window(), &[0, 1, 2].map(BlockAddr));
        assert_eq!(t.get(BlockAddr(1)).state(), BlockState::Window);
        assert_eq!(t.take_window_block(), Some((BlockAddr(0), false)));
        assert_eq!(t.window_unused(), &[1, 2].map(BlockAddr));
        // A checkpoint starts a new list from the blocks no head took.
        let (unused, ready) = t.restart_window();
        assert_eq!((&unused[..], ready), (&[1, 2].map(BlockAddr)[..], 0));
        assert!(t.window().is_empty());
        assert!(t.keep_in_window(BlockAddr(2)));
        assert!(!t.keep_in_window(BlockAddr(4)), "not a window block");
        assert!(t.leave_window(BlockAddr(1)));
        assert_eq!(t.window(), &[2].map(BlockAddr));
        assert_eq!(t.release_last(), Some(BlockAddr(2)));
        assert_eq!(t.get(BlockAddr(2)).state(), BlockState::Free);
        assert_eq!(t.release_last(), None);
        // A checkpoint's recorded window, then a marker found bad at mount.
        t.clear_window();
        assert!(t.load_window(BlockAddr(4)) && t.load_window(BlockAddr(5)));
        t.found_bad(BlockAddr(4));
        t.drop_bad_from_window();
        assert_eq!(t.window(), &[5].map(BlockAddr));
        assert_eq!(t.take_window_block(), Some((BlockAddr(5), false)));
        assert_eq!(t.take_window_block(), None);
    }

    #[test]
    fn blocks_erased_ahead_are_a_prefix_of_the_unused_ones() {
        let mut t = table();
        for b in 0..5 {
            assert!(t.admit(BlockAddr(b)));
        }
        assert_eq!(t.take_window_block(), Some((BlockAddr(0), false)));
        assert_eq!(t.next_unready(), Some(BlockAddr(1)));
        t.erased_ahead();
        // Block 2 fails its erase: it leaves the list; 3 is erased instead.
        assert_eq!(t.next_unready(), Some(BlockAddr(2)));
        t.drop_unready();
        assert_eq!(t.next_unready(), Some(BlockAddr(3)));
        t.erased_ahead();
        assert_eq!(t.window_ready(), 2);
        assert_eq!(t.window_unused(), &[1, 3, 4].map(BlockAddr));
        assert_eq!(t.take_window_block(), Some((BlockAddr(1), true)));
        // A checkpoint keeps the erased block first; the next one was not erased.
        let (unused, ready) = t.restart_window();
        assert_eq!((&unused[..], ready), (&[3, 4].map(BlockAddr)[..], 1));
        for (i, &b) in unused.iter().enumerate() {
            assert!(t.keep_in_window(b));
            if i < ready {
                t.kept_erased(b);
            }
        }
        assert_eq!(t.window_ready(), 1);
        assert_eq!(t.release_last(), Some(BlockAddr(4)));
        assert_eq!(t.release_last(), Some(BlockAddr(3)));
        assert_eq!(t.window_ready(), 0, "released with its list entry");
        // Only a prefix counts: a block kept after one that was not erased is not.
        let mut t = table();
        for b in 0..3 {
            assert!(t.admit(BlockAddr(b)));
        }
        t.erased_ahead();
        t.erased_ahead();
        let (unused, ready) = t.restart_window();
        assert_eq!(ready, 2);
        assert!(t.leave_window(unused[0]));
        assert!(t.keep_in_window(unused[1]));
        t.kept_erased(unused[1]);
        assert_eq!(t.window_ready(), 1);
        assert_eq!(t.take_window_block(), Some((BlockAddr(1), true)));
        assert_eq!(t.take_window_block(), None);
    }

    #[test]
    fn failed_program_retires_after_the_data_moves() {
        let mut t = table();
        assert!(t.join_window(BlockAddr(2)));
        t.page_programmed(BlockAddr(2));
        t.program_failed(BlockAddr(2));
        assert_eq!(t.settle(BlockAddr(2)), Settled::Filled);
        assert!(t.get(BlockAddr(2)).urgent());
        t.page_invalidated(BlockAddr(2));
        assert_eq!(t.settle(BlockAddr(2)), Settled::Retired);
        assert_eq!(t.get(BlockAddr(2)).state(), BlockState::Bad);
        assert!(
            t.get(BlockAddr(2)).retire(),
            "the marker is still to be written"
        );
        t.retired(BlockAddr(2));
        assert!(!t.get(BlockAddr(2)).retire());
        // A free block waiting to be retired is never taken.
        t.program_failed(BlockAddr(3));
        assert!(!t.join_window(BlockAddr(3)));
        assert!(!t.get(BlockAddr(3)).takeable());
    }

    #[test]
    fn bad_blocks_drop_their_pages() {
        let mut t = table();
        t.begin_load();
        t.loaded(BlockAddr(0), BlockState::Full, 5, 1);
        t.loaded(BlockAddr(1), BlockState::Full, 3, 1);
        assert_eq!(t.valid_total(), 8);
        t.found_bad(BlockAddr(0));
        assert_eq!((t.get(BlockAddr(0)).valid(), t.valid_total()), (0, 3));
        t.reserved(BlockAddr(1));
        assert_eq!(t.valid_total(), 0);
        #[cfg(feature = "alloc")]
        assert!(!t.rebuilt(BlockAddr(0), true) && !t.rebuilt(BlockAddr(1), false));
        t.begin_load();
        assert_eq!(t.valid_total(), 0);
        // Damaged counts saturate instead of wrapping.
        t.page_invalidated(BlockAddr(4));
        assert_eq!((t.get(BlockAddr(4)).valid(), t.valid_total()), (0, 0));
        // Events for blocks past the device change nothing.
        t.found_bad(BlockAddr(7));
        t.page_programmed(BlockAddr(7));
        assert_eq!((t.get(BlockAddr(7)), t.valid_total()), (BlockInfo::FREE, 0));
    }

    #[test]
    fn collection_and_scrub() {
        let mut t = table();
        t.loaded(BlockAddr(3), BlockState::Full, 4, 0);
        t.needs_scrub(BlockAddr(3));
        assert!(t.get(BlockAddr(3)).urgent());
        // Two pages moved; the counts still show two no backpointer claimed.
        t.page_invalidated(BlockAddr(3));
        t.page_invalidated(BlockAddr(3));
        assert_eq!(
            t.collected(BlockAddr(3), true),
            2,
            "unreadable pages keep the count"
        );
        assert!(!t.get(BlockAddr(3)).scrub());
        assert_eq!(t.collected(BlockAddr(3), false), 0);
        assert_eq!(t.valid_total(), 0);
    }

    #[test]
    fn urgent_blocks_come_before_the_policy() {
        let mut t = table();
        t.loaded(BlockAddr(0), BlockState::Full, 1, 0);
        t.loaded(BlockAddr(1), BlockState::Full, 60, 0);
        t.loaded(BlockAddr(2), BlockState::Full, 63, 0);
        let mut g = Greedy::DEFAULT;
        assert_eq!(
            t.pick_victim(&mut g, 64, Urgency::Foreground, &[]),
            Some(BlockAddr(0))
        );
        t.needs_scrub(BlockAddr(2));
        assert_eq!(
            t.pick_victim(&mut g, 64, Urgency::Foreground, &[]),
            Some(BlockAddr(2))
        );
        // A hidden block is neither the urgent pick nor the policy's.
        assert_eq!(
            t.pick_victim(&mut g, 64, Urgency::Foreground, &[BlockAddr(2)]),
            Some(BlockAddr(0))
        );
        assert_eq!(
            t.pick_victim(&mut g, 64, Urgency::Foreground, &[BlockAddr(0)]),
            Some(BlockAddr(2))
        );
        t.collected(BlockAddr(2), false);
        assert_eq!(
            t.pick_victim(&mut g, 64, Urgency::Background, &[BlockAddr(0)]),
            Some(BlockAddr(1))
        );
        assert_eq!(t.get(BlockAddr(0)).valid(), 1, "hiding changes nothing");
        // A free block waiting to be retired is not a free choice.
        for b in 3..6 {
            t.program_failed(BlockAddr(b));
        }
        assert_eq!(t.pick_free(&mut g), None);
        t.loaded(BlockAddr(5), BlockState::Free, 0, 9);
        assert_eq!(t.pick_free(&mut g), Some(BlockAddr(5)));
    }
}
