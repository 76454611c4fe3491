//! The software NIC: one thread per endpoint, blocked in `poll(2)` on the
//! peers' sockets (never spinning), that receives write records and applies
//! them to this rank's memory exactly as an RDMA adapter would place remote
//! writes — ring writes payload first and the trailer's stamp last with
//! Release ([`crate::ring::publish_trailer`]), word puts as atomic Release
//! stores — then rings the rank's doorbell so a sleeping rank wakes. The
//! application never reads a socket: it polls memory.
//!
//! Every record is validated against the memory the peer may write (its
//! own ring on us, our window area); a record that breaks the rules, or a
//! connection that ends without the goodbye record, fails that peer alone
//! with a typed [`NetError`], reported through [`Links`]; other peers go on.
//!
//! Payloads go straight from the socket into their destination when large;
//! small records are read in bulk through a buffer (one `recv` for many).

#![allow(unsafe_code)]

use super::wire::{self, RecordHeader, HEADER_BYTES};
use crate::error::NetError;
use crate::id::Rank;
use crate::link::Links;
use crate::ring::{publish_trailer, RingGeometry, RingRegion, Trailer, TRAILER_BYTES};
use crate::sync::Ordering;
use crate::transport::shm::mapping::MapRef;
use crate::wake::Doorbell;
use crate::window::WindowView;
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;

/// Where the NIC may write besides the rings: the rank's one-sided window
/// area and its doorbell (both in the host's shared segment, which these
/// views keep mapped while the NIC thread runs).
#[derive(Debug, Clone)]
pub(crate) struct NicTargets {
    pub(crate) window: WindowView,
    /// Rung after every applied record when the rank may sleep.
    pub(crate) bell: Option<MapRef<Doorbell>>,
}

/// Memory and state shared by the application thread and the NIC thread.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Rings (one per network peer, in peer order) then credit words.
    pub(crate) region: RingRegion,
    pub(crate) geometry: RingGeometry,
    /// Each peer's link state, error and flush round (`crate::link`).
    pub(crate) links: Links,
    pub(crate) targets: NicTargets,
}

impl Shared {
    /// Region layout: rings, then one 64-byte credit line per peer.
    ///
    /// # Errors
    /// `OutOfMemory` naming the bytes if the rings cannot be allocated.
    pub(crate) fn new(
        geometry: RingGeometry,
        ranks: &[Rank],
        targets: NicTargets,
    ) -> std::io::Result<Shared> {
        let n = ranks.len() as u64;
        let too_much = |bytes: Option<u64>| {
            std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!(
                    "cannot allocate {} for the receive rings of {n} peers ({} slots of {} bytes each; lower FASTMSG_NET_SLOTS or FASTMSG_NET_SLOT_SIZE)",
                    bytes.map_or_else(|| "more than 2^64 bytes".to_owned(), |b| format!("{b} bytes")),
                    geometry.slots,
                    geometry.slot_bytes
                ),
            )
        };
        let bytes = geometry
            .ring_bytes()
            .checked_add(64)
            .and_then(|per| per.checked_mul(n))
            .ok_or_else(|| too_much(None))?;
        let region = RingRegion::try_zeroed(bytes).map_err(|b| too_much(Some(b)))?;
        Ok(Shared {
            region,
            geometry,
            links: Links::new(ranks),
            targets,
        })
    }

    /// Byte offset of peer `k`'s ring in the region.
    #[inline]
    pub(crate) fn ring_offset(&self, k: usize) -> usize {
        (self.geometry.ring_bytes() * k as u64) as usize
    }

    /// Peer `k`'s credit word: its released count of our sends.
    #[inline]
    pub(crate) fn credit_word(&self, k: usize) -> &crate::sync::AtomicU64 {
        let off = self.geometry.ring_bytes() * self.links.len() as u64 + 64 * k as u64;
        self.region.word(off as usize)
    }

    fn ring_bell(&self) {
        if let Some(bell) = &self.targets.bell {
            bell.ring();
        }
    }
}

/// What the parser of one connection expects next.
#[derive(Debug, Clone, Copy)]
enum Want {
    Header,
    /// Bytes to copy to `dst`, then `then`.
    Bytes {
        dst: *mut u8,
        left: usize,
        then: After,
    },
    /// Bytes into the small buffer (`small[..need]`), then `then`.
    Small {
        need: usize,
        then: After,
    },
}

#[derive(Debug, Clone, Copy)]
enum After {
    /// Read the ring trailer of `slot` next.
    Trailer { slot: u32 },
    /// Publish the trailer of `slot` (it is in `small`).
    Publish { slot: u32 },
    /// Store the word in `small[..8]` at window byte `at`.
    Word { at: u64 },
    /// Nothing: the record is done.
    Done,
}

/// Parser state of one connection.
struct Conn {
    k: usize,
    fd: RawFd,
    want: Want,
    got: usize,
    hdr: [u8; HEADER_BYTES],
    small: [u8; TRAILER_BYTES],
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

/// Records at least this large are received straight into their
/// destination rather than through the buffer.
const DIRECT: usize = 4096;
const BUF: usize = 64 << 10;

enum Stop {
    /// Goodbye: after the close barrier (true) or without close (false).
    Bye(bool),
    Fail(NetError),
}

impl Conn {
    fn rank(&self, sh: &Shared) -> Rank {
        sh.links.rank(self.k)
    }

    /// Receive into `dst` (up to `len`), from the buffer first. Ok(0): would block.
    fn fill(&mut self, sh: &Shared, dst: *mut u8, len: usize) -> Result<usize, Stop> {
        if self.start < self.end {
            let n = len.min(self.end - self.start);
            // SAFETY: `dst` is valid for `len` bytes (validated record
            // target or our own arrays); the buffer range is initialised.
            unsafe { core::ptr::copy_nonoverlapping(self.buf.as_ptr().add(self.start), dst, n) };
            self.start += n;
            return Ok(n);
        }
        let (into, cap, direct) = if len >= DIRECT {
            (dst, len, true)
        } else {
            (self.buf.as_mut_ptr(), BUF, false)
        };
        // SAFETY: `into` is valid for `cap` bytes (destination or buffer).
        let r = unsafe { libc::recv(self.fd, into as *mut libc::c_void, cap, libc::MSG_DONTWAIT) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(Stop::Fail(NetError::Io {
                    rank: self.rank(sh),
                    op: "receive",
                    msg: e.to_string(),
                })),
            };
        }
        if r == 0 {
            let mid = !matches!(self.want, Want::Header) || self.got > 0;
            return Err(Stop::Fail(NetError::Disconnected {
                rank: self.rank(sh),
                mid_record: mid,
            }));
        }
        let r = r as usize;
        if direct {
            return Ok(r);
        }
        self.start = 0;
        self.end = r;
        self.fill(sh, dst, len)
    }

    /// Apply as many records as the socket has. Ok: would block.
    fn drain(&mut self, sh: &Shared) -> Result<(), Stop> {
        loop {
            match self.want {
                Want::Header => {
                    let dst = self.hdr.as_mut_ptr();
                    // SAFETY: `got < HEADER_BYTES` while in this state.
                    let n = self.fill(sh, unsafe { dst.add(self.got) }, HEADER_BYTES - self.got)?;
                    if n == 0 {
                        return Ok(());
                    }
                    self.got += n;
                    if self.got == HEADER_BYTES {
                        self.got = 0;
                        let h = RecordHeader::decode(&self.hdr);
                        self.want = self.begin(sh, h)?;
                    }
                }
                Want::Bytes { dst, left, then } => {
                    if left == 0 {
                        self.want = self.after(sh, then);
                        continue;
                    }
                    let n = self.fill(sh, dst, left)?;
                    if n == 0 {
                        return Ok(());
                    }
                    self.want = Want::Bytes {
                        // SAFETY: n <= left, so still within the target.
                        dst: unsafe { dst.add(n) },
                        left: left - n,
                        then,
                    };
                }
                Want::Small { need, then } => {
                    // SAFETY: got < need <= TRAILER_BYTES.
                    let dst = unsafe { self.small.as_mut_ptr().add(self.got) };
                    let n = self.fill(sh, dst, need - self.got)?;
                    if n == 0 {
                        return Ok(());
                    }
                    self.got += n;
                    if self.got == need {
                        self.got = 0;
                        self.want = self.after(sh, then);
                    }
                }
            }
        }
    }

    /// Validate a record header and say what to read next.
    fn begin(&mut self, sh: &Shared, h: RecordHeader) -> Result<Want, Stop> {
        let bad = |what: String| {
            Err(Stop::Fail(NetError::BadRecord {
                rank: sh.links.rank(self.k),
                what,
            }))
        };
        let g = sh.geometry;
        let len = h.len as usize;
        match h.kind {
            wire::RING => {
                let end = h.offset.checked_add(u64::from(h.len));
                let fits = end
                    .is_some_and(|e| e <= g.ring_bytes() && e % u64::from(g.slot_bytes) == 0)
                    && len >= TRAILER_BYTES
                    && len <= g.slot_bytes as usize;
                if !fits {
                    return bad(format!(
                        "ring write of {len} bytes at {} does not end at a slot end inside its ring ({} slots of {} bytes)",
                        h.offset, g.slots, g.slot_bytes
                    ));
                }
                let end = end.expect("checked") as usize;
                let slot = (end / g.slot_bytes as usize - 1) as u32;
                let base = sh.region.base();
                Ok(Want::Bytes {
                    // SAFETY: offset + len <= ring_bytes, inside peer k's ring.
                    dst: unsafe { base.add(sh.ring_offset(self.k) + h.offset as usize) },
                    left: len - TRAILER_BYTES,
                    then: After::Trailer { slot },
                })
            }
            wire::CREDIT if len == 0 => {
                // SYNC POINT credit-return (release side): the peer's reads
                // of our fragments happened before it sent this record.
                sh.credit_word(self.k).store(h.offset, Ordering::Release);
                sh.ring_bell();
                Ok(Want::Header)
            }
            wire::PUT => {
                let (window, window_len) = sh.targets.window.raw();
                if h.offset
                    .checked_add(u64::from(h.len))
                    .is_none_or(|e| e > window_len)
                {
                    return bad(format!(
                        "put of {len} bytes at {} runs past the {window_len}-byte window area",
                        h.offset
                    ));
                }
                Ok(Want::Bytes {
                    // SAFETY: in bounds of the window area (checked).
                    dst: unsafe { window.add(h.offset as usize) },
                    left: len,
                    then: After::Done,
                })
            }
            wire::PUT_U64 => {
                let window_len = sh.targets.window.raw().1;
                if len != 8 || h.offset % 8 != 0 || h.offset.saturating_add(8) > window_len {
                    return bad(format!(
                        "word put at {} (len {len}) is misaligned or past the {window_len}-byte window area",
                        h.offset
                    ));
                }
                Ok(Want::Small {
                    need: 8,
                    then: After::Word { at: h.offset },
                })
            }
            wire::BYE if len == 0 => Err(Stop::Bye(h.offset == wire::BYE_CLOSED)),
            wire::FLUSH if len == 0 => {
                // Every record before this one has been applied (records
                // apply in order): SYNC POINT link-flush, in `mark_flushed`.
                sh.links.mark_flushed(self.k, h.offset);
                sh.ring_bell();
                Ok(Want::Header)
            }
            k => bad(format!("unknown record kind {k} (len {len})")),
        }
    }

    fn after(&mut self, sh: &Shared, then: After) -> Want {
        match then {
            After::Trailer { slot } => Want::Small {
                need: TRAILER_BYTES,
                then: After::Publish { slot },
            },
            After::Publish { slot } => {
                let t = Trailer::from_bytes(&self.small);
                let ring = sh.region.ring(sh.ring_offset(self.k), sh.geometry);
                // Trailer last, stamp with Release.
                publish_trailer(&ring, slot, &t);
                sh.ring_bell();
                Want::Header
            }
            After::Word { at } => {
                let v = u64::from_le_bytes(self.small[..8].try_into().expect("8 bytes"));
                let area = &sh.targets.window;
                // `at` was checked 8-aligned and in bounds. Earlier puts
                // are visible with the word (SYNC POINT window-word, in
                // `window::store_word`).
                area.store_u64(at, v);
                sh.ring_bell();
                Want::Header
            }
            After::Done => {
                sh.ring_bell();
                Want::Header
            }
        }
    }
}

/// The NIC thread's body: poll the sockets (and `wake_fd`, which ends the
/// thread) and apply what arrives, until told to stop or no link is left.
pub(crate) fn run(sh: Arc<Shared>, fds: Vec<RawFd>, wake_fd: RawFd) {
    let mut conns: Vec<Conn> = fds
        .iter()
        .enumerate()
        .map(|(k, &fd)| Conn {
            k,
            fd,
            want: Want::Header,
            got: 0,
            hdr: [0; HEADER_BYTES],
            small: [0; TRAILER_BYTES],
            buf: vec![0; BUF],
            start: 0,
            end: 0,
        })
        .collect();
    let mut pfds: Vec<libc::pollfd> = std::iter::once(wake_fd)
        .chain(fds.iter().copied())
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        // SAFETY: `pfds` is a valid array of pollfds; -1: block until an
        // event (this thread never spins).
        let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, -1) };
        if r < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if pfds[0].revents != 0 {
            return;
        }
        for (i, c) in conns.iter_mut().enumerate() {
            let p = &mut pfds[i + 1];
            if p.fd < 0 || p.revents == 0 {
                continue;
            }
            p.revents = 0;
            match c.drain(&sh) {
                Ok(()) => {}
                Err(Stop::Bye(closed)) => {
                    sh.links.leave(c.k, closed);
                    sh.ring_bell();
                    p.fd = -1;
                }
                Err(Stop::Fail(e)) => {
                    sh.links.fail(c.k, e);
                    // SAFETY: shutting down a socket we poll; the transport
                    // owns the descriptor and closes it after joining us.
                    unsafe { libc::shutdown(c.fd, libc::SHUT_RDWR) };
                    sh.ring_bell();
                    p.fd = -1;
                }
            }
        }
        if pfds[1..].iter().all(|p| p.fd < 0) {
            return;
        }
    }
}
