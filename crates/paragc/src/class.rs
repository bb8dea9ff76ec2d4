//! Temperature classes and caller hints.
//!
//! Every page written through a [`crate::BlockManager`] belongs to one [`Class`]. Each
//! class has its own open block (allocation head) on every parallel unit, so pages of
//! different classes never share an erase block: hot pages die together in hot blocks,
//! cold pages stay put in cold blocks, and garbage collection finds victims that are
//! nearly all invalid.

/// Number of temperature classes (the length of [`Class::ALL`]).
pub const CLASSES: usize = 5;

/// The stream a page is written to. Pages of different classes never share a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum Class {
    /// Frequently rewritten user data.
    Hot = 0,
    /// User data of middling or unknown update frequency.
    Warm = 1,
    /// Rarely rewritten user data, and data that survived garbage collection.
    Cold = 2,
    /// File-system or FTL metadata (index, attributes): small, rewritten often.
    Meta = 3,
    /// Log or journal records: written sequentially and retired together.
    Log = 4,
}

impl Class {
    /// Every class, in index order.
    pub const ALL: [Class; CLASSES] = [
        Class::Hot,
        Class::Warm,
        Class::Cold,
        Class::Meta,
        Class::Log,
    ];

    /// The class's index in `0..CLASSES` (for per-class arrays).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The class with index `i`, if any.
    pub const fn from_index(i: usize) -> Option<Class> {
        match i {
            0 => Some(Class::Hot),
            1 => Some(Class::Warm),
            2 => Some(Class::Cold),
            3 => Some(Class::Meta),
            4 => Some(Class::Log),
            _ => None,
        }
    }

    /// Where a page of this class goes when garbage collection relocates it.
    ///
    /// A page that is still valid when its block is collected has outlived the
    /// block's other pages, so user data moves one step colder (`Hot -> Warm -> Cold`).
    /// Log records that survive are long-lived and go to `Cold`. Metadata stays
    /// metadata, because its update rate does not depend on its age.
    pub const fn relocated(self) -> Class {
        match self {
            Class::Hot => Class::Warm,
            Class::Warm | Class::Cold | Class::Log => Class::Cold,
            Class::Meta => Class::Meta,
        }
    }

    /// Whether the class holds user data whose temperature a tracker may decide.
    pub const fn is_data(self) -> bool {
        matches!(self, Class::Hot | Class::Warm | Class::Cold)
    }
}

/// What the caller knows about a write. Hints other than [`Hint::Auto`] take precedence
/// over any hotness tracker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Hint {
    /// Plain user data: let the classifier decide.
    #[default]
    Auto,
    /// Metadata (always [`Class::Meta`]).
    Metadata,
    /// A log or journal record (always [`Class::Log`]).
    Log,
    /// The caller knows the data is hot.
    Hot,
    /// The caller knows the data is cold (archives, firmware images, relocations).
    Cold,
}

impl Hint {
    /// The class the hint forces, or `None` for [`Hint::Auto`].
    pub const fn forced_class(self) -> Option<Class> {
        match self {
            Hint::Auto => None,
            Hint::Metadata => Some(Class::Meta),
            Hint::Log => Some(Class::Log),
            Hint::Hot => Some(Class::Hot),
            Hint::Cold => Some(Class::Cold),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_round_trips() {
        for (i, c) in Class::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
            assert_eq!(Class::from_index(i), Some(*c));
        }
        assert_eq!(Class::from_index(CLASSES), None);
    }

    #[test]
    fn relocation_cools_data_and_keeps_metadata() {
        assert_eq!(Class::Hot.relocated(), Class::Warm);
        assert_eq!(Class::Warm.relocated(), Class::Cold);
        assert_eq!(Class::Cold.relocated(), Class::Cold);
        assert_eq!(Class::Log.relocated(), Class::Cold);
        assert_eq!(Class::Meta.relocated(), Class::Meta);
    }

    #[test]
    fn hints_force_classes() {
        assert_eq!(Hint::Auto.forced_class(), None);
        assert_eq!(Hint::Metadata.forced_class(), Some(Class::Meta));
        assert_eq!(Hint::Log.forced_class(), Some(Class::Log));
    }
}
