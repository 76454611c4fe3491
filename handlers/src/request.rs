//! [`Request`]: the handle of a non-blocking collective.
//!
//! The collective progresses inside any `extract` (its messages go to the
//! registered handler, which combines and forwards); the request only
//! tells whether it has ended and hands over the result. Several may be
//! outstanding on one group, of the same or different collectives.
//! Dropping an unfinished request does not cancel the collective (peers
//! depend on it): it completes in the background and its result is
//! discarded.

use crate::engine::Engine;
use crate::error::CollError;
use fastmsg::Endpoint;
use std::marker::PhantomData;
use std::rc::Rc;

/// A non-blocking collective in progress; `T` is its result (`()` for a
/// barrier, `Vec<T>` otherwise).
#[must_use = "a request must be waited for to get its result (dropping it lets the collective finish unseen)"]
pub struct Request<T: 'static> {
    eng: Rc<Engine>,
    tag: u32,
    seq: u32,
    taken: bool,
    _t: PhantomData<fn() -> T>,
}

impl<T: 'static> std::fmt::Debug for Request<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("group", &self.tag)
            .field("seq", &self.seq)
            .finish()
    }
}

impl<T: 'static> Request<T> {
    pub(crate) fn new(eng: Rc<Engine>, tag: u32, seq: u32) -> Self {
        Request {
            eng,
            tag,
            seq,
            taken: false,
            _t: PhantomData,
        }
    }

    /// The instance number within its group.
    pub fn seq(&self) -> u32 {
        self.seq
    }

    /// Whether the collective has ended (no progress is made: the
    /// program's `extract` calls make it).
    pub fn is_complete(&self) -> bool {
        self.eng.finished(self.tag, self.seq)
    }

    /// Make one round of progress (`extract`), then tell whether the
    /// collective has ended.
    ///
    /// # Errors
    /// [`CollError::Extract`] if progress failed.
    pub fn test(&mut self, ep: &mut Endpoint) -> Result<bool, CollError> {
        if !self.is_complete() {
            ep.extract(usize::MAX)?;
        }
        Ok(self.is_complete())
    }

    /// Wait for the collective to end (making progress) and return its
    /// result.
    ///
    /// # Errors
    /// The collective's own error (a peer's bad message, a mismatch), or
    /// [`CollError::Extract`] if progress failed for another reason.
    pub fn wait(mut self, ep: &mut Endpoint) -> Result<T, CollError> {
        self.taken = true;
        let out = self.eng.wait(ep, self.tag, self.seq)?;
        match out.downcast::<T>() {
            Ok(v) => Ok(*v),
            Err(_) => unreachable!("a request's machine outputs its result type"),
        }
    }
}

impl<T: 'static> Drop for Request<T> {
    fn drop(&mut self) {
        if !self.taken {
            self.eng.detach(self.tag, self.seq);
        }
    }
}
