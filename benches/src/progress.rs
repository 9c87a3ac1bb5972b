//! Progress and time left on stderr: a bar when stderr is a terminal, else
//! (logs, `make bench-scale > log`) a plain line every few seconds.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use parking_lot::Mutex;

/// Seconds between plain progress lines when stderr is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(10);

/// Progress of one phase of `len` steps. Shared by reference between the
/// threads of a phase.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
    label: String,
    len: u64,
    done: AtomicU64,
    started: Instant,
    last_line: Mutex<Instant>,
}

/// `d` as `1h02m`, `3m07s` or `12s`.
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// Time left at a steady rate: `elapsed` for `done` of `total` units.
pub fn eta(elapsed: Duration, done: f64, total: f64) -> Option<Duration> {
    (done > 0.0 && total >= done)
        .then(|| Duration::from_secs_f64(elapsed.as_secs_f64() * (total - done) / done))
}

impl Progress {
    /// Starts showing `label` with `len` steps.
    pub fn new(label: impl Into<String>, len: u64) -> Self {
        let label = label.into();
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(
                "{prefix:>28} [{bar:30}] {human_pos}/{human_len} {per_sec} elapsed {elapsed} eta {eta}",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_prefix(label.clone());
            bar
        });
        Self {
            bar,
            label,
            len,
            done: AtomicU64::new(0),
            started: Instant::now(),
            last_line: Mutex::new(Instant::now()),
        }
    }

    /// Adds `n` finished steps.
    pub fn inc(&self, n: u64) {
        let done = self.done.fetch_add(n, Ordering::Relaxed) + n;
        if let Some(bar) = &self.bar {
            bar.set_position(done);
            return;
        }
        let mut last = self.last_line.lock();
        if last.elapsed() >= LINE_EVERY {
            *last = Instant::now();
            let elapsed = self.started.elapsed();
            let left = eta(elapsed, done as f64, self.len as f64)
                .map_or_else(|| "?".into(), human_duration);
            eprintln!(
                "{}: {done}/{} ({:.0}%), {:.0}/s, elapsed {}, eta {left}",
                self.label,
                self.len,
                100.0 * done as f64 / self.len.max(1) as f64,
                done as f64 / elapsed.as_secs_f64().max(1e-9),
                human_duration(elapsed),
            );
        }
    }

    /// Removes the bar (a plain line says the phase is done).
    pub fn finish(self) {
        match &self.bar {
            Some(bar) => bar.finish_and_clear(),
            None if self.started.elapsed() >= LINE_EVERY => eprintln!(
                "{}: done in {}",
                self.label,
                human_duration(self.started.elapsed())
            ),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_eta_read_as_people_write_them() {
        assert_eq!(human_duration(Duration::from_secs(12)), "12s");
        assert_eq!(human_duration(Duration::from_secs(187)), "3m07s");
        assert_eq!(human_duration(Duration::from_secs(3720)), "1h02m");
        assert_eq!(
            eta(Duration::from_secs(10), 25.0, 100.0),
            Some(Duration::from_secs(30))
        );
        assert_eq!(eta(Duration::from_secs(10), 0.0, 100.0), None);
    }
}
