//! Model-based test of the simulator: random erase / program / read sequences against a
//! plain model of a NAND array and its rules. Every operation the model allows must succeed
//! and read back exactly; every operation it forbids must be refused as `Misuse` and change
//! nothing.

use nand_hal::sim::profile::{MT29F2G08, TINY};
use nand_hal::sim::{FaultPlan, Profile, SimNand};
use nand_hal::{BlockAddr, ErrorKind, NandFlash};
use proptest::prelude::*;

const BLOCKS: u32 = 3;

#[derive(Clone, Debug)]
enum Op {
    Erase {
        block: u32,
    },
    /// Program the program units in `units` (bit mask) of a page with `fill`.
    Program {
        block: u32,
        page: u32,
        units: u8,
        fill: u8,
    },
    Read {
        block: u32,
        page: u32,
    },
}

fn op(pages: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (1..=BLOCKS).prop_map(|block| Op::Erase { block }),
        4 => (1..=BLOCKS, 0..pages, 1u8..16, any::<u8>())
            .prop_map(|(block, page, units, fill)| Op::Program { block, page, units, fill }),
        3 => (1..=BLOCKS, 0..pages).prop_map(|(block, page)| Op::Read { block, page }),
    ]
}

struct Model {
    data: Vec<Vec<u8>>,
    programs: Vec<u8>,
    written: Vec<u8>,
    next_page: Vec<u32>,
}

fn check(profile: Profile, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut sim = SimNand::heap(profile, FaultPlan::seeded(1));
    let g = profile.geometry;
    let caps = profile.capabilities;
    let ecc = caps.ecc.kind != nand_hal::EccKind::None;
    let unit = caps.program_unit as usize;
    let ppb = g.pages_per_block();
    let n = ((BLOCKS + 1) * ppb) as usize;
    let mut m = Model {
        data: vec![vec![0xFF; g.page_size() as usize]; n],
        programs: vec![0; n],
        written: vec![0; n],
        next_page: vec![0; BLOCKS as usize + 1],
    };
    let mut buf = vec![0u8; g.page_size() as usize];
    let mut refused = 0;
    for op in ops {
        match *op {
            Op::Erase { block } => {
                sim.erase(BlockAddr(block)).unwrap();
                for p in block * ppb..(block + 1) * ppb {
                    m.data[p as usize].fill(0xFF);
                    m.programs[p as usize] = 0;
                    m.written[p as usize] = 0;
                }
                m.next_page[block as usize] = 0;
            }
            Op::Program {
                block,
                page,
                units,
                fill,
            } => {
                let p = (block * ppb + page) as usize;
                let units = units & 0x0F;
                let lo = units.trailing_zeros() as usize;
                let hi = 8 - units.leading_zeros() as usize;
                // One program covers a contiguous run of units: lo..hi.
                let span: u8 = ((1u16 << hi) - (1u16 << lo)) as u8;
                let bytes = vec![fill; (hi - lo) * unit];
                let r = sim.program(
                    g.page(BlockAddr(block), page),
                    (lo * unit) as u32,
                    &bytes,
                    &[],
                );
                let writes = if fill == 0xFF { 0 } else { span };
                let sets_bits =
                    (lo * unit..hi * unit).any(|i| fill != 0xFF && fill & !m.data[p][i] != 0);
                let allowed = m.programs[p] < caps.nop
                    && page + 1 >= m.next_page[block as usize]
                    && !(ecc && writes & m.written[p] != 0)
                    && !sets_bits;
                if allowed {
                    prop_assert!(r.is_ok(), "{op:?} refused: {r:?}");
                    for i in lo * unit..hi * unit {
                        m.data[p][i] &= fill;
                    }
                    m.programs[p] += 1;
                    m.written[p] |= writes;
                    m.next_page[block as usize] = m.next_page[block as usize].max(page + 1);
                } else {
                    let e = r.expect_err("forbidden program accepted");
                    prop_assert_eq!(e.kind(), ErrorKind::Misuse);
                    refused += 1;
                }
            }
            Op::Read { block, page } => {
                sim.read_page(g.page(BlockAddr(block), page), &mut buf, &mut [])
                    .unwrap();
                prop_assert_eq!(&buf, &m.data[(block * ppb + page) as usize]);
            }
        }
    }
    prop_assert_eq!(sim.counters().misuse, refused);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn ecc_part_matches_the_model(ops in proptest::collection::vec(op(16), 1..120)) {
        check(TINY, &ops)?;
    }

    #[test]
    fn raw_part_matches_the_model(ops in proptest::collection::vec(op(8), 1..120)) {
        check(MT29F2G08.with_blocks_per_die(8), &ops)?;
    }
}
