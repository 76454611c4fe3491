//! Runs the comparison programs of `benches/c/` (built by [`cbuild`]) and
//! reads their output: Open MPI's ping-pong, windowed bandwidth and
//! collectives (`bench_mpi`), the raw cache-line ping-pong between two
//! processes (`cacheline_pingpong`, the physical limit), single-thread
//! memcpy bandwidth (`memcpy_bw`), and the command lines of the
//! aggregated MPI Bale kernels (`histo_mpi`, `ig_mpi`, `permute_mpi`,
//! `transpose_mpi`).
//!
//! Open MPI runs under `mpirun` in one of three ways ([`MpiLaunch`]): two
//! ranks bound to cores over shared memory, more ranks than cores
//! (`--bind-to none`, `mpi_yield_when_idle`), or two ranks over TCP
//! loopback (`--mca pml ob1 --mca btl self,tcp`).
//!
//! [`cbuild`]: crate::cbuild

use crate::cbuild::CPrograms;
use crate::child::{self, ChildRunError};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Open MPI's point-to-point and collective benchmark.
pub const BENCH_MPI: &str = "bench_mpi";
/// The raw cache-line ping-pong.
pub const CACHELINE: &str = "cacheline_pingpong";
/// Single-thread memcpy bandwidth.
pub const MEMCPY: &str = "memcpy_bw";

/// The aggregated MPI program of a Bale kernel (`histo`, `ig`,
/// `permute`, `transpose`).
pub fn bale_program(kernel: &str) -> String {
    format!("{kernel}_mpi")
}

/// How `mpirun` places and connects the ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MpiLaunch {
    /// Each rank bound to a core (`--bind-to core`), shared memory.
    Pinned,
    /// More ranks than cores: `--bind-to none`, and ranks yield the CPU
    /// when they wait (`mpi_yield_when_idle`).
    Oversubscribed,
    /// Ranks bound to cores, talking over TCP loopback only
    /// (`--mca pml ob1 --mca btl self,tcp`).
    Tcp,
}

impl MpiLaunch {
    /// Pinned up to 2 ranks (the machine's pair of cores the suite
    /// uses), oversubscribed above.
    pub fn for_ranks(np: u32) -> MpiLaunch {
        if np <= 2 {
            MpiLaunch::Pinned
        } else {
            MpiLaunch::Oversubscribed
        }
    }

    /// `mpirun`'s options for this launch.
    pub fn options(self) -> &'static [&'static str] {
        match self {
            MpiLaunch::Pinned => &["--bind-to", "core"],
            MpiLaunch::Oversubscribed => {
                &["--bind-to", "none", "--mca", "mpi_yield_when_idle", "1"]
            }
            MpiLaunch::Tcp => &[
                "--bind-to",
                "core",
                "--mca",
                "pml",
                "ob1",
                "--mca",
                "btl",
                "self,tcp",
            ],
        }
    }
}

/// `mpirun` starting `np` ranks of `prog` (as root too, and allowed to
/// place more ranks than cores).
pub fn mpirun(np: u32, launch: MpiLaunch, prog: &Path) -> Command {
    let mut c = Command::new("mpirun");
    c.args(["--allow-run-as-root", "--oversubscribe", "-np"])
        .arg(np.to_string())
        .args(launch.options())
        .arg(prog);
    c
}

/// The comparison programs, built, or why they are not.
#[derive(Debug, Clone)]
pub struct Anchors {
    progs: Result<CPrograms, String>,
}

/// One Open MPI ping-pong or bandwidth line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MpiPoint {
    /// Message size in bytes.
    pub size: usize,
    /// One-way latency, ns (mean over iterations, median over runs).
    pub lat_ns: Option<f64>,
    /// Bandwidth, MB/s (1e6 B/s).
    pub bw_mb_s: Option<f64>,
    /// Message rate, million messages per second.
    pub rate_m_s: Option<f64>,
}

/// Raw cache-line ping-pong result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhysResult {
    /// Cache lines used (1: one shared line; 2: a ping line and a pong line).
    pub lines: u32,
    /// Median over runs of the per-run mean one-way ns.
    pub one_way_ns: f64,
    /// Per-sample one-way p50 (last run).
    pub p50_ns: Option<f64>,
    /// Per-sample one-way p99 (last run).
    pub p99_ns: Option<f64>,
}

/// Barrier and allreduce times for one rank count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CollResult {
    /// Ranks.
    pub ranks: u32,
    /// µs per barrier.
    pub barrier_us: Option<f64>,
    /// µs per allreduce of one double.
    pub allreduce_us: Option<f64>,
}

/// One size of `memcpy_bw`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemcpyPoint {
    /// Bytes per copy.
    pub size: usize,
    /// GB/s (1e9 B/s), median over runs.
    pub gb_s: f64,
}

impl Anchors {
    /// Build the programs that are stale into `<target>/fmbench-c/`; a
    /// build that fails is kept as the reason every program is missing.
    pub fn build(target: &Path) -> Anchors {
        Anchors {
            progs: CPrograms::build(target)
                .map_err(|e| format!("the comparison programs of benches/c did not build: {e}")),
        }
    }

    /// Anchors over programs already built (or a reason they are not).
    pub fn from_programs(progs: Result<CPrograms, String>) -> Anchors {
        Anchors { progs }
    }

    /// The plain (non-MPI) program `name`, or why it is not there.
    ///
    /// # Errors
    /// The reason, as a sentence for the report's notes.
    pub fn program(&self, name: &str) -> Result<PathBuf, String> {
        self.progs.as_ref().map_err(Clone::clone)?.program(name)
    }

    /// The MPI program `name`, or why it cannot run (not built, no
    /// `mpicc` or `mpirun`).
    ///
    /// # Errors
    /// The reason, naming what to install.
    pub fn mpi_program(&self, name: &str) -> Result<PathBuf, String> {
        self.progs.as_ref().map_err(Clone::clone)?.mpi_program(name)
    }

    /// Whether the Open MPI benchmark can run, or why not.
    ///
    /// # Errors
    /// The reason, for the report's notes.
    pub fn mpi_ready(&self) -> Result<(), String> {
        self.mpi_program(BENCH_MPI)
            .map(drop)
            .map_err(|why| format!("Open MPI was not measured: {why}"))
    }

    /// Whether the raw ping-pong probe is built, or why not.
    ///
    /// # Errors
    /// The reason, for the report's notes.
    pub fn phys_ready(&self) -> Result<(), String> {
        self.program(CACHELINE)
            .map(drop)
            .map_err(|why| format!("the raw cache-line probe was not run: {why}"))
    }

    fn bench_mpi(&self, np: u32, launch: MpiLaunch) -> Result<Command, ChildRunError> {
        let prog = self
            .mpi_program(BENCH_MPI)
            .map_err(|why| not_built(BENCH_MPI, why))?;
        Ok(mpirun(np, launch, &prog))
    }

    /// Ping-pong (`mode` `lat`) or windowed bandwidth (`bw`) with `runs`
    /// repetitions, 2 ranks, shared memory or TCP (`launch`).
    ///
    /// # Errors
    /// The program is missing, failed or printed nothing usable.
    pub fn mpi_pt2pt(
        &self,
        mode: &str,
        runs: u32,
        launch: MpiLaunch,
        log: &Path,
    ) -> Result<Vec<MpiPoint>, ChildRunError> {
        let mut c = self.bench_mpi(2, launch)?;
        c.args([mode, &runs.to_string()]);
        let out = child::run(c, Duration::from_secs(600), log)?;
        Ok(parse_mpi(&out))
    }

    /// Barrier and allreduce with `np` ranks (pinned up to 2 ranks,
    /// oversubscribed above).
    ///
    /// # Errors
    /// The program is missing or failed.
    pub fn mpi_coll(
        &self,
        np: u32,
        runs: u32,
        iters: u32,
        log: &Path,
    ) -> Result<CollResult, ChildRunError> {
        let mut c = self.bench_mpi(np, MpiLaunch::for_ranks(np))?;
        c.args(["coll", &runs.to_string(), &iters.to_string()]);
        let out = child::run(c, Duration::from_secs(600), log)?;
        Ok(parse_coll(&out, np))
    }

    /// The raw ping-pong with one and with two lines, with the pause hint.
    ///
    /// # Errors
    /// The program is missing or failed.
    pub fn phys(
        &self,
        iters: u32,
        runs: u32,
        log_dir: &Path,
    ) -> Result<Vec<PhysResult>, ChildRunError> {
        let prog = self
            .program(CACHELINE)
            .map_err(|why| not_built(CACHELINE, why))?;
        let mut v = Vec::new();
        for lines in [1u32, 2] {
            let mut c = Command::new(&prog);
            c.args(["--iters", &iters.to_string(), "--runs", &runs.to_string()])
                .args(["--lines", &lines.to_string(), "--pause", "1"]);
            let out = child::run(
                c,
                Duration::from_secs(300),
                &log_dir.join(format!("phys-lines{lines}.txt")),
            )?;
            v.extend(parse_phys(&out));
        }
        Ok(v)
    }

    /// memcpy bandwidth by size, `runs` runs of about `ms` each.
    ///
    /// # Errors
    /// The program is missing or failed.
    pub fn memcpy(
        &self,
        runs: u32,
        ms: u32,
        log: &Path,
    ) -> Result<Vec<MemcpyPoint>, ChildRunError> {
        let prog = self.program(MEMCPY).map_err(|why| not_built(MEMCPY, why))?;
        let mut c = Command::new(prog);
        c.args(["--runs", &runs.to_string(), "--ms", &ms.to_string()]);
        let out = child::run(c, Duration::from_secs(600), log)?;
        Ok(parse_memcpy(&out))
    }
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let i = line.find(key)? + key.len();
    line[i..].split_whitespace().next()
}

fn num(s: Option<&str>) -> Option<f64> {
    s?.trim_end_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .ok()
}

/// Parse `mpi_bench lat|bw` output.
pub fn parse_mpi(out: &str) -> Vec<MpiPoint> {
    let mut v: Vec<MpiPoint> = Vec::new();
    for l in out.lines() {
        let lat = l.starts_with("lat ");
        let bw = l.starts_with("bw ");
        if !(lat || bw) {
            continue;
        }
        let Some(size) = num(field(l, "size=")).map(|s| s as usize) else {
            continue;
        };
        let idx = match v.iter().position(|p| p.size == size) {
            Some(i) => i,
            None => {
                v.push(MpiPoint {
                    size,
                    lat_ns: None,
                    bw_mb_s: None,
                    rate_m_s: None,
                });
                v.len() - 1
            }
        };
        let p = &mut v[idx];
        if lat {
            p.lat_ns = num(field(l, "median_us=")).map(|us| us * 1e3);
        } else if size == 0 {
            p.rate_m_s = num(field(l, "median="));
            p.bw_mb_s = Some(0.0);
        } else {
            p.bw_mb_s = num(field(l, "median="));
            p.rate_m_s = num(field(l, "(Mmsg/s"));
        }
    }
    v
}

/// Parse `mpi_bench coll` output.
pub fn parse_coll(out: &str, np: u32) -> CollResult {
    let mut r = CollResult {
        ranks: np,
        barrier_us: None,
        allreduce_us: None,
    };
    for l in out.lines() {
        if l.starts_with("barrier") {
            r.barrier_us = num(field(l, "median_us="));
        } else if l.starts_with("allreduce") {
            r.allreduce_us = num(field(l, "median_us="));
        }
    }
    r
}

/// Parse `cacheline_pingpong` output.
pub fn parse_phys(out: &str) -> Option<PhysResult> {
    let med = out.lines().find(|l| l.contains("median one-way ns="))?;
    let lines = num(field(med, "lines="))? as u32;
    let one_way_ns = num(field(med, "one-way ns="))?;
    let dist = out.lines().find(|l| l.contains("single round trips"));
    Some(PhysResult {
        lines,
        one_way_ns,
        p50_ns: dist.and_then(|d| num(field(d, "p50="))),
        p99_ns: dist.and_then(|d| num(field(d, "p99="))),
    })
}

/// Parse `memcpy_bw` output: one point per line `SIZE GB/s ns iters runs…`
/// (`64B`, `4KiB`, `1MiB`).
pub fn parse_memcpy(out: &str) -> Vec<MemcpyPoint> {
    out.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let label = w.next()?;
            let gb_s: f64 = w.next()?.parse().ok()?;
            let (digits, unit) = label.split_at(label.find(|c: char| !c.is_ascii_digit())?);
            let scale = match unit {
                "B" => 1,
                "KiB" => 1 << 10,
                "MiB" => 1 << 20,
                _ => return None,
            };
            Some(MemcpyPoint {
                size: digits.parse::<usize>().ok()? * scale,
                gb_s,
            })
        })
        .collect()
}

/// The error of a run whose program `prog` was not built (`why`).
fn not_built(prog: &str, why: String) -> ChildRunError {
    ChildRunError::Failed {
        prog: prog.to_owned(),
        status: why,
        log: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mpi_bench_lines() {
        let out = "# library: Open MPI v4.1.6\nlat size=0        iters=10000  median_us=0.180\n   runs: 0.1 0.2\nlat size=1024     iters=10000  median_us=0.450\nbw  size=0        Mmsg/s median=13.712\n   runs: 1\nbw  size=65536    MB/s median=7600.5  (Mmsg/s 0.116)\n";
        let v = parse_mpi(out);
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].size, 0);
        assert!((v[0].lat_ns.unwrap() - 180.0).abs() < 1e-6);
        assert!((v[0].rate_m_s.unwrap() - 13.712).abs() < 1e-9);
        assert_eq!(v[1].size, 1024);
        assert_eq!(v[2].bw_mb_s, Some(7600.5));
        assert_eq!(v[2].rate_m_s, Some(0.116));
        assert!(parse_mpi("garbage\nlat size=x").is_empty());
    }

    #[test]
    fn parses_coll_and_phys() {
        let c = parse_coll("barrier   np=4 iters=10000 median_us=1.250\n   runs: 1\nallreduce np=4 iters=10000 (1 double SUM) median_us=2.500\n", 4);
        assert_eq!((c.barrier_us, c.allreduce_us), (Some(1.25), Some(2.5)));
        let p = parse_phys("cacheline lines=2 pause=1 iters=1000000 runs=5 one-way ns per run: 60.1 61.2\ncacheline lines=2 pause=1 median one-way ns=60.5\ncacheline lines=2 pause=1 last run, single round trips, one-way ns: p50=58.0 p90=61.0 p99=70.5 p99.9=80.0 max=900.0\n").unwrap();
        assert_eq!(p.lines, 2);
        assert_eq!(p.one_way_ns, 60.5);
        assert_eq!((p.p50_ns, p.p99_ns), (Some(58.0), Some(70.5)));
        assert!(parse_phys("nothing").is_none());
    }

    #[test]
    fn parses_memcpy_table() {
        let out = "      size  median GB/s      ns/copy    iters/run   per-run GB/s\n       64B        19.11          3.3      8304812   23.10 19.11\n      4KiB        40.50        101.1       100000   40.5\n      4MiB        12.00     349525.3          300   12.0\n";
        let v = parse_memcpy(out);
        assert_eq!(
            v.iter().map(|p| (p.size, p.gb_s)).collect::<Vec<_>>(),
            vec![(64, 19.11), (4096, 40.5), (4 << 20, 12.0)]
        );
        assert!(parse_memcpy("size median\nxB 1.0\n").is_empty());
    }
}
