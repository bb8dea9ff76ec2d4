//! Arithmetic in GF(2^13), table driven.
//!
//! Elements are `u16` bit vectors (polynomials over GF(2) modulo the primitive
//! polynomial `x^13 + x^4 + x^3 + x + 1`, the one Linux `lib/bch.c` uses for m = 13).
//! Multiplication and inversion go through log/antilog tables built at compile time
//! (16 KiB each, in flash).

/// Field degree.
pub const M: u32 = 13;
/// Multiplicative group order, `2^13 - 1`: also the BCH code's full length in bits.
pub const N: u32 = (1 << M) - 1;
/// The primitive polynomial, bit `i` = coefficient of `x^i`.
pub const PRIMITIVE: u32 = (1 << 13) | (1 << 4) | (1 << 3) | (1 << 1) | 1;

/// `EXP[i] = alpha^i` for `i` in `0..N` (`EXP[N]` repeats `EXP[0]`).
pub static EXP: [u16; N as usize + 1] = build_exp();
/// `LOG[x]` for `x` != 0 (`LOG[0]` is unused).
pub static LOG: [u16; N as usize + 1] = build_log();

const fn build_exp() -> [u16; N as usize + 1] {
    let mut t = [0u16; N as usize + 1];
    let mut x: u32 = 1;
    let mut i = 0;
    while i <= N as usize {
        t[i] = x as u16;
        x <<= 1;
        if x & (1 << M) != 0 {
            x ^= PRIMITIVE;
        }
        i += 1;
    }
    t
}

const fn build_log() -> [u16; N as usize + 1] {
    let exp = build_exp();
    let mut t = [0u16; N as usize + 1];
    let mut i = 0;
    while i < N as usize {
        t[exp[i] as usize] = i as u16;
        i += 1;
    }
    t
}

/// `i mod N` for `i < 2N`.
#[inline]
pub fn reduce(i: u32) -> u32 {
    if i >= N {
        i - N
    } else {
        i
    }
}

/// `a * b`.
#[inline]
pub fn mul(a: u16, b: u16) -> u16 {
    if a == 0 || b == 0 {
        return 0;
    }
    EXP[reduce(LOG[a as usize] as u32 + LOG[b as usize] as u32) as usize]
}

/// `a / b`, `b` != 0.
#[inline]
pub fn div(a: u16, b: u16) -> u16 {
    if a == 0 {
        return 0;
    }
    EXP[reduce(LOG[a as usize] as u32 + N - LOG[b as usize] as u32) as usize]
}

/// `alpha^e` for any `e`.
#[inline]
pub fn pow_alpha(e: u64) -> u16 {
    EXP[(e % N as u64) as usize]
}

/// `a^2`.
#[inline]
pub fn square(a: u16) -> u16 {
    mul(a, a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpha_is_primitive() {
        // Every non-zero element appears exactly once in 0..N.
        let mut seen = [false; N as usize + 1];
        for &x in &EXP[..N as usize] {
            assert!(x != 0 && !seen[x as usize]);
            seen[x as usize] = true;
        }
        assert_eq!(EXP[N as usize], 1);
    }

    #[test]
    fn field_laws() {
        for &(a, b) in &[(1u16, 1u16), (2, 3), (0x1ABC, 0x0123), (0x1FFF, 0x1FFF)] {
            assert_eq!(mul(a, b), mul(b, a));
            assert_eq!(div(mul(a, b), b), a);
            assert_eq!(mul(a, div(1, a)), 1);
        }
        assert_eq!(mul(0, 5), 0);
        assert_eq!(square(pow_alpha(5)), pow_alpha(10));
    }
}
