//! The read path: timing and read disturb, then the ECC model over the page's virtual
//! bit errors, this read's transient ones and the few landed bits of torn steps.

use super::{mix64, PageState, SimError, SimNand, SimStorage, MAX_STEPS};
use crate::blocking::{ReadReport, StepReport, StepStatus};
use crate::capabilities::{Capabilities, EccReporting};
use crate::error::ErrorKind;
use crate::geometry::{BlockAddr, PageAddr};

impl<S: SimStorage> SimNand<S> {
    pub(super) fn do_read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, SimError> {
        let outcome = self.sense(page, column, data, oob, true)?;
        let caps = self.profile.capabilities;
        let steps = self.steps();
        // A page-wide status fails the read for any step; a per-step one only for the
        // steps the read touches.
        let page_wide = caps.ecc.reporting == EccReporting::PageWide;
        let mut worst = 0u8;
        let mut uncorrectable = false;
        for (s, o) in outcome.iter().enumerate().take(steps as usize) {
            if !page_wide && !touches(&caps, s as u32, column, data.len(), oob.len()) {
                continue;
            }
            match *o {
                StepOutcome::Uncorrectable => uncorrectable = true,
                StepOutcome::Corrected(n) | StepOutcome::NearErased(n) => worst = worst.max(n),
                StepOutcome::Clean | StepOutcome::Raw { .. } => {}
            }
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

    /// [`NandFlash::read_steps`]: the whole page, every step's outcome, the buffer
    /// delivered as the part's page buffer holds it (good steps corrected, failed ones
    /// raw). With `bus` false only the array read is charged (a chip model clocks the
    /// transfer out itself).
    ///
    /// [`NandFlash::read_steps`]: crate::NandFlash::read_steps
    pub(super) fn do_read_steps(
        &mut self,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
        bus: bool,
    ) -> Result<StepReport, SimError> {
        self.check_powered()?;
        if data.len() != self.profile.geometry.page_size() as usize {
            return Err(SimError::of(ErrorKind::OutOfBounds));
        }
        let outcome = self.sense(page, 0, data, oob, bus)?;
        let caps = self.profile.capabilities;
        let steps = self.steps();
        let mut report = StepReport::uniform(steps, StepStatus::Good(0), caps.ecc.scrub_threshold);
        let mut worst = 0u8;
        let mut failed = false;
        for (s, o) in outcome.iter().enumerate().take(steps as usize) {
            let st = match *o {
                StepOutcome::Uncorrectable => {
                    failed = true;
                    StepStatus::Uncorrectable
                }
                StepOutcome::Corrected(n) | StepOutcome::NearErased(n) => StepStatus::Good(n),
                StepOutcome::Clean | StepOutcome::Raw { .. } => StepStatus::Good(0),
            };
            if let StepStatus::Good(n) = st {
                worst = worst.max(n);
            }
            report.set(s as u32, st);
        }
        if caps.ecc.reporting == EccReporting::PageWide {
            // One status for the page: which step failed, or how many bits each step
            // needed, is not told.
            let all = if failed {
                StepStatus::Unknown
            } else {
                StepStatus::Good(worst)
            };
            report = StepReport::uniform(steps, all, caps.ecc.scrub_threshold);
        }
        if failed {
            self.counters.uncorrectable_reads += 1;
        } else if worst > 0 {
            self.counters.corrected_reads += 1;
        }
        Ok(report)
    }

    /// One array read: time and counters (the bus transfer only with `bus`), read
    /// disturb, the cells into `data` (from `column`) and `oob`, and each step's ECC
    /// outcome applied to them: corrected steps hold their data, near-erased ones read
    /// `FFh`, raw and uncorrectable ones carry their bit errors.
    fn sense(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
        bus: bool,
    ) -> Result<[StepOutcome; MAX_STEPS], SimError> {
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
        let moved = if bus {
            (data.len() + oob.len()) as u64
        } else {
            0
        };
        let start = self.now.max(self.die_free[die]).max(self.bus_free[ch]);
        let end = start + t.cmd_read_ns as u64 + t_r + t.bus_ns(moved);
        self.die_free[die] = end;
        self.bus_free[ch] = end;
        self.now = end;
        self.counters.reads += 1;
        self.reads_since_arm += 1;
        if data.is_empty() {
            self.counters.oob_reads += 1;
        }
        if bus {
            self.counters.bytes_read += data.len() as u64;
        }
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

        // ECC model: an outcome per step, applied to the bytes read.
        let caps = self.profile.capabilities;
        let steps = self.steps() as usize;
        let outcome = self.step_outcomes(page);
        let salt = self.counters.reads;
        for (s, o) in outcome.iter().enumerate().take(steps) {
            match *o {
                StepOutcome::Clean | StepOutcome::Corrected(_) => {}
                StepOutcome::NearErased(_) => fill_step(&caps, s as u32, column, data, oob, 0xFF),
                StepOutcome::Uncorrectable => {
                    let st = self.storage.pages()[page.0 as usize];
                    let n = st.flips[s].max(caps.ecc.strength.saturating_add(1));
                    apply_flips(&caps, page.0, s as u32, n, salt, column, data);
                }
                StepOutcome::Raw { fixed, extra } => {
                    apply_flips(&caps, page.0, s as u32, fixed, 0, column, data);
                    apply_flips(&caps, page.0, s as u32, extra, salt, column, data);
                }
            }
        }
        Ok(outcome)
    }

    /// What ECC makes of each step of `page` on this read: the page's persistent bit
    /// errors, this read's transient ones (F7, F8 random and aimed, unstable pages), and
    /// steps of a torn page that hold only a few programmed bits.
    fn step_outcomes(&mut self, page: PageAddr) -> [StepOutcome; MAX_STEPS] {
        let caps = self.profile.capabilities;
        let steps = self.steps() as usize;
        let st = self.storage.pages()[page.0 as usize];
        let f = self.plan.faults;
        let ecc = self.has_ecc();
        let mut transient = [0u8; MAX_STEPS];
        let mut fail_all = false;
        if self.hit(f.read_correctable_ppm) {
            let s = self.below(steps as u32) as usize;
            transient[s] = 1 + self.below(caps.ecc.strength.max(1) as u32) as u8;
        }
        if self.hit(f.read_uncorrectable_ppm) {
            fail_all = true;
        }
        if f.read_fail_at != 0 {
            let first = f.read_fail_at as u64;
            let len = f.read_fail_len.max(1) as u64;
            fail_all |= self.reads_since_arm >= first && self.reads_since_arm < first + len;
        }
        let torn = st.torn_steps & ((1u16 << steps) - 1) as u8;
        if st.flags & PageState::UNSTABLE != 0 && torn != 0 {
            // Marginal cells of a torn step read differently every time: clean, a few
            // bits off, or beyond ECC, in any order.
            let k = self.below(torn.count_ones());
            let s = (0..steps)
                .filter(|&s| torn & (1 << s) != 0)
                .nth(k as usize)
                .unwrap_or(0);
            match self.below(3) {
                0 => {}
                1 => transient[s] = transient[s].max(1),
                _ => transient[s] = self.beyond_ecc().max(2),
            }
        }
        let mut out = [StepOutcome::Clean; MAX_STEPS];
        let written_steps = st.written;
        for s in 0..steps {
            let written = written_steps & (1 << s) != 0;
            let fixed = st.flips[s];
            let mut extra = transient[s];
            if fail_all {
                if ecc {
                    out[s] = StepOutcome::Uncorrectable;
                    continue;
                }
                extra = extra.max(4);
            }
            let n = fixed.saturating_add(extra);
            if ecc && written {
                if n > caps.ecc.strength {
                    out[s] = StepOutcome::Uncorrectable;
                    continue;
                }
                if fixed == 0 && st.flags & PageState::TORN != 0 && torn & (1 << s) != 0 {
                    let zeros = self.step_zero_bits(page, s as u32);
                    if zeros > 0 && zeros <= caps.ecc.strength as u32 {
                        // A nearly erased codeword: the decoder "corrects" it to erased.
                        out[s] = StepOutcome::NearErased((zeros as u8).max(n));
                        continue;
                    }
                }
                out[s] = if n > 0 {
                    StepOutcome::Corrected(n)
                } else {
                    StepOutcome::Clean
                };
            } else if n > 0 {
                out[s] = StepOutcome::Raw { fixed, extra };
            }
        }
        out
    }

    /// Programmed (zero) bits in step `step` of `page`: its program unit of the data
    /// area and the spare bytes its ECC protects.
    pub(super) fn step_zero_bits(&self, page: PageAddr, step: u32) -> u32 {
        let g = self.profile.geometry;
        let caps = self.profile.capabilities;
        let (b, base) = self.locate(page);
        let Some(cells) = self.storage.block(b) else {
            return 0;
        };
        let pu = caps.program_unit as usize;
        let at = base + step as usize * pu;
        let mut zeros: u32 = cells[at..at + pu].iter().map(|x| x.count_zeros()).sum();
        let spare = base + g.page_size() as usize;
        for r in caps.oob.regions() {
            if r.ecc_step == Some(step as u8) {
                let o = spare + r.offset as usize;
                zeros += cells[o..o + r.len as usize]
                    .iter()
                    .map(|x| x.count_zeros())
                    .sum::<u32>();
            }
        }
        zeros
    }

    pub(super) fn read_side_effects(&mut self, page: PageAddr) {
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

/// What the ECC model makes of one step on one read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StepOutcome {
    /// No bit errors.
    Clean,
    /// Corrected this many bits.
    Corrected(u8),
    /// Beyond the ECC's strength.
    Uncorrectable,
    /// A written step holding only this many programmed bits: decoded as erased, the
    /// bits reported as corrected.
    NearErased(u8),
    /// Not covered by ECC (no ECC, or an unwritten step): bit errors returned as they
    /// are, `fixed` persistent ones at fixed positions and `extra` of this read only.
    Raw {
        /// Persistent flips.
        fixed: u8,
        /// This read's flips.
        extra: u8,
    },
}

/// Sets the bytes of ECC step `step` within `data` (which starts at `column`) and its
/// protected spare bytes within `oob` to `v`.
fn fill_step(caps: &Capabilities, step: u32, column: u32, data: &mut [u8], oob: &mut [u8], v: u8) {
    let pu = caps.program_unit as usize;
    let (from, to) = (step as usize * pu, (step as usize + 1) * pu);
    let col = column as usize;
    let lo = from.max(col);
    let hi = to.min(col + data.len());
    if lo < hi {
        data[lo - col..hi - col].fill(v);
    }
    for r in caps.oob.regions() {
        if r.ecc_step == Some(step as u8) {
            let a = (r.offset as usize).min(oob.len());
            let b = (r.offset as usize + r.len as usize).min(oob.len());
            oob[a..b].fill(v);
        }
    }
}

/// Whether a read of `len` data bytes at `column` and an `oob_len` spare prefix touches
/// ECC step `step` (its program unit or the spare bytes its ECC protects).
fn touches(caps: &Capabilities, step: u32, column: u32, len: usize, oob_len: usize) -> bool {
    let pu = caps.program_unit as u64;
    let (from, to) = (step as u64 * pu, (step as u64 + 1) * pu);
    let (c, e) = (column as u64, column as u64 + len as u64);
    (len > 0 && c < to && from < e)
        || caps
            .oob
            .regions()
            .iter()
            .any(|r| r.ecc_step == Some(step as u8) && (r.offset as usize) < oob_len)
}
