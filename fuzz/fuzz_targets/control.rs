//! The endpoint's control messages (`fastmsg::internal::control`): the
//! handler-table exchange at start and the close barrier, fed any sequence
//! of well-formed and malformed messages from any rank.
//!
//! An independent model of the protocol says what every message must
//! produce: the sends in reaction (verdicts, probes, release), the
//! verdict a rank ends up with, or a typed `BadControl` error — never a
//! panic, and never a release that the close rule does not allow (every
//! rank reported exactly once in two consecutive waves with equal,
//! balanced sums). A verdict rank 0 sends decodes, on the receiving
//! rank, to the verdict rank 0 computed.

#![no_main]

use arbitrary::Arbitrary;
use fastmsg::error::{ProtocolError, StartError};
use fastmsg::internal::control::{
    encode_report, Control, OP_CLOSE, OP_PROBE, OP_RELEASE, OP_STRAGGLERS, OP_TABLE, OP_VERDICT,
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
    Close {
        src: u8,
        wave: u8,
        sent: u64,
        received: u64,
    },
    /// Close counts that balance (sent = received) when summed.
    Balanced {
        src: u8,
        wave: u8,
        count: u8,
    },
    RawClose {
        src: u8,
        bytes: Vec<u8>,
    },
    Probe {
        src: u8,
        wave: u32,
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
    msgs: Vec<Msg>,
}

/// A verdict as the model sees it: ok, or (index, rank, ours, theirs).
type ModelVerdict = Result<(), (u32, u32, Option<String>, Option<String>)>;

/// The model's view of a rank's control state.
#[derive(Default)]
struct Model {
    tables: Vec<Option<Vec<String>>>,
    verdict: Option<ModelVerdict>,
    wave: u32,
    reported: Vec<bool>,
    sums: (u64, u64),
    last_wave: Option<(u64, u64)>,
    released: bool,
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
            Msg::Close {
                src,
                wave,
                sent,
                received,
            } => (
                *src,
                OP_CLOSE,
                encode_report(u32::from(*wave), *sent, *received),
            ),
            Msg::Balanced { src, wave, count } => {
                let c = u64::from(*count);
                (*src, OP_CLOSE, encode_report(u32::from(*wave), c, c))
            }
            Msg::RawClose { src, bytes } => (*src, OP_CLOSE, bytes.clone()),
            Msg::Probe { src, wave } => (*src, OP_PROBE, wave.to_le_bytes().to_vec()),
            Msg::Raw { src, op, bytes } => (*src, u32::from(*op % 8), bytes.clone()),
        };
        let src = Rank(u32::from(src) % (size + 1));
        let got = c.on_message(src, op, &payload, input.sent, input.received);
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
                                peer.on_message(Rank(0), OP_VERDICT, bytes, 0, 0)
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
            OP_CLOSE => {
                let report = (payload.len() == 20).then(|| {
                    (
                        u32_at(&payload, 0),
                        fastmsg_fuzz::u64_at(&payload, 4),
                        fastmsg_fuzz::u64_at(&payload, 12),
                    )
                });
                match report {
                    Some((wave, s, r))
                        if wave == m.wave
                            && src.0 < size
                            && !m.reported[src.index()]
                            && m.sums.0.checked_add(s).is_some()
                            && m.sums.1.checked_add(r).is_some() =>
                    {
                        m.reported[src.index()] = true;
                        m.sums = (m.sums.0 + s, m.sums.1 + r);
                        if m.reported.iter().all(|&x| x) {
                            let now = std::mem::take(&mut m.sums);
                            m.reported.fill(false);
                            let quiet = now.0 == now.1 && m.last_wave == Some(now);
                            m.last_wave = Some(now);
                            if quiet {
                                Ok((0..size)
                                    .map(|r| (Rank(r), OP_RELEASE, Vec::new()))
                                    .collect())
                            } else {
                                m.wave += 1;
                                let p = m.wave.to_le_bytes().to_vec();
                                Ok((0..size).map(|r| (Rank(r), OP_PROBE, p.clone())).collect())
                            }
                        } else {
                            Ok(Vec::new())
                        }
                    }
                    _ => Err(()),
                }
            }
            OP_PROBE if from0 && payload.len() == 4 => Ok(vec![(
                Rank(0),
                OP_CLOSE,
                encode_report(u32_at(&payload, 0), input.sent, input.received),
            )]),
            OP_RELEASE if from0 && payload.is_empty() => {
                m.released = true;
                Ok(Vec::new())
            }
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
        assert_eq!(c.released(), m.released);
        assert_eq!(
            c.verdict().map(start_of),
            m.verdict.as_ref().map(as_start),
            "the verdict kept"
        );
    }
});
