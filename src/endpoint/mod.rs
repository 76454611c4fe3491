//! The endpoint: handler registry, streamed sends and receives, `extract`,
//! credits and waiting — the FM 2.x API over every transport at once.
//! What it promises a program (progress, failures, close) is written on
//! [`Endpoint`], which the crate root re-exports.
//!
//! # Rooms
//!
//! Each room is a folder whose module doc says what it owns and promises.
//! The engine at the bottom holds the state every call shares (`Core`) and
//! the parts it is made of; the rooms above it are the calls a program or
//! a handler makes on it. Rooms import only down this table
//! (`scripts/layers.py check`), naming the file they use; everything may
//! use what this file defines (`Endpoint`). The handles a handler gets
//! (`Ctx`, `Message`) hold the engine, and the engine's handler table and
//! idle hooks hold functions of them: the handles are therefore defined
//! with `Core` (`engine::core`), the table and the hooks are generic over
//! them (`engine::handler`, `engine::hooks`), and what a handler can do
//! with a handle is written in `receive` — no edge goes up. `Core` keeps
//! each part of its state in the type of the room that changes it and
//! hands it out by an accessor; no field of `Core` is visible outside it.
//!
//! ```text
//! layers:begin
//! startup | joining the job: the builder, the configuration, start-up
//!         | (rendezvous, transports, the handler-table check), the report
//! rounds  | termination rounds as called: `quiesce`, the `close` loop,
//!         | saying whom `close` waits for
//! send    | `MessageWriter`, the bound on parked sends, remote memory
//! wait    | the waiter (spin, yield, sleep, `auto`), run-queue pressure,
//!         | idle hooks
//! receive | carrying out the receive state machine's actions; the
//!         | handles a handler gets (`Message`, `Piece`, `Ctx`)
//! engine  | `Core` and its parts: send queues and routes, the receive
//!         | state machine, the handler registry, control messages and
//!         | termination counting, peer health, counters
//! layers:end
//! ```

pub(crate) mod engine;
mod receive;
mod rounds;
mod send;
pub(crate) mod startup;
mod wait;

pub use self::startup::builder::EndpointBuilder;
pub use self::startup::config::{
    Config, ConnectMode, NetConfig, NetMode, DEFAULT_MAX_PARKED, DEFAULT_MAX_RECEIVE,
};
// The transports' tuning, as `Config` holds it (the transports are private).
pub use self::engine::core::Extracted;
pub use self::engine::core::{Ctx, Message};
pub use self::engine::handler::piece::Piece;
pub use self::engine::wait_policy::WaitPolicy;
pub use self::receive::message::Receive;
pub use self::send::writer::MessageWriter;
pub use crate::transport::net::NetRingConfig;
pub use crate::transport::shm::ShmConfig;

use self::engine::core::Core;
use self::engine::net::OutStream;
use self::wait::Waiter;
use crate::error::{ConfigError, ExtractError, SendError};
use crate::id::{HandlerId, Rank};
use std::rc::Rc;

/// A rank's endpoint in a started job. Not `Send`: it belongs to the thread
/// that started it.
///
/// The endpoint: handler registry, streamed sends and receives, `extract`,
/// credits and waiting — the FM 2.x API over every transport at once.
///
/// ```text
///   EndpointBuilder::register(name, async handler) … start()
///        │  (rank 0 checks every rank's handler table)
///        ▼
///   Endpoint ── begin_message → MessageWriter::send_piece … end   (gather)
///     │      ── extract(max_bytes): poll each transport in turn
///     │             └─ fragments → per-source streams → handlers
///     │                 (start on the first fragment; `Message::receive`
///     │                  suspends until more arrive — scatter)
///     └──── Net: transports, routes, pending sends (from handlers)
/// ```
///
/// Progress happens only inside calls into the library: `extract`,
/// `wait_until`, `quiesce`, and sends that wait for credit. A sender out of
/// credit extracts until credit returns, so head-to-head floods and sends
/// from handlers never deadlock. Delivery is reliable and in order per pair.
///
/// Beyond single messages: [`quiesce`](Endpoint::quiesce) is a reusable
/// termination round (everything sent before it, and everything handlers
/// sent in response, has been handled — `close` is the last such round);
/// idle hooks ([`EndpointBuilder::on_idle`]) let a library run work when
/// the rank waits (an aggregation library flushes its buffers there); and
/// sends parked for credit are bounded ([`Config::max_parked`]): a main
/// loop that sends faster than its peers drain makes progress instead of
/// growing memory.
///
/// # When a peer fails
///
/// A peer has *failed* once it died (killed, crashed, or ended without
/// releasing its endpoint — `exit` without `close`, an `exec`), left
/// without `close` (dropped its endpoint), or lost its network connection,
/// or once a send found the shared queue it writes on that peer corrupt
/// (`ProtocolError::PeerQueueCorrupt`, `PeerFramesCorrupt`,
/// `PeerCreditCorrupt`: reported like
/// a failure, the first time by the send's next `extract`);
/// it has *closed* once the close barrier released it. Both are for good.
/// Each endpoint has a watchdog thread that looks every 100 ms — at the
/// local peers' lifelines in the shared segment (a robust mutex each rank
/// holds for its endpoint's life: the kernel marks it owner-dead when the
/// holder goes, in any PID namespace; see
/// `transport::shm::liveness`) and at the network links — and
/// raises a word that the empty `extract` reads beside its queues (the
/// watchdog only looks; it makes no progress). Then:
///
/// - [`extract`](Endpoint::extract) reports each failure **once**
///   ([`ExtractError::PeerDied`], [`ExtractError::PeerLeft`], a network
///   error), within about 100 ms of its being seen, plus the next call —
///   also in a program that only polls — and goes on serving the live
///   peers after that;
/// - every blocking call that would wait — [`wait_until`](Endpoint::wait_until)
///   (hence every collective), [`close`](Endpoint::close), start-up —
///   fails with the first failure's error **every time** once a peer has
///   failed, since what it waits for may depend on that peer: nothing
///   spins for ever;
/// - a send, `begin_message` or put to a failed or closed peer fails at
///   once with `PeerGone`, every time (to a peer whose network connection
///   could not be made on first use: `Unreachable`, naming why — the peer
///   may well be alive); sends parked for it are dropped
///   (their memory freed); a send waiting for credit from a peer fails
///   when that peer fails, and other sends go on;
/// - a message the failed peer was still sending is delivered as
///   *aborted* (`ReceiveError::Aborted` from [`Message::receive`], a last
///   piece flagged [`Piece::is_aborted`]), never padded; its complete
///   messages are delivered;
/// - [`failed_peers`](Endpoint::failed_peers) lists the failed ranks;
/// - a closed peer is no failure: only sends to it fail.
///
/// When a failure is *seen*: a local peer's death at once (its
/// lifeline); a network peer's process that dies, is killed or leaves on
/// a live host at once too (its kernel ends the connection:
/// [`NetError::Disconnected`](crate::error::NetError::Disconnected)); a
/// network peer whose *host* crashes, loses power or is cut off once it
/// has been silent for `FASTMSG_NET_DEAD_AFTER_MS` ([`NetConfig::dead_after`],
/// 3 s by default: TCP keepalive probes on every connection between ranks
/// and a watch over what the kernel knows of each, so idle links and links
/// with data in flight alike, while a peer process merely stopped with a
/// full window is waited for;
/// [`NetError::HostSilent`](crate::error::NetError::HostSilent)).
/// So a lost host is reported about 3.1 s after it went, a dead process
/// within about 100 ms.
///
/// A peer that is alive but never calls `close` keeps the others in
/// `close`; they say whom they wait for (see [`Endpoint::close`]).
///
/// What a handler's [`Ctx`] offers — [`rank`](Ctx::rank),
/// [`size`](Ctx::size), [`local_ranks`](Ctx::local_ranks), the one-sided
/// [`put`](Ctx::put) / [`put_u64`](Ctx::put_u64) /
/// [`read_u64`](Ctx::read_u64) / [`read_window`](Ctx::read_window),
/// [`post`](Ctx::post), [`parked_bytes`](Ctx::parked_bytes) — the endpoint
/// offers too, through `Deref<Target = Ctx>`: one implementation, one set
/// of docs. The endpoint's own [`send`](Self::send) differs from
/// [`Ctx::send`]: it waits for credit instead of parking the message.
#[derive(Debug)]
pub struct Endpoint {
    core: Rc<Core>,
}

impl std::ops::Deref for Endpoint {
    type Target = Ctx;

    #[inline]
    fn deref(&self) -> &Ctx {
        Ctx::from_core(&self.core)
    }
}

impl Endpoint {
    /// A builder for the job this process was launched into.
    ///
    /// # Errors
    /// See [`EndpointBuilder::from_env`].
    pub fn from_env() -> Result<EndpointBuilder, ConfigError> {
        EndpointBuilder::from_env()
    }

    /// A sending handle (the same a handler gets), e.g. for a library that
    /// sends both from the main thread and from its handlers.
    pub fn ctx(&self) -> Ctx {
        Ctx::new(Rc::clone(&self.core))
    }

    /// The ranks known to have failed (died, left without `close`, lost
    /// their connection), in rank order. See [`extract`](Self::extract)
    /// for how failures are reported.
    pub fn failed_peers(&self) -> Vec<Rank> {
        self.core.health().failed()
    }

    /// The ranks this rank holds a network connection to now, sorted.
    /// With lazy connections (`FASTMSG_CONNECT=lazy`, the default) these
    /// are the peers it has talked to (and rank 0, which every rank
    /// reports to at start and close); with `eager`, every network peer.
    pub fn network_connections(&self) -> Vec<Rank> {
        self.core.net().borrow().net_connected()
    }

    /// The name `id` was registered under.
    pub fn handler_name(&self, id: HandlerId) -> String {
        self.core.registry().borrow().name(id).to_owned()
    }

    /// Start a message of exactly `len` bytes to `handler` on `dest`
    /// (`FM_begin_message`). Send its pieces with
    /// [`MessageWriter::send_piece`], then [`MessageWriter::end`].
    ///
    /// **Runs handlers**: `begin_message` does only when sends parked
    /// towards `dest` (by handlers) are ahead of it: it takes its place
    /// behind them and makes progress until they have left (what handlers
    /// send to `dest` meanwhile leaves after this message). The writer's
    /// `send_piece` and `end` run handlers when out of credit (they make
    /// progress until credit returns), so state a handler borrows (a
    /// `RefCell`) must not be borrowed across those calls.
    ///
    /// # Errors
    /// [`SendError::BadDestination`], [`SendError::UnknownHandler`],
    /// [`SendError::PeerGone`].
    pub fn begin_message(
        &mut self,
        dest: Rank,
        len: usize,
        handler: HandlerId,
    ) -> Result<MessageWriter<'_>, SendError> {
        self.core.begin_message(dest, len, handler)
    }

    /// Send a whole message gathered from `pieces` (blocking only for
    /// credit).
    ///
    /// **Runs handlers** when out of credit: it makes progress (extracts)
    /// until credit returns, so state a handler borrows (a `RefCell`)
    /// must not be borrowed across this call. With credit it returns
    /// without running any. Behind sends already parked towards `dest`
    /// (sent by handlers) it takes its place and waits for them to leave
    /// (making progress), then is written in place: it leaves after them
    /// and before anything a handler sends meanwhile or later.
    ///
    /// # Errors
    /// As [`begin_message`](Self::begin_message).
    pub fn send(
        &mut self,
        dest: Rank,
        handler: HandlerId,
        pieces: &[&[u8]],
    ) -> Result<(), SendError> {
        self.core.send_waiting(dest, handler, pieces)
    }

    /// Poll every transport in turn and run handlers (`FM_extract`): one
    /// pass, taking what has arrived (up to a batch per transport) until
    /// about `max_bytes` of payload were taken (at least one fragment).
    /// Never waits.
    ///
    /// # Errors
    /// A handler's error, a peer's protocol violation, or a peer's failure
    /// — [`ExtractError::PeerDied`], [`ExtractError::PeerLeft`], a
    /// network error — each failure reported once, within about 100 ms
    /// of its being seen (a dead process at once, a lost host after
    /// `FASTMSG_NET_DEAD_AFTER_MS`, 3 s; see the failure semantics in the
    /// [`Endpoint`] docs). The
    /// endpoint stays usable: call again to continue with the live peers.
    #[inline(always)]
    pub fn extract(&mut self, max_bytes: usize) -> Result<Extracted, ExtractError> {
        if let Some(e) = self.core.take_deferred() {
            return Err(e);
        }
        if self.core.hooks().has_work() {
            // An idle hook has work (one load and a branch when none has).
            return self.core.extract_then_hooks(max_bytes);
        }
        let r = self.core.progress(max_bytes);
        #[cfg(feature = "stats")]
        if matches!(&r, Ok(x) if !x.any()) {
            self.core.net().borrow().tally().empty_extract();
        }
        r
    }

    /// Make progress, waiting per the wait policy, until `done()` is true.
    ///
    /// # Errors
    /// As [`extract`](Self::extract); the wait stops at the first error.
    /// Once any peer has failed, every wait that finds `done()` false
    /// fails with that peer's error (what it waits for may depend on the
    /// failed rank): it never spins for ever.
    pub fn wait_until(&mut self, mut done: impl FnMut() -> bool) -> Result<(), ExtractError> {
        let mut waiter = Waiter::new();
        while !done() {
            if let Some(e) = self.core.take_deferred() {
                return Err(e);
            }
            let x = self.core.progress_one()?;
            if x.any() {
                waiter.busy();
            } else {
                waiter.idle(&self.core, &mut done)?;
            }
        }
        Ok(())
    }

    /// Leave the job: a termination barrier. Returns once every rank has
    /// called `close` and no user message is left anywhere — parked for
    /// credit, in flight, or not yet handled here. Handlers keep running
    /// while ranks close, and what they send (answers, acknowledgements) is
    /// delivered too, so a request sent just before `close` still gets its
    /// answer. (A program whose handlers keep sending to each other for
    /// ever never closes.) Costs at least two rounds to rank 0 and back.
    /// Items waiting in idle hooks' buffers (aggregation) are flushed and
    /// delivered too. `close` is a termination round like
    /// [`quiesce`](Self::quiesce) (the same counting), and counts as one
    /// in the sequence of rounds every rank must make alike.
    ///
    /// A rank that never calls `close` keeps every other rank here: after
    /// [`Config::close_warn`] (10 s by default, `FASTMSG_CLOSE_WARN`) and
    /// again at each doubling of the wait, every waiting rank prints to
    /// stderr which ranks have not called `close` (rank 0 knows, and tells
    /// the others). This is a diagnostic, not an error: a rank may
    /// legitimately reach `close` much later (a long last computation), and
    /// no fixed limit suits every program. A rank that *failed* instead is
    /// an error at once.
    ///
    /// # Errors
    /// As [`extract`](Self::extract), including errors deferred earlier;
    /// a failed peer (see [`wait_until`](Self::wait_until));
    /// [`ExtractError::CloseQuiesceMismatch`] if another rank is in
    /// `quiesce` in this round.
    pub fn close(self) -> Result<(), ExtractError> {
        let core = &self.core;
        let mut straggle = self::rounds::straggle::StraggleWatch::new(core.close_warn());
        core.termination_round(self::engine::termination::RoundKind::Close, &mut |c| {
            straggle.tick(c)
        })?;
        // Released: leaving is orderly from now on, whatever happens next
        // (peers still closing must not take our exit for a failure).
        core.set_closed();
        // Network transports: wait until what peers sent before closing has
        // landed here (the release may have overtaken it on another path);
        // a live peer however long, saying so after `close_warn`.
        let warn = core.close_warn();
        core.net().borrow_mut().for_each(|t| t.quiesce(warn))?;
        // Everything sent to us before its sender closed is visible now.
        while core.progress(usize::MAX)?.any() {}
        // A `Ctx` kept past `close` sends nothing any more, and says so.
        core.health().set_self_closed();
        self.print_stats_if_asked();
        match core.take_deferred() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.core.teardown();
    }
}

impl Core {
    /// `Endpoint::begin_message`: reserve the main thread's place in
    /// `dest`'s pending order, wait (making progress) until the sends
    /// parked ahead of it have left, then open its stream (see the send
    /// side's order rules, `engine::net`).
    pub(in crate::endpoint) fn begin_message(
        self: &Rc<Self>,
        dest: Rank,
        len: usize,
        handler: HandlerId,
    ) -> Result<MessageWriter<'_>, SendError> {
        self.check_send(dest, handler)?;
        self.take_turn(dest)?;
        let s = OutStream::user(self.rank(), dest, handler, len as u64);
        Ok(MessageWriter::open(self, s))
    }

    /// Reserve the main thread's place towards `dest` and wait for its
    /// turn: handlers that run meanwhile (this makes progress) park what
    /// they send to `dest` behind it. On error the place is released.
    fn take_turn(self: &Rc<Self>, dest: Rank) -> Result<(), SendError> {
        if self.net().borrow_mut().reserve_main(dest) {
            return Ok(());
        }
        let mut waiter = Waiter::for_peer(dest);
        loop {
            {
                let mut net = self.net().borrow_mut();
                net.drain_pending();
                if net.main_turn() {
                    return Ok(());
                }
            }
            if let Err(e) = self.wait_for_credit(dest, &mut waiter) {
                self.net().borrow_mut().close_main();
                return Err(e);
            }
            if self.net().borrow().main_turn() {
                return Ok(());
            }
        }
    }

    /// `Endpoint::send`: a whole message, waiting for credit (making
    /// progress) rather than parking: written in place, in its turn.
    pub(in crate::endpoint) fn send_waiting(
        self: &Rc<Self>,
        dest: Rank,
        handler: HandlerId,
        pieces: &[&[u8]],
    ) -> Result<(), SendError> {
        let len = pieces.iter().map(|p| p.len()).sum();
        if self.watchdog().alarm().raised() {
            self.learn_failures();
        }
        self.check_send(dest, handler)?;
        let inline =
            self.net()
                .borrow_mut()
                .try_send_inline(self.rank(), dest, handler, len as u64, pieces);
        if inline {
            return Ok(());
        }
        if self.net().borrow().main_busy() {
            // A main-thread message is being written already (a `Ctx`
            // used while a `MessageWriter` is open): this one cannot wait
            // for its own turn inside that one's, so it takes its place in
            // the pending order as a copy.
            let stream = OutStream::user(self.rank(), dest, handler, len as u64);
            self.net().borrow_mut().send_or_park(stream, pieces);
            return self.relieve();
        }
        let mut w = self.begin_message(dest, len, handler)?;
        for p in pieces {
            w.send_piece(p)?;
        }
        w.end()
    }

    /// Validate a send's destination and handler.
    pub(in crate::endpoint) fn check_send(
        &self,
        dest: Rank,
        handler: HandlerId,
    ) -> Result<(), SendError> {
        if dest.0 >= self.size() {
            return Err(SendError::BadDestination {
                dest,
                size: self.size(),
            });
        }
        let registered = self.handler_count();
        if handler.0 >= registered {
            return Err(SendError::UnknownHandler {
                id: handler.0,
                registered,
            });
        }
        // A failed or closed destination (one cached load while every
        // peer lives).
        if self.health().is_gone(dest) {
            if self.health().self_closed() {
                return Err(SendError::Closed { rank: self.rank() });
            }
            return Err(SendError::PeerGone { rank: dest });
        }
        Ok(())
    }

    /// The close barrier released this rank: tell the transports, so that
    /// our leaving is not taken for a failure.
    pub(in crate::endpoint) fn set_closed(&self) {
        self.net().borrow_mut().set_closed();
    }

    /// One round of progress on behalf of a blocking call: extract (errors
    /// are kept for the next `extract`), then wait per policy if idle.
    pub(in crate::endpoint) fn progress_round(
        self: &Rc<Self>,
        waiter: &mut Waiter,
        ready: &mut dyn FnMut() -> bool,
    ) -> Result<(), ExtractError> {
        match self.progress_one() {
            Ok(x) if x.any() => {
                waiter.busy();
                Ok(())
            }
            Ok(_) => waiter.idle(self, ready),
            Err(e) => {
                self.defer(e);
                Ok(())
            }
        }
    }

    /// Wait for credit towards `dest`, making progress meanwhile.
    pub(in crate::endpoint) fn wait_for_credit(
        self: &Rc<Self>,
        dest: Rank,
        waiter: &mut Waiter,
    ) -> Result<(), SendError> {
        if self.health().is_gone(dest) || self.net().borrow().is_gone(dest) {
            // Gone (the rare path): say so, with the cause when it fell silent.
            if let Some(why) = self.silence(dest) {
                return Err(SendError::PeerSilent { rank: dest, why });
            }
            if self.health().is_gone(dest) {
                return Err(SendError::PeerGone { rank: dest });
            }
            // Its connection could not be made (lazy set-up): say why.
            if let Some(why) = self.net().borrow().unreachable(dest) {
                return Err(SendError::Unreachable { rank: dest, why });
            }
            // The transport found it gone before the engine did (a corrupt
            // shared queue, a receiver that died under a send's wait) and
            // raised the alarm: the next `extract` names the cause.
            return Err(SendError::PeerGone { rank: dest });
        }
        // This rank left the job over a queue: its peers take it as gone.
        let left = self.net().borrow().left_over();
        if let Some(why) = left {
            return Err(SendError::LeftJob {
                rank: self.rank(),
                why,
            });
        }
        let credit = self.net().borrow().has_credit(dest);
        if let Some(waited) = waiter.credit_overdue(dest, credit, self.close_warn()) {
            tracing::warn!(
                "rank {} has waited {waited:?} for credit towards rank {dest}, which has taken none of its messages for that long (busy without polling, stopped or hung); still waiting",
                self.rank()
            );
        }
        let mut ready = || self.net().borrow().has_credit(dest);
        #[cfg(feature = "stats")]
        let t0 = std::time::Instant::now();
        let round = self.progress_round(waiter, &mut ready);
        #[cfg(feature = "stats")]
        self.net()
            .borrow()
            .tally()
            .credit_wait(dest.index(), t0.elapsed());
        match round {
            Ok(()) => Ok(()),
            Err(ExtractError::Network(crate::error::NetError::HostSilent { rank, why }))
                if rank == dest =>
            {
                Err(SendError::PeerSilent { rank, why })
            }
            Err(e) if e.failed_peer() == Some(dest) => Err(SendError::PeerGone { rank: dest }),
            Err(ExtractError::Aborted) => Err(SendError::Aborted),
            // Another peer failed: reported by the next `extract` (and
            // every later wait); this send can go on. It waits on `dest`
            // alone: if `dest` itself waits on the failed peer, `dest`'s
            // own waits end on that failure (their scope is any peer, or
            // that peer for a credit wait), so `dest` returns credit or
            // fails — this wait never hangs on a failure it does not see.
            Err(e) => {
                self.defer(e);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod net_peer_tests;
#[cfg(test)]
mod order_tests;
#[cfg(test)]
mod stuck_tests;
#[cfg(test)]
mod tests;
