//! Idle hooks: work a library leaves for when the rank has nothing else
//! to do (an aggregation library's partly filled buffers, say).
//!
//! A hook is registered on the builder
//! ([`EndpointBuilder::on_idle`](crate::EndpointBuilder::on_idle)). It runs
//! whenever this rank waits for something to happen — every idle round of
//! [`wait_until`](crate::Endpoint::wait_until) (hence every blocking
//! collective of a library built on it), of
//! [`quiesce`](crate::Endpoint::quiesce) and of
//! [`close`](crate::Endpoint::close) — and when
//! [`extract`](crate::Endpoint::extract) finds nothing, but only while the
//! *idle-work flag* is raised ([`Ctx::note_idle_work`]): an empty
//! `extract` with the flag down pays one more load, nothing else. Waits
//! for the network to drain (a send waiting for credit, the parked-send
//! bound) do not run hooks: the rank is busy sending then, and a hook
//! flushing half-empty buffers would spend a frame of credit on a few
//! items.
//!
//! The engine lowers the flag before it runs the hooks; a hook that still
//! has work afterwards raises it again. A rank whose flag is up is not
//! quiescent: termination rounds wait for its hooks to run. Hooks do not
//! nest (a hook's send that makes progress runs no hook), and a send from
//! a hook never blocks (like a send from a handler).

use crate::endpoint::engine::core::Core;
use crate::endpoint::receive::message::Ctx;
use crate::error::ExtractError;
use std::rc::Rc;

impl Core {
    /// Run the idle hooks if the flag is up (and they are not running
    /// already).
    ///
    /// # Errors
    /// The first hook's error, as [`ExtractError::IdleHook`]; the hooks
    /// after it do not run this time (the flag is raised again for them).
    #[inline]
    pub(in crate::endpoint) fn idle_hooks(self: &Rc<Self>) -> Result<(), ExtractError> {
        if !self.hooks().has_work() || self.hooks().running() {
            return Ok(());
        }
        self.run_hooks()
    }

    /// `extract` while the flag is up: a pass, then the hooks if it found
    /// nothing.
    #[cold]
    #[inline(never)]
    pub(in crate::endpoint) fn extract_then_hooks(
        self: &Rc<Self>,
        max_bytes: usize,
    ) -> Result<crate::endpoint::engine::core::Extracted, ExtractError> {
        let x = self.progress(max_bytes)?;
        if !x.any() {
            self.idle_hooks()?;
        }
        Ok(x)
    }

    #[inline(never)]
    fn run_hooks(self: &Rc<Self>) -> Result<(), ExtractError> {
        self.hooks().run(Ctx::from_core(self))
    }
}
