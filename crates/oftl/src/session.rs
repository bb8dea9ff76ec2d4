//! What the store may do now: whether it is mounted (not poisoned), whether it is
//! read-only and why, and which kind of mount is running. Changed only through the
//! events below.
//!
//! A store is *poisoned* until a format or mount succeeds, after an unmount, and after
//! an error that may have left RAM ahead of flash (see the crate docs): operations
//! that touch flash then fail with `Poisoned`. Read-only (a salvage mount, or too few
//! good blocks) refuses writes and keeps reads.

use crate::ReadOnlyReason;

/// The kind of mount running (it decides what recovery may write).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MountKind {
    /// A normal mount.
    Normal,
    /// A salvage mount: recovery replays up to the first lost page and writes nothing
    /// the store references.
    Salvage,
    /// A repair: as a salvage, then recovery finishes and checkpoints.
    Repair,
}

/// What the store may do now.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Session {
    poisoned: bool,
    read_only: Option<ReadOnlyReason>,
    mount: MountKind,
    /// Recovery replays in RAM only, writing nothing but cache pages (a recovery with
    /// too few good blocks to finish).
    replay_only: bool,
}

impl Session {
    /// Not mounted.
    pub const UNMOUNTED: Session = Session {
        poisoned: true,
        read_only: None,
        mount: MountKind::Normal,
        replay_only: false,
    };

    /// Operations that touch flash are refused (`Poisoned`).
    pub fn poisoned(&self) -> bool {
        self.poisoned
    }

    /// Writes are refused, and why.
    pub fn read_only(&self) -> Option<ReadOnlyReason> {
        self.read_only
    }

    /// A salvage or a repair mount is running: recovery stops at the first lost page.
    pub fn salvaging(&self) -> bool {
        self.mount != MountKind::Normal
    }

    /// Recovery writes nothing the store references (relocations, its checkpoint): a
    /// salvage mount, or a replay in RAM only.
    pub fn replay_only(&self) -> bool {
        self.mount == MountKind::Salvage || self.replay_only
    }

    /// Everything in RAM starts again (format, mount): not mounted yet, writable.
    pub fn reset(&mut self) {
        self.poisoned = true;
        self.read_only = None;
    }

    /// The format or mount under way may touch flash.
    pub fn opened(&mut self) {
        self.poisoned = false;
    }

    /// A format, mount or unmount ended: mounted when it succeeded and `mounted`.
    pub fn ended(&mut self, mounted: bool) {
        self.poisoned = !mounted;
    }

    /// RAM may be ahead of flash (a failed write), or the store was unmounted.
    pub fn poison(&mut self) {
        self.poisoned = true;
    }

    /// Writes are refused from now on for `reason` (the first reason stays); whether
    /// the store was writable until now.
    pub fn go_read_only(&mut self, reason: ReadOnlyReason) -> bool {
        if self.read_only.is_none() {
            self.read_only = Some(reason);
            true
        } else {
            false
        }
    }

    /// A salvage mount finished: read-only for that reason, whatever the recovery
    /// found before.
    pub fn salvaged(&mut self) {
        self.read_only = Some(ReadOnlyReason::Salvage);
    }

    /// A mount of kind `kind` begins.
    pub fn begin_mount(&mut self, kind: MountKind) {
        self.mount = kind;
    }

    /// The mount ended (recovery rules are normal again).
    pub fn end_mount(&mut self) {
        self.mount = MountKind::Normal;
        self.replay_only = false;
    }

    /// Recovery replays in RAM only from now on in this mount.
    pub fn replay_in_ram_only(&mut self) {
        self.replay_only = true;
    }
}
