//! StageFS on an STM32F411CE "black pill" with a W25N01GV on SPI1 (pins in the README):
//! the boards' demo ([`board_app::run`]) once per reset, reported with defmt over RTT.
//!
//! Each boot probes the part, mounts the volume (or formats a blank part), checks every
//! record of the log file and appends 16 more, each with an `fsync`. Reset the board (or
//! cut its power) at any moment: the next boot finds every record whose `Synced` line
//! was printed.
//!
//! The SPI bus is blocking (`embassy-stm32`'s `Spi` in blocking mode behind
//! `embedded-hal-bus`'s `ExclusiveDevice`, chip select on a GPIO); the driver's status
//! polls wait on `embassy-time`'s busy-wait `Delay`. No executor runs. The clocks are
//! embassy's defaults (16 MHz HSI, so SPI1 runs at 8 MHz at most): the demo does not
//! depend on the board's crystal.

#![no_std]
#![no_main]

use board_app::{W25n01gvVolume, BOARD_DEMO};
use cortex_m_rt::entry;
use defmt::{error, info};
use defmt_rtt as _;
use embassy_stm32::gpio::{Level, Output, Speed};
use embassy_stm32::mode::Blocking;
use embassy_stm32::spi::{self, mode::Master, Spi};
use embassy_stm32::time::Hertz;
use embassy_time::Delay;
use embedded_hal_bus::spi::{ExclusiveDevice, NoDelay};
use panic_probe as _;

/// SPI clock asked for (the HAL picks the nearest divider at or below it).
const SPI_HZ: u32 = 8_000_000;

/// The W25N01GV's bus: SPI1 with chip select on PA4.
type Bus = ExclusiveDevice<Spi<'static, Blocking, Master>, Output<'static>, NoDelay>;

#[entry]
fn main() -> ! {
    // The volume (about 50 KB): built by the compiler, never on the stack.
    static mut VOLUME: W25n01gvVolume<Bus, Delay> = board_app::w25n01gv_volume();

    let p = embassy_stm32::init(Default::default());
    let mut config = spi::Config::default();
    config.frequency = Hertz(SPI_HZ);
    // SPI mode 0 (the default), which the W25N01GV supports along with mode 3.
    let spi = Spi::new_blocking(p.SPI1, p.PA5, p.PA7, p.PA6, config);
    let cs = Output::new(p.PA4, Level::High, Speed::VeryHigh);
    let bus = match ExclusiveDevice::new_no_delay(spi, cs) {
        Ok(bus) => bus,
        Err(e) => match e {},
    };

    info!("stagefs demo on STM32F411, W25N01GV on SPI1");
    match board_app::run(VOLUME, bus, Delay, &BOARD_DEMO, |event| info!("{}", event)) {
        Ok(summary) => info!("done: {}", summary),
        // The bus error (embedded-hal-bus) has no defmt 1 format: printed through Display.
        Err(e) => error!("demo failed: {}", defmt::Display2Format(&e)),
    }
    loop {
        cortex_m::asm::wfi();
    }
}
