//! [`RmaWire`]: what a one-sided-write network (libfabric, RDMA verbs,
//! TCP write records) must do for [`super::RmaTransport`] to run the ring
//! protocol over it. The transport owns every ring, position and credit;
//! a wire only registers memory, connects peers, posts writes and reports
//! what completed.
//!
//! Beside the core (register, connect, write payload + trailer, write a
//! word, progress), three optional abilities, each a default method a
//! wire overrides when it has it:
//! - [`gathers`](RmaWire::gathers): the wire sends a write straight from
//!   the caller's pieces ([`write_gather`](RmaWire::write_gather)), so
//!   whole messages and puts skip the staging mirror (TCP: `sendmsg`
//!   copies them into the kernel during the call). RDMA wires read the
//!   staging memory after the call returns and keep the mirror.
//! - [`carries_ends`](RmaWire::carries_ends): the wire's data travels on
//!   the set-up connections, so it reads them itself, reports each peer's
//!   end as [`Event::Ended`] and says goodbye in its own stream
//!   ([`goodbye`](RmaWire::goodbye)); otherwise the transport watches the
//!   set-up connections for the goodbye byte.
//! - [`started`](RmaWire::started): called once every peer confirmed it
//!   is ready; a wire that reads the set-up connections starts reading
//!   there (before, the transport's own handshake bytes travel on them).

#![allow(unsafe_code)]

use crate::error::NetError;
use crate::id::Rank;
use crate::log::LongWait;
use crate::netio::silence::LOOK_EVERY;
use crate::ring::{RingGeometry, RingRegion};
use std::cell::{Cell, RefCell};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// Where this rank's words for one peer lie in its rings area (byte
/// offsets): the ring that peer writes, its credit word and its flush
/// word. Exchanged at set-up; a wire that checks what peers write
/// ([`RmaWire::carries_ends`] wires can) confines each peer to its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerArea {
    /// The ring's first byte.
    pub ring: u64,
    /// The credit word (the peer's released count of our sends).
    pub credit: u64,
    /// The flush word (the peer's last flush round).
    pub flush: u64,
}

impl PeerArea {
    /// Bytes of [`encode`](Self::encode).
    pub const BYTES: usize = 24;

    /// Little-endian ring, credit, flush.
    pub fn encode(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        b[0..8].copy_from_slice(&self.ring.to_le_bytes());
        b[8..16].copy_from_slice(&self.credit.to_le_bytes());
        b[16..24].copy_from_slice(&self.flush.to_le_bytes());
        b
    }

    /// The inverse of [`encode`](Self::encode).
    pub fn decode(b: &[u8; Self::BYTES]) -> PeerArea {
        let d = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        PeerArea {
            ring: d(0),
            credit: d(8),
            flush: d(16),
        }
    }
}

/// Which of a peer's areas a [`RmaWire::write_gather`] goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Area {
    /// Its rings area (a ring write: payload then trailer).
    Rings,
    /// Its one-sided window area (a put).
    Window,
}

/// Drive `progress` until the count of completed synchronous writes
/// reaches `want`: the wait of every wire's
/// [`write_sync`](RmaWire::write_sync). The first [`Event::Failed`] found
/// among `events`, or `alive` (asked every [`LOOK_EVERY`]) saying the
/// peer is gone, is the error; a completion late by `warn` (then at each
/// doubling) is logged, and waited for: on a provider whose progress is
/// manual a write into a peer that computes completes only when it polls.
#[cfg_attr(not(any(feature = "ofi", feature = "verbs")), allow(dead_code))]
pub(crate) fn wait_for_sync(
    done: &Cell<u64>,
    want: u64,
    events: &RefCell<Vec<Event>>,
    warn: Duration,
    alive: impl Fn() -> Result<(), String>,
    progress: impl Fn(),
) -> Result<(), String> {
    let mut late = Lateness::new(warn);
    while done.get() < want {
        progress();
        if let Some(Event::Failed { why, .. }) = events
            .borrow()
            .iter()
            .find(|e| matches!(e, Event::Failed { .. }))
        {
            return Err(why.clone());
        }
        late.look(&alive, "a one-sided write")?;
    }
    Ok(())
}

/// The clock of a wait for a peer's completion ([`wait_for_sync`], a
/// provider's full queue, a fence): asks `alive` every [`LOOK_EVERY`],
/// logs after `warn` and at each doubling.
#[cfg_attr(not(any(feature = "ofi", feature = "verbs")), allow(dead_code))]
pub(crate) struct Lateness {
    clock: LongWait,
    next_look: Duration,
}

#[cfg_attr(not(any(feature = "ofi", feature = "verbs")), allow(dead_code))]
impl Lateness {
    /// Start the clock.
    pub(crate) fn new(warn: Duration) -> Lateness {
        Lateness {
            clock: LongWait::new(warn),
            next_look: LOOK_EVERY,
        }
    }

    /// One turn of the wait for `what`: `alive`'s error once it is time
    /// to ask; a warning once it is time to say so.
    pub(crate) fn look(
        &mut self,
        alive: &impl Fn() -> Result<(), String>,
        what: &str,
    ) -> Result<(), String> {
        let waited = self.clock.waited();
        if waited < self.next_look {
            return Ok(());
        }
        self.next_look = waited + LOOK_EVERY;
        alive()?;
        if let Some(waited) = self.clock.due() {
            tracing::warn!(
                "{what} has waited {:.0} s for its completion; the peer's connection is alive (it computes without polling, or is stopped), so waiting on",
                waited.as_secs_f64()
            );
        }
        Ok(())
    }
}

/// What one look at a peer's news link says: its set-up connection,
/// which after start-up carries only its goodbye byte.
#[derive(Debug)]
pub(crate) enum LinkNews {
    /// Nothing to read: the peer lives.
    Quiet,
    /// A byte came: its goodbye (or, if not a goodbye byte, garbage).
    Byte(u8),
    /// End-of-file: the connection ended without a goodbye.
    Ended,
    /// The connection failed: reset, or the kernel gave up on a silent
    /// host (a link armed by `crate::netio::alive`).
    Failed(std::io::Error),
}

/// Look at news link `fd` without blocking: `peek` leaves the byte for a
/// later look (a wait that only asks whether the peer lives), else it is
/// consumed (the transport reading the peer's end).
pub(crate) fn look_at_link(fd: std::os::fd::RawFd, peek: bool) -> LinkNews {
    let mut b = [0u8; 1];
    let flags = libc::MSG_DONTWAIT | if peek { libc::MSG_PEEK } else { 0 };
    // SAFETY: reading (or peeking) one byte of our own socket into `b`,
    // non-blocking.
    let r = unsafe { libc::recv(fd, b.as_mut_ptr() as *mut libc::c_void, 1, flags) };
    match r {
        1 => LinkNews::Byte(b[0]),
        0 => LinkNews::Ended,
        _ => {
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted => LinkNews::Quiet,
                _ => LinkNews::Failed(e),
            }
        }
    }
}

/// Whether the peer at the other end of news link `fd` still lives,
/// judged by a peek (the transport still reads its goodbye later): any
/// news but none is its end.
#[cfg_attr(not(feature = "ofi"), allow(dead_code))]
pub(crate) fn link_alive(fd: std::os::fd::RawFd) -> Result<(), String> {
    match look_at_link(fd, true) {
        LinkNews::Quiet => Ok(()),
        LinkNews::Byte(_) => Err("the peer is leaving (its goodbye came)".into()),
        LinkNews::Ended => Err("the peer's connection ended".into()),
        LinkNews::Failed(e) => Err(format!("the peer's connection failed: {e}")),
    }
}

/// What a wire's progress found.
#[derive(Clone, Debug, PartialEq)]
// Without an RDMA wire built, only the TCP wire's `Ended` is made.
#[cfg_attr(not(any(feature = "ofi", feature = "verbs")), allow(dead_code))]
pub enum Event {
    /// A notified write from peer number `peer` for ring position `pos`
    /// has been placed whole in this rank's memory (only the low bits of
    /// `pos` the wire can carry: the transport compares slots).
    Landed {
        /// The peer number.
        peer: usize,
        /// The ring position (low bits).
        pos: u64,
    },
    /// An operation towards (or from) peer number `peer` failed.
    Failed {
        /// The peer number.
        peer: usize,
        /// What the network said.
        why: String,
    },
    /// Peer number `peer`'s connection ended (wires that
    /// [`carry ends`](RmaWire::carries_ends)): `Ok(closed)` a goodbye,
    /// after the peer's close barrier (`true`) or without it; `Err` the
    /// typed error it failed with.
    Ended {
        /// The peer number.
        peer: usize,
        /// How it ended.
        how: Result<bool, NetError>,
    },
}

/// The network under [`super::RmaTransport`]. Peers are numbered
/// `0..n` by rank order; offsets are bytes from the start of the peer's
/// registered area (the wire turns them into what its network wants:
/// virtual addresses or offsets, with the area's key).
///
/// A [`write_sync`](Self::write_sync) or a write after a
/// [`fence`](Self::fence) lands after every earlier write to the same
/// peer; a notified ring write is reported by an [`Event::Landed`] at the
/// peer once whole.
pub trait RmaWire {
    /// Set-up errors (the transport's start error).
    type Error: std::fmt::Display;

    /// The set-up error for memory the transport could not map (`why`
    /// says how much, for what, and the OS's error).
    fn memory_error(&self, why: String) -> Self::Error;

    /// Register this rank's memory: `rings` (rings of `geometry`, written
    /// by peers; the wire may keep the `Arc`), `staging` (where this
    /// rank's writes come from), `window` (the one-sided window area).
    /// Each raw area is (base, bytes), valid while the wire lives.
    fn register(
        &mut self,
        geometry: RingGeometry,
        rings: &Arc<RingRegion>,
        staging: (*mut u8, usize),
        window: (*mut u8, usize),
    ) -> Result<(), Self::Error>;
    /// What peer number `k` needs to write this rank's areas (address,
    /// keys), sent to it over the set-up connection (called once per peer,
    /// in order, each before that peer's [`connect`](Self::connect));
    /// `mine`: where its ring and words lie in this rank's rings area.
    fn describe(&mut self, k: usize, mine: &PeerArea) -> Result<Vec<u8>, Self::Error>;
    /// Connect peer number `k` (rank `rank`) from its description;
    /// `theirs`: where this rank's ring and words lie in the peer's rings
    /// area; `side`: the set-up connection (kept open by the transport).
    fn connect(
        &mut self,
        k: usize,
        rank: u32,
        theirs: &PeerArea,
        remote: &[u8],
        side: &TcpStream,
    ) -> Result<(), Self::Error>;
    /// Arm the set-up connection `side`, called before each
    /// [`connect`](Self::connect), so that the peer's host going silent
    /// for `dead_after` fails it ([`crate::netio::alive`]). The default,
    /// for a link that carries only the peer's news (a few bytes at a
    /// time), is the kernel's whole watch; a wire whose records travel on
    /// `side` itself arms it for bulk data instead.
    ///
    /// # Errors
    /// The OS error of a socket option.
    fn arm(&self, side: &TcpStream, dead_after: std::time::Duration) -> std::io::Result<()> {
        crate::netio::alive::watch_liveness(side, dead_after)
    }
    /// Whether this wire connects peers after [`started`](Self::started)
    /// (lazy set-up, `crate::transport::net::connect`): if it returns
    /// `true` it keeps `ranks` (peer `k` is `ranks[k]`), gets
    /// [`describe`](Self::describe) for every peer before
    /// [`ready`](Self::ready) and [`started`](Self::started), and each
    /// [`connect`](Self::connect) later, at any time, in any order. A wire
    /// that returns `false` (the default) is connected to every peer up
    /// front, in order.
    fn late_peers(&mut self, _ranks: &[Rank]) -> bool {
        false
    }
    /// A probe of the wire's own state for the endpoint's watchdog (TCP:
    /// the NIC thread's link states); `None` (the default) if it has none.
    fn watch_probe(&self) -> Option<Box<dyn crate::watch::Probe>> {
        None
    }
    /// Every peer is connected (or, [`late_peers`](Self::late_peers),
    /// described); called before any write.
    fn ready(&mut self, slots: u32) -> Result<(), Self::Error>;
    /// Every peer confirmed it is ready: from now on nothing but the
    /// wire travels on the set-up connections.
    fn started(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
    /// An error for a failed set-up exchange.
    fn setup_error(&self, what: String) -> Self::Error;

    /// Whether a write's bytes are placed in order, so that its last word
    /// landing proves it all landed (what the network promises; asked
    /// after [`ready`](Self::ready)). If not, ring writes are notified
    /// and polled through [`Event::Landed`].
    fn places_in_order(&self) -> bool;
    /// Every how many polls the empty poll calls
    /// [`progress`](Self::progress): 1 where progress is cheap or needed
    /// for anything to land; more where it is a system call.
    fn progress_period(&self) -> u32;
    /// Whether anything lands without [`progress`](Self::progress) (an
    /// adapter placing writes itself); if not, credit waits call it.
    fn lands_by_itself(&self) -> bool;
    /// A wire that places ring writes itself (on this host, by software):
    /// its placement count now ([`crate::ring::Placements::mark`]), so the
    /// poll may skip rings nothing was placed on since they were found
    /// empty. `None` (the default): writes land by themselves (RDMA), every
    /// poll looks at every ring.
    #[inline]
    fn placements(&self) -> Option<u64> {
        None
    }

    /// Whether the wire reads the set-up connections itself (its data
    /// travels on them): it reports each peer's end as [`Event::Ended`]
    /// and says goodbye with [`goodbye`](Self::goodbye).
    fn carries_ends(&self) -> bool {
        false
    }
    /// Say goodbye to every peer: after the close barrier (`closed`) or
    /// not. Called once, as the transport is dropped (only where
    /// [`carries_ends`](Self::carries_ends)).
    fn goodbye(&mut self, _closed: bool) {}
    /// The rank looks for work before it may sleep (`has_arrivals`, with
    /// its doorbell's sleeping flag raised if it is about to): a wire
    /// whose writes need a thread to land while the rank sleeps hands
    /// them to it here.
    fn may_sleep(&self) {}
    /// Whether [`write_gather`](Self::write_gather) works: the wire is
    /// done with the caller's bytes when the call returns.
    fn gathers(&self) -> bool {
        false
    }
    /// Write the concatenated `pieces` to byte `at` of peer `k`'s `area`,
    /// straight from the caller's memory; ordered with every other write
    /// to `k` (as [`write_sync`](Self::write_sync) for the window). Only
    /// called where [`gathers`](Self::gathers).
    fn write_gather(
        &mut self,
        _k: usize,
        _area: Area,
        _at: u64,
        _pieces: &[&[u8]],
    ) -> Result<(), String> {
        Err("this wire writes from its staging memory only".into())
    }

    /// Post a write of `len` staging bytes at `local` to byte `at` of peer
    /// `k`'s rings; `notify`: the peer gets [`Event::Landed`] with this
    /// position. The staging bytes stay untouched until the peer returns
    /// the credit of the slot.
    fn write(
        &mut self,
        k: usize,
        local: usize,
        len: usize,
        at: u64,
        notify: Option<u64>,
    ) -> Result<(), String>;
    /// Store `value` in the aligned word at byte `at` of peer `k`'s rings
    /// (copied during the call: the credit return).
    fn write_word(&mut self, k: usize, at: u64, value: u64) -> Result<(), String>;
    /// Make every later write land after every earlier one (a no-op where
    /// the network orders writes to a peer; otherwise wait until the
    /// earlier writes have landed).
    fn fence(&mut self) -> Result<(), String>;
    /// Write `len` staging bytes at `local` to byte `at` of peer `k`'s
    /// window area, placed there after every earlier write to `k` and
    /// before every later one; return once the staging bytes may be
    /// reused (a one-sided put).
    fn write_sync(&mut self, k: usize, local: usize, len: usize, at: u64) -> Result<(), String>;
    /// Why a write to peer `k` failed because its host stopped answering
    /// (the kernel gave up on the silence), where the wire can tell; the
    /// transport keeps it as the cause of that peer's failure.
    fn silence(&self, _k: usize) -> Option<String> {
        None
    }
    /// Reap completions, keeping what they say for
    /// [`take_events`](Self::take_events).
    fn progress(&self);
    /// Hand every event found so far to `f`.
    fn take_events(&self, f: &mut dyn FnMut(Event));
}
