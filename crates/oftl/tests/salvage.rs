//! Salvage and repair mounts past unreadable pages of the updating window: the replay
//! of each head stops at its first loss, so every object holds a state it had (never a
//! mix), the objects whose later changes were left out are named, and a repair makes
//! that state the store's, surviving power cuts and read errors of its own.

#![allow(dead_code)]

use crate::common;
use common::lifecycle::Lifecycle;

use common::pages::{all_pages, changed_pages, data_head, kill, Pg};
use common::repair;
use common::{bytes, cfg, Fs, Rng, Sim};
use nand_hal::sim::profile::TINY;
use nand_hal::sim::FaultPlan;
use nand_hal::NandFlash;
use oftl::format::backpointer::PageKind;
use std::collections::BTreeMap;

use oftl::{Greedy, MountError, ObjKind, Oftl, ReadError, SalvageReport, TxOp, WriteError};

const PAGE: usize = 2048;

fn read_all<F: NandFlash>(
    fs: &mut Oftl<F, 2048, 64, 4, 2, Greedy>,
    id: u32,
) -> Result<Vec<u8>, ReadError<F::Error>> {
    let n = fs.size(id)? as usize;
    let mut b = vec![0u8; n];
    let got = fs.read(id, 0, &mut b)?;
    assert_eq!(got, n);
    Ok(b)
}

/// T1 (x, 3 pages) and T2 (y, 3 pages) after a sync, then T3 (z); T1's commit page
/// and T2's first page become unreadable (found by an independent review: T2 was once
/// applied in part).
#[test]
fn gap_across_a_transaction_boundary_stops_the_replay_before_both() {
    let mut sim = Sim::heap(TINY, FaultPlan::seeded(5));
    let (x, y, z);
    let v0x = bytes(1, 3 * PAGE);
    let v0y = bytes(2, 3 * PAGE);
    let v1x = bytes(3, 3 * PAGE);
    let v1y = bytes(4, 3 * PAGE);
    let v1z = bytes(5, 3 * PAGE);
    let before;
    {
        let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
        x = fs.create(ObjKind::Object).unwrap();
        y = fs.create(ObjKind::Object).unwrap();
        z = fs.create(ObjKind::Object).unwrap();
        fs.write(x, 0, &v0x).unwrap();
        fs.write(y, 0, &v0y).unwrap();
        fs.sync().unwrap();
        before = Sim::clone(&**fs.flash());
        fs.transact(&[TxOp::Write {
            obj: x,
            offset: 0,
            data: &v1x,
        }])
        .unwrap();
        fs.transact(&[TxOp::Write {
            obj: y,
            offset: 0,
            data: &v1y,
        }])
        .unwrap();
        fs.transact(&[TxOp::Write {
            obj: z,
            offset: 0,
            data: &v1z,
        }])
        .unwrap();
    }
    let old: std::collections::HashSet<u32> = data_head(&before).iter().map(|p| p.page).collect();
    let new: Vec<Pg> = data_head(&sim)
        .into_iter()
        .filter(|p| !old.contains(&p.page))
        .collect();
    let t1: Vec<&Pg> = new.iter().filter(|p| p.owner == x).collect();
    let t2: Vec<&Pg> = new.iter().filter(|p| p.owner == y).collect();
    let a = t1.last().unwrap().page;
    let b = t2.first().unwrap().page;
    kill(&mut sim, a);
    kill(&mut sim, b);
    assert!(matches!(
        Fs::mounted(&mut sim),
        Err(MountError::MediaLoss { .. })
    ));
    let mut fs = Fs::new(&mut sim, oftl::Config::new(), Default::default());
    fs.mount_damaged(oftl::Damaged::Salvage).unwrap();
    let gx = read_all(&mut fs, x).unwrap();
    let gy = read_all(&mut fs, y).unwrap();
    let gz = read_all(&mut fs, z).unwrap();
    assert!(gx == v0x, "x: its commit page is lost, so T1 is left out");
    assert!(
        gy == v0y,
        "y: T2 has a page in the gap, so it is left out whole (pages: {:?})",
        (0..3)
            .map(|i| (
                gy[i * PAGE..(i + 1) * PAGE] == v0y[i * PAGE..(i + 1) * PAGE],
                gy[i * PAGE..(i + 1) * PAGE] == v1y[i * PAGE..(i + 1) * PAGE]
            ))
            .collect::<Vec<_>>()
    );
    assert!(
        gz.is_empty(),
        "z: T3 is after the loss, so the replay stopped before it"
    );
    let report = fs.salvage_report().clone();
    assert_eq!(report.unreadable_pages(), &[a, b]);
    for id in [x, y, z] {
        assert!(report.may_have_rolled_back(id), "{id} is named: {report:?}");
    }
}

/// Every acknowledged state of every object, oldest first (`None`: deleted).
type History = BTreeMap<u32, Vec<Option<Vec<u8>>>>;
/// Objects as a store shows them.
type Snapshot = BTreeMap<u32, Result<Option<Vec<u8>>, String>>;

fn cur(h: &History, id: u32) -> Option<Vec<u8>> {
    h.get(&id).and_then(|v| v.last().cloned().flatten())
}

fn push(h: &mut History, id: u32, s: Option<Vec<u8>>) {
    h.entry(id).or_default().push(s);
}

/// `n` random acknowledged operations: create, write, two-object transactions,
/// truncate, delete, and GC steps.
fn work(fs: &mut Fs<'_>, rng: &mut Rng, h: &mut History, ids: &mut Vec<u32>, n: usize) {
    let mut tag = rng.next() as u32;
    for _ in 0..n {
        tag = tag.wrapping_add(1);
        let k = rng.below(100);
        if ids.is_empty() || k < 8 {
            let id = fs.create(ObjKind::Object).unwrap();
            ids.push(id);
            push(h, id, Some(Vec::new()));
            continue;
        }
        let id = ids[rng.below(ids.len() as u64) as usize];
        let mut d = cur(h, id).unwrap();
        let put = |d: &mut Vec<u8>, off: usize, data: &[u8]| {
            if d.len() < off + data.len() {
                d.resize(off + data.len(), 0);
            }
            d[off..off + data.len()].copy_from_slice(data);
        };
        if k < 45 {
            let off = rng.below(3 * PAGE as u64) as usize;
            let data = bytes(tag, 1 + rng.below(5 * PAGE as u64 / 2) as usize);
            match fs.write(id, off as u64, &data).and_then(|_| fs.flush(id)) {
                Ok(()) => {}
                Err(WriteError::NoSpace) => continue,
                Err(e) => panic!("{e:?}"),
            }
            put(&mut d, off, &data);
            push(h, id, Some(d));
        } else if k < 65 && ids.len() >= 2 {
            let id2 = ids[rng.below(ids.len() as u64) as usize];
            if id2 == id {
                continue;
            }
            let a = bytes(tag, 1 + rng.below(2 * PAGE as u64) as usize);
            let b = bytes(tag ^ 0x55, 1 + rng.below(2 * PAGE as u64) as usize);
            let (oa, ob) = (rng.below(2 * PAGE as u64), rng.below(2 * PAGE as u64));
            let ops = [
                TxOp::Write {
                    obj: id,
                    offset: oa,
                    data: &a,
                },
                TxOp::Write {
                    obj: id2,
                    offset: ob,
                    data: &b,
                },
            ];
            match fs.transact(&ops) {
                Ok(()) => {}
                Err(WriteError::NoSpace) => continue,
                Err(e) => panic!("{e:?}"),
            }
            let mut d2 = cur(h, id2).unwrap();
            put(&mut d, oa as usize, &a);
            put(&mut d2, ob as usize, &b);
            push(h, id, Some(d));
            push(h, id2, Some(d2));
        } else if k < 75 {
            let size = rng.below(d.len() as u64 + PAGE as u64) as usize;
            match fs.truncate(id, size as u64) {
                Ok(()) => {}
                Err(WriteError::NoSpace) => continue,
                Err(e) => panic!("{e:?}"),
            }
            d.resize(size, 0);
            push(h, id, Some(d));
        } else if k < 80 {
            match fs.delete(id) {
                Ok(()) => {}
                Err(WriteError::NoSpace) => continue,
                Err(e) => panic!("{e:?}"),
            }
            ids.retain(|&x| x != id);
            push(h, id, None);
        } else {
            match fs.gc_step(4) {
                Ok(_) | Err(WriteError::NoSpace) => {}
                Err(e) => panic!("{e:?}"),
            }
        }
    }
}

fn snapshot(fs: &mut Fs<'_>, h: &History) -> Snapshot {
    h.keys()
        .map(|&id| {
            let r = match fs.exists(id) {
                Ok(false) => Ok(None),
                Ok(true) => read_all(fs, id).map(Some).map_err(|e| format!("{e:?}")),
                Err(e) => Err(format!("{e:?}")),
            };
            (id, r)
        })
        .collect()
}

/// A store with `pre` operations, a sync, then `post` more, cut off without unmount;
/// with the image right after the sync. `None` if the store checkpointed again after
/// the sync (the pages since are then not all in the updating window).
fn crashed_store(seed: u64, pre: usize, post: usize) -> Option<(Sim, Sim, History)> {
    let mut sim = Sim::heap(TINY, FaultPlan::seeded(seed));
    let mut h = History::new();
    let mut ids = Vec::new();
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let synced;
    {
        let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
        work(&mut fs, &mut rng, &mut h, &mut ids, pre);
        fs.sync().unwrap();
        synced = Sim::clone(&**fs.flash());
        let checkpoints = fs.stats().checkpoints;
        work(&mut fs, &mut rng, &mut h, &mut ids, post);
        if fs.stats().checkpoints != checkpoints {
            return None;
        }
    }
    Some((sim, synced, h))
}

/// The salvage guarantee: every object in a state it had; one not in its latest state
/// is named by the report. Returns the problems.
/// `tags`: the image's page tags as written, so that the owners of pages at or after
/// the report's lost page may go unnamed (what does not read cannot be named).
fn held_states(
    got: &Snapshot,
    h: &History,
    report: &SalvageReport,
    tags: &[Pg],
    tag: &str,
) -> Vec<String> {
    let mut problems = Vec::new();
    let from = report
        .unreadable_pages()
        .iter()
        .filter_map(|l| tags.iter().find(|p| p.page == *l))
        .map(|p| p.seq)
        .min();
    let unknown: Vec<u32> = tags
        .iter()
        .filter(|p| {
            matches!(p.kind, PageKind::Data | PageKind::Meta)
                && !p.relocated
                && from.is_some_and(|f| p.seq >= f)
        })
        .map(|p| p.owner)
        .collect();
    for (id, r) in got {
        let st = match r {
            Ok(st) => st,
            Err(e) => {
                problems.push(format!("{tag}: object {id} does not read: {e}"));
                continue;
            }
        };
        let states = &h[id];
        // Deleted or never created ones read as absent.
        let had = states.contains(st) || st.is_none();
        if !had {
            problems.push(format!("{tag}: object {id} in a state it never had"));
        } else if *st != cur(h, *id) && !report.may_have_rolled_back(*id) && !unknown.contains(id) {
            problems.push(format!(
                "{tag}: object {id} rolled back but not named ({report:?})"
            ));
        }
    }
    problems
}

/// Every page programmed since the last checkpoint made unreadable in turn: a normal
/// mount either mounts the acknowledged state or refuses (`MediaLoss`); then salvage
/// shows states the objects had, the rolled back ones named; repair makes that state
/// the store's (mounting normally after), and the repaired store takes more work and
/// a crash.
#[test]
fn every_window_page_lost_in_turn() {
    let mut problems: Vec<String> = Vec::new();
    let mut refused = 0;
    let mut stores = 0;
    for seed in 1..=12u64 {
        let Some((base, synced, h)) = crashed_store(seed, 120, 12) else {
            continue;
        };
        stores += 1;
        let tags = all_pages(&base);
        let last = data_head(&base).last().map(|p| p.page);
        for v in changed_pages(&synced, &base) {
            let tag = format!("seed {seed} page {v}");
            let mut s = base.clone();
            kill(&mut s, v);
            match Fs::mounted(&mut s) {
                // The data head's last page unreadable reads as the page a cut tore: its
                // transaction is dropped (no read tells a torn page from a lost one).
                Ok(_) if Some(v) == last => continue,
                Ok(mut fs) => {
                    for (id, r) in snapshot(&mut fs, &h) {
                        if r != Ok(cur(&h, id)) {
                            problems.push(format!(
                                "{tag}: normal mount: object {id} not as acknowledged"
                            ));
                        }
                    }
                    continue;
                }
                Err(MountError::MediaLoss { .. }) => refused += 1,
                Err(e) => {
                    problems.push(format!("{tag}: normal mount {e:?}"));
                    continue;
                }
            }
            let (sal, report) = {
                let mut fs = Fs::new(&mut s, oftl::Config::new(), Default::default());
                if let Err(e) = fs.mount_damaged(oftl::Damaged::Salvage) {
                    problems.push(format!("{tag}: salvage {e:?}"));
                    continue;
                }
                (snapshot(&mut fs, &h), fs.salvage_report().clone())
            };
            problems.extend(held_states(&sal, &h, &report, &tags, &tag));
            {
                let mut fs = Fs::new(&mut s, oftl::Config::new(), Default::default());
                if let Err(e) = fs.mount_damaged(oftl::Damaged::Repair) {
                    problems.push(format!("{tag}: repair {e:?}"));
                    continue;
                }
                if *fs.salvage_report() != report {
                    problems.push(format!("{tag}: repair reports otherwise than salvage"));
                }
            }
            let mut fs = match Fs::mounted(&mut s) {
                Ok(f) => f,
                Err(e) => {
                    problems.push(format!("{tag}: mount after repair {e:?}"));
                    continue;
                }
            };
            let got = snapshot(&mut fs, &h);
            if got != sal {
                problems.push(format!("{tag}: repaired state differs from salvage"));
            }
            // More work and a crash on the repaired store.
            let mut h2 = History::new();
            let mut ids2 = Vec::new();
            for (id, r) in &got {
                if let Ok(Some(d)) = r {
                    h2.insert(*id, vec![Some(d.clone())]);
                    ids2.push(*id);
                }
            }
            work(
                &mut fs,
                &mut Rng(v as u64 * 7 + seed),
                &mut h2,
                &mut ids2,
                200,
            );
            drop(fs);
            match Fs::mounted(&mut s) {
                Ok(mut fs) => {
                    for (id, r) in snapshot(&mut fs, &h2) {
                        if r != Ok(cur(&h2, id)) {
                            problems.push(format!(
                                "{tag}: after repair, work and a crash: object {id} wrong"
                            ));
                        }
                    }
                }
                Err(e) => {
                    problems.push(format!("{tag}: mount after repair, work and a crash {e:?}"))
                }
            }
            if s.counters().misuse != 0 {
                problems.push(format!("{tag}: misuse {:?}", s.last_misuse()));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(stores >= 8, "{stores} stores");
    assert!(
        refused >= 100,
        "only {refused} losses refused a normal mount"
    );
}

/// A power cut at every program and erase of a repair (every cut kind): afterwards
/// the store repairs again (or already mounts) to the same state.
#[test]
fn power_cuts_during_repair() {
    let mut problems: Vec<String> = Vec::new();
    let mut runs = 0;
    let mut stores = 0;
    for seed in 1..=5u64 {
        let Some((base, synced, h)) = crashed_store(seed, 120, 12) else {
            continue;
        };
        stores += 1;
        let lost = repair::losses_that_refuse_a_mount(&synced, &base);
        let mut sets: Vec<Vec<u32>> = (0..3)
            .filter_map(|i| lost.get(i * lost.len() / 3).map(|&v| vec![v]))
            .collect();
        if lost.len() >= 2 {
            sets.push(vec![lost[0], lost[lost.len() - 1]]);
        }
        for set in sets {
            let mut s = base.clone();
            for &v in &set {
                kill(&mut s, v);
            }
            let name = format!("seed {seed} {set:?}");
            runs += repair::with_power_cuts(&s, &name, 400, &mut problems, |fs| snapshot(fs, &h));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems in {runs} runs:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(stores >= 3, "{stores} stores");
    assert!(runs >= 50, "{runs} cuts");
}

/// Read errors at every read of a repair (one read, or eight in a row: more than the
/// retries): a repair that fails can be run again; the repaired state holds states
/// the objects had, every rolled back one named.
#[test]
fn read_errors_during_repair() {
    let mut problems: Vec<String> = Vec::new();
    let mut runs = 0;
    let mut stores = 0;
    for seed in 1..=4u64 {
        let Some((base, synced, h)) = crashed_store(seed, 120, 12) else {
            continue;
        };
        stores += 1;
        let victim = changed_pages(&synced, &base).into_iter().rev().find(|&v| {
            let mut s = base.clone();
            kill(&mut s, v);
            matches!(Fs::mounted(&mut s), Err(MountError::MediaLoss { .. }))
        });
        let tags = all_pages(&base);
        for damaged in [victim, None] {
            let mut s = base.clone();
            if let Some(v) = damaged {
                kill(&mut s, v);
            }
            let name = format!("seed {seed} lost {damaged:?}");
            runs += repair::with_read_errors(&s, &name, &mut problems, |tag, report, fs, p| {
                let got = snapshot(fs, &h);
                p.extend(held_states(&got, &h, report, &tags, tag));
            });
        }
    }
    assert!(stores >= 2, "{stores} stores");
    assert!(
        problems.is_empty(),
        "{} problems in {runs} runs:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
