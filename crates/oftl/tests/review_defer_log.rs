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

use crate::common;
use common::lifecycle::Lifecycle;

use common::*;
use nand_hal::sim::{profile, CutKind, FaultConfig, FaultPlan, TornMode};
use nand_hal::{NandFlash, PageAddr};
use oftl::{BlockState, Damaged};

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
    match e {
        OpError::PowerLoss => true,
        // A trim's reads (`run_op` maps them to `Other`).
        OpError::Other(s) => s.contains("PowerLoss"),
        OpError::NoSpace => false,
    }
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
    // Log streams only: object data has pre-existing rebuild issues (see
    // `rebuild_revives_a_cut_write_into_a_hole_after_recovery`; after many failed
    // programs a rebuild may also bring back an object deleted long ago whose pages do
    // not read, which DESIGN 7.5 documents), unrelated to the log head's deferred block.
    let mut seen = Model::new();
    for &id in want.durable.logs.keys() {
        let (start, _) = fs
            .log_bounds(id)
            .map_err(|e| format!("{what}: rebuild: log {id}: {e:?}"))?;
        let mut recs = Vec::new();
        let (mut lsn, mut buf) = (start, vec![0u8; 4096]);
        while let Some(r) = fs
            .log_read(id, lsn, &mut buf)
            .map_err(|e| format!("{what}: rebuild: log {id} at {lsn}: {e:?}"))?
        {
            recs.push(buf[..r.len].to_vec());
            lsn = r.next;
        }
        seen.logs.insert(id, recs);
    }
    if seen.logs != want.durable.logs {
        let counts = |m: &Model| {
            m.logs
                .iter()
                .map(|(k, v)| (*k, v.len()))
                .collect::<Vec<_>>()
        };
        return Err(format!(
            "{what}: rebuilt logs differ: {:?} vs acknowledged {:?}",
            counts(&seen),
            counts(&want.durable)
        ));
    }
    Ok(())
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

/// PRE-EXISTING (present at e6ff772, before both changes; not caused by them): a
/// full-scan rebuild after a crash recovery brings back a write the cut interrupted
/// (never acknowledged, dropped by the recovery) when it wrote into a hole of the object.
///
/// Seed 1's workload cut at its 29th program: the write in flight (object 2, offset
/// 4000) had programmed its first page (lpn 1, seq 10, no commit) when the power went.
/// Recovery (`recovery.rs`, `scan_window`/`replay_window`) drops it and relocates the
/// data head's block (`relocate_suspects`), so the acknowledged pages get numbers 11..16
/// above it. But the rebuild (`rebuild.rs`, `rebuild_decide`) drops only "the data
/// head's pages after its newest commit page": the newest commit is now a relocated
/// copy numbered 16, so page seq 10 counts as committed and, lpn 1 having no newer
/// version (it was a hole), the rebuilt object shows the unacknowledged bytes at 4000.
/// DESIGN 7.5 lists the revival only "when the recovery after it relocated its last
/// block but not the earlier ones"; here the cut transaction is one page in the one
/// block recovery relocated. The comment in `relocate_suspects` ("their acknowledged
/// pages then carry numbers above the dropped tail's, which a full-scan rebuild relies
/// on") protects overwrites, not writes into holes.
///
/// Suggested fix: have recovery record the dropped tail's number range durably (e.g. a
/// metadata-kind "void" page on the data head, or a field of the closing checkpoint that
/// the rebuild also reads from the newest readable checkpoint/marker), and have
/// `rebuild_decide` drop data-head pages in that range; or have the rebuild drop pages
/// of a transaction id (`tx_delta`) for which no commit page of the same id survives and
/// whose block also holds a later recovery's relocated copies.
#[test]
#[ignore = "finding (pre-existing, not from the reviewed changes): rebuild revives a cut write into a hole"]
fn rebuild_revives_a_cut_write_into_a_hole_after_recovery() {
    let seed = 1;
    let ops = workload(seed, 70);
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
    let mut acked = Pending::new(Model::new());
    let mut i = 0;
    {
        let mut fs = Fs::formatted(&mut sim, cfgw(6)).unwrap();
        fs.flash_mut().arm(cut_plan(seed, 29, CutKind::Clean));
        assert!(run_from(&mut fs, &ops, &mut i, &mut acked).is_err());
    }
    sim.power_on();
    sim.disarm();
    let mut fs = Fs::mounted(&mut sim).unwrap();
    let base = check_after_cut(&mut fs, &acked, ops.get(i)).unwrap();
    let seen = observe(&mut fs).unwrap();
    drop(fs);
    let mut copy = sim.clone();
    let mut fs = Fs::new(&mut copy, oftl::Config::new(), Default::default());
    fs.mount_damaged(Damaged::Rebuild {
        lost_meta_attrs: [0xFF; oftl::ATTR_LEN],
    })
    .unwrap();
    let rebuilt = observe(&mut fs).unwrap();
    assert!(
        base.allows(&rebuilt, None).is_ok(),
        "rebuilt objects differ from the recovered ones: {}",
        matches(&rebuilt, &[&seen]).unwrap_err()
    );
}

// ---------------------------------------------------------------------------------------
// Second cuts: during the recovery, the background step that moves the queued block,
// and the writes after it.

/// Mounts (after a cut) and checks against `acked` (or it plus `in_flight`); then a
/// background step, more work, with the power cut at `plan`'s point (if it fires, power
/// returns and the store is mounted and checked again). Ends with a clean remount.
fn mount_collect_more(
    sim: &mut Sim,
    seed: u64,
    acked: &Pending,
    in_flight: Option<&Op>,
    plan: Option<FaultPlan>,
) -> Result<u64, String> {
    if let Some(p) = plan {
        sim.arm(p);
    } else {
        sim.arm(FaultPlan::seeded(seed));
    }
    let more = workload(seed ^ 0x5EED, 20);
    // Where the state stands: before the mount's checkpoint, it is the cut's.
    let mut base: Option<Pending> = None;
    let mut j = 3;
    let mut flight: Option<Op> = None;
    let r: Result<(), String> = (|| {
        let mut fs = match Fs::mounted(&mut *sim) {
            Ok(fs) => fs,
            Err(oftl::MountError::Flash(e))
                if nand_hal::Error::kind(&e) == nand_hal::ErrorKind::PowerLoss =>
            {
                return Err("cut".into())
            }
            Err(e) => return Err(format!("mount: {e:?}")),
        };
        let b = check_after_cut(&mut fs, acked, in_flight).map_err(|e| format!("mount: {e}"))?;
        base = Some(b);
        match fs.gc_step(u32::MAX) {
            Ok(_) => {}
            Err(oftl::WriteError::Flash(e))
                if nand_hal::Error::kind(&e) == nand_hal::ErrorKind::PowerLoss =>
            {
                return Err("cut".into())
            }
            Err(e) => return Err(format!("gc_step: {e:?}")),
        }
        let seen = observe(&mut fs)?;
        base.as_ref()
            .unwrap()
            .allows(&seen, None)
            .map_err(|e| format!("after gc_step: {e}"))?;
        let b = base.as_mut().unwrap();
        match run_from(&mut fs, &more, &mut j, b) {
            Ok(()) => {}
            Err((e, op)) if is_power_loss(&e) => {
                flight = Some(op);
                return Err("cut".into());
            }
            Err((e, op)) => return Err(format!("more: {op:?}: {e:?}")),
        }
        match fs.unmount() {
            Ok(()) => Ok(()),
            Err(oftl::WriteError::Flash(e))
                if nand_hal::Error::kind(&e) == nand_hal::ErrorKind::PowerLoss =>
            {
                Err("cut".into())
            }
            Err(e) => Err(format!("unmount: {e:?}")),
        }
    })();
    let ops = sim.ops_since_arm();
    match r {
        Ok(()) => {}
        // A read's cache write-back can meet the cut too.
        Err(e) if e == "cut" || e.contains("power loss") || e.contains("PowerLoss") => {}
        Err(e) => return Err(e),
    }
    sim.power_on();
    sim.disarm();
    let mut fs = Fs::mounted(&mut *sim).map_err(|e| format!("mount after second cut: {e:?}"))?;
    let after = match &base {
        None => check_after_cut(&mut fs, acked, in_flight),
        Some(b) => check_after_cut(&mut fs, b, flight.as_ref()),
    }
    .map_err(|e| format!("after second cut: {e}"))?;
    fs.gc_step(u32::MAX)
        .map_err(|e| format!("gc_step: {e:?}"))?;
    let seen = observe(&mut fs)?;
    after
        .allows(&seen, None)
        .map_err(|e| format!("final gc_step: {e}"))?;
    rebuild_matches(fs.flash(), &after, "final")?;
    Ok(ops)
}

/// Runs the workload cut at `k`; returns the device, the acknowledged state, the op in
/// flight (None: the cut point is past the workload).
fn cut_workload(
    seed: u64,
    ops: &[Op],
    k: u64,
    kind: CutKind,
    window: u16,
) -> Option<(Sim, Pending, Option<Op>)> {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
    let mut acked = Pending::new(Model::new());
    let mut i = 0;
    {
        let mut fs = Fs::formatted(&mut sim, cfgw(window)).unwrap();
        fs.flash_mut().arm(cut_plan(seed, k, kind));
        match run_from(&mut fs, ops, &mut i, &mut acked) {
            Ok(()) => return None,
            Err((e, _)) if is_power_loss(&e) => {}
            Err((e, op)) => panic!("op {i} {op:?}: {e:?}"),
        }
    }
    sim.power_on();
    sim.disarm();
    Some((sim, acked, ops.get(i).cloned()))
}

#[test]
fn second_cut_during_recovery_collection_and_after() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for (seed, window) in [(4u64, 6u16), (5, 4)] {
        let ops = workload(seed, 50);
        let n = op_count(seed, &ops, window);
        for k in (7..n).step_by(11) {
            let Some((sim0, acked, flight)) =
                cut_workload(seed, &ops, k, CutKind::Torn(TornMode::Random), window)
            else {
                continue;
            };
            let mut s = sim0.clone();
            let m = match mount_collect_more(&mut s, seed, &acked, flight.as_ref(), None) {
                Ok(m) => m,
                Err(e) => {
                    failures.push(format!("seed {seed} w{window} cut {k} uncut: {e}"));
                    continue;
                }
            };
            for j in (1..=m).step_by(2) {
                for kind in [CutKind::Clean, CutKind::Torn(TornMode::Random)] {
                    runs += 1;
                    let mut s = sim0.clone();
                    if let Err(e) = mount_collect_more(
                        &mut s,
                        seed,
                        &acked,
                        flight.as_ref(),
                        Some(cut_plan(seed + j, j, kind)),
                    ) {
                        failures.push(format!(
                            "seed {seed} w{window} cut {k} then {j} {kind:?}: {e}"
                        ));
                    }
                }
            }
        }
    }
    eprintln!("{runs} second-cut runs");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures[..failures.len().min(8)].join("\n")
    );
}

// ---------------------------------------------------------------------------------------
// Crash cycles that never collect; trims that empty the queued block; its reuse.

/// Log-only rounds (appends, some trims, an object write) each ended by a cut in the
/// middle of an append; never a background step. The queued block is forgotten at
/// every cut; nothing may pile up into `NoSpace` and nothing acknowledged may go.
#[test]
fn crash_cycles_without_collection() {
    for (seed, window) in [(21u64, 6u16), (22, 4), (23, 5)] {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
        let mut r = Rng(seed * 7919 + 1);
        let mut acked = Pending::new(Model::new());
        {
            let mut fs = Fs::formatted(&mut sim, cfgw(window)).unwrap();
            let mut i = 0;
            run_from(
                &mut fs,
                &[Op::CreateLog, Op::Create, Op::CreateLog],
                &mut i,
                &mut acked,
            )
            .unwrap();
            fs.unmount().unwrap();
        }
        let mut deferred = 0;
        for cycle in 0..60u32 {
            let mut ops = Vec::new();
            for t in 0..40u32 {
                let s = seed as u32 * 100_000 + cycle * 100 + t;
                match r.below(10) {
                    0..=5 => ops.push(Op::Append {
                        slot: r.below(2) as usize,
                        len: [64, 600, 1500][r.below(3) as usize],
                        seed: s,
                    }),
                    6 => ops.push(Op::Batch {
                        slot: 0,
                        n: 3,
                        len: 100,
                        seed: s,
                    }),
                    7 => ops.push(Op::Trim {
                        slot: r.below(2) as usize,
                        n: 6,
                    }),
                    _ => {
                        ops.push(Op::Write {
                            slot: 0,
                            off: r.below(8) * 2048,
                            len: 2048,
                            seed: s,
                        });
                        ops.push(Op::Flush { slot: 0 });
                    }
                }
            }
            let cut_at = 5 + r.below(40);
            let kind = KINDS[r.below(3) as usize];
            let mut fs = Fs::mounted(&mut sim)
                .unwrap_or_else(|e| panic!("seed {seed} cycle {cycle}: mount: {e:?}"));
            let seen = observe(&mut fs).unwrap();
            acked
                .allows(&seen, None)
                .unwrap_or_else(|e| panic!("seed {seed} cycle {cycle}: {e}"));
            fs.flash_mut()
                .arm(cut_plan(seed + cycle as u64, cut_at, kind));
            let mut i = 0;
            let res = run_from(&mut fs, &ops, &mut i, &mut acked);
            let flight = ops.get(i).cloned();
            match res {
                Ok(()) => fs.flash_mut().cut_power(),
                Err((e, _)) if is_power_loss(&e) => {}
                Err((e, op)) => panic!(
                    "seed {seed} w{window} cycle {cycle}: {op:?}: {e:?} (used {} of {} pages)",
                    fs.used_pages(),
                    fs.capacity_pages()
                ),
            }
            drop(fs);
            sim.power_on();
            sim.disarm();
            let mut fs = Fs::mounted(&mut sim)
                .unwrap_or_else(|e| panic!("seed {seed} cycle {cycle}: mount: {e:?}"));
            if fs.stats().relocated_pages <= 3 {
                deferred += 1;
            }
            acked = check_after_cut(&mut fs, &acked, flight.as_ref())
                .unwrap_or_else(|e| panic!("seed {seed} cycle {cycle}: {e}"));
            // Crash again right after the recovery, before any collection.
            fs.flash_mut().cut_power();
            drop(fs);
            sim.power_on();
        }
        eprintln!("seed {seed} w{window}: {deferred} recoveries moved at most 3 pages");
        let mut fs = Fs::mounted(&mut sim).unwrap();
        let seen = observe(&mut fs).unwrap();
        acked.allows(&seen, None).unwrap();
        rebuild_matches(fs.flash(), &acked, "after the cycles").unwrap();
    }
}

/// Recovers a store cut in the middle of a long log (the log block queued), returns it
/// with the acknowledged state, the stream and the queued block.
fn queued_store(sim: &mut Sim, window: u16, records: u32) -> (Pending, u32, u32) {
    let mut acked = Pending::new(Model::new());
    let mut i = 0;
    let mut ops = vec![Op::CreateLog, Op::Create];
    for n in 0..records {
        ops.push(Op::Append {
            slot: 0,
            len: 64,
            seed: 7000 + n,
        });
    }
    ops.push(Op::Append {
        slot: 0,
        len: 1500,
        seed: 1,
    });
    {
        let mut fs = Fs::formatted(&mut *sim, cfgw(window)).unwrap();
        run_from(&mut fs, &ops[..ops.len() - 1], &mut i, &mut acked).unwrap();
        // Torn: the last append (a fresh page's program).
        fs.flash_mut()
            .arm(cut_plan(9, 1, CutKind::Torn(TornMode::Prefix)));
        let r = run_from(&mut fs, &ops, &mut i, &mut acked);
        assert!(r.is_err());
    }
    let b = newest_log_block(sim).unwrap();
    sim.power_on();
    sim.disarm();
    (acked, 1, b)
}

/// The queued block emptied by a trim, freed by a checkpoint and reused by the heads
/// before the first background step: the stale entry must not make collection touch it.
#[test]
fn queued_block_trimmed_freed_and_reused_before_collection() {
    for window in [4u16, 6] {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(31));
        let (acked, stream, b) = queued_store(&mut sim, window, 4 * 40 + 2);
        let mut fs = Fs::mounted(&mut sim).unwrap();
        let mut base = check_after_cut(&mut fs, &acked, None).unwrap();
        let bi = fs.blocks()[b as usize];
        assert!(
            bi.state() == BlockState::Full && bi.valid() > 0,
            "w{window}: not queued: {bi:?}"
        );
        // The data head's pages (the creations) and the log's last page moved.
        assert!(fs.stats().relocated_pages <= 3, "{:?}", fs.stats());
        // Trim everything: the queued block holds nothing valid.
        let end = fs.log_bounds(stream).unwrap().1;
        fs.log_trim(stream, end).unwrap();
        base.durable.logs.get_mut(&stream).unwrap().clear();
        assert_eq!(fs.blocks()[b as usize].valid(), 0, "w{window}");
        fs.sync().unwrap();
        // Fill until the block is reused and full of other pages again.
        let mut n = 0u32;
        let mut j = 0;
        let mut ops = Vec::new();
        while !(fs.blocks()[b as usize].erases() > bi.erases()
            && fs.blocks()[b as usize].state() == BlockState::Full
            && fs.blocks()[b as usize].valid() > 0)
        {
            n += 1;
            assert!(
                n < 3000,
                "w{window}: block {b} never reused: {:?}",
                fs.blocks()[b as usize]
            );
            ops.push(if n % 3 == 0 {
                Op::Write {
                    slot: 0,
                    off: (n as u64 % 20) * 2048,
                    len: 2048,
                    seed: n,
                }
            } else {
                Op::Append {
                    slot: 0,
                    len: 600,
                    seed: 50_000 + n,
                }
            });
            if n % 3 == 0 {
                ops.push(Op::Flush { slot: 0 });
            }
            if n % 40 == 0 {
                ops.push(Op::Trim { slot: 0, n: 30 });
                ops.push(Op::Sync);
            }
            run_from(&mut fs, &ops, &mut j, &mut base).unwrap();
        }
        let seen = observe(&mut fs).unwrap();
        base.allows(&seen, None).unwrap();
        while fs.gc_step(u32::MAX).unwrap().more {}
        let seen = observe(&mut fs).unwrap();
        base.allows(&seen, None)
            .unwrap_or_else(|e| panic!("w{window}: after collection: {e}"));
        fs.unmount().unwrap();
        drop(fs);
        let mut fs = Fs::mounted(&mut sim).unwrap();
        let seen = observe(&mut fs).unwrap();
        base.allows(&seen, None).unwrap();
    }
}

/// Program and erase failures, and read errors, around the step that moves the queued
/// block; then a clean remount and a rebuild.
#[test]
fn faults_while_moving_the_queued_block() {
    faults_run(None);
}

/// FINDING (pre-existing: the rebuild's choice among log pages, not the deferred
/// block; it surfaced when the recovery's re-check of torn-tail pages shifted the
/// simulator's fault draws). With 15% of programs failing during the recovery, the
/// background step and an append (window 4, run 117 of the sweep above), a full-scan
/// rebuild of the result maps a log page whose record 77 then reads `Corrupted`.
/// Likely cause: `rebuild_stream` (rebuild.rs) keeps, per logical log page, the copy
/// with the newest whole group and, on a tie, the one with more whole groups, else the
/// first found; a failed program and its retry carry the same numbers, and a failed
/// copy that read well in the scan (unstable since its failed program) can be kept.
/// Found: the two copies were pages 180 and 181 of one block (a relocation's failed
/// program and its retry), same numbers, same whole groups; the first was kept.
/// Fixed: on such a tie the rebuild keeps the later copy (later in the same block, or
/// in the block that went on to newer numbers).
#[test]
fn finding_rebuild_after_failed_programs_keeps_an_unreadable_log_page() {
    faults_run(Some((4, 117)));
}

/// The sweep of `faults_while_moving_the_queued_block`, or one run of it (`only`:
/// window and run).
fn faults_run(only: Option<(u16, u32)>) {
    let mut runs = 0;
    for window in [4u16, 6] {
        if only.is_some_and(|(w, _)| w != window) {
            continue;
        }
        let mut sim0 = Sim::heap(profile::TINY, FaultPlan::seeded(41));
        let (acked, _stream, b) = queued_store(&mut sim0, window, 4 * 24 + 1);
        // Reads the mount and the step make.
        let reads = {
            let mut s = sim0.clone();
            s.arm(FaultPlan::seeded(1));
            let mut fs = Fs::mounted(&mut s).unwrap();
            fs.gc_step(u32::MAX).unwrap();
            fs.flash().reads_since_arm() as u32
        };
        for f in 0..(reads + 40) {
            if only.is_some_and(|(_, o)| o != f) {
                continue;
            }
            runs += 1;
            let mut s = sim0.clone();
            let faults = match f % 4 {
                0 => FaultConfig {
                    read_fail_at: f + 1,
                    read_fail_len: 1 + f % 3,
                    ..FaultConfig::default()
                },
                1 => FaultConfig {
                    program_fail_ppm: 150_000,
                    ..FaultConfig::default()
                },
                2 => FaultConfig {
                    erase_fail_ppm: 300_000,
                    program_fail_ppm: 50_000,
                    ..FaultConfig::default()
                },
                _ => FaultConfig {
                    read_fail_at: f + 1,
                    // Within the retries (longer runs: see
                    // `long_read_error_run_in_the_scan_silently_drops_the_log_tail`).
                    read_fail_len: 3,
                    ..FaultConfig::default()
                },
            };
            s.arm(FaultPlan::seeded(1000 + f as u64).with_faults(faults));
            let mut fs = match Fs::mounted(&mut s) {
                Ok(fs) => fs,
                Err(oftl::MountError::MediaLoss { .. }) if f % 4 == 3 => continue,
                Err(e) => {
                    if f % 4 == 3 {
                        continue;
                    }
                    panic!("w{window} f{f}: mount: {e:?}")
                }
            };
            let r = fs.gc_step(u32::MAX);
            let r2 = fs.log_append(1, &[5u8; 100]);
            fs.flash_mut().disarm();
            if let Err(e) = &r {
                assert!(
                    !matches!(e, oftl::WriteError::Corrupted),
                    "w{window} f{f}: gc_step: {e:?}"
                );
                // Checkpoint blocks worn out by the failures: read-only, but intact.
                if matches!(e, oftl::WriteError::ReadOnly) {
                    let seen = observe(&mut fs).unwrap();
                    acked
                        .allows(&seen, None)
                        .unwrap_or_else(|e| panic!("w{window} f{f}: read-only: {e}"));
                    continue;
                }
                assert!(f % 4 == 3, "w{window} f{f}: gc_step: {e:?}");
                continue;
            }
            let mut want = acked.clone();
            if r2.is_ok() {
                want.durable.logs.get_mut(&1).unwrap().push(vec![5u8; 100]);
            }
            let seen = observe(&mut fs).unwrap_or_else(|e| panic!("w{window} f{f}: {e}"));
            want.allows(&seen, None).unwrap_or_else(|e| {
                panic!(
                    "w{window} f{f}: {e} ({r:?}, {r2:?}, block {b}: {:?})",
                    fs.blocks()[b as usize]
                )
            });
            if fs.unmount().is_err() {
                continue;
            }
            drop(fs);
            let mut fs = Fs::mounted(&mut s).unwrap();
            let seen = observe(&mut fs).unwrap();
            want.allows(&seen, None)
                .unwrap_or_else(|e| panic!("w{window} f{f}: remount: {e}"));
            let bad = fs
                .blocks()
                .iter()
                .filter(|b| b.state() == BlockState::Bad)
                .count();
            match rebuild_matches(fs.flash(), &want, "faults") {
                Ok(()) => {}
                // Not probed further (see the report): after program/erase failures a
                // rebuild of this nearly empty store may refuse for room, at e6ff772
                // (before the reviewed changes) as well.
                Err(e) if e.contains("NoSpace") => {
                    eprintln!(
                        "w{window} f{f}: rebuild NoSpace with {bad} bad blocks, used {} of {}",
                        fs.used_pages(),
                        fs.capacity_pages()
                    );
                }
                Err(e) => panic!("w{window} f{f}: {e}"),
            }
        }
    }
    eprintln!("{runs} fault runs");
}

/// Runs of transient read errors of every length at every read of a crash recovery
/// (the store of the finding below): the mount either refuses with a clear error or
/// shows the acknowledged state; it never drops acknowledged records or objects as a
/// torn tail.
#[test]
fn read_error_runs_anywhere_in_a_recovery() {
    let mut sim0 = Sim::heap(profile::TINY, FaultPlan::seeded(41));
    let (acked, _stream, _b) = queued_store(&mut sim0, 4, 4 * 24 + 1);
    let mut refused = 0;
    let mut runs = 0;
    for at in 1..160u32 {
        for len in [2u32, 4, 9, 40] {
            let mut s = sim0.clone();
            s.arm(
                FaultPlan::seeded(1000 + at as u64).with_faults(FaultConfig {
                    read_fail_at: at,
                    read_fail_len: len,
                    ..FaultConfig::default()
                }),
            );
            runs += 1;
            match Fs::mounted(&mut s) {
                Err(_) => refused += 1,
                Ok(mut fs) => {
                    // The errors were the mount's: reads after it go well.
                    fs.flash_mut().disarm();
                    let seen = observe(&mut fs).unwrap();
                    if let Err(e) = acked.allows(&seen, None) {
                        panic!("read errors from read {at}, {len} long: mount shows {e}");
                    }
                }
            }
        }
    }
    eprintln!("{runs} runs, {refused} refused");
}

/// FIXED (pre-existing, same result at e6ff772, before both changes): a
/// run of transient uncorrectable reads during a crash recovery's scan (40 consecutive
/// reads failing, each page's retries included, from the 48th read of the mount on)
/// makes the mount succeed with the log stream's last acknowledged records silently
/// gone (the stream ends early; `log_append` then reuses their LSNs). The module docs
/// of `recovery.rs` promise "Read errors never truncate history": an unreadable page
/// is a torn tail only if it is the last one; here several consecutive pages of the
/// log head's block do not read, which no single cut can produce.
///
/// Cause (as far as traced in the time available): `scan_window`
/// (`crates/oftl/src/recovery.rs`, the `Scan::Garbage` arm and the `mask == 0` arm of
/// the log branch) records an unreadable page only in `hole`, which becomes
/// `MediaLoss` when a later accepted page follows; a run of unreadable pages at the end
/// of a head's walk is dropped as if it were the one torn page (nothing checks that at
/// most one page, the last programmed, is unreadable). With reads failing at 14 or 15
/// instead, the data head's last commit page is dropped the same way (object 2's
/// creation vanishes), which DESIGN documents for one torn page only.
///
/// Suggested fix: in `scan_window`, count the unreadable, non-blank pages after a head's
/// last accepted page; more than one (or one that is not that head's last programmed
/// page, i.e. followed by a non-erased page of the same block) is `MediaLoss`, not a
/// torn tail; and re-read the tail page(s) with extra retries before deciding.
///
/// Fixed: after the scan the recovery reads the pages it took for torn tails (and a
/// last commit page whose full read failed) again; one that reads now was a transient
/// failure, and the window is scanned again (`Oftl::recover`, `RESCANS`).
#[test]
fn long_read_error_run_in_the_scan_silently_drops_the_log_tail() {
    let mut sim0 = Sim::heap(profile::TINY, FaultPlan::seeded(41));
    let (acked, _stream, _b) = queued_store(&mut sim0, 4, 4 * 24 + 1);
    let mut s = sim0.clone();
    s.arm(FaultPlan::seeded(1047).with_faults(FaultConfig {
        read_fail_at: 48,
        read_fail_len: 40,
        ..FaultConfig::default()
    }));
    match Fs::mounted(&mut s) {
        // Refusing (media loss) would be correct; so is reading everything.
        Err(e) => eprintln!("mount refused: {e:?}"),
        Ok(mut fs) => {
            let seen = observe(&mut fs).unwrap();
            acked.allows(&seen, None).unwrap_or_else(|e| {
                panic!(
                    "mount succeeded with {e}: {:?}",
                    seen.logs
                        .iter()
                        .map(|(k, v)| (*k, v.len()))
                        .collect::<Vec<_>>()
                )
            });
        }
    }
}
