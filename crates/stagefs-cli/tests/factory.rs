//! Factory images on parts with their own factory bad blocks (docs/SPEC.md section 5):
//! a generic image programmed block for block with bad blocks skipped in place mounts
//! on any part whose bad blocks are not among the blocks it holds data in, and the
//! store meets those bad blocks without touching them; a part with a bad block among
//! them gets its own image (`mkfs --bad-blocks`); an image programmed with skip-block
//! shifting is refused at mount, never read as something else.

use std::path::PathBuf;
use std::process::Command;

use nand_hal::sim::profile::TINY;
use nand_hal::{BlockAddr, NandFlash};
use stagefs_cli::image::{self, Placement, Sim};
use stagefs_cli::volume;

fn stagefs(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_stagefs"))
        .arg("--part")
        .arg("tiny")
        .args(args)
        .output()
        .unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("stagefs-factory-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A factory image of a small tree, made by the tool (with `bad` as the part's bad
/// blocks if given); its bytes.
fn factory_image(d: &std::path::Path, bad: &str) -> Vec<u8> {
    let src = d.join("src");
    std::fs::create_dir_all(src.join("etc")).unwrap();
    std::fs::write(src.join("etc/hostname"), b"board-7\n").unwrap();
    std::fs::write(src.join("firmware.bin"), vec![0x3C; 70_000]).unwrap();
    let img = d.join("img.bin");
    let mut args = vec!["mkfs", "--from", src.to_str().unwrap()];
    if !bad.is_empty() {
        args.extend(["--bad-blocks", bad]);
    }
    args.push(img.to_str().unwrap());
    let o = stagefs(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(out.contains("data and checkpoint blocks"), "{out}");
    std::fs::read(img).unwrap()
}

/// A part fresh from the factory with these blocks bad.
fn part_with_bad(bad: &[u32]) -> Sim {
    let mut p = image::blank(&TINY);
    for &b in bad {
        p.mark_bad(BlockAddr(b)).unwrap();
    }
    p
}

fn check_tree(part: &mut Sim) {
    let mut v = volume::over(part);
    v.mount().unwrap();
    assert_eq!(
        volume::read_file(&mut v, "/etc/hostname").unwrap(),
        b"board-7\n"
    );
    assert_eq!(
        volume::read_file(&mut v, "/firmware.bin").unwrap(),
        vec![0x3C; 70_000]
    );
}

#[test]
fn a_generic_image_works_on_parts_whose_bad_blocks_it_does_not_use() {
    let d = scratch("generic");
    let img = factory_image(&d, "");
    let used = image::used_blocks(&TINY, &img);
    let blocks = TINY.geometry.blocks();
    // Bad blocks right after the data (where the window and the first new data go),
    // in the middle and at the end.
    let last = *used.last().unwrap();
    let bad: Vec<u32> = [last + 1, last + 2, blocks / 2, blocks - 1]
        .into_iter()
        .filter(|b| !used.contains(b))
        .collect();
    let mut part = part_with_bad(&bad);
    image::program(&mut part, &img, Placement::InPlace).unwrap();
    check_tree(&mut part);
    // Use it until garbage collection has passed over every block, with a power cut
    // in the middle: the bad blocks are never erased or programmed.
    {
        let mut v = volume::over(&mut part);
        v.mount().unwrap();
        for round in 0..40u8 {
            for f in 0..6 {
                volume::write_file(&mut v, &format!("/log{f}"), &vec![round; 9000 + 500 * f])
                    .unwrap();
            }
        }
    }
    part.cut_power();
    part.power_on();
    check_tree(&mut part);
    {
        let mut v = volume::over(&mut part);
        v.mount().unwrap();
        assert_eq!(
            volume::read_file(&mut v, "/log3").unwrap(),
            vec![39u8; 10_500]
        );
        v.unmount().unwrap();
    }
    assert!(part.wear_stats().max > 1, "collection ran");
    assert_eq!(part.counters().misuse, 0, "no operation on a bad block");
    for b in bad {
        assert!(part.is_bad(BlockAddr(b)).unwrap());
    }
}

/// Found by an independent review: a fresh image's spare checkpoint blocks are erased,
/// so they looked free; a part where they were bad took the image and the store went
/// read-only at its first write. They count as used now.
#[test]
fn spare_checkpoint_blocks_count_as_used() {
    let d = scratch("ckpt");
    let img = factory_image(&d, "");
    let used = image::used_blocks(&TINY, &img);
    let bb = image::record_len(&TINY) * TINY.geometry.pages_per_block() as usize;
    let erased: Vec<u32> = used
        .iter()
        .copied()
        .filter(|&b| img[b as usize * bb..][..bb].iter().all(|&x| x == 0xFF))
        .collect();
    assert!(
        erased.len() >= 2,
        "erased checkpoint blocks are listed: {used:?}"
    );
    let mut part = part_with_bad(&erased);
    let e = image::program(&mut part, &img, Placement::InPlace).unwrap_err();
    assert!(e.contains("--bad-blocks"), "{e}");
    // Its own image avoids them, and takes writes.
    let bad: Vec<String> = erased.iter().map(u32::to_string).collect();
    let own = factory_image(&scratch("ckpt2"), &bad.join(","));
    let mut part = part_with_bad(&erased);
    image::program(&mut part, &own, Placement::InPlace).unwrap();
    check_tree(&mut part);
    let mut v = volume::over(&mut part);
    v.mount().unwrap();
    volume::write_file(&mut v, "/new", b"written").unwrap();
    v.unmount().unwrap();
}

#[test]
fn a_part_with_a_bad_block_under_the_data_gets_its_own_image() {
    let d = scratch("own");
    let generic = factory_image(&d, "");
    let used = image::used_blocks(&TINY, &generic);
    let hit = used[used.len() / 2];
    // The generic image cannot go there: refused, with the remedy.
    let mut part = part_with_bad(&[hit]);
    let e = image::program(&mut part, &generic, Placement::InPlace).unwrap_err();
    assert!(e.contains("--bad-blocks"), "{e}");
    // Its own image, made for its bad blocks, programs and mounts.
    let own = factory_image(&scratch("own2"), &hit.to_string());
    assert!(!image::used_blocks(&TINY, &own).contains(&hit));
    let mut part = part_with_bad(&[hit]);
    image::program(&mut part, &own, Placement::InPlace).unwrap();
    check_tree(&mut part);
    assert_eq!(part.counters().misuse, 0);
    let o = stagefs(&[
        "mkfs",
        "--bad-blocks",
        "99",
        d.join("x.bin").to_str().unwrap(),
    ]);
    assert!(!o.status.success(), "a block past the part is refused");
}

#[test]
fn skip_block_shifting_is_refused_at_mount_not_misread() {
    let d = scratch("shift");
    let img = factory_image(&d, "");
    let used = image::used_blocks(&TINY, &img);
    for bad in [0, 1, 3, used[used.len() / 2]] {
        let mut part = part_with_bad(&[bad]);
        image::program(&mut part, &img, Placement::Shifted).unwrap();
        let mut v = volume::over(&mut part);
        match v.mount() {
            Err(_) => {}
            Ok(()) => {
                // If the store found its way, every file must still read exactly.
                assert_eq!(
                    volume::read_file(&mut v, "/etc/hostname").unwrap(),
                    b"board-7\n"
                );
                assert_eq!(
                    volume::read_file(&mut v, "/firmware.bin").unwrap(),
                    vec![0x3C; 70_000],
                    "bad block {bad}: a shifted image must never read as other data"
                );
            }
        }
    }
}

/// The image's recorded updating window (chosen on the part mkfs ran on) made of the
/// target part's factory bad blocks: the first mount reads those blocks' markers and
/// picks the window again, so a transaction that needs the whole window's room still
/// fits (found by an independent review: two bad blocks in one window failed such a
/// write, before markers were read when blocks join the window).
#[test]
fn factory_bad_blocks_in_the_recorded_window_are_met_at_mount() {
    let d = scratch("window");
    let img = factory_image(&d, "");
    let used = image::used_blocks(&TINY, &img);
    let window: Vec<u32> = {
        let mut probe = image::blank(&TINY);
        image::program(&mut probe, &img, Placement::InPlace).unwrap();
        let mut v = volume::over(&mut probe);
        v.mount().unwrap();
        v.store()
            .blocks()
            .iter()
            .enumerate()
            .filter(|(_, b)| b.state() == oftl::BlockState::Window)
            .map(|(i, _)| i as u32)
            .collect()
    };
    let bad: Vec<u32> = window
        .iter()
        .copied()
        .filter(|b| !used.contains(b))
        .collect();
    assert!(bad.len() >= 3, "window {window:?}, data in {used:?}");
    let mut part = part_with_bad(&bad);
    image::program(&mut part, &img, Placement::InPlace).unwrap();
    check_tree(&mut part);
    // One transaction as large as the window allows (a whole-file rewrite), then more,
    // with a power cut at the end.
    let big = vec![0x5Au8; 40_000];
    {
        let mut v = volume::over(&mut part);
        v.mount().unwrap();
        volume::write_file(&mut v, "/big", &big).unwrap();
        for round in 0..10u8 {
            volume::write_file(&mut v, "/big", &vec![round; 40_000]).unwrap();
        }
    }
    part.cut_power();
    part.power_on();
    check_tree(&mut part);
    let mut v = volume::over(&mut part);
    v.mount().unwrap();
    assert_eq!(
        volume::read_file(&mut v, "/big").unwrap(),
        vec![9u8; 40_000]
    );
    drop(v);
    assert_eq!(part.counters().misuse, 0, "no operation on a bad block");
}
