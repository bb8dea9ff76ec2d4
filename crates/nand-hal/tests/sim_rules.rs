//! The simulator enforces the NAND rules: each violation is a `Misuse` error naming the
//! rule, counted, and leaves the cells alone.

use nand_hal::sim::profile::{MT29F2G08, TINY, W25N01GV};
use nand_hal::sim::{FaultPlan, Misuse, SimError, SimNand};
use nand_hal::{BlockAddr, ErrorKind, NandFlash, PageAddr, PipelinedNand};

fn misuse(r: Result<impl core::fmt::Debug, SimError>) -> Misuse {
    let e = r.expect_err("expected a rule violation");
    assert_eq!(e.kind(), ErrorKind::Misuse);
    e.misuse().expect("misuse names the rule")
}

fn sim() -> SimNand<nand_hal::sim::HeapStorage> {
    SimNand::heap(TINY, FaultPlan::seeded(1))
}

#[test]
fn programs_only_clear_bits() {
    // The raw part has no ECC, so a page may be programmed again within NOP.
    let mut s = SimNand::heap(MT29F2G08, FaultPlan::seeded(1));
    let p = PageAddr(64);
    s.program(p, 0, &[0xF0; 512], &[]).unwrap();
    s.program(p, 0, &[0x30; 512], &[]).unwrap(); // clears more bits: fine
    assert_eq!(misuse(s.program(p, 0, &[0x0F; 512], &[])), Misuse::SetsBits);
    let mut d = [0u8; 512];
    s.read(p, 0, &mut d, &mut []).unwrap();
    assert_eq!(d, [0x30; 512]);
    assert_eq!(s.counters().misuse, 1);
}

#[test]
fn nop_limit() {
    let mut s = SimNand::heap(MT29F2G08, FaultPlan::seeded(1));
    let p = PageAddr(64);
    for i in 0..4u32 {
        s.program(p, i * 512, &[0x00; 512], &[]).unwrap();
    }
    assert_eq!(
        misuse(s.program(p, 0, &[], &[0xFF, 0xFF, 0x00])),
        Misuse::NopExceeded
    );
}

#[test]
fn pages_in_order_and_skipping_is_allowed() {
    let mut s = sim();
    let g = s.geometry();
    let b = BlockAddr(2);
    s.program_page(g.page(b, 0), &[0; 2048], &[]).unwrap();
    s.program_page(g.page(b, 5), &[0; 2048], &[]).unwrap();
    assert_eq!(
        misuse(s.program_page(g.page(b, 3), &[0; 2048], &[])),
        Misuse::OutOfOrder
    );
    // Partial programs of the highest page are still allowed... within the ECC rule.
    assert_eq!(
        misuse(s.program(g.page(b, 5), 0, &[0; 512], &[])),
        Misuse::EccStepRewritten
    );
    s.erase(b).unwrap();
    s.program_page(g.page(b, 3), &[0; 2048], &[]).unwrap();
}

#[test]
fn ecc_steps_are_written_once_and_protected_spare_belongs_to_its_step() {
    let mut s = SimNand::heap(W25N01GV, FaultPlan::seeded(1));
    let p = PageAddr(128);
    // Sector 1 with its protected spare bytes (20..24).
    let mut oob = [0xFF; 24];
    oob[20..24].copy_from_slice(&[1, 2, 3, 4]);
    s.program(p, 512, &[0x42; 512], &oob).unwrap();
    // Unprotected spare bytes (18..20) may still be programmed.
    let mut oob2 = [0xFF; 20];
    oob2[18] = 0x00;
    s.program(p, 0, &[], &oob2).unwrap();
    // Protected spare of an already written step may not.
    let mut oob3 = [0xFF; 24];
    oob3[22] = 0x00;
    assert_eq!(
        misuse(s.program(p, 0, &[], &oob3)),
        Misuse::EccStepRewritten
    );
    // Another sector is fine.
    s.program(p, 1536, &[0x24; 512], &[]).unwrap();
}

#[test]
fn alignment_bounds_and_marker() {
    let mut s = sim();
    let g = s.geometry();
    assert_eq!(
        misuse(s.program(PageAddr(40), 100, &[0; 512], &[])),
        Misuse::Unaligned
    );
    assert_eq!(
        misuse(s.program(PageAddr(40), 0, &[0; 500], &[])),
        Misuse::Unaligned
    );
    assert_eq!(
        misuse(s.program(PageAddr(40), 0, &[], &[])),
        Misuse::Unaligned
    );
    let e = s
        .program(PageAddr(g.pages()), 0, &[0; 512], &[])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfBounds);
    let e = s.program(PageAddr(40), 1536, &[0; 1024], &[]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfBounds);
    let e = s
        .read(PageAddr(40), 0, &mut [0; 16], &mut [0; 65])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfBounds);
    // The bad-block marker is only written by mark_bad.
    let first = g.page(BlockAddr(4), 0);
    assert_eq!(
        misuse(s.program(first, 0, &[], &[0x00, 0xFF])),
        Misuse::MarkerWrite
    );
    assert_eq!(s.counters().misuse, 4);
}

#[test]
fn bad_blocks_refuse_io_but_answer_is_bad() {
    let mut s = sim();
    let g = s.geometry();
    let b = BlockAddr(9);
    s.program_page(g.page(b, 0), &[0x11; 2048], &[]).unwrap();
    s.mark_bad(b).unwrap();
    assert!(s.is_bad(b).unwrap());
    assert!(!s.is_bad(BlockAddr(10)).unwrap());
    assert_eq!(misuse(s.erase(b)), Misuse::BadBlockAccess);
    assert_eq!(
        misuse(s.read_page(g.page(b, 0), &mut [0; 2048], &mut [])),
        Misuse::BadBlockAccess
    );
}

#[test]
fn pipelined_ops_need_a_wait() {
    let mut s = sim();
    let g = s.geometry();
    s.start_program(g.page(BlockAddr(3), 0), 0, &[0; 2048], &[])
        .unwrap();
    assert!(s.die_busy(0));
    assert_eq!(misuse(s.start_erase(BlockAddr(4))), Misuse::DieBusy);
    s.wait_die(0).unwrap();
    assert!(!s.die_busy(0));
    s.start_erase(BlockAddr(4)).unwrap();
    s.wait_all().unwrap();
}

#[test]
fn no_power_no_io_until_power_on() {
    let mut s = sim();
    s.cut_power();
    assert!(!s.is_powered());
    let e = s.erase(BlockAddr(1)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PowerLoss);
    let e = s.read_oob(PageAddr(0), &mut [0; 4]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PowerLoss);
    s.power_on();
    s.erase(BlockAddr(1)).unwrap();
    assert_eq!(s.counters().power_cuts, 1);
    assert_eq!(s.counters().misuse, 0);
}

#[test]
fn counters_diff_and_wear() {
    let mut s = sim();
    let g = s.geometry();
    let before = s.counters();
    for b in 1..5 {
        s.erase(BlockAddr(b)).unwrap();
        s.program_page(g.page(BlockAddr(b), 0), &[0; 2048], &[0xFF; 8])
            .unwrap();
        s.program(g.page(BlockAddr(b), 1), 0, &[0; 512], &[])
            .unwrap();
        s.read_page(g.page(BlockAddr(b), 0), &mut [0; 2048], &mut [0; 64])
            .unwrap();
    }
    let d = s.counters() - before;
    assert_eq!(
        (d.erases, d.programs, d.partial_programs, d.reads),
        (4, 8, 4, 4)
    );
    assert_eq!(d.bytes_programmed, 4 * (2048 + 512));
    assert_eq!(d.oob_bytes_programmed, 4 * 8);
    assert_eq!(d.bytes_read, 4 * 2048);
    assert_eq!(d.time_ns, s.now_ns());
    let w = s.wear_stats();
    assert_eq!((w.min, w.max), (0, 1));
    assert_eq!(s.block_state(BlockAddr(2)).erase_count, 1);
    assert_eq!(s.block_state(BlockAddr(2)).reads_since_erase, 1);
}

#[test]
fn image_round_trips_through_a_file() {
    let mut s = SimNand::heap(TINY, FaultPlan::seeded(9));
    let g = s.geometry();
    s.erase(BlockAddr(5)).unwrap();
    s.program_page(g.page(BlockAddr(5), 2), &[0x77; 2048], &[0xFF, 0xFF, 0x12])
        .unwrap();
    s.inject_flips(g.page(BlockAddr(5), 2), 1, 1);
    let dir = std::env::temp_dir().join(format!("nandsim-{}.nandimg", std::process::id()));
    s.storage().save_to_file(&dir).unwrap();
    let storage = nand_hal::sim::HeapStorage::load_from_file(&dir).unwrap();
    std::fs::remove_file(&dir).unwrap();
    let mut t = SimNand::attach(TINY, storage, FaultPlan::seeded(9)).unwrap();
    let mut d = [0u8; 2048];
    let mut o = [0u8; 3];
    let r = t
        .read_page(g.page(BlockAddr(5), 2), &mut d, &mut o)
        .unwrap();
    assert_eq!(
        (d, o, r.corrected_bits),
        ([0x77; 2048], [0xFF, 0xFF, 0x12], 1)
    );
    assert_eq!(t.block_state(BlockAddr(5)).erase_count, 1);
    // Garbage is refused cleanly.
    assert!(nand_hal::sim::HeapStorage::load(&mut &b"NANDSIM\0garbage"[..]).is_err());
    assert!(nand_hal::sim::HeapStorage::load(&mut &b"not an image at all"[..]).is_err());
}
