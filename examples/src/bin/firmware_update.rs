//! The firmware-update slot on a simulated W25N01GV: version 1 installed, a corrupted
//! download refused (the active image stays), then an update to version 2 with the power
//! cut at points spread over the whole update (and at each of its last operations, where
//! the commit is) in every cut kind. After each cut a boot verifies the active image
//! and compares it with both images byte for byte: it must be version 1 or version 2,
//! never a mix, and version 2 once `finish` returned; then the update runs again and
//! completes.
//!
//! `cargo run -p stagefs-examples --bin firmware-update` (exit status 1 if a check fails).

use std::process::ExitCode;

use nand_hal::sim::{CutKind, FaultPlan};
use stagefs_examples::firmware_update::{self, ImageInfo, Update, UpdateError, ACTIVE};
use stagefs_examples::host::{self, Checks, Volume};

/// Payload bytes of an image.
const IMAGE_LEN: usize = 256 * 1024;
/// Bytes per received chunk (a radio or UART packet buffer).
const CHUNK: usize = 4096;
/// Cut points spread over the update, and the last operations always cut.
const CUTS: u64 = 48;
const TAIL: u64 = 12;

/// A whole image file (header and payload) of `version`.
fn image(version: u32) -> Vec<u8> {
    let mut x = version.wrapping_mul(0x9E37_79B9) | 1;
    let payload: Vec<u8> = (0..IMAGE_LEN)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    let mut file = ImageInfo::of(version, &payload).encode().to_vec();
    file.extend_from_slice(&payload);
    file
}

/// Receives `file` in chunks and finishes the update.
fn install(
    fs: &mut Volume<'_>,
    file: &[u8],
) -> Result<ImageInfo, UpdateError<nand_hal::sim::SimError>> {
    let mut up = Update::begin(fs)?;
    for chunk in file.chunks(CHUNK) {
        up.write(fs, chunk)?;
    }
    up.finish(fs)
}

/// The active image's bytes.
fn active(fs: &mut Volume<'_>) -> Result<Vec<u8>, String> {
    let mut buf = vec![0; IMAGE_LEN + 2 * firmware_update::HEADER_LEN];
    match stagefs_examples::read_file(fs, ACTIVE, &mut buf) {
        Ok(Some(n)) => Ok(buf[..n].to_vec()),
        Ok(None) => Err("no active image".into()),
        Err(e) => Err(format!("read: {e}")),
    }
}

fn main() -> ExitCode {
    host::init_log();
    let mut c = Checks::default();
    let (v1, v2) = (image(1), image(2));
    let mut sim = host::fresh();

    println!(
        "firmware-update: {} KiB images in {} B chunks to {}, verified, renamed to {ACTIVE}",
        IMAGE_LEN / 1024,
        CHUNK,
        firmware_update::PENDING
    );
    {
        let mut fs = host::volume(&mut sim);
        fs.format().expect("format");
        let before = fs.store().flash().counters();
        let r = install(&mut fs, &v1);
        let d = fs.store().flash().counters() - before;
        c.check(
            matches!(r, Ok(ImageInfo { version: 1, .. })),
            format_args!(
                "version 1 installed: {r:?}; {} programs, {} erases, {:.1} ms simulated",
                d.programs,
                d.erases,
                d.time_ns as f64 / 1e6
            ),
        );

        // A download with one payload byte wrong: refused, version 1 stays.
        let mut broken = v2.clone();
        broken[firmware_update::HEADER_LEN + IMAGE_LEN / 2] ^= 0x10;
        let r = install(&mut fs, &broken);
        c.check(
            matches!(r, Err(UpdateError::Crc { .. })),
            format_args!("a corrupted download is refused: {r:?}"),
        );
        let boot = firmware_update::boot_check(&mut fs);
        let still = active(&mut fs).is_ok_and(|a| a == v1);
        let pending = fs.metadata(firmware_update::PENDING).is_ok();
        c.check(
            matches!(boot, Ok(ImageInfo { version: 1, .. })) && still && !pending,
            format_args!("after it, the boot check passes on version 1 (and no pending file)"),
        );
        fs.unmount().expect("unmount");
    }

    // Power cuts during the update to version 2.
    let image_v1 = sim.storage().clone();
    let ops = {
        let mut sim = host::from_image(&image_v1, 5);
        let mut fs = host::volume(&mut sim);
        fs.mount().expect("mount");
        fs.store_mut().flash_mut().arm(FaultPlan::seeded(5));
        install(&mut fs, &v2).expect("update without a cut");
        fs.store().flash().ops_since_arm()
    };
    // Spread points with the cut kinds in turn; the last TAIL operations in every kind.
    let mut points: Vec<(u64, CutKind)> = host::cut_points(ops, CUTS, 0)
        .into_iter()
        .filter(|&at| at + TAIL <= ops)
        .map(|at| (at, host::cut_plan(at, at).cut.expect("a cut").kind))
        .collect();
    let spread = points.len();
    for at in ops + 1 - TAIL..=ops {
        points.extend(CutKind::ALL.map(|k| (at, k)));
    }
    println!(
        "  power cuts during an update ({ops} programs/erases): {spread} spread over it, the \
         last {TAIL} in each of the 5 kinds"
    );
    let (mut olds, mut news, mut bad) = (0, 0, 0);
    let mut first_new = None;
    for &(at, kind) in &points {
        let mut sim = host::from_image(&image_v1, at);
        let finished = {
            let mut fs = host::volume(&mut sim);
            fs.mount().expect("mount");
            fs.store_mut()
                .flash_mut()
                .arm(FaultPlan::seeded(at).with_cut(at, kind));
            install(&mut fs, &v2).is_ok()
        };
        if sim.is_powered() {
            c.fail(format_args!("cut at {at}: the power cut did not happen"));
            continue;
        }
        host::power_on(&mut sim);
        let mut fs = host::volume(&mut sim);
        let booted = fs
            .mount()
            .map_err(|e| format!("mount: {e}"))
            .and_then(|()| firmware_update::boot_check(&mut fs).map_err(|e| e.to_string()))
            .and_then(|info| Ok((info, active(&mut fs)?)));
        let version = match booted {
            Ok((info, bytes)) if info.version == 1 && bytes == v1 && !finished => 1,
            Ok((info, bytes)) if info.version == 2 && bytes == v2 => 2,
            Ok((info, _)) => {
                c.fail(format_args!(
                    "cut at {at} ({kind:?}): booted {info:?} (finish returned {finished})"
                ));
                bad += 1;
                continue;
            }
            Err(e) => {
                c.fail(format_args!("cut at {at} ({kind:?}): {e}"));
                bad += 1;
                continue;
            }
        };
        if version == 1 {
            olds += 1;
            // Once a cut left version 2, every cut at a later operation must too (the
            // rename is the single commit point; at the same operation, the cut kind
            // decides whether the commit landed).
            if first_new.is_some_and(|n| n < at) {
                c.fail(format_args!(
                    "cut at {at}: version 1 after a cut that left version 2"
                ));
                bad += 1;
            }
            // The update runs again after the boot and completes.
            match install(&mut fs, &v2) {
                Ok(ImageInfo { version: 2, .. }) => {}
                r => {
                    c.fail(format_args!("cut at {at}: the retried update gave {r:?}"));
                    bad += 1;
                }
            }
        } else {
            news += 1;
            first_new.get_or_insert(at);
        }
        drop(fs);
        if sim.counters().misuse != 0 {
            c.fail(format_args!("cut at {at}: the stack broke a NAND rule"));
            bad += 1;
        }
    }
    c.check(
        bad == 0,
        format_args!(
            "{} power cuts: {olds} booted version 1 (and the retried update completed), {news} \
             version 2 (from operation {} on), none a mix",
            points.len(),
            first_new.map_or("-".into(), |o| o.to_string())
        ),
    );
    c.finish("firmware-update")
}
