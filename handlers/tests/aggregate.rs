//! Aggregated active messages (`fastmsg_handlers::aggregate`) on the
//! thread entry point, 8 ranks on however few cores: per-pair order with
//! random item sizes and destinations, typed items of odd, zero and
//! oversized sizes, handler replies, 1,000 quiescence rounds among
//! collectives, the memory bound under a flood.

mod common;

use bytemuck::{Pod, Zeroable};
use common::{rng, serial};
use fastmsg::Rank;
use fastmsg_handlers::aggregate::{AggConfig, Aggregator};
use fastmsg_handlers::{CollConfig, Collectives, Op};
use rand::Rng;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use common::run_bounded as run;

/// A byte item's contents: a function of (src, dst, seq) every rank can
/// recompute.
fn item(src: u32, dst: u32, seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (u64::from(src) * 131 + u64::from(dst) * 17 + seq * 7 + i as u64) as u8)
        .collect()
}

/// What rank `src` sends: (destination, length) per item, from its own
/// generator; some items are longer than a buffer.
fn plan(src: u32, n: u32, items: usize) -> Vec<(u32, usize)> {
    let mut g = rng(10, 0, src, 5);
    (0..items)
        .map(|_| {
            let d = g.random_range(0..n);
            let len = match g.random_range(0..20) {
                0 => g.random_range(2000..12_000),
                1 => 0,
                _ => g.random_range(1..200),
            };
            (d, len)
        })
        .collect()
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq)]
struct Seq {
    src: u32,
    pad: u32,
    seq: u64,
}

/// Random sizes and destinations on a byte channel and sequence numbers
/// on a typed one, both checked in order per (sender, receiver) and
/// complete after `quiesce`.
#[test]
fn random_items_arrive_whole_and_in_order_per_pair() {
    let _s = serial();
    const N: u32 = 8;
    const ITEMS: usize = 3000;
    let out = run(N, None, |mut b| {
        let me = b.rank().0;
        let agg = Aggregator::new(&mut b, AggConfig::default().with_buffer_bytes(1024));
        let next_b = Rc::new(RefCell::new(vec![0u64; N as usize]));
        let next_t = Rc::new(RefCell::new(vec![0u64; N as usize]));
        let bad = Rc::new(Cell::new(0u32));
        let (nb, bd) = (Rc::clone(&next_b), Rc::clone(&bad));
        let plans: Vec<Vec<(u32, usize)>> = (0..N).map(|s| plan(s, N, ITEMS)).collect();
        // Per source, the items meant for me, in order.
        let mine: Vec<Vec<usize>> = plans
            .iter()
            .map(|p| {
                p.iter()
                    .filter(|(d, _)| *d == me)
                    .map(|(_, l)| *l)
                    .collect()
            })
            .collect();
        let bytes = agg.byte_channel(&mut b, "bytes", move |_ctx, src, data| {
            let mut nb = nb.borrow_mut();
            let seq = nb[src.index()];
            nb[src.index()] += 1;
            let want_len = mine[src.index()].get(seq as usize).copied();
            if want_len != Some(data.len()) || data != item(src.0, me, seq, data.len()) {
                bd.set(bd.get() + 1);
            }
            Ok(())
        });
        let (nt, bd) = (Rc::clone(&next_t), Rc::clone(&bad));
        let typed = agg.channel::<Seq, _>(&mut b, "typed", move |_ctx, src, s| {
            let mut nt = nt.borrow_mut();
            if s.src != src.0 || s.seq != nt[src.index()] {
                bd.set(bd.get() + 1);
            }
            nt[src.index()] += 1;
            Ok(())
        });
        let mut ep = b.start()?;
        let ctx = ep.ctx();
        let mut seq_b = vec![0u64; N as usize];
        let mut seq_t = vec![0u64; N as usize];
        for &(d, len) in &plans[me as usize] {
            let s = seq_b[d as usize];
            seq_b[d as usize] += 1;
            bytes.send(&ctx, Rank(d), &item(me, d, s, len))?;
            let t = seq_t[(N - 1 - d) as usize];
            seq_t[(N - 1 - d) as usize] += 1;
            typed.send(
                &ctx,
                Rank(N - 1 - d),
                Seq {
                    src: me,
                    pad: 0,
                    seq: t,
                },
            )?;
        }
        agg.quiesce(&mut ep)?;
        let got_b = next_b.borrow().clone();
        let got_t = next_t.borrow().clone();
        ep.close()?;
        Ok((bad.get(), got_b, got_t))
    });
    let plans: Vec<Vec<(u32, usize)>> = (0..N).map(|s| plan(s, N, ITEMS)).collect();
    for (r, (bad, got_b, got_t)) in out.into_iter().enumerate() {
        assert_eq!(bad, 0, "rank {r}: items out of order or corrupt");
        for s in 0..N as usize {
            let want = plans[s].iter().filter(|(d, _)| *d as usize == r).count() as u64;
            assert_eq!(got_b[s], want, "rank {r}: byte items from {s}");
            let want_t = plans[s]
                .iter()
                .filter(|(d, _)| (N - 1 - *d) as usize == r)
                .count() as u64;
            assert_eq!(got_t[s], want_t, "rank {r}: typed items from {s}");
        }
    }
}

/// A 24-byte item: four fill a 100-byte buffer, a fifth would not fit.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Odd {
    src: u64,
    seq: u64,
    check: u64,
}

/// An item larger than a 100-byte buffer: each leaves alone.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Big {
    src: u64,
    seq: u64,
    fill: [u64; 18],
}

/// Items whose size does not divide the buffer, zero-sized items and items
/// larger than the buffer: all arrive, in order per pair, and no buffer is
/// longer than `buffer_bytes` (a longer one would be refused by the
/// receiver's whole-message limit and fail `quiesce`).
#[test]
fn odd_zero_sized_and_oversized_items_arrive_in_order() {
    let _s = serial();
    const N: u32 = 3;
    const ITEMS: u64 = 500;
    let out = run(N, None, |mut b| {
        let agg = Aggregator::new(&mut b, AggConfig::default().with_buffer_bytes(100));
        let bad = Rc::new(Cell::new(0u32));
        let next_odd = Rc::new(RefCell::new(vec![0u64; N as usize]));
        let zeros = Rc::new(RefCell::new(vec![0u64; N as usize]));
        let next_big = Rc::new(RefCell::new(vec![0u64; N as usize]));
        let (no, bd) = (Rc::clone(&next_odd), Rc::clone(&bad));
        let odd = agg.channel::<Odd, _>(&mut b, "odd", move |_ctx, src, o| {
            let mut no = no.borrow_mut();
            let want = no[src.index()];
            if o.src != u64::from(src.0) || o.seq != want || o.check != !want {
                bd.set(bd.get() + 1);
            }
            no[src.index()] += 1;
            Ok(())
        });
        let z = Rc::clone(&zeros);
        let zero = agg.channel::<(), _>(&mut b, "zero", move |_ctx, src, ()| {
            z.borrow_mut()[src.index()] += 1;
            Ok(())
        });
        let (nb, bd) = (Rc::clone(&next_big), Rc::clone(&bad));
        let big = agg.channel::<Big, _>(&mut b, "big", move |_ctx, src, g| {
            let mut nb = nb.borrow_mut();
            let want = nb[src.index()];
            if g.src != u64::from(src.0) || g.seq != want || g.fill != [want; 18] {
                bd.set(bd.get() + 1);
            }
            nb[src.index()] += 1;
            Ok(())
        });
        let mut ep = b.start()?;
        let ctx = ep.ctx();
        let me = u64::from(ep.rank().0);
        for seq in 0..ITEMS {
            for d in 0..N {
                let src = me;
                odd.send(
                    &ctx,
                    Rank(d),
                    Odd {
                        src,
                        seq,
                        check: !seq,
                    },
                )?;
                zero.send(&ctx, Rank(d), ())?;
                if seq % 10 == 0 {
                    let seq = seq / 10;
                    big.send(
                        &ctx,
                        Rank(d),
                        Big {
                            src,
                            seq,
                            fill: [seq; 18],
                        },
                    )?;
                }
            }
        }
        agg.quiesce(&mut ep)?;
        let counts = (
            next_odd.borrow().clone(),
            zeros.borrow().clone(),
            next_big.borrow().clone(),
        );
        ep.close()?;
        Ok((bad.get(), counts))
    });
    for (r, (bad, (odd, zero, big))) in out.into_iter().enumerate() {
        assert_eq!(bad, 0, "rank {r}: items out of order or corrupt");
        assert_eq!(odd, vec![ITEMS; N as usize], "rank {r}: 24-byte items");
        assert_eq!(zero, vec![ITEMS; N as usize], "rank {r}: zero-sized items");
        assert_eq!(
            big,
            vec![ITEMS / 10; N as usize],
            "rank {r}: oversized items"
        );
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Req {
    slot: u32,
    key: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Rep {
    slot: u32,
    key: u32,
    val: u64,
}

fn val(owner: u32, key: u32) -> u64 {
    (u64::from(owner) << 32 | u64::from(key)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Requests answered from the owner's handler (declared reply channel,
/// defined after the request channel names it): every slot filled with
/// the owner's value after one `quiesce`.
#[test]
fn handlers_reply_through_aggregation() {
    replies(8);
}

/// One rank alone, every request and reply to itself: `quiesce`'s own
/// probes keep it busy, and its buffered replies must still leave (this
/// hung once: hooks ran only when idle, and a busy rank is never quiet).
#[test]
fn a_rank_alone_quiesces_its_own_replies() {
    replies(1);
}

#[allow(non_snake_case)]
fn replies(N: u32) {
    let _s = serial();
    const REQS: usize = 5000;
    let out = run(N, None, |mut b| {
        let me = b.rank().0;
        let agg = Aggregator::new(&mut b, AggConfig::default());
        let reply = agg.declare::<Rep>(&mut b, "reply");
        let rp = reply.clone();
        let request = agg.channel::<Req, _>(&mut b, "request", move |ctx, src, q| {
            let r = Rep {
                slot: q.slot,
                key: q.key,
                val: val(ctx.rank().0, q.key),
            };
            rp.send(ctx, src, r)?;
            Ok(())
        });
        let slots = Rc::new(RefCell::new(vec![0u64; REQS]));
        let sl = Rc::clone(&slots);
        agg.define(&mut b, &reply, move |_ctx, src, r: Rep| {
            let want = val(src.0, r.key);
            sl.borrow_mut()[r.slot as usize] = if r.val == want { want } else { 1 };
            Ok(())
        });
        let mut ep = b.start()?;
        let ctx = ep.ctx();
        let mut g = rng(11, 0, me, 6);
        let mut want = Vec::with_capacity(REQS);
        for i in 0..REQS {
            let (d, key) = (g.random_range(0..N), g.random::<u32>());
            want.push(val(d, key));
            request.send(
                &ctx,
                Rank(d),
                Req {
                    slot: i as u32,
                    key,
                },
            )?;
        }
        agg.quiesce(&mut ep)?;
        let ok = *slots.borrow() == want;
        ep.close()?;
        Ok(ok)
    });
    assert!(out.iter().all(|&ok| ok), "{out:?}");
}

/// 1,000 quiescence rounds, each after aggregated items, direct messages
/// (some rounds) and with collectives between (some rounds): after each
/// round every item of the round has been handled everywhere — including
/// the forwarded second hop a handler sends.
#[test]
fn a_thousand_quiescence_rounds_among_collectives() {
    let _s = serial();
    const N: u32 = 8;
    const ROUNDS: u32 = 1000;
    let out = run(N, None, |mut b| {
        let me = b.rank().0;
        let coll = Collectives::register(&mut b, CollConfig::default());
        let agg = Aggregator::new(&mut b, AggConfig::default());
        let hops = Rc::new(Cell::new(0u64));
        let direct = Rc::new(Cell::new(0u64));
        let fwd = agg.declare::<u32>(&mut b, "hop");
        let (f, h) = (fwd.clone(), Rc::clone(&hops));
        agg.define(&mut b, &fwd, move |ctx, _src, left: u32| {
            h.set(h.get() + 1);
            if left > 0 {
                let next = Rank((ctx.rank().0 + 1) % ctx.size());
                f.send(ctx, next, left - 1)?;
            }
            Ok(())
        });
        let d = Rc::clone(&direct);
        let dh = b.register_fn("direct", move |_, _| {
            d.set(d.get() + 1);
            Ok(())
        });
        let mut ep = b.start()?;
        let ctx = ep.ctx();
        let mut wrong = 0u32;
        for round in 0..ROUNDS {
            // Each rank sends one item with 2 more hops: 3 handled per
            // rank per round, everywhere.
            fwd.send(&ctx, Rank((me + round) % N), 2)?;
            if round % 3 == 0 {
                ep.send(Rank((me + 1) % N), dh, &[&round.to_le_bytes()])?;
            }
            if round % 7 == 0 {
                let mut x = [u64::from(round)];
                coll.allreduce(&mut ep, &mut x, Op::Sum)?;
                wrong += u32::from(x[0] != u64::from(round) * u64::from(N));
            }
            agg.quiesce(&mut ep)?;
            // Every rank's items of this round: N items of 3 hops in all.
            let mut counts = [hops.get(), direct.get()];
            coll.allreduce(&mut ep, &mut counts, Op::Sum)?;
            let want_direct = u64::from(round / 3 + 1) * u64::from(N);
            if counts != [u64::from(round + 1) * 3 * u64::from(N), want_direct] {
                wrong += 1;
            }
            if round % 100 == 0 {
                coll.barrier(&mut ep)?;
            }
        }
        ep.close()?;
        Ok(wrong)
    });
    assert!(out.iter().all(|&w| w == 0), "{out:?}");
}

/// A flood from every rank's main loop to one rank that does not poll for
/// a while: the senders' parked bytes stay within the bound (plus one
/// message), direct sends and aggregated ones alike, and everything
/// arrives.
#[test]
fn a_flood_to_a_slow_receiver_stays_within_the_bound() {
    let _s = serial();
    const N: u32 = 4;
    const BOUND: usize = 64 << 10;
    const MSGS: usize = 3000;
    const LEN: usize = 1000;
    let out = run(N, Some(BOUND), |mut b| {
        let me = b.rank().0;
        let agg = Aggregator::new(&mut b, AggConfig::default());
        let got = Rc::new(Cell::new(0u64));
        let g = Rc::clone(&got);
        let sink = b.register_fn("sink", move |_, p| {
            g.set(g.get() + p.data().len() as u64);
            Ok(())
        });
        let g = Rc::clone(&got);
        let items = agg.channel::<u64, _>(&mut b, "items", move |_, _, _| {
            g.set(g.get() + 8);
            Ok(())
        });
        let mut ep = b.start()?;
        let ctx = ep.ctx();
        let mut peak = 0usize;
        let mut agg_peak = 0usize;
        if me == 0 {
            // The slow receiver: busy elsewhere for a while.
            std::thread::sleep(Duration::from_millis(300));
        } else {
            let data = vec![me as u8; LEN];
            for i in 0..MSGS {
                ctx.send(Rank(0), sink, &[&data])?;
                items.send(&ctx, Rank(0), i as u64)?;
                peak = peak.max(ctx.parked_bytes());
                agg_peak = agg_peak.max(agg.buffered_bytes());
            }
        }
        agg.quiesce(&mut ep)?;
        let total = got.get();
        ep.close()?;
        Ok((peak, agg_peak, total))
    });
    let per_sender = (MSGS * (LEN + 8)) as u64;
    assert_eq!(
        out[0].2,
        per_sender * u64::from(N - 1),
        "everything arrived"
    );
    for (r, (peak, agg_peak, _)) in out.into_iter().enumerate() {
        // A send parks at most its own message beyond the bound.
        assert!(peak <= BOUND + 8192, "rank {r}: {peak} bytes parked");
        assert!(
            agg_peak <= N as usize * 8192,
            "rank {r}: {agg_peak} bytes buffered"
        );
        if r > 0 {
            assert!(
                peak > 0,
                "rank {r}: the flood never parked: not a test of the bound"
            );
        }
    }
}

/// Bad input gets typed errors: at the sender, a destination outside the
/// job and an item past the limit; at the receiver, buffers from a peer
/// that are not whole items (sent straight to the channels' handlers).
#[test]
fn bad_items_and_malformed_buffers_are_typed_errors() {
    use fastmsg::error::ExtractError;
    use fastmsg_handlers::aggregate::AggError;
    let _s = serial();
    let out = run(2, None, |mut b| {
        let mut cfg = AggConfig::default();
        cfg.max_item_bytes = 100;
        let agg = Aggregator::new(&mut b, cfg);
        let typed = agg.channel::<u64, _>(&mut b, "typed", |_, _, _| Ok(()));
        let bytes = agg.byte_channel(&mut b, "bytes", |_, _, _| Ok(()));
        let mut ep = b.start()?;
        let ctx = ep.ctx();
        let mut seen = Vec::new();
        if ep.rank() == Rank(0) {
            let e = typed.send(&ctx, Rank(5), 1).unwrap_err();
            seen.push(matches!(
                e,
                AggError::BadDestination {
                    dest: Rank(5),
                    size: 2
                }
            ));
            let e = bytes.send(&ctx, Rank(1), &[0; 101]).unwrap_err();
            seen.push(matches!(
                e,
                AggError::ItemTooLong {
                    len: 101,
                    max: 100,
                    ..
                }
            ));
            // 12 bytes: not a whole number of u64 items; a length prefix
            // saying 200 bytes with 2 behind it; 3 bytes, too few for one.
            ep.send(Rank(1), typed.handler(), &[&[0; 12]])?;
            ep.send(Rank(1), bytes.handler(), &[&200u32.to_le_bytes(), &[1, 2]])?;
            ep.send(Rank(1), bytes.handler(), &[&[1, 2, 3]])?;
        } else {
            while seen.len() < 3 {
                match ep.extract(usize::MAX) {
                    Ok(_) => {}
                    Err(ExtractError::Handler { source, .. }) => {
                        let e = source.downcast_ref::<AggError>();
                        seen.push(matches!(e, Some(AggError::Malformed { src: Rank(0), .. })));
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        agg.quiesce(&mut ep)?;
        ep.close()?;
        Ok(seen)
    });
    assert_eq!(out[0], vec![true, true]);
    assert_eq!(out[1], vec![true, true, true]);
}
