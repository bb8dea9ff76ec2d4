//! The file layer (`stagefs-core`) over oftl in its default W25N01GV configuration, as
//! a benchmark target: the workloads are file operations, mapped as the littlefs run maps
//! them (`linear`: append, reopen with truncate at the target size; `random`: writes at
//! random offsets, never synced; `logging`: append + `fsync`; `many`: open with truncate,
//! write, close). Every run ends with `unmount`.

use oftl::{Config, W25n01gv};
use stagefs_core::{Fs, OpenOptions, SeekFrom};

use crate::device::Device;
use crate::oftl::Shared;
use crate::workload::{Rng, Target, Workload, CHUNK};

type Vol = Fs<W25n01gv<Shared>, 2048, 4>;

/// stagefs as a benchmark target.
pub struct Stagefs {
    dev: Device,
}

impl Stagefs {
    /// stagefs over `dev`.
    pub fn new(dev: Device) -> Self {
        Stagefs { dev }
    }

    fn volume(&self) -> Box<Vol> {
        Box::new(Fs::new(W25n01gv::new(Shared::new(self.dev.clone()))))
    }

    fn mount(&self) -> Result<Box<Vol>, String> {
        let mut v = self.volume();
        v.mount().map_err(err)?;
        Ok(v)
    }
}

fn err<E: core::fmt::Debug>(e: E) -> String {
    format!("stagefs error {e:?}")
}

fn many_name(i: usize) -> String {
    format!("/many/f{i:05}")
}

impl Target for Stagefs {
    fn name(&self) -> &'static str {
        "stagefs"
    }

    fn device(&self) -> &Device {
        &self.dev
    }

    fn format(&mut self) -> Result<(), String> {
        let mut v = self.volume();
        v.format(Config::default()).map_err(err)?;
        v.unmount().map_err(err)
    }

    fn prepare(&mut self, w: Workload, size: usize) -> Result<(), String> {
        let mut v = self.mount()?;
        let create = OpenOptions::new().write(true).create(true).truncate(true);
        match w {
            Workload::Linear | Workload::Logging => {
                let f = v.open("/file", create).map_err(err)?;
                v.close(f).map_err(err)?;
            }
            Workload::Random => {
                let f = v.open("/file", create).map_err(err)?;
                let zeros = vec![0u8; 64 << 10];
                let mut at = 0;
                while at < size {
                    let n = zeros.len().min(size - at);
                    v.write(f, &zeros[..n]).map_err(err)?;
                    at += n;
                }
                v.close(f).map_err(err)?;
            }
            Workload::Many => {
                v.create_dir("/many").map_err(err)?;
                for i in 0..size / CHUNK {
                    let f = v.open(&many_name(i), create).map_err(err)?;
                    v.write(f, &[0u8; CHUNK]).map_err(err)?;
                    v.close(f).map_err(err)?;
                }
            }
        }
        v.unmount().map_err(err)
    }

    fn run(
        &mut self,
        w: Workload,
        size: usize,
        rng: &mut Rng,
        go_on: &mut dyn FnMut(u64) -> bool,
    ) -> Result<u64, String> {
        let mut v = self.mount()?;
        let mut chunk = [0u8; CHUNK];
        let mut written = 0u64;
        let fill = |rng: &mut Rng, chunk: &mut [u8; CHUNK]| {
            let x = rng.next();
            for (i, b) in chunk.iter_mut().enumerate() {
                *b = (x >> (i % 8 * 8)) as u8 ^ i as u8;
            }
            x
        };
        let rewrite = OpenOptions::new().write(true).truncate(true);
        match w {
            Workload::Linear | Workload::Logging => {
                let sync_each = w == Workload::Logging;
                'outer: loop {
                    let f = v.open("/file", rewrite).map_err(err)?;
                    let mut len = 0;
                    while len + CHUNK <= size {
                        if !go_on(written) {
                            v.close(f).map_err(err)?;
                            break 'outer;
                        }
                        fill(rng, &mut chunk);
                        v.write(f, &chunk).map_err(err)?;
                        if sync_each {
                            v.fsync(f).map_err(err)?;
                        }
                        len += CHUNK;
                        written += CHUNK as u64;
                    }
                    v.close(f).map_err(err)?;
                }
            }
            Workload::Random => {
                let f = v
                    .open("/file", OpenOptions::new().write(true))
                    .map_err(err)?;
                while go_on(written) {
                    let x = fill(rng, &mut chunk);
                    let off = (x as usize % (size / CHUNK)) * CHUNK;
                    v.seek(f, SeekFrom::Start(off as u64)).map_err(err)?;
                    v.write(f, &chunk).map_err(err)?;
                    written += CHUNK as u64;
                }
                v.close(f).map_err(err)?;
            }
            Workload::Many => {
                let n = size / CHUNK;
                while go_on(written) {
                    let x = fill(rng, &mut chunk);
                    let f = v.open(&many_name(x as usize % n), rewrite).map_err(err)?;
                    v.write(f, &chunk).map_err(err)?;
                    v.close(f).map_err(err)?;
                    written += CHUNK as u64;
                }
            }
        }
        v.unmount().map_err(err)?;
        Ok(written)
    }

    fn mount_unmount(&mut self) -> Result<(), String> {
        self.mount()?.unmount().map_err(err)
    }
}
