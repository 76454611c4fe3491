//! Sending, as a program and a handler call it: the main thread's
//! streamed gather send ([`MessageWriter`](writer::MessageWriter)), the
//! bound on sends parked for credit, and direct remote memory (one-sided
//! `get` and remote atomics on the windows of ranks on this host).
//!
//! Promises: a send either goes out in order behind every earlier send to
//! its destination, or is parked (from a handler) or waits for credit
//! (from the main thread) — never lost, never reordered; parked bytes stay
//! below [`Config::max_parked`](crate::Config::max_parked) for sends made
//! outside handlers. The per-destination queues and streams themselves are
//! the engine's (`super::engine::net`).
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
