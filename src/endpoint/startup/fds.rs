//! The open-file budget of a rank that uses the network. A full mesh
//! holds a TCP connection to every other rank (and rank 0's rendezvous
//! holds one per rank while it serves the table), so a job of P ranks
//! needs about P descriptors per rank besides the program's own. Before
//! anything is connected, the soft `RLIMIT_NOFILE` is raised to what the
//! job needs when the hard limit allows it (as Open MPI and the Go
//! runtime do); when it does not, start-up fails at once with
//! [`ConfigError::TooFewDescriptors`] instead of running out of
//! descriptors half-way through the wire-up (where accepts would fail
//! until the start-up time-out).

#![allow(unsafe_code)]

use crate::error::ConfigError;

/// Descriptors a rank must be allowed beside its connections: stdio, the
/// segment, the listener, the NIC's eventfd, the launcher's sockets
/// (PMIx). Below this start-up fails.
pub(in crate::endpoint) const SPARE_MIN: u64 = 16;
/// Descriptors the soft limit is raised to beside the connections, when
/// the hard limit allows: room for a provider's (libfabric) and the
/// program's own files.
pub(in crate::endpoint) const SPARE: u64 = 64;

/// The soft and hard `RLIMIT_NOFILE`.
fn limits() -> std::io::Result<(u64, u64)> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct, which `r` is.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((r.rlim_cur, r.rlim_max))
}

/// Make sure a rank of a `size`-rank job may open the descriptors its
/// connections need: raise the soft limit (never lower it) towards
/// connections + [`SPARE`], as far as the hard limit allows.
///
/// # Errors
/// [`ConfigError::TooFewDescriptors`] when the hard limit is below
/// connections + [`SPARE_MIN`]. A limit that cannot be read or set is left
/// alone (logged): the wire-up then reports what the OS says.
pub(in crate::endpoint) fn ensure(size: u32) -> Result<(), ConfigError> {
    let peers = u64::from(size.saturating_sub(1));
    let (need, want) = (peers + SPARE_MIN, peers + SPARE);
    let (soft, hard) = match limits() {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("cannot read RLIMIT_NOFILE ({e}); not checked");
            return Ok(());
        }
    };
    if soft >= want {
        return Ok(());
    }
    if hard < need {
        return Err(ConfigError::TooFewDescriptors {
            size,
            peers,
            spare: SPARE_MIN,
            need,
            soft,
            hard,
        });
    }
    let to = want.min(hard);
    let r = libc::rlimit {
        rlim_cur: to,
        rlim_max: hard,
    };
    // SAFETY: setrlimit reads one rlimit struct, which `r` is.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
        let e = std::io::Error::last_os_error();
        tracing::warn!("cannot raise RLIMIT_NOFILE from {soft} to {to} ({e})");
    } else {
        tracing::debug!("raised RLIMIT_NOFILE from {soft} to {to} for a {size}-rank job");
    }
    Ok(())
}
