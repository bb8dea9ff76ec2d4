//! `oftl` on the simulated NAND, in its default W25N01GV configuration
//! ([`oftl::W25n01gv`]: 12 cached object-table and index pages, 2 write-back buffers;
//! `size_of` = 48,608 B of RAM, no heap; objects are limited by flash, not RAM) with the
//! default 16-block updating window.
//!
//! The workloads map onto the object API as littlefs's file operations do:
//! an append is a `write` at the end, littlefs's `sync` is `flush(obj)`, opening with
//! `O_TRUNC` is `truncate(obj, 0)`, and a littlefs `close` (which makes a file durable) is
//! `flush(obj)`. `random` never flushes (like the littlefs run, which never syncs); every
//! run ends with `unmount`, which programs what is still buffered.

use nand_hal::sim::SimError;
use nand_hal::{BlockAddr, Capabilities, ErrorType, Geometry, NandFlash, PageAddr, ReadReport};
use oftl::{Config, ObjKind, ObjectId, W25n01gv};

use crate::device::Device;
use crate::workload::{Rng, Target, Workload, CHUNK};

/// `NandFlash` over the shared simulator handle: each operation borrows it briefly, so
/// the workload driver can read the clock while the OFTL holds the flash.
pub struct Shared {
    dev: Device,
    geo: Geometry,
    caps: Capabilities,
}

impl Shared {
    /// A handle on `dev`.
    pub fn new(dev: Device) -> Self {
        let (geo, caps) = {
            let d = dev.borrow();
            (d.geometry(), *d.capabilities())
        };
        Shared { dev, geo, caps }
    }
}

impl ErrorType for Shared {
    type Error = SimError;
}

impl NandFlash for Shared {
    fn geometry(&self) -> Geometry {
        self.geo
    }

    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }

    fn read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, SimError> {
        self.dev.borrow_mut().read(page, column, data, oob)
    }

    fn program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), SimError> {
        self.dev.borrow_mut().program(page, column, data, oob)
    }

    fn erase(&mut self, block: BlockAddr) -> Result<(), SimError> {
        self.dev.borrow_mut().erase(block)
    }

    fn is_bad(&mut self, block: BlockAddr) -> Result<bool, SimError> {
        self.dev.borrow_mut().is_bad(block)
    }

    fn mark_bad(&mut self, block: BlockAddr) -> Result<(), SimError> {
        self.dev.borrow_mut().mark_bad(block)
    }
}

type Fs = W25n01gv<Shared>;

/// oftl as a benchmark target.
pub struct Oftl {
    dev: Device,
}

impl Oftl {
    /// oftl over `dev`.
    pub fn new(dev: Device) -> Self {
        Oftl { dev }
    }

    fn mount(&self) -> Result<Fs, String> {
        Fs::mount(Shared::new(self.dev.clone())).map_err(|e| format!("oftl mount: {e:?}"))
    }
}

fn err<E: core::fmt::Debug>(e: E) -> String {
    format!("oftl error {e:?}")
}

impl Target for Oftl {
    fn name(&self) -> &'static str {
        "oftl"
    }

    fn device(&self) -> &Device {
        &self.dev
    }

    fn format(&mut self) -> Result<(), String> {
        let fs = Fs::format(Shared::new(self.dev.clone()), Config::default()).map_err(err)?;
        fs.unmount().map_err(err)?;
        Ok(())
    }

    fn prepare(&mut self, w: Workload, size: usize) -> Result<(), String> {
        let mut fs = self.mount()?;
        match w {
            Workload::Linear | Workload::Logging => {
                fs.create(ObjKind::Object).map_err(err)?;
            }
            Workload::Random => {
                let o = fs.create(ObjKind::Object).map_err(err)?;
                let zeros = vec![0u8; 64 << 10];
                let mut at = 0;
                while at < size {
                    let n = zeros.len().min(size - at);
                    fs.write(o, at as u64, &zeros[..n]).map_err(err)?;
                    at += n;
                }
            }
            Workload::Many => {
                for _ in 0..size / CHUNK {
                    let o = fs.create(ObjKind::Object).map_err(err)?;
                    fs.write(o, 0, &[0u8; CHUNK]).map_err(err)?;
                    fs.flush(o).map_err(err)?;
                }
            }
        }
        fs.unmount().map_err(err)?;
        Ok(())
    }

    fn run(
        &mut self,
        w: Workload,
        size: usize,
        rng: &mut Rng,
        go_on: &mut dyn FnMut(u64) -> bool,
    ) -> Result<u64, String> {
        let mut fs = self.mount()?;
        let objs: Vec<ObjectId> = fs.objects().collect::<Result<_, _>>().map_err(err)?;
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
                let o = *objs.first().ok_or("no object")?;
                let sync_each = w == Workload::Logging;
                'outer: loop {
                    fs.truncate(o, 0).map_err(err)?;
                    let mut len = 0;
                    while len + CHUNK <= size {
                        if !go_on(written) {
                            break 'outer;
                        }
                        fill(rng, &mut chunk);
                        fs.write(o, len as u64, &chunk).map_err(err)?;
                        if sync_each {
                            fs.flush(o).map_err(err)?;
                        }
                        len += CHUNK;
                        written += CHUNK as u64;
                    }
                }
            }
            Workload::Random => {
                let o = *objs.first().ok_or("no object")?;
                while go_on(written) {
                    let x = fill(rng, &mut chunk);
                    let off = (x as usize % (size / CHUNK)) * CHUNK;
                    fs.write(o, off as u64, &chunk).map_err(err)?;
                    written += CHUNK as u64;
                }
            }
            Workload::Many => {
                if objs.is_empty() {
                    return Err("no objects".into());
                }
                while go_on(written) {
                    let x = fill(rng, &mut chunk);
                    let o = objs[x as usize % objs.len()];
                    fs.truncate(o, 0).map_err(err)?;
                    fs.write(o, 0, &chunk).map_err(err)?;
                    fs.flush(o).map_err(err)?;
                    written += CHUNK as u64;
                }
            }
        }
        fs.unmount().map_err(err)?;
        Ok(written)
    }

    fn mount_unmount(&mut self) -> Result<(), String> {
        self.mount()?.unmount().map_err(err)?;
        Ok(())
    }
}
