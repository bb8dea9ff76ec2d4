//! One simulated part shared by the firmware and the stores that live in statics.
//!
//! The stores are `static`s with `const` initial values (built by the compiler, never on
//! the stack), so their flash must be `const` too: [`Part`] is a copyable handle to the
//! part in the [`PART`] slot, which the firmware fills at run time and renews between
//! runs (power, fault plans, a factory-fresh device). Each flash operation borrows the
//! part for its own duration.

use core::cell::RefCell;

use cortex_m::interrupt::{self, Mutex};
use nand_hal::sim::profile::Profile;
use nand_hal::sim::{
    BlockState, FaultPlan, PageState, SimError, SimNand, SimStorage, SliceStorage,
};
use nand_hal::{BlockAddr, Capabilities, ErrorType, Geometry, NandFlash, PageAddr, ReadReport};

use crate::setup_failed;

/// The simulated part over the firmware's static buffers.
pub type Sim = SimNand<SliceStorage<'static>>;

/// The slot the part lives in (empty until the firmware puts it there).
pub static PART: Mutex<RefCell<Option<Sim>>> = Mutex::new(RefCell::new(None));

/// A handle to the simulated part in [`PART`].
#[derive(Clone, Copy)]
pub struct Part {
    geo: Geometry,
    caps: Capabilities,
}

impl Part {
    /// A handle for a part of profile `profile` (checked when the part is installed).
    pub const fn new(profile: &Profile) -> Self {
        Part {
            geo: profile.geometry,
            caps: profile.capabilities,
        }
    }

    /// Puts `sim` in the slot (replacing what was there).
    pub fn install(&self, sim: Sim) {
        if sim.geometry() != self.geo || *sim.capabilities() != self.caps {
            setup_failed(format_args!("the part does not match its handle"));
        }
        interrupt::free(|cs| *PART.borrow(cs).borrow_mut() = Some(sim));
    }

    /// Takes the part out of the slot, for a run that owns it (the SPI chip model);
    /// [`Part::install`] puts it back.
    pub fn take(&self) -> Sim {
        match interrupt::free(|cs| PART.borrow(cs).borrow_mut().take()) {
            Some(sim) => sim,
            None => setup_failed(format_args!("the simulated part is not in its slot")),
        }
    }

    /// Runs `f` on the part.
    pub fn with<R>(&self, f: impl FnOnce(&mut Sim) -> R) -> R {
        interrupt::free(|cs| match PART.borrow(cs).borrow_mut().as_mut() {
            Some(sim) => f(sim),
            None => setup_failed(format_args!("the simulated part is not in its slot")),
        })
    }

    /// Replaces the part with a new one (new counters, clock and factory faults) with
    /// fault plan `plan`, over the same buffers. The cells keep what the last run wrote
    /// (the runs that use this format first); [`Part::renew_erased`] erases them too.
    pub fn renew(&self, plan: FaultPlan) {
        let old = self.take();
        let profile = *old.profile();
        let sim = SimNand::new(profile, old.into_storage(), plan)
            .unwrap_or_else(|e| setup_failed(format_args!("{e}")));
        self.install(sim);
    }

    /// [`Part::renew`], with every cell erased and every page and block state back to
    /// its default first: a part as it leaves the factory.
    pub fn renew_erased(&self, plan: FaultPlan) {
        let old = self.take();
        let profile = *old.profile();
        let mut storage = old.into_storage();
        for b in 0..profile.geometry.blocks() {
            storage.erase_block(b);
        }
        storage.pages_mut().fill(PageState::default());
        storage.blocks_mut().fill(BlockState::default());
        let sim = SimNand::new(profile, storage, plan)
            .unwrap_or_else(|e| setup_failed(format_args!("{e}")));
        self.install(sim);
    }
}

impl ErrorType for Part {
    type Error = SimError;
}

impl NandFlash for Part {
    fn geometry(&self) -> Geometry {
        self.geo
    }
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }
    fn read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, SimError> {
        self.with(|s| s.read(page, column, data, oob))
    }
    fn program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), SimError> {
        self.with(|s| s.program(page, column, data, oob))
    }
    fn erase(&mut self, block: BlockAddr) -> Result<(), SimError> {
        self.with(|s| s.erase(block))
    }
    fn is_bad(&mut self, block: BlockAddr) -> Result<bool, SimError> {
        self.with(|s| s.is_bad(block))
    }
    fn mark_bad(&mut self, block: BlockAddr) -> Result<(), SimError> {
        self.with(|s| s.mark_bad(block))
    }
}
