#![no_main]
//! Drives a `Db` with the operations arbitrary bytes decode to
//! (`bloomlsm::fuzzing::db_model`, shared with the property test
//! `engine/tests/engine_suite/db_model.rs`) and checks every read against a
//! `BTreeMap`. Panics at the first wrong answer, and at any failed
//! operation (the store is healthy: every operation must succeed).
//!
//! Shape (first bytes): one of four narrow layouts (memtable 256 to 2,048
//! bytes, blocks of 64 or 128 bytes, tables cut at 256 or 512 bytes, L1 of
//! 256 bytes to 2 KiB, size ratio 2 or 3, 7 levels, static or dynamic level
//! budgets), deletion-triggered compaction at 0.25 or off, the filter kind
//! (standard, blocked, ribbon) and policy (uniform, per level, optimized;
//! 0 to 31.875 bits per key) of the first open. Background work is off.
//!
//! Operations (up to 2,000): `Put` (keys of 1 to 3 bytes over
//! `0x00 0x01 a 0xfe 0xff`, 44% of them among 12 hot keys that are
//! prefixes of each other or the smallest and largest of their length, so
//! their versions lie in the memtable, several L0 tables and several
//! levels at once; values of 0 to 544 bytes naming their write),
//! `Delete`, `Batch` (2 to 6 puts and deletes, often of the same key, or 8
//! puts of neighbouring keys; read back whole), `Get`, `Scan` of a range
//! (included, excluded or open bounds, a start past the end included),
//! `TakeSnapshot` (4 slots, each with a copy of the model),
//! `SnapshotGet`, `SnapshotScan`, `ReleaseSnapshot`, `Flush`, `Compact`
//! (rare: flushes and the store's own compactions build the tree),
//! `RebuildFilters` at any policy (in place, or copies once a file holds
//! too many old filters), `IterAcrossRebuild` (an iterator opened, a key
//! written, filters rebuilt, flushed or compacted: the iterator reads the
//! range as it was) and `Reopen` with the same or another filter kind and
//! policy (snapshots released first). After every operation that changed
//! the tree (an inline flush, compaction, trivial move or filter
//! rebalancing, or an explicit one) the whole store and every held
//! snapshot are scanned, and the hot keys and an eighth of the others
//! read by get; every key at the end. A failing input's `Case` debug
//! output is the Rust that replays it (`run_case` in a test);
//! `BLOOMLSM_DB_MODEL_INPUT=FILE cargo test -p bloomlsm --test engine_suite
//! db_model::replay` replays the file itself.
//!
//! Run with `-len_control=0` (as `make fuzz` does): libFuzzer otherwise
//! starts from inputs of a few bytes, which build no deep tree.
use libfuzzer_sys::fuzz_target;

use bloomlsm::fuzzing::db_model::{Case, run_case};

fuzz_target!(|data: &[u8]| {
    let case = Case::from_bytes(data);
    let base = std::path::Path::new("/dev/shm");
    let base = if base.is_dir() {
        base.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!("bloomlsm-fuzz-db-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    run_case(&case, &dir);
    let _ = std::fs::remove_dir_all(&dir);
});
