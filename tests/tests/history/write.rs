//! The write load: single puts and deletes, multi-key batches (runs of
//! neighbouring keys, sometimes one key twice) and runs of deletes of
//! neighbouring keys (tables of tombstones); about 40% of the operations
//! are deletes.

use bloomlsm::{Db, WriteBatch};

use super::rng::Mix;
use super::{History, KEYS, key, value};

/// The keys `k` with `k % writers == writer` belong to one writer.
#[derive(Clone, Copy, Debug)]
pub struct Owned {
    /// This writer's number.
    pub writer: u64,
    /// How many writers share the keys.
    pub writers: u64,
}

impl Owned {
    /// One of this writer's keys, near `around` when given (up to `step`
    /// of its keys further).
    fn pick(&self, rng: &mut Mix, around: Option<u64>, step: u64) -> u64 {
        let slots = KEYS / self.writers;
        let slot = match around {
            Some(k) => (k / self.writers + rng.below(step + 1)) % slots,
            None => rng.below(slots),
        };
        slot * self.writers + self.writer
    }
}

/// One write: a put or delete (a third of the time), a run of deletes of
/// neighbouring keys (one time in fifteen), or a batch of 2 to 9
/// operations. Returns the operations written.
pub fn write_some(db: &Db, history: &History, rng: &mut Mix, owned: Owned) -> usize {
    if rng.below(3) == 0 {
        let k = owned.pick(rng, None, 0);
        let delete = rng.chance(0.4);
        let v = history.begin(k, delete, history.next_write(owned.writer));
        if delete {
            db.delete(&key(k)).unwrap();
        } else {
            db.put(&key(k), &value(k, v)).unwrap();
        }
        history.ack(k, v);
        return 1;
    }
    let delete_run = rng.below(10) == 0;
    let (ops, deletes, step) = if delete_run {
        (4 + rng.below(12), 1.0, 1)
    } else {
        (2 + rng.below(8), 0.33, 3)
    };
    let mut batch = WriteBatch::new();
    let mut written = Vec::new();
    let write = history.next_write(owned.writer);
    let mut k = owned.pick(rng, None, 0);
    for i in 0..ops {
        if i > 0 && !rng.chance(0.1) {
            k = owned.pick(rng, Some(k), step);
        }
        let delete = rng.chance(deletes);
        let v = history.begin(k, delete, write);
        if delete {
            batch.delete(&key(k));
        } else {
            batch.put(&key(k), &value(k, v));
        }
        written.push((k, v));
    }
    db.write(batch).unwrap();
    for &(k, v) in &written {
        history.ack(k, v);
    }
    written.len()
}
