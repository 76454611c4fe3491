//! What the figures were measured on: CPU model, cores, kernel, compiler,
//! commit, and the load at the start and end of the run (the machine is
//! shared, so the load says how noisy the figures may be).

use serde::Serialize;
use std::process::Command;

/// Description of the machine and build.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// `model name` from /proc/cpuinfo.
    pub cpu: String,
    /// Online CPUs.
    pub cpus: usize,
    /// Kernel release.
    pub kernel: String,
    /// Whether /proc/cpuinfo says we run under a hypervisor.
    pub virtualized: bool,
    /// `rustc --version`.
    pub rustc: String,
    /// `git describe --always --dirty` of the measured tree.
    pub commit: String,
    /// /proc/loadavg at the start.
    pub load_start: String,
    /// /proc/loadavg at the end (filled in by the suite).
    pub load_end: String,
    /// UTC date and time of the run.
    pub date: String,
}

fn cmd(prog: &str, args: &[&str]) -> String {
    Command::new(prog)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The current load average line.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

impl Machine {
    /// Describe this machine; `repo` is the measured repository.
    pub fn detect(repo: &std::path::Path) -> Machine {
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = info
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map_or_else(|| "unknown".to_owned(), |(_, m)| m.trim().to_owned());
        let virtualized = info
            .lines()
            .any(|l| l.starts_with("flags") && l.contains(" hypervisor"));
        let repo_s = repo.to_string_lossy();
        Machine {
            cpu,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|_| "unknown".to_owned()),
            virtualized,
            rustc: cmd("rustc", &["--version"]),
            commit: cmd("git", &["-C", &repo_s, "describe", "--always", "--dirty"]),
            load_start: loadavg(),
            load_end: String::new(),
            date: cmd("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        }
    }

    /// One line for reports.
    pub fn summary(&self) -> String {
        format!(
            "{} ({} CPUs{}), Linux {}, {}, commit {}; load average {} at start, {} at end; {}",
            self.cpu,
            self.cpus,
            if self.virtualized {
                ", virtual machine"
            } else {
                ""
            },
            self.kernel,
            self.rustc,
            self.commit,
            self.load_start,
            self.load_end,
            self.date
        )
    }
}
