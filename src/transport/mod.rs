//! Transports: how fragments get from one rank to another.
//!
//! # The contract every transport meets
//!
//! A transport moves *fragments* — a [`FragHeader`] plus at most
//! `frame_capacity()` payload bytes — between ranks it reaches, and:
//!
//! 1. **Reliable, in order per pair.** Fragments from one sender to one
//!    receiver come out of [`Transport::poll`] in the order they were
//!    committed, none lost, none duplicated.
//! 2. **Credit-bounded.** [`Transport::try_reserve`] hands out a frame only
//!    while the sender holds credit for that destination (one credit per
//!    fragment, see [`crate::flow`]); without credit it returns `None` and
//!    never blocks. Credit comes back when the receiver *releases* fragments.
//! 3. **Release in arrival order per source.** The engine releases each
//!    source's fragments in the order they were polled (it keeps one FIFO per
//!    source); transports may rely on that to reuse frames in order.
//! 4. **Zero-copy receive.** A polled fragment's payload stays where it
//!    arrived (a shared frame, a ring slot) until released; its bytes are
//!    read through [`RxFragment::bytes`].
//! 5. **Cheap empty poll.** Polling with nothing arrived costs a load of a
//!    cached line or two (HPVM §4.1), so the engine polls every
//!    transport in turn with no adaptive scheme.
//! 6. **Validated input.** Whatever arrives from another process or the
//!    network is checked ([`FragHeader::check`] and the transport's own
//!    indices) before the engine sees it; bad input is a
//!    [`ProtocolError`], never a panic.
//!
//! The engine (`crate::endpoint`) knows transports only through this trait:
//! it calls [`ShmTransport`] directly (every endpoint has one, and its hot
//! paths must inline) and the network transports through
//! [`AnyTransport`] (static dispatch, polled out of line and only when the
//! job has one).
//!
//! # Network wires are providers
//!
//! `net` owns the ring transport every network wire shares (rings,
//! credit, failures, the close flush), the set-up connections (the full
//! mesh, or lazily per pair) and the per-pair lock-free words; `tcp`,
//! `ofi` and `verbs` hold only their wire and its [`Provider`]: a name, a
//! probe, capabilities and `open`. Start-up picks a provider from
//! [`PROVIDERS`] and reads behaviour from its capabilities. A new wire is
//! a folder beside them (its wire, its provider) and a row in
//! [`PROVIDERS`]'s table, `wires!` (with `pub mod` and its name in the
//! layers table below, here, and, if it links a library, a cargo
//! feature); its start-up errors travel as `StartError::Wire`.
//!
//! Its sub-modules import only down this table (`scripts/layers.py
//! check`); everything may use what this file defines (the contract):
//!
//! ```text
//! layers:begin
//! tcp ofi verbs | the network wires, each with its provider
//! net           | the ring transport every wire shares: rings, set-up,
//!               | per-pair words, the provider trait
//! shm           | the shared-memory transport (SMT)
//! layers:end
//! ```

#![allow(unsafe_code)]

pub mod net;
pub mod ofi;
pub mod shm;
pub mod tcp;
pub mod verbs;

pub(crate) use self::net::provider::{NetTransport, Provider};
use crate::error::{ConfigError, ExtractError, ProtocolError, PutError, StartError};
use crate::frame::FragHeader;
use crate::id::Rank;
use crate::queue::INLINE_BYTES;

pub use shm::ShmTransport;

/// Identifies a polled fragment to its transport for release.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ReleaseToken {
    /// Transport-defined (shm: queue index).
    pub a: u32,
    /// Transport-defined (shm: frame index).
    pub b: u32,
    /// Transport-defined (shm: the source's SMT id).
    pub src: u32,
    /// Transport-defined (shm: queue position).
    pub pos: u64,
}

/// A fragment that has arrived and not yet been released: its validated
/// header and where its payload lies in transport memory (a frame, a ring
/// slot, or the inline bytes of a queue slot).
#[derive(Clone, Copy, Debug)]
pub struct RxFragment {
    /// The validated header.
    pub header: FragHeader,
    /// What to hand back to the transport on release.
    pub token: ReleaseToken,
    /// Index of the transport that delivered it (set by the engine).
    pub transport: u8,
    data: *const u8,
}

impl RxFragment {
    /// The fragment a network transport took from the ring of its peer
    /// number `peer` (both network transports identify ring fragments
    /// this way for `release`).
    ///
    /// # Safety
    /// As [`RxFragment::new`]: the slot holding `taken`'s payload must not
    /// be written again until the transport releases the fragment (the
    /// peer may not, without the credit that release returns), and the
    /// ring's memory must outlive the fragment.
    #[inline]
    pub(crate) unsafe fn from_ring(peer: usize, taken: &crate::ring::Taken) -> Self {
        let token = ReleaseToken {
            a: peer as u32,
            b: 0,
            src: 0,
            pos: taken.pos,
        };
        // SAFETY: the caller's promise is the one `new` asks for.
        unsafe { RxFragment::new(taken.body.header, token, taken.data) }
    }

    /// A fragment whose payload stays in transport memory at `data`.
    ///
    /// # Safety
    /// `data` must be valid for reads of `header.len` bytes, and those bytes
    /// must not be written by anyone, from now until the transport that
    /// created this fragment releases it or is dropped (whichever is first);
    /// the engine must not use the fragment after that.
    #[inline]
    pub unsafe fn new(header: FragHeader, token: ReleaseToken, data: *const u8) -> Self {
        RxFragment {
            header,
            token,
            transport: 0,
            data,
        }
    }

    /// A fragment over `data` (a test helper: leaks a copy, so the bytes
    /// stay valid for ever).
    #[cfg(test)]
    pub(crate) fn leaked(header: FragHeader, data: &[u8]) -> Self {
        let bytes: &'static [u8] = Box::leak(data.to_vec().into_boxed_slice());
        // SAFETY: leaked, so valid and unwritten for ever.
        unsafe { RxFragment::new(header, ReleaseToken::default(), bytes.as_ptr()) }
    }

    /// Payload bytes.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `new`'s contract: valid and unwritten until release; the
        // engine releases only after its last use.
        unsafe { core::slice::from_raw_parts(self.data, self.header.len as usize) }
    }
}

#[derive(Debug)]
enum TxBody {
    Inline([u8; INLINE_BYTES]),
    External(*mut u8),
}

/// A frame reserved for sending; pieces are appended straight into it.
#[derive(Debug)]
pub struct TxFrame {
    /// Destination.
    pub dest: Rank,
    /// Transport-defined (shm: frame index, or queue position).
    pub token: u64,
    cap: usize,
    len: usize,
    body: TxBody,
}

impl TxFrame {
    /// A frame that gathers into a small inline buffer.
    pub fn inline(dest: Rank, token: u64) -> Self {
        TxFrame {
            dest,
            token,
            cap: INLINE_BYTES,
            len: 0,
            body: TxBody::Inline([0; INLINE_BYTES]),
        }
    }

    /// A frame writing straight into transport memory.
    ///
    /// # Safety
    /// `ptr` must be valid for writes of `cap` bytes that nobody else reads
    /// or writes until the frame is committed.
    pub unsafe fn external(dest: Rank, token: u64, ptr: *mut u8, cap: usize) -> Self {
        TxFrame {
            dest,
            token,
            cap,
            len: 0,
            body: TxBody::External(ptr),
        }
    }

    /// Bytes written so far.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes that still fit.
    #[inline]
    pub fn room(&self) -> usize {
        self.cap - self.len
    }

    /// Copy as much of `data` as fits; returns how much was taken.
    #[inline]
    pub fn append(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.room());
        match &mut self.body {
            TxBody::Inline(b) => b[self.len..self.len + n].copy_from_slice(&data[..n]),
            // SAFETY: `external`'s contract: `ptr` is valid for `cap` bytes
            // and ours until commit; `len + n <= cap`; `data` cannot overlap
            // transport memory we exclusively own.
            TxBody::External(p) => unsafe {
                crate::copy::copy_to_frame(p.add(self.len), data.as_ptr(), n)
            },
        }
        self.len += n;
        n
    }

    /// The inline bytes, if this is an inline frame.
    pub fn inline_data(&self) -> Option<&[u8; INLINE_BYTES]> {
        match &self.body {
            TxBody::Inline(b) => Some(b),
            TxBody::External(_) => None,
        }
    }
}

/// What every transport implements. See the module docs for the contract.
pub trait Transport {
    /// Take the next fragment that has arrived, if any.
    fn poll(&mut self) -> Option<Result<RxFragment, ProtocolError>>;
    /// Whether `poll` would find something (the empty `extract`'s test,
    /// and before sleeping). May make progress on the transport's own wire,
    /// but must not run user code or reach the endpoint: the engine asks
    /// it while looking at its state without a `RefCell` guard
    /// (`Core::is_idle`).
    fn has_arrivals(&self) -> bool;
    /// Hand a polled fragment's frame back and count its credit.
    fn release(&mut self, token: &ReleaseToken);
    /// Publish batched credit returns. Called at the end of an extract pass
    /// in which something was released, if [`needs_flush`](Self::needs_flush).
    fn flush(&mut self);
    /// Whether this transport batches work until `flush` (a transport that
    /// publishes credit at each release says no, and is never flushed).
    fn needs_flush(&self) -> bool {
        true
    }
    /// Reserve a frame towards `dest` if credit allows; `remaining` is how
    /// many message bytes are still to come (lets a transport pick an
    /// inline frame for small payloads).
    fn try_reserve(&mut self, dest: Rank, remaining: u64) -> Option<TxFrame>;
    /// Publish a reserved frame with its header.
    fn commit(&mut self, frame: TxFrame, header: FragHeader);
    /// Payload bytes per frame (the size of a
    /// [`try_send_fragment`](Self::try_send_fragment)).
    fn frame_capacity(&self) -> usize;
    /// Largest message [`try_send_inline`](Self::try_send_inline) takes.
    fn inline_max(&self) -> usize;
    /// Send a whole message of at most `inline_max()` bytes as one fragment
    /// (`header` complete but for `len`, which must equal the pieces'
    /// total) if credit allows; false, with nothing sent, otherwise. The
    /// whole-message fast path: no `TxFrame` is reserved and no stream kept.
    fn try_send_inline(&mut self, dest: Rank, header: FragHeader, pieces: &[&[u8]]) -> bool;
    /// Send one fragment of a streamed message straight from `piece`
    /// (exactly [`frame_capacity`](Self::frame_capacity) bytes, `header`
    /// complete), without reserving a frame: where the transport hands the
    /// bytes to the network during the call (TCP: `sendmsg`), this spares
    /// the copy into a frame. `None`: no such path here (reserve a frame);
    /// `Some(false)`: nothing sent (no credit, or `dest` gone), as a
    /// failed reserve.
    fn try_send_fragment(&mut self, dest: Rank, header: FragHeader, piece: &[u8]) -> Option<bool> {
        let _ = (dest, header, piece);
        None
    }
    /// The transport's own periodic checks, run by idle waits and when the
    /// watchdog raises the alarm: corrupt queues or rings, and (network
    /// transports) links that failed. The liveness of shared-memory peers
    /// is not asked here but read from their lifelines
    /// (`shm::liveness`).
    ///
    /// # Errors
    /// A [`ProtocolError`], or a peer's failure ([`ExtractError::PeerLeft`],
    /// a network error) naming the peer, each reported once.
    fn check_peers(&mut self) -> Result<(), ExtractError>;
    /// Whether `dest` is known to be gone.
    fn is_gone(&self, dest: Rank) -> bool;
    /// Why `dest` could not be reached, if it is gone because its
    /// connection could not be made (lazy set-up) rather than because it
    /// left or failed.
    fn unreachable(&self, _dest: Rank) -> Option<String> {
        None
    }
    /// Why `dest`'s host was taken as dead, if it is gone because it fell
    /// silent on the network (`FASTMSG_NET_DEAD_AFTER_MS`).
    fn silence(&self, _dest: Rank) -> Option<String> {
        None
    }
    /// Whether a frame towards `dest` could be reserved now (re-reads
    /// returned credit; used before sleeping).
    fn has_credit(&self, dest: Rank) -> bool;
    /// One-sided: copy `data` to byte `at` of `dest`'s window area (the
    /// engine has checked the bounds). Visible to `dest` before any later
    /// message or put from this rank.
    ///
    /// # Errors
    /// [`PutError::PeerGone`] if `dest` is known to be gone.
    fn put(&mut self, dest: Rank, at: u64, data: &[u8]) -> Result<(), PutError>;
    /// One-sided: store `value` (Release) in the aligned word at byte `at`
    /// of `dest`'s window area, waking `dest` if it sleeps.
    ///
    /// # Errors
    /// [`PutError::PeerGone`] if `dest` is known to be gone.
    fn put_u64(&mut self, dest: Rank, at: u64, value: u64) -> Result<(), PutError>;
    /// Closing, once no rank sends any more: return when everything every
    /// peer sent to this rank before *its* `quiesce` is visible to `poll`.
    /// Needed where the close barrier's messages may overtake data on
    /// another path (network transports); a store-based transport has
    /// nothing to wait for.
    ///
    /// A live peer is waited for however long (it may be stopped in a
    /// debugger): after `warn` and at each doubling the wait logs whom it
    /// waits for.
    ///
    /// # Errors
    /// A network failure: a peer that died, left or went silent.
    fn quiesce(&mut self, warn: std::time::Duration) -> Result<(), ExtractError> {
        let _ = warn;
        Ok(())
    }
}

/// The network transports an endpoint can hold, one variant per wire,
/// dispatched statically (a `match`, not a virtual call: the engine's
/// inlining of its shared-memory paths is sensitive to what the network
/// branches cost), and the table of their providers. Both come from the
/// rows of [`wires!`]'s one invocation below.
macro_rules! wires {
    ($( $variant:ident ( $(#[$attr:meta])* $ty:ty ) = $provider:expr ),* $(,)?) => {
        /// A network transport of one of the wires (see [`PROVIDERS`]).
        #[derive(Debug)]
        #[allow(clippy::large_enum_variant)]
        pub(crate) enum AnyTransport {
            $( $(#[$attr])* #[allow(missing_docs)] $variant($ty), )*
        }

        $(
            $(#[$attr])*
            impl From<$ty> for AnyTransport {
                fn from(t: $ty) -> Self {
                    AnyTransport::$variant(t)
                }
            }
        )*

        /// The network providers, one row per wire, in order of
        /// preference: `FASTMSG_NET=auto` opens the first whose
        /// capabilities let it be chosen unnamed and that probes usable; a
        /// name selects its row. A wire whose cargo feature is off keeps
        /// its provider: its probe says it is not built.
        pub(crate) static PROVIDERS: &[&dyn Provider] = &[ $( &$provider ),* ];

        impl NetTransport for AnyTransport {
            fn peers(&self) -> Vec<Rank> {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.peers(), )*
                }
            }
            fn connected(&self) -> Vec<Rank> {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.connected(), )*
                }
            }
            fn set_closed(&mut self) {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.set_closed(), )*
                }
            }
            fn watch_probe(&self) -> Option<Box<dyn crate::watch::Probe>> {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.watch_probe(), )*
                }
            }
            fn transport(&mut self) -> &mut dyn Transport {
                self
            }
        }

        impl Transport for AnyTransport {
            #[inline]
            fn poll(&mut self) -> Option<Result<RxFragment, ProtocolError>> {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.poll(), )*
                }
            }
            #[inline(always)]
            fn has_arrivals(&self) -> bool {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.has_arrivals(), )*
                }
            }
            #[inline]
            fn release(&mut self, token: &ReleaseToken) {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.release(token), )*
                }
            }
            #[inline]
            fn flush(&mut self) {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.flush(), )*
                }
            }
            fn needs_flush(&self) -> bool {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.needs_flush(), )*
                }
            }
            #[inline]
            fn try_reserve(&mut self, dest: Rank, remaining: u64) -> Option<TxFrame> {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.try_reserve(dest, remaining), )*
                }
            }
            #[inline]
            fn commit(&mut self, frame: TxFrame, header: FragHeader) {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.commit(frame, header), )*
                }
            }
            #[inline]
            fn frame_capacity(&self) -> usize {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.frame_capacity(), )*
                }
            }
            #[inline]
            fn inline_max(&self) -> usize {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.inline_max(), )*
                }
            }
            #[inline]
            fn try_send_inline(&mut self, dest: Rank, header: FragHeader, pieces: &[&[u8]]) -> bool {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.try_send_inline(dest, header, pieces), )*
                }
            }
            #[inline]
            fn try_send_fragment(&mut self, dest: Rank, header: FragHeader, piece: &[u8]) -> Option<bool> {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.try_send_fragment(dest, header, piece), )*
                }
            }
            fn check_peers(&mut self) -> Result<(), ExtractError> {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.check_peers(), )*
                }
            }
            fn is_gone(&self, dest: Rank) -> bool {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.is_gone(dest), )*
                }
            }
            fn unreachable(&self, dest: Rank) -> Option<String> {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.unreachable(dest), )*
                }
            }
            fn silence(&self, dest: Rank) -> Option<String> {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.silence(dest), )*
                }
            }
            fn has_credit(&self, dest: Rank) -> bool {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.has_credit(dest), )*
                }
            }
            fn put(&mut self, dest: Rank, at: u64, data: &[u8]) -> Result<(), PutError> {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.put(dest, at, data), )*
                }
            }
            fn put_u64(&mut self, dest: Rank, at: u64, value: u64) -> Result<(), PutError> {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.put_u64(dest, at, value), )*
                }
            }
            fn quiesce(&mut self, warn: std::time::Duration) -> Result<(), ExtractError> {
                match self {
                    $( $(#[$attr])* AnyTransport::$variant(t) => t.quiesce(warn), )*
                }
            }
        }
            };
}

wires! {
    Tcp(tcp::TcpTransport) = tcp::TcpProvider,
    Verbs(#[cfg(feature = "verbs")] net::RmaTransport<verbs::VerbsWire>) = verbs::VerbsProvider,
    Ofi(#[cfg(feature = "ofi")] net::RmaTransport<ofi::OfiWire>) = ofi::OfiProvider,
}

/// The provider called `name`, if there is one.
pub(crate) fn provider(name: &str) -> Option<&'static dyn Provider> {
    PROVIDERS.iter().copied().find(|p| p.name() == name)
}

/// The provider to open: the one named (which must probe usable), else
/// the best that does.
///
/// # Errors
/// The named provider's probe error, or, with none named, the probe
/// error of the last provider `auto` may choose.
pub(crate) fn choose(name: Option<&str>) -> Result<&'static dyn Provider, StartError> {
    if let Some(name) = name {
        let p = provider(name).ok_or_else(|| StartError::Config(unknown_provider(name)))?;
        p.probe()?;
        return Ok(p);
    }
    let mut why = None;
    for p in PROVIDERS.iter().copied().filter(|p| p.caps().auto) {
        match p.probe() {
            Ok(()) => return Ok(p),
            Err(e) => why = Some(e),
        }
    }
    Err(why.unwrap_or_else(|| StartError::Config(unknown_provider("auto"))))
}

/// The error for a `FASTMSG_NET` that names no provider.
pub(crate) fn unknown_provider(name: &str) -> ConfigError {
    let names: Vec<&str> = PROVIDERS.iter().map(|p| p.name()).collect();
    ConfigError::BadEnv {
        var: "FASTMSG_NET",
        value: name.to_owned(),
        why: format!("expected auto or a provider: {}", names.join(", ")),
    }
}
