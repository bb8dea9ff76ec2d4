//! The file-tree oracle (`stagefs_core::oracle`) with the store shape the power-loss
//! sweeps and the `stagefs_ops` fuzz target use.

#![allow(dead_code, unused_imports)]

use nand_hal::powerloss::Sim;
use oftl::Oftl;
use stagefs_core::Fs;

pub use stagefs_core::oracle::*;

pub type Store<'a> = Oftl<&'a mut Sim, 2048, 64, 4>;
pub type Vol<'a> = Fs<Store<'a>, 2048, 4>;
