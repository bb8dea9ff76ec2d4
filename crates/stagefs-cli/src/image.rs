//! Flash images: what a production programmer writes onto a part.
//!
//! An image is the part's pages in order (block 0 page 0 first). Each page is a
//! **record** of the page's data area followed by the spare bytes the stack owns: the
//! free OOB regions of the part's layout, concatenated in layout order
//! ([`nand_hal::OobLayout::gather_free`]). The bad-block marker and, on parts with on-die
//! ECC, the parity are never in the image: the part computes its parity when the image is
//! programmed with ECC on. A page whose record is all `0xFF` is left erased. An image
//! may be shorter than the part (whole blocks; the rest stays erased).
//!
//! ```text
//! record(page) = data[page_size] ++ free_oob[free_bytes]     (W25N01GV: 2048 + 24 = 2072 B)
//! image        = record(0) ++ record(1) ++ ... ++ record(n-1), n a multiple of pages_per_block
//! ```

use std::io::{self, Read, Write};

use nand_hal::sim::profile::Profile;
use nand_hal::sim::{FaultPlan, HeapStorage, SimNand};
use nand_hal::{NandFlash, PageAddr};
use oftl::format::superblock::{Superblock, SB_LEN, SB_SEARCH};

/// The simulated part an image is loaded into.
pub type Sim = SimNand<HeapStorage>;

/// Bytes of one page's record in an image of `profile`.
pub fn record_len(profile: &Profile) -> usize {
    profile.geometry.page_size() as usize + profile.capabilities.oob.free_bytes()
}

/// Bytes of a whole-part image of `profile`.
pub fn image_len(profile: &Profile) -> u64 {
    record_len(profile) as u64 * profile.geometry.pages() as u64
}

/// A factory-fresh simulated part (no bad blocks, no faults).
pub fn blank(profile: &Profile) -> Sim {
    SimNand::heap(*profile, FaultPlan::seeded(1))
}

/// Programs an image into a factory-fresh simulated part.
pub fn load(profile: &Profile, r: &mut impl Read, len: u64) -> io::Result<Sim> {
    let g = profile.geometry;
    let rec = record_len(profile);
    let block_bytes = rec as u64 * g.pages_per_block() as u64;
    if len == 0 || len % block_bytes != 0 || len > image_len(profile) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "an image of {} is whole blocks of {block_bytes} bytes, at most {} bytes; this one has {len}",
                profile.name,
                image_len(profile)
            ),
        ));
    }
    let mut sim = blank(profile);
    let ps = g.page_size() as usize;
    let span = profile.capabilities.oob.span();
    let mut buf = vec![0u8; rec];
    let mut oob = vec![0xFFu8; span];
    for page in 0..(len / rec as u64) as u32 {
        r.read_exact(&mut buf)?;
        if buf.iter().all(|&b| b == 0xFF) {
            continue;
        }
        oob.fill(0xFF);
        profile.capabilities.oob.scatter_free(&buf[ps..], &mut oob);
        sim.program(PageAddr(page), 0, &buf[..ps], &oob)
            .map_err(|e| io::Error::other(format!("programming page {page}: {e:?}")))?;
    }
    Ok(sim)
}

/// How a production programmer places an image's blocks on a part with factory bad
/// blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Image block `i` goes to block `i`; the part's bad blocks are left alone ("skip
    /// bad blocks without shifting", block-for-block). The supported procedure: see
    /// `docs/SPEC.md` section 5.
    InPlace,
    /// Image block `i` goes to the `i`-th good block ("skip-block" programming, as
    /// `nandwrite` does for UBI images): every block after a bad one moves. StageFS
    /// images are not relocatable; a part programmed this way does not mount (it is
    /// refused, never read as something else).
    Shifted,
}

/// The blocks of `image` the store needs good on the part it is programmed onto: those
/// that hold data (any page not all `0xFF`) and the checkpoint blocks its superblock
/// names (erased in a fresh image, but the store writes its next checkpoints there and
/// turns read-only with fewer than two good ones).
pub fn used_blocks(profile: &Profile, image: &[u8]) -> Vec<u32> {
    let bb = record_len(profile) * profile.geometry.pages_per_block() as usize;
    let mut used: Vec<u32> = image
        .chunks(bb)
        .enumerate()
        .filter(|(_, b)| b.iter().any(|&x| x != 0xFF))
        .map(|(i, _)| i as u32)
        .collect();
    let sb = image
        .chunks(bb)
        .take(SB_SEARCH as usize)
        .filter(|b| b.len() >= SB_LEN)
        .find_map(|b| Superblock::parse(&b[..SB_LEN]).ok().flatten());
    if let Some(sb) = sb {
        used.extend(sb.ckpt_blocks().iter().map(|b| b.0));
        used.sort_unstable();
        used.dedup();
    }
    used
}

/// `blocks` as ranges for people: `0-2, 6-40`.
pub fn ranges(blocks: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < blocks.len() {
        let mut j = i;
        while j + 1 < blocks.len() && blocks[j + 1] == blocks[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            blocks[i].to_string()
        } else {
            format!("{}-{}", blocks[i], blocks[j])
        });
        i = j + 1;
    }
    if out.is_empty() {
        "none".into()
    } else {
        out.join(", ")
    }
}

/// Programs `image` onto `part` (which may have factory bad blocks) the way a
/// production programmer does with `placement`. Blank pages are not programmed.
/// In place, an image block that holds data where the part has a bad block is refused
/// with the remedy (an image made for this part's bad blocks).
pub fn program(part: &mut Sim, image: &[u8], placement: Placement) -> Result<(), String> {
    let profile = *part.profile();
    let g = profile.geometry;
    let rec = record_len(&profile);
    let bb = rec * g.pages_per_block() as usize;
    if image.is_empty() || image.len() % bb != 0 || image.len() as u64 > image_len(&profile) {
        return Err(format!(
            "an image of {} is whole blocks of {bb} bytes, at most {} bytes; this one has {}",
            profile.name,
            image_len(&profile),
            image.len()
        ));
    }
    let ps = g.page_size() as usize;
    let mut oob = vec![0xFFu8; profile.capabilities.oob.span()];
    let mut target = 0u32;
    let required = used_blocks(&profile, image);
    for (i, block) in image.chunks(bb).enumerate() {
        let used = required.contains(&(i as u32));
        let to = match placement {
            Placement::InPlace => {
                let b = i as u32;
                let bad = part
                    .is_bad(nand_hal::BlockAddr(b))
                    .map_err(|e| format!("{e:?}"))?;
                if bad && used {
                    return Err(format!(
                        "image block {b} holds data or a checkpoint block but block {b} is bad on this part: make this part its own image (stagefs mkfs --bad-blocks ...)"
                    ));
                }
                if bad {
                    continue;
                }
                b
            }
            Placement::Shifted => {
                while target < g.blocks()
                    && part
                        .is_bad(nand_hal::BlockAddr(target))
                        .map_err(|e| format!("{e:?}"))?
                {
                    target += 1;
                }
                if target >= g.blocks() {
                    if used {
                        return Err("the image does not fit the part's good blocks".into());
                    }
                    break;
                }
                target += 1;
                target - 1
            }
        };
        for (p, r) in block.chunks(rec).enumerate() {
            if r.iter().all(|&x| x == 0xFF) {
                continue;
            }
            oob.fill(0xFF);
            profile.capabilities.oob.scatter_free(&r[ps..], &mut oob);
            let page = to * g.pages_per_block() + p as u32;
            part.program(PageAddr(page), 0, &r[..ps], &oob)
                .map_err(|e| format!("programming page {page}: {e:?}"))?;
        }
    }
    Ok(())
}

/// Writes the whole part as an image.
pub fn save(sim: &Sim, w: &mut impl Write) -> io::Result<()> {
    let profile = sim.profile();
    let g = profile.geometry;
    let ps = g.page_size() as usize;
    let rec = record_len(profile);
    let mut data = vec![0u8; ps];
    let mut oob = vec![0u8; g.oob_size() as usize];
    let mut out = vec![0u8; rec];
    for page in 0..g.pages() {
        sim.peek(PageAddr(page), &mut data, &mut oob);
        out[..ps].copy_from_slice(&data);
        profile.capabilities.oob.gather_free(&oob, &mut out[ps..]);
        w.write_all(&out)?;
    }
    Ok(())
}

/// Loads the image file at `path`.
pub fn load_file(profile: &Profile, path: &std::path::Path) -> io::Result<Sim> {
    let f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    load(profile, &mut io::BufReader::new(f), len)
}

/// Writes the image file at `path` (through a temporary file renamed into place, so a
/// failed write leaves the old image).
pub fn save_file(sim: &Sim, path: &std::path::Path) -> io::Result<()> {
    let tmp = path.with_extension("stagefs-tmp");
    {
        let mut w = io::BufWriter::new(std::fs::File::create(&tmp)?);
        save(sim, &mut w)?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nand_hal::sim::profile;

    #[test]
    fn an_image_round_trips_and_bad_lengths_are_refused() {
        let p = profile::TINY;
        let mut sim = blank(&p);
        let ps = p.geometry.page_size() as usize;
        let span = p.capabilities.oob.span();
        let mut oob = vec![0xFFu8; span];
        let owned: Vec<u8> = (0..p.capabilities.oob.free_bytes() as u8).collect();
        p.capabilities.oob.scatter_free(&owned, &mut oob);
        sim.program(PageAddr(3), 0, &vec![0x5A; ps], &oob).unwrap();
        let mut img = Vec::new();
        save(&sim, &mut img).unwrap();
        assert_eq!(img.len() as u64, image_len(&p));
        let back = load(&p, &mut &img[..], img.len() as u64).unwrap();
        let (mut d, mut o) = (vec![0u8; ps], vec![0u8; p.geometry.oob_size() as usize]);
        back.peek(PageAddr(3), &mut d, &mut o);
        assert!(d.iter().all(|&b| b == 0x5A));
        let mut got = vec![0u8; owned.len()];
        p.capabilities.oob.gather_free(&o, &mut got);
        assert_eq!(got, owned);
        back.peek(PageAddr(4), &mut d, &mut o);
        assert!(d.iter().all(|&b| b == 0xFF));
        // Whole blocks only, never longer than the part.
        let block = record_len(&p) * p.geometry.pages_per_block() as usize;
        assert!(load(&p, &mut &img[..block], block as u64).is_ok());
        assert!(load(&p, &mut &img[..block + 1], block as u64 + 1).is_err());
        assert!(load(&p, &mut &img[..0], 0).is_err());
        let mut long = img.clone();
        long.extend_from_slice(&img[..block]);
        assert!(load(&p, &mut &long[..], long.len() as u64).is_err());
    }
}
