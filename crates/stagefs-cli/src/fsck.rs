//! `stagefs fsck`: mount (replaying a crash if the image holds one), then read every
//! directory and every byte of every file, checking sizes against what reads return.
//!
//! Exit codes as fsck's: 0 clean, 1 a crash was recovered (nothing lost that was
//! acknowledged), 4 problems left (listed), 8 the image could not be checked.

use stagefs_core::Kind;

use crate::volume::{self, Vol};

/// What a check found.
#[derive(Debug, Default)]
pub struct Report {
    /// The mount replayed a crash.
    pub recovered: bool,
    /// Directories walked (the root included).
    pub dirs: u64,
    /// Files read whole.
    pub files: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Problems, in words, with the path they concern.
    pub problems: Vec<String>,
}

impl Report {
    /// fsck's exit code for this report.
    pub fn exit_code(&self) -> i32 {
        if !self.problems.is_empty() {
            4
        } else if self.recovered {
            1
        } else {
            0
        }
    }
}

/// Checks a mounted volume.
pub fn check(v: &mut Vol<'_>, recovered: bool) -> Report {
    let mut r = Report {
        recovered,
        ..Report::default()
    };
    walk(v, "/", &mut r);
    r
}

fn walk(v: &mut Vol<'_>, dir: &str, r: &mut Report) {
    r.dirs += 1;
    let entries = match volume::list(v, dir) {
        Ok(e) => e,
        Err(e) => {
            r.problems
                .push(format!("{dir}: directory cannot be listed: {e}"));
            return;
        }
    };
    for (name, kind) in entries {
        let path = volume::join(dir, &name);
        match kind {
            Kind::Dir => walk(v, &path, r),
            Kind::File => file(v, &path, r),
        }
    }
}

fn file(v: &mut Vol<'_>, path: &str, r: &mut Report) {
    let size = match v.metadata(path) {
        Ok(m) => m.size,
        Err(e) => {
            r.problems
                .push(format!("{path}: listed but its entry cannot be read: {e}"));
            return;
        }
    };
    match volume::read_file(v, path) {
        Ok(data) if data.len() as u64 == size => {
            r.files += 1;
            r.bytes += size;
        }
        Ok(data) => r.problems.push(format!(
            "{path}: size says {size} bytes but {} read back",
            data.len()
        )),
        Err(e) => r
            .problems
            .push(format!("{path}: contents cannot be read: {e}")),
    }
}
