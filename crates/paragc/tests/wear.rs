//! Wear leveling over a long skewed run: static leveling keeps `max / mean` erase count
//! at or under 1.1, where dynamic-only and no leveling let cold blocks stay young.

mod common;

use common::*;
use nand_hal::sim::profile::TINY;
use nand_hal::sim::WearStats;
use paragc::{DynamicOnly, GreedyCostBenefit, HotnessTracker, Leveling, NoLeveling, WearPolicy};

/// All writes to a fifth of the data (the rest is static, written once) at 70%
/// utilisation of the 64-block tiny part, for `device_writes` times the logical
/// capacity.
fn long_run<W: WearPolicy>(
    wear: W,
    device_writes: u32,
) -> (
    WearStats,
    Report,
    Store<HotnessTracker<2048>, GreedyCostBenefit, W>,
) {
    let mut s = Store::new(
        TINY,
        StoreConfig::paragc(700),
        HotnessTracker::new(3, 2),
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
    let r = run(&mut s, w, 0, device_writes * 10).unwrap();
    assert_eq!(s.sim.counters().misuse, 0);
    assert_eq!(s.verify().unwrap(), s.logical_pages());
    (s.wear(), r, s)
}

#[test]
fn static_leveling_keeps_max_over_mean_within_1_1() {
    let (lev, rl, s) = long_run(Leveling::<8>, 150);
    let (dyn_only, rd, _) = long_run(DynamicOnly, 150);
    let (none, rn, _) = long_run(NoLeveling, 150);
    println!(
        "leveling {lev:?} {:.3} static moves {}",
        lev.max_over_mean(),
        rl.gc.static_moved
    );
    println!("dynamic  {dyn_only:?} {:.3}", dyn_only.max_over_mean());
    println!("none     {none:?} {:.3}", none.max_over_mean());
    // The manager's view of wear agrees with the simulator's.
    assert_eq!(s.mgr.erase_spread(), (lev.min, lev.max));
    assert!(lev.mean > 100.0, "the run must be long: mean {}", lev.mean);
    assert!(lev.max_over_mean() <= 1.1, "{lev:?}");
    assert!(dyn_only.max_over_mean() > lev.max_over_mean());
    assert!(none.max_over_mean() > lev.max_over_mean());
    assert_eq!(
        (
            lev.min,
            lev.max,
            rl.io.erases,
            rl.gc.static_victims,
            rl.gc.static_moved
        ),
        GOLDEN_LEVELING
    );
    assert_eq!((dyn_only.min, dyn_only.max, rd.io.erases), GOLDEN_DYNAMIC);
    assert_eq!((none.min, none.max, rn.io.erases), GOLDEN_NONE);
}

const GOLDEN_LEVELING: (u32, u32, u64, u64, u64) = (114, 123, 7620, 402, 6008);
const GOLDEN_DYNAMIC: (u32, u32, u64) = (0, 246, 7131);
const GOLDEN_NONE: (u32, u32, u64) = (0, 277, 7137);
