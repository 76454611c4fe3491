//! [`RmaWire`]: what a one-sided-write network (libfabric, RDMA verbs)
//! must do for [`super::RmaTransport`] to run the ring protocol over it.
//! The transport owns every ring, position and credit; a wire only
//! registers memory, connects peers, posts writes and reports what
//! completed.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

/// Drive `progress` until the count of completed synchronous writes
/// reaches `want`: the wait of every wire's
/// [`write_sync`](RmaWire::write_sync). The first [`Event::Failed`] found
/// among `events`, or `stuck` passing without the completion, is the error.
pub(crate) fn wait_for_sync(
    done: &Cell<u64>,
    want: u64,
    events: &RefCell<Vec<Event>>,
    stuck: Duration,
    progress: impl Fn(),
) -> Result<(), String> {
    let start = Instant::now();
    while done.get() < want {
        progress();
        if let Some(Event::Failed { why, .. }) = events
            .borrow()
            .iter()
            .find(|e| matches!(e, Event::Failed { .. }))
        {
            return Err(why.clone());
        }
        if start.elapsed() > stuck {
            return Err(format!("write not completed after {stuck:?}"));
        }
    }
    Ok(())
}

/// What a wire's progress found.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    type Error;

    /// Register this rank's memory: `rings` (written by peers), `staging`
    /// (where this rank's writes come from), `window` (the one-sided
    /// window area). Each is (base, bytes), valid while the wire lives.
    fn register(
        &mut self,
        rings: (*mut u8, usize),
        staging: (*mut u8, usize),
        window: (*mut u8, usize),
    ) -> Result<(), Self::Error>;
    /// What peer number `k` needs to write this rank's areas (address,
    /// keys), sent to it over the set-up connection (called once per peer,
    /// in order, each before that peer's [`connect`](Self::connect)).
    fn describe(&mut self, k: usize) -> Result<Vec<u8>, Self::Error>;
    /// Connect peer number `k` (rank `rank`) from its description.
    fn connect(&mut self, k: usize, rank: u32, remote: &[u8]) -> Result<(), Self::Error>;
    /// Every peer is connected; called before any write.
    fn ready(&mut self, slots: u32) -> Result<(), Self::Error>;
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
    /// Reap completions, keeping what they say for
    /// [`take_events`](Self::take_events).
    fn progress(&self);
    /// Hand every event found so far to `f`.
    fn take_events(&self, f: &mut dyn FnMut(Event));
}
