//! The bound on parked sends (`FASTMSG_MAX_PARKED`, [`Config::max_parked`]).
//!
//! A send through [`Ctx`](crate::endpoint::Ctx) never waits for credit: what does
//! not fit is copied into the destination's pending queue. From a handler
//! that is what keeps handler floods deadlock-free; from the main loop of
//! a program that sends faster than a peer drains, it grew memory without
//! limit (628 MB per rank in issue 10's flood). So: once the parked bytes
//! pass the bound, a send made *outside* any handler or idle hook makes
//! progress — extracts, runs handlers, drains parked sends — until they
//! are back under it. A send from inside a handler or hook still never
//! blocks: it parks beyond the bound (those are answers to messages, and
//! blocking there could deadlock two ranks that answer each other).
//!
//! [`Config::max_parked`]: crate::endpoint::Config::max_parked

use crate::endpoint::engine::core::Core;
use crate::endpoint::wait::Waiter;
use crate::error::{ExtractError, SendError};
use std::rc::Rc;

impl Core {
    /// After a send parked something: if the parked bytes pass the bound
    /// and no handler or hook is running, make progress until they do not.
    ///
    /// # Errors
    /// [`SendError::Aborted`] if the job is aborted meanwhile. A peer's
    /// failure ends the wait (its parked sends are dropped) and is
    /// reported by the next `extract`.
    #[inline]
    pub(in crate::endpoint) fn relieve(self: &Rc<Self>) -> Result<(), SendError> {
        if self.net().borrow().parked_bytes() <= self.max_parked() || self.in_handler() {
            return Ok(());
        }
        self.relieve_slow()
    }

    #[cold]
    #[inline(never)]
    fn relieve_slow(self: &Rc<Self>) -> Result<(), SendError> {
        let mut waiter = Waiter::draining();
        let max = self.max_parked();
        while self.net().borrow().parked_bytes() > max {
            let mut ready = || self.net().borrow().parked_bytes() <= max;
            match self.progress_round(&mut waiter, &mut ready) {
                Ok(()) => {}
                Err(ExtractError::Aborted) => return Err(SendError::Aborted),
                Err(e) => {
                    // A failed peer (sticky: every wait reports it) or a
                    // hook's error: the next `extract` says so.
                    self.defer(e);
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}
