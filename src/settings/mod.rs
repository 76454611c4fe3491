//! Every `FASTMSG_*` setting in one table ([`SETTINGS`]), and the one
//! place the library reads them from the environment (`var`, `is_set`,
//! `env`: a name missing from the table is caught in debug builds, and
//! `.ci/house-rules` fails on a read elsewhere). The configuration report
//! (`endpoint::startup::report`) and the check for mistyped variables
//! ([`warn_unknown_env`]) read the table, so a setting added
//! here is reported and recognised at once. Values are parsed where they
//! are used (`Config::tuned_from_env`, the job environment, the copy plan,
//! the verbs device); docs/settings.md's table documents them.

/// The variable `fmrun` sets to the settings it was given as options.
pub const FLAGS_VAR: &str = "FASTMSG_FLAGS";

/// `FASTMSG_VERBOSE_ENV=1`: rank 0 prints the configuration report to
/// stderr when its endpoint starts.
pub const VERBOSE_VAR: &str = "FASTMSG_VERBOSE_ENV";

/// Variables under this prefix are left to test programs (never warned of).
pub(crate) const TEST_PREFIX: &str = "FASTMSG_TEST_";

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
}

/// Whether `name` may be read: a `FASTMSG_*` name must be a setting of
/// [`SETTINGS`] or a test program's (under [`TEST_PREFIX`]); other names
/// are the launchers' own variables (Slurm, Open MPI, PMI).
fn readable(name: &str) -> bool {
    !name.starts_with("FASTMSG_") || name.starts_with(TEST_PREFIX) || find(name).is_some()
}

/// Variable `name` as the environment holds it (`std::env::var`).
pub(crate) fn var(name: &str) -> Result<String, std::env::VarError> {
    debug_assert!(readable(name), "{name} is read but is not in SETTINGS");
    std::env::var(name)
}

/// Whether variable `name` is set at all (even empty, or not unicode).
pub(crate) fn is_set(name: &str) -> bool {
    debug_assert!(readable(name), "{name} is read but is not in SETTINGS");
    std::env::var_os(name).is_some()
}

/// The variable's value if set (and not empty after trimming).
pub(crate) fn env(name: &str) -> Option<String> {
    var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The variable's value if set (and not empty), else `default`.
pub(crate) fn env_or(name: &str, default: &str) -> String {
    env(name).unwrap_or_else(|| default.to_owned())
}

macro_rules! setting {
    ($name:literal, $default:literal, $flag:expr, $doc:literal) => {
        Setting {
            name: $name,
            default: $default,
            flag: $flag,
            doc: $doc,
        }
    };
}

/// Every setting fastmsg reads, in the order of docs/settings.md.
pub static SETTINGS: &[Setting] = &[
    setting!("FASTMSG_RANK", "set by the launcher", None, "this rank"),
    setting!(
        "FASTMSG_SIZE",
        "set by the launcher",
        Some("--size / -n"),
        "ranks in the job"
    ),
    setting!(
        "FASTMSG_LOCAL_RANK",
        "rank",
        None,
        "rank among the ranks on this host"
    ),
    setting!(
        "FASTMSG_LOCAL_SIZE",
        "size",
        Some("-n"),
        "ranks on this host"
    ),
    setting!(
        "FASTMSG_JOB",
        "set by the launcher",
        Some("--job"),
        "job id; names the shared segment"
    ),
    setting!(
        "FASTMSG_HOST",
        "host name",
        Some("--host-id"),
        "host identity: ranks with the same one share memory"
    ),
    setting!(
        "FASTMSG_QUEUES",
        "local ranks, at most 16",
        Some("--queues"),
        "receive queues per rank"
    ),
    setting!(
        "FASTMSG_CREDITS",
        "32",
        Some("--credits"),
        "credits per pair of ranks, in frames"
    ),
    setting!(
        "FASTMSG_FRAME_SIZE",
        "8192",
        Some("--frame-size"),
        "payload bytes per shared-memory frame"
    ),
    setting!(
        "FASTMSG_SHM_INLINE",
        "1",
        None,
        "send payloads of at most 28 bytes inside the slot"
    ),
    setting!(
        "FASTMSG_WAIT",
        "auto",
        Some("--wait"),
        "spin, yield, sleep or auto"
    ),
    setting!(
        "FASTMSG_TIMEOUT",
        "60",
        Some("--timeout"),
        "seconds ranks wait for each other at start-up"
    ),
    setting!(
        "FASTMSG_SHM_DIR",
        "/dev/shm",
        Some("--shm-dir"),
        "directory of the shared segment"
    ),
    setting!(
        "FASTMSG_CLOSE_WARN",
        "10",
        None,
        "seconds close (a blocking collective, a send waiting for credit) waits before saying what it waits for"
    ),
    setting!(
        "FASTMSG_MAX_PARKED",
        "4194304 (4 MiB)",
        None,
        "bytes of parked sends past which a send outside handlers makes progress instead"
    ),
    setting!(
        "FASTMSG_MAX_RECEIVE",
        "1073741824 (1 GiB)",
        None,
        "longest message Message::receive_vec allocates for (longer: ReceiveError::TooLong)"
    ),
    setting!(
        "FASTMSG_NET",
        "auto",
        Some("--net"),
        "auto, tcp, verbs or ofi (libfabric)"
    ),
    setting!(
        "FASTMSG_ROOT",
        "none (one host: rank 0 picks a port)",
        Some("--root"),
        "host:port of rank 0's rendezvous"
    ),
    setting!(
        "FASTMSG_NET_IF",
        "host name's address, else first non-loopback IPv4",
        None,
        "under PMIx / PMI-2: the interface whose address a rank listens on and publishes"
    ),
    setting!(
        "FASTMSG_SECRET",
        "none (fmrun makes one)",
        None,
        "job secret every network connection proves (never on a command line)"
    ),
    setting!(
        "FASTMSG_SECRET_FILE",
        "none",
        Some("--secret-file"),
        "file holding the job secret (owned by the user, no group/other access)"
    ),
    setting!(
        "FASTMSG_CONNECT",
        "lazy",
        None,
        "lazy: a network pair connects on first use; eager: the full mesh at start (TCP; ofi and verbs are always eager)"
    ),
    setting!("FASTMSG_NET_SLOTS", "16", None, "slots per network ring"),
    setting!(
        "FASTMSG_NET_SLOT_SIZE",
        "65536",
        None,
        "bytes per network ring slot"
    ),
    setting!(
        "FASTMSG_NET_DEAD_AFTER_MS",
        "3000",
        None,
        "milliseconds a peer's host may stay silent (no keepalive answer, no acknowledgement) before it is reported dead (TCP)"
    ),
    setting!(
        "FASTMSG_OFI_PROVIDER",
        "FI_PROVIDER, else tcp;ofi_rxm",
        None,
        "libfabric provider of FASTMSG_NET=ofi (`fi_info -c FI_RMA -t FI_EP_RDM` lists them)"
    ),
    setting!(
        "FASTMSG_VERBS_DEVICE",
        "first device",
        None,
        "RDMA device name (verbs)"
    ),
    setting!("FASTMSG_VERBS_PORT", "1", None, "RDMA port (verbs)"),
    setting!(
        "FASTMSG_VERBS_GID_INDEX",
        "0",
        None,
        "RDMA GID index (verbs)"
    ),
    setting!(
        "FASTMSG_COPY",
        "auto",
        None,
        "how pieces are copied into frames"
    ),
    setting!(
        "FASTMSG_LOG",
        "warn",
        None,
        "log filter: error, warn, info, debug, trace, or per module"
    ),
    setting!(
        "FASTMSG_VERBOSE_ENV",
        "0",
        None,
        "1: rank 0 prints this report at start-up"
    ),
    setting!(
        "FASTMSG_STATS",
        "0",
        None,
        "1: each rank prints its counters when it closes (feature `stats`)"
    ),
    setting!(
        "FASTMSG_FLAGS",
        "set by fmrun",
        None,
        "the settings fmrun was given as options"
    ),
];

/// The setting named `name`.
pub fn find(name: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.name == name)
}

/// The known setting closest to `name` by edit distance, if close enough
/// to be a likely typo (at most a third of the name's length, at least 2).
pub(crate) fn closest(name: &str) -> Option<&'static str> {
    let (best, d) = SETTINGS
        .iter()
        .map(|s| (s.name, strsim::damerau_levenshtein(name, s.name)))
        .min_by_key(|&(_, d)| d)?;
    let suffix = name.len().saturating_sub("FASTMSG_".len());
    (d <= (suffix / 3).max(2)).then_some(best)
}

/// The `FASTMSG_*` names among `names` that are not settings (nor under
/// [`TEST_PREFIX`]), each with the closest known name.
pub(crate) fn unknown<I, S>(names: I) -> Vec<(String, Option<&'static str>)>
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
/// process's environment (rank 0 calls it in `Config::from_env`).
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
    fn only_settings_and_launcher_variables_are_readable() {
        assert!(readable("FASTMSG_CREDITS"));
        assert!(readable("FASTMSG_TEST_SCENARIO"));
        assert!(readable("SLURM_PROCID"));
        assert!(!readable("FASTMSG_CREDIT"));
    }

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
    fn every_setting_is_in_the_settings_page_in_the_tables_order() {
        let readme = include_str!("../../docs/settings.md");
        for s in SETTINGS {
            assert!(
                readme.contains(s.name),
                "{} is not documented in docs/settings.md",
                s.name
            );
        }
        // The page's table: one row per setting (or per group of
        // settings named in its first cell), in this table's order.
        let rows: Vec<&str> = readme
            .lines()
            .filter(|l| l.starts_with("| `FASTMSG_"))
            .filter_map(|l| l.split('`').nth(1))
            .collect();
        let firsts: Vec<&str> = SETTINGS
            .iter()
            .map(|s| s.name)
            .filter(|n| rows.contains(n))
            .collect();
        assert_eq!(
            rows, firsts,
            "docs/settings.md's table and SETTINGS disagree on order"
        );
    }
}
