//! Failed reads: a read-open ([`FileSystem::open_read`],
//! [`FileSystem::open_read_direct`], [`FileSystem::read_all`]) or a
//! positioned read of a file opened through the [`FaultFs`]
//! (`read_exact_at`, `read_exact_at_bulk`) that fails with `EIO`, as on a
//! device with a bad sector or a file system that lost the file's extent.
//! Opens and reads are numbered apart, from 0, in the order they are made
//! (by any thread), so a test can sweep a fault over every position.
//!
//! [`FaultFs`]: super::FaultFs
//! [`FileSystem::open_read`]: super::FileSystem::open_read
//! [`FileSystem::open_read_direct`]: super::FileSystem::open_read_direct
//! [`FileSystem::read_all`]: super::FileSystem::read_all

use std::io;

/// Which calls of a series (read-opens, or positioned reads) fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFault {
    /// Only the `n`-th: a transient fault, the next try works.
    Only(u64),
    /// The `n`-th and every later one, until healed: a device gone bad.
    From(u64),
    /// Each with probability `1 / one_in`, a coin drawn from the seed and
    /// the call's number: the same calls fail each time the same run is
    /// made. `one_in == 0` fails none.
    Seeded {
        /// Picks which calls fail.
        seed: u64,
        /// One call in this many fails, on average.
        one_in: u64,
    },
}

impl ReadFault {
    fn fails(self, n: u64) -> bool {
        match self {
            Self::Only(at) => n == at,
            Self::From(at) => n >= at,
            Self::Seeded { seed, one_in } => {
                one_in > 0 && super::mix(seed ^ super::mix(n ^ READ_SALT)).is_multiple_of(one_in)
            }
        }
    }
}

/// Makes a read's coin independent of the power loss's at the same numbers.
const READ_SALT: u64 = 0x5245_4144_u64;

/// One series of calls: how many were made, and which fail.
#[derive(Debug, Default)]
pub(super) struct Series {
    armed: Option<ReadFault>,
    /// The kind a failed call's error has; `None`: the OS's `EIO`.
    kind: Option<io::ErrorKind>,
    made: u64,
}

impl Series {
    /// Arms `fault` (`None`: no call fails) for the calls from now on;
    /// the numbering goes on.
    pub(super) fn arm(&mut self, fault: Option<ReadFault>) {
        self.armed = fault;
        self.kind = None;
    }

    /// Arms `fault` with errors of `kind` instead of `EIO` (as when memory
    /// for the read's buffer is refused: `OutOfMemory`).
    pub(super) fn arm_as(&mut self, fault: ReadFault, kind: io::ErrorKind) {
        self.armed = Some(fault);
        self.kind = Some(kind);
    }

    /// Calls made so far: the number the next one gets.
    pub(super) fn made(&self) -> u64 {
        self.made
    }

    /// Counts a call; its injected failure, if it is to fail: the OS's
    /// own `EIO`, as a real device gives it (`raw_os_error() == Some(EIO)`,
    /// which survives every copy the store makes of an I/O error), or an
    /// error of the kind armed with [`Self::arm_as`].
    pub(super) fn call(&mut self) -> Option<io::Error> {
        let n = self.made;
        self.made += 1;
        let kind = self.kind;
        self.armed.is_some_and(|f| f.fails(n)).then(|| match kind {
            Some(kind) => io::Error::new(kind, "injected read failure"),
            None => io::Error::from_raw_os_error(libc::EIO),
        })
    }
}
