//! A staging log record that no longer reads: the mount fails and drops nothing, and
//! `mount_repair` stops the staging replay at that record, so every file keeps a state
//! it had (the commits before it), the record and everything staged after it are
//! dropped and reported, and the volume mounts normally from then on.

mod support;

use nand_hal::sim::{profile, FaultPlan, SimNand};
use nand_hal::PageAddr;
use stagefs_core::{Error, OpenOptions, Tuning};
use support::{pattern, read_all, vol, write_file, Sim, Vol};

/// The staged commits: `/log` appended with `CHUNKS` 64-byte chunks, each fsynced, and
/// `/s` (inline) rewritten after every third.
const CHUNKS: u8 = 12;

fn chunk(i: u8) -> [u8; 64] {
    [0x40 + i; 64]
}

fn inline_contents(i: u8) -> Vec<u8> {
    pattern(u32::from(i) + 100, 40 + usize::from(i))
}

/// The contents of `/log` and `/s` after the first `n` commits of `/log`.
fn expected(n: u8) -> (Vec<u8>, Vec<u8>) {
    let mut log = pattern(7, 1000);
    let mut s = inline_contents(0);
    for i in 0..n {
        log.extend_from_slice(&chunk(i));
        if i % 3 == 2 {
            s = inline_contents(i);
        }
    }
    (log, s)
}

/// A volume with `CHUNKS` staged commits of `/log` (and `/s`'s between them) in the
/// log, crashed before any patch.
fn staged_volume() -> Sim {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(41));
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        write_file(&mut fs, "/log", &pattern(7, 1000));
        write_file(&mut fs, "/s", &inline_contents(0));
        fs.sync().unwrap();
        fs.set_tuning(Tuning {
            staging: true,
            bypass: false,
        });
        let f = fs
            .open("/log", OpenOptions::new().write(true).append(true))
            .unwrap();
        for i in 0..CHUNKS {
            fs.write(f, &chunk(i)).unwrap();
            fs.fsync(f).unwrap();
            if i % 3 == 2 {
                write_file(&mut fs, "/s", &inline_contents(i));
            }
        }
        let st = fs.staging_status().unwrap();
        assert!(st.end_lsn - st.first_lsn >= u64::from(CHUNKS), "{st:?}");
        assert_eq!((st.staged_objects, st.staged_inline), (1, 1));
        // The log's pages go below a checkpoint of the store (they are then read only
        // by the file layer's replay, not by the store's recovery), with `/log`'s
        // buffered bytes left out: the records are their only copy.
        let obj = fs.location("/log").unwrap().object.unwrap();
        fs.store_mut().discard(obj);
        fs.store_mut().sync().unwrap();
        // Crash.
    }
    sim.cut_power();
    sim.power_on();
    sim
}

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
