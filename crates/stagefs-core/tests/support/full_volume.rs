//! The full-volume harness of reviews s51 and s52 (written for s51, extended for s52's
//! failing parts, shared since stop 53): store shapes (`Shape`, declared by each
//! review with `shape!`, which names its format id and rules, `Review`), parts with
//! factory and grown bad blocks (`Part`) and the store's census of its blocks; the
//! model (a tree of paths, each file with its durable contents, the states written
//! since and a truncate-open's held-back contents); a script context whose calls
//! change the model as they return, a refusal (`NoSpace`) checked at once to have
//! changed nothing; the fill of a volume to capacity; the sweep that runs a script
//! uncut and cut (with the review's check after each run); and the scripts both
//! reviews sweep (the full-volume script, every handle open, the gauntlet).

use std::collections::BTreeMap;
use std::rc::Rc;

use nand_hal::sim::{CutKind, FaultConfig, FaultPlan, Profile, SimError, SimNand};
use nand_hal::BlockAddr;
use oftl::ReadOnlyReason;
use stagefs_core::oracle::{power_loss, Node, Tree};
use stagefs_core::{Error, File, Fs, Kind, OpenOptions, SeekFrom, Store, Tuning};

use super::{pattern, Rng, Sim};

pub type E = SimError;

// ---------------------------------------------------------------------------------
// Parts and store shapes
// ---------------------------------------------------------------------------------

/// The part's own faults, placed at its creation and before the fill: factory bad
/// blocks, per-block endurance (0: none), and `grown` blocks whose next erase fails
/// (for good) and as many whose next program fails, armed after the format so they go
/// bad while the volume fills.
#[derive(Clone, Copy, Debug, Default)]
pub struct Part {
    pub factory_bad: u32,
    pub endurance: u32,
    pub grown: u32,
}

/// A part with no faults of its own.
pub const HEALTHY: Part = Part {
    factory_bad: 0,
    endurance: 0,
    grown: 0,
};

/// What the store says of its blocks: read-only reason, good blocks (neither bad nor
/// reserved), bad blocks, the shrink floor, capacity and use (pages).
#[derive(Clone, Copy, Debug)]
pub struct Census {
    pub ro: Option<ReadOnlyReason>,
    pub good: u32,
    pub bad: u32,
    pub min_good: u32,
    pub capacity: u64,
    pub used: u64,
    pub ppb: u64,
}

impl Census {
    /// More in use than the capacity less two blocks: grown bad blocks shrank it
    /// under (or to) the data, where the finding's refusals start.
    pub fn over_committed(&self) -> bool {
        self.bad > 0 && self.used + 2 * self.ppb > self.capacity
    }
    /// Whether read-only is what the part's state calls for: too few good blocks for
    /// the live data and the floors, no capacity, or the checkpoint blocks gone.
    pub fn genuinely_short(&self) -> bool {
        self.good < self.min_good
            || self.capacity == 0
            || self.ro == Some(ReadOnlyReason::CheckpointBlocks)
    }
}

/// What differs between the reviews that share this harness, named by each review's
/// shapes (`Shape::REVIEW`).
pub struct Review {
    /// The store's `Config::format_id`.
    pub format_id: u32,
    /// The environment variable that traces every call of the scripts.
    pub trace: &'static str,
    /// The part itself may fail (review s52: bad blocks, failure rates, wear): a call
    /// that fails with `Poisoned`, a flash error or `ReadOnly` (the volume turned
    /// read-only) ends the script as `Stop::Failed`, and a remove or rmdir refused
    /// `NoSpace` on an over-committed store is counted. Else (review s51: a healthy
    /// part) each is a failure (`Stop::Bad`).
    pub failing_part: bool,
}

/// A store shape: its part, its store type and configuration, and the review whose
/// rules it runs under (declared with `shape!`).
pub trait Shape {
    type St<'a>: Store<FlashError = E>;
    const NAME: &'static str;
    const PROFILE: Profile;
    const REVIEW: Review;
    fn store(sim: &mut Sim) -> Self::St<'_>;
    fn powered(st: &Self::St<'_>) -> bool;
    /// Valid pages over the store's capacity, in percent.
    fn fill(st: &Self::St<'_>) -> f64;
    fn census(st: &Self::St<'_>) -> Census;
    /// A part of the shape's profile, its faults seeded (`HEALTHY`: a perfect device).
    fn sim(seed: u64, part: Part) -> Sim {
        let faults = FaultConfig {
            factory_bad: part.factory_bad,
            endurance: part.endurance,
            ..FaultConfig::default()
        };
        SimNand::heap(Self::PROFILE, FaultPlan::seeded(seed).with_faults(faults))
    }
}

/// `shape!(Name, "name", store type, profile, window blocks, review)`: a `Shape` (the
/// store type written with `'a` and the review's `Sim`, e.g.
/// `Oftl<&'a mut Sim, 2048, 64, 4>`).
macro_rules! shape {
    ($t:ident, $name:expr, $store:ty, $profile:expr, $window:expr, $review:expr) => {
        struct $t;
        impl $crate::support::full_volume::Shape for $t {
            type St<'a> = $store;
            const NAME: &'static str = $name;
            const PROFILE: ::nand_hal::sim::Profile = $profile;
            const REVIEW: $crate::support::full_volume::Review = $review;
            fn store(sim: &mut $crate::support::Sim) -> Self::St<'_> {
                let cfg = ::oftl::Config {
                    window_blocks: $window,
                    format_id: Self::REVIEW.format_id,
                    ..Default::default()
                };
                ::oftl::Oftl::new(sim, cfg, ::oftl::Greedy::DEFAULT)
            }
            fn powered(st: &Self::St<'_>) -> bool {
                st.flash().is_powered()
            }
            fn fill(st: &Self::St<'_>) -> f64 {
                100.0 * st.used_pages() as f64 / st.capacity_pages().max(1) as f64
            }
            fn census(st: &Self::St<'_>) -> $crate::support::full_volume::Census {
                use ::oftl::BlockState;
                let b = st.blocks();
                $crate::support::full_volume::Census {
                    ro: match st.health() {
                        ::oftl::Health::ReadOnly(r) => Some(r),
                        _ => None,
                    },
                    good: b
                        .iter()
                        .filter(|b| !matches!(b.state(), BlockState::Bad | BlockState::Reserved))
                        .count() as u32,
                    bad: b.iter().filter(|b| b.state() == BlockState::Bad).count() as u32,
                    min_good: st.min_good_blocks(),
                    capacity: st.capacity_pages(),
                    used: st.used_pages(),
                    ppb: $profile.geometry.pages_per_block() as u64,
                }
            }
        }
    };
}
pub(crate) use shape;

pub type V<'a, S, const H: usize> = Fs<<S as Shape>::St<'a>, 2048, H>;

pub fn volume<S: Shape, const H: usize>(sim: &mut Sim) -> Box<V<'_, S, H>> {
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
pub struct F {
    pub d: B,
    pub ws: Vec<B>,
    pub hidden: Option<B>,
    pub tainted: bool,
}

/// File contents, shared between the model's states (cloned at every call).
pub type B = Rc<Vec<u8>>;

impl F {
    pub fn w(&self) -> &B {
        self.hidden.as_ref().or(self.ws.last()).unwrap_or(&self.d)
    }
    pub fn file(d: Vec<u8>) -> X {
        X::F(F {
            d: Rc::new(d),
            ..F::default()
        })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum X {
    Dir,
    /// A fill file (`pattern(seed, len)`), only removed, renamed and renamed over.
    Fill(u32, usize),
    F(F),
}

pub type St = BTreeMap<String, X>;

pub fn fmut<'s>(st: &'s mut St, p: &str) -> &'s mut F {
    match st.get_mut(p) {
        Some(X::F(f)) => f,
        x => panic!("{p}: not a tracked file: {x:?}"),
    }
}

pub fn durable(st: &mut St, p: &str) {
    let x = fmut(st, p);
    x.d = x.w().clone();
    x.ws.clear();
    x.hidden = None;
}

pub fn renamed(st: &mut St, from: &str, to: &str) {
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

pub fn file_ok(c: &[u8], f: &F) -> bool {
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
pub fn matches(t: &Tree, st: &St) -> Result<(), String> {
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

pub fn short(x: &X) -> String {
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
pub enum Stop {
    /// The power cut (or a call failing after it).
    Cut,
    /// A flash failure the volume reported (`Poisoned`, a flash error) or the volume
    /// turned read-only, where the review's part may fail: the script ends, the check
    /// after it remounts as after a cut.
    Failed(String),
    /// An outcome the guarantees exclude, with the power on.
    Bad(String),
}

pub struct Ctx<'f, 'a, S: Shape, const H: usize> {
    pub fs: &'f mut V<'a, S, H>,
    pub cur: St,
    pub intent: Option<St>,
    /// The uncut run: the namespace is read back after every refusal.
    pub verify: bool,
    /// Refusals by call.
    pub refused: BTreeMap<&'static str, u32>,
    pub calls: u32,
}

impl<'a, S: Shape, const H: usize> Ctx<'_, 'a, S, H> {
    /// Runs `call` with `change` as its effect: `Ok(None)` when refused with `NoSpace`
    /// (the model then takes `refusal` instead, and the namespace is read back to see
    /// that it did not change; every run does it, so cut runs replay the uncut run's
    /// reads too). A remove or rmdir refused `NoSpace` is a failure (a dead end: they
    /// are how a full volume makes room), unless the review's part may fail and grown
    /// bad blocks left the store over-committed (then counted); a failure of the part
    /// ends the script as `Stop::Failed` only where the review's part may fail
    /// (`Review::failing_part`).
    pub fn op<T>(
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
        let failing = S::REVIEW.failing_part;
        if std::env::var_os(S::REVIEW.trace).is_some() {
            eprintln!(
                "  call {} {what}: {:?} (programmed {})",
                self.calls,
                r.as_ref().map(|_| ()),
                self.fs.store().pages_programmed()
            );
        }
        match r {
            Ok(v) => {
                self.cur = self.intent.take().unwrap();
                Ok(Some(v))
            }
            Err(e) if power_loss(&e) || !S::powered(self.fs.store()) => Err(Stop::Cut),
            Err(Error::NoSpace)
                if (what == "remove" || what == "rmdir")
                    && !(failing && S::census(self.fs.store()).over_committed()) =>
            {
                Err(Stop::Bad(format!(
                    "{what} refused NoSpace (call {}): a full volume's dead end",
                    self.calls
                )))
            }
            Err(Error::NoSpace) => {
                self.intent = None;
                refusal(&mut self.cur);
                let key = if what == "remove" || what == "rmdir" {
                    "remove/rmdir (over capacity)"
                } else {
                    what
                };
                *self.refused.entry(key).or_default() += 1;
                if self.verify {
                    self.namespace_unchanged(what)?;
                }
                Ok(None)
            }
            // The part failed under the call (a failed program or erase the store could
            // not hide, or too many bad blocks): the call may have taken effect or not.
            Err(e @ (Error::Poisoned | Error::Flash(_))) if failing => {
                Err(Stop::Failed(format!("{what}: {e:?}")))
            }
            Err(Error::ReadOnly) if failing && self.fs.read_only() => {
                Err(Stop::Failed(format!("{what}: ReadOnly")))
            }
            Err(e) => Err(Stop::Bad(format!("{what} (call {}): {e:?}", self.calls))),
        }
    }

    /// After a refusal: the names, kinds and (for closed files with nothing in
    /// doubt) sizes are the model's.
    pub fn namespace_unchanged(&mut self, what: &str) -> Result<(), Stop> {
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
    pub fn handle_unchanged(&mut self, f: File, p: &str, what: &str) -> Result<(), Stop> {
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

    pub fn mkdir(&mut self, p: &str) -> Result<bool, Stop> {
        let ins = |st: &mut St| drop(st.insert(p.into(), X::Dir));
        Ok(self
            .op("mkdir", |fs| fs.create_dir(p), ins, |_| {})?
            .is_some())
    }
    pub fn rmdir(&mut self, p: &str) -> Result<bool, Stop> {
        let rm = |st: &mut St| drop(st.remove(p));
        Ok(self
            .op("rmdir", |fs| fs.remove_dir(p), rm, |_| {})?
            .is_some())
    }
    pub fn remove(&mut self, p: &str) -> Result<bool, Stop> {
        let rm = |st: &mut St| drop(st.remove(p));
        Ok(self.op("remove", |fs| fs.remove(p), rm, |_| {})?.is_some())
    }
    pub fn rename(&mut self, a: &str, b: &str) -> Result<bool, Stop> {
        let mv = |st: &mut St| renamed(st, a, b);
        Ok(self
            .op("rename", |fs| fs.rename(a, b), mv, |_| {})?
            .is_some())
    }
    /// Opens a tracked file (no truncate).
    pub fn open(&mut self, p: &str, o: OpenOptions) -> Result<Option<File>, Stop> {
        self.op("open", |fs| fs.open(p, o), |_| {}, |_| {})
    }
    pub fn write(&mut self, f: File, p: &str, at: usize, data: &[u8]) -> Result<bool, Stop> {
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
    pub fn fsync(&mut self, f: File, p: &str) -> Result<bool, Stop> {
        let d = |st: &mut St| durable(st, p);
        let done = self.op("fsync", |fs| fs.fsync(f), d, |_| {})?.is_some();
        if !done && self.verify {
            self.handle_unchanged(f, p, "fsync")?;
        }
        Ok(done)
    }
    /// Closes; a refused close leaves a truncate-open's old contents exactly, anything
    /// else with its unacknowledged bytes possible for good.
    pub fn close(&mut self, f: File, p: &str) -> Result<bool, Stop> {
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
    pub fn unmount(&mut self, open: &[String]) -> Result<bool, Stop> {
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
    pub fn truncate(&mut self, f: File, p: &str, size: usize) -> Result<bool, Stop> {
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
    /// (a new file: created empty, its creation durable at the open). An existing
    /// file's rewrite is held back until the close; a new file's writes are not (since
    /// stop 53, the crate's guarantees say so): they may show as any unacknowledged
    /// write may.
    pub fn put(&mut self, p: &str, data: &[u8]) -> Result<bool, Stop> {
        let o = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true);
        let opened = |st: &mut St| {
            let existed = st.contains_key(p);
            let x = st.entry(p.into()).or_insert_with(|| F::file(Vec::new()));
            if let X::Fill(s, n) = x {
                *x = F::file(pattern(*s, *n));
            }
            if existed {
                fmut(st, p).hidden = Some(Rc::new(Vec::new()));
            }
        };
        let Some(f) = self.op("put-open", |fs| fs.open(p, o), opened, |_| {})? else {
            return Ok(false);
        };
        let wrote = self.write(f, p, 0, data)?;
        Ok(self.close(f, p)? && wrote)
    }
    pub fn step(&mut self, budget: u32) -> Result<bool, Stop> {
        Ok(self
            .op("step", |fs| fs.step(budget), |_| {}, |_| {})?
            .is_some())
    }
    pub fn sync(&mut self) -> Result<bool, Stop> {
        Ok(self.op("sync", |fs| fs.sync(), |_| {}, |_| {})?.is_some())
    }
    pub fn len_of(&self, p: &str) -> usize {
        match &self.cur[p] {
            X::F(f) => f.w().len(),
            x => panic!("{p}: {x:?}"),
        }
    }
    pub fn paths(&self, f: impl Fn(&str, &X) -> bool) -> Vec<String> {
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

/// The preparation of a filled image: tracked files made before the fill.
pub type Prep<'p, S> = &'p dyn Fn(&mut Ctx<'_, '_, S, 4>) -> Result<(), Stop>;

/// Review s51's fill: formats and fills (in the same session) with files of 0.3 to
/// 9 KiB in `/f0`..`/f7` until `NoSpace` keeps coming (smaller files tried after each
/// refusal), then removes fill files until `free` percent of the capacity is free again
/// (at least one). `prep` runs first (tracked files). Returns the image (unmounted), the
/// model and the fill level (percent of capacity) before and after the freeing.
pub fn filled_at_format<S: Shape>(
    seed: u64,
    free: f64,
    prep: Prep<'_, S>,
) -> (Sim, St, (f64, f64)) {
    fill::<S>(S::sim(seed, HEALTHY), seed, free, prep, true)
}

/// Review s51's fill on a part made as `part` says (factory bad blocks and endurance at
/// its creation; after the format, `part.grown` blocks set to fail their next erase and
/// as many their next program): formats (and unmounts), then mounts and fills as
/// `filled_at_format` does.
pub fn filled<S: Shape>(
    seed: u64,
    part: Part,
    free: f64,
    prep: Prep<'_, S>,
) -> (Sim, St, (f64, f64)) {
    let mut sim = S::sim(seed, part);
    let blocks = S::PROFILE.geometry.blocks();
    {
        let mut fs = volume::<S, 4>(&mut sim);
        fs.format().unwrap();
        fs.unmount().unwrap();
    }
    let mut rng = Rng(seed.wrapping_mul(31) | 1);
    for i in 0..part.grown * 2 {
        let b = BlockAddr(1 + rng.below(blocks as u64 - 1) as u32);
        if i % 2 == 0 {
            sim.fail_next_erase(b);
        } else {
            sim.fail_next_program(b);
        }
    }
    fill::<S>(sim, seed, free, prep, false)
}

/// The fill of `filled_at_format` on `sim`, formatted first (`format`) or mounted.
fn fill<S: Shape>(
    mut sim: Sim,
    seed: u64,
    free: f64,
    prep: Prep<'_, S>,
    format: bool,
) -> (Sim, St, (f64, f64)) {
    let mut fs = volume::<S, 4>(&mut sim);
    if format {
        fs.format().unwrap();
    } else {
        fs.mount().unwrap();
    }
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
// Sweeps
// ---------------------------------------------------------------------------------

/// How the volume checked after a run ended (review s51's check: always writable).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mounted {
    Writable,
    /// Read-only, and the store's census says it must be.
    ReadOnly,
    /// A write of the check failed on the worn part (`Poisoned`, a flash error); the
    /// volume mounted again and read back.
    WornFailure,
}

/// The check after a run: mounts the image and checks it against the state before the
/// call in flight and the one after (`cur`, `intent`); `worn` as `Cuts::worn`.
pub type Check = fn(&mut Sim, &St, &Option<St>, bool) -> Result<Mounted, String>;

pub type Script<'s, S, const H: usize> = &'s dyn Fn(&mut Ctx<'_, '_, S, H>) -> Result<(), Stop>;

/// What a script did uncut and under the cuts.
pub struct Run {
    pub cur: St,
    pub intent: Option<St>,
    pub stop: Option<Stop>,
    pub refused: BTreeMap<&'static str, u32>,
    pub fill: f64,
}

pub fn run<S: Shape, const H: usize>(
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
pub struct Report {
    pub runs: u64,
    pub failures: Vec<String>,
    pub refused: BTreeMap<&'static str, u32>,
    /// Scripts ended by a failure of the part (`Stop::Failed`), by message.
    pub failed: BTreeMap<String, u32>,
    /// Checks that found the volume read-only (as the census requires).
    pub read_only: u64,
    /// Checks whose writes failed on a worn part.
    pub worn_failures: u64,
}

impl Report {
    pub fn assert_ok(&self, need_refusals: bool) {
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
    pub fn checked(&mut self, tag: &str, r: Result<Mounted, String>) {
        match r {
            Ok(Mounted::Writable) => {}
            Ok(Mounted::ReadOnly) => self.read_only += 1,
            Ok(Mounted::WornFailure) => self.worn_failures += 1,
            Err(e) => {
                eprintln!("FAIL {tag}: {e}");
                self.failures.push(format!("{tag}: {e}"));
            }
        }
    }
}

/// How a sweep cuts.
#[derive(Clone, Copy)]
pub struct Cuts<'k> {
    pub kinds: &'k [CutKind],
    /// Every `stride`-th program/erase (offset by the kind).
    pub stride: u64,
    /// Also cut the recovery mount after each cut at every `recovery`-th of its
    /// programs/erases (0: not).
    pub recovery: u64,
    pub noisy: bool,
    /// Program and erase failure rates (ppm) through the script, the cut runs and the
    /// recovery mounts (the plan's seed is the sweep's unless `per_cut_seeds`, so each
    /// cut run replays the uncut run's failures up to its cut).
    pub program_fail: u32,
    pub erase_fail: u32,
    /// The part is worn: the check's writes may fail.
    pub worn: bool,
    /// Review s51's plans: the uncut run armed without fault rates, and each cut run's
    /// plan seeded from the sweep's seed, the cut and the kind (`seed ^ at * 7919 ^
    /// kind index`), where review s52's are all seeded with the sweep's seed.
    pub per_cut_seeds: bool,
}

impl Cuts<'_> {
    pub fn faults(&self) -> FaultConfig {
        FaultConfig {
            unstable_after_cut: self.noisy,
            program_fail_ppm: self.program_fail,
            erase_fail_ppm: self.erase_fail,
            ..FaultConfig::default()
        }
    }
}

/// Runs `script` on `base` uncut (it must end without a failure the guarantees
/// exclude; a failure of the part may end it), checks the volume after it, then runs it
/// cut as `cuts` says, each run checked (`check`: the review's); adds to `rep`.
#[allow(clippy::too_many_arguments)]
pub fn sweep<S: Shape, const H: usize>(
    name: &str,
    base: &Sim,
    st: &St,
    script: Script<'_, S, H>,
    seed: u64,
    cuts: Cuts<'_>,
    check: Check,
    rep: &mut Report,
) {
    let faults = cuts.faults();
    let mut sim = base.clone();
    sim.arm(if cuts.per_cut_seeds {
        FaultPlan::seeded(seed)
    } else {
        FaultPlan::seeded(seed).with_faults(faults)
    });
    let uncut = run::<S, H>(&mut sim, st, script, true);
    let n = sim.ops_since_arm();
    match &uncut.stop {
        Some(Stop::Failed(m)) if S::REVIEW.failing_part => {
            *rep.failed.entry(format!("uncut {m}")).or_default() += 1
        }
        Some(s) => {
            rep.failures.push(format!(
                "{name} [{}] seed {seed}: uncut run stopped: {s:?}",
                S::NAME
            ));
            return;
        }
        None => {}
    }
    sim.cut_power();
    sim.power_on();
    sim.disarm();
    let r = check(&mut sim, &uncut.cur, &uncut.intent, cuts.worn);
    rep.checked(&format!("{name} [{}] seed {seed}: uncut", S::NAME), r);
    for (k, v) in &uncut.refused {
        *rep.refused.entry(k).or_default() += v;
    }
    let mut runs = 0;
    for (ki, &kind) in cuts.kinds.iter().enumerate() {
        let mut at = 1 + (ki as u64 * 7) % cuts.stride;
        while at <= n {
            let plan_seed = if cuts.per_cut_seeds {
                seed ^ at.wrapping_mul(7919) ^ ki as u64
            } else {
                seed
            };
            let plan = FaultPlan::seeded(plan_seed)
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
                Some(Stop::Failed(m)) if S::REVIEW.failing_part => {
                    *rep.failed.entry(m.clone()).or_default() += 1
                }
                Some(Stop::Bad(m) | Stop::Failed(m)) => rep.failures.push(format!("{tag}: {m}")),
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
                    let c = check(&mut s2, &r.cur, &r.intent, cuts.worn);
                    rep.checked(&format!("{tag} + recovery cut {k}/{m}"), c);
                    k += cuts.recovery;
                }
            }
            let c = check(&mut sim, &r.cur, &r.intent, cuts.worn);
            rep.checked(&tag, c);
            at += cuts.stride;
        }
    }
    rep.runs += runs;
    println!(
        "{name} [{}] seed {seed}: {n} programs/erases uncut (stop {:?}), fill at end {:.1}%, \
         refused {:?}, {runs} cut runs, {} failures so far",
        S::NAME,
        uncut.stop,
        uncut.fill,
        uncut.refused,
        rep.failures.len()
    );
}

// ---------------------------------------------------------------------------------
// Scripts
// ---------------------------------------------------------------------------------

pub fn chunk(k: u32, n: usize) -> Vec<u8> {
    pattern(5000 + k, n)
}

pub fn no_bypass<S: Shape, const H: usize>(c: &mut Ctx<'_, '_, S, H>) {
    c.fs.set_tuning(Tuning {
        staging: true,
        bypass: false,
    });
}

pub fn pick(rng: &mut Rng, v: &[String]) -> Option<String> {
    (!v.is_empty()).then(|| v[rng.below(v.len() as u64) as usize].clone())
}

/// The files the full-volume scripts open and write (made before the fill).
pub fn prep_tracked<S: Shape>(c: &mut Ctx<'_, '_, S, 4>) -> Result<(), Stop> {
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
pub fn full_script<S: Shape, const H: usize>(
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

pub fn pick_open(rng: &mut Rng, open: &[(String, File)]) -> Option<(String, File)> {
    (!open.is_empty()).then(|| open[rng.below(open.len() as u64) as usize].clone())
}

/// Files for the every-handle scripts: `/h/x000`.. (the first eight with objects of
/// their own, the rest inline), made before the fill.
pub fn prep_handles<const H: usize, S: Shape>(c: &mut Ctx<'_, '_, S, 4>) -> Result<(), Stop> {
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
pub fn handles_script<S: Shape, const H: usize>(
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
pub fn gauntlet<S: Shape, const H: usize>(c: &mut Ctx<'_, '_, S, H>) -> Result<(), Stop> {
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
