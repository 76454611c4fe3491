//! Running fastmsg's measurements: the `pingpong` example under `fmrun`
//! (latency, bandwidth, message rate; its `--json` lines are parsed here)
//! and, in this process, the cost of an empty `extract`.

use crate::child::{self, ChildRunError};
use crate::stats::median;
use fastmsg::threads;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The built programs of the measured tree.
#[derive(Debug, Clone)]
pub struct Programs {
    /// `target/release/fmrun`.
    pub fmrun: PathBuf,
    /// `target/release/examples/pingpong`.
    pub pingpong: PathBuf,
}

impl Programs {
    /// The release programs under `target` (a cargo target directory).
    pub fn in_target(target: &Path) -> Programs {
        Programs {
            fmrun: target.join("release/fmrun"),
            pingpong: target.join("release/examples/pingpong"),
        }
    }
}

/// One `pingpong --json` line.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct PingpongPoint {
    /// Message size, bytes.
    pub size: usize,
    /// One-way latency p50, ns (null when latency was skipped).
    pub one_way_ns_p50: Option<f64>,
    /// One-way latency p99, ns.
    pub one_way_ns_p99: Option<f64>,
    /// One-way latency, mean per run, median over runs, ns.
    pub one_way_ns_mean: Option<f64>,
    /// Streamed bandwidth, MB/s (1e6 B/s).
    pub bandwidth_mb_s: f64,
    /// Windowed message rate, million messages per second (absent in
    /// older builds of the example).
    #[serde(default)]
    pub msg_rate_m_s: Option<f64>,
}

/// How to run `pingpong`: which transport set-up (environment and `fmrun`
/// options), which sizes, how many repetitions.
#[derive(Debug, Clone)]
pub struct PingpongRun<'a> {
    /// Extra `fmrun` options (e.g. `--wait spin`).
    pub fmrun_args: &'a [&'a str],
    /// Extra environment (e.g. `FASTMSG_COPY=plain`).
    pub env: Vec<(String, String)>,
    /// Sizes to measure.
    pub sizes: Vec<usize>,
    /// `--runs` (median over runs inside the program).
    pub runs: u32,
    /// `--scale` for iteration counts.
    pub scale: f64,
    /// Skip latency, measure bandwidth and rate only.
    pub bandwidth_only: bool,
    /// Pin rank i to CPU i (`taskset`), like Open MPI's
    /// `--bind-to core`.
    pub pin: bool,
}

/// Run `pingpong` and parse its lines.
///
/// # Errors
/// [`ChildRunError`] if it failed, ran too long or printed no JSON line.
pub fn pingpong(
    p: &Programs,
    run: &PingpongRun<'_>,
    log: &Path,
) -> Result<Vec<PingpongPoint>, ChildRunError> {
    let mut c = Command::new(&p.fmrun);
    let max = run.sizes.iter().copied().max().unwrap_or(0).max(1);
    let sizes: Vec<String> = run.sizes.iter().map(usize::to_string).collect();
    c.args(["-n", "2"]).args(run.fmrun_args);
    if run.pin {
        // Rank i on CPU i (mod CPUs), as `mpirun --bind-to core` places
        // the Open MPI ranks; fmrun gives each rank FASTMSG_RANK.
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        c.args([
            "/bin/sh",
            "-c",
            &format!("exec taskset -c $((FASTMSG_RANK % {cpus})) \"$0\" \"$@\""),
        ]);
    }
    c.arg(&p.pingpong)
        .args([
            "--json",
            "--max-size",
            &max.to_string(),
            "--sizes",
            &sizes.join(","),
        ])
        .args([
            "--runs",
            &run.runs.to_string(),
            "--scale",
            &run.scale.to_string(),
        ]);
    if run.bandwidth_only {
        c.arg("--no-latency");
    }
    for (k, v) in &run.env {
        c.env(k, v);
    }
    let out = child::run(c, Duration::from_secs(900), log)?;
    let pts: Vec<PingpongPoint> = out
        .lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    if pts.is_empty() {
        return Err(ChildRunError::Failed {
            prog: "pingpong".to_owned(),
            status: "no JSON line in its output".to_owned(),
            log: log.display().to_string(),
        });
    }
    Ok(pts)
}

/// A transport set-up for the in-process empty-extract measurement.
#[derive(Debug, Clone, Copy)]
pub struct ExtractSetup {
    /// Name in the report (the transports the endpoint polls).
    pub name: &'static str,
    /// Number of transports the endpoint polls with this set-up.
    pub transports: u32,
    /// Adjusts the rank's configuration.
    pub configure: fn(&mut fastmsg::Config),
}

/// ns per empty `extract` on a 1-rank endpoint (threads bootstrap), median
/// of `runs` runs of `iters` calls.
///
/// # Errors
/// The endpoint could not start.
pub fn empty_extract(
    setup: &ExtractSetup,
    iters: u64,
    runs: u32,
) -> Result<f64, fastmsg::threads::RankError> {
    let v = threads::run(1, setup.configure, |b| {
        let mut ep = b.start()?;
        let mut per = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            // Sum one field rather than `black_box` the whole result: the
            // copy of the returned struct would add a store-forwarding
            // stall (~8 ns here) that is the harness's, not extract's.
            let mut got = 0usize;
            for _ in 0..iters {
                got += ep.extract(usize::MAX)?.fragments;
            }
            std::hint::black_box(got);
            per.push(t.elapsed().as_nanos() as f64 / iters as f64);
        }
        ep.close()?;
        Ok(median(&per).unwrap_or(f64::NAN))
    })?;
    Ok(v[0])
}
