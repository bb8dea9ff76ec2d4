//! Independent review of stop 57 (directory header version 3: page 0 counts the
//! buckets holding a name per group of up to 8, and a `read_dir` step skips the groups
//! whose count is 0). Attacks: a random model of every namespace change over names
//! colliding on 10 bits (groups of several buckets, splits at levels 0 to 13, splits
//! moving every name right, two groups of one page-0 byte), with staging on and off
//! and remounts, checking every group count, every listing and the read bound after
//! each change; power cuts over splits whose left child empties and renames between
//! groups; cuts over a version-2 volume's upgrade and its directories turning
//! version 3; an adversarial name set for the read bound; corrupt group counts.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::OnceLock;

use nand_hal::sim::{profile, FaultPlan, SimError, SimNand};
use oftl::TxOp;
use stagefs_core::format::bucket;
use stagefs_core::{Error, Fs, Kind, Store, Tuning};

use crate::support::dirs::{colliding, counts_exact, make_version_2, walk, Walked};
use crate::support::refusing;
use crate::support::sweep::{self, Report};
use crate::support::{create, pattern, vol, Rng, Sim, Vol};

type E = Error<SimError>;

/// Bucket reads a listing step may take, page 0 included (the first step reads it).
const STEP_READS: u32 = 17;

fn fresh(seed: u64) -> Sim {
    SimNand::heap(profile::TINY, FaultPlan::seeded(seed))
}

fn touch<S: Store<FlashError = SimError>>(fs: &mut Fs<S, 2048, 4>, path: &str) -> Result<(), E> {
    let f = fs.open(path, create())?;
    fs.close(f)
}

fn put<S: Store<FlashError = SimError>>(
    fs: &mut Fs<S, 2048, 4>,
    path: &str,
    data: &[u8],
) -> Result<(), E> {
    let f = fs.open(path, create().truncate(true))?;
    let w = fs.write(f, data).map(|_| ());
    let c = fs.close(f);
    w.and(c)
}

/// `path`'s names as `read_dir` lists them (any error as a string).
fn list<S: Store<FlashError = SimError>>(
    fs: &mut Fs<S, 2048, 4>,
    path: &str,
) -> Result<BTreeSet<String>, String> {
    let mut names = BTreeSet::new();
    for e in fs.read_dir(path).map_err(|e| format!("read_dir: {e:?}"))? {
        let e = e.map_err(|e| format!("listing: {e:?}"))?;
        if !names.insert(e.name().to_string()) {
            return Err(format!("{path}: {} listed twice", e.name()));
        }
    }
    Ok(names)
}

/// `path`'s names as listed and the most whole pages one step read.
fn list_counted(fs: &mut refusing::Vol<'_>, path: &str) -> Result<(BTreeSet<String>, u32), String> {
    let reads = Rc::clone(&fs.store().page_reads);
    let mut names = BTreeSet::new();
    let mut worst = 0;
    let mut it = fs.read_dir(path).map_err(|e| format!("read_dir: {e:?}"))?;
    loop {
        let before = reads.get();
        let e = it.next();
        worst = worst.max(reads.get() - before);
        match e {
            Some(e) => {
                let e = e.map_err(|e| format!("listing: {e:?}"))?;
                if !names.insert(e.name().to_string()) {
                    return Err(format!("{path}: {} listed twice", e.name()));
                }
            }
            None => break,
        }
    }
    Ok((names, worst))
}

fn dir<'w>(dirs: &'w [Walked], path: &str) -> &'w Walked {
    dirs.iter()
        .find(|w| w.path == path)
        .unwrap_or_else(|| panic!("{path} not walked"))
}

fn set_volume_version<S: Store<FlashError = SimError>>(fs: &mut Fs<S, 2048, 4>, v: u16) {
    Store::transact(
        fs.store_mut(),
        &[TxOp::Write {
            obj: 1,
            offset: 4,
            data: &v.to_le_bytes(),
        }],
    )
    .unwrap();
}

fn volume_version<S: Store<FlashError = SimError>>(fs: &mut Fs<S, 2048, 4>) -> u16 {
    let mut h = [0u8; 6];
    Store::read(fs.store_mut(), 1, 0, &mut h).unwrap();
    u16::from_le_bytes([h[4], h[5]])
}

/// Writes `data` at byte `at` of directory object `obj`'s page 0.
fn poke<S: Store<FlashError = SimError>>(
    fs: &mut Fs<S, 2048, 4>,
    obj: u32,
    at: usize,
    data: &[u8],
) {
    Store::transact(
        fs.store_mut(),
        &[TxOp::Write {
            obj,
            offset: at as u64,
            data,
        }],
    )
    .unwrap();
}

// ---------------------------------------------------------------------------------
// A random model over colliding names
// ---------------------------------------------------------------------------------

/// Full paths (no trailing `/`) to kinds.
type Model = BTreeMap<String, Kind>;

/// The name pool: 170 names of group 5, 40 of group 4 (the same page-0 byte), 50 whose
/// low 10 bits are all 1 (every split above level 10 moves them all right), 30 whose
/// low 10 bits are 0 (all left), and 16 others.
fn pool() -> &'static [String] {
    static POOL: OnceLock<Vec<String>> = OnceLock::new();
    POOL.get_or_init(|| {
        let mut p = colliding("p", 10, 170, 5);
        p.extend(colliding("f", 10, 40, 4));
        p.extend(colliding("r", 10, 50, 1023));
        p.extend(colliding("l", 10, 30, 0));
        p.extend((0..16).map(|i| format!("z{i:02}")));
        p
    })
}

fn children<'m>(m: &'m Model, d: &str) -> impl Iterator<Item = &'m String> + 'm {
    let pre = if d == "/" {
        String::from("/")
    } else {
        format!("{d}/")
    };
    m.keys()
        .filter(move |p| p.starts_with(&pre) && !p[pre.len()..].contains('/'))
}

struct Driver {
    rng: Rng,
    model: Model,
    ops: u64,
    staging: bool,
    worst: u32,
    deepest: u32,
}

impl Driver {
    /// `/a` and `/b` first (while they exist), then the others.
    fn dirs(&self) -> Vec<String> {
        let mut d: Vec<String> = ["/a", "/b"]
            .into_iter()
            .filter(|p| self.model.contains_key(*p))
            .map(String::from)
            .collect();
        d.extend(
            self.model
                .iter()
                .filter(|(p, k)| **k == Kind::Dir && *p != "/a" && *p != "/b")
                .map(|(p, _)| p.clone()),
        );
        d
    }

    fn pick<T: Clone>(&mut self, v: &[T]) -> Option<T> {
        (!v.is_empty()).then(|| v[self.rng.below(v.len() as u64) as usize].clone())
    }

    fn name(&mut self) -> String {
        let p = pool();
        p[self.rng.below(p.len() as u64) as usize].clone()
    }

    /// A parent: `/a` or `/b` mostly.
    fn parent(&mut self) -> String {
        if self.rng.below(5) > 0 {
            if self.rng.below(4) > 0 { "/a" } else { "/b" }.to_string()
        } else {
            let d = self.dirs();
            self.pick(&d).unwrap()
        }
    }

    fn files(&self) -> Vec<String> {
        self.model
            .iter()
            .filter(|(_, k)| **k == Kind::File)
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// One random change, done and applied to the model; `Err` when the volume
    /// disagrees with the model. Returns what it did.
    fn step(&mut self, fs: &mut refusing::Vol<'_>) -> Result<String, String> {
        self.ops += 1;
        let r = self.rng.below(100);
        let what;
        if r < 40 {
            let p = format!("{}/{}", self.parent(), self.name());
            if self.model.contains_key(&p) {
                return Ok(String::new());
            }
            what = format!("touch {p}");
            touch(fs, &p).map_err(|e| format!("{what}: {e:?}"))?;
            self.model.insert(p, Kind::File);
        } else if r < 48 {
            let Some(p) = self.pick(&self.files()) else {
                return Ok(String::new());
            };
            let n = [0, 40, 200, 256, 257, 600][self.rng.below(6) as usize];
            what = format!("put {p} {n}");
            put(fs, &p, &pattern(self.ops as u32, n)).map_err(|e| format!("{what}: {e:?}"))?;
        } else if r < 54 {
            let all: Vec<String> = self.model.keys().cloned().collect();
            let Some(p) = self.pick(&all) else {
                return Ok(String::new());
            };
            let n = self.rng.below(33) as usize;
            what = format!("attrs {p} {n}");
            fs.set_attributes(&p, &pattern(3, n))
                .map_err(|e| format!("{what}: {e:?}"))?;
        } else if r < 66 {
            let Some(p) = self.pick(&self.files()) else {
                return Ok(String::new());
            };
            what = format!("remove {p}");
            fs.remove(&p).map_err(|e| format!("{what}: {e:?}"))?;
            self.model.remove(&p);
        } else if r < 90 {
            let all: Vec<String> = self
                .model
                .keys()
                .filter(|p| *p != "/a" && *p != "/b")
                .cloned()
                .collect();
            let Some(a) = self.pick(&all) else {
                return Ok(String::new());
            };
            // Half the time within the source's directory.
            let b = if self.rng.below(2) == 0 {
                format!("{}/{}", &a[..a.rfind('/').unwrap()], self.name())
            } else {
                format!("{}/{}", self.parent(), self.name())
            };
            let ka = self.model[&a];
            let ok = a != b
                && !(ka == Kind::Dir && b.starts_with(&format!("{a}/")))
                && match (ka, self.model.get(&b)) {
                    (_, None) | (Kind::File, Some(Kind::File)) => true,
                    (Kind::Dir, Some(Kind::Dir)) => children(&self.model, &b).next().is_none(),
                    _ => false,
                };
            what = format!("rename {a} {b}");
            let r = fs.rename(&a, &b);
            if !ok {
                return match r {
                    Err(_) => Ok(format!("{what} (refused)")),
                    Ok(()) if a == b => Ok(what),
                    Ok(()) => Err(format!("{what}: done against the model")),
                };
            }
            r.map_err(|e| format!("{what}: {e:?}"))?;
            let moved: Vec<(String, Kind)> = self
                .model
                .iter()
                .filter(|(p, _)| *p == &a || p.starts_with(&format!("{a}/")))
                .map(|(p, k)| (p.clone(), *k))
                .collect();
            self.model.remove(&b);
            for (p, k) in moved {
                self.model.remove(&p);
                self.model.insert(format!("{b}{}", &p[a.len()..]), k);
            }
        } else if r < 94 {
            let p = format!(
                "{}/{}",
                if self.rng.below(2) == 0 { "/a" } else { "/b" },
                self.name()
            );
            if self.model.contains_key(&p) {
                return Ok(String::new());
            }
            what = format!("mkdir {p}");
            fs.create_dir(&p).map_err(|e| format!("{what}: {e:?}"))?;
            self.model.insert(p, Kind::Dir);
        } else if r < 97 {
            let d: Vec<String> = self.dirs().into_iter().skip(2).collect();
            let Some(p) = self.pick(&d) else {
                return Ok(String::new());
            };
            what = format!("rmdir {p}");
            let empty = children(&self.model, &p).next().is_none();
            let r = fs.remove_dir(&p);
            match (empty, r) {
                (true, Ok(())) => {
                    self.model.remove(&p);
                }
                (false, Err(Error::NotEmpty)) => {}
                (_, r) => return Err(format!("{what}: {r:?} (empty: {empty})")),
            }
        } else {
            self.staging = !self.staging;
            fs.set_tuning(Tuning {
                staging: self.staging,
                bypass: !self.staging,
            });
            what = format!("staging {} and step_all", self.staging);
            fs.step_all().map_err(|e| format!("{what}: {e:?}"))?;
        }
        self.check(fs)?;
        Ok(what)
    }

    /// Every count exact, the tree the model's, every directory listed exactly within
    /// the read bound.
    fn check(&mut self, fs: &mut refusing::Vol<'_>) -> Result<(), String> {
        let dirs = counts_exact(fs)?;
        let mut got = Model::new();
        for w in &dirs {
            if w.path != "/" && !w.head.groups && w.head.count == 0 {
                return Err(format!("{}: empty and not version 3", w.path));
            }
            for (n, k) in &w.names {
                got.insert(format!("{}{n}", w.path), *k);
            }
            let mut stack = vec![(0u32, 0u32)];
            while let Some((l, p)) = stack.pop() {
                if bucket::is_split(&w.page0, l, p) {
                    stack.push((l + 1, p));
                    stack.push((l + 1, p | 1 << l));
                } else {
                    self.deepest = self.deepest.max(l);
                }
            }
        }
        if got != self.model {
            let extra: Vec<_> = got
                .keys()
                .filter(|k| !self.model.contains_key(*k))
                .collect();
            let lost: Vec<_> = self
                .model
                .keys()
                .filter(|k| !got.contains_key(*k))
                .collect();
            return Err(format!("tree differs: extra {extra:?}, lost {lost:?}"));
        }
        for d in self.dirs() {
            let (listed, worst) = list_counted(fs, &d)?;
            let want: BTreeSet<String> = children(&self.model, &d)
                .map(|p| p[d.len() + 1..].to_string())
                .collect();
            if listed != want {
                return Err(format!(
                    "{d}: listed {} names, want {}",
                    listed.len(),
                    want.len()
                ));
            }
            if worst > STEP_READS {
                return Err(format!("{d}: a listing step read {worst} pages"));
            }
            self.worst = self.worst.max(worst);
        }
        Ok(())
    }
}

/// Random creates, rewrites (inline and object), attribute changes, removes, renames
/// (within and between directories, over names, of directories), directory creates and
/// removes over colliding names, staging toggled, remounted every 250 changes: after
/// each, every group count exact, every listing the model's within the read bound.
#[test]
fn random_changes_over_colliding_names_keep_group_counts_and_listings_exact() {
    let mut deepest = 0;
    for seed in [3u64, 5, 7] {
        let mut sim = fresh(seed);
        {
            let mut fs = refusing::vol(&mut sim);
            fs.format().unwrap();
            fs.create_dir("/a").unwrap();
            fs.create_dir("/b").unwrap();
            fs.unmount().unwrap();
        }
        let mut d = Driver {
            rng: Rng(seed * 0x9E37_79B9 + 11),
            model: Model::from([("/a".to_string(), Kind::Dir), ("/b".to_string(), Kind::Dir)]),
            ops: 0,
            staging: false,
            worst: 0,
            deepest: 0,
        };
        let mut last: Vec<String> = Vec::new();
        for _round in 0..6 {
            let mut fs = refusing::vol(&mut sim);
            fs.mount().unwrap();
            d.check(&mut fs).unwrap();
            for _ in 0..250 {
                match d.step(&mut fs) {
                    Ok(s) => {
                        if !s.is_empty() {
                            last.push(s);
                            if last.len() > 10 {
                                last.remove(0);
                            }
                        }
                    }
                    Err(e) => panic!("seed {seed} op {}: {e}\nlast: {last:#?}", d.ops),
                }
            }
            fs.unmount().unwrap();
        }
        // Drain: every directory removable exactly when empty.
        let mut fs = refusing::vol(&mut sim);
        fs.mount().unwrap();
        let mut paths: Vec<String> = d.model.keys().cloned().collect();
        paths.sort_by_key(|p| std::cmp::Reverse(p.matches('/').count()));
        for p in paths {
            match d.model[&p] {
                Kind::File => fs.remove(&p).unwrap(),
                Kind::Dir => fs.remove_dir(&p).unwrap(),
            }
            d.model.remove(&p);
            if d.rng.below(8) == 0 {
                d.check(&mut fs).unwrap();
            }
        }
        d.check(&mut fs).unwrap();
        println!(
            "seed {seed}: {} ops, deepest leaf {}, at most {} reads a step",
            d.ops, d.deepest, d.worst
        );
        deepest = deepest.max(d.deepest);
    }
    assert!(deepest >= 11, "no leaf below level 10 (deepest {deepest})");
}

// ---------------------------------------------------------------------------------
// Cuts: splits emptying their left child, renames between groups
// ---------------------------------------------------------------------------------

/// Name sets: 0, 52 names whose low 11 bits are 1023 (left of node (10, 1023)); 1, 3
/// whose low 11 bits are 2047 (right of it); 2, 6 names of group 0 (leaf (1, 0) once
/// the splits have moved everything else right).
fn rnames(set: u8) -> &'static [String] {
    static SETS: OnceLock<[Vec<String>; 3]> = OnceLock::new();
    &SETS.get_or_init(|| {
        [
            colliding("r", 11, 52, 1023),
            colliding("s", 11, 3, 2047),
            colliding("t", 10, 6, 0),
        ]
    })[set as usize]
}

type N = (u8, usize);

#[derive(Clone, Copy, Debug)]
enum Op {
    Touch(N),
    Remove(N),
    Rename(N, N),
    Rmdir,
}

type Names = BTreeSet<String>;

fn rpath(n: N) -> String {
    format!("/g/{}", rnames(n.0)[n.1])
}

fn apply(t: &Names, op: Op) -> Names {
    let mut t = t.clone();
    let name = |n: N| rnames(n.0)[n.1].clone();
    match op {
        Op::Touch(n) => {
            t.insert(name(n));
        }
        Op::Remove(n) => {
            t.remove(&name(n));
        }
        Op::Rename(a, b) => {
            if t.remove(&name(a)) {
                t.insert(name(b));
            }
        }
        Op::Rmdir => {}
    }
    t
}

fn run_op(fs: &mut Vol<'_>, op: Op) -> Result<(), E> {
    match op {
        Op::Touch(n) => touch(fs, &rpath(n)),
        Op::Remove(n) => fs.remove(&rpath(n)),
        Op::Rename(a, b) => fs.rename(&rpath(a), &rpath(b)),
        Op::Rmdir => match fs.remove_dir("/g") {
            Err(Error::NotEmpty) => Ok(()),
            r => r,
        },
    }
}

/// The rest of set 0 and set 1 created (the bucket at level 0 fills: splits at levels
/// 0 to 9 move every name right, emptying each left child, then node (10, 1023)
/// splits), set 1 renamed to group 0 (a bucket of group 1023 empties, one of group 0
/// fills), back over a name, group 0 emptied and filled again.
fn rscript() -> &'static [Op] {
    static S: OnceLock<Vec<Op>> = OnceLock::new();
    S.get_or_init(|| {
        let mut s = Vec::new();
        for i in 36..52 {
            s.push(Op::Touch((0, i)));
            if i % 6 == 0 {
                s.push(Op::Touch((1, (i / 6) % 3)));
            }
        }
        s.extend([
            Op::Rename((1, 0), (2, 0)),
            Op::Rename((1, 1), (2, 1)),
            Op::Rename((1, 2), (2, 2)),
            Op::Touch((2, 3)),
            Op::Rename((2, 0), (2, 3)),
            Op::Rename((2, 1), (1, 0)),
            Op::Remove((2, 2)),
            Op::Remove((2, 3)),
            Op::Touch((2, 4)),
            Op::Rename((1, 0), (2, 5)),
            Op::Remove((2, 4)),
            Op::Rmdir,
        ]);
        s
    })
}

fn rbase() -> (Sim, Names) {
    let mut sim = fresh(61);
    let mut t = Names::new();
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        fs.create_dir("/g").unwrap();
        for i in 0..36 {
            touch(&mut fs, &rpath((0, i))).unwrap();
            t = apply(&t, Op::Touch((0, i)));
        }
        let dirs = counts_exact(&mut fs).unwrap();
        assert!(
            !bucket::is_split(&dir(&dirs, "/g/").page0, 0, 0),
            "split too early"
        );
        fs.unmount().unwrap();
    }
    (sim, t)
}

fn check_g(sim: &mut Sim, cur: &Names, intent: &Option<Names>) -> Result<(), String> {
    let mut fs = vol(sim);
    fs.mount().map_err(|e| format!("mount: {e:?}"))?;
    let dirs = counts_exact(&mut fs)?;
    let got: Names = dir(&dirs, "/g/").names.keys().cloned().collect();
    if &got != cur && intent.as_ref() != Some(&got) {
        return Err(format!(
            "{} names, acknowledged {}, in flight {:?}",
            got.len(),
            cur.len(),
            intent.as_ref().map(|i| i.len())
        ));
    }
    let listed = list(&mut fs, "/g")?;
    if listed != got {
        return Err(format!(
            "listed {} names, the trie holds {}",
            listed.len(),
            got.len()
        ));
    }
    Ok(())
}

#[test]
fn cuts_in_splits_that_empty_the_left_child_and_renames_between_groups() {
    let (base_sim, start) = rbase();
    let script = rscript();
    let mut sim = base_sim.clone();
    sim.arm(FaultPlan::seeded(5));
    let ran = sweep::run_script(&mut sim, &start, script, &apply, &mut |fs, op| {
        run_op(fs, op)
    });
    assert!(ran.err.is_none(), "uncut: {:?}", ran.err);
    let ops = sim.ops_since_arm();
    sim.cut_power();
    sim.power_on();
    sim.disarm();
    check_g(&mut sim, &ran.cur, &None).unwrap();
    {
        let mut fs = vol(&mut sim);
        fs.mount().unwrap();
        let dirs = walk(&mut fs).unwrap();
        let g = dir(&dirs, "/g/");
        // Every level above 10 split along the all-ones path, and node (10, 1023).
        for l in 0..=10 {
            assert!(bucket::is_split(&g.page0, l, (1 << l) - 1), "level {l}");
        }
    }
    let mut rep = Report::default();
    sweep::sweep_passes(
        &base_sim,
        ops,
        9,
        3,
        "all-right splits",
        &mut |sim| sweep::run_script(sim, &start, script, &apply, &mut |fs, op| run_op(fs, op)),
        &mut check_g,
        &mut rep,
    );
    println!("{ops} programs/erases uncut, {} cut runs", rep.runs);
    rep.assert_clean(10);
}

// ---------------------------------------------------------------------------------
// Cuts: a version-2 volume upgraded, its directories turning version 3
// ---------------------------------------------------------------------------------

type Tree = BTreeMap<&'static str, Names>;

fn vname(i: usize) -> String {
    format!("v{i:03}-{}", "x".repeat(30))
}

#[derive(Clone, Copy, Debug)]
enum VOp {
    Touch(&'static str, usize),
    Remove(&'static str, usize),
    Rename((&'static str, usize), (&'static str, usize)),
    Rmdir(&'static str),
}

fn vpath(d: &str, i: usize) -> String {
    format!("{d}/{}", vname(i))
}

fn vapply(t: &Tree, op: VOp) -> Tree {
    let mut t = t.clone();
    match op {
        VOp::Touch(d, i) => {
            t.get_mut(d).unwrap().insert(vname(i));
        }
        VOp::Remove(d, i) => {
            t.get_mut(d).unwrap().remove(&vname(i));
        }
        VOp::Rename((d, i), (e, j)) => {
            if t.get_mut(d).unwrap().remove(&vname(i)) {
                t.get_mut(e).unwrap().insert(vname(j));
            }
        }
        VOp::Rmdir(d) => {
            if t[d].is_empty() {
                t.remove(d);
            }
        }
    }
    t
}

fn vrun(fs: &mut Vol<'_>, op: VOp) -> Result<(), E> {
    match op {
        VOp::Touch(d, i) => touch(fs, &vpath(d, i)),
        VOp::Remove(d, i) => fs.remove(&vpath(d, i)),
        VOp::Rename((d, i), (e, j)) => fs.rename(&vpath(d, i), &vpath(e, j)),
        VOp::Rmdir(d) => fs.remove_dir(d),
    }
}

/// `/v` (60 names, several buckets), `/w` (5) and `/e` (empty) on a volume made
/// version 2 with every directory header version 2.
fn vbase() -> (Sim, Tree) {
    let mut sim = fresh(62);
    let mut t = Tree::from([
        ("/v", Names::new()),
        ("/w", Names::new()),
        ("/e", Names::new()),
    ]);
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        fs.create_dir("/v").unwrap();
        fs.create_dir("/w").unwrap();
        fs.create_dir("/e").unwrap();
        for i in 0..60 {
            touch(&mut fs, &vpath("/v", i)).unwrap();
            t = vapply(&t, VOp::Touch("/v", i));
        }
        for i in 100..105 {
            touch(&mut fs, &vpath("/w", i)).unwrap();
            t = vapply(&t, VOp::Touch("/w", i));
        }
        for w in walk(&mut fs).unwrap() {
            make_version_2(&mut fs, &w);
        }
        set_volume_version(&mut fs, 2);
        let dirs = counts_exact(&mut fs).unwrap();
        assert!(dirs.iter().all(|w| w.head.version() == 2));
        assert!(dir(&dirs, "/v/").filled >= 2);
        fs.unmount().unwrap();
    }
    (sim, t)
}

/// A name renamed into the empty `/e` (version 2 until then); `/v` emptied (a quarter
/// renamed into `/w`, a version-2 directory that stays non-empty), turning version 3;
/// names created and renamed back into it (group counts written); `/w` and `/e`
/// emptied and removed.
fn vscript() -> &'static [VOp] {
    static S: OnceLock<Vec<VOp>> = OnceLock::new();
    S.get_or_init(|| {
        // Into an empty version-2 directory: it turns version 3 (field and group byte).
        let mut s = vec![VOp::Rename(("/v", 1), ("/e", 501))];
        for i in 0..60 {
            if i == 1 {
                continue;
            }
            if i % 4 == 0 {
                s.push(VOp::Rename(("/v", i), ("/w", 200 + i)));
            } else {
                s.push(VOp::Remove("/v", i));
            }
        }
        s.push(VOp::Touch("/v", 300));
        for i in (0..60).step_by(8) {
            s.push(VOp::Rename(("/w", 200 + i), ("/v", 400 + i)));
        }
        for i in 100..105 {
            s.push(VOp::Remove("/w", i));
        }
        for i in (0..60).step_by(4) {
            if i % 8 != 0 {
                s.push(VOp::Rename(("/w", 200 + i), ("/v", i)));
            }
        }
        s.push(VOp::Rmdir("/w"));
        s.push(VOp::Touch("/e", 502));
        s.push(VOp::Remove("/e", 501));
        s.push(VOp::Remove("/e", 502));
        s.push(VOp::Rmdir("/e"));
        s
    })
}

fn check_v(sim: &mut Sim, cur: &Tree, intent: &Option<Tree>) -> Result<(), String> {
    let mut fs = vol(sim);
    fs.mount().map_err(|e| format!("mount: {e:?}"))?;
    let v = volume_version(&mut fs);
    if v != 3 {
        return Err(format!("volume version {v} after a mount"));
    }
    let dirs = counts_exact(&mut fs)?;
    let mut got = Tree::new();
    for d in ["/v", "/w", "/e"] {
        if let Some(w) = dirs.iter().find(|w| w.path == format!("{d}/")) {
            // (`/e` starts empty at version 2: it turns version 3 at its first change.)
            if w.head.count == 0 && !w.head.groups && d != "/e" {
                return Err(format!("{d}: empty, version {}", w.head.version()));
            }
            got.insert(d, w.names.keys().cloned().collect());
            let listed = list(&mut fs, d)?;
            if listed != got[d] {
                return Err(format!(
                    "{d}: listed {} names, holds {}",
                    listed.len(),
                    got[d].len()
                ));
            }
        }
    }
    if &got != cur && intent.as_ref() != Some(&got) {
        return Err("names neither acknowledged nor in flight".to_string());
    }
    Ok(())
}

#[test]
fn cuts_in_a_version_2_volume_upgrade_and_its_directories_turning_version_3() {
    let (base_sim, start) = vbase();
    let script = vscript();
    let mut sim = base_sim.clone();
    sim.arm(FaultPlan::seeded(7));
    let ran = sweep::run_script(&mut sim, &start, script, &vapply, &mut |fs, op| {
        vrun(fs, op)
    });
    assert!(ran.err.is_none(), "uncut: {:?} at {}", ran.err, ran.steps);
    let ops = sim.ops_since_arm();
    sim.cut_power();
    sim.power_on();
    sim.disarm();
    check_v(&mut sim, &ran.cur, &None).unwrap();
    {
        let mut fs = vol(&mut sim);
        fs.mount().unwrap();
        let dirs = walk(&mut fs).unwrap();
        let v = dir(&dirs, "/v/");
        assert!(v.head.groups && v.filled >= 2, "/v: {:?}", v.head);
        assert!(dirs.iter().all(|w| w.path != "/w/" && w.path != "/e/"));
        // The root was never empty: it stays version 2.
        assert_eq!(dir(&dirs, "/").head.version(), 2);
    }
    let mut rep = Report::default();
    sweep::sweep_passes(
        &base_sim,
        ops,
        13,
        7,
        "v2 upgrade",
        &mut |sim| sweep::run_script(sim, &start, script, &vapply, &mut |fs, op| vrun(fs, op)),
        &mut check_v,
        &mut rep,
    );
    println!("{ops} programs/erases uncut, {} cut runs", rep.runs);
    rep.assert_clean(10);
}

// ---------------------------------------------------------------------------------
// The read bound: a step across two full groups that hold one bucket of names each
// ---------------------------------------------------------------------------------

/// Groups 0 and 512 (next to each other in listing order) split into their 8 buckets
/// each, then emptied but for the first bucket of group 0 and the last of group 512:
/// the step leaving the first reads the 7 empty buckets after it and the 8 of group
/// 512 (16, the bound), and never more; the same after a remount, and with the two
/// buckets emptied.
#[test]
fn a_step_across_two_full_groups_reads_at_most_16_buckets() {
    let mut sim = fresh(63);
    let mut keep = Vec::new();
    let mut all = Vec::new();
    {
        let mut fs = refusing::vol(&mut sim);
        fs.format().unwrap();
        fs.create_dir("/d").unwrap();
        for g in [0u32, 512] {
            for k in 0..8u32 {
                let pfx = g + (k << 10);
                let names = colliding(&format!("k{pfx}-"), 13, 30, pfx);
                let last = if g == 0 { 0 } else { 512 + (7 << 10) };
                for n in &names {
                    touch(&mut fs, &format!("/d/{n}")).unwrap();
                }
                if pfx == last {
                    keep.extend(names.iter().take(3).cloned());
                }
                all.extend(names);
            }
        }
        let dirs = counts_exact(&mut fs).unwrap();
        let d = dir(&dirs, "/d/");
        assert_eq!(
            (
                bucket::group_count(&d.page0, 0),
                bucket::group_count(&d.page0, 512)
            ),
            (8, 8)
        );
        for n in &all {
            if !keep.contains(n) {
                fs.remove(&format!("/d/{n}")).unwrap();
            }
        }
        let (listed, worst) = list_counted(&mut fs, "/d").unwrap();
        assert_eq!(listed, keep.iter().cloned().collect());
        println!("one bucket in each of two full groups: {worst} reads a step");
        assert!(worst <= STEP_READS, "{worst} reads");
        assert!(worst >= 16, "the adversarial step read {worst} pages only");
        counts_exact(&mut fs).unwrap();
        fs.unmount().unwrap();
    }
    let mut fs = refusing::vol(&mut sim);
    fs.mount().unwrap();
    let (listed, worst) = list_counted(&mut fs, "/d").unwrap();
    assert_eq!(listed.len(), keep.len());
    assert!(worst <= STEP_READS, "after a remount: {worst} reads");
    for n in &keep {
        fs.remove(&format!("/d/{n}")).unwrap();
    }
    let (listed, worst) = list_counted(&mut fs, "/d").unwrap();
    assert!(listed.is_empty());
    assert!(
        worst <= 1,
        "an empty directory's listing read {worst} pages"
    );
    fs.remove_dir("/d").unwrap();
}

// ---------------------------------------------------------------------------------
// Corrupt group counts
// ---------------------------------------------------------------------------------

/// `/d` with names of group 5 (several buckets) and 4 names of group 9 (in a leaf
/// above level 10), its object, and the groups of their buckets.
fn corrupt_base(seed: u64) -> (Sim, u32, Names, u32, u32) {
    let mut sim = fresh(seed);
    let mut names = Names::new();
    let (obj, gc, ge);
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        fs.create_dir("/d").unwrap();
        for n in colliding("c", 10, 70, 5)
            .into_iter()
            .chain(colliding("e", 10, 4, 9))
        {
            touch(&mut fs, &format!("/d/{n}")).unwrap();
            names.insert(n);
        }
        let dirs = counts_exact(&mut fs).unwrap();
        let d = dir(&dirs, "/d/");
        let group =
            |n: &str| bucket::group_of(bucket::leaf_of(&d.page0, bucket::hash(n.as_bytes())).1);
        (gc, ge) = (
            group(&colliding("c", 10, 1, 5)[0]),
            group(&colliding("e", 10, 1, 9)[0]),
        );
        assert_eq!(gc, 5);
        assert_ne!(gc, ge);
        assert!(bucket::group_count(&d.page0, gc) >= 2);
        assert_eq!(bucket::group_count(&d.page0, ge), 1);
        obj = d.obj;
        fs.unmount().unwrap();
    }
    (sim, obj, names, gc, ge)
}

/// Every call on the corrupt directory: an error or a correct answer, never a panic;
/// the directory never removed while it holds a name. Returns what the listing gave.
fn exercise(fs: &mut Vol<'_>, names: &Names, what: &str) -> Result<BTreeSet<String>, String> {
    let first = names.iter().next().unwrap().clone();
    let last = names.iter().next_back().unwrap().clone();
    let r = fs.remove_dir("/d");
    if r.is_ok() {
        return Err(format!(
            "{what}: remove_dir removed a directory of {} names",
            names.len()
        ));
    }
    let _ = touch(fs, "/d/new-name");
    let _ = fs.metadata(&format!("/d/{first}"));
    let _ = fs.rename(&format!("/d/{first}"), "/d/renamed");
    let _ = fs.rename(&format!("/d/{last}"), "/out");
    let listed = match fs.read_dir("/d") {
        Ok(it) => {
            let v: Vec<_> = it.take(names.len() + 10).collect();
            if v.iter().any(|e| e.is_err()) {
                None
            } else {
                Some(
                    v.into_iter()
                        .map(|e| e.unwrap().name().to_string())
                        .collect(),
                )
            }
        }
        Err(_) => None,
    };
    let _ = fs.remove(&format!("/d/{}", names.iter().nth(1).unwrap()));
    if fs.remove_dir("/d").is_ok() {
        return Err(format!("{what}: remove_dir removed a non-empty directory"));
    }
    Ok(listed.unwrap_or_default())
}

/// Nibbles 9 to 15 (impossible): every call errors or answers, the directory stays.
#[test]
fn impossible_group_counts_give_errors_and_never_panic() {
    for (i, n) in [9u8, 15, 12, 9].into_iter().enumerate() {
        let (mut sim, obj, names, gc, ge) = corrupt_base(71);
        let g = [gc, ge, 0, 1023][i];
        let mut fs = vol(&mut sim);
        fs.mount().unwrap();
        let at = bucket::group_byte(g);
        let mut b = [0u8];
        Store::read(fs.store_mut(), obj, at as u64, &mut b).unwrap();
        poke(&mut fs, obj, at, &[bucket::with_nibble(b[0], g, n)]);
        let what = format!("group {g} = {n}");
        exercise(&mut fs, &names, &what).unwrap();
        assert_eq!(
            fs.read_dir("/d").unwrap().next().unwrap().err(),
            Some(Error::Corrupted)
        );
        assert!(fs.metadata("/d").is_ok());
    }
}

/// Counts higher than the buckets holding names: listings stay exact; emptying the
/// directory fails or leaves it not removable, never removes a name.
#[test]
fn group_counts_too_high_never_hide_or_lose_a_name() {
    for (i, n) in [8u8, 3, 8, 1].into_iter().enumerate() {
        let (mut sim, obj, names, gc, ge) = corrupt_base(72);
        let g = [ge, 0, gc, 1023][i];
        let mut fs = vol(&mut sim);
        fs.mount().unwrap();
        let at = bucket::group_byte(g);
        let mut b = [0u8];
        Store::read(fs.store_mut(), obj, at as u64, &mut b).unwrap();
        poke(&mut fs, obj, at, &[bucket::with_nibble(b[0], g, n)]);
        assert_eq!(list(&mut fs, "/d").unwrap(), names, "group {g} = {n}");
        let mut failed = 0;
        for name in &names {
            if fs.remove(&format!("/d/{name}")).is_err() {
                failed += 1;
            }
        }
        let left = list(&mut fs, "/d").unwrap();
        assert_eq!(left.len(), failed, "group {g} = {n}");
        let r = fs.remove_dir("/d");
        println!("group {g} = {n}: {failed} removes refused, remove_dir {r:?}");
        assert!(r.is_err() || left.is_empty());
    }
}

/// A count of 0 for a group whose bucket holds names: the names are there (a lookup
/// finds them) but a listing skips them.
#[test]
#[ignore = "finding: a group count of 0 for a group holding names hides them from read_dir (no error)"]
fn a_group_count_too_low_hides_names_from_read_dir() {
    let (mut sim, obj, names, _, ge) = corrupt_base(73);
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    let at = bucket::group_byte(ge);
    let mut b = [0u8];
    Store::read(fs.store_mut(), obj, at as u64, &mut b).unwrap();
    poke(&mut fs, obj, at, &[bucket::with_nibble(b[0], ge, 0)]);
    let e = colliding("e", 10, 4, 9);
    assert!(fs.metadata(&format!("/d/{}", e[0])).is_ok());
    let listed = list(&mut fs, "/d");
    assert!(
        listed.is_err() || listed.as_ref().unwrap() == &names,
        "listed {} of {} names",
        listed.unwrap().len(),
        names.len()
    );
}

/// Every group count 0 in a directory of 74 names: `remove_dir` removes it (its names
/// unreachable, their objects orphaned), where the directory's buckets still hold them.
#[test]
#[ignore = "finding: all-zero group counts let remove_dir remove a non-empty directory"]
fn all_group_counts_0_let_remove_dir_remove_a_non_empty_directory() {
    let (mut sim, obj, names, _, _) = corrupt_base(74);
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    poke(&mut fs, obj, bucket::GROUPS_AT, &[0u8; 512]);
    let r = fs.remove_dir("/d");
    assert!(
        r.is_err(),
        "remove_dir removed a directory of {} names",
        names.len()
    );
    exercise(&mut fs, &names, "every group count 0").unwrap();
}
