//! Directories: one oftl object per directory, holding a binary hash trie.
//!
//! Page 0 is the directory header: a count (0 exactly when the directory is empty), the
//! parent, and a split bitmap with one bit per trie node. The names of a leaf node
//! `(level l, prefix p)` (the names whose hash ends in the `l` bits of `p`) live on
//! bucket page `1 + p`. When a bucket fills up it **splits**: the names with bit `l` of
//! their hash set move to the new right child's page `1 + p + 2^l`, the others stay on
//! page `1 + p` (now the left child's), and the node's bit is set, all in one oftl
//! transaction. So:
//!
//! - a lookup reads **2 pages** (page 0, then the bucket) whatever the size of the
//!   directory, up to `2^MAX_LEVEL` buckets (8,192: about 270,000 names of 20 bytes),
//!   plus the store's mapping when it is not cached: its table page, and for a
//!   directory past oftl's 3 directly mapped pages an index page (5 reads for the
//!   first lookup after a mount in a directory of 16,384 names, review s54);
//! - a split programs 3 pages (two buckets and page 0; 4 when both children get names
//!   in a directory that counts buckets, page 0's count being a second write) and
//!   leaves no page holding stale names; buckets are half full after a split, about
//!   70 % on average;
//! - page 0's count is the number of buckets holding a name (version 2; names in a
//!   version-1 directory), so a create or remove in a bucket that keeps a name writes
//!   the bucket alone ([`count_after`]).
//!
//! Namespace changes (insert, remove, rename) are single oftl transactions built by the
//! caller from the bucket images these functions prepare.

use oftl::TxOp;

use crate::error::Error;
use crate::format::bucket::{
    self, bitmap_byte, bucket_page, entries, header, leaf_of, node_bit, put_header, DirHeader,
    Entry, Header, MAX_LEVEL,
};
use crate::format::Corrupted;
use crate::store::Store;

/// Offset in page 0 of the bytes [`count_after`] gives (version, kind and count).
pub const COUNT_AT: u64 = bucket::COUNT_FIELD_AT as u64;
/// Offset of the parent directory in page 0.
pub const PARENT_AT: u64 = 8;

/// Where a name is (or would go) in a directory; its bucket page is in the caller's
/// buffer.
#[derive(Clone, Copy, Debug)]
pub struct Loc {
    /// Directory object.
    pub dir: u32,
    /// Object page of the bucket.
    pub page: u32,
    /// The bucket's header (a fresh one for a page never written).
    pub head: Header,
    /// Page 0's header.
    pub root: DirHeader,
    /// Offset of the entry, if the name is there.
    pub found: Option<usize>,
    /// Names in the bucket when it was located (`head.count` before the caller's
    /// changes).
    pub before: u16,
}

/// Page 0's count field (bytes [`COUNT_AT`]`..+6`) after the changes made to the bucket
/// images of `locs` since they were located (every one a bucket of the directory whose
/// page 0 is `root`, each bucket once); `None` when it stays as it is. With `v2` (the
/// volume allows version-2 headers) a version-1 header that is empty before or after
/// becomes version 2 (both counts are 0 then).
pub fn count_after(
    root: &DirHeader,
    locs: &[&Loc],
    v2: bool,
) -> Result<Option<[u8; 6]>, Corrupted> {
    let buckets = root.counts_buckets || (v2 && root.count == 0);
    let mut n = root.count as i64;
    for l in locs {
        let (was, is) = (l.before as i64, l.head.count as i64);
        n += if buckets {
            (is > 0) as i64 - (was > 0) as i64
        } else {
            is - was
        };
    }
    let count = u32::try_from(n).map_err(|_| Corrupted)?;
    let new = DirHeader {
        count,
        counts_buckets: buckets || (v2 && count == 0),
        parent: root.parent,
    };
    Ok((new != *root).then(|| new.count_field()))
}

/// Reads page `page` of directory `dir` into `buf` (one payload; a hole or a page past
/// the end reads as zeros).
pub fn read_page<S: Store>(
    s: &mut S,
    dir: u32,
    page: u32,
    buf: &mut [u8],
) -> Result<(), Error<S::FlashError>> {
    let p = s.payload();
    let n = s.read(dir, page as u64 * p as u64, &mut buf[..p])?;
    buf[n..p].fill(0);
    Ok(())
}

/// Finds where `name` lives in directory `dir`, leaving its bucket in `buf`.
pub fn locate<S: Store>(
    s: &mut S,
    dir: u32,
    name: &[u8],
    buf: &mut [u8],
) -> Result<Loc, Error<S::FlashError>> {
    let p = s.payload();
    read_page(s, dir, 0, buf)?;
    let root = DirHeader::parse(&buf[..p])?;
    let (level, prefix) = leaf_of(&buf[..p], bucket::hash(name));
    let page = bucket_page(prefix);
    read_page(s, dir, page, buf)?;
    let head = match header(&buf[..p], level, prefix)? {
        Some(h) => h,
        None => Header::empty(level, prefix),
    };
    let found = bucket::find(&buf[..p], &head, name)?.map(|(at, _)| at);
    Ok(Loc {
        dir,
        page,
        head,
        root,
        found,
        before: head.count,
    })
}

/// Splits the full bucket at `loc` (its image in `a`), using `b` for the new right
/// child: one transaction that changes no name. `locate` again afterwards.
pub fn split<S: Store>(
    s: &mut S,
    loc: &Loc,
    a: &mut [u8],
    b: &mut [u8],
) -> Result<(), Error<S::FlashError>> {
    let (l, pfx) = (loc.head.level, loc.head.prefix);
    if l >= MAX_LEVEL {
        return Err(Error::DirectoryFull);
    }
    let p = s.payload();
    let bit = node_bit(l, pfx);
    let at = bitmap_byte(bit);
    let mut byte = [0u8; 1];
    if s.read(loc.dir, at as u64, &mut byte)? != 1 || byte[0] & (1 << (bit % 8)) != 0 {
        return Err(Error::Corrupted);
    }
    byte[0] |= 1 << (bit % 8);
    let mut left = Header::empty(l + 1, pfx);
    let mut right = Header::empty(l + 1, pfx | 1 << l);
    b[..p].fill(0);
    put_header(&mut b[..p], &right);
    // The left child is rebuilt in place: the entries that stay move to the front.
    let old = loc.head;
    let mut write_at = bucket::HEADER_LEN;
    let mut read_at = bucket::HEADER_LEN;
    let end = bucket::HEADER_LEN + old.used as usize;
    let mut moved = 0u16;
    while read_at < end {
        let (len, goes_right) = {
            let (e, len) = bucket::parse_entry(&a[..end], read_at)?;
            let right_side = bucket::hash(e.name) & (1 << l) != 0;
            if right_side && !bucket::insert(&mut b[..p], &mut right, &e) {
                return Err(Error::Corrupted);
            }
            (len, right_side)
        };
        if goes_right {
            moved += 1;
        } else {
            a.copy_within(read_at..read_at + len, write_at);
            write_at += len;
            left.count += 1;
        }
        read_at += len;
    }
    if left.count + moved != old.count {
        return Err(Error::Corrupted);
    }
    left.used = (write_at - bucket::HEADER_LEN) as u16;
    a[write_at..p].fill(0);
    put_header(&mut a[..p], &left);
    // A directory that counts buckets has one more with a name when both children
    // got some (the full bucket had names: a version-1 header does not change).
    let mut count = loc.root;
    if count.counts_buckets && left.count > 0 && moved > 0 {
        count.count = count.count.checked_add(1).ok_or(Corrupted)?;
    }
    let field = count.count_field();
    let mut ops = heapless::Vec::<TxOp<'_>, 4>::new();
    let pages = [
        TxOp::Write {
            obj: loc.dir,
            offset: loc.page as u64 * p as u64,
            data: &a[..p],
        },
        TxOp::Write {
            obj: loc.dir,
            offset: bucket_page(right.prefix) as u64 * p as u64,
            data: &b[..p],
        },
        TxOp::Write {
            obj: loc.dir,
            offset: at as u64,
            data: &byte,
        },
    ];
    for op in pages {
        ops.push(op).map_err(|_| Error::Corrupted)?;
    }
    if count != loc.root {
        ops.push(TxOp::Write {
            obj: loc.dir,
            offset: COUNT_AT,
            data: &field,
        })
        .map_err(|_| Error::Corrupted)?;
    }
    s.transact(&ops)
}

/// Page 0 of a new directory (header; the bitmap is all zeros: one bucket), counting
/// buckets when the volume allows it (`v2`).
pub fn new_dir_page(parent: u32, v2: bool) -> [u8; bucket::DIR_HEADER_LEN] {
    DirHeader {
        counts_buckets: v2,
        ..DirHeader::new(parent)
    }
    .encode()
}

/// An entry with its bytes copied out of a page buffer.
#[derive(Clone, Copy)]
pub struct OwnedEntry {
    /// Kind.
    pub kind: bucket::Kind,
    name: [u8; crate::NAME_MAX],
    name_len: u8,
    attrs: [u8; crate::ATTR_MAX],
    attrs_len: u8,
    /// Object (0: inline).
    pub object: u32,
    inline: [u8; crate::INLINE_MAX],
    inline_len: u16,
}

impl OwnedEntry {
    /// A copy of `e` (refused as corrupted when a field is longer than this build
    /// allows).
    pub fn of(e: &Entry<'_>) -> Result<Self, Corrupted> {
        let mut o = OwnedEntry {
            kind: e.kind,
            name: [0; crate::NAME_MAX],
            name_len: 0,
            attrs: [0; crate::ATTR_MAX],
            attrs_len: 0,
            object: 0,
            inline: [0; crate::INLINE_MAX],
            inline_len: 0,
        };
        o.set_name(e.name)?;
        o.set_attrs(e.attrs)?;
        match e.body {
            bucket::Body::Object(id) => o.object = id,
            bucket::Body::Inline(d) => o.set_inline(d)?,
        }
        Ok(o)
    }

    /// Whether [`OwnedEntry::of`] takes a copy of `e` (`Err` where it refuses one).
    pub fn check(e: &Entry<'_>) -> Result<(), Corrupted> {
        let inline = match e.body {
            bucket::Body::Object(_) => 0,
            bucket::Body::Inline(d) => d.len(),
        };
        if e.name.is_empty()
            || e.name.len() > crate::NAME_MAX
            || e.attrs.len() > crate::ATTR_MAX
            || inline > crate::INLINE_MAX
        {
            return Err(Corrupted);
        }
        Ok(())
    }

    /// A new entry.
    pub fn new(kind: bucket::Kind, name: &[u8], object: u32) -> Result<Self, Corrupted> {
        let mut o = Self::of(&Entry {
            kind,
            name,
            attrs: &[],
            body: bucket::Body::Inline(&[]),
        })?;
        o.object = object;
        Ok(o)
    }

    /// Renames.
    pub fn set_name(&mut self, name: &[u8]) -> Result<(), Corrupted> {
        if name.is_empty() || name.len() > crate::NAME_MAX {
            return Err(Corrupted);
        }
        self.name[..name.len()].copy_from_slice(name);
        self.name_len = name.len() as u8;
        Ok(())
    }

    /// Replaces the attributes.
    pub fn set_attrs(&mut self, attrs: &[u8]) -> Result<(), Corrupted> {
        if attrs.len() > crate::ATTR_MAX {
            return Err(Corrupted);
        }
        self.attrs[..attrs.len()].copy_from_slice(attrs);
        self.attrs_len = attrs.len() as u8;
        Ok(())
    }

    /// Makes it an inline file holding `data`.
    pub fn set_inline(&mut self, data: &[u8]) -> Result<(), Corrupted> {
        if data.len() > crate::INLINE_MAX {
            return Err(Corrupted);
        }
        self.inline[..data.len()].copy_from_slice(data);
        self.inline_len = data.len() as u16;
        self.object = 0;
        Ok(())
    }

    /// Name.
    pub fn name(&self) -> &[u8] {
        &self.name[..self.name_len as usize]
    }

    /// Attributes.
    pub fn attrs(&self) -> &[u8] {
        &self.attrs[..self.attrs_len as usize]
    }

    /// Inline bytes (inline files).
    pub fn inline(&self) -> &[u8] {
        &self.inline[..self.inline_len as usize]
    }

    /// As an entry to encode.
    pub fn entry(&self) -> Entry<'_> {
        Entry {
            kind: self.kind,
            name: self.name(),
            attrs: self.attrs(),
            body: if self.object == 0 {
                bucket::Body::Inline(self.inline())
            } else {
                bucket::Body::Object(self.object)
            },
        }
    }
}

/// Reads the entry at `at` of the bucket in `buf`.
pub fn entry_at(buf: &[u8], loc: &Loc, at: usize) -> Result<OwnedEntry, Corrupted> {
    OwnedEntry::of(&entry_ref(buf, loc, at)?)
}

/// The entry at `at` of the bucket in `buf`, borrowed from it: what [`entry_at`] copies
/// out (refused as corrupted in the same cases), without the copy's ~370 bytes of stack
/// for callers that only look at it.
pub fn entry_ref<'b>(buf: &'b [u8], loc: &Loc, at: usize) -> Result<Entry<'b>, Corrupted> {
    for e in entries(buf, &loc.head) {
        let (o, e) = e?;
        if o == at {
            OwnedEntry::check(&e)?;
            return Ok(e);
        }
    }
    Err(Corrupted)
}

/// Removes the entry at `loc.found` from the bucket image in `buf`.
pub fn remove_from(buf: &mut [u8], loc: &mut Loc) -> Result<(), Corrupted> {
    let at = loc.found.ok_or(Corrupted)?;
    bucket::remove(buf, &mut loc.head, at)?;
    loc.found = None;
    Ok(())
}

/// Adds `e` to the bucket image in `buf`; `false` when it does not fit (split first).
pub fn insert_into(buf: &mut [u8], loc: &mut Loc, e: &Entry<'_>) -> bool {
    bucket::insert(buf, &mut loc.head, e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(before: u16, after: u16) -> Loc {
        Loc {
            dir: 5,
            page: 1,
            head: Header {
                count: after,
                ..Header::empty(0, 0)
            },
            root: DirHeader::new(2),
            found: None,
            before,
        }
    }

    fn header(count: u32, counts_buckets: bool) -> DirHeader {
        DirHeader {
            count,
            counts_buckets,
            parent: 2,
        }
    }

    fn after(root: DirHeader, locs: &[&Loc], v2: bool) -> Option<DirHeader> {
        count_after(&root, locs, v2).unwrap().map(|f| {
            let mut b = root.encode();
            b[bucket::COUNT_FIELD_AT..bucket::COUNT_FIELD_AT + 6].copy_from_slice(&f);
            DirHeader::parse(&b).unwrap()
        })
    }

    #[test]
    fn buckets_count_only_when_they_empty_or_fill() {
        let v2 = header(3, true);
        assert_eq!(after(v2, &[&loc(4, 5)], true), None);
        assert_eq!(after(v2, &[&loc(4, 3)], true), None);
        assert_eq!(after(v2, &[&loc(0, 1)], true), Some(header(4, true)));
        assert_eq!(after(v2, &[&loc(1, 0)], true), Some(header(2, true)));
        // A move between two buckets of one directory: one empties, one fills.
        assert_eq!(after(v2, &[&loc(1, 0), &loc(0, 1)], true), None);
        assert!(count_after(&header(0, true), &[&loc(1, 0)], true).is_err());
    }

    #[test]
    fn names_count_in_version_1_until_empty_and_only_on_a_version_2_volume_after() {
        let v1 = header(7, false);
        assert_eq!(after(v1, &[&loc(4, 5)], true), Some(header(8, false)));
        assert_eq!(after(v1, &[&loc(4, 4)], true), None);
        assert_eq!(after(v1, &[&loc(3, 2), &loc(2, 3)], true), None);
        // Emptied: version 2 on a volume that allows it, else still version 1.
        let last = header(1, false);
        assert_eq!(after(last, &[&loc(1, 0)], true), Some(header(0, true)));
        assert_eq!(after(last, &[&loc(1, 0)], false), Some(header(0, false)));
        // Changed while empty: counts buckets from the start.
        let empty = header(0, false);
        assert_eq!(after(empty, &[&loc(0, 1)], true), Some(header(1, true)));
        assert_eq!(after(empty, &[&loc(0, 1)], false), Some(header(1, false)));
        assert_eq!(after(empty, &[&loc(0, 0)], true), Some(header(0, true)));
    }
}
