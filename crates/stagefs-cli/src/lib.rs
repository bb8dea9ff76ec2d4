//! The `stagefs` host tool (the binary is a thin argument parser over this library):
//! StageFS images on a PC. It makes factory images from a host directory, lists,
//! reads, copies and removes files in an image, checks an image (`fsck`) and shows how
//! the store on it uses the part (`inspect`). Every command works on an image
//! in the programmer's layout ([`image`]) of a named part (`--part`, default W25N01GV),
//! loaded into the simulated part; commands that change it write the image back only
//! when they succeed.

#![deny(unsafe_code)]

pub mod benchplot;
pub mod copy;
pub mod fsck;
pub mod image;
pub mod inspect;
pub mod mount;
pub mod part;
pub mod picture;
pub mod plan;
pub mod torture;
pub mod volume;
