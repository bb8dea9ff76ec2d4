//! Per-block bookkeeping: the summary every policy decides on.
//!
//! A [`ManagedBlock`] is 16 bytes: erase count, age stamp, pages written, pages still
//! valid, state and class. The [`crate::BlockManager`] keeps one per block in a fixed
//! array, updated only through its `notice_*` events and allocations.

use crate::class::Class;

/// Life-cycle state of an erase block.
///
/// ```text
///            allocate                 last page              choose_victim /
///   Free ───────────────▶ Open ─────────────────▶ Full ───── static_wear_victim ──▶ Collecting
///    ▲                                                                                  │
///    └───────────────────────────── notice_block_erased ────────────────────────────────┘
///   (any state) ── notice_block_bad ──▶ Bad
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BlockPhase {
    /// Erased and not in use.
    Free,
    /// An allocation head: some pages written, more to come.
    Open,
    /// Every page written (or the head was closed); a collection candidate.
    Full,
    /// Chosen for collection: its valid pages are being moved; erase it next.
    Collecting,
    /// Retired; never allocated again.
    Bad,
}

/// The policy-relevant summary of one erase block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ManagedBlock {
    pub(crate) erase_count: u32,
    pub(crate) stamp: u32,
    pub(crate) written: u16,
    pub(crate) valid: u16,
    pub(crate) state: BlockPhase,
    pub(crate) class: Class,
}

impl ManagedBlock {
    pub(crate) const FRESH: ManagedBlock = ManagedBlock {
        erase_count: 0,
        stamp: 0,
        written: 0,
        valid: 0,
        state: BlockPhase::Free,
        class: Class::Warm,
    };

    /// Erases so far.
    pub const fn erase_count(&self) -> u32 {
        self.erase_count
    }
    /// The allocation clock when a page was last allocated in this block.
    pub const fn stamp(&self) -> u32 {
        self.stamp
    }
    /// Pages programmed since the last erase.
    pub const fn written(&self) -> u16 {
        self.written
    }
    /// Pages still holding live data.
    pub const fn valid(&self) -> u16 {
        self.valid
    }
    /// Pages written but no longer live.
    pub const fn invalid(&self) -> u16 {
        self.written - self.valid
    }
    /// Life-cycle state.
    pub const fn state(&self) -> BlockPhase {
        self.state
    }
    /// The class of the data in the block (meaningless while [`BlockPhase::Free`]).
    pub const fn class(&self) -> Class {
        self.class
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_info_is_16_bytes() {
        assert_eq!(core::mem::size_of::<ManagedBlock>(), 16);
    }
}
