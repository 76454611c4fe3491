//! The idle hooks of one endpoint, as the engine keeps them: the list
//! registered on the builder and the idle-work flag. When they run, and
//! what a hook may do, is the waiting room's (`crate::endpoint::wait::hook`).

use crate::endpoint::engine::handler::HandlerResult;
use crate::error::ExtractError;
use std::cell::{Cell, RefCell};

/// An idle hook, type-erased, given the context `C` (the endpoint's
/// `Ctx`, named where the engine is: it holds the engine).
pub(in crate::endpoint) type Hook<C> = Box<dyn FnMut(&C) -> HandlerResult>;

/// The hooks of one endpoint and their flag.
pub(in crate::endpoint) struct Hooks<C> {
    list: RefCell<Vec<Hook<C>>>,
    /// Some hook has work (raised by `Ctx::note_idle_work`).
    pending: Cell<bool>,
    /// Hooks are running (they do not nest).
    running: Cell<bool>,
}

impl<C> std::fmt::Debug for Hooks<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("count", &self.list.borrow().len())
            .field("pending", &self.pending.get())
            .finish()
    }
}

impl<C> Hooks<C> {
    pub(in crate::endpoint) fn new(list: Vec<Hook<C>>) -> Self {
        Hooks {
            list: RefCell::new(list),
            pending: Cell::new(false),
            running: Cell::new(false),
        }
    }

    /// Raise the flag: some hook has work.
    #[inline]
    pub(in crate::endpoint) fn note_work(&self) {
        self.pending.set(true);
    }

    /// Whether the flag is up.
    #[inline(always)]
    pub(in crate::endpoint) fn has_work(&self) -> bool {
        self.pending.get()
    }

    /// Whether hooks are running now.
    #[inline]
    pub(in crate::endpoint) fn running(&self) -> bool {
        self.running.get()
    }

    /// Run every hook once with `ctx`, the flag lowered first; the first
    /// hook's error stops the pass (the flag is raised again for the hooks
    /// after it).
    ///
    /// # Errors
    /// The first hook's error, as [`ExtractError::IdleHook`].
    #[inline]
    pub(in crate::endpoint) fn run(&self, ctx: &C) -> Result<(), ExtractError> {
        self.pending.set(false);
        self.running.set(true);
        // Taken out while they run: a hook may reach the engine again.
        let mut list = std::mem::take(&mut *self.list.borrow_mut());
        let mut result = Ok(());
        for (i, h) in list.iter_mut().enumerate() {
            if let Err(source) = h(ctx) {
                if i + 1 < list.len() {
                    self.pending.set(true);
                }
                result = Err(ExtractError::IdleHook { source });
                break;
            }
        }
        *self.list.borrow_mut() = list;
        self.running.set(false);
        result
    }
}
