//! Review of a68c988 (oftl: a head leaves a block after FAILS_PER_BLOCK = 8 failed
//! programs in a row; recovery's per-block `TailRun` refuses a head block ending in more
//! than 8 unreadable pages after its last replayed page).
//!
//! What became of its findings:
//! - a head's newest block lost whole (no page of it reads) mounted the older state
//!   silently. When a page of the replay follows in the walk (here: the log head's
//!   appends in a later window block), more than eight unreadable pages in a row before
//!   it are now `MediaLoss`. When the block *ends* the walk it stays taken for a torn
//!   erase or an older life: a torn erase of a block whose older life filled only its
//!   first pages leaves garbage and then erased pages, the same picture (DESIGN 5.2);
//! - a failed partial program that damages the *whole* open log page (not only the
//!   sectors it was programming) makes the retry's renumbered copy of the page's earlier
//!   sectors a gap: the mount refuses (`MediaLoss`). That fault is outside the HAL's
//!   contract (a failed program harms only the steps it was programming, DESIGN 1.3a);
//!   the test pins the safe outcome, a refusal, never a wrong state.

use crate::common;
use common::lifecycle::Lifecycle;

use std::cell::RefCell;
use std::rc::Rc;

use common::hooked::{arm_cut, program_failed, Hooked, Hooks, SimErr};
use common::outcome::mount_check;
use common::pages::{all_pages, data_head, fresh_newest_data_block, kill, tag_of, Pg};
use common::*;
use nand_hal::sim::{profile, CutKind, FaultPlan};
use nand_hal::{BlockAddr, NandFlash, PageAddr};
use oftl::format::backpointer::PageKind;
use oftl::{Greedy, ObjKind, Oftl, TxOp};

// ---------------------------------------------------------------------------------------
// A scripted flash wrapper: rules fail chosen log or data programs (garbage: the page is
// programmed, then made unreadable for good, and the program reports failure).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rule {
    /// The next fresh log-page program (column 0) fails.
    LogFresh,
    /// The next partial program of a log page (column > 0) fails.
    LogPartial,
    /// The next data-head program (data/meta, not relocated) fails.
    Data,
}

#[derive(Default)]
struct Ctl {
    rules: std::collections::VecDeque<Rule>,
    /// (page, column, len, failed) of every log program.
    log: Vec<(u32, u32, usize, bool)>,
    trace: bool,
    ops: u64,
    cut: Option<(u64, CutKind)>,
    cut_fired: bool,
}

impl Hooks for Ctl {
    fn program(
        &mut self,
        sim: &mut Sim,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), SimErr> {
        self.ops += 1;
        if let Some((at, kind)) = self.cut {
            if self.ops == at {
                arm_cut(sim, kind);
                self.cut_fired = true;
                self.cut = None;
            }
        }
        if self.cut_fired {
            return sim.program(page, column, data, oob);
        }
        let tag = tag_of(sim.capabilities(), data, oob);
        let kind = tag.map(|t| (t.kind, t.relocated));
        let this = match kind {
            Some((PageKind::Log, _)) if column == 0 => Some(Rule::LogFresh),
            Some((PageKind::Log, _)) => Some(Rule::LogPartial),
            Some((PageKind::Data | PageKind::Meta, false)) => Some(Rule::Data),
            _ => None,
        };
        let fail = this.is_some() && self.rules.front().copied() == this;
        if fail {
            self.rules.pop_front();
        }
        if matches!(kind, Some((PageKind::Log, _))) {
            self.log.push((page.0, column, data.len(), fail));
        }
        if self.trace {
            eprintln!(
                "program {} col {column} len {} {kind:?} fail {fail}",
                page.0,
                data.len()
            );
        }
        if fail {
            sim.program(page, column, data, oob)?;
            kill(sim, page.0);
            return Err(program_failed());
        }
        sim.program(page, column, data, oob)
    }
    fn erase(&mut self, sim: &mut Sim, block: BlockAddr) -> Result<(), SimErr> {
        self.ops += 1;
        if self.trace {
            eprintln!("erase {}", block.0);
        }
        sim.erase(block)
    }
}

type Shared = Rc<RefCell<Ctl>>;
type Rig<'a> = Oftl<Hooked<'a, Shared>, 2048, 64, 4, 2, Greedy, 2048>;

/// A store with a log stream whose log head holds one full page (4 one-sector appends)
/// after a checkpoint; then `rules` armed; then appends 4.. (one sector each); the
/// power goes at rest after them (the fs is dropped, no unmount). Returns the sim, the
/// acknowledged state and the log programs after the rules were armed.
/// (page, column, length, failed) of one log program.
type LogProgram = (u32, u32, usize, bool);

fn log_store(rules: &[Rule], appends: u32) -> (Sim, Model, Vec<LogProgram>) {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(3));
    let ctl: Shared = Rc::default();
    let want = {
        let mut fs = Rig::formatted(Hooked::new(&mut sim, ctl.clone()), cfg()).unwrap();
        let id = fs.create(ObjKind::Object).unwrap();
        fs.write(id, 0, &bytes(1, 6000)).unwrap();
        let log = fs.create(ObjKind::Log).unwrap();
        fs.sync().unwrap();
        for r in 0..4u32 {
            fs.log_append(log, &bytes(10 + r, 100)).unwrap();
        }
        {
            let mut c = ctl.borrow_mut();
            c.rules = rules.iter().copied().collect();
            c.trace = std::env::var("TRACE").is_ok();
        }
        for r in 4..4 + appends {
            fs.log_append(log, &bytes(10 + r, 100)).unwrap();
        }
        assert!(
            ctl.borrow().rules.is_empty(),
            "rules left: {:?}",
            ctl.borrow().rules
        );
        observe(&mut fs).unwrap()
    };
    let log = ctl.borrow().log.clone();
    sim.disarm();
    sim.power_on();
    (sim, want, log)
}

/// **Finding O1 (pre-existing; a fault outside the HAL contract).** Four one-sector
/// appends fill log page 112; append 4 opens page 113 (slot 0); append 5 continues
/// page 113 with a partial program, which fails and leaves the *whole* page unreadable.
/// The first retry lands at 114 with append 4's sector copied, then more appends; power
/// cut at rest. The retry renumbers the copied sectors from the head's counter
/// (`log_program` stamps `base + n` over every sector of 0..slot+k), so append 4's
/// original number, only on the dead page, is a gap in the log head's numbers, and the
/// mount says `MediaLoss`. The HAL contract (DESIGN 1.3a) is that a failed or torn
/// program harms only the steps it was programming, which the simulator's failure
/// shapes keep; outside it, the mount must refuse rather than show a wrong state.
#[test]
fn finding_log_open_page_killed_by_failed_partial_program_refused() {
    let (mut sim, want, log) = log_store(&[Rule::LogPartial], 6);
    let o = mount_check(&mut sim, &[&want]);
    assert!(o.refused(), "{o:?}; log programs {log:?}");
}

// ---------------------------------------------------------------------------------------
// Damage the bound does not see.

fn tx_write<F: NandFlash, P: oftl::SpacePolicy>(
    fs: &mut Oftl<F, 2048, 64, 4, 2, P, 2048>,
    id: u32,
    off: u64,
    data: &[u8],
) -> Result<(), oftl::WriteError<F::Error>> {
    fs.transact(&[TxOp::Write {
        obj: id,
        offset: off,
        data,
    }])
}

/// A store: 4 objects and a log stream, a checkpoint, then `after` acknowledged 2-page
/// transactions and `appends` log appends (the log head's first block comes after the
/// data head's). Returns the sim, the acknowledged state, and the pages programmed by
/// the checkpoint.
fn data_store(after: u32, appends: u32) -> (Sim, Model, Vec<u32>) {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(11));
    let mut old = Vec::new();
    let want = {
        let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
        let mut ids = Vec::new();
        for i in 0..4u32 {
            let id = fs.create(ObjKind::Object).unwrap();
            fs.write(id, 0, &bytes(i, 6000)).unwrap();
            ids.push(id);
        }
        let log = fs.create(ObjKind::Log).unwrap();
        fs.sync().unwrap();
        for t in 0..after {
            tx_write(&mut fs, ids[t as usize % 4], 0, &bytes(1000 + t, 4000)).unwrap();
        }
        for a in 0..appends {
            fs.log_append(log, &bytes(5000 + a, 100)).unwrap();
        }
        observe(&mut fs).unwrap()
    };
    if after > 0 {
        let (s0, _, _) = data_store(0, 0);
        old = all_pages(&s0).iter().map(|p| p.page).collect();
    }
    (sim, want, old)
}

/// **Finding O2 (silent rollback; fixed where the walk can tell).** The data head's
/// newest block, started after the checkpoint, holds 9 or more acknowledged pages and
/// then erased pages; all of them are damaged for good (no page of that block reads),
/// and the log head's appends follow in a later window block. `TailRun` counted only
/// once a block showed an accepted page, so recovery took the block for nothing and
/// mounted the older state. No legitimate state looks like this: the writer leaves a
/// block after 8 failed programs in a row, and a torn erase is the cut's last
/// operation, with nothing replayed after it. Now `MediaLoss`. (Without the later
/// appends the block ends the walk, and a torn erase of a block whose older life
/// filled only its first pages looks the same: that case stays open, DESIGN 5.2.)
#[test]
fn finding_newest_block_damaged_whole_is_silent() {
    let ppb = profile::TINY.geometry.pages_per_block();
    let mut cases = 0;
    let mut bad = Vec::new();
    for after in 4..24u32 {
        let (sim, want, old) = data_store(after, 3);
        // The data head's newest block, started after the checkpoint.
        let Some((b, _, in_b)) = fresh_newest_data_block(&sim, &old) else {
            continue;
        };
        if in_b.len() < 9 || in_b.len() >= ppb as usize {
            continue;
        }
        cases += 1;
        let mut s = sim.clone();
        for &p in &in_b {
            kill(&mut s, p);
        }
        let o = mount_check(&mut s, &[&want]);
        if !o.refused() {
            bad.push(format!(
                "after {after}: {} pages of block {b} killed: {o:?}",
                in_b.len()
            ));
        }
    }
    assert!(cases > 0);
    assert!(
        bad.is_empty(),
        "{} of {cases} not refused: {:#?}",
        bad.len(),
        bad
    );
}

/// Probe (holds, and shows the rule works): 9 newest pages killed in a block whose
/// earlier post-checkpoint page still reads: refused.
#[test]
fn probe_newest_nine_after_readable_refused() {
    let ppb = profile::TINY.geometry.pages_per_block();
    let mut cases = 0;
    for after in 4..24u32 {
        let (sim, want, old) = data_store(after, 0);
        let head: Vec<Pg> = data_head(&sim)
            .into_iter()
            .filter(|p| !old.contains(&p.page))
            .collect();
        let Some(last) = head.last() else { continue };
        let b = last.page / ppb;
        let in_b: Vec<u32> = head
            .iter()
            .filter(|p| p.page / ppb == b)
            .map(|p| p.page)
            .collect();
        if in_b.len() < 10 {
            continue;
        }
        cases += 1;
        let mut s = sim.clone();
        for &p in &in_b[in_b.len() - 9..] {
            kill(&mut s, p);
        }
        let o = mount_check(&mut s, &[&want]);
        assert!(o.refused(), "after {after}: {o:?}");
    }
    assert!(cases > 0);
}
