//! Review s52: an independent attempt to break the stack where review s51 stopped
//! (its stated limits): parts with factory and grown bad blocks (programs and erases
//! failing) on volumes filled to capacity, under power cuts of every kind (the five
//! of `CutKind::ALL`: s51 used three), also in the recovery mount; wear-out of a nearly
//! full volume with staged records pending; more seeds of 255 open handles on TINY.
//!
//! Harness: review s51's (model, scripts, fill, sweep), extended, in
//! `support::full_volume` (shared with review s51 since stop 53; this review's shapes
//! run under its rules `S52`, a part that may fail); the check after each run
//! (`check_after`), the aged parts, the staged script and the lives are this file's. A
//! part is made with factory bad blocks and per-block endurance (`Part`); after the
//! format two blocks are set to fail their next erase (bad for good) and two their next
//! program, so they go bad while the volume fills (to `NoSpace`, then a little freed).
//! The sweeps arm program and erase failure rates (`FAILING`: 0.3 % and 2 %) through
//! the script, each cut run and the recovery mounts, on the sweep's seed, so a cut run
//! replays the uncut run's failures up to its cut. A call that fails with `Poisoned`, a
//! flash error or `ReadOnly` (the volume turned read-only) ends the script; the check
//! then remounts as after a cut. The check: mount; the tree is the acknowledged state
//! or the one the call in flight may leave (every fsynced/closed byte, namespace ops
//! all or nothing, unacknowledged bytes old or new); read-only only when the store's
//! census calls for it (good blocks under `min_good_blocks`, no capacity, or checkpoint
//! blocks gone), and then every change refused; else the largest files are removed
//! until a small inline and a 2 KiB file are taken and read back after a remount. A
//! refused (`NoSpace`) call is checked at once to have changed nothing (namespace,
//! sizes, the handle's bytes). Wear-out: the part's blocks aged to within 30 cycles of
//! their endurance after the fill (`age`; past it erases fail one time in five,
//! programs one in twenty), then the staged script (64-byte appends with fsync on two
//! files, larger writes on a third, truncates, steps, syncs; a fill file removed after
//! each refusal) swept, and "lives": sessions each cut at a random program/erase and
//! kind (torn pages unstable every other session), checked after each, until the volume
//! mounts read-only, which then must show the same tree again and refuse changes.
//!
//! Findings (each a test that failed on the code reviewed; all fixed in stop 53, see
//! docs/HISTORY.md, and the checks below now fail on them instead of counting them):
//! - `s52_finding_grown_bad_blocks_leave_every_remove_refused` (high, availability): a
//!   full volume whose part grows bad blocks (6 of TINY's 64, here injected erase
//!   failures) stays writable (good blocks 52 >= `min_good_blocks` 48) with more in
//!   use than its capacity (427 of 336 pages), and every remove (120 of 120) is refused
//!   `NoSpace`, after steps and remounts too: nothing can be deleted or written, and the
//!   store does not turn read-only. In the sweeps it shows as removes refused (the
//!   check's and the scripts') whenever grown bad blocks left the volume over or near
//!   its capacity, at times for every file (the "dead ends" counted below). A file
//!   remove is one oftl transaction (its directory bucket rewritten and the object
//!   deleted, `Fs::remove_entry`), which `oftl::txn::transact_inner` classes
//!   `Room::Grow` (the write is not a shrink), so it never gets the delete reserve
//!   that `Room::Shrink` (and `min_good_blocks`' floor) leaves for deletes: on the
//!   stuck volume, `Oftl::delete` (`Room::Shrink`) of the same objects straight
//!   through `Fs::store_mut` went through (123 of 125, the first 2 refused).
//! - `s52_finding_truncate_open_of_an_empty_file_lands_before_its_close` (medium): the
//!   crate promises a truncate-open and its writes land together at fsync/close; for a
//!   file whose old contents are empty, the writes become durable without the close
//!   (2,100 of 3,000 bytes after a cut between operations; old contents of 300 or 3,000
//!   bytes are kept as promised). Sweeps hit it as a `Torn(MostBits)` cut of a put's
//!   write (the torn page reads back): review s51's model rejects it; until stop 53
//!   it was allowed and counted here.
//!
//! - `s52_finding_over_committed_volume_mounts_read_only_again_and_again` (high,
//!   availability; the first finding's state at mount): a volume over its capacity
//!   after grown bad blocks, with staged records in its log, mounts read-only at
//!   every mount (5 of 5, steps and unmounts between) while its store is writable
//!   (43 good blocks >= `min_good_blocks` 40): the mount's replay of the staged
//!   records finds no room and falls back read-only (`Stage::replay`: "until a mount
//!   finds room"), no mount finds it, and a read-only volume refuses the removes that
//!   would make it. Reached by a cut and a cut in the recovery mount (seed 104). The
//!   check allows one such read-only mount if the next is writable (counted); two in
//!   a row are a failure (until stop 53 counted as this finding).
//!
//! Stop 53: a remove is `Oftl::transact_removing` (the delete reserve), a transaction
//! that grows nothing and deletes objects of at least as many pages as it programs
//! gets the reserve too, a remove stalled below the floor takes fresh windows while
//! they gain, and a truncate-open of an existing empty file is held back; the check
//! now fails on any remove refused `NoSpace` but on a worn part over its capacity
//! (counted). One more case, `s53_removes_just_above_min_good_blocks` (a volume three
//! good blocks above `min_good_blocks` and 110 pages over its capacity), failed the
//! check until the last of those changes. The survey on the final code, no failure:
//! full scripts seeds 100-102, 12,925 cut runs; gauntlet 41-43, 6,040; noisy 106,
//! 2,905; recovery cuts 104, 1,706; handles 15-16, 873, and 18, 394; healthy handles
//! 15-17, 2,161; Micron 31, 485; worn 8-9, 4,605 (2,126 removes refused on worn parts
//! over capacity, counted); ten lives, 254. (Two `Torn(MostBits)` cuts of a put's
//! write to a file the put created, seeds 100 and 102, failed it while the model held
//! such writes back; the crate's guarantees do not, and the model now follows them.)
//!
//! Held otherwise, on the code reviewed (no failure; counts are cut runs,
//! recovery-mount cuts included, every cut kind; with the findings allowed and
//! counted). The normal tests: 4,081
//! (gauntlet 1,376; random scripts with recovery cuts and noisy pages 1,305; worn
//! sweep and three lives 851; 255 handles 549). The survey (`s52_survey`), part with
//! bad blocks and `FAILING` rates unless said: full scripts at every program/erase,
//! seeds 100-102: 9,345; the gauntlet at every program/erase, seeds 41-43: 8,565;
//! noisy pages at every 3rd, seed 106: 3,409; the Micron x40 shape at every 7th, seed
//! 31: 485; worn sweeps at every 7th, seeds 8-9: 2,965; ten lives (seeds 10-19), 222
//! sessions each cut, all ending read-only as the census called for; 255 handles at
//! every 13th, seeds 15-16: 3,282; 255 handles on the healthy part (no failure
//! rates), every 13th, seeds 15-17: 9,020 (seeds 12-13 in the normal test). Finding hits in the surveys: removes
//! refused on over-committed volumes in about a third of the checks after the part
//! grew bad blocks (every remove refused in 1,430 checks of the noisy survey alone);
//! read-only at two mounts: 8,362 of 18,770 recovery-cut runs (seed 104, every 37th
//! cut, every 7th recovery program/erase) and 122 of 890 255-handle runs (seed 18);
//! the early truncate-open rewrite in 33 reads of the first full survey (MostBits).
//! Refusals met under the cuts: write, fsync, close, truncate, mkdir, rename, step,
//! sync, put-open, unmount; the part's failures surfaced in the scripts only as
//! `ReadOnly` (never `Poisoned`, a flash error or `Corrupted`), and once as a failed
//! write of the check on a worn part (the volume mounted and read back after it); no
//! panic, no hang.
//!
//! Not covered: the 512-byte-unit TINY store and other parts than TINY and the
//! Micron x40 shape; read errors (uncorrectable runs, read disturb) with the bad
//! blocks; wear-out with recovery-mount cuts (only the plain sweep); every cut of the
//! 255-handle scripts (strided: a seed has 6,000 to 7,000 programs/erases).
//!
//! Run: `cargo test --release -p stagefs-core --all-features --test all review_s52:: --
//! --test-threads=1` (the survey: `-- --ignored`, see it).

use crate::support::full_volume::{
    chunk, file_ok, filled, fmut, full_script, gauntlet, handles_script, matches, no_bypass, pick,
    prep_handles, prep_tracked, run, shape, sweep, volume, Ctx, Cuts, Mounted, Part, Report,
    Review, Run, Shape, St, Stop, E, F, HEALTHY, V, X,
};
use crate::support::{pattern, Rng, Sim};

use std::rc::Rc;

use nand_hal::sim::{profile, BlockState as SimBlock, CutKind, FaultConfig, FaultPlan, SimStorage};
use nand_hal::BlockAddr;
use oftl::{BlockState, Greedy, Oftl};
use stagefs_core::oracle::{observe, Node, Tree};
use stagefs_core::{Error, File, OpenOptions};

// ---------------------------------------------------------------------------------
// Parts and store shapes
// ---------------------------------------------------------------------------------

const BAD_BLOCKS: Part = Part {
    factory_bad: 4,
    endurance: 0,
    grown: 2,
};

/// This review's shapes: format id 52, `S52_TRACE`, a part that may fail.
const S52: Review = Review {
    format_id: 52,
    trace: "S52_TRACE",
    failing_part: true,
};

shape!(
    Tiny,
    "tiny",
    Oftl<&'a mut Sim, 2048, 64, 4>,
    profile::TINY,
    6,
    S52
);
shape!(
    Micron,
    "mt29f1g01x40/meta512",
    Oftl<&'a mut Sim, 2048, 64, 4, 1, Greedy, 512>,
    profile::MT29F1G01.with_blocks_per_die(40),
    5,
    S52
);

thread_local! {
    /// Mounts read-only on a writable store with good blocks to spare (the staged
    /// records found no room), the next mount writable.
    static TRANSIENT_RO: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// Removes refused `NoSpace` by the check on a worn part over its capacity.
    static WORN_REMOVES_REFUSED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

// ---------------------------------------------------------------------------------
// Images: aged parts
// ---------------------------------------------------------------------------------

/// Ages every block to within `margin` cycles of its endurance (some at it: their
/// programs fail one time in twenty, their erases one in five once past).
fn age(sim: &mut Sim, seed: u64, margin: u64) {
    let mut rng = Rng(seed.wrapping_mul(77) | 1);
    let ends: Vec<u32> = sim.storage().blocks().iter().map(|b| b.endurance).collect();
    for (b, end) in ends.into_iter().enumerate() {
        if end > 0 {
            let back = rng.below(margin.max(1)) as u32;
            sim.set_erase_count(BlockAddr(b as u32), end.saturating_sub(back));
        }
    }
}

/// Blocks the simulator holds bad (factory and grown).
fn sim_bad(sim: &Sim) -> usize {
    sim.storage()
        .blocks()
        .iter()
        .filter(|b| b.flags & SimBlock::BAD != 0)
        .count()
}

// ---------------------------------------------------------------------------------
// The check after a cut (or a failure)
// ---------------------------------------------------------------------------------

/// Mounts and checks the tree against `cur` or `intent`. Read-only is accepted only
/// when the store's census calls for it (then every change must be refused). Else the
/// largest files are removed one at a time (at most 8) until a small inline file and a
/// 2 KiB file are taken, and both read back after a remount. On a worn part (`worn`) a
/// write of the check may fail with `Poisoned` or a flash error: the volume must then
/// mount again and read back.
fn check_after<S: Shape>(
    sim: &mut Sim,
    cur: &St,
    intent: &Option<St>,
    worn: bool,
) -> Result<Mounted, String> {
    let r = check_inner::<S>(sim, cur, intent, worn)?;
    if r == Mounted::WornFailure {
        sim.cut_power();
        sim.power_on();
        let mut fs = volume::<S, 4>(sim);
        fs.mount()
            .map_err(|e| format!("mount after a failed write of the check: {e:?}"))?;
        observe(&mut *fs)
            .map_err(|e| format!("observe after a failed write of the check: {e:?}"))?;
    }
    Ok(r)
}

fn check_inner<S: Shape>(
    sim: &mut Sim,
    cur: &St,
    intent: &Option<St>,
    worn: bool,
) -> Result<Mounted, String> {
    let mut fs = volume::<S, 4>(sim);
    fs.mount().map_err(|e| format!("mount: {e:?}"))?;
    let census = S::census(fs.store());
    let t = observe(&mut *fs).map_err(|e| format!("observe: {e:?} ({census:?})"))?;
    match (matches(&t, cur), intent.as_ref().map(|i| matches(&t, i))) {
        (Ok(()), _) | (_, Some(Ok(()))) => {}
        (Err(a), None) => return Err(format!("state: {a}")),
        (Err(a), Some(Err(b))) => return Err(format!("neither state: before: {a}; after: {b}")),
    }
    if fs.read_only() && !census.genuinely_short() {
        // The staged records found no room at this mount (`Stage::replay` falls back
        // read-only "until a mount finds room"): the next mount must be writable.
        TRANSIENT_RO.with(|n| n.set(n.get() + 1));
        drop(fs);
        fs = volume::<S, 4>(sim);
        fs.mount()
            .map_err(|e| format!("mount after a read-only one: {e:?}"))?;
        if fs.read_only() {
            let c = S::census(fs.store());
            return Err(format!(
                "read-only at two mounts in a row with good blocks to spare: {c:?}"
            ));
        }
    }
    if fs.read_only() {
        if !census.genuinely_short() {
            return Err(format!(
                "mounted read-only with good blocks to spare: {census:?}"
            ));
        }
        let r = fs.create_dir("/_ro");
        if r != Err(Error::ReadOnly) {
            return Err(format!("mkdir on a read-only volume: {r:?}"));
        }
        return Ok(Mounted::ReadOnly);
    }
    let mut files: Vec<(usize, String)> = t
        .iter()
        .filter_map(|(k, n)| match n {
            Node::File(c) => Some((c.len(), k.clone())),
            Node::Dir => None,
        })
        .collect();
    files.sort_by(|a, b| b.cmp(a));
    let (p, q) = (pattern(7, 100), pattern(8, 2100));
    // A refused write leaves its handle open: closed (its refusal too) before the next
    // try.
    let put = |fs: &mut V<'_, S, 4>, path: &str, d: &[u8]| -> Result<(), Error<E>> {
        let f = fs.open(path, OpenOptions::new().write(true).create(true))?;
        match fs.write(f, d) {
            Ok(_) => fs.close(f),
            Err(e) => {
                let _ = fs.close(f);
                Err(e)
            }
        }
    };
    // Largest first; a remove refused `NoSpace` is a failure, also where grown bad
    // blocks left more in use than the capacity (the first finding until stop 53),
    // except on a worn part over its capacity, whose blocks die under the removes'
    // collections (counted, and the next file tried).
    let (mut removed, mut refused) = (0, 0);
    let mut next = files.iter();
    loop {
        let r = put(&mut fs, "/_p", &p).and_then(|()| put(&mut fs, "/_q", &q));
        match r {
            Ok(()) => break,
            Err(Error::NoSpace) => {}
            Err(Error::ReadOnly) if fs.read_only() => {
                let c = S::census(fs.store());
                if !c.genuinely_short() {
                    return Err(format!("turned read-only at the check's writes: {c:?}"));
                }
                return Ok(Mounted::ReadOnly);
            }
            Err(Error::Poisoned | Error::Flash(_)) if worn => return Ok(Mounted::WornFailure),
            Err(e) => {
                return Err(format!(
                    "writes after {removed} removes: {e:?} (mounted {census:?}, now {:?})",
                    S::census(fs.store())
                ))
            }
        }
        let now = S::census(fs.store());
        let Some((_, k)) = next.next() else {
            if worn && refused > 0 {
                WORN_REMOVES_REFUSED.with(|n| n.set(n.get() + refused));
                return Ok(Mounted::WornFailure);
            }
            return Err(format!(
                "writes refused NoSpace with every file removed ({removed} removed; \
                 mounted {census:?}, now {now:?})"
            ));
        };
        if removed >= 6 && now.used + 32 <= now.capacity {
            return Err(format!(
                "writes refused NoSpace after {removed} removes with room ({now:?})"
            ));
        }
        match fs.remove(k) {
            Ok(()) => removed += 1,
            Err(Error::NoSpace) if worn && S::census(fs.store()).over_committed() => refused += 1,
            Err(Error::ReadOnly) if fs.read_only() => {
                let c = S::census(fs.store());
                if !c.genuinely_short() {
                    return Err(format!("remove {k}: turned read-only: {c:?}"));
                }
                return Ok(Mounted::ReadOnly);
            }
            Err(Error::Poisoned | Error::Flash(_)) if worn => return Ok(Mounted::WornFailure),
            Err(e) => {
                return Err(format!(
                    "remove {k}: {e:?} (mounted {census:?}, now {now:?})"
                ))
            }
        }
    }
    if std::env::var_os("S52_TRACE").is_some() && removed > 1 {
        eprintln!("note: the check took {removed} removes before its writes ({census:?})");
    }
    fs.unmount().map_err(|e| format!("unmount: {e:?}"))?;
    fs.mount().map_err(|e| format!("second mount: {e:?}"))?;
    for (path, d) in [("/_p", &p), ("/_q", &q)] {
        let f = fs
            .open(path, OpenOptions::new().read(true))
            .map_err(|e| format!("{path}: {e:?}"))?;
        let mut got = vec![0u8; d.len() + 1];
        let n = fs.read(f, &mut got).map_err(|e| format!("{e:?}"))?;
        if got[..n] != d[..] {
            return Err(format!("{path} read back {n} bytes, not as written"));
        }
    }
    WORN_REMOVES_REFUSED.with(|n| n.set(n.get() + refused));
    Ok(Mounted::Writable)
}

/// The report's counts, with the read-only mounts followed by a writable one.
fn summary(rep: &Report) -> String {
    format!(
        "{} cut runs, {} failures, refusals {:?}, part failures {:?}, read-only checks {}, \
         failed check writes {}, read-only mounts followed by a writable one {}, removes \
         refused on worn parts over capacity {}",
        rep.runs,
        rep.failures.len(),
        rep.refused,
        rep.failed,
        rep.read_only,
        rep.worn_failures,
        TRANSIENT_RO.with(|n| n.get()),
        WORN_REMOVES_REFUSED.with(|n| n.get()),
    )
}

// ---------------------------------------------------------------------------------
// Sweeps and scripts (the shared ones in `support::full_volume`)
// ---------------------------------------------------------------------------------

const EVERY: Cuts<'static> = Cuts {
    kinds: &CutKind::ALL,
    stride: 1,
    recovery: 0,
    noisy: false,
    program_fail: 0,
    erase_fail: 0,
    worn: false,
    per_cut_seeds: false,
};

/// Staged work on a nearly full volume: 1..64-byte appends with fsync on `/w/t0` and
/// `/w/t1` (records pending in the staging log), a 1.5 to 5 KiB write with fsync on
/// `/w/t3` now and then (cut back when long), truncates into the staged records, steps
/// and syncs; after a refused write or fsync a fill file is removed. The files stay
/// open to the end (closed, or unmounted open on odd seeds).
fn staged_script<S: Shape, const H: usize>(
    seed: u64,
    len: u32,
) -> impl Fn(&mut Ctx<'_, '_, S, H>) -> Result<(), Stop> {
    move |c| {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        no_bypass(c);
        let rw = OpenOptions::new().read(true).write(true);
        let mut open: Vec<(String, File)> = Vec::new();
        for p in ["/w/t0", "/w/t1", "/w/t3"] {
            if !c.cur.contains_key(p) {
                continue;
            }
            match c.open(p, rw)? {
                Some(f) => open.push((p.to_string(), f)),
                None => return Err(Stop::Bad(format!("open {p} refused NoSpace"))),
            }
        }
        if open.is_empty() {
            return Ok(());
        }
        for k in 0..len {
            let (p, f) = open[rng.below(open.len() as u64) as usize].clone();
            let big = p == "/w/t3";
            let len = c.len_of(&p);
            let done = match rng.below(12) {
                0..=7 => {
                    let n = if big {
                        1500 + rng.below(3500)
                    } else {
                        1 + rng.below(64)
                    } as usize;
                    if big && len > 16_000 {
                        c.truncate(f, &p, 1000)?
                    } else {
                        c.write(f, &p, len, &chunk(k, n))? && c.fsync(f, &p)?
                    }
                }
                8 => {
                    let cut = rng.below(len.min(100) as u64 + 1) as usize;
                    c.truncate(f, &p, len - cut)?
                }
                9 => c.step([0, 1, 4][rng.below(3) as usize])?,
                10 => c.sync()?,
                _ => {
                    let at = rng.below(len as u64 + 1) as usize;
                    c.write(f, &p, at, &chunk(k, 1 + rng.below(40) as usize))? && c.fsync(f, &p)?
                }
            };
            if !done {
                let fills = c.paths(|_, x| matches!(x, X::Fill(..)));
                if let Some(v) = pick(&mut rng, &fills) {
                    c.remove(&v)?;
                }
            }
        }
        if seed % 2 == 1 {
            let paths: Vec<String> = open.into_iter().map(|(p, _)| p).collect();
            c.unmount(&paths)?;
            return Ok(());
        }
        for (p, f) in open {
            c.close(f, &p)?;
        }
        Ok(())
    }
}

fn gauntlet_sweep<S: Shape>(seed: u64, part: Part, cuts: Cuts<'_>, rep: &mut Report) {
    let (base, st, (full, after)) = filled::<S>(seed, part, 0.0, &prep_tracked::<S>);
    println!(
        "[{}] gauntlet seed {seed} {part:?}: filled to {full:.1}%, {after:.1}% after one \
         remove, {} blocks bad",
        S::NAME,
        sim_bad(&base)
    );
    sweep::<S, 4>(
        "gauntlet",
        &base,
        &st,
        &gauntlet::<S, 4>,
        seed,
        cuts,
        check_after::<S>,
        rep,
    );
}

fn full_sweeps<S: Shape>(
    seeds: std::ops::Range<u64>,
    part: Part,
    len: u32,
    cuts: Cuts<'_>,
    rep: &mut Report,
) {
    for seed in seeds {
        let (base, st, (full, after)) = filled::<S>(seed, part, 1.5, &prep_tracked::<S>);
        println!(
            "[{}] seed {seed} {part:?}: filled to {full:.1}% of capacity, {after:.1}% after \
             the removes, {} blocks bad",
            S::NAME,
            sim_bad(&base)
        );
        let s = full_script::<S, 4>(seed, len);
        sweep::<S, 4>("full", &base, &st, &s, seed, cuts, check_after::<S>, rep);
    }
}

fn handles_sweep<S: Shape, const H: usize>(
    seed: u64,
    part: Part,
    len: u32,
    free: f64,
    cuts: Cuts<'_>,
    rep: &mut Report,
) {
    let (base, st, (full, after)) = filled::<S>(seed, part, free, &prep_handles::<H, S>);
    println!(
        "[{}] handles {H} seed {seed} {part:?}: filled to {full:.1}%, {after:.1}% after the \
         removes, {} blocks bad",
        S::NAME,
        sim_bad(&base)
    );
    let s = handles_script::<S, H>(seed, len);
    sweep::<S, H>("handles", &base, &st, &s, seed, cuts, check_after::<S>, rep);
}

/// The staged script on a nearly full volume of a part aged to within `margin` cycles
/// of its endurance (`endurance` cycles mean, 2 factory bad blocks), swept.
fn worn_sweep<S: Shape>(
    seed: u64,
    endurance: u32,
    margin: u64,
    len: u32,
    cuts: Cuts<'_>,
    rep: &mut Report,
) {
    let part = Part {
        factory_bad: 2,
        endurance,
        grown: 0,
    };
    let (mut base, st, (full, after)) = filled::<S>(seed, part, 1.5, &prep_tracked::<S>);
    age(&mut base, seed, margin);
    println!(
        "[{}] worn seed {seed} endurance {endurance} margin {margin}: filled to {full:.1}%, \
         {after:.1}% after the removes",
        S::NAME
    );
    let s = staged_script::<S, 4>(seed, len);
    sweep::<S, 4>("worn", &base, &st, &s, seed, cuts, check_after::<S>, rep);
}

/// Rebuilds the model from a tree the check accepted (each file as read).
fn remodel(t: &Tree, st: &St) -> St {
    t.iter()
        .map(|(k, n)| {
            let x = match (n, st.get(k)) {
                (Node::Dir, _) => X::Dir,
                (Node::File(c), Some(X::Fill(s, len))) if *c == pattern(*s, *len) => {
                    X::Fill(*s, *len)
                }
                (Node::File(c), _) => F::file(c.clone()),
            };
            (k.clone(), x)
        })
        .collect()
}

/// The end of life of a nearly full volume: the part aged to within `margin` cycles
/// of its endurance, then sessions of the staged script (a new seed each), every
/// session cut at one of its first 300 programs/erases (kind drawn, torn pages
/// unstable in every other session), and the volume mounted and checked after each
/// (every acknowledged byte, all or nothing, read-only only when the census calls for
/// it), the model taken from what it read; until it mounts read-only or `sessions`
/// pass. Then a clean read-only mount must show the same tree and refuse changes.
/// Returns the sessions run and whether the volume ended read-only.
fn wear_life<S: Shape>(
    seed: u64,
    endurance: u32,
    margin: u64,
    sessions: u32,
    rep: &mut Report,
) -> (u32, bool) {
    let part = Part {
        factory_bad: 2,
        endurance,
        grown: 0,
    };
    let (mut sim, mut st, _) = filled::<S>(seed, part, 1.5, &prep_tracked::<S>);
    age(&mut sim, seed, margin);
    let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
    for s in 0..sessions {
        let kind = CutKind::ALL[rng.below(5) as usize];
        let at = 1 + rng.below(300);
        let faults = FaultConfig {
            unstable_after_cut: s % 2 == 1,
            ..FaultConfig::default()
        };
        sim.arm(
            FaultPlan::seeded(rng.next())
                .with_cut(at, kind)
                .with_faults(faults),
        );
        let script = staged_script::<S, 4>(seed * 1000 + s as u64, 60);
        let r = run::<S, 4>(&mut sim, &st, &script, true);
        rep.runs += 1;
        let tag = format!(
            "wear life [{}] seed {seed} session {s} cut@{at} {kind:?}",
            S::NAME
        );
        match &r.stop {
            Some(Stop::Bad(m)) => {
                rep.failures.push(format!("{tag}: {m}"));
                return (s, false);
            }
            Some(Stop::Failed(m)) => *rep.failed.entry(m.clone()).or_default() += 1,
            _ => {}
        }
        for (k, v) in &r.refused {
            *rep.refused.entry(k).or_default() += v;
        }
        sim.cut_power();
        sim.power_on();
        sim.disarm();
        let mut fs = volume::<S, 4>(&mut sim);
        let checked: Result<(Tree, bool), String> = (|| {
            fs.mount().map_err(|e| format!("mount: {e:?}"))?;
            let census = S::census(fs.store());
            let t = observe(&mut *fs).map_err(|e| format!("observe: {e:?} ({census:?})"))?;
            match (
                matches(&t, &r.cur),
                r.intent.as_ref().map(|i| matches(&t, i)),
            ) {
                (Ok(()), _) | (_, Some(Ok(()))) => {}
                (Err(a), None) => return Err(format!("state: {a}")),
                (Err(a), Some(Err(b))) => {
                    return Err(format!("neither state: before: {a}; after: {b}"))
                }
            }
            if fs.read_only() && !census.genuinely_short() {
                return Err(format!("read-only with good blocks to spare: {census:?}"));
            }
            Ok((t, fs.read_only()))
        })();
        drop(fs);
        let (t, ro) = match checked {
            Ok(x) => x,
            Err(e) => {
                rep.failures.push(format!("{tag}: {e}"));
                return (s, false);
            }
        };
        let took = match &r.intent {
            Some(i) if matches(&t, &r.cur).is_err() => i,
            _ => &r.cur,
        };
        st = remodel(&t, took);
        if ro {
            rep.read_only += 1;
            let mut fs = volume::<S, 4>(&mut sim);
            let again: Result<(), String> = (|| {
                fs.mount()
                    .map_err(|e| format!("second read-only mount: {e:?}"))?;
                let t2 = observe(&mut *fs).map_err(|e| format!("second observe: {e:?}"))?;
                if t2 != t {
                    return Err("the second read-only mount shows another tree".into());
                }
                let w = fs.open("/w/t0", OpenOptions::new().write(true));
                if w.err() != Some(Error::ReadOnly) || fs.remove("/f0") != Err(Error::ReadOnly) {
                    return Err("a read-only volume took a change".into());
                }
                Ok(())
            })();
            drop(fs);
            if let Err(e) = again {
                rep.failures.push(format!("{tag}: {e}"));
            }
            println!(
                "wear life [{}] seed {seed}: read-only after {} sessions, {} blocks bad",
                S::NAME,
                s + 1,
                sim_bad(&sim)
            );
            return (s + 1, true);
        }
    }
    println!(
        "wear life [{}] seed {seed}: writable after {sessions} sessions, {} blocks bad",
        S::NAME,
        sim_bad(&sim)
    );
    (sessions, false)
}

// ---------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Program and erase failures through the script and the recovery mounts.
const FAILING: Cuts<'static> = Cuts {
    program_fail: 3_000,
    erase_fail: 20_000,
    ..EVERY
};

/// The gauntlet on a full TINY volume of a part with 4 factory bad blocks and 2 grown
/// while filling, programs failing at 0.3% and erases at 2% throughout: every cut kind
/// at every 3rd program/erase; on the Micron x40 shape every 11th.
#[test]
fn s52_bad_blocks_full_volume_gauntlet() {
    let mut rep = Report::default();
    gauntlet_sweep::<Tiny>(
        41,
        BAD_BLOCKS,
        Cuts {
            stride: 3,
            ..FAILING
        },
        &mut rep,
    );
    gauntlet_sweep::<Micron>(
        43,
        BAD_BLOCKS,
        Cuts {
            stride: 11,
            ..FAILING
        },
        &mut rep,
    );
    println!("{}", summary(&rep));
    rep.assert_ok(true);
}

/// Review s51's random full-volume scripts on the part with bad blocks and failing
/// programs/erases: every cut kind at every 5th program/erase (seed 2); torn cuts
/// (every kind) at every 67th with a cut at every 5th program/erase of the recovery
/// mount (seed 5); every kind at every 37th with torn pages left unstable (seed 6).
#[test]
fn s52_bad_blocks_random_scripts_and_recovery_cuts() {
    let mut rep = Report::default();
    full_sweeps::<Tiny>(
        2..3,
        BAD_BLOCKS,
        40,
        Cuts {
            stride: 5,
            ..FAILING
        },
        &mut rep,
    );
    let rec = Cuts {
        kinds: &CutKind::ALL[1..],
        stride: 67,
        recovery: 5,
        ..FAILING
    };
    full_sweeps::<Tiny>(5..6, BAD_BLOCKS, 40, rec, &mut rep);
    let noisy = Cuts {
        stride: 37,
        noisy: true,
        ..FAILING
    };
    full_sweeps::<Tiny>(6..7, BAD_BLOCKS, 40, noisy, &mut rep);
    println!("{}", summary(&rep));
    rep.assert_ok(true);
}

/// Wear-out while nearly full with staged records pending: the staged script on a
/// part aged to within 30 cycles of its endurance (every kind at every 29th
/// program/erase; the check accepts read-only only when the census calls for it); and
/// three volumes driven to the end of their life (a cut in every session).
#[test]
fn s52_worn_nearly_full_volume_with_staged_records() {
    let mut rep = Report::default();
    let worn = Cuts {
        worn: true,
        ..EVERY
    };
    worn_sweep::<Tiny>(7, 400, 30, 80, Cuts { stride: 29, ..worn }, &mut rep);
    let mut ended = 0;
    for seed in 1..4 {
        let (sessions, ro) = wear_life::<Tiny>(seed, 400, 30, 60, &mut rep);
        assert!(sessions > 0);
        ended += u32::from(ro);
    }
    println!("{}; {ended} of 3 lives ended read-only", summary(&rep));
    rep.assert_ok(false);
}

/// More seeds of every one of 255 handles open on TINY while the volume fills (review
/// s51 swept one): seeds 12 and 13 on the healthy part, every kind at every 151st
/// program/erase; seed 14 on the part with bad blocks and failing programs/erases.
#[test]
fn s52_every_handle_open_more_seeds() {
    let mut rep = Report::default();
    let cuts = Cuts {
        stride: 151,
        ..EVERY
    };
    for seed in 12..14 {
        handles_sweep::<Tiny, 255>(seed, HEALTHY, 120, 6.0, cuts, &mut rep);
    }
    let failing = Cuts {
        stride: 151,
        ..FAILING
    };
    handles_sweep::<Tiny, 255>(14, BAD_BLOCKS, 120, 6.0, failing, &mut rep);
    println!("{}", summary(&rep));
    rep.assert_ok(true);
}

/// The survey: `S52_WHAT=full|gauntlet|handles|worn|life S52_SHAPE=tiny|micron
/// S52_SEEDS=n S52_FROM=k S52_LEN=calls S52_STRIDE=s S52_RECOVERY=r S52_NOISY=1
/// S52_PF=ppm S52_EF=ppm S52_PART=healthy|bad cargo test --release -p stagefs-core
/// --all-features --test all review_s52::s52_survey -- --ignored --nocapture
/// --test-threads=1`.
#[test]
#[ignore = "survey: minutes"]
fn s52_survey() {
    let (from, n, len) = (
        env("S52_FROM", 100),
        env("S52_SEEDS", 4),
        env("S52_LEN", 60) as u32,
    );
    let what = std::env::var("S52_WHAT").unwrap_or_else(|_| "full".into());
    let shape = std::env::var("S52_SHAPE").unwrap_or_else(|_| "tiny".into());
    let part = match std::env::var("S52_PART").as_deref() {
        Ok("healthy") => HEALTHY,
        _ => BAD_BLOCKS,
    };
    let cuts = Cuts {
        stride: env("S52_STRIDE", 1),
        recovery: env("S52_RECOVERY", 0),
        noisy: env("S52_NOISY", 0) == 1,
        program_fail: env("S52_PF", 3_000) as u32,
        erase_fail: env("S52_EF", 20_000) as u32,
        worn: what == "worn",
        ..EVERY
    };
    let margin = env("S52_MARGIN", 30);
    let mut rep = Report::default();
    for seed in from..from + n {
        match (what.as_str(), shape.as_str()) {
            ("full", "tiny") => full_sweeps::<Tiny>(seed..seed + 1, part, len, cuts, &mut rep),
            ("full", _) => full_sweeps::<Micron>(seed..seed + 1, part, len, cuts, &mut rep),
            ("gauntlet", "tiny") => gauntlet_sweep::<Tiny>(seed, part, cuts, &mut rep),
            ("gauntlet", _) => gauntlet_sweep::<Micron>(seed, part, cuts, &mut rep),
            ("handles", "tiny") => handles_sweep::<Tiny, 255>(seed, part, len, 6.0, cuts, &mut rep),
            ("handles", _) => handles_sweep::<Micron, 16>(seed, part, len, 3.0, cuts, &mut rep),
            ("worn", "tiny") => worn_sweep::<Tiny>(seed, 400, margin, len, cuts, &mut rep),
            ("worn", _) => worn_sweep::<Micron>(seed, 400, margin, len, cuts, &mut rep),
            ("life", "tiny") => drop(wear_life::<Tiny>(seed, 400, margin, len, &mut rep)),
            ("life", _) => drop(wear_life::<Micron>(seed, 400, margin, len, &mut rep)),
            _ => panic!("S52_WHAT / S52_SHAPE"),
        }
        println!("after seed {seed}: {}", summary(&rep));
    }
    println!("survey {what} {shape}: {}", summary(&rep));
    rep.assert_ok(false);
}

/// The checker itself on a part with bad blocks: the uncut image is accepted, a model
/// one fill file or one tracked file off is rejected (also as the in-flight state beside
/// a wrong one); a file opened with `truncate` and not closed reads as its old
/// contents only, empty or not; a part that programs nothing is never found writable (it
/// turns read-only, as its census calls for).
#[test]
fn s52_checker_rejects_wrong_states() {
    let (base, st, _) = filled::<Tiny>(77, BAD_BLOCKS, 1.5, &prep_tracked::<Tiny>);
    assert_eq!(
        check_after::<Tiny>(&mut base.clone(), &st, &None, false),
        Ok(Mounted::Writable)
    );
    let mut one = st.clone();
    let fill = one.keys().find(|k| k.starts_with("/f0/")).unwrap().clone();
    if let Some(X::Fill(s, _)) = one.get_mut(&fill) {
        *s += 1;
    }
    let mut two = st.clone();
    fmut(&mut two, "/w/t1").d = Rc::new(pattern(1, 3000));
    for m in [one, two] {
        assert!(check_after::<Tiny>(&mut base.clone(), &m, &None, false).is_err());
        assert!(check_after::<Tiny>(&mut base.clone(), &m, &Some(m.clone()), false).is_err());
    }
    let new = Rc::new(pattern(9, 300));
    let empty = F {
        hidden: Some(new.clone()),
        ..F::default()
    };
    assert!(!file_ok(&new[..100], &empty) && file_ok(&[], &empty));
    assert!(!file_ok(&pattern(8, 100), &empty));
    let old = F {
        d: Rc::new(pattern(1, 50)),
        hidden: Some(new.clone()),
        ..F::default()
    };
    assert!(!file_ok(&new[..100], &old) && file_ok(&pattern(1, 50), &old));
    let mut sim = base.clone();
    let dead = FaultConfig {
        program_fail_ppm: 1_000_000,
        erase_fail_ppm: 1_000_000,
        ..Default::default()
    };
    sim.arm(FaultPlan::seeded(5).with_faults(dead));
    let r = check_after::<Tiny>(&mut sim, &st, &None, false);
    assert!(
        matches!(r, Err(_) | Ok(Mounted::ReadOnly)),
        "a part that programs nothing: {r:?}"
    );
}

/// FINDING (review s52; fixed in stop 53): a healthy TINY volume filled to capacity (review s51's fill,
/// seed 1, no fault rates) whose part then grows 6 bad blocks (6 of the blocks holding
/// no valid page set to fail their next erase, `SimNand::fail_next_erase`; 20 steps
/// retire them) stays writable (`Health::Writable`: 52 good blocks, the shrink floor
/// `min_good_blocks` 48) with 427 pages in use over a capacity of 336, and every one of
/// its 120 removes is refused `NoSpace`, also after steps, syncs and remounts (the
/// handles survey on a part with bad blocks met the same at seed 100: 322 of 322
/// refused over three mounts). Nothing can be deleted, nothing written: a dead end on
/// a store that calls itself writable. Expected (oftl's "No dead ends"): deletes still
/// succeed down to the shrink floor, or the store turns read-only. With 4 such blocks
/// 2 removes of 120 were refused before the rest went through.
///
/// Run: `cargo test --release -p stagefs-core --all-features --test all
/// review_s52::s52_finding_grown_bad_blocks_leave_every_remove_refused --
/// --nocapture`
#[test]
fn s52_finding_grown_bad_blocks_leave_every_remove_refused() {
    let (mut sim, _, _) = filled::<Tiny>(1, HEALTHY, 0.0, &prep_tracked::<Tiny>);
    let empty: Vec<u32> = {
        let mut fs = volume::<Tiny, 4>(&mut sim);
        fs.mount().unwrap();
        let v = (fs.store().blocks().iter().enumerate())
            .filter(|(_, b)| !matches!(b.state(), BlockState::Reserved | BlockState::Bad))
            .filter(|(_, b)| b.valid() == 0)
            .map(|(i, _)| i as u32)
            .collect();
        fs.unmount().unwrap();
        v
    };
    for &b in empty.iter().take(6) {
        sim.fail_next_erase(BlockAddr(b));
    }
    let mut fs = volume::<Tiny, 4>(&mut sim);
    fs.mount().unwrap();
    let t = observe(&mut *fs).unwrap();
    for _ in 0..20 {
        fs.step(16).unwrap();
    }
    fs.sync().unwrap();
    fs.unmount().unwrap();
    fs.mount().unwrap();
    let c = Tiny::census(fs.store());
    println!("after the steps and a remount: {c:?}");
    assert!(c.over_committed() && c.good >= c.min_good && !fs.read_only());
    let (mut ok, mut refused) = (0, 0);
    for (k, n) in &t {
        if let Node::File(_) = n {
            match fs.remove(k) {
                Ok(()) => ok += 1,
                Err(Error::NoSpace) => refused += 1,
                Err(e) => panic!("remove {k}: {e:?}"),
            }
        }
    }
    println!(
        "removes: {ok} taken, {refused} refused NoSpace; now {:?}",
        Tiny::census(fs.store())
    );
    assert_eq!(
        refused, 0,
        "a writable volume (good blocks {} >= shrink floor {}) refused removes NoSpace",
        c.good, c.min_good
    );
}

/// FINDING (review s52; fixed in stop 53): "Opening with `truncate` and the writes before the next
/// fsync/close land together: a cut in between leaves the old contents" (the crate's
/// guarantees) does not hold when the old contents are empty. On a healthy TINY volume:
/// `/a` exists, empty and durable; it is opened with `truncate` and 3,000 bytes are
/// written in two writes (2,100 + 900), not closed; another file is written and
/// fsynced; the power is cut (between operations). After the mount `/a` reads as
/// written so far instead of empty (as it did for 2,100 and 6,000 bytes in one write;
/// with 300 or 3,000 old bytes the old contents stay, as promised; writes of 100 and
/// 700 bytes stay held back). In the sweeps it shows as a `Torn(MostBits)` cut of the
/// one program of a put's write (new file, 2,100 or 6,000 bytes): the torn page reads
/// back and the unclosed rewrite is durable (full scripts seed 102, healthy part, cuts
/// 481, 1,065, 1,332 of 1,348; review s51 never cut with `MostBits`).
///
/// Run: `cargo test --release -p stagefs-core --all-features --test all
/// review_s52::s52_finding_truncate_open_of_an_empty_file_lands_before_its_close --
/// --nocapture`
#[test]
fn s52_finding_truncate_open_of_an_empty_file_lands_before_its_close() {
    let mut sim = Tiny::sim(5, HEALTHY);
    let mut fs = volume::<Tiny, 4>(&mut sim);
    fs.format().unwrap();
    let f = fs
        .open("/a", OpenOptions::new().write(true).create(true))
        .unwrap();
    fs.close(f).unwrap();
    let trunc = OpenOptions::new().write(true).truncate(true);
    let f = fs.open("/a", trunc).unwrap();
    let new = pattern(2, 3000);
    fs.write(f, &new[..2100]).unwrap();
    fs.write(f, &new[2100..]).unwrap();
    let g = fs
        .open("/b", OpenOptions::new().write(true).create(true))
        .unwrap();
    fs.write(g, &pattern(3, 5000)).unwrap();
    fs.fsync(g).unwrap();
    drop(fs);
    sim.cut_power();
    sim.power_on();
    let mut fs = volume::<Tiny, 4>(&mut sim);
    fs.mount().unwrap();
    let t = observe(&mut *fs).unwrap();
    let Node::File(got) = &t["/a"] else {
        panic!("/a is a directory")
    };
    let what = if *got == new {
        "the unclosed rewrite, whole".to_string()
    } else if new.starts_with(got) {
        format!("a {}-byte prefix of the unclosed rewrite", got.len())
    } else {
        "other bytes".to_string()
    };
    assert!(
        got.is_empty(),
        "/a was empty and durable, opened with truncate, written, never closed: after a \
         cut it reads {} bytes: {what}",
        got.len()
    );
}

/// FINDING (review s52, fixed in stop 53; the first finding's state at mount): a volume over its
/// capacity after grown bad blocks, with staged records in its log, mounts read-only
/// mount after mount while its store is writable (`Health::Writable`, 43 good blocks,
/// `min_good_blocks` 40): the replay of the staged records finds no room and falls
/// back read-only (`Stage::replay`, "until a mount finds room"), and no mount finds
/// it; a read-only volume refuses the removes that would make room. Script: review
/// s51's full-volume script, seed 104, 60 calls, on the part with bad blocks
/// (`BAD_BLOCKS`, `FAILING` rates), cut (clean) at program/erase 741, its recovery
/// mount cut (clean) at its 322nd. Expected: writable (the store is, with good blocks
/// to spare), or read-only only as the store's census calls for. The recovery-cut
/// survey (seed 104, every 37th cut, every 7th recovery program/erase) met read-only
/// at two mounts in a row after 8,373 of 18,770 cut runs.
///
/// Run: `cargo test --release -p stagefs-core --all-features --test all
/// review_s52::s52_finding_over_committed_volume_mounts_read_only_again_and_again --
/// --nocapture`
#[test]
fn s52_finding_over_committed_volume_mounts_read_only_again_and_again() {
    let seed = 104;
    let (base, st, _) = filled::<Tiny>(seed, BAD_BLOCKS, 1.5, &prep_tracked::<Tiny>);
    let script = full_script::<Tiny, 4>(seed, 60);
    let faults = FAILING.faults();
    let mut sim = base.clone();
    sim.arm(
        FaultPlan::seeded(seed)
            .with_cut(741, CutKind::Clean)
            .with_faults(faults),
    );
    let _ = run::<Tiny, 4>(&mut sim, &st, &script, true);
    sim.cut_power();
    sim.power_on();
    sim.disarm();
    sim.arm(
        FaultPlan::seeded(322)
            .with_cut(322, CutKind::Clean)
            .with_faults(faults),
    );
    let _ = volume::<Tiny, 4>(&mut sim).mount();
    sim.cut_power();
    sim.power_on();
    sim.disarm();
    let mut seen = Vec::new();
    for i in 0..5 {
        let mut fs = volume::<Tiny, 4>(&mut sim);
        fs.mount().unwrap();
        let c = Tiny::census(fs.store());
        let ro = fs.read_only();
        let steps: Vec<_> = (0..8).map(|_| fs.step(64)).collect();
        let remove = fs.remove("/f0/n0008");
        println!("mount {i}: read-only {ro}, census {c:?}, steps {steps:?}, remove {remove:?}");
        seen.push(ro && c.ro.is_none() && !c.genuinely_short());
        if i % 2 == 1 {
            let _ = fs.unmount();
        }
    }
    assert!(
        !seen.iter().any(|&x| x),
        "read-only on a writable store with good blocks to spare at mounts {seen:?}"
    );
}

/// Seed 100's full script on a part with bad blocks and failing programs/erases, cut
/// (clean) at its `at`-th program/erase; the part powered on again, and the run.
fn seed_100_cut_at(at: u64) -> (Sim, Run) {
    let seed = 100;
    let (base, st, _) = filled::<Tiny>(seed, BAD_BLOCKS, 1.5, &prep_tracked::<Tiny>);
    let script = full_script::<Tiny, 4>(seed, 60);
    let mut sim = base.clone();
    sim.arm(
        FaultPlan::seeded(seed)
            .with_cut(at, CutKind::Clean)
            .with_faults(FAILING.faults()),
    );
    let r = run::<Tiny, 4>(&mut sim, &st, &script, true);
    sim.cut_power();
    sim.power_on();
    sim.disarm();
    (sim, r)
}

/// Stop 53, found by the survey once removes refused `NoSpace` became failures: seed
/// 100's full script cut at its 1,455th program/erase mounts over its capacity (304
/// pages in use, capacity 224); the second remove was refused after twelve collections
/// in a row gained nothing, while ten window blocks (which no collection takes before a
/// checkpoint) held 24 valid pages. Now a stalled remove takes fresh windows while they
/// gain: every remove of the 40 largest files goes through.
#[test]
fn s53_removes_after_a_cut_on_an_over_committed_volume() {
    let (mut sim, _) = seed_100_cut_at(1455);
    let mut fs = volume::<Tiny, 4>(&mut sim);
    fs.mount().unwrap();
    let c = Tiny::census(fs.store());
    assert!(c.over_committed() && !fs.read_only(), "{c:?}");
    let t = observe(&mut *fs).unwrap();
    let mut files: Vec<_> = (t.iter())
        .filter_map(|(k, n)| match n {
            Node::File(c) => Some((c.len(), k.clone())),
            _ => None,
        })
        .collect();
    files.sort_by(|a, b| b.cmp(a));
    for (len, k) in files.iter().take(40) {
        let r = fs.remove(k);
        assert_eq!(
            r,
            Ok(()),
            "remove {k} ({len} B): {:?}",
            Tiny::census(fs.store())
        );
    }
}

/// Stop 53: seed 100's full script cut at its 1,628th program/erase: the volume mounts
/// writable with 43 good blocks, 3 above `min_good_blocks` (40), 302 pages in use
/// against a capacity of 192. The check's removes were refused `NoSpace` (fresh windows
/// and collections gaining nothing) until a rewrite that deletes as many pages as it
/// programs got the delete reserve too; now the check passes.
#[test]
fn s53_removes_just_above_min_good_blocks() {
    let (mut sim, r) = seed_100_cut_at(1628);
    let c = check_after::<Tiny>(&mut sim, &r.cur, &r.intent, false);
    assert_eq!(c, Ok(Mounted::Writable));
}
