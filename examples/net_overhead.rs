//! Cost of the empty poll of the unified loop: `extract` with nothing
//! arrived, on a rank that polls shared memory alone, and shared memory
//! plus network rings (HPVM §4: parity of polling costs is what lets
//! the engine poll every transport in turn).
//!
//! `target/release/examples/net_overhead [--iters N] [--runs R]`
//!
//! Layouts, all ranks as threads of this process (the others sleep):
//! - `shm, 1 rank`: one receive queue;
//! - `shm, 2 ranks` / `shm, 4 ranks`: two / four receive queues;
//! - `shm 2 + tcp 2`: 4 ranks as 2 "hosts" of 2 (host identities set per
//!   rank, rendezvous on the loopback): rank 0 polls 2 shm queues and the
//!   rings of its 2 TCP peers;
//! - `tcp 3 (forced)`: 4 ranks, `FASTMSG_NET=tcp`: 1 shm queue (itself) and
//!   3 rings;
//! - `ofi 3 (forced)`: the same with `FASTMSG_NET=ofi` (libfabric, provider
//!   `FI_PROVIDER` or `tcp;ofi_rxm`; skipped with a note in a build without
//!   the `ofi` feature): 3 rings, and the provider's progress every few
//!   empty polls (manual progress).

use clap::Parser;
use fastmsg::threads;
use fastmsg::{NetMode, Rank, WaitPolicy};
use std::cell::Cell;
use std::net::TcpListener;
use std::rc::Rc;
use std::time::Instant;

#[derive(Parser, Debug)]
struct Args {
    /// Empty extracts per measurement.
    #[arg(long, default_value_t = 5_000_000)]
    iters: u64,
    /// Repetitions (median reported).
    #[arg(long, default_value_t = 7)]
    runs: usize,
}

fn med(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

#[derive(Clone, Copy, PartialEq)]
enum Layout {
    Shm1,
    Shm2,
    Shm4,
    ShmTcp,
    TcpForced,
    OfiForced,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn measure(layout: Layout, args: &Args) -> Result<f64, Box<dyn std::error::Error>> {
    let ranks = match layout {
        Layout::Shm1 => 1,
        Layout::Shm2 => 2,
        Layout::Shm4 => 4,
        Layout::ShmTcp | Layout::TcpForced | Layout::OfiForced => 4,
    };
    let root = format!("127.0.0.1:{}", free_port());
    let out = threads::run(
        ranks,
        |c| {
            c.wait = WaitPolicy::Sleep;
            c.net.secret = Some("overhead".into());
            match layout {
                Layout::ShmTcp => {
                    c.net.root = Some(root.clone());
                    c.job.host = format!("h{}", c.job.rank.0 / 2);
                }
                Layout::TcpForced => {
                    c.net.mode = NetMode::named("tcp").expect("a provider of every build")
                }
                Layout::OfiForced => {
                    c.net.mode = NetMode::named("ofi").expect("a provider of every build")
                }
                _ => {}
            }
        },
        |mut b| {
            let stop = Rc::new(Cell::new(false));
            let s = stop.clone();
            let stop_h = b.register_fn("stop", move |_c, _p| {
                s.set(true);
                Ok(())
            });
            let mut ep = b.start()?;
            let mut ns = Vec::new();
            if ep.rank() == Rank(0) {
                let n = args.iters;
                for _ in 0..args.runs {
                    let t = Instant::now();
                    for _ in 0..n {
                        std::hint::black_box(ep.extract(usize::MAX)?);
                    }
                    ns.push(t.elapsed().as_nanos() as f64 / n as f64);
                }
                for r in 1..ep.size() {
                    ep.send(Rank(r), stop_h, &[])?;
                }
            } else {
                ep.wait_until(|| stop.get())?;
            }
            ep.close()?;
            Ok(ns)
        },
    )?;
    Ok(med(out[0].clone()))
}

fn main() -> std::process::ExitCode {
    fastmsg_examples::exit_report(run())
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    println!(
        "# empty extract (ns, median of {} runs of {} calls)",
        args.runs, args.iters
    );
    println!("# ratios: against shm alone with the same number of polled words (4)");
    let mut base = 0.0;
    for (layout, name) in [
        (Layout::Shm1, "shm, 1 rank (1 queue)"),
        (Layout::Shm2, "shm, 2 ranks (2 queues)"),
        (Layout::Shm4, "shm, 4 ranks (4 queues)"),
        (Layout::ShmTcp, "shm 2 queues + tcp 2 rings"),
        (Layout::TcpForced, "shm 1 queue + tcp 3 rings (forced)"),
        (Layout::OfiForced, "shm 1 queue + ofi 3 rings (forced)"),
    ] {
        let ns = match measure(layout, &args) {
            Ok(ns) => ns,
            Err(e) if layout == Layout::OfiForced => {
                println!("{name:<36} skipped: {e}");
                continue;
            }
            Err(e) => return Err(e),
        };
        if layout == Layout::Shm4 {
            base = ns;
        }
        let ratio = if base > 0.0
            && matches!(
                layout,
                Layout::ShmTcp | Layout::TcpForced | Layout::OfiForced
            ) {
            format!("{:.2}x shm 4 ranks", ns / base)
        } else {
            String::new()
        };
        println!("{name:<36} {ns:8.2} ns  {ratio}");
    }
    Ok(())
}
