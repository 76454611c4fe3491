//! The TCP software NIC (`fastmsg::internal::tcp`): what each network peer
//! sends on its connection — write records, well-formed or not, cut off
//! anywhere — applied to this rank's memory by the real NIC loop.
//!
//! An independent model of the record format says, byte for byte, what
//! the rank's memory must hold afterwards (each peer's ring, its credit
//! word, the window area, and nothing written anywhere else) and how each
//! link must end (up, goodbye, or failed with the typed error naming the
//! peer); one bad peer never disturbs another. Then the rings are read
//! with `RingRx` as the transport would. AddressSanitizer checks every
//! write the NIC makes through its raw pointers.

#![no_main]

use arbitrary::Arbitrary;
use fastmsg::error::NetError;
use fastmsg::internal::ring::{RingGeometry, RingRx, RingStore, TRAILER_BYTES};
use fastmsg::internal::tcp::{
    encode_header, LinkState, NicMemory, BYE_RECORD, CREDIT, FLUSH, HEADER_BYTES, PUT, PUT_U64,
    RING,
};
use fastmsg::Rank;
use fastmsg_fuzz::{fed_stream, u32_at, u64_at};
use libfuzzer_sys::fuzz_target;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;

#[derive(Arbitrary, Debug)]
enum Record {
    /// A ring write ending at the end of `slot` (a well-formed one unless
    /// the length is off), trailer with a stamp `pos + 1` (the one its
    /// slot may take next when `pos` is the slot's next position).
    Ring {
        slot: u8,
        len: u16,
        pos: u8,
        src: u8,
        flags: u8,
        fill: u8,
    },
    /// A ring write at any offset.
    RingAt {
        offset: u64,
        len: u16,
        fill: u8,
    },
    Credit {
        count: u64,
        len: u8,
    },
    Put {
        offset: u16,
        len: u16,
        fill: u8,
    },
    PutU64 {
        offset: u16,
        value: u64,
        len: u8,
    },
    Bye {
        len: u8,
    },
    Flush {
        round: u64,
        len: u8,
    },
    /// Any header (unknown kinds included), no body.
    Header {
        kind: u8,
        len: u32,
        offset: u64,
    },
    /// Any bytes.
    Raw(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    slots_log: u8,
    slot_lines: u8,
    window_lines: u8,
    /// Per peer: its records, and how many bytes to cut off the end.
    peers: Vec<(Vec<Record>, u8)>,
}

fn emit(r: &Record, g: RingGeometry, out: &mut Vec<u8>) {
    let fill = |n: usize, b: u8| (0..n).map(|i| b.wrapping_add(i as u8)).collect::<Vec<u8>>();
    match *r {
        Record::Ring {
            slot,
            len,
            pos,
            src,
            flags,
            fill: f,
        } => {
            let end = (u64::from(slot) % u64::from(g.slots) + 1) * u64::from(g.slot_bytes);
            let len = u64::from(len) % (u64::from(g.slot_bytes) + 64);
            out.extend(encode_header(RING, len as u32, end.wrapping_sub(len)));
            let payload = (len as usize).saturating_sub(TRAILER_BYTES);
            out.extend(fill(payload, f));
            let mut t = [0u8; TRAILER_BYTES];
            t[0..4].copy_from_slice(&u32::from(src % 4).to_le_bytes());
            t[8..12].copy_from_slice(&(payload as u32).to_le_bytes());
            t[12..16].copy_from_slice(&u32::from(flags % 8).to_le_bytes());
            t[16..24].copy_from_slice(&(payload as u64).to_le_bytes());
            t[32..40].copy_from_slice(&(u64::from(pos) + 1).to_le_bytes());
            out.extend(&t[..TRAILER_BYTES.min(len as usize)]);
        }
        Record::RingAt {
            offset,
            len,
            fill: f,
        } => {
            let len = len % 1024;
            out.extend(encode_header(RING, u32::from(len), offset));
            out.extend(fill(usize::from(len), f));
        }
        Record::Credit { count, len } => {
            out.extend(encode_header(CREDIT, u32::from(len % 2), count))
        }
        Record::Put {
            offset,
            len,
            fill: f,
        } => {
            let len = len % 1024;
            out.extend(encode_header(PUT, u32::from(len), u64::from(offset)));
            out.extend(fill(usize::from(len), f));
        }
        Record::PutU64 { offset, value, len } => {
            let len = if len % 4 == 0 { u32::from(len) } else { 8 };
            out.extend(encode_header(PUT_U64, len, u64::from(offset)));
            out.extend(&value.to_le_bytes()[..(len as usize).min(8)]);
        }
        // Bit 1 of `len` picks the goodbye's offset: 1 = after close, 0 = left.
        Record::Bye { len } => out.extend(encode_header(
            BYE_RECORD,
            u32::from(len % 2),
            u64::from(len / 2 % 2),
        )),
        Record::Flush { round, len } => out.extend(encode_header(FLUSH, u32::from(len % 2), round)),
        Record::Header { kind, len, offset } => out.extend(encode_header(kind, len, offset)),
        Record::Raw(ref b) => out.extend(b),
    }
}

/// How the model expects a link to end.
#[derive(Debug, PartialEq)]
enum End {
    /// A goodbye; `closed`: sent after the peer's close (offset 1), else the
    /// peer left without closing.
    Bye {
        closed: bool,
    },
    Disconnected {
        mid_record: bool,
    },
    BadRecord,
}

/// What one peer's bytes must do to its ring, its credit word, its flush
/// round, the window area, and how its link ends.
struct PeerModel {
    ring: Vec<u8>,
    credit: u64,
    flushed: u64,
    end: End,
    /// Window bytes this peer wrote: (offset, bytes) in order.
    window_writes: Vec<(usize, Vec<u8>)>,
}

fn model(bytes: &[u8], g: RingGeometry, window_len: u64) -> PeerModel {
    let ring_bytes = g.ring_bytes();
    let mut m = PeerModel {
        ring: vec![0; ring_bytes as usize],
        credit: 0,
        flushed: 0,
        end: End::Disconnected { mid_record: false },
        window_writes: Vec::new(),
    };
    let mut at = 0;
    loop {
        let rest = &bytes[at..];
        if rest.len() < HEADER_BYTES {
            m.end = End::Disconnected {
                mid_record: !rest.is_empty(),
            };
            return m;
        }
        let (kind, len, offset) = (rest[0], u32_at(rest, 4), u64_at(rest, 8));
        let body = &rest[HEADER_BYTES..];
        let n = len as usize;
        // The body bytes that arrived (all, or up to the end of stream).
        let got = &body[..n.min(body.len())];
        let complete = body.len() >= n;
        match kind {
            RING => {
                let end = offset.checked_add(u64::from(len));
                let fits = end.is_some_and(|e| e <= ring_bytes && e % u64::from(g.slot_bytes) == 0)
                    && n >= TRAILER_BYTES
                    && n <= g.slot_bytes as usize;
                if !fits {
                    m.end = End::BadRecord;
                    return m;
                }
                let o = offset as usize;
                // The payload lands as it arrives; the trailer only whole,
                // and only with the one stamp its slot may take next: the
                // slot's first position while it holds none, else one lap
                // on from the stamp it holds.
                let payload = &got[..got.len().min(n - TRAILER_BYTES)];
                m.ring[o..o + payload.len()].copy_from_slice(payload);
                if complete {
                    let slot = (o + n) as u64 / u64::from(g.slot_bytes) - 1;
                    let held = u64_at(&m.ring, o + n - 8);
                    let next = if held == 0 {
                        Some(slot + 1)
                    } else {
                        held.checked_add(u64::from(g.slots))
                    };
                    if next != Some(u64_at(got, n - 8)) {
                        m.end = End::BadRecord;
                        return m;
                    }
                    m.ring[o..o + n].copy_from_slice(got);
                }
            }
            CREDIT if len == 0 => m.credit = offset,
            PUT => {
                if offset
                    .checked_add(u64::from(len))
                    .is_none_or(|e| e > window_len)
                {
                    m.end = End::BadRecord;
                    return m;
                }
                m.window_writes.push((offset as usize, got.to_vec()));
            }
            PUT_U64 => {
                if len != 8 || offset % 8 != 0 || offset.saturating_add(8) > window_len {
                    m.end = End::BadRecord;
                    return m;
                }
                if complete {
                    m.window_writes.push((offset as usize, got.to_vec()));
                }
            }
            BYE_RECORD if len == 0 => {
                m.end = End::Bye {
                    closed: offset == 1,
                };
                return m;
            }
            FLUSH if len == 0 => m.flushed = offset,
            _ => {
                m.end = End::BadRecord;
                return m;
            }
        }
        if !complete {
            m.end = End::Disconnected { mid_record: true };
            return m;
        }
        at += HEADER_BYTES + n;
    }
}

fn read_words(r: &fastmsg::internal::ring::RingRegion, from: usize, to: usize) -> Vec<u8> {
    (from..to)
        .step_by(8)
        .flat_map(|at| r.word(at).load(Ordering::Relaxed).to_le_bytes())
        .collect()
}

fuzz_target!(|input: Input| {
    let slots = 4u32 << (input.slots_log % 2);
    let slot_bytes = 64 * (1 + u32::from(input.slot_lines % 4));
    let g = RingGeometry::checked(slots, slot_bytes).expect("valid geometry");
    let window_len = 64 * u64::from(input.window_lines % 5);
    let peers: Vec<(Vec<u8>, &Vec<Record>)> = input
        .peers
        .iter()
        .take(3)
        .map(|(records, cut)| {
            let mut b = Vec::new();
            for r in records.iter().take(64) {
                emit(r, g, &mut b);
            }
            b.truncate(b.len().saturating_sub(usize::from(*cut % 32)));
            (b, records)
        })
        .collect();
    if peers.is_empty() {
        return;
    }
    let mem = NicMemory::new(g, peers.len() as u32, window_len);
    let (_wake_tx, wake_rx) = UnixStream::pair().expect("socketpair");
    let fed: Vec<_> = peers.iter().map(|(b, _)| fed_stream(b.clone())).collect();
    let (streams, writers): (Vec<_>, Vec<_>) = fed.into_iter().unzip();
    let fds: Vec<_> = streams.iter().map(AsFd::as_fd).collect();
    mem.run(&fds, wake_rx.as_fd());
    // Close our ends first: a writer whose peer the NIC stopped reading
    // (goodbye, bad record) then ends with a broken pipe.
    drop(fds);
    drop(streams);
    for writer in writers {
        writer.join().expect("writer");
    }

    // Compare with the model, peer by peer.
    let region = mem.region();
    let mut window = vec![0u8; mem.window().len()];
    let mut window_writers = 0;
    for (k, (bytes, _)) in peers.iter().enumerate() {
        let want = model(bytes, g, window_len);
        let off = mem.ring_offset(k);
        let ring = read_words(region, off, off + g.ring_bytes() as usize);
        assert!(ring == want.ring, "peer {k}'s ring differs from the model");
        assert_eq!(mem.credit(k), want.credit, "peer {k}'s credit word");
        assert_eq!(mem.flushed(k), want.flushed, "peer {k}'s flush round");
        let rank = Rank(k as u32 + 1);
        match (mem.link(k), &want.end) {
            (LinkState::Bye, End::Bye { closed: true }) => {}
            (LinkState::Left, End::Bye { closed: false }) => {}
            (
                LinkState::Failed(Some(NetError::Disconnected {
                    rank: r,
                    mid_record,
                })),
                End::Disconnected { mid_record: m },
            ) => {
                assert_eq!((r, mid_record), (rank, *m));
            }
            (LinkState::Failed(Some(NetError::BadRecord { rank: r, what })), End::BadRecord) => {
                assert_eq!(r, rank);
                assert!(!what.is_empty());
            }
            (got, want) => panic!("peer {k}'s link: {got:?}, model says {want:?}"),
        }
        if !want.window_writes.is_empty() {
            window_writers += 1;
        }
        for (at, b) in want.window_writes {
            window[at..at + b.len()].copy_from_slice(&b);
        }
    }
    // Peers' window writes may interleave in any order: compare only when
    // at most one peer wrote; past the window's end nothing, ever.
    let got_window = read_words(mem.window(), 0, mem.window().len());
    if window_writers <= 1 {
        assert!(
            got_window == window,
            "the window area differs from the model"
        );
    }
    assert!(
        got_window[window_len as usize..].iter().all(|&b| b == 0),
        "written past the window area"
    );
    // Nothing between and after the rings but the credit words, then the
    // flush words.
    let n = peers.len();
    let credits_at = n * g.ring_bytes() as usize;
    let rest = read_words(region, credits_at, region.len());
    for (i, chunk) in rest.chunks(64).enumerate() {
        let expect_word = if i < n {
            mem.credit(i)
        } else if i < 2 * n {
            mem.flushed(i - n)
        } else {
            0
        };
        assert_eq!(u64_at(chunk, 0), expect_word);
        assert!(
            chunk[8..].iter().all(|&b| b == 0),
            "stray write after the rings"
        );
    }

    // Read every ring as the transport does.
    for k in 0..n {
        let view = region.ring(mem.ring_offset(k), g);
        let mut rx = RingRx::new(g, k as u32 + 1);
        for _ in 0..=slots {
            match rx.try_take(&view, 4) {
                Ok(Some(t)) => {
                    // The payload is readable where it is said to be.
                    let len = t.body.header.len as usize;
                    assert!(len <= g.capacity());
                    assert_eq!(
                        t.data as usize + len + TRAILER_BYTES,
                        view.base() as usize
                            + (g.slot_of(t.pos) as usize + 1) * slot_bytes as usize
                    );
                    let _ = view.stamp(g.slot_of(t.pos)).load(Ordering::Acquire);
                    rx.release(t.pos);
                }
                Ok(None) => break,
                Err(_) => {}
            }
        }
    }
});
