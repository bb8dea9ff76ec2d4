//! Bad blocks (factory and grown), scrubbing, corrupted images, and the RAM bound.

use crate::common;
use common::lifecycle::Lifecycle;

use common::*;
use nand_hal::sim::{profile, FaultConfig, FaultPlan, SimNand};
use nand_hal::{BlockAddr, NandFlash, PageAddr};
use oftl::{MountError, ObjKind, W25n01gv, W25n01gvLarge};

#[test]
fn ram_bound_of_the_w25n01gv_configurations() {
    // Documented in the crate docs and README: keep them in step. The object table is
    // on flash, so no per-object RAM; a 4-byte block table entry per block.
    assert_eq!(core::mem::size_of::<oftl::BlockInfo>(), 4);
    let size = core::mem::size_of::<W25n01gv<&mut Sim>>();
    // 7 cached table and index pages, 2 write buffers, three page buffers, the
    // 1024-block table: under 32 KiB on a Cortex-M4 with its 2,744 B of stack (the
    // host's usize is wider, so this guard has a little slack).
    assert!(
        size <= 29 * 1024 + 512,
        "default W25N01GV configuration uses {size} bytes"
    );
    let large = core::mem::size_of::<W25n01gvLarge<&mut Sim>>();
    // The same with 12 cached pages.
    assert!(
        large <= 40 * 1024 && large - size >= 5 * 2048,
        "large W25N01GV configuration uses {large} bytes"
    );
    println!("size_of::<W25n01gv<_>>() = {size}, size_of::<W25n01gvLarge<_>>() = {large}");
}

#[test]
fn superblock_survives_bad_first_blocks() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(11));
    for b in [0, 1, 3] {
        sim.mark_bad(BlockAddr(b)).unwrap();
    }
    let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
    let o = fs.create(ObjKind::Object).unwrap();
    fs.write(o, 0, &bytes(1, 9000)).unwrap();
    fs.unmount().unwrap();
    let mut fs = Fs::mounted(&mut sim).unwrap();
    let mut buf = vec![0u8; 9000];
    fs.read(o, 0, &mut buf).unwrap();
    assert_eq!(buf, bytes(1, 9000));
    assert!(fs.blocks()[..2]
        .iter()
        .all(|b| b.state() == oftl::BlockState::Bad));
}

#[test]
fn factory_bad_blocks_are_never_used() {
    let plan = FaultPlan::seeded(12).with_faults(FaultConfig {
        factory_bad: 6,
        ..FaultConfig::default()
    });
    let mut sim = SimNand::heap(profile::TINY, plan);
    let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
    let o = fs.create(ObjKind::Object).unwrap();
    for r in 0..30u32 {
        fs.write(o, 0, &bytes(r, 100_000)).unwrap();
    }
    let mut buf = vec![0u8; 100_000];
    fs.read(o, 0, &mut buf).unwrap();
    assert_eq!(buf, bytes(29, 100_000));
    drop(fs);
    assert_eq!(sim.counters().misuse, 0, "no I/O to bad blocks");
}

#[test]
fn grown_bad_blocks_are_retired_with_data_moved() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(13));
    let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
    let o = fs.create(ObjKind::Object).unwrap();
    fs.write(o, 0, &bytes(1, 30_000)).unwrap();
    for b in (4..64).step_by(3) {
        fs.flash_mut().fail_next_program(BlockAddr(b));
    }
    for r in 0..6u32 {
        fs.write(o, 10_000 * r as u64, &bytes(r + 2, 20_000))
            .unwrap();
    }
    fs.sync().unwrap();
    let retired = fs.stats().retired_blocks;
    assert!(retired > 0, "program failures retire blocks");
    let mut expect = bytes(1, 30_000);
    for r in 0..6u32 {
        let off = 10_000 * r as usize;
        if expect.len() < off + 20_000 {
            expect.resize(off + 20_000, 0);
        }
        expect[off..off + 20_000].copy_from_slice(&bytes(r + 2, 20_000));
    }
    let mut buf = vec![0u8; expect.len()];
    fs.read(o, 0, &mut buf).unwrap();
    assert_eq!(buf, expect);
    fs.unmount().unwrap();
    let mut fs = Fs::mounted(&mut sim).unwrap();
    fs.read(o, 0, &mut buf).unwrap();
    assert_eq!(buf, expect);
    let bad = fs
        .blocks()
        .iter()
        .filter(|b| b.state() == oftl::BlockState::Bad)
        .count();
    assert!(bad as u32 >= retired);
    drop(fs);
    assert_eq!(sim.counters().misuse, 0);
}

#[test]
fn reads_at_the_scrub_threshold_get_their_blocks_moved() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(14));
    let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
    let o = fs.create(ObjKind::Object).unwrap();
    fs.write(o, 0, &bytes(5, 200_000)).unwrap();
    fs.sync().unwrap();
    // One corrected bit in step 0 of every page: at TINY's threshold (1).
    let pages = fs.flash().geometry().pages();
    for p in 0..pages {
        fs.flash_mut().inject_flips(PageAddr(p), 0, 1);
    }
    let mut buf = vec![0u8; 200_000];
    fs.read(o, 0, &mut buf).unwrap();
    assert_eq!(buf, bytes(5, 200_000));
    let flagged = fs.blocks().iter().filter(|b| b.scrub()).count();
    assert!(flagged > 0);
    let before = fs.stats().relocated_pages;
    while fs.gc_step(64).unwrap().more {
        if fs.blocks().iter().all(|b| !b.scrub()) {
            break;
        }
    }
    assert!(fs.stats().relocated_pages > before);
    fs.read(o, 0, &mut buf).unwrap();
    assert_eq!(buf, bytes(5, 200_000));
}

#[test]
fn corrupted_images_never_panic() {
    for seed in 0..40u64 {
        let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(seed));
        {
            let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
            for k in 0..3u32 {
                let o = fs.create(ObjKind::Object).unwrap();
                fs.write(o, 0, &bytes(k, 20_000)).unwrap();
            }
            if seed % 2 == 0 {
                fs.unmount().unwrap();
            }
        }
        sim.scribble(seed, 2 + (seed as u32 % 5) * 40);
        sim.disarm();
        match Fs::mounted(&mut sim) {
            Ok(mut fs) => {
                // Whatever survived must be readable or report an error, not panic.
                // The object table is on flash too: listing may stop at a damaged page
                // with a clear error.
                let ids: Vec<u32> = fs.objects().map_while(Result::ok).collect();
                for id in ids {
                    let mut buf = vec![0u8; 30_000];
                    let _ = fs.read(id, 0, &mut buf);
                    let _ = fs.write(id, 0, b"x");
                }
            }
            Err(
                MountError::Corrupted
                | MountError::NotFormatted
                | MountError::Mismatch(_)
                | MountError::NoSpace
                | MountError::WindowTooSmall { .. }
                | MountError::MediaLoss { .. }
                | MountError::Flash(_),
            ) => {}
            // `Internal` is a bug, never what damage may cause.
            Err(e) => panic!("seed {seed}: {e:?}"),
        }
    }
}

#[test]
fn garbage_device_is_not_formatted() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(99));
    sim.scribble(99, 1000);
    match Fs::mounted(&mut sim) {
        Err(MountError::NotFormatted | MountError::Corrupted | MountError::Flash(_)) => {}
        Err(e) => panic!("unexpected {e:?}"),
        Ok(_) => panic!("garbage mounted"),
    }
}

mod images {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Arbitrary byte damage to a formatted, written image: mount returns an error or
        /// a handle whose reads and writes return errors or data, never a panic.
        #[test]
        fn damaged_images_never_panic(
            pokes in proptest::collection::vec((0u32..64 * 16, 0usize..2112, any::<u8>()), 1..40),
            clean in any::<bool>(),
        ) {
            let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(3));
            {
                let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
                let o = fs.create(ObjKind::Object).unwrap();
                fs.write(o, 0, &bytes(1, 30_000)).unwrap();
                let l = fs.create(ObjKind::Log).unwrap();
                fs.log_append(l, b"record").unwrap();
                if clean {
                    fs.unmount().unwrap();
                }
            }
            for (page, at, v) in pokes {
                let (data, oob) = if at < 2048 {
                    (vec![v], vec![])
                } else {
                    (vec![], {
                        let mut o = vec![0xFF; at - 2048 + 1];
                        o[at - 2048] = v;
                        o
                    })
                };
                let col = if at < 2048 { at as u32 } else { 0 };
                sim.poke(PageAddr(page), col, &data, &oob);
            }
            if let Ok(mut fs) = Fs::mounted(&mut sim) {
                // The object table is on flash too: listing may stop at a damaged page
                // with a clear error.
                let ids: Vec<u32> = fs.objects().map_while(Result::ok).collect();
                for id in ids {
                    let mut buf = vec![0u8; 40_000];
                    let _ = fs.read(id, 0, &mut buf);
                    let _ = fs.log_read(id, 0, &mut buf);
                    let _ = fs.write(id, 10, b"x");
                }
                let _ = fs.gc_step(32);
                let _ = fs.sync();
            }
        }
    }
}
