//! The collectives' registered handler (`fastmsg_handlers`), fed hostile
//! messages by a peer: a real two-rank job (ranks as threads, shared
//! memory). Rank 0 starts some non-blocking collectives; rank 1, the
//! attacker, sends any bytes — well-framed collective messages for any
//! group, instance, step and kind, or garbage, short or long (several
//! fragments) — to rank 0's collectives handler, then a "done" message.
//!
//! Rank 0 must report every bad message as a typed `CollError` (or, past
//! `max_message_bytes`, `ReceiveError::TooLong`) from `extract` (never a
//! panic), keep its early buffer within its bounds,
//! and end each collective with a typed error or a result of the right
//! length.

#![no_main]

use arbitrary::Arbitrary;
use fastmsg::error::{ExtractError, ReceiveError};
use fastmsg::threads;
use fastmsg::Rank;
use fastmsg_handlers::internal::wire::{emit, KINDS};
use fastmsg_handlers::{CollConfig, CollError, Collectives, Op, Request};
use libfuzzer_sys::fuzz_target;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::Barrier;

#[derive(Arbitrary, Debug, Clone)]
enum Start {
    Barrier,
    Bcast { root: bool, len: u8 },
    Reduce { root: bool, len: u8, op: u8 },
    Allreduce { len: u8, op: u8 },
    Allgather { len: u8 },
}

#[derive(Arbitrary, Debug, Clone)]
enum Attack {
    /// A collective message: header then `payload`.
    Framed {
        group: Option<u32>,
        seq: u8,
        step: u8,
        kind: u8,
        payload: Vec<u8>,
    },
    /// A framed message of `len` bytes of payload (several fragments).
    Long {
        seq: u8,
        step: u8,
        kind: u8,
        len: u16,
    },
    /// Any bytes.
    Raw(Vec<u8>),
}

#[derive(Arbitrary, Debug, Clone)]
struct Input {
    early_messages: u8,
    starts: Vec<Start>,
    attacks: Vec<Attack>,
}

const OPS: [Op; 6] = [Op::Sum, Op::Min, Op::Max, Op::And, Op::Or, Op::Xor];

enum Req {
    Unit(Request<()>),
    Data(Request<Vec<u64>>, usize),
}

fn attack_bytes(a: &Attack) -> Vec<u8> {
    match a {
        Attack::Framed {
            group,
            seq,
            step,
            kind,
            payload,
        } => {
            let kind = KINDS.get(usize::from(*kind % 16)).copied().unwrap_or(*kind);
            let mut b = emit((
                group.unwrap_or(0),
                u32::from(seq % 6),
                u16::from(*step % 8),
                kind,
                0,
            ))
            .to_vec();
            b.extend(payload.iter().take(64));
            b
        }
        Attack::Long {
            seq,
            step,
            kind,
            len,
        } => {
            let kind = KINDS.get(usize::from(*kind % 16)).copied().unwrap_or(*kind);
            let mut b = emit((0, u32::from(seq % 6), u16::from(*step % 8), kind, 0)).to_vec();
            b.extend((0..usize::from(*len % 2048)).map(|i| i as u8));
            b
        }
        Attack::Raw(b) => b.iter().take(2048).copied().collect(),
    }
}

fn is_typed(e: &ExtractError) -> bool {
    match e {
        ExtractError::Handler { src, source, .. } => {
            // A message past `max_message_bytes` is refused by fastmsg's
            // whole-message handler before the collectives see it.
            *src == Rank(1)
                && (source.downcast_ref::<CollError>().is_some()
                    || matches!(
                        source.downcast_ref::<ReceiveError>(),
                        Some(ReceiveError::TooLong { .. })
                    ))
        }
        _ => false,
    }
}

fuzz_target!(|input: Input| {
    let starts: Vec<Start> = input.starts.iter().take(4).cloned().collect();
    let attacks: Vec<Vec<u8>> = input.attacks.iter().take(24).map(attack_bytes).collect();
    let max_early = usize::from(input.early_messages % 16);
    let sync = Barrier::new(2);
    let out = threads::run(
        2,
        |cfg| cfg.shm.frame_size = 256,
        |mut b| {
            let me = b.rank();
            // The victim's early buffer is small; the attacker's never
            // fills (it starts nothing, so all the victim sends is early).
            let victim = me == Rank(0);
            let cfg = CollConfig {
                max_early_messages: if victim { max_early } else { 1 << 20 },
                max_early_bytes: if victim { 512 } else { 1 << 30 },
                max_message_bytes: 1024,
                ..CollConfig::default()
            };
            let coll = Collectives::register(&mut b, cfg);
            let done = Rc::new(Cell::new(false));
            let d = Rc::clone(&done);
            let done_h = b.register_fn("fuzz/done", move |_, _| {
                d.set(true);
                Ok(())
            });
            let mut ep = b.start()?;
            if me == Rank(1) {
                sync.wait();
                for a in &attacks {
                    ep.send(Rank(0), coll.handler(), &[a])?;
                }
                ep.send(Rank(0), done_h, &[])?;
                // Stay until the victim is done with us (our own handler
                // errors do not matter: we are the attacker).
                while !done.get() {
                    match ep.extract(usize::MAX) {
                        // Our own handler's errors: we are the attacker.
                        Ok(_) | Err(ExtractError::Handler { .. }) => {}
                        // The victim failed: its own thread reports why.
                        Err(_) => break,
                    }
                    std::thread::yield_now();
                }
                return Ok(Vec::new());
            }
            let mut reqs = Vec::new();
            let data = |len: &u8| -> Vec<u64> { (0..u64::from(*len % 5)).collect() };
            for s in &starts {
                let r = match s {
                    Start::Barrier => coll.ibarrier(&ep).map(Req::Unit),
                    Start::Bcast { root, len } => coll
                        .ibcast(&ep, data(len), Rank(u32::from(*root)))
                        .map(|r| Req::Data(r, usize::from(len % 5))),
                    Start::Reduce { root, len, op } => coll
                        .ireduce(
                            &ep,
                            data(len),
                            OPS[usize::from(op % 6)],
                            Rank(u32::from(*root)),
                        )
                        .map(|r| Req::Data(r, usize::from(len % 5))),
                    Start::Allreduce { len, op } => coll
                        .iallreduce(&ep, data(len), OPS[usize::from(op % 6)])
                        .map(|r| Req::Data(r, usize::from(len % 5))),
                    Start::Allgather { len } => coll
                        .iallgather(&ep, &data(len))
                        .map(|r| Req::Data(r, 2 * usize::from(len % 5))),
                };
                match r {
                    Ok(r) => reqs.push(r),
                    Err(e) => panic!("starting {s:?} failed: {e}"),
                }
            }
            sync.wait();
            let mut errors = Vec::new();
            while !done.get() {
                match ep.extract(usize::MAX) {
                    Ok(_) => {}
                    Err(e) => {
                        assert!(is_typed(&e), "untyped failure: {e:?}");
                        errors.push(e);
                    }
                }
                assert!(
                    coll.early_messages() <= max_early,
                    "early buffer past its bound"
                );
            }
            for r in reqs {
                match r {
                    Req::Unit(r) if r.is_complete() => {
                        let _ = r.wait(&mut ep);
                    }
                    Req::Data(r, len) if r.is_complete() => {
                        if let Ok(v) = r.wait(&mut ep) {
                            assert_eq!(v.len(), len, "a result of the wrong length");
                        }
                    }
                    _ => {}
                }
            }
            ep.send(Rank(1), done_h, &[])?;
            Ok(errors
                .into_iter()
                .map(|e| e.to_string())
                .collect::<Vec<String>>())
        },
    );
    if let Err(e) = out {
        panic!("the job failed: {e}");
    }
});
