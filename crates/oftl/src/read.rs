//! The read path: object data and attributes.
//!
//! Reads go straight from the index to the data pages, reading only the bytes asked
//! for plus (with OOB placement, in the same operation) the page's backpointer, which
//! must name the object and page the index promised. Unmapped pages inside the size
//! read as zeros. A whole-page read leaves a clean copy in a write-back buffer that is
//! free or clean (never one holding unprogrammed writes), so reading the page again
//! costs nothing until the object's next synchronous change of that page. A read whose ECC report reaches the part's scrub threshold flags the
//! block; GC moves it first.

use nand_hal::NandFlash;

use crate::errors::{Fault, ReadError};
use crate::format::backpointer::{PageKind, Placement};
use crate::format::index::UNMAPPED;
use crate::io::FaultOf;
use crate::policy::SpacePolicy;
use crate::{Attrs, ObjectId, Oftl};

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
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read (fewer at
    /// the end of the object).
    pub fn read(
        &mut self,
        obj: ObjectId,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<usize, ReadError<F::Error>> {
        self.read_inner(obj, offset, buf)
            .map_err(|e| self.fail_read(e))
    }

    fn read_inner(
        &mut self,
        obj: ObjectId,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<usize, FaultOf<F>> {
        self.check_usable()?;
        let o = self.obj(obj)?;
        if o.kind != crate::ObjKind::Object {
            return Err(Fault::WrongKind);
        }
        let size = self.pending_size(&o);
        if offset >= size {
            return Ok(0);
        }
        let len = (size - offset).min(buf.len() as u64) as usize;
        let p = self.dev.payload() as u64;
        let mut pos = 0usize;
        while pos < len {
            let abs = offset + pos as u64;
            let lpn = (abs / p) as u32;
            let col = (abs % p) as usize;
            let n = (p as usize - col).min(len - pos);
            let out = &mut buf[pos..pos + n];
            if self.wbuf_read(obj, lpn, col, out) {
                pos += n;
                continue;
            }
            let page = self.index_get(obj, lpn)?;
            if page == UNMAPPED {
                out.fill(0);
            } else if let Some(s) = self.wbuf_spare(n) {
                // A whole page, kept as a clean copy (a directory page read at open is
                // read again by the commit).
                self.wbuf_fill(s, obj, lpn, page)?;
                out.copy_from_slice(&self.wbuf.data(s)[..n]);
            } else if self.dev.placement() == Placement::InBand {
                // Only a whole-payload read can be checked against the payload CRC.
                let p = p as usize;
                let aside = self.scratch.aside_mut()?;
                self.dev.read_payload(
                    page,
                    0,
                    &mut aside[..p],
                    Some((PageKind::Data, obj, lpn)),
                )?;
                out.copy_from_slice(&aside[col..col + n]);
            } else {
                self.dev
                    .read_payload(page, col as u32, out, Some((PageKind::Data, obj, lpn)))?;
            }
            pos += n;
        }
        Ok(len)
    }

    /// The object's size in bytes (buffered writes included; a log stream's end LSN).
    pub fn size(&mut self, obj: ObjectId) -> Result<u64, ReadError<F::Error>> {
        let r = (|| -> Result<_, FaultOf<F>> {
            self.check_usable()?;
            let o = self.obj(obj)?;
            Ok(self.pending_size(&o))
        })();
        r.map_err(|e| self.fail_read(e))
    }

    /// Whether the object exists.
    pub fn exists(&mut self, obj: ObjectId) -> Result<bool, ReadError<F::Error>> {
        let r = (|| -> Result<_, FaultOf<F>> {
            self.check_usable()?;
            Ok(self.obj_get(obj)?.is_some())
        })();
        r.map_err(|e| self.fail_read(e))
    }

    /// Kind, size and user attributes.
    pub fn attrs(&mut self, obj: ObjectId) -> Result<Attrs, ReadError<F::Error>> {
        let r = (|| -> Result<_, FaultOf<F>> {
            self.check_usable()?;
            let o = self.obj(obj)?;
            let m = self.load_meta(&o)?;
            Ok(Attrs {
                kind: m.kind,
                size: self.pending_size(&o),
                user: m.attrs,
            })
        })();
        r.map_err(|e| self.fail_read(e))
    }
}
