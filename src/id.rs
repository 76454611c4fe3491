//! Identifier newtypes: never a bare integer in a public signature.

use std::fmt;

/// A process of the job, `0 .. size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rank(pub u32);

impl Rank {
    /// The rank as an index.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for Rank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<u32> for Rank {
    fn from(r: u32) -> Self {
        Rank(r)
    }
}

/// A registered handler. Ids are dense, in registration order, and equal on
/// every rank (checked at start).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HandlerId(pub(crate) u32);

impl HandlerId {
    /// The raw id carried on the wire.
    #[inline]
    pub fn raw(self) -> u32 {
        self.0
    }
}

impl fmt::Display for HandlerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// A registered one-sided window. Ids are dense, in registration order,
/// and equal on every rank (checked at start).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WindowId(pub(crate) u32);
