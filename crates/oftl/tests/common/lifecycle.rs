//! Tests build stores by value, on the host: `Fs::formatted(flash, cfg)` is
//! `Oftl::new` followed by `format`, `Fs::mounted(flash)` by `mount` (the one
//! constructor path, with the test's policy).

use nand_hal::NandFlash;
use oftl::{Config, FormatError, MountError, Oftl, SpacePolicy};

/// Format or mount a new store value in one call.
pub trait Lifecycle: Sized {
    /// The flash the store runs on.
    type Flash: NandFlash;
    /// The space policy.
    type Policy: SpacePolicy;

    /// `new(flash, cfg, policy)`, formatted.
    fn formatted_with(
        flash: Self::Flash,
        cfg: Config,
        policy: Self::Policy,
    ) -> Result<Self, FormatError<<Self::Flash as nand_hal::ErrorType>::Error>>;

    /// `new(flash, Config::new(), policy)`, mounted.
    fn mounted_with(
        flash: Self::Flash,
        policy: Self::Policy,
    ) -> Result<Self, MountError<<Self::Flash as nand_hal::ErrorType>::Error>>;

    /// [`Lifecycle::formatted_with`] the default policy.
    fn formatted(
        flash: Self::Flash,
        cfg: Config,
    ) -> Result<Self, FormatError<<Self::Flash as nand_hal::ErrorType>::Error>>
    where
        Self::Policy: Default,
    {
        Self::formatted_with(flash, cfg, Self::Policy::default())
    }

    /// [`Lifecycle::mounted_with`] the default policy.
    fn mounted(
        flash: Self::Flash,
    ) -> Result<Self, MountError<<Self::Flash as nand_hal::ErrorType>::Error>>
    where
        Self::Policy: Default,
    {
        Self::mounted_with(flash, Self::Policy::default())
    }
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
    > Lifecycle for Oftl<F, PAGE, BLOCKS, CACHE, WBUF, P, META, LOG>
{
    type Flash = F;
    type Policy = P;

    fn formatted_with(flash: F, cfg: Config, policy: P) -> Result<Self, FormatError<F::Error>> {
        let mut fs = Self::new(flash, cfg, policy);
        fs.format()?;
        Ok(fs)
    }

    fn mounted_with(flash: F, policy: P) -> Result<Self, MountError<F::Error>> {
        let mut fs = Self::new(flash, Config::new(), policy);
        fs.mount()?;
        Ok(fs)
    }
}
