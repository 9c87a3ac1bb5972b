//! How many forks this process is a child of: a `Db` copied into a forked
//! child holds no lock on its store (record locks are not inherited), so
//! it must not write.
//!
//! A `pthread_atfork` handler counts, in the child, every fork made
//! through `fork()`; a `Db` compares the count with the one it opened
//! under on each write. One atomic load a write, where asking for the
//! process id is a system call (about 150 ns here). Children started by
//! `posix_spawn` (how `std::process::Command` usually starts them) run no
//! handler, and need none: they run another program.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Forks this process is a child of, since the handler was registered.
static FORKS: AtomicU64 = AtomicU64::new(0);

/// Runs in the child of every `fork()`: async-signal-safe (one atomic add).
extern "C" fn count_fork_in_child() {
    FORKS.fetch_add(1, Ordering::Relaxed);
}

/// Where the handler could not be registered: the process id stands in,
/// read on each call.
fn registered() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        // SAFETY: registers a handler taking no arguments that only adds
        // to an atomic, which is async-signal-safe as a child handler must
        // be; the `None`s register nothing before the fork or in the parent.
        unsafe { libc::pthread_atfork(None, None, Some(count_fork_in_child)) == 0 }
    })
}

/// A value that changes in a child forked from this process (and in its
/// children), and never otherwise. The first call registers the handler:
/// taking a directory lock calls it, before any fork it must notice (the
/// lock's table and every `Db` compare it).
pub(crate) fn forks_seen() -> u64 {
    if registered() {
        FORKS.load(Ordering::Relaxed)
    } else {
        // Above every count, so it never equals one.
        u64::from(std::process::id()) | 1 << 63
    }
}
