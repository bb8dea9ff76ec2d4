//! Model-based test: random operation sequences against a std-collections oracle, with
//! a power cut at a random program/erase and a remount after it. After every step the
//! whole state read back must equal everything acknowledged (buffered writes included);
//! after a cut, each object must hold its durable state plus a prefix of its unflushed
//! writes (or the same with the interrupted operation applied).

use crate::common;
use common::lifecycle::Lifecycle;

use common::*;
use nand_hal::sim::{profile, CutKind, FaultPlan, SimNand, TornMode};
use proptest::prelude::*;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Create),
        6 => (0..4usize, 0..12_000u64, 0..9000usize, any::<u32>())
            .prop_map(|(slot, off, len, seed)| Op::Write { slot, off, len, seed }),
        // Small writes: buffered, and often several pages of one object at once.
        6 => (0..4usize, 0..12_000u64, 1..300usize, any::<u32>())
            .prop_map(|(slot, off, len, seed)| Op::Write { slot, off, len, seed }),
        2 => (0..4usize).prop_map(|slot| Op::Flush { slot }),
        2 => (0..4usize, 0..14_000u64).prop_map(|(slot, size)| Op::Truncate { slot, size }),
        1 => (0..4usize).prop_map(|slot| Op::Delete { slot }),
        1 => (0..4usize, any::<u8>()).prop_map(|(slot, v)| Op::SetAttr { slot, v }),
        2 => (0..4usize, 0..4usize, 0..8000u64, 0..6000usize, any::<u32>(), 0..9000u64)
            .prop_map(|(a, b, off, len, seed, size)| Op::Tx { a, b, off, len, seed, size }),
        1 => Just(Op::Sync),
        1 => (1..20u32).prop_map(|budget| Op::Gc { budget }),
        1 => Just(Op::CreateLog),
        5 => (0..3usize, 0..1969usize, any::<u32>())
            .prop_map(|(slot, len, seed)| Op::Append { slot, len, seed }),
        1 => (0..3usize, 0..6usize).prop_map(|(slot, n)| Op::Trim { slot, n }),
        // Small appends (one sector each, continuing pages) and batches under one commit.
        4 => (0..3usize, 0..200usize, any::<u32>())
            .prop_map(|(slot, len, seed)| Op::Append { slot, len, seed }),
        1 => (0..3usize, 1..4usize, 0..400usize, any::<u32>())
            .prop_map(|(slot, n, len, seed)| Op::Batch { slot, n, len, seed }),
    ]
}

fn kind() -> impl Strategy<Value = CutKind> {
    prop_oneof![
        Just(CutKind::Clean),
        Just(CutKind::Torn(TornMode::SomeBits)),
        Just(CutKind::Torn(TornMode::MostBits)),
        Just(CutKind::Torn(TornMode::Prefix)),
        Just(CutKind::Torn(TornMode::Random)),
    ]
}

fn run_case(
    profile: nand_hal::sim::Profile,
    ops: Vec<Op>,
    cut_at: u64,
    kind: CutKind,
    seed: u64,
) -> Result<(), TestCaseError> {
    let mut plan = FaultPlan::seeded(seed).with_cut(cut_at, kind);
    plan.faults.unstable_after_cut = true;
    let mut sim = SimNand::heap(profile, FaultPlan::seeded(seed));
    Fs::formatted(&mut sim, cfg()).unwrap().unmount().unwrap();
    sim.arm(plan);
    let mut model = Pending::new(Model::new());
    let mut fs = Fs::mounted(&mut sim).unwrap();
    let mut i = 0;
    while i < ops.len() {
        let op = &ops[i];
        i += 1;
        // The state before `op`, and `op` if it may have landed.
        let (lost_in, cut) = match run_op(&mut fs, &model.durable, op) {
            Ok(()) => {
                model = model.apply(op);
                // Reads can write too (index cache evictions): a cut may hit here.
                match observe(&mut fs) {
                    Ok(seen) => {
                        let full = model.full();
                        prop_assert!(
                            matches(&seen, &[&full]).is_ok(),
                            "after {op:?}: {:?}",
                            matches(&seen, &[&full]).err()
                        );
                        continue;
                    }
                    Err(e) if e == "power loss" => (None, true),
                    Err(e) => {
                        prop_assert!(false, "read after {op:?}: {e}");
                        unreachable!()
                    }
                }
            }
            Err(OpError::NoSpace) => continue,
            Err(OpError::PowerLoss) => (Some(op), true),
            Err(OpError::Other(e)) => {
                prop_assert!(false, "{op:?}: {e}");
                unreachable!()
            }
        };
        prop_assert!(cut);
        drop(fs);
        sim.power_on();
        sim.disarm();
        fs = Fs::mounted(&mut sim).unwrap();
        let seen = observe(&mut fs).unwrap();
        let after = lost_in.map(|op| model.apply(op));
        let before = model.allows(&seen, None);
        let landed = after.as_ref().map(|a| a.allows(&seen, None));
        // Whatever survived is now the durable state; nothing is pending.
        let base = match (&before, &landed) {
            (Ok(()), _) => &model,
            (_, Some(Ok(()))) => after.as_ref().unwrap(),
            _ => {
                prop_assert!(false, "after cut in {lost_in:?}: {before:?} / {landed:?}");
                unreachable!()
            }
        };
        let mut durable = base.durable.clone();
        durable.objs = seen.objs.clone();
        model = Pending::new(durable);
    }
    drop(fs);
    prop_assert_eq!(sim.counters().misuse, 0);
    sim.disarm();
    let mut fs = Fs::mounted(&mut sim).unwrap();
    let seen = observe(&mut fs).unwrap();
    // The final drop is a crash too: unflushed writes may be lost, as a suffix.
    prop_assert!(
        model.allows(&seen, None).is_ok(),
        "{:?}",
        model.allows(&seen, None)
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn ops_with_power_cuts(
        ops in proptest::collection::vec(op(), 1..40),
        cut_at in 1..400u64,
        kind in kind(),
        seed in any::<u64>(),
    ) {
        run_case(profile::TINY, ops, cut_at, kind, seed)?;
    }

    /// The same on a part without ECC (in-band backpointers, continued log pages).
    #[test]
    fn ops_with_power_cuts_raw_part(
        ops in proptest::collection::vec(op(), 1..30),
        cut_at in 1..300u64,
        kind in kind(),
        seed in any::<u64>(),
    ) {
        run_case(tiny_raw(), ops, cut_at, kind, seed)?;
    }
}
