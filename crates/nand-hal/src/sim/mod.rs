//! A simulated NAND chip: NAND rules enforced, a datasheet cost model on separate die
//! and channel timelines, counters, and a seeded fault model.
//!
//! The simulator is the device every test, benchmark, fuzz target and firmware run of
//! this project uses. It implements [`NandFlash`] and [`PipelinedNand`].
//!
//! # Rules (a violation is a [`ErrorKind::Misuse`] error and counts in
//! [`Counters::misuse`])
//!
//! - programs only clear bits (a non-`0xFF` byte that would need a 0 turned back into
//!   a 1 is a violation);
//! - at most NOP program operations per page between erases;
//! - pages of a block are programmed in ascending order;
//! - with ECC, each ECC step is written at most once between erases;
//! - programs cover whole program units; the bad-block marker is only written by
//!   `mark_bad`;
//! - no I/O to a block marked bad; no new work on a die with an outstanding pipelined
//!   operation.
//!
//! # Cost model
//!
//! Each operation costs a fixed command time plus bus time per byte moved, both holding
//! the die's channel, and an array time (tR, tPROG, tBERS) holding only the die. A
//! program costs a full tPROG whatever its size. Blocking operations advance the clock to
//! their completion; [`PipelinedNand`] operations return as soon as their channel and die
//! can take them (the transfer runs on the channel, as with DMA), so work on other dies
//! and channels overlaps while each channel still carries one transfer at a time. Array times are the datasheet typical,
//! maximum, or drawn uniformly between them from the seed ([`TimingMode`]).
//!
//! # Faults
//!
//! See [`faults`] for the list. Bit errors are *virtual*: the cells keep what was
//! programmed and each page carries a count of bad bits per ECC step. A read runs the ECC
//! model over those counts: up to the part's strength they are corrected and reported, past
//! it the read fails as uncorrectable; on steps without ECC protection (erased steps, parts
//! without on-die ECC) the flips are applied to the returned bytes at fixed positions.

pub mod counters;
pub mod faults;
pub mod profile;
pub mod storage;

use core::fmt;

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::blocking::{NandFlash, PipelinedNand, ReadReport};
use crate::capabilities::{Capabilities, EccKind, MAX_STEPS};
use crate::error::{Error, ErrorKind, ErrorType};
use crate::geometry::{BlockAddr, Geometry, PageAddr, MAX_CHANNELS, MAX_DIES};

pub use counters::{Counters, WearStats};
pub use faults::{CutKind, FaultConfig, FaultPlan, PowerCut, TokenError, TornMode};
pub use profile::{Profile, TimeRange, Timing};
#[cfg(feature = "alloc")]
pub use storage::HeapStorage;
pub use storage::{BlockState, PageState, SimStorage, SliceStorage, StorageSize, StorageSizeError};

/// Which array time to charge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TimingMode {
    /// Datasheet typical (deterministic; the default).
    #[default]
    Typical,
    /// Datasheet maximum (worst-case latency studies).
    Max,
    /// Uniform between typical and maximum, drawn from the plan's seed.
    Random,
}

/// Which device rule the caller broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Misuse {
    /// Program not aligned to the program unit, or empty.
    Unaligned,
    /// More program operations on a page than NOP allows.
    NopExceeded,
    /// A page programmed below the highest programmed page of its block.
    OutOfOrder,
    /// An ECC step written twice between erases.
    EccStepRewritten,
    /// A program that needs a 0 bit turned back into 1.
    SetsBits,
    /// I/O to a block marked bad.
    BadBlockAccess,
    /// A program that writes the bad-block marker bytes.
    MarkerWrite,
    /// New work on a die whose pipelined operation was not waited for.
    DieBusy,
}

/// The simulator's error: a kind plus, for misuse, which rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimError {
    kind: ErrorKind,
    misuse: Option<Misuse>,
}

impl SimError {
    const fn of(kind: ErrorKind) -> Self {
        SimError { kind, misuse: None }
    }
    /// The error kind (also through [`Error::kind`]).
    pub const fn kind(&self) -> ErrorKind {
        self.kind
    }
    /// Which rule was broken, for [`ErrorKind::Misuse`].
    pub const fn misuse(&self) -> Option<Misuse> {
        self.misuse
    }
}

impl Error for SimError {
    fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.misuse {
            Some(m) => write!(f, "{}: {:?}", self.kind, m),
            None => write!(f, "{}", self.kind),
        }
    }
}

impl core::error::Error for SimError {}

#[derive(Clone, Copy, Debug)]
enum InFlight {
    Program {
        page: u32,
        column: u32,
        len: u32,
        oob_len: u32,
        steps: u8,
    },
    Erase {
        block: u32,
    },
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    done_at: u64,
    result: Result<(), SimError>,
    op: InFlight,
}

/// Reads of an unstable page that still come back clean.
const UNSTABLE_GRACE_READS: u8 = 2;

const SALT_FAULT: u64 = 0x6661_756c_7473_0001;
const SALT_TIMING: u64 = 0x7469_6d69_6e67_0002;
const SALT_FACTORY: u64 = 0x6661_6374_6f72_0003;

/// A stateless 64-bit mix (splitmix64 finaliser) for fixed flip positions.
const fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The simulated NAND device over storage `S`.
#[derive(Clone, Debug)]
pub struct SimNand<S> {
    storage: S,
    profile: Profile,
    timing_mode: TimingMode,
    now: u64,
    die_free: [u64; MAX_DIES],
    bus_free: [u64; MAX_CHANNELS],
    pending: [Option<Pending>; MAX_DIES],
    counters: Counters,
    plan: FaultPlan,
    fault_rng: Xoshiro256PlusPlus,
    timing_rng: Xoshiro256PlusPlus,
    ops_since_arm: u64,
    powered: bool,
    last_misuse: Option<(Misuse, u32)>,
}

impl<S: SimStorage> SimNand<S> {
    /// A factory-fresh device over blank `storage`: places the plan's factory bad blocks
    /// (with their markers) and draws per-block endurance, then arms the plan.
    pub fn new(profile: Profile, storage: S, plan: FaultPlan) -> Result<Self, StorageSizeError> {
        let mut sim = Self::attach(profile, storage, plan)?;
        sim.place_factory_faults();
        Ok(sim)
    }

    /// A device over `storage` that already holds content (a saved image): nothing is
    /// placed, the plan is armed.
    pub fn attach(profile: Profile, storage: S, plan: FaultPlan) -> Result<Self, StorageSizeError> {
        let g = profile.geometry;
        let needed = StorageSize::of(&g);
        if storage.pages().len() != needed.pages || storage.blocks().len() != needed.blocks {
            return Err(StorageSizeError { needed });
        }
        let mut sim = SimNand {
            storage,
            profile,
            timing_mode: TimingMode::Typical,
            now: 0,
            die_free: [0; MAX_DIES],
            bus_free: [0; MAX_CHANNELS],
            pending: [None; MAX_DIES],
            counters: Counters::default(),
            plan,
            fault_rng: Xoshiro256PlusPlus::seed_from_u64(plan.seed ^ SALT_FAULT),
            timing_rng: Xoshiro256PlusPlus::seed_from_u64(plan.seed ^ SALT_TIMING),
            ops_since_arm: 0,
            powered: true,
            last_misuse: None,
        };
        sim.arm(plan);
        Ok(sim)
    }

    fn place_factory_faults(&mut self) {
        let g = self.profile.geometry;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.plan.seed ^ SALT_FACTORY);
        let want = self.plan.faults.factory_bad.min(g.blocks() - 1);
        let mut placed = 0;
        while placed < want {
            let b = 1 + (rng.next_u32() % (g.blocks() - 1));
            if self.storage.blocks()[b as usize].flags & BlockState::BAD != 0 {
                continue;
            }
            self.write_marker(b);
            self.storage.blocks_mut()[b as usize].flags |=
                BlockState::BAD | BlockState::FACTORY_BAD;
            placed += 1;
        }
        let mean = self.plan.faults.endurance;
        if mean > 0 {
            for st in self.storage.blocks_mut() {
                let spread = (mean / 2).max(1);
                st.endurance = mean - mean / 4 + rng.next_u32() % spread;
            }
        }
    }

    fn write_marker(&mut self, block: u32) {
        let g = self.profile.geometry;
        let bbm = self.profile.capabilities.bad_block_marker;
        let raw = g.raw_page_size() as usize;
        let cells = self.storage.block_mut(block);
        for p in 0..g.pages_per_block() {
            if bbm.on_page(p, g.pages_per_block()) {
                let at = p as usize * raw + g.page_size() as usize + bbm.offset as usize;
                cells[at..at + bbm.len as usize].fill(0x00);
            }
        }
    }

    // ----------------------------------------------------------------------------------
    // Public controls

    /// Arms `plan`: its fault rates apply from now on and its power cut counts
    /// program/erase operations from now. Re-seeds the fault generator.
    pub fn arm(&mut self, plan: FaultPlan) {
        self.plan = plan;
        self.fault_rng = Xoshiro256PlusPlus::seed_from_u64(plan.seed ^ SALT_FAULT);
        self.ops_since_arm = 0;
    }

    /// The armed plan (its `Display` form is the replay token).
    pub fn plan(&self) -> &FaultPlan {
        &self.plan
    }

    /// Removes the power cut and every fault rate (factory state stays).
    pub fn disarm(&mut self) {
        self.plan.cut = None;
        self.plan.faults = FaultConfig {
            factory_bad: self.plan.faults.factory_bad,
            ..FaultConfig::default()
        };
    }

    /// Sets the timing mode.
    pub fn set_timing_mode(&mut self, mode: TimingMode) {
        self.timing_mode = mode;
    }

    /// Program/erase operations since the plan was armed (what `PowerCut::at_op` counts).
    pub fn ops_since_arm(&self) -> u64 {
        self.ops_since_arm
    }

    /// Cuts the power now, between operations. Pipelined operations still running are
    /// torn if the plan asks for out-of-order completion, else they complete.
    pub fn cut_power(&mut self) {
        if self.powered {
            self.power_fail(None);
        }
    }

    /// Whether the device has power.
    pub fn is_powered(&self) -> bool {
        self.powered
    }

    /// Restores power after a cut: the device answers again, with nothing outstanding.
    /// The cells keep whatever the cut left; the power cut that fired is disarmed.
    pub fn power_on(&mut self) {
        self.powered = true;
        self.pending = [None; MAX_DIES];
        let t = self
            .die_free
            .iter()
            .chain(self.bus_free.iter())
            .copied()
            .max()
            .unwrap_or(0);
        self.now = self.now.max(t);
    }

    /// The profile.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Simulated time in nanoseconds.
    pub fn now_ns(&self) -> u64 {
        self.now
    }

    /// Charges `ns` of host-side time (CPU work between operations).
    pub fn advance(&mut self, ns: u64) {
        self.now += ns;
    }

    /// When die `die` finishes its current work (ns).
    pub fn die_busy_until(&self, die: u32) -> u64 {
        self.die_free[die as usize]
    }

    /// When channel `channel` is next free (ns).
    pub fn channel_busy_until(&self, channel: u32) -> u64 {
        self.bus_free[channel as usize]
    }

    /// Counters, with `time_ns` set to the current simulated time.
    pub fn counters(&self) -> Counters {
        Counters {
            time_ns: self.now,
            ..self.counters
        }
    }

    /// The last misuse and the page or block it concerned.
    pub fn last_misuse(&self) -> Option<(Misuse, u32)> {
        self.last_misuse
    }

    /// State of one block.
    pub fn block_state(&self, block: BlockAddr) -> BlockState {
        self.storage.blocks()[block.0 as usize]
    }

    /// State of one page.
    pub fn page_state(&self, page: PageAddr) -> PageState {
        self.storage.pages()[page.0 as usize]
    }

    /// Erase-count spread over blocks not marked bad.
    pub fn wear_stats(&self) -> WearStats {
        let mut min = u32::MAX;
        let mut max = 0;
        let mut sum = 0u64;
        let mut n = 0u64;
        for b in self.storage.blocks() {
            if b.flags & BlockState::BAD != 0 {
                continue;
            }
            min = min.min(b.erase_count);
            max = max.max(b.erase_count);
            sum += b.erase_count as u64;
            n += 1;
        }
        if n == 0 {
            return WearStats::default();
        }
        WearStats {
            min,
            max,
            mean: sum as f64 / n as f64,
        }
    }

    /// The storage.
    pub fn storage(&self) -> &S {
        &self.storage
    }

    /// Gives the storage back (to save it, or to attach a new simulator to it).
    pub fn into_storage(self) -> S {
        self.storage
    }

    // ----------------------------------------------------------------------------------
    // Targeted fault injection and raw access (tests, fuzzers)

    /// Adds `n` persistent bit errors to ECC step `step` of `page`.
    pub fn inject_flips(&mut self, page: PageAddr, step: u32, n: u8) {
        let ps = &mut self.storage.pages_mut()[page.0 as usize];
        ps.flips[step as usize] = ps.flips[step as usize].saturating_add(n);
    }

    /// Makes `page` unstable: it reads fine a couple of times, then degrades.
    pub fn make_unstable(&mut self, page: PageAddr) {
        self.storage.pages_mut()[page.0 as usize].flags |= PageState::UNSTABLE;
    }

    /// The next erase of `block` fails (and so do all after it: it has gone bad).
    pub fn fail_next_erase(&mut self, block: BlockAddr) {
        self.storage.blocks_mut()[block.0 as usize].flags |= BlockState::FAIL_NEXT_ERASE;
    }

    /// The next program into `block` fails.
    pub fn fail_next_program(&mut self, block: BlockAddr) {
        self.storage.blocks_mut()[block.0 as usize].flags |= BlockState::FAIL_NEXT_PROGRAM;
    }

    /// Sets a block's erase count (to start a wear experiment part way through life).
    pub fn set_erase_count(&mut self, block: BlockAddr, count: u32) {
        self.storage.blocks_mut()[block.0 as usize].erase_count = count;
    }

    /// Copies a page's raw cells (no ECC model, no time, no counters).
    pub fn peek(&self, page: PageAddr, data: &mut [u8], oob: &mut [u8]) {
        let g = self.profile.geometry;
        let (b, base) = self.locate(page);
        let ps = g.page_size() as usize;
        match self.storage.block(b) {
            Some(cells) => {
                data.copy_from_slice(&cells[base..base + data.len()]);
                oob.copy_from_slice(&cells[base + ps..base + ps + oob.len()]);
            }
            None => {
                data.fill(0xFF);
                oob.fill(0xFF);
            }
        }
    }

    /// Overwrites a page's raw cells, bypassing every rule (corrupt-image tests).
    pub fn poke(&mut self, page: PageAddr, column: u32, data: &[u8], oob: &[u8]) {
        let g = self.profile.geometry;
        let (b, base) = self.locate(page);
        let ps = g.page_size() as usize;
        let cells = self.storage.block_mut(b);
        let c = base + column as usize;
        cells[c..c + data.len()].copy_from_slice(data);
        cells[base + ps..base + ps + oob.len()].copy_from_slice(oob);
    }

    /// F19: overwrites a `per_mille` share of pages with random bytes drawn from `seed`
    /// (spare included), as a garbage or half-corrupted image.
    pub fn scribble(&mut self, seed: u64, per_mille: u32) {
        let g = self.profile.geometry;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let raw = g.raw_page_size() as usize;
        for p in 0..g.pages() {
            if rng.next_u32() % 1000 >= per_mille {
                continue;
            }
            let (b, base) = self.locate(PageAddr(p));
            let cells = self.storage.block_mut(b);
            rng.fill_bytes(&mut cells[base..base + raw]);
            let ps = &mut self.storage.pages_mut()[p as usize];
            ps.programs = 1;
            ps.written = 0;
        }
    }

    // ----------------------------------------------------------------------------------
    // Internals

    fn locate(&self, page: PageAddr) -> (u32, usize) {
        let g = self.profile.geometry;
        let b = g.block_of(page).0;
        (
            b,
            g.page_in_block(page) as usize * g.raw_page_size() as usize,
        )
    }

    fn hit(&mut self, ppm: u32) -> bool {
        ppm != 0 && self.fault_rng.next_u32() % 1_000_000 < ppm
    }

    fn below(&mut self, n: u32) -> u32 {
        if n == 0 {
            0
        } else {
            self.fault_rng.next_u32() % n
        }
    }

    fn array_time(&mut self, r: TimeRange) -> u64 {
        match self.timing_mode {
            TimingMode::Typical => r.typ_ns as u64,
            TimingMode::Max => r.max_ns as u64,
            TimingMode::Random => {
                let span = r.max_ns.saturating_sub(r.typ_ns) as u64 + 1;
                r.typ_ns as u64 + self.timing_rng.next_u64() % span
            }
        }
    }

    fn misuse(&mut self, m: Misuse, at: u32) -> SimError {
        self.counters.misuse += 1;
        self.last_misuse = Some((m, at));
        SimError {
            kind: ErrorKind::Misuse,
            misuse: Some(m),
        }
    }

    fn steps(&self) -> u32 {
        self.profile
            .capabilities
            .steps_per_page(&self.profile.geometry)
    }

    fn all_steps(&self) -> u8 {
        ((1u16 << self.steps()) - 1) as u8
    }

    fn has_ecc(&self) -> bool {
        self.profile.capabilities.ecc.kind != EccKind::None
    }

    fn beyond_ecc(&self) -> u8 {
        self.profile.capabilities.ecc.strength.saturating_add(1)
    }

    fn check_powered(&self) -> Result<(), SimError> {
        if self.powered {
            Ok(())
        } else {
            Err(SimError::of(ErrorKind::PowerLoss))
        }
    }

    /// Common checks for an operation on `block`: not bad, die idle.
    fn check_block_usable(&mut self, block: u32, at: u32) -> Result<usize, SimError> {
        if self.storage.blocks()[block as usize].flags & BlockState::BAD != 0 {
            return Err(self.misuse(Misuse::BadBlockAccess, at));
        }
        let die = self.profile.geometry.die_of(BlockAddr(block)).index as usize;
        if self.pending[die].is_some() {
            return Err(self.misuse(Misuse::DieBusy, at));
        }
        Ok(die)
    }

    /// Counts a program/erase against the armed cut. `true` when the cut fires now.
    fn cut_fires(&mut self) -> Option<CutKind> {
        self.ops_since_arm += 1;
        match self.plan.cut {
            Some(c) if c.at_op == self.ops_since_arm => Some(c.kind),
            _ => None,
        }
    }

    fn power_fail(&mut self, skip_die: Option<usize>) {
        self.powered = false;
        self.counters.power_cuts += 1;
        if self.plan.faults.out_of_order {
            for d in 0..MAX_DIES {
                if Some(d) == skip_die {
                    continue;
                }
                if let Some(p) = self.pending[d] {
                    if p.done_at > self.now && p.result.is_ok() {
                        self.tear_in_flight(p.op);
                    }
                }
            }
        }
        self.pending = [None; MAX_DIES];
    }

    fn tear_in_flight(&mut self, op: InFlight) {
        match op {
            InFlight::Program {
                page,
                column,
                len,
                oob_len,
                steps,
            } => {
                let g = self.profile.geometry;
                let (b, base) = self.locate(PageAddr(page));
                let ps = g.page_size() as usize;
                let ecc = self.has_ecc();
                let beyond = self.beyond_ecc();
                let mut noise = [0u8; 64];
                self.fault_rng.fill_bytes(&mut noise);
                let cells = self.storage.block_mut(b);
                let ranges = [
                    (base + column as usize, len as usize),
                    (base + ps, oob_len as usize),
                ];
                for (start, n) in ranges {
                    for (i, c) in cells[start..start + n].iter_mut().enumerate() {
                        *c |= noise[i % 64] & 0x11;
                    }
                }
                let unstable = self.plan.faults.unstable_after_cut;
                let st = &mut self.storage.pages_mut()[page as usize];
                if ecc {
                    for s in 0..MAX_STEPS {
                        if steps & (1 << s) != 0 {
                            st.flips[s] = beyond;
                        }
                    }
                }
                if unstable {
                    st.flags |= PageState::UNSTABLE;
                }
            }
            InFlight::Erase { block } => self.tear_erase(block, TornMode::Random),
        }
    }

    // ----------------------------------------------------------------------------------
    // Read

    fn do_read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, SimError> {
        self.check_powered()?;
        let g = self.profile.geometry;
        if !g.contains_page(page)
            || column as u64 + data.len() as u64 > g.page_size() as u64
            || oob.len() > g.oob_size() as usize
        {
            return Err(SimError::of(ErrorKind::OutOfBounds));
        }
        let block = g.block_of(page).0;
        let die = self.check_block_usable(block, page.0)?;
        let ch = g.die(die as u32).channel as usize;

        // Time: command, array read (die only), transfer out (bus).
        let t = self.profile.timing;
        let t_r = self.array_time(t.t_read);
        let moved = (data.len() + oob.len()) as u64;
        let start = self.now.max(self.die_free[die]).max(self.bus_free[ch]);
        let end = start + t.cmd_read_ns as u64 + t_r + t.bus_ns(moved);
        self.die_free[die] = end;
        self.bus_free[ch] = end;
        self.now = end;
        self.counters.reads += 1;
        if data.is_empty() {
            self.counters.oob_reads += 1;
        }
        self.counters.bytes_read += data.len() as u64;
        self.counters.bus_bytes += moved;

        // Wear-out and disturb effects of this read.
        self.read_side_effects(page);

        // Cells.
        let (b, base) = self.locate(page);
        let ps = g.page_size() as usize;
        match self.storage.block(b) {
            Some(cells) => {
                let c = base + column as usize;
                data.copy_from_slice(&cells[c..c + data.len()]);
                oob.copy_from_slice(&cells[base + ps..base + ps + oob.len()]);
            }
            None => {
                data.fill(0xFF);
                oob.fill(0xFF);
            }
        }

        // ECC model.
        let caps = self.profile.capabilities;
        let steps = self.steps() as usize;
        let st = self.storage.pages()[page.0 as usize];
        let mut errors = st.flips;
        let f = self.plan.faults;
        if self.hit(f.read_correctable_ppm) {
            let s = self.below(steps as u32) as usize;
            let n = 1 + self.below(caps.ecc.strength.max(1) as u32) as u8;
            errors[s] = errors[s].saturating_add(n);
        }
        let mut uncorrectable = self.hit(f.read_uncorrectable_ppm) && self.has_ecc();
        let mut worst = 0u8;
        let salt = self.counters.reads;
        for (s, &n) in errors.iter().enumerate().take(steps) {
            if n == 0 {
                continue;
            }
            let written = st.written & (1 << s) != 0;
            let transient = n != st.flips[s];
            if self.has_ecc() && written {
                if n <= caps.ecc.strength {
                    worst = worst.max(n);
                    continue;
                }
                uncorrectable = true;
            }
            let flip_salt = if transient { salt } else { 0 };
            apply_flips(&caps, page.0, s as u32, n, flip_salt, column, data);
        }
        if uncorrectable {
            self.counters.uncorrectable_reads += 1;
            return Err(SimError::of(ErrorKind::Uncorrectable));
        }
        if worst > 0 {
            self.counters.corrected_reads += 1;
        }
        Ok(ReadReport {
            corrected_bits: worst,
            threshold: caps.ecc.scrub_threshold,
        })
    }

    fn read_side_effects(&mut self, page: PageAddr) {
        let g = self.profile.geometry;
        let b = g.block_of(page).0 as usize;
        let steps = self.steps();
        let f = self.plan.faults;
        let reads = {
            let bs = &mut self.storage.blocks_mut()[b];
            bs.reads_since_erase = bs.reads_since_erase.saturating_add(1);
            bs.reads_since_erase
        };
        if f.read_disturb_threshold != 0
            && reads > f.read_disturb_threshold
            && self.hit(f.read_disturb_ppm)
        {
            let ppb = g.pages_per_block();
            let other = (g.page_in_block(page) + 1 + self.below(ppb - 1)) % ppb;
            let s = self.below(steps) as usize;
            let victim = g.page(BlockAddr(b as u32), other).0 as usize;
            let ps = &mut self.storage.pages_mut()[victim];
            ps.flips[s] = ps.flips[s].saturating_add(1);
        }
        let st = self.storage.pages()[page.0 as usize];
        if st.flags & PageState::UNSTABLE != 0 {
            let degrade = st.unstable_reads >= UNSTABLE_GRACE_READS && self.below(2) == 0;
            let s = self.below(steps) as usize;
            let ps = &mut self.storage.pages_mut()[page.0 as usize];
            ps.unstable_reads = ps.unstable_reads.saturating_add(1);
            if degrade {
                ps.flips[s] = ps.flips[s].saturating_add(1);
            }
        }
    }

    // ----------------------------------------------------------------------------------
    // Program

    /// Checks a program against every rule; returns the die and the ECC steps it writes.
    fn validate_program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(usize, u8), SimError> {
        self.check_powered()?;
        let g = self.profile.geometry;
        let caps = self.profile.capabilities;
        if !g.contains_page(page)
            || column as u64 + data.len() as u64 > g.page_size() as u64
            || oob.len() > g.oob_size() as usize
        {
            return Err(SimError::of(ErrorKind::OutOfBounds));
        }
        let pu = caps.program_unit;
        if column % pu != 0 || data.len() as u32 % pu != 0 || (data.is_empty() && oob.is_empty()) {
            return Err(self.misuse(Misuse::Unaligned, page.0));
        }
        let block = g.block_of(page).0;
        let die = self.check_block_usable(block, page.0)?;
        let pib = g.page_in_block(page);
        let st = self.storage.pages()[page.0 as usize];
        if st.programs >= caps.nop {
            return Err(self.misuse(Misuse::NopExceeded, page.0));
        }
        if pib + 1 < self.storage.blocks()[block as usize].next_page as u32 {
            return Err(self.misuse(Misuse::OutOfOrder, page.0));
        }
        let bbm = caps.bad_block_marker;
        if bbm.on_page(pib, g.pages_per_block()) {
            let end = ((bbm.offset + bbm.len) as usize).min(oob.len());
            if oob
                .get(bbm.offset as usize..end)
                .is_some_and(|m| m.iter().any(|&x| x != 0xFF))
            {
                return Err(self.misuse(Misuse::MarkerWrite, page.0));
            }
        }
        let mut mask = 0u8;
        for (i, chunk) in data.chunks(pu as usize).enumerate() {
            if chunk.iter().any(|&x| x != 0xFF) {
                mask |= 1 << (column / pu + i as u32);
            }
        }
        for r in caps.oob.regions() {
            if let Some(s) = r.ecc_step {
                let end = (r.end() as usize).min(oob.len());
                if oob
                    .get(r.offset as usize..end)
                    .is_some_and(|o| o.iter().any(|&x| x != 0xFF))
                {
                    mask |= 1 << s;
                }
            }
        }
        if self.has_ecc() && mask & st.written != 0 {
            return Err(self.misuse(Misuse::EccStepRewritten, page.0));
        }
        if st.programs > 0 {
            if let Some(cells) = self.storage.block(block) {
                let (_, base) = self.locate(page);
                let ps = g.page_size() as usize;
                let c = base + column as usize;
                let sets = |old: &[u8], new: &[u8]| {
                    old.iter().zip(new).any(|(&o, &n)| n != 0xFF && n & !o != 0)
                };
                if sets(&cells[c..c + data.len()], data)
                    || sets(&cells[base + ps..base + ps + oob.len()], oob)
                {
                    return Err(self.misuse(Misuse::SetsBits, page.0));
                }
            }
        }
        Ok((die, mask))
    }

    fn do_program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
        blocking: bool,
    ) -> Result<(), SimError> {
        let (die, mask) = self.validate_program(page, column, data, oob)?;
        let g = self.profile.geometry;
        let ch = g.die(die as u32).channel as usize;
        let cut = self.cut_fires();

        let t = self.profile.timing;
        let moved = (data.len() + oob.len()) as u64;
        let t_prog = self.array_time(t.t_program);
        let start = self.now.max(self.die_free[die]).max(self.bus_free[ch]);
        let bus_end = start + t.cmd_program_ns as u64 + t.bus_ns(moved);
        let done = bus_end + t_prog;
        self.bus_free[ch] = bus_end;
        self.die_free[die] = done;
        self.counters.programs += 1;
        if data.len() < g.page_size() as usize {
            self.counters.partial_programs += 1;
        }
        self.counters.bytes_programmed += data.len() as u64;
        self.counters.oob_bytes_programmed += oob.len() as u64;
        self.counters.bus_bytes += moved;

        if let Some(kind) = cut {
            self.now = bus_end;
            match kind {
                CutKind::Clean => {}
                CutKind::Torn(mode) => self.tear_program(page, column, data, oob, mask, mode),
            }
            self.power_fail(Some(die));
            return Err(SimError::of(ErrorKind::PowerLoss));
        }
        // A pipelined start returns once the channel has taken the command: its transfer
        // runs on the channel while the host moves on (DMA), so channels overlap.
        self.now = if blocking { done } else { start };

        let result = self.program_outcome(page, column, data, oob, mask);
        if blocking {
            result
        } else {
            let op = InFlight::Program {
                page: page.0,
                column,
                len: data.len() as u32,
                oob_len: oob.len() as u32,
                steps: mask,
            };
            self.pending[die] = Some(Pending {
                done_at: done,
                result,
                op,
            });
            Ok(())
        }
    }

    /// Applies a program that was not cut, with the random faults of the plan.
    fn program_outcome(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
        mask: u8,
    ) -> Result<(), SimError> {
        let g = self.profile.geometry;
        let b = g.block_of(page).0 as usize;
        let f = self.plan.faults;
        let bs = self.storage.blocks()[b];
        let worn = bs.endurance != 0 && bs.erase_count >= bs.endurance;
        let forced = bs.flags & BlockState::FAIL_NEXT_PROGRAM != 0;
        if forced || self.hit(f.program_fail_ppm) || (worn && self.hit(50_000)) {
            self.counters.program_failures += 1;
            let beyond = self.beyond_ecc();
            let all = self.all_steps();
            let mut garbage = [0u8; 32];
            self.fault_rng.fill_bytes(&mut garbage);
            self.land(page, column, data, oob, mask, |i, v| {
                v & (garbage[i % 32] | 0x0F)
            });
            let bs = &mut self.storage.blocks_mut()[b];
            bs.flags = (bs.flags & !BlockState::FAIL_NEXT_PROGRAM) | BlockState::FAIL_NEXT_ERASE;
            let ps = &mut self.storage.pages_mut()[page.0 as usize];
            ps.written |= mask;
            for s in 0..MAX_STEPS {
                if (mask | all) & (1 << s) != 0 && mask & (1 << s) != 0 {
                    ps.flips[s] = beyond;
                }
            }
            return Err(SimError::of(ErrorKind::ProgramFailed));
        }
        if self.hit(f.program_noop_ppm) {
            return Ok(());
        }
        self.land(page, column, data, oob, mask, |_, v| v);
        let extra_flip = self.hit(f.program_flip_ppm) || (worn && self.below(2) == 0);
        let disturb = self.hit(f.partial_disturb_ppm);
        let steps = self.steps();
        let pick = self.below(steps) as usize;
        let ps = &mut self.storage.pages_mut()[page.0 as usize];
        if extra_flip && mask != 0 {
            let s = (0..MAX_STEPS)
                .cycle()
                .skip(pick)
                .find(|s| mask & (1 << s) != 0)
                .unwrap_or(0);
            ps.flips[s] = ps.flips[s].saturating_add(1);
        }
        if disturb && ps.programs >= 2 {
            let others = ps.written & !mask;
            if others != 0 {
                let s = (0..MAX_STEPS)
                    .cycle()
                    .skip(pick)
                    .find(|s| others & (1 << s) != 0)
                    .unwrap_or(0);
                ps.flips[s] = ps.flips[s].saturating_add(1);
            }
        }
        Ok(())
    }

    /// ANDs `f(i, byte)` of the programmed bytes into the cells and records the program
    /// in the page and block state.
    fn land(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
        mask: u8,
        f: impl Fn(usize, u8) -> u8,
    ) {
        let g = self.profile.geometry;
        let (b, base) = self.locate(page);
        let ps = g.page_size() as usize;
        let cells = self.storage.block_mut(b);
        let c = base + column as usize;
        for (i, (cell, &v)) in cells[c..c + data.len()].iter_mut().zip(data).enumerate() {
            *cell &= f(i, v);
        }
        for (i, (cell, &v)) in cells[base + ps..base + ps + oob.len()]
            .iter_mut()
            .zip(oob)
            .enumerate()
        {
            *cell &= f(data.len() + i, v);
        }
        self.record_program(page, mask);
    }

    fn record_program(&mut self, page: PageAddr, mask: u8) {
        let g = self.profile.geometry;
        let pib = g.page_in_block(page) as u16;
        let b = g.block_of(page).0 as usize;
        let beyond = self.beyond_ecc();
        let ps = &mut self.storage.pages_mut()[page.0 as usize];
        ps.programs = ps.programs.saturating_add(1);
        // Bit errors seen on a step while it was erased (F5) do not survive programming
        // it; on cells that were never really erased, ECC cannot match the new data.
        let fresh = if ps.flags & PageState::STALE != 0 {
            beyond
        } else {
            0
        };
        for s in 0..MAX_STEPS {
            if mask & !ps.written & (1 << s) != 0 {
                ps.flips[s] = fresh;
            }
        }
        ps.written |= mask;
        let bs = &mut self.storage.blocks_mut()[b];
        bs.next_page = bs.next_page.max(pib + 1);
    }

    fn tear_program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
        mask: u8,
        mode: TornMode,
    ) {
        let g = self.profile.geometry;
        let (b, base) = self.locate(page);
        let ps = g.page_size() as usize;
        let ecc = self.has_ecc();
        let beyond = self.beyond_ecc();
        // Bits this program would clear.
        let old_at = |cells: Option<&[u8]>, i: usize| -> u8 {
            let at = if i < data.len() {
                base + column as usize + i
            } else {
                base + ps + i - data.len()
            };
            cells.map_or(0xFF, |c| c[at])
        };
        let new_at = |i: usize| {
            if i < data.len() {
                data[i]
            } else {
                oob[i - data.len()]
            }
        };
        let total = data.len() + oob.len();
        let clearing: u64 = (0..total)
            .map(|i| (old_at(self.storage.block(b), i) & !new_at(i)).count_ones() as u64)
            .sum();
        let mut ecc_broken = false;
        match mode {
            TornMode::SomeBits | TornMode::MostBits if clearing > 0 => {
                let chosen = self.fault_rng.next_u64() % clearing;
                let most = mode == TornMode::MostBits;
                if most && ecc && mask != 0 {
                    // All but one bit landed: within ECC reach, read back as corrected.
                    self.land(page, column, data, oob, mask, |_, v| v);
                    let s = (0..MAX_STEPS).find(|s| mask & (1 << s) != 0).unwrap_or(0);
                    let st = &mut self.storage.pages_mut()[page.0 as usize];
                    st.flips[s] = st.flips[s].saturating_add(1);
                } else {
                    let mut seen = 0u64;
                    let cells = self.storage.block_mut(b);
                    for i in 0..total {
                        let at = if i < data.len() {
                            base + column as usize + i
                        } else {
                            base + ps + i - data.len()
                        };
                        let clear = cells[at] & !new_at(i);
                        for bit in 0..8 {
                            if clear & (1 << bit) == 0 {
                                continue;
                            }
                            let is_chosen = seen == chosen;
                            seen += 1;
                            if is_chosen != most {
                                cells[at] &= !(1 << bit);
                            }
                        }
                    }
                    self.record_program(page, mask);
                }
            }
            TornMode::SomeBits | TornMode::MostBits => self.record_program(page, mask),
            TornMode::Prefix => {
                let cut_at = self.below(total as u32) as usize;
                let fill_random = self.below(2) == 0;
                let mut noise = [0u8; 64];
                self.fault_rng.fill_bytes(&mut noise);
                self.land(page, column, data, oob, mask, |i, v| {
                    if i < cut_at {
                        v
                    } else if fill_random {
                        v | noise[i % 64]
                    } else {
                        0xFF
                    }
                });
                ecc_broken = true;
            }
            TornMode::Random => {
                let mut noise = [0u8; 64];
                self.fault_rng.fill_bytes(&mut noise);
                self.land(page, column, data, oob, mask, |i, v| v | noise[i % 64]);
                ecc_broken = true;
            }
        }
        let unstable = self.plan.faults.unstable_after_cut;
        let st = &mut self.storage.pages_mut()[page.0 as usize];
        st.written |= mask;
        if ecc && ecc_broken {
            for s in 0..MAX_STEPS {
                if mask & (1 << s) != 0 {
                    st.flips[s] = beyond;
                }
            }
        }
        if unstable {
            st.flags |= PageState::UNSTABLE;
        }
    }

    // ----------------------------------------------------------------------------------
    // Erase

    fn do_erase(&mut self, block: BlockAddr, blocking: bool) -> Result<(), SimError> {
        self.check_powered()?;
        let g = self.profile.geometry;
        if !g.contains_block(block) {
            return Err(SimError::of(ErrorKind::OutOfBounds));
        }
        let die = self.check_block_usable(block.0, block.0)?;
        let ch = g.die(die as u32).channel as usize;
        let cut = self.cut_fires();

        let t = self.profile.timing;
        let t_bers = self.array_time(t.t_erase);
        let start = self.now.max(self.die_free[die]).max(self.bus_free[ch]);
        let bus_end = start + t.cmd_erase_ns as u64;
        let done = bus_end + t_bers;
        self.bus_free[ch] = bus_end;
        self.die_free[die] = done;
        self.counters.erases += 1;
        {
            let bs = &mut self.storage.blocks_mut()[block.0 as usize];
            bs.erase_count = bs.erase_count.saturating_add(1);
        }

        if let Some(kind) = cut {
            self.now = bus_end;
            if let CutKind::Torn(mode) = kind {
                self.tear_erase(block.0, mode);
            }
            self.power_fail(Some(die));
            return Err(SimError::of(ErrorKind::PowerLoss));
        }
        self.now = if blocking { done } else { start };
        let result = self.erase_outcome(block.0);
        if blocking {
            result
        } else {
            let op = InFlight::Erase { block: block.0 };
            self.pending[die] = Some(Pending {
                done_at: done,
                result,
                op,
            });
            Ok(())
        }
    }

    fn erase_outcome(&mut self, block: u32) -> Result<(), SimError> {
        let f = self.plan.faults;
        let bs = self.storage.blocks()[block as usize];
        let worn = bs.endurance != 0 && bs.erase_count > bs.endurance;
        if bs.flags & BlockState::FAIL_NEXT_ERASE != 0
            || self.hit(f.erase_fail_ppm)
            || (worn && self.hit(200_000))
        {
            self.counters.erase_failures += 1;
            self.storage.blocks_mut()[block as usize].flags |= BlockState::FAIL_NEXT_ERASE;
            self.garble_block(block);
            return Err(SimError::of(ErrorKind::EraseFailed));
        }
        if self.hit(f.erase_noop_ppm) {
            // Nothing was erased, but the block is treated as fresh by whoever trusts the
            // status: old cells stay, and ECC over them will not match new data.
            let beyond = self.beyond_ecc();
            for p in self.page_range(block) {
                self.storage.pages_mut()[p] = PageState {
                    flags: PageState::STALE,
                    flips: [beyond; MAX_STEPS],
                    ..PageState::default()
                };
            }
            self.storage.blocks_mut()[block as usize].next_page = 0;
            return Ok(());
        }
        self.erase_clean(block);
        if f.erased_flips_ppm != 0 {
            let steps = self.steps();
            for p in self.page_range(block) {
                if self.hit(f.erased_flips_ppm) {
                    let s = self.below(steps) as usize;
                    let n = 1 + self.below(2) as u8;
                    self.storage.pages_mut()[p].flips[s] = n;
                }
            }
        }
        Ok(())
    }

    fn page_range(&self, block: u32) -> core::ops::Range<usize> {
        let ppb = self.profile.geometry.pages_per_block() as usize;
        block as usize * ppb..(block as usize + 1) * ppb
    }

    fn erase_clean(&mut self, block: u32) {
        self.storage.erase_block(block);
        for p in self.page_range(block) {
            self.storage.pages_mut()[p] = PageState::default();
        }
        let bs = &mut self.storage.blocks_mut()[block as usize];
        bs.reads_since_erase = 0;
        bs.next_page = 0;
    }

    /// Leaves a block undefined: every page full and unreadable.
    fn garble_block(&mut self, block: u32) {
        let nop = self.profile.capabilities.nop;
        let all = self.all_steps();
        let beyond = self.beyond_ecc().max(1);
        for p in self.page_range(block) {
            self.storage.pages_mut()[p] = PageState {
                programs: nop,
                written: all,
                flags: 0,
                unstable_reads: 0,
                flips: [beyond; MAX_STEPS],
            };
        }
        let ppb = self.profile.geometry.pages_per_block() as u16;
        self.storage.blocks_mut()[block as usize].next_page = ppb;
    }

    fn tear_erase(&mut self, block: u32, mode: TornMode) {
        let g = self.profile.geometry;
        let ppb = g.pages_per_block() as usize;
        let raw = g.raw_page_size() as usize;
        match mode {
            TornMode::SomeBits => {
                let at = self.below((ppb * raw) as u32) as usize;
                let bit = self.below(8);
                self.storage.block_mut(block)[at] |= 1 << bit;
            }
            TornMode::MostBits => {
                self.erase_clean(block);
                let p = self.below(ppb as u32) as usize;
                let s = self.below(self.steps()) as usize;
                self.storage.pages_mut()[block as usize * ppb + p].flips[s] = 1;
            }
            TornMode::Prefix => {
                let upto = self.below(ppb as u32) as usize;
                let cells = self.storage.block_mut(block);
                cells[..upto * raw].fill(0xFF);
                let first = block as usize * ppb;
                for p in first..first + upto {
                    self.storage.pages_mut()[p] = PageState::default();
                }
            }
            TornMode::Random => {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.fault_rng.next_u64());
                rng.fill_bytes(self.storage.block_mut(block));
                self.garble_block(block);
            }
        }
        if self.plan.faults.unstable_after_cut {
            for p in self.page_range(block) {
                self.storage.pages_mut()[p].flags |= PageState::UNSTABLE;
            }
        }
    }

    // ----------------------------------------------------------------------------------
    // Bad blocks

    fn marker_pages(&self, block: u32) -> impl Iterator<Item = PageAddr> + '_ {
        let g = self.profile.geometry;
        let bbm = self.profile.capabilities.bad_block_marker;
        (0..g.pages_per_block())
            .filter(move |&p| bbm.on_page(p, g.pages_per_block()))
            .map(move |p| g.page(BlockAddr(block), p))
    }

    fn do_is_bad(&mut self, block: BlockAddr) -> Result<bool, SimError> {
        self.check_powered()?;
        let g = self.profile.geometry;
        if !g.contains_block(block) {
            return Err(SimError::of(ErrorKind::OutOfBounds));
        }
        let bbm = self.profile.capabilities.bad_block_marker;
        let t = self.profile.timing;
        let mut bad = self.storage.blocks()[block.0 as usize].flags & BlockState::BAD != 0;
        let pages: heapless_pages::Pages = self.marker_pages(block.0).collect();
        for page in pages.iter() {
            self.now += t.cmd_read_ns as u64 + t.t_read.typ_ns as u64 + t.bus_ns(bbm.len as u64);
            self.counters.reads += 1;
            self.counters.oob_reads += 1;
            self.counters.bus_bytes += bbm.len as u64;
            let (b, base) = self.locate(*page);
            if let Some(cells) = self.storage.block(b) {
                let at = base + g.page_size() as usize + bbm.offset as usize;
                bad |= cells[at..at + bbm.len as usize].iter().any(|&x| x != 0xFF);
            }
        }
        Ok(bad)
    }

    fn do_mark_bad(&mut self, block: BlockAddr) -> Result<(), SimError> {
        self.check_powered()?;
        let g = self.profile.geometry;
        if !g.contains_block(block) {
            return Err(SimError::of(ErrorKind::OutOfBounds));
        }
        let t = self.profile.timing;
        self.now += t.cmd_program_ns as u64 + t.bus_ns(2) + t.t_program.typ_ns as u64;
        self.counters.programs += 1;
        self.counters.partial_programs += 1;
        self.write_marker(block.0);
        self.storage.blocks_mut()[block.0 as usize].flags |= BlockState::BAD;
        Ok(())
    }
}

/// Marker pages of one block (at most three).
mod heapless_pages {
    use crate::geometry::PageAddr;

    pub struct Pages {
        items: [PageAddr; 3],
        len: usize,
    }

    impl Pages {
        pub fn iter(&self) -> impl Iterator<Item = &PageAddr> {
            self.items[..self.len].iter()
        }
    }

    impl FromIterator<PageAddr> for Pages {
        fn from_iter<I: IntoIterator<Item = PageAddr>>(iter: I) -> Self {
            let mut p = Pages {
                items: [PageAddr(0); 3],
                len: 0,
            };
            for a in iter.into_iter().take(3) {
                p.items[p.len] = a;
                p.len += 1;
            }
            p
        }
    }
}

/// Applies `n` bit flips of ECC step `step` to the part of `data` (which starts at
/// `column` of the page) they fall in. Positions are fixed per (page, step, salt).
fn apply_flips(
    caps: &Capabilities,
    page: u32,
    step: u32,
    n: u8,
    salt: u64,
    column: u32,
    data: &mut [u8],
) {
    let pu = caps.program_unit as u64;
    for i in 0..n as u64 {
        let h =
            mix64(((page as u64) << 24) ^ ((step as u64) << 16) ^ (i << 8) ^ salt.rotate_left(32));
        let bit = h % (pu * 8);
        let byte = step as u64 * pu + bit / 8;
        let col = column as u64;
        if byte >= col && byte < col + data.len() as u64 {
            data[(byte - col) as usize] ^= 1 << (bit % 8);
        }
    }
}

impl<S> ErrorType for SimNand<S> {
    type Error = SimError;
}

impl<S: SimStorage> NandFlash for SimNand<S> {
    fn geometry(&self) -> Geometry {
        self.profile.geometry
    }

    fn capabilities(&self) -> &Capabilities {
        &self.profile.capabilities
    }

    fn read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, SimError> {
        self.do_read(page, column, data, oob)
    }

    fn program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), SimError> {
        self.do_program(page, column, data, oob, true)
    }

    fn erase(&mut self, block: BlockAddr) -> Result<(), SimError> {
        self.do_erase(block, true)
    }

    fn is_bad(&mut self, block: BlockAddr) -> Result<bool, SimError> {
        self.do_is_bad(block)
    }

    fn mark_bad(&mut self, block: BlockAddr) -> Result<(), SimError> {
        self.do_mark_bad(block)
    }
}

impl<S: SimStorage> PipelinedNand for SimNand<S> {
    fn start_program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), SimError> {
        self.do_program(page, column, data, oob, false)
    }

    fn start_erase(&mut self, block: BlockAddr) -> Result<(), SimError> {
        self.do_erase(block, false)
    }

    fn die_busy(&self, die: u32) -> bool {
        self.pending.get(die as usize).is_some_and(|p| p.is_some())
    }

    fn wait_die(&mut self, die: u32) -> Result<(), SimError> {
        self.check_powered()?;
        let d = die as usize;
        if d >= self.profile.geometry.dies() as usize {
            return Err(SimError::of(ErrorKind::OutOfBounds));
        }
        self.now = self.now.max(self.die_free[d]);
        match self.pending[d].take() {
            Some(p) => p.result,
            None => Ok(()),
        }
    }
}

#[cfg(feature = "alloc")]
impl SimNand<HeapStorage> {
    /// A factory-fresh heap-backed device.
    pub fn heap(profile: Profile, plan: FaultPlan) -> Self {
        let storage = HeapStorage::new(&profile.geometry);
        match Self::new(profile, storage, plan) {
            Ok(s) => s,
            Err(_) => unreachable!("heap storage is sized from the profile"),
        }
    }
}
