//! Staging records: the payload of one oftl log record (one commit: every record of
//! one `fsync`) is a sequence of these.
//!
//! ```text
//! record
//!  0   1  type: 1 = data (bytes of a file object)
//!  1   1  reserved (0)
//!  2   2  data length
//!  4   4  object id
//!  8   8  byte offset in the object
//! 16   .  data
//! ```
//!
//! The log record's LSN is every record's LSN (replay compares it with the object's
//! version, see `stage`). The oftl log record is whole or absent after a crash, so a
//! commit's records are too.

use super::{le16, le32, put16, put32, Corrupted};

/// Bytes before a record's data.
pub const HEADER_LEN: usize = 16;
const DATA: u8 = 1;

/// A staging record (its data follows its header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// `len` bytes at `offset` of `object`.
    Data {
        /// Object.
        object: u32,
        /// Byte offset.
        offset: u64,
        /// Data length.
        len: u16,
    },
}

impl Record {
    /// Writes the header into `out` (16 bytes).
    pub fn encode(&self, out: &mut [u8]) {
        let Record::Data {
            object,
            offset,
            len,
        } = *self;
        out[0] = DATA;
        out[1] = 0;
        put16(out, 2, len);
        put32(out, 4, object);
        out[8..16].copy_from_slice(&offset.to_le_bytes());
    }

    /// Parses the record at `at` of a commit: `(record, where its data starts, where
    /// the next record starts)`.
    pub fn parse(b: &[u8], at: usize) -> Result<(Record, usize, usize), Corrupted> {
        let h = b.get(at..at + HEADER_LEN).ok_or(Corrupted)?;
        if h[0] != DATA || h[1] != 0 {
            return Err(Corrupted);
        }
        let len = le16(h, 2);
        let object = le32(h, 4);
        let mut o = [0u8; 8];
        o.copy_from_slice(&h[8..16]);
        let offset = u64::from_le_bytes(o);
        let data = at + HEADER_LEN;
        let end = data + len as usize;
        if end > b.len() || object == 0 || offset.checked_add(len as u64).is_none() {
            return Err(Corrupted);
        }
        Ok((
            Record::Data {
                object,
                offset,
                len,
            },
            data,
            end,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_refuse_garbage() {
        let mut b = [0u8; 64];
        let r = Record::Data {
            object: 9,
            offset: 1 << 33,
            len: 5,
        };
        r.encode(&mut b);
        b[16..21].copy_from_slice(b"hello");
        assert_eq!(Record::parse(&b[..21], 0), Ok((r, 16, 21)));
        assert_eq!(Record::parse(&b[..20], 0), Err(Corrupted));
        b[0] = 7;
        assert_eq!(Record::parse(&b[..21], 0), Err(Corrupted));
        assert_eq!(Record::parse(&[0xFF; 40], 0), Err(Corrupted));
    }
}
