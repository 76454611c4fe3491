//! Whole messages up to a frame take the shared-memory fast path: payloads
//! of at most the slot's inline bytes ride in the slot, larger ones are
//! gathered straight into a frame (dedicated queues: the frame bound to the
//! position; shared queues: one claimed from the free list). Every size
//! around the boundaries (inline bytes, a cache line, the frame), sent in
//! three pieces from the main loop and echoed back from inside a handler,
//! arrives whole and in order, with inline slots on and off, over dedicated
//! and shared queues. Payloads that shrink from one message to the next,
//! over many laps of a small queue, arrive exactly (a slot is written in
//! place and keeps what a longer payload left past a shorter one).

use fastmsg::threads;
use fastmsg::{EndpointBuilder, Error, Rank};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

const FRAME: u32 = 1024;
const SIZES: &[usize] = &[
    0, 1, 27, 28, 29, 31, 32, 63, 64, 65, 200, 1000, 1023, 1024, 1025, 3000,
];

/// The byte at `offset` of a message of `len` bytes from `src`, echoed or not.
fn byte(src: u32, len: usize, offset: usize, echo: bool) -> u8 {
    (src as usize * 31 + len * 7 + offset + usize::from(echo) * 101) as u8
}

fn message(src: u32, len: usize, echo: bool) -> Vec<u8> {
    (0..len).map(|i| byte(src, len, i, echo)).collect()
}

/// Three pieces, cut at a third and two thirds.
fn pieces(m: &[u8]) -> [&[u8]; 3] {
    let (a, b) = (m.len() / 3, 2 * m.len() / 3);
    [&m[..a], &m[a..b], &m[b..]]
}

/// Each rank sends every size to every rank (itself included); each
/// receiver checks the bytes and the order of sizes per sender, and echoes
/// the message back from its handler. Returns (messages, echoes) received.
fn rank(mut b: EndpointBuilder) -> Result<(usize, usize), Error> {
    let ranks = b.size();
    let me = b.rank().0;
    let echo = b.declare("echo");
    let got = Rc::new(Cell::new(0usize));
    let echoed = Rc::new(Cell::new(0usize));
    // Per sender: index into SIZES of the next message expected.
    let next = Rc::new((0..ranks).map(|_| Cell::new(0usize)).collect::<Vec<_>>());
    let next_echo = Rc::new((0..ranks).map(|_| Cell::new(0usize)).collect::<Vec<_>>());
    let (g, n) = (Rc::clone(&got), Rc::clone(&next));
    let data = b.register_fn("data", move |ctx, p| {
        let src = p.source().0;
        let want = SIZES[n[src as usize].get()];
        assert_eq!(p.message_len(), want, "sizes out of order from {src}");
        for (i, &v) in p.data().iter().enumerate() {
            assert_eq!(v, byte(src, want, p.offset() + i, false), "byte {i}");
        }
        if p.is_last() {
            n[src as usize].set(n[src as usize].get() + 1);
            g.set(g.get() + 1);
            let m = message(me, want, true);
            ctx.send(p.source(), echo, &pieces(&m))?;
        }
        Ok(())
    });
    let (e, n) = (Rc::clone(&echoed), Rc::clone(&next_echo));
    b.define_fn(echo, move |_ctx, p| {
        let src = p.source().0;
        let want = SIZES[n[src as usize].get()];
        assert_eq!(p.message_len(), want, "echo sizes out of order from {src}");
        for (i, &v) in p.data().iter().enumerate() {
            assert_eq!(v, byte(src, want, p.offset() + i, true), "echo byte {i}");
        }
        if p.is_last() {
            n[src as usize].set(n[src as usize].get() + 1);
            e.set(e.get() + 1);
        }
        Ok(())
    });
    let mut ep = b.start()?;
    for &len in SIZES {
        let m = message(me, len, false);
        for dest in 0..ranks {
            ep.send(Rank(dest), data, &pieces(&m))?;
        }
    }
    let want = SIZES.len() * ranks as usize;
    while got.get() < want || echoed.get() < want {
        ep.extract(usize::MAX)?;
    }
    ep.quiesce()?;
    let out = (got.get(), echoed.get());
    ep.close()?;
    Ok(out)
}

fn run(ranks: u32, queues: Option<u32>, inline: bool) {
    let out = threads::run(
        ranks,
        |c| {
            c.shm.queues = queues;
            c.shm.inline = inline;
            c.shm.frame_size = FRAME;
            c.timeout = Duration::from_secs(60);
        },
        rank,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let want = SIZES.len() * ranks as usize;
    assert!(out.iter().all(|&(g, e)| g == want && e == want), "{out:?}");
}

#[test]
fn every_size_arrives_over_dedicated_queues() {
    run(3, None, true);
}

#[test]
fn every_size_arrives_over_a_shared_queue() {
    run(3, Some(1), true);
}

#[test]
fn every_size_arrives_through_frames_without_inline_slots() {
    run(3, Some(2), false);
}

/// Inline sizes in an order where most messages are shorter than the one
/// before, so that a slot reused a lap later holds a longer payload's
/// bytes past the new one.
const SHRINKING: &[usize] = &[28, 1, 27, 0, 13, 2];
/// Laps of `SHRINKING` each rank sends to each rank.
const LAPS: usize = 40;

/// Message `k` of `src` in the shrinking test: its size from `SHRINKING`,
/// its bytes different from lap to lap.
fn lap_message(src: u32, k: usize) -> Vec<u8> {
    let len = SHRINKING[k % SHRINKING.len()];
    (0..len)
        .map(|i| ((src as usize * 31 + k * 13 + i) as u8) ^ 0x5a)
        .collect()
}

fn shrinking_rank(mut b: EndpointBuilder) -> Result<usize, Error> {
    let ranks = b.size();
    let me = b.rank().0;
    let got = Rc::new(Cell::new(0usize));
    // Per sender: the index of the next message expected.
    let next = Rc::new((0..ranks).map(|_| Cell::new(0usize)).collect::<Vec<_>>());
    let (g, n) = (Rc::clone(&got), Rc::clone(&next));
    let h = b.register_fn("shrinking", move |_ctx, p| {
        let src = p.source().0;
        let k = n[src as usize].get();
        let want = lap_message(src, k);
        assert_eq!(p.message_len(), want.len(), "message {k} from {src}");
        let at = p.offset();
        assert_eq!(
            p.data(),
            &want[at..at + p.data().len()],
            "message {k} from {src}"
        );
        if p.is_last() {
            n[src as usize].set(k + 1);
            g.set(g.get() + 1);
        }
        Ok(())
    });
    let mut ep = b.start()?;
    for k in 0..LAPS * SHRINKING.len() {
        let m = lap_message(me, k);
        for dest in 0..ranks {
            ep.send(Rank(dest), h, &pieces(&m))?;
        }
    }
    let want = LAPS * SHRINKING.len() * ranks as usize;
    while got.get() < want {
        ep.extract(usize::MAX)?;
    }
    ep.quiesce()?;
    ep.close()?;
    Ok(got.get())
}

fn run_shrinking(queues: Option<u32>) {
    let out = threads::run(
        2,
        |c| {
            c.shm.queues = queues;
            // A small queue: many laps over each slot.
            c.shm.credits = 4;
            c.timeout = Duration::from_secs(60);
        },
        shrinking_rank,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let want = LAPS * SHRINKING.len() * 2;
    assert!(out.iter().all(|&g| g == want), "{out:?}");
}

#[test]
fn shrinking_payloads_arrive_exactly_over_dedicated_queues() {
    run_shrinking(None);
}

#[test]
fn shrinking_payloads_arrive_exactly_over_a_shared_queue() {
    run_shrinking(Some(1));
}
