//! Errors of the file layer: one enum for every file and namespace operation (what a
//! firmware engineer matches on), with the flash's own error apart from
//! [`Error::Corrupted`], and the store's mount and format errors passed through.

use oftl::{FormatError, MountError, ReadError, WriteError};

/// Why a path was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PathError {
    /// Not absolute (`/` first).
    NotAbsolute,
    /// An empty component (`//`, or a trailing `/` after a name).
    EmptyComponent,
    /// `.` or `..` (not supported: paths are canonical).
    DotComponent,
    /// A name longer than [`crate::NAME_MAX`] bytes.
    NameTooLong,
    /// A NUL byte in a name.
    Nul,
    /// The root itself, where a name is needed.
    Root,
    /// A rename would move a directory into itself or below it.
    IntoItself,
}

/// Why a file-layer operation failed. An operation that fails changes nothing on
/// flash, except where [`Error::Poisoned`] follows (remount).
#[derive(Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Error<E> {
    /// The device failed (including uncorrectable reads after retries).
    Flash(E),
    /// The flash holds something that is not what the file layer wrote there.
    Corrupted,
    /// The path is not acceptable.
    Path(PathError),
    /// No such file or directory.
    NotFound,
    /// The name exists (`create_dir`, `OpenOptions::create_new`).
    Exists,
    /// A path component that must be a directory is a file.
    NotADirectory,
    /// A file operation on a directory.
    IsADirectory,
    /// `remove_dir` of a directory that still has entries, or a rename over one.
    NotEmpty,
    /// The file is open (removing, renaming or opening it again is refused; see the
    /// crate docs).
    Busy,
    /// Every handle of the fixed table is in use.
    TooManyOpen,
    /// The handle is not open (closed, or from before a remount).
    BadHandle,
    /// The handle was not opened for reading / writing.
    Access,
    /// Attributes longer than [`crate::ATTR_MAX`], a seek before the start, or a file
    /// past the largest size.
    TooLarge,
    /// A directory page at the deepest level is full of names that hash alike: a new
    /// name or longer attributes do not fit (a growing inline file moves to an object
    /// of its own instead).
    DirectoryFull,
    /// No room: delete something.
    NoSpace,
    /// The store is read-only (salvage mount, or too many bad blocks).
    ReadOnly,
    /// A failure left RAM ahead of flash: remount (recovery restores the last
    /// consistent state).
    Poisoned,
    /// Not mounted.
    NotMounted,
    /// Not a StageFS volume (the object store mounted, but holds no volume header), or
    /// a volume of another version.
    NotFormatted,
    /// An internal invariant failed below or in the file layer: a bug to report (never
    /// damaged flash, which is [`Error::Corrupted`]). Remount.
    Internal,
    /// Mounting the object store failed.
    Mount(MountError<E>),
    /// Formatting the object store failed.
    Format(FormatError<E>),
}

impl<E> From<PathError> for Error<E> {
    fn from(p: PathError) -> Self {
        Error::Path(p)
    }
}

impl<E> From<WriteError<E>> for Error<E> {
    fn from(e: WriteError<E>) -> Self {
        match e {
            WriteError::Flash(e) => Error::Flash(e),
            WriteError::Corrupted => Error::Corrupted,
            WriteError::NotFound => Error::Corrupted,
            WriteError::NoSpace => Error::NoSpace,
            WriteError::TooManyObjects => Error::NoSpace,
            WriteError::TooLarge => Error::TooLarge,
            WriteError::Poisoned | WriteError::Exhausted => Error::Poisoned,
            WriteError::WrongKind => Error::Corrupted,
            WriteError::ReadOnly => Error::ReadOnly,
            // An error this build of the file layer does not know of is not damaged
            // flash either.
            _ => Error::Internal,
        }
    }
}

impl<E> From<ReadError<E>> for Error<E> {
    fn from(e: ReadError<E>) -> Self {
        match e {
            ReadError::Flash(e) => Error::Flash(e),
            ReadError::Corrupted | ReadError::NotFound | ReadError::WrongKind => Error::Corrupted,
            ReadError::BufferTooSmall(_) => Error::Corrupted,
            ReadError::Poisoned | ReadError::Exhausted => Error::Poisoned,
            _ => Error::Internal,
        }
    }
}

impl<E> From<crate::format::Corrupted> for Error<E> {
    fn from(_: crate::format::Corrupted) -> Self {
        Error::Corrupted
    }
}

impl core::fmt::Display for PathError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            PathError::NotAbsolute => "path is not absolute",
            PathError::EmptyComponent => "empty path component",
            PathError::DotComponent => "`.` or `..` in a path",
            PathError::NameTooLong => "name longer than 64 bytes",
            PathError::Nul => "NUL byte in a name",
            PathError::Root => "the root has no name",
            PathError::IntoItself => "a directory cannot move into itself",
        })
    }
}

impl<E: core::fmt::Debug> core::fmt::Display for Error<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Flash(e) => write!(f, "flash error: {e:?}"),
            Error::Path(p) => write!(f, "bad path: {p}"),
            Error::Mount(e) => write!(f, "mount failed: {e:?}"),
            Error::Format(e) => write!(f, "format failed: {e:?}"),
            other => f.write_str(match other {
                Error::Corrupted => "flash content is corrupted",
                Error::NotFound => "no such file or directory",
                Error::Exists => "the name exists",
                Error::NotADirectory => "not a directory",
                Error::IsADirectory => "is a directory",
                Error::NotEmpty => "directory not empty",
                Error::Busy => "the file is open",
                Error::TooManyOpen => "too many open files",
                Error::BadHandle => "the file is not open",
                Error::Access => "not opened for this access",
                Error::TooLarge => "too large",
                Error::DirectoryFull => "directory full (names hash alike)",
                Error::NoSpace => "no space left",
                Error::ReadOnly => "read-only",
                Error::Poisoned => "a failure needs a remount",
                Error::Internal => "internal error (a bug to report); remount",
                Error::NotMounted => "not mounted",
                Error::NotFormatted => "not a StageFS volume",
                _ => "error",
            }),
        }
    }
}

#[cfg(feature = "std")]
impl<E: core::fmt::Debug> std::error::Error for Error<E> {}
