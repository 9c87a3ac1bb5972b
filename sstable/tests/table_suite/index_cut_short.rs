//! An index block cut short but checksummed as cut (a footer whose index
//! size was written wrong, a hostile file) must not open as a table with
//! fewer blocks: its keys in the missing blocks would read as absent, and
//! a store would answer with an older version or nothing. Version 2's
//! index has no count and no restart array, so every cut at an entry
//! boundary decodes on its own; the table must still be refused, naming
//! the index block.
#![allow(clippy::unwrap_used)] // In tests a panic is the failure report.

use crate::common;

use std::sync::Arc;

use bloomlsm_filter::KeyHash;
use bloomlsm_sstable::format::{FOOTER_LEN, block_trailer};
use bloomlsm_sstable::fuzzing::MemFile;
use bloomlsm_sstable::{BlockHandle, BlockKind, Error, Footer, Table};

/// The table `bytes` with its index block cut to `size` bytes: a fresh
/// trailer after the cut and the footer naming the shorter block, its
/// checksum recomputed.
fn index_cut_to(bytes: &[u8], size: u64) -> Vec<u8> {
    let mut bytes = bytes.to_vec();
    let footer_at = bytes.len() - FOOTER_LEN;
    let footer = Footer::decode(&bytes[footer_at..]).unwrap();
    let index = BlockHandle {
        offset: footer.index.offset,
        size,
    };
    let (start, end) = (index.offset as usize, (index.offset + size) as usize);
    let trailer = block_trailer(BlockKind::Index, &bytes[start..end]);
    bytes[end..end + trailer.len()].copy_from_slice(&trailer);
    let footer = Footer { index, ..footer };
    bytes[footer_at..].copy_from_slice(&footer.encode());
    bytes
}

#[test]
fn an_index_cut_at_an_entry_boundary_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = common::simple_model(400);
    for version in [1, 2] {
        let path = dir.path().join(format!("v{version}.sst"));
        let options = bloomlsm_sstable::TableOptions {
            format_version: version,
            ..common::options(None, 256)
        };
        common::write_table(&path, &model, options);
        let bytes = std::fs::read(&path).unwrap();
        let table = Table::open(Arc::new(MemFile(bytes.clone())), &path, 1, None).unwrap();
        let (blocks, index) = (table.data_block_count(), table.footer().index);
        assert!(blocks > 10, "{blocks} blocks");
        let last = model.keys().next_back().unwrap().0.clone();
        for size in 1..index.size {
            let cut = index_cut_to(&bytes, size);
            match Table::open(Arc::new(MemFile(cut)), &path, 1, None) {
                Err(Error::Corruption { kind, offset, .. }) => {
                    assert_eq!((kind, offset), (BlockKind::Index, index.offset));
                }
                Err(other) => panic!("version {version}, cut to {size}: {other}"),
                Ok(t) => panic!(
                    "version {version}: index cut from {} to {size} bytes opened with {} of \
                     {blocks} data blocks; get({:?}) = {:?}",
                    index.size,
                    t.data_block_count(),
                    String::from_utf8_lossy(&last),
                    t.get(&last, KeyHash::of(&last), u64::MAX >> 8)
                        .map(|l| l.outcome),
                ),
            }
        }
    }
}
