//! The suite: what is measured, in which order, how often.
//!
//! Everything runs in `rounds`; each round runs every measurement once, so
//! fastmsg and Open MPI are measured side by side, interleaved, under the
//! same background load, and the report takes medians over rounds.
//!
//! Extending it is one entry:
//! - a transport for point-to-point figures: a [`Pt2ptSetup`] in
//!   [`PT2PT`] (the `fmrun` options / environment that select it);
//! - a transport for the empty-extract cost: an [`ExtractSetup`] in
//!   [`EXTRACT`];
//! - a collective: a [`CollEntry`] in [`COLLECTIVES`] naming the
//!   `collectives` example's options that select it; started as `fmrun -n
//!   N target/release/examples/collectives --json --iters I --runs R
//!   OPTIONS`, the example prints one line with `"latency_us":X` (µs per
//!   operation, median over runs of the slowest rank's mean).

use crate::anchor::{Anchors, MpiLaunch};
use crate::child::{self, ChildRunError};
use crate::copy;
use crate::fastmsg_run::{self, ExtractSetup, PingpongRun, Programs};
use crate::machine::Machine;
use crate::report::{Results, Row, Scalar};
use crate::ucx::{self, UcxCase};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A transport set-up measured with `pingpong`.
#[derive(Debug, Clone, Copy)]
pub struct Pt2ptSetup {
    /// Series name in tables and plots.
    pub name: &'static str,
    /// Extra `fmrun` options.
    pub fmrun_args: &'static [&'static str],
    /// Extra environment.
    pub env: &'static [(&'static str, &'static str)],
    /// Pin rank i to CPU i (as Open MPI's `--bind-to core`).
    pub pin: bool,
}

/// Point-to-point set-ups (the network transports join here).
pub const PT2PT: &[Pt2ptSetup] = &[Pt2ptSetup {
    name: "fastmsg shm",
    fmrun_args: &[],
    env: &[],
    pin: true,
}];

/// Set-ups for the empty-extract cost (one per transport mix).
pub const EXTRACT: &[ExtractSetup] = &[ExtractSetup {
    name: "shm",
    transports: 1,
    configure: |_| {},
}];

/// A collective measured against Open MPI's.
#[derive(Debug, Clone, Copy)]
pub struct CollEntry {
    /// `barrier` or `allreduce` (the names `bench_mpi coll` prints).
    pub op: &'static str,
    /// Options of the `collectives` example that measure just this one
    /// with the default (`auto`) algorithm, like Open MPI's own choice.
    pub example_args: &'static [&'static str],
}

/// Collectives (fastmsg's from the `handlers` crate, measured by the
/// `collectives` example; Open MPI's allreduce is of one double).
pub const COLLECTIVES: &[CollEntry] = &[
    CollEntry {
        op: "barrier",
        example_args: &["--barrier", "auto", "--allreduce", ""],
    },
    CollEntry {
        op: "allreduce",
        example_args: &["--barrier", "", "--allreduce", "auto", "--elems", "1"],
    },
];

/// The copy strategies compared with the tuned plan (the default): the
/// label in reports and the `FASTMSG_COPY` value.
pub const COPY_VARIANTS: &[(&str, &str)] = &[
    ("FASTMSG_COPY=plain", "plain"),
    ("FASTMSG_COPY=vector:4096", "vector:4096"),
    ("FASTMSG_COPY=stream:4096", "stream:4096"),
];

/// Plans the suite's tuning step tries on the real path (`pingpong`
/// bandwidth), besides plain.
pub const COPY_CANDIDATES: &[&str] = &["vector:1024", "vector:4096", "stream:4096", "stream:8192"];

/// How much to measure.
#[derive(Debug, Clone)]
pub struct Profile {
    /// `quick` or `full`.
    pub name: &'static str,
    /// Rounds (medians are over rounds).
    pub rounds: u32,
    /// Point-to-point sizes.
    pub sizes: Vec<usize>,
    /// Sizes for the copy-strategy comparison.
    pub copy_sizes: Vec<usize>,
    /// `pingpong --runs`.
    pub runs: u32,
    /// `pingpong --scale`.
    pub scale: f64,
    /// `bench_mpi` runs.
    pub mpi_runs: u32,
    /// Raw ping-pong iterations and runs.
    pub phys: (u32, u32),
    /// Rank counts for collectives.
    pub coll_ranks: Vec<u32>,
    /// Iterations per collective run.
    pub coll_iters: u32,
    /// Empty-extract calls per run.
    pub extract_iters: u64,
}

impl Profile {
    /// The full suite: powers of 2 up to 4 MiB, 3 rounds.
    pub fn full() -> Profile {
        let mut sizes = vec![0];
        sizes.extend((0..=22).map(|k| 1usize << k));
        Profile {
            name: "full",
            rounds: 3,
            sizes,
            copy_sizes: vec![1024, 4096, 16384, 65536, 262_144, 1 << 20],
            runs: 5,
            scale: 1.0,
            mpi_runs: 5,
            phys: (1_000_000, 5),
            coll_ranks: vec![2, 4, 8],
            coll_iters: 10_000,
            extract_iters: 20_000_000,
        }
    }

    /// A quick check (about a minute): powers of 4 up to 1 MiB, 1 round,
    /// fewer iterations.
    pub fn quick() -> Profile {
        Profile {
            name: "quick",
            rounds: 1,
            sizes: vec![0, 8, 64, 1024, 4096, 65536, 1 << 20],
            copy_sizes: vec![65536, 1 << 20],
            runs: 3,
            scale: 0.2,
            mpi_runs: 1,
            phys: (200_000, 3),
            coll_ranks: vec![2],
            coll_iters: 2000,
            extract_iters: 2_000_000,
        }
    }
}

/// Where things are and what to skip.
#[derive(Debug, Clone)]
pub struct Options {
    /// The repository root (the measured tree).
    pub repo: PathBuf,
    /// Cargo target directory of that tree.
    pub target: PathBuf,
    /// Output directory (created).
    pub out: PathBuf,
    /// Build fmrun and pingpong first.
    pub build: bool,
    /// Measure Open MPI if it is there.
    pub mpi: bool,
    /// Measure UCX (`ucx_perftest`) if it is there.
    pub ucx: bool,
    /// Measure the copy strategies (tune, then plain vs tuned vs stream).
    pub copy: bool,
    /// Override the number of rounds.
    pub rounds: Option<u32>,
}

enum Step {
    Build,
    TuneCopy,
    Pingpong {
        setup: Pt2ptSetup,
        round: u32,
    },
    CopyVariant {
        label: &'static str,
        value: &'static str,
        round: u32,
    },
    MpiLat {
        round: u32,
    },
    MpiBw {
        round: u32,
    },
    Ucx {
        case: UcxCase,
        round: u32,
    },
    Phys {
        round: u32,
    },
    Extract {
        setup: ExtractSetup,
        round: u32,
    },
    Coll {
        entry: CollEntry,
        ranks: u32,
        round: u32,
    },
    MpiColl {
        ranks: u32,
        round: u32,
    },
}

impl Step {
    fn label(&self) -> String {
        match self {
            Step::Build => "build fmrun, pingpong, collectives (release)".into(),
            Step::TuneCopy => "tune the frame copy".into(),
            Step::Pingpong { setup, round } => {
                format!("round {round}: {} ping-pong + bandwidth", setup.name)
            }
            Step::CopyVariant { label, round, .. } => {
                format!("round {round}: fastmsg bandwidth with {label}")
            }
            Step::MpiLat { round } => format!("round {round}: Open MPI latency"),
            Step::MpiBw { round } => format!("round {round}: Open MPI bandwidth"),
            Step::Ucx { case, round } => {
                format!("round {round}: UCX {} {} B", case.test, case.size)
            }
            Step::Phys { round } => format!("round {round}: raw cache-line ping-pong"),
            Step::Extract { setup, round } => {
                format!("round {round}: empty extract ({})", setup.name)
            }
            Step::Coll {
                entry,
                ranks,
                round,
            } => format!("round {round}: fastmsg {} N={ranks}", entry.op),
            Step::MpiColl { ranks, round } => {
                format!("round {round}: Open MPI barrier+allreduce N={ranks}")
            }
        }
    }

    /// Rough seconds, for the progress bar.
    fn weight(&self, p: &Profile) -> u64 {
        let big = p.sizes.iter().filter(|&&s| s > 65536).count() as u64;
        match self {
            Step::Build => 5,
            Step::TuneCopy => 2 + 2 * (1 + COPY_CANDIDATES.len() as u64),
            Step::Pingpong { .. } => 3 + (big * 3 * u64::from(p.runs)) / 5,
            Step::CopyVariant { .. } => 2 + p.copy_sizes.len() as u64 * 2,
            Step::MpiLat { .. } => 2 + u64::from(p.mpi_runs),
            Step::MpiBw { .. } => 2 + 2 * u64::from(p.mpi_runs),
            Step::Ucx { .. } => 2,
            Step::Phys { .. } => 1 + u64::from(p.phys.1) * u64::from(p.phys.0) / 2_000_000,
            Step::Extract { .. } => 1 + p.extract_iters / 20_000_000,
            Step::Coll { ranks, .. } | Step::MpiColl { ranks, .. } => 2 + u64::from(*ranks),
        }
    }
}

fn plan_steps(p: &Profile, o: &Options, anchors: &Anchors, notes: &mut Vec<String>) -> Vec<Step> {
    let mut steps = Vec::new();
    if o.build {
        steps.push(Step::Build);
    }
    if o.copy {
        steps.push(Step::TuneCopy);
    }
    let mpi = match (o.mpi, anchors.mpi_ready()) {
        (false, _) => {
            notes.push("Open MPI not measured: --no-mpi was given".into());
            false
        }
        (true, Err(why)) => {
            notes.push(why);
            false
        }
        (true, Ok(())) => true,
    };
    let ucx = match (o.ucx, ucx::ready()) {
        (false, _) => {
            notes.push("UCX not measured: --no-ucx was given".into());
            false
        }
        (true, Err(why)) => {
            notes.push(why);
            false
        }
        (true, Ok(())) => true,
    };
    let phys = match anchors.phys_ready() {
        Ok(()) => true,
        Err(why) => {
            notes.push(why);
            false
        }
    };
    let rounds = o.rounds.unwrap_or(p.rounds).max(1);
    for round in 1..=rounds {
        for s in PT2PT {
            steps.push(Step::Pingpong { setup: *s, round });
        }
        if mpi {
            steps.push(Step::MpiLat { round });
            steps.push(Step::MpiBw { round });
        }
        if ucx {
            for case in ucx::CASES {
                steps.push(Step::Ucx { case: *case, round });
            }
        }
        if phys {
            steps.push(Step::Phys { round });
        }
        for s in EXTRACT {
            steps.push(Step::Extract { setup: *s, round });
        }
        if o.copy {
            for (label, value) in COPY_VARIANTS {
                steps.push(Step::CopyVariant {
                    label,
                    value,
                    round,
                });
            }
        }
        for &n in &p.coll_ranks {
            for e in COLLECTIVES {
                steps.push(Step::Coll {
                    entry: *e,
                    ranks: n,
                    round,
                });
            }
            if mpi {
                steps.push(Step::MpiColl { ranks: n, round });
            }
        }
    }
    steps
}

/// A step failed in a way that ends the suite (the build).
#[derive(Debug, thiserror::Error)]
pub enum SuiteRunError {
    /// The output directory could not be made.
    #[error("{path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The programs could not be built.
    #[error("building the measured programs failed: {0}")]
    Build(ChildRunError),
}

/// Run the suite with `profile`, showing progress; returns everything
/// measured (steps that fail are listed in `Results::failures`, the rest
/// goes on).
///
/// # Errors
/// [`SuiteRunError`] when nothing can be measured.
pub fn run(profile: &Profile, o: &Options) -> Result<Results, SuiteRunError> {
    let raw = o.out.join("raw");
    std::fs::create_dir_all(&raw).map_err(|source| SuiteRunError::Io {
        path: raw.clone(),
        source,
    })?;
    let anchors = Anchors::build(&o.target);
    let mut res = Results::new(Machine::detect(&o.repo), profile.name);
    let steps = plan_steps(profile, o, &anchors, &mut res.notes);
    let total: u64 = steps.iter().map(|s| s.weight(profile)).sum();
    let pb = ProgressBar::new(total);
    pb.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{wide_bar}] {percent:>3}% {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let progs = Programs::in_target(&o.target);
    let t0 = Instant::now();
    for (i, step) in steps.iter().enumerate() {
        pb.set_message(format!("{}/{} {}", i + 1, steps.len(), step.label()));
        if pb.is_hidden() {
            // No terminal (a log, CI): one line per step instead of the bar.
            eprintln!(
                "[{:>4.0} s] {}/{} {}",
                t0.elapsed().as_secs_f64(),
                i + 1,
                steps.len(),
                step.label()
            );
        }
        let log = raw.join(format!("{:02}-{}.txt", i + 1, slug(&step.label())));
        if let Err(e) = run_step(step, profile, o, &anchors, &progs, &log, &mut res) {
            if matches!(step, Step::Build) {
                pb.abandon();
                return Err(SuiteRunError::Build(e));
            }
            pb.println(format!("step failed: {}: {e}", step.label()));
            res.failures.push(format!("{}: {e}", step.label()));
        }
        pb.inc(step.weight(profile));
    }
    pb.finish_with_message(format!("done in {:.0} s", t0.elapsed().as_secs_f64()));
    res.machine.load_end = crate::machine::loadavg();
    res.elapsed_s = t0.elapsed().as_secs_f64();
    Ok(res)
}

fn describe(p: &copy::CopyPlan) -> String {
    if p.threshold == usize::MAX {
        p.strategy.name().to_owned()
    } else {
        format!("{}:{}", p.strategy.name(), p.threshold)
    }
}

fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').chars().take(60).collect()
}

fn run_step(
    step: &Step,
    p: &Profile,
    o: &Options,
    anchors: &Anchors,
    progs: &Programs,
    log: &Path,
    res: &mut Results,
) -> Result<(), ChildRunError> {
    match *step {
        Step::Build => {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
            let mut c = Command::new(cargo);
            c.current_dir(&o.repo)
                .args(["build", "--release", "-p", "fastmsg", "--bin", "fmrun"])
                .args(["-p", "fastmsg-examples", "--example", "pingpong"])
                .args(["--example", "collectives"])
                .env("CARGO_TARGET_DIR", &o.target);
            child::run(c, Duration::from_secs(1800), log)?;
        }
        Step::TuneCopy => {
            // The probe (what a process does on its own when no plan is
            // stored) and, deciding, the real path: pingpong bandwidth
            // with each candidate plan, interleaved, twice.
            let probe = copy::tune::tune();
            let mut cands: Vec<(String, Vec<f64>)> = std::iter::once("plain")
                .chain(COPY_CANDIDATES.iter().copied())
                .map(|c| (c.to_owned(), Vec::new()))
                .collect();
            for rep in 0..2 {
                for (cand, logs) in &mut cands {
                    let run = PingpongRun {
                        fmrun_args: &[],
                        env: vec![("FASTMSG_COPY".to_owned(), cand.clone())],
                        sizes: p.copy_sizes.clone(),
                        runs: 1,
                        scale: p.scale * 0.5,
                        bandwidth_only: true,
                        pin: PT2PT[0].pin,
                    };
                    let log = log.with_extension(format!("{}-{rep}.txt", cand.replace(':', "-")));
                    let pts = fastmsg_run::pingpong(progs, &run, &log)?;
                    // Log of the geometric mean over sizes.
                    let g = pts
                        .iter()
                        .map(|x| x.bandwidth_mb_s.max(1e-3).ln())
                        .sum::<f64>()
                        / pts.len().max(1) as f64;
                    logs.push(g);
                }
            }
            let score = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let plain = score(&cands[0].1);
            let (best, best_score) = cands.iter().map(|(c, v)| (c.clone(), score(v))).fold(
                ("plain".to_owned(), plain),
                |a, b| if b.1 > a.1 { b } else { a },
            );
            // Leave plain only for a clear (5 %) win.
            let chosen = if (best_score - plain).exp() >= 1.05 {
                best
            } else {
                "plain".to_owned()
            };
            let mut plan =
                copy::parse_choice(&chosen).unwrap_or_else(|| copy::CopyPlan::plain("tuned"));
            plan.source = "measured on pingpong".to_owned();
            plan.samples = probe.samples.clone();
            let stored = copy::store::plan_path()
                .and_then(|path| copy::store::store(&path, &plan).map(|()| path));
            res.notes.push(format!(
                "copy plan: the probe alone would choose {}; on pingpong bandwidth (geometric mean over {} sizes, best of 2) the candidates scored {}; chosen: {chosen} ({})",
                describe(&probe),
                p.copy_sizes.len(),
                cands
                    .iter()
                    .map(|(c, v)| format!("{c} {:.0} MB/s", score(v).exp()))
                    .collect::<Vec<_>>()
                    .join(", "),
                match stored {
                    Ok(path) => format!("stored in {}", path.display()),
                    Err(e) => format!("not stored: {e}"),
                }
            ));
            res.copy_plan = Some(plan);
        }
        Step::Pingpong { setup, round } => {
            let run = PingpongRun {
                fmrun_args: setup.fmrun_args,
                env: setup
                    .env
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                sizes: p.sizes.clone(),
                runs: p.runs,
                scale: p.scale,
                bandwidth_only: false,
                pin: setup.pin,
            };
            for pt in fastmsg_run::pingpong(progs, &run, log)? {
                res.rows.push(Row::from_pingpong(setup.name, round, &pt));
            }
        }
        Step::CopyVariant {
            label,
            value,
            round,
        } => {
            let run = PingpongRun {
                fmrun_args: &[],
                env: vec![("FASTMSG_COPY".to_owned(), value.to_owned())],
                sizes: p.copy_sizes.clone(),
                runs: p.runs,
                scale: p.scale,
                bandwidth_only: true,
                pin: PT2PT[0].pin,
            };
            for pt in fastmsg_run::pingpong(progs, &run, log)? {
                res.rows.push(Row::from_pingpong(
                    &format!("fastmsg shm, {label}"),
                    round,
                    &pt,
                ));
            }
        }
        Step::MpiLat { round } | Step::MpiBw { round } => {
            let mode = if matches!(step, Step::MpiLat { .. }) {
                "lat"
            } else {
                "bw"
            };
            for pt in anchors.mpi_pt2pt(mode, p.mpi_runs, MpiLaunch::Pinned, log)? {
                res.rows.push(Row::from_mpi(round, &pt));
            }
        }
        Step::Ucx { case, round } => {
            let r = ucx::run(&case, p.scale, log)?;
            res.rows.push(Row::from_ucx(round, &case, &r));
        }
        Step::Phys { round } => {
            let dir = log.with_extension("d");
            std::fs::create_dir_all(&dir).map_err(|source| ChildRunError::Io {
                log: dir.display().to_string(),
                source,
            })?;
            for r in anchors.phys(p.phys.0, p.phys.1, &dir)? {
                res.scalars.push(Scalar::new(
                    &format!("raw cache-line ping-pong, {} line(s), one-way", r.lines),
                    "hardware",
                    round,
                    r.one_way_ns,
                    "ns",
                ));
            }
        }
        Step::Extract { setup, round } => {
            let ns = fastmsg_run::empty_extract(&setup, p.extract_iters, 5).map_err(|e| {
                ChildRunError::Failed {
                    prog: "empty extract".to_owned(),
                    status: e.to_string(),
                    log: log.display().to_string(),
                }
            })?;
            res.scalars.push(Scalar::new(
                &format!(
                    "empty extract, {} ({} transport(s))",
                    setup.name, setup.transports
                ),
                "fastmsg",
                round,
                ns,
                "ns",
            ));
            res.scalars.push(Scalar::new(
                "empty extract per transport",
                "fastmsg",
                round,
                ns / f64::from(setup.transports),
                "ns",
            ));
        }
        Step::Coll {
            entry,
            ranks,
            round,
        } => {
            let prog = "collectives";
            let mut c = Command::new(&progs.fmrun);
            c.args(["-n", &ranks.to_string()])
                .arg(o.target.join("release/examples").join(prog))
                .args(["--json", "--iters", &p.coll_iters.to_string()])
                .args(["--runs", &p.runs.to_string(), "--settle", "1000"])
                .args(entry.example_args);
            let out = child::run(c, Duration::from_secs(600), log)?;
            let us = out
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter(|v| v.get("op").and_then(serde_json::Value::as_str) == Some(entry.op))
                .find_map(|v| v.get("latency_us").and_then(serde_json::Value::as_f64))
                .ok_or_else(|| ChildRunError::Failed {
                    prog: prog.to_owned(),
                    status: format!("no {} line with \"latency_us\"", entry.op),
                    log: log.display().to_string(),
                })?;
            res.scalars.push(Scalar::new(
                &format!("{} N={ranks}", entry.op),
                "fastmsg",
                round,
                us,
                "us",
            ));
        }
        Step::MpiColl { ranks, round } => {
            let r = anchors.mpi_coll(ranks, p.mpi_runs.min(3), p.coll_iters, log)?;
            if let Some(b) = r.barrier_us {
                res.scalars.push(Scalar::new(
                    &format!("barrier N={ranks}"),
                    "Open MPI",
                    round,
                    b,
                    "us",
                ));
            }
            if let Some(a) = r.allreduce_us {
                res.scalars.push(Scalar::new(
                    &format!("allreduce N={ranks}"),
                    "Open MPI",
                    round,
                    a,
                    "us",
                ));
            }
        }
    }
    Ok(())
}
