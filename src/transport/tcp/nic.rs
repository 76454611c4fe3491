//! The software NIC of the TCP wire ([`super::TcpWire`]): the parser
//! that applies one peer's write records to this rank's memory exactly as
//! an RDMA adapter places remote writes — ring writes payload first and
//! the trailer's stamp last with Release ([`crate::ring::publish_trailer`]),
//! credit, flush and window words as atomic Release stores — then rings
//! the rank's doorbell; and the thread that runs it when the rank does not.
//!
//! **Who reads a socket.** Each connection's parser state sits behind its
//! own mutex ([`Shared::conns`], `crate::sync::Mutex`); whoever holds it
//! owns the socket: the rank, in the wire's progress (`try_lock`: a socket
//! the thread is draining is skipped), or the NIC thread. A record's bytes
//! are consumed by `recv` under the lock and applied by the holder, so no
//! record is placed twice, or half by one thread and half by the other.
//! Which of the two reads is a matter of speed only ([`Shared::owner`]):
//! - the rank drains its own sockets when it polls, waits for credit or
//!   closes: no thread wake-up on a message's path;
//! - the NIC thread sleeps in `poll(2)` on its wake descriptor alone while
//!   the rank owns the sockets, and polls them too (placing what arrives
//!   and ringing the doorbell) when the rank hands them over — as it goes
//!   to sleep on its doorbell (`TcpWire::may_sleep`) — or when the rank's
//!   progress count stood still for [`STALL`] (a rank computing, or
//!   blocked in a send to a peer that is blocked sending to it: its
//!   credits and its peers' data still land, and a peer's death is still
//!   seen within a second). The rank takes the sockets back at its next
//!   progress.
//!
//! Every record is validated against the memory the peer may write (its
//! own ring and words on us, our window area), and a ring write's stamp
//! against the one stamp its slot may take next (`check_stamp`), before
//! it is placed; a record that breaks the rules, or a connection that
//! ends without the goodbye record, fails that peer alone with a typed
//! [`NetError`], reported through [`Links`] (the watchdog's next look,
//! within 100 ms, raises the rank's alarm); other peers go on. A
//! connection the kernel gave up on because the peer's host went silent
//! (`crate::netio::alive`) is [`NetError::HostSilent`].
//!
//! Payloads go straight from the socket into their destination when large;
//! small records are read in bulk through a buffer (one `recv` for many).

#![allow(unsafe_code)]

use super::wire::{self, RecordHeader, HEADER_BYTES};
use crate::error::NetError;
use crate::id::Rank;
use crate::netio::silence::{SilenceWatch, LOOK_EVERY};
use crate::ring::{
    publish_trailer, Placements, RingGeometry, RingRegion, RingStore, Trailer, TRAILER_BYTES,
};
use crate::sync::{AtomicU32, AtomicU64, Mutex, Ordering};
use crate::transport::net::link::Links;
use crate::transport::net::wire::PeerArea;
use crate::transport::shm::mapping::MapRef;
use crate::wake::Doorbell;
use crate::window::WindowView;
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the rank's progress count must stand still before the NIC
/// thread reads the sockets itself.
pub(crate) const STALL: Duration = Duration::from_millis(5);

/// [`Shared::owner`]: the rank reads the sockets.
pub(crate) const RANK: u32 = 0;
/// [`Shared::owner`]: the NIC thread reads the sockets.
pub(crate) const NIC: u32 = 1;

/// Where the NIC may write besides the rings: the rank's one-sided window
/// area and its doorbell (both in the host's shared segment, which these
/// views keep mapped while the NIC thread runs).
#[derive(Debug, Clone)]
pub(crate) struct NicTargets {
    pub(crate) window: WindowView,
    /// Rung after every applied record when the rank may sleep.
    pub(crate) bell: Option<MapRef<Doorbell>>,
}

/// Memory and state shared by the application thread and the NIC thread.
pub(crate) struct Shared {
    /// This rank's rings area (rings, then credit and flush words).
    pub(crate) rings: Arc<RingRegion>,
    pub(crate) geometry: RingGeometry,
    /// Per peer: where its ring and words lie in `rings`.
    pub(crate) areas: Vec<PeerArea>,
    /// Each peer's link state and error (`crate::transport::net::link`).
    pub(crate) links: Links,
    pub(crate) targets: NicTargets,
    /// Per peer: its connection's parser; the holder owns the socket.
    pub(crate) conns: Vec<Mutex<Conn>>,
    /// Who reads the sockets now ([`RANK`] or [`NIC`]): a hint for speed
    /// (the mutexes keep them apart), see the module docs.
    pub(crate) owner: AtomicU32,
    /// Bumped by every progress call of the rank.
    pub(crate) beat: AtomicU64,
    /// Connections attached so far ([`Shared::attach`]): the NIC thread
    /// adds their sockets to its poll set when the count moves.
    pub(crate) attached: AtomicU32,
    /// How long a peer's host may stay silent before the NIC thread's
    /// watch ends its connection ([`crate::netio::silence`]).
    pub(crate) dead_after: Duration,
    /// Counted after every drain that published a ring trailer, by rank
    /// and NIC thread alike: the poll skips the rings while it stands
    /// still ([`crate::ring::Placements`]).
    pub(crate) placements: Placements,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("geometry", &self.geometry)
            .field("peers", &self.areas.len())
            .finish_non_exhaustive()
    }
}

// SAFETY: `targets` are views that keep the shared segment mapped and are
// Send + Sync themselves; the parsers' raw pointers (record destinations
// inside `rings` or the window, which `Shared` keeps alive) are used only
// by the holder of their mutex.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

impl Shared {
    /// The state of peers `ranks` (peer `k` is `ranks[k]`, its socket
    /// `fds[k]`, its area `areas[k]`) writing `rings` and `targets`. A
    /// negative descriptor is a peer not connected yet (lazy set-up): it is
    /// read once [`attach`](Self::attach)ed.
    pub(crate) fn new(
        geometry: RingGeometry,
        rings: Arc<RingRegion>,
        areas: Vec<PeerArea>,
        ranks: &[Rank],
        fds: &[RawFd],
        targets: NicTargets,
        dead_after: Duration,
    ) -> Shared {
        let conns = fds
            .iter()
            .enumerate()
            .map(|(k, &fd)| {
                Mutex::new(Conn {
                    k,
                    fd,
                    live: fd >= 0,
                    published: false,
                    want: Want::Header,
                    got: 0,
                    hdr: [0; HEADER_BYTES],
                    small: [0; TRAILER_BYTES],
                    // A peer not connected yet costs no buffer (lazy
                    // set-up): `attach` allocates it.
                    buf: if fd >= 0 { vec![0; BUF] } else { Vec::new() },
                    start: 0,
                    end: 0,
                })
            })
            .collect();
        Shared {
            rings,
            geometry,
            areas,
            links: Links::new(ranks),
            targets,
            conns,
            owner: AtomicU32::new(RANK),
            beat: AtomicU64::new(0),
            attached: AtomicU32::new(fds.iter().filter(|&&fd| fd >= 0).count() as u32),
            dead_after,
            placements: Placements::new(),
        }
    }

    /// Start reading peer `k`'s socket `fd` (a connection set up after the
    /// start, see `crate::transport::net::connect`).
    pub(crate) fn attach(&self, k: usize, fd: RawFd) {
        {
            let mut c = self.conns[k].lock().unwrap_or_else(|p| p.into_inner());
            c.fd = fd;
            c.live = true;
            c.buf = vec![0; BUF];
        }
        // SYNC POINT nic-attach (release side): the NIC thread that sees the
        // count reads the descriptor under the connection's lock.
        self.attached.fetch_add(1, Ordering::Release);
    }

    /// Byte offset of peer `k`'s ring in the region.
    #[inline]
    pub(crate) fn ring_offset(&self, k: usize) -> usize {
        self.areas[k].ring as usize
    }

    /// Peer `k`'s credit word: its released count of our sends.
    #[inline]
    pub(crate) fn credit_word(&self, k: usize) -> &AtomicU64 {
        self.rings.word(self.areas[k].credit as usize)
    }

    /// Peer `k`'s flush word: its last flush round.
    #[inline]
    pub(crate) fn flush_word(&self, k: usize) -> &AtomicU64 {
        self.rings.word(self.areas[k].flush as usize)
    }

    fn ring_bell(&self) {
        if let Some(bell) = &self.targets.bell {
            bell.ring();
        }
    }

    /// Apply what peer `k`'s socket holds, if nobody else is at it
    /// (`wait`: block on the lock rather than skip). A goodbye or failure
    /// is recorded in the links and ends reading that socket. Returns
    /// whether the socket is still read.
    pub(crate) fn service(&self, k: usize, wait: bool) -> bool {
        let lock = &self.conns[k];
        let mut c = if wait {
            lock.lock().unwrap_or_else(|p| p.into_inner())
        } else {
            match lock.try_lock() {
                Ok(c) => c,
                Err(std::sync::TryLockError::WouldBlock) => return true,
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            }
        };
        if !c.live {
            return false;
        }
        let drained = self.placements.count_after(|| {
            c.published = false;
            let r = c.drain(self);
            (r, c.published)
        });
        match drained {
            Ok(()) => true,
            Err(Stop::Bye(closed)) => {
                c.live = false;
                self.links.leave(k, closed);
                self.ring_bell();
                false
            }
            Err(Stop::Fail(e)) => {
                self.end_failed(&mut c, e);
                false
            }
        }
    }

    /// Peer `k`'s host has been silent (`why`, the NIC thread's watch):
    /// its connection ends as failed — the rank's next look reports
    /// [`NetError::HostSilent`], and a send blocked on the socket returns.
    pub(crate) fn host_silent(&self, k: usize, why: String) {
        let mut c = self.conns[k].lock().unwrap_or_else(|p| p.into_inner());
        if c.live {
            let rank = c.rank(self);
            self.end_failed(&mut c, NetError::HostSilent { rank, why });
        }
    }

    /// End connection `c` with failure `e`: recorded in the links, the
    /// socket shut down (both ways: a sender blocked on it returns), the
    /// rank woken.
    fn end_failed(&self, c: &mut Conn, e: NetError) {
        c.live = false;
        self.links.fail(c.k, e);
        // SAFETY: shutting down a socket we read; the wire owns the
        // descriptor and closes it after joining the thread.
        unsafe { libc::shutdown(c.fd, libc::SHUT_RDWR) };
        self.ring_bell();
    }
}

/// What the parser of one connection expects next.
#[derive(Debug, Clone, Copy)]
enum Want {
    Header,
    /// Bytes to copy to `dst`, then `then`.
    Bytes {
        dst: *mut u8,
        left: usize,
        then: After,
    },
    /// Bytes into the small buffer (`small[..need]`), then `then`.
    Small {
        need: usize,
        then: After,
    },
}

#[derive(Debug, Clone, Copy)]
enum After {
    /// Read the ring trailer of `slot` next.
    Trailer { slot: u32 },
    /// Publish the trailer of `slot` (it is in `small`).
    Publish { slot: u32 },
    /// Store the word in `small[..8]` at window byte `at`.
    Word { at: u64 },
    /// Nothing: the record is done.
    Done,
}

/// Parser state of one connection: whoever holds it (behind its mutex in
/// [`Shared::conns`]) owns the socket.
pub(crate) struct Conn {
    k: usize,
    fd: RawFd,
    /// Still read: no goodbye, no failure yet.
    live: bool,
    /// The current drain published a ring trailer.
    published: bool,
    want: Want,
    got: usize,
    hdr: [u8; HEADER_BYTES],
    small: [u8; TRAILER_BYTES],
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

/// Records at least this large are received straight into their
/// destination rather than through the buffer.
const DIRECT: usize = 4096;
const BUF: usize = 64 << 10;

enum Stop {
    /// Goodbye: after the close barrier (true) or without close (false).
    Bye(bool),
    Fail(NetError),
}

impl Conn {
    fn rank(&self, sh: &Shared) -> Rank {
        sh.links.rank(self.k)
    }

    /// Receive into `dst` (up to `len`), from the buffer first. Ok(0): would block.
    fn fill(&mut self, sh: &Shared, dst: *mut u8, len: usize) -> Result<usize, Stop> {
        if self.start < self.end {
            let n = len.min(self.end - self.start);
            // SAFETY: `dst` is valid for `len` bytes (validated record
            // target or our own arrays); the buffer range is initialised.
            unsafe { core::ptr::copy_nonoverlapping(self.buf.as_ptr().add(self.start), dst, n) };
            self.start += n;
            return Ok(n);
        }
        let (into, cap, direct) = if len >= DIRECT {
            (dst, len, true)
        } else {
            (self.buf.as_mut_ptr(), BUF, false)
        };
        // SAFETY: `into` is valid for `cap` bytes (destination or buffer).
        let r = unsafe { libc::recv(self.fd, into as *mut libc::c_void, cap, libc::MSG_DONTWAIT) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                // A silent host (the kernel's watch gave up), or another
                // failure.
                _ => Err(Stop::Fail(crate::netio::alive::receive_failed(
                    self.rank(sh),
                    &e,
                ))),
            };
        }
        if r == 0 {
            let mid = !matches!(self.want, Want::Header) || self.got > 0;
            return Err(Stop::Fail(NetError::Disconnected {
                rank: self.rank(sh),
                mid_record: mid,
            }));
        }
        let r = r as usize;
        if direct {
            return Ok(r);
        }
        self.start = 0;
        self.end = r;
        self.fill(sh, dst, len)
    }

    /// Apply as many records as the socket has. Ok: would block.
    fn drain(&mut self, sh: &Shared) -> Result<(), Stop> {
        loop {
            match self.want {
                Want::Header => {
                    let dst = self.hdr.as_mut_ptr();
                    // SAFETY: `got < HEADER_BYTES` while in this state.
                    let n = self.fill(sh, unsafe { dst.add(self.got) }, HEADER_BYTES - self.got)?;
                    if n == 0 {
                        return Ok(());
                    }
                    self.got += n;
                    if self.got == HEADER_BYTES {
                        self.got = 0;
                        let h = RecordHeader::decode(&self.hdr);
                        self.want = self.begin(sh, h)?;
                    }
                }
                Want::Bytes { dst, left, then } => {
                    if left == 0 {
                        self.want = self.after(sh, then)?;
                        continue;
                    }
                    let n = self.fill(sh, dst, left)?;
                    if n == 0 {
                        return Ok(());
                    }
                    self.want = Want::Bytes {
                        // SAFETY: n <= left, so still within the target.
                        dst: unsafe { dst.add(n) },
                        left: left - n,
                        then,
                    };
                }
                Want::Small { need, then } => {
                    // SAFETY: got < need <= TRAILER_BYTES.
                    let dst = unsafe { self.small.as_mut_ptr().add(self.got) };
                    let n = self.fill(sh, dst, need - self.got)?;
                    if n == 0 {
                        return Ok(());
                    }
                    self.got += n;
                    if self.got == need {
                        self.got = 0;
                        self.want = self.after(sh, then)?;
                    }
                }
            }
        }
    }

    /// Validate a record header and say what to read next.
    fn begin(&mut self, sh: &Shared, h: RecordHeader) -> Result<Want, Stop> {
        let bad = |what: String| {
            Err(Stop::Fail(NetError::BadRecord {
                rank: sh.links.rank(self.k),
                what,
            }))
        };
        let g = sh.geometry;
        let len = h.len as usize;
        match h.kind {
            wire::RING => {
                let end = h.offset.checked_add(u64::from(h.len));
                let fits = end
                    .is_some_and(|e| e <= g.ring_bytes() && e % u64::from(g.slot_bytes) == 0)
                    && len >= TRAILER_BYTES
                    && len <= g.slot_bytes as usize;
                if !fits {
                    return bad(format!(
                        "ring write of {len} bytes at {} does not end at a slot end inside its ring ({} slots of {} bytes)",
                        h.offset, g.slots, g.slot_bytes
                    ));
                }
                let end = end.expect("checked") as usize;
                let slot = (end / g.slot_bytes as usize - 1) as u32;
                let base = sh.rings.base();
                Ok(Want::Bytes {
                    // SAFETY: offset + len <= ring_bytes, inside peer k's
                    // ring (its area was laid out inside the region).
                    dst: unsafe { base.add(sh.ring_offset(self.k) + h.offset as usize) },
                    left: len - TRAILER_BYTES,
                    then: After::Trailer { slot },
                })
            }
            wire::CREDIT if len == 0 => {
                // SYNC POINT credit-return (release side): the peer's reads
                // of our fragments happened before it sent this record.
                sh.credit_word(self.k).store(h.offset, Ordering::Release);
                sh.ring_bell();
                Ok(Want::Header)
            }
            wire::PUT => {
                let (window, window_len) = sh.targets.window.raw();
                if h.offset
                    .checked_add(u64::from(h.len))
                    .is_none_or(|e| e > window_len)
                {
                    return bad(format!(
                        "put of {len} bytes at {} runs past the {window_len}-byte window area",
                        h.offset
                    ));
                }
                Ok(Want::Bytes {
                    // SAFETY: in bounds of the window area (checked).
                    dst: unsafe { window.add(h.offset as usize) },
                    left: len,
                    then: After::Done,
                })
            }
            wire::PUT_U64 => {
                let window_len = sh.targets.window.raw().1;
                if len != 8 || h.offset % 8 != 0 || h.offset.saturating_add(8) > window_len {
                    return bad(format!(
                        "word put at {} (len {len}) is misaligned or past the {window_len}-byte window area",
                        h.offset
                    ));
                }
                Ok(Want::Small {
                    need: 8,
                    then: After::Word { at: h.offset },
                })
            }
            wire::BYE if len == 0 => Err(Stop::Bye(h.offset == wire::BYE_CLOSED)),
            wire::FLUSH if len == 0 => {
                // SYNC POINT ring-flush (release side): every record before
                // this one has been applied (records apply in order), and
                // is visible to whoever Acquire-loads the round
                // (`RmaTransport::quiesce`).
                sh.flush_word(self.k).store(h.offset, Ordering::Release);
                sh.ring_bell();
                Ok(Want::Header)
            }
            k => bad(format!("unknown record kind {k} (len {len})")),
        }
    }

    /// What follows a record's bytes; a ring trailer whose stamp its slot
    /// cannot take next ends the connection instead of being placed.
    fn after(&mut self, sh: &Shared, then: After) -> Result<Want, Stop> {
        Ok(match then {
            After::Trailer { slot } => Want::Small {
                need: TRAILER_BYTES,
                then: After::Publish { slot },
            },
            After::Publish { slot } => {
                let t = Trailer::from_bytes(&self.small);
                let ring = sh.rings.ring(sh.ring_offset(self.k), sh.geometry);
                check_stamp(&ring, sh.geometry, slot, t.stamp).map_err(|what| {
                    Stop::Fail(NetError::BadRecord {
                        rank: self.rank(sh),
                        what,
                    })
                })?;
                // Trailer last, stamp with Release.
                publish_trailer(&ring, slot, &t);
                self.published = true;
                sh.ring_bell();
                Want::Header
            }
            After::Word { at } => {
                let v = u64::from_le_bytes(self.small[..8].try_into().expect("8 bytes"));
                let area = &sh.targets.window;
                // `at` was checked 8-aligned and in bounds. Earlier puts
                // are visible with the word (SYNC POINT window-word, in
                // `window::store_word`).
                area.store_u64(at, v);
                sh.ring_bell();
                Want::Header
            }
            After::Done => {
                sh.ring_bell();
                Want::Header
            }
        })
    }
}

/// Whether `slot` of a ring may take `stamp` next: a slot goes lap by lap
/// (the writer reuses it only once the reader released the fragment it
/// holds, whose stamp therefore landed first, on this same connection),
/// so the one stamp it may take is its first position's (`slot + 1`)
/// while it still holds 0, else the one it holds plus a lap. Anything
/// else — garbage, a stamp of another slot, a lap skipped or repeated —
/// is no fragment the reader will take (it waits for one value per slot,
/// and a stamp it never takes hides every later fragment of the peer):
/// the record is refused, with what was wrong. One load of a word only
/// the placer writes, and a compare.
fn check_stamp(
    ring: &impl RingStore,
    g: RingGeometry,
    slot: u32,
    stamp: u64,
) -> Result<(), String> {
    // Relaxed: only the value is judged; the placer (the holder of the
    // connection's lock) is the one writer of the word.
    let held = ring.stamp(slot).load(Ordering::Relaxed);
    let next = if held == 0 {
        Some(u64::from(slot) + 1)
    } else {
        held.checked_add(u64::from(g.slots))
    };
    if next == Some(stamp) {
        return Ok(());
    }
    Err(match next {
        Some(next) => format!(
            "ring write into slot {slot} carries stamp {stamp}; the slot holds stamp {held}, so the only stamp it may take next is {next}"
        ),
        None => format!("ring write into slot {slot} carries stamp {stamp}; the slot holds stamp {held}, the last a ring can take"),
    })
}

/// What the wire adds to the wake descriptor to stop the NIC thread (a
/// hand-over adds 1).
pub(crate) const STOP: u64 = 1 << 32;

/// The NIC thread's body: until `wake_fd` says [`STOP`] or no link is left, place what arrives while the rank does not
/// read its sockets itself (see the module docs).
pub(crate) fn run(sh: Arc<Shared>, wake_fd: RawFd) {
    let n = sh.conns.len();
    let mut pfds: Vec<libc::pollfd> = std::iter::once(wake_fd)
        .chain(
            sh.conns
                .iter()
                .map(|c| c.lock().unwrap_or_else(|p| p.into_inner()).fd),
        )
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let mut beat = sh.beat.load(Ordering::Relaxed);
    let mut attached = sh.attached.load(Ordering::Relaxed);
    let mut watches = vec![SilenceWatch::new(sh.dead_after); n];
    let mut next_look = Instant::now() + LOOK_EVERY;
    loop {
        // SYNC POINT nic-attach (acquire side): a connection attached since
        // the last look joins the poll set.
        let now_attached = sh.attached.load(Ordering::Acquire);
        if now_attached != attached {
            attached = now_attached;
            for (k, c) in sh.conns.iter().enumerate() {
                let c = c.lock().unwrap_or_else(|p| p.into_inner());
                if c.live && pfds[k + 1].fd < 0 {
                    pfds[k + 1].fd = c.fd;
                }
            }
        }
        // SYNC POINT tcp-handoff (acquire side): pairs with the rank's
        // Release store of the owner (`TcpWire::may_sleep`, `progress`).
        let mine = sh.owner.load(Ordering::Acquire) == NIC;
        let watched = if mine { pfds.len() } else { 1 };
        let stall = STALL.as_millis() as libc::c_int;
        // SAFETY: `pfds` is a valid array of pollfds, `watched` at most its
        // length; this thread never spins (it blocks, or wakes every STALL).
        let r = unsafe { libc::poll(pfds.as_mut_ptr(), watched as libc::nfds_t, stall) };
        if r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return;
        }
        if pfds[0].revents != 0 {
            pfds[0].revents = 0;
            let mut v = [0u8; 8];
            // SAFETY: reading the 8-byte counter of our eventfd.
            unsafe { libc::read(wake_fd, v.as_mut_ptr() as *mut libc::c_void, 8) };
            if u64::from_ne_bytes(v) >= STOP {
                return;
            }
        }
        if mine {
            for k in 0..n {
                let p = &mut pfds[k + 1];
                if p.fd >= 0 && p.revents != 0 {
                    p.revents = 0;
                    if !sh.service(k, true) {
                        p.fd = -1;
                    }
                }
            }
            // Every connection ended (one never attached is still to come).
            if attached as usize == n && pfds[1..].iter().all(|p| p.fd < 0) {
                return;
            }
        }
        // Every LOOK_EVERY, whoever reads the sockets: a peer's host that
        // went silent ends its connection (a send blocked on it returns).
        let now = Instant::now();
        if now >= next_look {
            next_look = now + LOOK_EVERY;
            for (k, w) in watches.iter_mut().enumerate() {
                let p = &mut pfds[k + 1];
                if p.fd >= 0 {
                    if let Some(why) = w.look(p.fd, now) {
                        sh.host_silent(k, why);
                        p.fd = -1;
                    }
                }
            }
        }
        // The rank stood still for a whole STALL: read its sockets.
        let now = sh.beat.load(Ordering::Relaxed);
        if r == 0 && now == beat {
            // SYNC POINT tcp-handoff (release side): no data rides on it.
            sh.owner.store(NIC, Ordering::Release);
        }
        beat = now;
    }
}
