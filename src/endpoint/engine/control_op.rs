//! The endpoint's control operations, and their codes on the wire.
//!
//! A control (SYSTEM) message carries its operation in the fragment
//! header's `handler` field, where a user message carries its handler id.
//! Inside the engine the two never mix: a user message has a
//! [`HandlerId`](crate::HandlerId), a control message a [`ControlOp`],
//! decoded once when its first fragment arrives (`crate::endpoint::engine::stream`) and
//! encoded once when it is sent (`crate::endpoint::engine::net::OutStream`).

use crate::endpoint::engine::handler::MAX_TABLE_BYTES;
use crate::id::Rank;

/// Bytes of an encoded termination report (`termination::Report`): the
/// payload of [`ControlOp::Report`].
pub(crate) const REPORT_BYTES: usize = 26;

/// Messages to send in reaction: (destination, op, payload).
pub(crate) type Sends = Vec<(Rank, ControlOp, Vec<u8>)>;

/// What a control message asks for (see `crate::endpoint::engine::control` and
/// `crate::endpoint::engine::termination`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ControlOp {
    /// A rank's handler table, to rank 0.
    Table,
    /// Rank 0's verdict on the tables.
    Verdict,
    /// A rank's report for a wave of a termination round.
    Report,
    /// Rank 0 releases everyone from a round.
    Release,
    /// Rank 0 asks for the counts of a wave of a round.
    Probe,
    /// Rank 0 tells a closing rank which ranks have not called `close`.
    Stragglers,
    /// Rank 0 says a round is `quiesce` on one rank, `close` on another.
    Mismatch,
}

impl ControlOp {
    /// Every operation, in wire-code order.
    pub(crate) const ALL: [ControlOp; 7] = [
        ControlOp::Table,
        ControlOp::Verdict,
        ControlOp::Report,
        ControlOp::Release,
        ControlOp::Probe,
        ControlOp::Stragglers,
        ControlOp::Mismatch,
    ];

    /// The code carried in the header's `handler` field.
    #[inline]
    pub(crate) const fn wire(self) -> u32 {
        match self {
            ControlOp::Table => 1,
            ControlOp::Verdict => 2,
            ControlOp::Report => 3,
            ControlOp::Release => 4,
            ControlOp::Probe => 5,
            ControlOp::Stragglers => 6,
            ControlOp::Mismatch => 7,
        }
    }

    /// The operation a wire code names, if any.
    #[inline]
    pub(crate) fn from_wire(code: u32) -> Option<ControlOp> {
        ControlOp::ALL.into_iter().find(|op| op.wire() == code)
    }

    /// What the operation is, for error messages.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            ControlOp::Table => "handler table",
            ControlOp::Verdict => "table verdict",
            ControlOp::Report => "round report",
            ControlOp::Release => "round release",
            ControlOp::Probe => "round probe",
            ControlOp::Stragglers => "straggler list",
            ControlOp::Mismatch => "round mismatch",
        }
    }

    /// The longest payload a rank that follows the protocol sends for this
    /// operation in a job of `size` ranks: a first fragment announcing more
    /// is refused before anything is buffered for it (`crate::endpoint::engine::stream`).
    /// Each bound is the largest encoding its encoder makes:
    /// - a handler table at most [`MAX_TABLE_BYTES`] (checked at `start`);
    /// - a verdict: tag, index, rank, and two names with their lengths,
    ///   each name from a table, so shorter than one;
    /// - a report [`REPORT_BYTES`]; a probe round and wave, a release its
    ///   round, a mismatch round and two ranks (u32 each);
    /// - a straggler list at most every rank (u32 each).
    pub(crate) const fn max_len(self, size: u32) -> u64 {
        match self {
            ControlOp::Table => MAX_TABLE_BYTES as u64,
            ControlOp::Verdict => 1 + 4 + 4 + 2 * (4 + MAX_TABLE_BYTES as u64),
            ControlOp::Report => REPORT_BYTES as u64,
            ControlOp::Release => 4,
            ControlOp::Probe => 8,
            ControlOp::Stragglers => 4 * size as u64,
            ControlOp::Mismatch => 12,
        }
    }

    /// Sent by rank 0 alone: from another rank it could end a start or a
    /// round early, or name innocent ranks.
    pub(crate) fn only_from_rank0(self) -> bool {
        !matches!(self, ControlOp::Table | ControlOp::Report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_codes_round_trip_and_nothing_else_decodes() {
        for op in ControlOp::ALL {
            assert_eq!(ControlOp::from_wire(op.wire()), Some(op));
        }
        let codes: Vec<u32> = ControlOp::ALL.iter().map(|op| op.wire()).collect();
        assert_eq!(
            codes,
            (1..=7).collect::<Vec<_>>(),
            "the wire format is fixed"
        );
        for bad in [0, 8, 0x100, u32::MAX] {
            assert_eq!(ControlOp::from_wire(bad), None);
        }
    }
}
