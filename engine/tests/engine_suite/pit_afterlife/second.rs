//! A second lossy recovery: after a later session's crash, a byte flipped
//! in a record its recovery replayed, in a WAL the manifest still names.
//! A point-in-time open must then hold the session's model before that
//! record's commit and report the cut there.

use std::path::Path;

use crate::common::{Model, Rng};

use super::check::Seen;
use super::damage::{Record, records, truthful_bytes};
use super::history::wal_names;
use super::session::Session;

/// The damaged WAL, the cut owed (WAL name, offset, bytes) and the store.
pub struct Second {
    pub wal: String,
    pub cut: (String, u64, u64),
    pub model: Model,
}

/// Flips a byte of a record of `session` that the recovery `seen`
/// replayed (before its cut, if any), or `None` when no live WAL holds
/// one.
pub fn damage_again(dir: &Path, session: &Session, seen: &Seen, rng: &mut Rng) -> Option<Second> {
    let live = crate::common::read_manifest(dir).counters[2];
    let wals: Vec<String> = wal_names(dir)
        .into_iter()
        .filter(|n| n.trim_end_matches(".wal").parse::<u64>().unwrap() >= live)
        .collect();
    let cut = seen.cut.as_ref().map(|c| {
        let name = c.path.file_name().unwrap().to_string_lossy().into_owned();
        (wals.iter().position(|n| *n == name).unwrap(), c.offset)
    });
    let mut eligible: Vec<(Record, usize)> = Vec::new();
    for (w, name) in wals.iter().enumerate() {
        let bytes = std::fs::read(dir.join(name)).unwrap();
        for r in records(w, &bytes) {
            let replayed = cut.is_none_or(|(cw, off)| w < cw || (w == cw && r.end as u64 <= off));
            let commit = session.first_seqs.iter().position(|&f| f == r.first_seq);
            if let (true, Some(c), true) = (replayed, commit, r.count > 0) {
                eligible.push((r, c));
            }
        }
    }
    if eligible.is_empty() {
        return None;
    }
    let (r, c) = eligible[rng.below(eligible.len() as u64) as usize];
    let path = dir.join(&wals[r.wal]);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = r.start + rng.below((r.end - r.start) as u64) as usize;
    bytes[at] ^= 1 << rng.below(8);
    std::fs::write(&path, &bytes).unwrap();
    let owed = truthful_bytes(dir, &path, r.start as u64);
    Some(Second {
        wal: wals[r.wal].clone(),
        cut: (wals[r.wal].clone(), r.start as u64, owed),
        model: session.models[c].clone(),
    })
}
