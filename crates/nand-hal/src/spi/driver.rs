//! The driver: [`NandFlash`] over an `embedded-hal` [`SpiDevice`].

use embedded_hal::delay::DelayNs;
use embedded_hal::spi::{Operation, SpiDevice};

use super::chips::{self, ChipInfo, DieSelect, EccOutcome, CHIPS};
use super::error::SpiNandError;
use super::opcodes::*;
use crate::blocking::{NandFlash, ReadReport, StepReport, StepStatus};
use crate::capabilities::Capabilities;
use crate::error::ErrorType;
use crate::geometry::{BlockAddr, Geometry, PageAddr};

/// Which array operation a busy wait is for (selects poll pace and timeout).
#[derive(Clone, Copy)]
enum Op {
    Read,
    Program,
    Erase,
    Reset,
}

/// A generic SPI NAND driver.
///
/// Owns the bus (an [`SpiDevice`], so chip select and bus sharing are the HAL's
/// business) and a delay used between status polls. Built with [`SpiNand::new`] (the
/// built-in table) or [`SpiNand::with_table`].
///
/// See the [module documentation](super) for the command sequences, timing and
/// power-loss behaviour.
#[derive(Debug)]
pub struct SpiNand<SPI, D> {
    spi: SPI,
    delay: D,
    chip: ChipInfo,
    /// Die currently selected on multi-die parts.
    die: u32,
}

type Res<T, E> = Result<T, SpiNandError<E>>;

impl<SPI: SpiDevice, D: DelayNs> SpiNand<SPI, D> {
    /// Resets the part, identifies it against the built-in table and configures it
    /// (block protection off, ECC on, Winbond buffer mode).
    pub fn new(spi: SPI, delay: D) -> Res<Self, SPI::Error> {
        Self::with_table(spi, delay, CHIPS)
    }

    /// As [`SpiNand::new`] with a caller-provided chip table.
    pub fn with_table(spi: SPI, delay: D, table: &[ChipInfo]) -> Res<Self, SPI::Error> {
        let mut raw = [0u8; 5];
        let mut this = SpiNand {
            spi,
            delay,
            chip: chips::W25N01GV,
            die: 0,
        };
        // Reset before anything else (tRST) so a part left mid-operation by a
        // watchdog reset starts from a known state. The table is not known yet, so wait
        // the worst case any part needs.
        this.spi.write(&[RESET]).map_err(SpiNandError::Spi)?;
        this.wait_ready_raw(5_000, 1_000_000)?;
        this.spi
            .transaction(&mut [Operation::Write(&[READ_ID]), Operation::Read(&mut raw)])
            .map_err(SpiNandError::Spi)?;
        // raw[0] was clocked during the address/dummy byte.
        let id = [raw[1], raw[2], raw[3], raw[4]];
        let Some(chip) = chips::lookup(table, &id) else {
            return Err(SpiNandError::UnknownChip(id));
        };
        this.chip = *chip;
        this.init_dies()?;
        Ok(this)
    }

    /// Brings every die to the configuration the driver relies on. Call it again after
    /// the part lost power (the protection bits come back set).
    pub fn reinit(&mut self) -> Res<(), SPI::Error> {
        self.init_dies()
    }

    fn init_dies(&mut self) -> Res<(), SPI::Error> {
        for d in 0..self.chip.geometry.dies() {
            self.select_die(d, true)?;
            self.cmd(&[RESET])?;
            self.wait_ready(Op::Reset)?;
            self.set_feature_checked(REG_PROTECTION, 0x00, self.chip.protect_mask)?;
            let cfg = self.get_feature(REG_CONFIG)?;
            let want = (cfg | self.chip.config.set) & !self.chip.config.clear;
            let mask = self.chip.config.set | self.chip.config.clear;
            self.set_feature_checked(REG_CONFIG, want, mask)?;
        }
        self.select_die(0, false)
    }

    /// The table entry of the part found.
    pub fn chip(&self) -> &ChipInfo {
        &self.chip
    }

    /// The bus, e.g. to reach a chip model's controls in tests. Commands sent directly
    /// may leave the part in a state the driver does not expect.
    pub fn bus_mut(&mut self) -> &mut SPI {
        &mut self.spi
    }

    /// The bus.
    pub fn bus(&self) -> &SPI {
        &self.spi
    }

    /// Gives the bus and delay back.
    pub fn release(self) -> (SPI, D) {
        (self.spi, self.delay)
    }

    // ------------------------------------------------------------------------------
    // Command primitives

    fn cmd(&mut self, bytes: &[u8]) -> Res<(), SPI::Error> {
        self.spi.write(bytes).map_err(SpiNandError::Spi)
    }

    fn get_feature(&mut self, reg: u8) -> Res<u8, SPI::Error> {
        let mut v = [0u8; 1];
        self.spi
            .transaction(&mut [
                Operation::Write(&[GET_FEATURE, reg]),
                Operation::Read(&mut v),
            ])
            .map_err(SpiNandError::Spi)?;
        Ok(v[0])
    }

    fn set_feature_checked(&mut self, reg: u8, value: u8, mask: u8) -> Res<(), SPI::Error> {
        self.cmd(&[SET_FEATURE, reg, value])?;
        let read = self.get_feature(reg)?;
        if (read ^ value) & mask != 0 {
            return Err(SpiNandError::ConfigRejected {
                register: reg,
                wrote: value,
                read,
            });
        }
        Ok(())
    }

    fn select_die(&mut self, die: u32, force: bool) -> Res<(), SPI::Error> {
        if self.chip.die_select == DieSelect::WinbondC2 && (force || die != self.die) {
            self.cmd(&[DIE_SELECT, die as u8])?;
        }
        self.die = die;
        Ok(())
    }

    /// Selects the die of `block` and returns the die-local row of `page`.
    fn locate(&mut self, page: PageAddr) -> Res<u32, SPI::Error> {
        let g = self.chip.geometry;
        let die = g.die_of(g.block_of(page)).index as u32;
        self.select_die(die, false)?;
        Ok(page.0 - die * g.blocks_per_die() * g.pages_per_block())
    }

    /// Polls the status register until OIP clears; returns the last status value.
    fn wait_ready(&mut self, op: Op) -> Res<u8, SPI::Error> {
        let t = self.chip.timing;
        let time = match op {
            Op::Read => t.array.read,
            Op::Program => t.array.program,
            Op::Erase => t.array.erase,
            Op::Reset => t.reset,
        };
        let poll_ns = (time.typ_ns as u64 / 16).clamp(1_000, 1_000_000);
        self.wait_ready_raw(poll_ns, 2 * time.max_ns as u64)
    }

    fn wait_ready_raw(&mut self, poll_ns: u64, timeout_ns: u64) -> Res<u8, SPI::Error> {
        let mut waited = 0u64;
        loop {
            let status = self.get_feature(REG_STATUS)?;
            if status & STATUS_OIP == 0 {
                return Ok(status);
            }
            if waited >= timeout_ns {
                return Err(SpiNandError::Timeout);
            }
            self.delay.delay_ns(poll_ns as u32);
            waited += poll_ns;
        }
    }

    /// Page read to cache; returns the final status (ECC bits valid).
    fn load_page(&mut self, page: PageAddr) -> Res<u8, SPI::Error> {
        let row = self.locate(page)?;
        let [a, b, c] = row_bytes(row);
        self.cmd(&[PAGE_READ, a, b, c])?;
        self.wait_ready(Op::Read)
    }

    /// Reads `buf` from the cache register at `column`.
    fn read_cache(
        &mut self,
        column: u32,
        first: &mut [u8],
        second: &mut [u8],
    ) -> Res<(), SPI::Error> {
        let hdr = [READ_CACHE, (column >> 8) as u8, column as u8, 0x00];
        self.spi
            .transaction(&mut [
                Operation::Write(&hdr),
                Operation::Read(first),
                Operation::Read(second),
            ])
            .map_err(SpiNandError::Spi)
    }

    fn check_page(
        &self,
        page: PageAddr,
        column: u32,
        len: usize,
        oob: usize,
    ) -> Res<(), SPI::Error> {
        let g = self.chip.geometry;
        if !g.contains_page(page)
            || column as u64 + len as u64 > g.page_size() as u64
            || oob > g.oob_size() as usize
        {
            return Err(SpiNandError::OutOfBounds);
        }
        Ok(())
    }

    fn program_inner(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Res<(), SPI::Error> {
        let ps = self.chip.geometry.page_size();
        let row = self.locate(page)?;
        self.cmd(&[WRITE_ENABLE])?;
        // First load (02h) clears the rest of the cache to FFh; a spare area that does
        // not follow the data directly goes in with a random load (84h).
        let contiguous = column + data.len() as u32 == ps;
        if !data.is_empty() {
            let hdr = [PROGRAM_LOAD, (column >> 8) as u8, column as u8];
            let tail: &[u8] = if contiguous { oob } else { &[] };
            self.spi
                .transaction(&mut [
                    Operation::Write(&hdr),
                    Operation::Write(data),
                    Operation::Write(tail),
                ])
                .map_err(SpiNandError::Spi)?;
        }
        if !oob.is_empty() && (data.is_empty() || !contiguous) {
            let op = if data.is_empty() {
                PROGRAM_LOAD
            } else {
                PROGRAM_LOAD_RANDOM
            };
            let hdr = [op, (ps >> 8) as u8, ps as u8];
            self.spi
                .transaction(&mut [Operation::Write(&hdr), Operation::Write(oob)])
                .map_err(SpiNandError::Spi)?;
        }
        let [a, b, c] = row_bytes(row);
        self.cmd(&[PROGRAM_EXECUTE, a, b, c])?;
        let status = self.wait_ready(Op::Program)?;
        if status & STATUS_P_FAIL != 0 {
            return Err(SpiNandError::ProgramFailed);
        }
        Ok(())
    }
}

impl<SPI: SpiDevice, D: DelayNs> ErrorType for SpiNand<SPI, D> {
    type Error = SpiNandError<SPI::Error>;
}

impl<SPI: SpiDevice, D: DelayNs> NandFlash for SpiNand<SPI, D> {
    fn geometry(&self) -> Geometry {
        self.chip.geometry
    }

    fn capabilities(&self) -> &Capabilities {
        &self.chip.capabilities
    }

    fn read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, Self::Error> {
        self.check_page(page, column, data.len(), oob.len())?;
        let status = self.load_page(page)?;
        let corrected = match self.chip.ecc_status.decode(status) {
            EccOutcome::Clean => 0,
            EccOutcome::Corrected(n) => n,
            EccOutcome::Uncorrectable => return Err(SpiNandError::Uncorrectable),
            EccOutcome::Reserved(_) => return Err(SpiNandError::BadEccStatus(status)),
        };
        let ps = self.chip.geometry.page_size();
        if column + data.len() as u32 == ps && !data.is_empty() {
            self.read_cache(column, data, oob)?;
        } else {
            if !data.is_empty() {
                self.read_cache(column, data, &mut [])?;
            }
            if !oob.is_empty() {
                self.read_cache(ps, oob, &mut [])?;
            }
        }
        Ok(ReadReport {
            corrected_bits: corrected,
            threshold: self.chip.capabilities.ecc.scrub_threshold,
        })
    }

    fn read_steps(
        &mut self,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<StepReport, Self::Error> {
        let g = self.chip.geometry;
        if data.len() != g.page_size() as usize {
            return Err(SpiNandError::OutOfBounds);
        }
        self.check_page(page, 0, data.len(), oob.len())?;
        let status = self.load_page(page)?;
        let caps = &self.chip.capabilities;
        let steps = caps.steps_per_page(&g);
        let threshold = caps.ecc.scrub_threshold;
        // The status register speaks for the whole page; on an uncorrectable status the
        // cache still holds every step the chip could correct.
        let all = match self.chip.ecc_status.decode(status) {
            EccOutcome::Clean => StepStatus::Good(0),
            EccOutcome::Corrected(n) => StepStatus::Good(n),
            EccOutcome::Uncorrectable => StepStatus::Unknown,
            EccOutcome::Reserved(_) => return Err(SpiNandError::BadEccStatus(status)),
        };
        self.read_cache(0, data, oob)?;
        Ok(StepReport::uniform(steps, all, threshold))
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
    ) -> Result<(), Self::Error> {
        self.check_page(page, column, data.len(), oob.len())?;
        let pu = self.chip.capabilities.program_unit;
        if column % pu != 0 || data.len() as u32 % pu != 0 || (data.is_empty() && oob.is_empty()) {
            return Err(SpiNandError::Misuse);
        }
        self.program_inner(page, column, data, oob)
    }

    fn erase(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        let g = self.chip.geometry;
        if !g.contains_block(block) {
            return Err(SpiNandError::OutOfBounds);
        }
        let row = self.locate(g.page(block, 0))?;
        self.cmd(&[WRITE_ENABLE])?;
        let [a, b, c] = row_bytes(row);
        self.cmd(&[BLOCK_ERASE, a, b, c])?;
        let status = self.wait_ready(Op::Erase)?;
        if status & STATUS_E_FAIL != 0 {
            return Err(SpiNandError::EraseFailed);
        }
        Ok(())
    }

    fn is_bad(&mut self, block: BlockAddr) -> Result<bool, Self::Error> {
        let g = self.chip.geometry;
        if !g.contains_block(block) {
            return Err(SpiNandError::OutOfBounds);
        }
        let bbm = self.chip.capabilities.bad_block_marker;
        let ppb = g.pages_per_block();
        for i in [0, 1, ppb - 1] {
            if !bbm.on_page(i, ppb) || (i == ppb - 1 && i <= 1) {
                continue;
            }
            // The marker bytes are outside every ECC step, so the ECC verdict on the
            // page does not matter: the cache holds the cells either way.
            self.load_page(g.page(block, i))?;
            let mut marker = [0xFFu8; 2];
            let m = &mut marker[..bbm.len as usize];
            self.read_cache(g.page_size() + bbm.offset as u32, m, &mut [])?;
            if m.iter().any(|&b| b != 0xFF) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn mark_bad(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        let g = self.chip.geometry;
        if !g.contains_block(block) {
            return Err(SpiNandError::OutOfBounds);
        }
        // As Linux does: erase first (ignoring a failure, the block is going anyway) so
        // the marker program is not refused for NOP or lands on programmed cells.
        match self.erase(block) {
            Ok(()) | Err(SpiNandError::EraseFailed) => {}
            Err(e) => return Err(e),
        }
        let bbm = self.chip.capabilities.bad_block_marker;
        let mut oob = [0xFFu8; 4];
        let end = (bbm.offset + bbm.len) as usize;
        oob[bbm.offset as usize..end].fill(0x00);
        let ppb = g.pages_per_block();
        for i in [0, 1, ppb - 1] {
            if !bbm.on_page(i, ppb) || (i == ppb - 1 && i <= 1) {
                continue;
            }
            self.program_inner(g.page(block, i), 0, &[], &oob[..end])?;
        }
        Ok(())
    }
}
