//! The filter kinds and their frozen on-disk tags.

use crate::error::FilterError;

/// Which filter layout a serialized filter holds. The tags are FROZEN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FilterKind {
    /// [`crate::BloomFilter`]: k probes spread over all m bits.
    Standard,
    /// [`crate::BlockedBloomFilter`]: all k probes in one 64-byte block.
    Blocked,
    /// [`crate::CountingBloomFilter`]: 4-bit counters, supports removal.
    Counting,
    /// [`crate::RibbonFilter`]: a static filter solved once from all keys,
    /// near log2(1/eps) bits per key.
    Ribbon,
}

impl FilterKind {
    /// The on-disk tag. FROZEN.
    pub const fn tag(self) -> u8 {
        match self {
            Self::Standard => 1,
            Self::Blocked => 2,
            Self::Counting => 3,
            Self::Ribbon => 4,
        }
    }

    /// The kind a tag names.
    pub fn from_tag(tag: u8) -> Result<Self, FilterError> {
        match tag {
            1 => Ok(Self::Standard),
            2 => Ok(Self::Blocked),
            3 => Ok(Self::Counting),
            4 => Ok(Self::Ribbon),
            other => Err(FilterError::UnknownKind(other)),
        }
    }

    /// A short lower-case name ("standard", "blocked", "counting", "ribbon").
    pub const fn name(self) -> &'static str {
        match self {
            Self::Standard => "standard",
            Self::Blocked => "blocked",
            Self::Counting => "counting",
            Self::Ribbon => "ribbon",
        }
    }
}

impl std::fmt::Display for FilterKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for FilterKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "standard" => Ok(Self::Standard),
            "blocked" => Ok(Self::Blocked),
            "counting" => Ok(Self::Counting),
            "ribbon" => Ok(Self::Ribbon),
            other => Err(format!(
                "unknown filter kind {other:?} (expected standard, blocked, counting or ribbon)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_names_and_parsing_agree() {
        let all = [
            FilterKind::Standard,
            FilterKind::Blocked,
            FilterKind::Counting,
            FilterKind::Ribbon,
        ];
        for (kind, tag) in all.into_iter().zip(1u8..) {
            assert_eq!(kind.tag(), tag, "tags are frozen");
            assert_eq!(FilterKind::from_tag(tag), Ok(kind));
            assert_eq!(kind.name().parse::<FilterKind>(), Ok(kind));
        }
        assert_eq!(FilterKind::from_tag(5), Err(FilterError::UnknownKind(5)));
        assert!("bloom".parse::<FilterKind>().is_err());
    }
}
