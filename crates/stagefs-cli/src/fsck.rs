//! `stagefs fsck`: mount (replaying a crash if the image holds one), then read every
//! directory and every byte of every file, checking sizes against what reads return.
//!
//! Exit codes as fsck's: 0 clean, 1 a crash was recovered or problems were repaired
//! (nothing lost that was acknowledged, or the damage moved aside), 4 problems left
//! (listed), 8 the image could not be checked.
//!
//! # Repair
//!
//! [`repair`] works in place on the mounted volume, never by reformatting: a file
//! whose contents cannot be read whole (an uncorrectable page, a damaged page tag) or
//! whose size disagrees with what reads return is copied to `/lost+found` with every
//! page that still reads (the others as zeros, listed in the report), then removed
//! from its directory; every other file and directory stays as it was. A directory
//! that cannot be listed is reported and left alone (the files below it stay on flash;
//! repairing its pages is not attempted).

use stagefs_core::{Kind, OpenOptions, SeekFrom};

use crate::volume::{self, Vol};

/// Where repair puts what it saves of damaged files.
pub const LOST_FOUND: &str = "/lost+found";

/// One thing found wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The path it concerns.
    pub path: String,
    /// Whether [`repair`] can move it aside (a damaged file).
    pub repairable: bool,
    /// What is wrong, in words.
    pub words: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.words)
    }
}

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
    /// Problems found.
    pub problems: Vec<Problem>,
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
            r.problems.push(Problem {
                path: dir.into(),
                repairable: false,
                words: format!("directory cannot be listed: {e}"),
            });
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
            r.problems.push(Problem {
                path: path.into(),
                repairable: true,
                words: format!("listed but its entry cannot be read: {e}"),
            });
            return;
        }
    };
    match volume::read_file(v, path) {
        Ok(data) if data.len() as u64 == size => {
            r.files += 1;
            r.bytes += size;
        }
        Ok(data) => r.problems.push(Problem {
            path: path.into(),
            repairable: true,
            words: format!("size says {size} bytes but {} read back", data.len()),
        }),
        Err(e) => r.problems.push(Problem {
            path: path.into(),
            repairable: true,
            words: format!("contents cannot be read: {e}"),
        }),
    }
}

/// What [`repair`] did, in words (one line per action).
pub type Actions = Vec<String>;

/// Moves every repairable problem of `found` aside (see the module docs). Returns what
/// it did; a step that fails is reported and the others still run.
pub fn repair(v: &mut Vol<'_>, found: &Report) -> Actions {
    let mut done = Vec::new();
    let damaged: Vec<&Problem> = found.problems.iter().filter(|p| p.repairable).collect();
    if damaged.is_empty() {
        return done;
    }
    match v.metadata(LOST_FOUND) {
        Ok(m) if m.kind == Kind::Dir => {}
        Ok(_) => {
            done.push(format!(
                "{LOST_FOUND} exists and is not a directory: nothing repaired"
            ));
            return done;
        }
        Err(_) => {
            if let Err(e) = v.create_dir(LOST_FOUND) {
                done.push(format!("cannot create {LOST_FOUND}: {e}: nothing repaired"));
                return done;
            }
        }
    }
    for p in damaged {
        let saved = volume::join(
            LOST_FOUND,
            &p.path.trim_start_matches('/').replace('/', "%"),
        );
        match salvage(v, &p.path, &saved) {
            Ok((bytes, holes)) => {
                let removed = v.remove(&p.path);
                done.push(format!(
                    "{}: {bytes} bytes saved to {saved}{}; {}",
                    p.path,
                    if holes.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " ({} unreadable page{} as zeros at offset{} {})",
                            holes.len(),
                            if holes.len() == 1 { "" } else { "s" },
                            if holes.len() == 1 { "" } else { "s" },
                            holes
                                .iter()
                                .map(u64::to_string)
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    },
                    match removed {
                        Ok(()) => "the damaged file removed".to_string(),
                        Err(e) => format!("removing the damaged file failed: {e}"),
                    }
                ));
            }
            Err(e) => done.push(match v.remove(&p.path) {
                Ok(()) => format!(
                    "{}: nothing readable ({e}); the damaged entry removed",
                    p.path
                ),
                Err(r) => format!("{}: not repaired: {e}; removing it failed: {r}", p.path),
            }),
        }
    }
    done
}

/// Copies what reads of `path` to `to`, a page at a time, unreadable pages as zeros.
/// Returns the bytes written and the offsets of the unreadable pages.
fn salvage(v: &mut Vol<'_>, path: &str, to: &str) -> Result<(u64, Vec<u64>), String> {
    let size = v.metadata(path).map(|m| m.size).unwrap_or(0);
    let src = v
        .open(path, OpenOptions::new().read(true))
        .map_err(|e| format!("cannot open: {e}"))?;
    let mut data = Vec::new();
    let mut holes = Vec::new();
    let unit = crate::part::PAGE as u64;
    let mut buf = vec![0u8; unit as usize];
    let mut at = 0u64;
    while at < size {
        let want = (size - at).min(unit) as usize;
        let mut got = 0;
        let ok = v.seek(src, SeekFrom::Start(at)).is_ok()
            && loop {
                match v.read(src, &mut buf[got..want]) {
                    Ok(0) => break true,
                    Ok(n) => {
                        got += n;
                        if got == want {
                            break true;
                        }
                    }
                    Err(_) => break false,
                }
            };
        if !ok {
            holes.push(at);
            buf[..want].fill(0);
            got = want;
        }
        data.extend_from_slice(&buf[..got]);
        if got < want {
            break;
        }
        at += unit;
    }
    let _ = v.close(src);
    volume::write_file(v, to, &data).map_err(|e| format!("cannot write {to}: {e}"))?;
    Ok((data.len() as u64, holes))
}
