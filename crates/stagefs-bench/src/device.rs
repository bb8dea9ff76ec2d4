//! The simulated device every target runs on, shared between a target's storage adapter
//! and the workload driver (which needs the clock while the file system holds the device).

use std::cell::RefCell;
use std::rc::Rc;

use nand_hal::sim::profile::Profile;
use nand_hal::sim::{Counters, FaultPlan, HeapStorage, SimNand, WearStats};
use nand_hal::NandFlash;

/// The simulator behind a shared handle.
pub type Device = Rc<RefCell<SimNand<HeapStorage>>>;

/// A factory-fresh device.
pub fn fresh(profile: Profile, seed: u64) -> Device {
    Rc::new(RefCell::new(SimNand::heap(
        profile,
        FaultPlan::seeded(seed),
    )))
}

/// Counters now.
pub fn counters(dev: &Device) -> Counters {
    dev.borrow().counters()
}

/// Simulated time now.
pub fn now(dev: &Device) -> u64 {
    dev.borrow().now_ns()
}

/// Bytes the device holds (data areas of all its pages).
pub fn capacity(dev: &Device) -> u64 {
    dev.borrow().geometry().capacity()
}

/// Erase spread now.
pub fn wear(dev: &Device) -> WearStats {
    dev.borrow().wear_stats()
}
