//! Latency of one item through aggregation to an idle peer, beside a
//! direct 8-byte active message.
//!
//! `fmrun -n 2 target/release/examples/agglat [--json] [--iters 100000] [--runs 5]`
//!
//! Ping-pong between ranks 0 and 1: each side sends one `u64` and waits
//! (`wait_until`) for the answer. Direct: `Endpoint::send` of 8 bytes to a
//! plain-function handler. Aggregated: `Channel::<u64>::send`, which only
//! appends to the destination's buffer; the buffer leaves when the sender
//! goes idle in `wait_until` (the aggregator's idle hook). One-way time =
//! round trip / 2, mean per run, median over runs; `ratio` = aggregated /
//! direct. `--json`: one line with `ranks`, `ok`, `direct_ns`, `agg_ns`,
//! `ratio`.

use clap::Parser;
use fastmsg::{EndpointBuilder, Rank};
use fastmsg_examples::median;
use fastmsg_handlers::aggregate::{AggConfig, Aggregator};
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
    let mut ep = b.start()?;
    let ctx = ep.ctx();
    let me = ep.rank().0;
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
    agg.quiesce(&mut ep)?;
    let (d, a) = (median(&mut one_way[0]), median(&mut one_way[1]));
    if me == 0 {
        if args.json {
            println!(
                "{{\"kernel\":\"agglat\",\"ranks\":2,\"ok\":{ok},\"direct_ns\":{d:.1},\"agg_ns\":{a:.1},\"ratio\":{:.3},\"iters\":{}}}",
                a / d,
                args.iters
            );
        } else {
            println!(
                "agglat one-way: direct 8 B {d:.1} ns, one aggregated u64 {a:.1} ns, ratio {:.2} ({} round trips, median of {} runs) {}",
                a / d,
                args.iters,
                args.runs,
                if ok { "OK" } else { "FAILED" }
            );
        }
    }
    ep.close()?;
    if !ok {
        std::process::exit(1);
    }
    Ok(())
}
