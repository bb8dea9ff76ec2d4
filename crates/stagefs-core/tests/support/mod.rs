//! Helpers the behaviour tests and the review probes share: a volume on the simulated
//! `TINY` part, open options, a byte pattern, whole-file reads and writes.

#![allow(dead_code)]

pub mod dirs;
pub mod full_volume;
pub mod refusing;
pub mod staged;
pub mod sweep;
pub mod tree;

use nand_hal::sim::{HeapStorage, SimNand};
use oftl::{Config, Greedy, Oftl};
use stagefs_core::{Error, Fs, OpenOptions, Store as StoreApi};

pub type Sim = SimNand<HeapStorage>;
pub type Store<'a> = Oftl<&'a mut Sim, 2048, 64, 4>;
pub type Vol<'a> = Fs<Store<'a>, 2048, 4>;

pub fn cfg() -> Config {
    Config {
        window_blocks: 6,
        format_id: 3,
        ..Default::default()
    }
}

pub fn vol(sim: &mut Sim) -> Vol<'_> {
    Fs::new(Store::new(sim, cfg(), Greedy::DEFAULT))
}

pub fn rw() -> OpenOptions {
    OpenOptions::new().read(true).write(true)
}

pub fn create() -> OpenOptions {
    rw().create(true)
}

pub fn pattern(seed: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2654435761).wrapping_add(seed) as u8)
        .collect()
}

pub fn read_all<S: StoreApi>(fs: &mut Fs<S, 2048, 4>, path: &str) -> Vec<u8>
where
    S::FlashError: core::fmt::Debug,
{
    let f = fs.open(path, OpenOptions::new().read(true)).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 700];
    loop {
        let n = fs.read(f, &mut buf).unwrap();
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    fs.close(f).unwrap();
    out
}

pub fn write_file<S: StoreApi>(fs: &mut Fs<S, 2048, 4>, path: &str, data: &[u8])
where
    S::FlashError: core::fmt::Debug,
{
    let f = fs.open(path, create().truncate(true)).unwrap();
    assert_eq!(fs.write(f, data).unwrap(), data.len());
    fs.close(f).unwrap();
}

/// Creates directories `/fill00000`, ... until one fails: those made and the error.
pub fn fill_dirs(fs: &mut Vol<'_>) -> (Vec<String>, Error<nand_hal::sim::SimError>) {
    let mut made = Vec::new();
    for i in 0.. {
        let p = format!("/fill{i:05}");
        match fs.create_dir(&p) {
            Ok(()) => made.push(p),
            Err(e) => return (made, e),
        }
    }
    unreachable!()
}

/// Fills the volume with directories, then 200-byte inline files in them, until each
/// fails: a volume with (almost) no room left.
pub fn fill_volume(fs: &mut Vol<'_>) -> Vec<String> {
    let (made, e) = fill_dirs(fs);
    assert_eq!(e, Error::NoSpace);
    for d in &made {
        let Ok(g) = fs.open(&format!("{d}/i"), create()) else {
            break;
        };
        let ok = fs.write(g, &[1u8; 200]).is_ok();
        if fs.close(g).is_err() || !ok {
            break;
        }
    }
    made
}

/// A seeded xorshift generator for the randomized scenarios (the seed must not be 0).
pub struct Rng(pub u64);

impl Rng {
    /// The next draw.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// The next draw, below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
