//! The collective message header: 12 bytes in front of every payload.
//!
//! ```text
//!  0..4   group tag   (u32 LE; 0 = world)
//!  4..8   instance    (u32 LE; per group, in call order)
//!  8      step        (the algorithm's round; every algorithm has < 256)
//!  9      kind        (which collective, or an abort: `Kind`)
//!  10..12 signature   (u16 LE: algorithm, element type, operator, root;
//!                      see `crate::sig`)
//! ```
//!
//! An [`Kind::Abort`] message says the instance failed on its sender; its
//! payload is the error, in words, and its step byte whether the sender's
//! collectives are poisoned (see `crate::engine`).
//!
//! Header plus 16 bytes of payload fit a shared-memory queue slot inline
//! (28 bytes), so a barrier or a 1–2 element reduction step is one cache
//! line.

use crate::error::CollError;
use fastmsg::Rank;

/// Header length in bytes.
pub(crate) const HEADER: usize = 12;

/// Which collective a message belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    Barrier = 1,
    Bcast = 2,
    Reduce = 3,
    Allreduce = 4,
    Allgather = 5,
    /// The instance failed on the sender (payload: why, UTF-8).
    Abort = 6,
    Alltoall = 7,
    Alltoallv = 8,
    Gather = 9,
    Gatherv = 10,
    Scatter = 11,
    Scatterv = 12,
    Scan = 13,
    Exscan = 14,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        Kind::name_of(self as u8)
    }

    /// Whether collective `raw` has a root (its messages carry it, see
    /// `crate::sig`).
    pub(crate) fn is_rooted(raw: u8) -> bool {
        matches!(raw, 2 | 3 | 9..=12)
    }

    /// Whether a member may finish its part of collective `raw` before
    /// another member finds a mismatch (a rooted collective, or a scan,
    /// whose first member only sends): the engine then poisons itself
    /// (see `crate::engine`).
    pub(crate) fn ends_early(raw: u8) -> bool {
        Kind::is_rooted(raw) || raw == Kind::Scan as u8 || raw == Kind::Exscan as u8
    }

    pub(crate) fn name_of(raw: u8) -> &'static str {
        match raw {
            1 => "barrier",
            2 => "broadcast",
            3 => "reduce",
            4 => "allreduce",
            5 => "allgather",
            6 => "an abort",
            7 => "alltoall",
            8 => "alltoallv",
            9 => "gather",
            10 => "gatherv",
            11 => "scatter",
            12 => "scatterv",
            13 => "scan",
            14 => "exscan",
            _ => "an unknown collective",
        }
    }
}

/// A parsed header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) group: u32,
    pub(crate) seq: u32,
    pub(crate) step: u16,
    pub(crate) kind: u8,
    pub(crate) sig: u16,
}

impl Header {
    #[inline]
    pub(crate) fn emit(&self) -> [u8; HEADER] {
        let mut b = [0u8; HEADER];
        b[0..4].copy_from_slice(&self.group.to_le_bytes());
        b[4..8].copy_from_slice(&self.seq.to_le_bytes());
        debug_assert!(self.step < 256, "every algorithm has fewer than 256 steps");
        b[8] = self.step as u8;
        b[9] = self.kind;
        b[10..12].copy_from_slice(&self.sig.to_le_bytes());
        b
    }

    /// Parse the first `HEADER` bytes of a message from `src`.
    #[inline]
    pub(crate) fn parse(src: Rank, b: &[u8]) -> Result<Header, CollError> {
        let Some(h) = b.get(..HEADER) else {
            return Err(CollError::ShortMessage {
                src,
                len: b.len(),
                need: HEADER,
            });
        };
        Ok(Header {
            group: u32::from_le_bytes([h[0], h[1], h[2], h[3]]),
            seq: u32::from_le_bytes([h[4], h[5], h[6], h[7]]),
            step: u16::from(h[8]),
            kind: h[9],
            sig: u16::from_le_bytes([h[10], h[11]]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_short() {
        let h = Header {
            group: 0xdead_beef,
            seq: 7,
            step: 3,
            kind: Kind::Reduce as u8,
            sig: 0xbeef,
        };
        assert_eq!(Header::parse(Rank(1), &h.emit()).unwrap(), h);
        assert!(matches!(
            Header::parse(Rank(1), &[0; 5]),
            Err(CollError::ShortMessage { len: 5, .. })
        ));
    }

    proptest::proptest! {
        /// Emit then parse is the identity; parse reads only the header.
        #[test]
        fn headers_round_trip(
            group in proptest::num::u32::ANY,
            seq in proptest::num::u32::ANY,
            step in 0u16..256,
            kind in proptest::num::u8::ANY,
            sig in proptest::num::u16::ANY,
            tail in proptest::collection::vec(proptest::num::u8::ANY, 0..16),
        ) {
            let h = Header { group, seq, step, kind, sig };
            let mut b = h.emit().to_vec();
            b.extend(tail);
            proptest::prop_assert_eq!(Header::parse(Rank(1), &b).unwrap(), h);
        }
    }
}
