//! Directory pages. Page 0 of a directory object is its header (a count that is 0
//! exactly when the directory is empty, parent, and the split bitmap of its hash trie);
//! every other page is a bucket of entries.
//!
//! ```text
//! page 0: directory header
//!  0   2  magic "SD"
//!  2   1  version: 3 (group counts), 2 (the count counts buckets) or 1 (it counts
//!         names)
//!  3   1  page kind: 1 = directory header
//!  4   4  count: version 2, buckets holding at least one name; version 1, names;
//!         version 3, 0 (the group counts below hold it)
//!  8   4  parent directory (object id; the root names itself)
//! 12  20  reserved (0)
//! 32 1024 split bitmap: bit 2^l - 1 + p (byte 32 + bit / 8, bit % 8 from the least
//!         significant) is set when node (level l, prefix p) is split: its names are in
//!         (l + 1, p) and (l + 1, p + 2^l), by bit l of their hash
//! 1056 512 version 3: group counts, 4 bits per group (group g in byte 1056 + g / 2,
//!         the low nibble for even g): how many buckets of group g hold a name, 0..=8.
//!         The bucket of leaf (l, p) is in group p mod 1024: a group is the subtree of
//!         node (10, g) (or the one leaf above it), so a listing passes its buckets in
//!         a row. Versions 1 and 2 leave these bytes 0.
//!
//! bucket page: the names of one leaf node (level l, prefix p), at page 1 + p
//!  0   2  magic "SD"
//!  2   1  version (1)
//!  3   1  page kind: 2 = bucket
//!  4   1  level l
//!  5   1  reserved (0)
//!  6   2  entries on this page
//!  8   2  bytes of entries (from byte 16)
//! 10   2  reserved (0)
//! 12   4  prefix p (the low l bits of every name hash on the page)
//! 16   .  entries, packed
//!
//! entry
//!  0   1  kind: 1 file, 2 directory
//!  1   1  name length (1..=NAME_MAX)
//!  2   1  attribute length (0..=ATTR_MAX)
//!  3   1  flags: bit 0 INLINE (the file's bytes follow; object id 0)
//!  4   4  object id (directories, and files with their own object)
//!  8   2  inline length (INLINE files: the file's size)
//! 10   .  name (UTF-8), attributes, inline bytes
//! ```
//!
//! A bucket page never written reads as zeros (an oftl hole): an empty bucket. A left
//! child keeps its parent's page (same prefix), so a split writes two bucket pages and
//! one bitmap byte, and no page is ever left holding stale names.
//!
//! The count is there for one question, whether a directory is empty (`remove_dir`). A
//! count of names (version 1, every directory until stop 55) changes with every create
//! and remove and so costs page 0 a program each time; a count of non-empty buckets
//! changes only when a bucket empties or gets its first name (or a split fills both
//! children). A version-1 directory is read as it is and becomes version 2 when a
//! change leaves it empty, or changes it while it is empty (then both counts are 0).
//!
//! Version 3 keeps the same count per group of buckets instead (the count is their
//! sum), so a listing skips the buckets of a group whose count is 0 without reading
//! them: a step reads at most the 8 buckets of the group it ends in and the 7 before
//! its name in the group it starts in, however many names were removed. A group count
//! changes exactly when version 2's count would, one byte in the same page 0 write. A
//! version-1 or -2 directory turns version 3 the way version 1 turns version 2, where
//! every count is 0.

use super::{le16, le32, put16, put32, Corrupted};

/// Bytes of page 0 before the split bitmap.
pub const DIR_HEADER_LEN: usize = 32;
/// Bytes of a bucket page before the first entry.
pub const HEADER_LEN: usize = 16;
/// Bytes of an entry before its name.
pub const ENTRY_HEADER_LEN: usize = 10;
/// Deepest level (0 = the first bucket): a full bucket at this level cannot split.
pub const MAX_LEVEL: u32 = 13;

const MAGIC: [u8; 2] = *b"SD";
/// Version of bucket pages, and of directory headers that count names.
const VERSION: u8 = 1;
/// Version of directory headers that count non-empty buckets.
const DIR_VERSION_BUCKETS: u8 = 2;
/// Version of directory headers that count non-empty buckets per group.
const DIR_VERSION_GROUPS: u8 = 3;
/// Byte offset in page 0 of the group counts (version 3).
pub const GROUPS_AT: usize = DIR_HEADER_LEN + 1024;
/// Groups of buckets (version 3): one per node of level [`GROUP_LEVEL`].
pub const GROUPS: u32 = 1 << GROUP_LEVEL;
/// Level whose nodes are the groups' roots.
pub const GROUP_LEVEL: u32 = 10;
/// Largest group count: the leaves below a node of level [`GROUP_LEVEL`].
pub const GROUP_MAX: u8 = 1 << (MAX_LEVEL - GROUP_LEVEL);
const KIND_DIR: u8 = 1;
const KIND_BUCKET: u8 = 2;
const INLINE: u8 = 1;

/// Page 0 of a directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DirHeader {
    /// Buckets holding a name (`counts_buckets`), or names: 0 exactly when the
    /// directory is empty.
    pub count: u32,
    /// Whether `count` counts buckets (version 2 or 3) rather than names (version 1).
    pub counts_buckets: bool,
    /// Whether page 0 counts them per group (version 3; `count` is the groups' sum).
    pub groups: bool,
    /// Parent directory.
    pub parent: u32,
}

/// Byte offset in page 0 of [`DirHeader::count_field`] (the version, the page kind
/// and the count, written together so that a version-1 header turns version 2 in the
/// write that changes its count).
pub const COUNT_FIELD_AT: usize = 2;

impl DirHeader {
    /// The header of a new, empty directory of `version` (1 to 3).
    pub fn new(parent: u32, version: u8) -> Self {
        DirHeader {
            count: 0,
            counts_buckets: version >= DIR_VERSION_BUCKETS,
            groups: version >= DIR_VERSION_GROUPS,
            parent,
        }
    }

    /// The header's version (1 to 3).
    pub fn version(&self) -> u8 {
        if self.groups {
            DIR_VERSION_GROUPS
        } else if self.counts_buckets {
            DIR_VERSION_BUCKETS
        } else {
            VERSION
        }
    }

    /// Parses page 0 (a version-3 header needs its group counts: the whole page).
    pub fn parse(b: &[u8]) -> Result<Self, Corrupted> {
        if b.len() < DIR_HEADER_LEN || b[0..2] != MAGIC || b[3] != KIND_DIR {
            return Err(Corrupted);
        }
        let version = b[2];
        if !(VERSION..=DIR_VERSION_GROUPS).contains(&version) {
            return Err(Corrupted);
        }
        let mut h = DirHeader {
            count: le32(b, 4),
            parent: le32(b, 8),
            ..DirHeader::new(0, version)
        };
        if h.groups {
            let counts = b
                .get(GROUPS_AT..GROUPS_AT + GROUPS as usize / 2)
                .ok_or(Corrupted)?;
            if h.count != 0 {
                return Err(Corrupted);
            }
            for &byte in counts {
                let (lo, hi) = (byte & 0xF, byte >> 4);
                if lo > GROUP_MAX || hi > GROUP_MAX {
                    return Err(Corrupted);
                }
                h.count += (lo + hi) as u32;
            }
        }
        Ok(h)
    }

    /// Encodes (the bitmap that follows is not touched).
    pub fn encode(&self) -> [u8; DIR_HEADER_LEN] {
        let mut b = [0u8; DIR_HEADER_LEN];
        b[0..2].copy_from_slice(&MAGIC);
        b[COUNT_FIELD_AT..COUNT_FIELD_AT + 6].copy_from_slice(&self.count_field());
        put32(&mut b, 8, self.parent);
        b
    }

    /// Bytes `COUNT_FIELD_AT..COUNT_FIELD_AT + 6` of page 0: version, page kind, count
    /// (0 in version 3, whose count is in the group counts).
    pub fn count_field(&self) -> [u8; 6] {
        let mut f = [0u8; 6];
        f[0] = self.version();
        f[1] = KIND_DIR;
        if !self.groups {
            f[2..6].copy_from_slice(&self.count.to_le_bytes());
        }
        f
    }
}

/// Group of the bucket of a leaf with prefix `prefix` (version 3).
pub const fn group_of(prefix: u32) -> u32 {
    prefix & (GROUPS - 1)
}

/// Byte offset in page 0 of the count of `group` (version 3; two groups a byte).
pub const fn group_byte(group: u32) -> usize {
    GROUPS_AT + group as usize / 2
}

/// Count of `group` in the byte of page 0 holding it.
pub const fn nibble(byte: u8, group: u32) -> u8 {
    (byte >> (4 * (group % 2))) & 0xF
}

/// `byte` with the count of `group` set to `count` (at most [`GROUP_MAX`]).
pub const fn with_nibble(byte: u8, group: u32, count: u8) -> u8 {
    let shift = 4 * (group % 2);
    (byte & !(0xF << shift)) | (count << shift)
}

/// Count of the group of the leaf with prefix `prefix`, given page 0 of a version-3
/// directory in `page0`: 0 when none of its buckets holds a name.
pub fn group_count(page0: &[u8], prefix: u32) -> u8 {
    let g = group_of(prefix);
    page0.get(group_byte(g)).map_or(0, |&b| nibble(b, g))
}

/// Bit of node `(level, prefix)` in the split bitmap.
pub const fn node_bit(level: u32, prefix: u32) -> u32 {
    (1 << level) - 1 + prefix
}

/// Byte offset in page 0 of the bitmap byte holding `bit`.
pub const fn bitmap_byte(bit: u32) -> usize {
    DIR_HEADER_LEN + bit as usize / 8
}

/// Whether node `(level, prefix)` is split, given page 0 in `page0`.
pub fn is_split(page0: &[u8], level: u32, prefix: u32) -> bool {
    if level >= MAX_LEVEL {
        return false;
    }
    let bit = node_bit(level, prefix);
    page0
        .get(bitmap_byte(bit))
        .is_some_and(|b| b & (1 << (bit % 8)) != 0)
}

/// Object page of the bucket of node `(level, prefix)`.
pub const fn bucket_page(prefix: u32) -> u32 {
    1 + prefix
}

/// The leaf a name hash leads to: `(level, prefix)`.
pub fn leaf_of(page0: &[u8], hash: u32) -> (u32, u32) {
    let (mut l, mut p) = (0u32, 0u32);
    while is_split(page0, l, p) {
        p |= hash & (1 << l);
        l += 1;
    }
    (l, p)
}

/// Bytes of page 0 a directory needs (header, the bitmap of every level that can
/// split, and the group counts).
pub const fn page0_len() -> usize {
    GROUPS_AT + GROUPS as usize / 2
}

const _: () = assert!(bitmap_byte(node_bit(MAX_LEVEL, 0) - 1) + 1 == GROUPS_AT);

/// Pages a directory object may span.
pub const fn max_pages() -> u32 {
    1 + (1 << MAX_LEVEL)
}

/// What an entry names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Kind {
    /// A file.
    File,
    /// A directory.
    Dir,
}

/// Where an entry's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Body<'a> {
    /// A directory or a file with its own object.
    Object(u32),
    /// A file whose bytes are in the entry.
    Inline(&'a [u8]),
}

/// A parsed entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Entry<'a> {
    /// Kind.
    pub kind: Kind,
    /// Name.
    pub name: &'a [u8],
    /// User attributes.
    pub attrs: &'a [u8],
    /// Data or object.
    pub body: Body<'a>,
}

impl Entry<'_> {
    /// Encoded length.
    pub fn len(&self) -> usize {
        ENTRY_HEADER_LEN + self.name.len() + self.attrs.len() + self.inline_len()
    }

    /// Bytes of data in the entry (0 when it names an object).
    pub fn inline_len(&self) -> usize {
        match self.body {
            Body::Inline(d) => d.len(),
            Body::Object(_) => 0,
        }
    }

    /// Whether it encodes to nothing (never: entries have a name).
    pub fn is_empty(&self) -> bool {
        false
    }

    fn encode(&self, out: &mut [u8]) {
        out[0] = match self.kind {
            Kind::File => 1,
            Kind::Dir => 2,
        };
        out[1] = self.name.len() as u8;
        out[2] = self.attrs.len() as u8;
        let (flags, obj, inline): (u8, u32, &[u8]) = match self.body {
            Body::Object(o) => (0, o, &[]),
            Body::Inline(d) => (INLINE, 0, d),
        };
        out[3] = flags;
        put32(out, 4, obj);
        put16(out, 8, inline.len() as u16);
        let mut at = ENTRY_HEADER_LEN;
        for part in [self.name, self.attrs, inline] {
            out[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
    }
}

/// The header of a bucket page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Header {
    /// Level of its node.
    pub level: u32,
    /// Prefix of its node.
    pub prefix: u32,
    /// Entries on the page.
    pub count: u16,
    /// Bytes of entries.
    pub used: u16,
}

impl Header {
    /// A fresh, empty bucket of node `(level, prefix)`.
    pub fn empty(level: u32, prefix: u32) -> Self {
        Header {
            level,
            prefix,
            ..Header::default()
        }
    }
}

/// Parses the header of a bucket page that should belong to node `(level, prefix)`
/// (`None`: a page never written, all zeros, or nothing read).
pub fn header(page: &[u8], level: u32, prefix: u32) -> Result<Option<Header>, Corrupted> {
    if page.len() < HEADER_LEN || page[..HEADER_LEN].iter().all(|&b| b == 0) {
        return Ok(None);
    }
    if page[0..2] != MAGIC || page[2] != VERSION || page[3] != KIND_BUCKET {
        return Err(Corrupted);
    }
    let h = Header {
        level: page[4] as u32,
        count: le16(page, 6),
        used: le16(page, 8),
        prefix: le32(page, 12),
    };
    // A left child keeps its parent's page: the level may be lower than asked only
    // for a page no split has rewritten yet, which `locate` never asks for.
    if h.level != level || h.prefix != prefix || HEADER_LEN + h.used as usize > page.len() {
        return Err(Corrupted);
    }
    Ok(Some(h))
}

/// Writes `h` into the first bytes of `page` (entries untouched).
pub fn put_header(page: &mut [u8], h: &Header) {
    page[0..2].copy_from_slice(&MAGIC);
    page[2] = VERSION;
    page[3] = KIND_BUCKET;
    page[4] = h.level as u8;
    page[5] = 0;
    put16(page, 6, h.count);
    put16(page, 8, h.used);
    put16(page, 10, 0);
    put32(page, 12, h.prefix);
}

/// The entries of a page whose header is `h`, with their byte offsets.
pub fn entries<'a>(page: &'a [u8], h: &Header) -> Entries<'a> {
    Entries {
        page,
        at: HEADER_LEN,
        end: HEADER_LEN + h.used as usize,
        left: h.count,
    }
}

/// Iterator over a page's entries: `(offset, entry)`; a malformed entry ends it with
/// `Err(Corrupted)`.
pub struct Entries<'a> {
    page: &'a [u8],
    at: usize,
    end: usize,
    left: u16,
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<(usize, Entry<'a>), Corrupted>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            // Bytes past the last entry: the count and the length disagree (once).
            let bad = self.at != self.end;
            self.at = self.end;
            return bad.then_some(Err(Corrupted));
        }
        let r = parse_entry(&self.page[..self.end], self.at);
        match r {
            Ok((e, len)) => {
                let at = self.at;
                self.at += len;
                self.left -= 1;
                Some(Ok((at, e)))
            }
            Err(c) => {
                self.left = 0;
                self.at = self.end;
                Some(Err(c))
            }
        }
    }
}

pub(crate) fn parse_entry(b: &[u8], at: usize) -> Result<(Entry<'_>, usize), Corrupted> {
    let h = b.get(at..at + ENTRY_HEADER_LEN).ok_or(Corrupted)?;
    let kind = match h[0] {
        1 => Kind::File,
        2 => Kind::Dir,
        _ => return Err(Corrupted),
    };
    let (nl, al, flags) = (h[1] as usize, h[2] as usize, h[3]);
    let obj = le32(h, 4);
    let il = le16(h, 8) as usize;
    if nl == 0 || flags & !INLINE != 0 {
        return Err(Corrupted);
    }
    let inline = flags & INLINE != 0;
    if inline && (kind == Kind::Dir || obj != 0) || !inline && (obj == 0 || il != 0) {
        return Err(Corrupted);
    }
    let start = at + ENTRY_HEADER_LEN;
    let name = b.get(start..start + nl).ok_or(Corrupted)?;
    let attrs = b.get(start + nl..start + nl + al).ok_or(Corrupted)?;
    let data = b
        .get(start + nl + al..start + nl + al + il)
        .ok_or(Corrupted)?;
    let body = if inline {
        Body::Inline(data)
    } else {
        Body::Object(obj)
    };
    Ok((
        Entry {
            kind,
            name,
            attrs,
            body,
        },
        ENTRY_HEADER_LEN + nl + al + il,
    ))
}

/// Finds the entry named `name` on a page: `(offset, entry)`.
pub fn find<'a>(
    page: &'a [u8],
    h: &Header,
    name: &[u8],
) -> Result<Option<(usize, Entry<'a>)>, Corrupted> {
    for e in entries(page, h) {
        let (at, e) = e?;
        if e.name == name {
            return Ok(Some((at, e)));
        }
    }
    Ok(None)
}

/// Removes the entry at `at` (an offset [`find`] or [`entries`] returned) from a page
/// whose header is `h`, updating `h` and the page.
pub fn remove(page: &mut [u8], h: &mut Header, at: usize) -> Result<(), Corrupted> {
    let end = HEADER_LEN + h.used as usize;
    let (_, len) = parse_entry(&page[..end], at)?;
    page.copy_within(at + len..end, at);
    page[end - len..end].fill(0);
    h.used -= len as u16;
    h.count -= 1;
    put_header(page, h);
    Ok(())
}

/// Appends `e` to a page whose header is `h`; `false` (nothing changed) when it does
/// not fit.
pub fn insert(page: &mut [u8], h: &mut Header, e: &Entry<'_>) -> bool {
    let end = HEADER_LEN + h.used as usize;
    let len = e.len();
    if end + len > page.len() {
        return false;
    }
    e.encode(&mut page[end..end + len]);
    h.used += len as u16;
    h.count += 1;
    put_header(page, h);
    true
}

/// Room for entries on a page of `payload` bytes.
pub const fn capacity(payload: usize) -> usize {
    payload - HEADER_LEN
}

/// The name hash (FNV-1a, 32 bits).
pub fn hash(name: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in name {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page_with(entries_: &[Entry<'_>]) -> ([u8; 512], Header) {
        let mut p = [0u8; 512];
        let mut h = Header::empty(2, 3);
        put_header(&mut p, &h);
        for e in entries_ {
            assert!(insert(&mut p, &mut h, e));
        }
        (p, h)
    }

    #[test]
    fn directory_headers_of_every_version_parse_and_others_do_not() {
        let mut h = DirHeader::new(7, 2);
        assert!(h.counts_buckets && !h.groups);
        h.count = 3;
        let b = h.encode();
        assert_eq!(b[2], 2);
        assert_eq!(DirHeader::parse(&b), Ok(h));
        let v1 = DirHeader {
            counts_buckets: false,
            ..h
        };
        let mut b = v1.encode();
        assert_eq!((b[2], le32(&b, 4)), (1, 3));
        assert_eq!(DirHeader::parse(&b), Ok(v1));
        assert_eq!(b[COUNT_FIELD_AT..COUNT_FIELD_AT + 6], v1.count_field());
        for bad in [0u8, 4, 0xFF] {
            b[2] = bad;
            assert_eq!(DirHeader::parse(&b), Err(Corrupted));
        }
    }

    #[test]
    fn a_version_3_header_sums_its_group_counts_and_refuses_impossible_ones() {
        let mut p0 = [0u8; 2048];
        let v3 = DirHeader::new(7, 3);
        p0[..DIR_HEADER_LEN].copy_from_slice(&v3.encode());
        assert_eq!((p0[2], le32(&p0, 4)), (3, 0));
        assert_eq!(DirHeader::parse(&p0), Ok(v3));
        // Too short for its group counts.
        assert_eq!(DirHeader::parse(&p0[..GROUPS_AT + 511]), Err(Corrupted));
        for (g, n) in [(0u32, 1u8), (1, 8), (1023, 5), (512, 2)] {
            let at = group_byte(g);
            p0[at] = with_nibble(p0[at], g, n);
        }
        let h = DirHeader::parse(&p0).unwrap();
        assert_eq!((h.count, h.groups, h.parent), (16, true, 7));
        assert_eq!(group_count(&p0, 0), 1);
        assert_eq!(group_count(&p0, 1 + 3 * GROUPS), 8);
        assert_eq!(group_count(&p0, 1023), 5);
        assert_eq!(group_count(&p0, 2), 0);
        // A count past the 8 buckets of a group, and a stored count, are corrupt.
        let mut bad = p0;
        bad[group_byte(2)] = with_nibble(0, 2, 9);
        assert_eq!(DirHeader::parse(&bad), Err(Corrupted));
        let mut bad = p0;
        bad[4] = 1;
        assert_eq!(DirHeader::parse(&bad), Err(Corrupted));
        assert_eq!(page0_len(), GROUPS_AT + 512);
    }

    #[test]
    fn entries_round_trip_and_remove() {
        let a = Entry {
            kind: Kind::File,
            name: b"a.txt",
            attrs: b"xy",
            body: Body::Inline(b"hello"),
        };
        let b = Entry {
            kind: Kind::Dir,
            name: b"sub",
            attrs: b"",
            body: Body::Object(7),
        };
        let (mut p, mut h) = page_with(&[a, b]);
        let parsed = header(&p, 2, 3).unwrap().unwrap();
        assert_eq!(parsed, h);
        assert_eq!(header(&p, 2, 1), Err(Corrupted));
        let all: Vec<_> = entries(&p, &parsed).map(|e| e.unwrap().1).collect();
        assert_eq!(all, vec![a, b]);
        let (at, e) = find(&p, &h, b"sub").unwrap().unwrap();
        assert_eq!(e, b);
        remove(&mut p, &mut h, at).unwrap();
        let parsed = header(&p, 2, 3).unwrap().unwrap();
        assert_eq!(parsed.count, 1);
        assert!(find(&p, &parsed, b"sub").unwrap().is_none());
        let (at, _) = find(&p, &parsed, b"a.txt").unwrap().unwrap();
        remove(&mut p, &mut h, at).unwrap();
        assert_eq!(header(&p, 2, 3).unwrap().unwrap().used, 0);
    }

    #[test]
    fn zeros_are_an_empty_page_and_garbage_is_corrupted() {
        assert_eq!(header(&[0u8; 64], 0, 0), Ok(None));
        assert_eq!(header(&[0xFFu8; 64], 0, 0), Err(Corrupted));
        let (mut p, h) = page_with(&[Entry {
            kind: Kind::File,
            name: b"f",
            attrs: b"",
            body: Body::Object(3),
        }]);
        // An entry claiming more bytes than the page holds.
        p[HEADER_LEN + 1] = 200;
        assert!(entries(&p, &h).any(|e| e.is_err()));
        // Every single-byte change parses or fails cleanly, and iteration ends.
        for i in 0..64 {
            for v in [0u8, 1, 2, 0x7F, 0xFF] {
                let mut q = p;
                q[i] = v;
                if let Ok(Some(h)) = header(&q, 2, 3) {
                    assert!(entries(&q, &h).count() <= h.count as usize + 1);
                }
            }
        }
    }

    #[test]
    fn the_split_bitmap_leads_to_leaves() {
        let mut p0 = [0u8; 2048];
        p0[..DIR_HEADER_LEN].copy_from_slice(&DirHeader::default().encode());
        assert_eq!(leaf_of(&p0, 0xFFFF_FFFF), (0, 0));
        let set = |p0: &mut [u8; 2048], l: u32, p: u32| {
            let bit = node_bit(l, p);
            p0[bitmap_byte(bit)] |= 1 << (bit % 8);
        };
        set(&mut p0, 0, 0);
        set(&mut p0, 1, 1);
        assert_eq!(leaf_of(&p0, 0b000), (1, 0));
        assert_eq!(leaf_of(&p0, 0b001), (2, 0b01));
        assert_eq!(leaf_of(&p0, 0b011), (2, 0b11));
        assert_eq!(bucket_page(0b11), 4);
        assert!(page0_len() <= 2048);
        assert!(!is_split(&p0, MAX_LEVEL, 0));
    }
}
