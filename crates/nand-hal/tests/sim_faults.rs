//! Each fault class of the simulator takes effect, and the same replay token replays the
//! same outcome.

use nand_hal::sim::profile::{GD5F1GQ4, MT29F2G08, TINY, W25N01GV};
use nand_hal::sim::{CutKind, FaultConfig, FaultPlan, HeapStorage, SimNand, TornMode};
use nand_hal::{BlockAddr, ErrorKind, NandFlash, PageAddr, PipelinedNand};

type Sim = SimNand<HeapStorage>;

fn faulty(profile: nand_hal::sim::Profile, faults: FaultConfig) -> Sim {
    SimNand::heap(profile, FaultPlan::seeded(42).with_faults(faults))
}

fn pattern(seed: u8) -> Vec<u8> {
    (0..2048u32)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn read(s: &mut Sim, p: PageAddr) -> Result<(Vec<u8>, u8), ErrorKind> {
    let mut d = vec![0; 2048];
    s.read_page(p, &mut d, &mut [])
        .map(|r| (d, r.corrected_bits))
        .map_err(|e| e.kind())
}

// ---- F1 / F2 / F3 / F4: power cuts ------------------------------------------------------

#[test]
fn f1_clean_cut_drops_the_operation_and_the_power() {
    let mut s = SimNand::heap(TINY, FaultPlan::seeded(1).with_cut(2, CutKind::Clean));
    let g = s.geometry();
    s.program_page(g.page(BlockAddr(1), 0), &pattern(1), &[])
        .unwrap();
    let e = s
        .program_page(g.page(BlockAddr(1), 1), &pattern(2), &[])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PowerLoss);
    assert_eq!(
        s.erase(BlockAddr(2)).unwrap_err().kind(),
        ErrorKind::PowerLoss
    );
    s.power_on();
    assert_eq!(read(&mut s, g.page(BlockAddr(1), 0)), Ok((pattern(1), 0)));
    assert_eq!(
        read(&mut s, g.page(BlockAddr(1), 1)),
        Ok((vec![0xFF; 2048], 0))
    );
}

fn torn_program(profile: nand_hal::sim::Profile, mode: TornMode, seed: u64) -> (Sim, PageAddr) {
    let plan = FaultPlan::seeded(seed)
        .with_cut(1, CutKind::Torn(mode))
        .with_faults(FaultConfig {
            unstable_after_cut: true,
            ..Default::default()
        });
    let mut s = SimNand::heap(profile, plan);
    let p = s.geometry().page(BlockAddr(3), 0);
    assert_eq!(
        s.program_page(p, &pattern(9), &[]).unwrap_err().kind(),
        ErrorKind::PowerLoss
    );
    s.power_on();
    (s, p)
}

#[test]
fn f2_torn_programs_on_an_ecc_part() {
    // Most bits landed: ECC corrects the last one -- the page looks fine...
    let (mut s, p) = torn_program(W25N01GV, TornMode::MostBits, 3);
    assert_eq!(read(&mut s, p), Ok((pattern(9), 1)));
    // ...but it was interrupted, so it is unstable (F4) and soon fails.
    let outcomes: Vec<_> = (0..12).map(|_| read(&mut s, p).map(|(_, c)| c)).collect();
    assert!(
        outcomes.contains(&Err(ErrorKind::Uncorrectable)),
        "{outcomes:?}"
    );
    // One to three bits landed: on-die ECC decodes a step holding no more landed bits
    // than its strength as erased and reports them corrected (or, past the strength,
    // uncorrectable). Either way the page was programmed and can never be programmed
    // again before an erase.
    let mut near_erased = 0;
    for seed in 0..16 {
        let (mut s, p) = torn_program(W25N01GV, TornMode::SomeBits, seed);
        match read(&mut s, p) {
            Ok((d, c)) => {
                assert!(
                    c >= 1,
                    "seed {seed}: a torn page read with no corrected bits"
                );
                if d.iter().all(|&b| b == 0xFF) {
                    near_erased += 1;
                }
            }
            Err(k) => assert_eq!(k, ErrorKind::Uncorrectable, "seed {seed}"),
        }
        assert_eq!(
            s.program_page(p, &pattern(9), &[]).unwrap_err().kind(),
            ErrorKind::Misuse
        );
    }
    assert!(near_erased > 0, "no torn page decoded as erased");
    // On an 8-bit part three landed bits always decode as erased.
    let (mut s, p) = torn_program(GD5F1GQ4, TornMode::SomeBits, 3);
    let (d, c) = read(&mut s, p).unwrap();
    assert!(d.iter().all(|&b| b == 0xFF) && (1..=3).contains(&c), "{c}");
    // A prefix landed or bits landed at random: the ECC step is broken.
    for mode in [TornMode::Prefix, TornMode::Random] {
        let (mut s, p) = torn_program(W25N01GV, mode, 3);
        assert_eq!(read(&mut s, p), Err(ErrorKind::Uncorrectable), "{mode:?}");
    }
}

#[test]
fn f2_torn_programs_on_a_raw_part_show_mixed_data() {
    for (mode, seed) in [
        (TornMode::Prefix, 4),
        (TornMode::Random, 5),
        (TornMode::MostBits, 6),
    ] {
        let (mut s, p) = torn_program(MT29F2G08, mode, seed);
        let (d, c) = read(&mut s, p).unwrap();
        assert_eq!(c, 0);
        assert_ne!(d, pattern(9), "{mode:?}");
        assert_ne!(d, vec![0xFF; 2048], "{mode:?}");
        // Whatever landed is a subset of the programmed zero bits.
        assert!(
            d.iter()
                .zip(pattern(9))
                .all(|(&got, want)| got & want == want),
            "{mode:?}"
        );
    }
}

#[test]
fn f3_torn_erase() {
    let setup = |mode| {
        let plan = FaultPlan::seeded(8)
            .with_cut(4, CutKind::Torn(mode))
            .with_faults(FaultConfig {
                unstable_after_cut: true,
                ..Default::default()
            });
        let mut s = SimNand::heap(TINY, plan);
        let g = s.geometry();
        for i in 0..3 {
            s.program_page(g.page(BlockAddr(6), i), &pattern(i as u8), &[])
                .unwrap();
        }
        assert_eq!(
            s.erase(BlockAddr(6)).unwrap_err().kind(),
            ErrorKind::PowerLoss
        );
        s.power_on();
        (s, g.page(BlockAddr(6), 0))
    };
    // Indeterminate: nothing readable.
    let (mut s, p) = setup(TornMode::Random);
    assert_eq!(read(&mut s, p), Err(ErrorKind::Uncorrectable));
    // Its marker bytes are random too: the block reads bad, but no marker was written
    // (`is_marked`); a real mark reads as both.
    assert!(s.is_bad(BlockAddr(6)).unwrap());
    assert!(!s.is_marked(BlockAddr(6)).unwrap());
    assert!(!s.is_marked(BlockAddr(7)).unwrap());
    s.mark_bad(BlockAddr(7)).unwrap();
    assert!(s.is_bad(BlockAddr(7)).unwrap() && s.is_marked(BlockAddr(7)).unwrap());
    // One bit erased: the old data is still there, one bit off, looking valid.
    let (mut s, _) = setup(TornMode::SomeBits);
    let g = s.geometry();
    let diff: u32 = (0..3)
        .map(|i| {
            let (d, _) = read(&mut s, g.page(BlockAddr(6), i)).unwrap_or((pattern(i as u8), 0));
            d.iter()
                .zip(pattern(i as u8))
                .map(|(a, b)| (a ^ b).count_ones())
                .sum::<u32>()
        })
        .sum();
    assert!(diff <= 1);
    // All but one bit erased: looks erased, but the block is unstable until erased again.
    let (mut s, p) = setup(TornMode::MostBits);
    let blocks_pages: Vec<_> = (0..16)
        .map(|i| s.geometry().page(BlockAddr(6), i))
        .collect();
    let mut saw_non_ff = false;
    for _ in 0..6 {
        for &q in &blocks_pages {
            if let Ok((d, _)) = read(&mut s, q) {
                saw_non_ff |= d.iter().any(|&b| b != 0xFF);
            }
        }
    }
    assert!(
        saw_non_ff,
        "unstable erased block never showed flipped bits"
    );
    s.erase(BlockAddr(6)).unwrap();
    assert_eq!(read(&mut s, p), Ok((vec![0xFF; 2048], 0)));
}

// ---- F5 - F16 ------------------------------------------------------------------------

#[test]
fn f5_erased_pages_with_bit_flips() {
    let mut s = faulty(
        TINY,
        FaultConfig {
            erased_flips_ppm: 1_000_000,
            ..Default::default()
        },
    );
    s.erase(BlockAddr(2)).unwrap();
    let p = s.geometry().page(BlockAddr(2), 5);
    let (d, c) = read(&mut s, p).unwrap();
    let zeros: u32 = d.iter().map(|b| b.count_zeros()).sum();
    assert!((1..=2).contains(&zeros), "{zeros}");
    assert_eq!(c, 0, "ECC does not see flips on an erased page");
}

#[test]
fn f6_out_of_order_tears_other_dies_in_flight() {
    let plan = FaultPlan::seeded(3)
        .with_cut(2, CutKind::Clean)
        .with_faults(FaultConfig {
            out_of_order: true,
            ..Default::default()
        });
    let profile = W25N01GV.with_blocks_per_die(16).with_dies(2, 1);
    let mut s = SimNand::heap(profile, plan);
    let g = s.geometry();
    let p0 = g.page(g.first_block_of_die(0), 0);
    let p1 = g.page(g.first_block_of_die(1), 0);
    s.start_program(p0, 0, &pattern(1), &[]).unwrap();
    assert_eq!(
        s.start_program(p1, 0, &pattern(2), &[]).unwrap_err().kind(),
        ErrorKind::PowerLoss
    );
    s.power_on();
    // The first program was still running on die 0 when power went: torn.
    assert_eq!(read(&mut s, p0), Err(ErrorKind::Uncorrectable));
    assert_eq!(read(&mut s, p1), Ok((vec![0xFF; 2048], 0)));
    // Without out-of-order completion the first program completes.
    let mut s = SimNand::heap(profile, FaultPlan::seeded(3).with_cut(2, CutKind::Clean));
    s.start_program(p0, 0, &pattern(1), &[]).unwrap();
    assert!(s.start_program(p1, 0, &pattern(2), &[]).is_err());
    s.power_on();
    assert_eq!(read(&mut s, p0), Ok((pattern(1), 0)));
}

#[test]
fn f7_correctable_errors_are_corrected_and_counted() {
    let mut s = faulty(
        GD5F1GQ4,
        FaultConfig {
            read_correctable_ppm: 1_000_000,
            ..Default::default()
        },
    );
    let p = s.geometry().page(BlockAddr(2), 0);
    s.program_page(p, &pattern(3), &[]).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let (d, c) = read(&mut s, p).unwrap();
        assert_eq!(d, pattern(3));
        assert!((1..=8).contains(&c));
        seen.insert(c);
    }
    assert_eq!(seen.len(), 8, "every count from 1 to the strength shows up");
    assert_eq!(s.counters().corrected_reads, 200);
    // The report says when to scrub.
    let mut d = vec![0; 2048];
    let r = s.read_page(p, &mut d, &mut []).unwrap();
    assert_eq!(r.needs_scrub(), r.corrected_bits >= 6);
}

#[test]
fn f7_on_a_raw_part_flips_reach_the_caller() {
    let mut s = SimNand::heap(MT29F2G08, FaultPlan::seeded(1));
    let p = s.geometry().page(BlockAddr(2), 0);
    s.program_page(p, &pattern(3), &[]).unwrap();
    s.inject_flips(p, 2, 3);
    let (d, c) = read(&mut s, p).unwrap();
    assert_eq!(c, 0);
    let diff: u32 = d
        .iter()
        .zip(pattern(3))
        .map(|(a, b)| (a ^ b).count_ones())
        .sum();
    assert_eq!(diff, 3);
    let wrong: Vec<usize> = (0..2048).filter(|&i| d[i] != pattern(3)[i]).collect();
    assert!(
        wrong.iter().all(|&i| (1024..1536).contains(&i)),
        "flips stay in their step"
    );
}

#[test]
fn f8_uncorrectable_reads() {
    let mut s = faulty(
        W25N01GV,
        FaultConfig {
            read_uncorrectable_ppm: 1_000_000,
            ..Default::default()
        },
    );
    let p = s.geometry().page(BlockAddr(2), 0);
    s.program_page(p, &pattern(3), &[]).unwrap();
    assert_eq!(read(&mut s, p), Err(ErrorKind::Uncorrectable));
    // Beyond the strength from persistent errors: uncorrectable too.
    let mut s = SimNand::heap(GD5F1GQ4, FaultPlan::seeded(1));
    s.program_page(p, &pattern(3), &[]).unwrap();
    s.inject_flips(p, 0, 8);
    assert_eq!(read(&mut s, p), Ok((pattern(3), 8)));
    s.inject_flips(p, 0, 1);
    assert_eq!(read(&mut s, p), Err(ErrorKind::Uncorrectable));
    assert_eq!(s.counters().uncorrectable_reads, 1);
}

#[test]
fn f9_f10_program_and_erase_failures() {
    let mut s = faulty(
        TINY,
        FaultConfig {
            program_fail_ppm: 1_000_000,
            ..Default::default()
        },
    );
    let p = s.geometry().page(BlockAddr(2), 0);
    assert_eq!(
        s.program_page(p, &pattern(1), &[]).unwrap_err().kind(),
        ErrorKind::ProgramFailed
    );
    // A failed page is left in one of four shapes: garbage, all but a few bits, all
    // landed but unstable, a prefix. Some read back uncorrectable, some read back right
    // (the status said "failed" anyway); on a raw part some read back wrong silently.
    let (mut bad, mut right, mut wrong) = (0, 0, 0);
    for (profile, seed) in (0..24).map(|i| (if i % 2 == 0 { TINY } else { MT29F2G08 }, i)) {
        let mut f = SimNand::heap(
            profile,
            FaultPlan::seeded(seed).with_faults(FaultConfig {
                program_fail_ppm: 1_000_000,
                ..Default::default()
            }),
        );
        let q = f.geometry().page(BlockAddr(2), 0);
        let e = f.program_page(q, &pattern(1), &[]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ProgramFailed);
        f.disarm();
        match read(&mut f, q) {
            Err(_) => bad += 1,
            Ok((d, _)) if d == pattern(1) => right += 1,
            Ok(_) => wrong += 1,
        }
        // With ECC its steps count as written: never programmable again.
        if profile.capabilities.ecc.kind != nand_hal::EccKind::None {
            assert_eq!(
                f.program_page(q, &pattern(1), &[]).unwrap_err().kind(),
                ErrorKind::Misuse
            );
        }
    }
    assert!(bad > 0 && right > 0 && wrong > 0, "{bad} {right} {wrong}");
    // A block whose program failed goes bad: its next erase fails.
    s.disarm();
    assert_eq!(
        s.erase(BlockAddr(2)).unwrap_err().kind(),
        ErrorKind::EraseFailed
    );
    let mut s = faulty(
        TINY,
        FaultConfig {
            erase_fail_ppm: 1_000_000,
            ..Default::default()
        },
    );
    assert_eq!(
        s.erase(BlockAddr(3)).unwrap_err().kind(),
        ErrorKind::EraseFailed
    );
    assert_eq!(s.counters().erase_failures, 1);
    // Injected one-shot failures.
    let mut s = SimNand::heap(TINY, FaultPlan::seeded(0));
    s.fail_next_program(BlockAddr(5));
    let p = s.geometry().page(BlockAddr(5), 0);
    assert_eq!(
        s.program_page(p, &pattern(1), &[]).unwrap_err().kind(),
        ErrorKind::ProgramFailed
    );
    s.fail_next_erase(BlockAddr(6));
    assert_eq!(
        s.erase(BlockAddr(6)).unwrap_err().kind(),
        ErrorKind::EraseFailed
    );
}

#[test]
fn f11_silent_failures() {
    let mut s = faulty(
        TINY,
        FaultConfig {
            program_noop_ppm: 1_000_000,
            ..Default::default()
        },
    );
    let p = s.geometry().page(BlockAddr(2), 0);
    s.program_page(p, &pattern(1), &[]).unwrap();
    assert_eq!(read(&mut s, p), Ok((vec![0xFF; 2048], 0)));

    let mut s = SimNand::heap(TINY, FaultPlan::seeded(2));
    s.program_page(p, &pattern(1), &[]).unwrap();
    s.arm(FaultPlan::seeded(2).with_faults(FaultConfig {
        erase_noop_ppm: 1_000_000,
        ..Default::default()
    }));
    s.erase(BlockAddr(2)).unwrap();
    s.disarm();
    // The old data is still there; whatever is programmed over it fails ECC.
    s.program_page(p, &pattern(7), &[]).unwrap();
    assert_eq!(read(&mut s, p), Err(ErrorKind::Uncorrectable));

    let mut s = faulty(
        TINY,
        FaultConfig {
            program_flip_ppm: 1_000_000,
            ..Default::default()
        },
    );
    s.program_page(p, &pattern(1), &[]).unwrap();
    assert_eq!(read(&mut s, p), Ok((pattern(1), 1)));
}

#[test]
fn f12_factory_bad_blocks() {
    let s = faulty(
        W25N01GV,
        FaultConfig {
            factory_bad: 20,
            ..Default::default()
        },
    );
    let mut s = s;
    let bad: Vec<u32> = (0..1024)
        .filter(|&b| s.is_bad(BlockAddr(b)).unwrap())
        .collect();
    assert_eq!(bad.len(), 20);
    assert!(!bad.contains(&0));
    // The marker is really in the spare area (OOB bytes 0-1 of the first page).
    let mut d = [0u8; 2048];
    let mut o = [0u8; 2];
    s.peek(s.geometry().page(BlockAddr(bad[0]), 0), &mut d, &mut o);
    assert_eq!(o, [0, 0]);
    // Same seed, same bad blocks.
    let mut t = faulty(
        W25N01GV,
        FaultConfig {
            factory_bad: 20,
            ..Default::default()
        },
    );
    assert!(bad.iter().all(|&b| t.is_bad(BlockAddr(b)).unwrap()));
}

#[test]
fn f13_wear_out() {
    let mut s = faulty(
        TINY,
        FaultConfig {
            endurance: 100,
            ..Default::default()
        },
    );
    let mut first_failure = None;
    for cycle in 1..=400 {
        if s.erase(BlockAddr(7)).is_err() {
            first_failure = Some(cycle);
            break;
        }
    }
    let n = first_failure.expect("block never wore out");
    assert!((75..400).contains(&n), "{n}");
    assert_eq!(s.block_state(BlockAddr(7)).erase_count, n);
}

#[test]
fn f14_read_disturb() {
    let faults = FaultConfig {
        read_disturb_threshold: 100,
        read_disturb_ppm: 1_000_000,
        ..Default::default()
    };
    let mut s = faulty(GD5F1GQ4, faults);
    let g = s.geometry();
    for i in 0..4 {
        s.program_page(g.page(BlockAddr(2), i), &pattern(i as u8), &[])
            .unwrap();
    }
    for _ in 0..100 {
        read(&mut s, g.page(BlockAddr(2), 0)).unwrap();
    }
    let neighbours: u8 = (1..4)
        .map(|i| read(&mut s, g.page(BlockAddr(2), i)).unwrap().1)
        .sum();
    assert_eq!(neighbours, 0, "below the threshold nothing happens");
    for _ in 0..200 {
        read(&mut s, g.page(BlockAddr(2), 0)).unwrap();
    }
    let disturbed: u32 = (0..g.pages_per_block())
        .map(|i| {
            s.page_state(g.page(BlockAddr(2), i))
                .flips
                .iter()
                .map(|&f| f as u32)
                .sum::<u32>()
        })
        .sum();
    assert!(disturbed > 100, "{disturbed}");
    assert_eq!(
        s.page_state(g.page(BlockAddr(2), 0)).flips,
        [0; 8],
        "the page read is not the one disturbed"
    );
    // Erasing resets the count.
    s.erase(BlockAddr(2)).unwrap();
    assert_eq!(s.block_state(BlockAddr(2)).reads_since_erase, 0);
}

#[test]
fn f16_partial_program_disturb() {
    let mut s = faulty(
        GD5F1GQ4,
        FaultConfig {
            partial_disturb_ppm: 1_000_000,
            ..Default::default()
        },
    );
    let p = s.geometry().page(BlockAddr(2), 0);
    s.program(p, 0, &[0x12; 512], &[]).unwrap();
    let mut d = [0u8; 512];
    assert_eq!(s.read(p, 0, &mut d, &mut []).unwrap().corrected_bits, 0);
    s.program(p, 512, &[0x34; 512], &[]).unwrap();
    assert_eq!(s.read(p, 0, &mut d, &mut []).unwrap().corrected_bits, 1);
    assert_eq!(d, [0x12; 512]);
}

#[test]
fn f19_scribbled_images_stay_readable_as_errors() {
    let mut s = SimNand::heap(TINY, FaultPlan::seeded(0));
    s.scribble(77, 300);
    let g = s.geometry();
    let mut garbage = 0;
    for p in 0..g.pages() {
        match read(&mut s, PageAddr(p)) {
            Ok((d, _)) => garbage += d.iter().any(|&b| b != 0xFF) as u32,
            Err(k) => panic!("scribbled page must read (raw garbage), got {k:?}"),
        }
    }
    assert!((200..400).contains(&garbage), "{garbage}");
}

// ---- Replay -----------------------------------------------------------------------------

/// A mixed workload under a plan; returns every result and the final counters.
fn trace(plan: FaultPlan) -> (Vec<String>, nand_hal::sim::Counters) {
    let mut s = SimNand::heap(TINY, plan);
    let g = s.geometry();
    let mut out = Vec::new();
    'run: for round in 0..6u32 {
        for b in 1..8u32 {
            let block = BlockAddr(b);
            out.push(format!("{:?}", s.erase(block).map_err(|e| e.kind())));
            for i in 0..g.pages_per_block() {
                let p = g.page(block, i);
                let r = s.program_page(p, &pattern((round * 7 + b + i) as u8), &[]);
                out.push(format!("{:?}", r.map_err(|e| e.kind())));
                let r = read(&mut s, p);
                out.push(format!("{:?}", r.map(|(d, c)| (d[..8].to_vec(), c))));
                if !s.is_powered() {
                    break 'run;
                }
            }
        }
    }
    (out, s.counters())
}

#[test]
fn same_token_same_outcome() {
    let plan = FaultPlan::seeded(0xC0FFEE)
        .with_cut(300, CutKind::Torn(TornMode::Random))
        .with_faults(FaultConfig {
            factory_bad: 0,
            ..FaultConfig::noisy()
        });
    let token = plan.to_string();
    let replayed: FaultPlan = token.parse().unwrap();
    let (a, ca) = trace(plan);
    let (b, cb) = trace(replayed);
    assert_eq!(a, b);
    assert_eq!(ca, cb);
    assert_eq!(ca.power_cuts, 1);
    assert!(
        ca.corrected_reads > 0 && ca.program_failures + ca.erase_failures > 0,
        "{ca:?}"
    );
    // A different seed gives a different run.
    let (c, _) = trace(FaultPlan {
        seed: 0xC0FFEF,
        ..plan
    });
    assert_ne!(a, c);
}

#[test]
fn f4_unstable_pages_read_well_badly_and_well_again() {
    // No "good first, bad later": the outcomes of an unstable page come in any order.
    let (mut s, p) = torn_program(W25N01GV, TornMode::MostBits, 11);
    let outcomes: Vec<bool> = (0..40).map(|_| read(&mut s, p).is_ok()).collect();
    let good_after_bad = outcomes.windows(2).any(|w| !w[0] && w[1]);
    let bad_after_good = outcomes.windows(2).any(|w| w[0] && !w[1]);
    assert!(good_after_bad && bad_after_good, "{outcomes:?}");
    // An erase makes it stable again.
    s.erase(s.geometry().block_of(p)).unwrap();
    for _ in 0..10 {
        assert_eq!(read(&mut s, p), Ok((vec![0xFF; 2048], 0)));
    }
}

#[test]
fn f8_aimed_uncorrectable_reads_are_transient() {
    let mut s = SimNand::heap(TINY, FaultPlan::seeded(5));
    let g = s.geometry();
    let p = g.page(BlockAddr(3), 0);
    s.program_page(p, &pattern(4), &[]).unwrap();
    s.arm(FaultPlan::seeded(5).with_faults(FaultConfig {
        read_fail_at: 3,
        read_fail_len: 2,
        ..Default::default()
    }));
    let got: Vec<_> = (0..6).map(|_| read(&mut s, p).map(|(_, c)| c)).collect();
    assert_eq!(
        got,
        vec![
            Ok(0),
            Ok(0),
            Err(ErrorKind::Uncorrectable),
            Err(ErrorKind::Uncorrectable),
            Ok(0),
            Ok(0)
        ]
    );
    // Spare-only reads count too; the token carries the knobs.
    assert_eq!(s.reads_since_arm(), 6);
    let token = s.plan().to_string();
    assert!(
        token.contains("rfail=3") && token.contains("rfaillen=2"),
        "{token}"
    );
    // On a part without ECC an aimed failure returns flipped bits, not an error.
    let mut raw = SimNand::heap(MT29F2G08, FaultPlan::seeded(5));
    let q = raw.geometry().page(BlockAddr(3), 0);
    raw.program_page(q, &pattern(4), &[]).unwrap();
    raw.arm(FaultPlan::seeded(5).with_faults(FaultConfig {
        read_fail_at: 1,
        ..Default::default()
    }));
    let (d, _) = read(&mut raw, q).unwrap();
    assert_ne!(d, pattern(4));
    assert_eq!(read(&mut raw, q), Ok((pattern(4), 0)));
}
