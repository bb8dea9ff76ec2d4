//! Read-only mounts take no block from the part for good.
//!
//! A store that cannot checkpoint (a salvage mount, a recovery replaying in RAM only on
//! a part with too few good blocks) replays the same window into its cache at every
//! mount and writes back what does not fit, into blocks the checkpoint calls free. Each
//! mount used to erase a fresh block for that; on a worn part the erases fail and retire
//! blocks, and the wear-out soak (`stagefs-core/tests/wear_out.rs`, seeds 1467 and
//! 8299) found parts whose read-only mounts ate the free blocks one by one until a mount
//! failed with `NoSpace`. Now a store that writes only cache pages continues the index
//! block an earlier mount began, in its erased pages, and erases only when that is full.

use crate::common;

use common::read_only::*;
use nand_hal::sim::{profile, FaultConfig, FaultPlan, SimNand};

/// 40 salvage mounts of one crashed store: every one reads every object; after the
/// first, they erase a block only when the one they continue is full.
#[test]
fn repeated_read_only_mounts_continue_one_index_block() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(3));
    let want = crashed_store(&mut sim);
    let mut programs = 0;
    let mut erases = 0;
    for m in 0..40 {
        let before = sim.counters();
        salvage_and_read(&mut sim, &want).unwrap_or_else(|e| panic!("mount {m}: {e}"));
        let c = sim.counters();
        if m > 0 {
            programs += c.programs - before.programs;
            erases += c.erases - before.erases;
        }
    }
    let ppb = 16;
    assert!(
        programs > 0,
        "the replay wrote nothing back: the test proves nothing"
    );
    assert!(
        erases <= programs.div_ceil(ppb) + 1,
        "39 read-only mounts: {erases} erases for {programs} cache pages written back"
    );
}

/// The same on a part whose erases fail one time in five (as the wear-out soak's worn
/// blocks do): 200 salvage mounts, every one reads every object. Each mount used to
/// erase a block for its 6 pages, and the failed erases retired one block every few
/// mounts: mount 73 (from 0) failed with `NoSpace`. Continuing a block takes an erase
/// every third mount or so: on this part mount 330 is the first to fail (a read
/// `Exhausted`).
#[test]
fn read_only_mounts_of_a_part_whose_erases_fail_keep_mounting() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(5));
    let want = crashed_store(&mut sim);
    sim.arm(FaultPlan::seeded(6).with_faults(FaultConfig {
        erase_fail_ppm: 200_000,
        ..FaultConfig::default()
    }));
    for m in 0..200 {
        salvage_and_read(&mut sim, &want).unwrap_or_else(|e| panic!("mount {m}: {e}"));
    }
}
