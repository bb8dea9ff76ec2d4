//! Stress tests for the on-flash object table (format v2): many objects over several
//! table pages with a 4-page cache, direct objects growing past one page and
//! truncated back, GC pressure on TINY (with the greedy and the paragc policy, whose
//! copies go through the cold head), clean remounts and crashes (the store dropped),
//! power cuts (also during recovery), all checked against a `BTreeMap` model.
//!
//! Regression tests from a review: `churn_greedy_crash`, `churn_para_crash` and
//! `full_device_survives_two_crashes` (recovery ran out of free blocks and the device no
//! longer mounted: fixed by the recovery reserve every checkpoint leaves free),
//! `gc_with_a_leaf_per_page_near_capacity` (foreground GC spun through the device's
//! wear below `capacity_pages`: now bounded per operation, and a write that fails with
//! `NoSpace` leaves nothing behind).

use std::collections::BTreeMap;

use nand_hal::sim::{profile, FaultPlan, HeapStorage, SimNand};
use oftl::{Config, Greedy, ObjKind, Oftl, SpacePolicy, ATTR_LEN};

use crate::common;
use common::lifecycle::Lifecycle;
use common::Rng;

type Sim = SimNand<HeapStorage>;
type Fs<'a, P> = Oftl<&'a mut Sim, 2048, 64, 4, 2, P>;

const PAGE: u64 = 2048;

fn cfg() -> Config {
    Config {
        window_blocks: 6,
        format_id: 1,
        ..Default::default()
    }
}

#[derive(Clone, Default)]
struct Obj {
    data: Vec<u8>,
    attrs: Vec<u8>,
}

fn check_one<P: SpacePolicy>(fs: &mut Fs<'_, P>, id: u32, o: &Obj, ctx: &str) {
    assert_eq!(
        fs.size(id).unwrap(),
        o.data.len() as u64,
        "{ctx}: size of {id}"
    );
    let mut buf = vec![0xAAu8; o.data.len() + 10];
    let n = fs.read(id, 0, &mut buf).unwrap();
    assert_eq!(n, o.data.len(), "{ctx}: read len of {id}");
    assert!(buf[..n] == o.data[..], "{ctx}: content of {id}");
    assert_eq!(
        &fs.attrs(id).unwrap().user[..],
        &o.attrs[..],
        "{ctx}: attrs of {id}"
    );
}

/// Deletes every object: the valid counts must fall to the object table's own
/// index pages (the table root: at most `max`).
fn drain<P: SpacePolicy>(fs: &mut Fs<'_, P>, model: &BTreeMap<u32, Obj>, max: u64, ctx: &str) {
    for &id in model.keys() {
        fs.delete(id).unwrap();
    }
    fs.sync().unwrap();
    assert_eq!(fs.object_count(), 0, "{ctx}");
    assert_eq!(fs.objects().count(), 0, "{ctx}");
    let used = fs.used_pages();
    let valid: u64 = fs.blocks().iter().map(|b| b.valid() as u64).sum();
    assert!(
        used <= max && valid == used,
        "{ctx}: {used} pages ({valid} by blocks) still counted valid with no object left"
    );
}

fn check_all<P: SpacePolicy>(fs: &mut Fs<'_, P>, model: &BTreeMap<u32, Obj>, ctx: &str) {
    let mut ids: Vec<u32> = model.keys().copied().collect();
    ids.sort();
    let listed: Vec<u32> = fs.objects().map(|r| r.unwrap()).collect();
    assert_eq!(listed, ids, "{ctx}: object list");
    assert_eq!(fs.object_count() as usize, ids.len(), "{ctx}: object count");
    for id in ids {
        check_one(fs, id, &model[&id], ctx);
    }
}

/// Pages the store counts valid.
fn used<P: SpacePolicy>(fs: &Fs<'_, P>) -> u64 {
    fs.used_pages()
}

fn free_blocks<P: SpacePolicy>(fs: &Fs<'_, P>) -> usize {
    fs.blocks()
        .iter()
        .filter(|b| b.state() == oftl::BlockState::Free)
        .count()
}

/// Runs `steps` random operations (creates, deletes, writes that grow objects past one
/// page, truncates back, attributes, GC steps, syncs, clean remounts and, with `crash`,
/// crashes), keeping about `live_target` objects; checks against the model throughout
/// and that deleting everything leaves no valid page behind. Returns the programs and
/// the largest id handed out.
fn churn<P: SpacePolicy + Clone>(
    policy: P,
    seed: u64,
    steps: u32,
    live_target: usize,
    crash: bool,
) -> (u64, u32) {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
    let mut model: BTreeMap<u32, Obj> = BTreeMap::new();
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut max_id = 0;
    let mut fs = Fs::<P>::formatted_with(&mut sim, cfg(), policy.clone()).unwrap();
    let mut step = 0;
    while step < steps {
        step += 1;
        let ctx = format!("seed {seed} step {step}");
        let live: Vec<u32> = {
            let mut v: Vec<u32> = model.keys().copied().collect();
            v.sort();
            v
        };
        let pick = |rng: &mut Rng| live[rng.below(live.len() as u64) as usize];
        let r = rng.below(100);
        if live.len() < live_target / 2 || (r < 22 && live.len() < live_target) {
            let id = fs.create(ObjKind::Object).unwrap();
            assert!(id > max_id, "{ctx}: ids increase");
            max_id = id;
            assert!(!model.contains_key(&id));
            model.insert(
                id,
                Obj {
                    data: vec![],
                    attrs: vec![0; ATTR_LEN],
                },
            );
            // Most objects get a small body (direct).
            if rng.below(3) > 0 {
                let len = 1 + rng.below(1500) as usize;
                let d: Vec<u8> = (0..len).map(|i| (i as u32 ^ id) as u8).collect();
                fs.write(id, 0, &d).unwrap();
                fs.flush(id).unwrap();
                model.get_mut(&id).unwrap().data = d;
            }
        } else if r < 40 && !live.is_empty() {
            let id = pick(&mut rng);
            fs.delete(id).unwrap();
            model.remove(&id);
        } else if r < 65 && !live.is_empty() {
            let id = pick(&mut rng);
            let o = model.get_mut(&id).unwrap();
            // Grow past one page sometimes, stay within one page mostly.
            let max_end = if rng.below(4) == 0 { 3 * PAGE } else { PAGE };
            let off = rng.below(max_end) as usize;
            let len = 1 + rng.below(max_end - off as u64) as usize;
            let b = rng.next() as u8;
            let d: Vec<u8> = (0..len).map(|i| b.wrapping_add(i as u8)).collect();
            fs.write(id, off as u64, &d).unwrap();
            fs.flush(id).unwrap();
            if o.data.len() < off + len {
                o.data.resize(off + len, 0);
            }
            o.data[off..off + len].copy_from_slice(&d);
        } else if r < 80 && !live.is_empty() {
            let id = pick(&mut rng);
            let o = model.get_mut(&id).unwrap();
            let size = match rng.below(4) {
                0 => 0,
                1 => rng.below(PAGE) as usize,
                2 => PAGE as usize,
                _ => rng.below(o.data.len() as u64 + 2 * PAGE) as usize,
            };
            fs.truncate(id, size as u64).unwrap();
            o.data.resize(size, 0);
        } else if r < 85 && !live.is_empty() {
            let id = pick(&mut rng);
            let mut a = [0u8; ATTR_LEN];
            a[0] = rng.next() as u8;
            a[ATTR_LEN - 1] = step as u8;
            fs.set_attrs(id, &a).unwrap();
            model.get_mut(&id).unwrap().attrs = a.to_vec();
        } else if r < 92 {
            fs.gc_step(1 + rng.below(24) as u32).unwrap();
        } else if r < 94 {
            fs.sync().unwrap();
        } else if r < 96 {
            fs.sync().unwrap();
            let u = used(&fs);
            fs.unmount().unwrap();
            fs = Fs::<P>::mounted_with(&mut sim, policy.clone()).unwrap();
            assert_eq!(used(&fs), u, "{ctx}: used pages across a clean remount");
            check_all(&mut fs, &model, &format!("{ctx} (after remount)"));
        } else if crash {
            let (used_now, free) = (used(&fs), free_blocks(&fs));
            drop(fs);
            let p0 = sim.counters().programs;
            match Fs::<P>::mounted_with(&mut sim, policy.clone()) {
                Ok(f) => fs = f,
                Err(e) => {
                    let p1 = sim.counters().programs;
                    let again = Fs::<P>::mounted_with(&mut sim, policy.clone()).err();
                    panic!(
                        "{ctx}: recovery failed {e:?} after {} programs ({used_now} of 704 pages \
                         used, {free} free blocks at the crash); mounting again: {again:?}",
                        p1 - p0
                    );
                }
            }
            check_all(&mut fs, &model, &format!("{ctx} (after crash)"));
        }
        // Spot check a few objects every step.
        if !model.is_empty() {
            let ids: Vec<u32> = model.keys().copied().collect();
            for _ in 0..2 {
                let id = ids[rng.below(ids.len() as u64) as usize];
                check_one(&mut fs, id, &model[&id], &ctx);
            }
        }
    }
    check_all(&mut fs, &model, "end");
    fs.unmount().unwrap();
    let mut fs = Fs::<P>::mounted_with(&mut sim, policy).unwrap();
    check_all(&mut fs, &model, "end remount");
    drain(&mut fs, &model, 1, &format!("seed {seed}"));
    drop(fs);
    assert_eq!(sim.counters().misuse, 0);
    (sim.counters().programs, max_id)
}

#[test]
fn churn_greedy_clean() {
    let (_, max_id) = churn(Greedy::DEFAULT, 11, 3000, 120, false);
    assert!(max_id > 256, "ids spanned several table pages: {max_id}");
}

#[test]
fn churn_greedy_crash() {
    churn(Greedy::DEFAULT, 12, 3000, 120, true);
}

#[test]
fn churn_para_crash() {
    churn(oftl::ParaGc::<64>::DEFAULT, 13, 3000, 120, true);
}

/// Crashes at a fill low enough that the old checkpoint always leaves free blocks for
/// recovery: the records rebuilt from the window must match the model.
#[test]
fn churn_crash_low_fill() {
    for seed in 21..25 {
        churn(Greedy::DEFAULT, seed, 1500, 40, true);
        churn(oftl::ParaGc::<64>::DEFAULT, seed + 100, 1500, 40, true);
    }
}

/// Whether the store's state equals `model` (object list, sizes, contents, attrs).
fn matches<P: SpacePolicy>(fs: &mut Fs<'_, P>, model: &BTreeMap<u32, Obj>) -> bool {
    let listed: Vec<u32> = match fs.objects().collect::<Result<Vec<_>, _>>() {
        Ok(v) => v,
        Err(_) => return false,
    };
    if listed != model.keys().copied().collect::<Vec<_>>() {
        return false;
    }
    for (&id, o) in model {
        if fs.size(id).ok() != Some(o.data.len() as u64) {
            return false;
        }
        let mut buf = vec![0u8; o.data.len()];
        if fs.read(id, 0, &mut buf).ok() != Some(o.data.len()) || buf != o.data {
            return false;
        }
        if fs.attrs(id).map(|a| a.user.to_vec()).ok() != Some(o.attrs.clone()) {
            return false;
        }
    }
    true
}

/// Random operations with power cuts armed at random points (inside operations, GC,
/// checkpoints and recovery itself); after each cut the store must hold the state
/// before or after the interrupted operation.
fn cut_churn<P: SpacePolicy + Clone>(policy: P, seed: u64, steps: u32, live_target: usize) -> u32 {
    use nand_hal::sim::{CutKind, PowerCut, TornMode};
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
    let mut model: BTreeMap<u32, Obj> = BTreeMap::new();
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut fs = Fs::<P>::formatted_with(&mut sim, cfg(), policy.clone()).unwrap();
    let kinds = [
        CutKind::Clean,
        CutKind::Torn(TornMode::SomeBits),
        CutKind::Torn(TornMode::MostBits),
    ];
    let mut cuts = 0;
    for step in 0..steps {
        let ctx = format!("seed {seed} step {step}");
        let live: Vec<u32> = model.keys().copied().collect();
        let before = model.clone();
        let armed = rng.below(4) == 0;
        if armed {
            fs.flash_mut().arm(FaultPlan {
                seed: seed ^ step as u64,
                cut: Some(PowerCut {
                    at_op: rng.below(6),
                    kind: kinds[rng.below(3) as usize],
                }),
                faults: Default::default(),
            });
        }
        let r = rng.below(100);
        // The state the operation leads to, computed before it runs.
        let mut after = model.clone();
        let res: Result<(), String> = (|| {
            if live.len() < live_target / 2 || (r < 22 && live.len() < live_target) {
                let id = fs.create(ObjKind::Object).map_err(|e| format!("{e:?}"))?;
                after.insert(
                    id,
                    Obj {
                        data: vec![],
                        attrs: vec![0; ATTR_LEN],
                    },
                );
            } else if r < 38 {
                let id = live[rng.below(live.len() as u64) as usize];
                after.remove(&id);
                fs.delete(id).map_err(|e| format!("{e:?}"))?;
            } else if r < 70 {
                let id = live[rng.below(live.len() as u64) as usize];
                let max_end = if rng.below(3) == 0 { 3 * PAGE } else { PAGE };
                let off = rng.below(max_end) as usize;
                let len = 1 + rng.below(max_end - off as u64) as usize;
                let b = rng.next() as u8;
                let d: Vec<u8> = (0..len).map(|i| b.wrapping_add(i as u8)).collect();
                let o = after.get_mut(&id).unwrap();
                if o.data.len() < off + len {
                    o.data.resize(off + len, 0);
                }
                o.data[off..off + len].copy_from_slice(&d);
                fs.write(id, off as u64, &d).map_err(|e| format!("{e:?}"))?;
                fs.flush(id).map_err(|e| format!("{e:?}"))?;
            } else if r < 85 {
                let id = live[rng.below(live.len() as u64) as usize];
                let cur = model[&id].data.len() as u64;
                let size = match rng.below(3) {
                    0 => 0,
                    1 => rng.below(PAGE),
                    _ => rng.below(cur + PAGE),
                } as usize;
                after.get_mut(&id).unwrap().data.resize(size, 0);
                fs.truncate(id, size as u64).map_err(|e| format!("{e:?}"))?;
            } else if r < 90 {
                let id = live[rng.below(live.len() as u64) as usize];
                let mut a = [0u8; ATTR_LEN];
                a[1] = step as u8;
                after.get_mut(&id).unwrap().attrs = a.to_vec();
                fs.set_attrs(id, &a).map_err(|e| format!("{e:?}"))?;
            } else if r < 97 {
                fs.gc_step(1 + rng.below(24) as u32)
                    .map_err(|e| format!("{e:?}"))?;
            } else {
                fs.sync().map_err(|e| format!("{e:?}"))?;
            }
            Ok(())
        })();
        let cut = !fs.flash().is_powered();
        if !cut {
            fs.flash_mut().disarm();
            if let Err(e) = res {
                panic!("{ctx}: error without a cut: {e}");
            }
            model = after;
            continue;
        }
        cuts += 1;
        drop(fs);
        // Recover, with cuts during recovery too.
        let mut tries = 0;
        fs = loop {
            sim.power_on();
            tries += 1;
            if tries < 3 && rng.below(3) == 0 {
                sim.arm(FaultPlan {
                    seed: seed ^ (step as u64) << 8,
                    cut: Some(PowerCut {
                        at_op: rng.below(40),
                        kind: kinds[rng.below(3) as usize],
                    }),
                    faults: Default::default(),
                });
            } else {
                sim.disarm();
            }
            match Fs::<P>::mounted_with(&mut sim, policy.clone()) {
                Ok(f) if f.flash().is_powered() => break f,
                Ok(f) => drop(f),
                Err(e) => {
                    assert!(
                        !sim.is_powered(),
                        "{ctx}: mount failed without a cut: {e:?}"
                    );
                }
            }
        };
        fs.flash_mut().disarm();
        if matches(&mut fs, &after) {
            model = after;
            continue;
        }
        // A create cut short may have made the next object.
        let mut alt = before.clone();
        if let Some(extra) = fs
            .objects()
            .map(|r| r.unwrap())
            .find(|id| !before.contains_key(id))
        {
            alt.insert(
                extra,
                Obj {
                    data: vec![],
                    attrs: vec![0; ATTR_LEN],
                },
            );
        }
        if matches(&mut fs, &before) {
            model = before;
        } else if matches(&mut fs, &alt) {
            model = alt;
        } else {
            let got: Vec<u32> = fs.objects().map(|r| r.unwrap()).collect();
            let want: Vec<u32> = before.keys().copied().collect();
            let mut diff = String::new();
            for &id in &want {
                let s = fs.size(id);
                if s.as_ref().ok() != Some(&(before[&id].data.len() as u64))
                    && s.as_ref().ok() != after.get(&id).map(|o| o.data.len() as u64).as_ref()
                {
                    diff += &format!(
                        " {id}: size {s:?} want {} or {:?};",
                        before[&id].data.len(),
                        after.get(&id).map(|o| o.data.len())
                    );
                }
            }
            panic!("{ctx}: state after the cut is neither before nor after (op r={r}); objects {got:?} vs {want:?};{diff}");
        }
    }
    check_all(&mut fs, &model, &format!("seed {seed} end"));
    drain(&mut fs, &model, 1, &format!("seed {seed} end"));
    drop(fs);
    assert_eq!(sim.counters().misuse, 0, "seed {seed}");
    cuts
}

#[test]
fn cuts_greedy() {
    for seed in 31..35 {
        let cuts = cut_churn(Greedy::DEFAULT, seed, 800, 40);
        assert!(cuts > 30, "seed {seed}: {cuts} cuts");
    }
}

#[test]
fn cuts_para() {
    for seed in 41..45 {
        let cuts = cut_churn(oftl::ParaGc::<64>::DEFAULT, seed, 800, 40);
        assert!(cuts > 30, "seed {seed}: {cuts} cuts");
    }
}

/// Ids past the first table leaf (512 table pages x 64 records on 2 KiB pages): the
/// table's index gets a second leaf, and objects on both sides of the boundary keep
/// their records and data through writes, GC, remounts and crashes.
#[test]
fn ids_past_the_first_table_leaf() {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(77));
    let mut fs = Fs::<Greedy>::formatted(&mut sim, cfg()).unwrap();
    let mut model: BTreeMap<u32, Obj> = BTreeMap::new();
    let per_leaf = 512 * 64;
    let mut keep = |id: u32| id % 4099 == 1 || (per_leaf - 3..per_leaf + 3).contains(&id);
    loop {
        let id = fs.create(ObjKind::Object).unwrap();
        if keep(id) {
            let d: Vec<u8> = (0..(id as usize % 5000 + 10))
                .map(|i| (i as u32 ^ id) as u8)
                .collect();
            fs.write(id, 0, &d).unwrap();
            fs.flush(id).unwrap();
            model.insert(
                id,
                Obj {
                    data: d,
                    attrs: vec![0; ATTR_LEN],
                },
            );
        } else {
            fs.delete(id).unwrap();
        }
        if id > per_leaf + 200 {
            break;
        }
    }
    check_all(&mut fs, &model, "created");
    // Rewrite every kept object (records on both table leaves), then crash.
    for (&id, o) in model.iter_mut() {
        let d = vec![id as u8; 3000];
        fs.write(id, 100, &d).unwrap();
        fs.flush(id).unwrap();
        if o.data.len() < 3100 {
            o.data.resize(3100, 0);
        }
        o.data[100..3100].copy_from_slice(&d);
    }
    drop(fs);
    let mut fs = Fs::<Greedy>::mounted(&mut sim).unwrap();
    check_all(&mut fs, &model, "after crash");
    fs.unmount().unwrap();
    let mut fs = Fs::<Greedy>::mounted(&mut sim).unwrap();
    check_all(&mut fs, &model, "after remount");
    // Only the table root stays: emptied table leaves are dropped like objects' leaves.
    drain(&mut fs, &model, 1, "past the first table leaf");
    drop(fs);
    assert_eq!(sim.counters().misuse, 0);
    let _ = &mut keep;
}

/// Sparse objects with many index leaves (one data page per leaf) whose records are
/// spread over many table pages: every cache miss walks the longest parent chain
/// (object leaf, object root, table page, table leaf, table root) through a 4-page
/// cache, with GC, truncates that drop leaves, remounts and crashes.
#[test]
fn sparse_objects_deep_chains() {
    for seed in 0..4 {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(900 + seed));
        let mut fs = Fs::<Greedy>::formatted(&mut sim, cfg()).unwrap();
        let mut rng = Rng(seed * 7919 + 3);
        // Object -> (size, page contents by lpn; unlisted pages read as zeros).
        let mut model: BTreeMap<u32, (u64, BTreeMap<u32, u8>)> = BTreeMap::new();
        while model.len() < 12 {
            let id = fs.create(ObjKind::Object).unwrap();
            if rng.below(5) == 0 {
                model.insert(id, (0, BTreeMap::new()));
            } else {
                fs.delete(id).unwrap();
            }
        }
        let ids: Vec<u32> = model.keys().copied().collect();
        let check = |fs: &mut Fs<'_, Greedy>,
                     model: &BTreeMap<u32, (u64, BTreeMap<u32, u8>)>,
                     ctx: &str| {
            for (&id, (size, pages)) in model {
                assert_eq!(fs.size(id).unwrap(), *size, "{ctx}: size of {id}");
                // Every written page and one page in between.
                for (&lpn, &b) in pages {
                    let mut buf = [0u8; 2048];
                    let n = fs.read(id, lpn as u64 * PAGE, &mut buf).unwrap();
                    assert!(buf[..n].iter().all(|&x| x == b), "{ctx}: {id} page {lpn}");
                }
            }
        };
        for step in 0..400u32 {
            let ctx = format!("seed {seed} step {step}");
            let id = ids[rng.below(ids.len() as u64) as usize];
            match rng.below(20) {
                0..=11 => {
                    let lpn = (rng.below(60) * 512 + rng.below(3)) as u32;
                    let b = (rng.below(255) + 1) as u8;
                    fs.write(id, lpn as u64 * PAGE, &[b; 2048]).unwrap();
                    fs.flush(id).unwrap();
                    let (size, pages) = model.get_mut(&id).unwrap();
                    pages.insert(lpn, b);
                    *size = (*size).max((lpn as u64 + 1) * PAGE);
                }
                12..=13 => {
                    let (size, pages) = model.get_mut(&id).unwrap();
                    let new = rng.below(*size + 1) / PAGE * PAGE;
                    fs.truncate(id, new).unwrap();
                    *size = new;
                    pages.retain(|&l, _| (l as u64) < new / PAGE);
                }
                14..=16 => {
                    fs.gc_step(8).unwrap();
                }
                17 => {
                    fs.unmount().unwrap();
                    fs = Fs::<Greedy>::mounted(&mut sim).unwrap();
                    check(&mut fs, &model, &ctx);
                }
                18 => {
                    fs.sync().unwrap();
                }
                _ => {
                    drop(fs);
                    fs = match Fs::<Greedy>::mounted(&mut sim) {
                        Ok(f) => f,
                        Err(e) => panic!("{ctx}: recovery failed: {e:?}"),
                    };
                    check(&mut fs, &model, &ctx);
                }
            }
        }
        check(&mut fs, &model, "end");
        let keys = model.keys().map(|&k| (k, Obj::default())).collect();
        drain(&mut fs, &keys, 1, &format!("sparse seed {seed}"));
        drop(fs);
        assert_eq!(sim.counters().misuse, 0);
    }
}

/// GC victims full of pages from different index leaves (sparse objects, one data
/// page per leaf): every copy needs its own leaf, root and table page through a
/// 4-page cache. Overwrites must keep working while the live data stays well below
/// capacity.
#[test]
fn gc_with_a_leaf_per_page() {
    gc_leaf_per_page(60, 6, false);
}

/// The same at 85 % of `capacity_pages` (objects x 4 leaves, with the 4-page cache
/// the worst layout: every copy GC makes writes an index page back). Each overwrite's
/// foreground collection is bounded (it used to spin through the whole device, 2,800
/// programs and 175 erases for one write, then fail). Writes may fail with `NoSpace`
/// here; nothing is lost, and deleting an object makes room again.
#[test]
fn gc_with_a_leaf_per_page_near_capacity() {
    gc_leaf_per_page(85, 4, true);
}

/// Objects of `leaves` one-page leaves (each object costs a metadata page, a root and
/// a leaf plus a data page per leaf) filling `pct` % of the capacity.
fn gc_leaf_per_page(pct: u64, leaves: u32, near_capacity: bool) {
    for seed in 0..2u64 {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(300 + seed));
        let mut fs = Fs::<Greedy>::formatted(&mut sim, cfg()).unwrap();
        let n_objs = (fs.capacity_pages() * pct / 100 / (2 * leaves as u64 + 2)) as u32;
        let mut rng = Rng(seed + 99);
        let ids: Vec<u32> = (0..n_objs)
            .map(|_| fs.create(ObjKind::Object).unwrap())
            .collect();
        let mut model: BTreeMap<(u32, u32), u8> = BTreeMap::new();
        for l in 0..leaves {
            for &id in &ids {
                let lpn = l * 512;
                fs.write(id, lpn as u64 * PAGE, &[l as u8 + 1; 2048])
                    .unwrap();
                fs.flush(id).unwrap();
                model.insert((id, lpn), l as u8 + 1);
            }
        }
        let used0 = fs.used_pages();
        for step in 0..3000u32 {
            let id = ids[rng.below(ids.len() as u64) as usize];
            let lpn = rng.below(leaves as u64) as u32 * 512;
            let b = rng.next() as u8;
            let c0 = fs.flash().counters();
            let w = fs.write(id, lpn as u64 * PAGE, &[b; 2048]);
            let wrote = w.is_ok();
            let r = w.and_then(|()| fs.flush(id));
            if near_capacity && wrote && r.is_err() {
                panic!("step {step}: write ok, flush {r:?}");
            }
            let cost = (fs.flash().counters() - c0).programs;
            assert!(
                cost <= 1_000,
                "seed {seed} step {step}: {cost} programs for one write"
            );
            if near_capacity && r == Err(oftl::WriteError::NoSpace) {
                // Nothing of the failed write may show.
                let mut buf = [0u8; 2048];
                fs.read(id, lpn as u64 * PAGE, &mut buf).unwrap();
                let want = model.get(&(id, lpn)).copied().unwrap_or(0);
                assert!(
                    buf.iter().all(|&x| x == want),
                    "seed {seed} step {step}: a write that failed with NoSpace shows"
                );
                continue;
            }
            if let Err(e) = r {
                let c = fs.flash().counters() - c0;
                panic!(
                    "seed {seed} step {step}: {e:?} with {} of {} pages used (after setup {used0}), after {} programs and {} erases",
                    fs.used_pages(),
                    fs.capacity_pages(),
                    c.programs,
                    c.erases
                );
            }
            model.insert((id, lpn), b);
            if step % 500 == 499 {
                fs.unmount().unwrap();
                fs = Fs::<Greedy>::mounted(&mut sim).unwrap();
            }
        }
        for (&(id, lpn), &b) in &model {
            let mut buf = [0u8; 2048];
            fs.read(id, lpn as u64 * PAGE, &mut buf).unwrap();
            assert!(buf.iter().all(|&x| x == b), "seed {seed}: {id} page {lpn}");
        }
        drop(fs);
        assert_eq!(sim.counters().misuse, 0);
    }
}

/// Fills 60 sparse objects (one data page per index leaf) until writes fail with
/// `NoSpace`; returns the model of what was written.
fn fill_until_nospace(fs: &mut Fs<'_, Greedy>) -> BTreeMap<(u32, u32), u8> {
    let ids: Vec<u32> = (0..60)
        .map(|_| fs.create(ObjKind::Object).unwrap())
        .collect();
    let mut model: BTreeMap<(u32, u32), u8> = BTreeMap::new();
    let mut failed = 0;
    for l in 0..5u32 {
        for &id in &ids {
            let lpn = l * 512;
            let r = fs
                .write(id, lpn as u64 * PAGE, &[l as u8 + 1; 2048])
                .and_then(|()| fs.flush(id));
            match r {
                Ok(()) => {
                    model.insert((id, lpn), l as u8 + 1);
                }
                Err(oftl::WriteError::NoSpace) => failed += 1,
                Err(e) => panic!("{e:?}"),
            }
        }
    }
    assert!(failed > 0);
    model
}

fn check_pages(fs: &mut Fs<'_, Greedy>, model: &BTreeMap<(u32, u32), u8>) {
    for (&(id, lpn), &b) in model {
        let mut buf = [0u8; 2048];
        fs.read(id, lpn as u64 * PAGE, &mut buf).unwrap();
        assert!(buf.iter().all(|&x| x == b), "{id} page {lpn}");
    }
}

/// A full device that loses power twice in a row (the second time right after the
/// recovery mount, before any write) must still mount.
#[test]
fn full_device_survives_two_crashes() {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(301));
    let mut fs = Fs::<Greedy>::formatted(&mut sim, cfg()).unwrap();
    let model = fill_until_nospace(&mut fs);
    // What a user does next: read back, try to make it durable and unmount (both
    // fail: the failed write's page is still buffered; the store is gone), mount.
    check_pages(&mut fs, &model);
    let _ = fs.sync();
    let _ = fs.unmount();
    let fs = Fs::<Greedy>::mounted(&mut sim).unwrap();
    let free = free_blocks(&fs);
    drop(fs);
    match Fs::<Greedy>::mounted(&mut sim) {
        Ok(mut fs) => check_pages(&mut fs, &model),
        Err(e) => panic!("second recovery: {e:?} (the first left {free} free blocks)"),
    }
    assert_eq!(sim.counters().misuse, 0);
}
