//! Authenticating a TCP connection with the job's secret.
//!
//! Every connection of a network job — a rank joining the rendezvous, a
//! rank connecting to a peer — starts with this exchange. The connecting
//! side speaks first (IWARP §3.2: the active side sends first):
//!
//! ```text
//!  client → server  HELLO      magic, version, purpose, rank, size, job hash,
//!                              two parameters, client nonce          (64 B)
//!  server → client  CHALLENGE  magic, server rank, server nonce,
//!                              HMAC(secret, "server" ‖ HELLO ‖ nonce ‖ rank)  (64 B)
//!  client → server  PROOF      HMAC(secret, "client" ‖ HELLO ‖ server nonce)  (32 B)
//!  server → client  VERDICT    0 = accepted, else the reason code       (1 B)
//! ```
//!
//! HMAC-SHA-256 over fresh nonces: the secret never travels, a recorded
//! exchange cannot be replayed, and each side proves it knows the secret.
//! Whatever the peer sends is checked; a failure is a [`HandshakeError`]
//! naming what was wrong, and the server logs every refusal.

use super::gate::Bounded;
use super::patience::Patience;
use crate::error::{ConnectError, HandshakeError};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// "FMNETv01" little-endian.
const MAGIC: u64 = u64::from_le_bytes(*b"FMNETv01");
/// Bumped whenever the wire format (handshake or records) changes.
pub(crate) const WIRE_VERSION: u32 = 1;
/// How long one handshake may take, in all (not per read).
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a connection is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Purpose {
    /// A rank joins the rendezvous at rank 0.
    Join = 1,
    /// A rank connects to a peer for the data path.
    Connect = 2,
}

/// What the client says about itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hello {
    pub(crate) purpose: Purpose,
    pub(crate) rank: u32,
    pub(crate) size: u32,
    pub(crate) job_hash: u64,
    /// Transport parameters both ends must agree on (ring geometry).
    pub(crate) params: [u64; 2],
}

const V_OK: u8 = 0;
const V_SECRET: u8 = 1;
const V_PEER: u8 = 2;
const V_MISMATCH: u8 = 3;

/// FNV-1a of the job id: both ends must be in the same job.
pub(crate) fn job_hash(job: &str) -> u64 {
    job.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn io(e: std::io::Error) -> HandshakeError {
    HandshakeError::Io(e.to_string())
}

fn mac(secret: &[u8], label: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC takes any key length");
    m.update(label);
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

fn verify(secret: &[u8], label: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC takes any key length");
    m.update(label);
    for p in parts {
        m.update(p);
    }
    // Constant-time comparison.
    m.verify_slice(tag).is_ok()
}

fn nonce() -> [u8; 16] {
    let mut n = [0u8; 16];
    getrandom::fill(&mut n).expect("the OS random source");
    n
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"))
}

impl Hello {
    fn encode(&self, nonce: &[u8; 16]) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        b[8..12].copy_from_slice(&WIRE_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&(self.purpose as u32).to_le_bytes());
        b[16..20].copy_from_slice(&self.rank.to_le_bytes());
        b[20..24].copy_from_slice(&self.size.to_le_bytes());
        b[24..32].copy_from_slice(&self.job_hash.to_le_bytes());
        b[32..40].copy_from_slice(&self.params[0].to_le_bytes());
        b[40..48].copy_from_slice(&self.params[1].to_le_bytes());
        b[48..64].copy_from_slice(nonce);
        b
    }

    fn decode(b: &[u8; 64]) -> Result<Hello, HandshakeError> {
        let magic = u64_at(b, 0);
        if magic != MAGIC {
            return Err(HandshakeError::BadMagic { found: magic });
        }
        let version = u32_at(b, 8);
        if version != WIRE_VERSION {
            return Err(HandshakeError::Version {
                found: version,
                expected: WIRE_VERSION,
            });
        }
        let purpose = match u32_at(b, 12) {
            1 => Purpose::Join,
            2 => Purpose::Connect,
            p => {
                return Err(HandshakeError::WrongPeer {
                    what: format!("asking for unknown purpose {p}"),
                })
            }
        };
        Ok(Hello {
            purpose,
            rank: u32_at(b, 16),
            size: u32_at(b, 20),
            job_hash: u64_at(b, 24),
            params: [u64_at(b, 32), u64_at(b, 40)],
        })
    }
}

/// [`client_with`] by `deadline` alone (the tests' client).
#[cfg(test)]
pub(crate) fn client(
    s: &TcpStream,
    secret: &[u8],
    hello: &Hello,
    deadline: Instant,
) -> Result<u32, HandshakeError> {
    client_with(s, secret, hello, deadline, None)
}

/// Client side: introduce ourselves, check the server knows the secret,
/// prove we do, all by `deadline` (however the server paces its bytes).
/// With `patience`, the server's first answer is waited for without bound
/// while its host lives ([`super::patience`]), and the rest of the
/// handshake then has [`HANDSHAKE_TIMEOUT`]. Returns the server's rank.
///
/// # Errors
/// [`HandshakeError`] naming what failed (a refusal by the server is
/// reported with its reason).
fn client_with(
    s: &TcpStream,
    secret: &[u8],
    hello: &Hello,
    deadline: Instant,
    patience: Option<(Patience, &dyn Fn() -> String)>,
) -> Result<u32, HandshakeError> {
    let mut b = Bounded::new(s, deadline);
    let hello_b = hello.encode(&nonce());
    b.write_all(&hello_b).map_err(io)?;
    if let Some((p, who)) = patience {
        super::patience::await_answer(s, p, who)?;
        b = Bounded::new(s, Instant::now() + HANDSHAKE_TIMEOUT);
    }
    let mut ch = [0u8; 64];
    b.read_exact(&mut ch).map_err(io)?;
    let magic = u64_at(&ch, 0);
    if magic != MAGIC {
        return Err(HandshakeError::BadMagic { found: magic });
    }
    let server_rank = u32_at(&ch, 8);
    let nonce_s = &ch[16..32];
    if !verify(
        secret,
        b"fastmsg-server",
        &[&hello_b, nonce_s, &ch[8..12]],
        &ch[32..64],
    ) {
        return Err(HandshakeError::BadSecret);
    }
    let proof = mac(secret, b"fastmsg-client", &[&hello_b, nonce_s]);
    b.write_all(&proof).map_err(io)?;
    let mut v = [0u8; 1];
    b.read_exact(&mut v)
        .map_err(|e| HandshakeError::Io(format!("the server closed without a verdict ({e})")))?;
    unbound(s)?;
    match v[0] {
        V_OK => Ok(server_rank),
        V_SECRET => Err(HandshakeError::BadSecret),
        V_MISMATCH => Err(HandshakeError::WrongPeer {
            what:
                "refused by the server: settings differ (FASTMSG_NET_SLOTS / FASTMSG_NET_SLOT_SIZE)"
                    .into(),
        }),
        _ => Err(HandshakeError::WrongPeer {
            what: "refused by the server: not expected in this job".into(),
        }),
    }
}

/// Back to no time-outs once a handshake is over.
fn unbound(s: &TcpStream) -> Result<(), HandshakeError> {
    s.set_read_timeout(None).map_err(io)?;
    s.set_write_timeout(None).map_err(io)
}

/// Whether the listener a client dials is known to listen already: what
/// [`client_retry`] makes of a refused connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Listening {
    /// Maybe not yet (start-up: the peer may not have bound it): a refused
    /// or timed-out connection is retried until the deadline.
    NotYet,
    /// Yes (a peer's start-up listener, dialed on first use): a refused
    /// connection means the peer is gone and fails at once, as a
    /// [`ConnectError::Io`] whose operation is `op`; one accepted but not
    /// answered is a live peer, waited for with `patience` if given.
    Already {
        /// The operation the error names.
        op: &'static str,
        /// How to wait for the peer's first answer (`None`: by the
        /// deadline).
        patience: Option<Patience>,
    },
}

/// Connect to `addr` and authenticate as `hello`, retrying — a refused
/// or closed connection (only while the listener may not listen yet, see
/// [`Listening`]), a handshake cut short or timed out (a server busy
/// with other handshakes closes new connections at once, see
/// [`super::gate`]) — until `deadline`, the job's start-up deadline. Each
/// attempt has [`HANDSHAKE_TIMEOUT`] at most. A server that proves it does
/// not know the secret, or refuses us, is not retried.
///
/// # Errors
/// [`ConnectError::Handshake`] for a refusal or, at the deadline, the last
/// attempt's failure; [`ConnectError::Timeout`] if nothing listened;
/// [`ConnectError::Io`] for a refused connection to a listener that was
/// [`Listening::Already`].
pub(crate) fn client_retry(
    addr: SocketAddr,
    secret: &[u8],
    hello: &Hello,
    mut deadline: Instant,
    listening: Listening,
    who: impl Fn() -> String,
) -> Result<(u32, TcpStream), ConnectError> {
    let (mut pause, max) = match listening {
        Listening::NotYet => (Duration::from_millis(10), Duration::from_millis(200)),
        Listening::Already { .. } => (Duration::from_millis(5), Duration::from_millis(200)),
    };
    let patience = match listening {
        Listening::Already { patience, .. } => patience,
        Listening::NotYet => None,
    };
    loop {
        let s = match listening {
            Listening::NotYet => super::connect::connect_retry(addr, deadline, &who)?,
            Listening::Already { op, .. } => {
                super::connect::connect_once(addr, deadline, op, &who)?
            }
        };
        let attempt = (Instant::now() + HANDSHAKE_TIMEOUT).min(deadline);
        let who_dyn: &dyn Fn() -> String = &who;
        let began = Instant::now();
        let r = client_with(&s, secret, hello, attempt, patience.map(|p| (p, who_dyn)));
        if patience.is_some() {
            // Time spent waiting patiently for a live peer is not spent
            // from the retries' budget (an attempt is otherwise bounded
            // by the handshake's time-out).
            deadline += began.elapsed().saturating_sub(HANDSHAKE_TIMEOUT);
        }
        match r {
            Ok(rank) => return Ok((rank, s)),
            Err(HandshakeError::Io(_)) if Instant::now() + pause < deadline => {
                drop(s);
                std::thread::sleep(pause);
                pause = (pause * 2).min(max);
            }
            Err(source) => {
                return Err(ConnectError::Handshake {
                    peer: who(),
                    source,
                })
            }
        }
    }
}

/// [`client_retry`] to the listener of rank `rank`: the server must prove
/// it is that rank.
///
/// # Errors
/// Those of [`client_retry`], and [`HandshakeError::WrongPeer`] (in a
/// [`ConnectError::Handshake`]) when another rank answers.
pub(crate) fn client_to_rank(
    addr: SocketAddr,
    rank: u32,
    secret: &[u8],
    hello: &Hello,
    deadline: Instant,
    listening: Listening,
    who: impl Fn() -> String,
) -> Result<TcpStream, ConnectError> {
    let (server, stream) = client_retry(addr, secret, hello, deadline, listening, &who)?;
    if server != rank {
        return Err(ConnectError::Handshake {
            peer: who(),
            source: HandshakeError::WrongPeer {
                what: format!("rank {server}, not rank {rank}"),
            },
        });
    }
    Ok(stream)
}

/// Server side: read the client's HELLO, prove we know the secret, check
/// its proof, then let `accept` judge the HELLO (job, rank, parameters),
/// all by `deadline` (however the client paces its bytes). The verdict is
/// sent back either way.
///
/// # Errors
/// [`HandshakeError`] naming what failed; the connection should then be
/// closed and the refusal logged.
pub(crate) fn server(
    s: &TcpStream,
    secret: &[u8],
    my_rank: u32,
    deadline: Instant,
    accept: impl FnOnce(&Hello) -> Result<(), HandshakeError>,
) -> Result<Hello, HandshakeError> {
    let mut b = Bounded::new(s, deadline);
    let mut hello_b = [0u8; 64];
    b.read_exact(&mut hello_b).map_err(io)?;
    let hello = Hello::decode(&hello_b)?;
    let nonce_s = nonce();
    let mut ch = [0u8; 64];
    ch[0..8].copy_from_slice(&MAGIC.to_le_bytes());
    ch[8..12].copy_from_slice(&my_rank.to_le_bytes());
    ch[16..32].copy_from_slice(&nonce_s);
    let tag = mac(secret, b"fastmsg-server", &[&hello_b, &nonce_s, &ch[8..12]]);
    ch[32..64].copy_from_slice(&tag);
    b.write_all(&ch).map_err(io)?;
    let mut proof = [0u8; 32];
    b.read_exact(&mut proof).map_err(io)?;
    if !verify(secret, b"fastmsg-client", &[&hello_b, &nonce_s], &proof) {
        let _ = b.write_all(&[V_SECRET]);
        return Err(HandshakeError::BadSecret);
    }
    if let Err(e) = accept(&hello) {
        let code = if matches!(e, HandshakeError::Mismatch { .. }) {
            V_MISMATCH
        } else {
            V_PEER
        };
        let _ = b.write_all(&[code]);
        return Err(e);
    }
    b.write_all(&[V_OK]).map_err(io)?;
    unbound(s)?;
    Ok(hello)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        (c, s)
    }

    fn soon() -> Instant {
        Instant::now() + HANDSHAKE_TIMEOUT
    }

    #[test]
    fn a_client_sending_a_byte_a_second_is_cut_at_the_total_deadline() {
        let (mut c, s) = pair();
        let t = std::thread::spawn(move || {
            for _ in 0..20 {
                if c.write_all(&[0x46]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let start = Instant::now();
        let e = server(&s, b"k", 0, start + Duration::from_millis(500), |_| Ok(())).unwrap_err();
        assert!(matches!(e, HandshakeError::Io(_)), "{e}");
        assert!(
            start.elapsed() < Duration::from_millis(1500),
            "cut at the deadline, not after the last byte: {:?}",
            start.elapsed()
        );
        drop(s);
        t.join().unwrap();
    }

    fn hello() -> Hello {
        Hello {
            purpose: Purpose::Connect,
            rank: 3,
            size: 4,
            job_hash: job_hash("job"),
            params: [16, 65536],
        }
    }

    #[test]
    fn the_same_secret_is_accepted() {
        let (c, s) = pair();
        let t = std::thread::spawn(move || server(&s, b"sesame", 1, soon(), |_| Ok(())));
        assert_eq!(client(&c, b"sesame", &hello(), soon()), Ok(1));
        assert_eq!(t.join().unwrap(), Ok(hello()));
    }

    #[test]
    fn a_wrong_secret_is_refused_on_both_sides() {
        let (c, s) = pair();
        let t = std::thread::spawn(move || server(&s, b"sesame", 1, soon(), |_| Ok(())));
        assert_eq!(
            client(&c, b"guess", &hello(), soon()),
            Err(HandshakeError::BadSecret),
            "the client sees the server cannot prove our secret"
        );
        drop(c);
        let e = t.join().unwrap().unwrap_err();
        assert!(
            matches!(e, HandshakeError::BadSecret | HandshakeError::Io(_)),
            "{e}"
        );
    }

    #[test]
    fn garbage_is_refused_by_magic() {
        let (mut c, s) = pair();
        c.write_all(&[0x47; 64]).unwrap();
        let e = server(&s, b"sesame", 1, soon(), |_| Ok(())).unwrap_err();
        assert_eq!(
            e,
            HandshakeError::BadMagic {
                found: 0x4747_4747_4747_4747
            }
        );
    }

    #[test]
    fn the_servers_judgement_reaches_the_client() {
        let (c, s) = pair();
        let t = std::thread::spawn(move || {
            server(&s, b"k", 0, soon(), |h| {
                Err(HandshakeError::Mismatch {
                    what: "ring slots",
                    ours: 8,
                    theirs: h.params[0],
                })
            })
        });
        let e = client(&c, b"k", &hello(), soon()).unwrap_err();
        assert!(matches!(e, HandshakeError::WrongPeer { .. }), "{e}");
        assert!(matches!(
            t.join().unwrap(),
            Err(HandshakeError::Mismatch { theirs: 16, .. })
        ));
    }

    /// A listener that is gone: refused at once when it listened already,
    /// retried until the deadline when it may not listen yet.
    fn gone() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    }

    #[test]
    fn a_refused_connection_fails_at_once_only_to_a_listener_that_listened() {
        let at = gone();
        let who = || "rank 7".to_string();
        let by = Instant::now() + Duration::from_secs(30);
        let start = Instant::now();
        let already = Listening::Already {
            op: "dial",
            patience: None,
        };
        let e = client_retry(at, b"k", &hello(), by, already, who).unwrap_err();
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{:?}",
            start.elapsed()
        );
        assert!(matches!(e, ConnectError::Io { op: "dial", .. }), "{e:?}");
        assert!(e.to_string().contains("rank 7"), "{e}");

        let by = Instant::now() + Duration::from_millis(300);
        let e = client_retry(at, b"k", &hello(), by, Listening::NotYet, who).unwrap_err();
        assert!(Instant::now() >= by, "retried until the deadline");
        assert!(matches!(e, ConnectError::Timeout { .. }), "{e:?}");
    }

    #[test]
    fn another_rank_answering_is_a_wrong_peer() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            server(&s, b"k", 5, soon(), |_| Ok(()))
        });
        let e = client_to_rank(at, 4, b"k", &hello(), soon(), Listening::NotYet, || {
            "rank 4".into()
        })
        .unwrap_err();
        let ConnectError::Handshake { source, .. } = &e else {
            panic!("{e:?}");
        };
        assert!(matches!(source, HandshakeError::WrongPeer { what } if what.contains("rank 5")));
        assert!(t.join().unwrap().is_ok());
    }
}
