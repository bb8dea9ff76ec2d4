//! A crash recovery drops the cold copies of its window (stop 42, DESIGN 5): the pages
//! collection copied since the last checkpoint are read from their originals again, in
//! victims that count them valid again, the cold head's cut block has nothing to move,
//! and collection afterwards copies them again. A salvage still merges the copies.
//!
//! Before, the recovery replayed every copy, and the collection's cache write-backs
//! counted as work a recovery redoes: on a W25N01GV 85 % full they forced a checkpoint
//! every two random 2 KiB writes (about 70 programs a write; `stagefs-core`'s
//! `review_s41.rs`, `probe_gc_profile`).

use crate::common;
use common::lifecycle::Lifecycle;

use nand_hal::sim::{profile, FaultPlan, HeapStorage, SimNand};
use oftl::{BlockState, Config, Damaged, ObjKind, ObjectId};

type Sim = SimNand<HeapStorage>;
type Fs<'a> = oftl::Oftl<&'a mut Sim, 2048, 64, 4, 2>;

const OBJECTS: usize = 4;
const PAGES: u64 = 60;

fn cfg() -> Config {
    Config {
        window_blocks: 8,
        format_id: 1,
        ..Default::default()
    }
}

/// The content of page `p` of object `o` at version `v`.
fn fill(buf: &mut [u8], o: usize, p: u64, v: u8) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (o as u8).wrapping_mul(31) ^ (p as u8).wrapping_mul(7) ^ v ^ (i as u8);
    }
}

/// Four objects of 60 pages, every other page rewritten (half-valid blocks), synced;
/// then background collection until at least 20 pages were copied, with no checkpoint
/// in between, and more flushed writes after the copies. Returns the objects, each
/// page's version, the blocks the collection emptied, and the copies made.
fn crashed(sim: &mut Sim) -> (Vec<ObjectId>, Vec<Vec<u8>>, Vec<usize>, u64) {
    let mut fs = Fs::formatted(sim, cfg()).unwrap();
    let page = fs.payload() as usize;
    let mut buf = vec![0u8; page];
    let mut ids = Vec::new();
    let mut ver = vec![vec![0u8; PAGES as usize]; OBJECTS];
    for o in 0..OBJECTS {
        let id = fs.create(ObjKind::Object).unwrap();
        for p in 0..PAGES {
            fill(&mut buf, o, p, 0);
            fs.write(id, p * page as u64, &buf).unwrap();
        }
        ids.push(id);
    }
    for o in 0..OBJECTS {
        for p in (0..PAGES).step_by(2) {
            fill(&mut buf, o, p, 1);
            fs.write(ids[o], p * page as u64, &buf).unwrap();
            ver[o][p as usize] = 1;
        }
    }
    fs.sync().unwrap();
    let ck = fs.stats().checkpoints;
    let before: Vec<(BlockState, u16)> =
        fs.blocks().iter().map(|b| (b.state(), b.valid())).collect();
    let copied0 = fs.stats().relocated_pages;
    let mut steps = 0;
    while fs.stats().relocated_pages - copied0 < 20 {
        fs.gc_step(4).unwrap();
        steps += 1;
        assert!(steps < 100, "collection made no copies");
    }
    let copies = fs.stats().relocated_pages - copied0;
    let emptied: Vec<usize> = fs
        .blocks()
        .iter()
        .enumerate()
        .filter(|(i, b)| before[*i].0 == BlockState::Full && before[*i].1 > 0 && b.valid() == 0)
        .map(|(i, _)| i)
        .collect();
    assert!(!emptied.is_empty(), "a victim was collected whole");
    // Writes after the copies: the data head moves past their watermarks.
    for p in [1u64, 3, 5] {
        fill(&mut buf, 0, p, 2);
        fs.write(ids[0], p * page as u64, &buf).unwrap();
        ver[0][p as usize] = 2;
    }
    fs.flush(ids[0]).unwrap();
    assert_eq!(fs.stats().checkpoints, ck, "the copies are in the window");
    // Power cut: the store is dropped without an unmount.
    (ids, ver, emptied, copies)
}

fn check(fs: &mut Fs<'_>, ids: &[ObjectId], ver: &[Vec<u8>]) {
    let page = fs.payload() as usize;
    let mut want = vec![0u8; page];
    let mut got = vec![0u8; page];
    for (o, &id) in ids.iter().enumerate() {
        for p in 0..PAGES {
            fill(&mut want, o, p, ver[o][p as usize]);
            let n = fs.read(id, p * page as u64, &mut got).unwrap();
            assert_eq!(n, page);
            assert!(got == want, "object {o} page {p}");
        }
    }
}

#[test]
fn a_crash_recovery_drops_the_windows_cold_copies_and_keeps_every_page() {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(7));
    let (ids, ver, emptied, copies) = crashed(&mut sim);
    let mut fs = Fs::mounted(&mut sim).unwrap();
    let st = fs.stats();
    assert!(st.recovery_scanned_pages > 0, "a crash recovery ran");
    // Only the data head's cut block is moved (16 pages a block on this part); with
    // the copies applied, the cold head's block would be moved too.
    assert!(
        st.relocated_pages <= 16 && st.relocated_pages < copies,
        "recovery moved {} pages after {copies} copies",
        st.relocated_pages
    );
    for &b in &emptied {
        let info = fs.blocks()[b];
        assert!(
            info.state() == BlockState::Full && info.valid() > 0,
            "victim {b} holds its pages again: {:?} {}",
            info.state(),
            info.valid()
        );
    }
    check(&mut fs, &ids, &ver);
    // Collection copies them again, and the result survives a clean remount.
    let copied0 = fs.stats().relocated_pages;
    for _ in 0..40 {
        fs.gc_step(8).unwrap();
    }
    assert!(
        fs.stats().relocated_pages > copied0,
        "collection runs again"
    );
    check(&mut fs, &ids, &ver);
    fs.unmount().unwrap();
    let mut fs = Fs::mounted(&mut sim).unwrap();
    check(&mut fs, &ids, &ver);
}

#[test]
fn a_salvage_merges_the_windows_cold_copies() {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(7));
    let (ids, ver, emptied, _) = crashed(&mut sim);
    let mut fs = Fs::new(&mut sim, Config::new(), Default::default());
    fs.mount_damaged(Damaged::Salvage).unwrap();
    for &b in &emptied {
        assert_eq!(fs.blocks()[b].valid(), 0, "victim {b} stays collected");
    }
    check(&mut fs, &ids, &ver);
}
