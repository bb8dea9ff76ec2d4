//! The command sequences of every operation, as plain code without I/O, shared by the
//! blocking and the async driver.
//!
//! A [`Seq`] is one operation in progress. [`Seq::next`] says what the bus must do next,
//! one transaction (one chip-select window) or one delay, and the driver does it and
//! asks again until [`Step::Done`]; calling `next` means the last step completed, and a
//! bus error ends the operation (the driver returns it). Everything else is here:
//! argument checks, die selection, opcodes and address bytes, status polling pace and
//! timeout, ECC status and fail bits, the ID probe and configuration.
//!
//! [`Core`] is the driver's memory of the chip between operations: the part found, the
//! die it has selected and the dies that may still be busy. Both are updated so that an
//! operation abandoned at any step (a dropped future, a bus error) leaves them true:
//! the die is forgotten before a die select is sent and learnt once it completed, and a
//! die is marked busy before an array command is sent and cleared once a status read saw
//! it idle. The next operation waits for a busy die before it sends it a command.

use embedded_hal::spi::Operation;

use super::chips::{self, ChipInfo, DieSelect, EccOutcome};
use super::error::SpiNandError;
use super::opcodes::*;
use crate::geometry::{BlockAddr, PageAddr};
use crate::report::{ReadReport, StepReport, StepStatus};

type Res<T, E> = Result<T, SpiNandError<E>>;

/// What the driver knows about the chip between operations.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Core {
    pub(crate) chip: ChipInfo,
    /// The die the part has selected; `None` while a die select may have been cut short.
    die: Option<u32>,
    /// Dies (bit per die) that may be running an array operation nobody saw finish.
    busy: u32,
}

impl Core {
    /// Before the probe: the chip is a placeholder and any die may be busy.
    pub(crate) const fn new() -> Self {
        Core {
            chip: chips::W25N01GV,
            die: None,
            busy: u32::MAX,
        }
    }

    fn multi_die(&self) -> bool {
        self.chip.die_select == DieSelect::WinbondC2
    }

    /// Bits of the dies a command sent now reaches (all while the die is unknown).
    fn selected_bits(&self) -> u32 {
        match self.die {
            Some(d) if self.multi_die() => 1 << d,
            Some(_) => 1,
            None => u32::MAX,
        }
    }
}

/// What a driver does next.
pub(crate) enum Step<'s> {
    /// Runs these operations as one transaction.
    Bus(Ops<'s>),
    /// Waits this many nanoseconds.
    Delay(u32),
    /// The operation finished; its result is on the [`Seq`].
    Done,
}

/// The operations of one transaction (at most three).
pub(crate) struct Ops<'s> {
    ops: [Operation<'s, u8>; 3],
    len: usize,
}

impl<'s> Ops<'s> {
    fn new(header: &'s [u8]) -> Self {
        Ops {
            ops: [
                Operation::Write(header),
                Operation::Write(&[]),
                Operation::Write(&[]),
            ],
            len: 1,
        }
    }

    /// Appends a data phase; empty buffers are left out.
    fn then(mut self, op: Operation<'s, u8>) -> Self {
        let empty = match &op {
            Operation::Read(b) => b.is_empty(),
            Operation::Write(b) => b.is_empty(),
            _ => false,
        };
        if !empty {
            self.ops[self.len] = op;
            self.len += 1;
        }
        self
    }

    pub(crate) fn as_mut(&mut self) -> &mut [Operation<'s, u8>] {
        &mut self.ops[..self.len]
    }
}

/// The caller's buffers.
enum Bufs<'b> {
    None,
    Read(&'b mut [u8], &'b mut [u8]),
    Write(&'b [u8], &'b [u8]),
}

impl Bufs<'_> {
    fn lens(&self) -> (usize, usize) {
        match self {
            Bufs::None => (0, 0),
            Bufs::Read(d, o) => (d.len(), o.len()),
            Bufs::Write(d, o) => (d.len(), o.len()),
        }
    }
}

/// The operation and where it stands.
#[derive(Clone, Copy)]
enum Job<'b> {
    Probe(&'b [ChipInfo]),
    Configure,
    Read {
        page: PageAddr,
        column: u32,
        steps: bool,
    },
    Program {
        page: PageAddr,
        column: u32,
    },
    Erase(BlockAddr),
    IsBad(BlockAddr),
    MarkBad(BlockAddr),
    /// `mark_bad` after its erase: programs the markers.
    MarkPages(BlockAddr),
}

/// One transaction's shape; the bytes are the [`Seq`]'s header and buffers.
#[derive(Clone, Copy)]
enum Tx {
    /// `hdr[..n]` alone.
    Cmd(u8),
    /// `hdr[..2]`, then one register byte into `reg`.
    GetReg,
    /// `hdr[..h]`, then `n` bytes into `scratch`.
    ReadScratch { h: u8, n: u8 },
    /// `hdr[..4]` (read from cache), then into the data and/or spare buffer.
    ReadCache { data: bool, oob: bool },
    /// `hdr[..3]` (program load), then from the data and/or spare buffer.
    Load { data: bool, oob: bool },
}

/// A step that needs the driver.
#[derive(Clone, Copy)]
enum Out {
    Bus(Tx),
    Delay(u32),
}

/// Where status polling stands.
enum Polled {
    /// The part is idle; its status.
    Idle(u8),
    /// Not yet: do this and poll again.
    Next(Out),
}

/// Status polling pace and bound.
#[derive(Clone, Copy)]
struct Pace {
    poll_ns: u32,
    timeout_ns: u64,
}

/// A unit of work of a sequence; most are one transaction, `Goto` and `Wait` several.
#[derive(Clone, Copy)]
enum Micro {
    /// Ask the job's plan for the next unit.
    Plan,
    /// One transaction; `array`: it starts an array operation (the die becomes busy).
    Send { tx: Tx, array: bool },
    /// Poll the status until the part is idle (the status lands in `status`).
    Wait(Pace),
    /// Select `die`: first wait for the die left selected if it may be busy, afterwards
    /// for `die` itself. `force`: select even if selected, and wait for nothing.
    Goto { die: u32, force: bool },
    /// Finished.
    Done,
}

/// Array operations, for polling pace and timeout.
#[derive(Clone, Copy)]
enum Array {
    Read,
    Program,
    Erase,
    Reset,
}

/// A transaction that starts no array operation.
const fn send(tx: Tx) -> Micro {
    Micro::Send { tx, array: false }
}

/// One operation in progress (see the module docs).
pub(crate) struct Seq<'b> {
    job: Job<'b>,
    bufs: Bufs<'b>,
    /// Where the job's plan stands.
    pc: u8,
    cur: Micro,
    /// Where the current unit stands.
    sub: u8,
    /// A status read is out (polling).
    polling: bool,
    waited: u64,
    hdr: [u8; 4],
    reg: [u8; 1],
    scratch: [u8; 5],
    /// Status after the last wait.
    status: u8,
    /// Column of the spare bytes within the spare area (the marker's, for `mark_bad`).
    oob_col: u32,
    /// Marker page index (`is_bad`, `mark_bad`); die index (configuration).
    k: u8,
    /// `mark_bad`'s block while it programs the markers.
    marking: Option<BlockAddr>,
    /// Configuration value written, to check it back.
    want: u8,
    corrected: u8,
    page_wide: bool,
    bad: bool,
    /// `is_bad` found a marker page whose marker bytes are all `0x00`.
    marked: bool,
    threshold: u8,
    steps: u32,
    /// The job (and its `k`) a reconfiguration interrupted, to run again after it
    /// (`None`: the operation fails with [`SpiNandError::PowerLost`] once configured).
    resume: Option<(Job<'b>, u8)>,
    /// This operation configured the part again already (once at most).
    reconfigured: bool,
}

/// The marker bytes `mark_bad` programs.
static MARKER: [u8; 4] = [0x00; 4];

impl<'b> Seq<'b> {
    fn with(job: Job<'b>, bufs: Bufs<'b>) -> Self {
        Seq {
            job,
            bufs,
            pc: 0,
            cur: Micro::Plan,
            sub: 0,
            polling: false,
            waited: 0,
            hdr: [0; 4],
            reg: [0],
            scratch: [0; 5],
            status: 0,
            oob_col: 0,
            k: 0,
            marking: None,
            want: 0,
            corrected: 0,
            page_wide: false,
            bad: false,
            marked: false,
            threshold: 0,
            steps: 0,
            resume: None,
            reconfigured: false,
        }
    }

    /// Reset, READ ID, table lookup, then [`Seq::configure`].
    pub(crate) fn probe(table: &'b [ChipInfo]) -> Self {
        Self::with(Job::Probe(table), Bufs::None)
    }

    /// Per die: reset, block protection off, configuration bits (each read back).
    pub(crate) fn configure() -> Self {
        Self::with(Job::Configure, Bufs::None)
    }

    /// `read` (`steps`: `read_steps`, which needs a whole page at column 0).
    pub(crate) fn read(
        page: PageAddr,
        column: u32,
        data: &'b mut [u8],
        oob: &'b mut [u8],
        steps: bool,
    ) -> Self {
        let job = Job::Read {
            page,
            column,
            steps,
        };
        Self::with(job, Bufs::Read(data, oob))
    }

    pub(crate) fn program(page: PageAddr, column: u32, data: &'b [u8], oob: &'b [u8]) -> Self {
        Self::with(Job::Program { page, column }, Bufs::Write(data, oob))
    }

    pub(crate) fn erase(block: BlockAddr) -> Self {
        Self::with(Job::Erase(block), Bufs::None)
    }

    pub(crate) fn is_bad(block: BlockAddr) -> Self {
        Self::with(Job::IsBad(block), Bufs::None)
    }

    pub(crate) fn mark_bad(block: BlockAddr) -> Self {
        Self::with(Job::MarkBad(block), Bufs::None)
    }

    /// The report of a finished `read`.
    pub(crate) fn read_report(&self) -> ReadReport {
        ReadReport {
            corrected_bits: self.corrected,
            threshold: self.threshold,
        }
    }

    /// The report of a finished `read_steps`: the status register speaks for the whole
    /// page.
    pub(crate) fn step_report(&self) -> StepReport {
        let all = if self.page_wide {
            StepStatus::Unknown
        } else {
            StepStatus::Good(self.corrected)
        };
        StepReport::uniform(self.steps, all, self.threshold)
    }

    /// The answer of a finished `is_bad`.
    pub(crate) fn bad(&self) -> bool {
        self.bad
    }

    /// Whether the marker a finished `is_bad` found reads as written (every byte
    /// `0x00`; see [`crate::NandFlash::is_marked`]).
    pub(crate) fn marked(&self) -> bool {
        self.marked
    }

    /// The next step; see the module docs.
    pub(crate) fn next<E>(&mut self, core: &mut Core) -> Res<Step<'_>, E> {
        Ok(match self.advance(core)? {
            Some(Out::Bus(tx)) => Step::Bus(self.ops(tx)),
            Some(Out::Delay(ns)) => Step::Delay(ns),
            None => Step::Done,
        })
    }

    fn ops(&mut self, tx: Tx) -> Ops<'_> {
        let hdr = &self.hdr;
        match tx {
            Tx::Cmd(n) => Ops::new(&hdr[..n as usize]),
            Tx::GetReg => Ops::new(&hdr[..2]).then(Operation::Read(&mut self.reg)),
            Tx::ReadScratch { h, n } => {
                Ops::new(&hdr[..h as usize]).then(Operation::Read(&mut self.scratch[..n as usize]))
            }
            Tx::ReadCache { data, oob } => {
                let ops = Ops::new(&hdr[..4]);
                match &mut self.bufs {
                    Bufs::Read(d, o) => ops
                        .then(Operation::Read(if data { d } else { &mut [] }))
                        .then(Operation::Read(if oob { o } else { &mut [] })),
                    _ => ops,
                }
            }
            Tx::Load { data, oob } => {
                let ops = Ops::new(&hdr[..3]);
                match self.bufs {
                    Bufs::Write(d, o) => ops
                        .then(Operation::Write(if data { d } else { &[] }))
                        .then(Operation::Write(if oob { o } else { &[] })),
                    _ => ops,
                }
            }
        }
    }

    /// Runs units until one needs the driver; `None` when the job is done.
    fn advance<E>(&mut self, core: &mut Core) -> Res<Option<Out>, E> {
        loop {
            match self.cur {
                Micro::Plan => {
                    self.cur = self.plan(core)?;
                    self.sub = 0;
                }
                Micro::Done => return Ok(None),
                Micro::Send { tx, array } => {
                    if self.sub == 1 {
                        self.cur = Micro::Plan;
                        continue;
                    }
                    if array {
                        core.busy |= core.selected_bits();
                    }
                    self.sub = 1;
                    return Ok(Some(Out::Bus(tx)));
                }
                Micro::Wait(pace) => match self.poll(pace)? {
                    Polled::Idle(status) => {
                        core.busy &= !core.selected_bits();
                        self.status = status;
                        self.cur = Micro::Plan;
                    }
                    Polled::Next(out) => return Ok(Some(out)),
                },
                Micro::Goto { die, force } => {
                    if let Some(out) = self.goto(core, die, force)? {
                        return Ok(Some(out));
                    }
                    self.cur = Micro::Plan;
                }
            }
        }
    }

    /// One round of status polling: the status once the part is idle, or the next step.
    fn poll<E>(&mut self, pace: Pace) -> Res<Polled, E> {
        if !self.polling {
            self.polling = true;
            self.hdr[..2].copy_from_slice(&[GET_FEATURE, REG_STATUS]);
            return Ok(Polled::Next(Out::Bus(Tx::GetReg)));
        }
        self.polling = false;
        let status = self.reg[0];
        if status & STATUS_OIP == 0 {
            self.waited = 0;
            return Ok(Polled::Idle(status));
        }
        if self.waited >= pace.timeout_ns {
            self.waited = 0;
            return Err(SpiNandError::Timeout);
        }
        self.waited += pace.poll_ns as u64;
        Ok(Polled::Next(Out::Delay(pace.poll_ns)))
    }

    /// The `Goto` unit; `None` once `die` is selected and idle.
    fn goto<E>(&mut self, core: &mut Core, die: u32, force: bool) -> Res<Option<Out>, E> {
        // Waits for an operation the driver did not see finish: paced for an erase,
        // bounded by the longest any part takes.
        const RECOVER: Pace = Pace {
            poll_ns: 100_000,
            timeout_ns: 25_000_000,
        };
        // `sub`: 0 decide, 1 wait for the die left selected, 2 select, 3 select sent,
        // 4 wait for the target.
        loop {
            match self.sub {
                0 if force && !core.multi_die() => return Ok(None),
                0 if force => self.sub = 2,
                0 => {
                    self.sub = if !core.multi_die() || core.die == Some(die) {
                        4
                    } else if core.busy & core.selected_bits() != 0 {
                        1
                    } else {
                        2
                    };
                }
                1 => match self.poll(RECOVER)? {
                    Polled::Idle(_) => {
                        // Whichever die that was (it may be unknown), it is idle now.
                        if core.die.is_some() {
                            core.busy &= !core.selected_bits();
                        }
                        self.sub = 2;
                    }
                    Polled::Next(out) => return Ok(Some(out)),
                },
                2 => {
                    core.die = None;
                    self.hdr[..2].copy_from_slice(&[DIE_SELECT, die as u8]);
                    self.sub = 3;
                    return Ok(Some(Out::Bus(Tx::Cmd(2))));
                }
                3 => {
                    core.die = Some(die);
                    if force {
                        return Ok(None);
                    }
                    self.sub = 4;
                }
                _ => {
                    if core.busy & core.selected_bits() == 0 {
                        return Ok(None);
                    }
                    match self.poll(RECOVER)? {
                        Polled::Idle(_) => core.busy &= !core.selected_bits(),
                        Polled::Next(out) => return Ok(Some(out)),
                    }
                }
            }
        }
    }

    /// Sets `hdr` to an opcode and a three-byte row address.
    fn row_cmd(&mut self, core: &Core, op: u8, page: PageAddr) -> Micro {
        let g = core.chip.geometry;
        let die = g.die_of(g.block_of(page)).index as u32;
        let row = page.0 - die * g.blocks_per_die() * g.pages_per_block();
        let [a, b, c] = row_bytes(row);
        self.hdr = [op, a, b, c];
        Micro::Send {
            tx: Tx::Cmd(4),
            array: true,
        }
    }

    /// Sets `hdr` to an opcode and a two-byte column (plus the dummy byte reads need).
    fn col_hdr(&mut self, op: u8, column: u32) {
        self.hdr = [op, (column >> 8) as u8, column as u8, 0x00];
    }

    fn cmd(&mut self, bytes: &[u8]) -> Micro {
        self.hdr[..bytes.len()].copy_from_slice(bytes);
        Micro::Send {
            tx: Tx::Cmd(bytes.len() as u8),
            array: false,
        }
    }

    fn get(&mut self, reg: u8) -> Micro {
        self.hdr[..2].copy_from_slice(&[GET_FEATURE, reg]);
        send(Tx::GetReg)
    }

    fn goto_page(core: &Core, page: PageAddr) -> Micro {
        let g = core.chip.geometry;
        Micro::Goto {
            die: g.die_of(g.block_of(page)).index as u32,
            force: false,
        }
    }

    fn wait(core: &Core, op: Array) -> Micro {
        let t = core.chip.timing;
        let time = match op {
            Array::Read => t.array.read,
            Array::Program => t.array.program,
            Array::Erase => t.array.erase,
            Array::Reset => t.reset,
        };
        Micro::Wait(Pace {
            poll_ns: (time.typ_ns / 16).clamp(1_000, 1_000_000),
            timeout_ns: 2 * time.max_ns as u64,
        })
    }

    /// The marker page `k` of the block's marker pages (0, 1, last) if the part has
    /// markers there.
    fn marker_page(core: &Core, block: BlockAddr, k: u8) -> Option<PageAddr> {
        let g = core.chip.geometry;
        let bbm = core.chip.capabilities.bad_block_marker;
        let ppb = g.pages_per_block();
        let i = [0, 1, ppb - 1][k as usize];
        (bbm.on_page(i, ppb) && !(i == ppb - 1 && i <= 1)).then(|| g.page(block, i))
    }

    fn check_page<E>(&self, core: &Core, page: PageAddr, column: u32) -> Res<(), E> {
        let g = core.chip.geometry;
        let (len, oob) = self.bufs.lens();
        if !g.contains_page(page)
            || column as u64 + len as u64 > g.page_size() as u64
            || oob > g.oob_size() as usize
        {
            return Err(SpiNandError::OutOfBounds);
        }
        Ok(())
    }

    fn check_block<E>(core: &Core, block: BlockAddr) -> Res<(), E> {
        match core.chip.geometry.contains_block(block) {
            true => Ok(()),
            false => Err(SpiNandError::OutOfBounds),
        }
    }

    /// The job's next unit: the command sequences (see the `spi` module docs).
    fn plan<E>(&mut self, core: &mut Core) -> Res<Micro, E> {
        let pc = self.pc;
        self.pc += 1;
        let chip = core.chip;
        let ps = chip.geometry.page_size();
        Ok(match (self.job, pc) {
            // Reset before anything else (tRST) so a part left mid-operation by a
            // watchdog reset starts from a known state. The table is not known yet, so
            // wait the worst case any part needs.
            (Job::Probe(_), 0) => self.cmd(&[RESET]),
            (Job::Probe(_), 1) => Micro::Wait(Pace {
                poll_ns: 5_000,
                timeout_ns: 1_000_000,
            }),
            (Job::Probe(_), 2) => {
                self.hdr[0] = READ_ID;
                send(Tx::ReadScratch { h: 1, n: 5 })
            }
            (Job::Probe(table), _) => {
                // scratch[0] was clocked during the address/dummy byte.
                let id = [
                    self.scratch[1],
                    self.scratch[2],
                    self.scratch[3],
                    self.scratch[4],
                ];
                let Some(found) = chips::lookup(table, &id) else {
                    return Err(SpiNandError::UnknownChip(id));
                };
                // A custom table's entry is checked as the built-in ones are at compile
                // time: a bad-block marker longer than its buffers panicked later (an
                // independent review, stop 40).
                if found.capabilities.validate(&found.geometry).is_err() {
                    return Err(SpiNandError::BadChipInfo(id));
                }
                core.chip = *found;
                core.die = if core.multi_die() { None } else { Some(0) };
                self.job = Job::Configure;
                self.pc = 0;
                Micro::Plan
            }

            (Job::Configure, 0) => Micro::Goto {
                die: self.k as u32,
                force: true,
            },
            // An array command for the busy tracking: a reset cut short (a bus error on
            // its status poll) leaves the die busy for the next operation to wait on
            // (an independent review, stop 40: the next command was ignored).
            (Job::Configure, 1) => {
                self.hdr[0] = RESET;
                Micro::Send {
                    tx: Tx::Cmd(1),
                    array: true,
                }
            }
            (Job::Configure, 2) => Self::wait(core, Array::Reset),
            // The configuration bits first and the block protection last: protection
            // off then says the die was configured whole, which is what the checks
            // after each operation read (`Seq::config_lost`): a configuration cut short
            // between the two registers (a bus error) leaves the die protected.
            (Job::Configure, 3) => self.get(REG_CONFIG),
            (Job::Configure, 4) => {
                self.want = (self.reg[0] | chip.config.set) & !chip.config.clear;
                let want = self.want;
                self.cmd(&[SET_FEATURE, REG_CONFIG, want])
            }
            (Job::Configure, 5) => self.get(REG_CONFIG),
            (Job::Configure, 6) => {
                self.check_config(REG_CONFIG, self.want, chip.config.set | chip.config.clear)?;
                self.cmd(&[SET_FEATURE, REG_PROTECTION, 0x00])
            }
            (Job::Configure, 7) => self.get(REG_PROTECTION),
            (Job::Configure, 8) => {
                self.check_config(REG_PROTECTION, 0x00, chip.protect_mask)?;
                self.k += 1;
                if (self.k as u32) < chip.geometry.dies() {
                    self.pc = 0;
                    Micro::Plan
                } else {
                    Micro::Goto {
                        die: 0,
                        force: false,
                    }
                }
            }
            (Job::Configure, _) if !self.reconfigured => Micro::Done,
            // Configured again after the part was found at its power-on configuration
            // (see `Seq::lost_power`): the interrupted operation runs once more, or
            // fails when its effect is unknown.
            (Job::Configure, _) => match self.resume.take() {
                Some((job, k)) => {
                    self.job = job;
                    self.k = k;
                    self.pc = 0;
                    Micro::Plan
                }
                None => return Err(SpiNandError::PowerLost),
            },

            (
                Job::Read {
                    page,
                    column,
                    steps,
                },
                0,
            ) => {
                if steps && self.bufs.lens().0 != ps as usize {
                    return Err(SpiNandError::OutOfBounds);
                }
                self.check_page(core, page, column)?;
                Self::goto_page(core, page)
            }
            (Job::Read { page, .. }, 1) => self.row_cmd(core, PAGE_READ, page),
            (Job::Read { .. }, 2) => Self::wait(core, Array::Read),
            (Job::Read { column, steps, .. }, 3) => {
                self.threshold = chip.capabilities.ecc.scrub_threshold;
                self.steps = chip.capabilities.steps_per_page(&chip.geometry);
                // On an uncorrectable status the cache still holds every step the chip
                // could correct: `read_steps` delivers it, `read` does not.
                match chip.ecc_status.decode(self.status) {
                    EccOutcome::Clean => {}
                    EccOutcome::Corrected(n) => self.corrected = n,
                    // A reserved code says nothing of the steps: each is judged as
                    // after an uncorrectable status (an independent review, stop 40:
                    // `read_steps` failed where its contract reports steps).
                    EccOutcome::Uncorrectable | EccOutcome::Reserved(_) if steps => {
                        self.page_wide = true
                    }
                    EccOutcome::Uncorrectable => return Err(SpiNandError::Uncorrectable),
                    EccOutcome::Reserved(_) => {
                        return Err(SpiNandError::BadEccStatus(self.status));
                    }
                }
                let (len, _) = self.bufs.lens();
                // Data and spare in one burst when the range ends at the page end.
                let whole = len > 0 && column + len as u32 == ps;
                self.pc = if whole { 5 } else { 4 };
                if len == 0 {
                    return Ok(Micro::Plan);
                }
                self.col_hdr(READ_CACHE, column);
                send(Tx::ReadCache {
                    data: true,
                    oob: whole,
                })
            }
            (Job::Read { .. }, 4) if self.bufs.lens().1 > 0 => {
                self.col_hdr(READ_CACHE, ps);
                send(Tx::ReadCache {
                    data: false,
                    oob: true,
                })
            }
            (Job::Read { .. }, 4) => Micro::Plan,
            // The part lost power on its own (a brown-out the MCU survived) at any
            // point up to here shows at its power-on configuration, block protection on:
            // a Winbond part in continuous-read mode ignores the column and returns
            // column 0's bytes, and any part's cache comes back empty (an independent
            // review, stop 40). One register read after the last transfer finds it; the
            // read runs again once the part is configured.
            (Job::Read { .. }, 5) => self.get(REG_PROTECTION),
            (Job::Read { .. }, _) => {
                if self.config_lost(&chip) {
                    return self.lost_power(true);
                }
                Micro::Done
            }

            (Job::Program { page, column }, 0) => {
                self.check_page(core, page, column)?;
                let pu = chip.capabilities.program_unit;
                let (len, oob) = self.bufs.lens();
                if column % pu != 0 || len as u32 % pu != 0 || (len == 0 && oob == 0) {
                    return Err(SpiNandError::Misuse);
                }
                Self::goto_page(core, page)
            }
            (Job::Program { .. }, 1) => self.cmd(&[WRITE_ENABLE]),
            (Job::Program { column, .. }, 2) => {
                // The first load (02h) clears the rest of the cache to FFh; a spare area
                // that does not follow the data directly goes in with a random load (84h).
                let (len, oob) = self.bufs.lens();
                let contiguous = column + len as u32 == ps;
                if len > 0 && (contiguous || oob == 0) {
                    self.pc = 4;
                }
                if len == 0 {
                    return Ok(Micro::Plan);
                }
                self.col_hdr(PROGRAM_LOAD, column);
                send(Tx::Load {
                    data: true,
                    oob: contiguous,
                })
            }
            (Job::Program { .. }, 3) => {
                let op = match self.bufs.lens().0 {
                    0 => PROGRAM_LOAD,
                    _ => PROGRAM_LOAD_RANDOM,
                };
                self.col_hdr(op, ps + self.oob_col);
                send(Tx::Load {
                    data: false,
                    oob: true,
                })
            }
            (Job::Program { page, .. }, 4) => self.row_cmd(core, PROGRAM_EXECUTE, page),
            (Job::Program { .. }, 5) => Self::wait(core, Array::Program),
            // Block protection back on: the part lost power on its own (a brown-out
            // the MCU survived). With a fail bit the program was refused (the page is
            // untouched) and runs again once the part is configured; without one it
            // may have been cut short (or its write enable was lost): `PowerLost`.
            // Failing it as the block's would retire a good block, and a clear fail bit
            // alone read as success (an independent review, stop 40).
            (Job::Program { .. }, 6) => self.get(REG_PROTECTION),
            (Job::Program { .. }, _) => {
                if self.config_lost(&chip) {
                    return self.lost_power(self.status & STATUS_P_FAIL != 0);
                }
                if self.status & STATUS_P_FAIL != 0 {
                    return Err(SpiNandError::ProgramFailed);
                }
                match self.marking {
                    Some(block) => {
                        self.job = Job::MarkPages(block);
                        self.next_marker(core)?
                    }
                    None => Micro::Done,
                }
            }

            (Job::Erase(block) | Job::MarkBad(block), 0) => {
                Self::check_block(core, block)?;
                Self::goto_page(core, chip.geometry.page(block, 0))
            }
            (Job::Erase(_) | Job::MarkBad(_), 1) => self.cmd(&[WRITE_ENABLE]),
            (Job::Erase(block) | Job::MarkBad(block), 2) => {
                self.row_cmd(core, BLOCK_ERASE, chip.geometry.page(block, 0))
            }
            (Job::Erase(_) | Job::MarkBad(_), 3) => Self::wait(core, Array::Erase),
            // As for a program (above); an erase runs again whatever it did.
            (Job::Erase(_), 4) => self.get(REG_PROTECTION),
            (Job::Erase(_), _) => {
                if self.config_lost(&chip) {
                    return self.lost_power(true);
                }
                if self.status & STATUS_E_FAIL != 0 {
                    return Err(SpiNandError::EraseFailed);
                }
                Micro::Done
            }
            // As Linux does: erase first (a failure is ignored, the block is going
            // anyway) so the marker program is not refused for NOP or lands on
            // programmed cells; then a spare-only program of 00h over the marker bytes
            // of each marker page.
            (Job::MarkBad(block), _) => {
                let bbm = chip.capabilities.bad_block_marker;
                self.bufs = Bufs::Write(&[], &MARKER[..bbm.len as usize]);
                self.oob_col = bbm.offset as u32;
                self.marking = Some(block);
                self.job = Job::MarkPages(block);
                self.next_marker(core)?
            }
            (Job::MarkPages(_), _) => Micro::Done,

            (Job::IsBad(block), 0) => {
                Self::check_block(core, block)?;
                self.k = 0;
                Micro::Plan
            }
            (Job::IsBad(block), 1) => match self.skip_to_marker(core, block) {
                Some(page) => Self::goto_page(core, page),
                None => Micro::Done,
            },
            (Job::IsBad(block), 2) => {
                let page = Self::marker_page(core, block, self.k).unwrap_or(PageAddr(0));
                self.row_cmd(core, PAGE_READ, page)
            }
            (Job::IsBad(_), 3) => Self::wait(core, Array::Read),
            (Job::IsBad(_), 4) => {
                // The marker bytes are outside every ECC step, so the ECC verdict on the
                // page does not matter: the cache holds the cells either way.
                let bbm = chip.capabilities.bad_block_marker;
                self.col_hdr(READ_CACHE, ps + bbm.offset as u32);
                send(Tx::ReadScratch {
                    h: 4,
                    n: bbm.len as u8,
                })
            }
            // The marker's column means nothing to a part that lost its configuration
            // (see `Job::Read`): a good block read as bad would be retired.
            (Job::IsBad(_), 5) => self.get(REG_PROTECTION),
            (Job::IsBad(_), _) => {
                if self.config_lost(&chip) {
                    return self.lost_power(true);
                }
                let n = chip.capabilities.bad_block_marker.len as usize;
                self.bad = self.scratch[..n].iter().any(|&b| b != 0xFF);
                self.marked = self.scratch[..n].iter().all(|&b| b == 0x00);
                self.k += 1;
                self.pc = 1;
                if self.bad {
                    Micro::Done
                } else {
                    Micro::Plan
                }
            }
        })
    }

    /// Moves `k` to the next marker page at or after it.
    fn skip_to_marker(&mut self, core: &Core, block: BlockAddr) -> Option<PageAddr> {
        while self.k < 3 {
            if let Some(page) = Self::marker_page(core, block, self.k) {
                return Some(page);
            }
            self.k += 1;
        }
        None
    }

    /// `mark_bad`: the spare-only program of the next marker page, or done.
    fn next_marker<E>(&mut self, core: &Core) -> Res<Micro, E> {
        let Job::MarkPages(block) = self.job else {
            return Ok(Micro::Done);
        };
        let Some(page) = self.skip_to_marker(core, block) else {
            return Ok(Micro::Done);
        };
        self.k += 1;
        self.job = Job::Program { page, column: 0 };
        self.pc = 1;
        Ok(Self::goto_page(core, page))
    }

    /// Whether the protection register just read (`reg`) shows block protection on
    /// again: the part is at its power-on configuration (every part in the table powers
    /// on protected; the configuration register of some powers on as the driver sets
    /// it, so it would not tell).
    fn config_lost(&self, chip: &ChipInfo) -> bool {
        self.reg[0] & chip.protect_mask != 0
    }

    /// The part was found at its power-on configuration (it lost power on its own, the
    /// MCU running on): every die is configured again, then the operation runs once
    /// more from its start when `again` (it did nothing, or may be repeated), else it
    /// fails with [`SpiNandError::PowerLost`]. A second loss within one operation fails
    /// it as well.
    fn lost_power<E>(&mut self, again: bool) -> Res<Micro, E> {
        if self.reconfigured {
            return Err(SpiNandError::PowerLost);
        }
        self.resume = again.then_some((self.job, self.k));
        self.reconfigured = true;
        self.job = Job::Configure;
        self.k = 0;
        self.pc = 0;
        Ok(Micro::Plan)
    }

    fn check_config<E>(&self, register: u8, wrote: u8, mask: u8) -> Res<(), E> {
        let read = self.reg[0];
        if (read ^ wrote) & mask != 0 {
            return Err(SpiNandError::ConfigRejected {
                register,
                wrote,
                read,
            });
        }
        Ok(())
    }
}
