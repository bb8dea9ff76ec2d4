//! The `stagefs` binary end to end on the small test part: a factory image from a host
//! tree and back, changes written back only on success, fsck's exit codes on a clean
//! image, one with a crash to recover and damaged ones, inspect, and misuse.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use stagefs_cli::{image, volume};

fn stagefs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stagefs"))
        .arg("--part")
        .arg("tiny")
        .args(args)
        .output()
        .unwrap()
}

fn ok(args: &[&str]) -> String {
    let o = stagefs(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("stagefs-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn tree(root: &Path) {
    std::fs::create_dir_all(root.join("etc/net")).unwrap();
    std::fs::create_dir_all(root.join("empty")).unwrap();
    std::fs::write(root.join("etc/hostname"), b"board-7\n").unwrap();
    std::fs::write(root.join("etc/net/cfg"), vec![b'x'; 300]).unwrap();
    let big: Vec<u8> = (0..20_000u32).map(|i| (i * 7919 % 251) as u8).collect();
    std::fs::write(root.join("firmware.bin"), big).unwrap();
    std::fs::write(root.join("zero"), b"").unwrap();
}

fn same_tree(a: &Path, b: &Path) {
    let names = |d: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    let (na, nb) = (names(a), names(b));
    assert_eq!(na, nb, "{} vs {}", a.display(), b.display());
    for n in na {
        let (pa, pb) = (a.join(&n), b.join(&n));
        if pa.is_dir() {
            same_tree(&pa, &pb);
        } else {
            assert_eq!(
                std::fs::read(&pa).unwrap(),
                std::fs::read(&pb).unwrap(),
                "{}",
                pa.display()
            );
        }
    }
}

#[test]
fn a_factory_image_holds_the_tree_and_changes_land_only_on_success() {
    let d = scratch("tree");
    let src = d.join("src");
    tree(&src);
    let img = d.join("img.bin");
    let img_s = img.to_str().unwrap();
    let out = ok(&["mkfs", "--from", src.to_str().unwrap(), img_s]);
    assert!(out.contains("4 files"), "{out}");
    assert_eq!(
        std::fs::metadata(&img).unwrap().len(),
        image::image_len(&nand_hal::sim::profile::TINY)
    );
    assert_eq!(ok(&["cat", img_s, "/etc/hostname"]), "board-7\n");
    let ls = ok(&["ls", img_s, "/"]);
    assert!(
        ls.contains("d          - etc/") && ls.contains("f      20000 firmware.bin"),
        "{ls}"
    );
    let back = d.join("back");
    ok(&["cp", "-r", img_s, ":/", back.to_str().unwrap()]);
    same_tree(&src, &back);

    ok(&["mkdir", "-p", img_s, "/var/log"]);
    ok(&[
        "cp",
        img_s,
        src.join("etc/hostname").to_str().unwrap(),
        ":/var/log/h",
    ]);
    assert_eq!(ok(&["cat", img_s, "/var/log/h"]), "board-7\n");
    ok(&["rm", "-r", img_s, "/etc"]);
    ok(&["rm", img_s, "/empty"]);
    let ls = ok(&["ls", img_s]);
    assert!(
        !ls.contains("etc") && !ls.contains("empty") && ls.contains("var/"),
        "{ls}"
    );

    // A failing change leaves the image file as it was.
    let before = std::fs::read(&img).unwrap();
    let o = stagefs(&["rm", img_s, "/var"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("/var"));
    let o = stagefs(&["mkdir", img_s, "/nope/deeper"]);
    assert!(!o.status.success());
    assert_eq!(std::fs::read(&img).unwrap(), before);
    assert_eq!(stagefs(&["fsck", img_s]).status.code(), Some(0));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn fsck_tells_clean_recovered_and_damaged_images_apart() {
    let d = scratch("fsck");
    let p = nand_hal::sim::profile::TINY;
    // An image taken at a power cut: a file fsynced, never unmounted.
    let crash = d.join("crash.bin");
    {
        let mut sim = image::blank(&p);
        {
            let mut v = volume::over(&mut sim);
            v.format().unwrap();
            volume::write_file(&mut v, "/kept", b"acknowledged").unwrap();
            v.unmount().unwrap();
            v.mount().unwrap();
            volume::write_file(&mut v, "/log", &[7u8; 64]).unwrap();
        }
        image::save_file(&sim, &crash).unwrap();
    }
    let c = crash.to_str().unwrap();
    let o = stagefs(&["fsck", c]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("a crash recovered"));
    assert_eq!(ok(&["cat", c, "/log"]).as_bytes(), &[7u8; 64]);
    assert_eq!(ok(&["cat", c, "/kept"]), "acknowledged");
    // --repair keeps the recovery: the next check finds a clean image.
    let o = stagefs(&["fsck", "--repair", c]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(stagefs(&["fsck", c]).status.code(), Some(0));
    assert_eq!(ok(&["cat", c, "/log"]).as_bytes(), &[7u8; 64]);

    // Garbage where the superblocks and checkpoints are: reported, not a panic.
    let mut bytes = std::fs::read(&crash).unwrap();
    let rec = image::record_len(&p);
    for (i, b) in bytes[..6 * 16 * rec].iter_mut().enumerate() {
        *b = (i * 131 % 251) as u8;
    }
    let bad = d.join("bad.bin");
    std::fs::write(&bad, &bytes).unwrap();
    let o = stagefs(&["fsck", bad.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("does not mount"));

    // A damaged backpointer under one page of a file: that file is listed as a
    // problem, the others still read, the image still mounts.
    let damaged = d.join("damaged.bin");
    {
        let src = d.join("src");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("big"), vec![0x42u8; 20_000]).unwrap();
        std::fs::write(src.join("small"), b"fine").unwrap();
        // A name repair would pick is taken already, and a damaged file with a path
        // longer than a name may be.
        std::fs::create_dir_all(src.join("lost+found")).unwrap();
        std::fs::write(src.join("lost+found/big"), b"keep me").unwrap();
        let deep = src.join("d".repeat(60));
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("n".repeat(60)), vec![0x43u8; 9_000]).unwrap();
        ok(&[
            "mkfs",
            "--from",
            src.to_str().unwrap(),
            damaged.to_str().unwrap(),
        ]);
    }
    let mut bytes = std::fs::read(&damaged).unwrap();
    let ps = p.geometry.page_size() as usize;
    let hit = (0..p.geometry.pages() as usize)
        .find(|&i| bytes[i * rec..i * rec + ps].iter().all(|&b| b == 0x42))
        .expect("a page of the big file");
    for b in &mut bytes[hit * rec + ps..(hit + 1) * rec] {
        *b ^= 0x5A;
    }
    let deep_hit = (0..p.geometry.pages() as usize)
        .find(|&i| bytes[i * rec..i * rec + ps].iter().all(|&b| b == 0x43))
        .expect("a page of the deep file");
    for b in &mut bytes[deep_hit * rec + ps..(deep_hit + 1) * rec] {
        *b ^= 0x5A;
    }
    std::fs::write(&damaged, &bytes).unwrap();
    let o = stagefs(&["fsck", damaged.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(4), "{out}");
    assert!(
        out.contains("problem: /big: contents cannot be read"),
        "{out}"
    );
    assert_eq!(ok(&["cat", damaged.to_str().unwrap(), "/small"]), "fine");

    // --repair moves the damaged file aside with every page that still reads; the
    // image then mounts clean with the undamaged files, and fsck calls it clean.
    let dm = damaged.to_str().unwrap();
    let o = stagefs(&["fsck", "--repair", dm]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("repaired: /big: 20000 bytes saved to /lost+found/big~1 (1 unreadable page as zeros at offset"), "{out}");
    assert!(
        out.contains("9000 bytes saved to /lost+found/dddd"),
        "{out}"
    );
    assert_eq!(
        ok(&["cat", dm, "/lost+found/big"]),
        "keep me",
        "never overwritten"
    );
    assert!(
        out.contains("after repair: ") && out.contains("clean"),
        "{out}"
    );
    assert_eq!(stagefs(&["fsck", dm]).status.code(), Some(0));
    assert_eq!(ok(&["cat", dm, "/small"]), "fine");
    assert!(stagefs(&["cat", dm, "/big"]).status.code() != Some(0));
    let saved = ok(&["cat", dm, "/lost+found/big~1"]).into_bytes();
    assert_eq!(saved.len(), 20_000);
    let zeros = saved.iter().filter(|&&b| b == 0).count();
    assert_eq!(zeros, 2048, "one page of zeros, the rest as written");
    assert!(saved.iter().all(|&b| b == 0 || b == 0x42));
    // A clean image is left alone by --repair.
    let before = std::fs::read(dm).unwrap();
    assert_eq!(stagefs(&["fsck", "--repair", dm]).status.code(), Some(0));
    assert_eq!(std::fs::read(dm).unwrap(), before);

    // Not an image of this part at all: not checkable.
    let short = d.join("short.bin");
    std::fs::write(&short, b"not an image").unwrap();
    assert_eq!(
        stagefs(&["fsck", short.to_str().unwrap()]).status.code(),
        Some(8)
    );
    assert_eq!(
        stagefs(&["fsck", d.join("missing").to_str().unwrap()])
            .status
            .code(),
        Some(8)
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn inspect_shows_the_blocks_and_a_pages_tags_and_misuse_is_refused() {
    let d = scratch("inspect");
    let img = d.join("img.bin");
    let img_s = img.to_str().unwrap();
    ok(&["mkfs", img_s]);
    let host = d.join("n.txt");
    std::fs::write(&host, b"n").unwrap();
    ok(&["cp", img_s, host.to_str().unwrap(), ":/n"]);
    assert!(!stagefs(&["cp", img_s, "/dev/null", ":/null"])
        .status
        .success());
    let s = ok(&["inspect", img_s]);
    assert!(
        s.contains("64 blocks x 16 pages")
            && s.contains("block map")
            && s.contains("bad blocks: none"),
        "{s}"
    );
    assert!(
        s.lines().any(|l| l.trim_start().starts_with("0 RRRRRR")),
        "{s}"
    );
    let t = ok(&["inspect", img_s, "--page", "0"]);
    assert!(t.contains("page 0 (block 0, page 0 in block)"), "{t}");
    assert!(!stagefs(&["inspect", img_s, "--page", "99999"])
        .status
        .success());

    let o = stagefs(&["cp", img_s, "a", "b"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("start with ':'"));
    let o = Command::new(env!("CARGO_BIN_EXE_stagefs"))
        .args(["--part", "nope", "ls", img_s])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(16));
    assert!(String::from_utf8_lossy(&o.stderr).contains("known parts"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn torture_runs_cuts_and_replays_a_token() {
    let out = ok(&[
        "torture",
        "--workload",
        "logging",
        "--cuts",
        "40",
        "--ops",
        "60",
    ]);
    assert!(out.contains("0 failures"), "{out}");
    assert!(out.contains("cuts in the workload"), "{out}");
    let token = "logging-60-1-tiny@ns1:seed=7:cut=20.some";
    let out = ok(&["torture", "--replay", token]);
    assert!(out.contains("passes"), "{out}");
    let o = stagefs(&["torture", "--workload", "nope"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown workload nope"));
}

#[test]
fn inspect_draws_block_maps_as_svg_and_png_and_reports_staging() {
    let d = scratch("pictures");
    let img = d.join("img.bin");
    ok(&["mkfs", img.to_str().unwrap()]);
    let svg = d.join("maps.svg");
    let png = d.join("maps.png");
    let out = ok(&[
        "inspect",
        img.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
        "--png",
        png.to_str().unwrap(),
    ]);
    assert!(out.contains("staging: log stream"), "{out}");
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(
        s.contains("<svg") && s.contains("erase count per block"),
        "{s:.200}"
    );
    let p = std::fs::read(&png).unwrap();
    assert_eq!(&p[..8], b"\x89PNG\r\n\x1a\n");
    let o = stagefs(&["inspect", img.to_str().unwrap(), "--svg", "maps.gif"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains(".svg or .png"));
}

#[test]
fn plan_projects_life_and_draws_wear() {
    let d = scratch("plan");
    let png = d.join("wear.png");
    let out = ok(&[
        "plan",
        "--workload",
        "logging:64B@10/s",
        "--png",
        png.to_str().unwrap(),
    ]);
    for want in [
        "write amplification",
        "projected life",
        "worst single operation",
        "mount after a power cut",
        "RAM of the volume",
    ] {
        assert!(out.contains(want), "{want}: {out}");
    }
    assert_eq!(&std::fs::read(&png).unwrap()[..4], b"\x89PNG");
    let o = stagefs(&["plan", "--workload", "logging:64B"]);
    assert!(!o.status.success());
}
