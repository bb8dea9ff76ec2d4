//! `Fs::unnamed_objects` and `Fs::remove_unnamed_objects` (feature `alloc`): objects no
//! path names are found and deleted, and nothing a path names is touched, also when
//! the power goes in the middle of the removal.

use crate::support;

use nand_hal::sim::{profile, CutKind, FaultPlan, SimNand};
use oftl::ObjKind;
use stagefs_core::{Error, OpenOptions};
use support::{create, pattern, read_all, vol, write_file, Sim, Vol};

/// Every file of the tree, with its contents.
fn files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("/s", pattern(1, 100)),
        ("/a/big", pattern(2, 5000)),
        ("/a/b/f", pattern(3, 3000)),
        ("/a/b/tiny", pattern(4, 1)),
    ]
}

/// A tree of directories, inline and object files, a staged file with records still in
/// the log, 150 names in one directory, and `orphans` objects nothing names.
fn volume(orphans: u32) -> (Sim, Vec<u32>) {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(11));
    let mut made = Vec::new();
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        fs.create_dir("/a").unwrap();
        fs.create_dir("/a/b").unwrap();
        fs.create_dir("/m").unwrap();
        for (p, d) in files() {
            write_file(&mut fs, p, &d);
        }
        for i in 0..150 {
            write_file(
                &mut fs,
                &format!("/m/n{i:03}"),
                &pattern(i, 300 + i as usize),
            );
        }
        let f = fs.open("/log", create()).unwrap();
        fs.write(f, &pattern(5, 4000)).unwrap();
        fs.close(f).unwrap();
        let f = fs
            .open("/log", OpenOptions::new().write(true).append(true))
            .unwrap();
        for i in 0..6 {
            fs.write(f, &pattern(100 + i, 64)).unwrap();
            fs.fsync(f).unwrap();
        }
        fs.close(f).unwrap();
        assert!(
            fs.staging_status().unwrap().staged_bytes > 0,
            "the log should hold /log's records"
        );
        for i in 0..orphans {
            let s = fs.store_mut();
            let o = s.create(ObjKind::Object).unwrap();
            s.write(o, 0, &pattern(200 + i, 2500)).unwrap();
            s.flush(o).unwrap();
            made.push(o);
        }
        fs.store_mut().sync().unwrap();
    }
    (sim, made)
}

fn log_contents() -> Vec<u8> {
    let mut d = pattern(5, 4000);
    for i in 0..6 {
        d.extend(pattern(100 + i, 64));
    }
    d
}

fn check_tree(fs: &mut Vol<'_>) {
    for (p, d) in files() {
        assert_eq!(read_all(fs, p), d, "{p}");
    }
    for i in 0..150 {
        assert_eq!(
            read_all(fs, &format!("/m/n{i:03}")),
            pattern(i, 300 + i as usize)
        );
    }
    assert_eq!(read_all(fs, "/log"), log_contents(), "/log");
}

#[test]
fn unnamed_objects_are_found_and_removed_and_named_ones_kept() {
    let (mut sim, made) = volume(3);
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    assert_eq!(fs.unnamed_objects().unwrap(), made);
    // An open file may own an object its commit has not named yet.
    let f = fs.open("/s", OpenOptions::new().read(true)).unwrap();
    assert_eq!(fs.unnamed_objects(), Err(Error::Busy));
    assert_eq!(fs.remove_unnamed_objects(), Err(Error::Busy));
    fs.close(f).unwrap();
    assert_eq!(fs.remove_unnamed_objects().unwrap(), 3);
    assert_eq!(fs.unnamed_objects().unwrap(), Vec::<u32>::new());
    check_tree(&mut fs);
    for &o in &made {
        assert!(!fs.store_mut().exists(o).unwrap(), "object {o}");
    }
    fs.unmount().unwrap();
    fs.mount().unwrap();
    check_tree(&mut fs);
    assert_eq!(fs.unnamed_objects().unwrap(), Vec::<u32>::new());
    // A clean volume has none, and removing none changes nothing.
    assert_eq!(fs.remove_unnamed_objects().unwrap(), 0);
}

#[test]
fn a_volume_without_leftovers_has_no_unnamed_objects() {
    let (mut sim, made) = volume(0);
    assert!(made.is_empty());
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    assert_eq!(fs.unnamed_objects().unwrap(), Vec::<u32>::new());
    // After every staged record went home too.
    fs.step_all().unwrap();
    assert_eq!(fs.unnamed_objects().unwrap(), Vec::<u32>::new());
    check_tree(&mut fs);
}

/// The power goes at every program and erase of the removal (clean and torn cuts):
/// the tree reads as before, the objects left are some of the unnamed ones, and a
/// second removal finishes the job.
#[test]
fn a_cut_removal_loses_nothing_named() {
    let (base, made) = volume(3);
    let mut probe = base.clone();
    probe.arm(FaultPlan::seeded(1));
    {
        let mut fs = vol(&mut probe);
        fs.mount().unwrap();
        assert_eq!(fs.remove_unnamed_objects().unwrap(), 3);
    }
    let n = probe.ops_since_arm();
    assert!(n > 3, "{n} programs/erases");
    let mut runs = 0;
    for kind in CutKind::ALL {
        for at in 1..=n {
            let mut sim = base.clone();
            sim.arm(FaultPlan::seeded(at).with_cut(at, kind));
            {
                let mut fs = vol(&mut sim);
                if fs.mount().is_ok() {
                    let _ = fs.remove_unnamed_objects();
                }
            }
            sim.cut_power();
            sim.power_on();
            sim.disarm();
            let mut fs = vol(&mut sim);
            fs.mount()
                .unwrap_or_else(|e| panic!("cut {at}/{kind:?}: mount: {e:?}"));
            check_tree(&mut fs);
            let left = fs.unnamed_objects().unwrap();
            assert!(
                left.iter().all(|o| made.contains(o)),
                "cut {at}/{kind:?}: unnamed {left:?}, made {made:?}"
            );
            assert_eq!(fs.remove_unnamed_objects().unwrap(), left.len());
            assert_eq!(fs.unnamed_objects().unwrap(), Vec::<u32>::new());
            check_tree(&mut fs);
            runs += 1;
        }
    }
    assert_eq!(runs, 5 * n);
}
