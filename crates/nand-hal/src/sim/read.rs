//! The read path: timing, read disturb and unstable-page drift, then the ECC model over
//! the page's virtual bit errors.

use super::{mix64, PageState, SimError, SimNand, SimStorage, MAX_STEPS, UNSTABLE_GRACE_READS};
use crate::blocking::ReadReport;
use crate::capabilities::Capabilities;
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
        // Persistent errors sit at fixed positions; a transient one (F7) adds its own
        // flips at positions drawn for this read only.
        let f = self.plan.faults;
        let mut transient = [0u8; MAX_STEPS];
        if self.hit(f.read_correctable_ppm) {
            let s = self.below(steps as u32) as usize;
            transient[s] = 1 + self.below(caps.ecc.strength.max(1) as u32) as u8;
        }
        let mut uncorrectable = self.hit(f.read_uncorrectable_ppm) && self.has_ecc();
        let mut worst = 0u8;
        let salt = self.counters.reads;
        for (s, (&fixed, &extra)) in st.flips.iter().zip(&transient).enumerate().take(steps) {
            let n = fixed.saturating_add(extra);
            if n == 0 {
                continue;
            }
            let written = st.written & (1 << s) != 0;
            if self.has_ecc() && written {
                if n <= caps.ecc.strength {
                    worst = worst.max(n);
                    continue;
                }
                uncorrectable = true;
            }
            apply_flips(&caps, page.0, s as u32, fixed, 0, column, data);
            apply_flips(&caps, page.0, s as u32, extra, salt, column, data);
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
