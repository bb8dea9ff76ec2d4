//! The simulator's own robustness: any sequence of NAND operations and simulator controls,
//! with arbitrary (often invalid) addresses, columns and lengths, under any fault plan,
//! returns `Ok` or an error and never panics.
//!
//! The device is `TINY` (most inputs) or another built-in profile cut to a few blocks per
//! die, so multi-die, multi-plane and no-ECC parts are covered too. Besides "no panic" the
//! target checks what the simulator promises about errors:
//!
//! - every `Misuse` error is counted in `counters().misuse`, and nothing else is;
//! - without power every operation fails with `PowerLoss`; with power, `PowerLoss` comes
//!   only from a cut that fired during the operation, and leaves the device unpowered;
//! - `counters().power_cuts` counts the moments the device lost power.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nand_hal::sim::profile::{self, Profile, TINY};
use nand_hal::sim::{CutKind, FaultConfig, FaultPlan, PowerCut, SimNand, TimingMode, TornMode};
use nand_hal::{BlockAddr, ErrorKind, NandFlash, PageAddr, PipelinedNand};

/// Largest data buffer an operation passes (a 16 KiB page plus a margin past its end).
const MAX_DATA: usize = 16384 + 1024;
/// Blocks per die of the non-`TINY` profiles.
const SMALL_BLOCKS_PER_DIE: u32 = 8;

#[derive(Arbitrary, Debug)]
struct Input {
    /// Picks the part: see `profile_of`.
    profile: u8,
    plan: Plan,
    timing: u8,
    ops: Vec<Op>,
}

#[derive(Arbitrary, Debug)]
struct Plan {
    seed: u64,
    cut: Option<(u16, u8)>,
    read_correctable_ppm: u32,
    read_uncorrectable_ppm: u32,
    program_fail_ppm: u32,
    erase_fail_ppm: u32,
    program_noop_ppm: u32,
    erase_noop_ppm: u32,
    program_flip_ppm: u32,
    erased_flips_ppm: u32,
    partial_disturb_ppm: u32,
    read_disturb_threshold: u32,
    read_disturb_ppm: u32,
    endurance: u32,
    factory_bad: u32,
    unstable_after_cut: bool,
    out_of_order: bool,
    /// Aimed transient read failures (`FaultConfig::read_fail_at`, `read_fail_len`).
    read_fail_at: u16,
    read_fail_len: u8,
}

impl Plan {
    fn build(&self) -> FaultPlan {
        let cut = self.cut.map(|(at_op, kind)| PowerCut {
            at_op: at_op as u64,
            kind: match kind % 5 {
                0 => CutKind::Clean,
                1 => CutKind::Torn(TornMode::SomeBits),
                2 => CutKind::Torn(TornMode::MostBits),
                3 => CutKind::Torn(TornMode::Prefix),
                _ => CutKind::Torn(TornMode::Random),
            },
        });
        FaultPlan {
            seed: self.seed,
            cut,
            faults: FaultConfig {
                read_correctable_ppm: self.read_correctable_ppm,
                read_uncorrectable_ppm: self.read_uncorrectable_ppm,
                program_fail_ppm: self.program_fail_ppm,
                erase_fail_ppm: self.erase_fail_ppm,
                program_noop_ppm: self.program_noop_ppm,
                erase_noop_ppm: self.erase_noop_ppm,
                program_flip_ppm: self.program_flip_ppm,
                erased_flips_ppm: self.erased_flips_ppm,
                partial_disturb_ppm: self.partial_disturb_ppm,
                read_disturb_threshold: self.read_disturb_threshold,
                read_disturb_ppm: self.read_disturb_ppm,
                endurance: self.endurance,
                factory_bad: self.factory_bad,
                unstable_after_cut: self.unstable_after_cut,
                out_of_order: self.out_of_order,
                read_fail_at: self.read_fail_at as u32,
                read_fail_len: self.read_fail_len as u32,
            },
        }
    }
}

/// Bytes of a program: `base ^ (i * step)` for byte `i`.
#[derive(Arbitrary, Debug, Clone, Copy)]
struct Bytes {
    base: u8,
    step: u8,
}

#[derive(Arbitrary, Debug)]
struct Access {
    page: u32,
    column: u32,
    len: u16,
    oob_len: u8,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Read(Access),
    /// The step-aware read (whole page; the length picks a wrong one sometimes).
    ReadSteps(Access),
    Program(Access, Bytes, Bytes),
    Erase(u32),
    IsBad(u32),
    MarkBad(u32),
    StartProgram(Access, Bytes, Bytes),
    StartErase(u32),
    WaitDie(u32),
    WaitAll,
    DieBusy(u32),
    CutPower,
    PowerOn,
    Arm(Plan),
    Disarm,
    Timing(u8),
}

/// Mostly an index in `0..valid + 2` (in range and just past it); raw values with the top
/// nibble set stay as they are, for far-out-of-range and overflow edges.
fn pick(raw: u32, valid: u32) -> u32 {
    if raw >> 28 == 0xF {
        raw
    } else {
        raw % (valid + 2)
    }
}

fn timing_mode(raw: u8) -> TimingMode {
    match raw % 3 {
        0 => TimingMode::Typical,
        1 => TimingMode::Max,
        _ => TimingMode::Random,
    }
}

/// `TINY` for most inputs, else a built-in profile cut to a few blocks per die.
fn profile_of(raw: u8) -> Profile {
    let all = profile::ALL;
    if raw < 160 {
        TINY
    } else {
        all[raw as usize % all.len()].with_blocks_per_die(SMALL_BLOCKS_PER_DIE)
    }
}

fn fill(buf: &mut [u8], b: Bytes) {
    for (i, x) in buf.iter_mut().enumerate() {
        *x = b.base ^ (i as u8).wrapping_mul(b.step);
    }
}

/// The simulator and what the target expects of its counters.
struct Harness<S> {
    sim: SimNand<S>,
    misuse: u64,
    power_cuts: u64,
}

impl<S: nand_hal::sim::SimStorage> Harness<S> {
    /// Checks the outcome of one operation that does I/O (and so must see power).
    fn io<T>(&mut self, powered_before: bool, r: Result<T, nand_hal::sim::SimError>) {
        let powered_after = self.sim.is_powered();
        match r {
            Err(e) if e.kind() == ErrorKind::PowerLoss => {
                assert!(
                    !powered_after,
                    "PowerLoss returned but the device has power"
                );
            }
            _ => assert!(
                powered_before,
                "I/O without power did not fail with PowerLoss"
            ),
        }
        if let Err(e) = r {
            if e.kind() == ErrorKind::Misuse {
                self.misuse += 1;
            }
        }
        if powered_before && !powered_after {
            self.power_cuts += 1;
        }
    }

    fn check_counters(&self) {
        let c = self.sim.counters();
        assert_eq!(
            c.misuse, self.misuse,
            "misuse counter vs Misuse errors returned"
        );
        assert_eq!(
            c.power_cuts, self.power_cuts,
            "power cut counter vs power losses"
        );
    }
}

fuzz_target!(|input: Input| {
    let profile = profile_of(input.profile);
    let g = profile.geometry;
    let mut h = Harness {
        sim: SimNand::heap(profile, input.plan.build()),
        misuse: 0,
        power_cuts: 0,
    };
    h.sim.set_timing_mode(timing_mode(input.timing));
    let mut data = vec![0u8; MAX_DATA];
    let mut oob = [0u8; 256];
    let data_span = g.page_size() + g.page_size() / 4;

    for op in &input.ops {
        let powered = h.sim.is_powered();
        match op {
            Op::Read(a) => {
                let page = PageAddr(pick(a.page, g.pages()));
                let len = a.len as usize % (data_span as usize + 1);
                let (d, o) = (&mut data[..len], &mut oob[..a.oob_len as usize]);
                let r = h.sim.read(page, pick(a.column, data_span), d, o);
                h.io(powered, r);
            }
            Op::ReadSteps(a) => {
                let page = PageAddr(pick(a.page, g.pages()));
                let len = if a.len % 4 == 0 {
                    a.len as usize % (data_span as usize + 1)
                } else {
                    g.page_size() as usize
                };
                let (d, o) = (&mut data[..len], &mut oob[..a.oob_len as usize]);
                let r = h.sim.read_steps(page, d, o);
                if let Ok(rep) = &r {
                    let unit = h.sim.capabilities().program_unit;
                    assert_eq!(rep.steps().len() as u32, g.page_size() / unit);
                }
                h.io(powered, r);
            }
            Op::Program(a, db, ob) | Op::StartProgram(a, db, ob) => {
                let page = PageAddr(pick(a.page, g.pages()));
                let column = pick(a.column, data_span);
                let len = a.len as usize % (data_span as usize + 1);
                fill(&mut data[..len], *db);
                fill(&mut oob[..a.oob_len as usize], *ob);
                let (d, o) = (&data[..len], &oob[..a.oob_len as usize]);
                let r = if matches!(op, Op::Program(..)) {
                    h.sim.program(page, column, d, o)
                } else {
                    h.sim.start_program(page, column, d, o)
                };
                h.io(powered, r);
            }
            Op::Erase(b) => {
                let r = h.sim.erase(BlockAddr(pick(*b, g.blocks())));
                h.io(powered, r);
            }
            Op::StartErase(b) => {
                let r = h.sim.start_erase(BlockAddr(pick(*b, g.blocks())));
                h.io(powered, r);
            }
            Op::IsBad(b) => {
                let r = h.sim.is_bad(BlockAddr(pick(*b, g.blocks())));
                h.io(powered, r);
            }
            Op::MarkBad(b) => {
                let r = h.sim.mark_bad(BlockAddr(pick(*b, g.blocks())));
                h.io(powered, r);
            }
            Op::WaitDie(d) => {
                let r = h.sim.wait_die(pick(*d, g.dies()));
                h.io(powered, r);
            }
            Op::WaitAll => {
                let r = h.sim.wait_all();
                h.io(powered, r);
            }
            Op::DieBusy(d) => {
                let _ = h.sim.die_busy(pick(*d, g.dies()));
            }
            Op::CutPower => {
                h.sim.cut_power();
                if powered {
                    h.power_cuts += 1;
                }
                assert!(!h.sim.is_powered());
            }
            Op::PowerOn => {
                h.sim.power_on();
                assert!(h.sim.is_powered());
            }
            Op::Arm(p) => h.sim.arm(p.build()),
            Op::Disarm => h.sim.disarm(),
            Op::Timing(t) => h.sim.set_timing_mode(timing_mode(*t)),
        }
        h.check_counters();
    }
    let _ = h.sim.wear_stats();
    let _ = h.sim.now_ns();
});
