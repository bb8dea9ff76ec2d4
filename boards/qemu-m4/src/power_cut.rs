//! A torn power cut on a noisy device: write until the cut, power on, check that what
//! was acknowledged is still there.
//!
//! Workload: two good blocks in turn; each is erased, then its pages are programmed in
//! order, whole page plus the free spare bytes, each page with a fresh pattern seed. A
//! page is *acknowledged* when its program returned `Ok`; a RAM log holds acknowledged
//! pages and their seeds and forgets a block's pages as soon as the block is erased again
//! or retired. Device faults are handled the way a layer above the HAL must: a failed
//! program or erase retires the block (marked bad) and the workload moves on to the next
//! good block.
//!
//! Checks: the workload ends with `PowerLoss` at exactly the planned operation, the
//! device refuses I/O until power is back, one cut is counted and nothing was misused.
//! After `power_on`, every logged page reads back exactly (ECC may report corrected
//! bits). A read that fails as uncorrectable is retried: the noisy device adds transient
//! bit errors on reads, which on top of a persistent one (a program that landed with a
//! bit wrong) exceed the 1-bit ECC for that read only.

use core::fmt;

use heapless::Vec;
use nand_hal::sim::profile::TINY;
use nand_hal::sim::{SimNand, SliceStorage};
use nand_hal::{BlockAddr, Capabilities, ErrorKind, NandFlash, PageAddr};

type Sim<'a> = SimNand<SliceStorage<'a>>;

/// Reads of an acknowledged page before it counts as unreadable.
const READ_TRIES: u32 = 4;
/// Blocks written in turn.
const ROTATION: usize = 2;
/// Acknowledged pages the log can hold: every page of the blocks in the rotation.
const LOG_CAP: usize = ROTATION * TINY.geometry.pages_per_block() as usize;
/// Erase passes over the rotation before giving up on seeing the cut.
const MAX_PASSES: u32 = 64;

/// What the run saw.
pub struct Outcome {
    /// Pages acknowledged and still live (not erased or retired) at the cut.
    pub acked: usize,
    /// Of those, pages that read back with no corrected bit.
    pub exact: usize,
    /// Pages that read back exactly after ECC corrected bits.
    pub corrected: usize,
    /// Reads that failed as uncorrectable and were retried.
    pub retried_reads: u32,
    /// Blocks retired after a program or erase failure.
    pub retired: u32,
}

/// A failed check.
pub enum Failure {
    /// An operation failed in a way the workload does not expect.
    Unexpected { op: &'static str, kind: ErrorKind },
    /// The workload ran `MAX_PASSES` passes without a cut.
    NoCut,
    /// The cut fired at another operation than the plan says.
    CutAt { expected: u64, got: u64 },
    /// A read with the power off did not fail with `PowerLoss`.
    IoWithoutPower,
    /// Counters after the cut or the read-back are wrong.
    Counters { power_cuts: u64, misuse: u64 },
    /// An acknowledged page read back different data.
    Mismatch { page: u32 },
    /// An acknowledged page stayed uncorrectable for `READ_TRIES` reads.
    Unreadable { page: u32 },
    /// No good block left for the workload.
    OutOfBlocks,
    /// More acknowledged pages than the blocks in the rotation hold.
    LogFull,
    /// The scratch buffer is smaller than two raw pages.
    BufferTooSmall,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Unexpected { op, kind } => write!(f, "{op}: unexpected error: {kind}"),
            Failure::NoCut => write!(f, "no power cut after {MAX_PASSES} passes"),
            Failure::CutAt { expected, got } => {
                write!(f, "cut at operation {got}, planned at {expected}")
            }
            Failure::IoWithoutPower => {
                f.write_str("a read with the power off did not fail with PowerLoss")
            }
            Failure::Counters { power_cuts, misuse } => {
                write!(f, "counters: {power_cuts} power cuts, {misuse} misuse")
            }
            Failure::Mismatch { page } => write!(f, "acknowledged page {page} reads back wrong"),
            Failure::Unreadable { page } => write!(f, "acknowledged page {page} unreadable"),
            Failure::OutOfBlocks => f.write_str("no good block left"),
            Failure::LogFull => f.write_str("acknowledged-page log overflow"),
            Failure::BufferTooSmall => f.write_str("scratch buffer too small"),
        }
    }
}

/// A page whose program was acknowledged, and the seed of its pattern.
#[derive(Clone, Copy)]
struct Ack {
    page: PageAddr,
    seed: u32,
}

/// Runs the workload on `sim` (armed with a plan that has a power cut) and checks the
/// device after the cut. `scratch` holds at least two raw pages.
pub fn run(sim: &mut Sim<'_>, scratch: &mut [u8]) -> Result<Outcome, Failure> {
    let g = sim.geometry();
    let caps = *sim.capabilities();
    let (ps, os) = (g.page_size() as usize, g.oob_size() as usize);
    if scratch.len() < 2 * (ps + os) {
        return Err(Failure::BufferTooSmall);
    }
    let (w, r) = scratch.split_at_mut(ps + os);
    let (w_data, w_oob) = w.split_at_mut(ps);
    let (r_data, r_oob) = r[..ps + os].split_at_mut(ps);
    let planned = sim.plan().cut.map_or(0, |c| c.at_op);

    let mut log: Vec<Ack, LOG_CAP> = Vec::new();
    let mut retired = 0;
    let mut scan = BlockAddr(0);
    let mut rotation = [BlockAddr(0); ROTATION];
    for slot in rotation.iter_mut() {
        *slot = next_good(sim, &mut scan)?;
    }

    let mut seed = 0u32;
    let mut stop = None;
    'passes: for pass in 0..MAX_PASSES {
        let slot = pass as usize % ROTATION;
        let block = rotation[slot];
        log.retain(|a| g.block_of(a.page) != block);
        match sim.erase(block) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::EraseFailed => {
                retire(sim, block)?;
                retired += 1;
                rotation[slot] = next_good(sim, &mut scan)?;
                continue;
            }
            Err(e) => {
                stop = Some(("erase", e.kind()));
                break;
            }
        }
        for i in 0..g.pages_per_block() {
            let page = g.page(block, i);
            seed += 1;
            fill(&caps, seed, w_data, w_oob);
            match sim.program_page(page, w_data, w_oob) {
                Ok(()) => log.push(Ack { page, seed }).map_err(|_| Failure::LogFull)?,
                Err(e) if e.kind() == ErrorKind::ProgramFailed => {
                    log.retain(|a| g.block_of(a.page) != block);
                    retire(sim, block)?;
                    retired += 1;
                    rotation[slot] = next_good(sim, &mut scan)?;
                    break;
                }
                Err(e) => {
                    stop = Some(("program", e.kind()));
                    break 'passes;
                }
            }
        }
    }

    // The cut.
    match stop {
        None => return Err(Failure::NoCut),
        Some((_, ErrorKind::PowerLoss)) => {}
        Some((op, kind)) => return Err(Failure::Unexpected { op, kind }),
    }
    if sim.ops_since_arm() != planned {
        return Err(Failure::CutAt {
            expected: planned,
            got: sim.ops_since_arm(),
        });
    }
    match sim.read_page(g.page(rotation[0], 0), r_data, r_oob) {
        Err(e) if e.kind() == ErrorKind::PowerLoss => {}
        _ => return Err(Failure::IoWithoutPower),
    }
    check_counters(sim)?;

    // Power back: everything acknowledged is there.
    sim.power_on();
    let mut out = Outcome {
        acked: log.len(),
        exact: 0,
        corrected: 0,
        retried_reads: 0,
        retired,
    };
    for ack in &log {
        let mut tries = 0;
        let report = loop {
            tries += 1;
            match sim.read_page(ack.page, r_data, r_oob) {
                Ok(report) => break report,
                Err(e) if e.kind() == ErrorKind::Uncorrectable && tries < READ_TRIES => {
                    out.retried_reads += 1;
                }
                Err(e) if e.kind() == ErrorKind::Uncorrectable => {
                    return Err(Failure::Unreadable { page: ack.page.0 })
                }
                Err(e) => {
                    return Err(Failure::Unexpected {
                        op: "read back",
                        kind: e.kind(),
                    })
                }
            }
        };
        fill(&caps, ack.seed, w_data, w_oob);
        if r_data != w_data || !free_bytes_equal(&caps, r_oob, w_oob) {
            return Err(Failure::Mismatch { page: ack.page.0 });
        }
        if report.corrected_bits == 0 {
            out.exact += 1;
        } else {
            out.corrected += 1;
        }
    }
    check_counters(sim)?;
    Ok(out)
}

fn check_counters(sim: &Sim<'_>) -> Result<(), Failure> {
    let c = sim.counters();
    if c.power_cuts != 1 || c.misuse != 0 {
        return Err(Failure::Counters {
            power_cuts: c.power_cuts,
            misuse: c.misuse,
        });
    }
    Ok(())
}

/// The next block after `scan` that is not marked bad (block 0 is never used).
fn next_good(sim: &mut Sim<'_>, scan: &mut BlockAddr) -> Result<BlockAddr, Failure> {
    let blocks = sim.geometry().blocks();
    while scan.0 + 1 < blocks {
        scan.0 += 1;
        match sim.is_bad(*scan) {
            Ok(false) => return Ok(*scan),
            Ok(true) => {}
            Err(e) => {
                return Err(Failure::Unexpected {
                    op: "is_bad",
                    kind: e.kind(),
                })
            }
        }
    }
    Err(Failure::OutOfBlocks)
}

fn retire(sim: &mut Sim<'_>, block: BlockAddr) -> Result<(), Failure> {
    sim.mark_bad(block).map_err(|e| Failure::Unexpected {
        op: "mark_bad",
        kind: e.kind(),
    })
}

/// The page pattern of `seed`: every data byte, and the free spare bytes (the rest of
/// the spare area, bad-block marker included, stays 0xFF).
fn fill(caps: &Capabilities, seed: u32, data: &mut [u8], oob: &mut [u8]) {
    let mut x = seed.wrapping_mul(0x9E37_79B9) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        (x >> 7) as u8
    };
    data.iter_mut().for_each(|b| *b = next());
    oob.fill(0xFF);
    for r in caps.oob.regions() {
        oob[r.offset as usize..r.end() as usize]
            .iter_mut()
            .for_each(|b| *b = next());
    }
}

fn free_bytes_equal(caps: &Capabilities, a: &[u8], b: &[u8]) -> bool {
    caps.oob.regions().iter().all(|r| {
        let range = r.offset as usize..r.end() as usize;
        a[range.clone()] == b[range]
    })
}
