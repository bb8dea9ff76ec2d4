//! Log streams: append-only records, sector-granular, read back in order after a crash,
//! trimmed from the head.
//!
//! A log stream is an object of kind [`ObjKind::Log`]. Its pages come from their own
//! write head (head 1), apart from object data. A page of a stream holds up to
//! `sectors_per_page` sectors (program units); each sector is `unit - 20` payload bytes,
//! a CRC-32 of them, and an in-band backpointer (kind `Log`, owner = stream, lpn = the
//! stream's logical page, len = payload bytes used, its own sequence number, and the
//! position in its record with the commit flag on the record's last sector). An append
//! programs only the record's sectors of a fresh page (a partial-page program: fewer
//! bytes on the bus, the same tPROG). A record is at most one page.
//!
//! Appends never continue a page that already holds acknowledged records. The HAL's
//! power-loss contract says the page of an interrupted program "must not be trusted":
//! the simulator (like real parts with a page-wide ECC status) makes its earlier sectors
//! unreadable or unstable, so a torn second partial program would lose records that were
//! already acknowledged. Both choices cost one tPROG per append; continuing would only
//! save space. Packing small records into pages is the staging layer's job.
//!
//! Record sequence numbers (LSNs) are `logical page * sectors_per_page + slot`: strictly
//! increasing, not dense (a record that does not fit the open page starts the next one).
//! The stream's end LSN is its size in the object table; its trim point is persisted in
//! its metadata page (the size field of a log's metadata page is the trim point).
//!
//! Recovery replays log sectors only after all metadata (so creations, trims and deletes
//! are known), in sequence order, up to the last commit sector: a record is all-or-nothing.

use nand_hal::{BlockAddr, Error, ErrorKind, NandFlash, PageAddr};

use crate::errors::{Fault, ReadError, WriteError};
use crate::format::backpointer::{
    payload_crc, Backpointer, PageKind, BP_LEN, MAX_U24, PAYLOAD_CRC_LEN, TRAILER_LEN,
};
use crate::format::checkpoint::ObjKind;
use crate::format::index::UNMAPPED;
use crate::format::table::ObjRecord;
use crate::io::FaultOf;
use crate::policy::SpacePolicy;
use crate::space::Room;
use crate::{ObjectId, Oftl};

/// Write head of log-stream pages.
pub(crate) const LOG_HEAD: usize = 1;

/// A record read back from a log stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogRecord {
    /// The record's sequence number.
    pub lsn: u64,
    /// Its length in bytes (copied to the start of the caller's buffer).
    pub len: usize,
    /// Where to continue reading.
    pub next: u64,
}

enum Attempt {
    Done(u32),
    Failed,
}

impl<
        F: NandFlash,
        P: SpacePolicy,
        const PAGE: usize,
        const BLOCKS: usize,
        const CACHE: usize,
        const WBUF: usize,
    > Oftl<F, PAGE, BLOCKS, CACHE, WBUF, P>
{
    pub(crate) fn sectors_per_page(&self) -> u32 {
        self.dev.geo.page_size() / self.dev.caps.program_unit
    }

    fn sector_payload(&self) -> usize {
        self.dev.pu() - TRAILER_LEN
    }

    /// Largest record [`Oftl::log_append`] takes.
    pub fn log_max_record(&self) -> usize {
        self.sectors_per_page() as usize * self.sector_payload()
    }

    /// The size field a metadata page of object `o` carries.
    pub(crate) fn meta_size(o: &ObjRecord) -> u64 {
        match o.kind {
            ObjKind::Log => o.log_start,
            ObjKind::Object => o.size,
        }
    }

    /// Logical pages object `o` may map.
    pub(crate) fn index_pages(&self, o: &ObjRecord) -> u32 {
        let per = match o.kind {
            ObjKind::Log => self.sectors_per_page() as u64,
            ObjKind::Object => self.dev.payload as u64,
        };
        o.size.div_ceil(per).min(u32::MAX as u64) as u32
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
        self.log_append_inner(stream, data)
            .map_err(|e| self.fail(e))
    }

    fn log_append_inner(&mut self, stream: ObjectId, data: &[u8]) -> Result<u64, FaultOf<F>> {
        self.check_writable()?;
        if self.obj(stream)?.kind != ObjKind::Log {
            return Err(Fault::WrongKind);
        }
        if data.len() > self.log_max_record() {
            return Err(Fault::TooLarge);
        }
        self.prepare(1, 1, 1, Room::Grow)?;
        let spp = self.sectors_per_page();
        let sp = self.sector_payload();
        let pu = self.dev.pu();
        let k = data.len().div_ceil(sp).max(1) as u32;
        loop {
            let end = self.obj(stream)?.size;
            let (slot, lpage) = (0u32, end.div_ceil(spp as u64));
            if lpage > MAX_U24 as u64 {
                return Err(Fault::TooLarge);
            }
            let lpage = lpage as u32;
            self.pbuf.fill(0xFF);
            for i in 0..k as usize {
                let chunk = &data[(i * sp).min(data.len())..((i + 1) * sp).min(data.len())];
                let at = (slot as usize + i) * pu;
                self.pbuf[at..at + chunk.len()].copy_from_slice(chunk);
                let crc = payload_crc(&self.pbuf[at..at + sp]);
                self.pbuf[at + sp..at + sp + PAYLOAD_CRC_LEN].copy_from_slice(&crc.to_le_bytes());
                let bp = Backpointer {
                    kind: PageKind::Log,
                    owner: stream,
                    lpn: lpage,
                    len: chunk.len() as u16,
                    seq: 0,
                    tx_delta: i as u16,
                    commit: i as u32 + 1 == k,
                    relocated: false,
                };
                self.pbuf[at + pu - BP_LEN..at + pu].copy_from_slice(&bp.encode());
            }
            match self.log_program(slot, k)? {
                Attempt::Done(page) => {
                    self.index_set(stream, lpage, page)?;
                    let lsn = lpage as u64 * spp as u64 + slot as u64;
                    self.obj_update(stream, |o| o.size = lsn + k as u64)?;
                    return Ok(lsn);
                }
                // The page is lost to the failure; the record goes to a fresh page.
                Attempt::Failed => {}
            }
        }
    }

    /// Programs sectors `slot..slot + k` of `pbuf` (their trailers filled in except the
    /// sequence numbers) to the log head's next page. Stamps consecutive sequence
    /// numbers from the log head's counter, advanced only on success (a failed
    /// program's retry reuses them).
    fn log_program(&mut self, slot: u32, k: u32) -> Result<Attempt, FaultOf<F>> {
        let pu = self.dev.pu();
        self.dev.head_ready(LOG_HEAD)?;
        let h = self.dev.heads[LOG_HEAD];
        self.dev.heads[LOG_HEAD].next_page += 1;
        let page = self.dev.geo.page(BlockAddr(h.block), h.next_page).0;
        let base = self.dev.heads[LOG_HEAD].next_seq;
        let mut n = 0u32;
        for s in slot..slot + k {
            let at = s as usize * pu + pu - BP_LEN;
            if let Ok(Some(mut bp)) = Backpointer::parse(&self.pbuf[at..at + BP_LEN]) {
                bp.seq = base.wrapping_add(n);
                self.pbuf[at..at + BP_LEN].copy_from_slice(&bp.encode());
                n += 1;
            }
        }
        let (from, to) = (slot as usize * pu, (slot + k) as usize * pu);
        match self
            .dev
            .flash
            .program(PageAddr(page), from as u32, &self.pbuf[from..to], &[])
        {
            Ok(()) => {
                self.dev.heads[LOG_HEAD].next_seq = base.wrapping_add(n);
                Ok(Attempt::Done(page))
            }
            Err(e) if e.kind() == ErrorKind::ProgramFailed => {
                // The page is skipped (the head has moved past it) and the block retired
                // once its data has moved, as in `Dev::program`.
                let b = self.dev.block_of(page);
                self.dev.blocks[b].retire = true;
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
        while lsn < end {
            let lpage = (lsn / spp) as u32;
            let slot = (lsn % spp) as usize;
            let page = self.index_get(stream, lpage)?;
            if page == UNMAPPED {
                lsn = (lpage as u64 + 1) * spp;
                continue;
            }
            if !self.read_whole_page(page)? {
                return Err(Fault::Corrupted);
            }
            self.rbuf.copy_from_slice(&self.pbuf);
            let trailer = |buf: &[u8], s: usize| {
                sector_trailer(buf, pu, s as u32).filter(|bp| bp.owner == stream && bp.lpn == lpage)
            };
            match trailer(&self.rbuf, slot) {
                Some(bp) if bp.tx_delta == 0 => {}
                // Mid-record or unwritten: move on.
                Some(_) => {
                    lsn += 1;
                    continue;
                }
                None => {
                    lsn = (lpage as u64 + 1) * spp;
                    continue;
                }
            }
            let mut len = 0usize;
            let mut s = slot;
            loop {
                let bp = trailer(&self.rbuf, s).ok_or(Fault::Corrupted)?;
                if bp.tx_delta as usize != s - slot {
                    return Err(Fault::Corrupted);
                }
                let n = bp.len as usize;
                if len + n > buf.len() {
                    // Size the whole record for the caller.
                    let mut total = len + n;
                    let mut t = s;
                    while !trailer(&self.rbuf, t).is_some_and(|b| b.commit) {
                        t += 1;
                        total += trailer(&self.rbuf, t).map_or(0, |b| b.len as usize);
                        if t + 1 >= spp as usize {
                            break;
                        }
                    }
                    return Err(Fault::BufferTooSmall(total));
                }
                buf[len..len + n].copy_from_slice(&self.rbuf[s * pu..s * pu + n]);
                len += n;
                if bp.commit {
                    break;
                }
                s += 1;
                if s >= spp as usize {
                    return Err(Fault::Corrupted);
                }
            }
            return Ok(Some(LogRecord {
                lsn,
                len,
                next: lsn + (s - slot) as u64 + 1,
            }));
        }
        Ok(None)
    }

    /// Drops every record before `lsn` (pages wholly before it are freed).
    pub fn log_trim(&mut self, stream: ObjectId, lsn: u64) -> Result<(), WriteError<F::Error>> {
        let r = (|| -> Result<(), FaultOf<F>> {
            self.check_writable()?;
            let o = self.obj(stream)?;
            if o.kind != ObjKind::Log {
                return Err(Fault::WrongKind);
            }
            let lsn = lsn.min(o.size);
            if lsn <= o.log_start {
                return Ok(());
            }
            let mut rec = self.load_meta(&o)?;
            rec.size = lsn;
            self.prepare(1, 1, 0, Room::Shrink)?;
            self.write_meta(&rec, None)
        })();
        r.map_err(|e| self.fail(e))
    }

    /// Applies one replayed log sector found in `slot` of `page`.
    pub(crate) fn apply_log(
        &mut self,
        bp: &Backpointer,
        page: u32,
        slot: u32,
    ) -> Result<(), FaultOf<F>> {
        let Some(o) = self.obj_get(bp.owner)? else {
            return Ok(());
        };
        if o.kind != ObjKind::Log {
            return Ok(());
        }
        let spp = self.sectors_per_page() as u64;
        let lsn = bp.lpn as u64 * spp + slot as u64;
        if lsn + 1 > o.size {
            self.obj_update(bp.owner, |o| o.size = lsn + 1)?;
        }
        // Metadata replays first: a sector below the trim point stays unmapped (but
        // still moves the end, which the trim point never passes).
        if lsn >= o.log_start {
            self.index_set(bp.owner, bp.lpn, page)?;
        }
        Ok(())
    }

    /// The trailer of sector `slot` of a log page held in `buf`, if valid.
    /// The trailer of sector `slot` in `buf` if the sector is intact and so is every
    /// sector of its record (from its first to its commit sector, all in this page): a
    /// record a cut or a failed program left partly written counts as absent, whole.
    pub(crate) fn log_trailer(&self, buf: &[u8], slot: u32) -> Option<Backpointer> {
        let pu = self.dev.pu();
        let t = sector_trailer(buf, pu, slot)?;
        let first = slot.checked_sub(t.tx_delta as u32)?;
        let spp = self.sectors_per_page();
        let mut s = first;
        loop {
            let r = sector_trailer(buf, pu, s)?;
            if r.owner != t.owner || r.lpn != t.lpn || r.tx_delta as u32 != s - first {
                return None;
            }
            if r.commit {
                return (s >= slot).then_some(t);
            }
            s += 1;
            if s >= spp {
                return None;
            }
        }
    }

    /// Reads a whole page (data area) into `pbuf`; `false` if it is unreadable.
    pub(crate) fn read_whole_page(&mut self, page: u32) -> Result<bool, FaultOf<F>> {
        let pu = self.dev.pu();
        let spp = self.sectors_per_page();
        let attempts = crate::io::READ_RETRIES + 1;
        for attempt in 0..attempts {
            match self
                .dev
                .flash
                .read(PageAddr(page), 0, &mut self.pbuf, &mut [])
            {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Uncorrectable && attempt + 1 < attempts => {
                    continue
                }
                Err(e) if matches!(e.kind(), ErrorKind::Uncorrectable | ErrorKind::BadBlock) => {
                    return Ok(false)
                }
                Err(e) => return Err(Fault::Flash(e)),
            }
            // Without ECC a read can return flipped bits: a sector whose trailer is
            // present but does not check out is read again.
            let suspicious = self.dev.caps.ecc.kind == nand_hal::EccKind::None
                && (0..spp).any(|s| {
                    let at = s as usize * pu + pu - BP_LEN;
                    !matches!(Backpointer::parse(&self.pbuf[at..at + BP_LEN]), Ok(None))
                        && sector_trailer(&self.pbuf, pu, s).is_none()
                });
            if !suspicious || attempt + 1 == attempts {
                break;
            }
        }
        Ok(true)
    }

    /// Moves a valid log page to the log head. With `from_rbuf` the page is already in
    /// `rbuf`. Keeps each sector's slot (LSNs do not change) and drops sectors past the
    /// stream's end; the copy gets fresh sequence numbers. Returns whether it moved.
    pub(crate) fn relocate_log(&mut self, page: u32, from_rbuf: bool) -> Result<bool, FaultOf<F>> {
        if !from_rbuf {
            if !self.read_whole_page(page)? {
                return Ok(false);
            }
            self.rbuf.copy_from_slice(&self.pbuf);
        }
        let spp = self.sectors_per_page();
        let Some(first) = (0..spp).find_map(|s| self.log_trailer(&self.rbuf, s)) else {
            return Ok(false);
        };
        let (stream, lpage) = (first.owner, first.lpn);
        if self.obj_get(stream)?.is_none() || self.index_get(stream, lpage)? != page {
            return Ok(false);
        }
        let end = self.obj(stream)?.size;
        let pu = self.dev.pu();
        let mut last = 0;
        for s in 0..spp {
            let keep = self
                .log_trailer(&self.rbuf, s)
                .is_some_and(|t| t.owner == stream && t.lpn == lpage)
                && (lpage as u64 * spp as u64 + s as u64) < end;
            if keep {
                last = s + 1;
            } else {
                self.rbuf[s as usize * pu..(s as usize + 1) * pu].fill(0xFF);
            }
        }
        self.pbuf.copy_from_slice(&self.rbuf);
        self.dev.stats.relocated_pages += 1;
        loop {
            match self.log_program(0, last.max(1))? {
                Attempt::Done(np) => {
                    self.index_set(stream, lpage, np)?;
                    return Ok(true);
                }
                Attempt::Failed => self.pbuf.copy_from_slice(&self.rbuf),
            }
        }
    }
}

/// The backpointer of log sector `slot` in `buf` if the sector is intact: valid trailer
/// of kind `Log`, plausible length, payload CRC matching.
///
/// ```text
/// sector (program unit): payload (unit - 20) | CRC-32 of payload (4) | backpointer (16)
/// ```
fn sector_trailer(buf: &[u8], pu: usize, slot: u32) -> Option<Backpointer> {
    let at = slot as usize * pu;
    let sector = buf.get(at..at + pu)?;
    let sp = pu - TRAILER_LEN;
    match Backpointer::parse(&sector[pu - BP_LEN..]) {
        Ok(Some(bp)) if bp.kind == PageKind::Log && bp.len as usize <= sp => {
            let c = &sector[sp..sp + PAYLOAD_CRC_LEN];
            (payload_crc(&sector[..sp]) == u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .then_some(bp)
        }
        _ => None,
    }
}
