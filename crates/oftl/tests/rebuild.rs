//! The full-scan rebuild (`Oftl::mount_rebuild_in_place`): a store whose checkpoints,
//! index pages or object-table pages no longer read is made again from the pages'
//! backpointers. After it every object the store held reads exactly as acknowledged
//! (objects deleted long ago may come back, unnamed), the store takes more work and mounts normally, and a power cut anywhere
//! in the rebuild leaves a store that rebuilds to the same state.

#![cfg(feature = "alloc")]
#![allow(dead_code)]

use crate::common;
use common::lifecycle::Lifecycle;

use common::pages::{all_pages, kill};
use common::{cfg, run_op, Fs, Model, Op, Rng, Sim};
use nand_hal::sim::profile::TINY;
use nand_hal::sim::{CutKind, FaultPlan};
use nand_hal::NandFlash;
use oftl::format::backpointer::PageKind;
use oftl::{MountError, Oftl};

/// A random operation that never leaves a hole in an object (see the module docs of
/// the rebuild: a truncate whose metadata page was collected is unknown to a scan).
fn gen_op(rng: &mut Rng, m: &Model, logs: bool) -> Op {
    let slot = rng.below(8) as usize;
    let size = m
        .id_of(slot)
        .and_then(|id| m.objs.get(&id))
        .map_or(0, |o| o.0.len() as u64);
    match rng.below(100) {
        0..=9 => Op::Create,
        10..=11 if logs => Op::CreateLog,
        12..=44 => Op::Write {
            slot,
            off: rng.below(size + 1),
            len: 1 + rng.below(5000) as usize,
            seed: rng.next() as u32,
        },
        45..=52 => Op::Flush { slot },
        53..=55 => Op::Sync,
        56..=60 => Op::Truncate {
            slot,
            size: rng.below(size + 1),
        },
        61..=64 => Op::Delete { slot },
        65..=67 => Op::SetAttr {
            slot,
            v: rng.next() as u8,
        },
        68..=82 if logs => Op::Append {
            slot,
            len: 1 + rng.below(1900) as usize,
            seed: rng.next() as u32,
        },
        83..=86 if logs => Op::Trim {
            slot,
            n: rng.below(3) as usize,
        },
        _ => Op::Gc {
            budget: 1 + rng.below(8) as u32,
        },
    }
}

/// A synced store after `ops` random operations (GC and checkpoints well under way),
/// and the model of what it holds, with every object id ever deleted.
fn workload(seed: u64, ops: usize, logs: bool) -> (Sim, Model, Vec<u32>) {
    workload_on(TINY, seed, ops, logs)
}

fn workload_on(
    profile: nand_hal::sim::Profile,
    seed: u64,
    ops: usize,
    logs: bool,
) -> (Sim, Model, Vec<u32>) {
    workload_with(profile, cfg(), seed, ops, logs)
}

fn workload_with(
    profile: nand_hal::sim::Profile,
    config: oftl::Config,
    seed: u64,
    ops: usize,
    logs: bool,
) -> (Sim, Model, Vec<u32>) {
    let mut sim = Sim::heap(profile, FaultPlan::seeded(seed));
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut m = Model::new();
    let mut deleted = Vec::new();
    {
        let mut fs = Fs::formatted(&mut sim, config).unwrap();
        for _ in 0..ops {
            let op = gen_op(&mut rng, &m, logs);
            if run_op(&mut fs, &m, &op).is_ok() {
                let next = m.apply(&op);
                deleted.extend(
                    m.objs
                        .keys()
                        .chain(m.logs.keys())
                        .filter(|id| !next.objs.contains_key(id) && !next.logs.contains_key(id)),
                );
                m = next;
            }
        }
        fs.sync().unwrap();
        // Left mounted: the next mount sees the synced state without a clean flag.
    }
    (sim, m, deleted)
}

/// Pages of `kinds` on the image: tags in the spare area or at the end of the first
/// unit (`all_pages`), else at the end of the page (in-band trailers).
fn pages_of(sim: &Sim, kinds: &[PageKind]) -> Vec<u32> {
    use nand_hal::PageAddr;
    use oftl::format::backpointer::Backpointer;
    let mut out: Vec<u32> = all_pages(sim)
        .into_iter()
        .filter(|p| kinds.contains(&p.kind))
        .map(|p| p.page)
        .collect();
    let (mut d, mut o) = (vec![0u8; 2048], vec![0u8; 64]);
    for p in 0..sim.geometry().pages() {
        sim.peek(PageAddr(p), &mut d, &mut o);
        if let Ok(Some(bp)) = Backpointer::parse(&d[2032..2048]) {
            if kinds.contains(&bp.kind) && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// Every object of `want` reads as in `want`; anything else present is an object
/// deleted earlier (in `deleted`).
fn same_objects(seen: &Model, want: &Model, deleted: &[u32]) -> Result<(), String> {
    for (id, o) in &want.objs {
        match seen.objs.get(id) {
            Some(s) if s == o => {}
            Some(s) => {
                return Err(format!(
                    "object {id}: {} bytes attr {} (want {} bytes attr {})",
                    s.0.len(),
                    s.1,
                    o.0.len(),
                    o.1
                ))
            }
            None => return Err(format!("object {id} missing")),
        }
    }
    for (id, l) in &want.logs {
        if seen.logs.get(id) != Some(l) {
            return Err(format!(
                "log {id}: {:?} records (want {})",
                seen.logs.get(id).map(|l| l.len()),
                l.len()
            ));
        }
    }
    for id in seen.objs.keys().chain(seen.logs.keys()) {
        if !want.objs.contains_key(id) && !want.logs.contains_key(id) && !deleted.contains(id) {
            return Err(format!("object {id} was never acknowledged"));
        }
    }
    Ok(())
}

fn rebuild(sim: &mut Sim) -> Result<oftl::SalvageReport, MountError<nand_hal::sim::SimError>> {
    let mut fs = Fs::new(sim, oftl::Config::new(), Default::default());
    fs.mount_damaged(oftl::Damaged::Rebuild {
        lost_meta_attrs: [0xFF; oftl::ATTR_LEN],
    })?;
    Ok(fs.salvage_report().clone())
}

/// Rebuilds `damaged`, checks the result against `want`, then runs more work on it and
/// checks a normal mount after it.
fn rebuild_and_check(
    damaged: &Sim,
    want: &Model,
    deleted: &[u32],
    seed: u64,
) -> Result<(), String> {
    let mut sim = damaged.clone();
    let report = rebuild(&mut sim).map_err(|e| format!("rebuild: {e:?}"))?;
    if !report.rebuilt() {
        return Err("report does not say rebuilt".into());
    }
    if std::env::var("REBUILD_DEBUG").is_ok() {
        let mut fs = Fs::mounted(&mut sim).unwrap();
        let seen = common::observe(&mut fs).unwrap();
        eprintln!("state: {:?}", same_objects(&seen, want, deleted));
    }
    // Doubt is for objects whose metadata page did not read, or pages left without
    // one while some page did not read: never an object whose pages are all intact.
    if let Some(id) = report
        .rolled_back()
        .iter()
        .find(|id| want.objs.contains_key(id) || want.logs.contains_key(id))
    {
        return Err(format!("live object {id} in doubt: {report:?}"));
    }
    let mut seen = {
        let mut fs = Fs::mounted(&mut sim).map_err(|e| format!("mount after rebuild: {e:?}"))?;
        let seen = common::observe(&mut fs)?;
        same_objects(&seen, want, deleted)?;
        // More work on the rebuilt store, through GC and checkpoints.
        let mut m = seen.clone();
        m.next_id = fs.next_object_id();
        let mut rng = Rng(seed | 1);
        for _ in 0..200 {
            let op = gen_op(&mut rng, &m, true);
            if run_op(&mut fs, &m, &op).is_ok() {
                m = m.apply(&op);
            }
        }
        fs.unmount().map_err(|e| format!("unmount: {e:?}"))?;
        m
    };
    let mut fs = Fs::mounted(&mut sim).map_err(|e| format!("mount after more work: {e:?}"))?;
    let after = common::observe(&mut fs)?;
    seen.next_id = 0;
    if after.objs != seen.objs || after.logs != seen.logs {
        return Err("state after more work and a remount differs".into());
    }
    if sim.counters().misuse != 0 {
        return Err(format!("misuse {:?}", sim.last_misuse()));
    }
    Ok(())
}

#[test]
fn a_store_whose_checkpoints_and_index_pages_are_gone_is_rebuilt_whole() {
    let mut problems = Vec::new();
    for seed in 1..=12u64 {
        let (sim, want, deleted) = workload(seed, 400, seed % 2 == 0);
        for (name, kinds) in [
            ("checkpoints", &[PageKind::Checkpoint, PageKind::Marker][..]),
            (
                "index and table pages",
                &[PageKind::Index, PageKind::Table][..],
            ),
            (
                "all of them",
                &[
                    PageKind::Checkpoint,
                    PageKind::Marker,
                    PageKind::Index,
                    PageKind::Table,
                ][..],
            ),
        ] {
            let mut damaged = sim.clone();
            let victims = pages_of(&damaged, kinds);
            assert!(!victims.is_empty(), "seed {seed}: no {name}");
            for p in victims {
                kill(&mut damaged, p);
            }
            if let Err(e) = rebuild_and_check(&damaged, &want, &deleted, seed) {
                problems.push(format!("seed {seed}, {name} lost: {e}"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Without damage the rebuild gives back what a normal mount shows.
#[test]
fn an_undamaged_store_rebuilds_to_itself() {
    for seed in 20..=27u64 {
        let (sim, want, deleted) = workload(seed, 300, true);
        rebuild_and_check(&sim, &want, &deleted, seed)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

/// A normal mount refuses (or cannot read) a store whose newest checkpoint is gone:
/// the case the rebuild is for.
#[test]
fn a_lost_newest_checkpoint_refuses_a_normal_mount_and_rebuilds() {
    let (sim, want, deleted) = workload(40, 400, true);
    let mut damaged = sim.clone();
    let mut ckpts: Vec<_> = all_pages(&damaged)
        .into_iter()
        .filter(|p| p.kind == PageKind::Checkpoint)
        .collect();
    ckpts.sort_by_key(|p| p.seq);
    let newest = ckpts.last().unwrap().seq;
    for p in ckpts.iter().filter(|p| p.seq == newest) {
        kill(&mut damaged, p.page);
    }
    assert!(Fs::mounted(&mut damaged.clone()).is_err());
    rebuild_and_check(&damaged, &want, &deleted, 40).unwrap();
}

/// A cut at every program and erase of a rebuild, in every cut kind: the store then
/// rebuilds again to the same state.
#[test]
fn power_cuts_during_a_rebuild_leave_a_store_that_rebuilds_the_same() {
    let (sim, want, deleted) = workload(50, 300, true);
    let mut damaged = sim.clone();
    for p in pages_of(
        &damaged,
        &[PageKind::Checkpoint, PageKind::Marker, PageKind::Index],
    ) {
        kill(&mut damaged, p);
    }
    let mut cuts = 0;
    let mut problems = Vec::new();
    for k in 1..400u64 {
        let mut fired = false;
        for kind in CutKind::ALL {
            let mut c = damaged.clone();
            c.arm(FaultPlan::seeded(k).with_cut(k, kind));
            if rebuild(&mut c).is_ok() {
                continue;
            }
            fired = true;
            cuts += 1;
            c.power_on();
            c.disarm();
            if let Err(e) = rebuild_and_check(&c, &want, &deleted, k) {
                problems.push(format!("cut {k} {kind:?}: {e}"));
            }
        }
        if !fired {
            break;
        }
    }
    assert!(cuts > 20, "only {cuts} cuts");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Read errors during a rebuild fail it cleanly or give the same state.
#[test]
fn a_rebuild_on_an_unsupported_store_is_refused_cleanly() {
    let mut sim = Sim::heap(TINY, FaultPlan::seeded(1));
    let mut fs: Oftl<&mut Sim, 2048, 64, 4, 2> =
        Oftl::new(&mut sim, oftl::Config::new(), Default::default());
    assert!(matches!(
        fs.mount_damaged(oftl::Damaged::Rebuild {
            lost_meta_attrs: [0xFF; oftl::ATTR_LEN]
        }),
        Err(MountError::NotFormatted)
    ));
    assert!(fs.flash().geometry().blocks() > 0);
}

/// A store cut in the middle of work (buffered writes, an operation in flight), then
/// its checkpoints lost: the rebuild keeps everything durable, each object a prefix
/// of its pending writes, the cut operation whole or not at all.
#[test]
fn a_crashed_store_without_checkpoints_is_rebuilt_to_an_acknowledged_state() {
    use common::Pending;
    let mut problems = Vec::new();
    let mut cases = 0;
    for seed in 60..=99u64 {
        let (mut sim, m, mut deleted) = workload(seed, 250, seed % 2 == 0);
        let mut rng = Rng(seed.wrapping_mul(31) | 1);
        let mut pend = Pending::new(m);
        let last;
        {
            let mut fs = Fs::mounted(&mut sim).unwrap();
            let n = 5 + rng.below(40) as usize;
            let mut i = 0;
            loop {
                let op = gen_op(&mut rng, &pend.durable, seed % 2 == 0);
                if i == n {
                    let k = 1 + rng.below(6);
                    fs.flash_mut().arm(
                        FaultPlan::seeded(seed).with_cut(k, CutKind::ALL[(seed % 3) as usize]),
                    );
                }
                i += 1;
                let before = pend.durable.clone();
                match run_op(&mut fs, &pend.durable, &op) {
                    Ok(()) => {
                        let next = pend.apply(&op);
                        deleted.extend(before.objs.keys().chain(before.logs.keys()).filter(|id| {
                            !next.durable.objs.contains_key(id)
                                && !next.durable.logs.contains_key(id)
                        }));
                        pend = next;
                        if i > n + 20 {
                            last = None;
                            break;
                        }
                    }
                    Err(_) if i > n => {
                        last = Some(op);
                        break;
                    }
                    Err(_) => {}
                }
            }
        }
        sim.power_on();
        sim.disarm();
        let Some(op) = last else { continue };
        cases += 1;
        for p in pages_of(&sim, &[PageKind::Checkpoint, PageKind::Marker]) {
            kill(&mut sim, p);
        }
        if let Err(e) = rebuild(&mut sim) {
            problems.push(format!("seed {seed}: rebuild {e:?}"));
            continue;
        }
        let mut fs = Fs::mounted(&mut sim).unwrap();
        let mut seen = common::observe(&mut fs).unwrap();
        let after = pend.apply(&op);
        let known = |id: &u32| {
            pend.durable.objs.contains_key(id)
                || pend.durable.logs.contains_key(id)
                || after.durable.objs.contains_key(id)
                || after.durable.logs.contains_key(id)
        };
        seen.objs.retain(|id, _| known(id) || !deleted.contains(id));
        seen.logs.retain(|id, _| known(id) || !deleted.contains(id));
        if let (Err(a), Err(b)) = (pend.allows(&seen, None), after.allows(&seen, None)) {
            problems.push(format!("seed {seed} ({op:?}): before: {a}; after: {b}"));
        }
    }
    assert!(cases > 20, "only {cases} cases");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Makes both superblock copies (page 0 of two of the first eight blocks) unreadable.
fn kill_superblocks(sim: &mut Sim) {
    use nand_hal::{BlockAddr, PageAddr};
    let g = sim.geometry();
    let (mut d, mut o) = (vec![0u8; 2048], vec![0u8; 64]);
    let sb: Vec<u32> = (0..8)
        .map(|b| g.page(BlockAddr(b), 0).0)
        .filter(|&p| {
            sim.peek(PageAddr(p), &mut d, &mut o);
            &d[..4] == b"OFTL"
        })
        .collect();
    assert_eq!(sb.len(), 2);
    for p in sb {
        kill(sim, p);
    }
}

/// Both superblock copies unreadable too: the superblock is written again from the
/// device, the checkpoint blocks found by their pages, and the store rebuilt.
#[test]
fn a_store_without_a_readable_superblock_is_rebuilt() {
    for seed in [70u64, 71, 72] {
        let (sim, want, deleted) = workload(seed, 300, true);
        let mut damaged = sim.clone();
        kill_superblocks(&mut damaged);
        assert!(matches!(
            Fs::mounted(&mut damaged.clone()),
            Err(MountError::Corrupted)
        ));
        rebuild_and_check(&damaged, &want, &deleted, seed).unwrap_or_else(|e| panic!("{e}"));
        // With the checkpoints gone as well.
        for p in pages_of(&damaged, &[PageKind::Checkpoint]) {
            kill(&mut damaged, p);
        }
        rebuild_and_check(&damaged, &want, &deleted, seed).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// The same with 16 checkpoint blocks (format 7; the default on 1,024-block parts): the
/// rebuilt superblock names the blocks that hold checkpoint or marker pages (and erased
/// ones up to the part's default count), whatever their number.
#[test]
fn a_store_with_sixteen_checkpoint_blocks_gets_its_superblock_back() {
    for seed in [73u64, 74] {
        let (sim, want, deleted) =
            workload_with(TINY, cfg().checkpoint_blocks(16), seed, 400, true);
        let mut damaged = sim.clone();
        kill_superblocks(&mut damaged);
        rebuild_and_check(&damaged, &want, &deleted, seed).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// In-band tags (a part without ECC or protected spare bytes): the same rebuild.
#[test]
fn in_band_tags_rebuild_too() {
    for seed in 80..=85u64 {
        let (sim, want, deleted) = workload_on(common::tiny_raw(), seed, 400, true);
        let mut damaged = sim.clone();
        let victims = pages_of(
            &damaged,
            &[
                PageKind::Checkpoint,
                PageKind::Marker,
                PageKind::Index,
                PageKind::Table,
            ],
        );
        assert!(victims.len() > 4, "seed {seed}: {} pages", victims.len());
        for p in victims {
            kill(&mut damaged, p);
        }
        rebuild_and_check(&damaged, &want, &deleted, seed)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

/// A data page whose tag does not read leaves its object with a page missing: the
/// rebuild names the object (it would read zeros there), never passes it off as whole.
#[test]
fn a_data_page_whose_tag_does_not_read_puts_its_object_in_doubt() {
    let (sim, want, _) = workload(90, 400, false);
    let mut damaged = sim.clone();
    for p in pages_of(&damaged, &[PageKind::Checkpoint, PageKind::Marker]) {
        kill(&mut damaged, p);
    }
    let pages = all_pages(&damaged);
    let mut named = 0;
    for (id, (data, _)) in want
        .objs
        .iter()
        .filter(|(_, o)| o.0.len() > 2 * 2048)
        .take(4)
    {
        // The page holding the object's second logical page, as a normal mount maps it.
        let page = {
            let mut probe = sim.clone();
            let mut fs = Fs::mounted(&mut probe).unwrap();
            let _ = fs.size(*id);
            pages
                .iter()
                .filter(|p| p.owner == *id && p.lpn == 1 && p.kind == PageKind::Data)
                .max_by_key(|p| p.seq)
                .unwrap()
                .page
        };
        let mut d2 = damaged.clone();
        kill(&mut d2, page);
        let report = rebuild(&mut d2).unwrap();
        let mut fs = Fs::mounted(&mut d2).unwrap();
        let mut buf = vec![0u8; data.len()];
        let whole = fs.read(*id, 0, &mut buf).is_ok() && buf == *data;
        assert!(
            whole || report.may_have_rolled_back(*id),
            "object {id}: changed and not named: {report:?}"
        );
        named += 1;
    }
    assert!(named > 0);
}

/// An object whose only metadata page does not read comes back from its data pages
/// under a new metadata page (attributes unknown: all 0xFF), named; a cut at any
/// program or erase of that rebuild leaves a store that rebuilds the same way.
#[test]
fn an_object_whose_metadata_page_is_lost_comes_back_named() {
    use nand_hal::sim::FaultPlan;
    let mut sim = Sim::heap(TINY, FaultPlan::seeded(3));
    let data = common::bytes(9, 5000);
    let (x, y);
    {
        let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
        x = fs.create(oftl::ObjKind::Object).unwrap();
        y = fs.create(oftl::ObjKind::Object).unwrap();
        fs.write(x, 0, &data).unwrap();
        fs.write(y, 0, b"other").unwrap();
        fs.sync().unwrap();
    }
    let metas: Vec<u32> = all_pages(&sim)
        .into_iter()
        .filter(|p| p.kind == PageKind::Meta && p.owner == x)
        .map(|p| p.page)
        .collect();
    let mut damaged = sim.clone();
    for p in pages_of(&damaged, &[PageKind::Checkpoint, PageKind::Marker])
        .into_iter()
        .chain(metas)
    {
        kill(&mut damaged, p);
    }
    let check = |s: &mut Sim, tag: &str| {
        let mut fs = Fs::mounted(s).unwrap_or_else(|e| panic!("{tag}: {e:?}"));
        let mut b = vec![0u8; 5000];
        assert_eq!(fs.size(x).unwrap(), 5000, "{tag}");
        fs.read(x, 0, &mut b).unwrap();
        assert!(b == data, "{tag}: contents");
        assert_eq!(fs.attrs(x).unwrap().user, [0xFF; oftl::ATTR_LEN], "{tag}");
        let mut o = [0u8; 5];
        fs.read(y, 0, &mut o).unwrap();
        assert_eq!(&o, b"other", "{tag}");
    };
    let mut once = damaged.clone();
    let report = rebuild(&mut once).unwrap();
    assert!(report.may_have_rolled_back(x), "{report:?}");
    check(&mut once, "rebuilt");
    let mut cuts = 0;
    for k in 1..300u64 {
        let mut c = damaged.clone();
        c.arm(FaultPlan::seeded(k).with_cut(k, CutKind::ALL[(k % 3) as usize]));
        if rebuild(&mut c).is_ok() {
            break;
        }
        cuts += 1;
        c.power_on();
        c.disarm();
        rebuild(&mut c).unwrap_or_else(|e| panic!("cut {k}: {e:?}"));
        check(&mut c, &format!("cut {k}"));
    }
    assert!(cuts > 5, "{cuts} cuts");
}
