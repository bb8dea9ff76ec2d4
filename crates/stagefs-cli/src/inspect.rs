//! `stagefs inspect`: what the store on an image looks like: block states, valid
//! pages, erase counts and bad blocks as a summary and a map, and the spare-area tags
//! of one page.

use std::fmt::Write as _;

use nand_hal::sim::profile::Profile;
use nand_hal::PageAddr;
use oftl::format::backpointer::{Backpointer, Placement, BP_LEN};
use oftl::{BlockInfo, BlockState, Stats};

use crate::image::Sim;

/// One character per block in the map.
pub fn block_char(b: &BlockInfo, pages_per_block: u32) -> char {
    match b.state() {
        BlockState::Free => '.',
        BlockState::Window => 'w',
        BlockState::Bad => 'B',
        BlockState::Reserved => 'R',
        BlockState::Full => {
            // Valid share in tenths: 0 (nearly all stale) to 9 (full of live pages).
            let tenth = (b.valid() as u32 * 10 / pages_per_block.max(1)).min(9);
            char::from_digit(tenth, 10).unwrap_or('#')
        }
    }
}

/// The summary and block map of a mounted store.
pub fn summary(profile: &Profile, blocks: &[BlockInfo], stats: &Stats) -> String {
    let g = profile.geometry;
    let ppb = g.pages_per_block();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "part {}: {} blocks x {} pages x {} B (+{} B spare)",
        profile.name,
        g.blocks(),
        ppb,
        g.page_size(),
        g.oob_size()
    );
    let count = |st: BlockState| blocks.iter().filter(|b| b.state() == st).count();
    let _ = writeln!(
        s,
        "blocks: {} free, {} window, {} full, {} bad, {} reserved",
        count(BlockState::Free),
        count(BlockState::Window),
        count(BlockState::Full),
        count(BlockState::Bad),
        count(BlockState::Reserved)
    );
    let valid: u64 = blocks.iter().map(|b| b.valid() as u64).sum();
    let _ = writeln!(
        s,
        "valid pages: {valid} of {} ({:.2} MiB live)",
        g.pages(),
        valid as f64 * g.page_size() as f64 / (1024.0 * 1024.0)
    );
    let good: Vec<u32> = blocks
        .iter()
        .filter(|b| b.state() != BlockState::Bad)
        .map(|b| b.erases())
        .collect();
    if let (Some(lo), Some(hi)) = (good.iter().min(), good.iter().max()) {
        let mean = good.iter().map(|&e| e as f64).sum::<f64>() / good.len() as f64;
        let _ = writeln!(s, "erase counts: min {lo}, mean {mean:.1}, max {hi}");
    }
    let bad: Vec<String> = blocks
        .iter()
        .enumerate()
        .filter(|(_, b)| b.state() == BlockState::Bad)
        .map(|(i, _)| i.to_string())
        .collect();
    let _ = writeln!(
        s,
        "bad blocks: {}",
        if bad.is_empty() {
            "none".into()
        } else {
            bad.join(", ")
        }
    );
    if stats.recovery_scanned_pages > 0 {
        let _ = writeln!(
            s,
            "mount: recovered a crash ({} pages scanned, {} replayed)",
            stats.recovery_scanned_pages, stats.recovery_replayed_pages
        );
    } else {
        let _ = writeln!(s, "mount: clean");
    }
    let _ = writeln!(
        s,
        "\nblock map ('.' free, 'w' window, 0-9 full with that many tenths valid, 'B' bad, 'R' reserved):"
    );
    for (row, chunk) in blocks.chunks(64).enumerate() {
        let line: String = chunk.iter().map(|b| block_char(b, ppb)).collect();
        let _ = writeln!(s, "{:5} {line}", row * 64);
    }
    s
}

/// The staging area in words.
pub fn staging(s: &stagefs_core::StagingStatus) -> String {
    format!(
        "staging: log stream {} holds {} bytes of records (LSN {} to {}); {} files with records not yet patched home, {} inline files staged, {} bytes staged since the last patch; a replay would write up to {} pages\n",
        s.stream,
        s.end_lsn - s.first_lsn,
        s.first_lsn,
        s.end_lsn,
        s.staged_objects,
        s.staged_inline,
        s.staged_bytes,
        s.replay_pages
    )
}

/// The spare-area tags of page `page`: the owned bytes and, where the store keeps
/// backpointers in the spare area, the backpointer decoded.
pub fn page_tags(sim: &Sim, page: u32) -> Result<String, String> {
    let p = sim.profile();
    let g = p.geometry;
    if page >= g.pages() {
        return Err(format!(
            "page {page} is past the part's {} pages",
            g.pages()
        ));
    }
    let mut data = vec![0u8; g.page_size() as usize];
    let mut oob = vec![0u8; g.oob_size() as usize];
    sim.peek(PageAddr(page), &mut data, &mut oob);
    let mut free = vec![0u8; p.capabilities.oob.free_bytes()];
    p.capabilities.oob.gather_free(&oob, &mut free);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "page {page} (block {}, page {} in block)",
        page / g.pages_per_block(),
        page % g.pages_per_block()
    );
    let hex: Vec<String> = free.iter().map(|b| format!("{b:02x}")).collect();
    let _ = writeln!(s, "owned spare bytes: {}", hex.join(" "));
    let bp = match Placement::for_caps(&p.capabilities) {
        Placement::Oob => {
            let mut b = [0u8; BP_LEN];
            p.capabilities.oob.gather_protected(&oob, &mut b);
            Backpointer::parse(&b)
        }
        Placement::InBand => Backpointer::parse(&data[data.len() - BP_LEN..]),
    };
    let _ = match bp {
        Ok(None) => writeln!(s, "backpointer: none (erased, or a log or checkpoint page)"),
        Ok(Some(b)) => writeln!(
            s,
            "backpointer: {:?} of object {} page {}, {} valid bytes, sequence {}, transaction delta {}{}{}",
            b.kind,
            b.owner,
            b.lpn,
            b.len,
            b.seq,
            b.tx_delta,
            if b.commit { ", commit" } else { "" },
            if b.relocated { ", relocated copy" } else { "" }
        ),
        Err(_) => writeln!(s, "backpointer: does not parse (not a data page, or damaged)"),
    };
    Ok(s)
}
