//! `stagefs torture`: the power-loss harness (`nand_hal::powerloss`) on a chosen
//! workload and part. Each case formats a fresh part, runs a preload, arms a power cut
//! (clean or torn, with unstable bits after it) at a random program or erase of the
//! workload, then remounts and checks the tree against the file-tree oracle
//! (`stagefs_core::oracle`): every acknowledged operation there, the one in flight
//! done or not. Every failure comes with a replay token that names the workload, its
//! size and seed, and the fault plan, so `--replay TOKEN` runs exactly that case.

use nand_hal::powerloss::{self, RecoveryCuts, RecoveryReads, Schedule, Sweep};
use nand_hal::sim::profile::Profile;
use nand_hal::sim::{CutKind, FaultConfig};
use stagefs_core::oracle::{valid, Op, Tree, Workload};

use crate::part::{MAX_BLOCKS, PAGE};
use crate::volume;

/// The workloads `--workload` names.
pub const WORKLOADS: [&str; 5] = ["many", "logging", "varmail", "staging", "mixed"];

/// A torture workload on the CLI's store shape.
pub type Torture = Workload<PAGE, MAX_BLOCKS, 12>;

/// A small deterministic generator (SplitMix64) for the workload's choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A path the workload uses (kept for the process: `Op` holds `&'static str`).
fn path(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// Builds workload `name` with `ops` operations from `seed` on `profile`.
pub fn workload(name: &str, ops: usize, seed: u64, profile: Profile) -> Result<Torture, String> {
    use Op::*;
    let mut rng = Rng(seed);
    let mut preload = Vec::new();
    let mut list = Vec::new();
    match name {
        // Small files rewritten whole (littlefs-benchmarks' `many`).
        "many" => {
            preload.push(Mkdir("/m"));
            let files: Vec<&str> = (0..24).map(|i| path(format!("/m/f{i:02}"))).collect();
            for i in 0..ops {
                let f = files[rng.below(files.len())];
                list.push(Put(f, 1 + rng.below(1024), i as u8));
            }
        }
        // Records appended with an fsync each, to a few logs.
        "logging" => {
            preload.push(Mkdir("/log"));
            let logs: Vec<&str> = (0..4).map(|i| path(format!("/log/l{i}"))).collect();
            for l in &logs {
                preload.push(Put(l, 0, 0));
            }
            for i in 0..ops {
                list.push(Append(logs[rng.below(4)], 16 + rng.below(240), i as u8));
            }
        }
        // Mail delivery: new files written, appended, renamed into place, removed.
        "varmail" => {
            preload.push(Mkdir("/new"));
            preload.push(Mkdir("/cur"));
            let mut live: Vec<&str> = Vec::new();
            let mut n = 0;
            while list.len() < ops {
                let tmp = path(format!("/new/{n}"));
                let cur = path(format!("/cur/{n}"));
                n += 1;
                list.push(Put(tmp, 200 + rng.below(3000), n as u8));
                list.push(Append(tmp, 64 + rng.below(500), n as u8 ^ 0x55));
                list.push(Rename(tmp, cur));
                live.push(cur);
                if live.len() > 12 {
                    let old = live.remove(rng.below(live.len()));
                    list.push(Remove(old));
                }
            }
            list.truncate(ops);
        }
        // Small appends to files with their own objects: staged, patched home.
        "staging" => {
            preload.push(Mkdir("/s"));
            let files: Vec<&str> = (0..12).map(|i| path(format!("/s/f{i:02}"))).collect();
            for (i, f) in files.iter().enumerate() {
                preload.push(Put(f, 600 + 200 * i, i as u8));
            }
            for i in 0..ops {
                let f = files[rng.below(files.len())];
                list.push(match rng.below(20) {
                    0 => Truncate(f, rng.below(4000)),
                    1 => Sync,
                    _ => Append(f, 32 + rng.below(400), i as u8),
                });
            }
        }
        // Any valid operation on a small tree: the namespace under cuts.
        "mixed" => {
            let dirs = ["/a", "/b", "/a/c"];
            let names: Vec<&str> = ["/a", "/b", "/a/c"]
                .iter()
                .flat_map(|d| (0..4).map(move |i| path(format!("{d}/f{i}"))))
                .chain(dirs.iter().copied())
                .collect();
            let mut tree = Tree::new();
            while list.len() < ops {
                let a = names[rng.below(names.len())];
                let b = names[rng.below(names.len())];
                let op = match rng.below(8) {
                    0 => Mkdir(a),
                    1 => Rmdir(a),
                    2 | 3 => Put(a, rng.below(3000), list.len() as u8),
                    4 => Append(a, 1 + rng.below(300), list.len() as u8),
                    5 => Remove(a),
                    6 => Rename(a, b),
                    _ => Truncate(a, rng.below(2500)),
                };
                if valid(&tree, &op) {
                    tree = stagefs_core::oracle::effects(&tree, &op)
                        .pop()
                        .unwrap_or_default();
                    list.push(op);
                }
            }
        }
        _ => {
            return Err(format!(
                "unknown workload {name} (known: {})",
                WORKLOADS.join(", ")
            ))
        }
    }
    Ok(Workload {
        name: format!(
            "{name}-{ops}-{seed:x}-{}",
            profile.name.to_ascii_lowercase()
        ),
        profile,
        config: volume::config_for(&profile),
        preload,
        ops: list,
    })
}

/// The workload a replay token names (`<workload>-<ops>-<seed>-<part>@...`).
pub fn from_token(token: &str) -> Result<Torture, String> {
    let name = token.split('@').next().unwrap_or("");
    let mut it = name.rsplitn(4, '-');
    let (part, seed, ops, wl) = (it.next(), it.next(), it.next(), it.next());
    let bad = || format!("{token}: not a torture replay token");
    let (Some(part), Some(seed), Some(ops), Some(wl)) = (part, seed, ops, wl) else {
        return Err(bad());
    };
    let profile = crate::part::by_name(part)?;
    let ops = ops.parse().map_err(|_| bad())?;
    let seed = u64::from_str_radix(seed, 16).map_err(|_| bad())?;
    workload(wl, ops, seed, profile)
}

/// How a torture run went.
pub struct Outcome {
    /// Cases run (cuts during the workload and during recovery).
    pub runs: u64,
    /// Cuts that fired during the workload.
    pub cuts: u64,
    /// Cuts that fired during recovery.
    pub recovery_cuts: u64,
    /// Program/erase operations of the uncut workload.
    pub workload_ops: u64,
    /// Each failure with its replay token.
    pub failures: Vec<powerloss::Failure>,
}

/// Runs `cuts` random cuts on `w`, in chunks (each chunk one cut kind, in turn),
/// calling `progress` with the cases run so far. `noisy` adds the fault model's
/// background faults (correctable and uncorrectable reads, program and erase
/// failures, factory bad blocks).
pub fn run(
    w: &Torture,
    cuts: u64,
    seed: u64,
    noisy: bool,
    mut progress: impl FnMut(u64),
) -> Outcome {
    let faults = if noisy {
        FaultConfig {
            unstable_after_cut: true,
            factory_bad: 2,
            read_correctable_ppm: 20_000,
            read_uncorrectable_ppm: 500,
            program_fail_ppm: 300,
            erase_fail_ppm: 300,
            ..FaultConfig::default()
        }
    } else {
        FaultConfig {
            unstable_after_cut: true,
            ..FaultConfig::default()
        }
    };
    let mut out = Outcome {
        runs: 0,
        cuts: 0,
        recovery_cuts: 0,
        workload_ops: 0,
        failures: Vec::new(),
    };
    let chunk = (cuts / 40).clamp(1, 50);
    let mut done = 0u64;
    let mut round = 0u64;
    while done < cuts {
        let n = chunk.min(cuts - done);
        let sw = Sweep {
            schedule: Schedule::Random { runs: n },
            kinds: vec![CutKind::ALL[(round % 5) as usize]],
            faults,
            seed: seed.wrapping_mul(1_000_003).wrapping_add(round),
            recovery_cuts: if round % 4 == 3 {
                RecoveryCuts::Sample
            } else {
                RecoveryCuts::None
            },
            recovery_reads: RecoveryReads::None,
            max_failures: 5,
        };
        let r = powerloss::sweep(w, &sw);
        out.runs += r.runs;
        out.cuts += r.cuts;
        out.recovery_cuts += r.recovery_cuts;
        out.workload_ops = out.workload_ops.max(r.workload_ops);
        out.failures.extend(r.failures);
        done += n;
        round += 1;
        progress(done);
        if out.failures.len() >= 5 {
            break;
        }
    }
    out
}

/// Runs the one case `token` names.
pub fn replay(token: &str) -> Result<(), String> {
    let w = from_token(token)?;
    let case = token.split_once('@').map(|(_, c)| c).unwrap_or("");
    powerloss::replay(&w, &format!("{}@{case}", w.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_survives_cuts_on_the_test_part() {
        let p = crate::part::by_name("tiny").unwrap();
        for name in WORKLOADS {
            let w = workload(name, 40, 7, p).unwrap();
            assert_eq!(w.ops.len(), 40, "{name}");
            let o = run(&w, 10, 1, false, |_| {});
            assert!(o.failures.is_empty(), "{name}: {}", o.failures[0]);
            assert!(o.cuts >= 8, "{name}: only {} cuts fired", o.cuts);
            assert!(o.workload_ops > 10, "{name}");
        }
    }

    #[test]
    fn a_token_names_its_workload() {
        let p = crate::part::by_name("tiny").unwrap();
        let w = workload("varmail", 30, 0xbeef, p).unwrap();
        let plan = nand_hal::sim::FaultPlan::seeded(1).with_cut(5, CutKind::ALL[3]);
        let again = from_token(&format!("{}@{plan}", w.name)).unwrap();
        assert_eq!(again.name, w.name);
        assert_eq!(format!("{:?}", again.ops), format!("{:?}", w.ops));
        assert!(from_token("nonsense@x").is_err());
        assert!(workload("nope", 1, 1, p).is_err());
        replay(&format!("{}@{plan}", w.name)).unwrap();
    }
}
