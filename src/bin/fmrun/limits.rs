//! fmrun's open-file budget: two pipes per rank (its stdout and stderr,
//! forwarded line by line) stay open in fmrun for the whole job. Before
//! any rank starts, the soft `RLIMIT_NOFILE` is raised to what the ranks
//! need when the hard limit allows it; the ranks inherit the raised soft
//! limit (each endpoint raises its own further for its connections, see
//! `EndpointBuilder::start`). When the hard limit is too low fmrun stops
//! at once, naming the limit, instead of failing at the rank the
//! descriptors ran out.

/// Descriptors fmrun keeps for everything but the ranks' pipes.
const SPARE: u64 = 32;

/// What fmrun needs to start `ranks` ranks.
fn need(ranks: u32) -> u64 {
    2 * u64::from(ranks) + SPARE
}

/// Raise the soft limit for `ranks` ranks (never lower it).
///
/// # Errors
/// A message naming the limit when the hard limit is below the need.
pub fn ensure(ranks: u32) -> Result<(), String> {
    let need = need(ranks);
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct, which `r` is.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 || r.rlim_cur >= need {
        return Ok(());
    }
    if r.rlim_max < need {
        return Err(format!(
            "{ranks} ranks need about {need} open files in fmrun (2 pipes per rank), but RLIMIT_NOFILE allows {} (soft limit {}): raise the hard limit (`ulimit -Hn`) or start fewer ranks",
            r.rlim_max, r.rlim_cur
        ));
    }
    let soft = r.rlim_cur;
    r.rlim_cur = need;
    // SAFETY: setrlimit reads one rlimit struct, which `r` is.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
        tracing::warn!(
            "cannot raise RLIMIT_NOFILE from {soft} to {need}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}
