//! The configuration report (`fastmsg-info`, `FASTMSG_VERBOSE_ENV=1`):
//! every setting with its effective value and where it came from, the
//! transports and devices this build and host offer, the copy plan, and
//! the CPU facts the `auto` wait policy decides by.

use super::config::Config;
use super::wait::WaitPolicy;
use crate::bootstrap::Launcher;
use crate::settings::{self, env, Setting, FLAGS_VAR, SETTINGS, VERBOSE_VAR};
use crate::topology::{Cpus, MaskReading};
use std::fmt::Write as _;

/// Settings that describe the job rather than tune it.
const JOB_SETTINGS: &[&str] = &[
    "FASTMSG_RANK",
    "FASTMSG_SIZE",
    "FASTMSG_LOCAL_RANK",
    "FASTMSG_LOCAL_SIZE",
    "FASTMSG_JOB",
];

/// Where a setting's value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The built-in default.
    Default,
    /// The environment (set by the user or a script).
    Environment,
    /// An `fmrun` option (which passes it on in the environment).
    Flag,
    /// The launcher's own variables (Slurm, Open MPI, PMI, fmrun), or none
    /// (a singleton).
    Launcher(Launcher),
    /// The program, through the builder's configuration.
    Program,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::Environment => f.write_str("environment"),
            Source::Flag => f.write_str("fmrun option"),
            Source::Launcher(l) => write!(f, "launcher: {}", launcher_name(*l)),
            Source::Program => f.write_str("program"),
        }
    }
}

/// The launcher in words (new launchers read as their variant's name).
fn launcher_name(l: Launcher) -> String {
    match l {
        Launcher::Singleton => "none (singleton)".into(),
        Launcher::OpenMpi => "open mpi".into(),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// The value of `s` in force for `cfg`, in words.
pub(crate) fn effective(s: &Setting, cfg: &Config) -> String {
    effective_of(s.name, cfg).unwrap_or_else(|| "-".into())
}

/// The value in force of the setting named `name` (`None`: not a setting
/// of [`SETTINGS`]; a test checks every setting has its line here).
fn effective_of(name: &str, c: &Config) -> Option<String> {
    Some(match name {
        "FASTMSG_RANK" => c.job.rank.to_string(),
        "FASTMSG_SIZE" => c.job.size.to_string(),
        "FASTMSG_LOCAL_RANK" => c.job.local_rank.to_string(),
        "FASTMSG_LOCAL_SIZE" => c.job.local_size.to_string(),
        "FASTMSG_JOB" => c.job.job.clone(),
        "FASTMSG_HOST" => c.job.host.clone(),
        "FASTMSG_QUEUES" => match c.shm.queues {
            Some(q) => q.to_string(),
            None => format!("{} (local ranks, at most 16)", c.job.local_size.min(16)),
        },
        "FASTMSG_CREDITS" => c.shm.credits.to_string(),
        "FASTMSG_FRAME_SIZE" => c.shm.frame_size.to_string(),
        "FASTMSG_SHM_INLINE" => u8::from(c.shm.inline).to_string(),
        "FASTMSG_WAIT" => wait_name(c.wait).to_owned(),
        "FASTMSG_TIMEOUT" => c.timeout.as_secs().to_string(),
        "FASTMSG_SHM_DIR" => c.shm_dir.display().to_string(),
        "FASTMSG_CLOSE_WARN" => c.close_warn.as_secs().to_string(),
        "FASTMSG_MAX_PARKED" => c.max_parked.to_string(),
        "FASTMSG_MAX_RECEIVE" => c.max_receive.to_string(),
        "FASTMSG_NET" => c.net.mode.to_string(),
        "FASTMSG_ROOT" => c.net.root.clone().unwrap_or_else(|| "-".into()),
        "FASTMSG_NET_IF" => settings::env_or("FASTMSG_NET_IF", "-"),
        "FASTMSG_SECRET" => match &c.net.secret {
            Some(s) => format!("(set, {} characters)", s.chars().count()),
            None => "-".into(),
        },
        "FASTMSG_SECRET_FILE" => settings::env_or("FASTMSG_SECRET_FILE", "-"),
        "FASTMSG_CONNECT" => format!("{:?}", c.net.connect).to_lowercase(),
        "FASTMSG_NET_SLOTS" => c.net.rings.slots.to_string(),
        "FASTMSG_NET_SLOT_SIZE" => c.net.rings.slot_bytes.to_string(),
        "FASTMSG_NET_DEAD_AFTER_MS" => c.net.dead_after.as_millis().to_string(),
        "FASTMSG_OFI_PROVIDER" => crate::transport::ofi::provider(),
        "FASTMSG_VERBS_DEVICE" => settings::env_or("FASTMSG_VERBS_DEVICE", "first device"),
        "FASTMSG_VERBS_PORT" => settings::env_or("FASTMSG_VERBS_PORT", "1"),
        "FASTMSG_VERBS_GID_INDEX" => settings::env_or("FASTMSG_VERBS_GID_INDEX", "0"),
        "FASTMSG_COPY" => settings::env_or("FASTMSG_COPY", "auto"),
        "FASTMSG_LOG" => settings::env_or("FASTMSG_LOG", crate::log::DEFAULT_FILTER),
        "FASTMSG_VERBOSE_ENV" => settings::env_or(settings::VERBOSE_VAR, "0"),
        "FASTMSG_STATS" => settings::env_or("FASTMSG_STATS", "0"),
        "FASTMSG_FLAGS" => settings::env_or(settings::FLAGS_VAR, "-"),
        _ => return None,
    })
}

fn wait_name(w: WaitPolicy) -> &'static str {
    match w {
        WaitPolicy::Spin => "spin",
        WaitPolicy::Yield => "yield",
        WaitPolicy::Sleep => "sleep",
        WaitPolicy::Auto => "auto",
    }
}

/// Where `s`'s value in `cfg` came from.
pub(crate) fn source(s: &Setting, cfg: &Config) -> Source {
    let flagged = env(FLAGS_VAR).is_some_and(|f| f.split(',').any(|n| n.trim() == s.name));
    if flagged {
        return Source::Flag;
    }
    if JOB_SETTINGS.contains(&s.name) {
        return Source::Launcher(cfg.job.launcher);
    }
    if env(s.name).is_some() {
        return Source::Environment;
    }
    if effective(s, cfg) != effective(s, &Config::new(cfg.job.clone())) {
        return Source::Program;
    }
    Source::Default
}

/// The whole report for `cfg`, several lines.
pub fn report(cfg: &Config) -> String {
    let mut out = String::new();
    let j = &cfg.job;
    let _ = writeln!(
        out,
        "fastmsg {}: rank {} of {} ({} on host {}), launcher: {}",
        env!("CARGO_PKG_VERSION"),
        j.rank,
        j.size,
        j.local_size,
        j.host,
        launcher_name(j.launcher)
    );
    let _ = writeln!(
        out,
        "wire-up between hosts: {}",
        crate::bootstrap::wire_up_source(j, cfg.net.root.as_deref())
    );
    let _ = writeln!(out, "\nsettings");
    // The name column as wide as the longest name.
    let w = SETTINGS.iter().map(|s| s.name.len()).max().unwrap_or(24);
    let _ = writeln!(out, "  {:<w$} {:<34} source", "variable", "value");
    for s in SETTINGS {
        let _ = writeln!(
            out,
            "  {:<w$} {:<34} {}",
            s.name,
            effective(s, cfg),
            source(s, cfg)
        );
    }
    let _ = writeln!(out, "\ntransports");
    let _ = writeln!(out, "  shm    {}", shm_line(cfg));
    for p in crate::transport::PROVIDERS {
        let _ = writeln!(out, "  {:<6} {}", p.name(), p.describe());
    }
    let _ = writeln!(out, "\ncopy plan\n  {}", copy_line());
    let _ = writeln!(out, "\ntopology (what the `auto` wait policy decides by)");
    out.push_str(&topology_lines(cfg, &Cpus::probe()));
    out
}

/// Print [`report`] to stderr, in one write, if `FASTMSG_VERBOSE_ENV=1`
/// and this is rank 0.
pub(crate) fn print_if_verbose(cfg: &Config) {
    if cfg.job.rank.0 == 0 && env(VERBOSE_VAR).is_some_and(|v| v.trim() != "0") {
        use std::io::Write;
        let _ = std::io::stderr().write_all(report(cfg).as_bytes());
    }
}

fn shm_line(cfg: &Config) -> String {
    let dir = &cfg.shm_dir;
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() && !m.permissions().readonly() => {
            format!("available: segments in {}", dir.display())
        }
        Ok(_) => format!("unusable: {} is not a writable directory", dir.display()),
        Err(e) => format!("unusable: {}: {e}", dir.display()),
    }
}

fn copy_line() -> String {
    use crate::copy::{parse_choice, store, CopyPlan};
    let show = |p: &CopyPlan| {
        if p.threshold == usize::MAX {
            format!("{} copies (source: {})", p.strategy.name(), p.source)
        } else {
            format!(
                "{} copies from {} bytes, plain below (source: {})",
                p.strategy.name(),
                p.threshold,
                p.source
            )
        }
    };
    if let Some(p) = env("FASTMSG_COPY").and_then(|v| parse_choice(&v)) {
        return show(&p);
    }
    match store::plan_path() {
        Ok(path) => match store::load(&path) {
            Ok(p) => format!("{} from {}", show(&p), path.display()),
            Err(_) => format!(
                "plain copies: no plan stored at {} (`fmbench tune-copy` or FASTMSG_COPY=tune makes one)",
                path.display()
            ),
        },
        Err(e) => format!("{e}; plain copies"),
    }
}

/// The CPU facts and the decision `auto` takes with them, for a rank
/// without (and with) a NIC thread beside it.
pub(crate) fn topology_lines(cfg: &Config, cpus: &Cpus) -> String {
    let j = &cfg.job;
    let mut out = String::new();
    let cpuset = cpus
        .cpuset
        .map_or("not readable".to_owned(), |c| c.to_string());
    let _ = writeln!(
        out,
        "  CPUs online {}, cgroup cpuset {cpuset}, this process's affinity mask {}",
        cpus.online, cpus.affinity
    );
    let reading = match cpus.reading(j.local_size, j.launcher) {
        MaskReading::PerRank => "this rank's own (the launcher binds each rank)",
        MaskReading::Shared => "shared by the host's ranks",
    };
    let _ = writeln!(
        out,
        "  ranks on this host: {}; mask read as {reading}",
        j.local_size
    );
    for (what, threads) in [("shm only", 1), ("with a NIC thread", 2)] {
        let over = cpus.oversubscribed(j.local_size, threads, j.launcher);
        let _ = writeln!(
            out,
            "  auto, {what}: {}",
            if over {
                "oversubscribed: spin briefly, then yield"
            } else {
                "a core per thread: spin (yield after 65536 idle rounds)"
            }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::JobInfo;

    #[test]
    fn every_setting_has_an_effective_value() {
        let cfg = Config::new(JobInfo::single_host(0, 2, "t", Launcher::Threads));
        for s in SETTINGS {
            assert!(effective_of(s.name, &cfg).is_some(), "{}", s.name);
        }
        assert!(effective_of("FASTMSG_NOT_A_SETTING", &cfg).is_none());
    }

    #[test]
    fn the_report_names_every_setting_and_the_program_source() {
        let mut cfg = Config::new(JobInfo::single_host(0, 2, "t", Launcher::Threads));
        cfg.shm.credits = 7;
        let r = report(&cfg);
        for s in SETTINGS {
            assert!(r.contains(s.name), "{} missing from\n{r}", s.name);
        }
        let credits = r.lines().find(|l| l.contains("FASTMSG_CREDITS")).unwrap();
        if !crate::settings::is_set("FASTMSG_CREDITS") {
            assert!(
                credits.contains(" 7 ") && credits.ends_with("program"),
                "{credits}"
            );
        }
        let frames = r
            .lines()
            .find(|l| l.contains("FASTMSG_FRAME_SIZE"))
            .unwrap();
        if !crate::settings::is_set("FASTMSG_FRAME_SIZE") {
            assert!(frames.ends_with("default"), "{frames}");
        }
        assert!(r.contains("launcher: threads"), "{r}");
    }
}
