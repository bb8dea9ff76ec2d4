//! littlefs v2 (the C library of `littlefs2-sys`, littlefs 2.9) on the simulated NAND,
//! configured as the littlefs-benchmarks NAND runs publish it
//! (`shared/reference/perf-reliability.md` 1.2): read size 1, 512 B programs and
//! cache, 16 B lookahead, `block_cycles` 100, on-disk version 2.1, 128 KiB blocks, and
//! the published warm-up (a one-block file written `2 x block_count` times) before each
//! workload.
//!
//! The `littlefs2` crate pins on-disk version 2.0 and a whole-page read size, so this
//! target calls the C API directly.
#![allow(unsafe_code)]

use std::ffi::{c_int, c_void, CString};

use littlefs2_sys as ll;
use nand_hal::{BlockAddr, NandFlash, PageAddr};

use crate::device::Device;
use crate::workload::{Handle, Open, Target};

const PAGE: usize = 2048;
const BLOCK: usize = 64 * PAGE;
const BLOCKS: usize = 1024;
/// The published program and cache size (one W25N01GV sector).
const CACHE: usize = 512;
/// littlefs error codes this adapter returns.
const LFS_ERR_IO: c_int = -5;

/// What the callbacks reach through `lfs_config::context`.
struct Ctx {
    dev: Device,
}

/// An open file with its own cache buffer (littlefs is built without malloc).
struct LfsFile {
    file: ll::lfs_file_t,
    cfg: ll::lfs_file_config,
    buf: [u8; CACHE],
}

/// littlefs as a benchmark target.
pub struct Littlefs {
    ctx: Box<Ctx>,
    cfg: Box<ll::lfs_config>,
    lfs: Box<ll::lfs_t>,
    read_buf: Box<[u8; CACHE]>,
    prog_buf: Box<[u8; CACHE]>,
    look_buf: Box<[u64; 2]>,
    mounted: bool,
    files: Vec<Option<Box<LfsFile>>>,
}

unsafe extern "C" fn lfs_read(
    c: *const ll::lfs_config,
    block: ll::lfs_block_t,
    off: ll::lfs_off_t,
    buffer: *mut c_void,
    size: ll::lfs_size_t,
) -> c_int {
    // SAFETY: littlefs passes back the config this target built, whose context is the
    // boxed `Ctx` that outlives every call, and a buffer of `size` bytes it owns.
    let (ctx, buf) = unsafe {
        (
            &*((*c).context as *const Ctx),
            std::slice::from_raw_parts_mut(buffer as *mut u8, size as usize),
        )
    };
    let mut sim = ctx.dev.borrow_mut();
    let mut at = block as usize * BLOCK + off as usize;
    let mut done = 0;
    while done < buf.len() {
        let col = at % PAGE;
        let n = (PAGE - col).min(buf.len() - done);
        let page = PageAddr((at / PAGE) as u32);
        if sim
            .read(page, col as u32, &mut buf[done..done + n], &mut [])
            .is_err()
        {
            return LFS_ERR_IO;
        }
        done += n;
        at += n;
    }
    0
}

unsafe extern "C" fn lfs_prog(
    c: *const ll::lfs_config,
    block: ll::lfs_block_t,
    off: ll::lfs_off_t,
    buffer: *const c_void,
    size: ll::lfs_size_t,
) -> c_int {
    // SAFETY: as in `lfs_read`; the buffer holds `size` bytes to program.
    let (ctx, data) = unsafe {
        (
            &*((*c).context as *const Ctx),
            std::slice::from_raw_parts(buffer as *const u8, size as usize),
        )
    };
    let mut sim = ctx.dev.borrow_mut();
    let mut at = block as usize * BLOCK + off as usize;
    let mut done = 0;
    while done < data.len() {
        let col = at % PAGE;
        let n = (PAGE - col).min(data.len() - done);
        let page = PageAddr((at / PAGE) as u32);
        if sim
            .program(page, col as u32, &data[done..done + n], &[])
            .is_err()
        {
            return LFS_ERR_IO;
        }
        done += n;
        at += n;
    }
    0
}

unsafe extern "C" fn lfs_erase(c: *const ll::lfs_config, block: ll::lfs_block_t) -> c_int {
    // SAFETY: as in `lfs_read`.
    let ctx = unsafe { &*((*c).context as *const Ctx) };
    match ctx.dev.borrow_mut().erase(BlockAddr(block)) {
        Ok(()) => 0,
        Err(_) => LFS_ERR_IO,
    }
}

unsafe extern "C" fn lfs_sync(_c: *const ll::lfs_config) -> c_int {
    0
}

fn check(what: &str, r: c_int) -> Result<c_int, String> {
    if r < 0 {
        Err(format!("littlefs {what}: error {r}"))
    } else {
        Ok(r)
    }
}

fn c_path(p: &str) -> Result<CString, String> {
    CString::new(p).map_err(|e| e.to_string())
}

impl Littlefs {
    /// littlefs over `dev`, configured as published.
    pub fn new(dev: Device) -> Self {
        let mut t = Littlefs {
            ctx: Box::new(Ctx { dev }),
            // SAFETY: `lfs_config` is plain C data (pointers, integers, optional function
            // pointers) for which all-zero is valid; every field used is set below.
            cfg: Box::new(unsafe { std::mem::zeroed() }),
            // SAFETY: `lfs_t` is plain C state that `lfs_format`/`lfs_mount` initialise;
            // all-zero is a valid value of it.
            lfs: Box::new(unsafe { std::mem::zeroed() }),
            read_buf: Box::new([0; CACHE]),
            prog_buf: Box::new([0; CACHE]),
            look_buf: Box::new([0; 2]),
            mounted: false,
            files: Vec::new(),
        };
        let c = &mut *t.cfg;
        c.context = &*t.ctx as *const Ctx as *mut c_void;
        c.read = Some(lfs_read);
        c.prog = Some(lfs_prog);
        c.erase = Some(lfs_erase);
        c.sync = Some(lfs_sync);
        c.read_size = 1;
        c.prog_size = CACHE as u32;
        c.block_size = BLOCK as u32;
        c.block_count = BLOCKS as u32;
        c.block_cycles = 100;
        c.cache_size = CACHE as u32;
        c.lookahead_size = 16;
        c.read_buffer = t.read_buf.as_mut_ptr() as *mut c_void;
        c.prog_buffer = t.prog_buf.as_mut_ptr() as *mut c_void;
        c.lookahead_buffer = t.look_buf.as_mut_ptr() as *mut c_void;
        c.disk_version = 0x0002_0001;
        t
    }

    fn file(&mut self, f: Handle) -> Result<*mut ll::lfs_file_t, String> {
        match self.files.get_mut(f) {
            Some(Some(b)) => Ok(&mut b.file),
            _ => Err("bad handle".into()),
        }
    }

    fn lfs(&mut self) -> Result<*mut ll::lfs_t, String> {
        if self.mounted {
            Ok(&mut *self.lfs)
        } else {
            Err("not mounted".into())
        }
    }
}

impl Drop for Littlefs {
    fn drop(&mut self) {
        if self.mounted {
            let _ = self.unmount();
        }
    }
}

impl Target for Littlefs {
    fn name(&self) -> String {
        "littlefs2".into()
    }

    fn device(&self) -> &Device {
        &self.ctx.dev
    }

    fn format(&mut self) -> Result<(), String> {
        // SAFETY: `lfs` and `cfg` are boxed (stable addresses) and the config's buffers
        // and context live as long as `self`.
        check("format", unsafe {
            ll::lfs_format(&mut *self.lfs, &*self.cfg)
        })
        .map(drop)
    }

    fn warm_up(&mut self) -> Result<(), String> {
        self.mount()?;
        let block = vec![0x5Au8; BLOCK];
        for _ in 0..2 * BLOCKS {
            let f = self.open("/warmup", Open::Truncate)?;
            self.write(f, &block)?;
            self.close(f)?;
        }
        self.remove("/warmup")?;
        self.unmount()
    }

    fn mount(&mut self) -> Result<(), String> {
        // SAFETY: as in `format`.
        check("mount", unsafe {
            ll::lfs_mount(&mut *self.lfs, &*self.cfg)
        })?;
        self.mounted = true;
        self.files.clear();
        Ok(())
    }

    fn unmount(&mut self) -> Result<(), String> {
        for f in 0..self.files.len() {
            if self.files[f].is_some() {
                self.close(f)?;
            }
        }
        self.mounted = false;
        // SAFETY: `lfs` was mounted with `cfg`; no file is open any more.
        check("unmount", unsafe { ll::lfs_unmount(&mut *self.lfs) }).map(drop)
    }

    fn live_bytes(&mut self) -> Option<u64> {
        let lfs = self.lfs().ok()?;
        // SAFETY: a mounted littlefs.
        let blocks = unsafe { ll::lfs_fs_size(lfs) };
        (blocks >= 0).then(|| blocks as u64 * BLOCK as u64)
    }

    fn open(&mut self, path: &str, how: Open) -> Result<Handle, String> {
        let lfs = self.lfs()?;
        let flags = match how {
            Open::Truncate => {
                ll::lfs_open_flags_LFS_O_WRONLY
                    | ll::lfs_open_flags_LFS_O_CREAT
                    | ll::lfs_open_flags_LFS_O_TRUNC
            }
            Open::ReadWrite => ll::lfs_open_flags_LFS_O_RDWR,
            Open::Append => ll::lfs_open_flags_LFS_O_WRONLY | ll::lfs_open_flags_LFS_O_APPEND,
            Open::CreateNew => {
                ll::lfs_open_flags_LFS_O_WRONLY
                    | ll::lfs_open_flags_LFS_O_CREAT
                    | ll::lfs_open_flags_LFS_O_EXCL
            }
            Open::Read => ll::lfs_open_flags_LFS_O_RDONLY,
        };
        // SAFETY: `lfs_file_t` and `lfs_file_config` are plain C data, all-zero valid.
        let mut b: Box<LfsFile> = Box::new(unsafe { std::mem::zeroed() });
        b.cfg.buffer = b.buf.as_mut_ptr() as *mut c_void;
        let p = c_path(path)?;
        // SAFETY: the boxed file, its config and buffer stay put until it is closed
        // (`close` removes it from `files` only after `lfs_file_close`).
        check("open", unsafe {
            ll::lfs_file_opencfg(lfs, &mut b.file, p.as_ptr(), flags as c_int, &b.cfg)
        })?;
        let slot = match self.files.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.files.push(None);
                self.files.len() - 1
            }
        };
        self.files[slot] = Some(b);
        Ok(slot)
    }

    fn write(&mut self, f: Handle, data: &[u8]) -> Result<(), String> {
        let (lfs, file) = (self.lfs()?, self.file(f)?);
        // SAFETY: an open file of the mounted littlefs; `data` is valid for its length.
        let n = check("write", unsafe {
            ll::lfs_file_write(lfs, file, data.as_ptr() as *const c_void, data.len() as u32)
        })?;
        if n as usize != data.len() {
            return Err(format!("littlefs short write {n}"));
        }
        Ok(())
    }

    fn seek(&mut self, f: Handle, to: u64) -> Result<(), String> {
        let (lfs, file) = (self.lfs()?, self.file(f)?);
        // SAFETY: as in `write`.
        check("seek", unsafe {
            ll::lfs_file_seek(
                lfs,
                file,
                to as i32,
                ll::lfs_whence_flags_LFS_SEEK_SET as c_int,
            )
        })
        .map(drop)
    }

    fn read(&mut self, f: Handle, buf: &mut [u8]) -> Result<usize, String> {
        let (lfs, file) = (self.lfs()?, self.file(f)?);
        // SAFETY: as in `write`; `buf` is valid for writes of its length.
        check("read", unsafe {
            ll::lfs_file_read(lfs, file, buf.as_mut_ptr() as *mut c_void, buf.len() as u32)
        })
        .map(|n| n as usize)
    }

    fn fsync(&mut self, f: Handle) -> Result<(), String> {
        let (lfs, file) = (self.lfs()?, self.file(f)?);
        // SAFETY: as in `write`.
        check("sync", unsafe { ll::lfs_file_sync(lfs, file) }).map(drop)
    }

    fn close(&mut self, f: Handle) -> Result<(), String> {
        let (lfs, file) = (self.lfs()?, self.file(f)?);
        // SAFETY: as in `write`; the file is not used again after this.
        let r = unsafe { ll::lfs_file_close(lfs, file) };
        self.files[f] = None;
        check("close", r).map(drop)
    }

    fn remove(&mut self, path: &str) -> Result<(), String> {
        let lfs = self.lfs()?;
        let p = c_path(path)?;
        // SAFETY: a mounted littlefs and a NUL-terminated path.
        check("remove", unsafe { ll::lfs_remove(lfs, p.as_ptr()) }).map(drop)
    }

    fn create_dir(&mut self, path: &str) -> Result<(), String> {
        let lfs = self.lfs()?;
        let p = c_path(path)?;
        // SAFETY: as in `remove`.
        check("mkdir", unsafe { ll::lfs_mkdir(lfs, p.as_ptr()) }).map(drop)
    }
}
