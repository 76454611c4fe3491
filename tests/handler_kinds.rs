//! Declare-then-define handler ids, whole-message handlers, idle hooks and
//! `quiesce`, on the thread entry point.

use fastmsg::error::{ExtractError, ReceiveError, StartError};
use fastmsg::threads;
use fastmsg::{EndpointBuilder, Error, Rank};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

fn run<T: Send>(n: u32, body: impl Fn(EndpointBuilder) -> Result<T, Error> + Sync) -> Vec<T> {
    threads::run(n, |c| c.timeout = Duration::from_secs(60), body).unwrap_or_else(|e| panic!("{e}"))
}

/// Ping and pong name each other through a declared id; a countdown
/// bounces between two ranks until it reaches 0.
#[test]
fn declared_handlers_name_each_other() {
    let out = run(2, |mut b| {
        let ping = b.declare("ping");
        let last = Rc::new(Cell::new(u8::MAX));
        let l = Rc::clone(&last);
        let pong = b.register_fn("pong", move |ctx, p| {
            l.set(p.data()[0]);
            if p.data()[0] > 0 {
                ctx.send(p.source(), ping, &[&[p.data()[0] - 1]])?;
            }
            Ok(())
        });
        let l = Rc::clone(&last);
        b.define_fn(ping, move |ctx, p| {
            l.set(p.data()[0]);
            if p.data()[0] > 0 {
                ctx.send(p.source(), pong, &[&[p.data()[0] - 1]])?;
            }
            Ok(())
        });
        let mut ep = b.start()?;
        if ep.rank() == Rank(0) {
            ep.send(Rank(1), ping, &[&[20]])?;
        }
        ep.quiesce()?;
        let v = last.get();
        ep.close()?;
        Ok(v)
    });
    // 20 → rank 1 (ping), 19 → rank 0 (pong), …, 0 arrives at rank 1.
    assert_eq!(out, vec![1, 0]);
}

#[test]
fn a_declared_handler_never_defined_fails_start() {
    let job = threads::run(
        1,
        |_| {},
        |mut b| {
            b.register_fn("a", |_, _| Ok(()));
            let _ = b.declare("forgotten");
            match b.start() {
                Err(StartError::UndefinedHandler { id: 1, name }) if name == "forgotten" => Ok(()),
                other => Err(Error::other(format!(
                    "expected UndefinedHandler, got {other:?}"
                ))),
            }
        },
    );
    job.unwrap_or_else(|e| panic!("{e}"));
    let job = threads::run(
        1,
        |_| {},
        |mut b| {
            let a = b.register_fn("a", |_, _| Ok(()));
            b.define_fn(a, |_, _| Ok(()));
            match b.start() {
                Err(StartError::BadDefinition { id: 0, .. }) => Ok(()),
                other => Err(Error::other(format!(
                    "expected BadDefinition, got {other:?}"
                ))),
            }
        },
    );
    job.unwrap_or_else(|e| panic!("{e}"));
}

/// Messages of random lengths (up to several frames) arrive whole, each
/// as one slice with the right bytes; one past the bound is refused with
/// a typed error and the next one still arrives.
#[test]
fn whole_message_handlers_get_one_slice() {
    const MAX: usize = 40_000;
    let lens: Vec<usize> = (0..60u64)
        .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize % MAX)
        .chain([0, 1, 8192, 8193, MAX])
        .collect();
    let body = |i: usize, len: usize| -> Vec<u8> { (0..len).map(|k| (k * 31 + i) as u8).collect() };
    let out = run(2, |mut b| {
        let got = Rc::new(RefCell::new(Vec::new()));
        let g = Rc::clone(&got);
        let h = b.register_whole("whole", MAX, move |_ctx, src, bytes| {
            assert_eq!(src, Rank(0));
            g.borrow_mut().push(bytes.to_vec());
            Ok(())
        });
        let mut ep = b.start()?;
        if ep.rank() == Rank(0) {
            for (i, &len) in lens.iter().enumerate() {
                ep.send(Rank(1), h, &[&body(i, len)])?;
            }
            ep.send(Rank(1), h, &[&vec![0u8; MAX + 1]])?;
            ep.send(Rank(1), h, &[b"after"])?;
            ep.quiesce()?;
        } else {
            let want = lens.len() + 1;
            let mut too_long = None;
            while got.borrow().len() < want {
                match ep.extract(usize::MAX) {
                    Ok(_) => {}
                    Err(ExtractError::Handler { source, .. }) => {
                        too_long = source.downcast_ref::<ReceiveError>().cloned();
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            assert_eq!(
                too_long,
                Some(ReceiveError::TooLong {
                    src: Rank(0),
                    len: MAX as u64 + 1,
                    max: MAX as u64
                })
            );
            ep.quiesce()?;
        }
        let v = got.borrow().clone();
        ep.close()?;
        Ok(v)
    });
    let mut want: Vec<Vec<u8>> = lens.iter().enumerate().map(|(i, &l)| body(i, l)).collect();
    want.push(b"after".to_vec());
    assert!(out[1] == want, "whole messages differ");
}

/// An idle hook runs when the rank is idle and its flag is up — in an
/// `extract` that finds nothing, in waits — and not while the flag is
/// down; a rank whose flag is up holds `quiesce` until its hook ran.
#[test]
fn idle_hooks_run_when_idle_and_flagged() {
    let out = run(2, |mut b| {
        let runs = Rc::new(Cell::new(0u32));
        let held = Rc::new(RefCell::new(Vec::<u8>::new()));
        let got = Rc::new(Cell::new(0u32));
        let g = Rc::clone(&got);
        let sink = b.register_fn("sink", move |_, p| {
            g.set(g.get() + p.data().len() as u32);
            Ok(())
        });
        let (r, h) = (Rc::clone(&runs), Rc::clone(&held));
        b.on_idle(move |ctx| {
            r.set(r.get() + 1);
            let bytes = std::mem::take(&mut *h.borrow_mut());
            if !bytes.is_empty() {
                ctx.send(Rank(1 - ctx.rank().0), sink, &[&bytes])?;
            }
            Ok(())
        });
        let mut ep = b.start()?;
        let ctx = ep.ctx();
        ep.extract(usize::MAX)?;
        let before = runs.get();
        assert_eq!(before, 0, "no flag, no hook");
        held.borrow_mut().extend_from_slice(&[1, 2, 3]);
        ctx.note_idle_work();
        assert!(ctx.idle_work_pending());
        // Quiesce: the flag holds the round until the hook sent the bytes.
        ep.quiesce()?;
        assert!(!ctx.idle_work_pending());
        let v = (runs.get(), got.get());
        ep.close()?;
        Ok(v)
    });
    for (runs, got) in out {
        assert!(runs >= 1);
        assert_eq!(got, 3, "the held bytes were sent before quiesce returned");
    }
}

/// `quiesce` on one rank and `close` on another in the same round: both
/// fail with the typed error instead of hanging.
#[test]
fn quiesce_beside_close_is_a_typed_error() {
    let out = run(2, |b| {
        let mut ep = b.start()?;
        let r = if ep.rank() == Rank(0) {
            ep.quiesce()
        } else {
            ep.close()
        };
        Ok(format!("{:?}", r.err()))
    });
    for e in out {
        assert!(e.contains("CloseQuiesceMismatch"), "{e}");
        assert!(e.contains("round: 0"), "{e}");
    }
}
