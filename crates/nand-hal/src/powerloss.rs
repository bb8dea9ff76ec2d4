//! The power-loss harness: run a scenario with the power cut at every program/erase,
//! on a log schedule or at random, optionally with other faults and with second cuts
//! during recovery; after each cut restore power, let the scenario remount, and check
//! its oracle. Every failure carries a replay token.
//!
//! A [`Scenario`] has three phases:
//!
//! 1. [`Scenario::setup`] brings a factory-fresh device into the starting state
//!    (format, preload) with no faults armed and returns the oracle;
//! 2. [`Scenario::run`] is the workload; the harness arms the [`FaultPlan`] (its power
//!    cut counts program/erase operations from here) and the scenario records in the
//!    oracle what the layer under test acknowledged, and what was in flight;
//! 3. [`Scenario::check`] runs after power returns: remount (recover) and compare with the
//!    oracle. Recovery may itself be cut ([`RecoveryCuts`]): the check then returns
//!    [`CheckError::PowerLoss`], the harness restores power and checks again.
//!
//! After every run the harness also requires that the layer under test broke no device
//! rule (`Counters::misuse == 0`).
//!
//! The replay token of a failure is `<scenario>@<fault plan>` with an optional
//! `@rc=<n>.<kind>` for the recovery cut; [`replay`] runs exactly that case again.

use std::fmt;
use std::string::{String, ToString};
use std::vec::Vec;

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::sim::profile::Profile;
use crate::sim::{CutKind, FaultConfig, FaultPlan, HeapStorage, PowerCut, SimNand};

/// The device type scenarios run on.
pub type Sim = SimNand<HeapStorage>;

/// Why a check did not pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckError {
    /// The device lost power during the check (a recovery cut); the harness restores
    /// power and checks again.
    PowerLoss,
    /// The state after recovery breaks the oracle.
    Violation(String),
}

impl<T: fmt::Display> From<T> for CheckError {
    fn from(msg: T) -> Self {
        CheckError::Violation(msg.to_string())
    }
}

/// A workload with an oracle, written so it can be cut anywhere and checked after.
pub trait Scenario {
    /// What the scenario knows about acknowledged and in-flight operations.
    type Oracle;

    /// A short name (part of the replay token; no `@`).
    fn name(&self) -> &str;

    /// The simulated part.
    fn profile(&self) -> Profile;

    /// Brings a factory-fresh device into the starting state. Runs with no faults armed.
    fn setup(&self, nand: &mut Sim) -> Result<Self::Oracle, String>;

    /// The workload. Returns `Err` as soon as an operation fails (after a power cut every
    /// operation fails with `PowerLoss`). An error while the device still has power is a
    /// scenario failure.
    fn run(&self, nand: &mut Sim, oracle: &mut Self::Oracle) -> Result<(), String>;

    /// Remounts and compares with the oracle. When an operation reports `PowerLoss`,
    /// return [`CheckError::PowerLoss`].
    fn check(&self, nand: &mut Sim, oracle: &Self::Oracle) -> Result<(), CheckError>;
}

/// Which cut points a sweep tries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Every program/erase of the workload: 1, 2, ..., N.
    Exhaustive,
    /// 1, 2, 4, 8, ... up to N.
    Log,
    /// `runs` cut points drawn uniformly from 1..=N, each with its own plan seed.
    Random {
        /// How many runs.
        runs: u64,
    },
    /// Exactly these cut points.
    List(Vec<u64>),
}

/// Cuts during recovery.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RecoveryCuts {
    /// None.
    #[default]
    None,
    /// For each workload cut, also cut recovery at its first, middle and last
    /// program/erase.
    Sample,
    /// For each workload cut, also cut recovery at every one of its program/erases.
    Exhaustive,
}

/// Transient read errors during recovery: for each workload cut, the check (mount,
/// recovery, oracle) also runs with one of its reads, and `len - 1` after it, failing
/// as uncorrectable ([`FaultConfig::read_fail_at`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RecoveryReads {
    /// None.
    #[default]
    None,
    /// The check's 1st, 2nd, 3rd, middle and last read (the superblock, the checkpoint
    /// search, the scan).
    Sample {
        /// Consecutive reads that fail.
        len: u32,
    },
    /// Every read of the check.
    Exhaustive {
        /// Consecutive reads that fail.
        len: u32,
    },
}

/// A sweep's settings.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// Cut points.
    pub schedule: Schedule,
    /// What each cut does; every cut point runs once per kind.
    pub kinds: Vec<CutKind>,
    /// Other faults, armed together with the cut.
    pub faults: FaultConfig,
    /// Base seed (factory bad blocks, fault draws, random schedule).
    pub seed: u64,
    /// Cuts during recovery.
    pub recovery_cuts: RecoveryCuts,
    /// Transient read errors during recovery.
    pub recovery_reads: RecoveryReads,
    /// Stop after this many failures (0 = never).
    pub max_failures: usize,
}

impl Sweep {
    /// Exhaustive clean and torn cuts, no other faults.
    pub fn exhaustive(seed: u64) -> Self {
        Sweep {
            schedule: Schedule::Exhaustive,
            kinds: CutKind::ALL.to_vec(),
            faults: FaultConfig {
                unstable_after_cut: true,
                ..FaultConfig::default()
            },
            seed,
            recovery_cuts: RecoveryCuts::None,
            recovery_reads: RecoveryReads::None,
            max_failures: 10,
        }
    }
}

/// One failed case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// Replay token (see [`replay`]).
    pub token: String,
    /// What went wrong.
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}\n  replay: {}", self.message, self.token)
    }
}

/// The outcome of a sweep.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Program/erase operations of the uncut workload (the exhaustive range).
    pub workload_ops: u64,
    /// Cases run (workload cuts plus recovery cuts).
    pub runs: u64,
    /// Cases whose cut fired during the workload.
    pub cuts: u64,
    /// Recovery cuts that fired.
    pub recovery_cuts: u64,
    /// Cases run with a read of the check failing.
    pub recovery_reads: u64,
    /// Failures.
    pub failures: Vec<Failure>,
}

impl Report {
    /// Panics with every failure's message and replay token (for tests).
    pub fn assert_ok(&self) {
        if !self.failures.is_empty() {
            let mut msg = format!(
                "{} of {} power-loss cases failed:\n",
                self.failures.len(),
                self.runs
            );
            for f in &self.failures {
                msg.push_str(&format!("- {f}\n"));
            }
            panic!("{msg}");
        }
    }
}

struct Case {
    plan: FaultPlan,
    recovery_cut: Option<PowerCut>,
    /// The check's read that fails first, and how many in a row.
    recovery_read: Option<(u32, u32)>,
}

impl Case {
    fn token(&self, scenario: &str) -> String {
        let mut t = format!("{scenario}@{}", self.plan);
        if let Some(rc) = self.recovery_cut {
            let kind = FaultPlan::seeded(0).with_cut(rc.at_op, rc.kind).to_string();
            // Reuse the plan's cut syntax: "...:cut=<n>.<kind>" -> "rc=<n>.<kind>".
            if let Some(c) = kind.split(":cut=").nth(1) {
                t.push_str(&format!("@rc={c}"));
            }
        }
        if let Some((at, len)) = self.recovery_read {
            t.push_str(&format!("@rf={at}x{len}"));
        }
        t
    }
}

enum Outcome {
    Pass {
        cut_fired: bool,
        recovery_cut_fired: bool,
    },
    Fail(String),
}

fn factory(scenario: &impl Scenario, plan: &FaultPlan) -> Sim {
    let factory = FaultPlan {
        seed: plan.seed,
        cut: None,
        faults: FaultConfig {
            factory_bad: plan.faults.factory_bad,
            endurance: plan.faults.endurance,
            ..FaultConfig::default()
        },
    };
    SimNand::heap(scenario.profile(), factory)
}

/// Runs setup and the workload under `plan`; returns the device after power is
/// restored, the oracle and whether the cut fired.
fn run_workload<S: Scenario>(
    scenario: &S,
    plan: FaultPlan,
) -> Result<(Sim, S::Oracle, bool), String> {
    let mut nand = factory(scenario, &plan);
    let mut oracle = scenario
        .setup(&mut nand)
        .map_err(|e| format!("setup failed: {e}"))?;
    nand.arm(plan);
    let r = scenario.run(&mut nand, &mut oracle);
    let fired = !nand.is_powered();
    if let Err(e) = r {
        if !fired {
            return Err(format!("workload failed with power on: {e}"));
        }
    }
    if let Some(m) = nand.last_misuse() {
        return Err(format!("workload broke a device rule: {m:?}"));
    }
    nand.power_on();
    // Faults stay armed through recovery; the cut has been spent.
    nand.arm(FaultPlan { cut: None, ..plan });
    Ok((nand, oracle, fired))
}

fn run_case<S: Scenario>(scenario: &S, case: &Case) -> Outcome {
    let (mut nand, oracle, fired) = match run_workload(scenario, case.plan) {
        Ok(x) => x,
        Err(e) => return Outcome::Fail(e),
    };
    let mut recovery_cut_fired = false;
    if let Some((at, len)) = case.recovery_read {
        // The check's reads count from here: the aimed one fails (once, or `len`
        // times in a row), as a transient error.
        nand.arm(FaultPlan {
            cut: None,
            faults: FaultConfig {
                read_fail_at: at,
                read_fail_len: len,
                ..case.plan.faults
            },
            ..case.plan
        });
    }
    if let Some(rc) = case.recovery_cut {
        nand.arm(FaultPlan {
            cut: Some(rc),
            ..case.plan
        });
        match scenario.check(&mut nand, &oracle) {
            Err(CheckError::PowerLoss) => recovery_cut_fired = true,
            Err(CheckError::Violation(v)) => {
                return Outcome::Fail(format!("check before the recovery cut fired: {v}"));
            }
            Ok(()) => {}
        }
        nand.power_on();
        nand.arm(FaultPlan {
            cut: None,
            ..case.plan
        });
    }
    match scenario.check(&mut nand, &oracle) {
        Ok(()) => {}
        Err(CheckError::PowerLoss) => {
            return Outcome::Fail("check lost power without a cut".into())
        }
        Err(CheckError::Violation(v)) => return Outcome::Fail(v),
    }
    if let Some(m) = nand.last_misuse() {
        return Outcome::Fail(format!("recovery broke a device rule: {m:?}"));
    }
    Outcome::Pass {
        cut_fired: fired,
        recovery_cut_fired,
    }
}

/// Program/erase operations and reads the check (recovery) performs on the state left
/// by `plan`.
fn recovery_ops<S: Scenario>(scenario: &S, plan: FaultPlan) -> (u64, u64) {
    match run_workload(scenario, plan) {
        Ok((mut nand, oracle, _)) => {
            let (ops, reads) = (nand.ops_since_arm(), nand.reads_since_arm());
            let _ = scenario.check(&mut nand, &oracle);
            (nand.ops_since_arm() - ops, nand.reads_since_arm() - reads)
        }
        Err(_) => (0, 0),
    }
}

/// Program/erase operations of the uncut workload.
pub fn workload_ops<S: Scenario>(
    scenario: &S,
    seed: u64,
    faults: FaultConfig,
) -> Result<u64, String> {
    let plan = FaultPlan {
        seed,
        cut: None,
        faults,
    };
    let mut nand = factory(scenario, &plan);
    let mut oracle = scenario.setup(&mut nand)?;
    nand.arm(plan);
    scenario.run(&mut nand, &mut oracle)?;
    Ok(nand.ops_since_arm())
}

/// Runs a sweep and reports every failure.
pub fn sweep<S: Scenario>(scenario: &S, sweep: &Sweep) -> Report {
    let mut report = Report::default();
    let n = match workload_ops(scenario, sweep.seed, sweep.faults) {
        Ok(n) => n,
        Err(e) => {
            let plan = FaultPlan {
                seed: sweep.seed,
                cut: None,
                faults: sweep.faults,
            };
            let case = Case {
                plan,
                recovery_cut: None,
                recovery_read: None,
            };
            report.failures.push(Failure {
                token: case.token(scenario.name()),
                message: format!("uncut workload failed: {e}"),
            });
            return report;
        }
    };
    report.workload_ops = n;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(sweep.seed ^ 0x5357_4545_5000);
    let points: Vec<(u64, u64)> = match &sweep.schedule {
        Schedule::Exhaustive => (1..=n).map(|k| (k, sweep.seed)).collect(),
        Schedule::Log => {
            let mut v = Vec::new();
            let mut k = 1;
            while k <= n {
                v.push((k, sweep.seed));
                k *= 2;
            }
            v
        }
        Schedule::Random { runs } => (0..*runs)
            .map(|_| (1 + rng.next_u64() % n.max(1), rng.next_u64()))
            .collect(),
        Schedule::List(l) => l.iter().map(|&k| (k, sweep.seed)).collect(),
    };
    'outer: for (k, seed) in points {
        for &kind in &sweep.kinds {
            let plan = FaultPlan {
                seed,
                cut: Some(PowerCut { at_op: k, kind }),
                faults: sweep.faults,
            };
            let mut cases = vec![Case {
                plan,
                recovery_cut: None,
                recovery_read: None,
            }];
            let needs_counts = sweep.recovery_cuts != RecoveryCuts::None
                || sweep.recovery_reads != RecoveryReads::None;
            let (r, reads) = if needs_counts {
                recovery_ops(scenario, plan)
            } else {
                (0, 0)
            };
            if sweep.recovery_cuts != RecoveryCuts::None {
                let mut at: Vec<u64> = match sweep.recovery_cuts {
                    RecoveryCuts::Sample => vec![1, r.div_ceil(2), r],
                    RecoveryCuts::Exhaustive => (1..=r).collect(),
                    RecoveryCuts::None => vec![],
                };
                at.retain(|&j| j >= 1 && j <= r);
                at.dedup();
                for j in at {
                    cases.push(Case {
                        plan,
                        recovery_cut: Some(PowerCut { at_op: j, kind }),
                        recovery_read: None,
                    });
                }
            }
            let (mut at, len): (Vec<u64>, u32) = match sweep.recovery_reads {
                RecoveryReads::None => (vec![], 0),
                RecoveryReads::Sample { len } => (vec![1, 2, 3, reads.div_ceil(2), reads], len),
                RecoveryReads::Exhaustive { len } => ((1..=reads).collect(), len),
            };
            at.retain(|&j| j >= 1 && j <= reads);
            at.dedup();
            for j in at {
                cases.push(Case {
                    plan,
                    recovery_cut: None,
                    recovery_read: Some((j as u32, len)),
                });
            }
            for case in cases {
                report.runs += 1;
                report.recovery_reads += case.recovery_read.is_some() as u64;
                match run_case(scenario, &case) {
                    Outcome::Pass {
                        cut_fired,
                        recovery_cut_fired,
                    } => {
                        report.cuts += cut_fired as u64;
                        report.recovery_cuts += recovery_cut_fired as u64;
                    }
                    Outcome::Fail(message) => {
                        report.failures.push(Failure {
                            token: case.token(scenario.name()),
                            message,
                        });
                        if sweep.max_failures != 0 && report.failures.len() >= sweep.max_failures {
                            break 'outer;
                        }
                    }
                }
            }
        }
    }
    report
}

/// Runs the single case named by a replay token. `Ok` if it passes now.
pub fn replay<S: Scenario>(scenario: &S, token: &str) -> Result<(), String> {
    let mut parts = token.trim().split('@');
    let name = parts.next().unwrap_or_default();
    if name != scenario.name() {
        return Err(format!(
            "token is for scenario {name:?}, not {:?}",
            scenario.name()
        ));
    }
    let plan: FaultPlan = parts
        .next()
        .ok_or("token has no fault plan")?
        .parse()
        .map_err(|e| format!("{e}"))?;
    let mut recovery_cut = None;
    let mut recovery_read = None;
    for part in parts {
        if let Some(spec) = part.strip_prefix("rc=") {
            let p: FaultPlan = format!("ns1:seed=0:cut={spec}")
                .parse()
                .map_err(|e| format!("{e}"))?;
            recovery_cut = p.cut;
        } else if let Some(spec) = part.strip_prefix("rf=") {
            let (at, len) = spec.split_once('x').ok_or("malformed recovery read")?;
            recovery_read = Some((
                at.parse().map_err(|_| "malformed recovery read")?,
                len.parse().map_err(|_| "malformed recovery read")?,
            ));
        } else {
            return Err(format!("unknown token part {part:?}"));
        }
    }
    match run_case(
        scenario,
        &Case {
            plan,
            recovery_cut,
            recovery_read,
        },
    ) {
        Outcome::Pass { .. } => Ok(()),
        Outcome::Fail(m) => Err(m),
    }
}
