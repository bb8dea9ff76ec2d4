//! Produces the measured tables of the `paragc` README on the `nand-hal` simulator.
//!
//! ```text
//! cargo run --release -p paragc --example experiments            # everything
//! cargo run --release -p paragc --example experiments -- gc      # GC efficiency, WA
//! cargo run --release -p paragc --example experiments -- classifiers
//! cargo run --release -p paragc --example experiments -- idle    # background GC share
//! cargo run --release -p paragc --example experiments -- wear    # erase-count spread
//! cargo run --release -p paragc --example experiments -- sched   # makespan, read tail
//! ```
//!
//! Every run is seeded and deterministic; the smaller variants are pinned as golden
//! numbers in `tests/`.

#[path = "../tests/common/mod.rs"]
mod common;

use common::parallel::{run_parallel, ParallelReport, ParallelSetup};
use common::*;
use nand_hal::sim::profile::{Profile, MT29F_2CH_4LUN, TINY, W25N01GV, W25N_4CH_2DIE};
use paragc::sched::{Eager, Formula2, LeastBusy, Order, RoundRobin};
use paragc::{
    DynamicOnly, GreedyCostBenefit, GreedyVictim, HintOnly, HotnessTracker, Leveling, NoLeveling,
    WearPolicy,
};

const WORKLOADS: [Workload; 4] = [
    Workload::new(Skew::Uniform, 0, 7),
    Workload::new(
        Skew::HotCold {
            hot_percent: 80,
            set_percent: 20,
        },
        0,
        7,
    ),
    Workload::new(
        Skew::HotCold {
            hot_percent: 90,
            set_percent: 10,
        },
        0,
        7,
    ),
    Workload::new(
        Skew::HotCold {
            hot_percent: 80,
            set_percent: 20,
        },
        100,
        7,
    ),
];

fn gc_row(p: Profile, w: Workload, util: u32) {
    let mut b = Store::new(
        p,
        StoreConfig::baseline(util),
        HintOnly,
        GreedyVictim,
        NoLeveling,
    );
    let rb = run(&mut b, w, 20, 40).expect("baseline run");
    let mut s = Store::new(
        p,
        StoreConfig::paragc(util),
        HotnessTracker::<16384>::new(3, 2),
        GreedyCostBenefit,
        Leveling::<16>,
    );
    let rs = run(&mut s, w, 20, 40).expect("paragc run");
    assert_eq!(b.sim.counters().misuse + s.sim.counters().misuse, 0);
    println!(
        "| {}% | {} | {:.1}% | {:.1} | {:.2} | **{:.1}%** | {:.1} | **{:.2}** |",
        util / 10,
        w.name(),
        rb.gc.efficiency(),
        rb.gc.moved_per_block(),
        rb.write_amplification(),
        rs.gc.efficiency(),
        rs.gc.moved_per_block(),
        rs.write_amplification(),
    );
}

fn gc() {
    let header = "| util | workload | base eff | base moved/blk | base WA | paragc eff | paragc moved/blk | paragc WA |\n|---|---|---|---|---|---|---|---|";
    let single = W25N01GV.with_blocks_per_die(256);
    println!(
        "\n### GC efficiency and write amplification: {} (1 die, 256 blocks)\n",
        single.name
    );
    println!("{header}");
    for util in [400, 500, 600, 700, 800, 900] {
        for w in WORKLOADS {
            gc_row(single, w, util);
        }
    }
    let multi = W25N_4CH_2DIE.with_blocks_per_die(32);
    println!(
        "\n### Same, striped over {} (8 dies x 32 blocks)\n",
        multi.name
    );
    println!("{header}");
    for util in [400, 700, 800] {
        for w in WORKLOADS {
            gc_row(multi, w, util);
        }
    }
}

fn eff<C: paragc::Classifier>(p: Profile, w: Workload, util: u32, cls: C) -> String {
    let mut s = Store::new(
        p,
        StoreConfig::paragc(util),
        cls,
        GreedyCostBenefit,
        Leveling::<16>,
    );
    let r = run(&mut s, w, 20, 40).expect("classifier run");
    format!("{:.1}% / {:.2}", r.gc.efficiency(), r.write_amplification())
}

fn classifiers() {
    let p = W25N01GV.with_blocks_per_die(256);
    println!(
        "\n### Classifiers (efficiency / WA), {} (1 die, 256 blocks)\n",
        p.name
    );
    println!("| util | workload | hints only (`Warm`) | `UpdatePromotion` (0 B) | `HotnessTracker<4096>` | `HotnessTracker<16384>` |\n|---|---|---|---|---|---|");
    for util in [400, 600] {
        for w in &WORKLOADS[1..] {
            println!(
                "| {}% | {} | {} | {} | {} | {} |",
                util / 10,
                w.name(),
                eff(p, *w, util, HintOnly),
                eff(p, *w, util, paragc::UpdatePromotion),
                eff(p, *w, util, HotnessTracker::<4096>::new(3, 2)),
                eff(p, *w, util, HotnessTracker::<16384>::new(3, 2)),
            );
        }
    }
}

fn idle() {
    let p = W25N01GV.with_blocks_per_die(256);
    println!(
        "\n### Idle time: one background (cost-benefit) collection every N user writes, {}\n",
        p.name
    );
    println!(
        "| util | workload | never | every 256 (tables above) | every 64 |\n|---|---|---|---|---|"
    );
    for util in [400, 600, 800] {
        for w in &WORKLOADS[1..3] {
            let cell = |every: u32| {
                let mut cfg = StoreConfig::paragc(util);
                cfg.background_every = every;
                let mut s = Store::new(
                    p,
                    cfg,
                    HotnessTracker::<16384>::new(3, 2),
                    GreedyCostBenefit,
                    Leveling::<16>,
                );
                let r = run(&mut s, *w, 20, 40).expect("idle run");
                format!("{:.1}% / {:.2}", r.gc.efficiency(), r.write_amplification())
            };
            println!(
                "| {}% | {} | {} | {} | {} |",
                util / 10,
                w.name(),
                cell(0),
                cell(256),
                cell(64)
            );
        }
    }
}

fn wear_row<W: WearPolicy>(name: &str, wear: W, device_writes: u32) {
    let mut s = Store::new(
        TINY,
        StoreConfig::paragc(700),
        HotnessTracker::<2048>::new(3, 2),
        GreedyCostBenefit,
        wear,
    );
    let w = Workload::new(
        Skew::HotCold {
            hot_percent: 100,
            set_percent: 20,
        },
        0,
        21,
    );
    let r = run(&mut s, w, 0, device_writes * 10).expect("wear run");
    assert_eq!(s.sim.counters().misuse, 0);
    let ws = s.wear();
    println!(
        "| {name} | {device_writes} | {:.1} | {} | {} | {} | **{:.3}** | {} | {:.3} |",
        ws.mean,
        ws.min,
        ws.max,
        ws.max - ws.min,
        ws.max_over_mean(),
        r.gc.static_moved,
        r.write_amplification()
    );
}

fn wear() {
    println!("\n### Erase-count spread: {} (64 blocks x 16 pages), 80% of the data static, 70% utilisation\n", TINY.name);
    println!("| leveling | device writes | mean erases | min | max | max-min | max/mean | pages moved by static WL | WA |\n|---|---|---|---|---|---|---|---|---|");
    for dw in [150, 600] {
        wear_row("static (spread 8) + dynamic", Leveling::<8>, dw);
        wear_row("dynamic only", DynamicOnly, dw);
        wear_row("none", NoLeveling, dw);
    }
}

fn sched_rows(p: Profile, interarrival_ns: u64, read_permille: u32) {
    let base = ParallelSetup {
        utilisation_permille: 700,
        requests: 40_000,
        read_permille,
        interarrival_ns,
        workload: WORKLOADS[1],
        order: Order::Fifo,
        random_timing: false,
    };
    let sliced = ParallelSetup {
        order: Order::Sliced { len: 4 },
        ..base
    };
    let rows: [(&str, ParallelReport); 4] = [
        (
            "static stripe, FIFO, eager erase",
            run_parallel(p, base, RoundRobin, Eager),
        ),
        (
            "least-busy, FIFO, eager erase",
            run_parallel(p, base, LeastBusy, Eager),
        ),
        (
            "static stripe, slices + formula 2",
            run_parallel(p, sliced, RoundRobin, Formula2::<1, 1, 250>),
        ),
        (
            "least-busy, slices + formula 2",
            run_parallel(p, sliced, LeastBusy, Formula2::<1, 1, 250>),
        ),
    ];
    let b = rows[0].1;
    for (name, r) in rows {
        assert_eq!(r.misuse, 0);
        println!(
            "| {} | {name} | {:.1} | {:.2}x | {:.2} | {:.2} | {:.1}x | {} | {} |",
            p.name,
            r.makespan_ns as f64 / 1e6,
            b.makespan_ns as f64 / r.makespan_ns as f64,
            r.read_p50_ns as f64 / 1e6,
            r.read_p99_ns as f64 / 1e6,
            b.read_p99_ns as f64 / r.read_p99_ns as f64,
            r.moves,
            r.erases
        );
    }
}

fn sched() {
    let header = "| profile | dispatch / order | makespan ms | speed-up | read p50 ms | read p99 ms | p99 gain | GC moves | erases |\n|---|---|---|---|---|---|---|---|---|";
    let profiles = [
        W25N_4CH_2DIE.with_blocks_per_die(64),
        MT29F_2CH_4LUN.with_blocks_per_die(64),
    ];
    println!("\n### Write burst (40 000 requests at once, 10% reads, 80/20, 70% utilisation)\n");
    println!("{header}");
    for p in profiles {
        sched_rows(p, 1, 100);
    }
    println!("\n### Steady load (one request every 100 us on average, 30% reads, 80/20, 70% utilisation)\n");
    println!("{header}");
    for p in profiles {
        sched_rows(p, 100_000, 300);
    }
}

fn main() {
    let what = std::env::args().nth(1).unwrap_or_else(|| "all".to_string());
    match what.as_str() {
        "gc" => gc(),
        "classifiers" => classifiers(),
        "idle" => idle(),
        "wear" => wear(),
        "sched" => sched(),
        "all" => {
            gc();
            classifiers();
            idle();
            wear();
            sched();
        }
        other => {
            eprintln!(
                "unknown experiment {other:?}: use gc, classifiers, idle, wear, sched or all"
            );
            std::process::exit(2);
        }
    }
}
