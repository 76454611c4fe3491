//! The endpoint's control messages (`fastmsg::internal::control`): the
//! handler-table exchange at start and the termination rounds of
//! `quiesce` and `close`, fed any sequence of well-formed and malformed
//! messages from any rank, and of the rank entering rounds itself.
//!
//! An independent model of the protocol says what every message must
//! produce: the sends in reaction (verdicts, probes, releases, mismatch
//! notices), the verdict a rank ends up with, the rounds it is released
//! from, or a typed `BadControl` error — never a panic, and never a
//! release that the termination rule does not allow (every rank reported
//! exactly once in two consecutive waves with equal, balanced sums and
//! none busy; a round whose kinds differ is a mismatch for everyone). A
//! verdict rank 0 sends decodes, on the receiving rank, to the verdict
//! rank 0 computed.

#![no_main]

use arbitrary::Arbitrary;
use fastmsg::error::{ProtocolError, StartError};
use fastmsg::internal::control::{
    encode_probe, encode_report, Control, OP_MISMATCH, OP_PROBE, OP_RELEASE, OP_REPORT,
    OP_STRAGGLERS, OP_TABLE, OP_VERDICT,
};
use fastmsg::internal::handler_table;
use fastmsg::Rank;
use fastmsg_fuzz::u32_at;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Msg {
    Table {
        src: u8,
        names: Vec<String>,
    },
    RawTable {
        src: u8,
        bytes: Vec<u8>,
    },
    Verdict {
        src: u8,
        bytes: Vec<u8>,
    },
    Report {
        src: u8,
        round: u8,
        close: bool,
        wave: u8,
        busy: bool,
        sent: u64,
        received: u64,
    },
    /// Round counts that balance (sent = received) when summed.
    Balanced {
        src: u8,
        round: u8,
        close: bool,
        wave: u8,
        count: u8,
    },
    RawReport {
        src: u8,
        bytes: Vec<u8>,
    },
    Probe {
        src: u8,
        round: u8,
        wave: u32,
    },
    Release {
        src: u8,
        round: u8,
    },
    Mismatch {
        src: u8,
        bytes: Vec<u8>,
    },
    /// This rank enters its next round (`quiesce`, or `close`).
    Enter {
        close: bool,
    },
    Raw {
        src: u8,
        op: u8,
        bytes: Vec<u8>,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    size: u8,
    own_table: Vec<String>,
    sent: u64,
    received: u64,
    busy: bool,
    msgs: Vec<Msg>,
}

/// A verdict as the model sees it: ok, or (index, rank, ours, theirs).
type ModelVerdict = Result<(), (u32, u32, Option<String>, Option<String>)>;

/// The model's view of a rank's control state.
#[derive(Default)]
struct Model {
    tables: Vec<Option<Vec<String>>>,
    verdict: Option<ModelVerdict>,
    // Rank 0's collection of the current round.
    round: u32,
    kind: Option<(bool, u32)>,
    wave: u32,
    reported: Vec<bool>,
    sums: (u64, u64),
    busy: bool,
    last_wave: Option<(u64, u64)>,
    // This rank's own rounds.
    entered: u32,
    current: Option<(u32, bool)>,
    released: Option<u32>,
    mismatch: Option<(u32, u32, u32)>,
}

/// A report as the model decodes it: round, wave, close, busy, sent,
/// received.
fn decode_report(p: &[u8]) -> Option<(u32, u32, bool, bool, u64, u64)> {
    if p.len() != 26 || p[8] > 1 || p[9] > 1 {
        return None;
    }
    Some((
        u32_at(p, 0),
        u32_at(p, 4),
        p[8] == 1,
        p[9] == 1,
        fastmsg_fuzz::u64_at(p, 10),
        fastmsg_fuzz::u64_at(p, 18),
    ))
}

/// The verdict format: 0 (ok) or 1, index, rank, then two names, each a
/// u32 length (u32::MAX: none) and UTF-8 bytes; nothing after.
fn decode_verdict(b: &[u8]) -> Option<ModelVerdict> {
    match b.first()? {
        0 if b.len() == 1 => Some(Ok(())),
        1 => {
            let word = |at: usize| (b.len() >= at + 4).then(|| u32_at(b, at));
            let (index, rank) = (word(1)?, word(5)?);
            let mut at = 9;
            let mut names = [None, None];
            for n in &mut names {
                let len = word(at)?;
                at += 4;
                if len != u32::MAX {
                    let s = b.get(at..at.checked_add(len as usize)?)?;
                    *n = Some(String::from_utf8(s.to_vec()).ok()?);
                    at += len as usize;
                }
            }
            let [ours, theirs] = names;
            (at == b.len()).then_some(Err((index, rank, ours, theirs)))
        }
        _ => None,
    }
}

fn as_start(v: &ModelVerdict) -> String {
    match v {
        Ok(()) => "ok".into(),
        Err((index, rank, ours, theirs)) => format!("{index} {rank} {ours:?} {theirs:?}"),
    }
}

fn start_of(v: Result<(), StartError>) -> String {
    match v {
        Ok(()) => "ok".into(),
        Err(StartError::HandlerMismatch {
            index,
            our_rank,
            ours,
            their_rank,
            theirs,
        }) => {
            assert_eq!(our_rank, Rank(0));
            format!("{index} {} {ours:?} {theirs:?}", their_rank.0)
        }
        Err(e) => panic!("a verdict became {e}"),
    }
}

fuzz_target!(|input: Input| {
    let size = u32::from(input.size % 6) + 1;
    let own: Vec<String> = input.own_table.iter().take(8).cloned().collect();
    let mut c = Control::new(size);
    c.set_own_table(own.clone());
    let mut m = Model {
        tables: vec![None; size as usize],
        reported: vec![false; size as usize],
        ..Model::default()
    };

    for msg in input.msgs.iter().take(256) {
        let (src, op, payload) = match msg {
            Msg::Table { src, names } => (*src, OP_TABLE, handler_table::encode(names)),
            Msg::RawTable { src, bytes } => (*src, OP_TABLE, bytes.clone()),
            Msg::Verdict { src, bytes } => (*src, OP_VERDICT, bytes.clone()),
            Msg::Report {
                src,
                round,
                close,
                wave,
                busy,
                sent,
                received,
            } => (
                *src,
                OP_REPORT,
                encode_report(
                    u32::from(*round),
                    *close,
                    u32::from(*wave),
                    *busy,
                    *sent,
                    *received,
                ),
            ),
            Msg::Balanced {
                src,
                round,
                close,
                wave,
                count,
            } => {
                let c = u64::from(*count);
                let (r, w) = (u32::from(*round), u32::from(*wave));
                (*src, OP_REPORT, encode_report(r, *close, w, false, c, c))
            }
            Msg::RawReport { src, bytes } => (*src, OP_REPORT, bytes.clone()),
            Msg::Probe { src, round, wave } => {
                (*src, OP_PROBE, encode_probe(u32::from(*round), *wave))
            }
            Msg::Release { src, round } => {
                (*src, OP_RELEASE, u32::from(*round).to_le_bytes().to_vec())
            }
            Msg::Mismatch { src, bytes } => (*src, OP_MISMATCH, bytes.clone()),
            Msg::Enter { close } => {
                let round = m.entered;
                m.entered += 1;
                m.current = Some((round, *close));
                let got = c.enter(round, *close, input.sent, input.received, input.busy);
                let want = encode_report(round, *close, 0, input.busy, input.sent, input.received);
                assert_eq!(got, want, "the wave-0 report");
                continue;
            }
            Msg::Raw { src, op, bytes } => (*src, u32::from(*op % 8), bytes.clone()),
        };
        let src = Rank(u32::from(src) % (size + 1));
        let got = c.on_message(src, op, &payload, input.sent, input.received, input.busy);
        let from0 = src == Rank(0);
        // What the model expects: Ok(sends) or Err(()).
        let want: Result<Vec<(Rank, u32, Vec<u8>)>, ()> = match op {
            OP_TABLE => {
                let slot = m.tables.get(src.index());
                match (slot, handler_table::decode(src, &payload)) {
                    (Some(None), Ok(t)) => {
                        m.tables[src.index()] = Some(t);
                        if m.tables.iter().all(Option::is_some) {
                            let v = m.tables.iter().enumerate().find_map(|(r, t)| {
                                handler_table::first_difference(&own, t.as_ref().unwrap())
                                    .map(|(i, o, t)| (i, r as u32, o, t))
                            });
                            // Checked below through a receiving rank.
                            let v = match v {
                                None => Ok(()),
                                Some(d) => Err(d),
                            };
                            let sends = match &got {
                                Ok(s) => s.clone(),
                                Err(e) => panic!("the last table gave {e}"),
                            };
                            assert_eq!(sends.len(), size as usize);
                            for (r, (dest, sop, bytes)) in sends.iter().enumerate() {
                                assert_eq!((*dest, *sop), (Rank(r as u32), OP_VERDICT));
                                let mut peer = Control::new(size);
                                peer.on_message(Rank(0), OP_VERDICT, bytes, 0, 0, false)
                                    .expect("rank 0's own verdict decodes");
                                assert_eq!(
                                    start_of(peer.verdict().expect("a verdict")),
                                    as_start(&v)
                                );
                            }
                            Ok(sends)
                        } else {
                            Ok(Vec::new())
                        }
                    }
                    _ => Err(()),
                }
            }
            OP_VERDICT => match (from0, &m.verdict, decode_verdict(&payload)) {
                (true, None, Some(v)) => {
                    m.verdict = Some(v);
                    Ok(Vec::new())
                }
                _ => Err(()),
            },
            OP_REPORT => match decode_report(&payload) {
                None => Err(()),
                Some(_) if m.mismatch.is_some() => Ok(Vec::new()),
                Some((round, wave, close, busy, s, r))
                    if round == m.round
                        && wave == m.wave
                        && src.0 < size
                        && !m.reported[src.index()]
                        && m.sums.0.checked_add(s).is_some()
                        && m.sums.1.checked_add(r).is_some() =>
                {
                    m.reported[src.index()] = true;
                    match m.kind {
                        Some((k, first)) if k != close => {
                            let (q, cl) = if k { (src.0, first) } else { (first, src.0) };
                            m.mismatch = Some((m.round, q, cl));
                            let p: Vec<u8> = [m.round, q, cl]
                                .iter()
                                .flat_map(|w| w.to_le_bytes())
                                .collect();
                            Ok((0..size)
                                .map(|d| (Rank(d), OP_MISMATCH, p.clone()))
                                .collect())
                        }
                        _ => {
                            m.kind.get_or_insert((close, src.0));
                            m.sums = (m.sums.0 + s, m.sums.1 + r);
                            m.busy |= busy;
                            if m.reported.iter().all(|&x| x) {
                                let now = std::mem::take(&mut m.sums);
                                let busy = std::mem::take(&mut m.busy);
                                m.reported.fill(false);
                                let quiet = !busy && now.0 == now.1 && m.last_wave == Some(now);
                                m.last_wave = Some(now);
                                if quiet {
                                    let p = m.round.to_le_bytes().to_vec();
                                    m.round += 1;
                                    m.wave = 0;
                                    m.kind = None;
                                    Ok((0..size)
                                        .map(|d| (Rank(d), OP_RELEASE, p.clone()))
                                        .collect())
                                } else {
                                    m.wave += 1;
                                    let p = encode_probe(m.round, m.wave);
                                    Ok((0..size).map(|d| (Rank(d), OP_PROBE, p.clone())).collect())
                                }
                            } else {
                                Ok(Vec::new())
                            }
                        }
                    }
                }
                Some(_) => Err(()),
            },
            OP_PROBE if from0 && payload.len() == 8 => match m.current {
                Some((round, close)) if round == u32_at(&payload, 0) => Ok(vec![(
                    Rank(0),
                    OP_REPORT,
                    encode_report(
                        round,
                        close,
                        u32_at(&payload, 4),
                        input.busy,
                        input.sent,
                        input.received,
                    ),
                )]),
                _ => Err(()),
            },
            OP_RELEASE if from0 && payload.len() == 4 => match m.current {
                Some((round, _)) if round == u32_at(&payload, 0) => {
                    m.current = None;
                    m.released = Some(round);
                    Ok(Vec::new())
                }
                _ => Err(()),
            },
            // A straggler list: rank 0 alone, whole u32 ranks, at most the
            // job's size of them, each inside the job.
            OP_STRAGGLERS
                if from0
                    && payload.len() % 4 == 0
                    && payload.len() / 4 <= size as usize
                    && payload.chunks_exact(4).all(|w| u32_at(w, 0) < size) =>
            {
                Ok(Vec::new())
            }
            OP_MISMATCH if from0 && payload.len() == 12 => {
                let (round, q, cl) = (
                    u32_at(&payload, 0),
                    u32_at(&payload, 4),
                    u32_at(&payload, 8),
                );
                if q < size && cl < size {
                    m.mismatch.get_or_insert((round, q, cl));
                    Ok(Vec::new())
                } else {
                    Err(())
                }
            }
            _ => Err(()),
        };
        match (got, want) {
            (Ok(sends), Ok(w)) => assert_eq!(sends, w, "op {op} from {src}"),
            (Err(ProtocolError::BadControl { src: s, what }), Err(())) => {
                assert_eq!(s, src.0);
                assert!(!what.is_empty());
            }
            (got, want) => panic!("op {op} from {src} ({payload:?}): {got:?}, model says {want:?}"),
        }
        for r in 0..m.entered {
            assert_eq!(
                c.released(r),
                m.released.is_some_and(|x| x >= r),
                "round {r}"
            );
        }
        assert_eq!(c.mismatch(), m.mismatch, "the mismatch kept");
        assert_eq!(
            c.verdict().map(start_of),
            m.verdict.as_ref().map(as_start),
            "the verdict kept"
        );
    }
});
