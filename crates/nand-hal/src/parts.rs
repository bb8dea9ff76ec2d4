//! Datasheet facts about the supported parts: geometry, capabilities (program unit, NOP,
//! ECC, spare layout, bad-block marker) and array times. One place for them, shared by the
//! SPI chip table (`spi::chips`) and the simulator profiles (`sim::profile`), so the
//! simulated part and the driver's description of the real one cannot drift apart.
//!
//! Sources: `shared/reference/perf-reliability.md` 1.7 and 3(i), Linux
//! `drivers/mtd/nand/spi/{winbond,gigadevice,micron}.c` for the spare layouts.

use crate::capabilities::{
    BadBlockMarker, Capabilities, Ecc, EccKind, EccReporting, MarkerPages, OobLayout, OobRegion,
};
use crate::geometry::Geometry;

/// Typical and worst-case duration of an array operation, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TimeRange {
    /// Datasheet typical.
    pub typ_ns: u32,
    /// Datasheet maximum.
    pub max_ns: u32,
}

impl TimeRange {
    /// `typ` and `max` in microseconds.
    pub const fn us(typ: u32, max: u32) -> Self {
        TimeRange {
            typ_ns: typ * 1000,
            max_ns: max * 1000,
        }
    }
}

/// Array times of a part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ArrayTimes {
    /// Page read to the cache register (tR / tRD, ECC on).
    pub read: TimeRange,
    /// Program (tPROG / tPP), whatever the size programmed.
    pub program: TimeRange,
    /// Block erase (tBERS / tBE).
    pub erase: TimeRange,
}

/// One part's datasheet facts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Part {
    /// Part name.
    pub name: &'static str,
    /// Geometry of the package (all dies).
    pub geometry: Geometry,
    /// Capabilities as reported to upper layers.
    pub capabilities: Capabilities,
    /// Array times.
    pub times: ArrayTimes,
    /// Most factory bad blocks the datasheet allows.
    pub max_factory_bad: u32,
    /// Rated program/erase cycles per block.
    pub endurance: u32,
}

impl Part {
    /// Whether the capabilities fit the geometry (checked at compile time for every part
    /// here).
    pub const fn validate(&self) -> Result<(), crate::CapabilitiesError> {
        self.capabilities.validate(&self.geometry)
    }
}

/// Winbond's spare layout per 512 B sector `s`: bytes `16s+2..16s+4` free but not
/// ECC-protected ("user data II"), `16s+4..16s+8` free and protected ("user data I"),
/// `16s+8..16s+16` parity; the marker at bytes 0-1.
const WINBOND_CAPS: Capabilities = Capabilities {
    program_unit: 512,
    nop: 4,
    ecc: Ecc {
        kind: EccKind::OnDie,
        reporting: EccReporting::PageWide,
        step_size: 512,
        strength: 1,
        scrub_threshold: 1,
    },
    oob: OobLayout::new(&[
        OobRegion::unprotected(2, 2),
        OobRegion::protected(4, 4, 0),
        OobRegion::unprotected(18, 2),
        OobRegion::protected(20, 4, 1),
        OobRegion::unprotected(34, 2),
        OobRegion::protected(36, 4, 2),
        OobRegion::unprotected(50, 2),
        OobRegion::protected(52, 4, 3),
    ]),
    bad_block_marker: BadBlockMarker::SPI,
};

const WINBOND_TIMES: ArrayTimes = ArrayTimes {
    read: TimeRange::us(25, 60),
    program: TimeRange::us(250, 700),
    erase: TimeRange::us(2000, 10_000),
};

/// Winbond W25N01GV: 1 Gbit SPI NAND, 2048 + 64 B pages, 64 pages per block, 1024 blocks,
/// 1-bit on-die ECC per 512 B, NOP 4.
pub const W25N01GV: Part = Part {
    name: "W25N01GV",
    geometry: Geometry::new(2048, 64, 64, 1024, 1, 1, 1),
    capabilities: WINBOND_CAPS,
    times: WINBOND_TIMES,
    max_factory_bad: 20,
    endurance: 100_000,
};

/// Winbond W25M02GV: two W25N01GV dies behind a die-select command on one SPI bus.
pub const W25M02GV: Part = Part {
    name: "W25M02GV",
    geometry: Geometry::new(2048, 64, 64, 1024, 1, 2, 1),
    max_factory_bad: 40,
    ..W25N01GV
};

/// GigaDevice GD5F1GQ4xA: 1 Gbit SPI NAND, 8-bit on-die ECC per 512 B; spare bytes 1..8
/// and `16s..16s+8` (s = 1..3) free and ECC-protected (31 bytes), parity at
/// `16s+8..16s+16`, marker at byte 0.
pub const GD5F1GQ4XA: Part = Part {
    name: "GD5F1GQ4xA",
    geometry: Geometry::new(2048, 64, 64, 1024, 1, 1, 1),
    capabilities: Capabilities {
        program_unit: 512,
        nop: 4,
        ecc: Ecc {
            kind: EccKind::OnDie,
            reporting: EccReporting::PageWide,
            step_size: 512,
            strength: 8,
            scrub_threshold: 6,
        },
        oob: OobLayout::new(&[
            OobRegion::protected(1, 7, 0),
            OobRegion::protected(16, 8, 1),
            OobRegion::protected(32, 8, 2),
            OobRegion::protected(48, 8, 3),
        ]),
        bad_block_marker: BadBlockMarker {
            offset: 0,
            len: 1,
            pages: MarkerPages {
                first: true,
                second: false,
                last: false,
            },
        },
    },
    times: ArrayTimes {
        read: TimeRange::us(120, 120),
        program: TimeRange::us(400, 700),
        erase: TimeRange::us(3000, 10_000),
    },
    max_factory_bad: 20,
    endurance: 100_000,
};

/// Micron MT29F1G01ABAFD (M78A): 1 Gbit SPI NAND, 2048 + 128 B pages, 8-bit on-die ECC
/// per 512 B. Spare bytes 0-3 marker/reserved, 4-31 free and not protected, 32-63 free and
/// protected (8 bytes per sector, in sector order), 64-127 parity. Timings from the M78A
/// datasheet as remembered (tRD 46/70 us, tPROG 220/600 us, tBERS 2/10 ms): not verified
/// against a copy.
pub const MT29F1G01ABAFD: Part = Part {
    name: "MT29F1G01ABAFD",
    geometry: Geometry::new(2048, 128, 64, 1024, 1, 1, 1),
    capabilities: Capabilities {
        program_unit: 512,
        nop: 4,
        ecc: Ecc {
            kind: EccKind::OnDie,
            reporting: EccReporting::PageWide,
            step_size: 512,
            strength: 8,
            scrub_threshold: 6,
        },
        oob: OobLayout::new(&[
            OobRegion::unprotected(4, 28),
            OobRegion::protected(32, 8, 0),
            OobRegion::protected(40, 8, 1),
            OobRegion::protected(48, 8, 2),
            OobRegion::protected(56, 8, 3),
        ]),
        bad_block_marker: BadBlockMarker::SPI,
    },
    times: ArrayTimes {
        read: TimeRange::us(46, 70),
        program: TimeRange::us(220, 600),
        erase: TimeRange::us(2000, 10_000),
    },
    max_factory_bad: 20,
    endurance: 100_000,
};

/// Micron MT29F2G08AAB: 2 Gbit parallel (x8) NAND without on-die ECC (pair it with a host
/// ECC wrapper), 2 planes, marker at byte 0 of pages 0 and 1, bytes 2..64 free.
pub const MT29F2G08: Part = Part {
    name: "MT29F2G08",
    geometry: Geometry::new(2048, 64, 64, 2048, 2, 1, 1),
    capabilities: Capabilities {
        program_unit: 512,
        nop: 4,
        ecc: Ecc::NONE,
        oob: OobLayout::new(&[OobRegion::unprotected(2, 62)]),
        bad_block_marker: BadBlockMarker::RAW_LARGE_PAGE,
    },
    times: ArrayTimes {
        read: TimeRange::us(25, 25),
        program: TimeRange::us(300, 700),
        erase: TimeRange::us(2000, 3000),
    },
    max_factory_bad: 40,
    endurance: 100_000,
};

/// Every part.
pub const ALL: [Part; 5] = [W25N01GV, W25M02GV, GD5F1GQ4XA, MT29F1G01ABAFD, MT29F2G08];

const _: () = {
    let mut i = 0;
    while i < ALL.len() {
        assert!(ALL[i].validate().is_ok());
        i += 1;
    }
};
