//! The fuzzer's bytes read as fields, for the resealing harnesses of this
//! crate and of the engine.

/// Takes little-endian integers from the front of the input, zeros once
/// it runs out.
#[derive(Debug)]
pub struct Fields<'a>(pub &'a [u8]);

impl Fields<'_> {
    /// The next `N` bytes, zeros past the input's end.
    pub fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let n = N.min(self.0.len());
        out[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        out
    }

    /// The next byte.
    pub fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }

    /// The next 4 bytes, little-endian.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }

    /// The next 8 bytes, little-endian.
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }

    /// The next `n` bytes, fewer once the input runs out.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head.to_vec()
    }
}
