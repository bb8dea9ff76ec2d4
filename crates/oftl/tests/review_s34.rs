//! An independent review of stop 34: operations erasing ahead the window blocks they may
//! take (`Dev::erase_ahead`, the block table's erased-ahead prefix, the crash walk that
//! stops nine erased pages into a window block, `free_room` counting the cold and log
//! heads' blocks, a checkpoint read-back that does not read retried; ce30c8c) and the
//! read-disturb probe (`Dev::probe_block`, `take_disturbed`, `gc_step`'s
//! `scrub_disturbed`, window blocks flagged by their own reads; b4ca1c8).
//!
//! Findings (fixed after the review; the tests pin them):
//!
//! - `index_head_block_flagged_by_reads_is_scrubbed_once`: one page of the index head's
//!   block reading corrected made every `gc_step` checkpoint (201 checkpoints and 25
//!   erases in 200 steps of a read-only workload) and the block never moved:
//!   `scrub_disturbed` left every head's block but the index head's, and a checkpoint
//!   does not settle a head's unfinished block. Now the index head leaves it too.
//! - `hot_objects_survive_noisy_reads`: ten hot 5-page objects at the simulator's
//!   `noisy` rates lost data in 5 of 5 runs (13,441 to 32,646 object reads); the lost
//!   page was in a Full block flagged for scrubbing long before, starved: transient
//!   corrections (2 % of reads, 1-bit threshold) flagged the freshly copied window
//!   blocks too, each cost a checkpoint (164 to 419), and `BlockTable::pick_victim` took
//!   the urgent block with the lowest address first. Without the probe (ce30c8c,
//!   9c94154) the same runs also lost 5 of 5. Now a finding that costs a checkpoint is
//!   confirmed by two more reads (a transient correction rarely comes twice) and urgent
//!   victims are taken in turn.
//! - `eight_failed_programs_reading_erased_hide_the_next_block`: eight failed programs
//!   leaving erased pages at the start of a window block plus the ninth page the head
//!   never programs were the nine erased pages the walk stopped at: synced data in the
//!   next block was dropped silently. Not new: 9c94154's `!started` rule (whole block
//!   erased) dropped it the same way; reachable on parts without ECC (the simulator's
//!   prefix shape), not on the simulated on-die-ECC parts. Now a walk that meets an
//!   unstarted window block looks at the next one's first page before it stops.
//! - `pending_finding_survives_a_mount_in_place`: `Dev::reset` left `disturbed` (and
//!   `probes`) set, so a store mounted again in place acted on the previous session's
//!   finding (an extra checkpoint, the data head leaving its block).
//!
//! Probes that held: every cut of every kind on 4- and 5-block windows (and the raw
//! part), random cuts under 2.5 % program and erase failures on 4- to 6-block windows,
//! recovery cuts, 360 long runs with 3 % failing erases (misuse-free, exact after clean
//! and crash remounts), near-full log appends (no new `NoSpace`), a salvage mount with
//! a flagged window block (`gc_step` writes nothing), a flagged data-head window block
//! scrubbed and readable after crash and remount.

use crate::common;

use common::lifecycle::Lifecycle;
use common::pages::all_pages;
use common::*;
use nand_hal::powerloss::{self, CheckError, RecoveryCuts, Scenario, Schedule, Sweep};
use nand_hal::sim::{profile, CutKind, FaultConfig, FaultPlan, Profile, TornMode};
use nand_hal::{ErrorKind, NandFlash, PageAddr};
use oftl::format::backpointer::PageKind;
use oftl::{BlockState, Health, MountError, ObjKind, ReadOnlyReason, WriteError};

/// Blocks in the window state holding index or object-table pages: the index head's
/// block (it takes blocks straight from the pool, in the window state, outside the
/// window list).
fn index_head_blocks(fs: &Fs) -> Vec<u32> {
    let ppb = fs.flash().geometry().pages_per_block();
    let mut v: Vec<u32> = all_pages(fs.flash())
        .into_iter()
        .filter(|p| matches!(p.kind, PageKind::Index | PageKind::Table))
        .map(|p| p.page / ppb)
        .filter(|&b| fs.blocks()[b as usize].state() == BlockState::Window)
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Index and table pages in block `b`.
fn meta_pages_in(sim: &Sim, b: u32) -> Vec<u32> {
    let ppb = sim.geometry().pages_per_block();
    all_pages(sim)
        .into_iter()
        .filter(|p| matches!(p.kind, PageKind::Index | PageKind::Table) && p.page / ppb == b)
        .map(|p| p.page)
        .collect()
}

fn read_all(fs: &mut Fs, ids: &[u32], want: &[Vec<u8>]) {
    for (i, &id) in ids.iter().enumerate() {
        let mut buf = vec![0u8; want[i].len()];
        let n = fs.read(id, 0, &mut buf).unwrap();
        assert_eq!(n, buf.len());
        assert!(buf == want[i], "object {id} reads back wrong");
    }
}

/// A store of ten 5-page objects (each with an index root), synced and remounted clean:
/// the index head's block (window state, outside the window list) holds the roots and
/// the table page.
fn index_block_store(sim: &mut Sim) -> (Vec<u32>, Vec<Vec<u8>>) {
    let mut fs = Fs::formatted(&mut *sim, cfg()).unwrap();
    let mut ids = Vec::new();
    let mut want = Vec::new();
    for i in 0..10u32 {
        let id = fs.create(ObjKind::Object).unwrap();
        let d = bytes(i, 5 * 2048);
        fs.write(id, 0, &d).unwrap();
        ids.push(id);
        want.push(d);
    }
    fs.sync().unwrap();
    fs.unmount().unwrap();
    (ids, want)
}

/// **Probe: a window block that never settles.** One page of the index head's block
/// reads corrected (one stuck bit: read disturb, or a failed program's neighbour that
/// landed all but one bit). Reads of that block flag it (`read_payload_once`) or the
/// probe finds it, and every `gc_step` then runs `scrub_disturbed`: the index head is
/// excluded from the heads that leave the block, so the checkpoint settles nothing and
/// the block stays in the window state, flagged again by the next reads. Expected: the
/// block's pages move (or at least the store stops checkpointing for it).
#[test]
fn index_head_block_flagged_by_reads_is_scrubbed_once() {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(3));
    let (ids, want) = index_block_store(&mut sim);
    let mut fs = Fs::mounted(&mut sim).unwrap();
    let ib = index_head_blocks(&fs);
    assert_eq!(ib.len(), 1, "{ib:?}");
    let b = ib[0];
    let pages = meta_pages_in(fs.flash(), b);
    fs.flash_mut().inject_flips(PageAddr(pages[0]), 0, 1);
    let before = fs.stats().checkpoints;
    let erases_before = fs.flash().counters().erases;
    let rounds = 200;
    let mut moved_at = None;
    for r in 0..rounds {
        read_all(&mut fs, &ids, &want);
        fs.gc_step(8).unwrap();
        let bi = fs.blocks()[b as usize];
        if moved_at.is_none() && (bi.state() != BlockState::Window || bi.valid() == 0) {
            moved_at = Some(r);
        }
    }
    let ckpts = fs.stats().checkpoints - before;
    let erases = fs.flash().counters().erases - erases_before;
    println!(
        "{rounds} rounds of reads and steps: {ckpts} checkpoints, {erases} erases, \
         block {b} {:?}, moved at round {moved_at:?}",
        fs.blocks()[b as usize]
    );
    read_all(&mut fs, &ids, &want);
    fs.unmount().unwrap();
    assert_eq!(sim.counters().misuse, 0);
    assert!(
        ckpts <= 4,
        "a read-only workload checkpointed {ckpts} times in {rounds} steps ({erases} erases), \
         block {b} still in the window: {moved_at:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Power-cut sweeps over small windows, near full, with log appends, transactions,
// collection steps and injected program and erase failures.

/// Acknowledged state and the operation in flight when the power went.
struct Oracle {
    acked: Pending,
    in_flight: Option<Op>,
    /// Operations refused with `NoSpace` (changing nothing), and the fill then.
    nospace: Vec<(usize, u64, u64)>,
}

struct Mixed {
    name: String,
    profile: Profile,
    window: u16,
    preload: Vec<Op>,
    ops: Vec<Op>,
}

fn wcfg(window: u16) -> oftl::Config {
    oftl::Config {
        window_blocks: window,
        ..cfg()
    }
}

/// A workload filling `objects` objects of `pages` pages each (and two log streams)
/// in setup, then `n` mixed operations from `seed`.
fn mixed(name: &str, window: u16, objects: usize, pages: usize, n: usize, seed: u64) -> Mixed {
    let mut preload = Vec::new();
    for i in 0..objects {
        preload.push(Op::Create);
        preload.push(Op::Write {
            slot: i,
            off: 0,
            len: pages * 2048,
            seed: 1000 + i as u32,
        });
    }
    preload.push(Op::CreateLog);
    preload.push(Op::CreateLog);
    for i in 0..6u32 {
        preload.push(Op::Append {
            slot: i as usize,
            len: 200,
            seed: 2000 + i,
        });
    }
    preload.push(Op::Sync);
    let mut r = Rng(seed | 1);
    let mut ops = Vec::new();
    let size = (pages * 2048) as u64;
    for k in 0..n as u32 {
        let slot = r.below(objects as u64) as usize;
        let op = match r.below(100) {
            0..=29 => Op::Write {
                slot,
                off: r.below(size),
                len: [64, 700, 2048, 3000, 5000][r.below(5) as usize],
                seed: 10_000 + k,
            },
            30..=37 => Op::Flush { slot },
            38..=40 => Op::Sync,
            41..=58 => Op::Append {
                slot: r.below(2) as usize,
                len: 20 + r.below(400) as usize,
                seed: 20_000 + k,
            },
            59..=62 => Op::Batch {
                slot: r.below(2) as usize,
                n: 1 + r.below(3) as usize,
                len: 30 + r.below(120) as usize,
                seed: 30_000 + 16 * k,
            },
            63..=66 => Op::Trim {
                slot: r.below(2) as usize,
                n: 1 + r.below(4) as usize,
            },
            67..=74 => Op::Tx {
                a: slot,
                b: r.below(objects as u64) as usize,
                off: r.below(size / 2),
                len: [500, 2048, 6000][r.below(3) as usize],
                seed: 40_000 + k,
                size: size / 2 + r.below(size / 2),
            },
            75..=84 => Op::Gc {
                budget: [4, 8, 32][r.below(3) as usize] as u32,
            },
            85..=88 => Op::SetAttr {
                slot,
                v: r.below(250) as u8,
            },
            89..=92 => Op::Truncate {
                slot,
                size: r.below(size),
            },
            _ => Op::Write {
                slot,
                off: 0,
                len: size as usize,
                seed: 50_000 + k,
            },
        };
        ops.push(op);
    }
    Mixed {
        name: name.into(),
        profile: profile::TINY,
        window,
        preload,
        ops,
    }
}

fn is_read_only_stop(fs: &Fs) -> bool {
    matches!(fs.health(), Health::ReadOnly(_))
}

impl Scenario for Mixed {
    type Oracle = Oracle;

    fn name(&self) -> &str {
        &self.name
    }

    fn profile(&self) -> Profile {
        self.profile
    }

    fn setup(&self, nand: &mut Sim) -> Result<Oracle, String> {
        let mut fs = Fs::formatted(nand, wcfg(self.window)).map_err(|e| format!("{e:?}"))?;
        let mut m = Model::new();
        for op in &self.preload {
            run_op(&mut fs, &m, op).map_err(|e| format!("preload {op:?}: {e:?}"))?;
            m = m.apply(op);
        }
        fs.unmount().map_err(|e| format!("{e:?}"))?;
        Ok(Oracle {
            acked: Pending::new(m),
            in_flight: None,
            nospace: Vec::new(),
        })
    }

    fn run(&self, nand: &mut Sim, o: &mut Oracle) -> Result<(), String> {
        let mut fs = Fs::mounted(nand).map_err(|e| format!("mount: {e:?}"))?;
        for (i, op) in self.ops.iter().enumerate() {
            o.in_flight = Some(op.clone());
            match run_op(&mut fs, &o.acked.durable, op) {
                Ok(()) => o.acked = o.acked.apply(op),
                Err(OpError::NoSpace) => {
                    o.nospace.push((i, fs.used_pages(), fs.capacity_pages()));
                }
                Err(OpError::PowerLoss) => return Err("power loss".into()),
                Err(e) if is_read_only_stop(&fs) => {
                    // Documented: out of checkpoint or good blocks, the store turns
                    // read-only (the operation changed nothing).
                    o.in_flight = None;
                    let _ = e;
                    return Ok(());
                }
                Err(e) => {
                    return Err(format!(
                        "op {i} {op:?}: {e:?} (health {:?}, used {} of {})",
                        fs.health(),
                        fs.used_pages(),
                        fs.capacity_pages()
                    ))
                }
            }
            o.in_flight = None;
        }
        match fs.unmount() {
            Ok(()) => Ok(()),
            // Buffered writes that find no room at unmount are not acknowledged as
            // durable (a prefix of them may show).
            Err(WriteError::NoSpace) => {
                o.nospace
                    .push((usize::MAX, fs.used_pages(), fs.capacity_pages()));
                Ok(())
            }
            Err(e) => Err(format!("unmount: {e:?}")),
        }
    }

    fn check(&self, nand: &mut Sim, o: &Oracle) -> Result<(), CheckError> {
        let mut fs = match Fs::mounted(nand) {
            Ok(fs) => fs,
            Err(MountError::Flash(e)) if e.kind() == ErrorKind::PowerLoss => {
                return Err(CheckError::PowerLoss)
            }
            Err(e) => return Err(format!("mount failed: {e:?}").into()),
        };
        let seen = match observe(&mut fs) {
            Ok(m) => m,
            Err(e) if e == "power loss" => return Err(CheckError::PowerLoss),
            Err(e) => return Err(e.into()),
        };
        let after = o.in_flight.as_ref().map(|op| o.acked.apply(op));
        let mut base = vec![o.acked.clone()];
        base.extend(after);
        let mut why = Vec::new();
        let mut found = None;
        for b in &base {
            for pr in [None, Some((3u64, &b"after"[..]))] {
                match b.allows(&seen, pr) {
                    Ok(()) => found = Some(b),
                    Err(e) => why.push(e),
                }
            }
        }
        let Some(state) = found else {
            return Err(format!("state allowed by no oracle: {why:?}").into());
        };
        if let Some(&id) = state.durable.objs.keys().next() {
            match fs.write(id, 3, b"after").and_then(|()| fs.flush(id)) {
                Ok(()) => {}
                Err(WriteError::Flash(e)) if e.kind() == ErrorKind::PowerLoss => {
                    return Err(CheckError::PowerLoss)
                }
                Err(WriteError::ReadOnly)
                    if matches!(
                        fs.health(),
                        Health::ReadOnly(
                            ReadOnlyReason::CheckpointBlocks | ReadOnlyReason::GoodBlocks
                        )
                    ) =>
                {
                    return Ok(())
                }
                Err(WriteError::NoSpace) if fs.used_pages() * 10 >= fs.capacity_pages() * 8 => {
                    return Ok(())
                }
                Err(e) => {
                    return Err(format!(
                        "write after recovery: {e:?} (used {} of {} pages, {:?})",
                        fs.used_pages(),
                        fs.capacity_pages(),
                        fs.health()
                    )
                    .into())
                }
            }
            let mut b = [0u8; 5];
            match fs.read(id, 3, &mut b) {
                Ok(5) if &b == b"after" => {}
                Err(oftl::ReadError::Flash(e)) if e.kind() == ErrorKind::PowerLoss => {
                    return Err(CheckError::PowerLoss)
                }
                r => return Err(format!("read after recovery: {r:?} {b:?}").into()),
            }
        }
        Ok(())
    }
}

fn noisy() -> FaultConfig {
    FaultConfig {
        unstable_after_cut: true,
        program_fail_ppm: 25_000,
        erase_fail_ppm: 25_000,
        ..FaultConfig::default()
    }
}

fn sweep_report(s: &Mixed, sw: &Sweep) -> powerloss::Report {
    let t = std::time::Instant::now();
    let r = powerloss::sweep(s, sw);
    println!(
        "{}: {} ops, {} runs, {} cuts, {} recovery cuts, {} failures, {:.1}s",
        s.name,
        r.workload_ops,
        r.runs,
        r.cuts,
        r.recovery_cuts,
        r.failures.len(),
        t.elapsed().as_secs_f64()
    );
    r
}

/// Every program and erase of a mixed workload on the smallest windows (4 and 5 blocks),
/// the store about half full, every cut kind: the erase-ahead's erases (clean and torn)
/// land right before operations, between an erase ahead and the take, and across
/// checkpoints that keep erased blocks.
#[test]
fn every_cut_small_windows() {
    let mut fails = Vec::new();
    for (w, objs, pages, seed) in [(4u16, 6usize, 20usize, 11u64), (5, 6, 24, 12)] {
        let s = mixed(&format!("mixed-cuts-w{w}"), w, objs, pages, 60, seed);
        let mut sw = Sweep::exhaustive(seed);
        sw.max_failures = 3;
        let r = sweep_report(&s, &sw);
        fails.extend(r.failures);
    }
    assert!(fails.is_empty(), "{fails:#?}");
}

/// Random cuts under 2.5 % program and erase failure rates (the stop-34 noisy sweep's
/// rates), windows of 4 to 6 blocks.
#[test]
fn noisy_random_cuts_small_windows() {
    let mut fails = Vec::new();
    for (w, objs, pages, seed) in [
        (4u16, 6usize, 20usize, 21u64),
        (5, 6, 24, 22),
        (6, 8, 20, 23),
    ] {
        let s = mixed(&format!("mixed-noisy-w{w}"), w, objs, pages, 150, seed);
        let mut sw = Sweep::exhaustive(seed);
        sw.faults = noisy();
        sw.schedule = Schedule::Random { runs: 150 };
        sw.kinds = vec![
            CutKind::Clean,
            CutKind::Torn(TornMode::Prefix),
            CutKind::Torn(TornMode::Random),
        ];
        sw.max_failures = 3;
        let r = sweep_report(&s, &sw);
        fails.extend(r.failures);
    }
    assert!(fails.is_empty(), "{fails:#?}");
}

/// Records the pages whose reads failed as uncorrectable.
#[derive(Default)]
struct FailedReads {
    pages: Vec<u32>,
}

impl common::hooked::Hooks for FailedReads {
    fn read(
        &mut self,
        sim: &mut Sim,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<nand_hal::ReadReport, common::hooked::SimErr> {
        let r = sim.read(page, column, data, oob);
        if let Err(e) = &r {
            if e.kind() == ErrorKind::Uncorrectable {
                self.pages.push(page.0);
            }
        }
        r
    }
}

type HFs<'a> = FsOn<common::hooked::Hooked<'a, FailedReads>, oftl::Greedy>;

/// [`read_mostly`] with the failing page located: its block, that block's state and
/// the kind of page (by tag).
fn read_mostly_where(seed: u64, reads: u32, faults: FaultConfig) -> Option<String> {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
    let (ids, want) = index_block_store(&mut sim);
    let ib = {
        let fs = Fs::mounted(&mut sim).unwrap();
        index_head_blocks(&fs)
    };
    sim.arm(FaultPlan {
        seed,
        cut: None,
        faults,
    });
    let mut fs = HFs::mounted(common::hooked::Hooked::new(
        &mut sim,
        FailedReads::default(),
    ))
    .unwrap();
    let mut r = Rng(seed | 1);
    let ckpt0 = fs.stats().checkpoints;
    for i in 0..reads {
        let k = r.below(ids.len() as u64) as usize;
        let mut buf = vec![0u8; want[k].len()];
        let res = fs.read(ids[k], 0, &mut buf);
        if !matches!(res, Ok(n) if n == buf.len() && buf == want[k]) {
            let pages = fs.flash().hooks.pages.clone();
            let ppb = 16;
            let p = *pages.last().unwrap();
            let b = p / ppb;
            let caps = *fs.flash().sim.capabilities();
            let mut d = vec![0u8; 2048];
            let mut o = vec![0u8; 64];
            fs.flash().sim.peek(PageAddr(p), &mut d, &mut o);
            let tag = common::pages::tag_of(&caps, &d, &o);
            return Some(format!(
                "read {i}: {res:?}; failing page {p} (block {b}: {:?}, the index head's \
                 block at mount: {ib:?}), tag {:?}; {} checkpoints",
                fs.blocks()[b as usize],
                tag.map(|t| (t.kind, t.owner, t.lpn)),
                fs.stats().checkpoints - ckpt0
            ));
        }
        if i % 64 == 63 {
            let c0 = fs.stats().checkpoints;
            let g = fs.gc_step(8).unwrap();
            if std::env::var("S34_TRACE").is_ok() {
                let flagged: Vec<String> = fs
                    .blocks()
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| b.scrub() || b.retire())
                    .map(|(i, b)| format!("{i}:{:?}/{}", b.state(), b.valid()))
                    .collect();
                println!(
                    "step after read {i}: {g:?}, +{} ckpt, flagged {flagged:?}",
                    fs.stats().checkpoints - c0
                );
            }
        }
    }
    None
}

/// **Probe: hot data at the `noisy` rates.** Ten 5-page objects read at random (a
/// `gc_step(8)` every 64 reads), transient correctable errors at 2 % (`noisy`), read
/// disturb from 10,000 reads of a block: every acknowledged byte must keep reading.
/// The soak in `stagefs-core` (one read in 8 probed) lost 1 run in 30 of 300,000 file
/// reads.
#[test]
fn hot_objects_survive_noisy_reads() {
    let faults = FaultConfig {
        program_fail_ppm: 0,
        erase_fail_ppm: 0,
        factory_bad: 0,
        ..FaultConfig::noisy()
    };
    let mut lost = Vec::new();
    for seed in 1..=5u64 {
        if let Some(m) = read_mostly_where(seed, 40_000, faults) {
            lost.push(format!("seed {seed}: {m}"));
        }
    }
    assert!(
        lost.is_empty(),
        "{} of 5 runs lost data:\n{}",
        lost.len(),
        lost.join("\n")
    );
}

// ---------------------------------------------------------------------------------------
// The crash walk's stop nine erased pages into a window block.

/// Fails the first `fails` programs of the first block the data head starts while
/// armed, leaving each page as it was (erased): on a part without ECC that is the
/// simulator's own "a prefix landed" shape cut before the first programmed byte
/// (`sim/program.rs`, `fail_program` shape 3, `cut_at` 0 or inside bytes the page
/// leaves at FFh).
struct FailErased {
    armed: bool,
    fails: u32,
    block: Option<u32>,
    failed: Vec<u32>,
}

impl common::hooked::Hooks for FailErased {
    fn program(
        &mut self,
        sim: &mut Sim,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), common::hooked::SimErr> {
        let g = sim.geometry();
        let b = g.block_of(page).0;
        let i = g.page_in_block(page);
        if self.armed && self.block.is_none() && i == 0 && column == 0 {
            let caps = *sim.capabilities();
            let tag = common::pages::tag_of(&caps, data, oob).or_else(|| {
                data.get(data.len().saturating_sub(16)..).and_then(|t| {
                    oftl::format::backpointer::Backpointer::parse(t)
                        .ok()
                        .flatten()
                })
            });
            if tag
                .is_some_and(|t| matches!(t.kind, PageKind::Data | PageKind::Meta) && !t.relocated)
            {
                self.block = Some(b);
            }
        }
        if self.block == Some(b) && (self.failed.len() as u32) < self.fails {
            self.failed.push(page.0);
            return Err(common::hooked::program_failed());
        }
        sim.program(page, column, data, oob)
    }
}

type EFs<'a> =
    FsOn<common::hooked::Hooked<'a, std::rc::Rc<std::cell::RefCell<FailErased>>>, oftl::Greedy>;

/// Writes 40 pages to one object, each synced (acknowledged durable), with the data
/// head's first fresh block failing `fails` programs that leave erased pages; then the
/// power goes (no unmount) and the store is mounted again. Returns what the mount shows
/// against what was acknowledged.
fn failed_erased_then_crash(fails: u32) -> Result<String, String> {
    let mut sim = Sim::heap(tiny_raw(), FaultPlan::seeded(9));
    let ctl = std::rc::Rc::new(std::cell::RefCell::new(FailErased {
        armed: false,
        fails,
        block: None,
        failed: Vec::new(),
    }));
    let id;
    let mut want = Vec::new();
    {
        let mut fs =
            EFs::formatted(common::hooked::Hooked::new(&mut sim, ctl.clone()), cfg()).unwrap();
        id = fs.create(ObjKind::Object).unwrap();
        fs.write(id, 0, &bytes(1, 2048)).unwrap();
        want.extend(bytes(1, 2048));
        fs.unmount().unwrap();
        fs.mount().unwrap();
        ctl.borrow_mut().armed = true;
        let ckpts = fs.stats().checkpoints;
        let mut after = 0;
        for k in 1..40u32 {
            let d = bytes(100 + k, 2048);
            fs.write(id, k as u64 * 2048, &d).unwrap();
            fs.flush(id).unwrap();
            want.extend(d);
            if ctl.borrow().failed.len() as u32 == fails {
                after += 1;
                if after == 4 {
                    break;
                }
            }
        }
        println!(
            "checkpoints during the writes: {}",
            fs.stats().checkpoints - ckpts
        );
        // Power cut: nothing more is written.
    }
    let c = ctl.borrow();
    let info = format!("failed programs {:?} in block {:?}", c.failed, c.block);
    drop(c);
    let mut fs = Fs::mounted(&mut sim).map_err(|e| format!("{info}: mount {e:?}"))?;
    let size = fs.size(id).map_err(|e| format!("{e:?}"))? as usize;
    let mut buf = vec![0u8; size];
    fs.read(id, 0, &mut buf).map_err(|e| format!("{e:?}"))?;
    if buf != want {
        return Err(format!(
            "{info}: after the crash the object holds {size} of {} acknowledged bytes \
             (recovery scanned {} pages)",
            want.len(),
            fs.stats().recovery_scanned_pages
        ));
    }
    Ok(info)
}

/// **Probe: a window block whose first programs failed and read erased.** The writer
/// leaves a block after `FAILS_PER_BLOCK` (8) failed programs in a row; the crash
/// walk's new stop takes a window block whose first nine pages read erased for never
/// started. Eight failed programs that left their pages erased, plus the ninth page
/// the head never programmed, are exactly nine: the walk ends there and the pages the
/// head then wrote in the next window block (synced) are not replayed.
#[test]
fn eight_failed_programs_reading_erased_hide_the_next_block() {
    let mut out = Vec::new();
    for fails in [7u32, 8] {
        out.push((fails, failed_erased_then_crash(fails)));
    }
    println!("{out:#?}");
    assert!(out.iter().all(|(_, r)| r.is_ok()), "{out:#?}");
}

// ---------------------------------------------------------------------------------------
// The probe's checkpoint in `gc_step` on stores that must not write.

/// A store whose data head's block (a window block since the last checkpoint) has a
/// page reading corrected; the object holding it. Left unmounted (cleanly, when
/// `clean`, else as after a crash).
fn flagged_window_store(sim: &mut Sim, clean: bool) -> (u32, Vec<u8>, u32) {
    let mut fs = Fs::formatted(&mut *sim, cfg()).unwrap();
    let id = fs.create(ObjKind::Object).unwrap();
    fs.unmount().unwrap();
    fs.mount().unwrap();
    let d = bytes(5, 3 * 2048);
    fs.write(id, 0, &d).unwrap();
    fs.sync().unwrap();
    let ppb = fs.flash().geometry().pages_per_block();
    let p = common::pages::data_head(fs.flash())
        .iter()
        .rev()
        .find(|p| p.kind == PageKind::Data)
        .unwrap()
        .page;
    assert_eq!(fs.blocks()[(p / ppb) as usize].state(), BlockState::Window);
    fs.flash_mut().inject_flips(PageAddr(p), 1, 1);
    if clean {
        fs.unmount().unwrap();
    }
    (id, d, p)
}

fn read_check(fs: &mut Fs, id: u32, d: &[u8]) {
    let mut buf = vec![0u8; d.len()];
    assert_eq!(fs.read(id, 0, &mut buf).unwrap(), d.len());
    assert!(buf == d, "object {id} reads back wrong");
}

/// A salvage mount is read-only: a window block its reads flag is never scrubbed, and
/// `gc_step` changes nothing (no program, no erase).
#[test]
fn salvage_mount_flagged_window_block_changes_nothing() {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(4));
    let (id, d, _) = flagged_window_store(&mut sim, false);
    let mut fs = Fs::new(&mut sim, cfg(), Default::default());
    fs.mount_damaged(oftl::Damaged::Salvage).unwrap();
    let c0 = fs.flash().counters();
    for _ in 0..20 {
        read_check(&mut fs, id, &d);
        assert!(matches!(fs.gc_step(8), Err(WriteError::ReadOnly)));
    }
    let c = fs.flash().counters();
    assert_eq!((c.programs, c.erases), (c0.programs, c0.erases));
    assert_eq!(fs.health(), Health::ReadOnly(ReadOnlyReason::Salvage));
}

/// A window block flagged by reads of its own pages (the data head's block after a
/// clean mount): `gc_step` scrubs it (the data head leaves it, a checkpoint settles
/// it, collection moves it) and every byte reads back, also after a crash and after a
/// remount.
#[test]
fn flagged_window_block_moves_and_reads_back() {
    for crash in [false, true] {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(4));
        let (id, d, p) = flagged_window_store(&mut sim, true);
        let b = p / sim.geometry().pages_per_block();
        let mut fs = Fs::mounted(&mut sim).unwrap();
        for _ in 0..40 {
            read_check(&mut fs, id, &d);
            fs.gc_step(8).unwrap();
        }
        let bi = fs.blocks()[b as usize];
        println!(
            "block {b} after 40 reads and steps: {bi:?}, {} checkpoints",
            fs.stats().checkpoints
        );
        assert!(
            bi.valid() == 0,
            "the flagged block still holds {} valid pages",
            bi.valid()
        );
        if crash {
            drop(fs);
        } else {
            fs.unmount().unwrap();
            drop(fs);
        }
        let mut fs = Fs::mounted(&mut sim).unwrap();
        read_check(&mut fs, id, &d);
        drop(fs);
        assert_eq!(sim.counters().misuse, 0);
    }
}

/// `Dev::reset` (every mount and format) clears the block table and the heads but not
/// the probe's pending finding (`disturbed`, `probes`): a store mounted again in place
/// acts at its first `gc_step` on a block the previous session flagged, before
/// reading anything.
#[test]
fn pending_finding_survives_a_mount_in_place() {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(4));
    let (id, d, _) = flagged_window_store(&mut sim, true);
    let mut fs = Fs::mounted(&mut sim).unwrap();
    read_check(&mut fs, id, &d); // flags the data head's block
    fs.unmount().unwrap();
    fs.mount().unwrap(); // in place, same value: nothing read yet
    let c0 = fs.stats().checkpoints;
    fs.gc_step(8).unwrap();
    let with_stale = fs.stats().checkpoints - c0;
    fs.unmount().unwrap();
    drop(fs);
    let mut fs = Fs::mounted(&mut sim).unwrap();
    let c0 = fs.stats().checkpoints;
    fs.gc_step(8).unwrap();
    let fresh = fs.stats().checkpoints - c0;
    println!(
        "first gc_step after a mount in place: {with_stale} checkpoints; in a new value: {fresh}"
    );
    assert_eq!(
        with_stale, fresh,
        "a finding of the previous session acted on after the mount"
    );
}

// ---------------------------------------------------------------------------------------
// The erased-ahead prefix under failing erases: long runs, no cut.

/// Runs `s` uncut under `faults`, then mounts again (cleanly, and after dropping the
/// store without unmount) and compares with the acknowledged state; the simulator
/// reports a program into a page not erased since its last program as misuse.
fn soak(
    s: &Mixed,
    seed: u64,
    faults: FaultConfig,
    crash_at: Option<usize>,
) -> Result<String, String> {
    let mut nand = Sim::heap(s.profile, FaultPlan::seeded(seed));
    let mut o = s.setup(&mut nand)?;
    nand.arm(FaultPlan {
        seed,
        cut: None,
        faults,
    });
    let ops = match crash_at {
        Some(n) => Mixed {
            name: s.name.clone(),
            profile: s.profile,
            window: s.window,
            preload: Vec::new(),
            ops: s.ops[..n.min(s.ops.len())].to_vec(),
        },
        None => Mixed {
            name: s.name.clone(),
            profile: s.profile,
            window: s.window,
            preload: Vec::new(),
            ops: s.ops.clone(),
        },
    };
    if crash_at.is_some() {
        // The workload without its unmount: a power cut after the last operation.
        let mut fs = Fs::mounted(&mut nand).map_err(|e| format!("mount: {e:?}"))?;
        for (i, op) in ops.ops.iter().enumerate() {
            match run_op(&mut fs, &o.acked.durable, op) {
                Ok(()) => o.acked = o.acked.apply(op),
                Err(OpError::NoSpace) => {}
                Err(e) if is_read_only_stop(&fs) => {
                    let _ = e;
                    break;
                }
                Err(e) => return Err(format!("op {i} {op:?}: {e:?} ({:?})", fs.health())),
            }
        }
    } else {
        ops.run(&mut nand, &mut o)?;
    }
    if let Some(m) = nand.last_misuse() {
        return Err(format!("device rule broken: {m:?}"));
    }
    let c = nand.counters();
    ops.check(&mut nand, &o).map_err(|e| format!("{e:?}"))?;
    if let Some(m) = nand.last_misuse() {
        return Err(format!("device rule broken after the check: {m:?}"));
    }
    Ok(format!(
        "{} program failures, {} erase failures, {} nospace",
        c.program_failures,
        c.erase_failures,
        o.nospace.len()
    ))
}

/// Windows of 4 to 8 blocks, 3 % of erases failing (each failure drops a block from the
/// window list between its erased-ahead prefix and the rest, or fails a head's erase),
/// with and without failing programs; every run ends with a clean remount and with a
/// crash remount.
#[test]
fn erase_failures_keep_the_erased_prefix_right() {
    let mut bad = Vec::new();
    let mut n = 0;
    for (w, objs, pages) in [(4u16, 5usize, 16usize), (5, 6, 16), (6, 6, 20), (8, 6, 18)] {
        for seed in 1..=15u64 {
            let s = mixed(&format!("soak-w{w}"), w, objs, pages, 600, 100 + seed);
            for faults in [
                FaultConfig {
                    erase_fail_ppm: 30_000,
                    ..FaultConfig::default()
                },
                FaultConfig {
                    erase_fail_ppm: 30_000,
                    program_fail_ppm: 5_000,
                    read_correctable_ppm: 20_000,
                    ..FaultConfig::default()
                },
            ] {
                for crash in [None, Some(150), Some(400)] {
                    n += 1;
                    if let Err(e) = soak(&s, seed, faults, crash) {
                        bad.push(format!(
                            "{} seed {seed} {faults:?} crash {crash:?}: {e}",
                            s.name
                        ));
                    }
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {n} runs:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// Every cut of a short mixed workload on a 4-block window, clean and random tears,
/// each followed by cuts at the first, middle and last operation of its recovery.
#[test]
fn every_cut_with_recovery_cuts_w4() {
    let s = mixed("mixed-rc-w4", 4, 6, 20, 30, 31);
    let mut sw = Sweep::exhaustive(31);
    sw.kinds = vec![CutKind::Clean, CutKind::Torn(TornMode::Random)];
    sw.recovery_cuts = RecoveryCuts::Sample;
    sw.max_failures = 3;
    let r = sweep_report(&s, &sw);
    r.assert_ok();
}

/// Every cut, every kind, on the part without ECC (in-band tags: a torn or failed
/// program there can read erased where the scan looks), 4- and 6-block windows.
#[test]
fn every_cut_raw_part() {
    let mut fails = Vec::new();
    for (w, seed) in [(4u16, 41u64), (6, 42)] {
        let mut s = mixed(&format!("mixed-raw-w{w}"), w, 6, 20, 40, seed);
        s.profile = tiny_raw();
        let mut sw = Sweep::exhaustive(seed);
        sw.max_failures = 3;
        let r = sweep_report(&s, &sw);
        fails.extend(r.failures);
    }
    assert!(fails.is_empty(), "{fails:#?}");
}

// ---------------------------------------------------------------------------------------
// Room: erasing ahead must not refuse operations the window holds.

/// A store at `fill` of its capacity (objects of 8 pages), then `n` log appends with
/// trims keeping the stream short, interleaved with overwrites of the objects (the
/// overwrite rewrites in place, not growing): the operations refused with `NoSpace`.
fn near_full(
    window: u16,
    fill: f64,
    n: u32,
    faults: FaultConfig,
    seed: u64,
) -> (Vec<String>, u64, u64) {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
    let mut fs = Fs::formatted(&mut sim, wcfg(window)).unwrap();
    let cap = fs.capacity_pages();
    let mut objs = Vec::new();
    while (fs.used_pages() as f64) < fill * cap as f64 - 10.0 {
        let id = fs.create(ObjKind::Object).unwrap();
        fs.write(id, 0, &bytes(id, 8 * 2048)).unwrap();
        fs.sync().unwrap();
        objs.push(id);
    }
    let log = fs.create(ObjKind::Log).unwrap();
    fs.unmount().unwrap();
    fs.mount().unwrap();
    fs.flash_mut().arm(FaultPlan {
        seed,
        cut: None,
        faults,
    });
    let mut refused = Vec::new();
    let mut r = Rng(seed | 1);
    let mut live = 0u32;
    for k in 0..n {
        let res = match r.below(10) {
            0..=5 => fs
                .log_append(log, &bytes(k, 20 + r.below(300) as usize))
                .map(|_| ()),
            6 => {
                if live > 12 {
                    let (start, end) = fs.log_bounds(log).unwrap();
                    fs.log_trim(log, start + (end - start) / 2)
                } else {
                    Ok(())
                }
            }
            7 | 8 => {
                let id = objs[r.below(objs.len() as u64) as usize];
                let off = r.below(8) * 2048;
                fs.write(id, off, &bytes(k, 2048))
                    .and_then(|()| fs.flush(id))
            }
            _ => fs.gc_step(8).map(|_| ()),
        };
        match res {
            Ok(()) => live += 1,
            // Refusals near capacity (and after failed erases shrank it) are documented.
            Err(WriteError::NoSpace) if fs.used_pages() * 4 >= fs.capacity_pages() * 3 => {}
            Err(WriteError::NoSpace) => refused.push(format!(
                "op {k}: NoSpace at {} of {} pages",
                fs.used_pages(),
                fs.capacity_pages()
            )),
            Err(WriteError::ReadOnly) => break,
            Err(e) => panic!("op {k}: {e:?} ({:?})", fs.health()),
        }
    }
    let out = (refused, fs.used_pages(), fs.capacity_pages());
    fs.unmount().ok();
    assert_eq!(sim.counters().misuse, 0);
    out
}

/// Logs appended and trimmed and objects rewritten at 70 % to 90 % of capacity, windows
/// of 4 to 6 blocks, without faults and with 2 % of erases failing: nothing is refused
/// below 75 % of the capacity at the time. (Window 4 refuses at 81 % and 91 % without
/// faults, as it did before stop 34: the same counts at 9c94154.)
#[test]
fn near_full_log_appends_are_not_refused() {
    let mut bad = Vec::new();
    for w in [4u16, 5, 6] {
        for fill in [0.7, 0.8, 0.9] {
            for (fname, f) in [
                ("no faults", FaultConfig::default()),
                (
                    "2% erase failures",
                    FaultConfig {
                        erase_fail_ppm: 20_000,
                        ..FaultConfig::default()
                    },
                ),
            ] {
                for seed in 1..=3 {
                    let (refused, used, cap) = near_full(w, fill, 1500, f, seed);
                    if !refused.is_empty() {
                        bad.push(format!(
                            "window {w}, fill {fill}, {fname}, seed {seed}: {} refused (end {used} of {cap}), first {:?}",
                            refused.len(),
                            refused.first()
                        ));
                    }
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
