//! The fault model: what can go wrong, how often, and a replay token that names it.
//!
//! Every fault is drawn from a seeded generator, so a [`FaultPlan`] (seed + power cut +
//! rates) reproduces a run exactly. Its `Display` form is the replay token, e.g.
//! `ns1:seed=2a:cut=57.most:corr=2000:unstable`, and `FromStr` parses it back.
//!
//! | Class (reference list) | Knob |
//! |---|---|
//! | F1 clean power cut at a program/erase | [`PowerCut`] with [`CutKind::Clean`] |
//! | F2 torn program, F3 torn erase | [`CutKind::Torn`] with a [`TornMode`] |
//! | F4 unstable bits after an interrupted op | [`FaultConfig::unstable_after_cut`] |
//! | F5 erased pages with bit flips | [`FaultConfig::erased_flips_ppm`] |
//! | F6 out-of-order completion across dies | [`FaultConfig::out_of_order`] |
//! | F7 correctable read errors | [`FaultConfig::read_correctable_ppm`] |
//! | F8 uncorrectable read errors | [`FaultConfig::read_uncorrectable_ppm`]; aimed at one read: [`FaultConfig::read_fail_at`] |
//! | F9 program failure, F10 erase failure | `program_fail_ppm`, `erase_fail_ppm` |
//! | F11 silent failures | `program_noop_ppm`, `erase_noop_ppm`, `program_flip_ppm` |
//! | F12 factory bad blocks | [`FaultConfig::factory_bad`] |
//! | F13 grown bad blocks / wear-out | [`FaultConfig::endurance`] |
//! | F14 read disturb | `read_disturb_threshold`, `read_disturb_ppm` |
//! | F15 rule violations | always on: reported as [`crate::ErrorKind::Misuse`] |
//! | F16 partial-program disturb | [`FaultConfig::partial_disturb_ppm`] |
//! | F18 cuts during recovery | the power-loss harness arms a second cut |
//! | F19 garbage images | [`super::SimNand::scribble`] |

use core::fmt;
use core::str::FromStr;

/// How much of an interrupted program or erase landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TornMode {
    /// One to three bits of the operation landed. On a part with on-die ECC a step that
    /// holds no more landed bits than the ECC strength decodes as erased with those bits
    /// "corrected": the page looks erased, but its steps have been programmed.
    SomeBits,
    /// All bits but one landed.
    MostBits,
    /// The operation landed up to a random point (a byte offset for programs, a page
    /// for erases) and not after it.
    Prefix,
    /// Each bit landed or not at random (an erase leaves the block indeterminate).
    Random,
}

/// What a power cut does to the operation it interrupts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CutKind {
    /// The operation never started.
    Clean,
    /// The operation was interrupted part way.
    Torn(TornMode),
}

impl CutKind {
    /// Every cut kind, for sweeps.
    pub const ALL: [CutKind; 5] = [
        CutKind::Clean,
        CutKind::Torn(TornMode::SomeBits),
        CutKind::Torn(TornMode::MostBits),
        CutKind::Torn(TornMode::Prefix),
        CutKind::Torn(TornMode::Random),
    ];

    const fn code(self) -> &'static str {
        match self {
            CutKind::Clean => "clean",
            CutKind::Torn(TornMode::SomeBits) => "some",
            CutKind::Torn(TornMode::MostBits) => "most",
            CutKind::Torn(TornMode::Prefix) => "prefix",
            CutKind::Torn(TornMode::Random) => "rand",
        }
    }

    fn from_code(s: &str) -> Option<Self> {
        CutKind::ALL.into_iter().find(|k| k.code() == s)
    }
}

/// Cut the power during the `at_op`-th program or erase (1-based) counted from the
/// moment the plan is armed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PowerCut {
    /// Which program/erase operation the cut hits.
    pub at_op: u64,
    /// What happens to that operation.
    pub kind: CutKind,
}

/// Rates and switches of the random faults. Rates are in parts per million per
/// operation; 0 turns a fault off. `Default` is a perfect device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FaultConfig {
    /// F7: a read sees 1..=strength extra bit errors in one step (corrected by ECC).
    pub read_correctable_ppm: u32,
    /// F8: a read fails as uncorrectable (transient).
    pub read_uncorrectable_ppm: u32,
    /// F9: a program reports failure and leaves the page undefined, in one of four shapes
    /// drawn per failure: garbage; everything but one to three bits landed; everything
    /// landed but the page is unstable (F4); a prefix landed. The layer above sees only
    /// the failure status and must not trust (or program) the page again.
    pub program_fail_ppm: u32,
    /// F10: an erase reports failure and leaves the block undefined.
    pub erase_fail_ppm: u32,
    /// F11: a program returns success but changes nothing.
    pub program_noop_ppm: u32,
    /// F11: an erase returns success but changes nothing.
    pub erase_noop_ppm: u32,
    /// F11: a program lands with one bit wrong.
    pub program_flip_ppm: u32,
    /// F5: after an erase, a page reads as erased but with 1-2 bits flipped to 0.
    pub erased_flips_ppm: u32,
    /// F16: each extra partial program of a page may flip a bit in another of its steps.
    pub partial_disturb_ppm: u32,
    /// F14: reads of a block since its erase beyond which read disturb starts (0 = off).
    pub read_disturb_threshold: u32,
    /// F14: past the threshold, a read flips a bit in another page of the block.
    pub read_disturb_ppm: u32,
    /// F13: mean program/erase cycles before a block wears out (0 = never); each block
    /// draws its own limit within +-25% of the mean.
    pub endurance: u32,
    /// F12: factory bad blocks placed at creation (never block 0).
    pub factory_bad: u32,
    /// F8, aimed: the `read_fail_at`-th read (1-based, counted from the moment the plan
    /// is armed, spare-only reads included) and the `read_fail_len - 1` reads after it
    /// fail as uncorrectable, whatever the page holds (0 = off). A transient error: the
    /// cells are untouched and later reads of the same page succeed.
    pub read_fail_at: u32,
    /// How many consecutive reads `read_fail_at` fails (0 counts as 1).
    pub read_fail_len: u32,
    /// F4: pages (and blocks) hit by a torn cut become unstable: every read of them draws
    /// its own outcome (clean, corrected bits, or uncorrectable), in any order.
    pub unstable_after_cut: bool,
    /// F6: on a cut, operations still running on other dies are torn as well.
    pub out_of_order: bool,
}

impl FaultConfig {
    /// A noisy but survivable device: every random fault class at a low rate.
    pub const fn noisy() -> Self {
        FaultConfig {
            read_correctable_ppm: 20_000,
            read_uncorrectable_ppm: 0,
            program_fail_ppm: 500,
            erase_fail_ppm: 500,
            program_noop_ppm: 0,
            erase_noop_ppm: 0,
            program_flip_ppm: 2_000,
            erased_flips_ppm: 2_000,
            partial_disturb_ppm: 10_000,
            read_disturb_threshold: 10_000,
            read_disturb_ppm: 1_000,
            endurance: 0,
            factory_bad: 2,
            read_fail_at: 0,
            read_fail_len: 0,
            unstable_after_cut: true,
            out_of_order: true,
        }
    }
}

/// Everything that decides a faulty run: seed, optional power cut and fault rates.
/// Its `Display` form is the replay token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FaultPlan {
    /// Seed of every random decision (fault draws, factory bad blocks, endurance,
    /// random timing).
    pub seed: u64,
    /// The power cut, if any.
    pub cut: Option<PowerCut>,
    /// Random fault rates.
    pub faults: FaultConfig,
}

impl FaultPlan {
    /// A plan with only a seed: a perfect device.
    pub const fn seeded(seed: u64) -> Self {
        FaultPlan {
            seed,
            cut: None,
            faults: FaultConfig::noisy_off(),
        }
    }

    /// This plan with a power cut.
    pub const fn with_cut(mut self, at_op: u64, kind: CutKind) -> Self {
        self.cut = Some(PowerCut { at_op, kind });
        self
    }

    /// This plan with fault rates.
    pub const fn with_faults(mut self, faults: FaultConfig) -> Self {
        self.faults = faults;
        self
    }
}

impl FaultConfig {
    const fn noisy_off() -> Self {
        FaultConfig {
            read_correctable_ppm: 0,
            read_uncorrectable_ppm: 0,
            program_fail_ppm: 0,
            erase_fail_ppm: 0,
            program_noop_ppm: 0,
            erase_noop_ppm: 0,
            program_flip_ppm: 0,
            erased_flips_ppm: 0,
            partial_disturb_ppm: 0,
            read_disturb_threshold: 0,
            read_disturb_ppm: 0,
            endurance: 0,
            factory_bad: 0,
            read_fail_at: 0,
            read_fail_len: 0,
            unstable_after_cut: false,
            out_of_order: false,
        }
    }
}

const TOKEN_PREFIX: &str = "ns1";

macro_rules! numeric_knobs {
    ($m:ident) => {
        $m!(read_correctable_ppm, "corr");
        $m!(read_uncorrectable_ppm, "uncorr");
        $m!(program_fail_ppm, "pfail");
        $m!(erase_fail_ppm, "efail");
        $m!(program_noop_ppm, "pnoop");
        $m!(erase_noop_ppm, "enoop");
        $m!(program_flip_ppm, "pflip");
        $m!(erased_flips_ppm, "erflip");
        $m!(partial_disturb_ppm, "pdist");
        $m!(read_disturb_threshold, "rdth");
        $m!(read_disturb_ppm, "rd");
        $m!(endurance, "endur");
        $m!(factory_bad, "fbad");
        $m!(read_fail_at, "rfail");
        $m!(read_fail_len, "rfaillen");
    };
}

impl fmt::Display for FaultPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{TOKEN_PREFIX}:seed={:x}", self.seed)?;
        if let Some(c) = self.cut {
            write!(f, ":cut={}.{}", c.at_op, c.kind.code())?;
        }
        let fc = &self.faults;
        macro_rules! show {
            ($field:ident, $key:literal) => {
                if fc.$field != 0 {
                    write!(f, ":{}={}", $key, fc.$field)?;
                }
            };
        }
        numeric_knobs!(show);
        if fc.unstable_after_cut {
            f.write_str(":unstable")?;
        }
        if fc.out_of_order {
            f.write_str(":ooo")?;
        }
        Ok(())
    }
}

/// A replay token that could not be parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TokenError;

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("malformed fault replay token")
    }
}

impl core::error::Error for TokenError {}

impl FromStr for FaultPlan {
    type Err = TokenError;

    fn from_str(s: &str) -> Result<Self, TokenError> {
        let mut parts = s.trim().split(':');
        if parts.next() != Some(TOKEN_PREFIX) {
            return Err(TokenError);
        }
        let mut plan = FaultPlan::default();
        let mut seen_seed = false;
        for part in parts {
            let (key, value) = match part.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (part, None),
            };
            let num = |v: Option<&str>| -> Result<u32, TokenError> {
                v.ok_or(TokenError)?.parse().map_err(|_| TokenError)
            };
            match key {
                "seed" => {
                    plan.seed = u64::from_str_radix(value.ok_or(TokenError)?, 16)
                        .map_err(|_| TokenError)?;
                    seen_seed = true;
                }
                "cut" => {
                    let (at, kind) = value.ok_or(TokenError)?.split_once('.').ok_or(TokenError)?;
                    plan.cut = Some(PowerCut {
                        at_op: at.parse().map_err(|_| TokenError)?,
                        kind: CutKind::from_code(kind).ok_or(TokenError)?,
                    });
                }
                "unstable" if value.is_none() => plan.faults.unstable_after_cut = true,
                "ooo" if value.is_none() => plan.faults.out_of_order = true,
                _ => {
                    let fc = &mut plan.faults;
                    let mut matched = false;
                    macro_rules! parse {
                        ($field:ident, $key:literal) => {
                            if !matched && key == $key {
                                fc.$field = num(value)?;
                                matched = true;
                            }
                        };
                    }
                    numeric_knobs!(parse);
                    if !matched {
                        return Err(TokenError);
                    }
                }
            }
        }
        if !seen_seed {
            return Err(TokenError);
        }
        Ok(plan)
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;

    #[test]
    fn token_round_trips() {
        let plans = [
            FaultPlan::seeded(0),
            FaultPlan::seeded(0xdead_beef).with_cut(57, CutKind::Torn(TornMode::MostBits)),
            FaultPlan::seeded(7)
                .with_cut(1, CutKind::Clean)
                .with_faults(FaultConfig::noisy()),
            FaultPlan::seeded(8).with_faults(FaultConfig {
                read_fail_at: 17,
                read_fail_len: 3,
                ..FaultConfig::default()
            }),
        ];
        for p in plans {
            let token = p.to_string();
            assert_eq!(token.parse::<FaultPlan>(), Ok(p), "{token}");
        }
        assert_eq!(
            FaultPlan::seeded(0x2a)
                .with_cut(57, CutKind::Torn(TornMode::MostBits))
                .to_string(),
            "ns1:seed=2a:cut=57.most"
        );
    }

    #[test]
    fn bad_tokens_are_rejected() {
        for t in [
            "",
            "ns2:seed=1",
            "ns1",
            "ns1:seed=zz",
            "ns1:seed=1:cut=3",
            "ns1:seed=1:what=3",
        ] {
            assert_eq!(t.parse::<FaultPlan>(), Err(TokenError), "{t}");
        }
    }
}
