//! PMI over the launcher's socket (`PMI_FD`), in Rust: PMI-2 as `srun
//! --mpi=pmi2` serves it ([`client`]), PMI-1 as MPICH's Hydra (`mpiexec`)
//! serves it ([`pmi1`]). Slurm's plugin names the job in `PMI_JOBID`,
//! Hydra does not: that picks the protocol ([`Protocol::from_env`]). Used
//! only for the wire-up of a job that needs the network (`kvs`), when no
//! `FASTMSG_ROOT` is given: rank, size and local ranks come from the
//! launcher's environment as before (`env`), so a job that stays on one
//! host never touches the socket. The process then owns the PMI
//! connection: do not combine with an MPI library that also initialises
//! PMI in the same process.

mod client;
mod pmi1;
#[cfg(test)]
mod pmi1_tests;
#[cfg(test)]
mod tests;

use crate::bootstrap::kvs::KeyValue;
use crate::error::StartError;
use client::{err, Client};
use std::os::unix::net::UnixStream;
use std::sync::Mutex;
use std::time::Duration;

/// Which protocol the launcher at `PMI_FD` speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// PMI-2 (Slurm's mpi/pmi2 plugin; it sets `PMI_JOBID`).
    V2,
    /// PMI-1, the simple protocol (MPICH's Hydra).
    V1,
}

impl Protocol {
    /// The protocol of the launcher that set this environment.
    pub(crate) fn from_env() -> Protocol {
        if std::env::var_os("PMI_JOBID").is_some() {
            Protocol::V2
        } else {
            Protocol::V1
        }
    }

    /// The protocol's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Protocol::V2 => "PMI-2",
            Protocol::V1 => "PMI-1",
        }
    }
}

/// An open connection, in either protocol.
#[derive(Debug)]
enum Connection {
    V2(Client<UnixStream>),
    V1(pmi1::Client<UnixStream>),
}

impl KeyValue for Connection {
    fn put(&mut self, key: &str, value: &str) -> Result<(), StartError> {
        match self {
            Connection::V2(c) => c.put(key, value),
            Connection::V1(c) => c.put(key, value),
        }
    }

    fn fence(&mut self, timeout: Duration) -> Result<(), StartError> {
        match self {
            Connection::V2(c) => c.fence(timeout),
            Connection::V1(c) => c.fence(timeout),
        }
    }

    fn get(&mut self, rank: u32, key: &str) -> Result<String, StartError> {
        match self {
            Connection::V2(c) => c.get(rank, key),
            Connection::V1(c) => c.get(rank, key),
        }
    }
}

/// The launcher's connection, opened once.
static CONNECTION: Mutex<Option<Connection>> = Mutex::new(None);

/// Whether a PMI-2 or PMI-1 launcher gave us a socket.
pub(crate) fn available() -> bool {
    std::env::var_os("PMI_FD").is_some()
}

extern "C" fn finalize_at_exit() {
    let mut g = CONNECTION.lock().unwrap_or_else(|p| p.into_inner());
    match g.as_mut() {
        Some(Connection::V2(c)) => {
            let _ = c.finalize();
        }
        Some(Connection::V1(c)) => {
            let _ = c.finalize();
        }
        None => {}
    }
}

/// Run the wire-up over the launcher's PMI socket (opened on first use,
/// in the protocol [`Protocol::from_env`] picks; `finalize` sent at exit).
///
/// # Errors
/// [`StartError::Pmi2`]: no usable `PMI_FD`, a refusal, a timeout, or a
/// launcher that does not speak the protocol; the wire-up's own errors.
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
        *g = Some(match Protocol::from_env() {
            Protocol::V2 => {
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
                Connection::V2(c)
            }
            Protocol::V1 => {
                let c = pmi1::Client::open(stream, job.rank.0)?;
                tracing::debug!("PMI-1 key space {}", c.kvsname());
                Connection::V1(c)
            }
        });
        #[allow(unsafe_code)]
        // SAFETY: a plain extern "C" fn with no captured state.
        if unsafe { libc::atexit(finalize_at_exit) } != 0 {
            eprintln!("fastmsg: could not register the PMI finalize at exit");
        }
    }
    let c = g.as_mut().expect("opened above");
    super::kvs::wire_up(c, secret, timeout, job)
}
