//! [`ParaGc`]: a [`SpacePolicy`] whose decisions are `paragc`'s.
//!
//! - **Victims** are scored by a `paragc` [`VictimPolicy`] (default
//!   [`GreedyCostBenefit`]): greedy (most invalid pages, then least worn) when a write
//!   waits for space ([`Urgency::Foreground`]), cost-benefit `(1-u)·age/(1+u)` in
//!   [`crate::Oftl::gc_step`] ([`Urgency::Background`]). A block's age is the number
//!   of blocks handed to the updating window since it was (its window allocation
//!   stamp; stamps live in RAM only, so after a mount every block starts equally old).
//! - **Static wear leveling** follows the [`WearPolicy`]'s spread (default
//!   [`Leveling<16>`](Leveling)): in background collection, once the erase counts of
//!   blocks differ by more than it, the least-worn full block is collected so its data
//!   moves (as `paragc::BlockManager::static_wear_victim` does). Never in the
//!   foreground: moving an all-valid block frees nothing for the waiting write.
//! - **Free blocks** for the window go by [`WearPolicy::prefer`] for a short-lived class
//!   (least worn first): every oftl write head is a short-lived stream.
//! - Background collection counts as foreground (greedy, no static leveling) once
//!   fewer than `2 × window + 2` blocks are free or wholly invalid: cost-benefit picks
//!   fuller blocks, and on a small part that can starve the next window.
//! - Blocks flagged for retirement or scrubbing are taken first by the OFTL's block
//!   table before this policy is asked (a safety rule, not a policy choice).
//!
//! - **Relocation** follows `paragc`'s classes: the data head is one stream of user
//!   writes of unknown update rate, `paragc`'s [`Class::Warm`]; a page still valid when
//!   its block is collected moves one class colder ([`Class::relocated`]), i.e.
//!   [`Class::Cold`], which is oftl's cold head. Pages already in the cold head stay
//!   cold (`Cold.relocated()` is `Cold`), and a static wear-leveling move is cold data
//!   by definition. So every collected data and metadata page goes to the cold head;
//!   a policy class that relocates to `Hot`/`Warm`/`Meta` would map to the data head
//!   ([`class_head`]).
//!
//! RAM: 4 bytes per block for the stamps.

use paragc::{Candidate, Class, GcMode, GreedyCostBenefit, Leveling, VictimPolicy, WearPolicy};

use nand_hal::BlockAddr;

use crate::format::checkpoint::BlockState;
use crate::policy::{BlockInfo, Relocation, SpacePolicy, Urgency};

/// The oftl write head for pages of `paragc` class `class`: `Cold` (and `Log` data
/// that survived, which `paragc` also calls cold) to the cold head, the rest to the
/// data head (oftl keeps no separate hot or metadata head; log sectors always stay on
/// the log head).
pub(crate) const fn class_head(class: Class) -> Relocation {
    match class {
        Class::Cold | Class::Log => Relocation::Cold,
        Class::Hot | Class::Warm | Class::Meta => Relocation::Data,
    }
}

/// `paragc`'s victim scoring and wear leveling as oftl's space policy, for up to
/// `BLOCKS` blocks (use the store's `BLOCKS`).
#[derive(Clone, Debug)]
pub struct ParaGc<const BLOCKS: usize, V = GreedyCostBenefit, W = Leveling> {
    victim: V,
    wear: W,
    /// Window allocations so far (the age clock).
    clock: u32,
    /// `clock` when each block last entered the window.
    stamps: [u32; BLOCKS],
}

impl<const BLOCKS: usize> ParaGc<BLOCKS> {
    /// `paragc`'s defaults: greedy/cost-benefit victims, leveling past a spread of 16.
    pub const DEFAULT: Self = Self::new(GreedyCostBenefit, Leveling);
}

impl<const BLOCKS: usize, V: VictimPolicy + Default, W: WearPolicy + Default> Default
    for ParaGc<BLOCKS, V, W>
{
    fn default() -> Self {
        Self::new(V::default(), W::default())
    }
}

impl<const BLOCKS: usize, V: VictimPolicy, W: WearPolicy> ParaGc<BLOCKS, V, W> {
    /// A policy with the given victim scoring and wear policy.
    pub const fn new(victim: V, wear: W) -> Self {
        ParaGc {
            victim,
            wear,
            clock: 0,
            stamps: [0; BLOCKS],
        }
    }

    fn age(&self, block: usize) -> u32 {
        self.stamps
            .get(block)
            .map_or(self.clock, |&s| self.clock.wrapping_sub(s))
    }
}

fn holds_data(b: &BlockInfo) -> bool {
    matches!(b.state(), BlockState::Full | BlockState::Window)
}

impl<const BLOCKS: usize, V: VictimPolicy, W: WearPolicy> SpacePolicy for ParaGc<BLOCKS, V, W> {
    fn pick_victim(&mut self, blocks: &[BlockInfo], ppb: u32) -> Option<BlockAddr> {
        self.pick_victim_for(blocks, ppb, Urgency::Foreground)
    }

    fn pick_victim_for(
        &mut self,
        blocks: &[BlockInfo],
        ppb: u32,
        urgency: Urgency,
    ) -> Option<BlockAddr> {
        let full = || {
            blocks
                .iter()
                .enumerate()
                .filter(|(_, b)| b.state() == BlockState::Full && b.valid() > 0)
        };
        // Short of space, background collection is urgent too (as `paragc`'s
        // `gc_urgency` escalates): fewer than two windows' worth of free or wholly
        // invalid blocks left.
        let window = blocks
            .iter()
            .filter(|b| b.state() == BlockState::Window)
            .count();
        let spare = blocks
            .iter()
            .filter(|b| b.takeable() || (b.state() == BlockState::Full && b.valid() == 0))
            .count();
        let urgency = if spare <= 2 * window + 2 {
            Urgency::Foreground
        } else {
            urgency
        };
        // Static leveling moves all-valid blocks: idle time only, never while a write
        // waits for space.
        let spread = match urgency {
            Urgency::Background => self.wear.static_spread(),
            Urgency::Foreground => None,
        };
        if let Some(spread) = spread {
            let max = blocks
                .iter()
                .filter(|b| holds_data(b) || b.state() == BlockState::Free)
                .map(|b| b.erases())
                .max();
            let young = full().min_by_key(|(_, b)| b.erases());
            if let (Some(max), Some((i, b))) = (max, young) {
                if max - b.erases() > spread {
                    return Some(BlockAddr(i as u32));
                }
            }
        }
        let mode = match urgency {
            Urgency::Foreground => GcMode::Foreground,
            Urgency::Background => GcMode::Background,
        };
        let written = ppb.min(u16::MAX as u32) as u16;
        full()
            .filter(|(_, b)| (b.valid() as u32) < ppb)
            .map(|(i, b)| {
                let c = Candidate {
                    written,
                    valid: b.valid(),
                    age: self.age(i),
                    erase_count: b.erases(),
                    class: Class::Warm,
                };
                (i, self.victim.score(&c, mode))
            })
            .filter(|&(_, score)| score > 0)
            // Highest score; ties to the lowest block number.
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
            .map(|(i, _)| BlockAddr(i as u32))
    }

    fn relocation(&mut self, _blocks: &[BlockInfo], _victim: BlockAddr, _ppb: u32) -> Relocation {
        // Victims hold data-head (Warm) or cold-head (Cold) pages; both relocate to
        // Cold. Asking paragc keeps the mapping in one place.
        class_head(Class::Warm.relocated())
    }

    fn pick_free(&mut self, blocks: &[BlockInfo]) -> Option<BlockAddr> {
        let mut best: Option<(usize, u32)> = None;
        for (i, b) in blocks.iter().enumerate() {
            if !b.takeable() {
                continue;
            }
            if best.is_none_or(|(_, e)| self.wear.prefer(Class::Warm, b.erases(), e)) {
                best = Some((i, b.erases()));
            }
        }
        let (i, _) = best?;
        self.clock = self.clock.wrapping_add(1);
        if let Some(s) = self.stamps.get_mut(i) {
            *s = self.clock;
        }
        Some(BlockAddr(i as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use paragc::{DynamicOnly, GreedyVictim as PGreedy};

    fn b(state: BlockState, valid: u16, erases: u32) -> BlockInfo {
        BlockInfo::new(state, valid, erases)
    }

    #[test]
    fn foreground_is_greedy_and_background_weighs_age() {
        let mut p =
            ParaGc::<8, GreedyCostBenefit, DynamicOnly>::new(GreedyCostBenefit, DynamicOnly);
        let mut t = [b(BlockState::Free, 0, 0); 8];
        // Blocks 0 and 1 enter the window first (old), then 2..4.
        for _ in 0..5 {
            let f = p.pick_free(&t).unwrap();
            t[f.0 as usize] = b(BlockState::Full, 0, 0);
        }
        t[0] = b(BlockState::Full, 10, 0); // old, fuller
        t[1] = b(BlockState::Full, 16, 0); // full: never a victim
        t[2] = b(BlockState::Full, 12, 0);
        t[3] = b(BlockState::Full, 6, 0); // young, emptiest
        t[4] = b(BlockState::Full, 16, 0);
        assert_eq!(
            p.pick_victim_for(&t, 16, Urgency::Foreground),
            Some(BlockAddr(3))
        );
        // Cost-benefit: block 0 is 4 allocations old with 6 invalid pages,
        // block 3 is 1 allocation old with 10: (6·5)/(26) > (10·2)/(22).
        assert_eq!(
            p.pick_victim_for(&t, 16, Urgency::Background),
            Some(BlockAddr(0))
        );
        // Nothing collectable.
        let none = [b(BlockState::Full, 16, 0), b(BlockState::Free, 0, 0)];
        assert_eq!(p.pick_victim_for(&none, 16, Urgency::Background), None);
    }

    #[test]
    fn free_blocks_least_worn_first_and_static_leveling_past_the_spread() {
        let mut p = ParaGc::<10, PGreedy, Leveling<4>>::new(PGreedy, Leveling);
        let mut t = [
            b(BlockState::Free, 0, 9),
            b(BlockState::Free, 0, 3),
            b(BlockState::Bad, 0, 0),
            b(BlockState::Full, 16, 2),
            b(BlockState::Full, 8, 6),
            b(BlockState::Reserved, 0, 0),
            b(BlockState::Free, 0, 7),
            b(BlockState::Free, 0, 8),
            b(BlockState::Full, 0, 5),
            b(BlockState::Free, 0, 4),
        ];
        assert_eq!(p.pick_free(&t), Some(BlockAddr(1)));
        // Spread 9 - 2 > 4: the least-worn full block moves, though it is all valid,
        // but only in the background.
        assert_eq!(
            p.pick_victim_for(&t, 16, Urgency::Background),
            Some(BlockAddr(3))
        );
        assert_eq!(
            p.pick_victim_for(&t, 16, Urgency::Foreground),
            Some(BlockAddr(4))
        );
        // Short of spare blocks, background collection is greedy too.
        let mut short = t;
        for i in [0, 6, 7, 9] {
            short[i] = b(BlockState::Full, 16, short[i].erases());
        }
        assert_eq!(
            p.pick_victim_for(&short, 16, Urgency::Background),
            Some(BlockAddr(4))
        );
        for x in t.iter_mut() {
            *x = b(x.state(), x.valid(), x.erases().max(5));
        }
        assert_eq!(
            p.pick_victim_for(&t, 16, Urgency::Background),
            Some(BlockAddr(4)),
            "within the spread: by score"
        );
        for i in [0, 1, 6, 7, 9] {
            t[i] = b(BlockState::Bad, 0, t[i].erases());
        }
        t[1] = b(BlockState::Free, 0, 3).with_retire(true);
        assert_eq!(
            p.pick_free(&t),
            None,
            "retired and bad blocks are never handed out"
        );
    }

    #[test]
    fn gc_copies_go_cold_through_paragc_classes() {
        let mut p = ParaGc::<4>::DEFAULT;
        let t = [b(BlockState::Full, 3, 0); 4];
        assert_eq!(p.relocation(&t, BlockAddr(0), 16), Relocation::Cold);
        assert_eq!(class_head(Class::Hot.relocated()), Relocation::Data);
        assert_eq!(class_head(Class::Meta.relocated()), Relocation::Data);
        assert_eq!(class_head(Class::Cold.relocated()), Relocation::Cold);
        assert_eq!(class_head(Class::Log.relocated()), Relocation::Cold);
    }

    #[test]
    fn blocks_beyond_the_table_are_still_scored() {
        let mut p = ParaGc::<2>::DEFAULT;
        let t = [
            b(BlockState::Full, 16, 0),
            b(BlockState::Full, 16, 0),
            b(BlockState::Full, 3, 0),
        ];
        assert_eq!(
            p.pick_victim_for(&t, 16, Urgency::Background),
            Some(BlockAddr(2))
        );
    }
}
