//! Review of 61b1de3 (stagefs-core: a grown inline commit is staged only when its bucket
//! will have room at the patch; direct bucket changes keep that room; pending records
//! are logged again before the log trim).
//!
//! Probes drive names whose hashes agree on the trie's 13 bits (one bucket that can
//! never split) with staging on: grown inline closes (several handles open at once),
//! attribute growth, renames into the bucket, directories created there, removes,
//! syncs; after every step the acknowledged state is compared with a model, and the
//! volume is crashed and mounted at intervals.

#![allow(dead_code)]

use crate::support;

use std::collections::BTreeMap;

use nand_hal::sim::{profile, FaultConfig, FaultPlan, SimNand};
use stagefs_core::{Error, File, OpenOptions, ATTR_MAX};
use support::{Sim, Vol};

type E = nand_hal::sim::SimError;

fn vol(sim: &mut Sim) -> Vol<'_> {
    support::vol(sim)
}

fn crash(sim: &mut Sim) {
    sim.cut_power();
    sim.power_on();
    sim.arm(FaultPlan::seeded(sim.plan().seed).with_faults(FaultConfig {
        unstable_after_cut: true,
        ..FaultConfig::default()
    }));
}

fn fnv(name: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in name {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// `n` names of `len` bytes, prefixed `prefix`, whose hashes agree on the low 13 bits
/// with the all-zero name of that shape (one bucket at any depth).
fn colliding(n: usize, len: usize, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0u64;
    let w = len - prefix.len();
    let target = fnv(format!("{prefix}{:0>w$}", 0).as_bytes()) & 0x1fff;
    while out.len() < n {
        let s = format!("{prefix}{i:0>w$}");
        if fnv(s.as_bytes()) & 0x1fff == target {
            out.push(s);
        }
        i += 1;
    }
    out
}

fn pat(len: usize, seed: u32) -> Vec<u8> {
    support::pattern(seed, len)
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What the model holds of a path: a file's bytes and attributes, or a directory.
#[derive(Clone, Debug, PartialEq)]
enum N {
    File(Vec<u8>, Vec<u8>),
    Dir(Vec<u8>),
}

fn check(fs: &mut Vol<'_>, m: &BTreeMap<String, N>, tag: &str) {
    for (p, n) in m {
        let md = fs
            .metadata(p)
            .unwrap_or_else(|e| panic!("{tag}: metadata {p}: {e:?}"));
        match n {
            N::File(d, a) => {
                assert_eq!(&support::read_all(fs, p), d, "{tag}: contents of {p}");
                assert_eq!(md.attributes(), &a[..], "{tag}: attrs of {p}");
            }
            N::Dir(a) => assert_eq!(md.attributes(), &a[..], "{tag}: attrs of {p}"),
        }
    }
}

fn ok_or_full<T>(r: Result<T, Error<E>>, what: &str) -> bool {
    match r {
        Ok(_) => true,
        Err(Error::DirectoryFull) => false,
        Err(e) => panic!("{what}: {e:?}"),
    }
}

/// One randomized run: names in `/` that share one unsplittable bucket, with a second
/// directory `/d` whose colliding names are renamed into `/`.
fn colliding_run(seed: u64, steps: usize) -> (usize, usize) {
    let root_names = colliding(12, 48, "r");
    let d_names = colliding(4, 48, "r");
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(seed as u32 as u64));
    let mut m: BTreeMap<String, N> = BTreeMap::new();
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let (mut oks, mut fulls) = (0usize, 0usize);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    fs.create_dir("/d").unwrap();
    m.insert("/d".into(), N::Dir(Vec::new()));
    // Start with every root name an empty file.
    for n in &root_names[..8] {
        let p = format!("/{n}");
        let f = fs.open(&p, support::create()).unwrap();
        fs.close(f).unwrap();
        m.insert(p, N::File(Vec::new(), Vec::new()));
    }
    let mut open: Vec<(File, String, Vec<u8>)> = Vec::new();
    let mut crashes = 0;
    for step in 0..steps {
        let tag = format!("seed {seed} step {step}");
        let op = rng.below(10);
        let trace = std::env::var("TRACE").is_ok();
        match op {
            // Open (up to 3 at once) and write a new size; closed later.
            0..=2 if open.len() < 3 => {
                let n = &root_names[rng.below(8) as usize];
                let p = format!("/{n}");
                if open.iter().any(|o| o.1 == p) || !matches!(m.get(&p), Some(N::File(..))) {
                    continue;
                }
                let f = fs
                    .open(&p, OpenOptions::new().read(true).write(true).truncate(true))
                    .unwrap_or_else(|e| panic!("{tag}: open {p}: {e:?}"));
                let data = pat(64 + rng.below(193) as usize, step as u32);
                fs.write(f, &data).unwrap();
                open.push((f, p, data));
            }
            // Close one of the open files.
            0..=4 if !open.is_empty() => {
                let k = rng.below(open.len() as u64) as usize;
                let (f, p, data) = open.remove(k);
                let r = fs.close(f);
                if trace {
                    eprintln!(
                        "{tag}: close {p} len {} -> {r:?} (was {:?})",
                        data.len(),
                        m.get(&p).map(|n| match n {
                            N::File(d, a) => (d.len(), a.len()),
                            N::Dir(a) => (0, a.len()),
                        })
                    );
                }
                if ok_or_full(r, &format!("{tag}: close {p}")) {
                    oks += 1;
                    if let Some(N::File(d, _)) = m.get_mut(&p) {
                        *d = data;
                    }
                } else {
                    fulls += 1;
                }
            }
            // Attributes grow or shrink (files or /d's colliding names).
            5 => {
                let keys: Vec<String> = m.keys().cloned().collect();
                let p = keys[rng.below(keys.len() as u64) as usize].clone();
                if open.iter().any(|o| o.1 == p) {
                    continue;
                }
                let a = pat(rng.below(ATTR_MAX as u64 + 1) as usize, 7000 + step as u32);
                let r = fs.set_attributes(&p, &a);
                if trace {
                    eprintln!("{tag}: set_attributes {p} len {} -> {r:?}", a.len());
                }
                if ok_or_full(r, &format!("{tag}: set_attributes {p}")) {
                    oks += 1;
                    match m.get_mut(&p).unwrap() {
                        N::File(_, x) | N::Dir(x) => *x = a,
                    }
                } else {
                    fulls += 1;
                }
            }
            // A file made in /d (a colliding name there), renamed into /.
            6 => {
                let i = rng.below(4) as usize;
                let from = format!("/d/{}", d_names[i]);
                let to_name = &root_names[8 + rng.below(4) as usize];
                let to = format!("/{to_name}");
                if m.contains_key(&to) || m.contains_key(&from) {
                    continue;
                }
                let data = pat(rng.below(257) as usize, 9000 + step as u32);
                support::write_file(&mut fs, &from, &data);
                m.insert(from.clone(), N::File(data.clone(), Vec::new()));
                let r = fs.rename(&from, &to);
                if trace {
                    eprintln!("{tag}: rename {from} -> {to} ({} B) -> {r:?}", data.len());
                }
                if ok_or_full(r, &format!("{tag}: rename {from} {to}")) {
                    oks += 1;
                    let n = m.remove(&from).unwrap();
                    m.insert(to, n);
                } else {
                    fulls += 1;
                }
            }
            // Remove one of the late names (room comes back).
            7 => {
                let to_name = &root_names[8 + rng.below(4) as usize];
                let p = format!("/{to_name}");
                match m.get(&p) {
                    Some(N::File(..)) => {
                        fs.remove(&p)
                            .unwrap_or_else(|e| panic!("{tag}: remove {p}: {e:?}"));
                        m.remove(&p);
                    }
                    Some(N::Dir(_)) => {
                        fs.remove_dir(&p)
                            .unwrap_or_else(|e| panic!("{tag}: remove_dir {p}: {e:?}"));
                        m.remove(&p);
                    }
                    None => {}
                }
            }
            // A directory with a colliding name.
            8 => {
                let to_name = &root_names[8 + rng.below(4) as usize];
                let p = format!("/{to_name}");
                if m.contains_key(&p) {
                    continue;
                }
                if ok_or_full(fs.create_dir(&p), &format!("{tag}: create_dir {p}")) {
                    m.insert(p, N::Dir(Vec::new()));
                    oks += 1;
                } else {
                    fulls += 1;
                }
            }
            // Sync (must work), sometimes a crash and a mount.
            _ => {
                // Open files are closed first (a sync would commit them too, and one
                // that does not fit fails the sync with `DirectoryFull`).
                for (f, p, data) in open.drain(..) {
                    if ok_or_full(fs.close(f), &format!("{tag}: close {p}")) {
                        oks += 1;
                        if let Some(N::File(d, _)) = m.get_mut(&p) {
                            *d = data;
                        }
                    } else {
                        fulls += 1;
                    }
                }
                fs.sync().unwrap_or_else(|e| panic!("{tag}: sync: {e:?}"));
                if rng.below(3) == 0 {
                    drop(fs);
                    crash(&mut sim);
                    crashes += 1;
                    fs = vol(&mut sim);
                    fs.mount()
                        .unwrap_or_else(|e| panic!("{tag}: mount after crash: {e:?}"));
                }
            }
        }
        if open.is_empty() {
            check(&mut fs, &m, &tag);
        }
    }
    for (f, p, data) in open.drain(..) {
        if ok_or_full(fs.close(f), "final close") {
            if let Some(N::File(d, _)) = m.get_mut(&p) {
                *d = data;
            }
        }
    }
    fs.sync()
        .unwrap_or_else(|e| panic!("seed {seed}: final sync: {e:?}"));
    check(&mut fs, &m, "final");
    drop(fs);
    crash(&mut sim);
    let mut fs = vol(&mut sim);
    fs.mount()
        .unwrap_or_else(|e| panic!("seed {seed}: final mount: {e:?}"));
    check(&mut fs, &m, "after crash");
    fs.unmount().unwrap();
    let _ = crashes;
    (oks, fulls)
}

/// Probe: randomized operations on one unsplittable bucket (see the module docs).
#[test]
fn probe_colliding_bucket_random_ops() {
    let (mut oks, mut fulls) = (0, 0);
    for seed in 1..=12u64 {
        let (o, f) = colliding_run(seed, 150);
        oks += o;
        fulls += f;
    }
    eprintln!("colliding bucket: {oks} changes acknowledged, {fulls} DirectoryFull");
    assert!(fulls > 0, "the bucket never filled");
}

/// Probe: the patch now logs the open files' pending records again *before* the trim.
/// On a full device (files written until `NoSpace`) with an O_TRUNC handle holding a
/// pending object and staged inline closes, `sync` may fail, but removing one file
/// must let `sync` succeed again (the trim is not starved by the re-log), and a crash
/// after it mounts with the acknowledged contents.
#[test]
fn probe_relog_before_trim_on_full_device() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(41));
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    support::write_file(&mut fs, "/big", &pat(1000, 1));
    let h = fs
        .open(
            "/big",
            OpenOptions::new().read(true).write(true).truncate(true),
        )
        .unwrap();
    fs.write(h, &pat(600, 2)).unwrap();
    fs.fsync(h).unwrap();
    let mut acked: Vec<(String, Vec<u8>)> = Vec::new();
    let mut i = 0;
    let mut first = None;
    loop {
        let p = format!("/fill{i}");
        let Ok(f) = fs.open(&p, support::create()) else {
            break;
        };
        let d = pat(20_000, 100 + i);
        let w = fs.write(f, &d);
        let c = fs.close(f);
        if w.is_err() || c.is_err() {
            break;
        }
        first.get_or_insert(p);
        i += 1;
    }
    let mut staged = 0;
    for k in 0..6u32 {
        let p = format!("/s{k}");
        if let Ok(f) = fs.open(&p, support::create()) {
            let d = pat(100 + k as usize, 500 + k);
            let _ = fs.write(f, &d);
            if fs.close(f).is_ok() {
                acked.push((p, d));
                staged += 1;
            }
        }
    }
    let s1 = fs.sync();
    eprintln!(
        "{i} fill files, {staged} small closes acknowledged; sync on the full device: {s1:?}"
    );
    fs.remove(first.as_deref().unwrap()).unwrap();
    fs.sync().unwrap();
    fs.close(h).unwrap();
    acked.push(("/big".into(), pat(600, 2)));
    drop(fs);
    crash(&mut sim);
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    for (p, d) in &acked {
        assert_eq!(&support::read_all(&mut fs, p), d, "{p}");
    }
}
