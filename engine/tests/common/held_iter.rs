//! An iterator held across later operations, checked pair by pair against
//! what it must yield.

use bloomlsm::DbIter;

pub struct HeldIter {
    pub it: DbIter,
    /// Every pair it must yield, in order.
    pub want: Vec<(Vec<u8>, Vec<u8>)>,
    /// Pairs read so far.
    pub at: usize,
    pub what: String,
}

impl HeldIter {
    pub fn new(it: DbIter, want: Vec<(Vec<u8>, Vec<u8>)>, what: String) -> Self {
        Self {
            it,
            want,
            at: 0,
            what,
        }
    }

    /// Reads up to `n` items; true once the iterator is exhausted (where
    /// `want` ends, and nothing after).
    pub fn read(&mut self, n: u64, ctx: &str) -> bool {
        for _ in 0..n {
            match self.it.next() {
                Some(r) => {
                    let got = r.unwrap_or_else(|e| panic!("{ctx}: {}: {e}", self.what));
                    let want = self.want.get(self.at);
                    assert!(
                        want == Some(&got),
                        "{ctx}: {} item {}: got {:?}={:?}, want {:?}",
                        self.what,
                        self.at,
                        String::from_utf8_lossy(&got.0),
                        String::from_utf8_lossy(&got.1),
                        want.map(|(k, v)| (
                            String::from_utf8_lossy(k).into_owned(),
                            String::from_utf8_lossy(v).into_owned()
                        )),
                    );
                    self.at += 1;
                }
                None => {
                    assert_eq!(self.at, self.want.len(), "{ctx}: {} ended early", self.what);
                    assert!(
                        self.it.next().is_none(),
                        "{ctx}: {} after its end",
                        self.what
                    );
                    return true;
                }
            }
        }
        false
    }
}
