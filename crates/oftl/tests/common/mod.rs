//! Shared test support: an operation enum, a std-collections oracle, and the check
//! that an OFTL's state matches one of the states the oracle allows.
#![allow(dead_code)]

pub mod ckpt_faults;
pub mod contents;
pub mod fill;
pub mod hooked;
pub mod lifecycle;
pub mod outcome;
pub mod pages;
pub mod read_only;
pub mod repair;

use std::collections::BTreeMap;

use nand_hal::sim::{HeapStorage, SimNand};
use nand_hal::{Error, ErrorKind, NandFlash};
use oftl::{Greedy, ObjKind, Oftl, ReadError, SpacePolicy, TxOp, WriteError};

pub type Sim = SimNand<HeapStorage>;
/// The test configuration on the TINY part (2 KiB pages, 16 pages/block, 64 blocks).
pub type Fs<'a> = FsWith<'a, Greedy>;
/// The test configuration with space policy `P`.
pub type FsWith<'a, P> = FsOn<&'a mut Sim, P>;
/// The test configuration over flash `F` (the simulator, or a wrapper around it), with
/// object-table and index pages of `M` bytes (2048: whole pages; 512: the small-RAM
/// layout).
pub type FsOn<F, P, const M: usize = 2048> = Oftl<F, 2048, 64, 4, 2, P, M>;
/// `paragc`'s policy sized for the test configuration.
pub type Para = oftl::ParaGc<64>;

/// TINY without ECC and without protected spare bytes: backpointers go in-band and log
/// pages are continued with partial programs.
pub fn tiny_raw() -> nand_hal::sim::Profile {
    use nand_hal::{Ecc, OobLayout, OobRegion};
    let mut p = nand_hal::sim::profile::TINY;
    p.name = "tiny-raw";
    p.capabilities.ecc = Ecc::NONE;
    p.capabilities.oob = OobLayout::new(&[OobRegion::unprotected(2, 62)]);
    p
}

pub fn cfg() -> oftl::Config {
    oftl::Config {
        window_blocks: 6,
        format_id: 7,
        ..Default::default()
    }
}

/// Deterministic bytes.
pub fn bytes(seed: u32, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// One operation; objects are named by slot (index into the list of created ids).
#[derive(Clone, Debug)]
pub enum Op {
    Create,
    Write {
        slot: usize,
        off: u64,
        len: usize,
        seed: u32,
    },
    Truncate {
        slot: usize,
        size: u64,
    },
    Delete {
        slot: usize,
    },
    SetAttr {
        slot: usize,
        v: u8,
    },
    /// Two writes and a truncate over two objects, atomically.
    Tx {
        a: usize,
        b: usize,
        off: u64,
        len: usize,
        seed: u32,
        size: u64,
    },
    /// A namespace-like transaction: create an object with `len` bytes, write its id
    /// at the start of object `dir` and set `dir`'s attribute, delete object `victim`
    /// (unless it is `dir`), all under one commit.
    Replace {
        dir: usize,
        victim: usize,
        len: usize,
        seed: u32,
    },
    Sync,
    /// Make one object's buffered writes durable.
    Flush {
        slot: usize,
    },
    Gc {
        budget: u32,
    },
    CreateLog,
    Append {
        slot: usize,
        len: usize,
        seed: u32,
    },
    /// Drop the first `n` live records.
    Trim {
        slot: usize,
        n: usize,
    },
    /// `n` records of `len` bytes (seeds `seed..seed + n`) under one commit.
    Batch {
        slot: usize,
        n: usize,
        len: usize,
        seed: u32,
    },
    /// Drop every record and move the stream to logical page `lpage` (the hidden
    /// `Oftl::log_skip_to`): positions no test reaches by appending.
    SkipTo {
        slot: usize,
        lpage: u64,
    },
}

/// The oracle: object contents and attribute byte 0, by id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    pub objs: BTreeMap<u32, (Vec<u8>, u8)>,
    pub logs: BTreeMap<u32, Vec<Vec<u8>>>,
    pub next_id: u32,
}

impl Model {
    pub fn new() -> Self {
        Model {
            objs: BTreeMap::new(),
            logs: BTreeMap::new(),
            next_id: 1,
        }
    }

    /// The id a slot names (slots index live objects in id order, modulo count).
    pub fn id_of(&self, slot: usize) -> Option<u32> {
        if self.objs.is_empty() {
            return None;
        }
        self.objs.keys().nth(slot % self.objs.len()).copied()
    }

    pub fn log_of(&self, slot: usize) -> Option<u32> {
        if self.logs.is_empty() {
            return None;
        }
        self.logs.keys().nth(slot % self.logs.len()).copied()
    }

    pub fn write(&mut self, id: u32, off: u64, data: &[u8]) {
        let o = &mut self.objs.get_mut(&id).unwrap().0;
        let end = off as usize + data.len();
        if data.is_empty() {
            return;
        }
        if o.len() < end {
            o.resize(end, 0);
        }
        o[off as usize..end].copy_from_slice(data);
    }

    /// Applies `op` (already resolved to ids) to a copy.
    pub fn apply(&self, op: &Op) -> Model {
        let mut m = self.clone();
        match *op {
            Op::Create => {
                m.objs.insert(m.next_id, (Vec::new(), 0));
                m.next_id += 1;
            }
            Op::Write {
                slot,
                off,
                len,
                seed,
            } => {
                if let Some(id) = m.id_of(slot) {
                    m.write(id, off, &bytes(seed, len));
                }
            }
            Op::Truncate { slot, size } => {
                if let Some(id) = m.id_of(slot) {
                    m.objs.get_mut(&id).unwrap().0.resize(size as usize, 0);
                }
            }
            Op::Delete { slot } => {
                if let Some(id) = m.id_of(slot) {
                    m.objs.remove(&id);
                }
            }
            Op::SetAttr { slot, v } => {
                if let Some(id) = m.id_of(slot) {
                    m.objs.get_mut(&id).unwrap().1 = v;
                }
            }
            Op::Tx {
                a,
                b,
                off,
                len,
                seed,
                size,
            } => {
                if let (Some(ia), Some(ib)) = (m.id_of(a), m.id_of(b)) {
                    m.write(ia, off, &bytes(seed, len));
                    m.write(ib, off / 2, &bytes(seed + 1, len / 2));
                    m.objs.get_mut(&ia).unwrap().0.resize(size as usize, 0);
                }
            }
            Op::Replace {
                dir,
                victim,
                len,
                seed,
            } => {
                if let (Some(d), Some(v)) = (m.id_of(dir), m.id_of(victim)) {
                    let new = m.next_id;
                    m.next_id += 1;
                    m.objs.insert(new, (bytes(seed, len), 0));
                    m.write(d, 0, &new.to_le_bytes());
                    m.objs.get_mut(&d).unwrap().1 = seed as u8;
                    if v != d {
                        m.objs.remove(&v);
                    }
                }
            }
            Op::Sync | Op::Flush { .. } | Op::Gc { .. } => {}
            Op::CreateLog => {
                m.logs.insert(m.next_id, Vec::new());
                m.next_id += 1;
            }
            Op::Append { slot, len, seed } => {
                if let Some(id) = m.log_of(slot) {
                    m.logs.get_mut(&id).unwrap().push(bytes(seed, len));
                }
            }
            Op::Trim { slot, n } => {
                if let Some(id) = m.log_of(slot) {
                    let l = m.logs.get_mut(&id).unwrap();
                    let n = n.min(l.len());
                    l.drain(..n);
                }
            }
            Op::Batch { slot, n, len, seed } => {
                if let Some(id) = m.log_of(slot) {
                    let l = m.logs.get_mut(&id).unwrap();
                    for i in 0..n as u32 {
                        l.push(bytes(seed + i, len));
                    }
                }
            }
            Op::SkipTo { slot, .. } => {
                if let Some(id) = m.log_of(slot) {
                    m.logs.get_mut(&id).unwrap().clear();
                }
            }
        }
        m
    }
}

/// Why an op failed.
#[derive(Debug)]
pub enum OpError {
    PowerLoss,
    NoSpace,
    Other(String),
}

fn werr<E: Error>(e: WriteError<E>) -> OpError {
    match e {
        WriteError::Flash(e) if e.kind() == ErrorKind::PowerLoss => OpError::PowerLoss,
        WriteError::NoSpace => OpError::NoSpace,
        e => OpError::Other(format!("{e:?}")),
    }
}

/// `Op::Replace` on object ids: creates an object holding `len` bytes, writes its id at
/// the start of `dir` and sets `dir`'s attribute byte 0 to `seed`, deletes `victim`
/// unless it is `dir`, in one transaction. Returns the new object's id.
pub fn replace_tx<F: NandFlash, P: SpacePolicy, const C: usize, const M: usize>(
    fs: &mut Oftl<F, 2048, 64, C, 2, P, M>,
    dir: u32,
    victim: u32,
    len: usize,
    seed: u32,
) -> Result<u32, WriteError<F::Error>> {
    let new = fs.next_object_id();
    let data = bytes(seed, len);
    let id = new.to_le_bytes();
    let mut attrs = match fs.attrs(dir) {
        Ok(a) => a.user,
        Err(_) => return Err(WriteError::NotFound),
    };
    attrs[0] = seed as u8;
    let mut ops = vec![
        TxOp::Create {
            kind: ObjKind::Object,
            attrs: [0; oftl::ATTR_LEN],
        },
        TxOp::Write {
            obj: new,
            offset: 0,
            data: &data,
        },
        TxOp::Write {
            obj: dir,
            offset: 0,
            data: &id,
        },
        TxOp::SetAttrs { obj: dir, attrs },
    ];
    if victim != dir {
        ops.push(TxOp::Delete { obj: victim });
    }
    fs.transact(&ops)?;
    Ok(new)
}

/// Runs `op` on the filesystem, resolving slots through `model` (the state before it).
pub fn run_op<F: NandFlash, P: SpacePolicy, const M: usize>(
    fs: &mut FsOn<F, P, M>,
    model: &Model,
    op: &Op,
) -> Result<(), OpError> {
    match *op {
        Op::Create => {
            let id = fs.create(ObjKind::Object).map_err(werr)?;
            if id != model.next_id {
                return Err(OpError::Other(format!("id {id} != {}", model.next_id)));
            }
        }
        Op::Write {
            slot,
            off,
            len,
            seed,
        } => {
            if let Some(id) = model.id_of(slot) {
                fs.write(id, off, &bytes(seed, len)).map_err(werr)?;
            }
        }
        Op::Truncate { slot, size } => {
            if let Some(id) = model.id_of(slot) {
                fs.truncate(id, size).map_err(werr)?;
            }
        }
        Op::Delete { slot } => {
            if let Some(id) = model.id_of(slot) {
                fs.delete(id).map_err(werr)?;
            }
        }
        Op::SetAttr { slot, v } => {
            if let Some(id) = model.id_of(slot) {
                let mut a = [0u8; oftl::ATTR_LEN];
                a[0] = v;
                fs.set_attrs(id, &a).map_err(werr)?;
            }
        }
        Op::Tx {
            a,
            b,
            off,
            len,
            seed,
            size,
        } => {
            if let (Some(ia), Some(ib)) = (model.id_of(a), model.id_of(b)) {
                let da = bytes(seed, len);
                let db = bytes(seed + 1, len / 2);
                fs.transact(&[
                    TxOp::Write {
                        obj: ia,
                        offset: off,
                        data: &da,
                    },
                    TxOp::Write {
                        obj: ib,
                        offset: off / 2,
                        data: &db,
                    },
                    TxOp::Truncate { obj: ia, size },
                ])
                .map_err(werr)?;
            }
        }
        Op::Replace {
            dir,
            victim,
            len,
            seed,
        } => {
            if let (Some(d), Some(v)) = (model.id_of(dir), model.id_of(victim)) {
                let new = replace_tx(fs, d, v, len, seed).map_err(werr)?;
                if new != model.next_id {
                    return Err(OpError::Other(format!("id {new} != {}", model.next_id)));
                }
            }
        }
        Op::Sync => fs.sync().map_err(werr)?,
        Op::Flush { slot } => {
            if let Some(id) = model.id_of(slot) {
                fs.flush(id).map_err(werr)?;
            }
        }
        Op::CreateLog => {
            let id = fs.create(ObjKind::Log).map_err(werr)?;
            if id != model.next_id {
                return Err(OpError::Other(format!("id {id} != {}", model.next_id)));
            }
        }
        Op::Append { slot, len, seed } => {
            if let Some(id) = model.log_of(slot) {
                fs.log_append(id, &bytes(seed, len)).map_err(werr)?;
            }
        }
        Op::Trim { slot, n } => {
            if let Some(id) = model.log_of(slot) {
                let live = model.logs[&id].len();
                // The LSN of the n-th live record (or the end).
                let mut lsn = fs.log_bounds(id).unwrap().0;
                let mut buf = vec![0u8; 4096];
                for _ in 0..n.min(live) {
                    match fs.log_read(id, lsn, &mut buf) {
                        Ok(Some(r)) => lsn = r.next,
                        Ok(None) => break,
                        Err(e) => return Err(OpError::Other(format!("{e:?}"))),
                    }
                }
                fs.log_trim(id, lsn).map_err(werr)?;
            }
        }
        Op::Gc { budget } => {
            fs.gc_step(budget).map_err(werr)?;
        }
        Op::Batch { slot, n, len, seed } => {
            if let Some(id) = model.log_of(slot) {
                let recs: Vec<Vec<u8>> = (0..n as u32).map(|i| bytes(seed + i, len)).collect();
                let refs: Vec<&[u8]> = recs.iter().map(|r| &r[..]).collect();
                fs.log_append_batch(id, &refs).map_err(werr)?;
            }
        }
        Op::SkipTo { slot, lpage } => {
            if let Some(id) = model.log_of(slot) {
                let spp = fs.flash().geometry().page_size() as u64
                    / fs.flash().capabilities().program_unit as u64;
                fs.log_skip_to(id, lpage * spp).map_err(werr)?;
            }
        }
    }
    Ok(())
}

fn rerr<E: Error>(e: ReadError<E>) -> String {
    match e {
        ReadError::Flash(e) if e.kind() == ErrorKind::PowerLoss => "power loss".into(),
        e => format!("{e:?}"),
    }
}

/// Every live record of log stream `id`, with its LSN.
pub fn log_records<F: NandFlash, P: SpacePolicy, const W: usize, const M: usize, const L: usize>(
    fs: &mut Oftl<F, 2048, 64, 4, W, P, M, L>,
    id: u32,
) -> Vec<(u64, Vec<u8>)> {
    let (mut lsn, _) = fs.log_bounds(id).unwrap();
    let mut buf = vec![0u8; 4096];
    let mut out = Vec::new();
    while let Some(r) = fs.log_read(id, lsn, &mut buf).unwrap() {
        out.push((r.lsn, buf[..r.len].to_vec()));
        lsn = r.next;
    }
    out
}

/// Reads the whole state of `fs` as a model (next_id not included); any write-buffer
/// and log-tail configuration of the test geometry.
pub fn observe<F: NandFlash, P: SpacePolicy, const W: usize, const M: usize, const L: usize>(
    fs: &mut Oftl<F, 2048, 64, 4, W, P, M, L>,
) -> Result<Model, String> {
    let ids: Vec<u32> = fs
        .objects()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("objects: {e:?}"))?;
    let mut m = Model::new();
    for id in ids {
        if let Ok((start, _)) = fs.log_bounds(id) {
            let mut recs = Vec::new();
            let mut lsn = start;
            let mut buf = vec![0u8; 4096];
            while let Some(r) = fs.log_read(id, lsn, &mut buf).map_err(rerr)? {
                recs.push(buf[..r.len].to_vec());
                lsn = r.next;
            }
            m.logs.insert(id, recs);
            continue;
        }
        let size = fs.size(id).map_err(rerr)? as usize;
        let mut buf = vec![0u8; size];
        let n = fs.read(id, 0, &mut buf).map_err(rerr)?;
        if n != size {
            return Err(format!("object {id}: read {n} of {size} bytes"));
        }
        let a = fs.attrs(id).map_err(rerr)?;
        if a.size != size as u64 {
            return Err(format!("object {id}: attrs size {} != {size}", a.size));
        }
        m.objs.insert(id, (buf, a.user[0]));
    }
    Ok(m)
}

/// Which of `allowed` the observed state equals, or a description of the mismatch.
pub fn matches(observed: &Model, allowed: &[&Model]) -> Result<usize, String> {
    for (i, a) in allowed.iter().enumerate() {
        if observed.objs == a.objs && observed.logs == a.logs {
            return Ok(i);
        }
    }
    let mut msg = String::from("state matches no allowed state:");
    for (i, a) in allowed.iter().enumerate() {
        msg.push_str(&format!("\n  allowed {i}:"));
        for (id, (d, at)) in &a.objs {
            msg.push_str(&format!(" {id}:{}b/a{at}", d.len()));
        }
    }
    for (i, a) in allowed.iter().enumerate() {
        for (id, l) in &a.logs {
            msg.push_str(&format!("\n  allowed {i} log {id}: {} records", l.len()));
        }
    }
    for (id, l) in &observed.logs {
        msg.push_str(&format!("\n  observed log {id}: {} records", l.len()));
    }
    msg.push_str("\n  observed:");
    for (id, (d, at)) in &observed.objs {
        msg.push_str(&format!(" {id}:{}b/a{at}", d.len()));
        for (i, a) in allowed.iter().enumerate() {
            if let Some((ad, _)) = a.objs.get(id) {
                if ad.len() == d.len() && ad != d {
                    let first = ad.iter().zip(d).position(|(x, y)| x != y).unwrap();
                    msg.push_str(&format!("(differs from {i} at {first})"));
                }
            }
        }
    }
    Err(msg)
}

/// The acknowledged state under write-back buffering: what must survive a power cut
/// (`durable`) and the writes since each object was last made durable, in order.
/// After a cut each object must hold its durable state plus some prefix of its own
/// pending writes (objects independently).
#[derive(Clone, Debug)]
pub struct Pending {
    pub durable: Model,
    /// `(object, offset, bytes)`, oldest first.
    pub writes: Vec<(u32, u64, Vec<u8>)>,
}

impl Pending {
    pub fn new(durable: Model) -> Self {
        Pending {
            durable,
            writes: Vec::new(),
        }
    }

    /// The state reads must see: everything acknowledged.
    pub fn full(&self) -> Model {
        let mut m = self.durable.clone();
        for (id, off, d) in &self.writes {
            m.write(*id, *off, d);
        }
        m
    }

    /// Moves `id`'s pending writes into the durable state.
    fn commit(&mut self, id: u32) {
        let (mine, rest): (Vec<_>, Vec<_>) = self.writes.drain(..).partition(|(o, _, _)| *o == id);
        self.writes = rest;
        for (_, off, d) in mine {
            self.durable.write(id, off, &d);
        }
    }

    /// The state after an acknowledged `op`: plain writes stay pending; flush commits
    /// one object; truncate, attributes and transactions commit the objects they touch
    /// and then apply; delete drops the object's pending writes; sync commits all.
    pub fn apply(&self, op: &Op) -> Pending {
        let mut p = self.clone();
        let d = &self.durable;
        match *op {
            Op::Write {
                slot,
                off,
                len,
                seed,
            } => {
                if let Some(id) = d.id_of(slot) {
                    if len > 0 {
                        p.writes.push((id, off, bytes(seed, len)));
                    }
                }
                return p;
            }
            Op::Flush { slot } | Op::Truncate { slot, .. } | Op::SetAttr { slot, .. } => {
                if let Some(id) = d.id_of(slot) {
                    p.commit(id);
                }
            }
            Op::Tx { a, b, .. } => {
                if let (Some(ia), Some(ib)) = (d.id_of(a), d.id_of(b)) {
                    p.commit(ia);
                    p.commit(ib);
                }
            }
            Op::Delete { slot } => {
                if let Some(id) = d.id_of(slot) {
                    p.writes.retain(|(o, _, _)| *o != id);
                }
            }
            Op::Replace { dir, victim, .. } => {
                if let (Some(dd), Some(v)) = (d.id_of(dir), d.id_of(victim)) {
                    p.commit(dd);
                    if v != dd {
                        p.writes.retain(|(o, _, _)| *o != v);
                    }
                }
            }
            Op::Sync => {
                let ids: Vec<u32> = p.writes.iter().map(|w| w.0).collect();
                for id in ids {
                    p.commit(id);
                }
            }
            _ => {}
        }
        p.durable = p.durable.apply(op);
        p
    }

    /// Whether `seen` is a state a cut may leave: per object, the durable contents plus
    /// a prefix of that object's pending writes; with `probe`, optionally followed by a
    /// probe write (`data` at `off` of the first object, see the power-loss check).
    pub fn allows(&self, seen: &Model, probe: Option<(u64, &[u8])>) -> Result<(), String> {
        if seen.logs != self.durable.logs {
            return Err("logs differ".into());
        }
        let want: Vec<u32> = self.durable.objs.keys().copied().collect();
        let have: Vec<u32> = seen.objs.keys().copied().collect();
        if want != have {
            return Err(format!("objects {have:?}, expected {want:?}"));
        }
        for (i, (id, (data, attr))) in self.durable.objs.iter().enumerate() {
            let (sd, sa) = &seen.objs[id];
            if sa != attr {
                return Err(format!("object {id}: attribute {sa} != {attr}"));
            }
            let mut cur = data.clone();
            let mut states = vec![cur.clone()];
            for (_, off, d) in self.writes.iter().filter(|w| w.0 == *id) {
                let end = *off as usize + d.len();
                if cur.len() < end {
                    cur.resize(end, 0);
                }
                cur[*off as usize..end].copy_from_slice(d);
                states.push(cur.clone());
            }
            let probed: Vec<Vec<u8>> = match probe {
                Some((off, pd)) if i == 0 => states
                    .iter()
                    .map(|s| {
                        let mut s = s.clone();
                        let end = off as usize + pd.len();
                        if s.len() < end {
                            s.resize(end, 0);
                        }
                        s[off as usize..end].copy_from_slice(pd);
                        s
                    })
                    .collect(),
                _ => Vec::new(),
            };
            if !states.iter().chain(probed.iter()).any(|s| s == sd) {
                return Err(format!(
                    "object {id}: {} bytes match no prefix of its {} pending writes \
                     (durable {} bytes)",
                    sd.len(),
                    states.len() - 1,
                    data.len()
                ));
            }
        }
        Ok(())
    }
}

/// The value of environment variable `name` (explorations' knobs), or `default`.
pub fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// A small xorshift generator for seeded test workloads.
pub struct Rng(pub u64);

impl Rng {
    /// The next value.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
