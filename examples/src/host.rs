//! What the host programs share (feature `std`): the simulated W25N01GV, a volume over
//! it, device snapshots for power-cut runs, and a tally of checks that sets the exit
//! status.

use std::fmt::Display;
use std::process::ExitCode;

use nand_hal::sim::profile::W25N01GV;
use nand_hal::sim::{CutKind, FaultPlan, HeapStorage, SimNand};
use oftl::{Config, Greedy, W25n01gv};
use stagefs_core::Fs;

/// The simulated part: a W25N01GV (1 Gbit, 2 KiB pages, 64 pages per block) on the heap.
pub type Sim = SimNand<HeapStorage>;
/// A volume on it: the W25N01GV store configuration, 2 KiB scratch pages, 4 open files.
pub type Volume<'a> = Fs<W25n01gv<&'a mut Sim>, 2048, 4>;

/// With feature `log`: prints the stack's messages (debug and up) to standard error.
/// Call it first in `main`; without the feature it does nothing.
pub fn init_log() {
    #[cfg(feature = "log")]
    {
        struct Stderr;
        impl log::Log for Stderr {
            fn enabled(&self, _: &log::Metadata<'_>) -> bool {
                true
            }
            fn log(&self, r: &log::Record<'_>) {
                eprintln!("[{}] {}", r.level(), r.args());
            }
            fn flush(&self) {}
        }
        static LOGGER: Stderr = Stderr;
        if log::set_logger(&LOGGER).is_ok() {
            log::set_max_level(log::LevelFilter::Debug);
        }
    }
}

/// A factory-fresh simulated W25N01GV (a perfect device: faults come from the plans the
/// programs arm).
pub fn fresh() -> Sim {
    SimNand::heap(W25N01GV, FaultPlan::seeded(1))
}

/// A simulated W25N01GV holding a copy of `image` (a snapshot from [`Sim::storage`]).
pub fn from_image(image: &HeapStorage, seed: u64) -> Sim {
    SimNand::new(W25N01GV, image.clone(), FaultPlan::seeded(seed))
        .expect("the snapshot is a W25N01GV's")
}

/// A volume over `sim`, not mounted, in the store configuration the programs format
/// with (the default: a 16-block window). Boxed: the store's tables and cache are about
/// 45 KiB (a firmware puts them in a `static`).
pub fn volume(sim: &mut Sim) -> Box<Volume<'_>> {
    Box::new(Fs::new(W25n01gv::new(
        sim,
        const { Config::new() },
        Greedy::DEFAULT,
    )))
}

/// Power is back after a cut: the part takes commands again, with no fault armed.
pub fn power_on(sim: &mut Sim) {
    sim.power_on();
    sim.disarm();
}

/// A fault plan with a power cut at the `at`-th program/erase, the cut kind chosen by
/// `at` so that a sweep goes through every kind.
pub fn cut_plan(seed: u64, at: u64) -> FaultPlan {
    let kind = CutKind::ALL[(at % CutKind::ALL.len() as u64) as usize];
    FaultPlan::seeded(seed).with_cut(at, kind)
}

/// `n` cut points spread over operations `1..=ops` (all of them when `n >= ops`), with
/// the last `tail` operations always included (where a commit usually is).
pub fn cut_points(ops: u64, n: u64, tail: u64) -> Vec<u64> {
    let mut v: Vec<u64> = if n >= ops {
        (1..=ops).collect()
    } else {
        (0..n).map(|i| 1 + i * ops / n).collect()
    };
    v.extend(ops.saturating_sub(tail).max(1)..=ops);
    v.sort_unstable();
    v.dedup();
    v
}

/// Checks made by a program: each one printed, failures counted; the exit status is
/// non-zero when any failed.
#[derive(Default)]
pub struct Checks {
    passed: u32,
    failed: u32,
}

impl Checks {
    /// Records a check and prints it.
    pub fn check(&mut self, ok: bool, what: impl Display) {
        if ok {
            self.passed += 1;
            println!("  ok: {what}");
        } else {
            self.failed += 1;
            println!("  FAILED: {what}");
        }
    }

    /// Records a failure.
    pub fn fail(&mut self, what: impl Display) {
        self.check(false, what);
    }

    /// The program's exit status, after a summary line.
    pub fn finish(&self, program: &str) -> ExitCode {
        if self.failed == 0 {
            println!("{program}: all {} checks passed", self.passed);
            ExitCode::SUCCESS
        } else {
            println!(
                "{program}: {} of {} checks FAILED",
                self.failed,
                self.failed + self.passed
            );
            ExitCode::FAILURE
        }
    }
}
