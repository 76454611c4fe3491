//! `fmbench bale`: the Bale kernels written the natural way — the
//! `histo`, `ig`, `permute` and `transpose` examples, one aggregated
//! active message or call per update, request, dart or nonzero — beside
//! the aggregated MPI programs of `benches/c/` (`histo_mpi.c`, `ig_mpi.c`,
//! `permute_mpi.c`, `transpose_mpi.c`: per-destination buffers exchanged
//! with `MPI_Alltoallv`), interleaved run by run for each rank count, with
//! medians and ratios; and `agglat`, one item through aggregation against
//! a direct 8-byte send, a one-item call's and a remote read's round trips.
//!
//! A kernel written in several forms ([`forms`]: the histogram as channel
//! items or remote atomic adds, index-gather as channel items, remote
//! reads or calls) gets a row per form, each against the same MPI runs.
//!
//! Each run is one process group: `fmrun -n N examples/histo --json` then
//! `mpirun -np N histo_mpi`, then the same for `ig`, `permute` and
//! `transpose`, for N = 2, 4, 8,
//! repeated `runs` times, so machine noise falls on both sides alike. Up
//! to 2 ranks both sides are bound to cores; above, the MPI ranks run
//! oversubscribed ([`MpiLaunch::for_ranks`]).

use crate::anchor::{bale_program, mpirun, Anchors, MpiLaunch};
use crate::child;
use crate::stats::median;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// What to run.
#[derive(Debug, Clone)]
pub struct BaleOptions {
    /// The cargo target directory with the release `fmrun` and examples.
    pub target: PathBuf,
    /// The built MPI programs (`None`: fastmsg alone).
    pub anchors: Option<Anchors>,
    /// Rank counts.
    pub ranks: Vec<u32>,
    /// Runs per (kernel, ranks, side).
    pub runs: usize,
    /// Where the children's output goes.
    pub out: PathBuf,
    /// `fmrun --wait` for the fastmsg runs (None: the default policy).
    pub wait: Option<String>,
}

/// The kernels compared with MPI: (name, the rate's JSON field and the
/// MPI line's key).
const KERNELS: &[(&str, &str)] = &[
    ("histo", "updates_per_s"),
    ("ig", "requests_per_s"),
    ("permute", "darts_per_s"),
    ("transpose", "nonzeros_per_s"),
];

/// The forms a kernel's example is run in (its `--form`); `""`: the
/// example has one form (no flag).
pub fn forms(kernel: &str) -> &'static [&'static str] {
    match kernel {
        "histo" => &[
            "channel",
            "atomic",
            "atomic-direct",
            "atomic-owner",
            "atomic-owned",
        ],
        "ig" => &["channel", "get", "get-owner", "rpc"],
        _ => &[""],
    }
}

/// One row of the table.
#[derive(Debug, Clone)]
pub struct Row {
    /// Kernel.
    pub kernel: &'static str,
    /// The example's form (`""`: its only one).
    pub form: &'static str,
    /// Ranks.
    pub ranks: u32,
    /// fastmsg's rates (per second), one per run.
    pub fastmsg: Vec<f64>,
    /// MPI's rates, one per run.
    pub mpi: Vec<f64>,
}

impl Row {
    /// median(fastmsg) / median(MPI).
    pub fn ratio(&self) -> Option<f64> {
        Some(median(&self.fastmsg)? / median(&self.mpi)?)
    }
}

/// The rate in a fastmsg `--json` line, if the run says `ok`.
fn fastmsg_rate(out: &str, field: &str) -> Result<f64, String> {
    let line = out
        .lines()
        .find(|l| l.starts_with('{'))
        .ok_or_else(|| format!("no JSON line in {out:?}"))?;
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| format!("{e}: {line}"))?;
    if v["ok"] != serde_json::Value::Bool(true) {
        return Err(format!("the run failed its check: {line}"));
    }
    v[field]
        .as_f64()
        .ok_or_else(|| format!("no {field} in {line}"))
}

/// The rate in an MPI program's line (`… updates_per_s=4.4e+08 … OK`).
fn mpi_rate(out: &str, field: &str) -> Result<f64, String> {
    let line = out
        .lines()
        .find(|l| l.contains(field))
        .ok_or_else(|| format!("no {field} in {out:?}"))?;
    if !line.trim_end().ends_with("OK") {
        return Err(format!("the MPI run failed its check: {line}"));
    }
    let key = format!("{field}=");
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&key))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("unreadable {field} in {line}"))
}

fn run_child(cmd: Command, log: &Path) -> Result<String, String> {
    child::run(cmd, Duration::from_secs(300), log).map_err(|e| e.to_string())
}

/// Run the comparison; progress lines go to stderr.
///
/// # Errors
/// A program that fails, times out or prints no usable figure.
pub fn run(o: &BaleOptions) -> Result<Vec<Row>, String> {
    std::fs::create_dir_all(&o.out).map_err(|e| e.to_string())?;
    let fmrun = o.target.join("release/fmrun");
    let mut rows: Vec<Row> = Vec::new();
    for &(kernel, _) in KERNELS {
        for &form in forms(kernel) {
            for &n in &o.ranks {
                rows.push(Row {
                    kernel,
                    form,
                    ranks: n,
                    fastmsg: Vec::new(),
                    mpi: Vec::new(),
                });
            }
        }
    }
    for run in 0..o.runs {
        for &n in &o.ranks {
            for &(kernel, field) in KERNELS {
                let mut f = Vec::new();
                for &form in forms(kernel) {
                    let mut cmd = Command::new(&fmrun);
                    if let Some(w) = &o.wait {
                        cmd.arg("--wait").arg(w);
                    }
                    cmd.arg("-n")
                        .arg(n.to_string())
                        .arg(o.target.join("release/examples").join(kernel))
                        .arg("--json");
                    if !form.is_empty() {
                        cmd.args(["--form", form]);
                    }
                    let log = o.out.join(format!("{kernel}{form}-fastmsg-{n}-{run}.log"));
                    f.push((form, fastmsg_rate(&run_child(cmd, &log)?, field)?));
                }
                let m = match &o.anchors {
                    Some(anchors) => {
                        let prog = anchors.mpi_program(&bale_program(kernel))?;
                        let cmd = mpirun(n, MpiLaunch::for_ranks(n), &prog);
                        let log = o.out.join(format!("{kernel}-mpi-{n}-{run}.log"));
                        let m = mpi_rate(&run_child(cmd, &log)?, field)?;
                        for (form, f) in &f {
                            eprintln!(
                                "bale run {run}: {kernel}{} N={n}: fastmsg {f:.3e}/s, MPI {m:.3e}/s ({:.2}x)",
                                label(form),
                                f / m
                            );
                        }
                        Some(m)
                    }
                    None => {
                        for (form, f) in &f {
                            eprintln!(
                                "bale run {run}: {kernel}{} N={n}: fastmsg {f:.3e}/s",
                                label(form)
                            );
                        }
                        None
                    }
                };
                for (form, f) in f {
                    let row = rows
                        .iter_mut()
                        .find(|r| r.kernel == kernel && r.form == form && r.ranks == n)
                        .expect("a row per kernel, form and rank count");
                    row.fastmsg.push(f);
                    row.mpi.extend(m);
                }
            }
        }
    }
    Ok(rows)
}

/// ` (form)` after a kernel's name, or nothing.
fn label(form: &str) -> String {
    if form.is_empty() {
        String::new()
    } else {
        format!(" ({form})")
    }
}

/// `agglat`'s figures, medians over its own runs (ns).
#[derive(Debug, Clone, Copy)]
pub struct AggLat {
    /// One-way, direct 8-byte send.
    pub direct: f64,
    /// One-way, one item through aggregation.
    pub agg: f64,
    /// Round trip, direct 0-byte send.
    pub zero_rt: f64,
    /// Round trip, one call answered by the peer's handler.
    pub rpc_rt: f64,
    /// One 8-byte remote read of the on-host peer.
    pub get: f64,
    /// Round trip, one 8-byte remote read through the owner's handler.
    pub get_owner_rt: f64,
}

/// `agglat`'s line, medians over its own runs.
///
/// # Errors
/// As [`run`].
pub fn agglat(o: &BaleOptions) -> Result<AggLat, String> {
    let mut cmd = Command::new(o.target.join("release/fmrun"));
    if let Some(w) = &o.wait {
        cmd.arg("--wait").arg(w);
    }
    cmd.arg("-n")
        .arg("2")
        .arg(o.target.join("release/examples/agglat"))
        .args(["--json", "--iters", "20000", "--runs", "5"]);
    let out = run_child(cmd, &o.out.join("agglat.log"))?;
    let f = |k: &str| fastmsg_rate(&out, k);
    Ok(AggLat {
        direct: f("direct_ns")?,
        agg: f("agg_ns")?,
        zero_rt: f("zero_rt_ns")?,
        rpc_rt: f("rpc_rt_ns")?,
        get: f("get_ns")?,
        get_owner_rt: f("get_owner_rt_ns")?,
    })
}

/// The Markdown table (rates in millions per second).
pub fn markdown(rows: &[Row], agglat: Option<AggLat>, load: (&str, &str)) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| kernel | ranks | fastmsg, natural code (M/s, median) | MPI exstack (M/s, median) | ratio | runs |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|");
    for r in rows {
        let m = |v: &[f64]| median(v).map_or("–".to_owned(), |x| format!("{:.1}", x / 1e6));
        let _ = writeln!(
            s,
            "| {}{} | {} | {} | {} | {} | {} |",
            r.kernel,
            label(r.form),
            r.ranks,
            m(&r.fastmsg),
            m(&r.mpi),
            r.ratio().map_or("–".to_owned(), |x| format!("{x:.2}×")),
            r.fastmsg.len()
        );
    }
    if let Some(l) = agglat {
        let _ = writeln!(
            s,
            "\nOne item through aggregation to an idle peer: {:.0} ns one-way, direct 8-byte send {:.0} ns ({:.2}×).",
            l.agg,
            l.direct,
            l.agg / l.direct
        );
        let _ = writeln!(
            s,
            "One-item call to an idle peer: {:.0} ns round trip, direct 8-byte send's round trip {:.0} ns ({:.2}×). \
             8-byte get from the on-host peer: {:.0} ns, 0-byte round trip {:.0} ns ({:.3}×); \
             through the owner's handler {:.0} ns ({:.2}×).",
            l.rpc_rt,
            2.0 * l.direct,
            l.rpc_rt / (2.0 * l.direct),
            l.get,
            l.zero_rt,
            l.get / l.zero_rt,
            l.get_owner_rt,
            l.get_owner_rt / l.zero_rt
        );
    }
    let _ = writeln!(s, "\nloadavg at start {}, at end {}.", load.0, load.1);
    s
}
