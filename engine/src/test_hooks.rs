//! Test-only hooks into the engine's hot paths (compiled in tests only).

use std::sync::Arc;

/// A test-only pause point between a reader's view and its sequence: a
/// test stops a reader there and changes the tree under it.
#[derive(Default)]
pub(crate) struct ReadPause(parking_lot::Mutex<Option<Arc<dyn Fn() + Send + Sync>>>);

impl ReadPause {
    pub(crate) fn set(&self, hook: Option<Arc<dyn Fn() + Send + Sync>>) {
        *self.0.lock() = hook;
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
