//! The file-tree model shared by the power-loss sweeps and the `stagefs_ops` fuzz
//! target: operations, the states a cut in each may leave, running them on a volume,
//! and reading a whole volume back as a tree.

#![allow(dead_code)]

use std::collections::BTreeMap;

use nand_hal::powerloss::Sim;
use nand_hal::ErrorKind;
use oftl::Oftl;
use stagefs_core::{Error, Fs, Kind, OpenOptions};

pub type Store<'a> = Oftl<&'a mut Sim, 2048, 64, 4>;
pub type Vol<'a> = Fs<Store<'a>, 2048, 4>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    Dir,
    File(Vec<u8>),
}

pub type Tree = BTreeMap<String, Node>;

#[derive(Clone, Debug)]
pub enum Op {
    Mkdir(&'static str),
    Rmdir(&'static str),
    /// Open with create + truncate, write, close.
    Put(&'static str, usize, u8),
    /// Open for append, write, fsync, close.
    Append(&'static str, usize, u8),
    Remove(&'static str),
    Rename(&'static str, &'static str),
    /// Open for writing, truncate to a size, close.
    Truncate(&'static str, usize),
    /// Flush everything and checkpoint.
    Sync,
}

pub fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// The states `op` may leave after a cut in its middle, the final one last.
pub fn effects(tree: &Tree, op: &Op) -> Vec<Tree> {
    let mut t = tree.clone();
    let mut out = Vec::new();
    match op {
        Op::Mkdir(p) => {
            t.insert(p.to_string(), Node::Dir);
        }
        Op::Rmdir(p) | Op::Remove(p) => {
            t.remove(*p);
        }
        Op::Put(p, len, seed) => {
            if !t.contains_key(*p) {
                // Creation is durable at open.
                t.insert(p.to_string(), Node::File(Vec::new()));
                out.push(t.clone());
            }
            // An existing file keeps its old contents until the close commits the new
            // ones (also when they move to an object of their own on the way).
            t.insert(p.to_string(), Node::File(bytes(*len, *seed)));
        }
        Op::Append(p, len, seed) => {
            if let Some(Node::File(d)) = t.get_mut(*p) {
                d.extend(bytes(*len, *seed));
            }
        }
        Op::Truncate(p, size) => {
            if let Some(Node::File(d)) = t.get_mut(*p) {
                d.resize(*size, 0);
            }
        }
        Op::Sync => {}
        Op::Rename(a, b) => {
            let moved: Vec<(String, Node)> = t
                .iter()
                .filter(|(k, _)| *k == a || k.starts_with(&format!("{a}/")))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let replaced: Vec<String> = t
                .keys()
                .filter(|k| *k == b || k.starts_with(&format!("{b}/")))
                .cloned()
                .collect();
            for k in replaced {
                t.remove(&k);
            }
            for (k, v) in moved {
                t.remove(&k);
                t.insert(format!("{b}{}", &k[a.len()..]), v);
            }
        }
    }
    out.push(t);
    out
}

pub fn apply<'a>(fs: &mut Vol<'a>, op: &Op) -> Result<(), Error<nand_hal::sim::SimError>> {
    match op {
        Op::Mkdir(p) => fs.create_dir(p),
        Op::Rmdir(p) => fs.remove_dir(p),
        Op::Remove(p) => fs.remove(p),
        Op::Rename(a, b) => fs.rename(a, b),
        Op::Put(p, len, seed) => {
            let f = fs.open(
                p,
                OpenOptions::new().write(true).create(true).truncate(true),
            )?;
            fs.write(f, &bytes(*len, *seed))?;
            fs.close(f)
        }
        Op::Append(p, len, seed) => {
            let f = fs.open(p, OpenOptions::new().append(true))?;
            fs.write(f, &bytes(*len, *seed))?;
            fs.fsync(f)?;
            fs.close(f)
        }
        Op::Truncate(p, size) => {
            let f = fs.open(p, OpenOptions::new().write(true))?;
            fs.truncate(f, *size as u64)?;
            fs.close(f)
        }
        Op::Sync => fs.sync(),
    }
}

pub fn observe(fs: &mut Vol<'_>) -> Result<Tree, Error<nand_hal::sim::SimError>> {
    let mut t = Tree::new();
    let mut dirs = vec![String::new()];
    while let Some(d) = dirs.pop() {
        let path = if d.is_empty() {
            "/".to_string()
        } else {
            d.clone()
        };
        let mut list = Vec::new();
        for e in fs.read_dir(&path)? {
            let e = e?;
            list.push((format!("{d}/{}", e.name()), e.kind));
        }
        for (p, kind) in list {
            match kind {
                Kind::Dir => {
                    t.insert(p.clone(), Node::Dir);
                    dirs.push(p);
                }
                Kind::File => {
                    let f = fs.open(&p, OpenOptions::new().read(true))?;
                    let mut data = Vec::new();
                    let mut buf = [0u8; 1000];
                    loop {
                        let n = fs.read(f, &mut buf)?;
                        if n == 0 {
                            break;
                        }
                        data.extend_from_slice(&buf[..n]);
                    }
                    fs.close(f)?;
                    t.insert(p, Node::File(data));
                }
            }
        }
    }
    Ok(t)
}

/// Whether `e` is the power cut (the device or the mount saw it).
pub fn power_loss(e: &Error<nand_hal::sim::SimError>) -> bool {
    match e {
        Error::Flash(f) => f.kind() == ErrorKind::PowerLoss,
        Error::Mount(oftl::MountError::Flash(f)) => f.kind() == ErrorKind::PowerLoss,
        _ => false,
    }
}

fn parent_of(p: &str) -> &str {
    &p[..p.rfind('/').unwrap_or(0)]
}

fn is_dir(t: &Tree, p: &str) -> bool {
    p.is_empty() || t.get(p) == Some(&Node::Dir)
}

fn has_children(t: &Tree, p: &str) -> bool {
    let prefix = format!("{p}/");
    t.keys().any(|k| k.starts_with(&prefix))
}

/// Whether `op` is a valid request on `t` (the volume must then do it, or be cut).
pub fn valid(t: &Tree, op: &Op) -> bool {
    match op {
        Op::Mkdir(p) => is_dir(t, parent_of(p)) && !t.contains_key(*p),
        Op::Rmdir(p) => t.get(*p) == Some(&Node::Dir) && !has_children(t, p),
        Op::Put(p, ..) => is_dir(t, parent_of(p)) && t.get(*p) != Some(&Node::Dir),
        Op::Append(p, ..) | Op::Truncate(p, _) | Op::Remove(p) => {
            matches!(t.get(*p), Some(Node::File(_)))
        }
        Op::Rename(a, b) => {
            let Some(src) = t.get(*a) else { return false };
            if a == b || b.starts_with(&format!("{a}/")) || !is_dir(t, parent_of(b)) {
                return false;
            }
            match (src, t.get(*b)) {
                (_, None) => true,
                (Node::File(_), Some(Node::File(_))) => true,
                (Node::Dir, Some(Node::Dir)) => !has_children(t, b),
                _ => false,
            }
        }
        Op::Sync => true,
    }
}

/// Whether `e` is a refusal a valid request must never get.
pub fn is_refusal(e: &Error<nand_hal::sim::SimError>) -> bool {
    matches!(
        e,
        Error::NotFound
            | Error::Exists
            | Error::NotADirectory
            | Error::IsADirectory
            | Error::NotEmpty
            | Error::Busy
            | Error::Path(_)
            | Error::Access
            | Error::BadHandle
            | Error::TooManyOpen
            | Error::NotMounted
    )
}
