//! On-flash formats, each parsed through a checked view. One module per structure;
//! every module documents its bytes and names its fields as byte ranges (its private
//! `field` module), which its encoder and its parser both use through
//! `format::field`'s little-endian helpers. Parsers never panic: bad input is
//! [`Corrupted`]. Stored CRCs are compared in one place, which an image fuzzer
//! can make agree with anything (`cfg(fuzzing)` builds) to reach the checks behind them.
//!
//! [`Corrupted`]: crate::errors::Corrupted

pub mod backpointer;
pub mod checkpoint;
pub(crate) mod field;
pub mod index;
pub mod logsector;
pub mod meta;
pub mod superblock;
pub mod table;
