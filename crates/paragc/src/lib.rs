#![doc = include_str!("../README.md")]
#![no_std]
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod block;
pub mod class;
pub mod hotness;
pub mod manager;
pub mod sched;
pub mod victim;
pub mod wear;

pub use block::{BlockPhase, ManagedBlock};
pub use class::{Class, Hint, CLASSES};
pub use hotness::{Classifier, HintOnly, HotnessTracker, UpdatePromotion};
pub use manager::{
    AllocError, Allocation, BlockManager, ConfigError, EventError, GcUrgency, ManagerConfig,
    Reason, Restored, Victim,
};
pub use sched::{Costs, Dispatch, EraseGate, Formula2, LeastBusy, Order, Scheduler};
pub use victim::{Candidate, CostBenefit, GcMode, GreedyCostBenefit, GreedyVictim, VictimPolicy};
pub use wear::{DynamicOnly, Leveling, NoLeveling, WearPolicy};
