//! Pinned future slots per handler, reused from message to message.
//!
//! A handler's future is created in place in a `Pin<Box<Option<Fut>>>` slot
//! and polled there; when it completes the slot is emptied and kept for the
//! next message, so the steady state allocates nothing. A suspended future
//! stays in its slot and is polled again (`resume`) when more fragments of
//! its message arrive.

use super::HandlerResult;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// One of a handler's future slots (an index into its pool, not a handler
/// id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot(pub(crate) u32);

/// The outcome of starting or resuming a handler.
#[derive(Debug)]
pub(crate) enum Run {
    /// Finished with this result; the slot is free again.
    Done(HandlerResult),
    /// Suspended in this slot.
    Suspended(Slot),
}

/// A handler with its type erased; it gets context `C` and message `M`.
pub(crate) trait ErasedHandler<C, M> {
    /// Create the future for a new message and poll it once.
    fn start(&mut self, ctx: C, msg: M) -> Run;
    /// Poll the suspended future in `slot` again.
    fn resume(&mut self, slot: Slot) -> Run;
}

pub(crate) struct Pooled<F, Fut> {
    f: F,
    slots: Vec<Pin<Box<Option<Fut>>>>,
    free: Vec<Slot>,
}

impl<F, Fut> Pooled<F, Fut> {
    pub(crate) fn new(f: F) -> Self {
        Pooled {
            f,
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<F, Fut> Pooled<F, Fut>
where
    Fut: Future<Output = HandlerResult>,
{
    fn poll_slot(&mut self, slot: Slot) -> Run {
        let mut cx = Context::from_waker(Waker::noop());
        let s = &mut self.slots[slot.0 as usize];
        let Some(fut) = s.as_mut().as_pin_mut() else {
            return Run::Done(Ok(()));
        };
        match fut.poll(&mut cx) {
            Poll::Ready(r) => {
                s.set(None);
                self.free.push(slot);
                Run::Done(r)
            }
            Poll::Pending => Run::Suspended(slot),
        }
    }
}

impl<C, M, F, Fut> ErasedHandler<C, M> for Pooled<F, Fut>
where
    F: FnMut(C, M) -> Fut,
    Fut: Future<Output = HandlerResult>,
{
    fn start(&mut self, ctx: C, msg: M) -> Run {
        let fut = (self.f)(ctx, msg);
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(Box::pin(None));
                Slot((self.slots.len() - 1) as u32)
            }
        };
        self.slots[slot.0 as usize].set(Some(fut));
        self.poll_slot(slot)
    }

    fn resume(&mut self, slot: Slot) -> Run {
        self.poll_slot(slot)
    }
}
