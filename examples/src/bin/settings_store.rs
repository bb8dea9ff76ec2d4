//! The settings store on a simulated W25N01GV: the first boot finds no settings and
//! saves the defaults, a change survives a reboot, a file that does not check out gives
//! the defaults, and a power cut at every program/erase of a save (in every cut kind)
//! leaves the settings of the last save or of the one being made.
//!
//! `cargo run -p stagefs-examples --bin settings-store` (exit status 1 if a check fails).

use std::process::ExitCode;

use nand_hal::sim::{CutKind, FaultPlan};
use stagefs_examples::host::{self, Checks};
use stagefs_examples::settings::{self, Settings, Source, PATH};

fn main() -> ExitCode {
    host::init_log();
    let mut c = Checks::default();
    let mut sim = host::fresh();

    println!(
        "settings-store: {PATH}, {} bytes, rewritten whole",
        settings::FILE_LEN
    );
    let changed = {
        let mut fs = host::volume(&mut sim);
        fs.format().expect("format");
        // First boot.
        let (s, source) = settings::boot(&mut fs).expect("boot");
        c.check(
            source == Source::Missing && s.boot_count == 1,
            format_args!("first boot: defaults ({source:?}), boot {}", s.boot_count),
        );
        // The user changes two settings.
        let changed = Settings {
            sample_period_ms: 250,
            alarm_threshold: -5,
            ..s
        };
        let before = fs.store().flash().counters();
        settings::save(&mut fs, &changed).expect("save");
        let d = fs.store().flash().counters() - before;
        println!(
            "  a save: {} programs ({} partial), {} reads, {:.2} ms simulated",
            d.programs,
            d.partial_programs,
            d.reads,
            d.time_ns as f64 / 1e6
        );
        fs.unmount().expect("unmount");
        changed
    };

    // Reboot: the change is there, the boot is counted.
    {
        let mut fs = host::volume(&mut sim);
        fs.mount().expect("mount");
        let (s, source) = settings::boot(&mut fs).expect("boot");
        let want = Settings {
            boot_count: 2,
            ..changed
        };
        c.check(
            source == Source::Stored && s == want,
            format_args!(
                "second boot: stored settings (period {} ms, threshold {}), boot {}",
                s.sample_period_ms, s.alarm_threshold, s.boot_count
            ),
        );
        fs.unmount().expect("unmount");
    }

    // A file another firmware wrote (wrong layout): defaults, and the file is rewritten.
    {
        let mut image = host::from_image(sim.storage(), 3);
        let mut fs = host::volume(&mut image);
        fs.mount().expect("mount");
        stagefs_examples::write_file(&mut fs, PATH, b"threshold=7\n").expect("write");
        let (s, source) = settings::boot(&mut fs).expect("boot");
        let (again, source2) = settings::load(&mut fs).expect("load");
        c.check(
            source == Source::Invalid && source2 == Source::Stored && again == s,
            format_args!(
                "a foreign settings file: defaults ({source:?}), then stored ({source2:?})"
            ),
        );
    }

    // Power cuts during saves, from this image: SAVES saves in a row (threshold 1000,
    // 1001, ...), the power cut at every program/erase of them, in every cut kind.
    const SAVES: i32 = 20;
    let image = sim.storage().clone();
    let old = Settings {
        boot_count: 2,
        ..changed
    };
    let nth = |i: i32| Settings {
        alarm_threshold: 1000 + i,
        ..old
    };
    let ops = {
        let mut sim = host::from_image(&image, 4);
        let mut fs = host::volume(&mut sim);
        fs.mount().expect("mount");
        fs.store_mut().flash_mut().arm(FaultPlan::seeded(4));
        for i in 0..SAVES {
            settings::save(&mut fs, &nth(i)).expect("save");
        }
        fs.store().flash().ops_since_arm()
    };
    let (mut acked_kept, mut in_flight_kept, mut bad, mut runs) = (0, 0, 0, 0);
    for at in 1..=ops {
        for kind in CutKind::ALL {
            runs += 1;
            let mut sim = host::from_image(&image, at);
            // The last save that returned Ok (none: the settings from before).
            let mut acked = None;
            {
                let mut fs = host::volume(&mut sim);
                fs.mount().expect("mount");
                fs.store_mut()
                    .flash_mut()
                    .arm(FaultPlan::seeded(at).with_cut(at, kind));
                for i in 0..SAVES {
                    if settings::save(&mut fs, &nth(i)).is_err() {
                        break;
                    }
                    acked = Some(i);
                }
            }
            host::power_on(&mut sim);
            let last = acked.map_or(old, nth);
            let in_flight = nth(acked.map_or(0, |i| i + 1));
            let mut fs = host::volume(&mut sim);
            let got = fs
                .mount()
                .map_err(|e| format!("mount: {e}"))
                .and_then(|()| settings::load(&mut fs).map_err(|e| format!("load: {e}")));
            match got {
                Ok((s, Source::Stored)) if s == last => acked_kept += 1,
                Ok((s, Source::Stored)) if s == in_flight => in_flight_kept += 1,
                other => {
                    bad += 1;
                    c.fail(format_args!(
                        "cut at {at} ({kind:?}) after save {acked:?}: {other:?}"
                    ));
                }
            }
        }
    }
    c.check(
        bad == 0,
        format_args!(
            "{runs} power cuts (each of the {ops} programs/erases of {SAVES} saves, 5 kinds): \
             {acked_kept} found the last saved settings, {in_flight_kept} the ones being \
             saved, none anything else"
        ),
    );
    c.finish("settings-store")
}
