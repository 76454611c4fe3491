//! The engine: the state every call of the endpoint shares ([`Core`]
//! in `core`) and the parts it is made of — the send queues and routes
//! (`net`), the receive state machine (`stream`), the handler registry
//! (`handler`), the control messages and termination counting
//! (`control`, `control_op`, `termination`), what this rank knows of its
//! peers' failures (`health`) and the counters (`stats`).
//!
//! Promises: single-threaded (`Rc` + `RefCell`, one endpoint per
//! thread); progress happens only inside calls into the library; borrows
//! of its cells are short, so a handler polled by `extract` can send and
//! read its message while `extract` is between fragments.
//!
//! [`Core`]: core::Core

pub(crate) mod control;
pub(crate) mod control_op;
pub(crate) mod core;
pub(crate) mod handler;
pub(crate) mod health;
pub(crate) mod net;
pub(crate) mod stats;
pub(crate) mod stream;
pub(crate) mod termination;
