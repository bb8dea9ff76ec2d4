//! Independent review s45b: attacks on stop 45's checkpoint markers (the marker inside
//! the attempt loop, marked restates, the erase of `stale_kept` blocks after the first
//! marked commit, rebuild's erase of the other checkpoint blocks, `failed_here`, and the
//! mount's lost-marker check `check_lost_markers`).
//!
//! Harness: `common::ckpt_faults` (hooks on checkpoint blocks, page-version oracle).
//! Each run forks a snapshot of a simulated part (`SimNand` is `Clone`), replays one
//! "episode" (a mount and a session) with a power cut at every program/erase op and
//! every cut kind (`unstable_after_cut` on), optionally with checkpoint program
//! failures and erase failures, then heals: several sessions without faults, each
//! mount retried a few times. Classes:
//! - LOSS: an acknowledged write does not read back (or reads garbage);
//! - REFUSE: a mount fails every retry (after only cuts, that is permanent);
//! - WEDGE: a healed session ends read-only (not from a torn bad-block marker);
//! - REUSE: two different checkpoints under one number on flash at once.
//!
//! Findings (on the stop-45 snapshot; "old" = a55d653's oftl with these tests):
//! 1. `s45b_failed_erase_then_cut` (12 of 12; old 0 of 12): a checkpoint block whose
//!    erase fails (the simulator garbles it) and whose bad-block mark is not programmed
//!    (power cut right after the failed erase; likewise a `mark_bad` that fails) holds
//!    16 unreadable pages and no readable one: `check_lost_markers` takes its top two
//!    for a lost checkpoint and marker it cannot date and refuses every later mount
//!    with `MediaLoss` (nothing was lost; `Damaged::Repair` mounts and loses nothing).
//! 2. `s45b_spare_hides_behind_two_checkpoints` (12 of 124; old also 12 of 124) and
//!    `s45b_random` "mixed" seeds 170 and 2410: acknowledged writes roll back. The
//!    spare of an unmarked checkpoint is the block of the newest marker the mount saw,
//!    but the walk of a block stops after two checkpoints, so a block topped by a clean
//!    checkpoint and a failed attempt hides its markers; that block (holding the real
//!    predecessor) is erased by a later failing checkpoint call, and once the loaded
//!    page (a program that reported failure) stops reading, the mount falls back to
//!    the older block silently.
//! 3. `s45b_failed_here_three_blocks` (4 of 4; old 0 of 4): with three good checkpoint
//!    blocks, two failed attempts turn the session read-only: `release_spare` returns
//!    at once when the current block is not the durable one. Next session fine.
//!
//! Since (stop 45's final code): 1 and 3 no longer happen (a block of which nothing
//! reads is taken for older; the last resort's append is only barred in a block where
//! a checkpoint of the session landed, and `failed_here` is gone); 2 is fixed (the walk
//! of a block goes on past two checkpoints until it sees a marker): 0 of 124. Random
//! shapes with whole blocks unreadable for a mount (`B_WHOLE=1`) still lose writes, the
//! class review_s45 leaves open; without it they run with single pages unreadable.
//!
//! Side note (pre-existing, identical on old): `s45b_cut_sweep_damaged_mounts` with
//! `B_FIRST=5 B_SEEDS=1`: a cut in the first 16 ops of a `Damaged::Rebuild` leaves a
//! part whose *normal* mount succeeds and reads `Corrupted` (rebuilding again, the
//! documented remedy, recovers: `B_HEAL_REBUILD=1`).
//! No failures: cut sweeps at every op and cut kind (clean episodes, after a torn
//! checkpoint or marker, with checkpoint program and erase failures and a flaky
//! block, repair and rebuild mounts), random runs `cuts-only`, `real-pfail-cuts`,
//! `flake-cuts`; no number reuse anywhere.
//!
//! Run: `cargo test --release -p oftl --features alloc --test all review_s45b:: -- --nocapture`
//! Random seeds: `B_FIRST=170 B_SEEDS=1 B_SHAPE=mixed B_SHOWLOG=1 ... s45b_random`.
//! (env: `B_SEEDS`, `B_FIRST`, `B_STEP` (sweep every n-th op), `B_SHOW`, `B_KINDS`).

use crate::common;

use common::ckpt_faults::*;
use common::hooked::{Hooked, Hooks, SimErr};
use common::lifecycle::Lifecycle;
use common::{cfg, env, FsOn, Rng, Sim};
use nand_hal::sim::{profile, CutKind, FaultPlan, PowerCut, TornMode};
use nand_hal::{BlockAddr, NandFlash, PageAddr, ReadReport, StepReport};
use oftl::Greedy;
use oftl::{Health, ObjKind};
use std::collections::BTreeMap;

/// The checkpoint-fault hooks, and a program a clean cut stopped before it started
/// (or whose torn bits left the page reading erased) is not counted as landed.
#[derive(Clone)]
struct Wrap(Shared);

thread_local! {
    /// The next this many erases of checkpoint blocks do nothing but report success
    /// (the simulator's F11 `erase_noop`: every page then reads uncorrectable).
    static NOOP_ERASES: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// The next this many erases of checkpoint blocks fail (`EraseFailed`: the
    /// simulator leaves every page unreadable) and the power goes right after, before
    /// the store can program the bad-block mark.
    static GARBLE_CUT: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// Programs into checkpoint blocks fail the simulator's way (`fail_next_program`:
    /// garbage, all but a few bits, landed but unstable, or a prefix), in %.
    static REAL_PFAIL: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    static PFAIL_RNG: std::cell::Cell<u64> = const { std::cell::Cell::new(0x9e37) };
    /// `heal` mounts with `Damaged::Repair` when every normal mount refused.
    static REPAIR_IN_HEAL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Hooks for Wrap {
    fn program(
        &mut self,
        sim: &mut Sim,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), SimErr> {
        let before = self.0.borrow().log.len();
        let pct = REAL_PFAIL.with(|c| c.get());
        if pct > 0
            && self
                .0
                .borrow()
                .ckpt
                .contains(&sim.geometry().block_of(page).0)
        {
            let mut r = Rng(PFAIL_RNG.with(|c| c.get()) | 1);
            if r.below(100) < pct {
                sim.fail_next_program(sim.geometry().block_of(page));
            }
            PFAIL_RNG.with(|c| c.set(r.0));
        }
        let r = self.0.borrow_mut().program(sim, page, column, data, oob);
        if r.is_err() && !sim.is_powered() && sim.page_state(page).programs == 0 {
            let mut c = self.0.borrow_mut();
            if c.log.len() > before {
                c.log.last_mut().unwrap().landed = false;
            }
        }
        r
    }
    fn erase(&mut self, sim: &mut Sim, block: BlockAddr) -> Result<(), SimErr> {
        let g = GARBLE_CUT.with(|c| c.get());
        if g > 0 && self.0.borrow().ckpt.contains(&block.0) {
            GARBLE_CUT.with(|c| c.set(g - 1));
            sim.fail_next_erase(block);
            let r = self.0.borrow_mut().erase(sim, block);
            self.0.borrow_mut().all.push((
                99,
                block.0,
                0,
                "FAILED-ERASE+CUT".into(),
                Act::Ok,
                None,
            ));
            sim.cut_power();
            return r;
        }
        let n = NOOP_ERASES.with(|c| c.get());
        if n > 0 && self.0.borrow().ckpt.contains(&block.0) {
            NOOP_ERASES.with(|c| c.set(n - 1));
            let saved = *sim.plan();
            let mut p = saved;
            p.faults.erase_noop_ppm = 1_000_000;
            sim.arm(p);
            let r = self.0.borrow_mut().erase(sim, block);
            // (`arm` resets the op count: keep any armed cut's position out of it.)
            let mut back = *sim.plan();
            back.faults.erase_noop_ppm = saved.faults.erase_noop_ppm;
            sim.arm(back);
            self.0
                .borrow_mut()
                .all
                .push((99, block.0, 0, "NOOP-ERASE".into(), Act::Ok, None));
            return r;
        }
        let r = self.0.borrow_mut().erase(sim, block);
        let mut c = self.0.borrow_mut();
        if c.ckpt.contains(&block.0) {
            let mn = c.mount_no;
            let tag = match &r {
                Ok(()) => "ERASE".to_string(),
                Err(e) => format!("ERASE-{:?}", e.kind()),
            };
            if matches!(&r, Err(e) if e.kind() == nand_hal::ErrorKind::EraseFailed) {
                // The simulator garbles a block whose erase fails: its pages are gone.
                let clock = c.clock;
                c.erases.push((block.0, clock));
            }
            c.all.push((mn, block.0, 0, tag, Act::Ok, None));
        }
        r
    }
    fn read(
        &mut self,
        sim: &mut Sim,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, SimErr> {
        self.0.borrow_mut().read(sim, page, column, data, oob)
    }
    fn read_steps(
        &mut self,
        sim: &mut Sim,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<StepReport, SimErr> {
        self.0.borrow_mut().read_steps(sim, page, data, oob)
    }
}

type St<'a> = FsOn<Hooked<'a, Wrap>, Greedy>;

fn hk<'a>(sim: &'a mut Sim, ctl: &Shared) -> Hooked<'a, Wrap> {
    Hooked::new(sim, Wrap(ctl.clone()))
}

/// `ckpt_faults::burst` on this harness's store.
fn burst2<F: NandFlash>(
    fs: &mut FsOn<F, Greedy>,
    o: &mut Oracle,
    rng: &mut Rng,
    n: u32,
) -> Result<(), oftl::WriteError<F::Error>> {
    for _ in 0..n {
        let oi = rng.below(OBJS as u64) as usize;
        let p = rng.below(PAGES);
        let v = o.fresh();
        let r = fs.write(o.ids[oi], p * P as u64, &content(oi, p, v));
        o.hist.get_mut(&(oi, p)).unwrap().push(v);
        r?;
    }
    fs.sync()?;
    o.ack_all();
    Ok(())
}

/// A part with its oracle, forkable.
#[derive(Clone)]
struct World {
    sim: Sim,
    o: Oracle,
    ckpt: Vec<u32>,
}

fn ctl_for(ckpt: &[u32], mount_no: u32) -> Shared {
    let c: Shared = Default::default();
    c.borrow_mut().ckpt = ckpt.to_vec();
    c.borrow_mut().mount_no = mount_no;
    c
}

fn disarm(sim: &mut Sim) {
    if !sim.is_powered() {
        sim.power_on();
    }
    let mut p = *sim.plan();
    p.cut = None;
    sim.arm(p);
}

fn arm_at(sim: &mut Sim, at: u64, kind: CutKind, unstable: bool) {
    let mut p = *sim.plan();
    p.cut = Some(PowerCut { at_op: at, kind });
    p.faults.unstable_after_cut = unstable;
    sim.arm(p);
}

/// Formats, writes the oracle's objects and `ballast` pages of another object (so
/// that collection runs), then `warm` sessions (random endings) of bursts.
fn base(seed: u64, ballast: usize, warm: u32) -> World {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
    let ctl: Shared = Default::default();
    let mut o = setup(&mut sim, &ctl);
    let ckpt = ctl.borrow().ckpt.clone();
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    {
        let mut fs = Store::mounted(Hooked::new(&mut sim, ctl.clone())).unwrap();
        let id = fs.create(ObjKind::Object).unwrap();
        for k in 0..ballast / 50 {
            fs.write(id, (k * 50 * P) as u64, &vec![0x5a; 50 * P])
                .unwrap();
            fs.sync().unwrap();
        }
        fs.unmount().unwrap();
    }
    for _ in 0..warm {
        let mut fs = Store::mounted(Hooked::new(&mut sim, ctl.clone())).unwrap();
        settle(&mut fs, &mut o, "warm").unwrap();
        for _ in 0..(1 + rng.below(4)) {
            let n = 1 + rng.below(5) as u32;
            burst(&mut fs, &mut o, &mut rng, n).unwrap();
        }
        if rng.below(2) == 0 {
            fs.unmount().unwrap();
        }
    }
    World { sim, o, ckpt }
}

/// What the episode does after its mount.
#[derive(Clone, Copy, Debug)]
struct Episode {
    seed: u64,
    bursts: u32,
    unmount: bool,
    /// Checkpoint-program faults in the episode: (noland, landfail) in % per program.
    faults: Option<(u64, u64)>,
    /// Erase failures on checkpoint blocks in the episode (%).
    erase_fail: u64,
    /// Pages of these checkpoint blocks (programmed ones) unreadable at the episode's
    /// mount only.
    flake_block: Option<usize>,
    /// The episode's mount: 0 normal, 1 `Damaged::Repair`, 2 `Damaged::Rebuild`.
    how: u8,
}

/// Runs the episode on `w` (mount number 1). Returns the number of program/erase ops
/// the episode took (with no cut) and a trace.
fn episode(w: &mut World, ctl: &Shared, ep: Episode, trace: &mut Vec<String>) -> u64 {
    let mut rng = Rng(ep.seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
    {
        let mut c = ctl.borrow_mut();
        c.mount_no = 1;
        if let Some((nl, lf)) = ep.faults {
            c.random = Some((Rng(ep.seed | 1), nl, lf, 0, 1));
        }
        if ep.erase_fail > 0 {
            c.erase_fail = Some((Rng(ep.seed.rotate_left(7) | 1), ep.erase_fail));
        }
        if let Some(k) = ep.flake_block {
            let g = w.sim.geometry();
            let b = c.ckpt[k % c.ckpt.len()];
            for i in 0..g.pages_per_block() {
                let page = g.page(BlockAddr(b), i);
                if w.sim.page_state(page).programs > 0 {
                    c.sick.insert(page.0, Sick::Unreadable { until: 2 });
                }
            }
        }
    }
    let ops0 = w.sim.ops_since_arm();
    let r = match ep.how {
        0 => St::mounted(hk(&mut w.sim, ctl)),
        h => {
            let mut fs = St::new(hk(&mut w.sim, ctl), cfg(), Default::default());
            let how = if h == 1 {
                oftl::Damaged::Repair
            } else {
                oftl::Damaged::Rebuild {
                    lost_meta_attrs: [0; oftl::ATTR_LEN],
                }
            };
            fs.mount_damaged(how).map(|()| fs)
        }
    };
    let mut fs = match r {
        Ok(fs) => fs,
        Err(e) => {
            trace.push(format!("episode mount: {e:?}"));
            let n = w.sim.ops_since_arm() - ops0;
            return n;
        }
    };
    trace.push(format!("episode mount ok {:?}", fs.health()));
    if fs.flash_mut().sim.is_powered() && settle(&mut fs, &mut w.o, "episode mount").is_err() {
        // Reported by the caller's check at the next mount.
    }
    let mut stopped = false;
    for _ in 0..ep.bursts {
        let n = 1 + rng.below(5) as u32;
        if let Err(e) = burst2(&mut fs, &mut w.o, &mut rng, n) {
            trace.push(format!("episode burst: {e:?}"));
            stopped = true;
            break;
        }
    }
    if !stopped && ep.unmount {
        if let Err(e) = fs.unmount() {
            trace.push(format!("episode unmount: {e:?}"));
        }
    }
    drop(fs);
    let n = w.sim.ops_since_arm() - ops0;
    let mut c = ctl.borrow_mut();
    c.random = None;
    c.erase_fail = None;
    n
}

#[derive(Debug, Clone, PartialEq)]
enum Verdict {
    Ok { refusals: u32 },
    Loss(String),
    Refuse(String),
    Wedge(String),
    Reuse(String),
}

/// Heals: `sessions` fault-free sessions (mount retried up to `retries` times), each
/// checked, with bursts, alternating unmount and unclean ends; then a final mount.
fn heal(
    w: &mut World,
    ctl: &Shared,
    sessions: u32,
    retries: u32,
    trace: &mut Vec<String>,
) -> Verdict {
    let mut rng = Rng(0x1234_5678_9abc_def1 ^ w.o.next_v as u64);
    let mut refusals = 0;
    for s in 0..=sessions {
        let mut got = None;
        let mut last = None;
        for t in 0..=retries {
            let mn = 2000 + s * 10 + t;
            ctl.borrow_mut().mount_no = mn;
            // (A raw reborrow: the borrow checker does not see that a failed mount
            // holds no borrow.)
            let sim: &mut Sim = unsafe { &mut *(&mut w.sim as *mut Sim) };
            match St::mounted(hk(sim, ctl)) {
                Ok(fs) => {
                    got = Some(fs);
                    break;
                }
                Err(e) => {
                    refusals += 1;
                    trace.push(format!("heal s{s} mount {t}: {e:?}"));
                    last = Some(e);
                }
            }
        }
        if got.is_none() && REPAIR_IN_HEAL.with(|c| c.get()) {
            let sim: &mut Sim = unsafe { &mut *(&mut w.sim as *mut Sim) };
            let mut fs = St::new(hk(sim, ctl), cfg(), Default::default());
            match fs.mount_damaged(oftl::Damaged::Repair) {
                Ok(()) => {
                    trace.push(format!("heal s{s}: repaired"));
                    got = Some(fs);
                }
                Err(e) => trace.push(format!("heal s{s}: repair failed {e:?}")),
            }
        }
        if got.is_none() {
            drop(got);
            let e = last.unwrap();
            // Would a repair mount bring everything back?
            let mut fs = St::new(hk(&mut w.sim, ctl), cfg(), Default::default());
            let rep = fs
                .mount_damaged(oftl::Damaged::Repair)
                .map_err(|e| format!("{e:?}"))
                .and_then(|()| check(&mut fs, &w.o, "repair"));
            return Verdict::Refuse(format!(
                "heal s{s}: every mount refused: {e:?}; repair: {rep:?}"
            ));
        }
        let mut fs = got.unwrap();
        if !matches!(fs.health(), Health::Writable) {
            match check_lenient(&mut fs, &w.o, &format!("heal s{s} (read-only)")) {
                Ok(0) => {}
                Ok(n) => trace.push(format!("heal s{s}: read-only, {n} reads failed")),
                Err(e) => return Verdict::Loss(e),
            }
        } else if let Err(e) = check(&mut fs, &w.o, &format!("heal s{s}")) {
            return Verdict::Loss(e);
        }
        if s == sessions {
            break;
        }
        let h = fs.health();
        if !matches!(h, Health::Writable) {
            let torn_bad: Vec<u32> = w
                .ckpt
                .iter()
                .copied()
                .filter(|&b| fs.flash_mut().sim.is_bad(BlockAddr(b)).unwrap_or(true))
                .collect();
            if torn_bad.is_empty() && ctl.borrow().erase_fails == 0 {
                return Verdict::Wedge(format!("heal s{s}: {h:?}"));
            }
            trace.push(format!("heal s{s}: {h:?} (bad ckpt blocks {torn_bad:?})"));
            continue;
        }
        let _ = settle(&mut fs, &mut w.o, "heal settle");
        for _ in 0..2 {
            let n = 1 + rng.below(4) as u32;
            if let Err(e) = burst2(&mut fs, &mut w.o, &mut rng, n) {
                let torn_bad = w
                    .ckpt
                    .iter()
                    .any(|&b| fs.flash_mut().sim.is_bad(BlockAddr(b)).unwrap_or(true));
                if !torn_bad && ctl.borrow().erase_fails == 0 {
                    return Verdict::Wedge(format!(
                        "heal s{s}: sync failed {e:?} {:?}",
                        fs.health()
                    ));
                }
                break;
            }
        }
        if s % 2 == 0 {
            let _ = fs.unmount();
        }
    }
    let c = ctl.borrow();
    // Blocks marked bad are never read again: what they hold does not count.
    let log: Vec<Rec> = c
        .log
        .iter()
        .filter(|r| !w.sim.is_bad(BlockAddr(r.block)).unwrap_or(true))
        .cloned()
        .collect();
    let ru = reused(&log, &c.erases);
    if !ru.is_empty() {
        return Verdict::Reuse(ru.join("; "));
    }
    Verdict::Ok { refusals }
}

/// `check`, but a read that fails is allowed (a read-only session cannot settle a
/// page a cut tore, and may fail a read with the flash's error, docs/DESIGN.md 5.3);
/// a read that returns something not acknowledged is not.
fn check_lenient<F: NandFlash>(
    fs: &mut FsOn<F, Greedy>,
    o: &Oracle,
    what: &str,
) -> Result<u32, String> {
    let mut errs = 0;
    for (oi, &id) in o.ids.iter().enumerate() {
        for p in 0..PAGES {
            let mut b = vec![0u8; P];
            match fs.read(id, p * P as u64, &mut b) {
                Err(_) => errs += 1,
                Ok(_) => {
                    let h = &o.hist[&(oi, p)];
                    let from = o.acked[&(oi, p)];
                    if !h[from..].iter().any(|&v| content(oi, p, v) == b) {
                        let which = h.iter().position(|&v| content(oi, p, v) == b);
                        return Err(format!(
                            "{what}: obj {oi} page {p}: holds version index {which:?}, acked {from} of {} (hist {h:?})",
                            h.len()
                        ));
                    }
                }
            }
        }
    }
    Ok(errs)
}

/// One forked run: the episode with a cut at op `at` (0: none) of `kind`, then heal.
fn one(w0: &World, ep: Episode, at: u64, kind: CutKind) -> (Verdict, Vec<String>) {
    let mut w = w0.clone();
    let ctl = ctl_for(&w.ckpt, 1);
    let mut trace = Vec::new();
    if at > 0 {
        arm_at(&mut w.sim, at, kind, true);
    }
    episode(&mut w, &ctl, ep, &mut trace);
    {
        let mut c = ctl.borrow_mut();
        c.random = None;
        c.erase_fail = None;
        c.plan.clear();
    }
    disarm(&mut w.sim);
    if ep.how == 2 && env("B_HEAL_REBUILD", 0u32) == 1 {
        // The documented remedy for a cut rebuild: rebuild again.
        let mut fs = St::new(hk(&mut w.sim, &ctl), cfg(), Default::default());
        let r = fs.mount_damaged(oftl::Damaged::Rebuild {
            lost_meta_attrs: [0; oftl::ATTR_LEN],
        });
        trace.push(format!("rebuilt again: {r:?}"));
        if r.is_ok() {
            let _ = fs.unmount();
        }
    }
    let v = heal(
        &mut w,
        &ctl,
        env("B_HEAL", 3u32),
        env("B_RETRIES", 3u32),
        &mut trace,
    );
    if !matches!(v, Verdict::Ok { .. }) && env("B_SHOWLOG", 0u32) == 1 {
        for r in ctl.borrow().all.iter() {
            trace.push(format!("  prog {r:?}"));
        }
        trace.push(format!("  erases {:?}", ctl.borrow().erases));
    }
    (v, trace)
}

#[derive(Default)]
struct Tally {
    runs: u64,
    refused_once: u64,
    fails: BTreeMap<&'static str, Vec<String>>,
}

impl Tally {
    fn add(&mut self, label: String, v: Verdict, trace: &[String]) {
        self.runs += 1;
        let class = match &v {
            Verdict::Ok { refusals } => {
                if *refusals > 0 {
                    self.refused_once += 1;
                }
                return;
            }
            Verdict::Loss(_) => "LOSS",
            Verdict::Refuse(_) => "REFUSE",
            Verdict::Wedge(_) => "WEDGE",
            Verdict::Reuse(_) => "REUSE",
        };
        self.fails
            .entry(class)
            .or_default()
            .push(format!("{label}: {v:?}\n      trace {trace:?}"));
    }
    fn report(&self, name: &str) -> usize {
        let n: usize = self.fails.values().map(|v| v.len()).sum();
        println!(
            "{name}: {} runs, {} with a refused mount on the way, failures: {:?}",
            self.runs,
            self.refused_once,
            self.fails
                .iter()
                .map(|(k, v)| (*k, v.len()))
                .collect::<Vec<_>>()
        );
        for (k, v) in self.fails.iter() {
            for f in v.iter().take(env("B_SHOW", 2usize)) {
                println!("  {k} {f}");
            }
        }
        n
    }
}

fn kinds() -> Vec<CutKind> {
    match std::env::var("B_KINDS").ok().as_deref() {
        Some("random") => vec![CutKind::Torn(TornMode::Random)],
        Some("some") => vec![CutKind::Torn(TornMode::SomeBits)],
        Some("prefix") => vec![CutKind::Torn(TornMode::Prefix)],
        _ => CutKind::ALL.to_vec(),
    }
}

/// Sweeps a cut over every op of one episode on `w`.
fn sweep(w: &World, ep: Episode, label: &str, t: &mut Tally) {
    let total = {
        let mut w2 = w.clone();
        let ctl = ctl_for(&w2.ckpt, 1);
        let mut tr = Vec::new();
        episode(&mut w2, &ctl, ep, &mut tr)
    };
    let step = env("B_STEP", 1u64);
    for at in (1..=total + 1).step_by(step as usize) {
        for kind in kinds() {
            let (v, trace) = one(w, ep, at, kind);
            t.add(format!("{label} cut {at}/{total} {kind:?}"), v, &trace);
        }
    }
}

/// Exhaustive cut sweeps over episodes after a clean and after an unclean end.
#[test]
fn s45b_cut_sweep() {
    let seeds = env("B_SEEDS", 3u64);
    let first = env("B_FIRST", 1u64);
    let mut t = Tally::default();
    for seed in first..first + seeds {
        let w = base(seed, 300, 3 + (seed % 3) as u32);
        for (i, unmount) in [(0, true), (1, false)] {
            let ep = Episode {
                seed: seed * 10 + i,
                bursts: 4,
                unmount,
                faults: None,
                erase_fail: 0,
                flake_block: None,
                how: 0,
            };
            sweep(&w, ep, &format!("seed {seed} ep {i}"), &mut t);
        }
    }
    assert_eq!(t.report("cut sweep"), 0);
}

/// `base`, then one more session whose `j`-th checkpoint-block program is torn by a
/// cut of `mode` (unstable after it): the part holds a torn checkpoint or marker page.
/// `None` if the session ended before its `j`-th checkpoint program.
fn base_torn(seed: u64, j: usize, mode: TornMode) -> Option<World> {
    let mut w = base(seed, 300, 2 + (seed % 3) as u32);
    let ctl = ctl_for(&w.ckpt, 0);
    let mut p = *w.sim.plan();
    p.faults.unstable_after_cut = true;
    w.sim.arm(p);
    {
        let mut c = ctl.borrow_mut();
        for _ in 0..j {
            c.plan.push_back(Act::Ok);
        }
        c.plan.push_back(Act::Cut(mode));
    }
    let mut rng = Rng(seed.wrapping_mul(0x517c_c1b7_2722_0a95) | 3);
    {
        let r = St::mounted(hk(&mut w.sim, &ctl));
        let mut fs = match r {
            Ok(fs) => fs,
            Err(_) => {
                let cut = !w.sim.is_powered();
                disarm(&mut w.sim);
                return cut.then_some(w);
            }
        };
        if fs.flash_mut().sim.is_powered() {
            settle(&mut fs, &mut w.o, "torn").unwrap();
        }
        for _ in 0..12 {
            let n = 1 + rng.below(5) as u32;
            if burst2(&mut fs, &mut w.o, &mut rng, n).is_err() {
                break;
            }
        }
    }
    let cut = !w.sim.is_powered();
    disarm(&mut w.sim);
    cut.then_some(w)
}

/// Cut sweeps over the episode after a session cut at its `j`-th checkpoint program
/// (a torn checkpoint or marker): the episode's mount restates and erases the
/// stale blocks; a second cut lands at every op of it.
#[test]
fn s45b_cut_after_torn_ckpt() {
    let seeds = env("B_SEEDS", 2u64);
    let first = env("B_FIRST", 1u64);
    let mut t = Tally::default();
    for seed in first..first + seeds {
        for j in 0..env("B_J", 6usize) {
            for mode in [
                TornMode::Random,
                TornMode::Prefix,
                TornMode::SomeBits,
                TornMode::MostBits,
            ] {
                let Some(w) = base_torn(seed, j, mode) else {
                    continue;
                };
                for (i, unmount) in [(0, true), (1, false)] {
                    let ep = Episode {
                        seed: seed * 10 + i,
                        bursts: 3,
                        unmount,
                        faults: None,
                        erase_fail: 0,
                        flake_block: None,
                        how: 0,
                    };
                    sweep(
                        &w,
                        ep,
                        &format!("seed {seed} torn j {j} {mode:?} ep {i}"),
                        &mut t,
                    );
                }
            }
        }
    }
    assert_eq!(t.report("cut after torn ckpt"), 0);
}

/// F11 (an erase that reports success and changes nothing, `erase_noop`) on the
/// checkpoint block a recovery switches to: the attempt there does not read back and
/// goes to another block (the sync succeeds), but the block is left with every page
/// unreadable. `check_lost_markers` then takes its top two pages for a lost checkpoint
/// and marker it cannot date (no page of the block reads) and refuses every later mount
/// with `MediaLoss`, on a part that lost nothing. `unmount_first`: the session before
/// ends with an unmount (else a drop).
fn noop_erase_case(seed: u64, unmount_first: bool, later: u32) -> Result<String, String> {
    let mut w = base(seed, 300, 2);
    let ctl = ctl_for(&w.ckpt, 1);
    let mut rng = Rng(seed | 1);
    let mut notes = Vec::new();
    {
        let mut fs = St::mounted(hk(&mut w.sim, &ctl)).map_err(|e| format!("m1: {e:?}"))?;
        settle(&mut fs, &mut w.o, "m1")?;
        burst2(&mut fs, &mut w.o, &mut rng, 3).map_err(|e| format!("m1 burst: {e:?}"))?;
        if unmount_first {
            fs.unmount().map_err(|e| format!("unmount: {e:?}"))?;
        }
    }
    // The next checkpoint-block erase does nothing.
    NOOP_ERASES.with(|c| c.set(1));
    {
        ctl.borrow_mut().mount_no = 2;
        let mut fs = St::mounted(hk(&mut w.sim, &ctl)).map_err(|e| format!("m2: {e:?}"))?;
        settle(&mut fs, &mut w.o, "m2")?;
        // Enough syncs for a checkpoint block switch if the mount made none.
        for _ in 0..12 {
            burst2(&mut fs, &mut w.o, &mut rng, 2).map_err(|e| format!("m2 burst: {e:?}"))?;
        }
        notes.push(format!("m2 {:?}", fs.health()));
    }
    let left = NOOP_ERASES.with(|c| c.replace(0));
    if left > 0 {
        return Ok("no checkpoint block erased".into());
    }
    if env("B_VERBOSE", 0u32) == 2 {
        for r in ctl.borrow().all.iter() {
            println!("    {r:?}");
        }
        let g = w.sim.geometry();
        for &b in &w.ckpt {
            let mut v = Vec::new();
            for i in 0..g.pages_per_block() {
                let mut d = vec![0u8; 2048];
                let r = w.sim.read(g.page(BlockAddr(b), i), 0, &mut d, &mut []);
                v.push(match r {
                    Ok(_) if d.iter().all(|&x| x == 0xff) => 'E',
                    Ok(_) => 'r',
                    Err(_) => 'X',
                });
            }
            println!("    blk {b}: {}", v.iter().collect::<String>());
        }
    }
    // Later mounts on a part with nothing wrong but the block the erase missed.
    for k in 0..later {
        ctl.borrow_mut().mount_no = 3 + k;
        match St::mounted(hk(&mut w.sim, &ctl)) {
            Ok(mut fs) => {
                check(&mut fs, &w.o, &format!("m{}", 3 + k))?;
                notes.push(format!("m{} ok {:?}", 3 + k, fs.health()));
                burst2(&mut fs, &mut w.o, &mut rng, 2).map_err(|e| format!("burst: {e:?}"))?;
            }
            Err(e) => {
                notes.push(format!("m{}: {e:?}", 3 + k));
                if k + 1 == later {
                    let mut fs = St::new(hk(&mut w.sim, &ctl), cfg(), Default::default());
                    let r = fs
                        .mount_damaged(oftl::Damaged::Repair)
                        .map_err(|e| format!("{e:?}"))
                        .and_then(|()| check(&mut fs, &w.o, "repair"));
                    return Err(format!(
                        "seed {seed} unmount_first {unmount_first}: every mount after the \
                         no-op erase refused: {}; repair: {r:?}\n    log {:?}",
                        notes.join(" | "),
                        ctl.borrow().all
                    ));
                }
            }
        }
    }
    Ok(notes.join(" | "))
}

#[test]
fn s45b_noop_erase_of_a_checkpoint_block() {
    let mut fails = Vec::new();
    let mut runs = 0;
    for seed in 1..=env("B_SEEDS", 6u64) {
        for unmount_first in [false, true] {
            runs += 1;
            match noop_erase_case(seed, unmount_first, 4) {
                Ok(n) => {
                    if env("B_VERBOSE", 0u32) == 1 {
                        println!("ok seed {seed} {unmount_first}: {n}");
                    }
                }
                Err(e) => fails.push(e),
            }
        }
    }
    println!(
        "noop erase: {runs} runs, {} refused every later mount",
        fails.len()
    );
    for f in fails.iter().take(env("B_SHOW", 2usize)) {
        println!("FAIL: {f}");
    }
    assert!(fails.is_empty());
}

/// A checkpoint block's erase fails (the simulator garbles the block: every page
/// reads uncorrectable) and the power goes before the bad-block mark is programmed.
/// The part lost nothing; every page of that block is unreadable for good, with no
/// readable page to date it. `at_mount`: the failing erase is the first
/// checkpoint-block erase of the mount after an unclean end (else of a session after a
/// clean mount, at a block switch). Later mounts must succeed (before stop 45 the
/// block's unreadable pages were counted and the block erased, then retired).
fn garble_cut_case(seed: u64, at_mount: bool, later: u32) -> Result<String, String> {
    let mut w = base(seed, 300, 2);
    let ctl = ctl_for(&w.ckpt, 1);
    let mut rng = Rng(seed | 1);
    let mut notes = Vec::new();
    {
        let mut fs = St::mounted(hk(&mut w.sim, &ctl)).map_err(|e| format!("m1: {e:?}"))?;
        settle(&mut fs, &mut w.o, "m1")?;
        burst2(&mut fs, &mut w.o, &mut rng, 3).map_err(|e| format!("m1 burst: {e:?}"))?;
        if !at_mount {
            fs.unmount().map_err(|e| format!("unmount: {e:?}"))?;
        }
    }
    GARBLE_CUT.with(|c| c.set(1));
    {
        ctl.borrow_mut().mount_no = 2;
        let r = St::mounted(hk(&mut w.sim, &ctl));
        match r {
            Ok(mut fs) => {
                for _ in 0..16 {
                    if burst2(&mut fs, &mut w.o, &mut rng, 2).is_err() {
                        break;
                    }
                }
                notes.push(format!("m2 {:?}", fs.health()));
            }
            Err(e) => notes.push(format!("m2: {e:?}")),
        }
    }
    disarm(&mut w.sim);
    if GARBLE_CUT.with(|c| c.replace(0)) > 0 {
        return Ok("no checkpoint block erased".into());
    }
    for k in 0..later {
        ctl.borrow_mut().mount_no = 3 + k;
        match St::mounted(hk(&mut w.sim, &ctl)) {
            Ok(mut fs) => {
                check(&mut fs, &w.o, &format!("m{}", 3 + k))?;
                notes.push(format!("m{} ok {:?}", 3 + k, fs.health()));
                let _ = settle(&mut fs, &mut w.o, "settle");
                burst2(&mut fs, &mut w.o, &mut rng, 2).map_err(|e| format!("burst: {e:?}"))?;
            }
            Err(e) => {
                notes.push(format!("m{}: {e:?}", 3 + k));
                if k + 1 == later {
                    let mut fs = St::new(hk(&mut w.sim, &ctl), cfg(), Default::default());
                    let r = fs
                        .mount_damaged(oftl::Damaged::Repair)
                        .map_err(|e| format!("{e:?}"))
                        .and_then(|()| check(&mut fs, &w.o, "repair"));
                    let after = St::mounted(hk(&mut w.sim, &ctl))
                        .map(|_| "mounts")
                        .map_err(|e| format!("{e:?}"));
                    return Err(format!(
                        "seed {seed} at_mount {at_mount}: every mount refused: {}; repair: {r:?}, \
                         then mount: {after:?}\n    log {:?}",
                        notes.join(" | "),
                        ctl.borrow().all.iter().rev().take(12).collect::<Vec<_>>()
                    ));
                }
            }
        }
    }
    Ok(notes.join(" | "))
}

#[test]
fn s45b_failed_erase_then_cut() {
    let mut fails = Vec::new();
    let mut runs = 0;
    for seed in 1..=env("B_SEEDS", 6u64) {
        for at_mount in [true, false] {
            runs += 1;
            match garble_cut_case(seed, at_mount, 4) {
                Ok(n) => {
                    if env("B_VERBOSE", 0u32) == 1 {
                        println!("ok seed {seed} {at_mount}: {n}");
                    }
                }
                Err(e) => fails.push(e),
            }
        }
    }
    println!(
        "failed erase + cut: {runs} runs, {} refused every later mount",
        fails.len()
    );
    for f in fails.iter().take(env("B_SHOW", 2usize)) {
        println!("FAIL: {f}");
    }
    assert!(fails.is_empty());
}

/// Cut sweeps over a `Damaged::Rebuild` mount (its first checkpoint, then the erase
/// of every other checkpoint block) and its session, and over a `Damaged::Repair`
/// mount of a part refused by the failed-erase-and-cut shape above.
#[test]
fn s45b_cut_sweep_damaged_mounts() {
    let seeds = env("B_SEEDS", 2u64);
    let first = env("B_FIRST", 1u64);
    let mut t = Tally::default();
    for seed in first..first + seeds {
        let w = base(seed, 300, 3);
        for (i, unmount) in [(0, true), (1, false)] {
            let ep = Episode {
                seed: seed * 10 + i,
                bursts: 3,
                unmount,
                faults: None,
                erase_fail: 0,
                flake_block: None,
                how: 2,
            };
            sweep(&w, ep, &format!("seed {seed} rebuild ep {i}"), &mut t);
        }
        // A part every normal mount refuses (a garbled, unmarked checkpoint block).
        let mut w = base(seed, 300, 2);
        let ctl = ctl_for(&w.ckpt, 1);
        GARBLE_CUT.with(|c| c.set(1));
        {
            let r = St::mounted(hk(&mut w.sim, &ctl));
            if let Ok(mut fs) = r {
                let mut rng = Rng(seed | 1);
                for _ in 0..16 {
                    if burst2(&mut fs, &mut w.o, &mut rng, 2).is_err() {
                        break;
                    }
                }
            }
        }
        disarm(&mut w.sim);
        GARBLE_CUT.with(|c| c.set(0));
        for (i, unmount) in [(0, true), (1, false)] {
            let ep = Episode {
                seed: seed * 10 + i,
                bursts: 3,
                unmount,
                faults: None,
                erase_fail: 0,
                flake_block: None,
                how: 1,
            };
            REPAIR_IN_HEAL.with(|c| c.set(true));
            sweep(&w, ep, &format!("seed {seed} repair ep {i}"), &mut t);
            REPAIR_IN_HEAL.with(|c| c.set(false));
        }
    }
    assert_eq!(t.report("damaged mounts"), 0);
}

#[derive(Clone, Copy, Debug)]
struct RShape {
    /// Checkpoint program faults in faulty sessions: noland, landfail, sick (%).
    pct: (u64, u64, u64),
    /// Real (simulator) program failures on checkpoint blocks in faulty sessions (%).
    real_pfail: u64,
    flake_block: u64,
    flake_page: u64,
    mount_cut: u64,
    erase_fail: u64,
    /// Session cuts (%), at op 1..=200, of a random kind.
    cut: u64,
}

fn flake(sim: &Sim, ctl: &Shared, rng: &mut Rng, pct_page: u64, pct_block: u64) -> Vec<(u32, u32)> {
    let g = sim.geometry();
    let mut c = ctl.borrow_mut();
    let until = c.mount_no + 1;
    let blocks = c.ckpt.clone();
    let whole =
        (rng.below(100) < pct_block).then(|| blocks[rng.below(blocks.len() as u64) as usize]);
    let mut n = Vec::new();
    for &b in &blocks {
        for i in 0..g.pages_per_block() {
            let page = g.page(BlockAddr(b), i);
            if sim.page_state(page).programs == 0 {
                continue;
            }
            if (whole == Some(b) || rng.below(100) < pct_page) && !c.sick.contains_key(&page.0) {
                c.sick.insert(page.0, Sick::Unreadable { until });
                n.push((b, i));
            }
        }
    }
    n
}

/// The checkpoint blocks as the simulator holds them (E erased, C<n> checkpoint n,
/// M marker or other readable page, X uncorrectable, ! sick at this mount).
fn picture(sim: &mut Sim, ctl: &Shared) -> String {
    let g = sim.geometry();
    let c = ctl.borrow();
    let mut out = Vec::new();
    for &b in &c.ckpt {
        let bad = sim.is_bad(BlockAddr(b)).unwrap_or(true);
        let mut v = Vec::new();
        for i in 0..g.pages_per_block() {
            let page = g.page(BlockAddr(b), i);
            let mut d = vec![0u8; 2048];
            let mut oob = vec![0u8; 64];
            let r = sim.read(page, 0, &mut d, &mut oob);
            let sick = if c.sick_now(page).is_some() { "!" } else { "" };
            v.push(format!(
                "{sick}{}",
                match r {
                    Ok(_) if d.iter().chain(oob.iter()).all(|&x| x == 0xff) => "E".to_string(),
                    Ok(_) if &d[0..4] == b"OCKP" =>
                        format!("C{}", u32::from_le_bytes(d[8..12].try_into().unwrap())),
                    Ok(_) => "M".to_string(),
                    Err(_) => "X".to_string(),
                }
            ));
        }
        while v.last().is_some_and(|x| x == "E") {
            v.pop();
        }
        out.push(format!(
            "blk {b}{}: {}",
            if bad { " BAD" } else { "" },
            v.join(" ")
        ));
    }
    out.join(" | ")
}

fn random_kind(rng: &mut Rng) -> CutKind {
    CutKind::ALL[rng.below(5) as usize]
}

/// A random multi-session run (as `review_s45::run`) with cuts of every kind, real
/// program failures, flakes and erase failures; then heals (`heal`).
fn random_run(seed: u64, sessions: u32, sh: RShape) -> (Verdict, Vec<String>) {
    let mut w = base(seed, env("B_BALLAST", 300usize), 1);
    let ctl = ctl_for(&w.ckpt, 0);
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    PFAIL_RNG.with(|c| c.set(seed | 1));
    let mut trace = Vec::new();
    let mut mount_no = 0;
    for s in 0..sessions {
        mount_no += 1;
        let faulty = rng.below(3) != 0;
        {
            let mut c = ctl.borrow_mut();
            c.mount_no = mount_no;
            c.random = faulty.then(|| (Rng(rng.next() | 1), sh.pct.0, sh.pct.1, sh.pct.2, 2));
            c.erase_fail =
                (faulty && sh.erase_fail > 0).then(|| (Rng(rng.next() | 1), sh.erase_fail));
        }
        REAL_PFAIL.with(|c| c.set(if faulty { sh.real_pfail } else { 0 }));
        let fl = flake(&w.sim, &ctl, &mut rng, sh.flake_page, sh.flake_block);
        let mcut = rng.below(100) < sh.mount_cut;
        let mkind = random_kind(&mut rng);
        let mat = 1 + rng.below(60);
        trace.push(format!(
            "s{s} (mount {mount_no}): faulty {faulty} flaky {fl:?} mcut {}",
            if mcut {
                format!("{mat} {mkind:?}")
            } else {
                "-".into()
            }
        ));
        if env("B_SHOWLOG", 0u32) == 1 {
            let pic = picture(&mut w.sim, &ctl);
            trace.push(format!("   flash: {pic}"));
        }
        if mcut {
            arm_at(&mut w.sim, mat, mkind, true);
        }
        let mut retries = 0;
        let mut fs = loop {
            let sim: &mut Sim = unsafe { &mut *(&mut w.sim as *mut Sim) };
            let e = match St::mounted(hk(sim, &ctl)) {
                Ok(fs) => break Some(fs),
                Err(e) => e,
            };
            if !w.sim.is_powered() {
                disarm(&mut w.sim);
                trace.push(format!("   mount cut: {e:?}"));
                break None;
            }
            if retries < 6 {
                // A refusal while pages are sick, or on unstable pages (torn erases and
                // programs), may be transient: only one that lasts counts.
                trace.push(format!(
                    "   refused (sick now: {}): {e:?}",
                    ctl.borrow().any_sick()
                ));
                retries += 1;
                mount_no += 1;
                ctl.borrow_mut().mount_no = mount_no;
                continue;
            }
            REAL_PFAIL.with(|c| c.set(0));
            if env("B_SHOWLOG", 0u32) == 1 {
                for r in ctl.borrow().all.iter() {
                    trace.push(format!("  prog {r:?}"));
                }
                let pic = picture(&mut w.sim, &ctl);
                trace.push(format!("  now: {pic}"));
            }
            return (
                Verdict::Refuse(format!("seed {seed} s{s}: mount: {e:?}")),
                trace,
            );
        };
        let Some(mut fs) = fs.take() else { continue };
        if mcut && fs.flash_mut().sim.is_powered() {
            disarm(fs.flash_mut().sim);
        }
        if !fs.flash_mut().sim.is_powered() {
            trace.push(format!("   mount ok after the cut: {:?}", fs.health()));
            drop(fs);
            disarm(&mut w.sim);
            continue;
        }
        let ro = !matches!(fs.health(), Health::Writable);
        let r = if ro {
            check_lenient(&mut fs, &w.o, &format!("s{s} read-only mount")).map(|n| {
                if n > 0 {
                    trace.push(format!("   read-only: {n} reads failed"));
                }
            })
        } else {
            settle(&mut fs, &mut w.o, &format!("s{s} mount"))
        };
        if let Err(e) = r {
            REAL_PFAIL.with(|c| c.set(0));
            if env("B_SHOWLOG", 0u32) == 1 {
                for r in ctl.borrow().all.iter() {
                    trace.push(format!("  prog {r:?}"));
                }
                trace.push(format!("  erases {:?}", ctl.borrow().erases));
                trace.push(format!("  sick {:?}", ctl.borrow().sick));
            }
            return (Verdict::Loss(format!("seed {seed}: {e}")), trace);
        }
        trace.push(format!("   health {:?}", fs.health()));
        if rng.below(100) < sh.cut {
            let at = 1 + rng.below(200);
            let k = random_kind(&mut rng);
            arm_at(fs.flash_mut().sim, at, k, true);
            trace.push(format!("   cut {at} {k:?}"));
        }
        let ending = rng.below(3);
        let mut stopped = false;
        for _ in 0..(3 + rng.below(10)) {
            let n = 1 + rng.below(4) as u32;
            if burst2(&mut fs, &mut w.o, &mut rng, n).is_err() {
                stopped = true;
                break;
            }
        }
        if !stopped && ending == 0 {
            let _ = fs.unmount();
        }
        drop(fs);
        disarm(&mut w.sim);
    }
    REAL_PFAIL.with(|c| c.set(0));
    {
        let mut c = ctl.borrow_mut();
        c.random = None;
        c.erase_fail = None;
        c.mount_no = 1000;
    }
    let v = heal(&mut w, &ctl, 3, 3, &mut trace);
    if !matches!(v, Verdict::Ok { .. }) && env("B_SHOWLOG", 0u32) == 1 {
        for r in ctl.borrow().all.iter() {
            trace.push(format!("  prog {r:?}"));
        }
    }
    (v, trace)
}

#[test]
fn s45b_random() {
    let seeds = env("B_SEEDS", 50u64);
    let first = env("B_FIRST", 1u64);
    let only = std::env::var("B_SHAPE").ok();
    let shapes = [
        (
            "cuts-only",
            RShape {
                pct: (0, 0, 0),
                real_pfail: 0,
                flake_block: 0,
                flake_page: 0,
                mount_cut: 40,
                erase_fail: 0,
                cut: 60,
            },
        ),
        (
            "real-pfail-cuts",
            RShape {
                pct: (0, 0, 0),
                real_pfail: 20,
                flake_block: 0,
                flake_page: 0,
                mount_cut: 30,
                erase_fail: 0,
                cut: 50,
            },
        ),
        (
            "mixed",
            RShape {
                pct: (20, 15, 20),
                real_pfail: 10,
                flake_block: 20,
                flake_page: 5,
                mount_cut: 30,
                erase_fail: 5,
                cut: 40,
            },
        ),
        (
            "flake-cuts",
            RShape {
                pct: (0, 0, 0),
                real_pfail: 0,
                flake_block: 30,
                flake_page: 10,
                mount_cut: 40,
                erase_fail: 0,
                cut: 40,
            },
        ),
    ];
    let whole = env("B_WHOLE", 0u32) == 1;
    let mut total = 0;
    for (name, mut sh) in shapes {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        if !whole && sh.flake_block > 0 {
            // Whole checkpoint blocks unreadable for a mount: left open (review_s45).
            sh.flake_page = sh.flake_page.max(10);
            sh.flake_block = 0;
        }
        let mut t = Tally::default();
        for seed in first..first + seeds {
            let (v, trace) = random_run(seed, env("B_SESSIONS", 10u32), sh);
            t.add(format!("{name} seed {seed}"), v, &trace);
        }
        total += t.report(name);
    }
    assert_eq!(total, 0);
}

/// Directed (from `s45b_random` "mixed" seed 170): the spare an unmarked checkpoint
/// keeps is chosen from the newest marker the mount *saw*, but the walk of a block
/// stops after its two newest checkpoints, so a block `B` topped by a clean
/// checkpoint and a failed attempt hides its own markers. Then:
/// 1. session 1 (clean mount from `B`'s clean checkpoint `Cc`): the first change's
///    four attempts fail: the first, appended in `B`, lands but reports failure; the
///    last (`Cf`, in block `X`) lands but reports failure; the store turns read-only;
/// 2. mount 2 loads `Cf` (the newest, unmarked: a program that reported failure),
///    keeps as its spare the block of the newest marker it saw (an older block `A`),
///    and its recovery's checkpoint attempts all fail, the second after erasing `B`
///    (neither durable nor spare): read-only again;
/// 3. mount 3: `Cf` does not read (a failed program's page); the only other state
///    on flash is `A`'s: every write acknowledged since `A`'s checkpoints rolls back,
///    silently (no marker names `Cf`, no lost-marker pair).
fn spare_choice_case(seed: u64, warm_syncs: u32, mount2_fail: bool) -> Result<String, String> {
    let mut w = base(seed, 300, 0);
    let ctl = ctl_for(&w.ckpt, 0);
    let mut rng = Rng(seed | 1);
    let mut notes = Vec::new();
    {
        let mut fs = St::mounted(hk(&mut w.sim, &ctl)).map_err(|e| format!("m0: {e:?}"))?;
        for _ in 0..warm_syncs {
            burst2(&mut fs, &mut w.o, &mut rng, 2).map_err(|e| format!("m0 burst: {e:?}"))?;
        }
        fs.unmount().map_err(|e| format!("m0 unmount: {e:?}"))?;
    }
    notes.push(format!("after m0: {}", picture(&mut w.sim, &ctl)));
    let n0 = ctl.borrow().log.len();
    {
        ctl.borrow_mut().mount_no = 1;
        ctl.borrow_mut()
            .plan
            .extend([Act::LandFail, Act::NoLand, Act::NoLand, Act::LandFail]);
        let mut fs = St::mounted(hk(&mut w.sim, &ctl)).map_err(|e| format!("m1: {e:?}"))?;
        let r = burst2(&mut fs, &mut w.o, &mut rng, 2);
        notes.push(format!("m1 sync: {r:?} {:?}", fs.health()));
        ctl.borrow_mut().plan.clear();
    }
    // The last attempt (landed, reported failure) reads uncorrectable from mount 3 on.
    let g = w.sim.geometry();
    let last = ctl.borrow().log[n0..]
        .iter()
        .rev()
        .find(|r| r.act == Act::LandFail)
        .cloned();
    let Some(last) = last else {
        return Ok("no LandFail".into());
    };
    ctl.borrow_mut().sick.insert(
        g.page(BlockAddr(last.block), last.page).0,
        Sick::UnreadableAt {
            from: 3,
            until: u32::MAX,
        },
    );
    notes.push(format!("after m1: {}", picture(&mut w.sim, &ctl)));
    {
        ctl.borrow_mut().mount_no = 2;
        if mount2_fail {
            ctl.borrow_mut().plan.extend([Act::NoLand; 4]);
        }
        match St::mounted(hk(&mut w.sim, &ctl)) {
            Ok(mut fs) => {
                notes.push(format!("m2 {:?}", fs.health()));
                check(&mut fs, &w.o, "m2")?;
            }
            Err(e) => notes.push(format!("m2: {e:?}")),
        }
        ctl.borrow_mut().plan.clear();
    }
    notes.push(format!("after m2: {}", picture(&mut w.sim, &ctl)));
    ctl.borrow_mut().mount_no = 3;
    let r = match St::mounted(hk(&mut w.sim, &ctl)) {
        Ok(mut fs) => check(&mut fs, &w.o, "m3"),
        Err(e) => Err(format!("m3 refused: {e:?}")),
    };
    match r {
        Ok(()) => Ok(notes.join("\n    ")),
        Err(e) => Err(format!(
            "seed {seed} warm {warm_syncs} m2fail {mount2_fail}: {e}\n    {}",
            notes.join("\n    ")
        )),
    }
}

#[test]
fn s45b_spare_hides_behind_two_checkpoints() {
    let mut fails = Vec::new();
    let mut runs = 0;
    for seed in 1..=env("B_SEEDS", 4u64) {
        for warm in 0..=env("B_WARM", 30u32) {
            runs += 1;
            match spare_choice_case(seed, warm, true) {
                Ok(n) => {
                    if env("B_VERBOSE", 0u32) == 1 {
                        println!("ok seed {seed} warm {warm}:\n    {n}");
                    }
                }
                Err(e) => fails.push(e),
            }
        }
    }
    println!(
        "spare choice: {runs} runs, {} lost acknowledged writes",
        fails.len()
    );
    for f in fails.iter().take(env("B_SHOW", 2usize)) {
        println!("FAIL: {f}");
    }
    assert!(fails.is_empty());
}

/// Salvage and repair after the new `MediaLoss`. A session syncs until a marked
/// checkpoint `C` has acknowledged writes in its window, then the power goes. At the
/// next mounts `C` (and, with `marker_too`, its marker) reads uncorrectable (a
/// transient read error: it heals at mount 6). A normal mount refuses (lost-marker
/// rule, or the marker rule). Then: a salvage mount, a repair mount (both while the
/// pages do not read), and a normal mount once they read again. Returns what each
/// shows: acknowledged writes missing, and what `salvage_report` says.
fn damaged_after_loss(seed: u64, marker_too: bool) -> Result<Vec<String>, String> {
    let mut w = base(seed, 300, 1);
    let ctl = ctl_for(&w.ckpt, 1);
    let mut rng = Rng(seed | 1);
    let mut notes = Vec::new();
    let g = w.sim.geometry();
    let c_last;
    {
        let mut fs = St::mounted(hk(&mut w.sim, &ctl)).map_err(|e| format!("m1: {e:?}"))?;
        settle(&mut fs, &mut w.o, "m1")?;
        // Syncs until a checkpoint lands, then one more sync that writes none.
        let mut found = None;
        for _ in 0..200 {
            let before = ctl.borrow().log.len();
            burst2(&mut fs, &mut w.o, &mut rng, 3).map_err(|e| format!("m1 burst: {e:?}"))?;
            let after = ctl.borrow().log.len();
            if after > before {
                found = ctl.borrow().log.last().cloned();
            } else if found.is_some() {
                break;
            }
        }
        c_last = found.ok_or("no checkpoint")?;
        // dropped: unclean
    }
    let cp = g.page(BlockAddr(c_last.block), c_last.page);
    let mp = g.page(BlockAddr(c_last.block), c_last.page + 1);
    if w.sim.page_state(mp).programs == 0 {
        return Err("no marker after the checkpoint".into());
    }
    {
        let mut c = ctl.borrow_mut();
        c.sick
            .insert(cp.0, Sick::UnreadableAt { from: 2, until: 6 });
        if marker_too {
            c.sick
                .insert(mp.0, Sick::UnreadableAt { from: 2, until: 6 });
        }
    }
    notes.push(format!(
        "C{} blk {} pg {} unreadable{}",
        c_last.seq,
        c_last.block,
        c_last.page,
        if marker_too { " with its marker" } else { "" }
    ));
    ctl.borrow_mut().mount_no = 2;
    match St::mounted(hk(&mut w.sim, &ctl)) {
        Ok(mut fs) => notes.push(format!(
            "normal mount ok: {:?}",
            check(&mut fs, &w.o, "normal")
        )),
        Err(e) => notes.push(format!("normal mount: {e:?}")),
    }
    let report = |fs: &St<'_>| {
        let r = fs.salvage_report();
        format!(
            "report: unreadable {:?} rolled_back {:?} to_checkpoint {} more {}",
            r.unreadable_pages(),
            r.rolled_back(),
            r.to_checkpoint(),
            r.more()
        )
    };
    {
        let mut fs = St::new(hk(&mut w.sim, &ctl), cfg(), Default::default());
        match fs.mount_damaged(oftl::Damaged::Salvage) {
            Ok(()) => notes.push(format!(
                "salvage: {:?}; {}",
                check(&mut fs, &w.o, "salvage").err(),
                report(&fs)
            )),
            Err(e) => notes.push(format!("salvage: {e:?}")),
        }
    }
    ctl.borrow_mut().mount_no = 3;
    {
        let mut fs = St::new(hk(&mut w.sim, &ctl), cfg(), Default::default());
        match fs.mount_damaged(oftl::Damaged::Repair) {
            Ok(()) => notes.push(format!(
                "repair: {:?}; {}",
                check(&mut fs, &w.o, "repair").err(),
                report(&fs)
            )),
            Err(e) => notes.push(format!("repair: {e:?}")),
        }
    }
    ctl.borrow_mut().mount_no = 7;
    match St::mounted(hk(&mut w.sim, &ctl)) {
        Ok(mut fs) => notes.push(format!(
            "healed mount: {:?}",
            check(&mut fs, &w.o, "healed").err()
        )),
        Err(e) => notes.push(format!("healed mount: {e:?}")),
    }
    Ok(notes)
}

/// Prints what salvage and repair do after the lost-marker `MediaLoss` (marker_too)
/// and after the marker rule's (`C` alone). Fails when a damaged mount shows an
/// acknowledged write rolled back with an empty report (nothing named, no
/// `to_checkpoint`), or a healed normal mount after a repair misses one.
#[test]
fn s45b_salvage_repair_after_lost_marker() {
    let mut bad = Vec::new();
    for seed in 1..=env("B_SEEDS", 4u64) {
        for marker_too in [true, false] {
            match damaged_after_loss(seed, marker_too) {
                Ok(n) => {
                    println!(
                        "seed {seed} marker_too {marker_too}:\n    {}",
                        n.join("\n    ")
                    );
                    let silent = n.iter().any(|l| {
                        (l.starts_with("salvage: Some") || l.starts_with("repair: Some"))
                            && l.contains("rolled_back []")
                            && l.contains("to_checkpoint false")
                    });
                    let healed_lost = n.iter().any(|l| l.starts_with("healed mount: Some"));
                    if silent || healed_lost {
                        bad.push(format!("seed {seed} marker_too {marker_too}"));
                    }
                }
                Err(e) => println!("seed {seed} marker_too {marker_too}: setup: {e}"),
            }
        }
    }
    println!("silent rollbacks by a damaged mount, or losses it made permanent: {bad:?}");
    assert!(bad.is_empty());
}

/// `failed_here` with three good checkpoint blocks: a clean mount (loaded block `B`,
/// spare `A`), one block retired; the first change's first attempt (appended in `B`)
/// and second (in the last block `X`) land but report failure. No block is left:
/// the last resort may not append in `X` after a failed attempt (stop 45), and
/// `release_spare` gives up at once because the current block is no longer the
/// durable one, so the session turns read-only with `A` still kept. Stop 44's code
/// appended the third attempt in `X` and the sync succeeded. Returns the sync's result.
fn failed_here_case(seed: u64) -> Result<String, String> {
    let mut w = base(seed, 300, 0);
    let ctl = ctl_for(&w.ckpt, 1);
    let mut rng = Rng(seed | 1);
    // Retire an unused checkpoint block (one that holds nothing).
    let g = w.sim.geometry();
    let empty = w
        .ckpt
        .iter()
        .copied()
        .rev()
        .find(|&b| w.sim.page_state(g.page(BlockAddr(b), 0)).programs == 0)
        .ok_or("no empty checkpoint block")?;
    w.sim.mark_bad(BlockAddr(empty)).unwrap();
    let before = picture(&mut w.sim, &ctl);
    ctl.borrow_mut().plan.extend([Act::LandFail, Act::LandFail]);
    let mut fs = St::mounted(hk(&mut w.sim, &ctl)).map_err(|e| format!("mount: {e:?}"))?;
    let r = burst2(&mut fs, &mut w.o, &mut rng, 2);
    let h = fs.health();
    drop(fs);
    let after = picture(&mut w.sim, &ctl);
    // The next session (no faults) works again.
    ctl.borrow_mut().mount_no = 2;
    let next = St::mounted(hk(&mut w.sim, &ctl))
        .map_err(|e| format!("{e:?}"))
        .and_then(|mut fs| {
            let h = fs.health();
            burst2(&mut fs, &mut w.o, &mut rng, 2).map_err(|e| format!("{e:?} {h:?}"))?;
            check(&mut fs, &w.o, "next")
        });
    let after = format!("{after}\n    next session: {next:?}");
    match r {
        Ok(()) => Ok(format!("sync ok {h:?}")),
        Err(e) => Err(format!(
            "seed {seed}: sync {e:?}, {h:?}\n    before {before}\n    after  {after}"
        )),
    }
}

#[test]
fn s45b_failed_here_three_blocks() {
    let mut fails = Vec::new();
    let seeds = env("B_SEEDS", 4u64);
    for seed in 1..=seeds {
        if let Err(e) = failed_here_case(seed) {
            fails.push(e);
        }
    }
    println!(
        "failed_here with 3 good checkpoint blocks: {seeds} runs, {} sessions read-only",
        fails.len()
    );
    for f in fails.iter().take(2) {
        println!("FAIL: {f}");
    }
    assert!(fails.is_empty());
}

/// Cut sweeps (every op, every cut kind) over episodes whose checkpoint programs fail
/// at random (land nothing / land and report failure), with erase failures on
/// checkpoint blocks, and with one checkpoint block unreadable at the episode's mount.
#[test]
fn s45b_cut_sweep_faulty() {
    let seeds = env("B_SEEDS", 2u64);
    let first = env("B_FIRST", 1u64);
    let mut t = Tally::default();
    for seed in first..first + seeds {
        let w = base(seed, 300, 2 + (seed % 3) as u32);
        for (i, (faults, erase_fail, flake)) in [
            (Some((25, 15)), 0, None),
            (Some((15, 25)), 10, None),
            (Some((20, 20)), 0, Some(seed as usize)),
            (None, 0, Some(seed as usize + 1)),
        ]
        .into_iter()
        .enumerate()
        {
            for unmount in [true, false] {
                let ep = Episode {
                    seed: seed * 100 + i as u64 * 10 + unmount as u64,
                    bursts: 4,
                    unmount,
                    faults,
                    erase_fail,
                    flake_block: flake,
                    how: 0,
                };
                sweep(
                    &w,
                    ep,
                    &format!("seed {seed} faulty {i} unmount {unmount}"),
                    &mut t,
                );
            }
        }
    }
    assert_eq!(t.report("cut sweep faulty"), 0);
}
