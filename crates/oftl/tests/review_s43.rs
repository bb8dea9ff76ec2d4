//! Independent review s43 (stop 43) of two oftl changes: `relocate_cut_block`
//! moving a cut block's pages owner by owner (tags read twice; nothing found), and
//! `commit_checkpoint` turning the store read-only when every checkpoint attempt fails.
//!
//! Its finding (`s43_finding_mixed_checkpoint_failures_then_corrupted_reads`):
//! checkpoint attempts that alternately fail to program and leave pages that do not
//! read back. (1) A recovery whose closing checkpoint failed replayed again in RAM and
//! wrote cache pages into blocks the failed attempts' index pointed into; an attempt
//! that read well at a later mount then loaded with its index overwritten, and
//! acknowledged pages read `Corrupted` (fixed: the recovery keeps the state it reached,
//! read-only). (2) The same loss from a mount whose restate of the loaded checkpoint
//! failed: its replay in RAM erased the index head's block that checkpoint recorded
//! (taken for the failed attempt's own cache) after a reload fell back to an older one
//! (fixed: only a block the attempt started is erased).
//!
//! Its sweeps of the first change are `powerloss.rs`'s `spread` scenarios.
//!
//! Run: `cargo test --release -p oftl --features alloc --test all review_s43::`

use crate::common;
use common::*;

mod ckfail {
    use super::common::hooked::{arm_cut, ckpt_blocks, Hooked, Hooks, SimErr};
    use super::common::lifecycle::Lifecycle;
    use super::common::{bytes, cfg, FsOn, Sim};
    use nand_hal::sim::{profile, CutKind, FaultPlan, TornMode};
    use nand_hal::{BlockAddr, ErrorKind, NandFlash, PageAddr};
    use oftl::{Greedy, Health, ObjKind, ReadOnlyReason, WriteError};
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::rc::Rc;

    #[derive(Clone, Copy, Debug, PartialEq)]
    pub enum Mode {
        Off,
        /// Every program into a checkpoint block fails (the simulator's shapes).
        FailProgram,
        /// Every page programmed into a checkpoint block reads uncorrectable after.
        Flip,
        /// Every page programmed into a checkpoint block is unstable after.
        Unstable,
        /// Alternate: odd programs fail, even ones read uncorrectable.
        Mixed,
    }

    #[derive(Default)]
    pub struct Ctl {
        pub ckpt: Vec<u32>,
        pub mode: Option<Mode>,
        pub hits: u64,
        pub n: u64,
    }

    pub type Shared = Rc<RefCell<Ctl>>;

    impl Hooks for Ctl {
        fn program(
            &mut self,
            sim: &mut Sim,
            page: PageAddr,
            column: u32,
            data: &[u8],
            oob: &[u8],
        ) -> Result<(), SimErr> {
            let g = sim.geometry();
            let b = g.block_of(page).0;
            let mode = self.mode.unwrap_or(Mode::Off);
            if !self.ckpt.contains(&b) || mode == Mode::Off {
                return sim.program(page, column, data, oob);
            }
            self.hits += 1;
            self.n += 1;
            let m = match mode {
                Mode::Mixed if self.n % 2 == 1 => Mode::FailProgram,
                Mode::Mixed => Mode::Flip,
                m => m,
            };
            match m {
                Mode::FailProgram => {
                    sim.fail_next_program(BlockAddr(b));
                    sim.program(page, column, data, oob)
                }
                Mode::Flip => {
                    let r = sim.program(page, column, data, oob);
                    if r.is_ok() {
                        for s in 0..4 {
                            sim.inject_flips(page, s, 40);
                        }
                    }
                    r
                }
                Mode::Unstable => {
                    let r = sim.program(page, column, data, oob);
                    if r.is_ok() {
                        sim.make_unstable(page);
                    }
                    r
                }
                _ => unreachable!(),
            }
        }
    }

    pub type Rig<'a> = Hooked<'a, Shared>;
    pub type Store<'a> = FsOn<Rig<'a>, Greedy>;

    pub const OBJS: usize = 6;
    pub const PAGES: u64 = 8;
    const P: usize = 2048;

    fn content(o: usize, p: u64, v: u32) -> Vec<u8> {
        bytes((o as u32) * 1_000_003 + (p as u32) * 7919 + v * 31 + 1, P)
    }

    pub use super::common::Rng;

    /// Per page: every version written, oldest first, and the index of the oldest one a
    /// mount may show (the last acknowledged).
    #[derive(Clone, Default)]
    pub struct Oracle {
        pub ids: Vec<u32>,
        pub hist: HashMap<(usize, u64), Vec<u32>>,
        pub acked: HashMap<(usize, u64), usize>,
    }

    impl Oracle {
        fn latest(&self, o: usize, p: u64) -> u32 {
            *self.hist[&(o, p)].last().unwrap()
        }
        fn ack_obj(&mut self, o: usize) {
            for p in 0..PAGES {
                let n = self.hist[&(o, p)].len() - 1;
                self.acked.insert((o, p), n);
            }
        }
        fn ack_all(&mut self) {
            for o in 0..OBJS {
                self.ack_obj(o);
            }
        }
    }

    pub fn is_pl<E: nand_hal::Error>(e: &WriteError<E>) -> bool {
        matches!(e, WriteError::Flash(f) if f.kind() == ErrorKind::PowerLoss)
    }

    /// Reads every page; `exact`: must be the newest version written (a live session:
    /// RAM), else any version from the acknowledged one on.
    pub fn check<F: NandFlash>(
        fs: &mut FsOn<F, Greedy>,
        o: &Oracle,
        exact: bool,
        what: &str,
    ) -> Result<(), String> {
        for (oi, &id) in o.ids.iter().enumerate() {
            for p in 0..PAGES {
                let mut b = vec![0u8; P];
                let n = fs
                    .read(id, p * P as u64, &mut b)
                    .map_err(|e| format!("{what}: read obj {oi} page {p}: {e:?}"))?;
                if n != P {
                    return Err(format!("{what}: obj {oi} page {p}: read {n} bytes"));
                }
                let h = &o.hist[&(oi, p)];
                let from = if exact {
                    h.len() - 1
                } else {
                    o.acked[&(oi, p)]
                };
                if !h[from..].iter().any(|&v| content(oi, p, v) == b) {
                    let which = h.iter().position(|&v| content(oi, p, v) == b);
                    return Err(format!(
                        "{what}: obj {oi} page {p}: holds version index {which:?}, allowed {from}..{} (exact {exact})",
                        h.len()
                    ));
                }
            }
        }
        Ok(())
    }

    pub struct Outcome {
        pub read_only_at: Option<u64>,
        pub odd_errors: Vec<String>,
        pub ops: u64,
    }

    /// One session of random one-page writes, flushes, syncs and collection steps;
    /// the checkpoint failure mode is switched on at op `arm_at`. Stops at the first
    /// refusal (after checking reads and one more write). Power cut `cut_at`
    /// (a program/erase count from the start, torn at random) when given.
    pub fn session(
        fs: &mut Store<'_>,
        ctl: &Shared,
        o: &mut Oracle,
        rng: &mut Rng,
        ops: u64,
        arm_at: u64,
        mode: Mode,
    ) -> Result<Outcome, String> {
        let mut out = Outcome {
            read_only_at: None,
            odd_errors: Vec::new(),
            ops: 0,
        };
        for i in 0..ops {
            if i == arm_at {
                ctl.borrow_mut().mode = Some(mode);
            }
            out.ops = i;
            let r = rng.below(100);
            let res: Result<(), WriteError<_>> = if r < 60 {
                let oi = rng.below(OBJS as u64) as usize;
                let n = 1 + rng.below(3);
                let p0 = rng.below(PAGES - n + 1);
                let mut buf = Vec::new();
                let mut vs = Vec::new();
                for p in p0..p0 + n {
                    let v = o.latest(oi, p) + 1;
                    buf.extend(content(oi, p, v));
                    vs.push((p, v));
                }
                let r = fs.write(o.ids[oi], p0 * P as u64, &buf);
                // Whatever the result, the version may be on flash.
                for (p, v) in vs {
                    o.hist.get_mut(&(oi, p)).unwrap().push(v);
                }
                r
            } else if r < 72 {
                let oi = rng.below(OBJS as u64) as usize;
                let r = fs.flush(o.ids[oi]);
                if r.is_ok() {
                    o.ack_obj(oi);
                }
                r
            } else if r < 82 {
                let r = fs.sync();
                if r.is_ok() {
                    o.ack_all();
                }
                r
            } else {
                fs.gc_step(1 + rng.below(20) as u32).map(|_| ())
            };
            match res {
                Ok(()) => {}
                Err(WriteError::ReadOnly) => {
                    let h = fs.health();
                    if h != Health::ReadOnly(ReadOnlyReason::CheckpointBlocks) {
                        out.odd_errors
                            .push(format!("op {i}: ReadOnly with health {h:?}"));
                    }
                    out.read_only_at = Some(i);
                    // The writes that the refused call made stay in RAM: the newest
                    // versions must read (a write refused before it changed anything
                    // left the one before: allow both for the last write).
                    // Read-only: every later change refused, reads still served.
                    let mut o2 = o.clone();
                    // the last op's versions may or may not be in RAM
                    for (&k, h) in o.hist.iter() {
                        let _ = k;
                        let _ = h;
                    }
                    if let Err(e) = check_ro(fs, o) {
                        return Err(format!("op {i}: read-only session: {e}"));
                    }
                    o2.ids = o.ids.clone();
                    match fs.write(o.ids[0], 0, &content(0, 0, 999_999)) {
                        Err(WriteError::ReadOnly) => {}
                        r => out
                            .odd_errors
                            .push(format!("op {i}: write after read-only: {r:?}")),
                    }
                    match fs.sync() {
                        Err(WriteError::ReadOnly) | Ok(()) => {}
                        r => out
                            .odd_errors
                            .push(format!("op {i}: sync after read-only: {r:?}")),
                    }
                    return Ok(out);
                }
                Err(e) if is_pl(&e) => return Err(format!("op {i}: unexpected power loss")),
                Err(e) => {
                    out.odd_errors
                        .push(format!("op {i}: {e:?} (health {:?})", fs.health()));
                    return Ok(out);
                }
            }
        }
        Ok(out)
    }

    /// In a read-only session: each page reads the newest version or the one before
    /// (the refused call's own write).
    fn check_ro<F: NandFlash>(fs: &mut FsOn<F, Greedy>, o: &Oracle) -> Result<(), String> {
        for (oi, &id) in o.ids.iter().enumerate() {
            for p in 0..PAGES {
                let mut b = vec![0u8; P];
                let n = fs
                    .read(id, p * P as u64, &mut b)
                    .map_err(|e| format!("read obj {oi} page {p}: {e:?}"))?;
                if n != P {
                    return Err(format!("obj {oi} page {p}: read {n} bytes"));
                }
                let h = &o.hist[&(oi, p)];
                let from = h.len().saturating_sub(2).max(o.acked[&(oi, p)]);
                if !h[from..].iter().any(|&v| content(oi, p, v) == b) {
                    let which = h.iter().position(|&v| content(oi, p, v) == b);
                    return Err(format!(
                        "obj {oi} page {p}: holds version index {which:?} of {}, acked {}",
                        h.len(),
                        o.acked[&(oi, p)]
                    ));
                }
            }
        }
        Ok(())
    }

    pub fn setup(sim: &mut Sim, ctl: &Shared) -> Oracle {
        let mut fs = Store::formatted(Hooked::new(sim, ctl.clone()), cfg()).unwrap();
        ctl.borrow_mut().ckpt = ckpt_blocks(fs.blocks());
        let mut o = Oracle::default();
        for oi in 0..OBJS {
            let id = fs.create(ObjKind::Object).unwrap();
            o.ids.push(id);
            let mut buf = Vec::new();
            for p in 0..PAGES {
                buf.extend(content(oi, p, 0));
                o.hist.insert((oi, p), vec![0]);
                o.acked.insert((oi, p), 0);
            }
            fs.write(id, 0, &buf).unwrap();
        }
        fs.sync().unwrap();
        fs.unmount().unwrap();
        o
    }

    /// After the session: mount with the failure mode still on (a worn part: read-only
    /// is fine), then with it off; each must show the acknowledged state; then a write,
    /// a sync, a remount, exact.
    pub fn after(sim: &mut Sim, ctl: &Shared, o: &mut Oracle, label: &str) -> Result<(), String> {
        let mut first = String::new();
        match Store::mounted(Hooked::new(sim, ctl.clone())) {
            Ok(mut fs) => {
                let h = fs.health();
                check(
                    &mut fs,
                    o,
                    false,
                    &format!("{label}: mount with mode on ({h:?})"),
                )?;
            }
            Err(e) => first = format!(" [the mount with mode on failed: {e:?}]"),
        }
        let label = &format!("{label}{first}");
        ctl.borrow_mut().mode = None;
        let mut fs = Store::mounted(Hooked::new(sim, ctl.clone()))
            .map_err(|e| format!("{label}: mount, mode off: {e:?}"))?;
        let h = fs.health();
        check(
            &mut fs,
            o,
            false,
            &format!("{label}: mount with mode off ({h:?})"),
        )?;
        if fs.health() != Health::Writable {
            // Failed programs retire checkpoint blocks for good (grown bad): read-only
            // is then the documented state; anything else is a finding.
            let ck = ctl.borrow().ckpt.clone();
            let bad = ck
                .iter()
                .filter(|&&b| {
                    fs.flash_mut().is_bad(BlockAddr(b)).unwrap_or(false)
                        || fs.blocks()[b as usize].state() == oftl::BlockState::Bad
                })
                .count();
            if fs.health() == Health::ReadOnly(ReadOnlyReason::CheckpointBlocks) && bad >= 2 {
                return Ok(());
            }
            return Err(format!(
                "{label}: healed part mounts as {:?} ({bad} bad checkpoint blocks)",
                fs.health()
            ));
        }
        for oi in 0..OBJS {
            for p in 0..PAGES {
                let v = o.latest(oi, p) + 1;
                fs.write(o.ids[oi], p * P as u64, &content(oi, p, v))
                    .map_err(|e| format!("{label}: rewrite: {e:?}"))?;
                o.hist.get_mut(&(oi, p)).unwrap().push(v);
            }
        }
        fs.sync().map_err(|e| format!("{label}: sync: {e:?}"))?;
        o.ack_all();
        drop(fs);
        let mut fs = Store::mounted(Hooked::new(sim, ctl.clone()))
            .map_err(|e| format!("{label}: last mount: {e:?}"))?;
        check(&mut fs, o, true, &format!("{label}: last mount"))
    }

    pub fn run(
        seed: u64,
        arm_at: u64,
        mode: Mode,
        unmount: bool,
    ) -> Result<(Option<u64>, Vec<String>), String> {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
        let ctl: Shared = Default::default();
        let mut o = setup(&mut sim, &ctl);
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let out = {
            let mut fs = Store::mounted(Hooked::new(&mut sim, ctl.clone()))
                .map_err(|e| format!("first mount: {e:?}"))?;
            let out = session(&mut fs, &ctl, &mut o, &mut rng, 400, arm_at, mode)?;
            if unmount {
                match fs.unmount() {
                    Ok(()) => {}
                    Err(e) if out.read_only_at.is_none() => {
                        if let WriteError::ReadOnly = e {
                        } else {
                            return Err(format!("unmount: {e:?}"));
                        }
                    }
                    Err(e) => return Err(format!("unmount of read-only store: {e:?}")),
                }
            }
            out
        };
        let label = format!("seed {seed} arm {arm_at} {mode:?} unmount {unmount}");
        after(&mut sim, &ctl, &mut o, &label)?;
        Ok((out.read_only_at, out.odd_errors))
    }

    /// A power cut inside the session (the `cut`-th program/erase from the start, torn
    /// at random), then the failure mode on for the recovery's mount.
    pub fn run_cut(seed: u64, cut: u64, mode: Mode) -> Result<Vec<String>, String> {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
        let ctl: Shared = Default::default();
        let mut o = setup(&mut sim, &ctl);
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut odd = Vec::new();
        let mut plan = *sim.plan();
        plan.cut = Some(nand_hal::sim::PowerCut {
            at_op: cut,
            kind: CutKind::Torn(TornMode::Random),
        });
        plan.faults.unstable_after_cut = true;
        sim.arm(plan);
        {
            let mut fs = Store::mounted(Hooked::new(&mut sim, ctl.clone()))
                .map_err(|e| format!("first mount: {e:?}"))?;
            // Run until the cut; the mode is never armed here.
            match session(&mut fs, &ctl, &mut o, &mut rng, 400, u64::MAX, Mode::Off) {
                Ok(out) => odd.extend(out.odd_errors),
                Err(e) if e.contains("power loss") => {}
                Err(e) => return Err(e),
            }
        }
        let cut_happened = !sim.is_powered();
        sim.power_on();
        let mut p2 = *sim.plan();
        p2.cut = None;
        sim.arm(p2);
        if !cut_happened {
            return Ok(odd);
        }
        ctl.borrow_mut().mode = Some(mode);
        let label = format!("seed {seed} cut {cut} {mode:?}");
        after(&mut sim, &ctl, &mut o, &label)?;
        Ok(odd)
    }

    #[allow(dead_code)]
    fn _unused(sim: &mut Sim) {
        arm_cut(sim, CutKind::Clean);
    }
}

/// The session's read-only turn at every point of a random workload, four shapes of
/// checkpoint failure, ended by a cut or an unmount.
#[test]
fn s43_checkpoint_failures_foreground() {
    use ckfail::*;
    let seeds = env("S43_SEEDS", 6u64);
    let mut fails = Vec::new();
    let mut odd = Vec::new();
    let mut ro = 0;
    let mut runs = 0;
    for seed in 1..=seeds {
        for arm_at in (0..300).step_by(env("S43_STEP", 13)) {
            for mode in [Mode::FailProgram, Mode::Flip, Mode::Unstable, Mode::Mixed] {
                for unmount in [false, true] {
                    runs += 1;
                    match run(seed, arm_at, mode, unmount) {
                        Ok((r, o)) => {
                            ro += r.is_some() as u32;
                            for e in o {
                                odd.push(format!(
                                    "seed {seed} arm {arm_at} {mode:?} unmount {unmount}: {e}"
                                ));
                            }
                        }
                        Err(e) => fails.push(e),
                    }
                }
            }
        }
    }
    println!(
        "{runs} runs, {ro} turned read-only, {} odd errors, {} failures",
        odd.len(),
        fails.len()
    );
    for e in odd.iter().take(30) {
        println!("  odd: {e}");
    }
    for e in fails.iter().take(30) {
        println!("  FAIL: {e}");
    }
    assert!(fails.is_empty());
}

/// A cut inside the session, then every checkpoint attempt of the recovery's mount
/// fails (and of the mount after it); then the part heals.
#[test]
fn s43_checkpoint_failures_at_recovery() {
    use ckfail::*;
    let seeds = env("S43_SEEDS", 4u64);
    let mut fails = Vec::new();
    let mut runs = 0;
    for seed in 1..=seeds {
        for cut in (1..400).step_by(env("S43_STEP", 7)) {
            for mode in [Mode::FailProgram, Mode::Flip, Mode::Unstable, Mode::Mixed] {
                runs += 1;
                if let Err(e) = run_cut(seed, cut, mode) {
                    fails.push(e);
                }
            }
        }
    }
    println!("{runs} runs, {} failures", fails.len());
    for e in fails.iter().take(30) {
        println!("  FAIL: {e}");
    }
    assert!(fails.is_empty());
}

/// The finding (see the module docs): checkpoint attempts that alternately fail to
/// program and program pages that never read back; after the part heals, every
/// acknowledged page must read back (it read `Corrupted` in all 7 cases).
#[test]
fn s43_finding_mixed_checkpoint_failures_then_corrupted_reads() {
    use ckfail::*;
    let mut fails = Vec::new();
    for (seed, arm, unmount) in [
        (3u64, 7u64, false),
        (3, 7, true),
        (3, 14, false),
        (3, 14, true),
    ] {
        if let Err(e) = run(seed, arm, Mode::Mixed, unmount) {
            fails.push(e);
        }
    }
    for (seed, cut) in [(3u64, 323u64), (3, 211), (2, 190)] {
        if let Err(e) = run_cut(seed, cut, Mode::Mixed) {
            fails.push(e);
        }
    }
    for e in &fails {
        println!("FAIL: {e}");
    }
    assert!(fails.is_empty(), "{} of 7 failed", fails.len());
}
