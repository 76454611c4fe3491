//! The engine: the state every call of the endpoint shares ([`Core`]
//! in `core`) and the parts it is made of — the send queues and routes
//! (`net`), the receive state machine (`stream`), the handler registry
//! (`handler`), the control messages and termination counting
//! (`control`, `control_op`, `termination`), what this rank knows of its
//! peers' failures (`health`), the errors kept for the next `extract`
//! (`deferred`), the idle hooks (`hooks`) and the counters (`stats`).
//! `Core` holds one of each and hands it out by an accessor; a room
//! changes a part only through that part's methods.
//!
//! Promises: single-threaded (`Rc` + `RefCell`, one endpoint per
//! thread); progress happens only inside calls into the library; borrows
//! of its cells are short, so a handler polled by `extract` can send and
//! read its message while `extract` is between fragments.
//!
//! [`Core`]: core::Core
//!
//! Its files import only down this table (`scripts/layers.py check`):
//!
//! ```text
//! layers:begin
//! core                                      | `Core`: the state every call shares, the
//!                                           | poll loop, failures and closing; the
//!                                           | handles `Ctx` and `Message`
//! net stream control                        | send queues and routes; the receive
//!                                           | state machine; the control messages
//!                                           | (start, rounds)
//! termination                               | the counting termination rounds
//! control_op hooks                          | control operations and their wire codes;
//!                                           | the idle hooks and their flag
//! handler health stats wait_policy deferred | the handler registry (generic over the
//!                                           | handles) and `Piece`; peers' failures;
//!                                           | the counters; the wait policy as
//!                                           | resolved at start; the errors kept for
//!                                           | the next `extract`
//! layers:end
//! ```

pub(crate) mod control;
pub(crate) mod control_op;
pub(in crate::endpoint) mod core;
pub(in crate::endpoint) mod deferred;
pub(crate) mod handler;
pub(in crate::endpoint) mod health;
pub(in crate::endpoint) mod hooks;
pub(in crate::endpoint) mod net;
pub(crate) mod stats;
pub(in crate::endpoint) mod stream;
pub(crate) mod termination;
pub(in crate::endpoint) mod wait_policy;
