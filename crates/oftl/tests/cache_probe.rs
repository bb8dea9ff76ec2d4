//! Review probe for the read cache of cb247af: a whole-page `Oftl::read` keeps a clean
//! copy of the page in a free or clean write-back buffer, and `transact` forgets only the
//! clean copies of the pages each op rewrites (all of an object's for a truncate or
//! delete).
//!
//! A randomized differential test against a `Vec<u8>`-per-object model, with whole-page
//! reads mixed with every kind of change (buffered and spanning writes, writes past the
//! end, flushes, flushes with attributes, transactions of writes / truncates / deletes /
//! creates / attributes, truncates, deletes, syncs, GC steps, clean remounts, crashes
//! (remount without unmount), read-only salvage mounts, aimed transient read failures,
//! power cuts), over 1, 2 and 3 write-back buffers and both OOB and in-band placement.
//! Every read is compared with the model of committed + buffered writes; a read must not
//! program anything but index pages written back by the index cache. After a cut (or a
//! crash, or a failed read inside a write) the remounted store must hold, per object,
//! its durable contents plus a prefix of its unflushed writes.
//!
//! Case counts: `CACHE_PROBE_CASES` (default 256 per property); `CACHE_PROBE_VERBOSE=1`
//! prints running totals.
//!
//! Found (fixed): `transact_write_past_u64_max_is_too_large`: `transact` added
//! `offset + len - 1` unchecked, before the op was validated, to find the pages whose
//! copies it forgets.

use crate::common;
use common::lifecycle::Lifecycle;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use nand_hal::sim::{profile, CutKind, FaultConfig, FaultPlan, HeapStorage, Profile, SimNand};
use nand_hal::ErrorKind;
use oftl::{Config, ObjKind, Oftl, ReadError, TxOp, WriteError, ATTR_LEN};
use proptest::prelude::*;

type Sim = SimNand<HeapStorage>;
type FsW<'a, const W: usize> = Oftl<&'a mut Sim, 2048, 64, 4, W>;

fn cfg() -> Config {
    Config {
        window_blocks: 6,
        format_id: 7,
        ..Default::default()
    }
}

/// TINY without ECC and without protected spare bytes: backpointers go in-band.
fn tiny_raw() -> Profile {
    use nand_hal::{Ecc, OobLayout, OobRegion};
    let mut p = profile::TINY;
    p.name = "tiny-raw";
    p.capabilities.ecc = Ecc::NONE;
    p.capabilities.oob = OobLayout::new(&[OobRegion::unprotected(2, 62)]);
    p
}

fn bytes(seed: u32, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x as u8) | 1 // never 0, so zero-filled gaps are visible
        })
        .collect()
}

fn attrs_of(v: u8) -> [u8; ATTR_LEN] {
    let mut a = [0u8; ATTR_LEN];
    a[0] = v;
    a[ATTR_LEN - 1] = v.wrapping_mul(3);
    a
}

// ---- operations ------------------------------------------------------------------------

/// An offset: page number and where in the page (resolved against the payload size).
#[derive(Clone, Copy, Debug)]
struct Off {
    page: u8,
    kind: u8,
    d: u16,
}

impl Off {
    fn at(self, p: u64) -> u64 {
        let d = self.d as u64 % (p - 1) + 1;
        self.page as u64 * p
            + match self.kind % 5 {
                0 => 0,
                1 => d % 64,
                2 => p - d % 64 - 1,
                3 => p / 2,
                _ => d,
            }
    }
}

/// A length, resolved against the payload size and the column it starts at.
#[derive(Clone, Copy, Debug)]
struct Len {
    kind: u8,
    d: u16,
}

impl Len {
    fn of(self, p: u64, off: u64) -> usize {
        let col = off % p;
        let d = self.d as u64;
        (match self.kind % 7 {
            0 => d % 100 + 1,      // small
            1 => p - col,          // to the end of the page
            2 => p,                // one page
            3 => p - col + d % 50, // just across the page end
            4 => 2 * p,
            5 => d % (3 * p) + 1,
            _ => 0, // empty
        }) as usize
    }
}

#[derive(Clone, Debug)]
enum Sub {
    Write {
        slot: u8,
        off: Off,
        len: Len,
        seed: u16,
    },
    Truncate {
        slot: u8,
        size: Off,
    },
    Delete {
        slot: u8,
    },
    Create,
    SetAttrs {
        slot: u8,
        v: u8,
    },
    /// A write to the `k`-th object this transaction creates.
    WriteNew {
        k: u8,
        off: Off,
        len: Len,
        seed: u16,
    },
}

#[derive(Clone, Debug)]
enum Op {
    Create,
    Write {
        slot: u8,
        off: Off,
        len: Len,
        seed: u16,
    },
    /// A whole-page-aligned read of `pages` pages.
    ReadPage {
        slot: u8,
        page: u8,
        pages: u8,
    },
    Read {
        slot: u8,
        off: Off,
        len: Len,
    },
    ReadAll {
        slot: u8,
    },
    Flush {
        slot: u8,
    },
    FlushAttrs {
        slot: u8,
        v: u8,
    },
    Truncate {
        slot: u8,
        size: Off,
    },
    Delete {
        slot: u8,
    },
    SetAttrs {
        slot: u8,
        v: u8,
    },
    Tx(Vec<Sub>),
    Sync,
    Gc {
        budget: u8,
    },
    Remount,
    /// Remount without unmounting (RAM lost, like a cut between operations).
    Crash,
    /// Unmount, mount read-only (salvage), read everything, remount writable.
    ReadOnly,
    /// The `nth` read from now (and `len - 1` more) fails as uncorrectable, during one
    /// whole-page read.
    FailRead {
        slot: u8,
        page: u8,
        nth: u8,
        len: u8,
    },
    /// `op` with the `nth` read from now (and `len - 1` more) failing as uncorrectable:
    /// a write or transaction that must read a page fails (and poisons the store).
    Failing {
        op: Box<Op>,
        nth: u8,
        len: u8,
    },
}

fn off() -> impl Strategy<Value = Off> {
    (0u8..6, any::<u8>(), any::<u16>()).prop_map(|(page, kind, d)| Off { page, kind, d })
}

fn len() -> impl Strategy<Value = Len> {
    (any::<u8>(), any::<u16>()).prop_map(|(kind, d)| Len { kind, d })
}

fn sub() -> impl Strategy<Value = Sub> {
    prop_oneof![
        5 => (any::<u8>(), off(), len(), any::<u16>())
            .prop_map(|(slot, off, len, seed)| Sub::Write { slot, off, len, seed }),
        2 => (any::<u8>(), off()).prop_map(|(slot, size)| Sub::Truncate { slot, size }),
        1 => any::<u8>().prop_map(|slot| Sub::Delete { slot }),
        1 => Just(Sub::Create),
        2 => (any::<u8>(), any::<u8>()).prop_map(|(slot, v)| Sub::SetAttrs { slot, v }),
        2 => (0u8..2, off(), len(), any::<u16>())
            .prop_map(|(k, off, len, seed)| Sub::WriteNew { k, off, len, seed }),
    ]
}

fn op(cuts: bool) -> impl Strategy<Value = Op> {
    let base = prop_oneof![
        3 => Just(Op::Create),
        14 => (any::<u8>(), off(), len(), any::<u16>())
            .prop_map(|(slot, off, len, seed)| Op::Write { slot, off, len, seed }),
        14 => (any::<u8>(), 0u8..8, 1u8..4)
            .prop_map(|(slot, page, pages)| Op::ReadPage { slot, page, pages }),
        3 => (any::<u8>(), off(), len()).prop_map(|(slot, off, len)| Op::Read { slot, off, len }),
        3 => any::<u8>().prop_map(|slot| Op::ReadAll { slot }),
        2 => any::<u8>().prop_map(|slot| Op::Flush { slot }),
        2 => (any::<u8>(), any::<u8>()).prop_map(|(slot, v)| Op::FlushAttrs { slot, v }),
        3 => (any::<u8>(), off()).prop_map(|(slot, size)| Op::Truncate { slot, size }),
        1 => any::<u8>().prop_map(|slot| Op::Delete { slot }),
        2 => (any::<u8>(), any::<u8>()).prop_map(|(slot, v)| Op::SetAttrs { slot, v }),
        8 => proptest::collection::vec(sub(), 1..5).prop_map(Op::Tx),
        1 => Just(Op::Sync),
        2 => (1u8..40).prop_map(|budget| Op::Gc { budget }),
        1 => Just(Op::Remount),
    ];
    if cuts {
        prop_oneof![
            40 => base,
            1 => Just(Op::Crash),
            1 => Just(Op::ReadOnly),
            2 => (any::<u8>(), 0u8..8, 1u8..4, 1u8..3)
                .prop_map(|(slot, page, nth, len)| Op::FailRead { slot, page, nth, len }),
            2 => (
                prop_oneof![
                    (any::<u8>(), off(), len(), any::<u16>())
                        .prop_map(|(slot, off, len, seed)| Op::Write { slot, off, len, seed }),
                    proptest::collection::vec(sub(), 1..4).prop_map(Op::Tx),
                    (any::<u8>(), off()).prop_map(|(slot, size)| Op::Truncate { slot, size }),
                ],
                1u8..6,
                1u8..3
            )
                .prop_map(|(op, nth, len)| Op::Failing { op: Box::new(op), nth, len }),
        ]
        .boxed()
    } else {
        base.boxed()
    }
}

// ---- the model ---------------------------------------------------------------------------

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Obj {
    data: Vec<u8>,
    attr: u8,
}

#[derive(Clone, Debug, Default)]
struct Model {
    objs: BTreeMap<u32, Obj>,
}

impl Model {
    fn id_of(&self, slot: u8) -> Option<u32> {
        if self.objs.is_empty() {
            return None;
        }
        self.objs
            .keys()
            .nth(slot as usize % self.objs.len())
            .copied()
    }

    fn write(&mut self, id: u32, off: u64, d: &[u8]) {
        if d.is_empty() {
            return;
        }
        let o = &mut self.objs.get_mut(&id).unwrap().data;
        let end = off as usize + d.len();
        if o.len() < end {
            o.resize(end, 0);
        }
        o[off as usize..end].copy_from_slice(d);
    }
}

/// Committed state plus the writes since each object was last made durable.
#[derive(Clone, Debug, Default)]
struct Pending {
    durable: Model,
    writes: Vec<(u32, u64, Vec<u8>)>,
}

impl Pending {
    fn full(&self) -> Model {
        let mut m = self.durable.clone();
        for (id, off, d) in &self.writes {
            m.write(*id, *off, d);
        }
        m
    }

    fn commit(&mut self, id: u32) {
        let (mine, rest): (Vec<_>, Vec<_>) = self.writes.drain(..).partition(|(o, _, _)| *o == id);
        self.writes = rest;
        for (_, off, d) in mine {
            self.durable.write(id, off, &d);
        }
    }

    fn commit_all(&mut self) {
        let ids: Vec<u32> = self.writes.iter().map(|w| w.0).collect();
        for id in ids {
            self.commit(id);
        }
    }

    fn drop_writes(&mut self, id: u32) {
        self.writes.retain(|(o, _, _)| *o != id);
    }

    /// Whether `seen` may be what a cut leaves: per object, durable contents plus a
    /// prefix of its pending writes.
    fn allows(&self, seen: &Model) -> Result<(), String> {
        let want: Vec<u32> = self.durable.objs.keys().copied().collect();
        let have: Vec<u32> = seen.objs.keys().copied().collect();
        if want != have {
            return Err(format!("objects {have:?}, expected {want:?}"));
        }
        for (id, o) in &self.durable.objs {
            let s = &seen.objs[id];
            if s.attr != o.attr {
                return Err(format!("object {id}: attr {} != {}", s.attr, o.attr));
            }
            let mut cur = o.data.clone();
            let mut ok = cur == s.data;
            for (_, off, d) in self.writes.iter().filter(|w| w.0 == *id) {
                let end = *off as usize + d.len();
                if cur.len() < end {
                    cur.resize(end, 0);
                }
                cur[*off as usize..end].copy_from_slice(d);
                ok |= cur == s.data;
            }
            if !ok {
                return Err(format!(
                    "object {id}: {} bytes match no prefix of its pending writes",
                    s.data.len()
                ));
            }
        }
        Ok(())
    }
}

// ---- the harness -------------------------------------------------------------------------

fn is_power_loss_w<E: nand_hal::Error>(e: &WriteError<E>) -> bool {
    matches!(e, WriteError::Flash(f) if f.kind() == ErrorKind::PowerLoss)
}

fn is_power_loss_r<E: nand_hal::Error>(e: &ReadError<E>) -> bool {
    matches!(e, ReadError::Flash(f) if f.kind() == ErrorKind::PowerLoss)
}

/// Outcome of an operation that changes something.
enum Outcome {
    Done,
    /// Refused with nothing changed (the model is not applied).
    Refused,
    /// Power cut: the state is the one before or after (`after`).
    Cut(Box<Pending>),
}

struct Run<'a, const W: usize> {
    fs: FsW<'a, W>,
    p: u64,
    st: Pending,
    next_id: u32,
    reads: u64,
    cuts: u64,
    log: Vec<String>,
    /// Reads are being made to fail (`Op::Failing`).
    failing: bool,
}

impl<'a, const W: usize> Run<'a, W> {
    fn fail(&self, msg: String) -> TestCaseError {
        let tail: Vec<&String> = self.log.iter().rev().take(12).collect();
        TestCaseError::fail(format!("{msg}\nlast ops (newest first): {tail:#?}"))
    }

    /// Reads `len` bytes at `off` of `id` and compares with the model (and that the read
    /// programmed nothing but index write-backs).
    fn check_read(&mut self, id: u32, off: u64, len: usize) -> Result<(), TestCaseError> {
        let m = self.st.full();
        let want_all = &m.objs[&id].data;
        let c = self.fs.flash().counters();
        let ev = self.fs.stats().index_evictions;
        let mut buf = vec![0xEEu8; len];
        let n = match self.fs.read(id, off, &mut buf) {
            Ok(n) => n,
            Err(e) => return Err(self.fail(format!("read {id} @{off}+{len}: {e:?}"))),
        };
        self.reads += 1;
        let d = self.fs.flash().counters() - c;
        if d.reads == 0 && off % self.p == 0 && len as u64 >= self.p {
            STATS[5].fetch_add(1, Ordering::Relaxed);
        }
        if d.programs > 0 && self.fs.stats().index_evictions == ev {
            return Err(self.fail(format!(
                "read {id} @{off}+{len} programmed {} pages without an index eviction",
                d.programs
            )));
        }
        let want: &[u8] = if off as usize >= want_all.len() {
            &[]
        } else {
            &want_all[off as usize..(off as usize + len).min(want_all.len())]
        };
        if n != want.len() || buf[..n] != *want {
            let first = buf[..n].iter().zip(want).position(|(a, b)| a != b);
            return Err(self.fail(format!(
                "read {id} @{off}+{len}: got {n} bytes, model {}; first difference at {:?} \
                 (model size {})",
                want.len(),
                first.map(|f| off + f as u64),
                want_all.len()
            )));
        }
        match self.fs.size(id) {
            Ok(s) if s == want_all.len() as u64 => {}
            r => {
                return Err(self.fail(format!("size {id}: {r:?} != {}", want_all.len())));
            }
        }
        Ok(())
    }

    fn check_all(&mut self) -> Result<(), TestCaseError> {
        let m = self.st.full();
        let ids: Vec<u32> = self.fs.objects().map(Result::unwrap).collect();
        let want: Vec<u32> = m.objs.keys().copied().collect();
        if ids != want {
            return Err(self.fail(format!("objects {ids:?} != model {want:?}")));
        }
        for (id, o) in &m.objs {
            // Page by page (each a whole-page read where possible), then all at once.
            let mut off = 0;
            while off < o.data.len() as u64 + self.p {
                self.check_read(*id, off, self.p as usize)?;
                off += self.p;
            }
            self.check_read(*id, 0, o.data.len() + 10)?;
            let a = self
                .fs
                .attrs(*id)
                .map_err(|e| self.fail(format!("attrs: {e:?}")))?;
            if a.user != attrs_of(o.attr) || a.size != o.data.len() as u64 {
                return Err(self.fail(format!(
                    "attrs {id}: {}/{} != model {}/{}",
                    a.user[0],
                    a.size,
                    o.attr,
                    o.data.len()
                )));
            }
        }
        Ok(())
    }

    /// What the store holds, as a model.
    fn observe(&mut self) -> Result<Model, TestCaseError> {
        let ids: Vec<u32> = self.fs.objects().map(Result::unwrap).collect();
        let mut m = Model::default();
        for id in ids {
            let size = self.fs.size(id).unwrap() as usize;
            let mut data = vec![0u8; size];
            let n = self
                .fs
                .read(id, 0, &mut data)
                .map_err(|e| self.fail(format!("observe read {id}: {e:?}")))?;
            if n != size {
                return Err(self.fail(format!("observe {id}: {n} of {size}")));
            }
            let a = self.fs.attrs(id).unwrap();
            if a.user != attrs_of(a.user[0]) {
                return Err(self.fail(format!("observe {id}: attrs {:?}", &a.user[..4])));
            }
            m.objs.insert(
                id,
                Obj {
                    data,
                    attr: a.user[0],
                },
            );
        }
        Ok(m)
    }

    /// After a power cut: power on, remount, check the state is one `before` or `after`
    /// allows, and continue from what is there.
    fn recover(&mut self, before: &Pending, after: Option<&Pending>) -> Result<(), TestCaseError> {
        self.cuts += 1;
        self.fs.flash_mut().disarm();
        self.fs.flash_mut().power_on();
        if let Err(e) = self.fs.mount() {
            return Err(self.fail(format!("mount after cut: {e:?}")));
        }
        let seen = self.observe()?;
        let r1 = before.allows(&seen);
        let r2 = after.map(|a| a.allows(&seen));
        if r1.is_err() && !matches!(r2, Some(Ok(()))) {
            return Err(self.fail(format!("after a cut: {r1:?} / {r2:?}")));
        }
        self.st = Pending {
            durable: seen,
            writes: Vec::new(),
        };
        self.next_id = self.fs.next_object_id();
        Ok(())
    }

    fn wres<E: nand_hal::Error + core::fmt::Debug>(
        &self,
        r: Result<(), WriteError<E>>,
        after: Pending,
        what: &str,
    ) -> Result<Outcome, TestCaseError> {
        match r {
            Ok(()) => Ok(Outcome::Done),
            Err(e) if is_power_loss_w(&e) => Ok(Outcome::Cut(Box::new(after))),
            Err(WriteError::Flash(f)) if self.failing && f.kind() == ErrorKind::Uncorrectable => {
                Ok(Outcome::Cut(Box::new(after)))
            }
            Err(WriteError::NoSpace) => Ok(Outcome::Refused),
            Err(e) => Err(self.fail(format!("{what}: {e:?}"))),
        }
    }

    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        self.log.push(format!("{op:?}"));
        let p = self.p;
        let before = self.st.clone();
        let full = self.st.full();
        let outcome: Outcome = match op {
            Op::Create => {
                let mut after = self.st.clone();
                after.durable.objs.insert(self.next_id, Obj::default());
                match self.fs.create(ObjKind::Object) {
                    Ok(id) => {
                        if id != self.next_id {
                            return Err(
                                self.fail(format!("created {id}, expected {}", self.next_id))
                            );
                        }
                        self.next_id += 1;
                        self.st = after;
                        Outcome::Done
                    }
                    Err(e) => self.wres(Err(e), after, "create")?,
                }
            }
            Op::Write {
                slot,
                off,
                len,
                seed,
            } => {
                let Some(id) = full.id_of(*slot) else {
                    return Ok(());
                };
                let o = off.at(p);
                let d = bytes(*seed as u32 + 1, len.of(p, o));
                let mut after = self.st.clone();
                if !d.is_empty() {
                    after.writes.push((id, o, d.clone()));
                }
                let r = self.fs.write(id, o, &d);
                let out = self.wres(r, after.clone(), "write")?;
                if let Outcome::Done = out {
                    self.st = after;
                }
                out
            }
            Op::ReadPage { slot, page, pages } => {
                let Some(id) = full.id_of(*slot) else {
                    return Ok(());
                };
                return self.read_op(id, *page as u64 * p, *pages as usize * p as usize, &before);
            }
            Op::Read { slot, off, len } => {
                let Some(id) = full.id_of(*slot) else {
                    return Ok(());
                };
                let o = off.at(p);
                let l = len.of(p, o);
                return self.read_op(id, o, l, &before);
            }
            Op::ReadAll { slot } => {
                let Some(id) = full.id_of(*slot) else {
                    return Ok(());
                };
                let l = full.objs[&id].data.len() + 3;
                return self.read_op(id, 0, l, &before);
            }
            Op::Flush { slot } => {
                let Some(id) = full.id_of(*slot) else {
                    return Ok(());
                };
                let mut after = self.st.clone();
                after.commit(id);
                let r = self.fs.flush(id);
                let out = self.wres(r, after.clone(), "flush")?;
                if let Outcome::Done = out {
                    self.st = after;
                }
                out
            }
            Op::FlushAttrs { slot, v } => {
                let Some(id) = full.id_of(*slot) else {
                    return Ok(());
                };
                let mut after = self.st.clone();
                after.commit(id);
                after.durable.objs.get_mut(&id).unwrap().attr = *v;
                let r = self.fs.flush_with_attrs(id, &attrs_of(*v));
                let out = self.wres(r, after.clone(), "flush_with_attrs")?;
                if let Outcome::Done = out {
                    self.st = after;
                }
                out
            }
            Op::SetAttrs { slot, v } => {
                let Some(id) = full.id_of(*slot) else {
                    return Ok(());
                };
                let mut after = self.st.clone();
                after.commit(id);
                after.durable.objs.get_mut(&id).unwrap().attr = *v;
                let r = self.fs.set_attrs(id, &attrs_of(*v));
                let out = self.wres(r, after.clone(), "set_attrs")?;
                if let Outcome::Done = out {
                    self.st = after;
                }
                out
            }
            Op::Truncate { slot, size } => {
                let Some(id) = full.id_of(*slot) else {
                    return Ok(());
                };
                let s = size.at(p);
                let mut after = self.st.clone();
                if s == 0 {
                    after.drop_writes(id);
                } else {
                    after.commit(id);
                }
                after
                    .durable
                    .objs
                    .get_mut(&id)
                    .unwrap()
                    .data
                    .resize(s as usize, 0);
                let r = self.fs.truncate(id, s);
                let out = self.wres(r, after.clone(), "truncate")?;
                if let Outcome::Done = out {
                    self.st = after;
                }
                out
            }
            Op::Delete { slot } => {
                let Some(id) = full.id_of(*slot) else {
                    return Ok(());
                };
                let mut after = self.st.clone();
                after.drop_writes(id);
                after.durable.objs.remove(&id);
                let r = self.fs.delete(id);
                let out = self.wres(r, after.clone(), "delete")?;
                if let Outcome::Done = out {
                    self.st = after;
                }
                out
            }
            Op::Tx(subs) => self.tx(subs, &full)?,
            Op::Sync => {
                let mut after = self.st.clone();
                after.commit_all();
                let r = self.fs.sync();
                let out = self.wres(r, after.clone(), "sync")?;
                if let Outcome::Done = out {
                    self.st = after;
                }
                out
            }
            Op::Gc { budget } => match self.fs.gc_step(*budget as u32) {
                Ok(_) => Outcome::Done,
                Err(e) if is_power_loss_w(&e) => Outcome::Cut(Box::new(self.st.clone())),
                Err(e) => return Err(self.fail(format!("gc: {e:?}"))),
            },
            Op::Remount => {
                let mut after = self.st.clone();
                after.commit_all();
                match self.fs.unmount() {
                    Ok(()) => {
                        self.st = after;
                        self.fs
                            .mount()
                            .map_err(|e| self.fail(format!("mount: {e:?}")))?;
                        Outcome::Done
                    }
                    Err(e) if is_power_loss_w(&e) => Outcome::Cut(Box::new(after)),
                    Err(e) => return Err(self.fail(format!("unmount: {e:?}"))),
                }
            }
            Op::Crash => Outcome::Cut(Box::new(self.st.clone())),
            Op::ReadOnly => {
                let mut after = self.st.clone();
                after.commit_all();
                match self.fs.unmount() {
                    Ok(()) => self.st = after,
                    Err(e) if is_power_loss_w(&e) => {
                        return self.recover(&before, Some(&after));
                    }
                    Err(e) => return Err(self.fail(format!("unmount: {e:?}"))),
                }
                self.fs
                    .mount_damaged(oftl::Damaged::Salvage)
                    .map_err(|e| self.fail(format!("salvage mount: {e:?}")))?;
                self.check_all()?;
                let ids: Vec<u32> = self.st.durable.objs.keys().copied().collect();
                if let Some(&id) = ids.first() {
                    if self.fs.write(id, 0, &[1]) != Err(WriteError::ReadOnly) {
                        return Err(self.fail("read-only store took a write".into()));
                    }
                    self.check_all()?;
                }
                self.fs
                    .unmount()
                    .map_err(|e| self.fail(format!("read-only unmount: {e:?}")))?;
                self.fs
                    .mount()
                    .map_err(|e| self.fail(format!("mount: {e:?}")))?;
                Outcome::Done
            }
            Op::Failing { op, nth, len } => {
                let saved = *self.fs.flash().plan();
                let mut plan = saved;
                plan.faults.read_fail_at = *nth as u32;
                plan.faults.read_fail_len = *len as u32;
                self.fs.flash_mut().arm(plan);
                self.failing = true;
                let r = self.step(op);
                self.failing = false;
                self.fs.flash_mut().arm(saved);
                return r;
            }
            Op::FailRead {
                slot,
                page,
                nth,
                len,
            } => {
                let Some(id) = full.id_of(*slot) else {
                    return Ok(());
                };
                let mut plan = *self.fs.flash().plan();
                let saved = plan;
                plan.faults.read_fail_at = *nth as u32;
                plan.faults.read_fail_len = *len as u32;
                self.fs.flash_mut().arm(plan);
                let mut buf = vec![0u8; p as usize];
                let r = self.fs.read(id, *page as u64 * p, &mut buf);
                self.fs.flash_mut().arm(saved);
                match r {
                    Ok(_) => {}
                    Err(ReadError::Flash(f)) if f.kind() == ErrorKind::Uncorrectable => {}
                    Err(e) if is_power_loss_r(&e) => return self.recover(&before, None),
                    Err(e) => return Err(self.fail(format!("failed read: {e:?}"))),
                }
                // Whatever happened, the page reads right now.
                return self.check_read(id, *page as u64 * p, p as usize);
            }
        };
        match outcome {
            Outcome::Done | Outcome::Refused => Ok(()),
            Outcome::Cut(after) => self.recover(&before, Some(&after)),
        }
    }

    /// A read op: the bytes must match the model; the same read again (now perhaps
    /// from a kept copy) is checked too. A read may write back index pages, so a cut
    /// can land in it.
    fn read_op(
        &mut self,
        id: u32,
        off: u64,
        len: usize,
        before: &Pending,
    ) -> Result<(), TestCaseError> {
        let mut buf = vec![0u8; len];
        let n = match self.fs.read(id, off, &mut buf) {
            Err(e) if is_power_loss_r(&e) => return self.recover(before, None),
            Err(e) => return Err(self.fail(format!("read {id} @{off}+{len}: {e:?}"))),
            Ok(n) => n,
        };
        let m = self.st.full();
        let want = &m.objs[&id].data;
        let w: &[u8] = if (off as usize) < want.len() {
            &want[off as usize..(off as usize + len).min(want.len())]
        } else {
            &[]
        };
        if n != w.len() || buf[..n] != *w {
            return Err(self.fail(format!("read of {id} @{off}+{len} differs from the model")));
        }
        self.check_read(id, off, len)
    }

    fn tx(&mut self, subs: &[Sub], full: &Model) -> Result<Outcome, TestCaseError> {
        let p = self.p;
        // Resolve to ops and data; model the transaction's validity like oftl does.
        let first_new = self.next_id;
        let mut creates = 0u32;
        let mut datas: Vec<Vec<u8>> = Vec::new();
        enum R {
            W(u32, u64, usize),
            T(u32, u64),
            D(u32),
            C,
            A(u32, u8),
        }
        let mut rs: Vec<R> = Vec::new();
        for s in subs {
            match s {
                Sub::Write {
                    slot,
                    off,
                    len,
                    seed,
                } => {
                    let Some(id) = full.id_of(*slot) else {
                        continue;
                    };
                    let o = off.at(p);
                    datas.push(bytes(*seed as u32 + 7, len.of(p, o)));
                    rs.push(R::W(id, o, datas.len() - 1));
                }
                Sub::WriteNew { k, off, len, seed } => {
                    if (*k as u32) >= creates {
                        continue;
                    }
                    let o = off.at(p);
                    datas.push(bytes(*seed as u32 + 11, len.of(p, o)));
                    rs.push(R::W(first_new + *k as u32, o, datas.len() - 1));
                }
                Sub::Truncate { slot, size } => {
                    let Some(id) = full.id_of(*slot) else {
                        continue;
                    };
                    rs.push(R::T(id, size.at(p)));
                }
                Sub::Delete { slot } => {
                    let Some(id) = full.id_of(*slot) else {
                        continue;
                    };
                    rs.push(R::D(id));
                }
                Sub::Create => {
                    creates += 1;
                    rs.push(R::C);
                }
                Sub::SetAttrs { slot, v } => {
                    let Some(id) = full.id_of(*slot) else {
                        continue;
                    };
                    rs.push(R::A(id, *v));
                }
            }
        }
        if rs.is_empty() {
            return Ok(Outcome::Done);
        }
        let ops: Vec<TxOp> = rs
            .iter()
            .map(|r| match *r {
                R::W(obj, offset, i) => TxOp::Write {
                    obj,
                    offset,
                    data: &datas[i],
                },
                R::T(obj, size) => TxOp::Truncate { obj, size },
                R::D(obj) => TxOp::Delete { obj },
                R::C => TxOp::Create {
                    kind: ObjKind::Object,
                    attrs: [0; oftl::ATTR_LEN],
                },
                R::A(obj, v) => TxOp::SetAttrs {
                    obj,
                    attrs: attrs_of(v),
                },
            })
            .collect();
        // The model: touched existing objects commit their writes first (those the
        // transaction truncates to 0 or deletes drop them instead).
        let mut after = self.st.clone();
        let cleared = |id: u32| {
            rs.iter()
                .any(|r| matches!(*r, R::T(o, 0) | R::D(o) if o == id))
        };
        let mut valid = true;
        let mut created: Vec<u32> = Vec::new();
        let mut deleted: Vec<u32> = Vec::new();
        let mut next = first_new;
        let mut touched: Vec<u32> = Vec::new();
        for r in &rs {
            if let R::W(id, ..) | R::T(id, _) | R::D(id) | R::A(id, _) = *r {
                if full.objs.contains_key(&id) && !touched.contains(&id) {
                    touched.push(id);
                }
            }
        }
        for &id in &touched {
            if cleared(id) {
                after.drop_writes(id);
            } else {
                after.commit(id);
            }
        }
        let mut total_empty = true;
        for r in &rs {
            let exists = |id: u32, created: &Vec<u32>, deleted: &Vec<u32>| {
                !deleted.contains(&id)
                    && (created.contains(&id) || self.st.durable.objs.contains_key(&id))
            };
            match *r {
                R::W(id, off, i) => {
                    if !exists(id, &created, &deleted) {
                        valid = false;
                        break;
                    }
                    if !datas[i].is_empty() {
                        total_empty = false;
                    }
                    let m = &mut after.durable;
                    m.write(id, off, &datas[i]);
                }
                R::T(id, size) => {
                    if !exists(id, &created, &deleted) {
                        valid = false;
                        break;
                    }
                    total_empty = false;
                    after
                        .durable
                        .objs
                        .get_mut(&id)
                        .unwrap()
                        .data
                        .resize(size as usize, 0);
                }
                R::D(id) => {
                    if !exists(id, &created, &deleted) || created.contains(&id) {
                        valid = false;
                        break;
                    }
                    total_empty = false;
                    after.durable.objs.remove(&id);
                    deleted.push(id);
                }
                R::C => {
                    total_empty = false;
                    after.durable.objs.insert(next, Obj::default());
                    created.push(next);
                    next += 1;
                }
                R::A(id, v) => {
                    if !exists(id, &created, &deleted) || created.contains(&id) {
                        valid = false;
                        break;
                    }
                    total_empty = false;
                    after.durable.objs.get_mut(&id).unwrap().attr = v;
                }
            }
        }
        let _ = total_empty;
        let r = self.fs.transact(&ops);
        match r {
            Ok(()) if valid => {
                self.st = after;
                self.next_id = next;
                Ok(Outcome::Done)
            }
            Ok(()) => Err(self.fail(format!("transaction the model rejects succeeded: {ops:?}"))),
            Err(e) if is_power_loss_w(&e) => Ok(Outcome::Cut(Box::new(after))),
            Err(WriteError::Flash(f)) if self.failing && f.kind() == ErrorKind::Uncorrectable => {
                // The model's `after` is only right for a valid transaction; an invalid
                // one changed nothing either way.
                Ok(Outcome::Cut(Box::new(if valid {
                    after
                } else {
                    self.st.clone()
                })))
            }
            Err(WriteError::NoSpace) if valid => Ok(Outcome::Refused),
            Err(e) if !valid => {
                if matches!(e, WriteError::NotFound) {
                    Ok(Outcome::Refused)
                } else {
                    Err(self.fail(format!("invalid transaction: {e:?}")))
                }
            }
            Err(e) => Err(self.fail(format!("transaction {ops:?}: {e:?}"))),
        }
    }
}

/// Runs `ops` on a fresh store of `W` write-back buffers; `cut_at` arms a power cut at
/// that program/erase (counted after format); `faults` adds correctable read errors.
fn run<const W: usize>(
    prof: Profile,
    seed: u64,
    ops: &[Op],
    cut_at: Option<(u64, u8)>,
    noisy_reads: bool,
) -> Result<(u64, u64), TestCaseError> {
    let mut sim = SimNand::heap(prof, FaultPlan::seeded(seed));
    let fs =
        FsW::<W>::formatted(&mut sim, cfg()).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
    let p = fs.payload() as u64;
    let mut run = Run {
        fs,
        p,
        st: Pending::default(),
        next_id: 0,
        reads: 0,
        cuts: 0,
        log: Vec::new(),
        failing: false,
    };
    run.next_id = run.fs.next_object_id();
    let mut plan = FaultPlan::seeded(seed);
    if noisy_reads {
        plan = plan.with_faults(FaultConfig {
            read_correctable_ppm: 100_000,
            ..FaultConfig::default()
        });
    }
    if let Some((at, k)) = cut_at {
        plan = plan.with_cut(at, CutKind::ALL[k as usize % CutKind::ALL.len()]);
    }
    run.fs.flash_mut().arm(plan);
    for op in ops {
        run.step(op)?;
    }
    STATS[0].fetch_add(1, Ordering::Relaxed);
    STATS[1].fetch_add(ops.len() as u64, Ordering::Relaxed);
    STATS[2].fetch_add(run.reads, Ordering::Relaxed);
    STATS[3].fetch_add(run.cuts, Ordering::Relaxed);
    STATS[4].fetch_add(run.fs.stats().relocated_pages, Ordering::Relaxed);
    if std::env::var("CACHE_PROBE_VERBOSE").is_ok() {
        eprintln!(
            "cases {} ops {} checked reads {} cuts/crashes {} relocated {} page hits {}",
            STATS[0].load(Ordering::Relaxed),
            STATS[1].load(Ordering::Relaxed),
            STATS[2].load(Ordering::Relaxed),
            STATS[3].load(Ordering::Relaxed),
            STATS[4].load(Ordering::Relaxed),
            STATS[5].load(Ordering::Relaxed)
        );
    }
    run.fs.flash_mut().disarm();
    run.fs.flash_mut().power_on();
    if run.fs.health() != oftl::Health::Writable {
        return Ok((run.reads, run.cuts));
    }
    // A final cut-free check of everything, then again after a clean remount.
    run.check_all()?;
    let mut after = run.st.clone();
    after.commit_all();
    run.fs
        .unmount()
        .map_err(|e| TestCaseError::fail(format!("final unmount: {e:?}")))?;
    run.st = after;
    run.fs
        .mount()
        .map_err(|e| TestCaseError::fail(format!("final mount: {e:?}")))?;
    run.check_all()?;
    drop(run);
    if sim.counters().misuse != 0 {
        return Err(TestCaseError::fail(format!(
            "flash misuse: {:?}",
            sim.last_misuse()
        )));
    }
    Ok((0, 0))
}

/// Cases, operations, checked reads, cuts (and crashes), pages GC relocated, checked
/// whole-page reads that read no flash (cache hits): totals for
/// the report (`CACHE_PROBE_VERBOSE=1`).
static STATS: [AtomicU64; 6] = [const { AtomicU64::new(0) }; 6];

fn cases(default: u32) -> u32 {
    std::env::var("CACHE_PROBE_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(256),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Reads equal the model of committed + buffered writes, 2 buffers (the default).
    #[test]
    fn differential_wbuf2(seed in 0u64..1000, ops in proptest::collection::vec(op(false), 1..150)) {
        run::<2>(profile::TINY, seed, &ops, None, false)?;
    }

    /// One buffer: every whole-page read competes with the writes for it.
    #[test]
    fn differential_wbuf1(seed in 0u64..1000, ops in proptest::collection::vec(op(false), 1..150)) {
        run::<1>(profile::TINY, seed, &ops, None, false)?;
    }

    /// Three buffers, in-band placement (payload smaller than the page).
    #[test]
    fn differential_wbuf3_inband(seed in 0u64..1000, ops in proptest::collection::vec(op(false), 1..150)) {
        run::<3>(tiny_raw(), seed, &ops, None, false)?;
    }

    /// With crashes, salvage (read-only) mounts, aimed read failures, a power cut at a
    /// random program/erase and correctable read errors (scrubbing moves cached pages).
    #[test]
    fn differential_with_faults(
        seed in 0u64..1000,
        ops in proptest::collection::vec(op(true), 1..150),
        cut in proptest::option::of((1u64..400, any::<u8>())),
        noisy in any::<bool>(),
    ) {
        run::<2>(profile::TINY, seed, &ops, cut, noisy)?;
    }

    /// The same, one buffer, in-band placement.
    #[test]
    fn differential_with_faults_wbuf1_inband(
        seed in 0u64..1000,
        ops in proptest::collection::vec(op(true), 1..150),
        cut in proptest::option::of((1u64..400, any::<u8>())),
    ) {
        run::<1>(tiny_raw(), seed, &ops, cut, false)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(256) / 8 + 1,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Long runs with four buffers (GC and checkpoints under way; many cached pages).
    #[test]
    fn differential_wbuf4_long(seed in 0u64..1000, ops in proptest::collection::vec(op(true), 300..600)) {
        run::<4>(profile::TINY, seed, &ops, None, false)?;
    }

    /// No buffers: nothing is cached, every write is synchronous.
    #[test]
    fn differential_wbuf0(seed in 0u64..1000, ops in proptest::collection::vec(op(false), 1..150)) {
        run::<0>(profile::TINY, seed, &ops, None, false)?;
    }
}

// ---- targeted sequences --------------------------------------------------------------------

type Fs<'a> = FsW<'a, 2>;

fn page_read(fs: &mut Fs, o: u32, lpn: u64) -> (Vec<u8>, u64, u64) {
    let p = fs.payload() as usize;
    let c = fs.flash().counters();
    let mut b = vec![0u8; p];
    let n = fs.read(o, lpn * p as u64, &mut b).unwrap();
    let d = fs.flash().counters() - c;
    b.truncate(n);
    (b, d.reads, d.programs)
}

/// An object whose committed last page is partial (size 100) can only have that page
/// kept by a whole-page read while buffered writes elsewhere make it longer: the copy
/// holds zeros past 100. A transaction that grows the object through another page
/// keeps the copy (it is the committed page), and a later buffered write into the gap
/// and a truncate that grows the object read zeros where nothing was written.
#[test]
fn partial_last_page_cached_then_grown_by_a_transaction() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(3));
    let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
    let p = fs.payload() as u64;
    let o = fs.create(ObjKind::Object).unwrap();
    let mut model = bytes(1, 100);
    // Through a transaction: no buffer holds page 0 afterwards.
    fs.transact(&[TxOp::Write {
        obj: o,
        offset: 0,
        data: &model,
    }])
    .unwrap();
    // Dirty page 2 (pending size 2p + 6), then page 0 whole: kept, zeros past 100.
    fs.write(o, 2 * p, &[5; 6]).unwrap();
    model.resize(2 * p as usize + 6, 0);
    model[2 * p as usize..].fill(5);
    let (b, reads, programs) = page_read(&mut fs, o, 0);
    assert_eq!((reads, programs), (1, 0));
    assert_eq!(b[..], model[..p as usize]);
    // A transaction writes page 1 (the object's dirty page 2 commits first).
    let d = bytes(2, 30);
    fs.transact(&[TxOp::Write {
        obj: o,
        offset: p + 7,
        data: &d,
    }])
    .unwrap();
    model[p as usize + 7..p as usize + 37].copy_from_slice(&d);
    let (b, reads, _) = page_read(&mut fs, o, 0);
    assert_eq!(reads, 0, "page 0 was not rewritten: its copy stays");
    assert_eq!(b[..], model[..p as usize]);
    // A buffered write into the gap of the cached page, then the whole object.
    fs.write(o, 1000, &[9; 10]).unwrap();
    model[1000..1010].fill(9);
    let mut all = vec![0u8; model.len() + 5];
    assert_eq!(fs.read(o, 0, &mut all).unwrap(), model.len());
    assert_eq!(all[..model.len()], model[..]);
    // Truncate into page 0, grow again: zeros past the cut.
    fs.truncate(o, 50).unwrap();
    model.truncate(50);
    fs.write(o, 3 * p + 1, &[4; 3]).unwrap(); // dirty page 3: page 0 is whole again
    model.resize(3 * p as usize + 4, 0);
    model[3 * p as usize + 1..].fill(4);
    let (b, _, _) = page_read(&mut fs, o, 0);
    assert_eq!(b[..], model[..p as usize]);
    fs.transact(&[TxOp::Truncate {
        obj: o,
        size: 5 * p,
    }])
    .unwrap();
    model.resize(5 * p as usize, 0);
    for lpn in 0..5 {
        let (b, _, _) = page_read(&mut fs, o, lpn);
        assert_eq!(
            b[..],
            model[(lpn * p) as usize..((lpn + 1) * p) as usize],
            "page {lpn}"
        );
    }
    fs.unmount().unwrap();
    let mut fs = Fs::mounted(&mut sim).unwrap();
    for lpn in 0..5 {
        let (b, _, _) = page_read(&mut fs, o, lpn);
        assert_eq!(
            b[..],
            model[(lpn * p) as usize..((lpn + 1) * p) as usize],
            "page {lpn}"
        );
    }
}

/// Cached pages across every kind of transaction op on the object and on others:
/// truncate to 0 then rewrite in one transaction, delete and create (a new id) in one,
/// attributes only, and a write to the object's other page.
#[test]
fn cached_pages_across_transactions() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(4));
    let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
    let p = fs.payload() as usize;
    let a = fs.create(ObjKind::Object).unwrap();
    let b = fs.create(ObjKind::Object).unwrap();
    let da = bytes(10, 3 * p);
    let db = bytes(11, 2 * p);
    fs.write(a, 0, &da).unwrap();
    fs.write(b, 0, &db).unwrap();
    assert_eq!(page_read(&mut fs, a, 1).0, da[p..2 * p]);
    assert_eq!(page_read(&mut fs, b, 0).0, db[..p]);
    // Attributes only: both copies stay.
    fs.transact(&[
        TxOp::SetAttrs {
            obj: a,
            attrs: attrs_of(3),
        },
        TxOp::SetAttrs {
            obj: b,
            attrs: attrs_of(4),
        },
    ])
    .unwrap();
    assert_eq!(page_read(&mut fs, a, 1).1, 0);
    assert_eq!(page_read(&mut fs, b, 0).1, 0);
    // Truncate a to 0 and write it again, in one transaction.
    let na = bytes(12, p + 10);
    fs.transact(&[
        TxOp::Truncate { obj: a, size: 0 },
        TxOp::Write {
            obj: a,
            offset: 0,
            data: &na,
        },
    ])
    .unwrap();
    assert_eq!(page_read(&mut fs, a, 0).0, na[..p]);
    assert_eq!(page_read(&mut fs, a, 1).0, na[p..]);
    // Delete b and create c in one transaction; c reads empty.
    let c = fs.next_object_id();
    fs.transact(&[
        TxOp::Delete { obj: b },
        TxOp::Create {
            kind: ObjKind::Object,
            attrs: [0; oftl::ATTR_LEN],
        },
    ])
    .unwrap();
    assert!(!fs.exists(b).unwrap());
    assert_eq!(page_read(&mut fs, c, 0).0, Vec::<u8>::new());
    let dc = bytes(13, p);
    fs.write(c, 0, &dc).unwrap();
    assert_eq!(page_read(&mut fs, c, 0).0, dc);
    // A write to a's page 1 keeps page 0's copy and forgets page 1's.
    assert_eq!(page_read(&mut fs, a, 0).0, na[..p]);
    fs.transact(&[TxOp::Write {
        obj: a,
        offset: p as u64 + 3,
        data: &[1, 2, 3],
    }])
    .unwrap();
    let (b0, r0, _) = page_read(&mut fs, a, 0);
    assert_eq!((b0[..] == na[..p], r0), (true, 0));
    let mut want = na[p..].to_vec();
    want[3..6].copy_from_slice(&[1, 2, 3]);
    assert_eq!(page_read(&mut fs, a, 1).0, want);
    drop(fs);
    assert_eq!(sim.counters().misuse, 0);
}

/// A whole-page read whose page fails to read leaves no copy behind (the buffer it was
/// to go in is free), and the page reads right afterwards.
#[test]
fn failed_whole_page_read_keeps_nothing() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(5));
    let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
    let p = fs.payload() as usize;
    let o = fs.create(ObjKind::Object).unwrap();
    let d = bytes(20, 2 * p);
    fs.write(o, 0, &d).unwrap();
    fs.sync().unwrap();
    assert_eq!(page_read(&mut fs, o, 1).0, d[p..]); // a clean copy of page 1 to evict
    let saved = *fs.flash().plan();
    let mut plan = saved;
    plan.faults.read_fail_at = 1;
    plan.faults.read_fail_len = 4;
    fs.flash_mut().arm(plan);
    let mut b = vec![0u8; p];
    assert!(fs.read(o, 0, &mut b).is_err());
    fs.flash_mut().arm(saved);
    let (b, reads, _) = page_read(&mut fs, o, 0);
    assert_eq!((b[..] == d[..p], reads), (true, 1));
    assert_eq!(page_read(&mut fs, o, 0).1, 0);
}

/// Regression of cb247af (fixed): `transact` computed the last page an op writes (to
/// forget its copies) before validating the op, as `offset + len - 1` unchecked; a
/// write whose end does not fit in a u64 panicked with an arithmetic overflow in
/// overflow-checked builds instead of returning `TooLarge`.
#[test]
fn transact_write_past_u64_max_is_too_large() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(1));
    let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
    let o = fs.create(ObjKind::Object).unwrap();
    assert_eq!(fs.write(o, u64::MAX, &[1]), Err(WriteError::TooLarge));
    assert_eq!(
        fs.transact(&[TxOp::Write {
            obj: o,
            offset: u64::MAX,
            data: &[1]
        }]),
        Err(WriteError::TooLarge)
    );
    assert_eq!(
        fs.transact(&[TxOp::Write {
            obj: o,
            offset: u64::MAX - 2,
            data: &[1, 2, 3]
        }]),
        Err(WriteError::TooLarge)
    );
    // The store is still usable.
    fs.write(o, 0, &[7; 4]).unwrap();
    let mut b = [0u8; 4];
    assert_eq!(fs.read(o, 0, &mut b).unwrap(), 4);
    assert_eq!(b, [7; 4]);
}

/// Offsets that do not overflow but are far past the largest object: refused, and the
/// copies of the object's pages (all forgotten, as the page number does not fit in 32
/// bits) still read right.
#[test]
fn transact_write_far_past_the_largest_object() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(1));
    let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
    let p = fs.payload() as usize;
    let o = fs.create(ObjKind::Object).unwrap();
    let d = bytes(30, p);
    fs.write(o, 0, &d).unwrap();
    assert_eq!(page_read(&mut fs, o, 0).0, d);
    for off in [fs.max_object_size(), 1 << 43, (1 << 43) + 5, 1 << 62] {
        assert_eq!(
            fs.transact(&[TxOp::Write {
                obj: o,
                offset: off,
                data: &[1]
            }]),
            Err(WriteError::TooLarge),
            "offset {off}"
        );
        assert_eq!(page_read(&mut fs, o, 0).0, d);
    }
}
