//! Damage to the first session's WALs and what `WalRecovery::PointInTime`
//! promises for it (docs/DESIGN.md "Opening", RELIABILITY.md row 5): the
//! writes of every record before the first damaged one, oldest WAL first,
//! and none after (nothing of a newer WAL past damage in an older one);
//! `Stats::wal_replay_cut` naming the WAL and offset of the first byte not
//! replayed and counting the bytes not replayed (the rest of that WAL and
//! every newer WAL past its 24-byte header); a header torn inside its
//! sector (flags rewritten, checksum old), salt intact, read past and
//! named in `Stats::wal_headers_salvaged`.

use std::path::{Path, PathBuf};

use crate::common::{Rng, WAL_RECORDS_START};

use super::history::{Image, wal_names};

/// One record of a WAL file: its bytes `start..end` and first sequence.
#[derive(Clone, Copy, Debug)]
pub struct Record {
    pub wal: usize,
    pub start: usize,
    pub end: usize,
    pub first_seq: u64,
    pub count: u64,
}

/// The whole records of `bytes`, walking the length fields (the test's
/// own reading of the layout: length u32, crc u32, payload of first
/// sequence u64 and op count u32 then the ops).
pub fn records(wal: usize, bytes: &[u8]) -> Vec<Record> {
    let mut out = Vec::new();
    let mut at = WAL_RECORDS_START;
    while at + 8 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let end = at + 8 + len;
        if len < 12 || end > bytes.len() {
            break;
        }
        let p = &bytes[at + 8..end];
        out.push(Record {
            wal,
            start: at,
            end,
            first_seq: u64::from_le_bytes(p[..8].try_into().unwrap()),
            count: u64::from(u32::from_le_bytes(p[8..12].try_into().unwrap())),
        });
        at = end;
    }
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// One byte of a record flipped.
    Flip,
    /// A 512-byte sector zeroed (from byte 24 on).
    ZeroSector,
    /// A 4 KiB page zeroed (from byte 24 on).
    ZeroPage,
    /// The file cut inside a record.
    CutMid,
    /// The file cut where a record starts.
    CutBoundary,
    /// No damage to a record (with a torn header, the only damage).
    None,
    /// The 24-byte header zeroed, the records after it intact (their
    /// salt lost with it).
    ZeroHeader,
    /// The file cut inside its header: a header never made durable.
    CutHeader,
}

pub const KINDS: [Kind; 8] = [
    Kind::Flip,
    Kind::ZeroSector,
    Kind::ZeroPage,
    Kind::CutMid,
    Kind::CutBoundary,
    Kind::None,
    Kind::ZeroHeader,
    Kind::CutHeader,
];

/// What was done, and what a point-in-time open must recover.
#[derive(Clone, Debug)]
pub struct Damage {
    pub kind: Kind,
    /// The WAL whose header a torn rewrite damaged, if any.
    pub torn_header: Option<usize>,
    /// The writes recovered: `commits[..prefix]`.
    pub prefix: usize,
    /// The cut `Stats::wal_replay_cut` must report: path, offset (any
    /// when `None`: where in a header cut short replay stops is the
    /// engine's choice), bytes.
    pub cut: Option<(PathBuf, Option<u64>, u64)>,
    pub salvaged: Vec<PathBuf>,
    /// The WAL files after the damage, oldest first.
    pub wals: Vec<PathBuf>,
}

/// Damages `image`'s WALs by `kind` at a record drawn from `rng` (and
/// maybe tears a header) and returns what point-in-time recovery owes.
pub fn damage(rng: &mut Rng, image: &Image, kind: Kind) -> Damage {
    let dir = image.dir.path();
    let wals: Vec<PathBuf> = wal_names(dir).iter().map(|n| dir.join(n)).collect();
    let mut bytes: Vec<Vec<u8>> = wals.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let all: Vec<Record> = bytes
        .iter()
        .enumerate()
        .flat_map(|(w, b)| records(w, b))
        .collect();
    assert!(!all.is_empty(), "no record in the image's WALs");
    let commit_of = |r: &Record| {
        let c = image
            .first_seqs
            .iter()
            .position(|&s| s == r.first_seq)
            .unwrap_or_else(|| panic!("no commit at sequence {}", r.first_seq));
        assert_eq!(r.count, image.commits[c].0.len() as u64);
        c
    };
    // The image holds every commit: the last record is the last one.
    assert_eq!(commit_of(all.last().unwrap()), image.commits.len() - 1);
    let target = all[rng.below(all.len() as u64) as usize];
    let w = target.wal;
    let lost: Option<Record> = match kind {
        Kind::None => None,
        Kind::Flip => {
            let at = target.start + rng.below((target.end - target.start) as u64) as usize;
            bytes[w][at] ^= 1 << rng.below(8);
            first_changed(&all, w, at)
        }
        Kind::ZeroSector | Kind::ZeroPage => {
            let unit = if kind == Kind::ZeroSector { 512 } else { 4096 };
            let inside = target.start + rng.below((target.end - target.start) as u64) as usize;
            let from = (inside / unit * unit).max(WAL_RECORDS_START);
            let to = (from / unit * unit + unit).min(bytes[w].len());
            let before = bytes[w].clone();
            bytes[w][from..to].fill(0);
            let first = (from..to).find(|&i| before[i] != 0).unwrap();
            first_changed(&all, w, first)
        }
        Kind::CutMid => {
            let at = target.start + 1 + rng.below((target.end - target.start - 1) as u64) as usize;
            bytes[w].truncate(at);
            Some(target)
        }
        Kind::CutBoundary => {
            bytes[w].truncate(target.start);
            Some(target)
        }
        Kind::ZeroHeader | Kind::CutHeader => {
            if kind == Kind::ZeroHeader {
                bytes[w][..WAL_RECORDS_START].fill(0);
            } else {
                bytes[w].truncate(1 + rng.below(WAL_RECORDS_START as u64 - 1) as usize);
            }
            all.iter().find(|r| r.wal == w).copied()
        }
    };
    // A torn seal rewrite: the flags changed, the checksum old. Only of a
    // WAL with a record left before any damage (`wal::salvaged_records`
    // needs its first record).
    let torn_header = (rng.below(3) == 0 || kind == Kind::None)
        .then(|| rng.below(wals.len() as u64) as usize)
        .filter(|&h| {
            let first = all.iter().find(|r| r.wal == h);
            first.is_some_and(|f| lost.is_none_or(|l| (h, f.start) < (l.wal, l.start)))
        });
    if let Some(h) = torn_header {
        bytes[h][10] ^= 0x02;
    }
    for (p, b) in wals.iter().zip(&bytes) {
        std::fs::write(p, b).unwrap();
    }
    let prefix = lost.map_or(image.commits.len(), |r| commit_of(&r));
    let newer = |w: usize| -> u64 {
        bytes[w + 1..]
            .iter()
            .map(|b| b.len().saturating_sub(WAL_RECORDS_START) as u64)
            .sum()
    };
    let cut = lost.and_then(|r| {
        let rest = bytes[r.wal].len().saturating_sub(r.start) as u64 + newer(r.wal);
        let first_in_wal = all.iter().find(|x| x.wal == r.wal).unwrap().start == r.start;
        match kind {
            // Its records unreadable without their salt: all of it.
            Kind::ZeroHeader => Some((
                wals[r.wal].clone(),
                Some(0),
                bytes[r.wal].len() as u64 + newer(r.wal),
            )),
            // A header never made durable held no record: an empty file,
            // the hole of an older WAL before a newer one's records.
            Kind::CutHeader => {
                (newer(r.wal) > 0).then(|| (wals[r.wal].clone(), None, newer(r.wal)))
            }
            _ if rest == 0 => None,
            // The WAL ends cleanly before the lost record: the next WAL's
            // first record (or an older WAL with none) is where the log
            // breaks.
            Kind::CutBoundary if !first_in_wal => Some((
                wals[r.wal + 1].clone(),
                Some(WAL_RECORDS_START as u64),
                rest,
            )),
            _ => Some((wals[r.wal].clone(), Some(r.start as u64), rest)),
        }
    });
    Damage {
        kind,
        torn_header,
        prefix,
        cut,
        salvaged: torn_header.map(|h| wals[h].clone()).into_iter().collect(),
        wals,
    }
}

/// The record of WAL `w` holding byte `at`.
fn first_changed(all: &[Record], w: usize, at: usize) -> Option<Record> {
    all.iter()
        .find(|r| r.wal == w && r.start <= at && at < r.end)
        .copied()
}

/// The cut a point-in-time open must report for WAL files as they are in
/// `dir` now, given that it reported `offset` in `path`: the rest of that
/// WAL and every newer WAL past its header (a WAL of 24 bytes or fewer
/// held no record).
pub fn truthful_bytes(dir: &Path, path: &Path, offset: u64) -> u64 {
    let names = wal_names(dir);
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let i = names.iter().position(|n| *n == name).unwrap();
    let len = |n: &String| std::fs::metadata(dir.join(n)).unwrap().len();
    let own = if len(&names[i]) <= WAL_RECORDS_START as u64 {
        0
    } else {
        len(&names[i]).saturating_sub(offset)
    };
    own + names[i + 1..]
        .iter()
        .map(|n| len(n).saturating_sub(WAL_RECORDS_START as u64))
        .sum::<u64>()
}
