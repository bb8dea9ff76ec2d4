//! Independent review (s41): adversarial workloads against the time bounds, on the
//! simulated W25N01GV (typical timings), measured on the simulator's clock.
//!
//! Bounds: mount <= 10 ms clean, <= 100 ms after a cut; worst single file operation
//! <= 50 ms.
//!
//! Run: `cargo test --release -p stagefs-core --test all review_s41:: -- --nocapture --test-threads 1`
//! (`--ignored` for the known limits; each test fills a 128 MiB simulated part).
//!
//! Findings on f052077 (simulated ms, typical timings) and what stops 41, 42 and 47
//! made of them:
//! - Random 2 KiB overwrites + fsync at 78 % of `capacity_pages`: single writes of
//!   140 ms (whole collections in one call after each checkpoint). Fixed: slices sized
//!   to the pool a checkpoint would leave (oftl `space.rs`, DESIGN 5): worst 26-37 ms,
//!   `gc_at_78pct_capacity_no_call_over_50ms`.
//! - At 91.5 %: 2 KiB writes up to 340 ms, 64 B staged fsyncs 641 ms, 7,525 overwrites
//!   refused `NoSpace`. Stop 41: 202 and 227 ms, no refusal (known limits since);
//!   stop 47: within 50 ms again
//!   (`gc_at_91pct_capacity_overwrites_are_not_refused_nor_slow`,
//!   `gc_at_91pct_capacity_staged_fsync_within_50ms`).
//! - Mount after a cut between two calls, GC active: 94 ms at 30 % of capacity, 125 ms
//!   at 91.5 %; a cut inside a call: 97-98 ms up to 78 % full, 112 ms at 91.5 %.
//!   Leaving the cut data head's block to background collection gave 51 ms, but a
//!   full-scan rebuild could then revive a torn write (review s41b), so a recovery still
//!   moves it. Stop 42 moves its pages owner by owner: 77.6 ms at 30 %, 102-109 ms at
//!   91.5 % (a known limit); stop 47: 96.1 ms there
//!   (`mount_after_cut_on_full_volume_gc_active`).
//! - Deep paths: a directory rename read every ancestor of the destination (55 ms at a
//!   depth of 256). Now a comparison of paths: 37 ms at 256, 49 ms at 340; every
//!   component still costs two page reads (crate docs: up to 300 components).
//! - Stop 42 (`probe_gc_profile`, `probe_mount_steady`, ignored explorations): the 85 %
//!   figures above stopped at 60,000 overwrites, before the steady state. At 100,000 a
//!   2 KiB write costs about 70 programs (38 GC copies, 25 cache write-backs, a
//!   checkpoint every two writes from the recovery-work bound), 27-29 ms of device
//!   time, worst call 158 ms. Stop 42's fix (a crash recovery dropping the cold copies,
//!   so the collection's write-backs stop counting as recovery work) was reverted for
//!   the wear-out soak and landed in stop 47 with the rules that soak needed (DESIGN 5,
//!   "Stop 47"). On 7806a07 -> stop 47, 100,000 overwrites, seed 1: at 84.7 % 69.89 ->
//!   10.01 programs a write, 29.23 -> 4.20 ms of device time, worst call 158.47 ->
//!   34.48 ms, calls over 50 ms 1,229 -> 0; at 91.5 % 15.41 programs, 6.49 ms, worst
//!   41.85 ms, none over 50 ms.
//!
//! Held: `huge_file_truncate_rename_remove` (50 MiB files: <= 7 ms),
//! `clean_mount_after_full_volume_with_staged_writes` (2.35-2.61 ms).

#![allow(dead_code)]

use nand_hal::sim::profile::W25N01GV;
use nand_hal::sim::{CutKind, FaultPlan, HeapStorage, SimNand};
use oftl::{Config, Greedy, W25n01gv};
use stagefs_core::{Error, Fs, OpenOptions, SeekFrom};

type Sim = SimNand<HeapStorage>;
type V<'a> = Fs<W25n01gv<&'a mut Sim>, 2048, 4>;
type E = Error<nand_hal::sim::SimError>;

const OP_BOUND_MS: f64 = 50.0;
const MOUNT_CUT_BOUND_MS: f64 = 100.0;
const MOUNT_CLEAN_BOUND_MS: f64 = 10.0;

fn fresh(seed: u64) -> Sim {
    SimNand::heap(W25N01GV, FaultPlan::seeded(seed))
}

fn vol(sim: &mut Sim) -> Box<V<'_>> {
    let store = W25n01gv::new(sim, const { Config::new() }, Greedy::DEFAULT);
    Box::new(Fs::new(store))
}

fn now(fs: &V<'_>) -> u64 {
    fs.store().flash().now_ns()
}

fn rw() -> OpenOptions {
    OpenOptions::new().read(true).write(true)
}
fn create() -> OpenOptions {
    rw().create(true)
}

/// Worst operation seen: simulated ms and a description.
#[derive(Default, Debug)]
struct Worst {
    ms: f64,
    what: String,
    n: u64,
    over: u64,
    sum: f64,
}

impl Worst {
    fn note(&mut self, ms: f64, what: impl FnOnce() -> String) {
        self.n += 1;
        self.sum += ms;
        if ms > OP_BOUND_MS {
            self.over += 1;
        }
        if ms > self.ms {
            self.ms = ms;
            self.what = what();
        }
    }
}

/// Runs `op` on `fs`, returns its result and its simulated duration in ms.
macro_rules! timed {
    ($fs:expr, $w:expr, $what:expr, $op:expr) => {{
        let t0 = now(&$fs);
        let c0 = $fs.store().flash().counters();
        let r = $op;
        let ms = (now(&$fs) - t0) as f64 / 1e6;
        let d = $fs.store().flash().counters() - c0;
        $w.note(ms, || {
            format!(
                "{}: {} reads ({} oob), {} programs, {} erases",
                $what, d.reads, d.oob_reads, d.programs, d.erases
            )
        });
        r
    }};
}

/// `name`'s value from the environment, or `default`.
fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Fills the volume with files of `file_bytes` written in 64 KiB calls until a write
/// fails; returns the files (path, size) kept. The last, partial file is removed, so
/// the volume is just under full.
fn fill(fs: &mut V<'_>, w: &mut Worst, file_bytes: u64) -> Vec<(String, u64)> {
    let chunk = vec![0x5Au8; 65536];
    let mut files = Vec::new();
    for i in 0.. {
        let p = format!("/big{i:03}");
        let f = fs.open(&p, create()).unwrap();
        let mut size = 0u64;
        let mut full = false;
        while size < file_bytes {
            match timed!(
                fs,
                w,
                format!("fill write {p} @{size}"),
                fs.write(f, &chunk)
            ) {
                Ok(n) => size += n as u64,
                Err(E::NoSpace) => {
                    full = true;
                    break;
                }
                Err(e) => panic!("fill write: {e:?}"),
            }
        }
        let c = timed!(fs, w, format!("fill close {p}"), fs.close(f));
        if full || c.is_err() {
            fs.remove(&p).unwrap();
            return files;
        }
        files.push((p, size));
    }
    unreachable!()
}

/// Formats, fills with 4 MiB files until a write fails, removes the partial one and
/// `free` more: the volume used for the GC probes.
fn filled(fs: &mut V<'_>, free: usize) -> Vec<(String, u64)> {
    fs.format().unwrap();
    let mut fillw = Worst::default();
    let mut files = fill(fs, &mut fillw, 4 << 20);
    for _ in 0..free {
        let (p, _) = files.pop().unwrap();
        fs.remove(&p).unwrap();
    }
    println!(
        "filled {} files; worst fill call {:.2} ms ({}); store capacity {} pages, used {} ({:.1}%)",
        files.len(),
        fillw.ms,
        fillw.what,
        fs.store().capacity_pages(),
        fs.store().used_pages(),
        100.0 * fs.store().used_pages() as f64 / fs.store().capacity_pages() as f64
    );
    files
}

#[derive(Default, Debug)]
struct Run {
    all: Worst,
    writes: Worst,
    refused: Worst,
    nospace: u64,
    /// The first error other than NoSpace (when `stop_on_error`).
    error: Option<E>,
}

/// Random 2 KiB page-aligned overwrites, each followed by an fsync, over four open
/// files rotated among `files` every 500 ops. Seeded.
fn overwrites(
    fs: &mut V<'_>,
    files: &[(String, u64)],
    seed: u64,
    ops: u64,
    stop_on_error: bool,
) -> Run {
    overwrites_mixed(fs, files, seed, ops, stop_on_error, 0, &mut |_, _| {})
}

/// [`overwrites`] with `small_pct` % of the writes 64 B at a random offset (staged),
/// calling `tick(fs, i)` before every op.
fn overwrites_mixed(
    fs: &mut V<'_>,
    files: &[(String, u64)],
    seed: u64,
    ops: u64,
    stop_on_error: bool,
    small_pct: u64,
    tick: &mut dyn FnMut(&mut V<'_>, u64),
) -> Run {
    let mut run = Run::default();
    let mut rng = Rng(seed | 1);
    let buf = vec![0xA5u8; 2048];
    let mut handles = Vec::new();
    for k in 0..4 {
        let j = k * files.len() / 4;
        match fs.open(&files[j].0, rw()) {
            Ok(f) => handles.push((f, files[j].1, j)),
            Err(e) => {
                run.error = Some(e);
                return run;
            }
        }
    }
    macro_rules! check {
        ($r:expr, $i:expr, $what:expr) => {
            match $r {
                Ok(v) => Some(v),
                Err(E::NoSpace) => {
                    run.nospace += 1;
                    None
                }
                Err(e) if stop_on_error => {
                    run.error = Some(e);
                    return run;
                }
                Err(e) => panic!("op {} {}: {e:?}", $i, $what),
            }
        };
    }
    for i in 0..ops {
        if i % 500 == 499 {
            let k = rng.below(4) as usize;
            let j = rng.below(files.len() as u64) as usize;
            if !handles.iter().any(|h| h.2 == j) {
                let r = timed!(fs, run.all, format!("op {i} close"), fs.close(handles[k].0));
                check!(r, i, "close");
                let r = timed!(
                    fs,
                    run.all,
                    format!("op {i} open {}", files[j].0),
                    fs.open(&files[j].0, rw())
                );
                match check!(r, i, "open") {
                    Some(f) => handles[k] = (f, files[j].1, j),
                    None => panic!("open refused"),
                }
            }
        }
        tick(fs, i);
        let k = rng.below(4) as usize;
        let (f, size, _) = handles[k];
        let small = rng.below(100) < small_pct;
        let (off, data) = if small {
            (rng.below(size - 64), &buf[..64])
        } else {
            (rng.below(size / 2048) * 2048, &buf[..])
        };
        let r = fs.seek(f, SeekFrom::Start(off));
        check!(r, i, "seek");
        let t0 = now(fs);
        let r = timed!(
            fs,
            run.all,
            format!("op {i} write {}@{off}", data.len()),
            fs.write(f, data)
        );
        let ms = (now(fs) - t0) as f64 / 1e6;
        run.writes.note(ms, || format!("op {i} write {r:?}"));
        if r.is_err() {
            run.refused.note(ms, || format!("op {i} write {r:?}"));
        }
        check!(r, i, "write");
        let r = timed!(fs, run.all, format!("op {i} fsync"), fs.fsync(f));
        check!(r, i, "fsync");
    }
    for h in handles {
        let r = fs.close(h.0);
        check!(r, ops, "final close");
    }
    run
}

/// No call of `run` took longer than the bound.
fn assert_within_bound(run: &Run) {
    assert!(
        run.all.ms <= OP_BOUND_MS,
        "worst call {:.2} ms ({}) > {OP_BOUND_MS} ms; {} calls over",
        run.all.ms,
        run.all.what,
        run.all.over
    );
}

fn report(run: &Run) {
    println!(
        "{} calls, worst {:.2} ms ({}), {} calls over {OP_BOUND_MS} ms; writes: mean {:.2} ms; \
         {} NoSpace (refused writes: worst {:.2} ms, {} over {OP_BOUND_MS} ms)",
        run.all.n,
        run.all.ms,
        run.all.what,
        run.all.over,
        run.writes.sum / run.writes.n.max(1) as f64,
        run.nospace,
        run.refused.ms,
        run.refused.over,
    );
}

fn gc_probe(free: usize, ops: u64) -> Run {
    gc_probe_small(free, ops, 0, 0x5eed_0041)
}

fn gc_probe_small(free: usize, ops: u64, small: u64, seed: u64) -> Run {
    let free = env("S41_FREE", free);
    let mut sim = fresh(41);
    let mut fs = vol(&mut sim);
    let files = filled(&mut fs, free);
    let ops = env("S41_OPS", ops);
    let small = env("S41_SMALL", small);
    let seed = env("S41_SEED", seed);
    let run = overwrites_mixed(&mut fs, &files, seed, ops, false, small, &mut |_, _| {});
    report(&run);
    run
}

/// At 78 % of the store's own capacity (`capacity_pages`), steady random 2 KiB
/// overwrites + fsync: no call over 50 ms. (On f052077 single writes took 140 ms, 29
/// calls over 50 ms in 100,000 writes: whole collections in one call.)
#[test]
fn gc_at_78pct_capacity_no_call_over_50ms() {
    let run = gc_probe_small(6, 100_000, 0, 1);
    assert_within_bound(&run);
}

/// At 91.5 % of capacity, overwrites of existing file pages (no growth) are not
/// refused, and no call takes over 50 ms. (On f052077 7,525 of 20,000 were refused,
/// with `NoSpace`, each refusal itself taking 50-85 ms, and single writes took up to
/// 340 ms; stop 41: 202 ms, 1,305 of 40,068 calls over 50 ms; stop 42, a crash recovery
/// dropping the cold copies so the collection's write-backs stop forcing checkpoints:
/// 27 ms, and 42 ms at the steady state of `probe_gc_profile`.)
#[test]
fn gc_at_91pct_capacity_overwrites_are_not_refused_nor_slow() {
    let run = gc_probe(2, 20_000);
    assert_eq!(
        run.nospace, 0,
        "{} overwrites refused with NoSpace",
        run.nospace
    );
    assert_within_bound(&run);
}

/// Mounts a copy of the device as it is now (a power cut between two calls), timed.
fn mount_copy(sim: &Sim) -> (f64, String) {
    let mut copy = sim.clone();
    let t0 = copy.now_ns();
    let c0 = copy.counters();
    let mut fs = vol(&mut copy);
    let r = fs.mount();
    let ms = (now(&fs) - t0) as f64 / 1e6;
    let d = fs.store().flash().counters() - c0;
    let st = fs.store().stats();
    (
        ms,
        format!(
            "{r:?}: {} reads ({} oob), {} programs, {} erases; scanned {}, replayed {}, relocated {}, write-backs {}, checkpoints {}",
            d.reads,
            d.oob_reads,
            d.programs,
            d.erases,
            st.recovery_scanned_pages,
            st.recovery_replayed_pages,
            st.relocated_pages,
            st.index_evictions,
            st.checkpoints
        ),
    )
}

fn mount_probe(free: usize, small_pct: u64, ops: u64, every: u64) -> (f64, String, u64) {
    let mut sim = fresh(41);
    let mut fs = vol(&mut sim);
    let files = filled(&mut fs, free);
    // Warm up to steady state.
    let run = overwrites(&mut fs, &files, 7, 5_000, false);
    report(&run);
    let mut worst = (0.0f64, String::new(), 0u64);
    let mut over = 0;
    let mut tick = |fs: &mut V<'_>, i: u64| {
        if i % every == every - 1 {
            let (ms, what) = mount_copy(fs.store().flash());
            if ms > MOUNT_CUT_BOUND_MS {
                over += 1;
            }
            if ms > worst.0 {
                worst = (ms, what, i);
            }
        }
    };
    let run = overwrites_mixed(
        &mut fs,
        &files,
        0x5eed_0041,
        ops,
        false,
        small_pct,
        &mut tick,
    );
    report(&run);
    println!(
        "mount after a cut: worst {:.2} ms at op {} ({}); {over} mounts over {MOUNT_CUT_BOUND_MS} ms",
        worst.0, worst.2, worst.1
    );
    worst
}

/// Mount after a cut between two calls, sampled every 7 calls over 3,000 calls of
/// 64 B staged writes + fsync on a volume 30 % full (GC active): within 100 ms
/// (93.7 ms).
#[test]
fn mount_after_cut_gc_active() {
    let (ms, what, i) = mount_probe(20, 100, 3_000, 7);
    assert!(
        ms <= MOUNT_CUT_BOUND_MS,
        "mount after cut at op {i}: {ms:.2} ms ({what})"
    );
}

/// The same on a 91.5 %-full volume: within 100 ms since stop 47 (96.1 ms; 125 ms until
/// stop 42, then 102-109 ms, a known limit: a crash recovery there now drops the cold
/// copies, and with their write-backs out of the recovery-work bound the run before the
/// cut collects without the checkpoints that filled the window). Near full a recovery
/// moves the data head's cut block (the first writes need it free; DESIGN 5).
#[test]
fn mount_after_cut_on_full_volume_gc_active() {
    let small = env("S41_SMALL", 100);
    let free = env("S41_FREE", 2);
    let ops = env("S41_OPS", 3_000);
    let every = env("S41_EVERY", 7);
    let (ms, what, i) = mount_probe(free, small, ops, every);
    assert!(
        ms <= MOUNT_CUT_BOUND_MS,
        "mount after cut at op {i}: {ms:.2} ms ({what})"
    );
}

/// Times one call on `fs`, printing it; returns (ms, result).
macro_rules! one {
    ($fs:expr, $what:expr, $op:expr) => {{
        let mut w = Worst::default();
        let r = timed!($fs, w, $what.to_string(), $op);
        println!(
            "{:>9.2} ms  {}  -> {:?}",
            w.ms,
            w.what,
            r.as_ref().map(|_| ())
        );
        (w.ms, r)
    }};
}

/// A chain of `depth` directories named "d" ("/d/d/d/..."), a file at the bottom, then
/// lookups, an open, a rename and a metadata call on the deepest path, each timed.
fn deep_paths(depth: usize) -> f64 {
    let mut sim = fresh(41);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    let mut p = String::new();
    for _ in 0..depth {
        p.push_str("/d");
        fs.create_dir(&p).unwrap();
    }
    let file = format!("{p}/f");
    let g = fs.open(&file, create()).unwrap();
    fs.write(g, &[7u8; 1000]).unwrap();
    fs.close(g).unwrap();
    // Something else used last, so no cached directory helps.
    fs.create_dir("/other").unwrap();
    fs.metadata("/other").unwrap();
    let mut worst: f64 = 0.0;
    let (ms, _) = one!(fs, format!("metadata depth {depth}"), fs.metadata(&file));
    worst = worst.max(ms);
    fs.metadata("/other").unwrap();
    let (ms, f) = one!(fs, format!("open depth {depth}"), fs.open(&file, rw()));
    worst = worst.max(ms);
    fs.close(f.unwrap()).unwrap();
    fs.metadata("/other").unwrap();
    // A move of the deepest directory to the top, and back under /other, deep.
    let (ms, _) = one!(
        fs,
        format!("rename depth {depth} -> /top"),
        fs.rename(&p, "/top")
    );
    worst = worst.max(ms);
    let parent = &p[..p.len() - 2];
    let (ms, _) = one!(
        fs,
        format!("rename /top -> depth {depth}"),
        fs.rename("/top", &format!("{parent}/e"))
    );
    worst = worst.max(ms);
    fs.metadata("/other").unwrap();
    // Moving /d (the whole chain) under its own deepest directory must be refused.
    let (ms, r) = one!(
        fs,
        format!("rename /d into itself at depth {depth}"),
        fs.rename("/d", &format!("{parent}/e/x"))
    );
    assert!(r.is_err());
    worst = worst.max(ms);
    fs.metadata("/other").unwrap();
    let (ms, _) = one!(
        fs,
        format!("remove depth {depth}"),
        fs.remove(&format!("{parent}/e/f"))
    );
    worst = worst.max(ms);
    worst
}

/// Deep paths: no depth or path-length limit; every call walks every component (about
/// 2.25 page reads, 0.14 ms each). On f052077 a directory rename also read every
/// ancestor's header page: depth 256 (a 512-byte path), rename into the deepest
/// directory 54.95 ms, the refused move-into-itself 53.01 ms. Now 37 ms at 256 (49 ms at
/// 340; the crate docs state the bound up to 300 components). (`S41_DEPTH` to vary.)
#[test]
fn deep_path_single_calls() {
    let depth = env("S41_DEPTH", 256);
    let worst = deep_paths(depth);
    assert!(
        worst <= OP_BOUND_MS,
        "a call on a {depth}-deep path took {worst:.2} ms"
    );
}

/// One file of (nearly) the whole volume, then truncate, truncate-at-open, rename over
/// it and remove, each timed.
#[test]
fn huge_file_truncate_rename_remove() {
    let mut sim = fresh(41);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    let mut w = Worst::default();
    let chunk = vec![0x3Cu8; 65536];
    let mb: u64 = env("S41_MB", 50);
    let mut worst: f64 = 0.0;
    for name in ["/a", "/b"] {
        let f = fs.open(name, create()).unwrap();
        for _ in 0..(mb << 20) / 65536 {
            timed!(fs, w, format!("write {name}"), fs.write(f, &chunk)).unwrap();
        }
        timed!(fs, w, format!("close {name}"), fs.close(f)).unwrap();
    }
    println!(
        "two {mb} MiB files; worst write/close {:.2} ms ({})",
        w.ms, w.what
    );
    worst = worst.max(w.ms);
    // Truncate a to 0 through a handle.
    let f = fs.open("/a", rw()).unwrap();
    let (ms, r) = one!(fs, "truncate /a to 0", fs.truncate(f, 0));
    r.unwrap();
    worst = worst.max(ms);
    let (ms, _) = one!(fs, "close /a", fs.close(f));
    worst = worst.max(ms);
    // Fill a again, then truncate at open.
    let f = fs.open("/a", rw()).unwrap();
    for _ in 0..(mb << 20) / 65536 {
        fs.write(f, &chunk).unwrap();
    }
    fs.close(f).unwrap();
    let (ms, f) = one!(
        fs,
        "open /a with truncate",
        fs.open("/a", create().truncate(true))
    );
    worst = worst.max(ms);
    let f = f.unwrap();
    let (ms, _) = one!(
        fs,
        "write 100 B into truncated /a",
        fs.write(f, &[1u8; 100])
    );
    worst = worst.max(ms);
    let (ms, _) = one!(fs, "close truncated /a", fs.close(f));
    worst = worst.max(ms);
    // Rename a small file over the huge one (deletes its object).
    let (ms, _) = one!(fs, "rename /a over /b", fs.rename("/a", "/b"));
    worst = worst.max(ms);
    // Fill again and remove.
    let f = fs.open("/c", create()).unwrap();
    for _ in 0..(mb << 20) / 65536 {
        fs.write(f, &chunk).unwrap();
    }
    fs.close(f).unwrap();
    let (ms, _) = one!(fs, "remove /c", fs.remove("/c"));
    worst = worst.max(ms);
    let (ms, _) = one!(fs, "sync", fs.sync());
    println!("(sync {ms:.2} ms, not a file op)");
    assert!(worst <= OP_BOUND_MS, "worst {worst:.2} ms");
}

/// At 91.5 % of capacity, 64 B staged writes + fsync: no call over 50 ms (29 ms; 641 ms
/// on f052077, with refused writes up to 240 ms, and 227 ms in stop 41).
#[test]
fn gc_at_91pct_capacity_staged_fsync_within_50ms() {
    let run = gc_probe_small(2, 100_000, 100, 0x5eed_0041);
    assert_within_bound(&run);
}

/// Clean mount after an unmount of a nearly full volume with staged writes.
#[test]
fn clean_mount_after_full_volume_with_staged_writes() {
    let free = env("S41_FREE", 2);
    let ops = env("S41_OPS", 3_000);
    let mut sim = fresh(41);
    let mut worst: f64 = 0.0;
    {
        let mut fs = vol(&mut sim);
        let files = filled(&mut fs, free);
        let run = overwrites_mixed(&mut fs, &files, 3, 5_000, false, 0, &mut |_, _| {});
        report(&run);
        // Stage 64 B writes, then unmount with them staged.
        let run = overwrites_mixed(&mut fs, &files, 5, ops, false, 100, &mut |_, _| {});
        report(&run);
        let (ms, r) = one!(fs, "unmount", fs.unmount());
        println!("(unmount {ms:.2} ms {r:?})");
    }
    for k in 0..3 {
        let t0 = sim.now_ns();
        let c0 = sim.counters();
        let mut fs = vol(&mut sim);
        let r = fs.mount();
        let ms = (now(&fs) - t0) as f64 / 1e6;
        let d = fs.store().flash().counters() - c0;
        println!(
            "clean mount {k}: {ms:.2} ms {r:?}: {} reads, {} programs, {} erases",
            d.reads, d.programs, d.erases
        );
        worst = worst.max(ms);
        fs.unmount().unwrap();
    }
    assert!(worst <= MOUNT_CLEAN_BOUND_MS, "clean mount {worst:.2} ms");
}

/// Mount after a power cut in the middle of a call (a torn program or erase, inside a
/// collection, a patch or a checkpoint) on a volume 30 % full: within 100 ms
/// (92.8 ms).
#[test]
fn mount_after_mid_call_cut() {
    mid_call_cuts(20, 150);
}

/// The same on a 91.5 %-full volume: within 100 ms (90.0 ms; 112 ms and 3 of 300 cuts
/// over 100 ms until stop 42, when a recovery also moved the cold head's cut block: it
/// now drops the cold copies, so that block holds nothing to move).
#[test]
fn mount_after_mid_call_cut_on_full_volume() {
    mid_call_cuts(2, 300);
}

/// A volume with `free` 4 MiB files removed after filling, unmounted cleanly, then for
/// each of `points` cut points: mount, mixed workload with the cut armed at
/// program/erase `k`, power on, timed mount.
fn mid_call_cuts(free: usize, points: u64) {
    let free = env("S41_FREE", free);
    let small = env("S41_SMALL", 100);
    let points: u64 = env("S41_POINTS", points);
    let mut base = fresh(41);
    {
        let mut fs = vol(&mut base);
        let files = filled(&mut fs, free);
        let run = overwrites_mixed(&mut fs, &files, 3, 5_000, false, small, &mut |_, _| {});
        report(&run);
        fs.unmount().unwrap();
    }
    let files: Vec<(String, u64)> = {
        let mut copy = base.clone();
        let mut fs = vol(&mut copy);
        fs.mount().unwrap();
        let mut v = Vec::new();
        for i in 0..100 {
            let p = format!("/big{i:03}");
            if let Ok(m) = fs.metadata(&p) {
                v.push((p, m.size));
            }
        }
        v
    };
    let mut worst = (0.0f64, String::new(), 0u64);
    let mut over = 0;
    let mut rng = Rng(0x41c0);
    for n in 0..points {
        let k = 1 + rng.below(2_500);
        let kind = match n % 3 {
            0 => CutKind::Clean,
            1 => CutKind::Torn(nand_hal::sim::TornMode::SomeBits),
            _ => CutKind::Torn(nand_hal::sim::TornMode::MostBits),
        };
        let mut sim = base.clone();
        {
            let mut fs = vol(&mut sim);
            fs.mount().unwrap();
            fs.store_mut()
                .flash_mut()
                .arm(FaultPlan::seeded(n).with_cut(k, kind));
            let run =
                overwrites_mixed(&mut fs, &files, 100 + n, 4_000, true, small, &mut |_, _| {});
            assert!(run.error.is_some(), "cut {k} never reached");
        }
        sim.power_on();
        sim.disarm();
        let t0 = sim.now_ns();
        let c0 = sim.counters();
        let mut fs = vol(&mut sim);
        let r = fs.mount();
        let ms = (now(&fs) - t0) as f64 / 1e6;
        let d = fs.store().flash().counters() - c0;
        if ms > MOUNT_CUT_BOUND_MS {
            over += 1;
        }
        if ms > worst.0 {
            worst = (
                ms,
                format!(
                    "{r:?} {kind:?}: {} reads ({} oob), {} programs, {} erases",
                    d.reads, d.oob_reads, d.programs, d.erases
                ),
                k,
            );
        }
        r.unwrap();
    }
    println!(
        "mount after a mid-call cut: worst {:.2} ms (cut at program/erase {}: {}); {over} of {points} over {MOUNT_CUT_BOUND_MS} ms",
        worst.0, worst.2, worst.1
    );
    assert!(worst.0 <= MOUNT_CUT_BOUND_MS);
}

/// EXPLORATION (stop 42): where the time of a steady random-overwrite run goes, per
/// operation, every `S41_EVERY` (10,000) operations: flash reads, programs and erases,
/// GC copies (`relocated`), cache write-backs (`evictions`) and checkpoints. At 84.7 %
/// of capacity (`S41_FREE=4`) it shows the run settling after about 30,000 writes at
/// about 70 programs a 2 KiB write (DESIGN 5, "Above 80 % of capacity").
#[test]
#[ignore = "exploration: S41_FREE, S41_OPS, S41_SEED, S41_EVERY"]
fn probe_gc_profile() {
    let free = env("S41_FREE", 4usize);
    let ops: u64 = env("S41_OPS", 100_000);
    let seed: u64 = env("S41_SEED", 1);
    let every: u64 = env("S41_EVERY", 10_000);
    let mut sim = fresh(41);
    let mut fs = vol(&mut sim);
    let files = filled(&mut fs, free);
    let mut last = (now(&fs), fs.store().flash().counters(), fs.store().stats());
    let mut tick = |fs: &mut V<'_>, i: u64| {
        if i % every == every - 1 {
            let t = now(fs);
            let c = fs.store().flash().counters();
            let s = fs.store().stats();
            let d = c - last.1;
            let n = every as f64;
            println!(
                "ops {:>6}: {:.2} ms/op; per op: {:.2} reads ({:.2} oob), {:.2} programs, {:.3} erases; relocated {:.2}, evictions {:.2}, checkpoints {}, pages_programmed {:.2}",
                i + 1,
                (t - last.0) as f64 / 1e6 / n,
                d.reads as f64 / n,
                d.oob_reads as f64 / n,
                d.programs as f64 / n,
                d.erases as f64 / n,
                (s.relocated_pages - last.2.relocated_pages) as f64 / n,
                (s.index_evictions - last.2.index_evictions) as f64 / n,
                s.checkpoints - last.2.checkpoints,
                (s.pages_programmed - last.2.pages_programmed) as f64 / n,
            );
            last = (t, c, s);
        }
    };
    let run = overwrites_mixed(&mut fs, &files, seed, ops, false, 0, &mut tick);
    report(&run);
}

/// EXPLORATION (stop 42): mounts after a cut sampled every `S41_EVERY` (97) calls once
/// `S41_WARM` (30,000) random 2 KiB overwrites have taken the volume to its steady
/// state (the `mount_after_cut_*` tests above sample the first 8,000 calls, before
/// it).
#[test]
#[ignore = "exploration: S41_FREE, S41_WARM, S41_OPS, S41_EVERY, S41_SMALL"]
fn probe_mount_steady() {
    let free = env("S41_FREE", 4usize);
    let warm: u64 = env("S41_WARM", 30_000);
    let ops: u64 = env("S41_OPS", 3_000);
    let every: u64 = env("S41_EVERY", 97);
    let mut sim = fresh(41);
    let mut fs = vol(&mut sim);
    let files = filled(&mut fs, free);
    let run = overwrites_mixed(&mut fs, &files, 1, warm, false, 0, &mut |_, _| {});
    report(&run);
    let mut worst = (0.0f64, String::new());
    let mut over = 0;
    let mut n = 0;
    let mut tick = |fs: &mut V<'_>, i: u64| {
        if i % every == every - 1 {
            let (ms, what) = mount_copy(fs.store().flash());
            n += 1;
            if ms > MOUNT_CUT_BOUND_MS {
                over += 1;
            }
            if ms > worst.0 {
                worst = (ms, what);
            }
        }
    };
    let small = env("S41_SMALL", 0u64);
    let run = overwrites_mixed(&mut fs, &files, 2, ops, false, small, &mut tick);
    report(&run);
    println!(
        "mount after cut: worst {:.2} ms ({}); {over} of {n} over {MOUNT_CUT_BOUND_MS} ms",
        worst.0, worst.1
    );
}
