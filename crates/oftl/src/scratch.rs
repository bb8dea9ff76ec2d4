//! The store's two page-sized scratch buffers ([`Scratch`]), owned here with the rule
//! that keeps their uses apart.
//!
//! - The **page** ([`Scratch::page`]) is the page the running operation builds or reads
//!   whole: a data or metadata page to program, a checkpoint page being streamed, a
//!   log page read for its sectors, the superblock.
//! - The **aside** page ([`Scratch::aside`]) is for a page read or copied while the
//!   page is in use, by work nested inside an operation: GC copying a valid page
//!   during a write, a write buffer filled from flash, the erased check inside a
//!   checkpoint, a log page relocated sector by sector (read into the page, kept
//!   aside while the page is rebuilt), a partial read.
//!
//! Recovery keeps the data head's suspect commit page (the one a cut may have torn,
//! read once, see the `recovery` module) in the aside page from the scan to the
//! relocation: [`Scratch::hold`] names it, [`Scratch::held`] gives it back, and until
//! [`Scratch::release`] any other use of the aside page is refused with
//! [`Clash`] (an internal error: a bug, never a silent overwrite of the page
//! recovery replays from).

/// The aside page was asked for while recovery holds the suspect page in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Clash;

/// The two scratch pages (see the module docs).
pub(crate) struct Scratch<const PAGE: usize> {
    page: [u8; PAGE],
    aside: [u8; PAGE],
    /// The page whose copy the aside page holds for recovery.
    held: Option<nand_hal::PageAddr>,
}

impl<const PAGE: usize> Scratch<PAGE> {
    /// Both pages erased-looking, nothing held.
    pub const EMPTY: Self = Scratch {
        page: [0xFF; PAGE],
        aside: [0xFF; PAGE],
        held: None,
    };

    /// Back to [`Scratch::EMPTY`] (a new session).
    pub fn reset(&mut self) {
        self.page.fill(0xFF);
        self.aside.fill(0xFF);
        self.held = None;
    }

    /// The running operation's page.
    pub fn page(&self) -> &[u8; PAGE] {
        &self.page
    }

    /// The running operation's page, to fill.
    pub fn page_mut(&mut self) -> &mut [u8; PAGE] {
        &mut self.page
    }

    /// The aside page, unless recovery holds it.
    pub fn aside(&self) -> Result<&[u8; PAGE], Clash> {
        match self.held {
            None => Ok(&self.aside),
            Some(_) => Err(Clash),
        }
    }

    /// The aside page to fill, unless recovery holds it.
    pub fn aside_mut(&mut self) -> Result<&mut [u8; PAGE], Clash> {
        match self.held {
            None => Ok(&mut self.aside),
            Some(_) => Err(Clash),
        }
    }

    /// Both pages at once (the page, the aside page), unless recovery holds the aside.
    pub fn both_mut(&mut self) -> Result<(&mut [u8; PAGE], &mut [u8; PAGE]), Clash> {
        match self.held {
            None => Ok((&mut self.page, &mut self.aside)),
            Some(_) => Err(Clash),
        }
    }

    /// Copies the page to the aside page.
    pub fn put_page_aside(&mut self) -> Result<(), Clash> {
        let (page, aside) = self.both_mut()?;
        aside.copy_from_slice(page);
        Ok(())
    }

    /// Recovery: the aside page now holds device page `page` (read there through
    /// [`Scratch::aside_mut`]) until [`Scratch::release`].
    pub fn hold(&mut self, page: nand_hal::PageAddr) {
        self.held = Some(page);
    }

    /// The held copy of device page `page`, if the aside page holds it.
    pub fn held(&mut self, page: nand_hal::PageAddr) -> Option<&mut [u8; PAGE]> {
        (self.held == Some(page)).then_some(&mut self.aside)
    }

    /// The held page is done with: the aside page is free again.
    pub fn release(&mut self) {
        self.held = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nand_hal::PageAddr;

    #[test]
    fn a_held_page_refuses_every_other_use_until_released() {
        let mut s = Scratch::<16>::EMPTY;
        s.aside_mut().unwrap().fill(7);
        s.hold(PageAddr(3));
        assert_eq!(s.aside_mut().map(|_| ()), Err(Clash));
        assert_eq!(s.aside().map(|_| ()), Err(Clash));
        assert_eq!(s.both_mut().map(|_| ()), Err(Clash));
        assert_eq!(s.put_page_aside(), Err(Clash));
        assert!(s.held(PageAddr(4)).is_none(), "another page is not held");
        assert_eq!(s.held(PageAddr(3)).unwrap()[0], 7);
        // The operation's page stays usable.
        s.page_mut().fill(1);
        s.release();
        assert!(s.held(PageAddr(3)).is_none());
        s.put_page_aside().unwrap();
        assert_eq!(s.aside().unwrap(), &[1; 16]);
        s.hold(PageAddr(3));
        s.reset();
        assert_eq!(
            s.aside().unwrap(),
            &[0xFF; 16],
            "a reset releases and clears"
        );
    }
}
