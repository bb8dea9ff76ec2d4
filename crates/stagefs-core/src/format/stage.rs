//! Staging records: the payload of one oftl log record (one commit: every record of
//! one `fsync`) is a sequence of these.
//!
//! ```text
//! data record (bytes of a file with its own object)
//!  0   1  type: 1
//!  1   1  reserved (0)
//!  2   2  data length
//!  4   4  object id
//!  8   8  byte offset in the object
//! 16   .  data
//!
//! pending record (an object a file opened with truncate moved to before its commit)
//!  0   1  type: 3
//!  1   3  reserved (0)
//!  4   4  object id
//!  8   8  reserved (0)
//!
//! inline record (the whole new contents of an inline file)
//!  0   1  type: 2
//!  1   1  name length (1..=64)
//!  2   2  contents length (0..=256)
//!  4   4  directory (object id)
//!  8   8  reserved (0)
//! 16   .  name, then contents
//! ```
//!
//! The log record's LSN is every record's LSN (replay compares it with the object's
//! version, see `stage`). The oftl log record is whole or absent after a crash, so a
//! commit's records are too.

use super::{le16, le32, put16, put32, Corrupted};

/// Bytes before a record's data.
pub const HEADER_LEN: usize = 16;
const DATA: u8 = 1;
const INLINE: u8 = 2;
const PENDING: u8 = 3;

/// A staging record (its data follows its header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
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
    /// The contents of inline file `name` (bytes after the header: the name, then the
    /// contents) in directory `dir`.
    Inline {
        /// Directory.
        dir: u32,
        /// Name length.
        name_len: u8,
        /// Contents length.
        len: u16,
    },
    /// `object` was created for a file whose entry does not name it yet: if no commit
    /// adopted it (see `stage`), replay deletes it.
    Pending {
        /// Object.
        object: u32,
    },
}

impl Record {
    /// Writes the header into `out` (16 bytes).
    pub fn encode(&self, out: &mut [u8]) {
        match *self {
            Record::Data {
                object,
                offset,
                len,
            } => {
                out[0] = DATA;
                out[1] = 0;
                put16(out, 2, len);
                put32(out, 4, object);
                out[8..16].copy_from_slice(&offset.to_le_bytes());
            }
            Record::Inline { dir, name_len, len } => {
                out[0] = INLINE;
                out[1] = name_len;
                put16(out, 2, len);
                put32(out, 4, dir);
                out[8..16].fill(0);
            }
            Record::Pending { object } => {
                out[0] = PENDING;
                out[1..4].fill(0);
                put32(out, 4, object);
                out[8..16].fill(0);
            }
        }
    }

    /// Bytes after the header.
    pub fn body_len(&self) -> usize {
        match *self {
            Record::Data { len, .. } => len as usize,
            Record::Inline { name_len, len, .. } => name_len as usize + len as usize,
            Record::Pending { .. } => 0,
        }
    }

    /// Parses the record at `at` of a commit: `(record, where its data starts, where
    /// the next record starts)`.
    pub fn parse(b: &[u8], at: usize) -> Result<(Record, usize, usize), Corrupted> {
        let h = b.get(at..at + HEADER_LEN).ok_or(Corrupted)?;
        let len = le16(h, 2);
        let id = le32(h, 4);
        let mut o = [0u8; 8];
        o.copy_from_slice(&h[8..16]);
        let word = u64::from_le_bytes(o);
        let r = match h[0] {
            DATA if h[1] == 0 && word.checked_add(len as u64).is_some() => Record::Data {
                object: id,
                offset: word,
                len,
            },
            INLINE
                if (1..=crate::NAME_MAX).contains(&(h[1] as usize))
                    && len as usize <= crate::INLINE_MAX
                    && word == 0 =>
            {
                Record::Inline {
                    dir: id,
                    name_len: h[1],
                    len,
                }
            }
            PENDING if h[1..4] == [0; 3] && len == 0 && word == 0 => Record::Pending { object: id },
            _ => return Err(Corrupted),
        };
        let data = at + HEADER_LEN;
        let end = data + r.body_len();
        if end > b.len() || id == 0 {
            return Err(Corrupted);
        }
        Ok((r, data, end))
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
        let r = Record::Inline {
            dir: 4,
            name_len: 3,
            len: 2,
        };
        r.encode(&mut b);
        b[16..21].copy_from_slice(b"abcxy");
        assert_eq!(Record::parse(&b[..21], 0), Ok((r, 16, 21)));
        b[1] = 0;
        assert_eq!(Record::parse(&b[..21], 0), Err(Corrupted));
    }
}
