//! The rendezvous of a multi-host job: rank 0 serves at `FASTMSG_ROOT`
//! (`host:port`); every other rank connects there, authenticates with the
//! job secret (`netio::auth`), and sends who it is — rank, host identity
//! and the address it listens on for its peers. When all have joined, rank
//! 0 sends everybody the whole table. Ranks with the same host identity
//! share memory; the others are reached over the network.
//!
//! A rank listens on the local address its rendezvous connection used (the
//! interface that routes to the root), on a port the kernel picks; rank 0
//! listens on the root address itself, and keeps that listener for its
//! peers' connections afterwards. Connections that are not members of the
//! job are refused with a logged reason and do not disturb the rendezvous:
//! every connection is authenticated on a thread of its own under a total
//! deadline (the private `netio::gate`), and joining ranks retry until the job's
//! start-up deadline.

use crate::error::{ConnectError, HandshakeError};
use crate::id::Rank;
use crate::netio::auth::{self, Hello, Purpose};
use crate::netio::gate::{Bounded, Gate};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// One rank of the job as the rendezvous knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// The rank.
    pub rank: Rank,
    /// Its host identity (`FASTMSG_HOST`, else the host name).
    pub host: String,
    /// Where it listens for its peers.
    pub addr: SocketAddr,
}

/// What every rank of the job agrees on.
#[derive(Clone, Debug)]
pub struct RendezvousJob<'a> {
    /// Ranks in the job.
    pub size: u32,
    /// Job id.
    pub job: &'a str,
    /// Job secret.
    pub secret: &'a [u8],
    /// How long to wait for everybody.
    pub timeout: Duration,
}

fn put_str(v: &mut Vec<u8>, s: &str) {
    v.extend_from_slice(&(s.len() as u16).to_le_bytes());
    v.extend_from_slice(s.as_bytes());
}

fn get_str(r: &mut impl Read, what: &'static str) -> Result<String, HandshakeError> {
    let mut n = [0u8; 2];
    r.read_exact(&mut n)
        .map_err(|e| HandshakeError::Io(format!("reading {what}: {e}")))?;
    let n = u16::from_le_bytes(n) as usize;
    if n > 1024 {
        return Err(HandshakeError::WrongPeer {
            what: format!("sending a {n}-byte {what}"),
        });
    }
    let mut b = vec![0u8; n];
    r.read_exact(&mut b)
        .map_err(|e| HandshakeError::Io(format!("reading {what}: {e}")))?;
    String::from_utf8(b).map_err(|_| HandshakeError::WrongPeer {
        what: format!("sending a {what} that is not UTF-8"),
    })
}

fn get_member(r: &mut impl Read) -> Result<Member, HandshakeError> {
    let mut rank = [0u8; 4];
    r.read_exact(&mut rank)
        .map_err(|e| HandshakeError::Io(format!("reading a rank: {e}")))?;
    let host = get_str(r, "host identity")?;
    let addr = get_str(r, "address")?;
    let addr = addr.parse().map_err(|_| HandshakeError::WrongPeer {
        what: format!("listening at {addr:?}, which is not an address"),
    })?;
    Ok(Member {
        rank: Rank(u32::from_le_bytes(rank)),
        host,
        addr,
    })
}

fn put_member(v: &mut Vec<u8>, m: &Member) {
    v.extend_from_slice(&m.rank.0.to_le_bytes());
    put_str(v, &m.host);
    put_str(v, &m.addr.to_string());
}

/// Resolve `host:port`.
///
/// # Errors
/// [`ConnectError::Rendezvous`] if it does not resolve.
pub fn resolve(root: &str) -> Result<SocketAddr, ConnectError> {
    root.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            ConnectError::Rendezvous(format!(
                "FASTMSG_ROOT={root:?} is not a host:port that resolves"
            ))
        })
}

/// How often rank 0 looks for joined ranks whose connection closed.
const GONE_CHECK_EVERY: Duration = Duration::from_millis(50);

/// The first joined rank whose (non-blocking) connection has closed or
/// been reset: a rank that joined says nothing more until the table
/// comes, so end of stream means it ended.
fn first_gone(joined: &BTreeMap<u32, (Member, TcpStream)>) -> Option<u32> {
    joined.iter().find_map(|(&rank, (_, s))| {
        let mut b = [0u8; 1];
        match s.peek(&mut b) {
            Ok(0) => Some(rank),
            Ok(_) => None,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => None,
            Err(_) => Some(rank),
        }
    })
}

/// Tell every joined rank but `gone` that the job cannot start because
/// `gone` ended: a table of zero ranks followed by the rank (best effort:
/// a rank that cannot be told learns it when this connection closes).
fn tell_gone(joined: &mut BTreeMap<u32, (Member, TcpStream)>, gone: u32) {
    let mut msg = 0u32.to_le_bytes().to_vec();
    msg.extend_from_slice(&gone.to_le_bytes());
    for (&rank, (_, s)) in joined.iter_mut() {
        if rank != gone {
            let _ = s.set_nonblocking(false);
            let _ = s.write_all(&msg);
        }
    }
}

/// Rank 0: serve the rendezvous on `listener` until all `size` ranks have
/// joined; return the table (in rank order). Connections are
/// authenticated concurrently, each under its own deadline
/// (the private `netio::gate`): an idle, slow or flooding client
/// delays nobody.
///
/// # Errors
/// [`ConnectError::Timeout`] naming the ranks that never joined,
/// [`ConnectError::RankGone`] when a rank that joined ended before the
/// others came (found within about 50 ms; every joined rank is told), or
/// an I/O error of the listener.
pub fn serve(
    listener: &TcpListener,
    me: Member,
    job: &RendezvousJob<'_>,
) -> Result<Vec<Member>, ConnectError> {
    let start = Instant::now();
    let mut joined: BTreeMap<u32, (Member, TcpStream)> = BTreeMap::new();
    listener
        .set_nonblocking(true)
        .map_err(|source| ConnectError::Io {
            op: "configure listener",
            peer: me.addr.to_string(),
            source,
        })?;
    let deadline = start + job.timeout;
    let (secret, size, hash) = (job.secret.to_vec(), job.size, auth::job_hash(job.job));
    // Runs on a handshake thread: everything it judges is in the HELLO;
    // whether the rank has joined already is judged here, below.
    let handshake = move |s: &TcpStream, by: Instant| -> Result<Member, HandshakeError> {
        let h = auth::server(s, &secret, 0, by, |h| {
            if h.purpose != Purpose::Join {
                return Err(HandshakeError::WrongPeer {
                    what: "connecting to a peer before the rendezvous is over".into(),
                });
            }
            if h.job_hash != hash || h.size != size {
                return Err(HandshakeError::WrongPeer {
                    what: format!("of another job ({} ranks)", h.size),
                });
            }
            if h.rank == 0 || h.rank >= size {
                return Err(HandshakeError::WrongPeer {
                    what: format!("claiming rank {}, which is out of range", h.rank),
                });
            }
            Ok(())
        })?;
        let m = get_member(&mut Bounded::new(s, by))?;
        if m.rank.0 != h.rank {
            return Err(HandshakeError::WrongPeer {
                what: format!("rank {} describing itself as rank {}", h.rank, m.rank),
            });
        }
        let _ = s.set_read_timeout(None);
        Ok(m)
    };
    let mut gate = Gate::new();
    let mut next_check = Instant::now() + GONE_CHECK_EVERY;
    while (joined.len() as u32) < job.size - 1 {
        if Instant::now() >= next_check {
            next_check = Instant::now() + GONE_CHECK_EVERY;
            if let Some(rank) = first_gone(&joined) {
                let _ = listener.set_nonblocking(false);
                tell_gone(&mut joined, rank);
                return Err(ConnectError::RankGone {
                    rank,
                    root: me.addr.to_string(),
                });
            }
        }
        let Some(a) = gate.next(listener, deadline.min(next_check), "rendezvous", &handshake)
        else {
            if Instant::now() < deadline {
                continue;
            }
            let missing: Vec<u32> = (1..job.size).filter(|r| !joined.contains_key(r)).collect();
            let _ = listener.set_nonblocking(false);
            return Err(ConnectError::Timeout {
                what: format!("ranks {missing:?} to join the rendezvous at {}", me.addr),
                waited: start.elapsed(),
            });
        };
        match a.result {
            Ok((m, _)) if joined.contains_key(&m.rank.0) => tracing::warn!(
                "rendezvous refused a connection from {}: rank {} has joined already",
                a.from,
                m.rank
            ),
            Ok((m, s)) => {
                tracing::debug!("rendezvous: rank {} joined from {}", m.rank, a.from);
                // Non-blocking while the others come, so that a closed
                // connection can be seen without waiting on it.
                let _ = s.set_nonblocking(true);
                joined.insert(m.rank.0, (m, s));
            }
            Err(e) => tracing::warn!("rendezvous refused a connection from {}: {e}", a.from),
        }
    }
    let _ = listener.set_nonblocking(false);
    for (_, s) in joined.values() {
        let _ = s.set_nonblocking(false);
    }
    let mut table = vec![me];
    table.extend(joined.values().map(|(m, _)| m.clone()));
    let mut msg = (job.size).to_le_bytes().to_vec();
    for m in &table {
        put_member(&mut msg, m);
    }
    for (m, s) in joined.values_mut() {
        s.write_all(&msg).map_err(|source| ConnectError::Io {
            op: "send the job table to",
            peer: format!("rank {} at {}", m.rank, m.addr),
            source,
        })?;
    }
    Ok(table)
}

/// Any other rank: join the rendezvous at `root`. Returns the table and
/// the listener this rank's peers will connect to.
///
/// # Errors
/// [`ConnectError`]: the root unreachable in time, authentication refused,
/// a table that does not describe the job, or [`ConnectError::RankGone`]
/// when rank 0 reports that a rank which had joined ended.
pub fn join(
    root: SocketAddr,
    rank: Rank,
    host: &str,
    job: &RendezvousJob<'_>,
) -> Result<(Vec<Member>, TcpListener), ConnectError> {
    let deadline = Instant::now() + job.timeout;
    let peer = || format!("the rendezvous at {root}");
    let hello = Hello {
        purpose: Purpose::Join,
        rank: rank.0,
        size: job.size,
        job_hash: auth::job_hash(job.job),
        params: [0, 0],
    };
    let listening = auth::Listening::NotYet;
    let (_, mut s) = auth::client_retry(root, job.secret, &hello, deadline, listening, peer)?;
    let io = |op: &'static str| {
        move |source| ConnectError::Io {
            op,
            peer: root.to_string(),
            source,
        }
    };
    let local = s.local_addr().map_err(io("local address of"))?;
    let listener = crate::netio::connect::listen(SocketAddr::new(local.ip(), 0))
        .map_err(io("listen beside"))?;
    let me = Member {
        rank,
        host: host.to_owned(),
        addr: listener.local_addr().map_err(io("listen beside"))?,
    };
    let mut msg = Vec::new();
    put_member(&mut msg, &me);
    s.write_all(&msg).map_err(io("send our address to"))?;
    // The table comes once everybody has joined.
    s.set_read_timeout(Some(
        deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1)),
    ))
    .map_err(io("configure"))?;
    let bad = |why: String| ConnectError::Rendezvous(why);
    let mut n = [0u8; 4];
    s.read_exact(&mut n).map_err(|e| {
        bad(if e.kind() == std::io::ErrorKind::UnexpectedEof {
            format!(
                "rank 0 closed the rendezvous at {root} before sending the job table: it ended or gave up (its own error says why)"
            )
        } else {
            format!("no job table from the rendezvous at {root} ({e}); did every rank start?")
        })
    })?;
    let n = u32::from_le_bytes(n);
    if n == 0 {
        // Rank 0 says a rank that had joined ended (see `tell_gone`).
        let mut gone = [0u8; 4];
        s.read_exact(&mut gone).map_err(|e| {
            bad(format!(
                "the rendezvous at {root} gave up without naming why ({e})"
            ))
        })?;
        return Err(ConnectError::RankGone {
            rank: u32::from_le_bytes(gone),
            root: root.to_string(),
        });
    }
    if n != job.size {
        return Err(bad(format!(
            "the table has {n} ranks, the job {}",
            job.size
        )));
    }
    let mut table = Vec::with_capacity(n as usize);
    for i in 0..n {
        let m = get_member(&mut s).map_err(|e| bad(format!("reading the job table: {e}")))?;
        if m.rank.0 != i {
            return Err(bad(format!(
                "entry {i} of the job table names rank {}",
                m.rank
            )));
        }
        table.push(m);
    }
    if table[rank.index()] != me {
        return Err(bad(format!(
            "the table's entry for us is {:?}",
            table[rank.index()]
        )));
    }
    Ok((table, listener))
}
