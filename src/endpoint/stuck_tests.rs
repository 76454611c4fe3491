//! A shared receive queue left holding a value the protocol itself writes,
//! but never while a sender holding a credit waits on it: senders end
//! their wait with a typed error naming the queue's owner instead of
//! spinning for ever.

use super::Endpoint;
use crate::error::{ExtractError, ProtocolError, SendError};
use crate::id::Rank;
use crate::sync::{AtomicBool, AtomicU32, Ordering};
use crate::threads;
use std::time::{Duration, Instant};

fn shm(ep: &Endpoint, f: impl FnOnce(&mut crate::transport::ShmTransport)) {
    f(ep.core.net().borrow_mut().shm_mut())
}

/// The three ranks share rank 0's one queue (8 slots: 2 credits for each
/// of 3 senders, rounded up to a power of two). Rank
/// 1 sends 8 messages (a lap), rank 0 takes them, then rank 1 sets the
/// stamp of the next slot back one lap — "recycled for the earlier
/// position", which the credit protocol rules out once that position was
/// taken — and sends: the send ends with the queue reported corrupt,
/// naming rank 0 and the stamp; before, it (and every later sender,
/// `close` included) spun for ever.
fn set_back_stamp(frames: bool) {
    let done = AtomicBool::new(false);
    let got = std::sync::Arc::new(AtomicU32::new(0));
    threads::run(
        3,
        |c| {
            c.shm.queues = Some(1);
            c.shm.credits = 2;
        },
        |mut b| {
            let g = std::sync::Arc::clone(&got);
            let h = b.register_fn("h", move |_c, _p| {
                g.fetch_add(1, Ordering::Relaxed);
                Ok(())
            });
            let mut ep = b.start()?;
            let t0 = Instant::now();
            let bounded = || t0.elapsed() < Duration::from_secs(30);
            match ep.rank().0 {
                0 => {
                    // Polls until rank 1 is done; what it finds about its
                    // own queue is not this test's concern.
                    // SYNC POINT test-done (acquire side).
                    while !done.load(Ordering::Acquire) && bounded() {
                        let _ = ep.extract(usize::MAX);
                    }
                    Ok(())
                }
                2 => {
                    // SYNC POINT test-done (acquire side).
                    while !done.load(Ordering::Acquire) && bounded() {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Ok(())
                }
                _ => {
                    let data = vec![3u8; if frames { 64 } else { 0 }];
                    for _ in 0..8 {
                        ep.send(Rank(0), h, &[&data])?;
                    }
                    while got.load(Ordering::Relaxed) < 8 && bounded() {
                        ep.extract(usize::MAX)?;
                    }
                    assert_eq!(got.load(Ordering::Relaxed), 8);
                    shm(&ep, |t| t.set_back_next_stamp(Rank(0)));
                    let r = ep.send(Rank(0), h, &[&data]);
                    let e = match r {
                        Err(SendError::PeerGone { rank: Rank(0) }) => ep
                            .extract(usize::MAX)
                            .expect_err("the stuck queue is reported"),
                        other => panic!("the send on a stuck queue gave {other:?}"),
                    };
                    assert!(
                        matches!(
                            &e,
                            ExtractError::Protocol(ProtocolError::PeerQueueCorrupt { dest: 0, pos, seq })
                                if *seq + 8 == *pos
                        ) && e.failed_peer() == Some(Rank(0)),
                        "{e:?}"
                    );
                    assert!(e.to_string().contains("slot stamp"), "{e}");
                    // SYNC POINT test-done (release side).
                    done.store(true, Ordering::Release);
                    Ok(())
                }
            }
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_slot_stamp_set_back_one_lap_ends_the_senders_wait_with_a_typed_error() {
    set_back_stamp(false);
}

#[test]
fn the_same_for_a_send_through_a_frame() {
    set_back_stamp(true);
}

/// Rank 1 fills its dedicated queue on rank 0 (4 credits) while rank 0
/// does not poll, then sets the stamps of those slots back one lap ("not
/// yet published" to rank 0, which would wait for them for ever) and
/// sends once more: the send, waiting for credit, ends with the queue
/// reported corrupt, naming rank 0 and a stamp. Before, it waited for
/// credit for ever (here: until the test's bound).
#[test]
fn a_dedicated_queue_set_back_one_lap_ends_the_senders_credit_wait() {
    let filled = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    threads::run(
        2,
        |c| c.shm.credits = 4,
        |mut b| {
            let h = b.register_fn("h", |_c, _p| Ok(()));
            let mut ep = b.start()?;
            let t0 = Instant::now();
            let bounded = || t0.elapsed() < Duration::from_secs(20);
            if ep.rank() == Rank(0) {
                // SYNC POINT test-filled (acquire side).
                while !filled.load(Ordering::Acquire) && bounded() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                // SYNC POINT test-done (acquire side).
                while !done.load(Ordering::Acquire) && bounded() {
                    let _ = ep.extract(usize::MAX);
                }
                return Ok(());
            }
            for _ in 0..4 {
                ep.send(Rank(0), h, &[b"x"])?;
            }
            shm(&ep, |t| t.set_back_sent_stamps(Rank(0)));
            // SYNC POINT test-filled (release side).
            filled.store(true, Ordering::Release);
            let r = ep.send(Rank(0), h, &[b"y"]);
            let e = match r {
                Err(SendError::PeerGone { rank: Rank(0) }) => ep
                    .extract(usize::MAX)
                    .expect_err("the corrupt queue is reported"),
                other => panic!("the send on a set-back queue gave {other:?}"),
            };
            assert!(
                matches!(
                    &e,
                    ExtractError::Protocol(ProtocolError::PeerQueueCorrupt { dest: 0, pos, seq })
                        if *seq != *pos + 1
                ) && e.failed_peer() == Some(Rank(0)),
                "{e:?}"
            );
            // SYNC POINT test-done (release side).
            done.store(true, Ordering::Release);
            Ok(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

/// A receiver that only polls with `extract` learns that its dedicated
/// queue was scribbled on (the next slot's stamp set to a value of no lap:
/// the empty poll compares with one value only and would wait for ever),
/// as a typed error naming the queue and its sender, without any blocking
/// wait — before, only `close` reported it.
#[test]
fn a_receiver_that_only_extracts_learns_of_its_corrupt_dedicated_queue() {
    let scribbled = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    threads::run(
        2,
        |_| {},
        |mut b| {
            b.register_fn("h", |_c, _p| Ok(()));
            let mut ep = b.start()?;
            let t0 = Instant::now();
            let bounded = || t0.elapsed() < Duration::from_secs(20);
            if ep.rank() == Rank(1) {
                shm(&ep, |t| t.corrupt_next_stamp(Rank(0), 0xdead_0000));
                // SYNC POINT test-scribbled (release side).
                scribbled.store(true, Ordering::Release);
                // SYNC POINT test-done (acquire side).
                while !done.load(Ordering::Acquire) && bounded() {
                    std::thread::sleep(Duration::from_millis(5));
                }
                return Ok(());
            }
            // SYNC POINT test-scribbled (acquire side).
            while !scribbled.load(Ordering::Acquire) && bounded() {
                std::thread::sleep(Duration::from_millis(1));
            }
            let found = loop {
                match ep.extract(usize::MAX) {
                    Err(e) => break Some(e),
                    Ok(_) if bounded() => {}
                    Ok(_) => break None,
                }
            };
            // SYNC POINT test-done (release side).
            done.store(true, Ordering::Release);
            let e = found.expect("extract alone never reported the corrupt queue");
            assert!(
                matches!(
                    e,
                    ExtractError::Protocol(ProtocolError::QueueCorrupt {
                        sender: Some(1),
                        seq: 0xdead_0000,
                        ..
                    })
                ),
                "{e:?}"
            );
            Ok(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

/// What each of the two ranks of
/// [`two_ranks_with_corrupt_queues_do_not_wait_for_each_others_credit`]
/// saw: its last send, and the errors that followed.
type Seen = (Option<Result<(), SendError>>, Vec<ExtractError>);

/// Ranks 0 and 1 each fill the other's credit (2 messages, after a lap
/// of 8 on the 8-slot queues) and then find the stamps of their own
/// queue's untaken positions set back one lap ("published a lap earlier":
/// the poll reads "not yet published"); each sends once more and waits
/// for the other's credit. Each one's audit finds its own queue corrupt;
/// before, that error was only kept for the next `extract` while the
/// send waited on for credit the other could never return, the other
/// doing the same: both waited for ever (here: until rank 2, the test's
/// clock, failed after 20 s and so aborted them). A rank whose shared
/// queue is out of service leaves the job, so each send ends, with the
/// other gone or this rank gone, and each rank names its own queue.
#[test]
fn two_ranks_with_corrupt_queues_do_not_wait_for_each_others_credit() {
    let phase = [AtomicU32::new(0), AtomicU32::new(0)];
    let done = AtomicU32::new(0);
    let limit = Duration::from_secs(20);
    let out = threads::run(
        3,
        |c| {
            c.shm.queues = Some(1);
            c.shm.credits = 2;
        },
        |mut b| -> Result<Seen, crate::Error> {
            let got = std::sync::Arc::new(AtomicU32::new(0));
            let g = std::sync::Arc::clone(&got);
            let h = b.register_fn("h", move |_c, _p| {
                g.fetch_add(1, Ordering::Relaxed);
                Ok(())
            });
            let mut ep = b.start()?;
            let t0 = Instant::now();
            let me = ep.rank().index();
            if me == 2 {
                // SYNC POINT test-done (acquire side).
                while done.load(Ordering::Acquire) < 2 {
                    if t0.elapsed() > limit {
                        return Err(crate::Error::other(
                            "ranks 0 and 1 still wait for each other's credit after 20 s",
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                return Ok((None, Vec::new()));
            }
            let other = Rank(1 - me as u32);
            // Both ranks reach step `n` (neither polls meanwhile).
            let step = |n: u32| {
                // SYNC POINT test-phase (release side).
                phase[me].store(n, Ordering::Release);
                // SYNC POINT test-phase (acquire side).
                while phase[1 - me].load(Ordering::Acquire) < n && t0.elapsed() < limit {
                    std::thread::sleep(Duration::from_millis(1));
                }
            };
            for _ in 0..8 {
                ep.send(other, h, &[])?;
            }
            ep.wait_until(|| got.load(Ordering::Relaxed) >= 8)?;
            step(1);
            // The other's credit, used up (a send with credit does not poll).
            ep.send(other, h, &[])?;
            ep.send(other, h, &[])?;
            step(2);
            let mut set_back = 0;
            shm(&ep, |t| set_back = t.set_back_published());
            assert_eq!(set_back, 2, "the other's two messages, untaken");
            step(3);
            let sent = ep.send(other, h, &[]);
            let mut errors = Vec::new();
            let t1 = Instant::now();
            while t1.elapsed() < Duration::from_secs(1)
                && !errors.iter().any(|e| {
                    matches!(
                        e,
                        ExtractError::Protocol(ProtocolError::QueueCorrupt { .. })
                    )
                })
            {
                if let Err(e) = ep.extract(usize::MAX) {
                    errors.push(e);
                }
            }
            // SYNC POINT test-done (release side).
            done.fetch_add(1, Ordering::Release);
            Ok((Some(sent), errors))
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for (me, (sent, errors)) in out.iter().take(2).enumerate() {
        let other = Rank(1 - me as u32);
        // Ended by the other's departure, or by its own (whichever audit
        // came first).
        assert!(
            matches!(sent, Some(Err(SendError::PeerGone { rank })) if *rank == other)
                || matches!(
                    sent,
                    Some(Err(SendError::LeftJob {
                        why: ProtocolError::QueueCorrupt { queue: 0, .. },
                        ..
                    }))
                ),
            "rank {me}'s send: {sent:?}"
        );
        assert!(
            errors.iter().any(|e| matches!(
                e,
                ExtractError::Protocol(ProtocolError::QueueCorrupt { queue: 0, .. })
            )),
            "rank {me} names its queue: {errors:?}"
        );
    }
}
