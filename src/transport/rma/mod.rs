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
//!   [`RmaWire::progress_period`] polls; credit waits call it before
//!   re-reading the credit word. In safe mode an empty poll between
//!   progress calls is one load: the count of landed reports not yet
//!   taken (no ring is looked at while it is zero).
//! - Credits: piggybacked on trailers, or an 8-byte write to the peer's
//!   credit word. One-sided `put` / `put_u64` are synchronous writes into
//!   the peer's window area.
//!   Where the wire [gathers](RmaWire::gathers), a whole message and a
//!   put go from the caller's pieces with the trailer in one write, and
//!   the mirror serves only frames reserved for streaming.
//! - Failures: a failed write names its peer; each peer's set-up TCP
//!   connection stays open, and its end (with or without the goodbye byte
//!   a closed endpoint sends) tells a peer that left from one that died.
//!   A wire whose data travels on those connections reads them itself and
//!   reports the same as [`Event::Ended`] ([`RmaWire::carries_ends`]).

#![allow(unsafe_code)]

mod landed;
pub mod wire;

use self::landed::Landed;
use self::wire::{Area, Event, PeerArea, RmaWire};
use crate::error::{ExtractError, NetError, ProtocolError, PutError};
use crate::frame::FragHeader;
use crate::id::Rank;
use crate::ring::{RingGeometry, RingRegion, RingRx, RingTx, TRAILER_BYTES};
use crate::sync::AtomicU64;
use crate::sync::Ordering;
use crate::transport::tcp::NetTargets;
use crate::transport::{ReleaseToken, RxFragment, Transport, TxFrame};
use crate::window::WindowView;
use std::cell::{Cell, RefCell};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes of the buffer one-sided puts are staged in.
const PUT_BUF: usize = 64 << 10;
/// The goodbye byte of an endpoint that closed (left in order).
const BYE_CLOSED: u8 = 1;
/// The goodbye byte of an endpoint dropped without `close`.
const BYE_LEFT: u8 = 2;

#[derive(Debug)]
struct Peer {
    rank: Rank,
    tx: RingTx,
    rx: RingRx,
    /// Where this peer's areas for us lie in its rings area.
    remote: PeerArea,
    gone: bool,
    /// The set-up connection, kept to tell a peer's end.
    side: TcpStream,
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
    peers: Vec<Peer>,
    peer_of_rank: Vec<u32>,
    next: usize,
    /// Safe mode: which slots' writes were reported landed, not yet taken.
    landed: Landed,
    /// Failures reported by the wire and not yet by `check_peers`.
    failed: RefCell<Vec<(usize, String)>>,
    /// Ends of peers' connections reported by the wire and not yet by
    /// `check_peers` (see [`Event::Ended`]).
    ended: RefCell<Vec<(usize, Result<bool, NetError>)>>,
    /// Polls since the wire's progress was last called.
    idle: Cell<u32>,
    /// Polls between progress calls now: 1 after an arrival, doubling
    /// while progress finds nothing, up to `period`.
    gap: Cell<u32>,
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

    /// Connect every peer of `links` (authenticated TCP connections, which
    /// carry the set-up exchange) over `wire`.
    ///
    /// # Errors
    /// The wire's error, from registration, the exchange or connecting.
    pub(crate) fn new(
        mut wire: W,
        world: u32,
        geometry: RingGeometry,
        mut links: Vec<(Rank, TcpStream)>,
        targets: NetTargets,
    ) -> Result<RmaTransport<W>, W::Error> {
        links.sort_by_key(|l| l.0);
        let n = links.len();
        let ring_bytes = geometry.ring_bytes() as usize;
        let rings = Arc::new(RingRegion::zeroed((ring_bytes * n + 128 * n) as u64));
        let staging = RingRegion::zeroed((ring_bytes * n + PUT_BUF + 64 * n) as u64);
        wire.register(geometry, &rings, (staging.base(), staging.len()), {
            let (base, len) = targets.window.raw();
            (base, len as usize)
        })?;
        let mut t = RmaTransport {
            world,
            geometry,
            notify: false,
            period: wire.progress_period().max(1),
            lands_alone: wire.lands_by_itself(),
            carries_ends: wire.carries_ends(),
            gathers: wire.gathers(),
            peers: Vec::with_capacity(n),
            peer_of_rank: vec![u32::MAX; world as usize],
            next: 0,
            landed: Landed::default(),
            failed: RefCell::new(Vec::new()),
            ended: RefCell::new(Vec::new()),
            idle: Cell::new(0),
            gap: Cell::new(1),
            flush_round: 0,
            closed: false,
            quiet: false,
            wire,
            rings,
            staging,
            _window: targets.window,
        };
        for (k, (rank, mut side)) in links.into_iter().enumerate() {
            // The peers' list has `n` entries: offsets are final before
            // the peers are pushed.
            let ring = (geometry.ring_bytes() * k as u64) as usize;
            let words = ring_bytes * n;
            let offsets = PeerArea {
                ring: ring as u64,
                credit: (words + 64 * k) as u64,
                flush: (words + 64 * (n + k)) as u64,
            };
            let mine = t.wire.describe(k, &offsets)?;
            let theirs = exchange(&mut side, &offsets.encode(), &mine).map_err(|e| {
                t.wire
                    .setup_error(format!("set-up exchange with rank {rank}: {e}"))
            })?;
            if theirs.len() < PeerArea::BYTES {
                return Err(t.wire.setup_error(format!(
                    "set-up exchange with rank {rank}: {} bytes, too short",
                    theirs.len()
                )));
            }
            let (area, desc) = theirs.split_at(PeerArea::BYTES);
            let remote = PeerArea::decode(area.try_into().expect("checked length"));
            t.wire.connect(k, rank.0, &remote, desc, &side)?;
            t.peer_of_rank[rank.index()] = k as u32;
            t.peers.push(Peer {
                rank,
                tx: RingTx::new(geometry),
                rx: RingRx::new(geometry, rank.0),
                remote,
                gone: false,
                side,
            });
        }
        t.landed = Landed::new(n, geometry.slots);
        t.wire.ready(geometry.slots)?;
        t.notify = !t.wire.places_in_order();
        // Both ends are ready to be written before anyone writes.
        for p in &mut t.peers {
            let r = p
                .side
                .write_all(&[0])
                .and_then(|()| p.side.read_exact(&mut [0u8; 1]));
            if let Err(e) = r {
                let rank = p.rank;
                return Err(t
                    .wire
                    .setup_error(format!("ready handshake with rank {rank}: {e}")));
            }
        }
        t.wire.started()?;
        Ok(t)
    }

    /// The ranks this transport reaches.
    pub fn peers(&self) -> Vec<Rank> {
        self.peers.iter().map(|p| p.rank).collect()
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
                self.landed.mark(peer, self.geometry.slot_of(pos));
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
        self.gap.set((self.gap.get() * 2).min(self.period));
        self.progress();
    }

    /// Whether some peer's ring holds a fragment to take. In safe mode,
    /// one load while no landed report waits; the rings are looked at out
    /// of line (the empty poll's code stays small).
    #[inline(always)]
    fn any_ready(&self) -> bool {
        if self.notify {
            return self.landed.any() && self.scan_reported();
        }
        (0..self.peers.len()).any(|k| self.landed(k))
    }

    #[inline(never)]
    fn scan_reported(&self) -> bool {
        (0..self.peers.len()).any(|k| self.landed(k))
    }

    #[inline]
    fn landed(&self, k: usize) -> bool {
        let p = &self.peers[k];
        let slot = self.geometry.slot_of(p.rx.head());
        if self.notify && !self.landed.is_set(k, slot) {
            return false;
        }
        let ring = self.rings.ring(self.ring_off(k), self.geometry);
        // SYNC POINT ring-stamp (acquire side), in `RingWatch::ready`: in
        // order, the stamp landing last proves the payload landed; in safe
        // mode the notification did. A ring out of service never fires.
        p.rx.watch(&ring).ready()
    }

    /// Post fragment `pos` (payload at the start of its mirror slot).
    fn send_fragment(&mut self, k: usize, pos: u64, header: FragHeader) {
        let g = self.geometry;
        let len = header.len as usize;
        let credit = self.peers[k].rx.piggyback();
        let trailer = self.peers[k].tx.trailer(pos, header, credit).to_bytes();
        let slot_start = self.ring_off(k) + (g.slot_of(pos) * g.slot_bytes) as usize;
        // SAFETY: the mirror slot is ours until its credit returns; the
        // payload lies at its start and `len + TRAILER_BYTES <= slot`.
        unsafe {
            core::ptr::copy_nonoverlapping(
                trailer.as_ptr(),
                self.staging.base().add(slot_start + len),
                TRAILER_BYTES,
            )
        };
        let remote = self.peers[k].remote.ring + g.write_start(pos, len);
        let notify = self.notify.then_some(pos);
        if let Err(why) = self
            .wire
            .write(k, slot_start, len + TRAILER_BYTES, remote, notify)
        {
            self.fail(k, why);
        }
    }

    fn fail(&mut self, k: usize, why: String) {
        self.peers[k].gone = true;
        self.failed.borrow_mut().push((k, why));
    }

    /// Return credit with an 8-byte write to the peer's credit word.
    fn send_credit(&mut self, k: usize, count: u64) {
        if self.peers[k].gone || self.quiet {
            return;
        }
        let at = self.peers[k].remote.credit;
        if let Err(why) = self.wire.write_word(k, at, count) {
            self.fail(k, why);
        }
    }

    /// The position of peer `k`'s next fragment, if it has credit.
    fn reserve(&mut self, k: usize) -> Option<u64> {
        let g = self.geometry;
        let credit_at = self.credit_off(k);
        let RmaTransport {
            peers,
            rings,
            wire,
            lands_alone,
            landed,
            failed,
            ended,
            idle,
            ..
        } = self;
        peers[k].tx.try_reserve(|| {
            if !*lands_alone {
                // Out of credit: the returned count lands through progress.
                idle.set(0);
                wire.progress();
                wire.take_events(&mut |e| match e {
                    Event::Landed { peer, pos } => landed.mark(peer, g.slot_of(pos)),
                    Event::Failed { peer, why } => failed.borrow_mut().push((peer, why)),
                    Event::Ended { peer, how } => ended.borrow_mut().push((peer, how)),
                });
            }
            // SYNC POINT credit-return (acquire side): the peer's write of
            // its released count.
            rings.word(credit_at).load(Ordering::Acquire)
        })
    }

    /// A whole message straight from the caller's `pieces` (a wire that
    /// [gathers](RmaWire::gathers)): the trailer goes behind them in the
    /// same write, no staging copy.
    fn send_gathered(&mut self, dest: Rank, header: FragHeader, pieces: &[&[u8]]) -> bool {
        const MAX_PIECES: usize = 14;
        let len = header.len as usize;
        if pieces.len() > MAX_PIECES || len > self.geometry.capacity() {
            return false;
        }
        let Some(k) = self.peer_index(dest) else {
            return false;
        };
        if self.peers[k].gone {
            return false;
        }
        let Some(pos) = self.reserve(k) else {
            return false;
        };
        let credit = self.peers[k].rx.piggyback();
        let trailer = self.peers[k].tx.trailer(pos, header, credit).to_bytes();
        let mut parts: [&[u8]; MAX_PIECES + 1] = [&[]; MAX_PIECES + 1];
        parts[..pieces.len()].copy_from_slice(pieces);
        parts[pieces.len()] = &trailer;
        let at = self.peers[k].remote.ring + self.geometry.write_start(pos, len);
        // Sent or not, the credit is spent: a failed write marks the peer
        // gone and `check_peers` reports it.
        if let Err(why) = self
            .wire
            .write_gather(k, Area::Rings, at, &parts[..=pieces.len()])
        {
            self.fail(k, why);
        }
        true
    }

    /// Take what landed on peer `k`'s ring; `None` if nothing after all.
    fn take(&mut self, k: usize) -> Option<Result<RxFragment, ProtocolError>> {
        let ring = self.rings.ring(self.ring_off(k), self.geometry);
        let head = self.peers[k].rx.head();
        let got = self.peers[k].rx.try_take(&ring, self.world);
        if self.peers[k].rx.head() != head {
            self.landed.clear(k, self.geometry.slot_of(head));
        }
        let n = self.peers.len();
        self.next = if k + 1 == n { 0 } else { k + 1 };
        let taken = match got {
            Ok(Some(t)) => t,
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        };
        self.peers[k].tx.returned(taken.body.credit);
        // SAFETY: the slot stays ours until the engine releases the
        // fragment (the peer may not write it again without the credit
        // that release returns); the region outlives the fragment.
        Some(Ok(unsafe { RxFragment::from_ring(k, &taken) }))
    }

    /// Read what peer `k`'s set-up connection says without blocking: its
    /// goodbye byte, its end, or nothing.
    fn side_news(&mut self, k: usize) -> Result<(), ExtractError> {
        let p = &mut self.peers[k];
        let mut b = [0u8; 1];
        // SAFETY: reading one byte from our own socket, non-blocking.
        let r = unsafe {
            libc::recv(
                p.side.as_raw_fd(),
                b.as_mut_ptr() as *mut libc::c_void,
                1,
                libc::MSG_DONTWAIT,
            )
        };
        let how = match r {
            1 if b[0] == BYE_CLOSED => Ok(true),
            1 if b[0] == BYE_LEFT => Ok(false),
            0 | 1 => Err(NetError::Disconnected {
                rank: p.rank,
                mid_record: r == 1,
            }),
            _ => return Ok(()),
        };
        self.departed(k, how)
    }

    /// Peer `k`'s connection ended `how` (see [`Event::Ended`]): it is
    /// gone, and a goodbye without close or a failure is the error.
    fn departed(&mut self, k: usize, how: Result<bool, NetError>) -> Result<(), ExtractError> {
        let p = &mut self.peers[k];
        p.gone = true;
        match how {
            Ok(true) => Ok(()),
            Ok(false) => Err(ExtractError::PeerLeft { rank: p.rank }),
            Err(e) => Err(ExtractError::Network(e)),
        }
    }

    /// What peer `k`'s connection says: its end, once, or nothing.
    fn peer_news(&mut self, k: usize) -> Result<(), ExtractError> {
        if !self.carries_ends {
            return self.side_news(k);
        }
        let found = {
            let mut ended = self.ended.borrow_mut();
            let i = ended.iter().position(|e| e.0 == k);
            i.map(|i| ended.remove(i).1)
        };
        match found {
            Some(how) => self.departed(k, how),
            None => Ok(()),
        }
    }
}

/// Send our offsets and wire description, length-prefixed; receive the
/// peer's.
fn exchange(side: &mut TcpStream, offsets: &[u8], wire: &[u8]) -> std::io::Result<Vec<u8>> {
    const MAX: usize = 4096;
    let len = (offsets.len() + wire.len()) as u32;
    side.write_all(&len.to_le_bytes())?;
    side.write_all(offsets)?;
    side.write_all(wire)?;
    let mut l = [0u8; 4];
    side.read_exact(&mut l)?;
    let l = u32::from_le_bytes(l) as usize;
    if l > MAX {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("peer sent a {l}-byte description (at most {MAX})"),
        ));
    }
    let mut b = vec![0u8; l];
    side.read_exact(&mut b)?;
    Ok(b)
}

impl<W: RmaWire> Transport for RmaTransport<W> {
    fn poll(&mut self) -> Option<Result<RxFragment, ProtocolError>> {
        self.progress_due();
        if self.notify && !self.landed.any() {
            // Safe mode: no ring is ready before its write was reported.
            return None;
        }
        let n = self.peers.len();
        let mut k = self.next;
        for _ in 0..n {
            if self.landed(k) {
                if let Some(r) = self.take(k) {
                    // Busy: progress again at the next poll.
                    self.gap.set(1);
                    return Some(r);
                }
            }
            k = if k + 1 == n { 0 } else { k + 1 };
        }
        None
    }

    #[inline(always)]
    fn has_arrivals(&self) -> bool {
        self.wire.may_sleep();
        self.progress_due();
        self.any_ready()
    }

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

    fn try_reserve(&mut self, dest: Rank, _remaining: u64) -> Option<TxFrame> {
        let k = self.peer_index(dest)?;
        if self.peers[k].gone {
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
            if !self.peers[k].gone {
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

    fn check_peers(&mut self) -> Result<(), ExtractError> {
        self.progress();
        // The backstop of the credit protocol: publish whatever is released.
        for k in 0..self.peers.len() {
            if let Some(c) = self.peers[k].rx.credit_due(true) {
                self.send_credit(k, c);
            }
        }
        let failed = self.failed.borrow_mut().pop();
        if let Some((k, why)) = failed {
            self.peers[k].gone = true;
            return Err(ExtractError::Network(NetError::Io {
                rank: self.peers[k].rank,
                op: "one-sided write",
                msg: why,
            }));
        }
        // Stamps from neither this lap nor the last (a stamp written by
        // anyone but the ring's writer).
        for k in 0..self.peers.len() {
            let ring = self.rings.ring(self.ring_off(k), self.geometry);
            self.peers[k].rx.check(&ring)?;
        }
        for k in 0..self.peers.len() {
            if !self.peers[k].gone {
                self.peer_news(k)?;
            }
        }
        Ok(())
    }

    fn is_gone(&self, dest: Rank) -> bool {
        self.peer_index(dest).is_some_and(|k| self.peers[k].gone)
    }

    fn has_credit(&self, dest: Rank) -> bool {
        self.peer_index(dest).is_some_and(|k| {
            if !self.lands_alone {
                self.progress();
            }
            let p = &self.peers[k];
            // SYNC POINT credit-return (acquire side), as in `try_reserve`.
            p.gone || p.tx.has_credit(self.credit_word(k).load(Ordering::Acquire))
        })
    }

    fn put(&mut self, dest: Rank, at: u64, data: &[u8]) -> Result<(), PutError> {
        let k = self
            .peer_index(dest)
            .filter(|&k| !self.peers[k].gone)
            .ok_or(PutError::PeerGone { rank: dest })?;
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

    fn quiesce(&mut self, timeout: Duration) -> Result<(), ExtractError> {
        // Tell every peer "all I sent before this has landed" by a flush
        // word written after it (fenced), then wait for theirs. Not waited
        // for: a peer that saw every flush may leave before acknowledging
        // (the wire lets posted writes leave before it closes).
        self.flush_round += 1;
        let round = self.flush_round;
        if let Err(why) = self.wire.fence() {
            if let Some(k) = (0..self.peers.len()).find(|&k| !self.peers[k].gone) {
                self.fail(k, why);
            }
        }
        for k in 0..self.peers.len() {
            if self.peers[k].gone {
                continue;
            }
            let local = self.flush_src_off(k);
            // SAFETY: peer k's flush source word in staging is ours; the
            // previous round's write from it completed (fenced, or ordered
            // and answered by the peer's flush of that round).
            unsafe {
                core::ptr::copy_nonoverlapping(
                    round.to_le_bytes().as_ptr(),
                    self.staging.base().add(local),
                    8,
                )
            };
            let at = self.peers[k].remote.flush;
            // SYNC POINT ring-flush (release side): the flush word goes
            // after every earlier write to this peer, and the wire places
            // writes in order (or, in safe mode, issues it only after their
            // completions), so the peer that reads the round sees them all.
            if let Err(why) = self.wire.write(k, local, 8, at, None) {
                self.fail(k, why);
            }
        }
        let start = Instant::now();
        loop {
            self.progress();
            let waiting = (0..self.peers.len()).find(|&k| {
                // SYNC POINT ring-flush (acquire side): the peer's flush
                // word lands after everything it wrote before.
                !self.peers[k].gone
                    && self.rings.word(self.flush_off(k)).load(Ordering::Acquire) < round
            });
            let Some(k) = waiting else {
                self.quiet = true;
                return Ok(());
            };
            self.peer_news(k)?;
            if start.elapsed() > timeout {
                return Err(ExtractError::Network(NetError::Io {
                    rank: self.peers[k].rank,
                    op: "flush at close",
                    msg: format!("no answer in {timeout:?}"),
                }));
            }
            std::thread::yield_now();
        }
    }
}

impl<W: RmaWire> Drop for RmaTransport<W> {
    fn drop(&mut self) {
        if self.carries_ends {
            self.wire.goodbye(self.closed);
            return;
        }
        let bye = if self.closed { BYE_CLOSED } else { BYE_LEFT };
        for p in &mut self.peers {
            let _ = p.side.write_all(&[bye]);
        }
    }
}
