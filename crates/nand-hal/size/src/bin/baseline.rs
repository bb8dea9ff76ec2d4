//! The harness alone: the dummy bus, delay and executor, no driver.
#![no_std]
#![no_main]

use core::hint::black_box;

use embedded_hal::spi::{Operation, SpiDevice};
use nand_hal_size::{Bus, Delay};

#[no_mangle]
pub extern "C" fn _start() -> ! {
    let mut buf = [0u8; 8];
    let _ = black_box(Bus.transaction(&mut [Operation::Read(&mut buf)]));
    embedded_hal::delay::DelayNs::delay_ns(&mut Delay, black_box(5));
    let _ = black_box(nand_hal::asynch::block_on(async {
        let mut bus = Bus;
        embedded_hal_async::spi::SpiDevice::transaction(&mut bus, &mut [Operation::Read(&mut buf)])
            .await
    }));
    black_box(&buf);
    loop {}
}
