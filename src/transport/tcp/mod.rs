//! The TCP transport: end-of-frame length-flag rings ([`crate::ring`]) over
//! a software NIC — the Ethernet path, and the test bed of the ring
//! protocol (HPVM §4.1, the original design, `../shared/DESIGN.md` "Network transports", beside the repository; see `docs/references.md`).
//!
//! Per network peer this rank owns a ring in a [`RingRegion`] and a credit
//! word. The peer's writes arrive as *write records* on its TCP connection;
//! the NIC thread (`nic`) places them into the region, trailer last with
//! Release, and the application polls only memory — the same stamp-word
//! poll as an RDMA ring, so the empty poll costs one cached load per peer.
//! Sending is one `sendmsg` per fragment gathering record header, payload
//! and trailer; whole messages up to a frame go straight from the caller's
//! pieces (no staging copy).
//!
//! Connections are made by rank order and authenticated with the job
//! secret ([`mesh`]). A peer that misbehaves or disconnects fails alone:
//! [`Transport::check_peers`] reports a typed [`NetError`] once and the
//! peer is marked gone; other peers are unaffected.
//!
//! The NIC writes into the shared segment (window area, doorbell) through
//! views that hold the segment's mapping ([`NetTargets`]), so this
//! transport may be dropped before or after the shm transport; dropping
//! says goodbye to every peer, stops the NIC thread and joins it.

#![allow(unsafe_code)]

pub mod mesh;
pub(crate) mod nic;
pub(crate) mod wire;

use self::nic::{NicTargets, Shared};
use self::wire::{RecordHeader, HEADER_BYTES};
use super::{ReleaseToken, RxFragment, Transport, TxFrame};
use crate::error::{ExtractError, NetError, ProtocolError, PutError};
use crate::frame::FragHeader;
use crate::id::Rank;
use crate::link::{Departure, FAILED, LEFT};
use crate::ring::{RingGeometry, RingRegion, RingRx, RingStore, RingTx, TRAILER_BYTES};
use crate::sync::AtomicU64;
use crate::sync::Ordering;
use crate::transport::shm::mapping::MapRef;
use crate::wake::Doorbell;
use crate::window::WindowView;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Settings of the network rings (all ranks agree; checked at connection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetRingConfig {
    /// Slots per ring (`FASTMSG_NET_SLOTS`, a power of two ≥ 4).
    pub slots: u32,
    /// Bytes per slot including the 40-byte trailer
    /// (`FASTMSG_NET_SLOT_SIZE`, a multiple of 64).
    pub slot_bytes: u32,
}

impl Default for NetRingConfig {
    fn default() -> Self {
        NetRingConfig {
            slots: 16,
            slot_bytes: 64 << 10,
        }
    }
}

impl NetRingConfig {
    /// The ring geometry, if the settings are usable.
    pub fn geometry(&self) -> Option<RingGeometry> {
        RingGeometry::checked(self.slots, self.slot_bytes)
    }
}

/// The stamp word an idle poll reads for one peer, and the value that
/// means "arrived".
#[derive(Debug, Clone, Copy)]
struct Watch {
    stamp: *const AtomicU64,
    want: u64,
}

/// Send and receive state towards one network peer.
#[derive(Debug)]
struct Peer {
    rank: Rank,
    stream: TcpStream,
    tx: RingTx,
    rx: RingRx,
    /// Gather buffer of a reserved (streamed) frame.
    staging: Vec<u8>,
    reserved: bool,
    gone: bool,
    /// A send failed: reported by the next `check_peers`.
    send_error: Option<NetError>,
}

/// The TCP transport of one rank.
#[derive(Debug)]
pub struct TcpTransport {
    world: u32,
    geometry: RingGeometry,
    /// Dense per network peer, in the order of `shared.links`.
    watch: Vec<Watch>,
    peers: Vec<Peer>,
    /// Per global rank: index into `peers`, or `u32::MAX`.
    peer_of_rank: Vec<u32>,
    next: usize,
    alerts_seen: u64,
    /// Flush rounds done (see `quiesce`).
    flush_round: u64,
    shared: Arc<Shared>,
    wake: OwnedFd,
    nic: Option<JoinHandle<()>>,
    /// The close barrier released this rank: the goodbye says so.
    closed: bool,
}

/// Where remote one-sided writes land and whom to wake: this rank's window
/// area and doorbell in the host's shared segment, each a view that keeps
/// the segment mapped.
#[derive(Debug, Clone)]
pub(crate) struct NetTargets {
    /// The window area (`ShmTransport::own_window`).
    pub(crate) window: WindowView,
    /// The doorbell to ring when a record lands (a sleeping wait policy).
    pub(crate) bell: Option<MapRef<Doorbell>>,
}

impl TcpTransport {
    /// A transport over authenticated connections `links` (one per network
    /// peer, see [`mesh::connect`]); starts the NIC thread.
    ///
    /// # Errors
    /// The OS error of creating the wake-up descriptor or the thread.
    pub(crate) fn new(
        me: Rank,
        world: u32,
        geometry: RingGeometry,
        mut links: Vec<(Rank, TcpStream)>,
        targets: NetTargets,
    ) -> std::io::Result<TcpTransport> {
        links.sort_by_key(|l| l.0);
        let ranks: Vec<Rank> = links.iter().map(|l| l.0).collect();
        let shared = Arc::new(Shared::new(
            geometry,
            &ranks,
            NicTargets {
                window: targets.window,
                bell: targets.bell,
            },
        )?);
        let mut peer_of_rank = vec![u32::MAX; world as usize];
        let mut peers = Vec::with_capacity(links.len());
        let mut fds = Vec::with_capacity(links.len());
        for (k, (rank, stream)) in links.into_iter().enumerate() {
            stream.set_nodelay(true)?;
            peer_of_rank[rank.index()] = k as u32;
            fds.push(stream.as_raw_fd());
            peers.push(Peer {
                rank,
                stream,
                tx: RingTx::new(geometry),
                rx: RingRx::new(geometry, rank.0),
                staging: vec![0; geometry.capacity()],
                reserved: false,
                gone: false,
                send_error: None,
            });
        }
        // SAFETY: plain eventfd creation; the result is checked.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        let wake = unsafe { OwnedFd::from_raw_fd(efd) };
        let mut t = TcpTransport {
            world,
            geometry,
            watch: Vec::new(),
            peers,
            peer_of_rank,
            next: 0,
            alerts_seen: 0,
            flush_round: 0,
            shared: Arc::clone(&shared),
            wake,
            nic: None,
            closed: false,
        };
        t.watch = (0..t.peers.len()).map(|k| t.watch_of(k)).collect();
        let sh = Arc::clone(&shared);
        t.nic = Some(
            std::thread::Builder::new()
                .name(format!("fastmsg-nic-{me}"))
                .spawn(move || nic::run(sh, fds, efd))?,
        );
        Ok(t)
    }

    /// The ranks this transport reaches.
    pub fn peers(&self) -> Vec<Rank> {
        self.peers.iter().map(|p| p.rank).collect()
    }

    fn region(&self) -> &RingRegion {
        &self.shared.region
    }

    fn watch_of(&self, k: usize) -> Watch {
        let ring = self
            .region()
            .ring(self.shared.ring_offset(k), self.geometry);
        let rx = &self.peers[k].rx;
        Watch {
            stamp: ring.stamp(self.geometry.slot_of(rx.head())),
            want: rx.head() + 1,
        }
    }

    #[inline]
    fn peer_index(&self, dest: Rank) -> Option<usize> {
        match self.peer_of_rank.get(dest.index()) {
            Some(&k) if k != u32::MAX => Some(k as usize),
            _ => None,
        }
    }

    /// Send one record; a failure marks the peer gone (reported by the
    /// next `check_peers`).
    fn send(&mut self, k: usize, parts: &[&[u8]]) -> bool {
        let p = &mut self.peers[k];
        if p.gone {
            return false;
        }
        match wire::write_all_vectored(&p.stream, parts) {
            Ok(()) => true,
            Err(e) => {
                p.gone = true;
                p.send_error.get_or_insert(NetError::Io {
                    rank: p.rank,
                    op: "send",
                    msg: e.to_string(),
                });
                false
            }
        }
    }

    fn send_credit(&mut self, k: usize, count: u64) {
        let h = RecordHeader {
            kind: wire::CREDIT,
            len: 0,
            offset: count,
        }
        .encode();
        self.send(k, &[&h]);
    }

    /// Take what landed on peer `k`'s ring; `None` if nothing after all
    /// (the peer stored another stamp since the watch fired, or its ring
    /// is out of service).
    #[cold]
    fn take(&mut self, k: usize) -> Option<Result<RxFragment, ProtocolError>> {
        let ring = self
            .shared
            .region
            .ring(self.shared.ring_offset(k), self.geometry);
        let p = &mut self.peers[k];
        let got = p.rx.try_take(&ring, self.world);
        let w = self.watch_of(k);
        self.watch[k] = w;
        let n = self.peers.len();
        self.next = if k + 1 == n { 0 } else { k + 1 };
        let taken = match got {
            Ok(Some(t)) => t,
            Ok(None) => return None,
            Err(e) => {
                if matches!(e, ProtocolError::RingCorrupt { .. }) {
                    // Out of service: watch a word nobody writes, so that
                    // no stamp the peer stores can fire it again.
                    self.watch[k] = Watch::NEVER;
                }
                return Some(Err(e));
            }
        };
        self.peers[k].tx.returned(taken.body.credit);
        // SAFETY: the payload lies in peer k's ring slot, which the peer
        // may not write again before we return its credit, and we return
        // it only after the engine releases this fragment; `try_take`
        // checked the length against the slot; the region outlives the
        // fragment (the engine drops fragments before transports).
        Some(Ok(unsafe { RxFragment::from_ring(k, &taken) }))
    }
}

/// The stamp a dead ring's watch looks at: never written, so never equal
/// to the `u64::MAX` it waits for.
static NEVER_WRITTEN: AtomicU64 = AtomicU64::new(0);

impl Watch {
    /// The watch of a ring out of service: it never fires, whatever the
    /// peer stores in the ring.
    const NEVER: Watch = Watch {
        stamp: &NEVER_WRITTEN,
        want: u64::MAX,
    };
}

impl Transport for TcpTransport {
    #[inline]
    fn poll(&mut self) -> Option<Result<RxFragment, ProtocolError>> {
        let n = self.watch.len();
        let mut k = self.next;
        for _ in 0..n {
            // SAFETY: the stamp points into the region, alive while `self`.
            // SYNC POINT ring-stamp (acquire side): see `crate::ring`.
            if unsafe { &*self.watch[k].stamp }.load(Ordering::Acquire) == self.watch[k].want {
                if let Some(r) = self.take(k) {
                    return Some(r);
                }
            }
            k += 1;
            if k == n {
                k = 0;
            }
        }
        None
    }

    #[inline]
    fn has_arrivals(&self) -> bool {
        self.watch.iter().any(|w| {
            // SAFETY: as in `poll`. SYNC POINT ring-stamp (acquire side).
            unsafe { &*w.stamp }.load(Ordering::Acquire) == w.want
        })
    }

    #[inline]
    fn release(&mut self, token: &ReleaseToken) {
        self.peers[token.a as usize].rx.release(token.pos);
    }

    fn flush(&mut self) {
        for k in 0..self.peers.len() {
            if let Some(c) = self.peers[k].rx.credit_due(false) {
                self.send_credit(k, c);
            }
        }
    }

    #[inline]
    fn try_reserve(&mut self, dest: Rank, _remaining: u64) -> Option<TxFrame> {
        let k = self.peer_index(dest)?;
        let credit = self.shared.credit_word(k);
        let p = &mut self.peers[k];
        if p.gone || p.reserved {
            debug_assert!(p.gone, "one reserved frame per destination at a time");
            return None;
        }
        // SYNC POINT credit-return (acquire side): pairs with the NIC's
        // Release store of the peer's CREDIT record.
        let pos = p.tx.try_reserve(|| credit.load(Ordering::Acquire))?;
        p.reserved = true;
        let cap = p.staging.len();
        // SAFETY: the staging buffer is ours and untouched until commit
        // (one reserved frame per destination).
        Some(unsafe { TxFrame::external(dest, pos, p.staging.as_mut_ptr(), cap) })
    }

    fn commit(&mut self, frame: TxFrame, header: FragHeader) {
        let Some(k) = self.peer_index(frame.dest) else {
            return;
        };
        let p = &mut self.peers[k];
        p.reserved = false;
        let pos = frame.token;
        let len = frame.len();
        let credit = p.rx.piggyback();
        let trailer = p.tx.trailer(pos, header, credit).to_bytes();
        let rec = RecordHeader {
            kind: wire::RING,
            len: (len + TRAILER_BYTES) as u32,
            offset: self.geometry.write_start(pos, len),
        }
        .encode();
        // The staging buffer is moved out for the call so `send` may borrow
        // the peer mutably.
        let staging = std::mem::take(&mut self.peers[k].staging);
        self.send(k, &[&rec, &staging[..len], &trailer]);
        self.peers[k].staging = staging;
    }

    fn frame_capacity(&self) -> usize {
        self.geometry.capacity()
    }

    #[inline]
    fn inline_max(&self) -> usize {
        self.geometry.capacity()
    }

    fn try_send_inline(&mut self, dest: Rank, header: FragHeader, pieces: &[&[u8]]) -> bool {
        const MAX_PIECES: usize = 14;
        if pieces.len() > MAX_PIECES || header.len as usize > self.geometry.capacity() {
            return false;
        }
        let Some(k) = self.peer_index(dest) else {
            return false;
        };
        let credit = self.shared.credit_word(k);
        let p = &mut self.peers[k];
        if p.gone || p.reserved {
            return false;
        }
        // SYNC POINT credit-return (acquire side), as in `try_reserve`.
        let Some(pos) = p.tx.try_reserve(|| credit.load(Ordering::Acquire)) else {
            return false;
        };
        let credit = p.rx.piggyback();
        let trailer = p.tx.trailer(pos, header, credit).to_bytes();
        let len = header.len as usize;
        let rec = RecordHeader {
            kind: wire::RING,
            len: (len + TRAILER_BYTES) as u32,
            offset: self.geometry.write_start(pos, len),
        }
        .encode();
        let mut parts: [&[u8]; MAX_PIECES + 2] = [&[]; MAX_PIECES + 2];
        parts[0] = &rec;
        parts[1..=pieces.len()].copy_from_slice(pieces);
        parts[pieces.len() + 1] = &trailer;
        // Sent or not, the credit is spent: a failed send marks the peer
        // gone and the failure is reported by `check_peers`.
        self.send(k, &parts[..pieces.len() + 2]);
        true
    }

    fn check_peers(&mut self) -> Result<(), ExtractError> {
        // The backstop of the credit protocol: publish whatever is released.
        for k in 0..self.peers.len() {
            if let Some(c) = self.peers[k].rx.credit_due(true) {
                self.send_credit(k, c);
            }
        }
        for p in &mut self.peers {
            if let Some(e) = p.send_error.take() {
                return Err(ExtractError::Network(e));
            }
        }
        // Stamps from neither this lap nor the last (the empty poll
        // compares with one value only and would wait for ever).
        // (Checked without taking: a fragment taken here could be neither
        // delivered nor released in order.)
        for k in 0..self.peers.len() {
            let ring = self
                .shared
                .region
                .ring(self.shared.ring_offset(k), self.geometry);
            if let Err(e) = self.peers[k].rx.check(&ring) {
                self.watch[k] = Watch::NEVER;
                return Err(ExtractError::Protocol(e));
            }
        }
        // Links that left UP since the last look (SYNC POINT link-alert).
        let gone = self.peers.iter_mut().map(|p| &mut p.gone);
        match self.shared.links.check(&mut self.alerts_seen, gone) {
            Ok(()) => Ok(()),
            Err(Departure::Failed(e)) => Err(ExtractError::Network(e)),
            Err(Departure::Left(rank)) => Err(ExtractError::PeerLeft { rank }),
        }
    }

    fn is_gone(&self, dest: Rank) -> bool {
        self.peer_index(dest).is_some_and(|k| {
            self.peers[k].gone || matches!(self.shared.links.state(k), FAILED | LEFT)
        })
    }

    fn has_credit(&self, dest: Rank) -> bool {
        self.peer_index(dest).is_some_and(|k| {
            let p = &self.peers[k];
            // SYNC POINT credit-return (acquire side), as in `try_reserve`.
            p.gone
                || p.tx
                    .has_credit(self.shared.credit_word(k).load(Ordering::Acquire))
        })
    }

    fn put(&mut self, dest: Rank, at: u64, data: &[u8]) -> Result<(), PutError> {
        let k = self
            .peer_index(dest)
            .ok_or(PutError::PeerGone { rank: dest })?;
        let rec = RecordHeader {
            kind: wire::PUT,
            len: data.len() as u32,
            offset: at,
        }
        .encode();
        if self.send(k, &[&rec, data]) {
            Ok(())
        } else {
            Err(PutError::PeerGone { rank: dest })
        }
    }

    fn quiesce(&mut self, timeout: std::time::Duration) -> Result<(), ExtractError> {
        self.quiesce_impl(timeout)
    }

    fn put_u64(&mut self, dest: Rank, at: u64, value: u64) -> Result<(), PutError> {
        let k = self
            .peer_index(dest)
            .ok_or(PutError::PeerGone { rank: dest })?;
        let rec = RecordHeader {
            kind: wire::PUT_U64,
            len: 8,
            offset: at,
        }
        .encode();
        if self.send(k, &[&rec, &value.to_le_bytes()]) {
            Ok(())
        } else {
            Err(PutError::PeerGone { rank: dest })
        }
    }
}

impl TcpTransport {
    /// See [`Transport::quiesce`]: send every peer a FLUSH record, then wait
    /// until every live peer's FLUSH of this round has been applied here —
    /// records apply in order, so everything it sent before has landed.
    fn quiesce_impl(&mut self, timeout: std::time::Duration) -> Result<(), ExtractError> {
        self.flush_round += 1;
        let round = self.flush_round;
        let flush = RecordHeader {
            kind: wire::FLUSH,
            len: 0,
            offset: round,
        }
        .encode();
        for k in 0..self.peers.len() {
            self.send(k, &[&flush]);
        }
        let start = std::time::Instant::now();
        loop {
            // SYNC POINT link-flush, in `Links::flush_pending`.
            let links = &self.shared.links;
            let waiting =
                (0..links.len()).find(|&k| !self.peers[k].gone && links.flush_pending(k, round));
            let Some(k) = waiting else {
                return Ok(());
            };
            if start.elapsed() > timeout {
                return Err(ExtractError::Network(NetError::Io {
                    rank: links.rank(k),
                    op: "flush at close",
                    msg: format!("no answer in {timeout:?}"),
                }));
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }
}

impl TcpTransport {
    /// The close barrier released this rank: its goodbye will say so.
    pub(crate) fn set_closed(&mut self) {
        self.closed = true;
    }

    /// A probe of the links' states for the endpoint's watchdog: reports
    /// when a link has left `UP` since it last looked.
    pub(crate) fn link_probe(&self) -> LinkProbe {
        LinkProbe {
            shared: Arc::clone(&self.shared),
            seen: 0,
        }
    }
}

/// The watchdog's view of the NIC's link states (see
/// [`TcpTransport::link_probe`]).
pub(crate) struct LinkProbe {
    shared: Arc<Shared>,
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

impl Drop for TcpTransport {
    fn drop(&mut self) {
        let bye = RecordHeader {
            kind: wire::BYE,
            len: 0,
            offset: if self.closed { wire::BYE_CLOSED } else { 0 },
        }
        .encode();
        for k in 0..self.peers.len() {
            self.send(k, &[&bye]);
        }
        let one = 1u64.to_ne_bytes();
        // SAFETY: writing 8 bytes to our eventfd wakes the NIC thread.
        unsafe {
            libc::write(
                self.wake.as_raw_fd(),
                one.as_ptr() as *const libc::c_void,
                8,
            )
        };
        if let Some(h) = self.nic.take() {
            let _ = h.join();
        }
    }
}

const _: () = assert!(HEADER_BYTES == 16);

#[cfg(test)]
mod tests;
