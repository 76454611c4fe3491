//! Head-to-head floods under tiny credit windows: two ranks send to each
//! other at once, handlers reply from inside themselves (so sends from
//! handlers meet exhausted credit and park), and messages many times larger
//! than the whole receive window stream through without deadlock.

mod common;

use common::{message, Checker};
use fastmsg::threads;
use fastmsg::{Config, EndpointBuilder, Error, Rank, WaitPolicy};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

fn tiny(c: &mut Config) {
    c.shm.credits = 2;
    c.shm.frame_size = 256;
    c.timeout = std::time::Duration::from_secs(60);
}

/// Each rank floods the other with `n` messages; every message is answered
/// from the handler with an ack; both ranks must see all messages and acks.
fn flood_rank(mut b: EndpointBuilder, n: u64) -> Result<(u64, u64), Error> {
    let me = b.rank().0;
    let peer = Rank(1 - me);
    let got = Rc::new(Cell::new(0u64));
    let acks = Rc::new(Cell::new(0u64));
    let bad = Rc::new(RefCell::new(None::<String>));
    let a = acks.clone();
    let ack = b.register_fn("ack", move |_ctx, p| {
        if p.is_last() {
            a.set(a.get() + 1);
        }
        Ok(())
    });
    let (g, bd) = (got.clone(), bad.clone());
    let next = Rc::new(Cell::new(0u64));
    let data = b.register("data", move |ctx, mut m| {
        let (g, bd, next) = (g.clone(), bd.clone(), next.clone());
        async move {
            let seq = next.get();
            next.set(seq + 1);
            let mut ck = Checker::new(m.source().0, me, seq, m.len());
            let mut buf = [0u8; 100];
            while m.remaining() > 0 {
                let off = m.len() - m.remaining();
                let k = m.receive(&mut buf).await?;
                if let Err(e) = ck.feed(off, &buf[..k]) {
                    bd.borrow_mut().get_or_insert(e);
                }
            }
            // Reply from inside the handler, with a message that itself
            // needs several frames, to stress the pending path.
            let reply = vec![seq as u8; 600];
            ctx.send(m.source(), ack, &[&reply])?;
            g.set(g.get() + 1);
            Ok(())
        }
    });
    let mut ep = b.start()?;
    for seq in 0..n {
        let len = (seq as usize * 37) % 2048;
        ep.send(peer, data, &[&message(me, peer.0, seq, len)])?;
    }
    ep.wait_until(|| (got.get() == n && acks.get() == n) || bad.borrow().is_some())?;
    if let Some(e) = bad.borrow().clone() {
        panic!("rank {me}: {e}");
    }
    ep.close()?;
    Ok((got.get(), acks.get()))
}

#[test]
fn head_to_head_flood_with_replies_from_handlers() {
    let r = threads::run(2, tiny, |b| flood_rank(b, 3000)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r, vec![(3000, 3000), (3000, 3000)]);
}

#[test]
fn head_to_head_flood_oversubscribed_sleep_policy() {
    // 2 ranks flooding, plus the wait policy that sleeps on the doorbell.
    let r = threads::run(
        2,
        |c| {
            tiny(c);
            c.wait = WaitPolicy::Sleep;
        },
        |b| flood_rank(b, 1000),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r, vec![(1000, 1000), (1000, 1000)]);
}

/// A message `factor` times the whole receive window, to an async handler
/// (which consumes as it arrives) and to a plain-function handler, both
/// between two ranks and to self.
fn big_rank(mut b: EndpointBuilder, factor: usize) -> Result<(), Error> {
    let me = b.rank().0;
    let window_bytes = (b.config().shm.credits * b.config().shm.frame_size) as usize;
    let len = factor * window_bytes;
    let done = Rc::new(Cell::new(0u32));
    let bad = Rc::new(RefCell::new(None::<String>));
    let (d, bd) = (done.clone(), bad.clone());
    let h_async = b.register("big-async", move |_ctx, mut m| {
        let (d, bd) = (d.clone(), bd.clone());
        async move {
            let mut ck = Checker::new(m.source().0, me, 0, m.len());
            let mut buf = vec![0u8; 1000];
            while m.remaining() > 0 {
                let off = m.len() - m.remaining();
                let k = m.receive(&mut buf).await?;
                if let Err(e) = ck.feed(off, &buf[..k]) {
                    bd.borrow_mut().get_or_insert(e);
                }
            }
            d.set(d.get() + 1);
            Ok(())
        }
    });
    let (d, bd) = (done.clone(), bad.clone());
    let cks: Rc<RefCell<Vec<Option<Checker>>>> = Rc::new(RefCell::new(vec![None, None]));
    let h_fn = b.register_fn("big-fn", move |_ctx, p| {
        let src = p.source().0 as usize;
        let mut cks = cks.borrow_mut();
        if p.is_first() {
            cks[src] = Some(Checker::new(p.source().0, me, 1, p.message_len()));
        }
        if let Err(e) = cks[src].as_mut().unwrap().feed(p.offset(), p.data()) {
            bd.borrow_mut().get_or_insert(e);
        }
        if p.is_last() {
            d.set(d.get() + 1);
        }
        Ok(())
    });
    let mut ep = b.start()?;
    let other = Rank(1 - me);
    for (seq, h) in [(0u64, h_async), (1, h_fn)] {
        // To the peer (head-to-head: both ranks do it at once), streamed in
        // uneven pieces, then the same to ourselves.
        for dest in [other, Rank(me)] {
            let msg = message(me, dest.0, seq, len);
            let mut w = ep.begin_message(dest, len, h)?;
            for chunk in msg.chunks(3333) {
                w.send_piece(chunk)?;
            }
            w.end()?;
        }
    }
    ep.wait_until(|| done.get() == 4 || bad.borrow().is_some())?;
    if let Some(e) = bad.borrow().clone() {
        panic!("rank {me}: {e}");
    }
    ep.close()?;
    Ok(())
}

#[test]
fn message_four_times_the_window() {
    threads::run(2, tiny, |b| big_rank(b, 4)).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn message_a_thousand_times_the_window() {
    threads::run(2, tiny, |b| big_rank(b, 1000)).unwrap_or_else(|e| panic!("{e}"));
}
