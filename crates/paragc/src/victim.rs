//! Victim selection: which full block garbage collection reclaims next.
//!
//! The [`crate::BlockManager`] scans the full blocks of one parallel unit and asks a
//! [`VictimPolicy`] to score each; the highest positive score wins. A decision therefore
//! costs one pass over the unit's blocks, `blocks_per_die` calls of
//! [`VictimPolicy::score`], and no memory.
//!
//! - [`GreedyVictim`]: most invalid pages first. Best when space is needed *now*: it frees the
//!   most pages per page moved.
//! - [`CostBenefit`]: the LFS/F2FS rule `(1 - u) * age / (1 + u)`, `u` the valid share.
//!   It lets young blocks (whose pages are still dying) wait and collects old, cold,
//!   partly valid blocks, which is better when there is time.
//! - [`GreedyCostBenefit`] (the default): greedy in [`GcMode::Foreground`],
//!   cost-benefit in [`GcMode::Background`], as in ParaFS.

use crate::class::Class;

/// Why collection runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GcMode {
    /// A writer is waiting for space: reclaim the most space for the least work.
    Foreground,
    /// Idle time: pick the block whose collection pays off best over time.
    Background,
}

/// What a victim policy sees of one candidate block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Candidate {
    /// Pages written in the block (the pages per block for a full block).
    pub written: u16,
    /// Pages still valid.
    pub valid: u16,
    /// Allocation-clock ticks (pages allocated device-wide) since the block was last
    /// written.
    pub age: u32,
    /// The block's erase count.
    pub erase_count: u32,
    /// The class of its data.
    pub class: Class,
}

impl Candidate {
    /// Pages written but no longer live.
    pub const fn invalid(&self) -> u16 {
        self.written.saturating_sub(self.valid)
    }
}

/// Scores collection candidates; the highest positive score is collected, `0` means
/// "never collect this block now".
///
/// Implementations must be cheap and pure: [`VictimPolicy::score`] runs once per block
/// of the unit per decision.
pub trait VictimPolicy {
    /// The candidate's score in `mode`.
    fn score(&self, candidate: &Candidate, mode: GcMode) -> u64;
}

impl<T: VictimPolicy + ?Sized> VictimPolicy for &T {
    fn score(&self, candidate: &Candidate, mode: GcMode) -> u64 {
        T::score(self, candidate, mode)
    }
}

/// Most invalid pages first; among equals, the least-worn block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GreedyVictim;

impl GreedyVictim {
    /// The greedy score (independent of the mode).
    pub const fn of(c: &Candidate) -> u64 {
        let invalid = c.invalid() as u64;
        if invalid == 0 {
            return 0;
        }
        (invalid << 32) | (u32::MAX - c.erase_count) as u64
    }
}

impl VictimPolicy for GreedyVictim {
    fn score(&self, candidate: &Candidate, _mode: GcMode) -> u64 {
        GreedyVictim::of(candidate)
    }
}

/// Cost-benefit: `(1 - u) * age / (1 + u)` with `u = valid / written`, in fixed point.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CostBenefit;

impl CostBenefit {
    /// The cost-benefit score (independent of the mode).
    pub const fn of(c: &Candidate) -> u64 {
        let invalid = c.invalid() as u64;
        if invalid == 0 {
            return 0;
        }
        // (written - valid) / (written + valid) == (1 - u) / (1 + u); the numerator is
        // below 2^16 * 2^32, so shifting by 8 cannot overflow.
        let num = (invalid * (c.age as u64 + 1)) << 8;
        let den = c.written as u64 + c.valid as u64;
        num / den + 1
    }
}

impl VictimPolicy for CostBenefit {
    fn score(&self, candidate: &Candidate, _mode: GcMode) -> u64 {
        CostBenefit::of(candidate)
    }
}

/// GreedyVictim in the foreground, cost-benefit in the background (the default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GreedyCostBenefit;

impl VictimPolicy for GreedyCostBenefit {
    fn score(&self, candidate: &Candidate, mode: GcMode) -> u64 {
        match mode {
            GcMode::Foreground => GreedyVictim::of(candidate),
            GcMode::Background => CostBenefit::of(candidate),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(valid: u16, age: u32, erase_count: u32) -> Candidate {
        Candidate {
            written: 64,
            valid,
            age,
            erase_count,
            class: Class::Warm,
        }
    }

    #[test]
    fn greedy_prefers_fewer_valid_then_less_wear() {
        assert!(GreedyVictim::of(&cand(10, 0, 0)) > GreedyVictim::of(&cand(11, 1000, 0)));
        assert!(GreedyVictim::of(&cand(10, 0, 3)) > GreedyVictim::of(&cand(10, 0, 4)));
        assert_eq!(GreedyVictim::of(&cand(64, 0, 0)), 0);
    }

    #[test]
    fn cost_benefit_trades_utilisation_for_age() {
        // A young block with few valid pages loses to an old block with more.
        let young = cand(16, 100, 0);
        let old = cand(32, 10_000, 0);
        assert!(CostBenefit::of(&old) > CostBenefit::of(&young));
        // Same age: fewer valid pages wins.
        assert!(CostBenefit::of(&cand(8, 500, 0)) > CostBenefit::of(&cand(9, 500, 0)));
        assert_eq!(CostBenefit::of(&cand(64, u32::MAX, 0)), 0);
        // Extremes do not overflow.
        assert!(CostBenefit::of(&cand(0, u32::MAX, 0)) > 0);
    }

    #[test]
    fn default_switches_on_mode() {
        let young = cand(16, 100, 0);
        let p = GreedyCostBenefit;
        assert_eq!(
            p.score(&young, GcMode::Foreground),
            GreedyVictim::of(&young)
        );
        assert_eq!(p.score(&young, GcMode::Background), CostBenefit::of(&young));
    }
}
