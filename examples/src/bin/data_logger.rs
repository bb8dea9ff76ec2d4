//! The sensor data logger on a simulated W25N01GV: records appended with `fsync` and
//! rotated by size, a reboot that continues the sequence, then power cuts spread over
//! more logging (every cut kind, rotations included), each followed by a boot that must
//! find every acknowledged record, in order.
//!
//! `cargo run -p stagefs-examples --bin data-logger` (exit status 1 if a check fails).

use std::process::ExitCode;

use stagefs_examples::data_logger::{read_records, Logger, Record, CURRENT, PREVIOUS};
use stagefs_examples::host::{self, Checks, Sim, Volume};

/// Rotate `/log.0` at 4 KiB (256 records of 16 bytes).
const LIMIT: u64 = 4096;
/// Records logged before the reboot.
const FIRST_RUN: u32 = 1000;
/// Records the power-cut runs try to log (two rotations at least).
const CUT_RUN: u32 = 600;
/// Cut points spread over the cut run.
const CUTS: u64 = 40;

/// A made-up sensor: a reading for record `seq`.
fn sample(seq: u32) -> (u32, i32) {
    (seq * 100, (seq as i32 % 50) - 20)
}

/// Reads `/log.1` then `/log.0`: the sequence numbers must run consecutively; returns
/// (first, last) sequence numbers, or why not.
fn scan(fs: &mut Volume<'_>) -> Result<Option<(u32, u32)>, String> {
    let mut all: Vec<Record> = Vec::new();
    for path in [PREVIOUS, CURRENT] {
        read_records(fs, path, |r| all.push(r)).map_err(|e| format!("read {path}: {e}"))?;
    }
    for w in all.windows(2) {
        if w[1].seq != w[0].seq + 1 {
            return Err(format!("record {} follows record {}", w[1].seq, w[0].seq));
        }
    }
    for r in &all {
        if (r.millis, r.value) != sample(r.seq) {
            return Err(format!("record {} holds the wrong sample", r.seq));
        }
    }
    Ok(all.first().map(|f| (f.seq, all[all.len() - 1].seq)))
}

fn main() -> ExitCode {
    host::init_log();
    let mut c = Checks::default();
    let mut sim = host::fresh();

    println!("data-logger: {FIRST_RUN} records of 16 B, each fsynced, rotated at {LIMIT} B");
    {
        let mut fs = host::volume(&mut sim);
        fs.format().expect("format");
        let mut log = Logger::open(&mut fs, LIMIT).expect("open the log");
        let before = fs.store().flash().counters();
        for seq in 0..FIRST_RUN {
            let (ms, v) = sample(seq);
            if let Err(e) = log.log(&mut fs, ms, v) {
                c.fail(format_args!("log record {seq}: {e}"));
                return c.finish("data-logger");
            }
        }
        let d = fs.store().flash().counters() - before;
        println!(
            "  {} rotations; flash: {} programs ({} partial), {} erases, {:.1} ms simulated \
             ({:.2} ms per record)",
            log.rotations(),
            d.programs,
            d.partial_programs,
            d.erases,
            d.time_ns as f64 / 1e6,
            d.time_ns as f64 / 1e6 / f64::from(FIRST_RUN)
        );
        c.check(
            log.rotations() == (FIRST_RUN - 1) / (LIMIT as u32 / 16),
            format_args!("{} rotations at {LIMIT} B", log.rotations()),
        );
        let cur = fs.metadata(CURRENT).map(|m| m.size).unwrap_or(u64::MAX);
        c.check(
            cur <= LIMIT,
            format_args!("{CURRENT} is {cur} B, at most {LIMIT}"),
        );
        log.close(&mut fs).expect("close");
        fs.unmount().expect("unmount");
    }

    // A reboot: mount, open the log, continue the sequence.
    {
        let mut fs = host::volume(&mut sim);
        fs.mount().expect("mount");
        match scan(&mut fs) {
            Ok(Some((first, last))) => c.check(
                last == FIRST_RUN - 1,
                format_args!(
                    "after a reboot: records {first}..={last} in {PREVIOUS} and {CURRENT}"
                ),
            ),
            Ok(None) => c.fail("after a reboot: no records"),
            Err(e) => c.fail(format_args!("after a reboot: {e}")),
        }
        let log = Logger::open(&mut fs, LIMIT).expect("open the log");
        c.check(
            log.next_seq() == FIRST_RUN,
            format_args!("the logger continues at record {}", log.next_seq()),
        );
        log.close(&mut fs).expect("close");
        fs.unmount().expect("unmount");
    }

    // Power cuts: from this image, log CUT_RUN more records with the power failing at
    // one program/erase; boot; every acknowledged record must be there.
    let image = sim.storage().clone();
    // A run without a cut first: how many programs/erases it takes, and which of them
    // belong to the log calls that rotated (every one of those is cut as well).
    let (ops, rotating) = {
        let mut sim = host::from_image(&image, 2);
        let mut fs = host::volume(&mut sim);
        fs.mount().expect("mount");
        fs.store_mut()
            .flash_mut()
            .arm(nand_hal::sim::FaultPlan::seeded(2));
        let mut log = Logger::open(&mut fs, LIMIT).expect("open the log");
        let mut rotating = Vec::new();
        for i in 0..CUT_RUN {
            let (ms, v) = sample(log.next_seq());
            let (op0, rot0) = (fs.store().flash().ops_since_arm(), log.rotations());
            log.log(&mut fs, ms, v)
                .unwrap_or_else(|e| panic!("record {i} without a cut: {e}"));
            if log.rotations() != rot0 {
                rotating.extend(op0 + 1..=fs.store().flash().ops_since_arm());
            }
        }
        (fs.store().flash().ops_since_arm(), rotating)
    };
    let mut points = host::cut_points(ops, CUTS, 0);
    let spread = points.len();
    points.extend(&rotating);
    points.sort_unstable();
    points.dedup();
    println!(
        "  power cuts at {} of the {ops} programs/erases of {CUT_RUN} more records ({spread} \
         spread, every one of the {} in log calls that rotated), every cut kind",
        points.len(),
        rotating.len()
    );
    let (mut bad, mut in_flight_kept) = (0, 0);
    for &at in &points {
        let mut sim: Sim = host::from_image(&image, at);
        let mut acked = None;
        {
            let mut fs = host::volume(&mut sim);
            fs.mount().expect("mount");
            fs.store_mut().flash_mut().arm(host::cut_plan(at, at));
            if let Ok(mut log) = Logger::open(&mut fs, LIMIT) {
                for _ in 0..CUT_RUN {
                    let (ms, v) = sample(log.next_seq());
                    match log.log(&mut fs, ms, v) {
                        Ok(r) => acked = Some(r.seq),
                        Err(_) => break,
                    }
                }
            }
            // The volume is dropped without unmounting: the power is off.
        }
        if sim.is_powered() {
            c.fail(format_args!("cut at {at}: the power cut did not happen"));
            bad += 1;
            continue;
        }
        host::power_on(&mut sim);
        let acked = acked.unwrap_or(FIRST_RUN - 1);
        let mut fs = host::volume(&mut sim);
        let outcome = match fs.mount() {
            Err(e) => Err(format!("mount: {e}")),
            Ok(()) => scan(&mut fs).and_then(|r| match r {
                Some((_, last)) if last == acked || last == acked + 1 => Ok(last),
                Some((_, last)) => Err(format!("last record {last}, acknowledged {acked}")),
                None => Err("no records".into()),
            }),
        };
        let outcome = outcome.and_then(|last| {
            // The logger reopens and continues after what it finds.
            let log = Logger::open(&mut fs, LIMIT).map_err(|e| format!("reopen: {e}"))?;
            let next = log.next_seq();
            log.close(&mut fs).map_err(|e| format!("close: {e}"))?;
            if next != last + 1 {
                return Err(format!("the logger continues at {next}, not {}", last + 1));
            }
            Ok(last)
        });
        match outcome {
            Ok(last) => in_flight_kept += u32::from(last == acked + 1),
            Err(e) => {
                c.fail(format_args!(
                    "cut at {at} ({:?}): {e}",
                    host::cut_plan(at, at).cut
                ));
                bad += 1;
            }
        }
        drop(fs);
        if sim.counters().misuse != 0 {
            c.fail(format_args!("cut at {at}: the stack broke a NAND rule"));
        }
    }
    c.check(
        bad == 0,
        format_args!(
            "{} power cuts: every acknowledged record found, in order, logging continues \
             ({in_flight_kept} kept the record in flight)",
            points.len()
        ),
    );
    c.finish("data-logger")
}
