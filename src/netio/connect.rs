//! Opening a TCP connection to a start-up listener: one that may not be
//! listening yet (retry refused and timed-out attempts with a growing pause
//! until the job's start-up deadline), or one that listened already (one
//! attempt, bounded by the deadline).

use crate::error::ConnectError;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Connect, retrying refused connections until `deadline`.
pub(crate) fn connect_retry(
    addr: SocketAddr,
    deadline: Instant,
    who: impl Fn() -> String,
) -> Result<TcpStream, ConnectError> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(5);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match TcpStream::connect_timeout(&addr, left.max(Duration::from_millis(10))) {
            Ok(s) => return Ok(s),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionRefused
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::WouldBlock
                ) && Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            Err(e) if Instant::now() >= deadline => {
                return Err(ConnectError::Timeout {
                    what: format!("{} to listen ({e})", who()),
                    waited: start.elapsed(),
                })
            }
            Err(source) => {
                return Err(ConnectError::Io {
                    op: "connect to",
                    peer: who(),
                    source,
                })
            }
        }
    }
}

/// Connect once to a listener that listened already, the attempt bounded
/// by `deadline` (at least 10 ms): a refused connection means it is gone.
///
/// # Errors
/// [`ConnectError::Io`] with operation `op`, naming `who()`.
pub(crate) fn connect_once(
    addr: SocketAddr,
    deadline: Instant,
    op: &'static str,
    who: impl Fn() -> String,
) -> Result<TcpStream, ConnectError> {
    let left = deadline.saturating_duration_since(Instant::now());
    TcpStream::connect_timeout(&addr, left.max(Duration::from_millis(10))).map_err(|source| {
        ConnectError::Io {
            op,
            peer: who(),
            source,
        }
    })
}

/// Listen on `addr` with the longest accept queue the kernel allows
/// (`net.core.somaxconn`, 4096 on current Linux), not the standard
/// library's 128: every rank of a large job may dial one peer at once —
/// at start-up, or on first use while that peer is stopped in a debugger
/// (its kernel queues the connections until it answers, and drops the
/// ones past the queue, whose dials then time out).
///
/// # Errors
/// The OS error of `bind` or `listen`.
pub(crate) fn listen(addr: impl std::net::ToSocketAddrs) -> std::io::Result<std::net::TcpListener> {
    use std::os::fd::AsRawFd;
    let l = std::net::TcpListener::bind(addr)?;
    // SAFETY: `listen` again on our own bound, listening socket only
    // changes its queue length (the kernel caps it at somaxconn).
    #[allow(unsafe_code)]
    let r = unsafe { libc::listen(l.as_raw_fd(), libc::c_int::MAX) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(l)
}

#[cfg(test)]
mod tests {
    /// The accept queue is the kernel's limit, not 128 (`ss` shows a
    /// listener's queue length as its Send-Q).
    #[test]
    fn a_listener_queues_as_many_connections_as_the_kernel_allows() {
        let l = super::listen("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let Ok(out) = std::process::Command::new("ss")
            .args(["-ltnH", &format!("sport = :{port}")])
            .output()
        else {
            eprintln!("skipped: no ss (iproute2)");
            return;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let queue: u32 = text
            .split_whitespace()
            .nth(2)
            .and_then(|q| q.parse().ok())
            .unwrap_or_else(|| panic!("ss line: {text:?}"));
        let max: u32 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(queue, max, "accept queue of the listener");
    }
}
