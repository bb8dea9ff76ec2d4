//! Independent review (s37b) of 1b07b16 (`release_spare`): double power cuts around the
//! giving-up of an unmarked checkpoint's spare, on the volume state of review s36b's
//! finding (TINY, 2 of 4 checkpoint blocks good: one durable with an unmarked
//! checkpoint, one its spare). See `crates/oftl/tests/review_s37b.rs` for the findings
//! of this review; this file holds probes of the file layer.

#![allow(dead_code)]

use crate::aim;

use std::cell::RefCell;
use std::rc::Rc;

use aim::*;
use nand_hal::powerloss::Sim;
use nand_hal::sim::CutKind;
use stagefs_core::oracle::{observe, Node, Tree};

/// One session with a cut at `k` (`kind`, `unstable`: torn pages unstable): mount, write
/// `path`, unmount. Returns whether the write was acknowledged and the cut fired.
fn session(
    sim: &mut Sim,
    seed: u64,
    k: u64,
    kind: CutKind,
    unstable: bool,
    path: &str,
    data: &[u8],
) -> (bool, bool) {
    let ctl = Rc::new(RefCell::new(Ctl::default()));
    let mut plan = clean_plan(seed).with_cut(k, kind);
    plan.faults.unstable_after_cut = unstable;
    ctl.borrow_mut().arm = Some(plan);
    let acked = {
        let mut fs = vol(sim, ctl);
        let a = fs.mount().is_ok() && put(&mut fs, path, data).is_ok();
        let _ = fs.unmount();
        a
    };
    let fired = !sim.is_powered();
    (acked, fired)
}

/// What a mount after the cuts may show for `p`: the data once acknowledged, else
/// nothing, empty (created, not written) or the data.
fn probe_ok(seen: &Tree, p: &str, acked: bool, data: &[u8]) -> bool {
    match seen.get(p) {
        None => !acked,
        Some(Node::File(d)) => (!acked && d.is_empty()) || d == data,
        Some(_) => false,
    }
}

/// Probe: two cuts in a row around the spare's release. A cut (every kind) at each of
/// the first 60 programs/erases of the session that gives the spare up (mount, write
/// `/probe`, unmount), then a second cut (every kind) at each of the first 40 of the
/// next session (mount, whose recovery may give up the spare again, write `/again`,
/// unmount), then a clean mount: it must mount and show every acknowledged byte.
/// Run twice: torn pages stable, and unstable (`unstable_after_cut`).
#[test]
fn probe_two_cuts_around_the_spare_release() {
    let (stuck, before) = stuck_image();
    let probe = pat(40, 1);
    let again = pat(3000, 2);
    let (mut runs, mut ro, mut doubles) = (0u32, 0u32, 0u32);
    let mut bad = Vec::new();
    // Every cut point in release builds; every third first cut in debug ones (CI's test
    // run), which otherwise take minutes.
    let stride = if cfg!(debug_assertions) { 3 } else { 1 };
    for unstable in [false, true] {
        for k in (1..=60u64).step_by(stride) {
            for kind in CutKind::ALL {
                let mut one = stuck.clone();
                let (acked1, fired1) = session(&mut one, k, k, kind, unstable, "/probe", &probe);
                if !fired1 {
                    continue;
                }
                crash(&mut one);
                for j in 1..=40u64 {
                    for kind2 in CutKind::ALL {
                        let mut sim = one.clone();
                        let (acked2, fired2) =
                            session(&mut sim, 1000 + j, j, kind2, unstable, "/again", &again);
                        crash(&mut sim);
                        runs += 1;
                        if fired2 {
                            doubles += 1;
                        }
                        let tag = format!("u{unstable} cut1 {k} {kind:?} cut2 {j} {kind2:?}");
                        let mut fs = vol(&mut sim, Rc::new(RefCell::new(Ctl::default())));
                        if let Err(e) = fs.mount() {
                            bad.push(format!("{tag}: mount {e:?}"));
                            continue;
                        }
                        let seen = match observe(&mut fs) {
                            Ok(t) => t,
                            Err(e) => {
                                bad.push(format!("{tag}: observe {e:?}"));
                                continue;
                            }
                        };
                        let mut rest = seen.clone();
                        rest.remove("/probe");
                        rest.remove("/again");
                        if rest != before
                            || !probe_ok(&seen, "/probe", acked1, &probe)
                            || !probe_ok(&seen, "/again", acked2, &again)
                        {
                            bad.push(format!(
                                "{tag}: acked {acked1} {acked2}: {}",
                                diff(&rest, &before)
                            ));
                            continue;
                        }
                        if put(&mut fs, "/third", &pat(10, 3)).is_err() {
                            ro += 1;
                        }
                    }
                }
            }
        }
    }
    println!("{runs} runs, {doubles} with both cuts, {ro} not writable after");
    assert!(doubles > 2_000, "{doubles} runs with both cuts");
    assert!(
        bad.is_empty(),
        "{} bad: {:#?}",
        bad.len(),
        &bad[..bad.len().min(20)]
    );
}
