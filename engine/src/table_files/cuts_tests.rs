//! `OutputCuts` on hand-built grandparent levels: each rule cuts where it
//! should and nowhere else, and random runs keep the size bounds.

use proptest::prelude::*;

use super::cuts::{OutputCuts, TableSpan};

fn key(n: u32) -> Vec<u8> {
    format!("k{n:06}").into_bytes()
}

fn span(smallest: u32, largest: u32, file_size: u64) -> TableSpan {
    TableSpan {
        smallest: key(smallest),
        largest: key(largest),
        file_size,
    }
}

/// Feeds `keys` (each adding `entry_bytes` to the open table) and returns
/// the first key of every table after the first.
fn cut_points(
    cuts: &mut OutputCuts,
    keys: impl IntoIterator<Item = u32>,
    entry_bytes: u64,
) -> Vec<u32> {
    let mut open: Option<u64> = None;
    let mut points = Vec::new();
    for k in keys {
        if cuts.cut_before(&key(k), open) {
            points.push(k);
            open = None;
        }
        open = Some(open.unwrap_or(0) + entry_bytes);
    }
    points
}

#[test]
fn one_table_never_cuts() {
    let mut cuts = OutputCuts::one_table();
    assert!(cut_points(&mut cuts, 0..100_000, 1 << 20).is_empty());
}

#[test]
fn without_grandparents_tables_are_cut_at_the_target_size() {
    let mut cuts = OutputCuts::new(1000, Vec::new());
    // 100 bytes per key: the open table reaches 1000 after 10 keys.
    assert_eq!(cut_points(&mut cuts, 0..35, 100), vec![10, 20, 30]);
}

#[test]
fn a_table_is_cut_early_at_a_grandparent_boundary_past_half_the_target() {
    // Grandparent tables end at 5 (too early: 500 bytes < 50%) and 7.
    let gp = vec![span(0, 4, 10), span(6, 6, 10), span(20, 29, 10)];
    let mut cuts = OutputCuts::new(1000, gp);
    let points = cut_points(&mut cuts, 0..12, 100);
    // Key 5 leaves [0, 4]: one boundary crossed, so the bar is 55% and the
    // table's 500 bytes are under it. Key 6 enters [6, 6]: two crossed, the
    // bar is 60%, and the table's 600 bytes reach it. After the cut, no
    // later key reaches the bar of the new table.
    assert_eq!(
        points,
        vec![6],
        "cut where the output reaches the bar at a boundary"
    );
}

#[test]
fn no_early_cut_without_a_boundary() {
    // One grandparent table spans every key: no boundary is ever crossed,
    // so tables are cut only at twice the target (there are grandparents).
    let mut cuts = OutputCuts::new(1000, vec![span(0, 1000, 1 << 20)]);
    assert_eq!(cut_points(&mut cuts, 0..45, 100), vec![20, 40]);
}

#[test]
fn with_grandparents_a_table_grows_past_the_target_to_reach_a_boundary() {
    // Boundaries only at 14/15 (past the target of 10 keys' bytes): the
    // table is not cut at the target but where it leaves [0, 14].
    let mut cuts = OutputCuts::new(1000, vec![span(0, 14, 10), span(15, 40, 10)]);
    assert_eq!(cut_points(&mut cuts, 0..20, 100)[0], 15);
}

#[test]
fn the_bar_rises_five_percent_per_boundary_crossed() {
    // Single-key grandparent tables at every even key: each new key crosses
    // one boundary (into or out of a table).
    let gp: Vec<TableSpan> = (0..50).map(|i| span(2 * i, 2 * i, 1)).collect();
    let mut cuts = OutputCuts::new(10_000, gp);
    // 1,000 bytes per key: before key n the open table holds 1,000 n bytes
    // and n boundaries were crossed (entering a table counts, as leaving
    // one does), so the bar is 50 + 5 n percent, at most 90%, of 10,000
    // bytes: 9,000 bytes reach it first, at n = 9 (the cap).
    let points = cut_points(&mut cuts, 0..40, 1000);
    assert_eq!(
        points[0], 9,
        "first cut at 9,000 bytes: bar 50% + 5 x 8 = 90%"
    );
}

#[test]
fn a_key_jumping_a_large_grandparent_table_cuts_before_it() {
    // Output keys 0..3, then 50..: [10, 20] lies between, 200 bytes > 1000 / 8.
    let gp = vec![span(10, 20, 200)];
    let mut cuts = OutputCuts::new(1000, gp);
    let points = cut_points(&mut cuts, (0..3).chain(50..53), 10);
    assert_eq!(
        points,
        vec![50],
        "the jumped table is left out of both outputs"
    );
}

#[test]
fn a_key_jumping_a_small_grandparent_table_does_not_cut() {
    let gp = vec![span(10, 20, 100)];
    let mut cuts = OutputCuts::new(1000, gp);
    assert!(cut_points(&mut cuts, (0..3).chain(50..53), 10).is_empty());
}

#[test]
fn jumping_from_inside_a_table_needs_three_boundaries() {
    // The run starts inside [0, 4]; key 30 leaves it (1), enters and leaves
    // [10, 20] (2, 3): a whole 500-byte table jumped.
    let gp = vec![span(0, 4, 10), span(10, 20, 500)];
    let mut cuts = OutputCuts::new(1000, gp.clone());
    assert_eq!(cut_points(&mut cuts, [1, 2, 30, 31], 10), vec![30]);
    // Landing inside the next table is not a jump: [10, 20] is entered.
    let mut cuts = OutputCuts::new(1000, gp);
    assert!(cut_points(&mut cuts, [1, 2, 15, 16], 10).is_empty());
}

#[test]
fn an_output_overlapping_too_many_grandparent_bytes_is_cut() {
    // Each grandparent table is 10x the target: an output meeting three of
    // them (30x) passes the 25x bound.
    let gp: Vec<TableSpan> = (0..10).map(|i| span(10 * i, 10 * i + 9, 10_000)).collect();
    let mut cuts = OutputCuts::new(1000, gp);
    // 1 byte per key: far under every size bar.
    let points = cut_points(&mut cuts, 0..100, 1);
    assert_eq!(
        points,
        vec![20, 40, 60, 80],
        "each output meets at most two tables"
    );
}

proptest! {
    /// Whatever the grandparents: no table passes twice the target size
    /// (the target, without grandparents) by more than one entry, and a
    /// table under half the target ends only where a key crossed a
    /// grandparent boundary.
    #[test]
    fn random_runs_keep_the_size_bounds(
        bounds in proptest::collection::btree_set(0u32..2000, 0..60),
        sizes in proptest::collection::vec(1u64..5000, 30),
        keys in proptest::collection::btree_set(0u32..2000, 1..400),
        entry_bytes in 1u64..300,
        target in 100u64..4000,
    ) {
        let bounds: Vec<u32> = bounds.into_iter().collect();
        let gp: Vec<TableSpan> = bounds
            .chunks_exact(2)
            .zip(&sizes)
            .map(|(w, &size)| span(w[0], w[1], size))
            .collect();
        let inside = |k: u32| gp.iter().position(|s| key(k) >= s.smallest && key(k) <= s.largest);
        let limit = if gp.is_empty() { target } else { 2 * target };
        let mut cuts = OutputCuts::new(target, gp.clone());
        let mut open: Option<u64> = None;
        let mut prev: Option<u32> = None;
        for k in keys {
            let cut = cuts.cut_before(&key(k), open);
            if let Some(size) = open {
                prop_assert!(size < limit + entry_bytes, "a table grew past its limit");
                if cut && size < target / 2 {
                    let p = prev.expect("an open table has a previous key");
                    let crossed = inside(p) != inside(k)
                        || gp.iter().any(|s| s.smallest > key(p) && s.smallest <= key(k));
                    prop_assert!(crossed, "a small table cut away from any boundary");
                }
            }
            if cut {
                open = None;
            }
            open = Some(open.unwrap_or(0) + entry_bytes);
            prev = Some(k);
        }
    }
}
