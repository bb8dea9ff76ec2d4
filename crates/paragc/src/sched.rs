//! Read/write/erase scheduling over parallel units (ParaFS section 3.4).
//!
//! The [`Scheduler`] keeps a bounded queue per parallel unit for each kind of
//! operation and answers two questions, both in O(units) work and no I/O:
//!
//! 1. **Where does a write go?** [`Scheduler::submit_write`] asks a [`Dispatch`]
//!    policy. [`LeastBusy`] (the default) implements ParaFS formula 1: the unit with the
//!    least queued work, `W = reads * C_read + writes * C_write + erases * C_erase`, plus
//!    what remains of the operation it is running. Units the caller marks ineligible
//!    (no free page) are skipped.
//! 2. **What does an idle unit do next?** [`Scheduler::next`] alternates *read slices*
//!    and *write/erase slices* of bounded length, so reads are not stuck behind long
//!    runs of programs, and lets erases through only when the [`EraseGate`] admits them.
//!    [`Formula2`] (the default) implements ParaFS formula 2:
//!    `e = A * f + B * n_e`, with `f` the unit's free-space share and `n_e` the share of
//!    units already erasing (both per mille); the erase is issued when `e < T`, or at
//!    once if the unit is at its collection reserve.
//!
//! The scheduler never looks at a clock: the caller passes `now` (any monotonic unit,
//! the same as [`Costs`]) and reports completions with [`Scheduler::notice_done`].
//! Background work is driven by the caller: call [`Scheduler::next`] for idle units, in
//! bounded steps, whenever it suits.
//!
//! RAM: at most `UNITS * (24 * Q + 96) + 64` bytes (6.7 KiB for 8 units and 32-deep
//! queues).

use heapless::Deque;

/// Kind of a queued operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum OpKind {
    /// A page read.
    Read,
    /// A page program.
    Write,
    /// A block erase.
    Erase,
}

/// Cost of one operation of each kind on a unit (for example the part's tR, tPROG and
/// tBERS plus bus time, in ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Costs {
    /// One page read.
    pub read: u32,
    /// One page program.
    pub write: u32,
    /// One block erase.
    pub erase: u32,
}

impl Costs {
    /// The cost of `kind`.
    pub const fn of(&self, kind: OpKind) -> u32 {
        match kind {
            OpKind::Read => self.read,
            OpKind::Write => self.write,
            OpKind::Erase => self.erase,
        }
    }
}

/// The order a unit serves its queues in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Order {
    /// Arrival order across all kinds (no slices; the baseline).
    Fifo,
    /// Alternate read slices and write/erase slices of at most `len` operations each.
    Sliced {
        /// Operations per slice (at least 1).
        len: u8,
    },
}

/// An operation the scheduler tells the caller to issue now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Issue {
    /// Its kind.
    pub kind: OpKind,
    /// The caller's tag given when it was queued.
    pub tag: u32,
}

/// A full queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum QueueError {
    /// No such unit.
    NoSuchUnit,
    /// The unit's queue of this kind is full.
    Full,
    /// No unit is eligible for the write.
    NoUnit,
}

impl core::fmt::Display for QueueError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            QueueError::NoSuchUnit => "no such unit",
            QueueError::Full => "queue full",
            QueueError::NoUnit => "no eligible unit",
        })
    }
}

impl core::error::Error for QueueError {}

/// What a [`Dispatch`] policy sees of one unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UnitLoad {
    /// Queued work plus the remainder of the running operation (formula 1).
    pub load: u64,
    /// Whether the caller allows a write there (it has a free page of the class).
    pub eligible: bool,
}

/// Chooses the unit for a write.
pub trait Dispatch {
    /// The unit (index into `units`) for the next write, or `None` if none is
    /// eligible. `start` rotates with every dispatch, for tie-breaking.
    fn choose(&mut self, units: &[UnitLoad], start: usize) -> Option<usize>;
}

/// ParaFS formula 1: the least-loaded eligible unit; ties go to the first from `start`
/// (so an idle device is striped round-robin). Zero-sized; the default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LeastBusy;

impl Dispatch for LeastBusy {
    fn choose(&mut self, units: &[UnitLoad], start: usize) -> Option<usize> {
        let n = units.len();
        let mut best: Option<(usize, u64)> = None;
        for i in 0..n {
            let u = (start + i) % n;
            let l = units[u];
            if l.eligible && best.is_none_or(|(_, b)| l.load < b) {
                best = Some((u, l.load));
            }
        }
        best.map(|(u, _)| u)
    }
}

/// Static page-by-page striping (the baseline): always the unit after the previous
/// one, whatever its load. If that unit is not eligible the write waits (`None`), as
/// a static stripe would.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RoundRobin;

impl Dispatch for RoundRobin {
    fn choose(&mut self, units: &[UnitLoad], start: usize) -> Option<usize> {
        units.get(start).filter(|u| u.eligible).map(|_| start)
    }
}

/// What an [`EraseGate`] decides on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EraseContext {
    /// The unit's free space, per mille of its blocks.
    pub free_permille: u32,
    /// Units already erasing, per mille of all units.
    pub erasing_permille: u32,
    /// The unit is at its collection reserve: the erase is needed now.
    pub urgent: bool,
    /// Reads are waiting on this unit.
    pub reads_waiting: bool,
}

/// Decides whether a queued erase may start now.
pub trait EraseGate {
    /// Whether to issue the erase.
    fn admit(&self, ctx: &EraseContext) -> bool;
}

/// ParaFS formula 2: admit when `A * free + B * erasing < T` (per-mille inputs), or
/// when urgent. With the defaults (`A = 1, B = 1, T = 250`) an erase waits while the
/// unit has 25% free space, and fewer units erase at once the more space there is.
/// Zero-sized; the default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Formula2<const A: u32 = 1, const B: u32 = 1, const T: u32 = 250>;

impl<const A: u32, const B: u32, const T: u32> EraseGate for Formula2<A, B, T> {
    fn admit(&self, ctx: &EraseContext) -> bool {
        ctx.urgent
            || A.saturating_mul(ctx.free_permille)
                .saturating_add(B.saturating_mul(ctx.erasing_permille))
                < T
    }
}

/// Every erase is issued as soon as it is at the head of its queue (the baseline).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Eager;

impl EraseGate for Eager {
    fn admit(&self, _ctx: &EraseContext) -> bool {
        true
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    tag: u32,
    seq: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slice {
    Read,
    Write,
}

#[derive(Debug)]
struct UnitQueue<const Q: usize> {
    reads: Deque<Entry, Q>,
    writes: Deque<Entry, Q>,
    erases: Deque<Entry, Q>,
    slice: Slice,
    slice_used: u8,
    busy_until: u64,
    running: Option<OpKind>,
}

impl<const Q: usize> UnitQueue<Q> {
    const fn new() -> Self {
        UnitQueue {
            reads: Deque::new(),
            writes: Deque::new(),
            erases: Deque::new(),
            slice: Slice::Read,
            slice_used: 0,
            busy_until: 0,
            running: None,
        }
    }

    fn queue(&mut self, kind: OpKind) -> &mut Deque<Entry, Q> {
        match kind {
            OpKind::Read => &mut self.reads,
            OpKind::Write => &mut self.writes,
            OpKind::Erase => &mut self.erases,
        }
    }
}

/// Per-unit queues, write dispatch and slice/erase ordering for up to `UNITS` units
/// with `Q`-deep queues per kind.
///
/// # Example
///
/// ```
/// use paragc::sched::{Costs, OpKind, Order, Scheduler, Space};
///
/// let costs = Costs { read: 60, write: 290, erase: 2000 };
/// let mut s: Scheduler<4, 8> = Scheduler::new(4, costs, Order::Sliced { len: 4 });
/// // Unit 0 is busy with an erase: the write goes elsewhere.
/// s.enqueue(0, OpKind::Erase, 99).unwrap();
/// let u = s.submit_write(7, 0, |_| true).unwrap();
/// assert_ne!(u, 0);
/// // Reads are served before the erase on unit 0 while space is ample.
/// s.enqueue(0, OpKind::Read, 1).unwrap();
/// let roomy = Space { free_permille: 500, urgent: false };
/// assert_eq!(s.next(0, 0, roomy).unwrap().kind, OpKind::Read);
/// s.notice_done(0);
/// // Nothing else than the gated erase is queued, and it must wait.
/// assert_eq!(s.next(0, 60, roomy), None);
/// let low = Space { free_permille: 100, urgent: false };
/// assert_eq!(s.next(0, 60, low).unwrap().kind, OpKind::Erase);
/// ```
#[derive(Debug)]
pub struct Scheduler<const UNITS: usize, const Q: usize, D = LeastBusy, E = Formula2> {
    units: u32,
    costs: Costs,
    order: Order,
    queues: [UnitQueue<Q>; UNITS],
    seq: u32,
    rotate: u32,
    dispatch: D,
    gate: E,
}

/// A unit's free space as the erase gate sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Space {
    /// Free blocks per mille of the unit's blocks.
    pub free_permille: u32,
    /// The unit is at its collection reserve.
    pub urgent: bool,
}

impl<const UNITS: usize, const Q: usize> Scheduler<UNITS, Q> {
    /// A scheduler over `units` units (clamped to `UNITS`) with the default policies.
    pub fn new(units: u32, costs: Costs, order: Order) -> Self {
        Self::with_policies(units, costs, order, LeastBusy, Formula2)
    }
}

impl<const UNITS: usize, const Q: usize, D: Dispatch, E: EraseGate> Scheduler<UNITS, Q, D, E> {
    /// A scheduler with explicit dispatch and erase-gate policies.
    pub fn with_policies(units: u32, costs: Costs, order: Order, dispatch: D, gate: E) -> Self {
        let order = match order {
            Order::Sliced { len: 0 } => Order::Sliced { len: 1 },
            o => o,
        };
        Scheduler {
            units: units.min(UNITS as u32),
            costs,
            order,
            queues: [const { UnitQueue::new() }; UNITS],
            seq: 0,
            rotate: 0,
            dispatch,
            gate,
        }
    }

    /// Units served.
    pub fn units(&self) -> u32 {
        self.units
    }

    /// Queues an operation for `unit`. O(1).
    pub fn enqueue(&mut self, unit: u32, kind: OpKind, tag: u32) -> Result<(), QueueError> {
        if unit >= self.units {
            return Err(QueueError::NoSuchUnit);
        }
        let seq = self.seq;
        let q = self.queues[unit as usize].queue(kind);
        q.push_back(Entry { tag, seq })
            .map_err(|_| QueueError::Full)?;
        self.seq = self.seq.wrapping_add(1);
        Ok(())
    }

    /// Queued operations of `kind` on `unit`.
    pub fn queued(&self, unit: u32, kind: OpKind) -> usize {
        match self.queues.get(unit as usize) {
            Some(q) => match kind {
                OpKind::Read => q.reads.len(),
                OpKind::Write => q.writes.len(),
                OpKind::Erase => q.erases.len(),
            },
            None => 0,
        }
    }

    /// Formula 1 load of `unit` at `now`: queued work plus the rest of the running
    /// operation. O(1).
    pub fn load(&self, unit: u32, now: u64) -> u64 {
        let Some(q) = self.queues.get(unit as usize) else {
            return 0;
        };
        let c = self.costs;
        q.reads.len() as u64 * c.read as u64
            + q.writes.len() as u64 * c.write as u64
            + q.erases.len() as u64 * c.erase as u64
            + q.busy_until.saturating_sub(now)
    }

    /// Dispatches a write to the unit the [`Dispatch`] policy picks among those for
    /// which `eligible(unit)` is true, queues it there, and returns the unit.
    /// O(units).
    pub fn submit_write(
        &mut self,
        tag: u32,
        now: u64,
        eligible: impl Fn(u32) -> bool,
    ) -> Result<u32, QueueError> {
        let mut loads = [UnitLoad {
            load: 0,
            eligible: false,
        }; UNITS];
        let n = self.units as usize;
        for (u, l) in loads.iter_mut().enumerate().take(n) {
            *l = UnitLoad {
                load: self.load(u as u32, now),
                eligible: eligible(u as u32)
                    && self.queues[u].writes.len() < self.queues[u].writes.capacity(),
            };
        }
        let start = (self.rotate % self.units.max(1)) as usize;
        let u = self
            .dispatch
            .choose(&loads[..n], start)
            .filter(|&u| u < n && loads[u].eligible)
            .ok_or(QueueError::NoUnit)?;
        self.rotate = (u as u32 + 1) % self.units.max(1);
        self.enqueue(u as u32, OpKind::Write, tag)?;
        Ok(u as u32)
    }

    /// Units with an erase running.
    pub fn erasing_units(&self) -> u32 {
        self.queues[..self.units as usize]
            .iter()
            .filter(|q| q.running == Some(OpKind::Erase))
            .count() as u32
    }

    /// Whether `unit` is running an operation (issued and not yet reported done).
    pub fn is_busy(&self, unit: u32) -> bool {
        self.queues
            .get(unit as usize)
            .is_some_and(|q| q.running.is_some())
    }

    /// The operation idle `unit` should issue at `now`, or `None` if it should stay
    /// idle (nothing queued, or only erases the gate holds back). The operation is
    /// dequeued and the unit counted busy until [`Scheduler::notice_done`]. An erase the
    /// gate holds back stays queued: ask again when the unit's free space or the number
    /// of erasing units changes (at the latest, `space.urgent` lets it through). O(units)
    /// (for the erasing share), O(1) otherwise.
    pub fn next(&mut self, unit: u32, now: u64, space: Space) -> Option<Issue> {
        if unit >= self.units || self.queues[unit as usize].running.is_some() {
            return None;
        }
        let ctx = EraseContext {
            free_permille: space.free_permille,
            erasing_permille: self.erasing_units() * 1000 / self.units.max(1),
            urgent: space.urgent,
            reads_waiting: !self.queues[unit as usize].reads.is_empty(),
        };
        let admit = self.gate.admit(&ctx);
        let order = self.order;
        let q = &mut self.queues[unit as usize];
        let kind = match order {
            Order::Fifo => {
                let head = |d: &Deque<Entry, Q>| d.front().map(|e| e.seq);
                let mut best: Option<(OpKind, u32)> = None;
                for (k, s) in [
                    (OpKind::Read, head(&q.reads)),
                    (OpKind::Write, head(&q.writes)),
                    (OpKind::Erase, head(&q.erases).filter(|_| admit)),
                ] {
                    if let Some(s) = s {
                        if best.is_none_or(|(_, b)| (s.wrapping_sub(b) as i32) < 0) {
                            best = Some((k, s));
                        }
                    }
                }
                best.map(|(k, _)| k)
            }
            Order::Sliced { len } => {
                let erase_ok = admit && !q.erases.is_empty();
                let urgent_erase = erase_ok && space.urgent;
                let has_write = !q.writes.is_empty() || erase_ok;
                if q.slice_used >= len
                    || (q.slice == Slice::Read && q.reads.is_empty())
                    || (q.slice == Slice::Write && !has_write)
                {
                    q.slice = match q.slice {
                        Slice::Read if has_write => Slice::Write,
                        Slice::Write if !q.reads.is_empty() => Slice::Read,
                        s => s,
                    };
                    q.slice_used = 0;
                }
                if urgent_erase {
                    Some(OpKind::Erase)
                } else {
                    match q.slice {
                        Slice::Read if !q.reads.is_empty() => Some(OpKind::Read),
                        _ if erase_ok => Some(OpKind::Erase),
                        _ if !q.writes.is_empty() => Some(OpKind::Write),
                        _ if !q.reads.is_empty() => Some(OpKind::Read),
                        _ => None,
                    }
                }
            }
        }?;
        let e = q.queue(kind).pop_front()?;
        q.slice_used = q.slice_used.saturating_add(1);
        q.running = Some(kind);
        q.busy_until = now.max(q.busy_until) + self.costs.of(kind) as u64;
        Some(Issue { kind, tag: e.tag })
    }

    /// `unit`'s running operation finished.
    pub fn notice_done(&mut self, unit: u32) {
        if let Some(q) = self.queues.get_mut(unit as usize) {
            q.running = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COSTS: Costs = Costs {
        read: 60,
        write: 290,
        erase: 2000,
    };
    const ROOMY: Space = Space {
        free_permille: 500,
        urgent: false,
    };

    #[test]
    fn least_busy_avoids_loaded_units_and_stripes_when_idle() {
        let mut s: Scheduler<4, 8> = Scheduler::new(4, COSTS, Order::Fifo);
        let idle: [u32; 4] =
            core::array::from_fn(|i| s.submit_write(i as u32, 0, |_| true).unwrap());
        assert_eq!(idle, [0, 1, 2, 3]);
        s.enqueue(2, OpKind::Erase, 0).unwrap();
        for t in 0..6 {
            assert_ne!(s.submit_write(t, 0, |_| true).unwrap(), 2);
        }
        assert_eq!(s.submit_write(9, 0, |u| u == 3).unwrap(), 3);
        assert_eq!(s.submit_write(9, 0, |_| false), Err(QueueError::NoUnit));
    }

    #[test]
    fn round_robin_ignores_load() {
        let mut s: Scheduler<4, 8, RoundRobin, Eager> =
            Scheduler::with_policies(4, COSTS, Order::Fifo, RoundRobin, Eager);
        s.enqueue(1, OpKind::Erase, 0).unwrap();
        let got: [u32; 4] =
            core::array::from_fn(|i| s.submit_write(i as u32, 0, |_| true).unwrap());
        assert_eq!(got, [0, 1, 2, 3]);
        // The stripe waits for an ineligible unit instead of skipping it.
        assert_eq!(s.submit_write(9, 0, |u| u != 0), Err(QueueError::NoUnit));
        assert_eq!(s.submit_write(9, 0, |_| true), Ok(0));
    }

    #[test]
    fn fifo_serves_in_arrival_order() {
        let mut s: Scheduler<1, 8, LeastBusy, Eager> =
            Scheduler::with_policies(1, COSTS, Order::Fifo, LeastBusy, Eager);
        s.enqueue(0, OpKind::Write, 1).unwrap();
        s.enqueue(0, OpKind::Erase, 2).unwrap();
        s.enqueue(0, OpKind::Read, 3).unwrap();
        let mut tags = [0; 3];
        for t in tags.iter_mut() {
            *t = s.next(0, 0, ROOMY).unwrap().tag;
            assert_eq!(s.next(0, 0, ROOMY), None, "one operation at a time");
            s.notice_done(0);
        }
        assert_eq!(tags, [1, 2, 3]);
    }

    #[test]
    fn slices_alternate_reads_and_writes() {
        let mut s: Scheduler<1, 16> = Scheduler::new(1, COSTS, Order::Sliced { len: 2 });
        for t in 0..4 {
            s.enqueue(0, OpKind::Write, 100 + t).unwrap();
            s.enqueue(0, OpKind::Read, t).unwrap();
        }
        let mut kinds = [OpKind::Erase; 8];
        for k in kinds.iter_mut() {
            *k = s.next(0, 0, ROOMY).unwrap().kind;
            s.notice_done(0);
        }
        use OpKind::{Read as R, Write as W};
        assert_eq!(kinds, [R, R, W, W, R, R, W, W]);
    }

    #[test]
    fn formula2_holds_erases_back_until_space_is_short_or_urgent() {
        let g = Formula2::<1, 1, 250>;
        let ctx = |free, erasing, urgent| EraseContext {
            free_permille: free,
            erasing_permille: erasing,
            urgent,
            reads_waiting: false,
        };
        assert!(!g.admit(&ctx(300, 0, false)));
        assert!(g.admit(&ctx(100, 0, false)));
        assert!(!g.admit(&ctx(100, 500, false)));
        assert!(g.admit(&ctx(900, 900, true)));
        let mut s: Scheduler<2, 4> = Scheduler::new(2, COSTS, Order::Sliced { len: 4 });
        s.enqueue(0, OpKind::Erase, 1).unwrap();
        s.enqueue(1, OpKind::Erase, 2).unwrap();
        let low = Space {
            free_permille: 200,
            urgent: false,
        };
        assert_eq!(s.next(0, 0, low).unwrap().kind, OpKind::Erase);
        // Half the units erasing: 200 + 500 >= 250 holds the second one back.
        assert_eq!(s.next(1, 0, low), None);
        s.notice_done(0);
        assert_eq!(s.next(1, 0, low).unwrap().tag, 2);
    }

    #[test]
    fn load_counts_queued_work_and_running_remainder() {
        let mut s: Scheduler<2, 4> = Scheduler::new(2, COSTS, Order::Fifo);
        s.enqueue(0, OpKind::Read, 0).unwrap();
        s.enqueue(0, OpKind::Write, 0).unwrap();
        assert_eq!(s.load(0, 0), 350);
        s.next(0, 1000, ROOMY).unwrap();
        assert_eq!(s.load(0, 1000), 290 + 60);
        assert_eq!(s.load(0, 1030), 290 + 30);
        assert_eq!(s.enqueue(5, OpKind::Read, 0), Err(QueueError::NoSuchUnit));
        for _ in 0..3 {
            s.enqueue(1, OpKind::Read, 0).unwrap();
        }
        s.enqueue(1, OpKind::Read, 0).unwrap();
        assert_eq!(s.enqueue(1, OpKind::Read, 0), Err(QueueError::Full));
    }
}

#[cfg(test)]
mod size {
    use super::*;

    #[test]
    fn ram_matches_the_documented_bound() {
        let s = core::mem::size_of::<Scheduler<8, 32>>();
        // UNITS * (24 * Q + 96) + 64 bytes, as documented.
        assert!(s <= 8 * (24 * 32 + 96) + 64, "{s}");
    }
}
