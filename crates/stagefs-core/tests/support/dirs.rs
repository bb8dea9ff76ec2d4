//! The on-flash directory trie walked from the root, for the tests of page 0's count
//! (`dir_count.rs`, review s55): every directory's names and its buckets holding one.

use std::collections::BTreeMap;

use nand_hal::sim::SimError;
use oftl::TxOp;
use stagefs_core::format::bucket::{self, Body, DirHeader};
use stagefs_core::{Fs, Kind, Store};

/// One directory as the trie on flash has it.
#[derive(Debug)]
pub struct Walked {
    pub path: String,
    pub obj: u32,
    pub head: DirHeader,
    pub names: BTreeMap<String, Kind>,
    pub filled: u32,
    /// Files with an object of their own (not inline).
    pub file_objects: u32,
    /// Buckets holding a name, per group (header version 3's counts).
    pub groups: BTreeMap<u32, u8>,
    /// Page 0 as read.
    pub page0: Vec<u8>,
}

/// Reads page `page` of object `obj` (a hole reads as zeros).
pub fn page_of<S: Store<FlashError = SimError>>(
    fs: &mut Fs<S, 2048, 4>,
    obj: u32,
    page: u32,
) -> Result<Vec<u8>, String> {
    let p = Store::payload(fs.store());
    let mut buf = vec![0u8; p];
    let n = Store::read(fs.store_mut(), obj, page as u64 * p as u64, &mut buf)
        .map_err(|e| format!("read {obj}/{page}: {e:?}"))?;
    buf[n..].fill(0);
    Ok(buf)
}

/// Every directory from the root (object 2), each with its exact names (and kinds)
/// and the number of its buckets that hold one.
pub fn walk<S: Store<FlashError = SimError>>(
    fs: &mut Fs<S, 2048, 4>,
) -> Result<Vec<Walked>, String> {
    let mut out = Vec::new();
    let mut stack = vec![(2u32, String::from("/"))];
    while let Some((d, path)) = stack.pop() {
        let page0 = page_of(fs, d, 0)?;
        let head = DirHeader::parse(&page0).map_err(|_| format!("{path}: bad page 0"))?;
        let mut w = Walked {
            path: path.clone(),
            obj: d,
            head,
            names: BTreeMap::new(),
            filled: 0,
            file_objects: 0,
            groups: BTreeMap::new(),
            page0: page0.clone(),
        };
        let mut leaves = vec![(0u32, 0u32)];
        while let Some((l, pf)) = leaves.pop() {
            if bucket::is_split(&page0, l, pf) {
                leaves.push((l + 1, pf));
                leaves.push((l + 1, pf | 1 << l));
                continue;
            }
            let page = page_of(fs, d, bucket::bucket_page(pf))?;
            let Some(bh) = bucket::header(&page, l, pf)
                .map_err(|_| format!("{path}: bad bucket ({l},{pf})"))?
            else {
                continue;
            };
            w.filled += (bh.count > 0) as u32;
            if bh.count > 0 {
                *w.groups.entry(bucket::group_of(pf)).or_default() += 1;
            }
            for e in bucket::entries(&page, &bh) {
                let (_, e) = e.map_err(|_| format!("{path}: bad entry"))?;
                let name = String::from_utf8_lossy(e.name).to_string();
                match (e.kind, e.body) {
                    (Kind::Dir, Body::Object(o)) => stack.push((o, format!("{path}{name}/"))),
                    (Kind::File, Body::Object(_)) => w.file_objects += 1,
                    _ => {}
                }
                w.names.insert(name, e.kind);
            }
        }
        out.push(w);
    }
    Ok(out)
}

/// Every directory's count is exact for its version (and 0 exactly when empty), and
/// so is every group count of a version-3 header.
pub fn counts_exact<S: Store<FlashError = SimError>>(
    fs: &mut Fs<S, 2048, 4>,
) -> Result<Vec<Walked>, String> {
    let dirs = walk(fs)?;
    for w in &dirs {
        let want = if w.head.counts_buckets {
            w.filled
        } else {
            w.names.len() as u32
        };
        if w.head.count != want || (w.head.count == 0) != w.names.is_empty() {
            return Err(format!(
                "{}: count {} (version {}), want {want} ({} names in {} buckets)",
                w.path,
                w.head.count,
                w.head.version(),
                w.names.len(),
                w.filled
            ));
        }
        if w.head.groups {
            for g in 0..bucket::GROUPS {
                let (has, want) = (
                    bucket::group_count(&w.page0, g),
                    w.groups.get(&g).copied().unwrap_or(0),
                );
                if has != want {
                    return Err(format!("{}: group {g} counts {has}, want {want}", w.path));
                }
            }
        } else if w.page0[bucket::GROUPS_AT..bucket::page0_len()]
            .iter()
            .any(|&b| b != 0)
        {
            return Err(format!("{}: group counts in a version-2 header", w.path));
        }
    }
    Ok(dirs)
}

/// Makes `w`'s header version 1 (what firmware before stop 55 wrote): the count field
/// with its exact count of names, and no group counts.
pub fn make_version_1<S: Store<FlashError = SimError>>(fs: &mut Fs<S, 2048, 4>, w: &Walked) {
    make_version(fs, w, 1, w.names.len() as u32);
}

/// Makes `w`'s header version 2 (firmware of stops 55 and 56): the count field with
/// its buckets holding a name, and no group counts.
pub fn make_version_2<S: Store<FlashError = SimError>>(fs: &mut Fs<S, 2048, 4>, w: &Walked) {
    make_version(fs, w, 2, w.filled);
}

/// `w`'s count field written as `version` with `count`, and its group counts zeroed, in
/// one transaction.
fn make_version<S: Store<FlashError = SimError>>(
    fs: &mut Fs<S, 2048, 4>,
    w: &Walked,
    version: u8,
    count: u32,
) {
    let mut field = [version, 1, 0, 0, 0, 0];
    field[2..].copy_from_slice(&count.to_le_bytes());
    let zeros = [0u8; bucket::GROUPS as usize / 2];
    Store::transact(
        fs.store_mut(),
        &[
            TxOp::Write {
                obj: w.obj,
                offset: bucket::COUNT_FIELD_AT as u64,
                data: &field,
            },
            TxOp::Write {
                obj: w.obj,
                offset: bucket::GROUPS_AT as u64,
                data: &zeros,
            },
        ],
    )
    .unwrap();
}

/// `n` names whose hashes agree with `want` on the low `bits` bits.
pub fn colliding(tag: &str, bits: u32, n: usize, want: u32) -> Vec<String> {
    let mask = (1u32 << bits) - 1;
    let mut out = Vec::new();
    let mut i = 0u64;
    while out.len() < n {
        let s = format!("{tag}{i:08}-{}", "q".repeat(20));
        if bucket::hash(s.as_bytes()) & mask == want & mask {
            out.push(s);
        }
        i += 1;
    }
    out
}
