//! Property tests of the sector codec (BCH + CRC): errors up to t are corrected and
//! counted; t+1..2t errors are never returned as good data; erased sectors with up to t
//! flipped bits read as erased.

use nand_hal::ecc::{SectorCodec, SectorRead, Strength};
use proptest::collection::{btree_set, vec};
use proptest::prelude::*;

const USER: u8 = 4;

fn sector_bits(codec: &SectorCodec) -> usize {
    (512 + codec.chunk_len()) * 8
}

fn flip(data: &mut [u8], chunk: &mut [u8], bit: usize) {
    let byte = bit / 8;
    let mask = 0x80 >> (bit % 8);
    if byte < data.len() {
        data[byte] ^= mask;
    } else {
        chunk[byte - data.len()] ^= mask;
    }
}

fn encoded(codec: &SectorCodec, data: &[u8], user: &[u8]) -> Vec<u8> {
    let mut chunk = vec![0xFFu8; codec.chunk_len()];
    chunk[..USER as usize].copy_from_slice(user);
    codec.encode(data, &mut chunk);
    chunk
}

fn strengths() -> impl Strategy<Value = Strength> {
    prop_oneof![Just(Strength::T4), Just(Strength::T8)]
}

/// Parity pad bits are not part of the codeword: keep error positions off them.
fn usable_bit(codec: &SectorCodec, bit: usize) -> bool {
    let pad = codec.chunk_len() * 8
        - (USER as usize + 2) * 8
        - match codec.strength() {
            Strength::T4 => 52,
            Strength::T8 => 104,
        };
    bit < sector_bits(codec) - pad
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn up_to_t_errors_are_corrected(
        strength in strengths(),
        data in vec(any::<u8>(), 512),
        user in vec(any::<u8>(), USER as usize),
        positions in btree_set(0usize..4200 * 8, 0..=8),
    ) {
        let codec = SectorCodec::new(strength, USER);
        let t = strength.bits() as usize;
        let chunk = encoded(&codec, &data, &user);
        let positions: Vec<usize> = positions
            .into_iter()
            .map(|p| p % sector_bits(&codec))
            .filter(|&p| usable_bit(&codec, p))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .take(t)
            .collect();
        let (mut d, mut c) = (data.clone(), chunk.clone());
        for &p in &positions {
            flip(&mut d, &mut c, p);
        }
        let r = codec.decode(&mut d, &mut c);
        prop_assert_eq!(r, Ok(SectorRead::Data { corrected: positions.len() as u8 }));
        prop_assert_eq!(&d, &data);
        prop_assert_eq!(&c[..USER as usize], &user[..]);
    }

    #[test]
    fn beyond_t_is_never_good_data(
        strength in strengths(),
        data in vec(any::<u8>(), 512),
        user in vec(any::<u8>(), USER as usize),
        extra in 1usize..=8,
        seed in any::<u64>(),
    ) {
        let codec = SectorCodec::new(strength, USER);
        let t = strength.bits() as usize;
        let weight = (t + extra).min(2 * t);
        let chunk = encoded(&codec, &data, &user);
        let (mut d, mut c) = (data.clone(), chunk.clone());
        let mut x = seed | 1;
        let mut used = std::collections::BTreeSet::new();
        while used.len() < weight {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            let p = (x % sector_bits(&codec) as u64) as usize;
            if usable_bit(&codec, p) && used.insert(p) {
                flip(&mut d, &mut c, p);
            }
        }
        match codec.decode(&mut d, &mut c) {
            Err(_) => {}
            Ok(SectorRead::Data { .. }) => prop_assert!(false, "{weight} errors returned as data"),
            Ok(SectorRead::Erased { .. }) => prop_assert!(false, "{weight} errors read as erased"),
        }
    }

    #[test]
    fn erased_with_few_flips_reads_erased(
        strength in strengths(),
        positions in btree_set(0usize..4200 * 8, 0..=8),
    ) {
        let codec = SectorCodec::new(strength, USER);
        let t = strength.bits() as usize;
        let positions: Vec<usize> = positions
            .into_iter()
            .map(|p| p % sector_bits(&codec))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .take(t)
            .collect();
        let mut d = vec![0xFFu8; 512];
        let mut c = vec![0xFFu8; codec.chunk_len()];
        for &p in &positions {
            flip(&mut d, &mut c, p);
        }
        let r = codec.decode(&mut d, &mut c).unwrap();
        prop_assert_eq!(r.corrected() as usize, positions.len());
        let erased = matches!(r, SectorRead::Erased { .. });
        prop_assert!(erased);
        prop_assert!(d.iter().all(|&b| b == 0xFF));
        prop_assert!(c.iter().all(|&b| b == 0xFF));
    }
}

#[test]
fn clean_sector_round_trip_and_layout_sizes() {
    let c4 = SectorCodec::new(Strength::T4, 4);
    let c8 = SectorCodec::new(Strength::T8, 0);
    assert_eq!(c4.chunk_len(), 4 + 2 + 7);
    assert_eq!(c8.chunk_len(), 2 + 13);
    let data: Vec<u8> = (0..512u32).map(|i| (i * 13) as u8).collect();
    let mut chunk = encoded(&c4, &data, &[1, 2, 3, 4]);
    let mut d = data.clone();
    assert_eq!(
        c4.decode(&mut d, &mut chunk),
        Ok(SectorRead::Data { corrected: 0 })
    );
    let mut d = vec![0xFFu8; 512];
    let mut ch = vec![0xFFu8; 13];
    assert_eq!(
        c4.decode(&mut d, &mut ch),
        Ok(SectorRead::Erased { corrected: 0 })
    );
}
