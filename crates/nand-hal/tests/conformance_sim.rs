//! The conformance suite against the simulator, for every built-in profile.

use nand_hal::conformance::{self, Config};
use nand_hal::sim::{profile, FaultConfig, FaultPlan, SimNand, SliceStorage, StorageSize};
use nand_hal::NandFlash;

#[test]
fn every_profile_passes_with_rule_checks() {
    for p in profile::ALL {
        // Keep the big multi-die parts small: the suite only needs a couple of blocks.
        let p = if p.geometry.blocks() > 1024 {
            p.with_blocks_per_die(64)
        } else {
            p
        };
        let mut sim = SimNand::heap(p, FaultPlan::seeded(1));
        let mut scratch = vec![0u8; 2 * p.geometry.raw_page_size() as usize];
        let cfg = Config {
            rule_checks: true,
            mark_bad: true,
        };
        let report = conformance::run(&mut sim, &cfg, &mut scratch)
            .unwrap_or_else(|e| panic!("{}: {e}", p.name));
        let min = p.geometry.pages_per_block() + 15;
        assert!(
            report.checks >= min,
            "{}: only {} checks",
            p.name,
            report.checks
        );
        assert_eq!(
            sim.counters().misuse as u32,
            rule_violations_provoked(&p),
            "{}",
            p.name
        );
    }
}

/// The misuse the suite provokes on purpose: unaligned and short programs, plus with rule
/// checks an out-of-order program, an ECC step rewrite (ECC parts) and a NOP overrun.
fn rule_violations_provoked(p: &profile::Profile) -> u32 {
    let ecc = p.capabilities.ecc.kind != nand_hal::EccKind::None;
    2 + 1 + ecc as u32 + 1
}

#[test]
fn passes_over_caller_provided_storage_with_factory_bad_blocks() {
    let p = profile::TINY;
    let size = StorageSize::of(&p.geometry);
    let mut cells = vec![0u8; size.cells];
    let mut pages = vec![Default::default(); size.pages];
    let mut blocks = vec![Default::default(); size.blocks];
    let storage = SliceStorage::new(&p.geometry, &mut cells, &mut pages, &mut blocks).unwrap();
    let plan = FaultPlan::seeded(3).with_faults(FaultConfig {
        factory_bad: 8,
        ..Default::default()
    });
    let mut sim = SimNand::new(p, storage, plan).unwrap();
    let bad = (0..p.geometry.blocks())
        .filter(|&b| sim.is_bad(nand_hal::BlockAddr(b)).unwrap())
        .count();
    assert_eq!(bad, 8);
    let mut scratch = vec![0u8; 2 * p.geometry.raw_page_size() as usize];
    let report = conformance::run(&mut sim, &Config::default(), &mut scratch).unwrap();
    assert!(!sim.is_bad(report.block).unwrap());
}

#[test]
fn rejects_a_short_scratch_buffer() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(0));
    let mut scratch = [0u8; 100];
    assert_eq!(
        conformance::run(&mut sim, &Config::default(), &mut scratch).err(),
        Some(conformance::Failure::BufferTooSmall)
    );
}
