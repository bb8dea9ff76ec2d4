//! Unnamed objects (feature `alloc`, for repair tools): objects of the store that no
//! path names.
//!
//! A writable volume leaves none behind: every namespace change creates and deletes
//! objects in the transaction that names or unnames them, and a file's new object made
//! before its truncate-at-open commit is deleted by the next mount's replay. What can
//! leave some: a store rebuilt from a full scan, which may bring back an object deleted
//! long before once its tombstone was collected (DESIGN 7.5), and a cut in the middle of a repair, which can
//! leave a pending object the replay no longer sees. They cost space only;
//! [`Fs::remove_unnamed_objects`] gives it back.
//!
//! Named are: the volume header, the root directory, the staging log, and the object of
//! every directory and every non-inline file reached from the root. The walk holds the
//! named ids in a set (4 bytes each, plus the set's overhead) and reads every
//! directory's buckets once and each entry's bucket again for its object, so it is for
//! a host tool, not for a microcontroller's boot.

use alloc::collections::BTreeSet;
use alloc::string::String;
use alloc::vec::Vec;

use oftl::TxOp;

use crate::error::Error;
use crate::format::bucket::Kind;
use crate::store::Store;
use crate::{Fs, VOLUME_OBJECT};

impl<S: Store, const PAGE: usize, const HANDLES: usize> Fs<S, PAGE, HANDLES> {
    /// The store's objects that no path names, ascending (see the module docs).
    /// Refused with [`Error::Busy`] while a file is open (a file opened with truncate
    /// may own an object its commit has not named yet); [`Error::Corrupted`] when an
    /// object has two names (only damage makes one, and a directory named twice would
    /// make the walk endless).
    pub fn unnamed_objects(&mut self) -> Result<Vec<u32>, Error<S::FlashError>> {
        let v = self.mounted()?;
        if self.handles.iter().any(|h| h.open) {
            return Err(Error::Busy);
        }
        let mut named = BTreeSet::new();
        named.extend([VOLUME_OBJECT, v.root, v.staging]);
        let mut dirs: Vec<String> = Vec::from([String::from("/")]);
        while let Some(dir) = dirs.pop() {
            let mut entries = Vec::new();
            for e in self.read_dir(&dir)? {
                let e = e?;
                entries.push((String::from(e.name()), e.kind));
            }
            for (name, kind) in entries {
                let mut path = dir.clone();
                if !path.ends_with('/') {
                    path.push('/');
                }
                path.push_str(&name);
                if let Some(o) = self.location(&path)?.object {
                    // No object has two names: a second one (a directory met again
                    // would make the walk endless) is damage, and nothing is deleted.
                    if !named.insert(o) {
                        return Err(Error::Corrupted);
                    }
                }
                if kind == Kind::Dir {
                    dirs.push(path);
                }
            }
        }
        let mut unnamed = Vec::new();
        let mut at = None;
        while let Some(o) = self.store.next_object(at)? {
            if !named.contains(&o) {
                unnamed.push(o);
            }
            at = Some(o);
        }
        Ok(unnamed)
    }

    /// Deletes the objects [`Fs::unnamed_objects`] finds, one transaction each, and
    /// returns how many. Refused with [`Error::ReadOnly`] on a read-only volume and
    /// [`Error::Busy`] while a file is open; a failure part way leaves the objects not
    /// yet deleted as they were (each delete is durable on its own).
    pub fn remove_unnamed_objects(&mut self) -> Result<usize, Error<S::FlashError>> {
        self.changes_allowed()?;
        let unnamed = self.unnamed_objects()?;
        for &o in &unnamed {
            self.store.transact(&[TxOp::Delete { obj: o }])?;
            self.forget_deleted(o);
        }
        Ok(unnamed.len())
    }
}
