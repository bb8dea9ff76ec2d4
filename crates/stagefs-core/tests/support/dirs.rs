//! The on-flash directory trie walked from the root, for the tests of page 0's count
//! (`dir_count.rs`, review s55): every directory's names and its buckets holding one.

use std::collections::BTreeMap;

use stagefs_core::format::bucket::{self, Body, DirHeader};
use stagefs_core::{Kind, Store};

use super::Vol;

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
}

/// Reads page `page` of object `obj` (a hole reads as zeros).
pub fn page_of(fs: &mut Vol<'_>, obj: u32, page: u32) -> Result<Vec<u8>, String> {
    let p = Store::payload(fs.store());
    let mut buf = vec![0u8; p];
    let n = Store::read(fs.store_mut(), obj, page as u64 * p as u64, &mut buf)
        .map_err(|e| format!("read {obj}/{page}: {e:?}"))?;
    buf[n..].fill(0);
    Ok(buf)
}

/// Every directory from the root (object 2), each with its exact names (and kinds)
/// and the number of its buckets that hold one.
pub fn walk(fs: &mut Vol<'_>) -> Result<Vec<Walked>, String> {
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

/// Every directory's count is exact for its version (and 0 exactly when empty).
pub fn counts_exact(fs: &mut Vol<'_>) -> Result<Vec<Walked>, String> {
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
                if w.head.counts_buckets { 2 } else { 1 },
                w.names.len(),
                w.filled
            ));
        }
    }
    Ok(dirs)
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
