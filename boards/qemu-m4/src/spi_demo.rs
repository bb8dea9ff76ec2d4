//! The boards' demo ([`board_app::run`], what the RP2040 and STM32 firmware run) through
//! the SPI NAND driver over the byte-accurate chip model, with a power cut and remounts.
//!
//! The part is a W25N01GV cut down to the `TINY` profile's 64 blocks (the model's
//! W25N01GV command set, status encoding and power-on defaults; a made-up ID and a chip
//! table entry of its own), so the simulated array fits QEMU's RAM. Every byte the driver
//! sends goes through the model's decoder; the model's simulator holds the cells, the
//! faults and the power cut.
//!
//! Each run is three boots of the demo on one part:
//!
//! 1. a factory-fresh part, armed with a power cut at a chosen program/erase: the demo
//!    probes, formats and appends records with `fsync` until the power goes; the boot
//!    must fail with the part unpowered, after at least one record was fsynced;
//! 2. power back (the chip's registers at their power-on defaults): the demo probes
//!    again, mounts (crash recovery and staging-log replay, no format), reads the log
//!    back and must find every fsynced record and at most the one in flight, each as
//!    written, then appends a boot's worth of records;
//! 3. a reset without a cut: the log must hold exactly what boot 2 left; then a clean
//!    unmount.
//!
//! At the end the model must have seen no protocol violation and the simulator no
//! breach of a NAND rule.

use board_app::{Demo, DemoError, Event, Summary, Volume};
use nand_hal::sim::profile::TINY;
use nand_hal::sim::{FaultPlan, SliceStorage};
use nand_hal::spi::chips::{self, ChipInfo, JedecId};
use nand_hal::spi::model::{self, ChipModel, HostClock, ModelDelay, ModelError, ModelSpec};

use crate::shared::Sim;

/// READ ID of the test part (no real part answers this).
const TEST_ID: [u8; 3] = [0xEF, 0xAA, 0xF0];

/// The modelled test part.
const SPEC: ModelSpec = ModelSpec {
    profile: TINY,
    id: TEST_ID,
    ..model::W25N01GV
};

/// The driver's chip table: the test part only.
const CHIPS: &[ChipInfo] = &[ChipInfo {
    name: "W25N01GV cut to 64 blocks (test part)",
    id: JedecId::new(&TEST_ID),
    geometry: TINY.geometry,
    capabilities: TINY.capabilities,
    ..chips::W25N01GV
}];

/// Records each boot appends.
const RECORDS: u32 = 48;

const DEMO: Demo = Demo {
    chips: CHIPS,
    records: RECORDS,
};

/// The store configuration the demo formats with (the smallest window the TINY store
/// configuration takes on its 16-page blocks is 6).
const CONFIG: oftl::Config = oftl::Config::new().window_blocks(8).format_id(14);

/// The bus: the chip model over the simulated part in the firmware's static buffers.
pub type Bus = ChipModel<'static, SliceStorage<'static>>;

/// The demo's volume on the test part (the `TINY` store configuration: 64 blocks, 4
/// cached index pages).
pub type Vol = Volume<Bus, ModelDelay<'static>, 64, 4>;

/// A volume with no flash yet, for the firmware's `static`.
pub const fn volume() -> Vol {
    board_app::volume(TINY.geometry, TINY.capabilities, CONFIG)
}

/// What one run established.
pub struct Outcome {
    /// Records fsynced before the cut.
    pub acked: u32,
    /// Records boot 2 found after the cut.
    pub recovered: u32,
    /// Records in the log at the end.
    pub total: u32,
    /// Program/erase operations until the cut.
    pub cut_at: u64,
    /// Programs over the whole run (the simulator's count).
    pub programs: u64,
    /// Erases over the whole run.
    pub erases: u64,
}

/// One run (see the module docs) on `sim`, factory-fresh, armed with `plan` (a power
/// cut). Gives the simulated part back with the outcome.
pub fn run(
    vol: &mut Vol,
    sim: Sim,
    clock: &'static HostClock,
    plan: FaultPlan,
) -> (Sim, Result<Outcome, &'static str>) {
    let mut bus = match ChipModel::new(sim, SPEC, clock) {
        Ok(m) => m,
        Err(_) => crate::setup_failed(format_args!("the test part does not fit the chip model")),
    };
    bus.sim_mut().arm(plan);

    // Boot 1: format and append until the power goes.
    let (first, seen) = boot(vol, bus, clock);
    let mut bus = release(vol);
    let acked = seen.synced.map_or(0, |s| s + 1);
    let cut_at = bus.sim().ops_since_arm();
    let failure = match first {
        Ok(_) => Some("boot 1 ended without the power cut"),
        Err(DemoError::Fs { .. }) if !bus.is_powered() => None,
        Err(_) => Some("boot 1 failed, but not for the power cut"),
    };
    let failure = failure
        .or((seen.formatted != Some(true)).then_some("boot 1 did not format the blank part"))
        .or((acked == 0).then_some("the cut came before the first fsync"));
    if let Some(e) = failure {
        return (bus.into_sim(), Err(e));
    }

    // Boot 2: power back, recover, check, append more.
    bus.power_on();
    bus.sim_mut().disarm();
    let (second, _) = boot(vol, bus, clock);
    let bus = release(vol);
    let recovered = match second {
        Ok(Summary {
            formatted: false,
            found,
            ..
        }) if (acked..=acked + 1).contains(&found) => found,
        Ok(Summary {
            formatted: true, ..
        }) => return (bus.into_sim(), Err("boot 2 formatted the part")),
        Ok(_) => {
            return (
                bus.into_sim(),
                Err("boot 2 found fewer records than were fsynced, or more than were written"),
            )
        }
        Err(_) => return (bus.into_sim(), Err("boot 2 (after the cut) failed")),
    };

    // Boot 3: a reset, no cut: exactly boot 2's records, then a clean unmount.
    let (third, _) = boot(vol, bus, clock);
    let unmounted = vol.unmount();
    let bus = release(vol);
    let total = match third {
        Ok(s) if s.found == recovered + RECORDS => s.found + s.appended,
        Ok(_) => return (bus.into_sim(), Err("boot 3 did not find boot 2's records")),
        Err(_) => return (bus.into_sim(), Err("boot 3 (after a reset) failed")),
    };
    if unmounted.is_err() {
        return (bus.into_sim(), Err("unmount failed"));
    }
    if bus.protocol_violations() != 0 {
        return (
            bus.into_sim(),
            Err("the driver broke the SPI NAND protocol"),
        );
    }
    let c = bus.sim().counters();
    if c.misuse != 0 {
        return (bus.into_sim(), Err("the volume broke a NAND rule"));
    }
    let out = Outcome {
        acked,
        recovered,
        total,
        cut_at,
        programs: c.programs,
        erases: c.erases,
    };
    (bus.into_sim(), Ok(out))
}

/// What a boot reported before it ended (a boot cut short returns no [`Summary`]).
#[derive(Default)]
struct Seen {
    /// Whether it formatted the part, once mounted.
    formatted: Option<bool>,
    /// The last record it fsynced.
    synced: Option<u32>,
}

/// One boot of the demo over `bus`.
fn boot(
    vol: &mut Vol,
    bus: Bus,
    clock: &'static HostClock,
) -> (Result<Summary, DemoError<ModelError>>, Seen) {
    let mut seen = Seen::default();
    let result = board_app::run(vol, bus, clock.delay(), &DEMO, |e| match e {
        Event::Mounted { formatted } => seen.formatted = Some(formatted),
        Event::Synced { seq } => seen.synced = Some(seq),
        Event::Probed { .. } | Event::LogChecked { .. } => {}
    });
    if let Err(DemoError::Probe(e)) = result {
        // The driver consumed the bus: the part (and its buffers) are gone.
        crate::setup_failed(format_args!("SPI demo: probe failed: {e}"));
    }
    (result, seen)
}

/// Takes the driver out of the volume and the model out of the driver.
fn release(vol: &mut Vol) -> Bus {
    match vol.store_mut().flash_mut().take() {
        Some(nand) => nand.release().0,
        None => crate::setup_failed(format_args!("SPI demo: no driver in the volume")),
    }
}
