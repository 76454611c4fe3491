//! [`VerbsWire`]: the ring protocol's writes over RC queue pairs (see
//! [`crate::transport::net::wire::RmaWire`] for what it promises; the
//! rings, credit and failures are [`crate::transport::net`]'s, shared
//! with the libfabric wire).
//!
//! - One RC queue pair per peer, created when the peer is described and
//!   connected from its answer (LID/GID, QP number, PSN, keys).
//! - Placement order: at set-up rdma-core is asked
//!   (`ibv_query_qp_data_in_order`) whether an RDMA WRITE lands in order;
//!   if not, ring writes carry an immediate (the safe mode) whose receive
//!   completion is the [`Event::Landed`].
//! - RDMA WRITEs on an RC queue pair are placed in order, so a fence is
//!   nothing; one write in [`SIGNAL_EVERY`] is signaled (selective
//!   signaling), and the send queue never holds more than its depth.

#![allow(unsafe_code)]

use super::qp::{self, Cq, Device, Mr, Qp, QpInfo};
use crate::error::VerbsError;
use crate::ring::{RingGeometry, RingRegion};
use crate::transport::net::wire::{wait_for_sync, Event, PeerArea, RmaWire};
use rdma_sys::{ibv_send_flags, ibv_wc, ibv_wc_opcode, ibv_wc_status};
use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Every this many writes to a peer one is signaled (selective signaling).
const SIGNAL_EVERY: u32 = 16;
/// wr_id kinds (low bits; the peer index is in the high 32 bits).
const WR_RING: u64 = 0;
const WR_SYNC: u64 = 1;
const WR_RECV: u64 = 2;
/// How long a write may wait for room in the send queue, or a synchronous
/// write for its completion.
const STUCK: Duration = Duration::from_secs(30);

#[derive(Debug)]
struct VPeer {
    qp: Qp,
    remote: QpInfo,
    psn: u32,
    /// Writes posted since the last signaled one, and signaled ones whose
    /// completion is still out.
    unsignaled: u32,
    in_flight_signaled: Cell<u32>,
}

/// RC queue pairs carrying one rank's ring writes.
#[derive(Debug)]
pub struct VerbsWire {
    depth: u32,
    safe: bool,
    staging: *mut u8,
    /// Completions of synchronous writes.
    sync_done: Cell<u64>,
    events: RefCell<Vec<Event>>,
    address: (u16, rdma_sys::ibv_mtu::Type, [u8; 16], u8),
    // Field order is drop order: queue pairs, registrations, the CQ, the
    // device.
    peers: Vec<VPeer>,
    mrs: Vec<Mr>,
    cq: Cq,
    dev: Device,
}

impl VerbsWire {
    /// Open the device for `peers` peers with rings of `slots` slots.
    ///
    /// # Errors
    /// [`VerbsError`] from opening the device or creating the CQ.
    pub fn open(peers: usize, slots: u32) -> Result<VerbsWire, VerbsError> {
        let dev = Device::open()?;
        let depth = slots * 2 + 2 * SIGNAL_EVERY;
        let cq = Cq::new(&dev, (depth as i32) * (peers as i32).max(1) * 2)?;
        let address = dev.address()?;
        Ok(VerbsWire {
            depth,
            safe: false,
            staging: std::ptr::null_mut(),
            sync_done: Cell::new(0),
            events: RefCell::new(Vec::new()),
            address,
            peers: Vec::with_capacity(peers),
            mrs: Vec::new(),
            cq,
            dev,
        })
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
    ) -> Result<(), String> {
        let depth = self.depth;
        let p = &mut self.peers[k];
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
        let start = Instant::now();
        while self.peers[k].in_flight_signaled.get() * SIGNAL_EVERY >= depth {
            self.progress();
            if start.elapsed() > STUCK {
                return Err(format!("send queue full for {STUCK:?}"));
            }
        }
        self.peers[k]
            .qp
            .write(
                ((k as u64) << 32) | WR_RING,
                local,
                len as u32,
                self.mrs[1].lkey(),
                remote,
                rkey,
                imm,
                flags,
            )
            .map_err(|r| format!("ibv_post_send failed ({r})"))
    }
}

impl RmaWire for VerbsWire {
    type Error = VerbsError;

    fn memory_error(&self, why: String) -> VerbsError {
        VerbsError::Call {
            call: "mmap",
            device: self.dev.name.clone(),
            why,
        }
    }

    fn register(
        &mut self,
        _geometry: RingGeometry,
        rings: &Arc<RingRegion>,
        staging: (*mut u8, usize),
        window: (*mut u8, usize),
    ) -> Result<(), VerbsError> {
        let rings = (rings.base(), rings.len());
        for (base, len) in [rings, staging, window] {
            self.mrs.push(Mr::new(&self.dev, base, len)?);
        }
        self.staging = staging.0;
        Ok(())
    }

    fn describe(&mut self, k: usize, _mine: &PeerArea) -> Result<Vec<u8>, VerbsError> {
        debug_assert_eq!(self.peers.len(), k);
        let qp = Qp::new(&self.dev, &self.cq, self.depth)?;
        let mut psn = [0u8; 4];
        getrandom::fill(&mut psn).map_err(|e| VerbsError::Call {
            call: "getrandom",
            device: self.dev.name.clone(),
            why: e.to_string(),
        })?;
        let psn = u32::from_le_bytes(psn) & 0x00ff_ffff;
        let (lid, _, gid, _) = self.address;
        let mine = QpInfo {
            lid,
            gid,
            qpn: qp.num(),
            psn,
            ring_addr: self.mrs[0].addr(),
            credit_addr: 0,
            ring_rkey: self.mrs[0].rkey(),
            window_addr: self.mrs[2].addr(),
            window_rkey: self.mrs[2].rkey(),
        };
        self.peers.push(VPeer {
            qp,
            remote: QpInfo::default(),
            psn,
            unsignaled: 0,
            in_flight_signaled: Cell::new(0),
        });
        Ok(mine.encode().to_vec())
    }

    fn connect(
        &mut self,
        k: usize,
        rank: u32,
        _theirs: &PeerArea,
        remote: &[u8],
        _side: &std::net::TcpStream,
    ) -> Result<(), VerbsError> {
        let b: &[u8; QpInfo::BYTES] = remote.try_into().map_err(|_| VerbsError::Call {
            call: "queue-pair exchange",
            device: self.dev.name.clone(),
            why: format!(
                "rank {rank} sent {} bytes, not {}",
                remote.len(),
                QpInfo::BYTES
            ),
        })?;
        let remote = QpInfo::decode(b);
        let (_, mtu, _, gid_index) = self.address;
        let p = &mut self.peers[k];
        p.qp.connect(&self.dev, mtu, gid_index, p.psn, &remote)?;
        p.remote = remote;
        Ok(())
    }

    fn ready(&mut self, slots: u32) -> Result<(), VerbsError> {
        // The placement mode from rdma-core's answer, not a guess.
        self.safe = self.peers.iter().any(|p| !p.qp.writes_in_order());
        if self.safe {
            for (k, p) in self.peers.iter().enumerate() {
                for _ in 0..slots {
                    p.qp.post_recv(((k as u64) << 32) | WR_RECV)
                        .map_err(|_| self.dev.call("ibv_post_recv"))?;
                }
            }
        }
        Ok(())
    }

    fn setup_error(&self, what: String) -> VerbsError {
        VerbsError::Call {
            call: "queue-pair exchange",
            device: self.dev.name.clone(),
            why: what,
        }
    }

    fn places_in_order(&self) -> bool {
        !self.safe
    }

    fn progress_period(&self) -> u32 {
        // Polling the CQ is a user-space read, and the safe mode needs it
        // for every arrival.
        1
    }

    fn lands_by_itself(&self) -> bool {
        true
    }

    fn write(
        &mut self,
        k: usize,
        local: usize,
        len: usize,
        at: u64,
        notify: Option<u64>,
    ) -> Result<(), String> {
        let r = self.peers[k].remote;
        self.post(
            k,
            self.staging as u64 + local as u64,
            len,
            r.ring_addr + at,
            r.ring_rkey,
            notify.map(|pos| pos as u32),
            false,
        )
    }

    fn write_word(&mut self, k: usize, at: u64, value: u64) -> Result<(), String> {
        let r = self.peers[k].remote;
        let v = value.to_le_bytes();
        self.post(
            k,
            v.as_ptr() as u64,
            8,
            r.ring_addr + at,
            r.ring_rkey,
            None,
            true,
        )
    }

    fn fence(&mut self) -> Result<(), String> {
        // RDMA WRITEs on one RC queue pair are placed in order.
        Ok(())
    }

    fn write_sync(&mut self, k: usize, local: usize, len: usize, at: u64) -> Result<(), String> {
        let r = self.peers[k].remote;
        let (base, rkey) = (r.window_addr, r.window_rkey);
        let want = self.sync_done.get() + 1;
        self.peers[k]
            .qp
            .write(
                ((k as u64) << 32) | WR_SYNC,
                self.staging as u64 + local as u64,
                len as u32,
                self.mrs[1].lkey(),
                base + at,
                rkey,
                None,
                ibv_send_flags::IBV_SEND_SIGNALED,
            )
            .map_err(|r| format!("ibv_post_send failed ({r})"))?;
        // Verbs completes a write without the target's help: a completion
        // this late means a broken queue pair, so the wait ends at STUCK.
        let start = std::time::Instant::now();
        let stuck = || match start.elapsed() > STUCK {
            true => Err(format!("write not completed after {STUCK:?}")),
            false => Ok(()),
        };
        wait_for_sync(&self.sync_done, want, &self.events, STUCK, stuck, || {
            self.progress()
        })
    }

    fn progress(&self) {
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
                    self.events.borrow_mut().push(Event::Failed {
                        peer: k,
                        why: qp::status(c.status),
                    });
                    continue;
                }
                match c.wr_id & 0xffff_ffff {
                    WR_RECV if c.opcode == ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM => {
                        // SAFETY: a receive with immediate carries imm_data.
                        let imm = unsafe { c.imm_data_invalidated_rkey_union.imm_data };
                        self.events.borrow_mut().push(Event::Landed {
                            peer: k,
                            pos: u64::from(u32::from_be(imm)),
                        });
                        if self.peers[k].qp.post_recv(c.wr_id).is_err() {
                            self.events.borrow_mut().push(Event::Failed {
                                peer: k,
                                why: "ibv_post_recv failed".into(),
                            });
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

    fn take_events(&self, f: &mut dyn FnMut(Event)) {
        let taken = std::mem::take(&mut *self.events.borrow_mut());
        for e in taken {
            f(e);
        }
    }
}
