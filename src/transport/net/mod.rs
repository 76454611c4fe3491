//! [`RmaTransport`]: the end-of-frame length-flag rings ([`crate::ring`])
//! over a network of one-sided writes ([`RmaWire`]: libfabric, RDMA
//! verbs, TCP write records). This module owns everything but the
//! network: this rank's rings
//! and credit words, the staging mirror of each peer's ring, positions
//! and credit, the placement-order question, peers' failures and the
//! close flush.
//!
//! - Memory: one region holds a ring per peer, then a credit word and a
//!   flush word per peer (64 bytes apart); peers write it. A second
//!   region (staging) holds a mirror of each peer's ring and one put
//!   buffer: a fragment is gathered into its mirror slot, its trailer
//!   right behind the payload, and one write sends payload + trailer to
//!   the same place of the peer's slot.
//! - Placement order: where the wire says a write's bytes are placed in
//!   order, the receiver polls the stamp word alone. Otherwise (the safe
//!   mode) each ring write is notified and the receiver trusts a stamp
//!   only once the wire reported that write landed ([`Event::Landed`]).
//! - Progress: the poll calls the wire's progress at once after an
//!   arrival, then at doubling gaps while nothing comes, up to
//!   [`RmaWire::progress_period`] polls; credit waits call it when the
//!   credit word already landed gives no credit. Between, the empty poll
//!   is one load per connected ring (a watch: the stamp word the next
//!   fragment sets, and its value, kept in step with the reader); in safe
//!   mode one load: the count of landed reports not yet taken (no ring is
//!   looked at while it is zero).
//! - Credits: piggybacked on trailers, or an 8-byte write to the peer's
//!   credit word. One-sided `put` / `put_u64` are synchronous writes into
//!   the peer's window area.
//!   Where the wire [gathers](RmaWire::gathers), a whole message, a put
//!   and every full fragment of a streamed message but its last
//!   (`Transport::try_send_fragment`) go from the caller's bytes with the
//!   trailer in one write; the mirror serves only frames reserved for
//!   streaming (a message's first partial and last fragments).
//! - Failures: a failed write names its peer; each peer's set-up TCP
//!   connection stays open, and its end (with or without the goodbye byte
//!   a closed endpoint sends) tells a peer that left from one that died.
//!   A wire whose data travels on those connections reads them itself and
//!   reports the same as [`Event::Ended`] ([`RmaWire::carries_ends`]).
//! - Set-up (`setup.rs`): every peer up front (the full mesh, `eager`), or
//!   each peer on first use (`connect.rs`, `lazy`, on wires that
//!   [connect late](RmaWire::late_peers)). Only connected peers are
//!   polled, flushed at close and told goodbye; a peer never connected
//!   has nothing in flight, and its slot is one word (`peer.rs`).

//!
//! Beside the ring transport this folder holds what every wire shares:
//! the rings' settings and where peers' writes land (`config.rs`), the
//! full mesh of set-up connections (`mesh.rs`), the per-pair lock-free
//! words of the lazy connector (`lazy_pairs.rs`) and of a socket-read
//! link (`link.rs`; both checked by loom models), and what a wire tells
//! start-up about itself (`provider.rs`).
//!
//! Its files import only down this table (`scripts/layers.py check`):
//!
//! ```text
//! layers:begin
//! provider setup lazy send | a wire's provider; opening the transport
//!                          | (eager or lazy); its sending half
//! connect                  | the lazy connector's threads and sockets
//! peer news mesh           | per-peer ring state; arrivals news; the
//!                          | full mesh of set-up connections
//! wire                     | what a wire must do (`RmaWire`)
//! config link lazy_pairs   | ring settings and write targets; the
//!                          | per-pair lock-free words
//! layers:end
//! ```

#![allow(unsafe_code)]

pub(crate) mod config;
pub(crate) mod connect;
mod lazy;
pub(crate) mod lazy_pairs;
pub(crate) mod link;
pub mod mesh;
mod news;
mod peer;
pub(crate) mod provider;
mod send;
mod setup;
pub mod wire;

pub use self::config::NetRingConfig;
pub(crate) use self::config::NetTargets;
use self::connect::{Connector, Dialed, Incoming};
use self::peer::{Peer, Slot};
use self::wire::{Area, Event, PeerArea, RmaWire};
use crate::error::{ExtractError, NetError, ProtocolError, PutError};
use crate::frame::FragHeader;
use crate::id::Rank;
use crate::log::LongWait;
use crate::ring::{RingGeometry, RingRegion, Scan, ScanGate, TRAILER_BYTES};
use crate::sync::AtomicU64;
use crate::sync::Ordering;
use crate::transport::{ReleaseToken, RxFragment, Transport, TxFrame};
use crate::window::WindowView;
use std::cell::{Cell, RefCell};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest time the idle poll lets pass between two progress calls
/// and still lengthen its gap: a gap counted in polls is a few µs in a
/// tight poll loop, but a wait that yields between polls (oversubscribed
/// ranks) would make it milliseconds.
const GAP_TIME: Duration = Duration::from_micros(8);
/// Bytes of the buffer one-sided puts are staged in.
const PUT_BUF: usize = 64 << 10;
/// The goodbye byte of an endpoint that closed (left in order).
const BYE_CLOSED: u8 = 1;
/// The goodbye byte of an endpoint dropped without `close`.
const BYE_LEFT: u8 = 2;

/// Where the poll looks for one peer's next fragment: the byte of its
/// stamp word in the rings area and the value that says it landed (what
/// [`RingRx::watch`](crate::ring::RingRx::watch) computes, kept by
/// `RmaTransport::rewatch` in step with the reader, so that the empty poll
/// is one load per ring).
#[derive(Clone, Copy, Debug)]
struct Watch {
    at: usize,
    want: u64,
    /// The ring is in service (else the watch never fires).
    live: bool,
}

/// The ring protocol over a one-sided-write wire `W`. See the module docs.
#[derive(Debug)]
pub struct RmaTransport<W: RmaWire> {
    world: u32,
    geometry: RingGeometry,
    /// Safe mode: ring writes are notified (the wire does not place a
    /// write's bytes in order).
    notify: bool,
    period: u32,
    lands_alone: bool,
    /// The wire reads the set-up connections ([`RmaWire::carries_ends`]).
    carries_ends: bool,
    /// The wire sends from the caller's pieces ([`RmaWire::gathers`]).
    gathers: bool,
    /// Per peer number (rank order): its rank.
    ranks: Vec<Rank>,
    /// Per peer number: connected, not yet, or failed to connect.
    peers: Vec<Slot>,
    /// The connected peers' numbers (what poll, flush, check and close
    /// visit), in the order they connected.
    active: Vec<usize>,
    /// Per connected peer (`active[i]`): the poll's watch of its ring.
    watch: Vec<Watch>,
    peer_of_rank: Vec<u32>,
    /// Where the poll's round resumes in `active`.
    next: usize,
    /// Lazy set-up: the connector (dials, and links handed over).
    lazy: Option<Connector>,
    /// Where the wire counts its placements ([`RmaWire::placements`]):
    /// the count at the last scan that found every ring empty.
    scan: ScanGate,
    /// How long a peer's host may stay silent before its link fails: each
    /// set-up link is armed with it as it connects ([`RmaWire::arm`]).
    dead_after: std::time::Duration,
    /// Safe mode: how many slots' `landed` flags are set (reports not yet
    /// taken); while 0 no ring can be ready.
    reports: Cell<usize>,
    /// Failures reported by the wire and not yet by `check_peers`.
    failed: RefCell<Vec<(usize, String)>>,
    /// Lazy connections that failed, not yet reported by `check_peers`.
    unreachable: Vec<(usize, String)>,
    /// Ends of peers' connections reported by the wire and not yet by
    /// `check_peers` (see [`Event::Ended`]).
    ended: RefCell<Vec<(usize, Result<bool, NetError>)>>,
    /// Polls since the wire's progress was last called.
    idle: Cell<u32>,
    /// Polls between progress calls now: 1 after an arrival, doubling
    /// while progress finds nothing, up to `period` — halving instead when
    /// the last gap took longer than [`GAP_TIME`] (slow polls: a rank that
    /// yields or sleeps between them).
    gap: Cell<u32>,
    /// When `progress_at_gap` last ran.
    gap_since: Cell<Option<Instant>>,
    flush_round: u64,
    closed: bool,
    /// The close flush is done: peers send nothing more, and may be gone
    /// (no credit is returned any more).
    quiet: bool,
    // Field order is drop order: the wire (registrations, endpoint)
    // before the memory it registered.
    wire: W,
    rings: Arc<RingRegion>,
    staging: RingRegion,
    /// The registered window area; the view keeps the segment mapped
    /// (whenever the shm transport is dropped).
    _window: WindowView,
}

impl<W: RmaWire> RmaTransport<W> {
    fn ring_off(&self, k: usize) -> usize {
        (self.geometry.ring_bytes() * k as u64) as usize
    }

    fn credit_off(&self, k: usize) -> usize {
        self.ring_off(self.peers.len()) + 64 * k
    }

    fn flush_off(&self, k: usize) -> usize {
        self.ring_off(self.peers.len()) + 64 * (self.peers.len() + k)
    }

    /// The put buffer, after the mirrors in staging.
    fn put_off(&self) -> usize {
        self.ring_off(self.peers.len())
    }

    /// Where the flush word for peer `k` is staged, after the put buffer.
    fn flush_src_off(&self, k: usize) -> usize {
        self.put_off() + PUT_BUF + 64 * k
    }

    /// The ranks this transport reaches (connected or not yet).
    pub fn peers(&self) -> Vec<Rank> {
        self.ranks.clone()
    }

    /// The ranks connected so far (with lazy set-up, those talked to).
    pub fn connected(&self) -> Vec<Rank> {
        self.active.iter().map(|&k| self.ranks[k]).collect()
    }

    /// Connected peer `k` (callers take `k` from `active`, or checked it).
    #[inline]
    fn p(&self, k: usize) -> &Peer {
        self.peers[k].up().expect("a connected peer")
    }

    #[inline]
    fn p_mut(&mut self, k: usize) -> &mut Peer {
        self.peers[k].up_mut().expect("a connected peer")
    }

    /// The close barrier released this rank: its goodbye will say so.
    pub(crate) fn set_closed(&mut self) {
        self.closed = true;
    }

    /// The wire.
    pub(crate) fn wire(&self) -> &W {
        &self.wire
    }

    /// The word at byte `at` of this rank's rings area, and where peer
    /// `k`'s ring starts there (for tests that play a peer).
    #[cfg(test)]
    pub(crate) fn rings_word(&self, k: usize, at: usize) -> u64 {
        // SYNC POINT ring-stamp (acquire side): as the poll's read of a
        // stamp, pairs with the placing write's Release.
        self.rings
            .word(self.ring_off(k) + at)
            .load(Ordering::Acquire)
    }

    fn peer_index(&self, dest: Rank) -> Option<usize> {
        match self.peer_of_rank.get(dest.index()) {
            Some(&k) if k != u32::MAX => Some(k as usize),
            _ => None,
        }
    }

    fn credit_word(&self, k: usize) -> &AtomicU64 {
        self.rings.word(self.credit_off(k))
    }

    /// Call the wire's progress and take in what it found (out of line:
    /// the empty poll's fast path stays small).
    #[inline(never)]
    fn progress(&self) {
        self.idle.set(0);
        self.wire.progress();
        self.wire.take_events(&mut |e| match e {
            Event::Landed { peer, pos } => {
                let slot = self.geometry.slot_of(pos) as usize;
                let p = self.peers.get(peer).and_then(Slot::up);
                if let Some(c) = p.and_then(|p| p.landed.get(slot)) {
                    mark(c, &self.reports);
                }
                self.gap.set(1);
            }
            Event::Failed { peer, why } => self.failed.borrow_mut().push((peer, why)),
            Event::Ended { peer, how } => self.ended.borrow_mut().push((peer, how)),
        });
    }

    /// The empty poll's progress: at once after an arrival, then at
    /// doubling gaps up to the wire's period while nothing comes (on a
    /// manual-progress provider each call is a system call).
    #[inline(always)]
    fn progress_due(&self) {
        let n = self.idle.get() + 1;
        if n < self.gap.get() {
            self.idle.set(n);
            return;
        }
        self.progress_at_gap();
    }

    /// The progress call `progress_due` found due (out of line).
    #[inline(never)]
    fn progress_at_gap(&self) {
        let now = Instant::now();
        let slow = self
            .gap_since
            .replace(Some(now))
            .is_some_and(|t| now.duration_since(t) > GAP_TIME);
        let g = self.gap.get();
        self.gap.set(if slow {
            (g / 2).max(1)
        } else {
            (g * 2).min(self.period)
        });
        self.progress();
    }

    /// Whether some connected peer's ring holds a fragment to take. In
    /// safe mode one load while no landed report waits; the rings are then
    /// looked at out of line (the empty poll's code stays small).
    #[inline(always)]
    fn any_ready(&self) -> bool {
        if self.notify {
            return self.reports.get() != 0 && self.scan_reported();
        }
        // The count loaded before the scan; while it stands still the
        // rings are not looked at (as in `poll`).
        match self.scan.begin(self.wire.placements()) {
            Some(scan) => self.scan_landed(scan),
            None => false,
        }
    }

    /// The rings' scan of [`any_ready`](Self::any_ready), out of line: the
    /// transports' dispatch inlines `has_arrivals` for every transport,
    /// and shared memory's empty poll wants it small (the scan inline cost
    /// that poll an instruction). A scan that finds nothing tells the
    /// gate.
    #[inline(never)]
    fn scan_landed(&self, scan: Scan) -> bool {
        let any = (0..self.active.len()).any(|i| self.landed(i));
        if !any {
            self.scan.found_empty(scan);
        }
        any
    }

    #[inline(never)]
    fn scan_reported(&self) -> bool {
        (0..self.active.len()).any(|i| self.landed(i))
    }

    /// Whether the next fragment of `active[i]` landed.
    #[inline]
    fn landed(&self, i: usize) -> bool {
        if self.notify {
            let p = self.p(self.active[i]);
            if !p.landed[self.geometry.slot_of(p.rx.head()) as usize].get() {
                return false;
            }
        }
        let w = self.watch[i];
        // SYNC POINT ring-stamp (acquire side), as in `RingWatch::ready`:
        // in order, the stamp landing last proves the payload landed; in
        // safe mode the notification did. A ring out of service never
        // fires.
        w.live && self.rings.word(w.at).load(Ordering::Acquire) == w.want
    }

    /// Take what landed on peer `k` (`active[i]`)'s ring; `None` if
    /// nothing after all.
    fn take(&mut self, k: usize, i: usize) -> Option<Result<RxFragment, ProtocolError>> {
        let ring = self.rings.ring(self.ring_off(k), self.geometry);
        let (g, world) = (self.geometry, self.world);
        let p = self.peers[k].up_mut().expect("a connected peer");
        let head = p.rx.head();
        let got = p.rx.try_take(&ring, world);
        if p.rx.head() != head && p.landed[g.slot_of(head) as usize].replace(false) {
            // The report of the slot just taken is used.
            self.reports.set(self.reports.get() - 1);
        }
        self.rewatch(i);
        let n = self.active.len();
        self.next = if i + 1 == n { 0 } else { i + 1 };
        let taken = match got {
            Ok(Some(t)) => t,
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        };
        self.p_mut(k).tx.returned(taken.body.credit);
        // SAFETY: the slot stays ours until the engine releases the
        // fragment (the peer may not write it again without the credit
        // that release returns); the region outlives the fragment.
        Some(Ok(unsafe { RxFragment::from_ring(k, &taken) }))
    }
}

impl<W: RmaWire> Transport for RmaTransport<W> {
    fn poll(&mut self) -> Option<Result<RxFragment, ProtocolError>> {
        self.progress_due();
        if self.lazy_arrived() {
            self.install_arrived();
        }
        if self.notify && self.reports.get() == 0 {
            // Safe mode: no ring is ready before its write was reported.
            return None;
        }
        // The count loaded before the scan (model 9,
        // `crate::ring::placements`).
        let scan = self.scan.begin(self.wire.placements())?;
        let n = self.active.len();
        let mut i = if self.next < n { self.next } else { 0 };
        for _ in 0..n {
            if self.landed(i) {
                let k = self.active[i];
                if let Some(r) = self.take(k, i) {
                    // Busy: progress again at the next poll.
                    self.gap.set(1);
                    return Some(r);
                }
            }
            i = if i + 1 == n { 0 } else { i + 1 };
        }
        self.scan.found_empty(scan);
        None
    }

    #[inline(always)]
    fn has_arrivals(&self) -> bool {
        self.wire.may_sleep();
        self.progress_due();
        // A link handed over: the next poll installs it.
        self.lazy_arrived() || self.any_ready()
    }

    fn release(&mut self, token: &ReleaseToken) {
        self.p_mut(token.a as usize).rx.release(token.pos);
    }

    fn flush(&mut self) {
        for i in 0..self.active.len() {
            let k = self.active[i];
            if let Some(c) = self.p_mut(k).rx.credit_due(false) {
                self.send_credit(k, c);
            }
        }
    }

    fn try_reserve(&mut self, dest: Rank, _remaining: u64) -> Option<TxFrame> {
        let k = self.peer_index(dest)?;
        if !self.ensure(k) || self.p(k).gone {
            return None;
        }
        let pos = self.reserve(k)?;
        let g = self.geometry;
        let slot = self.ring_off(k) + (g.slot_of(pos) * g.slot_bytes) as usize;
        // SAFETY: the mirror slot of `pos` is ours until its credit returns.
        Some(unsafe { TxFrame::external(dest, pos, self.staging.base().add(slot), g.capacity()) })
    }

    fn commit(&mut self, frame: TxFrame, header: FragHeader) {
        if let Some(k) = self.peer_index(frame.dest) {
            if self.peers[k].up().is_some_and(|p| !p.gone) {
                self.send_fragment(k, frame.token, header);
            }
        }
    }

    fn frame_capacity(&self) -> usize {
        self.geometry.capacity()
    }

    fn inline_max(&self) -> usize {
        self.geometry.capacity()
    }

    fn try_send_inline(&mut self, dest: Rank, header: FragHeader, pieces: &[&[u8]]) -> bool {
        if self.gathers {
            return self.send_gathered(dest, header, pieces);
        }
        let Some(mut f) = self.try_reserve(dest, u64::from(header.len)) else {
            return false;
        };
        for p in pieces {
            f.append(p);
        }
        self.commit(f, header);
        true
    }

    fn try_send_fragment(&mut self, dest: Rank, header: FragHeader, piece: &[u8]) -> Option<bool> {
        self.gathers
            .then(|| self.send_gathered(dest, header, &[piece]))
    }

    fn check_peers(&mut self) -> Result<(), ExtractError> {
        self.progress();
        if self.lazy_arrived() {
            self.install_arrived();
        }
        // The backstop of the credit protocol: publish whatever is released.
        for i in 0..self.active.len() {
            let k = self.active[i];
            if let Some(c) = self.p_mut(k).rx.credit_due(true) {
                self.send_credit(k, c);
            }
        }
        if let Some((k, why)) = self.unreachable.pop() {
            return Err(ExtractError::Network(NetError::Unreachable {
                rank: self.ranks[k],
                why,
            }));
        }
        let failed = self.failed.borrow_mut().pop();
        if let Some((k, why)) = failed {
            // A write that failed because the wire had ended the
            // connection for a cause of its own (a bad record from the
            // peer, its silence): that cause is the error, not the write's.
            let cause = {
                let mut ended = self.ended.borrow_mut();
                let i = ended.iter().position(|e| e.0 == k && e.1.is_err());
                i.map(|i| ended.remove(i).1)
            };
            if let Some(how) = cause {
                return self.departed(k, how);
            }
            if let Some(p) = self.peers[k].up_mut() {
                p.gone = true;
                if let Some(why) = p.silent.clone() {
                    return Err(ExtractError::Network(NetError::HostSilent {
                        rank: self.ranks[k],
                        why,
                    }));
                }
            }
            return Err(ExtractError::Network(NetError::Io {
                rank: self.ranks[k],
                op: "one-sided write",
                msg: why,
            }));
        }
        // Stamps from neither this lap nor the last (a stamp written by
        // anyone but the ring's writer).
        for i in 0..self.active.len() {
            let k = self.active[i];
            let ring = self.rings.ring(self.ring_off(k), self.geometry);
            let p = self.peers[k].up_mut().expect("a connected peer");
            let checked = p.rx.check(&ring);
            self.rewatch(i);
            checked?;
        }
        for i in 0..self.active.len() {
            let k = self.active[i];
            if !self.p(k).gone {
                self.peer_news(k)?;
            }
        }
        Ok(())
    }

    fn is_gone(&self, dest: Rank) -> bool {
        self.peer_index(dest).is_some_and(|k| match &self.peers[k] {
            Slot::Up(p) => p.gone,
            Slot::Down(_) => true,
            Slot::Idle => false,
        })
    }

    fn silence(&self, dest: Rank) -> Option<String> {
        self.peers[self.peer_index(dest)?].up()?.silent.clone()
    }

    fn unreachable(&self, dest: Rank) -> Option<String> {
        match &self.peers[self.peer_index(dest)?] {
            Slot::Down(why) => Some(why.clone()),
            _ => None,
        }
    }

    fn has_credit(&self, dest: Rank) -> bool {
        self.peer_index(dest).is_some_and(|k| {
            // Not connected yet: a send connects it (`ensure`).
            let Some(p) = self.peers[k].up() else {
                return true;
            };
            // SYNC POINT credit-return (acquire side), as in `try_reserve`.
            let credit = || p.gone || p.tx.has_credit(self.credit_word(k).load(Ordering::Acquire));
            // The sockets are read (a system call) only when the count
            // already landed gives no credit.
            credit()
                || (!self.lands_alone && {
                    self.progress();
                    credit()
                })
        })
    }

    fn put(&mut self, dest: Rank, at: u64, data: &[u8]) -> Result<(), PutError> {
        let Some(k) = self.peer_index(dest) else {
            return Err(PutError::PeerGone { rank: dest });
        };
        if !self.ensure(k) || self.p(k).gone {
            return Err(match self.unreachable(dest) {
                Some(why) => PutError::Unreachable { rank: dest, why },
                None => PutError::PeerGone { rank: dest },
            });
        }
        let local = self.put_off();
        for (i, chunk) in data.chunks(PUT_BUF).enumerate() {
            let to = at + (i * PUT_BUF) as u64;
            if self.gathers {
                if let Err(why) = self.wire.write_gather(k, Area::Window, to, &[chunk]) {
                    self.fail(k, why);
                    return Err(PutError::PeerGone { rank: dest });
                }
                continue;
            }
            // SAFETY: the put buffer is ours; the previous put from it has
            // landed (`write_sync` returned).
            unsafe {
                core::ptr::copy_nonoverlapping(
                    chunk.as_ptr(),
                    self.staging.base().add(local),
                    chunk.len(),
                )
            };
            if let Err(why) = self.wire.write_sync(k, local, chunk.len(), to) {
                self.fail(k, why);
                return Err(PutError::PeerGone { rank: dest });
            }
        }
        Ok(())
    }

    fn put_u64(&mut self, dest: Rank, at: u64, value: u64) -> Result<(), PutError> {
        // An aligned 8-byte write lands whole; synchronous, so ordered
        // after the put's data and before any later message.
        self.put(dest, at, &value.to_le_bytes())
    }

    fn quiesce(&mut self, warn: Duration) -> Result<(), ExtractError> {
        // Tell every peer "all I sent before this has landed" by a flush
        // word written after it (fenced), then wait for theirs. Not waited
        // for: a peer that saw every flush may leave before acknowledging
        // (the wire lets posted writes leave before it closes).
        self.flush_round += 1;
        let round = self.flush_round;
        if let Err(why) = self.wire.fence() {
            if let Some(&k) = self.active.iter().find(|&&k| !self.p(k).gone) {
                self.fail(k, why);
            }
        }
        // Links handed over but not installed yet are peers too (a peer
        // that connected to us just before its close, e.g. by a put).
        if self.lazy_arrived() {
            self.install_arrived();
        }
        let mut flushed = 0;
        let mut clock = LongWait::new(warn);
        let mut rounds = 0u32;
        loop {
            // Peers connected since (lazy set-up) get this round's word too.
            while flushed < self.active.len() {
                let k = self.active[flushed];
                flushed += 1;
                if !self.p(k).gone {
                    self.send_flush(k, round);
                }
            }
            self.progress();
            let waiting = self.active.iter().copied().find(|&k| {
                // SYNC POINT ring-flush (acquire side): the peer's flush
                // word lands after everything it wrote before.
                !self.p(k).gone
                    && self.rings.word(self.flush_off(k)).load(Ordering::Acquire) < round
            });
            // A connection being accepted: the peer dialed us before its
            // close (its dial returned), so it counts on our flush.
            let settling = self.lazy.as_ref().is_some_and(Connector::settling);
            if settling && self.lazy_arrived() {
                self.install_arrived();
            }
            rounds = rounds.saturating_add(1);
            let Some(k) = waiting else {
                if settling {
                    // Bounded by the connect time-out: the handshake thread
                    // holds it only while it answers a dial.
                    let timeout = self.lazy.as_ref().map_or(warn, Connector::timeout);
                    if clock.waited() > timeout {
                        // The peer whose accepted link never came in.
                        let k = (0..self.peers.len())
                            .find(|&k| {
                                matches!(self.peers[k], Slot::Idle)
                                    && self.lazy.as_ref().is_some_and(|l| l.accepted(k))
                            })
                            .unwrap_or(0);
                        return Err(ExtractError::Network(NetError::Io {
                            rank: self.ranks[k],
                            op: "flush at close",
                            msg: format!("its connection still being accepted after {timeout:?}"),
                        }));
                    }
                    quiesce_pause(rounds);
                    continue;
                }
                self.quiet = true;
                return Ok(());
            };
            // A peer that died, left or went silent is reported here; a
            // live one (computing, stopped in a debugger) is waited for.
            self.peer_news(k)?;
            if let Some(waited) = clock.due() {
                tracing::warn!(
                    "close has waited {:.0} s for rank {}'s flush (everything it sent before its close): its connection is alive, so it is still running or stopped (a debugger?); waiting on",
                    waited.as_secs_f64(),
                    self.ranks[k]
                );
            }
            quiesce_pause(rounds);
        }
    }
}

/// Between two looks of `quiesce`: yield while the wait is young (a
/// peer's flush usually lands within microseconds), then sleep a
/// millisecond, so that a long wait leaves the cores to the ranks it waits
/// for.
fn quiesce_pause(rounds: u32) {
    if rounds < 1000 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_millis(1));
    }
}

impl<W: RmaWire> Drop for RmaTransport<W> {
    fn drop(&mut self) {
        if self.carries_ends {
            self.wire.goodbye(self.closed);
            return;
        }
        let bye = if self.closed { BYE_CLOSED } else { BYE_LEFT };
        for slot in &mut self.peers {
            if let Some(p) = slot.up_mut() {
                let _ = p.side.write_all(&[bye]);
            }
        }
    }
}

/// Peer `k` (connected: the caller checked) and a look-up of the others,
/// borrowed apart (a credit wait takes in events for any peer).
fn split_at_peer<'a>(
    peers: &'a mut [Slot],
    k: usize,
) -> (&'a mut Peer, impl Fn(usize) -> Option<&'a Peer> + 'a) {
    let (before, rest) = peers.split_at_mut(k);
    let (mine, after) = rest.split_first_mut().expect("peer k exists");
    let mine = mine.up_mut().expect("a connected peer");
    let (before, after): (&[Slot], &[Slot]) = (before, after);
    let others = move |j: usize| {
        if j < k {
            before.get(j).and_then(Slot::up)
        } else {
            after.get(j - k - 1).and_then(Slot::up)
        }
    };
    (mine, others)
}

/// A landed report for the slot whose flag is `c`: set it, counting it in
/// `reports` if it was not set already.
#[inline]
fn mark(c: &Cell<bool>, reports: &Cell<usize>) {
    if !c.replace(true) {
        reports.set(reports.get() + 1);
    }
}
