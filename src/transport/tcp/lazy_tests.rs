//! Lazy set-up of the TCP transport (`FASTMSG_CONNECT=lazy`), two real
//! transports over loopback and a third rank whose listener is gone: a
//! first send connects the pair and the receiver's poll takes the link
//! in; a send to the gone rank fails at once with a typed error naming
//! it; a lazily connected peer that leaves is reported as before.

use super::*;
use crate::error::{ExtractError, NetError};
use crate::transport::net::connect::LazyJob;
use crate::transport::Transport;
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

fn geo() -> RingGeometry {
    RingGeometry::checked(4, 256).unwrap()
}

fn lazy(me: u32, listener: TcpListener, peers: Vec<(Rank, SocketAddr)>) -> TcpTransport {
    let window = crate::transport::shm::mapping::Mapping::anon(4096)
        .unwrap()
        .window(0, 4096);
    let job = LazyJob {
        me: Rank(me),
        size: 3,
        job: "lazy-unit".into(),
        secret: b"s".to_vec(),
        params: [4, 256],
        timeout: Duration::from_secs(20),
        dead_after: crate::netio::alive::DEAD_AFTER,
    };
    start_lazy(
        Rank(me),
        3,
        geo(),
        peers,
        listener,
        job,
        NetTargets { window, bell: None },
    )
    .unwrap()
}

use super::tests::header;

/// Ranks 0 and 1 as lazy transports; rank 2's address has no listener.
fn two_and_a_ghost() -> (TcpTransport, TcpTransport) {
    let l0 = TcpListener::bind("127.0.0.1:0").unwrap();
    let l1 = TcpListener::bind("127.0.0.1:0").unwrap();
    let ghost = TcpListener::bind("127.0.0.1:0").unwrap();
    let (a0, a1, a2) = (
        l0.local_addr().unwrap(),
        l1.local_addr().unwrap(),
        ghost.local_addr().unwrap(),
    );
    drop(ghost);
    let t0 = lazy(0, l0, vec![(Rank(1), a1), (Rank(2), a2)]);
    let t1 = lazy(1, l1, vec![(Rank(0), a0), (Rank(2), a2)]);
    (t0, t1)
}

#[test]
fn a_first_send_connects_the_pair_and_the_receiver_takes_the_link_in() {
    let (mut t0, mut t1) = two_and_a_ghost();
    assert!(t0.connected().is_empty() && t1.connected().is_empty());
    assert_eq!(t0.peers(), vec![Rank(1), Rank(2)], "every peer is routed");
    assert!(t0.try_send_inline(Rank(1), header(0, 5), &[b"hello"]));
    assert_eq!(t0.connected(), vec![Rank(1)]);
    let t = Instant::now();
    let f = loop {
        if let Some(f) = t1.poll() {
            break f.unwrap();
        }
        assert!(t.elapsed() < Duration::from_secs(10), "nothing arrived");
    };
    assert_eq!(f.header.len, 5);
    assert_eq!(t1.connected(), vec![Rank(0)]);
    // And back, over the same connection.
    assert!(t1.try_send_inline(Rank(0), header(1, 3), &[b"hey"]));
    let t = Instant::now();
    while t0.poll().is_none() {
        assert!(t.elapsed() < Duration::from_secs(10), "no answer");
    }
    assert_eq!(t0.connected(), vec![Rank(1)]);
    assert_eq!(t1.connected(), vec![Rank(0)]);
}

#[test]
fn a_send_to_a_rank_whose_listener_is_gone_fails_at_once_naming_it() {
    let (mut t0, _t1) = two_and_a_ghost();
    let t = Instant::now();
    assert!(!t0.try_send_inline(Rank(2), header(0, 1), &[b"x"]));
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "took {:?}",
        t.elapsed()
    );
    assert!(t0.is_gone(Rank(2)));
    match t0.check_peers() {
        Err(ExtractError::Network(NetError::Unreachable { rank, why })) => {
            assert_eq!(rank, Rank(2));
            assert!(why.contains("rank 2"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    // Reported once; rank 1 is unaffected.
    t0.check_peers().unwrap();
    assert!(t0.try_send_inline(Rank(1), header(0, 1), &[b"y"]));
}

#[test]
fn a_lazily_connected_peer_that_leaves_is_reported_within_a_second() {
    let (mut t0, mut t1) = two_and_a_ghost();
    assert!(t1.try_send_inline(Rank(0), header(1, 1), &[b"z"]));
    let t = Instant::now();
    while t0.poll().is_none() {
        assert!(t.elapsed() < Duration::from_secs(10), "nothing arrived");
    }
    // Dropped without the close barrier: its goodbye says it left.
    drop(t1);
    let t = Instant::now();
    loop {
        match t0.check_peers() {
            Err(ExtractError::PeerLeft { rank }) => {
                assert_eq!(rank, Rank(1));
                break;
            }
            Err(e) => panic!("{e:?}"),
            Ok(()) => {}
        }
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "not reported in a second"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}
