//! The built-in `Greedy` policy against `paragc`'s (`ParaGc`) on a GC-bound workload:
//! the 2 MiB TINY part filled to 40 % of its capacity with 8 objects, then 80/20 random page
//! overwrites (80 % of the writes to 20 % of the pages), with an idle `gc_step(16)`
//! every 64 writes. The store caches 20 pages (a root and a leaf for each object, plus
//! the object-table page and the table's leaf and root) and uses a 10-block window: with
//! fewer cached pages the cache thrashes (see `examples/wa_sweep.rs` and the README).
//! Prints write amplification (pages programmed per user page), pages GC copied,
//! checkpoints, index pages evicted, erases and the erase-count spread. Numbers come from
//! the simulator only.
//!
//! GC copies go to the cold write head (both policies' choice). With the idle steps,
//! collection work is set by their budget (16 copies per 64 writes) and write
//! amplification cannot move; the second set runs without idle steps, so every copy is
//! demand-driven, and compares each policy with a wrapper that sends the copies back
//! into the data head (`CopiesToData`, the behaviour before the cold head).
//!
//! `cargo run --release -p oftl --example policies`

use nand_hal::sim::{profile, FaultPlan, HeapStorage, SimNand};
use oftl::{
    BlockAddr, BlockInfo, BlockState, Config, Greedy, ObjKind, Oftl, ParaGc, Relocation,
    SpacePolicy, Urgency,
};
use paragc::{DynamicOnly, GreedyCostBenefit, GreedyVictim as PGreedy};

type Sim = SimNand<HeapStorage>;

const OBJECTS: usize = 8;
/// Pages cached: a root and a leaf per object and the object table's page, leaf and
/// root, so everything the workload touches fits.
const CACHE: usize = 20;
/// Updating window, in blocks.
const WINDOW: u16 = 10;
const WRITES: u32 = 20_000;
/// An idle `gc_step(IDLE_BUDGET)` after every `IDLE_EVERY` writes.
const IDLE_EVERY: u32 = 64;
const IDLE_BUDGET: u32 = 16;

/// Policy `P` with GC copies mixed back into the data head.
#[derive(Default)]
struct CopiesToData<P>(P);

impl<P: SpacePolicy> SpacePolicy for CopiesToData<P> {
    fn pick_victim(&mut self, blocks: &[BlockInfo], ppb: u32) -> Option<BlockAddr> {
        self.0.pick_victim(blocks, ppb)
    }
    fn pick_victim_for(&mut self, blocks: &[BlockInfo], ppb: u32, u: Urgency) -> Option<BlockAddr> {
        self.0.pick_victim_for(blocks, ppb, u)
    }
    fn pick_free(&mut self, blocks: &[BlockInfo]) -> Option<BlockAddr> {
        self.0.pick_free(blocks)
    }
    fn relocation(&mut self, _: &[BlockInfo], _: BlockAddr, _: u32) -> Relocation {
        Relocation::Data
    }
}

fn run<P: SpacePolicy + Default>(name: &str, idle: bool) {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(1));
    let mut fs = Oftl::<&mut Sim, 2048, 64, CACHE, 2, P>::new(
        &mut sim,
        const { Config::new().window_blocks(WINDOW) },
        P::default(),
    );
    fs.format().unwrap();
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
    let moved0 = fs.stats().relocated_pages;
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
            panic!("{name}: write {i}: {e:?}");
        }
        if idle && i % IDLE_EVERY == IDLE_EVERY - 1 {
            fs.gc_step(IDLE_BUDGET).unwrap();
        }
    }
    fs.sync().unwrap();
    let d = fs.flash().counters() - before;
    let st = fs.stats();
    let erases: Vec<u32> = fs
        .blocks()
        .iter()
        .filter(|b| !matches!(b.state(), BlockState::Bad | BlockState::Reserved))
        .map(|b| b.erases())
        .collect();
    println!(
        "{name}: WA {:.3} (programs per user page), {} pages copied by GC, {} checkpoints, \
         {} index evictions, {} erases, erase spread {} (max {}, data blocks), \
         {:.1} kB/s simulated",
        d.programs as f64 / WRITES as f64,
        st.relocated_pages - moved0,
        st.checkpoints - st0.checkpoints,
        st.index_evictions - st0.index_evictions,
        d.erases,
        erases.iter().max().unwrap() - erases.iter().min().unwrap(),
        erases.iter().max().unwrap(),
        WRITES as f64 * page as f64 / (d.time_ns as f64 / 1e9) / 1e3,
    );
    assert_eq!(fs.flash().counters().misuse, 0);
}

fn main() {
    println!("With an idle gc_step({IDLE_BUDGET}) every {IDLE_EVERY} writes:");
    run::<Greedy>("Greedy", true);
    run::<ParaGc<64>>("ParaGc (paragc defaults)", true);
    run::<ParaGc<64, GreedyCostBenefit, DynamicOnly>>("ParaGc, no static leveling", true);
    run::<ParaGc<64, PGreedy, DynamicOnly>>("ParaGc, greedy only", true);
    println!("Without idle collection (GC only when a write needs room):");
    run::<Greedy>("Greedy, copies to the cold head", false);
    run::<CopiesToData<Greedy>>("Greedy, copies to the data head", false);
    run::<ParaGc<64>>("ParaGc, copies to the cold head", false);
    run::<CopiesToData<ParaGc<64>>>("ParaGc, copies to the data head", false);
}
