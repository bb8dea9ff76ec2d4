//! Wear leveling: which free block a new allocation head gets (dynamic), and when cold
//! data must leave a little-worn block (static).
//!
//! - **Dynamic.** When a head needs a block, the [`crate::BlockManager`] scans the
//!   unit's free blocks and keeps the one the [`WearPolicy`] prefers. [`Leveling`] gives
//!   short-lived classes (hot, warm, metadata, log) the least-worn free block, so the
//!   blocks that will be erased again soon are the young ones, and gives
//!   [`Class::Cold`] the most-worn free block, parking it under data that will stay.
//! - **Static.** Cold data never frees its block, so that block stops aging while the
//!   rest wear out. When the spread between the most-erased block and the least-erased
//!   block holding data exceeds [`WearPolicy::static_spread`],
//!   [`crate::BlockManager::static_wear_victim`] names that least-erased block; the
//!   caller moves its data (to a most-worn block, through the `Cold` head) and erases it,
//!   and the young block goes back into rotation.

use crate::class::Class;

/// The wear-leveling decisions. Both are called in bounded loops by the
/// [`crate::BlockManager`]; implementations must be cheap and pure.
pub trait WearPolicy {
    /// Whether free block `candidate` (erase count) should replace `best` as the block
    /// for a new head of `class`.
    fn prefer(&self, class: Class, candidate: u32, best: u32) -> bool;

    /// The erase-count spread (max - min over blocks holding data) above which static
    /// leveling moves data; `None` disables static leveling.
    fn static_spread(&self) -> Option<u32>;
}

impl<T: WearPolicy + ?Sized> WearPolicy for &T {
    fn prefer(&self, class: Class, candidate: u32, best: u32) -> bool {
        T::prefer(self, class, candidate, best)
    }
    fn static_spread(&self) -> Option<u32> {
        T::static_spread(self)
    }
}

/// Dynamic and static leveling (the default), with static leveling triggered when the
/// erase-count spread exceeds `SPREAD`.
///
/// Over a long run the spread stays near `SPREAD`, so `max / mean` tends to
/// `1 + SPREAD / mean`: pick `SPREAD` a few percent of the rated endurance.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Leveling<const SPREAD: u32 = 16>;

impl<const SPREAD: u32> WearPolicy for Leveling<SPREAD> {
    fn prefer(&self, class: Class, candidate: u32, best: u32) -> bool {
        match class {
            Class::Cold => candidate > best,
            _ => candidate < best,
        }
    }
    fn static_spread(&self) -> Option<u32> {
        Some(SPREAD)
    }
}

/// Dynamic leveling only (wear-aware free-block choice, no data moves).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DynamicOnly;

impl WearPolicy for DynamicOnly {
    fn prefer(&self, class: Class, candidate: u32, best: u32) -> bool {
        Leveling::<0>.prefer(class, candidate, best)
    }
    fn static_spread(&self) -> Option<u32> {
        None
    }
}

/// No leveling at all: the first free block of the unit is taken (a baseline).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NoLeveling;

impl WearPolicy for NoLeveling {
    fn prefer(&self, _class: Class, _candidate: u32, _best: u32) -> bool {
        false
    }
    fn static_spread(&self) -> Option<u32> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_gets_young_blocks_and_cold_gets_old_ones() {
        let w = Leveling::<8>;
        assert!(w.prefer(Class::Hot, 1, 2));
        assert!(!w.prefer(Class::Hot, 3, 2));
        assert!(w.prefer(Class::Cold, 3, 2));
        assert_eq!(w.static_spread(), Some(8));
        assert_eq!(DynamicOnly.static_spread(), None);
        assert!(!NoLeveling.prefer(Class::Hot, 0, 9));
    }
}
