//! Object ids reused once the table's bound is reached.
//!
//! Ids used never to be reused: a store refused every create (`TooManyObjects`) for
//! good once it had created as many objects as its table can hold, however few were
//! live: 2^18 - 1 creations with 512-byte metadata units (a file created and deleted
//! every second: three days), 2^24 - 1 with whole pages (a mail-like workload at full
//! speed: a day). Found while testing log positions past their field widths
//! (`log_positions.rs`); the first test here is that wedge, reached by creating.
//!
//! The others jump the ids forward with the hidden `Oftl::skip_object_ids_to` and
//! check: live objects on both sides of the cursor are skipped and keep their
//! contents; ids are handed out again in order; a transaction's creates get
//! consecutive free ids; the cursor survives clean and crashed remounts (a version-4
//! checkpoint records it) and a rebuild; every cut of a workload across the wrap
//! recovers to an acknowledged state, with cuts during the recoveries too.

use crate::common;

use std::collections::BTreeMap;

use common::lifecycle::Lifecycle;
use common::*;
use nand_hal::powerloss::{self, CheckError, RecoveryCuts, Scenario, Schedule, Sweep};
use nand_hal::sim::{profile, CutKind, Profile};
use nand_hal::ErrorKind;
use oftl::{Greedy, MountError, ObjKind, Oftl, TxOp, WriteError, ATTR_LEN, ID_RUN};

type Store<'a, const M: usize> = Oftl<&'a mut Sim, 2048, 64, 4, 2, Greedy, M>;

fn content(id: u32, seed: u32) -> Vec<u8> {
    bytes(
        id.wrapping_mul(7919) ^ seed,
        100 + (seed as usize * 37) % 3000,
    )
}

/// Every live object and its contents, through the store's own iteration.
fn observe<const M: usize>(fs: &mut Store<'_, M>) -> Result<BTreeMap<u32, Vec<u8>>, String> {
    let ids: Vec<u32> = fs
        .objects()
        .collect::<Result<_, _>>()
        .map_err(|e| format!("objects: {e:?}"))?;
    let mut out = BTreeMap::new();
    for id in ids {
        let mut buf = vec![0u8; 8192];
        let n = fs
            .read(id, 0, &mut buf)
            .map_err(|e| format!("read {id}: {e:?}"))?;
        buf.truncate(n);
        out.insert(id, buf);
    }
    Ok(out)
}

/// The wedge itself, by creating: a small-metadata store creates and deletes objects
/// past its 2^18 - 1 ids, with a few kept live among them.
#[test]
fn a_store_creates_objects_past_its_id_bound() {
    let mut sim = Sim::heap(profile::TINY, nand_hal::sim::FaultPlan::seeded(1));
    let mut fs = Store::<512>::formatted(&mut sim, cfg()).unwrap();
    let max = fs.max_object_id();
    assert_eq!(max, (1 << 18) - 1);
    let mut kept = BTreeMap::new();
    let mut last = 0;
    let mut wrapped = 0;
    for i in 0..max + 3000 {
        let id = fs.create(ObjKind::Object).unwrap();
        if id < last {
            wrapped += 1;
        }
        last = id;
        assert!(
            !kept.contains_key(&id),
            "id {id} of a live object handed out again"
        );
        if i % 40_000 == 7 || i == max - 5 || i == max + 100 {
            let data = content(id, i);
            fs.write(id, 0, &data).unwrap();
            kept.insert(id, data);
        } else {
            fs.delete(id).unwrap();
        }
    }
    assert_eq!(wrapped, 1);
    fs.unmount().unwrap();
    let mut fs = Store::<512>::mounted(&mut sim).unwrap();
    let seen = observe(&mut fs).unwrap();
    assert_eq!(seen, kept);
}

fn wrap_and_check<const M: usize>() {
    let mut sim = Sim::heap(profile::TINY, nand_hal::sim::FaultPlan::seeded(2));
    let mut fs = Store::<M>::formatted(&mut sim, cfg()).unwrap();
    let max = fs.max_object_id();
    let mut want = BTreeMap::new();
    // Ids 1..=12; every third kept.
    for i in 1..=12u32 {
        let id = fs.create(ObjKind::Object).unwrap();
        assert_eq!(id, i);
        if i % 3 == 0 {
            fs.write(id, 0, &content(id, 1)).unwrap();
            want.insert(id, content(id, 1));
        } else {
            fs.delete(id).unwrap();
        }
    }
    // Jump towards the bound; objects just below it stay live.
    fs.skip_object_ids_to(max - 10).unwrap();
    for k in 0..4 {
        let id = fs.create(ObjKind::Object).unwrap();
        assert_eq!(id, max - 10 + k);
        if k == 1 {
            fs.delete(id).unwrap();
        } else {
            fs.write(id, 0, &content(id, 2)).unwrap();
            want.insert(id, content(id, 2));
        }
    }
    // Fewer than `ID_RUN` left below the bound: the cursor went back to the first
    // free run of `ID_RUN` ids (3, 6, 9, 12 live: 13 on).
    assert_eq!(fs.next_object_id(), 13);
    fs.sync().unwrap();
    // A transaction's creates: consecutive free ids, named by its other ops.
    let first = fs.next_object_id();
    let data: Vec<Vec<u8>> = (0..ID_RUN).map(|k| content(first + k, 3)).collect();
    let mut ops = Vec::new();
    for _ in 0..ID_RUN {
        ops.push(TxOp::Create {
            kind: ObjKind::Object,
            attrs: [0; ATTR_LEN],
        });
    }
    for k in 0..ID_RUN {
        ops.push(TxOp::Write {
            obj: first + k,
            offset: 0,
            data: &data[k as usize],
        });
    }
    fs.transact(&ops).unwrap();
    for k in 0..ID_RUN {
        want.insert(first + k, data[k as usize].clone());
    }
    assert_eq!(observe(&mut fs).unwrap(), want, "after the transaction");
    let cursor = fs.next_object_id();
    // A clean remount keeps the cursor (a version-4 checkpoint).
    fs.unmount().unwrap();
    let mut fs = Store::<M>::mounted(&mut sim).unwrap();
    assert_eq!(fs.next_object_id(), cursor, "cursor after a clean remount");
    assert_eq!(observe(&mut fs).unwrap(), want, "after a clean remount");
    // Creates since the last checkpoint, then a crash: recovery replays them in order
    // and the cursor continues after the last.
    let mut made = Vec::new();
    for k in 0..5u32 {
        let id = fs.create(ObjKind::Object).unwrap();
        fs.write(id, 0, &content(id, 4 + k)).unwrap();
        fs.flush(id).unwrap();
        want.insert(id, content(id, 4 + k));
        made.push(id);
    }
    let cursor = fs.next_object_id();
    drop(fs);
    let mut fs = Store::<M>::mounted(&mut sim).unwrap();
    assert_eq!(
        fs.next_object_id(),
        cursor,
        "cursor after a crash ({made:?})"
    );
    assert_eq!(observe(&mut fs).unwrap(), want, "after a crash");
    // Deleting the live objects at the bound and collecting: the ids come round again.
    for id in [max - 10, max - 8, max - 7] {
        fs.delete(id).unwrap();
        want.remove(&id);
    }
    while fs.gc_step(64).unwrap().more {}
    fs.unmount().unwrap();
    // A rebuild from the pages' tags alone keeps every live object and hands out ids
    // no live object has.
    let mut fs = Store::<M>::new(&mut sim, cfg(), Default::default());
    fs.mount_damaged(oftl::Damaged::Rebuild {
        lost_meta_attrs: [0xFF; ATTR_LEN],
    })
    .unwrap();
    assert_eq!(observe(&mut fs).unwrap(), want, "after a rebuild");
    for _ in 0..20 {
        let id = fs.create(ObjKind::Object).unwrap();
        assert!(
            !want.contains_key(&id),
            "live id {id} handed out after a rebuild"
        );
        want.insert(id, Vec::new());
    }
    fs.unmount().unwrap();
    let mut fs = Store::<M>::mounted(&mut sim).unwrap();
    assert_eq!(
        observe(&mut fs).unwrap(),
        want,
        "after work on the rebuilt store"
    );
}

#[test]
fn ids_wrap_skip_live_objects_and_survive_remounts() {
    wrap_and_check::<2048>();
}

#[test]
fn ids_wrap_skip_live_objects_and_survive_remounts_small_metadata_units() {
    wrap_and_check::<512>();
}

// ---------------------------------------------------------------------------------------
// Power cuts across the wrap

#[derive(Clone, Debug)]
enum Step {
    /// Create an object and write `len` bytes to it, in one transaction.
    Make(u32),
    /// Delete the `n`-th live object (by id order).
    Drop(usize),
    /// Create two objects and delete the `n`-th live one, in one transaction.
    Swap(usize),
    Sync,
}

/// Acknowledged objects, and the ones the step in flight may have left instead.
#[derive(Clone, Debug, Default)]
struct Acked {
    now: BTreeMap<u32, Vec<u8>>,
    maybe: Option<BTreeMap<u32, Vec<u8>>>,
}

struct AcrossTheWrap {
    steps: Vec<Step>,
}

type S<'a> = Store<'a, 512>;

impl AcrossTheWrap {
    /// Runs `step` (its creates take the ids the store names now); returns the state
    /// it leaves.
    fn apply(
        fs: &mut S<'_>,
        now: &BTreeMap<u32, Vec<u8>>,
        step: &Step,
        run: bool,
    ) -> Result<BTreeMap<u32, Vec<u8>>, WriteError<nand_hal::sim::SimError>> {
        let mut after = now.clone();
        let first = fs.next_object_id();
        let nth = |n: usize| now.keys().nth(n % now.len().max(1)).copied();
        match *step {
            Step::Make(len) => {
                let data = bytes(first, len as usize);
                if run {
                    fs.transact(&[
                        TxOp::Create {
                            kind: ObjKind::Object,
                            attrs: [0; ATTR_LEN],
                        },
                        TxOp::Write {
                            obj: first,
                            offset: 0,
                            data: &data,
                        },
                    ])?;
                }
                after.insert(first, data);
            }
            Step::Drop(n) => {
                if let Some(id) = nth(n) {
                    if run {
                        fs.delete(id)?;
                    }
                    after.remove(&id);
                }
            }
            Step::Swap(n) => {
                let victim = nth(n);
                let a = bytes(first, 300);
                let b = bytes(first + 1, 2500);
                let mut ops = vec![
                    TxOp::Create {
                        kind: ObjKind::Object,
                        attrs: [0; ATTR_LEN],
                    },
                    TxOp::Create {
                        kind: ObjKind::Object,
                        attrs: [0; ATTR_LEN],
                    },
                    TxOp::Write {
                        obj: first,
                        offset: 0,
                        data: &a,
                    },
                    TxOp::Write {
                        obj: first + 1,
                        offset: 0,
                        data: &b,
                    },
                ];
                if let Some(v) = victim {
                    ops.push(TxOp::Delete { obj: v });
                    after.remove(&v);
                }
                if run {
                    fs.transact(&ops)?;
                }
                after.insert(first, a);
                after.insert(first + 1, b);
            }
            Step::Sync => {
                if run {
                    fs.sync()?;
                }
            }
        }
        Ok(after)
    }
}

impl Scenario for AcrossTheWrap {
    type Oracle = Acked;

    fn name(&self) -> &str {
        "ids-across-the-wrap"
    }

    fn profile(&self) -> Profile {
        profile::TINY
    }

    fn setup(&self, nand: &mut Sim) -> Result<Acked, String> {
        let mut fs = S::formatted(nand, cfg()).map_err(|e| format!("{e:?}"))?;
        let max = fs.max_object_id();
        let mut now = BTreeMap::new();
        // Live objects at low ids with holes between them, and just below the bound.
        for i in 1..=20u32 {
            let id = fs.create(ObjKind::Object).map_err(|e| format!("{e:?}"))?;
            if i % 4 == 1 || i == 14 {
                fs.write(id, 0, &bytes(id, 500))
                    .map_err(|e| format!("{e:?}"))?;
                now.insert(id, bytes(id, 500));
            } else {
                fs.delete(id).map_err(|e| format!("{e:?}"))?;
            }
        }
        fs.skip_object_ids_to(max - 10)
            .map_err(|e| format!("{e:?}"))?;
        fs.unmount().map_err(|e| format!("{e:?}"))?;
        Ok(Acked { now, maybe: None })
    }

    fn run(&self, nand: &mut Sim, o: &mut Acked) -> Result<(), String> {
        let mut fs = S::mounted(nand).map_err(|e| format!("mount: {e:?}"))?;
        for step in &self.steps {
            let after = Self::apply(&mut fs, &o.now, step, false).map_err(|e| format!("{e:?}"))?;
            o.maybe = Some(after);
            let after =
                Self::apply(&mut fs, &o.now, step, true).map_err(|e| format!("{step:?}: {e:?}"))?;
            o.now = after;
            o.maybe = None;
        }
        fs.unmount().map_err(|e| format!("unmount: {e:?}"))
    }

    fn check(&self, nand: &mut Sim, o: &Acked) -> Result<(), CheckError> {
        let lost = |k: ErrorKind| k == ErrorKind::PowerLoss;
        let mut fs = match S::mounted(nand) {
            Ok(fs) => fs,
            Err(MountError::Flash(e)) if lost(nand_hal::Error::kind(&e)) => {
                return Err(CheckError::PowerLoss)
            }
            Err(e) => return Err(format!("mount: {e:?}").into()),
        };
        let seen = match observe(&mut fs) {
            Ok(s) => s,
            Err(e) if e.contains("PowerLoss") => return Err(CheckError::PowerLoss),
            Err(e) => return Err(e.into()),
        };
        if seen != o.now && Some(&seen) != o.maybe.as_ref() {
            return Err(format!(
                "objects {:?}, acknowledged {:?}, in flight {:?}",
                seen.keys().collect::<Vec<_>>(),
                o.now.keys().collect::<Vec<_>>(),
                o.maybe.as_ref().map(|m| m.keys().collect::<Vec<_>>())
            )
            .into());
        }
        // The cursor names a free id: a create now must not land on a live object.
        let id = fs.next_object_id();
        if seen.contains_key(&id) {
            return Err(format!("the cursor {id} names a live object").into());
        }
        Ok(())
    }
}

fn across_the_wrap() -> AcrossTheWrap {
    let mut steps = Vec::new();
    for i in 0..14u32 {
        steps.push(match i % 7 {
            0 | 3 => Step::Make(200 + i * 150),
            1 => Step::Swap(i as usize),
            2 => Step::Drop(i as usize * 3),
            4 => Step::Make(2100),
            5 => Step::Swap(1),
            _ => Step::Sync,
        });
    }
    AcrossTheWrap { steps }
}

/// Every program and erase of a workload whose creates wrap the ids, every cut kind;
/// then cuts during the recoveries.
#[test]
fn power_cuts_across_the_wrap() {
    let s = across_the_wrap();
    let r = powerloss::sweep(&s, &Sweep::exhaustive(41));
    println!("{}: {} runs, {} cuts", s.name(), r.runs, r.cuts);
    r.assert_ok();
    assert!(r.cuts > 100, "{} cuts", r.cuts);
    let mut sw = Sweep::exhaustive(42);
    sw.schedule = Schedule::Log;
    sw.recovery_cuts = RecoveryCuts::Exhaustive;
    sw.kinds = vec![
        CutKind::Clean,
        CutKind::Torn(nand_hal::sim::TornMode::Random),
    ];
    let r = powerloss::sweep(&s, &sw);
    println!(
        "{} with recovery cuts: {} runs, {} recovery cuts",
        s.name(),
        r.runs,
        r.recovery_cuts
    );
    r.assert_ok();
    assert!(r.recovery_cuts > 20);
}
