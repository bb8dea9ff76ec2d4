//! The write heads: for each stream of pages (data, log, cold copies, index), the block
//! it programs, the next page there, and the sequence number it stamps next.
//!
//! Changed only through the events below. Invariants: a head without a block is at
//! page 0; a head's next page is the lowest page of its block it has not taken (pages
//! are taken in order, a failed program included); a sequence number only moves
//! forward (mod 2^32, as `seq_cmp` compares) except when a mount, a recovery or a
//! rebuild sets where the heads continue.

use nand_hal::BlockAddr;

use crate::format::checkpoint::{HeadRecord, HEADS, NONE};
use crate::mount::seq_cmp;

/// One head, as a value (a copy: [`Heads`] changes only through its events).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    /// The block it programs (`None`: none yet).
    pub block: Option<BlockAddr>,
    /// The next page it takes in that block.
    pub next_page: u32,
    /// The sequence number it stamps next.
    pub next_seq: u32,
}

impl Head {
    const NONE: Head = Head {
        block: None,
        next_page: 0,
        next_seq: 1,
    };

    /// As a checkpoint records it.
    pub fn record(&self) -> HeadRecord {
        HeadRecord {
            block: self.block.map_or(NONE, |b| b.0),
            next_page: self.next_page,
            next_seq: self.next_seq,
        }
    }
}

/// The write heads of a store.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Heads {
    h: [Head; HEADS],
}

impl Heads {
    /// No head has a block; every head stamps 1 next.
    pub const NONE: Heads = Heads {
        h: [Head::NONE; HEADS],
    };

    /// Head `h`.
    pub fn get(&self, h: usize) -> Head {
        self.h[h]
    }

    /// The number head `h` stamps next.
    pub fn next_seq(&self, h: usize) -> u32 {
        self.h[h].next_seq
    }

    /// Every head, in head order.
    pub fn all(&self) -> [Head; HEADS] {
        self.h
    }

    /// Back to [`Heads::NONE`] (format, mount).
    pub fn reset(&mut self) {
        *self = Self::NONE;
    }

    /// Head `h` continues where a checkpoint recorded it.
    pub fn loaded(&mut self, h: usize, rec: &HeadRecord) {
        self.h[h] = Head {
            block: (rec.block != NONE).then_some(BlockAddr(rec.block)),
            next_page: rec.next_page,
            next_seq: rec.next_seq,
        };
    }

    /// Head `h` starts on the erased block `b`.
    pub fn took_block(&mut self, h: usize, b: BlockAddr) {
        self.h[h].block = Some(b);
        self.h[h].next_page = 0;
    }

    /// Head `h` continues block `b` at page `next_page` (the pages before are another
    /// session's, programmed in order; the rest are erased).
    pub fn resumed_block(&mut self, h: usize, b: BlockAddr, next_page: u32) {
        self.h[h].block = Some(b);
        self.h[h].next_page = next_page;
    }

    /// Head `h` leaves its block (the rest of it is not programmed).
    pub fn left_block(&mut self, h: usize) {
        self.h[h].block = None;
        self.h[h].next_page = 0;
    }

    /// Head `h` takes its next page, whatever its program does; returns the page's
    /// index in the head's block.
    pub fn take_page(&mut self, h: usize) -> u32 {
        let p = self.h[h].next_page;
        self.h[h].next_page += 1;
        p
    }

    /// Head `h` programmed a page stamped `seq`: it stamps `seq + 1` next.
    pub fn stamped(&mut self, h: usize, seq: u32) {
        self.h[h].next_seq = seq.wrapping_add(1);
    }

    /// Head `h` stamps `next_seq` next (a recovery, a rebuild, or a log page whose
    /// sectors took several numbers).
    pub fn number_from(&mut self, h: usize, next_seq: u32) {
        self.h[h].next_seq = next_seq;
    }

    /// Head `h` stamps nothing below `seq` from now on.
    pub fn move_past(&mut self, h: usize, seq: u32) {
        if seq_cmp(seq, self.h[h].next_seq).is_gt() {
            self.h[h].next_seq = seq;
        }
    }

    /// Every head leaves its block and continues with the numbers in `next_seq`
    /// (recovery: they start over in blocks the checkpoint calls free).
    pub fn restart(&mut self, next_seq: &[u32; HEADS]) {
        for (h, &seq) in self.h.iter_mut().zip(next_seq.iter()) {
            *h = Head {
                block: None,
                next_page: 0,
                next_seq: seq,
            };
        }
    }

    /// A checkpoint settles the window: heads whose block is full leave it; returns
    /// each head's block from now on.
    pub fn leave_full_blocks(&mut self, pages_per_block: u32) -> [Option<BlockAddr>; HEADS] {
        let mut carried = [None; HEADS];
        for (h, c) in self.h.iter_mut().zip(carried.iter_mut()) {
            if h.block.is_some() && h.next_page >= pages_per_block {
                h.block = None;
                h.next_page = 0;
            }
            *c = h.block;
        }
        carried
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_and_numbers_move_through_events_only() {
        let mut hs = Heads::NONE;
        assert_eq!(hs.get(0).block, None);
        hs.took_block(0, BlockAddr(7));
        assert_eq!(hs.take_page(0), 0);
        assert_eq!(hs.take_page(0), 1);
        hs.stamped(0, 41);
        assert_eq!(hs.next_seq(0), 42);
        hs.move_past(0, 40);
        assert_eq!(hs.next_seq(0), 42, "never backwards");
        hs.move_past(0, 50);
        assert_eq!(hs.next_seq(0), 50);
        assert_eq!(hs.get(0).record().next_page, 2);
        hs.left_block(0);
        assert_eq!((hs.get(0).block, hs.get(0).next_page), (None, 0));
    }

    #[test]
    fn settling_drops_only_full_blocks() {
        let mut hs = Heads::NONE;
        hs.took_block(0, BlockAddr(3));
        hs.took_block(1, BlockAddr(4));
        for _ in 0..4 {
            hs.take_page(1);
        }
        hs.take_page(0);
        let carried = hs.leave_full_blocks(4);
        assert_eq!(carried[0], Some(BlockAddr(3)));
        assert_eq!(carried[1], None);
        assert_eq!(hs.get(1).next_page, 0);
    }

    #[test]
    fn restart_and_load() {
        let mut hs = Heads::NONE;
        hs.took_block(2, BlockAddr(9));
        hs.restart(&[5, 6, 7, 8]);
        assert_eq!(hs.get(2).block, None);
        assert_eq!(hs.next_seq(3), 8);
        let rec = HeadRecord {
            block: 11,
            next_page: 3,
            next_seq: 99,
        };
        hs.loaded(1, &rec);
        assert_eq!(hs.get(1).record(), rec);
    }
}
