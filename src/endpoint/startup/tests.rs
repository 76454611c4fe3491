//! Network start-up against hostile clients: a silent
//! client, one sending a byte a second, a flood of 200 connections, and
//! clients with the wrong secret, each against the rendezvous (rank 0's
//! `FASTMSG_ROOT`) and against a peer's listener; every time the job starts
//! normally. Loopback only.

use crate::endpoint::NetMode;
use crate::id::Rank;
use crate::netio::auth::{self, Hello, Purpose};
use crate::netio::connect::connect_retry;
use crate::sync::{AtomicBool, Ordering};
use crate::threads;
use crate::transport::net::mesh::{self, MeshJob};
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
enum Attack {
    /// Connects and says nothing.
    Silent,
    /// Sends a HELLO-shaped stream one byte a second.
    Slow,
    /// 200 connections that say nothing.
    Flood,
    /// Complete handshakes with the wrong secret, again and again.
    WrongSecret,
}

/// Start `attack` on `addr` (retrying until something listens there);
/// it stops when `stop` is set. Returns once the attack is in place.
fn launch(addr: SocketAddr, attack: Attack, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        let connect = || connect_retry(addr, deadline, || "target".into()).unwrap();
        let mut held: Vec<TcpStream> = Vec::new();
        match attack {
            Attack::Silent => held.push(connect()),
            Attack::Flood => {
                // In place after 100 (a listener nobody accepts on yet
                // queues at most 128), the other 100 once it accepts. The
                // job may be done and its listener closed before the last
                // of those are made (a loaded machine): they are best effort.
                for i in 0..200 {
                    if i == 100 {
                        let _ = ready_tx.send(());
                    }
                    if i < 100 {
                        held.push(connect());
                        continue;
                    }
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let by = (Instant::now() + Duration::from_secs(2)).min(deadline);
                    match connect_retry(addr, by, || "target".into()) {
                        Ok(s) => held.push(s),
                        Err(_) => break,
                    }
                }
            }
            Attack::Slow => held.push(connect()),
            Attack::WrongSecret => {}
        }
        let _ = ready_tx.send(());
        let hello = Hello {
            purpose: Purpose::Join,
            rank: 1,
            size: 3,
            job_hash: auth::job_hash("startup"),
            params: [0, 0],
        };
        while !stop.load(Ordering::Relaxed) {
            match attack {
                Attack::Slow => {
                    let _ = held[0].write_all(b"F");
                    std::thread::sleep(Duration::from_secs(1));
                }
                Attack::WrongSecret => {
                    if let Ok(s) = TcpStream::connect(addr) {
                        let by = Instant::now() + Duration::from_secs(5);
                        let _ = auth::client(&s, b"a wrong guess", &hello, by);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                Attack::Silent | Attack::Flood => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    });
    ready_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the attack in place");
    t
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A 3-rank TCP job over the rendezvous at a port under `attack`: ranks 1
/// and 2 join only once the attack is in place.
fn rendezvous_under(attack: Attack) {
    let root = format!("127.0.0.1:{}", free_port());
    let addr: SocketAddr = root.parse().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let in_place = Arc::new(AtomicBool::new(false));
    let (st, ip) = (Arc::clone(&stop), Arc::clone(&in_place));
    let attacker = std::thread::spawn(move || {
        let t = launch(addr, attack, st);
        // SYNC POINT attack-in-place (release side): the attack is running.
        ip.store(true, Ordering::Release);
        t.join().unwrap();
    });
    let out = threads::run(
        3,
        |c| {
            c.net.mode = NetMode::named("tcp").expect("a provider of every build");
            c.net.root = Some(root.clone());
            c.net.secret = Some("the right one".into());
            c.timeout = Duration::from_secs(40);
        },
        |mut b| {
            if b.rank() != Rank(0) {
                let t = Instant::now();
                // SYNC POINT attack-in-place (acquire side).
                while !in_place.load(Ordering::Acquire) && t.elapsed() < Duration::from_secs(30) {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            let h = b.register_fn("x", |_c, _p| Ok(()));
            let mut ep = b.start()?;
            let next = Rank((ep.rank().0 + 1) % 3);
            ep.send(next, h, &[b"ok"])?;
            ep.close()?;
            Ok(())
        },
    );
    stop.store(true, Ordering::Relaxed);
    attacker.join().unwrap();
    assert!(out.is_ok(), "{attack:?}: {:?}", out.err());
}

/// Three ranks' mesh where rank 0's listener (which ranks 1 and 2 dial)
/// is under `attack` before they dial.
fn peer_listener_under(attack: Attack) {
    let listeners: Vec<TcpListener> = (0..3)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let attacker = launch(addrs[0], attack, Arc::clone(&stop));
    let results: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = listeners
            .iter()
            .enumerate()
            .map(|(me, l)| {
                let addrs = &addrs;
                s.spawn(move || {
                    let job = MeshJob {
                        me: Rank(me as u32),
                        size: 3,
                        job: "startup",
                        secret: b"the right one",
                        params: [16, 4096],
                        timeout: Duration::from_secs(40),
                    };
                    let peers: Vec<(Rank, SocketAddr)> = (0..3)
                        .filter(|&r| r != me)
                        .map(|r| (Rank(r as u32), addrs[r]))
                        .collect();
                    mesh::connect(l, &job, &peers).map(|links| links.len())
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    stop.store(true, Ordering::Relaxed);
    attacker.join().unwrap();
    for (r, res) in results.into_iter().enumerate() {
        assert_eq!(
            res.map_err(|e| e.to_string()),
            Ok(2),
            "{attack:?}: rank {r}"
        );
    }
}

#[test]
fn a_silent_client_at_the_rendezvous_delays_nobody() {
    rendezvous_under(Attack::Silent);
}

#[test]
fn a_client_sending_a_byte_a_second_at_the_rendezvous_delays_nobody() {
    rendezvous_under(Attack::Slow);
}

#[test]
fn a_flood_of_200_connections_at_the_rendezvous_delays_the_job_only_briefly() {
    rendezvous_under(Attack::Flood);
}

#[test]
fn wrong_secrets_at_the_rendezvous_are_refused_and_the_job_starts() {
    rendezvous_under(Attack::WrongSecret);
}

#[test]
fn a_silent_client_at_a_peer_listener_delays_nobody() {
    peer_listener_under(Attack::Silent);
}

#[test]
fn a_client_sending_a_byte_a_second_at_a_peer_listener_delays_nobody() {
    peer_listener_under(Attack::Slow);
}

#[test]
fn a_flood_of_200_connections_at_a_peer_listener_delays_the_job_only_briefly() {
    peer_listener_under(Attack::Flood);
}

#[test]
fn wrong_secrets_at_a_peer_listener_are_refused_and_the_job_starts() {
    peer_listener_under(Attack::WrongSecret);
}
