//! Write records: what the TCP software NIC receives from a peer's socket.
//!
//! Each record is a 16-byte header — kind, length, offset, little-endian —
//! followed by `len` bytes. They model one-sided RDMA operations:
//!
//! | kind | meaning | offset | bytes |
//! |---|---|---|---|
//! | `RING` | write into the ring this peer writes on us | byte in that ring | payload then [`Trailer`](crate::ring::Trailer), ending at a slot's end |
//! | `CREDIT` | store the peer's released count of our sends | the count | none |
//! | `PUT` | write into our one-sided window area | byte in the area | the data |
//! | `PUT_U64` | atomic Release store of a word in the window area | byte in the area (8-aligned) | the word |
//! | `BYE` | the peer is leaving | [`BYE_CLOSED`] after `close`, else 0 | none |
//! | `FLUSH` | everything the peer sent before has been applied | round | none |

#![allow(unsafe_code)]

use std::io;
use std::os::fd::AsRawFd;

/// Bytes of a record header.
pub(crate) const HEADER_BYTES: usize = 16;

/// A ring write (payload + trailer).
pub(crate) const RING: u8 = 1;
/// A credit return.
pub(crate) const CREDIT: u8 = 2;
/// A one-sided put of bytes.
pub(crate) const PUT: u8 = 3;
/// A one-sided atomic word store.
pub(crate) const PUT_U64: u8 = 4;
/// A goodbye.
pub(crate) const BYE: u8 = 5;
/// The offset of a goodbye sent after the close barrier released the
/// sender (0: it leaves without having closed).
pub(crate) const BYE_CLOSED: u64 = 1;
/// A flush marker (closing): all earlier records of the peer are applied.
pub(crate) const FLUSH: u8 = 6;

/// A record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordHeader {
    pub(crate) kind: u8,
    pub(crate) len: u32,
    pub(crate) offset: u64,
}

impl RecordHeader {
    pub(crate) fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[0] = self.kind;
        b[4..8].copy_from_slice(&self.len.to_le_bytes());
        b[8..16].copy_from_slice(&self.offset.to_le_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8; HEADER_BYTES]) -> RecordHeader {
        RecordHeader {
            kind: b[0],
            len: u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
            offset: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
        }
    }
}

/// Write every byte of `parts` to the socket with as few `sendmsg` calls
/// as possible (one, normally). Never blocked in the kernel: while the
/// socket is full, `blocked` runs (the caller reads its own sockets, so
/// that two ranks sending to each other cannot both wait on full buffers)
/// and then the socket is waited on for at most a millisecond.
///
/// The wait ends with an error, not only with progress: a connection
/// reset, or shut down by the reader that found the peer failed
/// (`nic::Shared::service`) or by the NIC thread's watch that found its
/// host silent (`nic::Shared::host_silent`), makes the next `sendmsg`
/// fail. It has no
/// deadline of its own on purpose: a live peer that does not read (its
/// window full while it computes) is waited for, however long.
///
/// # Errors
/// The OS error of a failed write.
pub(crate) fn write_all_vectored(
    s: &impl AsRawFd,
    parts: &[&[u8]],
    blocked: &dyn Fn(),
) -> io::Result<()> {
    const MAX: usize = 16;
    let mut iov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; MAX];
    let mut n = 0;
    for p in parts.iter().filter(|p| !p.is_empty()) {
        if n == MAX {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "too many pieces for one record",
            ));
        }
        iov[n] = libc::iovec {
            iov_base: p.as_ptr() as *mut libc::c_void,
            iov_len: p.len(),
        };
        n += 1;
    }
    let mut first = 0;
    while first < n {
        let msg = libc::msghdr {
            msg_name: std::ptr::null_mut(),
            msg_namelen: 0,
            msg_iov: iov[first..].as_mut_ptr(),
            msg_iovlen: n - first,
            msg_control: std::ptr::null_mut(),
            msg_controllen: 0,
            msg_flags: 0,
        };
        // SAFETY: `msg` points at `n - first` valid iovecs over live
        // slices; MSG_NOSIGNAL turns a closed peer into EPIPE, not SIGPIPE.
        let r =
            unsafe { libc::sendmsg(s.as_raw_fd(), &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
        if r < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => {
                    blocked();
                    let mut p = libc::pollfd {
                        fd: s.as_raw_fd(),
                        events: libc::POLLOUT,
                        revents: 0,
                    };
                    // SAFETY: one valid pollfd; waits at most 1 ms.
                    unsafe { libc::poll(&mut p, 1, 1) };
                    // An error or hang-up (POLLERR, POLLHUP) needs no
                    // check here: the next `sendmsg` returns it.
                    continue;
                }
                _ => return Err(e),
            }
        }
        // Skip what was written.
        let mut done = r as usize;
        while first < n && done >= iov[first].iov_len {
            done -= iov[first].iov_len;
            first += 1;
        }
        if done > 0 {
            // SAFETY: `done` is less than this iovec's length.
            iov[first].iov_base = unsafe { (iov[first].iov_base as *mut u8).add(done) } as _;
            iov[first].iov_len -= done;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A record header decodes to what was encoded.
        #[test]
        fn record_headers_round_trip(kind in proptest::num::u8::ANY, len in proptest::num::u32::ANY, offset in proptest::num::u64::ANY) {
            let h = RecordHeader { kind, len, offset };
            proptest::prop_assert_eq!(RecordHeader::decode(&h.encode()), h);
        }
    }
}
