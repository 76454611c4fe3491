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
    /// One figure per round (lower is better).
    pub runs: Vec<f64>,
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
fn measure_ring(o: &BusyOptions, policy: &str, log: &Path) -> Result<f64, String> {
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
    let out = child::run(host("a", "0"), Duration::from_secs(180), log);
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
    let out = out.map_err(|e| e.to_string())?;
    if !b_ok {
        return Err(format!(
            "host b's fmrun failed (output in {})",
            other_log.display()
        ));
    }
    per_hop(&out)
}

fn measure(o: &BusyOptions, kernel: usize, policy: &str, log: &Path) -> Result<f64, String> {
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
    let out = child::run(cmd, Duration::from_secs(180), log).map_err(|e| e.to_string())?;
    match kernel {
        0 => field(&out, "one_way_ns_mean"),
        2 => field(&out, "wave_us"),
        _ => Ok(field(&out, "time_s")? * 1e3),
    }
}

/// Run every case `rounds` times, interleaved; progress on stderr.
///
/// # Errors
/// A program that fails, times out or prints no figure.
pub fn run(o: &BusyOptions) -> Result<Vec<Cell>, String> {
    std::fs::create_dir_all(&o.out).map_err(|e| e.to_string())?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut cells = Vec::new();
    for kernel in 0..KERNELS.len() {
        for (busy, policies) in cases(kernel) {
            for &p in policies {
                cells.push(Cell {
                    kernel,
                    busy,
                    policy: p,
                    runs: Vec::new(),
                });
            }
        }
    }
    for round in 0..o.rounds {
        for c in &mut cells {
            let log = o.out.join(format!(
                "{}-{}-{}-{round}.log",
                c.kernel,
                if c.busy { "busy" } else { "quiet" },
                c.policy
            ));
            let burners = if c.busy {
                Some(Burners::start(cpus, o.nice)?)
            } else {
                None
            };
            let v = measure(o, c.kernel, c.policy, &log);
            drop(burners);
            let v = v?;
            eprintln!(
                "busy round {round}: {} {} {}: {v:.1} {}",
                KERNELS[c.kernel].0,
                if c.busy { "busy" } else { "quiet" },
                c.policy,
                KERNELS[c.kernel].1
            );
            c.runs.push(v);
        }
    }
    Ok(cells)
}

/// The table (Markdown) with the ratios and whether each target is met.
pub fn markdown(cells: &[Cell], cpus: usize, load: &str, nice: i32) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "2 ranks (the ring: 4, on two hosts of 2); busy = one CPU-bound process per CPU ({cpus}); ranks and burners at nice {nice}; load average before: {load}; medians of {} rounds, interleaved; lower is better.\n",
        cells.first().map_or(0, |c| c.runs.len())
    );
    let _ = writeln!(
        s,
        "| program | machine | auto | spin | yield | sleep | auto / best other | target |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---|");
    for (k, (name, unit)) in KERNELS.iter().enumerate() {
        for (busy, policies) in cases(k) {
            let get = |p: &str| {
                cells
                    .iter()
                    .find(|c| c.kernel == k && c.busy == busy && c.policy == p)
                    .and_then(|c| median(&c.runs))
            };
            let fmt = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.1}"));
            let auto = get("auto");
            let others: Vec<f64> = ["spin", "yield", "sleep"]
                .iter()
                .filter_map(|p| get(p))
                .collect();
            let best = others.iter().copied().fold(f64::INFINITY, f64::min);
            // Quiet with `spin` alone beside `auto`: within 5 % of it;
            // otherwise within 20 % of the best.
            let limit = if busy || policies.len() > 2 {
                1.2
            } else {
                1.05
            };
            let (ratio, limit) = match auto {
                Some(a) if best.is_finite() => (Some(a / best), limit),
                _ => (None, 0.0),
            };
            let verdict = ratio.map_or("–".to_owned(), |r| {
                format!(
                    "≤ {limit}: {}",
                    if r <= limit { "met" } else { "**missed**" }
                )
            });
            let _ = writeln!(
                s,
                "| {name} ({unit}) | {} | {} | {} | {} | {} | {} | {verdict} |",
                if busy { "busy" } else { "quiet" },
                fmt(auto),
                fmt(get("spin")),
                fmt(get("yield")),
                fmt(get("sleep")),
                ratio.map_or("–".to_owned(), |r| format!("{r:.2}")),
            );
        }
    }
    s
}
