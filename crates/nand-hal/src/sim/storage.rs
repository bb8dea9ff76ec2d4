//! Where the simulator keeps the cells and its per-page / per-block state.
//!
//! [`SliceStorage`] runs over caller-provided buffers (no allocator: firmware gives it
//! `static` arrays). [`HeapStorage`] (feature `alloc`) allocates a block's cells only
//! when it is first programmed and frees them on erase, so a 128 MiB part that a test
//! touches lightly costs little memory; with `std` it saves to and loads from a file
//! (format in `docs/SPEC.md`, "Simulator image").

use crate::capabilities::MAX_STEPS;
use crate::geometry::Geometry;

/// Per-page simulator state (not visible through the NAND trait).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PageState {
    /// Program operations since the last erase (NOP accounting).
    pub programs: u8,
    /// Bit mask of ECC steps written since the last erase.
    pub written: u8,
    /// [`PageState::UNSTABLE`] and friends.
    pub flags: u8,
    /// Bit mask of the ECC steps an interrupted or failed program harmed (its torn
    /// steps): [`PageState::TORN`] and [`PageState::UNSTABLE`] act on these steps only.
    pub torn_steps: u8,
    /// Persistent bit errors per ECC step (virtual: the cells keep the intended data,
    /// reads apply these at fixed positions and run the ECC model over them).
    pub flips: [u8; MAX_STEPS],
}

impl PageState {
    /// The page was being programmed or its block erased when power was cut: its torn
    /// steps ([`PageState::torn_steps`]) read well or badly, in any order.
    pub const UNSTABLE: u8 = 1;
    /// An erase reported success without erasing (F11): the cells still hold old data.
    pub const STALE: u8 = 2;
    /// A program of this page was interrupted or failed: on a part with ECC, a torn
    /// step holding only a few programmed bits decodes as erased with corrected bits.
    pub const TORN: u8 = 4;
}

/// Per-block simulator state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockState {
    /// Erase operations (attempts included) over the block's life.
    pub erase_count: u32,
    /// Reads since the last erase (drives read disturb).
    pub reads_since_erase: u32,
    /// Program/erase cycles this block survives before wearing out (0 = no limit).
    pub endurance: u32,
    /// One more than the highest page programmed since the last erase (0 = none).
    pub next_page: u16,
    /// [`BlockState::BAD`] and friends.
    pub flags: u8,
}

impl BlockState {
    /// Marked bad (factory or grown): I/O other than is_bad / mark_bad is misuse.
    pub const BAD: u8 = 1;
    /// Marked bad at the factory.
    pub const FACTORY_BAD: u8 = 2;
    /// The next erase fails (injected).
    pub const FAIL_NEXT_ERASE: u8 = 4;
    /// The next program to this block fails (injected).
    pub const FAIL_NEXT_PROGRAM: u8 = 8;
}

/// Storage the simulator runs over. Cells are kept per block; an implementation may
/// report an untouched block as `None` (all `0xFF`).
pub trait SimStorage {
    /// The raw cells (page data + spare for each page of the block), or `None` when the
    /// block is fully erased and not materialised.
    fn block(&self, block: u32) -> Option<&[u8]>;
    /// The block's raw cells, materialised as all `0xFF` if needed.
    fn block_mut(&mut self, block: u32) -> &mut [u8];
    /// Returns the block's cells to all `0xFF`.
    fn erase_block(&mut self, block: u32);
    /// Per-page state, indexed by device-wide page index.
    fn pages(&self) -> &[PageState];
    /// Mutable per-page state.
    fn pages_mut(&mut self) -> &mut [PageState];
    /// Per-block state.
    fn blocks(&self) -> &[BlockState];
    /// Mutable per-block state.
    fn blocks_mut(&mut self) -> &mut [BlockState];
}

/// Buffer sizes [`SliceStorage`] needs for a geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StorageSize {
    /// Bytes of cells: `pages * (page_size + oob_size)`.
    pub cells: usize,
    /// Number of [`PageState`]s.
    pub pages: usize,
    /// Number of [`BlockState`]s.
    pub blocks: usize,
}

impl StorageSize {
    /// The sizes for `geometry`.
    pub const fn of(geometry: &Geometry) -> Self {
        StorageSize {
            cells: geometry.pages() as usize * geometry.raw_page_size() as usize,
            pages: geometry.pages() as usize,
            blocks: geometry.blocks() as usize,
        }
    }
}

/// The buffers handed to [`SliceStorage::new`] are the wrong size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StorageSizeError {
    /// What the geometry needs.
    pub needed: StorageSize,
}

impl core::fmt::Display for StorageSizeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "simulator storage needs {} cell bytes, {} page states and {} block states",
            self.needed.cells, self.needed.pages, self.needed.blocks
        )
    }
}

impl core::error::Error for StorageSizeError {}

/// Simulator storage over caller-provided buffers.
#[derive(Debug)]
pub struct SliceStorage<'a> {
    cells: &'a mut [u8],
    pages: &'a mut [PageState],
    blocks: &'a mut [BlockState],
    block_bytes: usize,
}

impl<'a> SliceStorage<'a> {
    /// Wraps the buffers and erases them (cells to `0xFF`, state to default). Each buffer
    /// must be exactly [`StorageSize::of`] `geometry`.
    pub fn new(
        geometry: &Geometry,
        cells: &'a mut [u8],
        pages: &'a mut [PageState],
        blocks: &'a mut [BlockState],
    ) -> Result<Self, StorageSizeError> {
        let needed = StorageSize::of(geometry);
        if cells.len() != needed.cells
            || pages.len() != needed.pages
            || blocks.len() != needed.blocks
        {
            return Err(StorageSizeError { needed });
        }
        cells.fill(0xFF);
        pages.fill(PageState::default());
        blocks.fill(BlockState::default());
        let block_bytes = geometry.pages_per_block() as usize * geometry.raw_page_size() as usize;
        Ok(SliceStorage {
            cells,
            pages,
            blocks,
            block_bytes,
        })
    }
}

impl SimStorage for SliceStorage<'_> {
    fn block(&self, block: u32) -> Option<&[u8]> {
        let start = block as usize * self.block_bytes;
        Some(&self.cells[start..start + self.block_bytes])
    }
    fn block_mut(&mut self, block: u32) -> &mut [u8] {
        let start = block as usize * self.block_bytes;
        &mut self.cells[start..start + self.block_bytes]
    }
    fn erase_block(&mut self, block: u32) {
        self.block_mut(block).fill(0xFF);
    }
    fn pages(&self) -> &[PageState] {
        self.pages
    }
    fn pages_mut(&mut self) -> &mut [PageState] {
        self.pages
    }
    fn blocks(&self) -> &[BlockState] {
        self.blocks
    }
    fn blocks_mut(&mut self) -> &mut [BlockState] {
        self.blocks
    }
}

#[cfg(feature = "alloc")]
pub use heap::HeapStorage;

#[cfg(feature = "alloc")]
mod heap {
    use super::*;
    use alloc::boxed::Box;
    use alloc::vec;
    use alloc::vec::Vec;

    /// Heap-backed simulator storage; blocks are materialised on first program and freed
    /// on erase. `Clone` gives a cheap snapshot of a whole device.
    #[derive(Clone, Debug)]
    pub struct HeapStorage {
        geometry: Geometry,
        cells: Vec<Option<Box<[u8]>>>,
        pages: Vec<PageState>,
        blocks: Vec<BlockState>,
        block_bytes: usize,
    }

    impl HeapStorage {
        /// A blank (fully erased) device of `geometry`.
        pub fn new(geometry: &Geometry) -> Self {
            let block_bytes =
                geometry.pages_per_block() as usize * geometry.raw_page_size() as usize;
            HeapStorage {
                geometry: *geometry,
                cells: vec![None; geometry.blocks() as usize],
                pages: vec![PageState::default(); geometry.pages() as usize],
                blocks: vec![BlockState::default(); geometry.blocks() as usize],
                block_bytes,
            }
        }

        /// The geometry this storage was made for.
        pub fn geometry(&self) -> &Geometry {
            &self.geometry
        }

        /// Blocks whose cells are currently allocated.
        pub fn materialised_blocks(&self) -> usize {
            self.cells.iter().filter(|c| c.is_some()).count()
        }
    }

    impl SimStorage for HeapStorage {
        fn block(&self, block: u32) -> Option<&[u8]> {
            self.cells[block as usize].as_deref()
        }
        fn block_mut(&mut self, block: u32) -> &mut [u8] {
            let bytes = self.block_bytes;
            self.cells[block as usize].get_or_insert_with(|| vec![0xFF; bytes].into_boxed_slice())
        }
        fn erase_block(&mut self, block: u32) {
            self.cells[block as usize] = None;
        }
        fn pages(&self) -> &[PageState] {
            &self.pages
        }
        fn pages_mut(&mut self) -> &mut [PageState] {
            &mut self.pages
        }
        fn blocks(&self) -> &[BlockState] {
            &self.blocks
        }
        fn blocks_mut(&mut self) -> &mut [BlockState] {
            &mut self.blocks
        }
    }

    #[cfg(feature = "std")]
    mod file {
        use super::*;
        use std::io::{self, Read, Write};

        const MAGIC: &[u8; 8] = b"NANDSIM\0";
        const VERSION: u32 = 1;
        /// Largest device an image may describe (8 GiB of 2 KiB pages), so a corrupt
        /// header cannot make `load` allocate without bound.
        const MAX_IMAGE_PAGES: u32 = 1 << 22;

        fn geometry_words(g: &Geometry) -> [u32; 7] {
            [
                g.page_size(),
                g.oob_size(),
                g.pages_per_block(),
                g.blocks_per_die(),
                g.planes_per_die(),
                g.dies_per_channel(),
                g.channels(),
            ]
        }

        fn bad(msg: &str) -> io::Error {
            io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
        }

        fn read_u32(r: &mut impl Read) -> io::Result<u32> {
            let mut b = [0u8; 4];
            r.read_exact(&mut b)?;
            Ok(u32::from_le_bytes(b))
        }

        impl HeapStorage {
            /// Writes the device (cells and simulator state) to `w` in the simulator image
            /// format (`docs/SPEC.md`).
            pub fn save(&self, w: &mut impl Write) -> io::Result<()> {
                w.write_all(MAGIC)?;
                w.write_all(&VERSION.to_le_bytes())?;
                for v in geometry_words(&self.geometry) {
                    w.write_all(&v.to_le_bytes())?;
                }
                for (b, cells) in self.cells.iter().enumerate() {
                    let st = &self.blocks[b];
                    w.write_all(&st.erase_count.to_le_bytes())?;
                    w.write_all(&st.reads_since_erase.to_le_bytes())?;
                    w.write_all(&st.endurance.to_le_bytes())?;
                    w.write_all(&st.next_page.to_le_bytes())?;
                    w.write_all(&[st.flags, cells.is_some() as u8])?;
                    if let Some(c) = cells {
                        w.write_all(c)?;
                    }
                }
                for p in &self.pages {
                    w.write_all(&[p.programs, p.written, p.flags, p.torn_steps])?;
                    w.write_all(&p.flips)?;
                }
                Ok(())
            }

            /// Reads a device saved by [`HeapStorage::save`]. Fails cleanly on a wrong
            /// magic, version or truncated file.
            pub fn load(r: &mut impl Read) -> io::Result<Self> {
                let mut magic = [0u8; 8];
                r.read_exact(&mut magic)?;
                if &magic != MAGIC {
                    return Err(bad("not a NAND simulator image"));
                }
                if read_u32(r)? != VERSION {
                    return Err(bad("unsupported simulator image version"));
                }
                let mut w = [0u32; 7];
                for v in &mut w {
                    *v = read_u32(r)?;
                }
                let g = Geometry::try_new(w[0], w[1], w[2], w[3], w[4], w[5], w[6])
                    .map_err(|_| bad("invalid geometry in simulator image"))?;
                if g.pages() > MAX_IMAGE_PAGES {
                    return Err(bad("simulator image too large"));
                }
                let mut s = HeapStorage::new(&g);
                for b in 0..g.blocks() as usize {
                    let st = &mut s.blocks[b];
                    st.erase_count = read_u32(r)?;
                    st.reads_since_erase = read_u32(r)?;
                    st.endurance = read_u32(r)?;
                    let mut two = [0u8; 2];
                    r.read_exact(&mut two)?;
                    st.next_page = u16::from_le_bytes(two);
                    r.read_exact(&mut two)?;
                    st.flags = two[0];
                    if two[1] > 1 {
                        return Err(bad("corrupt block record in simulator image"));
                    }
                    if two[1] == 1 {
                        let mut c = vec![0u8; s.block_bytes].into_boxed_slice();
                        r.read_exact(&mut c)?;
                        s.cells[b] = Some(c);
                    }
                }
                for p in &mut s.pages {
                    let mut four = [0u8; 4];
                    r.read_exact(&mut four)?;
                    p.programs = four[0];
                    p.written = four[1];
                    p.flags = four[2];
                    p.torn_steps = four[3];
                    r.read_exact(&mut p.flips)?;
                }
                Ok(s)
            }

            /// Saves to a file at `path`.
            pub fn save_to_file(&self, path: impl AsRef<std::path::Path>) -> io::Result<()> {
                let f = std::fs::File::create(path)?;
                let mut w = io::BufWriter::new(f);
                self.save(&mut w)?;
                w.flush()
            }

            /// Loads from a file at `path`.
            pub fn load_from_file(path: impl AsRef<std::path::Path>) -> io::Result<Self> {
                let f = std::fs::File::open(path)?;
                Self::load(&mut io::BufReader::new(f))
            }
        }
    }
}
