//! The chip table: everything the driver needs to know about a part, keyed by JEDEC ID.
//!
//! Adding a part is adding a [`ChipInfo`] value (see `docs/adding-a-chip.md`); the
//! driver has no per-part code paths beyond what these fields select.

use crate::capabilities::Capabilities;
use crate::geometry::Geometry;
use crate::parts::{self, ArrayTimes, TimeRange};

/// The ID bytes a part returns to READ ID (`9Fh`) after the one address/dummy byte
/// that follows the opcode (manufacturer first). Parts compare on the first `len` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct JedecId {
    bytes: [u8; 4],
    len: u8,
}

impl JedecId {
    /// An ID of one to four bytes.
    pub const fn new(id: &[u8]) -> Self {
        assert!(
            !id.is_empty() && id.len() <= 4,
            "a JEDEC ID has 1 to 4 bytes"
        );
        let mut bytes = [0u8; 4];
        let mut i = 0;
        while i < id.len() {
            bytes[i] = id[i];
            i += 1;
        }
        JedecId {
            bytes,
            len: id.len() as u8,
        }
    }

    /// The significant bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// Whether `raw` (what the part sent, manufacturer first) starts with this ID.
    pub fn matches(&self, raw: &[u8]) -> bool {
        raw.len() >= self.len as usize && raw[..self.len as usize] == *self.as_bytes()
    }
}

/// What a read's ECC status bits say, normalised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EccOutcome {
    /// No bit needed correcting (or ECC is off).
    Clean,
    /// Corrected; the count is the most bits the code can stand for (conservative).
    Corrected(u8),
    /// Beyond the ECC's strength: the cache holds raw, uncorrected data.
    Uncorrectable,
    /// A code the datasheet reserves: treated as uncorrectable by the driver.
    Reserved(u8),
}

/// How a part encodes the outcome of the last page read in status register `C0h`.
///
/// Sources: the parts' datasheets and Linux `drivers/mtd/nand/spi/{winbond,gigadevice,
/// micron}.c`. Where a code covers a range the decoder reports the top of the range (as
/// Linux does), so scrub decisions err on the safe side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EccStatus {
    /// Winbond W25N01GV/W25M02GV, bits 5:4 (ECC-1, ECC-0): `00` clean, `01` one bit
    /// corrected, `10` uncorrectable, `11` uncorrectable in a continuous read.
    Winbond1Bit,
    /// GigaDevice GD5FxGQ4xA, bits 5:4 (ECCS1, ECCS0): `00` clean, `01` 1-7 bits
    /// corrected (reported as 7), `10` uncorrectable, `11` 8 bits corrected.
    GigaDeviceXa,
    /// Micron 8-bit parts, bits 6:4: `000` clean, `001` 1-3 corrected (3), `011` 4-6
    /// (6), `101` 7-8 (8), `010` uncorrectable; other codes are reserved.
    Micron8Bit,
}

impl EccStatus {
    /// Decodes status register `C0h`.
    pub const fn decode(self, status: u8) -> EccOutcome {
        match self {
            EccStatus::Winbond1Bit => match (status >> 4) & 0b11 {
                0b00 => EccOutcome::Clean,
                0b01 => EccOutcome::Corrected(1),
                _ => EccOutcome::Uncorrectable,
            },
            EccStatus::GigaDeviceXa => match (status >> 4) & 0b11 {
                0b00 => EccOutcome::Clean,
                0b01 => EccOutcome::Corrected(7),
                0b11 => EccOutcome::Corrected(8),
                _ => EccOutcome::Uncorrectable,
            },
            EccStatus::Micron8Bit => match (status >> 4) & 0b111 {
                0b000 => EccOutcome::Clean,
                0b001 => EccOutcome::Corrected(3),
                0b011 => EccOutcome::Corrected(6),
                0b101 => EccOutcome::Corrected(8),
                0b010 => EccOutcome::Uncorrectable,
                code => EccOutcome::Reserved(code),
            },
        }
    }
}

/// How a multi-die part selects its die.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DieSelect {
    /// One die (or dies the part switches by itself).
    None,
    /// Winbond "software die select" `C2h` followed by the die index (W25M).
    WinbondC2,
}

/// Configuration register (`B0h`) bits the driver sets and clears at initialisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ConfigBits {
    /// Bits set (ECC enable; Winbond buffer mode `BUF`).
    pub set: u8,
    /// Bits cleared.
    pub clear: u8,
}

/// Array timings the driver uses to pace status polling and bound it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ChipTiming {
    /// Page read, program and erase (the driver polls at a sixteenth of the typical time
    /// and gives up after twice the maximum).
    pub array: ArrayTimes,
    /// Reset (tRST, worst case while an operation was running).
    pub reset: TimeRange,
}

/// One part in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ChipInfo {
    /// Part name, for reports.
    pub name: &'static str,
    /// READ ID answer.
    pub id: JedecId,
    /// Geometry of the whole package (all dies).
    pub geometry: Geometry,
    /// Program unit, NOP, ECC, OOB layout and marker, as reported to upper layers.
    pub capabilities: Capabilities,
    /// ECC status encoding.
    pub ecc_status: EccStatus,
    /// Die selection for multi-die packages.
    pub die_select: DieSelect,
    /// Configuration register setup.
    pub config: ConfigBits,
    /// Block-protection bits of register `A0h` (all cleared at initialisation).
    pub protect_mask: u8,
    /// Array timings.
    pub timing: ChipTiming,
}

/// Configuration register bit: on-die ECC enable (all three vendors).
pub const CFG_ECC_EN: u8 = 1 << 4;
/// Configuration register bit: Winbond buffer read mode (`BUF = 1`: `03h` honours the
/// column address; `BUF = 0` is continuous read, which ignores it).
pub const CFG_WINBOND_BUF: u8 = 1 << 3;

const TRST: TimeRange = TimeRange::us(5, 500);

/// Winbond W25N01GV: 1 Gbit, 2048 + 64 B pages, 64 pages/block, 1024 blocks, 1-bit
/// on-die ECC per 512 B sector, NOP 4.
pub const W25N01GV: ChipInfo = ChipInfo {
    name: "W25N01GV",
    id: JedecId::new(&[0xEF, 0xAA, 0x21]),
    geometry: parts::W25N01GV.geometry,
    capabilities: parts::W25N01GV.capabilities,
    ecc_status: EccStatus::Winbond1Bit,
    die_select: DieSelect::None,
    config: ConfigBits {
        set: CFG_ECC_EN | CFG_WINBOND_BUF,
        clear: 0,
    },
    protect_mask: 0b0111_1100,
    timing: ChipTiming {
        array: parts::W25N01GV.times,
        reset: TRST,
    },
};

/// Winbond W25M02GV: two W25N01GV dies behind software die select (`C2h`).
pub const W25M02GV: ChipInfo = ChipInfo {
    name: "W25M02GV",
    id: JedecId::new(&[0xEF, 0xAB, 0x21]),
    geometry: parts::W25M02GV.geometry,
    die_select: DieSelect::WinbondC2,
    ..W25N01GV
};

/// GigaDevice GD5F1GQ4UA/xA: 1 Gbit, 2048 + 64 B pages, 8-bit on-die ECC per 512 B,
/// marker at byte 0, bytes 1-7 and 16s..16s+8 (s = 1..3) free and ECC-protected.
/// READ ID sends an address byte (`00h`) after `9Fh`, then `C8h F1h`.
pub const GD5F1GQ4XA: ChipInfo = ChipInfo {
    name: "GD5F1GQ4xA",
    id: JedecId::new(&[0xC8, 0xF1]),
    geometry: parts::GD5F1GQ4XA.geometry,
    capabilities: parts::GD5F1GQ4XA.capabilities,
    ecc_status: EccStatus::GigaDeviceXa,
    die_select: DieSelect::None,
    config: ConfigBits {
        set: CFG_ECC_EN,
        clear: 0,
    },
    protect_mask: 0b0011_1000,
    timing: ChipTiming {
        array: parts::GD5F1GQ4XA.times,
        reset: TRST,
    },
};

/// Micron MT29F1G01ABAFD (M78A, 3.3 V): 1 Gbit, 2048 + 128 B pages, 64 pages/block,
/// 1024 blocks, 8-bit on-die ECC per 512 B, NOP 4.
///
/// Spare area (as in Linux `micron.c`): bytes 0-3 marker/reserved, 4-31 free and not
/// protected, 32-63 free and ECC-protected (8 bytes per sector, sector order), 64-127
/// parity.
pub const MT29F1G01ABAFD: ChipInfo = ChipInfo {
    name: "MT29F1G01ABAFD",
    id: JedecId::new(&[0x2C, 0x14]),
    geometry: parts::MT29F1G01ABAFD.geometry,
    capabilities: parts::MT29F1G01ABAFD.capabilities,
    ecc_status: EccStatus::Micron8Bit,
    die_select: DieSelect::None,
    config: ConfigBits {
        set: CFG_ECC_EN,
        clear: 0,
    },
    protect_mask: 0b0011_1000,
    timing: ChipTiming {
        array: parts::MT29F1G01ABAFD.times,
        reset: TRST,
    },
};

/// Every built-in part. Pass your own slice to [`crate::spi::SpiNand::with_table`] to
/// add parts without touching the driver.
pub const CHIPS: &[ChipInfo] = &[W25N01GV, W25M02GV, GD5F1GQ4XA, MT29F1G01ABAFD];

/// Looks `raw` (the bytes after READ ID's address/dummy byte) up in `table`.
pub fn lookup<'t>(table: &'t [ChipInfo], raw: &[u8]) -> Option<&'t ChipInfo> {
    table.iter().find(|c| c.id.matches(raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_entries_are_consistent() {
        for c in CHIPS {
            assert_eq!(c.capabilities.validate(&c.geometry), Ok(()), "{}", c.name);
            assert!(c.timing.array.read.typ_ns <= c.timing.array.read.max_ns);
            let dies = c.geometry.dies();
            assert!(dies == 1 || c.die_select != DieSelect::None, "{}", c.name);
        }
        assert_eq!(MT29F1G01ABAFD.capabilities.oob.free_bytes(), 60);
        assert_eq!(MT29F1G01ABAFD.capabilities.oob.protected_bytes(), 32);
    }

    #[test]
    fn lookup_by_prefix() {
        assert_eq!(
            lookup(CHIPS, &[0xEF, 0xAA, 0x21, 0x00]).unwrap().name,
            "W25N01GV"
        );
        assert_eq!(
            lookup(CHIPS, &[0xC8, 0xF1, 0xC8, 0xF1]).unwrap().name,
            "GD5F1GQ4xA"
        );
        assert_eq!(
            lookup(CHIPS, &[0x2C, 0x14, 0x00]).unwrap().name,
            "MT29F1G01ABAFD"
        );
        assert!(lookup(CHIPS, &[0xEF, 0xAA, 0x22]).is_none());
        assert!(lookup(CHIPS, &[0xFF, 0xFF, 0xFF]).is_none());
    }

    #[test]
    fn ecc_status_decoding() {
        use EccOutcome::*;
        let w = EccStatus::Winbond1Bit;
        assert_eq!(w.decode(0x00), Clean);
        assert_eq!(w.decode(0x10), Corrected(1));
        assert_eq!(w.decode(0x20), Uncorrectable);
        assert_eq!(w.decode(0x30), Uncorrectable);
        assert_eq!(w.decode(0x03), Clean, "OIP/WEL bits are not ECC bits");
        let g = EccStatus::GigaDeviceXa;
        assert_eq!(g.decode(0x10), Corrected(7));
        assert_eq!(g.decode(0x30), Corrected(8));
        assert_eq!(g.decode(0x20), Uncorrectable);
        let m = EccStatus::Micron8Bit;
        assert_eq!(m.decode(0x10), Corrected(3));
        assert_eq!(m.decode(0x30), Corrected(6));
        assert_eq!(m.decode(0x50), Corrected(8));
        assert_eq!(m.decode(0x20), Uncorrectable);
        assert_eq!(m.decode(0x70), Reserved(7));
        assert_eq!(m.decode(0x80), Clean, "bit 7 is not part of the field");
    }
}
