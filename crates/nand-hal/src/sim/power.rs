//! Power cuts: counting operations against the armed cut, tearing the interrupted
//! program or erase, and (out-of-order mode) the operations still running on other dies.

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::{CutKind, InFlight, PageState, SimNand, SimStorage, TornMode, MAX_DIES, MAX_STEPS};
use crate::geometry::PageAddr;

impl<S: SimStorage> SimNand<S> {
    /// Counts a program/erase against the armed cut. `true` when the cut fires now.
    pub(super) fn cut_fires(&mut self) -> Option<CutKind> {
        self.ops_since_arm += 1;
        match self.plan.cut {
            Some(c) if c.at_op == self.ops_since_arm => Some(c.kind),
            _ => None,
        }
    }

    pub(super) fn power_fail(&mut self, skip_die: Option<usize>) {
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

    pub(super) fn tear_in_flight(&mut self, op: InFlight) {
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
                st.flags |= PageState::TORN;
                st.torn_steps |= steps;
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
    pub(super) fn tear_program(
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
            TornMode::MostBits if clearing > 0 && ecc && mask != 0 => {
                // All but one bit landed: within ECC reach, read back as corrected.
                self.land(page, column, data, oob, mask, |_, v| v);
                let s = (0..MAX_STEPS).find(|s| mask & (1 << s) != 0).unwrap_or(0);
                let st = &mut self.storage.pages_mut()[page.0 as usize];
                st.flips[s] = st.flips[s].saturating_add(1);
            }
            TornMode::SomeBits | TornMode::MostBits if clearing > 0 => {
                // SomeBits: one to three of the bits to clear landed; MostBits: all but one.
                let most = mode == TornMode::MostBits;
                let picks = if most { 1 } else { 1 + self.below(3) as u64 };
                let mut chosen = [u64::MAX; 3];
                for c in chosen.iter_mut().take(picks as usize) {
                    *c = self.fault_rng.next_u64() % clearing;
                }
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
                        let is_chosen = chosen.contains(&seen);
                        seen += 1;
                        if is_chosen != most {
                            cells[at] &= !(1 << bit);
                        }
                    }
                }
                self.record_program(page, mask);
                if ecc && !most {
                    // A step holding more landed bits than ECC can explain away is no
                    // codeword at all.
                    let strength = self.profile.capabilities.ecc.strength as u32;
                    for s in 0..self.steps() {
                        if mask & (1 << s) != 0 && self.step_zero_bits(page, s) > strength {
                            self.storage.pages_mut()[page.0 as usize].flips[s as usize] = beyond;
                        }
                    }
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
        st.flags |= PageState::TORN;
        st.torn_steps |= mask;
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
    pub(super) fn tear_erase(&mut self, block: u32, mode: TornMode) {
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
                let st = &mut self.storage.pages_mut()[p];
                st.flags |= PageState::UNSTABLE;
                st.torn_steps = u8::MAX;
            }
        }
    }
}
