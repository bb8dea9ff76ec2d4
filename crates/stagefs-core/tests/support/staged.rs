//! A volume whose staging log holds the only copy of twelve acknowledged commits (the
//! repair tests' fixture).

use nand_hal::sim::{profile, FaultPlan, SimNand};
use stagefs_core::{OpenOptions, Tuning};

use super::{pattern, vol, write_file, Sim};

/// The staged commits: `/log` appended with `CHUNKS` 64-byte chunks, each fsynced, and
/// `/s` (inline) rewritten after every third.
pub const CHUNKS: u8 = 12;

pub fn chunk(i: u8) -> [u8; 64] {
    [0x40 + i; 64]
}

pub fn inline_contents(i: u8) -> Vec<u8> {
    pattern(u32::from(i) + 100, 40 + usize::from(i))
}

/// The contents of `/log` and `/s` after the first `n` commits of `/log`.
pub fn expected(n: u8) -> (Vec<u8>, Vec<u8>) {
    let mut log = pattern(7, 1000);
    let mut s = inline_contents(0);
    for i in 0..n {
        log.extend_from_slice(&chunk(i));
        if i % 3 == 2 {
            s = inline_contents(i);
        }
    }
    (log, s)
}

/// A volume with `CHUNKS` staged commits of `/log` (and `/s`'s between them) in the
/// log, crashed before any patch.
pub fn staged_volume() -> Sim {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(41));
    {
        let mut fs = vol(&mut sim);
        fs.format().unwrap();
        write_file(&mut fs, "/log", &pattern(7, 1000));
        write_file(&mut fs, "/s", &inline_contents(0));
        fs.sync().unwrap();
        fs.set_tuning(Tuning {
            staging: true,
            bypass: false,
        });
        let f = fs
            .open("/log", OpenOptions::new().write(true).append(true))
            .unwrap();
        for i in 0..CHUNKS {
            fs.write(f, &chunk(i)).unwrap();
            fs.fsync(f).unwrap();
            if i % 3 == 2 {
                write_file(&mut fs, "/s", &inline_contents(i));
            }
        }
        let st = fs.staging_status().unwrap();
        assert!(st.end_lsn - st.first_lsn >= u64::from(CHUNKS), "{st:?}");
        assert_eq!((st.staged_objects, st.staged_inline), (1, 1));
        // The log's pages go below a checkpoint of the store (they are then read only
        // by the file layer's replay, not by the store's recovery), with `/log`'s
        // buffered bytes left out: the records are their only copy.
        let obj = fs.location("/log").unwrap().object.unwrap();
        fs.store_mut().discard(obj);
        fs.store_mut().sync().unwrap();
        // Crash.
    }
    sim.cut_power();
    sim.power_on();
    sim
}
