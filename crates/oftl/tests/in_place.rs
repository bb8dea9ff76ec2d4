//! The in-place API: a store built once (`new`, a `const fn`) and formatted, mounted and
//! unmounted where it lives, as firmware does with a store in a `static`.

use crate::common;
use common::lifecycle::Lifecycle;

use nand_hal::sim::{profile, FaultPlan, HeapStorage, SimNand};
use nand_hal::NandFlash;
use oftl::{Config, Greedy, MountError, ObjKind, Oftl, ReadError, WriteError};

type Sim = SimNand<HeapStorage>;
type Fs<'a> = Oftl<&'a mut Sim, 2048, 64, 4>;

fn cfg() -> Config {
    Config {
        window_blocks: 6,
        format_id: 3,
        ..Default::default()
    }
}

fn bytes(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

#[test]
fn unmounted_store_refuses_io_until_formatted_or_mounted() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(1));
    let mut fs = Fs::new(&mut sim, cfg(), Greedy::DEFAULT);
    assert_eq!(fs.create(ObjKind::Object), Err(WriteError::Poisoned));
    assert_eq!(fs.write(1, 0, &[1]), Err(WriteError::Poisoned));
    let mut buf = [0u8; 4];
    assert_eq!(fs.read(1, 0, &mut buf), Err(ReadError::Poisoned));
    assert_eq!(fs.sync(), Err(WriteError::Poisoned));
    assert_eq!(fs.unmount(), Err(WriteError::Poisoned));
    assert_eq!(fs.objects().collect::<Vec<_>>(), [Err(ReadError::Poisoned)]);
    assert_eq!(fs.size(1), Err(ReadError::Poisoned));
    // An erased device is not formatted; the store stays unmounted.
    assert_eq!(fs.mount(), Err(MountError::NotFormatted));
    assert_eq!(fs.create(ObjKind::Object), Err(WriteError::Poisoned));
    assert_eq!(fs.flash().counters().programs, 0, "nothing was written");
    fs.format().unwrap();
    let o = fs.create(ObjKind::Object).unwrap();
    fs.write(o, 0, &bytes(1, 100)).unwrap();
    assert_eq!(fs.read(o, 0, &mut buf).unwrap(), 4);
    assert_eq!(&buf, &bytes(1, 4)[..]);
}

#[test]
fn format_mount_unmount_in_place() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(2));
    // `new` is a `const fn`: the store could be a `static`.
    let mut fs = Fs::new(&mut sim, cfg(), Greedy::DEFAULT);
    fs.format().unwrap();
    let a = fs.create(ObjKind::Object).unwrap();
    let b = fs.create(ObjKind::Object).unwrap();
    fs.write(a, 0, &bytes(2, 9000)).unwrap();
    fs.write(b, 0, &bytes(3, 100)).unwrap();
    fs.unmount().unwrap();
    assert_eq!(
        fs.write(a, 0, &[0]),
        Err(WriteError::Poisoned),
        "unmounted in place"
    );

    // Clean mount in place: everything back, nothing scanned.
    fs.mount().unwrap();
    assert_eq!(fs.stats().recovery_scanned_pages, 0);
    let mut buf = vec![0u8; 9000];
    assert_eq!(fs.read(a, 0, &mut buf).unwrap(), 9000);
    assert_eq!(buf, bytes(2, 9000));
    assert_eq!(fs.read(b, 0, &mut buf).unwrap(), 100);
    assert_eq!(&buf[..100], &bytes(3, 100)[..]);

    // A crash: more data flushed, the RAM state abandoned, mounted again in place.
    fs.write(b, 100, &bytes(4, 3000)).unwrap();
    fs.flush(b).unwrap();
    fs.write(b, 3100, &bytes(5, 10)).unwrap(); // buffered, never flushed
    fs.mount().unwrap();
    assert!(fs.stats().recovery_scanned_pages > 0, "crash recovery ran");
    let size = fs.size(b).unwrap();
    assert!(size == 3100 || size == 3110, "b is {size} bytes");
    assert_eq!(fs.read(b, 100, &mut buf[..3000]).unwrap(), 3000);
    assert_eq!(&buf[..3000], &bytes(4, 3000)[..]);

    // Formatting in place again starts from nothing.
    fs.format().unwrap();
    assert_eq!(fs.objects().count(), 0);
    assert_eq!(fs.size(a).ok(), None);
    fs.unmount().unwrap();
    fs.mount().unwrap();
    assert_eq!(fs.objects().count(), 0);
    assert_eq!(fs.flash().counters().misuse, 0);
}

#[test]
fn by_value_and_in_place_paths_agree() {
    let mut a = SimNand::heap(profile::TINY, FaultPlan::seeded(3));
    let mut b = SimNand::heap(profile::TINY, FaultPlan::seeded(3));
    {
        let mut fs = Fs::formatted(&mut a, cfg()).unwrap();
        let o = fs.create(ObjKind::Object).unwrap();
        fs.write(o, 0, &bytes(6, 5000)).unwrap();
        fs.unmount().unwrap();
    }
    {
        let mut fs = Fs::new(&mut b, cfg(), Greedy::DEFAULT);
        fs.format().unwrap();
        let o = fs.create(ObjKind::Object).unwrap();
        fs.write(o, 0, &bytes(6, 5000)).unwrap();
        fs.unmount().unwrap();
    }
    assert_eq!(a.counters(), b.counters(), "same operations on the device");
    let geo = a.geometry();
    let (mut pa, mut pb) = (vec![0u8; 2048], vec![0u8; 2048]);
    let (mut oa, mut ob) = (vec![0u8; 64], vec![0u8; 64]);
    for p in 0..geo.pages() {
        a.peek(nand_hal::PageAddr(p), &mut pa, &mut oa);
        b.peek(nand_hal::PageAddr(p), &mut pb, &mut ob);
        assert!(pa == pb && oa == ob, "page {p} differs");
    }
    // Each store mounts the other's path's image.
    let mut fs = Fs::mounted(&mut a).unwrap();
    assert_eq!(fs.objects().count(), 1);
    let mut fs = Fs::new(&mut b, oftl::Config::new(), Greedy::DEFAULT);
    fs.mount().unwrap();
    assert_eq!(fs.objects().count(), 1);
}

#[test]
fn a_device_that_does_not_fit_is_refused_in_place() {
    let mut sim = SimNand::heap(profile::W25N01GV, FaultPlan::seeded(4));
    // 64-block tables for a 1024-block part.
    let mut fs = Fs::new(&mut sim, cfg(), Greedy::DEFAULT);
    assert!(matches!(
        fs.format(),
        Err(oftl::FormatError::Unsupported(oftl::Mismatch::Capacity))
    ));
    assert_eq!(fs.create(ObjKind::Object), Err(WriteError::Poisoned));
    assert!(fs.blocks().len() <= 64);
}

/// Every figure a store answers without touching flash has an answer before a mount
/// and after a failed one (never a panic: a divide by zero in the index-head
/// reserve once took `capacity_pages` and `min_good_blocks` down; found by review).
#[test]
fn figures_of_an_unmounted_store_do_not_panic() {
    fn ask(fs: &Fs<'_>) -> u64 {
        let s = fs.stats();
        fs.capacity_pages()
            + fs.min_good_blocks() as u64
            + fs.used_pages()
            + fs.max_object_size()
            + fs.payload() as u64
            + fs.log_max_record() as u64
            + fs.log_programs_per_page() as u64
            + fs.object_count() as u64
            + fs.next_object_id() as u64
            + fs.blocks().len() as u64
            + fs.salvage_report().unreadable_pages().len() as u64
            + s.checkpoints as u64
            + matches!(fs.health(), oftl::Health::Writable) as u64
    }
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(9));
    let mut fs = Fs::new(&mut sim, cfg(), Greedy::DEFAULT);
    ask(&fs);
    assert_eq!(fs.mount(), Err(MountError::NotFormatted));
    ask(&fs);
    drop(fs);
    sim.scribble(7, 200);
    let mut fs = Fs::new(&mut sim, cfg(), Greedy::DEFAULT);
    assert!(fs.mount().is_err());
    ask(&fs);
    let mut fs = Fs::new(fs.into_flash(), cfg().window_blocks(1), Greedy::DEFAULT);
    assert!(fs.format().is_err());
    ask(&fs);
}

/// A format the part cannot hold (a window too large for its good blocks) is refused
/// before anything is erased: the old store mounts as it was (it was wiped first, and
/// the next mount said `NotFormatted`; found by review).
#[test]
fn a_refused_format_leaves_the_old_store() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(12));
    let o;
    {
        let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
        o = fs.create(ObjKind::Object).unwrap();
        fs.write(o, 0, b"keep me").unwrap();
        fs.unmount().unwrap();
    }
    let before = sim.counters();
    // 20 blocks of window need 3 * 20 + 4 good blocks besides the six fixed ones.
    let mut fs = Fs::new(&mut sim, cfg().window_blocks(20), Greedy::DEFAULT);
    assert_eq!(fs.format(), Err(oftl::FormatError::NotEnoughGoodBlocks));
    assert_eq!(fs.create(ObjKind::Object), Err(WriteError::Poisoned));
    let flash = fs.into_flash();
    assert_eq!(flash.counters().erases, before.erases, "nothing erased");
    assert_eq!(
        flash.counters().programs,
        before.programs,
        "nothing programmed"
    );
    let mut fs = Fs::mounted(flash).unwrap();
    let mut buf = [0u8; 7];
    assert_eq!(fs.read(o, 0, &mut buf).unwrap(), 7);
    assert_eq!(&buf, b"keep me");
    // Windows below the minimum, 0 and 1 included, say so.
    let mut fs = Fs::new(fs.into_flash(), cfg().window_blocks(1), Greedy::DEFAULT);
    assert!(matches!(
        fs.format(),
        Err(oftl::FormatError::WindowTooSmall {
            given_blocks: 1,
            ..
        })
    ));
}

/// A format starts a new store, with nothing of the last repair's report (it named
/// objects of the old store as rolled back; found by review).
#[test]
fn format_forgets_the_last_repair_report() {
    use common::pages::{data_head, kill};
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(5));
    {
        let mut fs = Fs::formatted(&mut sim, cfg()).unwrap();
        let x = fs.create(ObjKind::Object).unwrap();
        fs.write(x, 0, &bytes(1, 3 * 2048)).unwrap();
        fs.sync().unwrap();
        for seed in [2, 3] {
            fs.transact(&[oftl::TxOp::Write {
                obj: x,
                offset: 0,
                data: &bytes(seed, 3 * 2048),
            }])
            .unwrap();
        }
    }
    let pages = data_head(&sim);
    kill(&mut sim, pages[pages.len() - 4].page);
    let mut fs = Fs::new(&mut sim, cfg(), Greedy::DEFAULT);
    assert!(matches!(fs.mount(), Err(MountError::MediaLoss { .. })));
    fs.mount_damaged(oftl::Damaged::Repair).unwrap();
    assert!(!fs.salvage_report().unreadable_pages().is_empty());
    fs.format().unwrap();
    assert!(fs.salvage_report().unreadable_pages().is_empty());
    assert!(fs.salvage_report().rolled_back().is_empty());
}

/// `health` says when a store cannot be used at all: before a mount, after an unmount,
/// and after a failure poisoned it (a power cut in a write); a mount makes it writable.
#[test]
fn health_says_when_the_store_is_not_mounted() {
    use nand_hal::sim::CutKind;
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(4));
    let mut fs = Fs::new(&mut sim, cfg(), Greedy::DEFAULT);
    assert_eq!(fs.health(), oftl::Health::NotMounted);
    fs.format().unwrap();
    assert_eq!(fs.health(), oftl::Health::Writable);
    let id = fs.create(ObjKind::Object).unwrap();
    fs.unmount().unwrap();
    assert_eq!(fs.health(), oftl::Health::NotMounted);
    fs.mount().unwrap();
    assert_eq!(fs.health(), oftl::Health::Writable);
    fs.flash_mut()
        .arm(FaultPlan::seeded(4).with_cut(1, CutKind::Clean));
    assert!(fs.write(id, 0, &[7u8; 4096]).is_err());
    assert_eq!(fs.health(), oftl::Health::NotMounted);
    assert_eq!(fs.write(id, 0, b"x"), Err(WriteError::Poisoned));
    fs.flash_mut().power_on();
    fs.flash_mut().disarm();
    fs.mount().unwrap();
    assert_eq!(fs.health(), oftl::Health::Writable);
}
