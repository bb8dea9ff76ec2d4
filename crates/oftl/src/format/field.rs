//! Field access for the on-flash views: each structure names its fields as byte ranges
//! (its `field` module), and both its encoder and its parser read and write them here,
//! little-endian, so a layout is stated once.
//!
//! [`crc_matches`] is the one place a stored CRC is compared. In a `cfg(fuzzing)` build
//! an image fuzzer can make it agree with anything ([`crate::fuzzing::skip_crc_checks`]),
//! so it reaches the checks behind the CRCs (every parser must still refuse what it
//! cannot use, and never panic). The operation fuzzers leave the CRCs on: with them off,
//! a torn or flipped sector passes as good and reads back as corrupt data, which is the
//! very thing those fuzzers look for.

use core::ops::Range;

/// The bytes of `f` in `b` as an array of `N` (the range's length).
fn bytes<const N: usize>(b: &[u8], f: Range<usize>) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[f]);
    a
}

/// A `u16` field.
pub(crate) fn get_u16(b: &[u8], f: Range<usize>) -> u16 {
    u16::from_le_bytes(bytes(b, f))
}

/// A 24-bit field (3 bytes).
pub(crate) fn get_u24(b: &[u8], f: Range<usize>) -> u32 {
    let [x, y, z] = bytes(b, f);
    u32::from_le_bytes([x, y, z, 0])
}

/// A `u32` field.
pub(crate) fn get_u32(b: &[u8], f: Range<usize>) -> u32 {
    u32::from_le_bytes(bytes(b, f))
}

/// A `u64` field.
pub(crate) fn get_u64(b: &[u8], f: Range<usize>) -> u64 {
    u64::from_le_bytes(bytes(b, f))
}

/// Writes a `u16` field.
pub(crate) fn put_u16(b: &mut [u8], f: Range<usize>, v: u16) {
    b[f].copy_from_slice(&v.to_le_bytes());
}

/// Writes a 24-bit field (the low 3 bytes of `v`).
pub(crate) fn put_u24(b: &mut [u8], f: Range<usize>, v: u32) {
    b[f].copy_from_slice(&v.to_le_bytes()[..3]);
}

/// Writes a `u32` field.
pub(crate) fn put_u32(b: &mut [u8], f: Range<usize>, v: u32) {
    b[f].copy_from_slice(&v.to_le_bytes());
}

/// Writes a `u64` field.
pub(crate) fn put_u64(b: &mut [u8], f: Range<usize>, v: u64) {
    b[f].copy_from_slice(&v.to_le_bytes());
}

/// Whether a stored CRC matches the computed one (always, when an image fuzzer asked:
/// see the module docs).
pub(crate) fn crc_matches(stored: u32, computed: u32) -> bool {
    #[cfg(fuzzing)]
    if crate::fuzzing::crc_checks_skipped() {
        return true;
    }
    stored == computed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_little_endian() {
        let mut b = [0u8; 16];
        put_u16(&mut b, 0..2, 0x0102);
        put_u32(&mut b, 2..6, 0x0304_0506);
        put_u64(&mut b, 6..14, 0x0708_090A_0B0C_0D0E);
        assert_eq!(b[..3], [0x02, 0x01, 0x06]);
        assert_eq!(get_u16(&b, 0..2), 0x0102);
        assert_eq!(get_u32(&b, 2..6), 0x0304_0506);
        assert_eq!(get_u64(&b, 6..14), 0x0708_090A_0B0C_0D0E);
        put_u24(&mut b, 13..16, 0xAB_CDEF);
        assert_eq!(b[13..16], [0xEF, 0xCD, 0xAB]);
        assert_eq!(get_u24(&b, 13..16), 0xAB_CDEF);
    }
}
