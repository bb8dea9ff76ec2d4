//! A borrowed view of an open file implementing `embedded-io`'s `Read`, `Write` and
//! `Seek` (and `std::io`'s with the `std` feature), so the file works with code written
//! against those traits.

use crate::error::Error;
use crate::file::{File, SeekFrom};
use crate::store::Store;
use crate::Fs;

/// An open file and the volume it is on, borrowed together ([`Fs::view`]).
pub struct FileView<'a, S: Store, const PAGE: usize, const HANDLES: usize> {
    fs: &'a mut Fs<S, PAGE, HANDLES>,
    file: File,
}

impl<S: Store, const PAGE: usize, const HANDLES: usize> Fs<S, PAGE, HANDLES> {
    /// `file` as an `embedded-io` (and, with `std`, `std::io`) reader/writer/seeker.
    /// Dropping the view does not close the file.
    pub fn view(&mut self, file: File) -> FileView<'_, S, PAGE, HANDLES> {
        FileView { fs: self, file }
    }
}

impl<S: Store, const PAGE: usize, const HANDLES: usize> FileView<'_, S, PAGE, HANDLES> {
    /// The file.
    pub fn file(&self) -> File {
        self.file
    }
}

impl<E: core::fmt::Debug> embedded_io::Error for Error<E> {
    fn kind(&self) -> embedded_io::ErrorKind {
        use embedded_io::ErrorKind as K;
        match self {
            Error::NotFound => K::NotFound,
            Error::Access | Error::ReadOnly => K::PermissionDenied,
            Error::Exists => K::AlreadyExists,
            Error::Path(_) | Error::TooLarge | Error::BadHandle => K::InvalidInput,
            Error::NoSpace | Error::DirectoryFull => K::OutOfMemory,
            Error::Corrupted => K::InvalidData,
            Error::Busy | Error::TooManyOpen | Error::NotMounted => K::Unsupported,
            _ => K::Other,
        }
    }
}

impl<S: Store, const PAGE: usize, const HANDLES: usize> embedded_io::ErrorType
    for FileView<'_, S, PAGE, HANDLES>
where
    S::FlashError: core::fmt::Debug,
{
    type Error = Error<S::FlashError>;
}

impl<S: Store, const PAGE: usize, const HANDLES: usize> embedded_io::Read
    for FileView<'_, S, PAGE, HANDLES>
where
    S::FlashError: core::fmt::Debug,
{
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error> {
        self.fs.read(self.file, buf)
    }
}

impl<S: Store, const PAGE: usize, const HANDLES: usize> embedded_io::Write
    for FileView<'_, S, PAGE, HANDLES>
where
    S::FlashError: core::fmt::Debug,
{
    fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> {
        self.fs.write(self.file, buf)
    }

    /// `fsync`: durable on return.
    fn flush(&mut self) -> Result<(), Self::Error> {
        self.fs.fsync(self.file)
    }
}

impl<S: Store, const PAGE: usize, const HANDLES: usize> embedded_io::Seek
    for FileView<'_, S, PAGE, HANDLES>
where
    S::FlashError: core::fmt::Debug,
{
    fn seek(&mut self, pos: embedded_io::SeekFrom) -> Result<u64, Self::Error> {
        let to = match pos {
            embedded_io::SeekFrom::Start(p) => SeekFrom::Start(p),
            embedded_io::SeekFrom::End(d) => SeekFrom::End(d),
            embedded_io::SeekFrom::Current(d) => SeekFrom::Current(d),
        };
        self.fs.seek(self.file, to)
    }
}

#[cfg(feature = "std")]
mod std_io {
    use super::*;
    use std::io;

    fn to_io<E: core::fmt::Debug>(e: Error<E>) -> io::Error {
        let kind = match embedded_io::Error::kind(&e) {
            embedded_io::ErrorKind::NotFound => io::ErrorKind::NotFound,
            embedded_io::ErrorKind::PermissionDenied => io::ErrorKind::PermissionDenied,
            embedded_io::ErrorKind::AlreadyExists => io::ErrorKind::AlreadyExists,
            embedded_io::ErrorKind::InvalidInput => io::ErrorKind::InvalidInput,
            embedded_io::ErrorKind::InvalidData => io::ErrorKind::InvalidData,
            embedded_io::ErrorKind::OutOfMemory => io::ErrorKind::StorageFull,
            embedded_io::ErrorKind::Unsupported => io::ErrorKind::Unsupported,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, format!("{e:?}"))
    }

    impl<S: Store, const PAGE: usize, const HANDLES: usize> io::Read for FileView<'_, S, PAGE, HANDLES>
    where
        S::FlashError: core::fmt::Debug,
    {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.fs.read(self.file, buf).map_err(to_io)
        }
    }

    impl<S: Store, const PAGE: usize, const HANDLES: usize> io::Write for FileView<'_, S, PAGE, HANDLES>
    where
        S::FlashError: core::fmt::Debug,
    {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.fs.write(self.file, buf).map_err(to_io)
        }

        fn flush(&mut self) -> io::Result<()> {
            self.fs.fsync(self.file).map_err(to_io)
        }
    }

    impl<S: Store, const PAGE: usize, const HANDLES: usize> io::Seek for FileView<'_, S, PAGE, HANDLES>
    where
        S::FlashError: core::fmt::Debug,
    {
        fn seek(&mut self, pos: io::SeekFrom) -> io::Result<u64> {
            let to = match pos {
                io::SeekFrom::Start(p) => SeekFrom::Start(p),
                io::SeekFrom::End(d) => SeekFrom::End(d),
                io::SeekFrom::Current(d) => SeekFrom::Current(d),
            };
            self.fs.seek(self.file, to).map_err(to_io)
        }
    }
}
