//! A behavioural SPI NAND chip: an `embedded-hal` [`SpiDevice`] that decodes the
//! command set byte by byte, backed by a [`SimNand`] for the cells, faults and costs.
//!
//! # What is modelled
//!
//! - Commands (single-wire framing, see [`super::opcodes`]): reset `FFh`, read ID `9Fh`,
//!   get/set feature `0Fh`/`1Fh`, write enable/disable `06h`/`04h`, page read `13h`,
//!   read from cache `03h`/`0Bh`, program load `02h` / random load `84h`, program
//!   execute `10h`, block erase `D8h`, Winbond die select `C2h`. Commands that act on
//!   the array take effect when chip select rises (the end of the transaction), as on
//!   the parts.
//! - Per die: the cache register, status (`OIP`, `WEL`, `E_FAIL`, `P_FAIL`, the ECC
//!   field in the vendor's encoding), protection (any block-protect bit set locks the
//!   whole array: program/erase then fail with `P_FAIL`/`E_FAIL`, as on Winbond parts)
//!   and configuration (ECC enable; Winbond `BUF`: with `BUF = 0` a cache read ignores
//!   the column, as continuous-read mode does). Power-on defaults: protection set,
//!   ECC on, `BUF = 0` (the W25N01GV `-IT` variant), so a driver that skips set-up
//!   fails.
//! - Busy time: an array command runs on the simulator at once, which moves the
//!   simulator's clock to the operation's end; the host side keeps its own clock, and
//!   status reads before that end return `OIP = 1`. The host clock advances by the bus
//!   time of every byte the model clocks (the simulator's per-byte cost), by
//!   `DelayNs` operations inside transactions and by [`ModelDelay`] (the delay handed to
//!   the driver, sharing a [`HostClock`] with the model). Whenever the host clock passes
//!   the simulator's, the simulator is advanced to match. The simulator charges page
//!   reads command + tR (the transfer is charged as the host clocks the cache out),
//!   programs command + bus bytes loaded + tPROG, erases command + tBERS.
//! - ECC: the simulator's corrected-bit count (per read, worst step) is encoded in the
//!   vendor's status field; uncorrectable pages set the vendor's "uncorrectable" code
//!   (page-wide: which step failed is not told) and the cache holds what ECC made of
//!   each step: corrected data where it could, raw cells (with their flips) where it
//!   could not, as the parts deliver it.
//! - Program execute translates the loaded part of the cache into one simulator
//!   program over the sectors the host loaded (so NOP and partial programs count as on
//!   the part); sectors left all `FFh` are not written. A program that writes the
//!   bad-block marker bytes of a marker page marks the block bad in the simulator.
//!
//! # Protocol violations
//!
//! Commands a real part would ignore or act on unpredictably (a command other than
//! status/reset/ID while busy, program/erase without `WEL`, unknown opcodes, short
//! address phases, rows past the die, operations the simulator rejects as misuse) are
//! counted in [`ChipModel::protocol_violations`]; tests assert it stays zero.
//!
//! # Not modelled
//!
//! Quad/dual transfers, OTP/parameter pages, continuous read, per-range block
//! protection, cache-read pipelining, transient read faults on erased sectors (the
//! simulator's injected flips on erased sectors are applied at model-chosen bit
//! positions).

use core::cell::Cell;
use core::fmt;

use embedded_hal::spi::{self, ErrorType as SpiErrorType, Operation, SpiDevice};

use super::opcodes::*;
use crate::blocking::NandFlash;
use crate::error::ErrorKind;
use crate::geometry::PageAddr;
use crate::sim::profile::{self, Profile};
use crate::sim::{BlockState, SimNand, SimStorage};

/// Largest raw page (data + spare) the model's cache register holds.
pub const MAX_RAW_PAGE: usize = 2048 + 128;
/// Most dies the model handles.
pub const MAX_MODEL_DIES: usize = 2;

/// How a vendor encodes the last read's ECC outcome in status bits 4-6 (the model's own
/// encoder, written from the datasheets independently of the driver's decoder).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum StatusEncoding {
    /// Winbond 1-bit: `01` corrected, `10` uncorrectable.
    Winbond,
    /// GigaDevice xA: `01` 1-7 corrected, `11` 8 corrected, `10` uncorrectable.
    GigaDeviceXa,
    /// Micron: `001` 1-3, `011` 4-6, `101` 7-8, `010` uncorrectable.
    Micron,
}

impl StatusEncoding {
    /// Status bits for `corrected` bits fixed, or for an uncorrectable page.
    pub const fn encode(self, corrected: u8, uncorrectable: bool) -> u8 {
        let field = match self {
            StatusEncoding::Winbond => match (uncorrectable, corrected) {
                (true, _) => 0b10,
                (false, 0) => 0b00,
                (false, 1) => 0b01,
                (false, _) => 0b10,
            },
            StatusEncoding::GigaDeviceXa => match (uncorrectable, corrected) {
                (true, _) => 0b10,
                (false, 0) => 0b00,
                (false, 1..=7) => 0b01,
                (false, 8) => 0b11,
                (false, _) => 0b10,
            },
            StatusEncoding::Micron => match (uncorrectable, corrected) {
                (true, _) => 0b010,
                (false, 0) => 0b000,
                (false, 1..=3) => 0b001,
                (false, 4..=6) => 0b011,
                (false, 7..=8) => 0b101,
                (false, _) => 0b010,
            },
        };
        field << 4
    }
}

/// What one modelled part looks like on the bus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ModelSpec {
    /// The simulated array.
    pub profile: Profile,
    /// Bytes sent after READ ID's dummy byte (the model then sends `00h`).
    pub id: [u8; 3],
    /// ECC status encoding.
    pub status: StatusEncoding,
    /// Power-on value of the protection register.
    pub protect_default: u8,
    /// Block-protect bits of the protection register.
    pub protect_mask: u8,
    /// Power-on value of the configuration register.
    pub config_default: u8,
    /// The Winbond `BUF` bit, if the part has it.
    pub buf_bit: Option<u8>,
    /// Whether `C2h` die select exists.
    pub die_select: bool,
}

const CFG_ECC: u8 = 1 << 4;

/// Winbond W25N01GV (`-IT` defaults: `BUF = 0`).
pub const W25N01GV: ModelSpec = ModelSpec {
    profile: profile::W25N01GV,
    id: [0xEF, 0xAA, 0x21],
    status: StatusEncoding::Winbond,
    protect_default: 0b0111_1100,
    protect_mask: 0b0111_1100,
    config_default: CFG_ECC,
    buf_bit: Some(1 << 3),
    die_select: false,
};

/// Winbond W25M02GV: two W25N01GV dies, die select `C2h`.
pub const W25M02GV: ModelSpec = ModelSpec {
    profile: profile::W25M02GV,
    id: [0xEF, 0xAB, 0x21],
    die_select: true,
    ..W25N01GV
};

/// GigaDevice GD5F1GQ4xA.
pub const GD5F1GQ4XA: ModelSpec = ModelSpec {
    profile: profile::GD5F1GQ4,
    id: [0xC8, 0xF1, 0xC8],
    status: StatusEncoding::GigaDeviceXa,
    protect_default: 0b0011_1000,
    protect_mask: 0b0011_1000,
    config_default: CFG_ECC,
    buf_bit: None,
    die_select: false,
};

/// Micron MT29F1G01ABAFD.
pub const MT29F1G01ABAFD: ModelSpec = ModelSpec {
    profile: profile::MT29F1G01,
    id: [0x2C, 0x14, 0x00],
    status: StatusEncoding::Micron,
    protect_default: 0b0011_1000,
    protect_mask: 0b0011_1000,
    config_default: CFG_ECC,
    buf_bit: None,
    die_select: false,
};

/// The model's bus error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ModelError {
    /// The simulator lost power: the part does not answer until
    /// [`ChipModel::power_on`].
    NoPower,
}

impl spi::Error for ModelError {
    fn kind(&self) -> spi::ErrorKind {
        spi::ErrorKind::Other
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the SPI NAND model has no power")
    }
}

impl core::error::Error for ModelError {}

/// Host time spent in delays, shared by the model and the [`ModelDelay`] the driver
/// owns (the model drains it at the start of each transaction).
#[derive(Debug, Default)]
pub struct HostClock {
    pending_ns: Cell<u64>,
}

impl HostClock {
    /// A clock with nothing pending.
    pub const fn new() -> Self {
        HostClock {
            pending_ns: Cell::new(0),
        }
    }

    /// A delay that advances this clock.
    pub fn delay(&self) -> ModelDelay<'_> {
        ModelDelay(self)
    }

    fn take(&self) -> u64 {
        self.pending_ns.replace(0)
    }
}

/// An `embedded-hal` delay that advances a [`HostClock`] instead of sleeping.
#[derive(Debug, Clone, Copy)]
pub struct ModelDelay<'c>(&'c HostClock);

impl embedded_hal::delay::DelayNs for ModelDelay<'_> {
    fn delay_ns(&mut self, ns: u32) {
        let c = self.0;
        c.pending_ns.set(c.pending_ns.get() + ns as u64);
    }
}

/// Per-die registers and cache.
#[derive(Clone, Debug)]
struct Die {
    cache: [u8; MAX_RAW_PAGE],
    /// Byte range of the cache loaded since the last program load (`lo >= hi`: none).
    loaded: (u32, u32),
    busy_until: u64,
    status: u8,
    protect: u8,
    config: u8,
}

impl Die {
    fn power_on(spec: &ModelSpec) -> Self {
        Die {
            cache: [0xFF; MAX_RAW_PAGE],
            loaded: (u32::MAX, 0),
            busy_until: 0,
            status: 0,
            protect: spec.protect_default,
            config: spec.config_default,
        }
    }
}

/// Decoder state within one chip-select window.
#[derive(Clone, Copy, Debug)]
struct Frame {
    op: u8,
    /// Bytes clocked so far in this command (opcode included).
    pos: u32,
    addr: u32,
    /// Set when the command was refused at its opcode (ignored until CS rises).
    ignored: bool,
    /// Data bytes following the address phase.
    data: u32,
    /// Value latched for set-feature.
    value: Option<u8>,
}

/// The behavioural chip. `'c` is the lifetime of the [`HostClock`] it shares with the
/// driver's delay.
#[derive(Debug)]
pub struct ChipModel<'c, S> {
    sim: SimNand<S>,
    spec: ModelSpec,
    clock: &'c HostClock,
    host_ns: u64,
    /// Bus bytes clocked but not yet charged, in picoseconds.
    bus_ps: u64,
    dies: [Die; MAX_MODEL_DIES],
    die: usize,
    frame: Option<Frame>,
    powered: bool,
    stuck_busy: bool,
    id_override: Option<[u8; 3]>,
    violations: u32,
    last_violation: Option<&'static str>,
}

/// Error creating a model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ModelSpecError {
    /// The simulator's profile differs from the spec's.
    ProfileMismatch,
    /// Page + spare larger than [`MAX_RAW_PAGE`] or more than [`MAX_MODEL_DIES`] dies.
    TooLarge,
}

impl<'c, S: SimStorage> ChipModel<'c, S> {
    /// A powered-on part over `sim` (whose profile must be `spec.profile`), sharing
    /// `clock` with the driver's delay.
    pub fn new(
        sim: SimNand<S>,
        spec: ModelSpec,
        clock: &'c HostClock,
    ) -> Result<Self, ModelSpecError> {
        if *sim.profile() != spec.profile {
            return Err(ModelSpecError::ProfileMismatch);
        }
        let g = spec.profile.geometry;
        if g.raw_page_size() as usize > MAX_RAW_PAGE || g.dies() as usize > MAX_MODEL_DIES {
            return Err(ModelSpecError::TooLarge);
        }
        let host_ns = sim.now_ns();
        Ok(ChipModel {
            sim,
            spec,
            clock,
            host_ns,
            bus_ps: 0,
            dies: core::array::from_fn(|_| Die::power_on(&spec)),
            die: 0,
            frame: None,
            powered: true,
            stuck_busy: false,
            id_override: None,
            violations: 0,
            last_violation: None,
        })
    }

    /// The simulator (counters, clock, fault injection).
    pub fn sim(&self) -> &SimNand<S> {
        &self.sim
    }

    /// The simulator, mutably (fault injection: `inject_flips`, `fail_next_program`...).
    pub fn sim_mut(&mut self) -> &mut SimNand<S> {
        &mut self.sim
    }

    /// The spec.
    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// Host-side time in nanoseconds (≥ the simulator's clock except while an
    /// operation is running).
    pub fn host_ns(&self) -> u64 {
        self.host_ns
    }

    /// Protocol violations seen (see the module docs); zero for a correct driver.
    pub fn protocol_violations(&self) -> u32 {
        self.violations
    }

    /// The last protocol violation.
    pub fn last_violation(&self) -> Option<&'static str> {
        self.last_violation
    }

    /// Fault knob: answer READ ID with `id` instead of the part's ID.
    pub fn set_id_override(&mut self, id: Option<[u8; 3]>) {
        self.id_override = id;
    }

    /// Fault knob: the status register reports busy forever.
    pub fn set_stuck_busy(&mut self, stuck: bool) {
        self.stuck_busy = stuck;
    }

    /// Whether the part has power.
    pub fn is_powered(&self) -> bool {
        self.powered
    }

    /// Restores power after the simulator cut it: registers back to power-on defaults.
    pub fn power_on(&mut self) {
        self.sim.power_on();
        self.powered = true;
        let spec = self.spec;
        for d in self.dies.iter_mut() {
            *d = Die::power_on(&spec);
        }
        self.die = 0;
        self.frame = None;
        self.host_ns = self.host_ns.max(self.sim.now_ns());
    }

    /// Gives the simulator back.
    pub fn into_sim(self) -> SimNand<S> {
        self.sim
    }

    // ------------------------------------------------------------------------------
    // Clock

    fn violation(&mut self, what: &'static str) {
        self.violations += 1;
        self.last_violation = Some(what);
    }

    fn charge_bus(&mut self) {
        let ns = self.bus_ps.div_ceil(1000);
        self.bus_ps = 0;
        self.host_ns += ns;
    }

    /// Brings the simulator's clock up to the host's.
    fn sync_sim(&mut self) {
        let now = self.sim.now_ns();
        if self.host_ns > now {
            self.sim.advance(self.host_ns - now);
        }
    }

    fn busy(&self) -> bool {
        self.stuck_busy || self.host_ns + self.bus_ps / 1000 < self.dies[self.die].busy_until
    }

    fn pages_per_die(&self) -> u32 {
        let g = self.spec.profile.geometry;
        g.blocks_per_die() * g.pages_per_block()
    }

    // ------------------------------------------------------------------------------
    // Byte decoder

    /// Clocks one byte in (`mosi`, `None` while the host only reads) and returns the
    /// byte the part drives out.
    fn clock_byte(&mut self, mosi: Option<u8>) -> u8 {
        // Bytes of array commands and program loads are part of the simulator's
        // charge for the operation (command time + bytes programmed); the rest is
        // charged here at the bus rate.
        let op = self.frame.map_or(mosi.unwrap_or(0x00), |f| f.op);
        if !matches!(
            op,
            PAGE_READ | PROGRAM_LOAD | PROGRAM_LOAD_RANDOM | PROGRAM_EXECUTE | BLOCK_ERASE
        ) {
            self.bus_ps += self.spec.profile.timing.bus_ps_per_byte as u64;
        }
        let mut f = match self.frame {
            Some(f) => f,
            None => {
                let op = mosi.unwrap_or(0x00);
                let f = Frame {
                    op,
                    pos: 0,
                    addr: 0,
                    ignored: false,
                    data: 0,
                    value: None,
                };
                let allowed_busy = matches!(op, GET_FEATURE | RESET | READ_ID | 0x05);
                let known = matches!(
                    op,
                    RESET
                        | READ_ID
                        | GET_FEATURE
                        | 0x05
                        | SET_FEATURE
                        | 0x01
                        | WRITE_ENABLE
                        | WRITE_DISABLE
                        | PAGE_READ
                        | READ_CACHE
                        | READ_CACHE_FAST
                        | PROGRAM_LOAD
                        | PROGRAM_LOAD_RANDOM
                        | PROGRAM_EXECUTE
                        | BLOCK_ERASE
                ) || (op == DIE_SELECT && self.spec.die_select);
                let mut f = f;
                if !known {
                    self.violation("unknown opcode");
                    f.ignored = true;
                } else if !allowed_busy && self.busy() {
                    self.violation("command while busy");
                    f.ignored = true;
                }
                f.pos = 1;
                if !f.ignored && (op == PROGRAM_LOAD) {
                    let d = &mut self.dies[self.die];
                    d.cache.fill(0xFF);
                    d.loaded = (u32::MAX, 0);
                }
                self.frame = Some(f);
                return 0xFF;
            }
        };
        let i = f.pos;
        f.pos += 1;
        let input = mosi.unwrap_or(0x00);
        let out = if f.ignored {
            0xFF
        } else {
            self.data_byte(&mut f, i, input, mosi.is_some())
        };
        self.frame = Some(f);
        out
    }

    /// Byte `i` (≥ 1) of the current command.
    fn data_byte(&mut self, f: &mut Frame, i: u32, input: u8, driven: bool) -> u8 {
        let raw = self.spec.profile.geometry.raw_page_size();
        match f.op {
            READ_ID => {
                if i == 1 {
                    return 0xFF;
                }
                let id = self.id_override.unwrap_or(self.spec.id);
                let k = (i - 2) as usize;
                if k < id.len() {
                    id[k]
                } else {
                    0x00
                }
            }
            GET_FEATURE | 0x05 => {
                if i == 1 {
                    f.addr = input as u32;
                    return 0xFF;
                }
                self.register(f.addr as u8)
            }
            SET_FEATURE | 0x01 => {
                if i == 1 {
                    f.addr = input as u32;
                } else if i == 2 {
                    f.value = Some(input);
                }
                0xFF
            }
            PAGE_READ | PROGRAM_EXECUTE | BLOCK_ERASE | DIE_SELECT => {
                f.addr = (f.addr << 8) | input as u32;
                0xFF
            }
            READ_CACHE | READ_CACHE_FAST => {
                if i <= 2 {
                    f.addr = (f.addr << 8) | input as u32;
                    return 0xFF;
                }
                if i == 3 {
                    return 0xFF; // dummy
                }
                let d = &self.dies[self.die];
                let buf_mode = match self.spec.buf_bit {
                    Some(b) => d.config & b != 0,
                    None => true,
                };
                let start = if buf_mode { f.addr & 0x0FFF } else { 0 };
                let at = start + f.data;
                f.data += 1;
                if at < raw {
                    d.cache[at as usize]
                } else {
                    0xFF
                }
            }
            PROGRAM_LOAD | PROGRAM_LOAD_RANDOM => {
                if i <= 2 {
                    f.addr = (f.addr << 8) | input as u32;
                    return 0xFF;
                }
                if !driven {
                    return 0xFF;
                }
                let at = (f.addr & 0x0FFF) + f.data;
                f.data += 1;
                if at < raw {
                    let d = &mut self.dies[self.die];
                    d.cache[at as usize] = input;
                    d.loaded = (d.loaded.0.min(at), d.loaded.1.max(at + 1));
                } else {
                    self.violation("program load past the cache end");
                }
                0xFF
            }
            _ => 0xFF,
        }
    }

    fn register(&mut self, addr: u8) -> u8 {
        let busy = self.busy();
        let d = &self.dies[self.die];
        match addr {
            REG_STATUS => {
                let mut s = d.status & !STATUS_OIP;
                if busy {
                    s |= STATUS_OIP;
                }
                s
            }
            REG_PROTECTION => d.protect,
            REG_CONFIG => d.config,
            _ => 0x00,
        }
    }

    /// Chip select rises: commands with an effect on the array or registers run now.
    fn end_frame(&mut self) {
        let Some(f) = self.frame.take() else {
            return;
        };
        self.charge_bus();
        if f.ignored {
            return;
        }
        match f.op {
            RESET => {
                let d = &mut self.dies[self.die];
                d.status = 0;
                d.loaded = (u32::MAX, 0);
                d.busy_until = d.busy_until.max(self.host_ns + 5_000);
            }
            WRITE_ENABLE => self.dies[self.die].status |= STATUS_WEL,
            WRITE_DISABLE => self.dies[self.die].status &= !STATUS_WEL,
            SET_FEATURE | 0x01 => match (f.pos, f.value) {
                (3, Some(v)) => {
                    let d = &mut self.dies[self.die];
                    match f.addr as u8 {
                        REG_PROTECTION => d.protect = v,
                        REG_CONFIG => d.config = v,
                        REG_STATUS => {}
                        _ => self.violation("set feature of an unknown register"),
                    }
                }
                _ => self.violation("set feature with a wrong length"),
            },
            DIE_SELECT => {
                if f.pos != 2 || f.addr as usize >= self.spec.profile.geometry.dies() as usize {
                    self.violation("bad die select");
                } else {
                    self.die = f.addr as usize;
                }
            }
            PAGE_READ | PROGRAM_EXECUTE | BLOCK_ERASE => {
                if f.pos != 4 {
                    self.violation("row address not three bytes");
                    return;
                }
                if f.addr >= self.pages_per_die() {
                    self.violation("row address past the die");
                    return;
                }
                let page = PageAddr(self.die as u32 * self.pages_per_die() + f.addr);
                match f.op {
                    PAGE_READ => self.page_read(page),
                    PROGRAM_EXECUTE => self.program_execute(page),
                    _ => self.block_erase(page),
                }
            }
            READ_CACHE | READ_CACHE_FAST | PROGRAM_LOAD | PROGRAM_LOAD_RANDOM if f.pos < 3 => {
                self.violation("column address not two bytes");
            }
            _ => {}
        }
    }

    // ------------------------------------------------------------------------------
    // Array operations

    fn start_op(&mut self) {
        self.sync_sim();
    }

    fn finish_op(&mut self) {
        let end = self.sim.now_ns();
        self.dies[self.die].busy_until = end;
    }

    fn lost_power(&mut self) {
        self.powered = false;
    }

    fn page_read(&mut self, page: PageAddr) {
        self.start_op();
        let g = self.spec.profile.geometry;
        let ps = g.page_size() as usize;
        let raw = g.raw_page_size() as usize;
        let block = g.block_of(page);
        let ecc_on = self.dies[self.die].config & CFG_ECC != 0;
        let bad = self.sim.block_state(block).flags & BlockState::BAD != 0;
        let d = &mut self.dies[self.die];
        let (data, oob) = d.cache[..raw].split_at_mut(ps);
        let status_ecc;
        if bad || !ecc_on {
            // The simulator refuses I/O to bad blocks and always runs its ECC model:
            // serve raw cells, charging what the part would take.
            let t = self.spec.profile.timing;
            self.sim
                .advance(t.cmd_read_ns as u64 + t.t_read.typ_ns as u64);
            self.sim.peek(page, data, oob);
            status_ecc = 0;
            if !bad {
                let st = self.sim.page_state(page);
                let unit = self.spec.profile.capabilities.program_unit;
                for s in 0..(ps as u32) / unit {
                    let n = st.flips[s as usize];
                    if n > 0 {
                        apply_model_flips(data, page.0, s, n, unit);
                    }
                }
            }
        } else {
            // The cache register gets what the chip's ECC made of each step: corrected
            // where it could, raw where it could not; the status is page-wide.
            match self.sim.load_page_buffer(page, data, oob) {
                Ok(r) => {
                    status_ecc = match r.as_read_report() {
                        Some(rep) => self.spec.status.encode(rep.corrected_bits, false),
                        None => self.spec.status.encode(0, true),
                    }
                }
                Err(e) if e.kind() == ErrorKind::PowerLoss => return self.lost_power(),
                Err(_) => {
                    self.violation("page read the simulator rejected");
                    status_ecc = self.spec.status.encode(0, true);
                }
            }
        }
        let d = &mut self.dies[self.die];
        d.status = (d.status & 0x0F) | status_ecc;
        d.loaded = (u32::MAX, 0);
        self.finish_op();
    }

    fn program_execute(&mut self, page: PageAddr) {
        let g = self.spec.profile.geometry;
        let caps = self.spec.profile.capabilities;
        let ps = g.page_size();
        let d = &mut self.dies[self.die];
        if d.status & STATUS_WEL == 0 {
            self.violation("program execute without write enable");
            return;
        }
        d.status &= !(STATUS_P_FAIL | STATUS_WEL);
        self.start_op();
        let d = &self.dies[self.die];
        let locked = d.protect & self.spec.protect_mask != 0;
        let block = g.block_of(page);
        let (lo, hi) = d.loaded;
        let t = self.spec.profile.timing;
        let bbm = caps.bad_block_marker;
        let pib = g.page_in_block(page);
        let marker_write = bbm.on_page(pib, g.pages_per_block())
            && (bbm.offset..bbm.offset + bbm.len).any(|i| {
                let at = ps + i as u32;
                at >= lo && at < hi && d.cache[at as usize] != 0xFF
            });
        let bad = self.sim.block_state(block).flags & BlockState::BAD != 0;
        let result = if locked {
            self.sim.advance(t.cmd_program_ns as u64);
            Err(())
        } else if marker_write {
            match self.sim.mark_bad(block) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == ErrorKind::PowerLoss => return self.lost_power(),
                Err(_) => Err(()),
            }
        } else if bad {
            self.violation("program into a block marked bad");
            self.sim.advance(t.cmd_program_ns as u64);
            Err(())
        } else if lo >= hi {
            // Nothing loaded: the part programs all-FFh, which changes nothing.
            self.sim
                .advance(t.cmd_program_ns as u64 + t.t_program.typ_ns as u64);
            Ok(())
        } else {
            let pu = caps.program_unit;
            let (col, end) = if lo < ps {
                (lo / pu * pu, hi.min(ps).div_ceil(pu) * pu)
            } else {
                (0, 0)
            };
            let oob_len = hi.saturating_sub(ps);
            let d = &self.dies[self.die];
            let data = &d.cache[col as usize..end as usize];
            let oob = &d.cache[ps as usize..(ps + oob_len) as usize];
            match self.sim.program(page, col, data, oob) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == ErrorKind::ProgramFailed => Err(()),
                Err(e) if e.kind() == ErrorKind::PowerLoss => return self.lost_power(),
                Err(_) => {
                    self.violation("program the simulator rejected (NAND rule broken)");
                    Err(())
                }
            }
        };
        if result.is_err() {
            self.dies[self.die].status |= STATUS_P_FAIL;
        }
        self.finish_op();
    }

    fn block_erase(&mut self, page: PageAddr) {
        let g = self.spec.profile.geometry;
        let d = &mut self.dies[self.die];
        if d.status & STATUS_WEL == 0 {
            self.violation("block erase without write enable");
            return;
        }
        d.status &= !(STATUS_E_FAIL | STATUS_WEL);
        self.start_op();
        let locked = self.dies[self.die].protect & self.spec.protect_mask != 0;
        let block = g.block_of(page);
        let bad = self.sim.block_state(block).flags & BlockState::BAD != 0;
        let t = self.spec.profile.timing;
        let ok = if locked || bad {
            // A bad block is not erased: the simulator keeps its marker (a real part
            // would erase it, which is why upper layers never erase bad blocks).
            self.sim.advance(t.cmd_erase_ns as u64);
            false
        } else {
            match self.sim.erase(block) {
                Ok(()) => true,
                Err(e) if e.kind() == ErrorKind::PowerLoss => return self.lost_power(),
                Err(e) if e.kind() == ErrorKind::EraseFailed => false,
                Err(_) => {
                    self.violation("erase the simulator rejected");
                    false
                }
            }
        };
        if !ok {
            self.dies[self.die].status |= STATUS_E_FAIL;
        }
        self.finish_op();
    }
}

/// Flips `n` distinct bits of step `step` of `data` (a whole page), at positions fixed
/// per (page, step).
fn apply_model_flips(data: &mut [u8], page: u32, step: u32, n: u8, unit: u32) {
    let bits = unit as u64 * 8;
    let mut used = [u64::MAX; 32];
    for i in 0..(n as usize).min(used.len()) {
        let mut h = mix(((page as u64) << 20) ^ ((step as u64) << 8) ^ i as u64);
        let mut bit = h % bits;
        while used[..i].contains(&bit) {
            h = mix(h);
            bit = h % bits;
        }
        used[i] = bit;
        let byte = (step as u64 * unit as u64 + bit / 8) as usize;
        data[byte] ^= 1 << (bit % 8);
    }
}

const fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl<S> SpiErrorType for ChipModel<'_, S> {
    type Error = ModelError;
}

impl<S: SimStorage> SpiDevice for ChipModel<'_, S> {
    fn transaction(&mut self, operations: &mut [Operation<'_, u8>]) -> Result<(), ModelError> {
        self.host_ns += self.clock.take();
        if !self.powered || !self.sim.is_powered() {
            self.powered = false;
            return Err(ModelError::NoPower);
        }
        for op in operations.iter_mut() {
            match op {
                Operation::Read(buf) => {
                    for b in buf.iter_mut() {
                        *b = self.clock_byte(None);
                    }
                }
                Operation::Write(buf) => {
                    for &b in buf.iter() {
                        self.clock_byte(Some(b));
                    }
                }
                Operation::Transfer(read, write) => {
                    let n = read.len().max(write.len());
                    for i in 0..n {
                        let out = self.clock_byte(Some(write.get(i).copied().unwrap_or(0x00)));
                        if let Some(r) = read.get_mut(i) {
                            *r = out;
                        }
                    }
                }
                Operation::TransferInPlace(buf) => {
                    for b in buf.iter_mut() {
                        *b = self.clock_byte(Some(*b));
                    }
                }
                Operation::DelayNs(ns) => {
                    self.charge_bus();
                    self.host_ns += *ns as u64;
                }
            }
        }
        self.end_frame();
        if self.powered {
            // Keep the simulator's clock level with the host while the die is idle.
            if self.host_ns >= self.dies[self.die].busy_until {
                self.sync_sim();
            }
            Ok(())
        } else {
            Err(ModelError::NoPower)
        }
    }
}

/// The async bus: the same transaction, complete at once (the model never waits).
#[cfg(feature = "async")]
impl<S: SimStorage> embedded_hal_async::spi::SpiDevice for ChipModel<'_, S> {
    async fn transaction(
        &mut self,
        operations: &mut [Operation<'_, u8>],
    ) -> Result<(), ModelError> {
        SpiDevice::transaction(self, operations)
    }
}

/// The async delay: advances the clock at once.
#[cfg(feature = "async")]
impl embedded_hal_async::delay::DelayNs for ModelDelay<'_> {
    async fn delay_ns(&mut self, ns: u32) {
        embedded_hal::delay::DelayNs::delay_ns(self, ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_cover_each_range() {
        use StatusEncoding::*;
        assert_eq!(Winbond.encode(1, false), 0x10);
        assert_eq!(Winbond.encode(2, false), 0x20);
        assert_eq!(GigaDeviceXa.encode(7, false), 0x10);
        assert_eq!(GigaDeviceXa.encode(8, false), 0x30);
        assert_eq!(Micron.encode(3, false), 0x10);
        assert_eq!(Micron.encode(4, false), 0x30);
        assert_eq!(Micron.encode(8, false), 0x50);
        assert_eq!(Micron.encode(0, true), 0x20);
        assert_eq!(profile::MT29F1G01.validate(), Ok(()));
    }

    #[test]
    fn model_flips_are_distinct_and_in_step() {
        let mut page = [0xFFu8; 2048];
        apply_model_flips(&mut page, 7, 2, 8, 512);
        let zeros: u32 = page.iter().map(|b| b.count_zeros()).sum();
        assert_eq!(zeros, 8);
        assert!(page[..1024].iter().chain(&page[1536..]).all(|&b| b == 0xFF));
    }
}
