//! StageFS on an RP2040 with a W25N01GV on SPI0 (pins in the README): the boards' demo
//! ([`board_app::run`]) once per reset, reported with defmt over RTT.
//!
//! Each boot probes the part, mounts the volume (or formats a blank part), checks every
//! record of the log file and appends 16 more, each with an `fsync`. Reset the board (or
//! cut its power) at any moment: the next boot finds every record whose `Synced` line
//! was printed.
//!
//! The SPI bus is blocking (`embassy-rp`'s `Spi` in blocking mode behind
//! `embedded-hal-bus`'s `ExclusiveDevice`, chip select on a GPIO); the driver's status
//! polls wait on `embassy-time`'s busy-wait `Delay`. No executor runs.

#![no_std]
#![no_main]

use board_app::{W25n01gvVolume, BOARD_DEMO};
use cortex_m_rt::entry;
use defmt::{error, info};
use defmt_rtt as _;
use embassy_rp::gpio::{Level, Output};
use embassy_rp::peripherals::SPI0;
use embassy_rp::spi::{self, Blocking, Spi};
use embassy_time::Delay;
use embedded_hal_bus::spi::{ExclusiveDevice, NoDelay};
use panic_probe as _;

/// SPI clock. The W25N01GV takes up to 104 MHz; 16 MHz is safe on breadboard wires.
const SPI_HZ: u32 = 16_000_000;

/// The W25N01GV's bus: SPI0 with chip select on GP17.
type Bus = ExclusiveDevice<Spi<'static, SPI0, Blocking>, Output<'static>, NoDelay>;

#[entry]
fn main() -> ! {
    // The volume (about 50 KB): built by the compiler, never on the stack.
    static mut VOLUME: W25n01gvVolume<Bus, Delay> = board_app::w25n01gv_volume();

    let p = embassy_rp::init(Default::default());
    let mut config = spi::Config::default();
    config.frequency = SPI_HZ;
    // SPI mode 0 (the default), which the W25N01GV supports along with mode 3.
    let spi = Spi::new_blocking(p.SPI0, p.PIN_18, p.PIN_19, p.PIN_16, config);
    let cs = Output::new(p.PIN_17, Level::High);
    let bus = match ExclusiveDevice::new_no_delay(spi, cs) {
        Ok(bus) => bus,
        Err(e) => match e {},
    };

    info!("stagefs demo on RP2040, W25N01GV on SPI0");
    match board_app::run(VOLUME, bus, Delay, &BOARD_DEMO, |event| info!("{}", event)) {
        Ok(summary) => info!("done: {}", summary),
        // The bus error (embedded-hal-bus) has no defmt 1 format: printed through Display.
        Err(e) => error!("demo failed: {}", defmt::Display2Format(&e)),
    }
    loop {
        cortex_m::asm::wfi();
    }
}
