//! On-flash formats, each parsed through a checked view. One module per structure;
//! every module documents its bytes. Parsers never panic: bad input is [`Corrupted`].
//!
//! [`Corrupted`]: crate::errors::Corrupted

pub mod backpointer;
pub mod checkpoint;
pub mod index;
pub mod logsector;
pub mod meta;
pub mod superblock;
pub mod table;
