#![allow(unsafe_code)]

use super::*;
use crate::frame::FragFlags;

fn geo() -> RingGeometry {
    RingGeometry::checked(4, 128).unwrap()
}

fn header(src: u32, len: u32) -> FragHeader {
    FragHeader {
        src,
        handler: 3,
        len,
        flags: (FragFlags::FIRST | FragFlags::LAST).0,
        total: u64::from(len),
    }
}

#[test]
fn payload_ends_at_the_trailer_and_the_write_ends_at_the_slot() {
    let g = geo();
    assert_eq!(g.capacity(), 88);
    // Position 5 is slot 1: bytes 128..256; 10 payload bytes + 40 trailer.
    assert_eq!(g.write_start(5, 10), 256 - 50);
    assert_eq!(g.write_start(5, 88), 128);
}

#[test]
fn fragments_land_in_order_across_laps() {
    let g = geo();
    let region = RingRegion::zeroed(g.ring_bytes());
    let ring = region.ring(0, g);
    let mut tx = RingTx::new(g);
    let mut rx = RingRx::new(g, 1);
    for pos in 0..20u64 {
        assert!(!rx.watch(&ring).ready(), "empty before the write");
        assert!(matches!(rx.try_take(&ring, 2), Ok(None)));
        let p = tx.try_reserve(|| pos).expect("credit");
        assert_eq!(p, pos);
        let data = vec![pos as u8; (pos as usize * 7) % 89];
        let t = tx.trailer(p, header(1, data.len() as u32), 0);
        place(&ring, p, &t.body, &data);
        assert!(rx.watch(&ring).ready());
        let got = rx.try_take(&ring, 2).unwrap().expect("landed");
        assert_eq!(got.pos, pos);
        // SAFETY: the fragment is not released yet; the region lives.
        let bytes = unsafe { core::slice::from_raw_parts(got.data, data.len()) };
        assert_eq!(bytes, &data[..]);
        rx.release(got.pos);
        // The reader's count comes back piggybacked.
        let c = rx.piggyback();
        assert_eq!(c, pos + 1);
        tx.returned(c);
    }
}

#[test]
fn the_writer_stops_at_the_window_until_credit_returns() {
    let g = geo();
    let mut tx = RingTx::new(g);
    for _ in 0..4 {
        assert!(tx.try_reserve(|| 0).is_some());
    }
    assert!(tx.try_reserve(|| 0).is_none(), "window of 4 slots");
    assert!(!tx.has_credit(0));
    assert!(tx.has_credit(1));
    assert_eq!(tx.try_reserve(|| 1), Some(4));
}

#[test]
fn explicit_credit_is_due_at_half_the_window() {
    let mut rx = RingRx::new(geo(), 1);
    rx.release(0);
    assert_eq!(rx.credit_due(false), None);
    rx.release(1);
    assert_eq!(rx.credit_due(false), Some(2));
    assert_eq!(rx.credit_due(false), None, "published once");
    rx.release(2);
    assert_eq!(rx.credit_due(true), Some(3), "forced: anything");
}

#[test]
fn a_foreign_stamp_takes_the_ring_out_of_service() {
    let g = geo();
    let region = RingRegion::zeroed(g.ring_bytes());
    let ring = region.ring(0, g);
    let mut rx = RingRx::new(g, 1);
    // SYNC POINT ring-stamp (release side): the test plays the writer.
    ring.stamp(0).store(77, Ordering::Release);
    let e = rx.try_take(&ring, 2).unwrap_err();
    assert_eq!(
        e,
        ProtocolError::RingCorrupt {
            src: 1,
            head: 0,
            stamp: 77
        }
    );
    assert!(!rx.watch(&ring).ready(), "never fires again");
    assert!(matches!(rx.try_take(&ring, 2), Ok(None)));
    // Found by the `ring_take` fuzz target: the dead ring's watch waited
    // for u64::MAX on the writer's own stamp word, so storing it fired.
    for stamp in [u64::MAX, 1] {
        // SYNC POINT ring-stamp (release side): the test plays the writer.
        ring.stamp(0).store(stamp, Ordering::Release);
        assert!(!rx.watch(&ring).ready(), "stamp {stamp}: still never fires");
        assert!(matches!(rx.try_take(&ring, 2), Ok(None)));
    }
}

#[test]
fn check_names_a_foreign_stamp_once_without_taking() {
    let g = geo();
    let region = RingRegion::zeroed(g.ring_bytes());
    let ring = region.ring(0, g);
    let mut rx = RingRx::new(g, 1);
    assert_eq!(rx.check(&ring), Ok(()), "fresh ring");
    place(
        &ring,
        0,
        &TrailerBody {
            header: header(1, 4),
            credit: 0,
        },
        &[1, 2, 3, 4],
    );
    assert_eq!(rx.check(&ring), Ok(()), "landed, not taken");
    assert_eq!(rx.head(), 0);
    // SYNC POINT ring-stamp (release side): the test plays the writer.
    ring.stamp(0).store(77, Ordering::Release);
    assert!(matches!(
        rx.check(&ring),
        Err(ProtocolError::RingCorrupt { stamp: 77, .. })
    ));
    assert_eq!(rx.check(&ring), Ok(()), "reported once");
    assert!(!rx.watch(&ring).ready());
}

#[test]
fn a_trailer_naming_another_sender_or_too_long_is_refused_and_released() {
    let g = geo();
    let region = RingRegion::zeroed(g.ring_bytes());
    let ring = region.ring(0, g);
    let mut rx = RingRx::new(g, 1);
    let body = TrailerBody {
        header: header(0, 4),
        credit: 0,
    };
    place(&ring, 0, &body, &[1, 2, 3, 4]);
    assert!(matches!(
        rx.try_take(&ring, 2),
        Err(ProtocolError::WrongQueue { src: 0, queue: 1 })
    ));
    let mut long = header(1, 4);
    long.len = 1000;
    long.total = 1000;
    ring.write_body(
        1,
        &TrailerBody {
            header: long,
            credit: 0,
        },
    );
    // SYNC POINT ring-stamp (release side): the test plays the writer.
    ring.stamp(1).store(2, Ordering::Release);
    assert!(matches!(
        rx.try_take(&ring, 2),
        Err(ProtocolError::FrameTooLong { len: 1000, .. })
    ));
    assert_eq!(
        rx.piggyback(),
        2,
        "both bad fragments gave their credit back"
    );
}

#[test]
fn trailer_wire_form_round_trips() {
    let t = Trailer {
        body: TrailerBody {
            header: header(9, 17),
            credit: 12345,
        },
        stamp: 99,
    };
    assert_eq!(Trailer::from_bytes(&t.to_bytes()), t);
}

proptest::proptest! {
    /// The trailer's wire form round trips both ways.
    #[test]
    fn trailer_bytes_round_trip(bytes in proptest::array::uniform32(proptest::num::u8::ANY), stamp in proptest::num::u64::ANY) {
        let mut b = [0u8; TRAILER_BYTES];
        b[..32].copy_from_slice(&bytes);
        b[32..].copy_from_slice(&stamp.to_le_bytes());
        let t = Trailer::from_bytes(&b);
        proptest::prop_assert_eq!(t.to_bytes(), b);
        proptest::prop_assert_eq!(Trailer::from_bytes(&t.to_bytes()), t);
        proptest::prop_assert_eq!(t.stamp, stamp);
    }
}
