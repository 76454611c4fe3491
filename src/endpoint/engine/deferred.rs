//! Errors kept for the next `extract`: what progress made on behalf of
//! something else (a send waiting for credit, a termination round, the
//! watchdog's alarm) found, and could not report where it found it.
//!
//! Promises: errors come out oldest first, each once; at most
//! [`MAX_DEFERRED`] are kept (a program that never calls `extract` again
//! must not grow without limit: the oldest, the causes, are kept); asking
//! when none is kept costs one load.

use crate::error::ExtractError;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

/// Errors kept for the next `extract` at most.
const MAX_DEFERRED: usize = 64;

/// The errors kept for the next `extract`.
#[derive(Debug, Default)]
pub(in crate::endpoint) struct Deferred {
    list: RefCell<VecDeque<ExtractError>>,
    /// Whether `list` is non-empty (checked on every extract).
    any: Cell<bool>,
}

impl Deferred {
    /// Keep `e` for the next `extract` (dropped past [`MAX_DEFERRED`]).
    pub(in crate::endpoint) fn push(&self, e: ExtractError) {
        let mut d = self.list.borrow_mut();
        if d.len() < MAX_DEFERRED {
            d.push_back(e);
        }
        self.any.set(true);
    }

    /// The oldest error kept.
    #[inline]
    pub(in crate::endpoint) fn take(&self) -> Option<ExtractError> {
        if !self.any.get() {
            return None;
        }
        let mut d = self.list.borrow_mut();
        let e = d.pop_front();
        self.any.set(!d.is_empty());
        e
    }
}
