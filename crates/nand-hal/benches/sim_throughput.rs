//! Host CPU cost of the simulator: simulated page operations per second. This bounds how
//! fast power-loss sweeps, fuzzing and benchmarks run.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use nand_hal::sim::profile::{TINY, W25N01GV};
use nand_hal::sim::{FaultConfig, FaultPlan, SimNand};
use nand_hal::{BlockAddr, NandFlash, PageAddr};

fn page_ops(c: &mut Criterion) {
    let mut group = c.benchmark_group("sim");
    let data = vec![0x5Au8; 2048];
    let oob = [0xFFu8; 16];
    let ppb = W25N01GV.geometry.pages_per_block();

    // Program a whole block page by page, then erase it: ppb + 1 operations.
    group.throughput(Throughput::Elements(ppb as u64 + 1));
    group.bench_function("program_block_then_erase/W25N01GV", |b| {
        let mut sim = SimNand::heap(W25N01GV, FaultPlan::seeded(1));
        let g = sim.geometry();
        let mut block = 1;
        b.iter(|| {
            let blk = BlockAddr(block);
            for i in 0..ppb {
                sim.program_page(g.page(blk, i), &data, &oob).unwrap();
            }
            sim.erase(blk).unwrap();
            block = block % 1000 + 1;
        })
    });

    group.throughput(Throughput::Elements(1));
    group.bench_function("read_page/W25N01GV", |b| {
        let mut sim = SimNand::heap(W25N01GV, FaultPlan::seeded(1));
        sim.program_page(PageAddr(64), &data, &oob).unwrap();
        let mut d = vec![0u8; 2048];
        let mut o = [0u8; 64];
        b.iter(|| sim.read_page(PageAddr(64), &mut d, &mut o).unwrap())
    });

    group.bench_function("read_oob/W25N01GV", |b| {
        let mut sim = SimNand::heap(W25N01GV, FaultPlan::seeded(1));
        sim.program_page(PageAddr(64), &data, &oob).unwrap();
        let mut o = [0u8; 16];
        b.iter(|| sim.read_oob(PageAddr(64), &mut o).unwrap())
    });

    // The same cycle with every random fault class armed: the cost of the fault model.
    let tiny_ppb = TINY.geometry.pages_per_block();
    group.throughput(Throughput::Elements(2 * tiny_ppb as u64 + 1));
    group.bench_function("program_read_erase_noisy/tiny", |b| {
        let faults = FaultConfig {
            program_fail_ppm: 0,
            erase_fail_ppm: 0,
            ..FaultConfig::noisy()
        };
        let mut sim = SimNand::heap(TINY, FaultPlan::seeded(1).with_faults(faults));
        let g = sim.geometry();
        let mut d = vec![0u8; 2048];
        let mut block = 1;
        b.iter(|| {
            let blk = BlockAddr(block);
            for i in 0..tiny_ppb {
                let _ = sim.program_page(g.page(blk, i), &data, &oob);
                let _ = sim.read_page(g.page(blk, i), &mut d, &mut []);
            }
            let _ = sim.erase(blk);
            block = block % 60 + 1;
        })
    });

    // A fresh device per power-loss case: what the harness pays per run.
    group.throughput(Throughput::Elements(1));
    group.bench_function("fresh_device/tiny", |b| {
        b.iter_batched(
            || (),
            |_| SimNand::heap(TINY, FaultPlan::seeded(3)),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, page_ops);
criterion_main!(benches);
