//! A file-tree oracle for power-loss testing (feature `oracle`, host only): operations,
//! the states a cut in the middle of each may leave, running them on a volume, and
//! reading a whole volume back as a tree. The power-loss sweeps, the `stagefs_ops`
//! fuzz target and `stagefs torture` share it.
//!
//! The states an operation may leave follow the guarantees in the crate docs: a
//! namespace operation is all or nothing, a file written whole keeps its old contents
//! until its close commits the new ones (a new file exists, empty, from its open), an
//! fsynced append is all there or not; and a writable volume holds no object that no
//! path names (`Fs::unnamed_objects`).

use std::collections::BTreeMap;
use std::format;
use std::string::{String, ToString};
use std::vec;
use std::vec::Vec;

use nand_hal::powerloss::{CheckError, Scenario, Sim};
use nand_hal::sim::profile::Profile;
use nand_hal::ErrorKind;
use oftl::{Config, Greedy, Oftl};

use crate::store::Store;
use crate::{Error, Fs, Kind, OpenOptions};

/// An entry of the tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    /// A directory.
    Dir,
    /// A file and its contents.
    File(Vec<u8>),
}

/// A whole volume: absolute paths (no trailing `/`; the root is implied) to entries.
pub type Tree = BTreeMap<String, Node>;

/// An operation on the volume.
#[derive(Clone, Debug)]
pub enum Op {
    /// Create a directory.
    Mkdir(&'static str),
    /// Remove an empty directory.
    Rmdir(&'static str),
    /// Open with create + truncate, write, close.
    Put(&'static str, usize, u8),
    /// Open for append, write, fsync, close.
    Append(&'static str, usize, u8),
    /// Remove a file.
    Remove(&'static str),
    /// Rename, replacing the target.
    Rename(&'static str, &'static str),
    /// Open for writing, truncate to a size, close.
    Truncate(&'static str, usize),
    /// Flush everything and checkpoint.
    Sync,
}

/// The contents `Put` and `Append` write.
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

/// Runs `op` on the volume.
pub fn apply<S: Store, const PAGE: usize, const HANDLES: usize>(
    fs: &mut Fs<S, PAGE, HANDLES>,
    op: &Op,
) -> Result<(), Error<S::FlashError>> {
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

/// Reads the whole volume back as a tree.
pub fn observe<S: Store, const PAGE: usize, const HANDLES: usize>(
    fs: &mut Fs<S, PAGE, HANDLES>,
) -> Result<Tree, Error<S::FlashError>> {
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
pub fn power_loss<E: nand_hal::Error>(e: &Error<E>) -> bool {
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
pub fn is_refusal<E>(e: &Error<E>) -> bool {
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

/// A workload as a power-loss scenario (`nand_hal::powerloss`): format the part and
/// run `preload` (not cut), then run `ops` under the cut; after it, the volume must
/// mount and read back as the acknowledged tree or one the operation in flight may
/// leave. `PAGE`, `BLOCKS` and `CACHE` are the store's shape (`oftl::Oftl`).
pub struct Workload<const PAGE: usize, const BLOCKS: usize, const CACHE: usize> {
    /// The scenario's name (part of the replay token).
    pub name: String,
    /// The simulated part.
    pub profile: Profile,
    /// The store configuration `format` uses.
    pub config: Config,
    /// Operations before the cut is armed.
    pub preload: Vec<Op>,
    /// The operations under the cut.
    pub ops: Vec<Op>,
}

/// What a [`Workload`] knows during its run.
#[derive(Clone, Debug)]
pub struct Expected {
    /// The acknowledged state.
    pub now: Tree,
    /// What the operation in flight may have left.
    pub in_flight: Vec<Tree>,
}

type Volume<'a, const PAGE: usize, const BLOCKS: usize, const CACHE: usize> =
    Fs<Oftl<&'a mut Sim, PAGE, BLOCKS, CACHE>, PAGE, 4>;

impl<const PAGE: usize, const BLOCKS: usize, const CACHE: usize> Scenario
    for Workload<PAGE, BLOCKS, CACHE>
{
    type Oracle = Expected;

    fn name(&self) -> &str {
        &self.name
    }

    fn profile(&self) -> Profile {
        self.profile
    }

    fn setup(&self, nand: &mut Sim) -> Result<Expected, String> {
        let mut fs: Volume<'_, PAGE, BLOCKS, CACHE> =
            Fs::new(Oftl::new(nand, self.config, Greedy::DEFAULT));
        fs.format().map_err(|e| format!("format: {e:?}"))?;
        let mut now = Tree::new();
        for op in &self.preload {
            apply(&mut fs, op).map_err(|e| format!("preload {op:?}: {e:?}"))?;
            now = effects(&now, op).pop().unwrap_or_default();
        }
        fs.unmount().map_err(|e| format!("unmount: {e:?}"))?;
        Ok(Expected {
            now,
            in_flight: Vec::new(),
        })
    }

    fn run(&self, nand: &mut Sim, o: &mut Expected) -> Result<(), String> {
        let mut fs: Volume<'_, PAGE, BLOCKS, CACHE> =
            Fs::new(Oftl::new(nand, self.config, Greedy::DEFAULT));
        fs.mount().map_err(|e| format!("mount: {e:?}"))?;
        for op in &self.ops {
            o.in_flight = effects(&o.now, op);
            match apply(&mut fs, op) {
                Ok(()) => {
                    o.now = o.in_flight.pop().unwrap_or_default();
                    o.in_flight.clear();
                }
                Err(e) => return Err(format!("{op:?}: {e:?}")),
            }
        }
        fs.unmount().map_err(|e| format!("unmount: {e:?}"))
    }

    fn check(&self, nand: &mut Sim, o: &Expected) -> Result<(), CheckError> {
        let mut fs: Volume<'_, PAGE, BLOCKS, CACHE> =
            Fs::new(Oftl::new(nand, self.config, Greedy::DEFAULT));
        if let Err(e) = fs.mount() {
            if power_loss(&e) {
                return Err(CheckError::PowerLoss);
            }
            // (A store that mounts read-only mounts as a read-only volume, staged
            // records overlaid: it is checked like any other.)
            return Err(format!("mount: {e:?}").into());
        }
        let seen = match observe(&mut fs) {
            Ok(t) => t,
            Err(e) if power_loss(&e) => return Err(CheckError::PowerLoss),
            Err(e) => return Err(format!("read back: {e:?}").into()),
        };
        if seen == o.now || o.in_flight.contains(&seen) {
            // Nor does a cut leave an object no path names (a truncate-opened file's
            // new object is deleted by the replay; a read-only volume replays nothing).
            if !fs.read_only() {
                match fs.unnamed_objects() {
                    Ok(u) if u.is_empty() => {}
                    Ok(u) => return Err(format!("objects no path names: {u:?}").into()),
                    Err(e) if power_loss(&e) => return Err(CheckError::PowerLoss),
                    Err(e) => return Err(format!("unnamed objects: {e:?}").into()),
                }
            }
            return Ok(());
        }
        let diff = |want: &Tree| {
            let mut d = Vec::new();
            for (k, v) in want {
                match seen.get(k) {
                    None => d.push(format!("missing {k}")),
                    Some(x) if x != v => d.push(format!("differs {k}: {x:?} != {v:?}")),
                    _ => {}
                }
            }
            for k in seen.keys() {
                if !want.contains_key(k) {
                    d.push(format!("extra {k}"));
                }
            }
            d.join("; ")
        };
        let mut msg = format!(
            "tree matches no allowed state:\n  vs acknowledged: {}",
            diff(&o.now)
        );
        for t in &o.in_flight {
            msg.push_str(&format!("\n  vs in flight: {}", diff(t)));
        }
        Err(msg.into())
    }
}
