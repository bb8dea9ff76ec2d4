//! Review s48: the data and cold heads' cut blocks left to collection at recovery
//! (b6a116b: `recovery::cut_block_may_wait`, `Scanned::suspect_last`,
//! `CUT_BLOCK_SLACK`), against its parent c33dc2a.
//!
//! # F1 (caused by the change; medium): a rebuild revives a write the recovery dropped
//!
//! `suspect_last` only looks at the data head's *block*: it is set when nothing after
//! the last commit page in that block reads as anything but erased. It does not see an
//! unreadable page in the data head's *next* block. Shape: the last commit page is the
//! last page of its block B (any block the head left), the next transaction's first
//! page is page 0 of the next window block, and the cut tears it (`Torn(MostBits)`,
//! unstable: F4). Every read the recovery makes of it fails, so the recovery drops the
//! write (allowed: it was never acknowledged), the mount reads the old state, and later
//! work is acknowledged on top. The recovery now leaves B to collection (relocated
//! pages 11 -> 1), so B's committed pages keep numbers *below* the dropped page's (the
//! dropped page was never seen, so even the suspect's copy takes the same number). A
//! full-scan rebuild (`Damaged::Rebuild`) that reads the marginal page clean applies
//! it: the rebuilt store shows the write the mounted store had dropped, over an
//! acknowledged page, with a clean report (nothing unreadable, nothing named). On
//! c33dc2a the recovery moved B (copies numbered above the dropped page) and the same
//! cases hold. SPEC 3 rule 4 claims "A data-head block left so holds committed pages
//! only, so a full-scan rebuild reads nothing there that recovery dropped": true of B,
//! but what the rebuild takes lies in the next block, and B's pages are what no
//! longer outnumber it.
//!
//! Reproduction: `f1_rebuild_revives_a_dropped_torn_page_at_the_start_of_the_data_heads_next_block`
//! (TINY windows 4/6/8 and W25N01GV window 16 with the F4 reads modelled exactly:
//! the torn page garbled for the recovery and restored for the rebuild; the simulator's
//! own F4 draws with `unstable_after_cut`, TINY window 6, seed 186501; a random
//! workload sweep with the garble model: window 6 seed 1013, window 4 seed 902). All
//! pass on c33dc2a, all fail on b6a116b. Counts: with the simulator's F4 draws over
//! 200,000 seeds of the F1 shape, 34 revived on b6a116b vs 33 on c33dc2a (P1 below is
//! the other 33); the random sweep with the garble model, 1,500 seeds each at windows
//! 4/6/8: seeds 902 and 1013 fail on b6a116b only (nothing fails on c33dc2a only).
//! A fix: set `after_last_data` for any page after the last accepted data-head page
//! anywhere in the walk that reads as neither erased nor a page of another head (in
//! particular an unreadable page in a later window block: `hole` still set at the end
//! of the scan), or simply refuse the deferral when the scan left any unreadable page
//! not proven to be another head's.
//!
//! **Fixed (stop 48):** an unreadable page of no known head (not in a block holding
//! log pages or cold copies) after the data head's last accepted page anywhere in the
//! walk now counts as programmed after it (`after_last_data`), so the block is moved
//! as before. The garble model was changed with the fix: it ORs the pattern into the
//! torn page (bits a torn program was setting may read erased; bits left erased stay
//! erased), where it first wrote the pattern over every byte, the bad-block marker
//! bytes included: on a block the store never erased, marker bytes that read other
//! than 0xFF are a factory marker, so the recovery skipped the whole block as bad and
//! the torn page was never seen (a torn program cannot set marker bits it was not
//! programming, SPEC 3). With the OR model every case above holds.
//!
//! # P1 (pre-existing, the same on c33dc2a; medium): same shape, other reads
//!
//! Same shape with the simulator's F4 draws where one of the recovery's two passes reads
//! the torn page and the other does not (pass 1 accepts it and `read_suspect` fails:
//! the commit is dropped; or pass 2 reads it): `last_block[DATA_HEAD]` is then the
//! torn page's block, so the block holding the last replayed commit is neither moved
//! nor left by the new rule, its pages keep numbers below the dropped page's, and the
//! rebuild revives the write (33 of 200,000 seeds on c33dc2a, e.g. 7696, 9168, 19589,
//! 20412; seed 176608 the rebuild maps the page to the torn one and the read fails
//! `Uncorrectable`). `p1_preexisting_rebuild_revives_a_dropped_torn_commit_in_the_next_block`.
//!
//! # P2 (pre-existing, the same on c33dc2a; medium): a rebuild applies part of a cut overwrite
//!
//! Random flushed one- to three-page overwrites of four objects written whole first,
//! a random cut (every kind, F4), recovery, 0-5 acknowledged writes, clean unmount,
//! rebuild: 141 of 600 seeds (TINY window 6) show pages of the cut write the recovery
//! dropped, some pages of the transaction without the others (atomicity), over
//! acknowledged pages; the same 141 seeds on both commits. DESIGN 7.5 documents writes
//! into holes only and says "where it overwrote them the rebuild keeps them": that holds
//! only for pages whose older version lay in the block the recovery moved.
//! `p2_preexisting_rebuild_applies_part_of_a_cut_overwrite_the_recovery_dropped`
//! (seeds 1, 5, 9, 11).
//!
//! P1 and P2 are left open (ignored tests; DESIGN 7.5 corrected): a full-scan rebuild
//! cannot tell a transaction the recovery dropped from one whose commit page was
//! collected; telling them apart needs the dropped range on flash, a format change.
//!
//! # Held
//!
//! - Near full (88-92 % of `capacity_pages` in data, TINY windows 6/8/10/12): 280
//!   seeds x 30 rounds of acknowledged overwrites, a cut inside the next calls and one
//!   inside every third recovery (every cut kind, F4), a mount after each: no lost or
//!   revived page, cut writes all or nothing, no `NoSpace`, never read-only
//!   (`explore_cycles`; `held_cycles_near_full_with_recovery_cuts` runs 32 of them).
//!   (Window 4: `NoSpace` on overwrites at 88-93 % in 37-46 of 60 seeds, identical on
//!   c33dc2a, and also without power cuts when every round ends without an unmount:
//!   pre-existing; `S48_NOCUT=1` runs the cycles without cuts; stop 49 traced it to the
//!   capacity's two blocks of GC slack at the smallest windows and a 4-page cache,
//!   an open limit, DESIGN 5.3.)
//! - The cold head's cut block: no case found where leaving it differs from moving it
//!   (its copies since the checkpoint are dropped and hold what their originals held
//!   at their watermarks; the block stays on flash in both versions until erased).
//! - Reading the simulator's torn modes: a page a cut tore can read erased
//!   (`SomeBits`: near-erased) only if it can never read as a valid page, and a page
//!   that can read valid (`MostBits`, failed program shape 2) never reads erased, so
//!   `suspect_last`'s "reads erased" test inside the block is sound against the model.
//! - Salvage and repair never defer (`salvaging()` covers both).

#![cfg(feature = "alloc")]

use crate::common;

use common::bytes;
use common::pages::all_pages;
use nand_hal::sim::{
    profile, CutKind, FaultConfig, FaultPlan, HeapStorage, PageState, SimNand, TornMode,
};
use nand_hal::{NandFlash, PageAddr};
use oftl::format::backpointer::PageKind;
use oftl::{Config, Greedy, ObjKind, Oftl};

type Sim = SimNand<HeapStorage>;
type Fs<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 2, Greedy>;

fn tiny_cfg(w: u16) -> Config {
    Config {
        window_blocks: w,
        format_id: 0x5eed,
        ..Default::default()
    }
}

fn e<T: core::fmt::Debug>(x: T) -> String {
    format!("{x:?}")
}

/// The data head's newest page (data or metadata, not a GC copy): (page, seq).
fn newest_data_page(sim: &Sim) -> Option<(u32, u32)> {
    all_pages(sim)
        .into_iter()
        .filter(|p| matches!(p.kind, PageKind::Data | PageKind::Meta) && !p.relocated)
        .max_by(|a, b| oftl_seq_cmp(a.seq, b.seq))
        .map(|p| (p.page, p.seq))
}

fn oftl_seq_cmp(a: u32, b: u32) -> core::cmp::Ordering {
    (a.wrapping_sub(b) as i32).cmp(&0)
}

/// The newest data page of (owner, lpn), not a GC copy.
fn newest_of(sim: &Sim, owner: u32, lpn: u32) -> Option<u32> {
    all_pages(sim)
        .into_iter()
        .filter(|p| p.kind == PageKind::Data && p.owner == owner && p.lpn == lpn)
        .max_by(|a, b| oftl_seq_cmp(a.seq, b.seq))
        .map(|p| p.page)
}

fn torn_pages(sim: &Sim) -> Vec<u32> {
    (0..sim.geometry().pages())
        .filter(|&p| sim.page_state(PageAddr(p)).flags & PageState::TORN != 0)
        .collect()
}

#[derive(Debug, PartialEq)]
enum Verdict {
    /// The setup did not reach the shape wanted (reason).
    Skip(String),
    /// The recovery kept the cut write (allowed).
    RecoveryKept,
    /// The recovery dropped it and the rebuild too.
    Held,
    /// The recovery dropped it, later work was acknowledged, and the rebuild revived it.
    Revived(String),
}

/// F1 shape. On TINY (16 pages a block), window `w`:
/// - object `o` gets an acknowledged page 0 (`acked`), and flushed one-page writes of
///   `other` follow until the data head's newest page is the last page of the block
///   that also holds `o`'s page 0 (so that block's last page is a commit page);
/// - a one-page overwrite of `o` page 0 (its own commit page) is cut at its first
///   program, `Torn(MostBits)`: it lands as page 0 of the data head's next block;
/// - F4: every read the recovery makes of that torn page fails (modelled by garbling
///   the page's raw cells for the recovery and restoring them afterwards: an unstable
///   page that reads uncorrectable during the recovery and clean later), so the
///   recovery drops the write; the mount shows `acked`; `later` flushed writes of
///   `other` and a clean unmount follow;
/// - a full-scan rebuild then reads the torn page clean.
fn torn_first_page_generic<const B: usize, const C: usize>(
    profile: nand_hal::sim::Profile,
    w: u16,
    later: usize,
    seed: u64,
    at: u64,
    natural: bool,
) -> Result<Verdict, String> {
    let mut sim = Sim::heap(profile, FaultPlan::seeded(seed));
    let ppb = sim.geometry().pages_per_block();
    let acked = bytes(1, 2048);
    let cut = bytes(2, 2048);
    let (o, other);
    {
        let mut fs =
            Oftl::<&mut Sim, 2048, B, C, 2, Greedy>::new(&mut sim, tiny_cfg(w), Greedy::default());
        fs.format().map_err(e)?;
        o = fs.create(ObjKind::Object).map_err(e)?;
        other = fs.create(ObjKind::Object).map_err(e)?;
        fs.write(other, 0, &bytes(9, 8 * 2048)).map_err(e)?;
        fs.flush(other).map_err(e)?;
        let mut k = 0u32;
        let mut ok = false;
        'outer: for round in 0..40 {
            fs.write(o, 0, &acked).map_err(e)?;
            fs.flush(o).map_err(e)?;
            let opage = newest_of(fs.flash_mut(), o, 0).ok_or("o page")?;
            for _ in 0..(ppb + 2) {
                let (np, _) = newest_data_page(fs.flash_mut()).ok_or("no data page")?;
                if np / ppb != opage / ppb {
                    continue 'outer;
                }
                if np % ppb == ppb - 1 && np != opage {
                    ok = true;
                    break 'outer;
                }
                k += 1;
                fs.write(other, (k as u64 % 8) * 2048, &bytes(10 + k + round, 2048))
                    .map_err(e)?;
                fs.flush(other).map_err(e)?;
            }
        }
        if !ok {
            return Ok(Verdict::Skip("never lined up".into()));
        }
        let faults = FaultConfig {
            unstable_after_cut: natural,
            ..FaultConfig::default()
        };
        fs.flash_mut().arm(
            FaultPlan::seeded(seed)
                .with_faults(faults)
                .with_cut(at, CutKind::Torn(TornMode::MostBits)),
        );
        let r = fs.write(o, 0, &cut).and_then(|()| fs.flush(o));
        if r.is_ok() {
            return Ok(Verdict::Skip("the cut write succeeded".into()));
        }
    }
    sim.power_on();
    if !natural {
        sim.disarm();
    }
    let torn = torn_pages(&sim);
    let [tp] = torn[..] else {
        return Ok(Verdict::Skip(format!("torn pages {torn:?}")));
    };
    if tp % ppb != 0 {
        return Ok(Verdict::Skip(format!("torn page {tp} not a block's first")));
    }
    // The recovery's reads of the torn page fail (F4: the cut left it unstable).
    let (mut d, mut oob) = (vec![0u8; 2048], vec![0u8; 64]);
    sim.peek(PageAddr(tp), &mut d, &mut oob);
    let (d0, oob0) = (d.clone(), oob.clone());
    for (i, x) in d.iter_mut().enumerate() {
        *x |= (i as u8).wrapping_mul(37) ^ 0x5a;
    }
    for (i, x) in oob.iter_mut().enumerate() {
        *x |= (i as u8).wrapping_mul(91) ^ 0xa5;
    }
    if !natural {
        sim.poke(PageAddr(tp), 0, &d, &oob);
    }
    let relocated;
    {
        let mut fs = Oftl::<&mut Sim, 2048, B, C, 2, Greedy>::new(
            &mut sim,
            Config::new(),
            Greedy::default(),
        );
        fs.mount().map_err(|x| format!("mount: {x:?}"))?;
        relocated = fs.stats().relocated_pages;
        if std::env::var("S48_DEBUG").is_ok() {
            let st = fs.stats();
            println!(
                "scanned {} replayed {} relocated {}",
                st.recovery_scanned_pages, st.recovery_replayed_pages, st.relocated_pages
            );
            let mut v: Vec<_> = all_pages(fs.flash_mut())
                .into_iter()
                .filter(|p| matches!(p.kind, PageKind::Data | PageKind::Meta))
                .collect();
            v.sort_by_key(|p| p.seq);
            for p in v.iter().rev().take(24) {
                println!("  {p:?}");
            }
        }
        let mut b = vec![0u8; 2048];
        let n = fs
            .read(o, 0, &mut b)
            .map_err(|x| format!("read after the recovery: {x:?}"))?;
        if n == 2048 && b == cut {
            return Ok(Verdict::RecoveryKept);
        }
        if n != 2048 || b != acked {
            return Err(format!("recovery: o reads {n} bytes, wrong"));
        }
        for i in 0..later {
            fs.write(other, (i as u64 % 8) * 2048, &bytes(100 + i as u32, 2048))
                .map_err(e)?;
            fs.flush(other).map_err(e)?;
        }
        fs.unmount().map_err(e)?;
    }
    // Later reads of the torn page draw clean (F4).
    if !natural {
        sim.poke(PageAddr(tp), 0, &d0, &oob0);
    }
    let mut fs =
        Oftl::<&mut Sim, 2048, B, C, 2, Greedy>::new(&mut sim, Config::new(), Greedy::default());
    fs.mount_damaged(oftl::Damaged::Rebuild {
        lost_meta_attrs: [0xFF; oftl::ATTR_LEN],
    })
    .map_err(|x| format!("rebuild: {x:?}"))?;
    let mut b = vec![0u8; 2048];
    let n = fs
        .read(o, 0, &mut b)
        .map_err(|x| format!("read after the rebuild: {x:?}"))?;
    if n == 2048 && b == acked {
        return Ok(Verdict::Held);
    }
    Ok(Verdict::Revived(format!(
        "torn page {tp}; recovery relocated {relocated} pages; o reads {n} bytes, the cut \
         write shows: {}; report {:?}",
        b == cut,
        fs.salvage_report()
    )))
}

fn torn_first_page_of_next_block(
    w: u16,
    later: usize,
    seed: u64,
    at: u64,
    natural: bool,
) -> Result<Verdict, String> {
    torn_first_page_generic::<64, 4>(profile::TINY, w, later, seed, at, natural)
}

#[test]
#[ignore = "exploration"]
fn explore_f1() {
    for w in [4u16, 6, 8] {
        for later in [0usize, 3] {
            for seed in 0..2u64 {
                for at in 1..4 {
                    println!(
                        "w {w} later {later} seed {seed} at {at}: {:?}",
                        torn_first_page_of_next_block(w, later, seed, at, false)
                    );
                }
            }
        }
    }
}

#[test]
#[ignore = "exploration"]
fn debug_f1() {
    println!("{:?}", torn_first_page_of_next_block(6, 0, 0, 2, false));
}

#[test]
#[ignore = "exploration"]
fn explore_f1_natural() {
    let seeds: u64 = common::env("S48_SEEDS", 2000);
    let from: u64 = common::env("S48_FROM", 0);
    let mut tally = std::collections::BTreeMap::new();
    for seed in from..from + seeds {
        let v = torn_first_page_of_next_block(6, 3, seed, 2, true);
        let key = match &v {
            Ok(Verdict::Revived(m)) => {
                println!("REVIVED seed {seed}: {m}");
                "revived".to_string()
            }
            Ok(Verdict::Skip(m)) => format!("skip {m}"),
            Ok(x) => format!("{x:?}"),
            Err(m) => {
                println!("ERR seed {seed}: {m}");
                "err".into()
            }
        };
        *tally.entry(key).or_insert(0) += 1;
    }
    println!("{tally:?}");
}

// ---------------------------------------------------------------------------------
// Sweep: random flushed writes (one to three pages, each write one transaction) over
// four objects, a random cut (every kind, pages torn by it unstable: F4), a recovery,
// acknowledged work on top, a clean unmount, then a full-scan rebuild: the rebuilt
// store must show exactly what the recovered store showed plus the later work (the
// recovery's choice about the cut write is final).

const SW_OBJS: usize = 4;
const SW_PAGES: u64 = 8;

fn sw_image(o: usize, p: u64, v: u32) -> Vec<u8> {
    let mut b = bytes(
        v.wrapping_mul(977) ^ (o as u32) << 20 ^ (p as u32) << 12,
        2048,
    );
    b[..4].copy_from_slice(&(o as u32).to_le_bytes());
    b[4..8].copy_from_slice(&(p as u32).to_le_bytes());
    b[8..12].copy_from_slice(&v.to_le_bytes());
    b
}

/// Each object's page versions as read (`None`: a page that does not read right).
fn sw_read(fs: &mut Fs<'_>, ids: &[u32]) -> Result<Vec<Vec<u32>>, String> {
    let mut out = Vec::new();
    let mut b = vec![0u8; 2048];
    for (o, &id) in ids.iter().enumerate() {
        let mut row = Vec::new();
        for p in 0..SW_PAGES {
            let n = fs
                .read(id, p * 2048, &mut b)
                .map_err(|x| format!("object {o} page {p}: {x:?}"))?;
            if n != 2048 {
                return Err(format!("object {o} page {p}: {n} bytes"));
            }
            let v = u32::from_le_bytes(b[8..12].try_into().unwrap());
            if b != sw_image(o, p, v) {
                return Err(format!("object {o} page {p}: bytes of no version"));
            }
            row.push(v);
        }
        out.push(row);
    }
    Ok(out)
}

/// One random write: (object, first page, pages, version).
fn sw_op(rng: &mut common::Rng, next_v: &mut u32) -> (usize, u64, u64, u32) {
    let o = rng.below(SW_OBJS as u64) as usize;
    let n = 1 + rng.below(3);
    let p = rng.below(SW_PAGES - n + 1);
    *next_v += 1;
    (o, p, n, *next_v)
}

fn sw_apply(
    fs: &mut Fs<'_>,
    ids: &[u32],
    (o, p, n, v): (usize, u64, u64, u32),
) -> Result<(), String> {
    let mut buf = Vec::new();
    for q in p..p + n {
        buf.extend_from_slice(&sw_image(o, q, v));
    }
    fs.write(ids[o], p * 2048, &buf).map_err(e)?;
    fs.flush(ids[o]).map_err(e)
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Clone)]
enum SwOut {
    Skip,
    Held,
    Bad(String),
}

fn sweep_case(profile: nand_hal::sim::Profile, w: u16, seed: u64) -> SwOut {
    sweep_case_with(profile, w, seed, false)
}

/// `garble`: every page the cut tore reads as garbage to the recovery and clean to the
/// rebuild (F4, deterministic), the pages left unstable otherwise.
fn sweep_case_with(profile: nand_hal::sim::Profile, w: u16, seed: u64, garble: bool) -> SwOut {
    let mut rng = common::Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut sim = Sim::heap(profile, FaultPlan::seeded(seed));
    let mut model = vec![vec![0u32; SW_PAGES as usize]; SW_OBJS];
    let mut next_v = 0u32;
    let mut ids = Vec::new();
    let pending;
    {
        let mut fs = Fs::new(&mut sim, tiny_cfg(w), Greedy::default());
        if fs.format().is_err() {
            return SwOut::Skip;
        }
        for o in 0..SW_OBJS {
            let id = fs.create(ObjKind::Object).unwrap();
            ids.push(id);
            for p in 0..SW_PAGES {
                fs.write(id, p * 2048, &sw_image(o, p, 0)).unwrap();
            }
            fs.flush(id).unwrap();
        }
        let warm = 20 + rng.below(120);
        for _ in 0..warm {
            let op = sw_op(&mut rng, &mut next_v);
            sw_apply(&mut fs, &ids, op).unwrap();
            for q in op.1..op.1 + op.2 {
                model[op.0][q as usize] = op.3;
            }
        }
        let kind = CutKind::ALL[rng.below(CutKind::ALL.len() as u64) as usize];
        let at = 1 + rng.below(12);
        fs.flash_mut().arm(
            FaultPlan::seeded(seed)
                .with_faults(FaultConfig {
                    unstable_after_cut: true,
                    ..FaultConfig::default()
                })
                .with_cut(at, kind),
        );
        let mut p = None;
        for _ in 0..12 {
            let op = sw_op(&mut rng, &mut next_v);
            if sw_apply(&mut fs, &ids, op).is_err() {
                p = Some(op);
                break;
            }
            for q in op.1..op.1 + op.2 {
                model[op.0][q as usize] = op.3;
            }
        }
        pending = p;
    }
    let Some((po, pp, pn, pv)) = pending else {
        return SwOut::Skip;
    };
    sim.power_on();
    if std::env::var("S48_DEBUG").is_ok() {
        let ppb = sim.geometry().pages_per_block();
        let mut v: Vec<_> = all_pages(&sim)
            .into_iter()
            .filter(|p| {
                p.kind == PageKind::Data
                    && p.owner == ids[po]
                    && (pp..pp + pn).contains(&(p.lpn as u64))
            })
            .collect();
        v.sort_by_key(|p| p.seq);
        for p in v.iter().rev().take(8) {
            println!("  block {} {p:?}", p.page / ppb);
        }
        println!("  torn {:?}", torn_pages(&sim));
    }
    let mut saved = Vec::new();
    if garble {
        sim.disarm();
        for tp in torn_pages(&sim) {
            let (mut d, mut oob) = (vec![0u8; 2048], vec![0u8; 64]);
            sim.peek(PageAddr(tp), &mut d, &mut oob);
            let (d0, oob0) = (d.clone(), oob.clone());
            for (i, x) in d.iter_mut().enumerate() {
                *x |= (i as u8).wrapping_mul(37) ^ 0x5a;
            }
            for (i, x) in oob.iter_mut().enumerate() {
                *x |= (i as u8).wrapping_mul(91) ^ 0xa5;
            }
            sim.poke(PageAddr(tp), 0, &d, &oob);
            saved.push((tp, d0, oob0, d, oob));
        }
    }
    let seen;
    {
        let mut fs = Fs::new(&mut sim, Config::new(), Greedy::default());
        if let Err(x) = fs.mount() {
            return SwOut::Bad(format!("mount: {x:?}"));
        }
        seen = match sw_read(&mut fs, &ids) {
            Ok(s) => s,
            Err(m) => return SwOut::Bad(format!("after the recovery: {m}")),
        };
        // Every page is the model's, the cut write's pages all old or all new.
        let mut new = 0;
        for o in 0..SW_OBJS {
            for q in 0..SW_PAGES {
                let s = seen[o][q as usize];
                let pend = o == po && (pp..pp + pn).contains(&q);
                if s == model[o][q as usize] {
                    continue;
                }
                if pend && s == pv {
                    new += 1;
                    continue;
                }
                return SwOut::Bad(format!(
                    "after the recovery: object {o} page {q} version {s}, want {}",
                    model[o][q as usize]
                ));
            }
        }
        if new != 0 && new != pn {
            return SwOut::Bad(format!(
                "after the recovery: {new} of {pn} pages of the cut write"
            ));
        }
        model = seen.clone();
        let later = rng.below(6);
        for _ in 0..later {
            let op = sw_op(&mut rng, &mut next_v);
            if let Err(m) = sw_apply(&mut fs, &ids, op) {
                return SwOut::Bad(format!("later write: {m}"));
            }
            for q in op.1..op.1 + op.2 {
                model[op.0][q as usize] = op.3;
            }
        }
        if let Err(x) = fs.unmount() {
            return SwOut::Bad(format!("unmount: {x:?}"));
        }
    }
    // A full-scan rebuild (the checkpoints ignored).
    let mut copy = sim.clone();
    for (tp, d, oob, gd, goob) in &saved {
        // Unless the block was erased (and maybe programmed again) since.
        let mut now = (vec![0u8; 2048], vec![0u8; 64]);
        copy.peek(PageAddr(*tp), &mut now.0, &mut now.1);
        if now.0 == *gd && now.1 == *goob {
            copy.poke(PageAddr(*tp), 0, d, oob);
        }
    }
    {
        let mut fs = Fs::new(&mut copy, Config::new(), Greedy::default());
        if let Err(x) = fs.mount_damaged(oftl::Damaged::Rebuild {
            lost_meta_attrs: [0xFF; oftl::ATTR_LEN],
        }) {
            return SwOut::Bad(format!("rebuild: {x:?}"));
        }
        match sw_read(&mut fs, &ids) {
            Ok(s) if s == model => {}
            Ok(s) => {
                for o in 0..SW_OBJS {
                    for q in 0..SW_PAGES as usize {
                        if s[o][q] != model[o][q] {
                            return SwOut::Bad(format!(
                                "rebuild: object {o} page {q} version {}, want {} (cut write \
                                 version {pv} at object {po} pages {pp}..{})",
                                s[o][q],
                                model[o][q],
                                pp + pn
                            ));
                        }
                    }
                }
            }
            Err(m) => return SwOut::Bad(format!("after the rebuild: {m}")),
        }
    }
    // And a normal mount again reads the same.
    let mut fs = Fs::new(&mut sim, Config::new(), Greedy::default());
    if let Err(x) = fs.mount() {
        return SwOut::Bad(format!("second mount: {x:?}"));
    }
    match sw_read(&mut fs, &ids) {
        Ok(s) if s == model => SwOut::Held,
        Ok(_) => SwOut::Bad("second mount differs".into()),
        Err(m) => SwOut::Bad(format!("second mount: {m}")),
    }
}

#[test]
#[ignore = "exploration"]
fn explore_sweep() {
    let seeds: u64 = common::env("S48_SEEDS", 300);
    let from: u64 = common::env("S48_FROM", 0);
    let w: u16 = common::env("S48_W", 6);
    let garble = std::env::var("S48_GARBLE").is_ok();
    let mut tally = std::collections::BTreeMap::new();
    for seed in from..from + seeds {
        let v = sweep_case_with(profile::TINY, w, seed, garble);
        if let SwOut::Bad(m) = &v {
            println!("BAD seed {seed}: {m}");
        }
        let k = match v {
            SwOut::Bad(_) => "bad",
            SwOut::Held => "held",
            SwOut::Skip => "skip",
        };
        *tally.entry(k).or_insert(0) += 1;
    }
    println!("w {w}: {tally:?}");
}

// ---------------------------------------------------------------------------------
// Cycles near full: random one- to three-page overwrites, cuts inside them and inside
// the recoveries (every kind, F4), a mount after each; every acknowledged page must
// read back, the cut write all or nothing, and no call on a store within its capacity
// may fail `NoSpace` or leave the store read-only.

fn cycle_case(w: u16, fill_pct: u64, seed: u64, rounds: u32) -> SwOut {
    let mut rng = common::Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
    let objs = 4usize;
    let mut ids = Vec::new();
    let pages;
    let mut model: Vec<Vec<u32>>;
    let mut next_v = 0u32;
    {
        let mut fs = Fs::new(&mut sim, tiny_cfg(w), Greedy::default());
        if fs.format().is_err() {
            return SwOut::Skip;
        }
        pages = (fs.capacity_pages() * fill_pct / 100 / objs as u64).max(4);
        model = vec![vec![0u32; pages as usize]; objs];
        for o in 0..objs {
            let id = fs.create(ObjKind::Object).unwrap();
            ids.push(id);
            for p in 0..pages {
                if let Err(x) = fs.write(id, p * 2048, &sw_image(o, p, 0)) {
                    return SwOut::Bad(format!("fill: {x:?}"));
                }
            }
            fs.flush(id).unwrap();
        }
        fs.sync().unwrap();
    }
    let op = |rng: &mut common::Rng, next_v: &mut u32| {
        let o = rng.below(objs as u64) as usize;
        let n = 1 + rng.below(3);
        let p = rng.below(pages - n + 1);
        *next_v += 1;
        (o, p, n, *next_v)
    };
    let apply = |fs: &mut Fs<'_>, ids: &[u32], (o, p, n, v): (usize, u64, u64, u32)| {
        let mut buf = Vec::new();
        for q in p..p + n {
            buf.extend_from_slice(&sw_image(o, q, v));
        }
        fs.write(ids[o], p * 2048, &buf)
            .and_then(|()| fs.flush(ids[o]))
    };
    let check = |fs: &mut Fs<'_>,
                 ids: &[u32],
                 model: &mut Vec<Vec<u32>>,
                 pending: Option<(usize, u64, u64, u32)>|
     -> Result<(), String> {
        let mut b = vec![0u8; 2048];
        let mut new = 0;
        for o in 0..objs {
            for q in 0..pages {
                let n = fs
                    .read(ids[o], q * 2048, &mut b)
                    .map_err(|x| format!("object {o} page {q}: {x:?}"))?;
                let v = u32::from_le_bytes(b[8..12].try_into().unwrap());
                if n != 2048 || b != sw_image(o, q, v) {
                    return Err(format!("object {o} page {q}: bytes of no version"));
                }
                if v == model[o][q as usize] {
                    continue;
                }
                if let Some((po, pp, pn, pv)) = pending {
                    if o == po && (pp..pp + pn).contains(&q) && v == pv {
                        new += 1;
                        continue;
                    }
                }
                return Err(format!(
                    "object {o} page {q}: version {v}, want {}",
                    model[o][q as usize]
                ));
            }
        }
        if let Some((po, pp, pn, pv)) = pending {
            if new != 0 && new != pn {
                return Err(format!("{new} of {pn} pages of the cut write"));
            }
            if new == pn {
                for q in pp..pp + pn {
                    model[po][q as usize] = pv;
                }
            }
        }
        Ok(())
    };
    let mut pending = None;
    for round in 0..rounds {
        let nocut = std::env::var("S48_NOCUT").is_ok();
        // A cut inside the recovery, now and then.
        if rng.below(3) == 0 && !nocut {
            let kind = CutKind::ALL[rng.below(CutKind::ALL.len() as u64) as usize];
            sim.arm(
                FaultPlan::seeded(seed ^ round as u64)
                    .with_faults(FaultConfig {
                        unstable_after_cut: true,
                        ..FaultConfig::default()
                    })
                    .with_cut(1 + rng.below(6), kind),
            );
            {
                let mut fs = Fs::new(&mut sim, Config::new(), Greedy::default());
                let _ = fs.mount();
            }
            sim.power_on();
            sim.disarm();
        }
        let mut fs = Fs::new(&mut sim, Config::new(), Greedy::default());
        if let Err(x) = fs.mount() {
            return SwOut::Bad(format!("round {round}: mount: {x:?}"));
        }
        if fs.health() != oftl::Health::Writable {
            return SwOut::Bad(format!("round {round}: after mount: {:?}", fs.health()));
        }
        if let Err(m) = check(&mut fs, &ids, &mut model, pending.take()) {
            return SwOut::Bad(format!("round {round}: {m}"));
        }
        // Acknowledged work, then a cut in the next few calls.
        for _ in 0..rng.below(20) {
            let x = op(&mut rng, &mut next_v);
            if let Err(er) = apply(&mut fs, &ids, x) {
                return SwOut::Bad(format!("round {round}: write: {er:?}"));
            }
            for q in x.1..x.1 + x.2 {
                model[x.0][q as usize] = x.3;
            }
        }
        if rng.below(4) == 0 {
            let _ = fs.gc_step(rng.below(32) as u32);
        }
        let kind = CutKind::ALL[rng.below(CutKind::ALL.len() as u64) as usize];
        let at = if nocut { 1 << 40 } else { 1 + rng.below(10) };
        fs.flash_mut().arm(
            FaultPlan::seeded(seed ^ 0xabc ^ round as u64)
                .with_faults(FaultConfig {
                    unstable_after_cut: true,
                    ..FaultConfig::default()
                })
                .with_cut(at, kind),
        );
        for _ in 0..12 {
            let x = op(&mut rng, &mut next_v);
            match apply(&mut fs, &ids, x) {
                Ok(()) => {
                    for q in x.1..x.1 + x.2 {
                        model[x.0][q as usize] = x.3;
                    }
                }
                Err(oftl::WriteError::NoSpace) if fs.flash_mut().is_powered() => {
                    return SwOut::Bad(format!("round {round}: NoSpace"));
                }
                Err(_) => {
                    pending = Some(x);
                    break;
                }
            }
        }
        drop(fs);
        sim.power_on();
        sim.disarm();
    }
    let mut fs = Fs::new(&mut sim, Config::new(), Greedy::default());
    if let Err(x) = fs.mount() {
        return SwOut::Bad(format!("last mount: {x:?}"));
    }
    if let Err(m) = check(&mut fs, &ids, &mut model, pending.take()) {
        return SwOut::Bad(format!("last: {m}"));
    }
    SwOut::Held
}

#[test]
#[ignore = "exploration"]
fn explore_cycles() {
    let seeds: u64 = common::env("S48_SEEDS", 40);
    let from: u64 = common::env("S48_FROM", 0);
    let w: u16 = common::env("S48_W", 6);
    let fill: u64 = common::env("S48_FILL", 90);
    let rounds: u32 = common::env("S48_ROUNDS", 30);
    let mut tally = std::collections::BTreeMap::new();
    for seed in from..from + seeds {
        let v = cycle_case(w, fill, seed, rounds);
        if let SwOut::Bad(m) = &v {
            println!("BAD seed {seed}: {m}");
        }
        let k = match v {
            SwOut::Bad(_) => "bad",
            SwOut::Held => "held",
            SwOut::Skip => "skip",
        };
        *tally.entry(k).or_insert(0) += 1;
    }
    println!("w {w} fill {fill}: {tally:?}");
}

#[test]
#[ignore = "exploration"]
fn explore_f1_w25n01gv() {
    for w in [8u16, 16] {
        for at in 1..4 {
            println!(
                "W25N01GV w {w} at {at}: {:?}",
                torn_first_page_generic::<1024, 7>(profile::W25N01GV, w, 3, 0, at, false)
            );
        }
    }
}

// ---------------------------------------------------------------------------------
// Findings.

/// F1 (caused by the change, b6a116b): see the module docs. Deterministic F4 model
/// (the torn page garbled for the recovery, restored for the rebuild) on TINY with
/// windows 4, 6 and 8 and on the W25N01GV with its default 16-block window, and the
/// simulator's own F4 draws (`unstable_after_cut`) for seed 186501. All held on
/// c33dc2a, the parent (the recovery moved the block: 11 pages relocated).
#[test]
fn f1_rebuild_revives_a_dropped_torn_page_at_the_start_of_the_data_heads_next_block() {
    let mut bad = Vec::new();
    for w in [4u16, 6, 8] {
        match torn_first_page_of_next_block(w, 3, 0, 2, false) {
            Ok(Verdict::Held) => {}
            other => bad.push(format!("TINY w {w}: {other:?}")),
        }
    }
    match torn_first_page_generic::<1024, 7>(profile::W25N01GV, 16, 3, 0, 2, false) {
        Ok(Verdict::Held) => {}
        other => bad.push(format!("W25N01GV w 16: {other:?}")),
    }
    match torn_first_page_of_next_block(6, 3, 186_501, 2, true) {
        Ok(Verdict::Held) | Ok(Verdict::RecoveryKept) => {}
        other => bad.push(format!("TINY w 6, F4 draws, seed 186501: {other:?}")),
    }
    // The random-workload sweep with the same F4 model: the two seeds (of 1,500 per
    // window) that fail on b6a116b only.
    for (w, seed) in [(6u16, 1013u64), (4, 902)] {
        if let SwOut::Bad(m) = sweep_case_with(profile::TINY, w, seed, true) {
            bad.push(format!("sweep w {w} seed {seed}: {m}"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// P1 (pre-existing: fails the same way on c33dc2a): the same shape with the
/// simulator's F4 draws, where the recovery's second pass (or its pass 1) reads the
/// torn page after the first pass did not: the commit is dropped (`unread_commit`, or
/// a page pass 2 reads but pass 1 did not), `last_block[DATA_HEAD]` is the torn page's
/// block, so the block holding the last replayed commit is neither moved nor (since
/// b6a116b) left by `cut_block_may_wait`'s rule: its pages keep numbers below the
/// dropped page's and a rebuild applies the dropped write. 33 of 200,000 seeds on
/// c33dc2a, 34 on b6a116b (the extra one is F1's seed 186501).
#[test]
#[ignore = "known limitation, pre-existing (DESIGN 7.5): a rebuild cannot tell a dropped transaction from one whose commit page was collected"]
fn p1_preexisting_rebuild_revives_a_dropped_torn_commit_in_the_next_block() {
    let mut bad = Vec::new();
    for seed in [7696u64, 9168, 19589, 20412] {
        match torn_first_page_of_next_block(6, 3, seed, 2, true) {
            Ok(Verdict::Held) | Ok(Verdict::RecoveryKept) => {}
            other => bad.push(format!("seed {seed}: {other:?}")),
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// P2 (pre-existing: the same 141 of 600 seeds fail on c33dc2a and on b6a116b): a
/// multi-page overwrite cut after some of its pages landed is dropped by the recovery,
/// later work is acknowledged, and a full-scan rebuild applies the landed pages (part
/// of a transaction: its atomicity is broken) wherever the pages they overwrote lived
/// outside the block the recovery moved. DESIGN 7.5 says a rebuild keeps what such a
/// transaction overwrote ("Relocation numbers the last block's valid pages above the
/// cut transaction's, so where it overwrote them the rebuild keeps them") and names only
/// writes into holes; here every page overwritten existed (objects written whole first).
#[test]
#[ignore = "known limitation, pre-existing (DESIGN 7.5): a rebuild cannot tell a dropped transaction from one whose commit page was collected"]
fn p2_preexisting_rebuild_applies_part_of_a_cut_overwrite_the_recovery_dropped() {
    let mut bad = Vec::new();
    for seed in [1u64, 5, 9, 11] {
        if let SwOut::Bad(m) = sweep_case(profile::TINY, 6, seed) {
            bad.push(format!("seed {seed}: {m}"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

// ---------------------------------------------------------------------------------
// Held surfaces (fast, deterministic).

/// Near full (92 % of `capacity_pages` in data), windows 6 and 8: 30 rounds a seed of
/// acknowledged overwrites, a cut in the next calls and one inside every third
/// recovery (every kind, F4), a mount after each: every acknowledged page reads back,
/// the cut write all or nothing, no `NoSpace`, never read-only.
#[test]
fn held_cycles_near_full_with_recovery_cuts() {
    let mut bad = Vec::new();
    for w in [6u16, 8] {
        for seed in 0..16u64 {
            if let SwOut::Bad(m) = cycle_case(w, 92, seed, 30) {
                bad.push(format!("w {w} seed {seed}: {m}"));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
#[ignore = "exploration"]
fn debug_p2() {
    let seed: u64 = common::env("S48_SEED", 1);
    println!("{:?}", sweep_case(profile::TINY, 6, seed));
}
