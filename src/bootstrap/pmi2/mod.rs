//! PMI-2 over the launcher's socket (`PMI_FD`), in Rust: what `srun
//! --mpi=pmi2` (and MPICH's hydra) serve. Used only for the wire-up of a
//! job that needs the network (`kvs`), when no `FASTMSG_ROOT` is given:
//! rank, size and local ranks come from the launcher's environment as
//! before (`env`), so a job that stays on one host never touches the
//! socket. The process then owns the PMI-2 connection: do not combine with
//! an MPI library that also initialises PMI-2 in the same process.
//! The protocol itself is in [`client`].

mod client;
#[cfg(test)]
mod tests;

use crate::error::StartError;
use client::{err, Client};
use std::os::unix::net::UnixStream;
use std::sync::Mutex;
use std::time::Duration;

/// The launcher's connection, opened once.
static CONNECTION: Mutex<Option<Client<UnixStream>>> = Mutex::new(None);

/// Whether a PMI-2 (or PMI-1) launcher gave us a socket.
pub(crate) fn available() -> bool {
    std::env::var_os("PMI_FD").is_some()
}

extern "C" fn finalize_at_exit() {
    let mut g = CONNECTION.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = g.as_mut() {
        let _ = c.finalize();
    }
}

/// Run the wire-up over the launcher's PMI-2 socket (opened on first use,
/// `finalize` sent at exit).
///
/// # Errors
/// [`StartError::Pmi2`]: no usable `PMI_FD`, a refusal, a timeout, or a
/// launcher that does not speak PMI-2; the wire-up's own errors.
pub(crate) fn wire_up(
    secret: Option<&str>,
    timeout: Duration,
    job: &super::JobInfo,
) -> Result<super::kvs::WireUp, StartError> {
    let mut g = CONNECTION.lock().unwrap_or_else(|p| p.into_inner());
    if g.is_none() {
        let fd: std::os::fd::RawFd = std::env::var("PMI_FD")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .filter(|&fd| fd >= 0)
            .ok_or_else(|| err("init", "PMI_FD is not a file descriptor number"))?;
        // Refuse a descriptor that is not an open socket rather than take
        // ownership of something else.
        let meta = std::fs::metadata(format!("/proc/self/fd/{fd}"));
        let is_socket = meta.is_ok_and(|m| {
            use std::os::unix::fs::FileTypeExt;
            m.file_type().is_socket()
        });
        if !is_socket {
            return Err(err("init", format!("PMI_FD={fd} is not an open socket")).into());
        }
        #[allow(unsafe_code)]
        // SAFETY: `fd` is an open socket (checked above) that the launcher
        // handed this process for PMI; nothing else in this process uses
        // it (it is taken once, under this lock, and kept for the life of
        // the process).
        let stream = unsafe { <UnixStream as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        stream
            .set_read_timeout(Some(timeout.max(Duration::from_secs(1))))
            .map_err(|e| err("init", e.to_string()))?;
        let jobid = std::env::var("PMI_JOBID").unwrap_or_else(|_| "0".into());
        let c = Client::open(stream, job.rank.0, &jobid)?;
        if c.size() != job.size {
            return Err(err(
                "fullinit",
                format!(
                    "the launcher says {} ranks, the environment {}",
                    c.size(),
                    job.size
                ),
            )
            .into());
        }
        *g = Some(c);
        #[allow(unsafe_code)]
        // SAFETY: a plain extern "C" fn with no captured state.
        if unsafe { libc::atexit(finalize_at_exit) } != 0 {
            eprintln!("fastmsg: could not register the PMI-2 finalize at exit");
        }
    }
    let c = g.as_mut().expect("opened above");
    super::kvs::wire_up(c, secret, timeout, job)
}
