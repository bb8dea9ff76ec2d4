//! Power-loss sweeps over file-layer workloads: after a cut at any program or erase
//! (every cut kind, cuts during recovery, noisy faults), the volume mounts and its
//! whole tree equals a state the operations allow: every namespace operation all or
//! nothing, every closed or fsynced file as acknowledged, the operation in flight
//! either done or not (or, for a file being replaced, its documented intermediate).
//!
//! `STAGEFS_SOAK_RUNS=100000 cargo test --release -p stagefs-core --test all powerloss::soak -- --ignored --nocapture`

use crate::model;

use model::Expected;
use model::{Op, Workload};
use nand_hal::powerloss::{self, CheckError, RecoveryCuts, Scenario, Schedule, Sim, Sweep};
use nand_hal::sim::profile::{self, Profile};
use nand_hal::sim::{CutKind, FaultConfig};
use oftl::{Config, Greedy, Oftl};
use stagefs_core::Fs;

type Files = Workload<2048, 64, 4>;

/// The store configuration of the sweeps (the test part has 16 blocks).
fn config() -> Config {
    Config {
        window_blocks: 6,
        format_id: 5,
        ..Default::default()
    }
}

fn namespace() -> Files {
    use Op::*;
    Files {
        name: "files-namespace".into(),
        config: config(),
        profile: profile::TINY,
        preload: vec![Mkdir("/etc"), Put("/etc/a", 40, 1), Put("/big", 3000, 2)],
        ops: vec![
            Mkdir("/var"),
            Mkdir("/var/log"),
            Put("/var/log/x", 64, 3),
            Append("/var/log/x", 64, 4),
            Put("/etc/b", 200, 5),
            Rename("/etc/b", "/etc/a"),
            Rename("/etc/a", "/var/a"),
            Append("/var/log/x", 300, 6),
            Put("/big", 100, 7),
            Put("/big", 2600, 12),
            Put("/var/y", 2500, 8),
            Rename("/var/y", "/big"),
            Rename("/var/log", "/log"),
            Remove("/log/x"),
            Rmdir("/log"),
            Mkdir("/etc/sub"),
            Rename("/etc", "/var/etc"),
            Put("/var/etc/sub/z", 10, 9),
            Remove("/var/a"),
        ],
    }
}

/// A directory past one bucket: 150 names in one directory, so buckets split while
/// the power is cut, then some removed and renamed.
fn crowded() -> Files {
    use Op::*;
    let names: &'static [&'static str] = Box::leak(
        (0..150)
            .map(|i| &*Box::leak(format!("/d/name-{i:03}").into_boxed_str()))
            .collect::<Vec<&'static str>>()
            .into_boxed_slice(),
    );
    let mut ops = Vec::new();
    for (i, n) in names.iter().enumerate() {
        ops.push(Put(n, 30 + i % 40, i as u8));
    }
    for n in names.iter().step_by(7) {
        ops.push(Remove(n));
    }
    ops.push(Rename(names[1], names[2]));
    ops.push(Rename("/d", "/e"));
    Files {
        name: "files-crowded".into(),
        config: config(),
        profile: profile::TINY,
        preload: vec![Mkdir("/d")],
        ops,
    }
}

/// Small fsyncs staged in the log for ten files with their own objects: more files
/// than the staging list holds (so patches run under the cuts), a truncate and a
/// rename over a file with staged records, a removal, a sync.
fn staging() -> Files {
    use Op::*;
    const NAMES: [&str; 10] = [
        "/s/f0", "/s/f1", "/s/f2", "/s/f3", "/s/f4", "/s/f5", "/s/f6", "/s/f7", "/s/f8", "/s/f9",
    ];
    let mut preload = vec![Mkdir("/s")];
    for (i, n) in NAMES.iter().enumerate() {
        preload.push(Put(n, 600 + 150 * i, i as u8));
    }
    let mut ops = Vec::new();
    for round in 0..3usize {
        for (i, n) in NAMES.iter().enumerate() {
            if round == 2 && i == 4 {
                continue; // renamed over f5 in round 1
            }
            ops.push(Append(
                n,
                64 + 40 * ((i + round) % 3),
                (10 * round + i) as u8,
            ));
        }
        match round {
            0 => {
                // The record right after a version change has the LSN the version
                // names: it must be replayed.
                ops.push(Append(NAMES[3], 64, 98));
                ops.push(Truncate(NAMES[3], 500));
                ops.push(Append(NAMES[3], 64, 99));
            }
            1 => ops.push(Rename(NAMES[4], NAMES[5])),
            _ => ops.push(Sync),
        }
    }
    ops.push(Remove(NAMES[0]));
    ops.push(Append(NAMES[1], 1500, 77));
    Files {
        name: "files-staging".into(),
        config: config(),
        profile: profile::TINY,
        preload,
        ops,
    }
}

/// A workload on a volume moved far along where no test gets by working: its staging
/// log two logical pages before 2^30 (its LSNs, the versions files carry and the
/// replay's comparisons pass 2^32 under the cuts), or its object ids `ids` before the
/// store's bound (they wrap and are reused under the cuts). Moved after the preload,
/// with the hidden `Oftl::log_skip_to` and `Oftl::skip_object_ids_to`.
struct Far {
    w: Files,
    name: &'static str,
    staging: bool,
    ids: Option<u32>,
}

const FAR_LSN: u64 = ((1 << 30) - 2) * 4;

impl Scenario for Far {
    type Oracle = Expected;

    fn name(&self) -> &str {
        self.name
    }

    fn profile(&self) -> Profile {
        self.w.profile
    }

    fn setup(&self, nand: &mut Sim) -> Result<Expected, String> {
        let o = self.w.setup(nand)?;
        let mut fs: model::Vol<'_> = Fs::new(Oftl::new(nand, self.w.config, Greedy::DEFAULT));
        fs.mount().map_err(|e| format!("mount: {e:?}"))?;
        if self.staging {
            let stream = fs.staging_status().map_err(|e| format!("{e:?}"))?.stream;
            fs.sync().map_err(|e| format!("{e:?}"))?;
            fs.store_mut()
                .log_skip_to(stream, FAR_LSN)
                .map_err(|e| format!("{e:?}"))?;
        }
        if let Some(left) = self.ids {
            let max = fs.store().max_object_id();
            fs.store_mut()
                .skip_object_ids_to(max - left)
                .map_err(|e| format!("{e:?}"))?;
        }
        fs.unmount().map_err(|e| format!("unmount: {e:?}"))?;
        Ok(o)
    }

    fn run(&self, nand: &mut Sim, o: &mut Expected) -> Result<(), String> {
        self.w.run(nand, o)
    }

    fn check(&self, nand: &mut Sim, o: &Expected) -> Result<(), CheckError> {
        self.w.check(nand, o)?;
        let mut fs: model::Vol<'_> = Fs::new(Oftl::new(nand, self.w.config, Greedy::DEFAULT));
        let lost = |e: stagefs_core::Error<_>| match model::power_loss(&e) {
            true => CheckError::PowerLoss,
            false => CheckError::from(format!("{e:?}")),
        };
        fs.mount().map_err(lost)?;
        let st = fs.staging_status().map_err(lost)?;
        if self.staging && st.end_lsn < FAR_LSN {
            return Err(format!("the staging log went back to {}", st.end_lsn).into());
        }
        Ok(())
    }
}

fn far_sweeps(far: &Far, seed: u64, min_cuts: u64) {
    let r = powerloss::sweep(far, &Sweep::exhaustive(seed));
    println!("{}: {} runs, {} cuts", far.name(), r.runs, r.cuts);
    r.assert_ok();
    assert!(r.cuts > min_cuts, "{} cuts", r.cuts);
    let mut sw = Sweep::exhaustive(seed + 1);
    sw.schedule = Schedule::Log;
    sw.recovery_cuts = RecoveryCuts::Exhaustive;
    let r = powerloss::sweep(far, &sw);
    println!(
        "{} with recovery cuts: {} runs, {} recovery cuts",
        far.name(),
        r.runs,
        r.recovery_cuts
    );
    r.assert_ok();
}

#[test]
fn staging_log_past_lsn_2_pow_32() {
    let far = Far {
        w: staging(),
        name: "files-staging-far-lsn",
        staging: true,
        ids: None,
    };
    far_sweeps(&far, 7, 200);
}

/// Object ids wrap under the cuts: files and directories created, replaced and removed
/// get ids that removed files had, with staged records and pending records around.
#[test]
fn object_ids_reused_under_the_cuts() {
    for (w, name, left) in [
        (namespace(), "files-namespace-ids-wrap", 10),
        (churn(), "files-churn-ids-wrap", 9),
    ] {
        let far = Far {
            w,
            name,
            staging: false,
            ids: Some(left),
        };
        // The uncut workload wraps the ids.
        let mut nand = Sim::heap(far.profile(), nand_hal::sim::FaultPlan::seeded(1));
        let mut o = far.setup(&mut nand).unwrap();
        {
            let mut fs: model::Vol<'_> =
                Fs::new(Oftl::new(&mut nand, far.w.config, Greedy::DEFAULT));
            fs.mount().unwrap();
            let max = fs.store().max_object_id();
            assert_eq!(
                fs.store().next_object_id(),
                max - left,
                "{name}: the jump held"
            );
            fs.unmount().unwrap();
        }
        far.run(&mut nand, &mut o).unwrap();
        let mut fs: model::Vol<'_> = Fs::new(Oftl::new(&mut nand, far.w.config, Greedy::DEFAULT));
        fs.mount().unwrap();
        let (next, max) = (fs.store().next_object_id(), fs.store().max_object_id());
        assert!(next < max - left, "{name}: ids at {next} of {max}");
        far_sweeps(&far, 9, 150);
    }
}

/// Files with their own objects created, staged, replaced and removed: with the ids
/// near the store's bound, new objects take the ids of files removed while records
/// naming them are still in the staging log.
fn churn() -> Files {
    use Op::*;
    Files {
        name: "files-churn".into(),
        config: config(),
        profile: profile::TINY,
        preload: vec![Mkdir("/s"), Put("/s/a", 600, 1), Put("/s/b", 700, 2)],
        ops: vec![
            Append("/s/a", 64, 3),
            Append("/s/a", 64, 4),
            Put("/s/c", 900, 5),
            Remove("/s/a"),
            Append("/s/b", 64, 6),
            Put("/s/d", 1200, 7),
            Append("/s/d", 64, 8),
            Rename("/s/d", "/s/b"),
            Put("/s/e", 300, 9),
            Append("/s/e", 64, 10),
            Mkdir("/t"),
            Put("/t/f", 2500, 11),
            Truncate("/s/c", 100),
            Remove("/s/e"),
            Put("/t/g", 400, 12),
            Append("/t/g", 64, 13),
            Mkdir("/t/u"),
            Put("/s/c", 800, 14),
        ],
    }
}

fn sweep_ok(s: &Files, sweep: &Sweep, min_cuts: u64) {
    let r = powerloss::sweep(s, sweep);
    println!(
        "{}: {} ops, {} runs, {} cuts, {} recovery cuts",
        s.name, r.workload_ops, r.runs, r.cuts, r.recovery_cuts
    );
    r.assert_ok();
    assert!(r.cuts > min_cuts, "{}: {} cuts", s.name, r.cuts);
}

#[test]
fn exhaustive_namespace() {
    sweep_ok(&namespace(), &Sweep::exhaustive(1), 200);
}

#[test]
fn namespace_with_recovery_cuts_and_noise() {
    let mut sw = Sweep::exhaustive(2);
    sw.schedule = Schedule::Log;
    sw.recovery_cuts = RecoveryCuts::Exhaustive;
    sw.kinds = vec![
        CutKind::Clean,
        CutKind::Torn(nand_hal::sim::TornMode::Random),
    ];
    sweep_ok(&namespace(), &sw, 5);
    let mut sw = Sweep::exhaustive(3);
    sw.schedule = Schedule::Random { runs: 60 };
    sw.faults = FaultConfig {
        unstable_after_cut: true,
        read_correctable_ppm: 20_000,
        program_fail_ppm: 3_000,
        read_uncorrectable_ppm: 2_000,
        ..FaultConfig::default()
    };
    sweep_ok(&namespace(), &sw, 50);
}

#[test]
fn exhaustive_staging() {
    sweep_ok(&staging(), &Sweep::exhaustive(5), 200);
    let mut sw = Sweep::exhaustive(6);
    sw.schedule = Schedule::Log;
    sw.recovery_cuts = RecoveryCuts::Exhaustive;
    sw.kinds = vec![
        CutKind::Clean,
        CutKind::Torn(nand_hal::sim::TornMode::Random),
    ];
    sweep_ok(&staging(), &sw, 5);
}

#[test]
fn crowded_directory_log_schedule() {
    let mut sw = Sweep::exhaustive(4);
    sw.schedule = Schedule::Random { runs: 80 };
    sweep_ok(&crowded(), &sw, 60);
}

/// `STAGEFS_SOAK_RUNS` random cases over both scenarios and three fault sets.
#[test]
#[ignore = "long: run explicitly"]
fn soak() {
    let target: u64 = std::env::var("STAGEFS_SOAK_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let scenarios = [namespace(), crowded(), staging()];
    let faults = [
        FaultConfig {
            unstable_after_cut: true,
            ..FaultConfig::default()
        },
        FaultConfig {
            unstable_after_cut: true,
            factory_bad: 3,
            read_correctable_ppm: 20_000,
            program_fail_ppm: 300,
            erase_fail_ppm: 300,
            ..FaultConfig::default()
        },
        FaultConfig {
            unstable_after_cut: true,
            read_uncorrectable_ppm: 3_000,
            program_fail_ppm: 1_500,
            ..FaultConfig::default()
        },
    ];
    let (mut runs, mut failures) = (0u64, Vec::new());
    let mut round = 0u64;
    while runs < target {
        for s in &scenarios {
            for (fi, f) in faults.iter().enumerate() {
                let sw = Sweep {
                    schedule: Schedule::Random { runs: 40 },
                    kinds: CutKind::ALL.to_vec(),
                    faults: *f,
                    seed: round * 7919 + fi as u64,
                    recovery_cuts: if round % 4 == 0 {
                        RecoveryCuts::Sample
                    } else {
                        RecoveryCuts::None
                    },
                    recovery_reads: powerloss::RecoveryReads::None,
                    max_failures: 5,
                };
                let r = powerloss::sweep(s, &sw);
                runs += r.runs;
                for f in &r.failures {
                    eprintln!("soak failure: {f}");
                }
                failures.extend(r.failures);
            }
        }
        round += 1;
        eprintln!("soak: {runs} runs, {} failures", failures.len());
    }
    println!("soak result: {runs} runs, {} failures", failures.len());
    assert!(failures.is_empty());
}

#[test]
fn replay() {
    let Ok(token) = std::env::var("STAGEFS_REPLAY") else {
        return;
    };
    let scenarios = [namespace(), crowded(), staging()];
    let s = scenarios
        .iter()
        .find(|s| token.split('@').next() == Some(s.name.as_str()))
        .expect("token names a known scenario");
    powerloss::replay(s, &token).unwrap();
}
