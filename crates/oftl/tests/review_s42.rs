//! Independent review (s42) of commit 0860521: a normal crash recovery drops the cold
//! copies of its window, and a collection's cache write-backs stop counting as
//! recovery work where collection runs in slices. Compared against its parent 8a2f8fe.
//!
//! Run: `cargo test --release -p oftl --features alloc --test all review_s42:: -- --nocapture
//! --test-threads 1` (`--ignored` for the probes).
//!
//! Findings (each failed on 0860521; fixed in stop 42):
//! - HIGH: scrub copies were dropped too, and the scrub request lives in RAM only: a
//!   power cut before the next checkpoint undid the scrub and forgot it, so a
//!   read-disturbed block stayed in service; with power-on sessions shorter than a
//!   scrub plus a checkpoint it was never moved and its pages went past ECC
//!   (`finding_scrub_*`, `finding_cut_after_each_scrub_step_*`). 8a2f8fe: 0 of 40
//!   seeds lost data at 1,024- and 2,048-read sessions; 0860521: 5 and 2 of 40.
//!   Fixed: a collection step that copied pages of a scrub or retirement victim
//!   checkpoints (`gc_advance`): 0 of 40 at both, 0 of 20 with a cut after every
//!   scrub step (`probe_read_disturb_with_cuts_after_scrubs`).
//! - MEDIUM, pre-existing (same figures on 8a2f8fe): mount after a cut over 100 ms at
//!   30 % of capacity with writes spread over many objects
//!   (`finding_preexisting_mount_after_cut_over_100ms_at_30pct_spread_writes`).
//!   Fixed: a recovery moves the cut block's pages owner by owner
//!   (`relocate_cut_block`), so an object's index pages are written back once: worst
//!   105.1 -> 88.6 ms at 30 %; at 85 % 120.9 -> 107.3 ms (2 of 215 mounts over 100 ms,
//!   as on 8a2f8fe); at 50 % 119.6 ms, 9 of 215 over (21 of 429 on 8a2f8fe): still a
//!   known limit (`probe_mount_after_cut_spread_writes`). Stop 48: a recovery whose cut
//!   left nothing after the data head's last commit leaves that block (and the cold
//!   head's, whose copies it drops) to collection while the pool has room: 50 %
//!   119.9 -> 46.7 ms, 0 of 215 over (a test now,
//!   `mount_after_cut_spread_writes_at_half_capacity`); 85 % 107.6 -> 96.2 ms.
//!
//! Held: copies of copies and victims half collected across a checkpoint, with second
//! cuts inside the recovery; read disturb without cuts; powerloss soak (35,943 runs,
//! 26,943 recovery cuts, 0 failures); review_s34/s37 sweeps; review_s41 mount probes
//! at 64-91.5 % with 2 KiB writes (worst 95.9 ms); near-full 1-page rewrites on the
//! W25N01GV (4- and 7-slot caches, windows 8-16): refusals from about 90 % on both
//! commits, no regression (probes below).

#![allow(dead_code)]

use crate::common;
use common::lifecycle::Lifecycle;
use common::{env, Rng};

use nand_hal::sim::{profile, FaultPlan, HeapStorage, SimNand};
use oftl::{Config, ObjKind, ObjectId};

type Sim = SimNand<HeapStorage>;

const MOUNT_CUT_BOUND_MS: f64 = 100.0;

/// Mounts a copy of `sim` (a cut between two calls), timed: (ms, description).
macro_rules! mount_time {
    ($ty:ty, $sim:expr) => {{
        let src: &Sim = $sim;
        let mut copy: Sim = src.clone();
        let t0 = copy.now_ns();
        let c0 = copy.counters();
        let fs = <$ty>::mounted(&mut copy);
        let ok = fs.is_ok();
        let (st, d) = match &fs {
            Ok(fs) => (format!("{:?}", fs.stats()), fs.flash().counters() - c0),
            Err(e) => (format!("{e:?}"), copy_counters_dummy(c0)),
        };
        drop(fs);
        let ms = (copy.now_ns() - t0) as f64 / 1e6;
        (
            ms,
            ok,
            format!(
                "{} reads ({} oob), {} programs, {} erases; {st}",
                d.reads, d.oob_reads, d.programs, d.erases
            ),
        )
    }};
}

/// Zero counters (the mount failed: nothing to count).
#[allow(clippy::eq_op)]
fn copy_counters_dummy(c: nand_hal::sim::Counters) -> nand_hal::sim::Counters {
    c - c
}

/// W25N01GV store (`oftl::W25n01gv`, 7 cache slots) filled to about `fill_pct` % of
/// its capacity with `objs` equal objects, then random one-page overwrites (each
/// synced) spread over every object, so that nearly every write dirties an index
/// page the cache does not hold; the device is copied and mounted (a cut between two
/// calls) every `every` writes. Returns the worst mount (ms, op, what).
fn spread_probe(
    objs: u64,
    fill_pct: u64,
    warm: u64,
    ops: u64,
    every: u64,
    seed: u64,
) -> (f64, u64, String) {
    type Fs<'a> = oftl::W25n01gv<&'a mut Sim>;
    let mut sim = Sim::heap(profile::W25N01GV, FaultPlan::seeded(seed));
    let mut fs = Fs::formatted(&mut sim, Config::default()).unwrap();
    let page = fs.payload() as u64;
    let cap = fs.capacity_pages();
    let per = cap * fill_pct / 100 / objs;
    let chunk = vec![0x5Au8; (64 * page) as usize];
    let mut ids: Vec<ObjectId> = Vec::new();
    for _ in 0..objs {
        let id = fs.create(ObjKind::Object).unwrap();
        let mut off = 0;
        while off < per * page {
            let n = (per * page - off).min(chunk.len() as u64) as usize;
            fs.write(id, off, &chunk[..n]).unwrap();
            off += n as u64;
        }
        ids.push(id);
    }
    fs.sync().unwrap();
    println!(
        "{objs} objects of {per} pages: used {} of {cap} pages ({:.1}%)",
        fs.used_pages(),
        100.0 * fs.used_pages() as f64 / cap as f64
    );
    let mut rng = Rng(seed | 1);
    let buf = vec![0xA5u8; page as usize];
    let mut worst = (0.0f64, 0u64, String::new());
    let mut over = 0;
    let mut mounts = 0;
    let mut sum = 0.0;
    let t0 = fs.flash().now_ns();
    let c0 = fs.flash().counters();
    let s0 = fs.stats();
    for i in 0..warm + ops {
        let o = ids[rng.below(objs) as usize];
        let p = rng.below(per);
        fs.write(o, p * page, &buf).unwrap();
        fs.flush(o).unwrap();
        if i == warm {
            let d = fs.flash().counters() - c0;
            println!(
                "warm-up {warm} writes: {:.2} programs a write, {:.3} ms a write, {} checkpoints",
                d.programs as f64 / warm as f64,
                (fs.flash().now_ns() - t0) as f64 / 1e6 / warm as f64,
                fs.stats().checkpoints - s0.checkpoints
            );
        }
        if i >= warm && i % every == every - 1 {
            let (ms, ok, what) = mount_time!(Fs<'_>, &**fs.flash());
            assert!(ok, "op {i}: mount failed: {what}");
            mounts += 1;
            sum += ms;
            if ms > MOUNT_CUT_BOUND_MS {
                over += 1;
            }
            if ms > worst.0 {
                worst = (ms, i, what);
            }
        }
    }
    let st = fs.stats();
    println!(
        "run: {} pages relocated by collection, {} checkpoints; mount after a cut: mean {:.2} ms, worst {:.2} ms at op {} ({}); {over} of {mounts} over {MOUNT_CUT_BOUND_MS} ms",
        st.relocated_pages - s0.relocated_pages, st.checkpoints - s0.checkpoints, sum / mounts as f64, worst.0, worst.1, worst.2
    );
    worst
}

/// Probe: mount after a cut, random one-page overwrites spread over every object of a
/// W25N01GV store (env S42_OBJS, S42_FILL, S42_WARM, S42_OPS, S42_EVERY, S42_SEED).
/// Mounts over 100 ms of 429 (mean, worst), 30,000 writes of warm-up, 3,000 sampled
/// every 7: 85 %: 0860521 35 (69.7 ms, 130.2 ms), 8a2f8fe 2 (51.5, 118.4); 80 %: 42
/// vs 4 (137.6 vs 146.6 worst); 75 %: 28 vs 10; 50 %: 50 vs 21 (71.3 vs 66.3 mean);
/// 91 %: 28 (0860521). The change checkpoints every ~36 writes where 8a2f8fe did
/// every ~2.6 at 85 %, so mounts there now look like mounts at 50 %: the bound is
/// broken at every fill by the pre-existing cause below, not by the accounting.
#[test]
#[ignore]
fn probe_mount_after_cut_spread_writes() {
    let (ms, i, what) = spread_probe(
        env("S42_OBJS", 25),
        env("S42_FILL", 85),
        env("S42_WARM", 30_000),
        env("S42_OPS", 1500),
        env("S42_EVERY", 7),
        env("S42_SEED", 42),
    );
    assert!(ms <= MOUNT_CUT_BOUND_MS, "op {i}: {ms:.2} ms ({what})");
}

/// The probe at 50 % of capacity, the fill that broke the bound most often (10 of 215
/// mounts over 100 ms, worst 119.9 ms, until stop 48).
#[test]
fn mount_after_cut_spread_writes_at_half_capacity() {
    let (ms, i, what) = spread_probe(25, 50, 30_000, 1500, 7, 42);
    assert!(ms <= MOUNT_CUT_BOUND_MS, "op {i}: {ms:.2} ms ({what})");
}

// ---------------------------------------------------------------------------------
// Scrub copies and read disturb across power cuts.

type Tiny<'a> = oftl::Oftl<&'a mut Sim, 2048, 64, 4>;

fn tiny_cfg() -> Config {
    Config {
        window_blocks: 6,
        format_id: 3,
        ..Default::default()
    }
}

fn pattern(seed: u32, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2654435761) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// Objects written once on a `TINY` part with read disturb (F14), then read over and
/// over, a background step every `every` reads; with `cut`, the power is cut (the
/// store dropped without unmount, then mounted) right after every step that copied
/// pages, up to `max_cuts` times. Returns (first failed read as "read n: error", cuts,
/// pages moved).
fn disturb_run(
    seed: u64,
    reads: u32,
    every: u32,
    cut: bool,
    max_cuts: u32,
) -> (Option<String>, u32, u64) {
    disturb_sessions(seed, reads, every, cut, max_cuts, 0)
}

/// [`disturb_run`]; with `session` > 0, the power is also cut after every `session`
/// reads of a mount (a device that reads its data after each power-on and loses power
/// before the next checkpoint).
fn disturb_sessions(
    seed: u64,
    reads: u32,
    every: u32,
    cut: bool,
    max_cuts: u32,
    session: u32,
) -> (Option<String>, u32, u64) {
    let mut sim = Sim::heap(
        profile::TINY,
        FaultPlan::seeded(seed).with_faults(nand_hal::sim::FaultConfig {
            read_disturb_threshold: env("RD_TH", 10_000),
            read_disturb_ppm: env("RD_PPM", 1_000),
            ..nand_hal::sim::FaultConfig::default()
        }),
    );
    let sizes = [40usize, 200, 700, 2048, 3000, 5000, 9000];
    let mut objs = Vec::new();
    {
        let mut fs = Tiny::formatted(&mut sim, tiny_cfg()).unwrap();
        for i in 0..28u32 {
            let d = pattern(seed as u32 * 100 + i, sizes[i as usize % sizes.len()]);
            let id = fs.create(ObjKind::Object).unwrap();
            fs.write(id, 0, &d).unwrap();
            objs.push((id, d));
        }
        fs.unmount().unwrap();
    }
    let mut x = seed | 1;
    let mut buf = vec![0u8; 9000];
    let mut cuts = 0;
    let mut moved_total = 0;
    let mut n = 0u32;
    while n < reads {
        let mut fs = match Tiny::mounted(&mut sim) {
            Ok(fs) => fs,
            Err(e) => {
                return (
                    Some(format!("mount after {cuts} cuts at read {n}: {e:?}")),
                    cuts,
                    moved_total,
                )
            }
        };
        let mut cut_now = false;
        let first = n;
        while n < reads && !cut_now {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (id, d) = &objs[(x % objs.len() as u64) as usize];
            match fs.read(*id, 0, &mut buf[..d.len()]) {
                Ok(k) if k == d.len() && buf[..k] == d[..] => {}
                Ok(k) => {
                    return (
                        Some(format!("read {n} of {id:?}: {k} bytes, wrong")),
                        cuts,
                        moved_total,
                    )
                }
                Err(e) => {
                    return (
                        Some(format!("read {n} of {id:?}: {e:?} (after {cuts} cuts)")),
                        cuts,
                        moved_total,
                    )
                }
            }
            if every > 0 && n % every == 0 {
                let before = fs.stats().relocated_pages;
                let ck = fs.stats().checkpoints;
                fs.gc_step(8).unwrap();
                let moved = fs.stats().relocated_pages - before;
                moved_total += moved;
                // Cut while the copies are not yet checkpointed.
                if cut && moved > 0 && cuts < max_cuts && fs.stats().checkpoints == ck {
                    cut_now = true;
                }
            }
            n += 1;
            if session > 0 && n - first >= session {
                cut_now = true;
            }
        }
        if cut_now {
            cuts += 1;
            drop(fs); // power cut between two calls
        } else {
            fs.unmount().unwrap();
        }
    }
    (None, cuts, moved_total)
}

/// Read disturb with a power cut after every step that scrubbed pages (copies not yet
/// checkpointed): counts the runs that lost data (env RD_SEEDS, RD_READS, RD_CUT=0/1,
/// RD_MAX_CUTS).
#[test]
#[ignore]
fn probe_read_disturb_with_cuts_after_scrubs() {
    let seeds = env("RD_SEEDS", 20u64);
    let reads = env("RD_READS", 100_000u32);
    let cut = env("RD_CUT", 1u32) == 1;
    let max_cuts = env("RD_MAX_CUTS", 1000u32);
    let session = env("RD_SESSION", 0u32);
    let mut lost = Vec::new();
    let mut total_cuts = 0;
    for seed in 1..=seeds {
        let (r, cuts, moved) = disturb_sessions(seed, reads, 64, cut, max_cuts, session);
        total_cuts += cuts;
        println!("seed {seed}: {cuts} cuts, {moved} pages moved: {r:?}");
        if let Some(e) = r {
            lost.push((seed, e));
        }
    }
    println!(
        "{} of {seeds} runs lost data ({total_cuts} cuts): {lost:?}",
        lost.len()
    );
    assert!(lost.is_empty(), "{lost:?}");
}

/// **Finding (high): scrubbing never survives a power cut, and read-disturbed data is
/// lost.** A device that reads its objects after each power-on and loses power every
/// 1,024 reads (no unmount, no sync): each session's background steps scrub the
/// disturbed block into the cold head, the cut comes before the next checkpoint, and
/// since 0860521 the recovery drops those copies, so the index points back into the
/// disturbed block, whose scrub flag (RAM only) and probe counter are gone. The block
/// is found again, scrubbed again, and undone again, while each read of it keeps
/// flipping bits in its other pages, until one needs two corrections in a step.
/// Seed 2 (TINY, read disturb from 10,000 reads, 1,000 ppm): `Uncorrectable` at read
/// 25,608 after 25 cuts. On 8a2f8fe (recovery replays the copies and checkpoints
/// them) 0 of 40 seeds lose data at sessions of 1,024 or 2,048 reads; on 0860521 5 and
/// 2 of 40 (`probe_read_disturb_with_cuts_after_scrubs` with RD_CUT=0 RD_SESSION=1024
/// RD_SEEDS=40 RD_READS=100000).
#[test]
fn finding_scrub_undone_by_each_power_cut_loses_disturbed_data() {
    let (r, cuts, moved) = disturb_sessions(2, 100_000, 64, false, 0, 1024);
    assert!(
        r.is_none(),
        "seed 2, sessions of 1,024 reads: {r:?} ({cuts} cuts, {moved} pages moved)"
    );
}

/// **Finding (high), the sharpest form of the above:** a cut right after every
/// background step that scrubbed pages (before the copies are checkpointed). Seed 1:
/// `Uncorrectable` at read 34,932 after 212 cuts on 0860521; 8a2f8fe survives 60,000
/// reads and ~600 such cuts on each of seeds 1-5 (0860521: 5 of 5 lose data).
#[test]
fn finding_cut_after_each_scrub_step_loses_disturbed_data() {
    let (r, cuts, moved) = disturb_run(1, 60_000, 64, true, u32::MAX);
    assert!(
        r.is_none(),
        "seed 1: {r:?} ({cuts} cuts, {moved} pages moved)"
    );
}

/// Held: the same reads without cuts (scrubbing works when nothing undoes it).
#[test]
fn held_read_disturb_without_cuts() {
    for seed in 1..=3 {
        let (r, _, moved) = disturb_run(seed, 60_000, 64, false, 0);
        assert!(
            r.is_none() && moved > 0,
            "seed {seed}: {r:?}, {moved} moved"
        );
    }
}

// ---------------------------------------------------------------------------------
// Near-full refusals where the band allows slices (write-backs while copying no longer
// bring checkpoints).

fn near_full_rewrites<
    const BL: usize,
    const C: usize,
    const W: usize,
    const M: usize,
    const L: usize,
>(
    p: nand_hal::sim::Profile,
    window: u16,
    seed: u64,
    fill: f64,
    n: u32,
) -> (u32, u32, u32, f64) {
    use common::fill::{check, fill_to, pat, rewrite};
    let mut s = Sim::heap(p, FaultPlan::seeded(seed));
    let cfg = Config {
        window_blocks: window,
        format_id: 7,
        ..Default::default()
    };
    let mut fs: common::fill::On<'_, BL, C, W, oftl::Greedy, M, L> =
        oftl::Oftl::new(&mut s, cfg, oftl::Greedy::DEFAULT);
    fs.format().unwrap();
    let mut model = fill_to(&mut fs, fill, 8);
    let pct = 100.0 * fs.used_pages() as f64 / fs.capacity_pages() as f64;
    let objs: Vec<u32> = model.keys().copied().collect();
    let mut rng = Rng(seed | 1);
    let (mut ok, mut refused, mut run, mut longest) = (0, 0, 0, 0);
    for k in 0..n {
        let o = objs[rng.below(objs.len() as u64) as usize];
        let off = rng.below(8) as usize * 2048;
        if rewrite(&mut fs, &mut model, o, off, &pat(50_000 + k, 2048)) {
            ok += 1;
            run = 0;
        } else {
            refused += 1;
            run += 1;
            longest = longest.max(run);
        }
    }
    check(&mut fs, &model);
    (ok, refused, longest, pct)
}

/// Probe: 1-page rewrites near full on the W25N01GV with a 4-slot cache
/// (`W25n01gvSmall`'s layout) and windows of 8 and 16 blocks (sliced bands): refusals.
#[test]
#[ignore]
fn probe_near_full_small_cache_refusals() {
    let mut out = vec![];
    for w in [8u16, 16] {
        for fill in [env("S42_F1", 0.9), env("S42_F2", 0.95)] {
            let r = near_full_rewrites::<1024, 4, 1, 512, 0>(
                profile::W25N01GV,
                w,
                1,
                fill,
                env("S42_N", 3000),
            );
            println!("w{w} fill {fill}: {r:?}");
            out.push((w, fill, r));
        }
    }
    assert!(out.iter().all(|o| o.2 .1 == 0), "{out:?}");
}

/// **Finding (high), the mechanism:** a power cut right after a background step that
/// scrubbed part of a disturbed block (flagged for scrubbing, read-disturb errors in
/// its pages) undoes the scrub and forgets it: after the crash recovery the block
/// counts every page valid again and carries no scrub flag (the flag lives in RAM,
/// the recovery drops the copies, and nothing in the recovery reads the block), so the
/// store goes on reading the disturbed pages as if nothing had been found. TINY,
/// seed 1, read disturb from 10,000 reads at 1,000 ppm. On 8a2f8fe the copies are
/// replayed: the block keeps (nearly) the count it had after the step (16 -> 8 -> 9:
/// the last copy, possibly torn, is dropped), here 16 again.
#[test]
fn finding_scrub_step_undone_and_forgotten_by_a_cut() {
    let seed = 1u64;
    let mut sim = Sim::heap(
        profile::TINY,
        FaultPlan::seeded(seed).with_faults(nand_hal::sim::FaultConfig {
            read_disturb_threshold: 10_000,
            read_disturb_ppm: 1_000,
            ..nand_hal::sim::FaultConfig::default()
        }),
    );
    let sizes = [40usize, 200, 700, 2048, 3000, 5000, 9000];
    let mut objs = Vec::new();
    {
        let mut fs = Tiny::formatted(&mut sim, tiny_cfg()).unwrap();
        for i in 0..28u32 {
            let d = pattern(seed as u32 * 100 + i, sizes[i as usize % sizes.len()]);
            let id = fs.create(ObjKind::Object).unwrap();
            fs.write(id, 0, &d).unwrap();
            objs.push((id, d));
        }
        fs.unmount().unwrap();
    }
    let mut fs = Tiny::mounted(&mut sim).unwrap();
    let mut x = seed | 1;
    let mut buf = vec![0u8; 9000];
    let mut found = None;
    for n in 0..200_000u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let (id, d) = &objs[(x % objs.len() as u64) as usize];
        assert_eq!(fs.read(*id, 0, &mut buf[..d.len()]).unwrap(), d.len());
        if n % 64 == 0 {
            let before: Vec<u16> = fs.blocks().iter().map(|b| b.valid()).collect();
            let ck = fs.stats().checkpoints;
            fs.gc_step(8).unwrap();
            if fs.stats().checkpoints != ck {
                continue;
            }
            let hit = fs.blocks().iter().enumerate().find(|(i, b)| {
                b.scrub() && b.state() == oftl::BlockState::Full && b.valid() < before[*i]
            });
            if let Some((b, info)) = hit {
                found = Some((n, b, before[b], info.valid()));
                break;
            }
        }
    }
    // (A build that checkpoints every scrub step has no such step: nothing to undo.)
    let Some((n, b, was, now)) = found else {
        return;
    };
    drop(fs); // power cut between two calls, copies not yet checkpointed
    let fs = Tiny::mounted(&mut sim).unwrap();
    let info = fs.blocks()[b];
    assert!(
        info.scrub() || info.valid() < was,
        "read {n}: block {b} flagged for scrubbing, {was} -> {now} valid pages after a \
         scrub step; after the cut: {} valid, scrub flag {}",
        info.valid(),
        info.scrub()
    );
}

/// Probe: the same with the default W25N01GV layout (`W25n01gv`, 7 cache slots),
/// windows of 8 and 16 blocks.
#[test]
#[ignore]
fn probe_near_full_default_layout_refusals() {
    let mut out = vec![];
    for w in [env("S42_W1", 8u16), env("S42_W2", 16)] {
        for fill in [env("S42_F1", 0.9), env("S42_F2", 0.95)] {
            let r = near_full_rewrites::<1024, 7, 2, 2048, 2048>(
                profile::W25N01GV,
                w,
                env("S42_SEED", 1),
                fill,
                env("S42_N", 3000),
            );
            println!("w{w} fill {fill}: {r:?}");
            out.push((w, fill, r));
        }
    }
    assert!(out.iter().all(|o| o.2 .1 == 0), "{out:?}");
}

// ---------------------------------------------------------------------------------
// Held: a victim half collected across a checkpoint, copies of copies, then a cut
// (and a second cut inside the recovery).

type Fs8<'a> = oftl::Oftl<&'a mut Sim, 2048, 64, 4, 2>;

fn fillv(buf: &mut [u8], o: usize, p: u64, v: u8) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (o as u8).wrapping_mul(31) ^ (p as u8).wrapping_mul(7) ^ v ^ (i as u8);
    }
}

fn checkv(fs: &mut Fs8<'_>, ids: &[ObjectId], ver: &[Vec<u8>]) -> Result<(), String> {
    let page = fs.payload() as usize;
    let mut want = vec![0u8; page];
    let mut got = vec![0u8; page];
    for (o, &id) in ids.iter().enumerate() {
        for p in 0..ver[o].len() as u64 {
            fillv(&mut want, o, p, ver[o][p as usize]);
            match fs.read(id, p * page as u64, &mut got) {
                Ok(n) if n == page && got == want => {}
                r => return Err(format!("object {o} page {p}: {r:?}")),
            }
        }
    }
    Ok(())
}

/// Builds the store: 4 objects of 60 pages, every other page rewritten, synced; a
/// collection of 2 pages a step until a victim is half done, a checkpoint (`sync`),
/// the collection goes on (the same victim, then cold blocks of the last window:
/// copies of copies), overwrites of copied pages, flushed, no checkpoint. Returns the
/// model.
fn half_collected(sim: &mut Sim, seed: u64) -> (Vec<ObjectId>, Vec<Vec<u8>>) {
    let mut fs = Fs8::formatted(
        sim,
        Config {
            window_blocks: 8,
            format_id: 1,
            ..Default::default()
        },
    )
    .unwrap();
    let page = fs.payload() as usize;
    let mut buf = vec![0u8; page];
    let mut ids = Vec::new();
    let mut ver = vec![vec![0u8; 60]; 4];
    for o in 0..4 {
        let id = fs.create(ObjKind::Object).unwrap();
        for p in 0..60u64 {
            fillv(&mut buf, o, p, 0);
            fs.write(id, p * page as u64, &buf).unwrap();
        }
        ids.push(id);
    }
    let mut rng = Rng(seed | 1);
    for round in 0..3u8 {
        for o in 0..4 {
            for p in (0..60u64).filter(|p| (p + round as u64) % 3 == 0) {
                fillv(&mut buf, o, p, round + 1);
                fs.write(ids[o], p * page as u64, &buf).unwrap();
                ver[o][p as usize] = round + 1;
            }
        }
        fs.sync().unwrap();
        for _ in 0..rng.below(6) + 2 {
            fs.gc_step(2).unwrap();
        }
        fs.sync().unwrap(); // victim half collected across this checkpoint
        for _ in 0..rng.below(12) + 2 {
            fs.gc_step(2).unwrap();
        }
    }
    for _ in 0..rng.below(10) {
        fs.gc_step(3).unwrap();
    }
    for k in 0..6u64 {
        let o = rng.below(4) as usize;
        let p = rng.below(60);
        fillv(&mut buf, o, p, 10 + k as u8);
        fs.write(ids[o], p * page as u64, &buf).unwrap();
        fs.flush(ids[o]).unwrap();
        ver[o][p as usize] = 10 + k as u8;
        fs.gc_step(2).unwrap();
    }
    let st = fs.stats();
    println!(
        "seed {seed}: {} pages copied, {} checkpoints",
        st.relocated_pages, st.checkpoints
    );
    (ids, ver)
}

#[test]
fn held_half_collected_victims_and_copies_of_copies_survive_cuts() {
    for seed in 1..=12u64 {
        let mut base = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
        let (ids, ver) = half_collected(&mut base, seed);
        // A cut between two calls.
        let mut sim = base.clone();
        let mut fs = Fs8::mounted(&mut sim).unwrap();
        println!("  recovery: {:?}", fs.stats());
        checkv(&mut fs, &ids, &ver).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        for _ in 0..30 {
            fs.gc_step(4).unwrap();
        }
        checkv(&mut fs, &ids, &ver).unwrap_or_else(|e| panic!("seed {seed} after gc: {e}"));
        drop(fs);
        let mut fs = Fs8::mounted(&mut sim).unwrap();
        checkv(&mut fs, &ids, &ver).unwrap_or_else(|e| panic!("seed {seed} 2nd cut: {e}"));
        // Second cuts inside the recovery, at every program/erase.
        for k in 1..200u64 {
            let mut s2 = base.clone();
            s2.arm(FaultPlan::seeded(seed * 1000 + k).with_cut(k, nand_hal::sim::CutKind::Clean));
            let r = Fs8::mounted(&mut s2).map(|_| ());
            s2.power_on();
            s2.disarm();
            let mut fs = Fs8::mounted(&mut s2)
                .unwrap_or_else(|e| panic!("seed {seed} rc {k}: {e:?} (first {r:?})"));
            checkv(&mut fs, &ids, &ver).unwrap_or_else(|e| panic!("seed {seed} rc {k}: {e}"));
            if r.is_ok() {
                break;
            }
        }
    }
}

/// **Finding (medium, pre-existing: identical figures on 8a2f8fe): mount after a cut
/// over 100 ms at 30 % of capacity.** W25N01GV (`W25n01gv`, default config), 25
/// objects of 727 pages (30.2 % of `capacity_pages`), 10,000 random one-page
/// overwrites each flushed (spread over every object), then 3,000 more with the
/// device copied and mounted every 7: 8 of 429 mounts over 100 ms, worst 106.4 ms
/// (514 reads, 250 programs, 5 erases: the recovery relocates the cut data head's
/// block, 64 pages of 25 objects, and writes back 173 index pages through a 7-slot
/// cache). The README states 93-94 ms at 30 % (review s41's workload rewrites 4 open
/// files, so its relocations share index pages).
#[test]
fn finding_preexisting_mount_after_cut_over_100ms_at_30pct_spread_writes() {
    let (ms, i, what) = spread_probe(25, 30, 10_000, 3_000, 7, 42);
    assert!(ms <= MOUNT_CUT_BOUND_MS, "op {i}: {ms:.2} ms ({what})");
}
