//! The erase path and bad-block marks.

use super::{
    BlockState, CutKind, InFlight, PageState, Pending, SimError, SimNand, SimStorage, MAX_STEPS,
};
use crate::error::ErrorKind;
use crate::geometry::BlockAddr;

impl<S: SimStorage> SimNand<S> {
    pub(super) fn do_erase(&mut self, block: BlockAddr, blocking: bool) -> Result<(), SimError> {
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

    pub(super) fn erase_outcome(&mut self, block: u32) -> Result<(), SimError> {
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

    pub(super) fn page_range(&self, block: u32) -> core::ops::Range<usize> {
        let ppb = self.profile.geometry.pages_per_block() as usize;
        block as usize * ppb..(block as usize + 1) * ppb
    }

    pub(super) fn erase_clean(&mut self, block: u32) {
        self.storage.erase_block(block);
        for p in self.page_range(block) {
            self.storage.pages_mut()[p] = PageState::default();
        }
        let bs = &mut self.storage.blocks_mut()[block as usize];
        bs.reads_since_erase = 0;
        bs.next_page = 0;
    }

    /// Leaves a block undefined: every page full and unreadable.
    pub(super) fn garble_block(&mut self, block: u32) {
        let nop = self.profile.capabilities.nop;
        let all = self.all_steps();
        let beyond = self.beyond_ecc().max(1);
        for p in self.page_range(block) {
            self.storage.pages_mut()[p] = PageState {
                programs: nop,
                written: all,
                flags: 0,
                torn_steps: 0,
                flips: [beyond; MAX_STEPS],
            };
        }
        let ppb = self.profile.geometry.pages_per_block() as u16;
        self.storage.blocks_mut()[block as usize].next_page = ppb;
    }
    /// Whether `block` reads bad (a marker byte not `0xFF`), and whether it is marked
    /// (every marker byte `0x00` on a marker page, or marked through the simulator).
    pub(super) fn do_is_bad(&mut self, block: BlockAddr) -> Result<(bool, bool), SimError> {
        self.check_powered()?;
        let g = self.profile.geometry;
        if !g.contains_block(block) {
            return Err(SimError::of(ErrorKind::OutOfBounds));
        }
        let bbm = self.profile.capabilities.bad_block_marker;
        let t = self.profile.timing;
        let mut bad = self.storage.blocks()[block.0 as usize].flags & BlockState::BAD != 0;
        let mut marked = bad;
        let ppb = g.pages_per_block();
        for page in (0..ppb)
            .filter(|&p| bbm.on_page(p, ppb))
            .map(|p| g.page(block, p))
        {
            self.now += t.cmd_read_ns as u64 + t.t_read.typ_ns as u64 + t.bus_ns(bbm.len as u64);
            self.counters.reads += 1;
            self.counters.oob_reads += 1;
            self.counters.bus_bytes += bbm.len as u64;
            let (b, base) = self.locate(page);
            if let Some(cells) = self.storage.block(b) {
                let at = base + g.page_size() as usize + bbm.offset as usize;
                let bytes = &cells[at..at + bbm.len as usize];
                bad |= bytes.iter().any(|&x| x != 0xFF);
                marked |= bytes.iter().all(|&x| x == 0x00);
            }
        }
        Ok((bad, marked))
    }

    pub(super) fn do_mark_bad(&mut self, block: BlockAddr) -> Result<(), SimError> {
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
