//! A file-layer workload with a power cut and a remount, on the simulated `TINY` part:
//! a settings file rewritten (inline in its directory entry), and a log file of 64-byte
//! records, each appended with an `fsync` (the staging log: one sector per record).
//! The flash loses power at a chosen program/erase; after power returns the volume is
//! mounted again (store recovery, then the staging log replayed) and the settings file
//! must hold its last acknowledged contents (or the one being written), the log every
//! fsynced record and at most the one in flight. Then the volume takes more records,
//! unmounts and mounts again with the same contents.

use nand_hal::sim::FaultPlan;
use oftl::Config;
use stagefs_core::{Fs, OpenOptions};

use crate::objects::Tiny;
use crate::shared::Part;

/// The volume on the `TINY` store configuration, 4 open files.
pub type Vol = Fs<Tiny, 2048, 4>;

/// The configuration the volume formats with (its store is the TINY configuration).
pub const CONFIG: Config = Config::new().window_blocks(8).format_id(11);

const RECORD: usize = 64;
const RECORDS: u32 = 200;

/// What one run established.
pub struct Outcome {
    /// Records fsynced before the cut.
    pub acked: u32,
    /// Records found after recovery.
    pub recovered: u32,
    /// Simulated mount time after the cut (recovery and replay), in microseconds.
    pub mount_us: u64,
}

fn record(i: u32, buf: &mut [u8; RECORD]) {
    for (k, b) in buf.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(31) ^ k as u8 ^ (i >> 8) as u8;
    }
}

fn settings(v: u32) -> [u8; 24] {
    let mut s = [b'#'; 24];
    s[..4].copy_from_slice(&v.to_le_bytes());
    s
}

/// Reads `/logs/a` back and checks it holds records `0..n` exactly; returns `n`.
fn check_log(fs: &mut Vol, at_least: u32, at_most: u32) -> Result<u32, &'static str> {
    let f = fs
        .open("/logs/a", OpenOptions::new().read(true))
        .map_err(|_| "log file lost")?;
    let size = fs.len(f).map_err(|_| "log file length")?;
    if size % RECORD as u64 != 0 {
        return Err("log file holds a partial record");
    }
    let n = (size / RECORD as u64) as u32;
    if n < at_least {
        return Err("fsynced records lost");
    }
    if n > at_most {
        return Err("the log grew past its write history");
    }
    let (mut want, mut got) = ([0u8; RECORD], [0u8; RECORD]);
    for i in 0..n {
        if fs.read(f, &mut got).map_err(|_| "read failed")? != RECORD {
            return Err("short read");
        }
        record(i, &mut want);
        if got != want {
            return Err("recovered record differs from what was written");
        }
    }
    fs.close(f).map_err(|_| "close failed")?;
    Ok(n)
}

fn check_settings(fs: &mut Vol, allowed: &[u32]) -> Result<(), &'static str> {
    let f = fs
        .open("/settings", OpenOptions::new().read(true))
        .map_err(|_| "settings lost")?;
    let mut got = [0u8; 24];
    let n = fs.read(f, &mut got).map_err(|_| "read failed")?;
    fs.close(f).map_err(|_| "close failed")?;
    if n != 24 || !allowed.iter().any(|&v| settings(v) == got) {
        return Err("settings file is neither its last nor its next contents");
    }
    Ok(())
}

/// One run on a factory-fresh part (the caller renews it), with the volume in place.
pub fn run(fs: &mut Vol, part: Part, plan: FaultPlan) -> Result<Outcome, &'static str> {
    fs.format().map_err(|_| "format failed")?;
    fs.create_dir("/logs").map_err(|_| "create_dir failed")?;
    let rewrite = OpenOptions::new().write(true).create(true).truncate(true);
    let f = fs.open("/settings", rewrite).map_err(|_| "open failed")?;
    fs.write(f, &settings(0)).map_err(|_| "write failed")?;
    fs.close(f).map_err(|_| "close failed")?;
    let f = fs.open("/logs/a", rewrite).map_err(|_| "open failed")?;
    fs.close(f).map_err(|_| "close failed")?;
    fs.sync().map_err(|_| "sync failed")?;
    part.with(|s| s.arm(plan));

    let mut acked = 0u32;
    let mut version = 0u32;
    let mut buf = [0u8; RECORD];
    'work: {
        let Ok(log) = fs.open("/logs/a", OpenOptions::new().append(true)) else {
            break 'work;
        };
        for i in 0..RECORDS {
            record(i, &mut buf);
            if fs.write(log, &buf).and_then(|_| fs.fsync(log)).is_err() {
                break 'work;
            }
            acked = i + 1;
            if i % 16 == 15 {
                let Ok(s) = fs.open("/settings", rewrite) else {
                    break 'work;
                };
                if fs
                    .write(s, &settings(version + 1))
                    .and_then(|_| fs.close(s))
                    .is_err()
                {
                    break 'work;
                }
                version += 1;
            }
        }
    }
    if part.with(|s| s.is_powered()) {
        return Err("the workload ended without the power cut");
    }
    let t0 = part.with(|s| {
        s.power_on();
        s.disarm();
        s.now_ns()
    });
    fs.mount().map_err(|_| "mount after the cut failed")?;
    let mount_us = (part.with(|s| s.now_ns()) - t0) / 1000;
    let recovered = check_log(fs, acked, acked + 1)?;
    check_settings(fs, &[version, version + 1])?;

    // More records, a clean unmount, a mount: all there.
    let log = fs
        .open("/logs/a", OpenOptions::new().append(true))
        .map_err(|_| "open after recovery failed")?;
    for i in recovered..recovered + 8 {
        record(i, &mut buf);
        fs.write(log, &buf)
            .and_then(|_| fs.fsync(log))
            .map_err(|_| "append after recovery failed")?;
    }
    fs.close(log).map_err(|_| "close failed")?;
    fs.unmount().map_err(|_| "unmount failed")?;
    fs.mount().map_err(|_| "clean mount failed")?;
    check_log(fs, recovered + 8, recovered + 8)?;
    fs.unmount().map_err(|_| "unmount failed")?;
    if part.with(|s| s.counters().misuse) != 0 {
        return Err("the volume broke a NAND rule");
    }
    Ok(Outcome {
        acked,
        recovered,
        mount_us,
    })
}
