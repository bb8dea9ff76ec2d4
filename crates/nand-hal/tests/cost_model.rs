//! Golden numbers for the cost model: single operations on W25N01GV cost the command, the
//! transfer and the array time; programs spread over k dies sharing one SPI channel finish
//! in about N/k x (tPROG + transfer) until the bus saturates near 7 dies, and no faster.

use nand_hal::sim::profile::{W25N01GV, W25N_4CH_2DIE};
use nand_hal::sim::{FaultPlan, SimNand, TimingMode};
use nand_hal::{BlockAddr, NandFlash, PipelinedNand};

const CMD_PROG: u64 = 614;
const CMD_READ: u64 = 461;
const CMD_ERASE: u64 = 384;
/// 2112 bytes at 19.231 ns/B, rounded up.
const XFER_PAGE: u64 = 40_616;
const T_PROG: u64 = 250_000;

#[test]
fn one_program_costs_command_transfer_and_tprog() {
    let mut sim = SimNand::heap(W25N01GV, FaultPlan::seeded(0));
    let g = sim.geometry();
    let page = vec![0x5A; 2048];
    let oob = vec![0xFF; 64];
    sim.program_page(g.page(BlockAddr(3), 0), &page, &oob)
        .unwrap();
    assert_eq!(sim.now_ns(), CMD_PROG + XFER_PAGE + T_PROG);
    assert_eq!(sim.now_ns(), 291_230);
}

#[test]
fn partial_program_still_costs_a_full_tprog() {
    let mut sim = SimNand::heap(W25N01GV, FaultPlan::seeded(0));
    let g = sim.geometry();
    sim.program(g.page(BlockAddr(3), 0), 512, &[0x11; 512], &[])
        .unwrap();
    // 512 bytes at 19.231 ns/B = 9846.3 -> 9847 ns.
    assert_eq!(sim.now_ns(), CMD_PROG + 9_847 + T_PROG);
}

#[test]
fn read_and_erase_cost() {
    let mut sim = SimNand::heap(W25N01GV, FaultPlan::seeded(0));
    let g = sim.geometry();
    let mut data = vec![0; 2048];
    let mut oob = vec![0; 64];
    sim.read_page(g.page(BlockAddr(1), 0), &mut data, &mut oob)
        .unwrap();
    assert_eq!(sim.now_ns(), CMD_READ + 25_000 + XFER_PAGE);
    let t0 = sim.now_ns();
    sim.erase(BlockAddr(1)).unwrap();
    assert_eq!(sim.now_ns() - t0, CMD_ERASE + 2_000_000);
    let t0 = sim.now_ns();
    sim.read_oob(g.page(BlockAddr(1), 0), &mut oob[..16])
        .unwrap();
    // 16 bytes at 19.231 ns/B = 307.7 -> 308 ns.
    assert_eq!(sim.now_ns() - t0, CMD_READ + 25_000 + 308);
}

#[test]
fn max_timing_mode_charges_datasheet_maxima() {
    let mut sim = SimNand::heap(W25N01GV, FaultPlan::seeded(0));
    sim.set_timing_mode(TimingMode::Max);
    sim.erase(BlockAddr(1)).unwrap();
    assert_eq!(sim.now_ns(), CMD_ERASE + 10_000_000);
}

#[test]
fn random_timing_is_seeded_and_within_range() {
    let run = |seed| {
        let mut sim = SimNand::heap(W25N01GV, FaultPlan::seeded(seed));
        sim.set_timing_mode(TimingMode::Random);
        let mut times = Vec::new();
        for b in 1..20 {
            let t0 = sim.now_ns();
            sim.erase(BlockAddr(b)).unwrap();
            times.push(sim.now_ns() - t0 - CMD_ERASE);
        }
        times
    };
    let a = run(5);
    assert_eq!(a, run(5));
    assert_ne!(a, run(6));
    assert!(a.iter().all(|&t| (2_000_000..=10_000_000).contains(&t)));
}

/// `n` programs round-robin over `k` dies that share one channel; returns the makespan.
fn pipelined_makespan(k: u32, n: u32) -> u64 {
    let profile = W25N01GV.with_blocks_per_die(8).with_dies(k, 1);
    let mut sim = SimNand::heap(profile, FaultPlan::seeded(0));
    let g = sim.geometry();
    let page = vec![0xA5; 2048];
    for i in 0..n {
        let die = i % k;
        let block = g.first_block_of_die(die);
        let idx = i / k;
        if sim.die_busy(die) {
            sim.wait_die(die).unwrap();
        }
        sim.start_program(g.page(block, idx), 0, &page, &[])
            .unwrap();
    }
    sim.wait_all().unwrap();
    sim.now_ns()
}

#[test]
fn programs_over_k_dies_on_one_channel_scale_until_the_bus_saturates() {
    let n = 56;
    // 2048 bytes: 39 386 ns of transfer (2048 x 19.231 rounded up).
    let bus = CMD_PROG + 39_386;
    let per_die = bus + T_PROG;
    for k in [1, 2, 4, 7] {
        // Die-bound: each die programs back to back; the first transfers stagger by `bus`.
        let expected = (n / k) as u64 * per_die + (k as u64 - 1) * bus;
        assert_eq!(pipelined_makespan(k, n), expected, "k = {k}");
    }
    // Bus-bound past ~7 dies: N transfers back to back plus the last tPROG.
    for k in [8, 14] {
        let expected = n as u64 * bus + T_PROG;
        assert_eq!(pipelined_makespan(k, n), expected, "k = {k}");
    }
    // The crossover: 7 dies keep the bus busy ((bus + tPROG) / bus ~ 7.3).
    assert_eq!(per_die / bus, 7);
    let speedup7 = pipelined_makespan(1, n) as f64 / pipelined_makespan(7, n) as f64;
    let speedup14 = pipelined_makespan(1, n) as f64 / pipelined_makespan(14, n) as f64;
    assert!(speedup7 > 6.0 && speedup14 < 7.5, "{speedup7} {speedup14}");
}

#[test]
fn separate_channels_overlap_fully() {
    // Eight dies, two per channel on four channels: one program per die takes one
    // program time plus the transfer of the other die on the same channel.
    let mut sim = SimNand::heap(W25N_4CH_2DIE.with_blocks_per_die(8), FaultPlan::seeded(0));
    let g = sim.geometry();
    let page = vec![0x3C; 2048];
    for d in 0..g.dies() {
        sim.start_program(g.page(g.first_block_of_die(d), 0), 0, &page, &[])
            .unwrap();
    }
    sim.wait_all().unwrap();
    let bus = CMD_PROG + 39_386;
    assert_eq!(sim.now_ns(), 2 * bus + T_PROG);
}

#[test]
fn blocking_io_on_a_busy_die_is_misuse() {
    let mut sim = SimNand::heap(W25N01GV, FaultPlan::seeded(0));
    let g = sim.geometry();
    sim.start_erase(BlockAddr(2)).unwrap();
    let mut buf = [0u8; 16];
    let err = sim.read_oob(g.page(BlockAddr(2), 0), &mut buf).unwrap_err();
    assert_eq!(err.kind(), nand_hal::ErrorKind::Misuse);
    sim.wait_die(0).unwrap();
    sim.read_oob(g.page(BlockAddr(2), 0), &mut buf).unwrap();
}
