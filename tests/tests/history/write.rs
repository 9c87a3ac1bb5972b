//! The write load: single puts and deletes and multi-key batches (runs of
//! neighbouring keys, sometimes one key twice), each version's kind fixed
//! by the history rule, so about 40% of the operations are deletes.

use bloomlsm::{Db, WriteBatch};

use super::rng::Mix;
use super::{History, KEYS, is_delete, key, value};

/// The keys `k` with `k % writers == writer` belong to one writer.
#[derive(Clone, Copy, Debug)]
pub struct Owned {
    /// This writer's number.
    pub writer: u64,
    /// How many writers share the keys.
    pub writers: u64,
}

impl Owned {
    /// One of this writer's keys, near `around` when given.
    fn pick(&self, rng: &mut Mix, around: Option<u64>) -> u64 {
        let slots = KEYS / self.writers;
        let slot = match around {
            Some(k) => (k / self.writers + rng.below(4)) % slots,
            None => rng.below(slots),
        };
        slot * self.writers + self.writer
    }
}

/// One write: a put or delete (a third of the time) or a batch of 2 to 9
/// operations. Returns the operations written.
pub fn write_some(db: &Db, history: &History, rng: &mut Mix, owned: Owned) -> usize {
    if rng.below(3) == 0 {
        let k = owned.pick(rng, None);
        let v = history.begin(k);
        if is_delete(k, v) {
            db.delete(&key(k)).unwrap();
        } else {
            db.put(&key(k), &value(k, v)).unwrap();
        }
        history.ack(k, v);
        return 1;
    }
    let mut batch = WriteBatch::new();
    let mut written = Vec::new();
    let mut k = owned.pick(rng, None);
    for _ in 0..2 + rng.below(8) {
        if !rng.chance(0.1) {
            k = owned.pick(rng, Some(k));
        }
        let v = history.begin(k);
        if is_delete(k, v) {
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
