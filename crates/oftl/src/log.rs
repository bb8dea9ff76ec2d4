//! Log streams: append-only records, durable one sector at a time, read back in order
//! after a crash, trimmed from the head.
//!
//! A log stream is an object of kind [`ObjKind::Log`]. Its pages come from their own
//! write head (head 1), apart from object data. Each page belongs to one logical page of
//! one stream and holds up to `sectors_per_page` self-describing sectors (program
//! units; [`crate::format::logsector`]): payload, CRC, and an in-band trailer with the
//! sector's own sequence number, its place in its record and in its group.
//!
//! # Appends
//!
//! An append ([`Oftl::log_append`], or [`Oftl::log_append_batch`] for several records
//! under one commit) programs only the sectors its records need, as one **group**: one
//! program operation, all-or-nothing on recovery. The next append to the same stream
//! **continues the same page** with another partial program, up to the superblock's
//! `log_programs` (the part's NOP, or 1 in the NOP = 1 mode), then the next page. A
//! 64-byte append + sync on a 2 KiB-page part therefore costs one 512-byte sector, not a
//! page. Continuing is safe because of the HAL contract: a torn or failed program harms
//! only the steps it was programming, each sector's header is in its own step, and reads
//! go through [`nand_hal::NandFlash::read_steps`] so a failed step on a part with a
//! page-wide ECC status does not hide the good ones.
//!
//! The page being continued (the **open page**) must be the log head's last programmed
//! page, and is given up at every checkpoint (recovery scans the heads' carried blocks
//! only from their recorded positions) and after any crash: recovery copies the sectors
//! of the page that was in flight to a fresh page before anything is appended after
//! them, so the stream never appends after a doubtful tail. Its image as programmed is
//! kept by the [`LogTail`] that tracks it, so the retry of a failed partial program needs no read: it copies the
//! page's sectors and the new records to a fresh page, as one group with the
//! sequence numbers the failed program had (recovery then sees the failed copy repeated
//! and drops that page whole, see `recovery`).
//!
//! # Sequence numbers and copies
//!
//! Record positions (LSNs) are `logical page * sectors_per_page + slot`: strictly
//! increasing, not dense (a record that does not fit the open page starts the next
//! logical page). A copy of a page (collection, recovery, a retry) keeps every sector's
//! slot, so LSNs never change, and gets new sequence numbers as one group. The index
//! maps a logical page to exactly one physical page: replay applies groups in sequence
//! order and each remaps its logical page, so **the copy with the highest sequence
//! number is the one kept**; the others are unreferenced and collected.
//!
//! The stream's end LSN is its size in the object table; its trim point is persisted in
//! its metadata page (the size field of a log's metadata page is the trim point).
//!
//! Recovery applies log groups as its scan finds them, in sequence order, whole groups
//! only, to the streams the checkpoint knows (a trim or delete replayed later unmaps
//! what lies below its point); when a group belongs to a stream created after the
//! checkpoint, every group is applied again once the metadata has been replayed.

use nand_hal::{Error, ErrorKind, NandFlash, PageAddr};

use crate::errors::{Fault, ReadError, WriteError};
use crate::format::backpointer::MAX_U24;
use crate::format::checkpoint::ObjKind;
use crate::format::index::UNMAPPED;
use crate::format::logsector::{blank, complete_slots, sector_at, LogSector};
use crate::format::table::ObjRecord;
use crate::io::{FailRun, FaultOf};
use crate::policy::SpacePolicy;
use crate::space::Room;
use crate::{ObjectId, Oftl};

/// Write head of log-stream pages.
pub(crate) const LOG_HEAD: usize = 1;

/// Zero bits a never-programmed sector may show and still read as blank, whatever the
/// part's ECC strength: an erase can leave a step with a bit or two flipped (fault F5,
/// `UBI_IO_FF_BITFLIPS`), which on-die ECC reports as nothing and delivers as it is.
/// With the part's strength alone (1 on the W25N01GV) two such bits in a log page's
/// unwritten sector below the stream's end read as a lost record, and the volume no
/// longer mounted (an independent review, `stagefs-core/tests/review_s40.rs`). A
/// programmed sector shows far more: its CRC and trailer alone carry about 40 zero
/// bits, so only a program a cut stopped at once can pass for blank, and it is the
/// tail either way.
const ERASED_FLIPS: u32 = 8;

/// A record read back from a log stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LogRecord {
    /// The record's sequence number.
    pub lsn: u64,
    /// Its length in bytes (copied to the start of the caller's buffer).
    pub len: usize,
    /// Where to continue reading.
    pub next: u64,
}

enum Attempt {
    Done(PageAddr),
    Failed,
}

/// The page the next append of a stream may continue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OpenPage {
    stream: u32,
    lpage: u64,
    page: PageAddr,
    next_slot: u32,
    programs: u8,
}

/// The log head's open page (see the module docs) and its image, changed only through
/// its events. During a recovery the image holds the last log page with accepted
/// sectors instead, as the scan read it (once: it may hold unstable bits from the cut).
/// `IMG` is the image's size: the page size, or 0 in a build without log streams (no
/// page is ever open, and recovery refuses to keep a log page).
pub(crate) struct LogTail<const IMG: usize> {
    open: Option<OpenPage>,
    /// A read-only mount's last log page, as recovery read it (in `image`).
    pinned: Option<PageAddr>,
    /// The open page as programmed (or recovery's last log page as read).
    image: [u8; IMG],
}

/// The build keeps no log tail page (`IMG` 0).
pub(crate) struct NoTail;

impl<E> From<NoTail> for Fault<E> {
    fn from(_: NoTail) -> Self {
        Fault::NoLogStreams
    }
}

impl<const IMG: usize> LogTail<IMG> {
    /// No open page.
    pub(crate) const CLOSED: Self = LogTail {
        open: None,
        pinned: None,
        image: [0xFF; IMG],
    };

    /// Whether this build keeps a log tail page (else it has no log streams).
    pub(crate) const KEPT: bool = IMG > 0;

    /// The open page as programmed, or what recovery read of its last log page.
    pub(crate) fn image(&self) -> &[u8] {
        &self.image
    }

    /// Recovery read its last log page with accepted sectors into `page`: kept as
    /// read, so every later use sees the same bytes. Refused without a tail page.
    pub(crate) fn keep_read(&mut self, page: &[u8]) -> Result<(), NoTail> {
        if page.len() != IMG {
            return Err(NoTail);
        }
        self.image.copy_from_slice(page);
        Ok(())
    }

    /// Nothing may be appended to the open page any more (a checkpoint, a crash, the
    /// page copied away).
    pub(crate) fn close(&mut self) {
        self.open = None;
    }

    /// A mount that cannot write keeps `page` as recovery read it, in the image (the
    /// store is read-only: nothing else uses it); a new mount drops it.
    pub(crate) fn pin(&mut self, page: PageAddr) {
        self.pinned = Some(page);
    }

    /// Drops everything (a new mount or format).
    pub(crate) fn reset(&mut self) {
        self.open = None;
        self.pinned = None;
        self.image.fill(0xFF);
    }

    /// `page` of logical page `lpage` of `stream` was programmed from its first slot up
    /// to `next_slot` (a fresh page, or a copy with the new records) from `programmed`.
    /// (Without a tail page nothing is opened: the next append takes a fresh page.)
    fn opened(
        &mut self,
        stream: u32,
        lpage: u64,
        page: PageAddr,
        next_slot: u32,
        programmed: &[u8],
    ) {
        if programmed.len() != IMG {
            self.open = None;
            return;
        }
        self.image.copy_from_slice(programmed);
        self.open = Some(OpenPage {
            stream,
            lpage,
            page,
            next_slot,
            programs: 1,
        });
    }

    /// The open page took another partial program of `programmed`'s bytes `range`, up
    /// to `next_slot`.
    fn extended(&mut self, next_slot: u32, programmed: &[u8], range: core::ops::Range<usize>) {
        let (Some(dst), Some(src)) = (self.image.get_mut(range.clone()), programmed.get(range))
        else {
            self.open = None;
            return;
        };
        dst.copy_from_slice(src);
        if let Some(o) = self.open.as_mut() {
            o.next_slot = next_slot;
            o.programs = o.programs.saturating_add(1);
        }
    }

    /// The page was copied elsewhere.
    fn moved(&mut self, page: PageAddr) {
        if self.open.is_some_and(|o| o.page == page) {
            self.open = None;
        }
    }

    /// Where an append of `k` sectors to `stream` (whose end LSN is `end`) continues
    /// the open page: `(logical page, slot, page)`. `head_last` is the log head's last
    /// programmed page, `programs` the superblock's limit per page.
    fn continuation(
        &self,
        stream: u32,
        end: u64,
        k: u32,
        spp: u32,
        programs: u8,
        head_last: Option<PageAddr>,
    ) -> Option<(u64, u32, PageAddr)> {
        let o = self.open?;
        let fits = o.stream == stream
            && Some(o.page) == head_last
            && o.programs < programs
            && o.next_slot + k <= spp
            && end == o.lpage * spp as u64 + o.next_slot as u64;
        fits.then_some((o.lpage, o.next_slot, o.page))
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
    pub(crate) fn sectors_per_page(&self) -> u32 {
        self.dev.geo().page_size() / self.dev.caps().program_unit
    }

    fn sector_payload(&self) -> usize {
        LogSector::payload(self.dev.pu())
    }

    /// Largest record [`Oftl::log_append`] takes, and the most bytes of records one
    /// [`Oftl::log_append_batch`] takes (each record starts a sector).
    pub fn log_max_record(&self) -> usize {
        self.sectors_per_page() as usize * self.sector_payload()
    }

    /// Programs a log-stream page takes: the superblock's choice at format time (the
    /// part's NOP, or 1 in the NOP = 1 mode, see [`crate::Config`]), and 1 whatever it
    /// says over a driver whose step-aware read cannot deliver the good steps of a page
    /// with a failed one ([`NandFlash::delivers_good_steps`]; parts without ECC need
    /// none): there a torn partial program would hide the page's acknowledged records.
    pub fn log_programs_per_page(&self) -> u8 {
        let able = self.dev.caps().ecc.kind == nand_hal::EccKind::None
            || self.dev.flash().delivers_good_steps();
        if able {
            self.dev.sb().log_programs
        } else {
            1
        }
    }

    /// Bit errors a sector may show and still read as never programmed (see
    /// [`blank`]): the part's ECC strength, at least [`ERASED_FLIPS`].
    pub(crate) fn blank_flips(&self) -> u32 {
        (self.dev.caps().ecc.strength as u32).max(ERASED_FLIPS)
    }

    /// Positions of a log stream's index: logical page `p` lives at `p % ring`, so a
    /// stream that is trimmed as it goes runs forever. A power of two (dividing the
    /// 24-bit logical page field of the sector trailers) no larger than the index.
    pub(crate) fn log_ring(&self) -> u64 {
        let epp = self.entries_per_index() as u64;
        let n = epp * epp;
        1u64 << (63 - n.leading_zeros())
    }

    /// Where logical page `lpage` of a stream lives in its index.
    pub(crate) fn log_slot(&self, lpage: u64) -> u32 {
        (lpage % self.log_ring()) as u32
    }

    /// The full logical page a sector's 24-bit field names, for a stream whose end is
    /// `end` (LSN): the one closest to the end's page (a stream's live range and the
    /// window are far shorter than 2^23 pages).
    pub(crate) fn log_lpage(&self, stored: u32, end: u64) -> u64 {
        lpage_near(stored, end / self.sectors_per_page() as u64)
    }

    /// The size field a metadata page of object `o` carries.
    pub(crate) fn meta_size(o: &ObjRecord) -> u64 {
        match o.kind {
            ObjKind::Log => o.log_start,
            ObjKind::Object => o.size,
        }
    }

    /// Index positions object `o` may map (0 up to this).
    pub(crate) fn index_pages(&self, o: &ObjRecord) -> u32 {
        let (per, most) = match o.kind {
            ObjKind::Log => (self.sectors_per_page() as u64, self.log_ring()),
            ObjKind::Object => (self.dev.payload() as u64, u32::MAX as u64),
        };
        o.size.div_ceil(per).min(most) as u32
    }

    /// Unmaps logical pages `from..to` of log stream `stream` (their ring positions).
    pub(crate) fn log_unmap(&mut self, stream: u32, from: u64, to: u64) -> Result<(), FaultOf<F>> {
        if to <= from {
            return Ok(());
        }
        let ring = self.log_ring();
        if to - from >= ring {
            return self.unmap_from(stream, 0, ring as u32);
        }
        let (a, b) = (self.log_slot(from), self.log_slot(to));
        if a < b {
            self.unmap_from(stream, a, b)
        } else {
            self.unmap_from(stream, a, ring as u32)?;
            self.unmap_from(stream, 0, b)
        }
    }

    /// A log stream's live range: `(first LSN, end LSN)`.
    pub fn log_bounds(&mut self, stream: ObjectId) -> Result<(u64, u64), ReadError<F::Error>> {
        let r = (|| -> Result<_, FaultOf<F>> {
            self.check_usable()?;
            let o = self.obj(stream)?;
            if o.kind != ObjKind::Log {
                return Err(Fault::WrongKind);
            }
            Ok((o.log_start, o.size))
        })();
        r.map_err(|e| self.fail_read(e))
    }

    /// Appends a record (at most [`Oftl::log_max_record`] bytes) and returns its LSN.
    /// Durable on return.
    pub fn log_append(
        &mut self,
        stream: ObjectId,
        data: &[u8],
    ) -> Result<u64, WriteError<F::Error>> {
        self.log_append_batch(stream, &[data])
    }

    /// Appends several records under one commit: after a power cut either all of them
    /// are in the stream or none is. Each record starts a sector; together they take at
    /// most a page ([`Oftl::log_max_record`] payload bytes with every record rounded up
    /// to whole sectors), else [`WriteError::TooLarge`]. Returns the first record's
    /// LSN (the end LSN, appending nothing, for an empty batch). Durable on return.
    pub fn log_append_batch(
        &mut self,
        stream: ObjectId,
        records: &[&[u8]],
    ) -> Result<u64, WriteError<F::Error>> {
        self.log_append_inner(stream, records)
            .map_err(|e| self.fail(e))
    }

    fn log_append_inner(&mut self, stream: ObjectId, records: &[&[u8]]) -> Result<u64, FaultOf<F>> {
        if !LogTail::<LOG>::KEPT {
            return Err(Fault::NoLogStreams);
        }
        self.check_writable()?;
        let o = self.obj(stream)?;
        if o.kind != ObjKind::Log {
            return Err(Fault::WrongKind);
        }
        if records.is_empty() {
            return Ok(o.size);
        }
        let spp = self.sectors_per_page();
        let sp = self.sector_payload();
        let k: usize = records.iter().map(|r| r.len().div_ceil(sp).max(1)).sum();
        if k > spp as usize {
            return Err(Fault::TooLarge);
        }
        let k = k as u32;
        self.prepare_on(LOG_HEAD, 1, 1, 1, Room::Grow)?;
        let end = self.obj(stream)?.size;
        let h = self.dev.heads().get(LOG_HEAD);
        let head_last = h
            .block
            .filter(|_| h.next_page > 0)
            .map(|b| self.dev.geo().page(b, h.next_page - 1));
        let programs = self.log_programs_per_page();
        let cont = self
            .log_tail
            .continuation(stream, end, k, spp, programs, head_last);
        let (lpage, slot) = match cont {
            Some((lpage, slot, _)) => (lpage, slot),
            None => {
                let lpage = end.div_ceil(spp as u64);
                // The live range must fit the index ring (trim as you go).
                let first = self.obj(stream)?.log_start / spp as u64;
                if lpage - first.min(lpage) >= self.log_ring() {
                    return Err(Fault::TooLarge);
                }
                (lpage, 0)
            }
        };
        let lsn = lpage * spp as u64 + slot as u64;
        let pu = self.dev.pu();
        match cont {
            Some((_, _, page)) => {
                // Only the new sectors go to the open page (its failure counts in the
                // run of failures its retries continue).
                let mut run = FailRun::default();
                self.draft_records(stream, lpage, slot, records);
                let (from, to) = (slot as usize * pu, (slot + k) as usize * pu);
                if let Attempt::Done(_) =
                    self.log_program(slot, slot + k, false, Some(page), &mut run)?
                {
                    self.log_tail
                        .extended(slot + k, self.scratch.page(), from..to);
                    self.obj_update(stream, |o| o.size = lsn + k as u64)?;
                    return Ok(lsn);
                }
                // The partial program failed: its page's other sectors are intact but
                // the page is done. Copy them with the new records to a fresh page, as
                // one group (see the module docs).
                self.log_tail.close();
                self.scratch
                    .page_mut()
                    .copy_from_slice(self.log_tail.image());
                self.draft_records(stream, lpage, slot, records);
                self.program_fresh(stream, lpage, 0, slot + k, true, run)?;
            }
            None => {
                self.scratch.page_mut().fill(0xFF);
                self.draft_records(stream, lpage, slot, records);
                self.program_fresh(stream, lpage, slot, slot + k, false, FailRun::default())?;
            }
        }
        self.obj_update(stream, |o| o.size = lsn + k as u64)?;
        Ok(lsn)
    }

    /// Programs slots `from..to` of the scratch page to a fresh page of the log head (retrying
    /// on the next page after a failed program), maps `lpage` of `stream` to it and
    /// opens it for the next append.
    fn program_fresh(
        &mut self,
        stream: u32,
        lpage: u64,
        from: u32,
        to: u32,
        copy: bool,
        mut run: FailRun,
    ) -> Result<(), FaultOf<F>> {
        loop {
            if let Attempt::Done(page) = self.log_program(from, to, copy, None, &mut run)? {
                self.index_set(stream, self.log_slot(lpage), page)?;
                self.log_tail
                    .opened(stream, lpage, page, to, self.scratch.page());
                return Ok(());
            }
        }
    }

    /// Lays out `records` in the scratch page from sector `slot` on: payloads and trailers with
    /// their record positions (sequence numbers and groups are stamped by
    /// [`Oftl::log_program`]).
    fn draft_records(&mut self, stream: u32, lpage: u64, slot: u32, records: &[&[u8]]) {
        let pu = self.dev.pu();
        let sp = self.sector_payload();
        let mut s = slot as usize;
        for rec in records {
            let n = rec.len().div_ceil(sp).max(1);
            for i in 0..n {
                let chunk = &rec[(i * sp).min(rec.len())..((i + 1) * sp).min(rec.len())];
                let sector = &mut self.scratch.page_mut()[s * pu..(s + 1) * pu];
                sector.fill(0xFF);
                sector[..chunk.len()].copy_from_slice(chunk);
                LogSector {
                    seq: 0,
                    stream,
                    lpage: (lpage & MAX_U24 as u64) as u32,
                    len: chunk.len() as u16,
                    last: i + 1 == n,
                    pos: i as u8,
                    group_delta: 0,
                    commit: false,
                    copy: false,
                }
                .seal(sector);
                s += 1;
            }
        }
    }

    /// Programs the sectors of the scratch page in slots `from..to` (slots without a valid sector
    /// are left out) as one group: consecutive sequence numbers from the log head's
    /// counter, the last sector the group's commit. To `page` (the open page) or the
    /// log head's next page. The counter advances only on success: a failed program's
    /// retry reuses the numbers.
    fn log_program(
        &mut self,
        from: u32,
        to: u32,
        copy: bool,
        page: Option<PageAddr>,
        run: &mut FailRun,
    ) -> Result<Attempt, FaultOf<F>> {
        let pu = self.dev.pu();
        let page = match page {
            Some(p) => p,
            None => {
                let block = self.dev.head_ready(LOG_HEAD)?;
                let p = self.dev.heads_mut().take_page(LOG_HEAD);
                self.dev.took_page(LOG_HEAD);
                self.dev.geo().page(block, p)
            }
        };
        let base = self.dev.heads().next_seq(LOG_HEAD);
        let members = (from..to)
            .filter(|&s| sector_at(self.scratch.page(), pu, s).is_some())
            .count() as u32;
        let mut n = 0u32;
        for s in from..to {
            let at = s as usize * pu;
            let sector = &mut self.scratch.page_mut()[at..at + pu];
            if let Some(mut t) = LogSector::parse(sector) {
                t.seq = base.wrapping_add(n);
                t.group_delta = n as u8;
                t.commit = n + 1 == members;
                t.copy = copy;
                t.seal(sector);
                n += 1;
            }
        }
        let (a, b) = (from as usize * pu, to as usize * pu);
        match self
            .dev
            .flash_mut()
            .program(page, a as u32, &self.scratch.page()[a..b], &[])
        {
            Ok(()) => {
                self.dev
                    .heads_mut()
                    .number_from(LOG_HEAD, base.wrapping_add(n));
                Ok(Attempt::Done(page))
            }
            Err(e) if e.kind() == ErrorKind::ProgramFailed => {
                // The page is done (the head has moved past it, or it was the open
                // page) and its block retired once its data has moved, as in
                // `Dev::program` (which also bounds the failures in a row).
                let b = self.dev.block_of(page);
                self.dev.program_failed(LOG_HEAD, b, run);
                Ok(Attempt::Failed)
            }
            Err(e) => Err(Fault::Flash(e)),
        }
    }

    /// Reads the first record at or after `lsn` into `buf`; `None` at the end.
    pub fn log_read(
        &mut self,
        stream: ObjectId,
        lsn: u64,
        buf: &mut [u8],
    ) -> Result<Option<LogRecord>, ReadError<F::Error>> {
        self.log_read_inner(stream, lsn, buf)
            .map_err(|e| self.fail_read(e))
    }

    fn log_read_inner(
        &mut self,
        stream: ObjectId,
        lsn: u64,
        buf: &mut [u8],
    ) -> Result<Option<LogRecord>, FaultOf<F>> {
        self.check_usable()?;
        let o = self.obj(stream)?;
        if o.kind != ObjKind::Log {
            return Err(Fault::WrongKind);
        }
        let (start, end) = (o.log_start, o.size);
        let spp = self.sectors_per_page() as u64;
        let pu = self.dev.pu();
        let mut lsn = lsn.max(start);
        let mut rereads = 0;
        'page: while lsn < end {
            let lpage = lsn / spp;
            let page = self.index_get(stream, self.log_slot(lpage))?;
            if page == UNMAPPED {
                lsn = (lpage + 1) * spp;
                continue;
            }
            let mask = self.read_log_page(page)?;
            if mask == 0 {
                match self.unreadable_log_page(page, &mut rereads) {
                    Some(f) => return Err(f),
                    None => continue,
                }
            }
            let stored = (lpage & MAX_U24 as u64) as u32;
            let mine = |t: &LogSector| t.stream == stream && t.lpage == stored;
            let slot = (lsn % spp) as u32;
            let t = if mask & (1 << slot) != 0 {
                sector_at(self.scratch.page(), pu, slot).filter(mine)
            } else {
                None
            };
            let Some(t) = t else {
                let at = slot as usize * pu;
                if blank(&self.scratch.page()[at..at + pu], pu, self.blank_flips()) {
                    // Never written: the page's records end here.
                    lsn = (lpage + 1) * spp;
                    continue;
                }
                // Written, inside the live range, and not a sector of a whole group:
                // lost content (unless it reads now).
                match self.unreadable_log_page(page, &mut rereads) {
                    Some(f) => return Err(f),
                    None => continue,
                }
            };
            if t.pos != 0 {
                // Inside a record: its start is below `lsn`.
                lsn += 1;
                continue;
            }
            // The record: consecutive sectors, positions 0.., up to its last.
            let mut total = 0usize;
            let mut s = slot;
            loop {
                let u = (mask & (1 << s) != 0)
                    .then(|| sector_at(self.scratch.page(), pu, s))
                    .flatten()
                    .filter(|u| mine(u) && u.pos as u32 == s - slot);
                let Some(u) = u else {
                    match self.unreadable_log_page(page, &mut rereads) {
                        Some(f) => return Err(f),
                        None => continue 'page,
                    }
                };
                total += u.len as usize;
                if u.last {
                    break;
                }
                s += 1;
                if s >= spp as u32 {
                    return Err(Fault::Corrupted);
                }
            }
            if total > buf.len() {
                return Err(Fault::BufferTooSmall(total));
            }
            let mut len = 0;
            for k in slot..=s {
                let at = k as usize * pu;
                let n = sector_at(self.scratch.page(), pu, k).map_or(0, |u| u.len as usize);
                buf[len..len + n].copy_from_slice(&self.scratch.page()[at..at + n]);
                len += n;
            }
            return Ok(Some(LogRecord {
                lsn,
                len,
                next: lpage * spp + s as u64 + 1,
            }));
        }
        Ok(None)
    }

    /// Drops every record before `lsn` (pages wholly before it are freed).
    pub fn log_trim(&mut self, stream: ObjectId, lsn: u64) -> Result<(), WriteError<F::Error>> {
        self.log_move_start(stream, lsn, false)
            .map_err(|e| self.fail(e))
    }

    /// Test hook: drops every record and moves the stream's start and end to `lsn` (when
    /// past its end), as if records up to `lsn` had been appended and trimmed: one
    /// metadata page, all or nothing after a cut (its trim point carries the end along,
    /// see `apply_meta`). For tests of positions no test can reach by appending
    /// (logical page numbers past the sector trailers' 24 bits, LSNs past 2^32).
    #[doc(hidden)]
    pub fn log_skip_to(&mut self, stream: ObjectId, lsn: u64) -> Result<(), WriteError<F::Error>> {
        self.log_move_start(stream, lsn, true)
            .map_err(|e| self.fail(e))
    }

    /// Moves `stream`'s trim point forward to `lsn` (at most its end, unless
    /// `past_end`), with a metadata page.
    fn log_move_start(
        &mut self,
        stream: ObjectId,
        lsn: u64,
        past_end: bool,
    ) -> Result<(), FaultOf<F>> {
        self.check_writable()?;
        let o = self.obj(stream)?;
        if o.kind != ObjKind::Log {
            return Err(Fault::WrongKind);
        }
        let lsn = if past_end {
            lsn.max(o.size)
        } else {
            lsn.min(o.size)
        };
        if lsn <= o.log_start {
            return Ok(());
        }
        let mut rec = self.load_meta(&o)?;
        rec.size = lsn;
        self.prepare(1, 1, 0, Room::Shrink)?;
        self.write_meta(&rec, None)
    }

    /// Applies one replayed log sector found in `slot` of `page`.
    pub(crate) fn apply_log(
        &mut self,
        t: &LogSector,
        page: PageAddr,
        slot: u32,
    ) -> Result<(), FaultOf<F>> {
        let Some(o) = self.obj_get(t.stream)? else {
            return Ok(());
        };
        if o.kind != ObjKind::Log {
            return Ok(());
        }
        let spp = self.sectors_per_page() as u64;
        let lpage = self.log_lpage(t.lpage, o.size);
        let lsn = lpage * spp + slot as u64;
        if lsn + 1 > o.size {
            self.obj_update(t.stream, |o| o.size = lsn + 1)?;
        }
        // A sector below the trim point known now stays unmapped (but still moves the
        // end, which the trim point never passes); a trim replayed after it unmaps it.
        if lsn >= o.log_start {
            self.index_set(t.stream, self.log_slot(lpage), page)?;
        }
        Ok(())
    }

    /// Reads a log page into the scratch page with the step-aware read (a failed step on a
    /// page-wide part does not hide the others) and returns the slots holding sectors
    /// of whole groups (0: nothing readable). A read that reports a failed step (or,
    /// without ECC, shows a written sector that does not check out) is tried again a
    /// bounded number of times, and the page is taken as the best read seen (read again
    /// until one matches it): a transient error never shortens a page, a torn step stays
    /// torn and its neighbours stand.
    /// What a log read that found `page`'s sectors unusable reports: the flash's error
    /// when the page does not read now either (a run of read errors longer than the
    /// retries is the caller's to retry, not damage: an independent review found a
    /// staging replay failing the file layer's mount with `Corrupted` on an intact
    /// volume); `None` when it reads now and has not been read again `REREADS` times
    /// yet (the run ended just after the retries: the caller reads the page again; a
    /// later review found a run of exactly four errors answered `Corrupted`); else
    /// `Corrupted` (it reads, and its content is not a whole record).
    fn unreadable_log_page(&mut self, page: PageAddr, rereads: &mut u8) -> Option<FaultOf<F>> {
        const REREADS: u8 = 2;
        match self
            .dev
            .flash_mut()
            .read(page, 0, self.scratch.page_mut(), &mut [])
        {
            Err(e) if e.kind() == ErrorKind::Uncorrectable => Some(Fault::Flash(e)),
            Ok(_) if *rereads < REREADS => {
                *rereads += 1;
                None
            }
            _ => Some(Fault::Corrupted),
        }
    }

    pub(crate) fn read_log_page(&mut self, page: PageAddr) -> Result<u32, FaultOf<F>> {
        let pu = self.dev.pu();
        let spp = self.sectors_per_page();
        if self.log_tail.pinned == Some(page) {
            self.scratch
                .page_mut()
                .copy_from_slice(self.log_tail.image());
            return Ok(complete_slots(self.scratch.page(), pu, spp));
        }
        let no_ecc = self.dev.caps().ecc.kind == nand_hal::EccKind::None;
        let flips = self.blank_flips();
        let attempts = crate::io::READ_RETRIES + 1;
        let mut best = 0u32;
        let mut mask = 0;
        for attempt in 0..2 * attempts {
            let report =
                match self
                    .dev
                    .flash_mut()
                    .read_steps(page, self.scratch.page_mut(), &mut [])
                {
                    Ok(r) => r,
                    Err(e) if e.kind() == ErrorKind::BadBlock => return Ok(0),
                    Err(e) => return Err(Fault::Flash(e)),
                };
            // A step reported uncorrectable may hold anything, even what the buffer
            // held before (implementations that cannot deliver it): never parse it.
            for s in 0..spp {
                if report.step(s) == nand_hal::StepStatus::Uncorrectable {
                    self.scratch.page_mut()[s as usize * pu..(s as usize + 1) * pu].fill(0);
                }
            }
            mask = complete_slots(self.scratch.page(), pu, spp);
            let doubtful = !report.all_good()
                || (no_ecc
                    && (0..spp).any(|s| {
                        let at = s as usize * pu;
                        mask & (1 << s) == 0 && !blank(&self.scratch.page()[at..at + pu], pu, flips)
                    }));
            let n = mask.count_ones();
            if n >= best {
                best = n;
                if !doubtful || attempt + 1 >= attempts {
                    break;
                }
            }
        }
        Ok(mask)
    }

    /// Copies a valid log page to the log head as one group (a copy): every sector of
    /// a whole group below the stream's end keeps its slot (LSNs do not change; sectors
    /// below the trim point stay too, so the copy's first slot is written whenever the
    /// original's was), with new sequence numbers. The page is read into the scratch
    /// page and kept aside while the copy is built in the scratch page; with
    /// `from_aside` its image is in the aside page already.
    ///
    /// A page that reads as nothing at all, or whose live range holds a written
    /// sector that does not check out, is [`Reloc::Unreadable`]: it may hold records
    /// still referenced, so its block must not be freed on this pass.
    pub(crate) fn relocate_log(
        &mut self,
        page: PageAddr,
        from_aside: bool,
    ) -> Result<Reloc, FaultOf<F>> {
        let pu = self.dev.pu();
        let spp = self.sectors_per_page();
        let flips = self.blank_flips();
        let mask = if from_aside {
            complete_slots(self.scratch.aside()?, pu, spp)
        } else {
            let m = self.read_log_page(page)?;
            self.scratch.put_page_aside()?;
            m
        };
        if mask == 0 {
            let erased = blank(self.scratch.aside()?, pu, flips);
            return Ok(if erased {
                Reloc::Stale
            } else {
                Reloc::Unreadable
            });
        }
        let Some(first) = sector_at(self.scratch.aside()?, pu, mask.trailing_zeros()) else {
            return Ok(Reloc::Unreadable);
        };
        let stream = first.stream;
        let Some(o) = self.obj_get(stream)? else {
            return Ok(Reloc::Stale);
        };
        let lpage = self.log_lpage(first.lpage, o.size);
        if o.kind != ObjKind::Log || self.index_get(stream, self.log_slot(lpage))? != page {
            return Ok(Reloc::Stale);
        }
        let (start, end) = (o.log_start, o.size);
        let (copy, aside) = self.scratch.both_mut()?;
        copy.fill(0xFF);
        let mut last = 0;
        for s in 0..spp {
            let lsn = lpage * spp as u64 + s as u64;
            let at = s as usize * pu;
            let sector = &aside[at..at + pu];
            if mask & (1 << s) != 0 && lsn < end {
                copy[at..at + pu].copy_from_slice(sector);
                last = s + 1;
            } else if lsn >= start && lsn < end && !blank(sector, pu, flips) {
                // A live sector that does not read: keep the page where it is.
                return Ok(Reloc::Unreadable);
            }
        }
        if last == 0 {
            return Ok(Reloc::Stale);
        }
        if !LogTail::<LOG>::KEPT {
            // A build without a log tail page programs no log pages: recovering a cut
            // among them needs the tail page. The page stays where it is, and collection
            // leaves its block alone (as for a page that does not read).
            return Ok(Reloc::Unreadable);
        }
        self.dev.stats_mut().relocated_pages += 1;
        self.log_tail.moved(page);
        let mut run = FailRun::default();
        loop {
            // A retry restamps the same numbers over the same sectors.
            if let Attempt::Done(np) = self.log_program(0, last, true, None, &mut run)? {
                self.index_set(stream, self.log_slot(lpage), np)?;
                return Ok(Reloc::Moved);
            }
        }
    }
}

/// What [`Oftl::relocate_log`] did with a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reloc {
    /// Copied; the stream now maps the copy.
    Moved,
    /// Nothing in it is referenced (or it is erased).
    Stale,
    /// It does not read well enough to tell or to copy.
    Unreadable,
}

/// The logical page whose low 24 bits are `stored`, nearest `reference` (within 2^23
/// pages either way).
fn lpage_near(stored: u32, reference: u64) -> u64 {
    let d = (stored.wrapping_sub(reference as u32) << 8) as i32 >> 8;
    (reference as i64 + d as i64).max(0) as u64
}

#[cfg(test)]
mod tests {
    use super::{lpage_near, LogTail};
    use nand_hal::PageAddr;

    #[test]
    fn an_append_continues_the_open_page_only_where_it_ends() {
        let (spp, nop) = (4, 4);
        let mut t = LogTail::<2048>::CLOSED;
        let img = [0u8; 2048];
        assert_eq!(
            t.continuation(7, 0, 1, spp, nop, Some(PageAddr(100))),
            None,
            "nothing open"
        );
        // Logical page 2 of stream 7 at page 100, slots 0..1 programmed: LSN 9 next.
        t.opened(7, 2, PageAddr(100), 1, &img);
        assert_eq!(
            t.continuation(7, 9, 2, spp, nop, Some(PageAddr(100))),
            Some((2, 1, PageAddr(100)))
        );
        assert_eq!(
            t.continuation(8, 9, 1, spp, nop, Some(PageAddr(100))),
            None,
            "another stream"
        );
        assert_eq!(
            t.continuation(7, 10, 1, spp, nop, Some(PageAddr(100))),
            None,
            "not its end"
        );
        assert_eq!(
            t.continuation(7, 9, 4, spp, nop, Some(PageAddr(100))),
            None,
            "does not fit"
        );
        assert_eq!(
            t.continuation(7, 9, 1, spp, nop, Some(PageAddr(101))),
            None,
            "the head programmed another page since"
        );
        t.extended(3, &img, 512..1536);
        assert_eq!(
            t.continuation(7, 11, 1, spp, nop, Some(PageAddr(100))),
            Some((2, 3, PageAddr(100)))
        );
        assert_eq!(
            t.continuation(7, 11, 1, spp, 2, Some(PageAddr(100))),
            None,
            "NOP reached"
        );
        t.moved(PageAddr(99));
        assert!(t
            .continuation(7, 11, 1, spp, nop, Some(PageAddr(100)))
            .is_some());
        t.moved(PageAddr(100));
        assert_eq!(
            t.continuation(7, 11, 1, spp, nop, Some(PageAddr(100))),
            None,
            "copied away"
        );
        t.opened(7, 3, PageAddr(140), 4, &img);
        assert_eq!(
            t.continuation(7, 16, 1, spp, nop, Some(PageAddr(140))),
            None,
            "the page is full"
        );
        t.close();
        assert_eq!(
            t.continuation(7, 16, 0, spp, nop, Some(PageAddr(140))),
            None
        );
    }

    #[test]
    fn logical_pages_past_the_24_bit_field() {
        const M: u64 = 1 << 24;
        for reference in [0u64, 5, M - 3, M, M + 7, 5 * M - 1, 40 * M + 12_345] {
            for delta in [-1000i64, -2, -1, 0, 1, 2, 1000] {
                let full = reference as i64 + delta;
                if full < 0 {
                    continue;
                }
                let stored = (full as u64 & (M - 1)) as u32;
                assert_eq!(
                    lpage_near(stored, reference),
                    full as u64,
                    "{reference} {delta}"
                );
            }
        }
    }
}
