//! UCX beside Open MPI: `ucx_perftest` (package `ucx-utils`) over UCX's
//! shared-memory transport, a server on CPU 0 and a client on CPU 1 with
//! `taskset`, `UCX_TLS=posix,self`, for the cases of [`CASES`]:
//! active-message and tag latency and active-message rate at 8 B (UCX's
//! smallest size), and the active-message latency at 64 B and 1 KiB.
//!
//! `ucx_perftest`'s latency is already one-way (half the round trip), in
//! µs; its summary is the line starting `Final:` (iterations, p50, average
//! and overall latency, average and overall MB/s, average and overall
//! messages/s), parsed by [`parse_final`].

use crate::child::{self, ChildRunError};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One `ucx_perftest` measurement: test, message size, iterations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UcxCase {
    /// The `-t` test (`ucp_am_lat`, `tag_lat`, `ucp_am_bw`).
    pub test: &'static str,
    /// `-s`, bytes.
    pub size: usize,
    /// `-n` at scale 1.
    pub iters: u64,
}

impl UcxCase {
    /// Whether the test measures latency (else message rate).
    pub fn is_latency(&self) -> bool {
        self.test.ends_with("_lat")
    }

    /// The series name of its rows in the report (`UCX ucp_am_lat`, …).
    pub fn series(&self) -> String {
        format!("{SERIES_PREFIX}{}", self.test)
    }
}

/// Series names of UCX rows start with this.
pub const SERIES_PREFIX: &str = "UCX ";

/// What the suite measures of UCX.
pub const CASES: &[UcxCase] = &[
    UcxCase {
        test: "ucp_am_lat",
        size: 8,
        iters: 1_000_000,
    },
    UcxCase {
        test: "tag_lat",
        size: 8,
        iters: 1_000_000,
    },
    UcxCase {
        test: "ucp_am_bw",
        size: 8,
        iters: 5_000_000,
    },
    UcxCase {
        test: "ucp_am_lat",
        size: 64,
        iters: 1_000_000,
    },
    UcxCase {
        test: "ucp_am_lat",
        size: 1024,
        iters: 1_000_000,
    },
];

/// The summary of one `ucx_perftest` run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UcxResult {
    /// Median one-way latency, µs.
    pub p50_us: f64,
    /// Mean one-way latency, µs.
    pub avg_us: f64,
    /// Messages per second (average).
    pub msg_per_s: f64,
}

/// Parse the `Final:` line of `ucx_perftest`'s output, or `None` when
/// there is none or it does not have the expected numbers.
pub fn parse_final(out: &str) -> Option<UcxResult> {
    let line = out.lines().find(|l| l.trim_start().starts_with("Final:"))?;
    let f: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    // iterations, p50, avg, overall latency, avg/overall MB/s, avg/overall msg/s
    if f.len() < 8 {
        return None;
    }
    Some(UcxResult {
        p50_us: f[1],
        avg_us: f[2],
        msg_per_s: f[6],
    })
}

fn on_path(prog: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
}

/// Whether `ucx_perftest` and `taskset` are installed, or why UCX is not
/// measured.
pub fn ready() -> Result<(), String> {
    for (prog, package) in [("ucx_perftest", "ucx-utils"), ("taskset", "util-linux")] {
        if !on_path(prog) {
            return Err(format!(
                "{prog} is not installed: UCX was not measured (apt install {package})"
            ));
        }
    }
    Ok(())
}

/// A port nobody listens on now (the kernel's choice for a bound socket).
fn free_port() -> Result<u16, std::io::Error> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn perftest(cpu: u32) -> Command {
    let mut c = Command::new("taskset");
    c.args(["-c", &cpu.to_string(), "ucx_perftest"])
        .env("UCX_TLS", "posix,self")
        .env("UCX_WARN_UNUSED_ENV_VARS", "n");
    c
}

/// Kills the server when dropped (the client failed or finished).
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        // The server exits by itself after the client's test; give it a
        // moment, then end it.
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(2) {
            if matches!(self.0.try_wait(), Ok(Some(_)) | Err(_)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Run `case` once with `-n` scaled by `scale` (at least 10,000): server on
/// CPU 0, client on CPU 1; client output in `log`, the server's in
/// `log`.server.
///
/// # Errors
/// A program could not start, failed, ran past its limit, or printed no
/// `Final:` line.
pub fn run(case: &UcxCase, scale: f64, log: &Path) -> Result<UcxResult, ChildRunError> {
    let io = |source| ChildRunError::Io {
        log: log.display().to_string(),
        source,
    };
    let port = free_port().map_err(io)?.to_string();
    let srv_log = log.with_extension("server");
    let srv_out = std::fs::File::create(&srv_log).map_err(io)?;
    let srv_err = srv_out.try_clone().map_err(io)?;
    let _server = Server(
        perftest(0)
            .args(["-p", &port])
            .stdin(Stdio::null())
            .stdout(srv_out)
            .stderr(srv_err)
            .spawn()
            .map_err(|source| ChildRunError::Spawn {
                prog: "taskset -c 0 ucx_perftest (server)".to_owned(),
                source,
            })?,
    );
    let iters = ((case.iters as f64 * scale) as u64).max(10_000);
    let size = case.size.to_string();
    let iters = iters.to_string();
    // Give the server half a second to listen; the client is
    // retried twice in case it was not yet listening.
    let mut last = None;
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(500));
        let mut c = perftest(1);
        c.args(["127.0.0.1", "-p", &port, "-t", case.test])
            .args(["-n", &iters, "-s", &size]);
        match child::run(c, Duration::from_secs(120), log) {
            Ok(out) => {
                return parse_final(&out).ok_or_else(|| ChildRunError::Failed {
                    prog: format!("ucx_perftest -t {}", case.test),
                    status: "no `Final:` line with 8 numbers".to_owned(),
                    log: log.display().to_string(),
                })
            }
            Err(e @ ChildRunError::Failed { .. }) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.expect("the loop ran"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from `ucx_perftest` 1.13 (`-t ucp_am_lat -s 64`, posix).
    const SAMPLE: &str = "\
+--------------+--------------+------------------------------+---------------------+-----------------------+
|              |              |        latency (usec)        |   bandwidth (MB/s)  |  message rate (msg/s) |
+--------------+--------------+----------+---------+---------+----------+----------+-----------+-----------+
|    Stage     | # iterations | 50.0%ile | average | overall |  average |  overall |  average  |  overall  |
+--------------+--------------+----------+---------+---------+----------+----------+-----------+-----------+
Final:                100000      0.458     1.455     1.455       41.95      41.95      687245      687245
";

    #[test]
    fn parses_the_final_line() {
        let r = parse_final(SAMPLE).unwrap();
        assert_eq!(r.p50_us, 0.458);
        assert_eq!(r.avg_us, 1.455);
        assert_eq!(r.msg_per_s, 687_245.0);
    }

    #[test]
    fn rejects_output_without_a_usable_final_line() {
        assert!(parse_final("").is_none());
        assert!(parse_final("|    Stage     | # iterations |\n").is_none());
        assert!(parse_final("Final:  100000  0.458  1.455\n").is_none());
        assert!(parse_final("Final:  100000  0.458  x  1.455  41.95  41.95  1  1\n").is_none());
    }

    #[test]
    fn cases_cover_the_8_byte_figures_and_the_larger_latency_points() {
        let lat = |t: &str, s: usize| CASES.iter().any(|c| c.test == t && c.size == s);
        assert!(lat("ucp_am_lat", 8) && lat("tag_lat", 8) && lat("ucp_am_bw", 8));
        assert!(lat("ucp_am_lat", 64) && lat("ucp_am_lat", 1024));
        assert!(CASES
            .iter()
            .all(|c| c.is_latency() != (c.test == "ucp_am_bw")));
    }
}
