//! Times Ribbon construction and lookups against the blocked Bloom filter
//! in one process, the fastest of several runs of each, the two kinds
//! alternating (so a loaded machine slows both alike; the criterion bench
//! `benches/ribbon.rs` is the other measurement).
//!
//! `cargo run --release -p bloomlsm-filter --example ribbon_profile -- [keys] [what]`
//! where `what` is `build`, `lookup` (lookups of absent and present keys,
//! both kinds through `&dyn Filter`: as built, as copies made after both
//! builds, and the blocked copies inlined into the loop; see the notes
//! in the code), `all`, `once` (one Ribbon build, for
//! `valgrind --tool=callgrind`), `medians [reps]` (builds of both kinds
//! alternating, 31 of each by default, the medians of their thread CPU
//! time and their ratio),
//! `probe-present` and `probe-absent` (one Ribbon lookup of each key, or
//! of as many absent keys, nothing timed: for callgrind),
//! `repeat [times]` (that many Ribbon builds,
//! 100 by default, for the process's CPU time) or `far` (absent lookups, hash given, on
//! filters of `keys` keys at 10 bits per key with random contents, as in
//! the bench; add `ribbon-first` to make the Ribbon one first) (1,000,000
//! keys, `all` by default). Out of cache:
//! `ribbon_profile 1718000000 far` (2 GiB each).

use std::hint::black_box;
use std::time::Instant;

use bloomlsm_filter::{BlockedBloomFilter, Filter, InsertFilter, KeyHash, RibbonFilter};

#[path = "../benches/support/mod.rs"]
mod support;

fn hashes(n: u64, offset: u64) -> Vec<KeyHash> {
    (offset..offset + n)
        .map(|i| KeyHash::of(&i.to_le_bytes()))
        .collect()
}

/// Nanoseconds per element of the fastest of `reps` runs of `a` and of
/// `b`, run in alternation.
fn best_pair(reps: u32, elements: u64, a: impl FnMut(), b: impl FnMut()) -> (f64, f64) {
    let (a, b) = timed_pairs(reps, elements, wall_ns, a, b);
    let best = |t: &[f64]| t.iter().copied().fold(f64::INFINITY, f64::min);
    (best(&a), best(&b))
}

/// Nanoseconds per element of each of `reps` runs of `a` and of `b`, run
/// in alternation, timed by `clock` (nanoseconds).
fn timed_pairs(
    reps: u32,
    elements: u64,
    clock: fn() -> f64,
    mut a: impl FnMut(),
    mut b: impl FnMut(),
) -> (Vec<f64>, Vec<f64>) {
    let (mut times_a, mut times_b) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let t = clock();
        a();
        times_a.push((clock() - t) / elements as f64);
        let t = clock();
        b();
        times_b.push((clock() - t) / elements as f64);
    }
    (times_a, times_b)
}

/// Wall-clock nanoseconds since the first call.
fn wall_ns() -> f64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64() * 1e9
}

/// This thread's CPU time in nanoseconds: unlike wall time, it leaves
/// out the times the thread waits while other processes run (on a loaded
/// machine most builds of 60,000 keys or more are preempted).
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn thread_cpu_ns() -> f64 {
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }
    unsafe extern "C" {
        fn clock_gettime(clock: i32, time: *mut Timespec) -> i32;
    }
    /// `CLOCK_THREAD_CPUTIME_ID` on Linux.
    const THREAD_CPUTIME: i32 = 3;
    let mut t = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` (the C library's, linked by std on Linux)
    // writes one `struct timespec`, two 64-bit fields on 64-bit Linux,
    // into `t`, which lives through the call.
    let rc = unsafe { clock_gettime(THREAD_CPUTIME, &mut t) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    t.tv_sec as f64 * 1e9 + t.tv_nsec as f64
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
fn thread_cpu_ns() -> f64 {
    wall_ns()
}

/// The median of `times`. REQUIRES: not empty.
fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn far(n: u64) {
    // Built in this order or the other (`ribbon-first`): memory allocated
    // at different times may sit differently in the machine.
    let ribbon_first = std::env::args().any(|a| a == "ribbon-first");
    let early = ribbon_first.then(|| support::random_ribbon(n, 10.0));
    let blocked = support::random_blocked(n, 10.0);
    let ribbon = early.unwrap_or_else(|| support::random_ribbon(n, 10.0));
    let probes = 2_000_000u64;
    let base = std::cell::Cell::new(1u64 << 62);
    let run = |f: &dyn Filter| {
        // Fresh probes every run, so no run finds the last one's lines.
        let first = base.get();
        base.set(first + probes);
        let hits = (first..first + probes)
            .filter(|&i| f.contains_hash(KeyHash::from_raw(support::splitmix(i))))
            .count();
        black_box(hits);
    };
    let (b, r) = best_pair(9, probes, || run(&blocked), || run(&ribbon));
    println!(
        "absent lookup, hash given, {n} keys ({} MiB each): blocked {b:.2} ns, ribbon {r:.2} ns, ratio {:.2}",
        ribbon.memory_bytes() >> 20,
        r / b
    );
    // Each probe's hash depends on the previous answer: one at a time.
    let chained = |f: &dyn Filter| {
        let mut i = base.get();
        for _ in 0..probes / 4 {
            i += 1 + u64::from(f.contains_hash(KeyHash::from_raw(support::splitmix(i))));
        }
        base.set(i);
    };
    let (b, r) = best_pair(9, probes / 4, || chained(&blocked), || chained(&ribbon));
    println!(
        "absent lookup, chained: blocked {b:.2} ns, ribbon {r:.2} ns, ratio {:.2}",
        r / b
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let what = args.get(2).map_or("all", String::as_str);
    if what == "far" {
        far(n);
        return;
    }
    let present = hashes(n, 0);
    let reps = if n >= 10_000_000 { 3 } else { 7 };
    if what == "once" {
        black_box(RibbonFilter::from_hashes(&present, 10.0));
        return;
    }
    if what == "probe-present" || what == "probe-absent" {
        // Ribbon lookups only (every key, or as many absent ones), for
        // `valgrind --tool=callgrind --toggle-collect='*query_avx2*'`.
        let ribbon = RibbonFilter::from_hashes(&present, 10.0);
        let probes = if what == "probe-present" {
            present.clone()
        } else {
            hashes(n, n)
        };
        black_box(probes.iter().filter(|&&h| ribbon.contains_hash(h)).count());
        return;
    }
    if what == "repeat" {
        // For the process's CPU time (`/usr/bin/time -f %U`): `times`
        // Ribbon builds, nothing else timed.
        let times: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(100);
        for _ in 0..times {
            black_box(RibbonFilter::from_hashes(&present, 10.0));
        }
        return;
    }
    // One build of each kind over the same keys (the closures only borrow
    // `present`, so each is Copy and serves every mode below).
    let build_blocked = || {
        let mut f = BlockedBloomFilter::with_bits_per_key(n, 10.0);
        present.iter().for_each(|&h| f.insert_hash(h));
        black_box(f);
    };
    let build_ribbon = || {
        black_box(RibbonFilter::from_hashes(&present, 10.0));
    };
    if what == "medians" {
        let reps: u32 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(31);
        let (blocked, ribbon) = timed_pairs(reps, n, thread_cpu_ns, build_blocked, build_ribbon);
        let (blocked, ribbon) = (median(blocked), median(ribbon));
        println!(
            "build {n} keys, thread CPU time, medians of {reps}: blocked {blocked:.2} ns/key, ribbon {ribbon:.2} ns/key, ratio {:.2}",
            ribbon / blocked
        );
        return;
    }
    if what == "build" || what == "all" {
        let (blocked, ribbon) = best_pair(reps, n, build_blocked, build_ribbon);
        println!(
            "build {n} keys: blocked {blocked:.2} ns/key, ribbon {ribbon:.2} ns/key, ratio {:.2}",
            ribbon / blocked
        );
    }
    if what == "lookup" || what == "all" {
        let mut blocked = BlockedBloomFilter::with_bits_per_key(n, 10.0);
        present.iter().for_each(|&h| blocked.insert_hash(h));
        let ribbon = RibbonFilter::from_hashes(&present, 10.0);
        // Two things unrelated to the filters move this ratio (README,
        // "Filter speed"), so both kinds are timed under the same ones:
        // - The call. Through `&dyn Filter` hidden from the optimizer both
        //   lookups are out-of-line calls. Given the concrete filter, the
        //   compiler inlines the blocked lookup into the timed loop, while
        //   the Ribbon's is still a call (to the copy chosen for the CPU):
        //   the fewer instructions a lookup, the more of them overlap
        //   their misses. That is timed too on the copies, "inlined".
        // - The frames under the arrays. The blocked array is built from
        //   whatever memory the kernel has free; the Ribbon's while its
        //   construction holds about 3 GB of temporaries, which leaves it
        //   nearly contiguous. Copies made after both builds, blocked,
        //   Ribbon, Ribbon, blocked, take their frames from the same free
        //   memory.
        let b1 = blocked.clone();
        let r1 = ribbon.clone();
        let r2 = ribbon.clone();
        let b2 = blocked.clone();
        let all: [&dyn Filter; 6] = [&blocked, &ribbon, &b1, &r1, &r2, &b2];
        let hidden = all.map(black_box);
        for (name, probes) in [
            ("absent", hashes(4_000_000, n)),
            ("present", present.iter().step_by(7).copied().collect()),
        ] {
            let count = probes.len() as u64;
            let dyn_run = |f: &dyn Filter| {
                black_box(probes.iter().filter(|&&h| f.contains_hash(h)).count());
            };
            let inlined_run = |f: &BlockedBloomFilter| {
                black_box(probes.iter().filter(|&&h| f.contains_hash(h)).count());
            };
            // The fastest of `reps` runs of each, the eight in turn.
            let mut best = [f64::INFINITY; 8];
            for _ in 0..reps {
                for (i, best) in best.iter_mut().enumerate() {
                    let t = Instant::now();
                    match hidden.get(i) {
                        Some(&f) => dyn_run(f),
                        None if i == 6 => inlined_run(&b1),
                        None => inlined_run(&b2),
                    }
                    *best = best.min(t.elapsed().as_secs_f64() * 1e9 / count as f64);
                }
            }
            let [b, r, b1, r1, r2, b2, i1, i2] = best;
            println!(
                "{name} lookup, hash given, {n} keys, as built: blocked {b:.2} ns, ribbon {r:.2} ns, ratio {:.2}",
                r / b
            );
            let (bc, rc) = ((b1 + b2) / 2.0, (r1 + r2) / 2.0);
            println!(
                "{name} lookup, copies: blocked {bc:.2} ns, ribbon {rc:.2} ns, ratio {:.2} (pairs {:.2} {:.2})",
                rc / bc,
                r1 / b1,
                r2 / b2
            );
            let inlined = (i1 + i2) / 2.0;
            println!(
                "{name} lookup, copies, blocked inlined: {inlined:.2} ns, ratio {:.2}",
                rc / inlined
            );
        }
    }
}
