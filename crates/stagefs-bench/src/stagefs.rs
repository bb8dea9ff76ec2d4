//! The file layer (`stagefs-core`) over oftl in its default W25N01GV configuration
//! (4 handles), as a benchmark target, with its staging mechanisms on (the default) or
//! switched off for the ablation rows, or over another oftl configuration (the large
//! one, 12 cached pages). Unmount patches every staged record home, so the final drain is in the figures.

use oftl::{Config, Greedy, W25n01gv};
use stagefs_core::{File, Fs, OpenOptions, SeekFrom, Store, Tuning};

use crate::device::Device;
use crate::oftl::Shared;
use crate::workload::{Handle, Open, Target};

/// The store configuration every target formats with: the default.
pub const CONFIG: Config = Config::new();

/// The bytes of the pages an oftl store holds valid.
pub trait LiveBytes {
    /// Valid pages times the payload per page.
    fn live_bytes(&self) -> u64;
}

impl<
        F: nand_hal::NandFlash,
        P: oftl::SpacePolicy,
        const PAGE: usize,
        const BLOCKS: usize,
        const CACHE: usize,
        const WBUF: usize,
        const META: usize,
        const LOG: usize,
    > LiveBytes for oftl::Oftl<F, PAGE, BLOCKS, CACHE, WBUF, P, META, LOG>
{
    fn live_bytes(&self) -> u64 {
        self.used_pages() * self.payload() as u64
    }
}

/// stagefs as a benchmark target, over oftl store `S`.
pub struct Stagefs<S: Store = W25n01gv<Shared>> {
    dev: Device,
    tuning: Tuning,
    label: &'static str,
    store: fn(Shared) -> S,
    vol: Option<Box<Fs<S, 2048, 4>>>,
    files: Vec<Option<File>>,
}

impl Stagefs {
    /// stagefs over `dev`, as configured by default.
    pub fn new(dev: Device) -> Self {
        Self::tuned(dev, Tuning::DEFAULT, "stagefs")
    }

    /// stagefs over `dev` with `tuning`, reported as `label`.
    pub fn tuned(dev: Device, tuning: Tuning, label: &'static str) -> Self {
        Stagefs {
            tuning,
            ..Self::over(dev, label, |d| W25n01gv::new(d, CONFIG, Greedy::DEFAULT))
        }
    }
}

impl<S: Store> Stagefs<S> {
    /// stagefs over `dev` in its default tuning, on the store `store` builds, reported
    /// as `label`.
    pub fn over(dev: Device, label: &'static str, store: fn(Shared) -> S) -> Self {
        Stagefs {
            dev,
            tuning: Tuning::DEFAULT,
            label,
            store,
            vol: None,
            files: Vec::new(),
        }
    }

    fn volume(&self) -> Box<Fs<S, 2048, 4>> {
        let mut v = Box::new(Fs::new((self.store)(Shared::new(self.dev.clone()))));
        v.set_tuning(self.tuning);
        v
    }

    fn vol(&mut self) -> Result<&mut Fs<S, 2048, 4>, String> {
        self.vol.as_deref_mut().ok_or_else(|| "not mounted".into())
    }

    fn file(&self, f: Handle) -> Result<File, String> {
        self.files
            .get(f)
            .copied()
            .flatten()
            .ok_or_else(|| "bad handle".into())
    }
}

fn err<E: core::fmt::Debug>(e: E) -> String {
    format!("stagefs error {e:?}")
}

impl<S: Store + LiveBytes> Target for Stagefs<S>
where
    S::FlashError: core::fmt::Debug,
{
    fn name(&self) -> String {
        self.label.into()
    }

    fn device(&self) -> &Device {
        &self.dev
    }

    fn format(&mut self) -> Result<(), String> {
        let mut v = self.volume();
        v.format().map_err(err)?;
        v.unmount().map_err(err)
    }

    fn mount(&mut self) -> Result<(), String> {
        let mut v = self.volume();
        v.mount().map_err(err)?;
        self.vol = Some(v);
        self.files.clear();
        Ok(())
    }

    fn unmount(&mut self) -> Result<(), String> {
        let mut v = self.vol.take().ok_or("not mounted")?;
        self.files.clear();
        v.unmount().map_err(err)
    }

    fn live_bytes(&mut self) -> Option<u64> {
        let v = self.vol.as_deref()?;
        Some(v.store().live_bytes())
    }

    fn open(&mut self, path: &str, how: Open) -> Result<Handle, String> {
        let o = OpenOptions::new();
        let o = match how {
            Open::Truncate => o.write(true).create(true).truncate(true),
            Open::ReadWrite => o.read(true).write(true),
            Open::Append => o.write(true).append(true),
            Open::CreateNew => o.write(true).create_new(true),
            Open::Read => o.read(true),
        };
        let f = self.vol()?.open(path, o).map_err(err)?;
        let slot = match self.files.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.files.push(None);
                self.files.len() - 1
            }
        };
        self.files[slot] = Some(f);
        Ok(slot)
    }

    fn write(&mut self, f: Handle, data: &[u8]) -> Result<(), String> {
        let file = self.file(f)?;
        let n = self.vol()?.write(file, data).map_err(err)?;
        if n != data.len() {
            return Err(format!("short write {n} of {}", data.len()));
        }
        Ok(())
    }

    fn seek(&mut self, f: Handle, to: u64) -> Result<(), String> {
        let file = self.file(f)?;
        self.vol()?
            .seek(file, SeekFrom::Start(to))
            .map(drop)
            .map_err(err)
    }

    fn read(&mut self, f: Handle, buf: &mut [u8]) -> Result<usize, String> {
        let file = self.file(f)?;
        self.vol()?.read(file, buf).map_err(err)
    }

    fn fsync(&mut self, f: Handle) -> Result<(), String> {
        let file = self.file(f)?;
        self.vol()?.fsync(file).map_err(err)
    }

    fn close(&mut self, f: Handle) -> Result<(), String> {
        let file = self.file(f)?;
        self.files[f] = None;
        self.vol()?.close(file).map_err(err)
    }

    fn remove(&mut self, path: &str) -> Result<(), String> {
        self.vol()?.remove(path).map_err(err)
    }

    fn create_dir(&mut self, path: &str) -> Result<(), String> {
        self.vol()?.create_dir(path).map_err(err)
    }
}
