//! Mounting damaged StageFS volumes: a volume is formatted and filled (directories,
//! inline files, files with objects, staged appends) on the simulated `TINY` part, shut
//! down cleanly or not, then damaged (bytes overwritten anywhere in data or spare, whole
//! pages scribbled); mounting must then fail with an error or succeed, and a mounted
//! volume must answer listing, reads, writes, renames, removals, the search for objects
//! no path names and unmount with results or errors: never a panic, a hang (libFuzzer's
//! timeout) or an out-of-bounds access. A volume that does not mount goes through `fsck --repair`'s mounts (the
//! repair for lost window pages, then the rebuild from a full scan) under the same
//! rules.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nand_hal::sim::profile::TINY;
use nand_hal::sim::{FaultPlan, HeapStorage, SimNand};
use nand_hal::PageAddr;
use oftl::{Config, Greedy, Oftl};
use stagefs_core::{Fs, Kind, OpenOptions};

type Sim = SimNand<HeapStorage>;
type Vol<'a> = Fs<Oftl<&'a mut Sim, 2048, 64, 4>, 2048, 4>;

const CONFIG: Config = Config::new().window_blocks(6);

#[derive(Arbitrary, Debug)]
struct Damage {
    page: u16,
    column: u16,
    oob: bool,
    bytes: Vec<u8>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    seed: u64,
    /// (file index, length) writes; appends with fsync when the length is odd.
    files: Vec<(u8, u16)>,
    clean_shutdown: bool,
    damage: Vec<Damage>,
    /// Scribble this many per mille of pages with random bytes.
    scribble: u8,
}

const NAMES: [&str; 6] = ["/f", "/d/a", "/d/b", "/d/e/c", "/g", "/d/e/h"];

fuzz_target!(|input: Input| {
    // Damaged images: reach the parsers behind the CRCs too (nothing here checks
    // contents, only that every answer is a result, never a panic or a hang).
    oftl::fuzzing::skip_crc_checks(true);
    let mut sim = SimNand::heap(TINY, FaultPlan::seeded(input.seed));
    let g = TINY.geometry;
    {
        let mut fs: Vol<'_> = Fs::new(Oftl::new(&mut sim, CONFIG, Greedy::DEFAULT));
        if fs.format().is_err() {
            return;
        }
        let _ = fs.create_dir("/d");
        let _ = fs.create_dir("/d/e");
        let data = [0xA5u8; 4000];
        for &(i, len) in input.files.iter().take(24) {
            let name = NAMES[i as usize % NAMES.len()];
            let len = len as usize % data.len();
            let o = if len % 2 == 1 {
                OpenOptions::new().append(true).create(true)
            } else {
                OpenOptions::new().write(true).create(true).truncate(true)
            };
            if let Ok(f) = fs.open(name, o) {
                let _ = fs.write(f, &data[..len]);
                if len % 2 == 1 {
                    let _ = fs.fsync(f);
                }
                let _ = fs.close(f);
            }
        }
        if input.clean_shutdown {
            let _ = fs.unmount();
        }
    }
    for d in input.damage.iter().take(32) {
        let page = PageAddr(d.page as u32 % g.pages());
        if d.oob {
            let start = d.column as usize % g.oob_size() as usize;
            let n = d.bytes.len().min(g.oob_size() as usize - start);
            let mut oob = vec![0u8; g.oob_size() as usize];
            let mut scratch = vec![0u8; 0];
            sim.peek(page, &mut scratch, &mut oob);
            oob[start..start + n].copy_from_slice(&d.bytes[..n]);
            sim.poke(page, 0, &[], &oob);
        } else {
            let start = d.column as usize % g.page_size() as usize;
            let n = d.bytes.len().min(g.page_size() as usize - start);
            sim.poke(page, start as u32, &d.bytes[..n], &[]);
        }
    }
    if input.scribble > 0 {
        sim.scribble(input.seed ^ 0x5c, input.scribble as u32 % 1000);
    }
    let mut fs: Vol<'_> = Fs::new(Oftl::new(&mut sim, CONFIG, Greedy::DEFAULT));
    if fs.mount().is_err() {
        // What `fsck --repair` does next: the repair for lost window pages, then the
        // rebuild from a full scan; each must mount a working volume or fail cleanly.
        if fs.mount_repair().is_err() && fs.mount_rebuild().is_err() {
            return;
        }
    }
    // Walk what is there (bounded), read every file, then change a few things.
    let mut dirs = vec![String::from("/")];
    let mut files = Vec::new();
    let mut seen = 0;
    while let Some(d) = dirs.pop() {
        let Ok(list) = fs.read_dir(&d) else { continue };
        let mut names = Vec::new();
        for e in list.take(64) {
            let Ok(e) = e else { break };
            names.push((e.name().to_string(), e.kind));
        }
        for (n, k) in names {
            seen += 1;
            if seen > 200 {
                break;
            }
            let p = if d == "/" {
                format!("/{n}")
            } else {
                format!("{d}/{n}")
            };
            match k {
                Kind::Dir if dirs.len() < 16 => dirs.push(p),
                Kind::Dir => {}
                Kind::File => files.push(p),
            }
        }
    }
    let mut buf = [0u8; 1024];
    for p in files.iter().take(16) {
        if let Ok(f) = fs.open(p, OpenOptions::new().read(true).write(true)) {
            for _ in 0..8 {
                match fs.read(f, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            let _ = fs.write(f, b"more");
            let _ = fs.fsync(f);
            let _ = fs.close(f);
        }
        let _ = fs.metadata(p);
    }
    if let Some(p) = files.first() {
        let _ = fs.rename(p, "/renamed");
        let _ = fs.remove("/renamed");
    }
    let _ = fs.create_dir("/new");
    let _ = fs.step(4);
    // What `fsck --repair` does last: objects no path names are listed and deleted.
    let _ = fs.unnamed_objects();
    let _ = fs.remove_unnamed_objects();
    let _ = fs.unmount();
});
