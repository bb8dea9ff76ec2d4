//! Independent review (s36c) of stop 36's oftl changes: the read-only threshold
//! (`Oftl::min_good_blocks` now counts a smallest window) on healthy parts filled every
//! way, and the log read's re-reads of a page that reads after its retries.

#![allow(dead_code)]

use nand_hal::sim::{profile, FaultPlan, HeapStorage, Profile, SimNand};

use oftl::{Config, Greedy, Health, ObjKind, Oftl, WriteError};

type Sim = SimNand<HeapStorage>;

fn sim(p: Profile, seed: u64) -> Sim {
    SimNand::heap(p, FaultPlan::seeded(seed))
}

fn cfg(window: u16) -> Config {
    Config {
        window_blocks: window,
        format_id: 7,
        ..Default::default()
    }
}

fn pat(seed: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2654435761).wrapping_add(seed) as u8)
        .collect()
}

#[derive(Clone, Copy, Debug)]
enum Load {
    /// Objects of 8 pages.
    Big,
    /// Objects of 100 bytes.
    Small,
    /// Few objects, one page each at offsets an index page apart (an index page each).
    Sparse,
    /// Log streams with 64-byte records.
    Logs,
    /// Big, then overwrites of random pages at capacity (rewrites in place).
    Churn,
}

const LOADS: [Load; 5] = [
    Load::Big,
    Load::Small,
    Load::Sparse,
    Load::Logs,
    Load::Churn,
];

/// Fills a healthy store with `load` until it refuses; the store must stay writable
/// (health `Writable`), deletes must work, and writes must work again after them.
fn fill<const BL: usize, const C: usize, const W: usize, const M: usize, const L: usize>(
    p: Profile,
    window: u16,
    load: Load,
    seed: u64,
) -> String {
    let mut s = sim(p, seed);
    let mut fs: Oftl<&mut Sim, 2048, BL, C, W, Greedy, M, L> =
        Oftl::new(&mut s, cfg(window), Greedy::DEFAULT);
    if let Err(e) = fs.format() {
        return format!("format {e:?}");
    }
    let ctx = format!("{} w{window} {load:?} BL{BL} C{C} W{W} M{M} L{L}", p.name);
    assert_eq!(fs.health(), Health::Writable, "{ctx}: fresh");
    let payload = 2048u64;
    let mut objs = Vec::new();
    let mut n = 0u64;
    let mut why = None;
    let mut rng = seed | 1;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    'outer: for i in 0..2_000_000u32 {
        let r: Result<(), WriteError<_>> = (|| match load {
            Load::Big | Load::Churn => {
                let o = fs.create(ObjKind::Object)?;
                objs.push(o);
                fs.write(o, 0, &pat(i, 8 * payload as usize))?;
                fs.flush(o)
            }
            Load::Small => {
                let o = fs.create(ObjKind::Object)?;
                objs.push(o);
                fs.write(o, 0, &pat(i, 100))?;
                fs.flush(o)
            }
            Load::Sparse => {
                if objs.is_empty() || i % 200 == 0 {
                    let o = fs.create(ObjKind::Object)?;
                    objs.push(o);
                }
                let o = *objs.last().unwrap();
                // An index page maps payload/4 (or /8) pages; 600 pages apart is a new
                // leaf each time.
                let off = (i % 200) as u64 * 600 * payload;
                if off + payload > fs.max_object_size() {
                    return Ok(());
                }
                fs.write(o, off, &pat(i, payload as usize))?;
                fs.flush(o)
            }
            Load::Logs => {
                if objs.is_empty() || i % 3000 == 0 {
                    let o = fs.create(ObjKind::Log)?;
                    objs.push(o);
                }
                let o = *objs.last().unwrap();
                fs.log_append(o, &pat(i, 64)).map(|_| ())
            }
        })();
        n += 1;
        if let Err(e) = r {
            why = Some(format!("{e:?}"));
            break 'outer;
        }
        assert_eq!(fs.health(), Health::Writable, "{ctx}: after {n} ops");
    }
    let cap = fs.capacity_pages();
    let min_good = fs.min_good_blocks();
    assert_eq!(
        fs.health(),
        Health::Writable,
        "{ctx}: full after {n} ops ({why:?}), min_good {min_good}, capacity {cap}"
    );
    if let Load::Churn = load {
        // Rewrites in place at capacity.
        for k in 0..3000u32 {
            let o = objs[(next() % objs.len() as u64) as usize];
            let pg = next() % 8;
            let r = fs
                .write(o, pg * payload, &pat(k, payload as usize))
                .and_then(|()| fs.flush(o));
            if let Err(e) = r {
                if !matches!(e, WriteError::NoSpace | WriteError::NotFound) {
                    panic!("{ctx}: churn {k}: {e:?}");
                }
            }
            assert_eq!(fs.health(), Health::Writable, "{ctx}: churn {k}");
        }
    }
    // Deletes must work and make room.
    let mut deleted = 0;
    for &o in objs.iter().rev().take(objs.len() / 2 + 1) {
        match fs.delete(o) {
            Ok(()) => deleted += 1,
            Err(WriteError::NotFound) => {}
            Err(e) => panic!("{ctx}: delete {o}: {e:?} (health {:?})", fs.health()),
        }
    }
    let o = fs
        .create(ObjKind::Object)
        .unwrap_or_else(|e| panic!("{ctx}: create after deletes {e:?}"));
    fs.write(o, 0, &pat(1, 3 * payload as usize)).unwrap();
    fs.flush(o)
        .unwrap_or_else(|e| panic!("{ctx}: write after deletes {e:?}"));
    fs.unmount().unwrap();
    let mut fs: Oftl<&mut Sim, 2048, BL, C, W, Greedy, M, L> =
        Oftl::new(&mut s, Config::new(), Greedy::DEFAULT);
    fs.mount().unwrap();
    assert_eq!(fs.health(), Health::Writable, "{ctx}: remount");
    format!("{ctx}: {n} ops until {why:?}, capacity {cap}, min_good {min_good}, deleted {deleted}")
}

/// Healthy parts (no bad block grown) filled every way never turn read-only.
#[test]
fn probe_healthy_full_stores_stay_writable() {
    let mut out = Vec::new();
    for load in LOADS {
        for w in [4u16, 5, 6, 8] {
            out.push(fill::<64, 4, 2, 2048, 2048>(profile::TINY, w, load, 1));
            out.push(fill::<64, 4, 1, 2048, 2048>(profile::TINY, w, load, 2));
            out.push(fill::<64, 8, 4, 2048, 2048>(profile::TINY, w, load, 3));
            // 512-byte units with churn: the finding below
            // (`healthy_small_meta_store_at_capacity_wedges_...`).
            if !matches!(load, Load::Logs | Load::Churn) {
                out.push(fill::<64, 4, 2, 512, 0>(profile::TINY, w, load, 4));
            }
            if !matches!(load, Load::Churn) {
                out.push(fill::<64, 4, 2, 512, 2048>(profile::TINY, w, load, 5));
            }
        }
    }
    println!("{}", out.join("\n"));
}

/// The same on the W25N01GV (64 pages per block, 1024 blocks): the crate's configs.
#[test]
fn probe_healthy_full_w25n01gv_stays_writable() {
    let mut out = Vec::new();
    for load in [Load::Big, Load::Small, Load::Logs] {
        for w in [4u16, 8] {
            out.push(fill::<1024, 7, 2, 2048, 2048>(
                profile::W25N01GV,
                w,
                load,
                11,
            ));
            if !matches!(load, Load::Logs) {
                // W25n01gvSmall
                out.push(fill::<1024, 4, 1, 512, 0>(profile::W25N01GV, w, load, 12));
            }
            out.push(fill::<1024, 4, 1, 512, 2048>(
                profile::W25N01GV,
                w,
                load,
                13,
            ));
        }
    }
    println!("{}", out.join("\n"));
}

/// Diagnosis of the churn case: fill with 8-page objects, rewrite random pages at
/// capacity, then delete.
fn churn_then_delete<const C: usize, const W: usize, const M: usize, const L: usize>(
    window: u16,
    seed: u64,
    churn: u32,
    discard_failed: bool,
) -> Result<String, String> {
    let mut s = sim(profile::TINY, seed);
    let mut fs: Oftl<&mut Sim, 2048, 64, C, W, Greedy, M, L> =
        Oftl::new(&mut s, cfg(window), Greedy::DEFAULT);
    fs.format().unwrap();
    let payload = 2048u64;
    let mut objs = Vec::new();
    let mut fill_err = None;
    for i in 0..100_000u32 {
        let r = fs.create(ObjKind::Object).and_then(|o| {
            objs.push(o);
            fs.write(o, 0, &pat(i, 8 * payload as usize))?;
            fs.flush(o)
        });
        if let Err(e) = r {
            fill_err = Some(e);
            break;
        }
    }
    let mut rng = seed | 1;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut churn_fail = 0;
    for k in 0..churn {
        let o = objs[(next() % objs.len() as u64) as usize];
        let pg = next() % 8;
        let r = fs
            .write(o, pg * payload, &pat(k, payload as usize))
            .and_then(|()| fs.flush(o));
        if r.is_err() {
            churn_fail += 1;
            if discard_failed {
                fs.discard(o);
            }
        }
    }
    let head = format!(
        "w{window} C{C} W{W} M{M} L{L} seed {seed} churn {churn} discard {discard_failed}: \
         {} objects (fill {fill_err:?}), {churn_fail} churn writes failed, health {:?}",
        objs.len(),
        fs.health()
    );
    let mut log = vec![head];
    let mut ok = 0;
    let mut first_err = None;
    for &o in objs.iter().rev() {
        match fs.delete(o) {
            Ok(()) => ok += 1,
            Err(WriteError::NotFound) => {}
            Err(e) => {
                if first_err.is_none() {
                    first_err = Some((ok, e));
                }
            }
        }
    }
    log.push(format!(
        "deletes ok {ok} of {}, first failure {first_err:?}",
        objs.len()
    ));
    if first_err.is_none() {
        return Ok(log.join("; "));
    }
    // Background collection, a sync, then deletes again.
    let mut steps = 0;
    for _ in 0..1000 {
        steps += 1;
        match fs.gc_step(64) {
            Ok(g) if g.more => {}
            r => {
                log.push(format!("gc_step -> {r:?} after {steps}"));
                break;
            }
        }
    }
    log.push(format!("sync {:?}", fs.sync()));
    let mut ok2 = 0;
    let mut err2 = None;
    for &o in objs.iter().rev() {
        match fs.delete(o) {
            Ok(()) => ok2 += 1,
            Err(WriteError::NotFound) => {}
            Err(e) => err2 = Some(e),
        }
    }
    log.push(format!(
        "after steps: deletes ok {ok2}, err {err2:?}, health {:?}",
        fs.health()
    ));
    let u = fs.unmount();
    log.push(format!("unmount {u:?}"));
    drop(fs);
    s.cut_power();
    s.power_on();
    let mut fs: Oftl<&mut Sim, 2048, 64, C, W, Greedy, M, L> =
        Oftl::new(&mut s, Config::new(), Greedy::DEFAULT);
    let m = fs.mount();
    log.push(format!("remount {m:?} health {:?}", fs.health()));
    let mut ok3 = 0;
    let mut err3 = None;
    let left: Vec<u32> = fs.objects().filter_map(|o| o.ok()).collect();
    for &o in left.iter().rev() {
        match fs.delete(o) {
            Ok(()) => ok3 += 1,
            Err(e) => err3 = Some(e),
        }
    }
    log.push(format!(
        "after remount: {} objects, deletes ok {ok3}, err {err3:?}",
        left.len()
    ));
    Err(log.join("\n  "))
}

fn block_summary(blocks: &[oftl::BlockInfo]) -> String {
    let mut m = std::collections::BTreeMap::<String, (u32, u32)>::new();
    for b in blocks {
        let e = m.entry(format!("{:?}", b.state())).or_default();
        e.0 += 1;
        e.1 += b.valid() as u32;
    }
    format!("{m:?}")
}

/// FINDING (high, availability; present before stop 36 too, so not caused by its
/// change, but the state its `min_good_blocks` change was meant to rule out). DESIGN 5
/// / `space` module docs ("no dead ends": "on a device that writes refuse as full,
/// deletes still work (and make room)"; "while the pool is at the shrink floor a
/// collection can always run").
///
/// Repro: a healthy TINY part (no bad block, no fault), the small-RAM layout
/// (`Oftl<_, 2048, 64, 4, 2, Greedy, 512, 0>`: 512-byte metadata units, the shape of
/// `W25n01gvSmall`), the smallest window (4 blocks). Fill with 8-page objects until
/// `NoSpace`, then rewrite random whole pages of them in place (each `write` + `flush`;
/// about 10 of 3,000 succeed, the rest fail `NoSpace`).
///
/// Expected: deletes succeed (they may use the delete reserve) and make room, or the
/// store turns read-only. Observed: health stays `Writable`, every `delete` fails with
/// `NoSpace`, `gc_step` fails with `NoSpace`, and the same after `sync`, `unmount`, a
/// power cycle and a mount: the store is wedged for good (it reads; nothing can ever be
/// removed). With 2 KiB metadata units, or a 6-block window, the same script deletes
/// everything.
#[test]
fn healthy_small_meta_store_at_capacity_wedges_with_every_delete_failing_nospace() {
    type Small<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 2, Greedy, 512, 0>;
    let mut s = sim(profile::TINY, 4);
    let mut fs: Small<'_> = Oftl::new(&mut s, cfg(4), Greedy::DEFAULT);
    fs.format().unwrap();
    let payload = 2048usize;
    let mut model: std::collections::BTreeMap<u32, Vec<u8>> = Default::default();
    for i in 0..100_000u32 {
        let Ok(o) = fs.create(ObjKind::Object) else {
            break;
        };
        let d = pat(i, 8 * payload);
        if fs.write(o, 0, &d).and_then(|()| fs.flush(o)).is_err() {
            let _ = fs.delete(o);
            break;
        }
        model.insert(o, d);
    }
    let objs: Vec<u32> = model.keys().copied().collect();
    let mut rng = 4u64 | 1;
    let mut ok = 0;
    for k in 0..3000u32 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let o = objs[(rng % objs.len() as u64) as usize];
        let pg = ((rng >> 20) % 8) as usize;
        let d = pat(10_000 + k, payload);
        if fs
            .write(o, (pg * payload) as u64, &d)
            .and_then(|()| fs.flush(o))
            .is_ok()
        {
            model.get_mut(&o).unwrap()[pg * payload..(pg + 1) * payload].copy_from_slice(&d);
            ok += 1;
        } else {
            fs.discard(o);
        }
    }
    let state = format!(
        "{} objects, {ok} rewrites ok; used {} pages, capacity {}, min_good_blocks {}, blocks {}",
        objs.len(),
        fs.used_pages(),
        fs.capacity_pages(),
        fs.min_good_blocks(),
        block_summary(fs.blocks())
    );
    // Everything acknowledged reads back.
    for (&o, d) in &model {
        let mut b = vec![0u8; d.len()];
        fs.read(o, 0, &mut b).unwrap();
        assert!(b == *d, "object {o} differs");
    }
    for _ in 0..100 {
        match fs.gc_step(64) {
            Ok(g) if g.more => {}
            _ => break,
        }
    }
    let _ = fs.sync();
    let first = fs.delete(objs[0]);
    let health = fs.health();
    let _ = fs.unmount();
    drop(fs);
    s.cut_power();
    s.power_on();
    let mut fs: Small<'_> = Oftl::new(&mut s, Config::new(), Greedy::DEFAULT);
    fs.mount().unwrap();
    let mut deleted = 0;
    let mut err = None;
    for &o in &objs {
        match fs.delete(o) {
            Ok(()) => deleted += 1,
            Err(WriteError::NotFound) => {}
            Err(e) => err = Some(e),
        }
    }
    assert!(
        first.is_ok() && deleted > 0 || matches!(fs.health(), Health::ReadOnly(_)),
        "{state}: delete {first:?} (health {health:?}); after remount {deleted} deletes \
         succeed, last error {err:?}, health {:?}",
        fs.health()
    );
}

/// FINDING (high, availability; same cause as
/// `healthy_small_meta_store_at_capacity_wedges_with_every_delete_failing_nospace`, on
/// the shipped configuration): `W25n01gvSmall` on a healthy W25N01GV (no bad block
/// grown, no fault), window 16 (`Config::new()`'s). Fill with 8-page objects until
/// `NoSpace`, then 20,000 attempts to rewrite a random page of one in place (`write` +
/// `flush`; a failure discards the object's buffer). Expected: deletes work ("no dead
/// ends") or the store turns read-only. Observed: the valid pages stay below
/// `capacity_pages`, health `Writable`, 8 free blocks, and every `delete` fails with
/// `NoSpace`, also after a power cycle and a mount.
#[test]
fn healthy_w25n01gv_small_wedges_after_failed_rewrites_at_capacity() {
    let mut s = sim(profile::W25N01GV, 9);
    let mut objs = Vec::new();
    let state;
    {
        let mut fs: oftl::W25n01gvSmall<&mut Sim> = Oftl::new(&mut s, cfg(16), Greedy::DEFAULT);
        fs.format().unwrap();
        let payload = 2048usize;
        for i in 0..1_000_000u32 {
            let Ok(o) = fs.create(ObjKind::Object) else {
                break;
            };
            if fs
                .write(o, 0, &pat(i, 8 * payload))
                .and_then(|()| fs.flush(o))
                .is_err()
            {
                let _ = fs.delete(o);
                break;
            }
            objs.push(o);
        }
        let mut rng = 9u64;
        let mut ok = 0;
        for k in 0..20_000u32 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let o = objs[(rng % objs.len() as u64) as usize];
            let pg = ((rng >> 20) % 8) as usize;
            if fs
                .write(o, (pg * payload) as u64, &pat(k, payload))
                .and_then(|()| fs.flush(o))
                .is_ok()
            {
                ok += 1;
            } else {
                fs.discard(o);
            }
        }
        state = format!(
            "{} objects, {ok} rewrites ok, used {} pages, capacity {}, min_good {}, health {:?}, blocks {}",
            objs.len(),
            fs.used_pages(),
            fs.capacity_pages(),
            fs.min_good_blocks(),
            fs.health(),
            block_summary(fs.blocks())
        );
        let _ = fs.unmount();
    }
    s.cut_power();
    s.power_on();
    let mut fs: oftl::W25n01gvSmall<&mut Sim> = Oftl::new(&mut s, Config::new(), Greedy::DEFAULT);
    fs.mount().unwrap();
    let mut del = 0;
    let mut err = None;
    for &o in objs.iter().take(20) {
        match fs.delete(o) {
            Ok(()) => del += 1,
            Err(e) => err = Some(e),
        }
    }
    assert!(
        del > 0 || matches!(fs.health(), Health::ReadOnly(_)),
        "{state}; after a remount {del} of 20 deletes succeed (last error {err:?}), health {:?}",
        fs.health()
    );
}

/// Log reads under a run of `len` transient uncorrectable reads (1..=30) starting at
/// every read (1..=12) of the call, for every record of a stream spanning several
/// pages (one- and multi-sector records; also after a remount, with no page in RAM):
/// each read answers the right record or the flash's error, never `Corrupted`, never
/// other bytes; and reads well again after the run.
#[test]
fn probe_log_read_transient_runs() {
    use nand_hal::sim::FaultConfig;
    type Fs<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 2>;
    let mut s = sim(profile::TINY, 21);
    let mut recs = Vec::new();
    let stream;
    {
        let mut fs: Fs<'_> = Oftl::new(&mut s, cfg(6), Greedy::DEFAULT);
        fs.format().unwrap();
        stream = fs.create(ObjKind::Log).unwrap();
        for i in 0..24u32 {
            let len = [64usize, 500, 700, 1200, 30][i as usize % 5];
            let d = pat(i, len);
            let lsn = fs.log_append(stream, &d).unwrap();
            recs.push((lsn, d));
        }
        fs.unmount().unwrap();
    }
    let mut fs: Fs<'_> = Oftl::new(&mut s, Config::new(), Greedy::DEFAULT);
    fs.mount().unwrap();
    let (mut ok, mut flash, mut runs) = (0u32, 0u32, 0u32);
    let mut bad = Vec::new();
    let mut buf = vec![0u8; 4096];
    for (lsn, d) in &recs {
        for len in 1..=30u32 {
            for at in 1..=12u32 {
                runs += 1;
                fs.flash_mut()
                    .arm(FaultPlan::seeded(7).with_faults(FaultConfig {
                        read_fail_at: at,
                        read_fail_len: len,
                        ..FaultConfig::default()
                    }));
                match fs.log_read(stream, *lsn, &mut buf) {
                    Ok(Some(r)) if r.lsn == *lsn && buf[..r.len] == d[..] => ok += 1,
                    Err(oftl::ReadError::Flash(_)) => flash += 1,
                    other => bad.push(format!("lsn {lsn} run {len} at {at}: {other:?}")),
                }
                fs.flash_mut().disarm();
                let r = fs.log_read(stream, *lsn, &mut buf);
                if !matches!(r, Ok(Some(ref r)) if r.lsn == *lsn && buf[..r.len] == d[..]) {
                    bad.push(format!("lsn {lsn} run {len} at {at}: after the run {r:?}"));
                }
                if matches!(fs.health(), Health::NotMounted) {
                    bad.push(format!("lsn {lsn} run {len} at {at}: poisoned"));
                    return assert!(bad.is_empty(), "{bad:#?}");
                }
            }
        }
    }
    println!("{runs} runs: {ok} read, {flash} flash errors");
    assert!(
        bad.is_empty(),
        "{} wrong of {runs}: {:#?}",
        bad.len(),
        &bad[..bad.len().min(20)]
    );
}
