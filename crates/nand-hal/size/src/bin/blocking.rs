//! The blocking driver: every operation once.
#![no_std]
#![no_main]

use core::hint::black_box;

use nand_hal::spi::SpiNand;
use nand_hal_size::{exercise, Bus, Delay};

#[no_mangle]
pub extern "C" fn _start() -> ! {
    let Ok(mut nand) = SpiNand::new(Bus, Delay) else {
        loop {}
    };
    exercise(&mut nand);
    let _ = black_box(nand.reinit());
    loop {}
}
