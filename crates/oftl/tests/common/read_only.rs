//! The stores of the read-only mount tests (`read_only_mounts.rs` and the stop 38
//! reviews): objects of eight pages, then a page of every `step`-th rewritten, either
//! left to a crash (a replay writes cache pages back at every read-only mount) or
//! unmounted (a second checkpoint), and the salvage mount that reads them all back.

use nand_hal::sim::{HeapStorage, SimNand};
use oftl::{Damaged, Greedy, Health, ObjKind, ReadOnlyReason, SpacePolicy};

use super::lifecycle::Lifecycle;

use super::{bytes, cfg, Fs, FsWith};

type Sim = SimNand<HeapStorage>;

/// Objects the stores hold.
pub const OBJECTS: u32 = 24;

/// Object id and the bytes it must read.
pub type Want = Vec<(u32, Vec<u8>)>;

/// `OBJECTS` objects of 8 pages (past the three pages a record maps, so each has index
/// pages), unmounted; then page 5 of every `step`-th rewritten with 700 bytes of
/// pattern `seed + i` and flushed, and the store unmounted when `unmount`, else dropped.
pub fn rewritten_store(sim: &mut Sim, step: usize, seed: u32, unmount: bool) -> Want {
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
    let mut fs = Fs::new(sim, cfg(), Greedy::DEFAULT);
    fs.mount().unwrap();
    for (i, (o, d)) in want.iter_mut().enumerate().step_by(step) {
        let new = bytes(seed + i as u32, 700);
        fs.write(*o, 5 * 2048, &new).unwrap();
        d[5 * 2048..5 * 2048 + 700].copy_from_slice(&new);
        fs.flush(*o).unwrap();
    }
    if unmount {
        fs.unmount().unwrap();
    }
    want
}

/// A crashed store whose window replay dirties more object-table and index pages than
/// the 4-page cache holds (a page of every eighth object rewritten, then dropped): a
/// replay writes 6 cache pages back.
pub fn crashed_store(sim: &mut Sim) -> Want {
    rewritten_store(sim, 8, 1000, false)
}

/// Two checkpoints: `Ca` (an unmount), then a session that rewrote a page of every
/// `step`-th object (its window used, so `Ca` carries a marker) and unmounted: `C`,
/// whose index flush went to an index block taken after `Ca` (free in `Ca`).
pub fn two_checkpoints(sim: &mut Sim, step: usize) -> Want {
    rewritten_store(sim, step, 2000, true)
}

/// Every object of `want` reads its bytes.
pub fn read_all_ok<P: SpacePolicy>(
    fs: &mut FsWith<'_, P>,
    want: &[(u32, Vec<u8>)],
) -> Result<(), String> {
    for (o, d) in want {
        let mut buf = vec![0u8; d.len()];
        fs.read(*o, 0, &mut buf)
            .map_err(|e| format!("read of {o}: {e:?}"))?;
        if &buf != d {
            return Err(format!("object {o} reads other bytes"));
        }
    }
    Ok(())
}

/// A salvage mount (read-only) that reads every object back.
pub fn salvage_and_read(sim: &mut Sim, want: &[(u32, Vec<u8>)]) -> Result<(), String> {
    let mut fs = Fs::new(sim, cfg(), Greedy::DEFAULT);
    fs.mount_damaged(Damaged::Salvage)
        .map_err(|e| format!("salvage mount: {e:?}"))?;
    if fs.health() != Health::ReadOnly(ReadOnlyReason::Salvage) {
        return Err(format!("salvage mount: {:?}", fs.health()));
    }
    read_all_ok(&mut fs, want)
}

/// Applies to `dst` what turned `before` into `after` in pages `changed`: programs of
/// erased pages as programs; a block with any other change erased and programmed
/// again from `after` (a salvage that erased a block).
pub fn mirror(before: &Sim, after: &Sim, dst: &mut Sim, changed: &[u32]) {
    use nand_hal::{BlockAddr, NandFlash, PageAddr};
    let ppb = 16;
    let (mut d, mut o) = (vec![0u8; 2048], vec![0u8; 64]);
    let erased = |s: &Sim, p: u32, d: &mut Vec<u8>, o: &mut Vec<u8>| {
        s.peek(PageAddr(p), d, o);
        d.iter().chain(o.iter()).all(|&x| x == 0xFF)
    };
    let mut blocks: Vec<u32> = changed.iter().map(|p| p / ppb).collect();
    blocks.dedup();
    for b in blocks {
        let pages: Vec<u32> = (b * ppb..(b + 1) * ppb).collect();
        let only_programs = pages
            .iter()
            .filter(|p| changed.contains(p))
            .all(|&p| erased(before, p, &mut d, &mut o));
        if !only_programs {
            dst.erase(BlockAddr(b)).unwrap();
        }
        for p in pages {
            if (!only_programs || changed.contains(&p)) && !erased(after, p, &mut d, &mut o) {
                after.peek(PageAddr(p), &mut d, &mut o);
                dst.program(PageAddr(p), 0, &d, &o).unwrap();
            }
        }
    }
}
