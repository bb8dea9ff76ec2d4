//! Bad answers and protocol details: unknown ID, stuck busy, program/erase failure,
//! lost configuration, and simulated time per operation against the part's timings.

use nand_hal::sim::{FaultPlan, HeapStorage, SimNand};
use nand_hal::spi::model::{self, ModelSpec};
use nand_hal::spi::{ChipModel, HostClock, ModelDelay, SpiNand, SpiNandError};
use nand_hal::{BlockAddr, Error, ErrorKind, NandFlash, PageAddr};

type Driver<'c> = SpiNand<ChipModel<'c, HeapStorage>, ModelDelay<'c>>;

fn model(spec: ModelSpec, clock: &HostClock) -> ChipModel<'_, HeapStorage> {
    let sim = SimNand::heap(spec.profile, FaultPlan::seeded(1));
    ChipModel::new(sim, spec, clock).unwrap()
}

fn driver(spec: ModelSpec, clock: &HostClock) -> Driver<'_> {
    SpiNand::new(model(spec, clock), clock.delay()).unwrap()
}

#[test]
fn unknown_id_is_a_clear_error() {
    let clock = HostClock::new();
    let mut chip = model(model::W25N01GV, &clock);
    chip.set_id_override(Some([0xEF, 0xBA, 0x21]));
    let err = SpiNand::new(chip, clock.delay()).unwrap_err();
    assert_eq!(err, SpiNandError::UnknownChip([0xEF, 0xBA, 0x21, 0x00]));
    assert_eq!(err.kind(), ErrorKind::Other);
    assert!(err.to_string().contains("EF BA 21"));
}

#[test]
fn stuck_busy_times_out_within_bound() {
    let clock = HostClock::new();
    let mut drv = driver(model::W25N01GV, &clock);
    drv.bus_mut().set_stuck_busy(true);
    let t0 = drv.bus().host_ns();
    let err = drv.erase(BlockAddr(3)).unwrap_err();
    assert_eq!(err, SpiNandError::Timeout);
    assert_eq!(err.kind(), ErrorKind::Timeout);
    // Gives up after twice the datasheet maximum (10 ms), not much later.
    let waited = drv.bus().host_ns() - t0;
    assert!((20_000_000..20_200_000).contains(&waited), "{waited}");
    // A stuck part also fails initialisation instead of hanging.
    let clock = HostClock::new();
    let mut chip = model(model::GD5F1GQ4XA, &clock);
    chip.set_stuck_busy(true);
    let err = SpiNand::new(chip, clock.delay()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
}

#[test]
fn program_and_erase_failures_map_to_kinds() {
    let clock = HostClock::new();
    let mut drv = driver(model::MT29F1G01ABAFD, &clock);
    let blk = BlockAddr(12);
    drv.erase(blk).unwrap();
    drv.bus_mut().sim_mut().fail_next_program(blk);
    let page = PageAddr(12 * 64);
    let err = drv.program_page(page, &[0x5A; 2048], &[]).unwrap_err();
    assert_eq!(err, SpiNandError::ProgramFailed);
    assert_eq!(err.kind(), ErrorKind::ProgramFailed);
    // The simulator leaves a failed block failing its next erase.
    let err = drv.erase(blk).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::EraseFailed);
    drv.bus_mut().sim_mut().fail_next_erase(BlockAddr(13));
    assert_eq!(drv.erase(BlockAddr(13)), Err(SpiNandError::EraseFailed));
    // Marking it bad still works and sticks.
    drv.mark_bad(blk).unwrap();
    assert!(drv.is_bad(blk).unwrap());
    assert_eq!(drv.bus().protocol_violations(), 0);
}

#[test]
fn arguments_are_checked_before_the_bus() {
    let clock = HostClock::new();
    let mut drv = driver(model::W25N01GV, &clock);
    let before = drv.bus().host_ns();
    let mut buf = [0u8; 2048];
    assert_eq!(
        drv.read(PageAddr(65536), 0, &mut buf, &mut []),
        Err(SpiNandError::OutOfBounds)
    );
    assert_eq!(
        drv.read(PageAddr(0), 0, &mut [], &mut [0u8; 65]),
        Err(SpiNandError::OutOfBounds)
    );
    assert_eq!(
        drv.program(PageAddr(0), 256, &buf[..512], &[]),
        Err(SpiNandError::Misuse)
    );
    assert_eq!(
        drv.program(PageAddr(0), 0, &[], &[]),
        Err(SpiNandError::Misuse)
    );
    assert_eq!(drv.erase(BlockAddr(1024)), Err(SpiNandError::OutOfBounds));
    assert_eq!(
        drv.mark_bad(BlockAddr(1024)),
        Err(SpiNandError::OutOfBounds)
    );
    assert_eq!(drv.bus().host_ns(), before, "nothing reached the bus");
}

#[test]
fn driver_configures_protection_and_buffer_mode() {
    // The model powers up locked and in continuous-read mode (BUF = 0): without the
    // driver's set-up a program fails and a column read returns column 0.
    let clock = HostClock::new();
    let mut drv = driver(model::W25N01GV, &clock);
    let page = PageAddr(64 * 20);
    drv.erase(BlockAddr(20)).unwrap();
    let data: Vec<u8> = (0..2048u32).map(|i| (i / 8) as u8).collect();
    drv.program_page(page, &data, &[]).unwrap();
    let mut part = [0u8; 100];
    drv.read(page, 1536, &mut part, &mut []).unwrap();
    assert_eq!(&part[..], &data[1536..1636]);

    // After a power cycle the part is locked again: an erase's fail bit with the
    // protection back on makes the driver configure it again and erase once more
    // (stop 40; it used to fail `EraseFailed`, which retires a good block); `reinit`
    // restores it as well.
    drv.bus_mut().sim_mut().cut_power();
    assert_eq!(
        drv.erase(BlockAddr(21)).unwrap_err().kind(),
        ErrorKind::Other
    );
    drv.bus_mut().power_on();
    drv.erase(BlockAddr(21)).unwrap();
    drv.read(page, 1536, &mut part, &mut []).unwrap();
    assert_eq!(&part[..], &data[1536..1636]);
    drv.bus_mut().sim_mut().cut_power();
    drv.bus_mut().power_on();
    drv.reinit().unwrap();
    drv.erase(BlockAddr(21)).unwrap();
}

/// Simulated time per operation through the driver against the part's cost model:
/// command + bus bytes + array time, plus at most one poll interval (typical / 16) and
/// the status transfers of the polls.
#[test]
fn simulated_time_matches_part_timings() {
    for spec in [model::W25N01GV, model::GD5F1GQ4XA, model::MT29F1G01ABAFD] {
        let clock = HostClock::new();
        let mut drv = driver(spec, &clock);
        let t = spec.profile.timing;
        let g = spec.profile.geometry;
        let raw = g.raw_page_size() as u64;
        let status_poll = t.bus_ns(3) + 1;
        let check = |what: &str, took: u64, base: u64, typ: u64| {
            let poll = typ / 16;
            let slack = poll + 18 * status_poll + t.bus_ns(8) + 4;
            assert!(
                took >= base && took <= base + slack,
                "{} {what}: took {took} ns, expected {base}..={}",
                spec.profile.name,
                base + slack
            );
        };

        let blk = BlockAddr(30);
        let t0 = drv.bus().host_ns();
        drv.erase(blk).unwrap();
        let took = drv.bus().host_ns() - t0;
        check(
            "erase",
            took,
            t.cmd_erase_ns as u64 + t.t_erase.typ_ns as u64,
            t.t_erase.typ_ns as u64,
        );

        let page = g.page(blk, 0);
        let data = vec![0x3Cu8; g.page_size() as usize];
        let oob = vec![0xFFu8; g.oob_size() as usize];
        let t0 = drv.bus().host_ns();
        drv.program_page(page, &data, &oob).unwrap();
        let took = drv.bus().host_ns() - t0;
        let base = t.cmd_program_ns as u64 + t.bus_ns(raw) + t.t_program.typ_ns as u64;
        check("program", took, base, t.t_program.typ_ns as u64);

        let mut back = vec![0u8; g.page_size() as usize];
        let mut back_oob = vec![0u8; g.oob_size() as usize];
        let t0 = drv.bus().host_ns();
        drv.read_page(page, &mut back, &mut back_oob).unwrap();
        let took = drv.bus().host_ns() - t0;
        let base = t.cmd_read_ns as u64 + t.t_read.typ_ns as u64 + t.bus_ns(raw);
        check("read", took, base, t.t_read.typ_ns as u64);
        assert_eq!(back, data);

        // A spare-only read moves only the spare bytes.
        let t0 = drv.bus().host_ns();
        drv.read_oob(page, &mut back_oob[..8]).unwrap();
        let took = drv.bus().host_ns() - t0;
        let base = t.cmd_read_ns as u64 + t.t_read.typ_ns as u64 + t.bus_ns(8);
        check("read_oob", took, base, t.t_read.typ_ns as u64);

        // The simulator's clock follows the host's.
        assert_eq!(drv.bus().sim().now_ns(), drv.bus().host_ns());
        assert_eq!(drv.bus().protocol_violations(), 0);
    }
}
