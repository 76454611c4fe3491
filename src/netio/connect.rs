//! Opening a TCP connection to a start-up listener that may not be
//! listening yet: retry refused and timed-out attempts with a growing pause
//! until the job's start-up deadline.

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
