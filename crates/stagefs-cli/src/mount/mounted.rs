//! A mounted image as the kernel sees it: inode-numbered operations on the
//! path-addressed file layer, with POSIX errors. Kept apart from the FUSE glue so it
//! can be tested without a kernel.
//!
//! # Open files
//!
//! The file layer allows one handle per file and a fixed table of them; programs open
//! a file many times and many files at once. So the mount keeps at most
//! [`MOUNT_HANDLES`] file-layer handles, one per inode, shared by every FUSE open of
//! that inode and closed (which makes the file durable) when the least recently used
//! one must make room, when the last FUSE open of the inode is released, and before a
//! namespace operation names the file. Closing early only makes data durable sooner.
//!
//! # Durability
//!
//! As the file layer's: `fsync` and `close` (FUSE release) make a file durable;
//! creates, mkdir, unlink, rmdir and rename are durable when they return.
//!
//! # After a failure
//!
//! A power cut inside the simulated part (the `--cut-at` option) leaves the part
//! unpowered: every later operation fails with `EIO`, and unmounting saves the cells
//! as the cut left them. A failure that poisons the volume (RAM ahead of flash)
//! remounts it, which replays the last consistent state; the operation fails with
//! `EIO`.

use std::collections::HashMap;

use fuser::Errno;
use nand_hal::sim::Counters;
use stagefs_core::{Error, File, Kind, OpenOptions, PathError, SeekFrom};

use super::inodes::{self, Inodes};
use crate::image::Sim;
use crate::volume::{self, FsError, MountVol, MOUNT_HANDLES};

/// What the kernel needs to know of an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    /// Inode number.
    pub ino: u64,
    /// File or directory.
    pub kind: Kind,
    /// Size in bytes (writes not yet durable included).
    pub size: u64,
}

/// Space, for `statfs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Space {
    /// Bytes per unit (the page payload).
    pub unit: u32,
    /// Units the user may fill.
    pub total: u64,
    /// Units not holding valid data.
    pub free: u64,
}

/// A cached file-layer handle.
struct Cached {
    file: File,
    used: u64,
}

/// A mounted volume with inode numbers, shared handles and POSIX errors.
pub struct Mounted {
    vol: Box<MountVol>,
    inodes: Inodes,
    cached: HashMap<u64, Cached>,
    users: HashMap<u64, u32>,
    tick: u64,
    read_only: bool,
    dead: bool,
    /// The part's counters when the mount started, and the bytes programs wrote since.
    start: Counters,
    written: u64,
    /// Inodes whose writes not yet durable were dropped (a handle closed to make room
    /// failed, or a failure remounted the volume): the error their next fsync or close
    /// reports.
    lost: HashMap<u64, Errno>,
}

/// Where a file removed while programs still hold it open waits for their last close
/// (in the root; hidden from listings, removed at the next mount if left over).
const UNLINKED: &str = ".stagefs-unlinked-";

/// The POSIX error for a file-layer error.
pub fn errno(e: &FsError) -> Errno {
    match e {
        Error::NotFound => Errno::ENOENT,
        Error::Exists => Errno::EEXIST,
        Error::NotADirectory => Errno::ENOTDIR,
        Error::IsADirectory => Errno::EISDIR,
        Error::NotEmpty => Errno::ENOTEMPTY,
        Error::Busy => Errno::EBUSY,
        Error::TooManyOpen => Errno::EMFILE,
        Error::BadHandle => Errno::EBADF,
        Error::Access => Errno::EBADF,
        Error::TooLarge => Errno::EFBIG,
        Error::NoSpace | Error::DirectoryFull => Errno::ENOSPC,
        Error::ReadOnly => Errno::EROFS,
        Error::Path(PathError::NameTooLong) => Errno::ENAMETOOLONG,
        Error::Path(_) => Errno::EINVAL,
        Error::Flash(_)
        | Error::Corrupted
        | Error::Poisoned
        | Error::Internal
        | Error::NotMounted
        | Error::NotFormatted
        | Error::Mount(_)
        | Error::Format(_) => Errno::EIO,
    }
}

impl Mounted {
    /// Wraps a mounted volume, removing files a previous mount left waiting for their
    /// last close.
    pub fn new(vol: Box<MountVol>, read_only: bool) -> Self {
        let mut m = Self::wrap(vol, read_only);
        if !read_only {
            if let Ok(root) = volume::list(&mut *m.vol, "/") {
                for (name, _) in root.iter().filter(|(n, _)| n.starts_with(UNLINKED)) {
                    let _ = m.vol.remove(&inodes::child("/", name));
                }
            }
        }
        m
    }

    fn wrap(vol: Box<MountVol>, read_only: bool) -> Self {
        let start = vol.store().flash().counters();
        Mounted {
            start,
            written: 0,
            lost: HashMap::new(),
            vol,
            inodes: Inodes::new(),
            cached: HashMap::new(),
            users: HashMap::new(),
            tick: 0,
            read_only,
            dead: false,
        }
    }

    /// The simulated part (to save it).
    pub fn sim(&self) -> &Sim {
        self.vol.store().flash()
    }

    /// What this mount cost the part: bytes written by programs, pages and sectors
    /// programmed, erases, simulated device time and write amplification.
    pub fn report(&self) -> String {
        let c = self.sim().counters();
        let programmed = c.bytes_programmed - self.start.bytes_programmed;
        format!(
            "{} bytes written by programs; the part programmed {} pages ({} partial) and erased {} blocks in {:.3} s of device time (write amplification {:.2})",
            self.written,
            c.programs - self.start.programs,
            c.partial_programs - self.start.partial_programs,
            c.erases - self.start.erases,
            (c.time_ns - self.start.time_ns) as f64 / 1e9,
            if self.written == 0 {
                0.0
            } else {
                programmed as f64 / self.written as f64
            }
        )
    }

    /// Whether a power cut stopped the part.
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// Makes everything durable and unmounts. After a power cut there is nothing to
    /// do: the cells stay as the cut left them.
    pub fn finish(&mut self) -> Result<(), String> {
        if self.dead {
            return Ok(());
        }
        let mut first = self.close_all().err();
        if !self.read_only {
            if let Err(e) = self.vol.unmount() {
                first.get_or_insert(volume::say("unmounting", e));
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// `EIO` once a power cut stopped the part.
    pub fn alive(&self) -> Result<(), Errno> {
        if self.dead {
            Err(Errno::EIO)
        } else {
            Ok(())
        }
    }

    fn writable(&self) -> Result<(), Errno> {
        self.alive()?;
        if self.read_only {
            Err(Errno::EROFS)
        } else {
            Ok(())
        }
    }

    /// The errno for `e`, noting a power cut and remounting a poisoned volume.
    fn failed(&mut self, e: FsError) -> Errno {
        if !self.vol.store().flash().is_powered() {
            self.dead = true;
            self.drop_cached();
        } else if e == Error::Poisoned {
            self.drop_cached();
            if self.vol.mount().is_err() {
                self.dead = true;
            }
        }
        errno(&e)
    }

    /// Forgets every cached handle without closing it (the volume is remounting or
    /// dead): their files' next fsync or close reports `EIO`.
    fn drop_cached(&mut self) {
        for (ino, _) in self.cached.drain() {
            self.lost.insert(ino, Errno::EIO);
        }
    }

    fn path(&self, ino: u64) -> Result<String, Errno> {
        self.inodes
            .path(ino)
            .map(str::to_string)
            .ok_or(Errno::ESTALE)
    }

    fn child(&self, parent: u64, name: &str) -> Result<String, Errno> {
        Ok(inodes::child(&self.path(parent)?, name))
    }

    /// The attributes of `path`, giving it an inode number.
    fn attr_at(&mut self, path: &str) -> Result<Attr, Errno> {
        let m = match self.vol.metadata(path) {
            Ok(m) => m,
            Err(e) => return Err(self.failed(e)),
        };
        let ino = self.inodes.number(path);
        let size = match self.cached.get(&ino) {
            Some(c) => self.vol.len(c.file).unwrap_or(m.size),
            None => m.size,
        };
        Ok(Attr {
            ino,
            kind: m.kind,
            size,
        })
    }

    /// `getattr`.
    pub fn attr(&mut self, ino: u64) -> Result<Attr, Errno> {
        self.alive()?;
        let p = self.path(ino)?;
        self.attr_at(&p)
    }

    /// `lookup`.
    pub fn lookup(&mut self, parent: u64, name: &str) -> Result<Attr, Errno> {
        self.alive()?;
        let p = self.child(parent, name)?;
        self.attr_at(&p)
    }

    /// The file-layer handle of `ino`, opening it (and closing the least recently
    /// used one to make room) if needed.
    fn handle(&mut self, ino: u64) -> Result<File, Errno> {
        self.tick += 1;
        if let Some(c) = self.cached.get_mut(&ino) {
            c.used = self.tick;
            return Ok(c.file);
        }
        let path = self.path(ino)?;
        let o = OpenOptions::new().read(true).write(!self.read_only);
        self.open_cached(ino, &path, o)
    }

    /// Opens `path` as the cached handle of `ino`, closing the least recently used
    /// handle first when the table is full.
    fn open_cached(&mut self, ino: u64, path: &str, o: OpenOptions) -> Result<File, Errno> {
        if self.cached.len() >= MOUNT_HANDLES {
            self.make_room()?;
        }
        match self.vol.open(path, o) {
            Ok(file) => {
                self.tick += 1;
                self.cached.insert(
                    ino,
                    Cached {
                        file,
                        used: self.tick,
                    },
                );
                Ok(file)
            }
            Err(e) => Err(self.failed(e)),
        }
    }

    /// Closes a cached handle to make room: the least recently used one whose file
    /// can be made durable. A handle whose fsync fails stays (its file's own next fsync
    /// or close reports the error); if none can go, the error is this request's.
    fn make_room(&mut self) -> Result<(), Errno> {
        let mut order: Vec<(u64, u64)> = self.cached.iter().map(|(i, c)| (c.used, *i)).collect();
        order.sort_unstable();
        let mut first = None;
        for (_, ino) in order {
            let f = self.cached[&ino].file;
            match self.vol.fsync(f) {
                Ok(()) => return self.close_cached(ino),
                Err(e) => {
                    let e = self.failed(e);
                    if self.dead || !self.cached.contains_key(&ino) {
                        return Err(e);
                    }
                    first.get_or_insert(e);
                }
            }
        }
        Err(first.unwrap_or(Errno::EMFILE))
    }

    /// Closes the cached handle of `ino` (the file becomes durable). A failure is
    /// also kept for the file's next fsync or close.
    fn close_cached(&mut self, ino: u64) -> Result<(), Errno> {
        if let Some(c) = self.cached.remove(&ino) {
            if let Err(e) = self.vol.close(c.file) {
                let e = self.failed(e);
                self.lost.insert(ino, e);
                return Err(e);
            }
        }
        Ok(())
    }

    fn close_path(&mut self, path: &str) -> Result<(), Errno> {
        match self.inodes.known(path) {
            Some(i) => self.close_cached(i),
            None => Ok(()),
        }
    }

    fn close_all(&mut self) -> Result<(), String> {
        let inos: Vec<u64> = self.cached.keys().copied().collect();
        let mut first = Ok(());
        for i in inos {
            if let Err(e) = self.close_cached(i) {
                if first.is_ok() {
                    first = Err(format!("closing inode {i}: {e:?}"));
                }
            }
        }
        first
    }

    /// `open`: counts the open; the file-layer handle is opened on first use. With
    /// `truncate` (`O_TRUNC`) the file is reopened with the file layer's `truncate`
    /// option: it reads as empty at once, and the truncation lands together with the
    /// writes at the next fsync or close (a cut before leaves the old contents).
    pub fn open(&mut self, ino: u64, write: bool, truncate: bool) -> Result<(), Errno> {
        if write || truncate {
            self.writable()?;
        } else {
            self.alive()?;
        }
        let a = self.attr(ino)?;
        if a.kind == Kind::Dir && (write || truncate) {
            return Err(Errno::EISDIR);
        }
        if truncate {
            self.close_cached(ino)?;
            let path = self.path(ino)?;
            let o = OpenOptions::new().read(true).write(true).truncate(true);
            self.open_cached(ino, &path, o)?;
        }
        *self.users.entry(ino).or_default() += 1;
        Ok(())
    }

    /// `release`: the last close of an inode makes it durable (and removes it, if it
    /// was unlinked while open).
    pub fn release(&mut self, ino: u64) -> Result<(), Errno> {
        let n = self.users.entry(ino).or_default();
        *n = n.saturating_sub(1);
        if *n == 0 {
            self.users.remove(&ino);
            self.lost.remove(&ino);
            if !self.dead {
                let r = self.close_cached(ino);
                if let Some(p) = self.inodes.path(ino).map(str::to_string) {
                    if p.starts_with(&format!("/{UNLINKED}")) {
                        if let Err(e) = self.vol.remove(&p) {
                            return Err(self.failed(e));
                        }
                        self.inodes.removed(&p);
                    }
                }
                return r;
            }
        }
        Ok(())
    }

    /// `flush` (each `close(2)`): the file becomes durable, as the file layer's close
    /// makes it, and the error of any write that could not be made durable is
    /// reported here.
    pub fn flush(&mut self, ino: u64) -> Result<(), Errno> {
        self.fsync(ino)
    }

    /// `read`: up to `size` bytes at `offset` (fewer only at the end).
    pub fn read(&mut self, ino: u64, offset: u64, size: usize) -> Result<Vec<u8>, Errno> {
        self.alive()?;
        let f = self.handle(ino)?;
        if let Err(e) = self.vol.seek(f, SeekFrom::Start(offset)) {
            return Err(self.failed(e));
        }
        let mut out = vec![0u8; size];
        let mut at = 0;
        while at < size {
            match self.vol.read(f, &mut out[at..]) {
                Ok(0) => break,
                Ok(n) => at += n,
                Err(e) => return Err(self.failed(e)),
            }
        }
        out.truncate(at);
        Ok(out)
    }

    /// `write`: all of `data` at `offset`.
    pub fn write(&mut self, ino: u64, offset: u64, data: &[u8]) -> Result<usize, Errno> {
        self.writable()?;
        let f = self.handle(ino)?;
        if let Err(e) = self.vol.seek(f, SeekFrom::Start(offset)) {
            return Err(self.failed(e));
        }
        let mut at = 0;
        while at < data.len() {
            match self.vol.write(f, &data[at..]) {
                Ok(n) => at += n,
                Err(e) => return Err(self.failed(e)),
            }
        }
        self.written += at as u64;
        Ok(at)
    }

    /// `setattr` with a size (durable on return).
    pub fn set_size(&mut self, ino: u64, size: u64) -> Result<Attr, Errno> {
        self.writable()?;
        let f = self.handle(ino)?;
        if let Err(e) = self.vol.truncate(f, size) {
            return Err(self.failed(e));
        }
        self.attr(ino)
    }

    /// `fsync`.
    pub fn fsync(&mut self, ino: u64) -> Result<(), Errno> {
        self.alive()?;
        if let Some(e) = self.lost.remove(&ino) {
            return Err(e);
        }
        if let Some(f) = self.cached.get(&ino).map(|c| c.file) {
            if let Err(e) = self.vol.fsync(f) {
                return Err(self.failed(e));
            }
        }
        Ok(())
    }

    /// `create` (and open): `exclusive` for `O_EXCL`, `truncate` for `O_TRUNC`.
    pub fn create(
        &mut self,
        parent: u64,
        name: &str,
        exclusive: bool,
        truncate: bool,
    ) -> Result<Attr, Errno> {
        self.writable()?;
        let path = self.child(parent, name)?;
        self.close_path(&path)?;
        let o = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .create_new(exclusive)
            .truncate(truncate);
        let ino = self.inodes.number(&path);
        self.open_cached(ino, &path, o)?;
        *self.users.entry(ino).or_default() += 1;
        self.attr(ino)
    }

    /// `mkdir`.
    pub fn mkdir(&mut self, parent: u64, name: &str) -> Result<Attr, Errno> {
        self.writable()?;
        let path = self.child(parent, name)?;
        if let Err(e) = self.vol.create_dir(&path) {
            return Err(self.failed(e));
        }
        self.attr_at(&path)
    }

    /// `unlink`. A file that programs still hold open is renamed to a hidden name in
    /// the root and removed at their last close (the next mount removes it if the
    /// mount ends first), so their reads and writes go on working.
    pub fn unlink(&mut self, parent: u64, name: &str) -> Result<(), Errno> {
        self.writable()?;
        let path = self.child(parent, name)?;
        self.close_path(&path)?;
        if let Some(ino) = self.inodes.known(&path) {
            if self.users.get(&ino).copied().unwrap_or(0) > 0 {
                match self.vol.metadata(&path) {
                    Ok(m) if m.kind == Kind::Dir => return Err(Errno::EISDIR),
                    Ok(_) => {}
                    Err(e) => return Err(self.failed(e)),
                }
                let hidden = format!("/{UNLINKED}{ino}");
                if let Err(e) = self.vol.rename(&path, &hidden) {
                    return Err(self.failed(e));
                }
                self.inodes.renamed(&path, &hidden);
                return Ok(());
            }
        }
        if let Err(e) = self.vol.remove(&path) {
            return Err(self.failed(e));
        }
        self.inodes.removed(&path);
        Ok(())
    }

    /// `rmdir`.
    pub fn rmdir(&mut self, parent: u64, name: &str) -> Result<(), Errno> {
        self.writable()?;
        let path = self.child(parent, name)?;
        if let Err(e) = self.vol.remove_dir(&path) {
            return Err(self.failed(e));
        }
        self.inodes.removed(&path);
        Ok(())
    }

    /// `rename`, replacing the target unless `no_replace`.
    pub fn rename(
        &mut self,
        parent: u64,
        name: &str,
        new_parent: u64,
        new_name: &str,
        no_replace: bool,
    ) -> Result<(), Errno> {
        self.writable()?;
        let from = self.child(parent, name)?;
        let to = self.child(new_parent, new_name)?;
        if no_replace {
            match self.vol.metadata(&to) {
                Ok(_) => return Err(Errno::EEXIST),
                Err(Error::NotFound) => {}
                Err(e) => return Err(self.failed(e)),
            }
        }
        self.close_path(&from)?;
        self.close_path(&to)?;
        if let Err(e) = self.vol.rename(&from, &to) {
            return Err(self.failed(e));
        }
        self.inodes.renamed(&from, &to);
        Ok(())
    }

    /// `readdir`: every entry of a directory with its inode number.
    pub fn list(&mut self, ino: u64) -> Result<Vec<(u64, String, Kind)>, Errno> {
        self.alive()?;
        let path = self.path(ino)?;
        let entries = match volume::list(&mut *self.vol, &path) {
            Ok(v) => v,
            Err(e) => return Err(self.failed(e)),
        };
        Ok(entries
            .into_iter()
            .filter(|(name, _)| path != "/" || !name.starts_with(UNLINKED))
            .map(|(name, kind)| {
                let i = self.inodes.number(&inodes::child(&path, &name));
                (i, name, kind)
            })
            .collect())
    }

    /// `statfs`.
    pub fn space(&self) -> Result<Space, Errno> {
        self.alive()?;
        Ok(self.space_now())
    }

    fn space_now(&self) -> Space {
        let store = self.vol.store();
        let used: u64 = store.blocks().iter().map(|b| b.valid() as u64).sum();
        let total = store.capacity_pages();
        Space {
            unit: store.payload(),
            total,
            free: total.saturating_sub(used),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::part;
    use stagefs_core::Fs;

    fn fresh() -> Mounted {
        let profile = part::by_name("tiny").unwrap();
        let mut vol = Box::new(Fs::new(volume::store(crate::image::blank(&profile))));
        vol.format().unwrap();
        Mounted::new(vol, false)
    }

    fn remounted(m: Mounted) -> Mounted {
        let mut m = m;
        m.finish().unwrap();
        let mut vol = m.vol;
        vol.mount().unwrap();
        Mounted::new(vol, false)
    }

    #[test]
    fn files_written_through_inodes_read_back_after_a_remount() {
        let mut m = fresh();
        let d = m.mkdir(inodes::ROOT, "d").unwrap();
        let f = m.create(d.ino, "f", true, false).unwrap();
        assert_eq!(m.write(f.ino, 0, b"hello").unwrap(), 5);
        assert_eq!(m.write(f.ino, 3000, b"tail").unwrap(), 4);
        assert_eq!(
            m.attr(f.ino).unwrap().size,
            3004,
            "size includes writes not yet durable"
        );
        assert_eq!(m.read(f.ino, 0, 8).unwrap(), b"hello\0\0\0");
        m.release(f.ino).unwrap();
        let mut m = remounted(m);
        let d = m.lookup(inodes::ROOT, "d").unwrap();
        let f = m.lookup(d.ino, "f").unwrap();
        assert_eq!(f.size, 3004);
        assert_eq!(m.read(f.ino, 2998, 100).unwrap(), b"\0\0tail");
        let names: Vec<String> = m.list(d.ino).unwrap().into_iter().map(|e| e.1).collect();
        assert_eq!(names, ["f"]);
    }

    #[test]
    fn posix_errors_are_the_faithful_ones() {
        let mut m = fresh();
        let d = m.mkdir(inodes::ROOT, "d").unwrap();
        let f = m.create(d.ino, "f", true, false).unwrap();
        m.release(f.ino).unwrap();
        assert_eq!(m.lookup(inodes::ROOT, "nope"), Err(Errno::ENOENT));
        assert_eq!(m.mkdir(inodes::ROOT, "d").map(|_| ()), Err(Errno::EEXIST));
        assert_eq!(
            m.create(d.ino, "f", true, false).map(|_| ()),
            Err(Errno::EEXIST)
        );
        assert_eq!(m.rmdir(inodes::ROOT, "d"), Err(Errno::ENOTEMPTY));
        assert_eq!(m.unlink(inodes::ROOT, "d"), Err(Errno::EISDIR));
        let long = "n".repeat(stagefs_core::NAME_MAX + 1);
        assert_eq!(
            m.mkdir(inodes::ROOT, &long).map(|_| ()),
            Err(Errno::ENAMETOOLONG)
        );
        assert_eq!(m.mkdir(f.ino, "x").map(|_| ()), Err(Errno::ENOTDIR));
        assert_eq!(
            m.rename(inodes::ROOT, "d", d.ino, "sub", false),
            Err(Errno::EINVAL),
            "a directory into itself"
        );
        let g = m.create(inodes::ROOT, "g", true, false).unwrap();
        m.release(g.ino).unwrap();
        assert_eq!(
            m.rename(inodes::ROOT, "g", d.ino, "f", true),
            Err(Errno::EEXIST)
        );
        m.rename(inodes::ROOT, "g", d.ino, "f", false).unwrap();
        assert_eq!(
            m.attr(f.ino),
            Err(Errno::ESTALE),
            "the replaced file's inode is gone"
        );
        assert_eq!(
            m.attr(g.ino).unwrap().kind,
            Kind::File,
            "the moved one keeps its inode"
        );
        // Fill the part: ENOSPC, and what was there is intact.
        let big = m.create(inodes::ROOT, "big", true, false).unwrap();
        let chunk = vec![0x5a; 64 * 1024];
        let mut at = 0;
        let e = loop {
            match m.write(big.ino, at, &chunk).and_then(|_| m.fsync(big.ino)) {
                Ok(()) => at += chunk.len() as u64,
                Err(e) => break e,
            }
            assert!(at < 64 << 20, "the test part never filled");
        };
        assert_eq!(e, Errno::ENOSPC);
        m.unlink(inodes::ROOT, "big").unwrap();
        assert_eq!(m.lookup(d.ino, "f").unwrap().ino, g.ino);
    }

    #[test]
    fn more_open_files_than_handles_share_the_table() {
        let mut m = fresh();
        let n = MOUNT_HANDLES * 2 + 3;
        let files: Vec<u64> = (0..n)
            .map(|i| {
                m.create(inodes::ROOT, &format!("f{i}"), true, false)
                    .unwrap()
                    .ino
            })
            .collect();
        for round in 0..3u8 {
            for (i, &f) in files.iter().enumerate() {
                m.write(f, round as u64 * 10, &[round + i as u8; 10])
                    .unwrap();
            }
        }
        for (i, &f) in files.iter().enumerate() {
            let d = m.read(f, 0, 30).unwrap();
            assert_eq!(
                d,
                [[i as u8; 10], [1 + i as u8; 10], [2 + i as u8; 10]].concat()
            );
            m.release(f).unwrap();
        }
        let mut m = remounted(m);
        for i in 0..n {
            let a = m.lookup(inodes::ROOT, &format!("f{i}")).unwrap();
            assert_eq!(a.size, 30);
        }
    }

    #[test]
    fn o_trunc_lands_with_the_next_fsync_and_a_cut_before_keeps_the_old_contents() {
        let mut m = fresh();
        let f = m.create(inodes::ROOT, "cfg", true, false).unwrap();
        m.write(f.ino, 0, &[7u8; 3000]).unwrap();
        m.release(f.ino).unwrap();
        m.open(f.ino, true, true).unwrap();
        assert_eq!(m.attr(f.ino).unwrap().size, 0, "reads as empty at once");
        m.write(f.ino, 0, b"new").unwrap();
        // The power goes before the fsync.
        m.vol.store_mut().flash_mut().cut_power();
        assert_eq!(m.fsync(f.ino), Err(Errno::EIO));
        assert!(m.is_dead());
        assert_eq!(m.lookup(inodes::ROOT, "cfg").map(|_| ()), Err(Errno::EIO));
        m.finish().unwrap();
        let mut vol = m.vol;
        vol.store_mut().flash_mut().power_on();
        vol.mount().unwrap();
        let mut m = Mounted::new(vol, false);
        let a = m.lookup(inodes::ROOT, "cfg").unwrap();
        assert_eq!(m.read(a.ino, 0, 4000).unwrap(), vec![7u8; 3000]);
    }

    #[test]
    fn a_read_only_mount_refuses_every_change() {
        let mut m = fresh();
        let f = m.create(inodes::ROOT, "f", true, false).unwrap();
        m.write(f.ino, 0, b"keep").unwrap();
        m.release(f.ino).unwrap();
        m.finish().unwrap();
        let mut vol = m.vol;
        vol.mount().unwrap();
        let mut m = Mounted::new(vol, true);
        let f = m.lookup(inodes::ROOT, "f").unwrap();
        assert_eq!(m.open(f.ino, true, false), Err(Errno::EROFS));
        assert_eq!(m.write(f.ino, 0, b"x"), Err(Errno::EROFS));
        assert_eq!(
            m.create(inodes::ROOT, "g", false, false).map(|_| ()),
            Err(Errno::EROFS)
        );
        assert_eq!(m.unlink(inodes::ROOT, "f"), Err(Errno::EROFS));
        m.open(f.ino, false, false).unwrap();
        assert_eq!(m.read(f.ino, 0, 10).unwrap(), b"keep");
        m.release(f.ino).unwrap();
    }

    /// Fills the test part with one file, leaving it almost full.
    fn filled(m: &mut Mounted) {
        let big = m.create(inodes::ROOT, "big", true, false).unwrap();
        let mut at = 0;
        loop {
            let r = m
                .write(big.ino, at, &[0xab; 2048])
                .and_then(|_| m.fsync(big.ino));
            if let Err(e) = r {
                assert_eq!(e, Errno::ENOSPC, "filled up to {at}");
                break;
            }
            at += 2048;
        }
        m.release(big.ino).ok();
    }

    #[test]
    fn on_a_full_volume_close_reports_what_could_not_be_made_durable() {
        let mut m = fresh();
        filled(&mut m);
        let r = m.create(inodes::ROOT, "note", false, false).and_then(|f| {
            m.write(f.ino, 0, &[7u8; 600])?;
            m.flush(f.ino)
        });
        assert_eq!(
            r,
            Err(Errno::ENOSPC),
            "some step must say so; close must not claim success"
        );
    }

    #[test]
    fn a_handle_closed_to_make_room_never_loses_another_files_data_silently() {
        let mut m = fresh();
        // Files made first, then the part filled: their data has little room left.
        let files: Vec<u64> = (0..MOUNT_HANDLES + 2)
            .map(|i| {
                let a = m
                    .create(inodes::ROOT, &format!("f{i}"), true, false)
                    .unwrap();
                m.release(a.ino).unwrap();
                a.ino
            })
            .collect();
        filled(&mut m);
        // More files with unsynced data than the handle table holds.
        for &f in &files {
            m.open(f, true, false).unwrap();
        }
        let mut written = Vec::new();
        for (i, &f) in files.iter().enumerate() {
            let data = format!("precious {i} {}", "x".repeat(40 + 700 * i));
            if m.write(f, 0, data.as_bytes()).is_ok() {
                written.push((f, data.len() as u64));
            }
        }
        assert!(!written.is_empty(), "some writes fit");
        // A write refused for room writes nothing; a write accepted and then fsynced
        // must be there after the remount, whichever handles were closed meanwhile.
        let mut durable = Vec::new();
        for &(f, len) in &written {
            if m.fsync(f).is_ok() {
                durable.push((m.path(f).unwrap(), len));
            }
        }
        for &f in &files {
            let _ = m.release(f);
        }
        let mut m = remounted(m);
        for (n, len) in durable {
            let a = m.lookup(inodes::ROOT, &n[1..]).unwrap();
            assert_eq!(a.size, len, "{n}: fsync said durable");
            assert!(
                m.read(a.ino, 0, 64).unwrap().starts_with(b"precious"),
                "{n}"
            );
        }
    }

    #[test]
    fn a_file_unlinked_while_open_reads_until_its_last_close() {
        let mut m = fresh();
        let f = m.create(inodes::ROOT, "tmp", true, false).unwrap();
        m.write(f.ino, 0, b"scratch").unwrap();
        m.unlink(inodes::ROOT, "tmp").unwrap();
        assert_eq!(m.lookup(inodes::ROOT, "tmp"), Err(Errno::ENOENT));
        assert!(
            m.list(inodes::ROOT).unwrap().is_empty(),
            "hidden from listings"
        );
        m.write(f.ino, 7, b" more").unwrap();
        assert_eq!(m.read(f.ino, 0, 64).unwrap(), b"scratch more");
        m.release(f.ino).unwrap();
        assert_eq!(m.attr(f.ino), Err(Errno::ESTALE));
        let names = volume::list(&mut *m.vol, "/").unwrap();
        assert!(names.is_empty(), "removed at the last close: {names:?}");
        // Left over by a mount that ended first: the next mount removes it.
        let g = m.create(inodes::ROOT, "g", true, false).unwrap();
        m.unlink(inodes::ROOT, "g").unwrap();
        let m = remounted(m);
        let mut vol = m.vol;
        assert!(volume::list(&mut *vol, "/").unwrap().is_empty());
        let _ = g;
    }
}
