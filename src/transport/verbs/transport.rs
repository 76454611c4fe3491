//! [`VerbsTransport`]: the ring protocol over RC queue pairs. See the
//! module docs of [`super`] for the design and for what was exercised.

#![allow(unsafe_code)]

use super::qp::{self, Cq, Device, Mr, Qp, QpInfo};
use crate::error::{ExtractError, NetError, ProtocolError, PutError, VerbsError};
use crate::frame::FragHeader;
use crate::id::Rank;
use crate::ring::{RingGeometry, RingRegion, RingRx, RingStore, RingTx, TRAILER_BYTES};
use crate::sync::AtomicU64;
use crate::sync::Ordering;
use crate::transport::tcp::NetTargets;
use crate::transport::{ReleaseToken, RxFragment, Transport, TxFrame};
use crate::wake::Doorbell;
use rdma_sys::{ibv_send_flags, ibv_wc, ibv_wc_opcode, ibv_wc_status};
use std::cell::{Cell, RefCell};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Bytes of the per-peer buffer that one-sided puts are staged in.
const PUT_BUF: usize = 64 << 10;
/// Every this many writes to a peer one is signaled (selective signaling).
const SIGNAL_EVERY: u32 = 16;
/// wr_id kinds (low bits; the peer index is in the high 32 bits).
const WR_RING: u64 = 0;
const WR_SYNC: u64 = 1;
const WR_RECV: u64 = 2;

#[derive(Debug)]
struct VPeer {
    rank: Rank,
    qp: Qp,
    remote: QpInfo,
    tx: RingTx,
    rx: RingRx,
    /// Writes posted since the last signaled one, and signaled ones whose
    /// completion is still out.
    unsignaled: u32,
    in_flight_signaled: Cell<u32>,
    gone: bool,
    /// The set-up connection, kept to notice a dead peer (end of file).
    side: TcpStream,
}

/// The verbs transport of one rank.
#[derive(Debug)]
pub struct VerbsTransport {
    world: u32,
    geometry: RingGeometry,
    safe: bool,
    // Field order is drop order: queue pairs, registrations, the CQ, the
    // memory, the device.
    peers: Vec<VPeer>,
    _rings_mr: Mr,
    staging_mr: Mr,
    _window_mr: Mr,
    cq: Cq,
    rings: RingRegion,
    staging: RingRegion,
    _dev: Device,
    peer_of_rank: Vec<u32>,
    next: usize,
    /// Safe mode: writes known to have landed, per peer.
    landed: Vec<Cell<u64>>,
    /// Completion errors not yet reported: (peer, status).
    failed: RefCell<Vec<(usize, String)>>,
    /// A signaled write completed (for synchronous puts).
    sync_done: Cell<u64>,
}

impl VerbsTransport {
    fn ring_off(&self, k: usize) -> usize {
        (self.geometry.ring_bytes() * k as u64) as usize
    }

    fn credit_off(&self, k: usize) -> usize {
        self.ring_off(self.peers.len()) + 64 * k
    }

    /// Staging: mirrors of the peers' rings, then a put buffer per peer.
    fn put_buf_off(&self, k: usize) -> usize {
        self.ring_off(self.peers.len()) + PUT_BUF * k
    }

    /// Connect an RC queue pair to every peer of `links` (authenticated
    /// TCP connections, which carry the set-up exchange).
    ///
    /// # Safety
    /// As [`crate::transport::TcpTransport::new`]: the window area must
    /// stay valid while this transport lives.
    ///
    /// # Errors
    /// [`VerbsError`] from any verbs call or the exchange.
    pub unsafe fn new(
        _me: Rank,
        world: u32,
        geometry: RingGeometry,
        mut links: Vec<(Rank, TcpStream)>,
        targets: NetTargets<'_>,
    ) -> Result<VerbsTransport, VerbsError> {
        links.sort_by_key(|l| l.0);
        let n = links.len();
        let dev = Device::open()?;
        let depth = geometry.slots * 2 + 2 * SIGNAL_EVERY;
        let cq = Cq::new(&dev, (depth as i32) * (n as i32).max(1) * 2)?;
        let ring_bytes = geometry.ring_bytes() as usize;
        let rings = RingRegion::zeroed((ring_bytes * n + 64 * n) as u64);
        let staging = RingRegion::zeroed((ring_bytes * n + PUT_BUF * n) as u64);
        let rings_mr = Mr::new(&dev, rings.base(), rings.len())?;
        let staging_mr = Mr::new(&dev, staging.base(), staging.len())?;
        let window_mr = Mr::new(&dev, targets.window.0, targets.window.1 as usize)?;
        let (lid, mtu, gid, gid_index) = dev.address()?;
        let exchange = |what: &str, e: std::io::Error| VerbsError::Call {
            call: "queue-pair exchange",
            device: dev.name.clone(),
            why: format!("{what}: {e}"),
        };
        let mut peers = Vec::with_capacity(n);
        let mut peer_of_rank = vec![u32::MAX; world as usize];
        for (k, (rank, mut side)) in links.into_iter().enumerate() {
            let qp = Qp::new(&dev, &cq, depth)?;
            let mut psn = [0u8; 4];
            getrandom::fill(&mut psn).expect("the OS random source");
            let psn = u32::from_le_bytes(psn) & 0x00ff_ffff;
            let mine = QpInfo {
                lid,
                gid,
                qpn: qp.num(),
                psn,
                ring_addr: rings.base() as u64 + (ring_bytes * k) as u64,
                credit_addr: rings.base() as u64 + (ring_bytes * n + 64 * k) as u64,
                ring_rkey: rings_mr.rkey(),
                window_addr: targets.window.0 as u64,
                window_rkey: window_mr.rkey(),
            };
            side.write_all(&mine.encode())
                .map_err(|e| exchange("send", e))?;
            let mut b = [0u8; QpInfo::BYTES];
            side.read_exact(&mut b)
                .map_err(|e| exchange("receive", e))?;
            let remote = QpInfo::decode(&b);
            qp.connect(&dev, mtu, gid_index, psn, &remote)?;
            peer_of_rank[rank.index()] = k as u32;
            peers.push(VPeer {
                rank,
                qp,
                remote,
                tx: RingTx::new(geometry),
                rx: RingRx::new(geometry, rank.0),
                unsignaled: 0,
                in_flight_signaled: Cell::new(0),
                gone: false,
                side,
            });
        }
        // Choose the placement mode from rdma-core's answer, not a guess.
        let safe = peers.iter().any(|p| !p.qp.writes_in_order());
        if safe {
            for (k, p) in peers.iter().enumerate() {
                for _ in 0..geometry.slots {
                    p.qp.post_recv(((k as u64) << 32) | WR_RECV)
                        .map_err(|_| dev.call("ibv_post_recv"))?;
                }
            }
        }
        // Both ends are ready to receive before anyone writes.
        for p in &mut peers {
            p.side
                .write_all(&[1])
                .and_then(|()| p.side.read_exact(&mut [0u8; 1]))
                .map_err(|e| exchange("ready", e))?;
        }
        Ok(VerbsTransport {
            world,
            geometry,
            safe,
            peers,
            _rings_mr: rings_mr,
            staging_mr,
            _window_mr: window_mr,
            cq,
            rings,
            staging,
            _dev: dev,
            peer_of_rank,
            next: 0,
            landed: (0..n).map(|_| Cell::new(0)).collect(),
            failed: RefCell::new(Vec::new()),
            sync_done: Cell::new(0),
        })
    }

    /// The ranks this transport reaches.
    pub fn peers(&self) -> Vec<Rank> {
        self.peers.iter().map(|p| p.rank).collect()
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

    /// Reap completions: count landed writes (safe mode), re-post their
    /// receives, note signaled sends done and failures.
    fn drain_cq(&self) {
        // SAFETY: a zeroed work completion is a valid out-buffer.
        let mut wc: [ibv_wc; 16] = unsafe { std::mem::zeroed() };
        loop {
            let got = qp::poll(&self.cq, &mut wc);
            for c in &wc[..got] {
                let k = (c.wr_id >> 32) as usize;
                if k >= self.peers.len() {
                    continue;
                }
                if c.status != ibv_wc_status::IBV_WC_SUCCESS {
                    self.failed.borrow_mut().push((k, qp::status(c.status)));
                    continue;
                }
                match c.wr_id & 0xffff_ffff {
                    WR_RECV if c.opcode == ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM => {
                        let l = &self.landed[k];
                        l.set(l.get() + 1);
                        if self.peers[k].qp.post_recv(c.wr_id).is_err() {
                            self.failed
                                .borrow_mut()
                                .push((k, "ibv_post_recv failed".into()));
                        }
                    }
                    WR_SYNC => self.sync_done.set(self.sync_done.get() + 1),
                    _ => {
                        let s = &self.peers[k].in_flight_signaled;
                        s.set(s.get().saturating_sub(1));
                    }
                }
            }
            if got < wc.len() {
                return;
            }
        }
    }

    #[inline]
    fn landed(&self, k: usize) -> bool {
        let p = &self.peers[k];
        let ring = self.rings.ring(self.ring_off(k), self.geometry);
        if self.safe && self.landed[k].get() <= p.rx.head() {
            return false;
        }
        // SYNC POINT ring-stamp (acquire side): in order, the stamp landing
        // last proves the payload landed; in safe mode the completion did.
        ring.stamp(self.geometry.slot_of(p.rx.head()))
            .load(Ordering::Acquire)
            == p.rx.head() + 1
    }

    /// Post one write to peer `k` from `local` (registered staging, or any
    /// memory when `inline`, which the adapter copies during the call),
    /// signaling one in [`SIGNAL_EVERY`] and keeping the send queue from
    /// overflowing.
    #[allow(clippy::too_many_arguments)]
    fn post(
        &mut self,
        k: usize,
        local: u64,
        len: usize,
        remote: u64,
        rkey: u32,
        imm: Option<u32>,
        inline: bool,
    ) -> bool {
        let depth = self.geometry.slots * 2 + SIGNAL_EVERY;
        let p = &mut self.peers[k];
        if p.gone {
            return false;
        }
        p.unsignaled += 1;
        let mut flags = ibv_send_flags(0);
        if p.unsignaled >= SIGNAL_EVERY {
            p.unsignaled = 0;
            flags |= ibv_send_flags::IBV_SEND_SIGNALED;
            p.in_flight_signaled.set(p.in_flight_signaled.get() + 1);
        }
        if inline {
            flags |= ibv_send_flags::IBV_SEND_INLINE;
        }
        // Keep the send queue from overflowing: at most `depth` writes out.
        let start = Instant::now();
        while self.peers[k].in_flight_signaled.get() * SIGNAL_EVERY >= depth {
            self.drain_cq();
            if start.elapsed() > Duration::from_secs(30) {
                break;
            }
        }
        let p = &self.peers[k];
        let r = p.qp.write(
            ((k as u64) << 32) | WR_RING,
            local,
            len as u32,
            self.staging_mr.lkey(),
            remote,
            rkey,
            imm,
            flags,
        );
        if r.is_err() {
            self.failed
                .borrow_mut()
                .push((k, format!("ibv_post_send failed ({r:?})")));
            self.peers[k].gone = true;
            return false;
        }
        true
    }

    /// Write fragment `pos` (payload at the start of its mirror slot).
    fn send_fragment(&mut self, k: usize, pos: u64, header: FragHeader) {
        let g = self.geometry;
        let len = header.len as usize;
        let credit = self.peers[k].rx.piggyback();
        let trailer = self.peers[k].tx.trailer(pos, header, credit).to_bytes();
        let slot_off = self.ring_off(k) + (g.slot_of(pos) * g.slot_bytes) as usize;
        // SAFETY: the mirror slot is ours (credit), `len + 40 <= slot`.
        unsafe {
            core::ptr::copy_nonoverlapping(
                trailer.as_ptr(),
                self.staging.base().add(slot_off + len),
                TRAILER_BYTES,
            )
        };
        let remote = self.peers[k].remote;
        let imm = self.safe.then_some(pos as u32);
        self.post(
            k,
            self.staging.base() as u64 + slot_off as u64,
            len + TRAILER_BYTES,
            remote.ring_addr + g.write_start(pos, len),
            remote.ring_rkey,
            imm,
            false,
        );
    }

    /// Return credit with an 8-byte inline write to the peer's credit word.
    fn send_credit(&mut self, k: usize, count: u64) {
        let r = self.peers[k].remote;
        let v = count.to_le_bytes();
        self.post(
            k,
            v.as_ptr() as u64,
            8,
            r.credit_addr,
            r.ring_rkey,
            None,
            true,
        );
    }

    /// Take what landed on peer `k`'s ring; `None` if nothing after all
    /// (the stamp changed since `landed`, or the ring is out of service).
    fn take(&mut self, k: usize) -> Option<Result<RxFragment, ProtocolError>> {
        let ring = self.rings.ring(self.ring_off(k), self.geometry);
        let got = self.peers[k].rx.try_take(&ring, self.world);
        let n = self.peers.len();
        self.next = if k + 1 == n { 0 } else { k + 1 };
        let taken = match got {
            Ok(Some(t)) => t,
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        };
        self.peers[k].tx.returned(taken.body.credit);
        // SAFETY: as in the TCP transport: the slot stays ours until the
        // engine releases the fragment; the region outlives it.
        Some(Ok(unsafe { RxFragment::from_ring(k, &taken) }))
    }
}

impl Transport for VerbsTransport {
    fn poll(&mut self) -> Option<Result<RxFragment, ProtocolError>> {
        if self.safe {
            self.drain_cq();
        }
        let n = self.peers.len();
        let mut k = self.next;
        for _ in 0..n {
            if self.landed(k) {
                if let Some(r) = self.take(k) {
                    return Some(r);
                }
            }
            k = if k + 1 == n { 0 } else { k + 1 };
        }
        None
    }

    fn has_arrivals(&self) -> bool {
        if self.safe {
            self.drain_cq();
        }
        (0..self.peers.len()).any(|k| self.landed(k))
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
        // SYNC POINT credit-return (acquire side): the peer's RDMA write of
        // its released count.
        let credit = self.credit_word(k).load(Ordering::Acquire);
        let g = self.geometry;
        let p = &mut self.peers[k];
        if p.gone {
            return None;
        }
        let pos = p.tx.try_reserve(|| credit)?;
        let off = self.ring_off(k) + (g.slot_of(pos) * g.slot_bytes) as usize;
        // SAFETY: the mirror slot of `pos` is ours until its credit returns.
        Some(unsafe { TxFrame::external(dest, pos, self.staging.base().add(off), g.capacity()) })
    }

    fn commit(&mut self, frame: TxFrame, header: FragHeader) {
        if let Some(k) = self.peer_index(frame.dest) {
            self.send_fragment(k, frame.token, header);
        }
    }

    fn frame_capacity(&self) -> usize {
        self.geometry.capacity()
    }

    fn inline_max(&self) -> usize {
        self.geometry.capacity()
    }

    fn try_send_inline(&mut self, dest: Rank, header: FragHeader, pieces: &[&[u8]]) -> bool {
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
        self.drain_cq();
        // The backstop of the credit protocol: publish whatever is released.
        for k in 0..self.peers.len() {
            if let Some(c) = self.peers[k].rx.credit_due(true) {
                self.send_credit(k, c);
            }
        }
        if let Some((k, why)) = self.failed.borrow_mut().pop() {
            self.peers[k].gone = true;
            return Err(ExtractError::Network(NetError::Io {
                rank: self.peers[k].rank,
                op: "RDMA write",
                msg: why,
            }));
        }
        for p in &mut self.peers {
            if p.gone {
                continue;
            }
            let mut b = [0u8; 1];
            // SAFETY: peeking one byte from our own socket, non-blocking.
            let r = unsafe {
                libc::recv(
                    p.side.as_raw_fd(),
                    b.as_mut_ptr() as *mut libc::c_void,
                    1,
                    libc::MSG_PEEK | libc::MSG_DONTWAIT,
                )
            };
            if r == 0 {
                p.gone = true;
                return Err(ExtractError::Network(NetError::Disconnected {
                    rank: p.rank,
                    mid_record: false,
                }));
            }
        }
        Ok(())
    }

    fn is_gone(&self, dest: Rank) -> bool {
        self.peer_index(dest).is_some_and(|k| self.peers[k].gone)
    }

    fn has_credit(&self, dest: Rank) -> bool {
        self.peer_index(dest).is_some_and(|k| {
            let p = &self.peers[k];
            // SYNC POINT credit-return (acquire side), as in `try_reserve`.
            p.gone || p.tx.has_credit(self.credit_word(k).load(Ordering::Acquire))
        })
    }

    fn doorbell(&self) -> Option<&Doorbell> {
        None
    }

    fn put(&mut self, dest: Rank, at: u64, data: &[u8]) -> Result<(), PutError> {
        let k = self
            .peer_index(dest)
            .ok_or(PutError::PeerGone { rank: dest })?;
        for (i, chunk) in data.chunks(PUT_BUF).enumerate() {
            let off = self.put_buf_off(k);
            // SAFETY: the put buffer is ours; the previous put from it has
            // completed (waited for below).
            unsafe {
                core::ptr::copy_nonoverlapping(
                    chunk.as_ptr(),
                    self.staging.base().add(off),
                    chunk.len(),
                )
            };
            let r = self.peers[k].remote;
            let want = self.sync_done.get() + 1;
            let p = &self.peers[k];
            let posted = p.qp.write(
                ((k as u64) << 32) | WR_SYNC,
                self.staging.base() as u64 + off as u64,
                chunk.len() as u32,
                self.staging_mr.lkey(),
                r.window_addr + at + (i * PUT_BUF) as u64,
                r.window_rkey,
                None,
                ibv_send_flags::IBV_SEND_SIGNALED,
            );
            if posted.is_err() {
                return Err(PutError::PeerGone { rank: dest });
            }
            let start = Instant::now();
            while self.sync_done.get() < want {
                self.drain_cq();
                if !self.failed.borrow().is_empty() || start.elapsed() > Duration::from_secs(30) {
                    return Err(PutError::PeerGone { rank: dest });
                }
            }
        }
        Ok(())
    }

    fn put_u64(&mut self, dest: Rank, at: u64, value: u64) -> Result<(), PutError> {
        let k = self
            .peer_index(dest)
            .ok_or(PutError::PeerGone { rank: dest })?;
        let r = self.peers[k].remote;
        let v = value.to_le_bytes();
        // An aligned 8-byte RDMA WRITE lands whole; ordered after earlier
        // writes on the RC queue pair (the put's data before its flag).
        if self.post(
            k,
            v.as_ptr() as u64,
            8,
            r.window_addr + at,
            r.window_rkey,
            None,
            true,
        ) {
            Ok(())
        } else {
            Err(PutError::PeerGone { rank: dest })
        }
    }
}
