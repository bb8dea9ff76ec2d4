//! A binary BCH code over GF(2^13), shortened to the message length in use, correcting
//! up to `t <= 8` bit errors.
//!
//! - Generator: `g(x) = lcm(m_1, m_3, ..., m_{2t-1})`, the minimal polynomials of
//!   `alpha^i`, built at compile time; every coset here has 13 elements, so
//!   `deg g = 13 t` (52 bits = 7 bytes for t = 4, 104 bits = 13 bytes for t = 8).
//! - Encoder: systematic, remainder of `m(x) x^deg` modulo `g`, one table lookup per
//!   message byte (256 entries of `u128`, 4 KiB).
//! - Decoder: the remainder of the received message is compared with the received
//!   parity; a mismatch gives the syndromes `S_1..S_2t` of the error, Berlekamp-Massey
//!   gives the error locator, a Chien search over the shortened length finds its roots.
//!   A locator whose degree is above `t`, or with fewer roots inside the codeword than
//!   its degree, is reported uncorrectable.
//!
//! # Bit order
//!
//! The codeword is the message bytes (most significant bit first) followed by the
//! parity bits, packed most significant bit first; the pad bits that complete the last
//! parity byte are written as 1 and ignored on decode.
//!
//! # What the code guarantees
//!
//! Any pattern of at most `t` bit errors in message or parity is corrected. More than
//! `t` errors are usually detected, but a pattern of `t + 1` or more errors can be
//! *miscorrected* into a different codeword (the minimum distance is `2t + 1`); the
//! [`super::sector`] layer adds a CRC to catch those.

use super::gf::{self, EXP, LOG, N};

/// Largest correction capability supported.
pub const MAX_T: usize = 8;

/// A BCH code with correction capability `t`.
#[derive(Clone, Debug)]
pub struct Bch {
    t: u8,
    deg: u32,
    /// Generator polynomial, bit `i` = coefficient of `x^i`.
    gen: u128,
    /// `table[v]` = remainder of `v(x) x^deg` modulo `g`.
    table: [u128; 256],
}

/// Error locations found by [`Bch::locate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Corrections {
    /// Errors found (message and parity).
    pub count: u8,
    /// Message bit indices to flip (bit 0 = most significant bit of message byte 0).
    pub message_bits: [u32; MAX_T],
    /// How many of `message_bits` are valid.
    pub in_message: u8,
}

/// The received word is not within `t` errors of any codeword.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Uncorrectable;

const EXP_C: [u16; N as usize + 1] = {
    let mut t = [0u16; N as usize + 1];
    let mut x: u32 = 1;
    let mut i = 0;
    while i <= N as usize {
        t[i] = x as u16;
        x <<= 1;
        if x & (1 << gf::M) != 0 {
            x ^= gf::PRIMITIVE;
        }
        i += 1;
    }
    t
};

/// Field product by shift-and-add (compile time only; run time uses the tables).
const fn mul_c(a: u16, b: u16) -> u16 {
    let mut r: u32 = 0;
    let mut x = a as u32;
    let mut i = 0;
    while i < gf::M {
        if b & (1 << i) != 0 {
            r ^= x;
        }
        x <<= 1;
        if x & (1 << gf::M) != 0 {
            x ^= gf::PRIMITIVE;
        }
        i += 1;
    }
    r as u16
}

/// Carry-less product of two GF(2) polynomials.
const fn clmul(a: u128, b: u128) -> u128 {
    let mut r = 0u128;
    let mut i = 0;
    while i < 128 {
        if b & (1 << i) != 0 {
            r ^= a << i;
        }
        i += 1;
    }
    r
}

/// Minimal polynomial of `alpha^i` (binary coefficients), and whether `i` starts a
/// coset not seen before (`seen` is a bitset of exponents covered).
const fn minimal_poly(i: u32) -> u128 {
    // Coset of i: i, 2i, 4i, ... mod N.
    let mut coeffs = [0u16; 14];
    coeffs[0] = 1;
    let mut len = 1usize;
    let mut e = i % N;
    loop {
        // Multiply by (x + alpha^e).
        let root = EXP_C[e as usize];
        let mut j = len;
        while j > 0 {
            coeffs[j] = coeffs[j - 1] ^ mul_c(coeffs[j], root);
            j -= 1;
        }
        coeffs[0] = mul_c(coeffs[0], root);
        len += 1;
        e = (e * 2) % N;
        if e == i % N {
            break;
        }
    }
    let mut p = 0u128;
    let mut j = 0;
    while j < len {
        assert!(coeffs[j] <= 1, "minimal polynomial must be binary");
        if coeffs[j] == 1 {
            p |= 1 << j;
        }
        j += 1;
    }
    p
}

const fn degree(p: u128) -> u32 {
    127 - p.leading_zeros()
}

const fn in_coset(i: u32, of: u32) -> bool {
    let mut e = of % N;
    loop {
        if e == i % N {
            return true;
        }
        e = (e * 2) % N;
        if e == of % N {
            return false;
        }
    }
}

impl Bch {
    /// The code correcting `t` errors, `1 <= t <= 8`. Build it in a `static` so the
    /// tables are computed at compile time.
    pub const fn new(t: u8) -> Self {
        assert!(t >= 1 && t as usize <= MAX_T, "t must be in 1..=8");
        let mut gen: u128 = 1;
        let mut i = 1u32;
        while i < 2 * t as u32 {
            // Skip i if it is in the coset of an earlier odd j.
            let mut dup = false;
            let mut j = 1u32;
            while j < i {
                if in_coset(i, j) {
                    dup = true;
                }
                j += 2;
            }
            if !dup {
                gen = clmul(gen, minimal_poly(i));
            }
            i += 2;
        }
        let deg = degree(gen);
        let mask = if deg == 128 {
            u128::MAX
        } else {
            (1u128 << deg) - 1
        };
        let low = gen & mask;
        let mut table = [0u128; 256];
        let mut v = 0usize;
        while v < 256 {
            let mut r = 0u128;
            let mut b = 7i32;
            while b >= 0 {
                let bit = ((v >> b) & 1) as u128;
                let fb = ((r >> (deg - 1)) & 1) ^ bit;
                r = (r << 1) & mask;
                if fb != 0 {
                    r ^= low;
                }
                b -= 1;
            }
            table[v] = r;
            v += 1;
        }
        Bch { t, deg, gen, table }
    }

    /// Correction capability.
    pub const fn t(&self) -> u8 {
        self.t
    }

    /// Parity bits.
    pub const fn parity_bits(&self) -> u32 {
        self.deg
    }

    /// Parity bytes.
    pub const fn parity_bytes(&self) -> usize {
        self.deg.div_ceil(8) as usize
    }

    /// Longest message the shortened code takes, in bytes.
    pub const fn max_message_bytes(&self) -> usize {
        ((N - self.deg) / 8) as usize
    }

    /// The generator polynomial (bit `i` = coefficient of `x^i`).
    pub const fn generator(&self) -> u128 {
        self.gen
    }

    fn mask(&self) -> u128 {
        (1u128 << self.deg) - 1
    }

    /// Remainder of the message (the concatenation of `parts`) times `x^deg`.
    fn remainder<'a>(&self, parts: impl Iterator<Item = &'a [u8]>) -> u128 {
        let shift = self.deg - 8;
        let mask = self.mask();
        let mut r = 0u128;
        for part in parts {
            for &byte in part {
                let idx = ((r >> shift) as u8 ^ byte) as usize;
                r = ((r << 8) & mask) ^ self.table[idx];
            }
        }
        r
    }

    fn pack(&self, r: u128, out: &mut [u8]) {
        let n = self.parity_bytes();
        let pad = n as u32 * 8 - self.deg;
        // Left-align in n bytes, pad bits set.
        let v = (r << pad) | ((1u128 << pad) - 1);
        for (i, o) in out[..n].iter_mut().enumerate() {
            *o = (v >> (8 * (n - 1 - i))) as u8;
        }
    }

    fn unpack(&self, ecc: &[u8]) -> u128 {
        let n = self.parity_bytes();
        let pad = n as u32 * 8 - self.deg;
        let mut v = 0u128;
        for &b in &ecc[..n] {
            v = (v << 8) | b as u128;
        }
        v >> pad
    }

    /// Computes the parity of the message made of `parts` into `ecc`
    /// (`parity_bytes()` long).
    pub fn encode(&self, parts: &[&[u8]], ecc: &mut [u8]) {
        let r = self.remainder(parts.iter().copied());
        self.pack(r, ecc);
    }

    /// Finds the errors in the message `parts` (total `len` bytes) and parity `ecc`.
    /// Nothing is modified; apply the result with [`Bch::apply`].
    pub fn locate(&self, parts: &[&[u8]], ecc: &[u8]) -> Result<Corrections, Uncorrectable> {
        let msg_bytes: usize = parts.iter().map(|p| p.len()).sum();
        let mut out = Corrections {
            count: 0,
            message_bits: [0; MAX_T],
            in_message: 0,
        };
        let diff = self.remainder(parts.iter().copied()) ^ self.unpack(ecc);
        if diff == 0 {
            return Ok(out);
        }
        let t = self.t as usize;
        // Syndromes S_1..S_2t of diff(x).
        let mut syn = [0u16; 2 * MAX_T];
        for i in (1..=2 * t).step_by(2) {
            let mut s = 0u16;
            let mut bits = diff;
            while bits != 0 {
                let k = bits.trailing_zeros();
                bits &= bits - 1;
                s ^= EXP[((i as u64 * k as u64) % N as u64) as usize];
            }
            syn[i - 1] = s;
        }
        for i in (2..=2 * t).step_by(2) {
            syn[i - 1] = gf::square(syn[i / 2 - 1]);
        }
        let (lambda, l) = berlekamp_massey(&syn[..2 * t]);
        if l == 0 || l > t || lambda[l] == 0 || lambda[l + 1..].iter().any(|&c| c != 0) {
            return Err(Uncorrectable);
        }
        // Chien search over the shortened codeword: position p (power x^p) is an error
        // iff Lambda(alpha^-p) = 0.
        let n_bits = (msg_bytes as u32) * 8 + self.deg;
        let mut logs = [0u32; MAX_T + 1];
        let mut present = [false; MAX_T + 1];
        for j in 1..=l {
            if lambda[j] != 0 {
                logs[j] = LOG[lambda[j] as usize] as u32;
                present[j] = true;
            }
        }
        let mut found = 0usize;
        for p in 0..n_bits {
            let mut v = lambda[0];
            for j in 1..=l {
                if present[j] {
                    v ^= EXP[logs[j] as usize];
                    // Next position: multiply term j by alpha^-j.
                    logs[j] = gf::reduce(logs[j] + N - j as u32);
                }
            }
            if v == 0 {
                found += 1;
                if found > l {
                    return Err(Uncorrectable);
                }
                if p >= self.deg {
                    let bit = n_bits - 1 - p;
                    out.message_bits[out.in_message as usize] = bit;
                    out.in_message += 1;
                }
            }
        }
        if found != l {
            return Err(Uncorrectable);
        }
        out.count = l as u8;
        Ok(out)
    }

    /// Flips the message bits `c` located.
    pub fn apply(c: &Corrections, parts: &mut [&mut [u8]]) {
        for &bit in &c.message_bits[..c.in_message as usize] {
            let mut byte = (bit / 8) as usize;
            for part in parts.iter_mut() {
                if byte < part.len() {
                    part[byte] ^= 0x80 >> (bit % 8);
                    break;
                }
                byte -= part.len();
            }
        }
    }
}

/// Berlekamp-Massey over GF(2^13): the connection polynomial (lowest degree first) and
/// the linear complexity of `syn`.
fn berlekamp_massey(syn: &[u16]) -> ([u16; 2 * MAX_T + 1], usize) {
    let mut c = [0u16; 2 * MAX_T + 1];
    let mut b = [0u16; 2 * MAX_T + 1];
    c[0] = 1;
    b[0] = 1;
    let mut l = 0usize;
    let mut m = 1usize;
    let mut bd = 1u16;
    for n in 0..syn.len() {
        let mut d = syn[n];
        for i in 1..=l {
            d ^= gf::mul(c[i], syn[n - i]);
        }
        if d == 0 {
            m += 1;
            continue;
        }
        let coef = gf::div(d, bd);
        let prev = c;
        for i in 0..c.len() - m {
            c[i + m] ^= gf::mul(coef, b[i]);
        }
        if 2 * l <= n {
            l = n + 1 - l;
            b = prev;
            bd = d;
            m = 1;
        } else {
            m += 1;
        }
    }
    (c, l)
}

#[cfg(test)]
mod tests {
    use super::*;

    static BCH4: Bch = Bch::new(4);
    static BCH8: Bch = Bch::new(8);

    #[test]
    fn generator_degrees() {
        assert_eq!(BCH4.parity_bits(), 52);
        assert_eq!(BCH4.parity_bytes(), 7);
        assert_eq!(BCH8.parity_bits(), 104);
        assert_eq!(BCH8.parity_bytes(), 13);
        // g(alpha^i) = 0 for i = 1..2t.
        for i in 1..=16u64 {
            let mut v = 0u16;
            let g = BCH8.generator();
            for k in 0..=104u64 {
                if g & (1 << k) != 0 {
                    v ^= gf::pow_alpha(i * k);
                }
            }
            assert_eq!(v, 0, "alpha^{i} is a root");
        }
    }

    #[test]
    fn corrects_t_errors_anywhere() {
        let msg: [u8; 518] = core::array::from_fn(|i| (i * 31 + 7) as u8);
        for code in [&BCH4, &BCH8] {
            let mut ecc = [0u8; 13];
            code.encode(&[&msg], &mut ecc);
            assert_eq!(
                code.locate(&[&msg], &ecc),
                Ok(Corrections {
                    count: 0,
                    message_bits: [0; 8],
                    in_message: 0
                })
            );
            let mut bad = msg;
            let mut bad_ecc = ecc;
            let t = code.t() as u32;
            // Errors at both ends of the message and in the parity.
            bad[0] ^= 0x80;
            bad[517] ^= 0x01;
            bad_ecc[0] ^= 0x40;
            for k in 3..t {
                bad[100 + k as usize * 13] ^= 1 << k;
            }
            let c = code.locate(&[&bad[..300], &bad[300..]], &bad_ecc).unwrap();
            assert_eq!(c.count as u32, t);
            let (a, b) = bad.split_at_mut(300);
            Bch::apply(&c, &mut [a, b]);
            assert_eq!(bad, msg);
        }
    }
}
