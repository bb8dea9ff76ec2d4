//! The results table.

use nand_hal::sim::{Counters, WearStats};

use crate::workload::Workload;

/// One target on one workload.
pub struct Row {
    /// Target name.
    pub target: &'static str,
    /// Workload.
    pub workload: Workload,
    /// Bytes the application wrote during the measured phase.
    pub user_bytes: u64,
    /// Device work during the measured phase.
    pub counters: Counters,
    /// Mount time after a clean unmount (simulated ns).
    pub mount_clean_ns: u64,
    /// Mount time after a power cut (simulated ns), if the cut landed.
    pub mount_unclean_ns: Option<u64>,
    /// The slowest workload step (simulated ns): an append, an fsync'd append, a small
    /// file's rewrite (open, write, close), including the collection it triggered.
    pub worst_step_ns: u64,
    /// Erase spread at the end.
    pub wear: WearStats,
}

impl Row {
    /// User bytes per simulated second.
    pub fn throughput(&self) -> f64 {
        self.counters.throughput(self.user_bytes)
    }
}

fn rate(bps: f64) -> String {
    if bps >= 1e6 {
        format!("{:.2} MB/s", bps / 1e6)
    } else {
        format!("{:.1} kB/s", bps / 1e3)
    }
}

/// Prints the table (Markdown, so it can go straight into the README).
pub fn print(rows: &[Row], setup: &str) {
    println!("{setup}\n");
    println!(
        "| workload | target | throughput | WA (bytes) | programs / KiB | erases | worst step | mount clean | mount after cut | erase spread (max-min, max/mean) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let c = &r.counters;
        let per_kib = if r.user_bytes == 0 {
            0.0
        } else {
            c.programs as f64 * 1024.0 / r.user_bytes as f64
        };
        println!(
            "| {} | {} | {} | {:.2} | {:.2} | {} | {:.2} ms | {:.2} ms | {} | {}, {:.2} |",
            r.workload,
            r.target,
            rate(r.throughput()),
            c.write_amplification(r.user_bytes),
            per_kib,
            c.erases,
            r.worst_step_ns as f64 / 1e6,
            r.mount_clean_ns as f64 / 1e6,
            r.mount_unclean_ns
                .map_or("-".to_string(), |n| format!("{:.2} ms", n as f64 / 1e6)),
            r.wear.max - r.wear.min,
            r.wear.max_over_mean()
        );
    }
}
