//! Lazy connections (`FASTMSG_CONNECT=lazy`, the default) with the
//! network forced on one host (`FASTMSG_NET=tcp`): a rank holds
//! connections only to the peers it talked to (and to rank 0, which
//! every rank reports to at start and close); pairs that dial each other
//! at once end up with one connection and lose nothing; a peer that left
//! before anyone connected to it is reported, typed and at once; `eager`
//! still connects the full mesh.

mod common;

use fastmsg::error::{ExtractError, NetError};
use fastmsg::threads;
use fastmsg::{Config, ConnectMode, NetMode, Rank};
use std::time::{Duration, Instant};

fn tcp(c: &mut Config) {
    c.net.mode = NetMode::named("tcp").expect("a provider of every build");
    c.net.secret = Some("lazy-test-secret".into());
    c.timeout = Duration::from_secs(60);
}

fn ranks(v: &[u32]) -> Vec<Rank> {
    v.iter().map(|&r| Rank(r)).collect()
}

#[test]
fn six_ranks_where_only_1_and_2_talk_hold_no_other_connection() {
    let got = threads::run(6, tcp, |mut b| {
        let (h, n) = common::counting_handler(&mut b);
        let mut ep = b.start()?;
        let me = ep.rank().0;
        if me == 1 || me == 2 {
            let peer = Rank(3 - me);
            for i in 0..50usize {
                ep.send(peer, h, &[&vec![me as u8; 1 + i * 997]])?;
            }
            ep.wait_until(|| n.get() == 50)?;
        }
        let held = ep.network_connections();
        ep.close()?;
        Ok(held)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got[0], ranks(&[1, 2, 3, 4, 5]), "rank 0: the start-up star");
    assert_eq!(got[1], ranks(&[0, 2]));
    assert_eq!(got[2], ranks(&[0, 1]));
    for (r, held) in got.iter().enumerate().skip(3) {
        assert_eq!(held, &ranks(&[0]), "rank {r} talked to nobody");
    }
}

#[test]
fn every_pair_dialing_at_once_connects_once_and_delivers_everything() {
    // Every rank sends to every other at once from the start: most pairs
    // are dialed from both ends at the same time (the tie-break).
    let got = threads::run(6, tcp, |mut b| {
        let (h, n) = common::counting_handler(&mut b);
        let mut ep = b.start()?;
        let me = ep.rank().0;
        for round in 0..20usize {
            for d in (0..6).filter(|&d| d != me) {
                ep.send(Rank(d), h, &[&vec![me as u8; 1 + round * 3001]])?;
            }
        }
        ep.wait_until(|| n.get() == 5 * 20)?;
        let held = ep.network_connections();
        ep.close()?;
        Ok((n.get(), held))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    for (r, (n, held)) in got.iter().enumerate() {
        assert_eq!(*n, 100, "rank {r}");
        let others: Vec<Rank> = (0..6).filter(|&d| d != r as u32).map(Rank).collect();
        assert_eq!(held, &others, "rank {r}");
    }
}

#[test]
fn eager_connects_the_full_mesh_at_start() {
    let got = threads::run(
        4,
        |c| {
            tcp(c);
            c.net.connect = ConnectMode::Eager;
        },
        |b| {
            let ep = b.start()?;
            let held = ep.network_connections();
            ep.close()?;
            Ok(held)
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for (r, held) in got.iter().enumerate() {
        let others: Vec<Rank> = (0..4).filter(|&d| d != r as u32).map(Rank).collect();
        assert_eq!(held, &others, "rank {r}");
    }
}

/// On one host the segment's lifelines see the rank go (`PeerLeft`); a
/// first send over the network to it would find its listener gone
/// (`NetError::Unreachable`, see `src/transport/tcp/lazy_tests.rs`).
/// Either way the error names the rank, within a second.
#[test]
fn a_peer_gone_before_anyone_connected_to_it_is_reported_within_a_second() {
    let gone = std::sync::Barrier::new(3);
    let got = threads::run(3, tcp, |mut b| {
        let h = b.register_fn("nop", |_ctx, _p| Ok(()));
        let mut ep = b.start()?;
        let me = ep.rank().0;
        if me == 2 {
            // Leave without close: the listener goes with the endpoint.
            drop(ep);
            gone.wait();
            return Ok(None);
        }
        gone.wait();
        if me == 0 {
            return Ok(None);
        }
        // Rank 1 never talked to rank 2: its first send dials a listener
        // that is gone.
        let t0 = Instant::now();
        let _ = ep.send(Rank(2), h, &[b"hello"]);
        loop {
            match ep.extract(usize::MAX) {
                Err(e) if e.failed_peer() == Some(Rank(2)) => return Ok(Some((e, t0.elapsed()))),
                // Rank 0's departure, reported meanwhile.
                Err(_) | Ok(_) => {}
            }
            if t0.elapsed() > Duration::from_secs(10) {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let (e, took) = got[1]
        .as_ref()
        .expect("rank 2's failure reported to rank 1");
    assert!(
        matches!(
            e,
            ExtractError::Network(NetError::Unreachable { rank: Rank(2), .. })
                | ExtractError::PeerLeft { rank: Rank(2) }
        ),
        "{e:?}"
    );
    assert!(took < &Duration::from_secs(1), "reported after {took:?}");
}

/// A put is no message: the termination round does not wait for it. A
/// pair first connected by a put just before close must still be flushed
/// at close on both ends (the receiver takes in the link handed over, or
/// being accepted, before its close flush), so every close returns.
#[test]
fn a_put_as_first_contact_just_before_close_ends_cleanly() {
    threads::run(4, tcp, |mut b| {
        let win = b.window("w", 4096);
        let ep = b.start()?;
        let me = ep.rank().0;
        if me >= 2 {
            // 2 -> 3 and 3 -> 2 at once: also the crossing dial.
            let peer = Rank(5 - me);
            ep.put(win, peer, 64, &[me as u8; 256])?;
            ep.put_u64(win, peer, 8, 0xc0de)?;
        }
        let held = ep.network_connections();
        ep.close()?;
        if me >= 2 {
            assert_eq!(held, ranks(&[0, 5 - me]), "rank {me}");
        }
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{e}"));
}
