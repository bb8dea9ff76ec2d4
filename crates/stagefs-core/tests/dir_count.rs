//! Page 0's count (directory header version 2, stop 55): the number of buckets holding
//! a name, so that a create or remove in a bucket that keeps a name programs the bucket
//! alone; version-1 directories (a count of names) keep working and turn version 2 when
//! they are empty. Checked by walking the on-flash trie after every change and after
//! every cut of a script that empties and fills buckets, renames across directories and
//! removes directories.

use std::collections::{BTreeMap, BTreeSet};

use nand_hal::sim::{profile, FaultPlan, SimNand};
use oftl::TxOp;
use stagefs_core::format::volume;
use stagefs_core::{Error, Store};

use crate::support::dirs::{counts_exact, walk};
use crate::support::sweep::{self, Ran, Report};
use crate::support::{create, pattern, vol, write_file, Sim, Vol};

fn programmed(fs: &Vol<'_>) -> u64 {
    fs.store().stats().pages_programmed
}

fn touch(fs: &mut Vol<'_>, path: &str) {
    let f = fs.open(path, create().create_new(true)).unwrap();
    fs.close(f).unwrap();
}

fn fresh(seed: u64) -> Sim {
    SimNand::heap(profile::TINY, FaultPlan::seeded(seed))
}

/// The point of version 2: the count changes only when a bucket empties or gets its
/// first name, so a create or a remove beside other names writes one page.
#[test]
fn creates_and_removes_beside_other_names_program_the_bucket_alone() {
    let mut sim = fresh(1);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    fs.create_dir("/d").unwrap();
    let cost = |fs: &mut Vol<'_>, f: &dyn Fn(&mut Vol<'_>)| {
        let before = programmed(fs);
        f(fs);
        counts_exact(fs).unwrap();
        programmed(fs) - before
    };
    // The bucket's first name: the bucket and page 0's count.
    assert_eq!(cost(&mut fs, &|fs| touch(fs, "/d/a")), 2);
    // Beside it: the bucket alone (page 0 too until stop 55).
    assert_eq!(cost(&mut fs, &|fs| touch(fs, "/d/b")), 1);
    assert_eq!(cost(&mut fs, &|fs| fs.remove("/d/b").unwrap()), 1);
    // A file with an object: the bucket and the object's tombstone.
    write_file(&mut fs, "/d/big", &pattern(3, 600));
    assert_eq!(cost(&mut fs, &|fs| fs.remove("/d/big").unwrap()), 2);
    // A rename within the bucket rewrites it once.
    assert_eq!(cost(&mut fs, &|fs| fs.rename("/d/a", "/d/c").unwrap()), 1);
    // The bucket's last name: the bucket and the count.
    assert_eq!(cost(&mut fs, &|fs| fs.remove("/d/c").unwrap()), 2);
    assert_eq!(fs.remove_dir("/d"), Ok(()));
    counts_exact(&mut fs).unwrap();
}

/// Hundreds of names (splits at several levels), removed in a scrambled order, some by
/// renames into another directory: after every change each count is exact, and the
/// directory can be removed exactly when it is empty.
#[test]
fn counts_stay_exact_through_splits_renames_and_removes() {
    let mut sim = fresh(2);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    fs.create_dir("/d").unwrap();
    fs.create_dir("/e").unwrap();
    let n = 400u32;
    for i in 0..n {
        let path = format!("/d/mail-{i:05}-{}", "x".repeat((i % 23) as usize));
        write_file(&mut fs, &path, &pattern(i, (i % 5) as usize * 90));
        if i % 37 == 0 {
            counts_exact(&mut fs).unwrap();
        }
    }
    let dirs = counts_exact(&mut fs).unwrap();
    let d = dirs.iter().find(|w| w.path == "/d/").unwrap();
    assert!(d.filled >= 8, "{} buckets: too few splits", d.filled);
    let mut names: Vec<String> = d.names.keys().cloned().collect();
    let mut rng = crate::support::Rng(7);
    for i in (1..names.len()).rev() {
        names.swap(i, rng.below(i as u64 + 1) as usize);
    }
    for (k, name) in names.iter().enumerate() {
        assert_eq!(fs.remove_dir("/d"), Err(Error::NotEmpty), "{k}");
        if k % 3 == 0 {
            fs.rename(&format!("/d/{name}"), &format!("/e/{name}"))
                .unwrap();
        } else {
            fs.remove(&format!("/d/{name}")).unwrap();
        }
        counts_exact(&mut fs).unwrap();
    }
    fs.remove_dir("/d").unwrap();
    // Renames back and forth within one directory and across, then empty it.
    fs.create_dir("/d").unwrap();
    let moved: Vec<String> = names.iter().step_by(3).cloned().collect();
    for (k, name) in moved.iter().enumerate() {
        let to = if k % 2 == 0 {
            format!("/d/{name}")
        } else {
            format!("/e/{name}.renamed")
        };
        fs.rename(&format!("/e/{name}"), &to).unwrap();
        counts_exact(&mut fs).unwrap();
    }
    for w in walk(&mut fs).unwrap() {
        if w.path == "/e/" || w.path == "/d/" {
            for name in w.names.into_keys() {
                assert_eq!(
                    fs.remove_dir(&w.path[..w.path.len() - 1]),
                    Err(Error::NotEmpty)
                );
                fs.remove(&format!("{}{name}", w.path)).unwrap();
                counts_exact(&mut fs).unwrap();
            }
        }
    }
    fs.remove_dir("/d").unwrap();
    fs.remove_dir("/e").unwrap();
    fs.unmount().unwrap();
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    let dirs = counts_exact(&mut fs).unwrap();
    assert_eq!(dirs.len(), 1);
    assert!(dirs[0].names.is_empty());
}

/// Writes a version-1 header (a count of names) over directory `path`'s page 0, as a
/// volume from before stop 55 has it.
fn make_version_1(fs: &mut Vol<'_>, path: &str) {
    let w = walk(fs)
        .unwrap()
        .into_iter()
        .find(|w| w.path == path)
        .unwrap();
    crate::support::dirs::make_version_1(fs, &w);
}

/// Writes version 1 over the volume header's version.
fn make_volume_version_1(fs: &mut Vol<'_>) {
    Store::transact(
        fs.store_mut(),
        &[TxOp::Write {
            obj: 1,
            offset: 4,
            data: &1u16.to_le_bytes(),
        }],
    )
    .unwrap();
}

/// The volume header's version (object 1, bytes 4..6).
fn volume_version(fs: &mut Vol<'_>) -> u16 {
    let mut h = [0u8; 6];
    Store::read(fs.store_mut(), 1, 0, &mut h).unwrap();
    u16::from_le_bytes([h[4], h[5]])
}

/// A version-1 directory counts names at every change until it is empty; then it
/// counts buckets. An empty version-1 directory turns version 2 at its first create.
#[test]
fn version_1_directories_count_names_until_they_are_empty() {
    let mut sim = fresh(3);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    fs.create_dir("/old").unwrap();
    fs.create_dir("/empty").unwrap();
    for i in 0..120u32 {
        touch(&mut fs, &format!("/old/n{i}"));
    }
    make_version_1(&mut fs, "/old/");
    make_version_1(&mut fs, "/empty/");
    make_version_1(&mut fs, "/");
    // And the volume header: a volume from before stop 55.
    make_volume_version_1(&mut fs);
    assert_eq!(volume_version(&mut fs), 1);
    fs.unmount().unwrap();
    // The mount upgrades the volume header (one page), and nothing else.
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    assert_eq!(volume_version(&mut fs), volume::VERSION);
    fs.unmount().unwrap();
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    assert_eq!(volume_version(&mut fs), volume::VERSION);
    let version = |fs: &mut Vol<'_>, path: &str| {
        let dirs = counts_exact(fs).unwrap();
        let w = dirs.iter().find(|w| w.path == path).unwrap();
        (w.head.counts_buckets, w.head.count)
    };
    assert_eq!(version(&mut fs, "/old/"), (false, 120));
    assert_eq!(version(&mut fs, "/"), (false, 2));
    // Renames, creates and removes keep counting names.
    fs.rename("/old/n0", "/old/m0").unwrap();
    touch(&mut fs, "/old/extra");
    fs.rename("/old/extra", "/old/n1").unwrap();
    assert_eq!(version(&mut fs, "/old/"), (false, 120));
    for i in 1..120u32 {
        fs.remove(&format!("/old/n{i}")).unwrap();
        assert_eq!(version(&mut fs, "/old/"), (false, 120 - i));
        assert_eq!(fs.remove_dir("/old"), Err(Error::NotEmpty));
    }
    fs.remove("/old/m0").unwrap();
    assert_eq!(version(&mut fs, "/old/"), (true, 0));
    touch(&mut fs, "/old/again");
    assert_eq!(version(&mut fs, "/old/"), (true, 1));
    fs.remove("/old/again").unwrap();
    fs.remove_dir("/old").unwrap();
    // An empty version-1 directory: its first create makes it version 2.
    assert_eq!(version(&mut fs, "/empty/"), (false, 0));
    touch(&mut fs, "/empty/a");
    assert_eq!(version(&mut fs, "/empty/"), (true, 1));
    // The root lost "old": a count of names still.
    assert_eq!(version(&mut fs, "/"), (false, 1));
    fs.rename("/empty/a", "/a").unwrap();
    assert_eq!(version(&mut fs, "/empty/"), (true, 0));
    assert_eq!(version(&mut fs, "/"), (false, 2));
    fs.remove_dir("/empty").unwrap();
    fs.remove("/a").unwrap();
    assert_eq!(version(&mut fs, "/"), (true, 0));
}

/// What a script has done: each directory's names.
type Tree = BTreeMap<String, BTreeSet<String>>;

#[derive(Clone, Copy, Debug)]
enum Op {
    Touch(&'static str),
    Write(&'static str, usize),
    Remove(&'static str),
    Rename(&'static str, &'static str),
    Mkdir(&'static str),
    Rmdir(&'static str),
}

/// Buckets empty and fill (a one-bucket directory), a directory with a split fills and
/// empties a bucket, renames cross directories, a directory is removed and made again.
const SCRIPT: &[Op] = &[
    Op::Touch("/d/a"),
    Op::Write("/d/b", 700),
    Op::Remove("/d/a"),
    Op::Rename("/d/b", "/e/b"),
    Op::Rmdir("/d"),
    Op::Mkdir("/d"),
    Op::Rename("/e/b", "/d/b"),
    Op::Touch("/e/c"),
    Op::Rename("/e/c", "/d/b"),
    Op::Remove("/s/k07"),
    Op::Remove("/s/k11"),
    Op::Touch("/s/k07"),
    Op::Rename("/s/k03", "/s/z03"),
    Op::Rename("/d/b", "/s/k11"),
    Op::Touch("/e/f"),
    Op::Remove("/e/f"),
    Op::Rmdir("/d"),
    Op::Rmdir("/e"),
];

fn split(path: &str) -> (String, String) {
    let i = path.rfind('/').unwrap();
    (format!("{}/", &path[..i]), path[i + 1..].to_string())
}

/// The tree after `op` (as the file layer should leave it; a refused op changes
/// nothing).
fn apply(t: &Tree, op: Op) -> Tree {
    let mut t = t.clone();
    match op {
        Op::Touch(p) | Op::Write(p, _) => {
            let (d, n) = split(p);
            t.get_mut(&d).unwrap().insert(n);
        }
        Op::Remove(p) => {
            let (d, n) = split(p);
            t.get_mut(&d).unwrap().remove(&n);
        }
        Op::Rename(a, b) => {
            let (da, na) = split(a);
            let (db, nb) = split(b);
            if t[&da].contains(&na) {
                t.get_mut(&da).unwrap().remove(&na);
                t.get_mut(&db).unwrap().insert(nb);
            }
        }
        Op::Mkdir(p) => {
            t.get_mut("/").unwrap().insert(p[1..].to_string());
            t.insert(format!("{p}/"), BTreeSet::new());
        }
        Op::Rmdir(p) => {
            if t[&format!("{p}/")].is_empty() {
                t.get_mut("/").unwrap().remove(&p[1..]);
                t.remove(&format!("{p}/"));
            }
        }
    }
    t
}

fn run_op(fs: &mut Vol<'_>, op: Op) -> Result<(), Error<nand_hal::sim::SimError>> {
    match op {
        Op::Touch(p) => {
            let f = fs.open(p, create().truncate(true))?;
            fs.close(f)
        }
        Op::Write(p, n) => {
            let f = fs.open(p, create().truncate(true))?;
            fs.write(f, &pattern(n as u32, n))?;
            fs.close(f)
        }
        Op::Remove(p) => fs.remove(p),
        Op::Rename(a, b) => fs.rename(a, b),
        Op::Mkdir(p) => fs.create_dir(p),
        Op::Rmdir(p) => match fs.remove_dir(p) {
            Err(Error::NotEmpty) => Ok(()),
            r => r,
        },
    }
}

/// The volume the script starts from: `/d`, `/e`, and `/s` with 40 names (split);
/// with `old`, every header at version 1 (the script's mount upgrades the volume).
fn base(old: bool) -> (Sim, Tree) {
    let mut sim = fresh(4);
    let mut t = Tree::new();
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        t.insert("/".into(), BTreeSet::new());
        for d in ["/d", "/e", "/s"] {
            fs.create_dir(d).unwrap();
            t = apply(&t, Op::Mkdir(d));
        }
        for i in 0..40 {
            let name = format!("k{i:02}-{}", "n".repeat(40));
            touch(&mut fs, &format!("/s/{name}"));
            t.get_mut("/s/").unwrap().insert(name);
        }
        // The script's short names for some of them.
        for i in [3, 7, 11] {
            fs.rename(
                &format!("/s/k{i:02}-{}", "n".repeat(40)),
                &format!("/s/k{i:02}"),
            )
            .unwrap();
            let s = t.get_mut("/s/").unwrap();
            s.remove(&format!("k{i:02}-{}", "n".repeat(40)));
            s.insert(format!("k{i:02}"));
        }
        let dirs = counts_exact(&mut fs).unwrap();
        let s = dirs.iter().find(|w| w.path == "/s/").unwrap();
        assert!(s.filled >= 2, "no split in /s");
        if old {
            for d in ["/", "/d/", "/e/", "/s/"] {
                make_version_1(&mut fs, d);
            }
            make_volume_version_1(&mut fs);
        }
        fs.unmount().unwrap();
    }
    (sim, t)
}

fn run_script(sim: &mut Sim, start: &Tree) -> Ran<Tree> {
    sweep::run_script(sim, start, SCRIPT, &apply, &mut |fs, op| run_op(fs, op))
}

/// After a cut: the volume mounts, every count is exact, the names are the
/// acknowledged tree's or the one in flight's, and each directory can be removed
/// exactly when it is empty.
fn check(sim: &mut Sim, cur: &Tree, intent: &Option<Tree>) -> Result<(), String> {
    let mut fs = vol(sim);
    fs.mount().map_err(|e| format!("mount: {e:?}"))?;
    let dirs = counts_exact(&mut fs)?;
    let got: Tree = dirs
        .into_iter()
        .map(|w| (w.path, w.names.into_keys().collect()))
        .collect();
    if &got != cur && intent.as_ref() != Some(&got) {
        return Err(format!(
            "tree {got:?}, acknowledged {cur:?}, in flight {intent:?}"
        ));
    }
    for (d, names) in &got {
        if d == "/" {
            continue;
        }
        let r = fs.remove_dir(&d[..d.len() - 1]);
        if names.is_empty() != r.is_ok() {
            return Err(format!("remove_dir {d} with {} names: {r:?}", names.len()));
        }
        if r.is_ok() {
            fs.create_dir(&d[..d.len() - 1])
                .map_err(|e| format!("create_dir {d}: {e:?}"))?;
        }
    }
    counts_exact(&mut fs)?;
    Ok(())
}

/// The script cut at every program and erase with each cut kind (and, for clean cuts,
/// every recovery cut again), from a new volume and from one of version 1 whose first
/// mount (cut too) upgrades it: zero violations.
#[test]
fn cuts_leave_every_count_exact() {
    for old in [false, true] {
        let (base_sim, start) = base(old);
        let mut sim = base_sim.clone();
        sim.arm(FaultPlan::seeded(5));
        let ran = run_script(&mut sim, &start);
        assert!(ran.err.is_none(), "uncut: {:?}", ran.err);
        let ops = sim.ops_since_arm();
        sim.cut_power();
        sim.power_on();
        sim.disarm();
        check(&mut sim, &ran.cur, &None).unwrap();
        let mut rep = Report::default();
        let name = if old {
            "dir count (version 1)"
        } else {
            "dir count"
        };
        sweep::sweep_passes(
            &base_sim,
            ops,
            5,
            1,
            name,
            &mut |sim| run_script(sim, &start),
            &mut check,
            &mut rep,
        );
        println!(
            "old {old}: {ops} programs/erases uncut, {} cut runs",
            rep.runs
        );
        assert!(rep.runs > 5 * ops, "{} runs", rep.runs);
        rep.assert_clean(10);
    }
}
