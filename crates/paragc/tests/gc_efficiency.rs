//! GC efficiency, write amplification and mapping correctness of the reference store
//! with `paragc` policies against a single-log greedy baseline, on seeded workloads.
//! The exact counts are golden numbers: a change that moves them is reviewed like an
//! API change, and the README tables are produced by
//! `cargo run --release -p paragc --example experiments -- gc`.

mod common;

use common::*;
use nand_hal::sim::profile::W25N01GV;
use paragc::{GreedyCostBenefit, GreedyVictim, HintOnly, HotnessTracker, Leveling, NoLeveling};

/// One die of 256 blocks x 64 pages (16 384 pages).
fn profile() -> nand_hal::sim::profile::Profile {
    W25N01GV.with_blocks_per_die(256)
}

const EIGHTY_TWENTY: Skew = Skew::HotCold {
    hot_percent: 80,
    set_percent: 20,
};

/// What a golden run pins.
#[derive(Debug, PartialEq, Eq)]
struct Golden {
    user_writes: u64,
    programs: u64,
    erases: u64,
    victim_pages: u64,
    victim_invalid: u64,
    moved: u64,
}

fn golden(r: &Report) -> Golden {
    Golden {
        user_writes: r.user_writes,
        programs: r.io.programs,
        erases: r.io.erases,
        victim_pages: r.gc.victim_pages,
        victim_invalid: r.gc.victim_invalid,
        moved: r.gc.moved,
    }
}

fn paragc_store(util: u32) -> Store<HotnessTracker<16384>, GreedyCostBenefit, Leveling<16>> {
    Store::new(
        profile(),
        StoreConfig::paragc(util),
        HotnessTracker::new(3, 2),
        GreedyCostBenefit,
        Leveling,
    )
}

fn baseline_store(util: u32) -> Store<HintOnly, GreedyVictim, NoLeveling> {
    Store::new(
        profile(),
        StoreConfig::baseline(util),
        HintOnly,
        GreedyVictim,
        NoLeveling,
    )
}

fn check_clean<C, V, W>(s: &mut Store<C, V, W>)
where
    C: paragc::Classifier,
    V: paragc::VictimPolicy,
    W: paragc::WearPolicy,
{
    assert_eq!(s.sim.counters().misuse, 0, "the store broke a NAND rule");
    assert_eq!(s.verify().unwrap(), s.logical_pages());
}

/// Runs the baseline and paragc on `w` at `util` per mille, checks both stores read
/// back every page, and returns (baseline, paragc).
fn compare(w: Workload, util: u32) -> (Report, Report) {
    let mut b = baseline_store(util);
    let rb = run(&mut b, w, 20, 40).unwrap();
    check_clean(&mut b);
    let mut s = paragc_store(util);
    let rs = run(&mut s, w, 20, 40).unwrap();
    check_clean(&mut s);
    println!(
        "{} at {util}: baseline {:.1}% WA {:.3} {:?}\n  paragc {:.1}% WA {:.3} {:?}",
        w.name(),
        rb.gc.efficiency(),
        rb.write_amplification(),
        golden(&rb),
        rs.gc.efficiency(),
        rs.write_amplification(),
        golden(&rs)
    );
    assert!(rs.gc.efficiency() > rb.gc.efficiency());
    assert!(rs.write_amplification() < rb.write_amplification());
    (rb, rs)
}

// ---------------------------------------------------------------------------------------
// 80/20 at 80% raw utilisation

#[test]
fn eighty_twenty_at_80_percent_beats_the_single_log_baseline() {
    let (rb, rs) = compare(Workload::new(EIGHTY_TWENTY, 0, 7), 800);
    assert_eq!(golden(&rb), GOLDEN_80_BASE);
    assert_eq!(golden(&rs), GOLDEN_80_PARAGC);
}

const GOLDEN_80_BASE: Golden = Golden {
    user_writes: 52428,
    programs: 159345,
    erases: 2490,
    victim_pages: 159360,
    victim_invalid: 52443,
    moved: 106917,
};
const GOLDEN_80_PARAGC: Golden = Golden {
    user_writes: 52428,
    programs: 147377,
    erases: 2302,
    victim_pages: 147328,
    victim_invalid: 52379,
    moved: 94949,
};

// ---------------------------------------------------------------------------------------
// Where separation reaches 90%: 80/20 at 40%, 90/10 with a log stream at 50%

#[test]
fn eighty_twenty_at_40_percent_reaches_90_percent_efficiency() {
    let (rb, rs) = compare(Workload::new(EIGHTY_TWENTY, 0, 7), 400);
    assert!(rs.gc.efficiency() >= 90.0, "{}", rs.gc.efficiency());
    assert_eq!(golden(&rb), GOLDEN_40_BASE);
    assert_eq!(golden(&rs), GOLDEN_40_PARAGC);
}

const GOLDEN_40_BASE: Golden = Golden {
    user_writes: 26212,
    programs: 33062,
    erases: 517,
    victim_pages: 33088,
    victim_invalid: 26238,
    moved: 6850,
};
const GOLDEN_40_PARAGC: Golden = Golden {
    user_writes: 26212,
    programs: 28349,
    erases: 443,
    victim_pages: 28352,
    victim_invalid: 26215,
    moved: 2137,
};

#[test]
fn ninety_ten_with_a_log_stream_at_50_percent() {
    let w = Workload::new(
        Skew::HotCold {
            hot_percent: 90,
            set_percent: 10,
        },
        100,
        7,
    );
    let (rb, rs) = compare(w, 500);
    assert!(rs.gc.efficiency() >= 90.0, "{}", rs.gc.efficiency());
    assert_eq!(golden(&rb), GOLDEN_LOG_BASE);
    assert_eq!(golden(&rs), GOLDEN_LOG_PARAGC);
}

const GOLDEN_LOG_BASE: Golden = Golden {
    user_writes: 32768,
    programs: 42315,
    erases: 661,
    victim_pages: 42304,
    victim_invalid: 32757,
    moved: 9547,
};
const GOLDEN_LOG_PARAGC: Golden = Golden {
    user_writes: 32768,
    programs: 34446,
    erases: 537,
    victim_pages: 34368,
    victim_invalid: 32690,
    moved: 1678,
};
