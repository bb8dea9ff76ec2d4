//! Shared by the `fsck --repair` rebuild tests: finding pages by their tag, making
//! them unreadable, building volumes and running fsck, and checking that every file
//! reads as acknowledged or is named.
#![allow(dead_code)]

use nand_hal::sim::profile::TINY;
use nand_hal::PageAddr;
use oftl::format::backpointer::{Backpointer, PageKind};
use stagefs_cli::fsck;
use stagefs_cli::image::Sim;
use stagefs_cli::volume::{self, Vol};
use stagefs_core::OpenOptions;

pub fn kill(sim: &mut Sim, page: u32) {
    for st in 0..4 {
        sim.inject_flips(PageAddr(page), st, 40);
    }
}

pub fn bp_of(sim: &Sim, p: u32) -> Option<Backpointer> {
    let g = TINY.geometry;
    let caps = TINY.capabilities;
    let (mut d, mut o) = (
        vec![0u8; g.page_size() as usize],
        vec![0u8; g.oob_size() as usize],
    );
    sim.peek(PageAddr(p), &mut d, &mut o);
    let mut t = [0u8; 16];
    caps.oob.gather_protected(&o, &mut t);
    match Backpointer::parse(&t) {
        Ok(Some(bp)) => Some(bp),
        _ => Backpointer::parse(&d[496..512]).ok().flatten(),
    }
}

pub fn pages_of(sim: &Sim, kinds: &[PageKind]) -> Vec<u32> {
    (0..TINY.geometry.pages())
        .filter(|&p| bp_of(sim, p).is_some_and(|bp| kinds.contains(&bp.kind)))
        .collect()
}

/// Pages whose data area starts with `n` bytes equal to `b`.
pub fn pages_start(sim: &Sim, b: u8, n: usize) -> Vec<u32> {
    let g = TINY.geometry;
    let (mut d, mut o) = (
        vec![0u8; g.page_size() as usize],
        vec![0u8; g.oob_size() as usize],
    );
    (0..g.pages())
        .filter(|&p| {
            sim.peek(PageAddr(p), &mut d, &mut o);
            d[..n].iter().all(|&x| x == b)
        })
        .collect()
}

pub fn snapshot(sim: &Sim) -> Vec<u8> {
    let g = TINY.geometry;
    let (mut d, mut o) = (
        vec![0u8; g.page_size() as usize],
        vec![0u8; g.oob_size() as usize],
    );
    let mut all = Vec::new();
    for p in 0..g.pages() {
        sim.peek(PageAddr(p), &mut d, &mut o);
        all.extend_from_slice(&d);
        all.extend_from_slice(&o);
    }
    all
}

pub fn append_fsync(v: &mut Vol<'_>, path: &str, data: &[u8]) {
    let f = v
        .open(
            path,
            OpenOptions::new().write(true).append(true).create(true),
        )
        .unwrap();
    v.write(f, data).unwrap();
    v.fsync(f).unwrap();
    v.close(f).unwrap();
}

pub fn bytes(seed: u32, n: usize) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_mul(31) ^ seed.wrapping_mul(0x9E37)) as u8)
        .collect()
}

pub fn run(sim: &mut Sim, repair: bool) -> (u8, bool, String) {
    let mut out = String::new();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        fsck::run(sim, "img", repair, &mut out)
    }));
    match r {
        Ok((c, ch)) => (c, ch, out),
        Err(_) => panic!("fsck panicked; output so far:\n{out}"),
    }
}

pub fn all_table_kinds() -> Vec<PageKind> {
    vec![
        PageKind::Checkpoint,
        PageKind::Marker,
        PageKind::Index,
        PageKind::Table,
    ]
}

/// Kill pages of `kinds`, keeping one page per index/table block (as the existing test
/// does so that no block is wholly unreadable).
pub fn kill_tables(sim: &mut Sim, kinds: &[PageKind]) -> usize {
    let ppb = TINY.geometry.pages_per_block();
    let mut victims = pages_of(sim, kinds);
    let mut blocks: Vec<u32> = pages_of(sim, &[PageKind::Index, PageKind::Table])
        .iter()
        .map(|p| p / ppb)
        .collect();
    blocks.dedup();
    for b in blocks {
        if let Some(i) = victims.iter().rposition(|p| p / ppb == b) {
            if victims.iter().filter(|p| *p / ppb == b).count() > 1 {
                victims.remove(i);
            }
        }
    }
    let n = victims.len();
    for p in victims {
        kill(sim, p);
    }
    n
}

/// Verify: mounts; every file in `want` either reads exactly or is named in `out`
/// (problem / lost+found / rolled back). Returns the list of files that differ.
pub fn verify(sim: &mut Sim, want: &[(String, Vec<u8>)], out: &str, tag: &str) -> Vec<String> {
    let mut v = volume::over(sim);
    v.mount()
        .unwrap_or_else(|e| panic!("{tag}: mount after repair: {e}\n{out}"));
    let mut differ = Vec::new();
    let mut silent = Vec::new();
    for (p, d) in want {
        let ok = matches!(volume::read_file(&mut v, p), Ok(ref g) if g == d);
        if !ok {
            differ.push(p.clone());
            let named = out.contains(&format!("problem: {p}:"))
                || out.contains(&format!("{p}: "))
                || out.contains(&format!("rolled back: {p}"));
            let cannot_tell = out.contains("cannot tell which");
            if !named && !cannot_tell {
                silent.push(p.clone());
            }
        }
    }
    v.unmount().unwrap();
    assert!(
        silent.is_empty(),
        "{tag}: files differ but not named: {silent:?}\n{out}"
    );
    differ
}
