//! A small page-mapped reference store on the `nand-hal` simulator, driven by
//! `paragc` policies, and the seeded workloads the tests, benches and examples run.
//!
//! The store keeps a logical-to-physical map and its inverse in RAM, writes each
//! logical page with its number and version in the data and spare areas (so the
//! mapping can be checked by reading the flash back), and does real garbage collection:
//! every valid page of a victim is read and programmed elsewhere before the victim is
//! erased. All I/O counts come from the simulator.
#![allow(dead_code)]

pub mod parallel;

use nand_hal::sim::profile::Profile;
use nand_hal::sim::{Counters, FaultPlan, HeapStorage, SimNand, WearStats};
use nand_hal::{BlockAddr, NandFlash, PageAddr};
use paragc::{
    AllocError, BlockManager, Class, Classifier, GcMode, GcUrgency, Hint, ManagerConfig, Reason,
    Victim, VictimPolicy, WearPolicy,
};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Block and unit capacity of the managers used here (covers every built-in profile
/// cut to 256 blocks per die, and the single-die parts cut to 1024 blocks).
pub const BLOCKS: usize = 2048;
pub const UNITS: usize = 16;

pub const NONE: u32 = u32::MAX;

/// GC and wear statistics gathered by the store (I/O counts come from the simulator).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcStats {
    /// Space-reclaiming victims collected.
    pub victims: u64,
    /// Pages written in those victims.
    pub victim_pages: u64,
    /// Of which invalid (reclaimed without a move).
    pub victim_invalid: u64,
    /// Valid pages moved by space reclamation.
    pub moved: u64,
    /// Victims chosen in background mode.
    pub background: u64,
    /// Static wear-leveling collections and the pages they moved.
    pub static_victims: u64,
    pub static_moved: u64,
}

impl GcStats {
    /// Invalid share of victim pages, in percent (the GC efficiency).
    pub fn efficiency(&self) -> f64 {
        if self.victim_pages == 0 {
            return 0.0;
        }
        100.0 * self.victim_invalid as f64 / self.victim_pages as f64
    }
    /// Valid pages moved per reclaimed block.
    pub fn moved_per_block(&self) -> f64 {
        if self.victims == 0 {
            return 0.0;
        }
        self.moved as f64 / self.victims as f64
    }
    fn since(&self, o: &GcStats) -> GcStats {
        GcStats {
            victims: self.victims - o.victims,
            victim_pages: self.victim_pages - o.victim_pages,
            victim_invalid: self.victim_invalid - o.victim_invalid,
            moved: self.moved - o.moved,
            background: self.background - o.background,
            static_victims: self.static_victims - o.static_victims,
            static_moved: self.static_moved - o.static_moved,
        }
    }
}

/// How the store uses the policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    /// Logical pages, as a share of the device's pages (per mille).
    pub utilisation_permille: u32,
    /// Every class is written as `Warm` and relocations stay `Warm`: one log.
    pub single_stream: bool,
    /// Run one background collection every this many user writes (0: never).
    pub background_every: u32,
    /// Check static wear leveling after every this many erases (0: never).
    pub static_every: u32,
    pub manager: ManagerConfig,
}

impl StoreConfig {
    pub const fn paragc(utilisation_permille: u32) -> Self {
        StoreConfig {
            utilisation_permille,
            single_stream: false,
            background_every: 256,
            static_every: 16,
            manager: ManagerConfig::DEFAULT,
        }
    }
    pub const fn baseline(utilisation_permille: u32) -> Self {
        StoreConfig {
            utilisation_permille,
            single_stream: true,
            background_every: 0,
            static_every: 0,
            manager: ManagerConfig::DEFAULT,
        }
    }
}

/// The reference store.
pub struct Store<C, V, W> {
    pub sim: SimNand<HeapStorage>,
    pub mgr: Box<BlockManager<BLOCKS, UNITS, V, W>>,
    pub cls: C,
    pub cfg: StoreConfig,
    l2p: Vec<u32>,
    p2l: Vec<u32>,
    version: Vec<u32>,
    next_unit: u32,
    user_writes: u64,
    since_bg: u32,
    since_static: u32,
    pub gc: GcStats,
    data: Vec<u8>,
    oob: Vec<u8>,
}

/// A snapshot for measuring a window of a run.
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    counters: Counters,
    gc: GcStats,
    user_writes: u64,
}

/// What a measured window did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Report {
    pub user_writes: u64,
    pub io: Counters,
    pub gc: GcStats,
}

impl Report {
    /// Pages programmed per user page written.
    pub fn write_amplification(&self) -> f64 {
        self.io.programs as f64 / self.user_writes as f64
    }
}

#[derive(Debug)]
pub enum StoreError {
    /// No victim with an invalid page: the logical space does not fit.
    Full,
    Alloc(AllocError),
    Flash(nand_hal::sim::SimError),
    Corrupted {
        lpn: u32,
    },
}

impl From<nand_hal::sim::SimError> for StoreError {
    fn from(e: nand_hal::sim::SimError) -> Self {
        StoreError::Flash(e)
    }
}

impl<C: Classifier, V: VictimPolicy, W: WearPolicy> Store<C, V, W> {
    pub fn new(profile: Profile, cfg: StoreConfig, cls: C, victim: V, wear: W) -> Self {
        let sim = SimNand::heap(profile, FaultPlan::seeded(1));
        let g = profile.geometry;
        let mgr = Box::new(
            BlockManager::with_policies(g, cfg.manager, victim, wear).expect("manager config"),
        );
        let logical = (g.pages() as u64 * cfg.utilisation_permille as u64 / 1000) as usize;
        Store {
            sim,
            mgr,
            cls,
            cfg,
            l2p: vec![NONE; logical],
            p2l: vec![NONE; g.pages() as usize],
            version: vec![0; logical],
            next_unit: 0,
            user_writes: 0,
            since_bg: 0,
            since_static: 0,
            gc: GcStats::default(),
            data: vec![0xFF; g.page_size() as usize],
            oob: vec![0xFF; 8],
        }
    }

    pub fn logical_pages(&self) -> u32 {
        self.l2p.len() as u32
    }

    pub fn mark(&self) -> Mark {
        Mark {
            counters: self.sim.counters(),
            gc: self.gc,
            user_writes: self.user_writes,
        }
    }

    pub fn since(&self, m: &Mark) -> Report {
        Report {
            user_writes: self.user_writes - m.user_writes,
            io: self.sim.counters() - m.counters,
            gc: self.gc.since(&m.gc),
        }
    }

    pub fn wear(&self) -> WearStats {
        self.sim.wear_stats()
    }

    fn class_of_page(&self, page: u32) -> Option<Class> {
        if page == NONE {
            return None;
        }
        let g = self.sim.geometry();
        self.mgr
            .block(g.block_of(PageAddr(page)))
            .map(|b| b.class())
    }

    /// Writes logical page `lpn` with `hint`.
    pub fn write(&mut self, lpn: u32, hint: Hint) -> Result<(), StoreError> {
        let old = self.l2p[lpn as usize];
        let class = if self.cfg.single_stream {
            Class::Warm
        } else {
            let prev = self.class_of_page(old);
            self.cls.classify_write(lpn, hint, prev)
        };
        let unit = self.pick_unit(class)?;
        let a = self.mgr.allocate(unit, class).map_err(StoreError::Alloc)?;
        self.version[lpn as usize] += 1;
        self.program(a.page.0, lpn)?;
        // Collection above may have moved the old version.
        let old = self.l2p[lpn as usize];
        if old != NONE {
            self.invalidate(old)?;
        }
        self.l2p[lpn as usize] = a.page.0;
        self.p2l[a.page.0 as usize] = lpn;
        self.user_writes += 1;
        if self.cfg.background_every > 0 {
            self.since_bg += 1;
            if self.since_bg >= self.cfg.background_every {
                self.since_bg = 0;
                self.background_step()?;
            }
        }
        Ok(())
    }

    /// The next unit in stripe order that can take a page of `class`, collecting in
    /// the foreground where needed. A unit whose space is all in open heads of other
    /// classes (no victim) is skipped.
    fn pick_unit(&mut self, class: Class) -> Result<u32, StoreError> {
        let units = self.mgr.units();
        for _ in 0..units {
            let u = self.next_unit;
            self.next_unit = (u + 1) % units;
            loop {
                if self.mgr.can_allocate(u, class) {
                    return Ok(u);
                }
                match self.collect(u, GcMode::Foreground) {
                    Ok(()) => {}
                    Err(StoreError::Full) => break,
                    Err(e) => return Err(e),
                }
            }
        }
        Err(StoreError::Full)
    }

    /// One idle-time step: collect one victim on the unit that needs it most.
    pub fn background_step(&mut self) -> Result<(), StoreError> {
        let units = self.mgr.units();
        let worst = (0..units)
            .filter(|&u| self.mgr.gc_urgency(u) >= GcUrgency::Background)
            .filter(|&u| self.mgr.peek_victim(u, GcMode::Background).is_some())
            .min_by_key(|&u| self.mgr.free_blocks(u));
        if let Some(u) = worst {
            self.collect(u, GcMode::Background)?;
        }
        Ok(())
    }

    fn program(&mut self, page: u32, lpn: u32) -> Result<(), StoreError> {
        let v = self.version[lpn as usize];
        self.data.fill(0xFF);
        self.data[..4].copy_from_slice(&lpn.to_le_bytes());
        self.data[4..8].copy_from_slice(&v.to_le_bytes());
        self.oob.fill(0xFF);
        self.oob[4..8].copy_from_slice(&lpn.to_le_bytes());
        self.sim.program(PageAddr(page), 0, &self.data, &self.oob)?;
        Ok(())
    }

    fn invalidate(&mut self, page: u32) -> Result<(), StoreError> {
        let g = self.sim.geometry();
        self.p2l[page as usize] = NONE;
        self.mgr
            .notice_page_invalidated(g.block_of(PageAddr(page)))
            .expect("invalidate event");
        Ok(())
    }

    /// Collects one victim of `unit`.
    pub fn collect(&mut self, unit: u32, mode: GcMode) -> Result<(), StoreError> {
        let v = self.mgr.choose_victim(unit, mode).ok_or(StoreError::Full)?;
        self.gc.victims += 1;
        self.gc.victim_pages += v.written as u64;
        self.gc.victim_invalid += (v.written - v.valid) as u64;
        if mode == GcMode::Background {
            self.gc.background += 1;
        }
        let moved = self.relocate(&v)?;
        self.gc.moved += moved;
        self.erase(v.block)
    }

    fn relocate(&mut self, v: &Victim) -> Result<u64, StoreError> {
        let g = self.sim.geometry();
        let class = if self.cfg.single_stream {
            Class::Warm
        } else {
            v.relocation_class()
        };
        let mut moved = 0;
        for i in 0..v.written as u32 {
            let page = g.page(v.block, i).0;
            let lpn = self.p2l[page as usize];
            if lpn == NONE {
                continue;
            }
            // Read the page (the simulator charges the read), check it, move it.
            self.sim.read(PageAddr(page), 0, &mut self.data, &mut [])?;
            if self.data[..4] != lpn.to_le_bytes() {
                return Err(StoreError::Corrupted { lpn });
            }
            let a = self
                .mgr
                .allocate_for_gc(v.unit, class)
                .map_err(StoreError::Alloc)?;
            self.program(a.page.0, lpn)?;
            self.invalidate(page)?;
            self.l2p[lpn as usize] = a.page.0;
            self.p2l[a.page.0 as usize] = lpn;
            moved += 1;
        }
        debug_assert_eq!(self.mgr.block(v.block).unwrap().valid(), 0);
        Ok(moved)
    }

    fn erase(&mut self, block: BlockAddr) -> Result<(), StoreError> {
        self.sim.erase(block)?;
        self.mgr.notice_block_erased(block).expect("erase event");
        if self.cfg.static_every > 0 {
            self.since_static += 1;
            if self.since_static >= self.cfg.static_every {
                self.since_static = 0;
                if let Some(v) = self.mgr.static_wear_victim() {
                    debug_assert_eq!(v.reason, Reason::StaticWear);
                    self.gc.static_victims += 1;
                    let moved = self.relocate(&v)?;
                    self.gc.static_moved += moved;
                    self.sim.erase(v.block)?;
                    self.mgr.notice_block_erased(v.block).expect("erase event");
                }
            }
        }
        Ok(())
    }

    /// Reads every logical page back from flash and checks it is the latest version;
    /// returns the number of pages checked.
    pub fn verify(&mut self) -> Result<u32, StoreError> {
        let mut n = 0;
        for lpn in 0..self.l2p.len() as u32 {
            let page = self.l2p[lpn as usize];
            if page == NONE {
                continue;
            }
            let mut oob = [0u8; 8];
            self.sim.read(PageAddr(page), 0, &mut self.data, &mut oob)?;
            let v = self.version[lpn as usize];
            if self.data[..4] != lpn.to_le_bytes()
                || self.data[4..8] != v.to_le_bytes()
                || oob[4..8] != lpn.to_le_bytes()
                || self.p2l[page as usize] != lpn
            {
                return Err(StoreError::Corrupted { lpn });
            }
            n += 1;
        }
        Ok(n)
    }
}

/// A seeded workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skew {
    Uniform,
    /// `hot_percent`% of writes go to `set_percent`% of the data pages.
    HotCold {
        hot_percent: u32,
        set_percent: u32,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Workload {
    pub skew: Skew,
    /// Per mille of writes that are log appends (sequential, `Hint::Log`).
    pub log_permille: u32,
    /// Share of the logical pages used as the circular log region (per mille).
    pub log_region_permille: u32,
    pub seed: u64,
}

impl Workload {
    pub const fn new(skew: Skew, log_permille: u32, seed: u64) -> Self {
        Workload {
            skew,
            log_permille,
            log_region_permille: if log_permille > 0 { 50 } else { 0 },
            seed,
        }
    }

    pub fn name(&self) -> String {
        let s = match self.skew {
            Skew::Uniform => "uniform".to_string(),
            Skew::HotCold {
                hot_percent,
                set_percent,
            } => format!("{hot_percent}/{set_percent}"),
        };
        if self.log_permille > 0 {
            format!("{s} + {}% log", self.log_permille / 10)
        } else {
            s
        }
    }
}

/// Generates the write stream of a [`Workload`] over `logical` pages.
pub struct Gen {
    rng: Xoshiro256PlusPlus,
    w: Workload,
    data_pages: u32,
    log_pages: u32,
    log_cursor: u32,
}

impl Gen {
    pub fn new(w: Workload, logical: u32) -> Self {
        let log_pages = (logical as u64 * w.log_region_permille as u64 / 1000) as u32;
        Gen {
            rng: Xoshiro256PlusPlus::seed_from_u64(w.seed),
            w,
            data_pages: logical - log_pages,
            log_pages,
            log_cursor: 0,
        }
    }

    fn below(&mut self, n: u32) -> u32 {
        (((self.rng.next_u64() >> 32) * n as u64) >> 32) as u32
    }

    /// The next write: logical page and hint.
    pub fn next_write(&mut self) -> (u32, Hint) {
        if self.log_pages > 0 && self.below(1000) < self.w.log_permille {
            let lpn = self.data_pages + self.log_cursor;
            self.log_cursor = (self.log_cursor + 1) % self.log_pages;
            return (lpn, Hint::Log);
        }
        let lpn = match self.w.skew {
            Skew::Uniform => self.below(self.data_pages),
            Skew::HotCold {
                hot_percent,
                set_percent,
            } => {
                let hot = (self.data_pages as u64 * set_percent as u64 / 100) as u32;
                if self.below(100) < hot_percent {
                    self.below(hot)
                } else {
                    hot + self.below(self.data_pages - hot)
                }
            }
        };
        (lpn, Hint::Auto)
    }

    /// A uniformly random logical page (for reads).
    pub fn any_page(&mut self) -> u32 {
        self.below(self.data_pages + self.log_pages)
    }
}

/// Fills the logical space once (sequentially, then the log region with log hints),
/// then runs `warmup` device-fulls of the workload, then measures `measure`
/// device-fulls. A "device-full" is `logical` user writes.
pub fn run<C: Classifier, V: VictimPolicy, W: WearPolicy>(
    store: &mut Store<C, V, W>,
    w: Workload,
    warmup_x10: u32,
    measure_x10: u32,
) -> Result<Report, StoreError> {
    let logical = store.logical_pages();
    let mut gen = Gen::new(w, logical);
    for lpn in 0..gen.data_pages {
        store.write(lpn, Hint::Auto)?;
    }
    for i in 0..gen.log_pages {
        store.write(gen.data_pages + i, Hint::Log)?;
    }
    for _ in 0..logical as u64 * warmup_x10 as u64 / 10 {
        let (lpn, hint) = gen.next_write();
        store.write(lpn, hint)?;
    }
    let m = store.mark();
    for _ in 0..logical as u64 * measure_x10 as u64 / 10 {
        let (lpn, hint) = gen.next_write();
        store.write(lpn, hint)?;
    }
    Ok(store.since(&m))
}
