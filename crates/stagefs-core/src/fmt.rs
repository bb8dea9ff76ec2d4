//! The crate's few messages (the store's mount and recovery results, the staging log's
//! replay and patches, read-only refusals): `debug!`, `info!` and `warn!` send them to the `log` facade
//! (feature `log`, for host builds) or to `defmt` (feature `defmt`, for firmware; the
//! firmware provides the global logger), and compile to nothing without either, so a
//! `no_std` build without the features pays nothing. With both features, `log` gets
//! them (a host build with every feature then needs no defmt logger).
//!
//! Format strings use `{}` and `{:?}` only, with arguments that implement both `Debug`
//! (or `Display`) and `defmt::Format`: integers, `&str`, `bool` and the crate's own types.
#![allow(unused_macros)]

macro_rules! log_at {
    ($level:ident, $fmt:literal $(, $arg:expr)* $(,)?) => {{
        #[cfg(feature = "log")]
        ::log::$level!($fmt $(, $arg)*);
        #[cfg(all(feature = "defmt", not(feature = "log")))]
        ::defmt::$level!($fmt $(, $arg)*);
        #[cfg(not(any(feature = "log", feature = "defmt")))]
        {
            $(let _ = &$arg;)*
        }
    }};
}

macro_rules! debug {
    ($($t:tt)*) => { log_at!(debug, $($t)*) };
}

macro_rules! info {
    ($($t:tt)*) => { log_at!(info, $($t)*) };
}

macro_rules! warn {
    ($($t:tt)*) => { log_at!(warn, $($t)*) };
}
