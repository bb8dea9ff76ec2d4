//! `fsck --repair` against losses that cross the store's write heads (found by an
//! independent review): a file's home pages go through the data head, its small fsynced
//! writes through the staging log (the log head), and the heads have no order between
//! them, so a repair after a loss in one while the other also moved goes back to the
//! store's last checkpoint: every file then holds a state it had, and the volume mounts.

use nand_hal::sim::profile::TINY;
use nand_hal::PageAddr;
use stagefs_cli::fsck;
use stagefs_cli::image::{self, Sim};
use stagefs_cli::volume::{self, Vol};
use stagefs_core::OpenOptions;

fn kill(sim: &mut Sim, page: u32) {
    for st in 0..4 {
        sim.inject_flips(PageAddr(page), st, 40);
    }
}

/// Pages whose data area is all `b`.
fn pages_all(sim: &Sim, b: u8) -> Vec<u32> {
    let g = TINY.geometry;
    let (mut d, mut o) = (
        vec![0u8; g.page_size() as usize],
        vec![0u8; g.oob_size() as usize],
    );
    (0..g.pages())
        .filter(|&p| {
            sim.peek(PageAddr(p), &mut d, &mut o);
            d.iter().all(|&x| x == b)
        })
        .collect()
}

fn append_fsync(v: &mut Vol<'_>, path: &str, data: &[u8]) {
    let f = v
        .open(path, OpenOptions::new().write(true).append(true))
        .unwrap();
    v.write(f, data).unwrap();
    v.fsync(f).unwrap();
    v.close(f).unwrap();
}

fn overwrite_fsync(v: &mut Vol<'_>, path: &str, at: u64, data: &[u8]) {
    let f = v.open(path, OpenOptions::new().write(true)).unwrap();
    v.seek(f, stagefs_core::SeekFrom::Start(at)).unwrap();
    v.write(f, data).unwrap();
    v.fsync(f).unwrap();
    v.close(f).unwrap();
}

fn run(sim: &mut Sim, repair: bool) -> (u8, bool, String) {
    let mut out = String::new();
    let (c, ch) = fsck::run(sim, "img", repair, &mut out);
    (c, ch, out)
}

/// A file overwritten home (data head) after a lost data-head page, then appended with
/// a small fsync (staged in the log head): repair keeps the staged append but not the
/// overwrite before it.
#[test]
fn staged_append_after_a_direct_overwrite_after_the_loss() {
    let mut sim = image::blank(&TINY);
    let mut f_states: Vec<Vec<u8>> = Vec::new();
    {
        let mut v = volume::over(&mut sim);
        v.format().unwrap();
        volume::write_file(&mut v, "/f", &[b'A'; 3000]).unwrap();
        v.sync().unwrap();
        f_states.push(vec![b'A'; 3000]);
        // D0: /g (its page will be lost)
        volume::write_file(&mut v, "/g", &[0x47; 4096]).unwrap();
        // /f overwritten at 0 (a random overwrite goes home)
        overwrite_fsync(&mut v, "/f", 0, &[b'B'; 3000]);
        f_states.push(vec![b'B'; 3000]);
        let before = v.staging_status().unwrap();
        append_fsync(&mut v, "/f", &[b'C'; 40]);
        assert_ne!(v.staging_status().unwrap(), before, "the append is staged");
        let mut s = vec![b'B'; 3000];
        s.extend_from_slice(&[b'C'; 40]);
        f_states.push(s);
        // later data-head pages
        volume::write_file(&mut v, "/h", &[0x48; 4096]).unwrap();
        assert_eq!(volume::read_file(&mut v, "/f").unwrap(), f_states[2]);
        // power cut: no unmount
    }
    let g = pages_all(&sim, 0x47);
    kill(&mut sim, g[0]);
    let (code, changed, out) = run(&mut sim, true);
    assert_eq!((code, changed), (1, true), "{out}");
    let mut v = volume::over(&mut sim);
    v.mount().unwrap();
    let got = volume::read_file(&mut v, "/f").unwrap();
    let show = |d: &[u8]| {
        let mut runs: Vec<(u8, usize)> = Vec::new();
        for &b in d {
            match runs.last_mut() {
                Some((x, n)) if *x == b => *n += 1,
                _ => runs.push((b, 1)),
            }
        }
        runs.iter()
            .map(|(b, n)| format!("{}x{n}", *b as char))
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(
        f_states.contains(&got),
        "/f reads {} after repair: a state it never had (acknowledged: A*3000, B*3000, B*3000+C*40)\n{out}",
        show(&got)
    );
    if got != f_states[2] {
        assert!(
            out.contains("rolled back: /f:"),
            "/f is older but not named:\n{out}"
        );
    }
    drop(v);
    assert_eq!(run(&mut sim, false).0, 0, "a clean check after the repair");
}

/// An inline file created after a lost data-head page (its entry in the directory, on the
/// data head), its contents staged (log head).
#[test]
fn inline_file_created_after_the_loss_with_staged_contents() {
    let mut sim = image::blank(&TINY);
    {
        let mut v = volume::over(&mut sim);
        v.format().unwrap();
        volume::write_file(&mut v, "/keep", &[1u8; 3000]).unwrap();
        v.sync().unwrap();
        volume::write_file(&mut v, "/g", &[0x47; 4096]).unwrap();
        volume::write_file(&mut v, "/t", b"tiny file").unwrap();
        volume::write_file(&mut v, "/h", &[0x48; 4096]).unwrap();
    }
    let g = pages_all(&sim, 0x47);
    kill(&mut sim, g[0]);
    let (code, _, out) = run(&mut sim, true);
    let (code2, _, out2) = run(&mut sim, false);
    assert!(code <= 1, "repair did not repair: code {code}\n{out}");
    assert!(code2 == 0, "check after repair: {code2}\n{out2}");
    let mut v = volume::over(&mut sim);
    v.mount().unwrap();
    assert_eq!(volume::read_file(&mut v, "/keep").unwrap(), vec![1u8; 3000]);
    match volume::read_file(&mut v, "/t") {
        Ok(d) => assert_eq!(d, b"tiny file"),
        Err(_) => assert!(out.contains("rolled back: / (its entries)"), "{out}"),
    }
}
