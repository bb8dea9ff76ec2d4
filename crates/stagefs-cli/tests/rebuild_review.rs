//! `fsck --repair`'s full-scan rebuild against an independent review's shapes: 160
//! files in one directory and nested ones, staged appends with lost log pages, cuts
//! before the tables were lost, a nearly full store, and every data and metadata page
//! lost in turn on top of lost tables (p7). After each repair the volume mounts and
//! every file reads as acknowledged or is named (or fsck says it cannot tell which);
//! the one page whose loss is not repaired is the volume header's (the file layer's
//! object 1), reported and left alone.

use nand_hal::sim::profile::TINY;
use nand_hal::sim::FaultPlan;
use nand_hal::PageAddr;
use oftl::format::backpointer::{Backpointer, PageKind};
use stagefs_cli::image::{self, Sim};
use stagefs_cli::volume;
use stagefs_core::OpenOptions;

mod common;

use common::*;

// ---------------------------------------------------------------------------------

/// 160 files in one directory + nested directories, a renamed directory.
fn big_volume(clean: bool) -> (Sim, Vec<(String, Vec<u8>)>) {
    let mut sim = image::blank(&TINY);
    let mut want: Vec<(String, Vec<u8>)> = Vec::new();
    {
        let mut v = volume::over(&mut sim);
        v.format().unwrap();
        v.create_dir("/big").unwrap();
        for i in 0..160u32 {
            let path = format!("/big/file_with_a_longish_name_{i:04}");
            let n = match i % 7 {
                0 => 2100,
                3 => 300,
                _ => 24,
            };
            let data = bytes(i, n);
            volume::write_file(&mut v, &path, &data).unwrap();
            want.push((path, data));
        }
        v.create_dir("/a").unwrap();
        v.create_dir("/a/b").unwrap();
        v.create_dir("/a/b/c").unwrap();
        for (j, d) in ["/a", "/a/b", "/a/b/c"].iter().enumerate() {
            for i in 0..5u32 {
                let path = format!("{d}/n{i}");
                let data = bytes(1000 + j as u32 * 10 + i, 100 + 1500 * (i as usize % 3));
                volume::write_file(&mut v, &path, &data).unwrap();
                want.push((path, data));
            }
        }
        v.sync().unwrap();
        // rename a directory
        v.rename("/a/b", "/a/bb").unwrap();
        for (p, _) in want.iter_mut() {
            if p.starts_with("/a/b/") {
                *p = p.replacen("/a/b/", "/a/bb/", 1);
            }
        }
        // staged appends
        for round in 0..3u32 {
            for i in (0..160u32).step_by(20) {
                let p = format!("/big/file_with_a_longish_name_{i:04}");
                let rec = bytes(5000 + round * 200 + i, 50);
                append_fsync(&mut v, &p, &rec);
                want.iter_mut()
                    .find(|(q, _)| *q == p)
                    .unwrap()
                    .1
                    .extend_from_slice(&rec);
            }
        }
        for i in [1u32, 2, 3] {
            let p = format!("/big/file_with_a_longish_name_{i:04}");
            v.remove(&p).unwrap();
            want.retain(|(q, _)| *q != p);
        }
        if clean {
            v.unmount().unwrap();
        }
    }
    (sim, want)
}

#[test]
fn p1_big_volume_tables_lost() {
    for clean in [true, false] {
        let (sim, want) = big_volume(clean);
        for (name, kinds) in [
            ("ckpt", vec![PageKind::Checkpoint, PageKind::Marker]),
            ("idx", vec![PageKind::Index, PageKind::Table]),
            ("all", all_table_kinds()),
        ] {
            let tag = format!("{name} clean={clean}");
            let mut d = sim.clone();
            kill_tables(&mut d, &kinds);
            let (code, _ch, out) = run(&mut d, true);
            let differ = verify(&mut d, &want, &out, &tag);
            assert!(code == 1 || code == 4, "{tag}: code {code}\n{out}");
            assert!(
                differ.is_empty(),
                "{tag}: differ {differ:?} (code {code})\n{out}"
            );
            let (code2, _, out2) = run(&mut d, true);
            assert!(code2 <= 1, "{tag}: second repair {code2}\n{out2}");
            let (code3, ch3, out3) = run(&mut d, false);
            assert_eq!((code3, ch3), (0, false), "{tag}: check after\n{out3}");
            eprintln!("{tag}: code {code}");
        }
    }
}

/// Checkpoints lost, plus one data page of /victim: /victim named, others intact.
#[test]
fn p2_tables_plus_one_data_page() {
    for clean in [true, false] {
        for which in 0..3usize {
            let mut sim = image::blank(&TINY);
            let mut want: Vec<(String, Vec<u8>)> = Vec::new();
            {
                let mut v = volume::over(&mut sim);
                v.format().unwrap();
                v.create_dir("/d").unwrap();
                for i in 0..20u32 {
                    let p = format!("/d/f{i}");
                    let data = bytes(i, 3000);
                    volume::write_file(&mut v, &p, &data).unwrap();
                    want.push((p, data));
                }
                volume::write_file(&mut v, "/victim", &[0x5Au8; 6000]).unwrap();
                want.push(("/victim".into(), vec![0x5A; 6000]));
                v.sync().unwrap();
                for i in 0..5u32 {
                    let p = format!("/d/g{i}");
                    let data = bytes(100 + i, 2500);
                    volume::write_file(&mut v, &p, &data).unwrap();
                    want.push((p, data));
                }
                if clean {
                    v.unmount().unwrap();
                }
            }
            for kinds in [
                vec![PageKind::Checkpoint, PageKind::Marker],
                all_table_kinds(),
            ] {
                let tag = format!("clean={clean} which={which} kinds={}", kinds.len());
                let mut d = sim.clone();
                kill_tables(&mut d, &kinds);
                let vp = pages_start(&d, 0x5A, 2048);
                assert!(vp.len() >= 2, "{tag}");
                kill(&mut d, vp[which.min(vp.len() - 1)]);
                let (code, _ch, out) = run(&mut d, true);
                let differ = verify(&mut d, &want, &out, &tag);
                assert!(
                    differ.iter().all(|p| p == "/victim"),
                    "{tag}: others differ {differ:?}\n{out}"
                );
                assert!(
                    out.contains("/victim"),
                    "{tag}: victim not named (code {code})\n{out}"
                );
                let (code2, _, out2) = run(&mut d, false);
                assert!(code2 <= 4, "{tag}: {out2}");
                eprintln!("{tag}: code {code} differ {differ:?}");
            }
        }
    }
}

/// The very last data page written (a clean unmount, so acknowledged) lost together with
/// the checkpoints: the scan takes it for a torn tail.
#[test]
fn p3_last_data_page_lost_with_checkpoints() {
    let mut sim = image::blank(&TINY);
    let mut want: Vec<(String, Vec<u8>)> = Vec::new();
    {
        let mut v = volume::over(&mut sim);
        v.format().unwrap();
        for i in 0..6u32 {
            let p = format!("/f{i}");
            let data = bytes(i, 4096);
            volume::write_file(&mut v, &p, &data).unwrap();
            want.push((p, data));
        }
        v.sync().unwrap();
        // overwrite page 0 of /f0 with 0x77 (home overwrite, own transaction)
        let f = v.open("/f0", OpenOptions::new().write(true)).unwrap();
        v.write(f, &[0x77u8; 2048]).unwrap();
        v.fsync(f).unwrap();
        v.close(f).unwrap();
        want[0].1[..2048].fill(0x77);
        v.unmount().unwrap();
    }
    // find data pages, sorted by seq; the newest one
    let data: Vec<(u32, Backpointer)> = (0..TINY.geometry.pages())
        .filter_map(|p| bp_of(&sim, p).map(|bp| (p, bp)))
        .filter(|(_, bp)| matches!(bp.kind, PageKind::Data | PageKind::Meta) && !bp.relocated)
        .collect();
    let newest = data.iter().max_by_key(|(_, bp)| bp.seq).unwrap();
    let x77 = pages_start(&sim, 0x77, 2048);
    eprintln!(
        "newest data-head page {} {:?}; 0x77 pages {x77:?}",
        newest.0, newest.1
    );
    for victim in x77.iter().copied().chain([newest.0]) {
        for kinds in [
            vec![PageKind::Checkpoint, PageKind::Marker],
            all_table_kinds(),
        ] {
            let tag = format!("victim {victim} kinds {}", kinds.len());
            let mut d = sim.clone();
            kill_tables(&mut d, &kinds);
            kill(&mut d, victim);
            let (code, _, out) = run(&mut d, true);
            let differ = verify(&mut d, &want, &out, &tag);
            eprintln!("{tag}: code {code} differ {differ:?}\n{out}");
        }
    }
}

/// Staged small appends still in the staging log; checkpoints lost plus one log page.
#[test]
fn p4_staged_appends_and_a_lost_log_page() {
    for clean in [true, false] {
        let mut sim = image::blank(&TINY);
        let mut want: Vec<(String, Vec<u8>)> = Vec::new();
        {
            let mut v = volume::over(&mut sim);
            v.format().unwrap();
            for i in 0..8u32 {
                let p = format!("/s{i}");
                let data = bytes(i, 3000);
                volume::write_file(&mut v, &p, &data).unwrap();
                want.push((p, data));
            }
            v.sync().unwrap();
            for round in 0..10u32 {
                for i in 0..8u32 {
                    let rec = vec![0xC0 + i as u8; 33 + round as usize];
                    append_fsync(&mut v, &format!("/s{i}"), &rec);
                    want[i as usize].1.extend_from_slice(&rec);
                }
            }
            if clean {
                v.unmount().unwrap();
            }
        }
        // log pages: used, not data/meta/index/table/ckpt/marker
        let g = TINY.geometry;
        let (mut dd, mut oo) = (vec![0u8; 2048], vec![0u8; 64]);
        let logs: Vec<u32> = (0..g.pages())
            .filter(|&p| {
                sim.peek(PageAddr(p), &mut dd, &mut oo);
                let used = dd.iter().any(|&b| b != 0xFF) || oo.iter().any(|&b| b != 0xFF);
                used && p / 16 >= 2 && bp_of(&sim, p).is_none()
            })
            .collect();
        eprintln!("clean={clean}: {} log-ish pages {logs:?}", logs.len());
        for &lp in logs.iter() {
            for kinds in [
                vec![PageKind::Checkpoint, PageKind::Marker],
                all_table_kinds(),
            ] {
                let tag = format!("clean={clean} log page {lp} kinds {}", kinds.len());
                let mut d = sim.clone();
                kill_tables(&mut d, &kinds);
                kill(&mut d, lp);
                let (code, _, out) = run(&mut d, true);
                let differ = verify(&mut d, &want, &out, &tag);
                if !differ.is_empty() {
                    eprintln!("{tag}: code {code} differ {differ:?}");
                }
                let (c2, _, o2) = run(&mut d, false);
                assert!(c2 <= 4, "{tag}: {o2}");
            }
        }
    }
}

/// Power cut during writes, then checkpoints lost; fsck twice; fsck (no repair) changes
/// nothing.
#[test]
fn p5_cut_then_tables_lost() {
    let mut cuts = 0;
    for k in (20..400u64).step_by(23) {
        let mut sim = image::blank(&TINY);
        let mut acked: Vec<(String, Vec<u8>)> = Vec::new();
        let mut pending: Option<(String, Vec<u8>, Option<Vec<u8>>)> = None;
        {
            let mut v = volume::over(&mut sim);
            v.format().unwrap();
            v.create_dir("/d").unwrap();
            for i in 0..10u32 {
                let p = format!("/d/base{i}");
                let data = bytes(i, 1000 + 700 * i as usize);
                volume::write_file(&mut v, &p, &data).unwrap();
                acked.push((p, data));
            }
            v.sync().unwrap();
            v.store_mut().flash_mut().arm(
                FaultPlan::seeded(k).with_cut(k, nand_hal::sim::CutKind::ALL[(k % 3) as usize]),
            );
            for i in 0..40u32 {
                let (p, data) = if i % 3 == 0 {
                    (format!("/d/base{}", i % 10), bytes(500 + i, 60))
                } else {
                    (
                        format!("/d/new{i}"),
                        bytes(900 + i, 200 + 300 * (i as usize % 9)),
                    )
                };
                let prev = acked.iter().find(|(q, _)| *q == p).map(|(_, d)| d.clone());
                let full = if i % 3 == 0 {
                    let mut f = prev.clone().unwrap();
                    f.extend_from_slice(&data);
                    f
                } else {
                    data.clone()
                };
                pending = Some((p.clone(), full.clone(), prev));
                let ok = if i % 3 == 0 {
                    let r = (|| {
                        let f = v.open(&p, OpenOptions::new().write(true).append(true))?;
                        v.write(f, &data)?;
                        v.fsync(f)?;
                        v.close(f)
                    })();
                    r.is_ok()
                } else {
                    volume::write_file(&mut v, &p, &data).is_ok()
                };
                if !ok {
                    break;
                }
                pending = None;
                if let Some(e) = acked.iter_mut().find(|(q, _)| *q == p) {
                    e.1 = full;
                } else {
                    acked.push((p, full));
                }
            }
        }
        if sim.is_powered() {
            continue;
        }
        cuts += 1;
        sim.power_on();
        sim.disarm();
        for kinds in [
            vec![PageKind::Checkpoint, PageKind::Marker],
            all_table_kinds(),
        ] {
            let tag = format!("cut {k} kinds {}", kinds.len());
            let mut d = sim.clone();
            kill_tables(&mut d, &kinds);
            // check-only changes nothing
            let before = snapshot(&d);
            let cb = d.counters();
            let (c0, ch0, o0) = run(&mut d, false);
            assert!(!ch0, "{tag}");
            assert_eq!(
                cb.programs,
                d.counters().programs,
                "{tag}: check programmed\n{o0}"
            );
            assert_eq!(cb.erases, d.counters().erases, "{tag}: check erased\n{o0}");
            assert!(
                before == snapshot(&d),
                "{tag}: check changed the image\n{o0}"
            );
            assert!(c0 == 4 || c0 == 8 || c0 == 1, "{tag}: {c0}\n{o0}");
            let (code, _, out) = run(&mut d, true);
            let mut v = volume::over(&mut d);
            v.mount().unwrap_or_else(|e| panic!("{tag}: {e}\n{out}"));
            for (p, data) in &acked {
                let got = volume::read_file(&mut v, p);
                let ok = matches!(got, Ok(ref g) if g == data);
                if !ok {
                    let in_flight = pending.as_ref().is_some_and(|(q, full, prev)| {
                        q == p && matches!(got, Ok(ref g) if g == full || Some(g) == prev.as_ref())
                    });
                    let named = out.contains(&format!("{p}:")) || out.contains("cannot tell which");
                    assert!(
                        in_flight || named,
                        "{tag}: {p} {:?} want {} bytes\n{out}",
                        got.as_ref().map(|g| g.len()),
                        data.len()
                    );
                }
            }
            // in-flight file: old or new or gone
            if let Some((p, full, prev)) = &pending {
                if let Ok(g) = volume::read_file(&mut v, p) {
                    assert!(
                        g == *full
                            || Some(&g) == prev.as_ref()
                            || (prev.is_none() && full.starts_with(&g))
                            || out.contains(&format!("{p}:")),
                        "{tag}: in-flight {p} reads {} bytes, neither old nor new\n{out}",
                        g.len()
                    );
                }
            }
            v.unmount().unwrap();
            let (c2, _, o2) = run(&mut d, true);
            assert!(
                c2 <= 1,
                "{tag}: second repair {c2} (first {code})\n{out}\n---\n{o2}"
            );
            let (c3, ch3, o3) = run(&mut d, false);
            assert_eq!((c3, ch3), (0, false), "{tag}\n{o3}");
        }
    }
    assert!(cuts > 5, "{cuts}");
}

/// A nearly full store, tables lost.
#[test]
fn p6_nearly_full() {
    let mut sim = image::blank(&TINY);
    let mut want: Vec<(String, Vec<u8>)> = Vec::new();
    {
        let mut v = volume::over(&mut sim);
        v.format().unwrap();
        let mut i = 0u32;
        loop {
            let p = format!("/full{i}");
            let data = bytes(i, 8192);
            if volume::write_file(&mut v, &p, &data).is_err() {
                let _ = v.remove(&p);
                break;
            }
            want.push((p, data));
            i += 1;
            if i > 400 {
                break;
            }
        }
        // churn: overwrite some to force GC
        for r in 0..3u32 {
            for j in (0..want.len()).step_by(3) {
                let data = bytes(7000 + r * 100 + j as u32, 8192);
                if volume::write_file(&mut v, &want[j].0.clone(), &data).is_ok() {
                    want[j].1 = data;
                } else {
                    eprintln!("write failed at r{r} j{j}");
                    want[j].1 = volume::read_file(&mut v, &want[j].0.clone()).unwrap_or_default();
                }
            }
        }
        eprintln!("{} files of 8 KiB", want.len());
        v.unmount().unwrap();
    }
    for kinds in [
        vec![PageKind::Checkpoint, PageKind::Marker],
        all_table_kinds(),
    ] {
        let tag = format!("full kinds {}", kinds.len());
        let mut d = sim.clone();
        kill_tables(&mut d, &kinds);
        let (code, _, out) = run(&mut d, true);
        let differ = verify(&mut d, &want, &out, &tag);
        assert!(differ.is_empty(), "{tag}: {differ:?} code {code}\n{out}");
        // it must still take writes after
        let mut v = volume::over(&mut d);
        v.mount().unwrap();
        let _ = v.remove(&want[0].0);
        volume::write_file(&mut v, "/after", &[1u8; 4000])
            .unwrap_or_else(|e| panic!("{tag}: write after: {e}\n{out}"));
        v.unmount().unwrap();
        eprintln!("{tag}: code {code}");
    }
}

/// Sweep: tables lost (three ways) plus every data/meta page in turn. Every file that
/// differs must be named (or a "cannot tell which" problem, exit 4).
#[test]
fn p7_sweep_every_data_page_with_tables_lost() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for clean in [true, false] {
        let mut sim = image::blank(&TINY);
        let mut want: Vec<(String, Vec<u8>)> = Vec::new();
        {
            let mut v = volume::over(&mut sim);
            v.format().unwrap();
            v.create_dir("/d").unwrap();
            for i in 0..12u32 {
                let p = format!("/d/f{i}");
                let data = bytes(i, if i % 2 == 0 { 3000 } else { 90 });
                volume::write_file(&mut v, &p, &data).unwrap();
                want.push((p, data));
            }
            v.sync().unwrap();
            for i in 0..4u32 {
                let p = format!("/g{i}");
                let data = bytes(100 + i, 2500);
                volume::write_file(&mut v, &p, &data).unwrap();
                want.push((p, data));
            }
            for i in (0..12u32).step_by(3) {
                let rec = bytes(300 + i, 40);
                append_fsync(&mut v, &format!("/d/f{i}"), &rec);
                want[i as usize].1.extend_from_slice(&rec);
            }
            v.rename("/d", "/e").unwrap();
            for (p, _) in want.iter_mut() {
                if p.starts_with("/d/") {
                    *p = p.replacen("/d/", "/e/", 1);
                }
            }
            if clean {
                v.unmount().unwrap();
            }
        }
        let pages = pages_of(&sim, &[PageKind::Data, PageKind::Meta]);
        for &victim in &pages {
            for (kn, kinds) in [
                ("ckpt", vec![PageKind::Checkpoint, PageKind::Marker]),
                ("idx", vec![PageKind::Index, PageKind::Table]),
                ("all", all_table_kinds()),
            ] {
                runs += 1;
                let tag = format!(
                    "clean={clean} victim {victim} {:?} kinds {kn}",
                    bp_of(&sim, victim).map(|b| (b.kind, b.owner, b.lpn, b.seq, b.commit))
                );
                let mut d = sim.clone();
                kill_tables(&mut d, &kinds);
                kill(&mut d, victim);
                let (code, _, out) = run(&mut d, true);
                if bp_of(&sim, victim).is_some_and(|b| b.owner == 1 && b.kind == PageKind::Data) {
                    // The volume header: not repaired, said so, nothing changed.
                    if code != 4 || !out.contains("not a StageFS volume") {
                        failures.push(format!("{tag}: volume header lost: code {code}\n{out}"));
                    }
                    continue;
                }
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    verify(&mut d, &want, &out, &tag)
                }));
                match r {
                    Err(e) => {
                        let msg = e
                            .downcast_ref::<String>()
                            .cloned()
                            .unwrap_or_else(|| "?".into());
                        failures.push(format!("{msg}\n(code {code})"));
                        continue;
                    }
                    Ok(differ) => {
                        if !differ.is_empty() && code == 1 && !out.contains("problem:") {
                            failures.push(format!(
                                "{tag}: differ {differ:?} exit 1 without problems\n{out}"
                            ));
                        }
                    }
                }
                let (c2, _, o2) = run(&mut d, false);
                if c2 > 1 {
                    let (c3, _, o3) = run(&mut d, true);
                    let (c4, _, o4) = run(&mut d, false);
                    if c4 > 1 && !o4.contains("cannot tell which") && !o4.contains("in doubt") {
                        failures.push(format!("{tag}: after two repairs check {c4} (repair2 {c3})\nREPAIR1 (code {code}):\n{out}\nCHECK:\n{o2}\n---\n{o3}\n---\n{o4}"));
                    }
                }
            }
        }
    }
    eprintln!("{runs} runs, {} failures", failures.len());
    for f in failures.iter() {
        eprintln!("FAIL: {}", f.lines().next().unwrap_or(""));
    }
    assert!(failures.is_empty(), "{} failures", failures.len());
}
