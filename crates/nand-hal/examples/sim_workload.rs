//! Drives raw workloads on the simulated W25N01GV and prints what they cost: operation
//! counts, bytes, simulated time and throughput, and erase spread.
//!
//! ```text
//! cargo run --release -p nand-hal --features std --example sim_workload
//! ```
//!
//! The workloads talk to the NAND directly (no file system), so they show the device
//! ceiling every layer above is measured against: sequential whole-page writing with
//! erases, 512 B partial-page appends (one full tPROG each), page and spare-only reads, and
//! four dies in parallel on one bus.

use nand_hal::sim::profile::{Profile, W25N01GV};
use nand_hal::sim::{Counters, FaultPlan, HeapStorage, SimNand};
use nand_hal::{BlockAddr, NandFlash, PipelinedNand};

type Sim = SimNand<HeapStorage>;

fn row(name: &str, user_bytes: u64, d: &Counters) {
    let ms = d.time_ns as f64 / 1e6;
    let mbps = d.throughput(user_bytes) / 1e6;
    println!(
        "{name:<34} {:>8} {:>8} {:>7} {:>10.1} {:>9.3} {:>8.2}",
        d.programs,
        d.reads,
        d.erases,
        ms,
        mbps,
        d.write_amplification(user_bytes)
    );
}

fn sequential(sim: &mut Sim, blocks: u32) -> u64 {
    let g = sim.geometry();
    let page = vec![0x3Cu8; g.page_size() as usize];
    for b in 1..=blocks {
        sim.erase(BlockAddr(b)).unwrap();
        for i in 0..g.pages_per_block() {
            sim.program_page(g.page(BlockAddr(b), i), &page, &[])
                .unwrap();
        }
    }
    blocks as u64 * g.block_size() as u64
}

fn sector_appends(sim: &mut Sim, blocks: u32) -> u64 {
    let g = sim.geometry();
    let unit = sim.capabilities().program_unit;
    let sector = vec![0x11u8; unit as usize];
    let per_page = g.page_size() / unit;
    for b in 100..100 + blocks {
        sim.erase(BlockAddr(b)).unwrap();
        for i in 0..g.pages_per_block() {
            for s in 0..per_page {
                sim.program(g.page(BlockAddr(b), i), s * unit, &sector, &[])
                    .unwrap();
            }
        }
    }
    blocks as u64 * g.block_size() as u64
}

fn reads(sim: &mut Sim, pages: u32, oob_only: bool) -> u64 {
    let g = sim.geometry();
    let mut data = vec![0u8; g.page_size() as usize];
    let mut oob = vec![0u8; 16];
    let mut x: u32 = 12345;
    for _ in 0..pages {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let p = g.page(BlockAddr(1 + (x >> 8) % 64), (x >> 4) % g.pages_per_block());
        if oob_only {
            sim.read_oob(p, &mut oob).unwrap();
        } else {
            sim.read_page(p, &mut data, &mut []).unwrap();
        }
    }
    if oob_only {
        0
    } else {
        pages as u64 * g.page_size() as u64
    }
}

fn parallel(profile: Profile, blocks_per_die: u32) -> (u64, Counters) {
    let mut sim = SimNand::heap(profile, FaultPlan::seeded(1));
    let g = sim.geometry();
    let page = vec![0x5Au8; g.page_size() as usize];
    let dies = g.dies();
    for round in 0..blocks_per_die {
        for d in 0..dies {
            sim.wait_die(d).unwrap();
            sim.start_erase(BlockAddr(g.first_block_of_die(d).0 + round))
                .unwrap();
        }
        for i in 0..g.pages_per_block() {
            for d in 0..dies {
                let block = BlockAddr(g.first_block_of_die(d).0 + round);
                sim.wait_die(d).unwrap();
                sim.start_program(g.page(block, i), 0, &page, &[]).unwrap();
            }
        }
    }
    sim.wait_all().unwrap();
    let bytes = (dies * blocks_per_die) as u64 * g.block_size() as u64;
    (bytes, sim.counters())
}

fn main() {
    let profile = W25N01GV;
    println!("Simulated {}: {}", profile.name, profile.geometry);
    println!(
        "tR {} us, tPROG {} us, tBERS {} us, bus {:.2} ns/B (typical timings)\n",
        profile.timing.t_read.typ_ns / 1000,
        profile.timing.t_program.typ_ns / 1000,
        profile.timing.t_erase.typ_ns / 1000,
        profile.timing.bus_ps_per_byte as f64 / 1000.0
    );
    println!(
        "{:<34} {:>8} {:>8} {:>7} {:>10} {:>9} {:>8}",
        "workload", "programs", "reads", "erases", "sim ms", "MB/s", "WA"
    );
    let mut sim = SimNand::heap(profile, FaultPlan::seeded(1));

    let c0 = sim.counters();
    let n = sequential(&mut sim, 64);
    row(
        "sequential pages + erases (8 MiB)",
        n,
        &(sim.counters() - c0),
    );

    let c0 = sim.counters();
    let n = sector_appends(&mut sim, 8);
    row("512 B partial programs (1 MiB)", n, &(sim.counters() - c0));

    let c0 = sim.counters();
    let n = reads(&mut sim, 4096, false);
    row("random page reads (8 MiB)", n, &(sim.counters() - c0));

    let c0 = sim.counters();
    reads(&mut sim, 4096, true);
    let d = sim.counters() - c0;
    row("random 16 B spare-only reads", 0, &d);

    let quad = profile.with_blocks_per_die(16).with_dies(4, 1);
    let (n, d) = parallel(quad, 8);
    row("4 dies on one bus, pipelined", n, &d);
    let (n, d) = parallel(profile.with_blocks_per_die(40), 32);
    row("1 die, same pipelined loop", n, &d);

    let w = sim.wear_stats();
    let c = sim.counters();
    println!(
        "\ntotals: {} reads, {} programs ({} partial), {} erases, {:.1} MB over the bus, {:.3} s simulated",
        c.reads,
        c.programs,
        c.partial_programs,
        c.erases,
        c.bus_bytes as f64 / 1e6,
        c.time_ns as f64 / 1e9
    );
    println!(
        "erase counts over good blocks: min {} max {} mean {:.3}",
        w.min, w.max, w.mean
    );
}
