//! A network peer that breaks the ring protocol on a live, authenticated
//! connection: the rank that polls learns of it from `extract` within the
//! watchdog's look, with an error naming the peer and what was wrong, and
//! the connection is closed — not when the peer's connection ends.
//!
//! The bad peer is a real rank of a two-rank job over TCP that writes a
//! record of its own making on its connection (it holds the secret and
//! made the handshake, as a hostile or broken peer would).

use super::Endpoint;
use crate::endpoint::NetMode;
use crate::error::{ExtractError, NetError};
use crate::frame::{FragFlags, FragHeader};
use crate::id::Rank;
use crate::ring::{Trailer, TRAILER_BYTES};
use crate::threads;
use crate::transport::net::NetRingConfig;
use crate::transport::tcp::wire::{RecordHeader, RING};
use crate::transport::AnyTransport;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Write `bytes` as they are on `ep`'s TCP connection to `peer`.
fn send_raw(ep: &Endpoint, peer: Rank, bytes: &[u8]) {
    let net = ep.core.net().borrow();
    match net.wide().first() {
        Some(AnyTransport::Tcp(t)) => t.wire().send_raw(peer, bytes).expect("a raw write"),
        _ => panic!("no TCP transport"),
    }
}

/// How long the bad peer keeps its connection open at most: past the
/// bound the test puts on the report, so that a report made only when the
/// connection ends fails it.
const KEEP_OPEN: Duration = Duration::from_secs(8);

/// The bound on the report (a bound on a hang, not a speed test: the
/// report comes with the watchdog's next look, 100 ms).
const BOUND: Duration = Duration::from_secs(3);

/// Rank 1 sends one good message, then a ring write into the ring's last
/// slot carrying position 0's stamp — a value the protocol writes, in a
/// slot that can never take it — and keeps its connection open. Rank 0,
/// polling with `extract`, must get `BadRecord` naming rank 1, the slot
/// and the stamp within `BOUND`. (The reader's own check looks at the slot
/// it waits on — a few slots on from the first, past the start-up's
/// messages and the good one — which holds nothing: without the placer's
/// check nothing is reported until rank 1's connection ends.)
#[test]
fn a_bad_ring_stamp_over_tcp_is_reported_by_extract_at_once() {
    let written: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let reported: Arc<Mutex<Option<Duration>>> = Arc::new(Mutex::new(None));
    let out = threads::run(
        2,
        |c| {
            c.net.mode = NetMode::named("tcp").expect("a provider of every build");
            c.net.secret = Some("bad-stamp-test-secret".into());
            c.timeout = Duration::from_secs(30);
        },
        |mut b| {
            let h = b.register_fn("x", |_c, _p| Ok(()));
            let mut ep = b.start()?;
            if ep.rank() == Rank(1) {
                ep.send(Rank(0), h, &[b"first"])?;
                let g = NetRingConfig::default().geometry().expect("usable");
                let mut t = Trailer::default();
                t.body.header = FragHeader {
                    src: 1,
                    handler: h.0,
                    len: 0,
                    flags: (FragFlags::FIRST | FragFlags::LAST).0,
                    total: 0,
                };
                t.stamp = 1;
                let rec = RecordHeader {
                    kind: RING,
                    len: TRAILER_BYTES as u32,
                    offset: g.write_start(u64::from(g.slots - 1), 0),
                };
                *written.lock().unwrap() = Some(Instant::now());
                send_raw(
                    &ep,
                    Rank(0),
                    &[rec.encode().as_slice(), &t.to_bytes()].concat(),
                );
                // A misbehaving peer does not hang up: keep the connection
                // open until rank 0 has reported it (at most KEEP_OPEN).
                let start = Instant::now();
                while reported.lock().unwrap().is_none() && start.elapsed() < KEEP_OPEN {
                    std::thread::sleep(Duration::from_millis(10));
                }
                return Ok(None);
            }
            let start = Instant::now();
            let e = loop {
                match ep.extract(usize::MAX) {
                    Ok(_) => {}
                    Err(e) => break e,
                }
                assert!(start.elapsed() < 3 * KEEP_OPEN, "nothing reported");
                std::thread::yield_now();
            };
            let at = Instant::now();
            let since = written.lock().unwrap().map(|w| at.duration_since(w));
            *reported.lock().unwrap() = since.or(Some(Duration::ZERO));
            Ok(Some((e, since)))
        },
    );
    let mut outs = out.unwrap_or_else(|e| panic!("{e}"));
    let (e, since) = outs.swap_remove(0).expect("rank 0's report");
    match &e {
        ExtractError::Network(NetError::BadRecord { rank, what }) => {
            assert_eq!(*rank, Rank(1), "{e}");
            assert!(
                what.contains("slot 15 carries stamp 1;"),
                "the error names the slot and the stamp: {e}"
            );
        }
        e => panic!("not the typed error of a bad stamp: {e}"),
    }
    let since = since.expect("reported after the bad write");
    println!("bad stamp to extract's error: {since:?}");
    assert!(since < BOUND, "reported {since:?} after the bad write");
}
