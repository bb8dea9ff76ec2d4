//! The `NandFlash` contract as a test suite, written once, runnable against any
//! implementation (simulator, SPI driver over a chip model, real hardware), `no_std`.
//!
//! The suite is destructive on the blocks it uses: it erases one good block near the end
//! of the device (and, if asked, marks a second one bad). Call [`run`] with a scratch
//! buffer of at least `2 * (page_size + oob_size)` bytes.

use core::fmt;

use crate::blocking::NandFlash;
use crate::capabilities::{Capabilities, EccKind};
use crate::error::{Error, ErrorKind};
use crate::geometry::{BlockAddr, PageAddr};

/// What to exercise beyond the core contract.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Config {
    /// The implementation detects rule violations (out-of-order programs, NOP overrun,
    /// ECC step rewrite, unaligned programs) and reports them as `Misuse`. Simulators do;
    /// real chips cannot.
    pub rule_checks: bool,
    /// Also mark a block bad and check that it reads as bad (permanent on real parts).
    pub mark_bad: bool,
}

/// What the run covered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Report {
    /// Checks that passed.
    pub checks: u32,
    /// The block the suite erased and programmed.
    pub block: BlockAddr,
    /// The block it marked bad, if asked.
    pub marked_bad: Option<BlockAddr>,
}

/// A failed conformance check.
#[derive(Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Failure<E> {
    /// An operation that must succeed failed.
    Flash {
        /// The check.
        check: &'static str,
        /// The error.
        error: E,
    },
    /// An operation returned the wrong result.
    Check {
        /// The check.
        check: &'static str,
        /// What was wrong.
        detail: &'static str,
    },
    /// An operation that must fail with `expected` did something else.
    WrongError {
        /// The check.
        check: &'static str,
        /// The kind the contract requires.
        expected: ErrorKind,
        /// The kind returned, `None` for success.
        got: Option<ErrorKind>,
    },
    /// The scratch buffer is smaller than `2 * (page_size + oob_size)`.
    BufferTooSmall,
    /// Not enough good blocks to run.
    NoGoodBlock,
}

impl<E: fmt::Debug> fmt::Display for Failure<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Flash { check, error } => write!(f, "{check}: unexpected error {error:?}"),
            Failure::Check { check, detail } => write!(f, "{check}: {detail}"),
            Failure::WrongError {
                check,
                expected,
                got,
            } => {
                write!(f, "{check}: expected {expected:?}, got {got:?}")
            }
            Failure::BufferTooSmall => f.write_str("scratch buffer too small"),
            Failure::NoGoodBlock => f.write_str("no good block to test on"),
        }
    }
}

/// Deterministic test pattern.
fn pattern_bytes(seed: u32) -> impl Iterator<Item = u8> {
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(0x9E37_79B9) | 1;
    core::iter::repeat_with(move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        (x >> 8) as u8
    })
}

fn pattern(seed: u32, out: &mut [u8]) {
    for (b, v) in out.iter_mut().zip(pattern_bytes(seed)) {
        *b = v;
    }
}

type R<T, E> = Result<T, Failure<E>>;

fn ok<T, E>(check: &'static str, r: Result<T, E>) -> R<T, E> {
    r.map_err(|error| Failure::Flash { check, error })
}

struct Tally(u32);

impl Tally {
    fn expect<E>(&mut self, check: &'static str, cond: bool, detail: &'static str) -> R<(), E> {
        if cond {
            self.0 += 1;
            Ok(())
        } else {
            Err(Failure::Check { check, detail })
        }
    }

    fn expect_err<T, E: Error>(
        &mut self,
        check: &'static str,
        r: Result<T, E>,
        expected: ErrorKind,
    ) -> R<(), E> {
        match r {
            Err(e) if e.kind() == expected => {
                self.0 += 1;
                Ok(())
            }
            Err(e) => Err(Failure::WrongError {
                check,
                expected,
                got: Some(e.kind()),
            }),
            Ok(_) => Err(Failure::WrongError {
                check,
                expected,
                got: None,
            }),
        }
    }
}

/// Fills `oob` with 0xFF and the free bytes (of ECC step `step` only, if given) with a
/// pattern.
fn oob_pattern(caps: &Capabilities, seed: u32, oob: &mut [u8], step: Option<u32>) {
    oob.fill(0xFF);
    for (i, r) in caps.oob.regions().iter().enumerate() {
        if step.is_some_and(|s| r.ecc_step != Some(s as u8)) {
            continue;
        }
        pattern(
            seed + 1000 + i as u32,
            &mut oob[r.offset as usize..r.end() as usize],
        );
    }
}

fn free_bytes_equal(caps: &Capabilities, a: &[u8], b: &[u8]) -> bool {
    caps.oob.regions().iter().all(|r| {
        let range = r.offset as usize..r.end() as usize;
        a[range.clone()] == b[range]
    })
}

/// Runs the conformance suite against `flash`.
pub fn run<F: NandFlash>(flash: &mut F, cfg: &Config, scratch: &mut [u8]) -> R<Report, F::Error> {
    let g = flash.geometry();
    let caps = *flash.capabilities();
    let ps = g.page_size() as usize;
    let os = g.oob_size() as usize;
    let pu = caps.program_unit as usize;
    if scratch.len() < 2 * (ps + os) {
        return Err(Failure::BufferTooSmall);
    }
    let (a, b) = scratch.split_at_mut(ps + os);
    let (a_data, a_oob) = a.split_at_mut(ps);
    let (b_data, b_oob) = b[..ps + os].split_at_mut(ps);
    let mut t = Tally(0);
    t.expect(
        "capabilities",
        caps.validate(&g).is_ok(),
        "capabilities do not fit geometry",
    )?;

    // Pick good blocks from the end of the device.
    let mut good = [BlockAddr(0); 2];
    let mut found = 0;
    let want = if cfg.mark_bad { 2 } else { 1 };
    let mut blk = g.blocks();
    while found < want && blk > 1 {
        blk -= 1;
        if !ok("is_bad", flash.is_bad(BlockAddr(blk)))? {
            good[found] = BlockAddr(blk);
            found += 1;
        }
    }
    if found < want {
        return Err(Failure::NoGoodBlock);
    }
    let unmarked = !ok("is_marked", flash.is_marked(good[0]))?;
    t.expect(
        "is_marked of a good block",
        unmarked,
        "good block reads as marked",
    )?;
    let blk = good[0];
    let page = |i: u32| g.page(blk, i);

    // Erase: every byte reads 0xFF.
    ok("erase", flash.erase(blk))?;
    for i in 0..g.pages_per_block() {
        ok("read erased", flash.read_page(page(i), a_data, a_oob))?;
        let erased = a_data.iter().chain(a_oob.iter()).all(|&x| x == 0xFF);
        t.expect("read erased", erased, "erased page not all 0xFF")?;
    }

    // Whole-page program and read-back, data and free spare bytes.
    pattern(1, a_data);
    oob_pattern(&caps, 1, a_oob, None);
    ok("program page", flash.program_page(page(0), a_data, a_oob))?;
    let report = ok("read page", flash.read_page(page(0), b_data, b_oob))?;
    t.expect(
        "read page",
        a_data == b_data,
        "data differs from what was programmed",
    )?;
    let free_ok = free_bytes_equal(&caps, a_oob, b_oob);
    t.expect(
        "read page",
        free_ok,
        "free spare bytes differ from what was programmed",
    )?;
    let threshold_ok = report.threshold == caps.ecc.scrub_threshold;
    t.expect(
        "read page",
        threshold_ok,
        "reported threshold differs from capabilities",
    )?;

    // Spare only, and a column range.
    let span = caps.oob.span();
    b_oob.fill(0);
    ok("read oob", flash.read_oob(page(0), &mut b_oob[..span]))?;
    let free_ok = free_bytes_equal(&caps, &a_oob[..span], &b_oob[..span]);
    t.expect("read oob", free_ok, "spare-only read differs")?;
    let len = (ps - pu).min(100);
    ok(
        "read column",
        flash.read(page(0), pu as u32, &mut b_data[..len], &mut []),
    )?;
    t.expect(
        "read column",
        b_data[..len] == a_data[pu..pu + len],
        "column read differs",
    )?;

    // Partial programs, one program unit (and its protected spare bytes) at a time.
    let steps = caps.steps_per_page(&g);
    let partials = steps.min(caps.nop as u32);
    for s in 0..partials {
        pattern(100 + s, &mut a_data[..pu]);
        oob_pattern(&caps, 200 + s, a_oob, Some(s));
        ok(
            "partial program",
            flash.program(page(1), s * pu as u32, &a_data[..pu], a_oob),
        )?;
    }
    ok("read partial", flash.read_page(page(1), b_data, b_oob))?;
    let mut all_ok = true;
    for s in 0..steps {
        let chunk = &b_data[s as usize * pu..(s as usize + 1) * pu];
        if s < partials {
            all_ok &= chunk.iter().copied().eq(pattern_bytes(100 + s).take(pu));
            oob_pattern(&caps, 200 + s, a_oob, Some(s));
            for r in caps.protected_regions_of_step(s) {
                let range = r.offset as usize..r.end() as usize;
                all_ok &= a_oob[range.clone()] == b_oob[range];
            }
        } else {
            all_ok &= chunk.iter().all(|&x| x == 0xFF);
        }
    }
    t.expect("read partial", all_ok, "partially programmed page differs")?;

    // The step-aware read agrees with `read` on a healthy page: the same bytes, every
    // step decoded.
    b_data.fill(0);
    let steps_report = ok("read steps", flash.read_steps(page(1), b_data, b_oob))?;
    let mut same = steps_report.steps().len() == steps as usize && steps_report.all_good();
    for s in 0..steps {
        let chunk = &b_data[s as usize * pu..(s as usize + 1) * pu];
        same &= if s < partials {
            chunk.iter().copied().eq(pattern_bytes(100 + s).take(pu))
        } else {
            chunk.iter().all(|&x| x == 0xFF)
        };
    }
    t.expect(
        "read steps",
        same,
        "step-aware read differs from the page or reports a failed step",
    )?;
    let whole = ok("read steps", flash.read_steps(page(0), b_data, b_oob))?;
    t.expect(
        "read steps",
        whole.as_read_report().map(|r| r.threshold) == Some(caps.ecc.scrub_threshold)
            && b_data.iter().copied().eq(pattern_bytes(1).take(ps)),
        "step-aware read of a whole page differs",
    )?;
    let r = flash.read_steps(PageAddr(g.pages()), b_data, b_oob);
    t.expect_err("read steps out of bounds", r, ErrorKind::OutOfBounds)?;

    // Skipping a page is allowed.
    pattern(3, a_data);
    a_oob.fill(0xFF);
    ok("skip page", flash.program_page(page(3), a_data, a_oob))?;

    // Bounds and alignment.
    let r = flash.read_page(PageAddr(g.pages()), b_data, b_oob);
    t.expect_err("read out of bounds", r, ErrorKind::OutOfBounds)?;
    let r = flash.read(page(0), 1, b_data, &mut []);
    t.expect_err("read past page end", r, ErrorKind::OutOfBounds)?;
    let r = flash.read(page(0), 0, &mut [], &mut b_data[..os + 1]);
    t.expect_err("read past spare end", r, ErrorKind::OutOfBounds)?;
    let r = flash.erase(BlockAddr(g.blocks()));
    t.expect_err("erase out of bounds", r, ErrorKind::OutOfBounds)?;
    let r = flash.is_bad(BlockAddr(g.blocks()));
    t.expect_err("is_bad out of bounds", r, ErrorKind::OutOfBounds)?;
    let r = flash.program(page(4), 1, &a_data[..pu], &[]);
    t.expect_err("unaligned program", r, ErrorKind::Misuse)?;
    let r = flash.program(page(4), 0, &a_data[..pu - 1], &[]);
    t.expect_err("short program", r, ErrorKind::Misuse)?;

    if cfg.rule_checks {
        let r = flash.program_page(page(2), a_data, &[]);
        t.expect_err("out-of-order program", r, ErrorKind::Misuse)?;
        if caps.ecc.kind != EccKind::None {
            let r = flash.program(page(1), 0, &a_data[..pu], &[]);
            t.expect_err("ECC step rewrite", r, ErrorKind::Misuse)?;
        }
        // Use up NOP on page 5 one program unit at a time, then try once more.
        if caps.nop as u32 <= steps {
            for i in 0..caps.nop as usize {
                let unit = &a_data[i * pu..(i + 1) * pu];
                ok(
                    "NOP budget",
                    flash.program(page(5), (i * pu) as u32, unit, &[]),
                )?;
            }
            let last = steps as usize - 1;
            let r = flash.program(page(5), (last * pu) as u32, &a_data[..pu], &[]);
            t.expect_err("NOP exceeded", r, ErrorKind::Misuse)?;
        }
    }

    // Erase again: the block is clean.
    ok("erase again", flash.erase(blk))?;
    ok("read after erase", flash.read_page(page(0), b_data, b_oob))?;
    let clean = b_data.iter().chain(b_oob.iter()).all(|&x| x == 0xFF);
    t.expect("read after erase", clean, "page not erased")?;

    let mut marked = None;
    if cfg.mark_bad {
        let victim = good[1];
        ok("mark bad", flash.mark_bad(victim))?;
        let bad = ok("is_bad after mark", flash.is_bad(victim))?;
        t.expect(
            "is_bad after mark",
            bad,
            "marked block does not read as bad",
        )?;
        let written = ok("is_marked after mark", flash.is_marked(victim))?;
        t.expect(
            "is_marked after mark",
            written,
            "marked block does not read as marked",
        )?;
        marked = Some(victim);
    }
    Ok(Report {
        checks: t.0,
        block: blk,
        marked_bad: marked,
    })
}
