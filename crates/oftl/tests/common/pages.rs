//! Raw page tags of a simulated part, for tests that pick pages to damage: every
//! programmed page's backpointer as written, pages changed between two images, and
//! making a page unreadable.

use nand_hal::{NandFlash, PageAddr};
use oftl::format::backpointer::{Backpointer, PageKind};

use super::Sim;

/// A programmed page's tag.
#[derive(Debug, Clone, Copy)]
pub struct Pg {
    pub seq: u32,
    pub page: u32,
    pub owner: u32,
    pub lpn: u32,
    pub kind: PageKind,
    pub commit: bool,
    pub tx: u32,
    pub relocated: bool,
}

/// Every page whose tag parses (the protected spare bytes, else the in-band trailer),
/// read raw (no fault, no read count).
pub fn all_pages(sim: &Sim) -> Vec<Pg> {
    let caps = *sim.capabilities();
    let mut out = Vec::new();
    let mut d = vec![0u8; 2048];
    let mut oob = vec![0u8; 64];
    for p in 0..sim.geometry().pages() {
        sim.peek(PageAddr(p), &mut d, &mut oob);
        if let Some(bp) = tag_of(&caps, &d, &oob) {
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

/// The tag in a page's bytes as programmed or read: the protected spare bytes, else the
/// in-band trailer at the end of the first program unit.
pub fn tag_of(caps: &nand_hal::Capabilities, data: &[u8], oob: &[u8]) -> Option<Backpointer> {
    if oob.len() >= 2 {
        let mut g = [0u8; 16];
        caps.oob.gather_protected(oob, &mut g);
        if let Ok(Some(bp)) = Backpointer::parse(&g) {
            return Some(bp);
        }
    }
    data.get(496..512)
        .and_then(|t| Backpointer::parse(t).ok().flatten())
}

/// The data head's pages (data and metadata, not GC copies) in sequence order.
pub fn data_head(sim: &Sim) -> Vec<Pg> {
    let mut v: Vec<Pg> = all_pages(sim)
        .into_iter()
        .filter(|p| matches!(p.kind, PageKind::Data | PageKind::Meta) && !p.relocated)
        .collect();
    v.sort_by_key(|p| p.seq);
    v
}

/// Pages whose data or spare bytes differ between two images.
pub fn changed_pages(a: &Sim, b: &Sim) -> Vec<u32> {
    let mut buf = [
        vec![0u8; 2048],
        vec![0u8; 64],
        vec![0u8; 2048],
        vec![0u8; 64],
    ];
    (0..a.geometry().pages())
        .filter(|&p| {
            let [d1, o1, d2, o2] = &mut buf;
            a.peek(PageAddr(p), d1, o1);
            b.peek(PageAddr(p), d2, o2);
            d1 != d2 || o1 != o2
        })
        .collect()
}

/// Makes a page unreadable for good: more bit flips in each of its four ECC steps than
/// the ECC corrects.
pub fn kill(sim: &mut Sim, page: u32) {
    for st in 0..4 {
        sim.inject_flips(PageAddr(page), st, 40);
    }
}

/// The data head's newest block, when a block started after the checkpoint (`old`: the
/// pages programmed before it): the block, the head's newest page, and the head's pages
/// since the checkpoint in that block.
pub fn fresh_newest_data_block(sim: &Sim, old: &[u32]) -> Option<(u32, Pg, Vec<u32>)> {
    let ppb = sim.geometry().pages_per_block();
    let head: Vec<Pg> = data_head(sim)
        .into_iter()
        .filter(|p| !old.contains(&p.page))
        .collect();
    let last = *head.last()?;
    let b = last.page / ppb;
    if old.iter().any(|&p| p / ppb == b) {
        return None;
    }
    let in_b = head
        .iter()
        .filter(|p| p.page / ppb == b)
        .map(|p| p.page)
        .collect();
    Some((b, last, in_b))
}
