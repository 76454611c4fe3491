//! The send side of the engine: transports, routes, and the per-destination
//! queue of sends that could not go out at once.
//!
//! Sends are streamed ([`OutStream`]): pieces are appended straight into
//! reserved transport frames; a full frame is committed and the next one
//! reserved. A stream that runs out of credit stops where it is. The main
//! thread then makes progress and retries (see `MessageWriter`); a handler,
//! which must never block, parks the rest in the destination's *pending*
//! queue (a copy), drained by later progress — UCX's pending-queue idea.
//!
//! # Order per destination
//!
//! Every message to a destination leaves in the order its send was
//! issued, whoever issued it — the main thread or a handler, including a
//! handler that runs *while* a main-thread send waits for credit. One
//! mechanism keeps it, the destination's pending order:
//!
//! - a send from a handler (or hook, or control message) goes straight out
//!   only when nothing is ahead of it (no pending queue, no main-thread
//!   send reserved); otherwise it is copied to the back of the pending
//!   queue;
//! - a send from the main thread first *reserves its place*
//!   ([`Net::reserve_main`]): it records how many parked sends are ahead
//!   of it, and from then on the destination counts as taken, so what
//!   handlers send meanwhile parks behind it. Draining sends only those
//!   ahead; once they have left, the main thread writes its own message in
//!   place from the caller's buffers (no copy), waiting for credit as it
//!   goes, and releases the place when it ends ([`Net::close_main`]); the
//!   sends parked behind it then drain.
//!
//! With nothing ahead and credit available the reservation costs two
//! stores: the common send is still written straight into frames.

use crate::endpoint::engine::control_op::ControlOp;
use crate::endpoint::engine::health::Failure;
use crate::error::{ProtocolError, PutError};
use crate::frame::{FragFlags, FragHeader};
use crate::id::{HandlerId, Rank};
use crate::transport::shm::liveness::Life;
use crate::transport::shm::mapping::MapRef;
use crate::transport::{AnyTransport, NetTransport, RxFragment, ShmTransport, Transport, TxFrame};
use crate::wake::Doorbell;
use std::collections::VecDeque;

/// Whom a message is for at its destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Addressee {
    /// A user handler.
    Handler(HandlerId),
    /// The endpoint itself (a SYSTEM message).
    Control(ControlOp),
}

impl Addressee {
    /// The header's `handler` field, and whether the SYSTEM flag is set:
    /// the one place that encodes either on the wire.
    #[inline]
    fn wire(self) -> (u32, bool) {
        match self {
            Addressee::Handler(h) => (h.0, false),
            Addressee::Control(op) => (op.wire(), true),
        }
    }
}

/// One message being streamed out.
#[derive(Debug)]
pub(in crate::endpoint) struct OutStream {
    pub(in crate::endpoint) dest: Rank,
    to: Addressee,
    pub(in crate::endpoint) total: u64,
    pub(in crate::endpoint) written: u64,
    cur: Option<TxFrame>,
    first: bool,
    /// The last fragment ends the message aborted.
    abort: bool,
    me: Rank,
}

impl OutStream {
    /// A user message of `total` bytes for `handler` on `dest`.
    pub(in crate::endpoint) fn user(me: Rank, dest: Rank, handler: HandlerId, total: u64) -> Self {
        Self::new(me, dest, Addressee::Handler(handler), total)
    }

    /// A control message of `total` bytes for the endpoint of `dest`.
    pub(in crate::endpoint) fn control(me: Rank, dest: Rank, op: ControlOp, total: u64) -> Self {
        Self::new(me, dest, Addressee::Control(op), total)
    }

    fn new(me: Rank, dest: Rank, to: Addressee, total: u64) -> Self {
        OutStream {
            dest,
            to,
            total,
            written: 0,
            cur: None,
            first: true,
            abort: false,
            me,
        }
    }

    fn is_control(&self) -> bool {
        matches!(self.to, Addressee::Control(_))
    }

    /// Append as much of `data` as credit allows; returns bytes taken.
    /// The caller guarantees `written + data.len() <= total`.
    #[inline]
    pub(in crate::endpoint) fn write(&mut self, net: &mut Net, data: &[u8]) -> usize {
        let mut off = 0;
        while off < data.len() {
            let frame = match &mut self.cur {
                Some(f) => f,
                None => match self.try_direct(net, &data[off..]) {
                    Some(0) => break,
                    Some(n) => {
                        off += n;
                        self.written += n as u64;
                        continue;
                    }
                    None => match net.try_reserve(self.dest, self.total - self.written) {
                        Some(f) => self.cur.insert(f),
                        None => break,
                    },
                },
            };
            let n = frame.append(&data[off..]);
            off += n;
            self.written += n as u64;
            if frame.room() == 0 && self.written < self.total {
                self.commit(net, false);
            }
        }
        off
    }

    /// Send a whole frame's worth of `data` as a fragment straight from
    /// it, where the transport can (see `Transport::try_send_fragment`):
    /// not the last fragment, which `finish` sends. `None`: reserve a frame
    /// instead; `Some(0)`: no credit; else the bytes sent.
    #[inline]
    fn try_direct(&mut self, net: &mut Net, data: &[u8]) -> Option<usize> {
        let cap = net.frame_capacity(self.dest);
        if data.len() < cap || self.written + cap as u64 >= self.total {
            return None;
        }
        let header = self.header(cap, false);
        let sent = net.send_fragment(header, self.dest, &data[..cap])?;
        if !sent {
            return Some(0);
        }
        self.first = false;
        Some(cap)
    }

    /// The header of the next fragment, `len` bytes, last or not.
    #[inline]
    fn header(&self, len: usize, last: bool) -> FragHeader {
        let (handler, system) = self.to.wire();
        let mut flags = 0;
        if self.first {
            flags |= FragFlags::FIRST.0;
        }
        if last {
            flags |= FragFlags::LAST.0;
        }
        if system {
            flags |= FragFlags::SYSTEM.0;
        }
        if last && self.abort {
            flags |= FragFlags::ABORT.0;
        }
        FragHeader {
            src: self.me.0,
            handler,
            len: len as u32,
            flags,
            total: self.total,
        }
    }

    /// Commit the last fragment. False if no credit for it yet.
    #[inline]
    pub(in crate::endpoint) fn finish(&mut self, net: &mut Net) -> bool {
        if self.cur.is_none() {
            match net.try_reserve(self.dest, 0) {
                Some(f) => self.cur = Some(f),
                None => return false,
            }
        }
        self.commit(net, true);
        true
    }

    /// End the message here, aborted: commit what the current frame holds
    /// as its last fragment, flagged `ABORT` (a frame is reserved if none
    /// is; a reserved frame must be committed, since a transport may rely
    /// on its position). Nothing is sent if nothing was reserved yet.
    /// False if no credit for the last fragment yet.
    pub(in crate::endpoint) fn finish_aborted(&mut self, net: &mut Net) -> bool {
        if self.first && self.cur.is_none() {
            return true;
        }
        self.abort = true;
        self.finish(net)
    }

    #[inline]
    fn commit(&mut self, net: &mut Net, last: bool) {
        let frame = self.cur.take().expect("commit with a reserved frame");
        let header = self.header(frame.len(), last);
        self.first = false;
        if last && !self.is_control() {
            net.sent += 1;
        }
        net.commit(frame, header);
    }
}

/// The main thread's place in one destination's pending order (a
/// `MessageWriter`, reserved before it opens): at most one destination at
/// a time. While it is held, sends to that destination from handlers
/// park behind it, and of the sends parked to it only the `ahead` first
/// may leave, so the main thread's fragments follow exactly those and are
/// not interleaved with another message's. Set by [`Net::reserve_main`],
/// cleared by [`Net::close_main`].
#[derive(Debug, Default, Clone, Copy)]
struct MainStream {
    to: Option<Rank>,
    /// Parked sends to `to` still ahead of the main thread's message.
    ahead: usize,
}

impl MainStream {
    /// Whether the main thread holds a place towards `dest`.
    #[inline(always)]
    fn is_to(self, dest: Rank) -> bool {
        self.to == Some(dest)
    }

    /// How many of `dest`'s parked sends may leave now.
    #[inline(always)]
    fn may_drain(self, dest: Rank) -> usize {
        if self.is_to(dest) {
            self.ahead
        } else {
            usize::MAX
        }
    }
}

/// A send parked until credit returns: its stream and the bytes not yet
/// written.
#[derive(Debug)]
pub(in crate::endpoint) struct Pending {
    stream: OutStream,
    data: Vec<u8>,
    off: usize,
}

/// Sends parked for a destination that gives them no credit now
/// ([`Net::parked_stall`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::endpoint) struct ParkedStall {
    /// The destination.
    pub(in crate::endpoint) dest: Rank,
    /// Messages parked for it.
    pub(in crate::endpoint) messages: usize,
    /// Bytes of them not written out yet.
    pub(in crate::endpoint) bytes: usize,
    /// The count that moves whenever its parked sends make progress.
    pub(in crate::endpoint) progress: u64,
}

/// Transport index of the shared-memory transport (in routes and in
/// `RxFragment::transport`); network transport `k` is index `k + 1`.
pub(in crate::endpoint) const SHM: u8 = 0;

/// Run `$e` with `$t` bound to transport index `$i` of `$net` (`&mut`):
/// the shared-memory transport called directly, a network one through
/// `AnyTransport`. The engine keeps shm apart so that its hot paths
/// inline with no dispatch: behind a dispatch, the polled fragment went
/// through memory and the 0-byte self-send round slowed down
/// (BENCHMARKS.md, message rate).
macro_rules! on_transport {
    ($net:expr, $i:expr, $t:ident => $e:expr) => {{
        let i = $i as usize;
        if i == SHM as usize {
            let $t = &mut $net.shm;
            $e
        } else {
            let $t = &mut $net.wide[i - 1];
            $e
        }
    }};
}

/// Transports, routes and pending sends.
#[derive(Debug)]
pub(in crate::endpoint) struct Net {
    /// Network transports (none when every peer is on this host). What
    /// they write into the shm segment (window area, doorbell) they reach
    /// through views that keep it mapped.
    wide: Vec<AnyTransport>,
    /// The shared-memory transport (every endpoint has one).
    shm: ShmTransport,
    /// `!wide.is_empty()`, one load for the empty poll.
    has_wide: bool,
    /// Per destination: [`SHM`] or `k + 1` for network transport `k`.
    route: Vec<u8>,
    /// The main thread's open stream, if any.
    open: MainStream,
    pending: Vec<VecDeque<Pending>>,
    pending_dests: Vec<u32>,
    /// Per destination: a count that moves whenever its parked sends make
    /// progress (bytes written out, a message finished): how a wait tells
    /// a queue that drains from one that is stuck.
    drained: Vec<u64>,
    /// Counters (feature `stats`; empty without it).
    tally: crate::endpoint::engine::stats::Tally,
    /// Bytes held by parked sends (what `FASTMSG_MAX_PARKED` bounds).
    parked_bytes: usize,
    /// User messages whose last fragment went to a transport (the close
    /// barrier's count; parked ones are added by [`Net::sent_count`]).
    sent: u64,
    /// Fragments were released since the last `flush` (only tracked when
    /// some transport batches; see `Transport::needs_flush`).
    unflushed: bool,
    /// Whether any transport needs `flush`.
    flush_needed: bool,
}

impl Net {
    /// The shared-memory transport.
    #[inline(always)]
    pub(in crate::endpoint) fn shm(&self) -> &ShmTransport {
        &self.shm
    }

    /// The shared-memory transport, to change (start-up's alarm, tests).
    pub(in crate::endpoint) fn shm_mut(&mut self) -> &mut ShmTransport {
        &mut self.shm
    }

    /// Whether any network transport runs (one load for the empty poll).
    #[inline(always)]
    pub(in crate::endpoint) fn has_wide(&self) -> bool {
        self.has_wide
    }

    /// The network transports (tests reach a wire through them).
    #[cfg(test)]
    pub(in crate::endpoint) fn wide(&self) -> &[AnyTransport] {
        &self.wide
    }

    /// How many network transports run.
    pub(in crate::endpoint) fn wide_count(&self) -> usize {
        self.wide.len()
    }

    /// Poll the shared-memory transport for one fragment.
    #[inline(always)]
    pub(in crate::endpoint) fn poll_shm(&mut self) -> Option<Result<RxFragment, ProtocolError>> {
        self.shm.poll()
    }

    /// Poll network transport `k` for one fragment.
    pub(in crate::endpoint) fn poll_wide(
        &mut self,
        k: usize,
    ) -> Option<Result<RxFragment, ProtocolError>> {
        self.wide[k].poll()
    }

    /// Give a fragment back to the transport it came from: shared memory
    /// inline (a credit store, and a slot and frame on shared queues), a
    /// network transport out of line. Marks a flush due where some
    /// transport batches.
    #[inline(always)]
    pub(in crate::endpoint) fn release(&mut self, f: &RxFragment) {
        self.unflushed |= self.flush_needed;
        if f.transport == SHM {
            self.shm.release(&f.token);
        } else {
            self.release_wide(f);
        }
    }

    #[inline(never)]
    fn release_wide(&mut self, f: &RxFragment) {
        on_transport!(self, f.transport, t => t.release(&f.token));
    }

    /// Whether fragments were released since the last flush.
    #[inline(always)]
    pub(in crate::endpoint) fn flush_due(&self) -> bool {
        self.unflushed
    }

    /// The close barrier released this rank: tell every transport, so
    /// that its leaving is not taken for a failure.
    pub(in crate::endpoint) fn set_closed(&mut self) {
        self.shm.set_closed();
        for t in &mut self.wide {
            crate::transport::NetTransport::set_closed(t);
        }
    }

    /// The counters (feature `stats`; empty without it).
    #[inline(always)]
    #[cfg_attr(not(feature = "stats"), allow(dead_code))]
    pub(in crate::endpoint) fn tally(&self) -> &crate::endpoint::engine::stats::Tally {
        &self.tally
    }

    pub(in crate::endpoint) fn new(
        wide: Vec<AnyTransport>,
        shm: ShmTransport,
        route: Vec<u8>,
    ) -> Self {
        let n = route.len();
        let flush_needed = shm.needs_flush() || wide.iter().any(|t| t.needs_flush());
        Net {
            flush_needed,
            has_wide: !wide.is_empty(),
            wide,
            shm,
            route,
            open: MainStream::default(),
            pending: (0..n).map(|_| VecDeque::new()).collect(),
            pending_dests: Vec::new(),
            drained: vec![0; n],
            tally: crate::endpoint::engine::stats::Tally::new(n),
            parked_bytes: 0,
            sent: 0,
            unflushed: false,
        }
    }

    #[inline]
    fn try_reserve(&mut self, dest: Rank, remaining: u64) -> Option<TxFrame> {
        on_transport!(self, self.route[dest.index()], t => t.try_reserve(dest, remaining))
    }

    /// Payload bytes per frame of the transport serving `dest`.
    #[inline]
    fn frame_capacity(&self, dest: Rank) -> usize {
        match self.route[dest.index()] {
            SHM => self.shm.frame_capacity(),
            k => self.wide[k as usize - 1].frame_capacity(),
        }
    }

    /// A streamed message's fragment (not its last) straight from `piece`
    /// (see `Transport::try_send_fragment`).
    #[inline]
    fn send_fragment(&mut self, header: FragHeader, dest: Rank, piece: &[u8]) -> Option<bool> {
        let sent = on_transport!(self, self.route[dest.index()], t => t.try_send_fragment(dest, header, piece));
        if sent == Some(true) {
            self.tally.sent(dest.index(), header.len, false);
        }
        sent
    }

    #[inline]
    fn commit(&mut self, frame: TxFrame, header: FragHeader) {
        let last = header.flags & FragFlags::LAST.0 != 0;
        self.tally.sent(frame.dest.index(), header.len, last);
        on_transport!(self, self.route[frame.dest.index()], t => t.commit(frame, header));
    }

    /// The small-message fast path: send a whole message of at most the
    /// transport's inline size as one fragment, if order allows (nothing
    /// open or parked towards `dest`) and credit is there.
    #[inline]
    pub(in crate::endpoint) fn try_send_inline(
        &mut self,
        me: Rank,
        dest: Rank,
        handler: HandlerId,
        total: u64,
        pieces: &[&[u8]],
    ) -> bool {
        if self.open.is_to(dest) || (self.has_pending() && self.has_pending_to(dest)) {
            return false;
        }
        let header = FragHeader {
            src: me.0,
            handler: handler.0,
            len: total as u32,
            flags: FragFlags::FIRST.0 | FragFlags::LAST.0,
            total,
        };
        let sent = on_transport!(self, self.route[dest.index()], t => {
            total <= t.inline_max() as u64 && t.try_send_inline(dest, header, pieces)
        });
        self.sent += u64::from(sent);
        if sent {
            self.tally.sent(dest.index(), total as u32, true);
        }
        sent
    }

    /// The main thread reserves its place in `dest`'s pending order:
    /// behind every send parked for `dest` now, ahead of every send
    /// issued from here on (handlers' sends park behind it). Returns
    /// whether it is already its turn (nothing ahead). Released by
    /// [`close_main`](Self::close_main), whatever happens.
    #[inline]
    pub(in crate::endpoint) fn reserve_main(&mut self, dest: Rank) -> bool {
        debug_assert!(self.open.to.is_none(), "one main-thread send at a time");
        let ahead = self.pending[dest.index()].len();
        self.open = MainStream {
            to: Some(dest),
            ahead,
        };
        ahead == 0
    }

    /// Whether the main thread holds a place (reserved or writing) towards
    /// any destination.
    #[inline]
    pub(in crate::endpoint) fn main_busy(&self) -> bool {
        self.open.to.is_some()
    }

    /// Whether the main thread's reserved message may be written now: the
    /// sends that were parked ahead of it have all left (or were dropped
    /// with a failed destination).
    #[inline]
    pub(in crate::endpoint) fn main_turn(&self) -> bool {
        self.open.ahead == 0
    }

    /// The main thread's message ended (sent whole, aborted, or given up
    /// while it waited for its turn): its place is released, and what
    /// parked behind it may leave.
    pub(in crate::endpoint) fn close_main(&mut self) {
        self.open = MainStream::default();
    }

    /// User messages sent so far, parked ones included.
    pub(in crate::endpoint) fn sent_count(&self) -> u64 {
        let parked = self
            .pending
            .iter()
            .flatten()
            .filter(|p| !p.stream.is_control());
        self.sent + parked.count() as u64
    }

    /// One-sided put through the transport serving `dest`.
    pub(in crate::endpoint) fn put(
        &mut self,
        dest: Rank,
        at: u64,
        data: &[u8],
    ) -> Result<(), PutError> {
        on_transport!(self, self.route[dest.index()], t => t.put(dest, at, data))
    }

    /// One-sided word store through the transport serving `dest`.
    pub(in crate::endpoint) fn put_u64(
        &mut self,
        dest: Rank,
        at: u64,
        value: u64,
    ) -> Result<(), PutError> {
        on_transport!(self, self.route[dest.index()], t => t.put_u64(dest, at, value))
    }

    /// The ranks a network transport holds a connection to, sorted.
    pub(in crate::endpoint) fn net_connected(&self) -> Vec<Rank> {
        let mut v: Vec<Rank> = self.wide.iter().flat_map(|t| t.connected()).collect();
        v.sort();
        v
    }

    /// Whether the transport serving `dest` has credit towards it.
    pub(in crate::endpoint) fn has_credit(&self, dest: Rank) -> bool {
        match self.route[dest.index()] {
            SHM => self.shm.has_credit(dest),
            k => self.wide[k as usize - 1].has_credit(dest),
        }
    }

    /// Whether `dest` is known to be gone (on the transport serving it).
    pub(in crate::endpoint) fn is_gone(&self, dest: Rank) -> bool {
        match self.route[dest.index()] {
            SHM => self.shm.is_gone(dest),
            k => self.wide[k as usize - 1].is_gone(dest),
        }
    }

    /// Why `dest` could not be reached, if its connection could not be made.
    pub(in crate::endpoint) fn unreachable(&self, dest: Rank) -> Option<String> {
        match self.route[dest.index()] {
            SHM => None,
            k => self.wide[k as usize - 1].unreachable(dest),
        }
    }

    /// Why `dest`'s host was taken as dead, if it fell silent.
    pub(crate) fn silence(&self, dest: Rank) -> Option<String> {
        match self.route[dest.index()] {
            SHM => None,
            k => self.wide[k as usize - 1].silence(dest),
        }
    }

    /// Whether some transport has something to poll.
    #[inline(always)]
    fn has_arrivals(&self) -> bool {
        if self.shm.has_arrivals() {
            return true;
        }
        // A plain loop, inlined with each transport's fast path (an
        // out-of-line `any` costs a call and its register saves per poll).
        if self.has_wide {
            for t in &self.wide {
                if t.has_arrivals() {
                    return true;
                }
            }
        }
        false
    }

    /// Whether any send is parked.
    #[inline]
    pub(in crate::endpoint) fn has_pending(&self) -> bool {
        !self.pending_dests.is_empty()
    }

    /// Whether a send to `dest` is parked.
    #[inline]
    pub(in crate::endpoint) fn has_pending_to(&self, dest: Rank) -> bool {
        !self.pending[dest.index()].is_empty()
    }

    /// A destination whose parked sends cannot go on now (no credit
    /// towards it), if any. For the waits' stall warnings, every 100 ms
    /// at most: off the message path.
    pub(in crate::endpoint) fn parked_stall(&self) -> Option<ParkedStall> {
        self.pending_dests.iter().find_map(|&d| {
            let dest = Rank(d);
            if self.has_credit(dest) {
                return None;
            }
            let q = &self.pending[d as usize];
            Some(ParkedStall {
                dest,
                messages: q.len(),
                bytes: q.iter().map(|p| p.data.len() - p.off).sum(),
                progress: self.drained[d as usize],
            })
        })
    }

    /// Forget the sends parked for `dest` (it failed: they can never be
    /// delivered, and their memory is freed).
    pub(in crate::endpoint) fn drop_pending_to(&mut self, dest: Rank) {
        let d = dest.index();
        if self.open.is_to(dest) {
            // Nothing is ahead of the main thread's message any more.
            self.open.ahead = 0;
        }
        if self.pending.get(d).is_some_and(|p| !p.is_empty()) {
            let held: usize = self.pending[d].iter().map(|p| p.data.len() - p.off).sum();
            self.parked_bytes -= held;
            self.pending[d].clear();
            self.pending_dests.retain(|&x| x as usize != d);
        }
    }

    /// The network transports' checks (failures of network peers).
    pub(in crate::endpoint) fn check_wide(&mut self) -> Result<(), crate::error::ExtractError> {
        for t in &mut self.wide {
            t.check_peers()?;
        }
        Ok(())
    }

    /// Send a whole message from a handler: straight out if nothing is
    /// ahead of it towards its destination (see the module doc) and credit
    /// allows, else (partly) parked. Never blocks.
    pub(in crate::endpoint) fn send_or_park(&mut self, mut stream: OutStream, pieces: &[&[u8]]) {
        let dest = stream.dest;
        if !self.open.is_to(dest) && !self.has_pending_to(dest) {
            for (i, p) in pieces.iter().enumerate() {
                let n = stream.write(self, p);
                if n < p.len() {
                    let mut data = p[n..].to_vec();
                    for q in &pieces[i + 1..] {
                        data.extend_from_slice(q);
                    }
                    self.park(Pending {
                        stream,
                        data,
                        off: 0,
                    });
                    return;
                }
            }
            if !stream.finish(self) {
                self.park(Pending {
                    stream,
                    data: Vec::new(),
                    off: 0,
                });
            }
            return;
        }
        let data = pieces.concat();
        self.park(Pending {
            stream,
            data,
            off: 0,
        });
    }

    /// Bytes held by parked sends now.
    #[inline]
    pub(in crate::endpoint) fn parked_bytes(&self) -> usize {
        self.parked_bytes
    }

    fn park(&mut self, p: Pending) {
        self.parked_bytes += p.data.len() - p.off;
        let d = p.stream.dest.index();
        if self.pending[d].is_empty() {
            self.pending_dests.push(d as u32);
        }
        self.pending[d].push_back(p);
        if crate::endpoint::engine::stats::ENABLED {
            let q = &self.pending[d];
            let bytes = q.iter().map(|p| p.data.len() - p.off).sum();
            self.tally.parked(d, q.len(), bytes);
        }
    }

    /// Push parked sends out as far as credit allows (towards the
    /// destination the main thread holds a place for, only those ahead of
    /// it).
    #[inline(never)]
    pub(in crate::endpoint) fn drain_pending(&mut self) {
        let mut i = 0;
        while i < self.pending_dests.len() {
            let d = self.pending_dests[i] as usize;
            let dest = Rank(d as u32);
            let may = self.open.may_drain(dest);
            if may > 0 {
                let left = self.drain_dest(d, may);
                if self.open.is_to(dest) {
                    self.open.ahead -= left;
                }
            }
            if self.pending[d].is_empty() {
                self.pending_dests.swap_remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// Send up to `max` of `d`'s parked sends, in order, as credit
    /// allows; returns how many left whole.
    fn drain_dest(&mut self, d: usize, max: usize) -> usize {
        let mut left = 0;
        while left < max {
            let Some(mut p) = self.pending[d].pop_front() else {
                break;
            };
            let n = p.stream.write(self, &p.data[p.off..]);
            p.off += n;
            self.parked_bytes -= n;
            self.drained[d] += n as u64;
            if p.off < p.data.len() || !p.stream.finish(self) {
                self.pending[d].push_front(p);
                break;
            }
            left += 1;
            self.drained[d] += 1;
        }
        left
    }

    /// Whether `progress` has anything to do: parked sends, credit to
    /// return, or arrivals on some transport.
    #[inline(always)]
    pub(in crate::endpoint) fn needs_attention(&self) -> bool {
        self.unflushed || !self.pending_dests.is_empty() || self.has_arrivals()
    }

    /// Whether a sleeper has work: arrivals, or parked sends with credit
    /// now (towards the main thread's destination, only those ahead of
    /// it).
    pub(in crate::endpoint) fn has_work(&self) -> bool {
        self.has_arrivals()
            || self.pending_dests.iter().any(|&d| {
                let d = Rank(d);
                self.open.may_drain(d) > 0 && self.has_credit(d)
            })
    }

    /// Publish batched credit returns on every transport.
    #[inline]
    pub(in crate::endpoint) fn flush(&mut self) {
        if self.unflushed {
            self.unflushed = false;
            self.shm.flush();
            for t in &mut self.wide {
                t.flush();
            }
        }
    }
}

impl Net {
    /// Every transport, shm first (for the cold paths: health checks,
    /// closing).
    pub(in crate::endpoint) fn for_each(
        &mut self,
        mut f: impl FnMut(&mut dyn Transport) -> Result<(), crate::error::ExtractError>,
    ) -> Result<(), crate::error::ExtractError> {
        f(&mut self.shm)?;
        for t in &mut self.wide {
            f(t.transport())?;
        }
        Ok(())
    }
}

#[cfg(test)]
impl Net {
    /// Count a message a test published by hand (bypassing the send path)
    /// as sent, so that the close barrier's counts still agree.
    pub(in crate::endpoint) fn count_crafted_message(&mut self) {
        self.sent += 1;
    }
}

/// The doorbell this rank sleeps on, as the shared-memory transport hands
/// it out (a view that keeps the segment mapped).
pub(in crate::endpoint) type Bell = MapRef<Doorbell>;

/// What the shared-memory transport knows of this host's peers and of its
/// own queues, in the engine's terms (read when the watchdog raises its
/// alarm, off the message path).
impl Net {
    /// Local peers whose lifelines in the segment show them closed, left
    /// or dead.
    pub(in crate::endpoint) fn local_failures(&self) -> Vec<(Rank, Failure)> {
        let mut gone: Vec<(Rank, Failure)> = self
            .shm
            .peer_lives()
            .filter_map(|(rank, life, pid)| match life {
                Life::Closed => Some((rank, Failure::Closed)),
                Life::Left => Some((rank, Failure::Left)),
                Life::Dead => Some((rank, Failure::Died { pid })),
                Life::Alive | Life::Unarmed => None,
            })
            .collect();
        // Deaths first: a rank that left during a failure usually left
        // because of a death, which is the cause to report.
        gone.sort_by_key(|(_, f)| !matches!(f, Failure::Died { .. }));
        gone
    }

    /// The next corruption this rank's own sends found in a peer's shared
    /// queue, if any.
    pub(in crate::endpoint) fn take_refusal(&mut self) -> Option<ProtocolError> {
        self.shm.take_refusal()
    }

    /// Why this rank left the job over a shared-memory queue, if it did.
    pub(in crate::endpoint) fn left_over(&self) -> Option<ProtocolError> {
        self.shm.left_over().cloned()
    }

    /// A hole a dead writer left in a shared queue this rank reads.
    pub(in crate::endpoint) fn find_hole(&mut self) -> Option<ProtocolError> {
        self.shm.find_hole()
    }

    /// `rank` failed, left or closed: puts to it fail, and nothing stays
    /// parked for it.
    pub(in crate::endpoint) fn peer_gone(&mut self, rank: Rank) {
        self.shm.mark_gone(rank);
        self.drop_pending_to(rank);
    }

    /// The doorbell this rank sleeps on (only the shared-memory transport
    /// has one; the network transports' NICs ring it).
    pub(in crate::endpoint) fn doorbell(&self) -> Bell {
        self.shm.doorbell_ref()
    }
}
