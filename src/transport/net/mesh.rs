//! The full mesh at start (`FASTMSG_CONNECT=eager`; libfabric and verbs
//! always; the lazy set-up, `crate::transport::net::connect`, uses only
//! `judge_peer` from here).
//!
//! Connection set-up by rank order (IWARP §3.1–3.2): between every pair
//! of network peers the lower rank listens and the higher rank connects,
//! and the connecting side speaks first (the authentication HELLO of
//! `crate::netio::auth`). A rank connects to its lower peers in
//! reverse rank order (i−1, i−2, …, as MVAPICH does to spread the load)
//! while a helper thread accepts its higher peers.
//!
//! Anything that connects to the listener without being an expected peer
//! of this job — wrong secret, garbage, a rank already connected, a client
//! that says nothing or one byte a second, a flood — is refused with a
//! logged reason, and the wait for the real peers goes on beside it:
//! connections are authenticated concurrently, each under a total
//! deadline, and connecting ranks retry until the job's start-up deadline.

use crate::error::{ConnectError, HandshakeError};
use crate::id::Rank;
use crate::netio::auth::{self, Hello, Purpose};
use crate::netio::gate::Gate;
use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// What both ends of every connection must agree on.
#[derive(Clone, Debug)]
pub struct MeshJob<'a> {
    /// This rank.
    pub me: Rank,
    /// Ranks in the job.
    pub size: u32,
    /// The job id (its hash is checked).
    pub job: &'a str,
    /// The job secret.
    pub secret: &'a [u8],
    /// Transport parameters (ring geometry).
    pub params: [u64; 2],
    /// How long to wait for all peers.
    pub timeout: Duration,
}

/// Connect to every rank of `peers` (their listening addresses): connect
/// to the lower ones, accept the higher ones on `listener`. The links
/// come back with reads and writes bounded by the job's time-out, so the
/// transport's set-up exchange over them cannot wait for ever on a peer
/// that stalls after authenticating; the transport lifts the bound once
/// its set-up is over.
///
/// # Errors
/// [`ConnectError`] naming the peer that could not be reached or failed
/// to authenticate, or a timeout naming the peers still missing.
pub fn connect(
    listener: &TcpListener,
    job: &MeshJob<'_>,
    peers: &[(Rank, SocketAddr)],
) -> Result<Vec<(Rank, TcpStream)>, ConnectError> {
    let deadline = Instant::now() + job.timeout;
    let higher: BTreeSet<u32> = peers
        .iter()
        .filter(|p| p.0 > job.me)
        .map(|p| p.0 .0)
        .collect();
    let mut lower: Vec<(Rank, SocketAddr)> =
        peers.iter().filter(|p| p.0 < job.me).copied().collect();
    lower.sort_by_key(|p| std::cmp::Reverse(p.0));
    std::thread::scope(|s| {
        let acceptor = std::thread::Builder::new()
            .name("fastmsg-mesh-accept".into())
            .spawn_scoped(s, move || accept_higher(listener, job, higher, deadline))
            .map_err(|e| ConnectError::Io {
                op: "start accepting the mesh's connections for",
                peer: format!("rank {}", job.me),
                source: crate::netio::thread_error("accepting", e),
            })?;
        let mut out = Vec::new();
        let mut first_err = None;
        for (rank, addr) in lower {
            match dial(addr, rank, job, deadline) {
                Ok(st) => out.push((rank, st)),
                Err(e) => {
                    first_err = Some(e);
                    break;
                }
            }
        }
        let acc = acceptor.join().expect("acceptor thread");
        if let Some(e) = first_err {
            return Err(e);
        }
        out.extend(acc?);
        for (rank, st) in &out {
            st.set_read_timeout(Some(job.timeout))
                .and_then(|()| st.set_write_timeout(Some(job.timeout)))
                .map_err(|source| ConnectError::Io {
                    op: "bound the set-up time of the connection to",
                    peer: format!("rank {rank}"),
                    source,
                })?;
        }
        Ok(out)
    })
}

/// Connect to `addr` and authenticate as a client, retrying while it is
/// not listening yet or is busy, until `deadline`.
fn dial(
    addr: SocketAddr,
    rank: Rank,
    job: &MeshJob<'_>,
    deadline: Instant,
) -> Result<TcpStream, ConnectError> {
    let hello = Hello {
        purpose: Purpose::Connect,
        rank: job.me.0,
        size: job.size,
        job_hash: auth::job_hash(job.job),
        params: job.params,
    };
    let who = || format!("rank {rank} at {addr}");
    let listening = auth::Listening::NotYet;
    auth::client_to_rank(addr, rank.0, job.secret, &hello, deadline, listening, who)
}

/// Accept connections until every rank of `want` has authenticated; each
/// connection is authenticated on a thread of its own under a total
/// deadline (the private `netio::gate`).
fn accept_higher(
    listener: &TcpListener,
    job: &MeshJob<'_>,
    mut want: BTreeSet<u32>,
    deadline: Instant,
) -> Result<Vec<(Rank, TcpStream)>, ConnectError> {
    let mut out = Vec::new();
    let start = Instant::now();
    listener
        .set_nonblocking(true)
        .map_err(|source| ConnectError::Io {
            op: "configure listener",
            peer: String::new(),
            source,
        })?;
    // Runs on a handshake thread: judges the HELLO against the ranks
    // expected at all; whether one has connected already is judged below.
    let expected = want.clone();
    let (secret, me, size, params) = (job.secret.to_vec(), job.me, job.size, job.params);
    let hash = auth::job_hash(job.job);
    let handshake = move |s: &TcpStream, by: Instant| {
        let h = auth::server(s, &secret, me.0, by, |h| {
            judge_peer(h, hash, size, params, expected.contains(&h.rank))
        })?;
        Ok(Rank(h.rank))
    };
    let who = format!("rank {}", job.me);
    let mut gate = Gate::new();
    let result = loop {
        if want.is_empty() {
            break Ok(std::mem::take(&mut out));
        }
        let Some(a) = gate.next(listener, deadline, &who, &handshake) else {
            break Err(ConnectError::Timeout {
                what: format!("ranks {want:?} to connect to rank {}", job.me),
                waited: start.elapsed(),
            });
        };
        match a.result {
            Ok((r, s)) if want.remove(&r.0) => out.push((r, s)),
            Ok((r, _)) => tracing::warn!(
                "rank {} refused a connection from {}: rank {r} is connected already",
                job.me,
                a.from
            ),
            Err(e) => tracing::warn!("rank {} refused a connection from {}: {e}", job.me, a.from),
        }
    };
    let _ = listener.set_nonblocking(false);
    result
}

/// Whether a HELLO is from an expected peer of this job (`expected`:
/// its rank is one that may connect here).
pub(crate) fn judge_peer(
    h: &Hello,
    job_hash: u64,
    size: u32,
    params: [u64; 2],
    expected: bool,
) -> Result<(), HandshakeError> {
    if h.purpose != Purpose::Connect {
        return Err(HandshakeError::WrongPeer {
            what: "joining a rendezvous that is over".into(),
        });
    }
    if h.job_hash != job_hash || h.size != size {
        return Err(HandshakeError::WrongPeer {
            what: format!("of another job ({} ranks)", h.size),
        });
    }
    if !expected {
        return Err(HandshakeError::WrongPeer {
            what: format!("rank {}, which is not expected to connect here", h.rank),
        });
    }
    for (i, what) in ["FASTMSG_NET_SLOTS", "FASTMSG_NET_SLOT_SIZE"]
        .into_iter()
        .enumerate()
    {
        if h.params[i] != params[i] {
            return Err(HandshakeError::Mismatch {
                what,
                ours: params[i],
                theirs: h.params[i],
            });
        }
    }
    Ok(())
}
