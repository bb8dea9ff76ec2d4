//! The async driver: every operation once, in one task run by `block_on`.
#![no_std]
#![no_main]

use core::hint::black_box;

use nand_hal::asynch::{block_on, NandFlash};
use nand_hal::spi::SpiNand;
use nand_hal::{BlockAddr, PageAddr};
use nand_hal_size::{Bus, Delay};

#[no_mangle]
pub extern "C" fn _start() -> ! {
    block_on(async {
        let Ok(mut nand) = SpiNand::new_async(Bus, Delay).await else {
            return;
        };
        let mut data = [0u8; 2048];
        let mut oob = [0u8; 64];
        let page = PageAddr(black_box(64));
        let block = BlockAddr(black_box(1));
        let _ = black_box(nand.read(page, black_box(0), &mut data, &mut oob).await);
        let _ = black_box(nand.read_steps(page, &mut data, &mut oob).await);
        let _ = black_box(nand.program(page, black_box(0), &data, &oob).await);
        let _ = black_box(nand.erase(block).await);
        let _ = black_box(nand.is_bad(block).await);
        let _ = black_box(nand.mark_bad(block).await);
        let _ = black_box(nand.reinit().await);
        black_box((&data, &oob));
    });
    loop {}
}
