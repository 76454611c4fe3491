//! Taking fragments from a network ring (`fastmsg::internal::ring::RingRx`) whose
//! memory a hostile or broken writer controls: well-formed and malformed
//! trailers, stamps of any value, slots overwritten before release.
//!
//! An independent model of the reader says what each `try_take` must
//! return (a fragment at the head, nothing yet, a refused trailer named by
//! its field, or a corrupt ring that stays out of service), where a taken
//! payload must lie (inside its slot, ending at the trailer), and what
//! credit the reader may return (never more than it released, never
//! twice the same).

#![no_main]

use arbitrary::Arbitrary;
use fastmsg::error::ProtocolError;
use fastmsg::internal::frame::FragHeader;
use fastmsg::internal::ring::{
    place, RingGeometry, RingRegion, RingRx, RingStore, TrailerBody, TRAILER_BYTES,
};
use libfuzzer_sys::fuzz_target;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;

#[derive(Arbitrary, Debug)]
enum Op {
    /// The writer places a fragment at `head + ahead` as the protocol
    /// says (payload, body, stamp last), with any header.
    Place {
        ahead: u8,
        src: u32,
        handler: u32,
        len: u16,
        flags: u8,
        total: u64,
        credit: u64,
    },
    /// Any value in a slot's stamp word.
    Stamp { slot: u8, value: u64 },
    /// Any bytes in a slot's trailer body.
    Body { slot: u8, bytes: [u8; 32] },
    /// The reader polls.
    Take,
    /// The reader releases its oldest held fragment.
    Release,
    /// A credit piggybacked on a trailer going back.
    Piggyback,
    /// An explicit credit write, if due.
    CreditDue { force: bool },
}

#[derive(Arbitrary, Debug)]
struct Input {
    slots_log: u8,
    slot_lines: u8,
    world: u8,
    peer: u8,
    ops: Vec<Op>,
}

/// What the reader should know, kept independently of `RingRx`.
struct Model {
    head: u64,
    dead: bool,
    /// Taken and not yet released, oldest first.
    held: VecDeque<u64>,
    released: u64,
    published: u64,
}

fn body_from(bytes: &[u8; 32]) -> TrailerBody {
    let mut t = [0u8; TRAILER_BYTES];
    t[..32].copy_from_slice(bytes);
    fastmsg::internal::ring::Trailer::from_bytes(&t).body
}

fuzz_target!(|input: Input| {
    let slots = 4u32 << (input.slots_log % 3);
    let slot_bytes = 64 * (1 + u32::from(input.slot_lines % 8));
    let g = RingGeometry::checked(slots, slot_bytes).expect("valid geometry");
    let world = u32::from(input.world % 8) + 1;
    let peer = u32::from(input.peer) % world;
    let region = RingRegion::zeroed(g.ring_bytes());
    let ring = region.ring(0, g);
    let mut rx = RingRx::new(g, peer);
    let mut m = Model {
        head: 0,
        dead: false,
        held: VecDeque::new(),
        released: 0,
        published: 0,
    };
    // Positions refused while older ones were still held: released (by
    // the reader itself) once those are.
    let mut refused: Vec<u64> = Vec::new();
    let release_refused = |m: &mut Model, refused: &mut Vec<u64>| {
        while refused.first() == Some(&m.released) {
            refused.remove(0);
            m.released += 1;
        }
    };

    for op in input.ops.iter().take(512) {
        match *op {
            Op::Place {
                ahead,
                src,
                handler,
                len,
                flags,
                total,
                credit,
            } => {
                let pos = m.head + u64::from(ahead) % (u64::from(slots) + 2);
                let header = FragHeader {
                    src: src % (world + 1),
                    handler,
                    len: u32::from(len) % (slot_bytes + 8),
                    flags: u32::from(flags),
                    total,
                };
                let n = (header.len as usize).min(g.capacity());
                let payload: Vec<u8> = (0..n).map(|i| (pos as usize + i) as u8).collect();
                place(&ring, pos, &TrailerBody { header, credit }, &payload);
            }
            Op::Stamp { slot, value } => {
                ring.stamp(u32::from(slot) % slots)
                    .store(value, Ordering::Release);
            }
            Op::Body { slot, ref bytes } => {
                ring.write_body(u32::from(slot) % slots, &body_from(bytes));
            }
            Op::Take => {
                let got = rx.try_take(&ring, world);
                if m.dead {
                    assert!(matches!(got, Ok(None)), "a dead ring gave {got:?}");
                    assert!(!rx.watch(&ring).ready(), "a dead ring's watch fired");
                    continue;
                }
                let slot = g.slot_of(m.head);
                let stamp = ring.stamp(slot).load(Ordering::Acquire);
                let want = m.head + 1;
                let last_lap = want.saturating_sub(u64::from(slots));
                if stamp != want {
                    if stamp == last_lap {
                        assert!(matches!(got, Ok(None)), "nothing landed, got {got:?}");
                    } else {
                        match got {
                            Err(ProtocolError::RingCorrupt {
                                src,
                                head,
                                stamp: s,
                            }) => {
                                assert_eq!((src, head, s), (peer, m.head, stamp));
                            }
                            other => panic!("stamp {stamp} at head {}: {other:?}", m.head),
                        }
                        m.dead = true;
                    }
                    continue;
                }
                let body = ring.read_body(slot);
                let h = body.header;
                let pos = m.head;
                m.head += 1;
                let verdict = h.check(world, g.capacity()).and(if h.src == peer {
                    Ok(())
                } else {
                    Err(ProtocolError::WrongQueue {
                        src: h.src,
                        queue: peer,
                    })
                });
                match (got, verdict) {
                    (Ok(Some(t)), Ok(())) => {
                        assert_eq!((t.pos, t.body), (pos, body));
                        // The payload ends where the slot's trailer begins.
                        let slot_end =
                            ring.base() as usize + (slot as usize + 1) * slot_bytes as usize;
                        assert_eq!(t.data as usize + h.len as usize, slot_end - TRAILER_BYTES);
                        assert!(t.data as usize >= slot_end - slot_bytes as usize);
                        m.held.push_back(pos);
                    }
                    (Err(e), Err(want)) => {
                        assert_eq!(e, want, "refusal names the first bad field");
                        // A refused fragment is released by the reader as
                        // soon as everything before it is.
                        refused.push(pos);
                        release_refused(&mut m, &mut refused);
                    }
                    (got, want) => panic!("take at {pos}: {got:?}, model says {want:?}"),
                }
            }
            Op::Release => {
                if let Some(pos) = m.held.pop_front() {
                    assert_eq!(pos, m.released, "held fragments are the oldest unreleased");
                    rx.release(pos);
                    m.released += 1;
                    release_refused(&mut m, &mut refused);
                }
            }
            Op::Piggyback => {
                let got = rx.piggyback();
                let want = if m.released == m.published {
                    0
                } else {
                    m.published = m.released;
                    m.released
                };
                assert_eq!(got, want, "piggybacked credit");
            }
            Op::CreditDue { force } => {
                let threshold = if force { 1 } else { u64::from(slots / 2) };
                let want = (m.released - m.published >= threshold).then(|| {
                    m.published = m.released;
                    m.released
                });
                assert_eq!(rx.credit_due(force), want, "explicit credit");
            }
        }
        assert_eq!(rx.head(), m.head);
        assert!(m.released <= m.head, "released more than taken");
    }
});
