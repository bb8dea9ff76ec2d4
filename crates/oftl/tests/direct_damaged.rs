//! Stores with direct objects (format 5) of 1-3 pages through damaged mounts (salvage,
//! repair, rebuild, lost pages) and corrupt direct records: a clear error or the right
//! contents, never a panic.

use crate::common;
use common::lifecycle::Lifecycle;
use common::pages::{all_pages, kill};
use common::{bytes, cfg, Fs, Sim};

use std::collections::BTreeMap;

use nand_hal::sim::{profile, FaultPlan};
use nand_hal::PageAddr;
use oftl::format::backpointer::PageKind;
use oftl::{Damaged, ObjKind};

const P: u64 = 2048;

/// A store with direct objects of 1, 2, 3 pages, a sparse one (only page 2), one
/// converted with page 0 a hole, one converted full, and one shrunk back; part synced,
/// part only in the window (flushed), left unmounted (crashed).
fn store(seed: u64) -> (Sim, BTreeMap<u32, Vec<u8>>) {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
    let mut m: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
    {
        let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
        let w = |fs: &mut Fs<'_>,
                 m: &mut BTreeMap<u32, Vec<u8>>,
                 id: u32,
                 off: u64,
                 len: usize,
                 s: u32| {
            let d = bytes(s, len);
            fs.write(id, off, &d).unwrap();
            fs.flush(id).unwrap();
            let o = m.entry(id).or_default();
            if o.len() < off as usize + len {
                o.resize(off as usize + len, 0);
            }
            o[off as usize..off as usize + len].copy_from_slice(&d);
        };
        let mut ids = vec![];
        for _ in 0..8 {
            let id = fs.create(ObjKind::Object).unwrap();
            m.insert(id, vec![]);
            ids.push(id);
        }
        w(&mut fs, &mut m, ids[0], 0, 100, 1);
        w(&mut fs, &mut m, ids[1], 0, (2 * P) as usize, 2);
        w(&mut fs, &mut m, ids[2], 0, (3 * P) as usize, 3);
        w(&mut fs, &mut m, ids[3], 2 * P + 5, 50, 4);
        w(&mut fs, &mut m, ids[4], P, (3 * P) as usize, 5);
        w(&mut fs, &mut m, ids[5], 0, (4 * P) as usize, 6);
        w(&mut fs, &mut m, ids[6], 0, (3 * P) as usize, 7);
        fs.sync().unwrap();
        // In the window only.
        w(&mut fs, &mut m, ids[0], P, 10, 8);
        w(&mut fs, &mut m, ids[1], 2 * P, 10, 9);
        w(&mut fs, &mut m, ids[2], P + 3, 10, 10);
        w(&mut fs, &mut m, ids[3], 0, 10, 11);
        w(&mut fs, &mut m, ids[6], 3 * P, 10, 12);
        fs.truncate(ids[6], P + 1).unwrap();
        m.get_mut(&ids[6]).unwrap().resize((P + 1) as usize, 0);
        w(&mut fs, &mut m, ids[7], 2 * P, 10, 13);
        w(&mut fs, &mut m, ids[7], 0, 10, 14);
        fs.truncate(ids[5], 2 * P).unwrap();
        m.get_mut(&ids[5]).unwrap().resize((2 * P) as usize, 0);
    }
    (sim, m)
}

fn read_all(fs: &mut Fs<'_>) -> BTreeMap<u32, Vec<u8>> {
    let ids: Vec<u32> = fs.objects().collect::<Result<_, _>>().unwrap();
    ids.into_iter()
        .map(|id| {
            let n = fs.size(id).unwrap() as usize;
            let mut b = vec![0u8; n];
            assert_eq!(fs.read(id, 0, &mut b).unwrap(), n);
            (id, b)
        })
        .collect()
}

fn after_work(fs: &mut Fs<'_>, m: &mut BTreeMap<u32, Vec<u8>>) {
    // More boundary-crossing work on the mounted store, then GC and a sync.
    let ids: Vec<u32> = m.keys().copied().collect();
    for (i, &id) in ids.iter().enumerate() {
        let off = (i as u64 % 5) * P + 7;
        let d = bytes(900 + i as u32, 2100);
        fs.write(id, off, &d).unwrap();
        let o = m.get_mut(&id).unwrap();
        if o.len() < off as usize + d.len() {
            o.resize(off as usize + d.len(), 0);
        }
        o[off as usize..off as usize + d.len()].copy_from_slice(&d);
    }
    fs.gc_step(64).unwrap();
    fs.sync().unwrap();
}

#[test]
fn damaged_mounts_of_direct_objects() {
    for seed in 1..6 {
        let (crashed, want) = store(seed);
        for how in ["normal", "salvage", "repair"] {
            let mut sim = crashed.clone();
            let mut fs = Fs::new(&mut sim, oftl::Config::new(), Default::default());
            match how {
                "normal" => fs.mount().unwrap(),
                "salvage" => fs.mount_damaged(Damaged::Salvage).unwrap(),
                _ => fs.mount_damaged(Damaged::Repair).unwrap(),
            }
            assert_eq!(read_all(&mut fs), want, "seed {seed} {how}");
            if how != "salvage" {
                let mut m = want.clone();
                after_work(&mut fs, &mut m);
                drop(fs);
                let mut fs = Fs::mounted(&mut sim).unwrap();
                assert_eq!(read_all(&mut fs), m, "seed {seed} {how} after work");
            }
        }
        // Each window data page of a direct object lost in turn: salvage and repair
        // must not panic and must mount.
        let pages: Vec<_> = all_pages(&crashed)
            .into_iter()
            .filter(|p| p.kind == PageKind::Data && p.owner != 0)
            .collect();
        let mut n = 0;
        for p in pages {
            for how in [Damaged::Salvage, Damaged::Repair] {
                let mut sim = crashed.clone();
                kill(&mut sim, p.page);
                let mut fs = Fs::new(&mut sim, oftl::Config::new(), Default::default());
                let r = fs.mount_damaged(how);
                if r.is_ok() {
                    let ids: Vec<u32> = fs.objects().map_while(Result::ok).collect();
                    for id in ids {
                        let mut b = vec![0u8; 20_000];
                        let _ = fs.read(id, 0, &mut b);
                    }
                    n += 1;
                }
            }
        }
        assert!(n > 0);
    }
}

#[cfg(feature = "alloc")]
#[test]
fn rebuild_of_direct_objects() {
    for seed in 1..6 {
        let (crashed, want) = store(seed);
        // Tables and indexes lost: kill every table and index page.
        {
            let mut sim = crashed.clone();
            for p in all_pages(&crashed) {
                if matches!(p.kind, PageKind::Table | PageKind::Index) {
                    kill(&mut sim, p.page);
                }
            }
            {
                let mut fs = Fs::new(&mut sim, oftl::Config::new(), Default::default());
                fs.mount_damaged(Damaged::Rebuild {
                    lost_meta_attrs: [0xFF; oftl::ATTR_LEN],
                })
                .unwrap();
            }
            let mut fs = Fs::mounted(&mut sim).unwrap();
            let seen = read_all(&mut fs);
            for (id, d) in &want {
                assert_eq!(
                    seen.get(id),
                    Some(d),
                    "seed {seed}: object {id} after rebuild"
                );
            }
            let mut m = seen.clone();
            after_work(&mut fs, &mut m);
            fs.unmount().unwrap();
            drop(fs);
            let mut fs = Fs::mounted(&mut sim).unwrap();
            assert_eq!(read_all(&mut fs), m, "seed {seed}: after rebuild + work");
            let used = fs.used_pages();
            // Every live page once: meta + data + index pages + table.
            drop(fs);
            let fs2 = Fs::mounted(&mut sim).unwrap();
            assert_eq!(fs2.used_pages(), used);
        }
    }
}

/// The table pages holding record `id` (every copy on the image).
fn table_pages_of(sim: &Sim, id: u32) -> Vec<u32> {
    all_pages(sim)
        .into_iter()
        .filter(|p| p.kind == PageKind::Table && p.owner == 0 && p.lpn == id / 64)
        .map(|p| p.page)
        .collect()
}

/// Overwrites bytes `at..at+4` of record `id` in every copy of its table page.
fn poke_record(sim: &mut Sim, id: u32, at: usize, v: &[u8]) {
    for page in table_pages_of(sim, id) {
        let col = (id % 64) as usize * 32 + at;
        sim.poke(PageAddr(page), col as u32, v, &[]);
    }
}

fn exercise(fs: &mut Fs<'_>, ids: &[u32]) -> Vec<String> {
    let mut out = vec![];
    for &id in ids {
        let mut b = vec![0u8; 10_000];
        out.push(format!(
            "read {id}: {:?}",
            fs.read(id, 0, &mut b).map(|_| ())
        ));
        out.push(format!(
            "write {id}: {:?}",
            fs.write(id, 2 * P + 1, b"x").and_then(|_| fs.flush(id))
        ));
        out.push(format!(
            "write3 {id}: {:?}",
            fs.write(id, 3 * P + 1, b"x").and_then(|_| fs.flush(id))
        ));
        out.push(format!("trunc {id}: {:?}", fs.truncate(id, 1)));
    }
    out.push(format!("gc: {:?}", fs.gc_step(64)));
    out.push(format!("sync: {:?}", fs.sync()));
    for &id in ids {
        out.push(format!("delete {id}: {:?}", fs.delete(id)));
    }
    out
}

#[test]
fn corrupt_direct_records_never_panic() {
    // (offset in the record, bytes): pages 1/2 out of range, flags on a log stream,
    // trim bytes on an indexed object, page 1/2 = superblock page or another's page.
    let pokes: Vec<(&str, usize, Vec<u8>)> = vec![
        ("p1 out of range", 24, 0x00FF_FFF0u32.to_le_bytes().to_vec()),
        ("p2 out of range", 28, 1024u32.to_le_bytes().to_vec()),
        ("p1 = page 0", 24, 0u32.to_le_bytes().to_vec()),
        ("p2 = page 64", 28, 64u32.to_le_bytes().to_vec()),
        ("flags 0", 5, vec![0]),
        ("flags 1", 5, vec![1]),
        ("flags 2", 5, vec![2]),
        ("root out of range", 16, 5000u32.to_le_bytes().to_vec()),
    ];
    let mut results = vec![];
    for clean in [true, false] {
        for (name, at, v) in &pokes {
            for target in 0..4usize {
                let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(9));
                let ids: Vec<u32>;
                {
                    let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
                    let a = fs.create(ObjKind::Object).unwrap(); // 3 pages
                    let b = fs.create(ObjKind::Object).unwrap(); // page 2 only
                    let c = fs.create(ObjKind::Object).unwrap(); // indexed
                    let l = fs.create(ObjKind::Log).unwrap();
                    fs.write(a, 0, &bytes(1, 3 * P as usize)).unwrap();
                    fs.write(b, 2 * P, &bytes(2, 10)).unwrap();
                    fs.write(c, 0, &bytes(3, 5 * P as usize)).unwrap();
                    fs.log_append(l, b"rec").unwrap();
                    fs.sync().unwrap();
                    ids = vec![a, b, c, l];
                    if clean {
                        fs.unmount().unwrap();
                    }
                }
                let id = ids[target];
                poke_record(&mut sim, id, *at, v);
                let tag = format!("{name} on {id} clean {clean}");
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let mut log = vec![];
                    match Fs::mounted(&mut sim) {
                        Ok(mut fs) => log.extend(exercise(&mut fs, &ids)),
                        Err(e) => log.push(format!("mount: {e:?}")),
                    }
                    for how in [Damaged::Salvage, Damaged::Repair] {
                        let mut s2 = sim.clone();
                        let mut fs = Fs::new(&mut s2, oftl::Config::new(), Default::default());
                        match fs.mount_damaged(how) {
                            Ok(()) => log.extend(exercise(&mut fs, &ids)),
                            Err(e) => log.push(format!("{how:?}: {e:?}")),
                        }
                    }
                    log
                }));
                match r {
                    Ok(log) => results.push((tag, log)),
                    Err(_) => panic!("{tag}: panicked"),
                }
            }
        }
    }
    if std::env::var("PROBE_TRACE").is_ok() {
        for (t, l) in &results {
            eprintln!("{t}: {l:?}");
        }
    }
    // Out-of-range direct pages must surface as Corrupted on read, not as data.
    for (t, l) in &results {
        if t.starts_with("p1 out") || t.starts_with("p2 out") {
            let first = &l[0];
            assert!(
                first.contains("Corrupt") || first.contains("mount"),
                "{t}: {first}"
            );
        }
    }
}
