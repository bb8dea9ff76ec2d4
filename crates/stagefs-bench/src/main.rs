//! `stagefs-bench`: the littlefs-benchmarks workloads and two more on the simulated
//! W25N01GV, on every target side by side, in steady state, ending with one table.
//!
//! ```text
//! cargo run --release -p stagefs-bench -- [--quick] [--workload many ...] [--target stagefs ...]
//! ```
//!
//! Each store is formatted, warmed up as published (littlefs2 only), given the
//! workload's starting files, then runs the workload until it has written twice the
//! device's free space or for one simulated hour (see `meter`). Figures come from the
//! simulator's counters and clock (typical timings), over the window from the moment the
//! device first filled to the end of the final drain (the unmount that patches every
//! staged byte home): throughput = user bytes / simulated time, WA = bytes programmed /
//! user bytes, programs per KiB, erases per MiB, the slowest single file call (open,
//! read, write, seek, fsync, close, remove), mount time clean and the slowest of twelve
//! mounts after power cuts in the middle of more of the workload, spread over more than
//! a window's worth of programs (recovery and staging replay included), and the flash
//! holding live data at the end.
//!
//! A run of every workload also runs `many-published` (`many` in littlefs-benchmarks'
//! own shape: files created at their first pick) on littlefs2, to check it against its
//! published figures, and on the file layer beside it.

mod device;
mod littlefs;
mod meter;
mod oftl;
mod report;
mod stagefs;
mod workload;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use nand_hal::sim::profile::W25N01GV;
use nand_hal::sim::{CutKind, FaultPlan};
use stagefs_core::Tuning;

use crate::meter::{Limits, Meter, HOUR_NS};
use crate::report::Row;
use crate::workload::{Rng, Target, Workload};

/// Command line.
#[derive(Parser, Debug)]
#[command(
    version,
    about = "littlefs-benchmarks workloads on the simulated W25N01GV, in steady state"
)]
struct Args {
    /// Stop each run after this many simulated seconds instead of one hour (quick
    /// looks; the figures are then not steady-state ones unless the device filled).
    #[arg(long)]
    sim_seconds: Option<f64>,
    /// Target size in bytes (file size for linear/random/logging/random-sync, total of
    /// the small files for many).
    #[arg(long, default_value_t = 1 << 20)]
    size: usize,
    /// Workloads to run (default: all).
    #[arg(long, value_enum)]
    workload: Vec<Workload>,
    /// Targets to run (default: all; the ablation rows run the sync-heavy workloads).
    #[arg(long, value_enum)]
    target: Vec<Which>,
    /// Seed of the workloads' random choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Hide the progress bars.
    #[arg(long)]
    quiet: bool,
    /// Also write the rows as CSV here (`stagefs bench-plot` draws them).
    #[arg(long)]
    csv: Option<std::path::PathBuf>,
}

/// The stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Which {
    /// littlefs v2 as littlefs-benchmarks configures it.
    Littlefs2,
    /// Raw oftl objects.
    Oftl,
    /// The file layer, as shipped.
    Stagefs,
    /// Ablation: the file layer with staging off.
    StagingOff,
    /// Ablation: the file layer with the bypass off.
    BypassOff,
    /// The file layer over the large oftl configuration (`W25n01gvLarge`: 12 cached
    /// pages, about 43 KB of RAM on a Cortex-M4).
    Large,
    /// Raw oftl objects in the small configuration (`W25n01gvSmall`: 4 cached 512-byte
    /// object-table and index pages, one write-back buffer, no log streams; 16 KiB of
    /// RAM).
    OftlSmall,
}

impl Which {
    const ALL: [Which; 7] = [
        Which::Littlefs2,
        Which::Oftl,
        Which::OftlSmall,
        Which::Stagefs,
        Which::Large,
        Which::StagingOff,
        Which::BypassOff,
    ];

    fn is_ablation(self) -> bool {
        matches!(self, Which::StagingOff | Which::BypassOff)
    }

    /// Whether a run of every workload includes this target on `w`: `many-published`
    /// is there to check littlefs2 against its published figures, and to show the file
    /// layer on the same shape; the other targets run it when asked.
    fn runs_by_default(self, w: Workload) -> bool {
        w != Workload::ManyPublished || matches!(self, Which::Littlefs2 | Which::Stagefs)
    }

    fn build(self, seed: u64) -> Box<dyn Target> {
        let dev = device::fresh(W25N01GV, seed);
        match self {
            Which::Littlefs2 => Box::new(littlefs::Littlefs::new(dev)),
            Which::Oftl => Box::new(oftl::Oftl::new(dev)),
            Which::OftlSmall => Box::new(oftl::Oftl::<4, 1, 512, 0>::labelled(
                dev,
                "oftl, 16 KiB store",
            )),
            Which::Stagefs => Box::new(stagefs::Stagefs::new(dev)),
            Which::Large => Box::new(stagefs::Stagefs::over(
                dev,
                "stagefs, 12 cached pages (43 KB)",
                |d| ::oftl::W25n01gvLarge::new(d, stagefs::CONFIG, ::oftl::Greedy::DEFAULT),
            )),
            Which::StagingOff => Box::new(stagefs::Stagefs::tuned(
                dev,
                Tuning {
                    staging: false,
                    ..Tuning::DEFAULT
                },
                "stagefs, staging off",
            )),
            Which::BypassOff => Box::new(stagefs::Stagefs::tuned(
                dev,
                Tuning {
                    bypass: false,
                    ..Tuning::DEFAULT
                },
                "stagefs, bypass off",
            )),
        }
    }
}

/// Whether an ablation row says anything on `w` (the staging mechanisms act on synced
/// small writes only).
fn ablation_applies(w: Workload) -> bool {
    matches!(
        w,
        Workload::Logging | Workload::Many | Workload::RandomSync | Workload::Varmail
    )
}

/// Where the power cuts fall, in programs and erases after a clean mount: every 100 up to
/// 1,200, past the 1,024 pages of the default store's 16-block window.
const CUT_POINTS: [u64; 12] = [
    100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1100, 1200,
];

fn run_one(t: &mut dyn Target, w: Workload, args: &Args, bar: &ProgressBar) -> Result<Row, String> {
    let dev = t.device().clone();
    let size = args.size;
    let before = device::counters(&dev).bytes_programmed;
    t.format()?;
    t.warm_up()?;
    let mut rng = Rng::new(args.seed);
    t.mount()?;
    let prepared = workload::prepare(t, w, size, &mut rng)?;
    t.unmount()?;
    let programmed = device::counters(&dev).bytes_programmed - before;
    let free = device::capacity(&dev).saturating_sub(prepared);
    let limits = Limits {
        user_bytes: 2 * free,
        time_ns: args.sim_seconds.map_or(HOUR_NS, |s| (s * 1e9) as u64),
        short: args.sim_seconds.is_some(),
    };

    t.mount()?;
    let mut m = Meter::new(&dev, bar, limits, programmed);
    workload::run(t, w, size, &mut rng, &mut m)?;
    t.unmount()?;
    let window = m.finish();

    let m0 = device::now(&dev);
    t.mount()?;
    let mount_clean = device::now(&dev) - m0;
    let live = t.live_bytes();
    t.unmount()?;

    // Power cuts in the middle of more of the same workload, each from the same device
    // state (after a clean unmount, so the store starts with an empty window), at
    // points spread over more than a whole window's worth of programs: a cut just
    // before the next checkpoint finds the most to scan and replay. The slowest
    // recovering mount is reported.
    let snapshot = dev.borrow().clone();
    t.save_host_state();
    let mut mount_after_cut: Option<u64> = None;
    for &at in CUT_POINTS.iter() {
        *dev.borrow_mut() = snapshot.clone();
        t.restore_host_state();
        t.mount()?;
        dev.borrow_mut()
            .arm(FaultPlan::seeded(args.seed).with_cut(at, CutKind::Clean));
        let cut_limits = Limits {
            user_bytes: u64::MAX,
            time_ns: 60_000_000_000,
            short: true,
        };
        let hidden = ProgressBar::hidden();
        let mut m = Meter::new(&dev, &hidden, cut_limits, u64::MAX);
        let r = workload::run(t, w, size, &mut rng, &mut m);
        let cut = !dev.borrow().is_powered();
        if !cut {
            r?;
            t.unmount()?;
            continue;
        }
        dev.borrow_mut().power_on();
        dev.borrow_mut().disarm();
        let m0 = device::now(&dev);
        t.mount()?;
        let took = device::now(&dev) - m0;
        mount_after_cut = Some(mount_after_cut.map_or(took, |w| w.max(took)));
        t.unmount()?;
    }

    Ok(Row {
        target: t.name(),
        workload: w,
        window,
        mount_clean_ns: mount_clean,
        mount_after_cut_ns: mount_after_cut,
        live_bytes: live,
        wear: device::wear(&dev),
    })
}

fn main() {
    let args = Args::parse();
    let workloads = if args.workload.is_empty() {
        Workload::ALL.to_vec()
    } else {
        args.workload.clone()
    };
    let targets = if args.target.is_empty() {
        Which::ALL.to_vec()
    } else {
        args.target.clone()
    };
    let style =
        ProgressStyle::with_template("{prefix:>34} [{bar:30}] {percent:>3}% {elapsed} {msg}")
            .expect("valid template")
            .progress_chars("=> ");
    let mut rows = Vec::new();
    for w in &workloads {
        for which in &targets {
            if which.is_ablation() && !ablation_applies(*w) {
                continue;
            }
            if args.workload.is_empty() && !which.runs_by_default(*w) {
                continue;
            }
            let mut t = which.build(args.seed);
            let bar = if args.quiet {
                ProgressBar::hidden()
            } else {
                ProgressBar::new(1000)
            };
            bar.set_style(style.clone());
            bar.set_prefix(format!("{} {}", t.name(), w));
            match run_one(t.as_mut(), *w, &args, &bar) {
                Ok(row) => {
                    bar.finish_with_message(report::rate(row.throughput()));
                    rows.push(row);
                }
                Err(e) => {
                    bar.abandon_with_message(format!("failed: {e}"));
                    eprintln!("{} {w}: {e}", t.name());
                }
            }
        }
    }
    println!();
    report::print(&rows, &args_summary(&args));
    if let Some(path) = &args.csv {
        if let Err(e) = std::fs::write(path, report::csv(&rows)) {
            eprintln!("{}: {e}", path.display());
            std::process::exit(1);
        }
    }
}

fn args_summary(a: &Args) -> String {
    format!(
        "W25N01GV (simulated, typical timings); each run until twice the free space is \
         written or {}; figures from the device's first fill to the end of the final drain; \
         target size {} KiB (`many`: {} files of 64 B); seed {}",
        a.sim_seconds
            .map_or("one simulated hour".to_string(), |s| format!(
                "{s} simulated s"
            )),
        a.size / 1024,
        a.size / 64,
        a.seed
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short run (a 64 KiB target, 4 KiB of small files, 2 simulated seconds: the
    /// device does not fill, the figures cover the whole run).
    fn quick(which: Which, w: Workload) -> Row {
        let args = Args {
            sim_seconds: Some(2.0),
            size: if matches!(w, Workload::Many | Workload::ManyPublished) {
                4 << 10
            } else {
                64 << 10
            },
            workload: vec![w],
            target: vec![which],
            seed: 3,
            quiet: true,
            csv: None,
        };
        let mut t = which.build(3);
        let row = run_one(t.as_mut(), w, &args, &ProgressBar::hidden()).unwrap();
        assert_eq!(row.window.counters.misuse, 0, "{which:?} {w}");
        assert!(row.window.user_bytes > 0, "{which:?} {w}");
        row
    }

    #[test]
    fn oftl_linear_meets_its_targets() {
        let r = quick(Which::Oftl, Workload::Linear);
        assert!(r.throughput() >= 5e6, "{}", r.throughput());
        assert!(r.wa() <= 1.05, "{}", r.wa());
        assert!(r.mount_after_cut_ns.is_some());
    }

    #[test]
    fn stagefs_logging_stages_a_sector_per_fsync() {
        let r = quick(Which::Stagefs, Workload::Logging);
        let syncs = r.window.user_bytes / 64;
        // One 512 B sector per fsync; the page home, patches and checkpoints on top
        // stay under another sector's worth in this short run.
        let bytes = r.window.counters.bytes_programmed;
        assert!(
            bytes <= syncs * 1024,
            "{bytes} bytes programmed for {syncs} fsyncs"
        );
        assert!(r.mount_after_cut_ns.is_some());
    }

    #[test]
    fn staging_off_programs_a_page_per_fsync_and_the_bypass_matches_it() {
        let off = quick(Which::StagingOff, Workload::Logging);
        let syncs = off.window.user_bytes / 64;
        assert!(off.window.counters.bytes_programmed >= syncs * 2048);
        let on = quick(Which::Stagefs, Workload::Logging);
        assert!(on.wa() * 3.0 < off.wa(), "{} vs {}", on.wa(), off.wa());
        // Random overwrites do not pay for staging: the bypass sends them home, so the
        // file layer costs what writing home costs.
        let off = quick(Which::StagingOff, Workload::RandomSync);
        let on = quick(Which::Stagefs, Workload::RandomSync);
        assert!(on.wa() <= off.wa() * 1.02, "{} vs {}", on.wa(), off.wa());
        let forced = quick(Which::BypassOff, Workload::RandomSync);
        assert!(forced.wa() > on.wa(), "{} vs {}", forced.wa(), on.wa());
    }

    #[test]
    fn every_target_runs_every_workload() {
        for which in [Which::Oftl, Which::Stagefs, Which::BypassOff] {
            for w in Workload::ALL {
                quick(which, w);
            }
        }
    }

    /// A target that passes every call on and notes the opens and directories made.
    struct Recorder<'t> {
        inner: &'t mut dyn Target,
        opens: Vec<(String, workload::Open)>,
        dirs: usize,
    }

    impl Target for Recorder<'_> {
        fn name(&self) -> String {
            self.inner.name()
        }
        fn device(&self) -> &device::Device {
            self.inner.device()
        }
        fn format(&mut self) -> Result<(), String> {
            self.inner.format()
        }
        fn mount(&mut self) -> Result<(), String> {
            self.inner.mount()
        }
        fn unmount(&mut self) -> Result<(), String> {
            self.inner.unmount()
        }
        fn live_bytes(&mut self) -> Option<u64> {
            self.inner.live_bytes()
        }
        fn open(&mut self, path: &str, how: workload::Open) -> Result<usize, String> {
            self.opens.push((path.to_string(), how));
            self.inner.open(path, how)
        }
        fn write(&mut self, f: usize, data: &[u8]) -> Result<(), String> {
            self.inner.write(f, data)
        }
        fn seek(&mut self, f: usize, to: u64) -> Result<(), String> {
            self.inner.seek(f, to)
        }
        fn read(&mut self, f: usize, buf: &mut [u8]) -> Result<usize, String> {
            self.inner.read(f, buf)
        }
        fn fsync(&mut self, f: usize) -> Result<(), String> {
            self.inner.fsync(f)
        }
        fn close(&mut self, f: usize) -> Result<(), String> {
            self.inner.close(f)
        }
        fn remove(&mut self, path: &str) -> Result<(), String> {
            self.inner.remove(path)
        }
        fn create_dir(&mut self, path: &str) -> Result<(), String> {
            self.dirs += 1;
            self.inner.create_dir(path)
        }
    }

    #[test]
    fn many_published_creates_each_file_at_its_first_pick_in_the_root() {
        let mut t = Which::Stagefs.build(5);
        let dev = t.device().clone();
        let mut r = Recorder {
            inner: t.as_mut(),
            opens: Vec::new(),
            dirs: 0,
        };
        r.format().unwrap();
        r.mount().unwrap();
        let mut rng = Rng::new(5);
        let size = 64 << 10;
        assert_eq!(
            workload::prepare(&mut r, Workload::ManyPublished, size, &mut rng).unwrap(),
            0
        );
        assert!(
            r.opens.is_empty() && r.dirs == 0,
            "nothing exists before the run"
        );
        let limits = Limits {
            user_bytes: 64 * 300,
            time_ns: HOUR_NS,
            short: true,
        };
        let bar = ProgressBar::hidden();
        let mut m = Meter::new(&dev, &bar, limits, 0);
        workload::run(&mut r, Workload::ManyPublished, size, &mut rng, &mut m).unwrap();
        assert_eq!(r.opens.len(), 300);
        let mut names = std::collections::HashSet::new();
        for (path, how) in &r.opens {
            let hex = path.strip_prefix("/bench_").expect("in the root");
            let i = usize::from_str_radix(hex, 16).unwrap();
            assert!(hex.len() == 8 && i < size / 64, "{path}");
            assert_eq!(*how, workload::Open::Truncate, "created or truncated");
            names.insert(path.clone());
        }
        // 300 picks among 1,024 names: most open a file that does not exist yet.
        assert!(names.len() > 250, "{} distinct names", names.len());
        r.unmount().unwrap();
    }

    #[test]
    fn littlefs_runs_with_the_published_configuration() {
        // The warm-up alone writes 256 MiB: one workload is enough here.
        let r = quick(Which::Littlefs2, Workload::Logging);
        let syncs = r.window.user_bytes / 64;
        assert!(
            r.window.counters.programs >= syncs,
            "{} programs for {syncs} syncs",
            r.window.counters.programs
        );
        assert!(r.window.filled, "the warm-up fills the device");
    }
}
