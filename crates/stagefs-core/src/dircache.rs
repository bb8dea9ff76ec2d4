//! The directory the last path walk ended at, so that opening many files of one
//! directory reads that directory's pages only, not every ancestor's each time.
//!
//! Invariant: when it holds `(path, dir)`, walking `path` from the root now ends at
//! directory object `dir`. Only a rename or a removed directory can change what a path
//! names (directory objects never move), so both forget it, as does every mount.

/// Longest parent path (bytes, without the leading `/`) the cache keeps.
pub const DIR_CACHE_PATH: usize = 48;

/// One remembered path walk.
pub(crate) struct DirCache {
    path: heapless::Vec<u8, DIR_CACHE_PATH>,
    dir: u32,
    valid: bool,
}

impl DirCache {
    pub(crate) const EMPTY: DirCache = DirCache {
        path: heapless::Vec::new(),
        dir: 0,
        valid: false,
    };

    /// The directory `path` (canonical, without the leading `/`) names, if remembered.
    pub(crate) fn get(&self, path: &str) -> Option<u32> {
        (self.valid && self.path.as_slice() == path.as_bytes()).then_some(self.dir)
    }

    /// A walk of `path` ended at `dir` (a path too long to keep is not kept).
    pub(crate) fn walked(&mut self, path: &str, dir: u32) {
        self.path.clear();
        self.valid = self.path.extend_from_slice(path.as_bytes()).is_ok();
        self.dir = dir;
    }

    /// A rename, a removed directory or a new mount: paths may name other directories.
    pub(crate) fn forget(&mut self) {
        self.valid = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_one_walk_until_forgotten() {
        let mut c = DirCache::EMPTY;
        assert_eq!(c.get(""), None);
        c.walked("a/b", 7);
        assert_eq!(c.get("a/b"), Some(7));
        assert_eq!(c.get("a"), None);
        c.walked("", 1);
        assert_eq!(c.get(""), Some(1));
        assert_eq!(c.get("a/b"), None);
        c.forget();
        assert_eq!(c.get(""), None);
        let long = "x".repeat(DIR_CACHE_PATH + 1);
        c.walked(&long, 3);
        assert_eq!(c.get(&long), None);
    }
}
