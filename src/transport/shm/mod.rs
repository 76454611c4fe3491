//! The shared-memory transport (SMT, HPVM §5) between ranks of one host.
//!
//! Holds the [`Segment`] (its mapping is shared, see [`mapping`]) and,
//! over it, this rank's `M` receive queues (poll side) and a sender's view
//! of every local peer's queue (send side).
//! The queue protocol itself lives in [`crate::queue`]; credits in
//! [`crate::flow`]; this module wires them to the mapping and validates all
//! that comes out of it. Sends to a queue several ranks share, whose waits
//! can stall on the receiver, are in `shared_send.rs`; the hooks tests use
//! to play a hostile process, in `test_hooks.rs`.

#![allow(unsafe_code)]

mod audit;
mod failed_mark;
mod gather;
mod holes;
pub mod layout;
pub mod liveness;
pub(crate) mod mapping;
pub mod segment;
mod shared_send;
mod stall;
#[cfg(test)]
mod test_hooks;

use self::gather::{fill_slot, gather_into_frame};
use self::layout::{Layout, Params};
use self::liveness::{Life, LifeGuard, LifeLine};
use self::mapping::MapRef;
use self::segment::Segment;
use self::shared_send::TxStalled;
use super::{ReleaseToken, RxFragment, Transport, TxFrame};
use crate::error::{ExtractError, ProtocolError, PutError, SegmentError};
use crate::flow::{CreditLine, CreditReturn, CreditWindow};
use crate::frame::FragHeader;
use crate::id::Rank;
use crate::queue::{FrameStore, FreeList, RecvQueue, SlotBody, Watch, INLINE_BYTES, NO_FRAME};
use crate::sync::{AtomicU32, AtomicU64};
use crate::wake::{Doorbell, Ringer};
use crate::window::{WindowArea, WindowView};
use std::path::Path;
use std::time::Duration;

/// Frames of one queue inside the mapping: `count` frames of `stride` bytes,
/// each an in-use flag line followed by `cap` payload bytes.
#[derive(Debug, Clone, Copy)]
struct ShmFrames {
    base: *mut u8,
    stride: usize,
    count: u32,
    cap: usize,
}

impl ShmFrames {
    #[inline]
    fn payload(&self, frame: u32) -> *mut u8 {
        debug_assert!(frame < self.count);
        // SAFETY: frame < count, so the offset stays inside this queue's
        // frame area of the mapping.
        unsafe { self.base.add(frame as usize * self.stride + 64) }
    }
}

impl FrameStore for ShmFrames {
    fn count(&self) -> u32 {
        self.count
    }
    fn capacity(&self) -> usize {
        self.cap
    }
    #[inline]
    fn in_use(&self, frame: u32) -> &AtomicU32 {
        assert!(frame < self.count);
        // SAFETY: in bounds, 64-byte aligned line at the head of the frame;
        // a `ShmFrames` lives only inside the transport, which holds the
        // mapping.
        unsafe { &*(self.base.add(frame as usize * self.stride) as *const AtomicU32) }
    }
    fn write(&self, frame: u32, offset: usize, src: &[u8]) {
        assert!(frame < self.count && offset + src.len() <= self.cap);
        // SAFETY: bounds checked above; the caller owns the frame.
        unsafe {
            core::ptr::copy_nonoverlapping(src.as_ptr(), self.payload(frame).add(offset), src.len())
        }
    }
    fn read(&self, frame: u32, offset: usize, dst: &mut [u8]) {
        assert!(frame < self.count && offset + dst.len() <= self.cap);
        // SAFETY: bounds checked above; the caller owns the frame.
        unsafe {
            core::ptr::copy_nonoverlapping(
                self.payload(frame).add(offset),
                dst.as_mut_ptr(),
                dst.len(),
            )
        }
    }
}

/// One of this rank's receive queues.
#[derive(Debug)]
struct RxQueue {
    /// What an idle poll looks at (first, so the empty poll touches one
    /// line of this struct per queue).
    watch: Watch<'static>,
    q: RecvQueue<'static>,
    free_head: &'static AtomicU64,
    frames: ShmFrames,
    head: u64,
    /// The only sender's SMT id (dedicated queues).
    sole_sender: Option<u32>,
}

/// The send side towards one local peer.
#[derive(Debug)]
struct TxPeer {
    q: RecvQueue<'static>,
    free_head: &'static AtomicU64,
    frames: ShmFrames,
    window: CreditWindow,
    credit: &'static CreditLine,
    bell: &'static Doorbell,
    /// The peer's one-sided window area (keeping the mapping alive, for
    /// the handles [`ShmTransport::peer_view`] gives out).
    area: WindowView,
    /// The peer's lifeline: a send waiting on its shared queue gives up
    /// once it says the peer is gone.
    life: MapRef<LifeLine>,
}

/// The receive side's way back to one source: its credit count, the line
/// we return that credit through, and its doorbell.
#[derive(Debug)]
struct SourceBack {
    returns: CreditReturn,
    line: &'static CreditLine,
    bell: &'static Doorbell,
}

impl TxPeer {
    /// Take one credit towards this peer, reading the returned credit only
    /// when the window is used up: whether one was taken.
    ///
    /// # Errors
    /// [`TxStalled::Credit`] when the credit line holds a count its only
    /// writer, the receiver, never publishes: below one already seen (the
    /// count only grows) or above the fragments sent. A sender that
    /// dropped such a count would wait for a publish that never comes.
    #[inline(always)]
    fn take_credit(&mut self) -> Result<bool, TxStalled> {
        if self.window.try_take() {
            return Ok(true);
        }
        let found = self.credit.read();
        if !self.window.update(found) && found != self.window.returned() {
            return Err(TxStalled::Credit {
                found,
                sent: self.window.sent(),
                returned: self.window.returned(),
            });
        }
        Ok(self.window.try_take())
    }

    /// The fast path's larger payloads (more than a slot holds, at most a
    /// frame) to a dedicated queue, after the credit was taken: gather
    /// `pieces` into the frame that goes with the credit's position (frame
    /// `pos & mask`, bound to this sender by the credit protocol, no
    /// shared-memory traffic) and publish a slot naming it. Out of line, so
    /// that the in-slot case keeps its registers.
    #[inline(never)]
    fn send_framed(&self, header: FragHeader, pieces: &[&[u8]]) {
        let pos = self.window.sent() - 1;
        let frame = (pos & (self.q.capacity() - 1)) as u32;
        gather_into_frame(&self.frames, frame, pieces, header.len as usize);
        self.q
            .publish_dedicated_with(pos, |b| fill_slot(b, header, frame, &[]));
    }
}

/// Settings of the shared-memory transport (all ranks of a host agree).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShmConfig {
    /// Receive queues per rank, `1 ..= local` (`FASTMSG_QUEUES`).
    pub queues: Option<u32>,
    /// Credits per (sender, receiver) pair, in frames (`FASTMSG_CREDITS`).
    pub credits: u32,
    /// Payload bytes per frame (`FASTMSG_FRAME_SIZE`).
    pub frame_size: u32,
    /// Send payloads of at most 28 bytes inside the slot (`FASTMSG_SHM_INLINE`).
    pub inline: bool,
}

impl Default for ShmConfig {
    fn default() -> Self {
        ShmConfig {
            queues: None,
            credits: 32,
            frame_size: 8192,
            inline: true,
        }
    }
}

/// The shared-memory transport of one rank.
#[derive(Debug)]
pub struct ShmTransport {
    me_smt: u32,
    world: u32,
    layout: Layout,
    inline: bool,
    /// How senders ring (doorbells off, or which fence), decided once.
    ringer: Ringer,
    rx: Vec<RxQueue>,
    next_rx: usize,
    /// Per receive queue: what it recycled ([`Recycled`]).
    recycled_at: Vec<Recycled>,
    /// Per source SMT id: what giving its credit back touches (one
    /// bounds check on the release path instead of three).
    sources: Vec<SourceBack>,
    tx: Vec<Option<TxPeer>>,
    /// Per global rank, dedicated queues: positions reserved
    /// (`try_reserve`) and not yet committed, whose stamps may still be
    /// the previous lap's (see `audit`). Kept apart from `TxPeer`: the
    /// whole-message fast path never touches it.
    open: Vec<u32>,
    smt_of_rank: Vec<u32>,
    /// Per global rank: (its SMT id, which of our queues it writes to), or
    /// `u32::MAX` twice if it is not on this host.
    peer_of_rank: Vec<(u32, u32)>,
    rank_of_smt: Vec<u32>,
    /// Per SMT id: the pid its rank recorded (as seen in *its* PID
    /// namespace: for messages only, never for liveness).
    pid_of_smt: Vec<u32>,
    /// Per SMT id: its lifeline (liveness, see [`liveness`]).
    lives: Vec<MapRef<LifeLine>>,
    gone: Vec<bool>,
    /// Per receive queue: the hole watch (see [`holes`]).
    holes: Vec<holes::HoleWatch>,
    /// What sends found corrupt in peers' queues, to report once each
    /// (`take_refusal`, after the alarm; `check_peers`).
    tx_corrupt: Vec<ProtocolError>,
    /// The queue this rank's sends to itself go through was found
    /// corrupt: reported by every `check_peers` (see `audit`).
    own_broken: Option<ProtocolError>,
    /// Why this rank left the job over a queue (its lifeline says
    /// `Left`), the first cause: see `audit::leave_over_queue` and
    /// `shared_send::abandon`. Every later wait reports it.
    left_over: Option<ProtocolError>,
    /// The endpoint's alarm word (set once the watchdog exists), raised
    /// when a send finds a peer gone or its queue corrupt: the next
    /// `extract` reads it, whichever call path the send took.
    alarm: Option<std::sync::Arc<crate::watch::Alarm>>,
    /// Our own armed lifeline, released (unlocked) on drop; the guard
    /// holds the mapping itself.
    life: LifeGuard,
    /// The segment, and with it (an `Arc`) the mapping every `'static`
    /// reference and raw pointer above points into. Those have no drop
    /// glue, and whatever else uses the mapping holds its own clone (the
    /// lifeline guard, the watchdog's probe, the waiter's doorbell, a
    /// network transport's window and doorbell), so the order in which
    /// this struct's fields, or the transports, are dropped does not
    /// matter.
    seg: Box<Segment>,
}

/// What the shared-memory transport needs to know about the job.
#[derive(Debug, Clone)]
pub struct ShmJob<'a> {
    /// Directory of the segment file (normally /dev/shm).
    pub dir: &'a Path,
    /// Job id (file-name safe).
    pub job: &'a str,
    /// Host key (distinguishes "hosts" that share /dev/shm).
    pub host: &'a str,
    /// Our global rank.
    pub rank: Rank,
    /// Ranks in the job.
    pub world: u32,
    /// Our rank among the ranks of this host.
    pub local_rank: u32,
    /// Ranks on this host.
    pub local_size: u32,
    /// Whether a sleeping wait policy is in use (senders ring doorbells).
    pub doorbells: bool,
    /// How long to wait for the segment and the other local ranks.
    pub timeout: Duration,
    /// Bytes of one-sided windows per rank (a multiple of 64).
    pub window_bytes: u64,
    /// Give up waiting for peers when set (another rank failed).
    pub abort: Option<&'a crate::sync::AtomicBool>,
}

impl ShmTransport {
    /// Create (local rank 0) or open the host's segment, attach, and wait
    /// for every local rank.
    ///
    /// # Errors
    /// Any [`SegmentError`].
    pub fn connect(job: &ShmJob<'_>, cfg: &ShmConfig) -> Result<ShmTransport, SegmentError> {
        let queues = cfg.queues.unwrap_or_else(|| default_queues(job.local_size));
        let params = Params {
            local: job.local_size,
            queues: queues.clamp(1, job.local_size.max(1)),
            credits: cfg.credits,
            frame_size: cfg.frame_size,
            doorbells: job.doorbells,
            window_bytes: job.window_bytes,
        };
        let path = segment::segment_path(job.dir, job.job, job.host);
        let mut seg = Box::new(if job.local_rank == 0 {
            Segment::create(&path, job.job, params)?
        } else {
            Segment::open(&path, job.job, params, job.timeout, job.abort)?
        });
        let me_smt = seg.attach(job.rank.0)?;
        // Arm our lifeline at once, from the thread that owns the endpoint:
        // from here on our death is visible to every peer (see `liveness`).
        // SAFETY: our own SMT id's line, unarmed in a fresh segment and
        // armed once, here; the guard keeps the mapping.
        let life =
            unsafe { LifeLine::arm(seg.life_ref(me_smt)) }.map_err(|e| SegmentError::Io {
                path: seg.path().to_path_buf(),
                op: e.call,
                source: std::io::Error::from_raw_os_error(e.errno),
            })?;
        tracing::debug!(
            "rank {} attached to shared segment {} as local id {me_smt}, lifeline armed",
            job.rank,
            seg.path().display()
        );
        let peers = seg
            .wait_all_attached(me_smt, job.timeout, job.abort)
            .map_err(|e| name_missing(e, job))?;
        wait_all_armed(&seg, me_smt, job.timeout, job.abort)?;
        let layout = *seg.layout();
        let mut smt_of_rank = vec![u32::MAX; job.world as usize];
        for (smt, &(rank, _)) in peers.iter().enumerate() {
            if rank >= job.world || smt_of_rank[rank as usize] != u32::MAX {
                return Err(SegmentError::TooLarge {
                    what: format!(
                        "SMT map entry {smt} names rank {rank}, which is out of range or taken twice"
                    ),
                });
            }
            smt_of_rank[rank as usize] = smt as u32;
        }
        let rank_of_smt: Vec<u32> = peers.iter().map(|p| p.0).collect();
        let pid_of_smt: Vec<u32> = peers.iter().map(|p| p.1).collect();
        // SAFETY: `seg` is boxed, so its address is stable; the box is moved
        // into the transport and never moved out. The references derived
        // from `seg_ref` point into the mapping, which the segment holds for
        // as long as the transport lives (see the `seg` field); they are
        // private and never handed out (what leaves the transport is a
        // view holding the mapping: `life_probe`, `doorbell_ref`,
        // `own_window`).
        let seg_ref: &'static Segment = unsafe { &*(&*seg as *const Segment) };
        let lives: Vec<MapRef<LifeLine>> = (0..layout.params.local)
            .map(|s| seg_ref.life_ref(s))
            .collect();
        let frames = |smt: u32, q: u32| ShmFrames {
            base: seg_ref
                .base()
                .wrapping_add(seg_ref.frames_offset(smt, q) as usize),
            stride: layout.frame_stride as usize,
            count: layout.slots,
            cap: layout.params.frame_size as usize,
        };
        let area = |smt: u32| seg_ref.window_view(smt);
        let mut rx = Vec::new();
        let mut recycled_at = Vec::new();
        for q in 0..layout.params.queues {
            let (tail, free_head) = seg_ref.queue_counters(me_smt, q);
            let shared = layout.is_shared(q);
            let queue = RecvQueue::new(seg_ref.slots(me_smt, q), tail, shared);
            rx.push(RxQueue {
                watch: queue.watch(0),
                q: queue,
                free_head,
                frames: frames(me_smt, q),
                head: 0,
                sole_sender: (!shared).then_some(q),
            });
            recycled_at.push(Recycled::new(&queue));
        }
        let mut tx: Vec<Option<TxPeer>> = (0..job.world).map(|_| None).collect();
        for (smt, &rank) in rank_of_smt.iter().enumerate() {
            let smt = smt as u32;
            let q = layout.queue_of_sender(me_smt);
            let (tail, free_head) = seg_ref.queue_counters(smt, q);
            tx[rank as usize] = Some(TxPeer {
                q: RecvQueue::new(seg_ref.slots(smt, q), tail, layout.is_shared(q)),
                free_head,
                frames: frames(smt, q),
                window: CreditWindow::new(layout.params.credits),
                credit: seg_ref.credit_line(smt, me_smt),
                bell: seg_ref.doorbell(smt),
                area: area(smt),
                life: lives[smt as usize].clone(),
            });
        }
        let local = layout.params.local as usize;
        let n_rx = rx.len();
        Ok(ShmTransport {
            me_smt,
            world: job.world,
            layout,
            inline: cfg.inline,
            // After the wait policy registered this process (see `Ringer`).
            ringer: Ringer::new(job.doorbells),
            rx,
            recycled_at,
            next_rx: 0,
            sources: (0..layout.params.local)
                .map(|s| SourceBack {
                    returns: CreditReturn::default(),
                    line: seg_ref.credit_line(me_smt, s),
                    bell: seg_ref.doorbell(s),
                })
                .collect(),
            open: vec![0; job.world as usize],
            tx,
            peer_of_rank: smt_of_rank
                .iter()
                .map(|&s| {
                    if s == u32::MAX {
                        (u32::MAX, u32::MAX)
                    } else {
                        (s, layout.queue_of_sender(s))
                    }
                })
                .collect(),
            smt_of_rank,
            rank_of_smt,
            pid_of_smt,
            lives,
            gone: vec![false; local],
            holes: vec![holes::HoleWatch::default(); n_rx],
            tx_corrupt: Vec::new(),
            own_broken: None,
            left_over: None,
            alarm: None,
            life,
            seg,
        })
    }

    /// The segment's layout.
    #[cfg_attr(not(feature = "internal"), allow(dead_code))]
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// This rank's own window area, keeping the mapping alive.
    pub(crate) fn own_window(&self) -> WindowView {
        self.seg.window_view(self.me_smt)
    }

    /// This rank's doorbell, keeping the mapping alive (for the waiter
    /// and a network transport's NIC).
    pub(crate) fn doorbell_ref(&self) -> MapRef<Doorbell> {
        self.seg.doorbell_ref(self.me_smt)
    }

    /// The global ranks on this host, in rank order.
    pub fn local_ranks(&self) -> Vec<Rank> {
        let mut v: Vec<Rank> = self.rank_of_smt.iter().map(|&r| Rank(r)).collect();
        v.sort();
        v
    }

    /// Our SMT id.
    #[cfg_attr(not(feature = "internal"), allow(dead_code))]
    pub fn smt_id(&self) -> u32 {
        self.me_smt
    }

    /// Give back what a popped entry holds: its slot (shared queues), its
    /// frame (shared queues), and the credit of its sender.
    #[inline]
    fn give_back(&mut self, qi: usize, frame: u32, pos: u64, src_smt: u32) {
        let rq = &mut self.rx[qi];
        if rq.q.is_shared() {
            if frame != NO_FRAME {
                FreeList::new(rq.free_head, &rq.frames).release(frame);
            }
            rq.q.recycle(pos);
            self.recycled_at[qi].note(pos);
        }
        self.credit_one(src_smt);
    }

    #[cold]
    fn reject(&mut self, qi: usize, pos: u64, p: &Popped, err: ProtocolError) -> ProtocolError {
        let rq = &self.rx[qi];
        let frame = if p.frame < rq.frames.count {
            p.frame
        } else {
            NO_FRAME
        };
        match rq.sole_sender {
            // Dedicated: the sender is certain, give its credit back.
            Some(sender) => self.give_back(qi, frame, pos, sender),
            // Shared: free the slot and frame; the credit of a sender that
            // cannot be named is lost with it.
            None => {
                if frame != NO_FRAME {
                    FreeList::new(rq.free_head, &rq.frames).release(frame);
                }
                rq.q.recycle(pos);
                self.recycled_at[qi].note(pos);
            }
        }
        err
    }

    /// Return one fragment's credit to `src_smt`: a store to a line only
    /// we write (it stays in our cache until the sender, short of credit,
    /// reads it). Batching these stores (publishing at half the window or
    /// at the end of a pass) was measured and dropped: more instructions
    /// per message, no gain in message rate (docs/engine.md, *Decisions*).
    #[inline]
    fn credit_one(&mut self, src_smt: u32) {
        let s = &mut self.sources[src_smt as usize];
        s.returns.release();
        s.line.publish(s.returns.released());
        self.ringer.ring(s.bell);
    }

    #[inline(always)]
    fn decode(&mut self, qi: usize, pos: u64, p: Popped) -> Result<RxFragment, ProtocolError> {
        let h = p.header;
        let cap = if p.frame == NO_FRAME {
            INLINE_BYTES
        } else {
            self.layout.params.frame_size as usize
        };
        if let Err(e) = h.check(self.world, cap) {
            return Err(self.reject(qi, pos, &p, e));
        }
        // `check` proved `src < world`, the length of the map.
        let (src_smt, src_queue) = self.peer_of_rank[h.src as usize];
        if src_queue != qi as u32 {
            let e = ProtocolError::WrongQueue {
                src: h.src,
                queue: qi as u32,
            };
            return Err(self.reject(qi, pos, &p, e));
        }
        let token = ReleaseToken {
            a: qi as u32,
            b: p.frame,
            src: src_smt,
            pos,
        };
        let rq = &self.rx[qi];
        let data = if p.frame == NO_FRAME {
            p.inline
        } else {
            let expected = if rq.q.is_shared() {
                p.frame
            } else {
                (pos & (rq.q.capacity() - 1)) as u32
            };
            if p.frame >= rq.frames.count || p.frame != expected {
                let e = ProtocolError::BadFrame {
                    src: h.src,
                    frame: p.frame,
                    count: rq.frames.count,
                };
                return Err(self.reject(qi, pos, &p, e));
            }
            rq.frames.payload(p.frame) as *const u8
        };
        // SAFETY: the payload (in the slot, or in a frame the slot names)
        // is held for us until release: the slot is neither recycled nor
        // its credit returned before then, and a frame's in-use flag stays
        // set (shared) or its position's credit unreturned (dedicated).
        // `len` was checked against the slot or frame capacity; the mapping
        // outlives the fragment (the engine drops fragments first).
        Ok(unsafe { RxFragment::new(h, token, data) })
    }
}

impl ShmTransport {
    /// The window area of `dest`, a live peer on this host (what on-host
    /// gets and remote atomics reach directly).
    pub(crate) fn peer_area(&self, dest: Rank) -> Result<WindowArea, PutError> {
        self.peer(dest).map(|p| *p.area)
    }

    /// As [`peer_area`](Self::peer_area), keeping the mapping alive (for
    /// a handle that outlives this call).
    pub(crate) fn peer_view(&self, dest: Rank) -> Result<WindowView, PutError> {
        self.peer(dest).map(|p| p.area.clone())
    }

    fn peer(&self, dest: Rank) -> Result<&TxPeer, PutError> {
        if self.is_gone(dest) {
            return Err(PutError::PeerGone { rank: dest });
        }
        self.tx
            .get(dest.index())
            .and_then(Option::as_ref)
            .ok_or(PutError::PeerGone { rank: dest })
    }
}

/// Shared queue: per slot, the position this rank last recycled there
/// (initially the slot's index one lap before position 0), so that the
/// audit knows whether the slot at the head still holds the previous
/// lap's fragment (see `audit`). Written on the shared release path only;
/// empty for a dedicated queue. Kept out of [`RxQueue`], whose lines the
/// empty poll reads.
#[derive(Debug)]
struct Recycled(Box<[u64]>);

impl Recycled {
    fn new(q: &RecvQueue<'_>) -> Recycled {
        let cap = q.capacity();
        Recycled(if q.is_shared() {
            (0..cap).map(|i| i.wrapping_sub(cap)).collect()
        } else {
            Box::default()
        })
    }

    /// This rank recycled position `pos`.
    #[inline(always)]
    fn note(&mut self, pos: u64) {
        let mask = self.0.len().wrapping_sub(1) as u64;
        if let Some(at) = self.0.get_mut((pos & mask) as usize) {
            *at = pos;
        }
    }

    /// Whether this rank still holds the fragment of the position one lap
    /// before `pos` (popped it, not yet released), on a queue of `cap`
    /// slots: then the slot of `pos` keeps that position's stamp.
    fn holds_lap_before(&self, pos: u64, cap: u64) -> bool {
        let prev = pos.wrapping_sub(cap);
        self.0
            .get((pos & (cap - 1)) as usize)
            .is_some_and(|&at| at != prev)
    }
}

impl RxQueue {
    /// Read the descriptor at the head, whose watch has just fired (its
    /// Acquire load published the slot, so the stamp is not loaded again),
    /// and move the head and the watch on.
    #[inline(always)]
    fn take_watched(&mut self) -> (u64, Popped) {
        let pos = self.head;
        let p = self.q.read_watched(pos, |b| Popped {
            header: b.header,
            frame: b.frame,
            inline: b.inline.as_ptr(),
        });
        self.head += 1;
        self.q.prefetch(pos + PREFETCH_AHEAD);
        self.watch = self.q.watch(self.head);
        (pos, p)
    }
}

/// Where every rank of the job is on this host, the ranks that never
/// attached are the job's ranks that did not: name them.
fn name_missing(mut e: SegmentError, job: &ShmJob<'_>) -> SegmentError {
    if let SegmentError::NotAttached { ranks, .. } = &mut e {
        if job.local_size == job.world {
            ranks.missing_ranks = Some(
                (0..job.world)
                    .filter(|r| ranks.attached.binary_search(r).is_err())
                    .collect(),
            );
        }
    }
    e
}

/// Wait until every local rank has armed its lifeline (each does right
/// after attaching), so that a rank that dies from now on is noticed.
fn wait_all_armed(
    seg: &Segment,
    me: u32,
    timeout: Duration,
    abort: Option<&crate::sync::AtomicBool>,
) -> Result<(), SegmentError> {
    let start = std::time::Instant::now();
    let mut gone = segment::GoneWatch::new(me);
    for smt in 0..seg.layout().params.local {
        let line = seg.life_line(smt);
        let backoff = crossbeam_utils::Backoff::new();
        while line.state() == Life::Unarmed {
            if abort.is_some_and(|a| a.load(crate::sync::Ordering::Relaxed)) {
                return Err(SegmentError::Aborted {
                    path: seg.path().to_path_buf(),
                });
            }
            gone.look(seg)?;
            if start.elapsed() > timeout {
                return Err(SegmentError::Timeout {
                    path: seg.path().to_path_buf(),
                    what: "every local rank to arm its lifeline",
                    waited: start.elapsed(),
                });
            }
            // Spin, then yield, then sleep between looks (as in
            // `Segment::wait_all_attached`).
            if backoff.is_completed() {
                std::thread::sleep(Duration::from_micros(200));
            } else {
                backoff.snooze();
            }
        }
    }
    Ok(())
}

/// The watchdog's view of the local peers' lifelines (see
/// [`ShmTransport::life_probe`]); it keeps the mapping alive.
pub(crate) struct LifeProbe {
    lines: Vec<(MapRef<LifeLine>, Life)>,
    /// Whether this rank reads a queue several ranks write (where a
    /// writer's death may leave a hole, see [`holes`]).
    shared: bool,
    /// When to raise the alarm once more after a death, so that the
    /// engine looks for a hole once [`holes::HOLE_GRACE`] has passed (a
    /// program that only polls makes no other look).
    recheck: Option<std::time::Instant>,
}

impl crate::watch::Probe for LifeProbe {
    fn look(&mut self) -> bool {
        let mut news = false;
        let now = std::time::Instant::now();
        for (line, seen) in &mut self.lines {
            let life = line.probe();
            if life != *seen {
                *seen = life;
                news |= life.is_gone();
                if matches!(life, Life::Dead | Life::Left) && self.shared {
                    self.recheck = Some(now + holes::HOLE_GRACE + crate::watch::WATCH_EVERY);
                }
            }
        }
        if self.recheck.is_some_and(|t| now >= t) {
            self.recheck = None;
            news = true;
        }
        news
    }
}

impl ShmTransport {
    /// A probe of every local peer's lifeline, for the endpoint's watchdog
    /// thread (it holds the mapping: it may outlive this transport).
    pub(crate) fn life_probe(&self) -> LifeProbe {
        let lines = (0..self.lives.len() as u32)
            .filter(|&s| s != self.me_smt)
            .map(|s| (self.lives[s as usize].clone(), Life::Alive))
            .collect();
        LifeProbe {
            lines,
            shared: self.rx.iter().any(|r| r.q.is_shared()),
            recheck: None,
        }
    }

    /// What every local peer's lifeline says now (the state words only,
    /// as the watchdog left them): (rank, verdict, recorded pid).
    pub(crate) fn peer_lives(&self) -> impl Iterator<Item = (Rank, Life, u32)> + '_ {
        (0..self.lives.len())
            .filter(move |&s| s as u32 != self.me_smt)
            .map(move |s| {
                (
                    Rank(self.rank_of_smt[s]),
                    self.lives[s].state(),
                    self.pid_of_smt[s],
                )
            })
    }

    /// The close barrier released this rank: leaving is orderly from now.
    pub(crate) fn set_closed(&mut self) {
        self.life.set_closed();
    }

    /// Whether this rank has closed (its close barrier released it).
    pub(crate) fn is_closed(&self) -> bool {
        self.life.is_closed()
    }

    /// Raise `alarm` whenever a send finds a peer gone or its queue
    /// corrupt (see [`take_refusal`](Self::take_refusal)).
    pub(crate) fn set_alarm(&mut self, alarm: std::sync::Arc<crate::watch::Alarm>) {
        self.alarm = Some(alarm);
    }

    /// What a send found corrupt in a peer's queue, once each; the alarm
    /// was raised when it was found.
    pub(crate) fn take_refusal(&mut self) -> Option<ProtocolError> {
        self.tx_corrupt.pop()
    }

    /// Why this rank left the job over a shared-memory queue, if it did
    /// (see `audit::leave_over_queue`): every later wait ends with it.
    pub(crate) fn left_over(&self) -> Option<&ProtocolError> {
        self.left_over.as_ref()
    }

    /// `rank` is gone (the engine learnt it): puts to it fail.
    pub(crate) fn mark_gone(&mut self, rank: Rank) {
        if let Some(&s) = self.smt_of_rank.get(rank.index()) {
            if s != u32::MAX {
                self.gone[s as usize] = true;
            }
        }
    }
}

/// How far ahead of the slot being taken the consumer prefetches.
const PREFETCH_AHEAD: u64 = 2;

/// What `pop` reads out of a slot: the header, the frame index, and where
/// the inline payload lies (in the slot itself, valid until release).
#[derive(Clone, Copy)]
struct Popped {
    header: FragHeader,
    frame: u32,
    inline: *const u8,
}

/// Default number of receive queues per rank: one per sender (dedicated,
/// single-producer queues) up to 16 ranks per host, then 16 shared queues,
/// which keeps the empty poll to at most 16 cached loads.
pub fn default_queues(local: u32) -> u32 {
    local.clamp(1, 16)
}

impl Transport for ShmTransport {
    #[inline(always)]
    fn poll(&mut self) -> Option<Result<RxFragment, ProtocolError>> {
        let n = self.rx.len();
        let mut qi = self.next_rx;
        for _ in 0..n {
            let rq = &mut self.rx[qi];
            if rq.watch.ready() {
                let (pos, p) = rq.take_watched();
                self.next_rx = if qi + 1 == n { 0 } else { qi + 1 };
                return Some(self.decode(qi, pos, p));
            }
            qi += 1;
            if qi == n {
                qi = 0;
            }
        }
        None
    }

    #[inline]
    fn has_arrivals(&self) -> bool {
        self.rx.iter().any(|r| r.watch.ready())
    }

    #[inline(always)]
    fn release(&mut self, token: &ReleaseToken) {
        if self.rx[token.a as usize].q.is_shared() {
            self.give_back(token.a as usize, token.b, token.pos, token.src);
        } else {
            // Dedicated queue: nothing to recycle, only credit to return.
            self.credit_one(token.src);
        }
    }

    #[inline]
    fn flush(&mut self) {
        // Credit is published at each release (see `credit_one`).
    }

    fn needs_flush(&self) -> bool {
        false
    }

    #[inline]
    fn try_reserve(&mut self, dest: Rank, remaining: u64) -> Option<TxFrame> {
        let inline_ok = self.inline;
        if self.is_gone(dest) {
            return None;
        }
        let peer = self.tx.get_mut(dest.index())?.as_mut()?;
        match peer.take_credit() {
            Ok(true) => {}
            Ok(false) => return None,
            Err(e) => {
                self.refuse(dest, e);
                return None;
            }
        }
        let pos = peer.window.sent() - 1;
        let use_inline = inline_ok && remaining <= INLINE_BYTES as u64;
        if peer.q.is_shared() {
            if use_inline {
                return Some(TxFrame::inline(dest, u64::from(NO_FRAME)));
            }
            let frame = self.claim_shared_frame(dest)?;
            let peer = self.tx.get(dest.index())?.as_ref()?;
            let ptr = peer.frames.payload(frame);
            // SAFETY: the free list gave us the frame (in-use flag set); it
            // is ours until the receiver releases it after our commit.
            Some(unsafe { TxFrame::external(dest, u64::from(frame), ptr, peer.frames.cap) })
        } else if use_inline {
            self.open[dest.index()] += 1;
            Some(TxFrame::inline(dest, pos))
        } else {
            self.open[dest.index()] += 1;
            let frame = (pos & (peer.q.capacity() - 1)) as u32;
            let ptr = peer.frames.payload(frame);
            // SAFETY: dedicated queue: frame `pos & mask` belongs to position
            // `pos`, whose credit we hold, so the receiver released its
            // previous use (SYNC POINT credit-return).
            Some(unsafe { TxFrame::external(dest, pos, ptr, peer.frames.cap) })
        }
    }

    #[inline]
    fn commit(&mut self, frame: TxFrame, header: FragHeader) {
        let Some(peer) = self.tx.get(frame.dest.index()).and_then(Option::as_ref) else {
            return;
        };
        let shared = peer.q.is_shared();
        if !shared {
            let open = &mut self.open[frame.dest.index()];
            *open = open.saturating_sub(1);
        }
        let (index, inline): (u32, &[u8]) = match frame.inline_data() {
            // The payload's bytes only (at most the inline bytes).
            Some(d) => (NO_FRAME, &d[..(header.len as usize).min(INLINE_BYTES)]),
            None if shared => (frame.token as u32, &[]),
            None => ((frame.token & (peer.q.capacity() - 1)) as u32, &[]),
        };
        let write = |b: &mut SlotBody| fill_slot(b, header, index, &[inline]);
        if !shared {
            peer.q.publish_dedicated_with(frame.token, write);
        } else {
            let mut own = shared_send::OwnLook::new(self);
            if let Err(e) = peer.publish_shared(write, &mut own) {
                // The fragment is lost with the receiver (or its corrupt
                // queue, or ours); the refusal is reported by the next
                // extract.
                let own = own.found;
                self.stalled(frame.dest, e, own);
                return;
            }
        }
        self.ringer.ring(peer.bell);
    }

    fn frame_capacity(&self) -> usize {
        self.layout.params.frame_size as usize
    }

    /// Every message that fits one frame takes the fast path: a payload
    /// of at most [`INLINE_BYTES`] rides in the slot, a larger one is
    /// copied straight into a frame (see `try_send_inline`).
    #[inline(always)]
    fn inline_max(&self) -> usize {
        self.layout.params.frame_size as usize
    }

    /// The whole-message fast path: no [`TxFrame`], no
    /// stream. A payload of at most [`INLINE_BYTES`] (with inline slots on)
    /// is gathered into the slot, the first and lightest case; a larger one
    /// (at most a frame, as the caller checked against `inline_max`) is
    /// gathered into a frame out of line (`TxPeer::send_framed`) and the
    /// slot names it.
    #[inline(always)]
    fn try_send_inline(&mut self, dest: Rank, header: FragHeader, pieces: &[&[u8]]) -> bool {
        let len = header.len as usize;
        debug_assert!(len <= self.inline_max(), "the caller checks inline_max");
        let in_slot = len <= INLINE_BYTES && self.inline;
        let ringer = self.ringer;
        let Some(peer) = self.tx.get_mut(dest.index()).and_then(Option::as_mut) else {
            return false;
        };
        match peer.take_credit() {
            Ok(true) => {}
            Ok(false) => return false,
            Err(e) => return self.refuse(dest, e),
        }
        if peer.q.is_shared() {
            return self.send_shared_taken(dest, header, pieces, in_slot);
        }
        if in_slot {
            let pos = peer.window.sent() - 1;
            peer.q
                .publish_dedicated_with(pos, |b| fill_slot(b, header, NO_FRAME, pieces));
        } else {
            peer.send_framed(header, pieces);
        }
        ringer.ring(peer.bell);
        true
    }

    fn check_peers(&mut self) -> Result<(), ExtractError> {
        // What sends found corrupt in peers' queues, once each (if the
        // engine has not taken it after the alarm already).
        if let Some(e) = self.take_refusal() {
            return Err(ExtractError::Protocol(e));
        }
        // Dedicated queues' head stamps from neither this lap nor the last
        // (`head_stamp_fault`); a shared queue's is judged once, first, in
        // the audit (`own_queue_fault`).
        for qi in 0..self.rx.len() {
            let rq = &self.rx[qi];
            if rq.watch.is_never() || rq.q.is_shared() {
                continue;
            }
            if let Some(e) = self.head_stamp_fault(qi) {
                self.take_out_of_service(qi, &e);
                return Err(ExtractError::Protocol(e));
            }
        }
        // Values the polls and sends do not judge (see `audit`).
        if let Some(e) = self.audit() {
            return Err(ExtractError::Protocol(e));
        }
        // A shared queue whose head a dead writer left claimed and empty.
        if let Some(e) = self.find_hole() {
            return Err(ExtractError::Protocol(e));
        }
        // Our own queue is broken: every wait ends (see `own_queue_broken`),
        // once the checks above have had their say.
        if let Some(e) = &self.own_broken {
            return Err(ExtractError::Protocol(e.clone()));
        }
        // Liveness is not asked here: the endpoint's watchdog probes the
        // lifelines (`life_probe`) and the engine reads their verdicts
        // (`peer_lives`).
        Ok(())
    }

    fn has_credit(&self, dest: Rank) -> bool {
        self.tx
            .get(dest.index())
            .and_then(Option::as_ref)
            .is_some_and(|p| {
                p.window.available() > 0
                    || p.credit.read() > p.window.sent() - u64::from(self.layout.params.credits)
            })
    }

    fn put(&mut self, dest: Rank, at: u64, data: &[u8]) -> Result<(), PutError> {
        let peer = self.peer(dest)?;
        peer.area.write(at, data);
        Ok(())
    }

    fn put_u64(&mut self, dest: Rank, at: u64, value: u64) -> Result<(), PutError> {
        let ringer = self.ringer;
        let peer = self.peer(dest)?;
        peer.area.store_u64(at, value);
        ringer.ring(peer.bell);
        Ok(())
    }

    fn is_gone(&self, dest: Rank) -> bool {
        match self.smt_of_rank.get(dest.index()) {
            Some(&s) if s != u32::MAX => self.gone[s as usize],
            _ => false,
        }
    }
}
