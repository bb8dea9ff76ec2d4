//! The block manager: per-block state, allocation heads per (parallel unit, class),
//! free-block accounting, victim choice and static wear leveling.
//!
//! # Job and invariants
//!
//! The manager decides *where* pages go and *which* blocks to reclaim; it never does
//! I/O. The caller (an FTL) tells it what happened through `notice_*` events and asks
//! it for decisions. After every call:
//!
//! - each block is in exactly one [`BlockPhase`]; `free_blocks(u)` equals the number of
//!   `Free` blocks of unit `u`;
//! - each (unit, class) has at most one `Open` block (its head), and every `Open`
//!   block is a head;
//! - `valid <= written <= pages_per_block` for every block;
//! - a block only becomes `Free` through [`BlockManager::notice_block_erased`], so the
//!   caller never programs a block the manager believes is erased but is not.
//!
//! # Bounded work per decision
//!
//! With `P = blocks_per_die` (blocks of one parallel unit) and `B` the device's blocks:
//!
//! | call | work |
//! |---|---|
//! | `notice_*`, `gc_urgency`, `free_blocks` | O(1) |
//! | `allocate`, `allocate_for_gc` (head has room) | O(1) |
//! | `allocate`, `allocate_for_gc` (opens a block) | O(P) wear-policy comparisons |
//! | `allocate_striped` | O(units) + one `allocate` |
//! | `choose_victim` | O(P) victim-policy scores |
//! | `static_wear_victim`, `erase_spread` | O(B) |
//!
//! # RAM
//!
//! `size_of::<BlockManager<BLOCKS, UNITS>>()` is at most `16 * BLOCKS + 24 * UNITS + 64`
//! bytes with the zero-sized default policies (16.2 KiB for a 1024-block part). Nothing is
//! allocated; put large managers in a `static` rather than on a small stack.

use nand_hal::{BlockAddr, Geometry, PageAddr};

use crate::block::{BlockPhase, ManagedBlock};
use crate::class::{Class, CLASSES};
use crate::victim::{Candidate, GcMode, GreedyCostBenefit, VictimPolicy};
use crate::wear::{Leveling, WearPolicy};

/// Free-space thresholds, per parallel unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ManagerConfig {
    /// Free blocks per unit kept back for collection. User allocations that would
    /// take the unit to this many free blocks fail with [`AllocError::NeedsGc`];
    /// [`BlockManager::allocate_for_gc`] may use them. At least 1: collecting one victim
    /// (which has at least one invalid page) opens at most one block and frees one.
    /// Keep one more per victim you collect before erasing the previous one.
    pub reserve_blocks: u32,
    /// At or below this many free blocks (and above `reserve_blocks`),
    /// [`BlockManager::gc_urgency`] suggests background collection.
    pub background_blocks: u32,
}

impl ManagerConfig {
    /// Two reserve blocks, background collection from eight free blocks.
    pub const DEFAULT: ManagerConfig = ManagerConfig {
        reserve_blocks: 2,
        background_blocks: 8,
    };
}

impl Default for ManagerConfig {
    fn default() -> Self {
        ManagerConfig::DEFAULT
    }
}

/// A geometry or configuration the manager cannot handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ConfigError {
    /// The device has more blocks than the `BLOCKS` capacity.
    TooManyBlocks {
        /// Blocks on the device.
        device: u32,
        /// The manager's capacity.
        capacity: u32,
    },
    /// The device has more dies than the `UNITS` capacity.
    TooManyUnits {
        /// Dies on the device.
        device: u32,
        /// The manager's capacity.
        capacity: u32,
    },
    /// `reserve_blocks` is 0, `background_blocks < reserve_blocks`, or the reserve
    /// leaves a unit no blocks for data.
    Thresholds,
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ConfigError::TooManyBlocks { device, capacity } => {
                write!(f, "device has {device} blocks, manager holds {capacity}")
            }
            ConfigError::TooManyUnits { device, capacity } => {
                write!(f, "device has {device} dies, manager holds {capacity}")
            }
            ConfigError::Thresholds => f.write_str("invalid free-block thresholds"),
        }
    }
}

impl core::error::Error for ConfigError {}

/// Why an allocation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AllocError {
    /// No such parallel unit.
    NoSuchUnit,
    /// Opening a block would eat into the collection reserve: collect a victim of this
    /// unit first (foreground GC), or write to another unit.
    NeedsGc,
    /// The unit has no free block at all (only [`BlockManager::allocate_for_gc`] can
    /// see this, when more collections run at once than the reserve allows).
    NoFreeBlock,
}

impl core::fmt::Display for AllocError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            AllocError::NoSuchUnit => "no such parallel unit",
            AllocError::NeedsGc => "unit is at its collection reserve",
            AllocError::NoFreeBlock => "unit has no free block",
        })
    }
}

impl core::error::Error for AllocError {}

/// An event that does not fit the manager's state: a bug in the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EventError {
    /// The block is outside the geometry.
    NoSuchBlock,
    /// The block is in a state where this event cannot happen (for example a page
    /// invalidated in a free block, or a bad block erased).
    WrongState(BlockPhase),
    /// More pages invalidated than were valid.
    NoValidPages,
    /// A restored block claims more valid than written pages, or more pages than a
    /// block has.
    BadCounts,
}

impl core::fmt::Display for EventError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            EventError::NoSuchBlock => f.write_str("no such block"),
            EventError::WrongState(s) => write!(f, "event does not fit block state {s:?}"),
            EventError::NoValidPages => f.write_str("block has no valid page to invalidate"),
            EventError::BadCounts => f.write_str("inconsistent page counts"),
        }
    }
}

impl core::error::Error for EventError {}

/// A page handed out by an allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Allocation {
    /// The page to program.
    pub page: PageAddr,
    /// Its block.
    pub block: BlockAddr,
    /// Its parallel unit (device-wide die index).
    pub unit: u32,
    /// Whether this allocation opened a new block (the caller may need to record it,
    /// e.g. in an updating window, before programming).
    pub opened: bool,
}

/// How badly a unit needs collection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GcUrgency {
    /// Enough free blocks.
    None,
    /// Collect when idle ([`GcMode::Background`]).
    Background,
    /// Collect before the next user allocation that opens a block
    /// ([`GcMode::Foreground`]).
    Foreground,
}

/// Why a block was chosen for collection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Reason {
    /// Space reclamation in the given mode.
    Gc(GcMode),
    /// Static wear leveling: the block holds cold data and is far less worn than the
    /// rest.
    StaticWear,
}

/// A block chosen for collection. Move its valid pages (allocating with
/// [`Victim::relocation_class`] through [`BlockManager::allocate_for_gc`] and calling
/// [`BlockManager::notice_page_invalidated`] for each), erase it, then call
/// [`BlockManager::notice_block_erased`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Victim {
    /// The block.
    pub block: BlockAddr,
    /// Its parallel unit.
    pub unit: u32,
    /// Valid pages to move.
    pub valid: u16,
    /// Pages written in it (`written - valid` pages are reclaimed).
    pub written: u16,
    /// The class of its data.
    pub class: Class,
    /// Why it was chosen.
    pub reason: Reason,
}

impl Victim {
    /// The class its valid pages should be rewritten as.
    pub const fn relocation_class(&self) -> Class {
        match self.reason {
            Reason::StaticWear => Class::Cold,
            Reason::Gc(_) => self.class.relocated(),
        }
    }
}

/// What a block held before a restart, for rebuilding the manager at mount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Restored {
    /// Erased (or to be erased before use).
    Free {
        /// Its erase count.
        erase_count: u32,
    },
    /// Holding data.
    Used {
        /// Its erase count.
        erase_count: u32,
        /// The class of its data.
        class: Class,
        /// Pages programmed.
        written: u16,
        /// Pages still valid.
        valid: u16,
    },
    /// Retired.
    Bad,
}

/// Allocation, free-space accounting, victim choice and wear leveling for up to
/// `BLOCKS` blocks on up to `UNITS` parallel units (dies), with victim policy `V` and
/// wear policy `W`.
///
/// # Example
///
/// ```
/// use nand_hal::{BlockAddr, Geometry};
/// use paragc::{BlockManager, Class, ManagerConfig, GcMode, GcUrgency};
///
/// // 2 dies x 8 blocks x 4 pages.
/// let geo = Geometry::new(2048, 64, 4, 8, 1, 2, 1);
/// let mut m: BlockManager<16, 2> = BlockManager::new(geo, ManagerConfig::DEFAULT).unwrap();
///
/// // Hot and cold data never share a block.
/// let hot = m.allocate(0, Class::Hot).unwrap();
/// let cold = m.allocate(0, Class::Cold).unwrap();
/// assert_ne!(hot.block, cold.block);
/// assert!(hot.opened && cold.opened);
///
/// // Fill the hot block, overwrite it all: it becomes an all-invalid victim.
/// for _ in 0..3 {
///     m.allocate(0, Class::Hot).unwrap();
/// }
/// for _ in 0..4 {
///     m.notice_page_invalidated(hot.block).unwrap();
/// }
/// let v = m.choose_victim(0, GcMode::Foreground).unwrap();
/// assert_eq!((v.block, v.valid), (hot.block, 0));
/// // ... the caller erases it ...
/// m.notice_block_erased(v.block).unwrap();
/// assert_eq!(m.block(v.block).unwrap().erase_count(), 1);
/// assert_eq!(m.gc_urgency(0), GcUrgency::Background);
/// ```
#[derive(Clone, Debug)]
pub struct BlockManager<
    const BLOCKS: usize,
    const UNITS: usize,
    V = GreedyCostBenefit,
    W = Leveling,
> {
    geometry: Geometry,
    config: ManagerConfig,
    blocks: [ManagedBlock; BLOCKS],
    heads: [[u32; CLASSES]; UNITS],
    free: [u32; UNITS],
    stripe: [u8; CLASSES],
    clock: u32,
    max_erase: u32,
    victim: V,
    wear: W,
}

/// `heads` entry for "no open block".
const NO_HEAD: u32 = u32::MAX;

impl<const BLOCKS: usize, const UNITS: usize> BlockManager<BLOCKS, UNITS> {
    /// A manager for `geometry` with the default policies, every block free with erase
    /// count 0. Report bad blocks and known erase counts (or restore a mounted state)
    /// before allocating.
    pub fn new(geometry: Geometry, config: ManagerConfig) -> Result<Self, ConfigError> {
        Self::with_policies(geometry, config, GreedyCostBenefit, Leveling)
    }
}

impl<const BLOCKS: usize, const UNITS: usize, V: VictimPolicy, W: WearPolicy>
    BlockManager<BLOCKS, UNITS, V, W>
{
    /// A manager with explicit victim and wear policies.
    pub fn with_policies(
        geometry: Geometry,
        config: ManagerConfig,
        victim: V,
        wear: W,
    ) -> Result<Self, ConfigError> {
        if geometry.blocks() as usize > BLOCKS {
            return Err(ConfigError::TooManyBlocks {
                device: geometry.blocks(),
                capacity: BLOCKS as u32,
            });
        }
        if geometry.dies() as usize > UNITS {
            return Err(ConfigError::TooManyUnits {
                device: geometry.dies(),
                capacity: UNITS as u32,
            });
        }
        if config.reserve_blocks == 0
            || config.background_blocks < config.reserve_blocks
            || config.reserve_blocks.saturating_add(CLASSES as u32) >= geometry.blocks_per_die()
        {
            return Err(ConfigError::Thresholds);
        }
        let mut free = [0u32; UNITS];
        for f in free.iter_mut().take(geometry.dies() as usize) {
            *f = geometry.blocks_per_die();
        }
        Ok(BlockManager {
            geometry,
            config,
            blocks: [ManagedBlock::FRESH; BLOCKS],
            heads: [[NO_HEAD; CLASSES]; UNITS],
            free,
            stripe: [0; CLASSES],
            clock: 0,
            max_erase: 0,
            victim,
            wear,
        })
    }

    // ---------------------------------------------------------------------------------
    // Queries

    /// The geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }
    /// The thresholds.
    pub fn config(&self) -> &ManagerConfig {
        &self.config
    }
    /// Parallel units (dies) of the device.
    pub fn units(&self) -> u32 {
        self.geometry.dies()
    }
    /// The parallel unit holding `block`.
    pub fn unit_of(&self, block: BlockAddr) -> u32 {
        self.geometry.die_of(block).index as u32
    }
    /// The summary of `block`.
    pub fn block(&self, block: BlockAddr) -> Option<&ManagedBlock> {
        if self.geometry.contains_block(block) {
            self.blocks.get(block.0 as usize)
        } else {
            None
        }
    }
    /// Free blocks on `unit`.
    pub fn free_blocks(&self, unit: u32) -> u32 {
        self.free.get(unit as usize).copied().unwrap_or(0)
    }
    /// Free blocks on the whole device.
    pub fn total_free_blocks(&self) -> u32 {
        self.free.iter().sum()
    }
    /// The open block of (`unit`, `class`), if any.
    pub fn head(&self, unit: u32, class: Class) -> Option<BlockAddr> {
        match self.heads.get(unit as usize) {
            Some(h) if h[class.index()] != NO_HEAD => Some(BlockAddr(h[class.index()])),
            _ => None,
        }
    }
    /// The allocation clock: pages allocated so far (wrapping).
    pub fn clock(&self) -> u32 {
        self.clock
    }
    /// The highest erase count seen (bad blocks included).
    pub fn max_erase_count(&self) -> u32 {
        self.max_erase
    }
    /// `(min, max)` erase count over blocks not marked bad. O(B).
    pub fn erase_spread(&self) -> (u32, u32) {
        let mut min = u32::MAX;
        let mut max = 0;
        for b in self.device_blocks() {
            if b.state != BlockPhase::Bad {
                min = min.min(b.erase_count);
                max = max.max(b.erase_count);
            }
        }
        if min == u32::MAX {
            (0, 0)
        } else {
            (min, max)
        }
    }
    /// The victim policy.
    pub fn victim_policy(&self) -> &V {
        &self.victim
    }
    /// The wear policy.
    pub fn wear_policy(&self) -> &W {
        &self.wear
    }

    /// How much `unit` needs collection. O(1).
    pub fn gc_urgency(&self, unit: u32) -> GcUrgency {
        let free = self.free_blocks(unit);
        if free <= self.config.reserve_blocks {
            GcUrgency::Foreground
        } else if free <= self.config.background_blocks {
            GcUrgency::Background
        } else {
            GcUrgency::None
        }
    }

    /// Whether a user allocation of `class` on `unit` can succeed without collection.
    /// O(1).
    pub fn can_allocate(&self, unit: u32, class: Class) -> bool {
        if unit >= self.units() {
            return false;
        }
        self.head(unit, class).is_some() || self.free_blocks(unit) > self.config.reserve_blocks
    }

    // ---------------------------------------------------------------------------------
    // Allocation

    /// The next page of `class` on `unit` for user data. Opens a block (the free block
    /// the wear policy prefers) when the head is full, unless that would leave the unit
    /// at its collection reserve: then [`AllocError::NeedsGc`].
    pub fn allocate(&mut self, unit: u32, class: Class) -> Result<Allocation, AllocError> {
        self.alloc(unit, class, self.config.reserve_blocks)
    }

    /// Like [`BlockManager::allocate`] but may use the collection reserve: for pages
    /// moved by garbage collection or wear leveling.
    pub fn allocate_for_gc(&mut self, unit: u32, class: Class) -> Result<Allocation, AllocError> {
        self.alloc(unit, class, 0)
    }

    /// A user page of `class` on the next unit in round-robin order for that class
    /// (striping page by page), skipping units that need collection first. Fails with
    /// [`AllocError::NeedsGc`] only if every unit does.
    pub fn allocate_striped(&mut self, class: Class) -> Result<Allocation, AllocError> {
        let units = self.units();
        let start = self.stripe[class.index()] as u32 % units;
        for i in 0..units {
            let u = (start + i) % units;
            if self.can_allocate(u, class) {
                self.stripe[class.index()] = ((u + 1) % units) as u8;
                return self.allocate(u, class);
            }
        }
        Err(AllocError::NeedsGc)
    }

    fn alloc(&mut self, unit: u32, class: Class, keep: u32) -> Result<Allocation, AllocError> {
        if unit >= self.units() {
            return Err(AllocError::NoSuchUnit);
        }
        let ppb = self.geometry.pages_per_block() as u16;
        let mut opened = false;
        let mut head = self.heads[unit as usize][class.index()];
        if head == NO_HEAD {
            let free = self.free[unit as usize];
            if free == 0 {
                return Err(AllocError::NoFreeBlock);
            }
            if free <= keep {
                return Err(AllocError::NeedsGc);
            }
            head = self.pick_free(unit, class).ok_or(AllocError::NoFreeBlock)?;
            let b = &mut self.blocks[head as usize];
            b.state = BlockPhase::Open;
            b.class = class;
            b.written = 0;
            b.valid = 0;
            self.free[unit as usize] -= 1;
            self.heads[unit as usize][class.index()] = head;
            opened = true;
        }
        let clock = self.clock;
        self.clock = self.clock.wrapping_add(1);
        let b = &mut self.blocks[head as usize];
        let page = self.geometry.page(BlockAddr(head), b.written as u32);
        b.written += 1;
        b.valid += 1;
        b.stamp = clock;
        if b.written >= ppb {
            b.state = BlockPhase::Full;
            self.heads[unit as usize][class.index()] = NO_HEAD;
        }
        Ok(Allocation {
            page,
            block: BlockAddr(head),
            unit,
            opened,
        })
    }

    fn pick_free(&self, unit: u32, class: Class) -> Option<u32> {
        let first = self.geometry.first_block_of_die(unit).0;
        let mut best: Option<(u32, u32)> = None;
        for b in first..first + self.geometry.blocks_per_die() {
            let info = &self.blocks[b as usize];
            if info.state != BlockPhase::Free {
                continue;
            }
            match best {
                Some((_, e)) if !self.wear.prefer(class, info.erase_count, e) => {}
                _ => best = Some((b, info.erase_count)),
            }
        }
        best.map(|(b, _)| b)
    }

    /// Closes the head of (`unit`, `class`) early (for example after a program failure
    /// in it): the block becomes `Full` and a collection candidate, and the next
    /// allocation opens a fresh block. Returns the closed block.
    pub fn close_head(&mut self, unit: u32, class: Class) -> Option<BlockAddr> {
        let b = self.head(unit, class)?;
        self.heads[unit as usize][class.index()] = NO_HEAD;
        self.blocks[b.0 as usize].state = BlockPhase::Full;
        Some(b)
    }

    // ---------------------------------------------------------------------------------
    // Events

    fn info_mut(&mut self, block: BlockAddr) -> Result<&mut ManagedBlock, EventError> {
        if !self.geometry.contains_block(block) {
            return Err(EventError::NoSuchBlock);
        }
        self.blocks
            .get_mut(block.0 as usize)
            .ok_or(EventError::NoSuchBlock)
    }

    /// A page of `block` no longer holds live data (overwritten, deleted, or moved by
    /// collection). O(1).
    pub fn notice_page_invalidated(&mut self, block: BlockAddr) -> Result<(), EventError> {
        let b = self.info_mut(block)?;
        match b.state {
            BlockPhase::Open | BlockPhase::Full | BlockPhase::Collecting => {}
            s => return Err(EventError::WrongState(s)),
        }
        if b.valid == 0 {
            return Err(EventError::NoValidPages);
        }
        b.valid -= 1;
        Ok(())
    }

    /// `block` was erased successfully: it is free again, one erase older. Erasing a
    /// block that is still an allocation head closes the head. O(1).
    pub fn notice_block_erased(&mut self, block: BlockAddr) -> Result<(), EventError> {
        let unit = self.unit_of_checked(block)?;
        let b = self.blocks[block.0 as usize];
        match b.state {
            BlockPhase::Bad => return Err(EventError::WrongState(BlockPhase::Bad)),
            BlockPhase::Open => self.heads[unit as usize][b.class.index()] = NO_HEAD,
            _ => {}
        }
        if b.state != BlockPhase::Free {
            self.free[unit as usize] += 1;
        }
        let b = &mut self.blocks[block.0 as usize];
        b.erase_count = b.erase_count.saturating_add(1);
        b.state = BlockPhase::Free;
        b.written = 0;
        b.valid = 0;
        self.max_erase = self.max_erase.max(b.erase_count);
        Ok(())
    }

    /// `block` is bad (factory marker, erase failure, or retired after a program
    /// failure once its data was moved). It is never allocated again. O(1).
    pub fn notice_block_bad(&mut self, block: BlockAddr) -> Result<(), EventError> {
        let unit = self.unit_of_checked(block)?;
        let b = self.blocks[block.0 as usize];
        match b.state {
            BlockPhase::Free => self.free[unit as usize] -= 1,
            BlockPhase::Open => self.heads[unit as usize][b.class.index()] = NO_HEAD,
            _ => {}
        }
        let b = &mut self.blocks[block.0 as usize];
        b.state = BlockPhase::Bad;
        b.valid = 0;
        Ok(())
    }

    /// Sets a block's erase count (from a persisted wear table). O(1).
    pub fn set_erase_count(&mut self, block: BlockAddr, count: u32) -> Result<(), EventError> {
        let b = self.info_mut(block)?;
        b.erase_count = count;
        self.max_erase = self.max_erase.max(count);
        Ok(())
    }

    /// Rebuilds one block's state at mount. A `Used` block with unwritten pages becomes
    /// the head of its (unit, class) if that head is still empty, otherwise it is
    /// treated as full (its remaining pages are reclaimed by the next collection).
    /// Restore every block before the first allocation. O(1).
    pub fn restore_block(&mut self, block: BlockAddr, what: Restored) -> Result<(), EventError> {
        let unit = self.unit_of_checked(block)? as usize;
        let ppb = self.geometry.pages_per_block() as u16;
        let old = self.blocks[block.0 as usize];
        if old.state == BlockPhase::Open {
            self.heads[unit][old.class.index()] = NO_HEAD;
        }
        if old.state == BlockPhase::Free {
            self.free[unit] -= 1;
        }
        let mut info = ManagedBlock::FRESH;
        match what {
            Restored::Free { erase_count } => {
                info.erase_count = erase_count;
                self.free[unit] += 1;
            }
            Restored::Bad => {
                info.erase_count = old.erase_count;
                info.state = BlockPhase::Bad;
            }
            Restored::Used {
                erase_count,
                class,
                written,
                valid,
            } => {
                if valid > written || written > ppb || written == 0 {
                    if old.state == BlockPhase::Free {
                        self.free[unit] += 1;
                    }
                    return Err(EventError::BadCounts);
                }
                info.erase_count = erase_count;
                info.class = class;
                info.written = written;
                info.valid = valid;
                info.stamp = self.clock;
                info.state = if written < ppb && self.heads[unit][class.index()] == NO_HEAD {
                    self.heads[unit][class.index()] = block.0;
                    BlockPhase::Open
                } else {
                    BlockPhase::Full
                };
            }
        }
        self.max_erase = self.max_erase.max(info.erase_count);
        self.blocks[block.0 as usize] = info;
        Ok(())
    }

    fn unit_of_checked(&self, block: BlockAddr) -> Result<u32, EventError> {
        if self.geometry.contains_block(block) && (block.0 as usize) < BLOCKS {
            Ok(self.unit_of(block))
        } else {
            Err(EventError::NoSuchBlock)
        }
    }

    // ---------------------------------------------------------------------------------
    // Victims

    /// Chooses the block of `unit` to collect in `mode` and marks it
    /// [`BlockPhase::Collecting`], or `None` if no full block has an invalid page.
    /// Scans the unit's blocks once (O(P) policy scores).
    pub fn choose_victim(&mut self, unit: u32, mode: GcMode) -> Option<Victim> {
        let block = self.peek_victim(unit, mode)?;
        Some(self.claim(block, Reason::Gc(mode)))
    }

    /// The block [`BlockManager::choose_victim`] would choose, without claiming it.
    pub fn peek_victim(&self, unit: u32, mode: GcMode) -> Option<BlockAddr> {
        if unit >= self.units() {
            return None;
        }
        let first = self.geometry.first_block_of_die(unit).0;
        let mut best = (0u64, 0u32);
        for b in first..first + self.geometry.blocks_per_die() {
            let info = &self.blocks[b as usize];
            if info.state != BlockPhase::Full {
                continue;
            }
            let c = Candidate {
                written: info.written,
                valid: info.valid,
                age: self.clock.wrapping_sub(info.stamp),
                erase_count: info.erase_count,
                class: info.class,
            };
            let s = self.victim.score(&c, mode);
            if s > best.0 {
                best = (s, b);
            }
        }
        if best.0 == 0 {
            None
        } else {
            Some(BlockAddr(best.1))
        }
    }

    /// Static wear leveling: if the spread between the most-erased good block and the
    /// least-erased `Full` block exceeds the wear policy's threshold, claims that `Full`
    /// block (its data is the coldest) so the caller moves the data out and erases it.
    /// One pass over the device's blocks: O(B).
    pub fn static_wear_victim(&mut self) -> Option<Victim> {
        let spread = self.wear.static_spread()?;
        let mut best: Option<(u32, u32)> = None;
        let mut max = 0;
        for (i, b) in self.device_blocks().iter().enumerate() {
            if b.state == BlockPhase::Bad {
                continue;
            }
            max = max.max(b.erase_count);
            if b.state == BlockPhase::Full && best.is_none_or(|(_, e)| b.erase_count < e) {
                best = Some((i as u32, b.erase_count));
            }
        }
        let (block, erase) = best?;
        if max.saturating_sub(erase) <= spread {
            return None;
        }
        Some(self.claim(BlockAddr(block), Reason::StaticWear))
    }

    fn claim(&mut self, block: BlockAddr, reason: Reason) -> Victim {
        let unit = self.unit_of(block);
        let b = &mut self.blocks[block.0 as usize];
        b.state = BlockPhase::Collecting;
        Victim {
            block,
            unit,
            valid: b.valid,
            written: b.written,
            class: b.class,
            reason,
        }
    }

    fn device_blocks(&self) -> &[ManagedBlock] {
        &self.blocks[..self.geometry.blocks() as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::victim::GreedyVictim;
    use crate::wear::NoLeveling;

    /// 2 dies x 16 blocks x 4 pages.
    const GEO: Geometry = Geometry::new(2048, 64, 4, 16, 1, 2, 1);
    type M = BlockManager<32, 2>;

    fn mgr() -> M {
        M::new(GEO, ManagerConfig::DEFAULT).unwrap()
    }

    fn check_invariants<V: VictimPolicy, W: WearPolicy>(m: &BlockManager<32, 2, V, W>) {
        for u in 0..m.units() {
            let first = GEO.first_block_of_die(u).0;
            let blocks = first..first + GEO.blocks_per_die();
            let free = blocks
                .clone()
                .filter(|&b| m.blocks[b as usize].state == BlockPhase::Free)
                .count() as u32;
            assert_eq!(free, m.free_blocks(u));
            for c in Class::ALL {
                if let Some(h) = m.head(u, c) {
                    let b = m.blocks[h.0 as usize];
                    assert_eq!((b.state, b.class), (BlockPhase::Open, c));
                    assert!(blocks.contains(&h.0));
                }
            }
            for b in blocks {
                let i = m.blocks[b as usize];
                assert!(i.valid <= i.written && i.written as u32 <= GEO.pages_per_block());
                if i.state == BlockPhase::Open {
                    assert_eq!(m.head(u, i.class), Some(BlockAddr(b)));
                }
            }
        }
    }

    #[test]
    fn rejects_geometries_and_thresholds_it_cannot_hold() {
        assert_eq!(
            BlockManager::<16, 2>::new(GEO, ManagerConfig::DEFAULT).err(),
            Some(ConfigError::TooManyBlocks {
                device: 32,
                capacity: 16
            })
        );
        assert_eq!(
            BlockManager::<32, 1>::new(GEO, ManagerConfig::DEFAULT).err(),
            Some(ConfigError::TooManyUnits {
                device: 2,
                capacity: 1
            })
        );
        for bad in [
            ManagerConfig {
                reserve_blocks: 0,
                background_blocks: 4,
            },
            ManagerConfig {
                reserve_blocks: 3,
                background_blocks: 2,
            },
            ManagerConfig {
                reserve_blocks: 11,
                background_blocks: 12,
            },
        ] {
            assert_eq!(M::new(GEO, bad).err(), Some(ConfigError::Thresholds));
        }
    }

    #[test]
    fn pages_fill_blocks_in_order_and_classes_stay_apart() {
        let mut m = mgr();
        let mut last = None;
        for i in 0..4 {
            let a = m.allocate(1, Class::Log).unwrap();
            assert_eq!(a.unit, 1);
            assert_eq!(GEO.page_in_block(a.page), i);
            assert_eq!(a.opened, i == 0);
            if let Some(b) = last {
                assert_eq!(a.block, b);
            }
            last = Some(a.block);
        }
        let b = last.unwrap();
        assert_eq!(m.block(b).unwrap().state(), BlockPhase::Full);
        assert_eq!(m.head(1, Class::Log), None);
        let meta = m.allocate(1, Class::Meta).unwrap();
        assert_ne!(meta.block, b);
        assert_eq!(m.free_blocks(1), 14);
        assert_eq!(m.clock(), 5);
        check_invariants(&m);
    }

    #[test]
    fn striping_rotates_units_per_class() {
        let mut m = mgr();
        let units: [u32; 4] =
            core::array::from_fn(|_| m.allocate_striped(Class::Hot).unwrap().unit);
        assert_eq!(units, [0, 1, 0, 1]);
        assert_eq!(m.allocate_striped(Class::Cold).unwrap().unit, 0);
    }

    #[test]
    fn user_allocation_stops_at_the_reserve_and_gc_may_use_it() {
        let mut m = mgr();
        // 16 blocks, reserve 2: 14 blocks of user data.
        for _ in 0..14 * 4 {
            m.allocate(0, Class::Warm).unwrap();
        }
        assert_eq!(m.free_blocks(0), 2);
        assert_eq!(m.gc_urgency(0), GcUrgency::Foreground);
        assert!(!m.can_allocate(0, Class::Warm));
        assert_eq!(m.allocate(0, Class::Warm), Err(AllocError::NeedsGc));
        assert_eq!(m.allocate(2, Class::Warm), Err(AllocError::NoSuchUnit));
        for _ in 0..8 {
            m.allocate_for_gc(0, Class::Cold).unwrap();
        }
        assert_eq!(
            m.allocate_for_gc(0, Class::Cold),
            Err(AllocError::NoFreeBlock)
        );
        check_invariants(&m);
    }

    #[test]
    fn greedy_and_cost_benefit_pick_different_victims() {
        let mut m = mgr();
        // Block A: written first, 2 of 4 pages die. Block B: written last, 3 die.
        let a: [Allocation; 4] = core::array::from_fn(|_| m.allocate(0, Class::Cold).unwrap());
        for _ in 0..200 {
            let x = m.allocate(0, Class::Hot).unwrap();
            m.notice_page_invalidated(x.block).unwrap();
            if m.block(x.block).unwrap().state() == BlockPhase::Full {
                let v = m.choose_victim(0, GcMode::Foreground).unwrap();
                assert_eq!(v.valid, 0);
                m.notice_block_erased(v.block).unwrap();
            }
        }
        let b: [Allocation; 4] = core::array::from_fn(|_| m.allocate(0, Class::Warm).unwrap());
        m.notice_page_invalidated(a[0].block).unwrap();
        m.notice_page_invalidated(a[1].block).unwrap();
        for _ in 0..3 {
            m.notice_page_invalidated(b[0].block).unwrap();
        }
        assert_eq!(m.peek_victim(0, GcMode::Foreground), Some(b[0].block));
        assert_eq!(m.peek_victim(0, GcMode::Background), Some(a[0].block));
        let v = m.choose_victim(0, GcMode::Background).unwrap();
        assert_eq!(
            (v.block, v.valid, v.reason, v.relocation_class()),
            (a[0].block, 2, Reason::Gc(GcMode::Background), Class::Cold)
        );
        assert_eq!(m.block(v.block).unwrap().state(), BlockPhase::Collecting);
        // A claimed block is not offered twice.
        assert_eq!(m.peek_victim(0, GcMode::Background), Some(b[0].block));
        check_invariants(&m);
    }

    #[test]
    fn events_that_do_not_fit_are_errors() {
        let mut m = mgr();
        assert_eq!(
            m.notice_page_invalidated(BlockAddr(3)),
            Err(EventError::WrongState(BlockPhase::Free))
        );
        assert_eq!(
            m.notice_page_invalidated(BlockAddr(99)),
            Err(EventError::NoSuchBlock)
        );
        assert_eq!(
            m.notice_block_erased(BlockAddr(32)),
            Err(EventError::NoSuchBlock)
        );
        let a = m.allocate(0, Class::Hot).unwrap();
        m.notice_page_invalidated(a.block).unwrap();
        assert_eq!(
            m.notice_page_invalidated(a.block),
            Err(EventError::NoValidPages)
        );
        m.notice_block_bad(BlockAddr(5)).unwrap();
        assert_eq!(
            m.notice_block_erased(BlockAddr(5)),
            Err(EventError::WrongState(BlockPhase::Bad))
        );
        check_invariants(&m);
    }

    #[test]
    fn bad_blocks_are_never_allocated_and_heads_survive_retirement() {
        let mut m = BlockManager::<32, 2, GreedyVictim, NoLeveling>::with_policies(
            GEO,
            ManagerConfig::DEFAULT,
            GreedyVictim,
            NoLeveling,
        )
        .unwrap();
        for b in 0..8 {
            m.notice_block_bad(BlockAddr(b)).unwrap();
        }
        assert_eq!(m.free_blocks(0), 8);
        let a = m.allocate(0, Class::Hot).unwrap();
        assert_eq!(a.block, BlockAddr(8));
        // A program failure: close the head, retire the block.
        assert_eq!(m.close_head(0, Class::Hot), Some(BlockAddr(8)));
        m.notice_block_bad(BlockAddr(8)).unwrap();
        assert_eq!(m.allocate(0, Class::Hot).unwrap().block, BlockAddr(9));
        assert_eq!(m.erase_spread(), (0, 0));
        check_invariants(&m);
    }

    #[test]
    fn dynamic_leveling_gives_hot_data_young_blocks_and_cold_data_old_ones() {
        let mut m = mgr();
        for b in 0..16 {
            m.set_erase_count(BlockAddr(b), 100 + (b * 7) % 16).unwrap();
        }
        let hot = m.allocate(0, Class::Hot).unwrap().block;
        let cold = m.allocate(0, Class::Cold).unwrap().block;
        assert_eq!(m.block(hot).unwrap().erase_count(), 100);
        assert_eq!(m.block(cold).unwrap().erase_count(), 115);
    }

    #[test]
    fn static_leveling_claims_the_least_worn_full_block_past_the_spread() {
        let mut m = mgr();
        let cold: [Allocation; 4] = core::array::from_fn(|_| m.allocate(0, Class::Cold).unwrap());
        let b = cold[0].block;
        assert_eq!(m.static_wear_victim(), None);
        m.set_erase_count(BlockAddr(31), 16).unwrap();
        assert_eq!(m.static_wear_victim(), None, "spread 16 is not past 16");
        m.set_erase_count(BlockAddr(31), 17).unwrap();
        let v = m.static_wear_victim().unwrap();
        assert_eq!(
            (v.block, v.valid, v.reason, v.relocation_class()),
            (b, 4, Reason::StaticWear, Class::Cold)
        );
        assert_eq!(m.erase_spread(), (0, 17));
    }

    #[test]
    fn restore_rebuilds_heads_and_free_counts() {
        let mut m = mgr();
        m.restore_block(
            BlockAddr(2),
            Restored::Used {
                erase_count: 5,
                class: Class::Meta,
                written: 2,
                valid: 1,
            },
        )
        .unwrap();
        m.restore_block(
            BlockAddr(3),
            Restored::Used {
                erase_count: 5,
                class: Class::Meta,
                written: 3,
                valid: 3,
            },
        )
        .unwrap();
        m.restore_block(BlockAddr(4), Restored::Bad).unwrap();
        m.restore_block(BlockAddr(5), Restored::Free { erase_count: 9 })
            .unwrap();
        assert_eq!(
            m.restore_block(
                BlockAddr(6),
                Restored::Used {
                    erase_count: 0,
                    class: Class::Hot,
                    written: 2,
                    valid: 3,
                }
            ),
            Err(EventError::BadCounts)
        );
        assert_eq!(m.head(0, Class::Meta), Some(BlockAddr(2)));
        assert_eq!(m.block(BlockAddr(3)).unwrap().state(), BlockPhase::Full);
        assert_eq!(m.free_blocks(0), 13);
        assert_eq!(m.max_erase_count(), 9);
        let next = m.allocate(0, Class::Meta).unwrap();
        assert_eq!(
            (next.block, GEO.page_in_block(next.page), next.opened),
            (BlockAddr(2), 2, false)
        );
        check_invariants(&m);
    }

    #[test]
    fn erasing_an_open_head_closes_it() {
        let mut m = mgr();
        let a = m.allocate(1, Class::Hot).unwrap();
        m.notice_block_erased(a.block).unwrap();
        assert_eq!(m.head(1, Class::Hot), None);
        assert_eq!(m.free_blocks(1), 16);
        check_invariants(&m);
    }
}

#[cfg(test)]
mod size {
    use super::*;

    #[test]
    fn ram_matches_the_documented_bound() {
        let s = core::mem::size_of::<BlockManager<1024, 8>>();
        assert!(s <= 16 * 1024 + 24 * 8 + 64, "{s}");
    }
}
