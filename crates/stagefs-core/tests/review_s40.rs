//! Independent review (s40) of `stagefs-core` and the oftl store beneath it: fault
//! shapes and API sequences the earlier reviews did not have.
//!
//! Findings (each a test that FAILS on the reviewed code, 264a89a):
//! - `two_erased_bit_flips_after_the_last_staged_sector_make_the_volume_unmountable`
//!   (high): a log page closed by a checkpoint leaves never-programmed sectors inside
//!   the staging log's live range; 2 zero bits in one of them (the simulator's F5,
//!   "noisy but survivable") make oftl's log read answer `Corrupted`, and after a
//!   crash the volume fails to mount, `mount_repair` too.
//! - `step_with_zero_budget_never_goes_idle` (low): `Fs::step(0)` keeps answering
//!   `true` ("calling again now would do useful work") while doing nothing, so
//!   `while fs.step(0)? {}` never ends.
//! - `a_cut_can_tear_one_unacknowledged_write_with_older_staged_bytes` (low, docs): a
//!   cut can leave one unacknowledged write torn (older staged bytes replayed into its
//!   middle), where the crate docs speak of whole writes ("some of the writes made
//!   since").
//!
//! Probes that held (`probe_*`):
//! - a cut of every kind at every program/erase of a script of attributes (files and
//!   directories, at `ATTR_MAX`, set on open dirty inline files and on a pending
//!   truncate-at-open object), renames carrying them (also over a name, of the parent
//!   directory), holes in an inline file, a seek past the end that promotes it,
//!   lengthening and shrinking truncates of staged files, an unmount/mount cycle, steps
//!   and `step_all`;
//! - random scripts over the whole API (up to four handles, second opens / renames /
//!   removes of open files refused with `Busy`, the table full, stale handles after
//!   close and remount, renames of directories with open files below, holes,
//!   truncates, attributes, steps with budgets 0/1/4/16, `sync`, `step_all`,
//!   unmount/mount and mount-while-mounted; 6 or 14 names, enough to fill the staging
//!   tables), each swept with a cut of every kind at every program/erase, checked
//!   against a model of names, bytes and attributes (per byte for the one file with
//!   unacknowledged writes, see the third finding): at review time 1,300 seeds of
//!   70-150 calls; with a second cut at every program/erase of the recovery mount
//!   (130 seeds); on a noisy device, in the session and in the recovery (`noisy`
//!   300 seeds: one read-only mount, the known checkpoint-block residual below; and
//!   `noisy` without erased flips, see the end of this list);
//! - a cut at every program/erase of `format` over a volume with staged records: the
//!   mount fails cleanly or shows an empty volume, and formatting again works;
//! - 60-level directories (paths past the directory cache): a cut at every
//!   program/erase of renames at the top and in the middle with a file open below, a
//!   refused move into itself, removal bottom-up;
//! - `step` loops end at every fill level (budgets 1, 4, 64, and a full volume) and
//!   idle means idle;
//! - a full volume (two shapes, three seeds): seventeen kinds of calls succeed or
//!   change nothing (in the session and after a cut), and deletes always work;
//! - a one-slot handle table: refusals create nothing, stale handles are refused.
//!
//! Notes, not findings: on `TINY` the volume holds about 60 files of 8,000 bytes (23%
//! of the raw part: the fixed reserves of a 64-block part). With its 4 checkpoint
//! blocks, one failed program in each of three of them (`fail_next_program`) leaves the
//! store `ReadOnly(CheckpointBlocks)` for good although the block table lists no bad
//! block; a torn cut plus one failed program left one noisy run read-only for one
//! mount (DESIGN 5.2 describes this residual; the W25N01GV has 16 checkpoint blocks).
//! The random scripts' `explore_seed` (ignored) replays one cut of one seed.

#![allow(dead_code)]

use crate::support;

use nand_hal::sim::{profile, CutKind, FaultPlan, SimNand, TornMode};
use stagefs_core::oracle::power_loss;
use stagefs_core::{Error, Kind, OpenOptions, SeekFrom, ATTR_MAX, INLINE_MAX};
use std::collections::BTreeMap;
use support::{create, pattern, rw, vol, write_file, Sim, Vol};

type E = Error<nand_hal::sim::SimError>;

fn fresh(seed: u64) -> Sim {
    SimNand::heap(profile::TINY, FaultPlan::seeded(seed))
}

fn crash(sim: &mut Sim) {
    sim.cut_power();
    sim.power_on();
}

/// A node of the observed tree: a directory's attributes, or a file's bytes and
/// attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    Dir(Vec<u8>),
    File(Vec<u8>, Vec<u8>),
}

type Tree = BTreeMap<String, Node>;

fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

fn read_file(fs: &mut Vol<'_>, p: &str) -> Result<Vec<u8>, E> {
    let f = fs.open(p, OpenOptions::new().read(true))?;
    let mut out = Vec::new();
    let mut buf = [0u8; 777];
    loop {
        let k = match fs.read(f, &mut buf) {
            Ok(k) => k,
            Err(e) => {
                let _ = fs.close(f);
                return Err(e);
            }
        };
        if k == 0 {
            break;
        }
        out.extend_from_slice(&buf[..k]);
    }
    fs.close(f)?;
    Ok(out)
}

/// The whole tree (no handles may be open on the files).
fn tree(fs: &mut Vol<'_>) -> Result<Tree, E> {
    let mut t = Tree::new();
    let mut todo = vec!["/".to_string()];
    while let Some(d) = todo.pop() {
        let mut names = Vec::new();
        for e in fs.read_dir(&d)? {
            let e = e?;
            names.push((e.name().to_string(), e.kind));
        }
        let mut uniq: Vec<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
        uniq.sort_unstable();
        uniq.dedup();
        assert_eq!(uniq.len(), names.len(), "read_dir({d}) listed a name twice");
        let md = fs.metadata(&d)?;
        assert_eq!(md.kind, Kind::Dir, "metadata of the directory {d}");
        for (n, k) in names {
            let p = join(&d, &n);
            let md = fs.metadata(&p)?;
            assert_eq!(md.kind, k, "kind of {p}");
            match k {
                Kind::Dir => {
                    t.insert(p.clone(), Node::Dir(md.attributes().to_vec()));
                    todo.push(p);
                }
                Kind::File => {
                    let data = read_file(fs, &p)?;
                    assert_eq!(md.size, data.len() as u64, "size of {p}");
                    t.insert(p, Node::File(data, md.attributes().to_vec()));
                }
            }
        }
    }
    Ok(t)
}

fn show(t: &Tree) -> String {
    t.iter()
        .map(|(k, v)| match v {
            Node::Dir(a) => format!("{k}/ a{}", a.len()),
            Node::File(d, a) => format!("{k} {}B a{:?}", d.len(), a.first()),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The states a script passes through: after each call, the tree its handles show,
/// and whether all of it is durable.
struct States {
    v: Vec<(Tree, bool)>,
    m: Tree,
}

impl States {
    fn new() -> Self {
        States {
            v: vec![(Tree::new(), true)],
            m: Tree::new(),
        }
    }
    fn done(&mut self, durable: bool) {
        self.v.push((self.m.clone(), durable));
    }
    fn file(&mut self, p: &str) -> &mut Vec<u8> {
        match self.m.get_mut(p) {
            Some(Node::File(d, _)) => d,
            _ => panic!("no file {p}"),
        }
    }
    fn attrs(&mut self, p: &str) -> &mut Vec<u8> {
        match self.m.get_mut(p) {
            Some(Node::File(_, a)) | Some(Node::Dir(a)) => a,
            _ => panic!("no node {p}"),
        }
    }
    fn write_at(&mut self, p: &str, at: usize, data: &[u8]) {
        let f = self.file(p);
        if f.len() < at + data.len() {
            f.resize(at + data.len(), 0);
        }
        f[at..at + data.len()].copy_from_slice(data);
    }
    fn resize(&mut self, p: &str, n: usize) {
        self.file(p).resize(n, 0);
    }
    fn rename(&mut self, from: &str, to: &str) {
        let moved: Vec<(String, Node)> = self
            .m
            .iter()
            .filter(|(k, _)| *k == from || k.starts_with(&format!("{from}/")))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (k, _) in &moved {
            self.m.remove(k);
        }
        for (k, v) in moved {
            self.m.insert(format!("{to}{}", &k[from.len()..]), v);
        }
    }
}

/// Runs `script` uncut (checking its final tree against the model), then with a cut
/// at every program/erase of it, of each kind in `kinds`; after each cut the volume
/// must mount and show one of the states between the last durable one before the cut
/// and the one the interrupted call would have made. Returns the failures.
fn sweep(
    seed: u64,
    kinds: &[CutKind],
    stride: u64,
    script: fn(&mut Vol<'_>, &mut States) -> Result<(), E>,
) -> Vec<String> {
    let mut base = fresh(seed);
    {
        let mut fs = vol(&mut base);
        fs.format().unwrap();
        fs.unmount().unwrap();
    }
    let mut all = States::new();
    let n = {
        let mut s = base.clone();
        s.arm(FaultPlan::seeded(1));
        {
            let mut fs = vol(&mut s);
            fs.mount().unwrap();
            script(&mut fs, &mut all).unwrap();
            let t = tree(&mut fs).unwrap();
            assert_eq!(show(&t), show(&all.m), "uncut run");
            assert_eq!(t, all.m, "uncut run");
        }
        s.ops_since_arm()
    };
    let all = all.v;
    println!("{n} programs/erases, {} states", all.len());
    let mut fails = Vec::new();
    let mut at = 1;
    while at <= n + 1 {
        for &kind in kinds {
            let mut s = base.clone();
            s.arm(FaultPlan::seeded(at * 31 + 7).with_cut(at, kind));
            let mut st = States::new();
            {
                let mut fs = vol(&mut s);
                if let Err(e) = fs.mount() {
                    assert!(power_loss(&e), "mount {e:?}");
                } else {
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        script(&mut fs, &mut st)
                    }));
                    match r {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) if power_loss(&e) => {}
                        Ok(Err(e)) => {
                            fails.push(format!("cut {at} {kind:?}: {e:?} is not the cut"));
                            continue;
                        }
                        Err(_) => {
                            fails.push(format!("cut {at} {kind:?}: script panicked"));
                            continue;
                        }
                    }
                }
            }
            let reached = st.v.len();
            crash(&mut s);
            s.disarm();
            let mut fs = vol(&mut s);
            if let Err(e) = fs.mount() {
                fails.push(format!("cut {at} {kind:?}: mount {e:?}"));
                continue;
            }
            let got = match tree(&mut fs) {
                Ok(t) => t,
                Err(e) => {
                    fails.push(format!("cut {at} {kind:?}: read {e:?}"));
                    continue;
                }
            };
            let from = (0..reached).rev().find(|&k| all[k].1).unwrap_or(0);
            let to = reached.min(all.len() - 1);
            if !all[from..=to].iter().any(|(t, _)| *t == got) {
                fails.push(format!(
                    "cut {at} {kind:?} (states {from}..={to}): got {}\n   last durable {}",
                    show(&got),
                    show(&all[from].0)
                ));
            }
            // The volume keeps working after the recovery.
            if let Err(e) = fs
                .open("/after", create())
                .and_then(|f| fs.write(f, b"x").and_then(|_| fs.close(f)))
            {
                fails.push(format!("cut {at} {kind:?}: write after recovery {e:?}"));
            }
        }
        at += stride;
    }
    fails
}

macro_rules! refused {
    ($e:expr, $want:expr) => {{
        match $e {
            Err(e) if e == $want => {}
            Err(e) => return Err(e),
            Ok(_) => panic!("{} not refused", stringify!($e)),
        }
    }};
}

/// Attributes on files and directories carried through renames (also over an existing
/// name and of the parent directory), set while the file is open (inline dirty, a
/// staged object, a pending truncate-at-open object); holes in an inline file, a seek
/// past the end that promotes it; truncates that lengthen a staged file; an
/// unmount/mount cycle in the middle; steps and `step_all` between.
fn attrs_holes_script(fs: &mut Vol<'_>, st: &mut States) -> Result<(), E> {
    fs.create_dir("/d")?;
    st.m.insert("/d".into(), Node::Dir(vec![]));
    st.done(true);
    fs.set_attributes("/d", &[0xD1; 5])?;
    *st.attrs("/d") = vec![0xD1; 5];
    st.done(true);
    let f = fs.open("/d/f", create())?;
    st.m.insert("/d/f".into(), Node::File(vec![], vec![]));
    st.done(true);
    fs.write(f, &pattern(1, 100))?;
    st.write_at("/d/f", 0, &pattern(1, 100));
    st.done(false);
    fs.close(f)?;
    st.done(true);
    fs.set_attributes("/d/f", &[0xF1; ATTR_MAX])?;
    *st.attrs("/d/f") = vec![0xF1; ATTR_MAX];
    st.done(true);
    let h = fs.open("/d/f", rw())?;
    st.done(true);
    refused!(fs.open("/d/f", OpenOptions::new().read(true)), Error::Busy);
    refused!(fs.remove("/d/f"), Error::Busy);
    refused!(fs.rename("/d/f", "/d/f2"), Error::Busy);
    // A hole in the inline file, staged.
    fs.seek(h, SeekFrom::Start(200))?;
    fs.write(h, &pattern(2, 10))?;
    st.write_at("/d/f", 200, &pattern(2, 10));
    st.done(false);
    // Attributes of the open, dirty inline file: the entry on flash keeps its bytes.
    fs.set_attributes("/d/f", &[0xF3; 9])?;
    *st.attrs("/d/f") = vec![0xF3; 9];
    {
        // Durable now: the old bytes with the new attributes.
        let mut alt = st.m.clone();
        if let Some(Node::File(d, _)) = alt.get_mut("/d/f") {
            *d = pattern(1, 100);
        }
        st.v.push((alt, true));
    }
    st.done(false);
    fs.fsync(h)?;
    st.done(true);
    // Past the end and beyond INLINE_MAX: promoted, with a hole.
    fs.seek(h, SeekFrom::Start(1000))?;
    fs.write(h, &pattern(3, 20))?;
    st.write_at("/d/f", 1000, &pattern(3, 20));
    st.done(false);
    fs.fsync(h)?;
    st.done(true);
    fs.truncate(h, 5000)?;
    st.resize("/d/f", 5000);
    st.done(true);
    fs.seek(h, SeekFrom::End(0))?;
    for k in 0..3 {
        let r = pattern(10 + k, 64);
        let at = st.file("/d/f").len();
        fs.write(h, &r)?;
        st.write_at("/d/f", at, &r);
        st.done(false);
        fs.fsync(h)?;
        st.done(true);
    }
    // Lengthen the staged file, then write across the old and the new end.
    fs.truncate(h, 6000)?;
    st.resize("/d/f", 6000);
    st.done(true);
    fs.seek(h, SeekFrom::Start(5990))?;
    fs.write(h, &pattern(4, 30))?;
    st.write_at("/d/f", 5990, &pattern(4, 30));
    st.done(false);
    fs.fsync(h)?;
    st.done(true);
    fs.step(1)?;
    st.done(true);
    fs.set_attributes("/d/f", &[0xF2; 7])?;
    *st.attrs("/d/f") = vec![0xF2; 7];
    st.done(true);
    // Into the zeros of the lengthened region, then shrink below it and grow again.
    fs.seek(h, SeekFrom::Start(5500))?;
    fs.write(h, &pattern(5, 16))?;
    st.write_at("/d/f", 5500, &pattern(5, 16));
    st.done(false);
    fs.fsync(h)?;
    st.done(true);
    fs.truncate(h, 5508)?;
    st.resize("/d/f", 5508);
    st.done(true);
    fs.truncate(h, 7000)?;
    st.resize("/d/f", 7000);
    st.done(true);
    fs.close(h)?;
    st.done(true);
    fs.rename("/d/f", "/d/g")?;
    st.rename("/d/f", "/d/g");
    st.done(true);
    fs.rename("/d", "/e")?;
    st.rename("/d", "/e");
    st.done(true);
    let h = fs.open("/e/h", OpenOptions::new().write(true).create_new(true))?;
    st.m.insert("/e/h".into(), Node::File(vec![], vec![]));
    st.done(true);
    fs.write(h, &pattern(6, 50))?;
    st.write_at("/e/h", 0, &pattern(6, 50));
    st.done(false);
    fs.close(h)?;
    st.done(true);
    fs.set_attributes("/e/h", &[0x11; 3])?;
    *st.attrs("/e/h") = vec![0x11; 3];
    st.done(true);
    fs.rename("/e/g", "/e/h")?;
    st.m.remove("/e/h");
    st.rename("/e/g", "/e/h");
    st.done(true);
    fs.unmount()?;
    st.done(true);
    fs.mount()?;
    st.done(true);
    // Truncate at open, grown past INLINE_MAX (a pending object), attributes set
    // meanwhile: they must survive the close that adopts the new object.
    let old = st.m.get("/e/h").cloned().unwrap();
    let h = fs.open("/e/h", create().truncate(true))?;
    st.m.insert(
        "/e/h".into(),
        Node::File(
            vec![],
            match &old {
                Node::File(_, a) => a.clone(),
                _ => unreachable!(),
            },
        ),
    );
    st.done(false);
    fs.write(h, &pattern(7, 300))?;
    st.write_at("/e/h", 0, &pattern(7, 300));
    st.done(false);
    fs.step(2)?;
    st.done(false);
    fs.set_attributes("/e/h", &[0x22; 4])?;
    *st.attrs("/e/h") = vec![0x22; 4];
    {
        let mut alt = st.m.clone();
        if let (Some(Node::File(d, _)), Node::File(od, _)) = (alt.get_mut("/e/h"), &old) {
            *d = od.clone();
        }
        st.v.push((alt, true));
    }
    st.done(false);
    fs.write(h, &pattern(8, 64))?;
    st.write_at("/e/h", 300, &pattern(8, 64));
    st.done(false);
    fs.close(h)?;
    st.done(true);
    fs.step_all()?;
    st.done(true);
    let h = fs.open("/e/h", rw())?;
    st.done(true);
    fs.truncate(h, 100)?;
    st.resize("/e/h", 100);
    st.done(true);
    fs.truncate(h, 400)?;
    st.resize("/e/h", 400);
    st.done(true);
    fs.close(h)?;
    st.done(true);
    // Exactly INLINE_MAX, then one more byte appended (promoted by an append).
    let k = fs.open("/e/k", create())?;
    st.m.insert("/e/k".into(), Node::File(vec![], vec![]));
    st.done(true);
    fs.write(k, &pattern(9, INLINE_MAX))?;
    st.write_at("/e/k", 0, &pattern(9, INLINE_MAX));
    st.done(false);
    fs.close(k)?;
    st.done(true);
    let k = fs.open("/e/k", rw().append(true))?;
    st.done(true);
    fs.write(k, b"!")?;
    st.write_at("/e/k", INLINE_MAX, b"!");
    st.done(false);
    fs.fsync(k)?;
    st.done(true);
    fs.set_attributes("/e", &[0xE0; ATTR_MAX])?;
    *st.attrs("/e") = vec![0xE0; ATTR_MAX];
    st.done(true);
    fs.close(k)?;
    st.done(true);
    fs.remove("/e/k")?;
    st.m.remove("/e/k");
    st.done(true);
    fs.rename("/e/h", "/top")?;
    st.rename("/e/h", "/top");
    st.done(true);
    fs.remove_dir("/e")?;
    st.m.remove("/e");
    st.done(true);
    Ok(())
}

/// Probe: a cut (clean and every torn mode) at every program/erase of
/// `attrs_holes_script`: attributes survive every rename and every commit of the
/// entry's contents, holes read as zeros, and lengthening truncates of staged files
/// neither lose nor resurrect bytes.
#[test]
fn probe_cut_sweep_attributes_holes_and_lengthening_truncates() {
    let fails = sweep(4001, &CutKind::ALL, 1, attrs_holes_script);
    assert!(
        fails.is_empty(),
        "{} failures:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

// ---------------------------------------------------------------------------------
// Random scripts over the whole API, each swept with a cut at every program/erase.

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
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}

/// A model handle.
#[derive(Clone)]
struct Mh {
    f: stagefs_core::File,
    path: String,
    read: bool,
    append: bool,
    pos: u64,
}

/// What a script's model knows after each call: the tree the handles show (`cur`),
/// the durable tree (`dur`), and for the one file with changes not yet durable, every
/// contents a cut may leave it with.
#[derive(Clone)]
struct Snap {
    cur: Tree,
    dur: Tree,
    dirty: Option<(String, Vec<Node>)>,
}

struct Walk {
    cur: Tree,
    dur: Tree,
    dirty: Option<(String, Vec<Node>)>,
    hs: Vec<Option<Mh>>,
    closed: Vec<stagefs_core::File>,
    snaps: Vec<Snap>,
    log: Vec<String>,
}

const WDIRS: [&str; 3] = ["/d0", "/d1", "/d0/s"];
const WFILES: [&str; 6] = ["/a", "/b", "/d0/a", "/d0/c", "/d1/b", "/d0/s/z"];
/// More names (odd seeds): enough to fill the staging tables (8 objects, 8 inline
/// files) between patches.
const WFILES_MANY: [&str; 14] = [
    "/a", "/b", "/c", "/e", "/g", "/d0/a", "/d0/c", "/d0/e", "/d1/b", "/d1/c", "/d1/e", "/d0/s/z",
    "/d0/s/y", "/d0/s/x",
];

fn parent(p: &str) -> &str {
    match p.rfind('/') {
        Some(0) => "/",
        Some(i) => &p[..i],
        None => "/",
    }
}

fn content(t: &Tree, p: &str) -> Vec<u8> {
    match t.get(p) {
        Some(Node::File(d, _)) => d.clone(),
        _ => panic!("no file {p}"),
    }
}

fn put(n: &mut Node, at: usize, data: &[u8]) {
    if let Node::File(d, _) = n {
        if d.len() < at + data.len() {
            d.resize(at + data.len(), 0);
        }
        d[at..at + data.len()].copy_from_slice(data);
    }
}

impl Walk {
    fn new() -> Self {
        Walk {
            cur: Tree::new(),
            dur: Tree::new(),
            dirty: None,
            hs: vec![None, None, None, None],
            closed: Vec::new(),
            snaps: Vec::new(),
            log: Vec::new(),
        }
    }
    fn snap(&mut self) {
        self.snaps.push(Snap {
            cur: self.cur.clone(),
            dur: self.dur.clone(),
            dirty: self.dirty.clone(),
        });
    }
    /// The dirty file is durable now.
    fn settle(&mut self) {
        if let Some((p, _)) = self.dirty.take() {
            if let Some(n) = self.cur.get(&p) {
                self.dur.insert(p, n.clone());
            }
        }
    }
    fn open_slot(&self, p: &str) -> Option<usize> {
        self.hs
            .iter()
            .position(|h| h.as_ref().is_some_and(|h| h.path == p))
    }
}

/// Runs a random script of `steps` calls from `seed` on a mounted, empty volume,
/// checking every result against the model; `Err` on the first unexpected error (the
/// cut, in a cut run).
fn walk(fs: &mut Vol<'_>, seed: u64, steps: usize, w: &mut Walk) -> Result<(), E> {
    let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    w.snap();
    for step in 0..steps {
        let dirty_path = w.dirty.as_ref().map(|d| d.0.clone());
        let mut k = r.below(100);
        let any_open = w.hs.iter().any(|h| h.is_some());
        if (22..62).contains(&k) && !any_open {
            k = 9 + k % 13;
        }
        macro_rules! log {
            ($($t:tt)*) => { w.log.push(format!("{step}: {}", format!($($t)*))) };
        }
        if k < 6 {
            // mkdir
            let cands: Vec<&str> = WDIRS
                .iter()
                .copied()
                .filter(|p| !matches!(w.cur.get(*p), Some(Node::File(..))))
                .collect();
            if cands.is_empty() {
                continue;
            }
            let p = *r.pick(&cands);
            let pp = parent(p);
            let want = if w.cur.contains_key(p) {
                Err(Error::Exists)
            } else if pp != "/" && !w.cur.contains_key(pp) {
                Err(Error::NotFound)
            } else {
                Ok(())
            };
            log!("mkdir {p} -> {want:?}");
            let got = fs.create_dir(p);
            let got = match (got, want.is_ok()) {
                (Err(e), true) => return Err(e),
                (got, _) => got,
            };
            assert_eq!(got, want, "seed {seed} step {step}: mkdir {p}");
            if want.is_ok() {
                w.cur.insert(p.into(), Node::Dir(vec![]));
                w.dur.insert(p.into(), Node::Dir(vec![]));
            }
        } else if k < 9 {
            // rmdir (only when nothing is dirty or open below)
            let p = *r.pick(&WDIRS);
            if !w.cur.contains_key(p) {
                continue;
            }
            let empty = !w.cur.keys().any(|q| q.starts_with(&format!("{p}/")));
            let want = if empty { Ok(()) } else { Err(Error::NotEmpty) };
            log!("rmdir {p} -> {want:?}");
            let got = fs.remove_dir(p);
            let got = match (got, want.is_ok()) {
                (Err(e), true) => return Err(e),
                (got, _) => got,
            };
            assert_eq!(got, want, "seed {seed} step {step}: rmdir {p}");
            if want.is_ok() {
                w.cur.remove(p);
                w.dur.remove(p);
            }
        } else if k < 22 {
            // open
            let names: &[&str] = if seed % 2 == 1 { &WFILES_MANY } else { &WFILES };
            let cands: Vec<&str> = names
                .iter()
                .copied()
                .filter(|p| {
                    let pp = parent(p);
                    pp == "/" || matches!(w.cur.get(pp), Some(Node::Dir(_)))
                })
                .filter(|p| !matches!(w.cur.get(*p), Some(Node::Dir(_))))
                .collect();
            let p = *r.pick(&cands);
            let exists = w.cur.contains_key(p);
            let truncate = exists && r.below(5) == 0 && dirty_path.is_none();
            let append = r.below(4) == 0;
            let read = true;
            let o = rw().create(true).truncate(truncate).append(append);
            let busy = w.open_slot(p).is_some();
            let full = w.hs.iter().all(|h| h.is_some());
            if busy && !full {
                log!("open {p} again -> Busy");
                let got = fs.open(p, o);
                match got {
                    Err(Error::Busy) => {}
                    Err(e) => return Err(e),
                    Ok(_) => panic!("seed {seed} step {step}: second open of {p}"),
                }
                w.snap();
                continue;
            }
            if full {
                log!("open {p} -> TooManyOpen");
                match fs.open(p, o) {
                    Err(Error::TooManyOpen) => {}
                    Err(e) => return Err(e),
                    Ok(_) => panic!("seed {seed} step {step}: open past the table"),
                }
                assert_eq!(fs.metadata(p).is_ok(), exists, "refused open created {p}");
                w.snap();
                continue;
            }
            log!("open {p} trunc {truncate} append {append}");
            let f = fs.open(p, o)?;
            if !exists {
                w.cur.insert(p.into(), Node::File(vec![], vec![]));
                w.dur.insert(p.into(), Node::File(vec![], vec![]));
            }
            if truncate {
                let old = w.dur.get(p).cloned().unwrap();
                if let Some(Node::File(d, _)) = w.cur.get_mut(p) {
                    d.clear();
                }
                let now = w.cur.get(p).cloned().unwrap();
                w.dirty = Some((p.to_string(), vec![old, now]));
            }
            let slot = f_slot(&w.hs);
            w.hs[slot] = Some(Mh {
                f,
                path: p.into(),
                read,
                append,
                pos: 0,
            });
        } else if k < 45 {
            // write through an open handle
            let open: Vec<usize> = (0..4).filter(|&i| w.hs[i].is_some()).collect();
            if open.is_empty() {
                continue;
            }
            let i = *r.pick(&open);
            let h = w.hs[i].clone().unwrap();
            if let Some(d) = &dirty_path {
                if *d != h.path {
                    // One file with undurable changes at a time: commit the other.
                    let j = w.open_slot(d).unwrap();
                    let g = w.hs[j].as_ref().unwrap().f;
                    log!("fsync {d}");
                    fs.fsync(g)?;
                    w.settle();
                    w.snap();
                }
            }
            if w.dirty.as_ref().is_some_and(|d| d.1.len() > 4) {
                log!("fsync {} (cap)", h.path);
                fs.fsync(h.f)?;
                w.settle();
                w.snap();
            }
            let size = content(&w.cur, &h.path).len() as u64;
            let len = *r.pick(&[1usize, 7, 64, 64, 200, 300, 2100, 4000]);
            let at = match r.below(5) {
                0 => size,
                1 => r.below(size + 1),
                2 => size + r.below(300),
                3 => size + 2000 + r.below(3000),
                _ => h.pos,
            };
            if size + len as u64 > 24_000 || at + len as u64 > 24_000 {
                continue;
            }
            if at != h.pos {
                fs.seek(h.f, SeekFrom::Start(at))?;
            }
            let data = pattern(r.next() as u32, len);
            let at = if h.append { size } else { at };
            log!("write {} at {at} len {len}", h.path);
            assert_eq!(fs.write(h.f, &data)?, len);
            let mut possible = match w.dirty.take() {
                Some((_, v)) => v,
                None => vec![w.dur.get(&h.path).cloned().unwrap()],
            };
            let more: Vec<Node> = possible
                .iter()
                .map(|n| {
                    let mut n = n.clone();
                    put(&mut n, at as usize, &data);
                    n
                })
                .collect();
            possible.extend(more);
            possible.dedup();
            put(w.cur.get_mut(&h.path).unwrap(), at as usize, &data);
            w.dirty = Some((h.path.clone(), possible));
            w.hs[i].as_mut().unwrap().pos = at + len as u64;
        } else if k < 50 {
            // read back through a handle
            let open: Vec<usize> = (0..4).filter(|&i| w.hs[i].is_some()).collect();
            if open.is_empty() {
                continue;
            }
            let i = *r.pick(&open);
            let h = w.hs[i].clone().unwrap();
            log!("read {}", h.path);
            fs.seek(h.f, SeekFrom::Start(0))?;
            let mut out = Vec::new();
            let mut buf = vec![0u8; 1500];
            loop {
                let n = fs.read(h.f, &mut buf)?;
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&buf[..n]);
            }
            let want = content(&w.cur, &h.path);
            assert_eq!(
                out.len(),
                want.len(),
                "seed {seed} step {step}: read length of {}",
                h.path
            );
            assert!(out == want, "seed {seed} step {step}: read of {}", h.path);
            assert_eq!(fs.len(h.f)?, want.len() as u64);
            w.hs[i].as_mut().unwrap().pos = out.len() as u64;
        } else if k < 57 {
            // fsync or close
            let open: Vec<usize> = (0..4).filter(|&i| w.hs[i].is_some()).collect();
            if open.is_empty() {
                continue;
            }
            let i = *r.pick(&open);
            let h = w.hs[i].clone().unwrap();
            if r.below(2) == 0 {
                log!("fsync {}", h.path);
                fs.fsync(h.f)?;
            } else {
                log!("close {}", h.path);
                fs.close(h.f)?;
                w.hs[i] = None;
                w.closed.push(h.f);
            }
            if dirty_path.as_deref() == Some(h.path.as_str()) {
                w.settle();
            }
        } else if k < 62 {
            // truncate through a handle
            let open: Vec<usize> = (0..4).filter(|&i| w.hs[i].is_some()).collect();
            if open.is_empty() {
                continue;
            }
            let i = *r.pick(&open);
            let h = w.hs[i].clone().unwrap();
            if let Some(d) = &dirty_path {
                if *d != h.path {
                    let j = w.open_slot(d).unwrap();
                    let g = w.hs[j].as_ref().unwrap().f;
                    log!("fsync {d}");
                    fs.fsync(g)?;
                    w.settle();
                    w.snap();
                }
            }
            let size = content(&w.cur, &h.path).len() as u64;
            let to = match r.below(4) {
                0 => r.below(size + 1),
                1 => size + r.below(3000),
                2 => *r.pick(&[0u64, 100, 256, 257, 2048, 4096]),
                _ => size / 2,
            };
            log!("truncate {} to {to}", h.path);
            // Truncate is durable on return, with everything written before it.
            let mut possible = match w.dirty.take() {
                Some((_, v)) => v,
                None => vec![w.dur.get(&h.path).cloned().unwrap()],
            };
            fs.truncate(h.f, to)?;
            if let Some(Node::File(d, _)) = w.cur.get_mut(&h.path) {
                d.resize(to as usize, 0);
            }
            possible.push(w.cur.get(&h.path).cloned().unwrap());
            w.dirty = Some((h.path.clone(), possible));
            w.snap();
            w.settle();
        } else if k < 68 {
            // attributes
            let all: Vec<String> = w.cur.keys().cloned().collect();
            if all.is_empty() {
                continue;
            }
            let p = r.pick(&all).clone();
            let n = r.below(ATTR_MAX as u64 + 1) as usize;
            let a = vec![(r.next() as u8) | 1; n];
            log!("set_attributes {p} len {n}");
            fs.set_attributes(&p, &a)?;
            let set = |n: &mut Node| match n {
                Node::File(_, x) | Node::Dir(x) => *x = a.clone(),
            };
            set(w.cur.get_mut(&p).unwrap());
            set(w.dur.get_mut(&p).unwrap());
            if let Some((d, v)) = w.dirty.as_mut() {
                if *d == p {
                    v.iter_mut().for_each(set);
                }
            }
        } else if k < 76 {
            // rename (files: not open; directories: nothing dirty)
            let all: Vec<String> = w.cur.keys().cloned().collect();
            if all.is_empty() {
                continue;
            }
            let from = r.pick(&all).clone();
            let is_dir = matches!(w.cur.get(&from), Some(Node::Dir(_)));
            let to = if is_dir {
                r.pick(&WDIRS).to_string()
            } else {
                let names: &[&str] = if seed % 2 == 1 { &WFILES_MANY } else { &WFILES };
                r.pick(names).to_string()
            };
            let tp = parent(&to).to_string();
            if tp != "/" && !w.cur.contains_key(&tp) {
                continue;
            }
            if to.starts_with(&format!("{from}/")) {
                log!("rename {from} into itself");
                assert_eq!(
                    fs.rename(&from, &to),
                    Err(Error::Path(stagefs_core::PathError::IntoItself))
                );
                w.snap();
                continue;
            }
            let open_below =
                w.hs.iter().flatten().any(|h| {
                    h.path == from || h.path == to || h.path.starts_with(&format!("{from}/"))
                });
            if !is_dir && (w.open_slot(&from).is_some() || w.open_slot(&to).is_some()) {
                log!("rename {from} -> {to}: Busy");
                match fs.rename(&from, &to) {
                    Err(Error::Busy) => {}
                    Err(e) => return Err(e),
                    Ok(()) => panic!("seed {seed} step {step}: rename of an open file"),
                }
                w.snap();
                continue;
            }
            if is_dir && open_below && r.below(2) == 0 {
                continue;
            }
            let want = match w.cur.get(&to) {
                _ if from == to => Ok(()),
                None => Ok(()),
                Some(Node::Dir(_)) if !is_dir => Err(Error::IsADirectory),
                Some(Node::File(..)) if is_dir => Err(Error::NotADirectory),
                Some(Node::Dir(_)) if w.cur.keys().any(|q| q.starts_with(&format!("{to}/"))) => {
                    Err(Error::NotEmpty)
                }
                Some(_) => Ok(()),
            };
            log!("rename {from} -> {to}: {want:?}");
            let got = fs.rename(&from, &to);
            let got = match (got, want.is_ok()) {
                (Err(e), true) => return Err(e),
                (got, _) => got,
            };
            assert_eq!(got, want, "seed {seed} step {step}: rename {from} {to}");
            if want.is_ok() && from != to {
                for t in [&mut w.cur, &mut w.dur] {
                    t.remove(&to);
                    let moved: Vec<(String, Node)> = t
                        .iter()
                        .filter(|(k, _)| **k == from || k.starts_with(&format!("{from}/")))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    for (k, _) in &moved {
                        t.remove(k);
                    }
                    for (k, v) in moved {
                        t.insert(format!("{to}{}", &k[from.len()..]), v);
                    }
                }
                let re = |q: &mut String| {
                    if q.starts_with(&format!("{from}/")) {
                        *q = format!("{to}{}", &q[from.len()..]);
                    }
                };
                for h in w.hs.iter_mut().flatten() {
                    re(&mut h.path);
                }
                if let Some((d, _)) = w.dirty.as_mut() {
                    re(d);
                }
            }
        } else if k < 81 {
            // remove a file
            let files: Vec<String> = w
                .cur
                .iter()
                .filter(|(_, n)| matches!(n, Node::File(..)))
                .map(|(k, _)| k.clone())
                .collect();
            if files.is_empty() {
                continue;
            }
            let p = r.pick(&files).clone();
            if w.open_slot(&p).is_some() {
                log!("remove {p}: Busy");
                match fs.remove(&p) {
                    Err(Error::Busy) => {}
                    Err(e) => return Err(e),
                    Ok(()) => panic!("seed {seed} step {step}: removed an open file"),
                }
                w.snap();
                continue;
            }
            log!("remove {p}");
            fs.remove(&p)?;
            w.cur.remove(&p);
            w.dur.remove(&p);
        } else if k < 88 {
            let b = *r.pick(&[0u32, 1, 4, 16]);
            log!("step {b}");
            fs.step(b)?;
        } else if k < 91 {
            log!("sync");
            fs.sync()?;
            w.settle();
        } else if k < 93 {
            log!("step_all");
            fs.step_all()?;
            w.settle();
        } else if k < 96 {
            if w.dirty.is_none() && r.below(3) == 0 {
                // Mount again without an unmount: the handles go (nothing is dirty).
                log!("mount while mounted");
                fs.mount()?;
                for h in w.hs.iter_mut() {
                    if let Some(h) = h.take() {
                        w.closed.push(h.f);
                    }
                }
                w.snap();
                continue;
            }
            log!("unmount + mount");
            fs.unmount()?;
            w.settle();
            for h in w.hs.iter_mut() {
                if let Some(h) = h.take() {
                    w.closed.push(h.f);
                }
            }
            w.snap();
            fs.mount()?;
        } else {
            // a stale handle: refused, nothing changed
            if w.closed.is_empty() {
                continue;
            }
            let f = *r.pick(&w.closed);
            log!("stale handle");
            assert_eq!(fs.write(f, b"stale"), Err(Error::BadHandle));
            assert_eq!(fs.truncate(f, 0), Err(Error::BadHandle));
            assert_eq!(fs.close(f), Err(Error::BadHandle));
            let mut b = [0u8; 4];
            assert_eq!(fs.read(f, &mut b), Err(Error::BadHandle));
        }
        w.snap();
    }
    // Close everything.
    for i in 0..4 {
        if let Some(h) = w.hs[i].take() {
            fs.close(h.f)?;
            if w.dirty.as_ref().is_some_and(|d| d.0 == h.path) {
                w.settle();
            }
            w.snap();
        }
    }
    Ok(())
}

fn f_slot(hs: &[Option<Mh>]) -> usize {
    hs.iter().position(|h| h.is_none()).unwrap()
}

/// Whether `got` is a state a cut between snapshots `prev` and `next` may leave.
fn allowed(got: &Tree, prev: &Snap, next: &Snap) -> Result<(), String> {
    let names = |t: &Tree| t.keys().cloned().collect::<Vec<_>>();
    let bases: Vec<&Tree> = [&prev.dur, &next.dur]
        .into_iter()
        .filter(|t| names(t) == names(got))
        .collect();
    if bases.is_empty() {
        return Err(format!(
            "names {:?}, want {:?} or {:?}",
            names(got),
            names(&prev.dur),
            names(&next.dur)
        ));
    }
    let mut why = String::new();
    'base: for base in bases {
        for (p, n) in got {
            let mut ok = base.get(p) == Some(n)
                || (names(&prev.dur) == names(&next.dur)
                    && (prev.dur.get(p) == Some(n) || next.dur.get(p) == Some(n)));
            for s in [prev, next] {
                if let Some((d, v)) = &s.dirty {
                    if d == p && (v.contains(n) || per_byte(n, v)) {
                        ok = true;
                    }
                }
            }
            if !ok {
                why = format!(
                    "{p}: got {}, durable {}",
                    show_node(n),
                    base.get(p).map_or("-".into(), show_node)
                );
                continue 'base;
            }
        }
        return Ok(());
    }
    Err(why)
}

/// Whether file `n` is, byte by byte, one of the contents in `v` (a cut may leave an
/// unacknowledged write partly replaced by the older acknowledged bytes a staged
/// record replays over it: the crate's design accepts that, `stage.rs`, and the
/// earlier reviews checked per byte too), with one of their lengths and attributes.
fn per_byte(n: &Node, v: &[Node]) -> bool {
    let Node::File(g, ga) = n else { return false };
    let files: Vec<(&Vec<u8>, &Vec<u8>)> = v
        .iter()
        .filter_map(|x| match x {
            Node::File(d, a) => Some((d, a)),
            _ => None,
        })
        .collect();
    files.iter().any(|(d, a)| d.len() == g.len() && *a == ga)
        && g.iter().enumerate().all(|(i, b)| {
            files
                .iter()
                .any(|(d, _)| d.get(i).copied().unwrap_or(0) == *b)
        })
}

fn show_node(n: &Node) -> String {
    match n {
        Node::Dir(a) => format!("dir a{a:?}"),
        Node::File(d, a) => format!("{} bytes (crc {:08x}) a{a:?}", d.len(), crc(d)),
    }
}

fn crc(d: &[u8]) -> u32 {
    d.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    })
}

/// Runs the walk of `seed` uncut, then cut at every `stride`-th program/erase with
/// each of `kinds`; returns the failures.
/// A plan with `seed` and, if given, those fault rates.
fn plan(seed: u64, noise: Option<nand_hal::sim::FaultConfig>) -> FaultPlan {
    match noise {
        Some(f) => FaultPlan::seeded(seed).with_faults(f),
        None => FaultPlan::seeded(seed),
    }
}

fn walk_sweep(
    seed: u64,
    steps: usize,
    kinds: &[CutKind],
    stride: u64,
    second: bool,
    noise: Option<nand_hal::sim::FaultConfig>,
) -> Vec<String> {
    let mut base = fresh(seed);
    {
        let mut fs = vol(&mut base);
        fs.format().unwrap();
        fs.unmount().unwrap();
    }
    let mut model = Walk::new();
    let n = {
        let mut s = base.clone();
        s.arm(plan(seed, noise));
        {
            let mut fs = vol(&mut s);
            fs.mount().unwrap();
            if let Err(e) = walk(&mut fs, seed, steps, &mut model) {
                panic!(
                    "seed {seed}: uncut walk failed: {e:?}\n{}",
                    model.log[model.log.len().saturating_sub(15)..].join("\n")
                );
            }
            let t = tree(&mut fs).unwrap();
            assert!(
                t == model.cur,
                "seed {seed}: uncut tree\n{}\n{}",
                show(&t),
                show(&model.cur)
            );
        }
        if std::env::var("S40_VERBOSE").is_ok() {
            println!(
                "seed {seed}: {} ops, {} snaps\n{}",
                s.ops_since_arm(),
                model.snaps.len(),
                model.log.join("\n")
            );
        }
        s.ops_since_arm()
    };
    let snaps = model.snaps;
    let mut fails = Vec::new();
    let mut at = 1;
    while at <= n + 1 {
        for &kind in kinds {
            let mut s = base.clone();
            s.arm(plan(seed ^ at, noise).with_cut(at, kind));
            let mut m = Walk::new();
            {
                let mut fs = vol(&mut s);
                fs.mount().unwrap();
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    walk(&mut fs, seed, steps, &mut m)
                }));
                match r {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) if power_loss(&e) => {}
                    Ok(Err(e)) => {
                        fails.push(format!(
                            "seed {seed} cut {at} {kind:?}: {e:?} is not the cut\n{}",
                            m.log[m.log.len().saturating_sub(6)..].join("\n")
                        ));
                        continue;
                    }
                    Err(_) => {
                        fails.push(format!("seed {seed} cut {at} {kind:?}: walk panicked"));
                        continue;
                    }
                }
            }
            let reached = m.snaps.len();
            crash(&mut s);
            s.disarm();
            if noise.is_some() {
                // The recovery on the noisy device too.
                s.arm(plan(seed ^ at ^ 0x55, noise));
            }
            let prev = &snaps[reached - 1];
            let next = &snaps[reached.min(snaps.len() - 1)];
            let tail = m.log[m.log.len().saturating_sub(4)..].join("\n  ");
            // Second cuts: at every program/erase of the recovery mount.
            let mut seconds = vec![None];
            if second {
                let mut t = s.clone();
                t.arm(plan(3, noise));
                let mut fs = vol(&mut t);
                if fs.mount().is_ok() {
                    drop(fs);
                    let k = t.ops_since_arm();
                    seconds.extend((1..=k).map(Some));
                }
            }
            for sc in seconds {
                let mut s = s.clone();
                let tag = format!("seed {seed} cut {at} {kind:?} second {sc:?}");
                if let Some(j) = sc {
                    s.arm(plan(j, noise).with_cut(j, CutKind::ALL[(j % 5) as usize]));
                    {
                        let mut fs = vol(&mut s);
                        if let Ok(()) = fs.mount() {
                            fails.push(format!("{tag}: mount went through the cut"));
                        }
                    }
                    crash(&mut s);
                    s.disarm();
                    if noise.is_some() {
                        s.arm(plan(j ^ 0x77, noise));
                    }
                }
                let mut fs = vol(&mut s);
                if let Err(e) = fs.mount() {
                    fails.push(format!("{tag}: mount {e:?}"));
                    continue;
                }
                let got = match tree(&mut fs) {
                    Ok(t) => t,
                    Err(e) => {
                        fails.push(format!("{tag}: read {e:?}"));
                        continue;
                    }
                };
                if let Err(why) = allowed(&got, prev, next) {
                    fails.push(format!(
                        "{tag} (after call {}): {why}\n  {tail}",
                        reached - 1
                    ));
                }
                // TINY has 4 checkpoint blocks: program failures in three of them turn
                // the store read-only for the session (a documented limit, oftl README;
                // the W25N01GV has 16). Seen on noisy runs only (seed 2226 of 300).
                let ckpt_limit = fs.store().health()
                    == oftl::Health::ReadOnly(oftl::ReadOnlyReason::CheckpointBlocks);
                match fs
                    .open("/after", create())
                    .and_then(|f| fs.write(f, &[5u8; 300]).and_then(|_| fs.close(f)))
                    .and_then(|()| fs.unmount())
                    .and_then(|()| fs.mount())
                {
                    Ok(()) => {}
                    Err(Error::ReadOnly) if ckpt_limit && noise.is_some() => {}
                    Err(e) => fails.push(format!("{tag}: write after recovery {e:?}")),
                }
            }
        }
        at += stride;
    }
    fails
}

/// Probe: random scripts over the whole API (directories, files opened through up to
/// four handles, holes, lengthening and shrinking truncates, attributes, renames of
/// files and of directories with open files below, refused second opens / renames /
/// removes of open files, the handle table full, stale handles, steps, syncs,
/// `step_all`, unmount/mount cycles), each with a cut of every kind at every
/// program/erase; after the cut the tree (names, contents, attributes) must be one the
/// crate docs allow. `S40_SEEDS` seeds (default 6).
#[test]
fn probe_random_scripts_with_a_cut_at_every_program_and_erase() {
    let seeds: u64 = std::env::var("S40_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    let first: u64 = std::env::var("S40_FIRST")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let mut fails = Vec::new();
    for seed in first..first + seeds {
        let steps = std::env::var("S40_STEPS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(70);
        fails.extend(walk_sweep(seed, steps, &CutKind::ALL, 1, false, None));
    }
    assert!(
        fails.is_empty(),
        "{} failures:\n{}",
        fails.len(),
        fails[..fails.len().min(12)].join("\n")
    );
}

// ---------------------------------------------------------------------------------
// Format over a volume, cut.

/// Probe: a cut (every kind) at every program/erase of a `format` over a volume that
/// holds files and staged records: the mount afterwards either fails with an error or
/// shows a tree whose every entry is the old one (never other bytes); a second format
/// then gives an empty volume that works and survives a remount.
#[test]
fn probe_cut_sweep_during_format_over_a_volume() {
    let mut base = fresh(4002);
    let old = {
        let mut fs = vol(&mut base);
        fs.format().unwrap();
        fs.create_dir("/d").unwrap();
        for i in 0..6u32 {
            write_file(
                &mut fs,
                &format!("/d/f{i}"),
                &pattern(i, 100 + 900 * i as usize),
            );
        }
        fs.set_attributes("/d/f1", b"attr").unwrap();
        let f = fs.open("/d/f5", rw().append(true)).unwrap();
        fs.write(f, &pattern(50, 64)).unwrap();
        fs.fsync(f).unwrap();
        let t = {
            fs.close(f).unwrap();
            tree(&mut fs).unwrap()
        };
        // Leave it mounted with a staged record, as after a crash.
        let f = fs.open("/d/f4", rw().append(true)).unwrap();
        fs.write(f, &pattern(60, 64)).unwrap();
        fs.fsync(f).unwrap();
        t
    };
    let mut old = old;
    if let Some(Node::File(d, _)) = old.get_mut("/d/f4") {
        d.extend_from_slice(&pattern(60, 64));
    }
    let n = {
        let mut s = base.clone();
        s.arm(FaultPlan::seeded(1));
        let mut fs = vol(&mut s);
        fs.format().unwrap();
        assert!(tree(&mut fs).unwrap().is_empty());
        drop(fs);
        s.ops_since_arm()
    };
    println!("format: {n} programs/erases");
    let mut fails = Vec::new();
    let mut mounted = 0;
    let mut kinds_seen = Vec::new();
    for at in 1..=n {
        for kind in CutKind::ALL {
            let mut s = base.clone();
            s.arm(FaultPlan::seeded(at).with_cut(at, kind));
            {
                let mut fs = vol(&mut s);
                let r = fs.format();
                assert!(r.is_err(), "cut {at}: format succeeded through the cut");
            }
            crash(&mut s);
            s.disarm();
            let mut fs = vol(&mut s);
            let m = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match fs.mount() {
                Ok(()) => Some(tree(&mut fs)),
                Err(_) => None,
            }));
            match m {
                Err(_) => fails.push(format!("cut {at} {kind:?}: mount or read panicked")),
                Ok(None) => {}
                Ok(Some(Err(e))) => {
                    mounted += 1;
                    kinds_seen.push(format!("cut {at} {kind:?}: mounted, read {e:?}"));
                }
                Ok(Some(Ok(t))) => {
                    mounted += 1;
                    kinds_seen.push(format!(
                        "cut {at} {kind:?}: mounted with {} of {} old entries",
                        t.len(),
                        old.len()
                    ));
                    for (p, node) in &t {
                        if old.get(p) != Some(node) {
                            fails.push(format!(
                                "cut {at} {kind:?}: mounted, {p} is {} (old {})",
                                show_node(node),
                                old.get(p).map_or("-".into(), show_node)
                            ));
                        }
                    }
                }
            }
            drop(fs);
            let mut fs = vol(&mut s);
            if let Err(e) = fs.format() {
                fails.push(format!("cut {at} {kind:?}: format again {e:?}"));
                continue;
            }
            let ok = tree(&mut fs).map(|t| t.is_empty()) == Ok(true);
            write_file(&mut fs, "/new", &pattern(9, 3000));
            fs.unmount().unwrap();
            fs.mount().unwrap();
            if !ok || tree(&mut fs).map(|t| t.len()) != Ok(1) {
                fails.push(format!(
                    "cut {at} {kind:?}: second format not empty/working"
                ));
            }
        }
    }
    println!("{mounted} cut formats mounted:\n{}", kinds_seen.join("\n"));
    assert!(
        fails.is_empty(),
        "{} failures:\n{}",
        fails.len(),
        fails[..fails.len().min(12)].join("\n")
    );
}

// ---------------------------------------------------------------------------------
// Background steps: the hint ends.

/// Probe: after churn at several fill levels, `while step(b)? {}` ends (for budgets 1,
/// 4 and 64), and once it says `false` another step programs and erases nothing.
#[test]
fn probe_step_loops_end_and_idle_means_idle() {
    // Capacity in 8000-byte files (TINY: about 60).
    let cap = {
        let mut sim = fresh(4142);
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        let mut n = 0;
        loop {
            let f = fs.open(&format!("/l{n}"), create()).unwrap();
            let ok = fs.write(f, &pattern(n as u32, 8000)).is_ok();
            if fs.close(f).is_err() || !ok {
                break;
            }
            n += 1;
        }
        n
    };
    for (seed, fill) in [(1u64, 10usize), (2, 50), (3, 80), (4, 95)] {
        for budget in [1u32, 4, 64] {
            let mut sim = fresh(4100 + seed);
            let mut fs = vol(&mut sim);
            fs.format().unwrap();
            let mut r = Rng(seed * 7919 + budget as u64);
            // Live files to about `fill` percent of 2 MiB, rewritten in place.
            let mut nfiles = (fill * cap / 100).max(1);
            let made = nfiles;
            for i in 0..made {
                let f = fs.open(&format!("/l{i}"), create()).unwrap();
                let ok = fs.write(f, &pattern(i as u32, 8000)).is_ok();
                if fs.close(f).is_err() || !ok {
                    fs.remove(&format!("/l{i}")).unwrap();
                    nfiles = i.saturating_sub(1);
                    fs.remove(&format!("/l{nfiles}")).unwrap();
                    break;
                }
            }
            for k in 0..300u32 {
                let i = r.below(nfiles.max(1) as u64) as usize;
                let f = fs.open(&format!("/l{i}"), rw()).unwrap();
                fs.seek(f, SeekFrom::Start(r.below(7000))).unwrap();
                fs.write(f, &pattern(k, 1 + r.below(1500) as usize))
                    .unwrap();
                if k % 3 == 0 {
                    fs.fsync(f).unwrap();
                }
                fs.close(f).unwrap();
            }
            let mut steps = 0u32;
            while fs.step(budget).unwrap() {
                steps += 1;
                assert!(
                    steps < 100_000,
                    "fill {fill} budget {budget}: step never idles"
                );
            }
            let c = fs.store().flash().counters();
            let (p, e) = (c.programs, c.erases);
            assert!(
                !fs.step(budget).unwrap(),
                "fill {fill} budget {budget}: busy again"
            );
            let c = fs.store().flash().counters();
            assert_eq!(
                (c.programs, c.erases),
                (p, e),
                "fill {fill} budget {budget}: idle step wrote"
            );
            println!("fill {fill}% ({nfiles} files) budget {budget}: {steps} steps");
        }
    }
    // A volume filled to the brim (directories and small files), with a staged
    // record it may not be able to patch.
    for budget in [1u32, 8] {
        let base = full_base(4190 + budget as u64, true);
        let mut s = base.clone();
        let mut fs = vol(&mut s);
        fs.mount().unwrap();
        let mut steps = 0u32;
        loop {
            match fs.step(budget) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    assert_eq!(e, Error::NoSpace, "full volume, budget {budget}");
                    break;
                }
            }
            steps += 1;
            assert!(
                steps < 100_000,
                "full volume, budget {budget}: step never idles"
            );
        }
        println!("full volume budget {budget}: {steps} steps");
    }
}

/// FINDING (low: a hang in the caller's loop; the hint contradicts its docs).
/// Fixed (stop 40): `gc_step(0)` (and so `Fs::step(0)`) says `more == false`.
///
/// `Fs::step(budget)` "Returns whether calling again now would do useful work
/// (`false`: idle until more is written)". With `budget == 0` it keeps returning `true`
/// while the store has a collection victim, but a zero budget copies nothing, so the
/// victim stays and calling again does nothing: `while fs.step(0)? {}`, the loop the
/// docs invite, never ends.
///
/// Repro: format TINY, 30 files of 8,000 bytes, 300 random in-place rewrites (garbage
/// in many blocks), then `while fs.step(0)? {}`. Expected: the loop ends (or each `true`
/// is followed by a call that programs or erases something). Observed: 10,000 calls
/// all return `true`; after the first few, none programs or erases anything.
///
/// Root cause: `oftl::Oftl::gc_step` (crates/oftl/src/gc.rs:224) computes `more` from
/// whether a victim exists, whatever the budget, and `Fs::step` (src/lib.rs:434)
/// passes it on. Fix: in `Fs::step`, return `Ok(false)` after the patch when `budget`
/// is 0 (or treat 0 as 1), or have `gc_step` report `more` only when its budget could
/// make progress; document the budget's lower bound.
#[test]
fn step_with_zero_budget_never_goes_idle() {
    let mut sim = fresh(4150);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    for i in 0..30 {
        write_file(&mut fs, &format!("/l{i}"), &pattern(i as u32, 8000));
    }
    let mut r = Rng(5);
    for k in 0..300u32 {
        let i = r.below(30) as usize;
        let f = fs.open(&format!("/l{i}"), rw()).unwrap();
        fs.seek(f, SeekFrom::Start(r.below(7000))).unwrap();
        fs.write(f, &pattern(k, 1 + r.below(1500) as usize))
            .unwrap();
        fs.close(f).unwrap();
    }
    let mut steps = 0u32;
    let mut idle_trues = 0u32;
    loop {
        let c = fs.store().flash().counters();
        let before = (c.programs, c.erases);
        let more = fs.step(0).unwrap();
        let c = fs.store().flash().counters();
        if !more {
            break;
        }
        steps += 1;
        if (c.programs, c.erases) == before {
            idle_trues += 1;
        }
        if steps == 10_000 {
            break;
        }
    }
    assert!(
        steps < 10_000,
        "step(0) said `true` {steps} times in a row ({idle_trues} of them did nothing): \
         `while fs.step(0)? {{}}` never ends"
    );
}

fn diff_ranges(a: &[u8], b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let n = a.len().max(b.len());
    let mut i = 0;
    while i < n {
        if a.get(i) != b.get(i) {
            let s = i;
            while i < n && a.get(i) != b.get(i) {
                i += 1;
            }
            out.push((s, i));
        } else {
            i += 1;
        }
    }
    out
}

/// A debugging aid for the random scripts: `S40_SEED=.. S40_AT=.. S40_KIND=0..4
/// cargo test ... explore_seed -- --ignored --nocapture` replays one cut and shows how
/// the recovered files differ from the model's contents.
#[test]
#[ignore]
fn explore_seed() {
    let Ok(seed) = std::env::var("S40_SEED").map(|s| s.parse::<u64>().unwrap()) else {
        return;
    };
    let at: u64 = std::env::var("S40_AT").unwrap().parse().unwrap();
    let kind = CutKind::ALL[std::env::var("S40_KIND").map_or(0, |s| s.parse().unwrap())];
    let steps = std::env::var("S40_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let mut base = fresh(seed);
    {
        let mut fs = vol(&mut base);
        fs.format().unwrap();
        fs.unmount().unwrap();
    }
    let noise = std::env::var("S40_NOISE").ok().map(|v| noise_named(&v));
    let mut full = Walk::new();
    {
        let mut s = base.clone();
        s.arm(plan(seed, noise));
        let mut fs = vol(&mut s);
        fs.mount().unwrap();
        walk(&mut fs, seed, steps, &mut full).unwrap();
    }
    let mut s = base.clone();
    if std::env::var("S40_NOCUT").is_ok() {
        s.arm(plan(seed ^ at, noise));
    } else {
        s.arm(plan(seed ^ at, noise).with_cut(at, kind));
    }
    let mut m = Walk::new();
    {
        let mut fs = vol(&mut s);
        fs.mount().unwrap();
        let r = walk(&mut fs, seed, steps, &mut m);
        println!("walk: {r:?}\n{}", m.log.join("\n"));
        println!(
            "at the walk's end: health {:?}, bad blocks {}, {:?}, ops {}",
            fs.store().health(),
            fs.store()
                .blocks()
                .iter()
                .filter(|b| b.state() == oftl::BlockState::Bad)
                .count(),
            fs.store().flash().counters(),
            fs.store().flash().ops_since_arm()
        );
    }
    crash(&mut s);
    s.disarm();
    if noise.is_some() && std::env::var("S40_QUIET_RECOVERY").is_err() {
        s.arm(plan(seed ^ at ^ 0x55, noise));
    }
    if std::env::var("S40_PAGES").is_ok() {
        for pg in 0..1024u32 {
            let mut d = vec![0u8; 2048];
            let mut o = vec![0u8; 64];
            s.peek(nand_hal::PageAddr(pg), &mut d, &mut o);
            for k in 0..4 {
                let x = &d[k * 512..(k + 1) * 512];
                if (x[0] == 1 || x[0] == 2 || x[0] == 3) && x[4..8] != [0xFF; 4] && x[1] < 65 {
                    println!(
                        "sector? page {pg} (block {}) slot {k}: {:02x?} .. trailer {:02x?} ps {:?}",
                        pg / 16,
                        &x[..16],
                        &x[492..],
                        s.page_state(nand_hal::PageAddr(pg))
                    );
                }
            }
        }
        for pg in 0..1024u32 {
            let ps = s.page_state(nand_hal::PageAddr(pg));
            if ps.flips.iter().any(|&f| f > 0) || ps.flags != 0 {
                let mut d = vec![0u8; 2048];
                let mut o = vec![0u8; 64];
                s.peek(nand_hal::PageAddr(pg), &mut d, &mut o);
                println!(
                    "page {pg} (block {} page {}): {ps:?} first bytes {:02x?}",
                    pg / 16,
                    pg % 16,
                    &d[..8]
                );
            }
        }
    }
    let mut fs = vol(&mut s);
    if let Err(e) = fs.mount() {
        println!("mount: {e:?}");
        drop(fs);
        let mut st = support::Store::new(&mut s, support::cfg(), oftl::Greedy::DEFAULT);
        println!("store mount: {:?}", st.mount());
        let b = st.log_bounds(3);
        println!("staging log bounds {b:?}");
        let (mut lsn, end) = b.unwrap();
        let mut buf = [0u8; 2048];
        while lsn < end {
            let r = st.log_read(3, lsn, &mut buf);
            println!("log_read {lsn}: {r:?}");
            let Ok(Some(r)) = r else { break };
            let mut pos = 0;
            while pos < r.len {
                match stagefs_core::format::stage::Record::parse(&buf[..r.len], pos) {
                    Ok((rec, _d, e)) => {
                        println!("   {rec:?}");
                        pos = e;
                    }
                    Err(_) => {
                        println!(
                            "   CORRUPTED record at {pos}: header {:02x?}",
                            &buf[pos..(pos + 16).min(r.len)]
                        );
                        break;
                    }
                }
            }
            lsn = r.next;
        }
        for o in 1..40u32 {
            let mut b = vec![0u8; 30000];
            let r = st.read(o, 0, &mut b);
            if !matches!(r, Err(oftl::ReadError::NotFound)) {
                println!(
                    "object {o}: {:?} attrs {:?}",
                    r,
                    st.attrs(o)
                        .map(|a| format!("{a:?}").chars().take(60).collect::<String>())
                );
            }
        }
        panic!("mount failed");
    }
    let got = tree(&mut fs).unwrap();
    println!(
        "after recovery: health {:?} bad {} ckpt {:?}; read_only {} store read_only {} writable {} {:?}",
        fs.store().health(),
        fs.store().blocks().iter().filter(|b| b.state() == oftl::BlockState::Bad).count(),
        fs.store().stats(),
        fs.read_only(),
        stagefs_core::Store::read_only(fs.store()),
        stagefs_core::Store::writable(fs.store()),
        fs.store().flash().counters()
    );
    let r = fs.open("/after", create());
    println!("open /after: {r:?}");
    if let Ok(f) = r {
        println!("write: {:?}", fs.write(f, &[5u8; 300]));
        println!("close: {:?}", fs.close(f));
    }
    println!("unmount: {:?}", fs.unmount());
    println!("mount: {:?} read_only {}", fs.mount(), fs.read_only());
    let reached = m.snaps.len();
    let prev = &full.snaps[reached - 1];
    for (p, n) in &got {
        if prev.dur.get(p) != Some(n) {
            if let (Node::File(g, _), Some(Node::File(d, _))) = (n, prev.dur.get(p)) {
                println!("{p}: differs from durable at {:?}", diff_ranges(g, d));
                if let Some((dp, v)) = &prev.dirty {
                    if dp == p {
                        for (k, c) in v.iter().enumerate() {
                            if let Node::File(c, _) = c {
                                println!(
                                    "  vs possible {k} ({}): {:?}",
                                    c.len(),
                                    diff_ranges(g, c)
                                );
                            }
                        }
                    }
                }
                for k in (0..reached).rev().take(30) {
                    if let Some(Node::File(c, _)) = full.snaps[k].cur.get(p) {
                        if c == g {
                            println!("  equals cur of snap {k}");
                        }
                    }
                    if let Some(Node::File(c, _)) = full.snaps[k].dur.get(p) {
                        if c == g {
                            println!("  equals dur of snap {k}");
                        }
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// A full volume: every call succeeds or changes nothing; deletes always succeed.

type FullOp = fn(&mut Vol<'_>) -> Result<(), E>;

fn full_ops() -> Vec<(&'static str, bool, FullOp)> {
    // (name, single call that must change nothing in session when it fails, op)
    vec![
        ("create_dir", true, |fs| fs.create_dir("/newdir")),
        ("create file", false, |fs| {
            let f = fs.open("/newfile", create())?;
            let r = fs.write(f, b"0123456789");
            let c = fs.close(f);
            r.and(c)
        }),
        ("grow inline into an object", false, |fs| {
            let f = fs.open("/obj/inl", rw().append(true))?;
            let r = fs.write(f, &pattern(5, 300));
            let c = fs.close(f);
            r.and(c)
        }),
        ("append + fsync on a staged file", false, |fs| {
            let f = fs.open("/obj/staged", rw().append(true))?;
            let r = fs.write(f, &pattern(6, 64)).and_then(|_| fs.fsync(f));
            let c = fs.close(f);
            r.and(c)
        }),
        ("overwrite across pages", false, |fs| {
            let f = fs.open("/obj/big", rw())?;
            fs.seek(f, SeekFrom::Start(1000))?;
            let r = fs.write(f, &pattern(7, 3000));
            let c = fs.close(f);
            r.and(c)
        }),
        ("set_attributes grows", true, |fs| {
            fs.set_attributes("/obj/inl", &[9; ATTR_MAX])
        }),
        ("set_attributes on a directory", true, |fs| {
            fs.set_attributes("/obj", &[8; ATTR_MAX])
        }),
        ("rename to a longer name", true, |fs| {
            fs.rename("/obj/inl", &format!("/obj/{}", "n".repeat(64)))
        }),
        ("rename over a file", true, |fs| {
            fs.rename("/obj/inl", "/obj/big")
        }),
        ("rename a directory", true, |fs| fs.rename("/obj", "/obj2")),
        ("truncate-open + 300 bytes", false, |fs| {
            let f = fs.open("/obj/big", rw().truncate(true))?;
            let r = fs.write(f, &pattern(10, 300));
            let c = fs.close(f);
            r.and(c)
        }),
        ("truncate lengthens", true, |fs| {
            let f = fs.open("/obj/staged", rw())?;
            let r = fs.truncate(f, 9000);
            let _ = fs.close(f);
            r
        }),
        ("truncate shrinks a staged file", true, |fs| {
            let f = fs.open("/obj/staged", rw())?;
            let r = fs.truncate(f, 10);
            let _ = fs.close(f);
            r
        }),
        ("inline truncate", true, |fs| {
            let f = fs.open("/obj/inl", rw())?;
            let r = fs.truncate(f, 200);
            let _ = fs.close(f);
            r
        }),
        ("step", true, |fs| fs.step(8).map(|_| ())),
        ("sync", true, |fs| fs.sync()),
        ("step_all", true, |fs| fs.step_all()),
    ]
}

/// A full volume: `/obj` with an inline file, a 6,000-byte file and a file with a
/// staged record, then directories and small files until nothing fits, then a few
/// more appends with fsync until one fails.
fn full_base(seed: u64, big_fill: bool) -> Sim {
    let mut sim = fresh(seed);
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        fs.create_dir("/obj").unwrap();
        write_file(&mut fs, "/obj/inl", &pattern(1, 100));
        write_file(&mut fs, "/obj/big", &pattern(2, 6000));
        write_file(&mut fs, "/obj/staged", &pattern(3, 3000));
        let f = fs.open("/obj/staged", rw().append(true)).unwrap();
        fs.write(f, &pattern(4, 64)).unwrap();
        fs.fsync(f).unwrap();
        fs.close(f).unwrap();
        if big_fill {
            for i in 0.. {
                let p = format!("/big{i:04}");
                let Ok(g) = fs.open(&p, create()) else { break };
                let ok = fs.write(g, &pattern(i, 4096)).is_ok();
                if fs.close(g).is_err() || !ok {
                    let _ = fs.remove(&p);
                    break;
                }
            }
        }
        support::fill_volume(&mut fs);
        // Leave it mounted (as after a crash): the staged record stays in the log.
    }
    crash(&mut sim);
    sim
}

/// Probe: on full volumes (two shapes, three seeds), each call of `full_ops` either
/// succeeds or changes nothing: in the session for single calls, and after a cut right
/// after it for all; a success survives the cut. Then removing a file always works,
/// and so does the op after it.
#[test]
fn probe_full_volume_calls_succeed_or_change_nothing() {
    let mut fails = Vec::new();
    let mut outcomes = Vec::new();
    for seed in 0..3u64 {
        for big in [false, true] {
            let base = full_base(4200 + seed, big);
            for (name, single, op) in full_ops() {
                let mut s = base.clone();
                let (r, t0, t1, tfix) = {
                    let mut fs = vol(&mut s);
                    fs.mount().unwrap();
                    let t0 = tree(&mut fs).unwrap();
                    let r = op(&mut fs);
                    let t1 = tree(&mut fs).unwrap();
                    // Deletes work on the full volume, whatever happened.
                    let fillers: Vec<String> = t0
                        .keys()
                        .filter(|k| k.starts_with("/fill") && k.ends_with("/i"))
                        .take(1)
                        .cloned()
                        .collect();
                    let mut tfix = None;
                    for p in fillers {
                        if let Err(e) = fs.remove(&p) {
                            fails.push(format!("seed {seed} big {big} {name}: remove {p}: {e:?}"));
                        }
                        // And the failed op now has a bit more room (no assertion).
                        tfix = Some(p);
                    }
                    (r, t0, t1, tfix)
                };
                outcomes.push(format!("{name}: {:?}", r.as_ref().err()));
                if r.is_err() && single && t1 != t0 {
                    fails.push(format!(
                        "seed {seed} big {big} {name}: failed ({r:?}) and changed the tree in session"
                    ));
                }
                crash(&mut s);
                let mut fs = vol(&mut s);
                if let Err(e) = fs.mount() {
                    fails.push(format!(
                        "seed {seed} big {big} {name}: mount after {r:?}: {e:?}"
                    ));
                    continue;
                }
                let mut t2 = tree(&mut fs).unwrap();
                if let Some(p) = tfix {
                    // The remove was durable on return.
                    if t2.remove(&p).is_some() {
                        fails.push(format!(
                            "seed {seed} big {big} {name}: removed {p} came back"
                        ));
                    }
                }
                let mut want = if r.is_ok() { t1.clone() } else { t0.clone() };
                want.retain(|k, _| {
                    !k.starts_with("/fill") || !k.ends_with("/i") || t2.contains_key(k)
                });
                // A sequence whose last call (the close) committed what the earlier
                // ones left (a failed write after a truncate at open, which then
                // closes empty: accepted by the earlier reviews).
                let mut alt = t1.clone();
                alt.retain(|k, _| {
                    !k.starts_with("/fill") || !k.ends_with("/i") || t2.contains_key(k)
                });
                if t2 != want && (single || t2 != alt) {
                    let diff: Vec<String> = want
                        .iter()
                        .filter(|(k, v)| t2.get(*k) != Some(v))
                        .map(|(k, v)| {
                            format!(
                                "{k}: want {} got {}",
                                show_node(v),
                                t2.get(k).map_or("-".into(), show_node)
                            )
                        })
                        .chain(
                            t2.keys()
                                .filter(|k| !want.contains_key(*k))
                                .map(|k| format!("{k}: extra")),
                        )
                        .collect();
                    fails.push(format!(
                        "seed {seed} big {big} {name}: {r:?}, after a cut: {}",
                        diff.join("; ")
                    ));
                }
            }
        }
    }
    println!("{}", outcomes.join("\n"));
    assert!(
        fails.is_empty(),
        "{} failures:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

/// Probe: the random scripts with a first cut at every 3rd program/erase (clean and
/// torn) and a second cut at every program/erase of the recovery mount after it (each
/// kind in turn); after the second recovery the tree must still be one the crate docs
/// allow, and the volume must take writes and remount. `S40_SEEDS2` seeds (default 3).
#[test]
fn probe_random_scripts_with_second_cuts_in_the_recovery() {
    let seeds: u64 = std::env::var("S40_SEEDS2")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let first: u64 = std::env::var("S40_FIRST")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let steps = std::env::var("S40_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(80);
    let mut fails = Vec::new();
    for seed in first..first + seeds {
        fails.extend(walk_sweep(
            1000 + seed,
            steps,
            &[CutKind::Clean, CutKind::Torn(TornMode::Random)],
            3,
            true,
            None,
        ));
    }
    assert!(
        fails.is_empty(),
        "{} failures:\n{}",
        fails.len(),
        fails[..fails.len().min(12)].join("\n")
    );
}

/// FINDING (low: behaviour contradicting the crate docs; unacknowledged data only).
/// Resolved (stop 40) by the docs: the crate docs now say an unacknowledged write may
/// show in part, per byte (as POSIX file systems promise nothing of writes not yet
/// synced); the test checks that every byte is the durable one or the write's, and
/// that this repro does tear the write (so it keeps proving the documented case).
///
/// Crate docs: "After a cut, a file holds what its last fsync/close made durable, plus
/// possibly some of the writes made since (which of them is not promised)". A cut can
/// leave one unacknowledged write *torn*: its middle replaced by older acknowledged
/// bytes, its two ends new.
///
/// Repro: `/x` of 3,000 bytes (an object). Open it, write 32 bytes at 100 and fsync
/// (written home), write 32 bytes at 132 and fsync (continues the previous commit:
/// staged as a record R in the log). Write 300 bytes at 50 (not fsynced: it covers R's
/// range), then 10 bytes across the first page boundary (2043..2053), which oftl
/// writes as a transaction after flushing the object's buffered page 0 home (with the
/// 300-byte write, and no new version). Cut. The mount replays R over page 0.
///
/// Expected: bytes 50..350 all old (the durable state) or all from the 300-byte write.
/// Observed: 50..132 and 164..350 new, 132..164 old: one write, torn.
///
/// Root cause: the staging design (src/stage.rs, module docs: "Writes that reach flash
/// without being acknowledged (a buffer evicted) may be overwritten by replay with the
/// last acknowledged bytes") lets replay lay an older record over a page that a flush
/// without a version stamp made newer; `Store::write` of a multi-page write
/// (oftl/src/wbuf.rs:300-302, `flush_obj` then a transaction) and buffer evictions do
/// such flushes. Fix: either state it in the crate docs (per byte, an unacknowledged
/// write may show partly; the earlier reviews checked per byte), or stamp the version
/// whenever a staged object's pages go home (`flush_with_attrs` in the places oftl
/// flushes a staged object on its own: the file layer would have to flush staged
/// objects itself before a multi-page write, with the log's end as their version, and
/// then re-stage nothing, since those bytes are home and newer).
#[test]
fn a_cut_can_tear_one_unacknowledged_write_with_older_staged_bytes() {
    let mut sim = fresh(4300);
    let old = pattern(1, 3000);
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        write_file(&mut fs, "/x", &old);
        let f = fs.open("/x", rw()).unwrap();
        fs.seek(f, SeekFrom::Start(100)).unwrap();
        fs.write(f, &pattern(2, 32)).unwrap();
        fs.fsync(f).unwrap();
        fs.write(f, &pattern(3, 32)).unwrap();
        fs.fsync(f).unwrap();
        assert_eq!(
            fs.staging_status().unwrap().staged_objects,
            1,
            "R is staged"
        );
        fs.seek(f, SeekFrom::Start(50)).unwrap();
        fs.write(f, &pattern(4, 300)).unwrap();
        fs.seek(f, SeekFrom::Start(2043)).unwrap();
        fs.write(f, &pattern(5, 10)).unwrap();
        // Cut, no fsync.
    }
    crash(&mut sim);
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    let got = read_file(&mut fs, "/x").unwrap();
    let mut durable = old.clone();
    durable[100..132].copy_from_slice(&pattern(2, 32));
    durable[132..164].copy_from_slice(&pattern(3, 32));
    let w = pattern(4, 300);
    let region = &got[50..350];
    let mut written = durable.clone();
    written[50..350].copy_from_slice(&w);
    written[2043..2053].copy_from_slice(&pattern(5, 10));
    for (i, &b) in got.iter().enumerate() {
        assert!(
            b == durable[i] || b == written[i],
            "byte {i}: {b:#x} is neither the durable byte nor the unacknowledged write's"
        );
    }
    assert!(
        region != &durable[50..350] && region != &w[..],
        "the repro no longer tears the write: new at {:?}, old at {:?}",
        diff_ranges(region, &durable[50..350])
            .iter()
            .map(|&(a, b)| (a + 50, b + 50))
            .collect::<Vec<_>>(),
        diff_ranges(region, &w)
            .iter()
            .map(|&(a, b)| (a + 50, b + 50))
            .collect::<Vec<_>>()
    );
}

/// Probe: the random scripts on a noisy device (`FaultConfig::noisy`: correctable read
/// errors, program and erase failures, flipped bits, disturb, unstable pages after a
/// torn cut, out-of-order completion) in the session and in the recovery, with a cut
/// of every kind at every 2nd program/erase. `S40_SEEDS3` seeds (default 3).
#[test]
fn probe_random_scripts_on_a_noisy_device_with_cuts() {
    let seeds: u64 = std::env::var("S40_SEEDS3")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let first: u64 = std::env::var("S40_FIRST")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let steps = std::env::var("S40_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(80);
    let mut fails = Vec::new();
    for seed in first..first + seeds {
        fails.extend(walk_sweep(
            2000 + seed,
            steps,
            &CutKind::ALL,
            2,
            false,
            Some(noise_named(
                &std::env::var("S40_NOISE_CFG").unwrap_or_else(|_| "noisy".into()),
            )),
        ));
    }
    assert!(
        fails.is_empty(),
        "{} failures:\n{}",
        fails.len(),
        fails[..fails.len().min(12)].join("\n")
    );
}

/// Fault configurations by name (for the explorations).
fn noise_named(v: &str) -> nand_hal::sim::FaultConfig {
    use nand_hal::sim::FaultConfig;
    let off = FaultConfig::default();
    match v {
        "flips" => FaultConfig {
            program_flip_ppm: 2000,
            erased_flips_ppm: 2000,
            partial_disturb_ppm: 10_000,
            read_correctable_ppm: 20_000,
            ..off
        },
        "pflip" => FaultConfig {
            program_flip_ppm: 2000,
            ..off
        },
        "eflip" => FaultConfig {
            erased_flips_ppm: 2000,
            ..off
        },
        "pdist" => FaultConfig {
            partial_disturb_ppm: 10_000,
            ..off
        },
        "noisy-no-eflip" => FaultConfig {
            erased_flips_ppm: 0,
            ..FaultConfig::noisy()
        },
        "harsh" => FaultConfig {
            program_fail_ppm: 3000,
            erase_fail_ppm: 3000,
            read_correctable_ppm: 50_000,
            unstable_after_cut: true,
            out_of_order: true,
            ..off
        },
        "pfail" => FaultConfig {
            program_fail_ppm: 2000,
            ..off
        },
        _ => FaultConfig::noisy(),
    }
}

/// The (page, sector) of the staging record of inline file `name` (type 2, the name's
/// length, the name), with every later sector of its page erased.
fn log_sector_with_inline_record(sim: &Sim, name: &[u8]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for pg in 0..64 * 16 {
        let mut d = vec![0u8; 2048];
        let mut o = vec![0u8; 64];
        sim.peek(nand_hal::PageAddr(pg), &mut d, &mut o);
        for k in 0..4usize {
            let x = &d[k * 512..(k + 1) * 512];
            if x[0] == 2
                && x[1] == name.len() as u8
                && x[16..16 + name.len()] == *name
                && d[(k + 1) * 512..].iter().all(|&b| b == 0xFF)
            {
                out.push((pg, k as u32));
            }
        }
    }
    out
}

/// FINDING (high: after a power cut the volume no longer mounts, `mount_repair`
/// included, on a device fault the simulator models at its documented size).
/// Fixed (stop 40): a log sector reads as blank with up to 8 zero bits whatever the
/// part's ECC strength (`oftl/src/log.rs`, `ERASED_FLIPS`); checked here up to 8.
///
/// The simulator's F5 (`FaultConfig::erased_flips_ppm`, part of `FaultConfig::noisy`,
/// "A noisy but survivable device") leaves an erased page "reading as erased but with
/// 1-2 bits flipped to 0". A staging log whose open page was closed (a checkpoint: a
/// `sync`, `step_all`, unmount) continues on a new page, and its LSNs skip the old
/// page's unwritten sectors; after a patch trimmed the log to its end, the live range
/// `[first, end)` starts inside the old page, on never-programmed sectors. oftl's log
/// reader accepts a never-programmed sector as blank only with at most `blank_flips()`
/// zero bits, the part's ECC strength (1 on the W25N01GV and `TINY`): with 2, it takes
/// the sector for a written one whose content was lost and answers `Corrupted`. The
/// file layer's mount replays the staging log from `first`, so after a crash the whole
/// volume fails to mount with `Error::Corrupted`, and `mount_repair` fails the same
/// way: every file unreachable.
///
/// Found by the noisy random scripts (seed 2231 with erased flips, program flips,
/// partial-program disturb and correctable reads: a crash with nothing in flight after
/// 29 calls; every mount after it failed). Direct repro (staging bypass off, so that
/// both small commits are staged): format; `/f` (50 bytes) committed as a staged
/// record, LSN 0, the first sector of a fresh log page P; `sync` (patched, the log
/// trimmed to LSN 1, a checkpoint closes P); `/g` committed as a staged record, which
/// lands on a new page at LSN 4, so the live range is [1, 5); 2 zero bits in P's erased
/// second sector (`SimNand::inject_flips`: what F5 draws with n = 2 at P's erase);
/// power off; mount.
///
/// Expected: the mount succeeds with `/f` and `/g` intact (sectors 1-3 of P were never
/// programmed; 0 or 1 zero bits there mount fine). Observed: `mount()` and
/// `mount_repair()` both return `Err(Corrupted)`.
///
/// Root cause: `Oftl::blank_flips` (crates/oftl/src/log.rs:272-274) is
/// `max(ecc.strength, 1)`, below the zero bits an erased sector can show; in
/// `log_read_inner` (log.rs:614-626) such a sector goes to `unreadable_log_page`, which
/// answers `Corrupted` once the page reads without an ECC error (log.rs:761-775); the
/// trim (log.rs `log_move_start`) leaves the stream's start inside a closed page, so
/// those sectors are read at all. Fix: accept more zero bits as blank (a bound of its
/// own, e.g. 8 per 512-byte sector as UBIFS does for empty space; a written sector's
/// CRC-checked trailer makes a false "blank" harmless past the last record), move the
/// start of a trimmed stream to the next written sector (or the next page) when the
/// open page is closed, and report a sector that neither parses nor reads blank as a
/// media loss (`MediaLoss`) that `mount_repair` can salvage, not `Corrupted`.
#[test]
fn two_erased_bit_flips_after_the_last_staged_sector_make_the_volume_unmountable() {
    let mut fails = Vec::new();
    for flips in [0u8, 1, 2, 4, 8] {
        let mut sim = fresh(4400);
        let page;
        {
            let mut fs = vol(&mut sim);
            fs.format().unwrap();
            fs.set_tuning(stagefs_core::Tuning {
                staging: true,
                bypass: false,
            });
            // A staged record (LSN 0), first sector of a fresh log page P.
            write_file(&mut fs, "/f", &pattern(1, 50));
            assert_eq!(fs.staging_status().unwrap().staged_inline, 1);
            let at = log_sector_with_inline_record(sim_of(&fs), b"f");
            page = at[0].0;
            // Patched home, the log trimmed to its end (LSN 1), and a checkpoint: the
            // log's open page is closed.
            fs.sync().unwrap();
            let st = fs.staging_status().unwrap();
            assert_eq!((st.first_lsn, st.end_lsn), (1, 1));
            // The next staged record goes to a new page (LSN 4): the live range
            // [1, 5) spans P's never-programmed sectors 1 to 3.
            write_file(&mut fs, "/g", &pattern(2, 60));
            let st = fs.staging_status().unwrap();
            assert_eq!((st.first_lsn, st.end_lsn), (1, 5), "{st:?}");
        }
        if flips > 0 {
            // F5: P's erase left `flips` zero bits in its (erased) second sector.
            sim.inject_flips(nand_hal::PageAddr(page), 1, flips);
        }
        crash(&mut sim);
        let mut fs = vol(&mut sim);
        let m = fs.mount();
        if m.is_err() {
            let r = fs.mount_repair().map(|_| ());
            fails.push(format!(
                "{flips} zero bits in a never-programmed log sector: mount {m:?} \
                 (mount_repair {r:?})"
            ));
            continue;
        }
        assert_eq!(read_file(&mut fs, "/f").unwrap(), pattern(1, 50));
        assert_eq!(read_file(&mut fs, "/g").unwrap(), pattern(2, 60));
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

/// The simulator under a volume (read-only peeks).
fn sim_of<'a>(fs: &'a Vol<'_>) -> &'a Sim {
    fs.store().flash()
}

/// Deep directories (60 levels, paths past the directory cache's 48 bytes): a file at
/// the bottom with attributes, the top renamed, a refused move of a directory below
/// itself, a middle directory moved up (its subtree and open file along), removal
/// bottom-up; a Fs with a one-slot handle table alongside.
fn deep_script(fs: &mut Vol<'_>, st: &mut States) -> Result<(), E> {
    let mut p = String::new();
    for i in 0..60 {
        p.push_str(&format!("/{}", (b'a' + (i % 26) as u8) as char));
        fs.create_dir(&p)?;
        st.m.insert(p.clone(), Node::Dir(vec![]));
        st.done(true);
    }
    let file = format!("{p}/leaf");
    let f = fs.open(&file, create())?;
    st.m.insert(file.clone(), Node::File(vec![], vec![]));
    st.done(true);
    fs.write(f, &pattern(1, 700))?;
    st.write_at(&file, 0, &pattern(1, 700));
    st.done(false);
    fs.fsync(f)?;
    st.done(true);
    fs.set_attributes(&file, &[0x5A; 16])?;
    *st.attrs(&file) = vec![0x5A; 16];
    st.done(true);
    // The top renamed while the leaf is open (allowed: only the file's own name is
    // protected).
    fs.rename("/a", "/top")?;
    st.rename("/a", "/top");
    st.done(true);
    let file2 = format!("/top{}", &file[2..]);
    fs.write(f, &pattern(2, 64))?;
    st.write_at(&file2, 700, &pattern(2, 64));
    st.done(false);
    fs.close(f)?;
    st.done(true);
    // A directory 10 levels down moved below its own subtree: refused.
    let mid: String = file2.split('/').take(12).collect::<Vec<_>>().join("/");
    let below: String = file2.split('/').take(40).collect::<Vec<_>>().join("/");
    match fs.rename(&mid, &format!("{below}/x")) {
        Err(Error::Path(stagefs_core::PathError::IntoItself)) => {}
        Err(e) => return Err(e),
        Ok(()) => panic!("moved a directory into itself"),
    }
    st.done(true);
    // The same directory moved up to the root, its subtree with it.
    fs.rename(&mid, "/mid")?;
    st.rename(&mid, "/mid");
    st.done(true);
    let file3 = format!("/mid{}", &file2[mid.len()..]);
    assert_eq!(read_file(fs, &file3)?, {
        let mut v = pattern(1, 700);
        v.extend(pattern(2, 64));
        v
    });
    assert_eq!(fs.metadata(&file3)?.attributes(), &[0x5A; 16]);
    st.done(true);
    // Bottom-up removal of the moved subtree.
    fs.remove(&file3)?;
    st.m.remove(&file3);
    st.done(true);
    let mut d = parent(&file3).to_string();
    while d != "/" {
        fs.remove_dir(&d)?;
        st.m.remove(&d);
        st.done(true);
        d = parent(&d).to_string();
    }
    Ok(())
}

/// Probe: a cut (clean and torn) at every program/erase of `deep_script`.
#[test]
fn probe_cut_sweep_deep_directories() {
    let fails = sweep(
        4600,
        &[CutKind::Clean, CutKind::Torn(TornMode::Random)],
        1,
        deep_script,
    );
    assert!(
        fails.is_empty(),
        "{} failures:\n{}",
        fails.len(),
        fails[..fails.len().min(12)].join("\n")
    );
}

/// Probe: a volume type with a one-slot handle table: the second open is refused
/// (`TooManyOpen`, nothing created), a closed handle is refused, unmount closes the
/// open one durably, and a handle from before the remount is refused.
#[test]
fn probe_one_slot_handle_table() {
    type Vol1<'a> = stagefs_core::Fs<support::Store<'a>, 2048, 1>;
    let mut sim = fresh(4700);
    let mut fs: Vol1<'_> = stagefs_core::Fs::new(support::Store::new(
        &mut sim,
        support::cfg(),
        oftl::Greedy::DEFAULT,
    ));
    fs.format().unwrap();
    let f = fs.open("/a", create()).unwrap();
    assert_eq!(fs.open("/b", create()), Err(Error::TooManyOpen));
    assert_eq!(
        fs.metadata("/b"),
        Err(Error::NotFound),
        "the refused open created /b"
    );
    assert_eq!(fs.open("/a", create()), Err(Error::TooManyOpen));
    fs.write(f, &pattern(1, 5000)).unwrap();
    fs.unmount().unwrap();
    assert_eq!(fs.write(f, b"x"), Err(Error::BadHandle));
    fs.mount().unwrap();
    assert_eq!(fs.close(f), Err(Error::BadHandle));
    assert_eq!(fs.metadata("/a").unwrap().size, 5000);
    let g = fs.open("/b", create()).unwrap();
    assert_ne!(g, f);
    assert_eq!(fs.write(f, b"x"), Err(Error::BadHandle));
    fs.close(g).unwrap();
    assert_eq!(fs.close(g), Err(Error::BadHandle));
    let h = fs.open("/b", rw()).unwrap();
    assert_eq!(
        fs.write(g, b"x"),
        Err(Error::BadHandle),
        "a closed handle names the slot's next open"
    );
    fs.close(h).unwrap();
    assert_eq!(fs.metadata("/b").unwrap().size, 0);
}
