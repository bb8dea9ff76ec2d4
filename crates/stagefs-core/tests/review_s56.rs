//! Review s56: attacks on stop 56's move of a growing inline file to an object of its
//! own when its entry no longer fits a full bucket at the trie's last level (a file may
//! now be an object of at most 256 bytes).
//!
//! - small objects made by the move driven through truncates, staged fsyncs, a rewrite
//!   at open (back inline when it fits), renames out of and into the full bucket,
//!   remove while open, listings and remounts, with staging on, off and unbypassed;
//! - a volume filled to the last page at the moment of the move (every fill level of a
//!   sweep): a refused truncate, fsync or close changes nothing, and the handle stays
//!   usable once room is made;
//! - several handles of files in one full bucket committed in every order;
//! - a script of those paths cut at every program and erase (recovery cuts too).

use std::collections::BTreeMap;

use nand_hal::sim::{profile, CutKind, FaultConfig, FaultPlan, SimError, SimNand, TornMode};
use stagefs_core::format::bucket;
use stagefs_core::{Error, File, SeekFrom, Tuning};

use crate::support::dirs::{colliding, counts_exact};
use crate::support::sweep::{cut_sweep, Cuts, Ran, Report};
use crate::support::{create, pattern, rw, vol, Sim, Vol};

type E = Error<SimError>;

/// Path to contents, for every file of the volume (but the ballast of `/pad`).
type Files = BTreeMap<String, Vec<u8>>;

fn tuned(fs: &mut Vol<'_>, t: (bool, bool)) {
    fs.set_tuning(Tuning {
        staging: t.0,
        bypass: t.1,
    });
}

/// `/deep` with 40-byte files (the first 120 bytes) in one bucket at the last level
/// until a create is refused, and `/other` with one 30-byte file.
fn base(t: (bool, bool), seed: u64) -> (Sim, Files, Vec<String>) {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(seed));
    let mut files = Files::new();
    let names = colliding("g", bucket::MAX_LEVEL, 80, bucket::hash(b"s56"));
    let mut used = Vec::new();
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        tuned(&mut fs, t);
        fs.create_dir("/deep").unwrap();
        fs.create_dir("/other").unwrap();
        put(&mut fs, "/other/o", &pattern(77, 30)).unwrap();
        files.insert("/other/o".into(), pattern(77, 30));
        for (k, n) in names.iter().enumerate() {
            let p = format!("/deep/{n}");
            let data = pattern(k as u32, if k == 0 { 120 } else { 40 });
            let f = match fs.open(&p, create()) {
                Ok(f) => f,
                Err(Error::DirectoryFull) => break,
                Err(e) => panic!("{p}: {e:?}"),
            };
            fs.write(f, &data).unwrap();
            fs.close(f).unwrap();
            files.insert(p.clone(), data);
            used.push(p);
        }
        assert!(used.len() > 8 && used.len() < names.len(), "{}", used.len());
        counts_exact(&mut fs).unwrap();
        fs.unmount().unwrap();
    }
    (sim, files, used)
}

fn put(fs: &mut Vol<'_>, p: &str, data: &[u8]) -> Result<(), E> {
    let f = fs.open(p, create().truncate(true))?;
    let r = fs.write(f, data).map(|_| ());
    let c = fs.close(f);
    r.and(c)
}

fn is_object(fs: &mut Vol<'_>, p: &str) -> bool {
    fs.location(p).unwrap().object.is_some()
}

/// Every file of `want` reads back (by read and metadata), the listings of `/deep` and
/// `/other` hold exactly its names, and every directory count is exact.
fn check_files(fs: &mut Vol<'_>, want: &Files) -> Result<(), String> {
    counts_exact(fs)?;
    for dir in ["/deep", "/other"] {
        let mut got = Vec::new();
        for e in fs.read_dir(dir).map_err(|e| format!("{dir}: {e:?}"))? {
            let e = e.map_err(|e| format!("{dir}: {e:?}"))?;
            got.push(format!("{dir}/{}", e.name()));
        }
        got.sort();
        let names: Vec<String> = want
            .keys()
            .filter(|p| p.starts_with(&format!("{dir}/")))
            .cloned()
            .collect();
        if got != names {
            return Err(format!("{dir}: listed {got:?}, want {names:?}"));
        }
    }
    for (p, data) in want {
        let m = fs.metadata(p).map_err(|e| format!("{p}: {e:?}"))?;
        if m.size != data.len() as u64 {
            return Err(format!("{p}: size {}, want {}", m.size, data.len()));
        }
        let got = try_read(fs, p)?;
        if &got != data {
            return Err(format!(
                "{p}: {} bytes differ from the {} wanted",
                got.len(),
                data.len()
            ));
        }
    }
    Ok(())
}

fn try_read(fs: &mut Vol<'_>, p: &str) -> Result<Vec<u8>, String> {
    let f = fs
        .open(p, stagefs_core::OpenOptions::new().read(true))
        .map_err(|e| format!("open {p}: {e:?}"))?;
    let mut out = Vec::new();
    let mut buf = [0u8; 300];
    loop {
        let n = fs
            .read(f, &mut buf)
            .map_err(|e| format!("read {p}: {e:?}"))?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    fs.close(f).map_err(|e| format!("close {p}: {e:?}"))?;
    Ok(out)
}

/// What the handle shows: its length and its bytes read from 0 (the position kept).
fn handle_view(fs: &mut Vol<'_>, f: File) -> Result<Vec<u8>, E> {
    let len = fs.len(f)?;
    let pos = fs.seek(f, SeekFrom::Current(0))?;
    fs.seek(f, SeekFrom::Start(0))?;
    let mut out = Vec::new();
    let mut buf = [0u8; 300];
    loop {
        let n = fs.read(f, &mut buf)?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    fs.seek(f, SeekFrom::Start(pos))?;
    assert_eq!(
        out.len() as u64,
        len,
        "handle length and bytes read disagree"
    );
    Ok(out)
}

fn remount(sim: &mut Sim, t: (bool, bool), want: &Files, tag: &str) {
    let mut fs = vol(sim);
    fs.mount().unwrap();
    tuned(&mut fs, t);
    check_files(&mut fs, want).unwrap_or_else(|e| panic!("{tag}: {e}"));
    fs.unmount().unwrap();
}

const TUNINGS: [(bool, bool); 3] = [(true, true), (true, false), (false, true)];

/// Small objects made by the move, through every path: shrink and grow by truncate,
/// 64-byte writes each fsynced (staging records of an object), a rewrite at open that
/// stays an object, one of 0 bytes that goes back inline, renames out of the full
/// bucket and back over an inline file there, remove while open, and remounts (clean
/// and after a crash with staged records).
#[test]
fn small_objects_made_by_the_move_take_every_path() {
    for t in TUNINGS {
        let (mut sim, mut files, used) = base(t, 561);
        let tag = format!("tuning {t:?}");
        let (a, b, c, d) = (&used[1], &used[2], &used[3], &used[4]);
        {
            let mut fs = vol(&mut sim);
            fs.mount().unwrap();
            tuned(&mut fs, t);
            // Grows in the full bucket: moves to an object of 240 bytes.
            let f = fs.open(a, rw()).unwrap();
            fs.seek(f, SeekFrom::End(0)).unwrap();
            let more = pattern(500, 200);
            fs.write(f, &more).unwrap();
            fs.close(f).unwrap();
            files.get_mut(a).unwrap().extend_from_slice(&more);
            assert!(is_object(&mut fs, a), "{tag}: {a} did not move");
            check_files(&mut fs, &files).unwrap();
            // Shrink, grow with zeros (each durable on return).
            let f = fs.open(a, rw()).unwrap();
            fs.truncate(f, 10).unwrap();
            files.get_mut(a).unwrap().truncate(10);
            assert_eq!(handle_view(&mut fs, f).unwrap(), files[a]);
            fs.truncate(f, 250).unwrap();
            files.get_mut(a).unwrap().resize(250, 0);
            assert_eq!(handle_view(&mut fs, f).unwrap(), files[a]);
            assert_eq!(fs.remove(a), Err(Error::Busy));
            fs.close(f).unwrap();
            check_files(&mut fs, &files).unwrap();
            // 64-byte appends, each fsynced, to an object of 20 bytes.
            let f = fs.open(a, rw()).unwrap();
            fs.truncate(f, 20).unwrap();
            files.get_mut(a).unwrap().truncate(20);
            fs.seek(f, SeekFrom::End(0)).unwrap();
            for k in 0..3 {
                let chunk = pattern(600 + k, 64);
                fs.write(f, &chunk).unwrap();
                fs.fsync(f).unwrap();
                files.get_mut(a).unwrap().extend_from_slice(&chunk);
            }
            assert_eq!(handle_view(&mut fs, f).unwrap(), files[a]);
            // Unsynced bytes beyond: may or may not survive the crash below.
            fs.write(f, &[0xEE; 10]).unwrap();
            // Crash with the handle open.
        }
        sim.cut_power();
        sim.power_on();
        {
            let mut fs = vol(&mut sim);
            fs.mount().unwrap();
            tuned(&mut fs, t);
            let got = try_read(&mut fs, a).unwrap();
            let mut longer = files[a].clone();
            longer.extend_from_slice(&[0xEE; 10]);
            assert!(
                got == files[a] || got == longer,
                "{tag}: {a} after the crash: {} bytes",
                got.len()
            );
            if got == longer {
                files.insert(a.clone(), longer);
            }
            check_files(&mut fs, &files).unwrap();
            // A rewrite at open that grows the entry: stays an object (through the
            // pending object), the old one deleted.
            let f = fs.open(a, rw().truncate(true)).unwrap();
            let new = pattern(700, 90);
            fs.write(f, &new).unwrap();
            assert_eq!(handle_view(&mut fs, f).unwrap(), new);
            fs.fsync(f).unwrap();
            files.insert(a.clone(), new.clone());
            // Then appends past the inline limit and back by truncate, on the object.
            fs.seek(f, SeekFrom::End(0)).unwrap();
            fs.write(f, &pattern(701, 300)).unwrap();
            fs.truncate(f, 100).unwrap();
            let mut want = new.clone();
            want.extend_from_slice(&pattern(701, 10));
            files.insert(a.clone(), want.clone());
            assert_eq!(handle_view(&mut fs, f).unwrap(), want);
            fs.close(f).unwrap();
            check_files(&mut fs, &files).unwrap();
            // Rewritten with nothing: back inline (an empty entry fits where the object
            // entry was).
            let f = fs.open(a, rw().truncate(true)).unwrap();
            fs.close(f).unwrap();
            files.insert(a.clone(), Vec::new());
            assert!(!is_object(&mut fs, a), "{tag}: empty {a} still an object");
            check_files(&mut fs, &files).unwrap();
            // `b` moved by a truncate that grows it (durable on return).
            let f = fs.open(b, rw()).unwrap();
            fs.truncate(f, 230).unwrap();
            files.get_mut(b).unwrap().resize(230, 0);
            fs.close(f).unwrap();
            assert!(is_object(&mut fs, b), "{tag}: {b} did not move");
            check_files(&mut fs, &files).unwrap();
            // Out of the full bucket, then back over the inline `c`.
            fs.rename(b, "/other/moved").unwrap();
            let v = files.remove(b).unwrap();
            files.insert("/other/moved".into(), v);
            check_files(&mut fs, &files).unwrap();
            fs.rename("/other/moved", c).unwrap();
            let v = files.remove("/other/moved").unwrap();
            files.insert(c.clone(), v);
            check_files(&mut fs, &files).unwrap();
            // `b`'s name is free again: re-created, grown at close (the freed room may
            // keep it inline).
            let f = fs.open(b, create()).unwrap();
            fs.write(f, &pattern(800, 256)).unwrap();
            fs.close(f).unwrap();
            files.insert(b.clone(), pattern(800, 256));
            check_files(&mut fs, &files).unwrap();
            // `d` moved by a close, then removed while open (refused), then removed.
            let f = fs.open(d, rw()).unwrap();
            fs.write(f, &pattern(900, 256)).unwrap();
            assert_eq!(fs.remove(d), Err(Error::Busy));
            fs.close(f).unwrap();
            files.insert(d.clone(), pattern(900, 256));
            check_files(&mut fs, &files).unwrap();
            fs.remove(d).unwrap();
            files.remove(d);
            check_files(&mut fs, &files).unwrap();
            fs.unmount().unwrap();
        }
        remount(&mut sim, t, &files, &tag);
    }
}

/// `base` with its volume filled by 16 KiB files in `/pad` until one is refused, then
/// the last two of them removed: some room left for the sweep's finer fill.
fn nearly_full(t: (bool, bool)) -> (Sim, Files, Vec<String>) {
    let (mut sim, files, used) = base(t, 562);
    {
        let mut fs = vol(&mut sim);
        fs.mount().unwrap();
        tuned(&mut fs, t);
        fs.create_dir("/pad").unwrap();
        let mut made = Vec::new();
        for k in 0.. {
            let p = format!("/pad/c{k:04}");
            match put(&mut fs, &p, &pattern(k, 16 * 1024)) {
                Ok(()) => made.push(p),
                Err(Error::NoSpace) => {
                    let _ = fs.remove(&p);
                    break;
                }
                Err(e) => panic!("{p}: {e:?}"),
            }
        }
        assert!(made.len() > 10, "{}", made.len());
        for p in made.iter().rev().take(2) {
            fs.remove(p).unwrap();
        }
        fs.unmount().unwrap();
    }
    (sim, files, used)
}

/// Fills `/pad` until a write is refused or `limit` steps are done; returns the steps
/// done. `size` from 100 to 2047: files of that size, one per step; else appends of
/// `size` bytes to one file, each fsynced (a page each, or a staged record each).
fn fine_fill(fs: &mut Vol<'_>, size: usize, limit: usize) -> usize {
    if !(100..2048).contains(&size) {
        let Ok(f) = fs.open("/pad/w", create()) else {
            return 0;
        };
        for k in 0..limit {
            let r = fs.write(f, &pattern(k as u32 + 5000, size));
            match r.and_then(|_| fs.fsync(f)) {
                Ok(()) => {}
                Err(Error::NoSpace) => {
                    let _ = fs.close(f);
                    return k;
                }
                Err(e) => panic!("/pad/w: {e:?}"),
            }
        }
        let _ = fs.close(f);
        return limit;
    }
    for k in 0..limit {
        let p = format!("/pad/f{k:04}");
        match put(fs, &p, &pattern(k as u32 + 3000, size)) {
            Ok(()) => {}
            Err(Error::NoSpace) | Err(Error::DirectoryFull) => {
                let _ = fs.remove(&p);
                return k;
            }
            Err(e) => panic!("{p}: {e:?}"),
        }
    }
    limit
}

/// What is done to the handle at the moment the volume is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Full {
    Truncate(u64),
    Fsync,
    Close,
}

/// Outcomes of one fill sweep: (refused, accepted) per action.
#[derive(Default, Debug)]
struct Tally {
    refused: u32,
    accepted: u32,
}

/// One run: file `p` of the full bucket opened (with `truncate` or to append), 200
/// bytes written while the volume has room, the volume filled with `limit` files of
/// `size` bytes, then `act`. A refusal must leave the handle as it was (length and
/// bytes) and the file's durable contents; room is then made (ballast removed) and the
/// close must make exactly the handle's bytes durable. Checked again after a crash.
#[allow(clippy::too_many_arguments)]
fn full_run(
    start: &Sim,
    files: &Files,
    p: &str,
    trunc_open: bool,
    act: Full,
    prep: &mut dyn FnMut(&mut Vol<'_>) -> usize,
    t: (bool, bool),
    tally: &mut Tally,
) -> Result<usize, String> {
    let mut sim = start.clone();
    let mut files = files.clone();
    let mut intent = files.clone();
    let made;
    {
        let mut fs = vol(&mut sim);
        fs.mount().map_err(|e| format!("mount: {e:?}"))?;
        tuned(&mut fs, t);
        let opts = if trunc_open {
            rw().truncate(true)
        } else {
            rw()
        };
        let f = fs.open(p, opts).map_err(|e| format!("open: {e:?}"))?;
        fs.seek(f, SeekFrom::End(0)).unwrap();
        let more = pattern(4000, 200);
        fs.write(f, &more).map_err(|e| format!("write: {e:?}"))?;
        let mut hc = if trunc_open {
            Vec::new()
        } else {
            files[p].clone()
        };
        hc.extend_from_slice(&more);
        made = prep(&mut fs);
        let r = match act {
            Full::Truncate(n) => fs.truncate(f, n),
            Full::Fsync => fs.fsync(f),
            Full::Close => fs.close(f),
        };
        fs.store_mut().flash_mut().disarm();
        // What the call would have made durable (a call refused with the store stopped
        // after it may have landed: `Error` says so of `Poisoned`).
        let mut carried = hc.clone();
        if let Full::Truncate(n) = act {
            carried.resize(n as usize, 0);
        }
        intent.insert(p.into(), carried);
        match (&r, act) {
            (Ok(()), Full::Truncate(n)) => {
                hc.resize(n as usize, 0);
                files.insert(p.into(), hc.clone());
            }
            (Ok(()), _) => {
                files.insert(p.into(), hc.clone());
            }
            (Err(_), _) => {}
        }
        if r.is_ok() {
            tally.accepted += 1;
        } else {
            tally.refused += 1;
        }
        // A store that stopped taking changes (poisoned, read-only) is a refusal of
        // everything from then on: only the durable state is judged, after the crash.
        let stopped = |e: &E| matches!(e, Error::Poisoned | Error::ReadOnly);
        let mut alive = !matches!(&r, Err(e) if stopped(e));
        if act != Full::Close && alive {
            match handle_view(&mut fs, f) {
                Ok(view) if view != hc => {
                    return Err(format!(
                        "{act:?} -> {r:?}: the handle shows {} bytes, want {} (its bytes {})",
                        view.len(),
                        hc.len(),
                        if view.len() == hc.len() {
                            "differ"
                        } else {
                            "-"
                        }
                    ))
                }
                Ok(_) => {}
                Err(e) if stopped(&e) => alive = false,
                Err(e) => return Err(format!("view: {e:?}")),
            }
        }
        // Room again, then the close carries the handle's bytes.
        for k in (0..made).rev().take(4) {
            let _ = fs.remove(&format!("/pad/f{k:04}"));
        }
        let _ = fs.remove("/pad/c0000");
        let _ = fs.remove("/pad/w");
        if act != Full::Close {
            match fs.close(f) {
                Ok(()) => {
                    files.insert(p.into(), hc.clone());
                }
                Err(e) if !alive || stopped(&e) => alive = false,
                Err(e) => return Err(format!("{act:?} -> {r:?}, then close with room: {e:?}")),
            }
        }
        if alive {
            match check_files(&mut fs, &files) {
                Err(e) if e.contains("Poisoned") => alive = false,
                Err(e) => return Err(format!("{act:?} -> {r:?}: {e}")),
                Ok(()) => {}
            }
        }
        if alive || r.is_ok() {
            intent = files.clone();
        }
        // Crash.
    }
    sim.cut_power();
    sim.power_on();
    let mut fs = vol(&mut sim);
    fs.mount().map_err(|e| format!("remount: {e:?}"))?;
    if let Err(e) = check_files(&mut fs, &files) {
        // Stopped by the call: what it would have made durable may have landed.
        check_files(&mut fs, &intent)
            .map_err(|e2| format!("{act:?} after the crash: {e} (nor in flight: {e2})"))?;
    }
    Ok(made)
}

/// The moment of the move on a volume full at every level of a fine fill: truncates
/// (growing and shrinking), fsyncs and closes of an appended and of a rewritten-at-open
/// file in the full bucket. A refused one changes neither the handle nor the file; the
/// close after room is made carries exactly the handle's bytes.
#[test]
fn a_full_volume_at_the_move_changes_nothing_refused() {
    let mut failures = Vec::new();
    let mut runs = 0;
    let acts = [
        Full::Truncate(250),
        Full::Truncate(180),
        Full::Fsync,
        Full::Close,
    ];
    let tunings: &[(bool, bool)] = &TUNINGS;
    for &t in tunings {
        let (start, files, used) = nearly_full(t);
        for (size, trunc_open) in [
            (300, true),
            (300, false),
            (2048, true),
            (2048, false),
            (64, true),
            (1, true),
        ] {
            // How many files the fill makes before one is refused.
            let all = {
                let mut s = start.clone();
                let mut fs = vol(&mut s);
                fs.mount().unwrap();
                fine_fill(&mut fs, size, 4000)
            };
            for act in acts {
                let mut tally = Tally::default();
                let from = all.saturating_sub(if size == 300 { 14 } else { 28 });
                for limit in from..=all + 1 {
                    runs += 1;
                    let r = full_run(
                        &start,
                        &files,
                        &used[1],
                        trunc_open,
                        act,
                        &mut |fs| fine_fill(fs, size, limit),
                        t,
                        &mut tally,
                    );
                    if let Err(e) = r {
                        failures.push(format!(
                            "tuning {t:?}, {size}-byte fill to {limit}/{all}, truncate at \
                             open {trunc_open}: {e}"
                        ));
                    }
                }
                println!("tuning {t:?} fill {size} trunc_open {trunc_open} {act:?}: {tally:?}");
            }
        }
    }
    println!("{runs} runs");
    assert!(
        failures.is_empty(),
        "{} of {runs} runs failed:\n{}",
        failures.len(),
        failures[..failures.len().min(12)].join("\n")
    );
}

/// The same calls with an uncorrectable read aimed at each read they make (failing
/// every retry): a refused call changes neither the handle nor the file, and the close
/// after it carries exactly the handle's bytes.
#[test]
fn failing_reads_at_the_move_change_nothing_refused() {
    let mut failures = Vec::new();
    let mut runs = 0;
    let tunings: &[(bool, bool)] = &TUNINGS;
    for &t in tunings {
        let (start, files, used) = base(t, 563);
        for trunc_open in [true, false] {
            for act in [
                Full::Truncate(250),
                Full::Truncate(180),
                Full::Fsync,
                Full::Close,
            ] {
                let mut tally = Tally::default();
                // The call uncut (checked), then the reads it makes counted on a copy.
                let mut probe = |fs: &mut Vol<'_>| {
                    fs.store_mut().flash_mut().arm(FaultPlan::seeded(5));
                    0
                };
                full_run(
                    &start, &files, &used[1], trunc_open, act, &mut probe, t, &mut tally,
                )
                .unwrap();
                let reads = {
                    let mut sim = start.clone();
                    let mut fs = vol(&mut sim);
                    fs.mount().unwrap();
                    tuned(&mut fs, t);
                    let opts = if trunc_open {
                        rw().truncate(true)
                    } else {
                        rw()
                    };
                    let f = fs.open(&used[1], opts).unwrap();
                    fs.seek(f, SeekFrom::End(0)).unwrap();
                    fs.write(f, &pattern(4000, 200)).unwrap();
                    fs.store_mut().flash_mut().arm(FaultPlan::seeded(5));
                    match act {
                        Full::Truncate(n) => fs.truncate(f, n).unwrap(),
                        Full::Fsync => fs.fsync(f).unwrap(),
                        Full::Close => fs.close(f).unwrap(),
                    }
                    fs.store_mut().flash_mut().reads_since_arm()
                };
                tally = Tally::default();
                for at in 1..=reads {
                    runs += 1;
                    let mut prep = |fs: &mut Vol<'_>| {
                        let plan = FaultPlan::seeded(at).with_faults(FaultConfig {
                            read_fail_at: at as u32,
                            read_fail_len: 64,
                            ..Default::default()
                        });
                        fs.store_mut().flash_mut().arm(plan);
                        0
                    };
                    let r = full_run(
                        &start, &files, &used[1], trunc_open, act, &mut prep, t, &mut tally,
                    );
                    if let Err(e) = r {
                        failures.push(format!(
                            "tuning {t:?}, truncate at open {trunc_open}, read {at}/{reads} \
                             failing: {e}"
                        ));
                    }
                }
                println!("tuning {t:?} trunc_open {trunc_open} {act:?}: {reads} reads, {tally:?}");
            }
        }
    }
    println!("{runs} runs");
    assert!(
        failures.is_empty(),
        "{} of {runs} runs failed:\n{}",
        failures.len(),
        failures[..failures.len().min(12)].join("\n")
    );
}

/// A step of the cut script (one handle open at a time; `Write` appends).
#[derive(Clone, Copy, Debug)]
enum Act {
    /// Opens file `k` of the full bucket, with `truncate` or not.
    Open(usize, bool),
    Write(usize),
    Fsync,
    Close,
    Trunc(u64),
    /// Renames (paths: `Some(k)` file `k` of the bucket, `None` `/other/m`).
    Rename(Option<usize>, Option<usize>),
}

use Act::*;

/// Small objects made by the move and every path through them (see the module doc).
const CUT_SCRIPT: &[Act] = &[
    Open(1, false),
    Write(200),
    Close,
    Open(1, true),
    Write(100),
    Fsync,
    Write(50),
    Close,
    Open(1, false),
    Trunc(20),
    Write(64),
    Fsync,
    Write(64),
    Fsync,
    Write(64),
    Fsync,
    Trunc(10),
    Trunc(250),
    Close,
    Rename(Some(1), None),
    Open(2, true),
    Close,
    // Grown from its (perhaps staged) empty contents.
    Open(2, false),
    Write(250),
    Close,
    Open(3, false),
    Trunc(200),
    Close,
    Rename(None, Some(4)),
    Open(5, true),
    Write(256),
    Close,
    Open(3, true),
    Write(30),
    Close,
    Open(0, false),
    Write(100),
    Fsync,
    Close,
    // The object renamed over 4 rewritten at open by a truncate that grows it, then
    // appended to.
    Open(4, true),
    Trunc(100),
    Write(20),
    Close,
];

fn cut_path(used: &[String], k: Option<usize>) -> String {
    k.map_or_else(|| "/other/m".to_string(), |k| used[k].clone())
}

fn run_cut_script(sim: &mut Sim, start: &Files, used: &[String], t: (bool, bool)) -> Ran<Files> {
    let mut cur = start.clone();
    let mut fs = vol(sim);
    let stop = |cur: Files, intent: Option<Files>, e: E, i: usize| Ran {
        cur,
        intent,
        err: Some(e),
        steps: i,
    };
    if let Err(e) = fs.mount() {
        return stop(cur, None, e, 0);
    }
    tuned(&mut fs, t);
    let mut open: Option<(File, String, Vec<u8>)> = None;
    for (i, &act) in CUT_SCRIPT.iter().enumerate() {
        let mut intent = cur.clone();
        let r = match act {
            Open(k, trunc) => {
                let opts = if trunc { rw().truncate(true) } else { rw() };
                let p = used[k].clone();
                fs.open(&p, opts).map(|f| {
                    let hc = if trunc { Vec::new() } else { cur[&p].clone() };
                    open = Some((f, p, hc));
                })
            }
            Write(n) => {
                let (f, p, hc) = open.as_mut().unwrap();
                hc.extend_from_slice(&pattern(1000 + i as u32, n));
                // Unacknowledged bytes of an object may reach flash.
                intent.insert(p.clone(), hc.clone());
                fs.seek(*f, SeekFrom::End(0))
                    .and_then(|_| fs.write(*f, &pattern(1000 + i as u32, n)))
                    .map(|_| ())
            }
            Fsync | Close | Trunc(_) => {
                let (f, p, hc) = open.as_mut().unwrap();
                if let Trunc(n) = act {
                    hc.resize(n as usize, 0);
                }
                intent.insert(p.clone(), hc.clone());
                let f = *f;
                match act {
                    Fsync => fs.fsync(f),
                    Close => {
                        open = None;
                        fs.close(f)
                    }
                    _ => fs.truncate(f, if let Trunc(n) = act { n } else { 0 }),
                }
            }
            Rename(a, b) => {
                let (a, b) = (cut_path(used, a), cut_path(used, b));
                let v = intent.remove(&a).unwrap();
                intent.insert(b.clone(), v);
                fs.rename(&a, &b)
            }
        };
        if let Err(e) = r {
            return stop(cur, Some(intent), e, i);
        }
        if !matches!(act, Write(_)) {
            cur = intent;
        }
    }
    if let Err(e) = fs.unmount() {
        return stop(cur.clone(), Some(cur), e, CUT_SCRIPT.len());
    }
    Ran {
        cur,
        intent: None,
        err: None,
        steps: CUT_SCRIPT.len(),
    }
}

fn check_cut(sim: &mut Sim, cur: &Files, intent: &Option<Files>) -> Result<(), String> {
    let mut fs = vol(sim);
    fs.mount().map_err(|e| format!("mount: {e:?}"))?;
    match check_files(&mut fs, cur) {
        Ok(()) => Ok(()),
        Err(e) => match intent {
            Some(i) => check_files(&mut fs, i)
                .map_err(|e2| format!("neither acknowledged ({e}) nor in flight ({e2})")),
            None => Err(e),
        },
    }
}

/// The script uncut (checked after a remount, with the moves it must make), then cut at
/// every program and erase (every cut kind, noisy cuts, recovery cuts).
#[test]
fn cuts_through_small_objects_leave_acknowledged_contents() {
    let tunings: &[(bool, bool)] = &TUNINGS;
    for &t in tunings {
        let (base_sim, start, used) = base(t, 564);
        let mut sim = base_sim.clone();
        sim.arm(FaultPlan::seeded(9));
        let ran = run_cut_script(&mut sim, &start, &used, t);
        assert!(
            ran.err.is_none(),
            "uncut: {:?} in step {}",
            ran.err,
            ran.steps
        );
        let ops = sim.ops_since_arm();
        sim.disarm();
        {
            let mut fs = vol(&mut sim);
            fs.mount().unwrap();
            check_files(&mut fs, &ran.cur).unwrap();
            let objects: Vec<bool> = (0..6)
                .map(|k| k != 1 && is_object(&mut fs, &used[k]))
                .collect();
            println!("tuning {t:?}: objects {objects:?}");
            assert!(objects.iter().any(|&o| o), "{objects:?}");
        }
        let stride = 1;
        let mut rep = Report::default();
        for (kinds, recovery, noisy, stride) in [
            (&CutKind::ALL[..], false, false, stride),
            (&[CutKind::Torn(TornMode::Random)][..], false, true, stride),
            (&[CutKind::Clean][..], true, false, 3 * stride),
        ] {
            cut_sweep(
                &base_sim,
                ops,
                Cuts {
                    seed: 564,
                    kinds,
                    stride,
                    recovery,
                    noisy,
                },
                "small objects",
                &mut |sim| run_cut_script(sim, &start, &used, t),
                &mut check_cut,
                &mut rep,
            );
        }
        println!(
            "tuning {t:?}: {ops} programs/erases uncut, {} cut runs",
            rep.runs
        );
        assert!(
            rep.failures.is_empty(),
            "{} failures:\n{}",
            rep.failures.len(),
            rep.failures[..rep.failures.len().min(10)].join("\n")
        );
    }
}

/// Every permutation of `0..n`.
fn perms(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for p in perms(n - 1) {
        for at in 0..=p.len() {
            let mut q = p.clone();
            q.insert(at, n - 1);
            out.push(q);
        }
    }
    out
}

/// Four handles of files in the full bucket (an append, a rewrite at open, a rewrite at
/// open of the 120-byte file, and an fsync then an append), committed in every order
/// (fsync or close alternately), then the rest closed in the reverse order; every file
/// reads back before and after a remount, and again after each is appended to once more
/// and the volume crashes with all four open after their fsyncs.
#[test]
fn four_handles_in_one_full_bucket_commit_in_every_order() {
    let mut runs = 0;
    let tunings: &[(bool, bool)] = &TUNINGS;
    for &t in tunings {
        let (start, files0, used) = base(t, 565);
        let all = perms(4);
        let step = 1;
        for perm in all.iter().step_by(step) {
            runs += 1;
            let tag = format!("tuning {t:?}, order {perm:?}");
            let mut sim = start.clone();
            let mut files = files0.clone();
            let targets = [&used[1], &used[2], &used[3], &used[0]];
            {
                let mut fs = vol(&mut sim);
                fs.mount().unwrap();
                tuned(&mut fs, t);
                let mut hs = Vec::new();
                let mut hc = Vec::new();
                for (k, p) in targets.iter().enumerate() {
                    let trunc = k == 1 || k == 3;
                    let f = fs
                        .open(p, if trunc { rw().truncate(true) } else { rw() })
                        .unwrap();
                    let mut c = if trunc { Vec::new() } else { files[*p].clone() };
                    fs.seek(f, SeekFrom::End(0)).unwrap();
                    let n = [150, 220, 100, 180][k];
                    let d = pattern(2000 + k as u32, n);
                    fs.write(f, &d).unwrap();
                    c.extend_from_slice(&d);
                    if k == 2 {
                        fs.fsync(f).unwrap();
                        files.insert(p.to_string(), c.clone());
                        let d = pattern(2100, 60);
                        fs.write(f, &d).unwrap();
                        c.extend_from_slice(&d);
                    }
                    hs.push(Some(f));
                    hc.push(c);
                }
                for (j, &k) in perm.iter().enumerate() {
                    let f = hs[k].unwrap();
                    if j % 2 == 0 {
                        fs.fsync(f)
                            .unwrap_or_else(|e| panic!("{tag}: fsync {k}: {e:?}"));
                        assert_eq!(handle_view(&mut fs, f).unwrap(), hc[k], "{tag}: {k}");
                    } else {
                        fs.close(f)
                            .unwrap_or_else(|e| panic!("{tag}: close {k}: {e:?}"));
                        hs[k] = None;
                    }
                    files.insert(targets[k].to_string(), hc[k].clone());
                }
                for &k in perm.iter().rev() {
                    if let Some(f) = hs[k].take() {
                        fs.close(f).unwrap();
                    }
                }
                check_files(&mut fs, &files).unwrap_or_else(|e| panic!("{tag}: {e}"));
                fs.unmount().unwrap();
            }
            remount(&mut sim, t, &files, &tag);
            // Each appended to (fsynced in the order), then more unsynced, then a crash.
            let mut unsynced = BTreeMap::new();
            {
                let mut fs = vol(&mut sim);
                fs.mount().unwrap();
                tuned(&mut fs, t);
                let mut hs = [None; 4];
                for &k in perm {
                    let p = targets[k];
                    let f = fs.open(p, rw()).unwrap();
                    fs.seek(f, SeekFrom::End(0)).unwrap();
                    let d = pattern(2200 + k as u32, 16);
                    fs.write(f, &d).unwrap();
                    fs.fsync(f).unwrap();
                    files.get_mut(p.as_str()).unwrap().extend_from_slice(&d);
                    hs[k] = Some(f);
                }
                for &k in perm {
                    let d = pattern(2300 + k as u32, 8);
                    fs.write(hs[k].unwrap(), &d).unwrap();
                    let mut longer = files[targets[k].as_str()].clone();
                    longer.extend_from_slice(&d);
                    unsynced.insert(targets[k].to_string(), longer);
                }
                // Crash with all four open.
            }
            sim.cut_power();
            sim.power_on();
            let mut fs = vol(&mut sim);
            fs.mount().unwrap();
            for (p, longer) in &unsynced {
                let got = try_read(&mut fs, p).unwrap();
                if &got == longer {
                    // Unacknowledged bytes of an object that reached flash.
                    files.insert(p.clone(), got);
                }
            }
            check_files(&mut fs, &files).unwrap_or_else(|e| panic!("{tag}, crashed: {e}"));
        }
    }
    println!("{runs} runs");
}
