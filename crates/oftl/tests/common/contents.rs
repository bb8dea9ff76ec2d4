//! Object contents as a model (`BTreeMap` of id to bytes) and a random workload that
//! keeps one, for any store build (metadata unit, log tail page, buffers).

use std::collections::BTreeMap;

use nand_hal::NandFlash;
use oftl::{Greedy, ObjKind, Oftl};

use super::{bytes, Rng};

/// Object id to contents.
pub type Contents = BTreeMap<u32, Vec<u8>>;

/// Every object's contents (log streams left out), or the first error.
pub fn state_of<
    F: NandFlash,
    const B: usize,
    const C: usize,
    const W: usize,
    const ME: usize,
    const L: usize,
>(
    fs: &mut Oftl<F, 2048, B, C, W, Greedy, ME, L>,
) -> Result<Contents, String> {
    let ids: Vec<u32> = fs
        .objects()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{e:?}"))?;
    let mut m = Contents::new();
    for id in ids {
        if fs.attrs(id).map_err(|e| format!("{e:?}"))?.kind != ObjKind::Object {
            continue;
        }
        let n = fs.size(id).map_err(|e| format!("{e:?}"))? as usize;
        let mut b = vec![0u8; n];
        let got = fs.read(id, 0, &mut b).map_err(|e| format!("{e:?}"))?;
        if got != n {
            return Err(format!("short read {got} of {n}"));
        }
        m.insert(id, b);
    }
    Ok(m)
}

/// A random workload over up to 40 objects, the model following: creates, deletes,
/// truncates, GC steps and writes of up to `max_len` bytes (objects stay below
/// `2 * max_len`: the TINY part holds that), a sync every 50 steps and at the end.
pub fn churn<
    F: NandFlash,
    const B: usize,
    const C: usize,
    const W: usize,
    const ME: usize,
    const L: usize,
>(
    fs: &mut Oftl<F, 2048, B, C, W, Greedy, ME, L>,
    m: &mut Contents,
    rng: &mut Rng,
    steps: usize,
    max_len: usize,
) {
    for step in 0..steps {
        let ids: Vec<u32> = m.keys().copied().collect();
        let pick = |rng: &mut Rng| ids[rng.below(ids.len() as u64) as usize];
        match rng.below(10) {
            0 | 1 if m.len() < 40 => {
                let id = fs.create(ObjKind::Object).unwrap();
                m.insert(id, Vec::new());
            }
            2 if m.len() > 10 => {
                let id = pick(rng);
                fs.delete(id).unwrap();
                m.remove(&id);
            }
            3 if !ids.is_empty() => {
                let id = pick(rng);
                let o = m.get_mut(&id).unwrap();
                let size = rng.below(o.len() as u64 + 1);
                fs.truncate(id, size).unwrap();
                o.truncate(size as usize);
            }
            4 => {
                let _ = fs.gc_step(1 + rng.below(40) as u32).unwrap();
            }
            _ if !ids.is_empty() => {
                let id = pick(rng);
                let o = m.get_mut(&id).unwrap();
                let len = 1 + rng.below(max_len as u64) as usize;
                let off = rng.below(o.len().min(max_len) as u64 + 1) as usize;
                let d = bytes(step as u32 ^ (rng.next() as u32), len);
                fs.write(id, off as u64, &d).unwrap();
                if o.len() < off + len {
                    o.resize(off + len, 0);
                }
                o[off..off + len].copy_from_slice(&d);
            }
            _ => {}
        }
        if step % 50 == 49 {
            fs.sync().unwrap();
        }
    }
    fs.sync().unwrap();
}

/// Synced writes (and GC steps) until one fails, as under an armed power cut: returns
/// the contents before and after the operation in flight, and whether one failed.
pub fn cut_writes<
    F: NandFlash,
    const B: usize,
    const C: usize,
    const W: usize,
    const ME: usize,
    const L: usize,
>(
    fs: &mut Oftl<F, 2048, B, C, W, Greedy, ME, L>,
    m: &Contents,
    rng: &mut Rng,
) -> (Contents, Contents, bool) {
    let mut before = m.clone();
    let mut after = m.clone();
    for step in 0..300u32 {
        let ids: Vec<u32> = before.keys().copied().collect();
        let id = ids[rng.below(ids.len() as u64) as usize];
        let d = bytes(
            step + 7000 + rng.below(1000) as u32,
            1 + rng.below(6000) as usize,
        );
        let o = after.get_mut(&id).unwrap();
        let off = rng.below(o.len() as u64 + 1) as usize;
        if o.len() < off + d.len() {
            o.resize(off + d.len(), 0);
        }
        o[off..off + d.len()].copy_from_slice(&d);
        if fs.write(id, off as u64, &d).is_err() || fs.sync().is_err() {
            return (before, after, true);
        }
        if step % 7 == 3 && fs.gc_step(20).is_err() {
            // gc cut: the write was synced before it
            return (after.clone(), after, true);
        }
        before = after.clone();
    }
    (before, after, false)
}
