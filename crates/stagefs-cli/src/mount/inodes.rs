//! Inode numbers for a path-addressed volume. The file layer names entries by path;
//! FUSE names them by inode number, so the mount hands out a number the first time
//! the kernel looks a path up and keeps the two maps in step through renames and
//! removals.
//!
//! Invariant: `by_ino` and `by_path` are inverse maps; the root is inode 1 and `/`.

use std::collections::HashMap;

/// The root's inode number (FUSE's).
pub const ROOT: u64 = 1;

/// The two-way map between inode numbers and image paths.
pub struct Inodes {
    by_ino: HashMap<u64, String>,
    by_path: HashMap<String, u64>,
    next: u64,
}

impl Default for Inodes {
    fn default() -> Self {
        Self::new()
    }
}

impl Inodes {
    /// Only the root.
    pub fn new() -> Self {
        let mut i = Inodes {
            by_ino: HashMap::new(),
            by_path: HashMap::new(),
            next: ROOT + 1,
        };
        i.by_ino.insert(ROOT, "/".to_string());
        i.by_path.insert("/".to_string(), ROOT);
        i
    }

    /// The path of `ino`, if the kernel was told about it and it still exists.
    pub fn path(&self, ino: u64) -> Option<&str> {
        self.by_ino.get(&ino).map(String::as_str)
    }

    /// The inode number of `path`, handing out a new one the first time.
    pub fn number(&mut self, path: &str) -> u64 {
        if let Some(&i) = self.by_path.get(path) {
            return i;
        }
        let i = self.next;
        self.next += 1;
        self.by_ino.insert(i, path.to_string());
        self.by_path.insert(path.to_string(), i);
        i
    }

    /// The inode number of `path` if it has one.
    pub fn known(&self, path: &str) -> Option<u64> {
        self.by_path.get(path).copied()
    }

    /// `path` (and everything below it) no longer exists.
    pub fn removed(&mut self, path: &str) {
        let below = format!("{path}/");
        let gone: Vec<String> = self
            .by_path
            .keys()
            .filter(|p| *p == path || p.starts_with(&below))
            .cloned()
            .collect();
        for p in gone {
            if let Some(i) = self.by_path.remove(&p) {
                self.by_ino.remove(&i);
            }
        }
    }

    /// `from` was renamed to `to` (replacing whatever `to` was): the entries below
    /// `from` move with it and keep their numbers.
    pub fn renamed(&mut self, from: &str, to: &str) {
        self.removed(to);
        let below = format!("{from}/");
        let moved: Vec<(String, u64)> = self
            .by_path
            .iter()
            .filter(|(p, _)| *p == from || p.starts_with(&below))
            .map(|(p, i)| (p.clone(), *i))
            .collect();
        for (p, i) in moved {
            let new = format!("{to}{}", &p[from.len()..]);
            self.by_path.remove(&p);
            self.by_path.insert(new.clone(), i);
            self.by_ino.insert(i, new);
        }
    }
}

/// `dir` joined with `name` as an image path.
pub fn child(dir: &str, name: &str) -> String {
    crate::volume::join(dir, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_follow_renames_and_removals() {
        let mut i = Inodes::new();
        let d = i.number("/d");
        let f = i.number("/d/f");
        let g = i.number("/dd");
        assert_eq!(i.number("/d"), d);
        i.renamed("/d", "/e");
        assert_eq!(i.path(d), Some("/e"));
        assert_eq!(i.path(f), Some("/e/f"));
        assert_eq!(i.path(g), Some("/dd"), "a sibling sharing the prefix stays");
        i.renamed("/dd", "/e/f");
        assert_eq!(i.path(f), None, "the replaced entry is gone");
        assert_eq!(i.path(g), Some("/e/f"));
        i.removed("/e");
        assert_eq!(i.path(d), None);
        assert_eq!(i.path(g), None);
        assert_eq!(i.path(ROOT), Some("/"));
        assert_ne!(i.number("/e"), d, "numbers are never reused");
    }
}
