//! What the kernel says this process did: storage reads (`/proc/self/io`)
//! and resident memory (`/proc/self/status`). Linux only; elsewhere every
//! figure reads as zero.

/// Cumulative I/O counters of the whole process (all threads, including
/// exited ones), from `/proc/self/io`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcIo {
    /// Bytes the process caused to be fetched from storage (`read_bytes`):
    /// device reads, not page-cache hits.
    pub read_bytes: u64,
    /// Read system calls (`syscr`: read, pread, readv, ...).
    pub read_syscalls: u64,
}

impl ProcIo {
    /// The counters now.
    pub fn now() -> Self {
        let text = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
        Self::parse(&text)
    }

    /// Parses the text of `/proc/<pid>/io`; missing fields read as zero.
    pub fn parse(text: &str) -> Self {
        Self {
            read_bytes: field(text, "read_bytes:").unwrap_or(0),
            read_syscalls: field(text, "syscr:").unwrap_or(0),
        }
    }

    /// What happened between `earlier` and `self`.
    pub fn since(self, earlier: Self) -> Self {
        Self {
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            read_syscalls: self.read_syscalls.saturating_sub(earlier.read_syscalls),
        }
    }
}

/// Resident memory of the process, from `/proc/self/status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcMemory {
    /// Resident set now (`VmRSS`), bytes.
    pub rss_bytes: u64,
    /// Peak resident set so far (`VmHWM`), bytes.
    pub peak_rss_bytes: u64,
}

impl ProcMemory {
    /// The figures now.
    pub fn now() -> Self {
        let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        Self::parse(&text)
    }

    /// Parses the text of `/proc/<pid>/status` (values in kB).
    pub fn parse(text: &str) -> Self {
        Self {
            rss_bytes: field(text, "VmRSS:").unwrap_or(0) * 1024,
            peak_rss_bytes: field(text, "VmHWM:").unwrap_or(0) * 1024,
        }
    }
}

/// CPU time the whole process has used (every thread, exited ones
/// included: `getrusage(RUSAGE_SELF)`), user plus system, microseconds; 0
/// where it cannot be read. Beside a phase's wall time it tells a slowdown
/// of the phase's own work (more CPU per operation: contention, misses)
/// from time taken by other processes or the kernel (the same CPU per
/// operation, fewer operations a second).
pub fn cpu_micros() -> u64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a `rusage` to the pointer, which points to
    // one; RUSAGE_SELF is a valid `who`.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return 0;
    }
    // SAFETY: getrusage returned 0, so it filled the struct (and a zeroed
    // `rusage` is a valid one anyway).
    let usage = unsafe { usage.assume_init() };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    micros(usage.ru_utime) + micros(usage.ru_stime)
}

/// The machine's CPU time so far, from the first line of `/proc/stat`
/// (every CPU, in clock ticks): `(steal, total)`, where steal is time a
/// hypervisor ran something else while this machine's virtual CPUs had
/// work, and total sums every state. Zeros where it cannot be read.
pub fn cpu_ticks() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    parse_cpu_ticks(&text)
}

/// [`cpu_ticks`] of the text of `/proc/stat`.
pub fn parse_cpu_ticks(text: &str) -> (u64, u64) {
    let Some(line) = text.lines().find(|l| l.starts_with("cpu ")) else {
        return (0, 0);
    };
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map_while(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest and
    // guest_nice are already in user and nice).
    let total = fields.iter().take(8).sum();
    (fields.get(7).copied().unwrap_or(0), total)
}

/// The first number after `name` on the line that starts with it.
fn field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// Bytes the C allocator has handed out and not had back (glibc
/// `mallinfo2`: arena bytes in use plus mmapped chunks). Rust's global
/// allocator and RocksDB's C++ both allocate through it here. `None` where
/// it is not available.
pub fn allocated_bytes() -> Option<u64> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 takes no arguments, only reads the allocator's
        // statistics under its own locks and returns a plain struct.
        let info = unsafe { libc::mallinfo2() };
        Some((info.uordblks + info.hblkhd) as u64)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

/// Hands freed heap memory back to the kernel (glibc `malloc_trim`), so a
/// following `VmRSS` shows what is in use rather than what was once used.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists under
    // its locks; any pad value is valid.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_steal_and_total_ticks() {
        let stat = "cpu  833221 0 182419 108206 21253 0 5284 20239 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        assert_eq!(parse_cpu_ticks(stat), (20239, 1_170_622));
        assert_eq!(parse_cpu_ticks("cpu  1 2 3 4\n"), (0, 10));
        assert_eq!(parse_cpu_ticks(""), (0, 0));
    }

    #[test]
    fn parses_the_kernels_formats() {
        let io = "rchar: 6976\nwchar: 0\nsyscr: 10\nsyscw: 0\nread_bytes: 8192\nwrite_bytes: 0\n";
        assert_eq!(
            ProcIo::parse(io),
            ProcIo {
                read_bytes: 8192,
                read_syscalls: 10
            }
        );
        let status = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n";
        assert_eq!(
            ProcMemory::parse(status),
            ProcMemory {
                rss_bytes: 1 << 20,
                peak_rss_bytes: 2 << 20
            }
        );
        assert_eq!(ProcIo::parse(""), ProcIo::default());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn counts_this_processs_reads_and_memory() {
        let before = ProcIo::now();
        let _ = std::fs::read("/proc/self/status").unwrap();
        assert!(ProcIo::now().since(before).read_syscalls >= 1);
        let m = ProcMemory::now();
        assert!(m.rss_bytes > 0 && m.peak_rss_bytes >= m.rss_bytes);
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn allocated_bytes_sees_a_large_allocation() {
        let before = allocated_bytes().unwrap();
        // black_box: a release build may otherwise elide an allocation
        // nothing reads.
        let v = std::hint::black_box(vec![1u8; 64 << 20]);
        let during = allocated_bytes().unwrap();
        assert!(during >= before + (64 << 20) - 4096, "{before} -> {during}");
        drop(v);
        assert!(allocated_bytes().unwrap() < during);
    }
}
