//! Independent review of stop 33 (cf93fce): "a store turns read-only
//! (`ReadOnlyReason::GoodBlocks`) when an operation finds no room while
//! `valid_total > capacity_pages()`". The DESIGN says this zone exists only when grown
//! bad blocks took the capacity below the live data. On a healthy part (no bad block at
//! all) the live data can pass the capacity too: the admission check in `prepare_on`
//! counts as growth only pages past an object's size, so filling the holes of a sparse
//! object (a truncate that grows it, or a write past its end) adds pages that no check
//! counts. A healthy, full device then turns read-only for the session, and from then on
//! deletes (the way to make room) are refused with `ReadOnly` instead of running.
//!
//! Findings (failed; fixed: the read-only turn is withdrawn, and writes into holes now
//! count as growth, `Oftl::holes_among`, so the live data cannot pass the capacity and
//! deletes keep working): `healthy_device_filling_a_sparse_object_stays_writable`,
//! `healthy_device_filling_a_hole_left_by_a_write_past_the_end_stays_writable` (the
//! latter's delete failed with `NoSpace` even before cf93fce: a dead end on a healthy
//! part).
//! The existing `full_device.rs` harness hits the same turn on healthy parts (seeds 2
//! and 11 with cuts: `used 445 of 432`, `ReadOnly(GoodBlocks)`) but accepts any
//! `ReadOnly` as "too many grown bad blocks" and ends the run early, so it passes.

use nand_hal::sim::{profile, FaultPlan, HeapStorage, SimNand};
use oftl::{Config, Greedy, Health, ObjKind, Oftl, WriteError};

type Sim = SimNand<HeapStorage>;
type Store<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 2, Greedy>;

const PAGE: u64 = 2048;

fn cfg() -> Config {
    Config {
        window_blocks: 6,
        format_id: 1,
        ..Default::default()
    }
}

/// What filling a sparse object page by page ends in on a healthy part: the error, the
/// pages used and the capacity at that point.
fn fill_holes(store: &mut Store<'_>, id: u32, pages: u64) -> (WriteError<()>, u64, u64) {
    let page = vec![0x5Au8; PAGE as usize];
    for lpn in 0..pages {
        let r = store
            .write(id, lpn * PAGE, &page)
            .and_then(|()| store.flush(id));
        if let Err(e) = r {
            let e = match e {
                WriteError::NoSpace => WriteError::NoSpace,
                WriteError::ReadOnly => WriteError::ReadOnly,
                other => panic!("page {lpn}: {other:?}"),
            };
            return (e, store.used_pages(), store.capacity_pages());
        }
    }
    panic!(
        "{pages} pages written: the device never filled (used {} of capacity {}, health {:?})",
        store.used_pages(),
        store.capacity_pages(),
        store.health()
    );
}

/// FINDING (severity: high). Repro: format a healthy TINY part (no bad blocks), create
/// one object, grow it with `truncate` to twice the capacity (a hole, no pages), then
/// write and flush it page by page. Expected: a write fails with `NoSpace` once the part
/// is full, the store stays `Writable`, and deleting the object makes room (the "no
/// dead ends" rule of `space.rs`). Observed: the hole-filling writes are admitted with
/// growth 0 (only pages past the object's size count), `used_pages` climbs past
/// `capacity_pages`, and the first write that finds no room turns the store read-only
/// (`ReadOnly(GoodBlocks)`: "grown bad blocks took the capacity below the live data",
/// with no bad block on the part); the delete is then refused with `ReadOnly`.
#[test]
fn healthy_device_filling_a_sparse_object_stays_writable() {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(1));
    let mut store = Store::new(&mut sim, cfg(), Greedy::DEFAULT);
    store.format().unwrap();
    let cap = store.capacity_pages();
    let id = store.create(ObjKind::Object).unwrap();
    let pages = 2 * cap;
    store.truncate(id, pages * PAGE).unwrap();
    let (err, used, cap_now) = fill_holes(&mut store, id, pages);
    let bad = store
        .blocks()
        .iter()
        .filter(|b| b.state() == oftl::BlockState::Bad)
        .count();
    assert_eq!(bad, 0, "the part grew bad blocks: not the healthy case");
    assert_eq!(
        store.health(),
        Health::Writable,
        "a healthy part (0 bad blocks) turned read-only when full: last write -> {err:?}, \
         used {used} of capacity {cap_now}"
    );
    assert_eq!(err, WriteError::NoSpace);
    // The way out of a full device: deleting.
    store.delete(id).unwrap();
    let id2 = store.create(ObjKind::Object).unwrap();
    store.write(id2, 0, &[1u8; 4096]).unwrap();
    store.flush(id2).unwrap();
}

/// The same with the hole made by a write past the object's end (no truncate).
#[test]
fn healthy_device_filling_a_hole_left_by_a_write_past_the_end_stays_writable() {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(2));
    let mut store = Store::new(&mut sim, cfg(), Greedy::DEFAULT);
    store.format().unwrap();
    let cap = store.capacity_pages();
    let id = store.create(ObjKind::Object).unwrap();
    let pages = 2 * cap;
    // One byte at the far end: a single page, every page before it a hole.
    store.write(id, pages * PAGE - 1, &[7]).unwrap();
    store.flush(id).unwrap();
    let (err, used, cap_now) = fill_holes(&mut store, id, pages - 1);
    assert_eq!(
        store.health(),
        Health::Writable,
        "a healthy part turned read-only when full: last write -> {err:?}, used {used} of \
         capacity {cap_now}"
    );
    assert_eq!(store.delete(id), Ok(()), "delete on a full healthy part");
}

/// Probe: a healthy part filled with dense objects (every write past the end, so
/// counted) only ever fails with `NoSpace`, stays writable, and deletes make room.
#[test]
fn probe_dense_fill_of_a_healthy_part_stays_writable() {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(3));
    let mut store = Store::new(&mut sim, cfg(), Greedy::DEFAULT);
    store.format().unwrap();
    let page = vec![0xA5u8; PAGE as usize];
    let mut ids = Vec::new();
    'fill: loop {
        let id = match store.create(ObjKind::Object) {
            Ok(id) => id,
            Err(WriteError::NoSpace) => break,
            Err(e) => panic!("create: {e:?}"),
        };
        ids.push(id);
        for lpn in 0..8 {
            match store
                .write(id, lpn * PAGE, &page)
                .and_then(|()| store.flush(id))
            {
                Ok(()) => {}
                Err(WriteError::NoSpace) => break 'fill,
                Err(e) => panic!("write: {e:?}, used {}", store.used_pages()),
            }
        }
    }
    assert_eq!(store.health(), Health::Writable);
    assert!(store.used_pages() <= store.capacity_pages());
    for id in ids {
        store.delete(id).unwrap();
    }
    assert_eq!(store.health(), Health::Writable);
}

/// Formats a healthy TINY part, makes an object sparse over twice the capacity and fills
/// its holes until `NoSpace`, which must come within the capacity; then unmounts (or,
/// without `unmount`, drops the store as a crash). Returns the object.
fn fill_sparse_object(sim: &mut Sim, unmount: bool) -> u32 {
    let mut store = Store::new(sim, cfg(), Greedy::DEFAULT);
    store.format().unwrap();
    let cap = store.capacity_pages();
    let id = store.create(ObjKind::Object).unwrap();
    store.truncate(id, 2 * cap * PAGE).unwrap();
    let (err, used, cap) = fill_holes(&mut store, id, 2 * cap);
    assert_eq!(err, WriteError::NoSpace, "used {used} of {cap}");
    assert!(used <= cap, "used {used} of {cap}");
    if unmount {
        assert_eq!(store.health(), Health::Writable);
        store.unmount().unwrap();
    }
    id
}

/// After the fixes: filling the holes ends in `NoSpace` within the capacity, and after a
/// remount the store is writable and the delete runs.
#[test]
fn probe_after_filling_holes_the_delete_runs_now_and_after_a_remount() {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(1));
    let id = fill_sparse_object(&mut sim, true);
    let mut store = Store::new(&mut sim, Config::new(), Greedy::DEFAULT);
    store.mount().unwrap();
    assert_eq!(store.health(), Health::Writable);
    store.delete(id).unwrap();
    assert_eq!(store.health(), Health::Writable);
}

/// After the fixes: the same fill, a crash (no unmount), and the store mounts writable
/// and the delete runs. (The file layer's mount spends that writable session on its
/// staging replay: see `over_capacity_volume_with_staged_records_can_delete_at_a_later_mount`
/// in `crates/stagefs-core/tests/review_s33b.rs`.)
#[test]
fn probe_after_filling_holes_and_a_crash_the_store_mounts_writable() {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(1));
    let id = fill_sparse_object(&mut sim, false);
    {
        let mount = 0;
        let mut store = Store::new(&mut sim, Config::new(), Greedy::DEFAULT);
        store.mount().unwrap();
        let bad = store
            .blocks()
            .iter()
            .filter(|b| b.state() == oftl::BlockState::Bad)
            .count();
        assert_eq!(bad, 0);
        assert_eq!(
            store.health(),
            Health::Writable,
            "mount {mount} of a healthy part (0 bad blocks, used {} of capacity {})",
            store.used_pages(),
            store.capacity_pages()
        );
        assert_eq!(store.delete(id), Ok(()));
    }
}
