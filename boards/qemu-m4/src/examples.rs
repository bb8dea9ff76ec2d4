//! The top-level examples' logic (`stagefs-examples`, `no_std`) on the target: the
//! settings store, the data logger and the firmware-update slot, each over the volume on
//! the simulated `TINY` part. The host programs (`cargo run -p stagefs-examples --bin
//! ...`) check them under power cuts; here they run once each without, so the code a
//! firmware engineer copies is built for a Cortex-M and runs on one in CI.

use stagefs_examples::data_logger::{self, Logger, CURRENT, PREVIOUS, RECORD_LEN};
use stagefs_examples::firmware_update::{self, ImageInfo, Update, HEADER_LEN};
use stagefs_examples::settings::{self, Settings, Source};

use crate::files::Vol;

/// Records the logger appends (its files rotate every 40).
const RECORDS: u32 = 100;
/// The firmware image's payload (a pattern, in flash).
static PAYLOAD: [u8; 6000] = pattern();

const fn pattern() -> [u8; 6000] {
    let mut p = [0u8; 6000];
    let mut i = 0;
    while i < p.len() {
        p[i] = (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3];
        i += 1;
    }
    p
}

/// What the run established.
pub struct Outcome {
    /// Boots the settings counted.
    pub boots: u32,
    /// Records found in the two log files, and the rotations.
    pub records: u32,
    pub rotations: u32,
    /// The installed image's version and size.
    pub image: ImageInfo,
}

/// Formats the volume and runs the three examples, with a remount between steps.
pub fn run(fs: &mut Vol) -> Result<Outcome, &'static str> {
    fs.format().map_err(|_| "format")?;

    // Settings: defaults at the first boot, a change, both back after a remount.
    let (first, source) = settings::boot(fs).map_err(|_| "settings: first boot")?;
    if source != Source::Missing || first.boot_count != 1 {
        return Err("settings: the first boot did not start from the defaults");
    }
    let changed = Settings {
        sample_period_ms: 250,
        alarm_threshold: -5,
        ..first
    };
    settings::save(fs, &changed).map_err(|_| "settings: save")?;
    remount(fs)?;
    let (second, source) = settings::boot(fs).map_err(|_| "settings: second boot")?;
    if source != Source::Stored
        || second
            != (Settings {
                boot_count: 2,
                ..changed
            })
    {
        return Err("settings: the saved settings did not come back");
    }

    // The data logger: records with fsync, rotated by size; all back after a remount.
    let mut log = Logger::open(fs, 40 * RECORD_LEN as u64).map_err(|_| "logger: open")?;
    for i in 0..RECORDS {
        log.log(fs, i * 100, i as i32 - 50)
            .map_err(|_| "logger: append")?;
    }
    let rotations = log.rotations();
    log.close(fs).map_err(|_| "logger: close")?;
    remount(fs)?;
    let mut next = None;
    let mut in_order = true;
    let mut records = 0;
    for path in [PREVIOUS, CURRENT] {
        records += data_logger::read_records(fs, path, |r| {
            in_order &= next.is_none_or(|n| r.seq == n);
            next = Some(r.seq + 1);
        })
        .map_err(|_| "logger: read back")?;
    }
    // The last two files hold the records since the last rotation but one.
    if !in_order || next != Some(RECORDS) || rotations != 2 || records != RECORDS - 40 {
        return Err("logger: the records after the rotations are not all back in order");
    }

    // The firmware-update slot: an image received in chunks, verified, renamed into
    // place, and what boot finds after a remount.
    let info = ImageInfo::of(3, &PAYLOAD);
    let mut update = Update::begin(fs).map_err(|_| "update: begin")?;
    update
        .write(fs, &info.encode())
        .map_err(|_| "update: header")?;
    for chunk in PAYLOAD.chunks(512) {
        update.write(fs, chunk).map_err(|_| "update: write")?;
    }
    if update.received() != (HEADER_LEN + PAYLOAD.len()) as u64 {
        return Err("update: bytes received");
    }
    let installed = update.finish(fs).map_err(|_| "update: finish")?;
    remount(fs)?;
    let booted = firmware_update::boot_check(fs).map_err(|_| "update: boot check")?;
    if installed != info || booted != info {
        return Err("update: the installed image is not the one sent");
    }
    fs.unmount().map_err(|_| "unmount")?;
    Ok(Outcome {
        boots: second.boot_count,
        records,
        rotations,
        image: booted,
    })
}

fn remount(fs: &mut Vol) -> Result<(), &'static str> {
    fs.unmount().map_err(|_| "unmount")?;
    fs.mount().map_err(|_| "mount")
}
