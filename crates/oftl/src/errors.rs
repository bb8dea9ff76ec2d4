//! Per-operation error enums, generic over the flash error `E`.
//!
//! `Corrupted` (on-flash content that fails its checks) is always kept apart from
//! `Flash(E)` (the device reported an error).

use core::fmt;

/// On-flash content failed a structural or CRC check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Corrupted;

impl fmt::Display for Corrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("on-flash structure corrupted")
    }
}

/// What in the superblock does not match the device or the build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Mismatch {
    /// Format version unknown to this build.
    Version,
    /// Page, spare, block or die geometry differs.
    Geometry,
    /// Program unit, NOP, ECC or OOB layout differs.
    Capabilities,
    /// The image needs more RAM tables (blocks, objects, page buffer) than this build has.
    Capacity,
}

/// Why [`crate::Oftl::format`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum FormatError<E> {
    /// The device failed.
    Flash(E),
    /// The device or the configuration cannot hold an OFTL with this build's tables.
    Unsupported(Mismatch),
    /// Too few good blocks (superblocks, checkpoint blocks, window and spare).
    NotEnoughGoodBlocks,
    /// [`crate::Config::window_blocks`] is too small for this build's index cache on
    /// this part: the window could not hold the per-operation reserve plus a whole GC
    /// victim, so collection would fail or never run. `needed_blocks` is
    /// [`crate::Oftl::min_window_blocks`] (it may exceed [`crate::MAX_WINDOW`], in which
    /// case a smaller `CACHE` is needed).
    WindowTooSmall {
        /// The smallest window that works.
        needed_blocks: u32,
        /// The window asked for.
        given_blocks: u16,
    },
}

/// Why mounting failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum MountError<E> {
    /// The device failed.
    Flash(E),
    /// No superblock was found: the device is not formatted.
    NotFormatted,
    /// The superblock describes a different device or format.
    Mismatch(Mismatch),
    /// Superblock or checkpoint content is damaged beyond recovery (after the mount
    /// loaded again, in case the reads only failed for a while). Never a reason to
    /// format: the data may be recoverable with a repair tool (`Damaged::Rebuild`).
    Corrupted,
    /// Recovery needed more free blocks than the device has.
    NoSpace,
    /// A page that later pages prove was written after the last checkpoint (or a newer
    /// checkpoint whose use a marker proves, or checkpoint pages that may be such a
    /// checkpoint and its marker) stays unreadable after retries, and what it held
    /// cannot be told: mounting normally would pass an older state off as current. A
    /// later mount may succeed if the read errors were transient;
    /// a salvage mount ([`crate::Damaged::Salvage`]) mounts read-only past it, so the intact
    /// objects can be copied out. `page` is the device page number.
    MediaLoss {
        /// The unreadable page.
        page: u32,
    },
    /// The image's updating window is too small for this build's index cache (the
    /// image was formatted by a build with a smaller `CACHE`, or by one that did not
    /// check): see [`FormatError::WindowTooSmall`]. Mount with a build whose
    /// [`crate::Oftl::min_window_blocks`] is at most `given_blocks`.
    WindowTooSmall {
        /// The smallest window this build works with.
        needed_blocks: u32,
        /// The image's window.
        given_blocks: u16,
    },
    /// An internal invariant failed: a bug in this crate, to report (never damaged
    /// flash, which is `Corrupted`). The handle may be poisoned; remount.
    Internal,
}

/// Why an operation that changes state failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum WriteError<E> {
    /// The device failed. The in-RAM state may be ahead of flash: the handle is
    /// poisoned and must be remounted (recovery restores a consistent state).
    Flash(E),
    /// On-flash content needed by the operation is damaged.
    Corrupted,
    /// No such object.
    NotFound,
    /// Not enough free space.
    NoSpace,
    /// No object id is free: the table holds as many live objects as its bound allows
    /// (see [`crate::Oftl::max_object_id`]; ids of deleted objects are reused), or a
    /// transaction creates more than [`crate::ID_RUN`] objects and one of its ids is
    /// taken.
    TooManyObjects,
    /// The write or transaction is larger than one updating window can hold, or an
    /// offset is past the largest object size.
    TooLarge,
    /// A previous failure left the handle inconsistent; remount.
    Poisoned,
    /// The operation does not apply to this kind of object (byte writes to a log
    /// stream, appends to an object).
    WrongKind,
    /// Room ran out part-way through an operation (the updating window, the cache's
    /// in-flight list): RAM may be ahead of flash, so the handle is poisoned; remount
    /// (recovery restores the last consistent state). Every operation keeps room for
    /// one failed program or erase on its way (the window budget reserves a block for
    /// it); two or more failures inside one operation can still run it out. Without
    /// such failures, seeing it is a bug to report.
    Exhausted,
    /// The store is read-only: mounted by a salvage mount ([`crate::Damaged::Salvage`]), or
    /// too few good blocks are left to write safely (see [`crate::Oftl::health`]).
    /// Nothing changed; reads still work.
    ReadOnly,
    /// An internal invariant failed: a bug in this crate, to report (never damaged
    /// flash, which is `Corrupted`). The handle may be poisoned; remount.
    Internal,
    /// This build keeps no log tail page (`Oftl`'s `LOG` is 0): log streams cannot be
    /// created or appended to. Nothing changed.
    NoLogStreams,
}

/// Why a read failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ReadError<E> {
    /// The device failed (including uncorrectable ECC errors).
    Flash(E),
    /// A page did not carry the expected backpointer.
    Corrupted,
    /// No such object.
    NotFound,
    /// A previous failure left the handle inconsistent; remount.
    Poisoned,
    /// The operation does not apply to this kind of object.
    WrongKind,
    /// Writing cached object-table or index pages back found no room part-way: the
    /// handle is poisoned (remount). See [`WriteError::Exhausted`].
    Exhausted,
    /// The buffer cannot hold the log record; the payload is the record's length.
    BufferTooSmall(usize),
    /// An internal invariant failed: a bug in this crate, to report (never damaged
    /// flash, which is `Corrupted`). The handle may be poisoned; remount.
    Internal,
}

/// Internal error carried through the code paths and narrowed per operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault<E> {
    Flash(E),
    Corrupted,
    NotFound,
    NoSpace,
    /// Room ran out in the middle of an operation (the updating window, the cache's
    /// load or in-flight bounds): RAM may be ahead of flash, so the handle is poisoned.
    Exhausted,
    /// Writes are refused: read-only (salvage) mount or too few good blocks.
    ReadOnly,
    /// Recovery met an unreadable page it cannot go past (see [`MountError::MediaLoss`]).
    MediaLoss(nand_hal::PageAddr),
    TooManyObjects,
    TooLarge,
    Poisoned,
    WrongKind,
    BufferTooSmall(usize),
    /// A rule of the code itself was broken (a bug): the store stops rather than guess.
    Internal,
    /// A log stream operation in a build without a log tail page.
    NoLogStreams,
}

impl<E> From<Corrupted> for Fault<E> {
    fn from(_: Corrupted) -> Self {
        Fault::Corrupted
    }
}

impl<E> From<crate::scratch::Clash> for Fault<E> {
    fn from(_: crate::scratch::Clash) -> Self {
        Fault::Internal
    }
}

impl<E> From<Fault<E>> for WriteError<E> {
    fn from(f: Fault<E>) -> Self {
        match f {
            Fault::Flash(e) => WriteError::Flash(e),
            Fault::Corrupted => WriteError::Corrupted,
            Fault::NotFound => WriteError::NotFound,
            Fault::NoSpace => WriteError::NoSpace,
            Fault::Exhausted => WriteError::Exhausted,
            Fault::ReadOnly => WriteError::ReadOnly,
            Fault::MediaLoss(_) => WriteError::Corrupted,
            Fault::TooManyObjects => WriteError::TooManyObjects,
            Fault::TooLarge => WriteError::TooLarge,
            Fault::Poisoned => WriteError::Poisoned,
            Fault::WrongKind => WriteError::WrongKind,
            Fault::NoLogStreams => WriteError::NoLogStreams,
            // Writes read no log records into callers' buffers.
            Fault::BufferTooSmall(_) | Fault::Internal => WriteError::Internal,
        }
    }
}

impl<E> From<Fault<E>> for ReadError<E> {
    fn from(f: Fault<E>) -> Self {
        match f {
            Fault::Flash(e) => ReadError::Flash(e),
            Fault::NotFound => ReadError::NotFound,
            Fault::Poisoned => ReadError::Poisoned,
            Fault::WrongKind => ReadError::WrongKind,
            Fault::BufferTooSmall(n) => ReadError::BufferTooSmall(n),
            // Reads write only cache pages back; running out of room for that poisons
            // the handle (see `Oftl::fail_read`).
            Fault::NoSpace | Fault::Exhausted => ReadError::Exhausted,
            // The flash content did not match what the index promised.
            Fault::Corrupted | Fault::MediaLoss(_) | Fault::TooLarge => ReadError::Corrupted,
            // Reads never allocate ids or write objects.
            Fault::ReadOnly | Fault::TooManyObjects | Fault::Internal | Fault::NoLogStreams => {
                ReadError::Internal
            }
        }
    }
}

impl<E> From<Fault<E>> for MountError<E> {
    fn from(f: Fault<E>) -> Self {
        match f {
            Fault::Flash(e) => MountError::Flash(e),
            Fault::NoSpace | Fault::Exhausted | Fault::TooLarge | Fault::TooManyObjects => {
                MountError::NoSpace
            }
            Fault::MediaLoss(page) => {
                warn!(
                    "oftl: mount: page {} unreadable after retries (media loss)",
                    page.0
                );
                MountError::MediaLoss { page: page.0 }
            }
            // Replay reaches these only through damaged pages whose checks passed.
            Fault::Corrupted | Fault::NotFound | Fault::WrongKind => MountError::Corrupted,
            // Too few good blocks to write the recovery.
            Fault::ReadOnly => MountError::NoSpace,
            // Recovery would replay log pages, which needs the log tail page.
            Fault::NoLogStreams => MountError::Mismatch(Mismatch::Capacity),
            Fault::Poisoned | Fault::BufferTooSmall(_) | Fault::Internal => MountError::Internal,
        }
    }
}

macro_rules! display_error {
    ($t:ident { $($v:pat => $s:expr),* $(,)? }) => {
        impl<E: fmt::Debug> fmt::Display for $t<E> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $t::Flash(e) => write!(f, "flash error: {e:?}"),
                    $($v => f.write_str($s)),*
                }
            }
        }
        impl<E: fmt::Debug> core::error::Error for $t<E> {}
    };
}

display_error!(FormatError {
    FormatError::Unsupported(_) => "device not supported by this build's configuration",
    FormatError::NotEnoughGoodBlocks => "not enough good blocks",
    FormatError::WindowTooSmall { .. } =>
        "updating window too small for this build's index cache and block size",
});
display_error!(MountError {
    MountError::NotFormatted => "no OFTL superblock found",
    MountError::Mismatch(_) => "superblock does not match this device or build",
    MountError::Corrupted => "superblock or checkpoint corrupted",
    MountError::NoSpace => "not enough free blocks to recover",
    MountError::MediaLoss { .. } =>
        "a page written since the last checkpoint is unreadable; salvage mount to copy out",
    MountError::WindowTooSmall { .. } =>
        "image's updating window too small for this build's index cache",
    MountError::Internal => "internal error (a bug to report); remount",
});
display_error!(WriteError {
    WriteError::Corrupted => "on-flash data corrupted",
    WriteError::NotFound => "no such object",
    WriteError::NoSpace => "no space left",
    WriteError::TooManyObjects => "no object id left",
    WriteError::TooLarge => "write too large",
    WriteError::Poisoned => "handle poisoned by an earlier failure; remount",
    WriteError::WrongKind => "operation does not apply to this kind of object",
    WriteError::Exhausted => "room ran out part-way (a sizing bug); handle poisoned, remount",
    WriteError::ReadOnly => "store is read-only",
    WriteError::Internal => "internal error (a bug to report); remount",
    WriteError::NoLogStreams => "this build keeps no log tail page: no log streams",
});
display_error!(ReadError {
    ReadError::Corrupted => "on-flash data corrupted",
    ReadError::NotFound => "no such object",
    ReadError::Poisoned => "handle poisoned by an earlier failure; remount",
    ReadError::WrongKind => "operation does not apply to this kind of object",
    ReadError::Exhausted => "no room to write cached pages back (a sizing bug); remount",
    ReadError::BufferTooSmall(_) => "buffer too small for the log record",
    ReadError::Internal => "internal error (a bug to report); remount",
});

// By hand: its list of objects is a heapless::Vec (heapless's defmt feature is for
// defmt 0.3).
#[cfg(feature = "defmt")]
impl defmt::Format for crate::SalvageReport {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "SalvageReport {{ unreadable: {}, to_checkpoint: {}, rolled_back: {}, more: {} }}",
            self.unreadable_pages(),
            self.to_checkpoint(),
            self.rolled_back(),
            self.more()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type F = Fault<u8>;

    /// Every internal fault narrows to a named variant of each operation's error; none
    /// that an internal invariant raises reads as damaged flash.
    #[test]
    fn faults_narrow_to_what_they_mean() {
        let all: [F; 14] = [
            Fault::Flash(7),
            Fault::Corrupted,
            Fault::NotFound,
            Fault::NoSpace,
            Fault::Exhausted,
            Fault::ReadOnly,
            Fault::MediaLoss(nand_hal::PageAddr(9)),
            Fault::TooManyObjects,
            Fault::TooLarge,
            Fault::Poisoned,
            Fault::WrongKind,
            Fault::BufferTooSmall(3),
            Fault::Internal,
            Fault::NoLogStreams,
        ];
        let write: [WriteError<u8>; 14] = [
            WriteError::Flash(7),
            WriteError::Corrupted,
            WriteError::NotFound,
            WriteError::NoSpace,
            WriteError::Exhausted,
            WriteError::ReadOnly,
            WriteError::Corrupted,
            WriteError::TooManyObjects,
            WriteError::TooLarge,
            WriteError::Poisoned,
            WriteError::WrongKind,
            WriteError::Internal,
            WriteError::Internal,
            WriteError::NoLogStreams,
        ];
        let read: [ReadError<u8>; 14] = [
            ReadError::Flash(7),
            ReadError::Corrupted,
            ReadError::NotFound,
            ReadError::Exhausted,
            ReadError::Exhausted,
            ReadError::Internal,
            ReadError::Corrupted,
            ReadError::Internal,
            ReadError::Corrupted,
            ReadError::Poisoned,
            ReadError::WrongKind,
            ReadError::BufferTooSmall(3),
            ReadError::Internal,
            ReadError::Internal,
        ];
        let mount: [MountError<u8>; 14] = [
            MountError::Flash(7),
            MountError::Corrupted,
            MountError::Corrupted,
            MountError::NoSpace,
            MountError::NoSpace,
            MountError::NoSpace,
            MountError::MediaLoss { page: 9 },
            MountError::NoSpace,
            MountError::NoSpace,
            MountError::Internal,
            MountError::Corrupted,
            MountError::Internal,
            MountError::Internal,
            MountError::Mismatch(Mismatch::Capacity),
        ];
        for (i, f) in all.iter().enumerate() {
            assert_eq!(WriteError::from(*f), write[i], "{f:?}");
            assert_eq!(ReadError::from(*f), read[i], "{f:?}");
            assert_eq!(MountError::from(*f), mount[i], "{f:?}");
        }
    }

    #[test]
    fn operation_errors_are_copy_and_say_what_they_are() {
        let e: MountError<u8> = MountError::Internal;
        let copy = e;
        assert_eq!(e, copy);
        extern crate std;
        use std::string::ToString;
        assert!(WriteError::<u8>::Internal.to_string().contains("bug"));
        assert!(ReadError::<u8>::Corrupted.to_string().contains("corrupted"));
    }
}
