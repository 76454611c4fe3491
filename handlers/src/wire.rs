//! The collective message header: 12 bytes in front of every payload.
//!
//! ```text
//!  0..4   group tag   (u32 LE; 0 = world)
//!  4..8   instance    (u32 LE; per group, in call order)
//!  8..10  step        (u16 LE; the algorithm's round)
//!  10     kind        (which collective)
//!  11     reserved    (0)
//! ```
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
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Barrier => "barrier",
            Kind::Bcast => "broadcast",
            Kind::Reduce => "reduce",
            Kind::Allreduce => "allreduce",
            Kind::Allgather => "allgather",
        }
    }

    pub(crate) fn name_of(raw: u8) -> &'static str {
        match raw {
            1 => "barrier",
            2 => "broadcast",
            3 => "reduce",
            4 => "allreduce",
            5 => "allgather",
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
}

impl Header {
    #[inline]
    pub(crate) fn emit(&self) -> [u8; HEADER] {
        let mut b = [0u8; HEADER];
        b[0..4].copy_from_slice(&self.group.to_le_bytes());
        b[4..8].copy_from_slice(&self.seq.to_le_bytes());
        b[8..10].copy_from_slice(&self.step.to_le_bytes());
        b[10] = self.kind;
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
            step: u16::from_le_bytes([h[8], h[9]]),
            kind: h[10],
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
            step in proptest::num::u16::ANY,
            kind in proptest::num::u8::ANY,
            tail in proptest::collection::vec(proptest::num::u8::ANY, 0..16),
        ) {
            let h = Header { group, seq, step, kind };
            let mut b = h.emit().to_vec();
            b.extend(tail);
            proptest::prop_assert_eq!(Header::parse(Rank(1), &b).unwrap(), h);
        }
    }
}
