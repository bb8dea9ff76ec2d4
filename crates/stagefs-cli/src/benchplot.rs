//! `stagefs bench-plot`: draws the main job's results (the CSV that
//! `stagefs-bench --csv` writes) as throughput and write amplification per workload,
//! every target side by side with littlefs2 (measured, and its published figures).

use std::path::Path;

use crate::picture::{self, Bars};

/// One row of the CSV.
struct Row {
    workload: String,
    target: String,
    throughput: f64,
    wa: f64,
}

/// The fields of one CSV line (RFC 4180 quoting: `"a, b"`, `""` for a quote).
fn fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

fn parse(csv: &str) -> Result<Vec<Row>, String> {
    let mut lines = csv.lines();
    let head = lines.next().ok_or("empty CSV")?;
    if !head.starts_with("workload,target,throughput_bytes_per_s,write_amplification") {
        return Err("not a stagefs-bench CSV (run stagefs-bench with --csv FILE)".into());
    }
    lines
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            let f = fields(l);
            let bad = || format!("line {}: {l}", i + 2);
            if f.len() < 4 {
                return Err(bad());
            }
            Ok(Row {
                workload: f[0].clone(),
                target: f[1].clone(),
                throughput: f[2].parse().map_err(|_| bad())?,
                wa: f[3].parse().map_err(|_| bad())?,
            })
        })
        .collect()
}

/// Draws `csv` to `out` (`.svg` or `.png`).
pub fn draw(csv: &str, out: &Path) -> Result<(), String> {
    let rows = parse(csv)?;
    let mut groups: Vec<String> = Vec::new();
    let mut targets: Vec<String> = Vec::new();
    for r in &rows {
        if !groups.contains(&r.workload) {
            groups.push(r.workload.clone());
        }
        if !targets.contains(&r.target) {
            targets.push(r.target.clone());
        }
    }
    let panel = |title: &str, value: fn(&Row) -> f64| Bars {
        title: title.into(),
        groups: groups.clone(),
        series: targets
            .iter()
            .map(|t| {
                let vals = groups
                    .iter()
                    .map(|g| {
                        rows.iter()
                            .find(|r| &r.workload == g && &r.target == t)
                            .map(value)
                    })
                    .collect();
                (t.clone(), vals)
            })
            .collect(),
    };
    picture::bars(
        out,
        &[
            panel("throughput, bytes per simulated second (log)", |r| {
                r.throughput
            }),
            panel("write amplification (log)", |r| r.wa),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bench_csv_is_drawn_and_other_files_are_refused() {
        let csv = "workload,target,throughput_bytes_per_s,write_amplification,worst_op_ns,mount_clean_ns,mount_after_cut_ns\n\
                   linear,stagefs,6150000,1.02,1,1,\n\
                   linear,\"stagefs, staging off\",6000000,1.03,1,1,\n\
                   linear,littlefs2,1690000,1.0,1,1,5\n\
                   many,stagefs,156570,32.7,1,1,1\n\
                   many,littlefs2 (published),210,16,,,\n";
        let out = std::env::temp_dir().join(format!("bench-plot-{}.svg", std::process::id()));
        draw(csv, &out).unwrap();
        let svg = std::fs::read_to_string(&out).unwrap();
        assert!(svg.contains("write amplification"));
        assert!(svg.contains("littlefs2 (published)"));
        assert!(svg.contains("stagefs, staging off"));
        assert!(draw("a,b\n1,2\n", &out)
            .unwrap_err()
            .contains("not a stagefs-bench CSV"));
        let bad = "workload,target,throughput_bytes_per_s,write_amplification\nx,y,z,1\n";
        assert!(draw(bad, &out).unwrap_err().contains("line 2"));
        let _ = std::fs::remove_file(out);
    }
}
