use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

use super::*;

/// The table order as a `BTreeMap` key: user key ascending, then sequence
/// descending.
type ModelKey = (Vec<u8>, std::cmp::Reverse<u64>);

fn model_key(user_key: &[u8], seq: u64) -> ModelKey {
    (user_key.to_vec(), std::cmp::Reverse(seq))
}

fn value_for(user_key: &[u8], seq: u64) -> Vec<u8> {
    // Lengths from 0 to past a quarter arena chunk, so large nodes take
    // chunks of their own between small ones.
    let len = match seq % 97 {
        0 => 20_000,
        n => (n as usize * 7) % 300,
    };
    (0..len)
        .map(|i| user_key[i % user_key.len()] ^ seq as u8 ^ i as u8)
        .collect()
}

fn kind_for(seq: u64) -> EntryKind {
    if seq.is_multiple_of(5) {
        EntryKind::Delete
    } else {
        EntryKind::Put
    }
}

#[test]
fn iterates_and_seeks_like_a_sorted_map() {
    let list = SkipList::new();
    let mut model = BTreeMap::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for seq in 1..20_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Few distinct keys of varied lengths, so keys repeat with many
        // sequence numbers and prefixes of each other occur.
        let key = format!("{}", x % 3000)
            .repeat(1 + (x % 3) as usize)
            .into_bytes();
        let value = value_for(&key, seq);
        list.insert(&key, seq, kind_for(seq), &value);
        model.insert(model_key(&key, seq), (kind_for(seq), value));
    }
    assert_eq!(list.len(), model.len());
    let got: Vec<_> = list
        .iter()
        .map(|e| (model_key(e.user_key, e.seq), (e.kind, e.value.to_vec())))
        .collect();
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(got == want, "iteration differs from the model");
    for probe in 0..3000u64 {
        let key = format!("{probe}").into_bytes();
        for seq in [0, 5000, u64::MAX >> 8] {
            let got = list
                .iter_from(&key, seq)
                .next()
                .map(|e| model_key(e.user_key, e.seq));
            let want = model
                .range(model_key(&key, seq)..)
                .next()
                .map(|(k, _)| k.clone());
            assert_eq!(got, want, "seek to {probe}@{seq}");
        }
    }
}

#[test]
fn memory_bytes_counts_every_node_and_little_more() {
    let list = SkipList::new();
    let empty = list.memory_bytes();
    assert!(empty > 0, "the head node is counted");
    let mut nodes = 0;
    for seq in 1..=10_000u64 {
        let key = seq.to_be_bytes();
        list.insert(&key, seq, EntryKind::Put, &[1u8; 100]);
        // A node: at least one link, the header word, two one-byte
        // varints, the key and the value, rounded up to 8.
        nodes += (8 + HEADER_BYTES + 2 + 8 + 100usize).div_ceil(8) * 8;
    }
    let used = list.memory_bytes() - empty;
    // Towers average 4/3 links (8/3 bytes above one link per node) and
    // chunk ends are abandoned; anything past 12 bytes a node is a leak in
    // the accounting.
    assert!(used >= nodes, "{used} < {nodes}");
    assert!(
        used <= nodes + 12 * 10_000,
        "{used} counted for {nodes} of nodes"
    );
}

#[test]
fn readers_see_sorted_whole_entries_while_a_writer_inserts() {
    let list = SkipList::new();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let readers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut passes = 0;
                    while !done.load(AtomicOrdering::Acquire) || passes < 2 {
                        let mut last: Option<ModelKey> = None;
                        let mut seen = 0;
                        for e in list.iter() {
                            // A torn node would show a value that does
                            // not match its key and sequence.
                            assert_eq!(e.value, value_for(e.user_key, e.seq).as_slice());
                            assert_eq!(e.kind, kind_for(e.seq));
                            let k = model_key(e.user_key, e.seq);
                            assert!(last.as_ref().is_none_or(|l| *l < k), "out of order");
                            last = Some(k);
                            seen += 1;
                        }
                        assert!(seen <= list.len());
                        passes += 1;
                    }
                    passes
                })
            })
            .collect();
        let mut x = 1u64;
        for seq in 1..30_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = (x >> 40).to_string().into_bytes();
            list.insert(&key, seq, kind_for(seq), &value_for(&key, seq));
        }
        done.store(true, AtomicOrdering::Release);
        for r in readers {
            assert!(r.join().unwrap() >= 2);
        }
    });
    assert_eq!(list.iter().count(), 29_999);
}

#[test]
fn varints_round_trip_at_every_width() {
    for n in [
        0usize,
        1,
        127,
        128,
        16_383,
        16_384,
        65_536,
        64 << 20,
        usize::MAX,
    ] {
        let mut buf = [0u8; 10];
        let mut at = buf.as_mut_ptr();
        // SAFETY: 10 bytes hold any usize varint.
        unsafe { write_varint(&mut at, n) };
        assert_eq!(at as usize - buf.as_ptr() as usize, varint_len(n));
        let mut at = buf.as_ptr();
        // SAFETY: written just above.
        assert_eq!(unsafe { read_varint(&mut at) }, n);
    }
}

#[test]
fn heights_follow_the_branching_factor() {
    let mut rng = 0x2545_f491;
    let mut counts = [0usize; MAX_HEIGHT + 1];
    for _ in 0..100_000 {
        counts[random_height(&mut rng)] += 1;
    }
    // About 3/4 at height 1 and 3/16 at height 2.
    assert!((73_000..77_000).contains(&counts[1]), "{counts:?}");
    assert!((17_000..20_500).contains(&counts[2]), "{counts:?}");
    assert!(counts[MAX_HEIGHT] < 10, "{counts:?}");
}

#[test]
fn seeks_find_every_published_node_while_a_writer_inserts() {
    // Readers descend from the top level (not only level 0, as `iter`
    // does) while towers are being linked: every node published before a
    // seek starts must be found whole, and its successor must follow it.
    use std::sync::atomic::AtomicU64;
    fn key_of(seq: u64) -> Vec<u8> {
        let x = seq.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17);
        // Half the keys share an 8-byte prefix, so the prefix compare and
        // the memcmp both decide searches.
        if seq.is_multiple_of(2) {
            format!("shared::{x:016x}").into_bytes()
        } else {
            format!("{x:016x}").into_bytes()
        }
    }
    let list = SkipList::new();
    let published = AtomicU64::new(0);
    const N: u64 = 40_000;
    std::thread::scope(|s| {
        let readers: Vec<_> = (0..2u64)
            .map(|r| {
                let (list, published) = (&list, &published);
                s.spawn(move || {
                    let mut x = 0x2545_f491_4f6c_dd1d ^ r;
                    let mut seeks = 0u64;
                    loop {
                        let n = published.load(AtomicOrdering::Acquire);
                        if n == 0 {
                            std::hint::spin_loop();
                            continue;
                        }
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let seq = 1 + x % n;
                        let key = key_of(seq);
                        let mut it = list.iter_from(&key, u64::MAX >> 8);
                        let e = it.next().unwrap_or_else(|| panic!("{seq} lost"));
                        assert_eq!((e.user_key, e.seq), (key.as_slice(), seq));
                        assert_eq!(e.value, value_for(e.user_key, e.seq).as_slice());
                        if let Some(next) = it.next() {
                            assert!(
                                model_key(e.user_key, e.seq) < model_key(next.user_key, next.seq),
                                "out of order after {seq}"
                            );
                        }
                        seeks += 1;
                        if n == N && seeks > 20_000 {
                            return seeks;
                        }
                    }
                })
            })
            .collect();
        for seq in 1..=N {
            let key = key_of(seq);
            list.insert(&key, seq, kind_for(seq), &value_for(&key, seq));
            published.store(seq, AtomicOrdering::Release);
        }
        for r in readers {
            assert!(r.join().unwrap() > 20_000);
        }
    });
}

#[test]
fn a_small_list_read_while_written_is_sound_under_miri() {
    // Small enough for `cargo +nightly miri test -p bloomlsm --lib
    // skiplist`, which checks the node publication for data races and the
    // arena's pointers for aliasing; large values take chunks of their own
    // and the small ones fill more than one chunk.
    let list = SkipList::new();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut passes = 0;
            while !done.load(AtomicOrdering::Acquire) || passes < 2 {
                let mut last: Option<ModelKey> = None;
                for e in list.iter() {
                    assert_eq!(e.value, value_for(e.user_key, e.seq).as_slice());
                    let k = model_key(e.user_key, e.seq);
                    assert!(last.as_ref().is_none_or(|l| *l < k), "out of order");
                    last = Some(k);
                    if e.seq % 8 == 0 {
                        let found = list.iter_from(e.user_key, e.seq).next();
                        assert_eq!(
                            found.map(|f| (f.user_key, f.seq)),
                            Some((e.user_key, e.seq))
                        );
                    }
                }
                passes += 1;
            }
        });
        // About 70 KiB of small nodes, and two 20,000-byte values.
        for seq in 1..=450u64 {
            let key = format!("key{:05}", (seq * 37) % 101).into_bytes();
            list.insert(&key, seq, kind_for(seq), &value_for(&key, seq));
        }
        done.store(true, AtomicOrdering::Release);
        reader.join().unwrap();
    });
}
