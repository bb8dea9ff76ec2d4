//! Review s47: an independent attempt to break the file layer (`Fs`): open options,
//! holes, truncates across the inline limit, handles, renames, paths, attributes,
//! listings, and power cuts over short scripts with long-lived handles and staged
//! records (every program/erase index, several cut kinds; the model and sweep are
//! `support::tree`'s, shared with review s50 since stop 52: a file written since its
//! commit may read each byte as any state written since, where this review's own model
//! allowed only the last, and the check after each cut also fsyncs and steps).
//!
//! Findings (failing tests on 7806a07 with stop 47's first oftl changes):
//! - `s47_finding_one_torn_checkpoint_program_leaves_the_volume_read_only_for_good`: on
//!   a fault-free part, one `Torn(Prefix)` cut of a checkpoint page program (in a
//!   mount + `sync`) leaves a store that mounts `ReadOnly(CheckpointBlocks)` at every
//!   later mount (nothing lost, but the volume never takes a write again). Random walk
//!   seed 396: 1 of 3,000 seeds (~10,000 crashes). Cause: two of the part's four
//!   checkpoint blocks had been taken for bad on markers that earlier cut erases left
//!   random. Fixed in stop 47: a block the store erased counts as bad only on a marker
//!   that reads as written (`NandFlash::is_marked`; oftl `tests/torn_erase_markers.rs`).
//! - `s47_open_with_a_full_table_is_too_many_open_even_for_an_open_file`: `TooManyOpen`
//!   where the crate docs said `Busy` (slot check before the open check). Kept as is
//!   (reviews s33 and s40 expect it, as POSIX's `EMFILE` comes first); the docs now say
//!   so.
//!
//! Held: open-option combinations, holes, truncates across the inline limit, handles
//! (busy, exhaustion, double close, stale), renames/removes, paths and name limits,
//! attributes, 300-name listings, seeks; cut sweeps (every program/erase index, clean,
//! torn and noisy cuts, cuts in the recovery mount) over six scripts with staged
//! records and long-lived handles; a model random walk (3,000 seeds) with handles,
//! steps, syncs, crashes and remounts.
//!
//! Run: `cargo test --release -p stagefs-core --test all review_s47:: -- --nocapture`
//! (`S47_SEEDS=3000 ... s47_walk_survey -- --ignored` for the walk's survey).

use crate::support;

use std::collections::BTreeMap;

use nand_hal::sim::{CutKind, FaultPlan, TornMode};
use stagefs_core::oracle::{observe, Node};
use stagefs_core::{Error, Kind, OpenOptions, PathError, SeekFrom, ATTR_MAX, INLINE_MAX, NAME_MAX};
use support::tree::{self, assert_report, fresh, Ctx, Report, KINDS};
use support::{create, pattern, read_all, rw, vol, write_file, Sim, Vol};

type E = nand_hal::sim::SimError;

fn ro() -> OpenOptions {
    OpenOptions::new().read(true)
}

fn names(fs: &mut Vol<'_>, path: &str) -> Vec<String> {
    let mut v: Vec<String> = fs
        .read_dir(path)
        .unwrap()
        .map(|e| e.unwrap().name().to_string())
        .collect();
    v.sort();
    v
}

// ---------------------------------------------------------------------------------
// Functional probes
// ---------------------------------------------------------------------------------

#[test]
fn s47_open_option_combinations() {
    let mut sim = fresh(1);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    write_file(&mut fs, "/a", b"hello world");
    // create_new on an existing name.
    assert_eq!(
        fs.open("/a", create().create_new(true)).unwrap_err(),
        Error::Exists
    );
    assert_eq!(
        fs.open("/a", OpenOptions::new().write(true).create_new(true))
            .unwrap_err(),
        Error::Exists
    );
    // Nothing requested / truncate or create without write.
    assert_eq!(
        fs.open("/a", OpenOptions::new()).unwrap_err(),
        Error::Access
    );
    assert_eq!(
        fs.open("/a", ro().truncate(true)).unwrap_err(),
        Error::Access
    );
    assert_eq!(fs.open("/n", ro().create(true)).unwrap_err(), Error::Access);
    assert_eq!(read_all(&mut fs, "/a"), b"hello world");
    // Write through a read-only handle, read through a write-only one.
    let f = fs.open("/a", ro()).unwrap();
    assert_eq!(fs.write(f, b"x").unwrap_err(), Error::Access);
    assert_eq!(fs.truncate(f, 0).unwrap_err(), Error::Access);
    fs.close(f).unwrap();
    let f = fs.open("/a", OpenOptions::new().write(true)).unwrap();
    let mut b = [0u8; 4];
    assert_eq!(fs.read(f, &mut b).unwrap_err(), Error::Access);
    fs.close(f).unwrap();
    // append + truncate: empties then appends.
    let f = fs
        .open(
            "/a",
            OpenOptions::new().append(true).truncate(true).read(true),
        )
        .unwrap();
    assert_eq!(fs.len(f).unwrap(), 0);
    fs.write(f, b"abc").unwrap();
    fs.seek(f, SeekFrom::Start(0)).unwrap();
    fs.write(f, b"def").unwrap(); // append: still at the end
    fs.close(f).unwrap();
    assert_eq!(read_all(&mut fs, "/a"), b"abcdef");
    // append on an object file, with a seek before each write.
    write_file(&mut fs, "/big", &pattern(1, 3000));
    let f = fs
        .open("/big", OpenOptions::new().append(true).read(true))
        .unwrap();
    fs.seek(f, SeekFrom::Start(10)).unwrap();
    fs.write(f, b"tail").unwrap();
    fs.close(f).unwrap();
    let mut want = pattern(1, 3000);
    want.extend_from_slice(b"tail");
    assert_eq!(read_all(&mut fs, "/big"), want);
    // create_new on a directory's name; open of a directory.
    fs.create_dir("/d").unwrap();
    assert_eq!(
        fs.open("/d", create().create_new(true)).unwrap_err(),
        Error::Exists
    );
    assert_eq!(fs.open("/d", create()).unwrap_err(), Error::IsADirectory);
    assert_eq!(fs.open("/d", ro()).unwrap_err(), Error::IsADirectory);
    assert_eq!(fs.open("/d/x/y", create()).unwrap_err(), Error::NotFound);
    assert_eq!(fs.open("/a/x", create()).unwrap_err(), Error::NotADirectory);
    // create_new on a new name: created, empty.
    let f = fs.open("/new", create().create_new(true)).unwrap();
    assert_eq!(fs.len(f).unwrap(), 0);
    fs.close(f).unwrap();
    assert_eq!(fs.metadata("/new").unwrap().size, 0);
    fs.unmount().unwrap();
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    assert_eq!(read_all(&mut fs, "/a"), b"abcdef");
    assert_eq!(read_all(&mut fs, "/big"), want);
    assert_eq!(read_all(&mut fs, "/new"), b"");
}

/// Holes: a seek past the end then a write leaves zeros in between, inline and
/// object, within one page and across pages; also a hole over bytes a shrink left.
#[test]
fn s47_holes_read_as_zeros() {
    let mut sim = fresh(2);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    let cases: &[(&str, usize, u64, usize)] = &[
        // (name, initial len, write at, write len)
        ("/i1", 10, 100, 5),     // inline stays inline
        ("/i2", 10, 250, 20),    // inline grows to object through the hole
        ("/i3", 0, 5000, 3),     // empty file, far hole
        ("/o1", 3000, 3100, 10), // object, same page
        ("/o2", 3000, 9000, 10), // object, pages apart
        ("/o3", 300, 2100, 64),  // small object, hole across a page boundary
    ];
    let mut wants = Vec::new();
    for &(p, init, at, n) in cases {
        write_file(&mut fs, p, &pattern(3, init));
        let f = fs.open(p, rw()).unwrap();
        assert_eq!(fs.seek(f, SeekFrom::Start(at)).unwrap(), at);
        fs.write(f, &pattern(4, n)).unwrap();
        assert_eq!(fs.len(f).unwrap(), at + n as u64);
        let mut want = pattern(3, init);
        want.resize(at as usize, 0);
        want.extend_from_slice(&pattern(4, n));
        // Read back through the same handle before the close.
        fs.seek(f, SeekFrom::Start(0)).unwrap();
        let mut got = vec![0u8; want.len() + 10];
        let mut k = 0;
        loop {
            let r = fs.read(f, &mut got[k..]).unwrap();
            if r == 0 {
                break;
            }
            k += r;
        }
        assert_eq!(&got[..k], &want[..], "{p} through its handle");
        fs.close(f).unwrap();
        assert_eq!(read_all(&mut fs, p), want, "{p}");
        wants.push((p, want));
    }
    // Shrink an object, then grow it by writing past the end: the old bytes of the
    // cut-off range must not come back.
    write_file(&mut fs, "/s", &pattern(5, 5000));
    let f = fs.open("/s", rw()).unwrap();
    fs.truncate(f, 1000).unwrap();
    fs.seek(f, SeekFrom::Start(4000)).unwrap();
    fs.write(f, b"zz").unwrap();
    fs.close(f).unwrap();
    let mut want = pattern(5, 1000);
    want.resize(4000, 0);
    want.extend_from_slice(b"zz");
    assert_eq!(
        read_all(&mut fs, "/s"),
        want,
        "shrunk then written past end"
    );
    wants.push(("/s", want));
    // Shrink an inline file, then grow by writing past the end.
    write_file(&mut fs, "/si", &pattern(6, 200));
    let f = fs.open("/si", rw()).unwrap();
    fs.truncate(f, 20).unwrap();
    fs.seek(f, SeekFrom::Start(150)).unwrap();
    fs.write(f, b"qq").unwrap();
    fs.close(f).unwrap();
    let mut want = pattern(6, 20);
    want.resize(150, 0);
    want.extend_from_slice(b"qq");
    assert_eq!(
        read_all(&mut fs, "/si"),
        want,
        "inline shrunk then written past end"
    );
    wants.push(("/si", want));
    fs.unmount().unwrap();
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    for (p, w) in &wants {
        assert_eq!(&read_all(&mut fs, p), w, "{p} after remount");
    }
}

/// Truncate to a larger size (zeros), across the inline limit both ways, with fsync
/// in between and remounts.
#[test]
fn s47_truncate_grow_and_inline_limit_both_ways() {
    let mut sim = fresh(3);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    let f = fs.open("/t", create()).unwrap();
    fs.write(f, &pattern(1, 100)).unwrap();
    fs.truncate(f, 200).unwrap(); // inline grow
    assert_eq!(fs.len(f).unwrap(), 200);
    fs.truncate(f, 600).unwrap(); // grows past INLINE_MAX: object
    fs.truncate(f, 50).unwrap(); // shrink (object stays)
    fs.truncate(f, 257).unwrap();
    fs.close(f).unwrap();
    let mut want = pattern(1, 50);
    want.resize(257, 0);
    assert_eq!(read_all(&mut fs, "/t"), want);
    assert_eq!(fs.metadata("/t").unwrap().size, 257);
    // Write across the limit in one write, from below it.
    let f = fs.open("/x", create()).unwrap();
    fs.write(f, &pattern(2, 250)).unwrap();
    fs.fsync(f).unwrap();
    fs.write(f, &pattern(3, 20)).unwrap(); // 270
    fs.fsync(f).unwrap();
    fs.truncate(f, 100).unwrap();
    fs.fsync(f).unwrap();
    fs.write(f, &pattern(4, 30)).unwrap(); // 130, at pos 270? no: pos stays 270
    fs.close(f).unwrap();
    // The position was 270 after the writes: the write after the truncate lands there.
    let mut want_x = pattern(2, 250);
    want_x.extend_from_slice(&pattern(3, 20));
    want_x.truncate(100);
    want_x.resize(270, 0);
    want_x.extend_from_slice(&pattern(4, 30));
    assert_eq!(read_all(&mut fs, "/x"), want_x);
    // Inline exactly at the limit, then one byte more, then truncate-open back small.
    let f = fs.open("/y", create()).unwrap();
    fs.write(f, &pattern(5, INLINE_MAX)).unwrap();
    fs.close(f).unwrap();
    assert_eq!(
        fs.location("/y").unwrap().object,
        None,
        "256 bytes stay inline"
    );
    let f = fs.open("/y", OpenOptions::new().append(true)).unwrap();
    fs.write(f, b"+").unwrap();
    fs.close(f).unwrap();
    assert!(fs.location("/y").unwrap().object.is_some());
    let mut want_y = pattern(5, INLINE_MAX);
    want_y.push(b'+');
    assert_eq!(read_all(&mut fs, "/y"), want_y);
    write_file(&mut fs, "/y", b"small again");
    assert_eq!(fs.location("/y").unwrap().object, None);
    fs.unmount().unwrap();
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    assert_eq!(read_all(&mut fs, "/t"), want);
    assert_eq!(read_all(&mut fs, "/x"), want_x);
    assert_eq!(read_all(&mut fs, "/y"), b"small again");
}

#[test]
fn s47_handles_busy_exhaustion_stale() {
    let mut sim = fresh(4);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    write_file(&mut fs, "/a", b"aaa");
    write_file(&mut fs, "/b", &pattern(1, 3000));
    let f = fs.open("/a", rw()).unwrap();
    assert_eq!(fs.open("/a", ro()).unwrap_err(), Error::Busy);
    assert_eq!(fs.remove("/a").unwrap_err(), Error::Busy);
    assert_eq!(fs.rename("/a", "/z").unwrap_err(), Error::Busy);
    assert_eq!(fs.rename("/b", "/a").unwrap_err(), Error::Busy);
    // Rename of an open file onto itself.
    assert!(matches!(fs.rename("/a", "/a"), Err(Error::Busy) | Ok(())));
    // Table exhaustion.
    let g = fs.open("/b", ro()).unwrap();
    let h1 = fs.open("/c", create()).unwrap();
    let h2 = fs.open("/d", create()).unwrap();
    assert_eq!(fs.open("/e", create()).unwrap_err(), Error::TooManyOpen);
    assert_eq!(
        fs.metadata("/e").unwrap_err(),
        Error::NotFound,
        "refused open created nothing"
    );
    fs.close(h2).unwrap();
    assert_eq!(fs.close(h2).unwrap_err(), Error::BadHandle, "double close");
    let h3 = fs.open("/e", create()).unwrap();
    // The stale handle h2 names the slot h3 now has: refused.
    assert_eq!(fs.write(h2, b"x").unwrap_err(), Error::BadHandle);
    assert_eq!(fs.len(h2).unwrap_err(), Error::BadHandle);
    fs.write(h3, b"e!").unwrap();
    for h in [f, g, h1, h3] {
        fs.close(h).unwrap();
    }
    assert_eq!(read_all(&mut fs, "/e"), b"e!");
    assert_eq!(read_all(&mut fs, "/d"), b"");
    // A handle of an earlier mount.
    let f = fs.open("/a", rw()).unwrap();
    fs.unmount().unwrap();
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    let g = fs.open("/b", rw()).unwrap();
    assert_eq!(fs.write(f, b"stale").unwrap_err(), Error::BadHandle);
    fs.close(g).unwrap();
    assert_eq!(read_all(&mut fs, "/a"), b"aaa");
}

/// The crate docs said opening a file that is already open fails with `Busy`, and with
/// every slot in use `open` failed with `TooManyOpen` instead. Two earlier reviews'
/// oracles (s33, s40) expect `TooManyOpen` there, as POSIX's `EMFILE` comes first; the
/// crate docs now say so (stop 47).
#[test]
fn s47_open_with_a_full_table_is_too_many_open_even_for_an_open_file() {
    let mut sim = fresh(44);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    let hs: Vec<_> = (0..4)
        .map(|i| fs.open(&format!("/f{i}"), create()).unwrap())
        .collect();
    assert_eq!(fs.open("/f0", ro()).unwrap_err(), Error::TooManyOpen);
    fs.close(hs[3]).unwrap();
    assert_eq!(
        fs.open("/f0", ro()).unwrap_err(),
        Error::Busy,
        "a slot free: Busy"
    );
    for h in &hs[..3] {
        fs.close(*h).unwrap();
    }
}

#[test]
fn s47_renames_and_removes_refuse_and_replace() {
    let mut sim = fresh(5);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    fs.create_dir("/a").unwrap();
    fs.create_dir("/a/b").unwrap();
    fs.create_dir("/ab").unwrap();
    write_file(&mut fs, "/a/b/f", b"f");
    assert_eq!(
        fs.rename("/a", "/a/b/c").unwrap_err(),
        Error::Path(PathError::IntoItself)
    );
    assert_eq!(
        fs.rename("/a", "/a/c").unwrap_err(),
        Error::Path(PathError::IntoItself)
    );
    // A sibling whose name starts the same is not "inside".
    fs.rename("/ab", "/a/b/ab").unwrap();
    fs.rename("/a/b/ab", "/ab").unwrap();
    // Onto itself: nothing changes.
    fs.rename("/a", "/a").unwrap();
    fs.rename("/a/b/f", "/a/b/f").unwrap();
    assert_eq!(read_all(&mut fs, "/a/b/f"), b"f");
    assert_eq!(fs.rename("/nope", "/nope").unwrap_err(), Error::NotFound);
    // Dir over non-empty dir, file over dir, dir over file.
    fs.create_dir("/e").unwrap();
    assert_eq!(fs.rename("/e", "/a").unwrap_err(), Error::NotEmpty);
    assert_eq!(fs.rename("/a/b/f", "/e").unwrap_err(), Error::IsADirectory);
    assert_eq!(fs.rename("/e", "/a/b/f").unwrap_err(), Error::NotADirectory);
    // Dir over empty dir.
    fs.rename("/a", "/e").unwrap();
    assert_eq!(read_all(&mut fs, "/e/b/f"), b"f");
    assert_eq!(fs.metadata("/a").unwrap_err(), Error::NotFound);
    // remove_dir of non-empty, remove of a dir, remove_dir of a file, root.
    assert_eq!(fs.remove_dir("/e").unwrap_err(), Error::NotEmpty);
    assert_eq!(fs.remove("/e").unwrap_err(), Error::IsADirectory);
    assert_eq!(fs.remove_dir("/e/b/f").unwrap_err(), Error::NotADirectory);
    assert_eq!(
        fs.remove_dir("/").unwrap_err(),
        Error::Path(PathError::Root)
    );
    assert_eq!(
        fs.rename("/", "/x").unwrap_err(),
        Error::Path(PathError::Root)
    );
    assert_eq!(
        fs.rename("/e", "/").unwrap_err(),
        Error::Path(PathError::Root)
    );
    // Rename across directories then use the path cache.
    fs.create_dir("/p").unwrap();
    fs.create_dir("/p/q").unwrap();
    write_file(&mut fs, "/p/q/one", b"1");
    assert_eq!(read_all(&mut fs, "/p/q/one"), b"1");
    fs.rename("/p/q", "/e/q").unwrap();
    assert_eq!(fs.metadata("/p/q/one").unwrap_err(), Error::NotFound);
    assert_eq!(read_all(&mut fs, "/e/q/one"), b"1");
    fs.create_dir("/p/q").unwrap();
    assert_eq!(names(&mut fs, "/p/q"), Vec::<String>::new());
    // An open file in a directory that is renamed: the handle follows the file.
    let f = fs.open("/e/q/one", rw()).unwrap();
    fs.rename("/e/q", "/p/r").unwrap();
    fs.write(f, b"X").unwrap();
    fs.close(f).unwrap();
    assert_eq!(read_all(&mut fs, "/p/r/one"), b"X");
    fs.unmount().unwrap();
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    assert_eq!(read_all(&mut fs, "/p/r/one"), b"X");
    assert_eq!(read_all(&mut fs, "/e/b/f"), b"f");
    assert_eq!(names(&mut fs, "/"), vec!["ab", "e", "p"]);
}

#[test]
fn s47_paths_and_name_limits() {
    let mut sim = fresh(6);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    assert_eq!(
        fs.open("", create()).unwrap_err(),
        Error::Path(PathError::NotAbsolute)
    );
    assert_eq!(
        fs.open("/", create()).unwrap_err(),
        Error::Path(PathError::Root)
    );
    assert_eq!(
        fs.open("//a", create()).unwrap_err(),
        Error::Path(PathError::EmptyComponent)
    );
    assert_eq!(
        fs.open("/a/", create()).unwrap_err(),
        Error::Path(PathError::EmptyComponent)
    );
    assert_eq!(
        fs.open("/.", create()).unwrap_err(),
        Error::Path(PathError::DotComponent)
    );
    assert_eq!(
        fs.create_dir("/..").unwrap_err(),
        Error::Path(PathError::DotComponent)
    );
    assert_eq!(
        fs.create_dir("a").unwrap_err(),
        Error::Path(PathError::NotAbsolute)
    );
    assert_eq!(
        fs.create_dir("/").unwrap_err(),
        Error::Path(PathError::Root)
    );
    assert_eq!(fs.metadata("/").unwrap().kind, Kind::Dir);
    assert_eq!(
        fs.metadata("//").unwrap_err(),
        Error::Path(PathError::EmptyComponent)
    );
    assert!(fs.read_dir("/a/").is_err());
    // "..." is a fine name.
    write_file(&mut fs, "/...", b"dots");
    let max = "n".repeat(NAME_MAX);
    let over = "n".repeat(NAME_MAX + 1);
    write_file(&mut fs, &format!("/{max}"), b"max");
    fs.create_dir(&format!("/d{}", &max[1..])).unwrap();
    write_file(&mut fs, &format!("/d{}/{max}", &max[1..]), &pattern(1, 300));
    assert_eq!(
        fs.open(&format!("/{over}"), create()).unwrap_err(),
        Error::Path(PathError::NameTooLong)
    );
    assert_eq!(
        fs.create_dir(&format!("/{over}")).unwrap_err(),
        Error::Path(PathError::NameTooLong)
    );
    assert_eq!(
        fs.rename(&format!("/{max}"), &format!("/{over}"))
            .unwrap_err(),
        Error::Path(PathError::NameTooLong)
    );
    // Multi-byte UTF-8: 32 two-byte chars = 64 bytes is fine, 33 is not.
    let u = "é".repeat(NAME_MAX / 2);
    write_file(&mut fs, &format!("/{u}"), b"u");
    let u_over = "é".repeat(NAME_MAX / 2 + 1);
    assert_eq!(
        fs.open(&format!("/{u_over}"), create()).unwrap_err(),
        Error::Path(PathError::NameTooLong)
    );
    // A NUL in a name.
    assert_eq!(
        fs.open("/a\0b", create()).unwrap_err(),
        Error::Path(PathError::Nul)
    );
    // Max-length name with attrs at the limit and 256 inline bytes: the longest entry.
    let f = fs
        .open(&format!("/{max}"), create().truncate(true))
        .unwrap();
    fs.write(f, &pattern(9, INLINE_MAX)).unwrap();
    fs.close(f).unwrap();
    fs.set_attributes(&format!("/{max}"), &[7u8; ATTR_MAX])
        .unwrap();
    fs.unmount().unwrap();
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    assert_eq!(read_all(&mut fs, "/..."), b"dots");
    assert_eq!(
        read_all(&mut fs, &format!("/{max}")),
        pattern(9, INLINE_MAX)
    );
    assert_eq!(
        fs.metadata(&format!("/{max}")).unwrap().attributes(),
        &[7u8; ATTR_MAX][..]
    );
    assert_eq!(
        read_all(&mut fs, &format!("/d{}/{max}", &max[1..])),
        pattern(1, 300)
    );
    assert_eq!(read_all(&mut fs, &format!("/{u}")), b"u");
    assert_eq!(names(&mut fs, "/").len(), 4);
}

#[test]
fn s47_attributes() {
    let mut sim = fresh(7);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    write_file(&mut fs, "/f", b"x");
    write_file(&mut fs, "/o", &pattern(1, 1000));
    fs.create_dir("/d").unwrap();
    for p in ["/f", "/o", "/d"] {
        assert_eq!(fs.metadata(p).unwrap().attributes(), b"");
        fs.set_attributes(p, b"abc").unwrap();
        assert_eq!(fs.metadata(p).unwrap().attributes(), b"abc");
        fs.set_attributes(p, &[0xA5; ATTR_MAX]).unwrap();
        assert_eq!(fs.metadata(p).unwrap().attributes(), &[0xA5; ATTR_MAX][..]);
        assert_eq!(
            fs.set_attributes(p, &[1; ATTR_MAX + 1]).unwrap_err(),
            Error::TooLarge
        );
        assert_eq!(fs.metadata(p).unwrap().attributes(), &[0xA5; ATTR_MAX][..]);
        fs.set_attributes(p, b"z").unwrap();
    }
    fs.set_attributes("/d", b"").unwrap();
    assert_eq!(fs.metadata("/d").unwrap().attributes(), b"");
    assert_eq!(
        fs.set_attributes("/nope", b"a").unwrap_err(),
        Error::NotFound
    );
    assert!(fs.set_attributes("/", b"a").is_err());
    // Attributes survive content rewrites (truncate-open, growth to an object, shrink
    // back to inline), renames, and staged commits.
    write_file(&mut fs, "/f", &pattern(2, 200));
    assert_eq!(fs.metadata("/f").unwrap().attributes(), b"z");
    write_file(&mut fs, "/f", &pattern(3, 2000));
    assert_eq!(fs.metadata("/f").unwrap().attributes(), b"z");
    write_file(&mut fs, "/f", &pattern(4, 10));
    assert_eq!(fs.metadata("/f").unwrap().attributes(), b"z");
    fs.rename("/f", "/g").unwrap();
    assert_eq!(fs.metadata("/g").unwrap().attributes(), b"z");
    // Attributes set while the file is open, then the close.
    let f = fs.open("/g", rw()).unwrap();
    fs.write(f, b"more").unwrap();
    fs.set_attributes("/g", b"while-open").unwrap();
    fs.write(f, &pattern(5, 400)).unwrap(); // grows into an object while open
    fs.close(f).unwrap();
    assert_eq!(fs.metadata("/g").unwrap().attributes(), b"while-open");
    let f = fs.open("/o", create().truncate(true)).unwrap();
    fs.set_attributes("/o", b"o2").unwrap();
    fs.write(f, &pattern(6, 600)).unwrap(); // pending object, adopted at close
    fs.close(f).unwrap();
    assert_eq!(fs.metadata("/o").unwrap().attributes(), b"o2");
    // Rename over a file: the source's attributes win.
    fs.rename("/g", "/o").unwrap();
    assert_eq!(fs.metadata("/o").unwrap().attributes(), b"while-open");
    fs.unmount().unwrap();
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    assert_eq!(fs.metadata("/o").unwrap().attributes(), b"while-open");
    assert_eq!(fs.metadata("/d").unwrap().attributes(), b"");
    // Opened at position 0: "more" overwrote the first 4 bytes, the rest followed.
    let mut want = b"more".to_vec();
    want.extend_from_slice(&pattern(5, 400));
    assert_eq!(read_all(&mut fs, "/o"), want);
}

/// 300 names in one directory (splits), half removed, read_dir exact; metadata sizes.
#[test]
fn s47_big_directory_listing_and_sizes() {
    let mut sim = fresh(8);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    fs.create_dir("/d").unwrap();
    let mut want = Vec::new();
    for i in 0..300 {
        let p = format!("/d/file-with-a-longish-name-{i:04}");
        write_file(&mut fs, &p, &pattern(i, (i as usize * 7) % 300));
        want.push(format!("file-with-a-longish-name-{i:04}"));
    }
    for i in (0..300).step_by(2) {
        fs.remove(&format!("/d/file-with-a-longish-name-{i:04}"))
            .unwrap();
    }
    want.retain(|n| n[27..].parse::<u32>().unwrap() % 2 == 1);
    assert_eq!(names(&mut fs, "/d"), want);
    for i in (1..300).step_by(2) {
        let p = format!("/d/file-with-a-longish-name-{i:04}");
        assert_eq!(fs.metadata(&p).unwrap().size, ((i * 7) % 300) as u64);
    }
    fs.unmount().unwrap();
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    assert_eq!(names(&mut fs, "/d"), want);
    for i in (1..300u32).step_by(2) {
        let p = format!("/d/file-with-a-longish-name-{i:04}");
        assert_eq!(read_all(&mut fs, &p), pattern(i, (i as usize * 7) % 300));
    }
}

/// Seeks: negative results, from the end, reading past the end.
#[test]
fn s47_seek_edges() {
    let mut sim = fresh(9);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    write_file(&mut fs, "/a", b"0123456789");
    let f = fs.open("/a", rw()).unwrap();
    assert_eq!(fs.seek(f, SeekFrom::End(-3)).unwrap(), 7);
    let mut b = [0u8; 8];
    assert_eq!(fs.read(f, &mut b).unwrap(), 3);
    assert_eq!(&b[..3], b"789");
    assert_eq!(fs.read(f, &mut b).unwrap(), 0);
    assert!(fs.seek(f, SeekFrom::End(-11)).is_err(), "before the start");
    assert!(fs.seek(f, SeekFrom::Current(-100)).is_err());
    // The refused seek left the position alone.
    assert_eq!(fs.seek(f, SeekFrom::Current(0)).unwrap(), 10);
    assert_eq!(fs.seek(f, SeekFrom::End(5)).unwrap(), 15);
    assert_eq!(fs.read(f, &mut b).unwrap(), 0);
    assert_eq!(
        fs.len(f).unwrap(),
        10,
        "a seek alone does not grow the file"
    );
    fs.close(f).unwrap();
    assert_eq!(fs.metadata("/a").unwrap().size, 10);
    // A write far past the largest size.
    let f = fs.open("/a", rw()).unwrap();
    fs.seek(f, SeekFrom::Start(u64::MAX - 2)).unwrap();
    assert_eq!(fs.write(f, b"abcdef").unwrap_err(), Error::TooLarge);
    assert_eq!(fs.len(f).unwrap(), 10);
    fs.close(f).unwrap();
    assert_eq!(read_all(&mut fs, "/a"), b"0123456789");
}

// ---------------------------------------------------------------------------------
// Power-cut sweeps (`support::tree`)
// ---------------------------------------------------------------------------------

type CaseFn = fn(&mut Ctx<'_, '_>) -> Result<(), Error<E>>;

struct Case {
    name: &'static str,
    preload: CaseFn,
    script: CaseFn,
}

fn sweep(
    case: &Case,
    seed: u64,
    kinds: &[CutKind],
    stride: u64,
    recovery: bool,
    noisy: bool,
) -> Report {
    tree::sweep(
        case.name,
        &case.preload,
        &case.script,
        seed,
        kinds,
        stride,
        recovery,
        noisy,
    )
}

fn chunk(i: u32, n: usize) -> Vec<u8> {
    pattern(1000 + i, n)
}

// Scripts ---------------------------------------------------------------------------

fn pre_rename(c: &mut Ctx<'_, '_>) -> Result<(), Error<E>> {
    c.mkdir_("/s")?;
    c.put_("/s/a", &chunk(1, 1000))?;
    c.put_("/s/b", &chunk(2, 3000))?;
    c.put_("/s/c", &chunk(3, 100))
}

/// Staged small fsyncs (object and inline), then renames over existing files.
fn staged_then_rename_over(c: &mut Ctx<'_, '_>) -> Result<(), Error<E>> {
    c.no_bypass();
    let f = c.open_("/s/a", OpenOptions::new().append(true), false)?;
    for i in 0..4 {
        let at = c.len_of("/s/a");
        c.write_(f, "/s/a", at, &chunk(10 + i, 64))?;
        c.fsync_(f, "/s/a")?;
    }
    let g = c.open_("/s/c", rw(), false)?;
    c.write_(g, "/s/c", 0, &chunk(20, 60))?;
    c.fsync_(g, "/s/c")?;
    c.write_(g, "/s/c", 60, &chunk(21, 50))?;
    c.fsync_(g, "/s/c")?;
    c.close_(g, "/s/c")?;
    c.close_(f, "/s/a")?;
    c.rename_("/s/a", "/s/b")?;
    let f = c.open_("/s/b", OpenOptions::new().append(true), false)?;
    for i in 0..2 {
        let at = c.len_of("/s/b");
        c.write_(f, "/s/b", at, &chunk(30 + i, 64))?;
        c.fsync_(f, "/s/b")?;
    }
    c.close_(f, "/s/b")?;
    c.rename_("/s/c", "/s/b")?;
    c.put_("/s/a", &chunk(40, 40))?;
    c.rename_("/s/a", "/s/c")?;
    Ok(())
}

fn pre_trunc(c: &mut Ctx<'_, '_>) -> Result<(), Error<E>> {
    c.mkdir_("/t")?;
    c.put_("/t/s", &chunk(1, 100))?;
    c.put_("/t/o", &chunk(2, 1000))
}

/// Truncate-at-open of staged files whose new contents outgrow 256 bytes before the
/// close, and back.
fn trunc_open_outgrows(c: &mut Ctx<'_, '_>) -> Result<(), Error<E>> {
    c.no_bypass();
    let g = c.open_("/t/s", rw(), false)?;
    c.write_(g, "/t/s", 0, &chunk(10, 50))?;
    c.fsync_(g, "/t/s")?;
    c.write_(g, "/t/s", 50, &chunk(11, 50))?;
    c.fsync_(g, "/t/s")?;
    c.close_(g, "/t/s")?;
    let g = c.open_("/t/s", rw().truncate(true), true)?;
    c.write_(g, "/t/s", 0, &chunk(12, 200))?;
    c.write_(g, "/t/s", 200, &chunk(13, 200))?;
    c.write_(g, "/t/s", 400, &chunk(14, 100))?;
    c.close_(g, "/t/s")?;
    let f = c.open_("/t/o", OpenOptions::new().append(true), false)?;
    for i in 0..3 {
        let at = c.len_of("/t/o");
        c.write_(f, "/t/o", at, &chunk(20 + i, 64))?;
        c.fsync_(f, "/t/o")?;
    }
    c.close_(f, "/t/o")?;
    let f = c.open_("/t/o", rw().truncate(true), true)?;
    c.write_(f, "/t/o", 0, &chunk(30, 100))?;
    c.write_(f, "/t/o", 100, &chunk(31, 300))?;
    c.fsync_(f, "/t/o")?;
    c.write_(f, "/t/o", 400, &chunk(32, 64))?;
    c.fsync_(f, "/t/o")?;
    c.close_(f, "/t/o")?;
    let g = c.open_("/t/s", rw().truncate(true), true)?;
    c.write_(g, "/t/s", 0, &chunk(40, 10))?;
    c.close_(g, "/t/s")?;
    Ok(())
}

fn pre_remove(c: &mut Ctx<'_, '_>) -> Result<(), Error<E>> {
    c.mkdir_("/r")?;
    c.put_("/r/x", &chunk(1, 800))?;
    c.put_("/r/y", &chunk(2, 30))
}

/// Remove and re-create names with staged records.
fn remove_recreate(c: &mut Ctx<'_, '_>) -> Result<(), Error<E>> {
    c.no_bypass();
    let f = c.open_("/r/x", OpenOptions::new().append(true), false)?;
    for i in 0..3 {
        let at = c.len_of("/r/x");
        c.write_(f, "/r/x", at, &chunk(10 + i, 64))?;
        c.fsync_(f, "/r/x")?;
    }
    c.close_(f, "/r/x")?;
    let g = c.open_("/r/y", rw(), false)?;
    c.fs.seek(g, SeekFrom::Start(30))?;
    c.write_(g, "/r/y", 30, &chunk(20, 30))?;
    c.fsync_(g, "/r/y")?;
    c.close_(g, "/r/y")?;
    c.remove_("/r/x")?;
    c.remove_("/r/y")?;
    let f = c.open_("/r/x", create(), false)?;
    c.write_(f, "/r/x", 0, &chunk(30, 64))?;
    c.fsync_(f, "/r/x")?;
    c.write_(f, "/r/x", 64, &chunk(31, 300))?;
    c.fsync_(f, "/r/x")?;
    c.write_(f, "/r/x", 364, &chunk(32, 64))?;
    c.fsync_(f, "/r/x")?;
    c.close_(f, "/r/x")?;
    let g = c.open_("/r/y", create(), false)?;
    c.write_(g, "/r/y", 0, &chunk(33, 20))?;
    c.fsync_(g, "/r/y")?;
    c.close_(g, "/r/y")?;
    c.remove_("/r/x")?;
    c.put_("/r/x", &chunk(34, 20))?;
    Ok(())
}

fn pre_dirs(c: &mut Ctx<'_, '_>) -> Result<(), Error<E>> {
    c.mkdir_("/d")?;
    c.put_("/d/x", &chunk(1, 50))?;
    c.put_("/d/log", &chunk(2, 700))
}

/// create_dir/remove_dir/renames of directories next to staged files, a log file
/// open throughout.
fn dirs_next_to_staged(c: &mut Ctx<'_, '_>) -> Result<(), Error<E>> {
    c.no_bypass();
    let f = c.open_("/d/log", OpenOptions::new().append(true), false)?;
    let mut k = 0;
    let mut app = |c: &mut Ctx<'_, '_>| -> Result<(), Error<E>> {
        let at = c.len_of("/d/log");
        k += 1;
        c.write_(f, "/d/log", at, &chunk(10 + k, 64))?;
        c.fsync_(f, "/d/log")
    };
    app(c)?;
    c.put_("/d/x", &chunk(3, 60))?;
    c.mkdir_("/d/sub")?;
    app(c)?;
    c.rmdir_("/d/sub")?;
    c.mkdir_("/d/sub")?;
    c.put_("/d/x", &chunk(4, 70))?;
    c.rename_("/d/x", "/d/sub/x")?;
    c.put_("/d/sub/y", &chunk(5, 80))?;
    app(c)?;
    c.rename_("/d/sub", "/d/sub2")?;
    c.remove_("/d/sub2/x")?;
    c.put_("/d/sub2/y", &chunk(6, 90))?;
    app(c)?;
    c.mkdir_("/e")?;
    c.rename_("/d/sub2", "/e/sub")?;
    app(c)?;
    c.close_(f, "/d/log")?;
    c.rename_("/d/log", "/e/sub/log")?;
    c.remove_("/e/sub/y")?;
    c.remove_("/e/sub/log")?;
    c.rmdir_("/e/sub")?;
    Ok(())
}

fn pre_big(c: &mut Ctx<'_, '_>) -> Result<(), Error<E>> {
    c.mkdir_("/big")?;
    c.put_("/log", &chunk(1, 700))
}

/// A directory of 160 names splitting buckets while records are staged (an open
/// object file with appends and inline files rewritten).
fn big_dir_with_staged(c: &mut Ctx<'_, '_>) -> Result<(), Error<E>> {
    let f = c.open_("/log", OpenOptions::new().append(true), false)?;
    for i in 0..160u32 {
        let p = format!("/big/name-{i:03}");
        c.put_(&p, &chunk(100 + i, 10 + (i as usize * 13) % 120))?;
        if i % 8 == 0 {
            let at = c.len_of("/log");
            c.write_(f, "/log", at, &chunk(500 + i, 64))?;
            c.fsync_(f, "/log")?;
        }
        if i % 10 == 5 {
            // Rewrite an earlier small file: staged inline record in a bucket that
            // may split next.
            let q = format!("/big/name-{:03}", i / 2);
            c.put_(&q, &chunk(900 + i, 100))?;
        }
    }
    c.close_(f, "/log")
}

fn pre_grow(c: &mut Ctx<'_, '_>) -> Result<(), Error<E>> {
    c.put_("/g", &chunk(1, 10))?;
    c.put_("/h", &chunk(2, 250))
}

/// An open file grown past 256 bytes and shrunk back, fsyncs between, holes.
fn grow_shrink_open(c: &mut Ctx<'_, '_>) -> Result<(), Error<E>> {
    let f = c.open_("/g", rw(), false)?;
    c.write_(f, "/g", 0, &chunk(10, 210))?;
    c.fsync_(f, "/g")?;
    c.write_(f, "/g", 210, &chunk(11, 100))?; // 310: an object
    c.fsync_(f, "/g")?;
    c.truncate_(f, "/g", 50)?;
    c.write_(f, "/g", 310, &chunk(12, 5))?; // hole 50..310
    c.fsync_(f, "/g")?;
    c.truncate_(f, "/g", 100)?;
    c.fsync_(f, "/g")?;
    c.truncate_(f, "/g", 700)?;
    c.close_(f, "/g")?;
    // An inline file grown by one write across the limit without fsync, then closed.
    let h = c.open_("/h", OpenOptions::new().append(true), false)?;
    c.write_(h, "/h", 250, &chunk(13, 20))?;
    c.write_(h, "/h", 270, &chunk(14, 20))?;
    c.close_(h, "/h")?;
    let h = c.open_("/h", rw(), false)?;
    c.truncate_(h, "/h", 5)?;
    c.write_(h, "/h", 0, &chunk(15, 3))?;
    c.fsync_(h, "/h")?;
    c.close_(h, "/h")?;
    Ok(())
}

const CASES: [Case; 6] = [
    Case {
        name: "staged_then_rename_over",
        preload: pre_rename,
        script: staged_then_rename_over,
    },
    Case {
        name: "trunc_open_outgrows",
        preload: pre_trunc,
        script: trunc_open_outgrows,
    },
    Case {
        name: "remove_recreate",
        preload: pre_remove,
        script: remove_recreate,
    },
    Case {
        name: "dirs_next_to_staged",
        preload: pre_dirs,
        script: dirs_next_to_staged,
    },
    Case {
        name: "big_dir_with_staged",
        preload: pre_big,
        script: big_dir_with_staged,
    },
    Case {
        name: "grow_shrink_open",
        preload: pre_grow,
        script: grow_shrink_open,
    },
];

#[test]
fn s47_cut_staged_then_rename_over() {
    assert_report(sweep(&CASES[0], 11, &KINDS, 1, false, false));
}

#[test]
fn s47_cut_trunc_open_outgrows() {
    assert_report(sweep(&CASES[1], 12, &KINDS, 1, false, false));
}

#[test]
fn s47_cut_remove_recreate() {
    assert_report(sweep(&CASES[2], 13, &KINDS, 1, false, false));
}

#[test]
fn s47_cut_dirs_next_to_staged() {
    assert_report(sweep(&CASES[3], 14, &KINDS, 1, false, false));
}

#[test]
fn s47_cut_big_dir_with_staged() {
    assert_report(sweep(&CASES[4], 15, &KINDS, 3, false, false));
}

#[test]
fn s47_cut_grow_shrink_open() {
    assert_report(sweep(&CASES[5], 16, &KINDS, 1, false, false));
}

/// Every case again with cuts in the recovery mount after each cut, and noisy
/// (unstable-after-cut) pages with every cut kind.
#[test]
fn s47_cut_recovery_and_noisy() {
    let mut fails = Report::default();
    for (i, case) in CASES.iter().enumerate() {
        let stride = if i == 4 { 9 } else { 1 };
        let r = sweep(
            case,
            30 + i as u64,
            &[CutKind::Clean, CutKind::Torn(TornMode::Random)],
            stride.max(2),
            true,
            false,
        );
        fails.add(r);
        fails.add(sweep(
            case,
            40 + i as u64,
            &CutKind::ALL,
            stride,
            false,
            true,
        ));
    }
    println!("{} runs", fails.runs);
    assert_report(fails);
}

thread_local! {
    static WRITES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    static SESSIONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    static CRASHES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    static DUMP: std::cell::RefCell<Option<(Sim, FaultPlan)>> = const { std::cell::RefCell::new(None) };
}

// ---------------------------------------------------------------------------------
// Random walk with long-lived handles against a model (crashes and remounts)
// ---------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct MFile {
    /// Contents as the handle (or the volume) shows them now.
    cur: Vec<u8>,
    /// Durable contents.
    dur: Vec<u8>,
    /// States since `dur` a crash may show bytes of (not truncate-opened).
    since: Vec<Vec<u8>>,
    /// Truncate-opened and not committed since: a crash shows `dur`.
    hidden: bool,
    attrs: Vec<u8>,
}

#[derive(Clone, Debug)]
enum MNode {
    Dir(Vec<u8>),
    File(MFile),
}

struct MHandle {
    f: stagefs_core::File,
    path: String,
    pos: u64,
    append: bool,
    read: bool,
    write: bool,
}

const WALK_PATHS: [&str; 12] = [
    "/f0", "/f1", "/f2", "/d", "/d/f0", "/d/f1", "/d/e", "/d/e/f0", "/g", "/g/f3", "/d/f2", "/f3",
];

fn parent(p: &str) -> &str {
    &p[..p.rfind('/').unwrap()]
}

fn walk(seed: u64, steps: usize, crash_cuts: bool, dump_at: Option<usize>) {
    let mut rng = support::Rng(seed * 2654435761 + 1);
    let mut sim = fresh(seed);
    let mut tree: BTreeMap<String, MNode> = BTreeMap::new();
    let mut handles: Vec<MHandle> = Vec::new();
    let mut fs_holder = Some(());
    let _ = &mut fs_holder;
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        fs.unmount().unwrap();
    }
    let mut step = 0;
    while step < steps {
        // One mount session.
        let mut fs = vol(&mut sim);
        fs.mount()
            .unwrap_or_else(|e| panic!("seed {seed} step {step}: mount {e:?}"));
        handles.clear();
        let session = 20 + rng.below(80) as usize;
        let mut crashed = false;
        for _ in 0..session {
            step += 1;
            let ctx = format!("seed {seed} step {step}");
            let pick = WALK_PATHS[rng.below(WALK_PATHS.len() as u64) as usize];
            let parent_ok = |t: &BTreeMap<String, MNode>, p: &str| {
                let q = parent(p);
                q.is_empty() || matches!(t.get(q), Some(MNode::Dir(_)))
            };
            let is_open = |h: &Vec<MHandle>, p: &str| h.iter().any(|x| x.path == p);
            let choice = rng.below(20);
            if std::env::var("S47_TRACE").is_ok() {
                eprintln!(
                    "{ctx}: choice {choice} pick {pick} handles {} ro {}",
                    handles.len(),
                    fs.read_only()
                );
            }
            match choice {
                0..=3 => {
                    // open
                    let (read, write, append, createf, trunc) = (
                        rng.below(4) != 0,
                        rng.below(3) != 0,
                        rng.below(4) == 0,
                        rng.below(2) == 0,
                        rng.below(4) == 0,
                    );
                    let w = write || append;
                    if !w && !read {
                        continue;
                    }
                    let (createf, trunc) = if w { (createf, trunc) } else { (false, false) };
                    let o = OpenOptions::new()
                        .read(read)
                        .write(write)
                        .append(append)
                        .create(createf)
                        .truncate(trunc);
                    let r = fs.open(pick, o);
                    let expect_ok = handles.len() < 4
                        && parent_ok(&tree, pick)
                        && !is_open(&handles, pick)
                        && match tree.get(pick) {
                            Some(MNode::File(_)) => true,
                            Some(MNode::Dir(_)) => false,
                            None => createf,
                        };
                    match r {
                        Ok(f) => {
                            assert!(expect_ok, "{ctx}: open {pick} succeeded against the model");
                            let e = tree.entry(pick.to_string()).or_insert_with(|| {
                                MNode::File(MFile {
                                    cur: vec![],
                                    dur: vec![],
                                    since: vec![],
                                    hidden: false,
                                    attrs: vec![],
                                })
                            });
                            let MNode::File(m) = e else { unreachable!() };
                            if trunc && !m.cur.is_empty() {
                                m.cur.clear();
                                m.hidden = true;
                            }
                            assert_eq!(
                                fs.len(f).unwrap(),
                                m.cur.len() as u64,
                                "{ctx}: len at open"
                            );
                            handles.push(MHandle {
                                f,
                                path: pick.to_string(),
                                pos: 0,
                                append,
                                read,
                                write: w,
                            });
                        }
                        Err(e) => assert!(!expect_ok, "{ctx}: open {pick} {o:?}: {e:?}"),
                    }
                }
                4..=7 if !handles.is_empty() => {
                    // write (maybe after a seek)
                    let i = rng.below(handles.len() as u64) as usize;
                    let MNode::File(m) = tree.get_mut(&handles[i].path).unwrap() else {
                        panic!()
                    };
                    let h = &mut handles[i];
                    if rng.below(3) == 0 {
                        h.pos = rng.below(m.cur.len() as u64 + 400);
                        fs.seek(h.f, SeekFrom::Start(h.pos)).unwrap();
                    }
                    let n = [1usize, 7, 64, 100, 200, 300, 700][rng.below(7) as usize];
                    let data = pattern(rng.below(1000) as u32, n);
                    let r = fs.write(h.f, &data);
                    if !h.write {
                        assert_eq!(r.unwrap_err(), Error::Access, "{ctx}");
                        continue;
                    }
                    r.unwrap_or_else(|e| panic!("{ctx}: write {e:?}"));
                    WRITES.with(|c| c.set(c.get() + 1));
                    let at = if h.append {
                        m.cur.len()
                    } else {
                        h.pos as usize
                    };
                    if m.cur.len() < at + n {
                        m.cur.resize(at + n, 0);
                    }
                    m.cur[at..at + n].copy_from_slice(&data);
                    h.pos = (at + n) as u64;
                    if !m.hidden {
                        m.since.push(m.cur.clone());
                    }
                }
                8..=9 if !handles.is_empty() => {
                    // read at a random position, compare
                    let i = rng.below(handles.len() as u64) as usize;
                    let MNode::File(m) = tree.get(&handles[i].path).unwrap() else {
                        panic!()
                    };
                    let h = &mut handles[i];
                    h.pos = rng.below(m.cur.len() as u64 + 50);
                    fs.seek(h.f, SeekFrom::Start(h.pos)).unwrap();
                    let mut buf = vec![0u8; 1 + rng.below(3000) as usize];
                    let r = fs.read(h.f, &mut buf);
                    if !h.read {
                        assert_eq!(r.unwrap_err(), Error::Access, "{ctx}");
                        continue;
                    }
                    let n = r.unwrap_or_else(|e| panic!("{ctx}: read {e:?}"));
                    let want = &m.cur[(h.pos as usize).min(m.cur.len())..];
                    let want = &want[..want.len().min(buf.len())];
                    assert_eq!(
                        &buf[..n],
                        want,
                        "{ctx}: read {} at {} of {}",
                        h.path,
                        h.pos,
                        m.cur.len()
                    );
                    h.pos += n as u64;
                }
                10 if !handles.is_empty() => {
                    // fsync or close
                    let i = rng.below(handles.len() as u64) as usize;
                    let close = rng.below(2) == 0;
                    let f = handles[i].f;
                    let MNode::File(m) = tree.get_mut(&handles[i].path).unwrap() else {
                        panic!()
                    };
                    if close {
                        fs.close(f).unwrap_or_else(|e| panic!("{ctx}: close {e:?}"));
                        handles.remove(i);
                    } else {
                        fs.fsync(f).unwrap_or_else(|e| panic!("{ctx}: fsync {e:?}"));
                    }
                    m.dur = m.cur.clone();
                    m.since.clear();
                    m.hidden = false;
                }
                11 if !handles.is_empty() => {
                    // truncate (durable)
                    let i = rng.below(handles.len() as u64) as usize;
                    let h = &handles[i];
                    let MNode::File(m) = tree.get_mut(&h.path).unwrap() else {
                        panic!()
                    };
                    let size = [0usize, 5, 100, 256, 257, 300, 2048, 3000][rng.below(8) as usize];
                    let r = fs.truncate(h.f, size as u64);
                    if !h.write {
                        assert_eq!(r.unwrap_err(), Error::Access, "{ctx}");
                        continue;
                    }
                    r.unwrap_or_else(|e| panic!("{ctx}: truncate {e:?}"));
                    m.cur.resize(size, 0);
                    m.dur = m.cur.clone();
                    m.since.clear();
                    m.hidden = false;
                }
                12 => {
                    // metadata
                    let r = fs.metadata(pick);
                    match (tree.get(pick), r) {
                        (Some(MNode::File(m)), Ok(md)) => {
                            assert_eq!(md.size, m.cur.len() as u64, "{ctx}: size of {pick}");
                            assert_eq!(md.attributes(), &m.attrs[..], "{ctx}: attrs of {pick}");
                        }
                        (Some(MNode::Dir(a)), Ok(md)) => {
                            assert_eq!(md.kind, Kind::Dir);
                            assert_eq!(md.attributes(), &a[..], "{ctx}: attrs of {pick}");
                        }
                        (None, Err(_)) => {}
                        (m, r) => panic!("{ctx}: metadata {pick}: model {m:?} volume {r:?}"),
                    }
                }
                13 => {
                    // set attributes
                    let a = pattern(
                        rng.below(100) as u32,
                        rng.below(ATTR_MAX as u64 + 1) as usize,
                    );
                    let r = fs.set_attributes(pick, &a);
                    match (tree.get_mut(pick), r) {
                        (Some(MNode::File(MFile { attrs, .. }) | MNode::Dir(attrs)), Ok(())) => {
                            *attrs = a
                        }
                        (None, Err(_)) => {}
                        (m, r) => panic!("{ctx}: set_attributes {pick}: model {m:?} volume {r:?}"),
                    }
                }
                14 => {
                    // mkdir / rmdir
                    let r = if rng.below(2) == 0 {
                        let ok = parent_ok(&tree, pick) && !tree.contains_key(pick);
                        let r = fs.create_dir(pick);
                        assert_eq!(r.is_ok(), ok, "{ctx}: mkdir {pick}: {r:?}");
                        if ok {
                            tree.insert(pick.to_string(), MNode::Dir(vec![]));
                        }
                        continue;
                    } else {
                        fs.remove_dir(pick)
                    };
                    let prefix = format!("{pick}/");
                    let ok = matches!(tree.get(pick), Some(MNode::Dir(_)))
                        && !tree.keys().any(|k| k.starts_with(&prefix));
                    assert_eq!(r.is_ok(), ok, "{ctx}: rmdir {pick}: {r:?}");
                    if ok {
                        tree.remove(pick);
                    }
                }
                15 => {
                    // remove
                    let r = fs.remove(pick);
                    let ok =
                        matches!(tree.get(pick), Some(MNode::File(_))) && !is_open(&handles, pick);
                    assert_eq!(r.is_ok(), ok, "{ctx}: remove {pick}: {r:?}");
                    if ok {
                        tree.remove(pick);
                    }
                }
                16 => {
                    // rename
                    let to = WALK_PATHS[rng.below(WALK_PATHS.len() as u64) as usize];
                    let r = fs.rename(pick, to);
                    let src = tree.get(pick).cloned();
                    let below = |k: &str, p: &str| k == p || k.starts_with(&format!("{p}/"));
                    let busy = handles.iter().any(|h| h.path == pick || h.path == to);
                    let ok = match (&src, tree.get(to)) {
                        (None, _) => false,
                        _ if !parent_ok(&tree, to) => false,
                        _ if busy => false,
                        _ if pick == to => true,
                        (Some(MNode::Dir(_)), _) if below(to, pick) => false,
                        (Some(_), None) => true,
                        (Some(MNode::File(_)), Some(MNode::File(_))) => true,
                        (Some(MNode::Dir(_)), Some(MNode::Dir(_))) => {
                            !tree.keys().any(|k| k.starts_with(&format!("{to}/")))
                        }
                        _ => false,
                    };
                    assert_eq!(r.is_ok(), ok, "{ctx}: rename {pick} -> {to}: {r:?}");
                    if ok && pick != to {
                        for (old, new) in tree::move_subtree(&mut tree, pick, to) {
                            for h in handles.iter_mut().filter(|h| h.path == old) {
                                h.path = new.clone();
                            }
                        }
                    }
                }
                17 => {
                    fs.sync().unwrap_or_else(|e| panic!("{ctx}: sync {e:?}"));
                    for h in &handles {
                        let MNode::File(m) = tree.get_mut(&h.path).unwrap() else {
                            panic!()
                        };
                        m.dur = m.cur.clone();
                        m.since.clear();
                        m.hidden = false;
                    }
                }
                18 if rng.below(2) == 0 => {
                    if rng.below(4) == 0 {
                        fs.step_all()
                            .unwrap_or_else(|e| panic!("{ctx}: step_all {e:?}"));
                        for h in &handles {
                            let MNode::File(m) = tree.get_mut(&h.path).unwrap() else {
                                panic!()
                            };
                            m.dur = m.cur.clone();
                            m.since.clear();
                            m.hidden = false;
                        }
                    } else {
                        fs.step(rng.below(20) as u32)
                            .unwrap_or_else(|e| panic!("{ctx}: step {e:?}"));
                    }
                    for h in &handles {
                        let MNode::File(m) = tree.get(&h.path).unwrap() else {
                            panic!()
                        };
                        assert_eq!(
                            fs.len(h.f).unwrap(),
                            m.cur.len() as u64,
                            "{ctx}: len after step"
                        );
                    }
                    assert!(
                        !fs.read_only(),
                        "{ctx}: a step on a healthy part turned the volume read-only: {:?} (store {:?})",
                        fs.store().health(),
                        fs.store().stats()
                    );
                }
                18 if crash_cuts && rng.below(3) == 0 => {
                    crashed = true;
                    break;
                }
                19 if rng.below(4) == 0 => break,
                _ => {}
            }
        }
        SESSIONS.with(|c| c.set(c.get() + 1));
        if crashed {
            CRASHES.with(|c| c.set(c.get() + 1));
            // A cut at a random point of the next few programs/erases, of a random kind.
            drop(fs);
            let plan = FaultPlan::seeded(seed + step as u64)
                .with_cut(1 + rng.below(6), CutKind::ALL[rng.below(5) as usize]);
            if std::env::var("S47_TRACE").is_ok() {
                eprintln!("seed {seed} step {step}: crash plan {plan:?}");
            }
            if dump_at == Some(step) {
                DUMP.with(|d| *d.borrow_mut() = Some((sim.clone(), plan)));
            }
            sim.arm(plan);
            {
                let mut fs = vol(&mut sim);
                let r: Result<(), Error<E>> = (|| {
                    fs.mount()?;
                    // Work the cut may hit: a sync with whatever is staged.
                    fs.sync()
                })();
                let _ = r;
            }
            sim.cut_power();
            sim.power_on();
            sim.disarm();
        } else {
            // Clean unmount: everything open is closed and durable.
            fs.unmount()
                .unwrap_or_else(|e| panic!("seed {seed} step {step}: unmount {e:?}"));
            for h in &handles {
                let MNode::File(m) = tree.get_mut(&h.path).unwrap() else {
                    panic!()
                };
                m.dur = m.cur.clone();
                m.since.clear();
                m.hidden = false;
            }
            drop(fs);
        }
        // Check the whole tree after the remount.
        let mut fs = vol(&mut sim);
        fs.mount()
            .unwrap_or_else(|e| panic!("seed {seed} step {step}: check mount {e:?}"));
        assert!(
            !fs.read_only(),
            "seed {seed} step {step}: the volume mounts read-only on a healthy part (crashed {crashed}): {:?}, staging {:?}",
            fs.store().health(),
            fs.staging_status()
        );
        let t = observe(&mut fs).unwrap();
        let keys: Vec<&String> = t.keys().collect();
        let mkeys: Vec<&String> = tree.keys().collect();
        assert_eq!(
            keys, mkeys,
            "seed {seed} step {step}: paths (crashed {crashed})"
        );
        for (k, n) in tree.iter_mut() {
            match (n, &t[k]) {
                (MNode::Dir(_), Node::Dir) => {}
                (MNode::File(m), Node::File(c)) => {
                    let ok = *c == m.dur
                        || (!m.hidden && !m.since.is_empty() && {
                            let lo = m
                                .since
                                .iter()
                                .map(|s| s.len())
                                .chain([m.dur.len()])
                                .min()
                                .unwrap();
                            let hi = m
                                .since
                                .iter()
                                .map(|s| s.len())
                                .chain([m.dur.len()])
                                .max()
                                .unwrap();
                            c.len() >= lo
                                && c.len() <= hi
                                && c.iter().enumerate().all(|(i, b)| {
                                    m.dur.get(i) == Some(b)
                                        || m.since.iter().any(|s| s.get(i) == Some(b))
                                        || *b == 0
                                })
                        });
                    assert!(
                        ok,
                        "seed {seed} step {step}: {k}: {} bytes read, durable {} (crashed {crashed}, hidden {}, {} writes since)",
                        c.len(),
                        m.dur.len(),
                        m.hidden,
                        m.since.len()
                    );
                    m.cur = c.clone();
                    m.dur = c.clone();
                    m.since.clear();
                    m.hidden = false;
                    let md = fs.metadata(k).unwrap();
                    assert_eq!(md.size, c.len() as u64, "seed {seed} step {step}: {k} size");
                    assert_eq!(
                        md.attributes(),
                        &m.attrs[..],
                        "seed {seed} step {step}: {k} attrs"
                    );
                }
                (n, o) => panic!("seed {seed} step {step}: {k}: model {n:?} volume {o:?}"),
            }
        }
        fs.unmount().unwrap();
    }
}

/// FINDING (volume stays writable): on a healthy part (no faults at all), one power
/// cut that tears a checkpoint page program (`Torn(Prefix)`, the 5th program of a
/// mount + `sync`) left a volume that mounted read-only (`ReadOnly(CheckpointBlocks)`)
/// at every later mount: a read-only mount writes nothing, so nothing ever repairs it.
/// Found by the random walk below (seed 396, the crash after step 184): earlier cut
/// erases had left two of the part's four checkpoint blocks with random marker bytes,
/// taken for bad. Fixed in stop 47 (a block the store erased counts as bad only on a
/// marker written, oftl `tests/torn_erase_markers.rs`); the walk's path to that crash
/// changed with the fix, so the seeds around it are walked whole (the walk checks
/// that every session stays writable).
#[test]
fn s47_finding_one_torn_checkpoint_program_leaves_the_volume_read_only_for_good() {
    for seed in 390..=402 {
        walk(seed, 400, true, None);
    }
}

#[test]
fn s47_random_walk_with_handles() {
    let seeds: u64 = std::env::var("S47_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let first: u64 = std::env::var("S47_FIRST")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    for seed in first..=seeds {
        walk(seed, 400, seed % 2 == 0, None);
    }
    println!(
        "{} writes, {} sessions, {} crashes",
        WRITES.with(|c| c.get()),
        SESSIONS.with(|c| c.get()),
        CRASHES.with(|c| c.get())
    );
}

/// Counts the walk's failures over `S47_SEEDS` seeds (a survey, not a pass/fail test).
#[test]
#[ignore = "survey"]
fn s47_walk_survey() {
    let seeds: u64 = std::env::var("S47_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    std::panic::set_hook(Box::new(|_| {}));
    let mut fails = Vec::new();
    for seed in 1..=seeds {
        if let Err(e) = std::panic::catch_unwind(|| walk(seed, 400, seed % 2 == 0, None)) {
            let m = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            fails.push(m);
        }
    }
    let _ = std::panic::take_hook();
    for f in &fails {
        println!("{}", &f[..f.len().min(300)]);
    }
    println!("{} of {seeds} seeds failed", fails.len());
}
