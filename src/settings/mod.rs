//! Every `FASTMSG_*` setting in one table ([`SETTINGS`]): the
//! configuration report ([`report`]) and the check for mistyped variables
//! ([`unknown`], [`warn_unknown_env`]) both read it, so a setting added
//! here is reported and recognised at once. The variables are parsed where
//! they are used ([`Config::tuned_from_env`], the job environment, the
//! copy plan, the verbs device); the README's table documents them.

pub mod report;

use crate::endpoint::Config;
use crate::WaitPolicy;

/// The variable `fmrun` sets to the settings it was given as options.
pub const FLAGS_VAR: &str = "FASTMSG_FLAGS";

/// `FASTMSG_VERBOSE_ENV=1`: rank 0 prints the configuration report to
/// stderr when its endpoint starts.
pub const VERBOSE_VAR: &str = "FASTMSG_VERBOSE_ENV";

/// Variables under this prefix are left to test programs (never warned of).
pub const TEST_PREFIX: &str = "FASTMSG_TEST_";

/// One setting.
#[derive(Debug)]
pub struct Setting {
    /// The environment variable.
    pub name: &'static str,
    /// Its default, in words.
    pub default: &'static str,
    /// The `fmrun` option that sets it, if any.
    pub flag: Option<&'static str>,
    /// What it does.
    pub doc: &'static str,
    effective: fn(&Config) -> String,
}

impl Setting {
    /// The value in force for `cfg`.
    pub fn effective(&self, cfg: &Config) -> String {
        (self.effective)(cfg)
    }
}

/// The variable's value if set (and not empty).
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn env_or(name: &str, default: &str) -> String {
    env(name).unwrap_or_else(|| default.to_owned())
}

fn wait_name(w: WaitPolicy) -> &'static str {
    match w {
        WaitPolicy::Spin => "spin",
        WaitPolicy::Yield => "yield",
        WaitPolicy::Sleep => "sleep",
        WaitPolicy::Auto => "auto",
    }
}

macro_rules! setting {
    ($name:literal, $default:literal, $flag:expr, $doc:literal, $eff:expr) => {
        Setting {
            name: $name,
            default: $default,
            flag: $flag,
            doc: $doc,
            effective: $eff,
        }
    };
}

/// Every setting fastmsg reads, in the README's order.
pub static SETTINGS: &[Setting] = &[
    setting!(
        "FASTMSG_RANK",
        "set by the launcher",
        None,
        "this rank",
        |c| c.job.rank.to_string()
    ),
    setting!(
        "FASTMSG_SIZE",
        "set by the launcher",
        Some("--size / -n"),
        "ranks in the job",
        |c| c.job.size.to_string()
    ),
    setting!(
        "FASTMSG_LOCAL_RANK",
        "rank",
        None,
        "rank among the ranks on this host",
        |c| c.job.local_rank.to_string()
    ),
    setting!(
        "FASTMSG_LOCAL_SIZE",
        "size",
        Some("-n"),
        "ranks on this host",
        |c| c.job.local_size.to_string()
    ),
    setting!(
        "FASTMSG_JOB",
        "set by the launcher",
        Some("--job"),
        "job id; names the shared segment",
        |c| c.job.job.clone()
    ),
    setting!(
        "FASTMSG_HOST",
        "host name",
        Some("--host-id"),
        "host identity: ranks with the same one share memory",
        |c| c.job.host.clone()
    ),
    setting!(
        "FASTMSG_QUEUES",
        "local ranks, at most 16",
        Some("--queues"),
        "receive queues per rank",
        |c| match c.shm.queues {
            Some(q) => q.to_string(),
            None => format!("{} (local ranks, at most 16)", c.job.local_size.min(16)),
        }
    ),
    setting!(
        "FASTMSG_CREDITS",
        "32",
        Some("--credits"),
        "credits per pair of ranks, in frames",
        |c| c.shm.credits.to_string()
    ),
    setting!(
        "FASTMSG_FRAME_SIZE",
        "8192",
        Some("--frame-size"),
        "payload bytes per shared-memory frame",
        |c| c.shm.frame_size.to_string()
    ),
    setting!(
        "FASTMSG_SHM_INLINE",
        "1",
        None,
        "send payloads of at most 28 bytes inside the slot",
        |c| u8::from(c.shm.inline).to_string()
    ),
    setting!(
        "FASTMSG_WAIT",
        "auto",
        Some("--wait"),
        "spin, yield, sleep or auto",
        |c| wait_name(c.wait).to_owned()
    ),
    setting!(
        "FASTMSG_TIMEOUT",
        "60",
        Some("--timeout"),
        "seconds ranks wait for each other at start-up",
        |c| c.timeout.as_secs().to_string()
    ),
    setting!(
        "FASTMSG_SHM_DIR",
        "/dev/shm",
        Some("--shm-dir"),
        "directory of the shared segment",
        |c| c.shm_dir.display().to_string()
    ),
    setting!(
        "FASTMSG_CLOSE_WARN",
        "10",
        None,
        "seconds close waits before naming missing ranks",
        |c| c.close_warn.as_secs().to_string()
    ),
    setting!(
        "FASTMSG_MAX_PARKED",
        "4194304 (4 MiB)",
        None,
        "bytes of parked sends past which a send outside handlers makes progress instead",
        |c| c.max_parked.to_string()
    ),
    setting!(
        "FASTMSG_NET",
        "auto",
        Some("--net"),
        "auto, tcp, verbs or ofi (libfabric)",
        |c| format!("{:?}", c.net.mode).to_lowercase()
    ),
    setting!(
        "FASTMSG_ROOT",
        "none (one host: rank 0 picks a port)",
        Some("--root"),
        "host:port of rank 0's rendezvous",
        |c| c.net.root.clone().unwrap_or_else(|| "-".into())
    ),
    setting!(
        "FASTMSG_NET_IF",
        "host name's address, else first non-loopback IPv4",
        None,
        "under PMIx / PMI-2: the interface whose address a rank listens on and publishes",
        |_| env_or("FASTMSG_NET_IF", "-")
    ),
    setting!(
        "FASTMSG_SECRET",
        "none (fmrun makes one)",
        None,
        "job secret every network connection proves (never on a command line)",
        |c| match &c.net.secret {
            Some(s) => format!("(set, {} characters)", s.chars().count()),
            None => "-".into(),
        }
    ),
    setting!(
        "FASTMSG_SECRET_FILE",
        "none",
        Some("--secret-file"),
        "file holding the job secret (owned by the user, no group/other access)",
        |_| env_or("FASTMSG_SECRET_FILE", "-")
    ),
    setting!(
        "FASTMSG_NET_SLOTS",
        "16",
        None,
        "slots per network ring",
        |c| c.net.rings.slots.to_string()
    ),
    setting!(
        "FASTMSG_NET_SLOT_SIZE",
        "65536",
        None,
        "bytes per network ring slot",
        |c| c.net.rings.slot_bytes.to_string()
    ),
    setting!(
        "FI_PROVIDER",
        "tcp;ofi_rxm",
        None,
        "libfabric provider (FASTMSG_NET=ofi; `fi_info -c FI_RMA -t FI_EP_RDM` lists them)",
        |_| crate::transport::ofi::provider()
    ),
    setting!(
        "FASTMSG_VERBS_DEVICE",
        "first device",
        None,
        "RDMA device name (verbs)",
        |_| env_or("FASTMSG_VERBS_DEVICE", "first device")
    ),
    setting!("FASTMSG_VERBS_PORT", "1", None, "RDMA port (verbs)", |_| {
        env_or("FASTMSG_VERBS_PORT", "1")
    }),
    setting!(
        "FASTMSG_VERBS_GID_INDEX",
        "0",
        None,
        "RDMA GID index (verbs)",
        |_| env_or("FASTMSG_VERBS_GID_INDEX", "0")
    ),
    setting!(
        "FASTMSG_COPY",
        "auto",
        None,
        "how pieces are copied into frames",
        |_| env_or("FASTMSG_COPY", "auto")
    ),
    setting!(
        "FASTMSG_LOG",
        "warn",
        None,
        "log filter: error, warn, info, debug, trace, or per module",
        |_| env_or("FASTMSG_LOG", crate::log::DEFAULT_FILTER)
    ),
    setting!(
        "FASTMSG_VERBOSE_ENV",
        "0",
        None,
        "1: rank 0 prints this report at start-up",
        |_| env_or(VERBOSE_VAR, "0")
    ),
    setting!(
        "FASTMSG_STATS",
        "0",
        None,
        "1: each rank prints its counters when it closes (feature `stats`)",
        |_| env_or("FASTMSG_STATS", "0")
    ),
    setting!(
        "FASTMSG_FLAGS",
        "set by fmrun",
        None,
        "the settings fmrun was given as options",
        |_| env_or(FLAGS_VAR, "-")
    ),
];

/// The setting named `name`.
pub fn find(name: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.name == name)
}

/// The known setting closest to `name` by edit distance, if close enough
/// to be a likely typo (at most a third of the name's length, at least 2).
pub fn closest(name: &str) -> Option<&'static str> {
    let (best, d) = SETTINGS
        .iter()
        .map(|s| (s.name, strsim::damerau_levenshtein(name, s.name)))
        .min_by_key(|&(_, d)| d)?;
    let suffix = name.len().saturating_sub("FASTMSG_".len());
    (d <= (suffix / 3).max(2)).then_some(best)
}

/// The `FASTMSG_*` names among `names` that are not settings (nor under
/// [`TEST_PREFIX`]), each with the closest known name.
pub fn unknown<I, S>(names: I) -> Vec<(String, Option<&'static str>)>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut out: Vec<_> = names
        .into_iter()
        .filter_map(|n| {
            let n = n.as_ref();
            let ours = n.starts_with("FASTMSG_") && !n.starts_with(TEST_PREFIX);
            (ours && find(n).is_none()).then(|| (n.to_owned(), closest(n)))
        })
        .collect();
    out.sort();
    out
}

/// Log one warning for each unknown `FASTMSG_*` variable in this
/// process's environment (rank 0 calls it in [`Config::from_env`]).
pub fn warn_unknown_env() {
    let names = std::env::vars_os().filter_map(|(k, _)| k.into_string().ok());
    for (name, near) in unknown(names) {
        match near {
            Some(k) => tracing::warn!("unknown environment variable {name}; did you mean {k}?"),
            None => tracing::warn!(
                "unknown environment variable {name}; `fastmsg-info` lists the known settings"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_prefixed() {
        let mut names: Vec<_> = SETTINGS.iter().map(|s| s.name).collect();
        assert!(names.iter().all(|n| n.starts_with("FASTMSG_")));
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
    }

    #[test]
    fn typos_name_the_closest_setting() {
        let got = unknown([
            "FASTMSG_WIAT",
            "FASTMSG_WAIT",
            "FASTMSG_CREDIT",
            "FASTMSG_FRAMESIZE",
            "FASTMSG_TEST_SCENARIO",
            "PATH",
            "FASTMSG_ZZZZZZZZZZZZ",
        ]);
        assert_eq!(
            got,
            vec![
                ("FASTMSG_CREDIT".to_owned(), Some("FASTMSG_CREDITS")),
                ("FASTMSG_FRAMESIZE".to_owned(), Some("FASTMSG_FRAME_SIZE")),
                ("FASTMSG_WIAT".to_owned(), Some("FASTMSG_WAIT")),
                ("FASTMSG_ZZZZZZZZZZZZ".to_owned(), None),
            ]
        );
    }

    #[test]
    fn every_setting_is_in_the_readme() {
        let readme = include_str!("../../README.md");
        for s in SETTINGS {
            assert!(
                readme.contains(s.name),
                "{} is not documented in README.md",
                s.name
            );
        }
    }
}
