//! Listing a directory without allocating: the leaves of the directory's hash trie in
//! depth-first order (left child first), one entry per step. Page 0 stays in the
//! volume's second scratch page while the listing lives; each step reads the buckets it
//! passes, except, in a directory of header version 3, those of a group whose count is
//! 0. A group's buckets are the leaves below one node of level 10 and come in a row, so
//! a step reads at most 16 buckets: the one it is on, the rest of its group (up to 7)
//! and up to 8 of the next group that holds a name.

use crate::error::Error;
use crate::format::bucket::{bucket_page, entries, group_count, header, is_split, DirHeader, Kind};
use crate::namespace;
use crate::store::Store;
use crate::{Fs, NAME_MAX};

/// One entry of a directory listing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DirEntry {
    /// File or directory.
    pub kind: Kind,
    name: [u8; NAME_MAX],
    name_len: u8,
}

impl DirEntry {
    /// The entry's name.
    pub fn name(&self) -> &str {
        core::str::from_utf8(&self.name[..self.name_len as usize]).unwrap_or("")
    }
}

/// Iterator over a directory's entries ([`Fs::read_dir`]).
pub struct ReadDir<'a, S: Store, const PAGE: usize, const HANDLES: usize> {
    fs: &'a mut Fs<S, PAGE, HANDLES>,
    dir: u32,
    level: u32,
    prefix: u32,
    /// Next entry number in the current leaf.
    entry: u16,
    /// Page 0 is in `fs.b`.
    started: bool,
    /// Page 0 counts non-empty buckets per group (header version 3).
    groups: bool,
    done: bool,
}

impl<'a, S: Store, const PAGE: usize, const HANDLES: usize> ReadDir<'a, S, PAGE, HANDLES> {
    pub(crate) fn new(fs: &'a mut Fs<S, PAGE, HANDLES>, dir: u32) -> Self {
        ReadDir {
            fs,
            dir,
            level: 0,
            prefix: 0,
            entry: 0,
            started: false,
            groups: false,
            done: false,
        }
    }

    /// Descends to the leftmost leaf below the current node.
    fn descend(&mut self) {
        while is_split(&self.fs.b, self.level, self.prefix) {
            self.level += 1;
        }
    }

    /// Moves to the next leaf (`false`: none left).
    fn next_leaf(&mut self) -> bool {
        self.entry = 0;
        loop {
            if self.level == 0 {
                return false;
            }
            let up = self.level - 1;
            if self.prefix & (1 << up) == 0 {
                // A left child: its right sibling next.
                self.prefix |= 1 << up;
                self.descend();
                return true;
            }
            self.prefix &= !(1 << up);
            self.level = up;
        }
    }

    fn step(&mut self) -> Result<Option<DirEntry>, Error<S::FlashError>> {
        let p = self.fs.store.payload();
        // First: an error ends the listing (`next` sets `done`), even one from page 0
        // before the listing started (review s55: a corrupt page 0 gave it forever).
        if self.done {
            return Ok(None);
        }
        if !self.started {
            namespace::read_page(&mut self.fs.store, self.dir, 0, &mut self.fs.b)?;
            self.groups = DirHeader::parse(&self.fs.b[..p])?.groups;
            self.started = true;
            self.descend();
        }
        loop {
            if self.done {
                return Ok(None);
            }
            if self.groups && group_count(&self.fs.b[..p], self.prefix) == 0 {
                // No bucket of this group holds a name.
                if !self.next_leaf() {
                    self.done = true;
                }
                continue;
            }
            let page = bucket_page(self.prefix);
            namespace::read_page(&mut self.fs.store, self.dir, page, &mut self.fs.a)?;
            if let Some(h) = header(&self.fs.a[..p], self.level, self.prefix)? {
                if let Some(e) = entries(&self.fs.a[..p], &h).nth(self.entry as usize) {
                    let (_, e) = e?;
                    self.entry += 1;
                    if e.name.len() > NAME_MAX || core::str::from_utf8(e.name).is_err() {
                        return Err(Error::Corrupted);
                    }
                    let mut out = DirEntry {
                        kind: e.kind,
                        name: [0; NAME_MAX],
                        name_len: e.name.len() as u8,
                    };
                    out.name[..e.name.len()].copy_from_slice(e.name);
                    return Ok(Some(out));
                }
            }
            if !self.next_leaf() {
                self.done = true;
            }
        }
    }
}

impl<S: Store, const PAGE: usize, const HANDLES: usize> Iterator for ReadDir<'_, S, PAGE, HANDLES> {
    type Item = Result<DirEntry, Error<S::FlashError>>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.step() {
            Ok(Some(e)) => Some(Ok(e)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
