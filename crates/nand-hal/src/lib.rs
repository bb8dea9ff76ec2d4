#![doc = include_str!("../README.md")]
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "alloc")]
extern crate alloc;

#[cfg(feature = "async")]
pub mod asynch;
pub mod blocking;
pub mod capabilities;
pub mod conformance;
#[cfg(feature = "ecc")]
pub mod ecc;
pub mod error;
pub mod geometry;
pub mod parts;
#[cfg(feature = "std")]
pub mod powerloss;
pub mod report;
#[cfg(feature = "sim")]
pub mod sim;
#[cfg(feature = "spi")]
pub mod spi;

pub use blocking::{NandFlash, PipelinedNand, ReadReport, StepReport, StepStatus};
pub use capabilities::{
    BadBlockMarker, Capabilities, CapabilitiesError, Ecc, EccKind, EccReporting, MarkerPages,
    OobLayout, OobRegion, MAX_OOB_REGIONS, MAX_STEPS,
};
pub use error::{Error, ErrorKind, ErrorType};
pub use geometry::{BlockAddr, DieAddr, Geometry, GeometryError, PageAddr, MAX_CHANNELS, MAX_DIES};
