//! `oftl` operations with a power cut, against a model: a sequence of writes, truncates,
//! flushes, syncs, GC steps and remounts on three objects of a store on the simulated
//! `TINY` part, with the power cut at a fuzzer-chosen program/erase (clean or torn). After
//! the cut the store is mounted again, and each object must hold one of the states its
//! write history allows: the state at its last acknowledged `flush`/`sync`/unmount, or
//! that state with a prefix of the later writes applied (the one in flight included).
//! Nothing may panic; a misuse of the NAND is a failure.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nand_hal::sim::profile::TINY;
use nand_hal::sim::{CutKind, FaultConfig, FaultPlan, HeapStorage, SimNand, TornMode};
use oftl::{Config, ObjKind, Oftl};

type Sim = SimNand<HeapStorage>;
type Store<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 2>;

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
    Remount,
}

#[derive(Arbitrary, Debug)]
struct Input {
    seed: u64,
    cut_at: u16,
    cut_kind: u8,
    unstable: bool,
    ops: Vec<Op>,
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
    let mut model: [History; OBJECTS] = Default::default();
    {
        let mut fs = Store::format(
            &mut sim,
            Config {
                window_blocks: 6,
                format_id: 1,
            },
        )
        .expect("format on a perfect device");
        for id in &mut ids {
            *id = fs.create(ObjKind::Object).expect("create");
        }
        fs.sync().expect("sync");
    }
    let plan = FaultPlan::seeded(input.seed)
        .with_faults(FaultConfig {
            unstable_after_cut: input.unstable,
            ..FaultConfig::default()
        })
        .with_cut(1 + input.cut_at as u64 % 400, cut_kind(input.cut_kind));
    sim.arm(plan);

    run_ops(&mut sim, &ids, &mut model, &input.ops);
    check_after_cut(&mut sim, &ids, &model);
});

/// Runs the operations until they end or one fails (the power cut); the store is then
/// dropped without unmounting.
fn run_ops(sim: &mut Sim, ids: &[u32; OBJECTS], model: &mut [History; OBJECTS], ops: &[Op]) {
    // Mounting may itself program (and so be cut).
    let Ok(mut fs) = Store::mount(sim) else {
        return;
    };
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
            Op::Remount => {
                let flash = match fs.unmount() {
                    Ok(flash) => flash,
                    Err(_) => return,
                };
                model.iter_mut().for_each(History::durable_now);
                match Store::mount(flash) {
                    Ok(f) => {
                        fs = f;
                        Ok(())
                    }
                    Err(_) => return,
                }
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
            Err(_) => return,
        }
    }
}

fn check_after_cut(sim: &mut Sim, ids: &[u32; OBJECTS], model: &[History; OBJECTS]) {
    assert_eq!(
        sim.counters().misuse,
        0,
        "the store broke a NAND rule: {:?}",
        sim.last_misuse()
    );
    sim.power_on();
    sim.disarm();
    let mut fs = Store::mount(&mut *sim).expect("mount after the cut");
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
    assert_eq!(
        fs.flash().counters().misuse,
        0,
        "recovery broke a NAND rule"
    );
}
