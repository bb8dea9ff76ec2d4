//! `oftl` on the simulated NAND, in its default W25N01GV configuration
//! ([`oftl::W25n01gv`]: 7 cached object-table and index pages, 2 write-back buffers;
//! 32,504 B of RAM on a Cortex-M4, no heap; objects are limited by flash, not RAM), or
//! its small one ([`oftl::W25n01gvSmall`]: 4 cached 512-byte object-table and index
//! pages, one write-back buffer, no log streams; 16 KiB), with the default 16-block
//! updating window.
//!
//! The file calls map onto the object API as littlefs's do: a path names an object (the
//! map lives in the benchmark, raw oftl has no directories), a write is a `write` at the
//! handle's position, `fsync` and `close` are `flush(obj)`, opening with `O_TRUNC` is
//! `truncate(obj, 0)`, `remove` is `delete`. Unmount programs what is still buffered.

use nand_hal::sim::SimError;
use nand_hal::{
    BlockAddr, Capabilities, ErrorType, Geometry, NandFlash, PageAddr, ReadReport, StepReport,
};
use std::collections::HashMap;

use oftl::{Greedy, ObjKind, ObjectId};

use crate::stagefs::CONFIG;

use crate::device::Device;
use crate::workload::{Handle, Open, Target};

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

    fn read_steps(
        &mut self,
        page: PageAddr,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<StepReport, SimError> {
        self.dev.borrow_mut().read_steps(page, data, oob)
    }

    fn delivers_good_steps(&self) -> bool {
        self.dev.borrow().delivers_good_steps()
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

/// The store: `CACHE` cached object-table and index pages of `META` bytes, `WBUF`
/// write-back buffers, a log tail page of `LOG` bytes (the defaults:
/// [`oftl::W25n01gv`]; `<4, 1, 512, 0>`: [`oftl::W25n01gvSmall`]).
type Fs<const CACHE: usize, const WBUF: usize, const META: usize, const LOG: usize> =
    oftl::Oftl<Shared, 2048, 1024, CACHE, WBUF, Greedy, META, LOG>;

/// An open object: id, position.
#[derive(Clone, Copy)]
struct OpenObj {
    obj: ObjectId,
    pos: u64,
}

/// oftl as a benchmark target, in the store configuration its parameters give
/// (the default: [`oftl::W25n01gv`]).
pub struct Oftl<
    const CACHE: usize = 7,
    const WBUF: usize = 2,
    const META: usize = 2048,
    const LOG: usize = 2048,
> {
    dev: Device,
    label: &'static str,
    fs: Option<Box<Fs<CACHE, WBUF, META, LOG>>>,
    names: HashMap<String, ObjectId>,
    saved_names: HashMap<String, ObjectId>,
    files: Vec<Option<OpenObj>>,
}

impl Oftl {
    /// oftl over `dev`, in the default configuration.
    pub fn new(dev: Device) -> Self {
        Self::labelled(dev, "oftl")
    }
}

impl<const CACHE: usize, const WBUF: usize, const META: usize, const LOG: usize>
    Oftl<CACHE, WBUF, META, LOG>
{
    /// oftl over `dev` in this configuration, reported as `label`.
    pub fn labelled(dev: Device, label: &'static str) -> Self {
        Oftl {
            dev,
            label,
            fs: None,
            names: HashMap::new(),
            saved_names: HashMap::new(),
            files: Vec::new(),
        }
    }

    fn fs(&mut self) -> Result<&mut Fs<CACHE, WBUF, META, LOG>, String> {
        self.fs.as_deref_mut().ok_or_else(|| "not mounted".into())
    }

    fn file(&self, f: Handle) -> Result<OpenObj, String> {
        self.files
            .get(f)
            .copied()
            .flatten()
            .ok_or_else(|| "bad handle".into())
    }

    fn create(&mut self, path: &str) -> Result<ObjectId, String> {
        let o = self.fs()?.create(ObjKind::Object).map_err(err)?;
        self.names.insert(path.into(), o);
        Ok(o)
    }
}

fn err<E: core::fmt::Debug>(e: E) -> String {
    format!("oftl error {e:?}")
}

impl<const CACHE: usize, const WBUF: usize, const META: usize, const LOG: usize> Target
    for Oftl<CACHE, WBUF, META, LOG>
{
    fn name(&self) -> String {
        self.label.into()
    }

    fn device(&self) -> &Device {
        &self.dev
    }

    fn format(&mut self) -> Result<(), String> {
        let mut fs = Box::new(Fs::<CACHE, WBUF, META, LOG>::new(
            Shared::new(self.dev.clone()),
            CONFIG,
            Greedy::DEFAULT,
        ));
        fs.format().map_err(err)?;
        fs.unmount().map_err(err)?;
        self.names.clear();
        Ok(())
    }

    fn mount(&mut self) -> Result<(), String> {
        let mut fs = Box::new(Fs::<CACHE, WBUF, META, LOG>::new(
            Shared::new(self.dev.clone()),
            CONFIG,
            Greedy::DEFAULT,
        ));
        fs.mount().map_err(err)?;
        self.fs = Some(fs);
        self.files.clear();
        Ok(())
    }

    fn unmount(&mut self) -> Result<(), String> {
        let mut fs = self.fs.take().ok_or("not mounted")?;
        self.files.clear();
        fs.unmount().map_err(err)
    }

    fn save_host_state(&mut self) {
        self.saved_names = self.names.clone();
    }

    fn restore_host_state(&mut self) {
        self.names = self.saved_names.clone();
    }

    fn live_bytes(&mut self) -> Option<u64> {
        let fs = self.fs.as_deref()?;
        Some(fs.used_pages() * fs.payload() as u64)
    }

    fn open(&mut self, path: &str, how: Open) -> Result<Handle, String> {
        let known = self.names.get(path).copied();
        let (obj, pos) = match (how, known) {
            (Open::Truncate, Some(o)) => {
                self.fs()?.truncate(o, 0).map_err(err)?;
                (o, 0)
            }
            (Open::Truncate, None) | (Open::CreateNew, None) => (self.create(path)?, 0),
            (Open::CreateNew, Some(_)) => return Err(format!("{path} exists")),
            (Open::Append, Some(o)) => (o, self.fs()?.size(o).map_err(err)?),
            (Open::ReadWrite | Open::Read, Some(o)) => (o, 0),
            (_, None) => return Err(format!("{path} not found")),
        };
        let slot = match self.files.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.files.push(None);
                self.files.len() - 1
            }
        };
        self.files[slot] = Some(OpenObj { obj, pos });
        Ok(slot)
    }

    fn write(&mut self, f: Handle, data: &[u8]) -> Result<(), String> {
        let o = self.file(f)?;
        self.fs()?.write(o.obj, o.pos, data).map_err(err)?;
        self.files[f] = Some(OpenObj {
            pos: o.pos + data.len() as u64,
            ..o
        });
        Ok(())
    }

    fn seek(&mut self, f: Handle, to: u64) -> Result<(), String> {
        let o = self.file(f)?;
        self.files[f] = Some(OpenObj { pos: to, ..o });
        Ok(())
    }

    fn read(&mut self, f: Handle, buf: &mut [u8]) -> Result<usize, String> {
        let o = self.file(f)?;
        let n = self.fs()?.read(o.obj, o.pos, buf).map_err(err)?;
        self.files[f] = Some(OpenObj {
            pos: o.pos + n as u64,
            ..o
        });
        Ok(n)
    }

    fn fsync(&mut self, f: Handle) -> Result<(), String> {
        let o = self.file(f)?;
        self.fs()?.flush(o.obj).map_err(err)
    }

    fn close(&mut self, f: Handle) -> Result<(), String> {
        let o = self.file(f)?;
        self.files[f] = None;
        self.fs()?.flush(o.obj).map_err(err)
    }

    fn remove(&mut self, path: &str) -> Result<(), String> {
        let o = self
            .names
            .remove(path)
            .ok_or_else(|| format!("{path} not found"))?;
        self.fs()?.delete(o).map_err(err)
    }

    fn create_dir(&mut self, _path: &str) -> Result<(), String> {
        Ok(())
    }
}
