//! Prints the values pinned in `tests/golden.rs` (run after a deliberate
//! format change, with a new hash id or format version, never to paper over
//! an accidental one): `cargo run -p bloomlsm-filter --example print_golden`.
use bloomlsm_filter::{
    BlockedBloomFilter, BloomFilter, Filter, InsertFilter, KeyHash, RibbonFilter,
};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

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
    println!("standard fixture: {}", hex(&f.to_bytes()));
    let mut b = BlockedBloomFilter::new(1024, 7);
    for k in [&b"a"[..], b"b", b"c"] {
        b.insert(k);
    }
    println!("blocked k=7 fixture: {}", hex(&b.to_bytes()));
    let r = RibbonFilter::from_keys([&b"a"[..], b"b", b"c"], 2.0);
    println!("ribbon fixture (seed {}): {}", r.seed(), hex(&r.to_bytes()));
    let maybe: Vec<u32> = (0..64u32)
        .filter(|i| r.contains(&i.to_le_bytes()))
        .collect();
    println!("ribbon fixture maybe among 0..64: {maybe:?}");
    let r = RibbonFilter::from_keys([&b"a"[..], b"b", b"c"], 5.5);
    println!(
        "ribbon head-and-tail fixture, 5.5 bits/key (seed {}): {}",
        r.seed(),
        hex(&r.to_bytes())
    );
    let maybe: Vec<u32> = (0..256u32)
        .filter(|i| r.contains(&i.to_le_bytes()))
        .collect();
    println!("ribbon head-and-tail fixture maybe among 0..256: {maybe:?}");
    let big = RibbonFilter::from_keys((0..1000u32).map(|i| i.to_le_bytes()), 7.0);
    let bytes = big.to_bytes();
    let maybe: Vec<u32> = (1000..1400u32)
        .filter(|i| big.contains(&i.to_le_bytes()))
        .collect();
    println!(
        "ribbon 1000 keys at 7 bits/key: seed {}, {} bytes, crc32 of bytes before the checksum {:#010x}, maybe among 1000..1400: {maybe:?}",
        big.seed(),
        bytes.len(),
        crc32(&bytes[..bytes.len() - 4])
    );
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
