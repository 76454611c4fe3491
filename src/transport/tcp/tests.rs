//! Bad peers on the TCP transport: garbage, writes outside a peer's ring,
//! a connection cut in the middle of a record, a wrong secret at start-up.
//! Each is refused or reported with a typed error naming the peer, and the
//! other peers go on.

use super::wire::RecordHeader;
use super::*;
use crate::error::{ExtractError, NetError, ProtocolError};
use crate::frame::FragFlags;
use crate::frame::FragHeader;
use crate::ring::TRAILER_BYTES;
use crate::sync::Ordering;
use crate::transport::Transport;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

fn geo() -> RingGeometry {
    RingGeometry::checked(4, 256).unwrap()
}

fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    (c, s)
}

/// Ranks 0 and 1 as real transports over loopback, rank 2 as raw sockets
/// the test drives: `fake[0]` reaches rank 0, `fake[1]` rank 1.
struct Trio {
    t: [TcpTransport; 2],
    fake: [TcpStream; 2],
}

/// The fake rank's side of the set-up exchange and ready handshake on
/// each of its connections (what `RmaTransport::new` does).
fn fake_setup(fakes: &mut [&mut TcpStream]) {
    let mine = crate::transport::net::wire::PeerArea::default().encode();
    for f in fakes.iter_mut() {
        f.write_all(&(mine.len() as u32).to_le_bytes()).unwrap();
        f.write_all(&mine).unwrap();
    }
    for f in fakes.iter_mut() {
        let mut l = [0u8; 4];
        f.read_exact(&mut l).unwrap();
        let mut theirs = vec![0u8; u32::from_le_bytes(l) as usize];
        f.read_exact(&mut theirs).unwrap();
    }
    for f in fakes.iter_mut() {
        f.write_all(&[0]).unwrap();
    }
    for f in fakes.iter_mut() {
        f.read_exact(&mut [0u8; 1]).unwrap();
    }
}

fn trio() -> Trio {
    let (a01, b01) = pair();
    let (a02, mut f0) = pair();
    let (a12, mut f1) = pair();
    let mk = |me: u32, links: Vec<(Rank, TcpStream)>| {
        // A 4 KiB window area of its own (the transport keeps it); no
        // doorbell.
        let window = crate::transport::shm::mapping::Mapping::anon(4096)
            .unwrap()
            .window(0, 4096);
        std::thread::spawn(move || {
            let targets = NetTargets { window, bell: None };
            let dead_after = crate::netio::alive::DEAD_AFTER;
            start(Rank(me), 3, geo(), links, targets, dead_after).unwrap()
        })
    };
    let t0 = mk(0, vec![(Rank(1), a01), (Rank(2), a02)]);
    let t1 = mk(1, vec![(Rank(0), b01), (Rank(2), a12)]);
    fake_setup(&mut [&mut f0, &mut f1]);
    Trio {
        t: [t0.join().unwrap(), t1.join().unwrap()],
        fake: [f0, f1],
    }
}

/// A whole message's header (first and last fragment), for handler 0.
pub(super) fn header(src: u32, len: u32) -> FragHeader {
    FragHeader {
        src,
        handler: 0,
        len,
        flags: (FragFlags::FIRST | FragFlags::LAST).0,
        total: u64::from(len),
    }
}

/// Wait (bounded) until `check_peers` reports something.
fn reported(t: &mut TcpTransport) -> ExtractError {
    let start = Instant::now();
    loop {
        if let Err(e) = t.check_peers() {
            return e;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "nothing reported"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Rank 1 → rank 0 still works: send, poll, check the bytes, release.
fn still_talking(tr: &mut Trio) {
    let msg = b"still here";
    assert!(tr.t[1].try_send_inline(Rank(0), header(1, msg.len() as u32), &[msg]));
    let start = Instant::now();
    let f = loop {
        if let Some(r) = tr.t[0].poll() {
            break r.expect("a good fragment");
        }
        assert!(start.elapsed() < Duration::from_secs(10), "message lost");
        std::thread::yield_now();
    };
    assert_eq!(f.bytes(), msg);
    assert_eq!(f.header.src, 1);
    tr.t[0].release(&f.token);
}

#[test]
fn garbage_fails_that_peer_alone() {
    let mut tr = trio();
    tr.fake[0].write_all(&[0x77; 16]).unwrap();
    let e = reported(&mut tr.t[0]);
    match e {
        ExtractError::Network(NetError::BadRecord { rank, ref what }) => {
            assert_eq!(rank, Rank(2));
            assert!(what.contains("unknown record kind 119"), "{what}");
        }
        e => panic!("unexpected {e}"),
    }
    assert!(tr.t[0].is_gone(Rank(2)));
    assert!(!tr.t[0].is_gone(Rank(1)));
    still_talking(&mut tr);
    assert!(tr.t[0].check_peers().is_ok(), "reported once");
}

#[test]
fn a_write_outside_its_ring_is_refused() {
    let mut tr = trio();
    let rec = RecordHeader {
        kind: wire::RING,
        len: 256,
        offset: 4 * 256, // the slot after the last one
    };
    tr.fake[0].write_all(&rec.encode()).unwrap();
    let e = reported(&mut tr.t[0]);
    assert!(
        matches!(
            e,
            ExtractError::Network(NetError::BadRecord { rank: Rank(2), .. })
        ),
        "{e}"
    );
    still_talking(&mut tr);
}

#[test]
fn a_put_past_the_window_is_refused() {
    let mut tr = trio();
    let rec = RecordHeader {
        kind: wire::PUT,
        len: 100,
        offset: 4000,
    };
    tr.fake[0].write_all(&rec.encode()).unwrap();
    let e = reported(&mut tr.t[0]);
    match e {
        ExtractError::Network(NetError::BadRecord { rank, what }) => {
            assert_eq!(rank, Rank(2));
            assert!(what.contains("window area"), "{what}");
        }
        e => panic!("unexpected {e}"),
    }
    still_talking(&mut tr);
}

#[test]
fn a_peer_vanishing_mid_record_is_reported_and_nothing_half_lands() {
    let mut tr = trio();
    // A ring write of 200 payload bytes, cut after 100 of them.
    let rec = RecordHeader {
        kind: wire::RING,
        len: 200 + TRAILER_BYTES as u32,
        offset: geo().write_start(0, 200),
    };
    tr.fake[1].write_all(&rec.encode()).unwrap();
    tr.fake[1].write_all(&[5u8; 100]).unwrap();
    let Trio { t, fake } = tr;
    let [f0, f1] = fake;
    drop(f1);
    let [t0, mut t1] = t;
    let e = reported(&mut t1);
    assert!(
        matches!(
            e,
            ExtractError::Network(NetError::Disconnected {
                rank: Rank(2),
                mid_record: true
            })
        ),
        "{e}"
    );
    assert!(t1.poll().is_none(), "the partial record never landed");
    let mut tr = Trio {
        t: [t0, t1],
        fake: [f0, pair().0],
    };
    still_talking(&mut tr);
}

#[test]
fn a_goodbye_is_not_an_error() {
    let mut tr = trio();
    // The goodbye of a peer that closed (one that did not is `PeerLeft`).
    let bye = RecordHeader {
        kind: wire::BYE,
        len: 0,
        offset: wire::BYE_CLOSED,
    };
    tr.fake[0].write_all(&bye.encode()).unwrap();
    let start = Instant::now();
    while !tr.t[0].is_gone(Rank(2)) {
        assert!(tr.t[0].check_peers().is_ok(), "a clean goodbye is no error");
        assert!(start.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(1));
    }
    still_talking(&mut tr);
}

/// A ring record of `len` payload bytes (all 5) into `slot`, its trailer
/// carrying `stamp`, as the fake rank 2 writes it.
fn ring_record(slot: u32, len: usize, stamp: u64) -> Vec<u8> {
    let mut t = crate::ring::Trailer::default();
    t.body.header = header(2, len as u32);
    t.stamp = stamp;
    let rec = RecordHeader {
        kind: wire::RING,
        len: (len + TRAILER_BYTES) as u32,
        offset: geo().write_start(u64::from(slot), len),
    };
    [rec.encode().as_slice(), &vec![5u8; len], &t.to_bytes()].concat()
}

/// Where the stamp word of rank 0's slot `slot` of peer 1's ring (rank 2
/// writes it) lies in that ring.
fn stamp_at(slot: u32) -> usize {
    ((slot + 1) * geo().slot_bytes) as usize - 8
}

/// A ring write's slot and its trailer's stamp.
type SlotStamp = (u32, u64);

/// A ring write whose stamp its slot cannot take next — garbage, the stamp
/// of another slot, a lap skipped, the stamp the slot already holds — is
/// refused by the software NIC before anything of its trailer lands: the
/// peer fails with `BadRecord` naming the slot and the stamps, its
/// connection is closed, and the others go on. (The reader waits for one
/// stamp value per ring: a stamp placed anywhere else would hide every
/// later fragment of the peer, with nothing to report until its
/// connection ended.)
#[test]
fn a_ring_write_with_a_stamp_its_slot_cannot_take_is_refused() {
    // (records sent first, all good; the bad one; what it must name)
    let cases: [(&[SlotStamp], SlotStamp, &str); 4] = [
        (&[], (0, 1000), "slot 0 carries stamp 1000; the slot holds stamp 0, so the only stamp it may take next is 1"),
        (&[], (2, 1), "slot 2 carries stamp 1; the slot holds stamp 0, so the only stamp it may take next is 3"),
        (&[(0, 1)], (0, 9), "slot 0 carries stamp 9; the slot holds stamp 1, so the only stamp it may take next is 5"),
        (&[(0, 1)], (0, 1), "slot 0 carries stamp 1; the slot holds stamp 1, so the only stamp it may take next is 5"),
    ];
    for (good, (slot, stamp), named) in cases {
        let mut tr = trio();
        for &(s, st) in good {
            tr.fake[0].write_all(&ring_record(s, 10, st)).unwrap();
        }
        tr.fake[0].write_all(&ring_record(slot, 10, stamp)).unwrap();
        match reported(&mut tr.t[0]) {
            ExtractError::Network(NetError::BadRecord { rank, what }) => {
                assert_eq!(rank, Rank(2));
                assert!(what.contains(named), "{what}");
            }
            e => panic!("stamp {stamp} in slot {slot}: unexpected {e}"),
        }
        assert!(tr.t[0].is_gone(Rank(2)));
        assert_eq!(
            tr.t[0].rings_word(1, stamp_at(slot)),
            good.iter().find(|g| g.0 == slot).map_or(0, |g| g.1),
            "the refused stamp never landed"
        );
        // The good fragments before it are still delivered, in order.
        for &(_, st) in good {
            let f = tr.t[0].poll().expect("a good fragment").unwrap();
            assert_eq!((f.header.src, f.bytes().len()), (2, 10), "stamp {st}");
            tr.t[0].release(&f.token);
        }
        assert!(tr.t[0].poll().is_none());
        assert!(tr.t[0].check_peers().is_ok(), "reported once");
        still_talking(&mut tr);
    }
}

/// Store `stamp` in rank 0's slot `slot` of peer 1's ring as a wire that
/// places without looking would (an RDMA adapter), and count the
/// placement (what a NIC does after placing).
fn store_stamp(t: &TcpTransport, slot: u32, stamp: u64) {
    let sh = t.wire().shared().expect("a started wire");
    let at = sh.ring_offset(1) + stamp_at(slot);
    sh.placements.count_after(|| {
        // SYNC POINT ring-stamp (release side): as `publish_trailer`.
        sh.rings.word(at).store(stamp, Ordering::Release);
        ((), true)
    });
}

/// The reader's own check, for wires whose adapter places stamps without
/// looking at them (verbs, ofi): a stamp from neither this lap nor the
/// last at the head takes the ring out of service with `RingCorrupt`.
/// Found while fuzzing the ring reader (`ring_take`: a dead ring's watch
/// fired when the writer stored `u64::MAX`): the watch of a ring taken
/// out of service waited for `u64::MAX` on the peer's own stamp word, so
/// a peer that stored it made `poll` hit `unreachable!` — one remote peer
/// could crash a rank with two ring writes.
#[test]
fn a_dead_ring_stays_quiet_whatever_the_peer_stores() {
    let mut tr = trio();
    store_stamp(&tr.t[0], 0, 1000);
    let e = reported(&mut tr.t[0]);
    assert!(
        matches!(
            e,
            ExtractError::Protocol(ProtocolError::RingCorrupt {
                src: 2,
                head: 0,
                stamp: 1000
            })
        ),
        "{e}"
    );
    for stamp in [u64::MAX, 1] {
        store_stamp(&tr.t[0], 0, stamp);
        assert_eq!(tr.t[0].rings_word(1, stamp_at(0)), stamp);
        assert!(
            tr.t[0].poll().is_none(),
            "stamp {stamp}: a dead ring delivers nothing"
        );
        assert!(!tr.t[0].has_arrivals(), "stamp {stamp}: nor says it has");
    }
    assert!(tr.t[0].check_peers().is_ok(), "reported once");
    still_talking(&mut tr);
}

#[test]
fn a_rogue_at_the_rendezvous_is_refused_and_the_job_starts() {
    use crate::endpoint::NetMode;
    use crate::threads;
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let root = format!("127.0.0.1:{port}");
    let rogue_root = root.clone();
    let rogue = std::thread::spawn(move || {
        // Garbage, then a fastmsg client with the wrong secret.
        let deadline = Instant::now() + Duration::from_secs(20);
        let addr: std::net::SocketAddr = rogue_root.parse().unwrap();
        let mut s = crate::netio::connect::connect_retry(addr, deadline, || "root".into()).unwrap();
        s.write_all(&[0x42; 64]).unwrap();
        let s = crate::netio::connect::connect_retry(addr, deadline, || "root".into()).unwrap();
        let hello = crate::netio::auth::Hello {
            purpose: crate::netio::auth::Purpose::Join,
            rank: 1,
            size: 2,
            job_hash: 0,
            params: [0, 0],
        };
        crate::netio::auth::client(&s, b"wrong", &hello, deadline)
    });
    let out = threads::run(
        2,
        |c| {
            c.net.mode = NetMode::named("tcp").expect("a provider of every build");
            c.net.root = Some(root.clone());
            c.net.secret = Some("right".into());
            c.timeout = Duration::from_secs(30);
        },
        |mut b| {
            if b.rank() == Rank(1) {
                // Let the rogue knock first.
                std::thread::sleep(Duration::from_millis(300));
            }
            let h = b.register_fn("x", |_c, _p| Ok(()));
            let mut ep = b.start()?;
            ep.send(Rank(1 - ep.rank().0), h, &[b"ok"])?;
            ep.close()?;
            Ok(())
        },
    );
    assert!(out.is_ok(), "{:?}", out.err());
    assert_eq!(
        rogue.join().unwrap(),
        Err(crate::error::HandshakeError::BadSecret),
        "the rogue could not authenticate"
    );
}

#[test]
fn quiesce_waits_for_what_peers_sent_before_their_flush() {
    let mut tr = trio();
    // Rank 1 sends its flush marker (what its own quiesce starts with).
    let Trio { t, fake } = tr;
    let [mut t0, mut t1] = t;
    let [mut f0, mut f1] = fake;
    // Rank 1 quiesces too (its flush marker is what rank 0 waits for),
    // the fake rank 2 answering it.
    let flush = RecordHeader {
        kind: wire::FLUSH,
        len: 0,
        offset: 1,
    }
    .encode();
    f1.write_all(&flush).unwrap();
    let q1 = std::thread::spawn(move || {
        t1.quiesce(Duration::from_secs(20)).unwrap();
        t1
    });
    // The fake rank 2 sends a fragment late, then its flush.
    let late = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        let msg = b"late but sent before the flush";
        let mut t = crate::ring::Trailer::default();
        t.body.header = header(2, msg.len() as u32);
        t.stamp = 1;
        let rec = RecordHeader {
            kind: wire::RING,
            len: (msg.len() + TRAILER_BYTES) as u32,
            offset: geo().write_start(0, msg.len()),
        };
        f0.write_all(&rec.encode()).unwrap();
        f0.write_all(msg).unwrap();
        f0.write_all(&t.to_bytes()).unwrap();
        let flush = RecordHeader {
            kind: wire::FLUSH,
            len: 0,
            offset: 1,
        };
        f0.write_all(&flush.encode()).unwrap();
        f0
    });
    t0.quiesce(Duration::from_secs(20)).unwrap();
    let t1 = q1.join().unwrap();
    let f = t0.poll().expect("landed before quiesce returned").unwrap();
    assert_eq!(f.header.src, 2);
    t0.release(&f.token);
    tr = Trio {
        t: [t0, t1],
        fake: [late.join().unwrap(), f1],
    };
    still_talking(&mut tr);
}

/// A peer that authenticated, then never takes part in the set-up
/// exchange: with the start-up bound `mesh::connect` puts on the links,
/// the transport's start fails naming the peer and the time-out, instead
/// of waiting for ever.
#[test]
fn a_peer_that_stalls_in_the_set_up_exchange_is_a_timeout_not_a_hang() {
    let (a, _silent) = pair();
    a.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    a.set_write_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let window = crate::transport::shm::mapping::Mapping::anon(4096)
        .unwrap()
        .window(0, 4096);
    let t0 = Instant::now();
    let r = start(
        Rank(0),
        2,
        geo(),
        vec![(Rank(1), a)],
        NetTargets { window, bell: None },
        crate::netio::alive::DEAD_AFTER,
    );
    let spent = t0.elapsed();
    let Err(e) = r else {
        panic!("a silent peer must fail the start")
    };
    let text = e.to_string();
    assert!(
        text.contains("rank 1") && text.contains("start-up time-out"),
        "{text}"
    );
    assert!(spent < Duration::from_secs(10), "took {spent:?}");
}
