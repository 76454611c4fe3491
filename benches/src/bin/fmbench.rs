//! `fmbench`: fastmsg's benchmark suite in one command.
//!
//! ```text
//! cargo run --release -p fastmsg-benches --bin fmbench            # full suite (70–100 s here)
//! cargo run --release -p fastmsg-benches --bin fmbench -- --quick # about a minute
//! cargo run --release -p fastmsg-benches --bin fmbench -- tune-copy
//! cargo run --release -p fastmsg-benches --bin fmbench -- bale   # Bale kernels beside MPI
//! cargo run --release -p fastmsg-benches --bin fmbench -- ucx    # just UCX's ucx_perftest cases
//! cargo run --release -p fastmsg-benches --bin fmbench -- busy   # wait policies beside CPU hogs
//! cargo run --release -p fastmsg-benches --bin fmbench -- baseline lat  # one C comparison program
//! ```
//!
//! The comparison programs are C sources in `benches/c/`, built into
//! `<target>/fmbench-c/` when stale (`*_mpi.c` with `mpicc`, only where
//! Open MPI is installed: `apt install openmpi-bin libopenmpi-dev`; UCX's
//! `ucx_perftest` comes with `apt install ucx-utils`).
//!
//! The suite builds `fmrun` and the `pingpong` example (release), tunes the
//! frame copy, then runs rounds of: fastmsg ping-pong/bandwidth/message
//! rate, Open MPI's (when Open MPI is installed: fmbench builds its C
//! comparison programs of `benches/c/` with `mpicc`), UCX's
//! (`ucx_perftest` over shared memory, when installed; else a note), the raw
//! cache-line ping-pong, the empty `extract`, the copy strategies, and the
//! collectives; it writes `bench-results/<profile>-<time>/` with CSV, SVG
//! plots, `report.md`, and `latest` pointing at it.

use clap::{Parser, Subcommand, ValueEnum};
use fastmsg_benches::{copy, plot, report::human, suite};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    about = "fastmsg's benchmark suite: fastmsg beside Open MPI, with CSV, SVG plots and a Markdown report"
)]
struct Args {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// The quick profile (one round, fewer sizes and iterations): a check
    /// that everything runs, not figures to quote.
    #[arg(long)]
    quick: bool,
    /// Rounds (default: 3 full, 1 quick).
    #[arg(long)]
    rounds: Option<u32>,
    /// Results directory (a timestamped folder is made inside).
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
    /// Do not build fmrun and pingpong first.
    #[arg(long)]
    no_build: bool,
    /// Do not measure Open MPI even if it is installed.
    #[arg(long)]
    no_mpi: bool,
    /// Do not measure UCX (`ucx_perftest`) even if it is installed.
    #[arg(long)]
    no_ucx: bool,
    /// Skip the copy-strategy tuning and comparison.
    #[arg(long)]
    no_copy: bool,
    /// Also copy the report and the plots into `docs/bench/` (what
    /// BENCHMARKS.md shows).
    #[arg(long)]
    publish: bool,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Measure the frame-copy strategies, store the chosen plan where
    /// fastmsg reads it, and print the measurements.
    TuneCopy,
    /// The Bale kernels written the natural way (examples `histo`, `ig`,
    /// `permute`, `transpose`) beside the aggregated MPI programs
    /// (`benches/c/histo_mpi.c`, `ig_mpi.c`, `permute_mpi.c`,
    /// `transpose_mpi.c`), interleaved; medians and ratios; and `agglat`.
    Bale {
        /// Rank counts (comma-separated).
        #[arg(long, default_value = "2,4,8", value_delimiter = ',')]
        ranks: Vec<u32>,
        /// Runs per kernel, rank count and side.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Wait policy of the fastmsg runs (`fmrun --wait`; default: the
        /// engine's default, `auto`).
        #[arg(long)]
        wait: Option<String>,
    },
    /// Only UCX's `ucx_perftest` cases (as the suite runs them), printed:
    /// a check that they run, without the rest of the suite.
    Ucx {
        /// Rounds.
        #[arg(long, default_value_t = 1)]
        rounds: u32,
        /// Scale of the iteration counts.
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
    },
    /// The wait policies with one CPU-bound process per CPU beside a
    /// 2-rank ping-pong and a fine-grained histogram, and without:
    /// `auto` against `spin`, `yield` and `sleep`, interleaved rounds,
    /// medians.
    Busy {
        /// Rounds (each runs every case once).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Scale of the programs (1.0: 20,000 round trips, 2^18 updates
        /// per rank). The default, 16 (2^22 updates), makes the histogram
        /// last tens of milliseconds; at 0.5 it lasted 0.8 ms and one
        /// burner's time slice decided it (0.8 or 32 ms).
        #[arg(long, default_value_t = 16.0)]
        scale: f64,
        /// Niceness of the ranks and burners (negative needs root: on a
        /// shared machine, makes the burners the only competition).
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        nice: i32,
        /// Seconds one run may last; a run past it is killed, recorded as
        /// timed out in the table, and the other cases go on.
        #[arg(long, default_value_t = 180.0)]
        limit_secs: f64,
    },
    /// A CPU-bound process for `fmbench busy` (spins, then exits).
    #[command(hide = true)]
    Burn {
        /// Seconds to spin.
        #[arg(long, default_value_t = 60)]
        secs: u64,
    },
    /// One comparison program of `benches/c/` alone (built first when
    /// stale), its output printed: a figure to set beside a fastmsg one
    /// measured right before or after.
    Baseline {
        /// What to run.
        #[arg(value_enum)]
        what: Baseline,
        /// Ranks for `coll`, `over` and the Bale kernels (default: 4 for
        /// `over`, else 2).
        #[arg(long)]
        ranks: Option<u32>,
        /// Repetitions, the printed figure being their median (the Bale
        /// kernels: `--reps`, one line each; default 5, 3 for `tcp`,
        /// `over`, 1 for the Bale kernels).
        #[arg(long)]
        runs: Option<u32>,
        /// More options for the program, after `--` (e.g. `-- --log-updates
        /// 20` for `histo`).
        #[arg(last = true)]
        extra: Vec<String>,
    },
    /// Measure the empty `extract` for each transport set-up.
    Extract {
        /// Calls per run.
        #[arg(long, default_value_t = 20_000_000)]
        iters: u64,
    },
}

/// The comparison programs `fmbench baseline` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Baseline {
    /// Open MPI ping-pong latency, 2 ranks bound to cores.
    Lat,
    /// Open MPI windowed bandwidth and (at 0 B) message rate.
    Bw,
    /// Open MPI barrier and allreduce (`--ranks`).
    Coll,
    /// Latency, bandwidth and collectives.
    All,
    /// `all` over TCP loopback (`--mca pml ob1 --mca btl self,tcp`).
    Tcp,
    /// Barrier and allreduce with more ranks than cores (`--ranks`,
    /// default 4; ranks yield when idle).
    Over,
    /// The raw cache-line ping-pong between two processes, one and two
    /// lines (the physical limit).
    Phys,
    /// Single-thread memcpy bandwidth, 64 B to 4 MiB.
    Memcpy,
    /// Bale histogram, aggregated MPI (`--ranks`).
    Histo,
    /// Bale index-gather, aggregated MPI (`--ranks`).
    Ig,
    /// Bale random permutation, aggregated MPI (`--ranks`).
    Permute,
    /// Bale sparse-matrix transpose, aggregated MPI (`--ranks`).
    Transpose,
}

/// Print an error as a person reads it (`Display`, then each cause not
/// already in that text) and exit 1; `fn main() -> Result` prints `Debug`.
fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            let mut text = e.to_string();
            let mut cause = e.source();
            while let Some(c) = cause {
                let s = c.to_string();
                if !text.contains(&s) {
                    text = format!("{text}: {s}");
                }
                cause = c.source();
            }
            eprintln!("fmbench: error: {text}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    if let Some(Cmd::TuneCopy) = args.cmd {
        use std::io::Write as _;
        let plan = copy::tune::tune();
        let path = copy::store::plan_path()?;
        copy::store::store(&path, &plan)?;
        // Written with `?`, not `println!`, so a closed pipe is an error,
        // not a panic.
        let mut o = std::io::stdout().lock();
        writeln!(
            o,
            "{:>8} {:>11} {:>12} {:>12}",
            "chunk", "plain GB/s", "vector GB/s", "stream GB/s"
        )?;
        for r in &plan.samples {
            writeln!(
                o,
                "{:>8} {:>11.2} {:>12.2} {:>12.2}",
                human(r.chunk),
                r.plain_gb_s,
                r.vector_gb_s,
                r.stream_gb_s
            )?;
        }
        let from = if plan.threshold == usize::MAX {
            "never".to_owned()
        } else {
            human(plan.threshold)
        };
        writeln!(
            o,
            "plan: {} from {from}\nstored in {}",
            plan.strategy.name(),
            path.display()
        )?;
        return Ok(());
    }
    if let Some(Cmd::Ucx { rounds, scale }) = args.cmd {
        return ucx_only(rounds, scale);
    }
    if let Some(Cmd::Baseline {
        what,
        ranks,
        runs,
        extra,
    }) = &args.cmd
    {
        return baseline(*what, *ranks, *runs, extra);
    }
    if let Some(Cmd::Extract { iters }) = args.cmd {
        for setup in suite::EXTRACT {
            let ns = fastmsg_benches::fastmsg_run::empty_extract(setup, iters, 5)?;
            println!(
                "empty extract, {}: {ns:.2} ns (median of 5 runs of {iters})",
                setup.name
            );
        }
        return Ok(());
    }
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let repo = repo.canonicalize().unwrap_or(repo);
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo.join("target"), PathBuf::from);
    if let Some(Cmd::Burn { secs }) = args.cmd {
        fastmsg_benches::busy::burn(secs);
        return Ok(());
    }
    if let Some(Cmd::Busy {
        rounds,
        scale,
        nice,
        limit_secs,
    }) = args.cmd
    {
        let limit = std::time::Duration::try_from_secs_f64(limit_secs)
            .map_err(|e| format!("--limit-secs {limit_secs}: {e}"))?;
        return busy(
            &repo,
            &target,
            &args.out,
            (rounds, scale, nice, limit),
            !args.no_build,
        );
    }
    if let Some(Cmd::Bale { ranks, runs, wait }) = &args.cmd {
        let o = BaleArgs {
            ranks,
            runs: *runs,
            wait: wait.clone(),
            build: !args.no_build,
            mpi: !args.no_mpi,
        };
        return bale(&repo, &target, o);
    }
    let profile = if args.quick {
        suite::Profile::quick()
    } else {
        suite::Profile::full()
    };
    let stamp = std::process::Command::new("date")
        .arg("-u")
        .arg("+%Y%m%d-%H%M%S")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "run".to_owned());
    let out_root = if args.out.is_absolute() {
        args.out.clone()
    } else {
        repo.join(&args.out)
    };
    let out = out_root.join(format!("{}-{stamp}", profile.name));
    let opts = suite::Options {
        repo: repo.clone(),
        target,
        out: out.clone(),
        build: !args.no_build,
        mpi: !args.no_mpi,
        ucx: !args.no_ucx,
        copy: !args.no_copy,
        rounds: args.rounds,
    };
    eprintln!(
        "fmbench: {} profile, results in {}",
        profile.name,
        out.display()
    );
    let res = suite::run(&profile, &opts)?;
    res.write_csv(&out)?;
    std::fs::write(
        out.join("machine.json"),
        serde_json::to_string_pretty(&res.machine)?,
    )?;
    let md = res.markdown();
    std::fs::write(out.join("report.md"), &md)?;
    match plot::write_all(&res, &out) {
        Ok(files) => eprintln!(
            "plots: {}",
            files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Err(e) => eprintln!("fmbench: {e}"),
    }
    if args.publish {
        let docs = repo.join("docs/bench");
        std::fs::create_dir_all(&docs)?;
        for f in [
            "report.md",
            "latency.svg",
            "bandwidth.svg",
            "copy.svg",
            "summary.csv",
            "scalars.csv",
        ] {
            if out.join(f).is_file() {
                std::fs::copy(out.join(f), docs.join(f))?;
            }
        }
        eprintln!("fmbench: published to {}", docs.display());
    }
    let latest = out_root.join("latest");
    let _ = std::fs::remove_file(&latest);
    #[cfg(unix)]
    let _ = std::os::unix::fs::symlink(out.file_name().unwrap_or_default(), &latest);
    println!("{md}");
    eprintln!("fmbench: wrote {}", out.display());
    if !res.failures.is_empty() {
        return Err(format!("{} step(s) failed; see report.md", res.failures.len()).into());
    }
    Ok(())
}

/// `fmbench baseline`: build the C programs, run the chosen one (or two,
/// for `phys`) with its output passed through.
fn baseline(
    what: Baseline,
    ranks: Option<u32>,
    runs: Option<u32>,
    extra: &[String],
) -> Result<(), Box<dyn std::error::Error>> {
    use fastmsg_benches::anchor::{bale_program, mpirun, MpiLaunch, BENCH_MPI, CACHELINE, MEMCPY};
    use std::process::Command;
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo.join("target"), PathBuf::from);
    let progs = fastmsg_benches::cbuild::CPrograms::build(&target)?;
    let mpi = |name: &str| {
        progs
            .mpi_program(name)
            .map_err(|why| format!("fmbench baseline: {why}"))
    };
    let runs_or = |d: u32| runs.unwrap_or(d).max(1).to_string();
    let np = ranks
        .unwrap_or(if what == Baseline::Over { 4 } else { 2 })
        .max(1);
    let mut cmds: Vec<Command> = Vec::new();
    match what {
        Baseline::Lat | Baseline::Bw | Baseline::All => {
            let mode = match what {
                Baseline::Lat => "lat",
                Baseline::Bw => "bw",
                _ => "all",
            };
            let mut c = mpirun(2, MpiLaunch::Pinned, &mpi(BENCH_MPI)?);
            c.args([mode, &runs_or(5)]);
            cmds.push(c);
        }
        Baseline::Tcp => {
            let mut c = mpirun(2, MpiLaunch::Tcp, &mpi(BENCH_MPI)?);
            c.args(["all", &runs_or(3)]);
            cmds.push(c);
        }
        Baseline::Coll | Baseline::Over => {
            let mut c = mpirun(np, MpiLaunch::for_ranks(np), &mpi(BENCH_MPI)?);
            let default_runs = if what == Baseline::Over { 3 } else { 5 };
            c.args(["coll", &runs_or(default_runs), "10000"]);
            cmds.push(c);
        }
        Baseline::Histo | Baseline::Ig | Baseline::Permute | Baseline::Transpose => {
            let kernel = match what {
                Baseline::Histo => "histo",
                Baseline::Ig => "ig",
                Baseline::Permute => "permute",
                _ => "transpose",
            };
            let mut c = mpirun(np, MpiLaunch::for_ranks(np), &mpi(&bale_program(kernel))?);
            c.args(["--reps", &runs_or(1)]);
            cmds.push(c);
        }
        Baseline::Phys => {
            let prog = progs.program(CACHELINE)?;
            for lines in ["1", "2"] {
                let mut c = Command::new(&prog);
                c.args(["--iters", "1000000", "--runs", &runs_or(5)])
                    .args(["--lines", lines, "--pause", "1"]);
                cmds.push(c);
            }
        }
        Baseline::Memcpy => {
            let mut c = Command::new(progs.program(MEMCPY)?);
            c.args(["--runs", &runs_or(5), "--ms", "100"]);
            cmds.push(c);
        }
    }
    for mut c in cmds {
        c.args(extra);
        let status = c
            .status()
            .map_err(|e| format!("{}: {e}", c.get_program().to_string_lossy()))?;
        if !status.success() {
            return Err(
                format!("{} ended with {status}", c.get_program().to_string_lossy()).into(),
            );
        }
    }
    Ok(())
}

/// `fmbench ucx`: each case of the suite's UCX list, `rounds` times.
fn ucx_only(rounds: u32, scale: f64) -> Result<(), Box<dyn std::error::Error>> {
    use fastmsg_benches::ucx;
    ucx::ready()?;
    let dir = std::env::temp_dir().join(format!("fmbench-ucx-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    for round in 1..=rounds.max(1) {
        for c in ucx::CASES {
            let log = dir.join(format!("{round}-{}-{}.txt", c.test, c.size));
            let r = ucx::run(c, scale, &log)?;
            if c.is_latency() {
                println!(
                    "round {round}: {} {} B: one-way mean {:.0} ns, p50 {:.0} ns",
                    c.test,
                    c.size,
                    r.avg_us * 1e3,
                    r.p50_us * 1e3
                );
            } else {
                println!(
                    "round {round}: {} {} B: {:.2} M msg/s",
                    c.test,
                    c.size,
                    r.msg_per_s / 1e6
                );
            }
        }
    }
    eprintln!("fmbench: program output in {}", dir.display());
    Ok(())
}

/// `fmbench bale`'s options.
struct BaleArgs<'a> {
    ranks: &'a [u32],
    runs: usize,
    wait: Option<String>,
    build: bool,
    /// Measure the MPI side (not with `--no-mpi`).
    mpi: bool,
}

/// `fmbench bale`: build, run, print the table.
fn bale(
    repo: &std::path::Path,
    target: &std::path::Path,
    a: BaleArgs<'_>,
) -> Result<(), Box<dyn std::error::Error>> {
    use fastmsg_benches::bale;
    let BaleArgs {
        ranks,
        runs,
        wait,
        build,
        mpi,
    } = a;
    if build {
        build_examples(repo, &["histo", "ig", "permute", "transpose", "agglat"])?;
    }
    // Without Open MPI (or with --no-mpi) fastmsg is measured alone, and
    // the table says so with its empty MPI column.
    let anchors = if mpi {
        let anchors = fastmsg_benches::anchor::Anchors::build(target);
        let ready = ["histo", "ig", "permute", "transpose"]
            .iter()
            .try_for_each(|k| {
                anchors
                    .mpi_program(&fastmsg_benches::anchor::bale_program(k))
                    .map(drop)
            });
        match ready {
            Ok(()) => Some(anchors),
            Err(why) => {
                eprintln!("fmbench bale: the MPI side is not measured: {why}");
                None
            }
        }
    } else {
        eprintln!("fmbench bale: --no-mpi: the MPI side is not measured");
        None
    };
    let o = bale::BaleOptions {
        target: target.to_owned(),
        anchors,
        ranks: ranks.to_vec(),
        runs,
        out: repo.join("bench-results/bale"),
        wait,
    };
    let load0 = fastmsg_benches::machine::loadavg();
    let rows = bale::run(&o)?;
    let lat = bale::agglat(&o)?;
    let load1 = fastmsg_benches::machine::loadavg();
    println!("{}", bale::markdown(&rows, Some(lat), (&load0, &load1)));
    Ok(())
}

/// Build `fmrun` and the given examples in release (the `bale` and `busy`
/// subcommands' first step).
fn build_examples(
    repo: &std::path::Path,
    examples: &[&str],
) -> Result<(), Box<dyn std::error::Error>> {
    let mut cmd = std::process::Command::new("cargo");
    cmd.current_dir(repo)
        .args(["build", "--release", "-p", "fastmsg", "--bin", "fmrun"])
        .args(["-p", "fastmsg-examples"]);
    for e in examples {
        cmd.args(["--example", e]);
    }
    if !cmd.status()?.success() {
        return Err("building fmrun and the examples failed".into());
    }
    Ok(())
}

/// `fmbench busy`: build, run, print the table.
fn busy(
    repo: &std::path::Path,
    target: &std::path::Path,
    out: &std::path::Path,
    (rounds, scale, nice, limit): (usize, f64, i32, std::time::Duration),
    build: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    if build {
        build_examples(repo, &["pingpong", "histo", "waves", "demo"])?;
    }
    let load = fastmsg_benches::machine::loadavg();
    let out = if out.is_absolute() {
        out.to_path_buf()
    } else {
        repo.join(out)
    }
    .join("busy");
    let o = fastmsg_benches::busy::BusyOptions {
        target: target.to_path_buf(),
        rounds,
        scale,
        out,
        nice,
        limit,
    };
    let cells = fastmsg_benches::busy::run(&o)?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    use std::io::Write as _;
    write!(
        std::io::stdout().lock(),
        "{}",
        fastmsg_benches::busy::markdown(&cells, cpus, &load, nice, limit)
    )?;
    Ok(())
}
