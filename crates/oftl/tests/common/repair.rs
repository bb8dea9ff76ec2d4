//! Driving a repair through read errors: one repair per (first failing read, run
//! length), each on a fresh copy of the damaged image.

use nand_hal::sim::{CutKind, FaultConfig, FaultPlan};
use oftl::{MountError, SalvageReport};

use super::lifecycle::Lifecycle;

use super::{Fs, Sim};

/// Repairs copies of `damaged` with `len` reads in a row failing from each read of an
/// unfaulted repair on (for every `len` of 1, 2, 4, 8); a repair that fails is run
/// again without faults (it must then succeed). Each repaired store is mounted normally
/// and handed to `check` with a tag naming the case (`name` first) and the repair's
/// report. Problems of the drive itself (a repair failing twice, a store that does not
/// mount afterwards, a NAND-rule breach) go to `problems`. Returns the number of cases.
pub fn with_read_errors(
    damaged: &Sim,
    name: &str,
    problems: &mut Vec<String>,
    mut check: impl FnMut(&str, &SalvageReport, &mut Fs<'_>, &mut Vec<String>),
) -> u32 {
    let reads = {
        let mut t = damaged.clone();
        t.arm(FaultPlan::seeded(3));
        Fs::new(&mut t, oftl::Config::new(), Default::default())
            .mount_damaged(oftl::Damaged::Repair)
            .unwrap();
        t.reads_since_arm()
    };
    let mut runs = 0;
    for len in [1u32, 2, 4, 8] {
        for k in 1..=reads as u32 {
            let mut t = damaged.clone();
            t.arm(FaultPlan::seeded(3).with_faults(FaultConfig {
                read_fail_at: k,
                read_fail_len: len,
                ..FaultConfig::default()
            }));
            let tag = format!("{name} read {k} x{len}");
            runs += 1;
            let repair = |t: &mut Sim| {
                let mut fs = Fs::new(t, oftl::Config::new(), Default::default());
                fs.mount_damaged(oftl::Damaged::Repair)
                    .map(|()| fs.salvage_report().clone())
            };
            let mut report = repair(&mut t);
            t.disarm();
            if report.is_err() {
                report = repair(&mut t);
            }
            let report = match report {
                Ok(r) => r,
                Err(e) => {
                    problems.push(format!("{tag}: repair failed twice: {e:?}"));
                    continue;
                }
            };
            match Fs::mounted(&mut t) {
                Ok(mut fs) => check(&tag, &report, &mut fs, problems),
                Err(e) => problems.push(format!("{tag}: mount after repair {e:?}")),
            }
            if t.counters().misuse != 0 {
                problems.push(format!("{tag}: misuse {:?}", t.last_misuse()));
            }
        }
    }
    runs
}

/// The pages programmed since the image `synced` whose loss makes a normal mount of
/// `crashed` refuse (`MediaLoss`): the cases a repair is for.
pub fn losses_that_refuse_a_mount(synced: &Sim, crashed: &Sim) -> Vec<u32> {
    super::pages::changed_pages(synced, crashed)
        .into_iter()
        .filter(|&v| {
            let mut s = crashed.clone();
            super::pages::kill(&mut s, v);
            matches!(Fs::mounted(&mut s), Err(MountError::MediaLoss { .. }))
        })
        .collect()
}

/// Cuts the power at each program/erase (up to `max_op`, in every cut kind) of a repair
/// of `damaged`; afterwards the store must mount normally, or refuse with `MediaLoss`
/// and repair again, and then `snapshot` must show what it shows after a salvage mount
/// of `damaged` (the state the repair commits). Problems go to `problems` (tagged
/// `name`). Returns the number of cuts that hit.
pub fn with_power_cuts<T: PartialEq + core::fmt::Debug>(
    damaged: &Sim,
    name: &str,
    max_op: u64,
    problems: &mut Vec<String>,
    mut snapshot: impl FnMut(&mut Fs<'_>) -> T,
) -> u32 {
    let salvaged = {
        let mut t = damaged.clone();
        let mut fs = Fs::new(&mut t, oftl::Config::new(), Default::default());
        fs.mount_damaged(oftl::Damaged::Salvage).unwrap();
        snapshot(&mut fs)
    };
    let mut runs = 0;
    for k in 1..max_op {
        let mut fired = false;
        for kind in CutKind::ALL {
            let mut c = damaged.clone();
            c.arm(FaultPlan::seeded(k).with_cut(k, kind));
            if Fs::new(&mut c, oftl::Config::new(), Default::default())
                .mount_damaged(oftl::Damaged::Repair)
                .is_ok()
            {
                continue;
            }
            fired = true;
            runs += 1;
            c.power_on();
            c.disarm();
            let tag = format!("{name} cut {k} {kind:?}");
            if let Err(MountError::MediaLoss { .. }) = Fs::mounted(&mut c) {
                if let Err(e) = Fs::new(&mut c, oftl::Config::new(), Default::default())
                    .mount_damaged(oftl::Damaged::Repair)
                {
                    problems.push(format!("{tag}: repair again {e:?}"));
                    continue;
                }
            }
            match Fs::mounted(&mut c) {
                Ok(mut fs) => {
                    let after = snapshot(&mut fs);
                    if after != salvaged {
                        problems.push(format!(
                            "{tag}: a state other than the salvaged one: {after:?}"
                        ));
                    }
                }
                Err(e) => problems.push(format!("{tag}: mount after the cut {e:?}")),
            }
            if c.counters().misuse != 0 {
                problems.push(format!("{tag}: misuse {:?}", c.last_misuse()));
            }
        }
        if !fired {
            break;
        }
    }
    runs
}
