//! Control traffic of the endpoint itself, carried as SYSTEM messages over
//! the same transports as user messages (so it works for any transport mix):
//!
//! - **start**: every rank sends its handler-name table to rank 0
//!   ([`OP_TABLE`]); rank 0 compares each with its own and sends every rank
//!   the verdict ([`OP_VERDICT`]): "ok", or the first differing handler.
//! - **termination rounds** (`quiesce` and `close`): reports, probes,
//!   releases and mismatch notices, handled by [`crate::endpoint::engine::termination`].
//!   Rank 0 remembers who has entered the round it collects, so that a
//!   close held up by a rank that never calls it can name that rank
//!   ([`OP_STRAGGLERS`], see `crate::endpoint::rounds::straggle`).

use crate::endpoint::engine::control_op::{ControlOp, Sends};
use crate::endpoint::engine::handler::{decode_table, first_difference};
use crate::endpoint::engine::termination::{CloseCounts, Report, RoundKind, Rounds};
use crate::error::{ExtractError, ProtocolError, StartError};
use crate::id::Rank;

/// A rank's handler table, to rank 0.
pub(crate) const OP_TABLE: ControlOp = ControlOp::Table;
/// Rank 0's verdict on the tables.
pub(crate) const OP_VERDICT: ControlOp = ControlOp::Verdict;
pub(crate) use crate::endpoint::engine::termination::{
    OP_MISMATCH, OP_PROBE, OP_RELEASE, OP_REPORT,
};
/// Rank 0 tells a closing rank which ranks have not called `close` yet
/// (a list of u32 LE ranks).
pub(crate) const OP_STRAGGLERS: ControlOp = ControlOp::Stragglers;

/// The verdict of the table comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Ok,
    Mismatch {
        index: u32,
        rank: Rank,
        ours: Option<String>,
        theirs: Option<String>,
    },
}

impl Verdict {
    fn encode(&self) -> Vec<u8> {
        match self {
            Verdict::Ok => vec![0],
            Verdict::Mismatch {
                index,
                rank,
                ours,
                theirs,
            } => {
                let mut v = vec![1];
                v.extend_from_slice(&index.to_le_bytes());
                v.extend_from_slice(&rank.0.to_le_bytes());
                for s in [ours, theirs] {
                    match s {
                        None => v.extend_from_slice(&u32::MAX.to_le_bytes()),
                        Some(s) => {
                            v.extend_from_slice(&(s.len() as u32).to_le_bytes());
                            v.extend_from_slice(s.as_bytes());
                        }
                    }
                }
                v
            }
        }
    }

    fn decode(src: Rank, b: &[u8]) -> Result<Verdict, ProtocolError> {
        let bad = |what| ProtocolError::BadControl { src: src.0, what };
        let word = |b: &[u8], at: usize| -> Result<u32, ProtocolError> {
            b.get(at..at + 4)
                .map(|w| u32::from_le_bytes(w.try_into().expect("4 bytes")))
                .ok_or(bad("verdict too short"))
        };
        match b.first() {
            Some(0) if b.len() == 1 => Ok(Verdict::Ok),
            Some(1) => {
                let index = word(b, 1)?;
                let rank = Rank(word(b, 5)?);
                let mut at = 9;
                let mut names = [None, None];
                for name in &mut names {
                    let len = word(b, at)?;
                    at += 4;
                    if len != u32::MAX {
                        let s = b
                            .get(at..)
                            .and_then(|rest| rest.get(..len as usize))
                            .ok_or(bad("verdict name runs past the end"))?;
                        let s =
                            std::str::from_utf8(s).map_err(|_| bad("verdict name is not UTF-8"))?;
                        *name = Some(s.to_owned());
                        at += len as usize;
                    }
                }
                if at != b.len() {
                    return Err(bad("bytes after the verdict"));
                }
                let [ours, theirs] = names;
                Ok(Verdict::Mismatch {
                    index,
                    rank,
                    ours,
                    theirs,
                })
            }
            _ => Err(bad("unknown verdict")),
        }
    }

    /// As a start error, if a mismatch.
    pub(crate) fn into_result(self) -> Result<(), StartError> {
        match self {
            Verdict::Ok => Ok(()),
            Verdict::Mismatch {
                index,
                rank,
                ours,
                theirs,
            } => Err(StartError::HandlerMismatch {
                index,
                our_rank: Rank(0),
                ours,
                their_rank: rank,
                theirs,
            }),
        }
    }
}

/// Control state of one rank.
#[derive(Debug)]
pub(crate) struct Control {
    size: u32,
    own_table: Vec<String>,
    tables: Vec<Option<Vec<String>>>,
    tables_in: u32,
    verdict: Option<Verdict>,
    /// Termination rounds (`quiesce`, `close`).
    rounds: Rounds,
    /// A straggler list from rank 0, not yet shown.
    stragglers: Option<Vec<Rank>>,
}

impl Control {
    pub(crate) fn new(size: u32) -> Self {
        Control {
            size,
            own_table: Vec::new(),
            tables: vec![None; size as usize],
            tables_in: 0,
            verdict: None,
            rounds: Rounds::new(size),
            stragglers: None,
        }
    }

    /// Rank 0: the ranks that have not entered the current termination
    /// round (not called `close`), and those that have.
    pub(crate) fn close_census(&self) -> (Vec<Rank>, Vec<Rank>) {
        self.rounds.census()
    }

    /// Rank 0's verdict on the handler tables, once it came.
    pub(crate) fn verdict(&self) -> Option<&Verdict> {
        self.verdict.as_ref()
    }

    /// Rank 0's verdict, taken (start-up reads it once).
    pub(crate) fn take_verdict(&mut self) -> Option<Verdict> {
        self.verdict.take()
    }

    /// Enter termination round `round` of `kind`: the wave-0 report to
    /// send rank 0.
    pub(crate) fn enter_round(
        &mut self,
        round: u32,
        kind: RoundKind,
        counts: CloseCounts,
        busy: bool,
    ) -> Report {
        self.rounds.enter(round, kind, counts, busy)
    }

    /// Whether rank 0 has released this rank from `round`.
    pub(crate) fn released(&self, round: u32) -> bool {
        self.rounds.released(round)
    }

    /// The round mismatch error, once rank 0 has found one (sticky).
    pub(crate) fn mismatch(&self) -> Option<ExtractError> {
        self.rounds.mismatch()
    }

    /// A straggler list rank 0 sent, once.
    pub(crate) fn take_stragglers(&mut self) -> Option<Vec<Rank>> {
        self.stragglers.take()
    }

    /// Rank 0's own table, to compare the others with.
    pub(crate) fn set_own_table(&mut self, names: Vec<String>) {
        self.own_table = names;
    }

    /// Handle a complete control message from `src`; `counts` and `busy`
    /// are this rank's now (reported when rank 0 probes).
    pub(crate) fn on_message(
        &mut self,
        src: Rank,
        op: ControlOp,
        payload: &[u8],
        counts: CloseCounts,
        busy: bool,
    ) -> Result<Sends, ProtocolError> {
        let bad = |what| ProtocolError::BadControl { src: src.0, what };
        // Verdicts, probes, releases, mismatch notices and straggler lists
        // come from rank 0 alone: another rank's could end a start or a
        // round early, or name innocent ranks.
        if op.only_from_rank0() && src != Rank(0) {
            return Err(bad("a message only rank 0 sends came from another rank"));
        }
        match op {
            OP_TABLE => {
                let slot = self
                    .tables
                    .get_mut(src.index())
                    .ok_or(bad("table from unknown rank"))?;
                if slot.is_some() {
                    return Err(bad("table sent twice"));
                }
                *slot = Some(decode_table(payload).map_err(bad)?);
                self.tables_in += 1;
                if self.tables_in < self.size {
                    return Ok(Vec::new());
                }
                let verdict = self
                    .tables
                    .iter()
                    .enumerate()
                    .find_map(|(r, t)| {
                        let t = t.as_deref().unwrap_or(&[]);
                        first_difference(&self.own_table, t).map(|(index, ours, theirs)| {
                            Verdict::Mismatch {
                                index,
                                rank: Rank(r as u32),
                                ours,
                                theirs,
                            }
                        })
                    })
                    .unwrap_or(Verdict::Ok);
                let bytes = verdict.encode();
                Ok((0..self.size)
                    .map(|r| (Rank(r), OP_VERDICT, bytes.clone()))
                    .collect())
            }
            OP_VERDICT => {
                if self.verdict.is_some() {
                    return Err(bad("verdict sent twice"));
                }
                self.verdict = Some(Verdict::decode(src, payload)?);
                Ok(Vec::new())
            }
            OP_REPORT | OP_PROBE | OP_RELEASE | OP_MISMATCH => {
                self.rounds.on_message(src, op, payload, counts, busy)
            }
            OP_STRAGGLERS => {
                if payload.len() % 4 != 0 || payload.len() / 4 > self.size as usize {
                    return Err(bad("malformed straggler list"));
                }
                let ranks: Vec<Rank> = payload
                    .chunks_exact(4)
                    .map(|w| Rank(u32::from_le_bytes([w[0], w[1], w[2], w[3]])))
                    .collect();
                if ranks.iter().any(|r| r.0 >= self.size) {
                    return Err(bad("straggler list names a rank outside the job"));
                }
                self.stragglers = Some(ranks);
                Ok(Vec::new())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_round_trips() {
        for v in [
            Verdict::Ok,
            Verdict::Mismatch {
                index: 2,
                rank: Rank(5),
                ours: Some("pong".into()),
                theirs: None,
            },
        ] {
            assert_eq!(Verdict::decode(Rank(0), &v.encode()), Ok(v));
        }
        assert!(Verdict::decode(Rank(0), &[1, 2]).is_err());
        assert!(Verdict::decode(Rank(0), &[]).is_err());
    }

    fn t(names: &[&str]) -> Vec<u8> {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        crate::endpoint::engine::handler::encode_table(&names)
    }

    #[test]
    fn rank0_names_the_first_difference() {
        let mut c = Control::new(2);
        c.set_own_table(vec!["a".into(), "b".into()]);
        assert!(c
            .on_message(
                Rank(0),
                OP_TABLE,
                &t(&["a", "b"]),
                CloseCounts::default(),
                false
            )
            .unwrap()
            .is_empty());
        let sends = c
            .on_message(
                Rank(1),
                OP_TABLE,
                &t(&["a", "c"]),
                CloseCounts::default(),
                false,
            )
            .unwrap();
        assert_eq!(sends.len(), 2);
        let v = Verdict::decode(Rank(0), &sends[1].2).unwrap();
        assert_eq!(
            v,
            Verdict::Mismatch {
                index: 1,
                rank: Rank(1),
                ours: Some("b".into()),
                theirs: Some("c".into())
            }
        );
    }

    use crate::endpoint::engine::termination::{encode_probe, Report, RoundKind};

    fn rep(
        round: u32,
        wave: u32,
        kind: RoundKind,
        busy: bool,
        sent: u64,
        received: u64,
    ) -> Vec<u8> {
        let counts = CloseCounts { sent, received };
        Report {
            round,
            wave,
            kind,
            busy,
            counts,
        }
        .encode()
    }

    /// Rank 0's side of a close round: feed it reports, get its next sends.
    fn report(c: &mut Control, src: u32, wave: u32, sent: u64, received: u64) -> Sends {
        let counts = CloseCounts { sent, received };
        let p = rep(0, wave, RoundKind::Close, false, sent, received);
        c.on_message(Rank(src), OP_REPORT, &p, counts, false)
            .unwrap()
    }

    #[test]
    fn close_releases_only_after_two_equal_balanced_waves() {
        let mut c = Control::new(2);
        // Wave 0: balanced, but nothing to compare with yet: probe.
        assert!(report(&mut c, 0, 0, 5, 2).is_empty());
        let sends = report(&mut c, 1, 0, 2, 5);
        assert!(sends
            .iter()
            .all(|s| s.1 == OP_PROBE && s.2 == encode_probe(0, 1)));
        // Wave 1: a handler sent one more message meanwhile: probe again.
        report(&mut c, 0, 1, 6, 2);
        let sends = report(&mut c, 1, 1, 2, 5);
        assert!(sends.iter().all(|s| s.1 == OP_PROBE));
        // Wave 2: it arrived, balanced, but the sums moved: probe again.
        report(&mut c, 0, 2, 6, 2);
        let sends = report(&mut c, 1, 2, 2, 6);
        assert!(sends.iter().all(|s| s.1 == OP_PROBE));
        // Wave 3: the same sums again: release everyone from round 0.
        report(&mut c, 0, 3, 6, 2);
        let sends = report(&mut c, 1, 3, 2, 6);
        assert_eq!(sends.len(), 2);
        assert!(sends
            .iter()
            .all(|s| s.1 == OP_RELEASE && s.2 == 0u32.to_le_bytes()));
    }

    /// Rounds are reusable: round 1 follows round 0, a busy rank (items
    /// in an aggregation buffer) holds the release, and a quiet round
    /// right after a quiet one ends in one wave (the last wave of the
    /// previous round is the comparison).
    #[test]
    fn quiesce_rounds_repeat_and_busy_ranks_hold_them() {
        let mut c = Control::new(2);
        let z = CloseCounts::default();
        let q = RoundKind::Quiesce;
        let feed = |c: &mut Control, src, round, wave, busy| {
            c.on_message(
                Rank(src),
                OP_REPORT,
                &rep(round, wave, q, busy, 0, 0),
                z,
                false,
            )
            .unwrap()
        };
        assert!(feed(&mut c, 0, 0, 0, false).is_empty());
        assert!(feed(&mut c, 1, 0, 0, false).iter().all(|s| s.1 == OP_PROBE));
        feed(&mut c, 0, 0, 1, false);
        let sends = feed(&mut c, 1, 0, 1, true);
        assert!(sends.iter().all(|s| s.1 == OP_PROBE), "busy holds it");
        feed(&mut c, 0, 0, 2, false);
        let sends = feed(&mut c, 1, 0, 2, false);
        assert!(sends.iter().all(|s| s.1 == OP_RELEASE));
        // Round 1, nothing sent since: one wave.
        feed(&mut c, 1, 1, 0, false);
        let sends = feed(&mut c, 0, 1, 0, false);
        assert!(sends
            .iter()
            .all(|s| s.1 == OP_RELEASE && s.2 == 1u32.to_le_bytes()));
        // A report for a round already over is refused.
        let e = c.on_message(Rank(1), OP_REPORT, &rep(1, 0, q, false, 0, 0), z, false);
        assert!(e.is_err());
    }

    /// One rank in `quiesce`, another in `close` in the same round: every
    /// rank is told, and each then fails with the typed error.
    #[test]
    fn quiesce_beside_close_is_a_mismatch_for_everyone() {
        let mut c = Control::new(3);
        let z = CloseCounts::default();
        c.on_message(
            Rank(0),
            OP_REPORT,
            &rep(0, 0, RoundKind::Quiesce, false, 0, 0),
            z,
            false,
        )
        .unwrap();
        let sends = c
            .on_message(
                Rank(2),
                OP_REPORT,
                &rep(0, 0, RoundKind::Close, false, 0, 0),
                z,
                false,
            )
            .unwrap();
        assert_eq!(sends.len(), 3);
        assert!(sends.iter().all(|s| s.1 == OP_MISMATCH));
        let mut peer = Control::new(3);
        peer.rounds.enter(0, RoundKind::Close, z, false);
        peer.on_message(Rank(0), OP_MISMATCH, &sends[2].2, z, false)
            .unwrap();
        assert!(matches!(
            peer.rounds.mismatch(),
            Some(crate::error::ExtractError::CloseQuiesceMismatch {
                round: 0,
                quiescing: Rank(0),
                closing: Rank(2)
            })
        ));
    }

    #[test]
    fn bad_close_reports_are_protocol_errors() {
        let mut c = Control::new(2);
        let z = CloseCounts::default();
        let k = RoundKind::Close;
        assert!(c
            .on_message(Rank(1), OP_REPORT, &[1, 2, 3], z, false)
            .is_err());
        assert!(c
            .on_message(Rank(1), OP_REPORT, &rep(0, 4, k, false, 0, 0), z, false)
            .is_err());
        assert!(c
            .on_message(Rank(1), OP_REPORT, &rep(3, 0, k, false, 0, 0), z, false)
            .is_err());
        let mut bad_kind = rep(0, 0, k, false, 0, 0);
        bad_kind[8] = 9;
        assert!(c
            .on_message(Rank(1), OP_REPORT, &bad_kind, z, false)
            .is_err());
        assert!(c.on_message(Rank(1), OP_PROBE, &[1], z, false).is_err());
        // A probe for a round this rank is not in.
        assert!(c
            .on_message(Rank(0), OP_PROBE, &encode_probe(0, 7), z, false)
            .is_err());
        c.rounds.enter(0, k, z, false);
        let sends = c
            .on_message(Rank(0), OP_PROBE, &encode_probe(0, 7), z, true)
            .unwrap();
        assert_eq!(sends, vec![(Rank(0), OP_REPORT, rep(0, 7, k, true, 0, 0))]);
    }

    /// The `control` fuzz target's model of the close rule (its first
    /// crash: a report from a rank outside the job was counted): a rank
    /// reporting twice in a wave made up for one that never reported, so
    /// everyone was released while that rank could still send; counts
    /// near `u64::MAX` overflowed (a panic with overflow checks, a wrong
    /// sum without).
    #[test]
    fn a_wave_counts_each_rank_once_and_sums_without_overflow() {
        let mut c = Control::new(3);
        let z = CloseCounts::default();
        let k = RoundKind::Close;
        for wave in 0..2 {
            assert!(report(&mut c, 0, wave, 1, 1).is_empty());
            let e = c.on_message(Rank(0), OP_REPORT, &rep(0, wave, k, false, 0, 0), z, false);
            assert!(
                matches!(e, Err(ProtocolError::BadControl { src: 0, what }) if what.contains("twice")),
                "{e:?}"
            );
            assert!(
                report(&mut c, 1, wave, 0, 0).is_empty(),
                "rank 2 is still due"
            );
            let sends = report(&mut c, 2, wave, 0, 0);
            assert_eq!(sends.len(), 3);
        }
        let mut c = Control::new(2);
        assert!(report(&mut c, 0, 0, u64::MAX, 0).is_empty());
        let e = c.on_message(Rank(1), OP_REPORT, &rep(0, 0, k, false, 1, 0), z, false);
        assert!(
            matches!(e, Err(ProtocolError::BadControl { src: 1, what }) if what.contains("overflow"))
        );
        let e = c.on_message(Rank(2), OP_REPORT, &rep(0, 0, k, false, 0, 0), z, false);
        assert!(
            matches!(e, Err(ProtocolError::BadControl { src: 2, .. })),
            "{e:?}"
        );
    }

    /// The `control` fuzz target's model: any rank's release, probe or
    /// verdict was obeyed, so one rank could end everyone's `close` early.
    #[test]
    fn only_rank0_releases_probes_and_judges() {
        let z = CloseCounts::default();
        for (op, payload) in [
            (OP_RELEASE, 0u32.to_le_bytes().to_vec()),
            (OP_PROBE, encode_probe(0, 1)),
            (OP_VERDICT, vec![0]),
            (OP_MISMATCH, vec![0; 12]),
            (OP_STRAGGLERS, 1u32.to_le_bytes().to_vec()),
        ] {
            let mut c = Control::new(2);
            c.rounds.enter(0, RoundKind::Close, z, false);
            let e = c.on_message(Rank(1), op, &payload, z, false);
            assert!(
                matches!(e, Err(ProtocolError::BadControl { src: 1, .. })),
                "op {op:?}: {e:?}"
            );
            assert!(!c.rounds.released(0) && c.verdict.is_none() && c.rounds.mismatch().is_none());
            assert!(
                c.on_message(Rank(0), op, &payload, z, false).is_ok(),
                "op {op:?} from 0"
            );
        }
        let mut c = Control::new(2);
        c.rounds.enter(0, RoundKind::Close, z, false);
        assert!(c.on_message(Rank(0), OP_RELEASE, &[1], z, false).is_err());
        assert!(c
            .on_message(Rank(0), OP_RELEASE, &1u32.to_le_bytes(), z, false)
            .is_err());
        assert!(!c.rounds.released(0));
        // A straggler list may name only ranks of the job.
        let e = c.on_message(Rank(0), OP_STRAGGLERS, &2u32.to_le_bytes(), z, false);
        assert!(matches!(e, Err(ProtocolError::BadControl { src: 0, .. })));
        assert!(c.take_stragglers().is_none());
    }

    /// The `control` fuzz target's model (decoding is exact): a verdict
    /// with bytes after it, or a name that is not UTF-8, was taken (the
    /// name silently altered).
    #[test]
    fn verdicts_are_decoded_strictly() {
        let v = Verdict::Mismatch {
            index: 1,
            rank: Rank(1),
            ours: Some("a".into()),
            theirs: None,
        };
        let good = v.encode();
        assert_eq!(Verdict::decode(Rank(0), &good), Ok(v));
        assert!(Verdict::decode(Rank(0), &[good.as_slice(), &[0]].concat()).is_err());
        let mut bad = good.clone();
        bad[13] = 0xff; // the name "a"
        assert!(Verdict::decode(Rank(0), &bad).is_err());
        assert!(Verdict::decode(Rank(0), &[0, 0]).is_err());
    }

    proptest::proptest! {
        /// A verdict decodes to what was encoded, whatever the names.
        #[test]
        fn verdicts_round_trip(
            index in proptest::num::u32::ANY,
            rank in proptest::num::u32::ANY,
            ours in proptest::option::of(".{0,12}"),
            theirs in proptest::option::of(".{0,12}"),
        ) {
            let v = Verdict::Mismatch { index, rank: Rank(rank), ours, theirs };
            proptest::prop_assert_eq!(Verdict::decode(Rank(0), &v.encode()), Ok(v));
        }
    }
}
