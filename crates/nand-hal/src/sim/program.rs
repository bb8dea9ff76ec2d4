//! The program path: every NAND rule checked before anything changes, the cost model,
//! then the cells and page state updated (with the plan's random program faults).

use rand_core::RngCore;

use super::{
    BlockState, CutKind, InFlight, Misuse, PageState, Pending, SimError, SimNand, SimStorage,
    MAX_STEPS,
};
use crate::error::ErrorKind;
use crate::geometry::PageAddr;

impl<S: SimStorage> SimNand<S> {
    pub(super) fn validate_program(
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

    pub(super) fn do_program(
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
    pub(super) fn program_outcome(
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
            self.fail_program(page, column, data, oob, mask);
            let bs = &mut self.storage.blocks_mut()[b];
            bs.flags = (bs.flags & !BlockState::FAIL_NEXT_PROGRAM) | BlockState::FAIL_NEXT_ERASE;
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

    /// Leaves a failed program's page in one of the shapes of
    /// [`FaultConfig::program_fail_ppm`](super::FaultConfig::program_fail_ppm).
    fn fail_program(&mut self, page: PageAddr, column: u32, data: &[u8], oob: &[u8], mask: u8) {
        let beyond = self.beyond_ecc();
        let ecc = self.has_ecc();
        let shape = self.below(4);
        let mut noise = [0u8; 32];
        self.fault_rng.fill_bytes(&mut noise);
        let total = data.len() + oob.len();
        let mut broken = true;
        match shape {
            // Garbage: some of the bits it was clearing landed, others not (a program
            // never clears a bit it was not asked to: the bad-block marker, for one,
            // stays as it was).
            0 => self.land(page, column, data, oob, mask, |i, v| v | noise[i % 32]),
            // All but one to three bits landed (within ECC reach or not).
            1 => {
                let missing = 1 + self.below(3) as usize;
                if ecc {
                    self.land(page, column, data, oob, mask, |_, v| v);
                    let s = (0..MAX_STEPS).find(|s| mask & (1 << s) != 0).unwrap_or(0);
                    let st = &mut self.storage.pages_mut()[page.0 as usize];
                    st.flips[s] = st.flips[s].saturating_add(missing as u8);
                } else {
                    // One bit of each of `missing` programmed bytes stays erased.
                    let byte = |i: usize| {
                        if i < data.len() {
                            data[i]
                        } else {
                            oob[i - data.len()]
                        }
                    };
                    let programmed = (0..total).filter(|&i| byte(i) != 0xFF).count();
                    let mut at = [usize::MAX; 3];
                    for a in at.iter_mut().take(missing) {
                        let k = self.below(programmed.max(1) as u32) as usize;
                        *a = (0..total)
                            .filter(|&i| byte(i) != 0xFF)
                            .nth(k)
                            .unwrap_or(usize::MAX);
                    }
                    self.land(page, column, data, oob, mask, |i, v| {
                        if at.contains(&i) {
                            v | (1 << (!v).trailing_zeros().min(7))
                        } else {
                            v
                        }
                    });
                }
                broken = false;
            }
            // Everything landed, but the cells are marginal.
            2 => {
                self.land(page, column, data, oob, mask, |_, v| v);
                self.storage.pages_mut()[page.0 as usize].flags |= PageState::UNSTABLE;
                broken = false;
            }
            // A prefix landed.
            _ => {
                let cut_at = self.below(total.max(1) as u32) as usize;
                self.land(page, column, data, oob, mask, |i, v| {
                    if i < cut_at {
                        v
                    } else {
                        0xFF
                    }
                });
            }
        }
        let ps = &mut self.storage.pages_mut()[page.0 as usize];
        ps.flags |= PageState::TORN;
        ps.torn_steps |= mask;
        if ecc && broken {
            for s in 0..MAX_STEPS {
                if mask & (1 << s) != 0 {
                    ps.flips[s] = beyond;
                }
            }
        }
    }

    /// ANDs `f(i, byte)` of the programmed bytes into the cells and records the program
    /// in the page and block state.
    pub(super) fn land(
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

    pub(super) fn record_program(&mut self, page: PageAddr, mask: u8) {
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
}
