//! End-to-end behaviour of the file layer on the simulated part: namespace operations,
//! inline and object files, listing, remount and crash.

use crate::support;

use nand_hal::sim::{profile, FaultPlan, SimNand};
use stagefs_core::{Error, Kind, OpenOptions, PathError, SeekFrom, INLINE_MAX};
use support::{create, pattern, read_all, rw, vol, write_file, Vol};

fn names(fs: &mut Vol<'_>, path: &str) -> Vec<(String, Kind)> {
    let mut v: Vec<_> = fs
        .read_dir(path)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.name().to_string(), e.kind)
        })
        .collect();
    v.sort();
    v
}

#[test]
fn files_and_directories_survive_remount_and_crash() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(1));
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        fs.create_dir("/etc").unwrap();
        fs.create_dir("/etc/net").unwrap();
        write_file(&mut fs, "/etc/hostname", b"stagefs");
        write_file(&mut fs, "/big.bin", &pattern(1, 10_000));
        fs.set_attributes("/etc/hostname", b"\x01\x02").unwrap();
        assert_eq!(
            names(&mut fs, "/"),
            vec![("big.bin".into(), Kind::File), ("etc".into(), Kind::Dir)]
        );
        fs.unmount().unwrap();
    }
    for crash in [false, true] {
        let mut fs = vol(&mut sim);
        fs.mount().unwrap();
        assert_eq!(read_all(&mut fs, "/etc/hostname"), b"stagefs");
        assert_eq!(read_all(&mut fs, "/big.bin"), pattern(1, 10_000));
        let m = fs.metadata("/etc/hostname").unwrap();
        assert_eq!(
            (m.kind, m.size, m.attributes()),
            (Kind::File, 7, &b"\x01\x02"[..])
        );
        assert_eq!(fs.metadata("/etc").unwrap().kind, Kind::Dir);
        assert_eq!(
            names(&mut fs, "/etc"),
            vec![("hostname".into(), Kind::File), ("net".into(), Kind::Dir)]
        );
        if !crash {
            // A change, then no unmount: the next mount recovers it.
            write_file(&mut fs, "/etc/motd", b"hello");
            fs.rename("/etc/motd", "/etc/net/motd").unwrap();
            write_file(&mut fs, "/etc/hostname", b"stagefs");
        } else {
            assert_eq!(read_all(&mut fs, "/etc/net/motd"), b"hello");
        }
    }
}

#[test]
fn inline_files_grow_into_objects_and_back() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(2));
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    let f = fs.open("/f", create()).unwrap();
    fs.write(f, &pattern(3, INLINE_MAX)).unwrap();
    fs.fsync(f).unwrap();
    // One byte more: the file moves to an object.
    fs.write(f, b"!").unwrap();
    fs.seek(f, SeekFrom::Start(5000)).unwrap();
    fs.write(f, b"end").unwrap();
    assert_eq!(fs.len(f).unwrap(), 5003);
    fs.close(f).unwrap();
    let mut want = pattern(3, INLINE_MAX);
    want.push(b'!');
    want.resize(5000, 0);
    want.extend_from_slice(b"end");
    assert_eq!(read_all(&mut fs, "/f"), want);
    // Truncate at open: inline again, the object deleted at close.
    write_file(&mut fs, "/f", b"small");
    assert_eq!(read_all(&mut fs, "/f"), b"small");
    let f = fs.open("/f", rw()).unwrap();
    fs.truncate(f, 2).unwrap();
    fs.seek(f, SeekFrom::End(0)).unwrap();
    fs.write(f, b"xy").unwrap();
    fs.close(f).unwrap();
    assert_eq!(read_all(&mut fs, "/f"), b"smxy");
    // Append mode.
    let f = fs
        .open("/f", OpenOptions::new().append(true).read(true))
        .unwrap();
    fs.seek(f, SeekFrom::Start(0)).unwrap();
    fs.write(f, b"++").unwrap();
    fs.close(f).unwrap();
    assert_eq!(read_all(&mut fs, "/f"), b"smxy++");
}

#[test]
fn renames_replace_and_refuse_what_they_must() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(3));
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    fs.create_dir("/a").unwrap();
    fs.create_dir("/b").unwrap();
    write_file(&mut fs, "/a/x", b"x");
    write_file(&mut fs, "/a/y", &pattern(4, 3000));
    write_file(&mut fs, "/b/z", b"z");
    // Over an existing file, in one directory and across directories.
    fs.rename("/a/x", "/a/y").unwrap();
    assert_eq!(read_all(&mut fs, "/a/y"), b"x");
    assert_eq!(fs.metadata("/a/x"), Err(Error::NotFound));
    fs.rename("/b/z", "/a/y").unwrap();
    assert_eq!(read_all(&mut fs, "/a/y"), b"z");
    assert_eq!(names(&mut fs, "/b"), vec![]);
    // Directories: into a sibling, over an empty one, never into themselves.
    fs.create_dir("/a/sub").unwrap();
    fs.rename("/a/sub", "/b/sub").unwrap();
    write_file(&mut fs, "/b/sub/f", b"f");
    assert_eq!(
        fs.rename("/b", "/b/sub/inner"),
        Err(Error::Path(PathError::IntoItself))
    );
    fs.create_dir("/c").unwrap();
    fs.rename("/b/sub", "/c").unwrap();
    assert_eq!(read_all(&mut fs, "/c/f"), b"f");
    assert_eq!(fs.rename("/a/y", "/c"), Err(Error::IsADirectory));
    assert_eq!(fs.rename("/c", "/a/y"), Err(Error::NotADirectory));
    fs.create_dir("/d").unwrap();
    write_file(&mut fs, "/d/keep", b"k");
    assert_eq!(fs.rename("/c", "/d"), Err(Error::NotEmpty));
    // Removing.
    assert_eq!(fs.remove_dir("/d"), Err(Error::NotEmpty));
    assert_eq!(fs.remove("/d"), Err(Error::IsADirectory));
    assert_eq!(fs.remove_dir("/d/keep"), Err(Error::NotADirectory));
    fs.remove("/d/keep").unwrap();
    fs.remove_dir("/d").unwrap();
    // An open file cannot be removed or renamed.
    let f = fs.open("/a/y", rw()).unwrap();
    assert_eq!(fs.remove("/a/y"), Err(Error::Busy));
    assert_eq!(fs.rename("/a/y", "/a/w"), Err(Error::Busy));
    assert_eq!(fs.open("/a/y", rw()), Err(Error::Busy));
    fs.close(f).unwrap();
    assert_eq!(fs.read(f, &mut [0u8; 4]), Err(Error::BadHandle));
    assert_eq!(
        names(&mut fs, "/"),
        vec![
            ("a".into(), Kind::Dir),
            ("b".into(), Kind::Dir),
            ("c".into(), Kind::Dir)
        ]
    );
}

#[test]
fn misuse_gets_its_own_errors() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(4));
    let mut fs = vol(&mut sim);
    assert_eq!(fs.metadata("/"), Err(Error::NotMounted));
    fs.format().unwrap();
    assert_eq!(fs.create_dir("x"), Err(Error::Path(PathError::NotAbsolute)));
    assert_eq!(fs.create_dir("/"), Err(Error::Path(PathError::Root)));
    assert_eq!(
        fs.create_dir("/a//b"),
        Err(Error::Path(PathError::EmptyComponent))
    );
    let long = format!("/{}", "n".repeat(65));
    assert_eq!(
        fs.create_dir(&long),
        Err(Error::Path(PathError::NameTooLong))
    );
    fs.create_dir("/d").unwrap();
    assert_eq!(fs.create_dir("/d"), Err(Error::Exists));
    assert_eq!(fs.open("/nope", rw()), Err(Error::NotFound));
    assert_eq!(fs.open("/d", rw()), Err(Error::IsADirectory));
    assert_eq!(
        fs.open("/x", OpenOptions::new().read(true).create(true)),
        Err(Error::Access)
    );
    write_file(&mut fs, "/f", b"1");
    assert_eq!(fs.open("/f", create().create_new(true)), Err(Error::Exists));
    assert_eq!(fs.create_dir("/f/g"), Err(Error::NotADirectory));
    let r = fs.open("/f", OpenOptions::new().read(true)).unwrap();
    assert_eq!(fs.write(r, b"no"), Err(Error::Access));
    fs.close(r).unwrap();
    assert_eq!(fs.set_attributes("/f", &[0u8; 33]), Err(Error::TooLarge));
    let handles: Vec<_> = (0..4)
        .map(|i| fs.open(&format!("/h{i}"), create()).unwrap())
        .collect();
    assert_eq!(fs.open("/h9", create()), Err(Error::TooManyOpen));
    for h in handles {
        fs.close(h).unwrap();
    }
}

/// Enough names to split page 0 and its children: every name is found, listed once,
/// removed, and the directory ends empty.
#[test]
fn large_directories_split_and_stay_exact() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(5));
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    fs.create_dir("/many").unwrap();
    let n = 1500;
    for i in 0..n {
        let path = format!("/many/file-{i:05}");
        let f = fs.open(&path, create().truncate(true));
        let f = f.unwrap_or_else(|e| {
            panic!(
                "{i}: {e:?} used {} of {}",
                fs.store().used_pages(),
                fs.store().capacity_pages()
            )
        });
        fs.write(f, &pattern(i, 40)).unwrap();
        if let Err(e) = fs.close(f) {
            panic!(
                "{i}: {e:?} used {} of {}",
                fs.store().used_pages(),
                fs.store().capacity_pages()
            )
        }
    }
    // 1,500 entries of 60 bytes in buckets about 70 % full, plus page 0: never a
    // page per name. (Everything else on the store is a few pages.)
    let used = fs.store().used_pages();
    assert!(used < 100, "{used} pages");
    let listed = names(&mut fs, "/many");
    assert_eq!(listed.len(), n as usize);
    for i in (0..n).step_by(97) {
        assert_eq!(
            read_all(&mut fs, &format!("/many/file-{i:05}")),
            pattern(i, 40)
        );
    }
    fs.unmount().unwrap();
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    for i in 0..n {
        fs.remove(&format!("/many/file-{i:05}")).unwrap();
    }
    assert_eq!(names(&mut fs, "/many"), vec![]);
    fs.remove_dir("/many").unwrap();
}

/// 64-byte appends with an fsync each to a file with its own object: each costs one
/// 512-byte sector in the staging log (not a page), the bytes reach their page later,
/// and a crash at any point after an fsync keeps everything fsynced.
#[test]
fn small_fsyncs_are_staged_one_sector_each() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(6));
    let mut want = pattern(7, 1000);
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        write_file(&mut fs, "/log", &want);
        fs.sync().unwrap();
        let f = fs.open("/log", OpenOptions::new().append(true)).unwrap();
        let before = fs.store().flash().counters();
        for i in 0..40u32 {
            let rec = pattern(100 + i, 64);
            fs.write(f, &rec).unwrap();
            fs.fsync(f).unwrap();
            want.extend_from_slice(&rec);
        }
        let d = fs.store().flash().counters() - before;
        println!(
            "40 fsyncs: {} bytes, {} programs",
            d.bytes_programmed, d.programs
        );
        // 40 sectors, plus pages completed (2 or 3) and at most one patch.
        assert!(
            d.bytes_programmed <= 40 * 512 + 8 * 2048,
            "{} bytes programmed for 40 fsyncs",
            d.bytes_programmed
        );
        // No unmount: a crash.
    }
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    assert_eq!(read_all(&mut fs, "/log"), want);
    // And again after the replay patched everything home.
    fs.unmount().unwrap();
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    assert_eq!(read_all(&mut fs, "/log"), want);
}

/// Small fsyncs that do not continue the file's previous commit (random overwrites)
/// go home directly: staging them would cost a sector now and their page at the patch.
/// With staging off, appends go home too; with the bypass off, everything is staged.
/// Whatever the tuning, a crash keeps every fsynced byte.
#[test]
fn the_bypass_sends_scattered_fsyncs_home_and_tuning_switches_it() {
    use stagefs_core::Tuning;
    let cases = [
        (Tuning::DEFAULT, true, false),
        (
            Tuning {
                staging: false,
                ..Tuning::DEFAULT
            },
            false,
            false,
        ),
        (
            Tuning {
                bypass: false,
                ..Tuning::DEFAULT
            },
            true,
            true,
        ),
    ];
    for (tuning, appends_staged, scattered_staged) in cases {
        let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(9));
        let mut want = pattern(3, 40 * 1024);
        {
            let mut fs = vol(&mut sim);
            fs.format().unwrap();
            fs.set_tuning(tuning);
            write_file(&mut fs, "/db", &want);
            fs.sync().unwrap();
            let f = fs.open("/db", rw()).unwrap();
            let page = fs.store().payload() as usize;
            let before = fs.store().flash().counters();
            for i in 0..8usize {
                // Every other page, in no order a buffer could merge.
                let at = (i * 5 % 8) * 2 * page + 100;
                let rec = pattern(40 + i as u32, 64);
                fs.seek(f, SeekFrom::Start(at as u64)).unwrap();
                fs.write(f, &rec).unwrap();
                fs.fsync(f).unwrap();
                want[at..at + 64].copy_from_slice(&rec);
            }
            let d = fs.store().flash().counters() - before;
            let sectors = d.partial_programs;
            assert_eq!(
                sectors >= 8,
                scattered_staged,
                "{tuning:?}: {sectors} sector programs for 8 scattered fsyncs"
            );
            let before = fs.store().flash().counters();
            fs.seek(f, SeekFrom::End(0)).unwrap();
            for i in 0..8u32 {
                let rec = pattern(80 + i, 64);
                fs.write(f, &rec).unwrap();
                fs.fsync(f).unwrap();
                want.extend_from_slice(&rec);
            }
            let d = fs.store().flash().counters() - before;
            assert_eq!(
                d.partial_programs >= 7,
                appends_staged,
                "{tuning:?}: {} sector programs for 8 appends",
                d.partial_programs
            );
            // No unmount: a crash.
        }
        let mut fs = vol(&mut sim);
        fs.mount().unwrap();
        assert_eq!(read_all(&mut fs, "/db"), want, "{tuning:?}");
    }
}

/// Rewriting many small files once each (the `many` workload) stages nothing that pays:
/// each probe of inline staging (8 records, then a patch that writes as many buckets)
/// doubles the next bypass, from 256 commits up to 4,096. A file rewritten over and over
/// is staged again once the bypass has run out, and a crash keeps every closed file.
#[test]
fn inline_staging_probes_back_off_while_they_do_not_pay() {
    // `stage::INLINE_PROBE_MAX`.
    const INLINE_PROBE_MAX: usize = 4096;
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(43));
    let files = 2000usize;
    let mut want = vec![Vec::new(); files];
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        fs.create_dir("/d").unwrap();
        let mut rewrite = |fs: &mut Vol<'_>, i: usize, v: u32| {
            let f = fs
                .open(&format!("/d/f{i}"), create().truncate(true))
                .unwrap();
            let data = pattern(v, 64);
            fs.write(f, &data).unwrap();
            fs.close(f).unwrap();
            want[i] = data;
        };
        for i in 0..files {
            rewrite(&mut fs, i, i as u32);
        }
        fs.sync().unwrap();
        // Probes at about 0, 264, 784 and 1,816 commits after the last one that paid
        // (while the directory was small, buckets took several records each): 56 sector
        // programs, 149 with a bypass of 256 commits after every probe.
        let before = fs.store().flash().counters();
        let rounds = 3000usize;
        for k in 0..rounds {
            rewrite(&mut fs, k % files, 1000 + k as u32);
        }
        let sectors = (fs.store().flash().counters() - before).partial_programs;
        println!("{sectors} sector programs in {rounds} rewrites");
        assert!(
            sectors <= 64,
            "{sectors} sector programs in {rounds} rewrites"
        );
        // One file rewritten past the longest bypass stages again.
        let hot = INLINE_PROBE_MAX + 8 * 64;
        let mut staged_tail = 0;
        for k in 0..hot {
            let before = fs.store().flash().counters();
            rewrite(&mut fs, 7, 10_000 + k as u32);
            if k >= hot - 256 {
                staged_tail += (fs.store().flash().counters() - before).partial_programs;
            }
        }
        assert!(
            staged_tail >= 200,
            "{staged_tail} sector programs in the last 256 rewrites of one file"
        );
        // No unmount: a crash.
    }
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    for (i, w) in want.iter().enumerate() {
        assert_eq!(&read_all(&mut fs, &format!("/d/f{i}")), w, "file {i}");
    }
}

/// The borrowed view works with code written against `embedded-io` (and `std::io`).
#[test]
fn file_views_speak_embedded_io_and_std_io() {
    use embedded_io::{Read as _, Seek as _, Write as _};
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(7));
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    let f = fs.open("/v", create()).unwrap();
    {
        let mut v = fs.view(f);
        v.write_all(&pattern(1, 3000)).unwrap();
        v.flush().unwrap();
        v.seek(embedded_io::SeekFrom::Start(100)).unwrap();
        let mut buf = [0u8; 50];
        v.read_exact(&mut buf).unwrap();
        assert_eq!(&buf[..], &pattern(1, 3000)[100..150]);
        assert_eq!(v.seek(embedded_io::SeekFrom::End(0)).unwrap(), 3000);
    }
    #[cfg(feature = "std")]
    {
        use std::io::{Read, Seek, Write};
        let mut v = fs.view(f);
        Write::write_all(&mut v, b"tail").unwrap();
        Write::flush(&mut v).unwrap();
        Seek::seek(&mut v, std::io::SeekFrom::Start(2990)).unwrap();
        let mut s = Vec::new();
        Read::read_to_end(&mut v, &mut s).unwrap();
        assert_eq!(&s[10..], b"tail");
    }
    fs.close(f).unwrap();
    let e = fs.open("/missing", rw()).unwrap_err();
    assert_eq!(
        embedded_io::Error::kind(&e),
        embedded_io::ErrorKind::NotFound
    );
}

/// `step` patches staged records home and collects; idle once there is nothing to do.
#[test]
fn background_steps_patch_and_go_idle() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(8));
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    write_file(&mut fs, "/log", &pattern(1, 600));
    let f = fs.open("/log", OpenOptions::new().append(true)).unwrap();
    for i in 0..5 {
        fs.write(f, &pattern(i, 64)).unwrap();
        fs.fsync(f).unwrap();
    }
    fs.close(f).unwrap();
    let before = fs.store().flash().counters().programs;
    let mut steps = 0;
    while fs.step(4).unwrap() {
        steps += 1;
        assert!(steps < 1000);
    }
    assert!(
        fs.store().flash().counters().programs > before,
        "the patch programmed"
    );
    // Nothing left: another step programs nothing.
    let idle = fs.store().flash().counters().programs;
    assert!(!fs.step(4).unwrap());
    assert_eq!(fs.store().flash().counters().programs, idle);
    let mut want = pattern(1, 600);
    for i in 0..5 {
        want.extend(pattern(i, 64));
    }
    assert_eq!(read_all(&mut fs, "/log"), want);
}

/// Opening with truncate and writing past 256 bytes moves the new contents to an
/// object no entry names until the close: a crash before it leaves the old contents,
/// and the mount deletes the unnamed object (no leak).
#[test]
fn truncate_open_large_rewrite_lands_at_close_and_leaks_nothing() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(12));
    let objects_before;
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        write_file(&mut fs, "/f", &pattern(1, 1000));
        fs.sync().unwrap();
        objects_before = fs.store().object_count();
        let f = fs.open("/f", rw().truncate(true)).unwrap();
        fs.write(f, &pattern(2, 5000)).unwrap();
        // No close: a crash.
    }
    {
        let mut fs = vol(&mut sim);
        fs.mount().unwrap();
        assert_eq!(read_all(&mut fs, "/f"), pattern(1, 1000));
        assert_eq!(
            fs.store().object_count(),
            objects_before,
            "the unnamed object is gone"
        );
        // And with the close: the new contents, the old object deleted.
        let f = fs.open("/f", rw().truncate(true)).unwrap();
        fs.write(f, &pattern(3, 5000)).unwrap();
        fs.close(f).unwrap();
        assert_eq!(read_all(&mut fs, "/f"), pattern(3, 5000));
        assert_eq!(fs.store().object_count(), objects_before);
        fs.unmount().unwrap();
    }
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    assert_eq!(read_all(&mut fs, "/f"), pattern(3, 5000));
}

/// Opening files of one directory walks the path once: after a rename or a removed
/// directory, paths name what they name now. A rewrite of a small file in a directory
/// opened before reads one flash page (its bucket; page 0 stays cached) and programs
/// one.
#[test]
fn path_walks_are_remembered_until_a_rename_or_removed_directory() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(31));
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    fs.create_dir("/a").unwrap();
    fs.create_dir("/a/d").unwrap();
    for i in 0..40 {
        write_file(&mut fs, &format!("/a/d/f{i}"), &pattern(i, 64));
    }
    fs.sync().unwrap();
    write_file(&mut fs, "/a/d/f1", &pattern(100, 64));
    let c = fs.store().flash().counters();
    write_file(&mut fs, "/a/d/f2", &pattern(101, 64));
    let d = fs.store().flash().counters() - c;
    assert_eq!((d.reads, d.programs), (1, 1));
    assert_eq!(read_all(&mut fs, "/a/d/f2"), pattern(101, 64));

    fs.rename("/a/d", "/a/e").unwrap();
    assert_eq!(
        fs.open("/a/d/f2", rw()).unwrap_err(),
        Error::NotFound,
        "the old path is gone"
    );
    assert_eq!(read_all(&mut fs, "/a/e/f2"), pattern(101, 64));
    fs.create_dir("/a/d").unwrap();
    write_file(&mut fs, "/a/d/new", b"fresh");
    assert_eq!(read_all(&mut fs, "/a/d/new"), b"fresh");
    fs.remove("/a/d/new").unwrap();
    fs.remove_dir("/a/d").unwrap();
    assert_eq!(fs.open("/a/d/new", create()).unwrap_err(), Error::NotFound);
    fs.rename("/a", "/b").unwrap();
    assert_eq!(fs.open("/a/e/f3", rw()).unwrap_err(), Error::NotFound);
    assert_eq!(read_all(&mut fs, "/b/e/f3"), pattern(3, 64));
    fs.unmount().unwrap();
    fs.mount().unwrap();
    assert_eq!(read_all(&mut fs, "/b/e/f1"), pattern(100, 64));
    assert_eq!(read_all(&mut fs, "/b/e/f2"), pattern(101, 64));
}

/// A volume filled to `NoSpace`, then small fsynced appends staged in the log: unmount
/// still succeeds (records there is no room to patch home stay in the log, durable) and
/// the next mount is clean and holds every fsynced byte.
#[test]
fn a_full_volume_unmounts_cleanly_with_records_it_cannot_patch() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(4));
    let mut model: Vec<(String, Vec<u8>)> = Vec::new();
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        for i in 0..12 {
            let d = pattern(
                i,
                if i % 2 == 0 {
                    100
                } else {
                    1000 + 100 * i as usize
                },
            );
            write_file(&mut fs, &format!("/f{i}"), &d);
            model.push((format!("/f{i}"), d));
        }
        for n in 0..40u32 {
            let (p, d) = &mut model[n as usize % 12];
            let rec = pattern(n, 16);
            let Ok(f) = fs.open(p, rw().append(true)) else {
                break;
            };
            let r = fs.write(f, &rec).map(|_| ()).and_then(|()| fs.fsync(f));
            let c = fs.close(f);
            if r.is_err() || c.is_err() {
                break;
            }
            d.extend_from_slice(&rec);
        }
        let big = fs.open("/big", create()).unwrap();
        while fs.write(big, &[0x77; 2048]).is_ok() && fs.fsync(big).is_ok() {}
        let _ = fs.close(big);
        let st = fs.staging_status().unwrap();
        let staged = st.staged_objects + st.staged_inline;
        assert!(staged > 0, "records wait in the log on a full volume");
        for (p, d) in &mut model {
            let got = read_all(&mut fs, p);
            assert!(got.starts_with(d), "{p}: fsynced bytes lost before unmount");
            *d = got;
        }
        fs.unmount().unwrap();
    }
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    assert_eq!(
        fs.store().stats().recovery_scanned_pages,
        0,
        "the unmount was clean"
    );
    for (p, d) in &model {
        assert_eq!(&read_all(&mut fs, p), d, "{p}");
    }
}

/// Namespace and small files until `NoSpace`, in several shapes: unmount must still
/// succeed (a clean checkpoint: the next mount scans nothing) and keep everything.
#[test]
fn a_volume_filled_with_names_and_small_files_unmounts_cleanly() {
    for (seed, size) in [(5u32, 300usize), (6, 40), (7, 1500), (8, 5000)] {
        let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(seed as u64));
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        let mut made = Vec::new();
        'fill: for d in 0..400u32 {
            let dir = format!("/d{d}");
            if fs.create_dir(&dir).is_err() {
                break;
            }
            for f in 0..8u32 {
                let p = format!("{dir}/f{f}");
                let data = pattern(seed * 1000 + d * 8 + f, size + (f as usize * 13));
                let Ok(h) = fs.open(&p, create()) else {
                    break 'fill;
                };
                let w = fs.write(h, &data).map(|_| ());
                let c = fs.close(h);
                if w.is_err() || c.is_err() {
                    break 'fill;
                }
                made.push((p, data));
            }
        }
        assert!(made.len() > 20, "seed {seed}: only {} files", made.len());
        let r = fs.unmount();
        assert!(
            r.is_ok(),
            "seed {seed} size {size}: unmount of a full volume: {r:?}"
        );
        fs.mount().unwrap();
        assert_eq!(
            fs.store().stats().recovery_scanned_pages,
            0,
            "seed {seed}: clean"
        );
        for (p, d) in &made {
            assert_eq!(&read_all(&mut fs, p), d, "seed {seed}: {p}");
        }
    }
}

/// A close whose commit fails for room (reported) must not leave the file's unsynced
/// writes behind in the store: unmount still succeeds and the file reads as its last
/// durable state.
#[test]
fn a_failed_close_on_a_full_volume_leaves_nothing_for_unmount_to_trip_on() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(9));
    let old = pattern(1, 6000);
    // (`old` only makes /keep an object of its own first.)
    let mut failed_closes = 0;
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        write_file(&mut fs, "/keep", &old);
        // An object of its own with no pages left: its next page is growth.
        let t = fs.open("/keep", rw()).unwrap();
        fs.truncate(t, 0).unwrap();
        fs.close(t).unwrap();
        let big = fs.open("/big", create()).unwrap();
        while fs.write(big, &[0x77; 2048]).is_ok() && fs.fsync(big).is_ok() {}
        let _ = fs.close(big);
        // Rewrite part of /keep's first pages until a close fails for room (the write
        // itself is buffered and accepted; the commit needs new pages).
        for round in 0..200 {
            let f = fs.open("/keep", rw()).unwrap();
            let w = fs.write(f, &[round as u8; 700]);
            assert!(w.is_ok(), "round {round}: {w:?}");
            if fs.close(f).is_err() {
                failed_closes += 1;
                break;
            }
        }
        assert_eq!(failed_closes, 1, "a close failed for room");
        let now = read_all(&mut fs, "/keep");
        fs.unmount().unwrap();
        drop(fs);
        let mut fs = vol(&mut sim);
        fs.mount().unwrap();
        assert_eq!(
            fs.store().stats().recovery_scanned_pages,
            0,
            "the unmount was clean"
        );
        assert_eq!(read_all(&mut fs, "/keep"), now);
        assert!(
            now.is_empty(),
            "the failed close left the truncated file as it was"
        );
    }
}

/// The file layer over the small-RAM store layouts: 512-byte object-table and index
/// pages work under it (a volume formatted, filled, crashed and remounted); a store
/// built without a log tail page (`oftl::W25n01gvSmall`, objects only) is refused
/// before anything is erased, since the staging log is a log stream.
#[test]
fn small_ram_stores_under_the_file_layer() {
    use oftl::{FormatError, Greedy, Mismatch, MountError, Oftl};
    type Small<'a> = Oftl<&'a mut support::Sim, 2048, 64, 4, 1, Greedy, 512>;
    type NoLog<'a> = Oftl<&'a mut support::Sim, 2048, 64, 4, 1, Greedy, 512, 0>;
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(4));
    {
        let mut fs: stagefs_core::Fs<Small<'_>, 2048, 4> =
            stagefs_core::Fs::new(Small::new(&mut sim, support::cfg(), Greedy::DEFAULT));
        fs.format().unwrap();
        fs.create_dir("/logs").unwrap();
        for i in 0..40u32 {
            write_file(
                &mut fs,
                &format!("/logs/{i}"),
                &pattern(i, 100 + 700 * (i as usize % 5)),
            );
        }
        // Dropped mounted: a crash.
    }
    {
        let mut fs: stagefs_core::Fs<Small<'_>, 2048, 4> =
            stagefs_core::Fs::new(Small::new(&mut sim, support::cfg(), Greedy::DEFAULT));
        fs.mount().unwrap();
        for i in 0..40u32 {
            let got = read_all(&mut fs, &format!("/logs/{i}"));
            assert_eq!(got, pattern(i, 100 + 700 * (i as usize % 5)), "file {i}");
        }
        fs.unmount().unwrap();
    }
    let before = sim.counters();
    let mut fs: stagefs_core::Fs<NoLog<'_>, 2048, 4> =
        stagefs_core::Fs::new(NoLog::new(&mut sim, support::cfg(), Greedy::DEFAULT));
    assert!(matches!(
        fs.format(),
        Err(Error::Format(FormatError::Unsupported(Mismatch::Capacity)))
    ));
    assert!(matches!(
        fs.mount(),
        Err(Error::Mount(MountError::Mismatch(Mismatch::Capacity)))
    ));
    drop(fs);
    let after = sim.counters();
    assert_eq!(
        (after.programs, after.erases),
        (before.programs, before.erases)
    );
}

/// `step_all` does all the background work at once: staged records patched home, the
/// blocks with garbage collected, a checkpoint; after it a step finds nothing to do and
/// every file reads back.
#[test]
fn step_all_leaves_nothing_to_do() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(9));
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    // Garbage: small files rewritten over and over, records staged on a log file.
    for round in 0..30u32 {
        for i in 0..12u32 {
            write_file(
                &mut fs,
                &format!("/f{i}"),
                &pattern(round * 100 + i, 300 + 40 * i as usize),
            );
        }
    }
    write_file(&mut fs, "/log", &pattern(7, 600));
    let f = fs.open("/log", OpenOptions::new().append(true)).unwrap();
    for i in 0..5 {
        fs.write(f, &pattern(i, 64)).unwrap();
        fs.fsync(f).unwrap();
    }
    assert!(fs.staging_status().unwrap().staged_bytes > 0);
    let erases = fs.store().flash().counters().erases;
    fs.step_all().unwrap();
    assert!(
        fs.store().flash().counters().erases > erases,
        "blocks were collected"
    );
    // The open file was made durable and its records patched: the log is empty.
    let st = fs.staging_status().unwrap();
    assert_eq!((st.staged_bytes, st.staged_objects), (0, 0));
    assert_eq!(st.first_lsn, st.end_lsn);
    fs.close(f).unwrap();
    let idle = fs.store().flash().counters().programs;
    assert!(!fs.step(16).unwrap(), "nothing left worth collecting");
    assert_eq!(fs.store().flash().counters().programs, idle);
    let mut want = pattern(7, 600);
    for i in 0..5 {
        want.extend(pattern(i, 64));
    }
    assert_eq!(read_all(&mut fs, "/log"), want);
    for i in 0..12u32 {
        assert_eq!(
            read_all(&mut fs, &format!("/f{i}")),
            pattern(2900 + i, 300 + 40 * i as usize)
        );
    }
    // A crash right after it recovers with nothing to replay.
    drop(fs);
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    assert_eq!(read_all(&mut fs, "/log"), want);
}

/// A cut in the first window after a format: the checkpoint the format wrote knows the
/// staging stream, so the recovery applies the log's sectors during its scan and does
/// not read every log page of the window a second time (it did: the stream was created
/// after the checkpoint, and on the W25N01GV that mount took 105 ms instead of 72).
#[test]
fn a_cut_in_the_first_window_after_format_reads_the_log_once() {
    use nand_hal::sim::CutKind;
    use oftl::{Config, Greedy, W25n01gv};
    let mut sim = SimNand::heap(profile::W25N01GV, FaultPlan::seeded(10));
    {
        let store = W25n01gv::new(&mut sim, const { Config::new() }, Greedy::DEFAULT);
        let mut fs = Box::new(stagefs_core::Fs::<_, 2048, 4>::new(store));
        fs.format().unwrap();
        let f = fs.open("/log", create()).unwrap();
        for i in 0..2000u32 {
            fs.write(f, &pattern(i, 64)).unwrap();
            fs.fsync(f).unwrap();
        }
        fs.store_mut()
            .flash_mut()
            .arm(FaultPlan::seeded(3).with_cut(5, CutKind::Clean));
        for i in 2000..2050u32 {
            if fs
                .write(f, &pattern(i, 64))
                .and_then(|_| fs.fsync(f))
                .is_err()
            {
                break;
            }
        }
    }
    sim.power_on();
    sim.disarm();
    let reads = sim.counters().reads;
    let store = W25n01gv::new(&mut sim, const { Config::new() }, Greedy::DEFAULT);
    let mut fs = Box::new(stagefs_core::Fs::<_, 2048, 4>::new(store));
    fs.mount().unwrap();
    let st = fs.store().stats();
    assert!(st.recovery_scanned_pages >= 500, "{st:?}");
    let mount_reads = fs.store().flash().counters().reads - reads;
    assert!(
        mount_reads < st.recovery_scanned_pages as u64 * 2,
        "{mount_reads} reads for {} scanned pages",
        st.recovery_scanned_pages
    );
    let data = read_all(&mut *fs, "/log");
    assert!(data.len() >= 2000 * 64);
    for (i, rec) in data.chunks(64).enumerate() {
        assert_eq!(rec, &pattern(i as u32, 64)[..]);
    }
}
