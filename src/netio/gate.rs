//! Concurrent authentication of incoming start-up connections.
//!
//! A start-up listener — rank 0's rendezvous, every rank's peer listener —
//! accepts connections as fast as they come and hands each to a thread of
//! its own, which runs the handshake under one *total* deadline
//! ([`auth::HANDSHAKE_TIMEOUT`] from accept, however the peer paces its
//! bytes: see [`Bounded`]). A silent client, one sending a byte a second,
//! or a flood of connections therefore delays no real rank: their
//! handshakes fail on their own clocks while the real ones complete beside
//! them. At most [`MAX_PENDING`] (256) handshakes run at once; a connection
//! beyond that is closed at once, and the real ranks, which retry until
//! the job's start-up deadline (`auth::client_retry`), get in as soon as a
//! place frees. Results come back over a channel, in completion order.

use super::auth;
use crate::error::HandshakeError;
use crate::sync::{AtomicUsize, Ordering};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Handshakes running at once on one listener, at most: beyond, a flood
/// delays real ranks until the flood's handshakes time out
/// ([`auth::HANDSHAKE_TIMEOUT`]). Each costs a small thread
/// ([`HANDSHAKE_STACK`]).
pub(crate) const MAX_PENDING: usize = 256;
/// Stack of a handshake thread (HMAC-SHA-256 and a few small buffers).
const HANDSHAKE_STACK: usize = 256 * 1024;

/// A stream whose reads and writes all end by one deadline: before each
/// call the socket's timeout is set to the time left, and once it has
/// passed every call fails with `TimedOut`.
pub(crate) struct Bounded<'a> {
    s: &'a TcpStream,
    deadline: Instant,
}

impl<'a> Bounded<'a> {
    pub(crate) fn new(s: &'a TcpStream, deadline: Instant) -> Self {
        Bounded { s, deadline }
    }

    fn left(&self) -> std::io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the handshake's deadline passed",
            ));
        }
        Ok(left)
    }
}

/// A socket time-out (`EAGAIN`, which reads "Resource temporarily
/// unavailable") as what it is: the deadline passed with no answer.
fn timed_out(r: std::io::Result<usize>, left: Duration) -> std::io::Result<usize> {
    r.map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "no answer within the handshake's time-out ({:.1} s left of it at the call; FASTMSG_TIMEOUT)",
                left.as_secs_f64()
            ),
        ),
        _ => e,
    })
}

impl Read for Bounded<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.left()?;
        self.s.set_read_timeout(Some(left))?;
        timed_out((&mut &*self.s).read(buf), left)
    }
}

impl Write for Bounded<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let left = self.left()?;
        self.s.set_write_timeout(Some(left))?;
        timed_out((&mut &*self.s).write(buf), left)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One finished handshake.
pub(crate) struct Admitted<T> {
    /// Where the connection came from.
    pub(crate) from: SocketAddr,
    /// What the handshake made of it, with the stream if it passed.
    pub(crate) result: Result<(T, TcpStream), HandshakeError>,
}

/// The handshakes of one listener.
pub(crate) struct Gate<T> {
    tx: Sender<Admitted<T>>,
    rx: Receiver<Admitted<T>>,
    pending: Arc<AtomicUsize>,
    cap: usize,
    turned_away: u64,
    /// Accepts that failed (out of descriptors, …): logged at powers of two.
    accept_errors: u64,
}

impl<T: Send + 'static> Gate<T> {
    pub(crate) fn new() -> Self {
        Self::with_cap(MAX_PENDING)
    }

    /// A gate running at most `cap` handshakes at once.
    pub(crate) fn with_cap(cap: usize) -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        Gate {
            tx,
            rx,
            pending: Arc::new(AtomicUsize::new(0)),
            cap,
            turned_away: 0,
            accept_errors: 0,
        }
    }

    /// The next finished handshake, accepting (on the non-blocking
    /// `listener`) and starting handshakes meanwhile; `None` once
    /// `deadline` has passed. `who` names the listener in logs.
    pub(crate) fn next<F>(
        &mut self,
        listener: &TcpListener,
        deadline: Instant,
        who: &str,
        handshake: &F,
    ) -> Option<Admitted<T>>
    where
        F: Fn(&TcpStream, Instant) -> Result<T, HandshakeError> + Clone + Send + 'static,
    {
        loop {
            match self.rx.try_recv() {
                Ok(a) => return Some(a),
                Err(_) if Instant::now() >= deadline => return None,
                Err(_) => {}
            }
            match listener.accept() {
                Ok((s, from)) => self.start(s, from, who, handshake),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    match self.rx.recv_timeout(Duration::from_millis(2)) {
                        Ok(a) => return Some(a),
                        Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
                    }
                }
                Err(e) => {
                    // Out of descriptors (EMFILE) and the like persist:
                    // wait as on an empty listener instead of spinning
                    // (the deadline still ends the wait), and log the
                    // failure at powers of two, not millions of times.
                    self.accept_errors += 1;
                    if self.accept_errors.is_power_of_two() {
                        tracing::warn!(
                            "{who}: accept failed ({} time(s) so far): {e}",
                            self.accept_errors
                        );
                    }
                    if let Ok(a) = self.rx.recv_timeout(Duration::from_millis(2)) {
                        return Some(a);
                    }
                }
            }
        }
    }

    fn start<F>(&mut self, s: TcpStream, from: SocketAddr, who: &str, handshake: &F)
    where
        F: Fn(&TcpStream, Instant) -> Result<T, HandshakeError> + Clone + Send + 'static,
    {
        // Relaxed: a counter of running threads, no data published by it.
        if self.pending.load(Ordering::Relaxed) >= self.cap {
            self.turned_away += 1;
            if self.turned_away.is_power_of_two() {
                tracing::warn!(
                    "{who}: {} handshakes already running; closed {} connection(s) at once (the real ranks retry)",
                    self.cap,
                    self.turned_away
                );
            }
            return; // dropping `s` closes it
        }
        let _ = s.set_nonblocking(false);
        let deadline = Instant::now() + auth::HANDSHAKE_TIMEOUT;
        let tx = self.tx.clone();
        let pending = Arc::clone(&self.pending);
        let hs = handshake.clone();
        pending.fetch_add(1, Ordering::Relaxed);
        let spawned = std::thread::Builder::new()
            .name("fastmsg-handshake".into())
            .stack_size(HANDSHAKE_STACK)
            .spawn(move || {
                let result = hs(&s, deadline).map(|t| (t, s));
                pending.fetch_sub(1, Ordering::Relaxed);
                // The receiver may be gone (start-up over): then the
                // connection is simply closed.
                let _ = tx.send(Admitted { from, result });
            });
        if let Err(e) = spawned {
            self.pending.fetch_sub(1, Ordering::Relaxed);
            tracing::warn!("{who}: cannot start a handshake thread: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netio::auth::{Hello, Purpose};

    #[test]
    fn beyond_the_cap_connections_are_closed_and_a_real_client_gets_in_by_retrying() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let mut gate = Gate::with_cap(2);
            let deadline = Instant::now() + Duration::from_secs(30);
            let hs = |s: &TcpStream, by: Instant| auth::server(s, b"k", 0, by, |_| Ok(()));
            loop {
                match gate.next(&l, deadline, "test", &hs) {
                    Some(Admitted {
                        result: Ok((h, _)), ..
                    }) => return Some(h.rank),
                    Some(_) => {}
                    None => return None,
                }
            }
        });
        // Two silent connections fill the gate for HANDSHAKE_TIMEOUT.
        let _silent: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(200));
        // A third is closed at once: its read ends (EOF or reset).
        let mut third = TcpStream::connect(addr).unwrap();
        third
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut b = [0u8; 1];
        let r = third.read(&mut b);
        assert!(
            matches!(r, Ok(0))
                || r.as_ref()
                    .is_err_and(|e| e.kind() != std::io::ErrorKind::WouldBlock
                        && e.kind() != std::io::ErrorKind::TimedOut),
            "turned away at once: {r:?}"
        );
        // A real client retries until a place frees.
        let hello = Hello {
            purpose: Purpose::Connect,
            rank: 5,
            size: 8,
            job_hash: 0,
            params: [0, 0],
        };
        let by = Instant::now() + Duration::from_secs(20);
        let not_yet = auth::Listening::NotYet;
        let (rank, _s) =
            auth::client_retry(addr, b"k", &hello, by, not_yet, || "server".into()).unwrap();
        assert_eq!(rank, 0);
        assert_eq!(server.join().unwrap(), Some(5));
    }
}
