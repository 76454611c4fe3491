//! What a wire tells start-up about itself: a [`Provider`] has a name
//! (the value of `FASTMSG_NET`), says whether it is usable here
//! ([`Provider::probe`]), what it can do ([`Caps`]) and opens the
//! network transport from an [`OpenPlan`]. Start-up reads behaviour from
//! the capabilities, never from the name; the endpoint drives what was
//! opened through [`NetTransport`]. The providers are listed in one table,
//! `crate::transport::PROVIDERS`.

use super::connect::LazyJob;
use super::mesh::{self, MeshJob};
use super::wire::RmaWire;
use super::{NetTargets, RmaTransport};
use crate::error::StartError;
use crate::id::Rank;
use crate::ring::RingGeometry;
use crate::transport::{AnyTransport, Transport};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// What a wire can do; start-up decides by these alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Caps {
    /// Connects each pair on first use (`FASTMSG_CONNECT=lazy`); without
    /// it the full mesh is made at start, whatever the setting.
    pub(crate) lazy_connect: bool,
    /// Keeps a second thread of each rank busy (a progress or NIC thread
    /// that places records), so a rank counts two busy threads when the
    /// wait policy weighs oversubscription.
    pub(crate) busy_thread: bool,
    /// An arrival rings the receiver's doorbell, so a sleeping rank wakes
    /// at once; without it (one-sided RDMA writes, a provider progressed
    /// only by its poll) the `auto` wait policy never sleeps.
    pub(crate) rings_doorbell: bool,
    /// `FASTMSG_NET=auto` may choose it when it probes usable; otherwise
    /// only naming it selects it.
    pub(crate) auto: bool,
}

/// Everything a wire needs to open the network transport of one rank.
#[derive(Debug)]
pub(crate) struct OpenPlan {
    /// This rank.
    pub(crate) me: Rank,
    /// Ranks in the job.
    pub(crate) size: u32,
    /// The job id.
    pub(crate) job: String,
    /// The job secret.
    pub(crate) secret: Vec<u8>,
    /// The rings' geometry.
    pub(crate) geometry: RingGeometry,
    /// Where this rank's peers connect.
    pub(crate) listener: TcpListener,
    /// Peers reached over the network, with their listening addresses.
    pub(crate) peers: Vec<(Rank, SocketAddr)>,
    /// How long to wait for peers (`FASTMSG_TIMEOUT`).
    pub(crate) timeout: Duration,
    /// A peer host silent this long is dead (`FASTMSG_NET_DEAD_AFTER_MS`).
    pub(crate) dead_after: Duration,
    /// Connect each pair on first use (asked for, and the wire can).
    pub(crate) lazy: bool,
    /// Where peers' writes land, whom they wake.
    pub(crate) targets: NetTargets,
}

impl OpenPlan {
    /// What both ends of every set-up connection agree on.
    fn mesh_job(&self) -> MeshJob<'_> {
        MeshJob {
            me: self.me,
            size: self.size,
            job: &self.job,
            secret: &self.secret,
            params: self.params(),
            timeout: self.timeout,
        }
    }

    /// The ring geometry, as the handshake carries it.
    fn params(&self) -> [u64; 2] {
        [
            u64::from(self.geometry.slots),
            u64::from(self.geometry.slot_bytes),
        ]
    }

    /// Connect to every peer now (the eager set-up): authenticated
    /// connections, one per network peer, by rank order.
    ///
    /// # Errors
    /// The [`ConnectError`](crate::error::ConnectError) naming the peer.
    pub(crate) fn connect_all(&self) -> Result<Vec<(Rank, TcpStream)>, StartError> {
        Ok(mesh::connect(
            &self.listener,
            &self.mesh_job(),
            &self.peers,
        )?)
    }

    /// The lazy connector's share of the plan.
    pub(crate) fn lazy_job(&self) -> LazyJob {
        LazyJob {
            me: self.me,
            size: self.size,
            job: self.job.clone(),
            secret: self.secret.clone(),
            params: self.params(),
            timeout: self.timeout,
            dead_after: self.dead_after,
        }
    }

    // Only the RDMA wires (features `ofi`, `verbs`) open this way.
    #[cfg_attr(not(any(feature = "ofi", feature = "verbs")), allow(dead_code))]
    /// Open the ring transport over `wire` on the full mesh `links`.
    ///
    /// # Errors
    /// The wire's error, as a start error.
    pub(crate) fn open_eager<W>(
        self,
        wire: W,
        links: Vec<(Rank, TcpStream)>,
    ) -> Result<AnyTransport, StartError>
    where
        W: RmaWire + std::fmt::Debug + 'static,
        StartError: From<W::Error>,
        AnyTransport: From<RmaTransport<W>>,
    {
        let t = RmaTransport::new(
            wire,
            self.size,
            self.geometry,
            links,
            self.targets,
            self.dead_after,
        )?;
        Ok(t.into())
    }
}

/// One wire of the network transport, as start-up sees it.
pub(crate) trait Provider: Sync {
    /// The name `FASTMSG_NET` selects it by.
    fn name(&self) -> &'static str;
    /// What it can do.
    fn caps(&self) -> Caps;
    /// Whether it is usable here (built in, its device or library
    /// present); the error says why not.
    ///
    /// # Errors
    /// The reason it cannot run here.
    fn probe(&self) -> Result<(), StartError>;
    /// One line for the configuration report: what it would use here.
    fn describe(&self) -> String {
        match self.probe() {
            Ok(()) => "available".into(),
            Err(e) => e.to_string(),
        }
    }
    /// Open the network transport of `plan` (connecting every peer, or,
    /// with `plan.lazy`, none yet).
    ///
    /// # Errors
    /// Set-up failures, as start errors.
    fn open(&self, plan: OpenPlan) -> Result<AnyTransport, StartError>;
}

/// A network transport as the endpoint drives it: the transport contract,
/// plus what close and the watchdog ask of it.
pub(crate) trait NetTransport: Transport + std::fmt::Debug {
    /// The ranks it reaches (connected or not yet).
    fn peers(&self) -> Vec<Rank>;
    /// The ranks connected so far.
    fn connected(&self) -> Vec<Rank>;
    /// The close barrier released this rank: its leaving is no failure.
    fn set_closed(&mut self);
    /// A probe for the watchdog, if the wire has state worth watching.
    fn watch_probe(&self) -> Option<Box<dyn crate::watch::Probe>>;
    /// Itself as a plain transport (for code that drives every transport
    /// alike).
    fn transport(&mut self) -> &mut dyn Transport;
}

impl<W: RmaWire + std::fmt::Debug> NetTransport for RmaTransport<W> {
    fn peers(&self) -> Vec<Rank> {
        RmaTransport::peers(self)
    }
    fn connected(&self) -> Vec<Rank> {
        RmaTransport::connected(self)
    }
    fn set_closed(&mut self) {
        RmaTransport::set_closed(self)
    }
    fn watch_probe(&self) -> Option<Box<dyn crate::watch::Probe>> {
        self.wire().watch_probe()
    }
    fn transport(&mut self) -> &mut dyn Transport {
        self
    }
}
