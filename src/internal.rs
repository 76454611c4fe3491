//! Hidden entry points into crate-private code, for what must drive
//! internals from outside the crate: the fuzz targets in `fuzz/` and the
//! benches (feature `internal`), the loom models in `loom-tests/`
//! (`--cfg loom`, where only the lock-free core is built).
//!
//! The launcher's share (`launcher`, in every build but loom's): what
//! `fmrun` and `fastmsg-info` need of the library's internals (job file
//! names and fresh job ids, the secret file, the flags variable, the
//! configuration report).
//!
//! Hidden from the docs: **not** part of the public API, no semver
//! promise. Everything here forwards to the real code — re-exports and
//! thin wrappers, no logic of its own — so what a fuzz target, bench or
//! loom model exercises is what ships.
//!
//! The lock-free core, as it is (loom models, benches, fuzz targets):
//! `queue` (the shm receive queue and free list), `ring` (the network
//! rings), `flow` (credits), `wake` (doorbells), `frame` (the fragment
//! header), `link` (a network transport's link words), `lazy_pairs` (the lazy
//! connector's state words and hand-over flag), `window` (the
//! one-sided window word protocol), and under loom `mutant` (the seeded mutants of `crate::sync`).
//!
//! Decoders and engine pieces, by the bytes they decode (not under loom):
//! - `handler_table`: the handler-name table every rank sends rank 0 at
//!   start;
//! - `control`: the endpoint's control messages (table verdict, the
//!   termination rounds of `quiesce` and `close`) and the state machine that consumes them;
//! - `tcp`: the TCP software NIC's write records and the NIC loop that
//!   applies them to a rank's memory;
//! - `shm`: where a shared-memory transport's mapping lies, so a target
//!   can check that what it hands out stays inside;
//! - `copy`: the frame-copy strategies and tuner, for the benches (which
//!   once compiled `src/copy.rs` a second time through `#[path]`).
//! - `shm` also re-exports the segment and its layout, for the segment
//!   fuzz target.

#[cfg(any(feature = "internal", loom))]
/// The shared-memory transport's lock-free queues (see `crate::queue`).
pub mod queue {
    pub use crate::queue::*;
}

#[cfg(any(feature = "internal", loom))]
/// The network transports' rings (see `crate::ring`).
pub mod ring {
    pub use crate::ring::*;
}

#[cfg(any(feature = "internal", loom))]
/// Credit flow control (see `crate::flow`).
pub mod flow {
    pub use crate::flow::*;
}

#[cfg(any(feature = "internal", loom))]
/// Doorbells (see `crate::wake`).
pub mod wake {
    pub use crate::wake::*;
}

#[cfg(any(feature = "internal", loom))]
/// The fragment header (see `crate::frame`).
pub mod frame {
    pub use crate::frame::*;
}

#[cfg(any(feature = "internal", loom))]
/// The TCP NIC's link words (see `crate::transport::net::link`).
pub mod link {
    pub use crate::transport::net::link::*;
}

#[cfg(any(feature = "internal", loom))]
/// The lazy connector's shared words (see `crate::transport::net::lazy_pairs`).
pub mod lazy_pairs {
    pub use crate::transport::net::lazy_pairs::*;
}

#[cfg(any(feature = "internal", loom))]
/// The one-sided window word protocol (see `crate::window`).
pub mod window {
    pub use crate::window::*;
}

#[cfg(any(feature = "internal", loom))]
/// Seeded mutants for the loom suite (`loom-tests/`); loom builds only.
#[cfg(loom)]
pub use crate::sync::mutant;

#[cfg(any(feature = "internal", loom))]
#[cfg(not(loom))]
/// The handler-name table exchanged at start (see `crate::endpoint::engine::handler`).
pub mod handler_table {
    use crate::error::ProtocolError;
    use crate::id::Rank;

    /// Encode a name table as a rank sends it to rank 0.
    pub fn encode(names: &[String]) -> Vec<u8> {
        crate::endpoint::engine::handler::encode_table(names)
    }

    /// Decode a table received from rank `src`.
    ///
    /// # Errors
    /// What the decoder refuses, as a [`ProtocolError`].
    pub fn decode(src: Rank, bytes: &[u8]) -> Result<Vec<String>, ProtocolError> {
        crate::endpoint::engine::handler::decode_table(bytes)
            .map_err(|what| ProtocolError::BadControl { src: src.0, what })
    }

    /// The first index where two tables differ, with the names there.
    pub fn first_difference(
        a: &[String],
        b: &[String],
    ) -> Option<(u32, Option<String>, Option<String>)> {
        crate::endpoint::engine::handler::first_difference(a, b)
    }
}

#[cfg(any(feature = "internal", loom))]
#[cfg(not(loom))]
/// The endpoint's control messages (see `crate::endpoint::engine::control`).
pub mod control {
    use crate::endpoint::engine::control as inner;
    use crate::endpoint::engine::control_op::ControlOp;
    use crate::endpoint::engine::termination::{CloseCounts, Report, RoundKind};
    use crate::error::{ProtocolError, StartError};
    use crate::id::Rank;

    /// A rank's handler table, to rank 0.
    pub const OP_TABLE: u32 = inner::OP_TABLE.wire();
    /// Rank 0's verdict on the tables.
    pub const OP_VERDICT: u32 = inner::OP_VERDICT.wire();
    /// A rank's report for a wave of a termination round (`quiesce`,
    /// `close`).
    pub const OP_REPORT: u32 = inner::OP_REPORT.wire();
    /// Rank 0 releases everyone from a round.
    pub const OP_RELEASE: u32 = inner::OP_RELEASE.wire();
    /// Rank 0 asks for the counts of a wave of a round.
    pub const OP_PROBE: u32 = inner::OP_PROBE.wire();
    /// Rank 0 says a round is `quiesce` on one rank, `close` on another.
    pub const OP_MISMATCH: u32 = inner::OP_MISMATCH.wire();
    /// Rank 0 names the ranks that have not called `close` (u32 LE each).
    pub const OP_STRAGGLERS: u32 = inner::OP_STRAGGLERS.wire();

    fn kind(close: bool) -> RoundKind {
        if close {
            RoundKind::Close
        } else {
            RoundKind::Quiesce
        }
    }

    /// Encode a round report (`close`: the round's kind is close, else
    /// quiesce; `busy`: the rank's idle hooks have work).
    pub fn encode_report(
        round: u32,
        close: bool,
        wave: u32,
        busy: bool,
        sent: u64,
        received: u64,
    ) -> Vec<u8> {
        Report {
            round,
            wave,
            kind: kind(close),
            busy,
            counts: CloseCounts { sent, received },
        }
        .encode()
    }

    /// Encode a probe for wave `wave` of round `round`.
    pub fn encode_probe(round: u32, wave: u32) -> Vec<u8> {
        crate::endpoint::engine::termination::encode_probe(round, wave)
    }

    /// Messages a control step sends in reaction: (destination, op, payload).
    pub type Sends = Vec<(Rank, u32, Vec<u8>)>;

    /// The control state of one rank of a job of `size` ranks.
    #[derive(Debug)]
    pub struct Control(inner::Control);

    impl Control {
        /// Fresh state, as at start.
        pub fn new(size: u32) -> Control {
            Control(inner::Control::new(size))
        }

        /// Rank 0's own handler table.
        pub fn set_own_table(&mut self, names: Vec<String>) {
            self.0.set_own_table(names);
        }

        /// Handle one complete control message from `src`; `sent` and
        /// `received` are this rank's message counts now, `busy` whether
        /// its idle hooks have work.
        ///
        /// # Errors
        /// [`ProtocolError::BadControl`] for a malformed or unexpected message.
        pub fn on_message(
            &mut self,
            src: Rank,
            op: u32,
            payload: &[u8],
            sent: u64,
            received: u64,
            busy: bool,
        ) -> Result<Sends, ProtocolError> {
            let counts = CloseCounts { sent, received };
            // The engine decodes the operation when the message's first
            // fragment arrives (`crate::endpoint::engine::stream`), as here.
            let op = ControlOp::from_wire(op).ok_or(ProtocolError::BadControl {
                src: src.0,
                what: "unknown control operation",
            })?;
            let sends = self.0.on_message(src, op, payload, counts, busy)?;
            Ok(sends
                .into_iter()
                .map(|(dest, op, bytes)| (dest, op.wire(), bytes))
                .collect())
        }

        /// Enter termination round `round` (`close` or quiesce): the
        /// wave-0 report this rank sends rank 0.
        pub fn enter(
            &mut self,
            round: u32,
            close: bool,
            sent: u64,
            received: u64,
            busy: bool,
        ) -> Vec<u8> {
            let counts = CloseCounts { sent, received };
            self.0
                .enter_round(round, kind(close), counts, busy)
                .encode()
        }

        /// The mismatch rank 0 reported, as (round, a quiescing rank, a
        /// closing rank).
        pub fn mismatch(&self) -> Option<(u32, u32, u32)> {
            match self.0.mismatch()? {
                crate::error::ExtractError::CloseQuiesceMismatch {
                    round,
                    quiescing,
                    closing,
                } => Some((round, quiescing.0, closing.0)),
                _ => None,
            }
        }

        /// The verdict received, as `start` would report it.
        pub fn verdict(&self) -> Option<Result<(), StartError>> {
            self.0.verdict().cloned().map(inner::Verdict::into_result)
        }

        /// Whether rank 0 has released this rank from round `round`.
        pub fn released(&self, round: u32) -> bool {
            self.0.released(round)
        }
    }
}

#[cfg(any(feature = "internal", loom))]
#[cfg(not(loom))]
/// The TCP transport's write records and software NIC (see
/// `crate::transport::tcp`).
pub mod tcp {
    use crate::error::NetError;
    use crate::id::Rank;
    use crate::ring::{RingGeometry, RingRegion};
    use crate::sync::Ordering;
    use crate::transport::net::link::{BYE, FAILED, LEFT, UP};
    use crate::transport::net::wire::PeerArea;
    use crate::transport::tcp::nic::{self, NicTargets, Shared};
    use crate::transport::tcp::wire;
    use crate::window::WindowView;
    use std::os::fd::{AsRawFd, BorrowedFd};
    use std::sync::{Arc, OnceLock};

    /// Bytes of a record header.
    pub const HEADER_BYTES: usize = wire::HEADER_BYTES;
    /// Record kinds.
    pub const RING: u8 = wire::RING;
    /// A credit return.
    pub const CREDIT: u8 = wire::CREDIT;
    /// A one-sided put.
    pub const PUT: u8 = wire::PUT;
    /// A one-sided word store.
    pub const PUT_U64: u8 = wire::PUT_U64;
    /// A clean goodbye.
    pub const BYE_RECORD: u8 = wire::BYE;
    /// A flush marker.
    pub const FLUSH: u8 = wire::FLUSH;

    /// Encode a record header (kind, length, offset).
    pub fn encode_header(kind: u8, len: u32, offset: u64) -> [u8; HEADER_BYTES] {
        wire::RecordHeader { kind, len, offset }.encode()
    }

    /// Decode a record header into (kind, length, offset).
    pub fn decode_header(b: &[u8; HEADER_BYTES]) -> (u8, u32, u64) {
        let h = wire::RecordHeader::decode(b);
        (h.kind, h.len, h.offset)
    }

    /// What the NIC made of one peer's connection.
    #[derive(Debug)]
    pub enum LinkState {
        /// Still up (its bytes ended on a record boundary or mid-record
        /// without the connection closing).
        Up,
        /// The peer said goodbye after closing.
        Bye,
        /// The peer said goodbye without having closed (its endpoint was
        /// dropped without `close`).
        Left,
        /// The peer failed with this error.
        Failed(Option<NetError>),
    }

    /// The memory a software NIC writes into: one ring per network peer,
    /// then one credit word and one flush word per peer (64 bytes apart,
    /// as the ring transport lays them out), and the rank's window area.
    #[derive(Debug)]
    pub struct NicMemory {
        geometry: RingGeometry,
        rings: Arc<RingRegion>,
        areas: Vec<PeerArea>,
        shared: OnceLock<Arc<Shared>>,
        /// Also held by the NIC's window view.
        window: Arc<RingRegion>,
        /// The bytes of `window` the NIC may write.
        window_len: u64,
    }

    impl NicMemory {
        /// Zeroed memory for `peers` network peers (ranks 1 ..= peers) with
        /// rings of `geometry` and a `window_bytes`-byte window area.
        pub fn new(geometry: RingGeometry, peers: u32, window_bytes: u64) -> NicMemory {
            let n = peers as u64;
            let ring = geometry.ring_bytes();
            let rings = Arc::new(RingRegion::zeroed(ring * n + 128 * n));
            let areas = (0..n)
                .map(|k| PeerArea {
                    ring: ring * k,
                    credit: ring * n + 64 * k,
                    flush: ring * n + 64 * (n + k),
                })
                .collect();
            NicMemory {
                geometry,
                rings,
                areas,
                shared: OnceLock::new(),
                window: Arc::new(RingRegion::zeroed(window_bytes)),
                window_len: window_bytes,
            }
        }

        /// Run the NIC loop over `peers` (peer `k`'s connection, in peer
        /// order) until every connection has ended or `wake` is readable
        /// (once per memory).
        ///
        /// # Panics
        /// If run twice.
        #[allow(unsafe_code)] // the window view over the region, below
        pub fn run(&self, peers: &[BorrowedFd<'_>], wake: BorrowedFd<'_>) {
            let fds: Vec<_> = peers.iter().map(AsRawFd::as_raw_fd).collect();
            let ranks: Vec<Rank> = (1..=fds.len() as u32).map(Rank).collect();
            let owner: Arc<dyn Send + Sync> = Arc::clone(&self.window) as _;
            // SAFETY: the region is at least `window_len` long, zeroed and
            // page aligned, valid while `owner` (a clone of its `Arc`) lives.
            let view = unsafe { WindowView::new(owner, self.window.base(), self.window_len) };
            let targets = NicTargets {
                window: view,
                bell: None,
            };
            let shared = Shared::new(
                self.geometry,
                Arc::clone(&self.rings),
                self.areas.clone(),
                &ranks,
                &fds,
                targets,
                crate::netio::alive::DEAD_AFTER,
            );
            // No rank reads these sockets: the thread owns them at once.
            shared.owner.store(nic::NIC, Ordering::Relaxed);
            let shared = Arc::new(shared);
            assert!(self.shared.set(Arc::clone(&shared)).is_ok(), "run once");
            nic::run(shared, wake.as_raw_fd());
        }

        /// The region holding the rings, then the credit and flush words.
        pub fn region(&self) -> &RingRegion {
            &self.rings
        }

        /// The window area.
        pub fn window(&self) -> &RingRegion {
            &self.window
        }

        /// The bytes of the window area the NIC may write.
        pub fn window_len(&self) -> u64 {
            self.window_len
        }

        /// Byte offset of peer `k`'s ring in [`region`](Self::region).
        pub fn ring_offset(&self, k: usize) -> usize {
            self.areas[k].ring as usize
        }

        /// Peer `k`'s credit word (its released count of our sends).
        pub fn credit(&self, k: usize) -> u64 {
            // SYNC POINT credit-return (acquire side), as the transport's.
            self.rings
                .word(self.areas[k].credit as usize)
                .load(Ordering::Acquire)
        }

        /// Peer `k`'s link state (after [`run`](Self::run)).
        ///
        /// # Panics
        /// Before `run`.
        pub fn link(&self, k: usize) -> LinkState {
            let links = &self.shared.get().expect("run first").links;
            match links.state(k) {
                UP => LinkState::Up,
                BYE => LinkState::Bye,
                LEFT => LinkState::Left,
                FAILED => LinkState::Failed(links.error(k)),
                s => unreachable!("link state {s}"),
            }
        }

        /// The last flush round peer `k` sent (its flush word).
        pub fn flushed(&self, k: usize) -> u64 {
            // SYNC POINT ring-flush (acquire side), as `quiesce`'s.
            self.rings
                .word(self.areas[k].flush as usize)
                .load(Ordering::Acquire)
        }
    }
}

#[cfg(any(feature = "internal", loom))]
#[cfg(not(loom))]
/// The shared-memory transport (see `crate::transport::shm`).
pub mod shm {
    pub use crate::transport::shm::{layout, segment, ShmConfig, ShmJob, ShmTransport};
    pub use crate::transport::Transport;

    /// Where `t`'s mapping of the segment lies: (base address, length).
    /// Every fragment it hands out must lie inside.
    pub fn mapping(t: &ShmTransport) -> (usize, u64) {
        let l = t.layout();
        let window = t.own_window().raw().0 as usize;
        (window - l.window(t.smt_id()) as usize, l.total)
    }
}

#[cfg(any(feature = "internal", loom))]
#[cfg(not(loom))]
/// The frame-copy strategies and their tuner (see `crate::copy`), for the
/// benchmark suite: `fmbench tune-copy` measures and stores the plan, the
/// criterion benches time each strategy.
pub mod copy {
    pub use crate::copy::{
        copy_to_frame, copy_with, kernel, parse_choice, plan, store, tune, CopyPlan, CopyPlanError,
        ProbeResult, Strategy,
    };
}

/// What the launcher (`fmrun`) and `fastmsg-info` use of the library's
/// internals.
#[cfg(not(loom))]
pub mod launcher {
    pub use crate::bootstrap::secret::{read_secret_file, secret_from_env};
    pub use crate::endpoint::startup::report::report;
    pub use crate::settings::FLAGS_VAR;

    /// The start of every file the job `job` makes in the segment
    /// directory (see `crate::bootstrap::job_file_prefix`).
    pub fn job_file_prefix(job: &str) -> String {
        crate::bootstrap::job_file_prefix(job)
    }

    /// A fresh job id, unique on this host (see
    /// `crate::bootstrap::fresh_job_id`).
    pub fn fresh_job_id() -> String {
        crate::bootstrap::fresh_job_id()
    }
}
