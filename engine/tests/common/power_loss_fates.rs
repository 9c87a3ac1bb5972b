//! The fates a simulated power loss deals what was not made durable:
//! unsynced writes, overwrites in place, unlinks and renames. The crash
//! attacks draw them together and arm a `FaultFs` with them.

use bloomlsm::fs::fault::{FaultFs, OverwriteFate, RenameFate, Revival, UnsyncedFate};

/// One power loss's fates: unsynced writes, overwrites, revived unlinks,
/// renames.
pub type Fates = (UnsyncedFate, OverwriteFate, Revival, RenameFate);

/// A new fault-injecting file system with every fate of `fates` armed.
pub fn armed(fates: Fates) -> FaultFs {
    let fs = FaultFs::new();
    fs.set_unsynced_fate(fates.0);
    fs.set_overwrite_fate(fates.1);
    fs.set_revival(fates.2);
    fs.set_rename_fate(fates.3);
    fs
}
