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
