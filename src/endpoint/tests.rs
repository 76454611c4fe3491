//! Bad input from another process gets a typed error that names what was
//! wrong — never a panic, a hang or a silent loss — and the endpoint keeps
//! working afterwards. A peer is simulated by publishing crafted slots.

use super::Endpoint;
use crate::error::{Error, ExtractError, ProtocolError, StartError};
use crate::frame::{FragFlags, FragHeader};
use crate::id::Rank;
use crate::queue::{SlotBody, INLINE_BYTES, NO_FRAME};
use crate::threads;
use std::cell::Cell;
use std::rc::Rc;

fn shm(ep: &Endpoint, f: impl FnOnce(&mut crate::transport::ShmTransport)) {
    f(ep.core.net().borrow_mut().shm_mut())
}

fn whole(src: u32, handler: u32, len: u32) -> SlotBody {
    SlotBody {
        header: FragHeader {
            src,
            handler,
            len,
            flags: (FragFlags::FIRST | FragFlags::LAST).0,
            total: u64::from(len),
        },
        frame: NO_FRAME,
        inline: [7; INLINE_BYTES],
    }
}

/// Rank 1 publishes `bad` to rank 0 then a good 0-byte message; rank 0 must
/// see an error matching `check` and then still run the good handler.
fn expect_rejected(bad: Vec<SlotBody>, check: impl Fn(&ProtocolError) -> bool + Sync) {
    threads::run(
        2,
        |_| {},
        |mut b| {
            let got = Rc::new(Cell::new(0u32));
            let g = got.clone();
            // Crafted fragments name handler 0; the good message handler 1.
            b.register_fn("sink", |_c, _p| Ok(()));
            let h = b.register_fn("good", move |_c, _p| {
                g.set(g.get() + 1);
                Ok(())
            });
            let mut ep = b.start()?;
            if ep.rank() == Rank(1) {
                for body in &bad {
                    shm(&ep, |t| t.publish_raw(Rank(0), *body));
                }
                ep.send(Rank(0), h, &[])?;
            } else {
                let mut errors = Vec::new();
                while got.get() == 0 {
                    match ep.extract(usize::MAX) {
                        Ok(_) => {}
                        Err(ExtractError::Protocol(e)) => errors.push(e),
                        Err(e) => return Err(e.into()),
                    }
                }
                assert!(!errors.is_empty(), "the bad fragment went unreported");
                assert!(errors.iter().all(&check), "unexpected errors: {errors:?}");
                for e in &errors {
                    assert!(!e.to_string().is_empty());
                }
            }
            ep.close()?;
            Ok(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn unknown_handler_id_is_a_typed_error() {
    expect_rejected(vec![whole(1, 42, 0)], |e| {
        matches!(
            e,
            ProtocolError::UnknownHandler {
                src: 1,
                id: 42,
                registered: 2
            }
        )
    });
}

#[test]
fn inline_length_past_the_slot_is_a_typed_error() {
    expect_rejected(vec![whole(1, 0, INLINE_BYTES as u32 + 1)], |e| {
        matches!(e, ProtocolError::FrameTooLong { src: 1, .. })
    });
}

#[test]
fn frame_length_past_the_frame_is_a_typed_error() {
    let mut b = whole(1, 0, 1 << 20);
    b.frame = 0;
    expect_rejected(
        vec![b],
        |e| matches!(e, ProtocolError::FrameTooLong { len, .. } if *len == 1 << 20),
    );
}

#[test]
fn frame_index_out_of_range_is_a_typed_error() {
    let mut b = whole(1, 0, 8);
    b.frame = 1_000_000;
    expect_rejected(vec![b], |e| {
        matches!(
            e,
            ProtocolError::BadFrame {
                frame: 1_000_000,
                ..
            }
        )
    });
}

#[test]
fn forged_source_is_a_typed_error() {
    expect_rejected(vec![whole(9, 0, 0), whole(0, 0, 0)], |e| {
        matches!(
            e,
            ProtocolError::BadSource { src: 9, .. } | ProtocolError::WrongQueue { src: 0, .. }
        )
    });
}

#[test]
fn forged_control_message_of_4_gib_is_refused_at_its_first_fragment() {
    // A round report (26 bytes at most) announcing 4 GiB: the receiver
    // must refuse it at once, naming sender, operation and size, and drop
    // its rest, not reassemble up to what the peer announced.
    let mut first = whole(
        1,
        crate::endpoint::engine::control_op::ControlOp::Report.wire(),
        0,
    );
    first.header.flags = (FragFlags::FIRST | FragFlags::SYSTEM).0;
    first.header.total = 1 << 32;
    let mut rest = first;
    rest.header.flags = (FragFlags::LAST | FragFlags::SYSTEM).0;
    expect_rejected(vec![first, rest], |e| {
        matches!(
            e,
            ProtocolError::ControlTooLong {
                src: 1,
                op: "round report",
                len,
                max: 26
            } if *len == 1 << 32
        )
    });
}

#[test]
fn unknown_flags_and_broken_sequences_are_typed_errors() {
    let mut flags = whole(1, 0, 0);
    flags.header.flags |= 0x80;
    let mut cont = whole(1, 0, 4);
    cont.header.flags = FragFlags::LAST.0;
    let mut first = whole(1, 0, 4);
    first.header.flags = FragFlags::FIRST.0;
    first.header.total = 100;
    let mut first2 = first;
    first2.header.total = 4;
    first2.header.flags = (FragFlags::FIRST | FragFlags::LAST).0;
    let mut lie = whole(1, 0, 4);
    lie.header.total = 3;
    expect_rejected(vec![flags, cont, first, first2, lie], |e| {
        matches!(
            e,
            ProtocolError::BadFlags { .. }
                | ProtocolError::MissingFirst { .. }
                | ProtocolError::UnexpectedFirst { .. }
                | ProtocolError::LengthMismatch { .. }
        )
    });
}

#[test]
fn corrupt_slot_stamp_is_reported_once_and_other_queues_go_on() {
    // Ranks 1 and 2 stay (without polling) until rank 0 is done: leaving
    // without `close` would be a failure of its own.
    let done = crate::sync::AtomicBool::new(false);
    threads::run(
        3,
        |_| {},
        |mut b| {
            let got = Rc::new(Cell::new(0u32));
            let g = got.clone();
            let h = b.register_fn("good", move |_c, _p| {
                g.set(g.get() + 1);
                Ok(())
            });
            let mut ep = b.start()?;
            // Bounded: if rank 1 fails its checks (a panic), the others
            // still end and the test fails instead of hanging.
            let linger = || {
                let t0 = std::time::Instant::now();
                // SYNC POINT test-done (acquire side).
                while !done.load(crate::sync::Ordering::Acquire)
                    && t0.elapsed() < std::time::Duration::from_secs(30)
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            };
            match ep.rank().0 {
                1 => {
                    shm(&ep, |t| t.corrupt_next_stamp(Rank(0), u64::MAX / 2));
                    linger();
                }
                2 => {
                    ep.send(Rank(0), h, &[])?;
                    linger();
                }
                _ => {
                    // The empty poll looks at one stamp value only; a stamp
                    // from neither this lap nor the last is found by the
                    // health check of an idle wait (every 100 ms).
                    ep.wait_until(|| got.get() > 0)?;
                    let mut corrupt = 0;
                    match ep.wait_until(|| false) {
                        Err(ExtractError::Protocol(ProtocolError::QueueCorrupt {
                            sender: Some(1),
                            ..
                        })) => corrupt += 1,
                        other => panic!("expected the corrupt queue to be reported, got {other:?}"),
                    }
                    // Reported once: another idle half-second finds nothing.
                    let until = std::time::Instant::now() + std::time::Duration::from_millis(500);
                    ep.wait_until(|| std::time::Instant::now() > until)?;
                    assert_eq!(corrupt, 1, "a broken queue is reported once");
                    // SYNC POINT test-done (release side).
                    done.store(true, crate::sync::Ordering::Release);
                }
            }
            Ok(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

/// Bytes kept for an async handler that has not taken them are bounded
/// by the sender's credits, not by what the sender sends: a handler that
/// never returns holds its message and those queued behind it, and the
/// sender's further sends wait at the sender (parked).
#[test]
fn what_a_stuck_async_handler_holds_is_bounded_by_the_senders_credits() {
    const CREDITS: u32 = 4;
    const SENT: usize = 40;
    const LEN: usize = 100;
    // Rank 0 has looked; rank 1 has looked (neither leaves before the
    // other is done with it: leaving without `close` is a failure).
    let (looked0, looked1) = (
        crate::sync::AtomicBool::new(false),
        crate::sync::AtomicBool::new(false),
    );
    threads::run(
        2,
        |c| c.shm.credits = CREDITS,
        |mut b| {
            let h = b.register("stuck", |_c, _m| async {
                // Never resumed: nothing it waits for will come.
                std::future::pending::<()>().await;
                Ok(())
            });
            let mut ep = b.start()?;
            if ep.rank() == Rank(1) {
                // Through `Ctx`: what finds no credit parks (an
                // `Endpoint::send` would wait for the credit).
                let ctx = ep.ctx();
                for _ in 0..SENT {
                    ctx.send(Rank(0), h, &[&[1u8; LEN]])?;
                }
                // Progress (parked sends go as credit comes back) until
                // rank 0 has looked.
                // SYNC POINT test-done (acquire side).
                while !looked0.load(crate::sync::Ordering::Acquire) {
                    ep.extract(usize::MAX)?;
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                let parked = ctx.parked_bytes();
                // SYNC POINT test-done (release side).
                looked1.store(true, crate::sync::Ordering::Release);
                assert_eq!(
                    parked,
                    (SENT - CREDITS as usize) * LEN,
                    "what the credits do not cover waits here"
                );
                return Ok(());
            }
            let core = ep.core.clone();
            let held = || core.streams().borrow().get(Rank(1)).unwrap().held();
            // Take in until the credits' worth is here, then a while
            // longer: nothing more may arrive (bounded: 10 s at most).
            let t0 = std::time::Instant::now();
            let mut full = None;
            while t0.elapsed() < std::time::Duration::from_secs(10) {
                ep.extract(usize::MAX)?;
                let now = std::time::Instant::now();
                if held().0 >= CREDITS as usize
                    && *full.get_or_insert(now) + std::time::Duration::from_millis(300) < now
                {
                    break;
                }
            }
            let got = held();
            // SYNC POINT test-done (release side).
            looked0.store(true, crate::sync::Ordering::Release);
            assert_eq!(
                got,
                (CREDITS as usize, CREDITS as u64 * LEN as u64),
                "kept: the stuck message and those behind it, one credit each"
            );
            // SYNC POINT test-done (acquire side).
            while !looked1.load(crate::sync::Ordering::Acquire) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Ok(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn different_handler_tables_name_the_first_difference() {
    let r = threads::run(
        3,
        |_| {},
        |mut b| {
            b.register_fn("a", |_c, _p| Ok(()));
            let name = if b.rank() == Rank(2) { "x" } else { "b" };
            b.register_fn(name, |_c, _p| Ok(()));
            b.start().map(|_| ()).map_err(Error::from)
        },
    );
    let e = r.expect_err("mismatched tables must fail");
    match e.error {
        Error::Start(StartError::HandlerMismatch {
            index,
            their_rank,
            ours,
            theirs,
            ..
        }) => {
            assert_eq!((index, their_rank), (1, Rank(2)));
            assert_eq!((ours.as_deref(), theirs.as_deref()), (Some("b"), Some("x")));
        }
        other => panic!("unexpected error {other}"),
    }
}

#[test]
fn shorter_handler_table_is_named_too() {
    let r = threads::run(
        2,
        |_| {},
        |mut b| {
            b.register_fn("a", |_c, _p| Ok(()));
            if b.rank() == Rank(0) {
                b.register_fn("extra", |_c, _p| Ok(()));
            }
            b.start().map(|_| ()).map_err(Error::from)
        },
    );
    let e = r.expect_err("mismatched tables must fail");
    assert!(
        matches!(
            &e.error,
            Error::Start(StartError::HandlerMismatch {
                index: 1,
                theirs: None,
                ..
            })
        ),
        "{e}"
    );
    assert!(e.to_string().contains("\"extra\""), "{e}");
}

#[test]
fn a_handler_table_past_what_rank_0_accepts_is_refused_at_start() {
    // Rank 0 refuses to buffer a table longer than MAX_TABLE_BYTES from a
    // peer; a rank whose own table is longer learns it from `start`.
    let r = threads::run(
        1,
        |_| {},
        |mut b| {
            b.register_fn(&"n".repeat(1 << 20), |_c, _p| Ok(()));
            b.start().map(|_| ()).map_err(Error::from)
        },
    );
    let e = r.unwrap_err().error;
    assert!(
        matches!(
            e,
            Error::Start(StartError::HandlerTableTooLarge {
                handlers: 1,
                bytes,
                max,
            }) if bytes == (1 << 20) + 8 && max == 1 << 20
        ),
        "{e}"
    );
}

#[test]
fn duplicate_handler_names_are_refused() {
    let r = threads::run(
        1,
        |_| {},
        |mut b| {
            b.register_fn("same", |_c, _p| Ok(()));
            b.register_fn("same", |_c, _p| Ok(()));
            b.start().map(|_| ()).map_err(Error::from)
        },
    );
    assert!(matches!(
        r.unwrap_err().error,
        Error::Start(StartError::DuplicateHandler { .. })
    ));
}

#[test]
fn a_failing_handler_is_reported_with_its_name_and_the_endpoint_goes_on() {
    threads::run(
        1,
        |_| {},
        |mut b| {
            let ok = Rc::new(Cell::new(0));
            let o = ok.clone();
            let bad = b.register("fails", |_c, _m| async { Err("boom".into()) });
            let good = b.register_fn("fine", move |_c, _p| {
                o.set(o.get() + 1);
                Ok(())
            });
            let mut ep = b.start()?;
            ep.send(Rank(0), bad, &[b"x"])?;
            ep.send(Rank(0), good, &[])?;
            let mut failures = 0;
            while ok.get() == 0 {
                if let Err(ExtractError::Handler {
                    handler,
                    src,
                    source,
                }) = ep.extract(usize::MAX)
                {
                    assert_eq!((handler.as_str(), src), ("fails", Rank(0)));
                    assert_eq!(source.to_string(), "boom");
                    failures += 1;
                }
            }
            assert_eq!(failures, 1);
            Ok(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_later_fragment_naming_another_handler_still_goes_to_its_messages() {
    // Only the first fragment's handler field is checked and used: a
    // continuation naming an unregistered id (or another handler) is a
    // piece of the open message all the same, never an index out of the
    // registry.
    threads::run(
        2,
        |_| {},
        |mut b| {
            let seen = Rc::new(std::cell::RefCell::new(Vec::new()));
            let s = seen.clone();
            let sink = b.register_fn("sink", move |_c, p| {
                s.borrow_mut().push((p.handler, p.offset, p.data.len()));
                Ok(())
            });
            let mut ep = b.start()?;
            if ep.rank() == Rank(1) {
                let mut first = whole(1, sink.raw(), 4);
                first.header.flags = FragFlags::FIRST.0;
                first.header.total = 8;
                let mut rest = first;
                rest.header.flags = FragFlags::LAST.0;
                rest.header.handler = 42;
                shm(&ep, |t| t.publish_raw(Rank(0), first));
                shm(&ep, |t| t.publish_raw(Rank(0), rest));
                // One whole message, as far as the close barrier counts.
                ep.core.net().borrow_mut().count_crafted_message();
            } else {
                while seen.borrow().len() < 2 {
                    ep.extract(usize::MAX)?;
                }
                assert_eq!(*seen.borrow(), vec![(sink, 0, 4), (sink, 4, 4)]);
            }
            ep.close()?;
            Ok(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

/// A sender on a shared queue whose shared memory another process
/// scribbled on (`scribble`, on the queue rank 1 writes on rank 0) gets a
/// typed error naming the receiver (`expect`), at once, instead of
/// spinning for ever; later sends to that rank fail. `payload` bytes per
/// send: 0 goes in the slot, 64 through a free-list frame.
fn scribbled_shared_queue_is_an_error_not_a_hang(
    payload: usize,
    parked: bool,
    scribble: fn(&mut crate::transport::ShmTransport),
    expect: fn(&ExtractError) -> bool,
) {
    let done = crate::sync::AtomicBool::new(false);
    let started = crate::sync::AtomicU32::new(0);
    threads::run(
        3,
        // One queue per rank: ranks 1 and 2 share rank 0's.
        |c| c.shm.queues = Some(1),
        |mut b| {
            let h = b.register_fn("h", |_c, _p| Ok(()));
            let mut ep = b.start()?;
            // SYNC POINT test-started (release side).
            started.fetch_add(1, crate::sync::Ordering::Release);
            // Bounded: if rank 1 fails its checks (a panic), the others
            // still end and the test fails instead of hanging.
            let linger = || {
                let t0 = std::time::Instant::now();
                // SYNC POINT test-done (acquire side).
                while !done.load(crate::sync::Ordering::Acquire)
                    && t0.elapsed() < std::time::Duration::from_secs(30)
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            };
            if ep.rank() != Rank(1) {
                linger();
                return Ok(());
            }
            // Scribble once every rank is past start-up (whose exchange
            // would find the corrupt queue first).
            // SYNC POINT test-started (acquire side).
            while started.load(crate::sync::Ordering::Acquire) < 3 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            shm(&ep, scribble);
            let data = vec![5u8; payload];
            // The fragment cannot be published; the send returns. A
            // `Ctx::send` parks instead of waiting for credit: nothing but
            // the transport's own report tells the engine.
            let t0 = std::time::Instant::now();
            let _ = if parked {
                ep.ctx().send(Rank(0), h, &[&data])
            } else {
                ep.send(Rank(0), h, &[&data])
            };
            let spent = t0.elapsed();
            // Reported by the next extract (a program that only polls
            // learns it too), and by every blocking call after.
            let e = ep
                .extract(usize::MAX)
                .expect_err("the corrupt queue is reported by the next extract");
            assert!(
                expect(&e) && e.to_string().contains("corrupt") && e.failed_peer() == Some(Rank(0)),
                "{e:?}"
            );
            let e = ep
                .wait_until(|| false)
                .expect_err("the corrupt queue is reported");
            assert!(
                expect(&e) && e.to_string().contains("corrupt") && e.failed_peer() == Some(Rank(0)),
                "{e:?}"
            );
            match ep.send(Rank(0), h, &[&data]) {
                Err(crate::error::SendError::PeerGone { rank: Rank(0) }) => {}
                other => panic!("a send after the report: {other:?}"),
            }
            assert!(
                spent < std::time::Duration::from_secs(5),
                "send took {spent:?}"
            );
            // SYNC POINT test-done (release side).
            done.store(true, crate::sync::Ordering::Release);
            Ok(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_sender_on_a_scribbled_shared_queue_gets_an_error_not_a_hang() {
    scribbled_shared_queue_is_an_error_not_a_hang(
        0,
        false,
        |t| t.scribble_stamps(Rank(0), 0xdead_beef_0000),
        |e| {
            matches!(
                e,
                ExtractError::Protocol(ProtocolError::PeerQueueCorrupt {
                    dest: 0,
                    seq: 0xdead_beef_0000,
                    ..
                })
            )
        },
    );
}

/// The error of a free list whose flags hold 7 (`scribble_frames`).
fn frames_flag_7(e: &ExtractError) -> bool {
    matches!(
        e,
        ExtractError::Protocol(ProtocolError::PeerFramesCorrupt {
            dest: 0,
            flag: 7,
            ..
        })
    )
}

/// The same through `Ctx::send`, which parks rather than waits for
/// credit: the engine learns of the corrupt queue from the transport's
/// alarm, not from a credit wait.
#[test]
fn a_parked_send_on_a_scribbled_shared_queue_is_reported_by_the_next_extract() {
    scribbled_shared_queue_is_an_error_not_a_hang(
        64,
        true,
        |t| t.scribble_frames(Rank(0), 7),
        frames_flag_7,
    );
}

#[test]
fn a_sender_on_scribbled_free_list_flags_gets_an_error_not_a_hang() {
    scribbled_shared_queue_is_an_error_not_a_hang(
        64,
        false,
        |t| t.scribble_frames(Rank(0), 7),
        frames_flag_7,
    );
}

/// A writer of a shared queue that dies between claiming a position and
/// writing it (rank 2 here: it claims, then ends without releasing its
/// lifeline, as a killed process would) leaves a hole that hides what
/// rank 1 sends behind it. The receiver, polling only, learns of the
/// death and then, once the grace has passed, of the hole, as a typed
/// error naming the queue and the dead rank, instead of waiting for ever.
#[test]
fn a_hole_left_by_a_writer_that_died_mid_send_is_reported() {
    let claimed = crate::sync::AtomicBool::new(false);
    let done = crate::sync::AtomicBool::new(false);
    let got = crate::sync::AtomicU32::new(0);
    let out = threads::run(
        3,
        |c| c.shm.queues = Some(1),
        |mut b| {
            let h = b.register_fn("h", |_c, _p| Ok(()));
            let ep = b.start()?;
            match ep.rank().0 {
                2 => {
                    shm(&ep, |t| t.claim_raw(Rank(0)));
                    // SYNC POINT test-claimed (release side).
                    claimed.store(true, crate::sync::Ordering::Release);
                    // Dies holding its lifeline: nothing is released.
                    std::mem::forget(ep);
                    Ok(Vec::new())
                }
                1 => {
                    let mut ep = ep;
                    // SYNC POINT test-claimed (acquire side).
                    while !claimed.load(crate::sync::Ordering::Acquire) {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                    ep.send(Rank(0), h, &[b"behind the hole"])?;
                    let t0 = std::time::Instant::now();
                    // SYNC POINT test-done (acquire side).
                    while !done.load(crate::sync::Ordering::Acquire)
                        && t0.elapsed() < std::time::Duration::from_secs(20)
                    {
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                    std::mem::forget(ep);
                    Ok(Vec::new())
                }
                _ => {
                    let mut ep = ep;
                    let mut errors = Vec::new();
                    let t0 = std::time::Instant::now();
                    while t0.elapsed() < std::time::Duration::from_secs(10) {
                        match ep.extract(usize::MAX) {
                            Ok(x) => {
                                got.fetch_add(x.messages as u32, crate::sync::Ordering::Relaxed)
                            }
                            Err(e) => {
                                let hole = matches!(
                                    e,
                                    ExtractError::Protocol(ProtocolError::QueueHole { .. })
                                );
                                errors.push(e);
                                if hole {
                                    break;
                                }
                                0
                            }
                        };
                    }
                    // SYNC POINT test-done (release side).
                    done.store(true, crate::sync::Ordering::Release);
                    std::mem::forget(ep);
                    Ok(errors)
                }
            }
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let errors = &out[0];
    assert_eq!(
        got.load(crate::sync::Ordering::Relaxed),
        0,
        "rank 1's message sits behind the hole"
    );
    assert!(
        matches!(
            errors.first(),
            Some(ExtractError::PeerDied { rank: Rank(2), .. })
        ),
        "{errors:?}"
    );
    assert!(
        matches!(
            errors.last(),
            Some(ExtractError::Protocol(ProtocolError::QueueHole {
                queue: 0,
                died: 2,
                ..
            }))
        ),
        "{errors:?}"
    );
}
