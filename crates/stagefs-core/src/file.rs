//! Open files: a fixed table of handles, and the file operations.
//!
//! A file is **inline** (its bytes in its directory entry, at most
//! [`crate::INLINE_MAX`]) or has its **own object**. An open inline file keeps its
//! bytes in its handle; `fsync`/`close` write them into the entry (one transaction).
//! When a write takes it past `INLINE_MAX` it moves to an object of its own in one
//! transaction (object created, bytes written, entry changed); so does one whose
//! commit would grow its entry past a full bucket at the trie's last level. Writes to
//! a file with an object go through oftl's write-back buffers; `fsync` flushes them.
//!
//! Opening an existing file with `truncate` makes the handle an empty inline file that
//! replaces the old contents (and deletes the old object) only at the next
//! `fsync`/`close`, in the same transaction as the new bytes; a file the open creates
//! is not held back.

use oftl::{ObjKind, TxOp};

use crate::error::Error;
use crate::format::bucket::{self, Body, Kind};
use crate::namespace::{self, OwnedEntry};
use crate::path;
use crate::store::Store;
use crate::{push, Fs, INLINE_MAX, NAME_MAX};

/// An open file: an index into the volume's handle table, valid until it is closed
/// or the volume is unmounted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct File {
    pub(crate) slot: u8,
    /// The mount that opened it (see `Fs::mount_id`): a handle kept past an unmount
    /// never names an open of a later mount, by this `Fs` or another over the same
    /// store (an independent review wrote through one into another file).
    pub(crate) mount: u32,
    /// The volume's open counter when this file was opened: a closed handle never
    /// names a later open of the same slot (64 bits: 2^32 opens are 50 days at 1,000
    /// a second, and a stale handle must not name a later open then).
    pub(crate) session: u64,
}

/// How to open a file (the `std::fs::OpenOptions` set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OpenOptions {
    read: bool,
    write: bool,
    append: bool,
    create: bool,
    create_new: bool,
    truncate: bool,
}

impl OpenOptions {
    /// Nothing allowed yet.
    pub const fn new() -> Self {
        OpenOptions {
            read: false,
            write: false,
            append: false,
            create: false,
            create_new: false,
            truncate: false,
        }
    }
    /// Allow reads.
    pub const fn read(mut self, on: bool) -> Self {
        self.read = on;
        self
    }
    /// Allow writes.
    pub const fn write(mut self, on: bool) -> Self {
        self.write = on;
        self
    }
    /// Every write goes to the end (implies write).
    pub const fn append(mut self, on: bool) -> Self {
        self.append = on;
        self
    }
    /// Create the file if it does not exist (needs write).
    pub const fn create(mut self, on: bool) -> Self {
        self.create = on;
        self
    }
    /// Create the file; fail with [`Error::Exists`] if it exists (needs write).
    pub const fn create_new(mut self, on: bool) -> Self {
        self.create_new = on;
        self
    }
    /// Empty the file (needs write; takes effect with the next fsync/close).
    pub const fn truncate(mut self, on: bool) -> Self {
        self.truncate = on;
        self
    }
}

/// Where a seek goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SeekFrom {
    /// From the start.
    Start(u64),
    /// From the end.
    End(i64),
    /// From the current position.
    Current(i64),
}

/// One slot of the handle table.
#[derive(Clone, Copy)]
pub(crate) struct Handle {
    pub(crate) open: bool,
    /// Which open this is (see [`File`]).
    pub(crate) open_id: u64,
    pub(crate) dir: u32,
    name: [u8; NAME_MAX],
    name_len: u8,
    read: bool,
    write: bool,
    append: bool,
    pos: u64,
    /// The file's object (0: inline, bytes in `inline`).
    obj: u32,
    pub(crate) size: u64,
    inline: [u8; INLINE_MAX],
    /// Inline bytes (or a truncate) not yet in the entry.
    dirty: bool,
    /// An object the next commit deletes (the file was truncated to inline).
    replaced: u32,
    /// Opened with `truncate`, and the entry still names the old contents (the next
    /// commit replaces them).
    truncated: bool,
    /// `obj` was created while `truncated` and no entry names it yet (a pending record
    /// in the log says so until the commit adopts it).
    pending: bool,
    /// Byte ranges of the object written since the last commit (sorted, disjoint).
    ranges: [(u64, u64); RANGES],
    nranges: u8,
    /// More scattered writes than `ranges` holds: the next commit writes home.
    scattered: bool,
}

/// Dirty ranges a handle tracks before its next commit goes home directly.
const RANGES: usize = 4;

impl Handle {
    pub(crate) const CLOSED: Handle = Handle {
        open: false,
        open_id: 0,
        dir: 0,
        name: [0; NAME_MAX],
        name_len: 0,
        read: false,
        write: false,
        append: false,
        pos: 0,
        obj: 0,
        size: 0,
        inline: [0; INLINE_MAX],
        dirty: false,
        replaced: 0,
        truncated: false,
        pending: false,
        ranges: [(0, 0); RANGES],
        nranges: 0,
        scattered: false,
    };

    pub(crate) fn name(&self) -> &[u8] {
        &self.name[..self.name_len as usize]
    }

    /// The object of an open file that no entry names yet.
    pub(crate) fn pending_object(&self) -> Option<u32> {
        (self.open && self.pending).then_some(self.obj)
    }

    /// Notes that `[a, b)` of the object was written.
    fn mark(&mut self, a: u64, b: u64) {
        let mut a = a;
        let mut b = b;
        // Merge every range it touches, keep the others in order.
        let mut out = [(0u64, 0u64); RANGES + 1];
        let mut n = 0;
        let mut placed = false;
        for &(x, y) in &self.ranges[..self.nranges as usize] {
            if y < a {
                out[n] = (x, y);
                n += 1;
            } else if x > b {
                if !placed {
                    out[n] = (a, b);
                    n += 1;
                    placed = true;
                }
                out[n] = (x, y);
                n += 1;
            } else {
                a = a.min(x);
                b = b.max(y);
            }
        }
        if !placed {
            out[n] = (a, b);
            n += 1;
        }
        if n > RANGES {
            self.scattered = true;
            self.nranges = 0;
            return;
        }
        self.ranges[..n].copy_from_slice(&out[..n]);
        self.nranges = n as u8;
    }

    /// Drops what lies at or past `size` from the dirty ranges.
    fn clip(&mut self, size: u64) {
        let mut n = 0;
        for k in 0..self.nranges as usize {
            let (x, y) = self.ranges[k];
            if x < size {
                self.ranges[n] = (x, y.min(size));
                n += 1;
            }
        }
        self.nranges = n as u8;
    }
}

impl<S: Store, const PAGE: usize, const HANDLES: usize> Fs<S, PAGE, HANDLES> {
    /// Opens (and with `create`, creates: durable on return) a file.
    pub fn open(&mut self, path: &str, o: OpenOptions) -> Result<File, Error<S::FlashError>> {
        // Its frame is on the deepest stack paths of a file workload, so it holds no
        // entry or handle: the entry is looked at where it lies in `a`, the handle is
        // filled in its slot once nothing more can fail, and a new file's entry is made
        // by `create_file`, in its own frame.
        let write = o.write || o.append;
        let needs_write = o.create || o.create_new || o.truncate;
        if !write && (needs_write || !o.read) {
            return Err(Error::Access);
        }
        if write {
            self.changes_allowed()?;
        }
        let (parent, name) = path::parent_and_name(path)?;
        let dir = self.dir_of(parent)?;
        let slot = self
            .handles
            .iter()
            .position(|h| !h.open)
            .ok_or(Error::TooManyOpen)?;
        if self.is_open(dir, name.as_bytes()) {
            return Err(Error::Busy);
        }
        let loc = namespace::locate(&mut self.store, dir, name.as_bytes(), &mut self.a)?;
        // The entry's kind, object, and where its inline bytes lie in `a`.
        // Whether the file exists from before this open (a new one is not held back).
        let existed = loc.found.is_some();
        let (kind, object, inline) = match loc.found {
            Some(_) if o.create_new => return Err(Error::Exists),
            Some(at) => {
                let e = namespace::entry_ref(&self.a, &loc, at)?;
                match e.body {
                    Body::Object(id) => (e.kind, id, 0..0),
                    Body::Inline(d) => {
                        // `d` borrows from `a`: its place there, from the pointers.
                        let from = d.as_ptr() as usize - self.a.as_ptr() as usize;
                        (e.kind, 0, from..from + d.len())
                    }
                }
            }
            None if !(o.create || o.create_new) => return Err(Error::NotFound),
            None => {
                self.create_file(dir, name.as_bytes())?;
                (Kind::File, 0, 0..0)
            }
        };
        if kind == Kind::Dir {
            return Err(Error::IsADirectory);
        }
        // What can fail comes first: the slot stays closed until the handle is complete.
        let (mut size, mut staged, mut dirty) = (0, None, false);
        if o.truncate {
            let staged = self.staged_len(dir, name.as_bytes()).unwrap_or(0);
            dirty = object != 0 || !inline.is_empty() || staged > 0;
        } else if object == 0 {
            staged = self.staged_into_b(dir, name.as_bytes())?;
            size = staged.unwrap_or(inline.len()) as u64;
        } else {
            size = self.object_len(object)?;
        }
        let h = &mut self.handles[slot];
        *h = Handle::CLOSED;
        h.open = true;
        h.dir = dir;
        h.name[..name.len()].copy_from_slice(name.as_bytes());
        h.name_len = name.len() as u8;
        h.read = o.read;
        h.write = write;
        h.append = o.append;
        h.size = size;
        if o.truncate {
            // Held back even when the old contents are empty: the writes before the
            // commit land with it, not one by one as pages fill (review s52: a cut
            // showed 2,100 bytes of an unclosed rewrite of an empty file). Not a file
            // this open created: its create is durable at once and its writes become
            // durable as pages fill, as without `truncate` (holding them back costs a
            // staging-log record per file, and a repair cannot stop at a lost page
            // once log records follow the checkpoint).
            h.dirty = dirty;
            h.truncated = existed;
            h.replaced = object;
        } else if object == 0 {
            match staged {
                Some(n) => h.inline[..n].copy_from_slice(&self.b[..n]),
                None => h.inline[..inline.len()].copy_from_slice(&self.a[inline]),
            }
        } else {
            h.obj = object;
        }
        self.opens += 1;
        h.open_id = self.opens;
        Ok(File {
            slot: slot as u8,
            mount: self.mount_id,
            session: self.opens,
        })
    }

    /// Makes an empty file `name` in directory `dir` (one transaction, durable); leaves
    /// its bucket in `a`. Out of line: its entry and operations stay off the stack of
    /// `open`'s other paths.
    #[inline(never)]
    fn create_file(&mut self, dir: u32, name: &[u8]) -> Result<(), Error<S::FlashError>> {
        let e = OwnedEntry::new(Kind::File, name, 0)?;
        let mut loc = self.locate_with_room(dir, name, e.entry().len())?;
        if !namespace::insert_into(&mut self.a, &mut loc, &e.entry()) {
            return Err(Error::Corrupted);
        }
        let count = namespace::count_after(&loc.root, &[&loc], self.dir_version())?;
        let mut ops = heapless::Vec::<TxOp<'_>, 8>::new();
        self.bucket_ops(&loc, &self.a, &count, &mut ops)?;
        self.store.transact(&ops)?;
        Ok(())
    }

    fn handle(&self, f: File) -> Result<usize, Error<S::FlashError>> {
        let i = f.slot as usize;
        match self.handles.get(i) {
            Some(h)
                if h.open
                    && f.session == h.open_id
                    && f.mount == self.mount_id
                    && self.vol.is_some() =>
            {
                Ok(i)
            }
            _ => Err(Error::BadHandle),
        }
    }

    /// Reads from the current position; returns the bytes read (0 at the end).
    pub fn read(&mut self, f: File, buf: &mut [u8]) -> Result<usize, Error<S::FlashError>> {
        let i = self.handle(f)?;
        let h = self.handles[i];
        if !h.read {
            return Err(Error::Access);
        }
        let n = if h.pos >= h.size {
            0
        } else if h.obj == 0 {
            let n = ((h.size - h.pos) as usize).min(buf.len());
            buf[..n].copy_from_slice(&h.inline[h.pos as usize..h.pos as usize + n]);
            n
        } else {
            self.read_object(h.obj, h.pos, h.size, buf)?
        };
        self.handles[i].pos += n as u64;
        Ok(n)
    }

    /// Writes at the current position (at the end with `append`); returns `data.len()`.
    /// Durable at the next `fsync`/`close`.
    pub fn write(&mut self, f: File, data: &[u8]) -> Result<usize, Error<S::FlashError>> {
        let i = self.handle(f)?;
        let h = self.handles[i];
        if !h.write {
            return Err(Error::Access);
        }
        let pos = if h.append { h.size } else { h.pos };
        let end = pos
            .checked_add(data.len() as u64)
            .filter(|&e| e <= self.store.max_object_size())
            .ok_or(Error::TooLarge)?;
        if data.is_empty() {
            return Ok(0);
        }
        if h.obj == 0 {
            if end <= INLINE_MAX as u64 {
                let h = &mut self.handles[i];
                if h.size < pos {
                    h.inline[h.size as usize..pos as usize].fill(0);
                }
                h.inline[pos as usize..end as usize].copy_from_slice(data);
                h.size = h.size.max(end);
                h.pos = end;
                h.dirty = true;
                return Ok(data.len());
            }
            self.promote(i)?;
        }
        let obj = self.handles[i].obj;
        let before = self.store.pages_programmed();
        self.store.write(obj, pos, data)?;
        self.note_home_pages(obj, before);
        let h = &mut self.handles[i];
        h.size = h.size.max(end);
        h.pos = end;
        if !h.scattered {
            h.mark(pos, end);
        }
        Ok(data.len())
    }

    /// Moves an inline file to an object of its own (one transaction, durable).
    fn promote(&mut self, i: usize) -> Result<(), Error<S::FlashError>> {
        let h = self.handles[i];
        self.settle(h.dir, h.name())?;
        let new = self.store.next_object_id();
        if h.truncated {
            // The old contents stay until the commit: the new object is not named by
            // the entry yet, and a pending record makes replay delete it if the commit
            // never comes.
            let at = self.log_pending(new)?;
            let bytes = &self.handles[i].inline[..h.size as usize];
            let mut ops = heapless::Vec::<TxOp<'_>, 8>::new();
            push(
                &mut ops,
                TxOp::Create {
                    kind: ObjKind::Object,
                    attrs: crate::stage::pending_attrs(at),
                },
            )?;
            if !bytes.is_empty() {
                push(
                    &mut ops,
                    TxOp::Write {
                        obj: new,
                        offset: 0,
                        data: bytes,
                    },
                )?;
            }
            self.store.transact(&ops)?;
            drop(ops);
            let h = &mut self.handles[i];
            h.obj = new;
            h.pending = true;
            return Ok(());
        }
        let mut loc = namespace::locate(&mut self.store, h.dir, h.name(), &mut self.a)?;
        let at = loc.found.ok_or(Error::Corrupted)?;
        let mut e = namespace::entry_at(&self.a, &loc, at)?;
        namespace::remove_from(&mut self.a, &mut loc)?;
        e.object = new;
        if !namespace::insert_into(&mut self.a, &mut loc, &e.entry()) {
            return Err(Error::Corrupted);
        }
        let count = namespace::count_after(&loc.root, &[&loc], self.dir_version())?;
        let attrs = self.new_object_attrs()?;
        let mut ops = heapless::Vec::<TxOp<'_>, 8>::new();
        push(
            &mut ops,
            TxOp::Create {
                kind: ObjKind::Object,
                attrs,
            },
        )?;
        let bytes = &self.handles[i].inline[..h.size as usize];
        if !bytes.is_empty() {
            push(
                &mut ops,
                TxOp::Write {
                    obj: new,
                    offset: 0,
                    data: bytes,
                },
            )?;
        }
        self.bucket_ops(&loc, &self.a, &count, &mut ops)?;
        if h.replaced != 0 {
            push(&mut ops, TxOp::Delete { obj: h.replaced })?;
        }
        self.store.transact(&ops)?;
        drop(ops);
        self.forget_deleted(h.replaced);
        let h = &mut self.handles[i];
        h.obj = new;
        h.replaced = 0;
        h.dirty = false;
        Ok(())
    }

    /// Moves the position; returns the new one. A position past the end is allowed
    /// (a write there fills the gap with zeros).
    pub fn seek(&mut self, f: File, to: SeekFrom) -> Result<u64, Error<S::FlashError>> {
        let i = self.handle(f)?;
        let h = &mut self.handles[i];
        let base = match to {
            SeekFrom::Start(p) => {
                h.pos = p;
                return Ok(p);
            }
            SeekFrom::End(d) => (h.size, d),
            SeekFrom::Current(d) => (h.pos, d),
        };
        let p = base.0.checked_add_signed(base.1).ok_or(Error::TooLarge)?;
        h.pos = p;
        Ok(p)
    }

    /// Sets the file's size (zeros when it grows). Durable on return. A failure changes
    /// nothing, but for a file opened with `truncate` and not committed since that has
    /// moved to an object of its own (outgrowing inline storage, or a full bucket at
    /// the trie's last level): there the handle may keep the new size (only bytes
    /// written since the open, never durable, are at stake).
    pub fn truncate(&mut self, f: File, size: u64) -> Result<(), Error<S::FlashError>> {
        let i = self.handle(f)?;
        if !self.handles[i].write {
            return Err(Error::Access);
        }
        if size > self.store.max_object_size() {
            return Err(Error::TooLarge);
        }
        if self.handles[i].obj == 0 && size > INLINE_MAX as u64 {
            self.promote(i)?;
        }
        let h = &mut self.handles[i];
        if h.obj == 0 {
            let (old, was_dirty) = (h.size, h.dirty);
            if size > old {
                h.inline[old as usize..size as usize].fill(0);
            }
            h.size = size;
            h.dirty = true;
            let r = self.commit(i);
            // A commit that moved the file to a pending object and failed to adopt it
            // (review s56) leaves the handle reading that object, which holds the new
            // size: it keeps it, as for a pending object made by a write.
            if r.is_err() && self.handles[i].obj == 0 {
                // Nothing changed on flash: nor in the handle, or the next commit
                // would make the refused truncate durable (an independent review,
                // stop 44: a truncate refused with `NoSpace` on a full volume, and
                // the close after it cut 190 acknowledged bytes).
                let h = &mut self.handles[i];
                h.size = old;
                h.dirty = was_dirty;
            }
            return r;
        }
        let obj = h.obj;
        // Older staged records of the object must never be replayed over this.
        match self.supersede(obj)? {
            Some(attrs) => {
                let r = self
                    .store
                    .transact(&[TxOp::Truncate { obj, size }, TxOp::SetAttrs { obj, attrs }]);
                if r.is_err() {
                    // The records stay the durable copy of its buffered bytes.
                    self.unsupersede(obj);
                }
                r?
            }
            None => self.store.transact(&[TxOp::Truncate { obj, size }])?,
        }
        let h = &mut self.handles[i];
        h.size = size;
        h.clip(size);
        if h.pending {
            // Durable on return: the file's entry names the object from now on.
            return self.adopt(i);
        }
        Ok(())
    }

    /// Makes everything written through `f` durable.
    pub fn fsync(&mut self, f: File) -> Result<(), Error<S::FlashError>> {
        let i = self.handle(f)?;
        self.commit(i)
    }

    pub(crate) fn commit(&mut self, i: usize) -> Result<(), Error<S::FlashError>> {
        // Only what the object path needs is copied here (an fsync of a file with an
        // object is on the deepest path of a file workload); an inline file's commit
        // copies the whole handle, in its own frame.
        let h = &self.handles[i];
        if h.pending {
            return self.adopt(i);
        }
        if h.obj != 0 {
            let obj = h.obj;
            if h.scattered {
                self.flush_home(obj)?;
            } else if h.nranges > 0 {
                let (ranges, n) = (h.ranges, h.nranges as usize);
                self.make_durable(obj, &ranges[..n])?;
            } else {
                return Ok(());
            }
            let h = &mut self.handles[i];
            h.nranges = 0;
            h.scattered = false;
            return Ok(());
        }
        if !h.dirty {
            return Ok(());
        }
        self.commit_inline(i)
    }

    /// [`Fs::commit`] of a changed inline file: staged, or its entry rewritten.
    #[inline(never)]
    fn commit_inline(&mut self, i: usize) -> Result<(), Error<S::FlashError>> {
        let h = self.handles[i];
        if h.replaced == 0 {
            let (dir, name, len) = (h.dir, h.name, h.name_len as usize);
            let contents = &self.handles[i].inline[..h.size as usize];
            let mut copy = [0u8; INLINE_MAX];
            copy[..contents.len()].copy_from_slice(contents);
            if self.stage_inline(dir, &name[..len], &copy[..h.size as usize])? {
                self.handles[i].dirty = false;
                self.handles[i].truncated = false;
                return Ok(());
            }
        }
        self.settle(h.dir, h.name())?;
        let loc = namespace::locate(&mut self.store, h.dir, h.name(), &mut self.a)?;
        let at = loc.found.ok_or(Error::Corrupted)?;
        let mut e = namespace::entry_at(&self.a, &loc, at)?;
        let grow = (h.size as usize).saturating_sub(e.inline().len());
        let free = bucket::capacity(self.store.payload()) - loc.head.used as usize;
        let mut loc = if grow + self.staged_growth(&loc, h.name())? <= free {
            loc
        } else {
            match self.locate_with_room(h.dir, h.name(), grow) {
                Ok(loc) => loc,
                // A full bucket at the trie's last level: an entry naming an object
                // is no longer than the inline one, so the file moves to an object
                // of its own instead of the close failing.
                Err(Error::DirectoryFull) => return self.commit_as_object(i),
                Err(e) => return Err(e),
            }
        };
        e.set_inline(&h.inline[..h.size as usize])?;
        namespace::remove_from(&mut self.a, &mut loc)?;
        if !namespace::insert_into(&mut self.a, &mut loc, &e.entry()) {
            return Err(Error::Corrupted);
        }
        let count = namespace::count_after(&loc.root, &[&loc], self.dir_version())?;
        let mut ops = heapless::Vec::<TxOp<'_>, 8>::new();
        self.bucket_ops(&loc, &self.a, &count, &mut ops)?;
        if h.replaced != 0 {
            ops.push(TxOp::Delete { obj: h.replaced })
                .map_err(|_| Error::Corrupted)?;
        }
        self.store.transact(&ops)?;
        drop(ops);
        self.forget_deleted(h.replaced);
        let h = &mut self.handles[i];
        h.dirty = false;
        h.replaced = 0;
        h.truncated = false;
        Ok(())
    }

    /// Commits inline file `i` by moving it to an object of its own: in one
    /// transaction, or (opened with truncate) through a pending object and its adoption.
    fn commit_as_object(&mut self, i: usize) -> Result<(), Error<S::FlashError>> {
        self.promote(i)?;
        if self.handles[i].pending {
            return self.adopt(i);
        }
        Ok(())
    }

    /// Commits a file whose object no entry names yet: its bytes home, then in one
    /// transaction the entry names it, it is marked adopted, and the old object (if
    /// any) is deleted.
    fn adopt(&mut self, i: usize) -> Result<(), Error<S::FlashError>> {
        let h = self.handles[i];
        self.store.flush(h.obj)?;
        let mut loc = namespace::locate(&mut self.store, h.dir, h.name(), &mut self.a)?;
        let at = loc.found.ok_or(Error::Corrupted)?;
        let mut e = namespace::entry_at(&self.a, &loc, at)?;
        namespace::remove_from(&mut self.a, &mut loc)?;
        e.set_inline(&[])?;
        e.object = h.obj;
        if !namespace::insert_into(&mut self.a, &mut loc, &e.entry()) {
            return Err(Error::Corrupted);
        }
        let count = namespace::count_after(&loc.root, &[&loc], self.dir_version())?;
        // Flushed home just now: every record before the log's end is superseded
        // (none names it, unless its id was another object's before).
        let attrs = self.new_object_attrs()?;
        let mut ops = heapless::Vec::<TxOp<'_>, 8>::new();
        self.bucket_ops(&loc, &self.a, &count, &mut ops)?;
        push(&mut ops, TxOp::SetAttrs { obj: h.obj, attrs })?;
        if h.replaced != 0 {
            push(&mut ops, TxOp::Delete { obj: h.replaced })?;
        }
        self.store.transact(&ops)?;
        drop(ops);
        self.forget_deleted(h.replaced);
        let h = &mut self.handles[i];
        h.pending = false;
        h.truncated = false;
        h.dirty = false;
        h.replaced = 0;
        h.nranges = 0;
        h.scattered = false;
        Ok(())
    }

    /// Makes the file durable and closes the handle (closed even when the commit
    /// fails: the error says what was not made durable).
    pub fn close(&mut self, f: File) -> Result<(), Error<S::FlashError>> {
        let i = self.handle(f)?;
        let r = self.commit(i);
        if r.is_err() {
            if let Some(obj) = self.handles[i].pending_object() {
                // Not adopted: give its room back (replay would, at the next mount).
                let _ = self.store.transact(&[TxOp::Delete { obj }]);
            } else if self.handles[i].obj != 0 && !self.is_staged(self.handles[i].obj) {
                // The writes the failed commit carried were never durable: the store
                // must not keep them for a later flush (an unmount) to trip on. Not
                // for a file with staged records: its buffers also hold the bytes of
                // acknowledged fsyncs, which only the log has besides (an independent
                // review: dropped, and the next patch stamped the file past their
                // records, so a full volume lost them for good).
                self.store.discard(self.handles[i].obj);
            }
        }
        self.handles[i] = Handle::CLOSED;
        r
    }

    /// The file's size (writes not yet durable included).
    pub fn len(&self, f: File) -> Result<u64, Error<S::FlashError>> {
        let i = self.handle(f)?;
        Ok(self.handles[i].size)
    }
}
