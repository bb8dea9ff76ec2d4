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
//! - page 0 counts the buckets holding a name, per group of up to 8 buckets (version
//!   3; in all, version 2; names in a version-1 directory), so a create or remove in a
//!   bucket that keeps a name writes the bucket alone ([`count_after`]), and a listing
//!   skips the groups whose count is 0 unread.
//!
//! Namespace changes (insert, remove, rename) are single oftl transactions built by the
//! caller from the bucket images these functions prepare.

use oftl::TxOp;

use crate::error::Error;
use crate::format::bucket::{
    self, bitmap_byte, bucket_page, entries, group_byte, group_of, header, leaf_of, nibble,
    node_bit, put_header, with_nibble, DirHeader, Entry, Header, GROUP_MAX, MAX_LEVEL,
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
    /// Page 0's byte holding the count of the bucket's group when it was located
    /// ([`bucket::group_byte`]; 0 in a directory of version 1 or 2).
    pub group: u8,
}

/// The writes to page 0 a change of a directory's buckets needs: its count field
/// (versions 1 and 2, and the one that makes a header version 3), and the bytes of the
/// group counts that change (version 3). Each is its own `TxOp::Write`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Page0Writes {
    n: u8,
    at: [u16; 3],
    len: [u8; 3],
    bytes: [[u8; 6]; 3],
}

impl Page0Writes {
    fn push(&mut self, at: usize, bytes: &[u8]) -> Result<(), Corrupted> {
        let i = self.n as usize;
        if i == self.at.len() || bytes.len() > 6 {
            return Err(Corrupted);
        }
        self.at[i] = u16::try_from(at).map_err(|_| Corrupted)?;
        self.len[i] = bytes.len() as u8;
        self.bytes[i][..bytes.len()].copy_from_slice(bytes);
        self.n += 1;
        Ok(())
    }

    /// The writes: offset in the directory object and bytes.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> {
        (0..self.n as usize).map(|i| (self.at[i] as u64, &self.bytes[i][..self.len[i] as usize]))
    }

    /// Appends them to `ops` as writes to directory `dir`.
    pub fn push_ops<'x>(
        &'x self,
        dir: u32,
        ops: &mut heapless::Vec<TxOp<'x>, 8>,
    ) -> Result<(), Corrupted> {
        for (offset, data) in self.iter() {
            ops.push(TxOp::Write {
                obj: dir,
                offset,
                data,
            })
            .map_err(|_| Corrupted)?;
        }
        Ok(())
    }
}

/// The group-count bytes of a version-3 directory after the changes of `locs` (each
/// bucket once, all of one directory, located with page 0 as it is now), appended to
/// `out`: one write per byte that changes.
fn group_writes(locs: &[&Loc], out: &mut Page0Writes) -> Result<(), Corrupted> {
    // (byte offset, byte before, byte after) for at most one byte per loc.
    let mut bytes = [(0usize, 0u8, 0u8); 2];
    let mut n = 0;
    for l in locs {
        let delta = (l.head.count > 0) as i8 - (l.before > 0) as i8;
        if delta == 0 {
            continue;
        }
        let g = group_of(l.head.prefix);
        let at = group_byte(g);
        let i = match bytes[..n].iter().position(|b| b.0 == at) {
            Some(i) => i,
            None => {
                *bytes.get_mut(n).ok_or(Corrupted)? = (at, l.group, l.group);
                n += 1;
                n - 1
            }
        };
        let count = nibble(bytes[i].2, g) as i8 + delta;
        if !(0..=GROUP_MAX as i8).contains(&count) {
            return Err(Corrupted);
        }
        bytes[i].2 = with_nibble(bytes[i].2, g, count as u8);
    }
    for &(at, was, is) in &bytes[..n] {
        if was != is {
            out.push(at, &[is])?;
        }
    }
    Ok(())
}

/// The writes to page 0 ([`Page0Writes`]) after the changes made to the bucket images
/// of `locs` since they were located (every one a bucket of the directory whose page 0
/// is `root`, each bucket once); none when it stays as it is. `version` is the newest
/// directory header the volume allows (1 to 3): a header older than it becomes that
/// version when it is empty before or after the change, where every count is 0 (a
/// version-1 header reaches version 2 only on a version-2 volume).
pub fn count_after(root: &DirHeader, locs: &[&Loc], version: u8) -> Result<Page0Writes, Corrupted> {
    let mut out = Page0Writes::default();
    if root.groups {
        group_writes(locs, &mut out)?;
        return Ok(out);
    }
    let buckets = root.counts_buckets || (version >= 2 && root.count == 0);
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
    if version >= 3 && (root.count == 0 || count == 0) {
        // Version 3 from here: every group count is 0 (versions 1 and 2 leave them 0),
        // and the buckets that now hold a name count in theirs.
        let new = DirHeader::new(root.parent, 3);
        out.push(COUNT_AT as usize, &new.count_field())?;
        if count > 0 {
            group_writes(locs, &mut out)?;
        }
        return Ok(out);
    }
    let new = DirHeader {
        count,
        counts_buckets: buckets || (version >= 2 && count == 0),
        ..*root
    };
    if new != *root {
        out.push(COUNT_AT as usize, &new.count_field())?;
    }
    Ok(out)
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
    let group = if root.groups {
        buf[group_byte(group_of(prefix))]
    } else {
        0
    };
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
        group,
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
    // got some (the full bucket had names: a version-1 header does not change); in
    // version 3, the right child's group counts it, and the left's loses the bucket
    // when every name moved right.
    let mut page0 = Page0Writes::default();
    if loc.root.groups {
        let right_group = group_byte(group_of(right.prefix));
        let mut rbyte = [loc.group];
        if right_group != group_byte(group_of(pfx))
            && s.read(loc.dir, right_group as u64, &mut rbyte)? != 1
        {
            return Err(Error::Corrupted);
        }
        let l = Loc {
            head: left,
            before: old.count,
            ..*loc
        };
        let r = Loc {
            head: right,
            before: 0,
            group: rbyte[0],
            ..*loc
        };
        group_writes(&[&l, &r], &mut page0)?;
    } else if loc.root.counts_buckets && left.count > 0 && moved > 0 {
        let count = DirHeader {
            count: loc.root.count.checked_add(1).ok_or(Corrupted)?,
            ..loc.root
        };
        page0.push(COUNT_AT as usize, &count.count_field())?;
    }
    let mut ops = heapless::Vec::<TxOp<'_>, 8>::new();
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
    page0.push_ops(loc.dir, &mut ops)?;
    s.transact(&ops)
}

/// Page 0 of a new directory of header `version` (header; the bitmap and the group
/// counts are all zeros: one empty bucket).
pub fn new_dir_page(parent: u32, version: u8) -> [u8; bucket::DIR_HEADER_LEN] {
    DirHeader::new(parent, version).encode()
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
    use crate::format::bucket::{group_count, GROUPS};

    fn loc(before: u16, after: u16) -> Loc {
        at(0, before, after, 0)
    }

    /// A bucket of prefix `prefix` whose group byte reads `group`.
    fn at(prefix: u32, before: u16, after: u16, group: u8) -> Loc {
        Loc {
            dir: 5,
            page: bucket_page(prefix),
            head: Header {
                count: after,
                ..Header::empty(13, prefix)
            },
            root: DirHeader::new(2, 2),
            found: None,
            before,
            group,
        }
    }

    fn header(count: u32, counts_buckets: bool) -> DirHeader {
        DirHeader {
            count,
            counts_buckets,
            groups: false,
            parent: 2,
        }
    }

    /// Page 0 of `root` with `groups` (group, count) after the writes.
    fn apply(root: DirHeader, groups: &[(u32, u8)], w: Page0Writes) -> Vec<u8> {
        let mut b = vec![0u8; bucket::page0_len()];
        b[..bucket::DIR_HEADER_LEN].copy_from_slice(&root.encode());
        for &(g, n) in groups {
            let i = group_byte(g);
            b[i] = with_nibble(b[i], g, n);
        }
        for (offset, data) in w.iter() {
            b[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        }
        b
    }

    fn after(root: DirHeader, locs: &[&Loc], v2: bool) -> Option<DirHeader> {
        let w = count_after(&root, locs, if v2 { 2 } else { 1 }).unwrap();
        (w.iter().count() > 0).then(|| DirHeader::parse(&apply(root, &[], w)).unwrap())
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
        assert!(count_after(&header(0, true), &[&loc(1, 0)], 2).is_err());
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

    #[test]
    fn version_3_counts_per_group_in_one_byte_per_group_pair() {
        let v3 = DirHeader::new(2, 3);
        // Group 4 holds 2 buckets with names, group 5 (the same byte) 1.
        let groups = [(4u32, 2u8), (5, 1)];
        let page0 = apply(v3, &groups, Page0Writes::default());
        let root = DirHeader::parse(&page0).unwrap();
        assert_eq!(root.count, 3);
        let byte = page0[group_byte(4)];
        let run = |locs: &[&Loc]| {
            let w = count_after(&root, locs, 3).unwrap();
            let b = apply(v3, &groups, w);
            (w.iter().count(), DirHeader::parse(&b).unwrap().count, b)
        };
        // No bucket empties or fills: nothing written.
        assert_eq!(run(&[&at(4, 3, 4, byte)]).0, 0);
        // A bucket of group 4 (prefix 4 + 1024) gets its first name: one byte.
        let (n, count, b) = run(&[&at(4 + GROUPS, 0, 1, byte)]);
        assert_eq!(
            (n, count, group_count(&b, 4), group_count(&b, 5)),
            (1, 4, 3, 1)
        );
        // One empties in group 5 and one fills in group 4: one byte, the same count.
        let (n, count, b) = run(&[&at(5, 1, 0, byte), &at(4, 0, 1, byte)]);
        assert_eq!(
            (n, count, group_count(&b, 4), group_count(&b, 5)),
            (1, 3, 3, 0)
        );
        // Groups in two bytes: two writes.
        let (n, count, b) = run(&[&at(5, 1, 0, byte), &at(9, 0, 1, 0)]);
        assert_eq!((n, count, group_count(&b, 9)), (2, 3, 1));
        // A group that would pass 8 buckets, or go below 0, is corrupt.
        assert!(count_after(&root, &[&at(6, 1, 0, 0)], 3).is_err());
        let full = with_nibble(0, 6, 8);
        assert!(count_after(&root, &[&at(6, 0, 1, full)], 3).is_err());
    }

    #[test]
    fn older_headers_turn_version_3_where_they_are_empty() {
        for old in [header(0, false), header(0, true)] {
            // Filled while empty: the field (version 3, count 0) and the group byte.
            let w = count_after(&old, &[&at(3, 0, 1, 0)], 3).unwrap();
            assert_eq!(w.iter().count(), 2);
            let h = DirHeader::parse(&apply(old, &[], w)).unwrap();
            assert_eq!((h.groups, h.count, h.parent), (true, 1, 2));
        }
        for old in [header(1, false), header(1, true)] {
            // Emptied: the field alone (the group counts were never written).
            let w = count_after(&old, &[&at(3, 1, 0, 0)], 3).unwrap();
            assert_eq!(w.iter().count(), 1);
            let h = DirHeader::parse(&apply(old, &[], w)).unwrap();
            assert_eq!((h.groups, h.count), (true, 0));
        }
        // Not empty before or after: stays as it is.
        let v2 = header(3, true);
        assert!(
            count_after(&v2, &[&at(3, 2, 1, 0)], 3)
                .unwrap()
                .iter()
                .count()
                == 0
        );
        assert_eq!(
            count_after(&v2, &[&at(3, 0, 1, 0)], 3)
                .unwrap()
                .iter()
                .count(),
            1
        );
    }
}
