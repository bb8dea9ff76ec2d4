//! StageFS's file layer: files and directories on the [`oftl`] object store.
//!
//! A volume is an oftl store holding a volume header (object 1), a root directory and
//! a staging log stream. Every directory is an oftl object holding a binary hash trie
//! of entries (see `namespace`: a lookup reads 2 pages of the directory per path
//! component whatever its size, plus up to 3 of the store's table and index pages when
//! they are not cached: 5 in a directory of 16,384 names right after a mount); a file is either **inline** (up to [`INLINE_MAX`] bytes, kept in
//! its directory entry, so rewriting it costs no data page of its own) or has its own
//! oftl object. Small synchronous writes go to the staging log (one 512-byte sector
//! for a 64-byte `fsync`) and reach their homes in batches (see `stage`).
//!
//! # Guarantees after power loss
//!
//! These are the only promises; everything else is best effort.
//!
//! - **Namespace operations are atomic and durable on return**: `create_dir`,
//!   `remove_dir`, `remove`, `rename` (also over an existing name), `set_attributes`,
//!   and the creation of a file by `open`. Each is one oftl transaction: after a power
//!   cut at any instant it is wholly done or wholly undone, and once it returns it
//!   survives any cut.
//! - **File contents are durable at [`Fs::fsync`] and [`Fs::close`]** (and at
//!   [`Fs::truncate`], which is durable on return). After a cut, a file holds what its
//!   last fsync/close made durable, plus possibly some of the writes made since: which
//!   of them is not promised, and a write not yet made durable may show in part: each
//!   byte reads as the durable one or as one a write since wrote there, never as
//!   anything else (an inline file: all or none).
//! - Opening an existing file with `truncate` and the writes before the next
//!   fsync/close land together: a cut in between leaves the old contents (empty ones
//!   too). A file the open creates (`create` with no such file) is made empty, durably,
//!   at the open, and its writes are not held back: they become durable as above.
//! - A store that mounts read-only (too many grown bad blocks, a worn-out part) mounts
//!   as a read-only volume that still shows every fsynced byte: staged records cannot
//!   be patched home without writes, so they stay in the log and reads of their files
//!   lay them over the file's own bytes (each read and open of such a file then reads
//!   the staging log, at most 16 KiB and one commit). Every
//!   change is refused with [`Error::ReadOnly`].
//!
//! # Misuse
//!
//! Bad paths, names too long, handles that are closed or from an earlier mount (of
//! this `Fs` or of another over the same store: handles carry their mount's number,
//! from a counter every volume of the program shares), and operations on the wrong
//! kind of entry get their own [`Error`] variants and change nothing. A file can be open through one handle at a time: opening it again,
//! removing it or renaming it (either name) while it is open fails with
//! [`Error::Busy`]. An `open` with every handle of the table in use fails with
//! [`Error::TooManyOpen`] first, whatever the path names (as `EMFILE` comes before any
//! look at the path in POSIX).
//!
//! # Time
//!
//! Every call walks its path (the last directory walked is remembered): two page reads
//! per component once the store's tables for it are cached, about 0.14 ms on the W25N01GV. Paths have no depth limit, so a rename
//! never makes a file unreachable; single calls stay within 50 ms for paths of up to
//! 300 components (49 ms measured at 340), but for a rename between two directories,
//! which walks their shared ancestors once and then each below them: up to about 300
//! components walked in all (the shared ones and each one's own; 47 ms between two
//! sibling directories 300 deep, 58 ms between two chains of 200 from the root,
//! review s56b).
//! A [`ReadDir`] step reads at most 16 bucket pages however many names the directory
//! once held (page 0 counts the buckets holding a name per group of up to 8, and a step
//! skips the groups counted 0; 0.07 to 0.33 ms in directories emptied of 4,000 to
//! 16,384 names, 70 to 156 ms before stop 57; a directory written by earlier firmware
//! counts per group once it is empty, and until then a step still reads every empty
//! bucket it passes). Garbage collection runs in bounded slices
//! inside calls and in [`Fs::step`]: random 2 KiB overwrites on a W25N01GV kept
//! within 50 ms up to 91.5 % of the store's capacity (42 ms at its steady state,
//! `tests/review_s41.rs`; DESIGN 5).
#![cfg_attr(not(any(test, feature = "std")), no_std)]
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "alloc")]
extern crate alloc;

// First: the message macros the modules below use.
#[macro_use]
mod fmt;

mod dircache;
pub mod error;
mod file;
pub mod format;
mod io;
mod namespace;
#[cfg(feature = "oracle")]
pub mod oracle;
#[cfg(feature = "alloc")]
mod orphans;
mod path;
mod readdir;
mod stage;
mod store;

use core::sync::atomic::{AtomicU32, Ordering};
use oftl::{ObjKind, TxOp};

pub use error::{Error, PathError};
pub use file::{File, OpenOptions, SeekFrom};
pub use format::bucket::Kind;
pub use io::FileView;
pub use path::NAME_MAX;
pub use readdir::{DirEntry, ReadDir};
pub use stage::{StagingStatus, Tuning};
pub use store::Store;

use file::Handle;
use format::bucket::{self, Body};
use format::volume::{self, Volume};
use namespace::{Loc, OwnedEntry};

/// Longest user attributes of an entry, in bytes.
pub const ATTR_MAX: usize = 32;
/// Largest file kept inline in its directory entry, in bytes.
pub const INLINE_MAX: usize = 256;
/// Page copies per erase block of the store that [`Fs::step_all`] makes at most (in
/// steps of a quarter of it): a bound far above what collecting every block once
/// takes, so the call always ends.
pub const STEP_ALL_COPIES: u32 = 256;

/// Object id of the volume header (the first object `format` creates).
const VOLUME_OBJECT: u32 = 1;

/// What [`Fs::metadata`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Metadata {
    /// File or directory.
    pub kind: Kind,
    /// Size in bytes (files; 0 for directories).
    pub size: u64,
    attrs: [u8; ATTR_MAX],
    attrs_len: u8,
}

impl Metadata {
    /// The user attributes.
    pub fn attributes(&self) -> &[u8] {
        &self.attrs[..self.attrs_len as usize]
    }
}

/// What [`Fs::mount_repair`] left out: the store's replay stopped at a lost page (or,
/// when both its write heads had moved, at its last checkpoint), and the objects named
/// here lost their changes written after it.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Repair {
    report: oftl::SalvageReport,
    staging: u32,
    staged_dropped: u64,
}

impl Repair {
    /// The pages that did not read (see [`oftl::SalvageReport::unreadable_pages`]).
    pub fn unreadable_pages(&self) -> &[u32] {
        self.report.unreadable_pages()
    }

    /// Whether the store's tables were rebuilt from a full scan (`Fs::mount_rebuild`, feature `alloc`).
    pub fn rebuilt(&self) -> bool {
        self.report.rebuilt()
    }

    /// Whether more pages did not read than [`Repair::unreadable_pages`] lists.
    pub fn more_unreadable(&self) -> bool {
        self.report.more_unreadable()
    }

    /// Whether everything written since the store's last checkpoint was left out (see
    /// [`oftl::SalvageReport::to_checkpoint`]).
    pub fn to_checkpoint(&self) -> bool {
        self.report.to_checkpoint()
    }

    /// Whether a path at `location` may be older than acknowledged: its own object
    /// lost changes, or its data is inline in a directory that did.
    pub fn may_have_rolled_back(&self, location: &Location) -> bool {
        match location.object {
            Some(o) => self.report.may_have_rolled_back(o),
            None => location
                .entry_in
                .is_some_and(|d| self.report.may_have_rolled_back(d)),
        }
    }

    /// Whether the report names the object at `location` (unlike
    /// [`Repair::may_have_rolled_back`], not true for every path when the report could
    /// not name them all).
    pub fn names(&self, location: &Location) -> bool {
        let listed = |o| self.report.rolled_back().contains(&o);
        match location.object {
            Some(o) => listed(o),
            None => location.entry_in.is_some_and(listed),
        }
    }

    /// Whether small writes staged after the lost page are gone (the files they were
    /// for cannot be named: their records were what was lost), or the staging log
    /// itself had a record that did not read (see [`Repair::staged_bytes_dropped`]).
    pub fn staged_writes_lost(&self) -> bool {
        self.staged_dropped > 0 || self.report.may_have_rolled_back(self.staging)
    }

    /// Bytes of the staging log the repair left out: its replay stopped at the first
    /// record that did not read (an uncorrectable page, or content that is not a
    /// record), and that record and every later one were dropped. Every file keeps a
    /// state it had; those written (small writes and small files) in the dropped
    /// records' commits are older than acknowledged, and cannot be named. 0: the whole
    /// log read.
    pub fn staged_bytes_dropped(&self) -> u64 {
        self.staged_dropped
    }

    /// Whether the store's own replay left anything out (a lost page, a rollback to
    /// its checkpoint, objects named): `false` when only the staging log was cut
    /// ([`Repair::staged_bytes_dropped`]) or nothing was left out.
    pub fn store_left_out(&self) -> bool {
        let r = &self.report;
        !r.unreadable_pages().is_empty()
            || r.more_unreadable()
            || r.to_checkpoint()
            || !r.rolled_back().is_empty()
            || r.more()
    }

    /// Whether the store lost more objects' changes than it could name (then any file
    /// written after the lost page may be older).
    pub fn unnamed(&self) -> bool {
        self.report.more()
    }
}

/// Where a path's state lives (see [`Fs::location`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Location {
    /// The directory object holding the entry (none for the root).
    pub entry_in: Option<u32>,
    /// The path's own object (none for a file whose data is inline in its entry).
    pub object: Option<u32>,
}

/// A StageFS volume over the object store `S`, with `PAGE`-byte scratch pages (at
/// least the store's payload) and a table of `HANDLES` open files.
///
/// Build it with [`Fs::new`] (a `const fn`, so it can live in a `static`), then
/// [`Fs::format`] or [`Fs::mount`] in place:
///
/// ```
/// use nand_hal::sim::{profile, FaultPlan, HeapStorage, SimNand};
/// use oftl::{Config, Greedy, Oftl};
/// use stagefs_core::{Fs, OpenOptions};
///
/// let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(1));
/// let config = Config::new().window_blocks(6);
/// let mut fs: Fs<Oftl<&mut SimNand<HeapStorage>, 2048, 64, 4>, 2048, 4> =
///     Fs::new(Oftl::new(&mut sim, config, Greedy::DEFAULT));
/// fs.format().unwrap();
/// let f = fs.open("/hello", OpenOptions::new().write(true).create(true)).unwrap();
/// fs.write(f, b"hello").unwrap();
/// fs.close(f).unwrap();
/// assert_eq!(fs.metadata("/hello").unwrap().size, 5);
/// ```
///
/// `HANDLES` is 1 to 255 (handles number their slot with a byte); more is refused when
/// the type is built:
///
/// ```compile_fail
/// # use nand_hal::sim::{profile, FaultPlan, HeapStorage, SimNand};
/// # use oftl::{Config, Greedy, Oftl};
/// # use stagefs_core::Fs;
/// let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(1));
/// let config = Config::new().window_blocks(6);
/// let fs: Fs<Oftl<&mut SimNand<HeapStorage>, 2048, 64, 4>, 2048, 256> =
///     Fs::new(Oftl::new(&mut sim, config, Greedy::DEFAULT));
/// ```
pub struct Fs<S: Store, const PAGE: usize, const HANDLES: usize = 4> {
    store: S,
    vol: Option<Volume>,
    /// Counts opens (never reset): a handle is valid only for the open that made it,
    /// so one that was closed, or is from before a remount, is refused (64 bits: never
    /// wraps).
    opens: u64,
    /// This mount's number, from [`MOUNTS`]: handles carry it.
    mount_id: u32,
    handles: [Handle; HANDLES],
    stage: stage::Staging,
    dirs: dircache::DirCache,
    tuning: Tuning,
    a: [u8; PAGE],
    b: [u8; PAGE],
}

/// Mounts and formats of every volume of the program so far: each takes the next
/// number, so a handle from one is refused by every other (see [`File`]).
static MOUNTS: AtomicU32 = AtomicU32::new(0);

impl<S: Store, const PAGE: usize, const HANDLES: usize> Fs<S, PAGE, HANDLES> {
    /// Handles are numbered by a byte: a table of more than 255 is refused when the
    /// volume type is built (an independent review opened a 257th, whose handle named
    /// slot 0 and could never be closed).
    const HANDLES_FIT: () = assert!(HANDLES >= 1 && HANDLES <= 255, "HANDLES must be 1 to 255");

    /// A volume over `store`, not mounted.
    pub const fn new(store: S) -> Self {
        let () = Self::HANDLES_FIT;
        Fs {
            store,
            vol: None,
            opens: 0,
            mount_id: 0,
            handles: [Handle::CLOSED; HANDLES],
            stage: stage::Staging::EMPTY,
            dirs: dircache::DirCache::EMPTY,
            tuning: Tuning::DEFAULT,
            a: [0; PAGE],
            b: [0; PAGE],
        }
    }

    /// Chooses which staging mechanisms run (measurements; see [`Tuning`]). Takes
    /// effect at the next commit (with `bypass` off, a bypass already under way ends
    /// too).
    pub fn set_tuning(&mut self, tuning: Tuning) {
        self.tuning = tuning;
        if !tuning.bypass {
            self.end_bypass();
        }
    }

    /// The object store (for figures and health).
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The object store, mutably (its own maintenance calls: `gc_step`, `sync`).
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// Gives the store back.
    pub fn into_store(self) -> S {
        self.store
    }

    /// Formats the device as its store was configured (`oftl::Oftl::new`; everything
    /// on the device is lost) and mounts the empty volume.
    pub fn format(&mut self) -> Result<(), Error<S::FlashError>> {
        self.vol = None;
        self.store.format()?;
        self.check_geometry()?;
        let first = self.store.next_object_id();
        if first != VOLUME_OBJECT {
            return Err(Error::Corrupted);
        }
        let v = Volume {
            root: first + 1,
            staging: first + 2,
            version: volume::VERSION,
        };
        let header = v.encode();
        let root_page = namespace::new_dir_page(v.root, v.dir_version());
        let attrs = stage::attrs_for(0);
        self.store.transact(&[
            TxOp::Create {
                kind: ObjKind::Object,
                attrs,
            },
            TxOp::Create {
                kind: ObjKind::Object,
                attrs,
            },
            TxOp::Create {
                kind: ObjKind::Log,
                attrs,
            },
            TxOp::Write {
                obj: VOLUME_OBJECT,
                offset: 0,
                data: &header,
            },
            TxOp::Write {
                obj: v.root,
                offset: 0,
                data: &root_page,
            },
        ])?;
        // A checkpoint that knows the staging stream: a crash recovery replays log
        // sectors during its scan only for streams its checkpoint knows, and reads every
        // log page of the window a second time for one created since (a cut in the first
        // window after a format then took 105 ms to mount instead of 55).
        self.store.sync()?;
        self.start(v);
        Ok(())
    }

    /// Mounts the volume (the store recovers from a crash first, then the staging log is
    /// replayed). A store that mounts read-only (too many grown bad blocks) mounts as a
    /// read-only volume: its staged records stay in the log and reads overlay them (see
    /// the crate docs). It is refused with [`Error::ReadOnly`] only in the one case the
    /// overlay cannot cover: the log names more inline files than the staging layer's
    /// table holds, which a writable volume never leaves.
    pub fn mount(&mut self) -> Result<(), Error<S::FlashError>> {
        self.vol = None;
        self.store.mount()?;
        self.open_volume(false).map(|_| ())
    }

    /// Mounts a volume whose store fails to mount for lost pages ([`Error::Mount`]
    /// with `MediaLoss`), repairing the store in place (for `fsck --repair`): the
    /// store's replay stops at the first lost page (at its last checkpoint when the
    /// staging log also moved since, as it usually has), so every file and directory
    /// keeps a state it had, and what was written after that is gone for good. The volume
    /// is writable and mounts normally afterwards. [`Repair`] tells which files and
    /// directories may be older than acknowledged ([`Fs::location`] maps paths).
    ///
    /// It also repairs a volume whose mount fails because a record of the staging log
    /// no longer reads ([`Error::Flash`] with an uncorrectable read, or
    /// [`Error::Corrupted`]): the staging replay stops at that record and drops it and
    /// every later one ([`Repair::staged_bytes_dropped`]).
    pub fn mount_repair(&mut self) -> Result<Repair, Error<S::FlashError>> {
        self.vol = None;
        self.store.mount_repair()?;
        let staged_dropped = self.open_volume(true)?;
        Ok(Repair {
            report: self.store.salvage_report().clone(),
            staging: self.mounted()?.staging,
            staged_dropped,
        })
    }

    /// Mounts a volume whose store's checkpoints, index pages or object-table pages
    /// no longer read, rebuilding the store's tables from a scan of every page's tag
    /// (for `fsck --repair`; feature `alloc`; see `oftl::Damaged::Rebuild`
    /// for what a scan cannot know). The volume is writable and mounts normally
    /// afterwards. [`Repair::rebuilt`] is set; [`Repair`] names the files whose state
    /// is in doubt (a metadata page that did not read). Files deleted long ago may
    /// leave their objects behind, named by no directory: they take space, nothing
    /// else.
    #[cfg(feature = "alloc")]
    pub fn mount_rebuild(&mut self) -> Result<Repair, Error<S::FlashError>> {
        self.vol = None;
        self.store.mount_rebuild()?;
        let staged_dropped = self.open_volume(true)?;
        Ok(Repair {
            report: self.store.salvage_report().clone(),
            staging: self.mounted()?.staging,
            staged_dropped,
        })
    }

    /// Where a path's state lives: the directory object holding its entry (none for
    /// the root) and its own object (none for a file whose data is inline in its
    /// entry). For tools that relate store-level reports (see [`Repair`]) to paths.
    pub fn location(&mut self, path: &str) -> Result<Location, Error<S::FlashError>> {
        let comps = path::components(path)?;
        if comps.clone().next().is_none() {
            return Ok(Location {
                entry_in: None,
                object: Some(self.mounted()?.root),
            });
        }
        let (parent, name) = path::parent_and_name(path)?;
        let dir = self.dir_of(parent)?;
        let loc = namespace::locate(&mut self.store, dir, name.as_bytes(), &mut self.a)?;
        let at = loc.found.ok_or(Error::NotFound)?;
        let e = namespace::entry_at(&self.a, &loc, at)?;
        Ok(Location {
            entry_in: Some(dir),
            object: (e.object != 0).then_some(e.object),
        })
    }

    /// After the store mounted: the volume header, then the staging replay (with
    /// `repair`, stopping at a record that does not read; returns the log bytes so
    /// dropped). Out of line: the replay's frame is not on the stack while the store
    /// recovers (the deepest path of a mount after a crash).
    #[inline(never)]
    fn open_volume(&mut self, repair: bool) -> Result<u64, Error<S::FlashError>> {
        self.check_geometry()?;
        let mut h = [0u8; volume::LEN];
        let n = match self.store.read(VOLUME_OBJECT, 0, &mut h) {
            Ok(n) => n,
            Err(Error::Corrupted) => return Err(Error::NotFormatted),
            Err(e) => return Err(e),
        };
        let v = Volume::parse(&h[..n])?.ok_or(Error::NotFormatted)?;
        self.start(v);
        let dropped = self.replay(repair).inspect_err(|_| self.vol = None)?;
        self.upgrade_volume().inspect_err(|_| self.vol = None)?;
        Ok(dropped)
    }

    /// Writes the current volume version over a version-1 header (one transaction, once
    /// per volume), so that directory headers of version 2 may be written and firmware
    /// that does not read them refuses the volume at mount. A volume too full or
    /// read-only to take it stays at version 1 and keeps writing version-1 headers; the
    /// next mount tries again.
    fn upgrade_volume(&mut self) -> Result<(), Error<S::FlashError>> {
        let Some(mut v) = self.vol.filter(|v| v.version < volume::VERSION) else {
            return Ok(());
        };
        if self.read_only() {
            return Ok(());
        }
        let version = volume::VERSION.to_le_bytes();
        let op = TxOp::Write {
            obj: VOLUME_OBJECT,
            offset: volume::VERSION_AT,
            data: &version,
        };
        match self.store.transact(&[op]) {
            Ok(()) => {
                v.version = volume::VERSION;
                self.vol = Some(v);
                Ok(())
            }
            Err(Error::NoSpace | Error::ReadOnly) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The newest directory header version that may be written now (the volume's).
    fn dir_version(&self) -> u8 {
        self.vol.map_or(1, |v| v.dir_version())
    }

    /// One bounded step of background work: a patch of the staged records if there
    /// are any (at most one flush per object with records, 8 at most), then garbage
    /// collection of at most `budget` page copies. Returns whether calling again now
    /// would do useful work (`false`: idle until more is written; always `false` with
    /// a `budget` of 0, which patches but collects nothing). Call it when the
    /// device is otherwise idle; foreground operations do the same work only when they
    /// must (a full staging list, a full store).
    ///
    /// On a volume too full to patch or to collect it fails with [`Error::NoSpace`]
    /// and nothing is lost: the staged records stay in the log (a remove or a truncate
    /// makes room; so may later collection).
    pub fn step(&mut self, budget: u32) -> Result<bool, Error<S::FlashError>> {
        self.mounted()?;
        self.patch()?;
        match self.store.gc_step(budget) {
            Ok(more) => Ok(more),
            Err(Error::ReadOnly) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// All background work now, however long it takes: every open file made durable and
    /// every staged record patched home (as [`Fs::sync`]), then garbage collection until
    /// no block is worth collecting, then a checkpoint (a mount after a cut then scans
    /// little). [`Fs::step`] is the bounded form. Collection ends on its own once the
    /// blocks with garbage are collected; as a bound beyond that, it stops after
    /// [`STEP_ALL_COPIES`] copies for each of the store's blocks.
    pub fn step_all(&mut self) -> Result<(), Error<S::FlashError>> {
        self.sync()?;
        for _ in 0..self.store.block_count().saturating_mul(4) {
            let more = match self.store.gc_step(STEP_ALL_COPIES / 4) {
                Ok(more) => more,
                Err(Error::ReadOnly) => false,
                Err(e) => return Err(e),
            };
            if !more {
                break;
            }
        }
        self.store.sync()
    }

    /// Makes everything durable: every open file (as `fsync`), every staged record
    /// patched home, and a checkpoint of the store (the next mount after a crash scans
    /// little).
    pub fn sync(&mut self) -> Result<(), Error<S::FlashError>> {
        self.mounted()?;
        for i in 0..HANDLES {
            if self.handles[i].open {
                self.commit(i)?;
            }
        }
        self.patch()?;
        self.store.sync()
    }

    /// Closes every open file (making it durable) and unmounts. The volume is not
    /// mounted afterwards, whatever the result. Staged records a volume too full to
    /// patch cannot take home stay in the staging log, durable, and the next mount
    /// applies them (the unmount succeeds); a failed close is reported, and the next
    /// mount then recovers as after a power cut.
    pub fn unmount(&mut self) -> Result<(), Error<S::FlashError>> {
        self.mounted()?;
        let mut r = Ok(());
        for i in 0..HANDLES {
            if self.handles[i].open {
                let f = File {
                    slot: i as u8,
                    mount: self.mount_id,
                    session: self.handles[i].open_id,
                };
                if let Err(e) = self.close(f) {
                    if r.is_ok() {
                        r = Err(e);
                    }
                }
            }
        }
        let r = r.and_then(|()| match self.patch() {
            // Too full (or turned read-only) to take the staged bytes home: they stay
            // in the log, which the next mount replays.
            Err(Error::NoSpace | Error::ReadOnly) => {
                self.leave_staged_in_log();
                Ok(())
            }
            r => r,
        });
        self.vol = None;
        self.handles = [Handle::CLOSED; HANDLES];
        r?;
        self.store.unmount()
    }

    fn start(&mut self, v: Volume) {
        // Load and store, not `fetch_add` (thumbv6m has no atomic read-modify-write):
        // two volumes mounting at the same instant on two threads may share a number,
        // which only matters if a handle of one is then used on the other.
        let n = MOUNTS.load(Ordering::Relaxed).wrapping_add(1);
        MOUNTS.store(n, Ordering::Relaxed);
        self.mount_id = n;
        self.vol = Some(v);
        self.stage = stage::Staging::EMPTY;
        self.dirs.forget();
        self.handles = [Handle::CLOSED; HANDLES];
    }

    fn check_geometry(&self) -> Result<(), Error<S::FlashError>> {
        let p = self.store.payload();
        let longest = bucket::ENTRY_HEADER_LEN + NAME_MAX + ATTR_MAX + INLINE_MAX;
        if p > PAGE
            || self.store.log_max_record() > PAGE
            || bucket::capacity(p) < 2 * longest
            || bucket::page0_len() > p
            || self.store.max_object_size() < bucket::max_pages() as u64 * p as u64
        {
            return Err(Error::Format(oftl::FormatError::Unsupported(
                oftl::Mismatch::Geometry,
            )));
        }
        Ok(())
    }

    fn mounted(&self) -> Result<Volume, Error<S::FlashError>> {
        self.vol.ok_or(Error::NotMounted)
    }

    /// The directory object `comps` names.
    fn dir_of(&mut self, comps: path::Components<'_>) -> Result<u32, Error<S::FlashError>> {
        let root = self.mounted()?.root;
        let key = comps.as_str();
        if let Some(d) = self.dirs.get(key) {
            return Ok(d);
        }
        let dir = self.walk_from(root, comps)?;
        self.dirs.walked(key, dir);
        Ok(dir)
    }

    /// The directory `comps` names below directory `dir` (not remembered).
    fn walk_from(
        &mut self,
        mut dir: u32,
        comps: path::Components<'_>,
    ) -> Result<u32, Error<S::FlashError>> {
        for c in comps {
            let loc = namespace::locate(&mut self.store, dir, c.as_bytes(), &mut self.a)?;
            let at = loc.found.ok_or(Error::NotFound)?;
            let e = namespace::entry_ref(&self.a, &loc, at)?;
            match (e.kind, e.body) {
                (Kind::Dir, Body::Object(o)) if o != 0 => dir = o,
                (Kind::Dir, _) => return Err(Error::Corrupted),
                (Kind::File, _) => return Err(Error::NotADirectory),
            }
        }
        Ok(dir)
    }

    /// Locates `name` in `dir` with its bucket in `a`, splitting full buckets until
    /// `room` more bytes fit there (0: no room needed), besides the room the staged
    /// contents of other names there will take when patched.
    fn locate_with_room(
        &mut self,
        dir: u32,
        name: &[u8],
        room: usize,
    ) -> Result<Loc, Error<S::FlashError>> {
        loop {
            let loc = namespace::locate(&mut self.store, dir, name, &mut self.a)?;
            let free = bucket::capacity(self.store.payload()) - loc.head.used as usize;
            if room == 0 || free >= room + self.staged_growth(&loc, name)? {
                return Ok(loc);
            }
            namespace::split(&mut self.store, &loc, &mut self.a, &mut self.b)?;
        }
    }

    /// `rename`'s destination bucket (in `a`) with room for an entry of `need` bytes
    /// named `to` in `tdir`, counting what the rename frees there: the entry it
    /// replaces, and the source `from` of `fdir` if it is in the same bucket.
    fn rename_target(
        &mut self,
        fdir: u32,
        from: &[u8],
        tdir: u32,
        to: &[u8],
        need: usize,
    ) -> Result<Loc, Error<S::FlashError>> {
        let p = self.store.payload();
        let loc = namespace::locate(&mut self.store, tdir, to, &mut self.a)?;
        let freed = |a: &[u8], loc: &Loc, name: &[u8]| -> Result<usize, Error<S::FlashError>> {
            Ok(bucket::find(&a[..p], &loc.head, name)?.map_or(0, |(_, e)| e.len()))
        };
        let replaced = freed(&self.a, &loc, to)?;
        let source = if fdir == tdir {
            freed(&self.a, &loc, from)?
        } else {
            0
        };
        let loc = self.locate_with_room(tdir, to, need.saturating_sub(replaced + source))?;
        if source > 0 && bucket::find(&self.a[..p], &loc.head, from)?.is_none() {
            // A split moved the source away: it frees nothing here after all.
            return self.locate_with_room(tdir, to, need.saturating_sub(replaced));
        }
        Ok(loc)
    }

    /// The write of a bucket image (in `a` or `b`) and, when it changes, of page 0's
    /// count field ([`namespace::count_after`]).
    fn bucket_ops<'x>(
        &self,
        loc: &Loc,
        image: &'x [u8],
        count: &'x namespace::Page0Writes,
        ops: &mut heapless::Vec<TxOp<'x>, 8>,
    ) -> Result<(), Error<S::FlashError>> {
        let p = self.store.payload();
        let page = TxOp::Write {
            obj: loc.dir,
            offset: loc.page as u64 * p as u64,
            data: &image[..p],
        };
        ops.push(page).map_err(|_| Error::Corrupted)?;
        count.push_ops(loc.dir, ops)?;
        Ok(())
    }

    /// Whether a file handle has `dir`/`name` open.
    fn is_open(&self, dir: u32, name: &[u8]) -> bool {
        self.handles
            .iter()
            .any(|h| h.open && h.dir == dir && h.name() == name)
    }

    /// Creates a directory. Durable on return.
    pub fn create_dir(&mut self, path: &str) -> Result<(), Error<S::FlashError>> {
        self.changes_allowed()?;
        let (parent, name) = path::parent_and_name(path)?;
        let dir = self.dir_of(parent)?;
        let new = self.store.next_object_id();
        let e = OwnedEntry::new(Kind::Dir, name.as_bytes(), new)?;
        let mut loc = self.locate_with_room(dir, name.as_bytes(), e.entry().len())?;
        if loc.found.is_some() {
            return Err(Error::Exists);
        }
        if !namespace::insert_into(&mut self.a, &mut loc, &e.entry()) {
            return Err(Error::Corrupted);
        }
        let count = namespace::count_after(&loc.root, &[&loc], self.dir_version())?;
        let page0 = namespace::new_dir_page(dir, self.dir_version());
        let mut ops = heapless::Vec::<TxOp<'_>, 8>::new();
        ops.push(TxOp::Create {
            kind: ObjKind::Object,
            attrs: self.new_object_attrs()?,
        })
        .map_err(|_| Error::Corrupted)?;
        ops.push(TxOp::Write {
            obj: new,
            offset: 0,
            data: &page0,
        })
        .map_err(|_| Error::Corrupted)?;
        self.bucket_ops(&loc, &self.a, &count, &mut ops)?;
        self.store.transact(&ops)
    }

    /// Removes an empty directory. Durable on return.
    pub fn remove_dir(&mut self, path: &str) -> Result<(), Error<S::FlashError>> {
        self.remove_entry(path, Kind::Dir)
    }

    /// Removes a file (refused while it is open: [`Error::Busy`]). Durable on return.
    pub fn remove(&mut self, path: &str) -> Result<(), Error<S::FlashError>> {
        self.remove_entry(path, Kind::File)
    }

    fn remove_entry(&mut self, path: &str, kind: Kind) -> Result<(), Error<S::FlashError>> {
        self.changes_allowed()?;
        let (parent, name) = path::parent_and_name(path)?;
        let dir = self.dir_of(parent)?;
        self.settle(dir, name.as_bytes())?;
        let mut loc = namespace::locate(&mut self.store, dir, name.as_bytes(), &mut self.a)?;
        let at = loc.found.ok_or(Error::NotFound)?;
        let e = namespace::entry_at(&self.a, &loc, at)?;
        match (kind, e.kind) {
            (Kind::File, Kind::Dir) => return Err(Error::IsADirectory),
            (Kind::Dir, Kind::File) => return Err(Error::NotADirectory),
            _ => {}
        }
        if e.kind == Kind::File && self.is_open(dir, name.as_bytes()) {
            return Err(Error::Busy);
        }
        if e.kind == Kind::Dir {
            self.check_empty(e.object)?;
            self.dirs.forget();
        }
        namespace::remove_from(&mut self.a, &mut loc)?;
        let count = namespace::count_after(&loc.root, &[&loc], self.dir_version())?;
        let mut ops = heapless::Vec::<TxOp<'_>, 8>::new();
        self.bucket_ops(&loc, &self.a, &count, &mut ops)?;
        if e.object != 0 {
            ops.push(TxOp::Delete { obj: e.object })
                .map_err(|_| Error::Corrupted)?;
        }
        self.store.transact_removing(&ops)?;
        drop(ops);
        self.forget_deleted(e.object);
        Ok(())
    }

    /// `NotEmpty` unless directory object `d` has no entries (reads its page 0 into `b`).
    fn check_empty(&mut self, d: u32) -> Result<(), Error<S::FlashError>> {
        namespace::read_page(&mut self.store, d, 0, &mut self.b)?;
        let h = bucket::DirHeader::parse(&self.b[..self.store.payload()])?;
        if h.count != 0 {
            return Err(Error::NotEmpty);
        }
        Ok(())
    }

    /// Kind, size and attributes of a path (`/` is the root directory).
    pub fn metadata(&mut self, path: &str) -> Result<Metadata, Error<S::FlashError>> {
        let comps = path::components(path)?;
        let mut m = Metadata {
            kind: Kind::Dir,
            size: 0,
            attrs: [0; ATTR_MAX],
            attrs_len: 0,
        };
        if comps.clone().next().is_none() {
            self.mounted()?;
            return Ok(m);
        }
        let (parent, name) = path::parent_and_name(path)?;
        let dir = self.dir_of(parent)?;
        let loc = namespace::locate(&mut self.store, dir, name.as_bytes(), &mut self.a)?;
        let at = loc.found.ok_or(Error::NotFound)?;
        let e = namespace::entry_at(&self.a, &loc, at)?;
        m.kind = e.kind;
        m.attrs[..e.attrs().len()].copy_from_slice(e.attrs());
        m.attrs_len = e.attrs().len() as u8;
        if e.kind == Kind::File {
            let staged = self.staged_len(dir, name.as_bytes());
            m.size = match self.open_handle(dir, name.as_bytes()) {
                Some(i) => self.handles[i].size,
                None if e.object == 0 => staged.unwrap_or(e.inline().len() as u64),
                None => self.object_len(e.object)?,
            };
        }
        Ok(m)
    }

    fn open_handle(&self, dir: u32, name: &[u8]) -> Option<usize> {
        self.handles
            .iter()
            .position(|h| h.open && h.dir == dir && h.name() == name)
    }

    /// Replaces the user attributes of a file or directory (at most [`ATTR_MAX`]
    /// bytes). Durable on return.
    pub fn set_attributes(&mut self, path: &str, attrs: &[u8]) -> Result<(), Error<S::FlashError>> {
        self.changes_allowed()?;
        if attrs.len() > ATTR_MAX {
            return Err(Error::TooLarge);
        }
        let (parent, name) = path::parent_and_name(path)?;
        let dir = self.dir_of(parent)?;
        self.settle(dir, name.as_bytes())?;
        let loc = namespace::locate(&mut self.store, dir, name.as_bytes(), &mut self.a)?;
        let at = loc.found.ok_or(Error::NotFound)?;
        let mut e = namespace::entry_at(&self.a, &loc, at)?;
        let grow = attrs.len().saturating_sub(e.attrs().len());
        let mut loc = self.locate_with_room(dir, name.as_bytes(), grow)?;
        e.set_attrs(attrs)?;
        self.replace_entry(&mut loc, &e)
    }

    /// Replaces the entry at `loc.found` (bucket in `a`) with `e`, durably. The caller
    /// made room for any growth.
    fn replace_entry(&mut self, loc: &mut Loc, e: &OwnedEntry) -> Result<(), Error<S::FlashError>> {
        namespace::remove_from(&mut self.a, loc)?;
        if !namespace::insert_into(&mut self.a, loc, &e.entry()) {
            return Err(Error::Corrupted);
        }
        let count = namespace::count_after(&loc.root, &[loc], self.dir_version())?;
        let mut ops = heapless::Vec::<TxOp<'_>, 8>::new();
        self.bucket_ops(loc, &self.a, &count, &mut ops)?;
        self.store.transact(&ops)
    }

    /// Renames `from` to `to`, replacing `to` if it exists (a file replaces a file, a
    /// directory an empty directory). Atomic and durable on return.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<(), Error<S::FlashError>> {
        self.changes_allowed()?;
        let (fp, fname) = path::parent_and_name(from)?;
        let (tp, tname) = path::parent_and_name(to)?;
        self.dirs.forget();
        let into = path::is_at_or_below(tp.as_str(), fp.as_str(), fname);
        // The parents' shared ancestors are walked once (review s56b: both paths in
        // full, 86 ms for a rename within a directory at a depth of 300).
        let (common, frest, trest) = path::split_common(fp.clone(), tp.clone());
        let base = self.dir_of(common)?;
        let fdir = self.walk_from(base, frest)?;
        let tdir = self.walk_from(base, trest)?;
        self.settle(fdir, fname.as_bytes())?;
        self.settle(tdir, tname.as_bytes())?;
        let src = {
            let loc = namespace::locate(&mut self.store, fdir, fname.as_bytes(), &mut self.a)?;
            let at = loc.found.ok_or(Error::NotFound)?;
            namespace::entry_at(&self.a, &loc, at)?
        };
        if self.is_open(fdir, fname.as_bytes()) || self.is_open(tdir, tname.as_bytes()) {
            return Err(Error::Busy);
        }
        if fdir == tdir && fname == tname {
            return Ok(());
        }
        if src.kind == Kind::Dir && into {
            // Not into itself or below it. Paths are canonical and a directory has one
            // parent, so that is a comparison of paths; it used to read every ancestor
            // of the destination (18 ms at a depth of 256, review s41).
            return Err(Error::Path(PathError::IntoItself));
        }
        let mut moved = src;
        moved.set_name(tname.as_bytes())?;
        // The destination bucket, with room for the entry (splits are transactions of
        // their own that change no name), less what the rename frees there: a replaced
        // entry (same name, so always in the same bucket) and the source entry while it
        // shares the bucket (an independent review: renames over a name, or within a
        // full bucket at the trie's last level, were refused with `DirectoryFull`).
        let need = moved.entry().len();
        let mut tloc = self.rename_target(fdir, fname.as_bytes(), tdir, tname.as_bytes(), need)?;
        let mut replaced = 0;
        if let Some(at) = tloc.found {
            let old = namespace::entry_at(&self.a, &tloc, at)?;
            match (src.kind, old.kind) {
                (Kind::File, Kind::Dir) => return Err(Error::IsADirectory),
                (Kind::Dir, Kind::File) => return Err(Error::NotADirectory),
                (Kind::Dir, Kind::Dir) => {
                    let o = old.object;
                    // check_empty uses `b` only.
                    self.check_empty(o)?;
                }
                _ => {}
            }
            replaced = old.object;
        }
        let p = self.store.payload();
        // Whether a name was replaced (an inline file has no object: `replaced` is 0).
        let existed = tloc.found.is_some();
        if existed {
            namespace::remove_from(&mut self.a, &mut tloc)?;
        }
        let mut floc = namespace::locate(&mut self.store, fdir, fname.as_bytes(), &mut self.b)?;
        let same_page = fdir == tdir && floc.page == tloc.page;
        if same_page {
            // Both names in one bucket: both changes go to `a`.
            floc = tloc;
            floc.found =
                bucket::find(&self.a[..p], &tloc.head, fname.as_bytes())?.map(|(at, _)| at);
            namespace::remove_from(&mut self.a, &mut floc)?;
            tloc = floc;
        } else {
            namespace::remove_from(&mut self.b, &mut floc)?;
        }
        if !namespace::insert_into(&mut self.a, &mut tloc, &moved.entry()) {
            return Err(Error::Corrupted);
        }
        // Page 0's counts: one directory with its one or two buckets, or two.
        let (tc, fc) = if fdir != tdir {
            (
                namespace::count_after(&tloc.root, &[&tloc], self.dir_version())?,
                namespace::count_after(&floc.root, &[&floc], self.dir_version())?,
            )
        } else if same_page {
            (
                namespace::count_after(&tloc.root, &[&tloc], self.dir_version())?,
                namespace::Page0Writes::default(),
            )
        } else {
            (
                namespace::count_after(&tloc.root, &[&tloc, &floc], self.dir_version())?,
                namespace::Page0Writes::default(),
            )
        };
        let parent_link = tdir.to_le_bytes();
        let mut ops = heapless::Vec::<TxOp<'_>, 8>::new();
        push(
            &mut ops,
            TxOp::Write {
                obj: tdir,
                offset: tloc.page as u64 * p as u64,
                data: &self.a[..p],
            },
        )?;
        if !same_page {
            push(
                &mut ops,
                TxOp::Write {
                    obj: fdir,
                    offset: floc.page as u64 * p as u64,
                    data: &self.b[..p],
                },
            )?;
        }
        tc.push_ops(tdir, &mut ops)?;
        fc.push_ops(fdir, &mut ops)?;
        if src.kind == Kind::Dir && fdir != tdir {
            push(
                &mut ops,
                TxOp::Write {
                    obj: src.object,
                    offset: namespace::PARENT_AT,
                    data: &parent_link,
                },
            )?;
        }
        if replaced != 0 {
            push(&mut ops, TxOp::Delete { obj: replaced })?;
        }
        self.store.transact(&ops)?;
        drop(ops);
        self.forget_deleted(replaced);
        Ok(())
    }

    /// Lists a directory: an iterator over its entries that needs no allocation (the
    /// order is the hash order; entries added or removed meanwhile may be missed).
    pub fn read_dir(
        &mut self,
        path: &str,
    ) -> Result<ReadDir<'_, S, PAGE, HANDLES>, Error<S::FlashError>> {
        let comps = path::components(path)?;
        let dir = self.dir_of(comps)?;
        Ok(ReadDir::new(self, dir))
    }
}

/// Adds an op to a transaction being built.
pub(crate) fn push<'x, E>(
    ops: &mut heapless::Vec<TxOp<'x>, 8>,
    op: TxOp<'x>,
) -> Result<(), Error<E>> {
    ops.push(op).map_err(|_| Error::Corrupted)
}
