//! A staging log record that no longer reads: the mount fails and drops nothing, and
//! `mount_repair` stops the staging replay at that record, so every file keeps a state
//! it had (the commits before it), the record and everything staged after it are
//! dropped and reported, and the volume mounts normally from then on.

use crate::support;

use nand_hal::sim::{profile, FaultPlan, SimNand};
use nand_hal::PageAddr;
use stagefs_core::{Error, OpenOptions, Tuning};
use support::staged::{chunk, expected, staged_volume, CHUNKS};
use support::{pattern, read_all, vol, write_file, Sim, Vol};

/// The (page, sector) holding chunk `i`'s record.
fn sector_of_chunk(sim: &Sim, i: u8) -> (u32, u32) {
    let pages = sim.profile().geometry.pages();
    let want = chunk(i);
    let mut found = Vec::new();
    for pg in 0..pages {
        let mut d = vec![0u8; 2048];
        let mut o = vec![0u8; 64];
        sim.peek(PageAddr(pg), &mut d, &mut o);
        for k in 0..4u32 {
            let x = &d[k as usize * 512..(k as usize + 1) * 512];
            if x.windows(64).any(|w| w == want) {
                found.push((pg, k));
            }
        }
    }
    assert_eq!(found.len(), 1, "chunk {i} found at {found:?}");
    found[0]
}

fn check(fs: &mut Vol<'_>, n: u8) {
    let (log, s) = expected(n);
    assert_eq!(read_all(fs, "/log"), log, "/log after {n} commits");
    assert_eq!(read_all(fs, "/s"), s, "/s after {n} commits");
}

/// Damage chunk `lost`'s record with `damage`, then: the mount fails and keeps failing
/// (nothing dropped); the repair keeps the commits before it; the volume mounts
/// normally after and takes writes.
/// `lost` is the first commit of `/log` whose record is damaged: with a whole page,
/// the first on that page.
fn lost_record(lost: u8, damage: impl Fn(&mut Sim, u32, u32)) {
    let mut sim = staged_volume();
    let (page, sector) = sector_of_chunk(&sim, lost);
    damage(&mut sim, page, sector);
    for _ in 0..2 {
        let mut fs = vol(&mut sim);
        match fs.mount() {
            Err(Error::Flash(_) | Error::Corrupted) => {}
            other => panic!("mount with chunk {lost}'s record lost: {other:?}"),
        }
    }
    {
        let mut fs = vol(&mut sim);
        let rep = fs.mount_repair().unwrap();
        assert!(rep.staged_writes_lost());
        assert!(rep.staged_bytes_dropped() > 0);
        assert!(!rep.to_checkpoint());
        check(&mut fs, lost);
        assert_eq!(fs.staging_status().unwrap().staged_objects, 0);
        fs.unmount().unwrap();
    }
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    check(&mut fs, lost);
    let f = fs
        .open("/log", OpenOptions::new().write(true).append(true))
        .unwrap();
    fs.write(f, b"after").unwrap();
    fs.close(f).unwrap();
    let (mut log, _) = expected(lost);
    log.extend_from_slice(b"after");
    assert_eq!(read_all(&mut fs, "/log"), log);
    // A repair of a volume that mounts drops nothing.
    fs.unmount().unwrap();
    let rep = fs.mount_repair().unwrap();
    assert_eq!(rep.staged_bytes_dropped(), 0);
    assert!(!rep.staged_writes_lost());
    assert_eq!(read_all(&mut fs, "/log"), log);
}

#[test]
fn an_uncorrectable_log_sector_is_repaired_to_the_commits_before_it() {
    for lost in [0, 1, 5, 6, CHUNKS - 1] {
        lost_record(lost, |sim, page, sector| {
            sim.inject_flips(PageAddr(page), sector, 60)
        });
    }
}

#[test]
fn a_log_sector_that_is_not_a_record_is_repaired_to_the_commits_before_it() {
    for lost in [0, 4, 7, CHUNKS - 1] {
        lost_record(lost, |sim, page, sector| {
            sim.poke(PageAddr(page), sector * 512, &[0x5A; 512], &[]);
        });
    }
}

#[test]
fn a_whole_log_page_lost_is_repaired_to_the_commits_before_it() {
    // Chunk 5's page, and the first chunk whose record is on it.
    let sim = staged_volume();
    let page = sector_of_chunk(&sim, 5).0;
    let first = (0..CHUNKS)
        .find(|&i| sector_of_chunk(&sim, i).0 == page)
        .unwrap();
    assert!(first < 5);
    lost_record(first, |sim, page, _| {
        for step in 0..4 {
            sim.inject_flips(PageAddr(page), step, 60);
        }
    });
}

/// The log sectors (page, sector) of stream `stream` on the part: a trailer of kind 5
/// (SPEC 3.3, 4.2) naming it.
fn log_sectors(sim: &Sim, stream: u32) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for pg in 0..sim.profile().geometry.pages() {
        let mut d = vec![0u8; 2048];
        let mut o = vec![0u8; 64];
        sim.peek(PageAddr(pg), &mut d, &mut o);
        for k in 0..4u32 {
            let t = &d[(k as usize + 1) * 512 - 16..(k as usize + 1) * 512];
            let owner = u32::from_le_bytes([t[4], t[5], t[6], 0]);
            let kind = u16::from_le_bytes([t[10], t[11]]) >> 13;
            if kind == 5 && owner == stream && t != [0xFF; 16] {
                out.push((pg, k));
            }
        }
    }
    out
}

/// A random run of staged and direct commits over two object files and two inline
/// files, then each log sector of the staging stream lost in turn (crashed with the
/// log below a checkpoint): the mount refuses or reads everything acknowledged; the
/// repair mounts, and every file reads as it was after one of its own commits.
#[test]
fn any_log_sector_lost_leaves_every_file_in_a_state_it_had() {
    let mut repaired = 0;
    let mut dropped_any = 0;
    for seed in 0..6u32 {
        let bypass = seed % 2 == 0;
        let names = ["/a", "/b", "/c", "/d"];
        let mut history: Vec<Vec<Vec<u8>>> = Vec::new();
        let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(u64::from(seed)));
        let stream;
        {
            let mut fs = vol(&mut sim);
            fs.format().unwrap();
            for (i, n) in names.iter().enumerate() {
                let data = if i < 2 {
                    pattern(seed * 10 + i as u32, 3000)
                } else {
                    pattern(seed * 10 + i as u32, 30)
                };
                write_file(&mut fs, n, &data);
                history.push(vec![data]);
            }
            fs.sync().unwrap();
            fs.set_tuning(Tuning {
                staging: true,
                bypass,
            });
            let mut x = seed.wrapping_mul(2654435761).wrapping_add(12345);
            let mut rnd = |m: u32| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x % m
            };
            for step in 0..40u32 {
                let i = rnd(4) as usize;
                let mut cur = history[i].last().unwrap().clone();
                let fill = pattern(seed * 1000 + step, 2048);
                if i >= 2 {
                    let len = 10 + rnd(200) as usize;
                    cur = fill[..len].to_vec();
                    write_file(&mut fs, names[i], &cur);
                } else {
                    let f = fs.open(names[i], support::rw()).unwrap();
                    let (off, len) = match rnd(3) {
                        0 => (cur.len(), 64),
                        1 => (rnd(cur.len() as u32 - 64) as usize, 64),
                        _ => (2048 * rnd(2) as usize, 2048),
                    };
                    fs.seek(f, stagefs_core::SeekFrom::Start(off as u64))
                        .unwrap();
                    fs.write(f, &fill[..len]).unwrap();
                    fs.close(f).unwrap();
                    if cur.len() < off + len {
                        cur.resize(off + len, 0);
                    }
                    cur[off..off + len].copy_from_slice(&fill[..len]);
                }
                history[i].push(cur);
            }
            stream = fs.staging_status().unwrap().stream;
            for n in &names[..2] {
                let obj = fs.location(n).unwrap().object.unwrap();
                fs.store_mut().discard(obj);
            }
            fs.store_mut().sync().unwrap();
        }
        sim.cut_power();
        sim.power_on();
        let sectors = log_sectors(&sim, stream);
        assert!(!sectors.is_empty());
        for &(page, sector) in &sectors {
            let mut s = sim.clone();
            s.inject_flips(PageAddr(page), sector, 60);
            let mut fs = vol(&mut s);
            match fs.mount() {
                Ok(()) => {
                    // Outside the live range: nothing lost.
                    for (i, n) in names.iter().enumerate() {
                        assert_eq!(&read_all(&mut fs, n), history[i].last().unwrap());
                    }
                    continue;
                }
                Err(Error::Flash(_) | Error::Corrupted) => {}
                Err(e) => panic!("seed {seed}, sector {page}/{sector}: {e:?}"),
            }
            let rep = fs.mount_repair().unwrap();
            repaired += 1;
            assert!(rep.staged_writes_lost());
            dropped_any += usize::from(rep.staged_bytes_dropped() > 0);
            let mut states = Vec::new();
            for (i, n) in names.iter().enumerate() {
                let got = read_all(&mut fs, n);
                let k = history[i].iter().rposition(|h| *h == got);
                assert!(
                    k.is_some(),
                    "seed {seed}, sector {page}/{sector}: {n} ({} bytes) is in no state it had",
                    got.len()
                );
                states.push(got);
            }
            fs.unmount().unwrap();
            fs.mount().unwrap();
            for (i, n) in names.iter().enumerate() {
                assert_eq!(read_all(&mut fs, n), states[i]);
            }
        }
    }
    eprintln!("{repaired} repairs, {dropped_any} dropped records");
    assert!(repaired >= 20, "{repaired} repairs");
}
