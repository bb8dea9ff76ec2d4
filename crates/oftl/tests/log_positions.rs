//! Log streams far along: positions a test never reaches by appending (a device logging
//! 64-byte records at 10 a second gets there within years; the staging log of the file
//! layer, at full speed, within days). Streams are moved there with the hidden
//! `Oftl::log_skip_to` and then appended to across the sector trailers' 24-bit logical
//! page field (2^24 pages), the 512-byte metadata layout's old bound (2^25 pages), the
//! whole-page layout's old bound (2^27 pages: LSN 2^29) and LSN 2^32, with clean and
//! crashed remounts, collection, and a rebuild from a full scan.
//!
//! An object-table check of a stream's end LSN against the largest *object* size made
//! every store holding such a stream fail (`Corrupted`, the store poisoned) once the end
//! passed 2^29 sectors (2^25 with 512-byte metadata units: 39 days of 64-byte appends at
//! 10 a second). Found by this file.

use crate::common;

use common::lifecycle::Lifecycle;
use common::*;
use nand_hal::sim::profile;
use nand_hal::NandFlash;
use oftl::{Greedy, ObjKind, Oftl};

/// Where each stream starts: logical pages just below each boundary.
const STARTS: [u64; 4] = [(1 << 24) - 3, (1 << 25) - 2, (1 << 27) - 2, (1 << 30) - 2];

type Store<'a, const M: usize> = Oftl<&'a mut Sim, 2048, 64, 4, 2, Greedy, M>;

fn rec(stream: usize, i: u32) -> Vec<u8> {
    bytes(
        stream as u32 * 10_000 + i,
        if i % 7 == 3 { 700 } else { 64 },
    )
}

fn check<const M: usize>(
    fs: &mut Store<'_, M>,
    ids: &[u32],
    want: &[Vec<(u64, Vec<u8>)>],
    what: &str,
) {
    for (k, &id) in ids.iter().enumerate() {
        let got = log_records(fs, id);
        assert_eq!(got.len(), want[k].len(), "{what}: stream {k} record count");
        assert!(got == want[k], "{what}: stream {k} records differ");
    }
}

fn run<const M: usize>() {
    let mut sim = Sim::heap(profile::TINY, nand_hal::sim::FaultPlan::seeded(3));
    let spp = (sim.geometry().page_size() / sim.capabilities().program_unit) as u64;
    let mut fs = Store::<M>::formatted(&mut sim, cfg()).unwrap();
    let ids: Vec<u32> = STARTS
        .iter()
        .map(|_| fs.create(ObjKind::Log).unwrap())
        .collect();
    let mut want: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(); ids.len()];
    for (k, &id) in ids.iter().enumerate() {
        fs.log_append(id, &rec(k, 0)).unwrap();
        fs.log_skip_to(id, STARTS[k] * spp).unwrap();
        assert_eq!(
            fs.log_bounds(id).unwrap(),
            (STARTS[k] * spp, STARTS[k] * spp)
        );
    }
    fs.sync().unwrap();
    let mut i = 1u32;
    for round in 0..6 {
        // Runs of appends to one stream continue its page; switching streams starts
        // new pages.
        for (k, &id) in ids.iter().enumerate() {
            for _ in 0..5 {
                let data = rec(k, i);
                let lsn = fs.log_append(id, &data).unwrap();
                want[k].push((lsn, data));
                i += 1;
            }
        }
        match round {
            1 => {
                fs.unmount().unwrap();
                fs = Store::<M>::mounted(&mut sim).unwrap();
                check(&mut fs, &ids, &want, "after a clean remount");
            }
            2 | 4 => {
                // A crash: no unmount; the recovery replays the sectors since the sync.
                drop(fs);
                fs = Store::<M>::mounted(&mut sim).unwrap();
                check(&mut fs, &ids, &want, "after a crash");
            }
            3 => {
                for (k, &id) in ids.iter().enumerate() {
                    let keep = want[k].split_off(4);
                    fs.log_trim(id, keep[0].0).unwrap();
                    want[k] = keep;
                }
                while fs.gc_step(64).unwrap().more {}
                check(&mut fs, &ids, &want, "after trims and collection");
            }
            _ => {}
        }
    }
    let mut ends = Vec::new();
    for (k, &id) in ids.iter().enumerate() {
        let end = fs.log_bounds(id).unwrap().1;
        assert!(
            end / spp > STARTS[k] + 3,
            "stream {k} crossed its boundary: {end}"
        );
        ends.push(end);
    }
    drop(fs);
    // A rebuild from the pages' tags alone (trim points from metadata pages, logical
    // pages from the 24-bit fields near them).
    let mut fs = Store::<M>::new(&mut sim, cfg(), Default::default());
    fs.mount_damaged(oftl::Damaged::Rebuild {
        lost_meta_attrs: [0xFF; oftl::ATTR_LEN],
    })
    .unwrap();
    check(&mut fs, &ids, &want, "after a rebuild");
    for (k, &id) in ids.iter().enumerate() {
        assert_eq!(
            fs.log_bounds(id).unwrap().1,
            ends[k],
            "stream {k}: end after a rebuild"
        );
        let data = rec(k, i);
        let lsn = fs.log_append(id, &data).unwrap();
        assert!(
            lsn >= ends[k],
            "stream {k}: appended at {lsn}, below its end"
        );
        want[k].push((lsn, data));
        i += 1;
    }
    fs.unmount().unwrap();
    let mut fs = Store::<M>::mounted(&mut sim).unwrap();
    check(&mut fs, &ids, &want, "after work on the rebuilt store");
}

#[test]
fn streams_past_every_position_bound() {
    run::<2048>();
}

#[test]
fn streams_past_every_position_bound_small_metadata_units() {
    run::<512>();
}
