//! The async handler's receive path (`Message::receive_vec`,
//! `receive_vec_max`, `receive`) fed hostile declared lengths by a peer: a
//! real two-rank job (ranks as threads, shared memory). Rank 1, the
//! attacker, begins messages declaring any length (up to 2^63 bytes),
//! sends some bytes of them and ends, drops or overflows the writer; rank
//! 0's handler receives each one way or another.
//!
//! Checked: a declared length past the bound (`Config::max_receive`, or
//! the handler's own) is `ReceiveError::TooLong` naming the sender, the
//! length and the bound, before anything is allocated (libFuzzer's memory
//! limit catches an allocation of the declared length); a message within
//! it gives at most its declared bytes, or `Aborted` with the bytes that
//! arrived; nothing panics.

#![no_main]

use arbitrary::Arbitrary;
use fastmsg::error::ReceiveError;
use fastmsg::threads;
use fastmsg::Rank;
use libfuzzer_sys::fuzz_target;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// The bound every rank's `receive_vec` has here.
const MAX_RECEIVE: usize = 1 << 16;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Ending {
    /// `end` (short unless all declared bytes were sent).
    End,
    /// The writer dropped.
    Drop,
    /// A piece past the declared length.
    Overflow,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Read {
    /// `receive_vec`, under `MAX_RECEIVE`.
    Vec,
    /// `receive_vec_max` with this bound.
    VecMax(u16),
    /// `receive` in chunks of this many bytes (at least 1).
    Chunks(u8),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
struct Hostile {
    /// The length declared: small, around the bound, or huge.
    declared: u64,
    /// Bytes actually sent (at most 4 KiB).
    sent: u16,
    ending: Ending,
    read: Read,
}

fn declared(h: &Hostile) -> u64 {
    match h.declared % 4 {
        0 => h.declared % 8192,
        1 => (MAX_RECEIVE as u64)
            .wrapping_add(h.declared % 64)
            .wrapping_sub(32),
        _ => h.declared >> 1, // up to 2^63
    }
}

fuzz_target!(|input: Vec<Hostile>| {
    let input: Vec<Hostile> = input.into_iter().take(16).collect();
    let n = input.len();
    threads::run(
        2,
        |c| c.max_receive = MAX_RECEIVE,
        |mut b| {
            let reads: Vec<Read> = input.iter().map(|h| h.read).collect();
            type Seen = Vec<(usize, u64, Result<u64, ReceiveError>)>;
            let seen: Rc<RefCell<Seen>> = Rc::default();
            let s = seen.clone();
            let started = Rc::new(Cell::new(0usize));
            let h = b.register("hostile", move |_ctx, mut m| {
                let s = s.clone();
                // Messages of one source start their handlers in order.
                let idx = started.get();
                started.set(idx + 1);
                let read = reads.get(idx).copied().unwrap_or(Read::Vec);
                async move {
                    let declared = m.len() as u64;
                    let r = match read {
                        Read::Vec => m.receive_vec().await.map(|v| v.len() as u64),
                        Read::VecMax(max) => m
                            .receive_vec_max(usize::from(max))
                            .await
                            .map(|v| v.len() as u64),
                        Read::Chunks(c) => {
                            let mut buf = vec![0u8; usize::from(c.max(1))];
                            let mut total = 0u64;
                            loop {
                                match m.receive(&mut buf).await {
                                    Ok(0) => break Ok(total),
                                    Ok(k) => total += k as u64,
                                    Err(e) => break Err(e),
                                }
                                if m.remaining() == 0 {
                                    break Ok(total);
                                }
                            }
                        }
                    };
                    if let (Read::Vec, Err(ReceiveError::TooLong { max, .. })) = (read, &r) {
                        assert_eq!(*max, MAX_RECEIVE as u64);
                    }
                    s.borrow_mut().push((idx, declared, r));
                    Ok(())
                }
            });
            let mut ep = b.start()?;
            if ep.rank() == Rank(1) {
                let payload = vec![0xa5u8; 4096];
                for x in &input {
                    let len = declared(x);
                    let sent = usize::from(x.sent % 4097).min(len as usize);
                    let mut w = ep.begin_message(Rank(0), len as usize, h)?;
                    // A message of which nothing went out is not delivered
                    // at all: send at least a byte, or a whole empty one.
                    let sent = if len > 0 { sent.max(1) } else { 0 };
                    let _ = w.send_piece(&payload[..sent]);
                    match x.ending {
                        // An empty message: whole with `end`.
                        _ if len == 0 => {
                            let _ = w.end();
                        }
                        Ending::End => {
                            let _ = w.end();
                        }
                        Ending::Drop => drop(w),
                        Ending::Overflow => {
                            let _ = w.send_piece(&payload[..(len as usize - sent + 1).min(4096)]);
                            drop(w);
                        }
                    }
                }
                ep.send(Rank(0), h, &[])?; // the last one: empty
            } else {
                let t0 = std::time::Instant::now();
                while seen.borrow().len() < n + 1
                    && t0.elapsed() < std::time::Duration::from_secs(5)
                {
                    let _ = ep.extract(usize::MAX);
                }
                assert_eq!(seen.borrow().len(), n + 1, "every message handled");
                for (i, declared, r) in seen.borrow().iter() {
                    let i = *i;
                    let max = match input.get(i).map(|h| h.read) {
                        Some(Read::VecMax(m)) => u64::from(m),
                        Some(Read::Vec) | None => MAX_RECEIVE as u64,
                        Some(Read::Chunks(_)) => u64::MAX,
                    };
                    match r {
                        Ok(got) => assert!(got <= declared && *declared <= max, "{i}: {r:?}"),
                        Err(ReceiveError::TooLong { src, len, max: m }) => {
                            assert_eq!(*src, Rank(1));
                            assert!(len == declared && len > m && *m == max, "{i}: {r:?}");
                        }
                        Err(ReceiveError::Aborted {
                            declared: d,
                            received,
                            ..
                        }) => assert!(d == declared && received <= d, "{i}: {r:?}"),
                        Err(e) => panic!("{i}: unexpected {e}"),
                    }
                }
            }
            ep.close()?;
            Ok(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
});
