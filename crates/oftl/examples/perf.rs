//! Simulated performance on the W25N01GV: sequential write throughput and write
//! amplification, and mount time after clean and unclean shutdown at several fill
//! levels. Numbers come from the simulator's clock and counters only.
//!
//! `cargo run --release -p oftl --example perf`

use nand_hal::sim::{profile, FaultPlan, HeapStorage, SimNand};
use oftl::{Config, Greedy, ObjKind, W25n01gv};

type Sim = SimNand<HeapStorage>;

fn main() {
    linear();
    for fill in [10u64, 50, 90] {
        mount_times(fill);
    }
}

fn linear() {
    let mut sim = Sim::heap(profile::W25N01GV, FaultPlan::seeded(1));
    let mut fs = W25n01gv::new(&mut sim, const { Config::new() }, Greedy::DEFAULT);
    fs.format().unwrap();
    let o = fs.create(ObjKind::Object).unwrap();
    let total: u64 = 64 << 20;
    let chunk = vec![0xA5u8; 16 << 10];
    let before = fs.flash().counters();
    let mut off = 0;
    while off < total {
        fs.write(o, off, &chunk).unwrap();
        off += chunk.len() as u64;
    }
    fs.sync().unwrap();
    let d = fs.flash().counters() - before;
    let s = d.time_ns as f64 / 1e9;
    println!(
        "linear: {} MiB in 16 KiB appends: {:.2} MB/s simulated, WA {:.4} (bytes programmed / user bytes), \
         programs/page {:.4}, erases {}, checkpoints {}",
        total >> 20,
        total as f64 / s / 1e6,
        d.bytes_programmed as f64 / total as f64,
        d.programs as f64 / (total as f64 / 2048.0),
        d.erases,
        fs.stats().checkpoints
    );
}

fn mount_times(fill_pct: u64) {
    let mut sim = Sim::heap(profile::W25N01GV, FaultPlan::seeded(2));
    let mut fs = W25n01gv::new(&mut sim, const { Config::new() }, Greedy::DEFAULT);
    fs.format().unwrap();
    let cap = fs.capacity_pages() * 2048;
    let target = cap * fill_pct / 100;
    let chunk = vec![0x5Au8; 64 << 10];
    let mut written = 0;
    let mut objs = Vec::new();
    while written < target {
        let o = fs.create(ObjKind::Object).unwrap();
        objs.push(o);
        let mut off = 0;
        while off < (1 << 20) && written < target {
            fs.write(o, off, &chunk).unwrap();
            off += chunk.len() as u64;
            written += chunk.len() as u64;
        }
    }
    fs.unmount().unwrap();
    let t0 = sim.now_ns();
    let mut fs = W25n01gv::new(&mut sim, Config::new(), Greedy::DEFAULT);
    fs.mount().unwrap();
    let clean = fs.flash().now_ns() - t0;
    // Dirty the window, then crash (drop without unmount).
    for (i, &o) in objs.iter().enumerate().take(8) {
        fs.write(o, 0, &chunk[..(8 << 10) + i]).unwrap();
    }
    for k in 0..200u64 {
        fs.write(objs[0], (k % 16) * 2048, &chunk[..2048]).unwrap();
    }
    drop(fs);
    let t0 = sim.now_ns();
    let mut fs = W25n01gv::new(&mut sim, Config::new(), Greedy::DEFAULT);
    fs.mount().unwrap();
    let crash = fs.flash().now_ns() - t0;
    let st = fs.stats();
    println!(
        "fill {fill_pct:>2}% ({} objects): clean mount {:.2} ms, crash mount {:.2} ms \
         (scanned {} pages, replayed {}, relocated {})",
        objs.len(),
        clean as f64 / 1e6,
        crash as f64 / 1e6,
        st.recovery_scanned_pages,
        st.recovery_replayed_pages,
        st.relocated_pages
    );
}
