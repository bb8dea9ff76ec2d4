//! `stagefs`: StageFS images on a PC. Makes factory images from a host directory,
//! lists, reads, copies and removes files in an image, checks an image (`fsck`) and
//! shows how the store on it uses the part (`inspect`). Every command works on an image
//! in the programmer's layout ([`image`]) of a named part (`--part`, default W25N01GV),
//! loaded into the simulated part; commands that change it write the image back only
//! when they succeed.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use nand_hal::sim::profile::Profile;
use stagefs_core::Kind;

use stagefs_cli::volume::{say, Vol};
use stagefs_cli::{copy, fsck, image, inspect, mount, part, volume};

/// `println!` that never panics: a closed standard output (`stagefs ls img | head`)
/// drops the rest of the output instead.
macro_rules! out {
    ($($t:tt)*) => {{
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

/// `print!` that never panics (see `out!`).
macro_rules! outp {
    ($($t:tt)*) => {{
        let _ = write!(std::io::stdout(), $($t)*);
    }};
}

#[derive(Parser)]
#[command(
    name = "stagefs",
    version,
    about = "StageFS images on a PC: mkfs, ls, cat, cp, rm, mkdir, fsck, inspect"
)]
struct Cli {
    /// The part the image is for (w25n01gv, gd5f1gq4xa, mt29f1g01abafd, mt29f2g08, w25m02gv, tiny).
    #[arg(long, global = true, default_value = "w25n01gv")]
    part: String,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Formats a new image, copying a host directory tree in (a factory image).
    Mkfs {
        /// Host directory whose contents become the image's root.
        #[arg(long)]
        from: Option<PathBuf>,
        /// Make the image for one part with these factory bad blocks (comma-separated
        /// block numbers): needed when one of them is among the blocks a generic image
        /// holds data in (mkfs lists them).
        #[arg(long, value_delimiter = ',')]
        bad_blocks: Vec<u32>,
        /// The image file to write.
        image: PathBuf,
    },
    /// Lists a directory of the image.
    Ls {
        image: PathBuf,
        /// Directory inside the image.
        #[arg(default_value = "/")]
        path: String,
    },
    /// Writes a file of the image to standard output.
    Cat { image: PathBuf, path: String },
    /// Copies between the host and the image; image paths start with ':' (`:/etc/motd`).
    Cp {
        /// Copy directories and their contents.
        #[arg(short = 'r')]
        recursive: bool,
        image: PathBuf,
        from: String,
        to: String,
    },
    /// Removes a file or an empty directory of the image.
    Rm {
        /// Remove a directory and everything in it.
        #[arg(short = 'r')]
        recursive: bool,
        image: PathBuf,
        path: String,
    },
    /// Creates a directory in the image.
    Mkdir {
        /// Create missing parents too, and accept an existing directory.
        #[arg(short = 'p')]
        parents: bool,
        image: PathBuf,
        path: String,
    },
    /// Checks an image: mount (recovering a crash), read every directory and file.
    /// Exit code 0 clean, 1 a crash was recovered or problems were repaired, 4 problems
    /// left, 8 not checkable.
    Fsck {
        image: PathBuf,
        /// Repair in place, never by reformatting: a store that does not mount is
        /// replayed up to its first lost page, or rebuilt from a scan of every page's
        /// tag when its checkpoints, index pages or superblock do not read; then
        /// damaged files are moved aside (what still reads goes to /lost+found) and
        /// objects no path names deleted, so the image mounts clean with every
        /// undamaged file.
        #[arg(long)]
        repair: bool,
    },
    /// Shows block states, valid pages, erase counts and bad blocks, or one page's tags.
    Inspect {
        image: PathBuf,
        /// Show the spare-area tags of this page instead.
        #[arg(long)]
        page: Option<u32>,
        /// Also draw the erase-count heat map and block-state map as SVG here.
        #[arg(long)]
        svg: Option<PathBuf>,
        /// Also draw them as PNG here.
        #[arg(long)]
        png: Option<PathBuf>,
    },
    /// The power-loss harness on a workload: random clean and torn cuts, each followed
    /// by a remount checked against a file-tree oracle; failures print a replay token.
    Torture {
        /// many, logging, varmail, staging or mixed.
        #[arg(long, default_value = "mixed")]
        workload: String,
        /// Power cuts to try.
        #[arg(long, default_value_t = 1000)]
        cuts: u64,
        /// Operations in the workload.
        #[arg(long, default_value_t = 200)]
        ops: usize,
        /// Seed of the workload and the cut points.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Add background faults: read errors, program and erase failures, bad blocks.
        #[arg(long)]
        noisy: bool,
        /// Run only the case this replay token names.
        #[arg(long)]
        replay: Option<String>,
    },
    /// Sizing: runs a workload to steady state on the simulated part and projects the
    /// product's life (years to rated cycles), WA, worst operation, mount after a cut
    /// and RAM.
    Plan {
        /// `KIND:SIZE@RATE`: logging, settings, random or stream; `64B`, `4KiB`;
        /// `10/s`, `5/min`, `2/h`, `1/day`. Repeat for several at once.
        #[arg(long = "workload", required = true)]
        workloads: Vec<String>,
        /// Measure over this many times the part's bytes programmed (after 1.5 times to
        /// reach steady state); longer windows estimate the wear spread better.
        #[arg(long, default_value_t = 1)]
        window: u64,
        /// Stop (and fail) if no steady state after this many operations.
        #[arg(long, default_value_t = 50_000_000)]
        max_ops: u64,
        /// Draw the projected wear over time (`.png`).
        #[arg(long)]
        png: Option<PathBuf>,
        /// Draw it as SVG.
        #[arg(long)]
        svg: Option<PathBuf>,
    },
    /// Draws the main job's results (`stagefs-bench --csv FILE`): throughput and WA per
    /// workload, every target side by side with littlefs2.
    BenchPlot {
        /// The CSV stagefs-bench wrote.
        csv: PathBuf,
        /// The picture to write (`.svg` or `.png`).
        out: PathBuf,
    },
    /// Mounts an image with FUSE until `fusermount3 -u DIR`; unmounting makes every
    /// file durable and writes the image back.
    Mount {
        image: PathBuf,
        dir: PathBuf,
        /// Mount options: `ro` (read-only: nothing is written) or `rw`.
        #[arg(short = 'o', value_delimiter = ',')]
        options: Vec<String>,
        /// Cut the power inside the simulated part at the N-th program or erase after
        /// mounting: `N` or `N.KIND`, KIND one of clean, some, most, prefix, rand
        /// (the torn shapes). The image saved at unmount holds what the cut left.
        #[arg(long)]
        cut_at: Option<String>,
        /// Arm a whole fault plan instead (a replay token, `ns1:seed=..:cut=..`).
        #[arg(long, conflicts_with = "cut_at")]
        faults: Option<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let profile = match part::by_name(&cli.part) {
        Ok(p) => p,
        Err(e) => return fail(&e, 16),
    };
    let r = match cli.cmd {
        Cmd::Fsck { image, repair } => return fsck_cmd(&profile, &image, repair),
        Cmd::Mkfs {
            from,
            bad_blocks,
            image,
        } => mkfs(&profile, from.as_deref(), &bad_blocks, &image),
        Cmd::Ls { image, path } => on_image(&profile, &image, false, |v| ls(v, &path)),
        Cmd::Cat { image, path } => on_image(&profile, &image, false, |v| {
            let data = volume::read_file(v, &path).map_err(|e| say(&path, e))?;
            std::io::stdout()
                .write_all(&data)
                .map_err(|e| format!("standard output: {e}"))
        }),
        Cmd::Cp {
            recursive,
            image,
            from,
            to,
        } => cp(&profile, &image, &from, &to, recursive),
        Cmd::Rm {
            recursive,
            image,
            path,
        } => on_image(&profile, &image, true, |v| {
            copy::remove(v, &path, recursive)
        }),
        Cmd::Mkdir {
            parents,
            image,
            path,
        } => on_image(&profile, &image, true, |v| mkdir(v, &path, parents)),
        Cmd::Inspect {
            image,
            page,
            svg,
            png,
        } => inspect_cmd(&profile, &image, page, &[svg, png]),
        Cmd::BenchPlot { csv, out } => std::fs::read_to_string(&csv)
            .map_err(|e| format!("{}: {e}", csv.display()))
            .and_then(|c| stagefs_cli::benchplot::draw(&c, &out))
            .map(|()| out!("wrote {}", out.display())),
        Cmd::Plan {
            workloads,
            window,
            max_ops,
            png,
            svg,
        } => plan_cmd(&profile, &workloads, window, max_ops, &[png, svg]),
        Cmd::Torture {
            workload,
            cuts,
            ops,
            seed,
            noisy,
            replay,
        } => torture_cmd(&profile, &workload, cuts, ops, seed, noisy, replay),
        Cmd::Mount {
            image,
            dir,
            options,
            cut_at,
            faults,
        } => mount_cmd(&profile, image, dir, &options, cut_at, faults),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e, 1),
    }
}

fn fail(e: &str, code: u8) -> ExitCode {
    eprintln!("stagefs: {e}");
    ExitCode::from(code)
}

/// Runs `f` on the mounted volume of `image`; with `write`, unmounts and saves the image
/// when `f` succeeds (a failure leaves the image file as it was).
fn on_image<T>(
    profile: &Profile,
    image: &Path,
    write: bool,
    f: impl FnOnce(&mut Vol<'_>) -> Result<T, String>,
) -> Result<T, String> {
    let mut sim = volume::load(profile, image)?;
    let out = {
        let mut v = volume::over(&mut sim);
        v.mount()
            .map_err(|e| say(&format!("mounting {}", image.display()), e))?;
        let out = f(&mut v)?;
        if write {
            v.unmount().map_err(|e| say("unmounting", e))?;
        }
        out
    };
    if write {
        volume::save(&sim, image)?;
    }
    Ok(out)
}

fn mkfs(profile: &Profile, from: Option<&Path>, bad: &[u32], image: &Path) -> Result<(), String> {
    use nand_hal::NandFlash as _;
    let mut sim = image::blank(profile);
    for &b in bad {
        if b >= profile.geometry.blocks() {
            return Err(format!(
                "--bad-blocks {b}: the part has {} blocks",
                profile.geometry.blocks()
            ));
        }
        sim.mark_bad(nand_hal::BlockAddr(b))
            .map_err(|e| format!("marking block {b} bad: {e:?}"))?;
    }
    let files = {
        let mut v = volume::over_for_image(&mut sim);
        v.format().map_err(|e| say("formatting", e))?;
        let files = match from {
            Some(dir) => {
                if !dir.is_dir() {
                    return Err(format!("{}: not a directory", dir.display()));
                }
                copy::into_image(&mut v, dir, "/", true)?
            }
            None => 0,
        };
        v.unmount().map_err(|e| say("unmounting", e))?;
        files
    };
    volume::save(&sim, image)?;
    let mut bytes = Vec::new();
    image::save(&sim, &mut bytes).map_err(|e| e.to_string())?;
    let used = image::used_blocks(profile, &bytes);
    out!(
        "{}: {} image, {files} files, {} bytes; data and checkpoint blocks {}",
        image.display(),
        profile.name,
        image::image_len(profile),
        image::ranges(&used)
    );
    if bad.is_empty() {
        out!(
            "program it block for block, bad blocks skipped in place (no shift), onto a part whose factory bad blocks are not among those blocks; a part with several bad blocks is safer with its own image (--bad-blocks; docs/SPEC.md section 5)"
        );
    } else {
        out!(
            "made for a part whose factory bad blocks are {}: program it block for block, bad blocks skipped in place (no shift)",
            image::ranges(bad)
        );
    }
    Ok(())
}

fn ls(v: &mut Vol<'_>, path: &str) -> Result<(), String> {
    for (name, kind) in volume::list(v, path).map_err(|e| say(path, e))? {
        let full = volume::join(path, &name);
        match kind {
            Kind::Dir => out!("d {:>10} {name}/", "-"),
            Kind::File => {
                let m = v.metadata(&full).map_err(|e| say(&full, e))?;
                out!("f {:>10} {name}", m.size);
            }
        }
    }
    Ok(())
}

fn cp(
    profile: &Profile,
    image: &Path,
    from: &str,
    to: &str,
    recursive: bool,
) -> Result<(), String> {
    match (from.strip_prefix(':'), to.strip_prefix(':')) {
        (None, Some(dst)) => on_image(profile, image, true, |v| {
            copy::into_image(v, Path::new(from), dst, recursive).map(|_| ())
        }),
        (Some(src), None) => on_image(profile, image, false, |v| {
            copy::out_of_image(v, src, Path::new(to), recursive).map(|_| ())
        }),
        _ => Err("exactly one of the two paths must be inside the image (start with ':')".into()),
    }
}

fn mkdir(v: &mut Vol<'_>, path: &str, parents: bool) -> Result<(), String> {
    if !parents {
        return v.create_dir(path).map_err(|e| say(path, e));
    }
    let mut at = String::new();
    for c in path.split('/').filter(|c| !c.is_empty()) {
        at.push('/');
        at.push_str(c);
        match v.metadata(&at) {
            Ok(m) if m.kind == Kind::Dir => {}
            Ok(_) => return Err(format!("{at}: exists and is not a directory")),
            Err(stagefs_core::Error::NotFound) => v.create_dir(&at).map_err(|e| say(&at, e))?,
            Err(e) => return Err(say(&at, e)),
        }
    }
    Ok(())
}

fn fsck_cmd(profile: &Profile, image: &Path, repair: bool) -> ExitCode {
    let mut sim = match volume::load(profile, image) {
        Ok(s) => s,
        Err(e) => return fail(&e, 8),
    };
    let mut out = String::new();
    let (code, changed) = fsck::run(&mut sim, &image.display().to_string(), repair, &mut out);
    outp!("{out}");
    if changed {
        if let Err(e) = volume::save(&sim, image) {
            return fail(&e, 8);
        }
    }
    ExitCode::from(code)
}

fn inspect_cmd(
    profile: &Profile,
    image: &Path,
    page: Option<u32>,
    pictures: &[Option<PathBuf>],
) -> Result<(), String> {
    let mut sim = volume::load(profile, image)?;
    if let Some(p) = page {
        outp!("{}", inspect::page_tags(&sim, p)?);
        return Ok(());
    }
    let mut v = volume::over(&mut sim);
    v.mount()
        .map_err(|e| say(&format!("mounting {}", image.display()), e))?;
    let s = inspect::summary(profile, v.store().blocks(), &v.store().stats());
    outp!("{s}");
    let st = v
        .staging_status()
        .map_err(|e| say("reading the staging state", e))?;
    outp!("{}", inspect::staging(&st));
    for p in pictures.iter().flatten() {
        stagefs_cli::picture::block_maps(
            p,
            profile.name,
            profile.geometry.pages_per_block(),
            v.store().blocks(),
        )?;
        out!("wrote {}", p.display());
    }
    Ok(())
}

fn mount_cmd(
    profile: &Profile,
    image: PathBuf,
    dir: PathBuf,
    options: &[String],
    cut_at: Option<String>,
    faults: Option<String>,
) -> Result<(), String> {
    let mut read_only = false;
    for o in options {
        match o.as_str() {
            "ro" => read_only = true,
            "rw" => read_only = false,
            _ => return Err(format!("-o {o}: unknown mount option (ro, rw)")),
        }
    }
    let faults = match (cut_at, faults) {
        (Some(c), _) => Some(mount::cut_plan(&c)?),
        (None, Some(t)) => Some(
            t.parse()
                .map_err(|_| format!("--faults {t}: not a replay token"))?,
        ),
        (None, None) => None,
    };
    if read_only && faults.is_some() {
        return Err("a power cut needs a read-write mount".into());
    }
    mount::run(
        profile,
        &mount::MountSpec {
            image,
            dir,
            read_only,
            faults,
        },
    )
}

fn torture_cmd(
    profile: &Profile,
    workload: &str,
    cuts: u64,
    ops: usize,
    seed: u64,
    noisy: bool,
    replay: Option<String>,
) -> Result<(), String> {
    use stagefs_cli::torture;
    if let Some(token) = replay {
        torture::replay(&token)?;
        out!("{token}: passes");
        return Ok(());
    }
    let w = torture::workload(workload, ops, seed, *profile)?;
    let bar = indicatif::ProgressBar::new(cuts).with_style(
        indicatif::ProgressStyle::with_template(
            "{msg} [{bar:40}] {pos}/{len} cuts, {elapsed} (eta {eta})",
        )
        .map_err(|e| e.to_string())?
        .progress_chars("=> "),
    );
    bar.set_message(format!("{workload} on {}", profile.name));
    let o = torture::run(&w, cuts, seed, noisy, |done| bar.set_position(done));
    bar.finish_and_clear();
    out!(
        "{workload} on {}: {} operations ({} programs and erases uncut); {} cases, {} cuts in the workload, {} in recovery; {} failures",
        profile.name,
        w.ops.len(),
        o.workload_ops,
        o.runs,
        o.cuts,
        o.recovery_cuts,
        o.failures.len()
    );
    for f in &o.failures {
        out!("FAILED: {f}");
        out!(
            "  stagefs --part {} torture --replay '{}'",
            profile.name.to_ascii_lowercase(),
            f.token
        );
    }
    if o.failures.is_empty() {
        Ok(())
    } else {
        Err(format!("{} power-loss cases failed", o.failures.len()))
    }
}

fn plan_cmd(
    profile: &Profile,
    workloads: &[String],
    window: u64,
    max_ops: u64,
    pictures: &[Option<PathBuf>],
) -> Result<(), String> {
    use stagefs_cli::plan;
    let loads = workloads
        .iter()
        .map(|w| plan::parse(w))
        .collect::<Result<Vec<_>, _>>()?;
    let bar = indicatif::ProgressBar::new(100).with_style(
        indicatif::ProgressStyle::with_template(
            "{msg} [{bar:40}] {percent}% of the bytes to steady state and through the window, {elapsed}",
        )
        .map_err(|e| e.to_string())?
        .progress_chars("=> "),
    );
    bar.set_message(format!("simulating {}", profile.name));
    let p = plan::run(profile, &loads, window, max_ops, |done, need| {
        bar.set_position((done * 100 / need.max(1)).min(100));
    });
    bar.finish_and_clear();
    let p = p?;
    outp!("{}", p.report(profile, workloads));
    for path in pictures.iter().flatten() {
        plan::draw(&p, profile.name, path)?;
        out!("wrote {}", path.display());
    }
    Ok(())
}
