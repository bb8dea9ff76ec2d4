//! A crash recovery leaves the data and cold heads' cut blocks to collection when the
//! cut left nothing after the data head's last commit and the pool has room
//! (`recovery::cut_block_may_wait`): the mount moves the suspect page only, where it
//! moved up to a block of pages and wrote back the index pages of every owner there
//! (review s42's probe at 50 % of capacity: 119.9 ms).
//!
//! The blocks stay on flash with their committed pages until collection takes them.
//! These tests check that what they hold stays right through more work, a second cut
//! before collection got to them, and a full-scan rebuild that sees them.

#![cfg(feature = "alloc")]

use crate::common;
use common::lifecycle::Lifecycle;
use common::pages::{all_pages, kill};
use common::{Rng, Sim};

use nand_hal::sim::{profile, CutKind, FaultPlan};
use oftl::format::backpointer::PageKind;
use oftl::{Config, ObjKind, ObjectId};

type Fs<'a> = oftl::W25n01gv<&'a mut Sim>;

const OBJS: usize = 25;
const PAGE: usize = 2048;

/// Which version each page of each object holds (0: as first written).
struct Model {
    ids: Vec<ObjectId>,
    pages: u64,
    version: Vec<Vec<u32>>,
}

impl Model {
    fn image(o: usize, p: u64, v: u32) -> Vec<u8> {
        let mut b = vec![(v as u8) ^ (o as u8); PAGE];
        b[..4].copy_from_slice(&(o as u32).to_le_bytes());
        b[4..8].copy_from_slice(&(p as u32).to_le_bytes());
        b[8..12].copy_from_slice(&v.to_le_bytes());
        b
    }

    /// Pages whose version differs from the model's, except `pending` (a write the cut
    /// interrupted: either version).
    fn check(&self, fs: &mut Fs<'_>, pending: Option<(usize, u64, u32)>) -> Result<(), String> {
        let mut buf = vec![0u8; PAGE];
        for (o, &id) in self.ids.iter().enumerate() {
            for p in 0..self.pages {
                fs.read(id, p * PAGE as u64, &mut buf)
                    .map_err(|e| format!("object {o} page {p}: {e:?}"))?;
                let want = self.version[o][p as usize];
                if buf == Self::image(o, p, want) {
                    continue;
                }
                if pending
                    .is_some_and(|(po, pp, pv)| (po, pp) == (o, p) && buf == Self::image(o, p, pv))
                {
                    continue;
                }
                let got = u32::from_le_bytes(buf[8..12].try_into().unwrap());
                return Err(format!("object {o} page {p}: version {got}, want {want}"));
            }
        }
        Ok(())
    }
}

/// A random one-page overwrite, flushed (one transaction).
fn overwrite(fs: &mut Fs<'_>, m: &mut Model, rng: &mut Rng) -> Result<(), (usize, u64, u32)> {
    let o = rng.below(OBJS as u64) as usize;
    let p = rng.below(m.pages);
    let v = m.version[o][p as usize] + 1;
    let id = m.ids[o];
    let done = fs
        .write(id, p * PAGE as u64, &Model::image(o, p, v))
        .is_ok()
        && fs.flush(id).is_ok();
    if !done {
        return Err((o, p, v));
    }
    m.version[o][p as usize] = v;
    Ok(())
}

/// A W25N01GV store (16-block window: collection in slices, copies dropped at
/// recovery) half full with 25 objects, after `warm` random overwrites.
fn half_full(seed: u64, warm: u64) -> (Sim, Model, Rng) {
    let mut sim = Sim::heap(profile::W25N01GV, FaultPlan::seeded(seed));
    let mut rng = Rng(seed | 1);
    let m = {
        let mut fs = Fs::formatted(&mut sim, Config::default()).unwrap();
        let pages = fs.capacity_pages() / 2 / OBJS as u64;
        let mut m = Model {
            ids: Vec::new(),
            pages,
            version: vec![vec![0; pages as usize]; OBJS],
        };
        for o in 0..OBJS {
            let id = fs.create(ObjKind::Object).unwrap();
            for p in 0..pages {
                fs.write(id, p * PAGE as u64, &Model::image(o, p, 0))
                    .unwrap();
            }
            m.ids.push(id);
        }
        fs.sync().unwrap();
        for _ in 0..warm {
            overwrite(&mut fs, &mut m, &mut rng).unwrap();
        }
        m
    };
    (sim, m, rng)
}

/// Mounts `sim` after a cut between two calls: the recovery's relocated pages.
fn recover(sim: &mut Sim) -> u64 {
    let fs = Fs::mounted(sim).unwrap();
    fs.stats().relocated_pages
}

#[test]
fn committed_cut_blocks_wait_for_collection_and_hold_through_work_cuts_and_rebuilds() {
    let (mut sim, mut m, mut rng) = half_full(5, 12_000);
    let mut samples = 0;
    for round in 0..4u64 {
        // More overwrites, then the power goes between two calls.
        {
            let mut fs = Fs::mounted(&mut sim).unwrap();
            for _ in 0..37 + round {
                overwrite(&mut fs, &mut m, &mut rng).unwrap();
            }
        }
        let moved = recover(&mut sim);
        assert!(
            moved <= 1,
            "round {round}: the recovery moved {moved} pages"
        );
        samples += 1;

        // A full-scan rebuild sees the blocks the recovery left (checkpoints gone).
        if round % 2 == 0 {
            let mut copy = sim.clone();
            for p in all_pages(&copy)
                .into_iter()
                .filter(|p| matches!(p.kind, PageKind::Checkpoint | PageKind::Marker))
            {
                kill(&mut copy, p.page);
            }
            let mut fs = Fs::new(&mut copy, Config::new(), Default::default());
            fs.mount_damaged(oftl::Damaged::Rebuild {
                lost_meta_attrs: [0xFF; oftl::ATTR_LEN],
            })
            .unwrap();
            drop(fs);
            let mut fs = Fs::mounted(&mut copy).unwrap();
            m.check(&mut fs, None)
                .unwrap_or_else(|e| panic!("round {round}, after a rebuild: {e}"));
        }

        // A cut inside a later write, before collection took the blocks: every
        // acknowledged page reads back, the interrupted one either way.
        let pending = {
            let mut fs = Fs::mounted(&mut sim).unwrap();
            m.check(&mut fs, None)
                .unwrap_or_else(|e| panic!("round {round}, after the recovery: {e}"));
            let k = 1 + rng.below(6);
            fs.flash_mut().arm(
                FaultPlan::seeded(round)
                    .with_cut(k, CutKind::ALL[round as usize % CutKind::ALL.len()]),
            );
            let mut pending = None;
            for _ in 0..8 {
                if let Err(p) = overwrite(&mut fs, &mut m, &mut rng) {
                    pending = Some(p);
                    break;
                }
            }
            pending
        };
        assert!(pending.is_some(), "round {round}: the cut never came");
        sim.power_on();
        sim.disarm();
        let mut fs = Fs::mounted(&mut sim).unwrap();
        m.check(&mut fs, pending)
            .unwrap_or_else(|e| panic!("round {round}, after the second cut: {e}"));
        // The interrupted write may have landed: the model takes what reads.
        if let Some((o, p, v)) = pending {
            let mut buf = vec![0u8; PAGE];
            fs.read(m.ids[o], p * PAGE as u64, &mut buf).unwrap();
            if buf == Model::image(o, p, v) {
                m.version[o][p as usize] = v;
            }
        }
        // Collection takes the blocks; the store still reads right after a clean
        // unmount and mount.
        for _ in 0..64 {
            fs.gc_step(64).unwrap();
        }
        fs.unmount().unwrap();
        let mut fs = Fs::mounted(&mut sim).unwrap();
        m.check(&mut fs, None)
            .unwrap_or_else(|e| panic!("round {round}, after collection: {e}"));
    }
    assert_eq!(samples, 4);
    assert_eq!(sim.counters().misuse, 0, "{:?}", sim.last_misuse());
}
