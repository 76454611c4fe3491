//! Termination rounds: the counting termination detection behind both
//! [`quiesce`](crate::Endpoint::quiesce) and [`close`](crate::Endpoint::close).
//!
//! The counting method of Mattern's four-counter algorithm, generalised
//! from the one `close` of a job to any number of *rounds*. Every rank
//! counts the user messages it has sent (a parked one counts as sent) and
//! those that arrived whole, for the whole run. Each call of `quiesce` or
//! `close` enters the rank's next round (numbered from 0; every rank must
//! make the same sequence of calls) and reports to rank 0
//! ([`OP_REPORT`], wave 0): the round, its kind, its counts, and whether
//! its idle hooks still have work (*busy*: items waiting in an
//! aggregation buffer are not messages yet). Once every rank has reported
//! a wave, rank 0 sums the counts; if no rank was busy, sent equals
//! received and the sums equal those of the previous complete wave (of
//! this round, or the last wave of the previous round: that wave ended
//! before this round began), no user message was in flight, parked or
//! about to be sent in between, and no handler could send another: rank 0
//! releases every rank from the round ([`OP_RELEASE`]). Otherwise it asks
//! every rank for its counts again ([`OP_PROBE`], the next wave).
//! Handlers and hooks keep running meanwhile, so what they send in
//! answer is delivered before the round ends.
//!
//! A round that is `quiesce` on one rank and `close` on another can never
//! end well: rank 0 tells every rank ([`OP_MISMATCH`]) and each fails
//! with `ExtractError::CloseQuiesceMismatch` instead of hanging.
//!
//! Every message is checked as coming from another process: reports from
//! ranks outside the job, twice in one wave, for another round or wave,
//! or whose sums overflow; probes, releases and mismatch notices from any
//! rank but 0 — each is a `ProtocolError::BadControl`.

use crate::endpoint::engine::control_op::{ControlOp, Sends, REPORT_BYTES};
use crate::error::{ExtractError, ProtocolError};
use crate::id::Rank;
use std::cell::Cell;

/// A rank's report for a wave of a round (to rank 0).
pub(crate) const OP_REPORT: ControlOp = ControlOp::Report;
/// Rank 0 releases every rank from a round.
pub(crate) const OP_RELEASE: ControlOp = ControlOp::Release;
/// Rank 0 asks for the counts of the next wave of a round.
pub(crate) const OP_PROBE: ControlOp = ControlOp::Probe;
/// Rank 0 says a round is `quiesce` on one rank and `close` on another.
pub(crate) const OP_MISMATCH: ControlOp = ControlOp::Mismatch;

/// A rank's message counts, reported in termination rounds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CloseCounts {
    /// User messages sent (parked ones included).
    pub(crate) sent: u64,
    /// User messages whose last fragment arrived here.
    pub(crate) received: u64,
}

/// This rank's side of the counting, as the engine keeps it while it
/// runs: user messages that arrived whole (the receive path counts each
/// once, in `crate::endpoint::engine::core` and
/// `crate::endpoint::receive::dispatch`) and the rounds entered (the
/// round loop, `crate::endpoint::rounds::quiesce`, takes the next number).
/// Messages sent are counted by the send queues (`Net::sent_count`).
#[derive(Debug, Default)]
pub(crate) struct Counting {
    received: Cell<u64>,
    rounds: Cell<u32>,
}

impl Counting {
    /// A user message's last fragment arrived.
    #[inline(always)]
    pub(crate) fn received_one(&self) {
        self.received.set(self.received.get() + 1);
    }

    /// `n` user messages' last fragments arrived (0 or 1 per fragment).
    #[inline(always)]
    pub(crate) fn received_n(&self, n: u64) {
        self.received.set(self.received.get() + n);
    }

    /// User messages that arrived whole so far.
    #[inline]
    pub(crate) fn received(&self) -> u64 {
        self.received.get()
    }

    /// The number of the round this rank enters now (from 0).
    pub(crate) fn next_round(&self) -> u32 {
        let round = self.rounds.get();
        self.rounds.set(round + 1);
        round
    }
}

/// What a round is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RoundKind {
    /// `quiesce`: every rank goes on afterwards.
    Quiesce,
    /// `close`: every rank leaves afterwards.
    Close,
}

impl RoundKind {
    fn code(self) -> u8 {
        match self {
            RoundKind::Quiesce => 0,
            RoundKind::Close => 1,
        }
    }

    fn of(code: u8) -> Option<Self> {
        match code {
            0 => Some(RoundKind::Quiesce),
            1 => Some(RoundKind::Close),
            _ => None,
        }
    }
}

/// A rank's report for one wave of one round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Report {
    pub(crate) round: u32,
    pub(crate) wave: u32,
    pub(crate) kind: RoundKind,
    /// Its idle hooks have work (it is not quiescent).
    pub(crate) busy: bool,
    pub(crate) counts: CloseCounts,
}

impl Report {
    /// Round, wave (u32 LE), kind, busy (one byte each), sent, received
    /// (u64 LE).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(REPORT_BYTES);
        b.extend_from_slice(&self.round.to_le_bytes());
        b.extend_from_slice(&self.wave.to_le_bytes());
        b.push(self.kind.code());
        b.push(u8::from(self.busy));
        b.extend_from_slice(&self.counts.sent.to_le_bytes());
        b.extend_from_slice(&self.counts.received.to_le_bytes());
        b
    }

    /// Decode exactly what [`encode`](Self::encode) makes.
    pub(crate) fn decode(b: &[u8]) -> Option<Report> {
        let b: &[u8; REPORT_BYTES] = b.try_into().ok()?;
        let (round, rest) = b.split_first_chunk::<4>()?;
        let (wave, rest) = rest.split_first_chunk::<4>()?;
        let (&[kind, busy], rest) = rest.split_first_chunk::<2>()?;
        let (sent, received) = rest.split_first_chunk::<8>()?;
        Some(Report {
            round: u32::from_le_bytes(*round),
            wave: u32::from_le_bytes(*wave),
            kind: RoundKind::of(kind)?,
            busy: match busy {
                0 => false,
                1 => true,
                _ => return None,
            },
            counts: CloseCounts {
                sent: u64::from_le_bytes(*sent),
                received: u64::from_le_bytes(received.try_into().ok()?),
            },
        })
    }
}

/// A probe's payload: round, wave.
pub(crate) fn encode_probe(round: u32, wave: u32) -> Vec<u8> {
    [round.to_le_bytes(), wave.to_le_bytes()].concat()
}

fn words<const N: usize>(b: &[u8]) -> Option<[u32; N]> {
    if b.len() != 4 * N {
        return None;
    }
    let mut w = [0; N];
    for (i, c) in b.chunks_exact(4).enumerate() {
        w[i] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
    Some(w)
}

/// This rank's state in termination rounds, and on rank 0 the
/// collection of the current round's waves.
#[derive(Debug)]
pub(crate) struct Rounds {
    size: u32,
    /// The round this rank is in, and its kind.
    current: Option<(u32, RoundKind)>,
    /// The last round this rank was released from.
    released: Option<u32>,
    /// A round was `quiesce` on one rank and `close` on another (sticky).
    mismatch: Option<(u32, Rank, Rank)>,
    // Rank 0 only: the round being collected.
    round: u32,
    /// Its kind, and the first rank that reported it.
    kind: Option<(RoundKind, Rank)>,
    wave: u32,
    reported: Vec<bool>,
    reports: u32,
    sums: CloseCounts,
    busy: bool,
    /// The previous complete wave's sums (of this round or the last).
    last_wave: Option<CloseCounts>,
    /// Which ranks have entered the round being collected (reported its
    /// wave 0).
    entered: Vec<bool>,
}

impl Rounds {
    pub(crate) fn new(size: u32) -> Self {
        Rounds {
            size,
            current: None,
            released: None,
            mismatch: None,
            round: 0,
            kind: None,
            wave: 0,
            reported: vec![false; size as usize],
            reports: 0,
            sums: CloseCounts::default(),
            busy: false,
            last_wave: None,
            entered: vec![false; size as usize],
        }
    }

    /// Enter round `round` of `kind`: the wave-0 report to send rank 0.
    pub(crate) fn enter(
        &mut self,
        round: u32,
        kind: RoundKind,
        counts: CloseCounts,
        busy: bool,
    ) -> Report {
        self.current = Some((round, kind));
        Report {
            round,
            wave: 0,
            kind,
            busy,
            counts,
        }
    }

    /// Whether rank 0 has released this rank from `round`.
    pub(crate) fn released(&self, round: u32) -> bool {
        self.released.is_some_and(|r| r >= round)
    }

    /// The mismatch error, once rank 0 has found one.
    pub(crate) fn mismatch(&self) -> Option<ExtractError> {
        self.mismatch.map(
            |(round, quiescing, closing)| ExtractError::CloseQuiesceMismatch {
                round,
                quiescing,
                closing,
            },
        )
    }

    /// Rank 0: which ranks have not entered the round being collected,
    /// and which have.
    pub(crate) fn census(&self) -> (Vec<Rank>, Vec<Rank>) {
        let (mut missing, mut entered) = (Vec::new(), Vec::new());
        for (r, &c) in self.entered.iter().enumerate() {
            if c { &mut entered } else { &mut missing }.push(Rank(r as u32));
        }
        (missing, entered)
    }

    /// Handle a round message (`OP_REPORT`, `OP_PROBE`, `OP_RELEASE`,
    /// `OP_MISMATCH`) from `src`; `counts` and `busy` are this rank's now.
    pub(crate) fn on_message(
        &mut self,
        src: Rank,
        op: ControlOp,
        payload: &[u8],
        counts: CloseCounts,
        busy: bool,
    ) -> Result<Sends, ProtocolError> {
        let bad = |what| ProtocolError::BadControl { src: src.0, what };
        match op {
            OP_REPORT => {
                let r = Report::decode(payload).ok_or(bad("malformed round report"))?;
                self.on_report(src, r)
            }
            OP_PROBE => {
                let [round, wave] = words::<2>(payload).ok_or(bad("malformed round probe"))?;
                match self.current {
                    Some((r, kind)) if r == round => {
                        let report = Report {
                            round,
                            wave,
                            kind,
                            busy,
                            counts,
                        };
                        Ok(vec![(Rank(0), OP_REPORT, report.encode())])
                    }
                    _ => Err(bad("probe for a round this rank is not in")),
                }
            }
            OP_RELEASE => {
                let [round] = words::<1>(payload).ok_or(bad("malformed round release"))?;
                match self.current {
                    Some((r, _)) if r == round => {
                        self.current = None;
                        self.released = Some(round);
                        Ok(Vec::new())
                    }
                    _ => Err(bad("release of a round this rank is not in")),
                }
            }
            OP_MISMATCH => {
                let [round, q, c] = words::<3>(payload).ok_or(bad("malformed round mismatch"))?;
                if q >= self.size || c >= self.size {
                    return Err(bad("round mismatch names a rank outside the job"));
                }
                self.mismatch.get_or_insert((round, Rank(q), Rank(c)));
                Ok(Vec::new())
            }
            _ => Err(bad("unknown round operation")),
        }
    }

    /// Rank 0: one rank's report for the round being collected.
    fn on_report(&mut self, src: Rank, r: Report) -> Result<Sends, ProtocolError> {
        let bad = |what| ProtocolError::BadControl { src: src.0, what };
        if self.mismatch.is_some() {
            return Ok(Vec::new()); // the rounds are over: everyone was told
        }
        if r.round != self.round {
            return Err(bad("round report for the wrong round"));
        }
        if r.wave != self.wave {
            return Err(bad("round report for the wrong wave"));
        }
        // One report per rank per wave: a wave counted with a rank twice
        // and another not at all could release early.
        let seen = self
            .reported
            .get_mut(src.index())
            .ok_or(bad("round report from a rank outside the job"))?;
        if *seen {
            return Err(bad("round report sent twice in one wave"));
        }
        let sent = self.sums.sent.checked_add(r.counts.sent);
        let received = self.sums.received.checked_add(r.counts.received);
        let (Some(sent), Some(received)) = (sent, received) else {
            return Err(bad("round counts overflow"));
        };
        *seen = true;
        self.entered[src.index()] = true;
        match self.kind {
            None => self.kind = Some((r.kind, src)),
            Some((k, first)) if k != r.kind => {
                let (q, c) = if k == RoundKind::Quiesce {
                    (first, src)
                } else {
                    (src, first)
                };
                self.mismatch = Some((self.round, q, c));
                let payload = [self.round, q.0, c.0]
                    .iter()
                    .flat_map(|w| w.to_le_bytes())
                    .collect::<Vec<u8>>();
                return Ok((0..self.size)
                    .map(|d| (Rank(d), OP_MISMATCH, payload.clone()))
                    .collect());
            }
            Some(_) => {}
        }
        self.sums = CloseCounts { sent, received };
        self.busy |= r.busy;
        self.reports += 1;
        if self.reports < self.size {
            return Ok(Vec::new());
        }
        let now = std::mem::take(&mut self.sums);
        let busy = std::mem::take(&mut self.busy);
        self.reports = 0;
        self.reported.fill(false);
        let quiet = !busy && now.sent == now.received && self.last_wave == Some(now);
        self.last_wave = Some(now);
        if quiet {
            let round = self.round;
            self.round += 1;
            self.wave = 0;
            self.kind = None;
            self.entered.fill(false);
            let payload = round.to_le_bytes().to_vec();
            return Ok((0..self.size)
                .map(|d| (Rank(d), OP_RELEASE, payload.clone()))
                .collect());
        }
        self.wave += 1;
        let probe = encode_probe(self.round, self.wave);
        Ok((0..self.size)
            .map(|d| (Rank(d), OP_PROBE, probe.clone()))
            .collect())
    }
}
