//! The file layer on a simulated W25N01GV: a settings file rewritten now and then and
//! a log of 64-byte records, each made durable with `fsync`, then a power cut and the
//! mount that recovers everything fsynced. Prints what the flash did.
//!
//! `cargo run --release -p stagefs-core --example files`

use nand_hal::sim::profile::W25N01GV;
use nand_hal::sim::{CutKind, FaultPlan, HeapStorage, SimNand};
use oftl::{Config, Greedy, W25n01gv};
use stagefs_core::{Fs, OpenOptions};

type Sim = SimNand<HeapStorage>;

fn main() {
    let mut sim: Sim = SimNand::heap(W25N01GV, FaultPlan::seeded(1));
    let records = 2000u32;
    {
        // The volume is large (the store's tables and cache): keep it off the stack.
        let store = W25n01gv::new(&mut sim, const { Config::new() }, Greedy::DEFAULT);
        let mut fs = Box::new(Fs::<_, 2048, 4>::new(store));
        fs.format().expect("format");
        fs.create_dir("/logs").expect("mkdir");
        let rewrite = OpenOptions::new().write(true).create(true).truncate(true);
        let log = fs
            .open(
                "/logs/sensor.log",
                OpenOptions::new().append(true).create(true),
            )
            .expect("open log");
        let before = fs.store().flash().counters();
        for i in 0..records {
            let mut rec = [0u8; 64];
            rec[..4].copy_from_slice(&i.to_le_bytes());
            fs.write(log, &rec).expect("append");
            fs.fsync(log).expect("fsync");
            if i % 100 == 99 {
                let s = fs.open("/settings", rewrite).expect("open settings");
                fs.write(s, format!("records={}\n", i + 1).as_bytes())
                    .expect("write settings");
                fs.close(s).expect("close settings");
            }
        }
        let d = fs.store().flash().counters() - before;
        let user = records as u64 * 64;
        println!(
            "{records} fsynced 64-byte records (+{} settings rewrites): {} programs, {} bytes \
             programmed (WA {:.2}), {} erases, {:.1} ms simulated ({:.1} kB/s)",
            records / 100,
            d.programs,
            d.bytes_programmed,
            d.bytes_programmed as f64 / user as f64,
            d.erases,
            d.time_ns as f64 / 1e6,
            user as f64 / (d.time_ns as f64 / 1e9) / 1e3
        );
        // The power fails during the next few records (never unmounted).
        fs.store_mut()
            .flash_mut()
            .arm(FaultPlan::seeded(2).with_cut(5, CutKind::Clean));
        for i in records..records + 50 {
            let rec = [i as u8; 64];
            if fs.write(log, &rec).and_then(|_| fs.fsync(log)).is_err() {
                println!("power cut while writing record {i}");
                break;
            }
        }
    }
    sim.power_on();
    sim.disarm();
    let t0 = sim.now_ns();
    let store = W25n01gv::new(&mut sim, const { Config::new() }, Greedy::DEFAULT);
    let mut fs = Box::new(Fs::<_, 2048, 4>::new(store));
    fs.mount().expect("mount after the cut");
    let t1 = fs.store().flash().now_ns();
    let m = fs.metadata("/logs/sensor.log").expect("log");
    let mut buf = [0u8; 64];
    let f = fs
        .open("/logs/sensor.log", OpenOptions::new().read(true))
        .expect("open");
    for i in 0..records {
        assert_eq!(fs.read(f, &mut buf).expect("read"), 64);
        assert_eq!(u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]), i);
    }
    fs.close(f).expect("close");
    let s = fs
        .open("/settings", OpenOptions::new().read(true))
        .expect("open");
    let n = fs.read(s, &mut buf).expect("read");
    fs.close(s).expect("close");
    println!(
        "after the cut: mount {:.1} ms simulated; the log holds {} records (all {records} \
         fsynced ones checked), settings {:?}",
        (t1 - t0) as f64 / 1e6,
        m.size / 64,
        core::str::from_utf8(&buf[..n]).unwrap_or("?").trim()
    );
    fs.unmount().expect("unmount");
}
