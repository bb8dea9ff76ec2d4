//! A read-only session on a part that programs nothing reads every object.
//!
//! A mount whose recovery cannot write (a worn part: too few good blocks, programs and
//! erases failing) replays the window in RAM and mounts read-only, its cache holding
//! the replay's dirty pages. Until stop 40 a later read that needed another page wrote
//! a dirty one back to free its slot; on a part that programs nothing that failed, and
//! the failure poisoned the store: every read after it returned `Poisoned` (found by
//! an independent review of the file layer, `stagefs-core/tests/review_s33b.rs`). Now a
//! store that writes only cache pages and fails to write one back keeps its dirty pages
//! from then on: it evicts clean pages first and reads the missing parents of a page
//! through the slot freed for it, and its mount keeps one slot clean. A part that
//! programs nothing either mounts and reads every acknowledged byte, or refuses the
//! mount with an error.

use crate::common;

use common::lifecycle::Lifecycle;
use common::read_only::OBJECTS;
use common::{bytes, cfg, Fs, Sim};
use nand_hal::sim::{profile, FaultConfig, FaultPlan};
use oftl::{Damaged, Health, MountError, ObjKind};

/// `OBJECTS` objects of 8 pages (indexed), unmounted; then `n` of them (every
/// `OBJECTS / n`-th, from `first`) get 700 new bytes at page `page`, each flushed, and
/// the store is dropped (a crash: the flushes are the window's replay).
fn crashed(sim: &mut Sim, n: usize, first: usize, page: usize, seed: u32) -> Vec<(u32, Vec<u8>)> {
    let mut want = Vec::new();
    {
        let mut fs = Fs::formatted(sim, cfg()).unwrap();
        for i in 0..OBJECTS {
            let o = fs.create(ObjKind::Object).unwrap();
            fs.write(o, 0, &bytes(i, 8 * 2048)).unwrap();
            want.push((o, bytes(i, 8 * 2048)));
        }
        fs.unmount().unwrap();
    }
    let mut fs = Fs::new(sim, cfg(), oftl::Greedy::DEFAULT);
    fs.mount().unwrap();
    let step = OBJECTS as usize / n;
    for (i, (o, d)) in want.iter_mut().enumerate().skip(first).step_by(step) {
        let new = bytes(seed + i as u32, 700);
        fs.write(*o, (page * 2048) as u64, &new).unwrap();
        d[page * 2048..page * 2048 + 700].copy_from_slice(&new);
        fs.flush(*o).unwrap();
    }
    want
}

/// Every program and erase fails from now on.
fn fail_everything(sim: &mut Sim, seed: u64) {
    sim.arm(FaultPlan::seeded(seed).with_faults(FaultConfig {
        program_fail_ppm: 1_000_000,
        erase_fail_ppm: 1_000_000,
        ..FaultConfig::default()
    }));
}

/// Every object reads its bytes, twice over in two orders (each pass loads other pages
/// than the last left cached); the first error or difference.
fn read_everything(fs: &mut Fs<'_>, want: &[(u32, Vec<u8>)]) -> Result<(), String> {
    for pass in 0..2 {
        let order: Vec<&(u32, Vec<u8>)> = if pass == 0 {
            want.iter().collect()
        } else {
            want.iter().rev().collect()
        };
        for (o, d) in order {
            let mut buf = vec![0u8; d.len()];
            fs.read(*o, 0, &mut buf)
                .map_err(|e| format!("pass {pass}: read of {o}: {e:?} ({:?})", fs.health()))?;
            if &buf != d {
                return Err(format!("pass {pass}: object {o} reads other bytes"));
            }
        }
    }
    Ok(())
}

/// Crashed stores whose replays dirty from one to all of the cache's pages, on a part
/// that programs and erases nothing: every mount that succeeds is read-only and reads
/// every object (twice over, in two orders), and stays mounted. Up to three objects
/// rewritten (their leaves and the table page fit the 4-page cache), every mount
/// succeeds; from four on the replay needs more dirty pages than the cache holds, and
/// the mount fails with `NoSpace` (documented open, `docs/DESIGN.md` 5.3). Salvage
/// mounts the same.
#[test]
fn read_only_sessions_on_a_part_that_programs_nothing_read_everything() {
    let (mut mounted, mut refused) = (0, 0);
    for n in [1usize, 2, 3, 4, 6, 8, 12] {
        for first in 0..3 {
            for page in [1usize, 5] {
                let seed = (n * 100 + first * 10 + page) as u64;
                let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
                let want = crashed(&mut sim, n, first, page, seed as u32);
                fail_everything(&mut sim, seed);
                for salvage in [false, true] {
                    let mut fs = Fs::new(&mut sim, cfg(), oftl::Greedy::DEFAULT);
                    let r = if salvage {
                        fs.mount_damaged(Damaged::Salvage)
                    } else {
                        fs.mount()
                    };
                    let ctx = format!("{n} rewritten from {first}, page {page}, salvage {salvage}");
                    match r {
                        Ok(()) => {
                            assert!(
                                matches!(fs.health(), Health::ReadOnly(_)),
                                "{ctx}: {:?}",
                                fs.health()
                            );
                            read_everything(&mut fs, &want)
                                .unwrap_or_else(|e| panic!("{ctx}: {e}"));
                            assert!(matches!(fs.health(), Health::ReadOnly(_)), "{ctx}");
                            mounted += 1;
                        }
                        // Four leaves and a table page or more: past the 4-page cache.
                        Err(MountError::NoSpace) if n >= 4 => refused += 1,
                        Err(e) => panic!("{ctx}: mount {e:?}"),
                    }
                }
            }
        }
    }
    eprintln!("{mounted} read-only mounts read everything, {refused} refused with NoSpace");
    assert_eq!((mounted, refused), (36, 48));
}
