//! The engine behind [`Collectives`](crate::Collectives): groups, live
//! instances, the early-message buffer, and the registered handler.
//!
//! One plain-function handler receives every collective message. A whole
//! message in one piece (every message up to a frame, ~8 KiB) is handled
//! in place; a longer one is assembled per source (pieces of one source
//! arrive in order, one message after another) and handled when its last
//! piece arrives. A message goes to the live instance its header names
//! (group tag, instance number); if this rank has not started that
//! instance yet, it is kept in the early buffer — bounded by
//! [`CollConfig::max_early_messages`] and `max_early_bytes`, past which it
//! is dropped with [`CollError::EarlyOverflow`] and the engine is poisoned
//! (the collective cannot finish; later calls say why) — and fed to the
//! instance, in arrival order, when the program starts it (NIC-REDUCE §III.A
//! and B: unexpected messages, several instances outstanding).
//!
//! Every message carries its call's signature ([`crate::sig`]; in groups
//! of more than 128 members a rooted collective's messages also carry the
//! full root); a message of another collective or with other arguments
//! fails the instance ([`CollError::Mismatch`], [`CollError::ArgsMismatch`]),
//! as does a message of the wrong length, or one for an instance that has
//! already ended here. An instance that fails here *aborts* it everywhere:
//! it sends every other member an abort message ([`Kind::Abort`], the error
//! in words), which fails the instance there too — whether it runs, has
//! ended with a result its request has not handed over yet, or has not
//! started yet (kept in the early buffer). No member waits for ever on one
//! that gave up.
//!
//! Poisoning. A member may have *returned* `Ok` from the failed instance
//! before anyone found the failure — a rooted collective whose part ended
//! there — and a one-sided failure leaves the epochs in doubt. Such a
//! failure (and an early-buffer overflow) poisons the engine: every
//! instance still running here fails ([`CollError::Poisoned`]) and is
//! aborted on its members, and every later call is *refused* — it fails
//! at once with `Poisoned`, naming the first failure, after taking the
//! instance number it would have taken and aborting that instance on every
//! member (so a member that started it does not wait for this rank). Aborts
//! from a poisoned rank say so (their `step` byte), and poison their
//! receivers too; a rank that had returned `Ok` is poisoned when the abort
//! of that instance reaches it. So after such a failure no member
//! completes another collective, except a call that ends before the news
//! reaches it (one that needs no message from the others: a broadcast's
//! root, a reduce's leaf); the call after it fails. Non-rooted message
//! collectives (barrier, allreduce, allgather) fail on every member within
//! the call, and poison nothing. One-sided collectives take an instance
//! number too, as a placeholder that no message may match, so a member
//! calling a message collective against them fails instead of hanging.
//!
//! Single-threaded like the endpoint: `RefCell` borrows are never held
//! across a call into the endpoint that could run handlers (`extract`,
//! `wait_until`); machines only send through `Ctx`, which never runs
//! handlers.

use crate::abort::{abort_text, aborted, cause, ABORT_FAILED, ABORT_GAVE_UP, ABORT_POISONED};
use crate::config::CollConfig;
use crate::error::CollError;
use crate::group::{tag_of, Group};
use crate::machine::{Io, Machine, Output};
use crate::sig::{check_message, root_tail, Call, Sig};
use crate::wire::{Header, Kind, HEADER};
use fastmsg::{Ctx, Endpoint, HandlerId, Rank, WindowId};
use std::cell::{OnceCell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

/// The one-sided call in progress on the world group: its instance
/// number (which no message may match: a member that calls a message
/// collective here fails it), what it is, and a failure a member reported.
struct OneSidedCall {
    seq: u32,
    kind: Kind,
    sig: Sig,
    /// Boxed: the call is set up and ended in a few nanoseconds, and a
    /// large inline error slows every move of it.
    failed: Option<Box<CollError>>,
}

/// State of a live instance.
enum State {
    Running,
    Done,
    Failed(CollError),
}

struct Live {
    seq: u32,
    machine: Box<dyn Machine>,
    state: State,
    /// Its request was dropped: remove it once it ends.
    detached: bool,
    /// This rank's call signature.
    sig: Sig,
    /// The root's full member index, where messages carry it (rooted
    /// collectives in groups of more than 128 members, see
    /// [`crate::sig`]).
    root: Option<u32>,
}

impl Live {
    /// This rank's side of the instance, which its messages must match.
    fn call(&self) -> Call {
        Call {
            kind: self.machine.kind(),
            sig: self.sig,
            root: self.root,
        }
    }
}

pub(crate) struct GroupState {
    pub(crate) group: Rc<Group>,
    next_seq: u32,
    live: Vec<Live>,
    /// World group: the one-sided call in progress, if any.
    one_sided: Option<OneSidedCall>,
}

impl GroupState {
    fn new(group: Rc<Group>) -> Self {
        GroupState {
            group,
            next_seq: 0,
            live: Vec::new(),
            one_sided: None,
        }
    }
}

/// A message for an instance not started yet.
struct Early {
    group: u32,
    seq: u32,
    kind: u8,
    sig: u16,
    step: u16,
    src: Rank,
    data: Vec<u8>,
}

#[derive(Default)]
struct Tables {
    world: Option<GroupState>,
    others: HashMap<u32, GroupState>,
    early: VecDeque<Early>,
    early_bytes: usize,
    /// How many groups with each member list this rank created.
    created: HashMap<Vec<Rank>, u32>,
    poisoned: Option<String>,
    /// Recently failed instances (group tag, number): their late messages
    /// are dropped quietly — the failure was reported already.
    failed: VecDeque<(u32, u32)>,
}

/// How many failed instances `Tables::failed` remembers.
const FAILED_KEPT: usize = 64;

impl Tables {
    fn note_failed(&mut self, tag: u32, seq: u32) {
        if self.failed.len() == FAILED_KEPT {
            self.failed.pop_front();
        }
        self.failed.push_back((tag, seq));
    }
}

impl Tables {
    fn group_mut(&mut self, tag: u32) -> Option<&mut GroupState> {
        if tag == 0 {
            self.world.as_mut()
        } else {
            self.others.get_mut(&tag)
        }
    }
}

/// Whether a signature is a one-sided call's placeholder.
fn one_sided(sig: u16) -> bool {
    (sig >> 14) as u8 == crate::sig::ONE_SIDED
}

/// Whether instance `a` comes before `b` (wrapping).
fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

pub(crate) struct Engine {
    pub(crate) me: Rank,
    pub(crate) size: u32,
    pub(crate) handler: OnceCell<HandlerId>,
    pub(crate) window: WindowId,
    pub(crate) cfg: CollConfig,
    t: RefCell<Tables>,
    /// One-sided state (window barriers and allreduce).
    pub(crate) one_sided: RefCell<crate::window::OneSided>,
    /// A blocking wait that lasts this long says what it waits for
    /// (`crate::stall`; the endpoint's `close_warn`).
    pub(crate) warn_after: std::time::Duration,
}

impl Engine {
    pub(crate) fn new(
        me: Rank,
        size: u32,
        window: WindowId,
        cfg: CollConfig,
        warn_after: std::time::Duration,
    ) -> Rc<Engine> {
        let world = Rc::new(Group::world(me, size));
        let t = Tables {
            world: Some(GroupState::new(world)),
            ..Tables::default()
        };
        Rc::new(Engine {
            me,
            size,
            handler: OnceCell::new(),
            window,
            cfg,
            t: RefCell::new(t),
            one_sided: RefCell::new(crate::window::OneSided::default()),
            warn_after,
        })
    }

    fn handler(&self) -> HandlerId {
        *self
            .handler
            .get()
            .expect("the handler id is set by Collectives::register")
    }

    pub(crate) fn world(&self) -> Rc<Group> {
        let t = self.t.borrow();
        Rc::clone(&t.world.as_ref().expect("world group").group)
    }

    /// Create (or find the next instance of) the group of `members`.
    pub(crate) fn subgroup(&self, members: &[Rank]) -> Result<Rc<Group>, CollError> {
        let mut t = self.t.borrow_mut();
        let nth = t.created.get(members).copied().unwrap_or(0);
        let tag = tag_of(members, nth);
        let g = Rc::new(Group::new(tag, self.me, self.size, members)?);
        if t.others.contains_key(&tag) {
            return Err(CollError::BadGroup(format!(
                "group tag {tag:#x} of {members:?} collides with an existing group; create the groups in another order"
            )));
        }
        t.created.insert(members.to_vec(), nth + 1);
        t.others.insert(tag, GroupState::new(Rc::clone(&g)));
        Ok(g)
    }

    /// The registered whole-message handler's body: one collective
    /// message (gathered by fastmsg if it spanned several frames; longer
    /// than `CollConfig::max_message_bytes` plus the header, it was
    /// refused there with `ReceiveError::TooLong`).
    pub(crate) fn on_message(&self, ctx: &Ctx, src: Rank, d: &[u8]) -> Result<(), CollError> {
        let h = Header::parse(src, d)?;
        self.dispatch(ctx, src, h, &d[HEADER..])
    }

    fn dispatch(&self, ctx: &Ctx, src: Rank, h: Header, data: &[u8]) -> Result<(), CollError> {
        let mut t = self.t.borrow_mut();
        let t = &mut *t;
        let handler = self.handler();
        if h.kind == Kind::Abort as u8 {
            if self.on_abort(ctx, t, src, h, data) {
                return Ok(());
            }
        } else if let Some(gs) = t.group_mut(h.group) {
            let group = &gs.group;
            let Some(from) = group.index(src) else {
                return Err(CollError::Unexpected {
                    group: h.group,
                    seq: h.seq,
                    kind: Kind::name_of(h.kind),
                    src,
                    step: h.step,
                    why: "the sender is not a member of the group",
                });
            };
            if let Some(call) = gs.one_sided.as_mut().filter(|c| c.seq == h.seq) {
                // A message for the instance a one-sided call took: the
                // sender runs a message collective here.
                if call.failed.is_some() {
                    return Ok(());
                }
                let e = if call.kind as u8 != h.kind {
                    CollError::Mismatch {
                        group: h.group,
                        seq: h.seq,
                        ours: call.kind.name(),
                        theirs: Kind::name_of(h.kind),
                        src,
                    }
                } else {
                    CollError::ArgsMismatch {
                        group: h.group,
                        seq: h.seq,
                        ours: call.sig.describe(call.kind as u8),
                        theirs: Sig(h.sig).describe(h.kind),
                        src,
                    }
                };
                call.failed = Some(Box::new(e.duplicate()));
                let (group, sig) = (Rc::clone(&gs.group), call.sig);
                t.note_failed(h.group, h.seq);
                self.abort_peers(ctx, &group, h.seq, sig, &e, ABORT_POISONED);
                self.poison(ctx, t, &e);
                return Err(e);
            }
            if let Some(i) = gs.live.iter().position(|l| l.seq == h.seq) {
                let live = &mut gs.live[i];
                let kind = live.machine.kind();
                if matches!(live.state, State::Failed(_)) {
                    // A late message of an instance that failed here: its
                    // failure was reported already.
                    return Ok(());
                }
                let ours = Call {
                    kind,
                    sig: live.sig,
                    root: live.root,
                };
                let r = match check_message(ours, group.n(), src, &h, data) {
                    Err(e) => Err(e),
                    Ok(_) if !matches!(live.state, State::Running) => Err(CollError::Unexpected {
                        group: h.group,
                        seq: h.seq,
                        kind: kind.name(),
                        src,
                        step: h.step,
                        why: "the instance had already finished here (do the members pass the same arguments?)",
                    }),
                    Ok(payload) => {
                        let io = Io {
                            ctx,
                            handler,
                            group,
                            seq: h.seq,
                            kind,
                            sig: live.sig,
                            base: 0,
                            tail: live.root.map(u32::to_le_bytes),
                        };
                        live.machine.on_message(&io, from, h.step, payload)
                    }
                };
                match r {
                    Ok(()) => {
                        if live.machine.is_done() {
                            live.state = State::Done;
                            if live.detached {
                                gs.live.swap_remove(i);
                            }
                        }
                        return Ok(());
                    }
                    Err(e) => {
                        // Running, or ended with a result not handed over
                        // yet: failed now (its request reports it). Where
                        // a member may have returned Ok (a rooted
                        // collective on either side) or the epochs may
                        // disagree (one-sided), the engine is poisoned.
                        live.state = State::Failed(e.duplicate());
                        let (group, sig) = (Rc::clone(&gs.group), live.sig);
                        t.note_failed(h.group, h.seq);
                        let poison = one_sided(sig.0)
                            || one_sided(h.sig)
                            || Kind::ends_early(kind as u8)
                            || Kind::ends_early(h.kind);
                        let step = if poison { ABORT_POISONED } else { ABORT_FAILED };
                        self.abort_peers(ctx, &group, h.seq, sig, &e, step);
                        if poison {
                            self.poison(ctx, t, &e);
                        }
                        return Err(e);
                    }
                }
            }
            if before(h.seq, gs.next_seq) {
                let group = Rc::clone(&gs.group);
                if t.poisoned.is_some() || t.failed.contains(&(h.group, h.seq)) {
                    // Its failure (or the engine's) was reported already.
                    return Ok(());
                }
                // It ended here with Ok and its result was handed over:
                // the sender disagrees (a rooted collective called with
                // other arguments, whose part here ended first). Every
                // member is told; this rank's next call reports it.
                let e = CollError::Unexpected {
                    group: h.group,
                    seq: h.seq,
                    kind: Kind::name_of(h.kind),
                    src,
                    step: h.step,
                    why: "the instance had already finished here (do the members pass the same arguments?)",
                };
                t.note_failed(h.group, h.seq);
                self.abort_peers(ctx, &group, h.seq, Sig(h.sig), &e, ABORT_POISONED);
                self.poison(ctx, t, &e);
                return Ok(());
            }
        }
        if t.poisoned.is_some() {
            // This rank will refuse that instance (and abort it on every
            // member): nothing to keep.
            return Ok(());
        }
        // Not started here yet: keep it, within bounds.
        let cfg = &self.cfg;
        if t.early.len() >= cfg.max_early_messages
            || t.early_bytes + data.len() > cfg.max_early_bytes
        {
            let e = CollError::EarlyOverflow {
                src,
                group: h.group,
                seq: h.seq,
                messages: t.early.len(),
                bytes: t.early_bytes,
                max_messages: cfg.max_early_messages,
                max_bytes: cfg.max_early_bytes,
            };
            self.poison(ctx, t, &e);
            return Err(e);
        }
        t.early_bytes += data.len();
        t.early.push_back(Early {
            group: h.group,
            seq: h.seq,
            kind: h.kind,
            sig: h.sig,
            step: h.step,
            src,
            data: data.to_vec(),
        });
        Ok(())
    }

    /// An abort from `src` for instance `h.seq` of `h.group` (its header
    /// carries the sender's signature, and in its step whether the
    /// sender's engine is poisoned): fail the instance if it runs or its
    /// result was not handed over yet. The engine is poisoned if the
    /// sender's is, if a one-sided or rooted call is involved, or if the
    /// instance had ended here with `Ok` (a rooted collective this rank
    /// finished its part of): this rank's next call then reports it. False
    /// if the instance has not started here: the abort is kept as an early
    /// message, and fails the instance when it starts.
    fn on_abort(&self, ctx: &Ctx, t: &mut Tables, src: Rank, h: Header, data: &[u8]) -> bool {
        let err = aborted(h.group, h.seq, src, h.step, data);
        let known_failed = t.failed.contains(&(h.group, h.seq));
        let poisoned = t.poisoned.is_some();
        let Some(gs) = t.group_mut(h.group) else {
            return poisoned;
        };
        let mut poison = one_sided(h.sig) || h.step != ABORT_FAILED;
        let mut failed_here = false;
        if let Some(call) = gs.one_sided.as_mut().filter(|c| c.seq == h.seq) {
            poison = true;
            call.failed.get_or_insert_with(|| Box::new(err.duplicate()));
        } else if let Some(live) = gs.live.iter_mut().find(|l| l.seq == h.seq) {
            poison |= one_sided(live.sig.0) || Kind::ends_early(live.machine.kind() as u8);
            // Running, or ended with a result nobody collected yet (a
            // request): its wait reports the abort.
            if !matches!(live.state, State::Failed(_)) {
                live.state = State::Failed(err.duplicate());
                failed_here = true;
            }
        } else if !before(h.seq, gs.next_seq) {
            // Not started here: kept, to fail the instance when it starts
            // (a poisoned engine refuses it anyway).
            return poisoned;
        } else if !known_failed {
            // It ended here with Ok and its result was handed over (a
            // rooted collective: this rank's part ended before a member
            // found the mismatch).
            poison = true;
        }
        if failed_here {
            t.note_failed(h.group, h.seq);
        }
        if poison {
            self.poison(ctx, t, &err);
        }
        true
    }

    /// Poison the engine with `e` (the first cause is kept): every later
    /// call is refused ([`Engine::refuse`]), and every instance still
    /// running here — on any group, the one-sided call included — fails
    /// now and is aborted on its members, who would otherwise wait for
    /// this rank. The aborts say that this rank is poisoned, so their
    /// receivers poison themselves too: after a failure that a member may
    /// not have seen (a rooted collective whose part ended there with
    /// `Ok`), no member completes another collective.
    fn poison(&self, ctx: &Ctx, t: &mut Tables, e: &CollError) {
        if t.poisoned.is_some() {
            return;
        }
        let why = cause(e);
        t.poisoned = Some(why.clone());
        // Kept for instances this rank will refuse: never fed now.
        t.early.clear();
        t.early_bytes = 0;
        let mut abandoned = Vec::new();
        for gs in t.world.iter_mut().chain(t.others.values_mut()) {
            for l in &mut gs.live {
                if matches!(l.state, State::Running) {
                    l.state = State::Failed(CollError::Poisoned(why.clone()));
                    abandoned.push((Rc::clone(&gs.group), l.seq, l.sig));
                }
            }
            // Nobody waits for a dropped request's failure.
            gs.live
                .retain(|l| !(l.detached && matches!(l.state, State::Failed(_))));
            if let Some(call) = gs.one_sided.as_mut().filter(|c| c.failed.is_none()) {
                call.failed = Some(Box::new(CollError::Poisoned(why.clone())));
                abandoned.push((Rc::clone(&gs.group), call.seq, call.sig));
            }
        }
        let e = CollError::Poisoned(why);
        for (group, seq, sig) in abandoned {
            t.note_failed(group.tag, seq);
            self.abort_peers(ctx, &group, seq, sig, &e, ABORT_GAVE_UP);
        }
    }

    /// The call on `group` that a poisoned engine refuses: it takes the
    /// instance number the call would have taken and aborts that instance
    /// on every member (a member that started it would otherwise wait for
    /// this rank); `None` if the engine is not poisoned.
    #[inline]
    fn refuse(&self, ctx: &Ctx, t: &mut Tables, tag: u32, sig: Sig) -> Option<CollError> {
        t.poisoned.as_ref()?;
        Some(self.refused(ctx, t, tag, sig))
    }

    #[cold]
    #[inline(never)]
    fn refused(&self, ctx: &Ctx, t: &mut Tables, tag: u32, sig: Sig) -> CollError {
        let why = t.poisoned.clone().unwrap_or_default();
        let gs = t.group_mut(tag).expect("a group handed out by this engine");
        let seq = gs.next_seq;
        gs.next_seq = seq.wrapping_add(1);
        let group = Rc::clone(&gs.group);
        t.note_failed(tag, seq);
        let e = CollError::Poisoned(why);
        self.abort_peers(ctx, &group, seq, sig, &e, ABORT_GAVE_UP);
        e
    }

    /// Refuse a one-sided call on the world if the engine is poisoned
    /// (see [`Engine::refuse`]).
    pub(crate) fn refuse_one_sided(&self, ctx: &Ctx) -> Result<(), CollError> {
        let mut t = self.t.borrow_mut();
        let sig = Sig::new(crate::sig::ONE_SIDED, 0, 0, None);
        match self.refuse(ctx, &mut t, 0, sig) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Tell every other member of `group` that instance `seq` failed here
    /// with `e`, `step` saying whether this engine is poisoned by it or
    /// gives the instance up ([`ABORT_FAILED`], [`ABORT_POISONED`],
    /// [`ABORT_GAVE_UP`]). Best effort: a member that cannot be reached has
    /// failed itself, which its peers learn from the endpoint.
    pub(crate) fn abort_peers(
        &self,
        ctx: &Ctx,
        group: &Group,
        seq: u32,
        sig: Sig,
        e: &CollError,
        step: u16,
    ) {
        let why = abort_text(e);
        let h = Header {
            group: group.tag,
            seq,
            step,
            kind: Kind::Abort as u8,
            sig: sig.0,
        }
        .emit();
        for &r in &group.members {
            if r != self.me {
                let _ = ctx.send(r, self.handler(), &[&h, why.as_bytes()]);
            }
        }
    }

    /// Start an instance of `machine` on `group`, called with signature
    /// `sig`; returns its number. A failure here aborts it on every member.
    pub(crate) fn start(
        &self,
        ctx: &Ctx,
        group: &Group,
        machine: Box<dyn Machine>,
        sig: Sig,
    ) -> Result<u32, CollError> {
        let handler = self.handler();
        let mut t = self.t.borrow_mut();
        let tables = &mut *t;
        if let Some(e) = self.refuse(ctx, tables, group.tag, sig) {
            return Err(e);
        }
        let gs = if group.tag == 0 {
            tables.world.as_mut()
        } else {
            tables.others.get_mut(&group.tag)
        }
        .expect("a group handed out by this engine");
        let seq = gs.next_seq;
        gs.next_seq = seq.wrapping_add(1);
        let n = gs.group.n();
        let root = if n > 128 { machine.root() } else { None };
        let mut live = Live {
            seq,
            machine,
            state: State::Running,
            detached: false,
            sig,
            root,
        };
        let kind = live.machine.kind();
        let io = Io {
            ctx,
            handler,
            group: &gs.group,
            seq,
            kind,
            sig,
            base: 0,
            tail: root_tail(n, root),
        };
        if let Err(e) = live.machine.start(&io) {
            let group = Rc::clone(&gs.group);
            self.abort_peers(ctx, &group, seq, sig, &e, ABORT_FAILED);
            // Its late messages are dropped quietly: reported already.
            tables.note_failed(group.tag, seq);
            return Err(e);
        }
        // Feed the messages that arrived before this call, in order. A bad
        // one fails the instance (its `wait` reports it), not the start;
        // it poisons the engine as in `dispatch` and `on_abort`.
        let mut result = Ok(());
        let mut poison = one_sided(sig.0) || Kind::ends_early(kind as u8);
        if !tables.early.is_empty() {
            let mut kept = VecDeque::with_capacity(tables.early.len());
            for e in tables.early.drain(..) {
                if e.group != group.tag || e.seq != seq {
                    kept.push_back(e);
                    continue;
                }
                tables.early_bytes -= e.data.len();
                if result.is_err() {
                    continue;
                }
                let h = Header {
                    group: e.group,
                    seq,
                    step: e.step,
                    kind: e.kind,
                    sig: e.sig,
                };
                poison |= one_sided(e.sig) || Kind::ends_early(e.kind);
                result = if e.kind == Kind::Abort as u8 {
                    poison |= e.step != ABORT_FAILED;
                    Err(aborted(group.tag, seq, e.src, e.step, &e.data))
                } else {
                    match check_message(live.call(), n, e.src, &h, &e.data) {
                        Err(e) => Err(e),
                        Ok(payload) => match gs.group.index(e.src) {
                            Some(from) => live.machine.on_message(&io, from, e.step, payload),
                            None => Err(io.unexpected(0, e.step, "sender not a member")),
                        },
                    }
                };
            }
            tables.early = kept;
        }
        let failed = match result {
            Err(e) => {
                if !matches!(e, CollError::Aborted { .. } | CollError::Poisoned(_)) {
                    let step = if poison { ABORT_POISONED } else { ABORT_FAILED };
                    self.abort_peers(ctx, &gs.group, seq, sig, &e, step);
                }
                let copy = e.duplicate();
                live.state = State::Failed(e);
                Some(copy)
            }
            Ok(()) => {
                if live.machine.is_done() {
                    live.state = State::Done;
                }
                None
            }
        };
        gs.live.push(live);
        if let Some(e) = failed {
            tables.note_failed(group.tag, seq);
            if poison {
                self.poison(ctx, tables, &e);
            }
        }
        Ok(seq)
    }

    /// Whether instance `seq` of group `tag` has ended (or is unknown).
    pub(crate) fn finished(&self, tag: u32, seq: u32) -> bool {
        let mut t = self.t.borrow_mut();
        match t.group_mut(tag) {
            Some(gs) => gs
                .live
                .iter()
                .find(|l| l.seq == seq)
                .is_none_or(|l| !matches!(l.state, State::Running)),
            None => true,
        }
    }

    /// Remove a finished instance and return its output or error; `None`
    /// if it is still running.
    pub(crate) fn collect(&self, tag: u32, seq: u32) -> Option<Result<Output, CollError>> {
        let mut t = self.t.borrow_mut();
        let Some(gs) = t.group_mut(tag) else {
            return Some(Err(CollError::NoInstance { seq }));
        };
        let Some(i) = gs.live.iter().position(|l| l.seq == seq) else {
            return Some(Err(CollError::NoInstance { seq }));
        };
        if matches!(gs.live[i].state, State::Running) {
            return None;
        }
        let mut live = gs.live.swap_remove(i);
        Some(match live.state {
            State::Failed(e) => Err(e),
            _ => Ok(live.machine.take_output()),
        })
    }

    /// The request for `seq` was dropped: forget it once it ends.
    pub(crate) fn detach(&self, tag: u32, seq: u32) {
        let mut t = self.t.borrow_mut();
        if let Some(gs) = t.group_mut(tag) {
            if let Some(i) = gs.live.iter().position(|l| l.seq == seq) {
                if matches!(gs.live[i].state, State::Running) {
                    gs.live[i].detached = true;
                } else {
                    gs.live.swap_remove(i);
                }
            }
        }
    }

    /// Wait (making progress) until instance `seq` ends; return its output.
    pub(crate) fn wait(&self, ep: &mut Endpoint, tag: u32, seq: u32) -> Result<Output, CollError> {
        if let Some(r) = self.collect(tag, seq) {
            return r;
        }
        let mut stall = crate::stall::StallWatch::new(self.warn_after);
        let waited = ep.wait_until(|| {
            self.finished(tag, seq) || {
                stall.tick(|| self.describe(tag, seq));
                false
            }
        });
        match self.collect(tag, seq) {
            Some(r) => r,
            None => Err(waited
                .err()
                .map_or(CollError::NoInstance { seq }, CollError::from)),
        }
    }

    /// What instance `seq` of group `tag` is, for the stall warning:
    /// `rank R has waited in <collective> #seq of <group> (N members,
    /// root R)`.
    fn describe(&self, tag: u32, seq: u32) -> String {
        let t = self.t.borrow();
        let gs = if tag == 0 {
            t.world.as_ref()
        } else {
            t.others.get(&tag)
        };
        let Some(gs) = gs else {
            return format!("rank {} has waited in collective #{seq}", self.me);
        };
        let g = &gs.group;
        let group = if g.is_world() {
            "the world group".to_string()
        } else {
            format!("group {tag}")
        };
        let (kind, root) = gs
            .live
            .iter()
            .find(|l| l.seq == seq)
            .map(|l| (l.machine.kind().name(), l.machine.root()))
            .unwrap_or(("collective", None));
        let root = root.map_or(String::new(), |i| format!(", root rank {}", g.rank(i)));
        format!(
            "rank {} has waited in {kind} #{seq} of {group} ({} members{root})",
            self.me,
            g.n()
        )
    }

    /// Take the next world instance number for a one-sided collective of
    /// `kind` called with `sig` (see [`OneSidedCall`]).
    ///
    /// # Errors
    /// A poisoned engine; a mismatch with a message that arrived early
    /// for that instance (then aborted on every member).
    #[inline]
    pub(crate) fn begin_one_sided(
        &self,
        ctx: &Ctx,
        kind: Kind,
        sig: Sig,
    ) -> Result<u32, CollError> {
        let mut t = self.t.borrow_mut();
        let tables = &mut *t;
        if let Some(e) = self.refuse(ctx, tables, 0, sig) {
            return Err(e);
        }
        let gs = tables.world.as_mut().expect("world group");
        let seq = gs.next_seq;
        gs.next_seq = seq.wrapping_add(1);
        let mut failed = None;
        if !tables.early.is_empty() {
            // Messages of this instance came early: each is a mismatch (or
            // an abort); the first decides.
            let mut kept = VecDeque::with_capacity(tables.early.len());
            for e in tables.early.drain(..) {
                if e.group != 0 || e.seq != seq {
                    kept.push_back(e);
                    continue;
                }
                tables.early_bytes -= e.data.len();
                failed.get_or_insert_with(|| {
                    if e.kind == Kind::Abort as u8 {
                        aborted(0, seq, e.src, e.step, &e.data)
                    } else if e.kind != kind as u8 {
                        CollError::Mismatch {
                            group: 0,
                            seq,
                            ours: kind.name(),
                            theirs: Kind::name_of(e.kind),
                            src: e.src,
                        }
                    } else {
                        CollError::ArgsMismatch {
                            group: 0,
                            seq,
                            ours: sig.describe(kind as u8),
                            theirs: Sig(e.sig).describe(e.kind),
                            src: e.src,
                        }
                    }
                });
            }
            tables.early = kept;
        }
        match failed {
            None => {
                gs.one_sided = Some(OneSidedCall {
                    seq,
                    kind,
                    sig,
                    failed: None,
                });
                Ok(seq)
            }
            Some(e) => {
                let group = Rc::clone(&gs.group);
                tables.note_failed(0, seq);
                if !matches!(e, CollError::Aborted { .. } | CollError::Poisoned(_)) {
                    self.abort_peers(ctx, &group, seq, sig, &e, ABORT_POISONED);
                }
                self.poison(ctx, tables, &e);
                Err(e)
            }
        }
    }

    /// Why the one-sided call `seq` failed meanwhile (a member aborted
    /// it, or a message collective met it), if it did.
    pub(crate) fn one_sided_failure(&self, seq: u32) -> Option<CollError> {
        let t = self.t.borrow();
        let call = t.world.as_ref()?.one_sided.as_ref()?;
        match &call.failed {
            Some(e) if call.seq == seq => Some(e.duplicate()),
            _ => None,
        }
    }

    /// Whether the one-sided call `seq` failed meanwhile (cheap).
    #[inline]
    pub(crate) fn one_sided_failed(&self, seq: u32) -> bool {
        let t = self.t.borrow();
        t.world
            .as_ref()
            .and_then(|gs| gs.one_sided.as_ref())
            .is_some_and(|c| c.seq == seq && c.failed.is_some())
    }

    /// End the one-sided call `seq` with `r`: a failure here aborts it on
    /// every member; a failure that came from a member wins. Any failure
    /// poisons the engine (the epoch counters may disagree now).
    #[inline]
    pub(crate) fn end_one_sided(
        &self,
        ctx: &Ctx,
        seq: u32,
        r: Result<(), CollError>,
    ) -> Result<(), CollError> {
        let call = {
            let mut t = self.t.borrow_mut();
            t.world.as_mut().and_then(|gs| gs.one_sided.take())
        };
        let Some(call) = call.filter(|c| c.seq == seq) else {
            return r;
        };
        if call.failed.is_none() && r.is_ok() {
            return Ok(());
        }
        self.one_sided_failed_end(ctx, seq, call, r)
    }

    #[cold]
    #[inline(never)]
    fn one_sided_failed_end(
        &self,
        ctx: &Ctx,
        seq: u32,
        call: OneSidedCall,
        r: Result<(), CollError>,
    ) -> Result<(), CollError> {
        let out = match (call.failed, r) {
            (Some(e), _) => Err(*e),
            (None, Ok(())) => return Ok(()),
            (None, Err(e)) => {
                self.abort_peers(ctx, &self.world(), seq, call.sig, &e, ABORT_POISONED);
                Err(e)
            }
        };
        if let Err(e) = &out {
            let mut t = self.t.borrow_mut();
            t.note_failed(0, seq);
            self.poison(ctx, &mut t, e);
        }
        out
    }

    /// Messages buffered for instances not started yet.
    pub(crate) fn early_len(&self) -> usize {
        self.t.borrow().early.len()
    }
}
