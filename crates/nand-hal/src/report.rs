//! What a read reports: ECC health ([`ReadReport`]) and, for step-aware reads, each ECC
//! step's outcome ([`StepReport`]). Shared by the blocking and async traits.

use crate::capabilities::{Capabilities, MAX_STEPS};
use crate::error::{Error, ErrorKind};
use crate::geometry::Geometry;

/// ECC health of a successful read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReadReport {
    /// Bits corrected in the worst ECC step the read touched (0 without ECC).
    pub corrected_bits: u8,
    /// The part's scrub threshold ([`crate::Ecc::scrub_threshold`]); 0 without ECC.
    pub threshold: u8,
}

impl ReadReport {
    /// A clean read.
    pub const fn clean(threshold: u8) -> Self {
        ReadReport {
            corrected_bits: 0,
            threshold,
        }
    }

    /// Whether ECC corrected nothing: the only reads that may count as "erased" evidence
    /// (see the module docs).
    pub const fn is_clean(&self) -> bool {
        self.corrected_bits == 0
    }

    /// Whether the data should be moved before it degrades further.
    pub const fn needs_scrub(&self) -> bool {
        self.threshold > 0 && self.corrected_bits >= self.threshold
    }
}

/// What ECC made of one step on a [`crate::NandFlash::read_steps`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum StepStatus {
    /// Decoded; this many bits corrected (0: clean, or no ECC).
    Good(u8),
    /// Beyond the ECC's strength: the step's bytes are raw cells (or undefined, from
    /// implementations that cannot deliver them).
    Uncorrectable,
    /// The part reported an uncorrectable page without saying which step failed: this
    /// step's bytes are corrected if the chip could, raw otherwise.
    Unknown,
}

impl StepStatus {
    /// Whether ECC vouches for the step's bytes.
    pub const fn is_good(&self) -> bool {
        matches!(self, StepStatus::Good(_))
    }
}

/// Per-step outcome of a [`crate::NandFlash::read_steps`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StepReport {
    status: [StepStatus; MAX_STEPS],
    steps: u8,
    threshold: u8,
}

impl StepReport {
    /// A report of `steps` steps, all `status`.
    pub const fn uniform(steps: u32, status: StepStatus, threshold: u8) -> Self {
        StepReport {
            status: [status; MAX_STEPS],
            steps: steps as u8,
            threshold,
        }
    }

    /// Sets step `step`'s outcome.
    pub fn set(&mut self, step: u32, status: StepStatus) {
        if (step as usize) < self.steps as usize {
            self.status[step as usize] = status;
        }
    }

    /// Each step's outcome, in page order.
    pub fn steps(&self) -> &[StepStatus] {
        &self.status[..self.steps as usize]
    }

    /// Step `step`'s outcome (`Uncorrectable` past the page).
    pub fn step(&self, step: u32) -> StepStatus {
        self.steps()
            .get(step as usize)
            .copied()
            .unwrap_or(StepStatus::Uncorrectable)
    }

    /// Whether every step decoded.
    pub fn all_good(&self) -> bool {
        self.steps().iter().all(StepStatus::is_good)
    }

    /// Whether the part flagged the page as a whole ([`StepStatus::Unknown`] steps).
    pub fn page_wide_failure(&self) -> bool {
        self.steps().contains(&StepStatus::Unknown)
    }

    /// The whole read as a [`ReadReport`] when every step decoded: what
    /// [`crate::NandFlash::read`] of the page would have returned.
    pub fn as_read_report(&self) -> Option<ReadReport> {
        let mut worst = 0u8;
        for s in self.steps() {
            match *s {
                StepStatus::Good(n) => worst = worst.max(n),
                _ => return None,
            }
        }
        Some(ReadReport {
            corrected_bits: worst,
            threshold: self.threshold,
        })
    }
}

/// What the default `read_steps` of both traits makes of a whole-page `read`: every step
/// `Good` with the read's worst count, or every step `Uncorrectable` when it fails.
pub(crate) fn steps_from_read<E: Error>(
    caps: &Capabilities,
    geometry: &Geometry,
    read: Result<ReadReport, E>,
) -> Result<StepReport, E> {
    let steps = caps.steps_per_page(geometry);
    let threshold = caps.ecc.scrub_threshold;
    match read {
        Ok(r) => Ok(StepReport::uniform(
            steps,
            StepStatus::Good(r.corrected_bits),
            threshold,
        )),
        Err(e) if e.kind() == ErrorKind::Uncorrectable => Ok(StepReport::uniform(
            steps,
            StepStatus::Uncorrectable,
            threshold,
        )),
        Err(e) => Err(e),
    }
}
