//! The comparison programs of `../shared/anchors/`: Open MPI's ping-pong,
//! windowed bandwidth and collectives (`mpi_bench`), and the raw cache-line
//! ping-pong between two processes (`shm_pingpong`, the physical limit).
//!
//! They are run with the same command lines as `anchors/run.sh` (mpirun
//! with `--bind-to core`, 2 ranks; `over N` with `--bind-to none` and
//! `mpi_yield_when_idle`), but with the repetition count chosen by the
//! suite, and their printed lines are parsed here.

use crate::child::{self, ChildRunError};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Where the anchor programs are and whether Open MPI can run.
#[derive(Debug, Clone)]
pub struct Anchors {
    /// Directory of the built anchors (`$ANCHORS_BIN`, default
    /// `~/.cache/fastmsg-anchors`).
    pub bin: PathBuf,
    /// Whether `mpirun` is on the PATH.
    pub have_mpirun: bool,
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

impl Anchors {
    /// Find the anchors: `$ANCHORS_BIN` or `~/.cache/fastmsg-anchors`.
    pub fn locate() -> Anchors {
        let bin = std::env::var_os("ANCHORS_BIN")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/fastmsg-anchors"))
            })
            .unwrap_or_else(|| PathBuf::from("anchors-not-found"));
        let have_mpirun = std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("mpirun").is_file()));
        Anchors { bin, have_mpirun }
    }

    /// Whether the Open MPI benchmark can run (mpirun and the built
    /// `mpi_bench`), or why not.
    pub fn mpi_ready(&self) -> Result<(), String> {
        if !self.have_mpirun {
            return Err("mpirun is not installed: Open MPI was not measured (install it and build the anchors with ../shared/anchors/run.sh build)".to_owned());
        }
        if !self.bin.join("mpi_bench").is_file() {
            return Err(format!(
                "{} is missing: Open MPI was not measured (build it with ../shared/anchors/run.sh build)",
                self.bin.join("mpi_bench").display()
            ));
        }
        Ok(())
    }

    /// Whether the raw ping-pong probe is built, or why not.
    pub fn phys_ready(&self) -> Result<(), String> {
        if self.bin.join("shm_pingpong").is_file() {
            Ok(())
        } else {
            Err(format!(
                "{} is missing: the raw cache-line probe was not run (build it with ../shared/anchors/run.sh build)",
                self.bin.join("shm_pingpong").display()
            ))
        }
    }

    fn mpirun(&self, np: u32, extra: &[&str]) -> Command {
        let mut c = Command::new("mpirun");
        c.args([
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            &np.to_string(),
        ])
        .args(extra)
        .arg(self.bin.join("mpi_bench"));
        c
    }

    /// `run.sh lat` / `run.sh bw` with `runs` repetitions.
    ///
    /// # Errors
    /// The program failed or printed nothing usable.
    pub fn mpi_pt2pt(
        &self,
        mode: &str,
        runs: u32,
        log: &Path,
    ) -> Result<Vec<MpiPoint>, ChildRunError> {
        let mut c = self.mpirun(2, &["--bind-to", "core"]);
        c.args([mode, &runs.to_string()]);
        let out = child::run(c, Duration::from_secs(600), log)?;
        Ok(parse_mpi(&out))
    }

    /// Barrier and allreduce with `np` ranks: `run.sh coll` for 2 ranks
    /// (bound to cores), `run.sh over N` otherwise.
    ///
    /// # Errors
    /// The program failed.
    pub fn mpi_coll(
        &self,
        np: u32,
        runs: u32,
        iters: u32,
        log: &Path,
    ) -> Result<CollResult, ChildRunError> {
        let mut c = if np <= 2 {
            self.mpirun(np, &["--bind-to", "core"])
        } else {
            self.mpirun(
                np,
                &["--bind-to", "none", "--mca", "mpi_yield_when_idle", "1"],
            )
        };
        c.args(["coll", &runs.to_string(), &iters.to_string()]);
        let out = child::run(c, Duration::from_secs(600), log)?;
        Ok(parse_coll(&out, np))
    }

    /// `run.sh phys`: both line layouts, with the pause hint.
    ///
    /// # Errors
    /// The program failed.
    pub fn phys(
        &self,
        iters: u32,
        runs: u32,
        log_dir: &Path,
    ) -> Result<Vec<PhysResult>, ChildRunError> {
        let mut v = Vec::new();
        for lines in [1u32, 2] {
            let mut c = Command::new(self.bin.join("shm_pingpong"));
            c.args([
                "proc",
                &iters.to_string(),
                &runs.to_string(),
                &lines.to_string(),
                "1",
            ]);
            let out = child::run(
                c,
                Duration::from_secs(300),
                &log_dir.join(format!("phys-lines{lines}.txt")),
            )?;
            v.extend(parse_phys(&out));
        }
        Ok(v)
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

/// Parse `shm_pingpong proc` output.
pub fn parse_phys(out: &str) -> Option<PhysResult> {
    let med = out.lines().find(|l| l.contains("MEDIAN one-way ns ="))?;
    let lines = num(field(med, "lines="))? as u32;
    let one_way_ns = num(field(med, "one-way ns ="))?;
    let dist = out.lines().find(|l| l.contains("per-sample"));
    Some(PhysResult {
        lines,
        one_way_ns,
        p50_ns: dist.and_then(|d| num(field(d, "p50="))),
        p99_ns: dist.and_then(|d| num(field(d, "p99="))),
    })
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
        let p = parse_phys("proc lines=2 pause=1 iters=1000000 runs=5 one-way ns per run: 60.1 61.2\nproc lines=2 pause=1 MEDIAN one-way ns = 60.5\nproc lines=2 pause=1 last-run per-sample one-way ns: p50=58.0 p90=61.0 p99=70.5 p99.9=80.0 max=900.0 (tsc 2.445 GHz)\n").unwrap();
        assert_eq!(p.lines, 2);
        assert_eq!(p.one_way_ns, 60.5);
        assert_eq!((p.p50_ns, p.p99_ns), (Some(58.0), Some(70.5)));
        assert!(parse_phys("nothing").is_none());
    }
}
