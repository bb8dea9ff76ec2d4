//! Host CPU cost of the SPI NAND driver (over the chip model) per page read and
//! program, and of the software BCH codec per 512 B sector.
//!
//! `cargo bench -p nand-hal --features spi-model,ecc,std --bench spi_driver`
//!
//! The driver figures include the chip model's own decoding and the simulator behind
//! it, so they are an upper bound of the driver's cost; the simulated time per
//! operation is checked in `tests/spi_protocol.rs`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use nand_hal::ecc::{SectorCodec, Strength};
use nand_hal::sim::{FaultPlan, SimNand};
use nand_hal::spi::{model, ChipModel, HostClock, SpiNand};
use nand_hal::{BlockAddr, NandFlash, PageAddr};

fn driver(c: &mut Criterion) {
    let clock = HostClock::new();
    let sim = SimNand::heap(model::W25N01GV.profile, FaultPlan::seeded(3));
    let chip = ChipModel::new(sim, model::W25N01GV, &clock).unwrap();
    let mut drv = SpiNand::new(chip, clock.delay()).unwrap();
    let data: Vec<u8> = (0..2048u32).map(|i| i as u8).collect();
    let oob = [0xFFu8; 64];
    let mut back = vec![0u8; 2048];
    let mut back_oob = [0u8; 64];
    drv.erase(BlockAddr(100)).unwrap();
    drv.program_page(PageAddr(6400), &data, &oob).unwrap();
    c.bench_function("spi_driver/read_page (W25N01GV model)", |b| {
        b.iter(|| {
            drv.read_page(black_box(PageAddr(6400)), &mut back, &mut back_oob)
                .unwrap()
        })
    });
    let mut page = 0u32;
    let mut block = 200u32;
    drv.erase(BlockAddr(block)).unwrap();
    c.bench_function("spi_driver/program_page (W25N01GV model)", |b| {
        b.iter(|| {
            if page == 64 {
                page = 0;
                block = if block == 999 { 200 } else { block + 1 };
                drv.erase(BlockAddr(block)).unwrap();
            }
            drv.program_page(PageAddr(block * 64 + page), black_box(&data), &oob)
                .unwrap();
            page += 1;
        })
    });
}

fn codec(c: &mut Criterion) {
    let data: Vec<u8> = (0..512u32).map(|i| (i * 7) as u8).collect();
    for (name, strength) in [("t4", Strength::T4), ("t8", Strength::T8)] {
        let codec = SectorCodec::new(strength, 4);
        let mut chunk = vec![0xFFu8; codec.chunk_len()];
        chunk[..4].copy_from_slice(&[1, 2, 3, 4]);
        c.bench_function(&format!("bch_{name}/encode 512B"), |b| {
            b.iter(|| codec.encode(black_box(&data), &mut chunk))
        });
        let clean = chunk.clone();
        c.bench_function(&format!("bch_{name}/decode 512B clean"), |b| {
            b.iter(|| {
                let mut d = data.clone();
                let mut ch = clean.clone();
                codec.decode(&mut d, &mut ch).unwrap()
            })
        });
        let t = strength.bits() as usize;
        c.bench_function(&format!("bch_{name}/decode 512B with t errors"), |b| {
            b.iter(|| {
                let mut d = data.clone();
                let mut ch = clean.clone();
                for k in 0..t {
                    d[k * 61] ^= 1 << k;
                }
                codec.decode(&mut d, &mut ch).unwrap()
            })
        });
    }
}

criterion_group!(benches, driver, codec);
criterion_main!(benches);
