//! Latency of one item through aggregation to an idle peer, beside a
//! direct 8-byte active message; and the round trips of the layers above:
//! a one-item call (request/response) and an 8-byte remote read.
//!
//! `fmrun -n 2 target/release/examples/agglat [--json] [--iters 100000] [--runs 5]`
//!
//! Ping-pong between ranks 0 and 1: each side sends one `u64` and waits
//! (`wait_until`) for the answer. Direct: `Endpoint::send` of 8 bytes to a
//! plain-function handler. Aggregated: `Channel::<u64>::send`, which only
//! appends to the destination's buffer; the buffer leaves when the sender
//! goes idle in `wait_until` (the aggregator's idle hook). One-way time =
//! round trip / 2, mean per run, median over runs; `ratio` = aggregated /
//! direct.
//!
//! Then, interleaved run by run, four round trips from rank 0 while rank 1
//! waits in `wait_until` (idle): a direct 0-byte ping-pong (`zero_rt_ns`);
//! one `Rpc::send` answered by the peer's handler, completion in a
//! callback (`rpc_rt_ns`); one `RemoteWords::get` of the on-host peer's
//! word (`get_ns`: the word prefetched and the read queued, then made
//! from the shared segment and completed by the idle hook when the wait
//! that follows finds nothing to do); the same read through the owner's handler
//! (`get_owner_rt_ns`). Ratios: `rpc_ratio` = call round trip / direct
//! 8-byte round trip (2 × `direct_ns`), `get_ratio` = get / 0-byte round
//! trip, `get_owner_ratio` likewise. Every answer is checked.
//!
//! `--json`: one line with `ranks`, `ok`, `direct_ns`, `agg_ns`, `ratio`,
//! `zero_rt_ns`, `rpc_rt_ns`, `rpc_ratio`, `get_ns`, `get_ratio`,
//! `get_owner_rt_ns`, `get_owner_ratio`.

use clap::Parser;
use fastmsg::{EndpointBuilder, Rank};
use fastmsg_examples::median;
use fastmsg_handlers::aggregate::{AggConfig, Aggregator};
use fastmsg_handlers::memory::RemoteWords;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

#[derive(Parser, Debug)]
struct Args {
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    /// Round trips per run.
    #[arg(long, default_value_t = 100_000)]
    iters: u64,
    /// Runs (median reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
}

fn main() -> Result<(), fastmsg::Error> {
    let args = Args::parse();
    let mut b = EndpointBuilder::from_env()?;
    if b.size() != 2 {
        return Err(fastmsg::Error::other("agglat runs on exactly 2 ranks"));
    }
    let agg = Aggregator::new(&mut b, AggConfig::default());
    let got = Rc::new(Cell::new(0u64));
    let g = Rc::clone(&got);
    let direct = b.register_fn("direct", move |_, p| {
        let mut w = [0u8; 8];
        w.copy_from_slice(p.data().get(..8).ok_or("short ping")?);
        g.set(u64::from_le_bytes(w));
        Ok(())
    });
    let g = Rc::clone(&got);
    let item = agg.channel::<u64, _>(&mut b, "ping", move |_, _, x| {
        g.set(x);
        Ok(())
    });
    // The round trips of the layers above: their state.
    let zeros = Rc::new(Cell::new(0u64));
    let z = Rc::clone(&zeros);
    let zero = b.register_fn("zero", move |_, _| {
        z.set(z.get() + 1);
        Ok(())
    });
    let stops = Rc::new(Cell::new(0u64));
    let st = Rc::clone(&stops);
    let stop = b.register_fn("stop", move |_, _| {
        st.set(st.get() + 1);
        Ok(())
    });
    let rpc = agg.rpc(&mut b, "echo", |_, _, x: u64| Ok::<u64, String>(x + 1));
    let answer = Rc::new(Cell::new((0u64, 0u64)));
    let a = Rc::clone(&answer);
    rpc.on_complete(move |_, _, token, r| a.set((token, r.unwrap_or(u64::MAX))));
    let words = RemoteWords::new(&agg, &mut b, "word", 1);
    let owner_words = RemoteWords::new(&agg, &mut b, "owner-word", 1).through_owner();
    for w in [&words, &owner_words] {
        let a = Rc::clone(&answer);
        w.on_complete(move |_, _, token, r| a.set((token, r.unwrap_or(u64::MAX))));
    }
    let mut ep = b.start()?;
    let ctx = ep.ctx();
    let me = ep.rank().0;
    /// The word each rank holds for the reads.
    const WORD: u64 = 0x5eed_0000_0000_0042;
    words.set_local(&ctx, 0, WORD + u64::from(me))?;
    owner_words.set_local(&ctx, 0, WORD + u64::from(me))?;
    let peer = Rank(1 - me);
    let mut ok = true;
    let mut one_way = [Vec::new(), Vec::new()];
    // The numbers go on across runs (never reset: the peer's first ping of
    // the next run may arrive while this rank is still in `quiesce`).
    let mut base = 0u64;
    for run in 0..args.runs + 1 {
        for (k, via_agg) in [false, true].into_iter().enumerate() {
            agg.quiesce(&mut ep)?;
            let t0 = Instant::now();
            for i in base + 1..=base + args.iters {
                // Rank 0 sends odd numbers and waits for the next even one.
                let (send, wait) = if me == 0 {
                    (2 * i - 1, 2 * i)
                } else {
                    (2 * i, 2 * i + 1)
                };
                if me == 1 {
                    ep.wait_until(|| got.get() >= send - 1)?;
                }
                if via_agg {
                    item.send(&ctx, peer, send)?;
                } else {
                    ep.send(peer, direct, &[&send.to_le_bytes()])?;
                }
                if me == 0 {
                    ep.wait_until(|| got.get() >= wait)?;
                    ok &= got.get() == wait;
                }
            }
            let ns = t0.elapsed().as_nanos() as f64 / args.iters as f64 / 2.0;
            base += args.iters;
            if run > 0 {
                one_way[k].push(ns); // run 0 warms up
            }
        }
    }
    // Round trips from rank 0: [0-byte, call, get, get through owner].
    let mut rt = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    let want = WORD + u64::from(1 - me);
    let mut stops_seen = 0u64;
    for run in 0..args.runs + 1 {
        for (k, v) in rt.iter_mut().enumerate() {
            agg.quiesce(&mut ep)?;
            if me == 1 {
                if k == 0 {
                    // Answer each ping with a pong, from the main loop.
                    for i in 1..=args.iters {
                        ep.wait_until(|| zeros.get() >= i)?;
                        ep.send(peer, zero, &[])?;
                    }
                    zeros.set(0);
                } else {
                    // Serve (idle) until rank 0 says stop (counted: the
                    // stop may come before this rank leaves the quiesce).
                    stops_seen += 1;
                    ep.wait_until(|| stops.get() >= stops_seen)?;
                }
                continue;
            }
            let t0 = Instant::now();
            for i in 1..=args.iters {
                match k {
                    0 => {
                        ep.send(peer, zero, &[])?;
                        ep.wait_until(|| zeros.get() >= i)?;
                    }
                    1 => {
                        rpc.send(&ctx, peer, i, i)?;
                        ep.wait_until(|| answer.get().0 == i)?;
                        ok &= answer.get().1 == i + 1;
                    }
                    _ => {
                        let w = if k == 2 { &words } else { &owner_words };
                        w.get(&ctx, peer, 0, i)?;
                        ep.wait_until(|| answer.get().0 == i)?;
                        ok &= answer.get().1 == want;
                    }
                }
            }
            let ns = t0.elapsed().as_nanos() as f64 / args.iters as f64;
            zeros.set(0);
            answer.set((0, 0));
            if k > 0 {
                ep.send(peer, stop, &[])?;
            }
            if run > 0 {
                v.push(ns);
            }
        }
    }
    agg.quiesce(&mut ep)?;
    let (d, a) = (median(&mut one_way[0]), median(&mut one_way[1]));
    let [z, c, g, go] = rt.map(|mut v| if v.is_empty() { 0.0 } else { median(&mut v) });
    if me == 0 {
        if args.json {
            println!(
                "{{\"kernel\":\"agglat\",\"ranks\":2,\"ok\":{ok},\"direct_ns\":{d:.1},\"agg_ns\":{a:.1},\"ratio\":{:.3},\"iters\":{},\"zero_rt_ns\":{z:.1},\"rpc_rt_ns\":{c:.1},\"rpc_ratio\":{:.3},\"get_ns\":{g:.1},\"get_ratio\":{:.3},\"get_owner_rt_ns\":{go:.1},\"get_owner_ratio\":{:.3}}}",
                a / d,
                args.iters,
                c / (2.0 * d),
                g / z,
                go / z
            );
        } else {
            println!(
                "agglat one-way: direct 8 B {d:.1} ns, one aggregated u64 {a:.1} ns, ratio {:.2} ({} round trips, median of {} runs) {}",
                a / d,
                args.iters,
                args.runs,
                if ok { "OK" } else { "FAILED" }
            );
            println!(
                "round trips: 0-byte {z:.1} ns, one call {c:.1} ns ({:.2}x the direct 8-byte round trip), get 8 B on-host {g:.1} ns ({:.2}x the 0-byte round trip), get through the owner {go:.1} ns ({:.2}x)",
                c / (2.0 * d),
                g / z,
                go / z
            );
        }
    }
    ep.close()?;
    if !ok {
        std::process::exit(1);
    }
    Ok(())
}
