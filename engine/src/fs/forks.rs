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
//!
//! The handler is registered when the program (or the library) is
//! loaded, before `main` and any thread of it. Registered on first use
//! instead, a fork already under way in another thread could miss it: a
//! child of a fork whose prepare phase began before the registration runs
//! no handler (glibc runs the child handlers that were registered when
//! the fork began, and lets registrations through while it runs another
//! library's prepare handler), so it would take the parent's table of held
//! locks, and a `Db` opened meanwhile, as its own. Where no load-time hook
//! exists the first use registers it, without blocking: a child forked
//! while a thread was registering must not wait for that thread.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

/// Forks this process is a child of, since the handler was registered.
static FORKS: AtomicU64 = AtomicU64::new(0);

/// Runs in the child of every `fork()`: async-signal-safe (one atomic add).
extern "C" fn count_fork_in_child() {
    FORKS.fetch_add(1, Ordering::Relaxed);
}

/// [`REGISTRATION`] before any registration decided it.
const UNDECIDED: u8 = 0;
/// [`REGISTRATION`]: the handler counts forks.
const REGISTERED: u8 = 1;
/// [`REGISTRATION`]: `pthread_atfork` failed; the process id stands in.
const FAILED: u8 = 2;

/// Whether the handler was registered; decided once, by the first
/// registration to finish, and never changed after.
static REGISTRATION: AtomicU8 = AtomicU8::new(UNDECIDED);

/// Registers the handler and decides [`REGISTRATION`] unless another
/// registration decided it first; whether forks are counted. Two threads
/// may both register: the handler then adds two a fork, which still
/// changes the count in every child and never otherwise.
fn register() -> bool {
    // SAFETY: registers a handler taking no arguments that only adds to an
    // atomic, which is async-signal-safe as a child handler must be; the
    // `None`s register nothing before the fork or in the parent.
    let ok = unsafe { libc::pthread_atfork(None, None, Some(count_fork_in_child)) == 0 };
    let mine = if ok { REGISTERED } else { FAILED };
    match REGISTRATION.compare_exchange(UNDECIDED, mine, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => ok,
        Err(decided) => decided == REGISTERED,
    }
}

/// Registers the handler at load time (see the module doc).
extern "C" fn register_at_load() {
    register();
}

/// The loader's table of initializers: [`register_at_load`] runs before
/// `main`, or when a library holding this crate is loaded.
#[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
#[used]
// SAFETY: `.init_array` holds pointers to functions the loader calls once,
// taking (and here ignoring) `argc`, `argv` and `envp`; `register_at_load`
// touches no state that needs `main` to have run.
#[unsafe(link_section = ".init_array")]
static REGISTER_AT_LOAD: extern "C" fn() = register_at_load;

/// Whether forks are counted; registers the handler if loading did not.
fn registered() -> bool {
    match REGISTRATION.load(Ordering::Acquire) {
        REGISTERED => true,
        FAILED => false,
        _ => register(),
    }
}

/// A value that changes in a child forked from this process (and in its
/// children), and never otherwise. The handler is registered at load
/// time, before any fork this process makes (see the module doc); where
/// it cannot be, the first call registers it: taking a directory lock
/// calls it, before any fork it must notice (the lock's table and every
/// `Db` compare it).
pub(crate) fn forks_seen() -> u64 {
    if registered() {
        FORKS.load(Ordering::Relaxed)
    } else {
        // Above every count, so it never equals one.
        u64::from(std::process::id()) | 1 << 63
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // In tests a panic is the failure report.
mod tests {
    use super::*;

    /// Set in the process `the_handler_is_registered_at_load` starts.
    const REGISTRATION_ENV: &str = "BLOOMLSM_FORKS_REGISTRATION";

    /// The body of that process (nothing else runs in it, so nothing
    /// registered the handler through first use): prints the registration
    /// state as `main` found it. Does nothing in an ordinary run.
    #[test]
    fn forks_registration_entry() {
        if std::env::var_os(REGISTRATION_ENV).is_some() {
            let state = REGISTRATION.load(Ordering::Acquire);
            println!("REGISTRATION: {state}");
        }
    }

    #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
    #[test]
    fn the_handler_is_registered_at_load() {
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "fs::forks::tests::forks_registration_entry",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(REGISTRATION_ENV, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}");
        assert!(
            stdout.contains(&format!("REGISTRATION: {REGISTERED}")),
            "{stdout}"
        );
    }
}
