//! Peak stack use, measured by paint.
//!
//! cortex-m-rt (feature `paint-stack`) fills everything between `_stack_end` (the end of
//! the statics) and `_stack_start` (the top of RAM, where the stack starts) with
//! [`STACK_PAINT_VALUE`] before `main` runs. The stack grows down from the top and
//! scrubs the paint, so the lowest word that is no longer paint marks the deepest point
//! the stack has reached.

#![allow(unsafe_code)]

use core::ptr;

use cortex_m_rt::STACK_PAINT_VALUE;

extern "C" {
    static _stack_end: u32;
    static _stack_start: u32;
}

/// Stack use so far.
pub struct StackUse {
    /// Deepest stack reached, in bytes from the top.
    pub used: usize,
    /// Room between the statics and the top of RAM.
    pub available: usize,
}

/// Paints the free stack below the caller again, so that [`peak_use`] then reports the
/// deepest point reached since this call (a phase's own peak).
#[inline(never)]
pub fn repaint() {
    let bottom = ptr::addr_of!(_stack_end) as usize;
    // Leave a margin below this frame's stack pointer.
    let sp = cortex_m::register::msp::read() as usize - 64;
    let mut low = bottom;
    while low < sp {
        // SAFETY: `low` lies in [_stack_end, sp - 64): RAM between the statics and the
        // live stack, 4-byte aligned (as in `peak_use`), which no Rust object occupies
        // (no interrupt handler runs in this firmware), and this loop makes no calls.
        unsafe { ptr::write_volatile(low as *mut u32, STACK_PAINT_VALUE) };
        low += 4;
    }
}

/// Stack in use at the caller (bytes from the top to its frame): what the firmware's own
/// frames take before it calls into the store, subtracted from a phase's peak to give
/// the store's own stack.
#[inline(never)]
pub fn depth() -> usize {
    let top = ptr::addr_of!(_stack_start) as usize;
    top - cortex_m::register::msp::read() as usize
}

/// The deepest stack use since reset (or since the last [`repaint`]).
pub fn peak_use() -> StackUse {
    let bottom = ptr::addr_of!(_stack_end) as usize;
    let top = ptr::addr_of!(_stack_start) as usize;
    let sp = cortex_m::register::msp::read() as usize;
    let mut low = bottom;
    while low < sp {
        // SAFETY: `low` lies in [_stack_end, sp): RAM between the statics and the live
        // stack, 4-byte aligned (cortex-m-rt's linker script asserts `_stack_end % 4 == 0`).
        // No Rust object lives there, so a volatile read of it aliases nothing.
        let word = unsafe { ptr::read_volatile(low as *const u32) };
        if word != STACK_PAINT_VALUE {
            break;
        }
        low += 4;
    }
    StackUse {
        used: top - low,
        available: top - bottom,
    }
}
