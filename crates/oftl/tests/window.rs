//! The updating window's lower bound: `format` refuses a window below the minimum,
//! `mount` refuses such an image, and the smallest accepted window collects garbage
//! under a GC-heavy load.

use crate::common;
use common::lifecycle::Lifecycle;

use nand_hal::sim::{profile, FaultPlan, HeapStorage, SimNand};
use oftl::{Config, FormatError, MountError, ObjKind, Oftl, W25n01gvLarge};

type Sim = SimNand<HeapStorage>;
/// 4 cached index pages.
type Small<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 2>;
/// 4 cached 512-byte object-table and index pages.
type SmallMeta<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 2, oftl::Greedy, 512>;
/// 16 cached index pages.
type Big<'a> = Oftl<&'a mut Sim, 2048, 64, 16, 2>;

fn cfg(window_blocks: u16) -> Config {
    Config {
        window_blocks,
        format_id: 5,
        ..Default::default()
    }
}

#[test]
fn minimum_is_four_blocks_whatever_the_cache() {
    // Cache write-backs take no window room (index head), so the minimum is an
    // operation, a whole victim and the program-failure reserve: 4 blocks.
    assert_eq!(Small::min_window_blocks(16), 4);
    assert_eq!(Big::min_window_blocks(16), 4);
    assert_eq!(W25n01gvLarge::<&mut Sim>::min_window_blocks(64), 4);
    assert!(
        W25n01gvLarge::<&mut Sim>::min_window_blocks(64) <= Config::default().window_blocks as u32
    );
    assert_eq!(Small::min_window_blocks(0), u32::MAX);
}

#[test]
fn one_block_below_the_minimum_is_refused() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(1));
    for err in [
        Small::formatted(&mut sim, cfg(3)).err(),
        Big::formatted(&mut sim, cfg(3)).err(),
    ] {
        assert_eq!(
            err,
            Some(FormatError::WindowTooSmall {
                needed_blocks: 4,
                given_blocks: 3
            })
        );
    }
    // Nothing was written: the part is still unformatted.
    assert_eq!(sim.counters().programs, 0);
    assert!(matches!(
        Small::mounted(&mut sim),
        Err(MountError::NotFormatted)
    ));

    let mut fs = Small::new(&mut sim, cfg(3), Default::default());
    assert_eq!(
        fs.format(),
        Err(FormatError::WindowTooSmall {
            needed_blocks: 4,
            given_blocks: 3
        })
    );
    assert_eq!(fs.create(ObjKind::Object), Err(oftl::WriteError::Poisoned));
    let mut fs = Small::new(fs.into_flash(), cfg(4), Default::default());
    fs.format().unwrap();
    fs.create(ObjKind::Object).unwrap();
}

/// An image whose superblock names a window below the minimum (a damaged image, or one
/// written by another build) is refused by mount with its own error.
#[test]
fn image_with_a_window_too_small_is_not_mounted() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(2));
    let mut fs = Small::formatted(&mut sim, cfg(6)).unwrap();
    let id = fs.create(ObjKind::Object).unwrap();
    fs.write(id, 0, &[7u8; 3000]).unwrap();
    fs.unmount().unwrap();
    let crc = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC);
    for b in 0..2 {
        let page = nand_hal::PageAddr(b * 16);
        let mut d = vec![0u8; 2048];
        sim.peek(page, &mut d, &mut []);
        assert_eq!(&d[..4], b"OFTL");
        d[128..130].copy_from_slice(&3u16.to_le_bytes());
        let c = crc.checksum(&d[..508]);
        d[508..512].copy_from_slice(&c.to_le_bytes());
        sim.poke(page, 0, &d[..512], &[]);
    }
    assert_eq!(
        Small::mounted(&mut sim).err(),
        Some(MountError::WindowTooSmall {
            needed_blocks: 4,
            given_blocks: 3
        })
    );
    let mut small = Small::new(&mut sim, oftl::Config::new(), Default::default());
    assert_eq!(
        small.mount(),
        Err(MountError::WindowTooSmall {
            needed_blocks: 4,
            given_blocks: 3
        })
    );
    assert_eq!(sim.counters().misuse, 0);
}

/// The smallest accepted window (4 blocks) on a cache-starved build: 6 objects at ~45 % fill,
/// skewed overwrites with idle `gc_step`s. Every write succeeds, GC reclaims space
/// (far more pages are written than the part holds) and the content reads back.
#[test]
fn boundary_window_survives_gc_heavy_overwrites() {
    const OBJS: usize = 6;
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(3));
    let mut fs = Small::formatted(&mut sim, cfg(4)).unwrap();
    let page = fs.payload() as u64;
    let per_obj = fs.capacity_pages() * 45 / 100 / OBJS as u64;
    let mut ids = [0; OBJS];
    let mut gen = vec![vec![0u8; per_obj as usize]; OBJS];
    for (o, id) in ids.iter_mut().enumerate() {
        *id = fs.create(ObjKind::Object).unwrap();
        for p in 0..per_obj {
            fs.write(*id, p * page, &vec![o as u8; page as usize])
                .unwrap();
        }
    }
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for i in 0..4_000u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let o = (x % OBJS as u64) as usize;
        let p = if x % 10 < 8 {
            (x / 10) % (per_obj / 4)
        } else {
            (x / 10) % per_obj
        };
        let g = &mut gen[o][p as usize];
        *g = g.wrapping_add(1);
        let fill = (o as u8) ^ g.wrapping_mul(31);
        fs.write(ids[o], p * page, &vec![fill; page as usize])
            .unwrap();
        if i % 64 == 63 {
            fs.gc_step(16).unwrap();
        }
    }
    fs.sync().unwrap();
    let st = fs.stats();
    assert!(st.relocated_pages > 0, "GC never ran");
    let programs = fs.flash().counters().programs;
    assert!(
        programs > 4 * 64 * 16,
        "programs {programs}: the part was not recycled"
    );
    let mut fs = {
        fs.unmount().unwrap();
        Small::mounted(&mut sim).unwrap()
    };
    let mut buf = vec![0u8; page as usize];
    for (o, id) in ids.iter().enumerate() {
        for p in 0..per_obj {
            fs.read(*id, p * page, &mut buf).unwrap();
            let fill = (o as u8) ^ gen[o][p as usize].wrapping_mul(31);
            assert!(buf.iter().all(|&b| b == fill), "object {o} page {p}");
        }
    }
    assert_eq!(sim.counters().misuse, 0);
}

/// Cache write-backs bring checkpoints before the window fills: a crash recovery writes
/// them back again as it replays, so they count as recovery work (12 page reads' worth
/// each, against one per page written), and an operation checkpoints first once the
/// work since the last checkpoint passes three-quarters of a window with 16 checkpoint
/// blocks (more with fewer, whose erases the extra checkpoints would concentrate on).
/// 512-byte table pages (16 records each) and a 4-page cache: 100 objects' records
/// over seven table pages, so nearly every write evicts a dirty one.
#[test]
fn cache_write_backs_bring_checkpoints_sooner() {
    let run = |ckpt: u8| {
        let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(7));
        let mut fs = SmallMeta::formatted(&mut sim, cfg(6).checkpoint_blocks(ckpt)).unwrap();
        let ids: Vec<_> = (0..100)
            .map(|_| fs.create(ObjKind::Object).unwrap())
            .collect();
        fs.sync().unwrap();
        let st0 = fs.stats();
        for i in 0..400u32 {
            let o = ids[(i as usize * 37) % ids.len()];
            fs.write(o, 0, &[i as u8; 64]).unwrap();
            fs.flush(o).unwrap();
        }
        let st = fs.stats();
        drop(fs);
        let mut fs = SmallMeta::mounted(&mut sim).unwrap();
        let rec = fs.stats();
        for (k, &o) in ids.iter().enumerate() {
            let mut b = [0u8; 64];
            let n = fs.read(o, 0, &mut b).unwrap();
            let last = (0..400u32)
                .rev()
                .find(|i| (*i as usize * 37) % ids.len() == k);
            match last {
                Some(i) => assert_eq!((n, b), (64, [i as u8; 64]), "object {k}"),
                None => assert_eq!(n, 0),
            }
        }
        (
            st.checkpoints - st0.checkpoints,
            st.index_evictions - st0.index_evictions,
            rec.index_evictions,
            rec.recovery_scanned_pages,
        )
    };
    let four = run(4);
    let sixteen = run(16);
    println!("4 checkpoint blocks: {four:?}; 16: {sixteen:?}");
    // Work bound: 96 window pages x 12 / 16 = 72 (six write-backs) with 16 blocks,
    // four times that with 4: more than three times the checkpoints, fewer write-backs
    // (a checkpoint flushes a page that would have been written back again), and the
    // recovery after the crash within twice the bound.
    // (Pages scanned: 31 and 16 before operations erased their blocks ahead; a walk
    // now stops after nine erased pages at the start of a window block, where it read
    // the whole of a never-used block, and it reads nine of the block erased ahead,
    // where the stale first page of an older life ended it after one.)
    // (The recovery wrote 3 pages back until stop 42, when it began moving the cut
    // block's pages owner by owner: 2. Since stop 48 a recovery whose cut left nothing
    // after the data head's last commit leaves that block to collection while the pool
    // has two blocks above its floor, as with 4 checkpoint blocks here: 0.)
    assert_eq!(four, (12, 264, 0, 24));
    assert_eq!(sixteen, (40, 240, 2, 24));
    assert!(sixteen.2 * 12 + sixteen.3 as u64 <= 2 * 72, "{sixteen:?}");
}

/// A crash in the middle of log appends: the mount moves only the log's last page
/// (from the copy its scan read), and leaves the rest of the log head's block to
/// background collection, which takes it first; every acknowledged record reads back
/// before and after.
#[test]
fn a_recovery_leaves_the_log_block_to_background_collection() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(3));
    let ppb = nand_hal::NandFlash::geometry(&sim).pages_per_block();
    // The log head's second block nearly full at the cut (four records a page).
    let records = 4 * (2 * ppb - 2) + 3;
    let stream;
    {
        let mut fs = Big::formatted(&mut sim, cfg(6)).unwrap();
        stream = fs.create(ObjKind::Log).unwrap();
        fs.sync().unwrap();
        for i in 0..records {
            fs.log_append(stream, &[i as u8; 64]).unwrap();
        }
        fs.flash_mut().cut_power();
    }
    sim.power_on();
    let mut fs = Big::mounted(&mut sim).unwrap();
    let read_all = |fs: &mut Big<'_>| {
        let mut buf = [0u8; 512];
        let (mut lsn, mut n) = (fs.log_bounds(stream).unwrap().0, 0u32);
        while let Some(r) = fs.log_read(stream, lsn, &mut buf).unwrap() {
            assert_eq!(&buf[..r.len], &[n as u8; 64][..], "record {n}");
            n += 1;
            lsn = r.next;
        }
        n
    };
    // At most the last page (one partly written) moved at mount, not the block's pages.
    assert!(fs.stats().relocated_pages <= 1, "{:?}", fs.stats());
    assert_eq!(read_all(&mut fs), records);
    // Background collection takes the log block first: its valid pages move.
    let before = fs.stats().relocated_pages;
    let first = fs.gc_step(u32::MAX).unwrap();
    assert!(first.copied > 0, "{first:?}");
    assert!(fs.stats().relocated_pages > before);
    assert_eq!(read_all(&mut fs), records);
    fs.unmount().unwrap();
    drop(fs);
    let mut fs = Big::mounted(&mut sim).unwrap();
    assert_eq!(read_all(&mut fs), records);
}
