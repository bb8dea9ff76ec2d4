//! Part profiles: geometry, capabilities and datasheet timings of real chips, and a tiny
//! fast-test part. Sources for every number are in `docs/DESIGN.md` (simulator section)
//! and `shared/reference/perf-reliability.md` section 1.7 / 3(i).

use crate::capabilities::Capabilities;
use crate::geometry::Geometry;
use crate::parts::{self, Part};

pub use crate::parts::TimeRange;

/// The cost model of one part: command overhead and bus time on the channel, array
/// time on the die.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Timing {
    /// Fixed cost of a read command sequence on the bus.
    pub cmd_read_ns: u32,
    /// Fixed cost of a program command sequence on the bus.
    pub cmd_program_ns: u32,
    /// Fixed cost of an erase command sequence on the bus.
    pub cmd_erase_ns: u32,
    /// Bus time per byte moved, in picoseconds (19 231 ps = quad SPI at 104 MHz).
    pub bus_ps_per_byte: u32,
    /// Array read (tR / tRD).
    pub t_read: TimeRange,
    /// Array program (tPROG / tPP), charged per program operation whatever its size.
    pub t_program: TimeRange,
    /// Block erase (tBERS / tBE).
    pub t_erase: TimeRange,
}

impl Timing {
    /// Bus time to move `bytes` bytes, in nanoseconds (rounded up).
    pub const fn bus_ns(&self, bytes: u64) -> u64 {
        (bytes * self.bus_ps_per_byte as u64).div_ceil(1000)
    }
}

/// A simulated part: everything the simulator needs besides storage and faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Profile {
    /// Part name, for reports.
    pub name: &'static str,
    /// Geometry.
    pub geometry: Geometry,
    /// Capabilities.
    pub capabilities: Capabilities,
    /// Cost model.
    pub timing: Timing,
    /// Most factory bad blocks the datasheet allows (per device).
    pub max_factory_bad: u32,
    /// Rated program/erase cycles per block.
    pub endurance: u32,
}

impl Profile {
    /// The same part with a different number of blocks per die (to keep multi-die
    /// experiments small or to model a bigger sibling).
    pub const fn with_blocks_per_die(mut self, blocks_per_die: u32) -> Self {
        let g = self.geometry;
        self.geometry = Geometry::new(
            g.page_size(),
            g.oob_size(),
            g.pages_per_block(),
            blocks_per_die,
            g.planes_per_die(),
            g.dies_per_channel(),
            g.channels(),
        );
        self
    }

    /// The same part replicated as `dies_per_channel` dies on each of `channels`
    /// channels.
    pub const fn with_dies(mut self, dies_per_channel: u32, channels: u32) -> Self {
        let g = self.geometry;
        self.geometry = Geometry::new(
            g.page_size(),
            g.oob_size(),
            g.pages_per_block(),
            g.blocks_per_die(),
            g.planes_per_die(),
            dies_per_channel,
            channels,
        );
        self
    }

    /// Checks that capabilities and geometry agree (all built-in profiles do).
    pub const fn validate(&self) -> Result<(), crate::CapabilitiesError> {
        self.capabilities.validate(&self.geometry)
    }
}

/// Quad SPI at 104 MHz with the littlefs-benchmarks command overheads (W25N01GV); the
/// array times come from the part.
const fn spi_timing(part: &Part, bus_ps_per_byte: u32) -> Timing {
    Timing {
        cmd_read_ns: 461,
        cmd_program_ns: 614,
        cmd_erase_ns: 384,
        bus_ps_per_byte,
        t_read: part.times.read,
        t_program: part.times.program,
        t_erase: part.times.erase,
    }
}

const fn from_part(part: &Part, timing: Timing) -> Profile {
    Profile {
        name: part.name,
        geometry: part.geometry,
        capabilities: part.capabilities,
        timing,
        max_factory_bad: part.max_factory_bad,
        endurance: part.endurance,
    }
}

/// Winbond W25N01GV: 1 Gbit SPI NAND, 2048 + 64 B pages, 64 pages per block, 1024
/// blocks, 1-bit on-die ECC per 512 B, NOP 4, quad SPI at 104 MHz. The default profile.
pub const W25N01GV: Profile = from_part(&parts::W25N01GV, spi_timing(&parts::W25N01GV, 19_231));

/// Winbond W25M02GV: two W25N01GV dies behind a die-select command on one SPI bus.
pub const W25M02GV: Profile = from_part(&parts::W25M02GV, W25N01GV.timing);

/// The ParaFS experiment device: W25N01GV dies, 2 per channel on 4 channels, cut to
/// 256 blocks per die to keep simulations small (8 dies, 2048 blocks, 256 MiB).
pub const W25N_4CH_2DIE: Profile = Profile {
    name: "W25N01GV x4ch x2die",
    geometry: Geometry::new(2048, 64, 64, 256, 1, 2, 4),
    max_factory_bad: 40,
    ..W25N01GV
};

/// GigaDevice GD5F1GQ4xA: 1 Gbit SPI NAND, 8-bit on-die ECC per 512 B, 31 free spare
/// bytes, marker at byte 0, quad SPI at 108 MHz.
pub const GD5F1GQ4: Profile = from_part(&parts::GD5F1GQ4XA, spi_timing(&parts::GD5F1GQ4XA, 18_519));

/// Micron MT29F1G01ABAFD: 1 Gbit SPI NAND, 2048 + 128 B pages, 8-bit on-die ECC per
/// 512 B, quad SPI at 104 MHz.
pub const MT29F1G01: Profile = from_part(
    &parts::MT29F1G01ABAFD,
    spi_timing(&parts::MT29F1G01ABAFD, 19_231),
);

/// Micron MT29F2G08AAB: 2 Gbit parallel (x8) NAND without on-die ECC (pair it with a
/// host ECC wrapper), 2 planes, marker at byte 0 of pages 0 and 1; x8 bus at 25 ns/B.
pub const MT29F2G08: Profile = from_part(
    &parts::MT29F2G08,
    Timing {
        cmd_read_ns: 300,
        cmd_program_ns: 300,
        cmd_erase_ns: 300,
        bus_ps_per_byte: 25_000,
        t_read: parts::MT29F2G08.times.read,
        t_program: parts::MT29F2G08.times.program,
        t_erase: parts::MT29F2G08.times.erase,
    },
);

/// The parallel ParaFS device: MT29F2G08 dies, 4 LUNs per channel on 2 channels, cut to
/// 256 blocks per die.
pub const MT29F_2CH_4LUN: Profile = Profile {
    name: "MT29F2G08 x2ch x4lun",
    geometry: Geometry::new(2048, 64, 64, 256, 2, 4, 2),
    ..MT29F2G08
};

/// A tiny fast-test part with W25N01GV pages and timings but 16 pages per block and 64
/// blocks (2 MiB), so GC and wear paths run in milliseconds. Fits in 4 MiB of MCU RAM.
pub const TINY: Profile = Profile {
    name: "tiny",
    geometry: Geometry::new(2048, 64, 16, 64, 1, 1, 1),
    max_factory_bad: 2,
    ..W25N01GV
};

// Every built-in profile's capabilities fit its geometry (checked at compile time).
const _: () = {
    let mut i = 0;
    while i < ALL.len() {
        assert!(ALL[i].capabilities.validate(&ALL[i].geometry).is_ok());
        i += 1;
    }
};

/// Every built-in profile.
pub const ALL: [Profile; 8] = [
    W25N01GV,
    W25M02GV,
    W25N_4CH_2DIE,
    GD5F1GQ4,
    MT29F1G01,
    MT29F2G08,
    MT29F_2CH_4LUN,
    TINY,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_profiles_validate() {
        for p in ALL {
            assert_eq!(p.validate(), Ok(()), "{}", p.name);
        }
        assert_eq!(W25N01GV.capabilities.oob.protected_bytes(), 16);
        assert_eq!(GD5F1GQ4.capabilities.oob.free_bytes(), 31);
        assert_eq!(TINY.geometry.capacity(), 2 << 20);
    }

    #[test]
    fn bus_time_rounds_up() {
        assert_eq!(W25N01GV.timing.bus_ns(2112), 40_616);
        assert_eq!(W25N01GV.timing.bus_ns(0), 0);
    }
}
