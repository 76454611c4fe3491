//! PMIx wire-up (feature `pmix`): a rank started by a PMIx server — Open
//! MPI's `mpirun`, `srun --mpi=pmix`, `prterun` — takes its rank, the job
//! size and its local rank and local size from PMIx ([`job_from_env`]);
//! a job that needs the network then exchanges through PMIx, instead of
//! the rendezvous at `FASTMSG_ROOT`, what the rendezvous would have
//! ([`wire_up`]): every rank puts its host identity and the address of a
//! listener on a port the kernel picked (`addr`), rank 0 puts a fresh job
//! secret (unless `FASTMSG_SECRET` gives one), all commit and fence, and
//! everybody reads the table. Nothing needs to be exported.
//!
//! The secret travels through the PMIx server, which serves only the
//! processes of this job (and their user).

mod addr;
mod client;
mod ffi;

use super::rendezvous::Member;
use super::{host_identity, JobInfo, Launcher};
use crate::endpoint::Config;
use crate::error::{ConfigError, ConnectError, PmixError, StartError};
use crate::id::Rank;
use client::key;
use std::ffi::CString;
use std::net::{SocketAddr, TcpListener};
use std::sync::Mutex;

/// The job as PMIx describes it, when this process was started by a PMIx
/// server (`PMIX_RANK` and `PMIX_NAMESPACE` are set); `None` otherwise.
///
/// # Errors
/// [`ConfigError::Pmix`] if the server cannot be reached or lacks a key.
pub(crate) fn job_from_env() -> Result<Option<JobInfo>, ConfigError> {
    if std::env::var_os("PMIX_RANK").is_none() || std::env::var_os("PMIX_NAMESPACE").is_none() {
        return Ok(None);
    }
    let s = client::session()?;
    let job = ffi::RANK_WILDCARD;
    Ok(Some(JobInfo {
        rank: Rank(s.rank()),
        size: s.get_u32(job, key(ffi::PMIX_JOB_SIZE))?,
        local_rank: s.get_u32(s.rank(), key(ffi::PMIX_LOCAL_RANK))?,
        local_size: s.get_u32(job, key(ffi::PMIX_LOCAL_SIZE))?,
        job: super::env::sanitize(&format!("pmix-{}", s.namespace())),
        host: host_identity(),
        launcher: Launcher::Pmix,
    }))
}

/// What [`wire_up`] produced: the job table, this rank's listener, the
/// job secret.
pub(crate) type WireUp = (Vec<Member>, TcpListener, Vec<u8>);

/// A fresh job secret: 128 random bits, hex.
fn fresh_secret() -> Result<String, StartError> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| ConnectError::Io {
        op: "draw a job secret from",
        peer: "the OS random source".into(),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Exchange host identities, listening addresses and the job secret
/// through PMIx. Every rank of the job must call it (it fences).
///
/// # Errors
/// [`StartError::Pmix`] (a put, commit, fence or get failed, or a peer
/// published a malformed address); a listener that cannot be opened.
pub(crate) fn wire_up(config: &Config, job: &JobInfo) -> Result<WireUp, StartError> {
    // Keys carry a round number: a process that starts a second endpoint
    // must not read the first one's addresses (every rank counts alike).
    static ROUND: Mutex<u32> = Mutex::new(0);
    let round = {
        let mut r = ROUND.lock().unwrap_or_else(|p| p.into_inner());
        *r += 1;
        *r
    };
    let name = |what: &str| CString::new(format!("fastmsg.{round}.{what}")).expect("no NUL");
    let (k_addr, k_host, k_secret) = (name("addr"), name("host"), name("secret"));

    let s = client::session()?;
    let ip = addr::listen_ip()?;
    let listener = TcpListener::bind((ip, 0)).map_err(|source| ConnectError::Io {
        op: "listen for peers on",
        peer: ip.to_string(),
        source,
    })?;
    let me = listener.local_addr().map_err(|source| ConnectError::Io {
        op: "listen for peers on",
        peer: ip.to_string(),
        source,
    })?;
    s.put_str(&k_addr, &me.to_string())?;
    s.put_str(&k_host, &job.host)?;
    let mut secret = config.net.secret.clone();
    if secret.is_none() && job.rank.0 == 0 {
        let fresh = fresh_secret()?;
        s.put_str(&k_secret, &fresh)?;
        secret = Some(fresh);
    }
    s.commit()?;
    s.fence(config.timeout)?;
    let secret = match secret {
        Some(k) => k,
        None => s.get_str(0, &k_secret)?,
    };
    let mut table = Vec::with_capacity(job.size as usize);
    for r in 0..job.size {
        let text = s.get_str(r, &k_addr)?;
        let addr: SocketAddr = text.parse().map_err(|_| PmixError::Value {
            call: format!("PMIx_Get({}, rank {r})", k_addr.to_string_lossy()),
            what: format!("{text:?}, which is not an address"),
        })?;
        table.push(Member {
            rank: Rank(r),
            host: s.get_str(r, &k_host)?,
            addr,
        });
    }
    Ok((table, listener, secret.into_bytes()))
}
