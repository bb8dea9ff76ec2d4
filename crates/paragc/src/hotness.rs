//! Hotness: which class a write goes to.
//!
//! A [`Classifier`] turns a user write (its logical key, the caller's [`Hint`], and the
//! class of the version it replaces, if the caller knows it) into a [`Class`]. Hints
//! other than [`Hint::Auto`] always win.
//!
//! - [`HintOnly`] (zero-sized): hints, and `Warm` for everything else.
//! - [`UpdatePromotion`] (zero-sized): new data starts `Cold`; each overwrite promotes
//!   one step (`Cold -> Warm -> Hot`). Together with the demotion of pages that survive
//!   collection ([`Class::relocated`]), a page's class follows its update rate with no
//!   memory at all, provided the caller knows the class of the old version (an FTL
//!   does: it is the class of the block the old page sits in).
//! - [`HotnessTracker`]: a fixed-size counting sketch of recent update frequency (two
//!   hashed `u8` counters per key, conservative update, incremental halving), for
//!   callers that do not know the old version's class.
//!
//! Every call does O(1) work: two counter updates and at most one counter halved.

use crate::class::{Class, Hint};

/// Classifies user writes.
pub trait Classifier {
    /// The class for a user write of `key`, recording the write. `previous` is the
    /// class of the version being replaced (`None` for new data or if unknown).
    fn classify_write(&mut self, key: u32, hint: Hint, previous: Option<Class>) -> Class;
}

impl<T: Classifier + ?Sized> Classifier for &mut T {
    fn classify_write(&mut self, key: u32, hint: Hint, previous: Option<Class>) -> Class {
        T::classify_write(self, key, hint, previous)
    }
}

/// Hints only: `Auto` writes are [`Class::Warm`]. Single-stream data (the baseline).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HintOnly;

impl Classifier for HintOnly {
    fn classify_write(&mut self, _key: u32, hint: Hint, _previous: Option<Class>) -> Class {
        hint.forced_class().unwrap_or(Class::Warm)
    }
}

/// Promote on update: new data is `Cold`; an overwrite of a `Cold`, `Warm` or `Hot`
/// page is written one step hotter. Zero-sized.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UpdatePromotion;

impl UpdatePromotion {
    /// The class of an overwrite of a page of class `previous`.
    pub const fn promote(previous: Option<Class>) -> Class {
        match previous {
            None => Class::Cold,
            Some(Class::Cold) | Some(Class::Log) => Class::Warm,
            Some(Class::Warm) | Some(Class::Hot) => Class::Hot,
            Some(Class::Meta) => Class::Meta,
        }
    }
}

impl Classifier for UpdatePromotion {
    fn classify_write(&mut self, _key: u32, hint: Hint, previous: Option<Class>) -> Class {
        match hint.forced_class() {
            Some(c) => c,
            None => UpdatePromotion::promote(previous),
        }
    }
}

/// A bounded update-frequency tracker: `N` one-byte counters (`N` a power of two).
///
/// Each write of `key` bumps the smaller of its two hashed counters (conservative
/// update, so collisions inflate counts little); every write also halves one counter,
/// sweeping the array once per `N` writes, so counts measure *recent* frequency with a
/// half-life of about `N` writes. A key whose count reaches `hot` is [`Class::Hot`],
/// `warm` is [`Class::Warm`], else [`Class::Cold`].
///
/// Size `N` to a few times the number of keys that are hot at once; RAM is `N + 8`
/// bytes.
///
/// ```
/// use paragc::{Class, Classifier, Hint, HotnessTracker};
///
/// let mut t = HotnessTracker::<1024>::new(3, 2);
/// assert_eq!(t.classify_write(7, Hint::Auto, None), Class::Cold);
/// assert_eq!(t.classify_write(7, Hint::Auto, None), Class::Warm);
/// assert_eq!(t.classify_write(7, Hint::Auto, None), Class::Hot);
/// // Hints win.
/// assert_eq!(t.classify_write(7, Hint::Log, None), Class::Log);
/// ```
#[derive(Clone, Debug)]
pub struct HotnessTracker<const N: usize> {
    counters: [u8; N],
    cursor: u32,
    hot: u8,
    warm: u8,
}

impl<const N: usize> HotnessTracker<N> {
    const CHECK: () = assert!(
        N.is_power_of_two() && N >= 2 && N <= 1 << 24,
        "HotnessTracker size must be a power of two in 2..=2^24"
    );

    /// A tracker classifying counts `>= hot` as hot and `>= warm` as warm
    /// (`warm` is clamped to at most `hot`).
    pub const fn new(hot: u8, warm: u8) -> Self {
        let () = Self::CHECK;
        HotnessTracker {
            counters: [0; N],
            cursor: 0,
            hot,
            warm: if warm < hot { warm } else { hot },
        }
    }

    fn slots(key: u32) -> (usize, usize) {
        let h = (key as u64 ^ 0x5bd1_e995).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mask = N as u64 - 1;
        let a = (h >> 40) & mask;
        let mut b = (h >> 16) & mask;
        if b == a {
            b ^= 1;
        }
        (a as usize, b as usize)
    }

    /// The current count estimate for `key` (no update).
    pub fn estimate(&self, key: u32) -> u8 {
        let (a, b) = Self::slots(key);
        self.counters[a].min(self.counters[b])
    }

    /// The class for a count.
    pub fn class_of(&self, count: u8) -> Class {
        if count >= self.hot {
            Class::Hot
        } else if count >= self.warm {
            Class::Warm
        } else {
            Class::Cold
        }
    }

    /// Records a write of `key` and returns its new count estimate. O(1).
    pub fn record(&mut self, key: u32) -> u8 {
        let (a, b) = Self::slots(key);
        let m = self.counters[a].min(self.counters[b]).saturating_add(1);
        for s in [a, b] {
            if self.counters[s] < m {
                self.counters[s] = m;
            }
        }
        let c = self.cursor as usize & (N - 1);
        self.counters[c] /= 2;
        self.cursor = self.cursor.wrapping_add(1);
        m
    }
}

impl<const N: usize> Classifier for HotnessTracker<N> {
    fn classify_write(&mut self, key: u32, hint: Hint, _previous: Option<Class>) -> Class {
        let count = self.record(key);
        match hint.forced_class() {
            Some(c) => c,
            None => self.class_of(count),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracker_ram_is_n_plus_8() {
        assert!(core::mem::size_of::<HotnessTracker<1024>>() <= 1024 + 8);
        assert_eq!(core::mem::size_of::<UpdatePromotion>(), 0);
    }

    #[test]
    fn promotion_steps_up_and_hints_win() {
        let mut p = UpdatePromotion;
        assert_eq!(p.classify_write(0, Hint::Auto, None), Class::Cold);
        assert_eq!(
            p.classify_write(0, Hint::Auto, Some(Class::Cold)),
            Class::Warm
        );
        assert_eq!(
            p.classify_write(0, Hint::Auto, Some(Class::Warm)),
            Class::Hot
        );
        assert_eq!(
            p.classify_write(0, Hint::Auto, Some(Class::Hot)),
            Class::Hot
        );
        assert_eq!(p.classify_write(0, Hint::Metadata, None), Class::Meta);
        assert_eq!(HintOnly.classify_write(0, Hint::Auto, None), Class::Warm);
        assert_eq!(HintOnly.classify_write(0, Hint::Cold, None), Class::Cold);
    }

    #[test]
    fn tracker_separates_frequent_keys_and_forgets() {
        let mut t = HotnessTracker::<4096>::new(4, 2);
        // Key 1 written every other write, keys 1000.. once each.
        let mut cold_hot = 0;
        for i in 0..2000u32 {
            t.classify_write(1, Hint::Auto, None);
            if t.classify_write(1000 + i, Hint::Auto, None) == Class::Hot {
                cold_hot += 1;
            }
        }
        assert_eq!(t.class_of(t.estimate(1)), Class::Hot);
        assert!(cold_hot < 20, "{cold_hot} one-off keys classified hot");
        // Without further writes of key 1 its count decays to the background level of
        // one-off keys.
        for i in 0..(2 * 4096 * 8) {
            t.record(100_000 + i);
        }
        assert_eq!(t.class_of(t.estimate(1)), Class::Cold);
    }
}
