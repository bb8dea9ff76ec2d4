//! The workloads, written once against [`Target`], a small file interface each store
//! implements.
//!
//! The four littlefs-benchmarks workloads (`bench_p26_wt.toml`, see
//! `shared/reference/perf-reliability.md` 1.2), all in 64 B chunks:
//!
//! - `linear`: append to one file; at the target size, reopen it with truncate;
//! - `random`: 64 B writes at random offsets in a file of the target size, no sync;
//! - `logging`: append + fsync, rotating (reopen with truncate) at the target size;
//! - `many`: rewrite (open with truncate, write, close) one of `size / 64` files.
//!
//! `many` here rewrites files that all exist (created before the run, in `/many`), as
//! the target states it. littlefs-benchmarks runs it differently, and its
//! published figures are for its shape, which `many-published` reproduces: the files
//! sit in the root, none exists before the run, and the open that first picks a name
//! creates it (`O_CREAT | O_TRUNC`). In one simulated hour littlefs2 picks about
//! 12,000 names, so most of its opens create a file: a create commit and a data
//! commit, WA 16 where rewriting an existing file costs one commit, WA 8.
//!
//! and two more:
//!
//! - `random-sync`: 64 B overwrites at random offsets in a file of the target size, each
//!   followed by fsync (the shape of a database's page updates);
//! - `varmail` (after filebench's): [`MAIL_FILES`] files in one directory; each step
//!   deletes one and creates it again with 64 B to 4 KiB (fsync, close), appends 64 to
//!   512 B to another (fsync, close) and reads a third whole.

use std::fmt;

use crate::device::Device;
use crate::meter::Meter;

/// Chunk size of the littlefs-benchmarks workloads.
pub const CHUNK: usize = 64;
/// Files of `varmail`.
pub const MAIL_FILES: usize = 1000;

/// A workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// Append, truncate at the target size.
    Linear,
    /// 64 B overwrites at random offsets.
    Random,
    /// 64 B append + fsync.
    Logging,
    /// Rewrite one of many 64 B files.
    Many,
    /// `many` as littlefs-benchmarks runs it: the files in the root, each created by
    /// the first open that picks it (the shape of littlefs2's published figures).
    ManyPublished,
    /// 64 B overwrites at random offsets, each fsynced.
    RandomSync,
    /// Mail-server-like create, append, fsync, read, delete.
    Varmail,
}

impl Workload {
    /// Every workload, in report order.
    pub const ALL: [Workload; 7] = [
        Workload::Linear,
        Workload::Random,
        Workload::Logging,
        Workload::Many,
        Workload::ManyPublished,
        Workload::RandomSync,
        Workload::Varmail,
    ];
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Workload::Linear => "linear",
            Workload::Random => "random",
            Workload::Logging => "logging",
            Workload::Many => "many",
            Workload::ManyPublished => "many-published",
            Workload::RandomSync => "random-sync",
            Workload::Varmail => "varmail",
        })
    }
}

/// How a file is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Open {
    /// Write, create if missing, truncate.
    Truncate,
    /// Read and write an existing file.
    ReadWrite,
    /// Append to an existing file.
    Append,
    /// Write a file that must not exist yet.
    CreateNew,
    /// Read an existing file.
    Read,
}

/// A file handle of a target.
pub type Handle = usize;

/// A store under test, over a simulated [`Device`]: its life cycle and the file calls
/// the workloads make. Errors are strings for the report.
pub trait Target {
    /// Name for the report.
    fn name(&self) -> String;
    /// The device it runs on.
    fn device(&self) -> &Device;
    /// Formats the device.
    fn format(&mut self) -> Result<(), String>;
    /// Work done between format and the workload's set-up in the published
    /// configuration of a peer (littlefs-benchmarks' warm-up); nothing by default.
    fn warm_up(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// Mounts (after a power cut: with the recovery).
    fn mount(&mut self) -> Result<(), String>;
    /// Unmounts: everything durable, staged data patched (the final drain).
    fn unmount(&mut self) -> Result<(), String>;
    /// Bytes of flash holding live data (pages or blocks in use), if the store tells.
    fn live_bytes(&mut self) -> Option<u64>;
    /// Remembers the state the target keeps on the host besides the device (raw oftl's
    /// table of names), for [`Target::restore_host_state`] when the device goes back to
    /// a snapshot taken now. Nothing by default.
    fn save_host_state(&mut self) {}
    /// Goes back to the host state [`Target::save_host_state`] remembered.
    fn restore_host_state(&mut self) {}

    /// Opens `path`.
    fn open(&mut self, path: &str, how: Open) -> Result<Handle, String>;
    /// Writes at the handle's position.
    fn write(&mut self, f: Handle, data: &[u8]) -> Result<(), String>;
    /// Moves the handle's position.
    fn seek(&mut self, f: Handle, to: u64) -> Result<(), String>;
    /// Reads at the handle's position; bytes read.
    fn read(&mut self, f: Handle, buf: &mut [u8]) -> Result<usize, String>;
    /// Makes the file durable.
    fn fsync(&mut self, f: Handle) -> Result<(), String>;
    /// Closes (durably, as every store here does).
    fn close(&mut self, f: Handle) -> Result<(), String>;
    /// Removes a file.
    fn remove(&mut self, path: &str) -> Result<(), String>;
    /// Creates a directory.
    fn create_dir(&mut self, path: &str) -> Result<(), String>;
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
    /// A value below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Fills `buf` with pseudo-random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let x = self.next().to_le_bytes();
            c.copy_from_slice(&x[..c.len()]);
        }
    }
}

fn many_name(i: usize) -> String {
    format!("/many/f{i:05}")
}

/// littlefs-benchmarks' names (`bench_%08x`, in the root).
fn published_many_name(i: usize) -> String {
    format!("/bench_{i:08x}")
}

fn mail_name(i: usize) -> String {
    format!("/mail/m{i:04}")
}

/// The file every single-file workload uses.
const FILE: &str = "/file";

/// Sets up the workload's starting state on a mounted target (not measured); returns
/// the user bytes it holds.
pub fn prepare(t: &mut dyn Target, w: Workload, size: usize, rng: &mut Rng) -> Result<u64, String> {
    match w {
        Workload::Linear | Workload::Logging => {
            let f = t.open(FILE, Open::Truncate)?;
            t.close(f)?;
            Ok(0)
        }
        Workload::Random | Workload::RandomSync => {
            let f = t.open(FILE, Open::Truncate)?;
            let zeros = vec![0u8; 64 << 10];
            let mut at = 0;
            while at < size {
                let n = zeros.len().min(size - at);
                t.write(f, &zeros[..n])?;
                at += n;
            }
            t.close(f)?;
            Ok(size as u64)
        }
        // No file exists before the run (littlefs-benchmarks' `bench_p26_wt_many`).
        Workload::ManyPublished => Ok(0),
        Workload::Many => {
            t.create_dir("/many")?;
            for i in 0..size / CHUNK {
                let f = t.open(&many_name(i), Open::Truncate)?;
                t.write(f, &[0u8; CHUNK])?;
                t.close(f)?;
            }
            Ok(size as u64)
        }
        Workload::Varmail => {
            t.create_dir("/mail")?;
            let mut total = 0;
            let mut buf = vec![0u8; 4096];
            for i in 0..MAIL_FILES {
                let n = (1 + rng.below(64)) * 64;
                rng.fill(&mut buf[..n]);
                let f = t.open(&mail_name(i), Open::Truncate)?;
                t.write(f, &buf[..n])?;
                t.close(f)?;
                total += n as u64;
            }
            Ok(total)
        }
    }
}

/// Runs the workload on a mounted target until the meter says stop. File calls are
/// timed one by one; user bytes are counted as they are written.
pub fn run(
    t: &mut dyn Target,
    w: Workload,
    size: usize,
    rng: &mut Rng,
    m: &mut Meter<'_>,
) -> Result<(), String> {
    let mut chunk = [0u8; CHUNK];
    match w {
        Workload::Linear | Workload::Logging => {
            let sync_each = w == Workload::Logging;
            'outer: loop {
                let f = m.op("open", || t.open(FILE, Open::Truncate))?;
                let mut len = 0;
                while len + CHUNK <= size {
                    if !m.go_on() {
                        m.op("close", || t.close(f))?;
                        break 'outer;
                    }
                    rng.fill(&mut chunk);
                    m.op("write", || t.write(f, &chunk))?;
                    if sync_each {
                        m.op("fsync", || t.fsync(f))?;
                    }
                    len += CHUNK;
                    m.wrote(CHUNK as u64);
                }
                m.op("close", || t.close(f))?;
            }
        }
        Workload::Random | Workload::RandomSync => {
            let sync_each = w == Workload::RandomSync;
            let f = m.op("open", || t.open(FILE, Open::ReadWrite))?;
            while m.go_on() {
                rng.fill(&mut chunk);
                let off = (rng.below(size / CHUNK) * CHUNK) as u64;
                m.op("seek", || t.seek(f, off))?;
                m.op("write", || t.write(f, &chunk))?;
                if sync_each {
                    m.op("fsync", || t.fsync(f))?;
                }
                m.wrote(CHUNK as u64);
            }
            m.op("close", || t.close(f))?;
        }
        Workload::Many | Workload::ManyPublished => {
            let n = size / CHUNK;
            while m.go_on() {
                rng.fill(&mut chunk);
                let i = rng.below(n);
                let name = if w == Workload::Many {
                    many_name(i)
                } else {
                    published_many_name(i)
                };
                let f = m.op("open", || t.open(&name, Open::Truncate))?;
                m.op("write", || t.write(f, &chunk))?;
                m.op("close", || t.close(f))?;
                m.wrote(CHUNK as u64);
            }
        }
        Workload::Varmail => {
            let mut buf = vec![0u8; 4096];
            while m.go_on() {
                // Delete one mail and deliver it again.
                let name = mail_name(rng.below(MAIL_FILES));
                m.op("remove", || t.remove(&name))?;
                let n = (1 + rng.below(64)) * 64;
                rng.fill(&mut buf[..n]);
                let f = m.op("open", || t.open(&name, Open::CreateNew))?;
                m.op("write", || t.write(f, &buf[..n]))?;
                m.op("fsync", || t.fsync(f))?;
                m.op("close", || t.close(f))?;
                m.wrote(n as u64);
                // Append to another.
                let name = mail_name(rng.below(MAIL_FILES));
                let n = (1 + rng.below(8)) * 64;
                rng.fill(&mut buf[..n]);
                let f = m.op("open", || t.open(&name, Open::Append))?;
                m.op("write", || t.write(f, &buf[..n]))?;
                m.op("fsync", || t.fsync(f))?;
                m.op("close", || t.close(f))?;
                m.wrote(n as u64);
                // Read a third whole.
                let name = mail_name(rng.below(MAIL_FILES));
                let f = m.op("open", || t.open(&name, Open::Read))?;
                loop {
                    let got = m.op("read", || t.read(f, &mut buf))?;
                    if got < buf.len() {
                        break;
                    }
                }
                m.op("close", || t.close(f))?;
            }
        }
    }
    Ok(())
}
