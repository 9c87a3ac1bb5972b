//! `ribbon_sizing` is public and takes any `u64` item count. Up to
//! `MAX_RIBBON_ITEMS` every figure must fit (no overflow panic in debug, no
//! wrap-around in release); past it the call refuses by name, as
//! `Vec::with_capacity` does, instead of returning wrapped figures. Found
//! through `bloomlsm size --items 18446744073709551615`, which refuses such
//! counts before calling it.

use bloomlsm_filter::{MAX_RIBBON_ITEMS, RibbonTarget, ribbon_sizing};

const TARGETS: [RibbonTarget; 5] = [
    RibbonTarget::BitsPerKey(0.1),
    RibbonTarget::BitsPerKey(40.0),
    RibbonTarget::Fpr(0.5),
    RibbonTarget::Fpr(1e-12),
    RibbonTarget::MemoryBytes(1000),
];

#[test]
fn the_largest_item_count_sized_does_not_overflow() {
    for target in TARGETS {
        let s = ribbon_sizing(MAX_RIBBON_ITEMS, target);
        assert!(s.slots >= MAX_RIBBON_ITEMS, "{target:?}: {s:?}");
        assert!(s.serialized_bytes > s.solution_bytes, "{target:?}: {s:?}");
        assert!(
            s.bits_per_key >= 0.0 && s.expected_fpr > 0.0 && s.expected_fpr <= 1.0,
            "{target:?}: {s:?}"
        );
    }
}

#[test]
#[should_panic(expected = "more than MAX_RIBBON_ITEMS")]
fn a_count_past_the_largest_is_refused_by_name() {
    let _ = ribbon_sizing(u64::MAX, RibbonTarget::BitsPerKey(0.1));
}
