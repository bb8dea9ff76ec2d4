//! Small metadata units (`META` below the page payload, `W25n01gvSmall`): object-table
//! and index pages of one program unit, cached in slots of that size. Objects across
//! many table pages and index leaves against a model, remounts, crash recovery,
//! garbage collection, and which builds mount which layouts.

use crate::common;
use common::contents::{churn, cut_writes, state_of};
use common::lifecycle::Lifecycle;
use common::{bytes, Rng};

use std::collections::{BTreeMap, BTreeSet};

use nand_hal::sim::{profile, CutKind, FaultPlan, HeapStorage, PowerCut, SimNand, TornMode};
use oftl::format::backpointer::PageKind;
use oftl::{
    Config, FormatError, Greedy, Mismatch, MountError, ObjKind, Oftl, TxOp, W25n01gv,
    W25n01gvSmall, WriteError,
};

type Sim = SimNand<HeapStorage>;
/// The small layout on the TINY part (2 KiB pages, 16 pages per block, 64 blocks).
type TinySmall<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 0, Greedy, 512>;
/// The whole-page layout on TINY.
type TinyWhole<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 0, Greedy>;
/// A TINY build without a log tail page (`LOG` 0): objects only.
type TinyNoLog<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 1, Greedy, 2048, 0>;
/// The same with 512-byte metadata units (the shape of `W25n01gvSmall`).
type TinySmallNoLog<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 1, Greedy, 512, 0>;

fn tiny_cfg() -> Config {
    Config::new().window_blocks(6)
}

/// Checks every object reads back as `m` models it.
macro_rules! check {
    ($fs:expr, $m:expr) => {
        assert!(
            state_of($fs).unwrap() == *$m,
            "contents differ from the model"
        )
    };
}

/// Object `id`'s contents.
fn read_all<
    F: nand_hal::NandFlash,
    const B: usize,
    const C: usize,
    const W: usize,
    const M: usize,
    const L: usize,
>(
    fs: &mut Oftl<F, 2048, B, C, W, Greedy, M, L>,
    id: u32,
) -> Vec<u8> {
    let n = fs.size(id).unwrap() as usize;
    let mut b = vec![0u8; n];
    assert_eq!(fs.read(id, 0, &mut b).unwrap(), n);
    b
}

#[test]
fn small_units_on_the_w25n01gv_hold_many_objects_and_large_ones() {
    let mut sim = Sim::heap(profile::W25N01GV, FaultPlan::seeded(3));
    let mut m = BTreeMap::new();
    {
        let mut fs = W25n01gvSmall::formatted(&mut sim, Config::default()).unwrap();
        assert_eq!(fs.max_object_size(), 128 * 128 * 2048);
        // 300 small objects span 19 object-table pages of 16 records each.
        for i in 0..300u32 {
            let id = fs.create(ObjKind::Object).unwrap();
            let d = bytes(i, 64 + (i as usize % 7) * 900);
            fs.write(id, 0, &d).unwrap();
            m.insert(id, d);
        }
        // One object over three index leaves (128 pages each), written out of order.
        let big = fs.create(ObjKind::Object).unwrap();
        let d = bytes(99, 300 * 2048 + 100);
        for chunk in [2usize, 0, 1] {
            let at = chunk * 100 * 2048;
            let end = (at + 100 * 2048 + if chunk == 2 { 100 } else { 0 }).min(d.len());
            fs.write(big, at as u64, &d[at..end]).unwrap();
        }
        m.insert(big, d);
        fs.sync().unwrap();
        check!(&mut fs, &m);
        fs.unmount().unwrap();
    }
    let mut fs = W25n01gvSmall::mounted(&mut sim).unwrap();
    check!(&mut fs, &m);
    // A write past the largest object the small layout indexes is refused.
    let id = *m.keys().next().unwrap();
    assert!(fs.write(id, 128 * 128 * 2048, b"x").is_err());
    check!(&mut fs, &m);
}

#[test]
fn small_units_survive_churn_gc_and_remounts() {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(5));
    let mut m = BTreeMap::new();
    let mut rng = Rng(11);
    let mut fs = TinySmall::formatted(&mut sim, tiny_cfg()).unwrap();
    for _ in 0..6 {
        churn(&mut fs, &mut m, &mut rng, 300, 6000);
        check!(&mut fs, &m);
        fs.unmount().unwrap();
        fs.mount().unwrap();
        check!(&mut fs, &m);
    }
    // The 64 blocks were reused several times over: collection ran.
    let erases = fs.flash().counters().erases;
    assert!(erases > 4 * 64, "{erases} erases");
}

#[test]
fn small_units_recover_from_power_cuts() {
    // Power cuts (every kind) at many points of synced writes over a churned store;
    // after each, the recovering mount must give the state before the write in flight
    // or after it, never anything else, and the store must keep working.
    let kinds = [
        CutKind::Clean,
        CutKind::Torn(TornMode::Prefix),
        CutKind::Torn(TornMode::SomeBits),
        CutKind::Torn(TornMode::Random),
    ];
    let mut cuts = 0;
    for i in 0..32u64 {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(i));
        let mut m = BTreeMap::new();
        let mut rng = Rng(i + 100);
        let mut fs = TinySmall::formatted(&mut sim, tiny_cfg()).unwrap();
        churn(&mut fs, &mut m, &mut rng, 150 + 20 * i as usize, 5000);
        fs.flash_mut().arm(FaultPlan {
            seed: i,
            cut: Some(PowerCut {
                at_op: 1 + rng.below(60),
                kind: kinds[i as usize % kinds.len()],
            }),
            faults: Default::default(),
        });
        let (before, after, cut) = cut_writes(&mut fs, &m, &mut rng);
        cuts += cut as u32;
        fs.flash_mut().power_on();
        fs.flash_mut().disarm();
        fs.mount().unwrap();
        let state = state_of(&mut fs).unwrap();
        assert!(
            state == before || state == after,
            "seed {i}: recovered state is neither before nor after the write in flight"
        );
        m = state;
        churn(&mut fs, &mut m, &mut rng, 60, 3000);
        check!(&mut fs, &m);
    }
    assert!(cuts >= 28, "only {cuts} of 32 runs were cut");
}

#[test]
fn which_builds_mount_which_layouts() {
    // A whole-page build mounts a small-unit store and keeps its layout.
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(1));
    let mut m = BTreeMap::new();
    let mut rng = Rng(2);
    {
        let mut fs = TinySmall::formatted(&mut sim, tiny_cfg()).unwrap();
        churn(&mut fs, &mut m, &mut rng, 150, 5000);
    }
    {
        let mut fs = TinyWhole::mounted(&mut sim).unwrap();
        check!(&mut fs, &m);
        churn(&mut fs, &mut m, &mut rng, 150, 5000);
        check!(&mut fs, &m);
    }
    {
        let mut fs = TinySmall::mounted(&mut sim).unwrap();
        check!(&mut fs, &m);
    }
    // A small build refuses a whole-page store: its pages do not fit its slots.
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(1));
    drop(TinyWhole::formatted(&mut sim, tiny_cfg()).unwrap());
    assert!(matches!(
        TinySmall::mounted(&mut sim),
        Err(MountError::Mismatch(Mismatch::Capacity))
    ));
    // A part whose backpointers go in-band has no small layout.
    let mut sim = Sim::heap(common::tiny_raw(), FaultPlan::seeded(1));
    assert!(matches!(
        TinySmall::formatted(&mut sim, tiny_cfg()),
        Err(FormatError::Unsupported(Mismatch::Capabilities))
    ));
    // The default W25N01GV build mounts the small one's volumes.
    let mut sim = Sim::heap(profile::W25N01GV, FaultPlan::seeded(1));
    let mut m = BTreeMap::new();
    {
        let mut fs = W25n01gvSmall::formatted(&mut sim, Config::default()).unwrap();
        churn(&mut fs, &mut m, &mut Rng(4), 200, 9000);
    }
    let mut fs = W25n01gv::mounted(&mut sim).unwrap();
    check!(&mut fs, &m);
}

#[test]
fn the_small_store_is_small() {
    // Host layout: 4 slots of 512 B, one write buffer, two scratch pages, no log tail
    // page, 4 KiB block table (the QEMU figure, static plus stack, is in the crate docs).
    let n = core::mem::size_of::<W25n01gvSmall<&mut Sim>>();
    assert!(n <= 13_400, "{n} B");
}

#[test]
fn a_build_without_a_log_tail_refuses_log_streams_and_nothing_else() {
    // On its own store: objects work, log streams are refused, the handle stays usable.
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(8));
    let mut m = BTreeMap::new();
    {
        let mut fs = TinyNoLog::formatted(&mut sim, tiny_cfg()).unwrap();
        assert_eq!(fs.create(ObjKind::Log), Err(WriteError::NoLogStreams));
        assert_eq!(
            fs.transact(&[TxOp::Create {
                kind: ObjKind::Log,
                attrs: [0; oftl::ATTR_LEN],
            }]),
            Err(WriteError::NoLogStreams)
        );
        let obj = fs.create(ObjKind::Object).unwrap();
        assert_eq!(fs.log_append(obj, b"x"), Err(WriteError::NoLogStreams));
        churn(&mut fs, &mut m, &mut Rng(3), 300, 5000);
        m.insert(obj, Vec::new());
        check!(&mut fs, &m);
        // Cut without an unmount: recovery needs no log page either.
    }
    let mut fs = TinyNoLog::mounted(&mut sim).unwrap();
    check!(&mut fs, &m);
    churn(&mut fs, &mut m, &mut Rng(4), 100, 5000);
    check!(&mut fs, &m);
}

/// A build without a log tail page on a store with log streams (made by a build with
/// one): it reads them, trims and deletes them, and its collection leaves blocks with
/// live log pages where they are, so a cut never leaves log pages of its own for a
/// recovery it could not run (review: its GC copied log pages, and after a cut the same
/// build could not mount). A crash with another build's log pages in the window is
/// refused with `Mismatch(Capacity)`, and a build with a tail page recovers it.
#[test]
fn a_build_without_a_log_tail_leaves_log_pages_alone() {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(8));
    let (stream, o);
    {
        let mut fs = TinySmall::formatted(&mut sim, tiny_cfg()).unwrap();
        stream = fs.create(ObjKind::Log).unwrap();
        o = fs.create(ObjKind::Object).unwrap();
        for i in 0..150u32 {
            fs.log_append(stream, &bytes(i, 1500)).unwrap();
            if i % 4 == 0 {
                fs.write(o, 0, &bytes(i, 6000)).unwrap();
            }
            fs.sync().unwrap();
        }
        // Log blocks partly valid: victims for collection.
        let (s, e) = fs.log_bounds(stream).unwrap();
        fs.log_trim(stream, s + (e - s) * 2 / 3 + 1).unwrap();
        fs.unmount().unwrap();
    }
    let read_log = |fs: &mut TinySmallNoLog<'_>| {
        let (s, e) = fs.log_bounds(stream).unwrap();
        let mut recs = Vec::new();
        let mut b = vec![0u8; 2048];
        let mut l = s;
        while let Some(r) = fs.log_read(stream, l, &mut b).unwrap() {
            recs.push(b[..r.len].to_vec());
            l = r.next;
        }
        (s, e, recs)
    };
    let (log, data);
    {
        let mut fs = TinySmallNoLog::mounted(&mut sim).unwrap();
        log = read_log(&mut fs);
        assert!(!log.2.is_empty());
        let mut d = read_all(&mut fs, o);
        let log_pages = |sim: &Sim| {
            common::pages::all_pages(sim)
                .into_iter()
                .filter(|p| p.kind == PageKind::Log)
                .map(|p| p.page)
                .collect::<BTreeSet<u32>>()
        };
        let before = log_pages(fs.flash());
        let mut collected = 0;
        for i in 0..400u32 {
            let ck = fs.stats().checkpoints;
            collected += fs.gc_step(4).unwrap().copied;
            // No log page of its own, ever: (without the fix, GC copied log pages here,
            // and a cut before the next checkpoint left the build unable to mount).
            let new: Vec<u32> = log_pages(fs.flash()).difference(&before).copied().collect();
            assert!(
                new.is_empty() || fs.stats().checkpoints != ck,
                "step {i}: log pages {new:?} written since the last checkpoint"
            );
            assert!(new.is_empty(), "step {i}: log pages {new:?} written");
            let at = (i as usize % 3) * 2048;
            let w = bytes(i, 2048);
            fs.write(o, at as u64, &w).unwrap();
            fs.sync().unwrap();
            if d.len() < at + 2048 {
                d.resize(at + 2048, 0);
            }
            d[at..at + 2048].copy_from_slice(&w);
        }
        assert!(collected > 0, "collection ran");
        data = d;
        assert_eq!(fs.log_append(stream, b"x"), Err(WriteError::NoLogStreams));
        // Dropped without unmount: a cut.
    }
    let mut fs = TinySmallNoLog::mounted(&mut sim).unwrap();
    assert_eq!(read_log(&mut fs), log);
    assert!(read_all(&mut fs, o) == data);
    fs.log_trim(stream, log.1 - 3).unwrap();
    fs.unmount().unwrap();
    drop(fs);
    // Another build's log pages in the window after a cut: refused, untouched.
    {
        let mut fs = TinySmall::mounted(&mut sim).unwrap();
        fs.log_append(stream, &[9; 64]).unwrap();
    }
    let cut = sim.counters();
    assert!(matches!(
        TinySmallNoLog::mounted(&mut sim),
        Err(MountError::Mismatch(Mismatch::Capacity))
    ));
    assert_eq!(
        (sim.counters().programs, sim.counters().erases),
        (cut.programs, cut.erases)
    );
    let mut fs = TinySmall::mounted(&mut sim).unwrap();
    let (_, end) = fs.log_bounds(stream).unwrap();
    let mut b = [0u8; 512];
    let r = fs.log_read(stream, end - 1, &mut b).unwrap().unwrap();
    assert_eq!(&b[..r.len], &[9u8; 64][..]);
    assert!(read_all(&mut fs, o) == data);
}

/// A slot between an in-band part's payload (2,028 B) and its page (2,048 B) holds
/// neither a whole page nor whole units: format and mount refuse it (review: it
/// formatted, then every index write-back was a misaligned program).
#[test]
fn slots_between_the_in_band_payload_and_the_page_are_refused() {
    type RawMeta<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 1, Greedy, 2028>;
    type RawWhole<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 1, Greedy>;
    let mut sim = Sim::heap(common::tiny_raw(), FaultPlan::seeded(1));
    assert!(matches!(
        RawMeta::formatted(&mut sim, tiny_cfg()),
        Err(FormatError::Unsupported(Mismatch::Capabilities))
    ));
    {
        let mut fs = RawWhole::formatted(&mut sim, tiny_cfg()).unwrap();
        let id = fs.create(ObjKind::Object).unwrap();
        fs.write(id, 0, &bytes(1, 9000)).unwrap();
        fs.unmount().unwrap();
    }
    assert!(matches!(
        RawMeta::mounted(&mut sim),
        Err(MountError::Mismatch(Mismatch::Capacity))
    ));
    let mut fs = RawWhole::mounted(&mut sim).unwrap();
    let id = fs.objects().next().unwrap().unwrap();
    assert_eq!(fs.size(id).unwrap(), 9000);
}
