//! Checkpoint-block fault hooks and a page-version oracle, shared by the reviews that
//! attack checkpoint numbering, markers and fallbacks (`review_s44`, `review_s45`).
//!
//! Hooks on the checkpoint blocks: programs that fail without landing, programs that
//! land but report failure, pages that read uncorrectable for some mounts and well at
//! later ones (or read erased for a while), erase failures. Every program into a
//! checkpoint block is recorded (a checkpoint's number from its header); the oracle
//! keeps every version written to each page of a few objects and which are
//! acknowledged.

use super::hooked::{ckpt_blocks, program_failed, Hooked, Hooks, SimErr};
use super::lifecycle::Lifecycle;
use super::{bytes, cfg, FsOn, Rng, Sim};
use nand_hal::sim::{profile, FaultPlan};
use nand_hal::{BlockAddr, ErrorKind, NandFlash, PageAddr, ReadReport, StepReport};
use oftl::{Greedy, ObjKind, WriteError};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

/// An `Uncorrectable` error value of the simulator.
pub fn uncorrectable() -> SimErr {
    thread_local! {
        static E: SimErr = {
            let mut s = Sim::heap(profile::TINY, FaultPlan::seeded(1));
            let g = s.geometry();
            let p = g.page(BlockAddr(9), 0);
            s.erase(BlockAddr(9)).unwrap();
            s.program(p, 0, &[0u8; 2048], &[]).unwrap();
            for st in 0..4 {
                s.inject_flips(p, st, 60);
            }
            let mut d = [0u8; 2048];
            s.read(p, 0, &mut d, &mut []).unwrap_err()
        };
    }
    let e = E.with(|e| *e);
    assert_eq!(e.kind(), ErrorKind::Uncorrectable);
    e
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Act {
    Ok,
    /// Reports `ProgramFailed`, nothing lands (the page stays erased).
    NoLand,
    /// Lands whole, reports `ProgramFailed`.
    LandFail,
    /// A power cut tears this program.
    Cut(nand_hal::sim::TornMode),
}

/// How a page reads for a while.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sick {
    /// Uncorrectable while `mount_no < until`.
    Unreadable { until: u32 },
    /// Reads erased (all 0xFF, clean) while `mount_no < until`.
    Erased { until: u32 },
    /// Uncorrectable while `from <= mount_no < until`.
    UnreadableAt { from: u32, until: u32 },
}

#[derive(Clone, Debug)]
pub struct Rec {
    pub seq: u32,
    pub block: u32,
    pub page: u32,
    pub hash: u64,
    pub landed: bool,
    pub act: Act,
    pub mount_no: u32,
    /// When (hooked-operation count).
    pub at: u64,
}

#[derive(Default)]
pub struct Ctl {
    pub ckpt: Vec<u32>,
    /// Actions for the next programs into checkpoint blocks (then `Ok`).
    pub plan: VecDeque<Act>,
    /// What happens to a page the plan lands (LandFail or Ok) while `sick_next` is set.
    pub sick_next: Option<Sick>,
    /// Random faults per checkpoint program: (rng, p_noland, p_landfail, p_sick) in %.
    pub random: Option<(Rng, u64, u64, u64, u32)>,
    pub sick: HashMap<u32, Sick>,
    /// Random faults may make a landed page read erased for a while (else unreadable).
    pub erased_shape: bool,
    pub mount_no: u32,
    pub log: Vec<Rec>,
    pub erases: Vec<(u32, u64)>,
    pub clock: u64,
    /// Erase failures injected on checkpoint blocks: (rng, pct).
    pub erase_fail: Option<(Rng, u64)>,
    pub erase_fails: u32,
    /// Every program into a checkpoint block: (mount, block, page, tag, act, sick).
    pub all: Vec<(u32, u32, u32, String, Act, Option<Sick>)>,
}

impl Ctl {
    /// Some checkpoint-block page does not read at this mount.
    pub fn any_sick(&self) -> bool {
        self.sick
            .keys()
            .any(|&p| self.sick_now(PageAddr(p)).is_some())
    }

    pub fn sick_now(&self, page: PageAddr) -> Option<Sick> {
        match self.sick.get(&page.0) {
            Some(&s @ Sick::Unreadable { until }) if self.mount_no < until => Some(s),
            Some(&s @ Sick::Erased { until }) if self.mount_no < until => Some(s),
            Some(&Sick::UnreadableAt { from, until })
                if from <= self.mount_no && self.mount_no < until =>
            {
                Some(Sick::Unreadable { until })
            }
            _ => None,
        }
    }
}

pub fn hash(d: &[u8]) -> u64 {
    let mut h = 0xcbf29ce484222325u64;
    for &b in d {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
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
        self.clock += 1;
        let g = sim.geometry();
        let b = g.block_of(page).0;
        if !self.ckpt.contains(&b) {
            return sim.program(page, column, data, oob);
        }
        let mut act = self.plan.pop_front().unwrap_or(Act::Ok);
        let mut sick = self.sick_next;
        if let Some((rng, pn, pl, ps, until)) = self.random.as_mut() {
            let r = rng.below(100);
            act = if r < *pn {
                Act::NoLand
            } else if r < *pn + *pl {
                Act::LandFail
            } else {
                Act::Ok
            };
            let r = rng.below(100);
            if r < *ps {
                let u = self.mount_no + 1 + rng.below(*until as u64) as u32;
                sick = Some(if rng.below(4) == 0 && self.erased_shape {
                    Sick::Erased { until: u }
                } else {
                    Sick::Unreadable { until: u }
                });
            } else {
                sick = None;
            }
        }
        let landed = act != Act::NoLand;
        {
            let tag = if column == 0 && data.len() >= 12 && &data[0..4] == b"OCKP" {
                format!("C{}", u32::from_le_bytes(data[8..12].try_into().unwrap()))
            } else {
                format!("?{:02x?}", &data[..4.min(data.len())])
            };
            let mn = self.mount_no;
            self.all
                .push((mn, b, page.0 % g.pages_per_block(), tag, act, sick));
        }
        if column == 0 && data.len() >= 12 && &data[0..4] == b"OCKP" {
            let seq = u32::from_le_bytes(data[8..12].try_into().unwrap());
            self.log.push(Rec {
                seq,
                block: b,
                page: page.0 % g.pages_per_block(),
                hash: hash(&data[12..]),
                landed,
                act,
                mount_no: self.mount_no,
                at: self.clock,
            });
        }
        match act {
            Act::Ok => {
                let r = sim.program(page, column, data, oob);
                if r.is_ok() {
                    if let Some(s) = sick {
                        self.sick.insert(page.0, s);
                    }
                }
                r
            }
            Act::NoLand => Err(program_failed()),
            Act::Cut(m) => {
                super::hooked::arm_cut(sim, nand_hal::sim::CutKind::Torn(m));
                sim.program(page, column, data, oob)
            }
            Act::LandFail => {
                sim.program(page, column, data, oob)?;
                if let Some(s) = sick {
                    self.sick.insert(page.0, s);
                }
                Err(program_failed())
            }
        }
    }

    fn erase(&mut self, sim: &mut Sim, block: BlockAddr) -> Result<(), SimErr> {
        self.clock += 1;
        let g = sim.geometry();
        if self.ckpt.contains(&block.0) {
            if let Some((rng, pct)) = self.erase_fail.as_mut() {
                if rng.below(100) < *pct {
                    self.erase_fails += 1;
                    sim.fail_next_erase(block);
                }
            }
        }
        let r = sim.erase(block);
        if r.is_ok() {
            self.erases.push((block.0, self.clock));
            for i in 0..g.pages_per_block() {
                self.sick.remove(&g.page(block, i).0);
            }
        }
        r
    }

    fn read(
        &mut self,
        sim: &mut Sim,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, SimErr> {
        match self.sick_now(page) {
            Some(Sick::Unreadable { .. } | Sick::UnreadableAt { .. }) => Err(uncorrectable()),
            Some(Sick::Erased { .. }) => {
                let r = sim.read(page, column, data, oob)?;
                data.fill(0xFF);
                oob.fill(0xFF);
                Ok(r)
            }
            None => sim.read(page, column, data, oob),
        }
    }

    fn read_steps(
        &mut self,
        sim: &mut Sim,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<StepReport, SimErr> {
        match self.sick_now(page) {
            Some(Sick::Unreadable { .. } | Sick::UnreadableAt { .. }) => Err(uncorrectable()),
            Some(Sick::Erased { .. }) => {
                let r = sim.read_steps(page, data, oob)?;
                data.fill(0xFF);
                oob.fill(0xFF);
                Ok(r)
            }
            None => sim.read_steps(page, data, oob),
        }
    }
}

pub type Shared = Rc<RefCell<Ctl>>;
pub type Rig<'a> = Hooked<'a, Shared>;
pub type Store<'a> = FsOn<Rig<'a>, Greedy>;

pub const OBJS: usize = 4;
pub const PAGES: u64 = 8;
pub const P: usize = 2048;

pub fn content(o: usize, p: u64, v: u32) -> Vec<u8> {
    bytes((o as u32) * 1_000_003 + (p as u32) * 7919 + v * 31 + 1, P)
}

#[derive(Clone, Default)]
pub struct Oracle {
    pub ids: Vec<u32>,
    pub hist: HashMap<(usize, u64), Vec<u32>>,
    pub acked: HashMap<(usize, u64), usize>,
    pub next_v: u32,
}

impl Oracle {
    pub fn fresh(&mut self) -> u32 {
        self.next_v += 1;
        self.next_v
    }
    pub fn ack_all(&mut self) {
        for o in 0..OBJS {
            for p in 0..PAGES {
                let n = self.hist[&(o, p)].len() - 1;
                self.acked.insert((o, p), n);
            }
        }
    }
}

/// After a mount: checks, then drops the versions the store does not show (lost
/// unacknowledged writes) so a later sync acknowledges only what is there.
pub fn settle<F: NandFlash>(
    fs: &mut FsOn<F, Greedy>,
    o: &mut Oracle,
    what: &str,
) -> Result<(), String> {
    check(fs, o, what)?;
    if !matches!(fs.health(), oftl::Health::Writable) {
        // A read-only mount makes nothing durable: what it shows is not acknowledged
        // (a later mount may show a newer unacknowledged write instead).
        return Ok(());
    }
    for (oi, &id) in o.ids.clone().iter().enumerate() {
        for p in 0..PAGES {
            let mut b = vec![0u8; P];
            fs.read(id, p * P as u64, &mut b)
                .map_err(|e| format!("{what}: read obj {oi} page {p}: {e:?}"))?;
            let h = o.hist.get_mut(&(oi, p)).unwrap();
            let at = h.iter().rposition(|&v| content(oi, p, v) == b).unwrap();
            h.truncate(at + 1);
            o.acked.insert((oi, p), at);
        }
    }
    Ok(())
}

pub fn check<F: NandFlash>(fs: &mut FsOn<F, Greedy>, o: &Oracle, what: &str) -> Result<(), String> {
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
            let from = o.acked[&(oi, p)];
            if !h[from..].iter().any(|&v| content(oi, p, v) == b) {
                let which = h.iter().position(|&v| content(oi, p, v) == b);
                let mut other = None;
                'o: for o2 in 0..OBJS {
                    for p2 in 0..PAGES {
                        for v in 0..=o.next_v {
                            if content(o2, p2, v) == b {
                                other = Some((o2, p2, v));
                                break 'o;
                            }
                        }
                    }
                }
                let ff = b.iter().all(|&x| x == 0xff);
                let zero = b.iter().all(|&x| x == 0);
                return Err(format!(
                    "{what}: obj {oi} page {p}: holds version index {which:?}, acked {from} of {} (hist {h:?}; other {other:?} ff {ff} zero {zero} first {:?})",
                    h.len(), &b[..8]
                ));
            }
        }
    }
    Ok(())
}

/// Writes `n` random pages then syncs; returns the sync's result.
pub fn burst(
    fs: &mut Store<'_>,
    o: &mut Oracle,
    rng: &mut Rng,
    n: u32,
) -> Result<(), WriteError<SimErr>> {
    for _ in 0..n {
        let oi = rng.below(OBJS as u64) as usize;
        let p = rng.below(PAGES);
        let v = o.fresh();
        let r = fs.write(o.ids[oi], p * P as u64, &content(oi, p, v));
        o.hist.get_mut(&(oi, p)).unwrap().push(v);
        r?;
    }
    fs.sync()?;
    o.ack_all();
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

/// Checkpoint numbers programmed twice with different contents (landed ones only),
/// both on flash at once (no erase of the first one's block between the two).
pub fn reused(log: &[Rec], erases: &[(u32, u64)]) -> Vec<String> {
    let mut by: HashMap<u32, Vec<&Rec>> = HashMap::new();
    for r in log.iter().filter(|r| r.landed) {
        by.entry(r.seq).or_default().push(r);
    }
    let mut out = Vec::new();
    let mut keys: Vec<_> = by.keys().copied().collect();
    keys.sort();
    for k in keys {
        let v = &by[&k];
        let coexist = v.iter().enumerate().any(|(i, a)| {
            v[i + 1..].iter().any(|b| {
                a.hash != b.hash
                    && !erases
                        .iter()
                        .any(|&(blk, at)| blk == a.block && at > a.at && at < b.at)
            })
        });
        if coexist {
            out.push(format!(
                "seq {k}: {}",
                v.iter()
                    .map(|r| format!("blk {} pg {} (mount {})", r.block, r.page, r.mount_no))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    out
}

pub fn ctl_log(ctl: &Shared) -> Vec<(u32, u32, u32, Act, u32)> {
    ctl.borrow()
        .log
        .iter()
        .map(|r| (r.seq, r.block, r.page, r.act, r.mount_no))
        .collect()
}
