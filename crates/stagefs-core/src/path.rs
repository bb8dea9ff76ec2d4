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

/// Splits two component lists at the end of their common prefix: the shared
/// components, then what is left of `a` and of `b` after them (a rename walks the
/// shared parent directories once).
pub fn split_common<'p>(
    a: Components<'p>,
    b: Components<'p>,
) -> (Components<'p>, Components<'p>, Components<'p>) {
    let (mut ra, mut rb) = (a.clone(), b.clone());
    let mut shared = 0;
    loop {
        let (na, nb) = (ra.clone(), rb.clone());
        match (ra.next(), rb.next()) {
            (Some(x), Some(y)) if x == y => shared += 1,
            _ => {
                // Undo the step that differed.
                ra = na;
                rb = nb;
                break;
            }
        }
    }
    let end = if ra.left == 0 {
        a.rest.len()
    } else {
        // The shared components and the `/` after them.
        (a.rest.len() - ra.rest.len()).saturating_sub(1)
    };
    let common = Components {
        rest: &a.rest[..end],
        left: shared,
    };
    (common, ra, rb)
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

    fn common(a: &str, b: &str) -> (String, Vec<String>, Vec<String>) {
        let (a, b) = (components(a).unwrap(), components(b).unwrap());
        let (c, ra, rb) = split_common(a, b);
        let own = |r: Components<'_>| r.map(String::from).collect::<Vec<_>>();
        assert_eq!(c.clone().count(), c.left);
        (c.as_str().to_string(), own(ra), own(rb))
    }

    #[test]
    fn two_paths_split_at_their_last_shared_component() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            common("/a/b/c", "/a/b/d/e"),
            ("a/b".into(), v(&["c"]), v(&["d", "e"]))
        );
        assert_eq!(common("/a/b", "/a/b"), ("a/b".into(), v(&[]), v(&[])));
        assert_eq!(common("/a/b", "/a/b/c"), ("a/b".into(), v(&[]), v(&["c"])));
        assert_eq!(common("/a/b/c", "/a"), ("a".into(), v(&["b", "c"]), v(&[])));
        assert_eq!(
            common("/x/y", "/a/y"),
            ("".into(), v(&["x", "y"]), v(&["a", "y"]))
        );
        assert_eq!(common("/", "/a"), ("".into(), v(&[]), v(&["a"])));
        // Components, not bytes: "ab" and "abc" differ.
        assert_eq!(
            common("/ab/c", "/abc/c"),
            ("".into(), v(&["ab", "c"]), v(&["abc", "c"]))
        );
        // The shared part walks as a path of its own.
        let (c, _, _) = split_common(components("/a/b/c").unwrap(), components("/a/b/d").unwrap());
        assert_eq!(c.collect::<Vec<_>>(), vec!["a", "b"]);
    }

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
