//! The async driver used from blocking code through `BlockOn`: every operation once.
#![no_std]
#![no_main]

use core::hint::black_box;

use nand_hal::asynch::{block_on, BlockOn};
use nand_hal::spi::SpiNand;
use nand_hal::{BlockAddr, NandFlash, PageAddr};
use nand_hal_size::{Bus, Delay};

#[no_mangle]
pub extern "C" fn _start() -> ! {
    let Ok(nand) = block_on(SpiNand::new_async(Bus, Delay)) else {
        loop {}
    };
    let mut nand = BlockOn::new(nand);
    let mut data = [0u8; 2048];
    let mut oob = [0u8; 64];
    let page = PageAddr(black_box(64));
    let block = BlockAddr(black_box(1));
    let _ = black_box(nand.read(page, black_box(0), &mut data, &mut oob));
    let _ = black_box(nand.read_steps(page, &mut data, &mut oob));
    let _ = black_box(nand.program(page, black_box(0), &data, &oob));
    let _ = black_box(nand.erase(block));
    let _ = black_box(nand.is_bad(block));
    let _ = black_box(nand.mark_bad(block));
    let _ = black_box(block_on(nand.inner_mut().reinit()));
    black_box((&data, &oob));
    loop {}
}
