//! An independent review of stop 35 (0f824ba): the read-only replay's reloads
//! (`reload_for_replay`), recovery windows reading every block's bad-block marker
//! (`Dev::grow_window`) and a recovery that leaves the cut's blocks to collection
//! (`relocate_suspects`).

use crate::common;

use common::lifecycle::Lifecycle;
use common::*;
use nand_hal::sim::{profile, FaultPlan};
use nand_hal::{BlockAddr, NandFlash};
use oftl::{BlockState, Health, ObjKind};

/// A copy of the simulated part (cells and simulator state).
fn clone_sim(sim: &Sim) -> Sim {
    let mut v = Vec::new();
    sim.storage().save(&mut v).unwrap();
    let st = nand_hal::sim::HeapStorage::load(&mut &v[..]).unwrap();
    Sim::attach(*sim.profile(), st, *sim.plan()).unwrap()
}

/// The blocks a crash recovery of `sim`'s store takes for its window (found on a copy:
/// the window its closing checkpoint records, in the pick order of the checkpoint it
/// loaded).
fn recovery_window(sim: &Sim) -> Vec<u32> {
    let mut copy = clone_sim(sim);
    let fs = Fs::mounted(&mut copy).unwrap();
    assert_eq!(fs.health(), Health::Writable);
    fs.blocks()
        .iter()
        .enumerate()
        .filter(|(_, b)| b.state() == BlockState::Window)
        .map(|(i, _)| i as u32)
        .collect()
}

/// Free blocks of `fs` in the order the default policy (`Greedy`: least worn, lowest
/// address first) hands them out.
fn free_pick_order(fs: &Fs) -> Vec<u32> {
    let mut v: Vec<(u32, u32)> = fs
        .blocks()
        .iter()
        .enumerate()
        .filter(|(_, b)| b.state() == BlockState::Free)
        .map(|(i, b)| (b.erases(), i as u32))
        .collect();
    v.sort();
    v.into_iter().map(|(_, i)| i).collect()
}

/// Four 3-page objects, synced; then one more synced overwrite, and the store is
/// dropped without unmount (the next mount recovers). Returns the ids, their contents
/// and the free blocks in pick order at the drop.
fn crashed_store(sim: &mut Sim) -> (Vec<u32>, Vec<Vec<u8>>, Vec<u32>) {
    let mut fs = Fs::formatted(&mut *sim, cfg()).unwrap();
    let mut ids = Vec::new();
    let mut want = Vec::new();
    for i in 0..4u32 {
        let id = fs.create(ObjKind::Object).unwrap();
        let d = bytes(i, 3 * 2048);
        fs.write(id, 0, &d).unwrap();
        ids.push(id);
        want.push(d);
    }
    fs.sync().unwrap();
    fs.unmount().unwrap();
    let mut fs = Fs::mounted(&mut *sim).unwrap();
    // Wear every block a little (retired blocks were erased before: the pre-0f824ba
    // `may_join_window` read the markers of never-erased blocks only).
    let mut r = 1000u32;
    while fs
        .blocks()
        .iter()
        .any(|b| b.state() == BlockState::Free && b.erases() == 0)
    {
        let i = (r % 4) as usize;
        let d = bytes(r, 2048);
        let off = (r / 4 % 3) as usize * 2048;
        fs.write(ids[i], off as u64, &d).unwrap();
        want[i][off..off + 2048].copy_from_slice(&d);
        fs.sync().unwrap();
        r += 1;
        assert!(r < 20_000);
    }
    // The crash: one synced page after a fresh checkpoint (whose table the recovery
    // loads: the free blocks below are free there, with these erase counts).
    fs.unmount().unwrap();
    let mut fs = Fs::mounted(&mut *sim).unwrap();
    let d = bytes(99, 2048);
    fs.write(ids[0], 2048, &d).unwrap();
    want[0][2048..4096].copy_from_slice(&d);
    fs.sync().unwrap();
    let order = free_pick_order(&fs);
    drop(fs);
    (ids, want, order)
}

// ---------------------------------------------------------------------------------------
// Finding 1: a recovery window of marked blocks is not refilled

/// Blocks retired after the last checkpoint (their markers written by earlier mounts
/// that could not checkpoint: read-only replays whose cache write-backs' erases
/// failed) are free in that checkpoint and, being the least worn, the first ones the
/// policy hands out again. `Dev::grow_window` now reads each candidate's marker, but a
/// marked one still uses up one of the `n` places: with `window_blocks` of them first
/// in the pick order the recovery window is empty, `open_recovery_window` fails
/// `NoSpace`, and the mount falls back to the read-only replay, on a part with 50 good
/// free blocks. Every later mount does the same (the checkpoint never changes): the
/// store stays read-only for good. Before 0f824ba (8c57ec8: this test passes there) the
/// marked blocks (erased before) joined the window and `head_ready` skipped them one by
/// one, growing the window a block at a time (`grow_window(1)`) until a good one came.
#[test]
fn marked_free_blocks_empty_the_recovery_window() {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(5));
    let (ids, want, order) = crashed_store(&mut sim);
    let w = cfg().window_blocks as usize;
    assert!(order.len() > w + 20, "{order:?}");
    // Retired after the checkpoint: the blocks the recovery picks.
    let picks = recovery_window(&sim);
    assert!(picks.len() >= w, "{picks:?}");
    for &b in picks.iter() {
        sim.mark_bad(BlockAddr(b)).unwrap();
    }
    let mut fs = Fs::mounted(&mut sim).unwrap();
    for (i, &id) in ids.iter().enumerate() {
        let mut buf = vec![0u8; want[i].len()];
        assert_eq!(fs.read(id, 0, &mut buf).unwrap(), buf.len());
        assert!(buf == want[i], "object {id} reads back wrong");
    }
    let good_free = fs
        .blocks()
        .iter()
        .filter(|b| b.state() == BlockState::Free)
        .count();
    assert_eq!(
        fs.health(),
        Health::Writable,
        "{} good free blocks, yet the store mounted read-only",
        good_free
    );
    // And the next mount too.
    drop(fs);
    let fs = Fs::mounted(&mut sim).unwrap();
    assert_eq!(fs.health(), Health::Writable);
}
