//! Ping-pong latency and streamed bandwidth between ranks 0 and 1.
//!
//! `fmrun -n 2 target/release/examples/pingpong [--json] [--max-size B]
//! [--sizes 0,8,1024] [--pow2] [--runs R] [--scale F] [--no-latency]`
//!
//! Latency: rank 0 sends `size` bytes to a handler on rank 1, whose handler
//! replies with `size` bytes from inside the handler; one-way = RTT / 2.
//! Per-iteration RTTs give p50/p99; `one_way_ns_mean` is the median over
//! runs of each run's mean (the method of the MPI anchor). Where the clock
//! is coarse (`clock_step_ns`, see `Clock`), p50 can only take values on
//! its grid; `one_way_ns_p50_grouped` reads the median between the grid
//! points from how the samples fill them (`grouped_median`).
//! Bandwidth and message rate: rank 0 streams windows of 64 messages, rank
//! 1 acknowledges each 64th; MB/s = 1e6 bytes/s, `msg_rate_m_s` = 1e6
//! messages/s; windows per run as the MPI anchor (1000 up to 4 KiB, 200 up
//! to 64 KiB, 20 above). The receiving handler copies every byte into its
//! buffer, as `MPI_Recv` does.

use clap::Parser;
use fastmsg::{EndpointBuilder, Rank};
use fastmsg_examples::{grouped_median, median, percentile, Clock};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

#[derive(Parser, Debug)]
struct Args {
    /// One JSON object per line and size.
    #[arg(long)]
    json: bool,
    /// Largest size (bytes); sizes are 0 and powers of 4 (of 2 with
    /// `--pow2`) up to it.
    #[arg(long, default_value_t = 65536)]
    max_size: usize,
    /// Sizes in powers of 2 instead of 4.
    #[arg(long)]
    pow2: bool,
    /// Explicit comma-separated sizes (overrides `--max-size`).
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Skip the latency measurement (report NaN for it).
    #[arg(long)]
    no_latency: bool,
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

fn sizes(max: usize, step: usize) -> Vec<usize> {
    let mut v = vec![0];
    let mut s = 1;
    while s <= max {
        v.push(s);
        s *= step;
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

/// Windows per bandwidth run and warm-up windows (the MPI anchor's counts).
fn windows_for(size: usize, scale: f64) -> (usize, usize) {
    let (i, w) = if size <= 4096 {
        (1000, 10)
    } else if size <= 65536 {
        (200, 10)
    } else {
        (20, 2)
    };
    (((i as f64) * scale).max(4.0) as usize, w)
}

fn main() -> std::process::ExitCode {
    fastmsg_examples::exit_report(run())
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
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
    // The plain-function sink: the bandwidth path with `--handler fn`.
    let sink_fn = {
        let (buf, sunk) = (buf.clone(), sunk.clone());
        b.register_fn("sink_fn", move |ctx, p| {
            let off = p.offset();
            buf.borrow_mut()[off..off + p.data().len()].copy_from_slice(p.data());
            if p.is_last() {
                sunk.set(sunk.get() + 1);
                if sunk.get() % WINDOW as u64 == 0 {
                    ctx.send(p.source(), ack, &[])?;
                }
            }
            Ok(())
        })
    };
    let sink = if use_fn { sink_fn } else { sink };
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
        println!("# clock step {:.2} ns", clock.step_ns());
        println!(
            "{:>9} {:>9} {:>12} {:>12} {:>12} {:>12} {:>10}",
            "size", "iters", "p50_ns", "p99_ns", "mean_ns", "MB/s", "Mmsg/s"
        );
    }
    let list = if args.sizes.is_empty() {
        sizes(max, if args.pow2 { 2 } else { 4 })
    } else {
        args.sizes.clone()
    };
    if let Some(&big) = list.iter().find(|&&s| s > max) {
        return Err(format!("size {big} is larger than --max-size {max}").into());
    }
    for size in list {
        let (iters, warm) = iters_for(size, args.scale);
        let mut means = Vec::new();
        let mut samples = Vec::with_capacity(iters);
        // Means: timed runs with no clock read inside the loop (the MPI
        // anchor's method); then one sampled run for the percentiles.
        let lat_runs = if args.no_latency { 0 } else { args.runs + 1 };
        for run in 0..lat_runs {
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
        // A sample is half a round trip: half a clock step wide.
        let p50_grouped = grouped_median(&mut samples, clock.step_ns() / 2.0);
        let p99 = percentile(&mut samples, 99.0);
        let mean = median(&mut means);
        // Bandwidth and message rate.
        let (bw_iters, bw_warm) = windows_for(size, args.scale);
        let mut bws = Vec::new();
        let mut rates = Vec::new();
        for _ in 0..args.runs {
            let mut t0 = 0;
            for i in 0..bw_iters + bw_warm {
                if i == bw_warm {
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
            rates.push((WINDOW * bw_iters) as f64 / secs / 1e6);
        }
        let bw = median(&mut bws);
        let rate = median(&mut rates);
        if args.json {
            // NaN (latency skipped) is written as null, keeping the line JSON.
            let j = |x: f64| {
                if x.is_finite() {
                    format!("{x:.1}")
                } else {
                    "null".to_owned()
                }
            };
            println!(
                "{{\"size\":{size},\"iters\":{iters},\"one_way_ns_p50\":{},\"one_way_ns_p99\":{},\"one_way_ns_mean\":{},\"one_way_ns_p50_grouped\":{},\"clock_step_ns\":{:.2},\"bandwidth_mb_s\":{bw:.1},\"msg_rate_m_s\":{rate:.3}}}",
                j(p50),
                j(p99),
                j(mean),
                j(p50_grouped),
                clock.step_ns()
            );
        } else {
            println!(
                "{size:>9} {iters:>9} {p50:>12.1} {p99:>12.1} {mean:>12.1} {bw:>12.1} {rate:>10.3}"
            );
        }
    }
    ep.send(peer, stop_h, &[])?;
    ep.close()?;
    Ok(())
}
