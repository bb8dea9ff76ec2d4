//! A dummy SPI bus and delay (blocking and async) the size binaries drive the drivers
//! with: bytes go to and come from `black_box`, so nothing is optimised away; the async
//! bus yields once per transaction, as a DMA-driven one would.
#![no_std]

use core::convert::Infallible;
use core::future::Future;
use core::hint::black_box;
use core::pin::Pin;
use core::task::{Context, Poll};

use embedded_hal::spi::{ErrorType, Operation};

/// The dummy bus.
pub struct Bus;

impl ErrorType for Bus {
    type Error = Infallible;
}

fn shift(ops: &mut [Operation<'_, u8>]) {
    for op in ops {
        match op {
            Operation::Read(buf) => buf.iter_mut().for_each(|b| *b = black_box(0xA5)),
            Operation::Write(buf) => {
                black_box(&buf[..]);
            }
            Operation::Transfer(r, w) => {
                black_box(&w[..]);
                r.iter_mut().for_each(|b| *b = black_box(0xA5));
            }
            Operation::TransferInPlace(buf) => buf.iter_mut().for_each(|b| *b = black_box(*b)),
            Operation::DelayNs(ns) => {
                black_box(*ns);
            }
        }
    }
}

impl embedded_hal::spi::SpiDevice for Bus {
    fn transaction(&mut self, ops: &mut [Operation<'_, u8>]) -> Result<(), Infallible> {
        shift(ops);
        Ok(())
    }
}

/// Pending once, then ready (the transfer "completes" on the next poll).
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

impl embedded_hal_async::spi::SpiDevice for Bus {
    async fn transaction(&mut self, ops: &mut [Operation<'_, u8>]) -> Result<(), Infallible> {
        YieldOnce(false).await;
        shift(ops);
        Ok(())
    }
}

/// The dummy delay.
pub struct Delay;

impl embedded_hal::delay::DelayNs for Delay {
    fn delay_ns(&mut self, ns: u32) {
        black_box(ns);
    }
}

impl embedded_hal_async::delay::DelayNs for Delay {
    async fn delay_ns(&mut self, ns: u32) {
        YieldOnce(false).await;
        black_box(ns);
    }
}

/// Every blocking operation once, on arguments the compiler cannot see.
pub fn exercise<F: nand_hal::NandFlash>(nand: &mut F) {
    let mut data = [0u8; 2048];
    let mut oob = [0u8; 64];
    let page = nand_hal::PageAddr(black_box(64));
    let block = nand_hal::BlockAddr(black_box(1));
    let _ = black_box(nand.read(page, black_box(0), &mut data, &mut oob));
    let _ = black_box(nand.read_steps(page, &mut data, &mut oob));
    let _ = black_box(nand.program(page, black_box(0), &data, &oob));
    let _ = black_box(nand.erase(block));
    let _ = black_box(nand.is_bad(block));
    let _ = black_box(nand.mark_bad(block));
    black_box((&data, &oob));
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {}
}
