//! Object index pages: a two-level tree per object.
//!
//! The root page maps leaf numbers to leaf index pages; a leaf maps logical pages to
//! data pages. Both are flat arrays of u32 LE device page numbers, `0xFFFFFFFF` = not
//! mapped (a hole, read as zeros). With `E = payload / 4` entries per page an object
//! holds up to `E * E` pages (512 MiB on 2 KiB pages).
//!
//! ```text
//! offset 4*i: entry i (u32 LE)   for i in 0..E
//! ```
//! Index pages carry a backpointer of kind `Index`, `owner` = object id and
//! `lpn` = leaf number, or [`ROOT_LPN`] for the root.

use nand_hal::PageAddr;

use crate::errors::Corrupted;

/// Unmapped entry (stored as `0xFFFFFFFF`).
pub const UNMAPPED: PageAddr = PageAddr(u32::MAX);
/// Backpointer `lpn` of a root index page.
pub const ROOT_LPN: u32 = super::backpointer::MAX_U24;

/// Where entry `i` lives.
fn at(i: usize) -> core::ops::Range<usize> {
    i * 4..i * 4 + 4
}

/// Reads entry `i`.
pub fn entry(page: &[u8], i: usize) -> PageAddr {
    PageAddr(super::field::get_u32(page, at(i)))
}

/// Writes entry `i`.
pub fn set_entry(page: &mut [u8], i: usize, v: PageAddr) {
    super::field::put_u32(page, at(i), v.0)
}

/// Checks that every entry of an index page read from flash is unmapped or a page of
/// the device.
pub fn validate(page: &[u8], entries: usize, device_pages: u32) -> Result<(), Corrupted> {
    if page.len() < entries * 4 {
        return Err(Corrupted);
    }
    for i in 0..entries {
        let e = entry(page, i);
        if e != UNMAPPED && e.0 >= device_pages {
            return Err(Corrupted);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_validate() {
        let mut p = [0xFFu8; 64];
        set_entry(&mut p, 3, PageAddr(77));
        assert_eq!(entry(&p, 3), PageAddr(77));
        assert_eq!(entry(&p, 2), UNMAPPED);
        assert_eq!(validate(&p, 16, 100), Ok(()));
        assert_eq!(validate(&p, 16, 50), Err(Corrupted));
        assert_eq!(validate(&p, 17, 100), Err(Corrupted));
    }
}
