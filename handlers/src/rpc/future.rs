//! [`RpcFuture`]: the answer of one call, and the slots that hold the
//! answers of calls made with futures (reused, so a call allocates
//! nothing in the steady state).

use super::{Inner, RpcError};
use bytemuck::Pod;
use fastmsg::{Ctx, Rank};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// One future's slot.
enum Slot<Resp> {
    /// Free for the next call.
    Free,
    /// Waiting for the answer; the task to wake.
    Waiting(Option<Waker>),
    /// Answered, not yet taken.
    Done(Result<Resp, RpcError>),
    /// Its future was dropped: freed when the answer comes.
    Abandoned,
}

/// The slots of one call channel.
pub(crate) struct Slots<Resp> {
    slots: Vec<Slot<Resp>>,
    free: Vec<u32>,
}

impl<Resp> Default for Slots<Resp> {
    fn default() -> Self {
        Slots {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<Resp> Slots<Resp> {
    /// A slot for a call.
    pub(crate) fn open(&mut self) -> u32 {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot::Free);
                (self.slots.len() - 1) as u32
            }
        };
        self.slots[i as usize] = Slot::Waiting(None);
        i
    }

    /// The answer of slot `i` came.
    pub(crate) fn resolve(&mut self, i: u32, r: Result<Resp, RpcError>) {
        let Some(s) = self.slots.get_mut(i as usize) else {
            return;
        };
        match std::mem::replace(s, Slot::Free) {
            Slot::Waiting(w) => {
                *s = Slot::Done(r);
                if let Some(w) = w {
                    w.wake();
                }
            }
            Slot::Abandoned => self.free.push(i),
            other => *s = other,
        }
    }

    fn release(&mut self, i: u32) {
        if let Some(s) = self.slots.get_mut(i as usize) {
            *s = Slot::Free;
            self.free.push(i);
        }
    }
}

/// The answer of a call made with [`Rpc::call`](super::Rpc::call):
/// resolved by the engine's progress — any `extract`, wait, quiesce or
/// collective of the endpoint runs the response handler that resolves it.
/// Poll it with [`is_ready`](Self::is_ready) / [`take`](Self::take), or
/// `.await` it in an executor that also makes progress (it wakes the
/// task). If the owner is gone it resolves to [`RpcError::PeerGone`].
/// Dropping it before the answer comes is fine (the slot is freed then).
pub struct RpcFuture<Resp: Pod> {
    inner: Rc<Inner<Resp>>,
    ctx: Ctx,
    slot: u32,
    owner: Rank,
    /// The answer was taken (the slot may serve another call now).
    taken: std::cell::Cell<bool>,
}

impl<Resp: Pod> std::fmt::Debug for RpcFuture<Resp> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcFuture")
            .field("owner", &self.owner)
            .field("slot", &self.slot)
            .finish()
    }
}

impl<Resp: Pod> RpcFuture<Resp> {
    pub(crate) fn new(inner: Rc<Inner<Resp>>, ctx: Ctx, slot: u32, owner: Rank) -> Self {
        RpcFuture {
            inner,
            ctx,
            slot,
            owner,
            taken: std::cell::Cell::new(false),
        }
    }

    /// The owner this call went to.
    pub fn owner(&self) -> Rank {
        self.owner
    }

    /// Whether the answer (or an error) is here. Completes the calls
    /// waiting for a gone owner first, so a loop on this ends.
    pub fn is_ready(&self) -> bool {
        if self.taken.get() {
            return true;
        }
        let ready = |s: &Self| {
            matches!(
                s.inner.slots.borrow().slots.get(s.slot as usize),
                Some(Slot::Done(_))
            )
        };
        if ready(self) {
            return true;
        }
        if self.ctx.is_gone(self.owner) {
            self.inner.fail_gone(&self.ctx);
        }
        ready(self)
    }

    /// The answer, if it is here (once: later calls return `None`).
    pub fn take(&self) -> Option<Result<Resp, RpcError>> {
        if self.taken.get() || !self.is_ready() {
            return None;
        }
        let mut slots = self.inner.slots.borrow_mut();
        let s = slots.slots.get_mut(self.slot as usize)?;
        match std::mem::replace(s, Slot::Free) {
            Slot::Done(r) => {
                slots.release(self.slot);
                self.taken.set(true);
                Some(r)
            }
            other => {
                *s = other;
                None
            }
        }
    }
}

impl<Resp: Pod> Future for RpcFuture<Resp> {
    type Output = Result<Resp, RpcError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        assert!(!this.taken.get(), "RpcFuture polled after it completed");
        if let Some(r) = this.take() {
            return Poll::Ready(r);
        }
        let mut slots = this.inner.slots.borrow_mut();
        if let Some(Slot::Waiting(w)) = slots.slots.get_mut(this.slot as usize) {
            *w = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl<Resp: Pod> Drop for RpcFuture<Resp> {
    fn drop(&mut self) {
        if self.taken.get() {
            return;
        }
        let mut slots = self.inner.slots.borrow_mut();
        let Some(s) = slots.slots.get_mut(self.slot as usize) else {
            return;
        };
        match s {
            Slot::Waiting(..) => *s = Slot::Abandoned,
            Slot::Done(_) => slots.release(self.slot),
            _ => {}
        }
    }
}
