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
//! Every message carries its call's signature ([`crate::sig`]); a message
//! of another collective or with other arguments fails the instance
//! ([`CollError::Mismatch`], [`CollError::ArgsMismatch`]), as does a
//! message of the wrong length. An instance that fails here *aborts* it
//! everywhere: it sends every other member an abort message ([`Kind::Abort`],
//! the error in words), which fails the instance there too — whether it
//! runs, has ended with a result its request has not handed over yet, has
//! not started yet (kept in the early buffer) or, on a rank that finished
//! its part of a rooted collective and returned `Ok`, has ended: that rank
//! learns it at its next collective call ([`CollError::Poisoned`], naming
//! the failure). No member waits for ever on one that gave up.
//! A failed or aborted instance poisons the engine: the members disagree
//! about which collective comes next, so later calls fail at once
//! ([`CollError::Poisoned`]), and the later instances running here (started
//! before the abort came) fail too, since poisoned members never call
//! them. (Members of *other* groups learn only through their own groups'
//! aborts, or when the poisoned rank ends.) One-sided collectives take an instance
//! number too, as a placeholder that no message may match, so a member
//! calling a message collective against them fails instead of hanging.
//!
//! Single-threaded like the endpoint: `RefCell` borrows are never held
//! across a call into the endpoint that could run handlers (`extract`,
//! `wait_until`); machines only send through `Ctx`, which never runs
//! handlers.

use crate::config::CollConfig;
use crate::error::CollError;
use crate::group::{tag_of, Group};
use crate::machine::{Io, Machine, Output};
use crate::sig::{root_tail, split_root, Sig};
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
    /// Instance `seq` of group `tag` failed with `e` (here, or on a member
    /// that aborted it): poison the engine — later calls fail at once —
    /// and fail the later instances running here, which wait for members
    /// that, poisoned too, will never call them.
    fn poison(&mut self, tag: u32, seq: u32, e: &CollError) {
        let why = self.poisoned.get_or_insert_with(|| e.to_string()).clone();
        let Some(gs) = self.group_mut(tag) else {
            return;
        };
        let mut newly = Vec::new();
        for l in &mut gs.live {
            if before(seq, l.seq) && matches!(l.state, State::Running) {
                l.state = State::Failed(CollError::Poisoned(why.clone()));
                newly.push(l.seq);
            }
        }
        // Nobody waits for a dropped request's failure.
        gs.live
            .retain(|l| !(l.detached && matches!(l.state, State::Failed(_))));
        for s in newly {
            self.note_failed(tag, s);
        }
    }

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

/// The longest error text an abort message carries.
const MAX_WHY: usize = 400;

/// The error an abort message from `by` stands for.
fn aborted(group: u32, seq: u32, by: Rank, data: &[u8]) -> CollError {
    CollError::Aborted {
        group,
        seq,
        by,
        why: String::from_utf8_lossy(&data[..data.len().min(MAX_WHY)]).into_owned(),
    }
}

/// This rank's side of an instance, which every message of it must match.
#[derive(Clone, Copy)]
struct Call {
    kind: Kind,
    sig: Sig,
    /// The root's full member index, where messages carry it.
    root: Option<u32>,
}

impl Live {
    fn call(&self) -> Call {
        Call {
            kind: self.machine.kind(),
            sig: self.sig,
            root: self.root,
        }
    }
}

/// Check a message from `src` (header `h`, payload `data`) of a group of
/// `n` members against this rank's call: the same collective, signature
/// and root. Returns the payload without the root it carries, if any.
fn check_message<'d>(
    ours: Call,
    n: u32,
    src: Rank,
    h: &Header,
    data: &'d [u8],
) -> Result<&'d [u8], CollError> {
    if ours.kind as u8 != h.kind {
        return Err(CollError::Mismatch {
            group: h.group,
            seq: h.seq,
            ours: ours.kind.name(),
            theirs: Kind::name_of(h.kind),
            src,
        });
    }
    let Some((payload, root)) = split_root(h.kind, n, data) else {
        return Err(CollError::ShortMessage {
            src,
            len: HEADER + data.len(),
            need: HEADER + 4,
        });
    };
    if ours.sig.0 != h.sig || ours.root != root {
        return Err(CollError::ArgsMismatch {
            group: h.group,
            seq: h.seq,
            ours: ours.sig.describe_root(h.kind, ours.root),
            theirs: Sig(h.sig).describe_root(h.kind, root),
            src,
        });
    }
    Ok(payload)
}

/// Whether a signature is a one-sided call's placeholder.
fn one_sided(sig: u16) -> bool {
    (sig >> 14) as u8 == crate::sig::ONE_SIDED
}

/// The `step` of an abort message whose sender's engine is poisoned: the
/// receiver poisons its own (the sender will call no later collective).
const ABORT_POISONED: u16 = 1;

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
}

impl Engine {
    pub(crate) fn new(me: Rank, size: u32, window: WindowId, cfg: CollConfig) -> Rc<Engine> {
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
        let handler = self.handler();
        if h.kind == Kind::Abort as u8 {
            if self.on_abort(&mut t, src, h, data) {
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
                t.poison(h.group, h.seq, &e);
                t.note_failed(h.group, h.seq);
                self.abort_peers(ctx, &group, h.seq, sig, &e, true);
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
                let n = group.n();
                let r = match check_message(live.call(), n, src, &h, data) {
                    Err(e) => Err(e),
                    Ok(_) if !matches!(live.state, State::Running) => Err(CollError::Unexpected {
                        group: h.group,
                        seq: h.seq,
                        kind: kind.name(),
                        src,
                        step: h.step,
                        why: "the instance has already finished",
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
                        // yet (a rooted collective's part): failed now.
                        // Where a member may have ended its part with Ok
                        // (rooted) or the epochs may disagree (one-sided),
                        // the engine is poisoned.
                        live.state = State::Failed(e.duplicate());
                        let (group, sig) = (Rc::clone(&gs.group), live.sig);
                        if one_sided(sig.0)
                            || one_sided(h.sig)
                            || Kind::is_rooted(kind as u8)
                            || Kind::is_rooted(h.kind)
                        {
                            t.poison(h.group, h.seq, &e);
                        }
                        t.note_failed(h.group, h.seq);
                        let poisoned = t.poisoned.is_some();
                        self.abort_peers(ctx, &group, h.seq, sig, &e, poisoned);
                        return Err(e);
                    }
                }
            }
            if before(h.seq, gs.next_seq) {
                let group = Rc::clone(&gs.group);
                if t.failed.contains(&(h.group, h.seq)) {
                    return Ok(());
                }
                // It ended here with Ok and its result was handed over:
                // the sender disagrees (a rooted collective called with
                // other arguments, whose part here ended first). Its
                // members are told, and this rank's next call reports it.
                let e = CollError::Unexpected {
                    group: h.group,
                    seq: h.seq,
                    kind: Kind::name_of(h.kind),
                    src,
                    step: h.step,
                    why: "the instance had already finished here (do the members pass the same arguments?)",
                };
                t.note_failed(h.group, h.seq);
                t.poison(h.group, h.seq, &e);
                self.abort_peers(ctx, &group, h.seq, Sig(h.sig), &e, true);
                return Ok(());
            }
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
            t.poisoned.get_or_insert_with(|| e.to_string());
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
    fn on_abort(&self, t: &mut Tables, src: Rank, h: Header, data: &[u8]) -> bool {
        let err = aborted(h.group, h.seq, src, data);
        let known_failed = t.failed.contains(&(h.group, h.seq));
        let Some(gs) = t.group_mut(h.group) else {
            return false;
        };
        let mut poison = one_sided(h.sig) || h.step == ABORT_POISONED;
        let mut failed_here = false;
        if let Some(call) = gs.one_sided.as_mut().filter(|c| c.seq == h.seq) {
            poison = true;
            call.failed.get_or_insert_with(|| Box::new(err.duplicate()));
        } else if let Some(live) = gs.live.iter_mut().find(|l| l.seq == h.seq) {
            poison |= one_sided(live.sig.0) || Kind::is_rooted(live.machine.kind() as u8);
            // Running, or ended with a result nobody collected yet (a
            // request): its wait reports the abort.
            if !matches!(live.state, State::Failed(_)) {
                live.state = State::Failed(err.duplicate());
                failed_here = true;
            }
        } else if !before(h.seq, gs.next_seq) {
            return false;
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
            t.poison(h.group, h.seq, &err);
        }
        true
    }

    /// Tell every other member of `group` that instance `seq` failed here
    /// with `e` (best effort: a member that cannot be reached has failed
    /// itself, which its peers learn from the endpoint).
    pub(crate) fn abort_peers(
        &self,
        ctx: &Ctx,
        group: &Group,
        seq: u32,
        sig: Sig,
        e: &CollError,
        poisoned: bool,
    ) {
        let mut why = e.to_string();
        if why.len() > MAX_WHY {
            let mut cut = MAX_WHY;
            while !why.is_char_boundary(cut) {
                cut -= 1;
            }
            why.truncate(cut);
        }
        let h = Header {
            group: group.tag,
            seq,
            step: if poisoned { ABORT_POISONED } else { 0 },
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

    /// Fail if an earlier failure made the engine unusable.
    pub(crate) fn check_poisoned(&self) -> Result<(), CollError> {
        match &self.t.borrow().poisoned {
            Some(why) => Err(CollError::Poisoned(why.clone())),
            None => Ok(()),
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
        self.check_poisoned()?;
        let handler = self.handler();
        let mut t = self.t.borrow_mut();
        let tables = &mut *t;
        let gs = if group.tag == 0 {
            tables.world.as_mut()
        } else {
            tables.others.get_mut(&group.tag)
        }
        .expect("a group handed out by this engine");
        let seq = gs.next_seq;
        gs.next_seq = seq.wrapping_add(1);
        let n = gs.group.n();
        let root = machine.root().filter(|_| n > 128);
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
            self.abort_peers(ctx, &group, seq, sig, &e, false);
            return Err(e);
        }
        // Feed the messages that arrived before this call, in order. A bad
        // one fails the instance (its `wait` reports it), not the start;
        // it poisons the engine as in `dispatch` and `on_abort`.
        let mut result = Ok(());
        let mut poison = one_sided(sig.0) || Kind::is_rooted(kind as u8);
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
                poison |= one_sided(e.sig) || Kind::is_rooted(e.kind);
                result = if e.kind == Kind::Abort as u8 {
                    poison |= e.step == ABORT_POISONED;
                    Err(aborted(group.tag, seq, e.src, &e.data))
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
        match result {
            Err(e) => {
                if poison {
                    tables.poisoned.get_or_insert_with(|| e.to_string());
                }
                if !matches!(e, CollError::Aborted { .. }) {
                    let poisoned = tables.poisoned.is_some();
                    self.abort_peers(ctx, &gs.group, seq, sig, &e, poisoned);
                }
                live.state = State::Failed(e);
                tables.failed.push_back((group.tag, seq));
                if tables.failed.len() > FAILED_KEPT {
                    tables.failed.pop_front();
                }
            }
            Ok(()) if live.machine.is_done() => live.state = State::Done,
            Ok(()) => {}
        }
        gs.live.push(live);
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
        let waited = ep.wait_until(|| self.finished(tag, seq));
        match self.collect(tag, seq) {
            Some(r) => r,
            None => Err(waited
                .err()
                .map_or(CollError::NoInstance { seq }, CollError::from)),
        }
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
        self.check_poisoned()?;
        let mut t = self.t.borrow_mut();
        let tables = &mut *t;
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
                        aborted(0, seq, e.src, &e.data)
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
                tables.poisoned.get_or_insert_with(|| e.to_string());
                tables.note_failed(0, seq);
                drop(t);
                if !matches!(e, CollError::Aborted { .. }) {
                    self.abort_peers(ctx, &group, seq, sig, &e, true);
                }
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
                self.abort_peers(ctx, &self.world(), seq, call.sig, &e, true);
                Err(e)
            }
        };
        if let Err(e) = &out {
            let mut t = self.t.borrow_mut();
            t.poisoned.get_or_insert_with(|| e.to_string());
            t.note_failed(0, seq);
        }
        out
    }

    /// Messages buffered for instances not started yet.
    pub(crate) fn early_len(&self) -> usize {
        self.t.borrow().early.len()
    }
}
