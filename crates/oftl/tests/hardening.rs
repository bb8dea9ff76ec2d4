//! Regressions for the ten findings of the independent fault model (the hardening
//! issue), each named after the guarantee it protects. Every test drives the store
//! through a fault shape the simulator models (aimed transient read errors, unstable
//! pages that read well and badly in any order, torn steps that decode as erased,
//! failed programs that leave their page in several shapes) or through plain use at the
//! edges (a full device, the smallest window `format` accepts).

use crate::common;
use common::lifecycle::Lifecycle;

use common::{bytes, tiny_raw, Rng};
use nand_hal::sim::{profile, CutKind, FaultConfig, FaultPlan, HeapStorage, SimNand, TornMode};
use nand_hal::{
    BlockAddr, Capabilities, ErrorKind, ErrorType, Geometry, NandFlash, PageAddr, ReadReport,
};
use oftl::{BlockState, Config, Greedy, MountError, ObjKind, Oftl, ReadError, WriteError};

type Sim = SimNand<HeapStorage>;
type Fs<'a, F> = Oftl<F, 2048, 64, 4, 2, Greedy>;

const PAGE: usize = 2048;

fn cfg() -> Config {
    Config {
        window_blocks: 6,
        format_id: 3,
        ..Default::default()
    }
}

/// A flash whose reads of some pages fail as uncorrectable while `failing` is set: an
/// unstable page that reads badly now and well later.
struct Flaky<'a> {
    sim: &'a mut Sim,
    pages: Vec<u32>,
    failing: bool,
}

impl ErrorType for Flaky<'_> {
    type Error = <Sim as ErrorType>::Error;
}

impl NandFlash for Flaky<'_> {
    fn geometry(&self) -> Geometry {
        self.sim.geometry()
    }
    fn capabilities(&self) -> &Capabilities {
        self.sim.capabilities()
    }
    fn read(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &mut [u8],
        oob: &mut [u8],
    ) -> Result<ReadReport, Self::Error> {
        let r = self.sim.read(page, column, data, oob);
        if self.failing && self.pages.contains(&page.0) {
            // Let the simulator charge the read, then report it failed.
            let mut f = *self.sim.plan();
            f.faults.read_fail_at = 1;
            f.faults.read_fail_len = 1;
            let saved = *self.sim.plan();
            self.sim.arm(f);
            let e = self.sim.read(page, column, data, oob);
            self.sim.arm(saved);
            return e;
        }
        r
    }
    fn program(
        &mut self,
        page: PageAddr,
        column: u32,
        data: &[u8],
        oob: &[u8],
    ) -> Result<(), Self::Error> {
        self.sim.program(page, column, data, oob)
    }
    fn erase(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        self.sim.erase(block)
    }
    fn is_bad(&mut self, block: BlockAddr) -> Result<bool, Self::Error> {
        self.sim.is_bad(block)
    }
    fn mark_bad(&mut self, block: BlockAddr) -> Result<(), Self::Error> {
        self.sim.mark_bad(block)
    }
}

/// Where two byte strings first differ (for assertion messages without megabytes).
fn same(a: &[u8], b: &[u8]) -> Result<(), String> {
    if a == b {
        return Ok(());
    }
    let at = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    Err(format!(
        "{} vs {} bytes, first difference at {at}",
        a.len(),
        b.len()
    ))
}

fn read_all<F: NandFlash>(fs: &mut Fs<'_, F>, id: u32) -> Result<Vec<u8>, ReadError<F::Error>> {
    let n = fs.size(id)? as usize;
    let mut b = vec![0u8; n];
    let got = fs.read(id, 0, &mut b)?;
    assert_eq!(got, n);
    Ok(b)
}

// ---- 1. A failed truncate(0) or delete keeps the object's buffered writes -------------

/// Finding 1: `truncate(obj, 0)` and `delete(obj)` dropped the object's write buffers
/// before the operation that could still fail (`NoSpace` near full); later reads
/// returned older data. An operation that returns an error has changed nothing.
#[test]
fn failed_delete_or_truncate_keeps_buffered_writes() {
    let mut failures = 0;
    for (seed, truncate) in [(1, false), (2, true), (3, false), (1, true)] {
        let p = profile::W25N01GV.with_blocks_per_die(96);
        let mut sim = Sim::heap(p, FaultPlan::seeded(seed));
        let mut fs = Oftl::<&mut Sim, 2048, 96, 12, 2, Greedy>::formatted(
            &mut sim,
            Config {
                window_blocks: 5,
                format_id: 1,
                ..Default::default()
            },
        )
        .unwrap();
        let ids = churn(&mut fs, seed, 95, 8000, |_, _| Flow::Stop);
        // An object a small write can be buffered for (taking a buffer may need
        // another object's buffered write programmed, which may be refused now).
        let (id, len) = *ids
            .iter()
            .find(|(id, _)| fs.write(*id, 1, b"buffered").is_ok())
            .expect("no object takes a buffered write");
        let mut want = vec![0u8; len as usize];
        fs.read(id, 0, &mut want).unwrap();
        assert_eq!(&want[1..9], b"buffered");
        let r = if truncate {
            fs.truncate(id, 0)
        } else {
            fs.delete(id)
        };
        match r {
            Ok(()) if truncate => assert_eq!(fs.size(id).unwrap(), 0),
            Ok(()) => assert!(!fs.exists(id).unwrap()),
            Err(e) => {
                failures += 1;
                assert_ne!(e, WriteError::Poisoned);
                let mut got = vec![0u8; len as usize];
                fs.read(id, 0, &mut got).unwrap();
                if let Err(d) = same(&got, &want) {
                    panic!("{e:?} dropped the buffered write (truncate: {truncate}): {d}");
                }
            }
        }
    }
    let _ = failures;
}

/// What a churn hook wants next.
enum Flow {
    Go,
    Stop,
}

/// The near-full churn that wedged the smallest window: creates of up to 20 pages,
/// overwrites of up to 3 pages, each flushed, idle collections and syncs, with creates
/// only while fewer than `target` % of the capacity is used. Calls `on_full` after five
/// `NoSpace` in a row (stops when it says so) and returns the live objects.
fn churn<const B: usize, const C: usize>(
    fs: &mut Oftl<&mut Sim, 2048, B, C, 2, Greedy>,
    seed: u64,
    target: u64,
    steps: u32,
    mut on_full: impl FnMut(&mut Oftl<&mut Sim, 2048, B, C, 2, Greedy>, &mut Vec<(u32, u64)>) -> Flow,
) -> Vec<(u32, u64)> {
    let cap = fs.capacity_pages();
    let mut rng = Rng(seed * 7 + 1);
    let mut ids: Vec<(u32, u64)> = vec![];
    let mut nospace_in_a_row = 0;
    for step in 0..steps {
        let used = fs.used_pages();
        let r = rng.below(100);
        let res: Result<(), WriteError<_>> =
            if ids.is_empty() || (r < 10 && used * 100 < cap * target) {
                match fs.create(ObjKind::Object) {
                    Ok(id) => {
                        let len = 1 + rng.below(20 * 2048);
                        ids.push((id, len));
                        fs.write(id, 0, &vec![3u8; len as usize])
                            .and_then(|_| fs.flush(id))
                    }
                    Err(e) => Err(e),
                }
            } else if r < 15 && used * 100 > cap * (target - 10) {
                let i = rng.below(ids.len() as u64) as usize;
                let (id, _) = ids.swap_remove(i);
                fs.delete(id)
            } else if r < 90 {
                let i = rng.below(ids.len() as u64) as usize;
                let (id, len) = ids[i];
                let off = rng.below(len);
                let n = (1 + rng.below(3 * 2048)).min(len - off).max(1);
                fs.write(id, off, &vec![step as u8; n as usize])
                    .and_then(|_| fs.flush(id))
            } else if r < 95 {
                fs.gc_step(1 + rng.below(8) as u32).map(|_| ())
            } else {
                fs.sync()
            };
        match res {
            Ok(()) => nospace_in_a_row = 0,
            Err(WriteError::NoSpace) => {
                assert_ne!(
                    fs.sync(),
                    Err(WriteError::Poisoned),
                    "seed {seed} step {step}: NoSpace poisoned the handle"
                );
                nospace_in_a_row += 1;
                if nospace_in_a_row >= 5 {
                    nospace_in_a_row = 0;
                    if let Flow::Stop = on_full(fs, &mut ids) {
                        return ids;
                    }
                }
            }
            Err(e) => panic!("seed {seed} step {step}: {e:?}"),
        }
    }
    ids
}

// ---- 2. A metadata program that fails on a raw part never blocks mount -----------------

/// Finding 2: on a part without ECC (in-band backpointers) a failed metadata program
/// may leave a page whose backpointer is intact and whose record is not. The retry
/// elsewhere carries the same sequence number; recovery took the failed copy first and
/// aborted every mount with `Corrupted`. The retry must supersede it.
#[test]
fn failed_metadata_program_on_a_raw_part_still_mounts() {
    let mut damaged_copies = 0;
    for seed in 0..48 {
        let mut sim = Sim::heap(tiny_raw(), FaultPlan::seeded(seed));
        let mut fs = Fs::<&mut Sim>::formatted(&mut sim, cfg()).unwrap();
        let a = fs.create(ObjKind::Object).unwrap();
        fs.write(a, 0, &bytes(1, 3000)).unwrap();
        fs.flush(a).unwrap();
        // The data head's block: the window block programmed part way.
        let ppb = fs.flash().geometry().pages_per_block();
        let head = (0..64u32)
            .find(|&b| {
                fs.blocks()[b as usize].state() == BlockState::Window && {
                    let n = fs.flash().block_state(BlockAddr(b)).next_page as u32;
                    n > 0 && n < ppb
                }
            })
            .expect("data head block");
        let next = fs.flash().block_state(BlockAddr(head)).next_page as u32;
        fs.flash_mut().fail_next_program(BlockAddr(head));
        let mut attrs = [0u8; oftl::ATTR_LEN];
        attrs[0] = 0x5A;
        fs.set_attrs(a, &attrs).unwrap();
        // Was the failed copy left with a good backpointer and a bad record?
        let failed = fs.flash().geometry().page(BlockAddr(head), next);
        let mut unit = vec![0u8; 512];
        fs.flash().peek(failed, &mut unit, &mut []);
        let crc = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC);
        let bp_ok = unit[496..512].iter().any(|&b| b != 0xFF);
        let rec_ok =
            crc.checksum(&unit[..80]) == u32::from_le_bytes(unit[80..84].try_into().unwrap());
        if bp_ok && !rec_ok {
            damaged_copies += 1;
        }
        drop(fs);
        let mut fs = match Fs::<&mut Sim>::mounted(&mut sim) {
            Ok(fs) => fs,
            Err(e) => panic!("seed {seed}: mount after a failed metadata program: {e:?}"),
        };
        assert_eq!(fs.attrs(a).unwrap().user[0], 0x5A, "seed {seed}");
        assert_eq!(read_all(&mut fs, a).unwrap(), bytes(1, 3000));
    }
    assert!(damaged_copies > 0, "no seed left a damaged copy behind");
}

// ---- 3. A checkpoint sequence number that may be on flash is never reused --------------

/// Finding 3: a `sync`'s checkpoint commit page is cut (all but one bit landed, so ECC
/// corrects it) and left unstable; the next mount reads it badly, recovers from the
/// previous checkpoint and wrote its own checkpoint under the same number. At a later
/// mount the page read well, the tie went to the stale checkpoint, and an acknowledged
/// write rolled back.
#[test]
fn unstable_checkpoint_never_shares_its_sequence_number() {
    let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(21));
    let mut fs = Fs::<&mut Sim>::formatted(&mut sim, cfg()).unwrap();
    let a = fs.create(ObjKind::Object).unwrap();
    fs.write(a, 0, &bytes(1, 5000)).unwrap();
    fs.sync().unwrap();
    fs.write(a, 0, &bytes(2, 5000)).unwrap();
    fs.flush(a).unwrap();
    // The next sync's last program is its checkpoint's commit page: cut it there.
    let ops = {
        let mut dry: Sim = (**fs.flash()).clone();
        let before = dry.ops_since_arm();
        let mut fs2 = Fs::<&mut Sim>::mounted(&mut dry).unwrap();
        fs2.write(a, 0, &bytes(2, 5000)).unwrap();
        fs2.flush(a).unwrap();
        let mid = fs2.flash().ops_since_arm();
        fs2.sync().unwrap();
        let _ = before;
        fs2.flash().ops_since_arm() - mid
    };
    drop(fs);
    let mut fs = Fs::<&mut Sim>::mounted(&mut sim).unwrap();
    fs.write(a, 0, &bytes(2, 5000)).unwrap();
    fs.flush(a).unwrap();
    fs.flash_mut()
        .arm(FaultPlan::seeded(21).with_cut(ops, CutKind::Torn(TornMode::MostBits)));
    assert!(fs.sync().is_err());
    drop(fs);
    sim.power_on();
    sim.disarm();
    let torn: Vec<u32> = (0..sim.geometry().pages())
        .filter(|&p| sim.page_state(PageAddr(p)).flags & nand_hal::sim::PageState::TORN != 0)
        .collect();
    assert_eq!(torn.len(), 1, "one torn page");
    // Mount 1 reads the torn commit page badly.
    let mut flaky = Flaky {
        sim: &mut sim,
        pages: torn.clone(),
        failing: true,
    };
    {
        let mut fs = Fs::<&mut Flaky>::mounted(&mut flaky).unwrap();
        assert_eq!(read_all(&mut fs, a).unwrap(), bytes(2, 5000));
        // Acknowledged, not checkpointed.
        fs.write(a, 0, &bytes(3, 5000)).unwrap();
        fs.flush(a).unwrap();
    }
    // The mechanism: mount 1's checkpoint did not take the unreadable one's number.
    assert_unique_checkpoint_numbers(flaky.sim);
    // Mount 2 reads it well.
    flaky.failing = false;
    let mut fs = Fs::<&mut Flaky>::mounted(&mut flaky).unwrap();
    if let Err(e) = same(&read_all(&mut fs, a).unwrap(), &bytes(3, 5000)) {
        panic!("an acknowledged write rolled back: {e}");
    }
}

/// Panics if two committed checkpoints on flash carry the same sequence number.
fn assert_unique_checkpoint_numbers(sim: &Sim) {
    let caps = *sim.capabilities();
    let ppb = sim.geometry().pages_per_block();
    let mut seqs = Vec::new();
    for b in 0..8u32 {
        for i in 0..ppb {
            let mut d = vec![0u8; 2048];
            let mut oob = vec![0u8; 64];
            sim.peek(sim.geometry().page(BlockAddr(b), i), &mut d, &mut oob);
            let mut g = [0u8; 16];
            caps.oob.gather_protected(&oob, &mut g);
            if let Ok(Some(bp)) = oftl::format::backpointer::Backpointer::parse(&g) {
                if bp.kind == oftl::format::backpointer::PageKind::Checkpoint && bp.commit {
                    seqs.push(bp.seq);
                }
            }
        }
    }
    let n = seqs.len();
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(
        seqs.len(),
        n,
        "two committed checkpoints share a sequence number"
    );
}

// ---- 4. The smallest window keeps making progress --------------------------------------

/// Finding 4 (and "no dead ends"): at the smallest window `format` accepts, near-full
/// churn left a store in which every write, flush, sync, `gc_step` and delete failed
/// with `NoSpace`, also after a remount, with a third of the full blocks' pages invalid.
/// After any `NoSpace`, deletes must succeed and, once objects are deleted, writes must
/// work again.
#[test]
fn smallest_window_never_wedges() {
    for seed in 1..4 {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
        let mut fs = Fs::<&mut Sim>::formatted(&mut sim, cfg()).unwrap();
        churn(&mut fs, seed, 95, 8000, make_room_by_deleting);
        let p = profile::W25N01GV.with_blocks_per_die(96);
        let mut sim = Sim::heap(p, FaultPlan::seeded(seed));
        let mut fs = Oftl::<&mut Sim, 2048, 96, 12, 2, Greedy>::formatted(
            &mut sim,
            Config {
                window_blocks: 5,
                format_id: 1,
                ..Default::default()
            },
        )
        .unwrap();
        churn(&mut fs, seed, 95, 8000, make_room_by_deleting);
    }
}

/// On a full store: delete until 30 % of the used pages are gone (every delete must
/// work), collect, and write again (must work).
fn make_room_by_deleting<const B: usize, const C: usize>(
    fs: &mut Oftl<&mut Sim, 2048, B, C, 2, Greedy>,
    ids: &mut Vec<(u32, u64)>,
) -> Flow {
    let used = fs.used_pages();
    let cap = fs.capacity_pages();
    let mut deleted = 0;
    while fs.used_pages() * 10 > used * 7 && !ids.is_empty() {
        let (id, _) = ids.swap_remove(ids.len() / 2);
        if let Err(e) = fs.delete(id) {
            panic!(
                "delete {deleted} after NoSpace: {e:?} (used {} of {cap})",
                fs.used_pages()
            );
        }
        deleted += 1;
    }
    for _ in 0..64 {
        match fs.gc_step(16) {
            Ok(g) if !g.more => break,
            Ok(_) => {}
            Err(e) => panic!("gc_step after deletes: {e:?}"),
        }
    }
    let id = fs.create(ObjKind::Object).unwrap();
    fs.write(id, 0, &[9u8; 4 * 2048])
        .and_then(|_| fs.flush(id))
        .unwrap_or_else(|e| panic!("write after deletes: {e:?}"));
    ids.push((id, 4 * 2048));
    Flow::Go
}

// ---- 5. A torn page that decodes as erased is never programmed again -------------------

/// Finding 5: only a few bits of the dirty marker landed; on-die ECC "corrected" them
/// and the page read erased with corrected bits; the next mount programmed it again
/// (forbidden: its ECC steps had been written).
#[test]
fn torn_page_that_reads_erased_is_never_programmed_again() {
    let mut near_erased = 0;
    for seed in 0..24 {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
        let mut fs = Fs::<&mut Sim>::formatted(&mut sim, cfg()).unwrap();
        let a = fs.create(ObjKind::Object).unwrap();
        fs.write(a, 0, &bytes(1, 3000)).unwrap();
        fs.unmount().unwrap();
        // The first change after a clean mount writes the dirty marker first: cut it.
        let mut fs = Fs::<&mut Sim>::mounted(&mut sim).unwrap();
        fs.flash_mut()
            .arm(FaultPlan::seeded(seed).with_cut(1, CutKind::Torn(TornMode::SomeBits)));
        assert!(fs.write(a, 0, &bytes(2, 2048)).is_err());
        drop(fs);
        sim.power_on();
        sim.disarm();
        let torn = (0..sim.geometry().pages())
            .find(|&p| sim.page_state(PageAddr(p)).flags & nand_hal::sim::PageState::TORN != 0)
            .unwrap();
        let mut d = vec![0u8; 2048];
        if let Ok(r) = sim.read(PageAddr(torn), 0, &mut d, &mut []) {
            if r.corrected_bits > 0 && d.iter().all(|&b| b == 0xFF) {
                near_erased += 1;
            }
        }
        for _ in 0..3 {
            let mut fs = Fs::<&mut Sim>::mounted(&mut sim).unwrap();
            assert_eq!(read_all(&mut fs, a).unwrap(), bytes(1, 3000), "seed {seed}");
            fs.write(a, 0, &bytes(3, 2048)).unwrap();
            fs.flush(a).unwrap();
            fs.unmount().unwrap();
            let mut fs = Fs::<&mut Sim>::mounted(&mut sim).unwrap();
            fs.write(a, 0, &bytes(1, 3000)).unwrap();
            fs.flush(a).unwrap();
            fs.unmount().unwrap();
        }
        assert_eq!(
            sim.last_misuse(),
            None,
            "seed {seed}: a torn page was programmed again"
        );
    }
    assert!(near_erased > 0, "no torn marker decoded as erased");
}

// ---- 6 and 7. One transient read error never truncates history or splits a tx ----------

/// The writes of [`recovery_sweep`]: objects created, written, a transaction over two,
/// a delete, all acknowledged by `flush` (so they live in the window, not in a
/// checkpoint), then a crash.
fn acknowledged_history(sim: &mut Sim) -> Vec<(u32, Option<Vec<u8>>)> {
    let mut fs = Fs::<&mut Sim>::formatted(sim, cfg()).unwrap();
    let a = fs.create(ObjKind::Object).unwrap();
    let b = fs.create(ObjKind::Object).unwrap();
    let c = fs.create(ObjKind::Object).unwrap();
    fs.write(a, 0, &bytes(1, 6000)).unwrap();
    fs.write(b, 0, &bytes(2, 5000)).unwrap();
    fs.sync().unwrap();
    fs.write(c, 0, &bytes(3, 4096)).unwrap();
    fs.flush(c).unwrap();
    let ta = bytes(4, 3 * PAGE);
    let tb = bytes(5, 2 * PAGE);
    fs.transact(&[
        oftl::TxOp::Write {
            obj: a,
            offset: 0,
            data: &ta,
        },
        oftl::TxOp::Write {
            obj: b,
            offset: 1000,
            data: &tb,
        },
    ])
    .unwrap();
    fs.delete(c).unwrap();
    let d = fs.create(ObjKind::Object).unwrap();
    fs.write(d, 0, &bytes(6, 2500)).unwrap();
    fs.flush(d).unwrap();
    let mut wa = bytes(1, 6000);
    wa.resize(ta.len().max(6000), 0);
    wa[..ta.len()].copy_from_slice(&ta);
    let mut wb = bytes(2, 5000);
    wb.resize(1000 + tb.len(), 0);
    wb[1000..].copy_from_slice(&tb);
    vec![
        (a, Some(wa)),
        (b, Some(wb)),
        (c, None),
        (d, Some(bytes(6, 2500))),
    ]
}

/// Mounts the crashed image once with read number `k` (and `len - 1` after it) failing,
/// for every `k` the mount makes: a mount that succeeds holds the whole acknowledged
/// history; one that fails says which page (and the next mount, without the fault,
/// holds it all).
fn recovery_sweep(len: u32) {
    let mut base = Sim::heap(profile::TINY, FaultPlan::seeded(31));
    let want = acknowledged_history(&mut base);
    let reads = {
        let mut s = base.clone();
        s.arm(FaultPlan::seeded(31));
        Fs::<&mut Sim>::mounted(&mut s).unwrap();
        s.reads_since_arm()
    };
    assert!(reads > 20, "recovery made {reads} reads");
    for k in 1..=reads as u32 {
        let mut s = base.clone();
        s.arm(FaultPlan::seeded(31).with_faults(FaultConfig {
            read_fail_at: k,
            read_fail_len: len,
            ..FaultConfig::default()
        }));
        match Fs::<&mut Sim>::mounted(&mut s) {
            Ok(mut fs) => {
                fs.flash_mut().disarm();
                for (id, d) in &want {
                    match d {
                        Some(d) => {
                            let got = read_all(&mut fs, *id).unwrap_or_default();
                            if let Err(e) = same(&got, d) {
                                panic!(
                                    "read {k} failing ({len}x): object {id} not as \
                                     acknowledged: {e}"
                                );
                            }
                        }
                        None => assert!(
                            !fs.exists(*id).unwrap(),
                            "read {k} failing ({len}x): deleted object {id} is back"
                        ),
                    }
                }
            }
            Err(e) => {
                assert!(
                    !matches!(e, MountError::Corrupted),
                    "read {k} failing ({len}x): mount failed with a plain {e:?}"
                );
                s.disarm();
                let mut fs = Fs::<&mut Sim>::mounted(&mut s).unwrap();
                for (id, d) in &want {
                    if let Some(d) = d {
                        same(&read_all(&mut fs, *id).unwrap(), d).unwrap();
                    }
                }
            }
        }
        assert_eq!(s.last_misuse(), None);
    }
}

/// Finding 6: one transient `Uncorrectable` read during recovery's scan made that page
/// "garbage"; the next sequence number was then a jump and the replay stopped there
/// without an error: deleted objects back, creates lost, writes rolled back.
#[test]
fn one_transient_read_error_never_truncates_history() {
    recovery_sweep(1);
}

/// Finding 7: a page that pass 1 read well failed in pass 2; replay stopped inside a
/// committed transaction and objects ended in states that never existed. Two failing
/// reads in a row reach past the first retry.
#[test]
fn recovery_passes_never_disagree() {
    recovery_sweep(2);
}

/// Findings 6 and 7 past the retries: a page of the window that stays unreadable while
/// later pages prove it was not the tail is media loss. Mount must say so, naming the
/// page (never replay up to it and pass the older state off as current), and the
/// salvage mount must mount read-only past it, every other object intact.
#[test]
fn unreadable_page_in_the_window_is_reported_and_salvaged() {
    let mut base = Sim::heap(profile::TINY, FaultPlan::seeded(33));
    let want = acknowledged_history(&mut base);
    // Every page of the data head written since the last checkpoint (a data or
    // metadata page with a sequence number), in program order.
    let caps = *base.capabilities();
    let mut pages: Vec<(u32, u32, u32)> = Vec::new();
    for p in 0..base.geometry().pages() {
        let mut d = vec![0u8; 2048];
        let mut oob = vec![0u8; 64];
        base.peek(PageAddr(p), &mut d, &mut oob);
        let mut g = [0u8; 16];
        caps.oob.gather_protected(&oob, &mut g);
        let bp = match oftl::format::backpointer::Backpointer::parse(&g) {
            Ok(Some(bp)) => Some(bp),
            _ => oftl::format::backpointer::Backpointer::parse(&d[496..512])
                .ok()
                .flatten(),
        };
        if let Some(bp) = bp {
            use oftl::format::backpointer::PageKind;
            if matches!(bp.kind, PageKind::Data | PageKind::Meta) && !bp.relocated {
                pages.push((bp.seq, p, bp.owner));
            }
        }
    }
    pages.sort_unstable();
    // The last checkpoint was the sync; take a page of the transaction after it, with
    // later pages behind it.
    let victim = pages[pages.len() - 4].1;
    let mut s = base.clone();
    for st in 0..4 {
        s.inject_flips(PageAddr(victim), st, 40);
    }
    match Fs::<&mut Sim>::mounted(&mut s) {
        Err(MountError::MediaLoss { page }) => assert_eq!(page, victim),
        Err(e) => panic!("mount with page {victim} unreadable: {e:?}"),
        Ok(mut fs) => {
            // Only if nothing acknowledged depended on it.
            for (id, d) in &want {
                if let Some(d) = d {
                    let got = read_all(&mut fs, *id).unwrap_or_default();
                    if let Err(e) = same(&got, d) {
                        panic!("page {victim} unreadable: object {id} silently older: {e}");
                    }
                }
            }
        }
    }
    let mut fs = Fs::<&mut Sim>::new(&mut s, oftl::Config::new(), Default::default());
    fs.mount_damaged(oftl::Damaged::Salvage).unwrap();
    assert_eq!(fs.create(ObjKind::Object), Err(WriteError::ReadOnly));
    let mut intact = 0;
    for (id, d) in &want {
        if let (Some(d), Ok(got)) = (d, read_all(&mut fs, *id)) {
            intact += (&got == d) as u32;
        }
    }
    assert!(intact >= 1, "salvage mount kept nothing");
    assert_eq!(s.last_misuse(), None);
}

// ---- 8. The checkpoint search is robust to read errors --------------------------------

/// Finding 8: a read error on an erased checkpoint page during the binary search made
/// mount take a later page for the end of the block; checkpoints were appended after a
/// hole, and the next mount searched into the hole, lost them and programmed into the
/// hole out of order.
#[test]
fn checkpoint_search_survives_read_errors() {
    let mut base = Sim::heap(profile::TINY, FaultPlan::seeded(41));
    let a;
    {
        let mut fs = Fs::<&mut Sim>::formatted(&mut base, cfg()).unwrap();
        a = fs.create(ObjKind::Object).unwrap();
        for i in 0..3 {
            fs.write(a, 0, &bytes(i, 3000)).unwrap();
            fs.sync().unwrap();
        }
        fs.unmount().unwrap();
    }
    let reads = {
        let mut s = base.clone();
        s.arm(FaultPlan::seeded(41));
        Fs::<&mut Sim>::mounted(&mut s).unwrap();
        s.reads_since_arm()
    };
    for k in 1..=reads as u32 {
        let mut s = base.clone();
        s.arm(FaultPlan::seeded(41).with_faults(FaultConfig {
            read_fail_at: k,
            read_fail_len: 1,
            ..FaultConfig::default()
        }));
        let mut expect = bytes(2, 3000);
        if let Ok(mut fs) = Fs::<&mut Sim>::mounted(&mut s) {
            fs.flash_mut().disarm();
            for i in 10..14 {
                fs.write(a, 0, &bytes(i, 3000)).unwrap();
                fs.sync().unwrap();
                expect = bytes(i, 3000);
            }
            fs.unmount().unwrap();
        }
        s.disarm();
        for _ in 0..2 {
            let mut fs = Fs::<&mut Sim>::mounted(&mut s).unwrap();
            if let Err(e) = same(&read_all(&mut fs, a).unwrap(), &expect) {
                panic!("read {k} failing: {e}");
            }
            fs.write(a, 0, &expect).unwrap();
            fs.sync().unwrap();
            fs.unmount().unwrap();
        }
        assert_eq!(s.last_misuse(), None, "read {k} failing");
    }
}

// ---- 9. NoSpace never poisons ----------------------------------------------------------

/// Finding 9: `gc_step` (and writes, truncates, deletes) could return `NoSpace` and also
/// poison the handle. `NoSpace` changes nothing; a condition that must poison has its own
/// error. (The churn asserts after every `NoSpace` that the handle still works.)
#[test]
fn no_space_never_poisons() {
    for (seed, target) in [(2, 85), (3, 75), (2, 95)] {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(seed));
        let mut fs = Fs::<&mut Sim>::formatted(&mut sim, cfg()).unwrap();
        churn(&mut fs, seed, target, 16000, |_, _| Flow::Go);
    }
}

// ---- 10. An unreadable newest checkpoint or marker is never taken for "clean" ---------

/// Finding 10: on a damaged image whose newest checkpoint (or dirty marker) is
/// unreadable, mount fell back to an older checkpoint, took it for clean, and
/// programmed over pages already written. Mount must fail with its own error or recover
/// everything, and never break a device rule.
#[test]
fn unreadable_newest_checkpoint_or_marker_is_never_taken_for_clean() {
    for damage_marker in [true, false] {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(51));
        let a;
        {
            let mut fs = Fs::<&mut Sim>::formatted(&mut sim, cfg()).unwrap();
            a = fs.create(ObjKind::Object).unwrap();
            fs.write(a, 0, &bytes(1, 3000)).unwrap();
            fs.unmount().unwrap();
        }
        let written_before: Vec<u32> = programmed_pages(&sim);
        {
            let mut fs = Fs::<&mut Sim>::mounted(&mut sim).unwrap();
            fs.write(a, 0, &bytes(2, 9000)).unwrap();
            fs.flush(a).unwrap();
            if !damage_marker {
                fs.sync().unwrap();
                fs.write(a, 0, &bytes(3, 9000)).unwrap();
                fs.flush(a).unwrap();
            }
        }
        // Damage the marker (the first page written after the clean checkpoint in a
        // checkpoint block), or the newest checkpoint's pages.
        let new: Vec<u32> = programmed_pages(&sim)
            .into_iter()
            .filter(|p| !written_before.contains(p))
            .collect();
        let ppb = sim.geometry().pages_per_block();
        let ckpt_blocks: Vec<u32> = (0..6).collect();
        let in_ckpt: Vec<u32> = new
            .iter()
            .copied()
            .filter(|p| ckpt_blocks.contains(&(p / ppb)))
            .collect();
        let victims: Vec<u32> = if damage_marker {
            in_ckpt.iter().copied().take(1).collect()
        } else {
            in_ckpt.iter().copied().skip(1).collect()
        };
        assert!(!victims.is_empty());
        for &p in &victims {
            for s in 0..4 {
                sim.inject_flips(PageAddr(p), s, 40);
            }
        }
        let want = if damage_marker {
            bytes(2, 9000)
        } else {
            bytes(3, 9000)
        };
        match Fs::<&mut Sim>::mounted(&mut sim) {
            Ok(mut fs) => {
                if let Err(e) = same(&read_all(&mut fs, a).unwrap(), &want) {
                    panic!(
                        "damaged {}: mount rolled back: {e}",
                        if damage_marker {
                            "marker"
                        } else {
                            "checkpoint"
                        }
                    );
                }
                fs.write(a, 0, &bytes(4, 9000)).unwrap();
                fs.sync().unwrap();
            }
            Err(e) => assert!(
                !matches!(e, MountError::NoSpace),
                "damaged image: unexpected {e:?}"
            ),
        }
        assert_eq!(sim.last_misuse(), None, "programmed over written pages");
    }
}

fn programmed_pages(sim: &Sim) -> Vec<u32> {
    (0..sim.geometry().pages())
        .filter(|&p| sim.page_state(PageAddr(p)).programs > 0)
        .collect()
}

#[allow(dead_code)]
fn kind_of<E: nand_hal::Error>(e: &E) -> ErrorKind {
    e.kind()
}
