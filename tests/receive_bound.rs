//! The length a message declares comes from its sender: an async handler's
//! `Message::receive_vec` checks it against the receiver's bound
//! (`Config::max_receive`, or the bound given to `receive_vec_max`) before
//! it allocates anything, and refuses a longer message with
//! `ReceiveError::TooLong` — over shared memory and over TCP. A message
//! declaring a terabyte would otherwise end the receiving process
//! (the allocation fails and the process aborts).

use fastmsg::error::ReceiveError;
use fastmsg::threads;
use fastmsg::{Config, NetMode, Rank};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// What the receiving handler's calls gave, in order.
type Seen = Rc<RefCell<Vec<Result<usize, ReceiveError>>>>;

/// Rank 1 sends rank 0: a message declaring 2^40 bytes of which 5 are sent
/// (the writer is dropped: the message ends aborted), one of 300 bytes
/// (over the explicit bound of 100), and a good one of 64 bytes. Rank 0's
/// handler receives each with `receive_vec` (the first two with the
/// configured bound, then with `receive_vec_max(100)`).
fn hostile_lengths(configure: fn(&mut Config)) {
    threads::run(2, configure, |mut b| {
        let seen: Seen = Rc::default();
        let s = seen.clone();
        let h = b.register("vec", move |_ctx, mut m| {
            let s = s.clone();
            async move {
                let r = if m.len() == 300 {
                    m.receive_vec_max(100).await
                } else {
                    m.receive_vec().await
                };
                s.borrow_mut().push(r.map(|v| v.len()));
                Ok(())
            }
        });
        let mut ep = b.start()?;
        if ep.rank() == Rank(1) {
            let mut w = ep.begin_message(Rank(0), 1 << 40, h)?;
            w.send_piece(b"hello")?;
            drop(w);
            ep.send(Rank(0), h, &[&[7u8; 300]])?;
            ep.send(Rank(0), h, &[&[1u8; 64]])?;
        } else {
            ep.wait_until(|| seen.borrow().len() == 3)?;
            let seen = seen.borrow();
            assert!(
                matches!(
                    seen[0],
                    Err(ReceiveError::TooLong { src: Rank(1), len, max })
                        if len == 1 << 40 && max == 1 << 20
                ),
                "a declared terabyte: {:?}",
                seen[0]
            );
            assert!(
                matches!(
                    seen[1],
                    Err(ReceiveError::TooLong {
                        src: Rank(1),
                        len: 300,
                        max: 100
                    })
                ),
                "over the handler's own bound: {:?}",
                seen[1]
            );
            assert!(matches!(seen[2], Ok(64)), "then a good one: {:?}", seen[2]);
        }
        ep.close()?;
        Ok(())
    })
    .unwrap_or_else(|e| panic!("{e}"));
}

fn shm(c: &mut Config) {
    c.max_receive = 1 << 20;
}

fn tcp(c: &mut Config) {
    shm(c);
    c.net.mode = NetMode::named("tcp").expect("a provider of every build");
    c.net.secret = Some("receive-bound-test-secret".into());
    c.timeout = Duration::from_secs(60);
}

#[test]
fn receive_vec_refuses_a_declared_terabyte_over_shm() {
    hostile_lengths(shm);
}

#[test]
fn receive_vec_refuses_a_declared_terabyte_over_tcp() {
    hostile_lengths(tcp);
}

/// The default bound is 1 GiB, and `FASTMSG_MAX_RECEIVE` is a setting.
#[test]
fn the_default_bound_is_a_gibibyte() {
    assert_eq!(fastmsg::DEFAULT_MAX_RECEIVE, 1 << 30);
    assert!(fastmsg::settings::find("FASTMSG_MAX_RECEIVE").is_some());
}
