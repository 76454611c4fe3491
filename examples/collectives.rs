//! Barrier and allreduce latency of `fastmsg-handlers`, by algorithm, and
//! (`--rooted`) of a broadcast followed by a reduce.
//!
//! `fmrun -n N target/release/examples/collectives [--json] [--iters 10000] [--runs 3] [--rooted 1,128]`
//!
//! The seeds' method (and the Open MPI anchor's, `mpi_bench coll`): each
//! measurement is `iters` back-to-back operations after 100 warm-up ones;
//! a rank's figure is its average time per operation; the run's figure is
//! the largest over ranks; the median over `runs` runs is reported.
//! Allreduce is SUM over 1 f64 (8 bytes) and over 128 f64 (1 KiB).
//! `--rooted K,…` adds, for each K, a binomial broadcast of K f64 from
//! rank 0 followed by a SUM reduce of them to rank 0 (op `bcast+reduce`:
//! one operation is the pair, which the root cannot run ahead of).
//! `--json` prints one object per line: `op`, `algo`, `ranks`, `bytes`,
//! `iters`, `latency_us`, `runs_us`, `wait`. Across hosts (`fmrun --size
//! --rank-offset --root …` on each) the flat SMP algorithms, which need
//! every rank on one host, are left out.

use clap::Parser;
use fastmsg::{Endpoint, EndpointBuilder, Rank};
use fastmsg_examples::{median, Clock};
use fastmsg_handlers::{
    AllreduceAlgo, BarrierAlgo, CollConfig, Collectives, Op, SMP_ALLREDUCE_MAX_BYTES,
};

#[derive(Parser, Debug)]
struct Args {
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    /// Operations per measurement.
    #[arg(long, default_value_t = 10_000)]
    iters: usize,
    /// Warm-up operations before each measurement.
    #[arg(long, default_value_t = 100)]
    warmup: usize,
    /// Repetitions (median reported).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Barrier algorithms (comma-separated; `all` for every one).
    #[arg(long, default_value = "auto,all")]
    barrier: String,
    /// Allreduce algorithms (comma-separated; `all` for every one).
    #[arg(long, default_value = "auto,all")]
    allreduce: String,
    /// Barriers run before the first measurement.
    #[arg(long, default_value_t = 3000)]
    settle: usize,
    /// Allreduce sizes in f64 elements (comma-separated).
    #[arg(long, default_value = "1,128")]
    elems: String,
    /// Broadcast-then-reduce sizes in f64 elements (comma-separated; none
    /// by default).
    #[arg(long, default_value = "")]
    rooted: String,
}

fn list<T: std::str::FromStr<Err = String> + Copy>(s: &str, all: &[T]) -> Result<Vec<T>, String> {
    let mut v = Vec::new();
    for w in s.split(',').filter(|w| !w.is_empty()) {
        if w == "all" {
            v.extend_from_slice(all);
        } else {
            v.push(w.parse()?);
        }
    }
    Ok(v)
}

/// The largest of every rank's figure (rank 0 gets it).
fn max_over_ranks(
    coll: &Collectives,
    ep: &mut Endpoint,
    mine: f64,
) -> Result<f64, Box<dyn std::error::Error>> {
    let mut x = [mine];
    coll.allreduce_with(ep, &mut x, Op::Max, AllreduceAlgo::RecursiveDoubling)?;
    Ok(x[0])
}

fn report(
    args: &Args,
    rank0: bool,
    op: &str,
    algo: &str,
    ranks: u32,
    bytes: usize,
    runs: &mut [f64],
) {
    if !rank0 {
        return;
    }
    let wait = std::env::var("FASTMSG_WAIT").unwrap_or_else(|_| "auto".into());
    let all: Vec<String> = runs.iter().map(|r| format!("{r:.3}")).collect();
    let med = median(runs);
    if args.json {
        println!(
            "{{\"op\":\"{op}\",\"algo\":\"{algo}\",\"ranks\":{ranks},\"bytes\":{bytes},\"iters\":{},\"latency_us\":{med:.3},\"runs_us\":[{}],\"wait\":\"{wait}\"}}",
            args.iters,
            all.join(",")
        );
    } else {
        println!(
            "{op:<10} {algo:<20} ranks={ranks:<3} bytes={bytes:<5} latency_us={med:>9.3}   runs: {}",
            all.join(" ")
        );
    }
}

fn main() -> std::process::ExitCode {
    fastmsg_examples::exit_report(run())
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let barriers = list(&args.barrier, &BarrierAlgo::ALL)?;
    let allreduces = list(&args.allreduce, &AllreduceAlgo::ALL)?;
    let elems: Vec<usize> = args
        .elems
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let mut b = EndpointBuilder::from_env()?;
    let coll = Collectives::register(&mut b, CollConfig::default());
    let mut ep = b.start()?;
    let n = ep.size();
    let rank0 = ep.rank().0 == 0;
    let clock = Clock::new();
    if rank0 && !args.json {
        println!(
            "# fastmsg-handlers collectives, {n} ranks, {} iterations after {} warm-up, max over ranks, median of {} runs",
            args.iters, args.warmup, args.runs
        );
    }
    // Let the scheduler settle (process placement, frequency) before the
    // first measurement, which otherwise pays for it.
    for _ in 0..args.settle {
        coll.barrier_with(&mut ep, BarrierAlgo::Dissemination)?;
    }
    // The flat SMP algorithms need every rank on one host.
    let one_host = ep.local_ranks().len() == n as usize;
    for algo in barriers {
        if algo == BarrierAlgo::Smp && !one_host {
            continue;
        }
        let name = match algo {
            BarrierAlgo::Auto => format!("auto={}", coll.auto_barrier(&mut ep)?.name()),
            a => a.name().to_owned(),
        };
        let mut runs = Vec::new();
        for _ in 0..args.runs {
            coll.barrier_with(&mut ep, BarrierAlgo::Dissemination)?;
            for _ in 0..args.warmup {
                coll.barrier_with(&mut ep, algo)?;
            }
            let t0 = clock.now();
            for _ in 0..args.iters {
                coll.barrier_with(&mut ep, algo)?;
            }
            let mine = clock.ns(clock.now() - t0) / 1e3 / args.iters as f64;
            runs.push(max_over_ranks(&coll, &mut ep, mine)?);
        }
        report(&args, rank0, "barrier", &name, n, 0, &mut runs);
    }
    for &k in &elems {
        for &algo in &allreduces {
            let bytes = 8 * k;
            let name = match algo {
                AllreduceAlgo::Auto => {
                    format!("auto={}", coll.auto_allreduce(&mut ep, bytes)?.name())
                }
                a => a.name().to_owned(),
            };
            if algo.is_one_sided() && bytes > SMP_ALLREDUCE_MAX_BYTES
                || algo == AllreduceAlgo::Smp && !one_host
            {
                continue;
            }
            let input = vec![f64::from(ep.rank().0 + 1); k];
            let mut data = input.clone();
            let mut runs = Vec::new();
            for _ in 0..args.runs {
                coll.barrier_with(&mut ep, BarrierAlgo::Dissemination)?;
                for _ in 0..args.warmup {
                    data.copy_from_slice(&input);
                    coll.allreduce_with(&mut ep, &mut data, Op::Sum, algo)?;
                }
                let t0 = clock.now();
                for _ in 0..args.iters {
                    data.copy_from_slice(&input);
                    coll.allreduce_with(&mut ep, &mut data, Op::Sum, algo)?;
                }
                let mine = clock.ns(clock.now() - t0) / 1e3 / args.iters as f64;
                let want = f64::from(n) * f64::from(n + 1) / 2.0;
                if data.iter().any(|&x| x != want) {
                    return Err(format!(
                        "allreduce {} gave {} instead of {want}",
                        algo.name(),
                        data[0]
                    )
                    .into());
                }
                runs.push(max_over_ranks(&coll, &mut ep, mine)?);
            }
            report(&args, rank0, "allreduce", &name, n, bytes, &mut runs);
        }
    }
    let rooted: Vec<usize> = args
        .rooted
        .split(',')
        .filter(|w| !w.is_empty())
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    for k in rooted {
        let mut runs = Vec::new();
        let input = vec![1.0f64; k];
        let mut data = input.clone();
        for _ in 0..args.runs {
            coll.barrier_with(&mut ep, BarrierAlgo::Dissemination)?;
            for _ in 0..args.warmup.max(1) {
                data.copy_from_slice(&input);
                coll.bcast(&mut ep, &mut data, Rank(0))?;
                coll.reduce(&mut ep, &mut data, Op::Sum, Rank(0))?;
            }
            let want = if rank0 { f64::from(n) } else { 1.0 };
            if data.iter().any(|&x| x != want) {
                return Err(format!("bcast+reduce gave {} instead of {want}", data[0]).into());
            }
            let t0 = clock.now();
            for _ in 0..args.iters {
                data.copy_from_slice(&input);
                coll.bcast(&mut ep, &mut data, Rank(0))?;
                coll.reduce(&mut ep, &mut data, Op::Sum, Rank(0))?;
            }
            let mine = clock.ns(clock.now() - t0) / 1e3 / args.iters as f64;
            runs.push(max_over_ranks(&coll, &mut ep, mine)?);
        }
        report(
            &args,
            rank0,
            "bcast+reduce",
            "binomial",
            n,
            8 * k,
            &mut runs,
        );
    }
    ep.close()?;
    Ok(())
}
