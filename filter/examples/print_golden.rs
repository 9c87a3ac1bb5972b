//! Prints the values pinned in `tests/golden.rs` (run after a deliberate
//! format change, with a new hash id or format version, never to paper over
//! an accidental one).
use bloomlsm_filter::{BlockedBloomFilter, BloomFilter, Filter, KeyHash};

fn main() {
    for key in [
        &b""[..],
        b"bloomlsm",
        b"https://example.com/",
        &[0u8, 255, 7],
    ] {
        let h = KeyHash::of(key);
        let s = BloomFilter::new(1000, 7).bit_positions(h);
        let b = BlockedBloomFilter::new(4096, 6).bit_positions(h);
        println!("({key:?}, {:#018x}, {s:?}, {b:?}),", h.raw());
    }
    let mut f = BloomFilter::new(128, 3);
    for k in [&b"a"[..], b"b", b"c"] {
        f.insert(k);
    }
    let hex: String = f.to_bytes().iter().map(|b| format!("{b:02x}")).collect();
    println!("{hex}");
}
