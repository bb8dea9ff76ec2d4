//! The littlefs-benchmarks workloads (`bench_p26_wt.toml`, see
//! `shared/reference/perf-reliability.md` 1.2), written once against a small file-system
//! interface that each target implements.
//!
//! - `linear`: append 64 B chunks to one file; at the target size, truncate it to 0;
//! - `random`: 64 B writes at random offsets in a file of the target size, no sync;
//! - `logging`: append 64 B and sync after every append, rotating at the target size;
//! - `many`: rewrite (truncate + write) one of `size / 64` files of 64 B.
//!
//! Each runs until a budget of simulated time is spent (littlefs's benchmark uses one
//! simulated hour; the default here is shorter, the rates settle within seconds).

use std::fmt;

/// Chunk size of every workload.
pub const CHUNK: usize = 64;

/// A workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// Append, truncate at the target size.
    Linear,
    /// 64 B overwrites at random offsets.
    Random,
    /// 64 B append + sync.
    Logging,
    /// Rewrite one of many 64 B files.
    Many,
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Workload::Linear => "linear",
            Workload::Random => "random",
            Workload::Logging => "logging",
            Workload::Many => "many",
        })
    }
}

/// A storage stack under test, over a simulated [`Device`](crate::device::Device).
pub trait Target {
    /// Name for the report.
    fn name(&self) -> &'static str;
    /// The device it runs on.
    fn device(&self) -> &crate::device::Device;
    /// Formats the device.
    fn format(&mut self) -> Result<(), String>;
    /// Sets up the workload's starting state (for example the `size`-byte file that
    /// `random` overwrites); not measured.
    fn prepare(&mut self, w: Workload, size: usize) -> Result<(), String>;
    /// Mounts, runs the workload until `go_on(user_bytes_so_far)` says stop, makes
    /// everything durable and unmounts. Returns the user bytes written.
    fn run(
        &mut self,
        w: Workload,
        size: usize,
        rng: &mut Rng,
        go_on: &mut dyn FnMut(u64) -> bool,
    ) -> Result<u64, String>;
    /// Mounts and unmounts (the caller times it on the device clock).
    fn mount_unmount(&mut self) -> Result<(), String>;
}

/// A small deterministic generator for offsets and payloads.
pub struct Rng(u64);

impl Rng {
    /// Seeded.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    /// Next value.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
