//! The step-aware read (`NandFlash::read_steps`) on a page whose third partial program
//! was torn by a power cut, beside two good steps: over the simulator of each part with
//! on-die ECC (page-wide status), over the SPI driver and chip model of each part in
//! the chip table, and over `SoftEcc` on a raw part (per-step status).

use nand_hal::ecc::{SoftEcc, Strength};
use nand_hal::sim::profile::{self, Profile};
use nand_hal::sim::{CutKind, FaultConfig, FaultPlan, HeapStorage, SimNand, TornMode};
use nand_hal::spi::model::{self as chip_model, ModelSpec};
use nand_hal::spi::{ChipModel, HostClock, SpiNand};
use nand_hal::{
    BlockAddr, EccReporting, Error, ErrorKind, ErrorType, NandFlash, PageAddr, ReadReport,
    StepReport, StepStatus,
};

type Sim = SimNand<HeapStorage>;

const MODES: [TornMode; 4] = [
    TornMode::Random,
    TornMode::Prefix,
    TornMode::SomeBits,
    TornMode::MostBits,
];

fn sector(seed: u8) -> Vec<u8> {
    (0..512u32)
        .map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed) | 1)
        .collect()
}

fn torn_plan(seed: u64, unstable: bool, mode: TornMode) -> FaultPlan {
    FaultPlan::seeded(seed)
        .with_cut(3, CutKind::Torn(mode))
        .with_faults(FaultConfig {
            unstable_after_cut: unstable,
            ..Default::default()
        })
}

/// Programs sectors 0 and 1 of a page with two partial programs, then starts the third
/// (sector 2), which the armed cut tears. Returns the page.
fn program_three<F: NandFlash>(f: &mut F) -> PageAddr {
    let p = f.geometry().page(BlockAddr(5), 0);
    for i in 0..2u32 {
        f.program(p, i * 512, &sector(i as u8), &[]).unwrap();
    }
    let e = f.program(p, 1024, &sector(2), &[]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PowerLoss);
    p
}

/// A simulator whose page has two good sectors and a torn third; powered on again.
fn torn_third_sector(
    profile: Profile,
    mode: TornMode,
    seed: u64,
    unstable: bool,
) -> (Sim, PageAddr) {
    let mut s = SimNand::heap(profile, torn_plan(seed, unstable, mode));
    let p = program_three(&mut s);
    s.power_on();
    s.disarm();
    (s, p)
}

/// Checks a step report and buffer against the torn page: sectors 0 and 1 hold their
/// data whatever the report says; the report's shape follows the part's reporting.
fn check(
    what: &str,
    reporting: EccReporting,
    report: &StepReport,
    data: &[u8],
    read_whole: Option<Result<ReadReport, ErrorKind>>,
) {
    for i in 0..2 {
        assert_eq!(
            &data[i * 512..(i + 1) * 512],
            &sector(i as u8)[..],
            "{what}: good sector {i} not delivered ({report:?})"
        );
    }
    assert!(
        data[1536..2048].iter().all(|&b| b == 0xFF),
        "{what}: unwritten sector 3 not erased"
    );
    let torn = report.step(2);
    match reporting {
        EccReporting::PageWide => {
            let first = report.step(0);
            assert!(
                report.steps().iter().all(|s| *s == first),
                "{what}: a page-wide part reports one status: {report:?}"
            );
            // Page-wide: a failed step fails `read` of the whole page.
            if let Some(r) = read_whole {
                assert_eq!(
                    r.is_err(),
                    first == StepStatus::Unknown,
                    "{what}: {report:?}"
                );
            }
        }
        EccReporting::PerStep => {
            assert!(
                report.step(0).is_good() && report.step(1).is_good(),
                "{what}: {report:?}"
            );
            assert!(report.step(3).is_good(), "{what}: {report:?}");
            if let Some(r) = read_whole {
                assert_eq!(r.is_err(), !torn.is_good(), "{what}: {report:?}");
            }
        }
    }
    if torn.is_good() {
        // A torn step that decodes holds all of its data or reads erased.
        let s2 = &data[1024..1536];
        assert!(
            s2 == &sector(2)[..] || s2.iter().all(|&b| b == 0xFF),
            "{what}: torn sector decoded to neither its data nor erased"
        );
    }
}

fn read_both<F: NandFlash>(
    f: &mut F,
    p: PageAddr,
) -> (StepReport, Vec<u8>, Result<ReadReport, ErrorKind>)
where
    <F as ErrorType>::Error: core::fmt::Debug,
{
    let ps = f.geometry().page_size() as usize;
    let os = f.geometry().oob_size() as usize;
    let mut data = vec![0u8; ps];
    let mut oob = vec![0u8; os];
    let report = f.read_steps(p, &mut data, &mut oob).expect("read_steps");
    let mut whole = vec![0u8; ps];
    let r = f.read(p, 0, &mut whole, &mut []).map_err(|e| e.kind());
    (report, data, r)
}

const ON_DIE: [Profile; 3] = [profile::W25N01GV, profile::GD5F1GQ4, profile::MT29F1G01];

#[test]
fn simulator_delivers_good_steps_beside_a_torn_one() {
    let mut seen_unknown = 0;
    for prof in ON_DIE {
        assert_eq!(prof.capabilities.ecc.reporting, EccReporting::PageWide);
        for mode in MODES {
            for seed in 0..8 {
                let (mut s, p) = torn_third_sector(prof, mode, seed, false);
                let (report, data, whole) = read_both(&mut s, p);
                let what = format!("{} {mode:?} seed {seed}", prof.name);
                check(&what, EccReporting::PageWide, &report, &data, Some(whole));
                // Sector 0 alone: on a page-wide part it fails with the page.
                let mut s0 = [0u8; 512];
                let r = s.read(p, 0, &mut s0, &mut []);
                assert_eq!(r.is_err(), report.page_wide_failure(), "{what}");
                if report.page_wide_failure() {
                    seen_unknown += 1;
                }
            }
        }
    }
    assert!(
        seen_unknown > 20,
        "torn programs should mostly fail: {seen_unknown}"
    );
}

#[test]
fn unstable_torn_step_never_spills_into_good_ones() {
    for prof in ON_DIE {
        for mode in MODES {
            let (mut s, p) = torn_third_sector(prof, mode, 11, true);
            let mut fails = 0;
            for n in 0..40 {
                let (report, data, whole) = read_both(&mut s, p);
                let what = format!("{} {mode:?} read {n}", prof.name);
                let _ = whole;
                check(&what, EccReporting::PageWide, &report, &data, None);
                fails += report.page_wide_failure() as u32;
            }
            if mode == TornMode::MostBits {
                // Read well at first, fails later: the unstable cells are in step 2.
                assert!(
                    fails > 0,
                    "{}: an unstable torn step never failed",
                    prof.name
                );
            }
        }
    }
}

#[test]
fn per_step_part_reports_each_step() {
    // A raw part under host ECC: one sector's failure is its own.
    for mode in MODES {
        for seed in 0..8 {
            let unstable = seed % 2 == 1;
            let s = SimNand::heap(profile::MT29F2G08, torn_plan(seed, unstable, mode));
            let mut f = SoftEcc::new(s, Strength::T4, 4).unwrap();
            let p = program_three(&mut f);
            f.inner_mut().power_on();
            f.inner_mut().disarm();
            assert_eq!(f.capabilities().ecc.reporting, EccReporting::PerStep);
            for n in 0..6 {
                let (report, data, whole) = read_both(&mut f, p);
                let what = format!("SoftEcc {mode:?} seed {seed} read {n}");
                check(
                    &what,
                    EccReporting::PerStep,
                    &report,
                    &data,
                    (!unstable).then_some(whole),
                );
                // Sector 0 alone always reads.
                let mut s0 = [0u8; 512];
                f.read(p, 0, &mut s0, &mut []).expect(&what);
                assert_eq!(&s0[..], &sector(0)[..], "{what}");
            }
        }
    }
}

fn specs() -> [(ModelSpec, Profile); 3] {
    [
        (chip_model::W25N01GV, profile::W25N01GV),
        (chip_model::GD5F1GQ4XA, profile::GD5F1GQ4),
        (chip_model::MT29F1G01ABAFD, profile::MT29F1G01),
    ]
}

#[test]
fn spi_driver_delivers_the_cache_on_an_uncorrectable_status() {
    let mut seen_unknown = 0;
    for (spec, prof) in specs() {
        for mode in MODES {
            for seed in 0..6 {
                let unstable = seed % 2 == 1;
                let (sim, p) = torn_third_sector(prof, mode, seed, unstable);
                let clock = HostClock::new();
                let chip = ChipModel::new(sim, spec, &clock).unwrap();
                let mut drv = SpiNand::new(chip, clock.delay()).unwrap();
                assert_eq!(
                    drv.capabilities().ecc.reporting,
                    EccReporting::PageWide,
                    "{}",
                    drv.chip().name
                );
                for n in 0..4 {
                    let (report, data, whole) = read_both(&mut drv, p);
                    let what = format!("{} {mode:?} seed {seed} read {n}", drv.chip().name);
                    check(
                        &what,
                        EccReporting::PageWide,
                        &report,
                        &data,
                        (!unstable).then_some(whole),
                    );
                    seen_unknown += report.page_wide_failure() as u32;
                }
                assert_eq!(drv.bus().protocol_violations(), 0);
            }
        }
    }
    assert!(seen_unknown > 20, "{seen_unknown}");
}

/// An implementation that only has `read`: the default `read_steps` reports every step
/// uncorrectable when the read fails and never hides the failure.
struct ReadOnly(Sim);

impl ErrorType for ReadOnly {
    type Error = <Sim as ErrorType>::Error;
}

impl NandFlash for ReadOnly {
    fn geometry(&self) -> nand_hal::Geometry {
        self.0.geometry()
    }
    fn capabilities(&self) -> &nand_hal::Capabilities {
        self.0.capabilities()
    }
    fn read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, Self::Error> {
        self.0.read(page, column, data, oob)
    }
    fn program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), Self::Error> {
        self.0.program(page, column, data, oob)
    }
    fn erase(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        self.0.erase(block)
    }
    fn is_bad(&mut self, block: BlockAddr) -> Result<bool, Self::Error> {
        self.0.is_bad(block)
    }
    fn mark_bad(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        self.0.mark_bad(block)
    }
}

#[test]
fn default_read_steps_is_built_on_read() {
    let (s, p) = torn_third_sector(profile::W25N01GV, TornMode::Random, 1, false);
    let mut f = ReadOnly(s);
    let mut data = vec![0u8; 2048];
    let report = f.read_steps(p, &mut data, &mut []).unwrap();
    assert_eq!(report.steps().len(), 4);
    assert!(report
        .steps()
        .iter()
        .all(|s| *s == StepStatus::Uncorrectable));
    assert_eq!(report.as_read_report(), None);
    // A healthy page: every step good, the same report `read` gives.
    let q = f.geometry().page(BlockAddr(6), 0);
    f.program(q, 0, &[0x5A; 2048], &[]).unwrap();
    let report = f.read_steps(q, &mut data, &mut []).unwrap();
    assert!(report.all_good());
    assert_eq!(report.as_read_report(), Some(ReadReport::clean(1)));
    assert!(data.iter().all(|&b| b == 0x5A));
    // Bounds errors stay errors.
    let e = f
        .read_steps(PageAddr(f.geometry().pages()), &mut data, &mut [])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfBounds);
}
