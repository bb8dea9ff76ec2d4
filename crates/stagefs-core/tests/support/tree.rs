//! The expected-state model and cut sweep of the scripted reviews (s47, s50): a tree of
//! paths with, for each file, its durable contents and what a cut may leave of the
//! writes since; a script context whose calls change the model as they return; and a
//! sweep that runs a script cut at every program/erase and checks the part after each
//! cut against the acknowledged state and the one in flight.
//!
//! After a cut a file must read as its durable contents, or, when written since its
//! last fsync/close, with each byte the durable one or one of the written states' and
//! a length between the durable one and the largest written; a truncate-opened file
//! reads as its durable contents until its commit. The volume must then take a change
//! (a new file, an fsynced append to every file, a background step) and remount with it.

use std::collections::BTreeMap;

use nand_hal::sim::{profile, CutKind, FaultPlan, SimError, SimNand, TornMode};
use stagefs_core::oracle::{observe, Node};
use stagefs_core::{Error, OpenOptions, SeekFrom, Tuning};

use super::sweep::{self, cut_sweep, Cuts, Ran};
use super::{create, pattern, vol, Sim, Vol};

type E = SimError;

/// A fresh TINY part, its faults seeded.
pub fn fresh(seed: u64) -> Sim {
    SimNand::heap(profile::TINY, FaultPlan::seeded(seed))
}

/// A file outside the model (too large to clone at every step): checked whole after
/// each cut, never written by the scripts.
pub const BALLAST: &str = "/zz_ballast";
pub const BALLAST_LEN: usize = 200 * 1024;

/// The ballast file's contents.
pub fn ballast() -> Vec<u8> {
    pattern(4242, BALLAST_LEN)
}

/// What a file may read as after a cut.
#[derive(Clone, Debug, PartialEq)]
pub enum Alt {
    /// Exactly its durable contents.
    No,
    /// Written since its last fsync/close: each byte the durable one or one of the
    /// written states', a length between the durable one and the largest written.
    Since(Vec<Vec<u8>>),
    /// Truncate-opened and written since: the durable contents only; the Vec is what
    /// the next commit makes durable.
    Hidden(Vec<u8>),
}

#[derive(Clone, Debug, PartialEq)]
pub enum X {
    Dir,
    F(Vec<u8>, Alt),
}

pub type St = BTreeMap<String, X>;

pub fn w_of(x: &X) -> Vec<u8> {
    match x {
        X::F(d, Alt::No) => d.clone(),
        X::F(_, Alt::Since(ws)) => ws.last().unwrap().clone(),
        X::F(_, Alt::Hidden(w)) => w.clone(),
        X::Dir => panic!("a dir"),
    }
}

pub struct Ctx<'f, 'a> {
    pub fs: &'f mut Vol<'a>,
    pub cur: St,
    pub intent: Option<St>,
    pub steps: usize,
}

impl<'f, 'a> Ctx<'f, 'a> {
    pub fn op<T>(
        &mut self,
        call: impl FnOnce(&mut Vol<'a>) -> Result<T, Error<E>>,
        change: impl FnOnce(&mut St),
    ) -> Result<T, Error<E>> {
        let mut next = self.cur.clone();
        change(&mut next);
        self.intent = Some(next);
        let r = call(self.fs)?;
        self.cur = self.intent.take().unwrap();
        self.steps += 1;
        Ok(r)
    }

    pub fn wrote(st: &mut St, p: &str, at: usize, data: &[u8]) {
        let x = st.get_mut(p).unwrap();
        let mut w = w_of(x);
        if w.len() < at + data.len() {
            w.resize(at + data.len(), 0);
        }
        w[at..at + data.len()].copy_from_slice(data);
        let X::F(_, alt) = x else { panic!() };
        match alt {
            Alt::Hidden(h) => *h = w,
            Alt::Since(ws) => ws.push(w),
            Alt::No => *alt = Alt::Since(vec![w]),
        }
    }
    pub fn durable(st: &mut St, p: &str) {
        let x = st.get_mut(p).unwrap();
        let w = w_of(x);
        *x = X::F(w, Alt::No);
    }
    pub fn renamed(st: &mut St, from: &str, to: &str) {
        move_subtree(st, from, to);
    }

    pub fn mkdir_(&mut self, p: &str) -> Result<(), Error<E>> {
        self.op(
            |fs| fs.create_dir(p),
            |st| {
                st.insert(p.to_string(), X::Dir);
            },
        )
    }
    pub fn rmdir_(&mut self, p: &str) -> Result<(), Error<E>> {
        self.op(
            |fs| fs.remove_dir(p),
            |st| {
                st.remove(p);
            },
        )
    }
    pub fn remove_(&mut self, p: &str) -> Result<(), Error<E>> {
        self.op(
            |fs| fs.remove(p),
            |st| {
                st.remove(p);
            },
        )
    }
    pub fn rename_(&mut self, a: &str, b: &str) -> Result<(), Error<E>> {
        self.op(|fs| fs.rename(a, b), |st| Self::renamed(st, a, b))
    }
    pub fn open_(
        &mut self,
        p: &str,
        o: OpenOptions,
        trunc: bool,
    ) -> Result<stagefs_core::File, Error<E>> {
        self.op(
            |fs| fs.open(p, o),
            |st| {
                // A file the open creates is not held back (the crate's guarantees).
                let existed = st.contains_key(p);
                let x = st.entry(p.to_string()).or_insert(X::F(Vec::new(), Alt::No));
                if trunc && existed {
                    let X::F(_, alt) = x else { panic!() };
                    *alt = Alt::Hidden(Vec::new());
                }
            },
        )
    }
    /// Seeks the handle to `at` (unless `append`) and writes `data` there.
    pub fn write_(
        &mut self,
        f: stagefs_core::File,
        p: &str,
        at: usize,
        data: &[u8],
    ) -> Result<(), Error<E>> {
        self.op(
            |fs| {
                fs.seek(f, SeekFrom::Start(at as u64))?;
                let n = fs.write(f, data)?;
                assert_eq!(n, data.len(), "short write");
                let pos = fs.seek(f, SeekFrom::Current(0))?;
                assert_eq!(pos, (at + data.len()) as u64, "model offset");
                Ok(())
            },
            |st| Self::wrote(st, p, at, data),
        )
    }
    pub fn fsync_(&mut self, f: stagefs_core::File, p: &str) -> Result<(), Error<E>> {
        self.op(|fs| fs.fsync(f), |st| Self::durable(st, p))?;
        self.note_staged()
    }
    /// Records how many files have records waiting in the log (the sweeps check that
    /// their scripts do stage).
    pub fn note_staged(&mut self) -> Result<(), Error<E>> {
        let st = self.fs.staging_status()?;
        STAGED.with(|s| {
            let (o, i) = s.get();
            s.set((o.max(st.staged_objects), i.max(st.staged_inline)))
        });
        Ok(())
    }
    pub fn close_(&mut self, f: stagefs_core::File, p: &str) -> Result<(), Error<E>> {
        self.op(|fs| fs.close(f), |st| Self::durable(st, p))?;
        self.note_staged()
    }
    pub fn truncate_(
        &mut self,
        f: stagefs_core::File,
        p: &str,
        size: usize,
    ) -> Result<(), Error<E>> {
        self.op(
            |fs| fs.truncate(f, size as u64),
            |st| {
                let x = st.get_mut(p).unwrap();
                let mut w = w_of(x);
                w.resize(size, 0);
                *x = X::F(w, Alt::No);
            },
        )
    }
    pub fn put_(&mut self, p: &str, data: &[u8]) -> Result<(), Error<E>> {
        let f = self.open_(p, create().truncate(true), true)?;
        self.write_(f, p, 0, data)?;
        self.close_(f, p)
    }
    pub fn step_(&mut self, budget: u32) -> Result<(), Error<E>> {
        self.op(|fs| fs.step(budget).map(|_| ()), |_| {})
    }
    pub fn sync_(&mut self) -> Result<(), Error<E>> {
        self.op(|fs| fs.sync(), |_| {})
    }
    pub fn len_of(&self, p: &str) -> usize {
        w_of(&self.cur[p]).len()
    }
    pub fn no_bypass(&mut self) {
        self.fs.set_tuning(Tuning {
            staging: true,
            bypass: false,
        });
    }
}

pub fn file_ok(c: &[u8], d: &[u8], alt: &Alt) -> bool {
    match alt {
        Alt::No | Alt::Hidden(_) => c == d,
        Alt::Since(ws) => {
            let lo = ws.iter().map(Vec::len).chain([d.len()]).min().unwrap();
            let hi = ws.iter().map(Vec::len).chain([d.len()]).max().unwrap();
            c.len() >= lo
                && c.len() <= hi
                && c.iter()
                    .enumerate()
                    .all(|(i, b)| d.get(i) == Some(b) || ws.iter().any(|w| w.get(i) == Some(b)))
        }
    }
}

pub fn matches(t: &BTreeMap<String, Node>, st: &St) -> Result<(), String> {
    let a: Vec<&String> = t.keys().collect();
    let b: Vec<&String> = st.keys().collect();
    if a != b {
        return Err(format!("paths {a:?} vs expected {b:?}"));
    }
    for (k, x) in st {
        match (x, &t[k]) {
            (X::Dir, Node::Dir) => {}
            (X::F(d, alt), Node::File(c)) => {
                if !file_ok(c, d, alt) {
                    let first = (0..c.len().max(d.len()))
                        .find(|&i| c.get(i) != d.get(i))
                        .unwrap_or(0);
                    return Err(format!(
                        "{k}: {} bytes vs durable {} bytes (first difference at {first}: \
                         read {:?} durable {:?}), alt {}",
                        c.len(),
                        d.len(),
                        c.get(first),
                        d.get(first),
                        match alt {
                            Alt::No => "none".to_string(),
                            Alt::Since(ws) => format!(
                                "written since: {:?}",
                                ws.iter().map(Vec::len).collect::<Vec<_>>()
                            ),
                            Alt::Hidden(w) => format!("hidden {}", w.len()),
                        }
                    ));
                }
            }
            _ => return Err(format!("{k}: kind differs")),
        }
    }
    Ok(())
}

/// Mounts and checks the volume against `cur`/`intent`, sizes included, then that it
/// takes a change (a new file, an fsynced append to every file, a step) and remounts
/// with it.
pub fn check_after(sim: &mut Sim, cur: &St, intent: &Option<St>) -> Result<(), String> {
    let mut fs = vol(sim);
    fs.mount().map_err(|e| format!("mount: {e:?}"))?;
    let mut t = observe(&mut fs).map_err(|e| format!("observe: {e:?}"))?;
    if let Some(n) = t.remove(BALLAST) {
        if n != Node::File(ballast()) {
            return Err("the ballast file changed".into());
        }
    }
    let r1 = matches(&t, cur);
    let r2 = intent.as_ref().map(|i| matches(&t, i));
    match (&r1, &r2) {
        (Ok(()), _) | (_, Some(Ok(()))) => {}
        (Err(a), None) => return Err(format!("state: {a}")),
        (Err(a), Some(Err(b))) => return Err(format!("neither state: before: {a}; after: {b}")),
    }
    for (k, n) in &t {
        if let Node::File(c) = n {
            let m = fs.metadata(k).map_err(|e| format!("metadata {k}: {e:?}"))?;
            if m.size != c.len() as u64 {
                return Err(format!("{k}: metadata size {} vs {} read", m.size, c.len()));
            }
        }
    }
    let probe = pattern(77, 300);
    let r: Result<(), Error<E>> = (|| {
        let f = fs.open(PROBE, create().truncate(true))?;
        fs.write(f, &probe)?;
        fs.close(f)?;
        for (k, n) in &t {
            if let Node::File(_) = n {
                let f = fs.open(k, OpenOptions::new().append(true))?;
                fs.write(f, b"+-")?;
                fs.fsync(f)?;
                fs.close(f)?;
            }
        }
        fs.step(3)?;
        fs.unmount()
    })();
    r.map_err(|e| format!("not writable after the cut: {e:?}"))?;
    fs.mount().map_err(|e| format!("second mount: {e:?}"))?;
    let mut t2 = observe(&mut fs).map_err(|e| format!("observe 2: {e:?}"))?;
    if let Some(n) = t2.remove(BALLAST) {
        if n != Node::File(ballast()) {
            return Err("the ballast file changed after the remount".into());
        }
    }
    if t2.get(PROBE) != Some(&Node::File(probe)) {
        return Err("the probe file was lost across a clean remount".into());
    }
    for (k, n) in &t {
        if let Node::File(c) = n {
            let mut w = c.clone();
            w.extend_from_slice(b"+-");
            if t2.get(k) != Some(&Node::File(w)) {
                return Err(format!("{k}: appended bytes lost across a clean remount"));
            }
        }
    }
    Ok(())
}

/// A rename in a model keyed by path: `from` and every path below it move to `to`
/// (which they replace). Returns the paths moved, old and new.
pub fn move_subtree<V>(
    st: &mut BTreeMap<String, V>,
    from: &str,
    to: &str,
) -> Vec<(String, String)> {
    let below = format!("{from}/");
    let old: Vec<String> = st
        .keys()
        .filter(|k| *k == from || k.starts_with(&below))
        .cloned()
        .collect();
    let moved: Vec<(String, V)> = old
        .iter()
        .map(|k| (k.clone(), st.remove(k).unwrap()))
        .collect();
    st.remove(to);
    let mut paths = Vec::new();
    for (k, v) in moved {
        let new = format!("{to}{}", &k[from.len()..]);
        st.insert(new.clone(), v);
        paths.push((k, new));
    }
    paths
}

/// A file the check writes after a cut (never a script's path).
const PROBE: &str = "/__probe";

/// A script (or a preload): calls on the context, which keeps the model.
pub type Script<'s> = &'s dyn Fn(&mut Ctx<'_, '_>) -> Result<(), Error<E>>;

/// A fresh part, formatted and preloaded (unmounted), and the expected state.
pub fn base(preload: Script<'_>, seed: u64) -> (Sim, St) {
    let mut sim = fresh(seed);
    let st = {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        let mut c = Ctx {
            fs: &mut fs,
            cur: St::new(),
            intent: None,
            steps: 0,
        };
        preload(&mut c).unwrap();
        let st = c.cur.clone();
        fs.unmount().unwrap();
        st
    };
    (sim, st)
}

/// Runs the script; the states and the error that stopped it, and the step it was in.
pub fn run_script(
    sim: &mut Sim,
    script: Script<'_>,
    st: &St,
) -> (St, Option<St>, Option<Error<E>>, usize) {
    let mut fs = vol(sim);
    if let Err(e) = fs.mount() {
        return (st.clone(), None, Some(e), usize::MAX);
    }
    let mut c = Ctx {
        fs: &mut fs,
        cur: st.clone(),
        intent: None,
        steps: 0,
    };
    let moved = c.fs.store().stats().relocated_pages;
    let r = script(&mut c);
    let moved = c.fs.store().stats().relocated_pages.saturating_sub(moved);
    RELOCATED.with(|s| s.set(moved));
    let (cur, intent, steps) = (c.cur.clone(), c.intent.clone(), c.steps);
    match r {
        Ok(()) => (cur, None, None, steps),
        Err(e) => (cur, intent, Some(e), steps),
    }
}

/// The outcome of sweeps: cut runs, failures, and how much the scripts staged.
#[derive(Default)]
pub struct Report {
    pub runs: u64,
    pub failures: Vec<String>,
    /// Most files with staged records seen in the uncut run: (objects, inline).
    pub staged: (usize, usize),
    /// Most pages the store relocated in an uncut run.
    pub relocated: u64,
}

impl Report {
    /// Adds another sweep's outcome.
    pub fn add(&mut self, r: Report) {
        self.runs += r.runs;
        self.failures.extend(r.failures);
        self.staged.0 = self.staged.0.max(r.staged.0);
        self.staged.1 = self.staged.1.max(r.staged.1);
        self.relocated = self.relocated.max(r.relocated);
    }
}

/// The cut kinds of the default sweeps.
pub const KINDS: [CutKind; 3] = [
    CutKind::Clean,
    CutKind::Torn(TornMode::Random),
    CutKind::Torn(TornMode::Prefix),
];

/// Cuts the script at every `stride`-th program/erase with each of `kinds`; with
/// `recovery`, also cuts the first recovery mount at each of its programs/erases.
#[allow(clippy::too_many_arguments)]
pub fn sweep(
    name: &str,
    preload: Script<'_>,
    script: Script<'_>,
    seed: u64,
    kinds: &[CutKind],
    stride: u64,
    recovery: bool,
    noisy: bool,
) -> Report {
    let (base_sim, st) = base(preload, seed);
    let cuts = Cuts {
        seed,
        kinds,
        stride,
        recovery,
        noisy,
    };
    let (rep, n) = sweep_from(&base_sim, &st, script, cuts, name, &mut check_after);
    println!(
        "{name} seed {seed}: {n} programs/erases uncut, most staged (objects, inline) \
         {:?}, {} pages relocated, {} runs, {} failures",
        rep.staged,
        rep.relocated,
        rep.runs,
        rep.failures.len()
    );
    rep
}

/// Runs `script` uncut from `base_sim` (state `st`) and checks the part with `check`,
/// then runs it cut as `cuts` says, checking each: the outcome, and the programs and
/// erases of the uncut run.
pub fn sweep_from(
    base_sim: &Sim,
    st: &St,
    script: Script<'_>,
    cuts: Cuts<'_>,
    name: &str,
    check: &mut sweep::Check<'_, St>,
) -> (Report, u64) {
    let mut sim = base_sim.clone();
    sim.arm(FaultPlan::seeded(cuts.seed));
    STAGED.with(|s| s.set((0, 0)));
    let (cur, _, err, _) = run_script(&mut sim, script, st);
    assert!(err.is_none(), "{name}: uncut run failed: {err:?}");
    let staged = STAGED.with(|s| s.get());
    let relocated = RELOCATED.with(|s| s.get());
    let n = sim.ops_since_arm();
    sim.cut_power();
    sim.power_on();
    sim.disarm();
    let mut rep = Report {
        staged,
        relocated,
        ..Report::default()
    };
    if let Err(e) = check(&mut sim, &cur, &None) {
        rep.failures.push(format!("{name}: uncut: {e}"));
    }
    let mut cut = sweep::Report::default();
    cut_sweep(
        base_sim,
        n,
        cuts,
        name,
        &mut |sim| {
            let (cur, intent, err, steps) = run_script(sim, script, st);
            Ran {
                cur,
                intent,
                err,
                steps,
            }
        },
        check,
        &mut cut,
    );
    rep.runs += cut.runs;
    rep.failures.extend(cut.failures);
    (rep, n)
}

/// [`assert_report`], and fails when the scripts staged no object records (a sweep
/// that tests nothing of the log).
pub fn assert_staging_report(r: Report) {
    assert!(
        r.staged.0 > 0,
        "the scripts staged no object records: the sweep tests nothing of the log"
    );
    assert_report(r);
}

/// Fails on any failure, printing the first few.
pub fn assert_report(r: Report) {
    for f in r.failures.iter().take(12) {
        eprintln!("FAIL {f}");
    }
    assert!(
        r.failures.is_empty(),
        "{} failures of {} runs (first: {})",
        r.failures.len(),
        r.runs,
        r.failures[0]
    );
}

thread_local! {
    static STAGED: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
    static RELOCATED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}
