//! `oftl` operations with a power cut, against a model: a sequence of writes, truncates,
//! flushes, syncs, GC steps, log appends (large, small ones that continue a page with
//! partial programs, and batches under one commit) and trims and remounts on three
//! objects and a log stream of a store on the simulated `TINY` part, with the power cut at a
//! fuzzer-chosen program/erase (clean or torn) and, as the fuzzer chooses, failed
//! programs (all four shapes), transient uncorrectable reads anywhere, unstable pages
//! and an aimed run of failing reads during the recovery after the cut. After the cut
//! the store is mounted again: each object must hold one of the states its write
//! history allows (the state at its last acknowledged `flush`/`sync`/unmount, or that
//! state with a prefix of the later writes applied, the one in flight included), and
//! the log every acknowledged record in order, the one in flight possibly added and a
//! trim in flight possibly applied. Nothing may panic; a misuse of the NAND is a
//! failure.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nand_hal::sim::profile::TINY;
use nand_hal::sim::{CutKind, FaultConfig, FaultPlan, HeapStorage, SimNand, TornMode};
use oftl::{Config, Greedy, ObjKind, Oftl};

type Sim = SimNand<HeapStorage>;
type Store<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 2>;

const CONFIG: Config = Config::new().window_blocks(6);

const OBJECTS: usize = 3;
const MAX_SIZE: u64 = 48 << 10;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Op {
    Write {
        obj: u8,
        offset: u16,
        len: u16,
        fill: u8,
    },
    Truncate {
        obj: u8,
        size: u16,
    },
    Flush {
        obj: u8,
    },
    Sync,
    Gc {
        budget: u8,
    },
    Append {
        len: u16,
        fill: u8,
    },
    /// A small record: one sector, continuing the log's open page.
    AppendSmall {
        len: u8,
        fill: u8,
    },
    /// 1 to 3 records under one commit.
    Batch {
        n: u8,
        len: u8,
        fill: u8,
    },
    Trim {
        records: u8,
    },
    Remount,
}

#[derive(Arbitrary, Debug)]
struct Input {
    seed: u64,
    cut_at: u16,
    cut_kind: u8,
    unstable: bool,
    /// bit 0: failed programs; bit 1: transient uncorrectable reads; bit 2: a run of
    /// failing reads aimed at the recovery after the cut.
    faults: u8,
    recovery_read: u16,
    recovery_read_len: u8,
    ops: Vec<Op>,
}

/// The log stream's acknowledged records, and an append or trim in flight.
#[derive(Clone, Default)]
struct LogModel {
    records: Vec<Vec<u8>>,
    /// Records dropped from the front of `records` by an acknowledged trim are gone;
    /// a trim in flight may or may not have dropped this many.
    trim_in_flight: Option<usize>,
    /// The records of an append (or batch) in flight: all of them or none.
    append_in_flight: Option<Vec<Vec<u8>>>,
}

/// One object's history since its last durable point.
#[derive(Clone, Default)]
struct History {
    durable: Vec<u8>,
    later: Vec<Vec<u8>>,
}

impl History {
    fn current(&self) -> &Vec<u8> {
        self.later.last().unwrap_or(&self.durable)
    }
    fn push(&mut self, state: Vec<u8>) {
        self.later.push(state);
    }
    fn durable_now(&mut self) {
        if let Some(s) = self.later.pop() {
            self.durable = s;
        }
        self.later.clear();
    }
    fn allows(&self, state: &[u8]) -> bool {
        self.durable == state || self.later.iter().any(|s| s == state)
    }
}

fn cut_kind(k: u8) -> CutKind {
    match k % 5 {
        0 => CutKind::Clean,
        1 => CutKind::Torn(TornMode::SomeBits),
        2 => CutKind::Torn(TornMode::MostBits),
        3 => CutKind::Torn(TornMode::Prefix),
        _ => CutKind::Torn(TornMode::Random),
    }
}

fuzz_target!(|input: Input| {
    let mut sim = SimNand::heap(TINY, FaultPlan::seeded(input.seed));
    let mut ids = [0u32; OBJECTS];
    let log_id;
    let mut model: [History; OBJECTS] = Default::default();
    let mut log = LogModel::default();
    {
        let mut fs = Store::new(&mut sim, CONFIG, Greedy::DEFAULT);
        fs.format().expect("format on a perfect device");
        for id in &mut ids {
            *id = fs.create(ObjKind::Object).expect("create");
        }
        log_id = fs.create(ObjKind::Log).expect("create log");
        fs.sync().expect("sync");
    }
    let faults = FaultConfig {
        unstable_after_cut: input.unstable,
        program_fail_ppm: if input.faults & 1 != 0 { 20_000 } else { 0 },
        read_uncorrectable_ppm: if input.faults & 2 != 0 { 5_000 } else { 0 },
        ..FaultConfig::default()
    };
    let plan = FaultPlan::seeded(input.seed)
        .with_faults(faults)
        .with_cut(1 + input.cut_at as u64 % 400, cut_kind(input.cut_kind));
    sim.arm(plan);

    run_ops(&mut sim, &ids, log_id, &mut model, &mut log, &input.ops);
    let recovery_faults = FaultConfig {
        read_fail_at: if input.faults & 4 != 0 {
            1 + input.recovery_read as u32 % 400
        } else {
            0
        },
        // Transient: fewer failures in a row than the store retries (and no random
        // read errors on top, which could make the run one longer).
        read_fail_len: 1 + input.recovery_read_len as u32 % 3,
        read_uncorrectable_ppm: if input.faults & 4 != 0 {
            0
        } else {
            faults.read_uncorrectable_ppm
        },
        ..faults
    };
    check_after_cut(&mut sim, &ids, log_id, &model, &log, recovery_faults);
});

/// Runs the operations until they end or one fails (the power cut); the store is then
/// dropped without unmounting.
fn run_ops(
    sim: &mut Sim,
    ids: &[u32; OBJECTS],
    log_id: u32,
    model: &mut [History; OBJECTS],
    log: &mut LogModel,
    ops: &[Op],
) {
    // Mounting may itself program (and so be cut).
    let mut fs = Store::new(sim, CONFIG, Greedy::DEFAULT);
    if fs.mount().is_err() {
        return;
    }
    for op in ops.iter().take(48) {
        let mut pushed = None;
        let done = match *op {
            Op::Write {
                obj,
                offset,
                len,
                fill,
            } => {
                let o = obj as usize % OBJECTS;
                let mut next = model[o].current().clone();
                let offset = (offset as u64 * 4).min(MAX_SIZE);
                let len = (len as u64 % 6000).min(MAX_SIZE - offset) as usize;
                let end = offset as usize + len;
                if len > 0 {
                    if next.len() < end {
                        next.resize(end, 0);
                    }
                    next[offset as usize..end].fill(fill);
                }
                model[o].push(next);
                pushed = Some(o);
                fs.write(ids[o], offset, &vec![fill; len])
            }
            Op::Truncate { obj, size } => {
                let o = obj as usize % OBJECTS;
                let size = (size as u64 * 2).min(MAX_SIZE);
                let mut next = model[o].current().clone();
                next.resize(size as usize, 0);
                model[o].push(next);
                pushed = Some(o);
                fs.truncate(ids[o], size)
            }
            Op::Flush { obj } => {
                let o = obj as usize % OBJECTS;
                let r = fs.flush(ids[o]);
                if r.is_ok() {
                    model[o].durable_now();
                }
                r
            }
            Op::Sync => {
                let r = fs.sync();
                if r.is_ok() {
                    model.iter_mut().for_each(History::durable_now);
                }
                r
            }
            Op::Gc { budget } => fs.gc_step(budget as u32 % 8 + 1).map(|_| ()),
            Op::Append { .. } | Op::AppendSmall { .. } | Op::Batch { .. } => {
                let recs = records_of(op, fs.log_max_record());
                let refs: Vec<&[u8]> = recs.iter().map(|r| &r[..]).collect();
                log.append_in_flight = Some(recs.clone());
                let r = fs.log_append_batch(log_id, &refs).map(|_| ());
                if r.is_ok() {
                    log.records.extend(recs);
                }
                log.append_in_flight = None;
                r
            }
            Op::Trim { records } => {
                let n = (records as usize).min(log.records.len());
                // The LSN after the n-th live record.
                let mut lsn = fs.log_bounds(log_id).map(|b| b.0).unwrap_or(0);
                let mut buf = vec![0u8; fs.log_max_record()];
                for _ in 0..n {
                    match fs.log_read(log_id, lsn, &mut buf) {
                        Ok(Some(r)) => lsn = r.next,
                        _ => return,
                    }
                }
                log.trim_in_flight = Some(n);
                let r = fs.log_trim(log_id, lsn);
                if r.is_ok() {
                    log.records.drain(..n);
                }
                log.trim_in_flight = None;
                r
            }
            Op::Remount => {
                if fs.unmount().is_err() {
                    return;
                }
                model.iter_mut().for_each(History::durable_now);
                if fs.mount().is_err() {
                    return;
                }
                Ok(())
            }
        };
        match done {
            Ok(()) => {}
            // Refused before anything changed (space, size): the operation did not happen.
            Err(oftl::WriteError::NoSpace) | Err(oftl::WriteError::TooLarge) => {
                if let Some(o) = pushed {
                    model[o].later.pop();
                }
            }
            // The cut (or a device failure): the operation is in flight.
            Err(_)
                if matches!(
                    op,
                    Op::Append { .. } | Op::AppendSmall { .. } | Op::Batch { .. } | Op::Trim { .. }
                ) =>
            {
                if !matches!(op, Op::Trim { .. }) {
                    log.append_in_flight = Some(records_of(op, fs.log_max_record()));
                }
                if let Op::Trim { records } = *op {
                    log.trim_in_flight = Some((records as usize).min(log.records.len()));
                }
                return;
            }
            Err(_) => return,
        }
    }
}

fn check_after_cut(
    sim: &mut Sim,
    ids: &[u32; OBJECTS],
    log_id: u32,
    model: &[History; OBJECTS],
    log: &LogModel,
    faults: FaultConfig,
) {
    assert_eq!(
        sim.counters().misuse,
        0,
        "the store broke a NAND rule: {:?}",
        sim.last_misuse()
    );
    sim.power_on();
    // The recovery runs with the fuzzer's read faults (transient ones only).
    sim.arm(FaultPlan {
        seed: sim.plan().seed ^ 0x5eed,
        cut: None,
        faults: FaultConfig {
            program_fail_ppm: 0,
            ..faults
        },
    });
    let mut fs = Store::new(&mut *sim, CONFIG, Greedy::DEFAULT);
    fs.mount().expect("mount after the cut");
    fs.flash_mut().disarm();
    let mut buf = vec![0u8; MAX_SIZE as usize];
    for (o, &id) in ids.iter().enumerate() {
        let size = fs.size(id).expect("object lost") as usize;
        assert!(size <= MAX_SIZE as usize, "object {o} grew to {size}");
        let n = fs
            .read(id, 0, &mut buf[..size])
            .expect("read after recovery");
        assert_eq!(n, size);
        assert!(
            model[o].allows(&buf[..size]),
            "object {o}: state after the cut is not in its history"
        );
    }
    // The log: the acknowledged records, possibly with the append in flight added,
    // possibly with the trim in flight applied.
    let mut seen = Vec::new();
    let (mut lsn, _) = fs.log_bounds(log_id).expect("log lost");
    let mut rb = vec![0u8; fs.log_max_record()];
    while let Some(r) = fs
        .log_read(log_id, lsn, &mut rb)
        .expect("log read after recovery")
    {
        seen.push(rb[..r.len].to_vec());
        lsn = r.next;
    }
    let mut allowed = vec![log.records.clone()];
    if let Some(a) = &log.append_in_flight {
        let mut with = log.records.clone();
        with.extend(a.iter().cloned());
        allowed.push(with);
    }
    if let Some(n) = log.trim_in_flight {
        allowed.push(log.records[n.min(log.records.len())..].to_vec());
    }
    assert!(
        allowed.contains(&seen),
        "log after the cut: {} records {:?}, none of the allowed states {:?}",
        seen.len(),
        seen.iter().map(|r| r.len()).collect::<Vec<_>>(),
        allowed
            .iter()
            .map(|a| a.iter().map(|r| r.len()).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        fs.flash().counters().misuse,
        0,
        "recovery broke a NAND rule"
    );
}

/// The records an append operation writes.
fn records_of(op: &Op, max: usize) -> Vec<Vec<u8>> {
    match *op {
        Op::Append { len, fill } => vec![vec![fill; len as usize % (max + 1)]],
        Op::AppendSmall { len, fill } => vec![vec![fill; len as usize % 200]],
        Op::Batch { n, len, fill } => (0..1 + n % 3)
            .map(|i| vec![fill ^ i; len as usize % 300])
            .collect(),
        _ => Vec::new(),
    }
}
