//! Software overhead of the engine, without cross-core traffic: one rank
//! (as a thread), sending to itself over shared memory.
//!
//! `target/release/examples/overhead [--iters N]` prints ns per empty
//! `extract`, and ns per 0-byte self-send + extract for each handler kind.

use clap::Parser;
use fastmsg::bootstrap::threads;
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
    /// Only measure the plain-function path (for instruction counts).
    #[arg(long)]
    fn_only: bool,
}

fn med(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
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
            let mut ep = b.start()?;
            let me = Rank(0);
            let n = args.iters;
            let mut empty = Vec::new();
            let mut send = Vec::new();
            let mut send_fn = Vec::new();
            for _ in 0..args.runs {
                if !args.fn_only {
                    let t = Instant::now();
                    for _ in 0..n {
                        std::hint::black_box(ep.extract(usize::MAX)?);
                    }
                    empty.push(t.elapsed().as_nanos() as f64 / n as f64);
                    let t = Instant::now();
                    for _ in 0..n / 4 {
                        ep.send(me, noop, &[])?;
                        ep.extract(usize::MAX)?;
                    }
                    send.push(t.elapsed().as_nanos() as f64 / (n / 4) as f64);
                }
                let t = Instant::now();
                for _ in 0..n / 4 {
                    ep.send(me, noop_fn, &[])?;
                    ep.extract(usize::MAX)?;
                }
                send_fn.push(t.elapsed().as_nanos() as f64 / (n / 4) as f64);
            }
            let kinds = if args.fn_only { 1 } else { 2 };
            assert_eq!(count.get(), kinds * args.runs as u64 * (n / 4));
            if !args.fn_only {
                println!("empty extract           {:8.2} ns", med(empty));
                println!(
                    "self-send 0 B + extract {:8.2} ns (async handler)",
                    med(send)
                );
            }
            println!(
                "self-send 0 B + extract {:8.2} ns (plain-function handler)",
                med(send_fn)
            );
            ep.close()?;
            Ok(())
        },
    )?;
    Ok(())
}
