//! The cut sweep the reviews share: a script cut at every `stride`-th program or erase
//! with each cut kind, the part remounted and checked, and with `recovery` each cut
//! recovery mount cut again at every one of its own programs and erases.

use nand_hal::sim::SimError;
use nand_hal::sim::{CutKind, FaultConfig, FaultPlan, TornMode};
use stagefs_core::oracle::power_loss;
use stagefs_core::Error;

use super::{vol, Sim, Vol};

/// Cut runs done and what failed.
#[derive(Default)]
pub struct Report {
    pub runs: u64,
    pub failures: Vec<String>,
}

/// What a script run left: the acknowledged state, the state the call in flight would
/// have made (if one was), the error that ended the run, and the step it ended in.
pub struct Ran<S> {
    pub cur: S,
    pub intent: Option<S>,
    pub err: Option<Error<SimError>>,
    pub steps: usize,
}

/// How to sweep: which cuts, how far apart, whether to cut recoveries too, and whether
/// pages programmed around a cut read unstably.
#[derive(Clone, Copy)]
pub struct Cuts<'a> {
    pub seed: u64,
    pub kinds: &'a [CutKind],
    pub stride: u64,
    pub recovery: bool,
    pub noisy: bool,
}

/// Judges a part after a cut: the acknowledged state and the one in flight.
pub type Check<'c, S> = dyn FnMut(&mut Sim, &S, &Option<S>) -> Result<(), String> + 'c;

/// Runs `run` from `base` (already prepared, power on) cut at every `stride`-th of the
/// `n` programs/erases the uncut run took, with each kind; `check` judges the part after
/// each cut (and after each cut of the recovery mount). `name` leads each failure.
pub fn cut_sweep<S>(
    base: &Sim,
    n: u64,
    cuts: Cuts<'_>,
    name: &str,
    run: &mut dyn FnMut(&mut Sim) -> Ran<S>,
    check: &mut Check<'_, S>,
    rep: &mut Report,
) {
    let faults = FaultConfig {
        unstable_after_cut: cuts.noisy,
        ..Default::default()
    };
    for (ki, &kind) in cuts.kinds.iter().enumerate() {
        let mut at = 1 + (ki as u64 % cuts.stride);
        while at <= n {
            let plan = FaultPlan::seeded(cuts.seed ^ at.wrapping_mul(7919) ^ ki as u64)
                .with_cut(at, kind)
                .with_faults(faults);
            let mut sim = base.clone();
            sim.arm(plan);
            let ran = run(&mut sim);
            rep.runs += 1;
            let tag = format!(
                "{name} seed {}@{at}/{kind:?}{} (cut in step {})",
                cuts.seed,
                if cuts.noisy { "/noisy" } else { "" },
                ran.steps
            );
            if let Some(e) = &ran.err {
                if !power_loss(e) && sim.is_powered() {
                    rep.failures
                        .push(format!("{tag}: error without a cut: {e:?}"));
                    at += cuts.stride;
                    continue;
                }
            }
            sim.cut_power();
            sim.power_on();
            sim.disarm();
            if cuts.recovery && ran.err.is_some() {
                let mut probe = sim.clone();
                probe.arm(FaultPlan::seeded(1));
                {
                    let mut fs = vol(&mut probe);
                    let _ = fs.mount();
                }
                let m = probe.ops_since_arm();
                for k in 1..=m {
                    let mut s2 = sim.clone();
                    s2.arm(FaultPlan::seeded(k).with_cut(k, kind));
                    {
                        let mut fs = vol(&mut s2);
                        let _ = fs.mount();
                    }
                    s2.cut_power();
                    s2.power_on();
                    s2.disarm();
                    rep.runs += 1;
                    if let Err(e) = check(&mut s2, &ran.cur, &ran.intent) {
                        rep.failures
                            .push(format!("{tag} + recovery cut {k}/{m}: {e}"));
                    }
                }
            }
            if let Err(e) = check(&mut sim, &ran.cur, &ran.intent) {
                rep.failures.push(format!("{tag}: {e}"));
            }
            at += cuts.stride;
        }
    }
}

/// The passes a script's sweep runs: every cut kind at every program and erase, noisy
/// random torn cuts, and clean cuts (every `recovery_stride`-th) each followed by every
/// cut of the recovery mount.
#[allow(clippy::too_many_arguments)]
pub fn sweep_passes<S>(
    base: &Sim,
    n: u64,
    seed: u64,
    recovery_stride: u64,
    name: &str,
    run: &mut dyn FnMut(&mut Sim) -> Ran<S>,
    check: &mut Check<'_, S>,
    rep: &mut Report,
) {
    for (kinds, recovery, noisy, stride) in [
        (&CutKind::ALL[..], false, false, 1),
        (&[CutKind::Torn(TornMode::Random)][..], false, true, 1),
        (&[CutKind::Clean][..], true, false, recovery_stride),
    ] {
        let cuts = Cuts {
            seed,
            kinds,
            stride,
            recovery,
            noisy,
        };
        cut_sweep(base, n, cuts, name, run, check, rep);
    }
}

impl Report {
    /// Fails the test with the first `most` failures, if there are any.
    pub fn assert_clean(&self, most: usize) {
        assert!(
            self.failures.is_empty(),
            "{} failures: {:#?}",
            self.failures.len(),
            &self.failures[..self.failures.len().min(most)]
        );
    }
}

/// Does one op of a script.
pub type RunOp<'r, O> = dyn FnMut(&mut Vol<'_>, O) -> Result<(), Error<SimError>> + 'r;

/// Mounts `sim` and runs `script` one op at a time: `apply` gives the state an op
/// leaves, `run_op` does it. Stops at the first error, with the op's state in flight.
pub fn run_script<S: Clone, O: Copy>(
    sim: &mut Sim,
    start: &S,
    script: &[O],
    apply: &dyn Fn(&S, O) -> S,
    run_op: &mut RunOp<'_, O>,
) -> Ran<S> {
    let mut cur = start.clone();
    let mut fs = vol(sim);
    if let Err(e) = fs.mount() {
        return Ran {
            cur,
            intent: None,
            err: Some(e),
            steps: 0,
        };
    }
    for (i, &op) in script.iter().enumerate() {
        let next = apply(&cur, op);
        if let Err(e) = run_op(&mut fs, op) {
            return Ran {
                cur,
                intent: Some(next),
                err: Some(e),
                steps: i,
            };
        }
        cur = next;
    }
    Ran {
        cur,
        intent: None,
        err: None,
        steps: script.len(),
    }
}
