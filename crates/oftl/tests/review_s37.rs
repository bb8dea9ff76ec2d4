//! Independent review (s37) of 0473d1b: the refusal memo (`space::Refusal`), the
//! 8-fresh-window rule in `make_room`, and `Greedy`'s static wear leveling only in the
//! background.
//!
//! Findings (each a test that failed at 0473d1b; all fixed before the stop-37 commit
//! that followed: the memo is gone, `Greedy` is back as it was, and collection passes
//! over a wholly valid wear-leveling pick only while the pool is below the growth
//! floor):
//! - `a_refused_large_rewrite_refuses_every_later_small_rewrite` (high)
//! - `a_transient_refusal_becomes_permanent_tiny_w4` (high)
//! - `a_transient_refusal_becomes_permanent_w25n01gv_small_w4` (high)
//! - `foreground_only_wear_spread_is_unbounded_with_static_data` (low/medium)
//!
//! Probes that held (passing): power cuts at every program/erase of refused rewrites,
//! deletes and rewrites at capacity; windows of 6 and 8 blocks refuse no 1-page rewrite
//! up to 95% of capacity; refused operations change nothing; small rewrites after a
//! refused large one go through, also after a delete or a remount.
//!
//! Every comparison with "the parent" below was measured by running the same test file
//! on 0473d1b~1; "without the memo" on 0473d1b with only the `refusal.stands` short-cut
//! in `make_room` disabled (a local patch, not part of this file).

use nand_hal::sim::{
    profile, CutKind, FaultPlan, HeapStorage, PowerCut, Profile, SimNand, TornMode,
};
use oftl::{BlockState, Config, Greedy, ObjKind, Oftl, WriteError};

use crate::common;
use common::fill::{check, fill_to, pat, rewrite, Model};
use common::Rng;

type Sim = SimNand<HeapStorage>;
type Fs<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 2>;
type Small<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 2, Greedy, 512, 0>;
const PAGE: usize = 2048;

fn cfg(window: u16) -> Config {
    Config {
        window_blocks: window,
        format_id: 7,
        ..Default::default()
    }
}

type G<'a, const BL: usize, const C: usize, const W: usize, const M: usize, const L: usize> =
    Oftl<&'a mut Sim, 2048, BL, C, W, Greedy, M, L>;

/// What happened around the first refused whole-object rewrite.
#[derive(Debug)]
#[allow(dead_code)]
struct AfterBig {
    /// Valid pages, % of `capacity_pages`, at the refusal.
    fill_pct: f64,
    /// Rewrites before it.
    at_op: u32,
    /// The next 100 1-page rewrites: acknowledged, refused.
    ok: u32,
    refused: u32,
    /// Programs (pages + 16 per checkpoint) the 100 spent.
    spent: u64,
}

/// TINY (`window` blocks), filled to `fill` of capacity with `big`-page objects, then
/// rewritten in place: 1-page rewrites and, every 10th, a whole-object rewrite (one
/// transaction of `big` pages). At the first refused whole-object rewrite, `between`
/// runs, then 100 1-page rewrites; everything is read back after.
fn after_big_refusal(
    window: u16,
    seed: u64,
    fill: f64,
    big: usize,
    between: impl FnOnce(&mut Fs<'_>, &mut Model, &[u32]),
) -> Option<AfterBig> {
    let mut s = SimNand::heap(profile::TINY, FaultPlan::seeded(seed));
    let mut fs: Fs<'_> = Oftl::new(&mut s, cfg(window), Greedy::DEFAULT);
    fs.format().unwrap();
    let cap = fs.capacity_pages();
    let mut model = fill_to(&mut fs, fill, big);
    let objs: Vec<u32> = model.keys().copied().collect();
    let mut rng = Rng(seed | 1);
    for k in 0..3000u32 {
        let o = objs[rng.below(objs.len() as u64) as usize];
        if k % 10 != 9 {
            let off = rng.below(big as u64) as usize * PAGE;
            rewrite(&mut fs, &mut model, o, off, &pat(50_000 + k, PAGE));
            continue;
        }
        if rewrite(&mut fs, &mut model, o, 0, &pat(50_000 + k, big * PAGE)) {
            continue;
        }
        let fill_pct = 100.0 * fs.used_pages() as f64 / cap as f64;
        between(&mut fs, &mut model, &objs);
        let live: Vec<u32> = model.keys().copied().collect();
        let before = fs.stats().pages_programmed + 16 * fs.stats().checkpoints as u64;
        let (mut ok, mut refused) = (0, 0);
        for j in 0..100u32 {
            let o = live[rng.below(live.len() as u64) as usize];
            let off = rng.below(big as u64) as usize * PAGE;
            if rewrite(&mut fs, &mut model, o, off, &pat(90_000 + j, PAGE)) {
                ok += 1;
            } else {
                refused += 1;
            }
        }
        let spent = fs.stats().pages_programmed + 16 * fs.stats().checkpoints as u64 - before;
        check(&mut fs, &model);
        return Some(AfterBig {
            fill_pct,
            at_op: k,
            ok,
            refused,
            spent,
        });
    }
    None
}

/// **Finding (high): one refused large write refuses every later write, at 62-72% of
/// capacity, until a delete, a `gc_step` or a remount.**
///
/// Repro: TINY, window 4 (the window of `full_device.rs`'s regression test), filled to
/// 60% of `capacity_pages()` with 24-page objects; rewrites in place, 1-page ones and
/// every 10th a whole 24-page object (one transaction). The first whole-object rewrite
/// that is refused (op 369, valid pages at 61.9% of capacity; such refusals are
/// intermittent and pre-existing: the parent refuses some too) is followed by a
/// `sync()` and 100 1-page rewrites of random objects. Same with window 6 (the file
/// layer's documented example window) and 48-page objects: refusal at op 389, 71.5% of
/// capacity, no sync.
///
/// Expected: the small rewrites go through (parent 0473d1b~1: 100 of 100 in both
/// cases; 0473d1b with only the memo's short-cut disabled: 100 of 100).
/// Observed on 0473d1b: 0 of 100 in both cases, each refused at once with 0 programs.
/// The same holds for 5 of 5 seeds with 24- and 32-page objects on windows 4 and 5
/// (refusals at 62-67% of capacity), and `create` and `set_attrs` are refused too.
/// `sync()` does not clear it (the checkpoint leaves the pool and valid count as they
/// were); a `gc_step(16)` lets 44 through, then the store wedges again.
///
/// Cause: the memo (`space::Refusal`) keys a refusal on (valid pages, pool) only. The
/// large operation was refused because even a fresh window cannot hold it *and* a
/// whole victim (`budget < need + ppb + window_need(0)` with `fresh`, in
/// `make_room_within`), which depends on `need`; a 1-page operation in the same state
/// collects and succeeds. The memo then answers every later growing operation of any
/// size, on any head, with `NoSpace` while nothing changes, and nothing changes
/// because every write is refused. An application that retries (or a file layer that
/// does not call `gc_step`) is wedged for good at two-thirds of capacity. The memo
/// should at least record `need` (refuse only operations at least as large) or the
/// head, or be dropped after a checkpoint.
#[test]
fn a_refused_large_rewrite_refuses_every_later_small_rewrite() {
    let w4 = after_big_refusal(4, 1, 0.6, 24, |fs, _, _| fs.sync().unwrap())
        .expect("a whole-object rewrite is refused");
    let w6 = after_big_refusal(6, 1, 0.6, 48, |_, _, _| {}).expect("refused");
    println!("window 4: {w4:?}\nwindow 6: {w6:?}");
    assert!(
        w4.ok >= 95 && w6.ok >= 95,
        "after one refused large rewrite, 1-page rewrites went through: window 4 {} of 100 \
         at {:.1}% of capacity, window 6 {} of 100 at {:.1}% (parent: 100 and 100)",
        w4.ok,
        w4.fill_pct,
        w6.ok,
        w6.fill_pct
    );
}

/// Probe: after the refused large rewrite of the finding above, 1-page rewrites go
/// through as they are, after a delete and after an unmount and mount. (At 0473d1b the
/// first case was wedged, each refusal answered by the memo at no cost; this probe
/// then checked that a delete and a remount cleared it.)
#[test]
fn small_rewrites_after_a_refused_large_one_go_through_also_after_a_delete_or_a_remount() {
    let plain = after_big_refusal(4, 1, 0.6, 24, |_, _, _| {}).unwrap();
    let deleted = after_big_refusal(4, 1, 0.6, 24, |fs, m, objs| {
        fs.delete(objs[0]).unwrap();
        m.remove(&objs[0]);
    })
    .unwrap();
    let remounted = after_big_refusal(4, 1, 0.6, 24, |fs, _, _| {
        fs.unmount().unwrap();
        fs.mount().unwrap();
    })
    .unwrap();
    println!("plain: {plain:?}\ndelete: {deleted:?}\nremount: {remounted:?}");
    assert_eq!(plain.ok, 100, "{plain:?}");
    assert_eq!(deleted.ok, 100, "{deleted:?}");
    assert_eq!(remounted.ok, 100, "{remounted:?}");
}

/// 3,000 1-page rewrites in place of random pages of 8-page objects filling `fill` of
/// capacity: (acknowledged, refused, longest run of refusals, fill %).
fn small_rewrites<
    const BL: usize,
    const C: usize,
    const W: usize,
    const M: usize,
    const L: usize,
>(
    p: Profile,
    window: u16,
    seed: u64,
    fill: f64,
) -> (u32, u32, u32, f64) {
    let mut s = SimNand::heap(p, FaultPlan::seeded(seed));
    let mut fs: G<'_, BL, C, W, M, L> = Oftl::new(&mut s, cfg(window), Greedy::DEFAULT);
    fs.format().unwrap();
    let mut model = fill_to(&mut fs, fill, 8);
    let pct = 100.0 * fs.used_pages() as f64 / fs.capacity_pages() as f64;
    let objs: Vec<u32> = model.keys().copied().collect();
    let mut rng = Rng(seed | 1);
    let (mut ok, mut refused, mut run, mut longest) = (0, 0, 0, 0);
    for k in 0..3000u32 {
        let o = objs[rng.below(objs.len() as u64) as usize];
        let off = rng.below(8) as usize * PAGE;
        if rewrite(&mut fs, &mut model, o, off, &pat(50_000 + k, PAGE)) {
            ok += 1;
            run = 0;
        } else {
            refused += 1;
            run += 1;
            longest = longest.max(run);
        }
    }
    check(&mut fs, &model);
    (ok, refused, longest, pct)
}

/// **Finding (high): a transient refusal of a 1-page rewrite becomes permanent, at 71%
/// of capacity.**
///
/// Repro: TINY, window 4, default layout (`Oftl<_, 2048, 64, 4, 2>`), filled to 70% of
/// `capacity_pages()` (374 of 528 pages, 70.8%) with 8-page objects; 3,000 1-page
/// rewrites in place of random pages, nothing else (no `gc_step`).
///
/// Expected (parent 0473d1b~1, and 0473d1b without the memo's short-cut, identical
/// figures): seed 1: 2,997 acknowledged, 3 refused; seed 2: 2,998 and 2; refusals
/// isolated.
/// Observed on 0473d1b: seed 1: 2,500 and 500 (499 of them in a row, to the end of the
/// run); seed 2: 1,768 and 1,232 (1,231 in a row). At 80% fill: 340 acknowledged of
/// 3,000 (parent 2,928), at 85%: 178 (parent 2,825). ParaGc gives the same figures.
///
/// The memo's premise ("trying again would collect and checkpoint the same way for
/// nothing") is false: with the short-cut disabled, retrying a refused 1-page rewrite
/// at once, with nothing in between, succeeds on the first retry for 5 of 5 refusals
/// at 70% fill, 197 of 227 at 80%, 315 of 413 at 85%, 290 of 819 at 90% (TINY, window
/// 4, seeds 1-3): the refused call's checkpoints and collections leave the window in
/// another state that (valid pages, pool) does not capture. The memo turns those
/// retryable refusals into a permanent one.
#[test]
fn a_transient_refusal_becomes_permanent_tiny_w4() {
    let r1 = small_rewrites::<64, 4, 2, 2048, 2048>(profile::TINY, 4, 1, 0.7);
    let r2 = small_rewrites::<64, 4, 2, 2048, 2048>(profile::TINY, 4, 2, 0.7);
    println!("seed 1: {r1:?}\nseed 2: {r2:?}");
    assert!(
        r1.1 <= 30 && r2.1 <= 30,
        "at {:.1}% of capacity, of 3,000 1-page rewrites {} and {} were refused (longest runs \
         {} and {}); the parent refused 3 and 2",
        r1.3,
        r1.1,
        r2.1,
        r1.2,
        r2.2
    );
}

/// **Finding (high): the same on `W25n01gvSmall`'s layout** (W25N01GV, `Oftl<_, 2048,
/// 1024, 4, 1, Greedy, 512, 0>`), at the smallest window (4), filled to 80% of
/// capacity (50,339 of 62,912 pages): 3,000 1-page rewrites, 555 refused, all after
/// the 2,445th (parent: 2 refused). With the default 16-block window at 90% fill:
/// 1,222 refused (parent 1,035); the default-metadata layout at window 4, 90%: 1,907
/// (parent 1,269).
#[test]
fn a_transient_refusal_becomes_permanent_w25n01gv_small_w4() {
    let r = small_rewrites::<1024, 4, 1, 512, 0>(profile::W25N01GV, 4, 1, 0.8);
    println!("{r:?}");
    assert!(
        r.1 <= 30,
        "at {:.1}% of capacity, {} of 3,000 1-page rewrites were refused, {} of them in a row \
         (parent: 2)",
        r.3,
        r.1,
        r.2
    );
}

/// Probe (held): with windows of 6 and 8 blocks, 1-page rewrites are never refused up
/// to 95% of capacity (24 runs of 3,000; same as the parent).
#[test]
fn larger_windows_refuse_no_small_rewrite_below_95_percent() {
    let mut bad = vec![];
    for w in [6u16, 8] {
        for fill in [0.7, 0.8, 0.9, 0.95] {
            for seed in [1u64, 2, 3] {
                let r = small_rewrites::<64, 4, 2, 2048, 2048>(profile::TINY, w, seed, fill);
                if r.1 > 0 {
                    bad.push((w, fill, seed, r));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{bad:?}");
}

/// **Finding (low/medium): with collection only in the foreground (no `gc_step`),
/// static data now leaves the erase spread unbounded.**
///
/// Repro: TINY, window 6, `Greedy { wear_gap: 50 }` (a small gap so the test is fast;
/// the default 2,000 behaves the same, 40 times later), filled to 60% of capacity with
/// 8-page objects; a quarter of the objects rewritten 1 page at a time, 150,000 times,
/// the rest never touched; `gc_step` never called.
///
/// Expected (parent): the spread stays at the gap (50 with gap 50, 199 with gap 200).
/// Observed: 615 with either gap, and growing with the writes (the cold blocks stay at
/// their format erase while the hot ones wear). This is the documented trade-off of
/// the change (DESIGN 5.3: "Static wear leveling runs only in background collection");
/// but the same section says that with collection only on demand "the erase spread is
/// whatever victim choice leaves (5-10 in `examples/policies.rs`)", which does not hold
/// with static data, and nothing tells a user of oftl alone (`W25n01gvSmall` has no
/// file layer calling `gc_step`) that without `gc_step` the cold part of the device
/// never wears: its life is that of the hot part. Foreground leveling could instead be
/// kept while the pool is comfortable, and dropped only below the growth floor (where
/// the review's wedge was).
#[test]
fn foreground_only_wear_spread_is_unbounded_with_static_data() {
    let gap = 50;
    let mut s = SimNand::heap(profile::TINY, FaultPlan::seeded(11));
    let mut fs: Fs<'_> = Oftl::new(&mut s, cfg(6), Greedy { wear_gap: gap });
    fs.format().unwrap();
    let mut model = fill_to(&mut fs, 0.6, 8);
    let objs: Vec<u32> = model.keys().copied().collect();
    let hot = &objs[..objs.len() / 4];
    let mut rng = Rng(7);
    let mut refused = 0;
    for k in 0..150_000u32 {
        let o = hot[rng.below(hot.len() as u64) as usize];
        let off = rng.below(8) as usize * PAGE;
        if !rewrite(&mut fs, &mut model, o, off, &pat(k, PAGE)) {
            refused += 1;
        }
    }
    check(&mut fs, &model);
    let e: Vec<u32> = fs
        .blocks()
        .iter()
        .filter(|b| !matches!(b.state(), BlockState::Bad | BlockState::Reserved))
        .map(|b| b.erases())
        .collect();
    let (mx, mn) = (*e.iter().max().unwrap(), *e.iter().min().unwrap());
    println!("spread {} (max {mx}, min {mn}), {refused} refused", mx - mn);
    assert_eq!(refused, 0);
    assert!(
        mx - mn <= 2 * gap,
        "erase spread {} (max {mx}, min {mn}) with wear gap {gap} (parent: {gap})",
        mx - mn
    );
}

/// A TINY store with 512-byte metadata units at the smallest window filled to
/// capacity with 8-page objects (as `full_device.rs`'s regression test), unmounted.
fn small_at_capacity(seed: u64) -> (Sim, Model) {
    let mut s = SimNand::heap(profile::TINY, FaultPlan::seeded(seed));
    let mut model = Model::new();
    {
        let mut fs: Small<'_> = Oftl::new(&mut s, cfg(4), Greedy::DEFAULT);
        fs.format().unwrap();
        for i in 0..100_000u32 {
            let Ok(o) = fs.create(ObjKind::Object) else {
                break;
            };
            let d = pat(i, 8 * PAGE);
            if fs.write(o, 0, &d).and_then(|()| fs.flush(o)).is_err() {
                fs.delete(o).unwrap();
                break;
            }
            model.insert(o, d);
        }
        fs.unmount().unwrap();
    }
    (s, model)
}

#[derive(Clone, Copy, Debug)]
enum Step {
    Rewrite(u32, usize, u32),
    Delete(u32),
}

/// 60 1-page rewrites, two deletes, 40 rewrites.
fn script(model: &Model, seed: u64) -> Vec<Step> {
    let objs: Vec<u32> = model.keys().copied().collect();
    let mut rng = Rng(seed | 1);
    let mut v = vec![];
    for k in 0..60 {
        let o = objs[rng.below(objs.len() as u64) as usize];
        v.push(Step::Rewrite(o, rng.below(8) as usize, k));
    }
    v.push(Step::Delete(objs[0]));
    v.push(Step::Delete(objs[1]));
    for k in 60..100 {
        let o = objs[2 + rng.below(objs.len() as u64 - 2) as usize];
        v.push(Step::Rewrite(o, rng.below(8) as usize, k));
    }
    v
}

fn apply(m: &mut Model, st: Step) {
    match st {
        Step::Rewrite(o, pg, k) => m.get_mut(&o).unwrap()[pg * PAGE..(pg + 1) * PAGE]
            .copy_from_slice(&pat(70_000 + k, PAGE)),
        Step::Delete(o) => {
            m.remove(&o);
        }
    }
}

/// Runs `steps`; returns the step a power cut interrupted (None when the script ran to
/// its end) and the refusals. Deletes must never be refused.
fn run_script(fs: &mut Small<'_>, model: &mut Model, steps: &[Step]) -> (Option<usize>, u32) {
    let mut refused = 0;
    for (i, &st) in steps.iter().enumerate() {
        let r = match st {
            Step::Rewrite(o, pg, k) => fs
                .write(o, (pg * PAGE) as u64, &pat(70_000 + k, PAGE))
                .and_then(|()| fs.flush(o))
                .map_err(|e| (e, Some(o))),
            Step::Delete(o) => fs.delete(o).map_err(|e| (e, None)),
        };
        match r {
            Ok(()) => apply(model, st),
            Err((WriteError::NoSpace, o)) => {
                refused += 1;
                assert!(o.is_some(), "step {i}: delete refused with NoSpace");
                fs.discard(o.unwrap());
            }
            Err(_) => return (Some(i), refused),
        }
    }
    (None, refused)
}

fn same(fs: &mut Small<'_>, m: &Model) -> bool {
    let listed: Vec<u32> = match fs.objects().collect::<Result<Vec<_>, _>>() {
        Ok(v) => v,
        Err(_) => return false,
    };
    if listed != m.keys().copied().collect::<Vec<_>>() {
        return false;
    }
    m.iter().all(|(&o, d)| {
        let mut b = vec![0u8; d.len()];
        fs.read(o, 0, &mut b).ok() == Some(d.len()) && b == *d
    })
}

/// Probe (held): power cuts (clean, torn prefix, torn random, in turn) at 500 evenly
/// spaced programs and erases of a script run on a TINY store with 512-byte metadata
/// units at the smallest window, filled to capacity: 60 1-page rewrites (most refused),
/// two deletes, 40 rewrites (at 0473d1b the script took 423 programs and erases, every
/// one cut; on its parent 38,880, and without the memo about 11,600). Every cut mounts
/// and shows the acknowledged state before or after the interrupted step; no delete is
/// refused.
#[test]
fn power_cuts_in_refused_rewrites_at_capacity_lose_nothing() {
    let (base, model0) = small_at_capacity(4);
    let steps = script(&model0, 9);
    let mut s = base.clone();
    let total = {
        s.arm(FaultPlan::seeded(1));
        let mut fs: Small<'_> = Oftl::new(&mut s, Config::new(), Greedy::DEFAULT);
        fs.mount().unwrap();
        let mut m = model0.clone();
        let (cut, refused) = run_script(&mut fs, &mut m, &steps);
        assert!(cut.is_none());
        assert!(same(&mut fs, &m));
        println!("uncut: {refused} refused of {}", steps.len());
        drop(fs);
        s.ops_since_arm()
    };
    let kinds = [
        CutKind::Clean,
        CutKind::Torn(TornMode::Prefix),
        CutKind::Torn(TornMode::Random),
    ];
    let mut cuts = 0;
    let stride = (total / 500).max(1) as usize;
    for at in (1..=total).step_by(stride) {
        let mut s = base.clone();
        let mut plan = FaultPlan::seeded(at);
        plan.cut = Some(PowerCut {
            at_op: at,
            kind: kinds[at as usize % 3],
        });
        let mut fs: Small<'_> = Oftl::new(&mut s, Config::new(), Greedy::DEFAULT);
        fs.mount().unwrap();
        fs.flash_mut().arm(plan);
        let mut m = model0.clone();
        let (cut, _) = run_script(&mut fs, &mut m, &steps);
        let Some(i) = cut else { continue };
        cuts += 1;
        drop(fs);
        s.power_on();
        s.disarm();
        let mut fs: Small<'_> = Oftl::new(&mut s, Config::new(), Greedy::DEFAULT);
        fs.mount()
            .unwrap_or_else(|e| panic!("cut at {at}: mount {e:?}"));
        let mut after = m.clone();
        apply(&mut after, steps[i]);
        assert!(
            same(&mut fs, &m) || same(&mut fs, &after),
            "cut at op {at} (step {i} {:?}): neither before nor after",
            steps[i]
        );
    }
    println!("{total} programs and erases, {cuts} cuts checked");
    assert!(cuts >= 400, "{cuts}");
}
