//! What a run measures: every file-system call timed on the simulated clock, the point
//! where the device first filled (the start of the steady-state window), and when to
//! stop.
//!
//! - **Filled**: the target has programmed, since it was formatted, as many bytes as
//!   the device holds. From then on every program needs space that was erased after
//!   holding data, so collection runs; the figures come from this point on.
//! - **Stop**: when the user has written twice the device's free space (its size less
//!   the data the workload starts with) or one simulated hour has passed since the
//!   workload started, whichever comes first. littlefs-benchmarks runs for one simulated
//!   hour; the fast targets write twice the free space well inside it.

use indicatif::ProgressBar;
use nand_hal::sim::Counters;

use crate::device::{self, Device};

/// One simulated hour, in ns.
pub const HOUR_NS: u64 = 3_600_000_000_000;

/// Why a run stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The user wrote twice the free space.
    TwiceFree,
    /// One simulated hour passed.
    Hour,
    /// A shorter budget from the command line (`--quick`).
    Budget,
}

/// The state at the start of the steady-state window.
#[derive(Clone, Copy, Debug)]
struct Mark {
    counters: Counters,
    user: u64,
}

/// Limits of one run.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Stop after this many user bytes.
    pub user_bytes: u64,
    /// Stop after this much simulated time (ns).
    pub time_ns: u64,
    /// `time_ns` is shorter than an hour (a quick run).
    pub short: bool,
}

/// The measuring side of a run (see the module docs).
pub struct Meter<'b> {
    dev: Device,
    bar: &'b ProgressBar,
    limits: Limits,
    /// Bytes programmed (counter value) at which the device counts as filled.
    fill_at: u64,
    start: Counters,
    user: u64,
    mark: Option<Mark>,
    /// Slowest call in the window, and in the whole run.
    worst: (u64, &'static str),
    worst_all: (u64, &'static str),
    stopped: Option<End>,
}

impl<'b> Meter<'b> {
    /// A meter for a run starting now. `programmed_since_format` is what the target
    /// programmed between its format and now (the workload's starting state).
    pub fn new(
        dev: &Device,
        bar: &'b ProgressBar,
        limits: Limits,
        programmed_since_format: u64,
    ) -> Self {
        let c = device::counters(dev);
        let capacity = device::capacity(dev);
        let fill_at = c.bytes_programmed + capacity.saturating_sub(programmed_since_format);
        let mut m = Meter {
            dev: dev.clone(),
            bar,
            limits,
            fill_at,
            start: c,
            user: 0,
            mark: None,
            worst: (0, "-"),
            worst_all: (0, "-"),
            stopped: None,
        };
        m.check_fill(&c);
        m
    }

    fn check_fill(&mut self, c: &Counters) {
        if self.mark.is_none() && c.bytes_programmed >= self.fill_at {
            self.mark = Some(Mark {
                counters: *c,
                user: self.user,
            });
        }
    }

    /// Runs one file-system call, timing it (after the fill, the slowest is kept).
    pub fn op<T>(&mut self, what: &'static str, f: impl FnOnce() -> T) -> T {
        let a = device::now(&self.dev);
        let r = f();
        let d = device::now(&self.dev) - a;
        if self.mark.is_some() && d > self.worst.0 {
            self.worst = (d, what);
        }
        if d > self.worst_all.0 {
            self.worst_all = (d, what);
        }
        r
    }

    /// Counts `n` bytes the user wrote.
    pub fn wrote(&mut self, n: u64) {
        self.user += n;
    }

    /// Whether the workload goes on (checked between its steps).
    pub fn go_on(&mut self) -> bool {
        let c = device::counters(&self.dev);
        self.check_fill(&c);
        let t = c.time_ns - self.start.time_ns;
        let frac = (self.user as f64 / self.limits.user_bytes as f64)
            .max(t as f64 / self.limits.time_ns as f64);
        self.bar.set_position((frac * 1000.0) as u64);
        if self.user >= self.limits.user_bytes {
            self.stopped = Some(End::TwiceFree);
        } else if t >= self.limits.time_ns {
            self.stopped = Some(if self.limits.short {
                End::Budget
            } else {
                End::Hour
            });
        }
        self.stopped.is_none()
    }

    /// The figures of the run, read after the target's final drain (its unmount): the
    /// window from the fill (or from the start, if the device never filled) to now.
    pub fn finish(self) -> Window {
        let c = device::counters(&self.dev);
        let (from, user_from, filled, worst) = match self.mark {
            Some(m) => (m.counters, m.user, true, self.worst),
            None => (self.start, 0, false, self.worst_all),
        };
        Window {
            counters: c - from,
            user_bytes: self.user - user_from,
            filled,
            end: self.stopped.unwrap_or(End::Budget),
            worst_op_ns: worst.0,
            worst_op: worst.1,
        }
    }
}

/// The measured window of one run.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    /// Device work in the window, the final drain included.
    pub counters: Counters,
    /// User bytes written in the window.
    pub user_bytes: u64,
    /// Whether the device filled (`false`: the window is the whole run).
    pub filled: bool,
    /// Why the run stopped.
    pub end: End,
    /// The slowest single call in the window (simulated ns) and what it was.
    pub worst_op_ns: u64,
    /// The name of that call.
    pub worst_op: &'static str,
}
