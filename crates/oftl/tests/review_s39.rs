//! Independent review (s39) of b1f250f: collection erases ahead the window blocks its
//! copies may take (`gc_room`), a clean mount's index head checks its recorded block
//! from the top down, and a session that loaded an older checkpoint spares a full
//! index block while other free blocks remain.
//!
//! Finding (failing on b1f250f, fixed in the commit after it as suggested: `gc_room`
//! erases ahead its room plus the block kept against failures):
//! - `gc_failed_program_then_two_failed_erases_still_exhausts_the_window`,
//!   `gc_exhausted_replay_tokens` (medium): the shape the commit names as fixed (a failed
//!   program, then two failed erases in one collection step) still runs the cold head out
//!   of window, `Exhausted`, handle poisoned, power on, stores 35-50 % full. `gc_room`
//!   erases ahead `room` pages, but `room` (`copy_room`) already excludes the one-block
//!   failure reserve; when the room fits in the erased blocks (or the head's own block)
//!   the reserve block is not erased ahead, and a program failure pushes the copies into
//!   it: its erase fails mid-copy, and the next one's. `make_room` erases ahead
//!   `window_need(pages)`, which counts the reserve block. Erasing ahead `room + ppb` in
//!   `gc_room` (tried in the reviewer's clone: /tmp/rev39/experimental_fix.patch) made
//!   every case here pass (the four tokens, 80 uncut runs, and the sweeps of this file:
//!   0 failures). b1f250f does reduce it: 71f7486 fails the same sweeps in 6 (Greedy),
//!   10+ (ParaGc, stopped at the cap) and 8 (512-byte) of 3,000 cases each; b1f250f in
//!   2, 6 and 2.
//!
//! Probes that held are the passing tests (each says what and how many).

use crate::common;

use common::lifecycle::Lifecycle;
use common::*;
use nand_hal::powerloss::{self, CheckError, Scenario, Schedule, Sweep};
use nand_hal::sim::{profile, CutKind, FaultConfig, FaultPlan, Profile, TornMode};
use nand_hal::ErrorKind;
use oftl::{Health, MountError, ReadOnlyReason, SpacePolicy, WriteError};

struct Oracle {
    acked: Pending,
    in_flight: Option<Op>,
}

/// A GC-heavy mixed workload over store type `FsOn<&mut Sim, P, M>`.
struct Mixed<P, const M: usize> {
    name: String,
    window: u16,
    preload: Vec<Op>,
    ops: Vec<Op>,
    _p: std::marker::PhantomData<P>,
}

fn wcfg(window: u16) -> oftl::Config {
    oftl::Config {
        window_blocks: window,
        ..cfg()
    }
}

/// `objects` objects of `pages` pages (plus two logs) preloaded; `n` operations,
/// weighted to whole rewrites and collection steps (big budgets).
fn mixed<P, const M: usize>(
    name: &str,
    window: u16,
    objects: usize,
    pages: usize,
    n: usize,
    seed: u64,
) -> Mixed<P, M> {
    let mut preload = Vec::new();
    for i in 0..objects {
        preload.push(Op::Create);
        preload.push(Op::Write {
            slot: i,
            off: 0,
            len: pages * 2048,
            seed: 1000 + i as u32,
        });
    }
    preload.push(Op::CreateLog);
    preload.push(Op::CreateLog);
    for i in 0..4u32 {
        preload.push(Op::Append {
            slot: i as usize % 2,
            len: 300,
            seed: 2000 + i,
        });
    }
    preload.push(Op::Sync);
    let mut r = Rng(seed | 1);
    let mut ops = Vec::new();
    let size = (pages * 2048) as u64;
    for k in 0..n as u32 {
        let slot = r.below(objects as u64) as usize;
        let op = match r.below(100) {
            0..=24 => Op::Write {
                slot,
                off: r.below(size),
                len: [700, 2048, 5000, 9000][r.below(4) as usize],
                seed: 10_000 + k,
            },
            25..=31 => Op::Flush { slot },
            32..=35 => Op::Sync,
            36..=47 => Op::Append {
                slot: r.below(2) as usize,
                len: 20 + r.below(600) as usize,
                seed: 20_000 + k,
            },
            48..=51 => Op::Trim {
                slot: r.below(2) as usize,
                n: 1 + r.below(3) as usize,
            },
            52..=57 => Op::Tx {
                a: slot,
                b: r.below(objects as u64) as usize,
                off: r.below(size / 2),
                len: [2048, 6000][r.below(2) as usize],
                seed: 40_000 + k,
                size: size / 2 + r.below(size / 2),
            },
            58..=74 => Op::Gc {
                budget: [16, 64, 200, 1000][r.below(4) as usize] as u32,
            },
            _ => Op::Write {
                slot,
                off: 0,
                len: size as usize,
                seed: 50_000 + k,
            },
        };
        ops.push(op);
    }
    Mixed {
        name: name.into(),
        window,
        preload,
        ops,
        _p: std::marker::PhantomData,
    }
}

type St<'a, P, const M: usize> = FsOn<&'a mut Sim, P, M>;

impl<P: SpacePolicy + Default + Clone, const M: usize> Scenario for Mixed<P, M> {
    type Oracle = Oracle;

    fn name(&self) -> &str {
        &self.name
    }

    fn profile(&self) -> Profile {
        profile::TINY
    }

    fn setup(&self, nand: &mut Sim) -> Result<Oracle, String> {
        let mut fs =
            St::<P, M>::formatted(nand, wcfg(self.window)).map_err(|e| format!("{e:?}"))?;
        let mut m = Model::new();
        for op in &self.preload {
            run_op(&mut fs, &m, op).map_err(|e| format!("preload {op:?}: {e:?}"))?;
            m = m.apply(op);
        }
        fs.unmount().map_err(|e| format!("{e:?}"))?;
        Ok(Oracle {
            acked: Pending::new(m),
            in_flight: None,
        })
    }

    fn run(&self, nand: &mut Sim, o: &mut Oracle) -> Result<(), String> {
        let mut fs = St::<P, M>::mounted(nand).map_err(|e| format!("mount: {e:?}"))?;
        for (i, op) in self.ops.iter().enumerate() {
            o.in_flight = Some(op.clone());
            match run_op(&mut fs, &o.acked.durable, op) {
                Ok(()) => o.acked = o.acked.apply(op),
                Err(OpError::NoSpace) => {
                    // A refusal well below capacity is a finding.
                    if fs.used_pages() * 10 < fs.capacity_pages() * 5 {
                        return Err(format!(
                            "op {i} {op:?}: NoSpace at {} of {} pages",
                            fs.used_pages(),
                            fs.capacity_pages()
                        ));
                    }
                }
                Err(OpError::PowerLoss) => return Err("power loss".into()),
                Err(_)
                    if matches!(
                        fs.health(),
                        Health::ReadOnly(
                            ReadOnlyReason::CheckpointBlocks | ReadOnlyReason::GoodBlocks
                        )
                    ) =>
                {
                    o.in_flight = None;
                    return Ok(());
                }
                Err(e) => {
                    return Err(format!(
                        "op {i} {op:?}: {e:?} (health {:?}, used {} of {})",
                        fs.health(),
                        fs.used_pages(),
                        fs.capacity_pages()
                    ))
                }
            }
            o.in_flight = None;
        }
        match fs.unmount() {
            Ok(()) | Err(WriteError::NoSpace) => Ok(()),
            Err(e) => Err(format!("unmount: {e:?}")),
        }
    }

    fn check(&self, nand: &mut Sim, o: &Oracle) -> Result<(), CheckError> {
        let mut fs = match St::<P, M>::mounted(nand) {
            Ok(fs) => fs,
            Err(MountError::Flash(e)) if e.kind() == ErrorKind::PowerLoss => {
                return Err(CheckError::PowerLoss)
            }
            Err(e) => return Err(format!("mount failed: {e:?}").into()),
        };
        let seen = match observe(&mut fs) {
            Ok(m) => m,
            Err(e) if e == "power loss" => return Err(CheckError::PowerLoss),
            Err(e) => return Err(e.into()),
        };
        let after = o.in_flight.as_ref().map(|op| o.acked.apply(op));
        let mut base = vec![o.acked.clone()];
        base.extend(after);
        let mut why = Vec::new();
        let mut found = None;
        for b in &base {
            // A check cut during recovery may have written its probe already.
            for pr in [None, Some((3u64, &b"after"[..]))] {
                match b.allows(&seen, pr) {
                    Ok(()) => found = Some(b),
                    Err(e) => why.push(e),
                }
            }
        }
        let Some(state) = found else {
            return Err(format!("state allowed by no oracle: {why:?}").into());
        };
        if let Some(&id) = state.durable.objs.keys().next() {
            match fs.write(id, 3, b"after").and_then(|()| fs.flush(id)) {
                Ok(()) => {}
                Err(WriteError::Flash(e)) if e.kind() == ErrorKind::PowerLoss => {
                    return Err(CheckError::PowerLoss)
                }
                Err(WriteError::ReadOnly)
                    if matches!(
                        fs.health(),
                        Health::ReadOnly(
                            ReadOnlyReason::CheckpointBlocks | ReadOnlyReason::GoodBlocks
                        )
                    ) =>
                {
                    return Ok(())
                }
                Err(WriteError::NoSpace) if fs.used_pages() * 10 >= fs.capacity_pages() * 8 => {
                    return Ok(())
                }
                Err(e) => {
                    return Err(format!(
                        "write after recovery: {e:?} (used {} of {} pages, {:?})",
                        fs.used_pages(),
                        fs.capacity_pages(),
                        fs.health()
                    )
                    .into())
                }
            }
        }
        Ok(())
    }
}

fn faults(erase_ppm: u32, program_ppm: u32) -> FaultConfig {
    FaultConfig {
        unstable_after_cut: true,
        program_fail_ppm: program_ppm,
        erase_fail_ppm: erase_ppm,
        ..FaultConfig::default()
    }
}

fn run_sweep<S: Scenario>(s: &S, sw: &Sweep) -> Vec<powerloss::Failure> {
    let t = std::time::Instant::now();
    let r = powerloss::sweep(s, sw);
    println!(
        "{}: {} ops, {} runs, {} cuts, {} failures, {:.1}s",
        s.name(),
        r.workload_ops,
        r.runs,
        r.cuts,
        r.failures.len(),
        t.elapsed().as_secs_f64()
    );
    for f in &r.failures {
        println!("  {} : {}", f.token, f.message);
    }
    r.failures
}

fn noisy_sweep<P: SpacePolicy + Default + Clone, const M: usize>(
    tag: &str,
    erase_ppm: u32,
    runs: usize,
    recovery: bool,
    cases: &[(u16, usize, usize, u64)],
) -> Vec<powerloss::Failure> {
    let mut fails = Vec::new();
    for &(w, objs, pages, seed) in cases {
        let s = mixed::<P, M>(&format!("{tag}-w{w}-s{seed}"), w, objs, pages, 120, seed);
        let mut sw = Sweep::exhaustive(seed);
        sw.faults = faults(erase_ppm, 25_000);
        sw.schedule = Schedule::Random { runs: runs as u64 };
        sw.kinds = vec![CutKind::Clean, CutKind::Torn(TornMode::Random)];
        if recovery {
            sw.recovery_cuts = powerloss::RecoveryCuts::Sample;
        }
        sw.max_failures = 0;
        fails.extend(run_sweep(&s, &sw));
    }
    fails
}

/// The failures that are not the `Exhausted` of
/// `gc_failed_program_then_two_failed_erases_still_exhausts_the_window`, nor a `NoSpace`
/// on a capacity shrunk by retired blocks (also at 71f7486, see
/// `noisy_gc_heavy_recovery_cuts`).
fn other_than_exhausted(f: Vec<powerloss::Failure>) -> Vec<powerloss::Failure> {
    f.into_iter()
        .filter(|f| !f.message.contains("Exhausted") && !f.message.contains("NoSpace"))
        .collect()
}

const SWEEP_CASES: [(u16, usize, usize); 5] =
    [(4, 6, 24), (5, 6, 24), (7, 6, 24), (10, 5, 26), (4, 4, 30)];

fn cases(base: u64) -> Vec<(u16, usize, usize, u64)> {
    SWEEP_CASES
        .iter()
        .enumerate()
        .map(|(i, &(w, o, p))| (w, o, p, base + i as u64))
        .collect()
}

/// Probe (held apart from the `Exhausted` finding): random cuts (clean and torn) under 8 % erase and 2.5 % program failures,
/// GC-heavy (collection steps of 16 to 1000 pages, whole rewrites), Greedy, whole-page
/// metadata, windows 4, 5, 7, 10, store about 50 % full; 5 workloads x 300 cut points x 2
/// kinds. Held apart from the `Exhausted` finding (see the report in the output).
#[test]
fn noisy_gc_heavy_greedy() {
    let f = noisy_sweep::<oftl::Greedy, 2048>("gc-greedy", 80_000, 300, false, &cases(31));
    assert!(other_than_exhausted(f).is_empty());
}

/// Probe (held apart from the `Exhausted` finding): the same with ParaGc.
#[test]
fn noisy_gc_heavy_para() {
    let f = noisy_sweep::<Para, 2048>("gc-para", 80_000, 300, false, &cases(41));
    assert!(other_than_exhausted(f).is_empty());
}

/// Probe (held apart from the `Exhausted` finding): the same with the 512-byte metadata
/// unit.
#[test]
fn noisy_gc_heavy_small_meta() {
    let f = noisy_sweep::<oftl::Greedy, 512>("gc-m512", 80_000, 300, false, &cases(51));
    assert!(other_than_exhausted(f).is_empty());
}

/// Probe (held): cuts during recovery too (first, middle, last program/erase of the
/// recovery after each cut): recovery walks meeting erased-ahead window blocks, 4 % erase
/// failures, Greedy and 512-byte metadata; 10 workloads, 120 cut points x 2 kinds x up to
/// 4 cases (about 9,400 runs), no lost or rolled-back acknowledged data, no misuse. Also
/// seen (not counted, as at 71f7486): a 24-page rewrite refused `NoSpace` at 177 of 368
/// pages (48 % of a capacity shrunk by retired blocks), and at window 4 a probe write after
/// a recovery cut refused at 174 of 256 pages.
#[test]
fn noisy_gc_heavy_recovery_cuts() {
    let mut f = noisy_sweep::<oftl::Greedy, 2048>("gc-rc", 40_000, 120, true, &cases(61));
    f.extend(noisy_sweep::<oftl::Greedy, 512>(
        "gc-rc512",
        40_000,
        120,
        true,
        &cases(71),
    ));
    assert!(other_than_exhausted(f).is_empty());
}

/// Uncut runs (no power cut) at high erase-failure rates, many seeds: no Exhausted,
/// no poisoning, no NoSpace below 60 %, clean unmount and remount exact.
fn uncut<P: SpacePolicy + Default + Clone, const M: usize>(
    tag: &str,
    erase_ppm: u32,
    seeds: std::ops::Range<u64>,
    w: u16,
) -> Vec<String> {
    let mut bad = Vec::new();
    for seed in seeds {
        let s = mixed::<P, M>(tag, w, 6, 24, 200, seed);
        let plan = FaultPlan {
            seed,
            cut: None,
            faults: faults(erase_ppm, 25_000),
        };
        let mut nand = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
        let mut o = match s.setup(&mut nand) {
            Ok(o) => o,
            Err(e) => {
                bad.push(format!("seed {seed}: setup {e}"));
                continue;
            }
        };
        nand.arm(plan);
        if let Err(e) = s.run(&mut nand, &mut o) {
            bad.push(format!("{tag} w{w} seed {seed}: run {e}"));
            continue;
        }
        if let Err(e) = s.check(&mut nand, &o) {
            bad.push(format!("{tag} w{w} seed {seed}: check {e:?}"));
        }
        if let Some(m) = nand.last_misuse() {
            bad.push(format!("{tag} w{w} seed {seed}: misuse {m:?}"));
        }
    }
    bad
}

/// FINDING (medium: power on, the handle poisoned, on a store 35-45 % full): the shape
/// b1f250f names as fixed, "a failed program then two failed erases in one step", still
/// runs the cold head out of window. `gc_room` erases ahead only `room` pages, and `room`
/// (`copy_room`) already leaves out the one-block failure reserve; when the room fits in
/// the cold head's current block nothing is erased ahead at all. A program failure in
/// that block (one page lost) pushes the copies one page past it, into the next window
/// block, which the head erases mid-copy (`take_window_block` -> not erased ahead ->
/// `start_block`); that erase fails, and so does the next: `Exhausted` from
/// `gc_step`. Transactions do not have this gap: `make_room` erases ahead
/// `window_need(pages)`, which includes the reserve block.
///
/// Traced (seed 10): room 4 with the cold head in block 34 (erased ahead, 4 pages left),
/// program fails at page 15, head takes 36 (not erased ahead) -> erase fails, takes 37 ->
/// erase fails, window exhausted. Seed 29: room 10 in block 39, program fails at page 9,
/// then 40 and 42 fail their erases.
///
/// Uncut runs (no power cut), Greedy, window 4, 12 % erase and 2.5 % program failures,
/// 200 GC-heavy operations: `Exhausted` in 2 of 40 seeds (10, 29), the same 2 with the
/// 512-byte metadata unit. (At 71f7486 the same runs poison in other seeds: w6 25 and 40;
/// the fault draws move with the extra erases, so the counts are not comparable.)
#[test]
fn gc_failed_program_then_two_failed_erases_still_exhausts_the_window() {
    let mut bad = Vec::new();
    for b in uncut::<oftl::Greedy, 2048>("x-greedy", 120_000, 1..41, 4)
        .into_iter()
        .chain(uncut::<oftl::Greedy, 512>("x-m512", 120_000, 1..41, 4))
    {
        if b.contains("Exhausted") {
            bad.push(b);
        }
    }
    assert!(bad.is_empty(), "{} of 80: {:#?}", bad.len(), bad);
}

/// FINDING (same as above, in the power-cut sweeps): the `Exhausted` runs of
/// `noisy_gc_heavy_*` (8 % erase, 2.5 % program failures), each with the power still on
/// (the workload before the cut): Greedy 2 of 3,000 cases, ParaGc 6 of 3,000, 512-byte
/// metadata 2 of 3,000. The Greedy one is a foreground collection inside a whole-object
/// `write` (`make_room` -> `collect_for`): room 16 (one block), block 21 erased ahead,
/// two program failures in it push the copies into 23 (not erased ahead), whose erase
/// fails, then 24's: the write fails `Exhausted` and poisons the handle.
#[test]
fn gc_exhausted_replay_tokens() {
    let cases: [(&str, u16, usize, usize, u64, &str); 4] = [
        ("greedy", 5, 6, 24, 32, "gc-greedy-w5-s32@ns1:seed=a2f1b2cbf0d65be1:cut=792.clean:pfail=25000:efail=80000:unstable"),
        ("para", 5, 6, 24, 42, "gc-para-w5-s42@ns1:seed=98ea96a4a4a8ad0d:cut=1003.clean:pfail=25000:efail=80000:unstable"),
        ("para", 4, 4, 30, 45, "gc-para-w4-s45@ns1:seed=f8489ba51b5fb3d0:cut=987.clean:pfail=25000:efail=80000:unstable"),
        ("m512", 4, 6, 24, 51, "gc-m512-w4-s51@ns1:seed=7408cdf8c8ccc49e:cut=787.clean:pfail=25000:efail=80000:unstable"),
    ];
    let mut bad = Vec::new();
    for (tag, w, objs, pages, seed, token) in cases {
        let name = token.split('@').next().unwrap();
        let r = match tag {
            "para" => {
                powerloss::replay(&mixed::<Para, 2048>(name, w, objs, pages, 120, seed), token)
            }
            "m512" => powerloss::replay(
                &mixed::<oftl::Greedy, 512>(name, w, objs, pages, 120, seed),
                token,
            ),
            _ => powerloss::replay(
                &mixed::<oftl::Greedy, 2048>(name, w, objs, pages, 120, seed),
                token,
            ),
        };
        if let Err(e) = r {
            bad.push(format!("{token}: {e}"));
        }
    }
    assert!(bad.is_empty(), "{} of 4: {bad:#?}", bad.len());
}

/// Probe (held): the same uncut runs at windows 6 and 9 (Greedy, ParaGc, 512-byte
/// metadata; 240 runs) and window 4 with ParaGc (40 runs): no `Exhausted`, no misuse,
/// every acknowledged byte after remount, no `NoSpace` under 50 % of capacity. (Window 4
/// also shows seed 32 refusing a 24-page rewrite with `NoSpace` at 171 of 288 pages, 59 %
/// of a capacity shrunk by retired blocks, as at 71f7486: not counted.)
#[test]
fn uncut_high_erase_failures() {
    let mut bad = Vec::new();
    for w in [6u16, 9] {
        bad.extend(uncut::<oftl::Greedy, 2048>("u-greedy", 120_000, 1..41, w));
        bad.extend(uncut::<Para, 2048>("u-para", 120_000, 1..41, w));
        bad.extend(uncut::<oftl::Greedy, 512>("u-m512", 120_000, 1..41, w));
    }
    bad.extend(
        uncut::<Para, 2048>("u-para", 120_000, 1..41, 4)
            .into_iter()
            .filter(|b| !b.contains("seed 32:")),
    );
    for b in &bad {
        println!("BAD {b}");
    }
    assert!(
        bad.is_empty(),
        "{} bad of 280: {:#?}",
        bad.len(),
        &bad[..bad.len().min(10)]
    );
}

/// Probe (held): erases of fault-free GC-heavy workloads (400 operations, windows 4, 6,
/// 8 and 10, Greedy and ParaGc): 4,425 at 71f7486 and 4,425 at b1f250f, case by case the
/// same (the erase-ahead only moves erases earlier here); 4,427 with the fix of the
/// finding above, which erases a block more ahead (a checkpoint hands some back to the
/// pool, erased again when taken). Bound: 0.2 % over 71f7486.
#[test]
fn erase_counts() {
    let mut total = 0;
    for (w, seed) in [(4u16, 61u64), (6, 62), (8, 63), (10, 64)] {
        let objs = if w >= 10 { 5 } else { 6 };
        let s = mixed::<oftl::Greedy, 2048>("erase", w, objs, 24, 400, seed);
        let mut nand = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
        let mut o = s.setup(&mut nand).unwrap();
        let e0 = nand.counters().erases;
        s.run(&mut nand, &mut o).unwrap();
        let e = nand.counters().erases - e0;
        let s2 = mixed::<Para, 2048>("erase", w, objs, 24, 400, seed);
        let mut nand2 = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
        let mut o2 = s2.setup(&mut nand2).unwrap();
        let f0 = nand2.counters().erases;
        s2.run(&mut nand2, &mut o2).unwrap();
        let f = nand2.counters().erases - f0;
        println!("ERASES w{w} seed {seed}: greedy {e} para {f}");
        total += e + f;
    }
    println!("ERASES total {total}");
    assert!(
        total * 1000 <= 4425 * 1002,
        "{total} erases, 4,425 at 71f7486"
    );
}

/// A store filled to `fill` with 4-page objects, then `n` random one-page rewrites,
/// each flushed (foreground collection near full); returns (erases, refused, errors).
fn full_rewrites<P: SpacePolicy + Default, const M: usize>(
    w: u16,
    fill: f64,
    n: u32,
    seed: u64,
    fcfg: FaultConfig,
) -> (u64, u32, Vec<String>) {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
    let mut model = {
        let mut fs = St::<P, M>::formatted(&mut sim, wcfg(w)).unwrap();
        let m = common::fill::fill_to(&mut fs, fill, 4);
        fs.unmount().unwrap();
        m
    };
    let e0 = sim.counters().erases;
    sim.arm(FaultPlan {
        seed,
        cut: None,
        faults: fcfg,
    });
    let mut refused = 0;
    let mut errs = Vec::new();
    {
        let mut fs = St::<P, M>::mounted(&mut sim).unwrap();
        let ids: Vec<u32> = model.keys().copied().collect();
        let mut r = Rng(seed | 1);
        for k in 0..n {
            let o = ids[r.below(ids.len() as u64) as usize];
            let pg = r.below(4) as usize;
            let d = common::fill::pat(7000 + k, 2048);
            match fs
                .write(o, (pg * 2048) as u64, &d)
                .and_then(|()| fs.flush(o))
            {
                Ok(()) => {
                    model.get_mut(&o).unwrap()[pg * 2048..(pg + 1) * 2048].copy_from_slice(&d)
                }
                Err(WriteError::NoSpace) => {
                    fs.discard(o);
                    refused += 1;
                }
                Err(e) => {
                    if matches!(
                        fs.health(),
                        Health::ReadOnly(
                            ReadOnlyReason::CheckpointBlocks | ReadOnlyReason::GoodBlocks
                        )
                    ) {
                        break;
                    }
                    errs.push(format!(
                        "rewrite {k}: {e:?} health {:?} used {} of {}",
                        fs.health(),
                        fs.used_pages(),
                        fs.capacity_pages()
                    ));
                    break;
                }
            }
        }
        if errs.is_empty() {
            if let Err(e) = fs.unmount() {
                errs.push(format!("unmount {e:?}"));
            }
        }
    }
    let e = sim.counters().erases - e0;
    sim.disarm();
    if errs.is_empty() {
        let mut fs = St::<P, M>::mounted(&mut sim).unwrap();
        for (&o, d) in &model {
            let mut b = vec![0u8; d.len()];
            if fs.read(o, 0, &mut b).is_err() || b != *d {
                errs.push(format!("object {o} lost"));
                break;
            }
        }
    }
    if let Some(m) = sim.last_misuse() {
        errs.push(format!("misuse {m:?}"));
    }
    (e, refused, errs)
}

/// Probe (held, low note): erases near full (stores filled to 85-92 % with 4-page
/// objects, 600 flushed one-page rewrites: foreground collection, `gc_collect_one` with
/// budget `u32::MAX`, erasing ahead the whole copy room): 4,834 at 71f7486, 4,848 at
/// b1f250f (+1, +1, +1, +4 per case: +0.3 %, erased-ahead blocks a checkpoint hands back
/// to the pool and erased again when taken); 4,856 with the fix of the finding (+0.45 %).
/// Refusals unchanged (43 at window 4, 0 elsewhere). Bound: 1 % over 71f7486.
#[test]
fn erase_counts_near_full() {
    let mut tot = 0;
    for (w, fill) in [(4u16, 0.85), (6, 0.85), (6, 0.92), (9, 0.9)] {
        let (e, r, errs) =
            full_rewrites::<oftl::Greedy, 2048>(w, fill, 600, 5, FaultConfig::default());
        let (e2, r2, errs2) = full_rewrites::<Para, 2048>(w, fill, 600, 5, FaultConfig::default());
        println!("NEARFULL w{w} fill {fill}: greedy {e} erases {r} refused {errs:?}; para {e2} erases {r2} refused {errs2:?}");
        tot += e + e2;
    }
    println!("NEARFULL total {tot}");
    assert!(tot * 100 <= 4834 * 101, "{tot} erases, 4,834 at 71f7486");
}

/// Probe (held): the near-full rewrites under 6 % erase and 2 % program failures,
/// windows 4, 6, 9, fills 80-85 %, whole-page and 512-byte metadata, seeds 1..=30 (180
/// runs): no error other than `NoSpace` or a documented read-only stop, every object
/// exact after unmount and remount, no misuse.
#[test]
fn near_full_high_erase_failures() {
    let mut bad = Vec::new();
    let mut refused = 0;
    let mut cases = 0;
    for seed in 1..=30u64 {
        for (w, fill) in [(4u16, 0.8), (6, 0.85), (9, 0.85)] {
            cases += 2;
            let f = faults(60_000, 20_000);
            let (_, r, errs) = full_rewrites::<oftl::Greedy, 2048>(w, fill, 300, seed, f);
            refused += r;
            if !errs.is_empty() {
                bad.push(format!("greedy seed {seed} w{w} fill {fill}: {errs:?}"));
            }
            let (_, r, errs) = full_rewrites::<oftl::Greedy, 512>(w, fill, 300, seed, f);
            refused += r;
            if !errs.is_empty() {
                bad.push(format!("m512 seed {seed} w{w} fill {fill}: {errs:?}"));
            }
        }
    }
    println!("{} bad of {cases}, {refused} refused", bad.len());
    assert!(
        bad.is_empty(),
        "{} bad of {cases}: {:#?}",
        bad.len(),
        &bad[..bad.len().min(10)]
    );
}

// ---- Part 3: sessions that loaded an older checkpoint (salvage past unreadable ones) ----

use common::read_only::{mirror, read_all_ok, two_checkpoints, OBJECTS};
use oftl::format::backpointer::PageKind;
use oftl::{Damaged, Greedy, ObjKind};

fn max_ckpt_seq(sim: &Sim) -> u32 {
    common::pages::all_pages(sim)
        .into_iter()
        .filter(|p| p.kind == PageKind::Checkpoint)
        .map(|p| p.seq)
        .max()
        .unwrap()
}

/// `salvages` salvage mounts (each reading every object) on a copy of `base` whose
/// checkpoint pages numbered above `keep_seq` do not read, with `plan` armed; what they
/// changed is mirrored into `base`, which is then mounted normally (the newest
/// checkpoint reads again) and must read `want`, unmount, mount and read it again.
fn salvage_then_newest<P: SpacePolicy + Clone>(
    base: &Sim,
    keep_seq: u32,
    want: &[(u32, Vec<u8>)],
    plan: FaultPlan,
    salvages: usize,
    policy: P,
) -> Result<(u64, usize), String> {
    let mut copy = base.clone();
    let killed: Vec<u32> = common::pages::all_pages(&copy)
        .into_iter()
        .filter(|p| p.kind == PageKind::Checkpoint && p.seq > keep_seq)
        .map(|p| p.page)
        .collect();
    for &p in &killed {
        common::pages::kill(&mut copy, p);
    }
    let before = copy.clone();
    let e0 = copy.counters().erases;
    copy.arm(plan);
    for _ in 0..salvages {
        let mut fs: FsWith<'_, P> = FsWith::new(&mut copy, cfg(), policy.clone());
        if fs.mount_damaged(Damaged::Salvage).is_ok() {
            for (o, d) in want {
                let mut buf = vec![0u8; d.len()];
                let _ = fs.read(*o, 0, &mut buf);
            }
        }
    }
    copy.disarm();
    let erases = copy.counters().erases - e0;
    if let Some(m) = copy.last_misuse() {
        return Err(format!("salvage misuse {m:?}"));
    }
    let written = common::pages::changed_pages(&before, &copy);
    let mut sim = base.clone();
    mirror(&before, &copy, &mut sim, &written);
    let r = (|| {
        {
            let mut fs: FsWith<'_, P> = FsWith::new(&mut sim, cfg(), policy.clone());
            fs.mount().map_err(|e| format!("mount: {e:?}"))?;
            read_all_ok(&mut fs, want)?;
            fs.unmount().map_err(|e| format!("unmount: {e:?}"))?;
        }
        let mut fs: FsWith<'_, P> = FsWith::new(&mut sim, cfg(), policy.clone());
        fs.mount().map_err(|e| format!("mount again: {e:?}"))?;
        read_all_ok(&mut fs, want)
    })();
    match (r, sim.last_misuse()) {
        (Ok(()), None) => Ok((erases, killed.len())),
        (r, m) => Err(format!(
            "{} checkpoint pages unreadable, salvage wrote {} pages ({erases} erases): {r:?}, misuse {m:?}",
            killed.len(),
            written.len()
        )),
    }
}

/// `Ca` (24 objects of 8 pages, unmounted), then a session rewriting `rewrites` whole
/// objects (more than the window holds: checkpoints in the session) and unmounting.
/// Returns `Ca`'s number and the final contents.
fn many_checkpoints(sim: &mut Sim, rewrites: u32) -> (u32, Vec<(u32, Vec<u8>)>) {
    let mut want = Vec::new();
    {
        let mut fs = Fs::formatted(&mut *sim, cfg()).unwrap();
        for i in 0..OBJECTS {
            let o = fs.create(ObjKind::Object).unwrap();
            fs.write(o, 0, &bytes(i, 8 * 2048)).unwrap();
            want.push((o, bytes(i, 8 * 2048)));
        }
        fs.unmount().unwrap();
    }
    let ca = max_ckpt_seq(sim);
    let mut fs = Fs::new(&mut *sim, cfg(), Greedy::DEFAULT);
    fs.mount().unwrap();
    for k in 0..rewrites {
        let i = (k as usize * 5) % want.len();
        let d = bytes(5000 + k, 8 * 2048);
        fs.write(want[i].0, 0, &d).unwrap();
        fs.flush(want[i].0).unwrap();
        want[i].1 = d;
    }
    fs.unmount().unwrap();
    (ca, want)
}

/// Probe (held, 16 cases): the salvage of `review_s38b.rs` (the newest checkpoint `C` unreadable through
/// the salvage; it loads `Ca`), with `C`'s index flush spread over more than one block
/// (a page of every object or every second object rewritten: one full index block the
/// salvage spares and one it continues), 1 and 4 salvage mounts in a row, Greedy and
/// ParaGc; then the newest checkpoint reads again: a normal mount must read everything.
#[test]
fn salvage_spares_full_index_blocks_over_repeated_mounts() {
    let mut bad = Vec::new();
    let mut n = 0;
    for step in [1usize, 2, 3, 4] {
        let mut base = Sim::heap(profile::TINY, FaultPlan::seeded(3));
        let want = two_checkpoints(&mut base, step);
        // Ca: the checkpoint before the newest.
        let newest = max_ckpt_seq(&base);
        for salvages in [1usize, 4] {
            n += 2;
            if let Err(e) = salvage_then_newest(
                &base,
                newest - 1,
                &want,
                FaultPlan::seeded(5),
                salvages,
                Greedy::DEFAULT,
            ) {
                bad.push(format!("greedy step {step} x{salvages}: {e}"));
            }
            if let Err(e) = salvage_then_newest(
                &base,
                newest - 1,
                &want,
                FaultPlan::seeded(5),
                salvages,
                Para::DEFAULT,
            ) {
                bad.push(format!("para step {step} x{salvages}: {e}"));
            }
        }
    }
    println!("{} bad of {n}", bad.len());
    assert!(bad.is_empty(), "{} of {n}: {bad:#?}", bad.len());
}

/// Probe (held, 16 cases): several checkpoints after `Ca` (a session that rewrote more than its window),
/// all unreadable through the salvage (it loads `Ca`); free blocks in `Ca` hold the
/// newest checkpoint's data, copies and index pages; 1 and 3 salvage mounts, then a normal
/// mount with every checkpoint reading again reads every object, unmounts, mounts and
/// reads them again, no misuse. (Also with only the newest unreadable.)
#[test]
fn salvage_past_several_unreadable_checkpoints() {
    let mut bad = Vec::new();
    let mut n = 0;
    for rewrites in [8u32, 14, 20, 30] {
        let mut base = Sim::heap(profile::TINY, FaultPlan::seeded(3));
        let (ca, want) = many_checkpoints(&mut base, rewrites);
        let newest = max_ckpt_seq(&base);
        // Every checkpoint after Ca unreadable, or only the newest.
        for keep in [ca, newest - 1] {
            for salvages in [1usize, 3] {
                n += 1;
                match salvage_then_newest(&base, keep, &want, FaultPlan::seeded(5), salvages, Greedy::DEFAULT) {
                    Ok((e, k)) => println!("rewrites {rewrites} keep {keep} (ca {ca}, newest {newest}) x{salvages}: ok, {k} ckpt pages killed, {e} erases"),
                    Err(e) => bad.push(format!("rewrites {rewrites} keep {keep} (ca {ca} newest {newest}) x{salvages}: {e}")),
                }
            }
        }
    }
    for b in &bad {
        println!("BAD {b}");
    }
    assert!(bad.is_empty(), "{} of {n}: {bad:#?}", bad.len());
}
