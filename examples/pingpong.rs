//! Ping-pong latency and streamed bandwidth between ranks 0 and 1.
//!
//! `fmrun -n 2 target/release/examples/pingpong [--json] [--max-size B] [--runs R]`
//!
//! Latency: rank 0 sends `size` bytes to a handler on rank 1, whose handler
//! replies with `size` bytes from inside the handler; one-way = RTT / 2.
//! Per-iteration RTTs give p50/p99; `one_way_ns_mean` is the median over
//! runs of each run's mean (the method of the MPI anchor).
//! Bandwidth: rank 0 streams a window of 64 messages, rank 1 acknowledges
//! the 64th; MB/s = 1e6 bytes/s (as the MPI anchor).

use clap::Parser;
use fastmsg::{EndpointBuilder, Rank};
use fastmsg_examples::{median, percentile, Clock};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

#[derive(Parser, Debug)]
struct Args {
    /// One JSON object per line and size.
    #[arg(long)]
    json: bool,
    /// Largest size (bytes).
    #[arg(long, default_value_t = 65536)]
    max_size: usize,
    /// Repetitions of each measurement (median reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Scale iteration counts (1.0 = default).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Handler kind on the measured path: plain functions (`fn`, the fast
    /// path) or FM 2.x async handlers (`async`).
    #[arg(long, default_value = "fn", value_parser = ["fn", "async"])]
    handler: String,
}

const WINDOW: usize = 64;

fn sizes(max: usize) -> Vec<usize> {
    let mut v = vec![0];
    let mut s = 1;
    while s <= max {
        v.push(s);
        s *= 4;
    }
    if *v.last().unwrap() != max && max > 0 {
        v.push(max);
    }
    v
}

fn iters_for(size: usize, scale: f64) -> (usize, usize) {
    let (i, w) = if size <= 4096 {
        (20_000, 1000)
    } else if size <= 65536 {
        (2_000, 100)
    } else {
        (200, 10)
    };
    (((i as f64) * scale).max(10.0) as usize, w)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let mut b = EndpointBuilder::from_env()?;
    if b.size() < 2 {
        return Err("pingpong needs at least 2 ranks (fmrun -n 2 …)".into());
    }
    let max = args.max_size;
    let buf = Rc::new(RefCell::new(vec![0u8; max.max(1)]));
    let pongs = Rc::new(Cell::new(0u64));
    let acks = Rc::new(Cell::new(0u64));
    let sunk = Rc::new(Cell::new(0u64));
    let stop = Rc::new(Cell::new(false));

    let use_fn = args.handler == "fn";
    // Every rank registers the same handlers in the same order; the
    // handler kind chosen by --handler must be the same on both ranks.
    let (_pong, ping) = if use_fn {
        let (buf2, pongs2) = (buf.clone(), pongs.clone());
        let pong = b.register_fn("pong", move |_ctx, p| {
            let off = p.offset();
            buf2.borrow_mut()[off..off + p.data().len()].copy_from_slice(p.data());
            if p.is_last() {
                pongs2.set(pongs2.get() + 1);
            }
            Ok(())
        });
        let buf3 = buf.clone();
        let ping = b.register_fn("ping", move |ctx, p| {
            let off = p.offset();
            let mut b = buf3.borrow_mut();
            b[off..off + p.data().len()].copy_from_slice(p.data());
            if p.is_last() {
                ctx.send(p.source(), pong, &[&b[..p.message_len()]])?;
            }
            Ok(())
        });
        (pong, ping)
    } else {
        let pong = {
            let (buf, pongs) = (buf.clone(), pongs.clone());
            b.register("pong", move |_ctx, mut m| {
                let (buf, pongs) = (buf.clone(), pongs.clone());
                async move {
                    let n = m.len();
                    let mut b = std::mem::take(&mut *buf.borrow_mut());
                    m.receive(&mut b[..n]).await?;
                    *buf.borrow_mut() = b;
                    pongs.set(pongs.get() + 1);
                    Ok(())
                }
            })
        };
        let ping = {
            let buf = buf.clone();
            b.register("ping", move |ctx, mut m| {
                let buf = buf.clone();
                async move {
                    let n = m.len();
                    let mut b = std::mem::take(&mut *buf.borrow_mut());
                    m.receive(&mut b[..n]).await?;
                    ctx.send(m.source(), pong, &[&b[..n]])?;
                    *buf.borrow_mut() = b;
                    Ok(())
                }
            })
        };
        (pong, ping)
    };
    let ack = {
        let acks = acks.clone();
        b.register("ack", move |_ctx, _m| {
            acks.set(acks.get() + 1);
            async { Ok(()) }
        })
    };
    let sink = {
        let (buf, sunk) = (buf.clone(), sunk.clone());
        b.register("sink", move |ctx, mut m| {
            let (buf, sunk) = (buf.clone(), sunk.clone());
            async move {
                let n = m.len();
                let mut b = std::mem::take(&mut *buf.borrow_mut());
                m.receive(&mut b[..n]).await?;
                *buf.borrow_mut() = b;
                sunk.set(sunk.get() + 1);
                if sunk.get() % WINDOW as u64 == 0 {
                    ctx.send(m.source(), ack, &[])?;
                }
                Ok(())
            }
        })
    };
    let stop_h = {
        let stop = stop.clone();
        b.register("stop", move |_ctx, _m| {
            stop.set(true);
            async { Ok(()) }
        })
    };
    let mut ep = b.start()?;
    let clock = Clock::new();
    if ep.rank() != Rank(0) {
        if ep.rank() == Rank(1) {
            ep.wait_until(|| stop.get())?;
        }
        ep.close()?;
        return Ok(());
    }
    let peer = Rank(1);
    let data = vec![7u8; max.max(1)];
    if !args.json {
        println!(
            "# fastmsg pingpong, 2 ranks, {} handlers; one-way latency = RTT/2; bandwidth with {WINDOW} messages in flight",
            args.handler
        );
        println!(
            "{:>9} {:>9} {:>12} {:>12} {:>12} {:>12}",
            "size", "iters", "p50_ns", "p99_ns", "mean_ns", "MB/s"
        );
    }
    for size in sizes(max) {
        let (iters, warm) = iters_for(size, args.scale);
        let mut means = Vec::new();
        let mut samples = Vec::with_capacity(iters);
        // Means: timed runs with no clock read inside the loop (the MPI
        // anchor's method); then one sampled run for the percentiles.
        for run in 0..=args.runs {
            let sampled = run == args.runs;
            for _ in 0..warm {
                let want = pongs.get() + 1;
                ep.send(peer, ping, &[&data[..size]])?;
                ep.wait_until(|| pongs.get() == want)?;
            }
            let t0 = clock.now();
            for _ in 0..iters {
                let want = pongs.get() + 1;
                let s = if sampled { clock.now() } else { 0 };
                ep.send(peer, ping, &[&data[..size]])?;
                ep.wait_until(|| pongs.get() == want)?;
                if sampled {
                    samples.push(clock.ns(clock.now() - s) / 2.0);
                }
            }
            if !sampled {
                means.push(clock.ns(clock.now() - t0) / iters as f64 / 2.0);
            }
        }
        let p50 = percentile(&mut samples, 50.0);
        let p99 = percentile(&mut samples, 99.0);
        let mean = median(&mut means);
        // Bandwidth.
        let bw_iters = (iters / WINDOW / 4).clamp(4, 400);
        let mut bws = Vec::new();
        for _ in 0..args.runs {
            let mut t0 = 0;
            for i in 0..bw_iters + 1 {
                if i == 1 {
                    t0 = clock.now();
                }
                let want = acks.get() + 1;
                for _ in 0..WINDOW {
                    ep.send(peer, sink, &[&data[..size]])?;
                }
                ep.wait_until(|| acks.get() == want)?;
            }
            let secs = clock.ns(clock.now() - t0) / 1e9;
            bws.push((size * WINDOW * bw_iters) as f64 / secs / 1e6);
        }
        let bw = median(&mut bws);
        if args.json {
            println!(
                "{{\"size\":{size},\"iters\":{iters},\"one_way_ns_p50\":{p50:.1},\"one_way_ns_p99\":{p99:.1},\"one_way_ns_mean\":{mean:.1},\"bandwidth_mb_s\":{bw:.1}}}"
            );
        } else {
            println!("{size:>9} {iters:>9} {p50:>12.1} {p99:>12.1} {mean:>12.1} {bw:>12.1}");
        }
    }
    ep.send(peer, stop_h, &[])?;
    ep.close()?;
    Ok(())
}
