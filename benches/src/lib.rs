//! fastmsg's benchmark suite.
//!
//! - `benches/engine.rs` (criterion, `cargo bench -p fastmsg-benches`): the
//!   engine's building blocks in isolation — the empty `extract`, free-list
//!   claim + release, receive-queue publish + pop, fragment header check,
//!   credit return, and the frame copy strategies.
//! - `fmbench` (`src/bin/fmbench.rs`): the one command that runs the whole
//!   multi-process suite — fastmsg's `pingpong` example under `fmrun`,
//!   Open MPI and the raw cache-line ping-pong through the C programs of
//!   `benches/c/` (built by fmbench itself; the MPI ones only where `mpicc` and
//!   `mpirun` are installed), UCX's `ucx_perftest`, the empty-extract cost
//!   and the copy tuning — interleaved in rounds, and writes CSV, SVG plots
//!   and a Markdown report with its targets under `bench-results/`.
//! - `fmbench baseline`: one comparison program alone, its output printed
//!   (Open MPI latency, bandwidth, collectives, over TCP, oversubscribed;
//!   the raw ping-pong; memcpy; the MPI Bale kernels).
//! - `fmbench bale`: the Bale kernels (`histo`, `ig`, `permute`,
//!   `transpose` examples, natural
//!   code over aggregated active messages) beside the aggregated MPI
//!   programs, interleaved, medians and ratios ([`bale`]).
//!
//! Modules: [`suite`] (the list of measurements: adding a transport or a
//! collective is one entry there), [`fastmsg_run`] (runs fastmsg programs),
//! [`cbuild`] (builds the C comparison programs of `benches/c/`), [`anchor`] (runs
//! them and reads their output), [`ucx`]
//! (UCX's `ucx_perftest` over shared memory), [`report`]
//! (aggregation, CSV, Markdown, targets), [`plot`] (SVG), [`machine`],
//! [`child`] (child processes with a time limit), [`stats`], and [`copy`] —
//! fastmsg's frame-copy strategies and tuner (`fastmsg::internal::copy`),
//! so they can be measured and the plan stored from here.

pub mod anchor;
pub mod bale;
pub mod busy;
pub mod cbuild;
pub mod child;
pub use fastmsg::internal::copy;
pub mod fastmsg_run;
pub mod machine;
pub mod plot;
pub mod report;
pub mod stats;
pub mod suite;
pub mod ucx;
