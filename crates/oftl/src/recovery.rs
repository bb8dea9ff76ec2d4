//! Crash recovery: rebuild the state after an unclean shutdown from the last checkpoint
//! plus a scan of the updating window only, in five steps (one function each):
//!
//! 1. **Scan** ([`Oftl::scan_window`], spare-area reads): walk the heads' carried
//!    blocks from their recorded positions, then the window's blocks in allocation
//!    order. A data- or log-head page belongs to the replay when its backpointer is
//!    valid and its sequence number is the head's next expected one; a repeat of the
//!    previous number is a failed program's retry and replaces it. The last commit
//!    page seen bounds the replay; pages after it belong to the transaction cut short
//!    and are dropped. The commit page itself (the only page a cut can have torn) is
//!    read once, fully, and kept in RAM: unstable bits may read well now and fail
//!    later. Pages with the relocated flag are **cold copies** (see below).
//! 2. **Fresh window** ([`Oftl::open_recovery_window`]): recovery writes (relocations,
//!    and index write-backs on the index head) go only to blocks the checkpoint calls
//!    free, never to the old window; the old window is only read. (Index and
//!    object-table pages written after the checkpoint are a cache: never replayed.)
//! 3. **Replay** ([`Oftl::replay_window`]) the accepted data-head pages up to the last
//!    commit in sequence order (a salvage or repair with the cold copies merged in; a
//!    normal recovery drops them, see below), then the log sectors:
//!    metadata pages create, resize or delete objects; data pages remap and extend
//!    sizes. A page is applied only once the next accepted page shows it was not
//!    retried (the retry of a failed program supersedes the failed copy, whatever the
//!    failed copy reads like).
//! 4. **Relocate** ([`Oftl::relocate_suspects`]) the valid pages of the blocks that
//!    were being programmed (the data head's suspect page and the log's last page from
//!    RAM; the cold head's block back to the cold head), so they are erase-cycled
//!    before reuse. The log head's block, when the pool has room to spare, is left to
//!    background collection instead, which takes it first; so are the cold head's
//!    where the copies are dropped, and the data head's when nothing follows its last
//!    commit there (see `Oftl::cut_block_may_wait`). On a worn part (too few good
//!    blocks, or a window that runs out because erases fail) the blocks are left to
//!    collection too, their pages valid where they are (programmed whole before the
//!    cut), and the store mounts read-only after step 5.
//! 5. **Checkpoint** to another checkpoint block (erased first).
//!
//! Nothing the old checkpoint references is erased or programmed before step 5's
//! commit page lands, so a cut anywhere in recovery leaves the device as it was and
//! the next mount simply recovers again (recovery is deterministic: it redoes the same
//! writes to the same blocks, so what an interrupted attempt wrote is rewritten).
//!
//! # Read errors never truncate history
//!
//! Every read is retried ([`crate::io::READ_RETRIES`]) before it counts. A page that
//! stays unreadable can only be a torn tail (the program the cut interrupted, after
//! which nothing was written) or media loss. A run of transient read errors longer
//! than the retries can pass for either: the pages taken for torn tails are read again
//! after the scan and after the replay, and one that reads then sends the mount back
//! to the start (at most `MOUNT_ATTEMPTS` times) before anything is written. The last
//! few unreadable pages of the walk are the ones read again (a run that hid a head's
//! pages hid everything after them), and one that reads erased now counts as read.
//! More unreadable pages at the end of a head's block than a cut leaves there (the
//! writer leaves a block after `FAILS_PER_BLOCK` failed programs in a row) are media
//! loss, not a torn tail (see `TailRun`).
//! The sequence numbers tell which: within a
//! head they are consecutive, so a **gap** followed by a later page proves a page was
//! lost. Recovery then fails with [`crate::MountError::MediaLoss`] naming the
//! unreadable page (never replaying up to it and passing that older state off as
//! current); the mount starts over first, up to `MOUNT_ATTEMPTS` times, in case the
//! page only failed a run of reads. [`Oftl::mount_damaged`] with [`crate::Damaged::Salvage`] (read-only) or
//! [`crate::Damaged::Repair`] (which checkpoints the result) replay each head up
//! to its first loss instead and stop there, as a journal replay stops at its first
//! bad record: transactions after a lost page may build on what it held, so applying
//! them could make states that never existed. The heads are ordered only within
//! themselves (a log append carries no data-head number), and a transaction in one may
//! build on the other's (a trim after appends; a file's home page after its staged
//! record), so a loss in one head while the other also moved since the checkpoint stops
//! both at the checkpoint, the one cut both agree on. A metadata page whose record does not
//! read (unless a retry follows it) is such a loss too; salvage reads them all in the
//! first pass. What was left out is named in a [`SalvageReport`]. A torn multi-sector log
//! append leaves a gap inside its own page: that is a tail, unless a later log page
//! follows. Pass 2 must see what pass 1 saw: if a page pass 1 accepted no longer reads
//! (or the replay ends before pass 1's bound), that is media loss too.
//!
//! # Cold copies
//!
//! GC copies a page (data or metadata) to the cold head stamped with a *watermark*
//! `w`: the data head's next sequence number at the time. GC never runs inside a
//! transaction (see the `gc` module), so when the copy was made every data-head page
//! numbered below `w` had been programmed and applied, and none numbered `w` or above.
//! Replay reproduces that order: a cold copy is applied after every replayed data-head
//! page numbered below `w` and before the first numbered `w` or above; copies among
//! themselves in walk order, which is their program order (the cold head fills its
//! carried block, then takes window blocks in allocation order). The replayed state
//! is therefore the state the store went through, step by step: a later overwrite,
//! truncate or delete in the data head supersedes the copy, an earlier one was
//! already reflected in it (the copied page was valid after it).
//!
//! Dropping a copy is always safe: the page it copied lives in a collected block,
//! which stays intact until the next checkpoint (collected blocks become free only
//! then), and the index still points at it if the copy is not applied. **A normal
//! recovery (and a replay in RAM) therefore drops every copy of its window** where
//! collection runs in slices (windows at least twice the smallest, such as the
//! W25N01GV's 16 blocks; stop 42, again since stop 47): the collections since the
//! checkpoint are undone, their victims count
//! their pages valid again as the checkpoint's block table says, and the cold blocks
//! hold nothing valid, so the cold head's cut block has nothing to move either. That
//! keeps the collection's cache write-backs out of the work a recovery redoes
//! (`Dev::took_page`): counted, they forced a checkpoint every two random 2 KiB writes
//! on a W25N01GV 85 % full, about 70 programs a write, where dropping the copies left
//! 8.9 (DESIGN 5). Scrubs and retirements are not undone that way: their blocks are
//! failing, and what asked for the move lives in RAM, so a collection step that copied
//! such pages checkpoints at once (`gc_advance`; an independent review, s42, lost
//! read-disturbed data on 5 of 40 seeds when a cut every 1,024 reads undid each scrub
//! step). A cut inside that step leaves the originals where they read well (corrected)
//! a moment before, and a call refused `NoSpace` checkpoints what its collections freed
//! (`make_room`: a firmware that resets on the error would otherwise start every
//! attempt from the same victims). Smaller windows, whose collections count their
//! write-backs anyway, replay the copies as before. A salvage or a repair, which stop at
//! lost pages, apply the copies (a copy may be what reads of a page whose original no
//! longer does), with three rules:
//!
//! - copies whose watermark is past the data head's replayed prefix reflect pages the
//!   replay drops (a torn transaction, a lost page): dropped, like those pages;
//! - the last run of copies of one page at one watermark is dropped: its last page is
//!   the last the cold head programmed, possibly torn by the cut, and the copies
//!   before it in the run are failed programs it retried. No copy needs a commit page;
//! - a copied metadata record that does not read back is skipped.
//!
//! Copies programmed before a durable checkpoint carry watermarks below that
//! checkpoint's data-head start (the checkpoint moves the data head past the cold
//! head's last watermark; recovery moves it past every watermark it sees), so stale
//! copies in window blocks not yet erased are told apart from new ones.

use nand_hal::{BlockAddr, NandFlash, PageAddr};

use crate::errors::Fault;
use crate::format::backpointer::{Backpointer, PageKind};
use crate::format::checkpoint::{BlockState, HEADS};
use crate::format::logsector::{blank, complete_slots, sector_at};
use crate::format::meta::MetaRecord;
use crate::gc::COLD_HEAD;
use crate::io::{FaultOf, Scan, FAILS_PER_BLOCK};
use crate::log::LOG_HEAD;
use crate::mount::seq_cmp;
use crate::policy::SpacePolicy;
use crate::space::Room;
use crate::{ObjectId, Oftl, DATA_HEAD, INDEX_HEAD, MAX_WINDOW};

/// Blocks above the growing pool floor a recovery must find before it leaves the data
/// or cold head's cut block to collection (see `Oftl::cut_block_may_wait`): the
/// recovery's own writes take one for the suspect page's copy and may take one for
/// the index head; below that, it moves the block, which frees one.
const CUT_BLOCK_SLACK: u32 = 2;

/// Pages of a cut block sorted by owner at a time when recovery moves it (see
/// `relocate_cut_block`): 256 bytes of stack.
const RELOCATE_RUN: usize = 64;

/// The blocks a scan walks, in order, each with the page its walk starts at: the heads'
/// carried blocks from their recorded positions, then the window's blocks from page 0.
/// Only the carried blocks (at most one per head, first) keep a start of their own, so
/// the list takes 4 bytes a block on recovery's stack instead of 8.
struct Walk {
    blocks: heapless::Vec<BlockAddr, { MAX_WINDOW + HEADS }>,
    /// Start pages of the first `HEADS` entries.
    starts: [u32; HEADS],
}

impl Walk {
    const fn new() -> Self {
        Walk {
            blocks: heapless::Vec::new(),
            starts: [0; HEADS],
        }
    }

    fn clear(&mut self) {
        self.blocks.clear();
    }

    /// Appends `b`, walked from page `start`; a start other than 0 only among the first
    /// `HEADS` entries (the carried blocks). `Err` when full or misplaced.
    fn push(&mut self, b: BlockAddr, start: u32) -> Result<(), ()> {
        let i = self.blocks.len();
        match self.starts.get_mut(i) {
            Some(s) => *s = start,
            None if start != 0 => return Err(()),
            None => {}
        }
        self.blocks.push(b).map_err(|_| ())
    }

    fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Entry `i`: its block and start page.
    fn get(&self, i: usize) -> Option<(BlockAddr, u32)> {
        let b = *self.blocks.get(i)?;
        Some((b, self.starts.get(i).copied().unwrap_or(0)))
    }

    fn iter(&self) -> impl Iterator<Item = (BlockAddr, u32)> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    fn truncate(&mut self, len: usize) {
        self.blocks.truncate(len);
    }
}

/// Log pages a later page's retry may supersede in one window.
const MAX_SUPERSEDED: usize = 16;

/// Unreadable pages a scan remembers to look at again: the most recent ones of the walk
/// (see `Scanned::unread`).
const MAX_UNREAD: usize = 6;

/// Scans a recovery makes again when a page it took for a torn tail reads after all.
const RESCANS: u32 = 1;

/// What a salvage or repair mount left out (see [`Oftl::salvage_report`]).
///
/// A head's replay stops at its first lost page, so the objects keep the state they had
/// before the transaction that page belonged to; when one head lost a page and the
/// other also moved since the checkpoint, both stop at the checkpoint (the heads have
/// no order between them). Every object whose changes were left out is listed (the
/// first [`SalvageReport::MAX_OBJECTS`]; [`SalvageReport::more`] says whether there
/// were more), except the owner of an unreadable page whose tag does not read either.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SalvageReport {
    unreadable: heapless::Vec<u32, { SalvageReport::MAX_PAGES }>,
    unreadable_more: bool,
    to_checkpoint: bool,
    objects: heapless::Vec<ObjectId, { SalvageReport::MAX_OBJECTS }>,
    more: bool,
    pub(crate) rebuilt: bool,
}

impl SalvageReport {
    /// How many objects the report names at most.
    pub const MAX_OBJECTS: usize = 16;
    /// How many unreadable pages the report lists at most.
    pub const MAX_PAGES: usize = 4;

    /// The pages of the updating window that did not read (in scan order; the first
    /// [`Self::MAX_PAGES`]), lost ones and a torn last page alike.
    pub fn unreadable_pages(&self) -> &[u32] {
        &self.unreadable
    }

    /// Whether more pages did not read than [`Self::unreadable_pages`] lists.
    pub fn more_unreadable(&self) -> bool {
        self.unreadable_more
    }

    /// Whether everything written since the last checkpoint was left out (a loss in one
    /// head while the other head also moved).
    pub fn to_checkpoint(&self) -> bool {
        self.to_checkpoint
    }

    /// Objects whose changes after a loss were left out (rolled back).
    pub fn rolled_back(&self) -> &[ObjectId] {
        &self.objects
    }

    /// Whether more objects were rolled back than [`Self::rolled_back`] names.
    pub fn more(&self) -> bool {
        self.more
    }

    /// Whether the tables were rebuilt from a full scan
    /// (`Damaged::Rebuild`). Then [`Self::rolled_back`] names the
    /// objects whose state is in doubt (a newest metadata page that did not read, an
    /// object brought back from its data pages under a new metadata page, a page
    /// missing below an object's size, a stream with a gap),
    /// [`Self::unreadable_pages`] lists pages that did not read anywhere on the device,
    /// and [`Self::more`] says a page was lost whose owner cannot be named.
    pub fn rebuilt(&self) -> bool {
        self.rebuilt
    }

    /// Whether object `id` may have been rolled back (listed, or the list overflowed).
    pub fn may_have_rolled_back(&self, id: ObjectId) -> bool {
        self.more || self.objects.contains(&id)
    }

    pub(crate) const fn new() -> Self {
        Self {
            unreadable: heapless::Vec::new(),
            unreadable_more: false,
            to_checkpoint: false,
            objects: heapless::Vec::new(),
            more: false,
            rebuilt: false,
        }
    }

    pub(crate) fn unreadable(&mut self, page: PageAddr) {
        if !self.unreadable.contains(&page.0) && self.unreadable.push(page.0).is_err() {
            self.unreadable_more = true;
        }
    }

    pub(crate) fn left_out_unnamed(&mut self) {
        self.more = true;
    }

    pub(crate) fn left_out(&mut self, id: ObjectId) {
        if !self.objects.contains(&id) && self.objects.push(id).is_err() {
            self.more = true;
        }
    }
}

/// What [`Track::step`] makes of a page's sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// The next expected number.
    New,
    /// A recent number again: a failed program's retry, which replaces it.
    Repeat,
    /// Older than the checkpoint, or older than the recent span: not part of the replay.
    Skip,
    /// Past the next expected number: the numbers from `missing` to this one minus one
    /// were lost.
    Gap { missing: u32 },
}

/// Per-head sequence tracking shared by both passes.
#[derive(Clone, Copy, Debug)]
struct Track {
    start: u32,
    expected: u32,
    /// How far back a number may repeat (a failed program's retry reuses its numbers:
    /// 1 for whole pages, a page's sectors for log appends).
    span: u32,
}

impl Track {
    fn step(&mut self, seq: u32) -> Step {
        if seq_cmp(seq, self.start).is_lt() {
            return Step::Skip;
        }
        if seq == self.expected {
            self.expected = self.expected.wrapping_add(1);
            Step::New
        } else if seq_cmp(seq, self.expected).is_gt() {
            let missing = self.expected;
            self.expected = seq.wrapping_add(1);
            Step::Gap { missing }
        } else if self.expected.wrapping_sub(seq) <= self.span {
            Step::Repeat
        } else {
            Step::Skip
        }
    }
}

/// The last `MAX_UNREAD` unreadable pages of a scan (a ring: the oldest goes first).
#[derive(Clone, Copy, Debug)]
struct Unread {
    pages: [PageAddr; MAX_UNREAD],
    len: u8,
    next: u8,
}

impl Unread {
    const EMPTY: Self = Unread {
        pages: [PageAddr(0); MAX_UNREAD],
        len: 0,
        next: 0,
    };

    fn clear(&mut self) {
        *self = Self::EMPTY;
    }

    fn remember(&mut self, page: PageAddr) {
        self.pages[self.next as usize] = page;
        self.next = (self.next + 1) % MAX_UNREAD as u8;
        self.len = (self.len + 1).min(MAX_UNREAD as u8);
    }

    /// The pages remembered, in no particular order.
    fn pages(&self) -> &[PageAddr] {
        &self.pages[..self.len as usize]
    }
}

/// Unreadable pages after the last page a data- or log-head block shows of its head's
/// replay (or after the checkpoint's position in a head's carried block). One cut tears
/// one program, and the writer leaves a block after [`FAILS_PER_BLOCK`] failed programs
/// in a row, so a head's block never ends in more: the failed programs of one program
/// and its retries, or fewer of them and the page the cut tore. More is not a torn tail
/// but a run of read errors that outlasted the retries, or media loss: either way the
/// acknowledged transactions on them must not be dropped as if a cut had interrupted
/// them (an independent review, `tests/review_tail_run.rs` B1), so the scan reports
/// `MediaLoss` and the mount looks again. Counted per block, so pages another head
/// wrote later in the walk do not hide the run.
///
/// A block where no head page reads is counted only when a page programmed after it
/// follows in the walk (a page of the replay, or a cold copy made since the
/// checkpoint): more than [`FAILS_PER_BLOCK`] unreadable pages in a row before it are
/// then media loss too (a torn erase is the cut's last operation, and heads take window
/// blocks in walk order, so nothing follows one; nor an older life's block, which no
/// head started). A walk that *ends* in such a block is taken for a torn erase or an
/// older life: a torn erase of a block whose older life filled only its first pages
/// leaves garbage and then erased pages, which no read tells apart from a head's newest
/// block lost whole (DESIGN 5.2). Runs in blocks of cold copies (one holds a readable
/// copy, or it is the cold head's carried block) are left out: a lost copy is never a
/// loss, its original is intact until the next checkpoint (independent reviews,
/// `tests/review_s32b.rs`, `tests/review_s32c.rs`).
/// (Packed: it lives on recovery's stack, the store's deepest path, and the default
/// store's RAM bound counts it.)
#[derive(Clone, Copy, Debug)]
struct TailRun {
    /// Unreadable pages since this block showed a page of the replay (or since the
    /// checkpoint's position in a head's block).
    unread: u16,
    /// Whether this block showed a page of the replay (or continues a head's block).
    counting: bool,
    /// The current run of unreadable pages in a row in this block (since the last page
    /// of the replay): its first page ([`NO_PAGE`]: none) and its length.
    run_first: u32,
    run: u16,
    /// The first run longer than a cut leaves outside blocks of cold copies: its first
    /// page ([`NO_PAGE`]: none) and walk entry.
    suspect: u32,
    suspect_wi: u8,
}

/// No page, in [`TailRun`].
const NO_PAGE: u32 = u32::MAX;

impl TailRun {
    const NONE: TailRun = TailRun {
        unread: 0,
        counting: false,
        run_first: NO_PAGE,
        run: 0,
        suspect: NO_PAGE,
        suspect_wi: 0,
    };

    /// The walk enters a block; `continues` when a data or log head's block is walked
    /// from the page the checkpoint recorded.
    fn block_begins(&mut self, continues: bool) {
        *self = TailRun {
            counting: continues,
            suspect: self.suspect,
            suspect_wi: self.suspect_wi,
            ..TailRun::NONE
        };
    }
    /// Page `page` (of walk entry `wi`) does not read.
    fn unreadable(&mut self, wi: usize, page: PageAddr) {
        if self.counting {
            self.unread = self.unread.saturating_add(1);
        }
        if self.run > 0 && self.run_first.wrapping_add(self.run as u32) == page.0 {
            self.run = self.run.saturating_add(1);
        } else {
            self.run = 1;
            self.run_first = page.0;
        }
        if self.run as u32 > FAILS_PER_BLOCK && self.suspect == NO_PAGE {
            self.suspect = self.run_first;
            self.suspect_wi = wi as u8;
        }
    }
    /// The walk leaves entry `wi`, a block of cold copies if `cold`: a run there is no
    /// suspect.
    fn block_ends(&mut self, wi: usize, cold: bool) {
        if cold && self.suspect != NO_PAGE && self.suspect_wi as usize == wi {
            self.suspect = NO_PAGE;
        }
    }
    /// A page of the replay: the run before it longer than a cut leaves, if any.
    fn accepted(&mut self) -> Option<PageAddr> {
        *self = TailRun {
            counting: true,
            suspect: self.suspect,
            suspect_wi: self.suspect_wi,
            ..TailRun::NONE
        };
        (self.suspect != NO_PAGE).then_some(PageAddr(self.suspect))
    }
    /// A cold copy made since the checkpoint, in walk entry `wi`: the run before it in
    /// an earlier entry longer than a cut leaves, if any.
    fn copy_after(&self, wi: usize) -> Option<PageAddr> {
        (self.suspect != NO_PAGE && (self.suspect_wi as usize) < wi)
            .then_some(PageAddr(self.suspect))
    }
    /// The block ended with more unreadable pages than a cut leaves: one of them (the
    /// first of the last run).
    fn too_long(&self) -> Option<PageAddr> {
        (self.run_first != NO_PAGE && self.unread as u32 > FAILS_PER_BLOCK)
            .then_some(PageAddr(self.run_first))
    }
}

/// Where pass 2's merge of cold copies stands.
struct ColdCursor {
    /// Walk entry and page in its block of the next page to look at.
    wi: usize,
    i: u32,
    /// Walk entries holding cold copies (pass 1).
    blocks: u64,
    /// Walk position of the first dropped copy.
    cut: (usize, u32),
    /// The data head's start: copies with lower watermarks are stale.
    start: u32,
    /// The copy at the position, once read (so waiting for its turn costs no reads).
    peeked: Option<(PageAddr, Backpointer)>,
}

/// Whether `bp` is a cold copy written after the checkpoint whose data head starts at
/// `start` (a relocated data or metadata page whose watermark is not below it).
fn is_cold_copy(bp: &Backpointer, start: u32) -> bool {
    bp.relocated
        && matches!(bp.kind, PageKind::Data | PageKind::Meta)
        && !seq_cmp(bp.seq, start).is_lt()
}

/// The replayed head a page kind belongs to (index and object-table pages, on the
/// index head, are never replayed).
fn head_of(kind: PageKind) -> Option<usize> {
    match kind {
        PageKind::Data | PageKind::Meta => Some(DATA_HEAD),
        PageKind::Log => Some(LOG_HEAD),
        _ => None,
    }
}

/// Pass-1 findings of one head.
#[derive(Clone, Copy, Debug, Default)]
struct Bound {
    last_commit: Option<u32>,
    prev_commit: Option<u32>,
    last_acc: Option<(PageAddr, Backpointer)>,
}

impl Bound {
    fn accept(&mut self, page: PageAddr, bp: Backpointer) {
        self.last_acc = Some((page, bp));
        if bp.commit {
            if self.last_commit != Some(bp.seq) {
                self.prev_commit = self.last_commit;
            }
            self.last_commit = Some(bp.seq);
        }
    }
    fn replays(&self, seq: u32) -> bool {
        self.last_commit.is_some_and(|lc| !seq_cmp(seq, lc).is_gt())
    }
}

/// What pass 1 found (step 1).
struct Scanned {
    walk: Walk,
    fresh: [Track; HEADS],
    bound: [Bound; HEADS],
    /// One past the highest number seen per head (the heads continue from there).
    next_seq: [u32; HEADS],
    /// Log sectors pass 1 applied; whether pass 2 must apply them all again (some
    /// belonged to a stream created in the window).
    replayed_logs: u32,
    log_again: bool,
    /// Walk entries with log pages, and with cold copies.
    log_blocks: u64,
    cold_blocks: u64,
    /// The block of the last cold copy, and where the dropped run of copies starts.
    last_cold: Option<BlockAddr>,
    cold_cut: (usize, u32),
    /// The last log page with accepted sectors (its content is the log tail's image).
    log_suspect: Option<PageAddr>,
    /// The data head's last commit page, read once and held in the aside scratch page
    /// until step 4 relocates it (see `scratch`).
    suspect: Option<(PageAddr, Backpointer)>,
    /// Whether the suspect page is the last page the data head programmed: nothing
    /// after it in its block (no page of a transaction the cut left open, no torn
    /// program), and no unreadable page of no known head after it in the walk (a torn
    /// first page of the head's next block), so the block holds only committed pages
    /// and the cut dropped nothing (see `relocate_suspects`).
    suspect_last: bool,
    /// Salvage: where each head's replay stops (the first page found lost).
    loss: [Option<PageAddr>; HEADS],
    /// Log pages whose sectors a later page repeats (failed programs and their
    /// retries): never applied, the retry stands for them.
    superseded: heapless::Vec<PageAddr, MAX_SUPERSEDED>,
    /// Unreadable pages, the last few of the walk (a run of read errors that hid pages
    /// of a head hid the pages after them too, up to the walk's end; earlier ones are
    /// mostly failed programs, which never read), and the data head's last commit page
    /// if its full read failed: looked at again after the scan (see `Oftl::recover`).
    /// An independent review filled a list of the first four with other pages and hid
    /// the data head's window blocks behind them: acknowledged changes rolled back for
    /// good.
    unread: Unread,
    unread_commit: Option<(PageAddr, Backpointer)>,
}

impl Scanned {
    const EMPTY: Self = Scanned {
        walk: Walk::new(),
        fresh: [Track {
            start: 0,
            expected: 0,
            span: 0,
        }; HEADS],
        bound: [Bound {
            last_commit: None,
            prev_commit: None,
            last_acc: None,
        }; HEADS],
        next_seq: [0; HEADS],
        replayed_logs: 0,
        log_again: false,
        log_blocks: 0,
        cold_blocks: 0,
        last_cold: None,
        cold_cut: (0, 0),
        log_suspect: None,
        suspect: None,
        suspect_last: false,
        loss: [None; HEADS],
        superseded: heapless::Vec::new(),
        unread: Unread::EMPTY,
        unread_commit: None,
    };
}

impl<
        F: NandFlash,
        P: SpacePolicy,
        const PAGE: usize,
        const BLOCKS: usize,
        const CACHE: usize,
        const WBUF: usize,
        const META: usize,
        const LOG: usize,
    > Oftl<F, PAGE, BLOCKS, CACHE, WBUF, P, META, LOG>
{
    /// Recovers (see the module docs). With `recheck`, a page the scan took for a torn
    /// tail that reads after the replay (by then a run of read errors longer than the
    /// retries is over) stops the recovery before it writes anything the old
    /// checkpoint references: `Ok(false)`, mount again.
    pub(crate) fn recover(&mut self, recheck: bool) -> Result<bool, FaultOf<F>> {
        let no_write = self.session.replay_only();
        if no_write {
            self.dev.writes_cache_only();
        }
        if self.ckpt.fell_back() {
            self.dev.loaded_older_checkpoint();
        }
        self.scratch.release();
        if self.ckpt.fell_back() && !no_write {
            self.restate_checkpoint()?;
        }
        // Pass 1 applies log sectors, whose cache write-backs go to the index head: to
        // a fresh block (the recorded one may hold pages written after the checkpoint).
        self.dev.heads_mut().left_block(INDEX_HEAD);
        let mut sc = Scanned::EMPTY;
        let mut scanned = self.scan_window(&mut sc);
        // A page taken for a torn tail that reads now was a transient failure (a run of
        // read errors longer than the retries): what followed it in its head would
        // have been dropped as the cut's. Scan again (pass 1 applies log sectors in
        // order; applying them again from the start is harmless).
        for _ in 0..RESCANS {
            match scanned {
                Ok(()) if !self.session.salvaging() => {}
                _ => break,
            }
            match self.unread_reads_now(&sc) {
                Ok(false) => break,
                Ok(true) => {
                    self.scratch.release();
                    scanned = self.scan_window(&mut sc);
                }
                Err(e) => scanned = Err(e),
            }
        }
        let opened = scanned.and_then(|()| {
            if !no_write {
                self.open_recovery_window(&sc)
            } else {
                self.dev.heads_mut().restart(&sc.next_seq);
                self.dev.table_mut().clear_window();
                Ok(())
            }
        });
        if let Err(e) = opened {
            self.scratch.release();
            return Err(e);
        }
        self.dev.set_recovering(true);
        let last_block = self.replay_window(&sc);
        let mut again = false;
        let r = last_block.and_then(|lb| {
            if recheck && !no_write && !self.session.salvaging() && self.unread_reads_now(&sc)? {
                // An independent review found a run of nine failing reads in the scan
                // undoing an acknowledged rename for good (the re-check right after the
                // scan fell in the same run).
                again = true;
                return Ok(());
            }
            if no_write {
                // Read-only: nothing relocated, no checkpoint (see the salvage docs).
                // The last log page stays as replay read it (it may be a torn page
                // that reads differently every time): reads of it are served from RAM.
                if let Some(lp) = sc.log_suspect {
                    self.log_tail.pin(lp);
                }
                return Ok(());
            }
            let short = self.relocate_suspects(&sc, lb)?;
            self.skip_attempt_numbers(&sc);
            self.ckpt.switch_block();
            // Still recovering: the checkpoint's index flush may need more blocks.
            let writable = self.session.read_only().is_none();
            match self.checkpoint(false) {
                Ok(()) => {}
                // The recovery is complete in RAM; only its checkpoint could not be
                // written (no checkpoint block left, or every attempt failed): the
                // store is read-only with the state the recovery reached. Replaying
                // again in RAM, as after a recovery that ran out of room, wrote cache
                // pages into blocks the failed attempts' index points into, and an
                // attempt that reads well at a later mount is the newest checkpoint
                // there (review s43: acknowledged pages read `Corrupted`).
                Err(Fault::ReadOnly) if writable && self.session.read_only().is_some() => {
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
            if short {
                self.go_read_only(crate::ReadOnlyReason::GoodBlocks);
            }
            Ok(())
        });
        self.dev.set_recovering(false);
        // A read-only replay never relocates the suspect page; an error may stop
        // before: either way nothing uses the held copy after this.
        self.scratch.release();
        r.map(|()| !again)
    }

    /// Step 1: the pass over the window's spare areas (see the module docs).
    #[inline(never)]
    fn scan_window(&mut self, out: &mut Scanned) -> Result<(), FaultOf<F>> {
        let ppb = self.dev.ppb();
        let spp = self.sectors_per_page();
        let pu = self.dev.pu();
        out.unread.clear();
        out.unread_commit = None;
        let walk = &mut out.walk;
        walk.clear();
        for (i, h) in self.dev.heads().all().into_iter().enumerate() {
            // The index head's pages are a cache recovery rebuilds: not scanned.
            if let Some(b) = h.block.filter(|_| i != INDEX_HEAD) {
                walk.push(b, h.next_page).map_err(|_| Fault::Corrupted)?;
            }
        }
        for &b in self.dev.table().window() {
            walk.push(b, 0).map_err(|_| Fault::Corrupted)?;
        }
        // A window block whose erase failed after the checkpoint was marked bad at once.
        // Bits a cut erase left in the marker bytes of a block the store erased before
        // are no marker (`Dev::check_block_marker`): the walk reads such a block as the
        // torn erase it is.
        for (b, _) in walk.iter() {
            let was_bad = self.dev.table().get(b).state() == BlockState::Bad;
            if self.dev.check_block_marker(b).map_err(Fault::Flash)?
                && self.session.salvaging()
                && !was_bad
            {
                // Its erase failed (then it holds nothing new), or its marker is
                // damaged and what it held cannot be read: which objects that
                // touches cannot be told.
                self.salvaged.left_out_unnamed();
            }
        }
        let fresh: [Track; HEADS] = core::array::from_fn(|h| Track {
            start: self.dev.heads().next_seq(h),
            expected: self.dev.heads().next_seq(h),
            span: if h == LOG_HEAD { spp } else { 1 },
        });
        let mut track = fresh;
        let bound = &mut out.bound;
        *bound = [Bound::default(); HEADS];
        let mut next_seq: [u32; HEADS] = core::array::from_fn(|h| fresh[h].start);
        let mut see = |h: usize, seq: u32| {
            if !seq_cmp(seq, fresh[h].start).is_lt() && !seq_cmp(seq, next_seq[h]).is_lt() {
                next_seq[h] = seq.wrapping_add(1);
            }
        };
        let salvage = self.session.salvaging();
        let mut scanned = 0u32;
        let mut log_blocks = 0u64;
        let mut log_suspect: Option<PageAddr> = None;
        // The first unreadable page of the walk not yet proven a tail.
        let mut hole: Option<PageAddr> = None;
        // Log sectors applied in this pass, and whether some belonged to a stream not
        // known yet.
        let mut replayed_logs = 0u32;
        let mut log_again = false;
        let mut loss: [Option<PageAddr>; HEADS] = [None; HEADS];
        // Salvage: a metadata page whose record does not read, lost unless the next
        // page is its retry.
        let mut bad_meta: Option<(PageAddr, Backpointer)> = None;
        // Salvage: owners of the data head's pages accepted since its last commit (named
        // if a loss ends the replay before their commit).
        let mut uncommitted = heapless::Vec::<ObjectId, { SalvageReport::MAX_OBJECTS }>::new();
        let mut uncommitted_more = false;
        // Salvage: owners of every page either head accepted (named if both heads go
        // back to the checkpoint; pass 2 may not read them all again).
        let mut touched = heapless::Vec::<ObjectId, { SalvageReport::MAX_OBJECTS }>::new();
        let mut touched_more = false;
        let superseded = &mut out.superseded;
        superseded.clear();
        // Salvage applies log sectors in pass 2 only, once it knows where the log's
        // replay stops.
        if salvage {
            log_again = true;
        }
        // Cold copies: the walk blocks holding them, the block of the last one, and
        // where the last run of copies of one page at one watermark starts (the last
        // copy, which a cut may have torn, and the failed programs it retried: dropped,
        // see the module docs).
        let mut cold_blocks = 0u64;
        let mut last_cold: Option<BlockAddr> = None;
        let mut cold_key: Option<(u8, u32, u32, u32)> = None;
        let mut cold_cut = (walk.len(), 0u32);
        // Heads take window blocks in order: the first window block that no head
        // started after the checkpoint (its first page still holds an older life, or it
        // holds nothing at all) ends the walk, and the blocks after it are not read.
        let carried = walk.len() - self.dev.table().window().len();
        let stale = |bp: &Backpointer| match head_of(bp.kind) {
            // Index, table and checkpoint pages never go to window blocks.
            None => true,
            // A relocated data or metadata page is a cold copy (its number a watermark);
            // a relocated log sector is a copy on the log head like any other.
            Some(DATA_HEAD) if bp.relocated => !is_cold_copy(bp, fresh[DATA_HEAD].start),
            Some(h) => seq_cmp(bp.seq, fresh[h].start).is_lt(),
        };
        let mut walk_end = walk.len();
        let mut tail = TailRun::NONE;
        // The data head's last accepted page, and whether anything was programmed after
        // it: in its block (pages of a block are walked in order, in one stretch), or as
        // an unreadable page of no known head later in the walk (the data head's next
        // block comes after its last one).
        let mut last_data: Option<PageAddr> = None;
        let mut after_last_data = false;
        'walk: for (wi, (b, start)) in walk.iter().enumerate() {
            if !salvage {
                if let Some(p) = tail.too_long() {
                    return Err(Fault::MediaLoss(p));
                }
            }
            if self.dev.table().get(b).state() == BlockState::Bad {
                tail.block_begins(false);
                continue;
            }
            tail.block_begins(
                wi < carried
                    && start > 0
                    && [DATA_HEAD, LOG_HEAD]
                        .iter()
                        .any(|&h| self.dev.heads().get(h).block == Some(b)),
            );
            let mut started = false;
            let mut goes_on = false;
            for i in start..ppb {
                let page = self.dev.geo().page(b, i);
                scanned += 1;
                // A block the log head wrote holds only log pages: read them whole at
                // once (no spare-area read first).
                let scan = if log_blocks & (1 << wi) != 0 {
                    Scan::Garbage
                } else {
                    self.dev.scan_read(page)?
                };
                if wi >= carried && i == 0 {
                    if let Scan::Bp(bp) = scan {
                        if stale(&bp) {
                            walk_end = wi;
                            break 'walk;
                        }
                    }
                }
                // A window block whose first pages read erased, as many as the failed
                // programs a head makes in a row before it leaves a block and one more,
                // was never started (a block erased ahead of an operation,
                // `Dev::erase_ahead`, or one with no older life), or a head left it after
                // failed programs that read erased: what `started` below concludes after
                // reading the whole block (64 pages on the W25N01GV), and the next
                // window block tells which.
                if wi >= carried && !started && scan == Scan::Erased && i >= FAILS_PER_BLOCK {
                    goes_on = self.next_window_block_started(walk, wi, &stale)?;
                    if goes_on {
                        break;
                    }
                    walk_end = wi;
                    break 'walk;
                }
                started |= scan != Scan::Erased;
                if scan != Scan::Erased
                    && last_data.is_some_and(|p| self.dev.geo().block_of(p) == b)
                {
                    after_last_data = true;
                }
                let bp = match scan {
                    Scan::Bp(bp) => bp,
                    // Unreadable as a whole: a torn page, or a log page one of whose
                    // sectors fails (a part with a page-wide ECC status hides the good
                    // ones from a plain read).
                    Scan::Garbage => match self.log_page_behind(page)? {
                        Some(bp) => bp,
                        None if blank(self.scratch.page(), pu, self.blank_flips()) => continue,
                        None => {
                            // A torn page of no known head after the data head's last
                            // page may be the data head's next one (the first of its
                            // next block): its block must then be moved (review s48).
                            if (log_blocks | cold_blocks) & (1 << wi) == 0 {
                                after_last_data = true;
                            }
                            hole.get_or_insert(page);
                            tail.unreadable(wi, page);
                            out.unread.remember(page);
                            if salvage {
                                self.salvaged.unreadable(page);
                            }
                            continue;
                        }
                    },
                    Scan::Erased => continue,
                };
                if bp.kind == PageKind::Log {
                    log_blocks |= 1 << wi;
                    let mask = if scan == Scan::Garbage {
                        // `log_page_behind` read it.
                        complete_slots(self.scratch.page(), pu, spp)
                    } else {
                        self.read_log_page(page)?
                    };
                    // Every number on the page is seen, whole groups or not: none is
                    // ever used again.
                    for slot in 0..spp {
                        if let Some(t) = sector_at(self.scratch.page(), pu, slot) {
                            see(LOG_HEAD, t.seq);
                        }
                    }
                    if mask == 0 {
                        hole.get_or_insert(page);
                        tail.unreadable(wi, page);
                        out.unread.remember(page);
                        if salvage {
                            self.salvaged.unreadable(page);
                        }
                        continue;
                    }
                    let mut any = false;
                    for slot in slots(mask) {
                        let Some(t) = sector_at(self.scratch.page(), pu, slot) else {
                            continue;
                        };
                        match track[LOG_HEAD].step(t.seq) {
                            Step::Skip => continue,
                            Step::Gap { .. } => {
                                // Groups count only whole, so a torn append is simply
                                // absent: a later number after missing ones is loss.
                                if !salvage {
                                    return Err(Fault::MediaLoss(hole.unwrap_or(page)));
                                }
                                loss[LOG_HEAD].get_or_insert(hole.unwrap_or(page));
                            }
                            Step::Repeat => {
                                // A failed program's retry (a fresh page, or the copy
                                // of a failed partial program's page with the new
                                // records): the page with the failed copy is void.
                                if let Some((p, _)) = bound[LOG_HEAD].last_acc {
                                    if p != page && !superseded.contains(&p) {
                                        superseded.push(p).map_err(|_| Fault::MediaLoss(p))?;
                                    }
                                }
                            }
                            Step::New => {}
                        }
                        if loss[LOG_HEAD].is_some() {
                            // Salvage: the log's replay stopped at its first loss.
                            continue;
                        }
                        bound[LOG_HEAD].accept(page, t.backpointer());
                        if salvage && !touched.contains(&t.stream) {
                            touched_more |= touched.push(t.stream).is_err();
                        }
                        any = true;
                        // Applied now, in sequence order (groups count only whole, so
                        // every accepted sector is below the final bound; a retry that
                        // supersedes this page later remaps the same slots). A stream
                        // this pass does not know yet is created in the window: all
                        // log sectors are applied again after the metadata (pass 2b).
                        if !salvage && self.obj_get(t.stream)?.is_some() {
                            self.apply_log(&t, page, slot)?;
                            replayed_logs += 1;
                        } else {
                            log_again = true;
                        }
                    }
                    if any {
                        // Read once: the page may hold unstable bits from the cut.
                        self.log_tail.keep_read(self.scratch.page())?;
                        log_suspect = Some(page);
                    }
                    if any || loss[LOG_HEAD].is_some() {
                        hole = None;
                        if let Some(p) = tail.accepted().filter(|_| !salvage) {
                            return Err(Fault::MediaLoss(p));
                        }
                    }
                    continue;
                }
                let Some(h) = head_of(bp.kind) else { continue };
                if bp.relocated {
                    cold_blocks |= 1 << wi;
                    if !is_cold_copy(&bp, fresh[DATA_HEAD].start) {
                        continue;
                    }
                    if let Some(p) = tail.copy_after(wi).filter(|_| !salvage) {
                        return Err(Fault::MediaLoss(p));
                    }
                    // Whatever happens to the copy, the data head goes past its
                    // watermark (so it stays below the next checkpoint's start).
                    see(DATA_HEAD, bp.seq);
                    see(COLD_HEAD, bp.seq);
                    let key = (bp.kind as u8, bp.owner, bp.lpn, bp.seq);
                    if cold_key != Some(key) {
                        cold_cut = (wi, i);
                        cold_key = Some(key);
                    }
                    last_cold = Some(b);
                    continue;
                }
                see(h, bp.seq);
                let step = track[h].step(bp.seq);
                match step {
                    Step::Skip => continue,
                    Step::Gap { .. } => {
                        if !salvage {
                            return Err(Fault::MediaLoss(hole.unwrap_or(page)));
                        }
                        loss[h].get_or_insert(hole.unwrap_or(page));
                    }
                    Step::New | Step::Repeat => {}
                }
                hole = None;
                if let Some(p) = tail.accepted().filter(|_| !salvage) {
                    return Err(Fault::MediaLoss(p));
                }
                if let Some((bad, bad_bp)) = bad_meta.take() {
                    if !(step == Step::Repeat && bp.seq == bad_bp.seq) {
                        // Not retried: the record is lost.
                        loss[h].get_or_insert(bad);
                        self.salvaged.left_out(bad_bp.owner);
                    }
                }
                if loss[h].is_some() {
                    // Salvage: the replay stops at the first loss (see the module docs).
                    self.salvaged.left_out(bp.owner);
                    continue;
                }
                if salvage && bp.kind == PageKind::Meta && !self.meta_reads(page)? {
                    self.salvaged.unreadable(page);
                    bad_meta = Some((page, bp));
                    continue;
                }
                bound[h].accept(page, bp);
                if h == DATA_HEAD {
                    last_data = Some(page);
                    after_last_data = false;
                }
                if salvage && !touched.contains(&bp.owner) {
                    touched_more |= touched.push(bp.owner).is_err();
                }
                if salvage {
                    if bp.commit {
                        uncommitted.clear();
                    } else if !uncommitted.contains(&bp.owner) {
                        uncommitted_more |= uncommitted.push(bp.owner).is_err();
                    }
                }
            }
            tail.block_ends(
                wi,
                cold_blocks & (1 << wi) != 0 || self.dev.heads().get(COLD_HEAD).block == Some(b),
            );
            if wi >= carried && !started {
                // Nothing programmed since its erase (or since the checkpoint), unless a
                // head left it after failed programs that read erased (the simulator's
                // failed program may land nothing on a part without ECC): then the next
                // window block holds the head's next pages (an independent review: with
                // eight such failures the walk ended here and acknowledged writes were
                // gone, with no error).
                if goes_on || self.next_window_block_started(walk, wi, &stale)? {
                    continue;
                }
                walk_end = wi;
                break;
            }
        }
        if let Some(p) = tail.too_long().filter(|_| !salvage) {
            return Err(Fault::MediaLoss(p));
        }
        walk.truncate(walk_end);
        self.dev.stats_mut().recovery_scanned_pages = scanned;
        if salvage {
            // An unreadable page at the end (a metadata record that does not read, say)
            // is taken for the page a cut tore, as in any recovery; it is reported.
            if let Some((_, bad_bp)) = bad_meta {
                self.salvaged.left_out(bad_bp.owner);
            }
            // The heads are ordered only within themselves (a log append carries no
            // data-head number), and one head's transactions may build on the other's
            // (a trim after appends; a file's home page after its staged record). A loss
            // in one head while the other also moved since the checkpoint leaves one cut
            // both agree on: the checkpoint itself.
            let active = |h: usize| bound[h].last_acc.is_some() || loss[h].is_some();
            if (loss[DATA_HEAD].is_some() && active(LOG_HEAD))
                || (loss[LOG_HEAD].is_some() && active(DATA_HEAD))
            {
                self.salvaged.to_checkpoint = true;
                for &o in &touched {
                    self.salvaged.left_out(o);
                }
                if touched_more {
                    self.salvaged.left_out_unnamed();
                }
                bound[DATA_HEAD] = Bound::default();
                bound[LOG_HEAD] = Bound::default();
            }
            // The transaction left open at the end is named too when a page did not
            // read (it may have been acknowledged, its commit page lost).
            if loss[DATA_HEAD].is_some()
                || self.salvaged.to_checkpoint
                || hole.is_some()
                || bad_meta.is_some()
            {
                for &o in &uncommitted {
                    self.salvaged.left_out(o);
                }
                if uncommitted_more {
                    self.salvaged.left_out_unnamed();
                }
            }
        }

        // The data head's last accepted commit page may be torn: read it once, hold it
        // aside.
        let mut suspect: Option<(PageAddr, Backpointer)> = None;
        if let (Some((page, bp)), Some(lc)) =
            (bound[DATA_HEAD].last_acc, bound[DATA_HEAD].last_commit)
        {
            if bp.seq == lc {
                if self.read_suspect(page, &bp)? {
                    suspect = Some((page, bp));
                } else {
                    // Torn by the cut, or lost: no read tells which. Taken as torn; a
                    // salvage reports it and names what it leaves out.
                    bound[DATA_HEAD].last_commit = bound[DATA_HEAD].prev_commit;
                    out.unread_commit = Some((page, bp));
                    if salvage {
                        self.salvaged.unreadable(page);
                        self.salvaged.left_out(bp.owner);
                    }
                }
            }
        }
        out.fresh = fresh;
        out.next_seq = next_seq;
        out.replayed_logs = replayed_logs;
        out.log_again = log_again;
        out.log_blocks = log_blocks;
        out.cold_blocks = cold_blocks;
        out.last_cold = last_cold;
        out.cold_cut = cold_cut;
        out.log_suspect = log_suspect;
        out.suspect_last = suspect.is_some_and(|(p, _)| last_data == Some(p)) && !after_last_data;
        out.suspect = suspect;
        out.loss = loss;
        Ok(())
    }

    /// Whether the first good window block after walk entry `wi` was started after the
    /// checkpoint (its first page holds a page that `stale` does not call older).
    fn next_window_block_started(
        &mut self,
        walk: &Walk,
        wi: usize,
        stale: &impl Fn(&Backpointer) -> bool,
    ) -> Result<bool, FaultOf<F>> {
        for (b, _) in walk.iter().skip(wi + 1) {
            if self.dev.table().get(b).state() == BlockState::Bad {
                continue;
            }
            return Ok(match self.dev.scan_read(self.dev.geo().page(b, 0))? {
                Scan::Bp(bp) => !stale(&bp),
                Scan::Erased | Scan::Garbage => false,
            });
        }
        Ok(false)
    }

    /// Whether a page the scan took for a torn tail reads now (see `Oftl::recover`).
    /// A page that stays unreadable is what a cut leaves, or media loss at a head's
    /// end, which no read can tell apart.
    fn unread_reads_now(&mut self, sc: &Scanned) -> Result<bool, FaultOf<F>> {
        for &page in sc.unread.pages() {
            // Erased now counts too: a run of read errors also hides the erased pages
            // after a head's last page (an independent review: they filled the list and
            // read erased afterwards, while the pages they were remembered instead of
            // were the data head's).
            let now = match self.dev.scan_read(page)? {
                Scan::Bp(bp) if bp.kind == PageKind::Log => self.read_log_page(page)? != 0,
                Scan::Bp(_) | Scan::Erased => true,
                Scan::Garbage => {
                    self.log_page_behind(page)?.is_some()
                        || blank(self.scratch.page(), self.dev.pu(), self.blank_flips())
                }
            };
            if now {
                return Ok(true);
            }
        }
        if let Some((page, bp)) = sc.unread_commit {
            return self.read_suspect(page, &bp);
        }
        Ok(false)
    }

    /// Step 2: heads continue past every number seen, in blocks the checkpoint calls
    /// free.
    #[inline(never)]
    fn open_recovery_window(&mut self, sc: &Scanned) -> Result<(), FaultOf<F>> {
        self.dev.table_mut().clear_window();
        self.dev.heads_mut().restart(&sc.next_seq);
        // A store about to turn read-only for its grown bad blocks moves only the
        // suspect pages (see `relocate_suspects`): one block (more are taken when it is
        // not enough) leaves the rest of the pool to the cache write-backs and the
        // closing checkpoint.
        let blocks = if self.too_few_good_blocks() {
            1
        } else {
            self.dev.sb().window_blocks as usize
        };
        self.dev.grow_window(blocks);
        if self.dev.table().window().is_empty() {
            return Err(Fault::NoSpace);
        }
        Ok(())
    }

    /// Step 3: pass 2, the replay. Returns the last walk block each head programmed.
    #[inline(never)]
    fn replay_window(&mut self, sc: &Scanned) -> Result<[Option<BlockAddr>; HEADS], FaultOf<F>> {
        let ppb = self.dev.ppb();
        let spp = self.sectors_per_page();
        let salvage = self.session.salvaging();
        let suspect = sc.suspect;
        let walk = &sc.walk;
        let bound = &sc.bound;
        // Pass 2a: metadata and data (creations, trims and deletes first), the data
        // head in sequence order with the cold copies merged in by watermark.
        let mut track = sc.fresh;
        let mut replayed = 0u32;
        let mut last_block: [Option<BlockAddr>; HEADS] = [None; HEADS];
        last_block[COLD_HEAD] = sc.last_cold;
        let mut cold = ColdCursor {
            wi: 0,
            i: walk.get(0).map_or(0, |w| w.1),
            blocks: sc.cold_blocks,
            cut: sc.cold_cut,
            start: sc.fresh[DATA_HEAD].start,
            peeked: None,
        };
        // One past the last data-head page whose effect is in the replayed state: cold
        // copies with watermarks up to it apply, later ones reflect pages recovery
        // drops and are dropped too.
        let mut limit = sc.fresh[DATA_HEAD].start;
        let mut frozen = false;
        // A page is applied once the next accepted page shows it was not retried.
        let mut pending: Option<(PageAddr, Backpointer)> = None;
        let mut unread: Option<PageAddr> = None;
        for (wi, (b, start)) in walk.iter().enumerate() {
            // Blocks with log pages or cold copies hold nothing else (a block holds the
            // pages of one head between erases).
            if self.dev.table().get(b).state() == BlockState::Bad
                || (sc.cold_blocks | sc.log_blocks) & (1 << wi) != 0
            {
                continue;
            }
            for i in start..ppb {
                let page = self.dev.geo().page(b, i);
                let bp = match suspect {
                    Some((sp, sbp)) if sp == page => sbp,
                    _ => match self.dev.scan_read(page)? {
                        Scan::Bp(bp) => bp,
                        Scan::Garbage => {
                            unread.get_or_insert(page);
                            continue;
                        }
                        Scan::Erased => continue,
                    },
                };
                if head_of(bp.kind) != Some(DATA_HEAD) || bp.relocated {
                    continue;
                }
                let step = track[DATA_HEAD].step(bp.seq);
                match step {
                    Step::Skip => continue,
                    Step::Gap { missing } if !salvage || bound[DATA_HEAD].replays(missing) => {
                        // Pass 1 saw this stretch whole: a page no longer reads.
                        return Err(Fault::MediaLoss(unread.unwrap_or(page)));
                    }
                    _ => {}
                }
                unread = None;
                if step != Step::Repeat {
                    if let Some((pp, pbp)) = pending.take() {
                        replayed += self.apply_replayed(pp, &pbp, &bound[DATA_HEAD], sc)?;
                    }
                    // Copies made before this page was programmed come first.
                    replayed += self.replay_cold(walk, &mut cold, limit)?;
                    if !frozen && bp.seq == limit && bound[DATA_HEAD].replays(bp.seq) {
                        limit = bp.seq.wrapping_add(1);
                    } else {
                        frozen = true;
                    }
                }
                pending = Some((page, bp));
                last_block[DATA_HEAD] = Some(b);
            }
        }
        if let Some((pp, pbp)) = pending.take() {
            replayed += self.apply_replayed(pp, &pbp, &bound[DATA_HEAD], sc)?;
        }
        if let Some(lc) = bound[DATA_HEAD].last_commit {
            if !seq_cmp(track[DATA_HEAD].expected, lc).is_gt() {
                // The replay ended before pass 1's bound: its last pages no longer read.
                let page = bound[DATA_HEAD].last_acc.map_or(PageAddr(0), |(p, _)| p);
                return Err(Fault::MediaLoss(unread.unwrap_or(page)));
            }
        }
        replayed += self.replay_cold(walk, &mut cold, limit)?;

        // Pass 2b: if pass 1 met log sectors of a stream it did not know (created in the
        // window), apply all log sectors again now that the metadata is in, whole
        // groups in sequence order (applying them again in order is harmless: the last
        // copy of each logical page wins). Blocks with log pages are the log head's:
        // their pages are read whole at once.
        let pu = self.dev.pu();
        let mut prev_log: Option<PageAddr> = None;
        if !sc.log_again {
            replayed += sc.replayed_logs;
            self.dev.stats_mut().recovery_replayed_pages = replayed;
            last_block[LOG_HEAD] = sc.bound[LOG_HEAD]
                .last_acc
                .map(|(p, _)| self.dev.block_of(p));
            return Ok(last_block);
        }
        for (wi, (b, start)) in walk.iter().enumerate() {
            if sc.log_blocks & (1 << wi) == 0 || self.dev.table().get(b).state() == BlockState::Bad
            {
                continue;
            }
            for i in start..ppb {
                let page = self.dev.geo().page(b, i);
                let superseded = sc.superseded.contains(&page);
                let mask = if sc.log_suspect == Some(page) {
                    self.scratch
                        .page_mut()
                        .copy_from_slice(self.log_tail.image());
                    complete_slots(self.scratch.page(), pu, spp)
                } else {
                    self.read_log_page(page)?
                };
                for slot in slots(mask) {
                    let Some(t) = sector_at(self.scratch.page(), pu, slot) else {
                        continue;
                    };
                    match track[LOG_HEAD].step(t.seq) {
                        Step::Skip => continue,
                        Step::Gap { missing } if !salvage || bound[LOG_HEAD].replays(missing) => {
                            return Err(Fault::MediaLoss(prev_log.unwrap_or(page)));
                        }
                        _ => {}
                    }
                    prev_log = Some(page);
                    last_block[LOG_HEAD] = Some(b);
                    if superseded {
                        continue;
                    }
                    if bound[LOG_HEAD].replays(t.seq) {
                        replayed += 1;
                        self.apply_log(&t, page, slot)?;
                    } else if sc.loss[LOG_HEAD].is_some() || self.salvaged.to_checkpoint {
                        self.salvaged.left_out(t.stream);
                    }
                }
            }
        }
        if let Some(lc) = bound[LOG_HEAD].last_commit {
            if !seq_cmp(track[LOG_HEAD].expected, lc).is_gt() {
                let page = bound[LOG_HEAD].last_acc.map_or(PageAddr(0), |(p, _)| p);
                return Err(Fault::MediaLoss(page));
            }
        }
        self.dev.stats_mut().recovery_replayed_pages = replayed;
        Ok(last_block)
    }

    /// Applies one replayed data-head page (if it is within the replay's bound and not
    /// part of a transaction a salvage mount leaves out); returns how many it applied.
    fn apply_replayed(
        &mut self,
        page: PageAddr,
        bp: &Backpointer,
        bound: &Bound,
        sc: &Scanned,
    ) -> Result<u32, FaultOf<F>> {
        if !bound.replays(bp.seq) {
            // Named when a page did not read (the dropped tail may have been
            // acknowledged) or a loss stopped the replay.
            if self.session.salvaging()
                && (sc.loss[DATA_HEAD].is_some()
                    || self.salvaged.to_checkpoint
                    || !self.salvaged.unreadable_pages().is_empty())
            {
                self.salvaged.left_out(bp.owner);
            }
            return Ok(0);
        }
        match bp.kind {
            PageKind::Data => self.apply_data(bp, page)?,
            PageKind::Meta => self.apply_replayed_meta(page, bp, sc)?,
            _ => return Ok(0),
        }
        Ok(1)
    }

    /// Applies a replayed metadata page (out of line: its record is off the data
    /// pages' path, which the replay's deepest stack runs through).
    #[inline(never)]
    fn apply_replayed_meta(
        &mut self,
        page: PageAddr,
        bp: &Backpointer,
        sc: &Scanned,
    ) -> Result<(), FaultOf<F>> {
        let rec = if sc.suspect.is_some_and(|(sp, _)| sp == page) {
            let pu = self.dev.pu();
            MetaRecord::parse(&self.scratch.held(page).ok_or(Fault::Internal)?[..pu])?
        } else {
            // (A salvage mount's pass 1 read it whole: failing now is loss too.)
            match self.dev.read_meta(page, self.scratch.page_mut()) {
                Ok(rec) => rec,
                Err(Fault::Flash(e))
                    if nand_hal::Error::kind(&e) == nand_hal::ErrorKind::Uncorrectable =>
                {
                    return Err(Fault::MediaLoss(page));
                }
                // Its backpointer read, its record does not: lost content.
                Err(Fault::Corrupted) => return Err(Fault::MediaLoss(page)),
                Err(e) => return Err(e),
            }
        };
        if rec.id != bp.owner {
            return Err(Fault::Corrupted);
        }
        self.apply_meta(&rec, page)
    }

    /// Before step 5: moves the replayed heads' next numbers past every number an
    /// earlier, interrupted attempt at this same recovery may have written.
    ///
    /// Every attempt starts from the same checkpoint and scan, so from the same numbers;
    /// an attempt cut short leaves its pages (relocations) in blocks the checkpoint
    /// calls free, and a later attempt need not rewrite all of them (a block that went
    /// bad in between sends it elsewhere). Such a block may join a later window unerased:
    /// its pages must carry numbers below that window's start, or the next recovery
    /// would take them for new. No attempt programs more pages than a full window and
    /// the recovery reserve hold, so the heads skip that many numbers.
    fn skip_attempt_numbers(&mut self, sc: &Scanned) {
        let pages = (MAX_WINDOW as u32 + self.recovery_extra_blocks() + 1) * self.dev.ppb();
        let spp = self.sectors_per_page();
        for (h, per_page) in [(DATA_HEAD, 1), (LOG_HEAD, spp), (COLD_HEAD, 1)] {
            let past = sc.next_seq[h].wrapping_add(pages.saturating_mul(per_page));
            self.dev.heads_mut().move_past(h, past);
        }
    }

    /// Step 4: relocates what lives in the blocks that were being programmed: the
    /// suspect pages first, from RAM, then every other valid page of those blocks (the
    /// log head's block goes to background collection instead when the pool has room).
    /// Returns whether the window ran out before the blocks were moved (the rest is
    /// left to collection and the store mounts read-only).
    #[inline(never)]
    fn relocate_suspects(
        &mut self,
        sc: &Scanned,
        last_block: [Option<BlockAddr>; HEADS],
    ) -> Result<bool, FaultOf<F>> {
        if let Some((sp, sbp)) = sc.suspect {
            if self.is_valid(sp, &sbp)? {
                self.relocate(sp, &sbp, true, DATA_HEAD)?;
            }
        }
        // The held suspect page is done with (relocation reads the rest from flash).
        self.scratch.release();
        if let Some(lp) = sc.log_suspect {
            self.scratch
                .aside_mut()?
                .copy_from_slice(self.log_tail.image());
            self.relocate_log(lp, true)?;
        }
        // The rest of those blocks was programmed whole before the cut (an interrupted
        // program leaves unstable bits only in what it was programming: section 3 of
        // the shared design; the simulator's F4 does the same), and is moved so the
        // blocks are erased before anything relies on them again. The data head's block
        // is moved now when the cut left pages after its last commit there (a dropped
        // tail, a torn program): its acknowledged pages then carry numbers above the
        // dropped tail's, which a full-scan rebuild relies on. Otherwise, and for the
        // cold head's block where a normal recovery drops the copies, the block is left
        // to background collection (first in its bounded steps) while the pool has two
        // blocks above its floor (on a nearly full device the first writes need the
        // blocks free; `cut_block_may_wait`). The log head's block, whose sectors carry
        // their own numbers, is left when the pool has a window's worth to spare: the
        // mount no longer copies up to a block of log pages (the `files` example's mount
        // after a cut, nearly all log: 104 -> 86 ms).
        let reclaimable = self.reclaimable_blocks();
        let floor = self.pool_floor(Room::Grow);
        let defer_log = reclaimable >= floor + self.dev.sb().window_blocks as u32;
        let defer = reclaimable >= floor + CUT_BLOCK_SLACK;
        // A store about to turn read-only for its grown bad blocks moves nothing either:
        // the erases the copies need are what a worn part fails, and the closing
        // checkpoint needs the blocks more (without it every later mount replays again,
        // in RAM, with cache write-backs into blocks it must erase).
        let mut short = self.too_few_good_blocks();
        for (h, lb) in last_block.iter().enumerate() {
            let Some(b) = *lb else { continue };
            if h == INDEX_HEAD {
                continue;
            }
            let wait = if h == LOG_HEAD {
                defer_log
            } else {
                defer && self.cut_block_may_wait(sc, h, b)
            };
            if short || wait {
                self.leave_cut_block(b);
                continue;
            }
            match self.relocate_cut_block(sc, h, b) {
                Ok(()) => {}
                // A worn part whose grown bad blocks ate the recovery reserve: the window
                // has no room for the copies. What was not moved stays valid where it is
                // (programmed whole before the cut) and goes to collection; the closing
                // checkpoint still records the replay, and the store mounts read-only
                // (the wear-out soak found such parts unmountable: the read-only replay
                // that followed had no blocks left for its cache write-backs either).
                Err(Fault::Exhausted | Fault::NoSpace) => {
                    short = true;
                    self.leave_cut_block(b);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(short)
    }

    /// Whether the block head `h` was programming at the cut may be left to collection
    /// (when the pool has room to spare) instead of moved now:
    ///
    /// - the log head's: its sectors carry their own numbers;
    /// - the data head's, in a normal recovery, when its last programmed page is the
    ///   last commit (`Scanned::suspect_last`; moved from RAM before): every page there
    ///   is committed, so no dropped tail stays on flash for a full-scan rebuild to take
    ///   for a committed transaction, and no torn page is left to read well later;
    /// - the cold head's, where a normal recovery drops the copies: its valid pages were
    ///   all copied before the checkpoint, and the copies since are dropped whatever
    ///   they read like.
    ///
    /// Moving them cost a mount up to a block of copies and a write-back of the index
    /// pages of every owner there: with random writes spread over 25 objects at 50 %
    /// of capacity, 110 pages and 143 write-backs, 119.9 ms (review s42's probe).
    fn cut_block_may_wait(&self, sc: &Scanned, h: usize, b: BlockAddr) -> bool {
        let normal = !self.session.salvaging();
        match h {
            DATA_HEAD => {
                normal
                    && sc.suspect_last
                    && sc
                        .suspect
                        .is_some_and(|(p, _)| self.dev.geo().block_of(p) == b)
            }
            COLD_HEAD => normal && self.recovery_drops_copies(),
            _ => false,
        }
    }

    /// Leaves `b`, a block a head was programming at the cut, to collection with its
    /// pages valid where they are (programmed whole before the cut).
    fn leave_cut_block(&mut self, b: BlockAddr) {
        let erases = self.dev.table().get(b).erases();
        self.gc.cut_block(b, erases);
    }

    /// Moves every valid page of `b`, the block head `h` was programming at the cut,
    /// except the suspect pages (moved from RAM before): a cold block's pages stay
    /// cold, the data head's go back to it.
    fn relocate_cut_block(
        &mut self,
        sc: &Scanned,
        h: usize,
        b: BlockAddr,
    ) -> Result<(), FaultOf<F>> {
        let to = if h == COLD_HEAD { COLD_HEAD } else { DATA_HEAD };
        let ppb = self.dev.ppb();
        // The pages go owner by owner (within runs of `RELOCATE_RUN` pages), so an
        // object's index pages are loaded and written back once for all its pages here
        // instead of once a page: with random writes spread over 25 objects the
        // block's 64 pages went to 25 objects, and each page cost a leaf and a root
        // write-back through the 7-page cache (an independent review, s42: mounts after
        // a cut of up to 106 ms at 30 % of capacity). Each page's tag is read twice
        // (once to sort, once to move), which costs less than the write-backs it saves.
        let mut first = 0;
        while first < ppb {
            let end = (first + RELOCATE_RUN as u32).min(ppb);
            let mut keys = [0u32; RELOCATE_RUN];
            let mut n = 0;
            for i in first..end {
                let page = self.dev.geo().page(b, i);
                if sc.suspect.is_some_and(|(sp, _)| sp == page) || sc.log_suspect == Some(page) {
                    continue;
                }
                match self.dev.scan_read(page)? {
                    Scan::Bp(bp) if bp.kind == PageKind::Log => {
                        self.relocate_log(page, false)?;
                    }
                    Scan::Bp(bp) => {
                        keys[n] = (bp.owner << 8) | (i - first);
                        n += 1;
                    }
                    // A log page with a failed sector still has good ones.
                    Scan::Garbage => {
                        self.relocate_log(page, false)?;
                    }
                    Scan::Erased => {}
                }
            }
            keys[..n].sort_unstable();
            for &k in &keys[..n] {
                let page = self.dev.geo().page(b, first + (k & 0xFF));
                // Read as in the first pass: programmed whole before the cut.
                if let Scan::Bp(bp) = self.dev.scan_read(page)? {
                    if bp.kind != PageKind::Log && self.is_valid(page, &bp)? {
                        self.relocate(page, &bp, false, to)?;
                    }
                }
            }
            first = end;
        }
        Ok(())
    }

    /// Applies the cold copies after `cold`'s position whose watermarks are at most
    /// `limit`, in walk order; returns how many. A copy whose metadata record does not
    /// read back is skipped: its original is intact (see the module docs). Only a
    /// salvage or a repair applies copies; a normal recovery drops them all (see the
    /// module docs).
    fn replay_cold(
        &mut self,
        walk: &Walk,
        cold: &mut ColdCursor,
        limit: u32,
    ) -> Result<u32, FaultOf<F>> {
        if !self.session.salvaging() && self.recovery_drops_copies() {
            return Ok(0);
        }
        let mut n = 0;
        while let Some((page, bp)) = self.cold_peek(walk, cold)? {
            if seq_cmp(bp.seq, limit).is_gt() {
                break;
            }
            cold.i += 1;
            cold.peeked = None;
            match bp.kind {
                PageKind::Data => self.apply_data(&bp, page)?,
                PageKind::Meta => match self.dev.read_meta(page, self.scratch.page_mut()) {
                    Ok(rec) if rec.id == bp.owner => self.apply_meta(&rec, page)?,
                    Ok(_) | Err(Fault::Corrupted) => continue,
                    Err(Fault::Flash(e))
                        if nand_hal::Error::kind(&e) == nand_hal::ErrorKind::Uncorrectable =>
                    {
                        continue
                    }
                    Err(e) => return Err(e),
                },
                _ => continue,
            }
            n += 1;
        }
        Ok(n)
    }

    /// The next cold copy at or after `cold`'s position and before its cut, without
    /// moving past it (read once, then remembered).
    fn cold_peek(
        &mut self,
        walk: &Walk,
        cold: &mut ColdCursor,
    ) -> Result<Option<(PageAddr, Backpointer)>, FaultOf<F>> {
        if cold.peeked.is_some() {
            return Ok(cold.peeked);
        }
        let ppb = self.dev.ppb();
        while cold.wi < walk.len() {
            let Some((b, _)) = walk.get(cold.wi) else {
                break;
            };
            let usable = cold.blocks & (1 << cold.wi) != 0
                && self.dev.table().get(b).state() != BlockState::Bad;
            while usable && cold.i < ppb {
                if (cold.wi, cold.i) >= cold.cut {
                    return Ok(None);
                }
                let page = self.dev.geo().page(b, cold.i);
                if let Scan::Bp(bp) = self.dev.scan_read(page)? {
                    if is_cold_copy(&bp, cold.start) {
                        cold.peeked = Some((page, bp));
                        return Ok(cold.peeked);
                    }
                }
                cold.i += 1;
            }
            cold.wi += 1;
            cold.i = walk.get(cold.wi).map_or(0, |w| w.1);
        }
        Ok(None)
    }

    /// Salvage: whether metadata page `page`'s record reads (into the scratch page).
    fn meta_reads(&mut self, page: PageAddr) -> Result<bool, FaultOf<F>> {
        match self.dev.read_meta(page, self.scratch.page_mut()) {
            Ok(_) => Ok(true),
            Err(Fault::Corrupted) => Ok(false),
            Err(Fault::Flash(e))
                if nand_hal::Error::kind(&e) == nand_hal::ErrorKind::Uncorrectable =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// For a page whose spare-area scan failed: whether it is a log page with sectors
    /// of whole groups (read into the scratch page), as the backpointer of its first one.
    pub(crate) fn log_page_behind(
        &mut self,
        page: PageAddr,
    ) -> Result<Option<Backpointer>, FaultOf<F>> {
        let mask = self.read_log_page(page)?;
        if mask == 0 {
            return Ok(None);
        }
        let pu = self.dev.pu();
        Ok(sector_at(self.scratch.page(), pu, mask.trailing_zeros()).map(|t| t.backpointer()))
    }

    /// Reads the suspect commit page fully into the aside scratch page and holds it
    /// there; `false` (nothing held) if it does not read back as what its backpointer
    /// claims.
    fn read_suspect(&mut self, page: PageAddr, bp: &Backpointer) -> Result<bool, FaultOf<F>> {
        self.scratch.release();
        let aside = self.scratch.aside_mut()?;
        let r = match bp.kind {
            PageKind::Data => {
                let payload = self.dev.payload() as usize;
                self.dev
                    .read_payload(
                        page,
                        0,
                        &mut aside[..payload],
                        Some((PageKind::Data, bp.owner, bp.lpn)),
                    )
                    .map(|_| ())
            }
            PageKind::Meta => self.dev.read_meta(page, aside).map(|_| ()),
            _ => Ok(()),
        };
        match r {
            Ok(()) => {
                self.scratch.hold(page);
                Ok(true)
            }
            Err(Fault::Corrupted) => Ok(false),
            Err(Fault::Flash(e))
                if nand_hal::Error::kind(&e) == nand_hal::ErrorKind::Uncorrectable =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }
}

/// The slots set in `mask`, ascending.
fn slots(mask: u32) -> impl Iterator<Item = u32> {
    (0..32).filter(move |s| mask & (1 << s) != 0)
}

#[cfg(test)]
mod tests {
    use nand_hal::sim::{profile, CutKind, FaultPlan, HeapStorage, SimNand};

    use super::*;
    use crate::{Config, ObjKind};

    type Sim = SimNand<HeapStorage>;
    type Fs<'a> = Oftl<&'a mut Sim, 2048, 64, 4, 2>;

    #[test]
    fn track_tells_new_repeated_skipped_and_missing_numbers() {
        let mut t = Track {
            start: 10,
            expected: 10,
            span: 1,
        };
        assert_eq!(t.step(9), Step::Skip, "before the checkpoint");
        assert_eq!(t.step(10), Step::New);
        assert_eq!(t.step(10), Step::Repeat, "a failed program's retry");
        assert_eq!(t.step(11), Step::New);
        assert_eq!(t.step(14), Step::Gap { missing: 12 });
        assert_eq!(t.step(15), Step::New, "counting goes on after the gap");
        assert_eq!(t.step(12), Step::Skip, "older than the recent span");
        // Across the wrap of the 32-bit numbers.
        let mut w = Track {
            start: u32::MAX,
            expected: u32::MAX,
            span: 4,
        };
        assert_eq!(w.step(u32::MAX), Step::New);
        assert_eq!(w.step(0), Step::New);
        assert_eq!(w.step(u32::MAX), Step::Repeat);
        assert_eq!(w.step(u32::MAX - 1), Step::Skip);
    }

    #[test]
    fn bound_replays_up_to_the_last_commit() {
        let bp = |seq, commit| Backpointer {
            kind: PageKind::Data,
            owner: 1,
            lpn: 0,
            len: 2048,
            seq,
            commit,
            relocated: false,
            tx_delta: 0,
        };
        let mut b = Bound::default();
        assert!(!b.replays(1), "nothing committed: nothing replays");
        b.accept(PageAddr(100), bp(1, false));
        b.accept(PageAddr(101), bp(2, true));
        b.accept(PageAddr(102), bp(3, false));
        assert_eq!((b.last_commit, b.prev_commit), (Some(2), None));
        assert!(b.replays(1) && b.replays(2) && !b.replays(3));
        b.accept(PageAddr(103), bp(4, true));
        assert_eq!((b.last_commit, b.prev_commit), (Some(4), Some(2)));
        // A retry of the commit page does not move the previous commit.
        b.accept(PageAddr(104), bp(4, true));
        assert_eq!((b.last_commit, b.prev_commit), (Some(4), Some(2)));
        assert_eq!(b.last_acc.map(|(p, _)| p), Some(PageAddr(104)));
    }

    #[test]
    fn cold_copies_and_heads_by_kind() {
        let mut bp = Backpointer {
            kind: PageKind::Meta,
            owner: 1,
            lpn: 0,
            len: 2048,
            seq: 50,
            commit: true,
            relocated: true,
            tx_delta: 0,
        };
        assert!(is_cold_copy(&bp, 50) && !is_cold_copy(&bp, 51));
        bp.relocated = false;
        assert!(!is_cold_copy(&bp, 0));
        assert_eq!(head_of(PageKind::Data), Some(DATA_HEAD));
        assert_eq!(head_of(PageKind::Log), Some(LOG_HEAD));
        assert_eq!(head_of(PageKind::Index), None);
        assert_eq!(head_of(PageKind::Table), None);
    }

    /// Step 1 alone, on a store cut in the middle of a three-page write that followed
    /// five committed ones: the scan bounds the data head's replay at the fifth commit.
    #[test]
    fn the_scan_bounds_the_replay_at_the_last_commit() {
        let mut sim = Sim::heap(profile::TINY, FaultPlan::seeded(3));
        let cfg = Config {
            window_blocks: 8,
            format_id: 1,
            ..Default::default()
        };
        let mut fs = Fs::formatted(&mut sim, cfg).unwrap();
        let o = fs.create(ObjKind::Object).unwrap();
        fs.sync().unwrap();
        let start = fs.dev.heads().next_seq(DATA_HEAD);
        for i in 0..5u64 {
            fs.write(o, i * 2048, &[i as u8; 2048]).unwrap();
            fs.flush(o).unwrap();
        }
        // The third page of the next write would carry the commit: cut before it.
        fs.flash_mut()
            .arm(FaultPlan::seeded(3).with_cut(3, CutKind::Clean));
        assert!(fs.write(o, 5 * 2048, &[9; 3 * 2048]).is_err());
        drop(fs);
        sim.power_on();
        sim.disarm();
        let mut fs = Fs::new(&mut sim, crate::Config::new(), crate::Greedy::DEFAULT);
        let sb = fs.checked_superblock().unwrap();
        fs.reset_state(sb);
        fs.session.opened();
        assert!(
            !fs.load_newest_checkpoint().unwrap(),
            "not a clean checkpoint"
        );
        let mut sc = super::Scanned::EMPTY;
        fs.scan_window(&mut sc).unwrap();
        let b = sc.bound[DATA_HEAD];
        assert_eq!(
            b.last_commit,
            Some(start.wrapping_add(4)),
            "the fifth write's page"
        );
        let (_, last) = b.last_acc.unwrap();
        assert_eq!(
            last.seq,
            start.wrapping_add(6),
            "two pages of the cut write seen"
        );
        assert!(!b.replays(last.seq));
        assert_eq!(sc.next_seq[DATA_HEAD], start.wrapping_add(7));
        assert!(sc.loss.iter().all(Option::is_none), "no media loss");
    }
}
