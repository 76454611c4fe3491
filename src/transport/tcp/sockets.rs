//! [`TcpWire`]: the ring protocol's one-sided writes ([`RmaWire`]) over
//! one TCP connection per peer — the set-up connection itself, which
//! carries *write records* ([`super::wire`]) once the transport's
//! handshake is done.
//!
//! - Writes: a ring write is one `RING` record, a credit or flush word a
//!   `CREDIT` or `FLUSH` record, a put a `PUT` (`PUT_U64` for an aligned
//!   word); each is one `sendmsg` gathering the record header and the
//!   bytes, from the staging mirror or straight from the caller's pieces
//!   ([`RmaWire::gathers`]: `sendmsg` is done with them when it returns).
//!   Records of one peer apply in order, so writes land in order and a
//!   ring write's stamp, placed last with Release, proves it whole.
//! - Placement: [`progress`](RmaWire::progress) reads this rank's sockets
//!   and applies the records (the parser of [`super::nic`]); the NIC
//!   thread does it instead while the rank sleeps on its doorbell or
//!   stands still (see `nic` for who owns a socket when).
//! - Ends: a `BYE` record (after close or not), a connection that ends or
//!   a record that breaks the rules are [`Event::Ended`], through
//!   [`crate::transport::net::link::Links`] (the NIC thread may be the one that saw it).

#![allow(unsafe_code)]

use super::nic::{self, NicTargets, Shared, NIC, RANK};
use super::wire::{self, RecordHeader};
use crate::id::Rank;
use crate::ring::{RingGeometry, RingRegion};
use crate::sync::Ordering;
use crate::transport::net::link::Departure;
use crate::transport::net::wire::{Area, Event, PeerArea, RmaWire};
use std::cell::{Cell, RefCell};
use std::io;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Empty polls between two reads of the sockets at most (each read is a
/// system call, ~0.5 µs: one `recv`, or one `epoll_wait` for several
/// peers): the poll reads at once after an arrival and at doubling gaps up
/// to this while nothing comes, so the empty poll stays within 2× of
/// shared memory's (measured: 16 made it 6–16×).
const PERIOD: u32 = 256;

/// The TCP wire of one rank. See the module docs.
#[derive(Debug)]
pub struct TcpWire {
    me: Rank,
    /// How long a peer's host may stay silent before its connection fails
    /// ([`crate::netio::alive`]).
    dead_after: std::time::Duration,
    /// Where records land besides the rings (window, doorbell).
    targets: NicTargets,
    geometry: Option<RingGeometry>,
    rings: Option<Arc<RingRegion>>,
    staging: (*const u8, usize),
    /// Per peer: where its ring and words lie in our rings area.
    mine: Vec<PeerArea>,
    /// Per peer: where our ring and words lie in its rings area.
    theirs: Vec<PeerArea>,
    ranks: Vec<Rank>,
    /// Per peer: the set-up connection (a second descriptor of it); `None`
    /// until the peer is connected (lazy set-up: [`RmaWire::late_peers`]).
    streams: Vec<Option<TcpStream>>,
    /// Set when started: what the rank and the NIC thread share.
    shared: Option<Arc<Shared>>,
    /// The NIC thread's wake descriptor (hand-over, stop).
    wake: Option<OwnedFd>,
    /// With several peers: an epoll set of their sockets, so that an
    /// empty progress is one system call whatever the number of peers.
    epoll: Option<OwnedFd>,
    nic: Option<JoinHandle<()>>,
    /// The links' alert count last looked at.
    alerts_seen: Cell<u64>,
    /// Per peer: its end was reported (the `gone` flags of
    /// [`Links::check`](crate::transport::net::link::Links::check)).
    gone: RefCell<Vec<bool>>,
    /// Progress calls (published as the NIC's `beat`).
    beat: Cell<u64>,
    /// The peers a write found silent, each with why (the first time).
    silent: RefCell<Vec<(usize, String)>>,
}

// SAFETY: the staging pointer points at memory that outlives the wire
// (`register`: the transport drops the wire first); the wire is used by
// one thread at a time, so moving it to another thread is sound.
unsafe impl Send for TcpWire {}

impl TcpWire {
    /// The wire of rank `me`: puts land in `targets.window`; its `bell`,
    /// if any, is rung when a record lands while the rank may sleep; a
    /// peer whose host stays silent for `dead_after` fails
    /// (keepalive probes on every connection, the NIC thread's
    /// [`crate::netio::silence::SilenceWatch`] over them).
    pub(crate) fn new(
        me: Rank,
        targets: &crate::transport::net::NetTargets,
        dead_after: std::time::Duration,
    ) -> TcpWire {
        TcpWire {
            me,
            dead_after,
            targets: NicTargets {
                window: targets.window.clone(),
                bell: targets.bell.clone(),
            },
            geometry: None,
            rings: None,
            staging: (std::ptr::null(), 0),
            mine: Vec::new(),
            theirs: Vec::new(),
            ranks: Vec::new(),
            streams: Vec::new(),
            shared: None,
            wake: None,
            epoll: None,
            nic: None,
            alerts_seen: Cell::new(0),
            gone: RefCell::new(Vec::new()),
            beat: Cell::new(0),
            silent: RefCell::new(Vec::new()),
        }
    }

    /// What the rank and the NIC thread share (once started).
    pub(crate) fn shared(&self) -> Option<&Arc<Shared>> {
        self.shared.as_ref()
    }

    /// Write `bytes` as they are on the connection to `peer`: a test
    /// plays a peer that breaks the wire protocol through a real rank's
    /// authenticated connection.
    #[cfg(test)]
    pub(crate) fn send_raw(&self, peer: Rank, bytes: &[u8]) -> io::Result<()> {
        let k = self
            .ranks
            .iter()
            .position(|&r| r == peer)
            .ok_or_else(|| io::Error::other(format!("rank {peer} is no peer")))?;
        let s = self.stream(k).map_err(io::Error::other)?;
        wire::write_all_vectored(s, &[bytes], &|| ())
    }

    /// Send one record: `header` then `pieces`.
    fn send(&self, k: usize, header: RecordHeader, pieces: &[&[u8]]) -> Result<(), String> {
        const MAX: usize = 15;
        if pieces.len() > MAX {
            return Err(format!(
                "{} pieces in one record (at most {MAX})",
                pieces.len()
            ));
        }
        let h = header.encode();
        let mut parts: [&[u8]; MAX + 1] = [&[]; MAX + 1];
        parts[0] = &h;
        parts[1..=pieces.len()].copy_from_slice(pieces);
        // While the socket is full, read ours (the peer may be blocked
        // sending to us).
        let blocked = || self.progress();
        wire::write_all_vectored(self.stream(k)?, &parts[..=pieces.len()], &blocked).map_err(|e| {
            if crate::netio::alive::is_silence(&e) {
                let why = format!("send: {e}: the peer's host stopped answering (crashed, powered off or cut off)");
                let mut silent = self.silent.borrow_mut();
                if !silent.iter().any(|s| s.0 == k) {
                    silent.push((k, why.clone()));
                }
                why
            } else {
                format!("send: {e}")
            }
        })
    }

    /// Peer `k`'s connection, if it is connected.
    fn stream(&self, k: usize) -> Result<&TcpStream, String> {
        match self.streams.get(k) {
            Some(Some(s)) => Ok(s),
            _ => Err(format!("peer {k} is not connected")),
        }
    }

    /// `len` staging bytes at `local`.
    fn staged(&self, local: usize, len: usize) -> Result<&[u8], String> {
        if local.checked_add(len).is_none_or(|e| e > self.staging.1) {
            return Err(format!(
                "{len} staging bytes at {local} are outside staging"
            ));
        }
        // SAFETY: inside the staging area (checked), valid while the wire
        // lives (`register`); the transport does not write these bytes
        // during the call.
        Ok(unsafe { std::slice::from_raw_parts(self.staging.0.add(local), len) })
    }

    /// The record of a write to byte `at` of peer `k`'s rings area.
    fn rings_record(&self, k: usize, at: u64, len: usize) -> Result<RecordHeader, String> {
        let g = self.geometry.ok_or("not registered")?;
        let t = self.theirs[k];
        let inside = at
            .checked_sub(t.ring)
            .filter(|o| o.saturating_add(len as u64) <= g.ring_bytes());
        let Some(offset) = inside else {
            return Err(format!(
                "a {len}-byte write at {at} is not inside the peer's ring"
            ));
        };
        Ok(RecordHeader {
            kind: wire::RING,
            len: len as u32,
            offset,
        })
    }

    /// A word store at byte `at` of peer `k`'s rings area: its credit or
    /// its flush word.
    fn word_record(&self, k: usize, at: u64, value: u64) -> Result<RecordHeader, String> {
        let t = self.theirs[k];
        let kind = if at == t.credit {
            wire::CREDIT
        } else if at == t.flush {
            wire::FLUSH
        } else {
            return Err(format!("no word of the peer's at {at}"));
        };
        Ok(RecordHeader {
            kind,
            len: 0,
            offset: value,
        })
    }

    /// A put of `len` bytes at byte `at` of the peer's window area.
    fn put_record(at: u64, len: usize) -> RecordHeader {
        let kind = if len == 8 && at % 8 == 0 {
            wire::PUT_U64
        } else {
            wire::PUT
        };
        RecordHeader {
            kind,
            len: len as u32,
            offset: at,
        }
    }

    /// Whether the rank announced a sleep on its doorbell (and looks for
    /// work a last time).
    fn sleeping(&self) -> bool {
        self.targets.bell.as_ref().is_some_and(|b| b.is_sleeping())
    }

    fn poke(&self) {
        if let Some(w) = &self.wake {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writing 8 bytes to our eventfd.
            unsafe { libc::write(w.as_raw_fd(), one.as_ptr() as *const libc::c_void, 8) };
        }
    }
}

impl RmaWire for TcpWire {
    type Error = io::Error;

    fn memory_error(&self, why: String) -> io::Error {
        io::Error::new(io::ErrorKind::OutOfMemory, why)
    }

    fn register(
        &mut self,
        geometry: RingGeometry,
        rings: &Arc<RingRegion>,
        staging: (*mut u8, usize),
        _window: (*mut u8, usize),
    ) -> io::Result<()> {
        // The window is `targets.window`, whose view keeps it mapped.
        self.geometry = Some(geometry);
        self.rings = Some(Arc::clone(rings));
        self.staging = (staging.0, staging.1);
        Ok(())
    }

    fn describe(&mut self, k: usize, mine: &PeerArea) -> io::Result<Vec<u8>> {
        set_at(&mut self.mine, k, *mine);
        Ok(Vec::new())
    }

    fn watch_probe(&self) -> Option<Box<dyn crate::watch::Probe>> {
        Some(Box::new(super::LinkProbe {
            shared: Arc::clone(self.shared()?),
            seen: 0,
        }))
    }

    fn late_peers(&mut self, ranks: &[Rank]) -> bool {
        self.ranks = ranks.to_vec();
        self.theirs = vec![PeerArea::default(); ranks.len()];
        true
    }

    fn connect(
        &mut self,
        k: usize,
        rank: u32,
        theirs: &PeerArea,
        _remote: &[u8],
        side: &TcpStream,
    ) -> io::Result<()> {
        side.set_nodelay(true)?;
        let stream = side.try_clone()?;
        let fd = stream.as_raw_fd();
        set_at(&mut self.theirs, k, *theirs);
        set_at(&mut self.ranks, k, Rank(rank));
        if self.streams.len() <= k {
            self.streams.resize_with(k + 1, || None);
        }
        self.streams[k] = Some(stream);
        // Connected after the start (lazy set-up): the NIC and the epoll
        // set take the socket in.
        if let Some(sh) = &self.shared {
            if let Some(ep) = &self.epoll {
                epoll_add(ep, k, fd)?;
            }
            sh.attach(k, fd);
        }
        Ok(())
    }

    /// Ring writes land only when the rank or the NIC thread applies them,
    /// and both count it.
    #[inline]
    fn placements(&self) -> Option<u64> {
        self.shared.as_ref().map(|s| s.placements.mark())
    }

    /// The records travel on `side`: keepalive probes alone, and the NIC
    /// thread judges the silence (`crate::netio::silence`), which a peer
    /// merely stopped with a full window does not trip (the kernel's user
    /// time-out would).
    fn arm(&self, side: &TcpStream, dead_after: std::time::Duration) -> io::Result<()> {
        crate::netio::alive::keep_alive(side, dead_after)
    }

    fn ready(&mut self, _slots: u32) -> io::Result<()> {
        Ok(())
    }

    fn started(&mut self) -> io::Result<()> {
        let (Some(geometry), Some(rings)) = (self.geometry, self.rings.clone()) else {
            return Err(io::Error::other("the TCP wire was started unregistered"));
        };
        // Every peer, connected or not yet (-1: lazy set-up).
        self.streams.resize_with(self.ranks.len(), || None);
        let fds: Vec<_> = self
            .streams
            .iter()
            .map(|s| s.as_ref().map_or(-1, AsRawFd::as_raw_fd))
            .collect();
        let shared = Arc::new(Shared::new(
            geometry,
            rings,
            self.mine.clone(),
            &self.ranks,
            &fds,
            self.targets.clone(),
            self.dead_after,
        ));
        if fds.len() > 1 {
            self.epoll = Some(epoll_of(&fds)?);
        }
        // SAFETY: plain eventfd creation; the result is checked.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        self.wake = Some(unsafe { OwnedFd::from_raw_fd(efd) });
        self.gone = RefCell::new(vec![false; fds.len()]);
        let sh = Arc::clone(&shared);
        self.shared = Some(shared);
        self.nic = Some(
            std::thread::Builder::new()
                .name(format!("fastmsg-nic-{}", self.me))
                .spawn(move || nic::run(sh, efd))
                .map_err(|e| crate::netio::thread_error("NIC", e))?,
        );
        Ok(())
    }

    fn setup_error(&self, what: String) -> io::Error {
        io::Error::other(what)
    }

    fn places_in_order(&self) -> bool {
        true
    }

    fn progress_period(&self) -> u32 {
        PERIOD
    }

    fn lands_by_itself(&self) -> bool {
        // The rank reads its own sockets: credit waits drive progress.
        false
    }

    fn carries_ends(&self) -> bool {
        true
    }

    fn goodbye(&mut self, closed: bool) {
        let bye = RecordHeader {
            kind: wire::BYE,
            len: 0,
            offset: if closed { wire::BYE_CLOSED } else { 0 },
        };
        for k in 0..self.streams.len() {
            if self.streams[k].is_some() {
                let _ = self.send(k, bye, &[]);
            }
        }
    }

    fn gathers(&self) -> bool {
        true
    }

    fn write_gather(
        &mut self,
        k: usize,
        area: Area,
        at: u64,
        pieces: &[&[u8]],
    ) -> Result<(), String> {
        let len: usize = pieces.iter().map(|p| p.len()).sum();
        let h = match area {
            Area::Rings => self.rings_record(k, at, len)?,
            Area::Window => Self::put_record(at, len),
        };
        self.send(k, h, pieces)
    }

    fn write(
        &mut self,
        k: usize,
        local: usize,
        len: usize,
        at: u64,
        _notify: Option<u64>,
    ) -> Result<(), String> {
        let bytes = self.staged(local, len)?;
        if len == 8 && at == self.theirs[k].flush {
            let v = u64::from_le_bytes(bytes.try_into().expect("8 bytes"));
            return self.send(k, self.word_record(k, at, v)?, &[]);
        }
        self.send(k, self.rings_record(k, at, len)?, &[bytes])
    }

    fn write_word(&mut self, k: usize, at: u64, value: u64) -> Result<(), String> {
        self.send(k, self.word_record(k, at, value)?, &[])
    }

    fn fence(&mut self) -> Result<(), String> {
        // Records of one peer apply in order.
        Ok(())
    }

    fn write_sync(&mut self, k: usize, local: usize, len: usize, at: u64) -> Result<(), String> {
        let bytes = self.staged(local, len)?;
        self.send(k, Self::put_record(at, len), &[bytes])
    }

    fn silence(&self, k: usize) -> Option<String> {
        let silent = self.silent.borrow();
        if let Some(s) = silent.iter().find(|s| s.0 == k) {
            return Some(s.1.clone());
        }
        // The NIC thread's silence watch ended the connection (and the
        // write then failed on the shut-down socket).
        match self.shared.as_ref()?.links.error(k)? {
            crate::error::NetError::HostSilent { why, .. } => Some(why),
            _ => None,
        }
    }

    fn progress(&self) {
        let Some(sh) = &self.shared else {
            return;
        };
        let beat = self.beat.get() + 1;
        self.beat.set(beat);
        sh.beat.store(beat, Ordering::Relaxed);
        // SYNC POINT tcp-handoff (acquire side): pairs with the NIC
        // thread's Release store; no data rides on it (the mutexes order
        // the parsers).
        // Take the sockets back, unless this progress runs inside the
        // look for work before a sleep (`has_credit` after `may_sleep`
        // handed them over): the thread must keep them while the rank
        // sleeps.
        if sh.owner.load(Ordering::Acquire) == NIC && !self.sleeping() {
            // SYNC POINT tcp-handoff (release side): take the sockets back.
            sh.owner.store(RANK, Ordering::Release);
        }
        let Some(ep) = &self.epoll else {
            sh.service(0, false);
            return;
        };
        const MAX: usize = 32;
        let mut ev = [libc::epoll_event { events: 0, u64: 0 }; MAX];
        // SAFETY: `ev` holds MAX events; timeout 0: never blocks.
        let r = unsafe { libc::epoll_wait(ep.as_raw_fd(), ev.as_mut_ptr(), MAX as i32, 0) };
        for e in &ev[..r.max(0) as usize] {
            let k = e.u64 as usize;
            if !sh.service(k, false) {
                // Ended: stop watching it (its end is in the links).
                let Some(fd) = self.streams[k].as_ref().map(AsRawFd::as_raw_fd) else {
                    continue;
                };
                // SAFETY: removing our own descriptor from our epoll set.
                unsafe {
                    libc::epoll_ctl(
                        ep.as_raw_fd(),
                        libc::EPOLL_CTL_DEL,
                        fd,
                        std::ptr::null_mut(),
                    )
                };
            }
        }
    }

    fn may_sleep(&self) {
        if !self.sleeping() {
            return;
        }
        let Some(sh) = &self.shared else {
            return;
        };
        // About to sleep: read what is there, then hand the sockets to the
        // NIC thread, which places what comes next and rings the bell.
        self.progress();
        // SYNC POINT tcp-handoff (release side), as in `progress`; the
        // thread is woken only if it did not own them already.
        if sh.owner.swap(NIC, Ordering::AcqRel) != NIC {
            self.poke();
        }
    }

    fn take_events(&self, f: &mut dyn FnMut(Event)) {
        let Some(sh) = &self.shared else {
            return;
        };
        let links = &sh.links;
        // SYNC POINT link-alert, in `Links::alerts`: the count is bumped
        // after the state is stored.
        if links.alerts() == self.alerts_seen.get() {
            return;
        }
        let mut gone = self.gone.borrow_mut();
        let mut seen = self.alerts_seen.get();
        loop {
            let before = gone.clone();
            let found = links.check(&mut seen, gone.iter_mut());
            // The peers `check` marked gone, in order; an error is the last.
            let ended: Vec<usize> = (0..gone.len()).filter(|&k| gone[k] && !before[k]).collect();
            let last = found.as_ref().err().and(ended.last().copied());
            for &k in &ended {
                if Some(k) != last {
                    f(Event::Ended {
                        peer: k,
                        how: Ok(true),
                    });
                }
            }
            match (found, last) {
                (Err(Departure::Failed(e)), Some(k)) => f(Event::Ended {
                    peer: k,
                    how: Err(e),
                }),
                (Err(Departure::Left(_)), Some(k)) => f(Event::Ended {
                    peer: k,
                    how: Ok(false),
                }),
                _ => break,
            }
        }
        self.alerts_seen.set(seen);
    }
}

/// An epoll set of `fds`, each event carrying its peer number.
fn epoll_of(fds: &[std::os::fd::RawFd]) -> io::Result<OwnedFd> {
    // SAFETY: plain epoll creation; the result is checked.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    let ep = unsafe { OwnedFd::from_raw_fd(ep) };
    for (k, &fd) in fds.iter().enumerate() {
        if fd >= 0 {
            epoll_add(&ep, k, fd)?;
        }
    }
    Ok(ep)
}

/// Add peer `k`'s socket `fd` to the epoll set `ep`.
fn epoll_add(ep: &OwnedFd, k: usize, fd: std::os::fd::RawFd) -> io::Result<()> {
    let mut e = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: k as u64,
    };
    // SAFETY: adding a socket we own to our epoll set.
    if unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut e) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Store `v` at index `k` of `vec`, growing it with defaults.
fn set_at<T: Clone + Default>(vec: &mut Vec<T>, k: usize, v: T) {
    if vec.len() <= k {
        vec.resize(k + 1, T::default());
    }
    vec[k] = v;
}

impl Drop for TcpWire {
    fn drop(&mut self) {
        if let Some(w) = &self.wake {
            let stop = nic::STOP.to_ne_bytes();
            // SAFETY: writing 8 bytes to our eventfd stops the NIC thread.
            unsafe { libc::write(w.as_raw_fd(), stop.as_ptr() as *const libc::c_void, 8) };
        }
        if let Some(h) = self.nic.take() {
            let _ = h.join();
        }
    }
}
