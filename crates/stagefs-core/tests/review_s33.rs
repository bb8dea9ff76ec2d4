//! Independent review (s33) of `stagefs-core`'s public API: edge cases and misuse
//! (paths, handles, flags, seeks, sizes, attributes, renames, listings, the I/O
//! views, remounts), which the earlier reviews (power cuts, staging) did not target.
//!
//! The contract checked (crate docs, "Misuse"): bad paths, names too long, handles
//! that are closed or from an earlier mount, and operations on the wrong kind of entry
//! get their own `Error` and change nothing; never a panic, a hang, silent corruption
//! or a wrong result.
//!
//! Findings (each a test that FAILED at the reviewed commit; all three fixed since:
//! handles carry their mount's number from a counter shared by every `Fs` of the
//! program, `HANDLES` above 255 is refused when the type is built, and `rename` counts
//! what it frees in the destination bucket):
//! - `stale_handle_from_an_earlier_mount_acts_on_another_file`: a `File` is
//!   (slot, session) and the session counter starts at 0 in every `Fs::new`; a handle
//!   kept from a mount through another `Fs` value over the same device names the file
//!   opened with the same count in the new one, and writes/closes it.
//! - `handle_tables_over_256_slots_make_unusable_handles`: `File::slot` is a `u8`
//!   (`slot as u8`), but `HANDLES` is unbounded: handle 257 of `Fs<_, _, 300>` is
//!   refused as `BadHandle` for every call, cannot be closed, and `unmount` fails
//!   without committing it.
//! - `rename_that_adds_no_bytes_to_a_full_deepest_bucket_fails`: `rename` asks for
//!   room for the moved entry before removing the replaced (or the source) entry, so
//!   in a full bucket at the trie's last level a rename over an existing file, or to
//!   a same-length name of the same bucket, fails with `DirectoryFull` although the
//!   bucket would not grow.
//!
//! Probes that held are the `probe_*` tests: path validation and name-length
//! boundaries (ASCII, 2- and 4-byte UTF-8) through every path-taking call; seeks and
//! sizes at the extremes (u64/i64 bounds, the largest object, sparse reads); handle
//! misuse and lifetimes (flag combinations, Busy, double close, table exhausted,
//! unmount/mount/format of the same `Fs`, a parent directory renamed under an open
//! file); the `embedded-io` and `std::io` views; sizes around `INLINE_MAX` and the
//! page; a 300-entry directory and a full deepest bucket listing each name once, with
//! refusals that change nothing across a cut; a cut at every program/erase of a
//! script of edge-case calls; and a model-based walk of the whole public API
//! (`S33_SEEDS` seeds, default 20) predicting every result and error.
//!
//! Not testable as a runtime misuse: a `ReadDir` borrows the `Fs` mutably, so the
//! namespace cannot change while a listing is in progress.

#![allow(dead_code)]

use crate::support;

use nand_hal::sim::{profile, CutKind, FaultPlan, SimNand, TornMode};
use stagefs_core::oracle::power_loss;
use stagefs_core::{Error, Kind, OpenOptions, PathError, SeekFrom, ATTR_MAX, INLINE_MAX, NAME_MAX};
use support::{create, pattern, read_all, rw, vol, write_file, Sim};

fn fresh(seed: u64) -> Sim {
    SimNand::heap(profile::TINY, FaultPlan::seeded(seed))
}

fn crash(sim: &mut Sim) {
    sim.cut_power();
    sim.power_on();
}

fn fnv(name: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in name {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// `n` names of `len` bytes whose hashes agree in the low 13 bits (one bucket at the
/// trie's deepest level, whatever the splits).
fn colliding(n: usize, len: usize, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let w = len - prefix.len();
    let target = fnv(format!("{prefix}{:0>w$}", 0).as_bytes()) & 0x1fff;
    let mut i = 0u64;
    while out.len() < n {
        let s = format!("{prefix}{i:0>w$}");
        if fnv(s.as_bytes()) & 0x1fff == target {
            out.push(s);
        }
        i += 1;
    }
    out
}

// ---------------------------------------------------------------------------------
// Findings

/// Crate docs, "Misuse": "handles that are closed or from an earlier mount ... get
/// their own [`Error`] variants and change nothing"; `File`: "valid until it is closed
/// or the volume is unmounted".
///
/// Repro: mount A (an `Fs` value), open `/a` (3rd open of A), unmount A, build `Fs` B
/// over the same device (`Fs::new(store)`, as every remount in the tests and a host
/// tool does), mount, open any file 3 times (closing the first 2) so the 3rd is
/// `/b`; write through A's handle.
/// Expected: `Err(BadHandle)`, `/b` unchanged. Observed: `Ok(2)`, and `/b` reads
/// `XXbb` after the stale handle's `close` (which returns `Ok`) committed it; B's own
/// handle of `/b` is then `BadHandle`. Cause: the session counter (`Fs::opens`) starts
/// at 0 in `Fs::new`, so sessions repeat across `Fs` values. Severity: medium-low
/// (needs a `File` kept across `Fs` values; then silent writes to the wrong file).
/// Fixed: a `File` also carries its mount's number (`Fs::mount_id`, from a counter
/// every `Fs` of the program shares).
#[test]
fn stale_handle_from_an_earlier_mount_acts_on_another_file() {
    let mut sim = fresh(101);
    let stale;
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        write_file(&mut fs, "/a", b"aaaa");
        write_file(&mut fs, "/b", b"bbbb");
        stale = fs.open("/a", rw()).unwrap();
        fs.unmount().unwrap();
    }
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    // Opens of the new mount take every count the stale handle's could match.
    for _ in 0..8 {
        let f = fs.open("/b", rw()).unwrap();
        assert_ne!(f, stale, "an open of the new mount equals the stale handle");
        fs.close(f).unwrap();
    }
    let fb = fs.open("/b", rw()).unwrap();
    let w = fs.write(stale, b"XX");
    let c = fs.close(stale);
    fs.close(fb).unwrap();
    let b = read_all(&mut fs, "/b");
    assert_eq!(
        (w, c, b.as_slice()),
        (Err(Error::BadHandle), Err(Error::BadHandle), &b"bbbb"[..]),
        "a handle from an earlier mount wrote into another file"
    );
}

type Wide<'a> = stagefs_core::Fs<support::Store<'a>, 2048, 255>;

/// Fixed: `File::slot` is a `u8`, and `Fs<S, PAGE, HANDLES>` accepted any `HANDLES`:
/// handle 257 of `Fs<_, 2048, 300>` named slot 0, was refused as `BadHandle` for every
/// call, could not be closed, and `unmount` failed without committing it. Tables of
/// more than 255 are now refused when the type is built (a `compile_fail` example on
/// `Fs`); the largest, 255, works to its last handle.
#[test]
fn handle_tables_over_256_slots_make_unusable_handles() {
    let mut sim = fresh(102);
    let mut fs: Box<Wide<'_>> = Box::new(stagefs_core::Fs::new(support::Store::new(
        &mut sim,
        support::cfg(),
        oftl::Greedy::DEFAULT,
    )));
    fs.format().unwrap();
    let hs: Vec<_> = (0..255)
        .map(|i| fs.open(&format!("/f{i}"), create()).unwrap())
        .collect();
    assert_eq!(
        fs.open("/one-more", create()).err(),
        Some(Error::TooManyOpen)
    );
    let h = hs[254];
    let w = fs.write(h, b"hello");
    let c = fs.close(h);
    let u = fs.unmount();
    assert_eq!(
        (w, c, u),
        (Ok(5), Ok(()), Ok(())),
        "handle 255 of a 255-slot table ({h:?})"
    );
}

/// Repro: directory `/c` filled with 29 directories whose 60-byte names hash alike
/// in 13 bits (one bucket at the deepest level, full: the 30th `create_dir` fails
/// `DirectoryFull`, as documented). Then
///   (1) `rename(/c/n1, /c/n2)`, both existing, same length: replaces `n2`, the
///       bucket loses an entry;
///   (2) `rename(/c/n0, /c/spare)`, `spare` a same-length name of the same bucket:
///       the bucket's bytes do not change.
/// Expected: both succeed (nothing is added to the bucket; `DirectoryFull` is "a
/// directory page at the deepest level is full of names that hash alike" for a name
/// that must be added). Observed: both fail `DirectoryFull`: `rename` asks
/// `locate_with_room` for the moved entry's full length before it removes the
/// replaced / source entry. Nothing is lost (clean error). The atomic-replace idiom
/// (write a temporary, rename it over the target) is refused for targets in such a
/// bucket. Severity: low (needs a full bucket at level 13: adversarial names or
/// ~270k names in one directory). Fixed: `rename` asks for the entry's length less the
/// replaced entry's and (while it shares the bucket) the source's (`rename_target`).
#[test]
fn rename_that_adds_no_bytes_to_a_full_deepest_bucket_fails() {
    let mut sim = fresh(103);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    fs.create_dir("/c").unwrap();
    let names = colliding(40, 60, "k");
    let mut made = 0;
    for n in &names {
        match fs.create_dir(&format!("/c/{n}")) {
            Ok(()) => made += 1,
            Err(e) => {
                assert_eq!(e, Error::DirectoryFull);
                break;
            }
        }
    }
    assert!(made > 3 && made < names.len(), "setup: {made} names fit");
    let p = |i: usize| format!("/c/{}", names[i]);
    let over = fs.rename(&p(1), &p(2));
    let same = fs.rename(&p(0), &p(made));
    let n = fs.read_dir("/c").unwrap().count();
    assert_eq!(
        (over, same, n),
        (Ok(()), Ok(()), made - 1),
        "renames that add nothing to a full deepest bucket"
    );
}

// ---------------------------------------------------------------------------------
// Probes (hold)

/// Every path-taking call refuses bad paths with the right `PathError`, and nothing
/// is created; names of exactly `NAME_MAX` bytes (ASCII, 2-byte and 4-byte UTF-8)
/// work end to end (create, list, rename, staged inline rewrite, remount, crash);
/// one byte more is `NameTooLong`, including a multi-byte character that crosses
/// the limit.
#[test]
fn probe_paths_and_name_length_boundaries() {
    let mut sim = fresh(110);
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        fs.create_dir("/d").unwrap();
        write_file(&mut fs, "/d/f", b"f");
        let bad: &[(&str, PathError)] = &[
            ("", PathError::NotAbsolute),
            ("d", PathError::NotAbsolute),
            ("//d", PathError::EmptyComponent),
            ("/d/", PathError::EmptyComponent),
            ("/d//f", PathError::EmptyComponent),
            ("/.", PathError::DotComponent),
            ("/..", PathError::DotComponent),
            ("/d/../d", PathError::DotComponent),
            ("/d/\0", PathError::Nul),
            ("/d/a\0b", PathError::Nul),
        ];
        for &(p, pe) in bad {
            assert_eq!(fs.create_dir(p), Err(Error::Path(pe)), "{p:?}");
            assert_eq!(fs.open(p, create()).err(), Some(Error::Path(pe)), "{p:?}");
            assert_eq!(fs.metadata(p).err(), Some(Error::Path(pe)), "{p:?}");
            assert_eq!(fs.set_attributes(p, b"x"), Err(Error::Path(pe)), "{p:?}");
            assert_eq!(fs.remove(p), Err(Error::Path(pe)), "{p:?}");
            assert_eq!(fs.remove_dir(p), Err(Error::Path(pe)), "{p:?}");
            assert_eq!(fs.rename(p, "/z"), Err(Error::Path(pe)), "{p:?}");
            assert_eq!(fs.rename("/d/f", p), Err(Error::Path(pe)), "{p:?}");
            assert_eq!(fs.read_dir(p).err(), Some(Error::Path(pe)), "{p:?}");
            assert_eq!(fs.location(p).err(), Some(Error::Path(pe)), "{p:?}");
        }
        let root = || Error::Path(PathError::Root);
        assert_eq!(fs.create_dir("/"), Err(root()));
        assert_eq!(fs.open("/", create()).err(), Some(root()));
        assert_eq!(fs.set_attributes("/", b"x"), Err(root()));
        assert_eq!(fs.rename("/", "/x"), Err(root()));
        assert_eq!(fs.rename("/d", "/"), Err(root()));
        assert_eq!(fs.metadata("/").unwrap().kind, Kind::Dir);
        let long = || Error::Path(PathError::NameTooLong);
        let over = [
            "a".repeat(NAME_MAX + 1),
            format!("{}é", "a".repeat(NAME_MAX - 1)), // 65 bytes, 64 chars
            "é".repeat(NAME_MAX / 2 + 1),
            format!("{}😀", "a".repeat(NAME_MAX - 3)), // 65 bytes
        ];
        for n in &over {
            assert_eq!(fs.create_dir(&format!("/d/{n}")), Err(long()), "{n}");
            assert_eq!(
                fs.open(&format!("/d/{n}"), create()).err(),
                Some(long()),
                "{n}"
            );
            assert_eq!(fs.rename("/d/f", &format!("/d/{n}")), Err(long()), "{n}");
        }
        let names: Vec<(String, Kind)> = fs
            .read_dir("/d")
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.name().to_string(), e.kind)
            })
            .collect();
        assert_eq!(
            names,
            vec![("f".to_string(), Kind::File)],
            "failures created nothing"
        );
        // Exactly NAME_MAX bytes.
        let max = [
            "a".repeat(NAME_MAX),
            "é".repeat(NAME_MAX / 2),
            "😀".repeat(NAME_MAX / 4),
            format!("{}😀", "b".repeat(NAME_MAX - 4)),
        ];
        for (i, n) in max.iter().enumerate() {
            assert_eq!(n.len(), NAME_MAX);
            let dir = format!("/d/{n}");
            fs.create_dir(&dir).unwrap();
            let file = format!("{dir}/{n}");
            write_file(&mut fs, &file, &pattern(i as u32, 200));
            fs.set_attributes(&file, &[i as u8; ATTR_MAX]).unwrap();
            // A staged inline rewrite under the longest name.
            let f = fs.open(&file, rw()).unwrap();
            fs.write(f, &pattern(i as u32 + 10, INLINE_MAX)).unwrap();
            fs.close(f).unwrap();
        }
    }
    crash(&mut sim);
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    let max = [
        "a".repeat(NAME_MAX),
        "é".repeat(NAME_MAX / 2),
        "😀".repeat(NAME_MAX / 4),
        format!("{}😀", "b".repeat(NAME_MAX - 4)),
    ];
    for (i, n) in max.iter().enumerate() {
        let file = format!("/d/{n}/{n}");
        assert_eq!(
            read_all(&mut fs, &file),
            pattern(i as u32 + 10, INLINE_MAX),
            "{n}"
        );
        let m = fs.metadata(&file).unwrap();
        assert_eq!(
            (m.size, m.attributes()),
            (INLINE_MAX as u64, &[i as u8; ATTR_MAX][..])
        );
    }
    let mut listed: Vec<String> = fs
        .read_dir("/d")
        .unwrap()
        .map(|e| e.unwrap().name().to_string())
        .collect();
    listed.sort();
    let mut want: Vec<String> = max.to_vec();
    want.push("f".into());
    want.sort();
    assert_eq!(listed, want);
}

/// Seeks and sizes at the extremes: huge and negative positions, a file grown to the
/// store's largest object size (sparse), writes at its last byte and one past it.
#[test]
fn probe_seek_and_size_extremes() {
    let mut sim = fresh(111);
    let max;
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        max = stagefs_core::Store::max_object_size(fs.store());
        write_file(&mut fs, "/s", b"small");
        let f = fs.open("/s", rw()).unwrap();
        assert_eq!(fs.seek(f, SeekFrom::End(i64::MIN)), Err(Error::TooLarge));
        assert_eq!(fs.seek(f, SeekFrom::End(-6)), Err(Error::TooLarge));
        assert_eq!(fs.seek(f, SeekFrom::End(-5)), Ok(0));
        assert_eq!(fs.seek(f, SeekFrom::Current(-1)), Err(Error::TooLarge));
        assert_eq!(fs.seek(f, SeekFrom::Start(u64::MAX)), Ok(u64::MAX));
        assert_eq!(fs.seek(f, SeekFrom::Current(1)), Err(Error::TooLarge));
        assert_eq!(
            fs.seek(f, SeekFrom::Current(i64::MIN)),
            Ok(u64::MAX - (1u64 << 63))
        );
        fs.seek(f, SeekFrom::Start(u64::MAX)).unwrap();
        assert_eq!(fs.read(f, &mut [0; 8]), Ok(0));
        assert_eq!(fs.write(f, b"x"), Err(Error::TooLarge));
        assert_eq!(fs.seek(f, SeekFrom::Start(max)), Ok(max));
        assert_eq!(fs.write(f, b"x"), Err(Error::TooLarge));
        assert_eq!(fs.truncate(f, max + 1), Err(Error::TooLarge));
        assert_eq!(fs.truncate(f, u64::MAX), Err(Error::TooLarge));
        assert_eq!(fs.len(f), Ok(5), "failed calls changed the size");
        // Grow to the largest size, write its last byte.
        fs.truncate(f, max).unwrap();
        fs.seek(f, SeekFrom::Start(max - 1)).unwrap();
        assert_eq!(fs.write(f, b"z"), Ok(1));
        assert_eq!(fs.write(f, b"z"), Err(Error::TooLarge));
        fs.fsync(f).unwrap();
        fs.seek(f, SeekFrom::End(-3)).unwrap();
        let mut b = [9u8; 8];
        assert_eq!(fs.read(f, &mut b), Ok(3));
        assert_eq!(&b[..3], b"\0\0z");
        fs.close(f).unwrap();
        assert_eq!(fs.metadata("/s").unwrap().size, max);
    }
    crash(&mut sim);
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    assert_eq!(fs.metadata("/s").unwrap().size, max);
    let f = fs.open("/s", OpenOptions::new().read(true)).unwrap();
    let mut b = [9u8; 8];
    assert_eq!(fs.read(f, &mut b), Ok(8));
    assert_eq!(&b, b"small\0\0\0");
    fs.seek(f, SeekFrom::Start(max / 2)).unwrap();
    assert_eq!(fs.read(f, &mut b), Ok(8));
    assert_eq!(b, [0; 8]);
    fs.seek(f, SeekFrom::End(-1)).unwrap();
    assert_eq!(fs.read(f, &mut b), Ok(1));
    assert_eq!(b[0], b'z');
    fs.close(f).unwrap();
    fs.remove("/s").unwrap();
    fs.step_all().unwrap();
    assert_eq!(fs.metadata("/s"), Err(Error::NotFound));
}

/// Handles: every flag combination's refusals, double close, use after close, the
/// table exhausted, handles across `unmount`/`mount`/`format` of the same `Fs`, Busy
/// for the second open / remove / rename of an open file, an open file whose parent
/// directory is renamed (the handle follows it), `remove_dir` of that directory.
#[test]
fn probe_handle_misuse_and_lifetimes() {
    let mut sim = fresh(112);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    fs.create_dir("/d").unwrap();
    write_file(&mut fs, "/d/f", b"hello");
    // Flags: without write, create / create_new / truncate / nothing are refused.
    let none = OpenOptions::new();
    for o in [
        none,
        none.read(true).create(true),
        none.read(true).create_new(true),
        none.read(true).truncate(true),
        none.create(true),
    ] {
        assert_eq!(fs.open("/d/f", o).err(), Some(Error::Access), "{o:?}");
        assert_eq!(fs.open("/d/new", o).err(), Some(Error::Access), "{o:?}");
    }
    assert_eq!(fs.metadata("/d/new"), Err(Error::NotFound));
    assert_eq!(
        fs.open("/d/f", create().create_new(true)).err(),
        Some(Error::Exists)
    );
    assert_eq!(fs.open("/d/nope", rw()).err(), Some(Error::NotFound));
    assert_eq!(
        fs.open("/d/f/x", create()).err(),
        Some(Error::NotADirectory)
    );
    assert_eq!(fs.open("/d", rw()).err(), Some(Error::IsADirectory));
    // Append only (implies write): writes go to the end whatever the position.
    let a = fs.open("/d/f", OpenOptions::new().append(true)).unwrap();
    fs.seek(a, SeekFrom::Start(1)).unwrap();
    assert_eq!(fs.write(a, b"!"), Ok(1));
    assert_eq!(fs.read(a, &mut [0; 4]), Err(Error::Access));
    assert_eq!(fs.seek(a, SeekFrom::Current(0)), Ok(6));
    // Second open, remove, rename of the open file: Busy.
    assert_eq!(
        fs.open("/d/f", OpenOptions::new().read(true)).err(),
        Some(Error::Busy)
    );
    assert_eq!(fs.remove("/d/f"), Err(Error::Busy));
    assert_eq!(fs.rename("/d/f", "/d/g"), Err(Error::Busy));
    write_file(&mut fs, "/g", b"g");
    assert_eq!(fs.rename("/g", "/d/f"), Err(Error::Busy));
    assert_eq!(fs.rename("/d/f", "/d/f"), Err(Error::Busy));
    assert_eq!(fs.remove_dir("/d"), Err(Error::NotEmpty));
    // The parent directory renamed: the handle follows the file.
    fs.rename("/d", "/e").unwrap();
    assert_eq!(fs.write(a, b"?"), Ok(1));
    assert_eq!(
        fs.metadata("/e/f").unwrap().size,
        7,
        "size through the open handle"
    );
    fs.close(a).unwrap();
    assert_eq!(fs.close(a), Err(Error::BadHandle));
    assert_eq!(fs.write(a, b"x"), Err(Error::BadHandle));
    assert_eq!(fs.fsync(a), Err(Error::BadHandle));
    assert_eq!(fs.seek(a, SeekFrom::Start(0)), Err(Error::BadHandle));
    assert_eq!(fs.truncate(a, 0), Err(Error::BadHandle));
    assert_eq!(fs.len(a), Err(Error::BadHandle));
    assert_eq!(read_all(&mut fs, "/e/f"), b"hello!?");
    // A closed handle does not name the next open of its slot.
    let b = fs.open("/g", rw()).unwrap();
    assert_eq!(fs.write(a, b"x"), Err(Error::BadHandle));
    fs.close(b).unwrap();
    // The table exhausted: TooManyOpen, and nothing created.
    let hs: Vec<_> = (0..4)
        .map(|i| fs.open(&format!("/h{i}"), create()).unwrap())
        .collect();
    assert_eq!(fs.open("/h9", create()).err(), Some(Error::TooManyOpen));
    assert_eq!(fs.open("/h0", create()).err(), Some(Error::TooManyOpen));
    assert_eq!(fs.metadata("/h9"), Err(Error::NotFound));
    fs.write(hs[0], b"zero").unwrap();
    // Unmount commits open handles; afterwards they are stale in this Fs.
    fs.unmount().unwrap();
    for &h in &hs {
        assert_eq!(fs.write(h, b"x"), Err(Error::BadHandle));
    }
    fs.mount().unwrap();
    for &h in &hs {
        assert_eq!(fs.write(h, b"x"), Err(Error::BadHandle));
        assert_eq!(fs.close(h), Err(Error::BadHandle));
    }
    assert_eq!(read_all(&mut fs, "/h0"), b"zero");
    // Mount while mounted, format while mounted: old handles are stale.
    let h = fs.open("/h0", rw()).unwrap();
    fs.mount().unwrap();
    assert_eq!(fs.write(h, b"x"), Err(Error::BadHandle));
    let h = fs.open("/h0", rw()).unwrap();
    fs.format().unwrap();
    assert_eq!(fs.write(h, b"x"), Err(Error::BadHandle));
    assert_eq!(fs.metadata("/h0"), Err(Error::NotFound));
    let names: Vec<_> = fs.read_dir("/").unwrap().collect();
    assert!(names.is_empty());
}

/// The `embedded-io` and `std::io` views: partial reads at the end, `read_to_end`,
/// `read_exact` past the end, seeks from the end and the current position (negative
/// too, and before the start), `write_all` and `flush` (an fsync: survives a cut).
#[test]
fn probe_io_views() {
    let mut sim = fresh(113);
    let data = pattern(7, 3000);
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        let f = fs.open("/v", create()).unwrap();
        {
            use std::io::{Read as _, Seek as _, Write as _};
            let mut v = fs.view(f);
            v.write_all(&data[..100]).unwrap();
            v.write_all(&data[100..]).unwrap();
            v.flush().unwrap();
            assert_eq!(v.seek(std::io::SeekFrom::End(-10)).unwrap(), 2990);
            let mut b = [0u8; 64];
            assert_eq!(v.read(&mut b).unwrap(), 10, "partial read at the end");
            assert_eq!(&b[..10], &data[2990..]);
            assert_eq!(v.read(&mut b).unwrap(), 0);
            v.seek(std::io::SeekFrom::Current(-20)).unwrap();
            let mut b = [0u8; 30];
            let e = v.read_exact(&mut b).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
            let e = v.seek(std::io::SeekFrom::Current(-4000)).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
            let e = v.seek(std::io::SeekFrom::End(-3001)).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
            v.rewind().unwrap();
            let mut all = Vec::new();
            v.read_to_end(&mut all).unwrap();
            assert_eq!(all, data);
            assert_eq!(v.stream_position().unwrap(), 3000);
            // Past the end, then a write: a zero gap.
            v.seek(std::io::SeekFrom::End(5)).unwrap();
            v.write_all(b"tail").unwrap();
            v.flush().unwrap();
        }
        {
            use embedded_io::{Read as _, Seek as _, Write as _};
            let mut v = fs.view(f);
            assert_eq!(v.seek(embedded_io::SeekFrom::End(-4)).unwrap(), 3005);
            let mut b = [0u8; 16];
            assert_eq!(v.read(&mut b).unwrap(), 4);
            assert_eq!(&b[..4], b"tail");
            assert_eq!(v.read(&mut b).unwrap(), 0);
            assert!(matches!(
                v.read_exact(&mut b),
                Err(embedded_io::ReadExactError::UnexpectedEof)
            ));
            assert_eq!(
                v.seek(embedded_io::SeekFrom::Current(-3010)),
                Err(Error::TooLarge)
            );
            assert_eq!(
                embedded_io::Error::kind(&Error::<nand_hal::sim::SimError>::TooLarge),
                embedded_io::ErrorKind::InvalidInput
            );
            v.seek(embedded_io::SeekFrom::Start(0)).unwrap();
            v.write_all(b"HEAD").unwrap();
            v.flush().unwrap();
        }
        // A read-only view refuses writes with PermissionDenied.
        {
            use std::io::{Read as _, Write as _};
            fs.close(f).unwrap();
            let r = fs.open("/v", OpenOptions::new().read(true)).unwrap();
            let e = fs.view(r).write(b"x").unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
            fs.close(r).unwrap();
            let e = fs.view(r).read(&mut [0; 4]).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "closed handle");
        }
    }
    crash(&mut sim);
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    let mut want = data.clone();
    want[..4].copy_from_slice(b"HEAD");
    want.extend([0; 5]);
    want.extend(b"tail");
    assert_eq!(read_all(&mut fs, "/v"), want);
}

/// Sizes around the inline limit and the page, written directly, by truncate, by
/// append across the limit, and by `truncate`-on-open back below it; sizes,
/// `location` (inline: no object) and contents after remount and after a cut.
#[test]
fn probe_inline_and_page_boundaries() {
    let mut sim = fresh(114);
    let sizes = [0usize, 1, 255, 256, 257, 2047, 2048, 2049, 4096, 4097];
    let mut want = std::collections::BTreeMap::new();
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        for &n in &sizes {
            let d = pattern(n as u32, n);
            write_file(&mut fs, &format!("/w{n}"), &d);
            want.insert(format!("/w{n}"), d);
            // By truncate from an inline 10 bytes.
            let p = format!("/t{n}");
            let f = fs.open(&p, create()).unwrap();
            fs.write(f, &[1; 10]).unwrap();
            fs.truncate(f, n as u64).unwrap();
            fs.close(f).unwrap();
            let mut t = vec![1u8; 10.min(n)];
            t.resize(n, 0);
            want.insert(p, t);
        }
        // Append across the limit in 1-byte and 100-byte steps, with fsyncs.
        let f = fs.open("/app", create().append(true)).unwrap();
        let mut a = Vec::new();
        for i in 0..300u32 {
            let chunk = pattern(i, if i % 50 == 0 { 100 } else { 1 });
            fs.write(f, &chunk).unwrap();
            a.extend(chunk);
            if i % 7 == 0 {
                fs.fsync(f).unwrap();
            }
        }
        fs.close(f).unwrap();
        want.insert("/app".into(), a);
        // Back below the limit: truncate-on-open rewrites make them inline again.
        for &n in &[257usize, 4097] {
            let p = format!("/w{n}");
            write_file(&mut fs, &p, &pattern(99, INLINE_MAX));
            want.insert(p.clone(), pattern(99, INLINE_MAX));
            assert_eq!(fs.location(&p).unwrap().object, None, "{p} inline again");
        }
        for (p, d) in &want {
            assert_eq!(fs.metadata(p).unwrap().size, d.len() as u64, "{p}");
            assert_eq!(&read_all(&mut fs, p), d, "{p}");
        }
        assert_eq!(fs.location("/w256").unwrap().object, None);
        assert!(fs.location("/w2048").unwrap().object.is_some());
        fs.unmount().unwrap();
        fs.mount().unwrap();
        for (p, d) in &want {
            assert_eq!(&read_all(&mut fs, p), d, "{p} after remount");
        }
        // One more staged rewrite of an inline file at the limit, then a cut.
        let f = fs.open("/w256", rw()).unwrap();
        fs.write(f, &pattern(5, INLINE_MAX)).unwrap();
        fs.close(f).unwrap();
        want.insert("/w256".into(), pattern(5, INLINE_MAX));
    }
    crash(&mut sim);
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    for (p, d) in &want {
        assert_eq!(
            fs.metadata(p).unwrap().size,
            d.len() as u64,
            "{p} after cut"
        );
        assert_eq!(&read_all(&mut fs, p), d, "{p} after cut");
    }
}

/// A directory with 300 entries (splits), names of 1..=64 bytes, some removed and
/// renamed between listings: every listing names each entry exactly once. Then a
/// bucket at the deepest level filled with names that hash alike: the refusals
/// (`DirectoryFull` for create_dir, open-create, a rename in, a grown attribute)
/// change nothing, across a cut too, and the listing stays exact.
#[test]
fn probe_big_and_colliding_directories_list_exactly_once() {
    use std::collections::BTreeSet;
    let mut sim = fresh(115);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    fs.create_dir("/big").unwrap();
    let mut want = BTreeSet::new();
    for i in 0..300usize {
        let n = format!("{i}{}", "x".repeat(i % 62));
        if i % 3 == 0 {
            fs.create_dir(&format!("/big/{n}")).unwrap();
        } else {
            write_file(&mut fs, &format!("/big/{n}"), &pattern(i as u32, i % 300));
        }
        want.insert(n);
    }
    let list = |fs: &mut support::Vol<'_>, d: &str| -> Vec<String> {
        fs.read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().name().to_string())
            .collect()
    };
    let check = |got: Vec<String>, want: &BTreeSet<String>, ctx: &str| {
        let set: BTreeSet<String> = got.iter().cloned().collect();
        assert_eq!(got.len(), set.len(), "{ctx}: a name listed twice");
        assert_eq!(&set, want, "{ctx}");
    };
    check(list(&mut fs, "/big"), &want, "300");
    for i in (0..300usize).step_by(7) {
        let n = format!("{i}{}", "x".repeat(i % 62));
        if i % 3 == 0 {
            fs.remove_dir(&format!("/big/{n}")).unwrap();
        } else {
            fs.remove(&format!("/big/{n}")).unwrap();
        }
        want.remove(&n);
    }
    for i in (1..300usize).step_by(11) {
        let n = format!("{i}{}", "x".repeat(i % 62));
        if want.contains(&n) {
            let m = format!("r{i}");
            fs.rename(&format!("/big/{n}"), &format!("/big/{m}"))
                .unwrap();
            want.remove(&n);
            want.insert(m);
        }
    }
    check(list(&mut fs, "/big"), &want, "after removes and renames");
    // The deepest bucket, full.
    fs.create_dir("/c").unwrap();
    let names = colliding(40, 60, "q");
    let mut made = BTreeSet::new();
    let mut full_at = None;
    for (i, n) in names.iter().enumerate() {
        match fs.create_dir(&format!("/c/{n}")) {
            Ok(()) => {
                made.insert(n.clone());
            }
            Err(e) => {
                assert_eq!(e, Error::DirectoryFull);
                full_at = Some(i);
                break;
            }
        }
    }
    let k = full_at.expect("the bucket filled");
    let spare = &names[k];
    assert_eq!(
        fs.open(&format!("/c/{spare}"), create()).err(),
        Some(Error::DirectoryFull)
    );
    write_file(&mut fs, "/outside", b"o");
    assert_eq!(
        fs.rename("/outside", &format!("/c/{spare}")),
        Err(Error::DirectoryFull)
    );
    let first = made.iter().next().unwrap().clone();
    assert_eq!(
        fs.set_attributes(&format!("/c/{first}"), &[7; ATTR_MAX]),
        Err(Error::DirectoryFull)
    );
    check(list(&mut fs, "/c"), &made, "full bucket");
    drop(fs);
    crash(&mut sim);
    let mut fs = vol(&mut sim);
    fs.mount().unwrap();
    check(list(&mut fs, "/c"), &made, "full bucket after a cut");
    check(list(&mut fs, "/big"), &want, "big after a cut");
    assert_eq!(read_all(&mut fs, "/outside"), b"o");
    assert_eq!(
        fs.metadata(&format!("/c/{first}")).unwrap().attributes(),
        b""
    );
    // Room again after a remove.
    fs.remove_dir(&format!("/c/{first}")).unwrap();
    fs.create_dir(&format!("/c/{spare}")).unwrap();
}

// ---------------------------------------------------------------------------------
// A cut at every program/erase of a script of edge-case calls (longest unicode
// names, attributes, a directory renamed with an open file inside, growth to an
// object by truncate, truncate-on-open back to inline, removal): after the cut the
// volume shows the state after the last call that returned, or after the one in
// progress (every call of the script that changes the state is durable on return).

#[derive(Clone, Copy, Debug)]
enum Step {
    Mkdir(&'static str),
    Open(&'static str, bool),
    W(usize, u32),
    Fsync,
    Close,
    Trunc(u64),
    Attr(&'static str, u8),
    Rename(&'static str, &'static str),
    Remove(&'static str),
    Rmdir(&'static str),
}

/// Path aliases: `U` is 32 "é" (64 bytes), `E` 16 emoji (64 bytes).
fn expand(p: &str) -> String {
    p.replace('U', &"é".repeat(32))
        .replace('E', &"😀".repeat(16))
}

type Snap = std::collections::BTreeMap<String, (Option<Vec<u8>>, Vec<u8>)>;

fn snap(fs: &mut support::Vol<'_>) -> Result<Snap, Error<nand_hal::sim::SimError>> {
    let mut t = Snap::new();
    let mut dirs = vec!["/".to_string()];
    while let Some(d) = dirs.pop() {
        let mut list = Vec::new();
        for e in fs.read_dir(&d)? {
            let e = e?;
            let p = if d == "/" {
                format!("/{}", e.name())
            } else {
                format!("{d}/{}", e.name())
            };
            list.push((p, e.kind));
        }
        for (p, kind) in list {
            let attrs = fs.metadata(&p)?.attributes().to_vec();
            if kind == Kind::Dir {
                dirs.push(p.clone());
                t.insert(p, (None, attrs));
            } else {
                let f = fs.open(&p, OpenOptions::new().read(true))?;
                let mut data = Vec::new();
                let mut buf = [0u8; 1000];
                loop {
                    let n = fs.read(f, &mut buf)?;
                    if n == 0 {
                        break;
                    }
                    data.extend_from_slice(&buf[..n]);
                }
                fs.close(f)?;
                t.insert(p, (Some(data), attrs));
            }
        }
    }
    Ok(t)
}

fn script() -> Vec<Step> {
    use Step::*;
    vec![
        Mkdir("/d"),
        Mkdir("/d/U"),
        Open("/d/U/f", true),
        W(INLINE_MAX, 1),
        Fsync,
        Rename("/d/U", "/E"),
        Attr("/E/f", ATTR_MAX as u8),
        W(10, 2),
        Trunc(5000),
        Trunc(INLINE_MAX as u64 + 1),
        Close,
        Attr("/E", 3),
        Open("/E/f", false),
        W(100, 3),
        Close,
        Rename("/E", "/d/U"),
        Mkdir("/d/E"),
        Rename("/d/U/f", "/d/E/f"),
        Remove("/d/E/f"),
        Rmdir("/d/U"),
        Rename("/d/E", "/d/U"),
    ]
}

/// Runs the script. With `take`, the states after each call: `(state, durable)`.
/// A call that changes the state durably on return gives `durable`; a write gives
/// the state with it applied, which a cut may show or not (docs: "plus possibly some
/// of the writes made since"); an open with `truncate` changes nothing durable until
/// the close. On a cut: the number of calls that returned.
type ScriptCut = (usize, Error<nand_hal::sim::SimError>);

fn run_script(fs: &mut support::Vol<'_>, take: bool) -> Result<Vec<(Snap, bool)>, ScriptCut> {
    let mut h = None;
    let mut snaps = Vec::new();
    if take {
        snaps.push((snap(fs).unwrap(), true));
    }
    for (done, s) in script().into_iter().enumerate() {
        let r = match s {
            Step::Mkdir(p) => fs.create_dir(&expand(p)),
            Step::Open(p, new) => {
                let o = if new { create() } else { rw().truncate(true) };
                fs.open(&expand(p), o).map(|f| {
                    h = Some(f);
                })
            }
            Step::W(n, seed) => fs.write(h.unwrap(), &pattern(seed, n)).map(|_| ()),
            Step::Fsync => fs.fsync(h.unwrap()),
            Step::Close => fs.close(h.unwrap()),
            Step::Trunc(n) => fs.truncate(h.unwrap(), n),
            Step::Attr(p, n) => fs.set_attributes(&expand(p), &vec![n; n as usize]),
            Step::Rename(a, b) => fs.rename(&expand(a), &expand(b)),
            Step::Remove(p) => fs.remove(&expand(p)),
            Step::Rmdir(p) => fs.remove_dir(&expand(p)),
        };
        if let Err(e) = r {
            return Err((done, e));
        }
        if take {
            let st = match s {
                Step::Open(_, false) => snaps.last().unwrap().0.clone(),
                _ => snap_busy(fs, h),
            };
            snaps.push((st, !matches!(s, Step::W(..))));
        }
    }
    Ok(snaps)
}

/// `snap` while the script's handle may be open: its file is read through the handle.
fn snap_busy(fs: &mut support::Vol<'_>, h: Option<stagefs_core::File>) -> Snap {
    match h.map(|f| fs.len(f)) {
        Some(Ok(_)) => {
            // The open file: read through its handle, position restored.
            let f = h.unwrap();
            let pos = fs.seek(f, SeekFrom::Current(0)).unwrap();
            fs.seek(f, SeekFrom::Start(0)).unwrap();
            let mut t = Snap::new();
            let mut dirs = vec!["/".to_string()];
            while let Some(d) = dirs.pop() {
                let list: Vec<_> = fs.read_dir(&d).unwrap().map(|e| e.unwrap()).collect();
                for e in list {
                    let p = if d == "/" {
                        format!("/{}", e.name())
                    } else {
                        format!("{d}/{}", e.name())
                    };
                    let attrs = fs.metadata(&p).unwrap().attributes().to_vec();
                    if e.kind == Kind::Dir {
                        dirs.push(p.clone());
                        t.insert(p, (None, attrs));
                    } else {
                        let data = match fs.open(&p, OpenOptions::new().read(true)) {
                            Ok(g) => {
                                let mut v = vec![0u8; 10_000];
                                let n = fs.read(g, &mut v).unwrap();
                                v.truncate(n);
                                fs.close(g).unwrap();
                                v
                            }
                            Err(Error::Busy) => {
                                let mut v = vec![0u8; 10_000];
                                let mut n = 0;
                                loop {
                                    let k = fs.read(f, &mut v[n..]).unwrap();
                                    if k == 0 {
                                        break;
                                    }
                                    n += k;
                                }
                                v.truncate(n);
                                v
                            }
                            Err(e) => panic!("{e:?}"),
                        };
                        t.insert(p, (Some(data), attrs));
                    }
                }
            }
            fs.seek(f, SeekFrom::Start(pos)).unwrap();
            t
        }
        _ => snap(fs).unwrap(),
    }
}

#[test]
fn probe_cut_sweep_over_edge_case_calls() {
    let mut base = fresh(116);
    {
        let mut fs = vol(&mut base);
        fs.format().unwrap();
        fs.unmount().unwrap();
    }
    // Uncut: the snapshots, and the ops count.
    let (snaps, n) = {
        let mut s = base.clone();
        s.arm(FaultPlan::seeded(1));
        let snaps = {
            let mut fs = vol(&mut s);
            fs.mount().unwrap();
            run_script(&mut fs, true).unwrap()
        };
        let mut c = base.clone();
        c.arm(FaultPlan::seeded(1));
        {
            let mut fs = vol(&mut c);
            fs.mount().unwrap();
            run_script(&mut fs, false).unwrap();
        }
        (snaps, c.ops_since_arm())
    };
    assert!(n > 20, "{n} ops");
    let mut fails = Vec::new();
    for at in 1..=n + 1 {
        for kind in [CutKind::Clean, CutKind::Torn(TornMode::Random)] {
            let mut s = base.clone();
            s.arm(FaultPlan::seeded(at * 13 + 5).with_cut(at, kind));
            let done = {
                let mut fs = vol(&mut s);
                match fs.mount() {
                    Ok(()) => match run_script(&mut fs, false) {
                        Ok(_) => snaps.len() - 1,
                        Err((d, e)) => {
                            assert!(power_loss(&e), "cut {at} {kind:?}: {e:?} not the cut");
                            d
                        }
                    },
                    Err(e) if power_loss(&e) => 0,
                    Err(e) => panic!("cut {at}: first mount {e:?}"),
                }
            };
            crash(&mut s);
            s.disarm();
            let mut fs = vol(&mut s);
            if let Err(e) = fs.mount() {
                fails.push(format!("cut {at} {kind:?}: mount {e:?}"));
                continue;
            }
            let got = snap(&mut fs).unwrap();
            // From the last durable state reached through the call in progress.
            let from = (0..=done).rev().find(|&k| snaps[k].1).unwrap();
            let to = (done + 1).min(snaps.len() - 1);
            let ok = snaps[from..=to].iter().any(|(st, _)| *st == got);
            if !ok {
                fails.push(format!(
                    "cut {at} {kind:?} after {done} calls: {:?}",
                    got.iter()
                        .map(|(k, v)| (k.clone(), v.0.as_ref().map(|d| d.len()), v.1.len()))
                        .collect::<Vec<_>>()
                ));
            }
        }
    }
    assert!(
        fails.is_empty(),
        "{} of {} cuts:\n{}",
        fails.len(),
        2 * (n + 1),
        fails.join("\n")
    );
}
// Model-based walk over the public API (no cuts): every call's result is predicted.

use std::collections::BTreeMap;

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
}

#[derive(Clone, Debug, PartialEq)]
enum N {
    Dir(Vec<u8>),
    File(Vec<u8>, Vec<u8>),
}

#[derive(Clone, Debug)]
struct H {
    f: stagefs_core::File,
    path: String,
    read: bool,
    write: bool,
    append: bool,
    pos: u64,
}

fn parent_of(p: &str) -> &str {
    let i = p.rfind('/').unwrap();
    if i == 0 {
        "/"
    } else {
        &p[..i]
    }
}

fn join(d: &str, n: &str) -> String {
    if d == "/" {
        format!("/{n}")
    } else {
        format!("{d}/{n}")
    }
}

fn is_dir(m: &BTreeMap<String, N>, p: &str) -> bool {
    p == "/" || matches!(m.get(p), Some(N::Dir(_)))
}

/// The error a walk to `p`'s parent gives, if any (model).
fn parent_err(m: &BTreeMap<String, N>, p: &str) -> Option<Error<E>> {
    // Walk components of the parent.
    let par = parent_of(p);
    if par == "/" {
        return None;
    }
    let mut cur = String::new();
    for c in par[1..].split('/') {
        cur = format!("{cur}/{c}");
        match m.get(&cur) {
            None => return Some(Error::NotFound),
            Some(N::File(..)) => return Some(Error::NotADirectory),
            Some(N::Dir(_)) => {}
        }
    }
    None
}

type E = nand_hal::sim::SimError;

fn model_walk(seed: u64, steps: usize) {
    use embedded_io::{Read as _, Seek as _, Write as _};
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut sim = fresh(500 + seed);
    let mut fs = vol(&mut sim);
    fs.format().unwrap();
    let mut m: BTreeMap<String, N> = BTreeMap::new();
    let long = "L".repeat(NAME_MAX);
    let uni = "é".repeat(NAME_MAX / 2);
    let names: Vec<String> = vec![
        "a".into(),
        "b".into(),
        "c d".into(),
        long.clone(),
        uni.clone(),
        "x.txt".into(),
    ];
    // A crowded directory (splits), with short and long names.
    fs.create_dir("/big").unwrap();
    m.insert("/big".into(), N::Dir(vec![]));
    for i in 0..180 {
        let name = if i % 7 == 0 {
            format!("{i:0>60}")
        } else {
            format!("n{i}")
        };
        let p = format!("/big/{name}");
        let data = pattern(i, (i as usize * 13) % 600);
        write_file(&mut fs, &p, &data);
        m.insert(p, N::File(data, vec![]));
    }
    let mut hs: Vec<H> = Vec::new();
    let mut stats = BTreeMap::<&'static str, u32>::new();
    for step in 0..steps {
        let ctx = format!("seed {seed} step {step}");
        // A random path: among existing dirs + a name.
        let dirs: Vec<String> = std::iter::once("/".to_string())
            .chain(
                m.iter()
                    .filter(|(_, n)| matches!(n, N::Dir(_)))
                    .map(|(k, _)| k.clone()),
            )
            .collect();
        let rand_path = |rng: &mut Rng| -> String {
            let d = dirs[rng.below(dirs.len() as u64) as usize].clone();
            if d == "/big" && rng.below(2) == 0 {
                let i = rng.below(200);
                let name = if i % 7 == 0 {
                    format!("{i:0>60}")
                } else {
                    format!("n{i}")
                };
                return join(&d, &name);
            }
            join(&d, &names[rng.below(names.len() as u64) as usize])
        };
        let k = rng.below(100);
        match k {
            0..=9 => {
                let p = rand_path(&mut rng);
                let (read, write, append, create, create_new, truncate) = (
                    rng.below(4) != 0,
                    rng.below(3) != 0,
                    rng.below(5) == 0,
                    rng.below(2) == 0,
                    rng.below(6) == 0,
                    rng.below(5) == 0,
                );
                let o = OpenOptions::new()
                    .read(read)
                    .write(write)
                    .append(append)
                    .create(create)
                    .create_new(create_new)
                    .truncate(truncate);
                let w = write || append;
                let want: Result<(), Error<E>> =
                    if !w && (create || create_new || truncate || !read) {
                        Err(Error::Access)
                    } else if let Some(e) = parent_err(&m, &p) {
                        Err(e)
                    } else if hs.len() == 4 {
                        Err(Error::TooManyOpen)
                    } else if hs.iter().any(|h| h.path == p) {
                        Err(Error::Busy)
                    } else {
                        match m.get(&p) {
                            Some(_) if create_new => Err(Error::Exists),
                            Some(N::Dir(_)) => Err(Error::IsADirectory),
                            Some(N::File(..)) => Ok(()),
                            None if create || create_new => Ok(()),
                            None => Err(Error::NotFound),
                        }
                    };
                let r = fs.open(&p, o);
                match (r, want) {
                    (Ok(f), Ok(())) => {
                        *stats.entry("open_ok").or_default() += 1;
                        let e = m.entry(p.clone()).or_insert(N::File(vec![], vec![]));
                        if truncate {
                            if let N::File(d, _) = e {
                                d.clear();
                            }
                        }
                        hs.push(H {
                            f,
                            path: p,
                            read,
                            write: w,
                            append,
                            pos: 0,
                        });
                    }
                    (Err(e), Err(w)) => assert_eq!(e, w, "{ctx} open {p} {o:?}"),
                    (r, w) => panic!("{ctx} open {p} {o:?}: got {r:?} want {w:?}"),
                }
            }
            10..=29 => {
                if hs.is_empty() {
                    continue;
                }
                let i = rng.below(hs.len() as u64) as usize;
                let n = if rng.below(4) == 0 {
                    1 + rng.below(3000)
                } else {
                    1 + rng.below(120)
                } as usize;
                let data = pattern(rng.next() as u32, n);
                let h = hs[i].clone();
                let r = if rng.below(3) == 0 {
                    let mut v = fs.view(h.f);
                    v.write(&data)
                } else {
                    fs.write(h.f, &data)
                };
                if !h.write {
                    assert_eq!(r, Err(Error::Access), "{ctx}");
                    continue;
                }
                assert_eq!(r, Ok(n), "{ctx} write {}", h.path);
                *stats.entry("write_ok").or_default() += 1;
                let N::File(d, _) = m.get_mut(&h.path).unwrap() else {
                    panic!()
                };
                let at = if h.append { d.len() } else { h.pos as usize };
                if d.len() < at + n {
                    d.resize(at + n, 0);
                }
                d[at..at + n].copy_from_slice(&data);
                hs[i].pos = (at + n) as u64;
                assert_eq!(fs.len(h.f).unwrap(), d.len() as u64, "{ctx}");
            }
            30..=39 => {
                if hs.is_empty() {
                    continue;
                }
                let i = rng.below(hs.len() as u64) as usize;
                let h = hs[i].clone();
                let N::File(d, _) = &m[&h.path] else { panic!() };
                let mut buf = vec![0u8; 1 + rng.below(2500) as usize];
                let r = if rng.below(2) == 0 {
                    let mut v = fs.view(h.f);
                    v.read(&mut buf)
                } else {
                    fs.read(h.f, &mut buf)
                };
                if !h.read {
                    assert_eq!(r, Err(Error::Access), "{ctx}");
                    continue;
                }
                let n = r.unwrap_or_else(|e| panic!("{ctx} read: {e:?}"));
                let at = h.pos as usize;
                let avail = d.len().saturating_sub(at);
                assert!(
                    n <= buf.len() && n <= avail && (n > 0 || avail == 0),
                    "{ctx} read n {n} avail {avail}"
                );
                if n > 0 {
                    assert_eq!(&buf[..n], &d[at..at + n], "{ctx} read {} at {at}", h.path);
                }
                hs[i].pos += n as u64;
            }
            40..=47 => {
                if hs.is_empty() {
                    continue;
                }
                let i = rng.below(hs.len() as u64) as usize;
                let h = hs[i].clone();
                let N::File(d, _) = &m[&h.path] else { panic!() };
                let len = d.len() as i64;
                let (to, want) = match rng.below(3) {
                    0 => {
                        let p = rng.below(len as u64 + 600);
                        (SeekFrom::Start(p), Some(p as i64))
                    }
                    1 => {
                        let dlt = rng.below(len as u64 + 600) as i64 - len - 50;
                        (SeekFrom::End(dlt), Some(len + dlt))
                    }
                    _ => {
                        let dlt = rng.below(1200) as i64 - 600;
                        (SeekFrom::Current(dlt), Some(h.pos as i64 + dlt))
                    }
                };
                let r = if rng.below(2) == 0 {
                    let to = match to {
                        SeekFrom::Start(p) => embedded_io::SeekFrom::Start(p),
                        SeekFrom::End(p) => embedded_io::SeekFrom::End(p),
                        SeekFrom::Current(p) => embedded_io::SeekFrom::Current(p),
                    };
                    fs.view(h.f).seek(to)
                } else {
                    fs.seek(h.f, to)
                };
                match want {
                    Some(p) if p >= 0 => {
                        assert_eq!(r, Ok(p as u64), "{ctx} seek {to:?}");
                        hs[i].pos = p as u64;
                    }
                    _ => assert_eq!(r, Err(Error::TooLarge), "{ctx} seek {to:?}"),
                }
            }
            48..=52 => {
                if hs.is_empty() {
                    continue;
                }
                let i = rng.below(hs.len() as u64) as usize;
                let h = hs[i].clone();
                let size = match rng.below(4) {
                    0 => INLINE_MAX as u64,
                    1 => INLINE_MAX as u64 + 1,
                    2 => rng.below(300),
                    _ => rng.below(5000),
                };
                let r = fs.truncate(h.f, size);
                if !h.write {
                    assert_eq!(r, Err(Error::Access), "{ctx}");
                    continue;
                }
                r.unwrap_or_else(|e| panic!("{ctx} truncate: {e:?}"));
                let N::File(d, _) = m.get_mut(&h.path).unwrap() else {
                    panic!()
                };
                d.resize(size as usize, 0);
            }
            53..=60 => {
                if hs.is_empty() {
                    continue;
                }
                let i = rng.below(hs.len() as u64) as usize;
                let h = hs[i].clone();
                if rng.below(2) == 0 {
                    fs.close(h.f)
                        .unwrap_or_else(|e| panic!("{ctx} close: {e:?}"));
                    hs.remove(i);
                    assert_eq!(fs.close(h.f), Err(Error::BadHandle), "{ctx}");
                    assert_eq!(fs.len(h.f), Err(Error::BadHandle), "{ctx}");
                } else if rng.below(2) == 0 {
                    fs.fsync(h.f)
                        .unwrap_or_else(|e| panic!("{ctx} fsync: {e:?}"));
                } else {
                    fs.view(h.f)
                        .flush()
                        .unwrap_or_else(|e| panic!("{ctx} flush: {e:?}"));
                }
            }
            61..=66 => {
                let p = if rng.below(3) == 0 {
                    dirs[rng.below(dirs.len() as u64) as usize].clone()
                } else {
                    rand_path(&mut rng)
                };
                let attrs = pattern(rng.next() as u32, rng.below(ATTR_MAX as u64 + 2) as usize);
                let r = fs.set_attributes(&p, &attrs);
                let want = if attrs.len() > ATTR_MAX {
                    Err(Error::TooLarge)
                } else if p == "/" {
                    Err(Error::Path(PathError::Root))
                } else if let Some(e) = parent_err(&m, &p) {
                    Err(e)
                } else if !m.contains_key(&p) {
                    Err(Error::NotFound)
                } else {
                    Ok(())
                };
                assert_eq!(r, want, "{ctx} set_attributes {p}");
                if r.is_ok() {
                    match m.get_mut(&p).unwrap() {
                        N::Dir(a) | N::File(_, a) => *a = attrs,
                    }
                }
            }
            67..=72 => {
                let p = if rng.below(4) == 0 {
                    dirs[rng.below(dirs.len() as u64) as usize].clone()
                } else {
                    rand_path(&mut rng)
                };
                let r = fs.metadata(&p);
                if p == "/" {
                    let md = r.unwrap();
                    assert_eq!(
                        (md.kind, md.size, md.attributes()),
                        (Kind::Dir, 0, &[][..]),
                        "{ctx}"
                    );
                    continue;
                }
                if let Some(e) = parent_err(&m, &p) {
                    assert_eq!(r, Err(e), "{ctx} metadata {p}");
                    continue;
                }
                match m.get(&p) {
                    None => assert_eq!(r, Err(Error::NotFound), "{ctx} metadata {p}"),
                    Some(N::Dir(a)) => {
                        let md = r.unwrap();
                        assert_eq!(
                            (md.kind, md.size, md.attributes()),
                            (Kind::Dir, 0, &a[..]),
                            "{ctx} {p}"
                        );
                    }
                    Some(N::File(d, a)) => {
                        let md = r.unwrap();
                        assert_eq!(
                            (md.kind, md.size, md.attributes()),
                            (Kind::File, d.len() as u64, &a[..]),
                            "{ctx} {p}"
                        );
                    }
                }
            }
            73..=77 => {
                // Rename: files and dirs.
                let all: Vec<String> = m.keys().cloned().collect();
                let a = if rng.below(4) != 0 && !all.is_empty() {
                    all[rng.below(all.len() as u64) as usize].clone()
                } else {
                    rand_path(&mut rng)
                };
                let b = if rng.below(3) == 0 && !all.is_empty() {
                    all[rng.below(all.len() as u64) as usize].clone()
                } else {
                    rand_path(&mut rng)
                };
                let r = fs.rename(&a, &b);
                let want: Result<(), Error<E>> = (|| {
                    if let Some(e) = parent_err(&m, &a) {
                        return Err(e);
                    }
                    if let Some(e) = parent_err(&m, &b) {
                        return Err(e);
                    }
                    let Some(src) = m.get(&a) else {
                        return Err(Error::NotFound);
                    };
                    if hs.iter().any(|h| h.path == a || h.path == b) {
                        return Err(Error::Busy);
                    }
                    if a == b {
                        return Ok(());
                    }
                    if let N::Dir(_) = src {
                        if b.starts_with(&format!("{a}/")) {
                            return Err(Error::Path(PathError::IntoItself));
                        }
                    }
                    match (src, m.get(&b)) {
                        (_, None) => Ok(()),
                        (N::File(..), Some(N::File(..))) => Ok(()),
                        (N::File(..), Some(N::Dir(_))) => Err(Error::IsADirectory),
                        (N::Dir(_), Some(N::File(..))) => Err(Error::NotADirectory),
                        (N::Dir(_), Some(N::Dir(_))) => {
                            if m.keys().any(|k| k.starts_with(&format!("{b}/"))) {
                                Err(Error::NotEmpty)
                            } else {
                                Ok(())
                            }
                        }
                    }
                })();
                assert_eq!(r, want, "{ctx} rename {a} {b}");
                *stats
                    .entry(if r.is_ok() {
                        if matches!(m.get(&a), Some(N::Dir(_))) {
                            "rename_dir_ok"
                        } else {
                            "rename_ok"
                        }
                    } else {
                        "rename_err"
                    })
                    .or_default() += 1;
                if r.is_ok() && a != b {
                    m.remove(&b);
                    let moved: Vec<(String, N)> = m
                        .iter()
                        .filter(|(k, _)| **k == a || k.starts_with(&format!("{a}/")))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    for (k, v) in moved {
                        m.remove(&k);
                        m.insert(format!("{b}{}", &k[a.len()..]), v);
                    }
                    for h in hs.iter_mut() {
                        if h.path.starts_with(&format!("{a}/")) {
                            h.path = format!("{b}{}", &h.path[a.len()..]);
                        }
                    }
                }
            }
            78..=80 => {
                let p = rand_path(&mut rng);
                let r = fs.remove(&p);
                let want = if let Some(e) = parent_err(&m, &p) {
                    Err(e)
                } else {
                    match m.get(&p) {
                        None => Err(Error::NotFound),
                        Some(N::Dir(_)) => Err(Error::IsADirectory),
                        Some(_) if hs.iter().any(|h| h.path == p) => Err(Error::Busy),
                        Some(_) => Ok(()),
                    }
                };
                assert_eq!(r, want, "{ctx} remove {p}");
                if r.is_ok() {
                    m.remove(&p);
                }
            }
            81..=84 => {
                let p = rand_path(&mut rng);
                let rmd = rng.below(2) == 0;
                let r = if rmd {
                    fs.remove_dir(&p)
                } else {
                    fs.create_dir(&p)
                };
                let want = if let Some(e) = parent_err(&m, &p) {
                    Err(e)
                } else if rmd {
                    match m.get(&p) {
                        None => Err(Error::NotFound),
                        Some(N::File(..)) => Err(Error::NotADirectory),
                        Some(_) if m.keys().any(|k| k.starts_with(&format!("{p}/"))) => {
                            Err(Error::NotEmpty)
                        }
                        Some(_) => Ok(()),
                    }
                } else if m.contains_key(&p) {
                    Err(Error::Exists)
                } else {
                    Ok(())
                };
                assert_eq!(
                    r,
                    want,
                    "{ctx} {} {p}",
                    if rmd { "remove_dir" } else { "create_dir" }
                );
                if r.is_ok() {
                    if rmd {
                        m.remove(&p);
                    } else {
                        m.insert(p, N::Dir(vec![]));
                    }
                }
            }
            85..=89 => {
                let d = dirs[rng.below(dirs.len() as u64) as usize].clone();
                let mut got: Vec<(String, Kind)> = fs
                    .read_dir(&d)
                    .unwrap_or_else(|e| panic!("{ctx} read_dir {d}: {e:?}"))
                    .map(|e| {
                        let e = e.unwrap();
                        (e.name().to_string(), e.kind)
                    })
                    .collect();
                let n = got.len();
                got.sort();
                got.dedup();
                assert_eq!(n, got.len(), "{ctx} read_dir {d}: duplicates");
                let mut want: Vec<(String, Kind)> = m
                    .iter()
                    .filter(|(k, _)| parent_of(k) == d)
                    .map(|(k, v)| {
                        (
                            k.rsplit('/').next().unwrap().to_string(),
                            match v {
                                N::Dir(_) => Kind::Dir,
                                _ => Kind::File,
                            },
                        )
                    })
                    .collect();
                want.sort();
                assert_eq!(got, want, "{ctx} read_dir {d}");
            }
            90..=92 => fs
                .step(rng.below(16) as u32)
                .map(|_| ())
                .unwrap_or_else(|e| panic!("{ctx} step: {e:?}")),
            93 => fs.sync().unwrap_or_else(|e| panic!("{ctx} sync: {e:?}")),
            94 => fs
                .step_all()
                .unwrap_or_else(|e| panic!("{ctx} step_all: {e:?}")),
            95..=96 => {
                fs.set_tuning(stagefs_core::Tuning {
                    staging: rng.below(4) != 0,
                    bypass: rng.below(3) != 0,
                });
            }
            _ => {
                // Remount; every handle goes stale (their writes durable first).
                fs.unmount()
                    .unwrap_or_else(|e| panic!("{ctx} unmount: {e:?}"));
                fs.mount().unwrap_or_else(|e| panic!("{ctx} mount: {e:?}"));
                for h in hs.drain(..) {
                    assert_eq!(fs.write(h.f, b"x"), Err(Error::BadHandle), "{ctx}");
                }
            }
        }
        // Closed files read back as the model says, now and then.
        if step % 50 == 49 && hs.len() < 4 {
            for (p, n) in m.clone() {
                if let N::File(d, _) = n {
                    if !hs.iter().any(|h| h.path == p) {
                        assert_eq!(read_all(&mut fs, &p), d, "{ctx} contents {p}");
                    }
                }
            }
        }
    }
    for h in hs.drain(..) {
        fs.close(h.f).unwrap();
    }
    assert!(
        stats.get("open_ok").copied().unwrap_or(0) > 20,
        "seed {seed}: the walk did little: {stats:?}"
    );
    fs.unmount().unwrap();
    fs.mount().unwrap();
    for (p, n) in m.clone() {
        match n {
            N::File(d, a) => {
                assert_eq!(read_all(&mut fs, &p), d, "seed {seed} end {p}");
                assert_eq!(fs.metadata(&p).unwrap().attributes(), &a[..]);
            }
            N::Dir(a) => assert_eq!(fs.metadata(&p).unwrap().attributes(), &a[..]),
        }
    }
}

#[test]
fn probe_model_walk_public_api() {
    let seeds: u64 = std::env::var("S33_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    for seed in 0..seeds {
        model_walk(seed, 1500);
    }
}
