//! The all-to-all storm's rank program, shared by the storm tests over
//! shared memory (`tests/storm.rs`) and over the network (`tests/net_*.rs`):
//! every rank sends `msgs` messages of random sizes (0 … `max_len`,
//! log-uniform) split into random pieces to random peers, alternately to an
//! async (FM 2.x streamed) handler and a plain-function handler; receivers
//! check every byte and the per-pair order.

use super::{message, Checker, Mix};
use fastmsg::{Endpoint, EndpointBuilder, Error, Rank};
use std::cell::RefCell;
use std::rc::Rc;

/// One message of the plan: destination, length, piece-split seed.
#[derive(Clone, Copy, Debug)]
struct Planned {
    dst: u32,
    len: usize,
    split: u64,
}

fn plan(ranks: u32, src: u32, msgs: usize, max_len: usize, seed: u64) -> Vec<Planned> {
    let mut g = Mix(seed ^ (u64::from(src) << 32));
    let bits = usize::BITS - max_len.leading_zeros();
    (0..msgs)
        .map(|_| {
            let dst = g.below(u64::from(ranks)) as u32;
            // Log-uniform length in 0 ..= max_len, with exact 0s too.
            let len = match g.below(16) {
                0 => 0,
                _ => {
                    (g.next() as usize
                        >> (usize::BITS - g.below(u64::from(bits)) as u32 - 1).min(63))
                        % (max_len + 1)
                }
            };
            Planned {
                dst,
                len,
                split: g.next(),
            }
        })
        .collect()
}

struct RxState {
    expected_seq: Vec<u64>,
    received: usize,
    error: Option<String>,
}

pub fn storm_rank(
    b: EndpointBuilder,
    msgs: usize,
    max_len: usize,
    seed: u64,
) -> Result<usize, Error> {
    storm_rank_then(b, msgs, max_len, seed, |_| {}, |_, _| {})
}

/// As [`storm_rank`], calling `started` once the endpoint has started, and
/// `failed` with the endpoint and the error if the storm fails after that
/// (before returning the error).
pub fn storm_rank_then(
    mut b: EndpointBuilder,
    msgs: usize,
    max_len: usize,
    seed: u64,
    started: impl FnOnce(Rank),
    failed: impl FnOnce(Endpoint, &Error),
) -> Result<usize, Error> {
    let (me, ranks) = (b.rank().0, b.size());
    let expect: usize = (0..ranks)
        .map(|s| {
            plan(ranks, s, msgs, max_len, seed)
                .iter()
                .filter(|p| p.dst == me)
                .count()
        })
        .sum();
    let st = Rc::new(RefCell::new(RxState {
        expected_seq: vec![0; ranks as usize],
        received: 0,
        error: None,
    }));
    // Async handler: receives in chunks of varying size, suspending when
    // bytes have not arrived yet.
    let s1 = st.clone();
    let h_async = b.register("storm-async", move |_ctx, mut m| {
        let st = s1.clone();
        async move {
            let src = m.source().0;
            let seq = {
                let mut s = st.borrow_mut();
                let q = s.expected_seq[src as usize];
                s.expected_seq[src as usize] += 1;
                q
            };
            let mut ck = Checker::new(src, me, seq, m.len());
            let mut buf = vec![0u8; 7919];
            let mut chunk = 1 + (seq as usize * 131) % buf.len();
            while m.remaining() > 0 {
                let off = m.len() - m.remaining();
                let n = m.receive(&mut buf[..chunk.min(m.remaining())]).await?;
                if let Err(e) = ck.feed(off, &buf[..n]) {
                    st.borrow_mut().error.get_or_insert(e);
                }
                chunk = 1 + (chunk * 7 + 3) % buf.len();
            }
            let mut s = st.borrow_mut();
            if !ck.done() {
                s.error
                    .get_or_insert(format!("message {seq} from {src} ended early"));
            }
            s.received += 1;
            Ok(())
        }
    });
    // Plain-function handler: checks each piece as it arrives.
    let s2 = st.clone();
    let ck2: Rc<RefCell<Vec<Option<Checker>>>> =
        Rc::new(RefCell::new((0..ranks).map(|_| None).collect()));
    let h_fn = b.register_fn("storm-fn", move |_ctx, p| {
        let src = p.source().0;
        let mut cks = ck2.borrow_mut();
        let mut s = s2.borrow_mut();
        if p.is_first() {
            let seq = s.expected_seq[src as usize];
            s.expected_seq[src as usize] += 1;
            cks[src as usize] = Some(Checker::new(src, me, seq, p.message_len()));
        }
        let ck = cks[src as usize].as_mut().expect("first piece seen");
        if let Err(e) = ck.feed(p.offset(), p.data()) {
            s.error.get_or_insert(e);
        }
        if p.is_last() {
            s.received += 1;
        }
        Ok(())
    });
    let mut ep = b.start()?;
    started(ep.rank());
    let traffic = |ep: &mut Endpoint| -> Result<(), Error> {
        let mut seqs = vec![0u64; ranks as usize];
        for p in plan(ranks, me, msgs, max_len, seed) {
            let seq = seqs[p.dst as usize];
            seqs[p.dst as usize] += 1;
            let data = message(me, p.dst, seq, p.len);
            let h = if seq % 2 == 0 { h_async } else { h_fn };
            let mut w = ep.begin_message(Rank(p.dst), p.len, h)?;
            let mut g = Mix(p.split);
            let mut off = 0;
            while off < data.len() {
                let n = (1 + g.below(data.len() as u64 / 3 + 64) as usize).min(data.len() - off);
                w.send_piece(&data[off..off + n])?;
                off += n;
            }
            w.end()?;
        }
        ep.wait_until(|| st.borrow().received >= expect || st.borrow().error.is_some())?;
        if let Some(e) = st.borrow().error.clone() {
            panic!("rank {me}: {e}");
        }
        Ok(())
    };
    if let Err(e) = traffic(&mut ep) {
        failed(ep, &e);
        return Err(e);
    }
    ep.close()?;
    let received = st.borrow().received;
    Ok(received)
}
