//! `SoftEcc` over the raw MT29F2G08 simulator: the conformance suite, injected bit
//! flips corrected and counted up to the strength and reported uncorrectable past it,
//! erased sectors, and the spare layout it exposes.

use nand_hal::conformance::{self, Config};
use nand_hal::ecc::{SoftEcc, SoftEccError, Strength};
use nand_hal::sim::profile::MT29F2G08;
use nand_hal::sim::{FaultPlan, HeapStorage, SimNand};
use nand_hal::{BlockAddr, EccKind, Error, ErrorKind, NandFlash, PageAddr};

fn wrapped(strength: Strength, user: u8) -> SoftEcc<SimNand<HeapStorage>> {
    let mut plan = FaultPlan::seeded(11);
    plan.faults.factory_bad = 2;
    SoftEcc::new(SimNand::heap(MT29F2G08, plan), strength, user).unwrap()
}

#[test]
fn layout_exposed_through_capabilities() {
    let f = wrapped(Strength::T4, 4);
    let caps = f.capabilities();
    assert_eq!(caps.ecc.kind, EccKind::Host);
    assert_eq!(caps.ecc.strength, 4);
    assert_eq!(caps.ecc.scrub_threshold, 3);
    assert_eq!(caps.program_unit, 512);
    assert_eq!(caps.oob.protected_bytes(), 16);
    assert_eq!(caps.oob.free_bytes(), 26);
    let r = caps.oob.regions();
    assert_eq!((r[0].offset, r[0].len, r[0].ecc_step), (2, 4, Some(0)));
    assert_eq!((r[3].offset, r[3].len, r[3].ecc_step), (41, 4, Some(3)));
    assert_eq!((r[4].offset, r[4].len, r[4].ecc_step), (54, 10, None));
    let f8 = wrapped(Strength::T8, 0);
    assert_eq!(f8.capabilities().oob.free_bytes(), 2);
    assert_eq!(f8.capabilities().ecc.scrub_threshold, 6);
    // Too much asked of 64 spare bytes.
    let sim = SimNand::heap(MT29F2G08, FaultPlan::seeded(1));
    assert!(SoftEcc::new(sim, Strength::T8, 4).is_err());
}

#[test]
fn conformance_t4_and_t8() {
    for (strength, user) in [(Strength::T4, 4), (Strength::T8, 0)] {
        let mut f = wrapped(strength, user);
        let mut scratch = vec![0u8; 2 * 2112];
        let cfg = Config {
            rule_checks: false,
            mark_bad: true,
        };
        let report = conformance::run(&mut f, &cfg, &mut scratch)
            .unwrap_or_else(|e| panic!("{strength:?}: {e}"));
        assert!(report.checks > 10);
        assert_eq!(f.inner().counters().misuse, 0);
    }
}

/// Bits that differ between what was programmed and what the raw part returns.
fn raw_errors(f: &mut SoftEcc<SimNand<HeapStorage>>, page: PageAddr, want: &[u8]) -> u32 {
    let mut raw = vec![0u8; 2048];
    f.inner_mut().read(page, 0, &mut raw, &mut []).unwrap();
    raw.iter()
        .zip(want)
        .map(|(a, b)| (a ^ b).count_ones())
        .sum()
}

#[test]
fn injected_flips_corrected_up_to_strength() {
    for strength in [Strength::T4, Strength::T8] {
        let t = strength.bits() as u32;
        let mut f = wrapped(strength, if strength == Strength::T4 { 4 } else { 0 });
        let blk = BlockAddr(40);
        f.erase(blk).unwrap();
        let data: Vec<u8> = (0..2048u32).map(|i| (i * 29 + 1) as u8).collect();
        let mut outcomes = (0, 0);
        for n in 0..=(2 * t) {
            let page = PageAddr(blk.0 * 64 + n);
            f.program_page(page, &data, &[]).unwrap();
            let step = n % 4;
            f.inner_mut().inject_flips(page, step, n as u8);
            let actual = raw_errors(&mut f, page, &data);
            let mut back = vec![0u8; 2048];
            let r = f.read_page(page, &mut back, &mut []);
            if actual <= t {
                let r = r.unwrap_or_else(|e| panic!("{strength:?} {n} flips: {e:?}"));
                assert_eq!(r.corrected_bits as u32, actual, "{strength:?} {n} flips");
                assert_eq!(back, data);
                outcomes.0 += 1;
            } else {
                assert_eq!(
                    r,
                    Err(SoftEccError::Uncorrectable),
                    "{strength:?} {n} flips"
                );
                assert_eq!(r.unwrap_err().kind(), ErrorKind::Uncorrectable);
                outcomes.1 += 1;
            }
            // A read of another sector of the same page is unaffected.
            let other = ((step + 1) % 4) * 512;
            let r = f.read(page, other, &mut back[..512], &mut []).unwrap();
            assert_eq!(r.corrected_bits, 0);
            assert_eq!(&back[..512], &data[other as usize..other as usize + 512]);
        }
        assert!(outcomes.0 > t && outcomes.1 >= t - 1, "{outcomes:?}");
    }
}

#[test]
fn erased_and_partial_pages() {
    let mut f = wrapped(Strength::T4, 4);
    let blk = BlockAddr(50);
    f.erase(blk).unwrap();
    let page = PageAddr(blk.0 * 64);
    // Erased page with flips in sector 2: reads erased, flips counted.
    f.inner_mut().inject_flips(page, 2, 3);
    let mut back = vec![0u8; 2048];
    let mut oob = vec![0u8; 64];
    let r = f.read_page(page, &mut back, &mut oob).unwrap();
    assert_eq!(r.corrected_bits, 3);
    assert!(back.iter().all(|&b| b == 0xFF));
    // Partial programs: sector 1 with its protected bytes, then sector 3.
    let page = PageAddr(blk.0 * 64 + 1);
    let mut spare = [0xFFu8; 64];
    spare[15..19].copy_from_slice(b"meta");
    f.program(page, 512, &[0xA5; 512], &spare[..19]).unwrap();
    f.program(page, 1536, &[0x5A; 512], &[]).unwrap();
    let r = f.read_page(page, &mut back, &mut oob).unwrap();
    assert_eq!(r.corrected_bits, 0);
    assert!(back[..512].iter().all(|&b| b == 0xFF));
    assert!(back[512..1024].iter().all(|&b| b == 0xA5));
    assert!(back[1536..].iter().all(|&b| b == 0x5A));
    assert_eq!(&oob[15..19], b"meta");
    // Spare-only read of the protected bytes goes through ECC too.
    f.inner_mut().inject_flips(page, 1, 2);
    let r = f.read_oob(page, &mut oob[..20]).unwrap();
    assert_eq!(r.corrected_bits, 2);
    assert_eq!(&oob[15..19], b"meta");
    // Writing the ECC bytes is misuse; so is an unaligned program.
    let mut bad = [0xFFu8; 64];
    bad[10] = 0;
    assert_eq!(
        f.program(PageAddr(blk.0 * 64 + 2), 0, &[], &bad),
        Err(SoftEccError::Misuse)
    );
    assert_eq!(
        f.program(PageAddr(blk.0 * 64 + 2), 100, &[0; 512], &[]),
        Err(SoftEccError::Misuse)
    );
    assert_eq!(f.inner().counters().misuse, 0);
}
