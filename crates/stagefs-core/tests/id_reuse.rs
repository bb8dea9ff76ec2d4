//! The file layer once the store reuses object ids (oftl hands ids out again from the
//! first once its table's bound is reached): records in the staging log that name an
//! object removed since must never apply to a new object that got the same id.
//!
//! Each case leaves such a record in the log (a staged append, or the pending record
//! of a file opened with truncate that outgrew the inline size), removes its file, makes
//! the ids wrap (the hidden `Oftl::skip_object_ids_to`) and creates directories until
//! one gets the removed file's id, then crashes: the replay must leave the directory
//! (and everything else) as acknowledged. Before new objects were created with the
//! log's end as their version (and adopted), the first case wrote the stale bytes into
//! the directory and the second deleted it.

use crate::support;

use nand_hal::sim::{profile, FaultPlan, SimNand};
use stagefs_core::{Kind, OpenOptions, SeekFrom};
use support::{pattern, read_all, vol, write_file, Sim, Vol};

/// Files `/f0`.. of 600 bytes (objects of their own), then the case's victim.
fn setup(fs: &mut Vol<'_>, fillers: usize) {
    fs.format().unwrap();
    for i in 0..fillers {
        write_file(fs, &format!("/f{i}"), &pattern(i as u32, 600));
    }
}

/// Makes `fillers` files and the case's victim (`victim`), removes the fillers, wraps
/// the ids and creates directories `/d0`.. until `count` objects were created;
/// crashes; mounts again and checks the volume.
fn case(sim: &mut Sim, fillers: usize, count: usize, victim: impl FnOnce(&mut Vol<'_>)) {
    let mut fs = vol(sim);
    setup(&mut fs, fillers);
    victim(&mut fs);
    for i in 0..fillers {
        fs.remove(&format!("/f{i}")).unwrap();
    }
    let st = fs.staging_status().unwrap();
    assert!(
        st.end_lsn > st.first_lsn,
        "the stale record is in the log: {st:?}"
    );
    let max = fs.store().max_object_id();
    fs.store_mut().skip_object_ids_to(max - 6).unwrap();
    assert!(fs.store().next_object_id() < 8, "the ids wrapped");
    for i in 0..count {
        fs.create_dir(&format!("/d{i}")).unwrap();
    }
    let st = fs.staging_status().unwrap();
    assert!(st.end_lsn > st.first_lsn, "still in the log: {st:?}");
    drop(fs);
    let mut fs = vol(sim);
    fs.mount().unwrap();
    for i in 0..count {
        let d = format!("/d{i}");
        assert_eq!(fs.metadata(&d).unwrap().kind, Kind::Dir, "{d}");
        write_file(&mut fs, &format!("{d}/x"), b"inside");
        assert_eq!(read_all(&mut fs, &format!("{d}/x")), b"inside");
    }
    assert!(fs.metadata("/victim").is_err());
    fs.unmount().unwrap();
    let mut fs = vol(sim);
    fs.mount().unwrap();
    for i in 0..count {
        assert_eq!(read_all(&mut fs, &format!("/d{i}/x")), b"inside");
    }
}

/// A staged append names the victim's object; the victim is removed; a directory gets
/// its id.
#[test]
fn a_staged_record_of_a_removed_file_never_applies_to_a_new_object_with_its_id() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(5));
    // Ids 1..3 are the volume's; the fillers and the victim take 4..8.
    case(&mut sim, 4, 6, |fs| {
        write_file(fs, "/victim", &pattern(9, 700));
        // Two commits on page 0: the second continues the first, so it is staged (a
        // record over the start of the page, where a directory keeps its header).
        let f = fs.open("/victim", OpenOptions::new().write(true)).unwrap();
        for seed in [10, 11] {
            fs.seek(f, SeekFrom::Start(0)).unwrap();
            fs.write(f, &pattern(seed, 64)).unwrap();
            fs.fsync(f).unwrap();
        }
        fs.close(f).unwrap();
        assert!(
            fs.staging_status().unwrap().staged_bytes > 0,
            "the append was staged"
        );
        fs.remove("/victim").unwrap();
    });
}

/// A file opened with truncate outgrows the inline size: its new object is named by a
/// pending record; the file is committed, then removed; a directory gets its id.
#[test]
fn a_pending_record_of_a_removed_file_never_deletes_a_new_object_with_its_id() {
    let mut sim = SimNand::heap(profile::TINY, FaultPlan::seeded(6));
    case(&mut sim, 4, 6, |fs| {
        write_file(fs, "/victim", b"small");
        let f = fs
            .open("/victim", OpenOptions::new().write(true).truncate(true))
            .unwrap();
        fs.write(f, &pattern(11, 900)).unwrap();
        fs.close(f).unwrap();
        assert_eq!(read_all(fs, "/victim"), pattern(11, 900));
        fs.remove("/victim").unwrap();
    });
}
