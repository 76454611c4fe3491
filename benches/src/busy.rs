//! `fmbench busy`: the wait policies on a busy machine and on a quiet one.
//!
//! Four fine-grained programs run under `fmrun --wait P` for each policy:
//!
//! - the `pingpong` example's 0-byte ping-pong, 2 ranks (mean one-way
//!   time);
//! - the `histo` example with 256-byte aggregation buffers (a message every
//!   64 updates), 2 ranks (wall time of the kernel);
//! - the `waves` example, 2 ranks: dependent waves (requests, replies,
//!   then `quiesce`, then the next wave; time per wave);
//! - the `demo` example's token ring over mixed transports: 4 ranks split
//!   into two "hosts" of 2 (two `fmrun`s with `--host-id`, meeting at a
//!   rendezvous on the loopback: shared memory within a host, TCP between),
//!   so the machine holds more ranks than cores although neither host
//!   sees it (time per hop).
//!
//! The first three run on the machine as it is ("quiet": `auto` and
//! `spin`) and beside one CPU-bound process per CPU ("busy": `auto`,
//! `spin`, `yield`, `sleep`); the ring runs without other load, under
//! every policy. The burners are this program (`fmbench burn`), started
//! before each run and killed after it (and bounded in time by
//! themselves). Rounds interleave every case, so machine drift falls on
//! all alike; the table gives medians and the ratios of `auto` over the
//! best of the others: target ≤ 1.2 busy and for the ring, ≤ 1.05 against
//! `spin` on a quiet machine.
//!
//! A run that outlives [`BusyOptions::limit`] (a `yield` ping-pong beside
//! the burners can) is killed and recorded as timed out; the other cases
//! go on. The table marks such cells and counts a timed-out run as slower
//! than every finished one in the median.

use crate::child;
use crate::stats::median;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What to run.
#[derive(Debug, Clone)]
pub struct BusyOptions {
    /// The cargo target directory with the release `fmrun` and examples.
    pub target: PathBuf,
    /// Rounds (each runs every case once).
    pub rounds: usize,
    /// Scale of the programs' sizes (1.0: 20,000 round trips, 2^18
    /// updates per rank, 125 waves, 62 laps of the ring: the waves and
    /// the ring are sized for the default scale of 16, where a badly
    /// chosen policy costs milliseconds per wave or hop).
    pub scale: f64,
    /// Where the children's output goes.
    pub out: PathBuf,
    /// Niceness of the ranks and the burners (`nice -n`; negative needs
    /// root): on a machine others use, a negative value makes the burners
    /// the competition the busy case measures, and the quiet case quiet.
    pub nice: i32,
    /// How long one run may last before it is killed and recorded as
    /// timed out.
    pub limit: Duration,
}

/// The programs measured: name, unit of the figure.
pub const KERNELS: [(&str, &str); 4] = [
    ("pingpong 0 B", "ns one-way"),
    ("histo 256 B buffers", "ms"),
    ("waves of 4 requests + quiesce", "µs per wave"),
    ("ring, 4 ranks on 2 hosts (shm + TCP)", "µs per hop"),
];

/// The mixed-transport ring ([`KERNELS`] index): quiet only, every policy.
const RING: usize = 3;

/// Policies measured on a busy machine.
pub const BUSY_POLICIES: [&str; 4] = ["auto", "spin", "yield", "sleep"];
/// Policies measured on a quiet machine.
pub const QUIET_POLICIES: [&str; 2] = ["auto", "spin"];

/// The (machine busy, policies) cases of kernel `k`.
fn cases(k: usize) -> Vec<(bool, &'static [&'static str])> {
    if k == RING {
        vec![(false, &BUSY_POLICIES[..])]
    } else {
        vec![(false, &QUIET_POLICIES[..]), (true, &BUSY_POLICIES[..])]
    }
}

/// One cell of the table: a kernel, a machine state, a policy, its runs.
#[derive(Debug, Clone)]
pub struct Cell {
    /// Index into [`KERNELS`].
    pub kernel: usize,
    /// With burners.
    pub busy: bool,
    /// `fmrun --wait`.
    pub policy: &'static str,
    /// One figure per finished round (lower is better).
    pub runs: Vec<f64>,
    /// Rounds killed at the time limit (no figure).
    pub timed_out: usize,
}

impl Cell {
    /// The median over every round, a timed-out round counting as slower
    /// than any finished one (infinite); `None` without rounds.
    pub fn median(&self) -> Option<f64> {
        let mut all = self.runs.clone();
        all.extend(std::iter::repeat_n(f64::INFINITY, self.timed_out));
        median(&all)
    }
}

/// What one run gave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// The program's figure.
    Figure(f64),
    /// Killed at the time limit.
    TimedOut,
}

/// A finished run's output, a timed-out run as [`Outcome::TimedOut`],
/// any other failure as the error's text.
fn finished(r: Result<String, child::ChildRunError>) -> Result<Option<String>, String> {
    match r {
        Ok(out) => Ok(Some(out)),
        Err(child::ChildRunError::Timeout { .. }) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// CPU-bound processes, killed when dropped.
struct Burners(Vec<Child>);

impl Burners {
    fn start(n: usize, nice: i32) -> Result<Burners, String> {
        let exe = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let c = Command::new("nice")
                .args(["-n", &nice.to_string()])
                .arg(&exe)
                .args(["burn", "--secs", "300"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .map_err(|e| format!("starting a burner: {e}"))?;
            v.push(c);
        }
        // Let them reach the run queue before the measured program starts.
        std::thread::sleep(Duration::from_millis(50));
        Ok(Burners(v))
    }
}

impl Drop for Burners {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `fmbench burn`: spin on one CPU for `secs` seconds (a burner).
pub fn burn(secs: u64) {
    let end = Instant::now() + Duration::from_secs(secs);
    let mut x = 0u64;
    while Instant::now() < end {
        for i in 0..100_000u64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
    }
}

fn field(out: &str, key: &str) -> Result<f64, String> {
    let line = out
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .ok_or_else(|| "no JSON line".to_owned())?;
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    v.get(key)
        .and_then(serde_json::Value::as_f64)
        .ok_or_else(|| format!("no {key} in {line}"))
}

/// The demo's "… 12.34 us per hop" line.
fn per_hop(out: &str) -> Result<f64, String> {
    out.lines()
        .find(|l| l.starts_with("ring"))
        .and_then(|l| l.strip_suffix(" us per hop"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| "no ring line with \"us per hop\"".to_owned())
}

/// A free port on the loopback for the rendezvous (the kernel's pick).
fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// The job secret both hosts' `fmrun`s read: a fresh file, mode 0600.
fn secret_file(dir: &Path) -> Result<PathBuf, String> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = dir.join("ring.secret");
    let _ = std::fs::remove_file(&path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    // 128 bits from the kernel's random source, hex.
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut r| std::io::Read::read_exact(&mut r, &mut b))
        .map_err(|e| format!("/dev/urandom: {e}"))?;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    writeln!(f, "{hex}").map_err(|e| e.to_string())?;
    Ok(path)
}

/// The mixed-transport ring: two `fmrun`s of 2 ranks each, "hosts" `a`
/// (ranks 0, 1) and `b` (ranks 2, 3), meeting on the loopback.
fn measure_ring(o: &BusyOptions, policy: &str, log: &Path) -> Result<Outcome, String> {
    let secret = secret_file(&o.out)?;
    let root = format!("127.0.0.1:{}", free_port()?);
    let job = format!("busy-ring-{}-{}", std::process::id(), free_port()?);
    let laps = ((1000.0 * o.scale / 16.0).round() as u64)
        .max(10)
        .to_string();
    let host = |id: &str, offset: &str| {
        let mut cmd = Command::new("nice");
        cmd.args(["-n", &o.nice.to_string()])
            .arg(o.target.join("release/fmrun"))
            .args(["-n", "2", "--size", "4", "--rank-offset", offset])
            .args(["--root", &root, "--job", &job, "--host-id", id])
            .arg("--secret-file")
            .arg(&secret)
            .args(["--wait", policy])
            .arg(o.target.join("release/examples/demo"))
            .args(["--laps", &laps, "--bytes", "64"]);
        cmd
    };
    let other_log = log.with_extension("b.log");
    let other_out = std::fs::File::create(&other_log).map_err(|e| e.to_string())?;
    let mut other = host("b", "2")
        .stdin(Stdio::null())
        .stdout(other_out.try_clone().map_err(|e| e.to_string())?)
        .stderr(other_out)
        .spawn()
        .map_err(|e| format!("starting host b's fmrun: {e}"))?;
    let out = child::run(host("a", "0"), o.limit, log);
    // Host b ends with the job; a few seconds' grace, then it is stopped.
    let end = Instant::now() + Duration::from_secs(10);
    let b_ok = loop {
        match other.try_wait() {
            Ok(Some(st)) => break st.success(),
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = other.kill();
                let _ = other.wait();
                break false;
            }
        }
    };
    let Some(out) = finished(out)? else {
        return Ok(Outcome::TimedOut);
    };
    if !b_ok {
        return Err(format!(
            "host b's fmrun failed (output in {})",
            other_log.display()
        ));
    }
    per_hop(&out).map(Outcome::Figure)
}

fn measure(o: &BusyOptions, kernel: usize, policy: &str, log: &Path) -> Result<Outcome, String> {
    if kernel == RING {
        return measure_ring(o, policy, log);
    }
    let mut cmd = Command::new("nice");
    cmd.args(["-n", &o.nice.to_string()])
        .arg(o.target.join("release/fmrun"))
        .args(["-n", "2", "--wait", policy]);
    let ex = o.target.join("release/examples");
    match kernel {
        0 => {
            cmd.arg(ex.join("pingpong")).args([
                "--json",
                "--sizes",
                "0",
                "--runs",
                "1",
                "--scale",
                &o.scale.to_string(),
            ]);
        }
        2 => {
            let waves = ((2000.0 * o.scale / 16.0).round() as u64).max(10);
            cmd.arg(ex.join("waves"))
                .args(["--json", "--waves", &waves.to_string()]);
        }
        _ => {
            let log_updates = (18.0 + o.scale.log2()).round().clamp(10.0, 24.0) as u32;
            cmd.arg(ex.join("histo")).args([
                "--json",
                "--buffer",
                "256",
                "--log-table",
                "16",
                "--log-updates",
                &log_updates.to_string(),
            ]);
        }
    }
    let Some(out) = finished(child::run(cmd, o.limit, log))? else {
        return Ok(Outcome::TimedOut);
    };
    match kernel {
        0 => field(&out, "one_way_ns_mean"),
        2 => field(&out, "wave_us"),
        _ => Ok(field(&out, "time_s")? * 1e3),
    }
    .map(Outcome::Figure)
}

/// Run every case `rounds` times, interleaved; progress on stderr. A run
/// past the time limit is counted in its cell's `timed_out` and the rest
/// go on.
///
/// # Errors
/// A program that fails or prints no figure.
pub fn run(o: &BusyOptions) -> Result<Vec<Cell>, String> {
    std::fs::create_dir_all(&o.out).map_err(|e| e.to_string())?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut cells = all_cells();
    rounds(o, &mut cells, |c, log| {
        let burners = if c.busy {
            Some(Burners::start(cpus, o.nice)?)
        } else {
            None
        };
        let v = measure(o, c.kernel, c.policy, log);
        drop(burners);
        v
    })?;
    Ok(cells)
}

/// Every case, no runs yet.
fn all_cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    for kernel in 0..KERNELS.len() {
        for (busy, policies) in cases(kernel) {
            for &p in policies {
                cells.push(Cell {
                    kernel,
                    busy,
                    policy: p,
                    runs: Vec::new(),
                    timed_out: 0,
                });
            }
        }
    }
    cells
}

/// `o.rounds` rounds over `cells`, `one` measuring a cell into its log
/// file; a timed-out run is counted and the next goes on.
fn rounds(
    o: &BusyOptions,
    cells: &mut [Cell],
    mut one: impl FnMut(&Cell, &Path) -> Result<Outcome, String>,
) -> Result<(), String> {
    for round in 0..o.rounds {
        for c in cells.iter_mut() {
            let log = o.out.join(format!(
                "{}-{}-{}-{round}.log",
                c.kernel,
                if c.busy { "busy" } else { "quiet" },
                c.policy
            ));
            let what = match one(c, &log)? {
                Outcome::Figure(v) => {
                    c.runs.push(v);
                    format!("{v:.1} {}", KERNELS[c.kernel].1)
                }
                Outcome::TimedOut => {
                    c.timed_out += 1;
                    format!(
                        "TIMED OUT (killed after {} s; output in {})",
                        o.limit.as_secs_f64(),
                        log.display()
                    )
                }
            };
            eprintln!(
                "busy round {round}: {} {} {}: {what}",
                KERNELS[c.kernel].0,
                if c.busy { "busy" } else { "quiet" },
                c.policy,
            );
        }
    }
    Ok(())
}

/// One cell's text: its median, or "timed out", with the number of
/// timed-out rounds when some finished.
fn cell_text(c: Option<&Cell>) -> String {
    let Some(c) = c else {
        return "–".to_owned();
    };
    let rounds = c.runs.len() + c.timed_out;
    match c.median() {
        None => "–".to_owned(),
        Some(m) if m.is_infinite() => format!("**timed out** ({}/{rounds})", c.timed_out),
        Some(m) if c.timed_out > 0 => format!("{m:.1} ({}/{rounds} **timed out**)", c.timed_out),
        Some(m) => format!("{m:.1}"),
    }
}

/// The table (Markdown) with the ratios and whether each target is met;
/// `limit` is the time limit a timed-out run was killed at.
pub fn markdown(cells: &[Cell], cpus: usize, load: &str, nice: i32, limit: Duration) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "2 ranks (the ring: 4, on two hosts of 2); busy = one CPU-bound process per CPU ({cpus}); ranks and burners at nice {nice}; load average before: {load}; medians of {} rounds, interleaved; lower is better.\n",
        cells.first().map_or(0, |c| c.runs.len() + c.timed_out)
    );
    let _ = writeln!(
        s,
        "| program | machine | auto | spin | yield | sleep | auto / best other | target |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---|");
    for (k, (name, unit)) in KERNELS.iter().enumerate() {
        for (busy, policies) in cases(k) {
            let cell = |p: &str| {
                cells
                    .iter()
                    .find(|c| c.kernel == k && c.busy == busy && c.policy == p)
            };
            let get = |p: &str| cell(p).and_then(Cell::median);
            let auto = get("auto");
            let others: Vec<f64> = ["spin", "yield", "sleep"]
                .iter()
                .filter_map(|p| get(p))
                .collect();
            let best = others.iter().copied().fold(f64::INFINITY, f64::min);
            // Quiet with `spin` alone beside `auto`: within 5 % of it;
            // otherwise within 20 % of the best.
            let target = if busy || policies.len() > 2 {
                1.2
            } else {
                1.05
            };
            // A timed-out `auto` misses; timed-out others are no best.
            let ratio = auto.filter(|_| best.is_finite()).map(|a| a / best);
            let verdict = ratio.map_or("–".to_owned(), |r| {
                format!(
                    "≤ {target}: {}",
                    if r <= target { "met" } else { "**missed**" }
                )
            });
            let ratio = ratio.map_or("–".to_owned(), |r| {
                if r.is_infinite() {
                    "∞ (timed out)".to_owned()
                } else {
                    format!("{r:.2}")
                }
            });
            let _ = writeln!(
                s,
                "| {name} ({unit}) | {} | {} | {} | {} | {} | {ratio} | {verdict} |",
                if busy { "busy" } else { "quiet" },
                cell_text(cell("auto")),
                cell_text(cell("spin")),
                cell_text(cell("yield")),
                cell_text(cell("sleep")),
            );
        }
    }
    let timed_out: usize = cells.iter().map(|c| c.timed_out).sum();
    if timed_out > 0 {
        let _ = writeln!(
            s,
            "\n**{timed_out} run(s) timed out**: killed after {} s, no figure; a timed-out round counts as slower than every finished one in its cell's median.",
            limit.as_secs_f64()
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    /// A scratch directory with `release/fmrun` a shell script of `body`.
    fn fake_target(name: &str, body: &str) -> BusyOptions {
        let dir = std::env::temp_dir().join(format!("fmbench-busy-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("release")).unwrap();
        let fmrun = dir.join("release/fmrun");
        std::fs::write(&fmrun, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&fmrun, std::fs::Permissions::from_mode(0o755)).unwrap();
        BusyOptions {
            target: dir.clone(),
            rounds: 1,
            scale: 1.0,
            out: dir,
            nice: 0,
            limit: Duration::from_millis(300),
        }
    }

    #[test]
    fn a_run_past_the_limit_is_timed_out_not_an_error() {
        let o = fake_target("slow", "exec sleep 30");
        let log = o.out.join("slow.log");
        assert_eq!(measure(&o, 0, "yield", &log), Ok(Outcome::TimedOut));
        let _ = std::fs::remove_dir_all(&o.out);
    }

    #[test]
    fn a_figure_is_read_and_a_failure_stays_an_error() {
        let o = fake_target("ok", r#"echo '{"one_way_ns_mean": 42.5}'"#);
        let log = o.out.join("ok.log");
        assert_eq!(measure(&o, 0, "auto", &log), Ok(Outcome::Figure(42.5)));
        let _ = std::fs::remove_dir_all(&o.out);
        let o = fake_target("fail", "exit 3");
        let log = o.out.join("fail.log");
        let e = measure(&o, 0, "auto", &log).unwrap_err();
        assert!(e.contains("exited with"), "{e}");
        let _ = std::fs::remove_dir_all(&o.out);
    }

    #[test]
    fn rounds_go_on_after_a_timeout_and_the_table_marks_it() {
        let mut o = fake_target("rounds", "exit 0");
        o.rounds = 3;
        let mut cells = all_cells();
        // Busy `yield` ping-pong times out in rounds 0 and 1, busy `sleep`
        // ping-pong in round 2; every other run gives a figure.
        let mut round_of = std::collections::HashMap::new();
        rounds(&o, &mut cells, |c, _| {
            let n = round_of.entry((c.kernel, c.busy, c.policy)).or_insert(0);
            *n += 1;
            let slow = c.kernel == 0
                && c.busy
                && ((c.policy == "yield" && *n <= 2) || (c.policy == "sleep" && *n == 3));
            Ok(if slow {
                Outcome::TimedOut
            } else {
                Outcome::Figure(10.0 * *n as f64)
            })
        })
        .unwrap();
        for c in &cells {
            assert_eq!(c.runs.len() + c.timed_out, 3, "{c:?}");
        }
        let find = |p: &str| {
            cells
                .iter()
                .find(|c| c.kernel == 0 && c.busy && c.policy == p)
                .unwrap()
        };
        assert_eq!(find("yield").timed_out, 2);
        assert_eq!(find("yield").median(), Some(f64::INFINITY));
        assert_eq!(find("sleep").timed_out, 1);
        assert_eq!(find("sleep").median(), Some(20.0));
        assert_eq!(find("auto").median(), Some(20.0));
        let table = markdown(&cells, 2, "0.0", 0, o.limit);
        let row = table
            .lines()
            .find(|l| l.starts_with("| pingpong") && l.contains("| busy |"))
            .unwrap();
        assert!(row.contains("**timed out** (2/3)"), "{row}");
        assert!(row.contains("20.0 (1/3 **timed out**)"), "{row}");
        assert!(
            table.contains("3 run(s) timed out**: killed after 0.3 s"),
            "{table}"
        );
        let _ = std::fs::remove_dir_all(&o.out);
    }
}
