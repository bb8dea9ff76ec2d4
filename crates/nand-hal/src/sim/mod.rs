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

mod erase;
mod power;
mod program;
mod read;

use core::fmt;

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::blocking::{NandFlash, PipelinedNand, ReadReport, StepReport};
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
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
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
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
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
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
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
    reads_since_arm: u64,
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
            reads_since_arm: 0,
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
                st.endurance = (mean - mean / 4).saturating_add(rng.next_u32() % spread);
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
        self.reads_since_arm = 0;
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

    /// Reads (data or spare) since the plan was armed (what
    /// [`FaultConfig::read_fail_at`] counts).
    pub fn reads_since_arm(&self) -> u64 {
        self.reads_since_arm
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

    /// An array read into a page buffer, as a chip's page-read command fills its cache
    /// register: [`NandFlash::read_steps`] without charging the bus transfer (the chip
    /// model charges it as the host clocks the cache out).
    pub fn load_page_buffer(
        &mut self,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<StepReport, SimError> {
        self.do_read_steps(page, data, oob, false)
    }

    /// Adds `n` persistent bit errors to ECC step `step` of `page`.
    pub fn inject_flips(&mut self, page: PageAddr, step: u32, n: u8) {
        let ps = &mut self.storage.pages_mut()[page.0 as usize];
        ps.flips[step as usize] = ps.flips[step as usize].saturating_add(n);
    }

    /// Makes `page` unstable: each read draws its own outcome (clean, corrected bits or
    /// uncorrectable), in any order, for one of its steps.
    pub fn make_unstable(&mut self, page: PageAddr) {
        let st = &mut self.storage.pages_mut()[page.0 as usize];
        st.flags |= PageState::UNSTABLE;
        st.torn_steps = u8::MAX;
    }

    /// Makes steps `mask` of `page` unstable (as a cut or a failed program leaves the
    /// steps it was programming): each read draws their outcome, in any order.
    pub fn make_steps_unstable(&mut self, page: PageAddr, mask: u8) {
        let st = &mut self.storage.pages_mut()[page.0 as usize];
        st.flags |= PageState::UNSTABLE;
        st.torn_steps |= mask;
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

    fn read_steps(
        &mut self,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<StepReport, SimError> {
        self.do_read_steps(page, data, oob, true)
    }

    fn delivers_good_steps(&self) -> bool {
        true
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
        self.do_is_bad(block).map(|(bad, _)| bad)
    }

    fn is_marked(&mut self, block: BlockAddr) -> Result<bool, SimError> {
        self.do_is_bad(block).map(|(_, marked)| marked)
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
