//! SPI NAND command set and register map shared by the parts in the table (and the
//! chip model). Single-wire variants only: every command is `opcode, address bytes,
//! dummy bytes, data`, in one chip-select window.

/// Reset; aborts a running operation and clears the status bits.
pub const RESET: u8 = 0xFF;
/// Read ID: opcode, one address/dummy byte, then the ID bytes.
pub const READ_ID: u8 = 0x9F;
/// Get feature: opcode, register address, then the register value (repeated).
pub const GET_FEATURE: u8 = 0x0F;
/// Set feature: opcode, register address, value.
pub const SET_FEATURE: u8 = 0x1F;
/// Write enable: sets WEL, required before program execute and block erase.
pub const WRITE_ENABLE: u8 = 0x06;
/// Write disable: clears WEL.
pub const WRITE_DISABLE: u8 = 0x04;
/// Page data read: opcode, 24-bit row (page) address; array to cache register.
pub const PAGE_READ: u8 = 0x13;
/// Read from cache: opcode, 16-bit column, one dummy byte, then data.
pub const READ_CACHE: u8 = 0x03;
/// Fast read from cache (same framing as [`READ_CACHE`] in single-wire mode).
pub const READ_CACHE_FAST: u8 = 0x0B;
/// Program load: opcode, 16-bit column, data; the rest of the cache becomes `FFh`.
pub const PROGRAM_LOAD: u8 = 0x02;
/// Random program load: as [`PROGRAM_LOAD`] but the rest of the cache is kept.
pub const PROGRAM_LOAD_RANDOM: u8 = 0x84;
/// Program execute: opcode, 24-bit row address; cache register to array.
pub const PROGRAM_EXECUTE: u8 = 0x10;
/// Block erase: opcode, 24-bit row address of any page in the block.
pub const BLOCK_ERASE: u8 = 0xD8;
/// Winbond software die select: opcode, die index.
pub const DIE_SELECT: u8 = 0xC2;

/// Protection register (block protect bits).
pub const REG_PROTECTION: u8 = 0xA0;
/// Configuration register (ECC enable, Winbond BUF).
pub const REG_CONFIG: u8 = 0xB0;
/// Status register.
pub const REG_STATUS: u8 = 0xC0;

/// Status: operation in progress (busy).
pub const STATUS_OIP: u8 = 1 << 0;
/// Status: write enable latch.
pub const STATUS_WEL: u8 = 1 << 1;
/// Status: the last erase failed.
pub const STATUS_E_FAIL: u8 = 1 << 2;
/// Status: the last program failed.
pub const STATUS_P_FAIL: u8 = 1 << 3;

/// The three address bytes of a row (page) address, most significant first.
pub const fn row_bytes(row: u32) -> [u8; 3] {
    [(row >> 16) as u8, (row >> 8) as u8, row as u8]
}
