//! # oftl: an object flash translation layer on raw NAND
//!
//! Objects (byte-addressed, with attributes) stored directly on NAND pages, after the
//! OFTL design (FAST'13):
//!
//! - **Backpointers.** Every page carries 16 bytes saying who owns it, where it belongs,
//!   its write-head sequence number and its transaction, in the ECC-protected free OOB
//!   bytes (in-band trailer on parts with fewer). The index is therefore
//!   reconstructible, so it is **persisted lazily**: only at checkpoints.
//! - **Updating window.** Every data, metadata and log page goes to a block
//!   pre-allocated into the window and recorded in the last checkpoint (index and
//!   object-table pages, a cache recovery never reads back, go to an index head that
//!   takes free blocks directly). After a crash, recovery reads the checkpoint, scans
//!   only the window's pages (OOB reads), replays complete transactions in sequence
//!   order, drops the incomplete tail, rebuilds sizes, relocates the blocks that were
//!   being programmed and writes a new checkpoint. It writes only to blocks the old
//!   checkpoint calls free, so a cut during recovery just makes the next mount start
//!   over.
//! - **Transactions.** A committed write (or [`Oftl::transact`] over several objects, or
//!   the flush of an object's buffered pages) is one transaction: its pages are
//!   consecutive in the data head; the last carries the commit flag. Recovery applies a
//!   head's pages only up to its last commit page.
//! - **Space.** Foreground GC and bounded background steps behind the
//!   [`policy::SpacePolicy`] trait: the built-in [`Greedy`], or [`ParaGc`] for
//!   `paragc`'s victim scoring (greedy / cost-benefit) and wear leveling; wear-aware
//!   window allocation with static wear leveling, factory bad blocks skipped, blocks
//!   that fail a program retired after their data moves, blocks whose reads reach the
//!   ECC scrub threshold collected first. Pool floors keep collection possible at any
//!   fill (see *No dead ends*).
//!
//! On-flash formats are in [`format`]; `docs/SPEC.md` (section 3) collects them.
//!
//! # Usage
//!
//! One constructor, [`Oftl::new`]: a `const fn` taking the flash, a [`Config`] built in
//! a `const` block, and the space policy. On an MCU the store is a `static` with `new`
//! as its initializer, so it is never on the stack. [`Oftl::format`] lays the store out
//! as the configuration says; [`Oftl::mount`] takes the layout from the superblock and
//! recovers from a crash; [`Oftl::mount_damaged`] reaches a store a normal mount refuses
//! for lost pages; [`Oftl::unmount`] ends a session. All take `&mut self` and may be
//! called again on the same value.
//!
//! ```
//! use nand_hal::sim::{profile, FaultPlan, SimNand};
//! use oftl::{Config, Greedy, MountError, ObjKind, Oftl};
//!
//! // The TINY simulated part (64 blocks): 2 KiB pages, tables for 64 blocks, 4 cached
//! // pages. A W25N01GV takes `oftl::W25n01gv<_>`.
//! type Store<F> = Oftl<F, 2048, 64, 4>;
//! const CONFIG: Config = Config::new().window_blocks(6);
//!
//! let mut flash = SimNand::heap(profile::TINY, FaultPlan::seeded(1));
//! let mut store = Store::new(&mut flash, CONFIG, Greedy::DEFAULT);
//! match store.mount() {
//!     Ok(()) => {}
//!     // First boot (a blank part). Any other error keeps the data: a `MediaLoss` is
//!     // for `mount_damaged`, never a reason to format.
//!     Err(MountError::NotFormatted) => store.format().unwrap(),
//!     Err(e) => panic!("mount: {e:?}"),
//! }
//! let id = store.create(ObjKind::Object).unwrap();
//! store.write(id, 0, b"hello").unwrap();
//! store.flush(id).unwrap(); // durable
//! store.unmount().unwrap();
//!
//! store.mount().unwrap();
//! let mut buf = [0u8; 5];
//! assert_eq!(store.read(id, 0, &mut buf).unwrap(), 5);
//! assert_eq!(&buf, b"hello");
//! ```
//!
//! # Guarantees after power loss
//!
//! These are the only durability promises; everything else is best effort.
//!
//! - Each `write`/`truncate`/`delete`/`set_attrs`/`transact`/`log_append`/
//!   `log_append_batch`/`log_trim` is all-or-nothing (a batch: all its records or none).
//! - **Writes are buffered** (see *Write-back buffering*): after a crash each object is
//!   a prefix of its write history that contains everything acknowledged by
//!   [`Oftl::flush`] of that object or [`Oftl::sync`]; unflushed writes may be lost, but
//!   only as a suffix of that object's history (a later write never survives an earlier
//!   one to the same object).
//! - **Durable on return** (with every earlier write to the objects they touch):
//!   `flush`, `sync`, `unmount`, `create`, `truncate`, `delete`, `set_attrs`,
//!   `transact`, a `write` spanning more than one page, `log_append`,
//!   `log_append_batch`, `log_trim`. A
//!   buffered write that happens to complete a page may reach flash earlier, but that
//!   is not promised: only the operations listed here are durable. Each committed
//!   transaction is wholly present or wholly absent.
//! - `sync` flushes every object and writes a checkpoint (the next crash scans less);
//!   `unmount` flushes everything.
//! - "Page" in these guarantees is the object payload page ([`Oftl::payload`] bytes):
//!   the whole NAND page on parts with enough ECC-protected spare bytes for the
//!   backpointer, the page less a 20-byte trailer on parts without (in-band placement).
//! - Integrity: with the backpointer in the spare area (the usual placement) a data
//!   page carries no CRC of its payload: the part's ECC is the integrity check (an
//!   uncorrectable page reads as a [`ReadError::Flash`] error, never as data). In-band
//!   placement adds a CRC-32 of the payload; metadata, index, object-table, checkpoint
//!   and log pages carry their own CRCs on every part.
//!
//! # Errors, read errors and media loss
//!
//! - An operation that returns an error has changed nothing, buffered writes included,
//!   except the errors documented to **poison** the handle (RAM may then be ahead of
//!   flash; remount): [`WriteError::Flash`], [`WriteError::Corrupted`],
//!   [`WriteError::Exhausted`]. [`WriteError::NoSpace`] never poisons.
//! - Every read is retried a bounded number of times before it counts: a transient
//!   uncorrectable read never ends a history. A page of the updating window that stays
//!   unreadable while later pages prove it was written is media loss: mount fails with
//!   [`MountError::MediaLoss`] naming the page instead of passing an older state off
//!   as current. [`Oftl::mount_damaged`] with [`Damaged::Salvage`] (read-only) or
//!   [`Damaged::Repair`] (which checkpoints the result) replay up to the
//!   first loss and stop, naming what they roll back ([`SalvageReport`]). A data
//!   page whose backpointer reads but whose payload does not is mapped as usual; reads
//!   of it return the flash error.
//! - Checkpoint sequence numbers are never reused, and mount never falls back past a
//!   checkpoint whose window was in use (each checkpoint is read back and marked before
//!   its window is programmed).
//!
//! # No dead ends
//!
//! Operations that add or rewrite data keep a floor of free blocks (collecting first,
//! failing with `NoSpace` before anything changes if they cannot); deletes, truncates
//! and trims may go below it, into a reserve only they use, so on a device full to the
//! last page they still succeed, also after a crash at the worst moment; and at the
//! floor a collection always has room to run, so while invalid pages exist the store
//! keeps making progress (at every window size `format` accepts). When grown bad blocks
//! leave fewer good blocks than the live data, a smallest window and that floor
//! ([`Oftl::min_good_blocks`]) or fewer than two good checkpoint blocks, the store turns
//! read-only ([`Oftl::health`]): everything readable still reads, writes and deletes
//! fail with [`WriteError::ReadOnly`]. See the `space` module and the crate README.
//! A refused operation's work is bounded: the collections it runs to make room stop
//! once they stall or once fresh windows stop adding to the pool, and no collection
//! moves a wholly valid block for wear while the pool is below the growth floor.
//!
//! # Write-back buffering
//!
//! `WBUF` page-sized buffers (default [`DEFAULT_WBUF`] = 2) hold data pages of objects:
//! a write inside one page lands in a buffer and nothing is programmed; the page is
//! programmed when a write reaches its end (a complete append page), when its buffer is
//! needed for another page (least recently used), or at `flush(obj)`/`sync`/`unmount`.
//! Programming one buffered page of an object programs all of that object's dirty pages
//! as one transaction, which is what keeps each object a prefix of its history. Reads see
//! buffered data. Costs:
//!
//! - an append stream of small writes programs each page once (WA ~1);
//! - `flush` programs each dirty page of the object once (nothing if none is dirty): a
//!   flushed partial tail page that is appended to again is reprogrammed as a new copy
//!   (the old one becomes invalid), so *n* small appends each followed by `flush` cost
//!   *n* programs (WA = page size / write size, ~32 for 64 B on 2 KiB pages);
//! - a small overwrite of a page that is not buffered reads it first, and costs one
//!   program when its buffer is evicted (shared by all writes to it meanwhile);
//! - `truncate` to a size other than 0, `set_attrs` and `transact` first commit the
//!   touched objects' buffered pages.
//!
//! # RAM
//!
//! Everything lives in the [`Oftl`] value, sized by its const parameters: `PAGE`
//! (page size), `BLOCKS` (the block table, 4 B per block), `CACHE` (cached object-table
//! and index pages, `META` + 20 B each; `META` is the page size unless a small-RAM
//! build formats smaller metadata units, SPEC 3.2), `WBUF` (write buffers, `PAGE` +
//! 24 B each), plus two scratch pages, the log tail page (`LOG`: `PAGE`, or 0 in a
//! build without log streams), a window list of [`MAX_WINDOW`] entries and a list of
//! cache write-backs in flight. The number of objects costs no RAM: their records are
//! in the on-flash object table ([`format::table`]). Measured on a Cortex-M4 (QEMU, see
//! the README), the store in a `static` plus the peak stack from the call into it (a
//! workload with a power cut and the recovering mount):
//!
//! | configuration | `static` | stack | RAM |
//! |---|---|---|---|
//! | [`W25n01gv`] (`PAGE` 2048, `BLOCKS` 1024, `CACHE` 7, `WBUF` 2) | 29,936 B | 2,932 B | 32,868 B |
//! | [`W25n01gvLarge`] (`CACHE` 12) | 40,376 B | 2,932 B | 43,308 B |
//! | [`W25n01gvSmall`] (`CACHE` 4, `WBUF` 1, `META` 512, `LOG` 0: objects only) | 13,416 B | 2,848 B | 16,264 B |
//!
//! Of the default's 29,936 B, 14,476 are the 7 cached pages, 6,144 the three page
//! buffers, 4,144 the write buffers and 4,096 the block table (a test keeps `size_of`
//! <= 29.5 KiB on the host). The small one keeps 2,128 B of cache (4 slots of 512 B),
//! one write buffer, the two scratch pages and the same block table. Nothing allocates;
//! stack use is a few frames plus cache write-back recursion: each nested write-back
//! cleans a dirty cached page, so the nesting (and the list of write-backs in flight)
//! never exceeds `CACHE`. That holds when the store lives in a `static` built by
//! [`Oftl::new`] (a `const fn`) and is formatted/mounted in place ([`Oftl::format`],
//! [`Oftl::mount`], [`Oftl::unmount`] take `&mut self`).
//!
//! # Log streams
//!
//! [`Oftl::log_append`], [`Oftl::log_read`], [`Oftl::log_trim`]: append-only records on
//! their own write head, sector-granular with partial programs (see the `log` module
//! docs in the source).
//!
//! # Status
//!
//! See `README.md`.
#![cfg_attr(not(test), no_std)]
#![deny(unsafe_code)]
#![warn(missing_docs)]

// First: the message macros the modules below use.
#[macro_use]
mod fmt;

pub mod errors;
pub mod format;
pub mod policy;

mod blocks;
mod cache;
mod checkpoint;
mod gc;
mod heads;
mod io;
mod log;
mod mapping;
mod mount;
pub(crate) mod objtab;
mod para;
mod read;
#[cfg(feature = "alloc")]
mod rebuild;

/// Fuzzing builds only (`cfg(fuzzing)`, as cargo-fuzz sets it).
#[cfg(fuzzing)]
#[doc(hidden)]
pub mod fuzzing {
    use core::sync::atomic::{AtomicBool, Ordering};

    static SKIP_CRC: AtomicBool = AtomicBool::new(false);

    /// Makes every stored CRC compare equal (`on`), so an image fuzzer reaches the
    /// parsers behind the CRCs; off by default, and off for the operation fuzzers,
    /// whose checks rely on the CRCs catching torn sectors.
    pub fn skip_crc_checks(on: bool) {
        SKIP_CRC.store(on, Ordering::Relaxed);
    }

    pub(crate) fn crc_checks_skipped() -> bool {
        SKIP_CRC.load(Ordering::Relaxed)
    }
}
mod recovery;
mod scratch;
mod session;
mod space;
mod txn;
mod wbuf;
mod write;

use nand_hal::{Capabilities, Geometry, NandFlash};

pub use blocks::BlockInfo;
pub use errors::{Corrupted, FormatError, Mismatch, MountError, ReadError, WriteError};
pub use format::checkpoint::{BlockState, ObjKind};
pub use format::meta::ATTR_LEN;
pub use gc::GcProgress;
use io::Dev;
pub use log::LogRecord;
/// Block and page addresses, as the HAL names them (the policy trait takes blocks).
pub use nand_hal::{BlockAddr, PageAddr};
pub use objtab::{ObjectIds, ID_RUN};
pub use para::ParaGc;
pub use policy::{Greedy, Relocation, SpacePolicy, Urgency};
pub use recovery::SalvageReport;
pub use txn::TxOp;

use format::checkpoint::NONE;
use format::superblock::Superblock;
pub use format::superblock::{MAX_CKPT_BLOCKS, MIN_CKPT_BLOCKS};

/// Write-back buffers in the default configurations (see [`Oftl`]'s `WBUF`).
pub const DEFAULT_WBUF: usize = 2;

/// Most blocks an updating window can hold.
pub const MAX_WINDOW: usize = 32;

/// Write head of object data and metadata (and GC copies when the policy does not send
/// them to the cold head).
pub(crate) const DATA_HEAD: usize = 0;

/// Write head of index and object-table pages (cache write-backs); its blocks come from
/// the free pool, not the window.
pub(crate) const INDEX_HEAD: usize = 3;

/// Object id.
pub type ObjectId = u32;

/// Format-time configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Config {
    /// Blocks in the updating window, from [`Oftl::min_window_blocks`] (which depends on
    /// `CACHE` and the part's block size) to [`MAX_WINDOW`]; `format` refuses a smaller
    /// one with [`FormatError::WindowTooSmall`] and `mount` an image with one with
    /// [`MountError::WindowTooSmall`]. Larger windows checkpoint less often (less write
    /// amplification) and make crash recovery scan more; well above the minimum is
    /// best (see the crate README's sizing rule).
    pub window_blocks: u16,
    /// An id stamped into the superblock to tell images apart.
    pub format_id: u32,
    /// Log-stream pages take several programs: a synced append programs only the
    /// sectors it needs and the next append continues the same page (up to the part's
    /// NOP), so a small append costs one sector. `false` is the **NOP = 1 mode**: every
    /// append programs a fresh page, for boards that report failures on the third or
    /// fourth partial program of a page (it trades write amplification, one page per
    /// append, for that safety). Recorded in the superblock.
    pub log_partial_programs: bool,
    /// Checkpoint blocks reserved at format, [`MIN_CKPT_BLOCKS`] to [`MAX_CKPT_BLOCKS`];
    /// 0 picks one per 64 blocks of the part within those bounds (16 on a 1,024-block
    /// part). A checkpoint is written whenever the window fills, at every sync, and
    /// when a crash recovery would take longer than the window's scan (an operation
    /// whose cache wrote many pages back since the last one); the blocks take them in
    /// rotation, so more blocks spread their erases (each erase takes about a dozen
    /// checkpoints). Each costs a block of capacity and a few reads at every mount
    /// (about 0.4 ms on SPI NAND). Recorded in the superblock.
    pub checkpoint_blocks: u8,
    /// The format makes an image for another part (a factory image written onto parts
    /// with bad blocks of their own), not a store on this one: its erases are then not
    /// counted, so the store reads the factory marker of each block before that block's
    /// first erase in use, whatever value a datasheet gives such markers. In place
    /// (`false`, the default), format's erases count: the block was good then, so a
    /// later erase the power cuts, whose random bits land in the marker bytes, does not
    /// retire it (only a marker that reads as written does; a healthy part lost a block
    /// at 255 of 256 such cuts in a block's first erase since format, and a full volume
    /// then refused every write, independent review s51). Not recorded.
    pub for_image: bool,
}

impl Config {
    /// The defaults: a 16-block window, format id 1, partial programs of log pages on.
    /// Meant for a `const` block, with the builders below:
    /// `const { Config::new().window_blocks(24) }`.
    pub const fn new() -> Self {
        Config {
            window_blocks: 16,
            format_id: 1,
            log_partial_programs: true,
            checkpoint_blocks: 0,
            for_image: false,
        }
    }

    /// Sets [`Config::for_image`].
    pub const fn for_image(mut self, on: bool) -> Self {
        self.for_image = on;
        self
    }

    /// Sets [`Config::checkpoint_blocks`].
    pub const fn checkpoint_blocks(mut self, n: u8) -> Self {
        self.checkpoint_blocks = n;
        self
    }

    /// The checkpoint blocks a format picks on a part of `blocks` blocks.
    pub const fn checkpoint_blocks_for(&self, blocks: u32) -> usize {
        let n = if self.checkpoint_blocks == 0 {
            (blocks / 64) as usize
        } else {
            self.checkpoint_blocks as usize
        };
        if n < MIN_CKPT_BLOCKS {
            MIN_CKPT_BLOCKS
        } else if n > MAX_CKPT_BLOCKS {
            MAX_CKPT_BLOCKS
        } else {
            n
        }
    }

    /// Sets [`Config::window_blocks`].
    pub const fn window_blocks(mut self, blocks: u16) -> Self {
        self.window_blocks = blocks;
        self
    }

    /// Sets [`Config::format_id`].
    pub const fn format_id(mut self, id: u32) -> Self {
        self.format_id = id;
        self
    }

    /// Sets [`Config::log_partial_programs`].
    pub const fn log_partial_programs(mut self, on: bool) -> Self {
        self.log_partial_programs = on;
        self
    }
}

impl Default for Config {
    fn default() -> Self {
        Self::new()
    }
}

/// How [`Oftl::mount_damaged`] treats a store that fails a normal mount with
/// [`MountError::MediaLoss`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Damaged {
    /// Read-only, past unreadable pages: to copy out what is intact. Recovery replays
    /// each head up to its first lost page (an unreadable page with later ones behind
    /// it, or a metadata record that does not read) and stops there, as a journal
    /// replay stops at its first bad record; when one head lost a page and the other
    /// also moved since the checkpoint, both stop at the checkpoint (the heads have no
    /// order between them). Every object then holds a state it had, never a mix.
    /// [`Oftl::salvage_report`] lists the unreadable pages and names the objects whose
    /// changes were left out; every other object reads exactly as acknowledged.
    ///
    /// Writes, deletes and collection fail with [`WriteError::ReadOnly`]. Nothing the
    /// store references is written, so a later normal mount (once the media reads
    /// again, or after a copy) starts from the same state; the only programs are
    /// index-cache write-backs (the replay's and reads' evictions), which go to blocks
    /// the checkpoint calls free: first the erased pages of one an earlier such mount
    /// began, then erased ones (a block whose erase fails there is marked bad).
    Salvage,
    /// Replays as [`Damaged::Salvage`] does, then finishes as a normal recovery does
    /// (relocations and a closing checkpoint), so that state becomes the store's: the
    /// store is mounted writable and later mounts are normal. [`Oftl::salvage_report`]
    /// names the objects whose later changes were left out; they are gone for good
    /// (copy out with a salvage mount first if that matters). A store that mounts
    /// normally is mounted normally (nothing left out).
    ///
    /// Power loss: a cut during the repair leaves the store as before it (the closing
    /// checkpoint is what commits it); repair again.
    Repair,
    /// Rebuilds the store's tables from a scan of every page's backpointer and mounts
    /// the result writable (see the module docs of `rebuild`, and DESIGN 7.5): for a
    /// store that does not mount, or whose objects do not read, because checkpoint,
    /// index or object-table pages are lost. It needs a readable superblock copy (the
    /// superblock is written once, twice over, at format).
    ///
    /// [`Oftl::salvage_report`] then says [`SalvageReport::rebuilt`], lists pages that
    /// did not read, and names objects whose state is in doubt (a metadata page that
    /// did not read, data pages with no metadata page left). A store that mounts and
    /// reads normally needs none of this: try [`Oftl::mount`] first. Needs the
    /// `alloc` feature (the scan's findings are held in RAM: about 16 bytes per
    /// programmed page).
    ///
    /// An object whose every metadata page is lost (while some page did not read) comes
    /// back from its data pages under a new metadata page carrying `lost_meta_attrs`
    /// as its user attributes, and is named: the layer above decides what attributes
    /// are safe for an object it knows nothing more of (oftl's own users may pass
    /// `[0xFF; ATTR_LEN]`).
    ///
    /// Power loss: a cut during the rebuild leaves every page it would keep untouched;
    /// rebuild again.
    #[cfg(feature = "alloc")]
    Rebuild {
        /// User attributes for objects rebuilt without a metadata page.
        lost_meta_attrs: [u8; ATTR_LEN],
    },
}

/// Object attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Attrs {
    /// Kind.
    pub kind: ObjKind,
    /// Size in bytes.
    pub size: u64,
    /// User attribute bytes.
    pub user: [u8; ATTR_LEN],
}

/// Whether the store can write ([`Oftl::health`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Health {
    /// Reads and writes work.
    Writable,
    /// Not mounted (never, or unmounted), or poisoned by a failure that may have left
    /// RAM ahead of flash: every operation fails with `Poisoned` until a format or
    /// mount succeeds.
    NotMounted,
    /// Mounted (or turned) read-only: every readable object reads as before; writes,
    /// deletes and collection fail with [`WriteError::ReadOnly`] and change nothing.
    ReadOnly(ReadOnlyReason),
}

/// Why a store is read-only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ReadOnlyReason {
    /// Mounted by [`Oftl::mount_damaged`] with [`Damaged::Salvage`].
    Salvage,
    /// Fewer than two good checkpoint blocks are left (a checkpoint could only be
    /// written over the one the store mounts from), or a checkpoint failed to program
    /// or to read back on every attempt.
    CheckpointBlocks,
    /// Grown bad blocks left fewer good blocks than the live data plus what collection
    /// and crash recovery need (the shrink floor, see [`Oftl::min_good_blocks`]), or a
    /// crash recovery found no room to finish.
    GoodBlocks,
}

/// Flash activity and recovery figures since mount.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Stats {
    /// Checkpoints written.
    pub checkpoints: u32,
    /// Pages copied by GC and recovery relocation.
    pub relocated_pages: u64,
    /// Index pages written because the cache was full.
    pub index_evictions: u64,
    /// Pages scanned by the last crash recovery (0 after a clean mount).
    pub recovery_scanned_pages: u32,
    /// Pages replayed by the last crash recovery.
    pub recovery_replayed_pages: u32,
    /// Blocks retired as grown bad.
    pub retired_blocks: u32,
    /// Pages programmed through the write heads (object data and metadata, GC copies,
    /// index and object-table write-backs; not checkpoints or log sectors).
    pub pages_programmed: u64,
}

impl Stats {
    const ZERO: Stats = Stats {
        pages_programmed: 0,
        checkpoints: 0,
        relocated_pages: 0,
        index_evictions: 0,
        recovery_scanned_pages: 0,
        recovery_replayed_pages: 0,
        retired_blocks: 0,
    };
}

/// An OFTL instance over flash `F`.
///
/// `PAGE` must equal the device page size, `BLOCKS` be at least its block count;
/// `CACHE` (>= 4) bounds the cached object-table and index pages, `WBUF` (<= 64; 0
/// makes every write synchronous) the write-back buffers. `P` chooses victims and free
/// blocks. `META` is the payload of an object-table or index page as this build
/// formats it and the size of a cache slot: the page's payload (the default, `PAGE`),
/// or a multiple of the program unit below it for a small-RAM build
/// ([`W25n01gvSmall`]: 512 B slots; SPEC 3.2). A build mounts any store whose unit is
/// at most `META`. The number of objects is bounded by flash, not RAM: their records
/// live in the on-flash object table ([`format::table`]). `LOG` is the log tail's page
/// image: `PAGE` (the default), or 0 for a build without log streams (their creation
/// and appends are refused with [`WriteError::NoLogStreams`], and so is a mount whose
/// crash recovery would replay log pages, with `Mismatch(Capacity)`; on a store another
/// build gave log streams, it reads and trims them, and its collection leaves blocks
/// with live log pages alone): a page less RAM, for stores of objects only
/// ([`W25n01gvSmall`]).
pub struct Oftl<
    F: NandFlash,
    const PAGE: usize,
    const BLOCKS: usize,
    const CACHE: usize,
    const WBUF: usize = DEFAULT_WBUF,
    P: SpacePolicy = Greedy,
    const META: usize = PAGE,
    const LOG: usize = PAGE,
> {
    pub(crate) dev: Dev<F, P, BLOCKS>,
    /// How `format` lays the store out.
    config: Config,
    /// Object-table and index pages, and the table root's address.
    pub(crate) cache: cache::PageCache<META, CACHE>,
    /// Write-back buffers: dirty (or clean, cached) data pages of objects.
    pub(crate) wbuf: wbuf::WriteBuffers<PAGE, WBUF>,
    /// The two scratch pages and the rule that keeps their uses apart.
    pub(crate) scratch: scratch::Scratch<PAGE>,
    /// The log page the next append may continue, and its image as programmed (during
    /// a recovery: the last log page with accepted sectors, read once).
    pub(crate) log_tail: log::LogTail<LOG>,
    pub(crate) ckpt: checkpoint::CkptPos,
    /// Live objects and the next id.
    pub(crate) ids: objtab::Ids,
    /// Mounted or not, read-only or not, and the kind of mount running.
    pub(crate) session: session::Session,
    /// What the last salvage or repair mount left out.
    pub(crate) salvaged: recovery::SalvageReport,
    /// Where collection stands between steps.
    pub(crate) gc: gc::Collection,
    /// Window size the next checkpoint allocates.
    pub(crate) window_target: u16,
}

/// The default configuration for a W25N01GV (1 Gbit, 2 KiB pages, 1024 blocks): 7
/// cached object-table and index pages, 2 write-back buffers; under 32 KiB all told on
/// a Cortex-M4, so it fits MCUs with 64 KiB of RAM (see *RAM* in the crate docs).
pub type W25n01gv<F> = Oftl<F, 2048, 1024, 7>;

/// A W25N01GV configuration for MCUs with RAM to spare: 12 cached pages instead of 7
/// (about 10 KiB more), the rest as [`W25n01gv`]. Same format: either opens the other's
/// volumes. Workloads whose object-table and index pages outnumber 7 run faster with
/// it (many small files in use at once: the benchmark's `varmail`, 9% faster), and
/// their crash recovery writes fewer cache pages back.
pub type W25n01gvLarge<F> = Oftl<F, 2048, 1024, 12>;

/// A W25N01GV configuration for MCUs with little RAM (16 KiB all told on a Cortex-M4),
/// for objects only: object-table and index pages of one 512-byte program unit
/// (`META` 512), cached in 4 slots of that size, one write-back buffer, and no log
/// streams (`LOG` 0: no log tail page). Its stores keep 128 index entries and 16
/// object records per metadata page (a quarter of a page's, so the largest object is
/// 32 MiB and metadata takes more pages); [`W25n01gv`] and [`W25n01gvLarge`] mount
/// them too, not the reverse. The file layer needs log streams: under it, use
/// `Oftl<F, 2048, 1024, 4, 1, Greedy, 512>` (a page more).
pub type W25n01gvSmall<F> = Oftl<F, 2048, 1024, 4, 1, Greedy, 512, 0>;

impl<
        F: NandFlash,
        P: SpacePolicy,
        const PAGE: usize,
        const BLOCKS: usize,
        const CACHE: usize,
        const WBUF: usize,
        const META: usize,
        const LOG: usize,
    > Oftl<F, PAGE, BLOCKS, CACHE, WBUF, P, META, LOG>
{
    const CACHE_OK: () = assert!(CACHE >= 4, "CACHE must be at least 4");
    const WBUF_OK: () = assert!(WBUF <= 64, "WBUF must be at most 64");
    const META_OK: () = assert!(META <= PAGE, "META must be at most PAGE");
    const LOG_OK: () = assert!(LOG == 0 || LOG == PAGE, "LOG must be 0 or PAGE");

    /// Checks that this build's tables fit a device.
    pub(crate) fn check_fit(geo: &Geometry, caps: &Capabilities) -> Result<(), Mismatch> {
        #[allow(clippy::let_unit_value)]
        let _ = Self::CACHE_OK;
        #[allow(clippy::let_unit_value)]
        let _ = Self::WBUF_OK;
        #[allow(clippy::let_unit_value)]
        let _ = Self::META_OK;
        #[allow(clippy::let_unit_value)]
        let _ = Self::LOG_OK;
        if geo.page_size() as usize != PAGE || geo.blocks() as usize > BLOCKS {
            return Err(Mismatch::Capacity);
        }
        if geo.page_size() > 4096
            || geo.pages_per_block() > 512
            || geo.pages_per_block() < 4
            || caps.program_unit < 128
            || caps.validate(geo).is_err()
            || geo.pages() as u64 >= NONE as u64
        {
            return Err(Mismatch::Geometry);
        }
        Ok(())
    }

    /// The store over `flash`, unmounted, without any I/O: the one way to build one.
    ///
    /// `config` says how [`Oftl::format`] lays the store out (a mount takes the layout
    /// from the superblock instead); build it in a `const` block,
    /// `const { Config::new().window_blocks(24) }`. `policy` is the space policy
    /// ([`Greedy::DEFAULT`], or [`ParaGc`]). Then [`Oftl::format`] or [`Oftl::mount`]
    /// it (or [`Oftl::mount_damaged`] after a `MediaLoss`); [`Oftl::unmount`] ends a
    /// session, and a later mount starts the next one in the same value. Until a format
    /// or mount succeeds, operations that touch flash fail with `Poisoned`, and the
    /// figures read without flash (`payload`, `capacity_pages`, `health`,
    /// `log_max_record`, ...) describe no store: zeros or placeholders, never a panic.
    ///
    /// A `const fn`: on an MCU put the store in a `static` (the compiler builds its
    /// initial value; nothing of it is ever on the stack, only the I/O buffers of
    /// single operations are). Built on the stack it is large (see *RAM*). Format and
    /// mount read the device's geometry and capabilities and reject a device that does
    /// not fit this build's const parameters.
    pub const fn new(flash: F, config: Config, policy: P) -> Self {
        Oftl {
            dev: Dev::new(flash, policy),
            config,
            cache: cache::PageCache::new(),
            wbuf: wbuf::WriteBuffers::EMPTY,
            scratch: scratch::Scratch::EMPTY,
            log_tail: log::LogTail::<LOG>::CLOSED,
            ckpt: checkpoint::CkptPos::START,
            ids: objtab::Ids::FRESH,
            session: session::Session::UNMOUNTED,
            salvaged: recovery::SalvageReport::new(),
            gc: gc::Collection::IDLE,
            window_target: 0,
        }
    }

    /// Resets every in-RAM table in place for superblock `sb` (the flash and the policy
    /// stay). The store stays poisoned: the caller clears that once it is mounted.
    pub(crate) fn reset_state(&mut self, sb: Superblock) {
        self.dev.reset(sb);
        self.cache.reset(io::NO_PAGE);
        self.wbuf.reset();
        self.scratch.reset();
        self.log_tail.reset();
        self.ckpt = checkpoint::CkptPos::START;
        self.ids = objtab::Ids::FRESH;
        self.session.reset();
        self.salvaged = recovery::SalvageReport::new();
        self.gc = gc::Collection::IDLE;
        self.window_target = sb.window_blocks;
    }

    /// The flash device.
    pub fn flash(&self) -> &F {
        self.dev.flash()
    }

    /// The flash device, mutably (for tests and tools; writing behind the OFTL's back
    /// breaks it).
    pub fn flash_mut(&mut self) -> &mut F {
        self.dev.flash_mut()
    }

    /// Gives the flash device back, writing nothing: [`Oftl::unmount`] first to keep
    /// what is buffered.
    pub fn into_flash(self) -> F {
        self.dev.into_flash()
    }

    /// Figures since mount.
    pub fn stats(&self) -> Stats {
        *self.dev.stats()
    }

    /// The block table (coarse state, valid pages, erase count).
    pub fn blocks(&self) -> &[BlockInfo] {
        self.dev.table().all()
    }

    /// Object payload bytes per page.
    pub fn payload(&self) -> u32 {
        self.dev.payload()
    }

    /// Pages currently valid (data, metadata and index).
    pub fn used_pages(&self) -> u64 {
        self.dev.table().valid_total()
    }

    pub(crate) fn entries_per_index(&self) -> usize {
        self.dev.meta_payload() as usize / 4
    }

    /// Largest object size this format can index.
    pub fn max_object_size(&self) -> u64 {
        let e = self.entries_per_index() as u64;
        (e * e).min(format::backpointer::MAX_U24 as u64) * self.dev.payload() as u64
    }

    /// Whether the store can write, and if not, why.
    pub fn health(&self) -> Health {
        if self.session.poisoned() {
            return Health::NotMounted;
        }
        match self.session.read_only() {
            Some(reason) => Health::ReadOnly(reason),
            None => Health::Writable,
        }
    }

    /// Turns the store read-only for `reason` (nothing changes on flash).
    pub(crate) fn go_read_only(&mut self, reason: ReadOnlyReason) {
        self.dev.writes_cache_only();
        if self.session.go_read_only(reason) {
            warn!("oftl: the store goes read-only ({:?})", reason);
        }
    }

    /// [`Oftl::check_usable`] for operations that change anything: refused (with
    /// nothing changed) when the store is read-only.
    pub(crate) fn check_writable<E>(&self) -> Result<(), errors::Fault<E>> {
        self.check_usable()?;
        if self.session.read_only().is_some() {
            return Err(errors::Fault::ReadOnly);
        }
        Ok(())
    }

    pub(crate) fn check_usable<E>(&self) -> Result<(), errors::Fault<E>> {
        if self.session.poisoned() {
            Err(errors::Fault::Poisoned)
        } else {
            Ok(())
        }
    }
}

/// Unit tests build stores by value: [`Oftl::new`] with the default policy, then
/// `format` or `mount`.
#[cfg(test)]
impl<
        F: NandFlash,
        P: SpacePolicy + Default,
        const PAGE: usize,
        const BLOCKS: usize,
        const CACHE: usize,
        const WBUF: usize,
        const META: usize,
        const LOG: usize,
    > Oftl<F, PAGE, BLOCKS, CACHE, WBUF, P, META, LOG>
{
    pub(crate) fn formatted(flash: F, config: Config) -> Result<Self, FormatError<F::Error>> {
        let mut fs = Self::new(flash, config, P::default());
        fs.format()?;
        Ok(fs)
    }

    pub(crate) fn mounted(flash: F) -> Result<Self, MountError<F::Error>> {
        let mut fs = Self::new(flash, Config::new(), P::default());
        fs.mount()?;
        Ok(fs)
    }
}
