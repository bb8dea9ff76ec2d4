//! `stagefs mount`: an image as a FUSE file system (the `fuser` crate, talking to the
//! kernel through `/dev/fuse` and `fusermount3`).
//!
//! The image is loaded into the simulated part and mounted; every request runs on the
//! file layer ([`mounted::Mounted`]); unmounting (`fusermount3 -u DIR`) makes every file
//! durable, unmounts the volume and writes the image back. With `-o ro` nothing is
//! written, to the part or to the image. With a power cut armed (`--cut-at`), the part
//! loses power at the chosen program or erase, every request after it fails with
//! `EIO`, and the image written at unmount holds the cells as the cut left them: what
//! a device would hold after the cut, for `stagefs fsck` and a remount to recover.
//!
//! Files have no owner, mode or times on flash: they are shown as owned by the owner
//! of the mount point, mode 0644 (directories 0755), with the mount's start time;
//! `chmod`, `chown` and `touch` are accepted and change nothing.

pub mod inodes;
pub mod mounted;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, MountOption, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs,
    ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use nand_hal::sim::profile::Profile;
use nand_hal::sim::FaultPlan;
use stagefs_core::{Fs, Kind, NAME_MAX};

use crate::volume;
use mounted::{Attr, Mounted};

/// How to mount.
pub struct MountSpec {
    /// The image file.
    pub image: PathBuf,
    /// The mount point.
    pub dir: PathBuf,
    /// Read-only: nothing is written to the part or the image.
    pub read_only: bool,
    /// A fault plan armed once the volume is mounted (a power cut counts program and
    /// erase operations from then).
    pub faults: Option<FaultPlan>,
}

/// Parses `--cut-at N[.KIND]` (KIND: clean, some, most, prefix, rand; default
/// clean) into a fault plan with only that cut.
pub fn cut_plan(spec: &str) -> Result<FaultPlan, String> {
    if spec.split('.').next() == Some("0") {
        return Err("--cut-at 0: program and erase operations count from 1".into());
    }
    let spec = if spec.contains('.') {
        spec.to_string()
    } else {
        format!("{spec}.clean")
    };
    format!("{}:cut={spec}", FaultPlan::seeded(1))
        .parse()
        .map_err(|_| {
            format!("--cut-at {spec}: expected N or N.KIND (clean, some, most, prefix, rand)")
        })
}

/// Mounts `spec.image` on `spec.dir` and serves it until it is unmounted, then saves
/// the image (unless read-only).
pub fn run(profile: &Profile, spec: &MountSpec) -> Result<(), String> {
    // One mount per image: a second would save over the first's changes.
    let lock =
        std::fs::File::open(&spec.image).map_err(|e| format!("{}: {e}", spec.image.display()))?;
    #[allow(clippy::incompatible_msrv)]
    // File::try_lock: Rust 1.89; the workspace builds with 1.95
    lock.try_lock().map_err(|_| {
        format!(
            "{}: mounted already (another stagefs holds it)",
            spec.image.display()
        )
    })?;
    let sim = volume::load(profile, &spec.image)?;
    let mut vol = Box::new(Fs::new(volume::store(sim)));
    vol.mount()
        .map_err(|e| volume::say(&format!("mounting {}", spec.image.display()), e))?;
    if let Some(plan) = spec.faults {
        vol.store_mut().flash_mut().arm(plan);
    }
    let owner = std::fs::metadata(&spec.dir).map_err(|e| format!("{}: {e}", spec.dir.display()))?;
    let outcome = Arc::new(Mutex::new(None));
    let fs = StageFuse {
        state: Mutex::new(Mounted::new(vol, spec.read_only)),
        dirs: Mutex::new((0, HashMap::new())),
        image: spec.image.clone(),
        read_only: spec.read_only,
        uid: owner.uid(),
        gid: owner.gid(),
        born: SystemTime::now(),
        outcome: outcome.clone(),
    };
    // SIGINT/SIGTERM unmount (which saves the image) instead of killing the mount.
    let dir = spec.dir.clone();
    let _ = ctrlc::set_handler(move || {
        let _ = std::process::Command::new("fusermount3")
            .arg("-u")
            .arg(&dir)
            .status();
    });
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        MountOption::FSName(format!("stagefs:{}", spec.image.display())),
        MountOption::Subtype("stagefs".into()),
        MountOption::NoAtime,
        if spec.read_only {
            MountOption::RO
        } else {
            MountOption::RW
        },
    ];
    fuser::mount(fs, &spec.dir, &config).map_err(|e| format!("{}: {e}", spec.dir.display()))?;
    drop(lock);
    let r = outcome.lock().unwrap_or_else(|p| p.into_inner()).take();
    r.unwrap_or(Ok(()))
}

/// The FUSE side: one lock around the mounted volume (requests run one at a time).
struct StageFuse {
    state: Mutex<Mounted>,
    /// Open directories: the next handle, and each one's entries as listed at
    /// `opendir` (so every entry that stays is returned once, whatever changes).
    dirs: Mutex<(u64, DirSnapshots)>,
    /// How the unmount went (saving included), for the exit status.
    outcome: Arc<Mutex<Option<Result<(), String>>>>,
    image: PathBuf,
    read_only: bool,
    uid: u32,
    gid: u32,
    born: SystemTime,
}

type DirSnapshots = HashMap<u64, Vec<(u64, String, Kind)>>;

const TTL: Duration = Duration::from_secs(1);

impl StageFuse {
    fn state(&self) -> std::sync::MutexGuard<'_, Mounted> {
        // A panic in one request must not wedge the others: the state is still
        // consistent (every change is applied before the reply).
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn file_attr(&self, a: Attr) -> FileAttr {
        let dir = a.kind == Kind::Dir;
        FileAttr {
            ino: INodeNo(a.ino),
            size: a.size,
            blocks: a.size.div_ceil(512),
            atime: self.born,
            mtime: self.born,
            ctime: self.born,
            crtime: self.born,
            kind: if dir {
                FileType::Directory
            } else {
                FileType::RegularFile
            },
            perm: if dir { 0o755 } else { 0o644 },
            nlink: if dir { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 2048,
            flags: 0,
        }
    }

    fn save(&self, path: &Path) -> Result<(), String> {
        let st = self.state();
        volume::save(st.sim(), path)
    }
}

fn name_of(name: &OsStr) -> Result<&str, Errno> {
    let n = name.to_str().ok_or(Errno::EINVAL)?;
    if n.len() > NAME_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    Ok(n)
}

impl Filesystem for StageFuse {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // O_TRUNC arrives with the open (not as a separate size change), so the
        // truncation lands together with the next fsync or close, as the file
        // layer's own `truncate` open option does.
        let _ = config.add_capabilities(InitFlags::FUSE_ATOMIC_O_TRUNC);
        Ok(())
    }

    fn destroy(&mut self) {
        let (r, report) = {
            let mut st = self.state();
            (st.finish(), st.report())
        };
        eprintln!("stagefs: {}: {report}", self.image.display());
        let mut msg = match &r {
            Ok(()) => String::new(),
            Err(e) => format!("{e}; "),
        };
        let mut outcome = r;
        if self.read_only {
            msg.push_str("read-only: image unchanged");
        } else {
            let dead = self.state().is_dead();
            match self.save(&self.image.clone()) {
                Ok(()) if dead => msg.push_str("power was cut: image saved as the cut left it"),
                Ok(()) => msg.push_str("image saved"),
                Err(e) => {
                    msg.push_str(&format!("saving the image failed: {e}"));
                    outcome = Err(format!("saving the image failed: {e}"));
                }
            }
        }
        eprintln!("stagefs: {}: {msg}", self.image.display());
        *self.outcome.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        // A name that is not UTF-8 cannot be in the volume.
        let r = name_of(name)
            .map_err(|e| if e == Errno::EINVAL { Errno::ENOENT } else { e })
            .and_then(|n| self.state().lookup(parent.0, n));
        match r {
            Ok(a) => reply.entry(&TTL, &self.file_attr(a), Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.state().attr(ino.0) {
            Ok(a) => reply.attr(&TTL, &self.file_attr(a)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut st = self.state();
        let r = match size {
            Some(s) => st.set_size(ino.0, s),
            None => st.attr(ino.0),
        };
        drop(st);
        match r {
            Ok(a) => reply.attr(&TTL, &self.file_attr(a)),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let r = name_of(name).and_then(|n| self.state().mkdir(parent.0, n));
        match r {
            Ok(a) => reply.entry(&TTL, &self.file_attr(a), Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        answer(
            reply,
            name_of(name).and_then(|n| self.state().unlink(parent.0, n)),
        )
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        answer(
            reply,
            name_of(name).and_then(|n| self.state().rmdir(parent.0, n)),
        )
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.contains(RenameFlags::RENAME_EXCHANGE)
            || flags.contains(RenameFlags::RENAME_WHITEOUT)
        {
            return reply.error(Errno::EINVAL);
        }
        let no_replace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        let r = name_of(name).and_then(|a| {
            let b = name_of(newname)?;
            self.state().rename(parent.0, a, newparent.0, b, no_replace)
        });
        answer(reply, r)
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let write = flags.acc_mode() != OpenAccMode::O_RDONLY;
        let trunc = flags.0 & libc_o_trunc() != 0;
        let r = self.state().open(ino.0, write, trunc);
        match r {
            Ok(()) => reply.opened(file_handle(ino.0, write), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.state().read(ino.0, offset, size as usize) {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.state().write(ino.0, offset, data) {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // Only a close of a descriptor that could write commits (and reports what
        // could not be made durable); closing a reader never fails for a writer.
        if fh.0 & 1 == 0 {
            return reply.ok();
        }
        answer(reply, self.state().flush(ino.0))
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        answer(reply, self.state().release(ino.0))
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        answer(reply, self.state().fsync(ino.0))
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let entries = {
            let mut st = self.state();
            match st.attr(ino.0) {
                Ok(a) if a.kind == Kind::Dir => st.list(ino.0),
                Ok(_) => Err(Errno::ENOTDIR),
                Err(e) => Err(e),
            }
        };
        match entries {
            Ok(entries) => {
                let mut all = vec![
                    (ino.0, ".".to_string(), Kind::Dir),
                    (ino.0, "..".to_string(), Kind::Dir),
                ];
                all.extend(entries);
                let mut d = self.dirs.lock().unwrap_or_else(|p| p.into_inner());
                d.0 += 1;
                let fh = d.0;
                d.1.insert(fh, all);
                reply.opened(FileHandle(fh), FopenFlags::empty());
            }
            Err(e) => reply.error(e),
        }
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.dirs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .1
            .remove(&fh.0);
        reply.ok();
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if let Err(e) = self.state().alive() {
            return reply.error(e);
        }
        let d = self.dirs.lock().unwrap_or_else(|p| p.into_inner());
        let Some(entries) = d.1.get(&fh.0) else {
            return reply.error(Errno::EBADF);
        };
        for (i, (n, name, kind)) in entries.iter().enumerate().skip(offset as usize) {
            let t = if *kind == Kind::Dir {
                FileType::Directory
            } else {
                FileType::RegularFile
            };
            if reply.add(INodeNo(*n), i as u64 + 1, t, name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Namespace operations are durable when they return.
        answer(reply, self.state().alive())
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let s = match self.state().space() {
            Ok(s) => s,
            Err(e) => return reply.error(e),
        };
        reply.statfs(
            s.total,
            s.free,
            s.free,
            0,
            0,
            s.unit,
            NAME_MAX as u32,
            s.unit,
        );
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let excl = flags & libc_o_excl() != 0;
        let trunc = flags & libc_o_trunc() != 0;
        let r = name_of(name).and_then(|n| self.state().create(parent.0, n, excl, trunc));
        match r {
            Ok(a) => reply.created(
                &TTL,
                &self.file_attr(a),
                Generation(0),
                file_handle(a.ino, true),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(e),
        }
    }
}

/// Replies to a request that returns nothing.
fn answer(reply: ReplyEmpty, r: Result<(), Errno>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

/// The FUSE handle of an open: the inode and whether it may write (bit 0).
fn file_handle(ino: u64, write: bool) -> FileHandle {
    FileHandle(ino << 1 | write as u64)
}

/// `O_TRUNC` on Linux.
const fn libc_o_trunc() -> i32 {
    0o1000
}

/// `O_EXCL` on Linux.
const fn libc_o_excl() -> i32 {
    0o200
}
