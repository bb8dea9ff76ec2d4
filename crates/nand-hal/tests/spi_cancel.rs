//! Cancel safety of the async SPI NAND driver: every operation dropped at every await
//! point (a bus transaction that never reached the chip, one that did, a delay), then the
//! next operations must work, the model must see no protocol violation (a command sent
//! while the part was busy, a wrong die), and the data must be right: the dropped
//! program or erase either happened whole or not at all, nothing else changed.

use core::cell::Cell;
use core::future::{pending, Future};
use core::pin::pin;
use core::task::{Context, Poll, Waker};

use nand_hal::asynch::{block_on, NandFlash};
use nand_hal::sim::{FaultPlan, HeapStorage, SimNand};
use nand_hal::spi::model::{self, ModelError, ModelSpec};
use nand_hal::spi::{ChipModel, HostClock, ModelDelay, SpiNand, SpiNandAsync};
use nand_hal::{BlockAddr, PageAddr};

/// Counts await points and stalls one of them for ever.
#[derive(Default)]
struct Gate {
    /// Await points to let through before the stall.
    left: Cell<Option<u32>>,
    /// Whether the stalled transaction or delay happens before the stall.
    after: Cell<bool>,
}

impl Gate {
    fn arm(&self, n: u32, after: bool) {
        self.left.set(Some(n));
        self.after.set(after);
    }

    fn disarm(&self) {
        self.left.set(None);
    }

    /// Counts one await point; whether it is the one to stall.
    fn stall_here(&self) -> bool {
        match self.left.get() {
            Some(0) => {
                self.left.set(None);
                true
            }
            Some(n) => {
                self.left.set(Some(n - 1));
                false
            }
            None => false,
        }
    }
}

/// The chip model behind a gate.
struct Stall<'g, 'c> {
    model: ChipModel<'c, HeapStorage>,
    gate: &'g Gate,
}

impl embedded_hal_async::spi::ErrorType for Stall<'_, '_> {
    type Error = ModelError;
}

impl embedded_hal_async::spi::SpiDevice for Stall<'_, '_> {
    async fn transaction(
        &mut self,
        operations: &mut [embedded_hal::spi::Operation<'_, u8>],
    ) -> Result<(), ModelError> {
        if self.gate.stall_here() {
            if self.gate.after.get() {
                embedded_hal::spi::SpiDevice::transaction(&mut self.model, operations)?;
            }
            pending::<()>().await;
        }
        embedded_hal::spi::SpiDevice::transaction(&mut self.model, operations)
    }
}

/// The model's delay behind the same gate.
struct StallDelay<'g, 'c> {
    delay: ModelDelay<'c>,
    gate: &'g Gate,
}

impl embedded_hal_async::delay::DelayNs for StallDelay<'_, '_> {
    async fn delay_ns(&mut self, ns: u32) {
        if self.gate.stall_here() {
            if self.gate.after.get() {
                embedded_hal::delay::DelayNs::delay_ns(&mut self.delay, ns);
            }
            pending::<()>().await;
        }
        embedded_hal::delay::DelayNs::delay_ns(&mut self.delay, ns);
    }
}

type Driver<'g, 'c> = SpiNandAsync<Stall<'g, 'c>, StallDelay<'g, 'c>>;

/// Polls `future` once; `None` if it did not finish (the caller then drops it).
fn poll_once<F: Future>(future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(out) => Some(out),
        Poll::Pending => None,
    }
}

fn pattern(seed: u32, len: u32) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(31) ^ seed) as u8)
        .collect()
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Read,
    ReadSteps,
    Program,
    Erase,
    IsBad,
    MarkBad,
}

/// The state the checks compare with.
struct Bench<'g, 'c> {
    drv: Driver<'g, 'c>,
    gate: &'g Gate,
    /// A programmed page on the die the dropped operations use, and one on die 0 (the
    /// other die where there are two).
    near: PageAddr,
    witness: PageAddr,
    witness_data: Vec<u8>,
    /// Blocks the dropped operations use, on the other die (if any).
    next_block: u32,
    next_page: u32,
    block: BlockAddr,
}

impl Bench<'_, '_> {
    fn page_size(&self) -> u32 {
        self.drv.geometry().page_size()
    }

    /// A fresh erased block on the working die.
    fn fresh_block(&mut self) -> BlockAddr {
        loop {
            let b = BlockAddr(self.next_block);
            self.next_block += 1;
            if !block_on(self.drv.is_bad(b)).unwrap() {
                block_on(self.drv.erase(b)).unwrap();
                return b;
            }
        }
    }

    /// A fresh erased page on the working die.
    fn fresh_page(&mut self) -> PageAddr {
        let g = self.drv.geometry();
        if self.next_page == g.pages_per_block() {
            self.block = self.fresh_block();
            self.next_page = 0;
        }
        self.next_page += 1;
        g.page(self.block, self.next_page - 1)
    }

    fn read(&mut self, page: PageAddr) -> Vec<u8> {
        let mut buf = vec![0u8; self.page_size() as usize];
        let r = block_on(self.drv.read_page(page, &mut buf, &mut [])).unwrap();
        assert_eq!(r.corrected_bits, 0);
        buf
    }

    /// Runs `op` with the await point `n` stalled; `true` if it finished before.
    fn drop_at(&mut self, op: Op, n: u32, after: bool) -> bool {
        let ps = self.page_size();
        let what = format!("{op:?} dropped at await point {n} (after: {after})");
        // Set up what the operation works on.
        let page = self.fresh_page();
        let data = pattern(n * 2 + after as u32, ps);
        let block = match op {
            Op::Erase | Op::MarkBad | Op::IsBad => {
                let b = self.fresh_block();
                block_on(
                    self.drv
                        .program_page(self.drv.geometry().page(b, 0), &data, &[]),
                )
                .unwrap();
                b
            }
            _ => self.block,
        };
        if matches!(op, Op::Read | Op::ReadSteps) {
            block_on(self.drv.program_page(page, &data, &[])).unwrap();
        }

        // Leave die 0 selected, so the operation starts with a die select on two dies.
        assert!(self.read(self.witness) == self.witness_data);
        self.gate.arm(n, after);
        let mut buf = vec![0u8; ps as usize];
        let finished = match op {
            Op::Read => poll_once(self.drv.read_page(page, &mut buf, &mut [])).map(|r| {
                r.unwrap();
            }),
            Op::ReadSteps => poll_once(self.drv.read_steps(page, &mut buf, &mut [])).map(|r| {
                assert!(r.unwrap().all_good());
            }),
            Op::Program => poll_once(self.drv.program_page(page, &data, &[])).map(|r| r.unwrap()),
            Op::Erase => poll_once(self.drv.erase(block)).map(|r| r.unwrap()),
            Op::IsBad => poll_once(self.drv.is_bad(block)).map(|r| assert!(!r.unwrap())),
            Op::MarkBad => poll_once(self.drv.mark_bad(block)).map(|r| r.unwrap()),
        }
        .is_some();
        self.gate.disarm();
        if finished && matches!(op, Op::Read | Op::ReadSteps) {
            assert!(buf == data, "{what}");
        }

        // The next operations, on the same die and then on the other die where there is
        // one, work at once.
        assert!(
            self.read(self.near) == self.witness_data,
            "{what}: same die"
        );
        assert!(
            self.read(self.witness) == self.witness_data,
            "{what}: die 0"
        );
        // The dropped operation happened whole or not at all.
        let g = self.drv.geometry();
        match op {
            Op::Read | Op::ReadSteps => assert!(self.read(page) == data, "{what}"),
            Op::Program => {
                let back = self.read(page);
                assert!(
                    back == data || back.iter().all(|&b| b == 0xFF),
                    "{what}: the page is neither programmed nor erased"
                );
                assert!(!finished || back == data, "{what}");
            }
            Op::Erase => {
                let back = self.read(g.page(block, 0));
                assert!(
                    back == data || back.iter().all(|&b| b == 0xFF),
                    "{what}: the block is neither erased nor left"
                );
                assert!(!finished || back != data, "{what}");
            }
            Op::IsBad => assert!(!block_on(self.drv.is_bad(block)).unwrap(), "{what}"),
            Op::MarkBad => {
                // Marking again always works and sticks.
                block_on(self.drv.mark_bad(block)).unwrap();
                assert!(block_on(self.drv.is_bad(block)).unwrap(), "{what}");
            }
        }
        // Programs and erases on the working die go on as usual.
        let fresh = self.fresh_page();
        let more = pattern(0xA5, ps);
        block_on(self.drv.program_page(fresh, &more, &[])).unwrap();
        assert!(self.read(fresh) == more, "{what}");

        let model = &self.drv.bus().model;
        assert_eq!(
            model.protocol_violations(),
            0,
            "{what}: {:?}",
            model.last_violation()
        );
        assert_eq!(model.sim().counters().misuse, 0, "{what}");
        finished
    }
}

fn cancel_everywhere(spec: ModelSpec) {
    let clock = HostClock::new();
    let gate = Gate::default();
    let sim = SimNand::heap(spec.profile, FaultPlan::seeded(3));
    let model = ChipModel::new(sim, spec, &clock).unwrap();
    let bus = Stall { model, gate: &gate };
    let delay = StallDelay {
        delay: clock.delay(),
        gate: &gate,
    };
    let mut drv: Driver<'_, '_> = block_on(SpiNand::new_async(bus, delay)).unwrap();
    let g = drv.geometry();
    // A witness page on die 0 and one on the last die, where the dropped operations run.
    let witness = g.page(BlockAddr(2), 0);
    let witness_data = pattern(0x5A, g.page_size());
    block_on(drv.erase(BlockAddr(2))).unwrap();
    block_on(drv.program_page(witness, &witness_data, &[])).unwrap();
    let first = g.blocks() - g.blocks() / g.dies() + 8;
    let near = g.page(BlockAddr(first - 1), 0);
    block_on(drv.erase(BlockAddr(first - 1))).unwrap();
    block_on(drv.program_page(near, &witness_data, &[])).unwrap();
    let mut bench = Bench {
        drv,
        gate: &gate,
        near,
        witness,
        witness_data,
        next_block: first,
        next_page: g.pages_per_block(),
        block: BlockAddr(first),
    };
    for op in [
        Op::Read,
        Op::ReadSteps,
        Op::Program,
        Op::Erase,
        Op::IsBad,
        Op::MarkBad,
    ] {
        let mut points = 0;
        for n in 0.. {
            let a = bench.drop_at(op, n, false);
            let b = bench.drop_at(op, n, true);
            assert_eq!(a, b, "{op:?} at {n}");
            if a {
                break;
            }
            points += 1;
        }
        // Every operation has await points to drop it at: at least its command, a
        // status read and (for array operations) a delay.
        assert!(points >= 3, "{}: {op:?}: {points}", spec.profile.name);
    }
}

#[test]
fn cancel_w25n01gv() {
    cancel_everywhere(model::W25N01GV);
}

#[test]
fn cancel_w25m02gv_two_dies() {
    cancel_everywhere(model::W25M02GV);
}

#[test]
fn cancel_gd5f1gq4xa() {
    cancel_everywhere(model::GD5F1GQ4XA);
}

#[test]
fn cancel_mt29f1g01abafd() {
    cancel_everywhere(model::MT29F1G01ABAFD);
}
