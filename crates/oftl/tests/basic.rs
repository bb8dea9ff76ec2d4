//! End-to-end behaviour on the simulator: format, objects, clean and unclean remounts.

use crate::common;
use common::lifecycle::Lifecycle;

use nand_hal::sim::{profile, FaultPlan, HeapStorage, SimNand};
use oftl::{Config, MountError, ObjKind, Oftl, TxOp, WriteError};

type Sim = SimNand<HeapStorage>;
type Fs<'a> = Oftl<&'a mut Sim, 2048, 64, 4>;

fn cfg() -> Config {
    Config {
        window_blocks: 6,
        format_id: 7,
        ..Default::default()
    }
}

fn pattern(seed: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2654435761).wrapping_add(seed) as u8 >> 1)
        .collect()
}

#[test]
fn write_read_remount() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(1));
    let (a, b);
    {
        let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
        a = fs.create(ObjKind::Object).unwrap();
        b = fs.create(ObjKind::Object).unwrap();
        fs.write(a, 0, &pattern(1, 10_000)).unwrap();
        fs.write(b, 5000, &pattern(2, 3000)).unwrap();
        fs.write(a, 100, &pattern(3, 50)).unwrap();
        let mut attrs = [0u8; oftl::ATTR_LEN];
        attrs[0] = 42;
        fs.set_attrs(b, &attrs).unwrap();
        fs.unmount().unwrap();
    }
    let mut expect_a = pattern(1, 10_000);
    expect_a[100..150].copy_from_slice(&pattern(3, 50));
    let mut expect_b = vec![0u8; 5000];
    expect_b.extend(pattern(2, 3000));
    for round in 0..2 {
        let mut fs = Fs::mounted(&mut sim).unwrap();
        assert_eq!(
            fs.stats().recovery_scanned_pages,
            0,
            "clean mount scans nothing"
        );
        let mut buf = vec![0u8; 20_000];
        assert_eq!(fs.read(a, 0, &mut buf).unwrap(), 10_000);
        assert_eq!(&buf[..10_000], &expect_a[..]);
        assert_eq!(fs.read(b, 0, &mut buf).unwrap(), 8000);
        assert_eq!(&buf[..8000], &expect_b[..]);
        assert_eq!(fs.attrs(b).unwrap().user[0], 42);
        assert_eq!(fs.attrs(b).unwrap().size, 8000);
        if round == 0 {
            fs.unmount().unwrap();
        }
    }
    assert_eq!(sim.counters().misuse, 0);
}

#[test]
fn crash_without_unmount_recovers_acknowledged_writes() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(2));
    let a;
    {
        let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
        a = fs.create(ObjKind::Object).unwrap();
        for i in 0..20u32 {
            fs.write(a, i as u64 * 1000, &pattern(i, 1000)).unwrap();
        }
        fs.truncate(a, 15_500).unwrap();
        // No unmount: simulated crash.
    }
    let mut fs = Fs::mounted(&mut sim).unwrap();
    assert!(fs.stats().recovery_scanned_pages > 0);
    assert_eq!(fs.size(a).ok(), Some(15_500));
    let mut buf = vec![0u8; 15_500];
    fs.read(a, 0, &mut buf).unwrap();
    for i in 0..15u32 {
        assert_eq!(
            &buf[i as usize * 1000..][..1000],
            &pattern(i, 1000)[..],
            "chunk {i}"
        );
    }
    assert_eq!(&buf[15_000..15_500], &pattern(15, 1000)[..500]);
    fs.write(a, 20_000, b"tail").unwrap();
    let mut gap = vec![1u8; 4500];
    fs.read(a, 15_500, &mut gap).unwrap();
    assert!(gap.iter().all(|&x| x == 0), "truncated bytes read as zeros");
    drop(fs);
    assert_eq!(sim.counters().misuse, 0);
}

#[test]
fn delete_and_space_reuse_with_gc() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(3));
    let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
    let cap = fs.capacity_pages();
    assert!(cap > 100);
    // Rewrite a working set many times the device size.
    let objs: Vec<_> = (0..4)
        .map(|_| fs.create(ObjKind::Object).unwrap())
        .collect();
    for round in 0..40u32 {
        for (k, &o) in objs.iter().enumerate() {
            fs.write(o, 0, &pattern(round * 7 + k as u32, 40_000))
                .unwrap();
        }
    }
    for (k, &o) in objs.iter().enumerate() {
        let mut buf = vec![0u8; 40_000];
        fs.read(o, 0, &mut buf).unwrap();
        assert_eq!(buf, pattern(39 * 7 + k as u32, 40_000));
    }
    fs.delete(objs[0]).unwrap();
    assert!(!fs.exists(objs[0]).unwrap());
    assert!(fs.stats().relocated_pages > 0 || fs.stats().checkpoints > 10);
    let used = fs.used_pages();
    fs.unmount().unwrap();
    let fs = Fs::mounted(&mut sim).unwrap();
    assert_eq!(fs.used_pages(), used);
    drop(fs);
    assert_eq!(sim.counters().misuse, 0);
}

#[test]
fn full_device_reports_no_space() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(4));
    let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
    let o = fs.create(ObjKind::Object).unwrap();
    let chunk = pattern(9, 16 * 2048);
    let mut off = 0u64;
    let err = loop {
        match fs.write(o, off, &chunk) {
            Ok(()) => off += chunk.len() as u64,
            Err(e) => break e,
        }
        assert!(off < 4 << 20, "never fills");
    };
    assert_eq!(err, WriteError::NoSpace);
    // Still usable: overwrite and read back.
    fs.write(o, 0, b"hello").unwrap();
    let mut b = [0u8; 5];
    fs.read(o, 0, &mut b).unwrap();
    assert_eq!(&b, b"hello");
    drop(fs);
    assert_eq!(sim.counters().misuse, 0);
}

#[test]
fn mismatched_and_blank_devices() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(5));
    assert!(matches!(
        Fs::mounted(&mut sim),
        Err(MountError::NotFormatted)
    ));
    Fs::formatted(&mut sim, cfg()).unwrap().unmount().unwrap();
    // Same image, different OOB layout: a clear mismatch.
    let img = sim.storage().clone();
    let mut other_profile = profile::TINY;
    other_profile.capabilities = profile::GD5F1GQ4.capabilities;
    let mut other = SimNand::attach(other_profile, img, FaultPlan::seeded(5)).unwrap();
    assert!(matches!(
        Oftl::<&mut Sim, 2048, 64, 4>::mounted(&mut other),
        Err(MountError::Mismatch(oftl::Mismatch::Capabilities))
    ));
    // A build with too small tables refuses the device.
    assert!(matches!(
        Oftl::<&mut Sim, 2048, 32, 4>::mounted(&mut sim),
        Err(MountError::Mismatch(oftl::Mismatch::Capacity))
    ));
}

#[test]
fn transaction_is_atomic_across_objects() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(6));
    let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
    let a = fs.create(ObjKind::Object).unwrap();
    let b = fs.create(ObjKind::Object).unwrap();
    let da = pattern(1, 5000);
    let db = pattern(2, 7000);
    fs.transact(&[
        oftl::TxOp::Write {
            obj: a,
            offset: 0,
            data: &da,
        },
        oftl::TxOp::Write {
            obj: b,
            offset: 10,
            data: &db,
        },
        oftl::TxOp::Truncate { obj: a, size: 4000 },
    ])
    .unwrap();
    assert_eq!(fs.size(a).ok(), Some(4000));
    assert_eq!(fs.size(b).ok(), Some(7010));
    drop(fs);
    let mut fs = Fs::mounted(&mut sim).unwrap();
    assert_eq!(fs.size(a).ok(), Some(4000));
    assert_eq!(fs.size(b).ok(), Some(7010));
    let mut buf = vec![0u8; 7010];
    fs.read(b, 0, &mut buf).unwrap();
    assert_eq!(&buf[10..], &db[..]);
}

#[test]
fn log_stream_append_read_trim_and_crash() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(8));
    let (l1, l2, obj);
    let mut recs: Vec<(u64, Vec<u8>)> = Vec::new();
    {
        let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
        l1 = fs.create(ObjKind::Log).unwrap();
        l2 = fs.create(ObjKind::Log).unwrap();
        obj = fs.create(ObjKind::Object).unwrap();
        assert_eq!(fs.write(l1, 0, b"x"), Err(WriteError::WrongKind));
        assert_eq!(fs.log_append(obj, b"x"), Err(WriteError::WrongKind));
        let max = fs.log_max_record();
        assert_eq!(max, 4 * 492);
        assert_eq!(
            fs.log_append(l1, &vec![0; max + 1]),
            Err(WriteError::TooLarge)
        );
        for i in 0..120u32 {
            let len = (i as usize * 37) % (max + 1);
            let data = pattern(i, len);
            let lsn = fs.log_append(l1, &data).unwrap();
            if let Some((prev, _)) = recs.last() {
                assert!(lsn > *prev);
            }
            recs.push((lsn, data));
            if i % 7 == 0 {
                fs.log_append(l2, b"other stream").unwrap();
                fs.write(obj, i as u64 * 100, b"interleaved").unwrap();
            }
        }
        fs.log_trim(l1, recs[40].0).unwrap();
        // Crash: no unmount.
    }
    let check = |fs: &mut Fs<'_>, from: usize| {
        let mut buf = vec![0u8; 4096];
        let mut lsn = 0;
        let mut seen = Vec::new();
        while let Some(r) = fs.log_read(l1, lsn, &mut buf).unwrap() {
            seen.push((r.lsn, buf[..r.len].to_vec()));
            lsn = r.next;
        }
        assert_eq!(seen.len(), recs.len() - from);
        for (a, b) in seen.iter().zip(&recs[from..]) {
            assert_eq!(a, b);
        }
    };
    {
        let mut fs = Fs::mounted(&mut sim).unwrap();
        assert!(fs.stats().recovery_scanned_pages > 0);
        check(&mut fs, 40);
        let mut small = [0u8; 4];
        let r = fs.log_read(l1, recs[41].0, &mut small);
        if recs[41].1.len() > 4 {
            assert_eq!(r, Err(oftl::ReadError::BufferTooSmall(recs[41].1.len())));
        }
        fs.unmount().unwrap();
    }
    let mut fs = Fs::mounted(&mut sim).unwrap();
    check(&mut fs, 40);
    let (start, end) = fs.log_bounds(l1).unwrap();
    assert_eq!(start, recs[40].0);
    assert!(end > recs.last().unwrap().0);
    let mut buf = [0u8; 64];
    let r = fs.log_read(l2, 0, &mut buf).unwrap().unwrap();
    assert_eq!(&buf[..r.len], b"other stream");
    drop(fs);
    assert_eq!(sim.counters().misuse, 0);
}

#[test]
fn large_object_uses_several_leaf_index_pages() {
    // 512 entries per leaf: past 1 MiB the object needs a second leaf. A 4 MiB part: the
    // 2 MiB one keeps too much for GC slack and the recovery reserve to hold 1.3 MB.
    type Fs<'a> = Oftl<&'a mut Sim, 2048, 128, 4>;
    let mut sim = SimNand::heap(profile::TINY.with_blocks_per_die(128), FaultPlan::seeded(9));
    let len = 1_300_000usize;
    let data = pattern(77, len);
    let o;
    {
        let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
        o = fs.create(ObjKind::Object).unwrap();
        for (i, chunk) in data.chunks(100_000).enumerate() {
            fs.write(o, i as u64 * 100_000, chunk).unwrap();
        }
        fs.write(o, 1_200_000, b"patch").unwrap();
        fs.flush(o).unwrap();
        // Crash: recovery rebuilds both leaves from backpointers and the checkpoint.
    }
    let mut expect = data;
    expect[1_200_000..1_200_005].copy_from_slice(b"patch");
    let mut fs = Fs::mounted(&mut sim).unwrap();
    let mut buf = vec![0u8; len];
    assert_eq!(fs.read(o, 0, &mut buf).unwrap(), len);
    assert_eq!(buf, expect);
    fs.truncate(o, 1_000_000).unwrap();
    fs.unmount().unwrap();
    let mut fs = Fs::mounted(&mut sim).unwrap();
    assert_eq!(fs.size(o).ok(), Some(1_000_000));
    let mut buf = vec![0u8; 1_000_000];
    fs.read(o, 0, &mut buf).unwrap();
    assert_eq!(&buf[..], &expect[..1_000_000]);
    drop(fs);
    assert_eq!(sim.counters().misuse, 0);
}

#[test]
fn every_built_in_profile() {
    type Big<'a> = Oftl<&'a mut Sim, 2048, 2048, 8>;
    for p in nand_hal::sim::profile::ALL {
        let mut sim = SimNand::heap(p, FaultPlan::seeded(10));
        let (o, l);
        // The default 16-block window on large parts; 8 on the 64-block one (three
        // windows plus the recovery reserve would leave it almost no capacity).
        let window = if p.geometry.blocks() >= 512 { 16 } else { 8 };
        let config = Config {
            window_blocks: window,
            ..Config::default()
        };
        {
            let mut fs = Big::formatted(&mut sim, config).unwrap();
            o = fs.create(ObjKind::Object).unwrap();
            l = fs.create(ObjKind::Log).unwrap();
            fs.write(o, 0, &pattern(1, 300_000)).unwrap();
            fs.log_append(l, b"first").unwrap();
            fs.unmount().unwrap();
        }
        {
            let mut fs = Big::mounted(&mut sim).unwrap();
            fs.write(o, 5, b"crash").unwrap();
            fs.flush(o).unwrap();
            fs.log_append(l, b"second").unwrap();
        }
        let mut fs = Big::mounted(&mut sim).unwrap();
        let mut buf = vec![0u8; 300_000];
        fs.read(o, 0, &mut buf).unwrap();
        let mut expect = pattern(1, 300_000);
        expect[5..10].copy_from_slice(b"crash");
        assert_eq!(buf, expect, "{}", p.name);
        let r = fs.log_read(l, 0, &mut buf).unwrap().unwrap();
        assert_eq!(&buf[..r.len], b"first", "{}", p.name);
        let r = fs.log_read(l, r.next, &mut buf).unwrap().unwrap();
        assert_eq!(&buf[..r.len], b"second", "{}", p.name);
        drop(fs);
        assert_eq!(sim.counters().misuse, 0, "{}", p.name);
    }
}

#[test]
fn small_writes_are_buffered_until_flush() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(21));
    let data = pattern(5, 3000);
    let o;
    {
        let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
        o = fs.create(ObjKind::Object).unwrap();
        fs.sync().unwrap();
        let c0 = fs.flash().counters();
        for i in 0..10 {
            fs.write(o, i * 64, &data[i as usize * 64..][..64]).unwrap();
        }
        // Nothing programmed yet, and reads see the buffered bytes.
        assert_eq!((fs.flash().counters() - c0).programs, 0);
        assert_eq!(fs.size(o).ok(), Some(640));
        assert_eq!(fs.attrs(o).unwrap().size, 640);
        let mut buf = [0u8; 640];
        assert_eq!(fs.read(o, 0, &mut buf).unwrap(), 640);
        assert_eq!(&buf[..], &data[..640]);
        let c1 = fs.flash().counters();
        fs.flush(o).unwrap();
        // One program for the ten writes.
        assert_eq!((fs.flash().counters() - c1).programs, 1);
        // Appending to the flushed partial page reprograms it as one new copy.
        fs.write(o, 640, &data[640..704]).unwrap();
        let c2 = fs.flash().counters();
        fs.flush(o).unwrap();
        assert_eq!((fs.flash().counters() - c2).programs, 1);
        // A flush with nothing dirty costs nothing.
        let c3 = fs.flash().counters();
        fs.flush(o).unwrap();
        assert_eq!((fs.flash().counters() - c3).programs, 0);
        // Unflushed: lost in the crash below.
        fs.write(o, 704, &data[704..800]).unwrap();
    }
    let mut fs = Fs::mounted(&mut sim).unwrap();
    assert_eq!(fs.size(o).ok(), Some(704));
    let mut buf = [0u8; 704];
    fs.read(o, 0, &mut buf).unwrap();
    assert_eq!(&buf[..], &data[..704]);
    drop(fs);
    assert_eq!(sim.counters().misuse, 0);
}

#[test]
fn append_stream_programs_each_page_once() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(22));
    let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
    let o = fs.create(ObjKind::Object).unwrap();
    fs.sync().unwrap();
    let data = pattern(6, 8 * 2048);
    let c0 = fs.flash().counters();
    for (i, c) in data.chunks(64).enumerate() {
        fs.write(o, i as u64 * 64, c).unwrap();
    }
    // Eight complete pages, each programmed once when its last chunk arrived; no
    // read-modify-write.
    let d = fs.flash().counters() - c0;
    assert_eq!(d.programs, 8);
    assert_eq!(d.reads, 0);
    let mut buf = vec![0u8; data.len()];
    fs.read(o, 0, &mut buf).unwrap();
    assert_eq!(buf, data);
    drop(fs);
    assert_eq!(sim.counters().misuse, 0);
}

#[test]
fn crash_keeps_each_object_a_prefix_of_its_writes() {
    // Two pages of one object buffered at once, then an eviction by another object's
    // page: the first object's pages are programmed together, never one without the
    // other; the later, unflushed write to the second object is lost alone.
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(23));
    let (a, b);
    {
        let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
        a = fs.create(ObjKind::Object).unwrap();
        b = fs.create(ObjKind::Object).unwrap();
        fs.write(a, 0, &[1; 100]).unwrap();
        fs.write(a, 3000, &[2; 100]).unwrap();
        // Both buffers hold `a`: this evicts and commits both of `a`'s pages.
        fs.write(b, 0, &[3; 10]).unwrap();
        // Truncate to 0 drops `b`'s buffered write and commits.
        fs.truncate(b, 0).unwrap();
        fs.write(b, 5, &[4; 10]).unwrap();
    }
    let mut fs = Fs::mounted(&mut sim).unwrap();
    assert_eq!(fs.size(a).ok(), Some(3100));
    let mut buf = vec![0u8; 3100];
    fs.read(a, 0, &mut buf).unwrap();
    assert!(buf[..100].iter().all(|&x| x == 1));
    assert!(buf[100..3000].iter().all(|&x| x == 0));
    assert!(buf[3000..].iter().all(|&x| x == 2));
    assert_eq!(fs.size(b).ok(), Some(0));
    drop(fs);
    assert_eq!(sim.counters().misuse, 0);
}

/// An object of up to three pages maps them in its record (no index pages); a fourth
/// page gives it an index holding all four; truncating and deleting give the pages
/// back; clean remounts and crash recovery see the same contents.
#[test]
fn small_objects_map_three_pages_without_an_index() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(5));
    let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
    let p = fs.payload() as usize;
    let a = fs.create(ObjKind::Object).unwrap();
    fs.sync().unwrap();
    let base = fs.used_pages();
    let three = pattern(1, 3 * p);
    fs.write(a, 0, &three).unwrap();
    fs.flush(a).unwrap();
    fs.sync().unwrap();
    assert_eq!(fs.used_pages(), base + 3, "three data pages, no index");
    // Rewriting the middle page costs its new copy only.
    fs.write(a, p as u64, &pattern(2, p)).unwrap();
    fs.flush(a).unwrap();
    fs.sync().unwrap();
    assert_eq!(fs.used_pages(), base + 3);
    let mut want = three.clone();
    want[p..2 * p].copy_from_slice(&pattern(2, p));
    // A crash after a flush: recovery replays the direct pages.
    fs.write(a, 10, &[7; 5]).unwrap();
    fs.flush(a).unwrap();
    want[10..15].copy_from_slice(&[7; 5]);
    drop(fs);
    let mut fs = Fs::mounted(&mut sim).unwrap();
    let mut buf = vec![0u8; 3 * p];
    fs.read(a, 0, &mut buf).unwrap();
    assert_eq!(buf, want);
    // A fourth page: an index (root and leaf) now maps all four.
    fs.write(a, 3 * p as u64, &pattern(3, 100)).unwrap();
    fs.flush(a).unwrap();
    fs.sync().unwrap();
    assert_eq!(
        fs.used_pages(),
        base + 4 + 2,
        "four data pages, a root and a leaf"
    );
    want.extend_from_slice(&pattern(3, 100));
    fs.unmount().unwrap();
    let mut fs = Fs::mounted(&mut sim).unwrap();
    let mut buf = vec![0u8; want.len()];
    fs.read(a, 0, &mut buf).unwrap();
    assert_eq!(buf, want);
    // Truncating a direct object unmaps its pages past the new size.
    let b = fs.create(ObjKind::Object).unwrap();
    fs.write(b, 0, &pattern(4, 2 * p + 1)).unwrap();
    fs.flush(b).unwrap();
    fs.sync().unwrap();
    let with_b = fs.used_pages();
    fs.truncate(b, p as u64 - 1).unwrap();
    fs.sync().unwrap();
    assert_eq!(fs.used_pages(), with_b - 2);
    let mut one = vec![0u8; p];
    assert_eq!(fs.read(b, 0, &mut one).unwrap(), p - 1);
    assert_eq!(one[..p - 1], pattern(4, p - 1)[..]);
    fs.delete(b).unwrap();
    fs.delete(a).unwrap();
    fs.sync().unwrap();
    // Every page of both objects is free, and so are the emptied table page and its
    // leaf: the table's root is all that is left.
    assert_eq!(fs.used_pages(), 1);
    fs.unmount().unwrap();
    drop(fs);
    assert_eq!(sim.counters().misuse, 0);
}

/// The object table spans pages: a page emptied by deletes is unmapped (its flash page
/// no longer counts as used), listing skips it, and both a clean remount and crash
/// recovery give back the same objects. A single-page object costs its metadata page
/// and its data page, no index pages.
#[test]
fn object_table_spans_pages_and_unmaps_empty_ones() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(4));
    let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
    let ids: Vec<u32> = (0..200)
        .map(|_| fs.create(ObjKind::Object).unwrap())
        .collect();
    assert_eq!(ids, (1..=200).collect::<Vec<u32>>());
    fs.sync().unwrap();
    let used = fs.used_pages();
    // 200 metadata pages, 4 table pages (64 records each), the table's leaf and root.
    assert_eq!(used, 200 + 4 + 2);
    fs.write(ids[10], 0, &pattern(9, 64)).unwrap();
    fs.flush(ids[10]).unwrap();
    fs.sync().unwrap();
    assert_eq!(
        fs.used_pages(),
        used + 1,
        "a direct object's data page, no index"
    );
    for id in 64..128 {
        fs.delete(id).unwrap();
    }
    fs.sync().unwrap();
    assert_eq!(fs.used_pages(), used + 1 - 64 - 1, "table page 1 unmapped");
    assert_eq!(fs.object_count(), 136);
    let want: Vec<u32> = (1..64).chain(128..=200).collect();
    let have: Vec<u32> = fs.objects().map(Result::unwrap).collect();
    assert_eq!(have, want);
    assert_eq!(fs.next_object(Some(63)).unwrap(), Some(128));
    assert!(!fs.exists(100).unwrap());
    assert!(fs.exists(128).unwrap());
    let late = fs.create(ObjKind::Object).unwrap();
    assert_eq!(late, 201, "ids are not reused before the bound");
    fs.unmount().unwrap();

    let mut fs = Fs::mounted(&mut sim).unwrap();
    let mut want = want;
    want.push(late);
    assert_eq!(fs.objects().map(Result::unwrap).collect::<Vec<_>>(), want);
    // Crash: changes after the last checkpoint come back from the window's metadata.
    for id in 1..10 {
        fs.delete(id).unwrap();
    }
    let extra = fs.create(ObjKind::Object).unwrap();
    fs.write(extra, 0, &pattern(5, 3000)).unwrap();
    fs.flush(extra).unwrap();
    drop(fs);
    let mut fs = Fs::mounted(&mut sim).unwrap();
    assert!(fs.stats().recovery_replayed_pages > 0);
    want.retain(|&id| id >= 10);
    want.push(extra);
    assert_eq!(fs.objects().map(Result::unwrap).collect::<Vec<_>>(), want);
    assert_eq!(fs.object_count(), want.len() as u32);
    let mut buf = vec![0u8; 3000];
    assert_eq!(fs.read(extra, 0, &mut buf).unwrap(), 3000);
    assert_eq!(buf, pattern(5, 3000));
    let mut small = [0u8; 64];
    fs.read(ids[10], 0, &mut small).unwrap();
    assert_eq!(small.to_vec(), pattern(9, 64));
    assert_eq!(sim.counters().misuse, 0);
}

/// Small appends continue their page with partial programs: four 64-byte records take
/// one page (four programs, LSNs 0..3); the fifth starts the next page. In the NOP = 1
/// mode every append takes a fresh page. A batch is one program of several records.
#[test]
fn log_appends_continue_pages() {
    for partial in [true, false] {
        let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(2));
        let mut fs = Fs::formatted(
            &mut sim,
            Config {
                log_partial_programs: partial,
                ..cfg()
            },
        )
        .unwrap();
        assert_eq!(fs.log_programs_per_page(), if partial { 4 } else { 1 });
        let l = fs.create(ObjKind::Log).unwrap();
        // The first change after format writes its checkpoint; settle that first.
        fs.log_append(l, b"warm-up").unwrap();
        let before = fs.flash().counters();
        let mut lsns = Vec::new();
        for i in 0..8u32 {
            lsns.push(fs.log_append(l, &pattern(i, 64)).unwrap());
        }
        let d = fs.flash().counters() - before;
        if partial {
            assert_eq!(lsns, [1, 2, 3, 4, 5, 6, 7, 8]);
            assert_eq!(d.programs, 8);
            assert_eq!(d.bytes_programmed, 8 * 512);
        } else {
            assert_eq!(lsns, [4, 8, 12, 16, 20, 24, 28, 32]);
            assert_eq!(d.programs, 8);
            assert_eq!(d.bytes_programmed, 8 * 512);
        }
        let batch: Vec<Vec<u8>> = (0..3).map(|i| pattern(100 + i, 30 + i as usize)).collect();
        let refs: Vec<&[u8]> = batch.iter().map(|r| &r[..]).collect();
        let before = fs.flash().counters();
        let first = fs.log_append_batch(l, &refs).unwrap();
        assert_eq!((fs.flash().counters() - before).programs, 1);
        let too_many: Vec<&[u8]> = vec![&[1u8; 400][..]; 5];
        assert_eq!(fs.log_append_batch(l, &too_many), Err(WriteError::TooLarge));
        let mut buf = [0u8; 64];
        let mut lsn = first;
        for r in &batch {
            let rec = fs.log_read(l, lsn, &mut buf).unwrap().unwrap();
            assert_eq!(&buf[..rec.len], &r[..]);
            lsn = rec.next;
        }
        assert_eq!(fs.log_read(l, lsn, &mut buf).unwrap(), None);
        // Everything reads back after a crash (the open page is copied by recovery).
        drop(fs);
        let mut fs = Fs::mounted(&mut sim).unwrap();
        let mut lsn = 0;
        let mut n = 0;
        while let Some(r) = fs.log_read(l, lsn, &mut buf).unwrap() {
            if (1..9).contains(&n) {
                assert_eq!(&buf[..r.len], &pattern(n as u32 - 1, 64)[..]);
            }
            n += 1;
            lsn = r.next;
        }
        assert_eq!(n, 12);
        fs.unmount().unwrap();
    }
}

/// A log stream trimmed as it goes runs forever: its logical pages live in the index at
/// `page % ring`, so passing the index's size (2^18 pages on 2 KiB pages) changes
/// nothing. The NOP = 1 mode takes a logical page per append, to get there quickly.
#[test]
fn log_stream_runs_past_its_index_ring() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(9));
    let mut fs = Fs::formatted(
        &mut sim,
        Config {
            log_partial_programs: false,
            ..cfg()
        },
    )
    .unwrap();
    let l = fs.create(ObjKind::Log).unwrap();
    let ring = 1u64 << 18;
    let mut last = 0;
    let mut n = 0u32;
    while last / 4 < ring + 300 {
        last = fs.log_append(l, &pattern(n, 64)).unwrap();
        n += 1;
        if n % 200 == 0 {
            // Keep the last 100 records.
            let (_, end) = fs.log_bounds(l).unwrap();
            fs.log_trim(l, end - 400).unwrap();
        }
    }
    let check = |fs: &mut Fs<'_>, n: u32| {
        let (start, end) = fs.log_bounds(l).unwrap();
        assert!(end / 4 > ring);
        let mut lsn = start;
        let mut buf = [0u8; 64];
        let mut seen = Vec::new();
        while let Some(r) = fs.log_read(l, lsn, &mut buf).unwrap() {
            seen.push(buf[..r.len].to_vec());
            lsn = r.next;
        }
        assert!(seen.len() >= 100, "{}", seen.len());
        let first = n - seen.len() as u32;
        for (i, s) in seen.iter().enumerate() {
            assert_eq!(
                s,
                &pattern(first + i as u32, 64),
                "record {i} of {}",
                seen.len()
            );
        }
    };
    check(&mut fs, n);
    drop(fs);
    let mut fs = Fs::mounted(&mut sim).unwrap();
    check(&mut fs, n);
    fs.unmount().unwrap();
    let mut fs = Fs::mounted(&mut sim).unwrap();
    check(&mut fs, n);
}

/// Creates and deletes inside transactions: the new objects take the ids
/// `next_object_id` announced, in op order; later ops may write to them; a deleted
/// object cannot be named after its delete; a failed transaction changes nothing; and
/// everything survives a crash.
#[test]
fn transactions_create_and_delete_objects() {
    use oftl::{ReadError, TxOp};
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(9));
    let (dir, old);
    let (n1, n2);
    {
        let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
        dir = fs.create(ObjKind::Object).unwrap();
        old = fs.create(ObjKind::Object).unwrap();
        fs.write(old, 0, &pattern(5, 3000)).unwrap();
        n1 = fs.next_object_id();
        n2 = n1 + 1;
        let mut attrs = [0u8; oftl::ATTR_LEN];
        attrs[3] = 9;
        fs.transact(&[
            TxOp::Create {
                kind: ObjKind::Object,
                attrs: [0; oftl::ATTR_LEN],
            },
            TxOp::Create {
                kind: ObjKind::Log,
                attrs: [0; oftl::ATTR_LEN],
            },
            TxOp::Write {
                obj: n1,
                offset: 0,
                data: &pattern(6, 2500),
            },
            TxOp::Write {
                obj: dir,
                offset: 0,
                data: &n1.to_le_bytes(),
            },
            TxOp::SetAttrs { obj: dir, attrs },
            TxOp::Delete { obj: old },
        ])
        .unwrap();
        assert_eq!(fs.next_object_id(), n2 + 1);
        assert!(!fs.exists(old).unwrap());
        // Misuse: naming a deleted object, writing bytes to a log, deleting what the
        // same transaction creates. Nothing changes.
        let before = fs.flash().counters().programs;
        assert_eq!(
            fs.transact(&[
                TxOp::Delete { obj: dir },
                TxOp::Write {
                    obj: dir,
                    offset: 0,
                    data: &[1]
                },
            ]),
            Err(WriteError::NotFound)
        );
        assert_eq!(
            fs.transact(&[TxOp::Write {
                obj: n2,
                offset: 0,
                data: &[1]
            }]),
            Err(WriteError::WrongKind)
        );
        let next = fs.next_object_id();
        assert_eq!(
            fs.transact(&[
                TxOp::Create {
                    kind: ObjKind::Object,
                    attrs: [0; oftl::ATTR_LEN],
                },
                TxOp::Delete { obj: next },
            ]),
            Err(WriteError::NotFound)
        );
        assert_eq!(fs.flash().counters().programs, before);
        assert_eq!(fs.next_object_id(), next);
        assert!(fs.exists(dir).unwrap());
        fs.log_append(n2, b"record").unwrap();
        // No unmount: a crash.
    }
    let mut fs = Fs::mounted(&mut sim).unwrap();
    let mut buf = vec![0u8; 4000];
    assert_eq!(fs.read(n1, 0, &mut buf).unwrap(), 2500);
    assert_eq!(&buf[..2500], &pattern(6, 2500)[..]);
    assert_eq!(fs.read(dir, 0, &mut buf).unwrap(), 4);
    assert_eq!(&buf[..4], &n1.to_le_bytes());
    assert_eq!(fs.attrs(dir).unwrap().user[3], 9);
    assert_eq!(fs.read(old, 0, &mut buf), Err(ReadError::NotFound));
    let r = fs.log_read(n2, 0, &mut buf).unwrap().unwrap();
    assert_eq!(&buf[..r.len], b"record");
    assert_eq!(fs.next_object_id(), n2 + 1);
}

/// `flush_with_attrs`: the buffered pages and the new attributes are durable together.
#[test]
fn flush_with_attrs_commits_pages_and_attributes_together() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(10));
    let a;
    {
        let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
        a = fs.create(ObjKind::Object).unwrap();
        fs.write(a, 0, &pattern(1, 3000)).unwrap();
        let mut attrs = [0u8; oftl::ATTR_LEN];
        attrs[..8].copy_from_slice(&77u64.to_le_bytes());
        fs.flush_with_attrs(a, &attrs).unwrap();
        // A write after it that is never flushed.
        fs.write(a, 3000, &pattern(2, 10)).unwrap();
    }
    let mut fs = Fs::mounted(&mut sim).unwrap();
    assert_eq!(fs.size(a).unwrap(), 3000);
    let mut buf = vec![0u8; 3000];
    fs.read(a, 0, &mut buf).unwrap();
    assert_eq!(buf, pattern(1, 3000));
    assert_eq!(fs.attrs(a).unwrap().user[..8], 77u64.to_le_bytes());
}

/// A whole-page read keeps a clean copy in a free or clean write-back buffer: reading
/// the page again reads no flash; a transaction that rewrites the page forgets the copy
/// (the next read sees the new bytes) while one that rewrites another page keeps it; a
/// partial read keeps nothing; a buffer holding unprogrammed writes is never taken.
#[test]
fn whole_page_reads_are_kept_until_the_page_changes() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(24));
    let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
    let o = fs.create(ObjKind::Object).unwrap();
    let p = fs.payload() as usize;
    let data = pattern(7, 3 * p);
    fs.write(o, 0, &data).unwrap();
    fs.sync().unwrap();
    let mut page = vec![0u8; p];
    let reads = |fs: &Fs, c: nand_hal::sim::Counters| (fs.flash().counters() - c).reads;
    fs.read(o, 0, &mut page).unwrap();
    assert_eq!(page, data[..p]);
    let c = fs.flash().counters();
    fs.read(o, 0, &mut page).unwrap();
    assert_eq!(reads(&fs, c), 0);
    assert_eq!(page, data[..p]);

    let mut small = [0u8; 64];
    for _ in 0..2 {
        let c = fs.flash().counters();
        fs.read(o, p as u64, &mut small).unwrap();
        assert_eq!(reads(&fs, c), 1, "a partial read is not kept");
        assert_eq!(small[..], data[p..p + 64]);
    }

    fs.transact(&[TxOp::Write {
        obj: o,
        offset: p as u64 + 10,
        data: &[9; 10],
    }])
    .unwrap();
    let c = fs.flash().counters();
    fs.read(o, 0, &mut page).unwrap();
    assert_eq!(reads(&fs, c), 0, "another page's rewrite keeps the copy");

    fs.transact(&[TxOp::Write {
        obj: o,
        offset: 5,
        data: &[8; 4],
    }])
    .unwrap();
    let c = fs.flash().counters();
    fs.read(o, 0, &mut page).unwrap();
    assert_eq!(reads(&fs, c), 1, "a rewrite of the page forgets the copy");
    assert_eq!(page[5..9], [8; 4]);
    assert_eq!(page[..5], data[..5]);

    // One buffer dirty (page 2), the other clean (page 0): reads take only the clean
    // one and program nothing.
    fs.write(o, 2 * p as u64 + 1, &[7; 3]).unwrap();
    let c = fs.flash().counters();
    let mut page1 = vec![0u8; p];
    fs.read(o, p as u64, &mut page1).unwrap();
    fs.read(o, 0, &mut page).unwrap();
    fs.read(o, 2 * p as u64, &mut small).unwrap();
    let d = fs.flash().counters() - c;
    assert_eq!((d.reads, d.programs), (2, 0));
    assert_eq!(small[1..4], [7; 3]);
    assert_eq!(page1[10..20], [9; 10]);

    // Truncating forgets every copy of the object.
    fs.truncate(o, 100).unwrap();
    let c = fs.flash().counters();
    assert_eq!(fs.read(o, 0, &mut page).unwrap(), 100);
    assert_eq!(reads(&fs, c), 1);
    assert_eq!(page[5..9], [8; 4]);
    drop(fs);
    assert_eq!(sim.counters().misuse, 0);
}

/// `discard` forgets writes still buffered: reads and the size are the last flush's
/// again, the flushed ones stay, and nothing is left for the unmount to program.
#[test]
fn discard_forgets_unflushed_writes_only() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(12));
    let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
    let a = fs.create(ObjKind::Object).unwrap();
    fs.write(a, 0, &pattern(1, 3000)).unwrap();
    fs.flush(a).unwrap();
    fs.write(a, 2900, &pattern(2, 700)).unwrap();
    assert_eq!(fs.size(a).unwrap(), 3600);
    fs.discard(a);
    assert_eq!(fs.size(a).unwrap(), 3000);
    let mut got = vec![0u8; 3000];
    assert_eq!(fs.read(a, 0, &mut got).unwrap(), 3000);
    assert_eq!(got, pattern(1, 3000));
    fs.unmount().unwrap();
    let mut fs = Fs::mounted(&mut sim).unwrap();
    assert_eq!(fs.size(a).unwrap(), 3000);
    let mut got = vec![0u8; 3000];
    fs.read(a, 0, &mut got).unwrap();
    assert_eq!(got, pattern(1, 3000));
}
