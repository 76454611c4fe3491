//! What a run measured, and how it is written: medians over rounds, CSV
//! (every raw row, and the summary), a Markdown report with the ratios to
//! Open MPI and the targets marked met or missed.

use crate::anchor::MpiPoint;
use crate::copy::CopyPlan;
use crate::fastmsg_run::PingpongPoint;
use crate::machine::Machine;
use crate::stats::median;
use crate::ucx::{UcxCase, UcxResult};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

/// The series name of Open MPI's rows.
pub const MPI: &str = "Open MPI";
/// The main fastmsg series (the first point-to-point set-up).
pub const FASTMSG: &str = "fastmsg shm";

/// One point-to-point measurement of one series, size and round.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Series (`fastmsg shm`, `Open MPI`, …).
    pub series: String,
    /// Round (1-based).
    pub round: u32,
    /// Message size, bytes.
    pub size: usize,
    /// One-way latency, ns: mean per run, median over runs (MPI's method).
    pub lat_mean_ns: Option<f64>,
    /// One-way latency p50 over iterations, ns.
    pub lat_p50_ns: Option<f64>,
    /// One-way latency p99 over iterations, ns.
    pub lat_p99_ns: Option<f64>,
    /// Streamed bandwidth, MB/s (1e6 B/s).
    pub bw_mb_s: Option<f64>,
    /// Windowed message rate, million messages/s.
    pub rate_m_s: Option<f64>,
}

impl Row {
    /// A row from `pingpong --json`.
    pub fn from_pingpong(series: &str, round: u32, p: &PingpongPoint) -> Row {
        Row {
            series: series.to_owned(),
            round,
            size: p.size,
            lat_mean_ns: p.one_way_ns_mean,
            lat_p50_ns: p.one_way_ns_p50,
            lat_p99_ns: p.one_way_ns_p99,
            bw_mb_s: Some(p.bandwidth_mb_s),
            rate_m_s: p.msg_rate_m_s,
        }
    }

    /// A row from `bench_mpi`.
    pub fn from_mpi(round: u32, p: &MpiPoint) -> Row {
        Row {
            series: MPI.to_owned(),
            round,
            size: p.size,
            lat_mean_ns: p.lat_ns,
            lat_p50_ns: None,
            lat_p99_ns: None,
            bw_mb_s: p.bw_mb_s,
            rate_m_s: p.rate_m_s,
        }
    }
}

impl Row {
    /// A row from `ucx_perftest` (series `UCX <test>`): one-way latency
    /// for the latency tests, message rate for `ucp_am_bw`.
    pub fn from_ucx(round: u32, c: &UcxCase, r: &UcxResult) -> Row {
        let lat = c.is_latency();
        Row {
            series: c.series(),
            round,
            size: c.size,
            lat_mean_ns: lat.then_some(r.avg_us * 1e3),
            lat_p50_ns: lat.then_some(r.p50_us * 1e3),
            lat_p99_ns: None,
            bw_mb_s: None,
            rate_m_s: (!lat).then_some(r.msg_per_s / 1e6),
        }
    }
}

/// A single-number measurement (extract cost, raw ping-pong, collectives).
#[derive(Debug, Clone, PartialEq)]
pub struct Scalar {
    /// What was measured.
    pub name: String,
    /// Who (`fastmsg`, `Open MPI`, `hardware`).
    pub series: String,
    /// Round.
    pub round: u32,
    /// Value.
    pub value: f64,
    /// Unit.
    pub unit: String,
}

impl Scalar {
    /// A scalar.
    pub fn new(name: &str, series: &str, round: u32, value: f64, unit: &str) -> Scalar {
        Scalar {
            name: name.to_owned(),
            series: series.to_owned(),
            round,
            value,
            unit: unit.to_owned(),
        }
    }
}

/// Everything one run of the suite produced.
#[derive(Debug, Clone)]
pub struct Results {
    /// The machine.
    pub machine: Machine,
    /// `quick` or `full`.
    pub profile: String,
    /// Point-to-point rows.
    pub rows: Vec<Row>,
    /// Single numbers.
    pub scalars: Vec<Scalar>,
    /// The copy plan measured in this run.
    pub copy_plan: Option<CopyPlan>,
    /// What was not measured and why, and other remarks.
    pub notes: Vec<String>,
    /// Steps that failed.
    pub failures: Vec<String>,
    /// Wall time of the run.
    pub elapsed_s: f64,
}

/// Which metric of a [`Row`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// `lat_mean_ns`.
    LatMean,
    /// `lat_p50_ns`.
    LatP50,
    /// `lat_p99_ns`.
    LatP99,
    /// `bw_mb_s`.
    Bw,
    /// `rate_m_s`.
    Rate,
}

impl Metric {
    fn of(self, r: &Row) -> Option<f64> {
        match self {
            Metric::LatMean => r.lat_mean_ns,
            Metric::LatP50 => r.lat_p50_ns,
            Metric::LatP99 => r.lat_p99_ns,
            Metric::Bw => r.bw_mb_s,
            Metric::Rate => r.rate_m_s,
        }
    }
}

/// One of the targets, evaluated.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// The target as the issue states it.
    pub target: String,
    /// fastmsg's figure.
    pub ours: Option<f64>,
    /// The reference figure.
    pub reference: Option<f64>,
    /// Unit of both.
    pub unit: &'static str,
    /// ours / reference.
    pub ratio: Option<f64>,
    /// The bound on the ratio (or on `ours` when there is no reference).
    pub bound: f64,
    /// Whether a lower ratio is better.
    pub lower_is_better: bool,
    /// Whether the bound applies to `ours` itself (no reference).
    pub absolute: bool,
}

impl Verdict {
    /// `met`, `missed` or `not measured`.
    pub fn status(&self) -> &'static str {
        let v = if self.absolute { self.ours } else { self.ratio };
        match v {
            None => "not measured",
            Some(x)
                if (self.lower_is_better && x <= self.bound)
                    || (!self.lower_is_better && x >= self.bound) =>
            {
                "met"
            }
            Some(_) => "missed",
        }
    }
}

impl Results {
    /// Empty results for `machine`.
    pub fn new(machine: Machine, profile: &str) -> Results {
        Results {
            machine,
            profile: profile.to_owned(),
            rows: Vec::new(),
            scalars: Vec::new(),
            copy_plan: None,
            notes: Vec::new(),
            failures: Vec::new(),
            elapsed_s: 0.0,
        }
    }

    /// All values of `metric` for `series` at `size`, one per round.
    pub fn values(&self, series: &str, size: usize, metric: Metric) -> Vec<f64> {
        self.rows
            .iter()
            .filter(|r| r.series == series && r.size == size)
            .filter_map(|r| metric.of(r))
            .collect()
    }

    /// Median over rounds.
    pub fn med(&self, series: &str, size: usize, metric: Metric) -> Option<f64> {
        median(&self.values(series, size, metric))
    }

    /// Median over rounds of a scalar.
    pub fn scalar(&self, name: &str, series: &str) -> Option<f64> {
        let v: Vec<f64> = self
            .scalars
            .iter()
            .filter(|s| s.name == name && s.series == series)
            .map(|s| s.value)
            .collect();
        median(&v)
    }

    /// Series names, in first-seen order.
    pub fn series(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for r in &self.rows {
            if !v.contains(&r.series) {
                v.push(r.series.clone());
            }
        }
        v
    }

    /// Sizes measured for `series`, ascending.
    pub fn sizes(&self, series: &str) -> Vec<usize> {
        let s: BTreeSet<usize> = self
            .rows
            .iter()
            .filter(|r| r.series == series)
            .map(|r| r.size)
            .collect();
        s.into_iter().collect()
    }

    /// The targets, evaluated on the medians of this run.
    pub fn verdicts(&self) -> Vec<Verdict> {
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b != 0.0 => Some(a / b),
            _ => None,
        };
        let v = |target: &str, ours, reference, unit, bound, lower| Verdict {
            target: target.to_owned(),
            ours,
            reference,
            unit,
            ratio: ratio(ours, reference),
            bound,
            lower_is_better: lower,
            absolute: false,
        };
        let lat0 = self.med(FASTMSG, 0, Metric::LatMean);
        // Two lines (a ping line and a pong line, each written by one side)
        // is the queue's own pattern and the issue's ~55 ns anchor.
        let phys = self.scalar("raw cache-line ping-pong, 2 line(s), one-way", "hardware");
        vec![
            v(
                "0 B one-way latency ≤ 0.7× Open MPI",
                lat0,
                self.med(MPI, 0, Metric::LatMean),
                "ns",
                0.7,
                true,
            ),
            v(
                "0 B one-way latency ≤ 2.5× raw cache-line ping-pong (2 lines)",
                lat0,
                phys,
                "ns",
                2.5,
                true,
            ),
            v(
                "1 KiB one-way latency ≤ 0.8× Open MPI",
                self.med(FASTMSG, 1024, Metric::LatMean),
                self.med(MPI, 1024, Metric::LatMean),
                "ns",
                0.8,
                true,
            ),
            v(
                "64 KiB bandwidth ≥ 1.2× Open MPI",
                self.med(FASTMSG, 65536, Metric::Bw),
                self.med(MPI, 65536, Metric::Bw),
                "MB/s",
                1.2,
                false,
            ),
            v(
                "1 MiB bandwidth ≥ 2× Open MPI",
                self.med(FASTMSG, 1 << 20, Metric::Bw),
                self.med(MPI, 1 << 20, Metric::Bw),
                "MB/s",
                2.0,
                false,
            ),
            v(
                "0 B message rate ≥ 1.5× Open MPI",
                self.med(FASTMSG, 0, Metric::Rate),
                self.med(MPI, 0, Metric::Rate),
                "M msg/s",
                1.5,
                false,
            ),
            Verdict {
                absolute: true,
                ..v(
                    "empty extract ≤ 3 ns per transport",
                    self.scalar("empty extract per transport", "fastmsg"),
                    None,
                    "ns",
                    3.0,
                    true,
                )
            },
        ]
    }

    /// Write `rows.csv`, `scalars.csv` and `summary.csv` into `dir`.
    ///
    /// # Errors
    /// An I/O error.
    pub fn write_csv(&self, dir: &Path) -> std::io::Result<()> {
        let o = |x: Option<f64>| x.map_or_else(String::new, |v| format!("{v:.3}"));
        let mut s =
            String::from("series,round,size,lat_mean_ns,lat_p50_ns,lat_p99_ns,bw_mb_s,rate_m_s\n");
        for r in &self.rows {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{}",
                r.series,
                r.round,
                r.size,
                o(r.lat_mean_ns),
                o(r.lat_p50_ns),
                o(r.lat_p99_ns),
                o(r.bw_mb_s),
                o(r.rate_m_s)
            );
        }
        std::fs::write(dir.join("rows.csv"), s)?;
        let mut s = String::from("name,series,round,value,unit\n");
        for x in &self.scalars {
            let _ = writeln!(
                s,
                "{},{},{},{:.3},{}",
                x.name, x.series, x.round, x.value, x.unit
            );
        }
        std::fs::write(dir.join("scalars.csv"), s)?;
        let mut s =
            String::from("series,size,lat_mean_ns,lat_p50_ns,lat_p99_ns,bw_mb_s,rate_m_s,rounds\n");
        for series in self.series() {
            for size in self.sizes(&series) {
                let _ = writeln!(
                    s,
                    "{series},{size},{},{},{},{},{},{}",
                    o(self.med(&series, size, Metric::LatMean)),
                    o(self.med(&series, size, Metric::LatP50)),
                    o(self.med(&series, size, Metric::LatP99)),
                    o(self.med(&series, size, Metric::Bw)),
                    o(self.med(&series, size, Metric::Rate)),
                    self.rows
                        .iter()
                        .filter(|r| r.series == series && r.size == size)
                        .count()
                );
            }
        }
        std::fs::write(dir.join("summary.csv"), s)
    }

    /// The Markdown report.
    pub fn markdown(&self) -> String {
        let f = |x: Option<f64>, d: usize| x.map_or_else(|| "–".to_owned(), |v| format!("{v:.d$}"));
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b != 0.0 => format!("{:.2}×", a / b),
            _ => "–".to_owned(),
        };
        let mut m = String::new();
        let _ = writeln!(
            m,
            "# fastmsg benchmark results ({} profile)\n",
            self.profile
        );
        let _ = writeln!(m, "Machine: {}.\n", self.machine.summary());
        let _ = writeln!(
            m,
            "Suite wall time {:.0} s. Medians over rounds; every round runs every measurement once, interleaved. \
             fastmsg: `fmrun -n 2 pingpong` (plain-function handlers, one-way = RTT/2, rank i pinned to CPU i with `taskset`); \
             Open MPI: `bench_mpi` from `benches/c` (`mpirun --bind-to core`). \
             Collectives: `fmrun -n N collectives` with the `auto` algorithm (allreduce of one f64), the slowest rank's mean over the iterations after 100 warm-up, median of runs; \
             Open MPI's with more than 2 ranks run `--bind-to none --mca mpi_yield_when_idle 1`. MB/s = 1e6 B/s.\n",
            self.elapsed_s
        );
        if !self.notes.is_empty() || !self.failures.is_empty() {
            let _ = writeln!(m, "## Notes\n");
            for n in &self.notes {
                let _ = writeln!(m, "- {n}");
            }
            for n in &self.failures {
                let _ = writeln!(m, "- **failed**: {n}");
            }
            let _ = writeln!(m);
        }
        let _ = writeln!(m, "## Targets (issue 6)\n");
        let _ = writeln!(
            m,
            "| target | fastmsg | reference | ratio | verdict |\n|---|---:|---:|---:|---|"
        );
        for v in self.verdicts() {
            let _ = writeln!(
                m,
                "| {} | {} {} | {} | {} | {} |",
                v.target,
                f(v.ours, 2),
                v.unit,
                v.reference
                    .map_or_else(|| "–".to_owned(), |r| format!("{r:.2} {}", v.unit)),
                v.ratio
                    .map_or_else(|| "–".to_owned(), |r| format!("{r:.2}×")),
                v.status()
            );
        }
        let _ = writeln!(m);
        let _ = writeln!(m, "## Point to point: {FASTMSG} vs {MPI}\n");
        let _ = writeln!(
            m,
            "| size | fastmsg one-way ns (mean / p50 / p99) | Open MPI ns | lat ratio | fastmsg MB/s | Open MPI MB/s | bw ratio | fastmsg Mmsg/s | Open MPI Mmsg/s | fastmsg mean ns, range over rounds |"
        );
        let _ = writeln!(m, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for size in self.sizes(FASTMSG) {
            let lm = self.med(FASTMSG, size, Metric::LatMean);
            let ml = self.med(MPI, size, Metric::LatMean);
            let bw = self.med(FASTMSG, size, Metric::Bw);
            let mb = self.med(MPI, size, Metric::Bw);
            let _ = writeln!(
                m,
                "| {} | {} / {} / {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                human(size),
                f(lm, 0),
                f(self.med(FASTMSG, size, Metric::LatP50), 0),
                f(self.med(FASTMSG, size, Metric::LatP99), 0),
                f(ml, 0),
                ratio(lm, ml),
                f(bw, 0),
                f(mb, 0),
                ratio(bw, mb),
                f(self.med(FASTMSG, size, Metric::Rate), 2),
                f(self.med(MPI, size, Metric::Rate), 2),
                range(&self.values(FASTMSG, size, Metric::LatMean)),
            );
        }
        let _ = writeln!(m);
        self.ucx_markdown(&mut m);
        let copy_series: Vec<String> = self
            .series()
            .into_iter()
            .filter(|s| s.starts_with("fastmsg shm, "))
            .collect();
        if !copy_series.is_empty() || self.copy_plan.is_some() {
            let _ = writeln!(m, "## Frame copy strategy (HPVM §6)\n");
            if let Some(p) = &self.copy_plan {
                let t = if p.threshold == usize::MAX {
                    "never".to_owned()
                } else {
                    human(p.threshold)
                };
                let _ = writeln!(
                    m,
                    "Tuned plan: **{}** from {t} per copy. Probe (producer copies chunks into a 256 KiB frame ring, a consumer thread copies them out; GB/s, median of 3):\n",
                    p.strategy.name()
                );
                let _ = writeln!(
                    m,
                    "| chunk | plain GB/s | vector GB/s | stream GB/s |\n|---:|---:|---:|---:|"
                );
                for r in &p.samples {
                    let _ = writeln!(
                        m,
                        "| {} | {:.2} | {:.2} | {:.2} |",
                        human(r.chunk),
                        r.plain_gb_s,
                        r.vector_gb_s,
                        r.stream_gb_s
                    );
                }
                let _ = writeln!(m);
            }
            if !copy_series.is_empty() {
                let _ = write!(m, "| size | tuned (default) MB/s |");
                for s in &copy_series {
                    let _ = write!(m, " {} MB/s |", s.trim_start_matches("fastmsg shm, "));
                }
                let _ = writeln!(m);
                let _ = writeln!(m, "|---:|---:|{}", "---:|".repeat(copy_series.len()));
                for size in self.sizes(&copy_series[0]) {
                    let _ = write!(
                        m,
                        "| {} | {} |",
                        human(size),
                        f(self.med(FASTMSG, size, Metric::Bw), 0)
                    );
                    for s in &copy_series {
                        let _ = write!(m, " {} |", f(self.med(s, size, Metric::Bw), 0));
                    }
                    let _ = writeln!(m);
                }
                let _ = writeln!(m);
            }
        }
        let names: BTreeSet<(String, String)> = self
            .scalars
            .iter()
            .map(|s| (s.name.clone(), s.unit.clone()))
            .collect();
        if !names.is_empty() {
            let _ = writeln!(m, "## Single figures\n");
            let _ = writeln!(m, "| measurement | fastmsg | Open MPI | hardware | unit | rounds |\n|---|---:|---:|---:|---|---:|");
            for (n, unit) in names {
                let _ = writeln!(
                    m,
                    "| {n} | {} | {} | {} | {unit} | {} |",
                    f(self.scalar(&n, "fastmsg"), 2),
                    f(self.scalar(&n, MPI), 2),
                    f(self.scalar(&n, "hardware"), 1),
                    self.scalars
                        .iter()
                        .filter(|s| s.name == n)
                        .map(|s| s.round)
                        .collect::<BTreeSet<_>>()
                        .len()
                );
            }
            let _ = writeln!(m);
        }
        let _ = writeln!(m, "Plots: `latency.svg`, `bandwidth.svg`{}. Raw data: `rows.csv`, `scalars.csv`; medians: `summary.csv`; program output: `raw/`.", if copy_series.is_empty() { "" } else { ", `copy.svg`" });
        m
    }
}

impl Results {
    /// The UCX section: fastmsg's one-way latency and message rate beside
    /// Open MPI's and UCX's (`ucx_perftest`, whose smallest size is 8 B),
    /// with fastmsg's ratio to each. Nothing when UCX was not measured.
    fn ucx_markdown(&self, m: &mut String) {
        let am_lat = "UCX ucp_am_lat";
        let tag_lat = "UCX tag_lat";
        let am_bw = "UCX ucp_am_bw";
        if !self
            .series()
            .iter()
            .any(|s| s.starts_with(crate::ucx::SERIES_PREFIX))
        {
            return;
        }
        let f = |x: Option<f64>, d: usize| x.map_or_else(|| "–".to_owned(), |v| format!("{v:.d$}"));
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b != 0.0 => format!("{:.2}×", a / b),
            _ => "–".to_owned(),
        };
        let _ = writeln!(
            m,
            "## UCX beside Open MPI
"
        );
        let _ = writeln!(
            m,
            "UCX: `ucx_perftest` over shared memory (`UCX_TLS=posix,self`, server `taskset -c 0`, client `taskset -c 1`, as `fmbench ucx`); one-way latency = its average (p50 in brackets), message rate = `ucp_am_bw`'s average. UCX's smallest size is 8 B: fastmsg's 0 B figures are compared with UCX's 8 B.\n"
        );
        let _ = writeln!(
            m,
            "| figure | fastmsg | Open MPI | UCX `ucp_am` | UCX `tag` | vs Open MPI | vs UCX `ucp_am` | vs UCX `tag` |\n|---|---:|---:|---:|---:|---:|---:|---:|"
        );
        let lat_row = |m: &mut String, label: &str, size: usize, ucx_size: usize| {
            let ours = self.med(FASTMSG, size, Metric::LatMean);
            let mpi = self.med(MPI, size, Metric::LatMean);
            let am = self.med(am_lat, ucx_size, Metric::LatMean);
            let tag = self.med(tag_lat, ucx_size, Metric::LatMean);
            let with_p50 = |series: &str, v: Option<f64>| match (
                v,
                self.med(series, ucx_size, Metric::LatP50),
            ) {
                (Some(v), Some(p)) => format!("{v:.0} ({p:.0})"),
                (v, _) => f(v, 0),
            };
            let _ = writeln!(
                m,
                "| {label} one-way, ns | {} | {} | {} | {} | {} | {} | {} |",
                f(ours, 0),
                f(mpi, 0),
                with_p50(am_lat, am),
                with_p50(tag_lat, tag),
                ratio(ours, mpi),
                ratio(ours, am),
                ratio(ours, tag)
            );
        };
        lat_row(m, "0 B (UCX 8 B)", 0, 8);
        lat_row(m, "64 B", 64, 64);
        lat_row(m, "1 KiB", 1024, 1024);
        let ours = self.med(FASTMSG, 0, Metric::Rate);
        let mpi = self.med(MPI, 0, Metric::Rate);
        let am = self.med(am_bw, 8, Metric::Rate);
        let _ = writeln!(
            m,
            "| 0 B message rate (UCX 8 B), M msg/s | {} | {} | {} | – | {} | {} | – |\n",
            f(ours, 2),
            f(mpi, 2),
            f(am, 2),
            ratio(ours, mpi),
            ratio(ours, am)
        );
    }
}

/// `lo–hi` of `v` (rounded), or `–`.
fn range(v: &[f64]) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if lo.is_finite() && hi.is_finite() {
        format!("{lo:.0}–{hi:.0}")
    } else {
        "–".to_owned()
    }
}

/// `1 KiB`, `4 MiB`, `12 B`.
pub fn human(size: usize) -> String {
    if size >= 1 << 20 && size % (1 << 20) == 0 {
        format!("{} MiB", size >> 20)
    } else if size >= 1024 && size % 1024 == 0 {
        format!("{} KiB", size >> 10)
    } else {
        format!("{size} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(series: &str, round: u32, size: usize, lat: f64, bw: f64, rate: f64) -> Row {
        Row {
            series: series.into(),
            round,
            size,
            lat_mean_ns: Some(lat),
            lat_p50_ns: Some(lat),
            lat_p99_ns: Some(lat * 2.0),
            bw_mb_s: Some(bw),
            rate_m_s: Some(rate),
        }
    }

    fn machine() -> Machine {
        Machine::detect(Path::new("."))
    }

    #[test]
    fn verdicts_follow_the_medians() {
        let mut r = Results::new(machine(), "test");
        for (round, lat) in [(1, 100.0), (2, 120.0), (3, 500.0)] {
            r.rows.push(row(FASTMSG, round, 0, lat, 0.0, 30.0));
            r.rows.push(row(MPI, round, 0, 200.0, 0.0, 10.0));
        }
        r.scalars.push(Scalar::new(
            "empty extract per transport",
            "fastmsg",
            1,
            4.0,
            "ns",
        ));
        let v = r.verdicts();
        // Median 120 (the outlier 500 is ignored): 0.6× ≤ 0.7.
        assert!((v[0].ratio.unwrap() - 0.6).abs() < 1e-9);
        assert_eq!(v[0].status(), "met");
        assert_eq!(
            v[1].status(),
            "not measured",
            "no raw ping-pong in this run"
        );
        assert_eq!(v[5].status(), "met", "30 vs 10 M msg/s is 3×");
        assert_eq!(v[6].status(), "missed", "4 ns > 3 ns");
        let md = r.markdown();
        assert!(
            md.contains(
                "| 0 B one-way latency ≤ 0.7× Open MPI | 120.00 ns | 200.00 ns | 0.60× | met |"
            ),
            "{md}"
        );
    }

    #[test]
    fn ucx_section_gives_ratios_to_open_mpi_and_ucx() {
        use crate::ucx::CASES;
        let mut r = Results::new(machine(), "test");
        assert!(!r.markdown().contains("## UCX"), "no UCX rows, no section");
        r.rows.push(row(FASTMSG, 1, 0, 80.0, 0.0, 30.0));
        r.rows.push(row(MPI, 1, 0, 100.0, 0.0, 20.0));
        r.rows.push(row(FASTMSG, 1, 64, 150.0, 0.0, 1.0));
        let res = |avg_us, msg_per_s| UcxResult {
            p50_us: avg_us / 2.0,
            avg_us,
            msg_per_s,
        };
        let case = |t: &str, s: usize| *CASES.iter().find(|c| c.test == t && c.size == s).unwrap();
        r.rows
            .push(Row::from_ucx(1, &case("ucp_am_lat", 8), &res(0.160, 0.0)));
        r.rows
            .push(Row::from_ucx(1, &case("tag_lat", 8), &res(0.100, 0.0)));
        r.rows
            .push(Row::from_ucx(1, &case("ucp_am_bw", 8), &res(0.0, 15e6)));
        r.rows
            .push(Row::from_ucx(1, &case("ucp_am_lat", 64), &res(0.500, 0.0)));
        let md = r.markdown();
        assert!(
            md.contains("| 0 B (UCX 8 B) one-way, ns | 80 | 100 | 160 (80) | 100 (50) | 0.80× | 0.50× | 0.80× |"),
            "{md}"
        );
        assert!(
            md.contains("| 64 B one-way, ns | 150 | – | 500 (250) | – | – | 0.30× | – |"),
            "{md}"
        );
        assert!(
            md.contains("| 0 B message rate (UCX 8 B), M msg/s | 30.00 | 20.00 | 15.00 | – | 1.50× | 2.00× | – |"),
            "{md}"
        );
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(1024), "1 KiB");
        assert_eq!(human(4 << 20), "4 MiB");
        assert_eq!(human(1500), "1500 B");
    }
}
