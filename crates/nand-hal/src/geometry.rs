//! Physical organisation of a NAND device and the addresses used to talk to it.
//!
//! A device is `channels x dies_per_channel` dies (LUNs); each die holds
//! `blocks_per_die` erase blocks of `pages_per_block` pages; each page has
//! `page_size` data bytes followed by `oob_size` spare (OOB) bytes.
//!
//! Blocks are numbered device-wide. Die `d` (device-wide index) owns blocks
//! `d * blocks_per_die .. (d + 1) * blocks_per_die`, and sits on channel
//! `d % channels` as die `d / channels` of that channel, so consecutive dies alternate
//! channels and striping over die indices spreads work over channels first.
//! Planes split a die's blocks by `block % planes_per_die`.

use core::fmt;

/// A device-wide erase-block index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockAddr(pub u32);

/// A device-wide page index (the "row address": `block * pages_per_block + page`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PageAddr(pub u32);

/// A parallel unit: one die on one channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DieAddr {
    /// Device-wide die index (`0..Geometry::dies()`).
    pub index: u16,
    /// The channel (bus) the die is on.
    pub channel: u16,
    /// The die's position on its channel (chip select / die select).
    pub die_on_channel: u16,
}

impl fmt::Display for BlockAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "block {}", self.0)
    }
}

impl fmt::Display for PageAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "page {}", self.0)
    }
}

/// Why a [`Geometry`] was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum GeometryError {
    /// Page size must be a power of two between 256 and 16384 bytes.
    PageSize,
    /// OOB size must be between 8 and 1024 bytes.
    OobSize,
    /// Pages per block must be a power of two between 2 and 1024.
    PagesPerBlock,
    /// Each die needs at least 2 blocks, and a whole number of blocks per plane.
    BlocksPerDie,
    /// Planes per die must be 1, 2 or 4.
    Planes,
    /// Between 1 and [`MAX_DIES`] dies, on 1 to [`MAX_CHANNELS`] channels.
    Dies,
    /// The total page count must fit in a `u32` row address.
    TooLarge,
}

impl fmt::Display for GeometryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            GeometryError::PageSize => "page size must be a power of two in 256..=16384",
            GeometryError::OobSize => "OOB size must be in 8..=1024",
            GeometryError::PagesPerBlock => "pages per block must be a power of two in 2..=1024",
            GeometryError::BlocksPerDie => "blocks per die must be >= 2 and a multiple of planes",
            GeometryError::Planes => "planes per die must be 1, 2 or 4",
            GeometryError::Dies => "dies/channels out of range",
            GeometryError::TooLarge => "page count does not fit a 32-bit row address",
        };
        f.write_str(s)
    }
}

impl core::error::Error for GeometryError {}

/// Most dies any geometry may have (all channels together).
pub const MAX_DIES: usize = 16;
/// Most channels any geometry may have.
pub const MAX_CHANNELS: usize = 8;

/// Validated device geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Geometry {
    page_size: u32,
    oob_size: u32,
    pages_per_block: u32,
    blocks_per_die: u32,
    planes_per_die: u32,
    dies_per_channel: u32,
    channels: u32,
}

impl Geometry {
    /// Checks and builds a geometry.
    pub const fn try_new(
        page_size: u32,
        oob_size: u32,
        pages_per_block: u32,
        blocks_per_die: u32,
        planes_per_die: u32,
        dies_per_channel: u32,
        channels: u32,
    ) -> Result<Self, GeometryError> {
        if !page_size.is_power_of_two() || page_size < 256 || page_size > 16384 {
            return Err(GeometryError::PageSize);
        }
        if oob_size < 8 || oob_size > 1024 {
            return Err(GeometryError::OobSize);
        }
        if !pages_per_block.is_power_of_two() || pages_per_block < 2 || pages_per_block > 1024 {
            return Err(GeometryError::PagesPerBlock);
        }
        if !(planes_per_die == 1 || planes_per_die == 2 || planes_per_die == 4) {
            return Err(GeometryError::Planes);
        }
        if blocks_per_die < 2 || blocks_per_die % planes_per_die != 0 {
            return Err(GeometryError::BlocksPerDie);
        }
        if channels == 0
            || channels as usize > MAX_CHANNELS
            || dies_per_channel == 0
            || dies_per_channel as u64 * channels as u64 > MAX_DIES as u64
        {
            return Err(GeometryError::Dies);
        }
        let blocks = blocks_per_die as u64 * dies_per_channel as u64 * channels as u64;
        if blocks * pages_per_block as u64 > u32::MAX as u64 {
            return Err(GeometryError::TooLarge);
        }
        Ok(Geometry {
            page_size,
            oob_size,
            pages_per_block,
            blocks_per_die,
            planes_per_die,
            dies_per_channel,
            channels,
        })
    }

    /// Like [`Geometry::try_new`] but panics on invalid input; use it in `const`
    /// items so a bad constant is a compile error.
    pub const fn new(
        page_size: u32,
        oob_size: u32,
        pages_per_block: u32,
        blocks_per_die: u32,
        planes_per_die: u32,
        dies_per_channel: u32,
        channels: u32,
    ) -> Self {
        match Self::try_new(
            page_size,
            oob_size,
            pages_per_block,
            blocks_per_die,
            planes_per_die,
            dies_per_channel,
            channels,
        ) {
            Ok(g) => g,
            Err(_) => panic!("invalid NAND geometry"),
        }
    }

    /// Data bytes per page.
    pub const fn page_size(&self) -> u32 {
        self.page_size
    }
    /// Spare (OOB) bytes per page.
    pub const fn oob_size(&self) -> u32 {
        self.oob_size
    }
    /// Data plus spare bytes per page.
    pub const fn raw_page_size(&self) -> u32 {
        self.page_size + self.oob_size
    }
    /// Pages per erase block.
    pub const fn pages_per_block(&self) -> u32 {
        self.pages_per_block
    }
    /// Data bytes per erase block.
    pub const fn block_size(&self) -> u32 {
        self.page_size * self.pages_per_block
    }
    /// Blocks on each die.
    pub const fn blocks_per_die(&self) -> u32 {
        self.blocks_per_die
    }
    /// Planes per die.
    pub const fn planes_per_die(&self) -> u32 {
        self.planes_per_die
    }
    /// Dies on each channel.
    pub const fn dies_per_channel(&self) -> u32 {
        self.dies_per_channel
    }
    /// Channels (independent buses).
    pub const fn channels(&self) -> u32 {
        self.channels
    }
    /// Dies on the whole device.
    pub const fn dies(&self) -> u32 {
        self.dies_per_channel * self.channels
    }
    /// Blocks on the whole device.
    pub const fn blocks(&self) -> u32 {
        self.blocks_per_die * self.dies()
    }
    /// Pages on the whole device.
    pub const fn pages(&self) -> u32 {
        self.blocks() * self.pages_per_block
    }
    /// Data capacity of the whole device in bytes.
    pub const fn capacity(&self) -> u64 {
        self.pages() as u64 * self.page_size as u64
    }

    /// The block holding `page`.
    pub const fn block_of(&self, page: PageAddr) -> BlockAddr {
        BlockAddr(page.0 / self.pages_per_block)
    }
    /// The index of `page` inside its block.
    pub const fn page_in_block(&self, page: PageAddr) -> u32 {
        page.0 % self.pages_per_block
    }
    /// Page `index` of `block`.
    pub const fn page(&self, block: BlockAddr, index: u32) -> PageAddr {
        PageAddr(block.0 * self.pages_per_block + index)
    }
    /// Whether `block` exists.
    pub const fn contains_block(&self, block: BlockAddr) -> bool {
        block.0 < self.blocks()
    }
    /// Whether `page` exists.
    pub const fn contains_page(&self, page: PageAddr) -> bool {
        page.0 < self.pages()
    }
    /// The die (parallel unit) that holds `block`. `block` must exist.
    pub const fn die_of(&self, block: BlockAddr) -> DieAddr {
        let index = block.0 / self.blocks_per_die;
        DieAddr {
            index: index as u16,
            channel: (index % self.channels) as u16,
            die_on_channel: (index / self.channels) as u16,
        }
    }
    /// The die with device-wide index `index` (`< dies()`).
    pub const fn die(&self, index: u32) -> DieAddr {
        DieAddr {
            index: index as u16,
            channel: (index % self.channels) as u16,
            die_on_channel: (index / self.channels) as u16,
        }
    }
    /// The channel that carries `block`'s traffic.
    pub const fn channel_of(&self, block: BlockAddr) -> u32 {
        self.die_of(block).channel as u32
    }
    /// The plane of `block` within its die.
    pub const fn plane_of(&self, block: BlockAddr) -> u32 {
        block.0 % self.planes_per_die
    }
    /// The first block of die `die` (device-wide index).
    pub const fn first_block_of_die(&self, die: u32) -> BlockAddr {
        BlockAddr(die * self.blocks_per_die)
    }
}

impl fmt::Display for Geometry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}+{} B pages, {} pages/block, {} blocks/die, {} plane(s), {} die(s) x {} channel(s)",
            self.page_size,
            self.oob_size,
            self.pages_per_block,
            self.blocks_per_die,
            self.planes_per_die,
            self.dies_per_channel,
            self.channels
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W25N: Geometry = Geometry::new(2048, 64, 64, 1024, 1, 1, 1);

    #[test]
    fn sizes() {
        assert_eq!(W25N.blocks(), 1024);
        assert_eq!(W25N.pages(), 65536);
        assert_eq!(W25N.capacity(), 128 << 20);
        assert_eq!(W25N.block_size(), 128 << 10);
        assert_eq!(W25N.raw_page_size(), 2112);
    }

    #[test]
    fn addressing_round_trips() {
        let p = W25N.page(BlockAddr(7), 5);
        assert_eq!(p, PageAddr(7 * 64 + 5));
        assert_eq!(W25N.block_of(p), BlockAddr(7));
        assert_eq!(W25N.page_in_block(p), 5);
        assert!(W25N.contains_page(PageAddr(65535)));
        assert!(!W25N.contains_page(PageAddr(65536)));
    }

    #[test]
    fn dies_alternate_channels() {
        let g = Geometry::new(2048, 64, 64, 256, 1, 2, 4);
        assert_eq!(g.dies(), 8);
        assert_eq!(g.blocks(), 2048);
        let d = g.die_of(BlockAddr(256 * 5 + 3));
        assert_eq!(d.index, 5);
        assert_eq!(d.channel, 1);
        assert_eq!(d.die_on_channel, 1);
        assert_eq!(g.first_block_of_die(5), BlockAddr(1280));
    }

    #[test]
    fn rejects_bad_values() {
        assert_eq!(
            Geometry::try_new(2000, 64, 64, 1024, 1, 1, 1),
            Err(GeometryError::PageSize)
        );
        assert_eq!(
            Geometry::try_new(2048, 4, 64, 1024, 1, 1, 1),
            Err(GeometryError::OobSize)
        );
        assert_eq!(
            Geometry::try_new(2048, 64, 63, 1024, 1, 1, 1),
            Err(GeometryError::PagesPerBlock)
        );
        assert_eq!(
            Geometry::try_new(2048, 64, 64, 1023, 2, 1, 1),
            Err(GeometryError::BlocksPerDie)
        );
        assert_eq!(
            Geometry::try_new(2048, 64, 64, 1024, 3, 1, 1),
            Err(GeometryError::Planes)
        );
        assert_eq!(
            Geometry::try_new(2048, 64, 64, 1024, 1, 0, 1),
            Err(GeometryError::Dies)
        );
        assert_eq!(
            Geometry::try_new(2048, 64, 64, 1024, 1, 4, 8),
            Err(GeometryError::Dies)
        );
        assert_eq!(
            Geometry::try_new(16384, 64, 1024, 1 << 20, 1, 16, 1),
            Err(GeometryError::TooLarge)
        );
        // Found by fuzzing: a die count that overflows when multiplied.
        assert_eq!(
            Geometry::try_new(2048, 64, 64, 2, 1, 0x8000_0000, 2),
            Err(GeometryError::Dies)
        );
    }
}
