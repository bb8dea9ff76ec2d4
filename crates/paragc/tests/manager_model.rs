//! Model-based test of the block manager: random sequences of allocations, page
//! invalidations, collections, erases, bad blocks and static wear leveling, checked
//! after every step against a plain model of per-block counts and the manager's stated
//! invariants.

use nand_hal::{BlockAddr, Geometry};
use paragc::{
    AllocError, BlockManager, BlockPhase, Class, GcMode, GreedyCostBenefit, Leveling,
    ManagerConfig, Reason,
};
use proptest::prelude::*;

/// 2 dies x 12 blocks x 4 pages.
const GEO: Geometry = Geometry::new(2048, 64, 4, 12, 1, 2, 1);
type M = BlockManager<24, 2, GreedyCostBenefit, Leveling<1>>;

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        unit: u32,
        class: usize,
    },
    AllocGc {
        unit: u32,
        class: usize,
    },
    /// Invalidate the n-th valid page of the model (mod their number).
    Invalidate {
        n: usize,
    },
    /// Collect a victim of `unit`: move its valid pages, erase it.
    Collect {
        unit: u32,
        background: bool,
    },
    StaticWear,
    Bad {
        block: u32,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..2u32, 0..5usize).prop_map(|(unit, class)| Op::Alloc { unit, class }),
        1 => (0..2u32, 0..5usize).prop_map(|(unit, class)| Op::AllocGc { unit, class }),
        4 => any::<usize>().prop_map(|n| Op::Invalidate { n }),
        2 => (0..2u32, any::<bool>()).prop_map(|(unit, background)| Op::Collect { unit, background }),
        1 => Just(Op::StaticWear),
        1 => (0..24u32).prop_map(|block| Op::Bad { block }),
    ]
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Model {
    written: u16,
    valid: u16,
    erases: u32,
    bad: bool,
}

fn check(m: &M, model: &[Model; 24]) {
    for u in 0..2 {
        let first = GEO.first_block_of_die(u).0;
        let mut free = 0;
        for b in first..first + 12 {
            let info = m.block(BlockAddr(b)).unwrap();
            let mm = model[b as usize];
            assert_eq!(info.erase_count(), mm.erases, "block {b}");
            assert_eq!(info.state() == BlockPhase::Bad, mm.bad, "block {b}");
            if !mm.bad {
                assert_eq!(
                    (info.written(), info.valid()),
                    (mm.written, mm.valid),
                    "block {b}"
                );
            }
            assert!(info.valid() <= info.written() && info.written() <= 4);
            if info.state() == BlockPhase::Free {
                free += 1;
                assert_eq!(info.written(), 0);
            }
            if info.state() == BlockPhase::Open {
                assert_eq!(m.head(u, info.class()), Some(BlockAddr(b)));
            }
        }
        assert_eq!(m.free_blocks(u), free);
        for c in Class::ALL {
            if let Some(h) = m.head(u, c) {
                let i = m.block(h).unwrap();
                assert_eq!((i.state(), i.class()), (BlockPhase::Open, c));
            }
        }
    }
}

fn alloc(
    m: &mut M,
    model: &mut [Model; 24],
    unit: u32,
    class: Class,
    gc: bool,
) -> Result<(), AllocError> {
    let a = if gc {
        m.allocate_for_gc(unit, class)
    } else {
        m.allocate(unit, class)
    }?;
    let mm = &mut model[a.block.0 as usize];
    assert_eq!(
        GEO.page_in_block(a.page),
        mm.written as u32,
        "pages in order"
    );
    assert_eq!(GEO.die_of(a.block).index as u32, unit);
    assert_eq!(a.opened, mm.written == 0);
    mm.written += 1;
    mm.valid += 1;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn manager_matches_model(ops in proptest::collection::vec(op(), 1..300)) {
        let mut m: M = BlockManager::with_policies(GEO, ManagerConfig { reserve_blocks: 1, background_blocks: 3 }, GreedyCostBenefit, Leveling).unwrap();
        let mut model = [Model::default(); 24];
        for op in ops {
            match op {
                Op::Alloc { unit, class } => {
                    let r = alloc(&mut m, &mut model, unit, Class::ALL[class], false);
                    if let Err(e) = r {
                        prop_assert!(matches!(e, AllocError::NeedsGc | AllocError::NoFreeBlock));
                        prop_assert!(!m.can_allocate(unit, Class::ALL[class]));
                    }
                }
                Op::AllocGc { unit, class } => {
                    let r = alloc(&mut m, &mut model, unit, Class::ALL[class], true);
                    if let Err(e) = r {
                        prop_assert_eq!(e, AllocError::NoFreeBlock);
                        prop_assert_eq!(m.free_blocks(unit), 0);
                    }
                }
                Op::Invalidate { n } => {
                    let live: Vec<usize> = (0..24).filter(|&b| model[b].valid > 0 && !model[b].bad).collect();
                    if !live.is_empty() {
                        let b = live[n % live.len()];
                        m.notice_page_invalidated(BlockAddr(b as u32)).unwrap();
                        model[b].valid -= 1;
                    }
                }
                Op::Collect { unit, background } => {
                    let mode = if background { GcMode::Background } else { GcMode::Foreground };
                    if let Some(v) = m.choose_victim(unit, mode) {
                        prop_assert_eq!(v.reason, Reason::Gc(mode));
                        prop_assert!(v.valid < v.written, "a victim always reclaims a page");
                        let vb = v.block.0 as usize;
                        for _ in 0..v.valid {
                            if alloc(&mut m, &mut model, unit, v.relocation_class(), true).is_err() {
                                break;
                            }
                            m.notice_page_invalidated(v.block).unwrap();
                            model[vb].valid -= 1;
                        }
                        if model[vb].valid == 0 {
                            m.notice_block_erased(v.block).unwrap();
                            model[vb] = Model { erases: model[vb].erases + 1, ..Model::default() };
                        }
                    }
                }
                Op::StaticWear => {
                    if let Some(v) = m.static_wear_victim() {
                        prop_assert_eq!(v.relocation_class(), Class::Cold);
                        let (min, max) = m.erase_spread();
                        prop_assert!(max - min > 1);
                        // Left collecting, it is never offered again.
                        prop_assert!(
                            m.choose_victim(v.unit, GcMode::Foreground).map(|x| x.block)
                                != Some(v.block)
                        );
                    }
                }
                Op::Bad { block } => {
                    m.notice_block_bad(BlockAddr(block)).unwrap();
                    model[block as usize].bad = true;
                    model[block as usize].valid = 0;
                }
            }
            check(&m, &model);
        }
    }
}
