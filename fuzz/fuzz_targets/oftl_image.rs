//! Mounting damaged `oftl` images: a store is formatted and written on the simulated
//! `TINY` part, shut down cleanly or not, then damaged (bytes overwritten anywhere in data
//! or spare, whole pages scribbled); mounting must then fail with an error or recover,
//! and a recovered store must answer reads, writes, GC steps and unmount with results or
//! errors — never a panic, a hang (libFuzzer's timeout) or an out-of-bounds access. A
//! mount that reports media loss is retried as a salvage mount (read-only), then as a
//! repair (which checkpoints what the salvage showed); any other refusal (and a failed
//! repair) as a rebuild from a full scan; each of which must hold to the same rules.
//! Odd seeds format and mount with 512-byte object-table and index pages (the
//! small-RAM layout, `META` 512), even seeds with whole pages.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nand_hal::sim::profile::TINY;
use nand_hal::sim::{FaultPlan, HeapStorage, SimNand};
use nand_hal::PageAddr;
use oftl::{Config, Damaged, Greedy, ObjKind, Oftl};

type Sim = SimNand<HeapStorage>;
type Store<'a, const M: usize> = Oftl<&'a mut Sim, 2048, 64, 4, 2, Greedy, M>;

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
    /// (object, length in 64-byte units) appends before the shutdown.
    writes: Vec<(u8, u8)>,
    clean_shutdown: bool,
    damage: Vec<Damage>,
    /// Scribble this many per mille of pages with random bytes.
    scribble: u8,
}

fuzz_target!(|input: Input| {
    if input.seed & 1 == 1 {
        run::<512>(input)
    } else {
        run::<2048>(input)
    }
});

fn run<const M: usize>(input: Input) {
    // Damaged images: reach the parsers behind the CRCs too (nothing here checks
    // contents, only that every answer is a result, never a panic or a hang).
    oftl::fuzzing::skip_crc_checks(true);
    let mut sim = SimNand::heap(TINY, FaultPlan::seeded(input.seed));
    let g = TINY.geometry;
    {
        let mut fs = Store::<M>::new(&mut sim, CONFIG, Greedy::DEFAULT);
        if fs.format().is_err() {
            return;
        }
        let mut ids = [0u32; 3];
        for id in &mut ids {
            match fs.create(ObjKind::Object) {
                Ok(i) => *id = i,
                Err(_) => return,
            }
        }
        let data = [0x5Au8; 64 * 255];
        for &(o, len) in input.writes.iter().take(64) {
            let id = ids[o as usize % 3];
            let at = fs.size(id).unwrap_or(0);
            let _ = fs.write(id, at, &data[..64 * len as usize]);
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
    let mut fs = Store::<M>::new(&mut sim, CONFIG, Greedy::DEFAULT);
    match fs.mount() {
        Ok(()) => {}
        // What a salvage mount is for: it must mount read-only or fail cleanly too; then
        // a repair (which writes its result) must mount writable or fail cleanly.
        Err(oftl::MountError::MediaLoss { .. }) => {
            if fs.mount_damaged(Damaged::Salvage).is_err() {
                return;
            }
            assert!(matches!(
                fs.health(),
                oftl::Health::ReadOnly(oftl::ReadOnlyReason::Salvage)
            ));
            let _ = fs.salvage_report().rolled_back();
            drop(fs);
            fs = Store::<M>::new(&mut sim, CONFIG, Greedy::DEFAULT);
            if fs.mount_damaged(Damaged::Repair).is_err() {
                // As fsck does: a rebuild from a full scan next.
                drop(fs);
                fs = Store::<M>::new(&mut sim, CONFIG, Greedy::DEFAULT);
                if fs
                    .mount_damaged(Damaged::Rebuild {
                        lost_meta_attrs: [0xFF; oftl::ATTR_LEN],
                    })
                    .is_err()
                {
                    return;
                }
            }
            assert!(!matches!(
                fs.health(),
                oftl::Health::ReadOnly(oftl::ReadOnlyReason::Salvage)
            ));
        }
        // Any other refusal: the full-scan rebuild must mount writable or fail cleanly.
        Err(_) => {
            drop(fs);
            fs = Store::<M>::new(&mut sim, CONFIG, Greedy::DEFAULT);
            if fs
                .mount_damaged(Damaged::Rebuild {
                    lost_meta_attrs: [0xFF; oftl::ATTR_LEN],
                })
                .is_err()
            {
                return;
            }
        }
    }
    let ids: Vec<u32> = fs.objects().take(8).map_while(Result::ok).collect();
    let mut buf = [0u8; 2048];
    for &id in &ids {
        let size = fs.size(id).unwrap_or(0).min(1 << 20);
        let mut at = 0;
        while at < size {
            match fs.read(id, at, &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => at += n as u64,
            }
        }
        let _ = fs.write(id, size, &buf[..100]);
    }
    let _ = fs.gc_step(4);
    let _ = fs.unmount();
}
