//! Start-up of a job that needs the network: decide whether it does, meet
//! at the rendezvous, and derive from the job table which ranks share this
//! host (shared memory) and which are reached over the network.
//!
//! - Ranks span hosts (`local size < size`), or `FASTMSG_ROOT` is set: the
//!   rendezvous at `FASTMSG_ROOT` (rank 0 serves it) — the local rank and
//!   size then come from the table, whatever the launcher said.
//! - `FASTMSG_NET=tcp|verbs` on one host without `FASTMSG_ROOT`: rank 0
//!   listens on the loopback at a port the kernel picks and publishes the
//!   address in a file beside the shared segment (mode 0600); the others
//!   read it there.
//! - Started by a PMIx server or with a PMI socket (`PMI_FD`: `srun
//!   --mpi=pmi2`, MPICH's `mpiexec`), without `FASTMSG_ROOT`: the same table,
//!   exchanged through the launcher's key-value store (`bootstrap::kvs`).
//!   There `FASTMSG_HOST` may split a node into "hosts", so setting it is
//!   enough to need the exchange.

use crate::bootstrap::rendezvous::{self, Member, RendezvousJob};
use crate::bootstrap::{JobInfo, Launcher};
use crate::endpoint::{Config, NetMode};
use crate::error::{ConfigError, ConnectError, StartError};
use crate::id::Rank;
use crate::ring::RingGeometry;
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What the network side of start-up produced.
#[derive(Debug)]
pub(crate) struct NetPlan {
    /// Where this rank's peers connect.
    pub(crate) listener: TcpListener,
    /// Peers reached over the network, with their listening addresses.
    pub(crate) peers: Vec<(Rank, SocketAddr)>,
    /// The job secret.
    pub(crate) secret: Vec<u8>,
    /// Ring geometry.
    pub(crate) geometry: RingGeometry,
}

/// Whether this job needs the network at all.
pub(crate) fn needs_network(config: &Config) -> bool {
    config.needs_network()
}

/// Whether the launcher offers a key-value store for the wire-up: a PMIx
/// server or a PMI socket.
pub(crate) fn has_store(job: &JobInfo) -> bool {
    job.launcher == Launcher::Pmix || crate::bootstrap::pmi2::available()
}

fn root_file(config: &Config) -> PathBuf {
    config.shm_dir.join(format!(
        "{}{}.root",
        crate::bootstrap::job_file_prefix(&config.job.job),
        config.job.host
    ))
}

fn io(op: &'static str, peer: String) -> impl FnOnce(std::io::Error) -> ConnectError {
    move |source| ConnectError::Io { op, peer, source }
}

/// Meet the other ranks; adjust `job`'s local rank and size from the job
/// table; return the plan for the network transport.
///
/// # Errors
/// A missing secret or root, or any [`ConnectError`].
pub(crate) fn meet(config: &Config, job: &mut JobInfo) -> Result<NetPlan, StartError> {
    if job.launcher == Launcher::Pmix && config.net.root.is_none() {
        let geometry = geometry(config)?;
        let mut store = crate::bootstrap::pmix::store()?;
        let (table, listener, secret) = crate::bootstrap::kvs::wire_up(
            &mut store,
            config.net.secret.as_deref(),
            config.timeout,
            job,
        )?;
        return Ok(plan(config, job, table, listener, secret, geometry));
    }
    if job.launcher != Launcher::Pmix
        && config.net.root.is_none()
        && crate::bootstrap::pmi2::available()
    {
        let geometry = geometry(config)?;
        let (table, listener, secret) =
            crate::bootstrap::pmi2::wire_up(config.net.secret.as_deref(), config.timeout, job)?;
        return Ok(plan(config, job, table, listener, secret, geometry));
    }
    if config.net.root.is_none() && job.local_size != job.size {
        return Err(crate::bootstrap::layout::no_wire_up(job).into());
    }
    let secret = config
        .net
        .secret
        .clone()
        .ok_or(ConfigError::Invalid {
            what: "FASTMSG_SECRET",
            why: "a job using the network needs a secret shared by all its ranks (fmrun sets one; under mpirun, srun --mpi=pmix or --mpi=pmi2 and MPICH's mpiexec the launcher carries one; otherwise export FASTMSG_SECRET)".into(),
        })?
        .into_bytes();
    let geometry = geometry(config)?;
    let rjob = RendezvousJob {
        size: job.size,
        job: &job.job,
        secret: &secret,
        timeout: config.timeout,
    };
    let (table, listener) = match &config.net.root {
        Some(root) => {
            let addr = rendezvous::resolve(root)?;
            if job.rank.0 == 0 {
                let l = crate::netio::connect::listen(addr)
                    .map_err(io("listen for the rendezvous at", root.clone()))?;
                let me = Member {
                    rank: job.rank,
                    host: job.host.clone(),
                    addr,
                };
                (rendezvous::serve(&l, me, &rjob)?, l)
            } else {
                rendezvous::join(addr, job.rank, &job.host, &rjob)?
            }
        }
        None => local_rendezvous(config, job, &rjob)?,
    };
    Ok(plan(config, job, table, listener, secret, geometry))
}

fn geometry(config: &Config) -> Result<RingGeometry, ConfigError> {
    config.net.rings.geometry().ok_or(ConfigError::Invalid {
        what: "FASTMSG_NET_SLOTS / FASTMSG_NET_SLOT_SIZE",
        why: "unusable ring geometry".into(),
    })
}

/// From the job table: which ranks share this host (`job`'s local rank
/// and size are set from it) and which are reached over the network.
fn plan(
    config: &Config,
    job: &mut JobInfo,
    table: Vec<Member>,
    listener: TcpListener,
    secret: Vec<u8>,
    geometry: RingGeometry,
) -> NetPlan {
    let my_host = table[job.rank.index()].host.clone();
    let local: Vec<Rank> = table
        .iter()
        .filter(|m| m.host == my_host)
        .map(|m| m.rank)
        .collect();
    job.local_size = local.len() as u32;
    job.local_rank = local
        .iter()
        .position(|&r| r == job.rank)
        .expect("we are in the table") as u32;
    let forced = config.net.mode != NetMode::Auto;
    let peers = table
        .iter()
        .filter(|m| m.rank != job.rank && (forced || m.host != my_host))
        .map(|m| (m.rank, m.addr))
        .collect();
    NetPlan {
        listener,
        peers,
        secret,
        geometry,
    }
}

/// The contents of `path` if it is a regular file of this user that
/// nobody else may write (another user's file at the name is ignored: the
/// address must come from our rank 0).
fn read_own_file(path: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let f = std::fs::File::open(path).ok()?;
    let m = f.metadata().ok()?;
    // SAFETY: geteuid cannot fail and touches no memory.
    #[allow(unsafe_code)]
    let me = unsafe { libc::geteuid() };
    if !m.is_file() || m.uid() != me || m.mode() & 0o022 != 0 {
        return None;
    }
    std::io::read_to_string(f).ok()
}

/// The rendezvous of a one-host job forced onto the network: rank 0 on the
/// loopback, its address in a file beside the shared segment.
fn local_rendezvous(
    config: &Config,
    job: &JobInfo,
    rjob: &RendezvousJob<'_>,
) -> Result<(Vec<Member>, TcpListener), StartError> {
    let path = root_file(config);
    if job.rank.0 == 0 {
        let l = crate::netio::connect::listen("127.0.0.1:0")
            .map_err(io("listen on", "the loopback".into()))?;
        let addr = l
            .local_addr()
            .map_err(io("listen on", "the loopback".into()))?;
        let tmp = path.with_extension("tmp");
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(addr.to_string().as_bytes())?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(io(
            "publish the rendezvous address in",
            path.display().to_string(),
        ))?;
        let me = Member {
            rank: job.rank,
            host: job.host.clone(),
            addr,
        };
        let table = rendezvous::serve(&l, me, rjob);
        let _ = std::fs::remove_file(&path);
        Ok((table?, l))
    } else {
        let start = Instant::now();
        let addr = loop {
            if let Some(a) = read_own_file(&path).and_then(|s| s.trim().parse().ok()) {
                break a;
            }
            if start.elapsed() > config.timeout {
                return Err(ConnectError::Timeout {
                    what: format!("rank 0 to publish its address in {}", path.display()),
                    waited: start.elapsed(),
                }
                .into());
            }
            if config
                .abort
                .as_ref()
                .is_some_and(|a| a.load(crate::sync::Ordering::Relaxed))
            {
                return Err(ConnectError::Rendezvous("aborted: another rank failed".into()).into());
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        Ok(rendezvous::join(addr, job.rank, &job.host, rjob)?)
    }
}
