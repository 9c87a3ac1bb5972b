//! A store as a build from before table format version 2 left it: every
//! table of format version 1 (its index block a data block), the manifest
//! of store format version 4.

use std::path::Path;
use std::sync::Arc;

use bloomlsm::filter::FilterKind;
use bloomlsm_sstable::{Table, TableBuilder, TableIter, TableOptions};

use super::{read_manifest, write_manifest};

/// Rewrites every table of the closed store in `dir` as a table of format
/// version 1 with the same entries and filter, and the manifest as version
/// 4 naming their new sizes.
pub fn make_version_4_store(dir: &Path, block_size: usize) {
    let mut manifest = read_manifest(dir);
    for record in &mut manifest.tables {
        let path = dir.join(format!("{:06}.sst", record.numbers[0]));
        let file = Arc::new(std::fs::File::open(&path).unwrap());
        let table = Arc::new(Table::open_at(file, &path, record.numbers[1], 1, None).unwrap());
        let props = table.properties().clone();
        let options = TableOptions {
            block_size,
            filter_kind: props.filter_kind.unwrap_or(FilterKind::Blocked),
            bits_per_key: props.bits_per_key,
            format_version: 1,
            ..TableOptions::default()
        };
        let old = path.with_extension("v1");
        let mut builder = TableBuilder::new(std::fs::File::create(&old).unwrap(), &old, options);
        for entry in TableIter::new(table, false) {
            let e = entry.unwrap();
            builder.add(&e.user_key, e.seq, e.kind, &e.value).unwrap();
        }
        let summary = builder.finish().unwrap();
        std::fs::rename(&old, &path).unwrap();
        record.numbers[1] = summary.file_size;
    }
    manifest.version = 4;
    write_manifest(dir, &manifest);
}
