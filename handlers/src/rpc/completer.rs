//! A completion callback that may be re-entered: the one place that runs
//! the user's completion of a call channel or of remote words.
//!
//! A completion may itself make calls, and a call whose owner is on this
//! host (or that fails at once) completes inside the running completion.
//! The callback is taken out of its cell while it runs; a completion that
//! arrives meanwhile waits in a queue and runs, in arrival order, after
//! the callback returns — never a second `borrow_mut` of the callback, so
//! never a panic.

use super::RpcError;
use fastmsg::{Ctx, Rank};
use std::cell::RefCell;
use std::collections::VecDeque;

/// The user's completion: `(ctx, owner, token, result)`.
pub(crate) type Completion<R> = Box<dyn FnMut(&Ctx, Rank, u64, Result<R, RpcError>)>;

/// A completion held back while the callback runs: owner, token, result.
type Deferred<R> = (Rank, u64, Result<R, RpcError>);

/// The completion callback and the completions held back while it runs.
pub(crate) struct Completer<R> {
    f: RefCell<Option<Completion<R>>>,
    deferred: RefCell<VecDeque<Deferred<R>>>,
}

impl<R> Default for Completer<R> {
    fn default() -> Self {
        Completer {
            f: RefCell::new(None),
            deferred: RefCell::new(VecDeque::new()),
        }
    }
}

impl<R> Completer<R> {
    /// Set (or replace) the callback. Set from inside the running
    /// callback, the new one takes over once the running one returns.
    pub(crate) fn set(&self, f: Completion<R>) {
        *self.f.borrow_mut() = Some(f);
    }

    /// Complete the call `token` to `owner` with `r`: now, or after the
    /// running callback returns when this comes from inside it.
    #[inline]
    pub(crate) fn run(&self, ctx: &Ctx, owner: Rank, token: u64, r: Result<R, RpcError>) {
        let taken = self.f.borrow_mut().take();
        let Some(mut f) = taken else {
            self.deferred.borrow_mut().push_back((owner, token, r));
            return;
        };
        f(ctx, owner, token, r);
        loop {
            let next = self.deferred.borrow_mut().pop_front();
            let Some((o, t, r)) = next else { break };
            f(ctx, o, t, r);
        }
        let mut slot = self.f.borrow_mut();
        // A new callback set from inside the old one wins.
        if slot.is_none() {
            *slot = Some(f);
        }
    }

    /// Hold the callback for a batch of completions (the answers of one
    /// response buffer): it is taken out once, not once per completion.
    /// Each completion still runs before the next, with any that arrived
    /// meanwhile run in between, and a callback set from inside takes over
    /// at the next completion, as with [`run`](Self::run).
    pub(crate) fn hold(&self) -> Held<'_, R> {
        let f = self.f.borrow_mut().take();
        Held { c: self, f }
    }
}

/// The callback taken out of its [`Completer`] for a batch; put back
/// when dropped.
pub(crate) struct Held<'a, R> {
    c: &'a Completer<R>,
    f: Option<Completion<R>>,
}

impl<R> Held<'_, R> {
    /// Complete the call `token` to `owner` with `r`.
    #[inline]
    pub(crate) fn run(&mut self, ctx: &Ctx, owner: Rank, token: u64, r: Result<R, RpcError>) {
        if self.c.f.borrow().is_some() {
            // Set from inside the callback (or none was held): the newer
            // one wins.
            self.f = self.c.f.borrow_mut().take();
        }
        let Some(f) = self.f.as_mut() else {
            // Inside the running callback: it runs this one when it returns.
            self.c.deferred.borrow_mut().push_back((owner, token, r));
            return;
        };
        f(ctx, owner, token, r);
        loop {
            let next = self.c.deferred.borrow_mut().pop_front();
            let Some((o, t, r)) = next else { break };
            f(ctx, o, t, r);
        }
    }
}

impl<R> Drop for Held<'_, R> {
    fn drop(&mut self) {
        if let Some(f) = self.f.take() {
            let mut slot = self.c.f.borrow_mut();
            // A new callback set from inside the old one wins.
            if slot.is_none() {
                *slot = Some(f);
            }
        }
    }
}
