//! Simulator images: `HeapStorage::load` over arbitrary bytes returns an image or an
//! error, never panics, and allocates within a bound that does not depend on the sizes a
//! corrupt header claims (libFuzzer's `-malloc_limit_mb` catches an unbounded one).
//!
//! An image that loads is then used: the simulator attaches to it (with the W25N01GV
//! capabilities, when they fit the image's geometry) and reads, programs and erases over
//! whatever per-page and per-block state the image holds; errors are fine, panics are not.

#![no_main]

use libfuzzer_sys::fuzz_target;
use nand_hal::sim::profile::W25N01GV;
use nand_hal::sim::{FaultPlan, HeapStorage, Profile, SimNand};
use nand_hal::{BlockAddr, NandFlash, PageAddr};

fuzz_target!(|data: &[u8]| {
    let Ok(storage) = HeapStorage::load(&mut &data[..]) else {
        return;
    };
    let geometry = *storage.geometry();
    let profile = Profile {
        name: "fuzzed image",
        geometry,
        ..W25N01GV
    };
    if profile.capabilities.validate(&geometry).is_err() {
        return;
    }
    let Ok(mut sim) = SimNand::attach(profile, storage, FaultPlan::seeded(0)) else {
        return;
    };
    let ps = geometry.page_size() as usize;
    let os = geometry.oob_size() as usize;
    let mut page = vec![0u8; ps];
    let mut oob = vec![0u8; os];
    // The first pages of the first blocks, where a small image keeps its state.
    let blocks = geometry.blocks().min(4);
    let pages = geometry.pages_per_block().min(4);
    for b in 0..blocks {
        let block = BlockAddr(b);
        let _ = sim.is_bad(block);
        for i in 0..pages {
            let _ = sim.read_page(geometry.page(block, i), &mut page, &mut oob);
        }
        let next = PageAddr(geometry.page(block, 0).0 + sim.block_state(block).next_page as u32);
        if geometry.contains_page(next) && geometry.block_of(next) == block {
            page.fill(0x00);
            let _ = sim.program_page(next, &page, &[]);
        }
        let _ = sim.erase(block);
        let _ = sim.read_page(geometry.page(block, 0), &mut page, &mut oob);
    }
    let mut image = Vec::new();
    sim.into_storage()
        .save(&mut image)
        .expect("saving to a Vec cannot fail");
});
