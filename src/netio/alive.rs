//! Telling a dead host from a quiet one on a TCP connection between ranks.
//!
//! A peer *process* that dies on a live host is seen at once: its kernel
//! closes the socket and the reader gets end-of-file. A host that crashes,
//! loses power or is cut off sends nothing at all, and plain TCP waits for
//! ever on an idle connection (or ~15 minutes of retransmissions on a busy
//! one). Two ways to arm a connection:
//!
//! - [`watch_liveness`]: the kernel's own watch, for connections that
//!   carry small records only (the ring transports' news links over
//!   libfabric and verbs). Silence becomes a socket error (`ETIMEDOUT`)
//!   after [`DEAD_AFTER`], which the reader reports as the peer's failure:
//!   on an idle connection keepalive probes go out every second after a
//!   second of silence (`TCP_KEEPIDLE`, `TCP_KEEPINTVL`) and the
//!   connection is dropped once nothing came back for `DEAD_AFTER`
//!   (`TCP_USER_TIMEOUT` overrides the probe count, `TCP_KEEPCNT`, which
//!   is only the fallback); with data unacknowledged, `TCP_USER_TIMEOUT`
//!   drops it once the data stayed unacknowledged that long.
//! - [`keep_alive`]: the keepalive probes alone, for connections that
//!   carry bulk data (the TCP wire), whose silence the caller judges with
//!   [`super::silence`]. `TCP_USER_TIMEOUT` would also end such a
//!   connection while its peer's process is merely stopped with a full
//!   receive window (see there); a news link's records never fill one.

#![allow(unsafe_code)]

use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// How long a peer's host may stay completely silent — acknowledging
/// nothing, answering no keepalive probe — before its connection fails
/// and the peer is reported dead.
///
/// The trade-off: shorter reports a dead host sooner; too short declares a
/// live host dead. What counts as silence here cannot be caused by a busy
/// or stopped *process*: keepalive probes and acknowledgements come from
/// the peer host's kernel, and a peer that does not read (its receive
/// window full) answers the kernel's zero-window probes, which
/// [`super::silence`] counts as an answer (the kernel's user time-out
/// does not, hence [`keep_alive`] for bulk connections). Only the network can make
/// a live host look silent: on heavy congestion Linux retransmits a lost
/// segment after 200 ms at least, doubling each time (0.2, 0.6, 1.4, 3.0 s
/// after the first send), so 3 s means the first send and three
/// retransmissions of the same segment, or three keepalive probes in a
/// row, were all lost — a black hole on a cluster fabric (round trips of
/// microseconds), not a busy switch. A lossy or long-haul network can
/// raise it (`FASTMSG_NET_DEAD_AFTER_MS`).
pub(crate) const DEAD_AFTER: Duration = Duration::from_secs(3);

/// The idle time before the first keepalive probe, and between probes.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// Keepalive probes on `s` every second after a second of silence (or
/// sooner when `dead_after` is shorter), and the kernel's fallback: the
/// connection fails with `ETIMEDOUT` once that many probes in a row went
/// unanswered, about `dead_after` plus a second. No user time-out: the
/// caller judges silence with data in flight ([`super::silence`]).
///
/// # Errors
/// The OS error of a `setsockopt` (not a TCP socket, say).
pub(crate) fn keep_alive(s: &TcpStream, dead_after: Duration) -> io::Result<()> {
    let fd = s.as_raw_fd();
    let (every, count) = probing(dead_after);
    set(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1)?;
    set(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, every)?;
    set(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, every)?;
    set(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT, count)
}

/// Seconds between keepalive probes, and how many go unanswered before
/// the kernel gives up, for a budget of `dead_after`: probes start and
/// repeat every second, or sooner when the whole budget is shorter, so
/// that at least one probe goes out in time.
fn probing(dead_after: Duration) -> (libc::c_int, libc::c_int) {
    let ms = dead_after.as_millis().clamp(1, u128::from(u32::MAX)) as u32;
    let every = PROBE_EVERY.min(dead_after).as_secs().max(1) as libc::c_int;
    let count = (ms / 1000 / every as u32).clamp(1, 127) as libc::c_int;
    (every, count)
}

/// Arm the kernel's watch on `s` (see the module docs): the connection
/// fails with `ETIMEDOUT` once the peer's host has been silent for
/// `dead_after` (rounded up to whole milliseconds, at least one second of
/// probing), idle or not.
///
/// # Errors
/// The OS error of a `setsockopt` (not a TCP socket, say).
pub(crate) fn watch_liveness(s: &TcpStream, dead_after: Duration) -> io::Result<()> {
    let ms = dead_after.as_millis().clamp(1, u128::from(u32::MAX)) as u32;
    keep_alive(s, dead_after)?;
    set(
        s.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_USER_TIMEOUT,
        ms as libc::c_int,
    )
}

/// One integer socket option.
fn set(fd: libc::c_int, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: `fd` is an open socket borrowed from a live `TcpStream`; the
    // option value is a c_int on our stack, its size passed with it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether `e` is how the kernel's watch ends a connection: the host was
/// silent for the whole time (`ETIMEDOUT`), or the last thing the network
/// said about it was that it is unreachable (the soft error a timed-out
/// connection reports instead when ICMP errors came back).
pub(crate) fn is_silence(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ETIMEDOUT | libc::EHOSTUNREACH | libc::ENETUNREACH | libc::EHOSTDOWN)
    )
}

/// What a failed receive on a peer's connection (anything but
/// `WouldBlock`/`Interrupted`) says about the peer `rank`: its host went
/// silent ([`is_silence`]), or the operation failed otherwise. The NIC's
/// reader and the news reader of the RMA transports both report through
/// this.
pub(crate) fn receive_failed(rank: crate::id::Rank, e: &io::Error) -> crate::error::NetError {
    if is_silence(e) {
        crate::error::NetError::HostSilent {
            rank,
            why: e.to_string(),
        }
    } else {
        crate::error::NetError::Io {
            rank,
            op: "receive",
            msg: e.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(fd: libc::c_int, level: libc::c_int, name: libc::c_int) -> libc::c_int {
        let mut v: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: reading an integer option of our own socket into `v`.
        let r = unsafe {
            libc::getsockopt(
                fd,
                level,
                name,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(r, 0, "getsockopt: {}", io::Error::last_os_error());
        v
    }

    /// The options land on the socket as the docs say.
    #[test]
    fn a_watched_connection_carries_keepalive_and_user_timeout() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        watch_liveness(&c, DEAD_AFTER).unwrap();
        let fd = c.as_raw_fd();
        assert_eq!(get(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 1);
        assert_eq!(get(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE), 1);
        assert_eq!(get(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL), 1);
        assert_eq!(get(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT), 3);
        assert_eq!(get(fd, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT), 3000);
        // A budget under a second still probes, every second.
        watch_liveness(&c, Duration::from_millis(500)).unwrap();
        assert_eq!(get(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE), 1);
        assert_eq!(get(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT), 1);
        assert_eq!(get(fd, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT), 500);
    }

    /// A bulk connection gets the probes but no user time-out (which a
    /// stopped peer's zero window would trip: `super::super::silence`).
    #[test]
    fn a_kept_alive_connection_has_probes_and_no_user_timeout() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        keep_alive(&c, DEAD_AFTER).unwrap();
        let fd = c.as_raw_fd();
        assert_eq!(get(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 1);
        assert_eq!(get(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE), 1);
        assert_eq!(get(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT), 3);
        assert_eq!(get(fd, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT), 0);
    }

    #[test]
    fn timeouts_and_unreachable_hosts_are_silence() {
        assert!(is_silence(&io::Error::from_raw_os_error(libc::ETIMEDOUT)));
        assert!(is_silence(&io::Error::from_raw_os_error(
            libc::EHOSTUNREACH
        )));
        assert!(!is_silence(&io::Error::from_raw_os_error(libc::ECONNRESET)));
    }
}
