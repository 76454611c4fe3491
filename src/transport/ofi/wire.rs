//! [`OfiWire`]: the ring protocol's writes over a libfabric RDM endpoint
//! (see [`crate::transport::net::wire::RmaWire`] for what it promises).
//!
//! - Ring writes are `fi_write`, or `fi_writedata` in the safe mode: the
//!   remote CQ data names the writer and the ring slot, and its arrival at
//!   the peer's completion queue proves the write was placed whole.
//! - Credit words are `fi_inject_write` (copied during the call).
//! - Order between writes: where the provider orders writes to a peer
//!   (`FI_ORDER_WAW`, as `tcp;ofi_rxm` does) nothing more is needed;
//!   otherwise every write is `FI_DELIVERY_COMPLETE` and a fence waits
//!   for the earlier ones' completions. Synchronous writes (puts) wait
//!   for their own completion, so the staging buffer can be reused.
//! - Progress reads the completion queue, which on a manual-progress
//!   provider (`tcp;ofi_rxm`) is also what moves data in and out.

#![allow(unsafe_code)]

use super::fabric::{strerror, Fabric, Mr};
use super::sys::{self, CqDataEntry};
use crate::error::OfiError;
use crate::ring::{RingGeometry, RingRegion};
use crate::transport::net::wire::{link_alive, wait_for_sync, Event, Lateness, PeerArea, RmaWire};
use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Completion contexts (the op_context of our own writes).
const CTX_RING: usize = 1;
const CTX_SYNC: usize = 2;
/// How long a write may wait for room in the send queue, or a synchronous
/// write for its completion, before the wait says so (then at each
/// doubling). It waits on while the peer's set-up connection lives: on a
/// manual-progress provider a write into a peer that computes completes
/// only once it polls again. A fence (`settle`) still gives up after it.
const STUCK: Duration = Duration::from_secs(30);
/// The most empty polls between two progress calls on a manual-progress
/// provider. Each is a system call there (`tcp;ofi_rxm` polls its sockets:
/// about 0.45 µs on the development machine, against ~2 ns for an empty
/// shm poll), so 1024 keeps it near 0.5 ns a poll; the price is that a
/// message arriving after a long idle stretch waits up to 1024 empty polls
/// (a few µs) before the poll sees it, against a one-way latency of tens of
/// µs on this provider. After any arrival the gap starts again at 1.
const MANUAL_PERIOD: u32 = 1024;

#[derive(Debug, Clone, Copy)]
struct Remote {
    addr: u64,
    /// The set-up connection (kept open by the transport while the wire
    /// lives): asked whether the peer lives while a write waits.
    side: std::os::fd::RawFd,
    rings_base: u64,
    rings_key: u64,
    window_base: u64,
    window_key: u64,
}

/// A libfabric endpoint carrying one rank's ring writes.
#[derive(Debug)]
pub struct OfiWire {
    rank: u32,
    /// Remote CQ data: `rank * slots + slot` (set by `ready`).
    slots: u64,
    peers: Vec<Remote>,
    /// Per global rank: peer number, or `u32::MAX`.
    peer_of_rank: Vec<u32>,
    /// Ring writes posted whose completion is not yet read.
    outstanding: Cell<u64>,
    /// Synchronous writes completed.
    synced: Cell<u64>,
    events: RefCell<Vec<Event>>,
    /// Base addresses of the registered areas (rings, staging, window).
    bases: Vec<*mut u8>,
    /// In order of drop: the registrations before the fabric.
    mrs: Vec<Mr>,
    fabric: Fabric,
}

impl OfiWire {
    /// Open `provider` for rank `me` of `world`, its endpoint on address
    /// `node`; `cq` completions fit in its queue at once.
    ///
    /// # Errors
    /// [`OfiError::NoProvider`] or [`OfiError::Call`].
    pub fn open(
        provider: &str,
        node: Option<&str>,
        me: u32,
        world: u32,
        cq: usize,
    ) -> Result<OfiWire, OfiError> {
        let fabric = Fabric::open(provider, node, cq)?;
        Ok(OfiWire {
            rank: me,
            slots: 0,
            peers: Vec::new(),
            peer_of_rank: vec![u32::MAX; world as usize],
            outstanding: Cell::new(0),
            synced: Cell::new(0),
            events: RefCell::new(Vec::new()),
            bases: Vec::new(),
            mrs: Vec::new(),
            fabric,
        })
    }

    /// The provider libfabric chose, and the domain it runs on.
    pub fn provider(&self) -> (&str, &str) {
        (&self.fabric.provider, &self.fabric.domain)
    }

    fn raw(&self) -> *mut sys::FmOfi {
        self.fabric.raw
    }

    fn rings(&self) -> &Mr {
        &self.mrs[0]
    }

    fn staging(&self) -> &Mr {
        &self.mrs[1]
    }

    /// Post with `f`, a write to peer `k`, until the provider takes it
    /// (progressing while its queue is full), while `k` lives.
    fn post(&self, k: usize, what: &str, mut f: impl FnMut() -> isize) -> Result<(), String> {
        let mut late = Lateness::new(STUCK);
        let alive = || link_alive(self.peers[k].side);
        loop {
            let r = f();
            if r == 0 {
                return Ok(());
            }
            if r != -sys::FI_EAGAIN {
                return Err(format!("{what}: {}", strerror(r)));
            }
            self.progress();
            late.look(&alive, what)
                .map_err(|why| format!("{what}: no room in the send queue, and {why}"))?;
        }
    }

    /// Wait until every ring write posted has completed, for at most
    /// [`STUCK`]. (Not judged by the peers' connections: the writes may be
    /// to any peer, and a peer that closed in order — as they all do at
    /// the close this fence serves — has said goodbye on its connection
    /// and ended it, which would read as an end.)
    fn settle(&self) -> Result<(), String> {
        let start = std::time::Instant::now();
        while self.outstanding.get() > 0 {
            self.progress();
            if start.elapsed() > STUCK {
                return Err(format!(
                    "{} writes not completed after {STUCK:?}",
                    self.outstanding.get()
                ));
            }
        }
        Ok(())
    }

    fn read_error(&self) {
        let mut ctx = std::ptr::null_mut();
        let mut msg = [0 as libc::c_char; 256];
        // SAFETY: a live CQ with an error entry waiting; valid buffers.
        let r =
            unsafe { sys::fm_ofi_cq_readerr(self.raw(), &mut ctx, msg.as_mut_ptr(), msg.len()) };
        if r != 0 {
            return;
        }
        // SAFETY: the shim NUL-terminates the message.
        let why = unsafe { std::ffi::CStr::from_ptr(msg.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        match ctx as usize & 0xff {
            CTX_RING => self
                .outstanding
                .set(self.outstanding.get().saturating_sub(1)),
            CTX_SYNC => self.synced.set(self.synced.get() + 1),
            _ => {}
        }
        // The error entry does not say which peer: the transport reports it
        // against the first live one it can (every peer shares the queue).
        let peer = (ctx as usize >> 8).saturating_sub(1);
        self.events.borrow_mut().push(Event::Failed { peer, why });
    }

    /// Peer number `k`'s context tag for an operation kind.
    fn ctx(k: usize, kind: usize) -> *mut libc::c_void {
        (((k + 1) << 8) | kind) as *mut libc::c_void
    }
}

impl RmaWire for OfiWire {
    type Error = OfiError;

    fn memory_error(&self, why: String) -> OfiError {
        OfiError::Call {
            call: "mmap".into(),
            provider: self.fabric.provider.clone(),
            why,
        }
    }

    fn register(
        &mut self,
        _geometry: RingGeometry,
        rings: &Arc<RingRegion>,
        staging: (*mut u8, usize),
        window: (*mut u8, usize),
    ) -> Result<(), OfiError> {
        let rings = (rings.base(), rings.len());
        for (base, len) in [rings, staging, window] {
            let mr = self.fabric.register(base, len)?;
            self.mrs.push(mr);
            self.bases.push(base);
        }
        Ok(())
    }

    fn describe(&mut self, _k: usize, _mine: &PeerArea) -> Result<Vec<u8>, OfiError> {
        let name = self.fabric.name()?;
        let mut b = Vec::with_capacity(34 + name.len());
        b.extend_from_slice(&(name.len() as u16).to_le_bytes());
        b.extend_from_slice(&name);
        for v in [
            self.rings().remote_base,
            self.rings().key,
            self.mrs[2].remote_base,
            self.mrs[2].key,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        Ok(b)
    }

    fn connect(
        &mut self,
        k: usize,
        rank: u32,
        _theirs: &PeerArea,
        remote: &[u8],
        side: &std::net::TcpStream,
    ) -> Result<(), OfiError> {
        let bad = |why: String| OfiError::Call {
            call: "address exchange".into(),
            provider: self.fabric.provider.clone(),
            why: format!("rank {rank}: {why}"),
        };
        let ours = self.fabric.name()?.len();
        let n = remote
            .get(..2)
            .map(|l| u16::from_le_bytes([l[0], l[1]]) as usize)
            .ok_or_else(|| bad("empty description".into()))?;
        if n != ours || remote.len() != 2 + n + 32 {
            return Err(bad(format!(
                "a {n}-byte address in {} bytes (ours: {ours}-byte addresses, {} bytes): another provider?",
                remote.len(),
                2 + ours + 32
            )));
        }
        let addr = self.fabric.insert(&remote[2..2 + n])?;
        let w = |i: usize| {
            let at = 2 + n + 8 * i;
            u64::from_le_bytes(remote[at..at + 8].try_into().expect("8 bytes"))
        };
        debug_assert_eq!(self.peers.len(), k);
        self.peers.push(Remote {
            addr,
            side: std::os::fd::AsRawFd::as_raw_fd(side),
            rings_base: w(0),
            rings_key: w(1),
            window_base: w(2),
            window_key: w(3),
        });
        if let Some(p) = self.peer_of_rank.get_mut(rank as usize) {
            *p = k as u32;
        }
        Ok(())
    }

    fn ready(&mut self, slots: u32) -> Result<(), OfiError> {
        self.slots = u64::from(slots);
        if !self.places_in_order() {
            // The remote CQ data must name any rank's any slot.
            let bits = 8 * self.fabric.attr.cq_data_size.min(8);
            let need = self.peer_of_rank.len() as u128 * u128::from(slots);
            if bits < 64 && need > 1u128 << bits {
                return Err(OfiError::Call {
                    call: "fi_writedata".into(),
                    provider: self.fabric.provider.clone(),
                    why: format!(
                        "the safe mode tags each write with rank and slot ({need} values), \
                         but the provider carries {bits}-bit remote CQ data"
                    ),
                });
            }
        }
        Ok(())
    }

    fn setup_error(&self, what: String) -> OfiError {
        OfiError::Call {
            call: "connection set-up".into(),
            provider: self.fabric.provider.clone(),
            why: what,
        }
    }

    fn places_in_order(&self) -> bool {
        self.fabric.attr.comp_order & sys::FI_ORDER_DATA != 0
    }

    fn progress_period(&self) -> u32 {
        if self.fabric.attr.manual_progress != 0 {
            MANUAL_PERIOD
        } else {
            1
        }
    }

    fn lands_by_itself(&self) -> bool {
        self.fabric.attr.manual_progress == 0
    }

    fn write(
        &mut self,
        k: usize,
        local: usize,
        len: usize,
        at: u64,
        notify: Option<u64>,
    ) -> Result<(), String> {
        let p = self.peers[k];
        let st = self.staging();
        // SAFETY: `local..local + len` lies in the registered staging
        // region, which the transport leaves untouched until the peer
        // returns the slot's credit (after the write completed).
        let buf = unsafe { (st.desc, self.mrs_base(1).add(local)) };
        let ctx = Self::ctx(k, CTX_RING);
        let remote = p.rings_base + at;
        let data = notify.map(|pos| u64::from(self.rank) * self.slots + (pos % self.slots));
        self.post(k, "fi_write", || {
            // SAFETY: a live endpoint, registered source and target.
            (unsafe {
                match data {
                    Some(d) => sys::fm_ofi_writedata(
                        self.raw(),
                        buf.1.cast(),
                        len,
                        buf.0,
                        d,
                        p.addr,
                        remote,
                        p.rings_key,
                        ctx,
                    ),
                    None => sys::fm_ofi_write(
                        self.raw(),
                        buf.1.cast(),
                        len,
                        buf.0,
                        p.addr,
                        remote,
                        p.rings_key,
                        ctx,
                    ),
                }
            }) as isize
        })?;
        self.outstanding.set(self.outstanding.get() + 1);
        Ok(())
    }

    fn fence(&mut self) -> Result<(), String> {
        if self.fabric.attr.delivery_complete != 0 {
            // Writes are not ordered (each completes once delivered):
            // those before must have completed.
            self.settle()?;
        }
        Ok(())
    }

    fn write_word(&mut self, k: usize, at: u64, value: u64) -> Result<(), String> {
        let p = self.peers[k];
        let v = value.to_le_bytes();
        self.post(k, "fi_inject_write", || {
            // SAFETY: a live endpoint; the 8 bytes are copied during the
            // call (inject), within the provider's inject size.
            (unsafe {
                sys::fm_ofi_inject_write(
                    self.raw(),
                    v.as_ptr().cast(),
                    8,
                    p.addr,
                    p.rings_base + at,
                    p.rings_key,
                )
            }) as isize
        })
    }

    fn write_sync(&mut self, k: usize, local: usize, len: usize, at: u64) -> Result<(), String> {
        self.fence()?;
        let p = self.peers[k];
        let (base, key) = (p.window_base, p.window_key);
        let desc = self.staging().desc;
        // SAFETY: `local..local + len` lies in the registered staging
        // region (the transport's put buffer), untouched until we return.
        let src = unsafe { self.mrs_base(1).add(local) };
        let want = self.synced.get() + 1;
        let ctx = Self::ctx(k, CTX_SYNC);
        self.post(k, "fi_write", || {
            // SAFETY: a live endpoint, registered source and target.
            (unsafe {
                sys::fm_ofi_write(
                    self.raw(),
                    src.cast(),
                    len,
                    desc,
                    p.addr,
                    base + at,
                    key,
                    ctx,
                )
            }) as isize
        })?;
        let side = p.side;
        wait_for_sync(
            &self.synced,
            want,
            &self.events,
            STUCK,
            || link_alive(side),
            || self.progress(),
        )
    }

    fn progress(&self) {
        const BATCH: usize = 16;
        let mut e = [CqDataEntry {
            op_context: std::ptr::null_mut(),
            flags: 0,
            len: 0,
            buf: std::ptr::null_mut(),
            data: 0,
        }; BATCH];
        loop {
            // SAFETY: a live CQ of FI_CQ_FORMAT_DATA; `e` holds BATCH
            // entries of that layout.
            let n = unsafe { sys::fm_ofi_cq_read(self.raw(), e.as_mut_ptr().cast(), BATCH) };
            if n == -sys::FI_EAVAIL {
                self.read_error();
                continue;
            }
            if n <= 0 {
                return;
            }
            for c in &e[..n as usize] {
                if c.flags & sys::FI_REMOTE_CQ_DATA != 0 {
                    let rank = c.data / self.slots.max(1);
                    let k = self.peer_of_rank.get(rank as usize).copied();
                    if let Some(k) = k.filter(|&k| k != u32::MAX) {
                        self.events.borrow_mut().push(Event::Landed {
                            peer: k as usize,
                            pos: c.data % self.slots.max(1),
                        });
                    }
                    continue;
                }
                match c.op_context as usize & 0xff {
                    CTX_RING => self
                        .outstanding
                        .set(self.outstanding.get().saturating_sub(1)),
                    CTX_SYNC => self.synced.set(self.synced.get() + 1),
                    _ => {}
                }
            }
            if (n as usize) < BATCH {
                return;
            }
        }
    }

    fn take_events(&self, f: &mut dyn FnMut(Event)) {
        let mut ev = self.events.borrow_mut();
        if ev.is_empty() {
            return;
        }
        let taken = std::mem::take(&mut *ev);
        drop(ev);
        for e in taken {
            f(e);
        }
    }
}

impl OfiWire {
    /// The base address of registered area `i` (0 rings, 1 staging).
    fn mrs_base(&self, i: usize) -> *mut u8 {
        self.bases[i]
    }
}

impl Drop for OfiWire {
    fn drop(&mut self) {
        // Let what was posted leave before the endpoint closes (the close
        // flush and the last credits), for at most a second.
        let start = Instant::now();
        while self.outstanding.get() > 0 && start.elapsed() < Duration::from_secs(1) {
            self.progress();
        }
    }
}
