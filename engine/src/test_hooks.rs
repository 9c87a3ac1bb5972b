//! Test-only hooks into the engine's hot paths (compiled in tests only).

use std::sync::Arc;

/// A test-only pause point: a test stops a thread there and changes the
/// tree under it (between a reader's view and its sequence; between a
/// rebuild's copies and their install; between a compaction's snapshot
/// list and its install).
#[derive(Default)]
pub(crate) struct ReadPause(parking_lot::Mutex<Option<Arc<dyn Fn() + Send + Sync>>>);

impl ReadPause {
    pub(crate) fn set(&self, hook: Option<Arc<dyn Fn() + Send + Sync>>) {
        *self.0.lock() = hook;
    }

    /// Stops the next thread that reaches this point (and no later one):
    /// returns a receiver that says "paused" and a sender that resumes it.
    pub(crate) fn arm_once(&self) -> (std::sync::mpsc::Receiver<()>, std::sync::mpsc::Sender<()>) {
        let (paused_tx, paused_rx) = std::sync::mpsc::channel();
        let (resume_tx, resume_rx) = std::sync::mpsc::channel::<()>();
        let resume_rx = parking_lot::Mutex::new(resume_rx);
        let armed = std::sync::atomic::AtomicBool::new(true);
        self.set(Some(Arc::new(move || {
            if armed.swap(false, std::sync::atomic::Ordering::SeqCst) {
                #[allow(clippy::unwrap_used)] // In tests a panic is the failure report.
                paused_tx.send(()).unwrap();
                #[allow(clippy::unwrap_used)]
                resume_rx.lock().recv().unwrap();
            }
        })));
        (paused_rx, resume_tx)
    }

    pub(crate) fn pause(&self) {
        let hook = self.0.lock().clone();
        if let Some(hook) = hook {
            hook();
        }
    }
}

impl std::fmt::Debug for ReadPause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadPause")
    }
}

/// What an [`InstallHook`] calls: stats, then distinct keys per table by level.
pub(crate) type InstallObserver = Arc<dyn Fn(&crate::Stats, &[Vec<u64>]) + Send + Sync>;

/// A test-only observer called after every install with the store's
/// stats and the distinct keys of each live table by level, while the
/// install lock is held: it sees every state of the tree.
#[derive(Default)]
pub(crate) struct InstallHook(parking_lot::Mutex<Option<InstallObserver>>);

impl InstallHook {
    pub(crate) fn set(&self, hook: Option<InstallObserver>) {
        *self.0.lock() = hook;
    }

    pub(crate) fn call(&self, state: impl FnOnce() -> (crate::Stats, Vec<Vec<u64>>)) {
        let hook = self.0.lock().clone();
        if let Some(hook) = hook {
            let (stats, keys) = state();
            hook(&stats, &keys);
        }
    }
}

impl std::fmt::Debug for InstallHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InstallHook")
    }
}
