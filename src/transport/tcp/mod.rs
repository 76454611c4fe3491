//! The TCP transport: end-of-frame length-flag rings ([`crate::ring`]) over
//! TCP — the Ethernet path, and the test bed of the ring protocol (HPVM
//! §4.1, the original design; see `docs/references.md`).
//!
//! It is the one ring transport ([`RmaTransport`]: rings, credits, the
//! close flush, peers' ends) over the TCP wire ([`TcpWire`]), which
//! emulates one-sided writes with *write records* on one authenticated
//! connection per peer, made on first use (`start_lazy`, the default)
//! or as a full mesh at start ([`mesh`], `start`): a rank that polls or
//! waits reads its
//! own sockets and places the records (payload, then the trailer's stamp
//! with Release), so the poll reads memory as on an RDMA ring; the
//! software NIC thread ([`nic`]) places them instead while the rank
//! sleeps or computes. Whole messages and puts go to the socket straight
//! from the caller's pieces, one `sendmsg` with the record header and the
//! trailer (no staging copy).
//!
//! A peer that misbehaves or disconnects fails alone:
//! [`Transport::check_peers`](super::Transport::check_peers) reports a
//! typed [`NetError`](crate::error::NetError) once and the peer is marked
//! gone; other peers are unaffected. A peer process that dies on a live
//! host ends its connection at once (end-of-file); a host that crashes,
//! loses power or is cut off says nothing, so every connection carries
//! keepalive probes ([`crate::netio::alive`]) and the NIC thread's
//! silence watch ([`crate::netio::silence`]: what the kernel knows of the
//! connection, every 100 ms), which ends it once the host was silent for
//! `dead_after` (`FASTMSG_NET_DEAD_AFTER_MS`, 3 s) with
//! [`NetError::HostSilent`](crate::error::NetError::HostSilent); a send
//! blocked on the socket returns. A peer *process* that is stopped (a
//! debugger, `SIGSTOP`) with a full receive window is not silent: its
//! kernel answers the zero-window probes, and the sender waits.
//!
//! The NIC writes into the shared segment (window area, doorbell) through
//! views that hold the segment's mapping ([`NetTargets`]), so this
//! transport may be dropped before or after the shm transport; dropping
//! says goodbye to every peer, stops the NIC thread and joins it.

#![allow(unsafe_code)]

pub(crate) mod nic;
mod sockets;
pub(crate) mod wire;

pub use self::sockets::TcpWire;
use super::net::provider::{Caps, OpenPlan, Provider};
use super::net::{NetTargets, RmaTransport};
use super::AnyTransport;
use crate::error::{ConnectError, StartError};
use crate::id::Rank;
use crate::ring::RingGeometry;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// The TCP transport: the ring transport over a [`TcpWire`].
pub type TcpTransport = RmaTransport<TcpWire>;

/// The TCP wire as a provider (`FASTMSG_NET=tcp`; the one `auto` picks).
pub(crate) struct TcpProvider;

impl Provider for TcpProvider {
    fn name(&self) -> &'static str {
        "tcp"
    }
    fn caps(&self) -> Caps {
        // The NIC thread sleeps while its rank polls (the rank reads its
        // own sockets) and works only while the rank sleeps or stands
        // still, so a TCP rank counts one busy thread; the NIC rings the
        // doorbell of a sleeping rank.
        Caps {
            lazy_connect: true,
            busy_thread: false,
            rings_doorbell: true,
            auto: true,
        }
    }
    fn probe(&self) -> Result<(), StartError> {
        Ok(())
    }
    fn describe(&self) -> String {
        "available (rendezvous, mesh, NIC thread per rank)".into()
    }
    fn open(&self, plan: OpenPlan) -> Result<AnyTransport, StartError> {
        let (me, lazy) = (plan.me, plan.lazy);
        let opened = if lazy {
            let job = plan.lazy_job();
            start_lazy(
                plan.me,
                plan.size,
                plan.geometry,
                plan.peers,
                plan.listener,
                job,
                plan.targets,
            )
        } else {
            let links = plan.connect_all()?;
            start(
                plan.me,
                plan.size,
                plan.geometry,
                links,
                plan.targets,
                plan.dead_after,
            )
        };
        let t = opened.map_err(|source| ConnectError::Io {
            op: if lazy {
                "set up the network transport (rings, NIC and accepting threads) of"
            } else {
                "set up the network transport (rings, NIC thread) of"
            },
            peer: format!("rank {me}"),
            source,
        })?;
        Ok(t.into())
    }
}

/// Start the TCP transport of rank `me` of `world` over authenticated
/// connections `links` (one per network peer, see [`crate::transport::net::mesh::connect`]):
/// exchange ring layouts, then start the NIC thread. A peer whose host
/// stays silent for `dead_after` fails ([`crate::netio::alive`]).
///
/// # Errors
/// The OS error of the exchange, of creating the wake-up descriptor or
/// the thread.
pub(crate) fn start(
    me: Rank,
    world: u32,
    geometry: RingGeometry,
    links: Vec<(Rank, TcpStream)>,
    targets: NetTargets,
    dead_after: Duration,
) -> std::io::Result<TcpTransport> {
    let wire = TcpWire::new(me, &targets, dead_after);
    RmaTransport::new(wire, world, geometry, links, targets, dead_after)
}

/// Start the TCP transport of rank `me` of `world` with no peer connected
/// yet (`FASTMSG_CONNECT=lazy`): each of `peers` (ranks and start-up
/// listeners) is connected on first use, and connections from them are
/// accepted on `listener` (see [`crate::transport::net::connect`]); a
/// peer whose host stays silent for `job.dead_after` fails.
///
/// # Errors
/// The OS error of creating the wake-up descriptor or the threads.
pub(crate) fn start_lazy(
    me: Rank,
    world: u32,
    geometry: RingGeometry,
    peers: Vec<(Rank, std::net::SocketAddr)>,
    listener: std::net::TcpListener,
    job: crate::transport::net::connect::LazyJob,
    targets: NetTargets,
) -> std::io::Result<TcpTransport> {
    let wire = TcpWire::new(me, &targets, job.dead_after);
    RmaTransport::new_lazy(wire, world, geometry, peers, listener, job, targets)?
        .ok_or_else(|| std::io::Error::other("the TCP wire cannot connect late"))
}

/// The watchdog's view of the NIC's link states: reports when a link has
/// left `UP` since it last looked.
pub(crate) struct LinkProbe {
    shared: Arc<nic::Shared>,
    seen: u64,
}

impl crate::watch::Probe for LinkProbe {
    fn look(&mut self) -> bool {
        // SYNC POINT link-alert, in `Links::alerts`: the count is bumped
        // after the state is stored.
        let now = self.shared.links.alerts();
        let news = now != self.seen;
        self.seen = now;
        news
    }
}

#[cfg(test)]
mod lazy_tests;
#[cfg(test)]
mod tests;
