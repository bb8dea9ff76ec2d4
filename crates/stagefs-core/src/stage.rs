//! The staging log: small synchronous writes to files with their own objects are made
//! durable as records in an oftl log stream (one 512-byte sector for a 64-byte
//! `fsync`), and reach their page-aligned homes later, many at once (**patching**).
//!
//! The bytes themselves stay where every write puts them, in the object (oftl's
//! write-back buffers, programmed home when a page completes or is evicted); the log
//! holds the durable copy until a patch flushes the object. So reads never consult the
//! log, and no staged byte is pinned in this layer's RAM: it keeps only the list of
//! objects with records since the last patch.
//!
//! **Versions.** Each file object's oftl attributes hold a version: the log position
//! below which its records are superseded. Replay (at mount) applies a record only if
//! its LSN is at or above its object's version. Every durable change to an object that
//! does not go through the log (a patch, a direct flush, a truncate) sets the version to
//! the log's end in the same oftl transaction, so an old record can never be replayed
//! over newer acknowledged bytes. Writes that reach flash without being acknowledged
//! (a buffer evicted) may be overwritten by replay with the last acknowledged bytes,
//! which is what a crash may leave anyway.
//!
//! **Patching** flushes every object with records (pages and version in one
//! transaction each) and trims the log to its end: when the list of objects is full,
//! when the records since the last patch pass [`STAGE_LIMIT`] bytes (which bounds the
//! replay at mount), at `sync` and at unmount.
//!
//! **Bypass.** An fsync stages only when its records cost fewer programmed bytes than
//! writing the dirty pages home (sectors of 512 bytes against whole pages); large or
//! scattered dirty data goes home directly.

use crate::error::Error;
use crate::format::stage::{self, Record};
use crate::store::Store;
use crate::Fs;

/// Objects with records since the last patch.
pub const LIVE: usize = 8;
/// Record bytes since the last patch that trigger one (bounds the log replayed at
/// mount after a crash to this much plus one record).
pub const STAGE_LIMIT: u64 = 16 * 1024;
/// Bytes of a log sector's payload (a 512-byte program unit less its 20-byte trailer):
/// what one staged sector holds.
const SECTOR_PAYLOAD: usize = 492;
/// Bytes programmed per staged sector.
const SECTOR: usize = 512;

/// The staging state of a mounted volume.
#[derive(Clone, Debug)]
pub(crate) struct Staging {
    live: heapless::Vec<u32, LIVE>,
    bytes: u64,
}

impl Staging {
    pub(crate) const EMPTY: Staging = Staging {
        live: heapless::Vec::new(),
        bytes: 0,
    };
}

/// The version an object's attributes carry.
fn version_of(attrs: &[u8]) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&attrs[..8]);
    u64::from_le_bytes(v)
}

fn attrs_for(version: u64) -> [u8; oftl::ATTR_LEN] {
    let mut a = [0u8; oftl::ATTR_LEN];
    a[..8].copy_from_slice(&version.to_le_bytes());
    a
}

impl<S: Store, const PAGE: usize, const HANDLES: usize> Fs<S, PAGE, HANDLES> {
    fn staging_stream(&self) -> Result<u32, Error<S::FlashError>> {
        Ok(self.mounted()?.staging)
    }

    /// Makes the byte ranges `ranges` of object `obj` durable: staged when that is
    /// cheaper, else written home.
    pub(crate) fn make_durable(
        &mut self,
        obj: u32,
        ranges: &[(u64, u64)],
    ) -> Result<(), Error<S::FlashError>> {
        let p = self.store.payload() as u64;
        let bytes: usize = ranges
            .iter()
            .map(|&(a, b)| stage::HEADER_LEN + (b - a) as usize)
            .sum();
        let logged = bytes.div_ceil(SECTOR_PAYLOAD) * SECTOR;
        let mut pages = 0u64;
        let mut last = u64::MAX;
        for &(a, b) in ranges {
            let (first, end) = (a / p, (b - 1) / p);
            pages += end - first + 1 - (first == last) as u64;
            last = end;
        }
        let direct = pages as usize * p as usize;
        if ranges.is_empty() || bytes > self.store.log_max_record() || logged >= direct {
            return self.flush_home(obj);
        }
        if self.stage.bytes + bytes as u64 > STAGE_LIMIT
            || (!self.stage.live.contains(&obj) && self.stage.live.is_full())
        {
            self.patch()?;
        }
        // The commit: every range of this fsync, one log record.
        let mut at = 0;
        for &(a, b) in ranges {
            let len = (b - a) as usize;
            let hdr = Record::Data {
                object: obj,
                offset: a,
                len: len as u16,
            };
            hdr.encode(&mut self.b[at..at + stage::HEADER_LEN]);
            at += stage::HEADER_LEN;
            let n = self.store.read(obj, a, &mut self.b[at..at + len])?;
            if n != len {
                return Err(Error::Corrupted);
            }
            at += len;
        }
        let stream = self.staging_stream()?;
        self.store.log_append(stream, &self.b[..at])?;
        if !self.stage.live.contains(&obj) {
            self.stage.live.push(obj).map_err(|_| Error::Corrupted)?;
        }
        self.stage.bytes += at as u64;
        Ok(())
    }

    /// Writes an object's buffered bytes home; with records in the log, together with
    /// a version that supersedes them.
    pub(crate) fn flush_home(&mut self, obj: u32) -> Result<(), Error<S::FlashError>> {
        if let Some(i) = self.stage.live.iter().position(|&o| o == obj) {
            let end = self.store.log_bounds(self.staging_stream()?)?.1;
            self.store.flush_with_attrs(obj, &attrs_for(end))?;
            self.stage.live.swap_remove(i);
            Ok(())
        } else {
            self.store.flush(obj)
        }
    }

    /// The version a direct change of `obj` must set in the same transaction (its
    /// attributes), and forgets `obj`'s records: `None` when it has none.
    pub(crate) fn supersede(
        &mut self,
        obj: u32,
    ) -> Result<Option<[u8; oftl::ATTR_LEN]>, Error<S::FlashError>> {
        match self.stage.live.iter().position(|&o| o == obj) {
            Some(i) => {
                let end = self.store.log_bounds(self.staging_stream()?)?.1;
                self.stage.live.swap_remove(i);
                Ok(Some(attrs_for(end)))
            }
            None => Ok(None),
        }
    }

    /// Patches: every object with records home (with its version), then the log
    /// trimmed to its end.
    pub(crate) fn patch(&mut self) -> Result<(), Error<S::FlashError>> {
        let stream = self.staging_stream()?;
        let end = self.store.log_bounds(stream)?.1;
        while let Some(&obj) = self.stage.live.last() {
            if self.store.is_object(obj)? {
                self.store.flush_with_attrs(obj, &attrs_for(end))?;
            }
            self.stage.live.pop();
        }
        if self.stage.bytes > 0 {
            self.store.log_trim(stream, end)?;
            self.stage.bytes = 0;
        }
        Ok(())
    }

    /// After mounting: applies the records a crash left in the log to their objects
    /// (those at or above their object's version), then patches.
    pub(crate) fn replay(&mut self) -> Result<(), Error<S::FlashError>> {
        self.stage = Staging::EMPTY;
        let stream = self.staging_stream()?;
        let (start, end) = self.store.log_bounds(stream)?;
        let mut lsn = start;
        let mut versions: heapless::Vec<(u32, u64), LIVE> = heapless::Vec::new();
        while lsn < end {
            let Some(r) = self.store.log_read(stream, lsn, &mut self.b)? else {
                break;
            };
            let (at, len, next) = (r.lsn, r.len, r.next);
            let mut pos = 0;
            while pos < len {
                let (rec, data_at, rec_end) = Record::parse(&self.b[..len], pos)?;
                pos = rec_end;
                let Record::Data {
                    object,
                    offset,
                    len: n,
                } = rec;
                let v = match versions.iter().find(|(o, _)| *o == object) {
                    Some(&(_, v)) => v,
                    None => {
                        let v = if self.store.is_object(object)? {
                            version_of(&self.store.attrs(object)?)
                        } else {
                            u64::MAX
                        };
                        if versions.is_full() {
                            // Make room: what was applied so far goes home first.
                            for &(o, _) in versions.iter() {
                                if self.store.is_object(o)? {
                                    self.store.flush_with_attrs(o, &attrs_for(at))?;
                                }
                            }
                            versions.clear();
                        }
                        let _ = versions.push((object, v));
                        v
                    }
                };
                if at >= v {
                    self.store
                        .write(object, offset, &self.b[data_at..data_at + n as usize])?;
                }
            }
            lsn = next;
        }
        for &(o, v) in versions.iter() {
            if v != u64::MAX && !self.stage.live.contains(&o) {
                let _ = self.stage.live.push(o);
            }
        }
        self.stage.bytes = (end > start) as u64;
        self.patch()
    }
}
