//! Non-blocking collectives: several outstanding, early messages buffered
//! and matched by instance number, the bound on that buffer, typed errors
//! for mismatched calls and bad messages, and the seed-003 skew test.

mod common;

use fastmsg::error::ExtractError;
use fastmsg::{Endpoint, Rank};
use fastmsg_handlers::{CollConfig, CollError, Collectives, Op};
use rand::Rng;
use std::time::{Duration, Instant};

/// Extract until an error comes (bounded in time).
fn next_error(ep: &mut Endpoint) -> ExtractError {
    let t0 = Instant::now();
    loop {
        if let Err(e) = ep.extract(usize::MAX) {
            return e;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "no error came");
        std::thread::yield_now();
    }
}

/// The collective error inside a handler error.
fn coll_error(e: &ExtractError) -> &CollError {
    match e {
        ExtractError::Handler { source, .. } => source
            .downcast_ref::<CollError>()
            .unwrap_or_else(|| panic!("not a collective error: {e}")),
        _ => panic!("not a handler error: {e}"),
    }
}

#[test]
fn early_messages_are_buffered_and_matched_by_instance() {
    let _serial = common::serial();
    const K: u64 = 5;
    common::run(4, CollConfig::default(), |b, coll| {
        let mut ep = b.start()?;
        let me = ep.rank().0;
        if me == 0 {
            // Ranks 1..3 run ahead: rank 1 (step 1) and rank 2 (step 2)
            // send K messages each before this rank starts anything.
            ep.wait_until(|| coll.early_messages() >= 2 * K as usize)?;
            assert_eq!(coll.early_messages(), 2 * K as usize);
        }
        let reqs: Vec<_> = (0..K)
            .map(|k| {
                coll.iallreduce(&ep, vec![u64::from(me) * 10 + k], Op::Sum)
                    .unwrap()
            })
            .collect();
        assert_eq!(coll.early_messages(), 0, "rank {me}: all matched at start");
        for (k, r) in reqs.into_iter().enumerate().rev() {
            assert_eq!(r.wait(&mut ep).unwrap(), vec![60 + 4 * k as u64]);
        }
        ep.close()?;
        Ok(())
    });
}

#[test]
fn many_outstanding_and_dropped_requests_complete() {
    let _serial = common::serial();
    common::run(5, CollConfig::default(), |b, coll| {
        let mut ep = b.start()?;
        let me = u64::from(ep.rank().0);
        for round in 0..20u64 {
            let mut reqs = Vec::new();
            for k in 0..16u64 {
                reqs.push((
                    k,
                    coll.iallreduce(&ep, vec![me + k, round], Op::Max).unwrap(),
                ));
                if k % 4 == 0 {
                    // Dropped: finishes in the background, unseen.
                    drop(coll.ibarrier(&ep).unwrap());
                }
            }
            let t0 = Instant::now();
            while !reqs.iter().all(|(_, r)| r.is_complete()) {
                for (_, r) in reqs.iter_mut() {
                    r.test(&mut ep).unwrap();
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(30),
                    "requests never completed"
                );
            }
            for (k, r) in reqs {
                assert_eq!(r.wait(&mut ep).unwrap(), vec![4 + k, round]);
            }
        }
        coll.barrier(&mut ep).unwrap();
        ep.close()?;
        Ok(())
    });
}

#[test]
fn early_buffer_overflow_is_a_typed_error() {
    let _serial = common::serial();
    let cfg = CollConfig {
        max_early_messages: 3,
        ..CollConfig::default()
    };
    common::run(2, cfg, |b, coll| {
        let mut ep = b.start()?;
        if ep.rank() == Rank(1) {
            // One more than the buffer holds.
            for _ in 0..4 {
                drop(coll.ibarrier(&ep).unwrap());
            }
        } else {
            let e = next_error(&mut ep);
            match coll_error(&e) {
                CollError::EarlyOverflow {
                    src,
                    messages,
                    max_messages,
                    ..
                } => assert_eq!((*src, *messages, *max_messages), (Rank(1), 3, 3)),
                other => panic!("wrong error: {other}"),
            }
            assert!(e.to_string().contains("early-message buffer full"), "{e}");
            // The engine lost a message: it says so instead of hanging.
            let later = coll.barrier(&mut ep).unwrap_err();
            assert!(matches!(later, CollError::Poisoned(_)), "{later}");
        }
        ep.close()?;
        Ok(())
    });
}

#[test]
fn mismatched_calls_and_lengths_are_typed_errors() {
    let _serial = common::serial();
    common::run(2, CollConfig::default(), |b, coll| {
        let mut ep = b.start()?;
        let me = ep.rank();
        // Different lengths: both sides see it, and can go on.
        let len = if me == Rank(0) { 2 } else { 3 };
        let e = coll
            .iallreduce(&ep, vec![1u64; len], Op::Sum)
            .unwrap()
            .wait(&mut ep)
            .unwrap_err();
        assert!(
            matches!(e, CollError::LengthMismatch { got, expected, .. } if got != expected),
            "{e}"
        );
        let mut x = [u64::from(me.0)];
        coll.allreduce(&mut ep, &mut x, Op::Sum).unwrap();
        assert_eq!(x, [1]);
        // Different collectives as the same instance.
        if me == Rank(0) {
            let e = coll
                .iallreduce(&ep, vec![1u64], Op::Sum)
                .unwrap()
                .wait(&mut ep)
                .unwrap_err();
            match e {
                CollError::Mismatch { ours, theirs, .. } => {
                    assert_eq!((ours, theirs), ("allreduce", "broadcast"))
                }
                other => panic!("wrong error: {other}"),
            }
        } else {
            // Rank 0's allreduce message came before the call (kept as
            // early) and fails it at start, or it comes after this rank's
            // part (the root's) ended with Ok: then its next call reports
            // it, whether the message came before that call or during it.
            match coll.ibcast(&ep, vec![7u64], Rank(1)).unwrap().wait(&mut ep) {
                Err(CollError::Mismatch { ours, theirs, .. }) => {
                    assert_eq!((ours, theirs), ("broadcast", "allreduce"))
                }
                Err(e) => panic!("wrong error: {e}"),
                Ok(got) => {
                    assert_eq!(got, [7]);
                    let e = coll.barrier(&mut ep).unwrap_err();
                    assert!(
                        matches!(&e, CollError::Poisoned(why) if why.contains("already finished")),
                        "{e}"
                    );
                }
            }
        }
        if me == Rank(0) {
            // The rank that found the mismatch of a rooted collective
            // goes no further either.
            let e = coll.barrier(&mut ep).unwrap_err();
            assert!(matches!(e, CollError::Poisoned(_)), "{e}");
        }
        ep.close()?;
        Ok(())
    });
}

#[test]
fn bad_messages_from_a_peer_are_typed_errors() {
    let _serial = common::serial();
    let cfg = CollConfig {
        max_message_bytes: 1000,
        ..CollConfig::default()
    };
    common::run(2, cfg, |mut b, coll| {
        let go = std::rc::Rc::new(std::cell::Cell::new(false));
        let g = go.clone();
        let go_h = b.register_fn("go", move |_ctx, _p| {
            g.set(true);
            Ok(())
        });
        let mut ep = b.start()?;
        let h = coll.handler();
        if ep.rank() == Rank(1) {
            // Shorter than the header.
            ep.send(Rank(0), h, &[&[1, 2, 3]])?;
            // Longer than allowed (spans several frames).
            ep.send(Rank(0), h, &[&vec![0u8; 20_000]])?;
            ep.wait_until(|| go.get())?;
            // World instance 0, a barrier (kind 1, byte 9) by
            // dissemination (signature 0), step 9 (byte 8): dissemination
            // on 2 ranks has one step.
            let mut hdr = [0u8; 12];
            hdr[8] = 9;
            hdr[9] = 1;
            ep.send(Rank(0), h, &[&hdr])?;
        } else {
            let e = next_error(&mut ep);
            assert!(
                matches!(coll_error(&e), CollError::ShortMessage { len: 3, .. }),
                "{e}"
            );
            // Refused by the whole-message handler before the collectives
            // see it (longer than max_message_bytes + the header).
            let e = next_error(&mut ep);
            let too_long = match &e {
                ExtractError::Handler { source, .. } => source
                    .downcast_ref::<fastmsg::error::ReceiveError>()
                    .cloned(),
                _ => None,
            };
            assert!(
                matches!(
                    too_long,
                    Some(fastmsg::error::ReceiveError::TooLong { len: 20_000, .. })
                ),
                "{e}"
            );
            let r = coll.ibarrier(&ep).unwrap();
            ep.send(Rank(1), go_h, &[])?;
            let e = r.wait(&mut ep).unwrap_err();
            assert!(matches!(e, CollError::Unexpected { step: 9, .. }), "{e}");
        }
        ep.close()?;
        Ok(())
    });
}

/// Seed 003 §IV.D: ranks wait a random 0 … 1 ms after a barrier, then
/// reduce. Blocking: an interior rank waits inside the call for its late
/// children. Non-blocking: it hands its data over and leaves; the handler
/// combines and forwards inside later `extract`s (here, the next
/// barrier), and the request is collected after that barrier. Reports
/// the time spent inside the calls; asserts only the results.
#[test]
fn skew_nonblocking_reduce_vs_blocking() {
    let _serial = common::serial();
    const N: u32 = 8;
    const ITERS: usize = 300;
    let out = common::run(N, CollConfig::default(), |b, coll| {
        let mut ep = b.start()?;
        let me = ep.rank();
        let mut g = common::rng(3, 0, me.0, 0);
        let want = u64::from(N * (N + 1) / 2);
        let mut inside = [Duration::ZERO; 2];
        for (mode, total) in inside.iter_mut().enumerate() {
            let mut pending: Option<fastmsg_handlers::Request<Vec<u64>>> = None;
            for _ in 0..ITERS {
                coll.barrier(&mut ep).unwrap();
                if let Some(r) = pending.take() {
                    let t = Instant::now();
                    let got = r.wait(&mut ep).unwrap();
                    *total += t.elapsed();
                    check(&coll, me, &got, want);
                }
                std::thread::sleep(Duration::from_micros(g.random_range(0..1000)));
                let x = vec![u64::from(me.0) + 1];
                let t = Instant::now();
                if mode == 0 {
                    let mut x = x;
                    coll.reduce(&mut ep, &mut x, Op::Sum, Rank(0)).unwrap();
                    *total += t.elapsed();
                    check(&coll, me, &x, want);
                } else {
                    pending = Some(coll.ireduce(&ep, x, Op::Sum, Rank(0)).unwrap());
                    *total += t.elapsed();
                }
            }
            coll.barrier(&mut ep).unwrap();
            if let Some(r) = pending.take() {
                let t = Instant::now();
                let got = r.wait(&mut ep).unwrap();
                *total += t.elapsed();
                check(&coll, me, &got, want);
            }
        }
        ep.close()?;
        Ok(inside.map(|d| d.as_secs_f64() * 1e6 / ITERS as f64))
    });
    let avg = |mode: usize, ranks: &[usize]| {
        ranks.iter().map(|&r| out[r][mode]).sum::<f64>() / ranks.len() as f64
    };
    let non_root: Vec<usize> = (1..N as usize).collect();
    eprintln!("skew test, {N} ranks (threads), random 0..1 ms delay, {ITERS} reductions per mode");
    eprintln!("  time inside the reduce calls, per reduction (us):");
    eprintln!(
        "    blocking:     non-root mean {:8.1}   root {:8.1}",
        avg(0, &non_root),
        out[0][0]
    );
    eprintln!(
        "    non-blocking: non-root mean {:8.1}   root {:8.1}   (start + wait after the next barrier)",
        avg(1, &non_root),
        out[0][1]
    );
    for (r, o) in out.iter().enumerate() {
        eprintln!(
            "    rank {r}: blocking {:8.1}  non-blocking {:8.1}",
            o[0], o[1]
        );
    }
}

fn check(_coll: &Collectives, me: Rank, got: &[u64], want: u64) {
    if me == Rank(0) {
        assert_eq!(got, [want]);
    } else {
        assert_eq!(got, [u64::from(me.0) + 1], "non-roots get their data back");
    }
}
