//! How many filter bits per key each table gets: the policy a user sets,
//! and the budget it yields for a table written to a level of a tree.

use crate::error::{Error, Result};

/// Filters below this many bits per key are not built: such a filter
/// answers "maybe" for more than half of absent keys, costs a probe on
/// every lookup, and sizing it is degenerate. The table is written without
/// a filter instead (every key "maybe", read from its block).
pub const MIN_FILTER_BITS_PER_KEY: f64 = 1.0;

/// The most bits per key a policy accepts, and the most any level's
/// filters get: `Optimized` prices a small run ln(N / n) / s bits above the
/// largest, which near an average of 100 passed 190 bits per key.
pub const MAX_FILTER_BITS_PER_KEY: f64 = 100.0;

/// How many bits per key each level's filters get.
#[derive(Clone, Debug, PartialEq)]
pub enum FilterPolicy {
    /// The same bits per key everywhere (0 disables filters).
    Uniform {
        /// Bits per key (default 10.0; fractional values are fine).
        bits_per_key: f64,
    },
    /// Bits per key per level, L0 first; levels past the end use the last.
    PerLevel(Vec<f64>),
    /// The same total filter memory as `Uniform { bits_per_key }`, spread
    /// over levels to minimise the expected false positives of an absent
    /// lookup (Monkey: larger levels get fewer bits per key). Derived from
    /// the tree as it is whenever a table is written (each L0 table and
    /// each deeper level is one run), never spending more than uniform
    /// would on the same tables; filters of existing tables are rebuilt in
    /// the background when their level's budget moves.
    Optimized {
        /// Average bits per key over all levels.
        bits_per_key: f64,
    },
}

impl FilterPolicy {
    /// Bits per key for tables written to `level`. `shape` is the relative
    /// size of each level in the tree's steady shape and `actual` the keys
    /// each level holds now (both used by `Optimized` only).
    /// Values below [`MIN_FILTER_BITS_PER_KEY`] mean "no filter"; none is
    /// above [`MAX_FILTER_BITS_PER_KEY`].
    pub fn bits_per_key(&self, level: usize, shape: &[u64], actual: &[u64]) -> f64 {
        let bits = match self {
            Self::Uniform { bits_per_key } => *bits_per_key,
            Self::PerLevel(v) => v.get(level).or(v.last()).copied().unwrap_or(0.0),
            Self::Optimized { bits_per_key } => {
                optimized_bits(level, shape, actual, *bits_per_key).min(MAX_FILTER_BITS_PER_KEY)
            }
        };
        if bits >= MIN_FILTER_BITS_PER_KEY {
            bits
        } else {
            0.0
        }
    }

    /// Every bits-per-key setting must be finite and in
    /// 0..=[`MAX_FILTER_BITS_PER_KEY`].
    pub(crate) fn validate(&self) -> Result<()> {
        let ok = |b: f64| b.is_finite() && (0.0..=MAX_FILTER_BITS_PER_KEY).contains(&b);
        let valid = match self {
            Self::Uniform { bits_per_key } | Self::Optimized { bits_per_key } => ok(*bits_per_key),
            Self::PerLevel(v) => !v.is_empty() && v.iter().all(|b| ok(*b)),
        };
        if valid {
            Ok(())
        } else {
            Err(Error::InvalidOptions(
                "bits per key must be finite and in 0..=100 (per level: a non-empty list)".into(),
            ))
        }
    }
}

/// Monkey's allocation for the steady shape gives each level's bits up to
/// a common additive constant (b_i = c - ln(n_i) / (ln 2)^2); the constant
/// is then chosen so the levels as they are now spend `bits_per_key` on
/// average, which keeps total filter memory at uniform's while the tree
/// grows into its shape.
fn optimized_bits(level: usize, shape: &[u64], actual: &[u64], bits_per_key: f64) -> f64 {
    let shape: Vec<u64> = shape.iter().map(|&n| n.max(1)).collect();
    let base = bloomlsm_filter::math::optimized_bits_per_key(&shape, bits_per_key);
    let total: u64 = actual.iter().sum();
    let shift = if total > 0 {
        let spent: f64 = actual.iter().zip(&base).map(|(&n, &b)| n as f64 * b).sum();
        bits_per_key - spent / total as f64
    } else {
        0.0
    };
    (base.get(level).copied().unwrap_or(bits_per_key) + shift).max(0.0)
}
