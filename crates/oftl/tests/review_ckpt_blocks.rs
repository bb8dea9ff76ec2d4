//! An independent review's probes for the checkpoint-block count (format version 7),
//! the mount's checkpoint search by first pages and the recovery-work bound. Its three
//! findings (the first search took the three blocks with the newest first pages, which
//! failed or cut checkpoint attempts could all be, leaving out the durable checkpoint or
//! the spare: `Corrupted` mounts with every synced write on flash) are regression tests
//! here; the search now goes down the blocks by first page until one past the newest
//! block with a marker (`ckpt_search_order`). Faults are injected through a thin `NandFlash`
//! wrapper around the simulator: failed programs and power cuts at chosen checkpoint
//! pages, everything else the simulator's own.

use crate::common;
use common::lifecycle::Lifecycle;

use std::cell::RefCell;
use std::rc::Rc;

use common::hooked::{arm_cut, ckpt_blocks, Hooked, Hooks, SimErr};
use common::pages::all_pages;
use common::{bytes, cfg, Sim};
use nand_hal::sim::{profile, CutKind, FaultConfig, FaultPlan, Profile, TornMode};
use nand_hal::{BlockAddr, ErrorKind, NandFlash, PageAddr};
use oftl::format::backpointer::PageKind;
use oftl::{Config, MountError, ObjKind, Oftl, WriteError};

// ---------------------------------------------------------------------------------------
// The wrapper

/// What happens to one program into a checkpoint block.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Act {
    Pass,
    /// The program fails (`ProgramFailed`, the simulator's own failure shapes).
    Fail,
    /// The power goes during this program.
    Cut(CutKind),
}

/// `(block, page in block, whole page?) -> what happens`; asked only for checkpoint
/// blocks.
type ProgRule = Box<dyn FnMut(u32, u32, bool) -> Act>;

#[derive(Default)]
struct Ctl {
    ckpt: Vec<u32>,
    rule: Option<ProgRule>,
    /// Programs the rule acted on: (page, act).
    hits: Vec<(u32, Act)>,
    /// Erases of checkpoint blocks seen (any time).
    ckpt_erases: u64,
    /// Cut at the next erase of a checkpoint block (this kind).
    cut_ckpt_erase: Option<CutKind>,
}

type Shared = Rc<RefCell<Ctl>>;

type Rig<'a> = Hooked<'a, Shared>;

fn rig<'a>(sim: &'a mut Sim, ctl: &Shared) -> Rig<'a> {
    Hooked::new(sim, ctl.clone())
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
        let g = sim.geometry();
        let b = g.block_of(page).0;
        let pib = g.page_in_block(page);
        let full = data.len() == g.page_size() as usize;
        let act = if self.ckpt.contains(&b) {
            match self.rule.as_mut() {
                Some(r) => r(b, pib, full),
                None => Act::Pass,
            }
        } else {
            Act::Pass
        };
        if act != Act::Pass {
            self.hits.push((page.0, act));
        }
        match act {
            Act::Pass => {}
            Act::Fail => sim.fail_next_program(BlockAddr(b)),
            Act::Cut(kind) => arm_cut(sim, kind),
        }
        sim.program(page, column, data, oob)
    }
    fn erase(&mut self, sim: &mut Sim, block: BlockAddr) -> Result<(), SimErr> {
        if self.ckpt.contains(&block.0) {
            self.ckpt_erases += 1;
            if let Some(kind) = self.cut_ckpt_erase.take() {
                arm_cut(sim, kind);
            }
        }
        sim.erase(block)
    }
}

// ---------------------------------------------------------------------------------------
// Parts and stores

/// TINY (16 pages of 2 KiB per block) with 1,024 blocks: a checkpoint streams the
/// block table over three pages (page 0 of a checkpoint block is not its commit page),
/// and a default format picks 16 checkpoint blocks.
fn big_tiny() -> Profile {
    profile::TINY.with_blocks_per_die(1024)
}

type Big<'a> = Oftl<Rig<'a>, 2048, 1024, 4, 2>;

fn is_power_loss<E: nand_hal::Error>(e: &WriteError<E>) -> bool {
    matches!(e, WriteError::Flash(f) if f.kind() == ErrorKind::PowerLoss)
}

/// Checkpoint pages per checkpoint on this store (from the newest one on flash).
fn newest_ckpt_pages(sim: &Sim) -> (u32, u32) {
    let pages = all_pages(sim);
    let newest = pages
        .iter()
        .filter(|p| p.kind == PageKind::Checkpoint && p.commit)
        .max_by_key(|p| p.seq)
        .unwrap();
    (newest.seq, newest.lpn + 1)
}

/// Formats `n` checkpoint blocks (0: the part's default) on the 1,024-block part,
/// creates one object and syncs `rounds` times (each a write and a checkpoint), so
/// every checkpoint block has been used and the rotation wrapped. Returns the object
/// and the seed of its last synced contents.
fn warmed_big(sim: &mut Sim, ctl: &Shared, n: u8, rounds: u32) -> (u32, u32) {
    let mut fs = Big::formatted(rig(sim, ctl), cfg().checkpoint_blocks(n)).unwrap();
    ctl.borrow_mut().ckpt = ckpt_blocks(fs.blocks());
    let id = fs.create(ObjKind::Object).unwrap();
    for i in 0..rounds {
        fs.write(id, 0, &bytes(i, 300)).unwrap();
        fs.sync().unwrap();
    }
    fs.unmount().unwrap();
    (id, rounds - 1)
}

fn read_300<F: NandFlash, const B: usize>(fs: &mut Oftl<F, 2048, B, 4, 2>, id: u32) -> Vec<u8> {
    let mut b = vec![0u8; 300];
    let n = fs.read(id, 0, &mut b).unwrap();
    b.truncate(n);
    b
}

/// After warm-up: mount, then write and sync until a sync fails with a power cut the
/// rule makes (the rule is set before the mount). Returns the seed of the last synced
/// write and of the one in flight.
fn write_until_cut(
    sim: &mut Sim,
    ctl: &Shared,
    id: u32,
    mut last: u32,
    rule: ProgRule,
) -> (u32, u32) {
    ctl.borrow_mut().rule = Some(rule);
    let mut fs = Big::mounted(rig(sim, ctl)).unwrap();
    for i in 1000..1400u32 {
        fs.write(id, 0, &bytes(i, 300)).unwrap();
        match fs.sync() {
            Ok(()) => last = i,
            Err(e) if is_power_loss(&e) => {
                drop(fs);
                ctl.borrow_mut().rule = None;
                sim.power_on();
                return (last, i);
            }
            Err(e) => panic!("sync {i}: {e:?}"),
        }
    }
    panic!("the rule never cut the power");
}

// ---------------------------------------------------------------------------------------
// Finding 1: failed checkpoint attempts push the durable checkpoint out of the search

/// Two program failures in a row inside one checkpoint (each retried in the next
/// checkpoint block, as `commit_checkpoint` does) and a power cut during the third
/// attempt: three checkpoint blocks now start with a newer checkpoint page 0 than the
/// block holding the durable (marked) checkpoint, none of them complete. The mount
/// searched only those three and failed with `Corrupted` (a review finding); searching
/// past them finds the durable checkpoint, which must load: every synced write is on
/// flash.
fn two_failed_attempts_and_a_cut(n: u8) {
    {
        let mut sim = Sim::heap(big_tiny(), FaultPlan::seeded(1));
        let ctl: Shared = Default::default();
        let (id, last) = warmed_big(&mut sim, &ctl, n, 90);
        let (_, pages) = newest_ckpt_pages(&sim);
        assert_eq!(pages, 3, "three-page checkpoints on this part");
        // Page 1 of a fresh checkpoint block (the second page of the first checkpoint
        // after a switch): fail, fail, cut.
        let mut k = 0;
        let (last, _) = write_until_cut(
            &mut sim,
            &ctl,
            id,
            last,
            Box::new(move |_, pib, full| {
                if pib != 1 || !full {
                    return Act::Pass;
                }
                k += 1;
                match k {
                    1 | 2 => Act::Fail,
                    _ => Act::Cut(CutKind::Clean),
                }
            }),
        );
        let hits = ctl.borrow().hits.clone();
        println!("n={n}: hits {hits:?}");
        let mut fs = match Big::mounted(rig(&mut sim, &ctl)) {
            Ok(fs) => fs,
            Err(e) => panic!("n={n}: mount after two failed checkpoint programs and a cut: {e:?}"),
        };
        let got = read_300(&mut fs, id);
        assert!(
            got == bytes(last, 300) || got == bytes(last + 1, 300),
            "n={n}: synced data lost"
        );
    }
}

/// The same without any power cut: all four attempts of one checkpoint fail to
/// program (`CKPT_ATTEMPTS` = 3 retries, each in the next block), the sync reports the
/// failure and the handle is poisoned. Every synced write is still on flash under the
/// durable checkpoint; the next mount searched only the three blocks of the last three
/// failed attempts and failed with `Corrupted` (a review finding).
#[test]
fn four_failed_attempts_leave_store_unmountable() {
    let mut sim = Sim::heap(big_tiny(), FaultPlan::seeded(2));
    let ctl: Shared = Default::default();
    let (id, mut last) = warmed_big(&mut sim, &ctl, 16, 90);
    ctl.borrow_mut().rule = Some(Box::new(|_, pib, full| {
        if pib == 1 && full {
            Act::Fail
        } else {
            Act::Pass
        }
    }));
    {
        let mut fs = Big::mounted(rig(&mut sim, &ctl)).unwrap();
        let mut failed = false;
        for i in 1000..1400u32 {
            fs.write(id, 0, &bytes(i, 300)).unwrap();
            match fs.sync() {
                Ok(()) => last = i,
                Err(e) => {
                    println!("sync {i}: {e:?}");
                    failed = true;
                    break;
                }
            }
        }
        assert!(failed);
    }
    ctl.borrow_mut().rule = None;
    println!("hits {:?}", ctl.borrow().hits);
    let mut fs = match Big::mounted(rig(&mut sim, &ctl)) {
        Ok(fs) => fs,
        Err(e) => panic!("mount after four failed checkpoint programs: {e:?}"),
    };
    let got = read_300(&mut fs, id);
    assert!(got == bytes(last, 300) || got == bytes(last + 1, 300));
}

/// Control for the two above: one failed attempt and a cut (two newer blocks) mount.
#[test]
fn one_failed_attempt_and_a_cut_mount() {
    let mut sim = Sim::heap(big_tiny(), FaultPlan::seeded(1));
    let ctl: Shared = Default::default();
    let (id, last) = warmed_big(&mut sim, &ctl, 16, 90);
    let mut k = 0;
    let (last, _) = write_until_cut(
        &mut sim,
        &ctl,
        id,
        last,
        Box::new(move |_, pib, full| {
            if pib != 1 || !full {
                return Act::Pass;
            }
            k += 1;
            match k {
                1 => Act::Fail,
                _ => Act::Cut(CutKind::Clean),
            }
        }),
    );
    let mut fs = Big::mounted(rig(&mut sim, &ctl)).unwrap();
    let got = read_300(&mut fs, id);
    assert!(got == bytes(last, 300) || got == bytes(last + 1, 300));
}

// ---------------------------------------------------------------------------------------
// Finding 2: the spare checkpoint is not searched

/// The spare (`CkptPos::spare`): a mount that loads an unmarked checkpoint (its commit
/// page torn by the cut, read well this once) keeps the block of the checkpoint before
/// it until a checkpoint commits. Here the first checkpoint of a fresh block, c_X, is
/// cut while its commit page programs (all bits but one land); the recovering mount
/// loads it, and its closing checkpoint fails once (retried in the next block) and is
/// cut in the second. The torn commit page then no longer reads (simulated with
/// injected bit errors: what `unstable_after_cut` does at random). The next mount must
/// fall back to the spare, the marked checkpoint before c_X, as every synced write is
/// there; it searched only the two failed attempts' blocks and c_X's (their first pages
/// are newer), never the spare's, and failed with `Corrupted` (a review finding).
fn spare_lost(n: u8) {
    {
        let mut sim = Sim::heap(big_tiny(), FaultPlan::seeded(3));
        let ctl: Shared = Default::default();
        let (id, last) = warmed_big(&mut sim, &ctl, n, 90);
        // Cut (most bits) at the commit page of the first checkpoint of a fresh block.
        let (last, _) = write_until_cut(
            &mut sim,
            &ctl,
            id,
            last,
            Box::new(|_, pib, full| {
                if pib == 2 && full {
                    Act::Cut(CutKind::Torn(TornMode::MostBits))
                } else {
                    Act::Pass
                }
            }),
        );
        let torn = ctl.borrow().hits[0].0;
        ctl.borrow_mut().hits.clear();
        // The recovering mount: its closing checkpoint fails once and is cut in the
        // next block.
        let mut k = 0;
        ctl.borrow_mut().rule = Some(Box::new(move |_, pib, full| {
            if pib != 1 || !full {
                return Act::Pass;
            }
            k += 1;
            match k {
                1 => Act::Fail,
                _ => Act::Cut(CutKind::Clean),
            }
        }));
        match Big::mounted(rig(&mut sim, &ctl)) {
            Err(MountError::Flash(e)) if e.kind() == ErrorKind::PowerLoss => {}
            Err(e) => panic!("n={n}: recovering mount: {e:?}"),
            Ok(_) => panic!("n={n}: the recovering mount was not cut"),
        }
        ctl.borrow_mut().rule = None;
        println!(
            "n={n}: torn commit page {torn}, recovery hits {:?}",
            ctl.borrow().hits
        );
        sim.power_on();
        // The torn commit page reads badly from now on.
        for s in 0..4 {
            sim.inject_flips(PageAddr(torn), s, 8);
        }
        let mut fs = match Big::mounted(rig(&mut sim, &ctl)) {
            Ok(fs) => fs,
            Err(e) => panic!("n={n}: mount that must fall back to the spare: {e:?}"),
        };
        let got = read_300(&mut fs, id);
        assert!(
            got == bytes(last, 300) || got == bytes(last + 1, 300),
            "n={n}: synced data lost"
        );
    }
}

#[test]
fn two_failed_attempts_and_a_cut_hide_the_durable_checkpoint_16() {
    two_failed_attempts_and_a_cut(16);
}

/// The same with four checkpoint blocks (the layout of every version 5 and 6 image):
/// the three failed attempts take the other three blocks.
#[test]
fn two_failed_attempts_and_a_cut_hide_the_durable_checkpoint_4() {
    two_failed_attempts_and_a_cut(4);
}

#[test]
fn spare_checkpoint_not_searched_16() {
    spare_lost(16);
}

#[test]
fn spare_checkpoint_not_searched_4() {
    spare_lost(4);
}

// ---------------------------------------------------------------------------------------
// Power-cut sweeps on stores with many checkpoint blocks (what held)

type Store<'a, const B: usize> = Oftl<Rig<'a>, 2048, B, 4, 2>;

/// One round of the sweep workload: a write to one of three objects, then a sync.
fn round(i: u32) -> (usize, u64, Vec<u8>) {
    let obj = (i % 3) as usize;
    let off = (i as u64 * 7919) % 20_000;
    let len = 1500 + (i as usize * 4099) % 24_000;
    (obj, off, bytes(i, len))
}

fn apply(state: &mut [Vec<u8>], i: u32) {
    let (o, off, d) = round(i);
    let end = off as usize + d.len();
    if state[o].len() < end {
        state[o].resize(end, 0);
    }
    state[o][off as usize..end].copy_from_slice(&d);
}

struct SweepCfg {
    profile: Profile,
    config: Config,
    warm: u32,
    rounds: u32,
    kinds: Vec<CutKind>,
    unstable: bool,
    /// Every how many ops to cut (1: every op).
    stride: u64,
    /// Also cut the recovering mount at these ops (1-based).
    recovery_cuts: Vec<u64>,
    /// Random program/erase failure rates (ppm).
    pfail: u32,
    efail: u32,
}

/// Runs the workload's rounds `from..to` on a mounted store; returns the rounds
/// completed (synced) before a power cut, or `None` if none came.
fn run_rounds<const B: usize>(
    sim: &mut Sim,
    ctl: &Shared,
    ids: &[u32],
    from: u32,
    to: u32,
) -> Result<Option<u32>, String> {
    let mut fs = match Store::<B>::mounted(rig(sim, ctl)) {
        Ok(fs) => fs,
        Err(MountError::Flash(e)) if e.kind() == ErrorKind::PowerLoss => return Ok(Some(from)),
        Err(e) => return Err(format!("workload mount: {e:?}")),
    };
    for i in from..to {
        let (o, off, d) = round(i);
        let r = fs.write(ids[o], off, &d).and_then(|()| fs.sync());
        match r {
            Ok(()) => {}
            Err(e) if is_power_loss(&e) => return Ok(Some(i)),
            Err(e) => return Err(format!("round {i}: {e:?}")),
        }
    }
    match fs.unmount() {
        Ok(()) => Ok(None),
        Err(e) if is_power_loss(&e) => Ok(Some(to)),
        Err(e) => Err(format!("unmount: {e:?}")),
    }
}

fn check_state<const B: usize>(
    sim: &mut Sim,
    ctl: &Shared,
    ids: &[u32],
    allowed: &[Vec<Vec<u8>>],
) -> Result<(), String> {
    let mut fs = Store::<B>::mounted(rig(sim, ctl)).map_err(|e| format!("mount: {e:?}"))?;
    let mut seen = Vec::new();
    for &id in ids {
        let n = fs.size(id).map_err(|e| format!("size: {e:?}"))? as usize;
        let mut b = vec![0u8; n];
        fs.read(id, 0, &mut b).map_err(|e| format!("read: {e:?}"))?;
        seen.push(b);
    }
    if !allowed.contains(&seen) {
        return Err("state allowed by neither the last synced round nor the one in flight".into());
    }
    // Keeps working.
    let (o, off, d) = round(9999);
    match fs.write(ids[o], off, &d).and_then(|()| fs.sync()) {
        Ok(()) | Err(WriteError::ReadOnly) => {}
        Err(e) => return Err(format!("write after recovery: {e:?}")),
    }
    Ok(())
}

/// Returns (cuts made, failures).
fn cut_sweep<const B: usize>(c: &SweepCfg) -> (u64, Vec<String>) {
    let ctl: Shared = Default::default();
    let mut sim = Sim::heap(c.profile, FaultPlan::seeded(11));
    let ids: Vec<u32> = {
        let mut fs = Store::<B>::formatted(rig(&mut sim, &ctl), c.config).unwrap();
        ctl.borrow_mut().ckpt = ckpt_blocks(fs.blocks());
        let ids: Vec<u32> = (0..3)
            .map(|_| fs.create(ObjKind::Object).unwrap())
            .collect();
        for i in 0..c.warm {
            let (o, off, d) = round(i);
            fs.write(ids[o], off, &d).unwrap();
            fs.sync().unwrap();
        }
        fs.unmount().unwrap();
        ids
    };
    let mut states = vec![vec![Vec::new(); 3]];
    for i in 0..c.warm + c.rounds {
        let mut s = states.last().unwrap().clone();
        apply(&mut s, i);
        states.push(s);
    }
    let base = sim.storage().clone();
    // Ops of the uncut workload.
    let total = {
        let mut s = Sim::attach(c.profile, base.clone(), FaultPlan::seeded(1)).unwrap();
        assert_eq!(
            run_rounds::<B>(&mut s, &ctl, &ids, c.warm, c.warm + c.rounds),
            Ok(None)
        );
        s.ops_since_arm()
    };
    let mut fails = Vec::new();
    let mut cuts = 0;
    let mut at = 1;
    while at <= total {
        for &kind in &c.kinds {
            let faults = FaultConfig {
                unstable_after_cut: c.unstable,
                program_fail_ppm: c.pfail,
                erase_fail_ppm: c.efail,
                ..FaultConfig::default()
            };
            let plan = FaultPlan::seeded(at * 7 + 1)
                .with_faults(faults)
                .with_cut(at, kind);
            let mut s = Sim::attach(c.profile, base.clone(), plan).unwrap();
            let done = match run_rounds::<B>(&mut s, &ctl, &ids, c.warm, c.warm + c.rounds) {
                Ok(Some(r)) => r,
                Ok(None) => continue,
                Err(e) if c.pfail + c.efail > 0 && e.contains("ReadOnly") => continue,
                Err(e) => {
                    fails.push(format!("cut {at} {kind:?}: {e}"));
                    continue;
                }
            };
            cuts += 1;
            s.power_on();
            // Rounds `..done` are synced; `done` was in flight.
            let allowed = [
                states[done as usize].clone(),
                states[(done as usize + 1).min(states.len() - 1)].clone(),
            ];
            for &rc in std::iter::once(&0).chain(c.recovery_cuts.iter()) {
                let image = s.storage().clone();
                let mut t = Sim::attach(c.profile, image, FaultPlan::seeded(at)).unwrap();
                if rc > 0 {
                    t.arm(
                        FaultPlan::seeded(at + rc)
                            .with_faults(faults)
                            .with_cut(rc, kind),
                    );
                    match Store::<B>::mounted(rig(&mut t, &ctl)) {
                        Err(MountError::Flash(e)) if e.kind() == ErrorKind::PowerLoss => {
                            t.power_on();
                        }
                        _ => continue,
                    }
                }
                t.disarm();
                if let Err(e) = check_state::<B>(&mut t, &ctl, &ids, &allowed) {
                    fails.push(format!(
                        "cut {at} {kind:?} (rounds done {done}) recovery cut {rc}: {e}"
                    ));
                }
            }
        }
        at += c.stride;
    }
    (cuts, fails)
}

fn tiny_window4(n: u8) -> Config {
    Config {
        window_blocks: 4,
        ..cfg()
    }
    .checkpoint_blocks(n)
}

/// 16 checkpoint blocks on TINY with the smallest window, rotation wrapped several
/// times; a cut at every program and erase of 30 rounds, every cut kind, unstable
/// pages after torn cuts, and cuts during the recovering mount.
#[test]
fn sweep_tiny_16_blocks_window_4() {
    let c = SweepCfg {
        profile: profile::TINY,
        config: tiny_window4(16),
        warm: 200,
        rounds: 30,
        kinds: CutKind::ALL.to_vec(),
        unstable: true,
        stride: 1,
        recovery_cuts: vec![3, 9, 20],
        pfail: 0,
        efail: 0,
    };
    let (cuts, fails) = cut_sweep::<64>(&c);
    println!("cuts {cuts}, failures {}", fails.len());
    for f in fails.iter().take(20) {
        println!("{f}");
    }
    assert!(fails.is_empty());
}

/// 16 checkpoint blocks of three-page checkpoints (1,024-block TINY), every cut kind.
#[test]
fn sweep_big_tiny_16_blocks() {
    let c = SweepCfg {
        profile: big_tiny(),
        config: cfg(),
        warm: 140,
        rounds: 12,
        kinds: CutKind::ALL.to_vec(),
        unstable: true,
        stride: 1,
        recovery_cuts: vec![2, 7],
        pfail: 0,
        efail: 0,
    };
    let (cuts, fails) = cut_sweep::<1024>(&c);
    println!("cuts {cuts}, failures {}", fails.len());
    for f in fails.iter().take(20) {
        println!("{f}");
    }
    assert!(fails.is_empty());
}

/// The same sweeps with random program failures (3%) and erase failures (1%) on the
/// flash during the workload and the recovery, so checkpoints are retried in the next
/// block (held: two failures inside one checkpoint, finding 1, are too rare at random).
#[test]
fn sweep_big_tiny_16_blocks_with_program_failures() {
    let mut worst = Vec::new();
    for seed_kind in [CutKind::Clean, CutKind::Torn(TornMode::Random)] {
        let c = SweepCfg {
            profile: big_tiny(),
            config: cfg(),
            warm: 140,
            rounds: 12,
            kinds: vec![seed_kind],
            unstable: false,
            stride: 1,
            recovery_cuts: vec![2, 7],
            pfail: 30_000,
            efail: 10_000,
        };
        let (cuts, fails) = cut_sweep::<1024>(&c);
        println!("{seed_kind:?}: cuts {cuts}, failures {}", fails.len());
        for f in fails.iter().take(10) {
            println!("{f}");
        }
        worst.extend(fails);
    }
    assert!(worst.is_empty());
}

// ---------------------------------------------------------------------------------------
// Aimed read errors during the mount (what held)

/// Four failed reads in a row (more than the store retries) aimed at every read of the
/// mount in turn, so each checkpoint block's first page fails once: on a clean store
/// and after a cut in the middle of a checkpoint. The mount must load the right state
/// or refuse with `MediaLoss`; never `Corrupted`, never an older state.
fn read_error_sweep<const B: usize>(
    profile: Profile,
    config: Config,
    warm: u32,
    cut: Option<u64>,
) -> Vec<String> {
    let ctl: Shared = Default::default();
    let mut sim = Sim::heap(profile, FaultPlan::seeded(5));
    let mut fs = Store::<B>::formatted(rig(&mut sim, &ctl), config).unwrap();
    let ids: Vec<u32> = (0..3)
        .map(|_| fs.create(ObjKind::Object).unwrap())
        .collect();
    let mut state = vec![Vec::new(); 3];
    for i in 0..warm {
        let (o, off, d) = round(i);
        fs.write(ids[o], off, &d).unwrap();
        fs.sync().unwrap();
        apply(&mut state, i);
    }
    let mut allowed = vec![state.clone()];
    match cut {
        None => fs.unmount().unwrap(),
        Some(at) => {
            drop(fs);
            let mut fs = Store::<B>::mounted(rig(&mut sim, &ctl)).unwrap();
            let (o, off, d) = round(warm);
            fs.write(ids[o], off, &d).unwrap();
            sim_cut_in(&mut fs, at);
            let r = fs.sync();
            assert!(matches!(&r, Err(e) if is_power_loss(e)), "{r:?}");
            drop(fs);
            sim.power_on();
            sim.disarm();
            apply(&mut state, warm);
            allowed.push(state.clone());
        }
    }
    let base = sim.storage().clone();
    // Reads of a fault-free mount.
    let reads = {
        let mut t = Sim::attach(profile, base.clone(), FaultPlan::seeded(1)).unwrap();
        Store::<B>::mounted(rig(&mut t, &ctl)).unwrap();
        t.reads_since_arm()
    };
    let mut fails = Vec::new();
    for at in 1..=reads as u32 {
        let plan = FaultPlan::seeded(at as u64).with_faults(FaultConfig {
            read_fail_at: at,
            read_fail_len: 4,
            ..FaultConfig::default()
        });
        let mut t = Sim::attach(profile, base.clone(), plan).unwrap();
        match Store::<B>::mounted(rig(&mut t, &ctl)) {
            Ok(mut fs) => {
                let mut seen = Vec::new();
                for &id in &ids {
                    let n = fs.size(id).unwrap() as usize;
                    let mut b = vec![0u8; n];
                    fs.read(id, 0, &mut b).unwrap();
                    seen.push(b);
                }
                if !allowed.contains(&seen) {
                    fails.push(format!("read error at {at}: wrong state"));
                }
            }
            Err(MountError::MediaLoss { .. }) => {}
            // Recovery reads (not the checkpoint search) that stay unreadable surface
            // as a flash error; the same reads fail the same way with every block
            // searched (checked against the old search rule).
            Err(MountError::Flash(e)) if cut.is_some() && e.kind() == ErrorKind::Uncorrectable => {}
            Err(e) => fails.push(format!("read error at {at}: {e:?}")),
        }
    }
    println!("{reads} reads swept, {} failures", fails.len());
    fails
}

/// Arms a clean cut at the `at`-th program or erase from now.
fn sim_cut_in<const B: usize>(fs: &mut Store<'_, B>, at: u64) {
    let sim = &mut fs.flash_mut().sim;
    let p = sim.plan().with_cut(at, CutKind::Torn(TornMode::Random));
    sim.arm(p);
}

#[test]
fn read_errors_at_mount_16_blocks() {
    let mut fails = Vec::new();
    fails.extend(read_error_sweep::<64>(
        profile::TINY,
        tiny_window4(16),
        150,
        None,
    ));
    for at in [1, 2, 3, 4] {
        fails.extend(read_error_sweep::<64>(
            profile::TINY,
            tiny_window4(16),
            150,
            Some(at),
        ));
    }
    fails.extend(read_error_sweep::<1024>(big_tiny(), cfg(), 100, None));
    for at in [2, 3, 4, 5] {
        fails.extend(read_error_sweep::<1024>(big_tiny(), cfg(), 100, Some(at)));
    }
    for f in fails.iter().take(20) {
        println!("{f}");
    }
    assert!(fails.is_empty());
}

// ---------------------------------------------------------------------------------------
// The recovery-work bound (what held; figures printed)

/// Unsynced overwrites on the smallest window (4 blocks) with 16 and 4 checkpoint
/// blocks, GC busy: no wedge (`NoSpace`, `ReadOnly`), checkpoints per operation and
/// checkpoint-block erases printed, and a crash recovery afterwards.
#[test]
fn work_bound_smallest_window() {
    for n in [16u8, 4] {
        let ctl: Shared = Default::default();
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(9));
        let mut fs = Store::<64>::formatted(rig(&mut sim, &ctl), tiny_window4(n)).unwrap();
        ctl.borrow_mut().ckpt = ckpt_blocks(fs.blocks());
        let ids: Vec<u32> = (0..3)
            .map(|_| fs.create(ObjKind::Object).unwrap())
            .collect();
        let mut state = vec![Vec::new(); 3];
        let st0 = fs.stats();
        let e0 = ctl.borrow().ckpt_erases;
        for i in 0..400 {
            let (o, off, d) = round(i);
            fs.write(ids[o], off, &d).unwrap();
            apply(&mut state, i);
        }
        // A transaction larger than the window.
        let big = bytes(77, 100_000);
        fs.transact(&[oftl::TxOp::Write {
            obj: ids[0],
            offset: 0,
            data: &big,
        }])
        .unwrap();
        if state[0].len() < big.len() {
            state[0].resize(big.len(), 0);
        }
        state[0][..big.len()].copy_from_slice(&big);
        for &id in &ids {
            fs.flush(id).unwrap();
        }
        let st = fs.stats();
        println!(
            "n={n}: {} checkpoints, {} checkpoint-block erases over 400 writes",
            st.checkpoints - st0.checkpoints,
            ctl.borrow().ckpt_erases - e0
        );
        drop(fs);
        let mut fs = Store::<64>::mounted(rig(&mut sim, &ctl)).unwrap();
        println!(
            "n={n}: recovery scanned {} pages",
            fs.stats().recovery_scanned_pages
        );
        for (k, &id) in ids.iter().enumerate() {
            let mut b = vec![0u8; state[k].len()];
            fs.read(id, 0, &mut b).unwrap();
            assert_eq!(b, state[k], "n={n} object {k}");
        }
    }
}
