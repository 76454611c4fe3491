//! `close` is a termination barrier: it returns on any rank only when no
//! user message is left anywhere — not in a pending queue, not in flight,
//! and not about to be sent by a handler that runs while ranks close.

use fastmsg::threads;
use fastmsg::{Rank, WaitPolicy};
use std::cell::Cell;
use std::rc::Rc;

/// Rank 1 sends requests to rank 0 and closes at once; rank 0 closes
/// without ever extracting. Rank 0's handler answers every request, and
/// rank 1's handler acknowledges every answer: the answers and the acks
/// are all sent by handlers running inside `close`, many parked for lack
/// of credit (2 frames per pair). Every one must arrive before `close`
/// returns.
fn chains_started_before_close_finish(ranks: u32, wait: WaitPolicy, requests: u64) {
    let out = threads::run(
        ranks,
        move |c| {
            c.shm.credits = 2;
            c.wait = wait;
        },
        move |mut b| {
            let (answers, acks) = (Rc::new(Cell::new(0u64)), Rc::new(Cell::new(0u64)));
            let (n, k) = (answers.clone(), acks.clone());
            // Registered callee first, so each handler knows the id it sends to.
            let ack_id = b.register_fn("ack", move |_ctx, _p| {
                k.set(k.get() + 1);
                Ok(())
            });
            let answer_id = b.register_fn("answer", move |ctx, p| {
                n.set(n.get() + 1);
                ctx.send(p.source(), ack_id, &[&[1u8; 64]])?;
                Ok(())
            });
            let request_id = b.register_fn("request", move |ctx, p| {
                let payload = [7u8; 100]; // past the inline size: takes frames
                ctx.send(p.source(), answer_id, &[&payload])?;
                Ok(())
            });
            let mut ep = b.start()?;
            let me = ep.rank();
            if me != Rank(0) {
                for _ in 0..requests {
                    ep.send(Rank(0), request_id, &[&[3u8; 50]])?;
                }
            }
            ep.close()?;
            Ok((answers.get(), acks.get()))
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let senders = u64::from(ranks - 1);
    assert_eq!(out[0], (0, senders * requests), "rank 0: (answers, acks)");
    for (r, got) in out.iter().enumerate().skip(1) {
        assert_eq!(*got, (requests, 0), "rank {r}: (answers, acks)");
    }
}

#[test]
fn handler_sends_during_close_are_delivered() {
    for _ in 0..20 {
        chains_started_before_close_finish(2, WaitPolicy::Auto, 200);
    }
}

#[test]
fn handler_sends_during_close_are_delivered_oversubscribed_sleeping() {
    for _ in 0..5 {
        chains_started_before_close_finish(5, WaitPolicy::Sleep, 100);
    }
}
