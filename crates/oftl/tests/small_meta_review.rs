//! An independent review's probes of small metadata units (`META` below the page), kept
//! as regression tests: builds of both layouts taking turns across power cuts, the
//! largest object and thousands of objects in 512-byte units, damaged 512-byte pages
//! under every kind of mount (never a panic, never wrong data), sealed superblocks
//! naming other units, and units of 1,024 and 1,536 bytes. (Its findings, a log-less
//! build collecting log pages it could not recover and in-band slots between the
//! payload and the page, are fixed and tested in `small_meta.rs`.)
#![cfg(feature = "alloc")]

use crate::common;
use common::contents::{churn, cut_writes, state_of, Contents};
use common::lifecycle::Lifecycle;
use common::{bytes, Rng};

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use nand_hal::sim::{profile, CutKind, FaultPlan, HeapStorage, PowerCut, SimNand, TornMode};
use nand_hal::{NandFlash, PageAddr};
use oftl::format::backpointer::PageKind;
use oftl::{
    Config, Damaged, Greedy, Mismatch, MountError, ObjKind, Oftl, W25n01gv, W25n01gvSmall,
    WriteError,
};

type Sim = SimNand<HeapStorage>;
type TinySmall<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 0, Greedy, 512>;
type TinyWhole<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 0, Greedy>;
type TinyMid<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 1, Greedy, 1024>;
type TinyOdd<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 1, Greedy, 1536>;

fn tiny_cfg() -> Config {
    Config::new().window_blocks(6)
}

type M = Contents;

const KINDS: [CutKind; 4] = [
    CutKind::Clean,
    CutKind::Torn(TornMode::Prefix),
    CutKind::Torn(TornMode::SomeBits),
    CutKind::Torn(TornMode::Random),
];

fn arm(sim: &mut Sim, seed: u64, at: u64, kind: CutKind) {
    sim.arm(FaultPlan {
        seed,
        cut: Some(PowerCut { at_op: at, kind }),
        faults: Default::default(),
    });
}

/// Mounts (recovering) with the `U`-byte-unit build; when the state is the one before
/// or after the write in flight, it becomes the model and more churn runs on it.
fn recover_and_churn<const U: usize>(
    sim: &mut Sim,
    before: &Contents,
    after: &Contents,
    m: &mut Contents,
    rng: &mut Rng,
) -> Result<Result<Contents, String>, String> {
    let mut fs = Oftl::<&mut Sim, 2048, 64, 4, 0, Greedy, U>::mounted(sim)
        .map_err(|e| format!("{e:?} ({U}-byte units)"))?;
    let s = state_of(&mut fs);
    if let Ok(s) = &s {
        if s == before || s == after {
            *m = s.clone();
            churn(&mut fs, m, rng, 80, 4000);
        }
    }
    Ok(s)
}

/// Format small, crash, recover with the whole-page build, churn + GC, crash, recover
/// with the small build; repeat; compare to a model.
#[test]
fn rv_mixed_builds_across_power_cuts() {
    let mut fails = Vec::new();
    let mut cuts = 0;
    for seed in 0..40u64 {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
        let mut rng = Rng(seed * 31 + 5);
        let mut m = M::new();
        {
            let mut fs = TinySmall::formatted(&mut sim, tiny_cfg()).unwrap();
            churn(&mut fs, &mut m, &mut rng, 120, 5000);
        }
        for round in 0..4 {
            // workload under a cut, with the build of this round
            let at = 1 + rng.below(80);
            let kind = KINDS[(seed as usize + round) % 4];
            let (before, after, cut) = if round % 2 == 0 {
                let mut fs = TinySmall::mounted(&mut sim).unwrap();
                arm(fs.flash_mut(), seed, at, kind);
                cut_writes(&mut fs, &m, &mut rng)
            } else {
                let mut fs = TinyWhole::mounted(&mut sim).unwrap();
                arm(fs.flash_mut(), seed, at, kind);
                cut_writes(&mut fs, &m, &mut rng)
            };
            cuts += cut as u32;
            sim.power_on();
            sim.disarm();
            // recover with the other build
            let r = if round % 2 == 0 {
                recover_and_churn::<2048>(&mut sim, &before, &after, &mut m, &mut rng)
            } else {
                recover_and_churn::<512>(&mut sim, &before, &after, &mut m, &mut rng)
            };
            let r = match r {
                Ok(r) => r,
                Err(e) => {
                    fails.push(format!("seed {seed} round {round}: mount {e}"));
                    break;
                }
            };
            match r {
                Ok(s) if s == before || s == after => {}
                Ok(_) => {
                    fails.push(format!(
                        "seed {seed} round {round}: state neither before nor after"
                    ));
                    break;
                }
                Err(e) => {
                    fails.push(format!("seed {seed} round {round}: read {e}"));
                    break;
                }
            }
        }
        // final: both builds agree
        let a = state_of(&mut TinySmall::mounted(&mut sim).unwrap());
        let b = state_of(&mut TinyWhole::mounted(&mut sim).unwrap());
        if a != b {
            fails.push(format!("seed {seed}: builds disagree"));
        }
    }
    println!("mixed builds: {cuts} cuts, failures: {fails:#?}");
    assert!(fails.is_empty(), "{fails:#?}");
}

/// Objects at the 32 MiB index limit of the 512-B layout on the W25N01GV.
#[test]
fn rv_largest_object_small_w25n01gv() {
    let mut sim = Sim::heap(profile::W25N01GV, FaultPlan::seeded(3));
    let max;
    let mut model: M = M::new();
    {
        let mut fs = W25n01gvSmall::formatted(&mut sim, Config::default()).unwrap();
        max = fs.max_object_size();
        assert_eq!(max, 128 * 128 * 2048);
        let a = fs.create(ObjKind::Object).unwrap();
        let b = fs.create(ObjKind::Object).unwrap();
        // last page exactly
        let d = bytes(1, 4096);
        fs.write(a, max - 4096, &d).unwrap();
        assert_eq!(fs.size(a).unwrap(), max);
        // one byte past
        let r = fs.write(a, max, b"x");
        assert!(matches!(r, Err(WriteError::TooLarge)), "{r:?}");
        let r = fs.write(a, max - 10, &[7u8; 20]);
        assert!(matches!(r, Err(WriteError::TooLarge)), "{r:?}");
        assert_eq!(fs.size(a).unwrap(), max);
        let mut back = vec![0u8; 4096];
        fs.read(a, max - 4096, &mut back).unwrap();
        assert_eq!(back, d);
        // fill some leaves in the middle
        let mid = bytes(2, 128 * 2048 * 2 + 333);
        fs.write(a, 128 * 2048 * 60 - 100, &mid).unwrap();
        // b: dense 3 leaves
        let db = bytes(3, 128 * 2048 * 3 + 17);
        fs.write(b, 0, &db).unwrap();
        fs.sync().unwrap();
        // truncate a across leaves
        let t = 128 * 2048 * 61 + 5;
        fs.truncate(a, t).unwrap();
        let mut ma = vec![0u8; t as usize];
        let s = (128 * 2048 * 60 - 100) as usize;
        ma[s..].copy_from_slice(&mid[..t as usize - s]);
        // extend again past the truncation with a hole
        fs.write(a, max - 1, b"z").unwrap();
        ma.resize(max as usize, 0);
        ma[max as usize - 1] = b'z';
        model.insert(a, ma);
        fs.truncate(b, 128 * 2048 + 1).unwrap();
        model.insert(b, db[..128 * 2048 + 1].to_vec());
        for _ in 0..50 {
            if !fs.gc_step(64).unwrap().more {
                break;
            }
        }
        assert_eq!(state_of(&mut fs).unwrap(), model);
        fs.unmount().unwrap();
    }
    {
        let mut fs = W25n01gv::mounted(&mut sim).unwrap();
        assert_eq!(fs.max_object_size(), max);
        assert_eq!(state_of(&mut fs).unwrap(), model);
        let r = fs.write(*model.keys().next().unwrap(), max, b"x");
        assert!(matches!(r, Err(WriteError::TooLarge)), "{r:?}");
        // crash with dirty cache from the default build
        let b = *model.keys().nth(1).unwrap();
        fs.write(b, 5, b"hello").unwrap();
        fs.sync().unwrap();
        model.get_mut(&b).unwrap()[5..10].copy_from_slice(b"hello");
    }
    let mut fs = W25n01gvSmall::mounted(&mut sim).unwrap();
    assert_eq!(state_of(&mut fs).unwrap(), model);
    for id in model.keys() {
        fs.delete(*id).unwrap();
    }
    fs.unmount().unwrap();
    fs.mount().unwrap();
    assert_eq!(fs.objects().count(), 0);
}

/// Thousands of objects: deletes empty whole table pages and table leaves.
#[test]
fn rv_thousands_of_objects_small() {
    let mut sim = Sim::heap(profile::W25N01GV, FaultPlan::seeded(4));
    let mut model = M::new();
    let n = 4700u32;
    {
        let mut fs = W25n01gvSmall::formatted(&mut sim, Config::default()).unwrap();
        for i in 0..n {
            let id = fs.create(ObjKind::Object).unwrap();
            let d = bytes(i, (i as usize % 5) * 37);
            if !d.is_empty() {
                fs.write(id, 0, &d).unwrap();
            }
            model.insert(id, d);
            if i % 500 == 499 {
                fs.sync().unwrap();
            }
        }
        fs.sync().unwrap();
        // delete a whole table leaf worth of ids (2048..4096) and every id of some pages
        let ids: Vec<u32> = model.keys().copied().collect();
        for id in ids {
            if (2048..4096).contains(&id) || (id / 16) % 3 == 0 {
                fs.delete(id).unwrap();
                model.remove(&id);
            }
        }
        fs.sync().unwrap();
        assert_eq!(state_of(&mut fs).unwrap(), model);
        for _ in 0..200 {
            if !fs.gc_step(64).unwrap().more {
                break;
            }
        }
        assert_eq!(state_of(&mut fs).unwrap(), model);
        // crash (no unmount)
    }
    {
        let mut fs = W25n01gv::mounted(&mut sim).unwrap();
        assert_eq!(state_of(&mut fs).unwrap(), model);
        // recreate
        for i in 0..100 {
            let id = fs.create(ObjKind::Object).unwrap();
            let d = bytes(i + 90000, 100);
            fs.write(id, 0, &d).unwrap();
            model.insert(id, d);
        }
        // delete everything below 2048 too: table leaf 0 empties
        let ids: Vec<u32> = model.keys().copied().filter(|&i| i < 2048).collect();
        for id in ids {
            fs.delete(id).unwrap();
            model.remove(&id);
        }
        fs.unmount().unwrap();
    }
    let mut fs = W25n01gvSmall::mounted(&mut sim).unwrap();
    assert_eq!(state_of(&mut fs).unwrap(), model);
    let ids: Vec<u32> = model.keys().copied().collect();
    for id in ids {
        fs.delete(id).unwrap();
        model.remove(&id);
    }
    fs.unmount().unwrap();
    fs.mount().unwrap();
    assert_eq!(state_of(&mut fs).unwrap(), model);
    let id = fs.create(ObjKind::Object).unwrap();
    fs.write(id, 0, b"ok").unwrap();
    fs.unmount().unwrap();
}

/// Every page of `sim` whose tag says `kind`.
fn pages_of(sim: &Sim, kinds: &[PageKind]) -> Vec<u32> {
    common::pages::all_pages(sim)
        .into_iter()
        .filter(|p| kinds.contains(&p.kind))
        .map(|p| p.page)
        .collect()
}

fn exercise<
    F: NandFlash,
    const B: usize,
    const C: usize,
    const W: usize,
    const ME: usize,
    const L: usize,
>(
    fs: &mut Oftl<F, 2048, B, C, W, Greedy, ME, L>,
) {
    let _ = state_of(fs);
    let ids: Vec<u32> = fs.objects().filter_map(Result::ok).collect();
    for id in ids.iter().take(5) {
        let _ = fs.write(*id, 100, &[1u8; 3000]);
        let _ = fs.truncate(*id, 50);
    }
    if let Ok(id) = fs.create(ObjKind::Object) {
        let _ = fs.write(id, 0, &[2u8; 9000]);
    }
    for _ in 0..20 {
        let _ = fs.gc_step(64);
    }
    if let Some(id) = ids.first() {
        let _ = fs.delete(*id);
    }
    let _ = fs.unmount();
}

/// Damaged 512-unit index/table pages: never panic.
#[test]
fn rv_damaged_small_pages_never_panic() {
    let mut base = Sim::heap(profile::TINY, FaultPlan::seeded(9));
    let mut m = M::new();
    {
        let mut fs = TinySmall::formatted(&mut base, tiny_cfg()).unwrap();
        churn(&mut fs, &mut m, &mut Rng(77), 400, 6000);
        fs.unmount().unwrap();
    }
    let pages = pages_of(&base, &[PageKind::Index, PageKind::Table]);
    println!("{} index/table pages", pages.len());
    let mut panics = Vec::new();
    let mut cases = 0;
    let mut outcomes: BTreeMap<String, u32> = BTreeMap::new();
    let mut rng = Rng(5);
    for (i, &p) in pages.iter().enumerate() {
        for mode in 0..6 {
            let mut sim = base.clone();
            let mut d = vec![0u8; 2048];
            let mut oob = vec![0u8; 64];
            sim.peek(PageAddr(p), &mut d, &mut oob);
            match mode {
                0 => {
                    let at = rng.below(508) as usize;
                    d[at] ^= 1 << rng.below(8);
                }
                1 => {
                    // unit 1..3 programmed with junk
                    let at = 512 + rng.below(1536) as usize;
                    d[at] = 0x00;
                }
                2 => {
                    for b in d[512..].iter_mut() {
                        *b = rng.next() as u8;
                    }
                }
                3 => {
                    let at = rng.below(64) as usize;
                    oob[at] ^= 0xFF;
                }
                4 => {
                    // entries in unit 0 pointing far away (valid pages but wrong)
                    for k in 0..8 {
                        let e = (rng.below(1024) as u32).to_le_bytes();
                        let at = (rng.below(127) as usize) * 4;
                        d[at..at + 4].copy_from_slice(&e);
                        let _ = k;
                    }
                }
                _ => {
                    for b in d[..512].iter_mut() {
                        *b = 0;
                    }
                }
            }
            sim.poke(PageAddr(p), 0, &d, &oob);
            cases += 1;
            let r = catch_unwind(AssertUnwindSafe(|| {
                let mut s2 = sim.clone();
                let mut s3 = sim.clone();
                let mut s4 = sim.clone();
                let mut out = String::new();
                match TinySmall::mounted(&mut sim) {
                    Ok(mut fs) => {
                        out += match state_of(&mut fs) {
                            Ok(s) if s == m => "small:same ",
                            Ok(_) => "small:DIFFERENT ",
                            Err(_) => "small:readerr ",
                        };
                        exercise(&mut fs);
                    }
                    Err(e) => out += &format!("small:{e:?} "),
                }
                if let Ok(mut fs) = TinyWhole::mounted(&mut s2) {
                    exercise(&mut fs)
                }
                let mut fs = TinySmall::new(&mut s3, tiny_cfg(), Greedy::default());
                if fs.mount_damaged(Damaged::Repair).is_ok() {
                    exercise(&mut fs);
                }
                let mut fs = TinySmall::new(&mut s4, tiny_cfg(), Greedy::default());
                match fs.mount_damaged(Damaged::Rebuild {
                    lost_meta_attrs: [0xFF; oftl::ATTR_LEN],
                }) {
                    Ok(()) => {
                        out += "rebuild:ok";
                        exercise(&mut fs);
                    }
                    Err(e) => out += &format!("rebuild:{e:?}"),
                }
                out
            }));
            match r {
                Ok(o) => *outcomes.entry(format!("m{mode} {o}")).or_default() += 1,
                Err(e) => {
                    let msg = e
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    panics.push(format!("page {p} (#{i}) mode {mode}: {msg}"));
                }
            }
        }
    }
    println!("{cases} cases; outcomes {outcomes:#?}");
    assert!(panics.is_empty(), "{panics:#?}");
}

/// Odd metadata units in the superblock.
#[test]
fn rv_odd_meta_units_in_superblock() {
    use oftl::format::superblock::Superblock;
    let mut outcomes = Vec::new();
    for unit in [512u16, 1024, 1536, 2048, 0xFFFF, 256, 0, 4096, 0xFFFE] {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(1));
        let mut m = M::new();
        {
            let mut fs = TinySmall::formatted(&mut sim, tiny_cfg()).unwrap();
            churn(&mut fs, &mut m, &mut Rng(3), 100, 3000);
            fs.unmount().unwrap();
        }
        // find superblock copies: page 0 of blocks with sb (first SB_SEARCH blocks)
        let mut patched = 0;
        for b in 0..8u32 {
            let p = PageAddr(b * 16);
            let mut d = vec![0u8; 2048];
            let mut oob = vec![0u8; 64];
            sim.peek(p, &mut d, &mut oob);
            if let Ok(Some(_)) = Superblock::parse(&d[..512]) {
                d[161..163].copy_from_slice(&unit.to_le_bytes());
                let crc = crc32(&d[..508]);
                d[508..512].copy_from_slice(&crc.to_le_bytes());
                sim.poke(p, 0, &d[..512], &[]);
                patched += 1;
            }
        }
        assert_eq!(patched, 2);
        let r = catch_unwind(AssertUnwindSafe(|| {
            let mut s2 = sim.clone();
            let a = match TinySmall::mounted(&mut sim) {
                Ok(mut fs) => format!(
                    "small ok same={}",
                    state_of(&mut fs).map(|s| s == m).unwrap_or(false)
                ),
                Err(e) => format!("small {e:?}"),
            };
            let b = match TinyWhole::mounted(&mut s2) {
                Ok(mut fs) => {
                    let same = state_of(&mut fs).map(|s| s == m);
                    exercise(&mut fs);
                    format!("whole ok same={same:?}")
                }
                Err(e) => format!("whole {e:?}"),
            };
            format!("{a}; {b}")
        }));
        outcomes.push((unit, r.map_err(|_| "PANIC")));
    }
    println!("{outcomes:#?}");
    assert!(outcomes.iter().all(|(_, r)| r.is_ok()));
    // A sealed superblock naming another unit than the pages were written with is
    // caught by the pages' own lengths: an error, never a store with objects missing.
    for (unit, r) in &outcomes {
        let r = r.as_ref().unwrap();
        assert!(
            !r.contains("same=false") && !r.contains("same=Ok(false)"),
            "unit {unit}: {r}"
        );
    }
}

fn crc32(b: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &x in b {
        crc ^= x as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// META 1024 and 1536 builds: churn, logs, power cuts, cross-mount.
#[test]
fn rv_other_meta_units() {
    for odd in [false, true] {
        for seed in 0..12u64 {
            let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
            let mut m = M::new();
            let mut rng = Rng(seed + 1);
            let stream;
            let mut recs = Vec::new();
            macro_rules! body {
                ($T:ty) => {{
                    let mut fs = <$T>::formatted(&mut sim, tiny_cfg()).unwrap();
                    stream = fs.create(ObjKind::Log).unwrap();
                    for i in 0..40u32 {
                        let r = bytes(i, 1 + (i as usize * 37) % 900);
                        fs.log_append(stream, &r).unwrap();
                        recs.push(r);
                    }
                    fs.sync().unwrap();
                    churn(&mut fs, &mut m, &mut rng, 200, 6000);
                    arm(
                        fs.flash_mut(),
                        seed,
                        1 + rng.below(60),
                        KINDS[seed as usize % 4],
                    );
                    let (b, a, _) = cut_writes(&mut fs, &m, &mut rng);
                    fs.flash_mut().power_on();
                    fs.flash_mut().disarm();
                    fs.mount().unwrap();
                    let s = state_of(&mut fs).unwrap();
                    assert!(s == b || s == a, "odd={odd} seed {seed}");
                    m = s;
                    churn(&mut fs, &mut m, &mut rng, 100, 6000);
                    fs.unmount().unwrap();
                }};
            }
            if odd {
                body!(TinyOdd)
            } else {
                body!(TinyMid)
            }
            let mut fs = TinyWhole::mounted(&mut sim).unwrap();
            assert_eq!(state_of(&mut fs).unwrap(), m);
            let (a, b) = fs.log_bounds(stream).unwrap();
            assert!(b - a >= recs.len() as u64);
            let mut buf = [0u8; 2048];
            let mut got = Vec::new();
            let mut l = a;
            while let Some(r) = fs.log_read(stream, l, &mut buf).unwrap() {
                got.push(buf[..r.len].to_vec());
                l = r.next;
            }
            let _ = b;
            assert_eq!(got, recs, "odd={odd} seed {seed}");
            drop(fs);
            // small build refuses
            assert!(matches!(
                TinySmall::mounted(&mut sim),
                Err(MountError::Mismatch(Mismatch::Capacity))
            ));
        }
    }
}
