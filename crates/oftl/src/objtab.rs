//! Object records: lookups and updates through the cached object table.
//!
//! Records are read and written in their table page's cache slot, so every change is
//! made by a read-modify-write at the moment it happens ([`Oftl::obj_update`]); no
//! caller keeps a record across an operation that could change it (writing an index
//! root changes the record's `root`). Ids are handed out in increasing order and reused
//! once the table's bound is reached (see [`Ids`]); a table page left without live
//! records is unmapped.

use nand_hal::NandFlash;

use crate::cache::Key;
use crate::errors::{Fault, ReadError, WriteError};
use crate::format::index::UNMAPPED;
use crate::format::table::{ObjRecord, REC_LEN, TABLE_OBJ};
use crate::io::FaultOf;
use crate::policy::SpacePolicy;
use crate::{ObjectId, Oftl};

/// The object counters: how many objects are live, which id the next one gets (the
/// **cursor**) and the **top**, one past the highest id handed out (no id at or above
/// it is live). Changed only through the events below.
///
/// Ids are handed out in increasing order from the cursor. When fewer than
/// [`ID_RUN`] ids are left below the table's bound, the cursor goes back to the first
/// id and ids are reused: the cursor then skips live ones ([`Oftl::settle_ids`]).
/// Until that first wrap the cursor equals the top, as in stores written before ids
/// were reused.
///
/// An id freed since the last checkpoint is not handed out again before the next one
/// (a create that would take one checkpoints first): log sectors have no order against
/// the data head's deletes and creates, so a crash recovery could give a new log
/// stream's sectors to the deleted object of its id, or the deleted stream's to the
/// new one (an independent review's finding). Two bounds say which ids those may be:
/// the smallest freed at or past the cursor, and the smallest freed at all (which
/// comes ahead of the cursor when it wraps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ids {
    live: u32,
    top: u32,
    cursor: u32,
    freed_ahead: u32,
    freed_any: u32,
}

/// A run of free ids the cursor prefers to stop at: a transaction creating up to this
/// many objects finds them free unless the ids around the cursor are fragmented (see
/// [`crate::TxOp::Create`]).
pub const ID_RUN: u32 = 8;

/// Ids [`Oftl::settle_ids`] looks at for a run of [`ID_RUN`] free ids past the first free
/// one before it takes the first free one alone.
const ID_SCAN: u32 = 256;

/// The first object id (0 is the object table's own).
const FIRST_ID: u32 = 1;

/// No id freed since the last checkpoint.
const NO_ID: u32 = u32::MAX;

impl Ids {
    /// A fresh store: no object, the first gets id 1.
    pub const FRESH: Ids = Ids {
        live: 0,
        top: FIRST_ID,
        cursor: FIRST_ID,
        freed_ahead: NO_ID,
        freed_any: NO_ID,
    };

    /// Live objects.
    pub fn live(&self) -> u32 {
        self.live
    }

    /// The id the next object gets.
    pub fn next(&self) -> u32 {
        self.cursor
    }

    /// One past the highest id handed out: no id at or above it is live.
    pub fn top(&self) -> u32 {
        self.top
    }

    /// Whether the cursor went back past ids that may be live.
    pub fn wrapped(&self) -> bool {
        self.cursor < self.top
    }

    /// Whether the `n` ids from the cursor on may include one freed since the last
    /// checkpoint.
    pub fn reuses_recent(&self, n: u32) -> bool {
        n > 0 && self.cursor.saturating_add(n - 1) >= self.freed_ahead
    }

    /// As a checkpoint recorded them (`cursor` is `top` in checkpoints of stores
    /// whose ids never wrapped).
    pub fn loaded(&mut self, live: u32, top: u32, cursor: u32) {
        *self = Ids {
            live,
            top,
            cursor: cursor.min(top),
            ..Ids::FRESH
        };
    }

    /// A checkpoint committed: every id freed before it may be handed out again.
    pub fn checkpointed(&mut self) {
        self.freed_ahead = NO_ID;
        self.freed_any = NO_ID;
    }

    /// A metadata record of object `id` was written or replayed: no later object takes
    /// its id before the cursor wraps (before the first wrap, the cursor moves past
    /// it, as it always did).
    pub fn seen(&mut self, id: u32) {
        let unwrapped = !self.wrapped();
        self.top = self.top.max(id.saturating_add(1));
        if unwrapped {
            self.cursor = self.top;
        }
    }

    /// Object `id` was created, or its creation replayed (in creation order), with
    /// `max` the table's bound: the cursor continues after it. An id below the cursor
    /// is a creation after the cursor wrapped only when the cursor was where it wraps
    /// (a rebuild's objects made again from their pages are neither).
    pub fn created(&mut self, id: u32, max: u32) {
        if id >= self.cursor {
            self.cursor = id.saturating_add(1);
        } else if self.cursor.saturating_add(ID_RUN - 1) > max {
            self.cursor = id.saturating_add(1);
            self.freed_ahead = self.freed_ahead.min(self.freed_any);
        }
        self.top = self.top.max(id.saturating_add(1));
    }

    /// The cursor moves forward to `id` (a free one).
    fn advance(&mut self, id: u32) {
        self.cursor = id.min(self.top).max(self.cursor);
    }

    /// The cursor goes back to the first id: every id freed since the last checkpoint
    /// is ahead of it now.
    fn wrap(&mut self) {
        self.cursor = FIRST_ID;
        self.freed_ahead = self.freed_ahead.min(self.freed_any);
    }

    /// A rebuild: new ids start at `next` (the cursor and the top).
    #[cfg(feature = "alloc")]
    pub fn start_at(&mut self, next: u32) {
        self.top = next;
        self.cursor = next;
    }

    /// Test hook: the cursor and the top move forward to `id`.
    pub fn skip_to(&mut self, id: u32) {
        if id > self.top {
            self.top = id;
            self.cursor = id;
        }
    }

    /// A record was added to the table.
    fn inserted(&mut self) {
        self.live = self.live.saturating_add(1);
    }

    /// The record of `id` was removed from the table.
    fn removed(&mut self, id: u32) {
        self.live = self.live.saturating_sub(1);
        self.freed_any = self.freed_any.min(id);
        if id >= self.cursor {
            self.freed_ahead = self.freed_ahead.min(id);
        }
    }
}

impl<
        F: NandFlash,
        P: SpacePolicy,
        const PAGE: usize,
        const BLOCKS: usize,
        const CACHE: usize,
        const WBUF: usize,
        const META: usize,
        const LOG: usize,
    > Oftl<F, PAGE, BLOCKS, CACHE, WBUF, P, META, LOG>
{
    /// Largest object id this format can hold (the table's index bounds it): ids are
    /// handed out in increasing order and reused from the first once they get here.
    pub fn max_object_id(&self) -> ObjectId {
        let epp = self.entries_per_index() as u64;
        let ids = epp * epp * self.records_per_page() as u64;
        (ids - 1).min(crate::format::backpointer::MAX_U24 as u64) as u32
    }

    /// Whether the `n` ids from the cursor on are free and below the table's bound.
    pub(crate) fn ids_free(&mut self, n: u32) -> Result<bool, FaultOf<F>> {
        let first = self.ids.next();
        let Some(last) = first.checked_add(n.saturating_sub(1)) else {
            return Ok(false);
        };
        if n == 0 || last > self.max_object_id() {
            return Ok(n == 0);
        }
        for id in first..=last.min(self.ids.top().saturating_sub(1)) {
            if self.obj_get(id)?.is_some() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Moves the cursor to a free id: back to the first id when fewer than [`ID_RUN`]
    /// are left below the table's bound, past live ones after that, to the first run of
    /// [`ID_RUN`] free ids that starts within [`ID_SCAN`] ids of the first free one, or
    /// that one alone when the ids there are fragmented. Reads nothing until the ids
    /// first wrap (the top is then the cursor, and everything above it is free). With
    /// no free id at all, the cursor stays and creates fail with `TooManyObjects`.
    pub(crate) fn settle_ids(&mut self) -> Result<(), FaultOf<F>> {
        let max = self.max_object_id();
        if self.ids.live() >= max {
            return Ok(());
        }
        // Each turn looks at up to `ID_SCAN` ids and moves the cursor past them, or
        // stops: bounded by the live ids (each looked at once per turn round) and one
        // wrap (after it the cursor has seen every id).
        let mut wrapped = false;
        loop {
            let c = self.ids.next();
            if c.saturating_add(ID_RUN - 1) > max {
                if wrapped {
                    return Ok(());
                }
                wrapped = true;
                self.ids.wrap();
                continue;
            }
            let top = self.ids.top();
            if c >= top {
                return Ok(());
            }
            let end = c.saturating_add(ID_SCAN).min(max.saturating_add(1));
            let mut first = None;
            let mut run = (c, 0u32);
            for id in c..end {
                if id < top && self.obj_get(id)?.is_some() {
                    run = (id + 1, 0);
                    continue;
                }
                first.get_or_insert(id);
                run.1 += 1;
                if run.1 == ID_RUN || id >= top {
                    // A full run, or the free ids from the top on.
                    break;
                }
            }
            // A full run, or one that reaches the top (free from there on).
            let pick = if run.1 == ID_RUN || (run.1 > 0 && run.0 + run.1 >= top) {
                Some(run.0)
            } else {
                first
            };
            match pick {
                Some(id) => {
                    self.ids.advance(id);
                    return Ok(());
                }
                None => self.ids.advance(end),
            }
            if end > max {
                // Live up to the bound: the next turn wraps.
                self.ids.advance(max.saturating_add(1));
            }
        }
    }

    /// After a mount: settles the cursor of a writable store. A read that fails here
    /// does not fail the mount (an independent review found one unreadable table page
    /// near the cursor failing every mount of a wrapped store, salvage included):
    /// creates check their ids and settle again.
    pub(crate) fn settle_ids_after_mount(&mut self) {
        if self.check_writable::<F::Error>().is_ok() && !self.session.salvaging() {
            if let Err(_e) = self.settle_ids() {
                warn!("oftl: object ids not settled at mount (a table page did not read)");
            }
        }
    }

    /// Makes the `n` ids from the cursor on ready to be created: free (settling the
    /// cursor first when `may_move`, for a create whose id nobody named yet) and none
    /// freed since the last checkpoint (checkpointing first otherwise). `false` when
    /// they are not free (the cursor is then settled for the next attempt).
    pub(crate) fn ids_ready(&mut self, n: u32, may_move: bool) -> Result<bool, FaultOf<F>> {
        if !self.ids_free(n)? {
            self.settle_ids()?;
            if !may_move || !self.ids_free(n)? {
                return Ok(false);
            }
        }
        if self.ids.reuses_recent(n) {
            self.checkpoint(false)?;
        }
        Ok(true)
    }

    /// Test hook: object ids continue at `id` (the cursor and the top jump forward), so
    /// tests reach the table's bound and the ids' wrap without creating every object
    /// before. Checkpoints (an unmount right after a clean mount writes none: an
    /// independent review found a sweep's jump lost so).
    #[doc(hidden)]
    pub fn skip_object_ids_to(&mut self, id: ObjectId) -> Result<(), WriteError<F::Error>> {
        let r = (|| -> Result<(), FaultOf<F>> {
            self.check_writable()?;
            self.ids
                .skip_to(id.min(self.max_object_id().saturating_add(1)));
            self.settle_ids()?;
            self.checkpoint(false)
        })();
        r.map_err(|e| self.fail(e))
    }

    /// The record of `id`, if it is live.
    pub(crate) fn obj_get(&mut self, id: ObjectId) -> Result<Option<ObjRecord>, FaultOf<F>> {
        if id == TABLE_OBJ || id >= self.ids.top() || id > self.max_object_id() {
            return Ok(None);
        }
        let t = id / self.records_per_page();
        let key = Key::table_page(t);
        // A table page that is neither cached nor on flash holds no record: answer
        // without taking a cache slot for it.
        if !self.cache.holds_table_page(t) && self.index_get(TABLE_OBJ, t)? == UNMAPPED {
            return Ok(None);
        }
        let s = self.slot_for_key(key)?;
        self.record_in(s, id)
    }

    /// The record of `id`, or `NotFound`.
    pub(crate) fn obj(&mut self, id: ObjectId) -> Result<ObjRecord, FaultOf<F>> {
        self.obj_get(id)?.ok_or(Fault::NotFound)
    }

    fn obj_store(&mut self, id: ObjectId, bytes: &[u8; REC_LEN]) -> Result<usize, FaultOf<F>> {
        let s = self.slot_for_key(Key::table_page(id / self.records_per_page()))?;
        let at = (id % self.records_per_page()) as usize * REC_LEN;
        self.cache.data_mut(s)[at..at + REC_LEN].copy_from_slice(bytes);
        Ok(s)
    }

    /// Changes the live record of `id` in place.
    pub(crate) fn obj_update(
        &mut self,
        id: ObjectId,
        f: impl FnOnce(&mut ObjRecord),
    ) -> Result<(), FaultOf<F>> {
        let mut r = self.obj(id)?;
        let was = r.id;
        f(&mut r);
        debug_assert_eq!(was, r.id);
        self.obj_store(id, &r.encode()).map(|_| ())
    }

    /// Adds the record of a new object.
    pub(crate) fn obj_insert(&mut self, rec: &ObjRecord) -> Result<(), FaultOf<F>> {
        if rec.id == TABLE_OBJ || rec.id > self.max_object_id() {
            return Err(Fault::TooManyObjects);
        }
        self.obj_store(rec.id, &rec.encode())?;
        self.ids.inserted();
        Ok(())
    }

    /// Removes the record of `id`; unmaps its table page once no record is left in it.
    pub(crate) fn obj_remove(&mut self, id: ObjectId) -> Result<(), FaultOf<F>> {
        let s = self.obj_store(id, &[0xFF; REC_LEN])?;
        self.ids.removed(id);
        let used = self.records_per_page() as usize * REC_LEN;
        if self.cache.data(s)[..used].iter().all(|&b| b == 0xFF) {
            let addr = self.cache.addr(s);
            let t = self.cache.key(s).idx;
            self.cache.forget(s);
            self.dev.mark_invalid(addr);
            self.index_unmap_table_page(t)?;
        }
        Ok(())
    }

    /// Live objects.
    pub fn object_count(&self) -> u32 {
        self.ids.live()
    }

    /// The smallest live object id greater than `after` (the first one for `None`):
    /// iterate with `let mut id = None; while let Some(i) = fs.next_object(id)? { ..;
    /// id = Some(i) }`. Reads object-table pages through the cache.
    pub fn next_object(
        &mut self,
        after: Option<ObjectId>,
    ) -> Result<Option<ObjectId>, ReadError<F::Error>> {
        self.next_object_inner(after).map_err(|e| self.fail_read(e))
    }

    fn next_object_inner(
        &mut self,
        after: Option<ObjectId>,
    ) -> Result<Option<ObjectId>, FaultOf<F>> {
        self.check_usable()?;
        let rpp = self.records_per_page();
        let end = self.ids.top().min(self.max_object_id().saturating_add(1));
        let mut id = after.map_or(1, |a| a.saturating_add(1));
        while id < end {
            let t = id / rpp;
            let cached = self.cache.holds_table_page(t);
            if !cached && self.index_get(TABLE_OBJ, t)? == UNMAPPED {
                id = (t + 1) * rpp;
                continue;
            }
            let s = self.slot_for_key(Key::table_page(t))?;
            let page_end = ((t + 1) * rpp).min(end);
            while id < page_end {
                if self.record_in(s, id)?.is_some() {
                    return Ok(Some(id));
                }
                id += 1;
            }
        }
        Ok(None)
    }
}

/// Iterator over live object ids, ascending ([`Oftl::objects`]). Yields an error (and
/// then stops) if an object-table page cannot be read.
pub struct ObjectIds<
    'a,
    F: NandFlash,
    P: SpacePolicy,
    const PAGE: usize,
    const BLOCKS: usize,
    const CACHE: usize,
    const WBUF: usize,
    const META: usize,
    const LOG: usize,
> {
    fs: &'a mut Oftl<F, PAGE, BLOCKS, CACHE, WBUF, P, META, LOG>,
    last: Option<ObjectId>,
    done: bool,
}

impl<
        F: NandFlash,
        P: SpacePolicy,
        const PAGE: usize,
        const BLOCKS: usize,
        const CACHE: usize,
        const WBUF: usize,
        const META: usize,
        const LOG: usize,
    > Iterator for ObjectIds<'_, F, P, PAGE, BLOCKS, CACHE, WBUF, META, LOG>
{
    type Item = Result<ObjectId, ReadError<F::Error>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.fs.next_object(self.last) {
            Ok(Some(id)) => {
                self.last = Some(id);
                Some(Ok(id))
            }
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl<
        F: NandFlash,
        P: SpacePolicy,
        const PAGE: usize,
        const BLOCKS: usize,
        const CACHE: usize,
        const WBUF: usize,
        const META: usize,
        const LOG: usize,
    > Oftl<F, PAGE, BLOCKS, CACHE, WBUF, P, META, LOG>
{
    /// Live object ids, ascending, read from the object table through the cache (see
    /// [`Oftl::next_object`]).
    pub fn objects(&mut self) -> ObjectIds<'_, F, P, PAGE, BLOCKS, CACHE, WBUF, META, LOG> {
        ObjectIds {
            fs: self,
            last: None,
            done: false,
        }
    }
}
