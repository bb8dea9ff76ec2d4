//! A store formatted over a part that held another store (a reused part, a factory
//! re-flash): pages the old store left in blocks the new one has not erased yet must
//! never be taken for the new store's, also after a power cut.

use crate::common;
use common::lifecycle::Lifecycle;

use nand_hal::sim::{profile, CutKind, FaultPlan, HeapStorage, SimNand, TornMode};
use oftl::{Config, ObjKind, Oftl};

type Sim = SimNand<HeapStorage>;
type Fs<'a> = Oftl<&'a mut Sim, 2048, 64, 6>;

fn cfg(id: u32) -> Config {
    Config {
        window_blocks: 8,
        format_id: id,
        ..Default::default()
    }
}

fn bytes(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

/// A part that held a store which wrote a lot (every block used at least once).
fn used_part(seed: u64) -> Sim {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
    let mut fs = Fs::formatted(&mut sim, cfg(1)).unwrap();
    let objs: Vec<u32> = (0..3)
        .map(|_| fs.create(ObjKind::Object).unwrap())
        .collect();
    for round in 0..60u32 {
        for (i, &o) in objs.iter().enumerate() {
            fs.write(
                o,
                (round as u64 % 8) * 2048,
                &bytes((round + i as u32) as u8, 2048),
            )
            .unwrap();
            fs.flush(o).unwrap();
        }
    }
    fs.unmount().unwrap();
    sim
}

/// The new store's workload: three objects appended to in whole pages, each flushed;
/// returns the bytes acknowledged per object.
fn workload(fs: &mut Fs, acked: &mut [u64; 3]) -> Result<(), ()> {
    let objs = [1u32, 2, 3];
    for &o in &objs {
        assert_eq!(fs.create(ObjKind::Object).map_err(|_| ())?, o);
    }
    for round in 0..40u64 {
        for (i, &o) in objs.iter().enumerate() {
            fs.write(o, round * 2048, &bytes(i as u8 ^ round as u8, 2048))
                .map_err(|_| ())?;
            fs.flush(o).map_err(|_| ())?;
            acked[i] = (round + 1) * 2048;
        }
    }
    Ok(())
}

#[test]
fn power_cuts_after_formatting_over_a_used_part() {
    let base = used_part(5);
    let mut cut_at = 1;
    let mut checked = 0;
    loop {
        for kind in [
            CutKind::Clean,
            CutKind::Torn(TornMode::MostBits),
            CutKind::Torn(TornMode::Random),
        ] {
            let mut sim = base.clone();
            let mut fs = Fs::formatted(&mut sim, cfg(2)).unwrap();
            fs.flash_mut()
                .arm(FaultPlan::seeded(9).with_cut(cut_at, kind));
            let mut acked = [0u64; 3];
            let done = workload(&mut fs, &mut acked).is_ok();
            drop(fs);
            if done {
                assert!(checked > 0);
                return;
            }
            sim.power_on();
            sim.disarm();
            let mut fs = Fs::mounted(&mut sim)
                .unwrap_or_else(|e| panic!("cut at {cut_at} ({kind:?}): mount failed: {e:?}"));
            for (i, &o) in [1u32, 2, 3].iter().enumerate() {
                let size = fs.size(o).unwrap_or(0);
                assert!(
                    size >= acked[i],
                    "cut at {cut_at}: object {o} lost acknowledged data"
                );
                let mut buf = vec![0u8; 2048];
                for round in 0..acked[i] / 2048 {
                    fs.read(o, round * 2048, &mut buf).unwrap();
                    assert_eq!(buf, bytes(i as u8 ^ round as u8, 2048), "cut at {cut_at}");
                }
            }
            checked += 1;
        }
        cut_at += 1;
    }
}
