//! One ECC sector: 512 data bytes, the spare bytes the sector protects for the upper
//! layer, a CRC-16 and the BCH parity.
//!
//! # Spare chunk of one sector
//!
//! ```text
//!  0           u          u+2                      u+2+p
//!  +-----------+-----------+------------------------+
//!  | user (u)  | CRC-16 BE | BCH parity (p bytes)   |
//!  +-----------+-----------+------------------------+
//!  u = protected user bytes per sector (configurable)
//!  p = 7 (t = 4, 52 bits + 4 pad bits) or 13 (t = 8, 104 bits)
//! ```
//!
//! The BCH message is `data (512) || user (u) || CRC (2)`; the CRC (CRC-16/IBM-3740:
//! polynomial `0x1021`, init `0xFFFF`, no reflection, big-endian) covers `data || user`.
//!
//! # Guarantees
//!
//! - Up to `t` bit errors anywhere in the sector (data, user bytes, CRC, parity) are
//!   corrected and counted.
//! - A sector that is entirely `FFh` reads as erased; an erased sector with up to `t`
//!   bits flipped to 0 reads as erased (all `FFh`) with those bits counted as corrected
//!   (as Linux `nand_check_erased_ecc_chunk` does).
//! - More than `t` errors are reported [`Uncorrectable`] unless the BCH decoder
//!   miscorrects them into another codeword *and* the CRC of the result matches. For
//!   random error patterns of weight `t+1..2t` in a 4176-bit shortened code the
//!   decoder miscorrects about 0.3 % of patterns at t = 4 (far fewer at t = 8), and the
//!   CRC lets one in 65 536 of those through: below 5e-8 per bad sector read.
//!   Patterns that are themselves codewords (weight >= 2t+1) cannot be detected by any
//!   code of this distance except through the CRC.

use super::bch::{Bch, Uncorrectable};

/// Data bytes per sector.
pub const SECTOR: usize = 512;
/// CRC bytes per sector.
pub const CRC_LEN: usize = 2;

static BCH4: Bch = Bch::new(4);
static BCH8: Bch = Bch::new(8);

const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_IBM_3740);

/// Correction strength per 512 B sector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Strength {
    /// 4 bits (7 parity bytes).
    T4,
    /// 8 bits (13 parity bytes).
    T8,
}

impl Strength {
    /// Bits corrected.
    pub const fn bits(self) -> u8 {
        match self {
            Strength::T4 => 4,
            Strength::T8 => 8,
        }
    }

    fn code(self) -> &'static Bch {
        match self {
            Strength::T4 => &BCH4,
            Strength::T8 => &BCH8,
        }
    }
}

/// How a sector read went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SectorRead {
    /// Written data, `corrected` bits fixed.
    Data {
        /// Bits corrected.
        corrected: u8,
    },
    /// An erased sector (returned as all `FFh`), `corrected` bits were 0.
    Erased {
        /// Bits that read as 0.
        corrected: u8,
    },
}

impl SectorRead {
    /// Bits corrected.
    pub const fn corrected(&self) -> u8 {
        match *self {
            SectorRead::Data { corrected } | SectorRead::Erased { corrected } => corrected,
        }
    }
}

/// Encoder/decoder of one sector and its spare chunk.
#[derive(Clone, Copy, Debug)]
pub struct SectorCodec {
    strength: Strength,
    user: u8,
}

impl SectorCodec {
    /// A codec with `user` protected spare bytes per sector.
    pub const fn new(strength: Strength, user: u8) -> Self {
        SectorCodec { strength, user }
    }

    /// Strength.
    pub const fn strength(&self) -> Strength {
        self.strength
    }

    /// Protected user bytes per sector.
    pub const fn user_bytes(&self) -> usize {
        self.user as usize
    }

    /// Spare bytes per sector: user + CRC + parity.
    pub fn chunk_len(&self) -> usize {
        self.user as usize + CRC_LEN + self.strength.code().parity_bytes()
    }

    /// Fills the CRC and parity of `chunk` (whose first `user_bytes()` hold the user
    /// bytes) for `data` (512 bytes).
    pub fn encode(&self, data: &[u8], chunk: &mut [u8]) {
        let u = self.user as usize;
        let mut d = CRC16.digest();
        d.update(data);
        d.update(&chunk[..u]);
        let crc = d.finalize().to_be_bytes();
        chunk[u..u + CRC_LEN].copy_from_slice(&crc);
        let (msg, parity) = chunk[..self.chunk_len()].split_at_mut(u + CRC_LEN);
        self.strength.code().encode(&[data, msg], parity);
    }

    /// Checks and corrects `data` (512 bytes) and `chunk` in place.
    pub fn decode(&self, data: &mut [u8], chunk: &mut [u8]) -> Result<SectorRead, Uncorrectable> {
        let n = self.chunk_len();
        let chunk = &mut chunk[..n];
        if data.iter().chain(chunk.iter()).all(|&b| b == 0xFF) {
            return Ok(SectorRead::Erased { corrected: 0 });
        }
        let u = self.user as usize;
        let code = self.strength.code();
        {
            let (msg, parity) = chunk.split_at_mut(u + CRC_LEN);
            if let Ok(c) = code.locate(&[data, msg], parity) {
                Bch::apply(&c, &mut [&mut *data, &mut *msg]);
                if self.crc_ok(data, msg) {
                    return Ok(SectorRead::Data { corrected: c.count });
                }
                // A miscorrection: put the bits back before looking for an erased
                // sector.
                Bch::apply(&c, &mut [&mut *data, &mut *msg]);
            }
        }
        let zeros: u32 = data
            .iter()
            .chain(chunk.iter())
            .map(|b| b.count_zeros())
            .sum();
        if zeros <= self.strength.bits() as u32 {
            data.fill(0xFF);
            chunk.fill(0xFF);
            return Ok(SectorRead::Erased {
                corrected: zeros as u8,
            });
        }
        Err(Uncorrectable)
    }

    fn crc_ok(&self, data: &[u8], msg: &[u8]) -> bool {
        let u = self.user as usize;
        let mut d = CRC16.digest();
        d.update(data);
        d.update(&msg[..u]);
        d.finalize().to_be_bytes() == msg[u..u + CRC_LEN]
    }
}
