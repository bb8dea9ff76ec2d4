//! Review s56b: adversarial shapes against the claim that the file layer's worst single
//! call (open, read, write, seek, fsync, close, rename, remove, create_dir, remove_dir,
//! truncate, set_attributes, read_dir steps, metadata) costs at most 50 ms of simulated
//! device time on the W25N01GV (13.3 ms in the benchmark's workloads).
//!
//! The stack is the benchmark's `stagefs` target: `SimNand::heap(W25N01GV, ..)` behind a
//! shared handle (so the clock can be read while the store holds the device, also
//! between the steps of a `read_dir`), `oftl::W25n01gv` with `Config::new()` and
//! `Greedy::DEFAULT`, `Fs<_, 2048, 4>`, default tuning. Every call is timed on the
//! simulator's clock (typical timings).
//!
//! Run: `cargo test --release -p stagefs-core --all-features --test all -- review_s56b::
//! --test-threads=1 --nocapture` (`--ignored` for the surveys).
//!
//! **Finding 1** (on 93237ba): a single `read_dir` step (`ReadDir::next`) is unbounded. In
//! a directory that once held thousands of names and was emptied (names are removed,
//! buckets never merge, DESIGN 6.2), `ReadDir::step` loops over the trie's leaves
//! reading each bucket page until it finds an entry (src/readdir.rs, the `loop` in
//! `step`: one `namespace::read_page` per empty leaf, no budget per call), so one call
//! reads every emptied bucket: 4,000 files of 256 B with 64-byte names, all removed but
//! the one listed last, then `read_dir("/d")` and its first `next()`: 70.5 ms (1,134
//! page reads); 8,000 such files: 156.4 ms (2,522 reads); the README's own
//! 16,384 files of 64 B (12-byte names), emptied: 73.2 ms (1,191 reads), in the step
//! that returns the last name and in the step that returns `None` alike; after a
//! remount 84.6 ms at 4,000 files with 32-byte attributes. The fast reproduction is
//! `s56b_finding_read_dir_step_over_emptied_buckets`. Fixed in stop 57: page 0 of a
//! directory (header version 3) counts the buckets holding a name per group of up to 8,
//! and a step skips the groups counted 0 unread (at most 16 bucket reads a step,
//! `tests/listing.rs`); the 4,000-file case's worst step is now 0.09 ms.
//!
//! **Finding 2**: the crate docs' "single calls stay within 50 ms for paths of up to 300
//! components" does not hold for `rename`: it walks both parents in full
//! (`Fs::rename`: `dir_of(fp)` then `dir_of(tp)`; the walk cache keys parent paths of
//! at most 48 bytes, so neither is remembered), twice a `metadata`'s reads. A file
//! renamed within its directory at depth 300 (`/d/d/.../d/f` -> `.../g`): 85.9 ms
//! (1,380 reads); moved to another chain's directory at depth 300: 86.3 ms; over 50 ms
//! from about 170 components (50.6 ms at 170, 58.3 at 200, 72.2 at 250;
//! `s56b_survey_deep_renames`). Fixed for a rename within one directory, which now
//! walks it once; a rename between two directories walks both, and the crate docs now
//! bound it at about 150 components each. `s56b_deep_rename_at_300_components` checks
//! both.
//!
//! Held (worst per call kind in the surveys, simulated ms):
//! - patches forced inside one call (8 staged objects and 8 staged inline names, the
//!   ninth object's fsync, the ninth name's close) on volumes in steady collection at
//!   44, 71 and 92 % of capacity: close 15.2, fsync 18.0, write 8.4 (a 64-byte append
//!   evicting a buffer under collection); chains of about ten bucket splits in one
//!   create (names colliding on 10 bits) 27.3 (open) and 19.4 (`set_attributes` growing
//!   colliding entries); remove/rename of a staged name 1.0; the 2 KiB overwrite churn
//!   around them 20.8. (Not every round had all 16 staged when its trigger ran: at
//!   92 % a patch's flushes program collection copies, which `note_home_pages` charges
//!   to staging, so the efficiency test sent object commits home for a while; round 0
//!   of each fill patched 8 objects and 8 names inside one close, 8.8 ms at 44 and
//!   71 %.)
//! - a path of 300 components after a mount (cold caches): open 41.9, metadata 41.6,
//!   remove 42.5, rename of the deepest directory to the root 48.5 (close to the bound;
//!   deeper paths exceed it, as the crate docs state);
//! - 48 MiB files: truncate, open with truncate, rename over, remove, cold random
//!   reads: at most 4.0; a sparse file (1 byte at 100 MiB): reads of holes, truncate:
//!   at most 3.7; `remove_dir` of an emptied directory of 8,000 names: 1.9; creates,
//!   closes, removes and `set_attributes` in directories of up to 16,384 names: at
//!   most 8.7.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use nand_hal::sim::profile::W25N01GV;
use nand_hal::sim::{FaultPlan, HeapStorage, SimError, SimNand};
use nand_hal::{
    BlockAddr, Capabilities, ErrorType, Geometry, NandFlash, PageAddr, ReadReport, StepReport,
};
use oftl::{Config, Greedy, W25n01gv};
use stagefs_core::{Error, Fs, OpenOptions, SeekFrom};

type Dev = Rc<RefCell<SimNand<HeapStorage>>>;
type V = Fs<W25n01gv<Shared>, 2048, 4>;
type E = Error<SimError>;

const BOUND_MS: f64 = 50.0;

/// The benchmark's `Shared` (crates/stagefs-bench/src/oftl.rs): the simulator behind a
/// shared handle, each operation borrowing it briefly.
struct Shared {
    dev: Dev,
    geo: Geometry,
    caps: Capabilities,
}

impl Shared {
    fn new(dev: Dev) -> Self {
        let (geo, caps) = {
            let d = dev.borrow();
            (d.geometry(), *d.capabilities())
        };
        Shared { dev, geo, caps }
    }
}

impl ErrorType for Shared {
    type Error = SimError;
}

impl NandFlash for Shared {
    fn geometry(&self) -> Geometry {
        self.geo
    }
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }
    fn read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, SimError> {
        self.dev.borrow_mut().read(page, column, data, oob)
    }
    fn read_steps(
        &mut self,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<StepReport, SimError> {
        self.dev.borrow_mut().read_steps(page, data, oob)
    }
    fn delivers_good_steps(&self) -> bool {
        self.dev.borrow().delivers_good_steps()
    }
    fn program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), SimError> {
        self.dev.borrow_mut().program(page, column, data, oob)
    }
    fn erase(&mut self, block: BlockAddr) -> Result<(), SimError> {
        self.dev.borrow_mut().erase(block)
    }
    fn is_bad(&mut self, block: BlockAddr) -> Result<bool, SimError> {
        self.dev.borrow_mut().is_bad(block)
    }
    fn mark_bad(&mut self, block: BlockAddr) -> Result<(), SimError> {
        self.dev.borrow_mut().mark_bad(block)
    }
}

fn device(seed: u64) -> Dev {
    Rc::new(RefCell::new(SimNand::heap(
        W25N01GV,
        FaultPlan::seeded(seed),
    )))
}

fn volume(dev: &Dev) -> Box<V> {
    let store = W25n01gv::new(Shared::new(dev.clone()), Config::new(), Greedy::DEFAULT);
    Box::new(Fs::new(store))
}

fn rw() -> OpenOptions {
    OpenOptions::new().read(true).write(true)
}

fn create() -> OpenOptions {
    rw().create(true)
}

/// Worst simulated time per call kind, with the call that took it.
#[derive(Default)]
struct Tally {
    worst: BTreeMap<&'static str, (f64, String)>,
    calls: u64,
    over: Vec<(f64, &'static str, String)>,
}

impl Tally {
    fn note(&mut self, kind: &'static str, ms: f64, what: impl FnOnce() -> String) {
        self.calls += 1;
        let w = self.worst.entry(kind).or_insert((0.0, String::new()));
        let over = ms > BOUND_MS;
        if ms > w.0 || over {
            let s = what();
            if ms > w.0 {
                *w = (ms, s.clone());
            }
            if over && self.over.len() < 20 {
                self.over.push((ms, kind, s));
            }
        }
    }

    fn max(&self) -> (f64, &'static str, String) {
        self.worst
            .iter()
            .map(|(k, (ms, s))| (*ms, *k, s.clone()))
            .fold(
                (0.0, "-", String::new()),
                |a, b| if b.0 > a.0 { b } else { a },
            )
    }

    fn print(&self, title: &str) {
        println!("== {title}: {} calls timed", self.calls);
        for (k, (ms, s)) in &self.worst {
            println!("  {k:>14}: {ms:8.2} ms  {s}");
        }
        for (ms, k, s) in &self.over {
            println!("  OVER {BOUND_MS} ms: {k} {ms:.2} ms  {s}");
        }
    }
}

/// Times `$op` on the device clock, noting it in `$tally` as `$kind` (`$what` lazily
/// describes the call), and yields its result.
macro_rules! t {
    ($dev:expr, $tally:expr, $kind:expr, $what:expr, $op:expr) => {{
        let t0 = $dev.borrow().now_ns();
        let c0 = $dev.borrow().counters();
        let r = $op;
        let ms = ($dev.borrow().now_ns() - t0) as f64 / 1e6;
        let d = $dev.borrow().counters() - c0;
        $tally.note($kind, ms, || {
            format!(
                "{} [{} reads, {} programs, {} erases]",
                $what, d.reads, d.programs, d.erases
            )
        });
        r
    }};
}

/// A name of `len` bytes (at least 9) for file `i`.
fn name(i: usize, len: usize) -> String {
    format!("{i:08}-{}", "x".repeat(len - 9))
}

fn pattern(seed: usize, len: usize) -> Vec<u8> {
    (0..len).map(|k| (k * 31 + seed * 7) as u8).collect()
}

/// The files of a directory: how many, their names' length, contents and attributes.
#[derive(Clone, Copy)]
struct Shape {
    n: usize,
    name_len: usize,
    size: usize,
    attrs: usize,
}

/// `s.n` inline files in `dir`, every call timed.
fn populate(fs: &mut V, dev: &Dev, tl: &mut Tally, dir: &str, s: Shape) {
    let Shape {
        n,
        name_len,
        size,
        attrs,
    } = s;
    let a = vec![0xA7u8; attrs];
    for i in 0..n {
        let p = format!("{dir}/{}", name(i, name_len));
        let f = t!(
            dev,
            tl,
            "open",
            format!("create {p}"),
            fs.open(&p, create())
        )
        .unwrap();
        t!(
            dev,
            tl,
            "write",
            format!("{size} B to new {p}"),
            fs.write(f, &pattern(i, size))
        )
        .unwrap();
        t!(dev, tl, "close", format!("new inline {p}"), fs.close(f)).unwrap();
        if attrs > 0 {
            t!(
                dev,
                tl,
                "set_attributes",
                format!("{attrs} B on {p}"),
                fs.set_attributes(&p, &a)
            )
            .unwrap();
        }
    }
}

/// Lists `dir`, timing every step (the `next` calls, the one returning `None` too);
/// returns the names in listing order.
fn list(fs: &mut V, dev: &Dev, tl: &mut Tally, dir: &str, what: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rd = t!(
        dev,
        tl,
        "read_dir",
        format!("read_dir {dir} ({what})"),
        fs.read_dir(dir)
    )
    .unwrap();
    loop {
        let k = names.len();
        let e = t!(
            dev,
            tl,
            "read_dir step",
            format!("step {k} of {dir} ({what})"),
            rd.next()
        );
        match e {
            Some(e) => names.push(e.unwrap().name().to_string()),
            None => break,
        }
    }
    names
}

/// The emptied-directory shape: the files of `shape` created in `/d`, listed, all removed but the one listed last, listed again (one step walks
/// every emptied bucket before that name), that one removed, listed (the step that
/// returns `None` walks them all), and the directory removed. Returns the worst
/// `read_dir` step after the removes (ms) and the tally.
fn emptied_dir(shape: Shape, remount: bool) -> (f64, Tally) {
    let n = shape.n;
    let dev = device(56);
    let mut fs = volume(&dev);
    let mut tl = Tally::default();
    fs.format().unwrap();
    fs.mount().unwrap();
    t!(dev, tl, "create_dir", "create_dir /d", fs.create_dir("/d")).unwrap();
    populate(&mut fs, &dev, &mut tl, "/d", shape);
    let names = list(&mut fs, &dev, &mut tl, "/d", "full");
    assert_eq!(names.len(), n);
    let last = names.last().unwrap().clone();
    for name in &names[..n - 1] {
        let p = format!("/d/{name}");
        t!(dev, tl, "remove", format!("remove {p}"), fs.remove(&p)).unwrap();
    }
    if remount {
        fs.unmount().unwrap();
        fs = volume(&dev);
        fs.mount().unwrap();
    }
    let mut steps = Tally::default();
    let left = list(
        &mut fs,
        &dev,
        &mut steps,
        "/d",
        "one name left, the last listed",
    );
    assert_eq!(left, vec![last.clone()]);
    let p = format!("/d/{last}");
    t!(
        dev,
        tl,
        "metadata",
        format!("metadata {p}"),
        fs.metadata(&p)
    )
    .unwrap();
    t!(dev, tl, "remove", format!("remove {p}"), fs.remove(&p)).unwrap();
    assert!(list(&mut fs, &dev, &mut steps, "/d", "emptied").is_empty());
    t!(
        dev,
        tl,
        "remove_dir",
        "remove_dir /d (emptied)",
        fs.remove_dir("/d")
    )
    .unwrap();
    let worst = steps.worst.get("read_dir step").map_or(0.0, |w| w.0);
    for (k, w) in std::mem::take(&mut steps.worst) {
        let e = tl.worst.entry(k).or_insert((0.0, String::new()));
        if w.0 > e.0 {
            *e = w;
        }
    }
    tl.over.append(&mut steps.over);
    (worst, tl)
}

/// Finding 1, fixed: a `read_dir` step in a directory that once held thousands of names
/// walked every emptied bucket before the next name (`ReadDir::step`'s loop over
/// leaves, a page read for each), all in one call. 4,000 files of 256 B with 64-byte
/// names in `/d` (about a thousand buckets), all removed but the one listed last: the
/// first step of the next listing read every bucket (70.5 ms). Within the 50 ms bound
/// since the group counts of directory header version 3.
#[test]
fn s56b_finding_read_dir_step_over_emptied_buckets() {
    let shape = Shape {
        n: 4000,
        name_len: 64,
        size: 256,
        attrs: 0,
    };
    let (worst, tl) = emptied_dir(shape, false);
    tl.print("emptied directory");
    println!("worst read_dir step after the removes: {worst:.2} ms");
    assert!(
        worst <= BOUND_MS,
        "one read_dir step took {worst:.2} ms > {BOUND_MS} ms"
    );
}

/// Survey: the emptied-directory shape at several sizes, with and without attributes
/// and a remount before the listing.
#[test]
#[ignore = "survey: a few minutes"]
fn s56b_survey_emptied_directories() {
    for (n, name_len, size, attrs, remount) in [
        (500, 64, 256, 0, false),
        (2000, 64, 256, 0, false),
        (4000, 64, 256, 32, true),
        (8000, 64, 256, 0, false),
        // The README's `many` / space shape: 16,384 files of 64 B.
        (16_384, 12, 64, 0, false),
    ] {
        let shape = Shape {
            n,
            name_len,
            size,
            attrs,
        };
        let (worst, tl) = emptied_dir(shape, remount);
        tl.print(&format!(
            "{n} files of {size} B, {name_len}-byte names, {attrs} B attrs, remount {remount}"
        ));
        println!("worst read_dir step after the removes: {worst:.2} ms");
    }
}

/// xorshift.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// `n` 64-byte names whose hashes agree on their low `bits` bits.
fn colliding(tag: &str, bits: u32, n: usize) -> Vec<String> {
    let mask = (1u32 << bits) - 1;
    let want = stagefs_core::format::bucket::hash(tag.as_bytes()) & mask;
    let mut out = Vec::new();
    let mut i = 0u64;
    while out.len() < n {
        let s = format!("{tag}{i:010}-{}", "c".repeat(63 - 10 - tag.len()));
        if stagefs_core::format::bucket::hash(s.as_bytes()) & mask == want {
            out.push(s);
        }
        i += 1;
    }
    out
}

/// Writes `data` to a new or existing file `p` (from its start) and closes it.
fn put(fs: &mut V, p: &str, data: &[u8]) -> Result<(), E> {
    let f = fs.open(p, create())?;
    fs.write(f, data)?;
    fs.close(f)
}

/// The volume of the GC survey: `/i0`..`/i8` each with a 64-byte inline file `s`,
/// object files `/o0`..`/o8` of 4 KiB, directories `/c0`.. each with `pre` 64-byte
/// names of 256 B colliding on 10 bits; then 4 MiB files `/bigNNN` (64 KiB writes)
/// until a write is refused, the partial one and `free` more removed.
struct GcVol {
    dev: Dev,
    fs: Box<V>,
    bigs: Vec<(String, u64)>,
    colliding: Vec<Vec<String>>,
}

fn gc_volume(seed: u64, free: usize, cdirs: usize, pre: usize) -> GcVol {
    let dev = device(seed);
    let mut fs = volume(&dev);
    fs.format().unwrap();
    fs.mount().unwrap();
    for k in 0..9 {
        fs.create_dir(&format!("/i{k}")).unwrap();
        put(&mut fs, &format!("/i{k}/s"), &pattern(k, 64)).unwrap();
        put(&mut fs, &format!("/o{k}"), &pattern(k, 4096)).unwrap();
    }
    let mut coll = Vec::new();
    for c in 0..cdirs {
        fs.create_dir(&format!("/c{c}")).unwrap();
        let names = colliding(&format!("c{c}-"), 10, pre + 8);
        for n in &names[..pre] {
            put(&mut fs, &format!("/c{c}/{n}"), &pattern(c, 256)).unwrap();
        }
        coll.push(names);
    }
    let chunk = vec![0x5Au8; 65536];
    let mut bigs = Vec::new();
    'fill: for i in 0.. {
        let p = format!("/big{i:03}");
        let f = fs.open(&p, create()).unwrap();
        let mut size = 0u64;
        while size < 4 << 20 {
            match fs.write(f, &chunk) {
                Ok(n) => size += n as u64,
                Err(E::NoSpace) => {
                    let _ = fs.close(f);
                    fs.remove(&p).unwrap();
                    break 'fill;
                }
                Err(e) => panic!("fill: {e:?}"),
            }
        }
        if fs.close(f).is_err() {
            fs.remove(&p).unwrap();
            break;
        }
        bigs.push((p, size));
    }
    for _ in 0..free {
        let (p, _) = bigs.pop().unwrap();
        fs.remove(&p).unwrap();
    }
    println!(
        "filled: {} big files, store used {} of capacity {} pages ({:.1} %)",
        bigs.len(),
        fs.store().used_pages(),
        fs.store().capacity_pages(),
        100.0 * fs.store().used_pages() as f64 / fs.store().capacity_pages() as f64
    );
    GcVol {
        dev,
        fs,
        bigs,
        colliding: coll,
    }
}

/// `ops` random page-aligned 2 KiB overwrites + fsync over two random big files.
fn churn(g: &mut GcVol, tl: &mut Tally, rng: &mut Rng, ops: u64) {
    let buf = vec![0xA5u8; 2048];
    let (dev, fs) = (&g.dev, &mut g.fs);
    let mut hs = Vec::new();
    let first = rng.below(g.bigs.len() as u64) as usize;
    let second = (first + 1 + rng.below(g.bigs.len() as u64 - 1) as usize) % g.bigs.len();
    for j in [first, second] {
        let (p, size) = &g.bigs[j];
        let f = t!(dev, tl, "open", format!("open {p}"), fs.open(p, rw())).unwrap();
        hs.push((f, *size));
    }
    for i in 0..ops {
        let (f, size) = hs[(i % 2) as usize];
        let off = rng.below(size / 2048) * 2048;
        fs.seek(f, SeekFrom::Start(off)).unwrap();
        t!(
            dev,
            tl,
            "write",
            format!("churn 2 KiB @{off}"),
            fs.write(f, &buf)
        )
        .unwrap();
        t!(dev, tl, "fsync", "churn fsync", fs.fsync(f)).unwrap();
    }
    for (f, _) in hs {
        t!(dev, tl, "close", "churn close", fs.close(f)).unwrap();
    }
}

/// Six 64-byte appends with an fsync each (all but the first staged: each continues
/// the one before, and six commits on one page keep the staging efficiency above 1)
/// to object file `p`, then close.
fn stage_object(g: &mut GcVol, tl: &mut Tally, p: &str, what: &str) {
    let (dev, fs) = (&g.dev, &mut g.fs);
    let o = OpenOptions::new().write(true).append(true);
    let f = t!(dev, tl, "open", format!("{what}: open {p}"), fs.open(p, o)).unwrap();
    for k in 0..6 {
        t!(
            dev,
            tl,
            "write",
            format!("{what}: append 64 B to {p}"),
            fs.write(f, &[k as u8; 64])
        )
        .unwrap();
        t!(
            dev,
            tl,
            "fsync",
            format!("{what}: fsync {k} of {p}"),
            fs.fsync(f)
        )
        .unwrap();
    }
    t!(dev, tl, "close", format!("{what}: close {p}"), fs.close(f)).unwrap();
}

/// Rewrites inline file `p` (64 B) and closes it (staged unless bypassed).
fn stage_inline(g: &mut GcVol, tl: &mut Tally, p: &str, k: u8, what: &str) {
    let (dev, fs) = (&g.dev, &mut g.fs);
    let f = t!(
        dev,
        tl,
        "open",
        format!("{what}: open {p}"),
        fs.open(p, rw())
    )
    .unwrap();
    t!(
        dev,
        tl,
        "write",
        format!("{what}: 64 B to {p}"),
        fs.write(f, &[k; 64])
    )
    .unwrap();
    t!(
        dev,
        tl,
        "close",
        format!("{what}: close inline {p}"),
        fs.close(f)
    )
    .unwrap();
}

/// One round of the patch attack: eight object files and eight inline files (three
/// commits each) staged, then a call that must patch them all (by `r % 4`: a ninth
/// object's staged fsync, a ninth inline file's close, a remove of a staged name, a
/// rename of one); then creates colliding with names of `/c{r}` (a chain of splits
/// in one call) and attributes on them.
fn patch_round(g: &mut GcVol, tl: &mut Tally, r: usize) {
    for k in 0..8 {
        stage_object(g, tl, &format!("/o{k}"), &format!("round {r} stage"));
    }
    let objects = g.fs.staging_status().unwrap();
    for rep in 0..3u8 {
        for k in 0..8 {
            stage_inline(g, tl, &format!("/i{k}/s"), rep, &format!("round {r} stage"));
        }
    }
    let st = g.fs.staging_status().unwrap();
    if r < 2 {
        println!("round {r}: after the objects {objects:?}; after the inline files {st:?}");
    }
    let what = format!(
        "round {r} trigger with {} objects, {} inline staged",
        st.staged_objects, st.staged_inline
    );
    let (dev, fs) = (&g.dev, &mut g.fs);
    match r % 4 {
        0 => stage_object(g, tl, "/o8", &what),
        1 => stage_inline(g, tl, "/i8/s", 9, &what),
        2 => {
            t!(
                dev,
                tl,
                "remove",
                format!("{what}: remove /i0/s"),
                fs.remove("/i0/s")
            )
            .unwrap();
            put(fs, "/i0/s", &[1; 64]).unwrap();
        }
        _ => {
            t!(
                dev,
                tl,
                "rename",
                format!("{what}: rename /i0/s /i0/t"),
                fs.rename("/i0/s", "/i0/t")
            )
            .unwrap();
            fs.rename("/i0/t", "/i0/s").unwrap();
        }
    }
    if r < g.colliding.len() {
        let names = g.colliding[r].clone();
        let (dev, fs) = (&g.dev, &mut g.fs);
        for n in &names[names.len() - 8..] {
            let p = format!("/c{r}/{n}");
            let f = match t!(
                dev,
                tl,
                "open",
                format!("round {r}: create colliding {p}"),
                fs.open(&p, create())
            ) {
                Ok(f) => f,
                Err(E::DirectoryFull) => continue,
                Err(e) => panic!("{p}: {e:?}"),
            };
            t!(
                dev,
                tl,
                "write",
                "256 B to a colliding name",
                fs.write(f, &[3; 256])
            )
            .unwrap();
            t!(
                dev,
                tl,
                "close",
                format!("round {r}: close colliding {p}"),
                fs.close(f)
            )
            .unwrap();
        }
        for n in &names {
            let p = format!("/c{r}/{n}");
            match t!(
                dev,
                tl,
                "set_attributes",
                format!("round {r}: 32 B on colliding {p}"),
                fs.set_attributes(&p, &[7; 32])
            ) {
                Ok(()) | Err(E::DirectoryFull) | Err(E::NotFound) => {}
                Err(e) => panic!("{p}: {e:?}"),
            }
        }
    }
}

fn gc_patch_survey(free: usize, warm: u64, rounds: usize, seed: u64) -> Tally {
    let mut g = gc_volume(seed, free, rounds, 5);
    let mut rng = Rng(seed | 1);
    let mut base = Tally::default();
    churn(&mut g, &mut base, &mut rng, warm);
    base.print(&format!("warm-up churn ({warm} overwrites)"));
    // Commits that went home while inline staging was bypassed (the setup's creates
    // wrote a bucket per record): rewrite one inline file until staging is back.
    let mut drained = 0;
    while g.fs.staging_status().unwrap().staged_inline == 0 && drained < 10_000 {
        put(&mut g.fs, "/i8/s", &[drained as u8; 64]).unwrap();
        drained += 1;
    }
    println!("inline bypass drained after {drained} commits");
    let mut tl = Tally::default();
    for r in 0..rounds {
        patch_round(&mut g, &mut tl, r);
        churn(&mut g, &mut base, &mut rng, 300);
    }
    base.print("churn between rounds and warm-up");
    tl.print(&format!("patch rounds at free={free}"));
    tl
}

/// Survey: patches of eight objects and eight inline files forced inside one call,
/// and chains of splits, on volumes in steady collection at several fills.
#[test]
#[ignore = "survey: a few minutes"]
fn s56b_survey_patch_and_splits_under_gc() {
    for (free, warm) in [(2, 20_000), (8, 20_000), (16, 5_000)] {
        let tl = gc_patch_survey(free, warm, 12, 0x56b);
        let (ms, k, s) = tl.max();
        println!("free={free}: worst {k} {ms:.2} ms: {s}");
    }
}

/// Survey: very large and sparse files (truncate, remove, rename over, reads of holes,
/// first calls after a mount) and a path of 300 components (the crate docs' bound),
/// with cold caches after a mount.
#[test]
#[ignore = "survey: a minute"]
fn s56b_survey_large_files_and_deep_paths() {
    let dev = device(0x56b);
    let mut fs = volume(&dev);
    let mut tl = Tally::default();
    fs.format().unwrap();
    fs.mount().unwrap();
    let chunk = vec![0x3Cu8; 65536];
    for name in ["/huge", "/huge2"] {
        let f = fs.open(name, create()).unwrap();
        for _ in 0..(48 << 20) / chunk.len() {
            fs.write(f, &chunk).unwrap();
        }
        fs.close(f).unwrap();
    }
    // A sparse file: one byte at 100 MiB.
    let f = fs.open("/sparse", create()).unwrap();
    fs.seek(f, SeekFrom::Start(100 << 20)).unwrap();
    fs.write(f, &[1]).unwrap();
    fs.close(f).unwrap();
    let mut p = String::new();
    for _ in 0..300 {
        p.push_str("/d");
        fs.create_dir(&p).unwrap();
    }
    let deep = format!("{p}/f");
    put(&mut fs, &deep, &[9; 1000]).unwrap();
    fs.unmount().unwrap();
    fs = volume(&dev);
    fs.mount().unwrap();
    let d = &dev;
    let f = t!(d, tl, "open", "open depth 300, cold", fs.open(&deep, rw())).unwrap();
    let mut buf = vec![0u8; 4096];
    t!(d, tl, "read", "read 1000 B depth 300", fs.read(f, &mut buf)).unwrap();
    t!(d, tl, "close", "close depth 300", fs.close(f)).unwrap();
    t!(d, tl, "metadata", "metadata depth 300", fs.metadata(&deep)).unwrap();
    t!(
        d,
        tl,
        "rename",
        "rename deepest dir to /top",
        fs.rename(&p, "/top")
    )
    .unwrap();
    t!(
        d,
        tl,
        "rename",
        "rename /top back to depth 300",
        fs.rename("/top", &p)
    )
    .unwrap();
    t!(d, tl, "remove", "remove depth 300", fs.remove(&deep)).unwrap();
    fs.unmount().unwrap();
    fs = volume(&dev);
    fs.mount().unwrap();
    let f = t!(d, tl, "open", "open /sparse cold", fs.open("/sparse", rw())).unwrap();
    let mut big = vec![0u8; 65536];
    t!(d, tl, "read", "read 64 KiB of holes", fs.read(f, &mut big)).unwrap();
    t!(
        d,
        tl,
        "seek",
        "seek sparse to 100 MiB - 1000",
        fs.seek(f, SeekFrom::Start((100 << 20) - 1000))
    )
    .unwrap();
    t!(d, tl, "read", "read across 100 MiB", fs.read(f, &mut buf)).unwrap();
    t!(d, tl, "truncate", "truncate sparse to 0", fs.truncate(f, 0)).unwrap();
    t!(d, tl, "close", "close sparse", fs.close(f)).unwrap();
    let f = t!(d, tl, "open", "open /huge cold", fs.open("/huge", rw())).unwrap();
    let mut rng = Rng(7);
    for _ in 0..20 {
        let off = rng.below(48 << 20);
        t!(
            d,
            tl,
            "seek",
            "seek /huge",
            fs.seek(f, SeekFrom::Start(off))
        )
        .unwrap();
        t!(
            d,
            tl,
            "read",
            format!("read 4 KiB of /huge @{off} cold"),
            fs.read(f, &mut buf)
        )
        .unwrap();
    }
    t!(
        d,
        tl,
        "truncate",
        "truncate 48 MiB /huge to 1 MiB + 1",
        fs.truncate(f, (1 << 20) + 1)
    )
    .unwrap();
    t!(d, tl, "fsync", "fsync after the truncate", fs.fsync(f)).unwrap();
    t!(d, tl, "close", "close /huge", fs.close(f)).unwrap();
    let f = t!(
        d,
        tl,
        "open",
        "open 48 MiB /huge2 with truncate",
        fs.open("/huge2", rw().truncate(true))
    )
    .unwrap();
    t!(d, tl, "write", "write 100 B", fs.write(f, &[5; 100])).unwrap();
    t!(d, tl, "close", "close of the truncated /huge2", fs.close(f)).unwrap();
    let f = fs.open("/huge3", create()).unwrap();
    for _ in 0..(48 << 20) / chunk.len() {
        fs.write(f, &chunk).unwrap();
    }
    fs.close(f).unwrap();
    t!(
        d,
        tl,
        "rename",
        "rename /huge3 over /huge (1 MiB)",
        fs.rename("/huge3", "/huge")
    )
    .unwrap();
    t!(d, tl, "remove", "remove 48 MiB /huge", fs.remove("/huge")).unwrap();
    t!(d, tl, "remove", "remove /huge2", fs.remove("/huge2")).unwrap();
    tl.print("large files and deep paths");
}

/// Renames at depth `depth` (`/d/d/...` and `/e/e/...`, warm caches): a file renamed
/// within the deepest directory, and (with `cross`) moved to the other chain's deepest
/// directory.
fn deep_renames(depth: usize, cross: bool) -> Tally {
    let dev = device(0x56b);
    let mut fs = volume(&dev);
    let mut tl = Tally::default();
    fs.format().unwrap();
    fs.mount().unwrap();
    let (mut p, mut q) = (String::new(), String::new());
    for _ in 0..depth {
        p.push_str("/d");
        q.push_str("/e");
        fs.create_dir(&p).unwrap();
        fs.create_dir(&q).unwrap();
    }
    put(&mut fs, &format!("{p}/f"), &[9; 100]).unwrap();
    let d = &dev;
    t!(
        d,
        tl,
        "metadata",
        format!("metadata depth {depth}"),
        fs.metadata(&format!("{p}/f"))
    )
    .unwrap();
    t!(
        d,
        tl,
        "rename",
        format!("rename within the directory at depth {depth}"),
        fs.rename(&format!("{p}/f"), &format!("{p}/g"))
    )
    .unwrap();
    if cross {
        t!(
            d,
            tl,
            "rename",
            format!("rename across two chains at depth {depth}"),
            fs.rename(&format!("{p}/g"), &format!("{q}/g"))
        )
        .unwrap();
    }
    tl
}

/// Renames within a directory 300 components deep (the crate docs' bound for single
/// calls within 50 ms; 85.9 ms until the fix, which walks a shared parent once), and
/// between two directories 150 components deep each (the bound the crate docs give a
/// rename that walks two parents).
#[test]
fn s56b_deep_rename_at_300_components() {
    for (depth, cross) in [(300, false), (150, true)] {
        let tl = deep_renames(depth, cross);
        tl.print(&format!("renames at depth {depth}"));
        let (ms, k, s) = tl.max();
        println!("worst: {k} {ms:.2} ms ({s})");
        assert!(ms <= BOUND_MS, "{k} took {ms:.2} ms > {BOUND_MS} ms: {s}");
    }
}

/// Survey: [`deep_renames`] at several depths (where a rename crosses 50 ms).
#[test]
#[ignore = "survey: a few seconds"]
fn s56b_survey_deep_renames() {
    for depth in [100, 150, 170, 180, 200, 250, 300] {
        let tl = deep_renames(depth, true);
        let (ms, k, s) = tl.max();
        println!("depth {depth}: worst {k} {ms:.2} ms ({s})");
    }
}

/// Stop 57: a rename between two directories walks their shared ancestors once, so a
/// move between sibling directories 300 components deep costs about one walk (it took
/// two, over 50 ms, before). Two directories on separate chains from the root still
/// walk both (the crate docs' bound of about 150 components each).
#[test]
fn s57_rename_between_sibling_directories_at_300_components() {
    let dev = device(0x57);
    let mut fs = volume(&dev);
    let mut tl = Tally::default();
    fs.format().unwrap();
    fs.mount().unwrap();
    let mut p = String::new();
    for _ in 0..299 {
        p.push_str("/d");
        fs.create_dir(&p).unwrap();
    }
    let (a, b) = (format!("{p}/a"), format!("{p}/b"));
    fs.create_dir(&a).unwrap();
    fs.create_dir(&b).unwrap();
    put(&mut fs, &format!("{a}/f"), &[9; 100]).unwrap();
    let d = &dev;
    t!(
        d,
        tl,
        "rename",
        "rename between sibling directories at depth 300",
        fs.rename(&format!("{a}/f"), &format!("{b}/f"))
    )
    .unwrap();
    t!(
        d,
        tl,
        "rename",
        "rename back, after a remount (cold caches)",
        {
            fs.unmount().unwrap();
            fs = volume(&dev);
            fs.mount().unwrap();
            Ok::<(), E>(())
        }
    )
    .unwrap();
    t!(
        d,
        tl,
        "rename",
        "rename back at depth 300",
        fs.rename(&format!("{b}/f"), &format!("{a}/f"))
    )
    .unwrap();
    assert_eq!(fs.metadata(&format!("{a}/f")).unwrap().size, 100);
    assert_eq!(fs.metadata(&format!("{b}/f")), Err(Error::NotFound));
    tl.print("sibling renames at depth 300");
    let (ms, k, s) = tl.max();
    println!("worst: {k} {ms:.2} ms ({s})");
    assert!(ms <= BOUND_MS, "{k} took {ms:.2} ms > {BOUND_MS} ms: {s}");
}
