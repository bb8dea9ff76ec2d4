//! `stagefs plan`: sizing. Runs the described workload on the simulated part until the
//! store is in steady state (every block written, garbage collection running), then
//! measures a window and projects the product's life from it: years until the most
//! worn block reaches the part's rated program/erase cycles, write amplification, the
//! worst single operation, mount time after a power cut, and the volume's RAM.
//!
//! A workload is `KIND:SIZE@RATE`, for example `logging:64B@10/s`:
//!
//! - `logging`: SIZE appended to a log file with an fsync; the log rotates at 256 KiB
//!   and the 4 newest rotated logs are kept;
//! - `settings`: one of 16 small files rewritten whole (open, truncate, write, close);
//! - `random`: SIZE overwritten at a random SIZE-aligned offset of a 1 MiB file, with
//!   an fsync;
//! - `stream`: SIZE written to a recording, one file per 4 MiB, the 8 newest kept
//!   (fsync at each file's end).
//!
//! SIZE takes B, KiB, MiB (`4KiB`); RATE is operations per `s`, `min`, `h` or `day`.
//! Several workloads run interleaved, each at its own rate.

use std::fmt::Write as _;

use nand_hal::sim::profile::Profile;
use nand_hal::sim::WearStats;
use stagefs_core::{Fs, OpenOptions, SeekFrom};

use crate::image;
use crate::volume::{self, FsError, Vol};

/// What one workload does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Appends with fsync, rotated.
    Logging,
    /// Small files rewritten whole.
    Settings,
    /// Overwrites in place with fsync.
    Random,
    /// Large sequential recordings.
    Stream,
}

/// One `KIND:SIZE@RATE`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Load {
    /// What it does.
    pub kind: Kind,
    /// Bytes per operation.
    pub size: usize,
    /// Operations per second.
    pub rate: f64,
}

/// Parses `KIND:SIZE@RATE`.
pub fn parse(spec: &str) -> Result<Load, String> {
    let bad = |why: &str| {
        format!("--workload {spec}: {why} (expected KIND:SIZE@RATE, e.g. logging:64B@10/s)")
    };
    let (kind, rest) = spec.split_once(':').ok_or_else(|| bad("no ':'"))?;
    let (size, rate) = rest.split_once('@').ok_or_else(|| bad("no '@'"))?;
    let kind = match kind {
        "logging" => Kind::Logging,
        "settings" => Kind::Settings,
        "random" => Kind::Random,
        "stream" => Kind::Stream,
        _ => return Err(bad("KIND is logging, settings, random or stream")),
    };
    let digits = size.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &size[digits.len()..];
    let n: usize = digits
        .parse()
        .map_err(|_| bad("SIZE is a number and a unit"))?;
    let size = n * match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1024,
        "m" | "mb" | "mib" => 1024 * 1024,
        _ => return Err(bad("SIZE's unit is B, KiB or MiB")),
    };
    if size == 0 || size > 4 << 20 {
        return Err(bad("SIZE is 1 B to 4 MiB"));
    }
    if kind == Kind::Random && size > 64 * 1024 {
        return Err(bad("random writes are at most 64 KiB"));
    }
    let (count, per) = rate
        .split_once('/')
        .ok_or_else(|| bad("RATE is N/s, N/min, N/h or N/day"))?;
    let count: f64 = count.parse().map_err(|_| bad("RATE's count is a number"))?;
    let secs = match per {
        "s" => 1.0,
        "min" => 60.0,
        "h" => 3600.0,
        "day" => 86400.0,
        _ => return Err(bad("RATE is per s, min, h or day")),
    };
    if !(count > 0.0 && count.is_finite()) {
        return Err(bad("RATE must be positive"));
    }
    Ok(Load {
        kind,
        size,
        rate: count / secs,
    })
}

/// The projection.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Operations run in all, and in the measured window.
    pub ops: u64,
    /// See `ops`.
    pub window_ops: u64,
    /// Workload time the window covers (from the rates), seconds.
    pub window_secs: f64,
    /// Bytes the workload wrote in the window, and the part programmed.
    pub user_bytes: u64,
    /// See `user_bytes`.
    pub programmed_bytes: u64,
    /// Erases in the window.
    pub erases: u64,
    /// Wear at the end.
    pub wear: WearStats,
    /// Good blocks.
    pub blocks: u32,
    /// The part's rated program/erase cycles.
    pub endurance: u32,
    /// Device time of the slowest single operation in the window, ns.
    pub worst_op_ns: u64,
    /// Device time per second of workload (how busy the part is).
    pub busy: f64,
    /// Device time of a mount after a power cut at the end, ns.
    pub mount_after_cut_ns: u64,
    /// What that mount did: pages recovery scanned, page reads, programs, erases.
    pub mount_after_cut: (u32, u64, u64, u64),
    /// Bytes of RAM of the volume type (store and file layer, this host build).
    pub ram: usize,
    /// Erase-count samples over the window: (workload seconds, mean, max).
    pub samples: Vec<(f64, f64, u32)>,
}

impl Plan {
    /// Write amplification in the window.
    pub fn wa(&self) -> f64 {
        self.programmed_bytes as f64 / self.user_bytes.max(1) as f64
    }

    /// Mean erases per block per second of workload.
    pub fn erase_rate(&self) -> f64 {
        self.erases as f64 / self.blocks.max(1) as f64 / self.window_secs.max(1e-9)
    }

    /// How much faster the most worn block wears than the mean (at least 1).
    pub fn spread(&self) -> f64 {
        self.wear.max_over_mean().max(1.0)
    }

    /// Years until the most worn block reaches the rated cycles if it keeps wearing
    /// `spread()` times faster than the mean (today's spread persisting: pessimistic
    /// early in life, when counts are small).
    pub fn years(&self) -> f64 {
        let left = (self.endurance as f64 - self.wear.max as f64).max(0.0);
        years_at(left, self.erase_rate() * self.spread())
    }

    /// Years until the most worn block reaches the rated cycles with the store's wear
    /// leveling bound: the mean wears at the measured rate and the most worn block
    /// stays at most [`WEAR_GAP`] cycles above the least worn (static wear leveling
    /// moves cold data past that gap), so it reaches the rating when the mean reaches
    /// `endurance - WEAR_GAP`.
    pub fn years_leveled(&self) -> f64 {
        let left = (self.endurance as f64 - WEAR_GAP as f64 - self.wear.mean).max(0.0);
        years_at(left, self.erase_rate())
    }

    /// The report in words.
    pub fn report(&self, profile: &Profile, loads: &[String]) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "part {}, workload {}", profile.name, loads.join(" + "));
        let span = if self.window_secs >= 2.0 * 86400.0 {
            format!("{:.1} days", self.window_secs / 86400.0)
        } else {
            format!("{:.1} hours", self.window_secs / 3600.0)
        };
        let _ = writeln!(
            s,
            "steady state: {} operations run, the last {} measured ({span} of workload time, {} erases)",
            self.ops, self.window_ops, self.erases
        );
        let _ = writeln!(
            s,
            "write amplification {:.2} ({} bytes written, {} programmed)",
            self.wa(),
            self.user_bytes,
            self.programmed_bytes
        );
        let _ = writeln!(
            s,
            "erases: {:.3e} per block per day; wear spread (max/mean erase count) {:.2}; most worn block {} of {} cycles",
            self.erase_rate() * 86400.0,
            self.spread(),
            self.wear.max,
            self.endurance
        );
        let years = self.years();
        let _ = if years.is_finite() {
            writeln!(
                s,
                "projected life: {:.1} years until the most worn block reaches its rated cycles (wear leveled: it stays within {WEAR_GAP} cycles of the least worn); {years:.1} years if today's spread persisted",
                self.years_leveled()
            )
        } else {
            writeln!(
                s,
                "projected life: no erases measured (the workload fits without garbage collection)"
            )
        };
        let _ = writeln!(
            s,
            "worst single operation {:.2} ms; the part is busy {:.3}% of the time",
            self.worst_op_ns as f64 / 1e6,
            self.busy * 100.0
        );
        let (scanned, reads, programs, erases) = self.mount_after_cut;
        let _ = writeln!(
            s,
            "mount after a power cut: {:.1} ms ({scanned} pages of the updating window scanned; {reads} page reads, {programs} programs, {erases} erases in all)",
            self.mount_after_cut_ns as f64 / 1e6
        );
        let _ = writeln!(
            s,
            "RAM of the volume: {} bytes (store with the host's block table for up to {} blocks, and the file layer; see README for the Cortex-M figures)",
            self.ram,
            crate::part::MAX_BLOCKS
        );
        s
    }
}

/// The store's static wear-leveling gap (the default policy's).
pub const WEAR_GAP: u32 = oftl::Greedy::DEFAULT.wear_gap;

fn years_at(cycles: f64, per_sec: f64) -> f64 {
    if per_sec <= 0.0 {
        f64::INFINITY
    } else {
        cycles / per_sec / (365.25 * 86400.0)
    }
}

/// The state of one workload while it runs.
struct Runner {
    load: Load,
    /// Next due time, seconds of workload time.
    due: f64,
    n: u64,
    rng: u64,
    /// Logging: current log size and rotations; stream: current file size and index.
    at: u64,
    rot: u64,
    id: usize,
}

impl Runner {
    fn rand(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn dir(&self) -> String {
        format!("/w{}", self.id)
    }

    fn setup(&mut self, v: &mut Vol<'_>) -> Result<(), FsError> {
        v.create_dir(&self.dir())?;
        if self.load.kind == Kind::Random {
            let f = v.open(
                &format!("{}/data", self.dir()),
                OpenOptions::new().write(true).create(true),
            )?;
            v.truncate(f, 1 << 20)?;
            v.close(f)?;
        }
        Ok(())
    }

    fn step(&mut self, v: &mut Vol<'_>, buf: &[u8]) -> Result<(), FsError> {
        let size = self.load.size;
        let d = self.dir();
        self.n += 1;
        match self.load.kind {
            Kind::Logging => {
                let cur = format!("{d}/current");
                let f = v.open(&cur, OpenOptions::new().append(true).create(true))?;
                v.write(f, &buf[..size])?;
                v.fsync(f)?;
                v.close(f)?;
                self.at += size as u64;
                if self.at >= 256 * 1024 {
                    v.rename(&cur, &format!("{d}/old{}", self.rot))?;
                    if self.rot >= 4 {
                        v.remove(&format!("{d}/old{}", self.rot - 4))?;
                    }
                    self.rot += 1;
                    self.at = 0;
                }
            }
            Kind::Settings => {
                let which = self.rand() % 16;
                let f = v.open(
                    &format!("{d}/s{which:02}"),
                    OpenOptions::new().write(true).create(true).truncate(true),
                )?;
                v.write(f, &buf[..size])?;
                v.close(f)?;
            }
            Kind::Random => {
                let slots = ((1 << 20) / size as u64).max(1);
                let at = (self.rand() % slots) * size as u64;
                let f = v.open(&format!("{d}/data"), OpenOptions::new().write(true))?;
                v.seek(f, SeekFrom::Start(at))?;
                v.write(f, &buf[..size])?;
                v.fsync(f)?;
                v.close(f)?;
            }
            Kind::Stream => {
                let f = v.open(
                    &format!("{d}/rec{}", self.rot),
                    OpenOptions::new().append(true).create(true),
                )?;
                v.write(f, &buf[..size])?;
                self.at += size as u64;
                let end = self.at >= 4 << 20;
                if end {
                    v.fsync(f)?;
                }
                v.close(f)?;
                if end {
                    if self.rot >= 8 {
                        v.remove(&format!("{d}/rec{}", self.rot - 8))?;
                    }
                    self.rot += 1;
                    self.at = 0;
                }
            }
        }
        self.due += 1.0 / self.load.rate;
        Ok(())
    }
}

/// Runs `loads` on a fresh `profile` part to steady state (1.5 times the part's bytes
/// programmed), measures a window of `window` times the part's bytes programmed, and
/// projects. `max_ops` bounds the run. `tick` is called now and then with (bytes programmed,
/// bytes needed) for a progress bar.
pub fn run(
    profile: &Profile,
    loads: &[Load],
    window: u64,
    max_ops: u64,
    mut tick: impl FnMut(u64, u64),
) -> Result<Plan, String> {
    if loads.is_empty() {
        return Err("give at least one --workload".into());
    }
    let mut sim = image::blank(profile);
    let g = profile.geometry;
    let capacity = g.blocks() as u64 * g.pages_per_block() as u64 * g.page_size() as u64;
    let (warm, measure) = (capacity * 3 / 2, capacity * window.max(1));
    let buf: Vec<u8> = (0..(4usize << 20)).map(|i| (i * 131 + 7) as u8).collect();
    let mut runners: Vec<Runner> = loads
        .iter()
        .enumerate()
        .map(|(i, &load)| Runner {
            load,
            due: 0.0,
            n: 0,
            rng: 0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1),
            at: 0,
            rot: 0,
            id: i,
        })
        .collect();
    let mut plan = {
        let mut v = volume::over(&mut sim);
        v.format().map_err(|e| volume::say("formatting", e))?;
        for r in &mut runners {
            r.setup(&mut v).map_err(|e| volume::say("setting up", e))?;
        }
        let c0 = v.store().flash().counters();
        let mut ops = 0u64;
        let mut start: Option<(u64, f64, u64, u64, u64)> = None; // ops, time, user, programmed, erases
        let mut user = 0u64;
        let mut worst = 0u64;
        let mut samples = Vec::new();
        let mut now = 0.0;
        loop {
            let c = v.store().flash().counters();
            let programmed = c.bytes_programmed - c0.bytes_programmed;
            if start.is_none() && programmed >= warm {
                start = Some((ops, now, user, c.bytes_programmed, c.erases));
            }
            if let Some(s) = start {
                if c.bytes_programmed - s.3 >= measure {
                    break;
                }
            }
            if ops >= max_ops {
                return Err(format!(
                    "no steady state after {ops} operations ({programmed} of {} bytes programmed): raise --max-ops",
                    warm + measure
                ));
            }
            let r = runners
                .iter_mut()
                .min_by(|a, b| a.due.total_cmp(&b.due))
                .ok_or("no workload")?;
            now = r.due;
            let t0 = c.time_ns;
            r.step(&mut v, &buf)
                .map_err(|e| volume::say(&format!("operation {ops}"), e))?;
            user += r.load.size as u64;
            ops += 1;
            let t1 = v.store().flash().counters().time_ns;
            if start.is_some() {
                worst = worst.max(t1 - t0);
            }
            if ops % 4096 == 0 {
                tick(programmed, warm + measure);
                if start.is_some() {
                    let w = v.store().flash().wear_stats();
                    samples.push((now, w.mean, w.max));
                }
            }
        }
        let (s_ops, s_time, s_user, s_prog, s_erases) = start.unwrap_or_default();
        let c = v.store().flash().counters();
        let wear = v.store().flash().wear_stats();
        let good = v
            .store()
            .blocks()
            .iter()
            .filter(|b| b.state() != oftl::BlockState::Bad)
            .count() as u32;
        let window_secs = (now - s_time).max(1e-9);
        Plan {
            ops,
            window_ops: ops - s_ops,
            window_secs,
            user_bytes: user - s_user,
            programmed_bytes: c.bytes_programmed - s_prog,
            erases: c.erases - s_erases,
            wear,
            blocks: good,
            endurance: profile.endurance,
            worst_op_ns: worst,
            busy: (c.time_ns - c0.time_ns) as f64 / 1e9 / now.max(1e-9),
            mount_after_cut_ns: 0,
            mount_after_cut: (0, 0, 0, 0),
            ram: std::mem::size_of::<Vol<'static>>(),
            samples,
        }
    };
    // A power cut now (staged records and all), then a mount.
    sim.cut_power();
    sim.power_on();
    let t0 = sim.counters().time_ns;
    let c0 = sim.counters();
    let mut v: Box<Vol<'_>> = Box::new(Fs::new(volume::store(&mut sim)));
    v.mount()
        .map_err(|e| volume::say("mounting after the cut", e))?;
    plan.mount_after_cut_ns = v.store().flash().counters().time_ns - t0;
    let c = v.store().flash().counters();
    plan.mount_after_cut = (
        v.store().stats().recovery_scanned_pages,
        c.reads - c0.reads,
        c.programs - c0.programs,
        c.erases - c0.erases,
    );
    Ok(plan)
}

/// Draws the projected wear (mean and most worn block against the rated cycles) over
/// the projected life to `path` (`.svg` or `.png`).
pub fn draw(plan: &Plan, part: &str, path: &std::path::Path) -> Result<(), String> {
    let per_year = plan.erase_rate() * 365.25 * 86400.0;
    let years = if plan.years_leveled().is_finite() {
        (plan.years_leveled() * 1.2).max(1.0)
    } else {
        10.0
    };
    let mean0 = plan.wear.mean;
    let max0 = plan.wear.max as f64;
    let series = |start: f64, factor: f64| -> Vec<(f64, f64)> {
        (0..=100)
            .map(|i| {
                let y = years * i as f64 / 100.0;
                (y, start + per_year * factor * y)
            })
            .collect()
    };
    let lines = [
        ("mean erase count".to_string(), series(mean0, 1.0)),
        (
            format!("most worn block, leveled (mean + {WEAR_GAP})"),
            series(mean0, 1.0)
                .into_iter()
                .map(|(x, y)| (x, y + WEAR_GAP as f64))
                .collect(),
        ),
        (
            "most worn block, today's spread".to_string(),
            series(max0, plan.spread()),
        ),
        (
            format!("rated cycles ({})", plan.endurance),
            vec![(0.0, plan.endurance as f64), (years, plan.endurance as f64)],
        ),
    ];
    crate::picture::lines(
        path,
        &format!("{part}: projected wear"),
        "years",
        "erase cycles",
        &lines,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_specs_parse_and_bad_ones_say_why() {
        assert_eq!(
            parse("logging:64B@10/s").unwrap(),
            Load {
                kind: Kind::Logging,
                size: 64,
                rate: 10.0
            }
        );
        let l = parse("settings:4KiB@2/h").unwrap();
        assert_eq!((l.kind, l.size), (Kind::Settings, 4096));
        assert!((l.rate - 2.0 / 3600.0).abs() < 1e-12);
        for bad in [
            "logging",
            "logging:64B",
            "nope:1B@1/s",
            "random:1MiB@1/s",
            "stream:0B@1/s",
            "logging:64Q@1/s",
            "logging:64B@1/week",
            "logging:64B@0/s",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_plan_reaches_steady_state_and_projects() {
        let p = crate::part::by_name("tiny").unwrap();
        let loads = [
            parse("logging:100B@10/s").unwrap(),
            parse("settings:300B@1/s").unwrap(),
        ];
        let plan = run(&p, &loads, 1, 2_000_000, |_, _| {}).unwrap();
        assert!(plan.erases > 0, "garbage collection ran in the window");
        assert!(plan.wa() > 1.0 && plan.wa() < 50.0, "WA {}", plan.wa());
        assert!(plan.years().is_finite() && plan.years() > 0.0);
        assert!(plan.worst_op_ns > 0 && plan.mount_after_cut_ns > 0);
        let r = plan.report(&p, &["a".into()]);
        assert!(r.contains("projected life"), "{r}");
        let e = run(&p, &loads, 1, 100, |_, _| {}).unwrap_err();
        assert!(e.contains("raise --max-ops"), "{e}");
    }
}
