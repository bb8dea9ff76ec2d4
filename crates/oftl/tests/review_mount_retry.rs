//! An independent review of the mount's second look before `MediaLoss` (`mount_inner`
//! starts over, up to `MOUNT_ATTEMPTS` loads) and of the checkpoint a create writes
//! before it reuses an id freed since the last one (`ids_ready`). Neither change broke
//! anything it probed: 3,575 mounts with read-error runs of 3 to 400 reads from every
//! read of a recovering mount on four crashed stores (887 refused with `MediaLoss` before
//! the change, none now; no HAL misuse, no wrong state shown), persistent damage on the
//! 60 newest pages with cuts during the mounts, salvage and repair; 65 cuts at every
//! program and erase of a create's forced checkpoint (nearly empty and nearly full
//! stores) and 64 failed programs during it. Those probes were not kept.
//!
//! It found one fault the change neither caused nor fixed, kept here (fixed since); the
//! sweep and the persistent-damage case below came with the fix.

use crate::common;

use common::lifecycle::Lifecycle;
use common::*;
use nand_hal::sim::{profile, FaultConfig, FaultPlan};
use oftl::ObjKind;

/// A crashed store whose data head, log stream and object table all moved since the
/// last checkpoint: `rounds` rounds of overwrites (more rounds reach further window
/// blocks). Returns the store and the state a mount must show.
fn crashed_store(rounds: u32) -> (Sim, Model) {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(1));
    let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
    let mut ids = Vec::new();
    for i in 0..8u32 {
        let id = fs.create(ObjKind::Object).unwrap();
        fs.write(id, 0, &bytes(i, 3000 + i as usize * 500)).unwrap();
        ids.push(id);
    }
    let log = fs.create(ObjKind::Log).unwrap();
    for r in 0..10u32 {
        fs.log_append(log, &bytes(100 + r, 200)).unwrap();
    }
    fs.sync().unwrap();
    fs.delete(ids[2]).unwrap();
    for round in 0..rounds {
        for (k, &id) in ids.iter().enumerate() {
            if k == 2 {
                continue;
            }
            fs.write(id, 1000, &bytes(900 + round * 10 + k as u32, 2500))
                .unwrap();
            fs.flush(id).unwrap();
        }
    }
    for r in 0..30u32 {
        fs.log_append(log, &bytes(200 + r, 300)).unwrap();
    }
    let n = fs.create(ObjKind::Object).unwrap();
    fs.write(n, 0, &bytes(77, 5000)).unwrap();
    fs.flush(n).unwrap();
    drop(fs); // a crash
    let want = {
        let mut s = sim.clone();
        let mut f = Fs::mounted(&mut s).unwrap();
        observe(&mut f).unwrap()
    };
    (sim, want)
}

/// **Finding (fixed).** A run of read errors long enough to cover every attempt of a
/// crash-recovery mount (400 reads from about the 30th) made the mount succeed with the
/// acknowledged changes since the checkpoint rolled back (overwrites undone, a created
/// object gone; the log stream kept its records), and checkpointed that state, so it
/// survived the next remount. Traced: the run hid the data head's whole window blocks
/// and the end of the block before them; the scan remembered only the first four
/// unreadable pages of its walk for the re-reads, all in that earlier block, and on the
/// attempt that finished, the run still covered them when they were read again. The
/// scan now remembers the last six unreadable pages, and a page that reads erased
/// when read again counts as read (a run also hides a head's erased pages).
#[test]
fn long_error_run_rolls_back_acknowledged_changes() {
    let (mut sim, want) = crashed_store(1);
    sim.arm(FaultPlan::seeded(1030).with_faults(FaultConfig {
        read_fail_at: 30,
        read_fail_len: 400,
        ..FaultConfig::default()
    }));
    // Refusing is right; mounting must show the acknowledged state.
    match Fs::mounted(&mut sim) {
        Ok(mut fs) => {
            fs.flash_mut().disarm();
            let seen = observe(&mut fs).unwrap();
            matches(&seen, &[&want]).unwrap();
        }
        Err(e) => assert!(matches!(e, oftl::MountError::MediaLoss { .. }), "{e:?}"),
    }
    sim.disarm();
    let mut fs = Fs::mounted(&mut sim).unwrap();
    let seen = observe(&mut fs).unwrap();
    matches(&seen, &[&want]).unwrap();
}

/// A run of read errors of every length from every read of a crash-recovery mount: the
/// mount either shows the acknowledged state (then a remount shows it too: what the
/// recovery checkpointed is right) or fails (`MediaLoss`, or the read error where the
/// mount cannot do without the page), and then a mount without errors shows it; never
/// an older state.
#[test]
fn error_runs_from_every_read_of_a_recovery() {
    let mut refused = 0;
    let mut mounted = 0;
    for rounds in [1u32, 4] {
        let (sim, want) = crashed_store(rounds);
        let reads = {
            let mut s = sim.clone();
            let before = s.counters();
            drop(Fs::mounted(&mut s).unwrap());
            let d = s.counters() - before;
            (d.reads + d.oob_reads) as u32
        };
        eprintln!("{rounds} rounds: a recovering mount reads {reads} times");
        let r = reads;
        let lens: Vec<u32> = if std::env::var("OFTL_ERROR_RUNS_ALL").is_ok() {
            (1..=3 * r).collect()
        } else {
            vec![
                2,
                5,
                9,
                12,
                30,
                r / 2,
                r,
                r + r / 2,
                2 * r,
                2 * r + r / 2,
                3 * r,
            ]
        };
        for len in lens {
            for at in (1..=reads).step_by(if len < 30 { 1 } else { 2 }) {
                let tag = format!("{rounds} rounds, {len} failing reads from read {at}");
                let mut s = sim.clone();
                s.arm(FaultPlan::seeded(at as u64).with_faults(FaultConfig {
                    read_fail_at: at,
                    read_fail_len: len,
                    ..FaultConfig::default()
                }));
                match Fs::mounted(&mut s) {
                    Ok(mut fs) => {
                        fs.flash_mut().disarm();
                        let seen = observe(&mut fs).unwrap_or_else(|e| panic!("{tag}: {e}"));
                        matches(&seen, &[&want]).unwrap_or_else(|e| panic!("{tag}: {e}"));
                        mounted += 1;
                    }
                    // `MediaLoss`, or the read error itself where a mount cannot go
                    // on without the page (a table page, say): an error either way.
                    Err(_) => refused += 1,
                }
                s.disarm();
                let mut fs = Fs::mounted(&mut s).unwrap_or_else(|e| panic!("{tag}: {e:?}"));
                let seen = observe(&mut fs).unwrap_or_else(|e| panic!("{tag}: {e}"));
                matches(&seen, &[&want]).unwrap_or_else(|e| panic!("{tag}: {e}"));
            }
        }
    }
    eprintln!("error runs: {mounted} mounted with the acknowledged state, {refused} refused");
    assert!(mounted > 100 && refused > 10, "{mounted} {refused}");
}

/// **Finding (pre-existing; fixed).** The newest pages of the data head damaged for good,
/// more of them after an accepted page of their block than one cut leaves, were taken
/// for a torn tail and the acknowledged transactions on them dropped without a word
/// (and checkpointed). The writer now leaves a block after eight failed programs in a
/// row, so a cut leaves at most eight unreadable pages there, and recovery reports more
/// as `MediaLoss` (DESIGN 5.2). One damaged page is what a cut leaves: the mount takes it
/// for torn.
#[test]
fn persistent_damage_at_a_heads_end_is_media_loss() {
    use common::pages::{data_head, kill};
    let ppb = profile::TINY.geometry.pages_per_block();
    let mut checked = 0;
    for rounds in [1u32, 2, 3, 4, 6] {
        let (sim, _) = crashed_store(rounds);
        // The data head's pages since the checkpoint, newest first, in the newest
        // one's block.
        let head: Vec<_> = data_head(&sim).into_iter().rev().collect();
        let newest = head[0].page / ppb;
        let same: Vec<u32> = head
            .iter()
            .take_while(|p| p.page / ppb == newest)
            .map(|p| p.page)
            .collect();
        for k in [1usize, 9, 10, 12] {
            // An older page of the block must stay readable (the walk accepts it).
            if k >= same.len() {
                continue;
            }
            let mut s = sim.clone();
            for &p in &same[..k] {
                kill(&mut s, p);
            }
            let r = Fs::mounted(&mut s).map(drop);
            if k == 1 {
                assert!(r.is_ok(), "{rounds} rounds, newest page damaged: {r:?}");
            } else {
                assert!(
                    matches!(r, Err(oftl::MountError::MediaLoss { .. })),
                    "{rounds} rounds, {k} newest pages damaged: {r:?}"
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 8, "only {checked} cases");
}

/// A run of read errors from a mount's first read, over the superblock copies (four
/// reads each) and on: the mount loads again instead of reporting `Corrupted` (an
/// independent review: eight failing reads said `Corrupted`), on a clean store and on a
/// crashed one, as long as the run ends within the attempts.
#[test]
fn error_run_over_the_superblock_loads_again() {
    let (crashed, want) = crashed_store(1);
    let clean = {
        let mut s = crashed.clone();
        Fs::mounted(&mut s).unwrap().unmount().unwrap();
        s
    };
    for (name, sim) in [("clean", &clean), ("crashed", &crashed)] {
        for len in 1..=20u32 {
            let mut s = sim.clone();
            s.arm(FaultPlan::seeded(len as u64).with_faults(FaultConfig {
                read_fail_at: 1,
                read_fail_len: len,
                ..FaultConfig::default()
            }));
            let mut fs = Fs::mounted(&mut s)
                .unwrap_or_else(|e| panic!("{name}: {len} failing reads: {e:?}"));
            fs.flash_mut().disarm();
            let seen = observe(&mut fs).unwrap();
            matches(&seen, &[&want]).unwrap_or_else(|e| panic!("{name}, {len}: {e}"));
        }
    }
}
