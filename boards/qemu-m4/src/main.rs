//! StageFS on an emulated Cortex-M4 (QEMU `mps2-an386`), `no_std`, no allocator.
//!
//! Runs the simulated NAND (the `TINY` 2 MiB profile, in static RAM) through
//!
//! 1. the `NandFlash` conformance suite with rule checks and bad-block marking, and
//! 2. a power-cut run per torn-cut mode on a noisy device ([`power_cut`]),
//! 3. an `oftl` object workload cut and recovered ([`objects`]), once per cut kind with the
//!    small `TINY` store configuration and once with the default W25N01GV configuration,
//!    each store built once in a `static` and formatted/mounted/unmounted in place,
//! 4. a file-layer workload ([`files`]: a settings file rewritten, 64-byte records
//!    appended with `fsync` through the staging log) cut and recovered, once per cut
//!    kind, with the volume in a `static`,
//! 5. the top-level examples' logic ([`examples`]: settings store, data logger,
//!    firmware-update slot) on the file layer, with remounts,
//! 6. the boards' demo ([`spi_demo`]: `board_app::run`, what the RP2040 and STM32
//!    firmware run) through the SPI NAND driver over the byte-accurate chip model of a
//!    64-block W25N01GV, with a power cut, recovery and a reset, in three cut kinds,
//!
//! then prints the peak stack use ([`stack`]; per `oftl` phase too, with the store's
//! size: together they bound its RAM) and exits through semihosting: the QEMU
//! process exits 0 only if every check passed. A panic exits with failure
//! (`panic-semihosting`, feature `exit`).

#![no_std]
#![no_main]

mod examples;
mod files;
mod objects;
mod power_cut;
mod shared;
mod spi_demo;
mod stack;

use core::mem::size_of;

use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hprintln};
use nand_hal::conformance::{self, Config};
use nand_hal::sim::profile::TINY;
use nand_hal::sim::{
    BlockState, CutKind, FaultConfig, FaultPlan, PageState, SimNand, SliceStorage, StorageSize,
    TornMode,
};
use nand_hal::spi::model::HostClock;
use nand_hal::NandFlash;
use oftl::Greedy;
use panic_semihosting as _;

/// The handle every store and run uses to reach the simulated part.
const PART: shared::Part = shared::Part::new(&TINY);

const SIZE: StorageSize = StorageSize::of(&TINY.geometry);
const SCRATCH: usize = 2 * (TINY.geometry.page_size() as usize + TINY.geometry.oob_size() as usize);
const BLANK_PAGE: PageState = PageState {
    programs: 0,
    written: 0,
    flags: 0,
    torn_steps: 0,
    flips: [0; nand_hal::MAX_STEPS],
};
const BLANK_BLOCK: BlockState = BlockState {
    erase_count: 0,
    reads_since_erase: 0,
    endurance: 0,
    next_page: 0,
    flags: 0,
};

/// The program/erase operation the power cut hits in each faulted run.
const CUT_AT_OP: u64 = 40;
/// One faulted run per torn mode. The seeds are picked so that each run retires a block
/// after a program or erase failure and reads back a page through an ECC correction.
const TORN_RUNS: [(u64, TornMode); 4] = [
    (0x5eed_0174, TornMode::SomeBits),
    (0x5eed_0174, TornMode::MostBits),
    (0x5eed_00cd, TornMode::Prefix),
    (0x5eed_018d, TornMode::Random),
];

/// Object-store runs: (seed, program/erase the cut hits, cut kind).
const OBJECT_RUNS: [(u64, u64, CutKind); 4] = [
    (11, 17, CutKind::Clean),
    (12, 29, CutKind::Torn(TornMode::SomeBits)),
    (13, 41, CutKind::Torn(TornMode::MostBits)),
    (14, 53, CutKind::Torn(TornMode::Random)),
];

/// Runs of the boards' demo over the SPI chip model: (seed, program/erase the cut hits,
/// cut kind). The operations count from the factory-fresh part, so the format's come
/// first: one erase per block of the 64-block part, then a few programs.
const SPI_RUNS: [(u64, u64, CutKind); 3] = [
    (31, 94, CutKind::Clean),
    (32, 114, CutKind::Torn(TornMode::MostBits)),
    (33, 124, CutKind::Torn(TornMode::Random)),
];

/// File-layer runs: (seed, program/erase the cut hits, cut kind).
const FILE_RUNS: [(u64, u64, CutKind); 3] = [
    (21, 90, CutKind::Clean),
    (22, 141, CutKind::Torn(TornMode::MostBits)),
    (23, 187, CutKind::Torn(TornMode::Random)),
];

#[entry]
fn main() -> ! {
    // cortex-m-rt turns these into `&'static mut` borrows, taken once, in `main`.
    static mut CELLS: [u8; SIZE.cells] = [0; SIZE.cells];
    static mut PAGES: [PageState; SIZE.pages] = [BLANK_PAGE; SIZE.pages];
    static mut BLOCKS: [BlockState; SIZE.blocks] = [BLANK_BLOCK; SIZE.blocks];
    static mut BUF: [u8; SCRATCH] = [0; SCRATCH];
    // The oftl stores, each in place for good: `const` initial values, never on the stack.
    static mut TINY_STORE: objects::Tiny =
        objects::Tiny::new(PART, objects::CONFIG, Greedy::DEFAULT);
    static mut DEFAULT_STORE: objects::W25Default =
        objects::W25Default::new(PART, objects::CONFIG, Greedy::DEFAULT);
    static mut LARGE_STORE: objects::W25Large =
        objects::W25Large::new(PART, objects::CONFIG, Greedy::DEFAULT);
    static mut SMALL_STORE: objects::W25Small =
        objects::W25Small::new(PART, objects::CONFIG, Greedy::DEFAULT);
    // The file layer over the TINY store configuration, in place too (the examples
    // share it).
    static mut VOLUME: files::Vol =
        files::Vol::new(objects::Tiny::new(PART, files::CONFIG, Greedy::DEFAULT));
    // The boards' demo volume (no flash until the demo probes the part), and the
    // simulated time the chip model's delay and the model share.
    static mut SPI_VOLUME: spi_demo::Vol = spi_demo::volume();
    static mut CLOCK: HostClock = HostClock::new();

    let mut ok = run_conformance(CELLS, PAGES, BLOCKS, BUF);

    // A torn power cut on a noisy device, once per torn mode, over the same buffers.
    for (seed, mode) in TORN_RUNS {
        let plan = FaultPlan::seeded(seed)
            .with_faults(FaultConfig::noisy())
            .with_cut(CUT_AT_OP, CutKind::Torn(mode));
        let mut sim = fresh_sim(CELLS, PAGES, BLOCKS, plan);
        match power_cut::run(&mut sim, BUF) {
            Ok(o) => {
                let c = sim.counters();
                hprintln!(
                    "power cut {}: ok: {} pages acked before the cut read back: {} exact, \
                     {} corrected ({} uncorrectable reads retried); {} block(s) retired; \
                     {} programs, {} erases",
                    plan,
                    o.acked,
                    o.exact,
                    o.corrected,
                    o.retried_reads,
                    o.retired,
                    c.programs,
                    c.erases,
                );
            }
            Err(e) => {
                hprintln!("power cut {}: FAILED: {}", plan, e);
                ok = false;
            }
        }
    }

    // An oftl object workload, cut part way, recovered and checked, once per cut kind.
    let before = stack::peak_use().used;
    let mut whole = before;
    let page: &mut [u8; 2048] = match (&mut BUF[..2048]).try_into() {
        Ok(p) => p,
        Err(_) => setup_failed(format_args!("scratch buffer too small")),
    };
    PART.install(fresh_sim(CELLS, PAGES, BLOCKS, FaultPlan::seeded(1)));
    let part = PART;

    let (passed, tiny, tiny_own, setup) = object_config(
        TINY_STORE,
        part,
        page,
        "oftl TINY config (Oftl<_, 2048, 64, 4, 2>)",
        None,
    );
    ok &= passed;
    whole = whole.max(setup);
    // The default W25N01GV configuration, over the same part.
    let (passed, w25, _, setup) = object_config(
        DEFAULT_STORE,
        part,
        page,
        "oftl default W25N01GV config (W25n01gv<_>, 7 cached pages, over the TINY part)",
        // `oftl::W25n01gv`'s docs: under 32 KiB all told on a Cortex-M4.
        Some(32 * 1024),
    );
    ok &= passed;
    whole = whole.max(setup);
    // The large W25N01GV configuration (12 cached pages), over the same part.
    let (passed, large, _, setup) = object_config(
        LARGE_STORE,
        part,
        page,
        "oftl large W25N01GV config (W25n01gvLarge<_>, 12 cached pages, over the TINY part)",
        None,
    );
    ok &= passed;
    whole = whole.max(setup);
    // The small W25N01GV configuration (4 cached 512-byte pages, 1 write buffer, no log
    // tail page).
    let (passed, small, _, setup) = object_config(
        SMALL_STORE,
        part,
        page,
        "oftl small W25N01GV config (W25n01gvSmall<_>, 4 cached 512 B pages, 1 write \
         buffer, no log tail page, over the TINY part)",
        // `oftl::W25n01gvSmall`'s docs: 16 KiB all told on a Cortex-M4.
        Some(16 * 1024),
    );
    ok &= passed;
    whole = whole.max(setup);
    hprintln!("stack before the oftl phase: peak {} bytes", before);

    // The file layer: settings rewritten, 64-byte records appended with fsync, cut,
    // recovered (the staging log replayed) and checked, once per cut kind.
    let vol = VOLUME;
    let (mut files_peak, mut files_own) = (0, 0);
    for (seed, at_op, kind) in FILE_RUNS {
        let plan = FaultPlan::seeded(seed)
            .with_faults(FaultConfig {
                unstable_after_cut: true,
                ..FaultConfig::default()
            })
            .with_cut(at_op, kind);
        part.renew(FaultPlan::seeded(seed));
        whole = whole.max(stack::peak_use().used);
        stack::repaint();
        let base = stack::depth();
        let outcome = files::run(vol, part, plan);
        let peak = stack::peak_use().used;
        files_peak = files_peak.max(peak);
        files_own = files_own.max(peak.saturating_sub(base));
        match outcome {
            Ok(o) => hprintln!(
                "stagefs power cut {}: ok: {} records fsynced, {} recovered, mount after the \
                 cut {} us simulated",
                plan,
                o.acked,
                o.recovered,
                o.mount_us
            ),
            Err(e) => {
                hprintln!("stagefs power cut {}: FAILED: {}", plan, e);
                ok = false;
            }
        }
    }
    let (vol_size, store_size) = (size_of::<files::Vol>(), size_of::<objects::Tiny>());
    hprintln!(
        "stagefs-core (Fs<_, 2048, 4> over the TINY store): volume {} B in a static (store {} B \
         + file layer {} B), peak stack {} B ({} B from the call into the workload): RAM <= {} \
         B ({} B with the firmware's own frames); the file layer adds <= {} B over the store's \
         own figure",
        vol_size,
        store_size,
        vol_size - store_size,
        files_peak,
        files_own,
        vol_size + files_own,
        vol_size + files_peak,
        vol_size - store_size + files_own.saturating_sub(tiny_own)
    );

    // The top-level examples' logic, on the target.
    part.renew(FaultPlan::seeded(0xe8));
    stack::repaint();
    let outcome = examples::run(vol);
    let examples_peak = stack::peak_use().used;
    whole = whole.max(examples_peak);
    match outcome {
        Ok(o) => hprintln!(
            "examples: ok: settings back after {} boots, {} log records in order after {} \
             rotations, firmware image v{} ({} bytes) verified at boot; peak stack {} B",
            o.boots,
            o.records,
            o.rotations,
            o.image.version,
            o.image.len,
            examples_peak
        ),
        Err(e) => {
            hprintln!("examples: FAILED: {}", e);
            ok = false;
        }
    }

    // The boards' demo through the SPI driver over the chip model: a power cut while it
    // appends, recovery, a reset.
    whole = whole.max(stack::peak_use().used);
    let (passed, spi_peak) = spi_runs(SPI_VOLUME, CLOCK, part);
    ok &= passed;

    // Phases repaint the stack: the whole run's peak is the deepest of theirs.
    let stack = stack::peak_use();
    hprintln!(
        "stack: peak {} bytes of {} available (painted)",
        stack
            .used
            .max(whole)
            .max(tiny)
            .max(w25)
            .max(large)
            .max(small)
            .max(files_peak)
            .max(spi_peak),
        stack.available
    );
    if ok {
        hprintln!("qemu-m4: all checks passed");
        exit(debug::EXIT_SUCCESS)
    } else {
        hprintln!("qemu-m4: FAILED");
        exit(debug::EXIT_FAILURE)
    }
}

/// The boards' demo runs ([`spi_demo::run`]), one per entry of `SPI_RUNS`, each on a
/// factory-fresh part; prints each outcome and the volume's RAM, returns whether all
/// passed and their peak stack (painted, from the top).
#[inline(never)]
fn spi_runs(
    vol: &mut spi_demo::Vol,
    clock: &'static HostClock,
    part: shared::Part,
) -> (bool, usize) {
    let mut ok = true;
    let mut peak = 0;
    for (seed, at_op, kind) in SPI_RUNS {
        let plan = FaultPlan::seeded(seed)
            .with_faults(FaultConfig {
                unstable_after_cut: true,
                ..FaultConfig::default()
            })
            .with_cut(at_op, kind);
        part.renew_erased(FaultPlan::seeded(seed));
        let sim = part.take();
        stack::repaint();
        let (sim, outcome) = spi_demo::run(vol, sim, clock, plan);
        peak = peak.max(stack::peak_use().used);
        part.install(sim);
        match outcome {
            Ok(o) => hprintln!(
                "spi demo power cut {}: ok: cut at program/erase {}, {} records fsynced, {} \
                 recovered through the SPI driver, {} after a reset; {} programs, {} erases, \
                 no protocol violation",
                plan,
                o.cut_at,
                o.acked,
                o.recovered,
                o.total,
                o.programs,
                o.erases
            ),
            Err(e) => {
                hprintln!("spi demo power cut {}: FAILED: {}", plan, e);
                ok = false;
            }
        }
    }
    hprintln!(
        "board demo (board_app::run over SpiNand<ChipModel>, TINY store config): volume {} B \
         in a static, peak stack {} B (the chip model, which the driver owns, included)",
        size_of::<spi_demo::Vol>(),
        peak
    );
    (ok, peak)
}

/// The object runs (`OBJECT_RUNS`) on store `fs`; prints its RAM under `label` and
/// returns whether all passed, the peak stack from the top, the peak from the call into
/// the workload, and the deepest setup before a run.
fn object_config<const B: usize, const C: usize, const W: usize, const M: usize, const L: usize>(
    fs: &mut objects::Store<B, C, W, M, L>,
    part: shared::Part,
    page: &mut [u8; 2048],
    label: &str,
    budget: Option<usize>,
) -> (bool, usize, usize, usize) {
    let (mut ok, mut peak, mut own, mut setup) = (true, 0, 0, 0);
    for (seed, at_op, kind) in OBJECT_RUNS {
        let (passed, p, o, s) = object_run(fs, part, seed, at_op, kind, page);
        ok &= passed;
        peak = peak.max(p);
        own = own.max(o);
        setup = setup.max(s);
    }
    let size = size_of::<objects::Store<B, C, W, M, L>>();
    hprintln!(
        "{}: store {} B in a static, peak stack {} B ({} B from the call into the \
         workload): RAM <= {} B ({} B with the firmware's own frames)",
        label,
        size,
        peak,
        own,
        size + own,
        size + peak
    );
    if let Some(b) = budget.filter(|&b| size + own > b) {
        hprintln!(
            "FAIL {}: RAM {} B over the {} B the crate docs promise",
            label,
            size + own,
            b
        );
        ok = false;
    }
    (ok, peak, own, setup)
}

/// One `oftl` run (see [`objects::run`]) on a factory-fresh part with a power cut at
/// program/erase `at_op` of kind `kind`; prints the outcome and returns whether it passed
/// and the peak stack (painted, from the top) while it ran, not counting the renewal of
/// the simulated part (a simulator cost), that peak less the stack in use at the call into
/// the workload (the store's own and the workload's), and the peak before the run (with
/// the renewal).
fn object_run<const B: usize, const C: usize, const W: usize, const M: usize, const L: usize>(
    fs: &mut objects::Store<B, C, W, M, L>,
    part: shared::Part,
    seed: u64,
    at_op: u64,
    kind: CutKind,
    page: &mut [u8; 2048],
) -> (bool, usize, usize, usize) {
    let plan = FaultPlan::seeded(seed)
        .with_faults(FaultConfig {
            unstable_after_cut: true,
            ..FaultConfig::default()
        })
        .with_cut(at_op, kind);
    part.renew(FaultPlan::seeded(seed));
    let setup = stack::peak_use().used;
    stack::repaint();
    let base = stack::depth();
    let outcome = objects::run(fs, part, plan, page);
    let peak = stack::peak_use().used;
    let passed = match outcome {
        Ok(o) => {
            hprintln!(
                "oftl power cut {}: ok: {} bytes acknowledged, {} recovered, mount after the \
                 cut scanned {} pages in {} us simulated",
                plan,
                o.acked,
                o.recovered,
                o.scanned,
                o.mount_us
            );
            true
        }
        Err(e) => {
            hprintln!("oftl power cut {}: FAILED: {}", plan, e);
            false
        }
    };
    (passed, peak, peak.saturating_sub(base), setup)
}

/// The conformance suite, with rule checks and bad-block marking, on a perfect device.
fn run_conformance(
    cells: &mut [u8],
    pages: &mut [PageState],
    blocks: &mut [BlockState],
    scratch: &mut [u8],
) -> bool {
    let mut sim = fresh_sim(cells, pages, blocks, FaultPlan::seeded(1));
    let cfg = Config {
        rule_checks: true,
        mark_bad: true,
    };
    match conformance::run(&mut sim, &cfg, scratch) {
        Ok(r) => {
            let c = sim.counters();
            hprintln!(
                "conformance on {} ({} KiB): ok: {} checks on block {}, marked bad {:?}; \
                 {} reads, {} programs, {} erases, {} us simulated",
                TINY.name,
                sim.geometry().capacity() >> 10,
                r.checks,
                r.block.0,
                r.marked_bad.map(|b| b.0),
                c.reads,
                c.programs,
                c.erases,
                c.time_ns / 1000,
            );
            true
        }
        Err(e) => {
            hprintln!("conformance on {}: FAILED: {}", TINY.name, e);
            false
        }
    }
}

/// A factory-fresh simulated `TINY` device over the buffers (erased first).
fn fresh_sim<'a>(
    cells: &'a mut [u8],
    pages: &'a mut [PageState],
    blocks: &'a mut [BlockState],
    plan: FaultPlan,
) -> SimNand<SliceStorage<'a>> {
    let storage = SliceStorage::new(&TINY.geometry, cells, pages, blocks)
        .unwrap_or_else(|e| setup_failed(format_args!("{e}")));
    SimNand::new(TINY, storage, plan).unwrap_or_else(|e| setup_failed(format_args!("{e}")))
}

pub(crate) fn setup_failed(msg: core::fmt::Arguments) -> ! {
    hprintln!("qemu-m4: FAILED: {}", msg);
    exit(debug::EXIT_FAILURE)
}

/// Ends the QEMU run with `status` as the process exit status.
fn exit(status: debug::ExitStatus) -> ! {
    debug::exit(status);
    // Only reached without a semihosting host.
    loop {
        cortex_m::asm::wfi();
    }
}
