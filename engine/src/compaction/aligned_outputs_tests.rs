//! A real compaction cuts its outputs to line up with the level below the
//! output: a grandparent table the merged keys jump over is left out of
//! every output, so it is not rewritten when they move down.

use std::sync::atomic::Ordering;

use super::tests::in_a_store::{l1_over_budget_options, place, put};
use super::tests::table;
use crate::{Db, Options};

fn key(i: u32) -> String {
    format!("k{i:03}")
}

#[test]
fn outputs_leave_a_jumped_grandparent_table_out() {
    let dir = crate::scratch_dirs::scratch_dir();
    let options = Options {
        // Far above what the merge writes: only the alignment rules cut.
        target_file_bytes: 1 << 20,
        ..l1_over_budget_options()
    };
    let db = Db::open(dir.path(), options).unwrap();
    // L3: [k100, k299] holds 200 keys of 1 KiB values (more than an eighth
    // of the target), [k000, k009] a few. L2: one table over the whole
    // range; L1 (over budget): keys each side of [k100, k299].
    let big = "v".repeat(1024);
    let l3_far: Vec<_> = (100..300)
        .map(|i| {
            let mut e = put(&key(i), 1);
            if let Ok(e) = &mut e {
                e.value = big.clone().into_bytes();
            }
            e
        })
        .collect();
    place(&db, 3, (0..10).map(|i| put(&key(i), 1)).collect());
    place(&db, 3, l3_far);
    place(&db, 2, vec![put(&key(5), 2), put(&key(400), 3)]);
    let l1: Vec<_> = (20..40).chain(350..370).map(|i| put(&key(i), 4)).collect();
    place(&db, 1, l1);
    db.inner.last_visible.store(4, Ordering::Release);

    db.inner.compact_while_needed().unwrap();
    assert_eq!(db.stats().compactions, 1);
    let sv = db.inner.current.load_full();
    let l2: Vec<(Vec<u8>, Vec<u8>)> = sv.version.levels[2]
        .iter()
        .map(|t| (t.meta.smallest_key.clone(), t.meta.largest_key.clone()))
        .collect();
    let (gp_smallest, gp_largest) = (key(100).into_bytes(), key(299).into_bytes());
    assert_eq!(l2.len(), 2, "one cut, before the jumped table: {l2:?}");
    for (smallest, largest) in &l2 {
        assert!(
            largest < &gp_smallest || smallest > &gp_largest,
            "an L2 output overlaps the jumped L3 table: {l2:?}"
        );
    }
    // Every key is still there, the newest version of each.
    for i in (0..10).chain(100..300) {
        assert!(
            db.get(key(i).as_bytes()).unwrap().is_some(),
            "{} lost",
            key(i)
        );
    }
    assert_eq!(
        db.get(key(5).as_bytes()).unwrap(),
        Some(format!("{}@2", key(5)).into_bytes())
    );
    for i in (20..40).chain(350..370) {
        let want = format!("{}@4", key(i)).into_bytes();
        assert_eq!(db.get(key(i).as_bytes()).unwrap(), Some(want));
    }
    assert_eq!(
        db.get(key(400).as_bytes()).unwrap(),
        Some(format!("{}@3", key(400)).into_bytes())
    );
}

#[test]
fn the_grandparents_are_the_tables_below_the_output_that_meet_the_inputs() {
    let t = |level, number, smallest, largest| table(level, number, smallest, largest, 10);
    let options = Options {
        l1_bytes: 10,
        level_size_ratio: 10,
        num_levels: 4,
        dynamic_level_bytes: false,
        ..Options::default()
    };
    // L1 [d, f] over budget; it meets L2 [e, g]; together [d, g], which
    // meets L3's [a, d] and [g, h] but not [i, k].
    let levels = vec![
        vec![],
        vec![t(1, 1, "d", "f")],
        vec![t(2, 3, "e", "g")],
        vec![t(3, 4, "a", "d"), t(3, 5, "g", "h"), t(3, 6, "i", "k")],
    ];
    let c = super::pick::pick(&levels, &options, &vec![Vec::new(); 4]).unwrap();
    assert_eq!((c.level, c.output_level), (1, 2));
    let spans: Vec<(&[u8], &[u8])> = c
        .grandparents
        .iter()
        .map(|s| (s.smallest.as_slice(), s.largest.as_slice()))
        .collect();
    assert_eq!(spans, vec![(&b"a"[..], &b"d"[..]), (&b"g"[..], &b"h"[..])]);
}
