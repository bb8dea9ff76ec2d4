//! A flash wrapper over the simulator whose operations a test's hooks may change (fail a
//! program, cut the power at one erase, keep a page unreadable), and the helpers such
//! hooks share. Everything a hook does not override goes straight to the simulator.

use std::cell::RefCell;

use nand_hal::sim::{profile, CutKind, FaultPlan, PowerCut};
use nand_hal::{
    BlockAddr, Capabilities, ErrorKind, ErrorType, Geometry, NandFlash, PageAddr, ReadReport,
    StepReport,
};

use super::Sim;

/// The simulator's error type.
pub type SimErr = <Sim as ErrorType>::Error;

/// What a test changes of the flash operations; each default is the simulator's own.
pub trait Hooks {
    fn program(
        &mut self,
        sim: &mut Sim,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), SimErr> {
        sim.program(page, column, data, oob)
    }
    fn erase(&mut self, sim: &mut Sim, block: BlockAddr) -> Result<(), SimErr> {
        sim.erase(block)
    }
    fn read(
        &mut self,
        sim: &mut Sim,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, SimErr> {
        sim.read(page, column, data, oob)
    }
    fn read_steps(
        &mut self,
        sim: &mut Sim,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<StepReport, SimErr> {
        sim.read_steps(page, data, oob)
    }
}

/// The simulator behind `hooks`.
pub struct Hooked<'a, H> {
    pub sim: &'a mut Sim,
    pub hooks: H,
}

impl<'a, H> Hooked<'a, H> {
    pub fn new(sim: &'a mut Sim, hooks: H) -> Self {
        Hooked { sim, hooks }
    }
}

impl<H> ErrorType for Hooked<'_, H> {
    type Error = SimErr;
}

impl<H: Hooks> NandFlash for Hooked<'_, H> {
    fn geometry(&self) -> Geometry {
        self.sim.geometry()
    }
    fn capabilities(&self) -> &Capabilities {
        self.sim.capabilities()
    }
    fn read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, SimErr> {
        self.hooks.read(self.sim, page, column, data, oob)
    }
    fn read_steps(
        &mut self,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<StepReport, SimErr> {
        self.hooks.read_steps(self.sim, page, data, oob)
    }
    fn delivers_good_steps(&self) -> bool {
        self.sim.delivers_good_steps()
    }
    fn program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), SimErr> {
        self.hooks.program(self.sim, page, column, data, oob)
    }
    fn erase(&mut self, block: BlockAddr) -> Result<(), SimErr> {
        self.hooks.erase(self.sim, block)
    }
    fn is_bad(&mut self, block: BlockAddr) -> Result<bool, SimErr> {
        self.sim.is_bad(block)
    }
    fn mark_bad(&mut self, block: BlockAddr) -> Result<(), SimErr> {
        self.sim.mark_bad(block)
    }
}

/// Hooks kept in a `RefCell` shared with the test (which changes them between
/// operations).
impl<H: Hooks> Hooks for std::rc::Rc<RefCell<H>> {
    fn program(
        &mut self,
        sim: &mut Sim,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), SimErr> {
        self.borrow_mut().program(sim, page, column, data, oob)
    }
    fn erase(&mut self, sim: &mut Sim, block: BlockAddr) -> Result<(), SimErr> {
        self.borrow_mut().erase(sim, block)
    }
    fn read(
        &mut self,
        sim: &mut Sim,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, SimErr> {
        self.borrow_mut().read(sim, page, column, data, oob)
    }
    fn read_steps(
        &mut self,
        sim: &mut Sim,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<StepReport, SimErr> {
        self.borrow_mut().read_steps(sim, page, data, oob)
    }
}

/// A `ProgramFailed` error value of the simulator (its constructor is private).
pub fn program_failed() -> SimErr {
    thread_local! {
        static E: SimErr = {
            let mut s = Sim::heap(profile::TINY, FaultPlan::seeded(1));
            s.fail_next_program(BlockAddr(9));
            let g = s.geometry();
            s.program(g.page(BlockAddr(9), 0), 0, &[0u8; 2048], &[]).unwrap_err()
        };
    }
    let e = E.with(|e| *e);
    assert_eq!(e.kind(), ErrorKind::ProgramFailed);
    e
}

/// Cuts the power at the simulator's next program or erase, the `kind` way.
pub fn arm_cut(sim: &mut Sim, kind: CutKind) {
    let mut p = *sim.plan();
    p.cut = Some(PowerCut { at_op: 1, kind });
    sim.arm(p);
}

/// The checkpoint blocks of a store: the reserved blocks after the two superblock
/// copies.
pub fn ckpt_blocks(states: &[oftl::BlockInfo]) -> Vec<u32> {
    let reserved: Vec<u32> = states
        .iter()
        .enumerate()
        .filter(|(_, b)| b.state() == oftl::BlockState::Reserved)
        .map(|(i, _)| i as u32)
        .collect();
    reserved[2..].to_vec()
}
