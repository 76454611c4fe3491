//! Termination rounds as a program calls them:
//! [`Endpoint::quiesce`](crate::Endpoint::quiesce) and the loop `close`
//! shares with it, and saying whom `close` waits for (stragglers). The
//! counting protocol itself and its messages are the engine's
//! (`super::engine::termination`, `super::engine::control`).
//!
//! Promises: a round returns once everything sent before it on every
//! rank, and everything handlers sent in response, has been handled; it
//! fails, rather than waits for ever, once a peer has failed; a rank kept
//! in `close` says whom it waits for.
//!
//! Its files import only down this table (`scripts/layers.py check`):
//!
//! ```text
//! layers:begin
//! quiesce straggle | the round loop; whom `close` waits for
//! layers:end
//! ```

pub(super) mod quiesce;
pub(super) mod straggle;
