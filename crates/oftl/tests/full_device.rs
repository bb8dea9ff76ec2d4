//! Adversarial tests from a review: a full device (writes failing `NoSpace`) with power
//! cuts everywhere (also during each recovery), grown bad blocks shrinking the reserve,
//! a small cache with hundreds of objects, GC-heavy overwrites with cuts during small
//! `gc_step`s; all checked against a `BTreeMap` model. After every cut the store must
//! hold the state before or after the interrupted operation, and mount.
//!
//! Regressions: deletes refused for capacity on a full device; the recovery reserve not
//! kept after a recovery (the next crash left the device unmountable); a stale GC victim
//! resumed after its block was reused (an unrelated object lost). `sweep` (ignored) runs
//! more seeds: `REVIEW_SEEDS=100..180 REVIEW_MODES=gt cargo test -p oftl --test
//! full_device sweep -- --ignored`.

use std::collections::BTreeMap;

use nand_hal::sim::{profile, CutKind, FaultPlan, HeapStorage, PowerCut, SimNand, TornMode};
use nand_hal::BlockAddr;
use oftl::{Config, Greedy, ObjKind, Oftl, SpacePolicy, WriteError};

use crate::common;
use common::fill::{check, pat};
use common::lifecycle::Lifecycle;
use common::Rng;

type Sim = SimNand<HeapStorage>;
type Fs<'a, P, const C: usize> = Oftl<&'a mut Sim, 2048, 64, C, 2, P>;

const PAGE: u64 = 2048;

fn cfg() -> Config {
    Config {
        window_blocks: 6,
        format_id: 1,
        ..Default::default()
    }
}

type Model = BTreeMap<u32, Vec<u8>>;

fn matches<P: SpacePolicy, const C: usize>(fs: &mut Fs<'_, P, C>, model: &Model) -> bool {
    let listed: Vec<u32> = match fs.objects().collect::<Result<Vec<_>, _>>() {
        Ok(v) => v,
        Err(_) => return false,
    };
    if listed != model.keys().copied().collect::<Vec<_>>() {
        return false;
    }
    for (&id, d) in model {
        if fs.size(id).ok() != Some(d.len() as u64) {
            return false;
        }
        let mut buf = vec![0u8; d.len()];
        if fs.read(id, 0, &mut buf).ok() != Some(d.len()) || buf != *d {
            return false;
        }
    }
    true
}

fn diff<P: SpacePolicy, const C: usize>(fs: &mut Fs<'_, P, C>, model: &Model) -> String {
    let listed = fs.objects().collect::<Result<Vec<_>, _>>();
    let mut s = format!(
        "listed {:?} (model {} objects)",
        listed.as_ref().map(|v| v.len()),
        model.len()
    );
    for (&id, d) in model {
        let size = fs.size(id);
        let mut buf = vec![0u8; d.len()];
        let r = fs.read(id, 0, &mut buf);
        if size.as_ref().ok() != Some(&(d.len() as u64)) || r.is_err() || buf != *d {
            s += &format!("; obj {id}: size {size:?} want {}, read {r:?}", d.len());
            let mut bad = vec![];
            for (i, c) in d.chunks(PAGE as usize).enumerate() {
                let mut b = vec![0u8; c.len()];
                match fs.read(id, i as u64 * PAGE, &mut b) {
                    Ok(_) if b == c => {}
                    r => bad.push((i, r.map(|_| "differs"))),
                }
            }
            s += &format!(" bad pages {bad:?}");
        }
    }
    s
}

const KINDS: [CutKind; 3] = [
    CutKind::Clean,
    CutKind::Torn(TornMode::SomeBits),
    CutKind::Torn(TornMode::MostBits),
];

/// Mounts after a crash, with up to `$cut_tries` power cuts armed during recovery.
macro_rules! recover {
    ($sim:expr, $policy:expr, $rng:expr, $cut_tries:expr, $ctx:expr) => {{
        let mut tries = 0;
        loop {
            $sim.power_on();
            tries += 1;
            if tries <= $cut_tries {
                let plan = FaultPlan {
                    seed: $rng.next(),
                    cut: Some(PowerCut {
                        at_op: $rng.below(60),
                        kind: KINDS[$rng.below(3) as usize],
                    }),
                    faults: Default::default(),
                };
                if std::env::var("REVIEW_TRACE").is_ok() {
                    eprintln!("{}: try {tries}: armed {:?}", $ctx, plan.cut);
                }
                $sim.arm(plan);
            } else {
                $sim.disarm();
            }
            match Fs::<P, C>::mounted_with(&mut $sim, $policy.clone()) {
                Ok(mut f) if f.flash().is_powered() => {
                    f.flash_mut().disarm();
                    if std::env::var("REVIEW_TRACE").is_ok() {
                        let fr = free_blocks(&f);
                        let win = f
                            .blocks()
                            .iter()
                            .filter(|b| b.state() == oftl::BlockState::Window)
                            .count();
                        eprintln!(
                            "{}: try {tries}: mounted, {fr} free blocks, {win} window blocks",
                            $ctx
                        );
                    }
                    break f;
                }
                Ok(f) => {
                    if std::env::var("REVIEW_TRACE").is_ok() {
                        eprintln!("{}: try {tries}: cut during recovery (Ok)", $ctx);
                    }
                    drop(f)
                }
                Err(e) => {
                    if std::env::var("REVIEW_TRACE").is_ok() {
                        eprintln!("{}: try {tries}: failed ({e:?})", $ctx);
                    }
                    if $sim.is_powered() {
                        $sim.disarm();
                        let again = Fs::<P, C>::mounted_with(&mut $sim, $policy.clone()).err();
                        panic!(
                            "{}: mount failed without a cut (try {tries}): {e:?}; again: \
                             {again:?} (last misuse {:?}, bad blocks {:?})",
                            $ctx,
                            $sim.last_misuse(),
                            (0..64)
                                .filter(|&b| $sim.block_state(BlockAddr(b)).flags
                                    & nand_hal::sim::BlockState::BAD
                                    != 0)
                                .collect::<Vec<_>>()
                        );
                    }
                }
            }
            assert!(tries < 100, "{}: recovery never finished", $ctx);
        }
    }};
}

fn free_blocks<P: SpacePolicy, const C: usize>(fs: &Fs<'_, P, C>) -> usize {
    fs.blocks()
        .iter()
        .filter(|b| b.state() == oftl::BlockState::Free)
        .count()
}

/// `model` plus one new empty object with a larger id, if that is the store's state.
fn created_empty<P: SpacePolicy, const C: usize>(
    fs: &mut Fs<'_, P, C>,
    model: &Model,
) -> Option<Model> {
    let listed: Vec<u32> = fs.objects().collect::<Result<Vec<_>, _>>().ok()?;
    let new = *listed.last()?;
    if model.keys().last().is_some_and(|&m| m >= new) {
        return None;
    }
    let mut alt = model.clone();
    alt.insert(new, vec![]);
    matches(fs, &alt).then_some(alt)
}

#[derive(Clone, Copy)]
struct Opts {
    steps: u32,
    /// Objects kept alive at most (creates stop above it).
    live_target: usize,
    /// Largest write end in pages.
    max_pages: u64,
    /// 1 in `cut_every` operations get a power cut armed.
    cut_every: u64,
    /// Cuts armed per recovery at most.
    recovery_cuts: u32,
    /// 1 in `bad_every` operations get a grown bad block armed (0: never).
    bad_every: u64,
    /// Probability (percent) that a step is a delete.
    delete_pct: u64,
    /// End by deleting everything and writing again (a full device must make room).
    delete_all: bool,
}

/// The model-based harness. Returns (NoSpace failures, cuts, poisonings, whether the
/// store ended read-only).
fn run<P: SpacePolicy + Clone, const C: usize>(
    policy: P,
    seed: u64,
    o: Opts,
) -> (u32, u32, u32, bool) {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut model: Model = BTreeMap::new();
    let mut fs = Fs::<P, C>::formatted_with(&mut sim, cfg(), policy.clone()).unwrap();
    let cap = fs.capacity_pages();
    let (mut nospace, mut cuts, mut poison) = (0u32, 0u32, 0u32);
    let mut max_cost = 0;
    for step in 0..o.steps {
        let ctx = format!("seed {seed} step {step}");
        let live: Vec<u32> = model.keys().copied().collect();
        let before = model.clone();
        if rng.below(o.cut_every) == 0 {
            let cut = PowerCut {
                at_op: rng.below(12),
                kind: KINDS[rng.below(3) as usize],
            };
            let mut cut = cut;
            if let Ok(v) = std::env::var("REVIEW_CUT_AT") {
                // "step:op" overrides one cut's position (diagnostics).
                let (st, op) = v.split_once(':').unwrap();
                if st.parse::<u32>().unwrap() == step {
                    cut.at_op = op.parse().unwrap();
                }
            }
            if std::env::var("REVIEW_TRACE").is_ok() {
                eprintln!("{ctx}: armed {cut:?}");
            }
            fs.flash_mut().arm(FaultPlan {
                seed: seed ^ (step as u64) << 4,
                cut: Some(cut),
                faults: Default::default(),
            });
        }
        if o.bad_every != 0 && rng.below(o.bad_every) == 0 {
            let b = BlockAddr(2 + rng.below(62) as u32);
            if rng.below(2) == 0 {
                fs.flash_mut().fail_next_program(b);
            } else {
                fs.flash_mut().fail_next_erase(b);
            }
        }
        let r = rng.below(100);
        let mut after = model.clone();
        let mut op = String::new();
        let (p0, e0) = (fs.flash().counters().programs, fs.flash().counters().erases);
        let res: Result<(), WriteError<_>> = (|| {
            if live.is_empty() || (r < 20 && live.len() < o.live_target) {
                op = "create".into();
                let id = fs.create(ObjKind::Object)?;
                after.insert(id, vec![]);
                // Fill the new object right away (two ops: the create is acknowledged).
                model.insert(id, vec![]);
                let len = 1 + rng.below(o.max_pages * PAGE) as usize;
                let d: Vec<u8> = (0..len).map(|i| (i as u32 ^ id ^ step) as u8).collect();
                op = format!("create {id} + write {len}");
                after.insert(id, d.clone());
                fs.write(id, 0, &d)?;
                fs.flush(id)?;
            } else if r < 20 + o.delete_pct {
                let id = live[rng.below(live.len() as u64) as usize];
                op = format!("delete {id}");
                after.remove(&id);
                fs.delete(id)?;
            } else if r < 80 {
                let id = live[rng.below(live.len() as u64) as usize];
                let end = o.max_pages * PAGE;
                let off = rng.below(end) as usize;
                let len = 1 + rng.below(end - off as u64) as usize;
                let b = rng.next() as u8;
                let d: Vec<u8> = (0..len).map(|i| b.wrapping_add(i as u8)).collect();
                op = format!("write {id} @{off}+{len}");
                let m = after.get_mut(&id).unwrap();
                if m.len() < off + len {
                    m.resize(off + len, 0);
                }
                m[off..off + len].copy_from_slice(&d);
                fs.write(id, off as u64, &d)?;
                fs.flush(id)?;
            } else if r < 88 {
                let id = live[rng.below(live.len() as u64) as usize];
                let size = rng.below(model[&id].len() as u64 + PAGE) as usize;
                op = format!("truncate {id} {size}");
                after.get_mut(&id).unwrap().resize(size, 0);
                fs.truncate(id, size as u64)?;
            } else if r < 97 {
                op = "gc".into();
                fs.gc_step(1 + rng.below(6) as u32)?;
            } else {
                op = "sync".into();
                fs.sync()?;
            }
            Ok(())
        })();
        let ctx = format!(
            "{ctx} [{op}] -> {res:?} (used {} of {cap}, {} free blocks)",
            fs.used_pages(),
            free_blocks(&fs)
        );
        let cut = !fs.flash().is_powered();
        fs.flash_mut().disarm();
        let (dp, de) = (
            fs.flash().counters().programs - p0,
            fs.flash().counters().erases - e0,
        );
        max_cost = max_cost.max(dp);
        if std::env::var("REVIEW_TRACE").is_ok() {
            let st = fs.stats();
            eprintln!(
                "{ctx}: {dp} programs, {de} erases; checkpoints {} relocated {}",
                st.checkpoints, st.relocated_pages
            );
        }
        assert!(
            dp <= 700 && de <= 48,
            "{ctx}: one operation cost {dp} programs and {de} erases"
        );
        // `before` may have gained the created (empty) object.
        let before2 = model.clone();
        if !cut {
            match res {
                Ok(()) => {
                    model = after;
                    continue;
                }
                Err(WriteError::NoSpace) => {
                    nospace += 1;
                    // NoSpace: nothing changed (unless the handle was poisoned).
                    let poisoned = fs.sync() == Err(WriteError::Poisoned);
                    if !poisoned {
                        // A write that went into the write buffer and failed to flush
                        // stays buffered (visible, not durable).
                        // Crash then: the store must come back as before or after.
                        let buffered = (op.starts_with("write") || op.starts_with("create"))
                            && matches(&mut fs, &after);
                        if !buffered {
                            assert!(
                                matches(&mut fs, &before2),
                                "{ctx}: NoSpace changed state: {}",
                                diff(&mut fs, &before2)
                            );
                            model = before2;
                            continue;
                        }
                    } else {
                        // `Fault::Exhausted` surfaces as `NoSpace` but poisons.
                        poison += 1;
                        if std::env::var("REVIEW_TRACE").is_ok() {
                            eprintln!("{ctx}: NoSpace poisoned the handle");
                        }
                    }
                }
                Err(WriteError::Flash(_)) | Err(WriteError::Poisoned) => {
                    poison += 1;
                }
                Err(WriteError::ReadOnly) => {
                    // Too many grown bad blocks: read-only, nothing changed, everything
                    // still readable; writes and deletes refused with their own error.
                    assert!(
                        matches!(fs.health(), oftl::Health::ReadOnly(_)),
                        "{ctx}: ReadOnly from a writable store"
                    );
                    assert!(
                        matches(&mut fs, &before2),
                        "{ctx}: read-only store lost data: {}",
                        diff(&mut fs, &before2)
                    );
                    if let Some(&id) = before2.keys().next() {
                        assert_eq!(fs.delete(id), Err(WriteError::ReadOnly));
                        assert_eq!(fs.write(id, 0, b"x"), Err(WriteError::ReadOnly));
                    }
                    return (nospace, cuts, poison, true);
                }
                Err(e) => panic!("{ctx}: unexpected error {e:?} without a cut"),
            }
        } else {
            cuts += 1;
        }
        drop(fs);
        let c = if cut { o.recovery_cuts } else { 0 };
        fs = recover!(sim, policy, rng, c, ctx);
        if let oftl::Health::ReadOnly(why) = fs.health() {
            // Mounted read-only (too many grown bad blocks): the acknowledged state
            // must read back; nothing more can be written.
            assert!(
                matches(&mut fs, &after) || matches(&mut fs, &before2) || matches(&mut fs, &before),
                "{ctx}: read-only mount ({why:?}) lost data"
            );
            return (nospace, cuts, poison, true);
        }
        if matches(&mut fs, &after) {
            model = after;
        } else if matches(&mut fs, &before2) {
            model = before2;
        } else if matches(&mut fs, &before) {
            model = before;
        } else if let Some(alt) = created_empty(&mut fs, &before2) {
            // A create cut short may have made the next object.
            model = alt;
        } else {
            panic!(
                "{ctx}: after recovery neither before nor after state: vs after: {} | vs before: {}",
                diff(&mut fs, &after),
                diff(&mut fs, &before2)
            );
        }
        // Crash right after recovery (no new operation), and recover again.
        if rng.below(4) == 0 {
            drop(fs);
            fs = recover!(sim, policy, rng, o.recovery_cuts, ctx);
            assert!(
                matches(&mut fs, &model),
                "{ctx}: second crash changed state: {}",
                diff(&mut fs, &model)
            );
        }
    }
    assert!(matches(&mut fs, &model), "end: {}", diff(&mut fs, &model));
    if std::env::var("REVIEW_TRACE").is_ok() {
        eprintln!("seed {seed}: most programs in one operation: {max_cost}");
    }
    if !o.delete_all || std::env::var("REVIEW_SKIP_FINAL").is_ok() {
        return (nospace, cuts, poison, false);
    }
    // Delete everything: a full-size write must fit again.
    let ids: Vec<u32> = model.keys().copied().collect();
    let n = ids.len();
    for (i, id) in ids.into_iter().enumerate() {
        let (used, free) = (fs.used_pages(), free_blocks(&fs));
        if let Err(e) = fs.delete(id) {
            panic!(
                "seed {seed}: delete {i} of {n} (obj {id}) failed {e:?}: {used} of {cap} pages \
                 used, {free} free blocks"
            );
        }
    }
    fs.sync().unwrap();
    let id = fs.create(ObjKind::Object).unwrap();
    let want = (cap / 2).min(48) * PAGE;
    let d: Vec<u8> = (0..want as usize).map(|i| (i * 7) as u8).collect();
    fs.write(id, 0, &d).unwrap();
    fs.flush(id).unwrap();
    drop(fs);
    let mut fs = Fs::<P, C>::mounted_with(&mut sim, policy).unwrap();
    let mut buf = vec![0u8; d.len()];
    assert_eq!(fs.read(id, 0, &mut buf).unwrap(), d.len());
    assert!(buf == d);
    drop(fs);
    assert_eq!(sim.counters().misuse, 0, "misuse");
    (nospace, cuts, poison, false)
}

fn full_opts() -> Opts {
    Opts {
        steps: 1200,
        live_target: 60,
        max_pages: 24,
        cut_every: 5,
        recovery_cuts: 3,
        bad_every: 0,
        delete_pct: 4,
        delete_all: false,
    }
}

#[test]
fn full_device_cuts_greedy() {
    for seed in 1..4 {
        let (ns, cuts, _, _) = run::<_, 4>(Greedy::DEFAULT, seed, full_opts());
        assert!(ns > 0 && cuts > 0, "seed {seed}: nospace {ns} cuts {cuts}");
    }
}

#[test]
fn full_device_cuts_para() {
    for seed in 11..14 {
        let (ns, cuts, _, _) = run::<_, 4>(oftl::ParaGc::<64>::DEFAULT, seed, full_opts());
        assert!(ns > 0 && cuts > 0, "seed {seed}: nospace {ns} cuts {cuts}");
    }
}

#[test]
fn full_device_grown_bad_blocks() {
    // About one grown bad block per 200 operations (a few blocks over the run); a third
    // of the part going bad is beyond the reserve, see `many_grown_bad_blocks`.
    for seed in 21..24 {
        let o = Opts {
            bad_every: 200,
            ..full_opts()
        };
        run::<_, 4>(Greedy::DEFAULT, seed, o);
        run::<_, 4>(oftl::ParaGc::<64>::DEFAULT, seed + 100, o);
    }
}

#[test]
fn tiny_cache_many_objects() {
    for seed in 31..33 {
        let o = Opts {
            steps: 1500,
            live_target: 400,
            max_pages: 2,
            cut_every: 8,
            recovery_cuts: 2,
            bad_every: 0,
            delete_pct: 6,
            delete_all: false,
        };
        run::<_, 4>(Greedy::DEFAULT, seed, o);
        run::<_, 4>(oftl::ParaGc::<64>::DEFAULT, seed + 100, o);
    }
}

#[test]
fn gc_heavy_overwrite_cuts() {
    for seed in 41..44 {
        let o = Opts {
            cut_every: 4,
            ..gc_opts()
        };
        run::<_, 4>(oftl::ParaGc::<64>::DEFAULT, seed, o);
        run::<_, 4>(Greedy::DEFAULT, seed + 100, o);
    }
}

/// Fills the device with objects (whole and partial pages) until writes fail with
/// `NoSpace`, then deletes them: deleting must always succeed and make room again,
/// also after a remount.
fn fill_then_delete<P: SpacePolicy + Clone>(policy: P, seed: u64) {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
    let mut rng = Rng(seed | 1);
    let mut fs = Fs::<P, 4>::formatted_with(&mut sim, cfg(), policy.clone()).unwrap();
    let cap = fs.capacity_pages();
    let mut ids = vec![];
    let mut fails = 0;
    while fails < 20 {
        let id = match fs.create(ObjKind::Object) {
            Ok(id) => id,
            Err(WriteError::NoSpace) => {
                fails += 1;
                continue;
            }
            Err(e) => panic!("create: {e:?}"),
        };
        ids.push(id);
        let len = 1 + rng.below(6 * PAGE) as usize;
        let d = vec![id as u8; len];
        let r = fs.write(id, 0, &d).and_then(|()| fs.flush(id));
        match r {
            Ok(()) => {}
            Err(WriteError::NoSpace) => fails += 1,
            Err(e) => panic!("write: {e:?}"),
        }
    }
    fs.unmount().unwrap();
    let mut fs = Fs::<P, 4>::mounted_with(&mut sim, policy).unwrap();
    let n = ids.len();
    for (i, id) in ids.into_iter().enumerate() {
        let (used, free) = (fs.used_pages(), free_blocks(&fs));
        if let Err(e) = fs.delete(id) {
            panic!(
                "seed {seed}: delete {i} of {n} (obj {id}) failed {e:?}: {used} of {cap} pages \
                 used, {free} free blocks"
            );
        }
    }
    let id = fs.create(ObjKind::Object).unwrap();
    fs.write(id, 0, &vec![7u8; (cap / 2) as usize * PAGE as usize])
        .unwrap();
    fs.flush(id).unwrap();
    drop(fs);
    assert_eq!(sim.counters().misuse, 0);
}

#[test]
fn delete_on_full_device_greedy() {
    for seed in 1..4 {
        fill_then_delete(Greedy::DEFAULT, seed);
    }
}

#[test]
fn delete_on_full_device_para() {
    for seed in 1..4 {
        fill_then_delete(oftl::ParaGc::<64>::DEFAULT, seed);
    }
}

#[test]
fn tiny_cache_many_objects_no_recovery_cuts() {
    for seed in 31..35 {
        let o = Opts {
            steps: 1500,
            live_target: 400,
            max_pages: 2,
            cut_every: 8,
            recovery_cuts: 0,
            bad_every: 0,
            delete_pct: 6,
            delete_all: false,
        };
        run::<_, 4>(Greedy::DEFAULT, seed, o);
    }
}

#[test]
fn full_device_cuts_no_recovery_cuts() {
    for seed in 51..56 {
        let o = Opts {
            recovery_cuts: 0,
            live_target: 200,
            max_pages: 4,
            ..full_opts()
        };
        run::<_, 4>(Greedy::DEFAULT, seed, o);
    }
}

/// Many small objects until `NoSpace`, then crashes (the store dropped, no power cut)
/// after failing operations, over and over: every mount must succeed and hold the
/// acknowledged data.
fn full_then_crash_loop<P: SpacePolicy + Clone>(policy: P, seed: u64, rounds: u32, cut_ops: u64) {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
    let mut rng = Rng(seed | 1);
    let mut model: Model = BTreeMap::new();
    let mut fs = Fs::<P, 4>::formatted_with(&mut sim, cfg(), policy.clone()).unwrap();
    let mut fails = 0;
    while fails < 30 {
        let Ok(id) = fs.create(ObjKind::Object) else {
            fails += 1;
            continue;
        };
        model.insert(id, vec![]);
        let d = vec![id as u8; 1 + rng.below(2 * PAGE) as usize];
        match fs.write(id, 0, &d).and_then(|()| fs.flush(id)) {
            Ok(()) => {
                model.insert(id, d);
            }
            Err(WriteError::NoSpace) => {
                fails += 1;
                // Not flushed: drop it by a remount below.
                fs.unmount().ok();
                fs = Fs::<P, 4>::mounted_with(&mut sim, policy.clone()).unwrap();
                if !matches(&mut fs, &model) {
                    model.insert(id, d);
                    assert!(matches(&mut fs, &model));
                }
            }
            Err(e) => panic!("{e:?}"),
        }
    }
    let mut min_free = usize::MAX;
    for round in 0..rounds {
        // An operation that may fail, then a crash.
        let ids: Vec<u32> = model.keys().copied().collect();
        let id = ids[rng.below(ids.len() as u64) as usize];
        let mut after = model.clone();
        if cut_ops > 0 {
            fs.flash_mut().arm(FaultPlan {
                seed: rng.next(),
                cut: Some(PowerCut {
                    at_op: rng.below(cut_ops),
                    kind: KINDS[rng.below(3) as usize],
                }),
                faults: Default::default(),
            });
        }
        let op = rng.below(3);
        let r = match op {
            0 => {
                let size = rng.below(2 * PAGE) as usize;
                after.get_mut(&id).unwrap().resize(size, 0);
                fs.truncate(id, size as u64)
            }
            1 => fs.create(ObjKind::Object).map(|n| {
                after.insert(n, vec![]);
            }),
            _ => {
                let d = vec![round as u8; 100];
                let m = after.get_mut(&id).unwrap();
                if m.len() < 100 {
                    m.resize(100, 0);
                }
                m[..100].copy_from_slice(&d);
                fs.write(id, 0, &d).and_then(|()| fs.flush(id))
            }
        };
        let cut = !fs.flash().is_powered();
        match r {
            Ok(()) => model = after.clone(),
            Err(WriteError::NoSpace) => {}
            Err(_) if cut => {}
            Err(e) => panic!("round {round}: {e:?}"),
        }
        drop(fs);
        sim.power_on();
        sim.disarm();
        fs = match Fs::<P, 4>::mounted_with(&mut sim, policy.clone()) {
            Ok(f) => f,
            Err(e) => panic!("seed {seed} round {round}: mount after a crash failed: {e:?} (min free blocks after earlier mounts {min_free})"),
        };
        min_free = min_free.min(free_blocks(&fs));
        if op == 1 && cut && r.is_err() {
            // A create cut short may have landed (the cut came after its commit): its
            // object is the one id past every modelled one, empty.
            let listed: Vec<u32> = fs.objects().collect::<Result<_, _>>().unwrap();
            let new: Vec<u32> = listed
                .into_iter()
                .filter(|id| !model.contains_key(id))
                .collect();
            if let [n] = new[..] {
                assert!(
                    model.keys().all(|&k| k < n),
                    "round {round}: object {n} appeared"
                );
                after.insert(n, vec![]);
            }
        }
        if !matches(&mut fs, &model) {
            model = after;
            assert!(
                matches(&mut fs, &model),
                "round {round}: {}",
                diff(&mut fs, &model)
            );
        }
    }
    drop(fs);
    assert_eq!(sim.counters().misuse, 0);
}

#[test]
fn full_then_crash_loop_greedy() {
    for seed in 1..4 {
        full_then_crash_loop(Greedy::DEFAULT, seed, 60, 0);
        full_then_crash_loop(Greedy::DEFAULT, seed, 300, 8);
    }
}

#[test]
fn full_then_crash_loop_para() {
    for seed in 1..4 {
        full_then_crash_loop(oftl::ParaGc::<64>::DEFAULT, seed, 60, 0);
        full_then_crash_loop(oftl::ParaGc::<64>::DEFAULT, seed, 300, 8);
    }
}

/// Wider seed sweep (set `REVIEW_SEEDS=a..b`); skipped by default.
#[test]
#[ignore]
fn sweep() {
    let r = std::env::var("REVIEW_SEEDS").unwrap_or("100..110".into());
    let (a, b) = r.split_once("..").unwrap();
    let (a, b): (u64, u64) = (a.parse().unwrap(), b.parse().unwrap());
    let modes = std::env::var("REVIEW_MODES").unwrap_or("bgt".into());
    for seed in a..b {
        let bad = Opts {
            bad_every: 12,
            ..full_opts()
        };
        if modes.contains('b') {
            run::<_, 4>(Greedy::DEFAULT, seed, bad);
            run::<_, 4>(oftl::ParaGc::<64>::DEFAULT, seed, bad);
        }
        let gc = Opts {
            cut_every: 3,
            ..gc_opts()
        };
        if modes.contains('g') {
            run::<_, 4>(oftl::ParaGc::<64>::DEFAULT, seed, gc);
            run::<_, 4>(Greedy::DEFAULT, seed, gc);
        }
        let tiny = Opts {
            steps: 1500,
            live_target: 400,
            max_pages: 2,
            cut_every: 8,
            recovery_cuts: 0,
            bad_every: 0,
            delete_pct: 6,
            delete_all: false,
        };
        if modes.contains('t') {
            run::<_, 4>(oftl::ParaGc::<64>::DEFAULT, seed, tiny);
        }
    }
}

/// Many grown bad blocks (one armed every 12 operations) on a full device.
/// Past the threshold ([`Oftl::min_good_blocks`], or fewer than two good checkpoint
/// blocks) the store turns read-only: everything acknowledged still reads back, writes
/// and deletes fail with `ReadOnly`.
#[test]
fn many_grown_bad_blocks() {
    let o = Opts {
        bad_every: 12,
        ..full_opts()
    };
    let mut read_only = 0;
    let seeds = std::env::var("REVIEW_SEED")
        .map(|v| {
            let s: u64 = v.parse().unwrap();
            s..s + 1
        })
        .unwrap_or(100..104);
    for seed in seeds {
        read_only += run::<_, 4>(Greedy::DEFAULT, seed, o).3 as u32;
    }
    assert!(read_only > 0, "no run went read-only");
}

fn gc_opts() -> Opts {
    Opts {
        steps: 1500,
        live_target: 12,
        max_pages: 40,
        cut_every: 3,
        recovery_cuts: 3,
        bad_every: 0,
        delete_pct: 2,
        delete_all: false,
    }
}

/// A power cut during a large overwrite (GC-heavy, cuts during recovery too): another
/// object's pages must stay readable.
#[test]
fn big_overwrite_cut_keeps_other_objects_para() {
    run::<_, 4>(oftl::ParaGc::<64>::DEFAULT, 105, gc_opts());
}

#[test]
fn big_overwrite_cut_keeps_other_objects_greedy() {
    run::<_, 4>(Greedy::DEFAULT, 105, gc_opts());
}

/// A GC victim half collected by bounded idle steps, freed by a checkpoint (its other
/// pages overwritten), erased and filled again by a head, was resumed half-way: the
/// pages it skipped were taken for a wrong count and the block freed under live data
/// (an unrelated object lost after a power cut and a cut during recovery). Regression.
#[test]
fn stale_gc_victim_is_not_resumed() {
    let o = Opts {
        cut_every: 4,
        ..gc_opts()
    };
    run::<_, 4>(Greedy::DEFAULT, 143, o);
}

/// A device filled until writes fail (with cuts everywhere, also during recovery), then
/// every object deleted: every delete succeeds (the delete reserve), and a large write
/// fits again afterwards.
#[test]
fn full_device_delete_everything() {
    let o = Opts {
        delete_all: true,
        ..full_opts()
    };
    run::<_, 4>(Greedy::DEFAULT, 1, o);
}

/// Regression (independent review s36c): on a healthy TINY part with 512-byte metadata
/// units at the smallest window, filled to capacity and then rewritten in place, the
/// refused rewrites collected and checkpointed (about 370 programs each, 4,241 in one
/// call: `make_room` cycling between collections and fresh windows), their erases set
/// off static wear leveling (whole cold blocks moved, gaining nothing, in foreground
/// collection and in `gc_step`), and the pool sank below the floor deletes need: every
/// delete refused for good. Now a call stops after 8 fresh windows that add nothing to
/// the pool, and no collection moves a wholly valid block for wear while the pool is
/// below the growth floor. Each refused rewrite still collects (at capacity a retry
/// may go through: 9 of these 3,000 do).
#[test]
fn refused_rewrites_at_capacity_are_bounded_and_deletes_still_work() {
    type Small<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 2, Greedy, 512, 0>;
    let mut s = SimNand::heap(profile::TINY, FaultPlan::seeded(4));
    let cfg = Config {
        window_blocks: 4,
        format_id: 7,
        ..Default::default()
    };
    let mut fs: Small<'_> = Oftl::new(&mut s, cfg, Greedy::DEFAULT);
    fs.format().unwrap();
    let mut model = Model::new();
    for i in 0..100_000u32 {
        let Ok(o) = fs.create(ObjKind::Object) else {
            break;
        };
        let d = pat(i, 8 * PAGE as usize);
        if fs.write(o, 0, &d).and_then(|()| fs.flush(o)).is_err() {
            fs.delete(o).unwrap();
            break;
        }
        model.insert(o, d);
    }
    let objs: Vec<u32> = model.keys().copied().collect();
    assert!(objs.len() > 40, "{} objects", objs.len());
    let mut rng = Rng(5);
    let (mut ok, mut refused, mut worst, mut spent) = (0u32, 0u32, 0u64, 0u64);
    let cost = |fs: &Small<'_>| fs.stats().pages_programmed + 16 * fs.stats().checkpoints as u64;
    for k in 0..3000u32 {
        let o = objs[rng.below(objs.len() as u64) as usize];
        let pg = rng.below(8) as usize;
        let d = pat(10_000 + k, PAGE as usize);
        let before = cost(&fs);
        match fs.write(o, pg as u64 * PAGE, &d).and_then(|()| fs.flush(o)) {
            Ok(()) => {
                let at = pg * PAGE as usize;
                model.get_mut(&o).unwrap()[at..at + PAGE as usize].copy_from_slice(&d);
                ok += 1;
            }
            Err(WriteError::NoSpace) => {
                fs.discard(o);
                refused += 1;
                let c = cost(&fs) - before;
                worst = worst.max(c);
                spent += c;
            }
            Err(e) => panic!("rewrite {k}: {e:?}"),
        }
    }
    println!("{ok} ok, {refused} refused, worst {worst}, spent {spent}");
    assert!(
        refused > 2900,
        "{ok} rewrites went through, {refused} refused"
    );
    // Before: 4,241 at worst, 1,106,806 in all.
    assert!(worst < 1_000, "a refused rewrite cost {worst} programs");
    assert!(
        spent < 500 * refused as u64,
        "the refused rewrites cost {spent} programs in all"
    );
    check(&mut fs, &model);
    // Deletes work, and make room for writes again.
    for &o in &objs[..4] {
        fs.delete(o).unwrap();
        model.remove(&o);
    }
    let o = objs[10];
    let d = pat(99, PAGE as usize);
    fs.write(o, 0, &d).and_then(|()| fs.flush(o)).unwrap();
    model.get_mut(&o).unwrap()[..PAGE as usize].copy_from_slice(&d);
    fs.unmount().unwrap();
    drop(fs);
    let mut fs: Small<'_> = Oftl::new(&mut s, Config::new(), Greedy::DEFAULT);
    fs.mount().unwrap();
    check(&mut fs, &model);
}
