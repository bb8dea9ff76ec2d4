//! The `NandFlash` conformance suite on the SPI NAND driver over the chip model of each
//! part (the blocking driver, and with feature `async` the async driver through the
//! blocking adapter), plus ECC status reporting through each vendor's encoding.

use nand_hal::conformance::{self, Config};
use nand_hal::sim::{FaultPlan, HeapStorage, SimNand};
use nand_hal::spi::model::{self, ModelSpec};
use nand_hal::spi::{ChipModel, HostClock, ModelDelay, SpiNand};
use nand_hal::{BlockAddr, Error, ErrorKind, NandFlash, PageAddr};

type Driver<'c> = SpiNand<ChipModel<'c, HeapStorage>, ModelDelay<'c>>;

fn model(spec: ModelSpec, clock: &HostClock, factory_bad: u32) -> ChipModel<'_, HeapStorage> {
    let mut plan = FaultPlan::seeded(7);
    plan.faults.factory_bad = factory_bad;
    let sim = SimNand::heap(spec.profile, plan);
    ChipModel::new(sim, spec, clock).expect("spec matches profile")
}

fn driver<'c>(spec: ModelSpec, clock: &'c HostClock, factory_bad: u32) -> Driver<'c> {
    SpiNand::new(model(spec, clock, factory_bad), clock.delay()).expect("driver finds the part")
}

fn run_conformance(spec: ModelSpec, name: &str) {
    let clock = HostClock::new();
    let mut drv = driver(spec, &clock, 3);
    assert_eq!(drv.chip().name, name);
    check_conformance(&mut drv, |d| d.bus(), name);
}

/// The async driver over the same model, through the blocking adapter.
#[cfg(feature = "async")]
fn run_conformance_async(spec: ModelSpec, name: &str) {
    use nand_hal::asynch::{block_on, BlockOn};
    let clock = HostClock::new();
    let chip = model(spec, &clock, 3);
    let drv = block_on(SpiNand::new_async(chip, clock.delay())).expect("driver finds the part");
    assert_eq!(drv.chip().name, name);
    check_conformance(&mut BlockOn::new(drv), |d| d.inner().bus(), name);
}

/// The suite, then the model's verdict (reached through `bus`) and factory bad blocks.
fn check_conformance<'c, F: NandFlash>(
    drv: &mut F,
    bus: impl Fn(&F) -> &ChipModel<'c, HeapStorage>,
    name: &str,
) {
    let g = drv.geometry();
    let mut scratch = vec![0u8; 2 * g.raw_page_size() as usize];
    let cfg = Config {
        rule_checks: false,
        mark_bad: true,
    };
    let report = conformance::run(drv, &cfg, &mut scratch)
        .unwrap_or_else(|f| panic!("{name}: conformance failed: {f}"));
    assert!(report.checks >= 14, "{name}: {report:?}");
    let victim = report.marked_bad.unwrap();
    let model = bus(drv);
    assert_eq!(
        model.protocol_violations(),
        0,
        "{:?}",
        model.last_violation()
    );
    assert_eq!(model.sim().counters().misuse, 0);
    assert!(model.sim().block_state(victim).flags & nand_hal::sim::BlockState::BAD != 0);
    // Factory bad blocks placed by the simulator read as bad through the driver.
    let mut factory = 0;
    for b in 0..g.blocks() {
        let sim_bad = bus(drv).sim().block_state(BlockAddr(b)).flags
            & nand_hal::sim::BlockState::FACTORY_BAD
            != 0;
        if sim_bad {
            factory += 1;
            assert!(
                drv.is_bad(BlockAddr(b)).unwrap(),
                "{name}: factory bad block {b}"
            );
        }
    }
    assert_eq!(factory, 3);
    assert!(!drv.is_bad(BlockAddr(0)).unwrap());
    assert_eq!(bus(drv).protocol_violations(), 0);
}

#[test]
fn conformance_w25n01gv() {
    run_conformance(model::W25N01GV, "W25N01GV");
}

#[test]
fn conformance_w25m02gv_two_dies() {
    run_conformance(model::W25M02GV, "W25M02GV");
}

#[test]
fn conformance_gd5f1gq4xa() {
    run_conformance(model::GD5F1GQ4XA, "GD5F1GQ4xA");
}

#[test]
fn conformance_mt29f1g01abafd() {
    run_conformance(model::MT29F1G01ABAFD, "MT29F1G01ABAFD");
}

#[cfg(feature = "async")]
#[test]
fn async_conformance_w25n01gv() {
    run_conformance_async(model::W25N01GV, "W25N01GV");
}

#[cfg(feature = "async")]
#[test]
fn async_conformance_w25m02gv_two_dies() {
    run_conformance_async(model::W25M02GV, "W25M02GV");
}

#[cfg(feature = "async")]
#[test]
fn async_conformance_gd5f1gq4xa() {
    run_conformance_async(model::GD5F1GQ4XA, "GD5F1GQ4xA");
}

#[cfg(feature = "async")]
#[test]
fn async_conformance_mt29f1g01abafd() {
    run_conformance_async(model::MT29F1G01ABAFD, "MT29F1G01ABAFD");
}

/// Programs every sector of `page`, injects `n` flips in `step`, reads it back.
fn read_with_flips(
    drv: &mut Driver<'_>,
    page: PageAddr,
    step: u32,
    n: u8,
) -> Result<(u8, bool), ErrorKind> {
    let g = drv.geometry();
    let data: Vec<u8> = (0..g.page_size()).map(|i| (i * 7 + 3) as u8).collect();
    drv.program_page(page, &data, &[]).unwrap();
    drv.bus_mut().sim_mut().inject_flips(page, step, n);
    let mut back = vec![0u8; g.page_size() as usize];
    match drv.read_page(page, &mut back, &mut []) {
        Ok(r) => {
            assert_eq!(back, data, "corrected data must match what was programmed");
            Ok((r.corrected_bits, r.needs_scrub()))
        }
        Err(e) => Err(e.kind()),
    }
}

/// Flips injected and the normalised count expected (`None`: uncorrectable).
type Expect = (u8, Option<u8>);

#[test]
fn ecc_status_through_each_vendor_encoding() {
    // (spec, flips injected, expected normalised count or uncorrectable)
    let cases: &[(ModelSpec, &[Expect])] = &[
        (
            model::W25N01GV,
            &[(0, Some(0)), (1, Some(1)), (2, None), (5, None)],
        ),
        (
            model::GD5F1GQ4XA,
            &[
                (0, Some(0)),
                (1, Some(7)),
                (5, Some(7)),
                (7, Some(7)),
                (8, Some(8)),
                (9, None),
                (16, None),
            ],
        ),
        (
            model::MT29F1G01ABAFD,
            &[
                (0, Some(0)),
                (1, Some(3)),
                (3, Some(3)),
                (4, Some(6)),
                (6, Some(6)),
                (7, Some(8)),
                (8, Some(8)),
                (9, None),
                (16, None),
            ],
        ),
    ];
    for (spec, expect) in cases {
        let clock = HostClock::new();
        let mut drv = driver(*spec, &clock, 0);
        let g = drv.geometry();
        let threshold = drv.capabilities().ecc.scrub_threshold;
        drv.erase(BlockAddr(5)).unwrap();
        for (i, &(n, want)) in expect.iter().enumerate() {
            let page = g.page(BlockAddr(5), i as u32);
            let got = read_with_flips(&mut drv, page, (i % 4) as u32, n);
            match want {
                Some(c) => {
                    let (bits, scrub) = got.unwrap_or_else(|e| {
                        panic!("{}: {n} flips: unexpected {e:?}", spec.profile.name)
                    });
                    assert_eq!(bits, c, "{}: {n} flips", spec.profile.name);
                    assert_eq!(scrub, c >= threshold && c > 0);
                }
                None => assert_eq!(
                    got,
                    Err(ErrorKind::Uncorrectable),
                    "{}: {n} flips",
                    spec.profile.name
                ),
            }
        }
        assert_eq!(drv.bus().protocol_violations(), 0);
    }
}

#[test]
fn flips_on_erased_sectors_come_back_raw() {
    let clock = HostClock::new();
    let mut drv = driver(model::W25N01GV, &clock, 0);
    let page = PageAddr(64 * 9 + 2);
    drv.erase(BlockAddr(9)).unwrap();
    drv.bus_mut().sim_mut().inject_flips(page, 1, 2);
    let mut back = vec![0u8; 2048];
    let r = drv.read_page(page, &mut back, &mut []).unwrap();
    assert_eq!(r.corrected_bits, 0);
    let zeros: u32 = back.iter().map(|b| b.count_zeros()).sum();
    assert_eq!(zeros, 2);
    assert!(back[..512].iter().all(|&b| b == 0xFF));
}
