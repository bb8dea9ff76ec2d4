//! littlefs (v2, through the `littlefs2` crate) on the simulated NAND, configured as the
//! littlefs-benchmarks NAND runs are: 2048 B reads, 512 B programs (the W25N01GV sector),
//! 128 KiB blocks.

use littlefs2::driver::Storage;
use littlefs2::fs::Filesystem;
use littlefs2::io::{Error, Result as LfsResult, SeekFrom};
use littlefs2::path::PathBuf;

use nand_hal::{BlockAddr, NandFlash, PageAddr};

use crate::device::Device;
use crate::workload::{Rng, Target, Workload, CHUNK};

const PAGE: usize = 2048;
const BLOCK: usize = 64 * PAGE;

/// The `littlefs2::driver::Storage` adapter: byte offsets to pages and blocks.
pub struct LfsStorage {
    dev: Device,
}

impl Storage for LfsStorage {
    const READ_SIZE: usize = PAGE;
    const WRITE_SIZE: usize = 512;
    const BLOCK_SIZE: usize = BLOCK;
    const BLOCK_COUNT: usize = 1024;
    const BLOCK_CYCLES: isize = 500;
    type CACHE_SIZE = littlefs2::consts::U2048;
    type LOOKAHEAD_SIZE = littlefs2::consts::U16;

    fn read(&mut self, off: usize, buf: &mut [u8]) -> LfsResult<usize> {
        let mut sim = self.dev.borrow_mut();
        for (i, chunk) in buf.chunks_mut(PAGE).enumerate() {
            let page = PageAddr(((off + i * PAGE) / PAGE) as u32);
            sim.read(page, 0, chunk, &mut []).map_err(|_| Error::IO)?;
        }
        Ok(buf.len())
    }

    fn write(&mut self, off: usize, data: &[u8]) -> LfsResult<usize> {
        let mut sim = self.dev.borrow_mut();
        let mut at = off;
        for chunk in data.chunks(512) {
            let page = PageAddr((at / PAGE) as u32);
            sim.program(page, (at % PAGE) as u32, chunk, &[])
                .map_err(|_| Error::IO)?;
            at += chunk.len();
        }
        Ok(data.len())
    }

    fn erase(&mut self, off: usize, len: usize) -> LfsResult<usize> {
        let mut sim = self.dev.borrow_mut();
        for b in off / BLOCK..(off + len) / BLOCK {
            sim.erase(BlockAddr(b as u32)).map_err(|_| Error::IO)?;
        }
        Ok(len)
    }
}

/// littlefs as a benchmark target.
pub struct Littlefs {
    storage: LfsStorage,
}

impl Littlefs {
    /// littlefs over `dev`.
    pub fn new(dev: Device) -> Self {
        Littlefs {
            storage: LfsStorage { dev },
        }
    }
}

fn path(name: &str) -> PathBuf {
    PathBuf::try_from(name).expect("valid path")
}

fn err(e: Error) -> String {
    format!("littlefs error {}", e.code())
}

impl Target for Littlefs {
    fn name(&self) -> &'static str {
        "littlefs2"
    }

    fn device(&self) -> &Device {
        &self.storage.dev
    }

    fn format(&mut self) -> Result<(), String> {
        Filesystem::format(&mut self.storage).map_err(err)
    }

    fn prepare(&mut self, w: Workload, size: usize) -> Result<(), String> {
        let mut alloc = Filesystem::allocate();
        let fs = Filesystem::mount(&mut alloc, &mut self.storage).map_err(err)?;
        match w {
            Workload::Random => {
                let zeros = vec![0u8; size];
                fs.write(&path("random"), &zeros).map_err(err)?;
            }
            Workload::Many => {
                for i in 0..size / CHUNK {
                    fs.write(&path(&format!("m{i}")), &[0u8; CHUNK])
                        .map_err(err)?;
                }
            }
            Workload::Linear | Workload::Logging => {}
        }
        Ok(())
    }

    fn run(
        &mut self,
        w: Workload,
        size: usize,
        rng: &mut Rng,
        go_on: &mut dyn FnMut(u64) -> bool,
    ) -> Result<u64, String> {
        let mut alloc = Filesystem::allocate();
        let fs = Filesystem::mount(&mut alloc, &mut self.storage).map_err(err)?;
        let mut chunk = [0u8; CHUNK];
        let mut written = 0u64;
        let fill = |rng: &mut Rng, chunk: &mut [u8; CHUNK]| {
            let x = rng.next();
            for (i, b) in chunk.iter_mut().enumerate() {
                *b = (x >> (i % 8 * 8)) as u8 ^ i as u8;
            }
            x
        };
        match w {
            Workload::Linear | Workload::Logging => {
                let name = path(if w == Workload::Linear {
                    "linear"
                } else {
                    "log"
                });
                let sync_each = w == Workload::Logging;
                'outer: loop {
                    let done = fs
                        .open_file_with_options_and_then(
                            |o| o.write(true).create(true).truncate(true),
                            &name,
                            |file| {
                                let mut len = 0;
                                while len + CHUNK <= size {
                                    if !go_on(written) {
                                        return Ok(true);
                                    }
                                    fill(rng, &mut chunk);
                                    file.write(&chunk)?;
                                    if sync_each {
                                        file.sync()?;
                                    }
                                    len += CHUNK;
                                    written += CHUNK as u64;
                                }
                                Ok(false)
                            },
                        )
                        .map_err(err)?;
                    if done {
                        break 'outer;
                    }
                }
            }
            Workload::Random => {
                fs.open_file_with_options_and_then(
                    |o| o.read(true).write(true),
                    &path("random"),
                    |file| {
                        while go_on(written) {
                            let x = fill(rng, &mut chunk);
                            let off = (x as usize % (size / CHUNK)) * CHUNK;
                            file.seek(SeekFrom::Start(off as u32))?;
                            file.write(&chunk)?;
                            written += CHUNK as u64;
                        }
                        Ok(())
                    },
                )
                .map_err(err)?;
            }
            Workload::Many => {
                while go_on(written) {
                    let x = fill(rng, &mut chunk);
                    let name = path(&format!("m{}", x as usize % (size / CHUNK)));
                    fs.write(&name, &chunk).map_err(err)?;
                    written += CHUNK as u64;
                }
            }
        }
        // littlefs keeps nothing to write back on unmount: its state is on flash after
        // every operation, so letting `fs` go is the unmount.
        Ok(written)
    }

    fn mount_unmount(&mut self) -> Result<(), String> {
        let mut alloc = Filesystem::allocate();
        Filesystem::mount(&mut alloc, &mut self.storage).map_err(err)?;
        Ok(())
    }
}
