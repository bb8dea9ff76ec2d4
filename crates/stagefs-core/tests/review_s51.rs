//! Review s51: an independent attempt to break the file layer where earlier reviews did
//! not go (review s50's stated limits): volumes filled to capacity (filled until
//! `NoSpace`, then a little freed), where refusals and the space reserves are exercised
//! under power cuts; every handle of the table open at once (255, the largest table the
//! tests use) with staged records on several while the volume fills; and store shapes
//! other than the TINY default (512-byte metadata units, and a Micron MT29F1G01 cut down
//! to 40 blocks of 64 pages with its 128-byte spare area).
//!
//! Each scenario is a seeded script run on an image, cut at program/erase indexes with
//! every cut kind (and, for some, at each program/erase of the recovery mount, or with
//! pages left unstable by the cut). After each cut the volume is mounted and checked
//! against the model: every fsynced/closed byte as acknowledged, each namespace change
//! all or nothing, an unacknowledged byte only the durable one or one a write since put
//! there; an operation refused (`NoSpace`) changed nothing (read back at once, the
//! namespace and the refused handle's bytes, and after every later cut, since the model
//! never takes its change; a truncate-open rewrite refused at its write or close leaves
//! the old contents exactly); the volume mounts writable (not read-only: the part is
//! healthy), a remove works and after it a small inline file and a 2 KiB file are
//! written and survive a remount. A remove or rmdir refused `NoSpace` fails the run.
//! Scripts end either with closes or with an unmount with files still open.
//!
//! The shared `support::sweep::cut_sweep` is not used: it mounts with `support::vol`
//! (one store shape, 4 handles) and carries errors, where these sweeps need three store
//! shapes, 255 handles and refusals the model takes.
//!
//! Finding (one, `s51_finding_torn_erase_costs_a_block_on_64_page_blocks`; fixed in
//! stop 51): on a healthy part with 64-page blocks a `Torn(Random)` cut of an erase
//! left the block `Bad` after the next mount, a block of capacity lost to a power cut;
//! on a full volume every write was then refused `NoSpace` (writable, not read-only)
//! until about a block of files was removed. TINY (16-page blocks) never showed it in
//! any sweep. The erase was a block's first since format, whose erases oftl did not
//! count, so the random bits the cut left in its marker bytes counted as a factory
//! marker; format's erases now count (`oftl::Config::for_image` keeps the old rule for
//! factory images).
//!
//! Held otherwise (no failure): TINY survey, 8 seeds of 60 calls, 97,278 cut runs (every
//! cut kind at every program/erase, two seeds also with recovery cuts and noisy pages);
//! 255 handles on TINY, one seed of 60 calls (4,834 programs/erases), every cut kind at
//! every one: 14,502 cut runs; the gauntlet survey on TINY and the 512-byte-unit TINY
//! store, 89,613 cut runs (see its test); the normal tests below (about 9,000 runs). Refusals met under the cuts: write, fsync, close (so the
//! truncate-open and tainted paths), mkdir, step, sync and unmount; never remove, rmdir,
//! rename or truncate (renames over files and truncates succeeded on full volumes).
//! Not covered: parts with factory or grown bad blocks or failing programs/erases near
//! full; more than one seed of TINY with 255 handles at every cut (a seed takes about
//! 25 minutes); the 512-byte and Micron shapes' random-script surveys (time); wear-out.
//!
//! Run: `cargo test --release -p stagefs-core --test all review_s51:: -- --test-threads=1`
//! (the surveys: `-- --ignored`, see each).

use crate::support::{pattern, Rng, Sim};

use std::collections::BTreeMap;
use std::rc::Rc;

use nand_hal::sim::{profile, CutKind, FaultConfig, FaultPlan, SimError, SimNand, TornMode};
use oftl::{Config, Greedy, Oftl};
use stagefs_core::oracle::{observe, power_loss, Node, Tree};
use stagefs_core::{Error, File, Fs, Kind, OpenOptions, SeekFrom, Store, Tuning};

type E = SimError;

// ---------------------------------------------------------------------------------
// Store shapes
// ---------------------------------------------------------------------------------

trait Shape {
    type St<'a>: Store<FlashError = E>;
    const NAME: &'static str;
    fn sim(seed: u64) -> Sim;
    fn store(sim: &mut Sim) -> Self::St<'_>;
    fn powered(st: &Self::St<'_>) -> bool;
    /// Valid pages over the store's capacity, in percent.
    fn fill(st: &Self::St<'_>) -> f64;
}

macro_rules! shape {
    ($t:ident, $name:expr, $store:ty, $profile:expr, $window:expr) => {
        struct $t;
        impl Shape for $t {
            type St<'a> = $store;
            const NAME: &'static str = $name;
            fn sim(seed: u64) -> Sim {
                SimNand::heap($profile, FaultPlan::seeded(seed))
            }
            fn store(sim: &mut Sim) -> Self::St<'_> {
                let cfg = Config {
                    window_blocks: $window,
                    format_id: 51,
                    ..Default::default()
                };
                Oftl::new(sim, cfg, Greedy::DEFAULT)
            }
            fn powered(st: &Self::St<'_>) -> bool {
                st.flash().is_powered()
            }
            fn fill(st: &Self::St<'_>) -> f64 {
                100.0 * st.used_pages() as f64 / st.capacity_pages() as f64
            }
        }
    };
}

shape!(
    Tiny,
    "tiny",
    Oftl<&'a mut Sim, 2048, 64, 4>,
    profile::TINY,
    6
);
shape!(
    TinySmall,
    "tiny/meta512",
    Oftl<&'a mut Sim, 2048, 64, 4, 1, Greedy, 512>,
    profile::TINY,
    6
);
shape!(
    Micron,
    "mt29f1g01x40/meta512",
    Oftl<&'a mut Sim, 2048, 64, 4, 1, Greedy, 512>,
    profile::MT29F1G01.with_blocks_per_die(40),
    5
);

type V<'a, S, const H: usize> = Fs<<S as Shape>::St<'a>, 2048, H>;

fn volume<S: Shape, const H: usize>(sim: &mut Sim) -> Box<V<'_, S, H>> {
    Box::new(Fs::new(S::store(sim)))
}

// ---------------------------------------------------------------------------------
// Model
// ---------------------------------------------------------------------------------

/// A file the scripts write: durable contents, states written since (each byte of a
/// read may come from any), the contents a truncate-open holds back until its commit,
/// and whether a close failed (its unacknowledged bytes then stay possible for good:
/// the script never writes it again).
#[derive(Clone, Debug, Default, PartialEq)]
struct F {
    d: B,
    ws: Vec<B>,
    hidden: Option<B>,
    tainted: bool,
}

/// File contents, shared between the model's states (cloned at every call).
type B = Rc<Vec<u8>>;

impl F {
    fn w(&self) -> &B {
        self.hidden.as_ref().or(self.ws.last()).unwrap_or(&self.d)
    }
    fn file(d: Vec<u8>) -> X {
        X::F(F {
            d: Rc::new(d),
            ..F::default()
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
enum X {
    Dir,
    /// A fill file (`pattern(seed, len)`), only removed, renamed and renamed over.
    Fill(u32, usize),
    F(F),
}

type St = BTreeMap<String, X>;

fn fmut<'s>(st: &'s mut St, p: &str) -> &'s mut F {
    match st.get_mut(p) {
        Some(X::F(f)) => f,
        x => panic!("{p}: not a tracked file: {x:?}"),
    }
}

fn durable(st: &mut St, p: &str) {
    let x = fmut(st, p);
    x.d = x.w().clone();
    x.ws.clear();
    x.hidden = None;
}

fn renamed(st: &mut St, from: &str, to: &str) {
    let sub = |k: &str, p: &str| k == p || k.starts_with(&format!("{p}/"));
    let moved: Vec<(String, X)> = st
        .iter()
        .filter(|(k, _)| sub(k, from))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    st.retain(|k, _| !sub(k, from) && !sub(k, to));
    for (k, v) in moved {
        st.insert(format!("{to}{}", &k[from.len()..]), v);
    }
}

fn file_ok(c: &[u8], f: &F) -> bool {
    if f.ws.is_empty() {
        return c == &f.d[..];
    }
    let lens = f.ws.iter().map(|w| w.len()).chain([f.d.len()]);
    let (lo, hi) = (lens.clone().min().unwrap(), lens.max().unwrap());
    c.len() >= lo
        && c.len() <= hi
        && c.iter()
            .enumerate()
            .all(|(i, b)| f.d.get(i) == Some(b) || f.ws.iter().any(|w| w.get(i) == Some(b)))
}

/// Whether the tree read back is `st` (files as `file_ok` allows).
fn matches(t: &Tree, st: &St) -> Result<(), String> {
    if let Some(k) = t.keys().find(|k| !st.contains_key(*k)) {
        return Err(format!("extra {k}"));
    }
    for (k, x) in st {
        let ok = match (x, t.get(k)) {
            (_, None) => return Err(format!("missing {k}")),
            (X::Dir, Some(Node::Dir)) => true,
            (X::Fill(s, n), Some(Node::File(c))) => *c == pattern(*s, *n),
            (X::F(f), Some(Node::File(c))) => file_ok(c, f),
            _ => false,
        };
        if !ok {
            let got = match &t[k] {
                Node::File(c) => format!("{} bytes", c.len()),
                Node::Dir => "a directory".into(),
            };
            return Err(format!("{k}: read {got}, expected {x:?}", x = short(x)));
        }
    }
    Ok(())
}

fn short(x: &X) -> String {
    match x {
        X::F(f) => format!(
            "durable {} B, written since {:?}, hidden {:?}, tainted {}",
            f.d.len(),
            f.ws.iter().map(|w| w.len()).collect::<Vec<_>>(),
            f.hidden.as_ref().map(|w| w.len()),
            f.tainted
        ),
        x => format!("{x:?}"),
    }
}

// ---------------------------------------------------------------------------------
// Running calls against the model
// ---------------------------------------------------------------------------------

/// Why a script stopped.
#[derive(Debug)]
enum Stop {
    /// The power cut (or a call failing after it).
    Cut,
    /// An outcome the guarantees exclude, with the power on.
    Bad(String),
}

struct Ctx<'f, 'a, S: Shape, const H: usize> {
    fs: &'f mut V<'a, S, H>,
    cur: St,
    intent: Option<St>,
    /// The uncut run: the namespace is read back after every refusal.
    verify: bool,
    /// Refusals by call.
    refused: BTreeMap<&'static str, u32>,
    calls: u32,
}

impl<'a, S: Shape, const H: usize> Ctx<'_, 'a, S, H> {
    /// Runs `call` with `change` as its effect: `Ok(None)` when refused with `NoSpace`
    /// (the model then takes `refusal` instead, and the namespace is read back to see
    /// that it did not change; every run does it, so cut runs replay the uncut run's
    /// reads too). A remove or rmdir refused `NoSpace` is a failure (a dead end: they
    /// are how a full volume makes room).
    fn op<T>(
        &mut self,
        what: &'static str,
        call: impl FnOnce(&mut V<'a, S, H>) -> Result<T, Error<E>>,
        change: impl FnOnce(&mut St),
        refusal: impl FnOnce(&mut St),
    ) -> Result<Option<T>, Stop> {
        let mut next = self.cur.clone();
        change(&mut next);
        self.intent = Some(next);
        self.calls += 1;
        let r = call(self.fs);
        if std::env::var_os("S51_TRACE").is_some() {
            eprintln!("  call {} {what}: {:?}", self.calls, r.as_ref().map(|_| ()));
        }
        match r {
            Ok(v) => {
                self.cur = self.intent.take().unwrap();
                Ok(Some(v))
            }
            Err(e) if power_loss(&e) || !S::powered(self.fs.store()) => Err(Stop::Cut),
            Err(Error::NoSpace) if what == "remove" || what == "rmdir" => Err(Stop::Bad(format!(
                "{what} refused NoSpace (call {}): a full volume's dead end",
                self.calls
            ))),
            Err(Error::NoSpace) => {
                self.intent = None;
                refusal(&mut self.cur);
                *self.refused.entry(what).or_default() += 1;
                if self.verify {
                    self.namespace_unchanged(what)?;
                }
                Ok(None)
            }
            Err(e) => Err(Stop::Bad(format!("{what} (call {}): {e:?}", self.calls))),
        }
    }

    /// After a refusal: the names, kinds and (for closed files with nothing in
    /// doubt) sizes are the model's.
    fn namespace_unchanged(&mut self, what: &str) -> Result<(), Stop> {
        let mut seen = BTreeMap::new();
        let mut dirs = vec![String::new()];
        let r: Result<(), Error<E>> = (|| {
            while let Some(d) = dirs.pop() {
                let path = if d.is_empty() { "/".into() } else { d.clone() };
                for e in self.fs.read_dir(&path)? {
                    let e = e?;
                    let p = format!("{d}/{}", e.name());
                    if e.kind == Kind::Dir {
                        dirs.push(p.clone());
                    }
                    seen.insert(p, e.kind);
                }
            }
            Ok(())
        })();
        let cut = |e: &Error<E>, fs: &V<'a, S, H>| power_loss(e) || !S::powered(fs.store());
        if let Err(e) = r {
            return Err(if cut(&e, self.fs) {
                Stop::Cut
            } else {
                Stop::Bad(format!("after refused {what}: read_dir: {e:?}"))
            });
        }
        let want: BTreeMap<String, Kind> = self
            .cur
            .iter()
            .map(|(k, x)| (k.clone(), if *x == X::Dir { Kind::Dir } else { Kind::File }))
            .collect();
        if seen != want {
            let extra: Vec<_> = seen.keys().filter(|k| !want.contains_key(*k)).collect();
            let gone: Vec<_> = want.keys().filter(|k| !seen.contains_key(*k)).collect();
            return Err(Stop::Bad(format!(
                "refused {what} changed the namespace: extra {extra:?}, missing {gone:?}"
            )));
        }
        for (k, x) in &self.cur {
            let len = match x {
                X::Fill(_, n) => *n,
                X::F(f) if f.ws.is_empty() && f.hidden.is_none() => f.d.len(),
                _ => continue,
            };
            let m = self.fs.metadata(k).map(|m| m.size);
            if m.as_ref().is_err_and(|e| cut(e, self.fs)) {
                return Err(Stop::Cut);
            }
            if m != Ok(len as u64) {
                return Err(Stop::Bad(format!(
                    "after refused {what}: {k} metadata {m:?}, expected {len} bytes"
                )));
            }
        }
        Ok(())
    }

    /// After a refused call on an open file: the handle reads exactly what the
    /// model says it holds (the refusal changed nothing in it either).
    fn handle_unchanged(&mut self, f: File, p: &str, what: &str) -> Result<(), Stop> {
        let want = match &self.cur[p] {
            X::F(x) => x.w().clone(),
            x => panic!("{p}: {x:?}"),
        };
        let mut got = Vec::new();
        let r: Result<(), Error<E>> = (|| {
            self.fs.seek(f, SeekFrom::Start(0))?;
            let mut buf = [0u8; 1024];
            loop {
                let n = self.fs.read(f, &mut buf)?;
                if n == 0 {
                    return Ok(());
                }
                got.extend_from_slice(&buf[..n]);
            }
        })();
        match r {
            Err(e) if power_loss(&e) || !S::powered(self.fs.store()) => Err(Stop::Cut),
            Err(e) => Err(Stop::Bad(format!("after refused {what}: read {p}: {e:?}"))),
            Ok(()) if got != *want => {
                let first = (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i));
                Err(Stop::Bad(format!(
                    "after refused {what}: {p} reads {} bytes through its handle, \
                     model {} (first difference at {first:?})",
                    got.len(),
                    want.len()
                )))
            }
            Ok(()) => Ok(()),
        }
    }

    fn mkdir(&mut self, p: &str) -> Result<bool, Stop> {
        let ins = |st: &mut St| drop(st.insert(p.into(), X::Dir));
        Ok(self
            .op("mkdir", |fs| fs.create_dir(p), ins, |_| {})?
            .is_some())
    }
    fn rmdir(&mut self, p: &str) -> Result<bool, Stop> {
        let rm = |st: &mut St| drop(st.remove(p));
        Ok(self
            .op("rmdir", |fs| fs.remove_dir(p), rm, |_| {})?
            .is_some())
    }
    fn remove(&mut self, p: &str) -> Result<bool, Stop> {
        let rm = |st: &mut St| drop(st.remove(p));
        Ok(self.op("remove", |fs| fs.remove(p), rm, |_| {})?.is_some())
    }
    fn rename(&mut self, a: &str, b: &str) -> Result<bool, Stop> {
        let mv = |st: &mut St| renamed(st, a, b);
        Ok(self
            .op("rename", |fs| fs.rename(a, b), mv, |_| {})?
            .is_some())
    }
    /// Opens a tracked file (no truncate).
    fn open(&mut self, p: &str, o: OpenOptions) -> Result<Option<File>, Stop> {
        self.op("open", |fs| fs.open(p, o), |_| {}, |_| {})
    }
    fn write(&mut self, f: File, p: &str, at: usize, data: &[u8]) -> Result<bool, Stop> {
        let w = |st: &mut St| {
            let x = fmut(st, p);
            let mut w = x.w().to_vec();
            if w.len() < at + data.len() {
                w.resize(at + data.len(), 0);
            }
            w[at..at + data.len()].copy_from_slice(data);
            let w = Rc::new(w);
            match &mut x.hidden {
                Some(h) => *h = w,
                None => x.ws.push(w),
            }
        };
        let call = |fs: &mut V<'a, S, H>| {
            fs.seek(f, SeekFrom::Start(at as u64))?;
            assert_eq!(fs.write(f, data)?, data.len(), "short write");
            Ok(())
        };
        let done = self.op("write", call, w, |_| {})?.is_some();
        if !done && self.verify {
            self.handle_unchanged(f, p, "write")?;
        }
        Ok(done)
    }
    fn fsync(&mut self, f: File, p: &str) -> Result<bool, Stop> {
        let d = |st: &mut St| durable(st, p);
        let done = self.op("fsync", |fs| fs.fsync(f), d, |_| {})?.is_some();
        if !done && self.verify {
            self.handle_unchanged(f, p, "fsync")?;
        }
        Ok(done)
    }
    /// Closes; a refused close leaves a truncate-open's old contents exactly, anything
    /// else with its unacknowledged bytes possible for good.
    fn close(&mut self, f: File, p: &str) -> Result<bool, Stop> {
        let d = |st: &mut St| durable(st, p);
        let refused = |st: &mut St| {
            let x = fmut(st, p);
            if x.hidden.take().is_none() && !x.ws.is_empty() {
                x.tainted = true;
            }
        };
        Ok(self.op("close", |fs| fs.close(f), d, refused)?.is_some())
    }
    /// Unmounts with the files `open` still open (each closed by the unmount); a
    /// refusal (a close refused, reported; the rest as after a power cut) leaves them
    /// as a refused close does. The volume is not mounted afterwards.
    fn unmount(&mut self, open: &[String]) -> Result<bool, Stop> {
        let d = |st: &mut St| open.iter().for_each(|p| durable(st, p));
        let refused = |st: &mut St| {
            for p in open {
                let x = fmut(st, p);
                assert!(x.hidden.is_none());
                x.tainted |= !x.ws.is_empty();
            }
        };
        self.verify = false;
        Ok(self.op("unmount", |fs| fs.unmount(), d, refused)?.is_some())
    }
    fn truncate(&mut self, f: File, p: &str, size: usize) -> Result<bool, Stop> {
        let t = |st: &mut St| {
            let x = fmut(st, p);
            let mut w = x.w().to_vec();
            w.resize(size, 0);
            x.d = Rc::new(w);
            x.ws.clear();
        };
        let call = |fs: &mut V<'a, S, H>| fs.truncate(f, size as u64);
        let done = self.op("truncate", call, t, |_| {})?.is_some();
        if !done && self.verify {
            self.handle_unchanged(f, p, "truncate")?;
        }
        Ok(done)
    }
    /// Open with create + truncate, write, close: on any refusal the file is as it was
    /// (a new file: created empty, its creation durable at the open).
    fn put(&mut self, p: &str, data: &[u8]) -> Result<bool, Stop> {
        let o = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true);
        let opened = |st: &mut St| {
            let x = st.entry(p.into()).or_insert_with(|| F::file(Vec::new()));
            if let X::Fill(s, n) = x {
                *x = F::file(pattern(*s, *n));
            }
            fmut(st, p).hidden = Some(Rc::new(Vec::new()));
        };
        let Some(f) = self.op("put-open", |fs| fs.open(p, o), opened, |_| {})? else {
            return Ok(false);
        };
        let wrote = self.write(f, p, 0, data)?;
        Ok(self.close(f, p)? && wrote)
    }
    fn step(&mut self, budget: u32) -> Result<bool, Stop> {
        Ok(self
            .op("step", |fs| fs.step(budget), |_| {}, |_| {})?
            .is_some())
    }
    fn sync(&mut self) -> Result<bool, Stop> {
        Ok(self.op("sync", |fs| fs.sync(), |_| {}, |_| {})?.is_some())
    }
    fn len_of(&self, p: &str) -> usize {
        match &self.cur[p] {
            X::F(f) => f.w().len(),
            x => panic!("{p}: {x:?}"),
        }
    }
    fn paths(&self, f: impl Fn(&str, &X) -> bool) -> Vec<String> {
        self.cur
            .iter()
            .filter(|(k, x)| f(k, x))
            .map(|(k, _)| k.clone())
            .collect()
    }
}

// ---------------------------------------------------------------------------------
// Images: a volume filled to capacity
// ---------------------------------------------------------------------------------

/// Formats and fills the volume with files of 0.3 to 9 KiB in `/f0`..`/f7` until
/// `NoSpace` keeps coming (smaller files tried after each refusal), then removes fill
/// files until `free` percent of the capacity is free again (at least one). `prep`
/// runs first (tracked files). Returns the image (unmounted), the model and the fill
/// level (percent of capacity) before and after the freeing.
fn filled<S: Shape>(
    seed: u64,
    free: f64,
    prep: &dyn Fn(&mut Ctx<'_, '_, S, 4>) -> Result<(), Stop>,
) -> (Sim, St, (f64, f64)) {
    let mut sim = S::sim(seed);
    let mut fs = volume::<S, 4>(&mut sim);
    fs.format().unwrap();
    let mut c = Ctx {
        fs: &mut fs,
        cur: St::new(),
        intent: None,
        verify: true,
        refused: BTreeMap::new(),
        calls: 0,
    };
    prep(&mut c).unwrap();
    for d in 0..8 {
        assert!(c.mkdir(&format!("/f{d}")).unwrap());
    }
    let mut rng = Rng(seed | 1);
    let (mut misses, mut i) = (0, 0u32);
    while misses < 6 {
        i += 1;
        let sizes = [300usize, 1200, 2048, 3500, 6000, 9000];
        let n = sizes[rng.below(sizes.len() as u64 - misses.min(4)) as usize];
        let p = format!("/f{}/n{i:04}", i % 8);
        let ok = c.put(&p, &pattern(i, n)).unwrap();
        misses = if ok { 0 } else { misses + 1 };
        // Fill files are checked as patterns (the model keeps no copy of their bytes).
        if let Some(X::F(f)) = c.cur.get(&p) {
            assert!(f.ws.is_empty() && f.hidden.is_none() && !f.tainted);
            let len = f.d.len();
            assert!(len == 0 || len == n);
            c.cur.insert(p, X::Fill(i, len));
        }
    }
    let full = S::fill(c.fs.store());
    let mut fills = c.paths(|_, x| matches!(x, X::Fill(..)));
    loop {
        let k = rng.below(fills.len() as u64) as usize;
        assert!(c.remove(&fills.swap_remove(k)).unwrap(), "remove refused");
        if S::fill(c.fs.store()) <= full - free {
            break;
        }
    }
    let after = S::fill(c.fs.store());
    let st = c.cur.clone();
    fs.unmount().unwrap();
    drop(fs);
    (sim, st, (full, after))
}

// ---------------------------------------------------------------------------------
// The check after a cut
// ---------------------------------------------------------------------------------

/// Mounts and checks the tree against `cur` or `intent`; then that the volume is not
/// stuck: writable, a remove works, and after it a small inline and a small object
/// file are written and read back after a remount.
fn check_after<S: Shape>(sim: &mut Sim, cur: &St, intent: &Option<St>) -> Result<(), String> {
    let mut fs = volume::<S, 4>(sim);
    fs.mount().map_err(|e| format!("mount: {e:?}"))?;
    if fs.read_only() {
        return Err("mounted read-only (a healthy part)".into());
    }
    let t = observe(&mut *fs).map_err(|e| format!("observe: {e:?}"))?;
    match (matches(&t, cur), intent.as_ref().map(|i| matches(&t, i))) {
        (Ok(()), _) | (_, Some(Ok(()))) => {}
        (Err(a), None) => return Err(format!("state: {a}")),
        (Err(a), Some(Err(b))) => return Err(format!("neither state: before: {a}; after: {b}")),
    }
    // The largest file goes; then small writes must be taken.
    let big = t
        .iter()
        .filter_map(|(k, n)| match n {
            Node::File(c) => Some((c.len(), k)),
            Node::Dir => None,
        })
        .max();
    if let Some((_, k)) = big {
        fs.remove(k).map_err(|e| format!("remove {k}: {e:?}"))?;
    }
    let (p, q) = (pattern(7, 100), pattern(8, 2100));
    let put = |fs: &mut V<'_, S, 4>, path: &str, d: &[u8]| -> Result<(), Error<E>> {
        let f = fs.open(path, OpenOptions::new().write(true).create(true))?;
        fs.write(f, d)?;
        fs.close(f)
    };
    put(&mut fs, "/_p", &p).map_err(|e| format!("small write after a remove: {e:?}"))?;
    put(&mut fs, "/_q", &q).map_err(|e| format!("2 KiB write after a remove: {e:?}"))?;
    fs.unmount().map_err(|e| format!("unmount: {e:?}"))?;
    fs.mount().map_err(|e| format!("second mount: {e:?}"))?;
    for (path, d) in [("/_p", &p), ("/_q", &q)] {
        let f = fs
            .open(path, OpenOptions::new().read(true))
            .map_err(|e| format!("{path}: {e:?}"))?;
        let mut got = vec![0u8; d.len() + 1];
        let n = fs.read(f, &mut got).map_err(|e| format!("{e:?}"))?;
        if got[..n] != d[..] {
            return Err(format!("{path} read back {n} bytes, not as written"));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// Sweeps
// ---------------------------------------------------------------------------------

type Script<'s, S, const H: usize> = &'s dyn Fn(&mut Ctx<'_, '_, S, H>) -> Result<(), Stop>;

/// What a script did uncut and under the cuts.
struct Run {
    cur: St,
    intent: Option<St>,
    stop: Option<Stop>,
    refused: BTreeMap<&'static str, u32>,
    fill: f64,
}

fn run<S: Shape, const H: usize>(
    sim: &mut Sim,
    st: &St,
    script: Script<'_, S, H>,
    verify: bool,
) -> Run {
    let mut fs = volume::<S, H>(sim);
    let mut out = Run {
        cur: st.clone(),
        intent: None,
        stop: None,
        refused: BTreeMap::new(),
        fill: 0.0,
    };
    if let Err(e) = fs.mount() {
        out.stop = Some(if power_loss(&e) || !S::powered(fs.store()) {
            Stop::Cut
        } else {
            Stop::Bad(format!("mount: {e:?}"))
        });
        return out;
    }
    let mut c = Ctx {
        fs: &mut fs,
        cur: st.clone(),
        intent: None,
        verify,
        refused: BTreeMap::new(),
        calls: 0,
    };
    let r = script(&mut c);
    out.fill = S::fill(c.fs.store());
    out.cur = c.cur;
    out.refused = c.refused;
    if let Err(s) = r {
        out.intent = c.intent;
        out.stop = Some(s);
    }
    out
}

#[derive(Default)]
struct Report {
    runs: u64,
    failures: Vec<String>,
    refused: BTreeMap<&'static str, u32>,
}

impl Report {
    fn assert_ok(&self, need_refusals: bool) {
        for f in self.failures.iter().take(10) {
            eprintln!("FAIL {f}");
        }
        assert!(
            self.failures.is_empty(),
            "{} failures in {} cut runs, first: {}",
            self.failures.len(),
            self.runs,
            self.failures[0]
        );
        if need_refusals {
            assert!(
                self.refused.values().sum::<u32>() > 0,
                "no call was refused: the scripts never met a full volume"
            );
        }
    }
}

pub const KINDS: [CutKind; 3] = [
    CutKind::Clean,
    CutKind::Torn(TornMode::Random),
    CutKind::Torn(TornMode::Prefix),
];

/// How a sweep cuts.
#[derive(Clone, Copy)]
struct Cuts<'k> {
    kinds: &'k [CutKind],
    /// Every `stride`-th program/erase (offset by the kind).
    stride: u64,
    /// Also cut the recovery mount after each cut at every `recovery`-th of its
    /// programs/erases (0: not).
    recovery: u64,
    noisy: bool,
}

/// Runs `script` on `base` uncut (it must finish, and the volume check after it), then
/// cut as `cuts` says; adds to `rep`.
fn sweep<S: Shape, const H: usize>(
    name: &str,
    base: &Sim,
    st: &St,
    script: Script<'_, S, H>,
    seed: u64,
    cuts: Cuts<'_>,
    rep: &mut Report,
) {
    let mut sim = base.clone();
    sim.arm(FaultPlan::seeded(seed));
    let uncut = run::<S, H>(&mut sim, st, script, true);
    if let Some(s) = &uncut.stop {
        rep.failures
            .push(format!("{name}: uncut run stopped: {s:?}"));
        return;
    }
    let n = sim.ops_since_arm();
    sim.cut_power();
    sim.power_on();
    sim.disarm();
    if let Err(e) = check_after::<S>(&mut sim, &uncut.cur, &None) {
        rep.failures.push(format!("{name}: uncut: {e}"));
    }
    for (k, v) in &uncut.refused {
        *rep.refused.entry(k).or_default() += v;
    }
    let faults = FaultConfig {
        unstable_after_cut: cuts.noisy,
        ..Default::default()
    };
    let mut runs = 0;
    for (ki, &kind) in cuts.kinds.iter().enumerate() {
        let mut at = 1 + (ki as u64 * 7) % cuts.stride;
        while at <= n {
            let plan = FaultPlan::seeded(seed ^ at.wrapping_mul(7919) ^ ki as u64)
                .with_cut(at, kind)
                .with_faults(faults);
            let mut sim = base.clone();
            sim.arm(plan);
            let r = run::<S, H>(&mut sim, st, script, true);
            runs += 1;
            let tag = format!(
                "{name} [{}] seed {seed} cut@{at}/{n} {kind:?}{}",
                S::NAME,
                if cuts.noisy { " noisy" } else { "" }
            );
            match &r.stop {
                Some(Stop::Bad(m)) => rep.failures.push(format!("{tag}: {m}")),
                None if sim.is_powered() => rep
                    .failures
                    .push(format!("{tag}: the run did not reach its cut")),
                _ => {}
            }
            sim.cut_power();
            sim.power_on();
            sim.disarm();
            if cuts.recovery > 0 {
                let mut probe = sim.clone();
                probe.arm(FaultPlan::seeded(1));
                let _ = volume::<S, 4>(&mut probe).mount();
                let m = probe.ops_since_arm();
                let mut k = 1 + at % cuts.recovery;
                while k <= m {
                    let mut s2 = sim.clone();
                    s2.arm(FaultPlan::seeded(k).with_cut(k, kind).with_faults(faults));
                    let _ = volume::<S, 4>(&mut s2).mount();
                    s2.cut_power();
                    s2.power_on();
                    s2.disarm();
                    runs += 1;
                    if let Err(e) = check_after::<S>(&mut s2, &r.cur, &r.intent) {
                        rep.failures
                            .push(format!("{tag} + recovery cut {k}/{m}: {e}"));
                    }
                    k += cuts.recovery;
                }
            }
            if let Err(e) = check_after::<S>(&mut sim, &r.cur, &r.intent) {
                eprintln!("FAIL {tag}: {e}");
                rep.failures.push(format!("{tag}: {e}"));
            }
            at += cuts.stride;
        }
    }
    rep.runs += runs;
    println!(
        "{name} [{}] seed {seed}: {n} programs/erases uncut, fill at end {:.1}%, \
         refused {:?}, {runs} cut runs, {} failures so far",
        S::NAME,
        uncut.fill,
        uncut.refused,
        rep.failures.len()
    );
}

// ---------------------------------------------------------------------------------
// Scripts
// ---------------------------------------------------------------------------------

fn chunk(k: u32, n: usize) -> Vec<u8> {
    pattern(5000 + k, n)
}

fn no_bypass<S: Shape, const H: usize>(c: &mut Ctx<'_, '_, S, H>) {
    c.fs.set_tuning(Tuning {
        staging: true,
        bypass: false,
    });
}

fn pick(rng: &mut Rng, v: &[String]) -> Option<String> {
    (!v.is_empty()).then(|| v[rng.below(v.len() as u64) as usize].clone())
}

/// The files the full-volume scripts open and write (made before the fill).
fn prep_tracked<S: Shape>(c: &mut Ctx<'_, '_, S, 4>) -> Result<(), Stop> {
    c.mkdir("/w")?;
    for (i, n) in [900usize, 3000, 200, 5000].into_iter().enumerate() {
        assert!(c.put(&format!("/w/t{i}"), &pattern(900 + i as u32, n))?);
    }
    Ok(())
}

/// A script drawn from `seed` on a full volume: writes (small, staged, and large ones
/// that run into `NoSpace`) at random offsets with fsyncs, truncates, closes, small
/// files put and rewritten (truncate-open), files renamed over others (fill files,
/// helpers, tracked files), removes, directories made, removed and renamed, steps
/// and syncs. Deterministic in `seed` and the outcomes, so each cut run replays the
/// uncut run's calls up to its cut.
fn full_script<S: Shape, const H: usize>(
    seed: u64,
    len: u32,
) -> impl Fn(&mut Ctx<'_, '_, S, H>) -> Result<(), Stop> {
    move |c| {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        if rng.below(3) != 0 {
            no_bypass(c);
        }
        let rw = OpenOptions::new().read(true).write(true);
        let mut open: Vec<(String, File)> = Vec::new();
        for k in 0..len {
            let closed = |c: &Ctx<'_, '_, S, H>, open: &[(String, File)], pre: &str| {
                c.paths(|p, x| {
                    p.starts_with(pre)
                        && matches!(x, X::F(f) if !f.tainted)
                        && !open.iter().any(|(q, _)| q == p)
                })
            };
            let fills = c.paths(|_, x| matches!(x, X::Fill(..)));
            let wdirs = c.paths(|p, x| *x == X::Dir && p.starts_with("/w/"));
            let r = rng.below(20);
            match r {
                0..=4 | 15 | 16 => {
                    if open.is_empty() || (rng.below(4) == 0 && open.len() < H.min(3)) {
                        if let Some(p) = pick(&mut rng, &closed(c, &open, "/w/t")) {
                            if let Some(f) = c.open(&p, rw)? {
                                open.push((p, f));
                            }
                        }
                        continue;
                    }
                    let (p, f) = open[rng.below(open.len() as u64) as usize].clone();
                    let len = c.len_of(&p);
                    let n = if r >= 15 || r == 4 {
                        1500 + rng.below(5000)
                    } else if rng.below(4) == 0 {
                        1 + rng.below(700)
                    } else {
                        1 + rng.below(90)
                    } as usize;
                    let at = match rng.below(4) {
                        0 | 1 => len,
                        2 => rng.below(len as u64 + 1) as usize,
                        _ => len + rng.below(300) as usize,
                    };
                    if at + n > 24_000 {
                        continue;
                    }
                    c.write(f, &p, at, &chunk(k, n))?;
                    if rng.below(4) != 0 {
                        c.fsync(f, &p)?;
                    }
                }
                5 => {
                    if let Some((p, f)) = pick_open(&mut rng, &open) {
                        let len = c.len_of(&p);
                        let sizes = [0, 255, 256, 257, 2048, len / 2, len + 500];
                        c.truncate(f, &p, sizes[rng.below(7) as usize])?;
                    }
                }
                6 => {
                    if !open.is_empty() {
                        let (p, f) = open.swap_remove(rng.below(open.len() as u64) as usize);
                        c.close(f, &p)?;
                    }
                }
                7 | 17 => {
                    // A helper file put (new or rewritten), or a tracked one rewritten.
                    let p = if r == 7 {
                        let mut d = vec!["/w".to_string()];
                        d.extend(wdirs.iter().cloned());
                        format!("{}/k{}", pick(&mut rng, &d).unwrap(), rng.below(4))
                    } else {
                        match pick(&mut rng, &closed(c, &open, "/w/t")) {
                            Some(p) => p,
                            None => continue,
                        }
                    };
                    if matches!(
                        c.cur.get(&p),
                        Some(X::Dir) | Some(X::F(F { tainted: true, .. }))
                    ) {
                        continue;
                    }
                    let sizes = [5usize, 120, 256, 257, 700, 2100, 6000];
                    c.put(&p, &chunk(k, sizes[rng.below(7) as usize]))?;
                }
                8 | 18 | 19 => {
                    // Renames over existing files: fill over fill, a helper over a
                    // closed tracked file, a fill file to a helper's name.
                    let helpers = closed(c, &open, "/w/k");
                    let (a, b) = match r {
                        8 => (pick(&mut rng, &fills), pick(&mut rng, &fills)),
                        18 => (
                            pick(&mut rng, &helpers),
                            pick(&mut rng, &closed(c, &open, "/w/t")),
                        ),
                        _ => (
                            pick(&mut rng, &fills),
                            Some(format!("/w/k{}", rng.below(4))),
                        ),
                    };
                    if let (Some(a), Some(b)) = (a, b) {
                        if a != b && c.cur.get(&b) != Some(&X::Dir) {
                            c.rename(&a, &b)?;
                        }
                    }
                }
                9 => {
                    let v = if rng.below(4) == 0 {
                        fills
                    } else {
                        closed(c, &open, "/w/k")
                    };
                    if let Some(p) = pick(&mut rng, &v) {
                        c.remove(&p)?;
                    }
                }
                10 => {
                    let parent = pick(&mut rng, &wdirs).unwrap_or_else(|| "/w".into());
                    c.mkdir(&format!("{parent}/d{k}"))?;
                }
                11 => {
                    let empty: Vec<String> = wdirs
                        .iter()
                        .filter(|d| !c.cur.keys().any(|k| k.starts_with(&format!("{d}/"))))
                        .cloned()
                        .collect();
                    if let Some(d) = pick(&mut rng, &empty) {
                        c.rmdir(&d)?;
                    }
                }
                12 => {
                    if let Some(d) = pick(&mut rng, &wdirs) {
                        c.rename(&d, &format!("/w/e{k}"))?;
                    }
                }
                13 => {
                    c.step([0, 1, 2, 4, 8][rng.below(5) as usize])?;
                }
                _ => {
                    if rng.below(3) == 0 {
                        c.sync()?;
                    } else if let Some((p, f)) = pick_open(&mut rng, &open) {
                        c.fsync(f, &p)?;
                    }
                }
            }
        }
        if rng.below(2) == 0 {
            let paths: Vec<String> = open.into_iter().map(|(p, _)| p).collect();
            c.unmount(&paths)?;
            return Ok(());
        }
        for (p, f) in open {
            c.close(f, &p)?;
        }
        Ok(())
    }
}

fn pick_open(rng: &mut Rng, open: &[(String, File)]) -> Option<(String, File)> {
    (!open.is_empty()).then(|| open[rng.below(open.len() as u64) as usize].clone())
}

/// Files for the every-handle scripts: `/h/x000`.. (the first eight with objects of
/// their own, the rest inline), made before the fill.
fn prep_handles<const H: usize, S: Shape>(c: &mut Ctx<'_, '_, S, 4>) -> Result<(), Stop> {
    c.mkdir("/h")?;
    for i in 0..H {
        let n = if i < 8 { 2500 } else { 10 + i % 40 };
        assert!(c.put(&format!("/h/x{i:03}"), &pattern(i as u32, n))?);
    }
    Ok(())
}

/// Every handle of the table open at once on the `/h` files, small fsynced appends
/// staged on several of them, while larger writes through the others fill the volume
/// (refused `NoSpace` once it is full) and fill files are removed or renamed over
/// others now and then; truncates, steps, a close and re-open; all closed at the end.
fn handles_script<S: Shape, const H: usize>(
    seed: u64,
    len: u32,
) -> impl Fn(&mut Ctx<'_, '_, S, H>) -> Result<(), Stop> {
    move |c| {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        no_bypass(c);
        let rw = OpenOptions::new().read(true).write(true);
        let mut open: Vec<Option<File>> = Vec::new();
        for i in 0..H {
            let f = c.open(&format!("/h/x{i:03}"), rw)?;
            open.push(Some(f.expect("open refused")));
        }
        // The table is full.
        let extra = c.fs.open("/h/x000", rw);
        if extra != Err(Error::TooManyOpen) {
            return Err(Stop::Bad(format!("open past the table: {extra:?}")));
        }
        for k in 0..len {
            let i = if rng.below(3) == 0 {
                rng.below(8)
            } else {
                rng.below(H as u64)
            } as usize;
            let p = format!("/h/x{i:03}");
            let fills = c.paths(|_, x| matches!(x, X::Fill(..)));
            match (rng.below(12), open[i]) {
                (0..=5, Some(f)) => {
                    let len = c.len_of(&p);
                    let n = if i < 8 {
                        1 + rng.below(64)
                    } else {
                        300 + rng.below(2700)
                    } as usize;
                    c.write(f, &p, len, &chunk(k, n))?;
                    if i < 8 || rng.below(2) == 0 {
                        c.fsync(f, &p)?;
                    }
                }
                (6, Some(f)) => {
                    // Small cuts (into staged records on the first eight).
                    let len = c.len_of(&p);
                    let cut = rng.below(len.min(200) as u64 + 1) as usize;
                    c.truncate(f, &p, len - cut)?;
                }
                (7, Some(f)) => {
                    open[i] = None;
                    c.close(f, &p)?;
                    if !matches!(c.cur[&p], X::F(F { tainted: true, .. })) {
                        open[i] = c.open(&p, rw)?;
                    }
                }
                (8, _) if rng.below(3) == 0 => {
                    if let Some(p) = pick(&mut rng, &fills) {
                        c.remove(&p)?;
                    }
                }
                (9, _) => {
                    if let (Some(a), Some(b)) = (pick(&mut rng, &fills), pick(&mut rng, &fills)) {
                        if a != b {
                            c.rename(&a, &b)?;
                        }
                    }
                }
                (10, _) => {
                    c.step([0, 1, 3][rng.below(3) as usize])?;
                }
                _ => {
                    if let Some(f) = open[i] {
                        c.fsync(f, &p)?;
                    }
                }
            }
        }
        if seed % 2 == 0 {
            let paths: Vec<String> = (0..H)
                .filter(|&i| open[i].is_some())
                .map(|i| format!("/h/x{i:03}"))
                .collect();
            c.unmount(&paths)?;
            return Ok(());
        }
        for (i, f) in open.into_iter().enumerate() {
            if let Some(f) = f {
                c.close(f, &format!("/h/x{i:03}"))?;
            }
        }
        Ok(())
    }
}

/// Every kind of call tried on a volume filled to the last page: staged appends on one
/// file while another is written until refused, then (full) a staged append and its
/// fsync, truncates into the staged records and past the end, a directory, a new
/// file, truncate-open rewrites of an inline and an object file, renames across
/// directories and over a fill file, a step and a sync, a close; then a remove and
/// the refused calls again.
fn gauntlet<S: Shape, const H: usize>(c: &mut Ctx<'_, '_, S, H>) -> Result<(), Stop> {
    no_bypass(c);
    let rw = OpenOptions::new().read(true).write(true);
    let (t0, t1) = ("/w/t0", "/w/t1");
    let f0 = c.open(t0, rw)?.expect("open");
    let f1 = c.open(t1, rw)?.expect("open");
    let append = |c: &mut Ctx<'_, '_, S, H>, f, p: &str, k: u32, n: usize| {
        let at = c.len_of(p);
        Ok::<_, Stop>(c.write(f, p, at, &chunk(k, n))? && c.fsync(f, p)?)
    };
    for k in 0..4 {
        append(c, f0, t0, k, 64)?;
    }
    for k in 10..60 {
        if !append(c, f1, t1, k, 4000)? {
            break;
        }
    }
    append(c, f0, t0, 70, 64)?;
    let n0 = c.len_of(t0);
    c.truncate(f0, t0, n0 - 10)?;
    let n1 = c.len_of(t1);
    c.truncate(f1, t1, n1 + 9000)?;
    append(c, f1, t1, 71, 5000)?;
    c.mkdir("/w/g")?;
    c.put("/w/kk", &chunk(72, 700))?;
    c.put("/w/t2", &chunk(73, 300))?;
    c.put("/w/t3", &chunk(74, 3000))?;
    c.rename("/w/t2", "/f1/moved")?;
    let fills = c.paths(|_, x| matches!(x, X::Fill(..)));
    c.rename(&fills[3], &fills[fills.len() - 3])?;
    c.step(4)?;
    c.sync()?;
    c.close(f1, t1)?;
    let fills = c.paths(|_, x| matches!(x, X::Fill(n, _) if *n % 3 == 0));
    c.remove(&fills[0])?;
    c.mkdir("/w/g2")?;
    c.put("/w/kk", &chunk(75, 700))?;
    append(c, f0, t0, 76, 64)?;
    c.close(f0, t0)?;
    Ok(())
}

fn gauntlet_sweep<S: Shape>(seed: u64, cuts: Cuts<'_>, rep: &mut Report) {
    let (base, st, (full, after)) = filled::<S>(seed, 0.0, &prep_tracked::<S>);
    println!(
        "[{}] gauntlet seed {seed}: filled to {full:.1}%, {after:.1}% after one remove",
        S::NAME
    );
    sweep::<S, 4>("gauntlet", &base, &st, &gauntlet::<S, 4>, seed, cuts, rep);
}

// ---------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------

/// The gauntlet on the three shapes, every cut kind at every 3rd (TINY), 13th and
/// 11th program/erase.
#[test]
fn s51_full_volume_gauntlet() {
    let mut rep = Report::default();
    gauntlet_sweep::<Tiny>(41, Cuts { stride: 3, ..EVERY }, &mut rep);
    gauntlet_sweep::<TinySmall>(
        42,
        Cuts {
            stride: 13,
            ..EVERY
        },
        &mut rep,
    );
    gauntlet_sweep::<Micron>(
        43,
        Cuts {
            stride: 11,
            ..EVERY
        },
        &mut rep,
    );
    rep.assert_ok(true);
}

fn full_sweeps<S: Shape>(seeds: std::ops::Range<u64>, len: u32, cuts: Cuts<'_>, rep: &mut Report) {
    for seed in seeds {
        let (base, st, (full, after)) = filled::<S>(seed, 1.5, &prep_tracked::<S>);
        println!(
            "[{}] seed {seed}: filled to {full:.1}% of capacity, {after:.1}% after the removes",
            S::NAME
        );
        let s = full_script::<S, 4>(seed, len);
        sweep::<S, 4>("full", &base, &st, &s, seed, cuts, rep);
    }
}

fn handles_sweep<S: Shape, const H: usize>(
    seed: u64,
    len: u32,
    free: f64,
    cuts: Cuts<'_>,
    rep: &mut Report,
) {
    let (base, st, (full, after)) = filled::<S>(seed, free, &prep_handles::<H, S>);
    println!(
        "[{}] handles {H} seed {seed}: filled to {full:.1}%, {after:.1}% after the removes",
        S::NAME
    );
    let s = handles_script::<S, H>(seed, len);
    sweep::<S, H>("handles", &base, &st, &s, seed, cuts, rep);
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

const EVERY: Cuts<'static> = Cuts {
    kinds: &KINDS,
    stride: 1,
    recovery: 0,
    noisy: false,
};

/// A random script on a full TINY volume, every cut kind at every 5th program/erase.
#[test]
fn s51_full_volume_random_scripts_tiny() {
    let mut rep = Report::default();
    let cuts = Cuts { stride: 5, ..EVERY };
    full_sweeps::<Tiny>(2..3, 40, cuts, &mut rep);
    rep.assert_ok(true);
}

/// The same with cuts in the recovery mount after each cut, and with pages left
/// unstable by the cut (every cut kind), each on its own seed.
#[test]
fn s51_full_volume_recovery_cuts_and_noisy() {
    let mut rep = Report::default();
    let rec = Cuts {
        kinds: &[CutKind::Torn(TornMode::Random)],
        stride: 67,
        recovery: 5,
        noisy: false,
    };
    full_sweeps::<Tiny>(5..6, 40, rec, &mut rep);
    let noisy = Cuts {
        stride: 37,
        noisy: true,
        ..EVERY
    };
    full_sweeps::<Tiny>(6..7, 40, noisy, &mut rep);
    rep.assert_ok(false);
}

/// Every one of 255 handles open at once, staged records on eight files, the volume
/// filled through the others (refused once full), cut at every 101st program/erase.
#[test]
fn s51_every_handle_open_while_filling() {
    let mut rep = Report::default();
    let cuts = Cuts {
        stride: 101,
        ..EVERY
    };
    handles_sweep::<Tiny, 255>(11, 120, 6.0, cuts, &mut rep);
    rep.assert_ok(true);
}

/// The full-volume scripts on the 512-byte metadata store (TINY) and on a Micron
/// MT29F1G01 cut down to 40 blocks of 64 pages (128-byte spare area); the handles
/// script with a 16-handle table on the latter.
#[test]
fn s51_other_shapes() {
    let mut rep = Report::default();
    let cuts = Cuts {
        stride: 37,
        ..EVERY
    };
    full_sweeps::<TinySmall>(21..22, 40, cuts, &mut rep);
    full_sweeps::<Micron>(
        31..32,
        40,
        Cuts {
            stride: 61,
            ..EVERY
        },
        &mut rep,
    );
    handles_sweep::<Micron, 16>(
        32,
        80,
        3.0,
        Cuts {
            stride: 61,
            ..EVERY
        },
        &mut rep,
    );
    rep.assert_ok(true);
}

/// The surveys: `S51_SHAPE=tiny|small|micron S51_SEEDS=n S51_FROM=k S51_LEN=calls
/// S51_HANDLES=1 cargo test --release -p stagefs-core --test all
/// review_s51::s51_survey -- --ignored --nocapture --test-threads=1`: every cut kind at
/// every program/erase; every fourth seed again with recovery cuts (torn, every third
/// program/erase of the mount at every fifth cut) and with noisy pages. Measured: see
/// the report at the end of this file's docs.
#[test]
#[ignore = "survey: minutes"]
fn s51_survey() {
    let (from, n, len) = (
        env("S51_FROM", 100),
        env("S51_SEEDS", 10),
        env("S51_LEN", 60),
    );
    let shape = std::env::var("S51_SHAPE").unwrap_or_else(|_| "tiny".into());
    let handles = std::env::var("S51_HANDLES").is_ok();
    let mut rep = Report::default();
    for seed in from..from + n {
        let extra = [
            Cuts {
                kinds: &[CutKind::Torn(TornMode::Random)],
                stride: 5,
                recovery: 3,
                noisy: false,
            },
            Cuts {
                noisy: true,
                ..EVERY
            },
        ];
        let plans: &[Cuts<'_>] = if seed % 4 == 0 { &extra } else { &[] };
        for &cuts in [EVERY].iter().chain(plans) {
            match (shape.as_str(), handles) {
                ("tiny", false) => full_sweeps::<Tiny>(seed..seed + 1, len as u32, cuts, &mut rep),
                ("small", false) => {
                    full_sweeps::<TinySmall>(seed..seed + 1, len as u32, cuts, &mut rep)
                }
                ("micron", false) => {
                    full_sweeps::<Micron>(seed..seed + 1, len as u32, cuts, &mut rep)
                }
                ("tiny", true) => handles_sweep::<Tiny, 255>(seed, len as u32, 6.0, cuts, &mut rep),
                ("small", true) => {
                    handles_sweep::<TinySmall, 255>(seed, len as u32, 6.0, cuts, &mut rep)
                }
                ("micron", true) => {
                    handles_sweep::<Micron, 16>(seed, len as u32, 3.0, cuts, &mut rep)
                }
                _ => panic!("S51_SHAPE: tiny, small or micron"),
            }
        }
    }
    println!(
        "survey {shape}{}: {} cut runs, {} failures, refusals {:?}",
        if handles { " handles" } else { "" },
        rep.runs,
        rep.failures.len(),
        rep.refused
    );
    rep.assert_ok(true);
}

/// The checker itself: a flipped durable byte, a byte no write put there, a length
/// past every written state, a lost or an extra file, a fill file's bytes changed,
/// and (on a real image) a model that differs from the volume in one file or one
/// directory are each rejected; the uncut image is accepted.
#[test]
fn s51_checker_rejects_corrupted_states() {
    let d = pattern(1, 100);
    let mut w = d.clone();
    w.resize(300, 0);
    w[290..].copy_from_slice(&pattern(2, 10));
    let mut st = St::new();
    st.insert(
        "/f".into(),
        X::F(F {
            d: Rc::new(d.clone()),
            ws: vec![Rc::new(w.clone())],
            ..F::default()
        }),
    );
    st.insert("/g".into(), X::Fill(3, 50));
    let tree = |c: Vec<u8>| {
        Tree::from([
            ("/f".to_string(), Node::File(c)),
            ("/g".to_string(), Node::File(pattern(3, 50))),
        ])
    };
    assert!(matches(&tree(d.clone()), &st).is_ok());
    assert!(matches(&tree(w.clone()), &st).is_ok());
    assert!(matches(&tree(w[..150].to_vec()), &st).is_ok());
    let mut bad = d.clone();
    bad[7] ^= 1;
    assert!(matches(&tree(bad), &st).is_err());
    let mut hole = w.clone();
    hole[150] = 0xAA;
    assert!(matches(&tree(hole), &st).is_err());
    let mut long = w.clone();
    long.push(0);
    assert!(matches(&tree(long), &st).is_err());
    assert!(matches(&tree(d[..99].to_vec()), &st).is_err());
    let mut t = tree(d.clone());
    t.insert("/g".into(), Node::File(pattern(4, 50)));
    assert!(matches(&t, &st).is_err());
    t.insert("/g".into(), Node::Dir);
    assert!(matches(&t, &st).is_err());
    t.remove("/g");
    assert!(matches(&t, &st).is_err());
    let mut t = tree(d.clone());
    t.insert("/h".into(), Node::Dir);
    assert!(matches(&t, &st).is_err());
    // End to end, on a full image.
    let (base, st, _) = filled::<Tiny>(77, 1.5, &prep_tracked::<Tiny>);
    assert!(check_after::<Tiny>(&mut base.clone(), &st, &None).is_ok());
    let mut one = st.clone();
    let fill = one.keys().find(|k| k.starts_with("/f0/")).unwrap().clone();
    if let Some(X::Fill(s, _)) = one.get_mut(&fill) {
        *s += 1;
    }
    let mut two = st.clone();
    two.remove("/f3");
    two.retain(|k, _| !k.starts_with("/f3/"));
    let mut three = st.clone();
    fmut(&mut three, "/w/t1").d = Rc::new(pattern(1, 3000));
    for m in [one, two, three] {
        let r = check_after::<Tiny>(&mut base.clone(), &m, &None);
        assert!(r.is_err(), "a wrong model was accepted");
        // ... also as the in-flight state beside a wrong acknowledged one.
        let r = check_after::<Tiny>(&mut base.clone(), &m, &Some(m.clone()));
        assert!(r.is_err());
    }
    // A refusal check that sees a namespace differing from the model fails.
    let mut sim = base.clone();
    let mut fs = volume::<Tiny, 4>(&mut sim);
    fs.mount().unwrap();
    let mut cur = st.clone();
    cur.insert("/w/ghost".into(), X::Dir);
    let mut c: Ctx<'_, '_, Tiny, 4> = Ctx {
        fs: &mut fs,
        cur,
        intent: None,
        verify: true,
        refused: BTreeMap::new(),
        calls: 0,
    };
    assert!(matches!(c.namespace_unchanged("test"), Err(Stop::Bad(_))));
    // ... and a handle that reads other than the model says.
    c.cur = st.clone();
    assert!(c.namespace_unchanged("test").is_ok());
    let f = c.open("/w/t1", OpenOptions::new().read(true).write(true));
    let f = f.unwrap().unwrap();
    assert!(c.handle_unchanged(f, "/w/t1", "test").is_ok());
    fmut(&mut c.cur, "/w/t1").d = Rc::new(pattern(1, 3000));
    assert!(matches!(
        c.handle_unchanged(f, "/w/t1", "test"),
        Err(Stop::Bad(_))
    ));
    drop(fs);
    // A part that takes no program or erase: the volume is stuck (refused at once or
    // after the remove), which the check must report.
    let mut sim = base.clone();
    let dead = FaultConfig {
        program_fail_ppm: 1_000_000,
        erase_fail_ppm: 1_000_000,
        ..Default::default()
    };
    sim.arm(FaultPlan::seeded(5).with_faults(dead));
    let r = check_after::<Tiny>(&mut sim, &st, &None);
    assert!(
        r.is_err(),
        "a part that programs nothing passed as writable"
    );
}

/// The gauntlet at every program/erase on the three shapes, again with recovery cuts
/// and with noisy pages: `cargo test --release -p stagefs-core --test all
/// review_s51::s51_gauntlet_survey -- --ignored --nocapture --test-threads=1`. It fails
/// with the finding (the Micron shape's torn-random cuts of erases, 6 of 1,197 runs on
/// its first pass); TINY: 1,965 runs at every cut and 19,854 with recovery cuts, the
/// 512-byte-unit TINY store 4,506 and 63,288: no failure.
#[test]
#[ignore = "survey: minutes"]
fn s51_gauntlet_survey() {
    let mut rep = Report::default();
    let rec = Cuts {
        kinds: &KINDS,
        stride: 4,
        recovery: 1,
        noisy: false,
    };
    let noisy = Cuts {
        noisy: true,
        ..EVERY
    };
    for cuts in [EVERY, rec, noisy] {
        gauntlet_sweep::<Tiny>(41, cuts, &mut rep);
        gauntlet_sweep::<TinySmall>(42, cuts, &mut rep);
        gauntlet_sweep::<Micron>(43, cuts, &mut rep);
    }
    println!(
        "gauntlet survey: {} cut runs, {} failures",
        rep.runs,
        rep.failures.len()
    );
    rep.assert_ok(true);
}

/// The gauntlet's calls and outcomes, uncut (`S51_TRACE=1 ... review_s51::s51_gauntlet_trace
/// -- --ignored --nocapture`).
#[test]
#[ignore = "a trace"]
fn s51_gauntlet_trace() {
    let mut rep = Report::default();
    let one = Cuts {
        stride: u64::MAX,
        ..EVERY
    };
    gauntlet_sweep::<Tiny>(41, one, &mut rep);
    rep.assert_ok(true);
}

/// FINDING (review s51, fixed in stop 51: format's erases count, see the module docs):
/// on a healthy part with 64-page blocks (a Micron MT29F1G01
/// cut down to 40 blocks, and a W25N01GV cut down to 40, both with 512-byte metadata
/// units; TINY's 16-page blocks never showed it), a torn power cut of kind
/// `Torn(Random)` at an erase (the cut runs that fail each end one erase further on)
/// leaves that block counted bad by the next mount (state `Bad`, no fault configured:
/// `FaultPlan::seeded` with rates all 0). The store loses a block of capacity: 512 ->
/// 448 pages with 506 in use, so on a full volume every write is refused `NoSpace`
/// for good, also after removing 9,000 B and then 5,000 B of files and after steps,
/// while the volume mounts writable (not read-only). Script: `filled::<Micron>(43, 0.0,
/// prep_tracked)` then the gauntlet (open `/w/t0` and `/w/t1`, 64-byte appends with
/// fsync on `/w/t0`), cut at program/erase 4 of the run with `Torn(Random)`, plan seed
/// `43 ^ 4 * 7919 ^ 1`. Expected: no block bad, and after the remove a 5-byte file is
/// written. Observed: block 33 bad, capacity 448 pages, `NoSpace`. The gauntlet survey
/// hits it at cuts 4, 17, 84, 242, 251 and 312 of 399 (seed 43; blocks 33, 35, 36, ...),
/// seed 44 at 4 of 318 torn-random cuts, the W25N01GV x40 part at 6 of 399.
#[test]
fn s51_finding_torn_erase_costs_a_block_on_64_page_blocks() {
    let (base, st, _) = filled::<Micron>(43, 0.0, &prep_tracked::<Micron>);
    let at = 4u64;
    let kind = CutKind::Torn(TornMode::Random);
    let counts = |cut: u64| {
        let mut sim = base.clone();
        let c0 = sim.counters();
        sim.arm(FaultPlan::seeded(43 ^ cut.wrapping_mul(7919) ^ 1).with_cut(cut, kind));
        let _ = run::<Micron, 4>(&mut sim, &st, &gauntlet::<Micron, 4>, true);
        let c = sim.counters();
        (c.programs - c0.programs, c.erases - c0.erases, sim)
    };
    let (p3, e3, _) = counts(at - 1);
    let (p4, e4, mut sim) = counts(at);
    println!(
        "programs/erases counted with the cut at {}: {p3}/{e3}; at {at}: {p4}/{e4}",
        at - 1
    );
    sim.cut_power();
    sim.power_on();
    sim.disarm();
    let mut fs = volume::<Micron, 4>(&mut sim);
    fs.mount().unwrap();
    let bad: Vec<usize> = fs
        .store()
        .blocks()
        .iter()
        .enumerate()
        .filter(|(_, b)| b.state() == oftl::BlockState::Bad)
        .map(|(i, _)| i)
        .collect();
    let cap = (fs.store().capacity_pages(), fs.store().used_pages());
    fs.remove("/w/t3").unwrap();
    let f = fs.open("/_p", OpenOptions::new().write(true).create(true));
    let put = f.and_then(|f| {
        fs.write(f, b"hello")?;
        fs.close(f)
    });
    assert_eq!(
        (bad.as_slice(), put),
        (&[][..], Ok(())),
        "a torn cut on a healthy part left blocks bad (capacity, used pages: {cap:?})"
    );
}
