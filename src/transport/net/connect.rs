//! Lazy connections (`FASTMSG_CONNECT=lazy`, the default): a network
//! pair's connection, area exchange and ring set-up happen on first use,
//! not as a full mesh at start. This module owns who dials whom, the
//! tie-break, the thread that accepts, and the hand-over to the rank.
//!
//! - **Who initiates**: any rank, on its first send, put or credit wait
//!   towards a peer ([`Connector::dial`], on the rank's thread): it
//!   connects to the peer's start-up listener, authenticates (the HELLO of
//!   `crate::netio::auth`), sends its area description and reads the
//!   answer. Connecting is bounded by the job's connect timeout
//!   (`FASTMSG_TIMEOUT`); a refused connection (no listener: the peer is
//!   gone) fails at once. A connection the peer's kernel accepted but its
//!   process does not answer (stopped in a debugger) is waited for while
//!   the peer's host answers (`crate::netio::patience`), with a warning
//!   from `FASTMSG_TIMEOUT` on. Failure is a typed error naming the peer.
//! - **Who answers**: a thread per rank ([`Connector::start`]) waits in
//!   `poll(2)` on the listener, authenticates each connection on a
//!   handshake thread of its own (`crate::netio::gate`: floods and bad
//!   peers are refused as at start-up), answers the area exchange itself
//!   and hands the finished link over through a channel, raising a flag
//!   the rank's poll checks with one load ([`Connector::arrived`]) and
//!   ringing its doorbell. The rank's thread never blocks on an incoming
//!   set-up, and a dial never waits for the peer's rank thread (only for
//!   its accepting thread), so two ranks dialing each other cannot
//!   deadlock.
//! - **Both ends at once** (deterministic tie-break): each pair has one
//!   state per end (idle, dialing, accepting, dialed; the words and their
//!   rules are `crate::transport::net::lazy_pairs`, which the loom model
//!   `loom-tests/src/lazy_pairs.rs` checks). A connection arriving
//!   from peer `p` is accepted if this end is idle, or if it is dialing
//!   `p` itself and `p` is the lower rank; otherwise it is answered
//!   "refused" and closed. So when both dial at once the lower rank's
//!   connection wins: the higher rank accepts it, the lower rank refuses
//!   the higher's, and the higher rank's dial, refused, waits for the
//!   accepted link to be handed over instead.
//! - **Memory**: an unconnected peer costs its address and an 8-byte
//!   slot; see `docs/scale.md`.

#![allow(unsafe_code)]

use crate::error::{ConnectError, HandshakeError};
use crate::id::Rank;
use crate::netio::auth::{self, Hello, Purpose};
use crate::netio::gate::Gate;
use crate::netio::patience::Patience;
use crate::transport::net::lazy_pairs::LazyPairs;
use crate::transport::net::mesh;
use crate::transport::shm::mapping::MapRef;
use crate::wake::Doorbell;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The answer byte: the dial is accepted, the description follows.
const ACCEPT: u8 = 1;
/// The answer byte: the other connection of the pair wins.
const REFUSE: u8 = 2;
/// Largest area description accepted from a peer.
const MAX_DESC: usize = 4096;

/// What both ends of every connection must agree on (owned: the
/// accepting thread keeps it).
#[derive(Clone, Debug)]
pub(crate) struct LazyJob {
    /// This rank.
    pub(crate) me: Rank,
    /// Ranks in the job.
    pub(crate) size: u32,
    /// The job id (its hash is checked).
    pub(crate) job: String,
    /// The job secret.
    pub(crate) secret: Vec<u8>,
    /// Transport parameters (ring geometry).
    pub(crate) params: [u64; 2],
    /// The connect timeout (`FASTMSG_TIMEOUT`).
    pub(crate) timeout: Duration,
    /// How long a connected peer's host may stay silent before it fails
    /// (`FASTMSG_NET_DEAD_AFTER_MS`, see `crate::netio::alive`).
    pub(crate) dead_after: Duration,
}

/// A connection set up by the accepting thread, ready to be installed.
#[derive(Debug)]
pub(crate) struct Incoming {
    /// The peer number.
    pub(crate) k: usize,
    /// The connection (blocking, no timeouts).
    pub(crate) stream: TcpStream,
    /// The peer's area description (its `PeerArea`, then its wire's).
    pub(crate) theirs: Vec<u8>,
}

/// How a dial ended.
#[derive(Debug)]
pub(crate) enum Dialed {
    /// Connected: the connection and the peer's description.
    Link(TcpStream, Vec<u8>),
    /// The pair's other connection wins (or was accepted meanwhile): its
    /// link comes through [`Connector::take`].
    Crossed,
}

/// The lazy connector of one rank. See the module docs.
#[derive(Debug)]
pub(crate) struct Connector {
    job: Arc<LazyJob>,
    /// Per peer: its rank and listening address (the address entry).
    peers: Vec<(Rank, SocketAddr)>,
    /// Per peer: this rank's area description for it.
    mine: Arc<Vec<Vec<u8>>>,
    /// The words the rank and its accepting thread share.
    pairs: Arc<LazyPairs>,
    links: Receiver<Incoming>,
    /// The accepting thread's stop descriptor (an eventfd).
    stop: OwnedFd,
    thread: Option<JoinHandle<()>>,
}

impl Connector {
    /// Start accepting on `listener` for peers `peers` (sorted by rank;
    /// peer `k` is `peers[k]`), answering each with `mine[k]`; `bell` is
    /// rung when a link is handed over.
    ///
    /// # Errors
    /// The OS error of configuring the listener or starting the thread.
    pub(crate) fn start(
        listener: TcpListener,
        job: LazyJob,
        peers: Vec<(Rank, SocketAddr)>,
        mine: Vec<Vec<u8>>,
        bell: Option<MapRef<Doorbell>>,
    ) -> std::io::Result<Connector> {
        listener.set_nonblocking(true)?;
        let job = Arc::new(job);
        let mine = Arc::new(mine);
        let pairs = Arc::new(LazyPairs::new(job.me.0, peers.len()));
        let (tx, links) = std::sync::mpsc::channel();
        // SAFETY: plain eventfd creation; the result is checked.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        let stop = unsafe { OwnedFd::from_raw_fd(efd) };
        let answer = Answer {
            job: Arc::clone(&job),
            ranks: peers.iter().map(|p| p.0).collect(),
            mine: Arc::clone(&mine),
            pairs: Arc::clone(&pairs),
            tx,
            bell,
        };
        let thread = std::thread::Builder::new()
            .name(format!("fastmsg-accept-{}", job.me))
            .spawn(move || accept_loop(listener, efd, answer))
            .map_err(|e| crate::netio::thread_error("accepting", e))?;
        Ok(Connector {
            job,
            peers,
            mine,
            pairs,
            links,
            stop,
            thread: Some(thread),
        })
    }

    /// Whether a link waits to be installed (one load: the poll's check).
    #[inline]
    pub(crate) fn arrived(&self) -> bool {
        self.pairs.arrived()
    }

    /// Whether a link is accepted or waits to be installed: a peer whose
    /// dial returned is in the channel or about to be (the close flush
    /// waits for it).
    pub(crate) fn settling(&self) -> bool {
        self.pairs.settling()
    }

    /// Whether peer `k`'s connection was accepted here (handed over, or
    /// about to be).
    pub(crate) fn accepted(&self, k: usize) -> bool {
        self.pairs.accepted(k)
    }

    /// The links handed over so far.
    pub(crate) fn take(&self) -> Vec<Incoming> {
        self.pairs.take(|| self.links.try_iter().collect())
    }

    /// Wait up to `d` for the next handed-over link.
    pub(crate) fn wait(&self, d: Duration) -> Option<Incoming> {
        self.links.recv_timeout(d).ok()
    }

    /// The connect timeout.
    pub(crate) fn timeout(&self) -> Duration {
        self.job.timeout
    }

    /// Connect to peer `k` from this rank's thread (see the module docs).
    ///
    /// # Errors
    /// [`ConnectError`] naming the peer: refused (no listener), timed
    /// out, or failed to authenticate or answer.
    pub(crate) fn dial(&self, k: usize) -> Result<Dialed, ConnectError> {
        if !self.pairs.start_dial(k) {
            // The peer's connection is being (or was) accepted.
            return Ok(Dialed::Crossed);
        }
        match self.dial_once(k) {
            Ok(Some(link)) => {
                self.pairs.dialed(k);
                Ok(link)
            }
            // Refused by the tie-break: the peer's own dial wins.
            Ok(None) => Ok(Dialed::Crossed),
            // The accepting thread took the pair over meanwhile.
            Err(_) if self.pairs.taken_over(k) => Ok(Dialed::Crossed),
            Err(e) => Err(e),
        }
    }

    fn dial_once(&self, k: usize) -> Result<Option<Dialed>, ConnectError> {
        let (rank, addr) = self.peers[k];
        let who = || format!("rank {rank} at {addr}");
        let deadline = Instant::now() + self.job.timeout;
        let hello = Hello {
            purpose: Purpose::Connect,
            rank: self.job.me.0,
            size: self.job.size,
            job_hash: auth::job_hash(&self.job.job),
            params: self.job.params,
        };
        // The peer's start-up listener listened: refused means it is gone.
        // Accepted by the peer's kernel but not answered: a live peer,
        // stopped or swapped out, waited for while its host answers
        // (warned about at the connect time-out, then at each doubling).
        let listening = auth::Listening::Already {
            op: "connect (on first use) to",
            patience: Some(Patience {
                dead_after: self.job.dead_after,
                warn: self.job.timeout,
            }),
        };
        let secret = &self.job.secret;
        let s = auth::client_to_rank(addr, rank.0, secret, &hello, deadline, listening, who)?;
        let io = |source| ConnectError::Io {
            op: "exchange ring areas (on first use) with",
            peer: who(),
            source,
        };
        // The peer answers now: the rest by a fresh deadline (the wait for
        // its first answer may have outlasted the first one).
        s.set_read_timeout(Some(self.job.timeout.max(Duration::from_millis(10))))
            .map_err(io)?;
        let mut w = &s;
        send_desc(&mut w, &self.mine[k]).map_err(io)?;
        let mut answer = [0u8; 1];
        let mut r = &s;
        r.read_exact(&mut answer).map_err(io)?;
        match answer[0] {
            ACCEPT => {
                let theirs = read_desc(&mut r).map_err(io)?;
                s.set_read_timeout(None).map_err(io)?;
                Ok(Some(Dialed::Link(s, theirs)))
            }
            REFUSE => Ok(None),
            b => Err(io(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("answer byte {b}"),
            ))),
        }
    }
}

impl Drop for Connector {
    fn drop(&mut self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writing 8 bytes to our eventfd stops the accepting thread.
        unsafe {
            libc::write(
                self.stop.as_raw_fd(),
                one.as_ptr() as *const libc::c_void,
                8,
            )
        };
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Send a length-prefixed description.
pub(super) fn send_desc(w: &mut impl Write, desc: &[u8]) -> std::io::Result<()> {
    let mut b = Vec::with_capacity(4 + desc.len());
    b.extend_from_slice(&(desc.len() as u32).to_le_bytes());
    b.extend_from_slice(desc);
    w.write_all(&b)
}

/// Read a length-prefixed description (at most [`MAX_DESC`] bytes).
pub(super) fn read_desc(r: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let mut l = [0u8; 4];
    r.read_exact(&mut l)?;
    let l = u32::from_le_bytes(l) as usize;
    if l > MAX_DESC {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a {l}-byte area description (at most {MAX_DESC})"),
        ));
    }
    let mut b = vec![0u8; l];
    r.read_exact(&mut b)?;
    Ok(b)
}

/// What the accepting thread's handshakes need (cloned into each).
#[derive(Clone)]
struct Answer {
    job: Arc<LazyJob>,
    ranks: Vec<Rank>,
    mine: Arc<Vec<Vec<u8>>>,
    pairs: Arc<LazyPairs>,
    tx: Sender<Incoming>,
    bell: Option<MapRef<Doorbell>>,
}

impl Answer {
    /// Authenticate a connection, settle the tie-break, answer the area
    /// exchange and hand the link over (on a handshake thread).
    fn handshake(&self, s: &TcpStream, by: Instant) -> Result<(), HandshakeError> {
        let job = &self.job;
        let expected = |r: u32| self.ranks.binary_search(&Rank(r)).ok();
        let hash = auth::job_hash(&job.job);
        let h = auth::server(s, &job.secret, job.me.0, by, |h| {
            mesh::judge_peer(h, hash, job.size, job.params, expected(h.rank).is_some())
        })?;
        let k = expected(h.rank).ok_or_else(|| HandshakeError::WrongPeer {
            what: format!("rank {}, not a network peer", h.rank),
        })?;
        let io = |e: std::io::Error| HandshakeError::Io(e.to_string());
        s.set_read_timeout(Some(
            by.saturating_duration_since(Instant::now())
                .max(Duration::from_millis(10)),
        ))
        .map_err(io)?;
        let mut r = s;
        let theirs = read_desc(&mut r).map_err(io)?;
        // Idle, or both dial and the lower rank's connection wins.
        if !self.pairs.accept(k, h.rank) {
            let mut w = s;
            // The pair's other connection wins: say so and close.
            let _ = w.write_all(&[REFUSE]);
            return Ok(());
        }
        // Counted as settling from before the dialer can have its answer
        // until the link is in the channel (see `Connector::settling`).
        self.pairs.settle(|| self.answer(s, k, theirs))
    }

    /// Answer the accepted dial of peer `k` and hand the link over.
    fn answer(&self, s: &TcpStream, k: usize, theirs: Vec<u8>) -> Result<(), HandshakeError> {
        let io = |e: std::io::Error| HandshakeError::Io(e.to_string());
        let mut b = vec![ACCEPT];
        b.extend_from_slice(&(self.mine[k].len() as u32).to_le_bytes());
        b.extend_from_slice(&self.mine[k]);
        let mut w = s;
        w.write_all(&b).map_err(io)?;
        s.set_read_timeout(None).map_err(io)?;
        let stream = s.try_clone().map_err(io)?;
        // The rank may have gone (its transport dropped): then the link is
        // simply closed.
        let link = Incoming { k, stream, theirs };
        if self.pairs.hand_over(|| self.tx.send(link).is_ok()) {
            if let Some(b) = &self.bell {
                b.ring();
            }
        }
        Ok(())
    }
}

/// The accepting thread: wait for connections (or the stop), start their
/// handshakes, log the refused ones.
fn accept_loop(listener: TcpListener, stop: std::os::fd::RawFd, answer: Answer) {
    let who = format!("rank {}", answer.job.me);
    let mut gate: Gate<()> = Gate::new();
    let hs = move |s: &TcpStream, by: Instant| answer.handshake(s, by);
    loop {
        let mut pfds = [
            libc::pollfd {
                fd: listener.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: stop,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfds; blocks until a connection or the stop
        // (with a wake-up a second to log finished handshakes).
        let r = unsafe { libc::poll(pfds.as_mut_ptr(), 2, 1000) };
        if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
        if pfds[1].revents != 0 {
            return;
        }
        // Accept what is there (handshakes run on threads of their own).
        while let Some(a) = gate.next(
            &listener,
            Instant::now() + Duration::from_millis(1),
            &who,
            &hs,
        ) {
            if let Err(e) = a.result {
                tracing::warn!("{who} refused a connection from {}: {e}", a.from);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(me: u32, timeout: Duration) -> LazyJob {
        LazyJob {
            me: Rank(me),
            size: 3,
            job: "lazy-test".into(),
            secret: b"k".to_vec(),
            params: [4, 256],
            timeout,
            dead_after: crate::netio::alive::DEAD_AFTER,
        }
    }

    /// Ranks 1 and 2, each with its connector (peer 0 of each is the other).
    fn pair() -> (Connector, Connector) {
        let la = TcpListener::bind("127.0.0.1:0").unwrap();
        let lb = TcpListener::bind("127.0.0.1:0").unwrap();
        let (aa, ab) = (la.local_addr().unwrap(), lb.local_addr().unwrap());
        let t = Duration::from_secs(10);
        let a = Connector::start(la, job(1, t), vec![(Rank(2), ab)], vec![vec![1]], None).unwrap();
        let b = Connector::start(lb, job(2, t), vec![(Rank(1), aa)], vec![vec![2]], None).unwrap();
        (a, b)
    }

    /// The link a dial made, or the one handed over after a crossing.
    fn link(c: &Connector, d: Dialed) -> (TcpStream, Vec<u8>) {
        match d {
            Dialed::Link(s, theirs) => (s, theirs),
            Dialed::Crossed => {
                let i = c.wait(Duration::from_secs(10)).expect("the crossing link");
                assert_eq!(i.k, 0);
                (i.stream, i.theirs)
            }
        }
    }

    /// Both ends of one connection: a byte written at one end is read at
    /// the other.
    fn assert_joined(mut x: TcpStream, mut y: TcpStream) {
        x.write_all(&[0x5a]).unwrap();
        y.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut b = [0u8; 1];
        y.read_exact(&mut b).unwrap();
        assert_eq!(b[0], 0x5a);
    }

    #[test]
    fn a_dial_to_an_idle_peer_is_accepted_and_handed_over() {
        let (a, b) = pair();
        let (sa, theirs) = link(&a, a.dial(0).unwrap());
        assert_eq!(theirs, vec![2], "rank 2's description");
        // The rank's poll sees the flag, then takes the link.
        let t0 = Instant::now();
        while !b.arrived() {
            assert!(t0.elapsed() < Duration::from_secs(10), "no flag");
            std::thread::yield_now();
        }
        let mut got = b.take();
        assert_eq!(got.len(), 1);
        assert!(!b.arrived(), "the flag is down once taken");
        let i = got.pop().unwrap();
        assert_eq!((i.k, i.theirs.clone()), (0, vec![1]));
        assert_joined(sa, i.stream);
        // The pair is set up: a second dial from either end adds nothing.
        assert!(matches!(b.dial(0).unwrap(), Dialed::Crossed));
    }

    #[test]
    fn both_dialing_the_lower_ranks_connection_wins() {
        // Rank 2 is in the middle of its own dial when rank 1's arrives:
        // rank 2 (higher) accepts it, and rank 1 gets the link.
        let (a, b) = pair();
        assert!(b.pairs.start_dial(0));
        let (sa, _) = match a.dial(0).unwrap() {
            Dialed::Link(s, t) => (s, t),
            Dialed::Crossed => panic!("the lower rank's dial must win"),
        };
        let i = b.wait(Duration::from_secs(10)).expect("handed over");
        assert_joined(sa, i.stream);

        // Rank 1 is in the middle of its dial when rank 2's arrives: rank
        // 1 (lower) refuses it, and rank 2's dial says the pair crossed.
        let (a, b) = pair();
        assert!(a.pairs.start_dial(0));
        assert!(matches!(b.dial(0).unwrap(), Dialed::Crossed));
        assert!(
            a.wait(Duration::from_millis(300)).is_none(),
            "refused, not handed over"
        );
    }

    #[test]
    fn both_dialing_at_once_make_exactly_one_connection() {
        for _ in 0..10 {
            let (a, b) = pair();
            let go = std::sync::Barrier::new(2);
            let go = &go;
            let ((a, da), (b, db)) = std::thread::scope(|s| {
                let ta = s.spawn(move || {
                    go.wait();
                    let d = a.dial(0).unwrap();
                    (a, d)
                });
                let tb = s.spawn(move || {
                    go.wait();
                    let d = b.dial(0).unwrap();
                    (b, d)
                });
                (ta.join().unwrap(), tb.join().unwrap())
            });
            let one = matches!(da, Dialed::Link(..)) as u32 + matches!(db, Dialed::Link(..)) as u32;
            assert_eq!(
                one, 1,
                "one dial connects, the other crosses: {da:?} {db:?}"
            );
            let (sa, ta) = link(&a, da);
            let (sb, tb) = link(&b, db);
            assert_eq!((ta, tb), (vec![2], vec![1]));
            assert_joined(sa, sb);
        }
    }

    #[test]
    fn a_dial_to_a_gone_listener_fails_at_once_naming_the_rank() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let gone = l.local_addr().unwrap();
        drop(l);
        let me = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = Connector::start(
            me,
            job(1, Duration::from_secs(30)),
            vec![(Rank(2), gone)],
            vec![vec![]],
            None,
        )
        .unwrap();
        let t0 = Instant::now();
        let e = c.dial(0).unwrap_err();
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "took {:?}",
            t0.elapsed()
        );
        assert!(matches!(e, ConnectError::Io { .. }), "{e:?}");
        assert!(e.to_string().contains("rank 2"), "{e}");
    }

    #[test]
    fn a_stranger_is_refused_and_the_pair_still_connects() {
        let (a, b) = pair();
        // Rank 1's listener gets garbage: refused, rank 1 goes on.
        let mut g = TcpStream::connect(b.peers[0].1).unwrap();
        g.write_all(&[0x42; 64]).unwrap();
        drop(g);
        let (sb, _) = link(&b, b.dial(0).unwrap());
        let i = a.wait(Duration::from_secs(10)).expect("handed over");
        assert_joined(sb, i.stream);
    }
}
