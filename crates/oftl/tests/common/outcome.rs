//! What a mount after a fault showed, and counts of it over a sweep: the scaffolding of
//! the reviews' probes (a state either mounts as one the oracle allows, mounts as
//! another, is refused as media loss, or fails otherwise).

use super::lifecycle::Lifecycle;
use super::{matches, observe, Fs, Model, Sim};
use oftl::MountError;

/// What a mount after the fault showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Mounted and shows an allowed state.
    Right,
    /// Mounted and shows another state (acknowledged data rolled back, silently).
    Wrong(String),
    /// `MediaLoss` (where).
    Refused(String),
    /// Another error.
    Error(String),
}

impl Outcome {
    /// Whether the mount said `MediaLoss`.
    pub fn refused(&self) -> bool {
        matches!(self, Outcome::Refused(_))
    }
}

/// Outcomes of a sweep, with the first of each kind that is not right.
#[derive(Debug, Default)]
pub struct Tally {
    pub right: u32,
    pub wrong: u32,
    pub refused: u32,
    pub error: u32,
    pub first_wrong: Option<String>,
    pub first_refused: Option<String>,
    pub first_error: Option<String>,
}

impl Tally {
    pub fn add(&mut self, tag: &str, o: &Outcome) {
        match o {
            Outcome::Right => self.right += 1,
            Outcome::Wrong(m) => {
                self.wrong += 1;
                self.first_wrong.get_or_insert(format!("{tag}: {m}"));
            }
            Outcome::Refused(m) => {
                self.refused += 1;
                self.first_refused.get_or_insert(format!("{tag}: {m}"));
            }
            Outcome::Error(m) => {
                self.error += 1;
                self.first_error.get_or_insert(format!("{tag}: {m}"));
            }
        }
    }
}

/// Compares a mounted store with `allowed`.
pub fn check_mounted(fs: &mut Fs, allowed: &[&Model]) -> Outcome {
    match observe(fs) {
        Ok(seen) => match matches(&seen, allowed) {
            Ok(_) => Outcome::Right,
            Err(m) => Outcome::Wrong(m),
        },
        Err(e) => Outcome::Error(format!("observe: {e}")),
    }
}

/// Mounts `sim` (no faults armed by the caller any more), compares with `allowed`.
pub fn mount_check(sim: &mut Sim, allowed: &[&Model]) -> Outcome {
    match Fs::mounted(sim) {
        Ok(mut fs) => check_mounted(&mut fs, allowed),
        Err(MountError::MediaLoss { page }) => Outcome::Refused(format!("MediaLoss at {page:?}")),
        Err(e) => Outcome::Error(format!("{e:?}")),
    }
}
