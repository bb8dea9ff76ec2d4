//! [`SoftEcc`]: host ECC over a raw [`NandFlash`].
//!
//! # Spare layout
//!
//! The wrapper takes the inner part's largest free spare region `[a, b)` and places one
//! chunk per 512 B sector at its start (see [`super::sector`] for the chunk); the rest
//! of that region and the inner part's other free regions stay free, unprotected. For
//! MT29F2G08 (64 B spare, marker at byte 0, free 2..64) with t = 4 and 4 user bytes:
//!
//! ```text
//!  0   2              15             28             41             54        64
//!  +---+--------------+--------------+--------------+--------------+---------+
//!  |BBM| sector 0     | sector 1     | sector 2     | sector 3     | free    |
//!  |   | u4 crc2 p7   | u4 crc2 p7   | u4 crc2 p7   | u4 crc2 p7   | (10 B)  |
//!  +---+--------------+--------------+--------------+--------------+---------+
//! ```
//!
//! Upper layers see 16 protected bytes (4 per sector, like W25N01GV) and 10 unprotected
//! ones through [`Capabilities::oob`]; the CRC and parity bytes are not free (a program
//! that puts anything but `FFh` there is misuse).
//!
//! # Reads
//!
//! One inner read covers the sectors the caller's range touches (and every sector whose
//! protected spare bytes fall in the caller's spare prefix); each is decoded. The
//! report carries the worst sector's corrected count; any uncorrectable sector fails the
//! whole read with [`SoftEccError::Uncorrectable`] (nothing is returned as good data).
//! [`NandFlash::read_steps`] decodes every sector and reports each on its own
//! ([`crate::EccReporting::PerStep`]): a failed sector leaves its raw bytes in the buffer
//! and its neighbours' corrected ones beside them.
//!
//! # Programs
//!
//! One inner program per call (it counts once against NOP): the caller's data and spare
//! bytes plus the chunks of the sectors the call writes (those with data or protected
//! spare bytes other than `FFh`). A sector's ECC is computed over its full 512 B: a
//! sector the call does not carry data for is taken as erased, which the ECC-step rule
//! (each step written once per erase) makes true.

use core::fmt;

use super::sector::{SectorCodec, SectorRead, Strength, SECTOR};
use crate::blocking::{NandFlash, ReadReport, StepReport, StepStatus};
use crate::capabilities::{
    Capabilities, Ecc, EccKind, EccReporting, OobLayout, OobRegion, MAX_OOB_REGIONS,
};
use crate::error::{Error, ErrorKind, ErrorType};
use crate::geometry::{BlockAddr, Geometry, PageAddr};

/// Largest page the wrapper handles (it buffers one page).
pub const MAX_PAGE: usize = 4096;
/// Largest spare area the wrapper handles.
pub const MAX_OOB: usize = 256;

/// Why a wrapper cannot be built over a part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SoftEccConfigError {
    /// The inner part already has ECC.
    InnerHasEcc,
    /// Page not a multiple of 512 B, larger than [`MAX_PAGE`], or spare larger than
    /// [`MAX_OOB`], or program unit not dividing 512.
    Geometry,
    /// The chunks do not fit the inner part's largest free spare region.
    SpareTooSmall,
}

impl fmt::Display for SoftEccConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SoftEccConfigError::InnerHasEcc => "the part already has ECC",
            SoftEccConfigError::Geometry => "page/spare/program unit not supported",
            SoftEccConfigError::SpareTooSmall => "ECC chunks do not fit the free spare area",
        })
    }
}

impl core::error::Error for SoftEccConfigError {}

/// Errors of the wrapped device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SoftEccError<E> {
    /// The inner device failed.
    Flash(E),
    /// A sector had more errors than the code corrects.
    Uncorrectable,
    /// Address or length outside the geometry.
    OutOfBounds,
    /// Unaligned program, or a program writing the ECC bytes.
    Misuse,
}

impl<E: Error> Error for SoftEccError<E> {
    fn kind(&self) -> ErrorKind {
        match self {
            SoftEccError::Flash(e) => e.kind(),
            SoftEccError::Uncorrectable => ErrorKind::Uncorrectable,
            SoftEccError::OutOfBounds => ErrorKind::OutOfBounds,
            SoftEccError::Misuse => ErrorKind::Misuse,
        }
    }
}

impl<E: fmt::Debug> fmt::Display for SoftEccError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SoftEccError::Flash(e) => write!(f, "flash error: {e:?}"),
            SoftEccError::Uncorrectable => f.write_str("uncorrectable ECC error"),
            SoftEccError::OutOfBounds => f.write_str("address out of bounds"),
            SoftEccError::Misuse => f.write_str("device contract violated by the caller"),
        }
    }
}

impl<E: fmt::Debug> core::error::Error for SoftEccError<E> {}

/// Host BCH ECC over a raw part.
#[derive(Debug)]
pub struct SoftEcc<F> {
    inner: F,
    codec: SectorCodec,
    caps: Capabilities,
    /// Offset of sector 0's chunk in the spare area.
    base: usize,
    steps: usize,
    page: [u8; MAX_PAGE],
    oob: [u8; MAX_OOB],
}

type Res<T, E> = Result<T, SoftEccError<E>>;

impl<F: NandFlash> SoftEcc<F> {
    /// Wraps `inner` with `strength` and `user` protected spare bytes per sector.
    pub fn new(inner: F, strength: Strength, user: u8) -> Result<Self, SoftEccConfigError> {
        let g = inner.geometry();
        let ic = *inner.capabilities();
        if ic.ecc.kind != EccKind::None {
            return Err(SoftEccConfigError::InnerHasEcc);
        }
        let ps = g.page_size() as usize;
        if ps % SECTOR != 0
            || ps > MAX_PAGE
            || g.oob_size() as usize > MAX_OOB
            || SECTOR as u32 % ic.program_unit != 0
        {
            return Err(SoftEccConfigError::Geometry);
        }
        let steps = ps / SECTOR;
        let codec = SectorCodec::new(strength, user);
        let need = steps * codec.chunk_len();
        let Some(big) = ic
            .oob
            .regions()
            .iter()
            .filter(|r| r.ecc_step.is_none())
            .max_by_key(|r| r.len)
            .copied()
        else {
            return Err(SoftEccConfigError::SpareTooSmall);
        };
        if (big.len as usize) < need {
            return Err(SoftEccConfigError::SpareTooSmall);
        }
        let base = big.offset as usize;
        let mut regions = [OobRegion::default(); MAX_OOB_REGIONS];
        let mut n = 0;
        let mut push = |r: OobRegion, n: &mut usize| -> Result<(), SoftEccConfigError> {
            if *n == MAX_OOB_REGIONS {
                return Err(SoftEccConfigError::SpareTooSmall);
            }
            regions[*n] = r;
            *n += 1;
            Ok(())
        };
        for r in ic.oob.regions() {
            if *r != big {
                if r.offset < big.offset {
                    push(*r, &mut n)?;
                }
                continue;
            }
            if user > 0 {
                for s in 0..steps {
                    let at = (base + s * codec.chunk_len()) as u16;
                    push(OobRegion::protected(at, user as u16, s as u8), &mut n)?;
                }
            }
            if (big.len as usize) > need {
                push(
                    OobRegion::unprotected((base + need) as u16, big.len - need as u16),
                    &mut n,
                )?;
            }
        }
        for r in ic.oob.regions() {
            if r.offset > big.offset {
                push(*r, &mut n)?;
            }
        }
        let t = strength.bits();
        let caps = Capabilities {
            program_unit: SECTOR as u32,
            nop: ic.nop,
            ecc: Ecc {
                kind: EccKind::Host,
                reporting: EccReporting::PerStep,
                step_size: SECTOR as u32,
                strength: t,
                scrub_threshold: (t * 3).div_ceil(4),
            },
            oob: OobLayout::new(&regions[..n]),
            bad_block_marker: ic.bad_block_marker,
        };
        if caps.validate(&g).is_err() {
            return Err(SoftEccConfigError::SpareTooSmall);
        }
        Ok(SoftEcc {
            inner,
            codec,
            caps,
            base,
            steps,
            page: [0xFF; MAX_PAGE],
            oob: [0xFF; MAX_OOB],
        })
    }

    /// The wrapped device.
    pub fn inner(&self) -> &F {
        &self.inner
    }

    /// The wrapped device, mutably (raw access, fault injection).
    pub fn inner_mut(&mut self) -> &mut F {
        &mut self.inner
    }

    /// Unwraps.
    pub fn into_inner(self) -> F {
        self.inner
    }

    /// The sector codec.
    pub fn codec(&self) -> &SectorCodec {
        &self.codec
    }

    fn chunk_range(&self, s: usize) -> core::ops::Range<usize> {
        let at = self.base + s * self.codec.chunk_len();
        at..at + self.codec.chunk_len()
    }

    fn check(&self, page: PageAddr, column: u32, len: usize, oob: usize) -> Res<(), F::Error> {
        let g = self.inner.geometry();
        if !g.contains_page(page)
            || column as u64 + len as u64 > g.page_size() as u64
            || oob > g.oob_size() as usize
        {
            return Err(SoftEccError::OutOfBounds);
        }
        Ok(())
    }

    /// Sectors whose protected user bytes lie (partly) in a spare prefix of `oob_len`.
    fn sectors_in_spare(&self, oob_len: usize) -> (usize, usize) {
        if self.codec.user_bytes() == 0 {
            return (usize::MAX, 0);
        }
        let mut hi = 0;
        for s in 0..self.steps {
            if self.chunk_range(s).start < oob_len {
                hi = s + 1;
            }
        }
        if hi == 0 {
            (usize::MAX, 0)
        } else {
            (0, hi)
        }
    }
}

impl<F: NandFlash> ErrorType for SoftEcc<F> {
    type Error = SoftEccError<F::Error>;
}

impl<F: NandFlash> NandFlash for SoftEcc<F> {
    fn geometry(&self) -> Geometry {
        self.inner.geometry()
    }

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, Self::Error> {
        self.check(page, column, data.len(), oob.len())?;
        let (mut lo, mut hi) = self.sectors_in_spare(oob.len());
        let spare_hi = hi;
        let data_sectors = if data.is_empty() {
            0..0
        } else {
            column as usize / SECTOR..(column as usize + data.len()).div_ceil(SECTOR)
        };
        if !data.is_empty() {
            lo = lo.min(data_sectors.start);
            hi = hi.max(data_sectors.end);
        }
        let threshold = self.caps.ecc.scrub_threshold;
        let os = self.inner.geometry().oob_size() as usize;
        if lo >= hi {
            // Only unprotected spare bytes: a plain read.
            self.inner
                .read(page, 0, &mut [], oob)
                .map_err(SoftEccError::Flash)?;
            return Ok(ReadReport::clean(threshold));
        }
        let spare_len = oob.len().max(self.chunk_range(hi - 1).end).min(os);
        let (d0, d1) = (lo * SECTOR, hi * SECTOR);
        self.inner
            .read(
                page,
                d0 as u32,
                &mut self.page[d0..d1],
                &mut self.oob[..spare_len],
            )
            .map_err(SoftEccError::Flash)?;
        let mut worst = 0u8;
        // Only the sectors the read returns bytes of are decoded: a sector between them
        // (read in the same burst) that does not decode is not this read's failure (an
        // independent review, stop 40).
        for s in (lo..hi).filter(|s| *s < spare_hi || data_sectors.contains(s)) {
            let r = self.chunk_range(s);
            let sector = &mut self.page[s * SECTOR..(s + 1) * SECTOR];
            match self.codec.decode(sector, &mut self.oob[r]) {
                Ok(SectorRead::Data { corrected } | SectorRead::Erased { corrected }) => {
                    worst = worst.max(corrected);
                }
                Err(_) => return Err(SoftEccError::Uncorrectable),
            }
        }
        let c = column as usize;
        data.copy_from_slice(&self.page[c..c + data.len()]);
        oob.copy_from_slice(&self.oob[..oob.len()]);
        Ok(ReadReport {
            corrected_bits: worst,
            threshold,
        })
    }

    fn read_steps(
        &mut self,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<StepReport, Self::Error> {
        let g = self.inner.geometry();
        let ps = g.page_size() as usize;
        if data.len() != ps {
            return Err(SoftEccError::OutOfBounds);
        }
        self.check(page, 0, data.len(), oob.len())?;
        let os = g.oob_size() as usize;
        self.inner
            .read(page, 0, &mut self.page[..ps], &mut self.oob[..os])
            .map_err(SoftEccError::Flash)?;
        let mut report = StepReport::uniform(
            self.steps as u32,
            StepStatus::Good(0),
            self.caps.ecc.scrub_threshold,
        );
        for s in 0..self.steps {
            let r = self.chunk_range(s);
            let sector = &mut self.page[s * SECTOR..(s + 1) * SECTOR];
            let status = match self.codec.decode(sector, &mut self.oob[r]) {
                Ok(SectorRead::Data { corrected } | SectorRead::Erased { corrected }) => {
                    StepStatus::Good(corrected)
                }
                Err(_) => StepStatus::Uncorrectable,
            };
            report.set(s as u32, status);
        }
        data.copy_from_slice(&self.page[..ps]);
        oob.copy_from_slice(&self.oob[..oob.len()]);
        Ok(report)
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
        self.check(page, column, data.len(), oob.len())?;
        let c = column as usize;
        if c % SECTOR != 0 || data.len() % SECTOR != 0 || (data.is_empty() && oob.is_empty()) {
            return Err(SoftEccError::Misuse);
        }
        // The caller may not write CRC or parity bytes.
        let u = self.codec.user_bytes();
        for s in 0..self.steps {
            let r = self.chunk_range(s);
            let ecc_bytes = r.start + u..r.end;
            if oob
                .get(ecc_bytes.start..ecc_bytes.end.min(oob.len()))
                .is_some_and(|b| b.iter().any(|&x| x != 0xFF))
            {
                return Err(SoftEccError::Misuse);
            }
        }
        let ps = self.inner.geometry().page_size() as usize;
        self.page[..ps].fill(0xFF);
        self.page[c..c + data.len()].copy_from_slice(data);
        let os = self.inner.geometry().oob_size() as usize;
        self.oob[..os].fill(0xFF);
        self.oob[..oob.len()].copy_from_slice(oob);
        let mut spare_len = oob.len();
        for s in 0..self.steps {
            let r = self.chunk_range(s);
            let sector = &self.page[s * SECTOR..(s + 1) * SECTOR];
            let written = sector.iter().any(|&b| b != 0xFF)
                || self.oob[r.start..r.start + u].iter().any(|&b| b != 0xFF);
            if written {
                self.codec.encode(sector, &mut self.oob[r.clone()]);
                spare_len = spare_len.max(r.end);
            }
        }
        self.inner
            .program(
                page,
                column,
                &self.page[c..c + data.len()],
                &self.oob[..spare_len],
            )
            .map_err(SoftEccError::Flash)
    }

    fn erase(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        self.inner.erase(block).map_err(SoftEccError::Flash)
    }

    fn is_bad(&mut self, block: BlockAddr) -> Result<bool, Self::Error> {
        self.inner.is_bad(block).map_err(SoftEccError::Flash)
    }

    fn is_marked(&mut self, block: BlockAddr) -> Result<bool, Self::Error> {
        self.inner.is_marked(block).map_err(SoftEccError::Flash)
    }

    fn mark_bad(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        self.inner.mark_bad(block).map_err(SoftEccError::Flash)
    }
}
