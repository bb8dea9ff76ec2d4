//! Independent review (s36c) of stop 36's staging changes: a failed close keeping a
//! staged file's buffers, a failed truncate re-staging, an unmount too full to patch
//! leaving the records in the log.
//!
//! No finding. Probes that held: 7 full-volume unmounts with staged records (1-8
//! objects), the remount applying them (or keeping them staged when the patch finds no
//! room) with deletes working; 350 power cuts (5 kinds) at every program/erase of the
//! mount+unmount replaying records an unmount left in the log; 80 sessions with a
//! failed close of a staged file (plus 20 second failed closes after writes below,
//! over and past the staged range) ended by crash, unmount, make-room+step+crash,
//! make-room+sync+crash; 96 truncates of a staged file on a full volume (none failed).

#![allow(dead_code)]

use crate::support;

use nand_hal::sim::{profile, CutKind, FaultPlan, SimNand};
use stagefs_core::{Error, OpenOptions, SeekFrom};
use support::{create, fill_dirs, fill_volume, pattern, read_all, rw, vol, write_file, Sim, Vol};

type E = Error<nand_hal::sim::SimError>;

fn fresh(seed: u64) -> Sim {
    SimNand::heap(profile::TINY, FaultPlan::seeded(seed))
}

fn crash(sim: &mut Sim) {
    sim.cut_power();
    sim.power_on();
}

fn try_read_at(fs: &mut Vol<'_>, path: &str, at: u64, len: usize) -> Result<Vec<u8>, E> {
    let f = fs.open(path, OpenOptions::new().read(true))?;
    fs.seek(f, SeekFrom::Start(at))?;
    let mut out = vec![0u8; len];
    let mut got = 0;
    while got < len {
        let n = fs.read(f, &mut out[got..])?;
        if n == 0 {
            break;
        }
        got += n;
    }
    out.truncate(got);
    fs.close(f)?;
    Ok(out)
}

fn read_at(fs: &mut Vol<'_>, path: &str, at: u64, len: usize) -> Vec<u8> {
    try_read_at(fs, path, at, len).unwrap()
}

/// Fills with 2 KiB object files (data pages, not only metadata) then directories.
fn fill_with_files(fs: &mut Vol<'_>) -> Vec<String> {
    let mut made = Vec::new();
    for i in 0.. {
        let p = format!("/big{i:05}");
        let Ok(g) = fs.open(&p, create()) else { break };
        let ok = fs.write(g, &pattern(i, 4096)).is_ok();
        let c = fs.close(g);
        if !ok || c.is_err() {
            let _ = fs.remove(&p);
            break;
        }
        made.push(p);
    }
    let (d, _) = fill_dirs(fs);
    made.extend(d);
    made
}

/// The staged acknowledged state: `n` files `/s{k}` of 3000 bytes, each with an
/// appended, fsynced 64-byte record (staged); returns the expected contents.
fn staged_files(fs: &mut Vol<'_>, n: u32, recs: u32) -> Vec<(String, Vec<u8>)> {
    let mut want = Vec::new();
    for k in 0..n {
        let p = format!("/s{k}");
        let mut d = pattern(100 + k, 4096);
        write_file(fs, &p, &d);
        let f = fs.open(&p, rw().append(true)).unwrap();
        for r in 0..recs {
            let rec = pattern(1000 + k * 10 + r, 64);
            fs.write(f, &rec).unwrap();
            fs.fsync(f).unwrap();
            d.extend_from_slice(&rec);
        }
        fs.close(f).unwrap();
        want.push((p, d));
    }
    want
}

/// Staged records on several files, the volume filled, unmount (succeeds now: the
/// records stay in the log), mount. The crate docs: "the next mount applies them".
/// Checks the mount, the bytes, and that the volume still lets the user make room.
#[test]
fn probe_unmount_full_then_mount_applies_records_and_allows_deletes() {
    let mut report = Vec::new();
    for (variant, (n, recs, files)) in [
        (1u32, 1u32, false),
        (4, 1, false),
        (8, 1, false),
        (8, 3, false),
        (1, 1, true),
        (8, 1, true),
        (8, 3, true),
    ]
    .into_iter()
    .enumerate()
    {
        let mut sim = fresh(40 + variant as u64);
        let want;
        let made;
        {
            let mut fs = vol(&mut sim);
            fs.format().unwrap();
            want = staged_files(&mut fs, n, recs);
            let st = fs.staging_status().unwrap();
            assert!(st.staged_objects > 0, "variant {variant}: {st:?}");
            made = if files {
                fill_with_files(&mut fs)
            } else {
                fill_volume(&mut fs)
            };
            let u = fs.unmount();
            report.push(format!("variant {variant}: unmount {u:?}"));
            if u.is_err() {
                // Not the state this probes (a failed unmount is as a cut).
                continue;
            }
        }
        let mut fs = vol(&mut sim);
        let m = fs.mount();
        let ro = fs.read_only();
        let st = fs.staging_status();
        report.push(format!("  mount {m:?} read_only {ro} {st:?}"));
        m.unwrap();
        for (p, d) in &want {
            assert_eq!(read_all(&mut fs, p), *d, "variant {variant}: {p}");
        }
        // Make room: remove fillers.
        let mut removed = 0;
        let mut last = Ok(());
        for p in made.iter().rev().take(12) {
            let r = if p.starts_with("/big") {
                fs.remove(p)
            } else {
                fs.remove_dir(p)
            };
            if r.is_ok() {
                removed += 1;
            } else {
                last = r;
            }
        }
        report.push(format!("  removed {removed} (last err {last:?})"));
        let s = fs.step_all();
        report.push(format!("  step_all {s:?}"));
        write_file(&mut fs, "/after", &pattern(9, 500));
        fs.unmount().unwrap();
        let mut fs = vol(&mut sim);
        fs.mount().unwrap();
        assert!(!fs.read_only(), "variant {variant}");
        for (p, d) in &want {
            assert_eq!(read_all(&mut fs, p), *d, "variant {variant}: {p}");
        }
        assert_eq!(fs.staging_status().unwrap().staged_objects, 0);
    }
    println!("{}", report.join("\n"));
}

/// Builds the state "staged records, volume full, unmount succeeded with records left
/// in the log"; returns the expected files, or None when the unmount did not leave
/// them (failed, or patched).
fn build_left_in_log(
    sim: &mut Sim,
    n: u32,
    recs: u32,
    files: bool,
) -> Option<Vec<(String, Vec<u8>)>> {
    let mut fs = vol(sim);
    fs.format().unwrap();
    let want = staged_files(&mut fs, n, recs);
    if files {
        fill_with_files(&mut fs);
    } else {
        fill_volume(&mut fs);
    }
    let before = fs.staging_status().unwrap();
    if before.staged_objects == 0 {
        return None;
    }
    fs.unmount().ok()?;
    Some(want)
}

/// A power cut at every program/erase (each kind) of the mount that replays the records
/// an unmount left in the log on a full volume; then a mount must show every
/// acknowledged byte, and again after a further clean unmount/mount.
#[test]
fn probe_cut_during_replay_after_unmount_left_records() {
    let mut runs = 0;
    let mut notes = Vec::new();
    for (seed, n, recs, files) in [
        (45u64, 8u32, 1u32, true),
        (46, 8, 1, true),
        (47, 6, 2, true),
    ] {
        // How many program/erase operations the replaying mount makes.
        let mut sim = fresh(seed);
        let Some(_) = build_left_in_log(&mut sim, n, recs, files) else {
            notes.push(format!("({n},{recs},{files}): not left in log"));
            continue;
        };
        sim.arm(FaultPlan::seeded(5));
        {
            let mut fs = vol(&mut sim);
            fs.mount().unwrap();
            let _ = fs.unmount();
        }
        let total = sim.ops_since_arm();
        {
            let mut fs = vol(&mut sim);
            fs.mount().unwrap();
            notes.push(format!("after: {:?}", fs.staging_status()));
        }
        {
            let mut sim = fresh(seed);
            build_left_in_log(&mut sim, n, recs, files).unwrap();
            let mut fs = vol(&mut sim);
            fs.mount().unwrap();
            let st = fs.staging_status().unwrap();
            notes.push(format!("left: {st:?}"));
            if st.end_lsn == st.first_lsn {
                continue;
            }
        }
        notes.push(format!(
            "({n},{recs},{files}): {total} ops in mount+unmount"
        ));
        for k in 1..=total {
            for kind in CutKind::ALL {
                runs += 1;
                let mut sim = fresh(seed);
                let want = build_left_in_log(&mut sim, n, recs, files).unwrap();
                sim.arm(FaultPlan::seeded(k).with_cut(k, kind));
                {
                    let mut fs = vol(&mut sim);
                    if fs.mount().is_ok() {
                        let _ = fs.unmount();
                    }
                }
                sim.power_on();
                sim.disarm();
                let mut fs = vol(&mut sim);
                let m = fs.mount();
                assert!(
                    m.is_ok(),
                    "({n},{recs},{files}) cut {k} {kind:?}: mount {m:?}"
                );
                for (p, d) in &want {
                    let got = try_read_at(&mut fs, p, 0, d.len() + 10);
                    assert!(
                        got.as_ref() == Ok(d),
                        "({n},{recs},{files}) cut {k} {kind:?}: {p} {:?}",
                        got.map(|g| g.len())
                    );
                }
                let u = fs.unmount();
                let mut fs = vol(&mut sim);
                fs.mount().unwrap();
                for (p, d) in &want {
                    assert_eq!(
                        read_all(&mut fs, p),
                        *d,
                        "({n},{recs},{files}) cut {k} {kind:?} after unmount {u:?}: {p}"
                    );
                }
            }
        }
    }
    println!("{runs} runs; {}", notes.join("; "));
}

/// Fills the volume with 4 KiB files and directories, then removes a few files and
/// steps: a volume just short of full. Returns the fillers left.
fn make_room_after_fill(fs: &mut Vol<'_>) -> Vec<String> {
    let mut made = fill_with_files(fs);
    let files: Vec<String> = made
        .iter()
        .filter(|p| p.starts_with("/big"))
        .cloned()
        .collect();
    for p in files.iter().rev().take(3) {
        fs.remove(p).unwrap();
        made.retain(|m| m != p);
    }
    for _ in 0..20 {
        if !fs.step(64).unwrap() {
            break;
        }
    }
    made
}

/// How a probe ends a session.
#[derive(Clone, Copy, Debug)]
enum End {
    Crash,
    Unmount,
    /// Remove fillers, `step` until idle, then crash.
    RoomStepCrash,
    /// Remove fillers, `sync`, then crash.
    RoomSyncCrash,
}

const ENDS: [End; 4] = [
    End::Crash,
    End::Unmount,
    End::RoomStepCrash,
    End::RoomSyncCrash,
];

fn end_session(fs: &mut Vol<'_>, made: &[String], end: End) -> String {
    let mut s = String::new();
    match end {
        End::Crash => {}
        End::Unmount => s += &format!("unmount {:?}", fs.unmount()),
        End::RoomStepCrash | End::RoomSyncCrash => {
            for p in made.iter().rev().take(16) {
                let _ = if p.starts_with("/big") {
                    fs.remove(p)
                } else {
                    fs.remove_dir(p)
                };
            }
            if matches!(end, End::RoomStepCrash) {
                for _ in 0..50 {
                    match fs.step(64) {
                        Ok(true) => {}
                        r => {
                            s += &format!("step {r:?} ");
                            break;
                        }
                    }
                }
            } else {
                s += &format!("sync {:?}", fs.sync());
            }
        }
    }
    s
}

/// A staged file on a full volume whose `truncate` fails (its buffered, staged page is
/// new: the transaction's flush needs room), then every way of ending the session:
/// the fsynced bytes must survive, and the truncate must have changed nothing.
#[test]
fn probe_failed_truncate_restages_on_full_volume() {
    let mut seen = Vec::new();
    let mut failed = 0;
    for seed in 0..6u64 {
        for end in ENDS {
            for &to in &[5000u64, 4100, 4096, 1000] {
                let mut sim = fresh(300 + seed);
                let mut want = pattern(seed as u32, 4096);
                let t;
                {
                    let mut fs = vol(&mut sim);
                    fs.format().unwrap();
                    write_file(&mut fs, "/x", &want);
                    let mut made = make_room_after_fill(&mut fs);
                    let f = fs.open("/x", rw().append(true)).unwrap();
                    let mut staged = 0;
                    for r in 0..8 {
                        let rec = pattern(50 + r, 64);
                        fs.write(f, &rec).unwrap();
                        fs.fsync(f).unwrap();
                        want.extend_from_slice(&rec);
                        if fs.staging_status().unwrap().staged_objects == 1 {
                            staged += 1;
                            if staged > seed % 3 {
                                break;
                            }
                        }
                    }
                    assert_eq!(fs.staging_status().unwrap().staged_objects, 1);
                    made.extend(fill_dirs(&mut fs).0);
                    let mut pending = Vec::new();
                    for r in 0..200u32 {
                        let rec = pattern(900 + r, 64);
                        if fs.write(f, &rec).is_err() {
                            break;
                        }
                        pending.extend_from_slice(&rec);
                        if fs.fsync(f).is_err() {
                            break;
                        }
                        want.extend_from_slice(&pending);
                        pending.clear();
                    }
                    t = fs.truncate(f, to);
                    if t.is_ok() {
                        want.resize(to as usize, 0);
                    } else {
                        failed += 1;
                    }
                    let c = fs.close(f);
                    let e = end_session(&mut fs, &made, end);
                    seen.push(format!(
                        "seed {seed} {end:?} to {to}: truncate {t:?} close {c:?} {e}"
                    ));
                }
                crash(&mut sim);
                let mut fs = vol(&mut sim);
                fs.mount().unwrap();
                let got = read_all(&mut fs, "/x");
                assert!(
                    got == want,
                    "seed {seed} {end:?} to {to}: truncate {t:?}: len {} want {}",
                    got.len(),
                    want.len()
                );
            }
        }
    }
    println!("{failed} truncates failed\n{}", seen.join("\n"));
}

/// A staged file on a full volume: more writes (below the staged range, over it, past
/// it), a `close` that fails, then every way of ending the session. The fsynced bytes
/// must read back, with the unacknowledged ones either all old or new per byte.
#[test]
fn probe_failed_close_keeps_staged_buffers_then_ends() {
    let mut notes = Vec::new();
    let mut failed_closes = 0;
    for seed in 0..5u64 {
        for end in ENDS {
            for shape in 0..4 {
                let mut sim = fresh(500 + seed);
                let mut acked = pattern(seed as u32, 4096);
                let mut maybe = acked.clone();
                let c;
                {
                    let mut fs = vol(&mut sim);
                    fs.format().unwrap();
                    write_file(&mut fs, "/x", &acked);
                    write_file(&mut fs, "/y", &pattern(77, 4096));
                    let mut made = make_room_after_fill(&mut fs);
                    let f = fs.open("/x", rw().append(true)).unwrap();
                    for r in 0..4 {
                        let rec = pattern(50 + r, 64);
                        fs.write(f, &rec).unwrap();
                        fs.fsync(f).unwrap();
                        acked.extend_from_slice(&rec);
                        maybe.extend_from_slice(&rec);
                        if fs.staging_status().unwrap().staged_objects == 1 {
                            break;
                        }
                    }
                    fs.close(f).unwrap();
                    assert_eq!(fs.staging_status().unwrap().staged_objects, 1);
                    made.extend(fill_dirs(&mut fs).0);
                    let f = fs.open("/x", rw().append(true)).unwrap();
                    for r in 0..200u32 {
                        let rec = pattern(900 + r, 64);
                        if fs.write(f, &rec).is_err() {
                            break;
                        }
                        maybe.extend_from_slice(&rec);
                        if fs.fsync(f).is_err() {
                            break;
                        }
                        acked = maybe.clone();
                    }
                    fs.close(f).unwrap_err();
                    let f = fs.open("/x", rw()).unwrap();
                    let writes: &[(u64, usize)] = match shape {
                        0 => &[(100, 64)],
                        1 => &[(4100, 32)],
                        2 => &[(4160, 3000)],
                        _ => &[(100, 64), (4100, 32), (6000, 2000)],
                    };
                    for &(at, len) in writes {
                        fs.seek(f, SeekFrom::Start(at)).unwrap();
                        let d = pattern(at as u32, len);
                        if fs.write(f, &d).is_ok() {
                            if maybe.len() < at as usize + len {
                                maybe.resize(at as usize + len, 0);
                            }
                            maybe[at as usize..at as usize + len].copy_from_slice(&d);
                        }
                    }
                    c = fs.close(f);
                    if c.is_err() {
                        failed_closes += 1;
                    } else {
                        acked = maybe.clone();
                    }
                    let e = end_session(&mut fs, &made, end);
                    notes.push(format!(
                        "seed {seed} {end:?} shape {shape}: close {c:?} {e}"
                    ));
                }
                crash(&mut sim);
                let mut fs = vol(&mut sim);
                fs.mount().unwrap();
                let got = read_all(&mut fs, "/x");
                // Each byte: the acknowledged one or the written one; the length
                // between them.
                let ok = got.len() >= acked.len()
                    && got.len() <= maybe.len().max(acked.len())
                    && got.iter().enumerate().all(|(i, &b)| {
                        acked.get(i).copied().unwrap_or(0) == b || maybe.get(i).copied() == Some(b)
                    });
                assert!(
                    ok,
                    "seed {seed} {end:?} shape {shape}: close {c:?}: len {} acked {} maybe {}",
                    got.len(),
                    acked.len(),
                    maybe.len()
                );
            }
        }
    }
    println!("{failed_closes} closes failed\n{}", notes.join("\n"));
}
