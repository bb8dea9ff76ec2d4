//! Review s54: an independent attempt to break the file layer (`Fs`) and the object
//! FTL under it with shapes the earlier reviews did not have: random scripts that mix
//! truncate-opens written across `INLINE_MAX` (pending objects), sizes at the inline,
//! sector and page boundaries (0, 1, 255..257, 511..513, 2047..2049, 4095, 4097),
//! seeks past the end, truncates that extend, appends with fsync, `step` with budgets
//! 0..3, renames of directories holding open files and of files over files with
//! staged records, removes, mkdir/rmdir, bursts of creates in a directory of 150 to
//! 2,500 names (bucket splits while inline records are staged), user attributes
//! (0..=`ATTR_MAX` bytes, one too long refused) set on open files with unsynced data,
//! on staged inline files and on directories, and unmount + mount with a file open;
//! double cuts (a cut in the script, a cut in its recovery mount) followed by a second
//! script cut again; lookup costs counted through the simulator; the `std::io` and
//! `embedded_io` views read after a crash and a remount.
//!
//! Harness: `support::tree` (model, `check_after`) and `support::sweep::cut_sweep`;
//! this file adds a side model of the attributes (`ATTRS`, checked after each cut,
//! `attrs_check`), a lighter check for trees of thousands of files (`light_check`)
//! and the double-cut chain (`chain`).
//!
//! Findings:
//! - `s54_cold_lookup_in_a_directory_of_16384_names_reads_at_most_five_pages` (low, a
//!   cost claim; fixed in stop 54 by stating the real bound, now a normal test): the first lookup in a directory of 3,000 names after a mount reads 5
//!   pages where one in a small directory reads 3; the docs promise 2 per component
//!   "whatever the directory's size". A directory past 3 buckets is mapped through
//!   oftl index pages (`DIRECT_PAGES` = 3, `crates/oftl/src/format/table.rs:46`).
//!
//! No data or atomicity failure was found. Held (cut runs, every cut checked against
//! the acknowledged state and the call in flight, then the volume must take a change
//! and remount with it):
//! - random scripts: 3 seeds here (about 3,000 runs, recovery cuts on one); the survey
//!   `s54_random_scripts_survey` ran seeds 4..60 (58,019 runs; 33 failures in 3 seeds,
//!   all the model's: `sync` and `unmount` commit open files one by one, so a cut
//!   between two leaves one committed, which a before/after model cannot take; the
//!   scripts now leave one file open for them, and the 3 seeds pass) and 100..220 at
//!   80 calls (139,704 runs, 0 failures);
//! - attributes: 3 seeds + recovery cuts here (about 2,000 runs); the survey
//!   `s54_attributes_survey` seeds 40..100 (53,438 runs, 0 failures);
//! - staged inline growth while a 260-name directory splits (about 1,800 runs);
//! - the random scripts over a 2,500-name directory (about 190 runs here; survey
//!   `s54_large_directory_survey`);
//! - double cuts then more work (about 300 runs here); the survey
//!   `s54_double_cut_survey` seeds 10..30 (59,384 runs, 0 failures).
//!
//! Run: `cargo test --release -p stagefs-core --all-features --test all -- review_s54::
//! --test-threads=1` (the surveys: `... review_s54::s54_random_scripts_survey --ignored`,
//! with `S54_SEEDS=a..b`, `S54_LEN`).

use stagefs_core::{Error, OpenOptions, ATTR_MAX};

use crate::support::tree::fresh;
use crate::support::{create, pattern, vol, Vol};

type E = nand_hal::sim::SimError;

fn reads(fs: &Vol<'_>) -> u64 {
    fs.store().flash().counters().reads
}

/// Reads of the first lookup in a directory after a mount, the root already walked:
/// (reads for `/small/x`, reads for the large directory's name), each in a mount of
/// its own.
fn first_lookup_reads(n: u32) -> (u64, u64) {
    let mut sim = fresh(54);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    fs.create_dir("/big").unwrap();
    fs.create_dir("/small").unwrap();
    crate::support::write_file(&mut fs, "/small/x", b"abc");
    crate::support::write_file(&mut fs, "/r", b"root file");
    for i in 0..n {
        let f = fs.open(&format!("/big/n{i:05}"), create()).unwrap();
        if i % 3 == 0 {
            fs.write(f, &pattern(i, 40)).unwrap();
        }
        fs.close(f).unwrap();
    }
    fs.unmount().unwrap();
    let mut one = |p: &str| {
        fs.mount().unwrap();
        // The root's pages (and the store's tables for it) first.
        fs.metadata("/r").unwrap();
        fs.metadata("/small").unwrap();
        fs.metadata("/big").unwrap();
        let r0 = reads(&fs);
        fs.metadata(p).unwrap();
        let r = reads(&fs) - r0;
        fs.unmount().unwrap();
        r
    };
    let small = one("/small/x");
    let big = one(&format!("/big/n{:05}", n / 2));
    (small, big)
}

/// Finding (low: a documented cost, not data; fixed in stop 54 by stating the real
/// bound). The crate docs promised 2 page reads per path component "whatever the
/// directory's size"; the first lookup after a mount in a directory of 3,000 names read
/// 5 pages where one in a small directory read 3 (its page 0, its bucket, the store's
/// table page): oftl maps only an object's first `DIRECT_PAGES` = 3 pages from its
/// table record (`crates/oftl/src/format/table.rs`), so a directory of more buckets
/// reads an index page too until it is cached. The docs now state 2 pages of the
/// directory plus at most 3 of the store's tables (table page, index pages) when not
/// cached; this pins it at 16,384 names.
#[test]
fn s54_cold_lookup_in_a_directory_of_16384_names_reads_at_most_five_pages() {
    let (small, big) = first_lookup_reads(16_384);
    println!("first lookup after a mount: small dir {small} reads, 16,384 names {big} reads");
    assert!(small <= 3, "the small directory: {small} reads");
    assert!(
        big <= 5,
        "a 16,384-name directory: {big} reads for one component"
    );
}

/// Held: once a large directory's pages have been looked at, a lookup there reads at
/// most 2 pages (the dir cache and the store's clean copies), over every 97th name of
/// 1,500.
#[test]
fn s54_warm_lookup_in_a_large_directory_reads_at_most_two_pages() {
    let mut sim = fresh(55);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    fs.create_dir("/big").unwrap();
    let n = 1500;
    for i in 0..n {
        let f = fs.open(&format!("/big/n{i:05}"), create()).unwrap();
        fs.close(f).unwrap();
    }
    let mut worst = 0;
    for i in (0..n).step_by(97) {
        let r0 = reads(&fs);
        let m = fs.metadata(&format!("/big/n{i:05}")).unwrap();
        assert_eq!(m.size, 0);
        worst = worst.max(reads(&fs) - r0);
    }
    assert!(worst <= 2, "{worst} reads for a warm lookup");
    assert_eq!(fs.metadata("/big/zzz"), Err(Error::NotFound));
}

use crate::support::rw;
use crate::support::tree::{assert_report, sweep, Ctx, Report, St, KINDS};

fn nm(i: u32) -> String {
    format!("/big/n{i:05}")
}

fn pre_big(c: &mut Ctx<'_, '_>) -> Result<(), Error<E>> {
    c.mkdir_("/big")?;
    for i in 0..BIG_PRE {
        if i % 4 == 0 {
            c.put_(&nm(i), &pattern(i, 20 + (i as usize % 7) * 9))?;
        } else {
            let f = c.open_(&nm(i), create(), false)?;
            c.close_(f, &nm(i))?;
        }
    }
    Ok(())
}

const BIG_PRE: u32 = 260;

/// Staged inline growth in a directory whose buckets split under it.
fn big_splits(c: &mut Ctx<'_, '_>) -> Result<(), Error<E>> {
    c.no_bypass();
    let staged = [1u32, 2, 5, 40, 77, 130, 199, 250];
    for (k, &i) in staged.iter().enumerate() {
        c.put_(&nm(i), &pattern(100 + i, 60 + k * 20))?;
    }
    for j in 0..48u32 {
        let i = 1000 + j;
        let f = c.open_(&nm(i), create(), false)?;
        if j % 3 == 0 {
            c.write_(f, &nm(i), 0, &pattern(i, 90))?;
        }
        c.close_(f, &nm(i))?;
        if j % 8 == 3 {
            let s = staged[(j / 8) as usize % staged.len()];
            c.put_(&nm(s), &pattern(200 + j, 150 + j as usize))?;
        }
    }
    c.rename_(&nm(5), "/big/renamed_staged")?;
    c.rename_(&nm(40), &nm(41))?;
    c.remove_(&nm(77))?;
    // A staged file grown past INLINE_MAX by appends, the bucket splitting meanwhile.
    let f = c.open_(&nm(130), rw(), false)?;
    let at = c.len_of(&nm(130));
    c.write_(f, &nm(130), at, &pattern(7, 200))?;
    c.fsync_(f, &nm(130))?;
    for j in 0..12u32 {
        let i = 2000 + j;
        let g = c.open_(&nm(i), create(), false)?;
        c.write_(g, &nm(i), 0, &pattern(i, 250))?;
        c.close_(g, &nm(i))?;
    }
    let at = c.len_of(&nm(130));
    c.write_(f, &nm(130), at, &pattern(8, 64))?;
    c.fsync_(f, &nm(130))?;
    c.close_(f, &nm(130))?;
    c.step_(1)?;
    c.put_(&nm(199), &pattern(9, 256))?;
    c.put_(&nm(250), &pattern(10, 255))?;
    Ok(())
}

#[test]
fn s54_big_dir_splits_under_staged_inline() {
    let mut r = Report::default();
    let t = std::time::Instant::now();
    r.add(sweep(
        "big_splits",
        &pre_big,
        &big_splits,
        541,
        &KINDS,
        1,
        false,
        false,
    ));
    r.add(sweep(
        "big_splits",
        &pre_big,
        &big_splits,
        541,
        &[CutKind::Torn(TornMode::Random)],
        9,
        true,
        true,
    ));
    println!("{:?}", t.elapsed());
    assert_report(r);
}

use crate::support::tree::{assert_staging_report, Script, X};
use crate::support::Rng;
use nand_hal::sim::{CutKind, FaultPlan, TornMode};

const SIZES: [usize; 14] = [
    0, 1, 255, 256, 257, 511, 512, 513, 2047, 2048, 2049, 4095, 4097, 6000,
];

fn pre_rand(c: &mut Ctx<'_, '_>) -> Result<(), Error<E>> {
    c.mkdir_("/a")?;
    c.mkdir_("/a/b")?;
    c.mkdir_("/c")?;
    c.mkdir_("/big")?;
    for i in 0..150u32 {
        c.put_(&nm(i), &pattern(i, (i as usize * 37) % 120))?;
    }
    c.put_("/a/f0", &pattern(1, 3000))?;
    c.put_("/a/b/f1", &pattern(2, 200))?;
    c.put_("/c/f2", &pattern(3, 256))?;
    Ok(())
}

/// The user attributes the scripts set (path -> attributes; a path not here has
/// none): acknowledged, and the change of the call in flight.
type Attrs = std::collections::BTreeMap<String, Vec<u8>>;

thread_local! {
    /// `set_attributes` calls the uncut and cut runs made (the sweeps check some ran).
    static ATTR_SETS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    static ATTRS: std::cell::RefCell<(Attrs, Option<Attrs>)> =
        const { std::cell::RefCell::new((Attrs::new(), None)) };
}

/// Notes the attribute change of the call about to be made.
fn attrs_intent(change: impl FnOnce(&mut Attrs)) {
    ATTRS.with(|a| {
        let mut a = a.borrow_mut();
        let mut next = a.0.clone();
        change(&mut next);
        a.1 = Some(next);
    });
}

/// The call returned: its change is acknowledged.
fn attrs_done() {
    ATTRS.with(|a| {
        let mut a = a.borrow_mut();
        if let Some(n) = a.1.take() {
            a.0 = n;
        }
    });
}

/// Drops the attributes of `p` and every path below it.
fn attrs_drop(a: &mut Attrs, p: &str) {
    let below = format!("{p}/");
    a.retain(|k, _| k != p && !k.starts_with(&below));
}

struct H {
    f: stagefs_core::File,
    path: String,
    append: bool,
}

fn files_of(c: &Ctx<'_, '_>) -> Vec<String> {
    c.cur
        .iter()
        .filter(|(_, x)| matches!(x, X::F(..)))
        .map(|(k, _)| k.clone())
        .collect()
}

fn dirs_of(c: &Ctx<'_, '_>) -> Vec<String> {
    let mut d: Vec<String> = c
        .cur
        .iter()
        .filter(|(_, x)| matches!(x, X::Dir))
        .map(|(k, _)| k.clone())
        .collect();
    d.push(String::new());
    d
}

/// A script drawn from `seed` (deterministic in the seed and the model, so every cut
/// run replays the same calls up to its cut): truncate-opens written across
/// `INLINE_MAX` (pending objects), sizes at the inline/sector/page boundaries, seeks
/// past the end, truncates that extend, appends with fsync, steps of budget 0..3,
/// renames of directories holding open files and of files over files with staged
/// records, removes, mkdir/rmdir, creates that split a large directory, and unmounts
/// with handles open (then a mount).
fn rand_script(seed: u64, len: usize) -> impl Fn(&mut Ctx<'_, '_>) -> Result<(), Error<E>> {
    move |c| {
        let trace = std::env::var("S54_TRACE").is_ok();
        macro_rules! t {
            ($($a:tt)*) => {
                if trace {
                    println!("[{}] {}", c.steps, format!($($a)*));
                }
            };
        }
        let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        if r.below(3) != 0 {
            c.no_bypass();
        }
        let mut hs: Vec<H> = Vec::new();
        ATTRS.with(|a| *a.borrow_mut() = (Attrs::new(), None));
        let mut k = 0u32;
        for _ in 0..len {
            k += 1;
            let files = files_of(c);
            let dirs = dirs_of(c);
            let open = |hs: &Vec<H>, p: &str| hs.iter().any(|h| h.path == p);
            match r.below(20) {
                // Open (maybe truncating, maybe creating).
                0..=2 if hs.len() < 3 => {
                    let p = if r.below(3) == 0 || files.is_empty() {
                        let d = &dirs[r.below(dirs.len() as u64) as usize];
                        format!("{d}/g{}", r.below(6))
                    } else {
                        files[r.below(files.len() as u64) as usize].clone()
                    };
                    if open(&hs, &p) || matches!(c.cur.get(&p), Some(X::Dir)) {
                        continue;
                    }
                    let (o, trunc, append) = match r.below(4) {
                        0 => (create().truncate(true), true, false),
                        1 => (
                            OpenOptions::new().append(true).read(true).create(true),
                            false,
                            true,
                        ),
                        _ => (create(), false, false),
                    };
                    t!("open {p} trunc {trunc} append {append}");
                    let f = c.open_(&p, o, trunc)?;
                    hs.push(H { f, path: p, append });
                }
                // Write: at the end, past it, inside, or to a boundary size.
                3..=7 if !hs.is_empty() => {
                    let h = &hs[r.below(hs.len() as u64) as usize];
                    let len = c.len_of(&h.path);
                    let (at, n) = if h.append {
                        (len, 1 + r.below(100) as usize)
                    } else {
                        match r.below(4) {
                            0 => (len, 1 + r.below(90) as usize),
                            1 => (len + r.below(600) as usize, 1 + r.below(40) as usize),
                            2 => {
                                let end = SIZES[r.below(SIZES.len() as u64) as usize].max(1);
                                let at = r.below(end as u64) as usize;
                                (at, end - at)
                            }
                            _ => (r.below(len as u64 + 1) as usize, 1 + r.below(300) as usize),
                        }
                    };
                    if at + n > 9000 {
                        continue;
                    }
                    let (f, p) = (h.f, h.path.clone());
                    t!("write {p} at {at} n {n}");
                    c.write_(f, &p, at, &pattern(1000 + k, n))?;
                    if r.below(3) != 0 {
                        t!("fsync {p}");
                        c.fsync_(f, &p)?;
                    }
                }
                8 if !hs.is_empty() => {
                    let h = &hs[r.below(hs.len() as u64) as usize];
                    let (f, p) = (h.f, h.path.clone());
                    let len = c.len_of(&p);
                    let size = match r.below(3) {
                        0 => r.below(len as u64 + 1) as usize,
                        1 => len + r.below(3000) as usize,
                        _ => SIZES[r.below(SIZES.len() as u64) as usize],
                    };
                    t!("truncate {p} to {size}");
                    c.truncate_(f, &p, size)?;
                }
                9..=10 if !hs.is_empty() => {
                    let i = r.below(hs.len() as u64) as usize;
                    let h = hs.remove(i);
                    t!("close {}", h.path);
                    c.close_(h.f, &h.path)?;
                }
                11 => {
                    let b = [0u32, 0, 1, 1, 2, 3][r.below(6) as usize];
                    t!("step {b}");
                    c.step_(b)?;
                }
                12 => {
                    // Rename a file (not open) to a name or over a file (not open).
                    if files.is_empty() {
                        continue;
                    }
                    let from = files[r.below(files.len() as u64) as usize].clone();
                    let to = if r.below(2) == 0 {
                        files[r.below(files.len() as u64) as usize].clone()
                    } else {
                        let d = &dirs[r.below(dirs.len() as u64) as usize];
                        format!("{d}/g{}", r.below(6))
                    };
                    if open(&hs, &from) || open(&hs, &to) || from == to {
                        continue;
                    }
                    if matches!(c.cur.get(&to), Some(X::Dir)) {
                        continue;
                    }
                    t!("rename file {from} -> {to}");
                    attrs_intent(|a| {
                        crate::support::tree::move_subtree(a, &from, &to);
                    });
                    c.rename_(&from, &to)?;
                    attrs_done();
                }
                13 => {
                    // Rename a directory (open files inside move with it).
                    let ds: Vec<&String> = dirs.iter().filter(|d| !d.is_empty()).collect();
                    if ds.is_empty() {
                        continue;
                    }
                    let from = ds[r.below(ds.len() as u64) as usize].clone();
                    let to = match r.below(3) {
                        0 => format!("/r{k}"),
                        1 => format!("/a/r{k}"),
                        _ => "/c/e".to_string(),
                    };
                    let parent = &to[..to.rfind('/').unwrap()];
                    if to.starts_with(&format!("{from}/"))
                        || to == from
                        || !(parent.is_empty() || matches!(c.cur.get(parent), Some(X::Dir)))
                    {
                        continue;
                    }
                    let below = format!("{to}/");
                    match c.cur.get(&to) {
                        Some(X::F(..)) => continue,
                        Some(X::Dir) if c.cur.keys().any(|q| q.starts_with(&below)) => continue,
                        _ => {}
                    }
                    t!("rename dir {from} -> {to}");
                    attrs_intent(|a| {
                        attrs_drop(a, &to);
                        crate::support::tree::move_subtree(a, &from, &to);
                    });
                    c.rename_(&from, &to)?;
                    attrs_done();
                    let fb = format!("{from}/");
                    for h in &mut hs {
                        if h.path.starts_with(&fb) {
                            h.path = format!("{to}{}", &h.path[from.len()..]);
                        }
                    }
                }
                14 => {
                    if files.is_empty() {
                        continue;
                    }
                    let p = files[r.below(files.len() as u64) as usize].clone();
                    if open(&hs, &p) {
                        continue;
                    }
                    t!("remove {p}");
                    attrs_intent(|a| attrs_drop(a, &p));
                    c.remove_(&p)?;
                    attrs_done();
                }
                15 => {
                    let d = &dirs[r.below(dirs.len() as u64) as usize];
                    let p = format!("{d}/s{}", r.below(3));
                    if c.cur.contains_key(&p) {
                        let below = format!("{p}/");
                        if matches!(c.cur.get(&p), Some(X::Dir))
                            && !c.cur.keys().any(|q| q.starts_with(&below))
                        {
                            t!("rmdir {p}");
                            attrs_intent(|a| attrs_drop(a, &p));
                            c.rmdir_(&p)?;
                            attrs_done();
                        }
                    } else if p.matches('/').count() < 5 {
                        t!("mkdir {p}");
                        c.mkdir_(&p)?;
                    }
                }
                16 => {
                    // Creates in the large directory (splits).
                    if !matches!(c.cur.get("/big"), Some(X::Dir)) {
                        continue;
                    }
                    for j in 0..1 + r.below(12) as u32 {
                        let p = nm(5000 + k * 16 + j);
                        let n = [0usize, 40, 256][r.below(3) as usize];
                        t!("put {p} {n}");
                        c.put_(&p, &pattern(k + j, n))?;
                    }
                }
                17 => {
                    // Small puts (staged inline), also to boundary sizes.
                    let d = &dirs[r.below(dirs.len() as u64) as usize];
                    let p = format!("{d}/g{}", r.below(6));
                    if open(&hs, &p) || matches!(c.cur.get(&p), Some(X::Dir)) {
                        continue;
                    }
                    let n = [3usize, 100, 255, 256, 257][r.below(5) as usize];
                    t!("put {p} {n}");
                    c.put_(&p, &pattern(2000 + k, n))?;
                }
                18 if r.below(4) == 0 => {
                    // Unmount with handles open (each closed: durable), then mount.
                    // The unmount closes its files one by one (a cut between two
                    // leaves one committed, one not, which the model's before/after
                    // does not take): at most one left open for it.
                    while hs.len() > 1 {
                        let h = hs.remove(0);
                        t!("close {}", h.path);
                        c.close_(h.f, &h.path)?;
                    }
                    let paths: Vec<String> = hs.drain(..).map(|h| h.path).collect();
                    t!("unmount+mount with {paths:?}");
                    c.op(
                        |fs| {
                            fs.unmount()?;
                            fs.mount()
                        },
                        |st| {
                            for p in &paths {
                                Ctx::durable(st, p);
                            }
                        },
                    )?;
                }
                19 if r.below(2) == 0 => {
                    // User attributes: of an open file with unsynced data, a staged
                    // inline file, a directory; lengths 0..=ATTR_MAX; one too long is
                    // refused and changes nothing.
                    let all: Vec<String> = c.cur.keys().cloned().collect();
                    if all.is_empty() {
                        continue;
                    }
                    let p = if !hs.is_empty() && r.below(3) == 0 {
                        hs[r.below(hs.len() as u64) as usize].path.clone()
                    } else {
                        all[r.below(all.len() as u64) as usize].clone()
                    };
                    let n = [0usize, 1, 7, 31, ATTR_MAX][r.below(5) as usize];
                    let v = pattern(3000 + k, n);
                    if r.below(6) == 0 {
                        let e = c.fs.set_attributes(&p, &[1; ATTR_MAX + 1]);
                        assert_eq!(e, Err(Error::TooLarge), "{p}: attributes too long");
                    }
                    t!("set_attributes {p} {n}");
                    attrs_intent(|a| {
                        a.insert(p.clone(), v.clone());
                    });
                    c.op(|fs| fs.set_attributes(&p, &v), |_| {})?;
                    attrs_done();
                    ATTR_SETS.with(|n| n.set(n.get() + 1));
                }
                _ => {
                    if r.below(5) == 0 {
                        // `sync` commits every open file (as `fsync`), one by one: all
                        // but one fsynced first (see the unmount above).
                        for h in hs.iter().skip(1) {
                            let (f, p) = (h.f, h.path.clone());
                            t!("fsync {p}");
                            c.fsync_(f, &p)?;
                        }
                        t!("sync");
                        let paths: Vec<String> = hs.iter().map(|h| h.path.clone()).collect();
                        c.op(
                            |fs| fs.sync(),
                            |st| {
                                for p in &paths {
                                    Ctx::durable(st, p);
                                }
                            },
                        )?;
                    } else if let Some(h) = hs.first() {
                        let (f, p) = (h.f, h.path.clone());
                        t!("fsync {p}");
                        c.fsync_(f, &p)?;
                    }
                }
            }
        }
        for h in hs.drain(..) {
            c.close_(h.f, &h.path)?;
        }
        Ok(())
    }
}

/// After a cut: every path's attributes as acknowledged or as the call in flight set
/// them (checked at a mount of their own), then `check_after`.
fn attrs_check(sim: &mut crate::support::Sim, cur: &St, intent: &Option<St>) -> Result<(), String> {
    let (acked, next) = ATTRS.with(|a| a.borrow().clone());
    {
        let mut fs = vol(sim);
        fs.mount().map_err(|e| format!("mount: {e:?}"))?;
        let t = observe(&mut fs).map_err(|e| format!("observe: {e:?}"))?;
        let mut paths: Vec<&String> = t.keys().collect();
        let root = String::new();
        paths.push(&root);
        for p in paths {
            let q = if p.is_empty() { "/" } else { p.as_str() };
            let m = fs.metadata(q).map_err(|e| format!("metadata {q}: {e:?}"))?;
            let got = m.attributes();
            let want = acked.get(p).map_or(&[][..], |v| v.as_slice());
            let alt = next
                .as_ref()
                .map(|n| n.get(p).map_or(&[][..], |v| v.as_slice()));
            if got != want && alt != Some(got) {
                return Err(format!(
                    "{q}: attributes {got:?}, acknowledged {want:?}, in flight {alt:?}"
                ));
            }
        }
    }
    check_after(sim, cur, intent)
}

/// The random scripts cut at every `stride`-th program/erase, each cut checked with
/// the attributes (`attrs_check`).
fn rand_attr_sweep(
    seed: u64,
    len: usize,
    stride: u64,
    kinds: &[CutKind],
    recovery: bool,
) -> Report {
    let (base_sim, st) = base(&pre_rand, seed);
    let s = rand_script(seed, len);
    let cuts = crate::support::sweep::Cuts {
        seed,
        kinds,
        stride,
        recovery,
        noisy: false,
    };
    let (rep, ops) = sweep_from(&base_sim, &st, &s, cuts, "attrs", &mut attrs_check);
    println!(
        "attrs seed {seed}: {ops} programs/erases uncut, {} runs, {} failures",
        rep.runs,
        rep.failures.len()
    );
    rep
}

#[test]
fn s54_cut_random_scripts_with_attributes() {
    let t = std::time::Instant::now();
    let mut r = Report::default();
    ATTR_SETS.with(|n| n.set(0));
    for seed in 30..33 {
        r.add(rand_attr_sweep(seed, 60, 1, &KINDS, false));
    }
    r.add(rand_attr_sweep(
        30,
        60,
        7,
        &[CutKind::Torn(TornMode::Random)],
        true,
    ));
    println!("{:?}", t.elapsed());
    assert!(ATTR_SETS.with(|n| n.get()) > 0, "no attributes were set");
    assert_report(r);
}

fn rand_sweeps(seeds: std::ops::Range<u64>, len: usize, stride: u64) -> Report {
    let mut r = Report::default();
    for seed in seeds {
        let s = rand_script(seed, len);
        r.add(sweep(
            "rand", &pre_rand, &s, seed, &KINDS, stride, false, false,
        ));
        if seed % 3 == 0 {
            r.add(sweep(
                "rand_recovery",
                &pre_rand,
                &s,
                seed,
                &[CutKind::Torn(TornMode::Random)],
                stride * 5,
                true,
                seed % 2 == 0,
            ));
        }
    }
    r
}

#[test]
fn s54_cut_random_scripts() {
    let t = std::time::Instant::now();
    let r = rand_sweeps(1..4, 60, 1);
    println!("{:?}", t.elapsed());
    assert_staging_report(r);
}

/// The random scripts over more seeds: `S54_SEEDS=a..b` (default 4..40), `S54_LEN`
/// (default 60).
#[test]
#[ignore]
fn s54_random_scripts_survey() {
    let seeds = std::env::var("S54_SEEDS").unwrap_or_else(|_| "4..40".into());
    let (a, b) = seeds.split_once("..").unwrap();
    let len: usize = std::env::var("S54_LEN").map_or(60, |s| s.parse().unwrap());
    let r = rand_sweeps(a.parse().unwrap()..b.parse().unwrap(), len, 1);
    println!("survey: {} runs, {} failures", r.runs, r.failures.len());
    assert_report(r);
}

/// The attribute sweeps over more seeds: `S54_SEEDS=a..b` (default 40..80), `S54_LEN`
/// (default 60); every 4th seed also cuts each recovery mount (torn cuts, stride 3).
#[test]
#[ignore]
fn s54_attributes_survey() {
    let seeds = std::env::var("S54_SEEDS").unwrap_or_else(|_| "40..80".into());
    let (a, b) = seeds.split_once("..").unwrap();
    let len: usize = std::env::var("S54_LEN").map_or(60, |s| s.parse().unwrap());
    let mut r = Report::default();
    for seed in a.parse::<u64>().unwrap()..b.parse().unwrap() {
        r.add(rand_attr_sweep(seed, len, 1, &KINDS, false));
        if seed % 4 == 0 {
            r.add(rand_attr_sweep(
                seed,
                len,
                3,
                &[CutKind::Torn(TornMode::Random)],
                true,
            ));
        }
    }
    println!("survey: {} runs, {} failures", r.runs, r.failures.len());
    assert_report(r);
}

/// Debug: one seed's script (`S54_SEED`, `S54_LEN`), cut at `S54_AT` (a clean cut;
/// 0: uncut) and checked; `S54_TRACE=1` prints its calls.
#[test]
#[ignore]
fn s54_trace_one() {
    let seed: u64 = std::env::var("S54_SEED").map_or(1, |s| s.parse().unwrap());
    let len: usize = std::env::var("S54_LEN").map_or(60, |s| s.parse().unwrap());
    let s = rand_script(seed, len);
    let (mut sim, st) = crate::support::tree::base(&pre_rand, seed);
    let at: u64 = std::env::var("S54_AT").map_or(0, |s| s.parse().unwrap());
    if at > 0 {
        sim.arm(nand_hal::sim::FaultPlan::seeded(seed).with_cut(at, CutKind::Clean));
    }
    let (cur, intent, err, steps) = crate::support::tree::run_script(&mut sim, &s, &st);
    println!("err {err:?} at step {steps}");
    sim.cut_power();
    sim.power_on();
    sim.disarm();
    let r = crate::support::tree::check_after(&mut sim, &cur, &intent);
    assert_eq!(r, Ok(()));
}

use crate::support::tree::{base, check_after, matches, run_script, sweep_from};
use stagefs_core::oracle::{observe, power_loss, Node};

/// Double cuts, then more work, then a third cut: script `s1` cut at every
/// `stride`-th program/erase (kinds in turn), the recovery mount cut at `rec` points
/// spread over its programs/erases, a clean mount (its tree must be the acknowledged
/// state or the one in flight, and becomes the model, exactly), then script `s2` from
/// there cut at `later` points spread over its programs/erases, each checked by
/// `check_after` (mount, tree, sizes, the volume takes a change and remounts with it).
#[allow(clippy::too_many_arguments)]
fn chain(
    name: &str,
    pre: Script<'_>,
    s1: Script<'_>,
    s2: Script<'_>,
    seed: u64,
    stride: u64,
    rec: u64,
    later: u64,
) -> Report {
    let (base_sim, st) = base(pre, seed);
    let mut sim = base_sim.clone();
    sim.arm(FaultPlan::seeded(seed));
    let (_, _, err, _) = run_script(&mut sim, s1, &st);
    assert!(err.is_none(), "{name}: uncut run failed: {err:?}");
    let n1 = sim.ops_since_arm();
    let mut rep = Report::default();
    let spread = |n: u64, k: u64| -> Vec<u64> {
        let mut v: Vec<u64> = (1..=k).map(|i| (n * i / k).max(1)).collect();
        v.dedup();
        v
    };
    let mut a = 1;
    while a <= n1 {
        let kind = KINDS[a as usize % KINDS.len()];
        let tag = format!("{name} seed {seed} cut {a}/{kind:?}");
        let mut s = base_sim.clone();
        s.arm(FaultPlan::seeded(seed ^ a).with_cut(a, kind));
        let (cur, intent, err, _) = run_script(&mut s, s1, &st);
        a += stride;
        match &err {
            Some(e) if power_loss(e) || !s.is_powered() => {}
            Some(e) => {
                rep.failures
                    .push(format!("{tag}: error without a cut: {e:?}"));
                continue;
            }
            None => continue,
        }
        s.cut_power();
        s.power_on();
        s.disarm();
        let m = {
            let mut p = s.clone();
            p.arm(FaultPlan::seeded(1));
            let _ = vol(&mut p).mount();
            p.ops_since_arm()
        };
        for k in spread(m, rec) {
            let tag = format!("{tag} + recovery cut {k}/{m}");
            let mut s1c = s.clone();
            s1c.arm(FaultPlan::seeded(k).with_cut(k, kind));
            let _ = vol(&mut s1c).mount();
            s1c.cut_power();
            s1c.power_on();
            s1c.disarm();
            // The state the double cut left, taken as the model (exactly).
            let st2 = {
                let mut fs = vol(&mut s1c);
                if let Err(e) = fs.mount() {
                    rep.runs += 1;
                    rep.failures.push(format!("{tag}: mount: {e:?}"));
                    continue;
                }
                let t = match observe(&mut fs) {
                    Ok(t) => t,
                    Err(e) => {
                        rep.runs += 1;
                        rep.failures.push(format!("{tag}: observe: {e:?}"));
                        continue;
                    }
                };
                let ok = matches(&t, &cur).is_ok()
                    || intent.as_ref().is_some_and(|i| matches(&t, i).is_ok());
                if !ok {
                    rep.runs += 1;
                    rep.failures.push(format!(
                        "{tag}: neither state: {:?}",
                        matches(&t, &cur).err()
                    ));
                    continue;
                }
                t.into_iter()
                    .map(|(p, n)| {
                        let x = match n {
                            Node::Dir => X::Dir,
                            Node::File(d) => X::F(d, crate::support::tree::Alt::No),
                        };
                        (p, x)
                    })
                    .collect::<crate::support::tree::St>()
            };
            // More work, cut at points spread over it.
            let mut u = s1c.clone();
            u.arm(FaultPlan::seeded(seed));
            let (_, _, err, _) = run_script(&mut u, s2, &st2);
            if let Some(e) = err {
                rep.runs += 1;
                rep.failures
                    .push(format!("{tag}: uncut second script: {e:?}"));
                continue;
            }
            let n2 = u.ops_since_arm();
            for b in spread(n2, later) {
                let kind2 = KINDS[(b + k) as usize % KINDS.len()];
                let mut w = s1c.clone();
                w.arm(FaultPlan::seeded(seed ^ b).with_cut(b, kind2));
                let (cur2, intent2, err2, _) = run_script(&mut w, s2, &st2);
                if let Some(e) = &err2 {
                    if !power_loss(e) && w.is_powered() {
                        rep.failures.push(format!("{tag}: second script: {e:?}"));
                        continue;
                    }
                }
                w.cut_power();
                w.power_on();
                w.disarm();
                rep.runs += 1;
                if let Err(e) = check_after(&mut w, &cur2, &intent2) {
                    rep.failures
                        .push(format!("{tag} + cut {b}/{n2}/{kind2:?} of more work: {e}"));
                }
            }
        }
    }
    println!(
        "{name} seed {seed}: {n1} programs/erases uncut, {} runs, {} failures",
        rep.runs,
        rep.failures.len()
    );
    rep
}

#[test]
fn s54_double_cut_then_more_work() {
    let t = std::time::Instant::now();
    let mut r = Report::default();
    for seed in [7u64, 8] {
        let s1 = rand_script(seed, 50);
        let s2 = rand_script(seed + 100, 30);
        r.add(chain("chain", &pre_rand, &s1, &s2, seed, 9, 3, 5));
    }
    println!("{:?}", t.elapsed());
    assert_report(r);
}

/// `check_after` for trees with thousands of files: the tree and sizes as there, then
/// the volume takes a change (a new file, an fsynced append to a few files) and
/// remounts with it.
fn light_check(sim: &mut crate::support::Sim, cur: &St, intent: &Option<St>) -> Result<(), String> {
    let mut fs = vol(sim);
    fs.mount().map_err(|e| format!("mount: {e:?}"))?;
    let t = observe(&mut fs).map_err(|e| format!("observe: {e:?}"))?;
    let r1 = matches(&t, cur);
    let r2 = intent.as_ref().map(|i| matches(&t, i));
    match (&r1, &r2) {
        (Ok(()), _) | (_, Some(Ok(()))) => {}
        (Err(a), None) => return Err(format!("state: {a}")),
        (Err(a), Some(Err(b))) => return Err(format!("neither state: before: {a}; after: {b}")),
    }
    let files: Vec<&String> = t
        .iter()
        .filter(|(_, n)| matches!(n, Node::File(_)))
        .map(|(k, _)| k)
        .collect();
    for k in files.iter().step_by(37) {
        let m = fs.metadata(k).map_err(|e| format!("metadata {k}: {e:?}"))?;
        let Some(Node::File(c)) = t.get(*k) else {
            unreachable!()
        };
        if m.size != c.len() as u64 {
            return Err(format!("{k}: metadata size {} vs {} read", m.size, c.len()));
        }
    }
    let some: Vec<String> = files.iter().step_by(97).map(|k| k.to_string()).collect();
    let probe = pattern(77, 300);
    let r: Result<(), Error<E>> = (|| {
        let f = fs.open("/__probe", create().truncate(true))?;
        fs.write(f, &probe)?;
        fs.close(f)?;
        for k in &some {
            let f = fs.open(k, OpenOptions::new().append(true))?;
            fs.write(f, b"+-")?;
            fs.fsync(f)?;
            fs.close(f)?;
        }
        fs.step(3)?;
        fs.unmount()
    })();
    r.map_err(|e| format!("not writable after the cut: {e:?}"))?;
    fs.mount().map_err(|e| format!("second mount: {e:?}"))?;
    let t2 = observe(&mut fs).map_err(|e| format!("observe 2: {e:?}"))?;
    if t2.get("/__probe") != Some(&Node::File(probe)) {
        return Err("the probe file was lost across a clean remount".into());
    }
    for k in &some {
        let Some(Node::File(c)) = t.get(k) else {
            unreachable!()
        };
        let mut w = c.clone();
        w.extend_from_slice(b"+-");
        if t2.get(k) != Some(&Node::File(w)) {
            return Err(format!("{k}: appended bytes lost across a clean remount"));
        }
    }
    Ok(())
}

/// A directory of `n` names (a third with 40 bytes), made directly (the model filled
/// in after), plus the random script's other directories and files.
fn big_base(n: u32, seed: u64) -> (crate::support::Sim, St) {
    let (mut sim, mut st) = base(&pre_rand, seed);
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    for i in 200..n {
        let p = nm(i);
        let d = if i % 3 == 0 {
            pattern(i, 40)
        } else {
            Vec::new()
        };
        let f = fs.open(&p, create()).unwrap();
        fs.write(f, &d).unwrap();
        fs.close(f).unwrap();
        st.insert(p, X::F(d, crate::support::tree::Alt::No));
    }
    fs.unmount().unwrap();
    drop(fs);
    (sim, st)
}

/// The random scripts (their creates in `/big` split its buckets, at deeper trie levels
/// here) over a directory of `n` names, cut at every `stride`-th program/erase.
fn big_sweep(n: u32, seed: u64, len: usize, stride: u64, kinds: &[CutKind]) -> Report {
    let (base_sim, st) = big_base(n, seed);
    let s = rand_script(seed, len);
    let cuts = crate::support::sweep::Cuts {
        seed,
        kinds,
        stride,
        recovery: false,
        noisy: false,
    };
    let name = format!("big {n}");
    let (rep, ops) = sweep_from(&base_sim, &st, &s, cuts, &name, &mut light_check);
    println!(
        "big {n} seed {seed}: {ops} programs/erases uncut, {} runs, {} failures",
        rep.runs,
        rep.failures.len()
    );
    rep
}

#[test]
fn s54_cut_random_scripts_in_a_2500_name_directory() {
    let t = std::time::Instant::now();
    let mut r = Report::default();
    r.add(big_sweep(2500, 21, 50, 2, &KINDS));
    println!("{:?}", t.elapsed());
    assert_report(r);
}

/// Double cuts then more work, over more seeds: `S54_SEEDS=a..b` (default 10..30); each
/// first cut at every 2nd program/erase, 4 recovery cuts, 8 cuts of the second script.
#[test]
#[ignore]
fn s54_double_cut_survey() {
    let seeds = std::env::var("S54_SEEDS").unwrap_or_else(|_| "10..30".into());
    let (a, b) = seeds.split_once("..").unwrap();
    let mut r = Report::default();
    for seed in a.parse::<u64>().unwrap()..b.parse().unwrap() {
        let s1 = rand_script(seed, 60);
        let s2 = rand_script(seed + 1000, 40);
        r.add(chain("chain", &pre_rand, &s1, &s2, seed, 2, 4, 8));
    }
    println!("survey: {} runs, {} failures", r.runs, r.failures.len());
    assert_report(r);
}

/// Large directories over more seeds: `S54_SEEDS=a..b` (default 50..60), 2,500 names
/// (`S54_NAMES`), every program/erase cut with the three kinds.
#[test]
#[ignore]
fn s54_large_directory_survey() {
    let seeds = std::env::var("S54_SEEDS").unwrap_or_else(|_| "50..60".into());
    let (a, b) = seeds.split_once("..").unwrap();
    let n: u32 = std::env::var("S54_NAMES").map_or(2500, |s| s.parse().unwrap());
    let mut r = Report::default();
    for seed in a.parse::<u64>().unwrap()..b.parse().unwrap() {
        r.add(big_sweep(n, seed, 60, 1, &KINDS));
    }
    println!("survey: {} runs, {} failures", r.runs, r.failures.len());
    assert_report(r);
}

/// Held: files written through the `std::io` view (sizes at the inline, sector and
/// page boundaries, seeks past the end, staged appends flushed with `Write::flush`),
/// the `Fs` dropped without unmount (staged records left in the log), then read back
/// after the mount through `Read::read_to_end`, `Seek` from the end and
/// `read_exact`, and through `embedded_io::Read` on a second mount after an unmount.
#[test]
fn s54_io_views_across_crash_and_remount() {
    use std::io::{Read, Seek, SeekFrom, Write};
    let mut sim = fresh(56);
    let mut want: Vec<(String, Vec<u8>)> = Vec::new();
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        for (i, &n) in SIZES.iter().enumerate() {
            let p = format!("/v{i}");
            let f = fs.open(&p, create()).unwrap();
            let mut v = fs.view(f);
            let data = pattern(i as u32, n);
            v.write_all(&data).unwrap();
            v.flush().unwrap();
            // A gap past the end, then a staged 64-byte append.
            let end = v.seek(SeekFrom::End(3)).unwrap();
            assert_eq!(end, n as u64 + 3);
            let tail = pattern(100 + i as u32, 64);
            v.write_all(&tail).unwrap();
            v.flush().unwrap();
            let mut w = data;
            w.extend_from_slice(&[0, 0, 0]);
            w.extend_from_slice(&tail);
            want.push((p, w));
            // Three left open (the table has four slots): the drop below is the cut.
            if ![1, 6, 9].contains(&i) {
                fs.close(f).unwrap();
            }
        }
        assert!(
            fs.staging_status().unwrap().staged_objects
                + fs.staging_status().unwrap().staged_inline
                > 0
        );
    }
    {
        let mut fs = vol(&mut sim);
        fs.mount().unwrap();
        for (p, w) in &want {
            let f = fs.open(p, OpenOptions::new().read(true)).unwrap();
            let mut v = fs.view(f);
            let mut got = Vec::new();
            v.read_to_end(&mut got).unwrap();
            assert_eq!(&got, w, "{p}");
            let back = v.seek(SeekFrom::End(-10)).unwrap();
            assert_eq!(back, w.len() as u64 - 10);
            let mut last = [0u8; 10];
            v.read_exact(&mut last).unwrap();
            assert_eq!(&last[..], &w[w.len() - 10..], "{p}");
            assert!(v.seek(SeekFrom::Current(-(w.len() as i64) - 1)).is_err());
            fs.close(f).unwrap();
        }
        fs.unmount().unwrap();
        fs.mount().unwrap();
        for (p, w) in &want {
            let f = fs.open(p, OpenOptions::new().read(true)).unwrap();
            let mut v = fs.view(f);
            let mut got = vec![0u8; w.len() + 5];
            let mut at = 0;
            loop {
                let n = embedded_io::Read::read(&mut v, &mut got[at..]).unwrap();
                if n == 0 {
                    break;
                }
                at += n;
            }
            assert_eq!(&got[..at], &w[..], "{p}");
            fs.close(f).unwrap();
        }
    }
}
