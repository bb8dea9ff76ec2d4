//! File-layer operations with a power cut, against a tree model: directories made and
//! removed, files written (inline and with objects), appended with fsync (the staging
//! log), truncated, removed, renamed (over files and empty directories, across
//! directories), syncs, on the simulated `TINY` part, with the power cut at a
//! fuzzer-chosen program/erase (clean or torn) and, as the fuzzer chooses, failed
//! programs, transient uncorrectable reads and unstable pages. After the cut the volume
//! is mounted again (replaying the staging log) and its whole tree must equal the
//! acknowledged state or one the operation in flight may leave, and no object may be
//! left that no path names (`Fs::unnamed_objects`). Nothing may panic; a
//! valid request refused while the power is on, or a misuse of the NAND, is a failure.

#![no_main]

#[path = "../../crates/stagefs-core/tests/model/mod.rs"]
mod model;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use model::{apply, effects, is_refusal, observe, valid, Op, Store, Tree, Vol};
use nand_hal::sim::profile::TINY;
use nand_hal::sim::{CutKind, FaultConfig, FaultPlan, SimNand, TornMode};
use oftl::{Config, Greedy};
use stagefs_core::Fs;

const CONFIG: Config = Config::new().window_blocks(6);

const PATHS: [&str; 10] = [
    "/a", "/b", "/a/c", "/f", "/g", "/a/f", "/a/g", "/b/f", "/a/c/f", "/b/c",
];

#[derive(Arbitrary, Debug, Clone, Copy)]
enum FOp {
    Mkdir(u8),
    Rmdir(u8),
    Put(u8, u16, u8),
    Append(u8, u16, u8),
    Truncate(u8, u16),
    Remove(u8),
    Rename(u8, u8),
    Sync,
    /// `Fs::unnamed_objects`: a writable volume never leaves an object no path names.
    Unnamed,
}

#[derive(Arbitrary, Debug)]
struct Input {
    seed: u64,
    cut_at: u16,
    cut_kind: u8,
    unstable: bool,
    /// bit 0: failed programs; bit 1: transient uncorrectable reads.
    faults: u8,
    ops: Vec<FOp>,
}

fn path(i: u8) -> &'static str {
    PATHS[i as usize % PATHS.len()]
}

fn op_of(f: FOp) -> Op {
    match f {
        FOp::Mkdir(p) => Op::Mkdir(path(p)),
        FOp::Rmdir(p) => Op::Rmdir(path(p)),
        FOp::Put(p, len, s) => Op::Put(path(p), len as usize % 3000, s),
        FOp::Append(p, len, s) => Op::Append(path(p), 1 + len as usize % 700, s),
        FOp::Truncate(p, size) => Op::Truncate(path(p), size as usize % 4000),
        FOp::Remove(p) => Op::Remove(path(p)),
        FOp::Rename(a, b) => Op::Rename(path(a), path(b)),
        FOp::Sync => Op::Sync,
        FOp::Unnamed => unreachable!("not a tree operation"),
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
    {
        let mut fs: Vol<'_> = Fs::new(Store::new(&mut sim, CONFIG, Greedy::DEFAULT));
        fs.format().expect("format on a perfect device");
        fs.unmount().expect("unmount");
    }
    let faults = FaultConfig {
        unstable_after_cut: input.unstable,
        program_fail_ppm: if input.faults & 1 != 0 { 20_000 } else { 0 },
        read_uncorrectable_ppm: if input.faults & 2 != 0 { 3_000 } else { 0 },
        ..FaultConfig::default()
    };
    sim.arm(
        FaultPlan::seeded(input.seed)
            .with_faults(faults)
            .with_cut(1 + input.cut_at as u64 % 600, cut_kind(input.cut_kind)),
    );
    let mut now = Tree::new();
    let mut in_flight: Vec<Tree> = Vec::new();
    {
        let mut fs: Vol<'_> = Fs::new(Store::new(&mut sim, CONFIG, Greedy::DEFAULT));
        if fs.mount().is_ok() {
            for f in input.ops.iter().take(40) {
                if let FOp::Unnamed = f {
                    match fs.unnamed_objects() {
                        Ok(u) => assert!(u.is_empty(), "objects no path names: {u:?}"),
                        Err(e) => {
                            assert!(!is_refusal(&e), "unnamed_objects refused: {e:?}");
                            break;
                        }
                    }
                    continue;
                }
                let op = op_of(*f);
                if !valid(&now, &op) {
                    continue;
                }
                in_flight = effects(&now, &op);
                match apply(&mut fs, &op) {
                    Ok(()) => {
                        now = in_flight.pop().expect("a final state");
                        in_flight.clear();
                    }
                    Err(e) => {
                        assert!(!is_refusal(&e), "{op:?} refused: {e:?}");
                        break;
                    }
                }
            }
        }
    }
    assert_eq!(
        sim.counters().misuse,
        0,
        "the volume broke a NAND rule: {:?}",
        sim.last_misuse()
    );
    sim.power_on();
    sim.arm(FaultPlan {
        seed: sim.plan().seed ^ 0x5eed,
        cut: None,
        faults: FaultConfig {
            unstable_after_cut: input.unstable,
            ..FaultConfig::default()
        },
    });
    let mut fs: Vol<'_> = Fs::new(Store::new(&mut sim, CONFIG, Greedy::DEFAULT));
    match fs.mount() {
        Ok(()) => {}
        // Failed programs retired so many blocks that the store is read-only: the
        // volume refuses to mount while staged records wait (documented).
        Err(stagefs_core::Error::ReadOnly) if fs.store().health() != oftl::Health::Writable => {
            return
        }
        Err(e) => panic!("mount after the cut: {e:?}"),
    }
    let seen = observe(&mut fs).expect("read back");
    // Nothing a cut leaves is an object no path names (a truncate-opened file's new
    // object is deleted by the replay).
    let unnamed = fs.unnamed_objects().expect("list the objects");
    assert!(unnamed.is_empty(), "objects no path names after the cut: {unnamed:?}");
    assert!(
        seen == now || in_flight.contains(&seen),
        "tree matches no allowed state:\n  seen {seen:?}\n  acknowledged {now:?}\n  in flight {in_flight:?}"
    );
});
