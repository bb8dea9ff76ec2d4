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
//! It found one fault the change neither causes nor fixes, kept here as an open finding.

mod common;

use common::lifecycle::Lifecycle;
use common::*;
use nand_hal::sim::{profile, FaultConfig, FaultPlan};
use oftl::ObjKind;

/// **Finding (open, pre-existing).** A run of read errors long enough to cover every
/// attempt of a crash-recovery mount (400 reads from about the 30th) makes the mount
/// succeed with the acknowledged changes since the checkpoint rolled back (overwrites
/// undone, a created object gone; the log stream keeps its records), and checkpoints
/// that state, so it survives the next remount. Cause not traced: reading the pages
/// taken for torn tails again on the last attempt too (which `recover(false)` skips)
/// and refusing if one reads did not change the result, so the changes are dropped some
/// other way while the run lasts. A cut tears one page, so several unreadable pages at
/// the end of a head are not one cut's work; but a failed program followed by its torn
/// retry also leaves two, a legitimate state, so a rule on their number needs care
/// (DESIGN 5.2). Taking more than 8 unreadable pages in a row for lost (`MediaLoss`)
/// fixed this case, but made the stores the fsck rebuild tests damage (checkpoints and
/// table pages destroyed) report `MediaLoss` too, which changes what `fsck --repair`
/// does with them; not landed.
#[test]
#[ignore = "finding (open): a read-error run through every mount attempt rolls acknowledged changes back as a torn tail"]
fn long_error_run_rolls_back_acknowledged_changes() {
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
    for (k, &id) in ids.iter().enumerate() {
        if k == 2 {
            continue;
        }
        fs.write(id, 1000, &bytes(900 + k as u32, 2500)).unwrap();
        fs.flush(id).unwrap();
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
    sim.arm(FaultPlan::seeded(1030).with_faults(FaultConfig {
        read_fail_at: 30,
        read_fail_len: 400,
        ..FaultConfig::default()
    }));
    // Refusing would be right; mounting must show the acknowledged state.
    if let Ok(mut fs) = Fs::mounted(&mut sim) {
        fs.flash_mut().disarm();
        let seen = observe(&mut fs).unwrap();
        matches(&seen, &[&want]).unwrap();
    }
}
