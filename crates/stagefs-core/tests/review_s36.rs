//! Independent review (s36) of `stagefs-core` at 78506ef: API misuse and edge
//! sequences, power cuts over them, and staging interplay.
//!
//! Finding (a test that failed on the reviewed code; fixed in stop 36: a failed close
//! keeps a staged file's buffers, a failed truncate keeps its records staged, and an
//! unmount too full to patch leaves the records in the log for the next mount):
//! - `failed_close_on_a_full_volume_drops_earlier_fsynced_staged_bytes` (high): a
//!   `close` that fails (here `NoSpace` on a full volume) discards all of the object's
//!   write-back buffers, including the bytes of earlier fsyncs that were staged in the
//!   log; the object stays in the staging list, so the next patch (unmount, sync, step)
//!   stamps its version over home pages without them and replay skips their records:
//!   acknowledged data is lost for good, silently.
//!
//! Probes that held (`probe_*`): holes after shrinking (truncate smaller, then grow by
//! write past the end or by truncate; with a staged record before; read in session and
//! after a crash); a cut at every program/erase (clean and torn) of a script keeping
//! handles open across staged fsyncs, `step`, truncates of an append handle, refused
//! renames/removes of open files, rename onto itself and over an object file,
//! truncate-at-open promoted past `INLINE_MAX` with a `step` in between, shrink back
//! through truncate, `create_new` on an open and an existing name; `mount` again on a
//! mounted volume with open handles and staged records; a random walk (1,500 seeds
//! run, 40 by default: `S36_SEEDS`) over three files with handles kept open across
//! fsyncs, truncates, steps, syncs and crashes; a failed truncate after a staged fsync
//! on a full volume (the truncate never failed in the states reached, see the probe).

#![allow(dead_code)]

use crate::support;

use nand_hal::sim::{profile, FaultPlan, SimNand};
use stagefs_core::{Error, OpenOptions, SeekFrom};
use support::{create, fill_volume, pattern, read_all, rw, vol, write_file, Sim, Vol};

fn fresh(seed: u64) -> Sim {
    SimNand::heap(profile::TINY, FaultPlan::seeded(seed))
}

fn crash(sim: &mut Sim) {
    sim.cut_power();
    sim.power_on();
}

fn read_at(fs: &mut Vol<'_>, path: &str, at: u64, len: usize) -> Vec<u8> {
    let f = fs.open(path, OpenOptions::new().read(true)).unwrap();
    fs.seek(f, SeekFrom::Start(at)).unwrap();
    let mut out = vec![0u8; len];
    let mut got = 0;
    while got < len {
        let n = fs.read(f, &mut out[got..]).unwrap();
        if n == 0 {
            break;
        }
        got += n;
    }
    out.truncate(got);
    fs.close(f).unwrap();
    out
}

/// Formats, writes `/x` (3,000 bytes), appends 64-byte records with `fsync` (the first
/// one staged), fills the volume, and appends on until an `fsync` fails with `NoSpace`:
/// the open handle and the acknowledged records.
fn staged_file_on_a_full_volume(fs: &mut Vol<'_>) -> (stagefs_core::File, Vec<u8>) {
    let mut acked = Vec::new();
    fs.format().unwrap();
    write_file(fs, "/x", &pattern(1, 3000));
    let f = fs.open("/x", rw().append(true)).unwrap();
    // One staged record before the volume fills.
    let rec = pattern(7, 64);
    fs.write(f, &rec).unwrap();
    fs.fsync(f).unwrap();
    acked.extend_from_slice(&rec);
    assert_eq!(fs.staging_status().unwrap().staged_objects, 1, "staged");
    fill_volume(fs);
    loop {
        let rec = pattern(acked.len() as u32, 64);
        match fs.write(f, &rec).and_then(|_| fs.fsync(f)) {
            Ok(()) => acked.extend_from_slice(&rec),
            Err(e) => {
                assert_eq!(e, Error::NoSpace);
                break;
            }
        }
    }
    (f, acked)
}

/// FINDING (high: silent loss of fsynced data). Crate docs: "File contents are durable
/// at `fsync` and `close`"; "An operation that fails changes nothing on flash".
///
/// Repro: `/x` of 3,000 bytes (closed). Reopen, append 64-byte records with `fsync`
/// after each: they are staged in the log (the bytes stay in oftl's write-back buffer
/// of `/x`'s last page). Fill the volume (directories and small files) and keep
/// appending with fsync until one fails with `NoSpace` (the log has no room for its
/// sector). `close` then fails with `NoSpace` too, and its error path calls
/// `store.discard(obj)`, which drops *every* buffered page of the object, including the
/// bytes of the earlier, acknowledged fsyncs. The object stays in the staging list, so
/// the next patch (here `unmount`; also `sync`, `step`, a full list) stamps the object
/// with the log's end as its version over the home pages that never got those bytes:
/// replay then skips their records.
///
/// Expected: after the failed close, and after unmount/mount, `/x` holds 3,000 bytes
/// plus every acknowledged record. Observed: the same session already reads them
/// back wrong (the handle-less read shows the pre-fsync page), and after
/// unmount/mount `/x` is 3,000 bytes long: every acknowledged record is gone.
#[test]
fn failed_close_on_a_full_volume_drops_earlier_fsynced_staged_bytes() {
    let mut sim = fresh(1);
    {
        let mut fs = vol(&mut sim);
        let (f, acked) = staged_file_on_a_full_volume(&mut fs);
        assert_eq!(fs.close(f), Err(Error::NoSpace));
        let same_session = read_at(&mut fs, "/x", 3000, acked.len());
        fs.unmount().unwrap();
        let mut fs = vol(&mut sim);
        fs.mount().unwrap();
        let after = read_at(&mut fs, "/x", 3000, acked.len());
        assert!(
            same_session == acked && after == acked,
            "{} fsynced bytes at 3000: same session reads them back {}, after remount \
             the file is {} bytes long (want {})",
            acked.len(),
            if same_session == acked {
                "intact"
            } else {
                "WRONG"
            },
            fs.metadata("/x").unwrap().size,
            3000 + acked.len()
        );
    }
}

/// Lead from reading `Fs::truncate`: `supersede` takes the object off the staging list
/// before the transaction; a transaction failing in its flush of the object's buffers
/// would leave records the next patch trims while their bytes are only buffered. Tried
/// on a full volume (staged append, fill, then a growing truncate): the truncate
/// succeeded in every variant, so this was not observed.
#[test]
fn probe_failed_truncate_forgets_staged_object() {
    for v in 0..12u32 {
        let mut sim = fresh(2 + v as u64);
        let rec = pattern(7, 64);
        let mut acked = false;
        {
            let mut fs = vol(&mut sim);
            fs.format().unwrap();
            write_file(&mut fs, "/x", &pattern(1, 4096));
            write_file(&mut fs, "/z", &pattern(2, 4096));
            write_file(&mut fs, "/w", &pattern(3, 3000));
            let f = fs.open("/x", rw()).unwrap();
            fs.seek(f, SeekFrom::Start(4096)).unwrap();
            fs.write(f, &rec).unwrap();
            let r = fs.fsync(f);
            let made = fill_volume(&mut fs);
            let z = fs.open("/z", rw()).unwrap();
            for k in 2..2 + v as u64 {
                fs.seek(z, SeekFrom::Start(2048 * k + 100)).unwrap();
                if fs.write(z, &[5u8; 64]).and_then(|_| fs.fsync(z)).is_err() {
                    break;
                }
            }
            let _ = fs.close(z);
            let t = if r.is_ok() {
                Some(fs.truncate(f, 5000))
            } else {
                None
            };
            println!("v {v}: fsync {r:?} truncate {t:?}");
            if r.is_ok() {
                acked = true;
            }
            if let Some(Err(_)) = t {
                for d in made.iter().rev().take(10) {
                    fs.remove_dir(d).unwrap();
                }
                let s = fs.step(0);
                println!("  step: {s:?} {:?}", fs.staging_status().unwrap());
            }
            drop(fs);
        }
        crash(&mut sim);
        let mut fs = vol(&mut sim);
        fs.mount().unwrap();
        if acked {
            assert_eq!(read_at(&mut fs, "/x", 4096, 64), rec, "variant {v}");
        }
    }
}

fn read_handle_all(fs: &mut Vol<'_>, f: stagefs_core::File) -> Vec<u8> {
    fs.seek(f, SeekFrom::Start(0)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 999];
    loop {
        let n = fs.read(f, &mut buf).unwrap();
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

/// Holes after shrinking: truncate smaller then grow by truncate or by a write past
/// the end (same page, next pages), with and without staged records, read in the
/// session, after close, after a crash.
#[test]
fn probe_holes_after_shrink_read_as_zeros() {
    let sizes = [0u64, 1, 100, 255, 256, 257, 2047, 2048, 2049, 3000];
    let mut case = 0u64;
    for &big in &[3000usize, 6000] {
        for &small in &sizes {
            for mode in 0..4 {
                case += 1;
                let mut sim = fresh(case);
                let mut model;
                {
                    let mut fs = vol(&mut sim);
                    fs.format().unwrap();
                    model = pattern(case as u32, big);
                    write_file(&mut fs, "/f", &model);
                    let f = fs.open("/f", rw()).unwrap();
                    // A staged append first (mode 1, 3).
                    if mode % 2 == 1 {
                        fs.seek(f, SeekFrom::End(0)).unwrap();
                        let r = pattern(99, 64);
                        fs.write(f, &r).unwrap();
                        fs.fsync(f).unwrap();
                        model.extend_from_slice(&r);
                    }
                    fs.truncate(f, small).unwrap();
                    model.truncate(small as usize);
                    let (at, len) = if mode < 2 {
                        (small + 700, 64usize)
                    } else {
                        (small + 2500, 10)
                    };
                    fs.seek(f, SeekFrom::Start(at)).unwrap();
                    let w = pattern(5, len);
                    fs.write(f, &w).unwrap();
                    model.resize(at as usize, 0);
                    model.extend_from_slice(&w);
                    let got = read_handle_all(&mut fs, f);
                    assert!(
                        got == model,
                        "case {case} big {big} small {small} mode {mode}: session read differs"
                    );
                    fs.fsync(f).unwrap();
                    // and a grow by truncate
                    let grow = model.len() as u64 + 1500;
                    fs.truncate(f, grow).unwrap();
                    model.resize(grow as usize, 0);
                    let got = read_handle_all(&mut fs, f);
                    assert!(got == model, "case {case}: after grow-truncate");
                    drop(fs);
                }
                crash(&mut sim);
                let mut fs = vol(&mut sim);
                fs.mount().unwrap();
                let got = read_all(&mut fs, "/f");
                if got != model {
                    let first = got.iter().zip(&model).position(|(a, b)| a != b);
                    panic!(
                        "case {case} big {big} small {small} mode {mode}: after crash len {} want {}, first diff {first:?}",
                        got.len(),
                        model.len()
                    );
                }
            }
        }
    }
    assert_eq!(case, 80);
}

// ---------------------------------------------------------------------------------
// A power cut at every program/erase of a script that keeps handles open across
// staging, steps, truncates, refused renames and a truncate-at-open promotion.

use nand_hal::sim::{CutKind, TornMode};
use stagefs_core::oracle::power_loss;
use std::collections::BTreeMap;

type Tree = BTreeMap<String, Vec<u8>>;
type E = Error<nand_hal::sim::SimError>;

/// The tree on the volume (root only; no handles may be open).
fn tree(fs: &mut Vol<'_>) -> Result<Tree, E> {
    let mut names = Vec::new();
    for e in fs.read_dir("/")? {
        names.push(format!("/{}", e?.name()));
    }
    let mut t = Tree::new();
    for n in names {
        let f = fs.open(&n, OpenOptions::new().read(true))?;
        let mut out = Vec::new();
        let mut buf = [0u8; 999];
        loop {
            let k = fs.read(f, &mut buf)?;
            if k == 0 {
                break;
            }
            out.extend_from_slice(&buf[..k]);
        }
        fs.close(f)?;
        t.insert(n, out);
    }
    Ok(t)
}

struct Script {
    states: Vec<(Tree, bool)>,
    m: Tree,
    take: bool,
}

impl Script {
    /// Records the model after a call: `durable` when the state is durable on return.
    fn done(&mut self, durable: bool) {
        if self.take {
            self.states.push((self.m.clone(), durable));
        }
    }
}

/// Runs the script; Err((calls returned, error)) on the cut.
fn script(fs: &mut Vol<'_>, sc: &mut Script) -> Result<(), (usize, E)> {
    let mut n = 0usize;
    macro_rules! call {
        ($e:expr) => {{
            let r = $e;
            match r {
                Ok(v) => {
                    n += 1;
                    v
                }
                Err(e) => return Err((n, e)),
            }
        }};
    }
    macro_rules! refused {
        ($e:expr, $want:expr) => {{
            match $e {
                Err(e) if e == $want => n += 1,
                Err(e) => return Err((n, e)),
                Ok(_) => panic!("not refused"),
            }
        }};
    }
    sc.m.clear();
    sc.done(true);
    let a0 = pattern(1, 3000);
    let f = call!(fs.open("/a", create()));
    sc.m.insert("/a".into(), Vec::new());
    sc.done(true);
    call!(fs.write(f, &a0));
    call!(fs.close(f));
    sc.m.insert("/a".into(), a0.clone());
    sc.done(true);
    let f = call!(fs.open("/s", create()));
    sc.m.insert("/s".into(), Vec::new());
    sc.done(true);
    call!(fs.write(f, &pattern(2, 100)));
    call!(fs.close(f));
    sc.m.insert("/s".into(), pattern(2, 100));
    sc.done(true);
    // Appends with fsync, the second staged.
    let h1 = call!(fs.open("/a", rw().append(true)));
    for k in 0..2 {
        let r = pattern(10 + k, 64);
        call!(fs.write(h1, &r));
        sc.m.get_mut("/a").unwrap().extend_from_slice(&r);
        sc.done(false);
        call!(fs.fsync(h1));
        sc.done(true);
    }
    call!(fs.step(4));
    sc.done(true);
    // Inline file with a hole, open across other calls.
    let h2 = call!(fs.open("/s", rw()));
    call!(fs.seek(h2, SeekFrom::Start(200)));
    call!(fs.write(h2, &pattern(3, 30)));
    {
        let s = sc.m.get_mut("/s").unwrap();
        s.resize(200, 0);
        s.extend_from_slice(&pattern(3, 30));
    }
    sc.done(false);
    call!(fs.fsync(h2));
    sc.done(true);
    // Append-mode handle: seek is ignored by writes.
    call!(fs.seek(h1, SeekFrom::Start(5)));
    call!(fs.truncate(h1, 2000));
    sc.m.get_mut("/a").unwrap().truncate(2000);
    sc.done(true);
    let r = pattern(20, 64);
    call!(fs.write(h1, &r));
    sc.m.get_mut("/a").unwrap().extend_from_slice(&r);
    sc.done(false);
    call!(fs.fsync(h1));
    sc.done(true);
    refused!(fs.rename("/s", "/t"), Error::Busy);
    refused!(fs.rename("/s", "/a"), Error::Busy);
    refused!(fs.remove("/a"), Error::Busy);
    call!(fs.close(h2));
    sc.done(true);
    call!(fs.truncate(h1, 5000));
    sc.m.get_mut("/a").unwrap().resize(5000, 0);
    sc.done(true);
    let r = pattern(21, 64);
    call!(fs.write(h1, &r));
    sc.m.get_mut("/a").unwrap().extend_from_slice(&r);
    sc.done(false);
    call!(fs.fsync(h1));
    sc.done(true);
    call!(fs.step(0));
    sc.done(true);
    let r = pattern(22, 64);
    call!(fs.write(h1, &r));
    sc.m.get_mut("/a").unwrap().extend_from_slice(&r);
    sc.done(false);
    call!(fs.close(h1));
    sc.done(true);
    // Rename onto itself, then over the object file.
    call!(fs.rename("/s", "/s"));
    sc.done(true);
    call!(fs.rename("/s", "/a"));
    let s = sc.m.remove("/s").unwrap();
    sc.m.insert("/a".into(), s);
    sc.done(true);
    // Truncate at open, grown past INLINE_MAX (a pending object), a step, then close.
    let h3 = call!(fs.open("/a", create().truncate(true)));
    call!(fs.write(h3, &pattern(4, 300)));
    call!(fs.step(2));
    call!(fs.write(h3, &pattern(5, 64)));
    call!(fs.close(h3));
    let mut v = pattern(4, 300);
    v.extend_from_slice(&pattern(5, 64));
    sc.m.insert("/a".into(), v);
    sc.done(true);
    // Shrink back below INLINE_MAX through truncate, then an inline rewrite.
    let h4 = call!(fs.open("/a", rw()));
    call!(fs.truncate(h4, 10));
    sc.m.get_mut("/a").unwrap().truncate(10);
    sc.done(true);
    call!(fs.close(h4));
    sc.done(true);
    let h5 = call!(fs.open("/n", OpenOptions::new().write(true).create_new(true)));
    sc.m.insert("/n".into(), Vec::new());
    sc.done(true);
    call!(fs.write(h5, b"new"));
    refused!(
        fs.open("/n", OpenOptions::new().write(true).create_new(true)),
        Error::Busy
    );
    call!(fs.close(h5));
    sc.m.insert("/n".into(), b"new".to_vec());
    sc.done(true);
    refused!(
        fs.open("/n", OpenOptions::new().write(true).create_new(true)),
        Error::Exists
    );
    call!(fs.remove("/a"));
    sc.m.remove("/a");
    sc.done(true);
    let _ = n;
    Ok(())
}

#[test]
fn probe_cut_sweep_over_open_handles_and_staging() {
    let mut base = fresh(361);
    {
        let mut fs = vol(&mut base);
        fs.format().unwrap();
        fs.unmount().unwrap();
    }
    let mut sc = Script {
        states: Vec::new(),
        m: Tree::new(),
        take: true,
    };
    let n = {
        let mut s = base.clone();
        s.arm(FaultPlan::seeded(1));
        {
            let mut fs = vol(&mut s);
            fs.mount().unwrap();
            script(&mut fs, &mut sc).unwrap();
            assert_eq!(tree(&mut fs).unwrap(), sc.m, "uncut run");
        }
        s.ops_since_arm()
    };
    let all = sc.states.clone();
    println!("{n} programs/erases, {} states", all.len());
    let mut fails = Vec::new();
    let mut cuts = 0;
    for at in 1..=n + 1 {
        for kind in [CutKind::Clean, CutKind::Torn(TornMode::Random)] {
            cuts += 1;
            let mut s = base.clone();
            s.arm(FaultPlan::seeded(at * 7 + 3).with_cut(at, kind));
            let mut sc = Script {
                states: Vec::new(),
                m: Tree::new(),
                take: true,
            };
            {
                let mut fs = vol(&mut s);
                if let Err(e) = fs.mount() {
                    assert!(power_loss(&e), "mount {e:?}");
                } else if let Err((_, e)) = script(&mut fs, &mut sc) {
                    assert!(power_loss(&e), "cut {at}: {e:?} is not the cut");
                }
            }
            let reached = sc.states.len();
            crash(&mut s);
            s.disarm();
            let mut fs = vol(&mut s);
            if let Err(e) = fs.mount() {
                fails.push(format!("cut {at} {kind:?}: mount {e:?}"));
                continue;
            }
            let got = match tree(&mut fs) {
                Ok(t) => t,
                Err(e) => {
                    fails.push(format!("cut {at} {kind:?}: read {e:?}"));
                    continue;
                }
            };
            let from = if reached == 0 {
                0
            } else {
                (0..reached).rev().find(|&k| all[k].1).unwrap()
            };
            let to = reached.min(all.len() - 1);
            if !all[from..=to].iter().any(|(t, _)| *t == got) {
                fails.push(format!(
                    "cut {at} {kind:?} (states {from}..={to}): {:?}",
                    got.iter()
                        .map(|(k, v)| (k.clone(), v.len()))
                        .collect::<Vec<_>>()
                ));
            }
        }
    }
    assert!(
        fails.is_empty(),
        "{} of {cuts} cuts:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

/// `mount` called again on a mounted volume with open handles and staged records (no
/// unmount between): what was fsynced survives, handles are refused, the staged
/// inline file reads back.
#[test]
fn probe_mount_while_mounted_keeps_fsynced_data() {
    let mut sim = fresh(77);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    write_file(&mut fs, "/a", &pattern(1, 3000));
    write_file(&mut fs, "/i", &pattern(2, 50));
    let f = fs.open("/a", rw().append(true)).unwrap();
    fs.write(f, &pattern(3, 64)).unwrap();
    fs.fsync(f).unwrap();
    fs.write(f, &pattern(4, 64)).unwrap();
    fs.fsync(f).unwrap();
    let g = fs.open("/i", rw()).unwrap();
    fs.write(g, &pattern(5, 20)).unwrap();
    fs.fsync(g).unwrap();
    fs.write(g, &pattern(6, 5)).unwrap(); // not fsynced
    let st = fs.staging_status().unwrap();
    println!("{st:?}");
    fs.mount().unwrap();
    assert_eq!(fs.write(f, b"x"), Err(Error::BadHandle));
    assert_eq!(fs.close(g), Err(Error::BadHandle));
    let mut want = pattern(1, 3000);
    want.extend_from_slice(&pattern(3, 64));
    want.extend_from_slice(&pattern(4, 64));
    assert_eq!(read_all(&mut fs, "/a"), want);
    let mut wi = pattern(5, 20);
    wi.extend_from_slice(&pattern(2, 50)[20..]);
    assert_eq!(read_all(&mut fs, "/i"), wi);
    fs.unmount().unwrap();
    fs.mount().unwrap();
    assert_eq!(read_all(&mut fs, "/a"), want);
    assert_eq!(read_all(&mut fs, "/i"), wi);
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
        self.next() % n.max(1)
    }
}

#[derive(Clone)]
struct Fm {
    durable: Vec<u8>,
    cur: Vec<u8>,
    dirty: bool,
    h: Option<(stagefs_core::File, bool, u64)>, // handle, append, pos
}

/// Random walks over three files with handles kept open across fsyncs, truncates,
/// steps, syncs, and crashes (power cut with handles open, remount): after each crash
/// every file with no writes since its last commit reads back exactly.
#[test]
fn probe_random_walk_with_crashes_and_open_handles() {
    let seeds: u64 = std::env::var("S36_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let names = ["/f0", "/f1", "/d/f2"];
    for seed in 1..=seeds {
        let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut sim = fresh(seed);
        let mut m: Vec<Fm> = Vec::new();
        {
            let mut fs = vol(&mut sim);
            fs.format().unwrap();
            fs.create_dir("/d").unwrap();
            for (i, n) in names.iter().enumerate() {
                let d = pattern(i as u32, [3000usize, 100, 700][i]);
                write_file(&mut fs, n, &d);
                m.push(Fm {
                    durable: d.clone(),
                    cur: d,
                    dirty: false,
                    h: None,
                });
            }
        }
        let mut log = Vec::new();
        'session: for _session in 0..6 {
            let mut fs = vol(&mut sim);
            fs.mount()
                .unwrap_or_else(|e| panic!("seed {seed}: mount {e:?}"));
            for (i, n) in names.iter().enumerate() {
                let got = read_all(&mut fs, n);
                if !m[i].dirty && got != m[i].durable {
                    let first = got.iter().zip(&m[i].durable).position(|(a, b)| a != b);
                    panic!(
                        "seed {seed}: {n} after crash: len {} want {}, first diff {first:?}\nlog: {}",
                        got.len(),
                        m[i].durable.len(),
                        log.join("; ")
                    );
                }
                m[i].durable = got.clone();
                m[i].cur = got;
                m[i].dirty = false;
                m[i].h = None;
            }
            log.push("MOUNT".to_string());
            for _ in 0..60 {
                let i = r.below(3) as usize;
                let n = names[i];
                let op = r.below(100);
                let fm = &mut m[i];
                match (op, fm.h) {
                    (_, None) if op < 60 => {
                        let append = r.below(3) == 0;
                        let trunc = r.below(8) == 0;
                        let o = rw().append(append).truncate(trunc);
                        let f = fs.open(n, o).unwrap();
                        if trunc {
                            fm.cur.clear();
                            fm.dirty = true;
                        }
                        fm.h = Some((f, append, 0));
                        log.push(format!("open {n} a{append} t{trunc}"));
                    }
                    (_, None) => {
                        let b = r.below(40) as u32;
                        fs.step(b).unwrap();
                        log.push(format!("step {b}"));
                    }
                    (0..=44, Some((f, append, pos))) => {
                        let len =
                            [1usize, 20, 64, 64, 200, 300, 700, 2048, 2100][r.below(9) as usize];
                        let at = if append || r.below(2) == 0 {
                            fm.cur.len() as u64
                        } else {
                            r.below(fm.cur.len() as u64 + 400)
                        };
                        let _ = pos;
                        fs.seek(f, SeekFrom::Start(at)).unwrap();
                        let data = pattern(r.next() as u32, len);
                        fs.write(f, &data).unwrap();
                        let at = at as usize;
                        if fm.cur.len() < at + len {
                            fm.cur.resize(at + len, 0);
                        }
                        fm.cur[at..at + len].copy_from_slice(&data);
                        fm.dirty = true;
                        fm.h = Some((f, append, (at + len) as u64));
                        log.push(format!("write {n} {at}+{len}"));
                    }
                    (45..=64, Some((f, _, _))) => {
                        fs.fsync(f).unwrap();
                        fm.durable = fm.cur.clone();
                        fm.dirty = false;
                        log.push(format!("fsync {n}"));
                    }
                    (65..=72, Some((f, _, _))) => {
                        let size = r.below(fm.cur.len() as u64 + 3000);
                        fs.truncate(f, size).unwrap();
                        fm.cur.resize(size as usize, 0);
                        if !fm.dirty {
                            fm.durable = fm.cur.clone();
                        }
                        log.push(format!("truncate {n} {size}"));
                    }
                    (73..=84, Some((f, _, _))) => {
                        fs.close(f).unwrap();
                        fm.durable = fm.cur.clone();
                        fm.dirty = false;
                        fm.h = None;
                        log.push(format!("close {n}"));
                    }
                    (85..=89, Some((f, _, _))) => {
                        // read through the handle
                        let got = read_handle_all_rw(&mut fs, f);
                        assert!(
                            got == fm.cur,
                            "seed {seed}: handle read of {n}\nlog: {}",
                            log.join("; ")
                        );
                    }
                    (90..=93, _) => {
                        let b = r.below(40) as u32;
                        fs.step(b).unwrap();
                        log.push(format!("step {b}"));
                    }
                    (94..=95, _) => {
                        fs.sync().unwrap();
                        for x in m.iter_mut() {
                            if x.h.is_some() {
                                x.durable = x.cur.clone();
                                x.dirty = false;
                            }
                        }
                        log.push("sync".into());
                    }
                    _ => {
                        drop(fs);
                        crash(&mut sim);
                        log.push("CRASH".into());
                        continue 'session;
                    }
                }
            }
            drop(fs);
            crash(&mut sim);
            log.push("CRASH".into());
        }
    }
}

fn read_handle_all_rw(fs: &mut Vol<'_>, f: stagefs_core::File) -> Vec<u8> {
    read_handle_all(fs, f)
}

/// The staged file on the full volume as in
/// `failed_close_on_a_full_volume_drops_earlier_fsynced_staged_bytes`, then (0) unmount
/// with the handle still open (its close fails inside the unmount), (1) a failed close,
/// `sync` and a power cut, (2) a failed close, `step`s and a power cut, (3) a failed
/// close and a clean unmount: every acknowledged record reads back after the remount
/// (stop 36's regression tests beside the review's).
#[test]
fn staged_bytes_survive_every_path_after_a_failed_commit_on_a_full_volume() {
    for path in 0..4 {
        let mut sim = fresh(10 + path);
        let acked;
        {
            let mut fs = vol(&mut sim);
            let (f, a) = staged_file_on_a_full_volume(&mut fs);
            acked = a;
            match path {
                0 => {
                    let _ = fs.unmount();
                }
                1 => {
                    assert_eq!(fs.close(f), Err(Error::NoSpace), "path {path}");
                    let _ = fs.sync();
                    drop(fs);
                    crash(&mut sim);
                }
                2 => {
                    assert_eq!(fs.close(f), Err(Error::NoSpace), "path {path}");
                    for _ in 0..8 {
                        let _ = fs.step(64);
                    }
                    drop(fs);
                    crash(&mut sim);
                }
                _ => {
                    assert_eq!(fs.close(f), Err(Error::NoSpace), "path {path}");
                    fs.unmount().unwrap();
                }
            }
        }
        let mut fs = vol(&mut sim);
        fs.mount().unwrap();
        // (The bytes of the failed fsync may have landed after them: never acknowledged,
        // allowed either way.)
        assert_eq!(
            read_at(&mut fs, "/x", 3000, acked.len()),
            acked,
            "path {path}: {} acknowledged bytes after 3000",
            acked.len()
        );
    }
}
