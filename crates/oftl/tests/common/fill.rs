//! Stores filled with whole-page objects to a share of their capacity, in-place page
//! rewrites that may be refused at capacity, and the check of every object against the
//! model (the capacity tests of `full_device.rs` and the stop 37 reviews).

use std::collections::BTreeMap;

use nand_hal::sim::{HeapStorage, SimNand};
use oftl::{ObjKind, Oftl, SpacePolicy, WriteError};

/// Object id -> its bytes.
pub type Model = BTreeMap<u32, Vec<u8>>;

const PAGE: usize = 2048;

/// A store over the simulator with 2 KiB pages, any block count, cache, buffers,
/// policy, metadata unit and log page.
pub type On<
    'a,
    const BL: usize,
    const C: usize,
    const W: usize,
    P,
    const M: usize,
    const L: usize,
> = Oftl<&'a mut SimNand<HeapStorage>, 2048, BL, C, W, P, M, L>;

/// Deterministic bytes (a multiplicative hash of the offset, shifted by `seed`).
pub fn pat(seed: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8)
        .collect()
}

/// Fills with `opages`-page objects until the valid pages reach `fill` of capacity.
pub fn fill_to<
    P: SpacePolicy,
    const BL: usize,
    const C: usize,
    const W: usize,
    const M: usize,
    const L: usize,
>(
    fs: &mut On<'_, BL, C, W, P, M, L>,
    fill: f64,
    opages: usize,
) -> Model {
    let cap = fs.capacity_pages();
    let mut model = Model::new();
    let mut i = 0u32;
    while (fs.used_pages() as f64) < fill * cap as f64 {
        let o = fs.create(ObjKind::Object).unwrap();
        let d = pat(i, opages * PAGE);
        fs.write(o, 0, &d).and_then(|()| fs.flush(o)).unwrap();
        model.insert(o, d);
        i += 1;
    }
    model
}

/// Every object of the model is listed and reads its bytes, and no other is listed.
pub fn check<
    P: SpacePolicy,
    const BL: usize,
    const C: usize,
    const W: usize,
    const M: usize,
    const L: usize,
>(
    fs: &mut On<'_, BL, C, W, P, M, L>,
    model: &Model,
) {
    let listed: Vec<u32> = fs.objects().map(Result::unwrap).collect();
    assert_eq!(listed, model.keys().copied().collect::<Vec<_>>());
    for (&o, d) in model {
        let mut b = vec![0u8; d.len()];
        assert_eq!(fs.read(o, 0, &mut b).unwrap(), d.len());
        assert!(b == *d, "object {o} differs");
    }
}

/// Rewrites `d` at `off` in place: `true` acknowledged (model updated), `false` refused
/// with `NoSpace` (buffer discarded).
pub fn rewrite<
    P: SpacePolicy,
    const BL: usize,
    const C: usize,
    const W: usize,
    const M: usize,
    const L: usize,
>(
    fs: &mut On<'_, BL, C, W, P, M, L>,
    model: &mut Model,
    o: u32,
    off: usize,
    d: &[u8],
) -> bool {
    match fs.write(o, off as u64, d).and_then(|()| fs.flush(o)) {
        Ok(()) => {
            model.get_mut(&o).unwrap()[off..off + d.len()].copy_from_slice(d);
            true
        }
        Err(WriteError::NoSpace) => {
            fs.discard(o);
            false
        }
        Err(e) => panic!("rewrite of {o} at {off}: {e:?}"),
    }
}
