//! A StageFS volume on a simulated part loaded from an image: the store and file layer
//! in the default configuration, over a part of up to [`crate::part::MAX_BLOCKS`] blocks.

use std::path::Path;

use nand_hal::sim::profile::Profile;
use nand_hal::{Geometry, NandFlash};
use oftl::{Greedy, Oftl};
use stagefs_core::{Error, Fs, Kind, OpenOptions};

use crate::image::{self, Sim};
use crate::part::{MAX_BLOCKS, PAGE};

/// The object store of a volume (the file layer's default cache of 12 table pages).
pub type Store<'a> = Oftl<&'a mut Sim, PAGE, MAX_BLOCKS, 12>;
/// A volume.
pub type Vol<'a> = Fs<Store<'a>, PAGE, 4>;
/// The object store of a mounted image, owning its simulated part.
pub type OwnedStore = Oftl<Sim, PAGE, MAX_BLOCKS, 12>;
/// File-layer handles of a FUSE mount (files open at once; more are closed and
/// reopened as needed).
pub const MOUNT_HANDLES: usize = 8;
/// The volume of a FUSE mount.
pub type MountVol = Fs<OwnedStore, PAGE, MOUNT_HANDLES>;
/// The file layer's error on the simulator.
pub type FsError = Error<nand_hal::sim::SimError>;

/// The store configuration `mkfs` formats with: the default one, with a smaller updating
/// window on parts of fewer than 256 blocks (test parts), where 16 blocks would leave
/// too little room.
pub fn config_for(profile: &Profile) -> oftl::Config {
    config_for_geometry(&profile.geometry)
}

/// [`config_for`] a part of geometry `geometry`.
pub fn config_for_geometry(geometry: &Geometry) -> oftl::Config {
    let c = oftl::Config::new();
    if geometry.blocks() < 256 {
        c.window_blocks(6)
    } else {
        c
    }
}

/// The object store over `sim` (not mounted), configured for its part.
pub fn store<F: NandFlash>(sim: F) -> Oftl<F, PAGE, MAX_BLOCKS, 12> {
    let config = config_for_geometry(&sim.geometry());
    Oftl::new(sim, config, Greedy::DEFAULT)
}

/// A volume over `sim` (not mounted).
pub fn over(sim: &mut Sim) -> Box<Vol<'_>> {
    Box::new(Fs::new(store(sim)))
}

/// [`over`], configured to format a factory image (`oftl::Config::for_image`): its
/// format erases are not counted, so the part the image is written onto has each
/// block's factory marker read before the block's first use.
pub fn over_for_image(sim: &mut Sim) -> Box<Vol<'_>> {
    let config = config_for_geometry(&sim.geometry()).for_image(true);
    Box::new(Fs::new(Oftl::new(sim, config, Greedy::DEFAULT)))
}

/// Loads `path` as an image of `profile`, with a readable error.
pub fn load(profile: &Profile, path: &Path) -> Result<Sim, String> {
    image::load_file(profile, path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Saves `sim` to `path`, with a readable error.
pub fn save(sim: &Sim, path: &Path) -> Result<(), String> {
    image::save_file(sim, path).map_err(|e| format!("{}: {e}", path.display()))
}

/// `e` in words, with what it was doing.
pub fn say(what: &str, e: FsError) -> String {
    format!("{what}: {e}")
}

/// Reads a whole file.
pub fn read_file(v: &mut Vol<'_>, path: &str) -> Result<Vec<u8>, FsError> {
    let f = v.open(path, OpenOptions::new().read(true))?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let r = loop {
        match v.read(f, &mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => break Err(e),
        }
    };
    v.close(f)?;
    r.map(|()| out)
}

/// Writes a whole file (created or truncated), durable on return.
pub fn write_file(v: &mut Vol<'_>, path: &str, data: &[u8]) -> Result<(), FsError> {
    let f = v.open(
        path,
        OpenOptions::new().write(true).create(true).truncate(true),
    )?;
    let mut at = 0;
    let r = loop {
        if at == data.len() {
            break Ok(());
        }
        match v.write(f, &data[at..]) {
            Ok(n) => at += n,
            Err(e) => break Err(e),
        }
    };
    let c = v.close(f);
    r.and(c)
}

/// The entries of a directory: `(name, kind)`, sorted by name.
pub fn list<S: stagefs_core::Store, const H: usize>(
    v: &mut Fs<S, PAGE, H>,
    path: &str,
) -> Result<Vec<(String, Kind)>, Error<S::FlashError>> {
    let mut out = Vec::new();
    for e in v.read_dir(path)? {
        let e = e?;
        out.push((e.name().to_string(), e.kind));
    }
    out.sort();
    Ok(out)
}

/// `dir` joined with `name` as an image path.
pub fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}
