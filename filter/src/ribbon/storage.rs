//! The solution's segments in memory: version 2 order (`layout`), in
//! 64-byte aligned lines so that a head span of four segments at a
//! multiple of four is exactly one cache line.

use super::layout::Layout;

/// Segments per line.
const PER_LINE: usize = 4;

/// One cache line of segments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(64))]
struct Line([u128; PER_LINE]);

/// The segments of a solution, in version 2 order. Invariant: the
/// segments past `len` in the last line are zero (so equality and the fill
/// ratio see only the solution).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Solution {
    lines: Vec<Line>,
    len: usize,
}

/// Bytes of heap a solution of `segment_bytes` serialized bytes (16 a
/// segment) holds in memory: rounded up to whole 64-byte lines.
pub(crate) const fn heap_bytes_of_segments(segment_bytes: u64) -> u64 {
    let line = std::mem::size_of::<Line>() as u64;
    segment_bytes.div_ceil(line) * line
}

impl Solution {
    /// `len` zero segments.
    pub(crate) fn zeroed(len: usize) -> Self {
        Self {
            lines: vec![Line::default(); len.div_ceil(PER_LINE)],
            len,
        }
    }

    /// Segments held.
    pub(crate) const fn len(&self) -> usize {
        self.len
    }

    /// Segment `i`. REQUIRES: `i < len` (checked: panics otherwise, which
    /// the layout's invariants rule out).
    #[inline(always)]
    pub(crate) fn get(&self, i: usize) -> u128 {
        self.lines[i / PER_LINE].0[i % PER_LINE]
    }

    /// Line `i`: segments `4 i .. 4 i + 4` (zero past `len`), unchecked.
    /// SAFETY: the caller proves `i < num_lines()`.
    #[inline(always)]
    pub(crate) unsafe fn line_unchecked(&self, i: usize) -> &[u128; PER_LINE] {
        debug_assert!(i < self.lines.len());
        // SAFETY: `i < self.lines.len()`, the caller's promise.
        unsafe { &self.lines.get_unchecked(i).0 }
    }

    /// The first segment; the others follow it in order (lines are whole
    /// segments, without padding), `len` of them and then the zero ones
    /// that fill the last line.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(crate) fn as_ptr(&self) -> *const u128 {
        self.lines.as_ptr().cast()
    }

    /// Lines held: `len` segments rounded up to whole lines.
    #[inline(always)]
    pub(crate) fn num_lines(&self) -> usize {
        self.lines.len()
    }

    /// Sets segment `i`. REQUIRES: `i < len`.
    #[inline]
    pub(crate) fn set(&mut self, i: usize, value: u128) {
        debug_assert!(i < self.len);
        self.lines[i / PER_LINE].0[i % PER_LINE] = value;
    }

    /// Bits set in the solution.
    pub(crate) fn count_ones(&self) -> u64 {
        self.lines
            .iter()
            .flat_map(|l| l.0.iter())
            .map(|s| u64::from(s.count_ones()))
            .sum()
    }

    /// Bytes of heap the segments hold: whole 64-byte lines, so up to 48
    /// bytes past the 16 a segment of the serialized solution
    /// ([`heap_bytes_of_segments`] of `len`, the planned figure).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.lines.capacity() * std::mem::size_of::<Line>()
    }

    /// The segments as serialized by format version 2: in order, each a
    /// little-endian u128.
    pub(crate) fn write_v2(&self, out: &mut Vec<u8>) {
        for i in 0..self.len {
            out.extend_from_slice(&self.get(i).to_le_bytes());
        }
    }

    /// Reads `bytes` (16 per segment, little-endian) laid out in version 2
    /// order, or in version 1 order when `v1` (then reordered). REQUIRES:
    /// `bytes.len() == 16 * layout.num_segments()` (checked by the codec).
    pub(crate) fn read(bytes: &[u8], layout: &Layout, v1: bool) -> crate::error::Result<Self> {
        let len = layout.num_segments() as usize;
        let mut lines = crate::error::try_vec(len.div_ceil(PER_LINE))?;
        lines.resize(len.div_ceil(PER_LINE), Line::default());
        let mut solution = Self { lines, len };
        let mut values = bytes.chunks_exact(16).map(|c| {
            let mut w = [0u8; 16];
            w.copy_from_slice(c);
            u128::from_le_bytes(w)
        });
        if v1 {
            // Version 1: block after block, each block's columns in order.
            // Blocks before the first with columns hold nothing, so the
            // walk is as long as the bytes whatever block count a header
            // claims.
            for block in layout.first_block_with_columns()..layout.num_blocks() {
                for column in 0..layout.columns_of_block(block) {
                    let value = values.next().unwrap_or(0);
                    solution.set(layout.segment(block, column) as usize, value);
                }
            }
        } else {
            for (i, value) in values.enumerate() {
                solution.set(i, value);
            }
        }
        Ok(solution)
    }
}
