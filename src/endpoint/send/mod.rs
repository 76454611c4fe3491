//! Sending, as a program and a handler call it: the main thread's
//! streamed gather send ([`MessageWriter`](writer::MessageWriter)), the
//! bound on sends parked for credit, and direct remote memory (one-sided
//! `get` and remote atomics on the windows of ranks on this host).
//!
//! Promises: messages from this rank to one destination arrive in the
//! order their sends were issued, whoever issued them: the main thread,
//! a handler, an idle hook — including a handler that runs while a
//! main-thread send waits for credit or for its turn (what it sends to
//! the same destination leaves after that send). A send either goes out
//! at once, or is parked (a copy; from a handler or hook, never blocking),
//! or — from the main thread — takes its place in the destination's
//! pending order and waits (making progress) until the sends ahead of it
//! have left and credit allows, then is written in place from the
//! caller's buffers. Never lost, never reordered; parked bytes stay below
//! [`Config::max_parked`](crate::Config::max_parked) for sends made
//! outside handlers. The per-destination queues and the reservation
//! itself are the engine's (`super::engine::net`, "Order per
//! destination").
//!
//! Its files import only down this table (`scripts/layers.py check`):
//!
//! ```text
//! layers:begin
//! writer backpressure remote_memory | one call each, none uses another
//! layers:end
//! ```

pub(super) mod backpressure;
pub(super) mod remote_memory;
pub(super) mod writer;
