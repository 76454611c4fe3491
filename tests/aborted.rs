//! A message that does not carry the bytes it declared arrives as an
//! *aborted* message — the async handler's `receive` fails with
//! `ReceiveError::Aborted` after the bytes that were sent, the
//! plain-function handler's last piece is flagged `is_aborted` — never as a
//! valid message padded with zeros. Causes: `end` before the declared
//! length, a dropped writer, a piece past the declared length, and a
//! sender that dies mid-stream.

mod common;

use common::procs::{self, Spawner};
use fastmsg::error::{ExtractError, ReceiveError, SendError};
use fastmsg::threads;
use fastmsg::{EndpointBuilder, Rank};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// What a handler saw of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    /// Ended normally with these bytes.
    Whole(Vec<u8>),
    /// Ended aborted after these bytes.
    Aborted(Vec<u8>),
}

type Log = Rc<RefCell<Vec<Seen>>>;

/// Register an async and a plain-function handler that record what they
/// see.
fn recorders(b: &mut EndpointBuilder, log: &Log) -> (fastmsg::HandlerId, fastmsg::HandlerId) {
    let l = log.clone();
    let h_async = b.register("rec-async", move |_c, mut m| {
        let l = l.clone();
        async move {
            let mut got = Vec::new();
            let mut buf = vec![0u8; 3000];
            loop {
                match m.receive(&mut buf).await {
                    Ok(0) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(ReceiveError::Aborted {
                        declared, received, ..
                    }) => {
                        assert_eq!(received as usize, got.len().max(received as usize));
                        assert!(received < declared || declared == received);
                        // Bytes copied by the failing call are in `buf`:
                        // `received` counts them.
                        let extra = received as usize - got.len();
                        got.extend_from_slice(&buf[..extra]);
                        l.borrow_mut().push(Seen::Aborted(got));
                        return Ok(());
                    }
                    Err(e) => return Err(e.into()),
                }
                if m.remaining() == 0 {
                    break;
                }
            }
            l.borrow_mut().push(Seen::Whole(got));
            Ok(())
        }
    });
    let l = log.clone();
    let acc: Rc<RefCell<Vec<u8>>> = Rc::default();
    let h_fn = b.register_fn("rec-fn", move |_c, p| {
        if p.is_first() {
            acc.borrow_mut().clear();
        }
        acc.borrow_mut().extend_from_slice(p.data());
        if p.is_last() {
            let got = std::mem::take(&mut *acc.borrow_mut());
            let seen = if p.is_aborted() {
                assert!(p.check().is_err());
                Seen::Aborted(got)
            } else {
                Seen::Whole(got)
            };
            l.borrow_mut().push(seen);
        }
        Ok(())
    });
    (h_async, h_fn)
}

fn pattern(n: usize, salt: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31) ^ salt | 1)
        .collect()
}

/// Rank 1 sends rank 0, to each handler kind: a short message (`end`
/// early), a dropped writer, an overflowing piece — small and spanning
/// frames — then a good message; rank 0 checks what its handlers saw.
#[test]
fn short_dropped_and_overflowing_messages_arrive_aborted() {
    threads::run(
        2,
        |c| c.shm.credits = 4,
        |mut b| {
            let log: Log = Rc::default();
            let (h_async, h_fn) = recorders(&mut b, &log);
            let mut ep = b.start()?;
            let cases = [(10usize, 5usize), (100_000, 50_000), (100_000, 0)];
            // A message of which nothing went out (no byte written, so no
            // frame reserved) is not delivered at all: nothing ever
            // started its handler. The others come out aborted.
            let delivered = cases.iter().filter(|c| c.1 > 0).count();
            let per_kind = delivered * 3 + 1;
            if ep.rank() == Rank(1) {
                for h in [h_async, h_fn] {
                    for &(declared, sent) in &cases {
                        let data = pattern(sent, declared as u8);
                        // `end` before the declared length.
                        let mut w = ep.begin_message(Rank(0), declared, h)?;
                        w.send_piece(&data)?;
                        match w.end() {
                            Err(SendError::Short { .. }) => {}
                            other => panic!("short end gave {other:?}"),
                        }
                        // The writer dropped (an early `?`, a panic).
                        let mut w = ep.begin_message(Rank(0), declared, h)?;
                        w.send_piece(&data)?;
                        drop(w);
                        // A piece past the declared length.
                        let mut w = ep.begin_message(Rank(0), declared, h)?;
                        w.send_piece(&data)?;
                        let too_much = vec![9u8; declared - sent + 1];
                        assert!(matches!(
                            w.send_piece(&too_much),
                            Err(SendError::Overflow { .. })
                        ));
                        assert!(matches!(
                            w.send_piece(b"x"),
                            Err(SendError::MessageAborted { dest: Rank(0) })
                        ));
                        assert!(matches!(w.end(), Err(SendError::MessageAborted { .. })));
                    }
                    ep.send(Rank(0), h, &[b"good"])?;
                }
            } else {
                ep.wait_until(|| log.borrow().len() == 2 * per_kind)?;
                let log = log.borrow();
                for (k, kind) in ["async", "fn"].iter().enumerate() {
                    let seen = &log[k * per_kind..(k + 1) * per_kind];
                    let mut i = 0;
                    for &(declared, sent) in &cases {
                        let data = pattern(sent, declared as u8);
                        if sent == 0 {
                            continue;
                        }
                        for how in ["short end", "dropped writer", "overflow"] {
                            assert_eq!(
                                seen[i],
                                Seen::Aborted(data.clone()),
                                "{kind} handler, {how}, {sent} of {declared} bytes"
                            );
                            i += 1;
                        }
                    }
                    assert_eq!(
                        seen[i],
                        Seen::Whole(b"good".to_vec()),
                        "{kind}: then a good one"
                    );
                }
            }
            ep.close()?;
            Ok(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

/// The rank program for a sender that dies mid-stream.
#[test]
fn aborted_rank() {
    let Ok(kind) = std::env::var("ABORT_KIND") else {
        return;
    };
    let mut b = EndpointBuilder::from_env().expect("env");
    let log: Log = Rc::default();
    let (h_async, h_fn) = recorders(&mut b, &log);
    let mut ep = b.start().expect("start");
    let h = if kind == "async" { h_async } else { h_fn };
    let sent = 300_000;
    if ep.rank() == Rank(1) {
        let data = pattern(sent, 7);
        let mut w = ep.begin_message(Rank(0), 1 << 20, h).expect("begin");
        w.send_piece(&data).expect("piece");
        // Dies with the message open (no drop, no close).
        std::process::exit(0);
    }
    let t = Instant::now();
    let mut died = false;
    while log.borrow().is_empty() || !died {
        match ep.extract(usize::MAX) {
            Ok(_) => {}
            Err(ExtractError::PeerDied { rank: Rank(1), .. }) => died = true,
            Err(e) => panic!("unexpected {e}"),
        }
        assert!(t.elapsed() < Duration::from_secs(10), "never told");
    }
    let seen = log.borrow()[0].clone();
    match seen {
        Seen::Aborted(got) => {
            assert!(got.len() <= sent);
            assert_eq!(got, pattern(sent, 7)[..got.len()], "bytes as sent");
        }
        Seen::Whole(got) => panic!("a cut-off message came out whole ({} bytes)", got.len()),
    }
}

fn sender_dies(kind: &str) {
    let sp = Spawner {
        rank_test: "aborted_rank",
        size: 2,
        job: format!("abort-{kind}-{}", std::process::id()),
        env: vec![
            ("ABORT_KIND".into(), kind.into()),
            ("FASTMSG_CREDITS".into(), "8".into()),
        ],
    };
    let mut ranks: Vec<_> = (0..2).map(|r| sp.spawn(r, &[], &[])).collect();
    let st = procs::wait_all(&mut ranks, Duration::from_secs(30), kind);
    assert!(st[0].success(), "{kind}: the receiver failed: {}", st[0]);
}

#[test]
fn a_sender_that_dies_mid_stream_aborts_its_message_async() {
    sender_dies("async");
}

#[test]
fn a_sender_that_dies_mid_stream_aborts_its_message_plain() {
    sender_dies("fn");
}
