//! Review s51: an independent attempt to break the file layer where earlier reviews did
//! not go (review s50's stated limits): volumes filled to capacity (filled until
//! `NoSpace`, then a little freed), where refusals and the space reserves are exercised
//! under power cuts; every handle of the table open at once (255, the largest table the
//! tests use) with staged records on several while the volume fills; and store shapes
//! other than the TINY default (512-byte metadata units, and a Micron MT29F1G01 cut down
//! to 40 blocks of 64 pages with its 128-byte spare area).
//!
//! Each scenario is a seeded script run on an image, cut at program/erase indexes with
//! every cut kind (and, for some, at each program/erase of the recovery mount, or with
//! pages left unstable by the cut). After each cut the volume is mounted and checked
//! against the model: every fsynced/closed byte as acknowledged, each namespace change
//! all or nothing, an unacknowledged byte only the durable one or one a write since put
//! there; an operation refused (`NoSpace`) changed nothing (read back at once, the
//! namespace and the refused handle's bytes, and after every later cut, since the model
//! never takes its change; a truncate-open rewrite refused at its write or close leaves
//! the old contents exactly); the volume mounts writable (not read-only: the part is
//! healthy), a remove works and after it a small inline file and a 2 KiB file are
//! written and survive a remount. A remove or rmdir refused `NoSpace` fails the run.
//! Scripts end either with closes or with an unmount with files still open.
//!
//! Harness: `support::full_volume` (written here, shared with review s52 since stop
//! 53): the store shapes (`shape!`, under this review's rules `S51`: a healthy part,
//! so a flash failure, a read-only turn or a refused remove fails the run), the model,
//! the script context, the fill (`filled_at_format`), the sweep (with this review's
//! plans, `Cuts::per_cut_seeds`) and the scripts (full-volume, every handle, the
//! gauntlet). The check after each run (`check_after`) is this file's. The shared
//! `support::sweep::cut_sweep` is not used: it mounts with `support::vol` (one store
//! shape, 4 handles) and carries errors, where these sweeps need three store shapes,
//! 255 handles and refusals the model takes.
//!
//! Finding (one, `s51_finding_torn_erase_costs_a_block_on_64_page_blocks`; fixed in
//! stop 51): on a healthy part with 64-page blocks a `Torn(Random)` cut of an erase
//! left the block `Bad` after the next mount, a block of capacity lost to a power cut;
//! on a full volume every write was then refused `NoSpace` (writable, not read-only)
//! until about a block of files was removed. TINY (16-page blocks) never showed it in
//! any sweep. The erase was a block's first since format, whose erases oftl did not
//! count, so the random bits the cut left in its marker bytes counted as a factory
//! marker; format's erases now count (`oftl::Config::for_image` keeps the old rule for
//! factory images).
//!
//! Held otherwise (no failure): TINY survey, 8 seeds of 60 calls, 97,278 cut runs (every
//! cut kind at every program/erase, two seeds also with recovery cuts and noisy pages);
//! 255 handles on TINY, one seed of 60 calls (4,834 programs/erases), every cut kind at
//! every one: 14,502 cut runs; the gauntlet survey on TINY and the 512-byte-unit TINY
//! store, 89,613 cut runs (see its test); the normal tests below (about 9,000 runs).
//! Refusals met under the cuts: write, fsync, close (so the truncate-open and tainted
//! paths), mkdir, step, sync and unmount; never remove, rmdir, rename or truncate
//! (renames over files and truncates succeeded on full volumes).
//! Not covered: parts with factory or grown bad blocks or failing programs/erases near
//! full; more than one seed of TINY with 255 handles at every cut (a seed takes about
//! 25 minutes); the 512-byte and Micron shapes' random-script surveys (time); wear-out.
//!
//! Run: `cargo test --release -p stagefs-core --test all review_s51:: -- --test-threads=1`
//! (the surveys: `-- --ignored`, see each).

use crate::support::full_volume::{
    filled_at_format, fmut, full_script, gauntlet, handles_script, matches, prep_handles,
    prep_tracked, run, shape, sweep, volume, Ctx, Cuts, Mounted, Report, Review, Shape, St, Stop,
    E, F, V, X,
};
use crate::support::{pattern, Sim};

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use nand_hal::sim::{profile, CutKind, FaultConfig, FaultPlan, TornMode};
use oftl::{Greedy, Oftl};
use stagefs_core::oracle::{observe, Node, Tree};
use stagefs_core::{Error, OpenOptions};

// ---------------------------------------------------------------------------------
// Store shapes
// ---------------------------------------------------------------------------------

/// This review's shapes: format id 51, `S51_TRACE`, a healthy part (every failure of
/// the part fails the run).
const S51: Review = Review {
    format_id: 51,
    trace: "S51_TRACE",
    failing_part: false,
};

shape!(
    Tiny,
    "tiny",
    Oftl<&'a mut Sim, 2048, 64, 4>,
    profile::TINY,
    6,
    S51
);
shape!(
    TinySmall,
    "tiny/meta512",
    Oftl<&'a mut Sim, 2048, 64, 4, 1, Greedy, 512>,
    profile::TINY,
    6,
    S51
);
shape!(
    Micron,
    "mt29f1g01x40/meta512",
    Oftl<&'a mut Sim, 2048, 64, 4, 1, Greedy, 512>,
    profile::MT29F1G01.with_blocks_per_die(40),
    5,
    S51
);

// ---------------------------------------------------------------------------------
// The check after a cut
// ---------------------------------------------------------------------------------

thread_local! {
    /// Checks whose writes after a remove needed more removes (see `check_after`).
    static EXTRA_REMOVES: Cell<u32> = const { Cell::new(0) };
}

/// Mounts and checks the tree against `cur` or `intent`; then that the volume is not
/// stuck: writable, a remove works, and after it a small inline and a small object
/// file are written and read back after a remount.
fn check_after<S: Shape>(sim: &mut Sim, cur: &St, intent: &Option<St>) -> Result<(), String> {
    let mut fs = volume::<S, 4>(sim);
    fs.mount().map_err(|e| format!("mount: {e:?}"))?;
    if fs.read_only() {
        return Err("mounted read-only (a healthy part)".into());
    }
    let t = observe(&mut *fs).map_err(|e| format!("observe: {e:?}"))?;
    match (matches(&t, cur), intent.as_ref().map(|i| matches(&t, i))) {
        (Ok(()), _) | (_, Some(Ok(()))) => {}
        (Err(a), None) => return Err(format!("state: {a}")),
        (Err(a), Some(Err(b))) => return Err(format!("neither state: before: {a}; after: {b}")),
    }
    // The largest file goes; then small writes must be taken, or, as `NoSpace` says
    // ("delete something"), be taken once the next largest files go too (up to four
    // removes in all). Stop 55's directory count moved the layouts: on seed 21 of
    // tiny/meta512 the volume ends 98% full and a write right after the first remove
    // was refused in 67 of 243 cut runs (foreground collection stalls there; a
    // `step_all` also gets it through).
    let mut files: Vec<(usize, &String)> = t
        .iter()
        .filter_map(|(k, n)| match n {
            Node::File(c) => Some((c.len(), k)),
            Node::Dir => None,
        })
        .collect();
    files.sort();
    let (p, q) = (pattern(7, 100), pattern(8, 2100));
    let put = |fs: &mut V<'_, S, 4>, path: &str, d: &[u8]| -> Result<(), Error<E>> {
        let f = fs.open(path, OpenOptions::new().write(true).create(true))?;
        if let Err(e) = fs.write(f, d) {
            // The handle goes (a retry opens it again).
            let _ = fs.close(f);
            return Err(e);
        }
        fs.close(f)
    };
    let mut removes = 0;
    let mut remove_next = |fs: &mut V<'_, S, 4>, removes: &mut u32| match files.pop() {
        Some((_, k)) => {
            *removes += 1;
            fs.remove(k).map_err(|e| format!("remove {k}: {e:?}"))
        }
        None => Err("NoSpace with every file removed".to_string()),
    };
    remove_next(&mut fs, &mut removes)?;
    for (path, d, what) in [
        ("/_p", &p, "small write after a remove"),
        ("/_q", &q, "2 KiB write after a remove"),
    ] {
        loop {
            match put(&mut fs, path, d) {
                Ok(()) => break,
                Err(Error::NoSpace) if removes < 4 => remove_next(&mut fs, &mut removes)?,
                Err(e) => return Err(format!("{what}: {e:?} after {removes} removes")),
            }
        }
    }
    EXTRA_REMOVES.with(|n| n.set(n.get() + (removes > 1) as u32));
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
    Ok(())
}

/// `check_after` as the shared sweep calls it (the part is never worn here).
fn check<S: Shape>(
    sim: &mut Sim,
    cur: &St,
    intent: &Option<St>,
    _worn: bool,
) -> Result<Mounted, String> {
    check_after::<S>(sim, cur, intent).map(|()| Mounted::Writable)
}

// ---------------------------------------------------------------------------------
// Sweeps (the sweep and the scripts in `support::full_volume`)
// ---------------------------------------------------------------------------------

pub const KINDS: [CutKind; 3] = [
    CutKind::Clean,
    CutKind::Torn(TornMode::Random),
    CutKind::Torn(TornMode::Prefix),
];

fn gauntlet_sweep<S: Shape>(seed: u64, cuts: Cuts<'_>, rep: &mut Report) {
    let (base, st, (full, after)) = filled_at_format::<S>(seed, 0.0, &prep_tracked::<S>);
    println!(
        "[{}] gauntlet seed {seed}: filled to {full:.1}%, {after:.1}% after one remove",
        S::NAME
    );
    sweep::<S, 4>(
        "gauntlet",
        &base,
        &st,
        &gauntlet::<S, 4>,
        seed,
        cuts,
        check::<S>,
        rep,
    );
}

// ---------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------

/// The gauntlet on the three shapes, every cut kind at every 3rd (TINY), 13th and
/// 11th program/erase.
#[test]
fn s51_full_volume_gauntlet() {
    let mut rep = Report::default();
    gauntlet_sweep::<Tiny>(41, Cuts { stride: 3, ..EVERY }, &mut rep);
    gauntlet_sweep::<TinySmall>(
        42,
        Cuts {
            stride: 13,
            ..EVERY
        },
        &mut rep,
    );
    gauntlet_sweep::<Micron>(
        43,
        Cuts {
            stride: 11,
            ..EVERY
        },
        &mut rep,
    );
    rep.assert_ok(true);
}

fn full_sweeps<S: Shape>(seeds: std::ops::Range<u64>, len: u32, cuts: Cuts<'_>, rep: &mut Report) {
    for seed in seeds {
        let (base, st, (full, after)) = filled_at_format::<S>(seed, 1.5, &prep_tracked::<S>);
        println!(
            "[{}] seed {seed}: filled to {full:.1}% of capacity, {after:.1}% after the removes",
            S::NAME
        );
        let s = full_script::<S, 4>(seed, len);
        sweep::<S, 4>("full", &base, &st, &s, seed, cuts, check::<S>, rep);
    }
}

fn handles_sweep<S: Shape, const H: usize>(
    seed: u64,
    len: u32,
    free: f64,
    cuts: Cuts<'_>,
    rep: &mut Report,
) {
    let (base, st, (full, after)) = filled_at_format::<S>(seed, free, &prep_handles::<H, S>);
    println!(
        "[{}] handles {H} seed {seed}: filled to {full:.1}%, {after:.1}% after the removes",
        S::NAME
    );
    let s = handles_script::<S, H>(seed, len);
    sweep::<S, H>("handles", &base, &st, &s, seed, cuts, check::<S>, rep);
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

const EVERY: Cuts<'static> = Cuts {
    kinds: &KINDS,
    stride: 1,
    recovery: 0,
    noisy: false,
    program_fail: 0,
    erase_fail: 0,
    worn: false,
    per_cut_seeds: true,
};

/// A random script on a full TINY volume, every cut kind at every 5th program/erase.
#[test]
fn s51_full_volume_random_scripts_tiny() {
    let mut rep = Report::default();
    let cuts = Cuts { stride: 5, ..EVERY };
    full_sweeps::<Tiny>(2..3, 40, cuts, &mut rep);
    // Since stop 53 a remove, or a rewrite that deletes the old contents, may use
    // oftl's delete reserve: these scripts free room where they were refused before,
    // and need not meet a refusal (the gauntlet and the handles test still do).
    rep.assert_ok(false);
}

/// The same with cuts in the recovery mount after each cut, and with pages left
/// unstable by the cut (every cut kind), each on its own seed.
#[test]
fn s51_full_volume_recovery_cuts_and_noisy() {
    let mut rep = Report::default();
    let rec = Cuts {
        kinds: &[CutKind::Torn(TornMode::Random)],
        stride: 67,
        recovery: 5,
        noisy: false,
        ..EVERY
    };
    full_sweeps::<Tiny>(5..6, 40, rec, &mut rep);
    let noisy = Cuts {
        stride: 37,
        noisy: true,
        ..EVERY
    };
    full_sweeps::<Tiny>(6..7, 40, noisy, &mut rep);
    rep.assert_ok(false);
}

/// Every one of 255 handles open at once, staged records on eight files, the volume
/// filled through the others (refused once full), cut at every 101st program/erase
/// (a script of 200 calls since stop 53: 120 no longer met a refusal).
#[test]
fn s51_every_handle_open_while_filling() {
    let mut rep = Report::default();
    let cuts = Cuts {
        stride: 101,
        ..EVERY
    };
    handles_sweep::<Tiny, 255>(11, 200, 6.0, cuts, &mut rep);
    rep.assert_ok(true);
}

/// The full-volume scripts on the 512-byte metadata store (TINY) and on a Micron
/// MT29F1G01 cut down to 40 blocks of 64 pages (128-byte spare area); the handles
/// script with a 16-handle table on the latter.
#[test]
fn s51_other_shapes() {
    let mut rep = Report::default();
    let cuts = Cuts {
        stride: 37,
        ..EVERY
    };
    full_sweeps::<TinySmall>(21..22, 40, cuts, &mut rep);
    full_sweeps::<Micron>(
        31..32,
        40,
        Cuts {
            stride: 61,
            ..EVERY
        },
        &mut rep,
    );
    handles_sweep::<Micron, 16>(
        32,
        80,
        3.0,
        Cuts {
            stride: 61,
            ..EVERY
        },
        &mut rep,
    );
    println!(
        "checks that needed more than one remove before a write: {}",
        EXTRA_REMOVES.with(|n| n.get())
    );
    rep.assert_ok(false); // As in `s51_full_volume_random_scripts_tiny`.
}

/// The surveys: `S51_SHAPE=tiny|small|micron S51_SEEDS=n S51_FROM=k S51_LEN=calls
/// S51_HANDLES=1 cargo test --release -p stagefs-core --test all
/// review_s51::s51_survey -- --ignored --nocapture --test-threads=1`: every cut kind at
/// every program/erase; every fourth seed again with recovery cuts (torn, every third
/// program/erase of the mount at every fifth cut) and with noisy pages. Measured: see
/// the report at the end of this file's docs.
#[test]
#[ignore = "survey: minutes"]
fn s51_survey() {
    let (from, n, len) = (
        env("S51_FROM", 100),
        env("S51_SEEDS", 10),
        env("S51_LEN", 60),
    );
    let shape = std::env::var("S51_SHAPE").unwrap_or_else(|_| "tiny".into());
    let handles = std::env::var("S51_HANDLES").is_ok();
    let mut rep = Report::default();
    for seed in from..from + n {
        let extra = [
            Cuts {
                kinds: &[CutKind::Torn(TornMode::Random)],
                stride: 5,
                recovery: 3,
                noisy: false,
                ..EVERY
            },
            Cuts {
                noisy: true,
                ..EVERY
            },
        ];
        let plans: &[Cuts<'_>] = if seed % 4 == 0 { &extra } else { &[] };
        for &cuts in [EVERY].iter().chain(plans) {
            match (shape.as_str(), handles) {
                ("tiny", false) => full_sweeps::<Tiny>(seed..seed + 1, len as u32, cuts, &mut rep),
                ("small", false) => {
                    full_sweeps::<TinySmall>(seed..seed + 1, len as u32, cuts, &mut rep)
                }
                ("micron", false) => {
                    full_sweeps::<Micron>(seed..seed + 1, len as u32, cuts, &mut rep)
                }
                ("tiny", true) => handles_sweep::<Tiny, 255>(seed, len as u32, 6.0, cuts, &mut rep),
                ("small", true) => {
                    handles_sweep::<TinySmall, 255>(seed, len as u32, 6.0, cuts, &mut rep)
                }
                ("micron", true) => {
                    handles_sweep::<Micron, 16>(seed, len as u32, 3.0, cuts, &mut rep)
                }
                _ => panic!("S51_SHAPE: tiny, small or micron"),
            }
        }
    }
    println!(
        "survey {shape}{}: {} cut runs, {} failures, refusals {:?}",
        if handles { " handles" } else { "" },
        rep.runs,
        rep.failures.len(),
        rep.refused
    );
    rep.assert_ok(true);
}

/// The checker itself: a flipped durable byte, a byte no write put there, a length
/// past every written state, a lost or an extra file, a fill file's bytes changed,
/// and (on a real image) a model that differs from the volume in one file or one
/// directory are each rejected; the uncut image is accepted.
#[test]
fn s51_checker_rejects_corrupted_states() {
    let d = pattern(1, 100);
    let mut w = d.clone();
    w.resize(300, 0);
    w[290..].copy_from_slice(&pattern(2, 10));
    let mut st = St::new();
    st.insert(
        "/f".into(),
        X::F(F {
            d: Rc::new(d.clone()),
            ws: vec![Rc::new(w.clone())],
            ..F::default()
        }),
    );
    st.insert("/g".into(), X::Fill(3, 50));
    let tree = |c: Vec<u8>| {
        Tree::from([
            ("/f".to_string(), Node::File(c)),
            ("/g".to_string(), Node::File(pattern(3, 50))),
        ])
    };
    assert!(matches(&tree(d.clone()), &st).is_ok());
    assert!(matches(&tree(w.clone()), &st).is_ok());
    assert!(matches(&tree(w[..150].to_vec()), &st).is_ok());
    let mut bad = d.clone();
    bad[7] ^= 1;
    assert!(matches(&tree(bad), &st).is_err());
    let mut hole = w.clone();
    hole[150] = 0xAA;
    assert!(matches(&tree(hole), &st).is_err());
    let mut long = w.clone();
    long.push(0);
    assert!(matches(&tree(long), &st).is_err());
    assert!(matches(&tree(d[..99].to_vec()), &st).is_err());
    let mut t = tree(d.clone());
    t.insert("/g".into(), Node::File(pattern(4, 50)));
    assert!(matches(&t, &st).is_err());
    t.insert("/g".into(), Node::Dir);
    assert!(matches(&t, &st).is_err());
    t.remove("/g");
    assert!(matches(&t, &st).is_err());
    let mut t = tree(d.clone());
    t.insert("/h".into(), Node::Dir);
    assert!(matches(&t, &st).is_err());
    // End to end, on a full image.
    let (base, st, _) = filled_at_format::<Tiny>(77, 1.5, &prep_tracked::<Tiny>);
    assert!(check_after::<Tiny>(&mut base.clone(), &st, &None).is_ok());
    let mut one = st.clone();
    let fill = one.keys().find(|k| k.starts_with("/f0/")).unwrap().clone();
    if let Some(X::Fill(s, _)) = one.get_mut(&fill) {
        *s += 1;
    }
    let mut two = st.clone();
    two.remove("/f3");
    two.retain(|k, _| !k.starts_with("/f3/"));
    let mut three = st.clone();
    fmut(&mut three, "/w/t1").d = Rc::new(pattern(1, 3000));
    for m in [one, two, three] {
        let r = check_after::<Tiny>(&mut base.clone(), &m, &None);
        assert!(r.is_err(), "a wrong model was accepted");
        // ... also as the in-flight state beside a wrong acknowledged one.
        let r = check_after::<Tiny>(&mut base.clone(), &m, &Some(m.clone()));
        assert!(r.is_err());
    }
    // A refusal check that sees a namespace differing from the model fails.
    let mut sim = base.clone();
    let mut fs = volume::<Tiny, 4>(&mut sim);
    fs.mount().unwrap();
    let mut cur = st.clone();
    cur.insert("/w/ghost".into(), X::Dir);
    let mut c: Ctx<'_, '_, Tiny, 4> = Ctx {
        fs: &mut fs,
        cur,
        intent: None,
        verify: true,
        refused: BTreeMap::new(),
        calls: 0,
    };
    assert!(matches!(c.namespace_unchanged("test"), Err(Stop::Bad(_))));
    // ... and a handle that reads other than the model says.
    c.cur = st.clone();
    assert!(c.namespace_unchanged("test").is_ok());
    let f = c.open("/w/t1", OpenOptions::new().read(true).write(true));
    let f = f.unwrap().unwrap();
    assert!(c.handle_unchanged(f, "/w/t1", "test").is_ok());
    fmut(&mut c.cur, "/w/t1").d = Rc::new(pattern(1, 3000));
    assert!(matches!(
        c.handle_unchanged(f, "/w/t1", "test"),
        Err(Stop::Bad(_))
    ));
    drop(fs);
    // A part that takes no program or erase: the volume is stuck (refused at once or
    // after the remove), which the check must report.
    let mut sim = base.clone();
    let dead = FaultConfig {
        program_fail_ppm: 1_000_000,
        erase_fail_ppm: 1_000_000,
        ..Default::default()
    };
    sim.arm(FaultPlan::seeded(5).with_faults(dead));
    let r = check_after::<Tiny>(&mut sim, &st, &None);
    assert!(
        r.is_err(),
        "a part that programs nothing passed as writable"
    );
}

/// The gauntlet at every program/erase on the three shapes, again with recovery cuts
/// and with noisy pages: `cargo test --release -p stagefs-core --test all
/// review_s51::s51_gauntlet_survey -- --ignored --nocapture --test-threads=1`. It fails
/// with the finding (the Micron shape's torn-random cuts of erases, 6 of 1,197 runs on
/// its first pass); TINY: 1,965 runs at every cut and 19,854 with recovery cuts, the
/// 512-byte-unit TINY store 4,506 and 63,288: no failure.
#[test]
#[ignore = "survey: minutes"]
fn s51_gauntlet_survey() {
    let mut rep = Report::default();
    let rec = Cuts {
        kinds: &KINDS,
        stride: 4,
        recovery: 1,
        noisy: false,
        ..EVERY
    };
    let noisy = Cuts {
        noisy: true,
        ..EVERY
    };
    for cuts in [EVERY, rec, noisy] {
        gauntlet_sweep::<Tiny>(41, cuts, &mut rep);
        gauntlet_sweep::<TinySmall>(42, cuts, &mut rep);
        gauntlet_sweep::<Micron>(43, cuts, &mut rep);
    }
    println!(
        "gauntlet survey: {} cut runs, {} failures",
        rep.runs,
        rep.failures.len()
    );
    rep.assert_ok(true);
}

/// The gauntlet's calls and outcomes, uncut (`S51_TRACE=1 ... review_s51::s51_gauntlet_trace
/// -- --ignored --nocapture`).
#[test]
#[ignore = "a trace"]
fn s51_gauntlet_trace() {
    let mut rep = Report::default();
    let one = Cuts {
        stride: u64::MAX,
        ..EVERY
    };
    gauntlet_sweep::<Tiny>(41, one, &mut rep);
    rep.assert_ok(true);
}

/// FINDING (review s51, fixed in stop 51: format's erases count, see the module docs):
/// on a healthy part with 64-page blocks (a Micron MT29F1G01
/// cut down to 40 blocks, and a W25N01GV cut down to 40, both with 512-byte metadata
/// units; TINY's 16-page blocks never showed it), a torn power cut of kind
/// `Torn(Random)` at an erase (the cut runs that fail each end one erase further on)
/// leaves that block counted bad by the next mount (state `Bad`, no fault configured:
/// `FaultPlan::seeded` with rates all 0). The store loses a block of capacity: 512 ->
/// 448 pages with 506 in use, so on a full volume every write is refused `NoSpace`
/// for good, also after removing 9,000 B and then 5,000 B of files and after steps,
/// while the volume mounts writable (not read-only). Script:
/// `filled_at_format::<Micron>(43, 0.0, prep_tracked)` then the gauntlet (open `/w/t0` and `/w/t1`, 64-byte appends with
/// fsync on `/w/t0`), cut at program/erase 4 of the run with `Torn(Random)`, plan seed
/// `43 ^ 4 * 7919 ^ 1`. Expected: no block bad, and after the remove a 5-byte file is
/// written. Observed: block 33 bad, capacity 448 pages, `NoSpace`. The gauntlet survey
/// hits it at cuts 4, 17, 84, 242, 251 and 312 of 399 (seed 43; blocks 33, 35, 36, ...),
/// seed 44 at 4 of 318 torn-random cuts, the W25N01GV x40 part at 6 of 399.
#[test]
fn s51_finding_torn_erase_costs_a_block_on_64_page_blocks() {
    let (base, st, _) = filled_at_format::<Micron>(43, 0.0, &prep_tracked::<Micron>);
    let at = 4u64;
    let kind = CutKind::Torn(TornMode::Random);
    let counts = |cut: u64| {
        let mut sim = base.clone();
        let c0 = sim.counters();
        sim.arm(FaultPlan::seeded(43 ^ cut.wrapping_mul(7919) ^ 1).with_cut(cut, kind));
        let _ = run::<Micron, 4>(&mut sim, &st, &gauntlet::<Micron, 4>, true);
        let c = sim.counters();
        (c.programs - c0.programs, c.erases - c0.erases, sim)
    };
    let (p3, e3, _) = counts(at - 1);
    let (p4, e4, mut sim) = counts(at);
    println!(
        "programs/erases counted with the cut at {}: {p3}/{e3}; at {at}: {p4}/{e4}",
        at - 1
    );
    sim.cut_power();
    sim.power_on();
    sim.disarm();
    let mut fs = volume::<Micron, 4>(&mut sim);
    fs.mount().unwrap();
    let bad: Vec<usize> = fs
        .store()
        .blocks()
        .iter()
        .enumerate()
        .filter(|(_, b)| b.state() == oftl::BlockState::Bad)
        .map(|(i, _)| i)
        .collect();
    let cap = (fs.store().capacity_pages(), fs.store().used_pages());
    fs.remove("/w/t3").unwrap();
    let f = fs.open("/_p", OpenOptions::new().write(true).create(true));
    let put = f.and_then(|f| {
        fs.write(f, b"hello")?;
        fs.close(f)
    });
    assert_eq!(
        (bad.as_slice(), put),
        (&[][..], Ok(())),
        "a torn cut on a healthy part left blocks bad (capacity, used pages: {cap:?})"
    );
}
