//! A sensor data logger: fixed-size records appended to `/log.0`, each made durable with
//! `fsync`, and the log rotated by size (`/log.0` renamed to `/log.1`, replacing the
//! older one) so it never takes more than two files' worth of flash.
//!
//! What a power cut leaves (the host program `data-logger` checks it at many cut
//! points): every record whose [`Logger::log`] returned `Ok` is there, in order, plus at
//! most the one being written; `/log.1` followed by `/log.0` is one run of consecutive
//! sequence numbers. A rotation is a single `rename` (atomic and durable on return), so a
//! cut during it leaves either the old pair of files or the new one.
//!
//! ```ignore
//! // At boot: find where the log ended (a torn tail record is cut off).
//! let mut log = Logger::open(&mut fs, 64 * 1024)?;
//! loop {
//!     let value = sensor.read();
//!     log.log(&mut fs, now_ms(), value)?; // durable when it returns
//! }
//! ```
//!
//! Each record costs one 512-byte sector program through the staging log (see
//! `stagefs_core`), not a page: 64 B or 16 B, a synced append is the same cost, so pack
//! several samples into a record when the rate is high.

use crc::{Crc, CRC_32_ISO_HDLC};
use stagefs_core::{File, Fs, OpenOptions, SeekFrom, Store};

use crate::FsError;

/// The file records are appended to.
pub const CURRENT: &str = "/log.0";
/// The previous file, kept until the next rotation.
pub const PREVIOUS: &str = "/log.1";
/// Bytes per record on flash.
pub const RECORD_LEN: usize = 16;

const CRC32: Crc<u32> = Crc::<u32>::new(&CRC_32_ISO_HDLC);

/// One sample.
///
/// On flash (little-endian): `seq` u32, `millis` u32, `value` i32, CRC-32 (ISO-HDLC) of
/// the 12 bytes before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Record {
    /// Sequence number: 0 for the first record ever logged, then +1 per record.
    pub seq: u32,
    /// When it was taken (milliseconds since boot, or any clock the board has).
    pub millis: u32,
    /// The reading.
    pub value: i32,
}

impl Record {
    /// The record's bytes on flash.
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let mut b = [0; RECORD_LEN];
        b[0..4].copy_from_slice(&self.seq.to_le_bytes());
        b[4..8].copy_from_slice(&self.millis.to_le_bytes());
        b[8..12].copy_from_slice(&self.value.to_le_bytes());
        let crc = CRC32.checksum(&b[..12]);
        b[12..16].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// A record from its bytes; `None` when the CRC does not match.
    pub fn decode(b: &[u8; RECORD_LEN]) -> Option<Record> {
        let word = |i: usize| [b[i], b[i + 1], b[i + 2], b[i + 3]];
        if CRC32.checksum(&b[..12]) != u32::from_le_bytes(word(12)) {
            return None;
        }
        Some(Record {
            seq: u32::from_le_bytes(word(0)),
            millis: u32::from_le_bytes(word(4)),
            value: i32::from_le_bytes(word(8)),
        })
    }
}

/// The open log. One per volume; it keeps `/log.0` open (one handle of the volume's
/// table) until [`Logger::close`].
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Logger {
    file: File,
    /// Bytes in `/log.0` (whole records).
    size: u64,
    /// Rotate before a record would take `/log.0` past this many bytes.
    limit: u64,
    next_seq: u32,
    rotations: u32,
}

impl Logger {
    /// Opens the log at boot (creating `/log.0` on an empty volume). A partial record at
    /// the end of `/log.0`, which a power cut during an append can leave, is cut off. The
    /// next record's sequence number follows the last record in `/log.0`, or in `/log.1`
    /// when `/log.0` is empty (a cut right after a rotation).
    ///
    /// `limit` is the rotation size in bytes (at least one record).
    pub fn open<S: Store, const P: usize, const H: usize>(
        fs: &mut Fs<S, P, H>,
        limit: u64,
    ) -> Result<Self, FsError<S>> {
        let limit = limit.max(RECORD_LEN as u64);
        let append = OpenOptions::new().read(true).append(true).create(true);
        let file = fs.open(CURRENT, append)?;
        let mut log = Logger {
            file,
            size: 0,
            limit,
            next_seq: 0,
            rotations: 0,
        };
        match log.resume(fs) {
            Ok(()) => Ok(log),
            Err(e) => {
                let _ = fs.close(log.file);
                Err(e)
            }
        }
    }

    fn resume<S: Store, const P: usize, const H: usize>(
        &mut self,
        fs: &mut Fs<S, P, H>,
    ) -> Result<(), FsError<S>> {
        let len = fs.len(self.file)?;
        let whole = len - len % RECORD_LEN as u64;
        if whole != len {
            // A torn append: drop the partial record (durable on return).
            fs.truncate(self.file, whole)?;
        }
        self.size = whole;
        let last = if whole > 0 {
            fs.seek(self.file, SeekFrom::Start(whole - RECORD_LEN as u64))?;
            let mut b = [0; RECORD_LEN];
            let n = fs.read(self.file, &mut b)?;
            Record::decode(&b).filter(|_| n == RECORD_LEN)
        } else {
            last_record(fs, PREVIOUS)?
        };
        self.next_seq = last.map_or(0, |r| r.seq.wrapping_add(1));
        Ok(())
    }

    /// Appends one record and makes it durable; returns it. Rotates first when the
    /// record would take `/log.0` past the limit.
    pub fn log<S: Store, const P: usize, const H: usize>(
        &mut self,
        fs: &mut Fs<S, P, H>,
        millis: u32,
        value: i32,
    ) -> Result<Record, FsError<S>> {
        if self.size + RECORD_LEN as u64 > self.limit {
            self.rotate(fs)?;
        }
        let record = Record {
            seq: self.next_seq,
            millis,
            value,
        };
        fs.write(self.file, &record.encode())?;
        // The durability point: one sector program in the staging log.
        fs.fsync(self.file)?;
        self.size += RECORD_LEN as u64;
        self.next_seq = self.next_seq.wrapping_add(1);
        Ok(record)
    }

    /// `/log.0` becomes `/log.1` (the older `/log.1` is dropped) and a new `/log.0` is
    /// started. The rename is one transaction: a cut leaves the files before or after it.
    fn rotate<S: Store, const P: usize, const H: usize>(
        &mut self,
        fs: &mut Fs<S, P, H>,
    ) -> Result<(), FsError<S>> {
        // A file cannot be renamed while it is open.
        fs.close(self.file)?;
        fs.rename(CURRENT, PREVIOUS)?;
        let append = OpenOptions::new().read(true).append(true).create(true);
        self.file = fs.open(CURRENT, append)?;
        self.size = 0;
        self.rotations += 1;
        Ok(())
    }

    /// The sequence number the next record gets.
    pub fn next_seq(&self) -> u32 {
        self.next_seq
    }

    /// Rotations since [`Logger::open`].
    pub fn rotations(&self) -> u32 {
        self.rotations
    }

    /// Closes `/log.0` (everything logged is already durable).
    pub fn close<S: Store, const P: usize, const H: usize>(
        self,
        fs: &mut Fs<S, P, H>,
    ) -> Result<(), FsError<S>> {
        fs.close(self.file)
    }
}

/// Calls `each` for every record of the log file at `path` (`/log.1` or `/log.0`) in
/// order, and returns how many there were. Stops at the first record that does not
/// decode (a torn tail). A missing file has no records.
pub fn read_records<S: Store, const P: usize, const H: usize>(
    fs: &mut Fs<S, P, H>,
    path: &str,
    mut each: impl FnMut(Record),
) -> Result<u32, FsError<S>> {
    let f = match fs.open(path, OpenOptions::new().read(true)) {
        Ok(f) => f,
        Err(stagefs_core::Error::NotFound) => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut n = 0;
    // Read in chunks of whole records: fewer calls than one read per record.
    let mut chunk = [0u8; 32 * RECORD_LEN];
    let result = 'read: loop {
        // Fill the chunk (a read may return less than asked before the end).
        let mut got = 0;
        while got < chunk.len() {
            match fs.read(f, &mut chunk[got..]) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) => break 'read Err(e),
            }
        }
        if got == 0 {
            break Ok(n);
        }
        for rec in chunk[..got].chunks_exact(RECORD_LEN) {
            let mut b = [0; RECORD_LEN];
            b.copy_from_slice(rec);
            match Record::decode(&b) {
                Some(r) => {
                    each(r);
                    n += 1;
                }
                None => break 'read Ok(n),
            }
        }
        if got % RECORD_LEN != 0 {
            break Ok(n);
        }
    };
    let closed = fs.close(f);
    let n = result?;
    closed?;
    Ok(n)
}

/// The last record of the file at `path` (none when it is missing or empty).
fn last_record<S: Store, const P: usize, const H: usize>(
    fs: &mut Fs<S, P, H>,
    path: &str,
) -> Result<Option<Record>, FsError<S>> {
    let mut last = None;
    read_records(fs, path, |r| last = Some(r))?;
    Ok(last)
}
