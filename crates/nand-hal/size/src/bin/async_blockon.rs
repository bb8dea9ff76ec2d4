//! The async driver used from blocking code through `BlockOn`: every operation once.
#![no_std]
#![no_main]

use core::hint::black_box;

use nand_hal::asynch::{block_on, BlockOn};
use nand_hal::spi::SpiNand;
use nand_hal_size::{exercise, Bus, Delay};

#[no_mangle]
pub extern "C" fn _start() -> ! {
    let Ok(nand) = block_on(SpiNand::new_async(Bus, Delay)) else {
        loop {}
    };
    let mut nand = BlockOn::new(nand);
    exercise(&mut nand);
    let _ = black_box(block_on(nand.inner_mut().reinit()));
    loop {}
}
