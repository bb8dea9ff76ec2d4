//! Model-based test (proptest): random sequences of valid file-layer operations, with
//! clean remounts and crashes (the volume dropped without unmount) between them, against
//! a `BTreeMap` model of the tree. Every operation here is durable on return, so after a
//! crash the volume must equal the model exactly; listing, reading and metadata must
//! agree with it at every check.

use crate::model;

use model::{apply, effects, observe, valid, Node, Op, Store, Tree, Vol};
use nand_hal::sim::{profile, FaultPlan, HeapStorage, SimNand};
use oftl::{Config, Greedy};

/// The store configuration of these runs.
const CONFIG: Config = Config::new().window_blocks(6).format_id(9);
use proptest::prelude::*;
use stagefs_core::{Fs, Kind};

const PATHS: [&str; 12] = [
    "/a", "/b", "/a/c", "/f", "/g", "/a/f", "/a/g", "/b/f", "/a/c/f", "/b/c", "/h", "/a/h",
];

#[derive(Clone, Debug)]
enum Step {
    Op(Op),
    Remount,
    Crash,
}

fn step() -> impl Strategy<Value = Step> {
    let p = || (0..PATHS.len()).prop_map(|i| PATHS[i]);
    prop_oneof![
        3 => p().prop_map(|x| Step::Op(Op::Mkdir(x))),
        1 => p().prop_map(|x| Step::Op(Op::Rmdir(x))),
        5 => (p(), 0usize..3000, any::<u8>()).prop_map(|(x, l, s)| Step::Op(Op::Put(x, l, s))),
        4 => (p(), 1usize..700, any::<u8>()).prop_map(|(x, l, s)| Step::Op(Op::Append(x, l, s))),
        1 => (p(), 0usize..4000).prop_map(|(x, l)| Step::Op(Op::Truncate(x, l))),
        1 => p().prop_map(|x| Step::Op(Op::Remove(x))),
        3 => (p(), p()).prop_map(|(a, b)| Step::Op(Op::Rename(a, b))),
        1 => Just(Step::Op(Op::Sync)),
        1 => Just(Step::Remount),
        1 => Just(Step::Crash),
    ]
}

fn check(fs: &mut Vol<'_>, want: &Tree) -> Result<(), TestCaseError> {
    let seen = observe(fs).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
    prop_assert_eq!(&seen, want);
    for (p, n) in want {
        let m = fs
            .metadata(p)
            .map_err(|e| TestCaseError::fail(format!("{p}: {e:?}")))?;
        match n {
            Node::Dir => prop_assert_eq!(m.kind, Kind::Dir),
            Node::File(d) => {
                prop_assert_eq!(m.kind, Kind::File);
                prop_assert_eq!(m.size, d.len() as u64);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_volume_follows_the_model(steps in prop::collection::vec(step(), 1..120)) {
        let mut sim: SimNand<HeapStorage> = SimNand::heap(profile::TINY, FaultPlan::seeded(11));
        {
            let mut fs: Vol<'_> = Fs::new(Store::new(&mut sim, CONFIG, Greedy::DEFAULT));
            fs.format().unwrap();
            fs.unmount().unwrap();
        }
        let mut want = Tree::new();
        let mut fs: Vol<'_> = Fs::new(Store::new(&mut sim, CONFIG, Greedy::DEFAULT));
        fs.mount().unwrap();
        for s in steps {
            match s {
                Step::Op(op) => {
                    if !valid(&want, &op) {
                        continue;
                    }
                    let r = apply(&mut fs, &op);
                    prop_assert!(r.is_ok(), "{:?}: {:?}", op, r);
                    want = effects(&want, &op).pop().unwrap();
                }
                Step::Remount => {
                    fs.unmount().unwrap();
                    fs.mount().unwrap();
                    check(&mut fs, &want)?;
                }
                Step::Crash => {
                    // Forget the volume's RAM (open handles, buffers) as a reset would.
                    drop(fs);
                    fs = Fs::new(Store::new(&mut sim, CONFIG, Greedy::DEFAULT));
                    fs.mount().unwrap();
                    check(&mut fs, &want)?;
                }
            }
        }
        check(&mut fs, &want)?;
    }
}
