//! `fmbench busy`: the wait policies on a busy machine and on a quiet one.
//!
//! Two fine-grained 2-rank programs — the `pingpong` example's 0-byte
//! ping-pong (mean one-way time) and the `histo` example with 256-byte
//! aggregation buffers (a message every 64 updates; wall time of the
//! kernel) — run under `fmrun --wait P` for each policy, first on the
//! machine as it is ("quiet": `auto` and `spin`), then beside one CPU-bound
//! process per CPU ("busy": `auto`, `spin`, `yield`, `sleep`). The burners
//! are this program (`fmbench burn`), started before each run and killed
//! after it (and bounded in time by themselves). Rounds interleave every
//! case, so machine drift falls on all alike; the table gives medians and
//! the ratios: busy, `auto` over the best of the others (target
//! ≤ 1.2); quiet, `auto` over `spin` (target ≤ 1.05).

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
    /// updates per rank).
    pub scale: f64,
    /// Where the children's output goes.
    pub out: PathBuf,
    /// Niceness of the ranks and the burners (`nice -n`; negative needs
    /// root): on a machine others use, a negative value makes the burners
    /// the competition the busy case measures, and the quiet case quiet.
    pub nice: i32,
}

/// The programs measured: name, unit of the figure.
pub const KERNELS: [(&str, &str); 2] = [
    ("pingpong 0 B", "ns one-way"),
    ("histo 256 B buffers", "ms"),
];

/// Policies measured on a busy machine.
pub const BUSY_POLICIES: [&str; 4] = ["auto", "spin", "yield", "sleep"];
/// Policies measured on a quiet machine.
pub const QUIET_POLICIES: [&str; 2] = ["auto", "spin"];

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

fn measure(o: &BusyOptions, kernel: usize, policy: &str, log: &Path) -> Result<f64, String> {
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
        for p in QUIET_POLICIES {
            cells.push(Cell {
                kernel,
                busy: false,
                policy: p,
                runs: Vec::new(),
            });
        }
        for p in BUSY_POLICIES {
            cells.push(Cell {
                kernel,
                busy: true,
                policy: p,
                runs: Vec::new(),
            });
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
        "2 ranks; busy = one CPU-bound process per CPU ({cpus}); ranks and burners at nice {nice}; load average before: {load}; medians of {} rounds, interleaved; lower is better.\n",
        cells.first().map_or(0, |c| c.runs.len())
    );
    let _ = writeln!(
        s,
        "| program | machine | auto | spin | yield | sleep | auto / best other | target |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---|");
    for (k, (name, unit)) in KERNELS.iter().enumerate() {
        for busy in [false, true] {
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
            let (ratio, limit) = match auto {
                Some(a) if best.is_finite() => (Some(a / best), if busy { 1.2 } else { 1.05 }),
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
