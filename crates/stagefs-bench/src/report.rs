//! The results table, and littlefs2 against its published figures.

use nand_hal::sim::WearStats;

use crate::meter::{End, Window};
use crate::workload::Workload;

/// One target on one workload.
pub struct Row {
    /// Target name.
    pub target: String,
    /// Workload.
    pub workload: Workload,
    /// The measured window.
    pub window: Window,
    /// Mount time after a clean unmount (simulated ns).
    pub mount_clean_ns: u64,
    /// Mount time after a power cut in the middle of the workload (simulated ns), if
    /// the cut landed.
    pub mount_after_cut_ns: Option<u64>,
    /// Flash holding live data after the final drain.
    pub live_bytes: Option<u64>,
    /// Erase spread at the end.
    pub wear: WearStats,
}

impl Row {
    /// User bytes per simulated second over the window.
    pub fn throughput(&self) -> f64 {
        self.window.counters.throughput(self.window.user_bytes)
    }

    /// Bytes programmed per user byte over the window.
    pub fn wa(&self) -> f64 {
        self.window
            .counters
            .write_amplification(self.window.user_bytes)
    }
}

/// A rate for people.
pub fn rate(bps: f64) -> String {
    if bps >= 1e6 {
        format!("{:.2} MB/s", bps / 1e6)
    } else {
        format!("{:.2} kB/s", bps / 1e3)
    }
}

fn ms(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{:.1} s", ns as f64 / 1e9)
    } else {
        format!("{:.2} ms", ns as f64 / 1e6)
    }
}

/// littlefs-benchmarks' published lfs2 NAND figures at a 1 MiB target (throughput in
/// bytes per second, WA), `shared/reference/perf-reliability.md` 1.2.
pub fn published_lfs2(w: Workload) -> Option<(f64, f64)> {
    match w {
        Workload::Linear => Some((1.69e6, 1.00)),
        Workload::Random => Some((160.0, 9220.0)),
        Workload::Logging => Some((1.41e3, 1031.0)),
        // Published for littlefs-benchmarks' shape of `many` (files created on first
        // pick), not for rewrites of existing files.
        Workload::ManyPublished => Some((210.0, 16.0)),
        Workload::Many | Workload::RandomSync | Workload::Varmail => None,
    }
}

/// The rows as CSV (RFC 4180: the target quoted; one line per target and workload; littlefs2's published figures
/// as target `littlefs2 (published)`), for `stagefs bench-plot`.
pub fn csv(rows: &[Row]) -> String {
    let mut s = String::from(
        "workload,target,throughput_bytes_per_s,write_amplification,worst_op_ns,mount_clean_ns,mount_after_cut_ns\n",
    );
    let mut published = Vec::new();
    for r in rows {
        s.push_str(&format!(
            "{},\"{}\",{:.3},{:.4},{},{},{}\n",
            r.workload,
            r.target,
            r.throughput(),
            r.wa(),
            r.window.worst_op_ns,
            r.mount_clean_ns,
            r.mount_after_cut_ns
                .map_or(String::new(), |n| n.to_string())
        ));
        if let Some((bps, wa)) = published_lfs2(r.workload) {
            if !published.contains(&r.workload) {
                published.push(r.workload);
                s.push_str(&format!(
                    "{},littlefs2 (published),{bps:.3},{wa:.4},,,\n",
                    r.workload
                ));
            }
        }
    }
    s
}

/// Prints the tables (Markdown, so they can go straight into the README).
pub fn print(rows: &[Row], setup: &str) {
    println!("{setup}\n");
    println!(
        "| workload | target | throughput | WA | programs / KiB | erases / MiB | worst op | mount clean | mount after cut | live flash | erase spread | run |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let w = &r.window;
        let c = &w.counters;
        let mib = w.user_bytes as f64 / (1 << 20) as f64;
        let per_kib = if w.user_bytes == 0 {
            0.0
        } else {
            c.programs as f64 * 1024.0 / w.user_bytes as f64
        };
        let run = match (w.end, w.filled) {
            (End::TwiceFree, true) => "2x free",
            (End::Hour, true) => "1 h",
            (End::Budget, true) => "short",
            (_, false) => "never filled",
        };
        println!(
            "| {} | {} | {} | {:.2} | {:.2} | {:.2} | {} ({}) | {} | {} | {} | {} | {} |",
            r.workload,
            r.target,
            rate(r.throughput()),
            r.wa(),
            per_kib,
            if mib > 0.0 {
                c.erases as f64 / mib
            } else {
                0.0
            },
            ms(w.worst_op_ns),
            w.worst_op,
            ms(r.mount_clean_ns),
            r.mount_after_cut_ns.map_or("-".to_string(), ms),
            r.live_bytes.map_or("-".to_string(), |b| {
                format!("{:.2} MiB", b as f64 / (1 << 20) as f64)
            }),
            r.wear.max - r.wear.min,
            run
        );
    }
    let lfs: Vec<&Row> = rows
        .iter()
        .filter(|r| r.target == "littlefs2" && published_lfs2(r.workload).is_some())
        .collect();
    if lfs.is_empty() {
        return;
    }
    println!("\nlittlefs2 against littlefs-benchmarks' published lfs2 NAND results (1 MiB target, 1 simulated hour):\n");
    println!("| workload | throughput here | published | diff | WA here | published | diff |");
    println!("|---|---|---|---|---|---|---|");
    for r in lfs {
        let (tp, wa) = published_lfs2(r.workload).expect("filtered");
        let d = |a: f64, b: f64| format!("{:+.1}%", (a / b - 1.0) * 100.0);
        println!(
            "| {} | {} | {} | {} | {:.2} | {:.2} | {} |",
            r.workload,
            rate(r.throughput()),
            rate(tp),
            d(r.throughput(), tp),
            r.wa(),
            wa,
            d(r.wa(), wa)
        );
    }
}
