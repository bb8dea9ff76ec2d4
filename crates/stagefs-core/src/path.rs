//! Paths: `/`-separated UTF-8, absolute, canonical (no `.`, `..` or empty components),
//! each name 1..=[`NAME_MAX`] bytes without NUL. There is no depth limit (a walk keeps
//! no per-component state), so a rename can never make a file unreachable.

use crate::error::PathError;

/// Longest name, in bytes.
pub const NAME_MAX: usize = 64;

/// The components of `path` (none for the root), checked.
pub fn components(path: &str) -> Result<Components<'_>, PathError> {
    let rest = path.strip_prefix('/').ok_or(PathError::NotAbsolute)?;
    let mut n = 0;
    if !rest.is_empty() {
        for c in rest.split('/') {
            check_name(c)?;
            n += 1;
        }
    }
    Ok(Components { rest, left: n })
}

/// Splits `path` into its parent's components and its last name (refused for the
/// root).
pub fn parent_and_name(path: &str) -> Result<(Components<'_>, &str), PathError> {
    let mut c = components(path)?;
    if c.left == 0 {
        return Err(PathError::Root);
    }
    let cut = c.rest.rfind('/');
    let (parent, name) = match cut {
        Some(i) => (&c.rest[..i], &c.rest[i + 1..]),
        None => ("", c.rest),
    };
    c.rest = parent;
    c.left -= 1;
    Ok((c, name))
}

/// Whether the directory named by canonical path `dir` (without its leading `/`, as
/// [`Components::as_str`] gives it) is the one named `name` in directory `parent` (the
/// same form), or below it.
pub fn is_at_or_below(dir: &str, parent: &str, name: &str) -> bool {
    let rest = if parent.is_empty() {
        Some(dir)
    } else {
        dir.strip_prefix(parent).and_then(|r| r.strip_prefix('/'))
    };
    rest.and_then(|r| r.strip_prefix(name))
        .is_some_and(|r| r.is_empty() || r.starts_with('/'))
}

/// Checks one name.
pub fn check_name(c: &str) -> Result<(), PathError> {
    if c.is_empty() {
        return Err(PathError::EmptyComponent);
    }
    if c == "." || c == ".." {
        return Err(PathError::DotComponent);
    }
    if c.len() > NAME_MAX {
        return Err(PathError::NameTooLong);
    }
    if c.bytes().any(|b| b == 0) {
        return Err(PathError::Nul);
    }
    Ok(())
}

/// Checked components of a path, first to last.
#[derive(Clone, Debug)]
pub struct Components<'a> {
    rest: &'a str,
    left: usize,
}

impl<'a> Components<'a> {
    /// The components not yet taken, as a path without its leading `/` (`""` for none):
    /// canonical, so two equal strings name the same directory.
    pub fn as_str(&self) -> &'a str {
        self.rest
    }
}

impl<'a> Iterator for Components<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        match self.rest.find('/') {
            Some(i) => {
                let c = &self.rest[..i];
                self.rest = &self.rest[i + 1..];
                Some(c)
            }
            None => Some(core::mem::take(&mut self.rest)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(p: &str) -> Result<Vec<&str>, PathError> {
        components(p).map(|c| c.collect())
    }

    #[test]
    fn good_and_bad_paths() {
        assert_eq!(all("/"), Ok(vec![]));
        assert_eq!(all("/a"), Ok(vec!["a"]));
        assert_eq!(all("/a/b c/d.txt"), Ok(vec!["a", "b c", "d.txt"]));
        assert_eq!(all("a"), Err(PathError::NotAbsolute));
        assert_eq!(all(""), Err(PathError::NotAbsolute));
        assert_eq!(all("/a//b"), Err(PathError::EmptyComponent));
        assert_eq!(all("/a/"), Err(PathError::EmptyComponent));
        assert_eq!(all("/a/./b"), Err(PathError::DotComponent));
        assert_eq!(all("/.."), Err(PathError::DotComponent));
        assert_eq!(all("/a\0"), Err(PathError::Nul));
        let long = format!("/{}", "x".repeat(NAME_MAX + 1));
        assert_eq!(all(&long), Err(PathError::NameTooLong));
        let ok = format!("/{}", "é".repeat(NAME_MAX / 2));
        assert_eq!(all(&ok).unwrap().len(), 1);
        let deep = "/a".repeat(300);
        assert_eq!(all(&deep).unwrap().len(), 300);
    }

    #[test]
    fn parents_and_names() {
        let (p, n) = parent_and_name("/a/b/c").unwrap();
        assert_eq!((p.collect::<Vec<_>>(), n), (vec!["a", "b"], "c"));
        assert_eq!(parent_and_name("/a/b/c").unwrap().0.as_str(), "a/b");
        let (p, n) = parent_and_name("/c").unwrap();
        assert_eq!(p.as_str(), "");
        assert_eq!((p.collect::<Vec<_>>(), n), (vec![], "c"));
        assert_eq!(parent_and_name("/").unwrap_err(), PathError::Root);
    }

    #[test]
    fn at_or_below_compares_whole_components() {
        assert!(is_at_or_below("a", "", "a"));
        assert!(is_at_or_below("a/b/c", "", "a"));
        assert!(is_at_or_below("a/b", "a", "b"));
        assert!(is_at_or_below("a/b/c/d", "a", "b"));
        assert!(!is_at_or_below("", "", "a"));
        assert!(!is_at_or_below("ab", "", "a"));
        assert!(!is_at_or_below("a/bc", "a", "b"));
        assert!(!is_at_or_below("a", "a", "b"));
        assert!(!is_at_or_below("x/a/b", "a", "b"));
        assert!(!is_at_or_below("ab/b", "a", "b"));
    }
}
