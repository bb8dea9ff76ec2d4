//! 64-byte append + sync on a log stream, on the simulated W25N01GV (page-wide ECC
//! status, NOP 4), at steady state: the `logging` workload of littlefs-benchmarks as a
//! log stream (append 64 B, durable on return; the stream is trimmed to its end every
//! 1 MiB of records, as littlefs's run truncates its file), run until the flash has
//! programmed twice the device's capacity, so every block has been erased and reused.
//! Figures come from the simulator's counters and clock (typical timings) over the
//! steady-state half of the run (after the first device's worth of programs):
//! throughput, WA (bytes programmed / user bytes), programs and erases per KiB, the worst
//! single append, then the mount time after a cut in the middle of the workload.
//!
//! Rows: sector appends (partial programs up to NOP, the default), and the NOP = 1 mode
//! (`Config::log_partial_programs = false`: every append a fresh page).
//!
//! `cargo run --release -p oftl --example log_appends`

use nand_hal::sim::{profile, CutKind, FaultPlan, HeapStorage, SimNand};
use nand_hal::NandFlash;
use oftl::{Config, Greedy, ObjKind, W25n01gv};

type Sim = SimNand<HeapStorage>;

const RECORD: usize = 64;
/// Records per rotation (1 MiB of 64-byte records).
const ROTATE: u64 = (1 << 20) / RECORD as u64;

fn main() {
    println!(
        "{:<18} {:>10} {:>7} {:>10} {:>10} {:>12} {:>14}",
        "mode", "kB/s", "WA", "progs/KiB", "erases/MiB", "worst op ms", "mount cut ms"
    );
    for partial in [true, false] {
        row(partial);
    }
}

fn row(partial: bool) {
    let mut sim = Sim::heap(profile::W25N01GV, FaultPlan::seeded(3));
    let capacity = sim.geometry().capacity();
    let mut fs = W25n01gv::new(
        &mut sim,
        Config::new().log_partial_programs(partial),
        Greedy::DEFAULT,
    );
    fs.format().unwrap();
    let log = fs.create(ObjKind::Log).unwrap();
    let mut rec = [0u8; RECORD];
    let mut n = 0u64;
    let mut append = |fs: &mut W25n01gv<&mut Sim>, n: &mut u64| -> u64 {
        for (i, b) in rec.iter_mut().enumerate() {
            *b = (*n as u8).wrapping_mul(31) ^ i as u8;
        }
        let t0 = fs.flash().now_ns();
        let lsn = fs.log_append(log, &rec).unwrap();
        *n += 1;
        if *n % ROTATE == 0 {
            fs.log_trim(log, lsn + 1).unwrap();
        }
        fs.flash().now_ns() - t0
    };
    // Warm-up: one device's worth of programs.
    while fs.flash().counters().bytes_programmed < capacity {
        append(&mut fs, &mut n);
    }
    let start = fs.flash().counters();
    let n0 = n;
    let mut worst = 0u64;
    while (fs.flash().counters() - start).bytes_programmed < capacity {
        worst = worst.max(append(&mut fs, &mut n));
    }
    let d = fs.flash().counters() - start;
    let user = (n - n0) * RECORD as u64;
    // Mount after a cut in the middle of the workload (the window holds appends to
    // replay).
    let mut plan = FaultPlan::seeded(4).with_cut(2_000, CutKind::Clean);
    plan.faults = Default::default();
    fs.flash_mut().arm(plan);
    loop {
        if fs.log_append(log, &rec).is_err() {
            break;
        }
    }
    drop(fs);
    sim.power_on();
    sim.disarm();
    let t0 = sim.now_ns();
    let c0 = sim.counters();
    let mut fs = W25n01gv::new(&mut sim, Config::new(), Greedy::DEFAULT);
    fs.mount().unwrap();
    let mount = fs.flash().now_ns() - t0;
    let mc = fs.flash().counters() - c0;
    let st = fs.stats();
    println!(
        "{:<18} {:>10.1} {:>7.3} {:>10.3} {:>10.2} {:>12.3} {:>14.1}",
        if partial {
            "sector appends"
        } else {
            "NOP = 1 mode"
        },
        user as f64 / (d.time_ns as f64 / 1e9) / 1e3,
        d.bytes_programmed as f64 / user as f64,
        d.programs as f64 / (user as f64 / 1024.0),
        d.erases as f64 / (user as f64 / (1 << 20) as f64),
        worst as f64 / 1e6,
        mount as f64 / 1e6,
    );
    println!(
        "{:<18} {} appends measured ({} user bytes, {:.1} s simulated); mount after the cut: \
         scanned {} pages, replayed {} sectors, {} reads ({} of spare only), {} programs, \
         {} erases",
        "",
        n - n0,
        user,
        d.time_ns as f64 / 1e9,
        st.recovery_scanned_pages,
        st.recovery_replayed_pages,
        mc.reads,
        mc.oob_reads,
        mc.programs,
        mc.erases
    );
}
