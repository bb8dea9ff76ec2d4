//! An independent review of commit 3997f8c (recovery: more than eight unreadable pages
//! in a row anywhere in the walk, followed later by a replayed page, are `MediaLoss`,
//! unless the run's block holds a readable cold copy), together with the older per-block
//! tail rule (b) and the writer's bound (a head leaves a block after eight failed
//! programs in a row).
//!
//! Probes (legitimate crash states only: reported program failures, reported erase
//! failures, one power cut of every kind at every operation, unstable pages after the cut,
//! a second cut during the recovery; no read error, no silent failure, no damage). Every
//! mount must succeed and show an acknowledged state. All held (counts at ef92dfe):
//!
//! - P1 `probe_bursts_then_cut_cheap` (debug, < 1 s): bursts of 0/8/9/12 failed programs
//!   of any head, cut at every 3rd operation: 564 states, all right.
//! - P2 `probe_bursts_erase_failures_recovery_cuts` (release, `S32C_SEEDS=3`, ~60 s):
//!   bursts of 0/5/8/9/16 failed programs (garbage-shaped and the simulator's four
//!   shapes), failed window-block erases, cut at every operation (5 kinds, unstable),
//!   16- and 64-page blocks: 26,508 states right; second cut at 7 points of the recovery
//!   of every 4th: 45,906 right. None refused.
//! - P3 `probe_random_failures_every_cut` (release, `S32C_SEEDS=3`): the simulator's own
//!   program failures at 20% and 50% and erase failures at 10%, Greedy and paragc, TINY,
//!   raw (no ECC, partial log programs) and 64-page parts: 14,796 states right, 20,496
//!   recovery-cut states right. None refused.
//!
//! All three findings are fixed: runs in the cold head's carried block count as runs in
//! blocks of cold copies, a run there is dropped when its block ends (so a later one
//! can be the suspect), and a cold copy made since the checkpoint in a later walk entry
//! proves a run before it is media loss, as a replayed page does.
//!
//! So no legitimate crash state was found that the new rule refuses: the walk order is
//! the order heads take blocks, the writer's bound held, and torn erases were always
//! last. The findings are about damaged media, where the rule is both too strict (1) and
//! incomplete (2, 3):
//!
//! - Finding 1 (`finding_cold_carried_block_copies_unreadable_refused`, regression of
//!   3997f8c): GC copies unreadable (nothing acknowledged damaged) refuse the mount.
//! - Finding 2 (`finding_cold_run_hides_lost_data_block`): a run in a cold block, being
//!   the first and sticky suspect, hides a later lost data block: silent rollback.
//! - Finding 3 (`finding_lost_data_block_then_cold_copies_silent`): cold copies after a
//!   lost data block are not counted as a later replayed page: silent rollback.

use crate::common;
use common::lifecycle::Lifecycle;

use std::cell::RefCell;
use std::rc::Rc;

use common::hooked::{arm_cut, program_failed, Hooked, Hooks, SimErr};
use common::outcome::{mount_check, Outcome, Tally};
use common::pages::kill;
use common::*;
use nand_hal::sim::{profile, CutKind, FaultConfig, FaultPlan, Profile, TornMode};
use nand_hal::Geometry;
use nand_hal::{BlockAddr, NandFlash, PageAddr};
use oftl::{Greedy, ObjKind, Oftl, TxOp, WriteError};

// ---------------------------------------------------------------------------------------
// A flash wrapper: bursts of failed programs, failed erases, one cut.

#[derive(Default)]
struct Ctl {
    /// Program/erase operations counted since the workload started.
    ops: u64,
    /// Programs from `burst_at` on fail, `burst_len` of them (in a row, any head).
    burst_at: u64,
    burst_len: u32,
    /// Garbage-shaped failures (true) or the simulator's own shapes.
    garbage: bool,
    /// Erases numbered here fail.
    efail: Vec<u64>,
    /// Cut at this operation.
    cut: Option<(u64, CutKind)>,
    cut_fired: bool,
    programs: u64,
}

impl Ctl {
    fn tick(&mut self, sim: &mut Sim) {
        self.ops += 1;
        if let Some((at, kind)) = self.cut {
            if self.ops == at {
                arm_cut(sim, kind);
                self.cut_fired = true;
                self.cut = None;
            }
        }
    }
}

impl Hooks for Ctl {
    fn program(
        &mut self,
        sim: &mut Sim,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), SimErr> {
        self.tick(sim);
        self.programs += 1;
        if self.cut_fired {
            return sim.program(page, column, data, oob);
        }
        if self.burst_len > 0 && self.programs >= self.burst_at {
            self.burst_len -= 1;
            if self.garbage {
                sim.program(page, column, data, oob)?;
                kill(sim, page.0);
                return Err(program_failed());
            }
            sim.fail_next_program(sim.geometry().block_of(page));
            return sim.program(page, column, data, oob);
        }
        sim.program(page, column, data, oob)
    }
    fn erase(&mut self, sim: &mut Sim, block: BlockAddr) -> Result<(), SimErr> {
        self.tick(sim);
        if !self.cut_fired && self.efail.contains(&self.ops) {
            sim.fail_next_erase(block);
        }
        sim.erase(block)
    }
}

type Shared = Rc<RefCell<Ctl>>;

/// TINY with 64-page blocks.
fn wide() -> Profile {
    let mut p = profile::TINY;
    p.name = "tiny-64ppb";
    p.geometry = Geometry::new(2048, 64, 64, 64, 1, 1, 1);
    p
}

fn tx_write<F: NandFlash, P: oftl::SpacePolicy>(
    fs: &mut Oftl<F, 2048, 64, 4, 2, P, 2048>,
    id: u32,
    off: u64,
    data: &[u8],
) -> Result<(), WriteError<F::Error>> {
    fs.transact(&[TxOp::Write {
        obj: id,
        offset: off,
        data,
    }])
}

/// One run: a store with a checkpoint, then a seeded mix of transactions, log appends,
/// GC steps and syncs through `ctl`. Returns the crashed sim and the allowed states.
#[derive(Clone, Copy, Debug)]
struct Run {
    prof: Profile,
    seed: u64,
    burst_at: u64,
    burst_len: u32,
    garbage: bool,
    efail: [u64; 2],
    cut: Option<(u64, CutKind)>,
    unstable: bool,
    ops: u32,
    /// The simulator's own random program and erase failures (ppm), from the checkpoint.
    pfail: u32,
    efail_ppm: u32,
    para: bool,
}

fn run(r: Run) -> (Sim, Vec<Model>, u64) {
    if r.para {
        run_with::<Para>(r)
    } else {
        run_with::<Greedy>(r)
    }
}

fn run_with<P: oftl::SpacePolicy + Default>(r: Run) -> (Sim, Vec<Model>, u64) {
    let mut sim = Sim::heap(r.prof, FaultPlan::seeded(r.seed));
    let ctl: Shared = Rc::default();
    let mut states: Vec<Model> = Vec::new();
    {
        let mut fs = Oftl::<Hooked<'_, Shared>, 2048, 64, 4, 2, P, 2048>::formatted(
            Hooked::new(&mut sim, ctl.clone()),
            cfg(),
        )
        .unwrap();
        let mut ids = Vec::new();
        for i in 0..6u32 {
            let id = fs.create(ObjKind::Object).unwrap();
            tx_write(&mut fs, id, 0, &bytes(i, 5000)).unwrap();
            ids.push(id);
        }
        let log = fs.create(ObjKind::Log).unwrap();
        for k in 0..3u32 {
            fs.log_append(log, &bytes(40 + k, 300)).unwrap();
        }
        // Garbage and some GC before the checkpoint (a carried cold block).
        for t in 0..10u32 {
            tx_write(&mut fs, ids[(t % 2) as usize], 0, &bytes(700 + t, 5000)).unwrap();
        }
        fs.gc_step(6).unwrap();
        fs.sync().unwrap();
        if r.unstable || r.pfail > 0 || r.efail_ppm > 0 {
            let mut p = *fs.flash().sim.plan();
            p.faults = FaultConfig {
                unstable_after_cut: r.unstable,
                program_fail_ppm: r.pfail,
                erase_fail_ppm: r.efail_ppm,
                ..FaultConfig::default()
            };
            fs.flash_mut().sim.arm(p);
        }
        states.push(observe(&mut fs).unwrap());
        {
            let mut c = ctl.borrow_mut();
            c.ops = 0;
            c.programs = 0;
            c.burst_at = r.burst_at;
            c.burst_len = r.burst_len;
            c.garbage = r.garbage;
            c.efail = r.efail.to_vec();
            c.cut = r.cut;
        }
        let mut x = r.seed as u32 * 7919 + 13;
        for op in 0..r.ops {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let mut next = states.last().unwrap().clone();
            let res = match (x >> 16) % 10 {
                0..=4 => {
                    let id = ids[(x >> 8) as usize % ids.len()];
                    let off = ((x >> 4) % 3) as u64 * 2048;
                    let d = bytes(op + 1000, 1000 + (x as usize % 5000));
                    next.write(id, off, &d);
                    tx_write(&mut fs, id, off, &d)
                }
                5..=7 => {
                    let d = bytes(op + 77, 200 + (x as usize % 900));
                    next.logs.get_mut(&log).unwrap().push(d.clone());
                    fs.log_append(log, &d).map(|_| ())
                }
                8 => fs.gc_step(12).map(|_| ()),
                _ => {
                    if op % 7 == 3 {
                        fs.sync()
                    } else {
                        fs.gc_step(4).map(|_| ())
                    }
                }
            };
            match res {
                Ok(()) => {
                    // The in-flight state is allowed only if it landed.
                    states.push(next);
                }
                Err(e) => {
                    if !ctl.borrow().cut_fired && std::env::var("S32C_DEBUG").is_ok() {
                        eprintln!("  workload op {op} failed without a cut: {e:?}");
                    }
                    states.push(next);
                    break;
                }
            }
            if ctl.borrow().cut_fired {
                break;
            }
        }
    }
    let ops = ctl.borrow().ops;
    sim.disarm();
    sim.power_on();
    // Only the last two states are allowed (the one before the op in flight, and after).
    let n = states.len();
    let keep = states[n.saturating_sub(2)..].to_vec();
    (sim, keep, ops)
}

const KINDS: [CutKind; 5] = [
    CutKind::Clean,
    CutKind::Torn(TornMode::Prefix),
    CutKind::Torn(TornMode::Random),
    CutKind::Torn(TornMode::SomeBits),
    CutKind::Torn(TornMode::MostBits),
];

/// The sweep: for each seed and burst, find the op count, then cut at every operation
/// (one torn kind each, rotating), mount; every `rc_every`-th state also gets a second
/// cut during its recovery at a few operations, then a plain mount.
#[allow(clippy::too_many_arguments)]
fn sweep(
    tweak: impl Fn(Run) -> Run,
    profs: &[Profile],
    seeds: std::ops::Range<u64>,
    bursts: &[u32],
    efails: &[[u64; 2]],
    ops: u32,
    step: u64,
    rc_every: u64,
) -> (Tally, Tally) {
    let mut t = Tally::default();
    let mut rt = Tally::default();
    for &prof in profs {
        for seed in seeds.clone() {
            for &blen in bursts {
                for &ef in efails {
                    for garbage in [true, false] {
                        let base = Run {
                            prof,
                            seed,
                            burst_at: 3 + seed % 17,
                            burst_len: blen,
                            garbage,
                            efail: ef,
                            cut: None,
                            unstable: true,
                            ops,
                            pfail: 0,
                            efail_ppm: 0,
                            para: false,
                        };
                        let base = tweak(base);
                        let (bs, bst, total) = run(base);
                        if std::env::var("S32C_DEBUG").is_ok() {
                            eprintln!(
                                "base {}ppb seed {seed} burst {blen} pfail {}: {total} ops, {} states, {} program failures, {} erase failures, {} bad blocks",
                                prof.geometry.pages_per_block(),
                                base.pfail,
                                bst.len(),
                                bs.counters().program_failures,
                                bs.counters().erase_failures,
                                (0..bs.geometry().blocks()).filter(|&b| bs.clone().is_bad(BlockAddr(b)).unwrap_or(false)).count(),
                            );
                        }
                        let mut k = 1;
                        while k <= total {
                            let kind = KINDS[((k + seed) % 5) as usize];
                            let r = Run {
                                cut: Some((k, kind)),
                                ..base
                            };
                            let (mut sim, states, _) = run(r);
                            let allowed: Vec<&Model> = states.iter().collect();
                            let tag = format!(
                                "{}ppb seed {seed} burst {blen}@{} garbage {garbage} efail {ef:?} cut {k} {kind:?}",
                                prof.geometry.pages_per_block(),
                                base.burst_at
                            );
                            if rc_every > 0 && k % rc_every == 0 {
                                for rc in [1u64, 2, 3, 5, 8, 13, 21] {
                                    let mut c = sim.clone();
                                    let mut p = *c.plan();
                                    p.cut = Some(nand_hal::sim::PowerCut {
                                        at_op: rc,
                                        kind: KINDS[((rc + k) % 5) as usize],
                                    });
                                    p.faults.unstable_after_cut = true;
                                    c.arm(p);
                                    let first = Fs::mounted(&mut c).map(|_| ());
                                    c.disarm();
                                    c.power_on();
                                    let o = mount_check(&mut c, &allowed);
                                    let rtag = format!("{tag} rcut {rc} first {first:?}");
                                    rt.add(&rtag, &o);
                                }
                            }
                            let o = mount_check(&mut sim, &allowed);
                            t.add(&tag, &o);
                            k += step;
                        }
                    }
                }
            }
        }
    }
    (t, rt)
}

fn report(name: &str, t: &Tally) {
    eprintln!(
        "{name}: {} right, {} refused, {} errors, {} wrong\n  refused: {:?}\n  error: {:?}\n  wrong: {:?}",
        t.right, t.refused, t.error, t.wrong, t.first_refused, t.first_error, t.first_wrong
    );
}

/// Probe P1 (cheap): bursts of 0, 8, 9 and 12 failed programs (of any head) then a cut
/// at every 3rd operation, 16-page blocks, two seeds.
#[test]
fn probe_bursts_then_cut_cheap() {
    let (t, rt) = sweep(
        |r| r,
        &[profile::TINY],
        1..3,
        &[0, 8, 9, 12],
        &[[0, 0]],
        24,
        3,
        0,
    );
    report("P1", &t);
    report("P1 recovery cuts", &rt);
    assert_eq!(t.wrong, 0, "{:?}", t.first_wrong);
    assert_eq!(t.refused, 0, "{:?}", t.first_refused);
}

/// Probe P2 (release; `--ignored`): bursts, failed erases, every cut, recovery cuts, both
/// block sizes.
#[test]
#[ignore = "long: run with --release"]
fn probe_bursts_erase_failures_recovery_cuts() {
    let seeds = std::env::var("S32C_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6u64);
    let (t, rt) = sweep(
        |r| r,
        &[profile::TINY, wide()],
        1..1 + seeds,
        &[0, 5, 8, 9, 16],
        &[[0, 0], [2, 5], [1, 3]],
        40,
        1,
        4,
    );
    report("P2", &t);
    report("P2 recovery cuts", &rt);
    assert_eq!(
        t.wrong + rt.wrong,
        0,
        "{:?} {:?}",
        t.first_wrong,
        rt.first_wrong
    );
    assert_eq!(
        t.refused + rt.refused,
        0,
        "{:?} {:?}",
        t.first_refused,
        rt.first_refused
    );
}

// ---------------------------------------------------------------------------------------
// Cold copies and the new rule.

use common::pages::{all_pages, fresh_newest_data_block, Pg};
use oftl::format::backpointer::PageKind;

/// A store whose cold head carries a partly written block into the checkpoint (GC before
/// it), and a log stream with no appends yet (so the log head takes its first block from
/// the window after the checkpoint). After the checkpoint: GC steps until the cold head
/// has copied `copies` pages, then `after` acknowledged 2-page transactions, then
/// `appends` log appends. Returns the crashed image (no unmount), the acknowledged state,
/// and the pages programmed before the checkpoint's end.
fn cold_store(copies: usize, after: u32, appends: u32) -> (Sim, Model, Vec<u32>) {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(21));
    let old: Vec<u32>;
    let want = {
        let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
        let mut ids = Vec::new();
        for i in 0..4u32 {
            let id = fs.create(ObjKind::Object).unwrap();
            tx_write(&mut fs, id, 0, &bytes(i, 6000)).unwrap();
            ids.push(id);
        }
        let log = fs.create(ObjKind::Log).unwrap();
        // Half-live blocks (objects written once, a hot object rewritten), then GC.
        for t in 0..40u32 {
            if t % 2 == 0 {
                let id = fs.create(ObjKind::Object).unwrap();
                tx_write(&mut fs, id, 0, &bytes(6000 + t, 4000)).unwrap();
            } else {
                tx_write(
                    &mut fs,
                    ids[(t / 2 % 2) as usize],
                    0,
                    &bytes(5000 + t, 6000),
                )
                .unwrap();
            }
        }
        fs.sync().unwrap();
        fs.gc_step(3).unwrap();
        fs.sync().unwrap();
        old = all_pages(fs.flash()).iter().map(|p| p.page).collect();
        let cold_now = |s: &Sim| {
            all_pages(s)
                .iter()
                .filter(|p| p.relocated && !old.contains(&p.page))
                .count()
        };
        let mut guard = 0;
        while cold_now(fs.flash()) < copies && guard < 40 {
            fs.gc_step(4).unwrap();
            guard += 1;
        }
        for t in 0..after {
            tx_write(&mut fs, ids[t as usize % 4], 0, &bytes(1000 + t, 4000)).unwrap();
        }
        for a in 0..appends {
            fs.log_append(log, &bytes(5000 + a, 100)).unwrap();
        }
        observe(&mut fs).unwrap()
    };
    (sim, want, old)
}

/// The cold copies programmed after the checkpoint, by block, in page order.
fn new_copies(sim: &Sim, old: &[u32]) -> Vec<(u32, Vec<u32>)> {
    let ppb = sim.geometry().pages_per_block();
    let mut by: Vec<(u32, Vec<u32>)> = Vec::new();
    for p in all_pages(sim) {
        if !p.relocated || old.contains(&p.page) {
            continue;
        }
        let b = p.page / ppb;
        match by.iter_mut().find(|(x, _)| *x == b) {
            Some((_, v)) => v.push(p.page),
            None => by.push((b, vec![p.page])),
        }
    }
    by
}

/// **Finding 1 (false refusal, new with 3997f8c).** The cold head continues in the block
/// it carried into the checkpoint and copies 9 or more pages there; those copies then
/// do not read (nothing else is damaged: every acknowledged page reads). Later in the
/// walk the log head's appends (its first block, taken from the window) are replayed.
/// The copies' originals are intact until the next checkpoint ("a lost copy is never a
/// loss", recovery.rs), so the mount must show the acknowledged state. The new rule
/// exempts a run only when its walk entry showed a *readable* cold copy; when every copy
/// the walk reads in the cold head's carried block is unreadable, the run counts as the
/// data head's lost block and the mount returns `MediaLoss`. (Before 3997f8c such a block
/// was not counted.) The cold head's carried block is known from the checkpoint's head
/// records, so the walk need not guess.
#[test]
fn finding_cold_carried_block_copies_unreadable_refused() {
    let (sim, want, old) = cold_store(10, 2, 3);
    let ppb = sim.geometry().pages_per_block();
    let blocks = new_copies(&sim, &old);
    // The carried cold block: one holding copies from before the checkpoint too.
    let carried = blocks
        .iter()
        .find(|(b, _)| {
            all_pages(&sim)
                .iter()
                .any(|p| p.relocated && p.page / ppb == *b && old.contains(&p.page))
        })
        .cloned();
    let Some((b, pages)) = carried else {
        panic!("no carried cold block: {blocks:?}");
    };
    assert!(pages.len() >= 9, "block {b}: {} new copies", pages.len());
    let mut s = sim.clone();
    for &p in &pages {
        kill(&mut s, p);
    }
    let o = mount_check(&mut s, &[&want]);
    assert_eq!(
        o,
        Outcome::Right,
        "{} new copies in carried cold block {b} unreadable",
        pages.len()
    );
}

/// Probe (holds): the same with the copies readable mounts right (the baseline of
/// finding 1).
#[test]
fn probe_cold_store_baseline() {
    let (mut sim, want, _) = cold_store(10, 2, 3);
    assert_eq!(mount_check(&mut sim, &[&want]), Outcome::Right);
}

/// **Finding 2 (silent rollback).** `TailRun::suspect` keeps only the *first* run longer
/// than 8 of the walk; `accepted` drops it when that run's block held a readable cold
/// copy, but never looks for a later run. So a run in a block of cold copies (here: 9
/// copies in the cold head's carried block unreadable, its last copy readable) hides the
/// case 3997f8c was made for: the data head's newest block, started after the
/// checkpoint, lost whole (review_s32b O2), with the log head's appends replayed after it
/// in the walk. The mount shows the state before the lost transactions, without an
/// error. Expected: `MediaLoss` (as without the cold run).
#[test]
fn finding_cold_run_hides_lost_data_block() {
    let ppb = profile::TINY.geometry.pages_per_block();
    let mut cases = 0;
    let mut bad = Vec::new();
    for after in 4..20u32 {
        let (sim, want, old) = cold_store(11, after, 3);
        let blocks = new_copies(&sim, &old);
        // A cold block with at least 10 new copies: kill all but the last.
        let Some((cb, cpages)) = blocks.iter().find(|(_, v)| v.len() >= 10).cloned() else {
            continue;
        };
        // The data head's newest block, started after the checkpoint.
        let Some((b, _, in_b)) = fresh_newest_data_block(&sim, &old) else {
            continue;
        };
        if in_b.len() < 9 || in_b.len() >= ppb as usize {
            continue;
        }
        // Without the cold run: refused (the 3997f8c rule).
        let mut s0 = sim.clone();
        for &p in &in_b {
            kill(&mut s0, p);
        }
        let o0 = mount_check(&mut s0, &[&want]);
        if !matches!(o0, Outcome::Refused(_)) {
            continue;
        }
        cases += 1;
        let mut s = s0.clone();
        for &p in &cpages[..cpages.len() - 1] {
            kill(&mut s, p);
        }
        let o = mount_check(&mut s, &[&want]);
        if !matches!(o, Outcome::Refused(_)) {
            let o = match o {
                Outcome::Wrong(_) => {
                    "mounted an older state (acknowledged transactions gone)".to_string()
                }
                o => format!("{o:?}"),
            };
            bad.push(format!(
                "after {after}: data block {b} ({} pages) and {} copies of cold block {cb} killed: {o}",
                in_b.len(),
                cpages.len() - 1
            ));
        }
    }
    assert!(cases > 0, "no case built");
    assert!(
        bad.is_empty(),
        "{} of {cases} not refused: {:#?}",
        bad.len(),
        bad
    );
}

/// Probe P3 (release; `--ignored`): the simulator's own random program failures (20% and
/// 50% of programs, four shapes) and erase failures (10%) from the checkpoint on, with a
/// cut at every operation and recovery cuts; Greedy and `paragc` policies, the raw part
/// (no ECC, in-band tags, partial log programs) too.
#[test]
#[ignore = "long: run with --release"]
fn probe_random_failures_every_cut() {
    let seeds = std::env::var("S32C_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4u64);
    let mut all = (Tally::default(), Tally::default());
    for (pf, para) in [
        (200_000u32, false),
        (500_000, false),
        (200_000, true),
        (500_000, true),
    ] {
        let (t, rt) = sweep(
            |r| Run {
                pfail: pf,
                efail_ppm: 100_000,
                para,
                burst_len: 0,
                ..r
            },
            &[profile::TINY, tiny_raw(), wide()],
            1..1 + seeds,
            &[0],
            &[[0, 0]],
            30,
            1,
            5,
        );
        report(&format!("P3 pfail {pf} para {para}"), &t);
        report(&format!("P3 pfail {pf} para {para} recovery cuts"), &rt);
        for (a, b) in [(&mut all.0, t), (&mut all.1, rt)] {
            a.right += b.right;
            a.wrong += b.wrong;
            a.refused += b.refused;
            a.error += b.error;
            if a.first_wrong.is_none() {
                a.first_wrong = b.first_wrong;
            }
            if a.first_refused.is_none() {
                a.first_refused = b.first_refused;
            }
            if a.first_error.is_none() {
                a.first_error = b.first_error;
            }
        }
    }
    report("P3 total", &all.0);
    report("P3 total recovery cuts", &all.1);
    assert_eq!(
        all.0.wrong + all.1.wrong,
        0,
        "{:?} {:?}",
        all.0.first_wrong,
        all.1.first_wrong
    );
    assert_eq!(
        all.0.refused + all.1.refused,
        0,
        "{:?} {:?}",
        all.0.first_refused,
        all.1.first_refused
    );
}

/// A store with garbage but no GC before its checkpoint (the cold head has no block),
/// then `after` acknowledged 2-page transactions, then GC steps that copy pages to the
/// cold head (which takes its first block from the window, after the data head's).
fn gc_after_store(after: u32) -> (Sim, Model, Vec<u32>) {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(31));
    let old: Vec<u32>;
    let want = {
        let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
        let mut ids = Vec::new();
        for i in 0..4u32 {
            let id = fs.create(ObjKind::Object).unwrap();
            tx_write(&mut fs, id, 0, &bytes(i, 6000)).unwrap();
            ids.push(id);
        }
        for t in 0..40u32 {
            if t % 2 == 0 {
                let id = fs.create(ObjKind::Object).unwrap();
                tx_write(&mut fs, id, 0, &bytes(6000 + t, 4000)).unwrap();
            } else {
                tx_write(
                    &mut fs,
                    ids[(t / 2 % 2) as usize],
                    0,
                    &bytes(5000 + t, 6000),
                )
                .unwrap();
            }
        }
        fs.sync().unwrap();
        old = all_pages(fs.flash()).iter().map(|p| p.page).collect();
        for t in 0..after {
            tx_write(&mut fs, ids[t as usize % 4], 0, &bytes(1000 + t, 4000)).unwrap();
        }
        for _ in 0..3 {
            fs.gc_step(4).unwrap();
        }
        observe(&mut fs).unwrap()
    };
    (sim, want, old)
}

/// **Finding 3 (silent rollback).** 3997f8c counts a run of more than 8 unreadable pages
/// only when a *data, metadata or log* page of the replay follows it. Cold copies are
/// programmed (and replayed, merged by watermark) too, and a torn erase is the cut's last
/// operation just the same: a copy after the run in the walk proves the run is neither a
/// torn erase nor an older life. Here the data head's newest block (started after the
/// checkpoint, 9 or more acknowledged pages) is lost whole, and GC copies made after those
/// transactions sit in the cold head's block, taken from the window after it. The mount
/// drops the transactions silently (and the copies, whose watermarks are past the
/// replayed prefix). Expected: `MediaLoss`, as when a log append follows.
#[test]
fn finding_lost_data_block_then_cold_copies_silent() {
    let ppb = profile::TINY.geometry.pages_per_block();
    let mut cases = 0;
    let mut bad = Vec::new();
    for after in 4..24u32 {
        let (sim, want, old) = gc_after_store(after);
        // The data head's newest block, started after the checkpoint.
        let Some((b, last, in_b)) = fresh_newest_data_block(&sim, &old) else {
            continue;
        };
        if in_b.len() < 9 || in_b.len() >= ppb as usize {
            continue;
        }
        // Copies made after the last transaction, in a block the cold head took after
        // the checkpoint (no copy there is older).
        let copies: Vec<Pg> = all_pages(&sim)
            .into_iter()
            .filter(|p| p.relocated && !old.contains(&p.page) && p.seq > last.seq)
            .collect();
        let Some(c) = copies.first() else { continue };
        let cb = c.page / ppb;
        if cb == b || old.iter().any(|&p| p / ppb == cb) {
            continue;
        }
        // No checkpoint since (GC may write one): the block must be in the window.
        if all_pages(&sim).iter().any(|p| {
            !old.contains(&p.page) && matches!(p.kind, PageKind::Checkpoint | PageKind::Marker)
        }) {
            continue;
        }
        let mut base = sim.clone();
        if mount_check(&mut base, &[&want]) != Outcome::Right {
            continue;
        }
        cases += 1;
        let mut s = sim.clone();
        for &p in &in_b {
            kill(&mut s, p);
        }
        let o = mount_check(&mut s, &[&want]);
        if !matches!(o, Outcome::Refused(_)) {
            let o = match o {
                Outcome::Wrong(_) => {
                    "mounted an older state (acknowledged transactions gone)".to_string()
                }
                o => format!("{o:?}"),
            };
            bad.push(format!(
                "after {after}: data block {b} ({} pages) killed, {} copies in block {cb} after it: {o}",
                in_b.len(),
                copies.len()
            ));
        }
    }
    assert!(cases > 0, "no case built");
    assert!(
        bad.is_empty(),
        "{} of {cases} not refused: {:#?}",
        bad.len(),
        bad
    );
}
