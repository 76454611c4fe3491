//! Starting an [`RmaTransport`]: its memory (one ring and two words per
//! peer in the rings area, the mirror of each peer's ring in staging, both
//! laid out for every peer up front but anonymous memory that costs only
//! what is written), then either every peer at once over the full mesh of
//! set-up connections ([`RmaTransport::new`], `FASTMSG_CONNECT=eager`) or
//! none yet, each peer connected on first use ([`RmaTransport::new_lazy`],
//! `FASTMSG_CONNECT=lazy`, see [`super::connect`]).

use super::connect::{Connector, LazyJob};
use super::peer::{Peer, Slot};
use super::wire::{PeerArea, RmaWire};
use super::{RmaTransport, PUT_BUF};
use crate::id::Rank;
use crate::ring::{RingGeometry, RingRegion, ScanGate};
use crate::transport::net::NetTargets;
use std::cell::{Cell, RefCell};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

impl<W: RmaWire> RmaTransport<W> {
    /// The transport for peers `ranks` (sorted), none connected yet: its
    /// memory allocated and registered with the wire.
    fn blank(
        mut wire: W,
        world: u32,
        geometry: RingGeometry,
        ranks: Vec<Rank>,
        targets: NetTargets,
        dead_after: Duration,
    ) -> Result<RmaTransport<W>, W::Error> {
        let n = ranks.len();
        let ring_bytes = geometry.ring_bytes() as usize;
        let map = |bytes: usize, what: &str| {
            RingRegion::try_zeroed(bytes as u64).map_err(|e| {
                wire.memory_error(format!(
                    "cannot map {bytes} bytes for the {what} of {n} network peer(s) ({} slots of {} bytes per ring: FASTMSG_NET_SLOTS, FASTMSG_NET_SLOT_SIZE): {e}; lower those settings or raise the process's memory limit",
                    geometry.slots, geometry.slot_bytes
                ))
            })
        };
        let rings = Arc::new(map(ring_bytes * n + 128 * n, "rings")?);
        let staging = map(ring_bytes * n + PUT_BUF + 64 * n, "send staging")?;
        wire.register(geometry, &rings, (staging.base(), staging.len()), {
            let (base, len) = targets.window.raw();
            (base, len as usize)
        })?;
        let mut peer_of_rank = vec![u32::MAX; world as usize];
        for (k, r) in ranks.iter().enumerate() {
            peer_of_rank[r.index()] = k as u32;
        }
        Ok(RmaTransport {
            world,
            geometry,
            notify: false,
            period: wire.progress_period().max(1),
            lands_alone: wire.lands_by_itself(),
            carries_ends: wire.carries_ends(),
            gathers: wire.gathers(),
            peers: ranks.iter().map(|_| Slot::Idle).collect(),
            ranks,
            active: Vec::with_capacity(n),
            watch: Vec::with_capacity(n),
            peer_of_rank,
            next: 0,
            lazy: None,
            scan: ScanGate::new(),
            dead_after,
            failed: RefCell::new(Vec::new()),
            unreachable: Vec::new(),
            ended: RefCell::new(Vec::new()),
            idle: Cell::new(0),
            gap: Cell::new(1),
            gap_since: Cell::new(None),
            reports: Cell::new(0),
            flush_round: 0,
            closed: false,
            quiet: false,
            wire,
            rings,
            staging,
            _window: targets.window,
        })
    }

    /// Where this rank's ring and words for peer `k` lie in its rings area.
    fn my_area(&self, k: usize) -> PeerArea {
        PeerArea {
            ring: self.ring_off(k) as u64,
            credit: self.credit_off(k) as u64,
            flush: self.flush_off(k) as u64,
        }
    }

    /// Connect every peer of `links` (authenticated TCP connections, which
    /// carry the set-up exchange) over `wire`: the full mesh up front. A
    /// peer whose host stays silent for `dead_after` fails.
    ///
    /// # Errors
    /// The wire's error, from registration, the exchange or connecting.
    pub(crate) fn new(
        wire: W,
        world: u32,
        geometry: RingGeometry,
        mut links: Vec<(Rank, TcpStream)>,
        targets: NetTargets,
        dead_after: Duration,
    ) -> Result<RmaTransport<W>, W::Error> {
        links.sort_by_key(|l| l.0);
        let ranks = links.iter().map(|l| l.0).collect();
        let mut t = Self::blank(wire, world, geometry, ranks, targets, dead_after)?;
        for (k, (rank, mut side)) in links.into_iter().enumerate() {
            let offsets = t.my_area(k);
            let mine = t.wire.describe(k, &offsets)?;
            let theirs = exchange(&mut side, &offsets.encode(), &mine).map_err(|e| {
                t.wire
                    .setup_error(format!("set-up exchange with rank {rank}: {}", stalled(&e)))
            })?;
            if theirs.len() < PeerArea::BYTES {
                return Err(t.wire.setup_error(format!(
                    "set-up exchange with rank {rank}: {} bytes, too short",
                    theirs.len()
                )));
            }
            let (area, desc) = theirs.split_at(PeerArea::BYTES);
            let remote = PeerArea::decode(area.try_into().expect("checked length"));
            t.wire.arm(&side, dead_after).map_err(|e| {
                t.wire.setup_error(format!(
                    "watch for a lost host on the link to rank {rank}: {e}"
                ))
            })?;
            t.wire.connect(k, rank.0, &remote, desc, &side)?;
            t.activate(k, Peer::new(rank, geometry, remote, side));
        }
        t.wire.ready(geometry.slots)?;
        t.notify = !t.wire.places_in_order();
        // Both ends are ready to be written before anyone writes.
        for &k in &t.active {
            let Slot::Up(p) = &mut t.peers[k] else {
                continue;
            };
            let r = p
                .side
                .write_all(&[0])
                .and_then(|()| p.side.read_exact(&mut [0u8; 1]));
            // Set up: the link carries only news from now on, without the
            // start-up bound `mesh::connect` gave it.
            let r = r.and_then(|()| p.side.set_read_timeout(None));
            let r = r.and_then(|()| p.side.set_write_timeout(None));
            if let Err(e) = r {
                let rank = p.rank;
                return Err(t
                    .wire
                    .setup_error(format!("ready handshake with rank {rank}: {}", stalled(&e))));
            }
        }
        t.wire.started()?;
        Ok(t)
    }

    /// The transport for `peers` (their ranks and start-up listeners), none
    /// connected: each is connected on first use, by this rank (a send, a
    /// put) or by the peer (its connection accepted on `listener` by a
    /// thread of the connector); `bell` is rung when one is accepted.
    /// `Ok(None)`: the wire cannot connect late (the caller uses
    /// [`new`](Self::new) over the full mesh).
    ///
    /// # Errors
    /// The wire's error, from registration or starting; the OS error of
    /// starting the accepting thread, as a set-up error.
    pub(crate) fn new_lazy(
        mut wire: W,
        world: u32,
        geometry: RingGeometry,
        mut peers: Vec<(Rank, SocketAddr)>,
        listener: TcpListener,
        job: LazyJob,
        targets: NetTargets,
    ) -> Result<Option<RmaTransport<W>>, W::Error> {
        peers.sort_by_key(|p| p.0);
        let ranks: Vec<Rank> = peers.iter().map(|p| p.0).collect();
        if !wire.late_peers(&ranks) {
            return Ok(None);
        }
        let bell = targets.bell.clone();
        let dead_after = job.dead_after;
        let mut t = Self::blank(wire, world, geometry, ranks, targets, dead_after)?;
        let mut mine = Vec::with_capacity(peers.len());
        for k in 0..peers.len() {
            let offsets = t.my_area(k);
            let desc = t.wire.describe(k, &offsets)?;
            let mut b = offsets.encode().to_vec();
            b.extend_from_slice(&desc);
            mine.push(b);
        }
        t.wire.ready(geometry.slots)?;
        t.notify = !t.wire.places_in_order();
        t.wire.started()?;
        let connector = Connector::start(listener, job, peers, mine, bell).map_err(|e| {
            t.wire
                .setup_error(format!("start accepting connections: {e}"))
        })?;
        t.lazy = Some(connector);
        Ok(Some(t))
    }
}

/// Send our offsets and wire description, length-prefixed; receive the
/// peer's.
fn exchange(side: &mut TcpStream, offsets: &[u8], wire: &[u8]) -> std::io::Result<Vec<u8>> {
    super::connect::send_desc(side, &[offsets, wire].concat())?;
    super::connect::read_desc(side)
}

/// An error of the set-up exchange, saying so when it is the start-up
/// time-out (`mesh::connect` bounds the links' reads and writes).
fn stalled(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            "no answer within the start-up time-out (FASTMSG_TIMEOUT): the peer stalled after connecting".into()
        }
        _ => e.to_string(),
    }
}
