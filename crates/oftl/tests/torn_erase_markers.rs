//! A cut erase leaves random bits in its block (the fault model's torn erase, F3), the
//! bad-block marker bytes among them. A block the store erased before (checkpoint
//! blocks, and window or free blocks with an erase count) counts as bad only on a
//! marker that reads as written (`NandFlash::is_marked`): an independent review (stop
//! 47, `stagefs-core/tests/review_s47.rs`) found a healthy TINY part (four checkpoint
//! blocks) that had lost two of them to cut erases turn read-only for good after one
//! more torn program.
//!
//! Each sweep cuts programs and erases of a run of checkpoints (a page written and a
//! sync each, so the checkpoint blocks rotate and window blocks are taken) with an
//! indeterminate torn erase or program, mounts, runs more checkpoints, and checks that
//! no block was taken for bad and the store stays writable.

use crate::common;
use common::{bytes, cfg, Fs, Sim};

use nand_hal::sim::{profile, CutKind, FaultPlan, PowerCut, SimNand, TornMode};
use nand_hal::ErrorKind;
use oftl::{BlockState, Greedy, Health, ObjKind, ObjectId, Oftl, WriteError};

fn fs(sim: &mut Sim) -> Fs<'_> {
    Oftl::new(sim, cfg(), Greedy::DEFAULT)
}

/// Blocks in state `state` after a clean mount.
fn count(sim: &mut Sim, state: BlockState) -> usize {
    let mut f = fs(sim);
    f.mount().unwrap();
    let n = f.blocks().iter().filter(|b| b.state() == state).count();
    f.unmount().unwrap();
    n
}

/// `n` checkpoints: a page written to object `id` and a sync each.
fn checkpoints(
    f: &mut Fs<'_>,
    id: ObjectId,
    n: u32,
) -> Result<(), WriteError<nand_hal::sim::SimError>> {
    for i in 0..n {
        f.write(id, u64::from(i % 8) * 2048, &bytes(i, 2048))?;
        f.sync()?;
    }
    Ok(())
}

/// Cuts operation `at_op` of a mount and `work` checkpoints on a copy of `base` with a
/// torn erase or program, mounts again, runs 40 checkpoints, and checks that as many
/// blocks are in `state` as on `base`. `false` when the run ended before the cut.
fn cut_and_check(base: &Sim, id: ObjectId, at_op: u64, work: u32, state: BlockState) -> bool {
    let want = count(&mut base.clone(), state);
    let mut sim = base.clone();
    sim.arm(FaultPlan {
        cut: Some(PowerCut {
            at_op,
            kind: CutKind::Torn(TornMode::Random),
        }),
        ..FaultPlan::seeded(at_op)
    });
    let r = {
        let mut f = fs(&mut sim);
        f.mount().map(|()| checkpoints(&mut f, id, work))
    };
    match r {
        Ok(Ok(())) => return false,
        Ok(Err(WriteError::Flash(e))) if e.kind() == ErrorKind::PowerLoss => {}
        Err(oftl::MountError::Flash(e)) if e.kind() == ErrorKind::PowerLoss => {}
        other => panic!("op {at_op}: {other:?}"),
    }
    sim.cut_power();
    sim.power_on();
    sim.disarm();
    {
        let mut f = fs(&mut sim);
        f.mount()
            .unwrap_or_else(|e| panic!("op {at_op}: mount: {e:?}"));
        checkpoints(&mut f, id, 40).unwrap_or_else(|e| panic!("op {at_op}: {e:?}"));
        assert_eq!(f.health(), Health::Writable, "op {at_op}");
        f.unmount().unwrap();
    }
    assert_eq!(
        count(&mut sim, state),
        want,
        "op {at_op}: {state:?} blocks changed"
    );
    true
}

/// A formatted TINY part with one object, and that object.
fn formatted(seed: u64) -> (Sim, ObjectId) {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(seed));
    let id = {
        let mut f = fs(&mut sim);
        f.format().unwrap();
        let id = f.create(ObjKind::Object).unwrap();
        f.sync().unwrap();
        f.unmount().unwrap();
        id
    };
    (sim, id)
}

/// Every program and erase of 40 checkpoints cut: every reserved block (superblocks
/// and the four checkpoint blocks) stays good. (Before stop 47 a checkpoint block was
/// retired at the 32nd cut.)
#[test]
fn cut_erases_of_checkpoint_blocks_do_not_retire_them() {
    let (base, id) = formatted(47);
    let mut cuts = 0;
    for at_op in 1..400 {
        if !cut_and_check(&base, id, at_op, 40, BlockState::Reserved) {
            break;
        }
        cuts += 1;
    }
    assert!(cuts > 100, "{cuts} cuts");
    println!("{cuts} cuts");
}

/// The same for window and free blocks, once the store has erased every block (a block
/// it never erased may carry a factory marker of any value, so there any marker bits
/// still count): every third operation of 200 checkpoints cut, no block retired.
#[test]
fn cut_erases_of_blocks_the_store_erased_before_do_not_retire_them() {
    let (mut base, id) = formatted(48);
    {
        let mut f = fs(&mut base);
        f.mount().unwrap();
        let mut rounds = 0;
        while f.blocks().iter().any(|b| {
            !matches!(b.state(), BlockState::Bad | BlockState::Reserved) && b.erases() == 0
        }) {
            checkpoints(&mut f, id, 8).unwrap();
            rounds += 1;
            assert!(rounds < 2_000, "blocks never erased");
        }
        f.unmount().unwrap();
    }
    let mut cuts = 0;
    for at_op in (1..2_000).step_by(3) {
        if !cut_and_check(&base, id, at_op, 200, BlockState::Bad) {
            break;
        }
        cuts += 1;
    }
    assert!(cuts > 300, "{cuts} cuts");
    println!("{cuts} cuts");
}
