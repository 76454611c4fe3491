//! The engine shared by an [`Endpoint`](super::Endpoint), its handlers'
//! [`Ctx`](super::Ctx) and [`Message`](super::Message) handles.
//!
//! Single-threaded (`Rc` + `RefCell`): an endpoint belongs to one thread,
//! and progress happens only inside calls into the library. Borrows of the
//! cells are kept short so that a handler polled by `extract` can send
//! (borrowing `net`) and read its message (borrowing `streams`) while
//! `extract` is between fragments.

use super::control::Control;
use super::net::Net;
use super::stream::{Accepted, SourceStream};
use super::wait::WaitConfig;
use super::{Ctx, Message};
use crate::error::ExtractError;
use crate::handler::pool::Run;
use crate::handler::Registry;
use crate::id::Rank;
use crate::transport::{RxFragment, Transport};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// What one `extract` call handled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extracted {
    /// Handlers started (new messages).
    pub messages: usize,
    /// Fragments taken from the transports.
    pub fragments: usize,
    /// Payload bytes taken from the transports.
    pub bytes: usize,
}

impl Extracted {
    /// Whether anything arrived.
    #[inline]
    pub fn any(&self) -> bool {
        self.fragments > 0
    }
}

/// Fragments taken from one transport before moving to the next.
const BATCH: usize = 32;

pub(crate) struct Core {
    pub(crate) rank: Rank,
    pub(crate) size: u32,
    pub(crate) handler_count: Cell<u32>,
    pub(crate) net: RefCell<Net>,
    pub(crate) streams: RefCell<Vec<SourceStream>>,
    pub(crate) registry: RefCell<Registry>,
    pub(crate) control: RefCell<Control>,
    deferred: RefCell<VecDeque<ExtractError>>,
    pub(crate) wait: WaitConfig,
    pub(crate) abort: Option<Arc<AtomicBool>>,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl Core {
    pub(crate) fn new(
        rank: Rank,
        size: u32,
        net: Net,
        registry: Registry,
        wait: WaitConfig,
        abort: Option<Arc<AtomicBool>>,
    ) -> Core {
        Core {
            rank,
            size,
            handler_count: Cell::new(registry.len()),
            net: RefCell::new(net),
            streams: RefCell::new((0..size).map(SourceStream::new).collect()),
            registry: RefCell::new(registry),
            control: RefCell::new(Control::new(size)),
            deferred: RefCell::new(VecDeque::new()),
            wait,
            abort,
        }
    }

    /// Report an error at the next `extract` (used where progress runs on
    /// behalf of a send).
    pub(crate) fn defer(&self, e: ExtractError) {
        self.deferred.borrow_mut().push_back(e);
    }

    /// The oldest error kept for the next `extract`.
    #[inline]
    pub(crate) fn take_deferred(&self) -> Option<ExtractError> {
        let mut d = self.deferred.borrow_mut();
        if d.is_empty() {
            None
        } else {
            d.pop_front()
        }
    }

    /// Poll every transport in turn and run handlers, until nothing more
    /// has arrived or `max_bytes` of payload were taken.
    pub(crate) fn progress(self: &Rc<Self>, max_bytes: usize) -> Result<Extracted, ExtractError> {
        let mut out = Extracted::default();
        {
            let mut net = self.net.borrow_mut();
            if net.has_pending() {
                net.drain_pending();
            }
        }
        let n = self.net.borrow().transports.len();
        let result = 'outer: loop {
            let before = out.fragments;
            for t in 0..n {
                for _ in 0..BATCH {
                    let polled = self.net.borrow_mut().transports[t].poll();
                    let mut frag = match polled {
                        None => break,
                        Some(Ok(f)) => f,
                        Some(Err(e)) => break 'outer Err(e.into()),
                    };
                    frag.transport = t as u8;
                    out.fragments += 1;
                    out.bytes += frag.header.len as usize;
                    if let Err(e) = self.deliver(frag, &mut out) {
                        break 'outer Err(e);
                    }
                    if out.bytes >= max_bytes {
                        break 'outer Ok(());
                    }
                }
            }
            if out.fragments == before {
                break Ok(());
            }
        };
        let mut net = self.net.borrow_mut();
        net.flush();
        if net.has_pending() {
            net.drain_pending();
        }
        result.map(|()| out)
    }

    /// Give a fragment back to the transport it came from.
    #[inline]
    pub(crate) fn release(&self, f: &RxFragment) {
        self.net.borrow_mut().transports[f.transport as usize].release(&f.token);
    }

    fn deliver(self: &Rc<Self>, frag: RxFragment, out: &mut Extracted) -> Result<(), ExtractError> {
        let src = frag.header.src;
        let accepted = {
            let mut streams = self.streams.borrow_mut();
            let handlers = self.handler_count.get();
            streams[src as usize].accept(frag, handlers, &mut |f| self.release(f))?
        };
        match accepted {
            Accepted::Nothing => Ok(()),
            Accepted::Start => {
                out.messages += 1;
                self.start_handler(src)
            }
            Accepted::Resume => self.resume_handler(src),
            Accepted::Control(op, payload) => {
                let reply = self
                    .control
                    .borrow_mut()
                    .on_message(Rank(src), op, &payload);
                match reply {
                    Ok(sends) => {
                        for (dest, op, payload) in sends {
                            self.send_control(dest, op, &payload);
                        }
                        Ok(())
                    }
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    /// Start the handler of `src`'s current message, then any messages
    /// queued behind it whose handlers finish at once.
    fn start_handler(self: &Rc<Self>, src: u32) -> Result<(), ExtractError> {
        loop {
            let (handler, seq, total) = {
                let mut streams = self.streams.borrow_mut();
                let Some(m) = streams[src as usize].current() else {
                    return Ok(());
                };
                (m.handler, m.seq, m.total)
            };
            let msg = Message::new(Rc::clone(self), Rank(src), seq, total, handler);
            let ctx = Ctx::new(Rc::clone(self));
            let run = self.registry.borrow_mut().entry(handler).start(ctx, msg);
            match self.after_run(src, handler, run)? {
                true => continue,
                false => return Ok(()),
            }
        }
    }

    fn resume_handler(self: &Rc<Self>, src: u32) -> Result<(), ExtractError> {
        let (handler, slot) = {
            let mut streams = self.streams.borrow_mut();
            match streams[src as usize].current() {
                Some(m) => match m.suspended {
                    Some(s) => (m.handler, s),
                    None => return Ok(()),
                },
                None => return Ok(()),
            }
        };
        let run = self.registry.borrow_mut().entry(handler).resume(slot);
        if self.after_run(src, handler, run)? {
            self.start_handler(src)?;
        }
        Ok(())
    }

    /// Record a handler's outcome. Returns whether a queued message of the
    /// same source became current (and must be started).
    fn after_run(&self, src: u32, handler: u32, run: Run) -> Result<bool, ExtractError> {
        let mut streams = self.streams.borrow_mut();
        let st = &mut streams[src as usize];
        match run {
            Run::Suspended(slot) => {
                if let Some(m) = st.current() {
                    m.suspended = Some(slot);
                }
                Ok(false)
            }
            Run::Done(result) => {
                let next = st.finish_current(&mut |f| self.release(f));
                match result {
                    Ok(()) => Ok(next),
                    Err(source) => {
                        drop(streams);
                        if next {
                            // The next message must still run: report the
                            // error after starting it, at the next extract.
                            let e = ExtractError::Handler {
                                src: Rank(src),
                                handler: self.registry.borrow().name(handler).to_owned(),
                                source,
                            };
                            self.defer(e);
                            return Ok(true);
                        }
                        Err(ExtractError::Handler {
                            src: Rank(src),
                            handler: self.registry.borrow().name(handler).to_owned(),
                            source,
                        })
                    }
                }
            }
        }
    }

    /// Send a small control message (never blocks; parks without credit).
    pub(crate) fn send_control(&self, dest: Rank, op: u32, payload: &[u8]) {
        let stream = super::net::OutStream::new(self.rank, dest, op, payload.len() as u64, true);
        self.net.borrow_mut().send_or_park(stream, &[payload]);
    }

    /// Check peers' liveness and the abort flag.
    pub(crate) fn check_health(&self) -> Result<(), ExtractError> {
        if let Some(a) = &self.abort {
            if a.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(ExtractError::Aborted);
            }
        }
        for t in &mut self.net.borrow_mut().transports {
            t.check_peers()?;
        }
        Ok(())
    }

    /// Drop handlers, in-flight futures and fragments (teardown).
    pub(crate) fn teardown(&self) {
        // Take the registry out first: dropping futures drops `Message`s,
        // which touch `streams`.
        let registry = std::mem::take(&mut *self.registry.borrow_mut());
        drop(registry);
        for s in self.streams.borrow_mut().iter_mut() {
            s.clear();
        }
    }
}
