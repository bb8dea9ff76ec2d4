//! An `oftl` object workload with a power cut and a remount, on the simulated `TINY` part.
//!
//! Three objects are appended to in whole pages, each write followed by a `flush`; the
//! flash loses power at a chosen program/erase. After power returns the store is mounted
//! again (crash recovery) and every object must hold everything acknowledged before the
//! cut, plus at most the one write that was in flight, with the right bytes. Then the
//! store must take new writes, unmount cleanly and mount again with the same contents.

use nand_hal::sim::FaultPlan;
use oftl::{Config, Greedy, ObjKind, ObjectId, Oftl, W25n01gv, W25n01gvLarge, W25n01gvSmall};

use crate::shared::Part;

/// The configuration every store here formats with: the smallest window both
/// configurations accept on the 16-page blocks of the TINY part (`min_window_blocks`:
/// 6 with `CACHE = 4`, 8 with `CACHE = 12`).
pub const CONFIG: Config = Config::new().window_blocks(8).format_id(7);

/// The store on the 2 MiB `TINY` part: 2 KiB pages, 64 blocks, 4 cached object-table and
/// index pages, 2 write buffers.
pub type Tiny = Oftl<Part, 2048, 64, 4, 2>;

/// The default W25N01GV configuration (1024 blocks, 7 cached object-table and index
/// pages), run over the `TINY` part: its tables are sized for 1024 blocks whatever the
/// part has.
pub type W25Default = W25n01gv<Part>;

/// The large W25N01GV configuration (12 cached pages), over the `TINY` part too.
pub type W25Large = W25n01gvLarge<Part>;

/// The small W25N01GV configuration (4 cached object-table and index pages of 512 B,
/// one write buffer, no log tail page), over the `TINY` part too.
pub type W25Small = W25n01gvSmall<Part>;

/// Any of the firmware's store configurations (`WBUF` write buffers, `META`-byte
/// object-table and index pages, a `LOG`-byte log tail page).
pub type Store<
    const BLOCKS: usize,
    const CACHE: usize,
    const WBUF: usize = 2,
    const META: usize = 2048,
    const LOG: usize = 2048,
> = Oftl<Part, 2048, BLOCKS, CACHE, WBUF, Greedy, META, LOG>;

const OBJECTS: usize = 3;
const CHUNK: usize = 2048;
/// Appends per object at most (the workload stops earlier when the power goes).
const ROUNDS: u32 = 40;

/// What one run established.
pub struct Outcome {
    /// Bytes acknowledged (flushed) before the cut, over all objects.
    pub acked: u64,
    /// Bytes found after recovery, over all objects.
    pub recovered: u64,
    /// Pages recovery scanned.
    pub scanned: u32,
    /// Simulated mount time after the cut, in microseconds.
    pub mount_us: u64,
}

fn byte(obj: usize, offset: u64) -> u8 {
    (offset as u8).wrapping_mul(7) ^ (offset >> 8) as u8 ^ (obj as u8).wrapping_mul(0x35)
}

fn fill(obj: usize, offset: u64, buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = byte(obj, offset + i as u64);
    }
}

fn check_contents<
    const B: usize,
    const C: usize,
    const W: usize,
    const M: usize,
    const L: usize,
>(
    fs: &mut Store<B, C, W, M, L>,
    ids: &[ObjectId; OBJECTS],
    acked: &[u64; OBJECTS],
    in_flight: Option<usize>,
    buf: &mut [u8; CHUNK],
) -> Result<u64, &'static str> {
    let mut total = 0;
    for (o, &id) in ids.iter().enumerate() {
        let size = fs.size(id).map_err(|_| "an object vanished")?;
        let limit = acked[o]
            + if in_flight == Some(o) {
                CHUNK as u64
            } else {
                0
            };
        if size < acked[o] {
            return Err("acknowledged data lost");
        }
        if size > limit {
            return Err("an object grew past its write history");
        }
        let mut at = 0;
        while at < size {
            let n = fs
                .read(id, at, buf)
                .map_err(|_| "read failed after recovery")?;
            if n == 0 {
                return Err("short read");
            }
            if (0..n).any(|i| buf[i] != byte(o, at + i as u64)) {
                return Err("recovered bytes differ from what was written");
            }
            at += n as u64;
        }
        total += size;
    }
    Ok(total)
}

/// One run on a factory-fresh part (the caller renews it), with the store in place (it is
/// never moved): format,
/// write until the power cut that `plan` arms, recover, check, write more, unmount,
/// mount, check again.
pub fn run<const B: usize, const C: usize, const W: usize, const M: usize, const L: usize>(
    fs: &mut Store<B, C, W, M, L>,
    part: Part,
    plan: FaultPlan,
    buf: &mut [u8; CHUNK],
) -> Result<Outcome, &'static str> {
    let mut ids = [0; OBJECTS];
    let mut acked = [0u64; OBJECTS];
    let mut in_flight = None;
    fs.format().map_err(|_| "format failed")?;
    for id in &mut ids {
        *id = fs.create(ObjKind::Object).map_err(|_| "create failed")?;
    }
    fs.sync().map_err(|_| "sync failed")?;
    part.with(|s| s.arm(plan));
    'work: for _ in 0..ROUNDS {
        for o in 0..OBJECTS {
            fill(o, acked[o], buf);
            in_flight = Some(o);
            let done = fs
                .write(ids[o], acked[o], buf)
                .and_then(|()| fs.flush(ids[o]));
            if done.is_err() {
                break 'work;
            }
            acked[o] += CHUNK as u64;
            in_flight = None;
        }
    }
    // The store's RAM state is simply abandoned: as far as the flash knows, a crash.
    if part.with(|s| s.is_powered()) {
        return Err("the workload ended without the power cut");
    }
    let before = acked.iter().sum();

    let t0 = part.with(|s| {
        s.power_on();
        s.disarm();
        s.now_ns()
    });
    fs.mount().map_err(|_| "mount after the cut failed")?;
    let mount_us = (part.with(|s| s.now_ns()) - t0) / 1000;
    let scanned = fs.stats().recovery_scanned_pages;
    let recovered = check_contents(fs, &ids, &acked, in_flight, buf)?;

    // The recovered store takes new writes and survives a clean unmount.
    let mut sizes = [0u64; OBJECTS];
    for (o, &id) in ids.iter().enumerate() {
        sizes[o] = fs.size(id).map_err(|_| "an object vanished")?;
        fill(o, sizes[o], buf);
        fs.write(id, sizes[o], buf)
            .map_err(|_| "write after recovery failed")?;
        sizes[o] += CHUNK as u64;
    }
    fs.unmount().map_err(|_| "unmount failed")?;
    if fs.write(ids[0], 0, &buf[..1]).is_ok() {
        return Err("an unmounted store took a write");
    }
    fs.mount().map_err(|_| "clean mount failed")?;
    check_contents(fs, &ids, &sizes, None, buf)?;
    if part.with(|s| s.counters().misuse) != 0 {
        return Err("the store broke a NAND rule");
    }
    Ok(Outcome {
        acked: before,
        recovered,
        scanned,
        mount_us,
    })
}
