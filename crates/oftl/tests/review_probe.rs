//! Independent review probes: fault shapes the HAL contract allows (failed programs and
//! erases at chosen points, power cuts at chosen points including during recovery,
//! transient read errors in patterns), driven through a `NandFlash` wrapper around the
//! simulator, checked against the crate's documented guarantees.

mod common;

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

use common::{bytes, tiny_raw, Model, Op, Pending, Rng};
use nand_hal::sim::{profile, CutKind, FaultPlan, HeapStorage, PowerCut, Profile, SimNand};
use nand_hal::{
    BlockAddr, Capabilities, Error, ErrorKind, ErrorType, Geometry, NandFlash, PageAddr, ReadReport,
};
use oftl::{Config, Greedy, MountError, ObjKind, Oftl, ReadError, TxOp, WriteError};

type Sim = SimNand<HeapStorage>;
type SimErr = <Sim as ErrorType>::Error;

// ---------------------------------------------------------------------------------------
// The fault-injecting wrapper

type ReadRule = Box<dyn FnMut(u32, u32, u64) -> bool>;

/// Injection state shared between the wrapper and the test.
#[derive(Default)]
struct Inj {
    progs: u64,
    erases: u64,
    ops: u64,
    reads: u64,
    /// 1-based program indices whose program fails (ProgramFailed).
    fail_prog: BTreeSet<u64>,
    /// 1-based erase indices whose erase fails (EraseFailed, block goes bad).
    fail_erase: BTreeSet<u64>,
    /// Power cut at this 1-based program+erase index.
    cut: Option<(u64, CutKind)>,
    /// Reads of a page so far (per page).
    page_reads: HashMap<u32, u32>,
    /// `(page, nth read of it, global read index) -> fail?`
    read_rule: Option<ReadRule>,
    /// Trace of programs: (index, page).
    trace: Vec<(u64, char, u32)>,
    tracing: bool,
    /// Injection (and counting) is off until set (format runs unhindered).
    active: bool,
}

type Shared = Rc<RefCell<Inj>>;

struct Evil<'a> {
    sim: &'a mut Sim,
    inj: Shared,
}

impl ErrorType for Evil<'_> {
    type Error = SimErr;
}

impl Evil<'_> {
    fn fail_read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, SimErr> {
        let saved = *self.sim.plan();
        let mut f = saved;
        f.faults.read_fail_at = 1;
        f.faults.read_fail_len = 1;
        f.cut = None;
        self.sim.arm(f);
        let e = self.sim.read(page, column, data, oob);
        self.sim.arm(saved);
        e
    }
    fn before_op(&mut self) {
        let mut inj = self.inj.borrow_mut();
        if !inj.active {
            return;
        }
        inj.ops += 1;
        if let Some((at, kind)) = inj.cut {
            if at == inj.ops {
                let mut p = *self.sim.plan();
                p.cut = Some(PowerCut { at_op: 1, kind });
                self.sim.arm(p);
            }
        }
    }
}

impl NandFlash for Evil<'_> {
    fn geometry(&self) -> Geometry {
        self.sim.geometry()
    }
    fn capabilities(&self) -> &Capabilities {
        self.sim.capabilities()
    }
    fn read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, SimErr> {
        let fail = {
            let mut inj = self.inj.borrow_mut();
            if !inj.active {
                return self.sim.read(page, column, data, oob);
            }
            inj.reads += 1;
            let g = inj.reads;
            let n = {
                let c = inj.page_reads.entry(page.0).or_insert(0);
                *c += 1;
                *c
            };
            match inj.read_rule.as_mut() {
                Some(r) => r(page.0, n, g),
                None => false,
            }
        };
        if fail && self.sim.is_powered() {
            return self.fail_read(page, column, data, oob);
        }
        self.sim.read(page, column, data, oob)
    }
    fn program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), SimErr> {
        self.before_op();
        if self.inj.borrow().active {
            let mut inj = self.inj.borrow_mut();
            inj.progs += 1;
            let k = inj.progs;
            if inj.tracing {
                inj.trace.push((k, 'p', page.0));
            }
            if inj.fail_prog.contains(&k) {
                let b = self.sim.geometry().block_of(page);
                self.sim.fail_next_program(b);
            }
        }
        self.sim.program(page, column, data, oob)
    }
    fn erase(&mut self, block: BlockAddr) -> Result<(), SimErr> {
        self.before_op();
        if self.inj.borrow().active {
            let mut inj = self.inj.borrow_mut();
            inj.erases += 1;
            let k = inj.erases;
            if inj.tracing {
                inj.trace.push((k, 'e', block.0));
            }
            if inj.fail_erase.contains(&k) {
                self.sim.fail_next_erase(block);
            }
        }
        self.sim.erase(block)
    }
    fn is_bad(&mut self, block: BlockAddr) -> Result<bool, SimErr> {
        self.sim.is_bad(block)
    }
    fn mark_bad(&mut self, block: BlockAddr) -> Result<(), SimErr> {
        self.sim.mark_bad(block)
    }
}

type Fs<'a, const C: usize> = Oftl<Evil<'a>, 2048, 64, C, 2, Greedy>;

fn evil<'a>(sim: &'a mut Sim, inj: &Shared) -> Evil<'a> {
    Evil {
        sim,
        inj: inj.clone(),
    }
}

// ---------------------------------------------------------------------------------------
// Running operations against the model

fn exec<F: NandFlash, const C: usize>(
    fs: &mut Oftl<F, 2048, 64, C, 2, Greedy>,
    d: &Model,
    op: &Op,
) -> Result<Option<u32>, WriteError<F::Error>> {
    match *op {
        Op::Create => return fs.create(ObjKind::Object).map(Some),
        Op::CreateLog => return fs.create(ObjKind::Log).map(Some),
        Op::Write {
            slot,
            off,
            len,
            seed,
        } => {
            if let Some(id) = d.id_of(slot) {
                fs.write(id, off, &bytes(seed, len))?;
            }
        }
        Op::Truncate { slot, size } => {
            if let Some(id) = d.id_of(slot) {
                fs.truncate(id, size)?;
            }
        }
        Op::Delete { slot } => {
            if let Some(id) = d.id_of(slot) {
                fs.delete(id)?;
            }
        }
        Op::SetAttr { slot, v } => {
            if let Some(id) = d.id_of(slot) {
                let mut a = [0u8; oftl::ATTR_LEN];
                a[0] = v;
                fs.set_attrs(id, &a)?;
            }
        }
        Op::Tx {
            a,
            b,
            off,
            len,
            seed,
            size,
        } => {
            if let (Some(ia), Some(ib)) = (d.id_of(a), d.id_of(b)) {
                let da = bytes(seed, len);
                let db = bytes(seed + 1, len / 2);
                fs.transact(&[
                    TxOp::Write {
                        obj: ia,
                        offset: off,
                        data: &da,
                    },
                    TxOp::Write {
                        obj: ib,
                        offset: off / 2,
                        data: &db,
                    },
                    TxOp::Truncate { obj: ia, size },
                ])?;
            }
        }
        Op::Sync => fs.sync()?,
        Op::Flush { slot } => {
            if let Some(id) = d.id_of(slot) {
                fs.flush(id)?;
            }
        }
        Op::Append { slot, len, seed } => {
            if let Some(id) = d.log_of(slot) {
                fs.log_append(id, &bytes(seed, len))?;
            }
        }
        Op::Batch { slot, n, len, seed } => {
            if let Some(id) = d.log_of(slot) {
                let recs: Vec<Vec<u8>> = (0..n as u32).map(|i| bytes(seed + i, len)).collect();
                let refs: Vec<&[u8]> = recs.iter().map(|r| &r[..]).collect();
                fs.log_append_batch(id, &refs)?;
            }
        }
        Op::Trim { slot, n } => {
            if let Some(id) = d.log_of(slot) {
                let live = d.logs[&id].len();
                let mut lsn = fs.log_bounds(id).map_err(|_| WriteError::Corrupted)?.0;
                let mut buf = vec![0u8; 4096];
                for _ in 0..n.min(live) {
                    match fs.log_read(id, lsn, &mut buf) {
                        Ok(Some(r)) => lsn = r.next,
                        _ => return Err(WriteError::Corrupted),
                    }
                }
                fs.log_trim(id, lsn)?;
            }
        }
        Op::Gc { budget } => {
            fs.gc_step(budget)?;
        }
    }
    Ok(None)
}

fn observe<F: NandFlash, const C: usize>(
    fs: &mut Oftl<F, 2048, 64, C, 2, Greedy>,
) -> Result<Model, String> {
    let ids: Vec<u32> = fs
        .objects()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("objects: {e:?}"))?;
    let mut m = Model::new();
    for id in ids {
        if let Ok((start, _)) = fs.log_bounds(id) {
            let mut recs = Vec::new();
            let mut lsn = start;
            let mut buf = vec![0u8; 4096];
            loop {
                match fs.log_read(id, lsn, &mut buf) {
                    Ok(Some(r)) => {
                        recs.push(buf[..r.len].to_vec());
                        lsn = r.next;
                    }
                    Ok(None) => break,
                    Err(e) => return Err(format!("log {id}: {e:?}")),
                }
            }
            m.logs.insert(id, recs);
            continue;
        }
        let size = fs.size(id).map_err(|e| format!("size {id}: {e:?}"))? as usize;
        let mut buf = vec![0u8; size];
        let n = fs
            .read(id, 0, &mut buf)
            .map_err(|e| format!("read {id}: {e:?}"))?;
        if n != size {
            return Err(format!("object {id}: read {n} of {size}"));
        }
        let a = fs.attrs(id).map_err(|e| format!("attrs {id}: {e:?}"))?;
        m.objs.insert(id, (buf, a.user[0]));
    }
    Ok(m)
}

/// Whether `seen` is `before` or (the op in flight applied) `before.apply(op)`.
fn allowed(before: &Pending, op: Option<&Op>, seen: &Model) -> Result<(), String> {
    let e0 = match before.allows(seen, None) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    let Some(op) = op else {
        return Err(e0);
    };
    let mut b = before.clone();
    if matches!(op, Op::Create | Op::CreateLog) {
        let new: Vec<u32> = seen
            .objs
            .keys()
            .chain(seen.logs.keys())
            .filter(|k| !b.durable.objs.contains_key(k) && !b.durable.logs.contains_key(k))
            .copied()
            .collect();
        if new.len() != 1 {
            return Err(e0);
        }
        b.durable.next_id = new[0];
    }
    b.apply(op)
        .allows(seen, None)
        .map_err(|e1| format!("not before ({e0}) nor after ({e1}) {op:?}"))
}

fn is_power_loss<E: Error>(e: &WriteError<E>) -> bool {
    matches!(e, WriteError::Flash(x) if x.kind() == ErrorKind::PowerLoss)
}

/// A random op for a workload (object slots index live objects).
fn gen_op(rng: &mut Rng, logs: bool, big: bool) -> Op {
    let r = rng.below(100);
    let slot = rng.below(8) as usize;
    let maxlen = if big { 3 * 2048 + 500 } else { 2500 };
    match r {
        0..=7 => Op::Create,
        8..=9 if logs => Op::CreateLog,
        10..=39 => Op::Write {
            slot,
            off: rng.below(6000),
            len: 1 + rng.below(maxlen) as usize,
            seed: rng.next() as u32,
        },
        40..=49 => Op::Flush { slot },
        50..=52 => Op::Sync,
        53..=57 => Op::Truncate {
            slot,
            size: rng.below(7000),
        },
        58..=60 => Op::Delete { slot },
        61..=64 => Op::SetAttr {
            slot,
            v: rng.next() as u8,
        },
        65..=69 => Op::Tx {
            a: slot,
            b: rng.below(8) as usize,
            off: rng.below(5000),
            len: 1 + rng.below(4000) as usize,
            seed: rng.next() as u32,
            size: rng.below(9000),
        },
        70..=84 if logs => Op::Append {
            slot,
            len: 1 + rng.below(1900) as usize,
            seed: rng.next() as u32,
        },
        85..=88 if logs => Op::Trim {
            slot,
            n: rng.below(3) as usize,
        },
        _ => Op::Gc {
            budget: 1 + rng.below(8) as u32,
        },
    }
}

/// What a run found.
#[derive(Debug, Default)]
struct Outcome {
    acked: usize,
    remounts: usize,
    problems: Vec<String>,
}

struct Setup {
    profile: Profile,
    cfg: Config,
    seed: u64,
    ops: usize,
    logs: bool,
    big: bool,
}

/// Runs a seeded workload on a fresh device with injection `inj` armed from format on.
/// After every error that is not `NoSpace`/`ReadOnly`, the store is remounted (through the
/// wrapper, faults still armed) and its state checked against the model. Stops at the
/// first problem.
fn run<const C: usize>(s: &Setup, inj: &Shared) -> Outcome {
    let mut out = Outcome::default();
    let mut sim = Sim::heap(s.profile, FaultPlan::seeded(s.seed));
    let mut rng = Rng(s.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut pend = Pending::new(Model::new());
    let mut fs = match Fs::<C>::format(evil(&mut sim, inj), s.cfg) {
        Ok(fs) => Some(fs),
        Err(e) => {
            out.problems.push(format!("format: {e:?}"));
            return out;
        }
    };
    inj.borrow_mut().active = true;
    let mut i = 0;
    while i < s.ops {
        let op = gen_op(&mut rng, s.logs, s.big);
        i += 1;
        let f = fs.as_mut().unwrap();
        let r = exec(f, &pend.durable, &op);
        match r {
            Ok(id) => {
                out.acked += 1;
                if let Some(id) = id {
                    pend.durable.next_id = id;
                }
                pend = pend.apply(&op);
                continue;
            }
            Err(WriteError::NoSpace) => {
                // Never poisons.
                if let Some(id) = pend.durable.objs.keys().next().copied() {
                    if let Err(ReadError::Poisoned) = f.size(id) {
                        out.problems
                            .push(format!("op {i} {op:?}: NoSpace poisoned the handle"));
                        return out;
                    }
                }
                continue;
            }
            Err(WriteError::ReadOnly) => {
                continue;
            }
            Err(e) => {
                let pl = is_power_loss(&e);
                if !pl && !matches!(e, WriteError::Flash(_)) {
                    out.problems
                        .push(format!("op {i} {op:?}: unexpected {e:?}"));
                }
                drop(fs.take());
                if !sim.is_powered() {
                    sim.power_on();
                }
                // Remount (a cut during the mount is retried, up to a bound).
                let mut tries = 0;
                let m = loop {
                    tries += 1;
                    match Fs::<C>::mount(evil(&mut sim, inj)) {
                        Ok(m) => break Some(m),
                        Err(MountError::Flash(x)) if x.kind() == ErrorKind::PowerLoss => {
                            sim.power_on();
                        }
                        Err(e) => {
                            out.problems
                                .push(format!("op {i} {op:?} ({e:?} before): mount: {e:?}"));
                            break None;
                        }
                    }
                    if tries > 20 {
                        out.problems.push("mount keeps failing".into());
                        break None;
                    }
                };
                let Some(mut m) = m else {
                    return out;
                };
                out.remounts += 1;
                match observe(&mut m) {
                    Ok(seen) => {
                        if let Err(msg) = allowed(&pend, Some(&op), &seen) {
                            out.problems.push(format!(
                                "op {i} {op:?} failed ({e:?}), after remount: {msg}"
                            ));
                            return out;
                        }
                        let mut d = seen;
                        d.next_id = pend.durable.next_id;
                        pend = Pending::new(d);
                    }
                    Err(msg) => {
                        out.problems
                            .push(format!("op {i}: observe after remount: {msg}"));
                        return out;
                    }
                }
                fs = Some(m);
            }
        }
    }
    // Final: everything acknowledged reads back now and after a remount.
    let f = fs.as_mut().unwrap();
    match observe(f) {
        Ok(seen) => {
            if seen.objs != pend.full().objs || seen.logs != pend.full().logs {
                out.problems
                    .push("live state differs from the acknowledged one".into());
            }
        }
        Err(e) => out.problems.push(format!("final observe: {e}")),
    }
    drop(fs.take());
    if !sim.is_powered() {
        sim.power_on();
    }
    match Fs::<C>::mount(evil(&mut sim, inj)) {
        Ok(mut m) => match observe(&mut m) {
            Ok(seen) => {
                if let Err(msg) = pend.allows(&seen, None) {
                    out.problems.push(format!("final remount: {msg}"));
                }
            }
            Err(e) => out.problems.push(format!("final remount observe: {e}")),
        },
        Err(e) => out.problems.push(format!("final mount: {e:?}")),
    }
    if let Some(m) = sim.last_misuse() {
        out.problems.push(format!("misuse {m:?}"));
    }
    out
}

fn tiny_cfg(w: u16) -> Config {
    Config {
        window_blocks: w,
        format_id: 9,
        ..Default::default()
    }
}

fn counts<const C: usize>(s: &Setup) -> (u64, u64) {
    let inj: Shared = Rc::default();
    let o = run::<C>(s, &inj);
    assert!(o.problems.is_empty(), "baseline run: {:?}", o.problems);
    let i = inj.borrow();
    (i.progs, i.erases)
}

// ---------------------------------------------------------------------------------------
// Probes (exploration; the minimal reproductions are further down)

fn sweep_erase_failures<const C: usize>(s: &Setup, step: usize) -> Vec<String> {
    let (_, erases) = counts::<C>(s);
    let mut found = Vec::new();
    for k in (1..=erases).step_by(step) {
        let inj: Shared = Rc::default();
        inj.borrow_mut().fail_erase.insert(k);
        let o = run::<C>(s, &inj);
        if !o.problems.is_empty() {
            found.push(format!("erase {k} fails: {:?}", o.problems));
        }
    }
    found
}

fn sweep_program_failures<const C: usize>(s: &Setup, step: usize, run_len: u64) -> Vec<String> {
    let (progs, _) = counts::<C>(s);
    let mut found = Vec::new();
    for k in (1..=progs).step_by(step) {
        let inj: Shared = Rc::default();
        for j in 0..run_len {
            inj.borrow_mut().fail_prog.insert(k + j);
        }
        let o = run::<C>(s, &inj);
        if !o.problems.is_empty() {
            found.push(format!("programs {k}..+{run_len} fail: {:?}", o.problems));
        }
    }
    found
}

fn sweep_cuts<const C: usize>(s: &Setup, step: usize, kinds: &[CutKind]) -> Vec<String> {
    let (progs, erases) = counts::<C>(s);
    println!("{progs} programs, {erases} erases");
    let mut found = Vec::new();
    for k in (1..=progs + erases).step_by(step) {
        for &kind in kinds {
            let inj: Shared = Rc::default();
            inj.borrow_mut().cut = Some((k, kind));
            let o = run::<C>(s, &inj);
            if !o.problems.is_empty() {
                found.push(format!("cut {k} {kind:?}: {:?}", o.problems));
            }
        }
    }
    found
}

fn report(name: &str, found: &[String]) {
    println!("{name}: {} problems", found.len());
    for f in found.iter().take(40) {
        println!("  {f}");
    }
}

#[test]
#[ignore = "exploration"]
fn explore_erase_failures() {
    for seed in 1..4 {
        let s = Setup {
            profile: profile::TINY,
            cfg: tiny_cfg(4),
            seed,
            ops: 600,
            logs: true,
            big: false,
        };
        report(
            &format!("erase tiny w4 seed {seed}"),
            &sweep_erase_failures::<4>(&s, 1),
        );
        let s = Setup {
            profile: tiny_raw(),
            ..s
        };
        report(
            &format!("erase raw w4 seed {seed}"),
            &sweep_erase_failures::<4>(&s, 1),
        );
    }
}

#[test]
#[ignore = "exploration"]
fn explore_program_failures() {
    for seed in 1..3 {
        let s = Setup {
            profile: profile::TINY,
            cfg: tiny_cfg(4),
            seed,
            ops: 300,
            logs: true,
            big: false,
        };
        report(
            &format!("prog tiny w4 seed {seed}"),
            &sweep_program_failures::<4>(&s, 1, 1),
        );
        let s = Setup {
            profile: tiny_raw(),
            ..s
        };
        report(
            &format!("prog raw w4 seed {seed}"),
            &sweep_program_failures::<4>(&s, 1, 1),
        );
    }
}

#[test]
#[ignore = "exploration"]
fn explore_cuts() {
    use nand_hal::sim::TornMode;
    let kinds = [
        CutKind::Clean,
        CutKind::Torn(TornMode::SomeBits),
        CutKind::Torn(TornMode::MostBits),
        CutKind::Torn(TornMode::Prefix),
    ];
    for seed in 1..3 {
        let s = Setup {
            profile: profile::TINY,
            cfg: tiny_cfg(4),
            seed,
            ops: 250,
            logs: true,
            big: true,
        };
        report(
            &format!("cut tiny w4 seed {seed}"),
            &sweep_cuts::<4>(&s, 1, &kinds),
        );
    }
}
