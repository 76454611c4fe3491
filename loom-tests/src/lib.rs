//! Loom models of fastmsg's lock-free code.
//!
//! The models drive the very source files that ship —
//! [`fastmsg::internal::queue`], [`fastmsg::internal::ring`],
//! [`fastmsg::internal::flow`], [`fastmsg::internal::wake`],
//! [`fastmsg::internal::window`], [`fastmsg::internal::link`],
//! [`fastmsg::internal::lazy_pairs`], the ring placement count in
//! [`fastmsg::internal::ring`] — compiled
//! against loom's atomics, cells and locks through `fastmsg`'s `sync` shim;
//! frame bytes live in `frames::LoomFrames`, a `FrameStore`, ring slots in
//! `ring_store::LoomRing`, a `RingStore`, and window bytes in
//! `window_store::LoomWindow`, a `WindowMemory`, whose every byte access
//! loom sees. They exist only when the workspace is built with
//! `RUSTFLAGS="--cfg loom"`; otherwise this crate is empty, so
//! `cargo test --workspace` is unaffected.
//!
//! | model | module | threads | what it proves |
//! |---|---|---|---|
//! | 1 free list | `free_list` | 2 senders, 1 receiver | claim (fetch-and-increment + test-and-set) never gives one frame two owners; a skipped in-use frame and a released one reused are both reached |
//! | 2a shared queue | `recv_shared` | 1–2 producers, 1 consumer | stamps + recycle: no lost, duplicated, stale or torn entry, FIFO per producer, across laps |
//! | 2b dedicated queue | `recv_dedicated` | 1 producer, 1 consumer | slot and frame reuse ordered by credits alone, three laps |
//! | 3 credits | `credit` | sender, receiver | never negative, never more in flight than the window, no deadlock (both sides sleep on doorbells) |
//! | 4 network ring | `ring` | 1 writer, 1 poller | end-of-frame length-flag ring, 4 slots, two laps, credit through the explicit credit word: the poller never sees a trailer without its payload; no lost, duplicated, stale or torn fragment, in order; never more in flight than the window |
//! | 4b network rings, duplex | `ring_duplex` | 2 ranks, one ring each way | credit piggybacked on the other ring's trailers alone: the same, on both rings, and each writer gets its credit back |
//! | 5 doorbell | `doorbell` | sleeper, waker | no lost wake-up |
//! | 6 window words | `window` | writer (peer or NIC), reader | a flag raised after a put makes the put's bytes visible; an acknowledgement lets the writer reuse them; two rounds |
//! | 7 link words | `link` | NIC thread, application | every departure (failure, goodbye) reported once, never lost behind an alert count already seen; a flush round makes the records before it visible |
//! | 8 lazy pairs | `lazy_pairs` | 2 ranks' dials + handshakes; 2 handshakes + a rank's poll | crossing dials leave exactly one connection per pair, the same at both ends, none missing; every handed-over link is installed once, and a link whose dial returned is settling until then |
//! | 9 ring placements | `placements` | 2 placers (rank, NIC thread), the rank's poll | a poll that skips the rings while the placement count stands still never misses a fragment placed before or during its scan |
//!
//! Each model module has the model passing on the real code and one test
//! per seeded mutant (`fastmsg::internal::mutant`, see `src/sync.rs`) asserting that
//! loom reports the expected failure; `harness` runs both.
//!
//! Run (README, "Model checking"):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom LOOM_MAX_PREEMPTIONS=3 \
//!     cargo test -p fastmsg-loom-tests
//! ```

#[cfg(loom)]
pub mod frames;
#[cfg(loom)]
pub mod harness;
#[cfg(loom)]
pub mod ring_store;
#[cfg(loom)]
pub mod window_store;

#[cfg(all(loom, test))]
mod credit;
#[cfg(all(loom, test))]
mod doorbell;
#[cfg(all(loom, test))]
mod free_list;
#[cfg(all(loom, test))]
mod lazy_pairs;
#[cfg(all(loom, test))]
mod link;
#[cfg(all(loom, test))]
mod placements;
#[cfg(all(loom, test))]
mod recv_dedicated;
#[cfg(all(loom, test))]
mod recv_shared;
#[cfg(all(loom, test))]
mod ring;
#[cfg(all(loom, test))]
mod ring_duplex;
#[cfg(all(loom, test))]
mod window;
