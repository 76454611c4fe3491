//! Software overhead of the engine, without cross-core traffic: one rank
//! (as a thread), sending to itself over shared memory.
//!
//! `target/release/examples/overhead [--iters N] [--only empty|fn|async]
//! [--size B] [--heap-pad B]` prints ns per empty `extract`, and ns per
//! self-send of `B` bytes (default 0) + extract for each handler kind
//! (median of `--runs`). Under `valgrind --tool=callgrind` with `--only`,
//! the instruction count per iteration is repeatable.
//!
//! Nanoseconds at this scale depend on where the engine's objects land in
//! memory as well as on the code: `--heap-pad B` allocates `B` bytes
//! before the endpoint starts, which moves them. Comparing two builds,
//! sweep it (`scripts/overhead-sweep.sh`) rather than trust one placement.

use clap::Parser;
use fastmsg::threads;
use fastmsg::Rank;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

#[derive(Parser, Debug)]
struct Args {
    /// Iterations per measurement.
    #[arg(long, default_value_t = 2_000_000)]
    iters: u64,
    /// Repetitions (median reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Measure one path only.
    #[arg(long, value_parser = ["empty", "fn", "async", "fn-burst"])]
    only: Option<String>,
    /// Payload bytes of each self-send.
    #[arg(long, default_value_t = 0)]
    size: usize,
    /// Bytes allocated (and kept) before the endpoint starts, to move its
    /// heap objects (below glibc's mmap threshold, 128 KiB by default; a
    /// larger allocation is mapped apart and moves nothing).
    #[arg(long, default_value_t = 0)]
    heap_pad: usize,
}

fn med(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> std::process::ExitCode {
    fastmsg_examples::exit_report(run())
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let want = |k: &str| args.only.as_deref().is_none_or(|o| o == k);
    threads::run(
        1,
        |_| {},
        |mut b| {
            let count = Rc::new(Cell::new(0u64));
            let c = count.clone();
            let noop = b.register("noop", move |_ctx, _m| {
                c.set(c.get() + 1);
                async { Ok(()) }
            });
            let c = count.clone();
            let noop_fn = b.register_fn("noop_fn", move |_ctx, _p| {
                c.set(c.get() + 1);
                Ok(())
            });
            let pad: Vec<u8> = Vec::with_capacity(args.heap_pad);
            std::hint::black_box(&pad);
            let mut ep = b.start()?;
            let me = Rank(0);
            let n = args.iters;
            let payload = vec![7u8; args.size];
            // 0 B sends no piece at all, as this benchmark always did (a
            // 0-length piece costs a copy call and would not compare).
            let one: &[&[u8]] = &[&payload];
            let data: &[&[u8]] = if args.size == 0 { &[] } else { one };
            let (mut empty, mut send, mut send_fn) = (Vec::new(), Vec::new(), Vec::new());
            let mut burst = Vec::new();
            let mut expected = 0;
            for _ in 0..args.runs {
                if want("empty") {
                    let t = Instant::now();
                    for _ in 0..n {
                        std::hint::black_box(ep.extract(usize::MAX)?);
                    }
                    empty.push(t.elapsed().as_nanos() as f64 / n as f64);
                }
                if want("async") {
                    let t = Instant::now();
                    for _ in 0..n / 4 {
                        ep.send(me, noop, data)?;
                        ep.extract(usize::MAX)?;
                    }
                    send.push(t.elapsed().as_nanos() as f64 / (n / 4) as f64);
                    expected += n / 4;
                }
                if want("fn") {
                    let t = Instant::now();
                    for _ in 0..n / 4 {
                        ep.send(me, noop_fn, data)?;
                        ep.extract(usize::MAX)?;
                    }
                    send_fn.push(t.elapsed().as_nanos() as f64 / (n / 4) as f64);
                    expected += n / 4;
                }
            }
            // Bursts of 32 (the credit window): per-message cost as a
            // streaming receiver sees it, without the per-call overhead.
            if args.only.as_deref() == Some("fn-burst") {
                for _ in 0..args.runs {
                    let t = Instant::now();
                    for _ in 0..n / 128 {
                        for _ in 0..32 {
                            ep.send(me, noop_fn, data)?;
                        }
                        ep.extract(usize::MAX)?;
                    }
                    let sent = (n / 128) * 32;
                    burst.push(t.elapsed().as_nanos() as f64 / sent.max(1) as f64);
                    expected += sent;
                }
            }
            assert_eq!(count.get(), expected, "every message handled once");
            if want("empty") {
                println!("empty extract           {:8.2} ns", med(empty));
            }
            if want("async") {
                println!(
                    "self-send {} B + extract {:8.2} ns (async handler)",
                    args.size,
                    med(send)
                );
            }
            if args.only.as_deref() == Some("fn-burst") {
                println!(
                    "self-send {} B, bursts of 32 {:8.2} ns per message (plain-function handler)",
                    args.size,
                    med(burst)
                );
            }
            if want("fn") {
                println!(
                    "self-send {} B + extract {:8.2} ns (plain-function handler)",
                    args.size,
                    med(send_fn)
                );
            }
            ep.close()?;
            Ok(())
        },
    )?;
    Ok(())
}
