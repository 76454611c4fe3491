//! Receiving: carrying out what the receive state machine
//! (`super::engine::stream`) asks for — call or resume a handler, give
//! fragments back, hand a control message on — and the handles a handler
//! gets ([`Message`](crate::endpoint::Message), [`Piece`](crate::endpoint::Piece),
//! [`Ctx`](crate::endpoint::Ctx)): what each can do (the handles are
//! defined with the engine, which they hold).
//!
//! Promises: every message is delivered to its handler whole and in
//! order per source, or (when its sender failed mid-message) flagged
//! aborted, never padded; fragments go back to their transport in
//! arrival order per source.
//!
//! Its files import only down this table (`scripts/layers.py check`):
//!
//! ```text
//! layers:begin
//! dispatch | performing the receive state machine's actions
//! message  | the handles a handler gets
//! layers:end
//! ```

pub(super) mod dispatch;
pub(in crate::endpoint) mod message;
