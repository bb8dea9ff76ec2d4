//! Independent review of stop 33 (dc703bc, 8bd1798, cf93fce): read-only volumes with
//! staged records overlaid, the replay's fallback to read-only, handles' mount numbers,
//! rename's room in full buckets.
//!
//! The main tool is a differential check: one crashed image (ops acknowledged, then the
//! `Fs` dropped without unmount, so records wait in the staging log) is copied; one copy
//! mounts normally (writable replay), the other on a part whose every program and erase
//! fails (the store mounts read-only, the volume overlays the records). Both must show
//! exactly the acknowledged tree, byte for byte, at every offset.
//!
//! Findings (failed on the reviewed code):
//! - `over_capacity_volume_with_staged_records_can_delete_at_a_later_mount` (fixed: the
//!   read-only turn is withdrawn and writes into holes count as growth, so the store
//!   cannot pass its capacity this way): a volume
//!   whose store is past its capacity and whose staging log holds records turns
//!   read-only inside every `mount` (the replay's patch finds no room), so the "next
//!   mount starts writable, deletes can run first" escape of DESIGN 5 never comes; on a
//!   healthy part (see `crates/oftl/tests/review_s33b.rs` for how a healthy part gets
//!   past its capacity) the volume is read-only for good.
//! - `read_only_volume_reads_every_file_without_poisoning` (open, ignored: DESIGN 5,
//!   "Read-only before unsafe"): on the part `wear_out.rs` uses for a read-only store,
//!   some crashed images mount read-only and then a read fails with `Poisoned` (oftl's
//!   read wants to write a dirty index-cache page back).
//!
//! Probes (hold): the overlay equals the writable replay on 60 random crashed images
//! (records below versions, truncates after records, holes, extending and
//! page-crossing records, several ranges per commit, pending objects, reused ids,
//! staged inline files, renames/removes after staging), reads at any offset/length,
//! seeks past the end, metadata sizes; refusals with `ReadOnly`; `step`/`sync`/`unmount`
//! on the read-only volume; cuts at every program/erase of a read-only mount; renames in
//! a full deepest-level bucket.

use crate::support;

use std::collections::BTreeMap;

use nand_hal::sim::{profile, FaultConfig, FaultPlan};
use stagefs_core::{Error, Kind, OpenOptions, SeekFrom, Tuning};
use support::*;

type Model = BTreeMap<String, Option<Vec<u8>>>; // None: a directory

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn ro() -> OpenOptions {
    OpenOptions::new().read(true)
}

const FILES: [&str; 7] = ["/a", "/b", "/c", "/log", "/d/x", "/d/y", "/d/log"];

/// Reads every entry of the volume (directories and files) into a model.
fn snapshot(v: &mut Vol<'_>) -> Result<Model, Error<nand_hal::sim::SimError>> {
    let mut out = Model::new();
    let mut dirs = vec![String::new()];
    while let Some(d) = dirs.pop() {
        let path = if d.is_empty() {
            "/".to_string()
        } else {
            d.clone()
        };
        let mut list = Vec::new();
        for e in v.read_dir(&path)? {
            let e = e?;
            list.push((format!("{d}/{}", e.name()), e.kind));
        }
        for (p, k) in list {
            match k {
                Kind::Dir => {
                    out.insert(p.clone(), None);
                    dirs.push(p);
                }
                Kind::File => {
                    let f = v.open(&p, ro())?;
                    let mut data = Vec::new();
                    let mut buf = [0u8; 777];
                    loop {
                        let n = v.read(f, &mut buf)?;
                        if n == 0 {
                            break;
                        }
                        data.extend_from_slice(&buf[..n]);
                    }
                    v.close(f)?;
                    out.insert(p, Some(data));
                }
            }
        }
    }
    Ok(out)
}

/// Reads of many offsets and lengths, seeks past the end, sizes: all against `m`.
fn check_reads(v: &mut Vol<'_>, m: &Model, r: &mut Rng, what: &str) {
    for (p, node) in m {
        let Some(want) = node else { continue };
        let md = v
            .metadata(p)
            .unwrap_or_else(|e| panic!("{what}: metadata {p}: {e:?}"));
        assert_eq!(md.size, want.len() as u64, "{what}: metadata size of {p}");
        for _ in 0..6 {
            let from = r.below(want.len() as u64 + 3000);
            let len = [1usize, 7, 64, 300, 2047, 2048, 2049, 4100][r.below(8) as usize];
            let f = v.open(p, ro()).unwrap();
            assert_eq!(v.len(f).unwrap(), want.len() as u64, "{what}: len of {p}");
            v.seek(f, SeekFrom::Start(from)).unwrap();
            let mut buf = vec![0xEEu8; len];
            let n = v.read(f, &mut buf).unwrap();
            let exp: &[u8] = if (from as usize) < want.len() {
                &want[from as usize..want.len().min(from as usize + len)]
            } else {
                &[]
            };
            assert_eq!(&buf[..n], exp, "{what}: {p} read {len} at {from}");
            // From the end backwards.
            let back = r.below(want.len() as u64 + 1) as i64;
            let at = v.seek(f, SeekFrom::End(-back)).unwrap();
            assert_eq!(at, want.len() as u64 - back as u64);
            let mut rest = Vec::new();
            loop {
                let n = v.read(f, &mut buf).unwrap();
                if n == 0 {
                    break;
                }
                rest.extend_from_slice(&buf[..n]);
            }
            assert_eq!(rest, want[at as usize..], "{what}: {p} tail from {at}");
            v.close(f).unwrap();
        }
    }
}

/// A short description of how two models differ.
fn diff(got: &Model, want: &Model) -> String {
    let mut out = String::new();
    for k in got
        .keys()
        .chain(want.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        match (got.get(k), want.get(k)) {
            (Some(a), Some(b)) if a == b => {}
            (Some(Some(a)), Some(Some(b))) => {
                let first = a.iter().zip(b.iter()).position(|(x, y)| x != y);
                out += &format!(
                    "{k}: len {} want {}, first differing byte {first:?}; ",
                    a.len(),
                    b.len()
                );
            }
            (a, b) => {
                out += &format!(
                    "{k}: {:?} want {:?}; ",
                    a.as_ref().map(|n| n.as_ref().map(|d| d.len())),
                    b.as_ref().map(|n| n.as_ref().map(|d| d.len()))
                )
            }
        }
    }
    out
}

fn parent_exists(m: &Model, p: &str) -> bool {
    match p.rfind('/') {
        Some(0) => true,
        Some(i) => matches!(m.get(&p[..i]), Some(None)),
        None => false,
    }
}

/// One random acknowledged operation on `v`, mirrored in `m`. Returns a description.
fn step_op(v: &mut Vol<'_>, m: &mut Model, r: &mut Rng, k: u64) -> String {
    let p = FILES[r.below(FILES.len() as u64) as usize];
    let seed = k as u32;
    match r.below(20) {
        // Appends with fsync: the staged path (64-byte appends continue the previous).
        0..=6 => {
            if !parent_exists(m, p) {
                return "skip".into();
            }
            let len = [1usize, 17, 64, 64, 64, 200, 700][r.below(7) as usize];
            let d = pattern(seed, len);
            let f = v.open(p, create().append(true)).unwrap();
            v.write(f, &d).unwrap();
            v.fsync(f).unwrap();
            if r.below(3) == 0 {
                // A second append in the same session: continues the first.
                let d2 = pattern(seed ^ 0x55, 64);
                v.write(f, &d2).unwrap();
                v.fsync(f).unwrap();
                let e = m
                    .entry(p.to_string())
                    .or_insert(Some(vec![]))
                    .as_mut()
                    .unwrap();
                e.extend_from_slice(&d);
                e.extend_from_slice(&d2);
            } else {
                m.entry(p.to_string())
                    .or_insert(Some(vec![]))
                    .as_mut()
                    .unwrap()
                    .extend_from_slice(&d);
            }
            v.close(f).unwrap();
            format!("append {p} {len}")
        }
        // Overwrites at an offset (maybe past the end: a hole), several ranges in one
        // commit, fsync.
        7..=10 => {
            if !parent_exists(m, p) || !matches!(m.get(p), Some(Some(_))) {
                return "skip".into();
            }
            let f = v.open(p, rw()).unwrap();
            let cur = m[p].as_ref().unwrap().len() as u64;
            let nr = 1 + r.below(3);
            let mut desc = format!("write {p}");
            for _ in 0..nr {
                let off = match r.below(4) {
                    0 => cur.saturating_sub(r.below(100)),
                    1 => r.below(cur + 1),
                    2 => cur + r.below(3000),
                    _ => (cur / 2048) * 2048 + 2048 - r.below(40).min(cur),
                };
                let len = [1usize, 30, 64, 100, 500][r.below(5) as usize];
                let d = pattern(seed.wrapping_add(off as u32), len);
                v.seek(f, SeekFrom::Start(off)).unwrap();
                v.write(f, &d).unwrap();
                let e = m.get_mut(p).unwrap().as_mut().unwrap();
                let end = off as usize + len;
                if e.len() < end {
                    e.resize(end, 0);
                }
                e[off as usize..end].copy_from_slice(&d);
                desc += &format!(" @{off}+{len}");
            }
            v.fsync(f).unwrap();
            v.close(f).unwrap();
            desc
        }
        11 => {
            if !matches!(m.get(p), Some(Some(_))) {
                return "skip".into();
            }
            let cur = m[p].as_ref().unwrap().len() as u64;
            let size = match r.below(3) {
                0 => r.below(cur + 1),
                1 => cur + r.below(2500),
                _ => r.below(300),
            };
            let f = v.open(p, rw()).unwrap();
            v.truncate(f, size).unwrap();
            // Then maybe an append after the truncate, staged or not.
            let e = m.get_mut(p).unwrap().as_mut().unwrap();
            e.resize(size as usize, 0);
            if r.below(2) == 0 {
                let d = pattern(seed, 64);
                v.seek(f, SeekFrom::Start(size)).unwrap();
                v.write(f, &d).unwrap();
                v.fsync(f).unwrap();
                e.extend_from_slice(&d);
            }
            v.close(f).unwrap();
            format!("truncate {p} {size}")
        }
        12..=14 => {
            if !parent_exists(m, p) || matches!(m.get(p), Some(None)) {
                return "skip".into();
            }
            let len = [0usize, 5, 100, 250, 256, 257, 300, 2048, 3000][r.below(9) as usize];
            let d = pattern(seed, len);
            write_file(v, p, &d);
            m.insert(p.to_string(), Some(d));
            format!("put {p} {len}")
        }
        15 => {
            if !matches!(m.get(p), Some(Some(_))) {
                return "skip".into();
            }
            v.remove(p).unwrap();
            m.remove(p);
            format!("remove {p}")
        }
        16 | 17 => {
            let q = FILES[r.below(FILES.len() as u64) as usize];
            if !matches!(m.get(p), Some(Some(_)))
                || matches!(m.get(q), Some(None))
                || !parent_exists(m, q)
            {
                return "skip".into();
            }
            v.rename(p, q).unwrap();
            if p != q {
                let d = m.remove(p).unwrap();
                m.insert(q.to_string(), d);
            }
            format!("rename {p} {q}")
        }
        18 => {
            if m.contains_key("/d") {
                if m.keys().any(|k| k.starts_with("/d/")) {
                    return "skip".into();
                }
                v.remove_dir("/d").unwrap();
                m.remove("/d");
                "rmdir /d".into()
            } else {
                v.create_dir("/d").unwrap();
                m.insert("/d".into(), None);
                "mkdir /d".into()
            }
        }
        _ => {
            if r.below(3) == 0 {
                v.sync().unwrap();
                "sync".into()
            } else {
                "nothing".into()
            }
        }
    }
}

/// A crashed image: `ops` random operations (acknowledged), then maybe a file opened
/// with truncate and written without a commit (a pending object), then the `Fs` dropped.
fn build_image(seed: u64, ops: u64) -> (Sim, Model, Vec<String>, bool) {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
    let mut m = Model::new();
    let mut log = Vec::new();
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let staged;
    {
        let mut v = vol(&mut sim);
        v.format().unwrap();
        if seed % 2 == 0 {
            v.set_tuning(Tuning {
                staging: true,
                bypass: false,
            });
        }
        v.create_dir("/d").unwrap();
        m.insert("/d".into(), None);
        for k in 0..ops {
            let d = step_op(&mut v, &mut m, &mut r, k);
            log.push(d);
        }
        if r.below(2) == 0 {
            // Pending object: truncate at open, grown past inline, never committed.
            let p = FILES[r.below(FILES.len() as u64) as usize];
            if matches!(m.get(p), Some(Some(d)) if !d.is_empty()) {
                let f = v.open(p, rw().truncate(true)).unwrap();
                v.write(f, &pattern(99, 3000)).unwrap();
                log.push(format!("pending {p} (never committed)"));
                let _ = f;
            }
        }
        let st = v.staging_status().unwrap();
        staged = st.end_lsn > st.first_lsn;
        // Crash: dropped with no unmount.
    }
    (sim, m, log, staged)
}

fn fail_everything(sim: &mut Sim, seed: u64) {
    sim.arm(FaultPlan::seeded(seed).with_faults(FaultConfig {
        program_fail_ppm: 1_000_000,
        erase_fail_ppm: 1_000_000,
        ..FaultConfig::default()
    }));
}

/// Whether the image had staged records; `None` when the store on the failing part did
/// not mount at all (`Mount(NoSpace)`: the in-RAM recovery ran out of blocks for its cache
/// write-backs, documented as open in DESIGN 5).
#[derive(Debug, PartialEq)]
enum Outcome {
    Checked {
        staged: bool,
    },
    /// The store on the failing part did not mount (documented open).
    Unmountable,
    /// Mounted read-only, then a read failed with `Poisoned`.
    ReadPoisoned(String),
}

fn differential(seed: u64, ops: u64) -> Outcome {
    let (sim, want, log, staged) = build_image(seed, ops);
    let ctx = |what: &str| format!("seed {seed} ({what}); ops {log:?}");
    // A: the normal mount.
    let mut a_sim = sim.clone();
    let mut b_sim = sim;
    let a = {
        let mut v = vol(&mut a_sim);
        v.mount()
            .unwrap_or_else(|e| panic!("{}: {e:?}", ctx("writable mount")));
        assert!(!v.read_only());
        let got = snapshot(&mut v).unwrap();
        assert!(
            got == want,
            "{}: {}",
            ctx("writable replay vs acknowledged"),
            diff(&got, &want)
        );
        got
    };
    // B: the same image on a part that fails every program and erase.
    fail_everything(&mut b_sim, seed);
    let mut v = vol(&mut b_sim);
    match v.mount() {
        Ok(()) => {}
        Err(Error::Mount(oftl::MountError::NoSpace)) => return Outcome::Unmountable,
        Err(e) => panic!("{}: {e:?}", ctx("read-only mount")),
    }
    assert!(v.read_only(), "{}", ctx("volume not read-only"));
    let b = match snapshot(&mut v) {
        Ok(b) => b,
        Err(Error::Poisoned) => return Outcome::ReadPoisoned(format!("{log:?}")),
        Err(e) => panic!("{}: {e:?}", ctx("read-only read")),
    };
    assert!(
        b == a,
        "{}: {}",
        ctx("overlay vs writable replay"),
        diff(&b, &a)
    );
    let mut r = Rng(seed | 1);
    check_reads(&mut v, &want, &mut r, &ctx("read-only reads"));
    // Everything refused, nothing changed.
    for p in FILES {
        assert_eq!(
            v.open(p, create()).err(),
            Some(Error::ReadOnly),
            "{}",
            ctx("open create")
        );
        assert_eq!(
            v.open(p, OpenOptions::new().append(true))
                .err()
                .map(|e| e == Error::ReadOnly || e == Error::NotFound),
            Some(true)
        );
        if want.contains_key(p) {
            assert_eq!(v.remove(p), Err(Error::ReadOnly));
            assert_eq!(v.rename(p, "/zz"), Err(Error::ReadOnly));
            assert_eq!(v.set_attributes(p, b"x"), Err(Error::ReadOnly));
        }
    }
    assert_eq!(v.create_dir("/e"), Err(Error::ReadOnly));
    assert_eq!(
        v.remove_dir("/d").err().map(|e| e == Error::ReadOnly),
        Some(true)
    );
    for _ in 0..3 {
        v.step(16)
            .unwrap_or_else(|e| panic!("{}: {e:?}", ctx("step")));
    }
    v.sync()
        .unwrap_or_else(|e| panic!("{}: {e:?}", ctx("sync")));
    let got = snapshot(&mut v).unwrap();
    assert!(got == want, "{}: {}", ctx("after steps"), diff(&got, &want));
    v.unmount()
        .unwrap_or_else(|e| panic!("{}: {e:?}", ctx("unmount")));
    drop(v);
    // Read-only again: the same; then on a healthy part again: the same, writable.
    let mut v = vol(&mut b_sim);
    v.mount().unwrap();
    let got = snapshot(&mut v).unwrap();
    assert!(
        got == want,
        "{}: {}",
        ctx("second read-only mount"),
        diff(&got, &want)
    );
    drop(v);
    b_sim.arm(FaultPlan::seeded(seed));
    let mut v = vol(&mut b_sim);
    match v.mount() {
        Ok(()) => {
            let got = snapshot(&mut v).unwrap();
            assert!(
                got == want,
                "{}: {}",
                ctx("healthy again"),
                diff(&got, &want)
            );
        }
        // The failing part retired blocks: it may stay read-only.
        Err(e) => panic!("{}: {e:?}", ctx("mount on the healthy part again")),
    }
    Outcome::Checked { staged }
}

#[test]
fn probe_overlay_equals_replay_differential() {
    let n: u64 = std::env::var("REVIEW_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let (mut staged, mut unmountable, mut poisoned) = (0, 0, Vec::new());
    for seed in 1..=n {
        match differential(seed, 20 + seed % 50) {
            Outcome::Checked { staged: s } => staged += s as u32,
            Outcome::Unmountable => unmountable += 1,
            Outcome::ReadPoisoned(_) => poisoned.push(seed),
        }
    }
    eprintln!(
        "{n} images: {staged} with staged records, {unmountable} not mountable on the \
         failing part, reads poisoned on {poisoned:?}"
    );
    assert!(poisoned.is_empty(), "reads poisoned on {poisoned:?}");
    assert!(
        staged as u64 > n / 2,
        "only {staged} of {n} images had staged records"
    );
}

/// Diagnosis of `read_only_volume_reads_every_file_without_poisoning` (ignored; run with
/// `S=33 ... -- --ignored --nocapture`): reads the files' objects straight from the
/// read-only store, bypassing the overlay; one returns `Exhausted` and poisons it.
#[test]
#[ignore]
fn debug_direct() {
    let seed: u64 = std::env::var("S").unwrap().parse().unwrap();
    let (sim, want, log, _) = build_image(seed, 20 + seed % 50);
    eprintln!("{log:?}");
    let mut b_sim = sim;
    fail_everything(&mut b_sim, seed);
    let mut v = vol(&mut b_sim);
    v.mount().unwrap();
    let objs: Vec<(String, u32, usize)> = want
        .iter()
        .filter_map(|(p, n)| n.as_ref().map(|d| (p.clone(), d.len())))
        .filter_map(|(p, len)| v.location(&p).unwrap().object.map(|o| (p, o, len)))
        .collect();
    eprintln!("objects {objs:?}");
    for (p, o, len) in objs.iter().rev() {
        let mut buf = vec![0u8; *len];
        let r = v.store_mut().read(*o, 0, &mut buf);
        eprintln!("{p} obj {o}: {r:?}, health {:?}", v.store().health());
    }
}

/// Fills a healthy volume with `/fill` (whole pages, each counted) until `NoSpace`, then
/// gives `free` pages back (truncate).
fn fill_up(v: &mut Vol<'_>, free: u64) -> u64 {
    let page = pattern(7, 2048);
    let mut pages = 0u64;
    loop {
        let f = v.open("/fill", create().append(true)).unwrap();
        let r = v.write(f, &page).and_then(|_| v.fsync(f));
        let c = v.close(f);
        if r.is_err() || c.is_err() {
            break;
        }
        pages += 1;
    }
    let keep = pages.saturating_sub(free);
    let f = v.open("/fill", rw()).unwrap();
    v.truncate(f, keep * 2048).unwrap();
    v.close(f).unwrap();
    keep
}

#[test]
#[ignore]
fn explore_full_replay() {
    let names = [
        "/l0", "/l1", "/l2", "/l3", "/l4", "/l5", "/l6", "/l7", "/l8", "/l9", "/la", "/lb",
    ];
    for nfiles in [3usize, 8, 9, 12] {
        for free in 0..24u64 {
            let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(free));
            let mut m = Model::new();
            let res: Result<(), Error<nand_hal::sim::SimError>> = (|| {
                let mut v = vol(&mut sim);
                v.format()?;
                v.set_tuning(Tuning {
                    staging: true,
                    bypass: false,
                });
                for (i, p) in names[..nfiles].iter().enumerate() {
                    let d = pattern(i as u32, 1900 + i * 7);
                    write_file(&mut v, p, &d);
                    m.insert(p.to_string(), Some(d));
                }
                v.sync()?;
                let keep = fill_up(&mut v, free);
                v.set_tuning(Tuning {
                    staging: true,
                    bypass: false,
                });
                m.insert("/fill".into(), Some(pattern(7, 2048).repeat(keep as usize)));
                for round in 0..6 {
                    for (i, p) in names[..nfiles].iter().enumerate() {
                        let d = pattern((round * 100 + i) as u32, 64);
                        let f = v.open(p, rw().append(true))?;
                        v.write(f, &d)?;
                        v.fsync(f)?;
                        v.close(f)?;
                        m.get_mut(*p)
                            .unwrap()
                            .as_mut()
                            .unwrap()
                            .extend_from_slice(&d);
                    }
                }
                let st = v.staging_status()?;
                eprintln!(
                    "  staged {:?}, used {} cap {}",
                    st,
                    v.store().used_pages(),
                    v.store().capacity_pages()
                );
                Ok(())
            })();
            let mut v = vol(&mut sim);
            let mr = v.mount();
            let seen = mr.as_ref().ok().map(|_| snapshot(&mut v));
            eprintln!(
                "nfiles {nfiles} free {free}: build {res:?}; mount {mr:?}, read_only {}, health {:?}, tree ok {:?}",
                v.read_only(),
                v.store().health(),
                seen.map(|s| s.map(|s| if s == m { "same".to_string() } else { diff(&s, &m) }))
            );
        }
    }
}

/// Builds a healthy volume pushed into the over-capacity zone by filling a sparse
/// file's holes (the oftl finding) after `nfiles` files got staged appends; crashes.
fn over_capacity_image(nfiles: usize, rounds: usize, seed: u64) -> (Sim, Model, String) {
    let names = [
        "/l0", "/l1", "/l2", "/l3", "/l4", "/l5", "/l6", "/l7", "/l8", "/l9",
    ];
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
    let mut m = Model::new();
    let end;
    {
        let mut v = vol(&mut sim);
        v.format().unwrap();
        v.set_tuning(Tuning {
            staging: true,
            bypass: false,
        });
        for (i, p) in names[..nfiles].iter().enumerate() {
            let d = pattern(i as u32, 1900 + i * 7);
            write_file(&mut v, p, &d);
            m.insert(p.to_string(), Some(d));
        }
        // The sparse file: one byte far out.
        let cap = v.store().capacity_pages();
        let f = v.open("/big", create()).unwrap();
        v.seek(f, SeekFrom::Start(2 * cap * 2048)).unwrap();
        v.write(f, &[9]).unwrap();
        v.close(f).unwrap();
        let mut big = vec![0u8; 2 * cap as usize * 2048 + 1];
        big[2 * cap as usize * 2048] = 9;
        v.sync().unwrap();
        for round in 0..rounds {
            for (i, p) in names[..nfiles].iter().enumerate() {
                let d = pattern((round * 100 + i) as u32 ^ seed as u32, 64);
                let f = v.open(p, rw().append(true)).unwrap();
                v.write(f, &d).unwrap();
                v.fsync(f).unwrap();
                v.close(f).unwrap();
                m.get_mut(*p)
                    .unwrap()
                    .as_mut()
                    .unwrap()
                    .extend_from_slice(&d);
            }
        }
        // Fill the holes until the store refuses.
        let page = pattern(3, 2048);
        let mut lpn = 0u64;
        let last = loop {
            let f = v.open("/big", rw()).unwrap();
            v.seek(f, SeekFrom::Start(lpn * 2048)).unwrap();
            let r = v.write(f, &page).and_then(|_| v.fsync(f));
            let c = v.close(f);
            if let Err(e) = r.and(c) {
                break e;
            }
            big[lpn as usize * 2048..(lpn as usize + 1) * 2048].copy_from_slice(&page);
            lpn += 1;
        };
        m.insert("/big".into(), Some(big));
        let st = v.staging_status().unwrap();
        end = format!(
            "filled {lpn} holes, then {last:?}; store {:?}, used {} of {}; staging {st:?}",
            v.store().health(),
            v.store().used_pages(),
            v.store().capacity_pages()
        );
    }
    (sim, m, end)
}

#[test]
#[ignore]
fn explore_over_capacity() {
    for nfiles in [1usize, 3, 8] {
        for rounds in [1usize, 3, 6] {
            let (mut sim, m, how) = over_capacity_image(nfiles, rounds, 1);
            let mut v = vol(&mut sim);
            let mr = v.mount();
            let seen = mr.as_ref().ok().map(|_| snapshot(&mut v));
            eprintln!(
                "nfiles {nfiles} rounds {rounds}: {how}\n   mount {mr:?}, read_only {} (stage {}), health {:?}, tree {:?}, staging {:?}",
                v.read_only(),
                v.read_only() && !matches!(v.store().health(), oftl::Health::ReadOnly(_)),
                v.store().health(),
                seen.map(|s| s.map(|s| if s == m { "same".to_string() } else { diff(&s, &m) })),
                v.staging_status()
            );
        }
    }
}

/// FINDING (severity: high). A healthy part (no bad block) whose volume has staged
/// records and live data past the store's capacity (the oftl finding of
/// `crates/oftl/tests/review_s33b.rs`: filling a sparse file's holes is never counted)
/// stays read-only at every mount, so nothing can ever be deleted from it.
///
/// Repro: files `/l0..2` with 64-byte appends fsynced (staged), then the holes of a
/// sparse `/big` filled page by page until the store turns read-only; crash. Mount,
/// unmount, mount again, `remove("/big")`.
/// Expected (DESIGN 5: the read-only turn lasts "for the session (the next mount starts
/// writable, so deletes that fit the shrink floor can still run first)"): a later mount
/// is writable long enough to delete `/big`, which frees hundreds of pages.
/// Observed: every mount replays the staging log and patches it home before the user
/// gets the volume; the patch finds no room, the store turns read-only
/// (`ReadOnly(GoodBlocks)`) inside `mount`, and `remove` fails with `ReadOnly`, at every
/// mount, for good.
#[test]
fn over_capacity_volume_with_staged_records_can_delete_at_a_later_mount() {
    let (mut sim, want, how) = over_capacity_image(3, 3, 1);
    for mount in 0..3 {
        let mut v = vol(&mut sim);
        v.mount()
            .unwrap_or_else(|e| panic!("mount {mount}: {e:?} ({how})"));
        let got = snapshot(&mut v).unwrap();
        assert!(got == want, "mount {mount}: {}", diff(&got, &want));
        if !v.read_only() {
            assert_eq!(v.remove("/big"), Ok(()));
            return;
        }
        v.unmount().unwrap();
    }
    let mut v = vol(&mut sim);
    v.mount().unwrap();
    let bad = v
        .store()
        .blocks()
        .iter()
        .filter(|b| b.state() == oftl::BlockState::Bad)
        .count();
    assert_eq!(
        v.remove("/big"),
        Ok(()),
        "a healthy part ({bad} bad blocks) is read-only at every mount (store {:?}, used {} \
         of capacity {}), so its data can never be deleted ({how})",
        v.store().health(),
        v.store().used_pages(),
        v.store().capacity_pages()
    );
}

/// Probe for `over_capacity_volume_with_staged_records_can_delete_at_a_later_mount`,
/// after the fixes: the store of that image, mounted alone (no staging replay), is
/// writable at every mount and within its capacity (filling holes counts as growth).
#[test]
fn probe_over_capacity_store_alone_mounts_writable() {
    let (mut sim, _want, _how) = over_capacity_image(3, 3, 1);
    for _ in 0..2 {
        let mut s = Store::new(&mut sim, cfg(), oftl::Greedy::DEFAULT);
        s.mount().unwrap();
        assert_eq!(s.health(), oftl::Health::Writable);
        assert!(s.used_pages() <= s.capacity_pages());
        s.unmount().unwrap();
    }
}

/// FINDING (severity: medium). The end-of-life contract (README "End of life", crate
/// docs): a store that mounts read-only "mounts as a read-only volume showing every
/// fsynced byte". On the harness `wear_out.rs` uses for a read-only store (every program
/// and erase fails), images crashed after ordinary workloads mount read-only, then
/// reading their files fails with `Poisoned` and the volume is dead until a remount
/// (which fails the same way). Root cause is in oftl, not in the overlay: the store's
/// own `read` of the file's object returns `Exhausted` (see `debug_direct`): the mount
/// replayed the crash window in RAM ("mounts read-only instead of failing"), leaving
/// dirty index-cache pages that a later read must write back to evict, and a read-only
/// store on a part that cannot program has nowhere to put them; `fail_read` then poisons
/// the handle. DESIGN 5 lists as open only that such a part may "not mount"; here it
/// mounts and then cannot be read. Repro: `build_image(33, 53)` / `build_image(74, 44)`
/// (random acknowledged ops, then a crash), `fail_everything`, mount, read every file.
/// Expected: every file reads back as acknowledged (or the mount is refused).
/// Observed: `Ok` mount, `read_only()`, then `read` -> `Poisoned` (store `Exhausted`).
/// Open (stop 33): the in-RAM replay would have to leave a clean cache slot, or re-derive
/// an evicted dirty index page from the window on demand.
///
/// Fixed (stop 40): a store that writes only cache pages evicts clean pages first and
/// reads a page's missing parents through the slot freed for it, so a read writes
/// nothing while one slot is clean; the mount keeps one clean (`oftl/src/cache.rs`).
#[test]
fn read_only_volume_reads_every_file_without_poisoning() {
    for seed in [33u64, 74] {
        let (mut sim, want, _log, _) = build_image(seed, 20 + seed % 50);
        fail_everything(&mut sim, seed);
        let mut v = vol(&mut sim);
        v.mount().unwrap();
        assert!(v.read_only());
        let got = snapshot(&mut v);
        assert!(
            matches!(&got, Ok(t) if *t == want),
            "seed {seed}: reads of a read-only volume: {:?} (store {:?})",
            got.as_ref().map(|t| diff(t, &want)),
            v.store().health()
        );
    }
}

fn fnv(name: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in name {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// `n` names of `len` bytes hashing alike in 13 bits (one deepest-level bucket).
fn colliding(n: usize, len: usize, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let w = len - prefix.len();
    let target = fnv(format!("{prefix}{:0>w$}", 0).as_bytes()) & 0x1fff;
    let mut i = 0u64;
    while out.len() < n {
        let s = format!("{prefix}{i:0>w$}");
        if fnv(s.as_bytes()) & 0x1fff == target {
            out.push(s);
        }
        i += 1;
    }
    out
}

/// Probe: renames inside a full deepest-level bucket (files with objects, inline files
/// whose contents are staged in the log, empty directories; over names, onto fresh
/// names of the same bucket, out to another directory and back), with crashes and
/// remounts: every rename either succeeds as the model says or fails cleanly
/// (`DirectoryFull`, `NotEmpty`, `IsADirectory`, `NotADirectory`) with nothing changed;
/// never `Corrupted`/`Internal`; every name listed once.
#[test]
fn probe_renames_in_a_full_deepest_bucket() {
    for seed in 1..=6u64 {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
        let names = colliding(60, 20 + 7 * seed as usize, "r");
        let mut m = Model::new();
        let mut r = Rng((seed * 7919) | 1);
        let mut v = vol(&mut sim);
        v.format().unwrap();
        v.create_dir("/c").unwrap();
        v.create_dir("/o").unwrap();
        m.insert("/c".into(), None);
        m.insert("/o".into(), None);
        let p = |i: usize| format!("/c/{}", names[i]);
        let mut made = 0;
        for i in 0..names.len() {
            let res = match i % 3 {
                0 => v.create_dir(&p(i)),
                _ => v.open(&p(i), create()).and_then(|f| {
                    let d = pattern(i as u32, if i % 3 == 1 { 20 } else { 600 });
                    v.write(f, &d)?;
                    v.close(f)
                }),
            };
            match res {
                Ok(()) => {
                    m.insert(
                        p(i),
                        if i % 3 == 0 {
                            None
                        } else {
                            Some(pattern(i as u32, if i % 3 == 1 { 20 } else { 600 }))
                        },
                    );
                    made += 1;
                }
                Err(Error::DirectoryFull) => {
                    // An open-create is durable at the open: a commit refused for
                    // room leaves the file empty.
                    if v.metadata(&p(i)).is_ok() {
                        m.insert(p(i), Some(vec![]));
                        made += 1;
                    }
                    break;
                }
                Err(e) => panic!("seed {seed}: setup {i}: {e:?}"),
            }
        }
        let got = snapshot(&mut v).unwrap();
        assert!(got == m, "seed {seed} setup: {}", diff(&got, &m));
        let mut sim_ref = None;
        for k in 0..120 {
            // Stage some inline rewrites of names in the bucket.
            if r.below(3) == 0 {
                let i = r.below(made as u64) as usize;
                if let Some(Some(d)) = m.get(&p(i)).cloned() {
                    if d.len() <= 40 {
                        let nd = pattern(k, d.len().min(30) + r.below(10) as usize);
                        let f = v.open(&p(i), rw().truncate(true)).unwrap();
                        match v.write(f, &nd).and_then(|_| v.close(f)) {
                            Ok(_) => {
                                m.insert(p(i), Some(nd));
                            }
                            Err(Error::DirectoryFull) => {}
                            Err(e) => panic!("seed {seed} step {k}: rewrite: {e:?}"),
                        }
                    }
                }
            }
            let a = r.below(made as u64 + 3) as usize;
            let b = r.below(made as u64 + 3) as usize;
            let from = if a >= made {
                format!("/o/x{}", a - made)
            } else {
                p(a)
            };
            let to = if b >= made {
                format!("/o/x{}", b - made)
            } else {
                p(b)
            };
            if !m.contains_key(&from) {
                continue;
            }
            let before = snapshot(&mut v).unwrap();
            let res = v.rename(&from, &to);
            let mut want = m.clone();
            let ok = match (m.get(&from), m.get(&to)) {
                _ if from == to => true,
                (Some(None), Some(None)) => !m.keys().any(|x| x.starts_with(&format!("{to}/"))),
                (Some(None), Some(Some(_))) | (Some(Some(_)), Some(None)) => false,
                _ => true,
            };
            match res {
                Ok(()) => {
                    assert!(ok, "seed {seed} step {k}: rename {from} {to} succeeded");
                    if from != to {
                        let n = want.remove(&from).unwrap();
                        want.insert(to.clone(), n);
                    }
                    m = want;
                }
                Err(
                    Error::DirectoryFull
                    | Error::NotEmpty
                    | Error::IsADirectory
                    | Error::NotADirectory,
                ) => {
                    let after = snapshot(&mut v).unwrap();
                    assert!(
                        after == before,
                        "seed {seed} step {k}: failed rename changed: {}",
                        diff(&after, &before)
                    );
                }
                Err(e) => panic!("seed {seed} step {k}: rename {from} -> {to}: {e:?}"),
            }
            let got = snapshot(&mut v).unwrap();
            assert!(
                got == m,
                "seed {seed} step {k} rename {from} {to}: {}",
                diff(&got, &m)
            );
            let listed = v.read_dir("/c").unwrap().count();
            assert_eq!(listed, m.keys().filter(|x| x.starts_with("/c/")).count());
            if k % 40 == 39 {
                // Crash (records staged) and mount again.
                drop(v);
                sim_ref = Some(());
                v = vol(&mut sim);
                v.mount().unwrap();
                let got = snapshot(&mut v).unwrap();
                assert!(got == m, "seed {seed} after a crash: {}", diff(&got, &m));
            }
        }
        let _ = sim_ref;
    }
}

/// Probe: a power cut at every program/erase of a mount that comes up read-only (every
/// program and erase failing, staged records overlaid), then mounts again on the
/// failing part and on a healthy one: always the acknowledged tree. Also counts the
/// programs/erases that reads of the read-only volume issue (none expected).
#[test]
fn probe_cuts_during_read_only_mounts_and_reads() {
    use nand_hal::sim::{CutKind, TornMode};
    let mut checked = 0;
    for seed in [3u64, 5, 8, 11, 14] {
        let (sim, want, _log, staged) = build_image(seed, 20 + seed % 50);
        // How many program/erase operations the read-only mount issues.
        let ops = {
            let mut s = sim.clone();
            fail_everything(&mut s, seed);
            let mut v = vol(&mut s);
            if v.mount().is_err() {
                continue;
            }
            assert!(v.read_only());
            let before = v.store().flash().counters();
            let got = snapshot(&mut v).unwrap();
            assert!(got == want, "seed {seed}: {}", diff(&got, &want));
            let after = v.store().flash().counters();
            assert_eq!(
                (
                    after.programs - before.programs,
                    after.erases - before.erases
                ),
                (0, 0),
                "seed {seed}: reads of a read-only volume programmed or erased"
            );
            drop(v);
            s.ops_since_arm()
        };
        for at in 1..=ops.min(60) {
            for kind in [CutKind::Clean, CutKind::Torn(TornMode::SomeBits)] {
                let mut s = sim.clone();
                s.arm(
                    FaultPlan::seeded(seed)
                        .with_faults(FaultConfig {
                            program_fail_ppm: 1_000_000,
                            erase_fail_ppm: 1_000_000,
                            ..FaultConfig::default()
                        })
                        .with_cut(at, kind),
                );
                {
                    let mut v = vol(&mut s);
                    let _ = v.mount();
                }
                s.power_on();
                fail_everything(&mut s, seed);
                let mut v = vol(&mut s);
                match v.mount() {
                    Ok(()) => {
                        let got = snapshot(&mut v).unwrap();
                        assert!(
                            got == want,
                            "seed {seed} cut at {at}: {}",
                            diff(&got, &want)
                        );
                    }
                    Err(Error::Mount(oftl::MountError::NoSpace)) => {}
                    Err(e) => panic!("seed {seed} cut at {at} {kind:?}: remount: {e:?}"),
                }
                drop(v);
                s.arm(FaultPlan::seeded(seed));
                let mut v = vol(&mut s);
                v.mount()
                    .unwrap_or_else(|e| panic!("seed {seed} cut at {at}: healthy mount: {e:?}"));
                let got = snapshot(&mut v).unwrap();
                assert!(
                    got == want,
                    "seed {seed} cut at {at}, healthy: {}",
                    diff(&got, &want)
                );
                checked += 1;
            }
        }
        let _ = staged;
    }
    assert!(checked > 20, "{checked}");
}
