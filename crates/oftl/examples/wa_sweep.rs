//! Where the programs of the `policies` workload go, across index-cache sizes, window
//! sizes and part sizes: 8 objects filling 40 % of the capacity, 20,000 random 2 KiB page
//! overwrites (80 % of them on 20 % of the pages), `gc_step(16)` every 64 writes, `Greedy`.
//! Prints write amplification (programs per user page) and its parts from `stats()`:
//! checkpoints, index pages written on cache eviction, pages copied by GC. Numbers come
//! from the simulator only.
//!
//! `cargo run --release -p oftl --example wa_sweep`

use nand_hal::sim::{profile, FaultPlan, HeapStorage, SimNand};
use oftl::{Config, Greedy, ObjKind, Oftl};

type Sim = SimNand<HeapStorage>;

const OBJECTS: usize = 8;
const WRITES: u32 = 20_000;

fn run<const BLOCKS: usize, const CACHE: usize>(part: &str, prof: profile::Profile, window: u16) {
    let name = format!("{part:>10}, CACHE {CACHE:>2}, window {window:>2}");
    let mut sim = Sim::heap(prof, FaultPlan::seeded(1));
    let mut fs = Oftl::<&mut Sim, 2048, BLOCKS, CACHE, 2, Greedy>::new(
        &mut sim,
        Config::new().window_blocks(window),
        Greedy::DEFAULT,
    );
    if let Err(e) = fs.format() {
        println!("{name}: format refused: {e:?}");
        return;
    }
    let page = fs.payload() as u64;
    let per_obj = fs.capacity_pages() * 4 / 10 / OBJECTS as u64;
    let mut ids = [0; OBJECTS];
    let buf = vec![0x5Au8; page as usize];
    for id in &mut ids {
        *id = fs.create(ObjKind::Object).unwrap();
        for p in 0..per_obj {
            fs.write(*id, p * page, &buf).unwrap();
        }
    }
    fs.sync().unwrap();
    let before = fs.flash().counters();
    let st0 = fs.stats();
    let pages = per_obj * OBJECTS as u64;
    let hot = pages / 5;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..WRITES {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let p = if x % 10 < 8 {
            x / 10 % hot
        } else {
            hot + x / 10 % (pages - hot)
        };
        let (o, lp) = ((p % OBJECTS as u64) as usize, p / OBJECTS as u64);
        if let Err(e) = fs.write(ids[o], lp * page, &buf) {
            println!("{name}: write {i} failed: {e:?}");
            return;
        }
        if i % 64 == 63 {
            if let Err(e) = fs.gc_step(16) {
                println!("{name}: gc_step after write {i} failed: {e:?}");
                return;
            }
        }
    }
    fs.sync().unwrap();
    let d = fs.flash().counters() - before;
    let st = fs.stats();
    println!(
        "{name}: capacity {} pages, {} filled, WA {:.3}, erases {}, checkpoints {}, \
         index evictions {}, GC copies {}",
        fs.capacity_pages(),
        pages,
        d.programs as f64 / WRITES as f64,
        d.erases,
        st.checkpoints - st0.checkpoints,
        st.index_evictions - st0.index_evictions,
        st.relocated_pages - st0.relocated_pages
    );
    assert_eq!(fs.flash().counters().misuse, 0);
}

fn main() {
    let big = profile::TINY.with_blocks_per_die(256);
    run::<64, 4>("2 MiB", profile::TINY, 4);
    run::<64, 4>("2 MiB", profile::TINY, 2);
    run::<64, 4>("2 MiB", profile::TINY, 5);
    run::<64, 4>("2 MiB", profile::TINY, 6);
    run::<64, 4>("2 MiB", profile::TINY, 8);
    run::<64, 8>("2 MiB", profile::TINY, 8);
    run::<64, 16>("2 MiB", profile::TINY, 4);
    run::<64, 16>("2 MiB", profile::TINY, 8);
    run::<64, 16>("2 MiB", profile::TINY, 9);
    run::<64, 20>("2 MiB", profile::TINY, 10);
    run::<256, 4>("8 MiB", big, 4);
    run::<256, 4>("8 MiB", big, 5);
    run::<256, 4>("8 MiB", big, 6);
    run::<256, 4>("8 MiB", big, 16);
    run::<256, 16>("8 MiB", big, 8);
    run::<256, 16>("8 MiB", big, 9);
    run::<256, 16>("8 MiB", big, 16);
    run::<256, 20>("8 MiB", big, 10);
    run::<256, 20>("8 MiB", big, 16);
}
