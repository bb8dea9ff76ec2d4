//! What a part can do beyond its geometry: program unit and partial-program count,
//! ECC, the spare-area (OOB) layout, and where the factory bad-block marker lives.
//!
//! # ECC steps and partial programs
//!
//! ECC works in *steps* of `Ecc::step_size` data bytes. A step's parity also covers the
//! OOB bytes that the layout assigns to it (the ECC-protected free bytes). A program
//! operation *writes* a step when it carries any byte other than `0xFF` for the step's
//! data or its protected OOB bytes. With on-die ECC a step may be written at most once
//! between erases: writing it again would leave parity that matches neither version.
//! Unprotected OOB bytes only obey the page's NOP budget.

use core::fmt;

use crate::geometry::Geometry;

/// Most OOB regions a layout may describe.
pub const MAX_OOB_REGIONS: usize = 16;
/// Most ECC steps (program units) per page.
pub const MAX_STEPS: usize = 8;

/// A run of free (user-available) spare bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OobRegion {
    /// First byte of the run, counted from the start of the spare area.
    pub offset: u16,
    /// Length of the run in bytes.
    pub len: u16,
    /// The ECC step whose parity covers these bytes, or `None` if ECC does not
    /// cover them (they can still be read, but bit errors in them are not corrected
    /// or even detected).
    pub ecc_step: Option<u8>,
}

impl OobRegion {
    /// A run covered by ECC step `step`.
    pub const fn protected(offset: u16, len: u16, step: u8) -> Self {
        OobRegion {
            offset,
            len,
            ecc_step: Some(step),
        }
    }
    /// A run that ECC does not cover.
    pub const fn unprotected(offset: u16, len: u16) -> Self {
        OobRegion {
            offset,
            len,
            ecc_step: None,
        }
    }
    /// One past the last byte of the run (saturating: a run past `u16::MAX` fails
    /// [`Capabilities::validate`] instead of overflowing).
    pub const fn end(&self) -> u16 {
        self.offset.saturating_add(self.len)
    }
}

/// The free bytes of the spare area, in ascending offset order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OobLayout {
    regions: [OobRegion; MAX_OOB_REGIONS],
    count: u8,
}

impl OobLayout {
    /// Builds a layout from up to [`MAX_OOB_REGIONS`] regions (ascending, non-overlapping;
    /// checked by [`Capabilities::validate`]).
    pub const fn new(regions: &[OobRegion]) -> Self {
        assert!(regions.len() <= MAX_OOB_REGIONS, "too many OOB regions");
        let mut out = [OobRegion {
            offset: 0,
            len: 0,
            ecc_step: None,
        }; MAX_OOB_REGIONS];
        let mut i = 0;
        while i < regions.len() {
            out[i] = regions[i];
            i += 1;
        }
        OobLayout {
            regions: out,
            count: regions.len() as u8,
        }
    }

    /// The regions.
    pub fn regions(&self) -> &[OobRegion] {
        &self.regions[..self.count as usize]
    }

    /// All free bytes.
    pub fn free_bytes(&self) -> usize {
        self.regions().iter().map(|r| r.len as usize).sum()
    }

    /// Free bytes that ECC covers.
    pub fn protected_bytes(&self) -> usize {
        self.regions()
            .iter()
            .filter(|r| r.ecc_step.is_some())
            .map(|r| r.len as usize)
            .sum()
    }

    /// One past the last free byte: how much of the spare area a caller must read to see
    /// every free byte.
    pub fn span(&self) -> usize {
        self.regions()
            .iter()
            .map(|r| r.end() as usize)
            .max()
            .unwrap_or(0)
    }

    /// Copies the protected free bytes of `oob` (in layout order) into `out` and returns
    /// how many were copied (at most `out.len()`).
    pub fn gather_protected(&self, oob: &[u8], out: &mut [u8]) -> usize {
        self.gather(oob, out, true)
    }

    /// Writes `src` into the protected free bytes of `oob` in layout order, leaving every
    /// other byte alone, and returns how many bytes of `src` fitted.
    pub fn scatter_protected(&self, src: &[u8], oob: &mut [u8]) -> usize {
        self.scatter(src, oob, true)
    }

    /// Like [`OobLayout::gather_protected`] over every free byte.
    pub fn gather_free(&self, oob: &[u8], out: &mut [u8]) -> usize {
        self.gather(oob, out, false)
    }

    /// Like [`OobLayout::scatter_protected`] over every free byte.
    pub fn scatter_free(&self, src: &[u8], oob: &mut [u8]) -> usize {
        self.scatter(src, oob, false)
    }

    fn gather(&self, oob: &[u8], out: &mut [u8], protected_only: bool) -> usize {
        let mut n = 0;
        for r in self.regions() {
            if protected_only && r.ecc_step.is_none() {
                continue;
            }
            let start = r.offset as usize;
            let end = (r.end() as usize).min(oob.len());
            if start >= end {
                continue;
            }
            let take = (end - start).min(out.len() - n);
            out[n..n + take].copy_from_slice(&oob[start..start + take]);
            n += take;
            if n == out.len() {
                break;
            }
        }
        n
    }

    fn scatter(&self, src: &[u8], oob: &mut [u8], protected_only: bool) -> usize {
        let mut n = 0;
        for r in self.regions() {
            if protected_only && r.ecc_step.is_none() {
                continue;
            }
            let start = r.offset as usize;
            let end = (r.end() as usize).min(oob.len());
            if start >= end {
                continue;
            }
            let take = (end - start).min(src.len() - n);
            oob[start..start + take].copy_from_slice(&src[n..n + take]);
            n += take;
            if n == src.len() {
                break;
            }
        }
        n
    }
}

/// How the part corrects bit errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EccKind {
    /// No ECC: reads return raw cells and `corrected_bits` is always 0.
    None,
    /// The chip corrects on read and reports a corrected-bit count.
    OnDie,
    /// Software or controller ECC wrapped around a raw part (it consumes OOB bytes).
    Host,
}

/// How finely a part reports the outcome of a read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EccReporting {
    /// One outcome per ECC step: a step that cannot be corrected does not hide the
    /// others (software ECC, parts with a per-sector status, no ECC at all).
    PerStep,
    /// One status for the whole page (W25N01GV, GD5F1GQ4, MT29F1G01): an uncorrectable
    /// status says that *some* step failed, not which. The chip still corrects every
    /// step it can, so the page buffer holds good data for those; the layer above
    /// tells them apart with its own checksums
    /// ([`NandFlash::read_steps`](crate::NandFlash::read_steps)).
    PageWide,
}

/// ECC description.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Ecc {
    /// Who corrects.
    pub kind: EccKind,
    /// Whether reads report per step or per page.
    pub reporting: EccReporting,
    /// Data bytes per ECC step (usually 512).
    pub step_size: u32,
    /// Bits the ECC can correct per step.
    pub strength: u8,
    /// Corrected bits per step at which the data should be moved (scrubbed) before it
    /// degrades into an uncorrectable error. Never above `strength`; 0 only without ECC.
    pub scrub_threshold: u8,
}

impl Ecc {
    /// No ECC.
    pub const NONE: Ecc = Ecc {
        kind: EccKind::None,
        reporting: EccReporting::PerStep,
        step_size: 512,
        strength: 0,
        scrub_threshold: 0,
    };
}

/// Pages of a block whose spare area carries the factory bad-block marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MarkerPages {
    /// Page 0.
    pub first: bool,
    /// Page 1.
    pub second: bool,
    /// The last page.
    pub last: bool,
}

/// Where the bad-block marker (BBM) lives. A block is bad when any marker byte on any
/// marker page is not `0xFF`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BadBlockMarker {
    /// First marker byte in the spare area.
    pub offset: u16,
    /// Marker length in bytes (1 or 2).
    pub len: u16,
    /// Which pages carry it.
    pub pages: MarkerPages,
}

impl BadBlockMarker {
    /// SPI NAND convention: OOB bytes 0-1 of the first page.
    pub const SPI: BadBlockMarker = BadBlockMarker {
        offset: 0,
        len: 2,
        pages: MarkerPages {
            first: true,
            second: false,
            last: false,
        },
    };
    /// Large-page raw NAND convention: OOB byte 0 of the first and second page.
    pub const RAW_LARGE_PAGE: BadBlockMarker = BadBlockMarker {
        offset: 0,
        len: 1,
        pages: MarkerPages {
            first: true,
            second: true,
            last: false,
        },
    };

    /// Whether page `index` of a block with `pages_per_block` pages carries the marker.
    pub const fn on_page(&self, index: u32, pages_per_block: u32) -> bool {
        (self.pages.first && index == 0)
            || (self.pages.second && index == 1)
            || (self.pages.last && index + 1 == pages_per_block)
    }
}

/// Why a [`Capabilities`] does not fit its geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum CapabilitiesError {
    /// The program unit must be a power of two dividing the page, with at most
    /// [`MAX_STEPS`] units per page.
    ProgramUnit,
    /// NOP must be at least 1.
    Nop,
    /// The ECC step must equal the program unit; strength and threshold must agree
    /// with the ECC kind (and a part without ECC reports per step).
    Ecc,
    /// An OOB region is empty, overlaps another or the marker, is out of order, runs
    /// past the spare area or names a step that does not exist.
    OobLayout,
    /// The marker must be 1 or 2 bytes inside the spare area, on at least one page.
    BadBlockMarker,
}

impl fmt::Display for CapabilitiesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            CapabilitiesError::ProgramUnit => "program unit must divide the page (<= 8 units)",
            CapabilitiesError::Nop => "NOP must be at least 1",
            CapabilitiesError::Ecc => "ECC step/strength/threshold inconsistent",
            CapabilitiesError::OobLayout => "OOB layout invalid for this spare size",
            CapabilitiesError::BadBlockMarker => "bad-block marker outside the spare area",
        };
        f.write_str(s)
    }
}

impl core::error::Error for CapabilitiesError {}

/// Everything an upper layer needs to know about a part besides its geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Capabilities {
    /// Smallest programmable unit in data bytes (the sector), also the ECC step.
    pub program_unit: u32,
    /// Number of program operations allowed on one page between erases (NOP).
    pub nop: u8,
    /// ECC.
    pub ecc: Ecc,
    /// Free spare bytes.
    pub oob: OobLayout,
    /// Factory bad-block marker.
    pub bad_block_marker: BadBlockMarker,
}

impl Capabilities {
    /// Program units (= ECC steps) per page.
    pub const fn steps_per_page(&self, geometry: &Geometry) -> u32 {
        geometry.page_size() / self.program_unit
    }

    /// Checks these capabilities against `geometry`. `const`, so a profile constant can be
    /// checked at compile time: `const _: () = assert!(CAPS.validate(&GEOM).is_ok());`.
    pub const fn validate(&self, geometry: &Geometry) -> Result<(), CapabilitiesError> {
        let pu = self.program_unit;
        if pu == 0 || !pu.is_power_of_two() || pu > geometry.page_size() {
            return Err(CapabilitiesError::ProgramUnit);
        }
        let steps = geometry.page_size() / pu;
        if steps as usize > MAX_STEPS {
            return Err(CapabilitiesError::ProgramUnit);
        }
        if self.nop == 0 {
            return Err(CapabilitiesError::Nop);
        }
        let ecc = &self.ecc;
        let has_ecc = !matches!(ecc.kind, EccKind::None);
        let ecc_ok = if has_ecc {
            ecc.step_size == pu
                && ecc.strength > 0
                && ecc.scrub_threshold > 0
                && ecc.scrub_threshold <= ecc.strength
        } else {
            ecc.strength == 0
                && ecc.scrub_threshold == 0
                && matches!(ecc.reporting, EccReporting::PerStep)
        };
        if !ecc_ok {
            return Err(CapabilitiesError::Ecc);
        }
        let bbm = &self.bad_block_marker;
        let oob = geometry.oob_size();
        // Ends in u32: offsets near `u16::MAX` are rejected, not overflowed (an
        // independent review, stop 40: `validate` panicked on them).
        let bbm_end = bbm.offset as u32 + bbm.len as u32;
        if bbm.len == 0
            || bbm.len > 2
            || bbm_end > oob
            || !(bbm.pages.first || bbm.pages.second || bbm.pages.last)
        {
            return Err(CapabilitiesError::BadBlockMarker);
        }
        let mut prev_end = 0u32;
        let mut i = 0;
        while i < self.oob.count as usize {
            let r = self.oob.regions[i];
            let (start, end) = (r.offset as u32, r.offset as u32 + r.len as u32);
            let overlaps_bbm = start < bbm_end && (bbm.offset as u32) < end;
            let step_ok = match r.ecc_step {
                Some(s) => has_ecc && (s as u32) < steps,
                None => true,
            };
            if r.len == 0 || start < prev_end || end > oob || overlaps_bbm || !step_ok {
                return Err(CapabilitiesError::OobLayout);
            }
            prev_end = end;
            i += 1;
        }
        Ok(())
    }

    /// The range of spare bytes ECC step `step` protects, as `(offset, len)` pairs
    /// through [`OobLayout::regions`]; yields nothing without ECC.
    pub fn protected_regions_of_step(&self, step: u32) -> impl Iterator<Item = &OobRegion> {
        self.oob
            .regions()
            .iter()
            .filter(move |r| r.ecc_step == Some(step as u8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w25n() -> Capabilities {
        crate::parts::W25N01GV.capabilities
    }

    #[test]
    fn layout_counts() {
        let c = w25n();
        assert_eq!(c.oob.free_bytes(), 24);
        assert_eq!(c.oob.protected_bytes(), 16);
        assert_eq!(c.oob.span(), 56);
        assert!(c
            .validate(&Geometry::new(2048, 64, 64, 1024, 1, 1, 1))
            .is_ok());
    }

    #[test]
    fn scatter_gather_round_trip() {
        let c = w25n();
        let src: [u8; 16] = core::array::from_fn(|i| i as u8 + 1);
        let mut oob = [0xFFu8; 64];
        assert_eq!(c.oob.scatter_protected(&src, &mut oob), 16);
        assert_eq!(&oob[4..8], &[1, 2, 3, 4]);
        assert_eq!(&oob[52..56], &[13, 14, 15, 16]);
        assert_eq!(oob[2], 0xFF);
        let mut back = [0u8; 16];
        assert_eq!(c.oob.gather_protected(&oob, &mut back), 16);
        assert_eq!(back, src);
        let mut short = [0u8; 6];
        assert_eq!(c.oob.gather_free(&oob, &mut short), 6);
        assert_eq!(short, [0xFF, 0xFF, 1, 2, 3, 4]);
    }

    #[test]
    fn rejects_overlapping_marker_and_bad_steps() {
        let g = Geometry::new(2048, 64, 64, 1024, 1, 1, 1);
        let mut c = w25n();
        c.oob = OobLayout::new(&[OobRegion::unprotected(1, 4)]);
        assert_eq!(c.validate(&g), Err(CapabilitiesError::OobLayout));
        c.oob = OobLayout::new(&[OobRegion::protected(4, 4, 4)]);
        assert_eq!(c.validate(&g), Err(CapabilitiesError::OobLayout));
        let mut c = w25n();
        c.ecc.scrub_threshold = 2;
        assert_eq!(c.validate(&g), Err(CapabilitiesError::Ecc));
        let mut c = w25n();
        c.program_unit = 128;
        assert_eq!(c.validate(&g), Err(CapabilitiesError::ProgramUnit));
    }
}
