//! Full-scan rebuild (feature `alloc`): the store's tables made again from the pages'
//! backpointers alone, for a store whose superblock copy is readable but whose
//! checkpoints, index pages or object-table pages are not (DESIGN 7.5).
//!
//! The object layer persists its indexes lazily because every page names its owner,
//! its place and its write-head sequence number; this is the mount that relies on
//! nothing else. It runs in three steps, one function each:
//!
//! 1. **Scan** ([`Oftl::rebuild_scan`]): every page of every good block outside the
//!    superblock and checkpoint blocks, by its backpointer (spare-area reads); pages
//!    that hold log sectors, or do not read, are read whole and their sectors parsed.
//!    Index, object-table and checkpoint pages are ignored: they are what is rebuilt.
//! 2. **Decide** ([`Oftl::rebuild_decide`], RAM only): the data head's pages after its
//!    newest commit page are an unfinished transaction and are dropped (as recovery
//!    drops them). Each object's newest metadata page that reads says whether it lives
//!    and what it is; a live object's surviving metadata and data pages (cold copies at
//!    their watermarks) are then applied in the order the store wrote them, with
//!    recovery's rules (a metadata page truncates to its size, a data page maps its
//!    logical page and extends the size). A log stream keeps, per logical page at or
//!    above its trim point, the physical page with the newest whole group.
//! 3. **Install** ([`Oftl::rebuild_install`]): blocks holding a chosen page become
//!    full, every other scanned block free (erased before reuse, as always); the heads
//!    move past every number seen; the records and indexes are written through the
//!    cache; a checkpoint under a number above every one on flash commits the result.
//!
//! What the scan cannot know, and the result therefore may show (all documented for
//! the user in DESIGN 7.5 and reported where it can be):
//!
//! - An object deleted long ago whose tombstone was collected comes back, unnamed by
//!   any directory, unless its id was reused: then its surviving pages come before the
//!   new object's creation (a metadata page of size 0) and are dropped by it, except
//!   where the new object's own metadata page was collected too, and its holes may show
//!   them (as for a truncate whose metadata page was collected, below).
//! - A truncate whose metadata page was collected is unknown: a file later extended
//!   past the old end with a hole may show the old bytes in the hole.
//! - A transaction a crash cut, when a later recovery relocated its last block but not
//!   its earlier ones, looks like a committed one whose commit page was collected: its
//!   surviving pages are applied.
//! - Erase counts start again from zero.
//!
//! Power loss: nothing the scan chooses is erased or programmed; the rebuild writes
//! index pages to blocks it found holding nothing chosen, then the checkpoint. A cut
//! leaves the chosen pages as they were: rebuild again.

extern crate alloc;

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::cmp::Ordering;

use nand_hal::{BlockAddr, NandFlash, PageAddr};

use crate::errors::{Fault, MountError};
use crate::format::backpointer::{Backpointer, PageKind};
use crate::format::checkpoint::HEADS;
use crate::format::checkpoint::{CkptHeader, HEADER_LEN};
use crate::format::logsector::sector_at;
use crate::format::meta::MetaRecord;
use crate::format::superblock::{Superblock, MAX_CKPT_BLOCKS, MIN_CKPT_BLOCKS, SB_LEN, SB_SEARCH};
use crate::format::table::ObjRecord;
use crate::io::{FaultOf, Scan, NO_PAGE};
use crate::log::LOG_HEAD;
use crate::mount::seq_cmp;
use crate::policy::SpacePolicy;
use crate::recovery::SalvageReport;
use crate::{gc::COLD_HEAD, ObjKind, Oftl, DATA_HEAD, INDEX_HEAD, MAX_WINDOW};

/// Ids skipped past the largest one a rebuild sees (see `rebuild_decide`).
const ID_MARGIN: u32 = 4096;

/// When a data-head page or cold copy took effect: the data head's sequence number
/// (a cold copy's watermark), a copy before the original numbered the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Order {
    seq: u32,
    original: bool,
}

impl Order {
    fn of(bp: &Backpointer) -> Self {
        Order {
            seq: bp.seq,
            original: !bp.relocated,
        }
    }

    fn cmp(&self, o: &Order) -> Ordering {
        seq_cmp(self.seq, o.seq).then(self.original.cmp(&o.original))
    }
}

/// A data or metadata page found by the scan.
#[derive(Clone, Copy, Debug)]
struct Found {
    page: PageAddr,
    bp: Backpointer,
}

/// A log page found by the scan: its stream, 24-bit logical page, newest sector
/// number and the slots of its whole groups.
#[derive(Clone, Copy, Debug)]
struct LogPage {
    page: PageAddr,
    lpn: u32,
    newest: u32,
    slots: u32,
}

/// What the scan saw.
#[derive(Default)]
struct Scanned {
    pages: Vec<Found>,
    logs: BTreeMap<u32, Vec<LogPage>>,
    /// Newest number seen per head (any kind that head writes).
    newest: [Option<u32>; HEADS],
    /// Pages that did not read (neither a backpointer nor whole log groups).
    unreadable: Vec<PageAddr>,
    /// A page that did not read is not a torn tail: whatever it held is lost, and its
    /// owner cannot be known.
    lost: bool,
    /// The blocks that hold such pages.
    evidence: Vec<BlockAddr>,
    pages_scanned: u32,
}

/// A live object as the rebuild leaves it.
struct Rebuilt {
    rec: ObjRecord,
    /// Logical page (log streams: index slot) to data page.
    map: BTreeMap<u32, PageAddr>,
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
    /// [`Damaged::Rebuild`](crate::Damaged::Rebuild), from [`Oftl::mount_damaged`].
    pub(crate) fn mount_rebuild(
        &mut self,
        lost_meta_attrs: [u8; crate::ATTR_LEN],
    ) -> Result<(), MountError<F::Error>> {
        let r = self.rebuild_inner(lost_meta_attrs);
        self.dev.set_recovering(false);
        self.session.ended(r.is_ok());
        r
    }

    fn rebuild_inner(
        &mut self,
        lost_meta_attrs: [u8; crate::ATTR_LEN],
    ) -> Result<(), MountError<F::Error>> {
        let sb = match self.checked_superblock() {
            Ok(sb) => sb,
            // Copies that are there but do not read: made again from the device.
            Err(MountError::Corrupted) => self.rebuild_superblock().map_err(MountError::from)?,
            Err(e) => return Err(e),
        };
        self.reset_state(sb);
        self.session.opened();
        self.salvaged = SalvageReport::new();
        self.salvaged.rebuilt = true;
        let sc = self.rebuild_scan().map_err(MountError::from)?;
        let objects = self.rebuild_decide(&sc).map_err(MountError::from)?;
        self.rebuild_install(&sc, objects, lost_meta_attrs)
            .map_err(MountError::from)?;
        self.check_health();
        self.settle_ids_after_mount();
        Ok(())
    }

    /// Writes the superblock again when no copy reads (both programmed once, at
    /// format): the geometry and capabilities are the device's; the copies' blocks are
    /// the good blocks among the first [`SB_SEARCH`] whose page 0 holds something that
    /// is not a page tag and whose other pages are erased (a superblock block holds
    /// nothing else); the checkpoint blocks are the blocks holding checkpoint or marker
    /// pages (with the next erased good blocks if fewer than four do); the window size
    /// is the newest readable checkpoint's. The format id goes back to the default and
    /// log pages take the part's partial programs (both only steer later writes).
    /// Refuses (`Corrupted`) a device where these are not found unambiguously.
    fn rebuild_superblock(&mut self) -> Result<Superblock, FaultOf<F>> {
        let geo = self.dev.flash_mut().geometry();
        let caps = *self.dev.flash_mut().capabilities();
        let ppb = geo.pages_per_block();
        let meta_unit = Superblock::meta_unit_for(&caps, geo.page_size(), META)
            .map_err(|_| Fault::Corrupted)?;
        let describe = |w: u16, sbb: [BlockAddr; 2], cb: &[BlockAddr]| {
            Superblock::describe(
                &geo,
                &caps,
                w,
                crate::Config::default().format_id,
                sbb,
                cb,
                true,
                meta_unit,
            )
        };
        self.reset_state(describe(
            MAX_WINDOW as u16,
            [BlockAddr(0); 2],
            &[BlockAddr(0); MIN_CKPT_BLOCKS],
        ));
        let mut sb_blocks: heapless::Vec<BlockAddr, 2> = heapless::Vec::new();
        let mut ckpt: heapless::Vec<BlockAddr, MAX_CKPT_BLOCKS> = heapless::Vec::new();
        let mut erased: heapless::Vec<BlockAddr, MAX_CKPT_BLOCKS> = heapless::Vec::new();
        // Newest checkpoint page 0: (seq, page).
        let mut newest_first: Option<(u32, PageAddr)> = None;
        for b in (0..geo.blocks()).map(BlockAddr) {
            if self.dev.flash_mut().is_bad(b).map_err(Fault::Flash)? {
                continue;
            }
            let mut used = 0u32;
            let mut first = Scan::Erased;
            let mut holds_ckpt = false;
            for i in 0..ppb {
                let page = geo.page(b, i);
                let sc = self.dev.scan_read(page)?;
                if i == 0 {
                    first = sc;
                }
                match sc {
                    Scan::Erased => continue,
                    Scan::Bp(bp) if matches!(bp.kind, PageKind::Checkpoint | PageKind::Marker) => {
                        holds_ckpt = true;
                        if bp.kind == PageKind::Checkpoint
                            && bp.lpn == 0
                            && newest_first.is_none_or(|(s, _)| seq_cmp(bp.seq, s).is_gt())
                        {
                            newest_first = Some((bp.seq, page));
                        }
                    }
                    _ => {}
                }
                used += 1;
            }
            if b.0 < SB_SEARCH && first == Scan::Garbage && used == 1 && !sb_blocks.is_full() {
                let _ = sb_blocks.push(b);
            } else if holds_ckpt {
                ckpt.push(b).map_err(|_| Fault::Corrupted)?;
            } else if used == 0 && sb_blocks.is_full() && !erased.is_full() {
                let _ = erased.push(b);
            }
        }
        if sb_blocks.len() != 2 || ckpt.is_empty() {
            return Err(Fault::Corrupted);
        }
        // As many checkpoint blocks as hold checkpoints, and at least as many as a
        // default format picks (erased blocks: checkpoint blocks not used yet, or any).
        let want = crate::Config::default().checkpoint_blocks_for(geo.blocks());
        for &b in erased.iter() {
            if ckpt.len() >= want {
                break;
            }
            let _ = ckpt.push(b);
        }
        if ckpt.len() < MIN_CKPT_BLOCKS {
            return Err(Fault::Corrupted);
        }
        let ckpt_blocks = ckpt.as_slice();
        let sbb = [sb_blocks[0], sb_blocks[1]];
        // Without a readable checkpoint, the smallest window the format allows (a
        // window size only steers later allocation).
        let mut window = 0u16;
        if let Some((seq, page)) = newest_first {
            let payload = self.dev.payload() as usize;
            let owner = seq & crate::format::backpointer::MAX_U24;
            if self
                .dev
                .read_payload(
                    page,
                    0,
                    &mut self.scratch.page_mut()[..payload],
                    Some((PageKind::Checkpoint, owner, 0)),
                )
                .is_ok()
            {
                if let Ok(h) = CkptHeader::parse(&self.scratch.page()[..HEADER_LEN]) {
                    window = h.window_len;
                }
            }
        }
        let window = window
            .max(Self::min_window_blocks(ppb).min(MAX_WINDOW as u32) as u16)
            .min(MAX_WINDOW as u16);
        let sb = describe(window, sbb, ckpt_blocks);
        // Each copy: its block erased (it held only the copy that no longer reads),
        // then page 0's first unit.
        let pu = self.dev.pu();
        let len = SB_LEN.div_ceil(pu) * pu;
        for b in sbb {
            self.dev.flash_mut().erase(b).map_err(Fault::Flash)?;
            self.scratch.page_mut().fill(0xFF);
            self.scratch.page_mut()[..SB_LEN].copy_from_slice(&sb.encode());
            self.dev
                .flash_mut()
                .program(geo.page(b, 0), 0, &self.scratch.page()[..len], &[])
                .map_err(Fault::Flash)?;
        }
        warn!(
            "oftl: superblock written again (blocks {} and {})",
            sbb[0].0, sbb[1].0
        );
        Ok(sb)
    }

    /// Step 1: every page's backpointer (see the module docs).
    fn rebuild_scan(&mut self) -> Result<Scanned, FaultOf<F>> {
        let geo = self.dev.geo();
        let ppb = self.dev.ppb();
        let pu = self.dev.pu();
        let mut sc = Scanned::default();
        let fixed: heapless::Vec<BlockAddr, { 2 + MAX_CKPT_BLOCKS }> = {
            let sb = &self.dev.sb();
            sb.sb_blocks
                .iter()
                .chain(sb.ckpt_blocks().iter())
                .copied()
                .collect()
        };
        let mut ckpt_newest: Option<u32> = None;
        for b in (0..geo.blocks()).map(BlockAddr) {
            if self.dev.check_marker(b).map_err(Fault::Flash)? {
                continue;
            }
            let reserved = fixed.contains(&b);
            // Whether a page of the block did not read (its owner cannot be known).
            let mut garbage_at: Option<u32> = None;
            // A block holds one head's pages between erases: unreadable pages among
            // index and object-table pages only are such pages (rebuilt anyway).
            let mut index_only = true;
            let mut used_index = false;
            if reserved {
                self.dev.table_mut().reserved(b);
            }
            for i in 0..ppb {
                let page = geo.page(b, i);
                sc.pages_scanned += 1;
                let bp = match self.dev.scan_read(page)? {
                    Scan::Erased => continue,
                    Scan::Bp(bp) => Some(bp),
                    Scan::Garbage => None,
                };
                if reserved {
                    // Checkpoint and marker numbers: the new checkpoint goes above them.
                    if let Some(bp) = bp {
                        if matches!(bp.kind, PageKind::Checkpoint | PageKind::Marker) {
                            ckpt_newest = Some(newest(ckpt_newest, bp.seq));
                        }
                    }
                    continue;
                }
                match bp {
                    Some(bp) if matches!(bp.kind, PageKind::Data | PageKind::Meta) => {
                        index_only = false;
                        let h = if bp.relocated { COLD_HEAD } else { DATA_HEAD };
                        sc.newest[h] = Some(newest(sc.newest[h], bp.seq));
                        if bp.relocated {
                            // A watermark is a data-head number.
                            sc.newest[DATA_HEAD] = Some(newest(sc.newest[DATA_HEAD], bp.seq));
                        }
                        sc.pages.push(Found { page, bp });
                    }
                    Some(bp) if matches!(bp.kind, PageKind::Index | PageKind::Table) => {
                        used_index = true;
                        sc.newest[INDEX_HEAD] = Some(newest(sc.newest[INDEX_HEAD], bp.seq));
                    }
                    Some(bp) if matches!(bp.kind, PageKind::Checkpoint | PageKind::Marker) => {}
                    // A log page, or a page that does not read: read whole, sector by
                    // sector (a log page with one torn step reads so).
                    _ => {
                        let mask = self.read_log_page(page)?;
                        let mut first: Option<(u32, u32)> = None;
                        let mut newest_seq: Option<u32> = None;
                        let mut slots = 0u32;
                        for s in 0..32 {
                            if mask & (1 << s) == 0 {
                                continue;
                            }
                            let Some(t) = sector_at(self.scratch.page(), pu, s) else {
                                continue;
                            };
                            sc.newest[LOG_HEAD] = Some(newest(sc.newest[LOG_HEAD], t.seq));
                            let who = *first.get_or_insert((t.stream, t.lpage));
                            if who != (t.stream, t.lpage) {
                                continue;
                            }
                            newest_seq = Some(newest(newest_seq, t.seq));
                            slots |= 1 << s;
                        }
                        match (first, newest_seq) {
                            (Some((stream, lpn)), Some(n)) => {
                                index_only = false;
                                sc.logs.entry(stream).or_default().push(LogPage {
                                    page,
                                    lpn,
                                    newest: n,
                                    slots,
                                });
                            }
                            _ => {
                                sc.unreadable.push(page);
                                garbage_at = Some(i);
                            }
                        }
                    }
                }
            }
            // Without the checkpoints a torn tail (the program a cut interrupted) and a
            // lost acknowledged page (the newest of its head, say) look the same: any
            // unreadable page outside an index block counts as lost.
            if garbage_at.is_some() && !(index_only && used_index) {
                sc.lost = true;
                sc.evidence.push(b);
            }
        }
        // Numbers above every checkpoint and marker seen, and above any a page that
        // did not read may carry.
        self.ckpt.rebuilt(
            ckpt_newest
                .unwrap_or(0)
                .wrapping_add(MAX_CKPT_BLOCKS as u32 * ppb),
        );
        self.dev.stats_mut().recovery_scanned_pages = sc.pages_scanned;
        Ok(sc)
    }

    /// Step 2: the objects the pages describe (see the module docs).
    fn rebuild_decide(&mut self, sc: &Scanned) -> Result<Vec<Rebuilt>, FaultOf<F>> {
        let payload = self.dev.payload() as u64;
        // The data head's newest commit page: anything numbered after it is the
        // transaction a cut left unfinished.
        let last_commit = sc
            .pages
            .iter()
            .filter(|f| !f.bp.relocated && f.bp.commit)
            .map(|f| f.bp.seq)
            .reduce(|a, b| newest(Some(a), b));
        // The newest log number in each block holding log pages (see `rebuild_stream`).
        let mut block_newest: BTreeMap<u32, u32> = BTreeMap::new();
        for lp in sc.logs.values().flatten() {
            let b = self.dev.block_of(lp.page).0;
            let n = block_newest.get(&b).copied();
            block_newest.insert(b, newest(n, lp.newest));
        }
        let mut per_obj: BTreeMap<u32, Vec<Found>> = BTreeMap::new();
        for f in sc.pages.iter() {
            let tail =
                !f.bp.relocated && last_commit.is_none_or(|lc| seq_cmp(f.bp.seq, lc).is_gt());
            if !tail {
                per_obj.entry(f.bp.owner).or_default().push(*f);
            } else if !sc.unreadable.is_empty() {
                // The commit page that would have closed them may be one that did not
                // read: they may have been acknowledged.
                self.salvaged.left_out(f.bp.owner);
            }
        }
        let mut next_id = 1u32;
        let mut out = Vec::new();
        let ids: Vec<u32> = per_obj
            .keys()
            .copied()
            .chain(sc.logs.keys().copied())
            .collect();
        for &id in ids.iter() {
            next_id = next_id.max(id.saturating_add(1));
        }
        for (&id, found) in per_obj.iter_mut() {
            found.sort_by(|a, b| Order::of(&a.bp).cmp(&Order::of(&b.bp)));
            // The newest metadata record that reads says what the object is.
            // A record that does not read puts the object in doubt only when it is
            // newer than every one that does (an older one is history: a stale copy
            // in a block being erased, say).
            let mut records: Vec<(Order, PageAddr, MetaRecord)> = Vec::new();
            let mut unread: Option<(Order, PageAddr)> = None;
            for f in found.iter().filter(|f| f.bp.kind == PageKind::Meta) {
                match self.dev.read_meta(f.page, self.scratch.page_mut()) {
                    Ok(rec) if rec.id == id => {
                        records.push((Order::of(&f.bp), f.page, rec));
                        unread = None;
                    }
                    Ok(_) | Err(Fault::Corrupted) => unread = Some((Order::of(&f.bp), f.page)),
                    Err(Fault::Flash(e))
                        if nand_hal::Error::kind(&e) == nand_hal::ErrorKind::Uncorrectable =>
                    {
                        unread = Some((Order::of(&f.bp), f.page))
                    }
                    Err(e) => return Err(e),
                }
            }
            if let Some((_, page)) = unread {
                self.rebuild_doubt(id, page);
            }
            let Some(&(_, meta_page, newest_rec)) = records.last() else {
                // Pages without a readable metadata record: a live object always has
                // one, so these are an object deleted long ago (its tombstone
                // collected), unless its metadata page is one that did not read. Then
                // its data pages come back under a new metadata page (with the
                // caller's attributes), named, for the layer above to judge.
                let meta_lost = unread.is_some() || !sc.unreadable.is_empty();
                let has_data = found.iter().any(|f| f.bp.kind == PageKind::Data);
                if meta_lost && has_data {
                    self.salvaged.left_out(id);
                    let mut size = 0u64;
                    let mut map: BTreeMap<u32, PageAddr> = BTreeMap::new();
                    for f in found.iter().filter(|f| f.bp.kind == PageKind::Data) {
                        map.insert(f.bp.lpn, f.page);
                        size = size.max(f.bp.lpn as u64 * payload + f.bp.len as u64);
                    }
                    out.push(Rebuilt {
                        rec: ObjRecord::new(id, ObjKind::Object, size, NO_PAGE, 0),
                        map,
                    });
                } else if meta_lost {
                    self.salvaged.left_out(id);
                }
                continue;
            };
            if newest_rec.deleted {
                continue;
            }
            match newest_rec.kind {
                ObjKind::Object => {
                    let mut size = 0u64;
                    let mut map: BTreeMap<u32, PageAddr> = BTreeMap::new();
                    let mut meta = records.iter().peekable();
                    for f in found.iter() {
                        match f.bp.kind {
                            PageKind::Data => {
                                map.insert(f.bp.lpn, f.page);
                                size = size.max(f.bp.lpn as u64 * payload + f.bp.len as u64);
                            }
                            PageKind::Meta => {
                                // The readable records, in the same order as `found`.
                                let Some(&&(_, page, rec)) = meta.peek() else {
                                    continue;
                                };
                                if page != f.page {
                                    continue;
                                }
                                meta.next();
                                if rec.size < size {
                                    let keep = rec.size.div_ceil(payload) as u32;
                                    map.retain(|&lpn, _| lpn < keep);
                                }
                                size = rec.size;
                            }
                            _ => {}
                        }
                    }
                    // A page missing below the size: a hole written so, or a page
                    // whose tag did not read (its bytes would read as zeros).
                    let pages = size.div_ceil(payload).min(u32::MAX as u64) as u32;
                    if !sc.unreadable.is_empty() && (0..pages).any(|l| !map.contains_key(&l)) {
                        self.salvaged.left_out(id);
                    }
                    out.push(Rebuilt {
                        rec: ObjRecord::new(id, ObjKind::Object, size, meta_page, 0),
                        map,
                    });
                }
                ObjKind::Log => {
                    let trim = newest_rec.size;
                    let (stream, gaps) =
                        self.rebuild_stream(id, meta_page, trim, sc.logs.get(&id), &block_newest);
                    if gaps && !sc.unreadable.is_empty() {
                        self.salvaged.left_out(id);
                    }
                    out.push(stream);
                }
            }
        }
        for &id in sc.logs.keys() {
            if !per_obj.contains_key(&id) && !sc.unreadable.is_empty() {
                // Log pages of a stream with no metadata page left (see above).
                self.salvaged.left_out(id);
            }
        }
        for &p in sc.unreadable.iter() {
            self.salvaged.unreadable(p);
        }
        if sc.lost {
            // Its object may read an older copy of it, or zeros: unknowable which.
            self.salvaged.left_out_unnamed();
        }
        // The newest ids may have left no page behind (their objects deleted and
        // collected), so new ones start well past those seen (and wrap from the
        // table's bound, as any store's do).
        self.ids.start_at(
            next_id
                .saturating_add(ID_MARGIN)
                .min(self.max_object_id().saturating_add(1))
                .max(next_id),
        );
        Ok(out)
    }

    /// A log stream's pages: per logical page at or above the trim point, the one
    /// with the newest whole group (the one with more whole groups on a tie, then the
    /// one programmed later: a failed program and its retry carry the same numbers, and
    /// the retry is the later page of the same block, or in a block that went on to
    /// newer numbers; an independent review found a rebuild keeping a failed copy that
    /// did not read); the end is one past the last sector seen. Also
    /// whether a logical page between the trim point and the end has no page.
    fn rebuild_stream(
        &self,
        id: u32,
        meta: PageAddr,
        trim: u64,
        pages: Option<&Vec<LogPage>>,
        block_newest: &BTreeMap<u32, u32>,
    ) -> (Rebuilt, bool) {
        // Whether `a` was programmed after `b` (same numbers): later in the same block,
        // or in a block that went on to newer numbers.
        let later_block = |a: &LogPage, b: &LogPage| {
            let (ba, bb) = (self.dev.block_of(a.page), self.dev.block_of(b.page));
            if ba == bb {
                return a.page.0 > b.page.0;
            }
            match (block_newest.get(&ba.0), block_newest.get(&bb.0)) {
                (Some(x), Some(y)) => seq_cmp(*x, *y).is_gt(),
                _ => false,
            }
        };
        let spp = self.sectors_per_page() as u64;
        let mut best: BTreeMap<u64, LogPage> = BTreeMap::new();
        let mut end = trim;
        for lp in pages.into_iter().flatten() {
            let lpage = self.log_lpage(lp.lpn, trim);
            let top = 31 - lp.slots.leading_zeros() as u64;
            if (lpage + 1) * spp <= trim {
                continue;
            }
            end = end.max(lpage * spp + top + 1);
            let keep = match best.get(&lpage) {
                None => true,
                Some(b) => match seq_cmp(lp.newest, b.newest) {
                    Ordering::Greater => true,
                    Ordering::Equal => match lp.slots.count_ones().cmp(&b.slots.count_ones()) {
                        Ordering::Equal => later_block(lp, b),
                        o => o.is_gt(),
                    },
                    Ordering::Less => false,
                },
            };
            if keep {
                best.insert(lpage, *lp);
            }
        }
        let gaps = end > trim && (trim / spp..=(end - 1) / spp).any(|p| !best.contains_key(&p));
        let map = best
            .iter()
            .map(|(&lpage, lp)| (self.log_slot(lpage), lp.page))
            .collect();
        let stream = Rebuilt {
            rec: ObjRecord::new(id, ObjKind::Log, end, meta, trim),
            map,
        };
        (stream, gaps)
    }

    fn rebuild_doubt(&mut self, id: u32, page: PageAddr) {
        self.salvaged.unreadable(page);
        self.salvaged.left_out(id);
    }

    /// Step 3: the decided state made the store's (see the module docs).
    fn rebuild_install(
        &mut self,
        sc: &Scanned,
        objects: Vec<Rebuilt>,
        lost_meta_attrs: [u8; crate::ATTR_LEN],
    ) -> Result<(), FaultOf<F>> {
        let ppb = self.dev.ppb();
        let spp = self.sectors_per_page();
        let mut holds = alloc::vec![false; self.dev.geo().blocks() as usize];
        // A block with a lost page (one that did not read, outside an index block) is
        // kept from reuse until the checkpoint commits (then it is free): a cut before
        // that leaves the next rebuild the same evidence, so it names the same objects.
        for &b in sc.evidence.iter() {
            holds[b.0 as usize] = true;
        }
        for o in objects.iter() {
            if o.rec.meta != NO_PAGE {
                holds[self.dev.block_of(o.rec.meta).0 as usize] = true;
            }
            for &p in o.map.values() {
                holds[self.dev.block_of(p).0 as usize] = true;
            }
        }
        // Erase counts are not on the pages: they start again.
        for (b, &h) in holds.iter().enumerate() {
            self.dev.table_mut().rebuilt(BlockAddr(b as u32), h);
        }
        self.dev.table_mut().begin_load();
        // Past every number seen, and past any an unreadable page or an interrupted
        // earlier attempt may carry (as recovery skips them).
        let skip = (MAX_WINDOW as u32 + self.recovery_extra_blocks() + 1) * ppb;
        for (h, per) in [(DATA_HEAD, 1), (LOG_HEAD, spp), (INDEX_HEAD, 1)] {
            let next = sc.newest[h].map_or(0, |n| n.wrapping_add(1));
            self.dev
                .heads_mut()
                .number_from(h, next.wrapping_add(skip.saturating_mul(per)));
        }
        let data = self.dev.heads().next_seq(DATA_HEAD);
        self.dev.heads_mut().number_from(COLD_HEAD, data);
        self.dev.set_recovering(true);
        // Recovery's writes go to a window of blocks found holding nothing chosen.
        self.dev.grow_window(self.dev.sb().window_blocks as usize);
        if self.dev.table().window().is_empty() {
            return Err(Fault::NoSpace);
        }
        for o in objects.iter().filter(|o| o.rec.meta != NO_PAGE) {
            self.obj_insert(&o.rec)?;
            self.dev.mark_valid(o.rec.meta);
            for (&lpn, &page) in o.map.iter() {
                self.index_set(o.rec.id, lpn, page)?;
            }
        }
        // Objects whose metadata page was lost get a new one before their pages are
        // mapped (a cut before the checkpoint leaves it for the next rebuild to find:
        // the newest metadata page of its object).
        for o in objects.iter().filter(|o| o.rec.meta == NO_PAGE) {
            let rec = MetaRecord {
                id: o.rec.id,
                kind: ObjKind::Object,
                deleted: false,
                size: o.rec.size,
                attrs: lost_meta_attrs,
            };
            self.write_meta(&rec, None)?;
            for (&lpn, &page) in o.map.iter() {
                self.index_set(o.rec.id, lpn, page)?;
            }
        }
        self.checkpoint(false)?;
        self.dev.set_recovering(false);
        Ok(())
    }
}

fn newest(a: Option<u32>, b: u32) -> u32 {
    match a {
        Some(a) if seq_cmp(a, b).is_gt() => a,
        _ => b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::backpointer::{Backpointer, PageKind};

    fn at(seq: u32, relocated: bool) -> Order {
        let mut bp = Backpointer::single(PageKind::Data, 1, 0, 0);
        bp.seq = seq;
        bp.relocated = relocated;
        Order::of(&bp)
    }

    /// A cold copy stamped with watermark `w` took effect after every data-head page
    /// numbered below `w` and before the one numbered `w` (SPEC 3.8 rule 5).
    #[test]
    fn copies_sort_before_the_original_with_their_watermark() {
        assert_eq!(at(10, true).cmp(&at(10, false)), Ordering::Less);
        assert_eq!(at(10, true).cmp(&at(9, false)), Ordering::Greater);
        assert_eq!(at(11, false).cmp(&at(10, true)), Ordering::Greater);
        assert_eq!(at(1, false).cmp(&at(u32::MAX, false)), Ordering::Greater);
    }

    #[test]
    fn newest_is_serial() {
        assert_eq!(newest(None, 4), 4);
        assert_eq!(newest(Some(9), 4), 9);
        assert_eq!(newest(Some(u32::MAX), 2), 2);
    }
}
