//! Review s52: an independent attempt to break the stack where review s51 stopped
//! (its stated limits): parts with factory and grown bad blocks (programs and erases
//! failing) on volumes filled to capacity, under power cuts of every kind (the five
//! of `CutKind::ALL`: s51 used three), also in the recovery mount; wear-out of a nearly
//! full volume with staged records pending; more seeds of 255 open handles on TINY.
//!
//! Harness: review s51's (model, scripts, fill, check), extended. A part is made with
//! factory bad blocks and per-block endurance (`Part`); after the format two blocks are
//! set to fail their next erase (bad for good) and two their next program, so they go
//! bad while the volume fills (to `NoSpace`, then a little freed). The sweeps arm
//! program and erase failure rates (`FAILING`: 0.3 % and 2 %) through the script, each
//! cut run and the recovery mounts, on the sweep's seed, so a cut run replays the
//! uncut run's failures up to its cut. A call that fails with `Poisoned`, a flash
//! error or `ReadOnly` (the volume turned read-only) ends the script; the check then
//! remounts as after a cut. The check: mount; the tree is the acknowledged state or the
//! one the call in flight may leave (every fsynced/closed byte, namespace ops all or
//! nothing, unacknowledged bytes old or new); read-only only when the store's census
//! calls for it (good blocks under `min_good_blocks`, no capacity, or checkpoint
//! blocks gone), and then every change refused; else the largest files are removed
//! until a small inline and a 2 KiB file are taken and read back after a remount. A
//! refused (`NoSpace`) call is checked at once to have changed nothing (namespace,
//! sizes, the handle's bytes). Wear-out: the part's blocks aged to within 30 cycles of
//! their endurance after the fill (`age`; past it erases fail one time in five,
//! programs one in twenty), then the staged script (64-byte appends with fsync on two
//! files, larger writes on a third, truncates, steps, syncs; a fill file removed after
//! each refusal) swept, and "lives": sessions each cut at a random program/erase and
//! kind (torn pages unstable every other session), checked after each, until the
//! volume mounts read-only, which then must show the same tree again and refuse
//! changes.
//!
//! Findings (each an ignored test that fails on the current code):
//! - `s52_finding_grown_bad_blocks_leave_every_remove_refused` (high, availability): a
//!   full volume whose part grows bad blocks (6 of TINY's 64, here injected erase
//!   failures) stays writable (good blocks 52 >= `min_good_blocks` 48) with more in
//!   use than its capacity (427 of 336 pages), and every remove (120 of 120) is refused
//!   `NoSpace`, after steps and remounts too: nothing can be deleted or written, and the
//!   store does not turn read-only. In the sweeps it shows as removes refused (the
//!   check's and the scripts') whenever grown bad blocks left the volume over or near
//!   its capacity, at times for every file (the "dead ends" counted below). A file
//!   remove is one oftl transaction (its directory bucket rewritten and the object
//!   deleted, `Fs::remove_entry`), which `oftl::txn::transact_inner` classes
//!   `Room::Grow` (the write is not a shrink), so it never gets the delete reserve
//!   that `Room::Shrink` (and `min_good_blocks`' floor) leaves for deletes: on the
//!   stuck volume, `Oftl::delete` (`Room::Shrink`) of the same objects straight
//!   through `Fs::store_mut` went through (123 of 125, the first 2 refused).
//! - `s52_finding_truncate_open_of_an_empty_file_lands_before_its_close` (medium): the
//!   crate promises a truncate-open and its writes land together at fsync/close; for a
//!   file whose old contents are empty, the writes become durable without the close
//!   (2,100 of 3,000 bytes after a cut between operations; old contents of 300 or 3,000
//!   bytes are kept as promised). Sweeps hit it as a `Torn(MostBits)` cut of a put's
//!   write (the torn page reads back): review s51's model rejects it; here it is
//!   allowed and counted ("early truncate-open rewrites").
//!
//! - `s52_finding_over_committed_volume_mounts_read_only_again_and_again` (high,
//!   availability; the first finding's state at mount): a volume over its capacity
//!   after grown bad blocks, with staged records in its log, mounts read-only at
//!   every mount (5 of 5, steps and unmounts between) while its store is writable
//!   (43 good blocks >= `min_good_blocks` 40): the mount's replay of the staged
//!   records finds no room and falls back read-only (`Stage::replay`: "until a mount
//!   finds room"), no mount finds it, and a read-only volume refuses the removes that
//!   would make it. Reached by a cut and a cut in the recovery mount (seed 104). The
//!   check allows one such read-only mount if the next is writable (counted), and
//!   counts two in a row on an over-committed store as this finding.
//!
//! Held otherwise (no failure; counts are cut runs, recovery-mount cuts included,
//! every cut kind; with the findings allowed and counted). The normal tests: 4,081
//! (gauntlet 1,376; random scripts with recovery cuts and noisy pages 1,305; worn
//! sweep and three lives 851; 255 handles 549). The survey (`s52_survey`), part with
//! bad blocks and `FAILING` rates unless said: full scripts at every program/erase,
//! seeds 100-102: 9,345; the gauntlet at every program/erase, seeds 41-43: 8,565;
//! noisy pages at every 3rd, seed 106: 3,409; the Micron x40 shape at every 7th, seed
//! 31: 485; worn sweeps at every 7th, seeds 8-9: 2,965; ten lives (seeds 10-19), 222
//! sessions each cut, all ending read-only as the census called for; 255 handles at
//! every 13th, seeds 15-16: 3,282; 255 handles on the healthy part (no failure
//! rates), every 13th, seeds 15-17: 9,020 (seeds 12-13 in the normal test). Finding hits in the surveys: removes
//! refused on over-committed volumes in about a third of the checks after the part
//! grew bad blocks (every remove refused in 1,430 checks of the noisy survey alone);
//! read-only at two mounts: 8,362 of 18,770 recovery-cut runs (seed 104, every 37th
//! cut, every 7th recovery program/erase) and 122 of 890 255-handle runs (seed 18);
//! the early truncate-open rewrite in 33 reads of the first full survey (MostBits).
//! Refusals met under the cuts: write, fsync, close, truncate, mkdir, rename, step,
//! sync, put-open, unmount; the part's failures surfaced in the scripts only as
//! `ReadOnly` (never `Poisoned`, a flash error or `Corrupted`), and once as a failed
//! write of the check on a worn part (the volume mounted and read back after it); no
//! panic, no hang.
//!
//! Not covered: the 512-byte-unit TINY store and other parts than TINY and the
//! Micron x40 shape; read errors (uncorrectable runs, read disturb) with the bad
//! blocks; wear-out with recovery-mount cuts (only the plain sweep); every cut of the
//! 255-handle scripts (strided: a seed has 6,000 to 7,000 programs/erases).
//!
//! Run: `cargo test --release -p stagefs-core --all-features --test all review_s52:: --
//! --test-threads=1` (the survey and the findings: `-- --ignored`, see each).

use crate::support::{pattern, Rng, Sim};

use std::collections::BTreeMap;
use std::rc::Rc;

use nand_hal::sim::{
    profile, BlockState as SimBlock, CutKind, FaultConfig, FaultPlan, Profile, SimError, SimNand,
    SimStorage,
};
use nand_hal::BlockAddr;
use oftl::{BlockState, Config, Greedy, Health, Oftl, ReadOnlyReason};
use stagefs_core::oracle::{observe, power_loss, Node, Tree};
use stagefs_core::{Error, File, Fs, Kind, OpenOptions, SeekFrom, Store, Tuning};

type E = SimError;

// ---------------------------------------------------------------------------------
// Parts and store shapes
// ---------------------------------------------------------------------------------

/// The part's own faults, placed at its creation and before the fill: factory bad
/// blocks, per-block endurance (0: none), and `grown` blocks whose next erase fails
/// (for good) and as many whose next program fails, armed after the format so they go
/// bad while the volume fills.
#[derive(Clone, Copy, Debug, Default)]
struct Part {
    factory_bad: u32,
    endurance: u32,
    grown: u32,
}

const HEALTHY: Part = Part {
    factory_bad: 0,
    endurance: 0,
    grown: 0,
};
const BAD_BLOCKS: Part = Part {
    factory_bad: 4,
    endurance: 0,
    grown: 2,
};

/// What the store says of its blocks: read-only reason, good blocks (neither bad nor
/// reserved), bad blocks, the shrink floor, capacity and use (pages).
#[derive(Clone, Copy, Debug)]
struct Census {
    ro: Option<ReadOnlyReason>,
    good: u32,
    bad: u32,
    min_good: u32,
    capacity: u64,
    used: u64,
    ppb: u64,
}

impl Census {
    /// More in use than the capacity less two blocks: grown bad blocks shrank it
    /// under (or to) the data, where the finding's refusals start.
    fn over_committed(&self) -> bool {
        self.bad > 0 && self.used + 2 * self.ppb > self.capacity
    }
    /// Whether read-only is what the part's state calls for: too few good blocks for
    /// the live data and the floors, no capacity, or the checkpoint blocks gone.
    fn genuinely_short(&self) -> bool {
        self.good < self.min_good
            || self.capacity == 0
            || self.ro == Some(ReadOnlyReason::CheckpointBlocks)
    }
}

trait Shape {
    type St<'a>: Store<FlashError = E>;
    const NAME: &'static str;
    const PROFILE: Profile;
    fn store(sim: &mut Sim) -> Self::St<'_>;
    fn powered(st: &Self::St<'_>) -> bool;
    /// Valid pages over the store's capacity, in percent.
    fn fill(st: &Self::St<'_>) -> f64;
    fn census(st: &Self::St<'_>) -> Census;
    fn sim(seed: u64, part: Part) -> Sim {
        let faults = FaultConfig {
            factory_bad: part.factory_bad,
            endurance: part.endurance,
            ..FaultConfig::default()
        };
        SimNand::heap(Self::PROFILE, FaultPlan::seeded(seed).with_faults(faults))
    }
}

macro_rules! shape {
    ($t:ident, $name:expr, $store:ty, $profile:expr, $window:expr) => {
        struct $t;
        impl Shape for $t {
            type St<'a> = $store;
            const NAME: &'static str = $name;
            const PROFILE: Profile = $profile;
            fn store(sim: &mut Sim) -> Self::St<'_> {
                let cfg = Config {
                    window_blocks: $window,
                    format_id: 52,
                    ..Default::default()
                };
                Oftl::new(sim, cfg, Greedy::DEFAULT)
            }
            fn powered(st: &Self::St<'_>) -> bool {
                st.flash().is_powered()
            }
            fn fill(st: &Self::St<'_>) -> f64 {
                100.0 * st.used_pages() as f64 / st.capacity_pages().max(1) as f64
            }
            fn census(st: &Self::St<'_>) -> Census {
                let b = st.blocks();
                Census {
                    ro: match st.health() {
                        Health::ReadOnly(r) => Some(r),
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

shape!(
    Tiny,
    "tiny",
    Oftl<&'a mut Sim, 2048, 64, 4>,
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
// Model (review s51's)
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

thread_local! {
    /// Mounts read-only on a writable store with good blocks to spare (the staged
    /// records found no room), the next mount writable.
    static TRANSIENT_RO: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// Reads accepted only by the truncate-open finding's allowance (see `file_ok`).
    static EARLY_REWRITES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn file_ok(c: &[u8], f: &F) -> bool {
    // The finding `s52_finding_truncate_open_of_an_empty_file_lands_before_its_close`:
    // a truncate-open of an empty file may show a prefix of its unclosed rewrite.
    if let Some(h) = &f.hidden {
        if f.d.is_empty() && !c.is_empty() && h.starts_with(c) {
            EARLY_REWRITES.with(|n| n.set(n.get() + 1));
            return true;
        }
    }
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
    /// A flash failure the volume reported (`Poisoned`, a flash error) or the volume
    /// turned read-only: the script ends, the check after it remounts as after a cut.
    Failed(String),
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
        if std::env::var_os("S52_TRACE").is_some() {
            eprintln!("  call {} {what}: {:?}", self.calls, r.as_ref().map(|_| ()));
        }
        match r {
            Ok(v) => {
                self.cur = self.intent.take().unwrap();
                Ok(Some(v))
            }
            Err(e) if power_loss(&e) || !S::powered(self.fs.store()) => Err(Stop::Cut),
            Err(Error::NoSpace)
                if (what == "remove" || what == "rmdir")
                    && !S::census(self.fs.store()).over_committed() =>
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
            Err(e @ (Error::Poisoned | Error::Flash(_))) => {
                Err(Stop::Failed(format!("{what}: {e:?}")))
            }
            Err(Error::ReadOnly) if self.fs.read_only() => {
                Err(Stop::Failed(format!("{what}: ReadOnly")))
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
// Images: a volume filled to capacity on a part with its own faults
// ---------------------------------------------------------------------------------

/// Review s51's fill on a part made as `part` says (factory bad blocks and endurance at
/// its creation; after the format, `part.grown` blocks set to fail their next erase and
/// as many their next program): formats and fills with files of 0.3 to 9 KiB in
/// `/f0`..`/f7` until `NoSpace` keeps coming, then removes fill files until `free`
/// percent of the capacity is free again. Returns the image (unmounted), the model and
/// the fill level before and after the freeing.
fn filled<S: Shape>(
    seed: u64,
    part: Part,
    free: f64,
    prep: &dyn Fn(&mut Ctx<'_, '_, S, 4>) -> Result<(), Stop>,
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
    let mut fs = volume::<S, 4>(&mut sim);
    fs.mount().unwrap();
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

/// Ages every block to within `margin` cycles of its endurance (some at it: their
/// programs fail one time in twenty, their erases one in five once past).
fn age(sim: &mut Sim, seed: u64, margin: u64) {
    let mut rng = Rng(seed.wrapping_mul(77) | 1);
    let ends: Vec<u32> = sim.storage().blocks().iter().map(|b| b.endurance).collect();
    for (b, end) in ends.into_iter().enumerate() {
        if end > 0 {
            let back = rng.below(margin.max(1)) as u32;
            sim.set_erase_count(BlockAddr(b as u32), end.saturating_sub(back));
        }
    }
}

/// Blocks the simulator holds bad (factory and grown).
fn sim_bad(sim: &Sim) -> usize {
    sim.storage()
        .blocks()
        .iter()
        .filter(|b| b.flags & SimBlock::BAD != 0)
        .count()
}

// ---------------------------------------------------------------------------------
// The check after a cut (or a failure)
// ---------------------------------------------------------------------------------

/// How the checked volume ended.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mounted {
    Writable,
    /// Read-only, and the store's census says it must be.
    ReadOnly,
    /// Read-only at two mounts in a row on a writable, over-committed store (the
    /// third finding).
    StuckReadOnly,
    /// Writable with more in use than the capacity (grown bad blocks): removes were
    /// refused `NoSpace` (how many) before the check's writes were taken.
    RemoveRefused(u32),
    /// Writable and over-committed, and every remove left refused `NoSpace`: the
    /// finding's dead end.
    DeadEnd,
    /// A write of the check failed on the worn part (`Poisoned`, a flash error); the
    /// volume mounted again and read back.
    WornFailure,
}

/// Mounts and checks the tree against `cur` or `intent`. Read-only is accepted only
/// when the store's census calls for it (then every change must be refused). Else the
/// largest files are removed one at a time (at most 8) until a small inline file and a
/// 2 KiB file are taken, and both read back after a remount. On a worn part (`worn`) a
/// write of the check may fail with `Poisoned` or a flash error: the volume must then
/// mount again and read back.
fn check_after<S: Shape>(
    sim: &mut Sim,
    cur: &St,
    intent: &Option<St>,
    worn: bool,
) -> Result<Mounted, String> {
    let r = check_inner::<S>(sim, cur, intent, worn)?;
    if r == Mounted::WornFailure {
        sim.cut_power();
        sim.power_on();
        let mut fs = volume::<S, 4>(sim);
        fs.mount()
            .map_err(|e| format!("mount after a failed write of the check: {e:?}"))?;
        observe(&mut *fs)
            .map_err(|e| format!("observe after a failed write of the check: {e:?}"))?;
    }
    Ok(r)
}

fn check_inner<S: Shape>(
    sim: &mut Sim,
    cur: &St,
    intent: &Option<St>,
    worn: bool,
) -> Result<Mounted, String> {
    let mut fs = volume::<S, 4>(sim);
    fs.mount().map_err(|e| format!("mount: {e:?}"))?;
    let census = S::census(fs.store());
    let t = observe(&mut *fs).map_err(|e| format!("observe: {e:?} ({census:?})"))?;
    match (matches(&t, cur), intent.as_ref().map(|i| matches(&t, i))) {
        (Ok(()), _) | (_, Some(Ok(()))) => {}
        (Err(a), None) => return Err(format!("state: {a}")),
        (Err(a), Some(Err(b))) => return Err(format!("neither state: before: {a}; after: {b}")),
    }
    if fs.read_only() && !census.genuinely_short() {
        // The staged records found no room at this mount (`Stage::replay` falls back
        // read-only "until a mount finds room"): the next mount must be writable.
        TRANSIENT_RO.with(|n| n.set(n.get() + 1));
        drop(fs);
        fs = volume::<S, 4>(sim);
        fs.mount()
            .map_err(|e| format!("mount after a read-only one: {e:?}"))?;
        if fs.read_only() {
            let c = S::census(fs.store());
            if c.over_committed() {
                // The third finding, counted.
                return Ok(Mounted::StuckReadOnly);
            }
            return Err(format!(
                "read-only at two mounts in a row with good blocks to spare: {c:?}"
            ));
        }
    }
    if fs.read_only() {
        if !census.genuinely_short() {
            return Err(format!(
                "mounted read-only with good blocks to spare: {census:?}"
            ));
        }
        let r = fs.create_dir("/_ro");
        if r != Err(Error::ReadOnly) {
            return Err(format!("mkdir on a read-only volume: {r:?}"));
        }
        return Ok(Mounted::ReadOnly);
    }
    let mut files: Vec<(usize, String)> = t
        .iter()
        .filter_map(|(k, n)| match n {
            Node::File(c) => Some((c.len(), k.clone())),
            Node::Dir => None,
        })
        .collect();
    files.sort_by(|a, b| b.cmp(a));
    let (p, q) = (pattern(7, 100), pattern(8, 2100));
    // A refused write leaves its handle open: closed (its refusal too) before the next
    // try.
    let put = |fs: &mut V<'_, S, 4>, path: &str, d: &[u8]| -> Result<(), Error<E>> {
        let f = fs.open(path, OpenOptions::new().write(true).create(true))?;
        match fs.write(f, d) {
            Ok(_) => fs.close(f),
            Err(e) => {
                let _ = fs.close(f);
                Err(e)
            }
        }
    };
    // Largest first; a remove refused `NoSpace` is a failure unless grown bad blocks
    // left more in use than the capacity (the finding, see the module docs): then
    // counted, and the next file tried.
    let (mut removed, mut refused) = (0, 0u32);
    let mut next = files.iter();
    loop {
        let r = put(&mut fs, "/_p", &p).and_then(|()| put(&mut fs, "/_q", &q));
        match r {
            Ok(()) => break,
            Err(Error::NoSpace) => {}
            Err(Error::ReadOnly) if fs.read_only() => {
                let c = S::census(fs.store());
                if !c.genuinely_short() {
                    return Err(format!("turned read-only at the check's writes: {c:?}"));
                }
                return Ok(Mounted::ReadOnly);
            }
            Err(Error::Poisoned | Error::Flash(_)) if worn => return Ok(Mounted::WornFailure),
            Err(e) => {
                return Err(format!(
                    "writes after {removed} removes: {e:?} (mounted {census:?}, now {:?})",
                    S::census(fs.store())
                ))
            }
        }
        let now = S::census(fs.store());
        let Some((_, k)) = next.next() else {
            if now.over_committed() {
                // The finding's dead end: counted (see the module docs).
                return Ok(Mounted::DeadEnd);
            }
            return Err(format!(
                "writes refused NoSpace with every file removed ({removed} removed, \
                 {refused} removes refused; mounted {census:?}, now {now:?})"
            ));
        };
        if removed >= 6 && now.used + 32 <= now.capacity {
            return Err(format!(
                "writes refused NoSpace after {removed} removes with room ({now:?})"
            ));
        }
        match fs.remove(k) {
            Ok(()) => removed += 1,
            Err(Error::NoSpace)
                if now.over_committed() || S::census(fs.store()).over_committed() =>
            {
                refused += 1
            }
            Err(Error::ReadOnly) if fs.read_only() => {
                let c = S::census(fs.store());
                if !c.genuinely_short() {
                    return Err(format!("remove {k}: turned read-only: {c:?}"));
                }
                return Ok(Mounted::ReadOnly);
            }
            Err(Error::Poisoned | Error::Flash(_)) if worn => return Ok(Mounted::WornFailure),
            Err(e) => {
                return Err(format!(
                    "remove {k}: {e:?} (mounted {census:?}, now {now:?})"
                ))
            }
        }
    }
    if std::env::var_os("S52_TRACE").is_some() && removed > 1 {
        eprintln!("note: the check took {removed} removes before its writes ({census:?})");
    }
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
    Ok(if refused > 0 {
        Mounted::RemoveRefused(refused)
    } else {
        Mounted::Writable
    })
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
    /// Scripts ended by a failure of the part (`Stop::Failed`), by message.
    failed: BTreeMap<String, u32>,
    /// Checks that found the volume read-only (as the census requires).
    read_only: u64,
    /// Checks whose writes failed on a worn part.
    worn_failures: u64,
    /// Checks that met removes refused on an over-committed volume.
    over_capacity_checks: u64,
    /// Checks that found every remove refused (the finding).
    dead_ends: u64,
    /// Checks that found the volume read-only at two mounts on a writable store.
    stuck_read_only: u64,
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
    fn checked(&mut self, tag: &str, r: Result<Mounted, String>) {
        match r {
            Ok(Mounted::Writable) => {}
            Ok(Mounted::ReadOnly) => self.read_only += 1,
            Ok(Mounted::WornFailure) => self.worn_failures += 1,
            Ok(Mounted::DeadEnd) => self.dead_ends += 1,
            Ok(Mounted::StuckReadOnly) => self.stuck_read_only += 1,
            Ok(Mounted::RemoveRefused(n)) => {
                self.over_capacity_checks += 1;
                *self
                    .refused
                    .entry("check remove (over capacity)")
                    .or_default() += n;
            }
            Err(e) => {
                eprintln!("FAIL {tag}: {e}");
                self.failures.push(format!("{tag}: {e}"));
            }
        }
    }
    fn summary(&self) -> String {
        format!(
            "{} cut runs, {} failures, refusals {:?}, part failures {:?}, read-only checks {}, \
             failed check writes {}, over-committed checks with removes refused {}, dead ends (every remove refused) {}, early truncate-open rewrites read (finding) {}, \
             read-only mounts followed by a writable one {}, read-only at two mounts on a \
             writable store (finding) {}",
            self.runs,
            self.failures.len(),
            self.refused,
            self.failed,
            self.read_only,
            self.worn_failures,
            self.over_capacity_checks,
            self.dead_ends,
            EARLY_REWRITES.with(|n| n.get()),
            TRANSIENT_RO.with(|n| n.get()),
            self.stuck_read_only
        )
    }
}

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
    /// Program and erase failure rates (ppm) through the script, the cut runs and the
    /// recovery mounts (the plan's seed is the sweep's, so each cut run replays the
    /// uncut run's failures up to its cut).
    program_fail: u32,
    erase_fail: u32,
    /// The part is worn: the check's writes may fail.
    worn: bool,
}

const EVERY: Cuts<'static> = Cuts {
    kinds: &CutKind::ALL,
    stride: 1,
    recovery: 0,
    noisy: false,
    program_fail: 0,
    erase_fail: 0,
    worn: false,
};

impl Cuts<'_> {
    fn faults(&self) -> FaultConfig {
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
/// cut as `cuts` says, each run checked; adds to `rep`.
fn sweep<S: Shape, const H: usize>(
    name: &str,
    base: &Sim,
    st: &St,
    script: Script<'_, S, H>,
    seed: u64,
    cuts: Cuts<'_>,
    rep: &mut Report,
) {
    let faults = cuts.faults();
    let mut sim = base.clone();
    sim.arm(FaultPlan::seeded(seed).with_faults(faults));
    let uncut = run::<S, H>(&mut sim, st, script, true);
    let n = sim.ops_since_arm();
    match &uncut.stop {
        Some(Stop::Failed(m)) => *rep.failed.entry(format!("uncut {m}")).or_default() += 1,
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
    let r = check_after::<S>(&mut sim, &uncut.cur, &uncut.intent, cuts.worn);
    rep.checked(&format!("{name} [{}] seed {seed}: uncut", S::NAME), r);
    for (k, v) in &uncut.refused {
        *rep.refused.entry(k).or_default() += v;
    }
    let mut runs = 0;
    for (ki, &kind) in cuts.kinds.iter().enumerate() {
        let mut at = 1 + (ki as u64 * 7) % cuts.stride;
        while at <= n {
            let plan = FaultPlan::seeded(seed)
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
                Some(Stop::Failed(m)) => *rep.failed.entry(m.clone()).or_default() += 1,
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
                    let c = check_after::<S>(&mut s2, &r.cur, &r.intent, cuts.worn);
                    rep.checked(&format!("{tag} + recovery cut {k}/{m}"), c);
                    k += cuts.recovery;
                }
            }
            let c = check_after::<S>(&mut sim, &r.cur, &r.intent, cuts.worn);
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

/// Staged work on a nearly full volume: 1..64-byte appends with fsync on `/w/t0` and
/// `/w/t1` (records pending in the staging log), a 1.5 to 5 KiB write with fsync on
/// `/w/t3` now and then (cut back when long), truncates into the staged records, steps
/// and syncs; after a refused write or fsync a fill file is removed. The files stay
/// open to the end (closed, or unmounted open on odd seeds).
fn staged_script<S: Shape, const H: usize>(
    seed: u64,
    len: u32,
) -> impl Fn(&mut Ctx<'_, '_, S, H>) -> Result<(), Stop> {
    move |c| {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        no_bypass(c);
        let rw = OpenOptions::new().read(true).write(true);
        let mut open: Vec<(String, File)> = Vec::new();
        for p in ["/w/t0", "/w/t1", "/w/t3"] {
            if !c.cur.contains_key(p) {
                continue;
            }
            match c.open(p, rw)? {
                Some(f) => open.push((p.to_string(), f)),
                None => return Err(Stop::Bad(format!("open {p} refused NoSpace"))),
            }
        }
        if open.is_empty() {
            return Ok(());
        }
        for k in 0..len {
            let (p, f) = open[rng.below(open.len() as u64) as usize].clone();
            let big = p == "/w/t3";
            let len = c.len_of(&p);
            let done = match rng.below(12) {
                0..=7 => {
                    let n = if big {
                        1500 + rng.below(3500)
                    } else {
                        1 + rng.below(64)
                    } as usize;
                    if big && len > 16_000 {
                        c.truncate(f, &p, 1000)?
                    } else {
                        c.write(f, &p, len, &chunk(k, n))? && c.fsync(f, &p)?
                    }
                }
                8 => {
                    let cut = rng.below(len.min(100) as u64 + 1) as usize;
                    c.truncate(f, &p, len - cut)?
                }
                9 => c.step([0, 1, 4][rng.below(3) as usize])?,
                10 => c.sync()?,
                _ => {
                    let at = rng.below(len as u64 + 1) as usize;
                    c.write(f, &p, at, &chunk(k, 1 + rng.below(40) as usize))? && c.fsync(f, &p)?
                }
            };
            if !done {
                let fills = c.paths(|_, x| matches!(x, X::Fill(..)));
                if let Some(v) = pick(&mut rng, &fills) {
                    c.remove(&v)?;
                }
            }
        }
        if seed % 2 == 1 {
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

fn gauntlet_sweep<S: Shape>(seed: u64, part: Part, cuts: Cuts<'_>, rep: &mut Report) {
    let (base, st, (full, after)) = filled::<S>(seed, part, 0.0, &prep_tracked::<S>);
    println!(
        "[{}] gauntlet seed {seed} {part:?}: filled to {full:.1}%, {after:.1}% after one \
         remove, {} blocks bad",
        S::NAME,
        sim_bad(&base)
    );
    sweep::<S, 4>("gauntlet", &base, &st, &gauntlet::<S, 4>, seed, cuts, rep);
}

fn full_sweeps<S: Shape>(
    seeds: std::ops::Range<u64>,
    part: Part,
    len: u32,
    cuts: Cuts<'_>,
    rep: &mut Report,
) {
    for seed in seeds {
        let (base, st, (full, after)) = filled::<S>(seed, part, 1.5, &prep_tracked::<S>);
        println!(
            "[{}] seed {seed} {part:?}: filled to {full:.1}% of capacity, {after:.1}% after \
             the removes, {} blocks bad",
            S::NAME,
            sim_bad(&base)
        );
        let s = full_script::<S, 4>(seed, len);
        sweep::<S, 4>("full", &base, &st, &s, seed, cuts, rep);
    }
}

fn handles_sweep<S: Shape, const H: usize>(
    seed: u64,
    part: Part,
    len: u32,
    free: f64,
    cuts: Cuts<'_>,
    rep: &mut Report,
) {
    let (base, st, (full, after)) = filled::<S>(seed, part, free, &prep_handles::<H, S>);
    println!(
        "[{}] handles {H} seed {seed} {part:?}: filled to {full:.1}%, {after:.1}% after the \
         removes, {} blocks bad",
        S::NAME,
        sim_bad(&base)
    );
    let s = handles_script::<S, H>(seed, len);
    sweep::<S, H>("handles", &base, &st, &s, seed, cuts, rep);
}

/// The staged script on a nearly full volume of a part aged to within `margin` cycles
/// of its endurance (`endurance` cycles mean, 2 factory bad blocks), swept.
fn worn_sweep<S: Shape>(
    seed: u64,
    endurance: u32,
    margin: u64,
    len: u32,
    cuts: Cuts<'_>,
    rep: &mut Report,
) {
    let part = Part {
        factory_bad: 2,
        endurance,
        grown: 0,
    };
    let (mut base, st, (full, after)) = filled::<S>(seed, part, 1.5, &prep_tracked::<S>);
    age(&mut base, seed, margin);
    println!(
        "[{}] worn seed {seed} endurance {endurance} margin {margin}: filled to {full:.1}%, \
         {after:.1}% after the removes",
        S::NAME
    );
    let s = staged_script::<S, 4>(seed, len);
    sweep::<S, 4>("worn", &base, &st, &s, seed, cuts, rep);
}

/// Rebuilds the model from a tree the check accepted (each file as read).
fn remodel(t: &Tree, st: &St) -> St {
    t.iter()
        .map(|(k, n)| {
            let x = match (n, st.get(k)) {
                (Node::Dir, _) => X::Dir,
                (Node::File(c), Some(X::Fill(s, len))) if *c == pattern(*s, *len) => {
                    X::Fill(*s, *len)
                }
                (Node::File(c), _) => F::file(c.clone()),
            };
            (k.clone(), x)
        })
        .collect()
}

/// The end of life of a nearly full volume: the part aged to within `margin` cycles
/// of its endurance, then sessions of the staged script (a new seed each), every
/// session cut at one of its first 300 programs/erases (kind drawn, torn pages
/// unstable in every other session), and the volume mounted and checked after each
/// (every acknowledged byte, all or nothing, read-only only when the census calls for
/// it), the model taken from what it read; until it mounts read-only or `sessions`
/// pass. Then a clean read-only mount must show the same tree and refuse changes.
/// Returns the sessions run and whether the volume ended read-only.
fn wear_life<S: Shape>(
    seed: u64,
    endurance: u32,
    margin: u64,
    sessions: u32,
    rep: &mut Report,
) -> (u32, bool) {
    let part = Part {
        factory_bad: 2,
        endurance,
        grown: 0,
    };
    let (mut sim, mut st, _) = filled::<S>(seed, part, 1.5, &prep_tracked::<S>);
    age(&mut sim, seed, margin);
    let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
    for s in 0..sessions {
        let kind = CutKind::ALL[rng.below(5) as usize];
        let at = 1 + rng.below(300);
        let faults = FaultConfig {
            unstable_after_cut: s % 2 == 1,
            ..FaultConfig::default()
        };
        sim.arm(
            FaultPlan::seeded(rng.next())
                .with_cut(at, kind)
                .with_faults(faults),
        );
        let script = staged_script::<S, 4>(seed * 1000 + s as u64, 60);
        let r = run::<S, 4>(&mut sim, &st, &script, true);
        rep.runs += 1;
        let tag = format!(
            "wear life [{}] seed {seed} session {s} cut@{at} {kind:?}",
            S::NAME
        );
        match &r.stop {
            Some(Stop::Bad(m)) => {
                rep.failures.push(format!("{tag}: {m}"));
                return (s, false);
            }
            Some(Stop::Failed(m)) => *rep.failed.entry(m.clone()).or_default() += 1,
            _ => {}
        }
        for (k, v) in &r.refused {
            *rep.refused.entry(k).or_default() += v;
        }
        sim.cut_power();
        sim.power_on();
        sim.disarm();
        let mut fs = volume::<S, 4>(&mut sim);
        let checked: Result<(Tree, bool), String> = (|| {
            fs.mount().map_err(|e| format!("mount: {e:?}"))?;
            let census = S::census(fs.store());
            let t = observe(&mut *fs).map_err(|e| format!("observe: {e:?} ({census:?})"))?;
            match (
                matches(&t, &r.cur),
                r.intent.as_ref().map(|i| matches(&t, i)),
            ) {
                (Ok(()), _) | (_, Some(Ok(()))) => {}
                (Err(a), None) => return Err(format!("state: {a}")),
                (Err(a), Some(Err(b))) => {
                    return Err(format!("neither state: before: {a}; after: {b}"))
                }
            }
            if fs.read_only() && !census.genuinely_short() {
                return Err(format!("read-only with good blocks to spare: {census:?}"));
            }
            Ok((t, fs.read_only()))
        })();
        drop(fs);
        let (t, ro) = match checked {
            Ok(x) => x,
            Err(e) => {
                rep.failures.push(format!("{tag}: {e}"));
                return (s, false);
            }
        };
        let took = match &r.intent {
            Some(i) if matches(&t, &r.cur).is_err() => i,
            _ => &r.cur,
        };
        st = remodel(&t, took);
        if ro {
            rep.read_only += 1;
            let mut fs = volume::<S, 4>(&mut sim);
            let again: Result<(), String> = (|| {
                fs.mount()
                    .map_err(|e| format!("second read-only mount: {e:?}"))?;
                let t2 = observe(&mut *fs).map_err(|e| format!("second observe: {e:?}"))?;
                if t2 != t {
                    return Err("the second read-only mount shows another tree".into());
                }
                let w = fs.open("/w/t0", OpenOptions::new().write(true));
                if w.err() != Some(Error::ReadOnly) || fs.remove("/f0") != Err(Error::ReadOnly) {
                    return Err("a read-only volume took a change".into());
                }
                Ok(())
            })();
            drop(fs);
            if let Err(e) = again {
                rep.failures.push(format!("{tag}: {e}"));
            }
            println!(
                "wear life [{}] seed {seed}: read-only after {} sessions, {} blocks bad",
                S::NAME,
                s + 1,
                sim_bad(&sim)
            );
            return (s + 1, true);
        }
    }
    println!(
        "wear life [{}] seed {seed}: writable after {sessions} sessions, {} blocks bad",
        S::NAME,
        sim_bad(&sim)
    );
    (sessions, false)
}

// ---------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Program and erase failures through the script and the recovery mounts.
const FAILING: Cuts<'static> = Cuts {
    program_fail: 3_000,
    erase_fail: 20_000,
    ..EVERY
};

/// The gauntlet on a full TINY volume of a part with 4 factory bad blocks and 2 grown
/// while filling, programs failing at 0.3% and erases at 2% throughout: every cut kind
/// at every 3rd program/erase; on the Micron x40 shape every 11th.
#[test]
fn s52_bad_blocks_full_volume_gauntlet() {
    let mut rep = Report::default();
    gauntlet_sweep::<Tiny>(
        41,
        BAD_BLOCKS,
        Cuts {
            stride: 3,
            ..FAILING
        },
        &mut rep,
    );
    gauntlet_sweep::<Micron>(
        43,
        BAD_BLOCKS,
        Cuts {
            stride: 11,
            ..FAILING
        },
        &mut rep,
    );
    println!("{}", rep.summary());
    rep.assert_ok(true);
}

/// Review s51's random full-volume scripts on the part with bad blocks and failing
/// programs/erases: every cut kind at every 5th program/erase (seed 2); torn cuts
/// (every kind) at every 67th with a cut at every 5th program/erase of the recovery
/// mount (seed 5); every kind at every 37th with torn pages left unstable (seed 6).
#[test]
fn s52_bad_blocks_random_scripts_and_recovery_cuts() {
    let mut rep = Report::default();
    full_sweeps::<Tiny>(
        2..3,
        BAD_BLOCKS,
        40,
        Cuts {
            stride: 5,
            ..FAILING
        },
        &mut rep,
    );
    let rec = Cuts {
        kinds: &CutKind::ALL[1..],
        stride: 67,
        recovery: 5,
        ..FAILING
    };
    full_sweeps::<Tiny>(5..6, BAD_BLOCKS, 40, rec, &mut rep);
    let noisy = Cuts {
        stride: 37,
        noisy: true,
        ..FAILING
    };
    full_sweeps::<Tiny>(6..7, BAD_BLOCKS, 40, noisy, &mut rep);
    println!("{}", rep.summary());
    rep.assert_ok(true);
}

/// Wear-out while nearly full with staged records pending: the staged script on a
/// part aged to within 30 cycles of its endurance (every kind at every 29th
/// program/erase; the check accepts read-only only when the census calls for it); and
/// three volumes driven to the end of their life (a cut in every session).
#[test]
fn s52_worn_nearly_full_volume_with_staged_records() {
    let mut rep = Report::default();
    let worn = Cuts {
        worn: true,
        ..EVERY
    };
    worn_sweep::<Tiny>(7, 400, 30, 80, Cuts { stride: 29, ..worn }, &mut rep);
    let mut ended = 0;
    for seed in 1..4 {
        let (sessions, ro) = wear_life::<Tiny>(seed, 400, 30, 60, &mut rep);
        assert!(sessions > 0);
        ended += u32::from(ro);
    }
    println!("{}; {ended} of 3 lives ended read-only", rep.summary());
    rep.assert_ok(false);
}

/// More seeds of every one of 255 handles open on TINY while the volume fills (review
/// s51 swept one): seeds 12 and 13 on the healthy part, every kind at every 151st
/// program/erase; seed 14 on the part with bad blocks and failing programs/erases.
#[test]
fn s52_every_handle_open_more_seeds() {
    let mut rep = Report::default();
    let cuts = Cuts {
        stride: 151,
        ..EVERY
    };
    for seed in 12..14 {
        handles_sweep::<Tiny, 255>(seed, HEALTHY, 120, 6.0, cuts, &mut rep);
    }
    let failing = Cuts {
        stride: 151,
        ..FAILING
    };
    handles_sweep::<Tiny, 255>(14, BAD_BLOCKS, 120, 6.0, failing, &mut rep);
    println!("{}", rep.summary());
    rep.assert_ok(true);
}

/// The survey: `S52_WHAT=full|gauntlet|handles|worn|life S52_SHAPE=tiny|micron
/// S52_SEEDS=n S52_FROM=k S52_LEN=calls S52_STRIDE=s S52_RECOVERY=r S52_NOISY=1
/// S52_PF=ppm S52_EF=ppm S52_PART=healthy|bad cargo test --release -p stagefs-core
/// --all-features --test all review_s52::s52_survey -- --ignored --nocapture
/// --test-threads=1`.
#[test]
#[ignore = "survey: minutes"]
fn s52_survey() {
    let (from, n, len) = (
        env("S52_FROM", 100),
        env("S52_SEEDS", 4),
        env("S52_LEN", 60) as u32,
    );
    let what = std::env::var("S52_WHAT").unwrap_or_else(|_| "full".into());
    let shape = std::env::var("S52_SHAPE").unwrap_or_else(|_| "tiny".into());
    let part = match std::env::var("S52_PART").as_deref() {
        Ok("healthy") => HEALTHY,
        _ => BAD_BLOCKS,
    };
    let cuts = Cuts {
        stride: env("S52_STRIDE", 1),
        recovery: env("S52_RECOVERY", 0),
        noisy: env("S52_NOISY", 0) == 1,
        program_fail: env("S52_PF", 3_000) as u32,
        erase_fail: env("S52_EF", 20_000) as u32,
        worn: what == "worn",
        ..EVERY
    };
    let margin = env("S52_MARGIN", 30);
    let mut rep = Report::default();
    for seed in from..from + n {
        match (what.as_str(), shape.as_str()) {
            ("full", "tiny") => full_sweeps::<Tiny>(seed..seed + 1, part, len, cuts, &mut rep),
            ("full", _) => full_sweeps::<Micron>(seed..seed + 1, part, len, cuts, &mut rep),
            ("gauntlet", "tiny") => gauntlet_sweep::<Tiny>(seed, part, cuts, &mut rep),
            ("gauntlet", _) => gauntlet_sweep::<Micron>(seed, part, cuts, &mut rep),
            ("handles", "tiny") => handles_sweep::<Tiny, 255>(seed, part, len, 6.0, cuts, &mut rep),
            ("handles", _) => handles_sweep::<Micron, 16>(seed, part, len, 3.0, cuts, &mut rep),
            ("worn", "tiny") => worn_sweep::<Tiny>(seed, 400, margin, len, cuts, &mut rep),
            ("worn", _) => worn_sweep::<Micron>(seed, 400, margin, len, cuts, &mut rep),
            ("life", "tiny") => drop(wear_life::<Tiny>(seed, 400, margin, len, &mut rep)),
            ("life", _) => drop(wear_life::<Micron>(seed, 400, margin, len, &mut rep)),
            _ => panic!("S52_WHAT / S52_SHAPE"),
        }
        println!("after seed {seed}: {}", rep.summary());
    }
    println!("survey {what} {shape}: {}", rep.summary());
    rep.assert_ok(false);
}

/// The checker itself on a part with bad blocks: the uncut image is accepted, a model
/// one fill file or one tracked file off is rejected (also as the in-flight state beside
/// a wrong one); the truncate-open allowance takes a prefix of the rewrite only when the
/// old contents were empty; a part that programs nothing is never found writable (it
/// turns read-only, as its census calls for).
#[test]
fn s52_checker_rejects_wrong_states() {
    let (base, st, _) = filled::<Tiny>(77, BAD_BLOCKS, 1.5, &prep_tracked::<Tiny>);
    assert_eq!(
        check_after::<Tiny>(&mut base.clone(), &st, &None, false),
        Ok(Mounted::Writable)
    );
    let mut one = st.clone();
    let fill = one.keys().find(|k| k.starts_with("/f0/")).unwrap().clone();
    if let Some(X::Fill(s, _)) = one.get_mut(&fill) {
        *s += 1;
    }
    let mut two = st.clone();
    fmut(&mut two, "/w/t1").d = Rc::new(pattern(1, 3000));
    for m in [one, two] {
        assert!(check_after::<Tiny>(&mut base.clone(), &m, &None, false).is_err());
        assert!(check_after::<Tiny>(&mut base.clone(), &m, &Some(m.clone()), false).is_err());
    }
    let new = Rc::new(pattern(9, 300));
    let empty = F {
        hidden: Some(new.clone()),
        ..F::default()
    };
    assert!(file_ok(&new[..100], &empty) && file_ok(&[], &empty));
    assert!(!file_ok(&pattern(8, 100), &empty));
    let old = F {
        d: Rc::new(pattern(1, 50)),
        hidden: Some(new.clone()),
        ..F::default()
    };
    assert!(!file_ok(&new[..100], &old) && file_ok(&pattern(1, 50), &old));
    let mut sim = base.clone();
    let dead = FaultConfig {
        program_fail_ppm: 1_000_000,
        erase_fail_ppm: 1_000_000,
        ..Default::default()
    };
    sim.arm(FaultPlan::seeded(5).with_faults(dead));
    let r = check_after::<Tiny>(&mut sim, &st, &None, false);
    assert!(
        matches!(r, Err(_) | Ok(Mounted::ReadOnly)),
        "a part that programs nothing: {r:?}"
    );
}

/// FINDING (review s52): a healthy TINY volume filled to capacity (review s51's fill,
/// seed 1, no fault rates) whose part then grows 6 bad blocks (6 of the blocks holding
/// no valid page set to fail their next erase, `SimNand::fail_next_erase`; 20 steps
/// retire them) stays writable (`Health::Writable`: 52 good blocks, the shrink floor
/// `min_good_blocks` 48) with 427 pages in use over a capacity of 336, and every one of
/// its 120 removes is refused `NoSpace`, also after steps, syncs and remounts (the
/// handles survey on a part with bad blocks met the same at seed 100: 322 of 322
/// refused over three mounts). Nothing can be deleted, nothing written: a dead end on
/// a store that calls itself writable. Expected (oftl's "No dead ends"): deletes still
/// succeed down to the shrink floor, or the store turns read-only. With 4 such blocks
/// 2 removes of 120 were refused before the rest went through.
///
/// Run: `cargo test --release -p stagefs-core --all-features --test all
/// review_s52::s52_finding_grown_bad_blocks_leave_every_remove_refused -- --ignored
/// --nocapture`
#[test]
#[ignore = "finding: every remove refused NoSpace on a writable over-committed volume"]
fn s52_finding_grown_bad_blocks_leave_every_remove_refused() {
    let (mut sim, _, _) = filled::<Tiny>(1, HEALTHY, 0.0, &prep_tracked::<Tiny>);
    let empty: Vec<u32> = {
        let mut fs = volume::<Tiny, 4>(&mut sim);
        fs.mount().unwrap();
        let v = (fs.store().blocks().iter().enumerate())
            .filter(|(_, b)| !matches!(b.state(), BlockState::Reserved | BlockState::Bad))
            .filter(|(_, b)| b.valid() == 0)
            .map(|(i, _)| i as u32)
            .collect();
        fs.unmount().unwrap();
        v
    };
    for &b in empty.iter().take(6) {
        sim.fail_next_erase(BlockAddr(b));
    }
    let mut fs = volume::<Tiny, 4>(&mut sim);
    fs.mount().unwrap();
    let t = observe(&mut *fs).unwrap();
    for _ in 0..20 {
        fs.step(16).unwrap();
    }
    fs.sync().unwrap();
    fs.unmount().unwrap();
    fs.mount().unwrap();
    let c = Tiny::census(fs.store());
    println!("after the steps and a remount: {c:?}");
    assert!(c.over_committed() && c.good >= c.min_good && !fs.read_only());
    let (mut ok, mut refused) = (0, 0);
    for (k, n) in &t {
        if let Node::File(_) = n {
            match fs.remove(k) {
                Ok(()) => ok += 1,
                Err(Error::NoSpace) => refused += 1,
                Err(e) => panic!("remove {k}: {e:?}"),
            }
        }
    }
    println!(
        "removes: {ok} taken, {refused} refused NoSpace; now {:?}",
        Tiny::census(fs.store())
    );
    assert_eq!(
        refused, 0,
        "a writable volume (good blocks {} >= shrink floor {}) refused removes NoSpace",
        c.good, c.min_good
    );
}

/// FINDING (review s52): "Opening with `truncate` and the writes before the next
/// fsync/close land together: a cut in between leaves the old contents" (the crate's
/// guarantees) does not hold when the old contents are empty. On a healthy TINY volume:
/// `/a` exists, empty and durable; it is opened with `truncate` and 3,000 bytes are
/// written in two writes (2,100 + 900), not closed; another file is written and
/// fsynced; the power is cut (between operations). After the mount `/a` reads as
/// written so far instead of empty (as it did for 2,100 and 6,000 bytes in one write;
/// with 300 or 3,000 old bytes the old contents stay, as promised; writes of 100 and
/// 700 bytes stay held back). In the sweeps it shows as a `Torn(MostBits)` cut of the
/// one program of a put's write (new file, 2,100 or 6,000 bytes): the torn page reads
/// back and the unclosed rewrite is durable (full scripts seed 102, healthy part, cuts
/// 481, 1,065, 1,332 of 1,348; review s51 never cut with `MostBits`).
///
/// Run: `cargo test --release -p stagefs-core --all-features --test all
/// review_s52::s52_finding_truncate_open_of_an_empty_file_lands_before_its_close --
/// --ignored --nocapture`
#[test]
#[ignore = "finding: a truncate-open of an empty file shows its unclosed writes after a cut"]
fn s52_finding_truncate_open_of_an_empty_file_lands_before_its_close() {
    let mut sim = Tiny::sim(5, HEALTHY);
    let mut fs = volume::<Tiny, 4>(&mut sim);
    fs.format().unwrap();
    let f = fs
        .open("/a", OpenOptions::new().write(true).create(true))
        .unwrap();
    fs.close(f).unwrap();
    let trunc = OpenOptions::new().write(true).truncate(true);
    let f = fs.open("/a", trunc).unwrap();
    let new = pattern(2, 3000);
    fs.write(f, &new[..2100]).unwrap();
    fs.write(f, &new[2100..]).unwrap();
    let g = fs
        .open("/b", OpenOptions::new().write(true).create(true))
        .unwrap();
    fs.write(g, &pattern(3, 5000)).unwrap();
    fs.fsync(g).unwrap();
    drop(fs);
    sim.cut_power();
    sim.power_on();
    let mut fs = volume::<Tiny, 4>(&mut sim);
    fs.mount().unwrap();
    let t = observe(&mut *fs).unwrap();
    let Node::File(got) = &t["/a"] else {
        panic!("/a is a directory")
    };
    let what = if *got == new {
        "the unclosed rewrite, whole".to_string()
    } else if new.starts_with(got) {
        format!("a {}-byte prefix of the unclosed rewrite", got.len())
    } else {
        "other bytes".to_string()
    };
    assert!(
        got.is_empty(),
        "/a was empty and durable, opened with truncate, written, never closed: after a \
         cut it reads {} bytes: {what}",
        got.len()
    );
}

/// FINDING (review s52, the first finding's state at mount): a volume over its
/// capacity after grown bad blocks, with staged records in its log, mounts read-only
/// mount after mount while its store is writable (`Health::Writable`, 43 good blocks,
/// `min_good_blocks` 40): the replay of the staged records finds no room and falls
/// back read-only (`Stage::replay`, "until a mount finds room"), and no mount finds
/// it; a read-only volume refuses the removes that would make room. Script: review
/// s51's full-volume script, seed 104, 60 calls, on the part with bad blocks
/// (`BAD_BLOCKS`, `FAILING` rates), cut (clean) at program/erase 741, its recovery
/// mount cut (clean) at its 322nd. Expected: writable (the store is, with good blocks
/// to spare), or read-only only as the store's census calls for. The recovery-cut
/// survey (seed 104, every 37th cut, every 7th recovery program/erase) met read-only
/// at two mounts in a row after 8,373 of 18,770 cut runs.
///
/// Run: `cargo test --release -p stagefs-core --all-features --test all
/// review_s52::s52_finding_over_committed_volume_mounts_read_only_again_and_again --
/// --ignored --nocapture`
#[test]
#[ignore = "finding: read-only at every mount on a writable store (staged records, over capacity)"]
fn s52_finding_over_committed_volume_mounts_read_only_again_and_again() {
    let seed = 104;
    let (base, st, _) = filled::<Tiny>(seed, BAD_BLOCKS, 1.5, &prep_tracked::<Tiny>);
    let script = full_script::<Tiny, 4>(seed, 60);
    let faults = FAILING.faults();
    let mut sim = base.clone();
    sim.arm(
        FaultPlan::seeded(seed)
            .with_cut(741, CutKind::Clean)
            .with_faults(faults),
    );
    let _ = run::<Tiny, 4>(&mut sim, &st, &script, true);
    sim.cut_power();
    sim.power_on();
    sim.disarm();
    sim.arm(
        FaultPlan::seeded(322)
            .with_cut(322, CutKind::Clean)
            .with_faults(faults),
    );
    let _ = volume::<Tiny, 4>(&mut sim).mount();
    sim.cut_power();
    sim.power_on();
    sim.disarm();
    let mut seen = Vec::new();
    for i in 0..5 {
        let mut fs = volume::<Tiny, 4>(&mut sim);
        fs.mount().unwrap();
        let c = Tiny::census(fs.store());
        let ro = fs.read_only();
        let steps: Vec<_> = (0..8).map(|_| fs.step(64)).collect();
        let remove = fs.remove("/f0/n0008");
        println!("mount {i}: read-only {ro}, census {c:?}, steps {steps:?}, remove {remove:?}");
        seen.push(ro && c.ro.is_none() && !c.genuinely_short());
        if i % 2 == 1 {
            let _ = fs.unmount();
        }
    }
    assert!(
        !seen.iter().any(|&x| x),
        "read-only on a writable store with good blocks to spare at mounts {seen:?}"
    );
}
