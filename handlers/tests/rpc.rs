//! Request/response (`fastmsg_handlers::rpc`) and remote memory
//! (`fastmsg_handlers::memory`, `Ctx::get`/`update_u64`) on the thread
//! entry point, 4 ranks on however few cores: completion order per owner,
//! handler errors reaching the caller (callback and future), calls made
//! from completions (bounces), typed errors of bad calls, remote atomics
//! under contention from every rank (exact values, both paths), `get`
//! with its bounds, alignment and closed-endpoint errors, the batch forms
//! (exact values, bad items refusing the whole batch), adds of every
//! width (+1, 64-bit, wrapping, f64) on every path.

use fastmsg::error::PutError;
use fastmsg::{EndpointBuilder, Error, Rank, WordOp};
use fastmsg_handlers::aggregate::{AggConfig, Aggregator};
use fastmsg_handlers::memory::{MemError, RemoteWords};
use fastmsg_handlers::rpc::RpcError;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

mod common;

/// `n` ranks as threads, bounded in time.
fn run<T: Send>(n: u32, body: impl Fn(EndpointBuilder) -> Result<T, Error> + Sync) -> Vec<T> {
    common::run_bounded(n, None, body)
}

#[test]
fn completions_come_in_order_with_the_right_answers() {
    const CALLS: u64 = 20_000;
    let results = run(4, |mut b| {
        // Small buffers: many messages, some leaving from inside handlers.
        let agg = Aggregator::new(&mut b, AggConfig::default().with_buffer_bytes(256));
        let (rpc, (next, bad)) = common::ordered_rpc(&agg, &mut b);
        let n = b.size();
        let me = b.rank().0;
        let mut ep = b.start()?;
        let ctx = ep.ctx();
        let mut sent = vec![0u64; n as usize];
        for i in 0..CALLS {
            let d = ((i * 7 + u64::from(me)) % u64::from(n)) as usize;
            // The token (and the request): the call's number among those to `d`.
            rpc.send(&ctx, Rank(d as u32), sent[d], sent[d])?;
            sent[d] += 1;
        }
        agg.quiesce(&mut ep)?;
        let got: Vec<u64> = next.iter().map(Cell::get).collect();
        let out = (bad.get(), got == sent, rpc.outstanding());
        ep.close()?;
        Ok(out)
    });
    for (r, (bad, all, outstanding)) in results.into_iter().enumerate() {
        assert_eq!(bad, 0, "rank {r}: completions out of order or wrong");
        assert!(all, "rank {r}: not every call completed by quiesce");
        assert_eq!(outstanding, 0, "rank {r}");
    }
}

/// Completions seen: token and result.
type Seen = Vec<(u64, Result<u32, RpcError>)>;

#[test]
fn handler_errors_reach_the_caller_by_callback_and_future() {
    let results = run(3, |mut b| {
        let agg = Aggregator::new(&mut b, AggConfig::default());
        let rpc = agg.rpc(&mut b, "even", |_ctx: &fastmsg::Ctx, _src: Rank, x: u32| {
            if x % 2 == 1 {
                Err(format!("odd request {x}"))
            } else {
                Ok(x / 2)
            }
        });
        let seen: Rc<RefCell<Seen>> = Rc::default();
        let s = Rc::clone(&seen);
        rpc.on_complete(move |_ctx, _owner, token, r| s.borrow_mut().push((token, r)));
        let mut ep = b.start()?;
        let ctx = ep.ctx();
        let next = Rank((ep.rank().0 + 1) % ep.size());
        for x in 0..100u32 {
            rpc.send(&ctx, next, x, u64::from(x))?;
        }
        let fut_ok = rpc.call(&ctx, next, 10)?;
        let fut_err = rpc.call(&ctx, next, 11)?;
        ep.wait_until(|| fut_ok.is_ready() && fut_err.is_ready())?;
        let mut bad = 0;
        if fut_ok.take() != Some(Ok(5)) {
            bad += 1;
        }
        match fut_err.take() {
            Some(Err(RpcError::Handler { rank, message, .. }))
                if rank == next && message == "odd request 11" => {}
            other => panic!("future of an odd request: {other:?}"),
        }
        agg.quiesce(&mut ep)?;
        for (t, r) in seen.borrow().iter() {
            let ok = match r {
                Ok(v) => t % 2 == 0 && u64::from(*v) == t / 2,
                Err(RpcError::Handler { message, .. }) => {
                    t % 2 == 1 && *message == format!("odd request {t}")
                }
                Err(_) => false,
            };
            if !ok {
                bad += 1;
            }
        }
        let n = seen.borrow().len();
        ep.close()?;
        Ok((bad, n))
    });
    for (r, (bad, n)) in results.into_iter().enumerate() {
        assert_eq!((bad, n), (0, 100), "rank {r}");
    }
}

#[test]
fn completions_may_call_again() {
    // Each call bounces: its completion makes the next call, to the next
    // rank, until a hop count runs out (a chain across ranks).
    const CHAINS: u64 = 500;
    const HOPS: u64 = 12;
    let results = run(4, |mut b| {
        let agg = Aggregator::new(&mut b, AggConfig::default().with_buffer_bytes(512));
        let rpc = agg.rpc(&mut b, "hop", |_ctx: &fastmsg::Ctx, _src: Rank, h: u64| {
            Ok::<u64, String>(h + 1)
        });
        let ends = Rc::new(Cell::new(0u64));
        let (e, r2) = (Rc::clone(&ends), rpc.clone());
        rpc.on_complete(move |ctx, owner, token, r| {
            let h = r.expect("hop");
            if h >= HOPS {
                e.set(e.get() + 1);
            } else {
                let next = Rank((owner.0 + 1) % ctx.size());
                r2.send(ctx, next, h, token).expect("bounce");
            }
        });
        let mut ep = b.start()?;
        let ctx = ep.ctx();
        for c in 0..CHAINS {
            rpc.send(&ctx, Rank((c % 4) as u32), 0, c)?;
        }
        agg.quiesce(&mut ep)?;
        let n = ends.get();
        ep.close()?;
        Ok(n)
    });
    assert!(results.iter().all(|&n| n == CHAINS), "{results:?}");
}

#[test]
fn bad_calls_are_typed_errors() {
    run(2, |mut b| {
        let agg = Aggregator::new(&mut b, AggConfig::default());
        let rpc = agg.rpc(&mut b, "id", |_: &fastmsg::Ctx, _: Rank, x: u64| {
            Ok::<u64, String>(x)
        });
        let words = RemoteWords::new(&agg, &mut b, "w", 4);
        let win = words.window();
        let ep = b.start()?;
        let ctx = ep.ctx();
        assert!(matches!(
            rpc.send(&ctx, Rank(0), 1, 1),
            Err(RpcError::NoCompletion { .. })
        ));
        rpc.on_complete(|_, _, _, _| {});
        assert!(matches!(
            rpc.send(&ctx, Rank(5), 1, 1),
            Err(RpcError::BadDestination {
                dest: Rank(5),
                size: 2
            })
        ));
        assert!(matches!(
            rpc.send(&ctx, Rank(0), 1, 1 << 63),
            Err(RpcError::BadToken { .. })
        ));
        assert!(matches!(
            words.add(&ctx, Rank(1), 4, 1),
            Err(MemError::OutOfRange {
                index: 4,
                words: 4,
                ..
            })
        ));
        assert!(matches!(
            words.get(&ctx, Rank(7), 0, 0),
            Err(MemError::Rpc(RpcError::BadDestination {
                dest: Rank(7),
                size: 2
            }))
        ));
        let mut buf = [0u8; 16];
        assert!(matches!(
            ctx.get(win, Rank(1), 24, &mut buf),
            Err(PutError::OutOfBounds {
                offset: 24,
                len: 16,
                size: 32,
                ..
            })
        ));
        assert!(matches!(
            ctx.update_u64(win, Rank(1), 4, WordOp::FetchAdd(1)),
            Err(PutError::Misaligned { offset: 4 })
        ));
        assert!(matches!(
            ctx.get_u64(win, Rank(1), 32),
            Err(PutError::OutOfBounds { .. })
        ));
        ep.close()?;
        // The endpoint is closed: its windows are not reachable any more.
        assert!(matches!(
            ctx.get_u64(win, Rank(1), 0),
            Err(PutError::Closed)
        ));
        Ok(())
    });
}

/// `Ctx::update_own_words`: a batch with one index past the window fails
/// naming it and applies nothing; a valid batch (repeated words, every
/// operation) leaves each word as `update_u64` one by one would.
#[test]
fn a_batch_of_own_word_updates_is_checked_whole_then_applied_in_order() {
    run(1, |mut b| {
        let win = b.window("batch", 64 * 8);
        let ep = b.start()?;
        let ctx = ep.ctx();
        let bad = [(3u64, WordOp::FetchAdd(5)), (64, WordOp::FetchAdd(1))];
        assert!(matches!(
            ctx.update_own_words(win, bad.len(), |k| bad[k]),
            Err(PutError::OutOfBounds {
                offset: 512,
                len: 8,
                size: 512,
                ..
            })
        ));
        assert_eq!(ctx.get_u64(win, Rank(0), 3 * 8)?, 0, "nothing applied");
        // 1000 updates over the 64 words: adds, swaps, compare-swaps, f64 adds.
        let op = |k: usize| -> (u64, WordOp) {
            let w = (k * 37 % 64) as u64;
            let op = match k % 7 {
                0 => WordOp::Swap(k as u64),
                1 => WordOp::CompareSwap {
                    current: k as u64 - 1,
                    new: 7,
                },
                _ if w == 63 => WordOp::AddF64(0.5),
                _ => WordOp::FetchAdd(k as u64),
            };
            (w, op)
        };
        ctx.update_own_words(win, 1000, op)?;
        let mut want = [0u64; 64];
        for k in 0..1000 {
            let (w, o) = op(k);
            let v = &mut want[w as usize];
            *v = match o {
                WordOp::Swap(x) => x,
                WordOp::CompareSwap { current, new } if *v == current => new,
                WordOp::CompareSwap { .. } => *v,
                WordOp::AddF64(x) => (f64::from_bits(*v) + x).to_bits(),
                WordOp::FetchAdd(x) => v.wrapping_add(x),
                _ => unreachable!("the test makes no other operation"),
            };
        }
        for (w, &v) in want.iter().enumerate() {
            assert_eq!(ctx.get_u64(win, Rank(0), w * 8)?, v, "word {w}");
        }
        ep.close()?;
        Ok(())
    });
}

#[test]
fn get_reads_what_the_owner_wrote() {
    let results = run(4, |mut b| {
        let agg = Aggregator::new(&mut b, AggConfig::default());
        let words = RemoteWords::new(&agg, &mut b, "table", 1000);
        let owner_path = RemoteWords::new(&agg, &mut b, "table2", 1000).through_owner();
        let win = words.window();
        let got: Rc<RefCell<Vec<u64>>> = Rc::new(RefCell::new(vec![0; 4000]));
        let g = Rc::clone(&got);
        owner_path
            .on_complete(move |_, _, token, r| g.borrow_mut()[token as usize] = r.expect("get"));
        let mut ep = b.start()?;
        let ctx = ep.ctx();
        let me = u64::from(ep.rank().0);
        for i in 0..1000 {
            words.set_local(&ctx, i, me * 1_000_000 + i)?;
            owner_path.set_local(&ctx, i, me * 1_000_000 + i)?;
        }
        agg.quiesce(&mut ep)?;
        let mut bad = 0;
        for r in 0..4u32 {
            // Bytes: words 10..14 of rank r in one get.
            let mut buf = [0u8; 32];
            ctx.get(win, Rank(r), 80, &mut buf)?;
            for (k, c) in buf.chunks_exact(8).enumerate() {
                let v = u64::from_le_bytes(c.try_into().unwrap());
                bad += usize::from(v != u64::from(r) * 1_000_000 + 10 + k as u64);
            }
            for i in (0..1000).step_by(37) {
                let mut f = words.call(&ctx, Rank(r), i, None)?;
                bad += usize::from(f.take() != Some(Ok(u64::from(r) * 1_000_000 + i)));
                owner_path.get(&ctx, Rank(r), i, u64::from(r) * 1000 + i)?;
            }
        }
        agg.quiesce(&mut ep)?;
        for r in 0..4u64 {
            for i in (0..1000).step_by(37) {
                bad += usize::from(got.borrow()[(r * 1000 + i) as usize] != r * 1_000_000 + i);
            }
        }
        ep.close()?;
        Ok(bad)
    });
    assert!(results.iter().all(|&b| b == 0), "{results:?}");
}

#[test]
fn atomics_from_every_rank_add_up_exactly() {
    const ROUNDS: u64 = 2000;
    const W: u64 = 8;
    for through_owner in [false, true] {
        let results = run(4, |mut b| {
            let agg = Aggregator::new(&mut b, AggConfig::default().with_buffer_bytes(512));
            let mut words = RemoteWords::new(&agg, &mut b, "ctr", W as usize);
            let mut floats = RemoteWords::new(&agg, &mut b, "f", W as usize);
            let mut cas = RemoteWords::new(&agg, &mut b, "cas", 1);
            if through_owner {
                words = words.through_owner();
                floats = floats.through_owner();
                cas = cas.through_owner();
            } else {
                // Adds by CPU atomics too (the default sends them to the
                // owner: the test below covers that).
                words = words.direct_adds();
                floats = floats.direct_adds();
            }
            // Previous values seen by fetch-add on word 0 of each rank.
            let prev: Rc<RefCell<Vec<(u64, u64)>>> = Rc::default();
            let p = Rc::clone(&prev);
            words.on_complete(move |_, owner, token, r| {
                if owner == Rank(0) && token < ROUNDS {
                    p.borrow_mut().push((token % W, r.expect("fetch-add")));
                }
            });
            // Compare-and-swap increments of rank 0's word: retried until
            // they succeed (the completion retries with what it saw).
            let wins = Rc::new(Cell::new(0u64));
            let (w2, c2) = (Rc::clone(&wins), cas.clone());
            let pending_cas = Rc::new(Cell::new(0u64));
            let pc = Rc::clone(&pending_cas);
            cas.on_complete(move |ctx, owner, token, r| {
                let seen = r.expect("cas");
                if seen == token {
                    w2.set(w2.get() + 1);
                    pc.set(pc.get() - 1);
                } else {
                    let op = WordOp::CompareSwap {
                        current: seen,
                        new: seen + 1,
                    };
                    c2.fetch(ctx, owner, 0, op, seen).expect("retry");
                }
            });
            let mut ep = b.start()?;
            let ctx = ep.ctx();
            let n = ep.size();
            for k in 0..ROUNDS {
                for r in 0..n {
                    let w = (k + u64::from(r)) % W;
                    words.fetch(&ctx, Rank(r), w, WordOp::FetchAdd(1), k)?;
                    words.add(&ctx, Rank(r), (w + 1) % W, 2)?;
                    floats.add_f64(&ctx, Rank(r), w, 0.5)?;
                }
                if k % 20 == 0 {
                    pending_cas.set(pending_cas.get() + 1);
                    let op = WordOp::CompareSwap { current: 0, new: 1 };
                    cas.fetch(&ctx, Rank(0), 0, op, 0)?;
                }
            }
            agg.quiesce(&mut ep)?;
            let mine: Vec<u64> = (0..W)
                .map(|i| words.local(&ctx, i))
                .collect::<Result<_, _>>()?;
            let fl: Vec<f64> = (0..W)
                .map(|i| floats.local(&ctx, i).map(f64::from_bits))
                .collect::<Result<_, _>>()?;
            let before = words.local(&ctx, 0)?;
            let mut f = words.call(&ctx, ep.rank(), 0, Some(WordOp::Swap(7)))?;
            ep.wait_until(|| f.is_ready())?;
            let swapped = (f.take(), words.local(&ctx, 0)?);
            let c = cas.local(&ctx, 0)?;
            agg.quiesce(&mut ep)?;
            let prev = prev.borrow().clone();
            ep.close()?;
            Ok((mine, fl, prev, before, swapped, c, wins.get()))
        });
        // Every rank adds 1 (fetch-add) to word w = (k + r) % W of rank r
        // and 2 to word w + 1, for every k: per rank and word, the count.
        let n = 4u64;
        let mut want = vec![vec![0u64; W as usize]; n as usize];
        let mut want_f = vec![vec![0f64; W as usize]; n as usize];
        for k in 0..ROUNDS {
            for r in 0..n as usize {
                let w = ((k + r as u64) % W) as usize;
                want[r][w] += n;
                want[r][(w + 1) % W as usize] += 2 * n;
                want_f[r][w] += 0.5 * n as f64;
            }
        }
        let mut prev_by_word = vec![Vec::new(); W as usize];
        let mut cas_total = 0;
        for (r, (mine, fl, prev, before, swapped, c, _wins)) in results.into_iter().enumerate() {
            assert_eq!(
                mine, want[r],
                "rank {r} words, through_owner={through_owner}"
            );
            assert_eq!(fl, want_f[r], "rank {r} floats");
            assert_eq!(swapped, (Some(Ok(before)), 7), "rank {r} swap");
            if r == 0 {
                cas_total = c;
            }
            for (w, v) in prev {
                prev_by_word[w as usize].push(v);
            }
        }
        // The fetch-adds to a word of rank 0 each saw a different value
        // (each added 1 to what the one before saw, whatever adds of 2 came
        // between), one per (k, rank).
        for (w, mut p) in prev_by_word.into_iter().enumerate() {
            let total = p.len();
            p.sort_unstable();
            p.dedup();
            assert_eq!(
                p.len(),
                total,
                "word {w}: two fetch-adds saw the same value"
            );
            assert_eq!(total as u64, n * ROUNDS / W, "word {w}");
        }
        // Each compare-and-swap increment succeeded exactly once: together
        // they counted rank 0's word up exactly.
        assert_eq!(
            cas_total,
            n * ROUNDS.div_ceil(20),
            "through_owner={through_owner}"
        );
    }
}

#[test]
fn adds_of_every_width_add_up_exactly_on_every_path() {
    // +1, a value with high bits, a wrapping -1 and an f64 add: every
    // encoding an add takes to the owner (the default, every operation
    // through the owner, and words only the owner writes, applied without
    // locked atomics), and CPU atomics (`direct_adds`).
    const ROUNDS: u64 = 500;
    const WORDS: usize = 1000;
    const BIG: u64 = (1 << 40) + 3;
    for path in ["default", "through_owner", "direct_adds", "owner_only"] {
        let results = run(4, |mut b| {
            let agg = Aggregator::new(&mut b, AggConfig::default().with_buffer_bytes(256));
            let mut words = if path == "owner_only" {
                RemoteWords::owner_only(&agg, &mut b, "wide", WORDS)
            } else {
                RemoteWords::new(&agg, &mut b, "wide", WORDS)
            };
            match path {
                "through_owner" => words = words.through_owner(),
                "direct_adds" => words = words.direct_adds(),
                _ => {}
            }
            let mut ep = b.start()?;
            let ctx = ep.ctx();
            for k in 0..ROUNDS {
                for r in 0..ep.size() {
                    let i = (k * 7 + u64::from(r)) % (WORDS as u64 - 2);
                    words.add(&ctx, Rank(r), i, 1)?;
                    words.add(&ctx, Rank(r), WORDS as u64 - 1, BIG)?;
                    words.add(&ctx, Rank(r), WORDS as u64 - 1, u64::MAX)?;
                    words.add_f64(&ctx, Rank(r), WORDS as u64 - 2, -0.25)?;
                }
            }
            agg.quiesce(&mut ep)?;
            let mine: Vec<u64> = (0..WORDS as u64)
                .map(|i| words.local(&ctx, i))
                .collect::<Result<_, _>>()?;
            ep.close()?;
            Ok(mine)
        });
        let n = 4u64;
        for (r, mine) in results.into_iter().enumerate() {
            let mut want = vec![0u64; WORDS];
            for k in 0..ROUNDS {
                want[((k * 7 + r as u64) % (WORDS as u64 - 2)) as usize] += n;
            }
            want[WORDS - 1] += n * ROUNDS * (BIG - 1);
            let f = want[WORDS - 2] as f64 - 0.25 * (n * ROUNDS) as f64;
            want[WORDS - 2] = f.to_bits();
            assert_eq!(mine, want, "rank {r}, path {path}");
        }
    }
}

#[test]
fn batch_forms_add_up_exactly_and_refuse_bad_items_whole() {
    const ITEMS: u64 = 3000;
    const W: u64 = 16;
    for through_owner in [false, true] {
        let results = run(4, |mut b| {
            let agg = Aggregator::new(&mut b, AggConfig::default().with_buffer_bytes(512));
            let mut words = RemoteWords::new(&agg, &mut b, "hist", W as usize);
            if through_owner {
                words = words.through_owner();
            }
            // Token → value seen (reads, then fetch-adds).
            let seen: Rc<RefCell<Vec<(u64, u64)>>> = Rc::default();
            let s = Rc::clone(&seen);
            words.on_complete(move |_, _, token, r| {
                s.borrow_mut().push((token, r.expect("read")));
            });
            let mut ep = b.start()?;
            let ctx = ep.ctx();
            let n = ep.size();
            let me = ep.rank().0;
            // A histogram: item k of rank r adds k % 3 + 1 at global
            // index (k * 5 + r) % (n * W), block-distributed.
            let updates: Vec<(Rank, u64, u64)> = (0..ITEMS)
                .map(|k| {
                    let g = (k * 5 + u64::from(me)) % (u64::from(n) * W);
                    (Rank((g / W) as u32), g % W, k % 3 + 1)
                })
                .collect();
            // Bad items anywhere in a batch: nothing is applied.
            let mut bad = updates.clone();
            bad.push((Rank(0), W, 1));
            let e1 = words.add_many(&ctx, &bad).unwrap_err();
            bad.pop();
            bad.push((Rank(n), 0, 1));
            let e2 = words.add_many(&ctx, &bad).unwrap_err();
            let e3 = words.get_many(&ctx, &[(Rank(0), 0)], u64::MAX).unwrap_err();
            words.add_many(&ctx, &updates)?;
            agg.quiesce(&mut ep)?;
            // Every rank reads every word of the next rank, then adds 1 to
            // each with a fetch-add.
            let next = Rank((me + 1) % n);
            let reads: Vec<(Rank, u64)> = (0..W).map(|i| (next, i)).collect();
            words.get_many(&ctx, &reads, 0)?;
            agg.quiesce(&mut ep)?;
            let ops: Vec<_> = (0..W).map(|i| (next, i, WordOp::FetchAdd(1))).collect();
            words.fetch_many(&ctx, &ops, W)?;
            agg.quiesce(&mut ep)?;
            let mine: Vec<u64> = (0..W)
                .map(|i| words.local(&ctx, i))
                .collect::<Result<_, _>>()?;
            let mut seen = seen.borrow().clone();
            seen.sort_unstable();
            ep.close()?;
            Ok((
                mine,
                seen,
                e1.to_string(),
                matches!(e2, MemError::Rpc(RpcError::BadDestination { .. })),
                matches!(e3, MemError::Rpc(RpcError::BadToken { .. })),
            ))
        });
        let n = 4u64;
        let mut want = vec![vec![0u64; W as usize]; n as usize];
        for r in 0..n {
            for k in 0..ITEMS {
                let g = (k * 5 + r) % (n * W);
                want[(g / W) as usize][(g % W) as usize] += k % 3 + 1;
            }
        }
        for (r, (mine, seen, e1, e2, e3)) in results.into_iter().enumerate() {
            let plus1: Vec<u64> = want[r].iter().map(|v| v + 1).collect();
            assert_eq!(mine, plus1, "rank {r}, through_owner={through_owner}");
            // What this rank read (tokens 0..W) and fetched (W..2W) of
            // the next rank: its histogram, before the fetch-adds.
            let next = (r + 1) % n as usize;
            let expect: Vec<(u64, u64)> = (0..2 * W)
                .map(|t| (t, want[next][(t % W) as usize]))
                .collect();
            assert_eq!(seen, expect, "rank {r}, through_owner={through_owner}");
            assert!(e1.contains("out of range"), "{e1}");
            assert!(e2, "bad rank in a batch: not BadDestination");
            assert!(e3, "tokens past 2^63: not BadToken");
        }
    }
}

/// Words made with `owner_only` on one rank and `new` on another (the
/// owner would apply adds without locked atomics while the other rank
/// updates its words directly) fail the start check.
#[test]
fn owner_only_words_must_be_made_so_on_every_rank() {
    let r = fastmsg::threads::run(
        2,
        |c| c.timeout = std::time::Duration::from_secs(60),
        |mut b| {
            let agg = Aggregator::new(&mut b, AggConfig::default());
            if b.rank() == Rank(0) {
                RemoteWords::owner_only(&agg, &mut b, "w", 8);
            } else {
                RemoteWords::new(&agg, &mut b, "w", 8);
            }
            Ok(b.start()?.close()?)
        },
    );
    let e = r.expect_err("the start check refuses the mismatch");
    assert!(e.to_string().contains("written by its owner only"), "{e}");
}

/// Another rank cannot write `owner_only` words directly through their
/// window (the owner applies updates as their only writer): a direct
/// update or put is a typed error and changes nothing, a read is allowed;
/// and the owner's unshared updates are refused on ordinary words.
#[test]
fn owner_only_words_refuse_direct_writes_from_other_ranks() {
    let results = run(2, |mut b| {
        let agg = Aggregator::new(&mut b, AggConfig::default());
        let own = RemoteWords::owner_only(&agg, &mut b, "own", 8);
        let shared = RemoteWords::new(&agg, &mut b, "shared", 8);
        let mut ep = b.start()?;
        let ctx = ep.ctx();
        let peer = Rank(1 - ctx.rank().0);
        let win = own.window();
        let refused = |r: Result<(), PutError>| {
            r == Err(PutError::OwnerOnly {
                window: "fastmsg-mem/own".into(),
                owner: peer,
            })
        };
        let direct = [
            refused(ctx.put_u64(win, peer, 0, 7)),
            refused(ctx.put(win, peer, 8, &[1; 8])),
            refused(ctx.update_u64(win, peer, 0, WordOp::FetchAdd(1)).map(drop)),
        ];
        let read = ctx.get_u64(win, peer, 0);
        let unshared = ctx.update_own_words_unshared(shared.window(), 1, |_| (0, WordOp::Swap(3)));
        let untouched = shared.local(&ctx, 0).map_err(Error::from)?;
        // Both ranks have tried their writes before either looks.
        agg.quiesce(&mut ep)?;
        let own_words = (
            own.local(&ctx, 0).map_err(Error::from)?,
            own.local(&ctx, 1).map_err(Error::from)?,
        );
        ep.close()?;
        Ok((direct, read, unshared, untouched, own_words))
    });
    for (rank, (direct, read, unshared, untouched, own_words)) in results.into_iter().enumerate() {
        assert_eq!(direct, [true; 3], "rank {rank}: put_u64, put, update_u64");
        assert_eq!(read, Ok(0), "rank {rank}: a read of the peer's words");
        assert_eq!(
            unshared,
            Err(PutError::NotOwnerOnly {
                window: "fastmsg-mem/shared".into()
            }),
            "rank {rank}: unshared updates of ordinary words"
        );
        assert_eq!(untouched, 0, "rank {rank}: nothing applied");
        assert_eq!(
            own_words,
            (0, 0),
            "rank {rank}: the refused writes changed nothing"
        );
    }
}
