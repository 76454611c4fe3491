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
use crate::endpoint::engine::handler::HandlerResult;
use crate::endpoint::Ctx;
use crate::error::ExtractError;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// An idle hook, type-erased.
pub(crate) type Hook = Box<dyn FnMut(&Ctx) -> HandlerResult>;

/// The hooks of one endpoint and their flag.
#[derive(Default)]
pub(crate) struct Hooks {
    list: RefCell<Vec<Hook>>,
    /// Some hook has work (raised by `Ctx::note_idle_work`).
    pub(crate) pending: Cell<bool>,
    /// Hooks are running (they do not nest).
    running: Cell<bool>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("count", &self.list.borrow().len())
            .field("pending", &self.pending.get())
            .finish()
    }
}

impl Hooks {
    pub(crate) fn new(list: Vec<Hook>) -> Self {
        Hooks {
            list: RefCell::new(list),
            ..Hooks::default()
        }
    }

    /// Whether hooks are running now.
    #[inline]
    pub(crate) fn running(&self) -> bool {
        self.running.get()
    }
}

impl Core {
    /// Run the idle hooks if the flag is up (and they are not running
    /// already).
    ///
    /// # Errors
    /// The first hook's error, as [`ExtractError::IdleHook`]; the hooks
    /// after it do not run this time (the flag is raised again for them).
    #[inline]
    pub(crate) fn idle_hooks(self: &Rc<Self>) -> Result<(), ExtractError> {
        if !self.hooks.pending.get() || self.hooks.running.get() {
            return Ok(());
        }
        self.run_hooks()
    }

    /// `extract` while the flag is up: a pass, then the hooks if it found
    /// nothing.
    #[cold]
    #[inline(never)]
    pub(crate) fn extract_then_hooks(
        self: &Rc<Self>,
        max_bytes: usize,
    ) -> Result<crate::endpoint::Extracted, ExtractError> {
        let x = self.progress(max_bytes)?;
        if !x.any() {
            self.idle_hooks()?;
        }
        Ok(x)
    }

    #[inline(never)]
    fn run_hooks(self: &Rc<Self>) -> Result<(), ExtractError> {
        let hooks = &self.hooks;
        hooks.pending.set(false);
        hooks.running.set(true);
        // Taken out while they run: a hook may reach the engine again.
        let mut list = std::mem::take(&mut *hooks.list.borrow_mut());
        let mut result = Ok(());
        for (i, h) in list.iter_mut().enumerate() {
            if let Err(source) = h(Ctx::from_core(self)) {
                if i + 1 < list.len() {
                    hooks.pending.set(true);
                }
                result = Err(ExtractError::IdleHook { source });
                break;
            }
        }
        *hooks.list.borrow_mut() = list;
        hooks.running.set(false);
        result
    }
}
