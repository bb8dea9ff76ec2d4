//! Read-mostly data on a part with read disturb (F14): reads of a block past a
//! threshold flip bits in its *other* pages, which add up until the part's 1-bit ECC
//! cannot correct them unless the data moves first. Files written once are read over
//! and over (configuration read at every request, a lookup table) with a background
//! step every 64 file reads; every read must return the bytes written, and the volume
//! must mount and read back after.
//!
//! Found in stop 33: oftl scrubbed a block only when a read of a page *in it* needed
//! corrections at the part's threshold, and read disturb puts its errors in the pages
//! that are *not* being read, so they were found only past what ECC corrects. At the
//! simulator's `noisy` rates (disturb from 10,000 reads of a block, one read in 1,000
//! flipping a bit elsewhere in it; a real part's threshold is ten times that) these
//! files became unreadable after about 20,000 to 25,000 file reads. Now one payload read
//! in 8 also reads one spare byte of another page of its block (the part reports ECC
//! for the whole page), and `step` scrubs what the probe finds, leaving a head's block
//! and checkpointing when the block is in the window; a window block flagged by reads
//! of its own pages goes the same way (the soak below found such a block staying put,
//! never checkpointed, until its pages failed). Residual risk, measured by the soak:
//! 9 of 100 runs of 300,000 file reads at these rates lost a page (two flips in one ECC
//! step of a page before its block was scrubbed).

use crate::support;

use nand_hal::sim::{profile, FaultConfig, FaultPlan, SimNand};
use stagefs_core::OpenOptions;
use support::{pattern, read_all, vol, write_file};

fn env(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Writes 28 files of 40 B to 9,000 B, then reads whole files chosen at random
/// `reads` times, stepping every `every` reads; returns the pages collection moved.
fn run(seed: u64, every: u32, reads: u32) -> u64 {
    let mut sim = SimNand::heap(
        profile::TINY,
        FaultPlan::seeded(seed).with_faults(FaultConfig {
            read_disturb_threshold: env("RD_TH", 10_000),
            read_disturb_ppm: env("RD_PPM", 1_000),
            ..FaultConfig::default()
        }),
    );
    let sizes = [40usize, 200, 700, 2048, 3000, 5000, 9000];
    let mut files = Vec::new();
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        for i in 0..28u32 {
            let p = format!("/f{i}");
            let d = pattern(seed as u32 * 100 + i, sizes[i as usize % sizes.len()]);
            write_file(&mut fs, &p, &d);
            files.push((p, d));
        }
        fs.unmount().unwrap();
    }
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    let mut x = seed | 1;
    let mut buf = vec![0u8; 9000];
    for n in 0..reads {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let (p, d) = &files[(x % files.len() as u64) as usize];
        let f = fs.open(p, OpenOptions::new().read(true)).unwrap();
        let mut got = 0;
        loop {
            let k = fs
                .read(f, &mut buf[got..])
                .unwrap_or_else(|e| panic!("seed {seed}, read {n} of {p}: {e:?}"));
            if k == 0 {
                break;
            }
            got += k;
        }
        fs.close(f).unwrap();
        assert_eq!(&buf[..got], &d[..], "seed {seed}, read {n} of {p}");
        if every > 0 && n % every == 0 {
            fs.step(8).unwrap();
        }
    }
    let moved = fs.store().stats().relocated_pages;
    fs.unmount().unwrap();
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    for (p, d) in &files {
        assert_eq!(&read_all(&mut fs, p), d, "seed {seed}: {p} after remount");
    }
    moved
}

#[test]
fn read_mostly_files_survive_read_disturb() {
    for seed in 1..=3 {
        let moved = run(seed, 64, 30_000);
        println!("seed {seed}: 30,000 file reads, {moved} pages moved");
        assert!(moved > 0, "seed {seed}: read disturb never moved anything");
    }
}

/// Longer runs and other rates, counting the runs that lost data (the residual risk in
/// the module docs): `RD_READS=300000 RD_SEEDS=30 [RD_TH= RD_PPM= RD_EVERY=
/// RD_MAX_LOSSES=] cargo test --release -p stagefs-core --test all read_disturb::soak --
/// --ignored --nocapture`. Fails when more runs lose data than `RD_MAX_LOSSES` (0).
#[test]
#[ignore]
fn soak() {
    let (reads, every) = (env("RD_READS", 300_000), env("RD_EVERY", 64));
    let seeds = env("RD_SEEDS", 3) as u64;
    let mut lost = Vec::new();
    for seed in 100..100 + seeds {
        match std::panic::catch_unwind(|| run(seed, every, reads)) {
            Ok(moved) => println!("seed {seed}: {reads} file reads, {moved} pages moved"),
            Err(_) => lost.push(seed),
        }
    }
    println!(
        "{} of {seeds} runs of {reads} file reads lost data: seeds {lost:?}",
        lost.len()
    );
    assert!(lost.len() as u32 <= env("RD_MAX_LOSSES", 0), "{lost:?}");
}
