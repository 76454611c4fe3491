//! Waiting for a known peer's first answer: a connection made on first use
//! to a peer of the job (its listener known from start-up) that the
//! peer's kernel accepted, but whose process does not answer — it is
//! stopped in a debugger, by `SIGSTOP`, or swapped out — is waited for
//! without bound while the peer's host answers, as every other wait for a
//! live peer is. (Before, the dial failed after `FASTMSG_TIMEOUT` and the
//! send with it.)
//!
//! What still ends the wait: the peer's process ends (its kernel closes
//! the connection, the read that follows says so) or its host goes
//! silent for `dead_after` (keepalive probes unanswered, judged by
//! [`super::silence`]). A warning names the peer after `warn`, then at
//! each doubling.

#![allow(unsafe_code)]

use super::silence::{SilenceWatch, LOOK_EVERY};
use crate::error::HandshakeError;
use crate::log::LongWait;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// How a dial to a known peer waits for its first answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Patience {
    /// How long the peer's host may stay silent (`FASTMSG_NET_DEAD_AFTER_MS`).
    pub(crate) dead_after: Duration,
    /// When to say the wait is long, then at each doubling.
    pub(crate) warn: Duration,
}

/// Wait until `s` has something to read, has ended or has failed (the
/// read that follows says which), for as long as the peer's host
/// answers.
///
/// # Errors
/// [`HandshakeError::Io`] once the peer's host is silent, or if the
/// socket cannot be watched.
pub(crate) fn await_answer(
    s: &TcpStream,
    p: Patience,
    who: &dyn Fn() -> String,
) -> Result<(), HandshakeError> {
    let fail = |e: std::io::Error| HandshakeError::Io(e.to_string());
    // Probes while the connection is idle: a lost host is then noticed.
    super::alive::keep_alive(s, p.dead_after).map_err(fail)?;
    let mut silence = SilenceWatch::new(p.dead_after);
    let mut clock = LongWait::new(p.warn);
    let step = LOOK_EVERY.as_millis() as libc::c_int;
    loop {
        let mut fd = libc::pollfd {
            fd: s.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut fd, 1, step) };
        if n > 0 {
            return Ok(());
        }
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(fail(e));
            }
        }
        if let Some(why) = silence.look(s.as_raw_fd(), Instant::now()) {
            return Err(HandshakeError::Io(format!(
                "{} accepted the connection, then its host went silent: {why}",
                who()
            )));
        }
        if let Some(waited) = clock.due() {
            tracing::warn!(
                "connecting on first use to {} has waited {:.0} s for its answer: its kernel accepted the connection and its host answers, so the process is alive but not answering (stopped in a debugger?); waiting on",
                who(),
                waited.as_secs_f64()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    fn patience() -> Patience {
        Patience {
            dead_after: Duration::from_secs(3),
            warn: Duration::from_millis(100),
        }
    }

    /// A peer whose kernel holds the connection but whose process does
    /// not answer (never accepts: as if stopped) is waited for past the
    /// warning; its answer, when it comes, ends the wait.
    #[test]
    fn a_silent_process_on_a_live_host_is_waited_for_until_it_answers() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            let r = await_answer(&s, patience(), &|| "rank 1".into());
            let _ = tx.send(r.is_ok());
        });
        assert!(
            rx.recv_timeout(Duration::from_millis(600)).is_err(),
            "gave up on a live peer"
        );
        let (mut peer, _) = l.accept().unwrap();
        peer.write_all(b"x").unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(true));
        t.join().unwrap();
    }

    /// A peer process that ends (its kernel closes the connection) ends
    /// the wait at once; the read that follows finds the end.
    #[test]
    fn a_peer_that_closes_ends_the_wait_at_once() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        drop(l.accept().unwrap());
        let t = Instant::now();
        assert!(await_answer(&s, patience(), &|| "rank 1".into()).is_ok());
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    }
}
