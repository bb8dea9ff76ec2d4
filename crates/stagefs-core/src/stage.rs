//! The staging log: small synchronous writes to files with their own objects are made
//! durable as records in an oftl log stream (one 512-byte sector for a 64-byte
//! `fsync`), and reach their page-aligned homes later, many at once (**patching**).
//!
//! The bytes themselves stay where every write puts them, in the object (oftl's
//! write-back buffers, programmed home when a page completes or is evicted); the log
//! holds the durable copy until a patch flushes the object. So reads never consult the
//! log, and no staged byte is pinned in this layer's RAM: it keeps only the list of
//! objects with records since the last patch.
//!
//! **Versions.** Each file object's oftl attributes hold a version: the log position
//! below which its records are superseded. Replay (at mount) applies a record only if
//! its LSN is at or above its object's version. Every durable change to an object that
//! does not go through the log (a patch, a direct flush, a truncate) sets the version to
//! the log's end in the same oftl transaction, so an old record can never be replayed
//! over newer acknowledged bytes. Writes that reach flash without being acknowledged
//! (a buffer evicted) may be overwritten by replay with the last acknowledged bytes,
//! which is what a crash may leave anyway.
//!
//! **Patching** flushes every object with records (pages and version in one
//! transaction each) and trims the log to its end: when the list of objects is full,
//! when the records since the last patch pass [`STAGE_LIMIT`] bytes or could make
//! replay write more than [`REPLAY_PAGES`] pages (together they bound the replay at
//! mount), at `sync` and at unmount.
//!
//! **Bypass.** An fsync stages only when its records cost fewer programmed bytes than
//! writing the dirty pages home (sectors of 512 bytes against whole pages); large or
//! scattered dirty data goes home directly; so does a commit that does not continue
//! its file's previous one (not an append to it, not on its last page: random
//! overwrites, a file's first write), whose page the patch would program anyway.
//! Staging must also pay once the staged
//! bytes reach home: each patch computes the staging efficiency E = direct / (logged +
//! patched) in programmed bytes over the object commits since the last one (what
//! writing them home at each fsync would have cost, against the log sectors plus the
//! pages that buffer write-backs and the patch programmed for staged objects). Below 1
//! (small writes scattered over more pages than the write-back buffers hold, files
//! written once), the next [`OBJECT_PROBE`] object commits go home directly, then
//! staging is measured again.
//!
//! **Inline files.** Closing (or fsyncing) a changed inline file stages its whole new
//! contents as one record and notes `(directory, name) -> record` in a small table
//! ([`INLINE_STAGED`] entries); opening it reads the contents back from the log. A patch
//! rewrites each bucket once for all its staged names. That pays only when several
//! records land in one bucket between patches (a file rewritten often); when a patch
//! writes about as many buckets as it had records (many files touched once), inline
//! staging is bypassed for the next [`INLINE_PROBE`] commits, twice as many after each
//! such patch in a row (up to [`INLINE_PROBE_MAX`]). Any change of a staged name
//! that does not go through the log (remove, rename, attributes, growing into an object,
//! a bypassed commit) patches first, so the log never holds a record older than a
//! name's directory entry: replay applies inline records in order, unconditionally. A
//! commit that grows its entry is staged only when the bucket has room for what every
//! staged name of it adds (`Fs::staged_growth`), and direct changes that add to a
//! bucket keep that room: a patch never has to split a bucket (impossible at the trie's
//! last level), so it cannot fail for room.

use crate::error::Error;
use crate::format::bucket;
use crate::format::stage::{self, Record};
use crate::namespace::{self, Loc};
use crate::store::Store;
use crate::Fs;

/// Objects with records since the last patch.
pub const LIVE: usize = 8;
/// Inline files with staged contents since the last patch.
pub const INLINE_STAGED: usize = 8;
/// Commits of inline files that bypass staging after a patch showed it did not pay;
/// each further patch that shows it again doubles the bypass, up to
/// [`INLINE_PROBE_MAX`], and one that pays sets it back to this.
pub const INLINE_PROBE: u16 = 256;
/// The longest bypass of inline staging (see [`INLINE_PROBE`]).
pub const INLINE_PROBE_MAX: u16 = 4096;
/// Commits of file objects that bypass staging after a patch showed it did not pay
/// (then one more patch's worth is staged to measure again).
pub const OBJECT_PROBE: u16 = 4096;
/// Record bytes since the last patch that trigger one (bounds the log replayed at
/// mount after a crash to this much plus one record).
pub const STAGE_LIMIT: u64 = 16 * 1024;
/// Pages that replaying the records since the last patch may have to write (records on
/// a page other than the previous record's) that trigger one: replay writes a page for
/// each, so this bounds the replay's programs as [`STAGE_LIMIT`] bounds its reads.
pub const REPLAY_PAGES: u32 = 64;
/// Reads of a staging log record, each through the store's own retries, that must all
/// find it lost before a repair drops it and what follows (see `Fs::next_commit`).
const REPAIR_READS: u32 = 16;

/// Collection steps a mount's replay that finds no room may take, the replay tried
/// again after each (see `collect_for_replay`).
const REPLAY_COLLECT_STEPS: u32 = 16;
/// Page copies of each of those steps.
const REPLAY_COLLECT_COPIES: u32 = 64;

/// Bytes of a log sector's payload (a 512-byte program unit less its 20-byte trailer):
/// what one staged sector holds.
const SECTOR_PAYLOAD: usize = 492;
/// Bytes programmed per staged sector.
const SECTOR: usize = 512;

/// An inline file whose latest contents are a record in the log.
#[derive(Clone, Copy, Debug)]
struct StagedInline {
    dir: u32,
    name: [u8; crate::NAME_MAX],
    name_len: u8,
    len: u16,
    lsn: u64,
}

impl StagedInline {
    fn is(&self, dir: u32, name: &[u8]) -> bool {
        self.dir == dir && &self.name[..self.name_len as usize] == name
    }
}

/// Which of the staging layer's mechanisms run (for measurements: the benchmark's
/// ablation rows). The default, everything on, is what the guarantees and the figures
/// in the README are for; every setting keeps the same guarantees after power loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Tuning {
    /// Small fsyncs and inline-file commits go to the staging log (`false`: every
    /// commit writes its pages or its directory bucket home directly).
    pub staging: bool,
    /// A commit that would cost more staged than written home goes home, and inline
    /// staging stops for a while when patches show it does not pay (`false`: everything
    /// that fits a log record is staged).
    pub bypass: bool,
}

impl Tuning {
    /// Everything on.
    pub const DEFAULT: Tuning = Tuning {
        staging: true,
        bypass: true,
    };
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning::DEFAULT
    }
}

/// What the staging area holds (for tools and health reports): see
/// [`Fs::staging_status`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StagingStatus {
    /// The staging log stream's object id.
    pub stream: u32,
    /// Its first and end LSNs: the log holds `end - first` bytes of records not yet
    /// trimmed (patched records are trimmed in batches).
    pub first_lsn: u64,
    /// See `first_lsn`.
    pub end_lsn: u64,
    /// Files with their own objects that have staged records not yet patched home.
    pub staged_objects: usize,
    /// Inline files whose latest contents are only in the log.
    pub staged_inline: usize,
    /// Staged bytes since the last patch.
    pub staged_bytes: u64,
    /// Pages a replay after a cut now may write (bounded to keep mount fast).
    pub replay_pages: u32,
}

/// The staging state of a mounted volume.
#[derive(Clone, Debug)]
pub(crate) struct Staging {
    live: heapless::Vec<u32, LIVE>,
    inline: heapless::Vec<StagedInline, INLINE_STAGED>,
    /// Inline records since the last patch.
    inline_records: u32,
    /// Inline commits left to bypass.
    inline_skip: u16,
    /// Inline commits the next bypass takes (doubles while probes show staging does
    /// not pay).
    inline_backoff: u16,
    /// Object commits left to bypass.
    object_skip: u16,
    /// Since the last patch, for the staged object commits: what writing them home
    /// directly would have programmed, and what staging did program (log sectors, and
    /// the pages that write-backs and the patch programmed for staged objects), bytes.
    object_direct: u64,
    object_cost: u64,
    /// Pages replay may write for the records since the last patch, and the object
    /// and page of the last staged object record.
    replay_pages: u32,
    last_page: (u32, u64),
    /// The latest object commits (object, end offset, last page), oldest first.
    recent: heapless::Vec<(u32, u64, u64), LIVE>,
    bytes: u64,
    /// The store mounted read-only with records in the log: nothing can be patched, so
    /// the records stay where they are and reads of file objects overlay them.
    read_only: bool,
    /// Where a repair mount stopped reading the log (the first record that did not
    /// read): records from here on are left out (`u64::MAX`: none). Only a read-only
    /// volume keeps records past it in the log; a writable one trims them.
    cut: u64,
}

impl Staging {
    pub(crate) const EMPTY: Staging = Staging {
        live: heapless::Vec::new(),
        inline: heapless::Vec::new(),
        inline_records: 0,
        inline_skip: 0,
        inline_backoff: INLINE_PROBE,
        object_skip: 0,
        object_direct: 0,
        object_cost: 0,
        replay_pages: 0,
        last_page: (0, u64::MAX),
        recent: heapless::Vec::new(),
        bytes: 0,
        read_only: false,
        cut: u64::MAX,
    };
}

/// The version an object's attributes carry.
fn version_of(attrs: &[u8]) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&attrs[..8]);
    u64::from_le_bytes(v)
}

/// Attribute byte 8 of a file object: set once an entry names the object. Objects a
/// pending record names are deleted at replay unless they carry it.
const ADOPTED_AT: usize = 8;
const ADOPTED: u8 = 1;

/// The attributes of a file object with `version`, adopted.
pub(crate) fn attrs_for(version: u64) -> [u8; oftl::ATTR_LEN] {
    let mut a = pending_attrs(version);
    a[ADOPTED_AT] = ADOPTED;
    a
}

/// The attributes of an object created for a file whose entry does not name it yet,
/// after its pending record at LSN `at`: not adopted, with `at` as its version (a
/// pending record deletes it at replay only if it is not newer than the record).
pub(crate) fn pending_attrs(at: u64) -> [u8; oftl::ATTR_LEN] {
    let mut a = [0u8; oftl::ATTR_LEN];
    a[..8].copy_from_slice(&at.to_le_bytes());
    a
}

impl<S: Store, const PAGE: usize, const HANDLES: usize> Fs<S, PAGE, HANDLES> {
    /// What the staging area holds now.
    pub fn staging_status(&mut self) -> Result<StagingStatus, Error<S::FlashError>> {
        let stream = self.mounted()?.staging;
        let (first_lsn, end_lsn) = self.store.log_bounds(stream)?;
        Ok(StagingStatus {
            stream,
            first_lsn,
            end_lsn,
            staged_objects: self.stage.live.len(),
            staged_inline: self.stage.inline.len(),
            staged_bytes: self.stage.bytes,
            replay_pages: self.stage.replay_pages,
        })
    }

    fn staging_stream(&self) -> Result<u32, Error<S::FlashError>> {
        Ok(self.mounted()?.staging)
    }

    /// Makes the byte ranges `ranges` of object `obj` durable: staged when that is
    /// cheaper, else written home.
    pub(crate) fn make_durable(
        &mut self,
        obj: u32,
        ranges: &[(u64, u64)],
    ) -> Result<(), Error<S::FlashError>> {
        let p = self.store.payload() as u64;
        let bytes: usize = ranges
            .iter()
            .map(|&(a, b)| stage::HEADER_LEN + (b - a) as usize)
            .sum();
        let logged = bytes.div_ceil(SECTOR_PAYLOAD) * SECTOR;
        let mut pages = 0u64;
        let mut last = u64::MAX;
        let first_page = ranges.first().map_or(0, |&(a, _)| a / p);
        let continues = self.stage.last_page == (obj, first_page);
        for &(a, b) in ranges {
            let (first, end) = (a / p, (b - 1) / p);
            pages += end - first + 1 - (first == last) as u64;
            last = end;
        }
        let direct = pages as usize * p as usize;
        // Staging pays when the page will take more commits before the patch: this
        // commit continues the object's previous one (an append, or the same page
        // again). A commit elsewhere (random overwrites, a file's first write) would
        // cost its page at the patch on top of its sector.
        let start = ranges.first().map_or(0, |&(a, _)| a);
        let follows = self.note_commit(obj, start, ranges.last().map_or(0, |&(_, b)| b), p);
        let costlier =
            self.tuning.bypass && (logged >= direct || self.stage.object_skip > 0 || !follows);
        if ranges.is_empty()
            || !self.tuning.staging
            || bytes > self.store.log_max_record()
            || costlier
        {
            self.stage.object_skip = self.stage.object_skip.saturating_sub(1);
            return self.flush_home(obj);
        }
        let replay = pages as u32 - continues as u32;
        if self.stage.bytes + bytes as u64 > STAGE_LIMIT
            || self.stage.replay_pages + replay > REPLAY_PAGES
            || (!self.stage.live.contains(&obj) && self.stage.live.is_full())
        {
            self.patch()?;
        }
        // (A patch just now forgot the last page: this record starts a new one.)
        let continues = self.stage.last_page == (obj, first_page);
        self.stage.replay_pages += pages as u32 - continues as u32;
        self.stage.last_page = (obj, last);
        // The commit: every range of this fsync, one log record.
        let mut at = 0;
        for &(a, b) in ranges {
            let len = (b - a) as usize;
            let hdr = Record::Data {
                object: obj,
                offset: a,
                len: len as u16,
            };
            hdr.encode(&mut self.b[at..at + stage::HEADER_LEN]);
            at += stage::HEADER_LEN;
            let n = self.store.read(obj, a, &mut self.b[at..at + len])?;
            if n != len {
                return Err(Error::Corrupted);
            }
            at += len;
        }
        let stream = self.staging_stream()?;
        self.store.log_append(stream, &self.b[..at])?;
        if !self.stage.live.contains(&obj) {
            self.stage.live.push(obj).map_err(|_| Error::Corrupted)?;
        }
        self.stage.bytes += at as u64;
        self.stage.object_direct += direct as u64;
        self.stage.object_cost += logged as u64;
        Ok(())
    }

    /// Notes a commit of `obj`'s bytes `start..end` in the small table of recent
    /// commits; whether it continues the object's previous one (starts where it ended,
    /// or on its last page).
    fn note_commit(&mut self, obj: u32, start: u64, end: u64, page: u64) -> bool {
        let recent = &mut self.stage.recent;
        let prev = recent
            .iter()
            .position(|r| r.0 == obj)
            .map(|i| recent.remove(i));
        if recent.is_full() {
            recent.remove(0);
        }
        let _ = recent.push((obj, end, end.saturating_sub(1) / page));
        prev.is_some_and(|(_, e, last)| start == e || start / page == last)
    }

    /// Counts the pages programmed since `before` (a write that evicted buffers, a
    /// patch's flush) against staging when `obj` has staged records.
    pub(crate) fn note_home_pages(&mut self, obj: u32, before: u64) {
        if self.stage.live.contains(&obj) {
            let pages = self.store.pages_programmed() - before;
            self.stage.object_cost += pages * self.store.payload() as u64;
        }
    }

    /// Writes an object's buffered bytes home; with records in the log, together with
    /// a version that supersedes them.
    pub(crate) fn flush_home(&mut self, obj: u32) -> Result<(), Error<S::FlashError>> {
        if let Some(i) = self.stage.live.iter().position(|&o| o == obj) {
            let end = self.store.log_bounds(self.staging_stream()?)?.1;
            self.store.flush_with_attrs(obj, &attrs_for(end))?;
            self.stage.live.swap_remove(i);
            Ok(())
        } else {
            self.store.flush(obj)
        }
    }

    /// `obj` was deleted (its transaction committed): its records stay in the log until
    /// the next trim but name nothing now, and a patch must not flush an object that
    /// gets its id next (an independent review found a patch marking such a pending
    /// object adopted, which then leaked after a crash).
    pub(crate) fn forget_deleted(&mut self, obj: u32) {
        if obj == 0 {
            return;
        }
        if let Some(i) = self.stage.live.iter().position(|&o| o == obj) {
            self.stage.live.swap_remove(i);
        }
        if let Some(i) = self.stage.recent.iter().position(|r| r.0 == obj) {
            self.stage.recent.remove(i);
        }
        if self.stage.last_page.0 == obj {
            self.stage.last_page = (0, u64::MAX);
        }
    }

    /// Whether `obj` has records in the log not yet patched home: its buffered bytes
    /// include acknowledged ones that only the log holds durably.
    pub(crate) fn is_staged(&self, obj: u32) -> bool {
        self.stage.live.contains(&obj)
    }

    /// The direct change that [`Fs::supersede`] was for failed: `obj`'s records are
    /// still the durable copy of bytes in its buffers, and the next patch must take
    /// them home (forgotten, its trim dropped them while the bytes were only in RAM).
    pub(crate) fn unsupersede(&mut self, obj: u32) {
        if !self.is_staged(obj) && self.stage.live.push(obj).is_err() {
            // Cannot happen (`supersede` just made room); were it to, the records must
            // stay: no patch trims until a remount replays them.
            self.stage.read_only = true;
        }
    }

    /// Unmount on a volume too full (or turned read-only) to patch: the staged objects'
    /// buffered bytes are dropped, their records stay in the log (durable), and the
    /// next mount's replay applies them. Flushing them would need the room the patch
    /// could not find, and the store's unmount would fail the same way.
    pub(crate) fn leave_staged_in_log(&mut self) {
        for &obj in self.stage.live.iter() {
            self.store.discard(obj);
        }
        self.stage.live.clear();
    }

    /// The version a direct change of `obj` must set in the same transaction (its
    /// attributes), and forgets `obj`'s records: `None` when it has none.
    pub(crate) fn supersede(
        &mut self,
        obj: u32,
    ) -> Result<Option<[u8; oftl::ATTR_LEN]>, Error<S::FlashError>> {
        match self.stage.live.iter().position(|&o| o == obj) {
            Some(i) => {
                let end = self.store.log_bounds(self.staging_stream()?)?.1;
                self.stage.live.swap_remove(i);
                Ok(Some(attrs_for(end)))
            }
            None => Ok(None),
        }
    }

    /// Commits stage again from the next one on (a bypass a patch started ends).
    pub(crate) fn end_bypass(&mut self) {
        self.stage.inline_skip = 0;
        self.stage.object_skip = 0;
    }

    /// Patches: every staged inline file and every object with records home (with its
    /// version), then the log trimmed to its end (and the pending records of files
    /// still open appended again).
    pub(crate) fn patch(&mut self) -> Result<(), Error<S::FlashError>> {
        let stream = self.staging_stream()?;
        if self.stage.read_only || self.store.read_only() {
            // Nothing can be written: the records stay in the log, durable, where a
            // mount reads them (`replay_read_only`, `overlay`).
            return Ok(());
        }
        let end = self.store.log_bounds(stream)?.1;
        if !self.stage.live.is_empty() || !self.stage.inline.is_empty() {
            debug!(
                "stagefs: patching staged records home ({} objects, {} inline files)",
                self.stage.live.len(),
                self.stage.inline.len()
            );
        }
        self.patch_homes(end)?;
        // Staging efficiency E = direct / (logged + patched) over the commits since the
        // last patch: below 1, object commits go home directly for a while.
        if self.tuning.bypass
            && self.stage.object_cost > 0
            && self.stage.object_direct < self.stage.object_cost
        {
            self.stage.object_skip = OBJECT_PROBE;
        }
        self.stage.object_direct = 0;
        self.stage.object_cost = 0;
        self.stage.replay_pages = 0;
        self.stage.last_page = (0, u64::MAX);
        if self.stage.bytes > 0 {
            // The pending records of files still open go again before the trim (they
            // land at or after `end`, which it keeps): after it, a cut between the two
            // would leave those objects named by nothing, for good (an independent
            // review).
            let before = self.stage.bytes;
            for i in 0..HANDLES {
                if let Some(obj) = self.handles[i].pending_object() {
                    self.log_pending(obj)?;
                }
            }
            self.store.log_trim(stream, end)?;
            self.stage.bytes -= before;
        }
        // Only now: a name leaves the table when its records have left the log. Replay
        // applies inline records unconditionally, relying on every change of a staged
        // name patching first; a patch that failed after writing the buckets (an object
        // flush or the trim finding no room) used to leave records in the log for names
        // no longer in the table, which a remove and a re-create could then put under
        // stale contents, or a remove make the next mount fail (an independent review's
        // lead).
        self.stage.inline.clear();
        self.stage.inline_records = 0;
        Ok(())
    }

    /// Durably notes that `obj` exists but no entry names it yet; returns the record's
    /// LSN.
    pub(crate) fn log_pending(&mut self, obj: u32) -> Result<u64, Error<S::FlashError>> {
        let mut r = [0u8; stage::HEADER_LEN];
        Record::Pending { object: obj }.encode(&mut r);
        let stream = self.staging_stream()?;
        let at = self.store.log_append(stream, &r)?;
        self.stage.bytes += r.len() as u64;
        Ok(at)
    }

    /// The attributes a new object (a file's or a directory's) is created with: adopted,
    /// with the log's end as its version, so no record logged before it applies to it
    /// (object ids are reused once the store's bound is reached: a record may name an
    /// older object of the same id).
    pub(crate) fn new_object_attrs(
        &mut self,
    ) -> Result<[u8; oftl::ATTR_LEN], Error<S::FlashError>> {
        let end = self.store.log_bounds(self.staging_stream()?)?.1;
        Ok(attrs_for(end))
    }

    /// Writes home what the log holds (objects stamped with version `end`, then the
    /// inline contents), without trimming. The inline table keeps its names until the
    /// trim (see `patch`).
    fn patch_homes(&mut self, end: u64) -> Result<(), Error<S::FlashError>> {
        while let Some(&obj) = self.stage.live.last() {
            if self.store.is_object(obj)? {
                let before = self.store.pages_programmed();
                self.store.flush_with_attrs(obj, &attrs_for(end))?;
                self.note_home_pages(obj, before);
            }
            self.stage.live.pop();
        }
        self.patch_inline()
    }

    /// Writes the staged inline contents into their buckets, one bucket write for all
    /// the staged names it holds, and decides whether inline staging pays.
    fn patch_inline(&mut self) -> Result<(), Error<S::FlashError>> {
        if self.stage.inline.is_empty() {
            return Ok(());
        }
        let p = self.store.payload();
        let records = self.stage.inline_records;
        let mut writes = 0u32;
        // Each staged name's bucket page, so names sharing a bucket go together.
        let mut todo: heapless::Vec<(u32, u32, usize), INLINE_STAGED> = heapless::Vec::new();
        for (k, e) in self.stage.inline.iter().enumerate() {
            let e = *e;
            let loc = namespace::locate(
                &mut self.store,
                e.dir,
                &e.name[..e.name_len as usize],
                &mut self.a,
            )?;
            let _ = todo.push((e.dir, loc.page, k));
        }
        // By bucket, by insertion (at most 8 names: `sort_unstable` costs kilobytes of a
        // microcontroller's code).
        for i in 1..todo.len() {
            let mut j = i;
            while j > 0 && todo[j] < todo[j - 1] {
                todo.swap(j - 1, j);
                j -= 1;
            }
        }
        // Entries of one bucket are adjacent now; the image in `a` is reused while the
        // next name is on it, and written when the next one is not (or after a split).
        let mut loc: Option<Loc> = None;
        let mut dirty = false;
        for &(dir, _, k) in todo.iter() {
            let e = self.stage.inline[k];
            let name = &e.name[..e.name_len as usize];
            if let Some(l) = loc.as_mut() {
                l.found = if l.dir == dir {
                    bucket::find(&self.a[..p], &l.head, name)?.map(|(at, _)| at)
                } else {
                    None
                };
            }
            if loc.is_none_or(|l| l.found.is_none()) {
                if dirty {
                    self.write_bucket(&loc.ok_or(Error::Corrupted)?)?;
                    writes += 1;
                    dirty = false;
                }
                let l = namespace::locate(&mut self.store, dir, name, &mut self.a)?;
                if l.found.is_none() {
                    // A staged name always has its entry (changes settle first).
                    return Err(Error::Corrupted);
                }
                loc = Some(l);
            }
            let l = loc.as_mut().ok_or(Error::Corrupted)?;
            if self.apply_staged(l, &e)? {
                dirty = true;
                continue;
            }
            // No room in the bucket as it is: write what is done, then this one on its
            // own, splitting first.
            if dirty {
                self.write_bucket(l)?;
                writes += 1;
                dirty = false;
            }
            let mut own = self.locate_with_room(dir, name, e.len as usize)?;
            if own.found.is_none() || !self.apply_staged(&mut own, &e)? {
                return Err(Error::Corrupted);
            }
            self.write_bucket(&own)?;
            writes += 1;
            loc = None;
        }
        if dirty {
            self.write_bucket(&loc.ok_or(Error::Corrupted)?)?;
            writes += 1;
        }
        // Staging cost a sector per record and a bucket per write; writing home directly
        // a bucket per record.
        if self.tuning.bypass {
            let b = &mut self.stage;
            if writes * 4 >= records * 3 {
                b.inline_skip = b.inline_backoff;
                b.inline_backoff = b.inline_backoff.saturating_mul(2).min(INLINE_PROBE_MAX);
            } else {
                b.inline_backoff = INLINE_PROBE;
            }
        }
        Ok(())
    }

    /// Replaces, in the bucket image in `a`, the contents of the entry at `loc.found`
    /// with the staged record of `e` (read into `b`); `false` if it does not fit.
    fn apply_staged(
        &mut self,
        loc: &mut Loc,
        e: &StagedInline,
    ) -> Result<bool, Error<S::FlashError>> {
        let at = loc.found.ok_or(Error::Corrupted)?;
        // Only looked at here (no copy on the stack while the record is read: this is
        // on the deepest path of a patch); `put_staged` copies it.
        let object = match namespace::entry_ref(&self.a, loc, at)?.body {
            bucket::Body::Object(id) => id,
            bucket::Body::Inline(_) => 0,
        };
        if object != 0 {
            // No longer inline (cannot happen: growing settles first).
            return Ok(true);
        }
        let n = self.read_staged(e.lsn, e.dir, &e.name[..e.name_len as usize])?;
        self.put_staged(loc, at, n)
    }

    /// The rest of [`Fs::apply_staged`]: the entry at `at` of the bucket in `a` (inline)
    /// gets the `n` staged bytes at the start of `b`; `false`, with the entry as it
    /// was, if they do not fit.
    #[inline(never)]
    fn put_staged(
        &mut self,
        loc: &mut Loc,
        at: usize,
        n: usize,
    ) -> Result<bool, Error<S::FlashError>> {
        let orig = namespace::entry_at(&self.a, loc, at)?;
        if n > crate::INLINE_MAX {
            return Err(Error::Corrupted);
        }
        // `orig` with the staged contents, which stay in `b` (no second copy of the
        // entry on the stack).
        let entry = bucket::Entry {
            body: bucket::Body::Inline(&self.b[..n]),
            ..orig.entry()
        };
        namespace::remove_from(&mut self.a, loc)?;
        if namespace::insert_into(&mut self.a, loc, &entry) {
            return Ok(true);
        }
        // The old entry goes back where there was room for it.
        if !namespace::insert_into(&mut self.a, loc, &orig.entry()) {
            return Err(Error::Corrupted);
        }
        Ok(false)
    }

    fn write_bucket(&mut self, loc: &Loc) -> Result<(), Error<S::FlashError>> {
        let p = self.store.payload();
        self.store.transact(&[oftl::TxOp::Write {
            obj: loc.dir,
            offset: loc.page as u64 * p as u64,
            data: &self.a[..p],
        }])
    }

    /// Reads the contents staged for `dir`/`name` at `lsn` into the start of `b`;
    /// returns their length.
    fn read_staged(
        &mut self,
        lsn: u64,
        dir: u32,
        name: &[u8],
    ) -> Result<usize, Error<S::FlashError>> {
        let stream = self.staging_stream()?;
        let r = self
            .store
            .log_read(stream, lsn, &mut self.b)?
            .ok_or(Error::Corrupted)?;
        if r.lsn != lsn {
            return Err(Error::Corrupted);
        }
        let mut pos = 0;
        while pos < r.len {
            let (rec, data, end) = Record::parse(&self.b[..r.len], pos)?;
            if let Record::Inline {
                dir: d,
                name_len,
                len,
            } = rec
            {
                let nl = name_len as usize;
                if d == dir && &self.b[data..data + nl] == name {
                    self.b.copy_within(data + nl..data + nl + len as usize, 0);
                    return Ok(len as usize);
                }
            }
            pos = end;
        }
        Err(Error::Corrupted)
    }

    /// The staged contents of inline file `dir`/`name`, if any: read into the start of
    /// `b`, returns their length.
    pub(crate) fn staged_into_b(
        &mut self,
        dir: u32,
        name: &[u8],
    ) -> Result<Option<usize>, Error<S::FlashError>> {
        let Some(e) = self.stage.inline.iter().find(|e| e.is(dir, name)).copied() else {
            return Ok(None);
        };
        self.read_staged(e.lsn, dir, name).map(Some)
    }

    /// The size of inline file `dir`/`name` if its contents are staged.
    pub(crate) fn staged_len(&self, dir: u32, name: &[u8]) -> Option<u64> {
        self.stage
            .inline
            .iter()
            .find(|e| e.is(dir, name))
            .map(|e| e.len as u64)
    }

    /// Before a change of `dir`/`name` that does not go through the log: patches if the
    /// name has staged contents.
    pub(crate) fn settle(&mut self, dir: u32, name: &[u8]) -> Result<(), Error<S::FlashError>> {
        if self.stage.inline.iter().any(|e| e.is(dir, name)) {
            self.patch()?;
        }
        Ok(())
    }

    /// Makes the new contents of inline file `dir`/`name` durable as a record in the
    /// log; `false` when staging is bypassed (the caller writes the bucket).
    pub(crate) fn stage_inline(
        &mut self,
        dir: u32,
        name: &[u8],
        contents: &[u8],
    ) -> Result<bool, Error<S::FlashError>> {
        if !self.tuning.staging {
            return Ok(false);
        }
        if self.stage.inline_skip > 0 {
            self.stage.inline_skip -= 1;
            return Ok(false);
        }
        let n = stage::HEADER_LEN + name.len() + contents.len();
        let known = self.stage.inline.iter().any(|e| e.is(dir, name));
        if self.stage.bytes + n as u64 > STAGE_LIMIT || (!known && self.stage.inline.is_full()) {
            self.patch()?;
            if self.stage.inline_skip > 0 {
                self.stage.inline_skip -= 1;
                return Ok(false);
            }
        }
        // The patch must find room for what the staged contents add to the entry: with
        // what other staged names of the bucket add, it must fit as the bucket is
        // (direct changes keep that room, see `staged_growth`). Else the commit goes
        // home directly, which splits the bucket or fails cleanly (`DirectoryFull`):
        // an independent review had eight grown names in a bucket that cannot split
        // acknowledged, then every patch, and the mount's replay, fail.
        let loc = namespace::locate(&mut self.store, dir, name, &mut self.a)?;
        let at = loc.found.ok_or(Error::Corrupted)?;
        let home = namespace::entry_ref(&self.a, &loc, at)?.inline_len();
        if contents.len() > home {
            let free = bucket::capacity(self.store.payload()) - loc.head.used as usize;
            if contents.len() - home + self.staged_growth(&loc, name)? > free {
                return Ok(false);
            }
        }
        Record::Inline {
            dir,
            name_len: name.len() as u8,
            len: contents.len() as u16,
        }
        .encode(&mut self.b[..stage::HEADER_LEN]);
        let at = stage::HEADER_LEN;
        self.b[at..at + name.len()].copy_from_slice(name);
        self.b[at + name.len()..n].copy_from_slice(contents);
        let stream = self.staging_stream()?;
        let lsn = self.store.log_append(stream, &self.b[..n])?;
        self.note_inline(dir, name, contents.len() as u16, lsn)?;
        self.stage.bytes += n as u64;
        self.stage.inline_records += 1;
        Ok(true)
    }

    /// What the staged contents of the names in the bucket in `a` (at `loc`), other
    /// than `except`, add to their entries there: the room a patch needs in it. Every
    /// change that adds to a bucket directly leaves it free (`Fs::locate_with_room`),
    /// so a patch never has to split a bucket, which may be impossible.
    pub(crate) fn staged_growth(
        &self,
        loc: &Loc,
        except: &[u8],
    ) -> Result<usize, Error<S::FlashError>> {
        let p = self.store.payload();
        let mut grow = 0;
        for e in self.stage.inline.iter().filter(|e| e.dir == loc.dir) {
            let name = &e.name[..e.name_len as usize];
            if name == except {
                continue;
            }
            if let Some((at, _)) = bucket::find(&self.a[..p], &loc.head, name)? {
                let home = namespace::entry_ref(&self.a, loc, at)?.inline_len();
                grow += (e.len as usize).saturating_sub(home);
            }
        }
        Ok(grow)
    }

    fn note_inline(
        &mut self,
        dir: u32,
        name: &[u8],
        len: u16,
        lsn: u64,
    ) -> Result<(), Error<S::FlashError>> {
        if let Some(e) = self.stage.inline.iter_mut().find(|e| e.is(dir, name)) {
            e.len = len;
            e.lsn = lsn;
            return Ok(());
        }
        let mut e = StagedInline {
            dir,
            name: [0; crate::NAME_MAX],
            name_len: name.len() as u8,
            len,
            lsn,
        };
        e.name[..name.len()].copy_from_slice(name);
        self.stage.inline.push(e).map_err(|_| Error::Corrupted)
    }

    /// After mounting: applies the records a crash left in the log (object bytes at or
    /// above their object's version; inline contents, the latest per name), then
    /// patches.
    ///
    /// With `repair` (a repair or rebuild mount), a record that does not read (an
    /// uncorrectable page, or content that is not a record) ends the replay there, as a
    /// journal's replay stops at its first bad record: every file keeps a state it had,
    /// and the records from there on are dropped (trimmed with the rest by the patch).
    /// Returns the bytes of the log so left out (0: everything read). Without
    /// `repair`, such a record fails the mount ([`Error::Flash`] or
    /// [`Error::Corrupted`]) and drops nothing.
    pub(crate) fn replay(&mut self, repair: bool) -> Result<u64, Error<S::FlashError>> {
        self.stage = Staging::EMPTY;
        let stream = self.staging_stream()?;
        let (start, end) = self.store.log_bounds(stream)?;
        if start < end && !self.store.writable() {
            // Replay writes; a read-only store (too many bad blocks, salvage) keeps its
            // records in the log and reads them where they apply.
            self.replay_read_only(stream, start, end, repair)?;
            return Ok(end.saturating_sub(self.stage.cut));
        }
        if start < end {
            info!("stagefs: replaying {} bytes of staged records", end - start);
        }
        // Objects with data records: their version, and whether a record applied (only
        // those go home: the others may be another object of a reused id, or gone).
        let mut versions: heapless::Vec<(u32, u64, bool), LIVE> = heapless::Vec::new();
        let mut r = self.replay_records(stream, start, end, repair, &mut versions);
        for _ in 0..REPLAY_COLLECT_STEPS {
            if !matches!(r, Err(Error::NoSpace)) {
                break;
            }
            let Some(more) = self.collect_for_replay(&versions) else {
                break;
            };
            versions.clear();
            self.stage = Staging::EMPTY;
            r = self.replay_records(stream, start, end, repair, &mut versions);
            if !more {
                break;
            }
        }
        match r {
            Ok(cut) => self.stage.cut = cut,
            Err(Error::NoSpace | Error::ReadOnly) => {
                // A store too full (or too worn) to take the records back into their
                // objects, or turned read-only on the way: the volume mounts as on a
                // read-only store, the records read where they apply, until a mount
                // finds room (`Fs::step` collects). Before, the mount failed, and
                // nothing on the volume could be read.
                warn!("stagefs: no room to replay the staged records: read-only");
                for &(o, _, applied) in versions.iter() {
                    if applied {
                        self.store.discard(o);
                    }
                }
                self.stage = Staging::EMPTY;
                self.replay_read_only(stream, start, end, repair)?;
                return Ok(end.saturating_sub(self.stage.cut));
            }
            Err(e) => return Err(e),
        }
        if self.stage.cut != u64::MAX {
            warn!(
                "stagefs: repair: the staging log does not read at LSN {}: {} bytes of staged records dropped",
                self.stage.cut,
                end - self.stage.cut
            );
        }
        for &(o, _, applied) in versions.iter() {
            if applied && !self.stage.live.contains(&o) {
                let _ = self.stage.live.push(o);
            }
        }
        self.stage.bytes = (end > start) as u64;
        match self.patch() {
            Ok(()) => {}
            // A store too full (or too worn) to take the patch or even the trim: what
            // was applied is in the objects' buffers and still in the log, as between
            // any two patches, and a later patch tries again. Refusing the mount would
            // leave no way to read the volume, or to delete from it to make room.
            Err(Error::NoSpace | Error::ReadOnly) => {
                warn!("stagefs: no room to patch the replayed records home yet");
            }
            Err(e) => return Err(e),
        }
        self.stage.inline_skip = 0;
        let dropped = end.saturating_sub(self.stage.cut);
        // Patched and trimmed: nothing past the cut is left to read.
        self.stage.cut = u64::MAX;
        Ok(dropped)
    }

    /// A replay found no room for the records: drops what it applied and collects
    /// garbage, one step of [`REPLAY_COLLECT_COPIES`] page copies, for the replay to
    /// try again; `None` when the collection failed (other than finding no room), else
    /// whether more collection would do useful work. The room a full volume had before
    /// the cut may be garbage that only collection gives back: without this, the
    /// volume mounted read-only at every mount, and a read-only volume refuses the
    /// removes that would make room (an independent review's random walk on a full
    /// volume, stop 44). One step at a time, the replay tried after each: a collection
    /// run to the end on a full volume churned about 30 erases a block at such a mount
    /// (review s44c); [`REPLAY_COLLECT_STEPS`] is what a collection a cut tore needs
    /// (with 8, a mount that fell back read-only made nothing durable and the next
    /// one started over, read-only again).
    fn collect_for_replay(&mut self, versions: &[(u32, u64, bool)]) -> Option<bool> {
        for &(o, _, applied) in versions.iter() {
            if applied {
                self.store.discard(o);
            }
        }
        match self.store.gc_step(REPLAY_COLLECT_COPIES) {
            Ok(more) => Some(more),
            Err(Error::NoSpace | Error::ReadOnly) => Some(false),
            Err(_) => None,
        }
    }

    /// The next record of the log at or after `lsn` in `b` (see `Store::log_read`),
    /// every record in it checked first, so that a commit applies whole or not at all.
    /// With `repair`, one that does not read is `Ok(Err(()))`: the log's usable part
    /// ends there.
    fn next_commit(
        &mut self,
        stream: u32,
        lsn: u64,
        repair: bool,
    ) -> Result<Result<Option<oftl::LogRecord>, ()>, Error<S::FlashError>> {
        let lost = |e: &Error<S::FlashError>| match e {
            Error::Flash(f) => S::is_data_loss(f),
            Error::Corrupted => true,
            _ => false,
        };
        // A repair drops what it cannot read for good, so a record is lost only when
        // it reads as lost `REPAIR_READS` times over (each a store read with its own
        // retries): a run of transient read errors must not cost acknowledged
        // commits (review s41b: a run of four dropped all twelve of a healthy volume).
        let mut tries = 0;
        let r = loop {
            match self.store.log_read(stream, lsn, &mut self.b) {
                Ok(Some(r)) => break r,
                Ok(None) => return Ok(Ok(None)),
                Err(e) if repair && lost(&e) => {
                    tries += 1;
                    if tries >= REPAIR_READS {
                        return Ok(Err(()));
                    }
                }
                Err(e) => return Err(e),
            }
        };
        let mut pos = 0;
        while pos < r.len {
            match Record::parse(&self.b[..r.len], pos) {
                Ok((_, _, end)) => pos = end,
                Err(_) if repair => return Ok(Err(())),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Ok(Some(r)))
    }

    /// The records of the log from `start` to `end` applied (see `replay`), noting in
    /// `versions` the objects with data records. Returns where a repair stopped
    /// (`u64::MAX`: it did not).
    fn replay_records(
        &mut self,
        stream: u32,
        start: u64,
        end: u64,
        repair: bool,
        versions: &mut heapless::Vec<(u32, u64, bool), LIVE>,
    ) -> Result<u64, Error<S::FlashError>> {
        let mut lsn = start;
        while lsn < end {
            let r = match self.next_commit(stream, lsn, repair)? {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(()) => return Ok(lsn),
            };
            let (at, len, next) = (r.lsn, r.len, r.next);
            let mut pos = 0;
            while pos < len {
                let (rec, data_at, rec_end) = Record::parse(&self.b[..len], pos)?;
                pos = rec_end;
                match rec {
                    Record::Data {
                        object,
                        offset,
                        len: n,
                    } => {
                        let v = match versions.iter().find(|e| e.0 == object) {
                            Some(&(_, v, _)) => v,
                            None => {
                                let v = if self.store.is_object(object)? {
                                    version_of(&self.store.attrs(object)?)
                                } else {
                                    u64::MAX
                                };
                                if versions.is_full() {
                                    // Make room: what was applied so far goes home first,
                                    // stamped so that nothing below this record is
                                    // applied again, and no version ever goes down (an
                                    // object whose records were all superseded keeps
                                    // its own).
                                    for &(o, ov, applied) in versions.iter() {
                                        if applied {
                                            self.store
                                                .flush_with_attrs(o, &attrs_for(ov.max(at)))?;
                                        }
                                    }
                                    versions.clear();
                                }
                                let _ = versions.push((object, v, false));
                                v
                            }
                        };
                        if at >= v {
                            self.store.write(
                                object,
                                offset,
                                &self.b[data_at..data_at + n as usize],
                            )?;
                            if let Some(e) = versions.iter_mut().find(|e| e.0 == object) {
                                e.2 = true;
                            }
                        }
                    }
                    Record::Inline {
                        dir,
                        name_len,
                        len: n,
                    } => {
                        let nl = name_len as usize;
                        let mut name = [0u8; crate::NAME_MAX];
                        name[..nl].copy_from_slice(&self.b[data_at..data_at + nl]);
                        let known = self.stage.inline.iter().any(|e| e.is(dir, &name[..nl]));
                        if !known && self.stage.inline.is_full() {
                            // Applied so far goes home (no trim: the log is still being
                            // read). It needs `b`: read this record again after.
                            self.patch_inline()?;
                            self.stage.inline.clear();
                            self.stage.inline_records = 0;
                            self.stage.inline_skip = 0;
                            self.store.log_read(stream, lsn, &mut self.b)?;
                        }
                        self.note_inline(dir, &name[..nl], n, at)?;
                        self.stage.inline_records += 1;
                    }
                    Record::Pending { object } => {
                        // Created for a file that never committed it: nothing names it.
                        // (An object created after the record, with the same id reused,
                        // carries a newer version.)
                        if self.store.is_object(object)? {
                            let a = self.store.attrs(object)?;
                            if a[ADOPTED_AT] != ADOPTED && version_of(&a) <= at {
                                self.store.transact(&[oftl::TxOp::Delete { obj: object }])?;
                            }
                        }
                    }
                }
            }
            lsn = next;
        }
        Ok(u64::MAX)
    }

    /// The replay on a read-only store (too many grown bad blocks, a salvage): nothing
    /// can be written, so nothing is applied. Inline contents go to the inline table,
    /// where opens read them back from the log as after any staged commit; object bytes
    /// stay in the log and `overlay` lays them over every read and size of their
    /// file. Refused with [`Error::ReadOnly`] only when the log names more inline files
    /// than the table holds (a writable volume never leaves that many: a commit of a
    /// name the full table does not hold patches first). With `repair`, the records from
    /// the first one that does not read on are left out (`Staging::cut`), for this
    /// session: nothing can trim them, so the next mount needs the repair again.
    fn replay_read_only(
        &mut self,
        stream: u32,
        start: u64,
        end: u64,
        repair: bool,
    ) -> Result<(), Error<S::FlashError>> {
        warn!(
            "stagefs: read-only store with {} bytes of staged records: reads overlay them",
            end - start
        );
        let mut lsn = start;
        while lsn < end {
            let r = match self.next_commit(stream, lsn, repair)? {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(()) => {
                    warn!(
                        "stagefs: repair: the staging log does not read at LSN {}",
                        lsn
                    );
                    self.stage.cut = lsn;
                    break;
                }
            };
            let mut pos = 0;
            while pos < r.len {
                let (rec, data_at, rec_end) = Record::parse(&self.b[..r.len], pos)?;
                pos = rec_end;
                if let Record::Inline { dir, name_len, len } = rec {
                    let nl = name_len as usize;
                    let mut name = [0u8; crate::NAME_MAX];
                    name[..nl].copy_from_slice(&self.b[data_at..data_at + nl]);
                    let known = self.stage.inline.iter().any(|e| e.is(dir, &name[..nl]));
                    if !known && self.stage.inline.is_full() {
                        warn!("stagefs: more staged inline files than the table holds");
                        self.stage = Staging::EMPTY;
                        return Err(Error::ReadOnly);
                    }
                    self.note_inline(dir, &name[..nl], len, r.lsn)?;
                }
            }
            lsn = r.next;
        }
        self.stage.read_only = true;
        Ok(())
    }

    /// Calls `f(offset, bytes)` for every staged data record of file object `obj` that
    /// a replay would apply (at or above the object's version), in log order. Only on a
    /// read-only volume with records (see `replay_read_only`); it reads the whole log,
    /// at most [`STAGE_LIMIT`] bytes and one commit since the last patch.
    fn overlay(
        &mut self,
        obj: u32,
        mut f: impl FnMut(u64, &[u8]),
    ) -> Result<(), Error<S::FlashError>> {
        let stream = self.staging_stream()?;
        let (start, end) = self.store.log_bounds(stream)?;
        let end = end.min(self.stage.cut);
        let version = version_of(&self.store.attrs(obj)?);
        let mut lsn = start;
        while lsn < end {
            let Some(r) = self.store.log_read(stream, lsn, &mut self.b)? else {
                break;
            };
            let mut pos = 0;
            while r.lsn >= version && pos < r.len {
                let (rec, data_at, rec_end) = Record::parse(&self.b[..r.len], pos)?;
                pos = rec_end;
                if let Record::Data {
                    object,
                    offset,
                    len,
                } = rec
                {
                    if object == obj {
                        f(offset, &self.b[data_at..data_at + len as usize]);
                    }
                }
            }
            lsn = r.next;
        }
        Ok(())
    }

    /// The size of file object `obj`, staged records included.
    pub(crate) fn object_len(&mut self, obj: u32) -> Result<u64, Error<S::FlashError>> {
        let mut size = self.store.size(obj)?;
        if self.stage.read_only {
            self.overlay(obj, |at, data| size = size.max(at + data.len() as u64))?;
        }
        Ok(size)
    }

    /// Reads file object `obj` from `pos` (below `size`, its `object_len`) into
    /// `buf`, staged records included; returns the bytes read.
    pub(crate) fn read_object(
        &mut self,
        obj: u32,
        pos: u64,
        size: u64,
        buf: &mut [u8],
    ) -> Result<usize, Error<S::FlashError>> {
        if !self.stage.read_only {
            return self.store.read(obj, pos, buf);
        }
        let n = (size.saturating_sub(pos)).min(buf.len() as u64) as usize;
        let buf = &mut buf[..n];
        let mut got = 0;
        while got < n {
            let k = self.store.read(obj, pos + got as u64, &mut buf[got..])?;
            if k == 0 {
                break;
            }
            got += k;
        }
        // Past the object's stored size: what the records leave (zeros between them, as
        // a replay's writes past the end extend with zeros).
        buf[got..].fill(0);
        let upto = pos + n as u64;
        self.overlay(obj, |at, data| {
            let (a, b) = (at.max(pos), (at + data.len() as u64).min(upto));
            if a < b {
                buf[(a - pos) as usize..(b - pos) as usize]
                    .copy_from_slice(&data[(a - at) as usize..(b - at) as usize]);
            }
        })?;
        Ok(n)
    }

    /// Whether the volume refuses every change with [`Error::ReadOnly`]: its store is
    /// read-only (too many grown bad blocks, a worn-out part), or the mount found no
    /// room to replay the staging log into the files (their records are read from the
    /// log; a later mount replays them once [`Fs::step`] has collected room).
    pub fn read_only(&self) -> bool {
        self.vol.is_some() && (self.stage.read_only || self.store.read_only())
    }

    /// Refuses a change on a read-only volume before any work (the store would refuse
    /// its writes anyway, some only at the close; and with records overlaid, a change in
    /// RAM could be read under the records' older bytes).
    pub(crate) fn changes_allowed(&self) -> Result<(), Error<S::FlashError>> {
        if self.stage.read_only || (self.vol.is_some() && self.store.read_only()) {
            return Err(Error::ReadOnly);
        }
        Ok(())
    }
}
