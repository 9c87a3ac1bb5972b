//! Unsigned LEB128 varints for block entries (at most 5 bytes for a u32,
//! 10 for a u64).

/// Appends `value` as a varint.
pub(crate) fn put_u64(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Decodes a varint from the start of `bytes`, returning it and its length.
/// `None` when the bytes end early or the value overflows a u64.
pub(crate) fn get_u64(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    for (i, &byte) in bytes.iter().take(10).enumerate() {
        let group = u64::from(byte & 0x7f);
        if i == 9 && group > 0x01 {
            return None;
        }
        value |= group << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// Appends `value` as a varint.
pub(crate) fn put_u32(out: &mut Vec<u8>, value: u32) {
    put_u64(out, u64::from(value));
}

/// Decodes a varint from the start of `bytes`, returning it and its length.
/// `None` when the bytes end early or the value overflows a u32 (at most 5
/// bytes, whose last carries at most 4 bits).
pub(crate) fn get_u32(bytes: &[u8]) -> Option<(u32, usize)> {
    let (value, len) = get_u64(bytes)?;
    let value = u32::try_from(value).ok()?;
    (len <= 5).then_some((value, len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The u32 decoder as it was written on its own, before it went
    /// through `get_u64`.
    fn reference_get_u32(bytes: &[u8]) -> Option<(u32, usize)> {
        let mut value: u32 = 0;
        for (i, &byte) in bytes.iter().take(5).enumerate() {
            let group = u32::from(byte & 0x7f);
            if i == 4 && group > 0x0f {
                return None;
            }
            value |= group << (7 * i);
            if byte & 0x80 == 0 {
                return Some((value, i + 1));
            }
        }
        None
    }

    proptest! {
        #[test]
        fn u32_decoding_is_the_reference(
            bytes in proptest::collection::vec(
                prop_oneof![Just(0x80u8), Just(0xff), Just(0x0f), Just(0x10), any::<u8>()], 0..8),
        ) {
            prop_assert_eq!(get_u32(&bytes), reference_get_u32(&bytes));
        }

        #[test]
        fn round_trip(v in any::<u32>()) {
            let mut out = Vec::new();
            put_u32(&mut out, v);
            prop_assert_eq!(get_u32(&out), Some((v, out.len())));
        }

        #[test]
        fn round_trip_u64(v in any::<u64>()) {
            let mut out = Vec::new();
            put_u64(&mut out, v);
            prop_assert_eq!(get_u64(&out), Some((v, out.len())));
        }

        #[test]
        fn never_panics_u64(bytes in proptest::collection::vec(any::<u8>(), 0..12)) {
            let _ = get_u64(&bytes);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..8)) {
            let _ = get_u32(&bytes);
        }
    }

    #[test]
    fn rejects_overflow_and_truncation() {
        assert_eq!(get_u32(&[0xff, 0xff, 0xff, 0xff, 0x1f]), None);
        assert_eq!(get_u32(&[0x80]), None);
        assert_eq!(get_u32(&[]), None);
        let mut max = vec![0xff; 9];
        max.push(0x01);
        assert_eq!(get_u64(&max), Some((u64::MAX, 10)));
        max[9] = 0x02;
        assert_eq!(get_u64(&max), None);
        assert_eq!(get_u64(&[0xff; 10]), None);
        assert_eq!(get_u64(&[0x80]), None);
    }
}
