//! The space-policy boundary: which block to collect and which free block to put into
//! the updating window next.
//!
//! The OFTL owns the mechanism (reading backpointers, copying valid pages, erasing,
//! recording states); a [`SpacePolicy`] only chooses: victims, free blocks, and whether
//! a victim's valid pages go to the cold write head or back into the data head
//! ([`Relocation`]). [`Greedy`] is the built-in policy; `paragc` plugs in here.
//!
//! Invariants a policy must keep: a victim is a [`BlockState::Full`] block; a free
//! choice is a [`BlockState::Free`] block. Anything else returned is ignored.
//!
//! Rules that are not the policy's to choose are applied before it is asked, in one
//! place (the store's block table): a block whose program failed (waiting to be
//! retired) or whose reads reached the ECC scrub threshold is collected before any
//! victim a policy would pick, and a block waiting to be retired is never a free
//! choice.

pub use crate::blocks::BlockInfo;
use nand_hal::BlockAddr;

use crate::format::checkpoint::BlockState;

/// Why the OFTL asks for a victim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Urgency {
    /// A write is waiting for space (`make_room`): reclaim the most space now.
    Foreground,
    /// Idle-time collection ([`crate::Oftl::gc_step`]): the best long-run choice.
    Background,
}

/// Where garbage collection (and scrubbing, retirement) writes the valid pages it
/// moves out of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Relocation {
    /// Into the data head, mixed with fresh writes (one stream for everything).
    Data,
    /// Into the cold head: blocks of their own for data that has outlived the rest of
    /// its block, kept apart from fresh (hot) writes so both die in their own blocks.
    Cold,
}

/// Victim, free-block and relocation choice.
pub trait SpacePolicy {
    /// A block to collect, or `None` if no block is worth collecting. `pages_per_block`
    /// tells full from partly invalid blocks.
    fn pick_victim(&mut self, blocks: &[BlockInfo], pages_per_block: u32) -> Option<BlockAddr>;

    /// [`SpacePolicy::pick_victim`] knowing why: what the OFTL calls. The default
    /// ignores `urgency`.
    fn pick_victim_for(
        &mut self,
        blocks: &[BlockInfo],
        pages_per_block: u32,
        urgency: Urgency,
    ) -> Option<BlockAddr> {
        let _ = urgency;
        self.pick_victim(blocks, pages_per_block)
    }

    /// A free block to add to the updating window.
    fn pick_free(&mut self, blocks: &[BlockInfo]) -> Option<BlockAddr>;

    /// Where the valid pages of `victim` (an index into `blocks`, just chosen for
    /// collection, scrubbing or retirement) go. Asked once per victim. Index pages and
    /// log sectors keep their own heads whatever the answer.
    ///
    /// The default is [`Relocation::Cold`]: a page still valid when its block is
    /// collected has outlived the block's other pages, so it is likely to outlive
    /// fresh writes too; mixing it back into the data head would make every collected
    /// block carry it again.
    fn relocation(
        &mut self,
        blocks: &[BlockInfo],
        victim: BlockAddr,
        pages_per_block: u32,
    ) -> Relocation {
        let _ = (blocks, victim, pages_per_block);
        Relocation::Cold
    }
}

/// Greedy victim choice (fewest valid pages), least-worn
/// free block first, and static wear leveling: when the erase-count spread exceeds
/// `wear_gap`, the least-worn full block is collected so its cold data moves. Moved
/// pages go to the cold head (the trait's default [`SpacePolicy::relocation`]).
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Greedy {
    /// Erase-count spread that triggers static wear leveling.
    pub wear_gap: u32,
}

impl Greedy {
    /// The default policy (wear gap 2000), usable in `const` and `static` initializers.
    pub const DEFAULT: Greedy = Greedy { wear_gap: 2000 };
}

impl Default for Greedy {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl SpacePolicy for Greedy {
    fn pick_victim(&mut self, blocks: &[BlockInfo], ppb: u32) -> Option<BlockAddr> {
        let full = || {
            blocks
                .iter()
                .enumerate()
                .filter(|(_, b)| b.state() == BlockState::Full && b.valid() > 0)
        };
        let max_erase = blocks
            .iter()
            .filter(|b| !matches!(b.state(), BlockState::Bad | BlockState::Reserved))
            .map(|b| b.erases())
            .max()?;
        if let Some((i, b)) = full().min_by_key(|(_, b)| b.erases()) {
            if max_erase - b.erases() > self.wear_gap {
                return Some(BlockAddr(i as u32));
            }
        }
        full()
            .filter(|(_, b)| (b.valid() as u32) < ppb)
            .min_by_key(|(_, b)| (b.valid(), b.erases()))
            .map(|(i, _)| BlockAddr(i as u32))
    }

    fn pick_free(&mut self, blocks: &[BlockInfo]) -> Option<BlockAddr> {
        blocks
            .iter()
            .enumerate()
            .filter(|(_, b)| b.takeable())
            .min_by_key(|(_, b)| b.erases())
            .map(|(i, _)| BlockAddr(i as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(state: BlockState, valid: u16, erases: u32) -> BlockInfo {
        BlockInfo::new(state, valid, erases)
    }

    #[test]
    fn greedy_choices() {
        let mut g = Greedy::default();
        let mut t = [
            b(BlockState::Full, 10, 5),
            b(BlockState::Full, 3, 9),
            b(BlockState::Free, 0, 7),
            b(BlockState::Free, 0, 2),
            b(BlockState::Window, 0, 0),
            b(BlockState::Full, 16, 1),
        ];
        assert_eq!(g.pick_victim(&t, 16), Some(BlockAddr(1)));
        assert_eq!(g.pick_free(&t), Some(BlockAddr(3)));
        t[3] = t[3].with_retire(true);
        assert_eq!(
            g.pick_free(&t),
            Some(BlockAddr(2)),
            "never a block waiting to be retired"
        );
        t[1] = b(BlockState::Full, 3, 5000);
        assert_eq!(
            g.pick_victim(&t, 16),
            Some(BlockAddr(5)),
            "static wear leveling"
        );
        let none = [b(BlockState::Full, 16, 0), b(BlockState::Bad, 0, 0)];
        assert_eq!(g.pick_victim(&none, 16), None);
        assert_eq!(g.pick_free(&none), None);
    }
}
