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
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

/// The user's completion: `(ctx, owner, token, result)`.
pub(crate) type Completion<R> = Box<dyn FnMut(&Ctx, Rank, u64, Result<R, RpcError>)>;

/// A completion held back while the callback runs: owner, token, result.
type Deferred<R> = (Rank, u64, Result<R, RpcError>);

/// The completion callback and the completions held back while it runs.
/// The callback sits in a `Cell` (taken out and put back: no borrow flag
/// to check per completion); `held` counts the deferred completions, so
/// that a completion with none waiting does not touch their queue.
pub(crate) struct Completer<R> {
    f: Cell<Option<Completion<R>>>,
    deferred: RefCell<VecDeque<Deferred<R>>>,
    held: Cell<usize>,
}

impl<R> Default for Completer<R> {
    fn default() -> Self {
        Completer {
            f: Cell::new(None),
            deferred: RefCell::new(VecDeque::new()),
            held: Cell::new(0),
        }
    }
}

impl<R> Completer<R> {
    /// Set (or replace) the callback. Set from inside the running
    /// callback, the new one takes over once the running one returns.
    pub(crate) fn set(&self, f: Completion<R>) {
        self.f.set(Some(f));
    }

    /// Hold back a completion that arrived while the callback runs.
    fn defer(&self, d: Deferred<R>) {
        self.deferred.borrow_mut().push_back(d);
        self.held.set(self.held.get() + 1);
    }

    /// The oldest completion held back, if any.
    #[inline]
    fn next_deferred(&self) -> Option<Deferred<R>> {
        if self.held.get() == 0 {
            return None;
        }
        self.held.set(self.held.get() - 1);
        self.deferred.borrow_mut().pop_front()
    }

    /// Put the callback `f` back after it ran, unless a newer one was set
    /// from inside it (the newer wins).
    #[inline]
    fn put_back(&self, f: Completion<R>) {
        let newer = self.f.take();
        self.f.set(Some(newer.unwrap_or(f)));
    }

    /// Complete the call `token` to `owner` with `r`: now, or after the
    /// running callback returns when this comes from inside it.
    #[inline]
    pub(crate) fn run(&self, ctx: &Ctx, owner: Rank, token: u64, r: Result<R, RpcError>) {
        let Some(mut f) = self.f.take() else {
            self.defer((owner, token, r));
            return;
        };
        f(ctx, owner, token, r);
        while let Some((o, t, r)) = self.next_deferred() {
            f(ctx, o, t, r);
        }
        self.put_back(f);
    }

    /// Hold the callback for a batch of completions (the answers of one
    /// response buffer): it is taken out once, not once per completion.
    /// Each completion still runs before the next, with any that arrived
    /// meanwhile run in between, and a callback set from inside takes over
    /// at the next completion, as with [`run`](Self::run).
    pub(crate) fn hold(&self) -> Held<'_, R> {
        let f = self.f.take();
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
        if let Some(newer) = self.c.f.take() {
            // Set from inside the callback (or none was held): the newer
            // one wins.
            self.f = Some(newer);
        }
        let Some(f) = self.f.as_mut() else {
            // Inside the running callback: it runs this one when it returns.
            self.c.defer((owner, token, r));
            return;
        };
        f(ctx, owner, token, r);
        while let Some((o, t, r)) = self.c.next_deferred() {
            f(ctx, o, t, r);
        }
    }
}

impl<R> Drop for Held<'_, R> {
    fn drop(&mut self) {
        if let Some(f) = self.f.take() {
            self.c.put_back(f);
        }
    }
}
