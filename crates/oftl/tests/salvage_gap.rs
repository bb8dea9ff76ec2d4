//! Salvage mount past a gap of unreadable pages that straddles a transaction boundary
//! (found by an independent review): every transaction with a page in the gap is left
//! out whole, never applied in part.

#![allow(dead_code)]

mod common;

use common::{bytes, cfg, Fs, Sim};
use nand_hal::sim::profile::TINY;
use nand_hal::sim::FaultPlan;
use nand_hal::{NandFlash, PageAddr};
use oftl::format::backpointer::{Backpointer, PageKind};
use oftl::{Greedy, MountError, ObjKind, Oftl, ReadError, TxOp};

const PAGE: usize = 2048;

fn read_all<F: NandFlash>(
    fs: &mut Oftl<F, 2048, 64, 4, 2, Greedy>,
    id: u32,
) -> Result<Vec<u8>, ReadError<F::Error>> {
    let n = fs.size(id)? as usize;
    let mut b = vec![0u8; n];
    let got = fs.read(id, 0, &mut b)?;
    assert_eq!(got, n);
    Ok(b)
}

#[derive(Debug, Clone, Copy)]
struct Pg {
    seq: u32,
    page: u32,
    owner: u32,
    lpn: u32,
    kind: PageKind,
    commit: bool,
    tx: u32,
    relocated: bool,
}

fn all_pages(sim: &Sim) -> Vec<Pg> {
    let caps = *sim.capabilities();
    let mut out = Vec::new();
    for p in 0..sim.geometry().pages() {
        let mut d = vec![0u8; 2048];
        let mut oob = vec![0u8; 64];
        sim.peek(PageAddr(p), &mut d, &mut oob);
        let mut g = [0u8; 16];
        caps.oob.gather_protected(&oob, &mut g);
        let bp = match Backpointer::parse(&g) {
            Ok(Some(bp)) => Some(bp),
            _ => Backpointer::parse(&d[496..512]).ok().flatten(),
        };
        if let Some(bp) = bp {
            out.push(Pg {
                seq: bp.seq,
                page: p,
                owner: bp.owner,
                lpn: bp.lpn,
                kind: bp.kind,
                commit: bp.commit,
                tx: bp.tx_id(),
                relocated: bp.relocated,
            });
        }
    }
    out
}

/// Data-head pages (data/meta, not relocated) sorted by seq.
fn data_head(sim: &Sim) -> Vec<Pg> {
    let mut v: Vec<Pg> = all_pages(sim)
        .into_iter()
        .filter(|p| matches!(p.kind, PageKind::Data | PageKind::Meta) && !p.relocated)
        .collect();
    v.sort_by_key(|p| p.seq);
    v
}

fn kill(sim: &mut Sim, page: u32) {
    for st in 0..4 {
        sim.inject_flips(PageAddr(page), st, 40);
    }
}

/// T1 (x, 3 pages) and T2 (y, 3 pages) after a sync, then T3 (z); T1's commit page
/// and T2's first page become unreadable.
#[test]
fn gap_across_a_transaction_boundary_leaves_the_second_out_whole() {
    let mut sim = Sim::heap(TINY, FaultPlan::seeded(5));
    let (x, y, z);
    let v0x = bytes(1, 3 * PAGE);
    let v0y = bytes(2, 3 * PAGE);
    let v1x = bytes(3, 3 * PAGE);
    let v1y = bytes(4, 3 * PAGE);
    let v1z = bytes(5, 3 * PAGE);
    let before;
    {
        let mut fs = Fs::format(&mut sim, cfg()).unwrap();
        x = fs.create(ObjKind::Object).unwrap();
        y = fs.create(ObjKind::Object).unwrap();
        z = fs.create(ObjKind::Object).unwrap();
        fs.write(x, 0, &v0x).unwrap();
        fs.write(y, 0, &v0y).unwrap();
        fs.sync().unwrap();
        before = Sim::clone(&**fs.flash());
        fs.transact(&[TxOp::Write {
            obj: x,
            offset: 0,
            data: &v1x,
        }])
        .unwrap();
        fs.transact(&[TxOp::Write {
            obj: y,
            offset: 0,
            data: &v1y,
        }])
        .unwrap();
        fs.transact(&[TxOp::Write {
            obj: z,
            offset: 0,
            data: &v1z,
        }])
        .unwrap();
    }
    let old: std::collections::HashSet<u32> = data_head(&before).iter().map(|p| p.page).collect();
    let new: Vec<Pg> = data_head(&sim)
        .into_iter()
        .filter(|p| !old.contains(&p.page))
        .collect();
    let t1: Vec<&Pg> = new.iter().filter(|p| p.owner == x).collect();
    let t2: Vec<&Pg> = new.iter().filter(|p| p.owner == y).collect();
    let a = t1.last().unwrap().page;
    let b = t2.first().unwrap().page;
    kill(&mut sim, a);
    kill(&mut sim, b);
    assert!(matches!(
        Fs::mount(&mut sim),
        Err(MountError::MediaLoss { .. })
    ));
    let mut fs = Fs::new(&mut sim);
    fs.mount_salvage_in_place().unwrap();
    let gx = read_all(&mut fs, x).unwrap();
    let gy = read_all(&mut fs, y).unwrap();
    let gz = read_all(&mut fs, z).unwrap();
    assert!(gx == v0x, "x: its commit page is lost, so T1 is left out");
    assert!(
        gy == v0y,
        "y: T2 has a page in the gap, so it is left out whole (pages: {:?})",
        (0..3)
            .map(|i| (
                gy[i * PAGE..(i + 1) * PAGE] == v0y[i * PAGE..(i + 1) * PAGE],
                gy[i * PAGE..(i + 1) * PAGE] == v1y[i * PAGE..(i + 1) * PAGE]
            ))
            .collect::<Vec<_>>()
    );
    assert!(gz == v1z, "z: T3 is whole and after the gap");
}
