//! All-to-all storm: every rank sends thousands of messages of random sizes
//! (0 … 256 KiB, log-uniform) split into random pieces to random peers,
//! alternately to an async (FM 2.x streamed) handler and a plain-function
//! handler. Every byte is checked and per-pair order is verified through
//! the sequence number each receiver expects next from each sender.
//! Run as threads (4 and 8 ranks on this 2-core machine, M = 1 and M = N)
//! and as processes through `fmrun`.

mod common;

use common::{message, Checker, Mix};
use fastmsg::bootstrap::threads;
use fastmsg::{EndpointBuilder, Error, Rank};
use std::cell::RefCell;
use std::rc::Rc;

/// One message of the plan: destination, length, piece-split seed.
#[derive(Clone, Copy, Debug)]
struct Planned {
    dst: u32,
    len: usize,
    split: u64,
}

fn plan(ranks: u32, src: u32, msgs: usize, max_len: usize, seed: u64) -> Vec<Planned> {
    let mut g = Mix(seed ^ (u64::from(src) << 32));
    let bits = usize::BITS - max_len.leading_zeros();
    (0..msgs)
        .map(|_| {
            let dst = g.below(u64::from(ranks)) as u32;
            // Log-uniform length in 0 ..= max_len, with exact 0s too.
            let len = match g.below(16) {
                0 => 0,
                _ => {
                    (g.next() as usize
                        >> (usize::BITS - g.below(u64::from(bits)) as u32 - 1).min(63))
                        % (max_len + 1)
                }
            };
            Planned {
                dst,
                len,
                split: g.next(),
            }
        })
        .collect()
}

struct RxState {
    expected_seq: Vec<u64>,
    received: usize,
    error: Option<String>,
}

fn storm_rank(
    mut b: EndpointBuilder,
    msgs: usize,
    max_len: usize,
    seed: u64,
) -> Result<usize, Error> {
    let (me, ranks) = (b.rank().0, b.size());
    let expect: usize = (0..ranks)
        .map(|s| {
            plan(ranks, s, msgs, max_len, seed)
                .iter()
                .filter(|p| p.dst == me)
                .count()
        })
        .sum();
    let st = Rc::new(RefCell::new(RxState {
        expected_seq: vec![0; ranks as usize],
        received: 0,
        error: None,
    }));
    // Async handler: receives in chunks of varying size, suspending when
    // bytes have not arrived yet.
    let s1 = st.clone();
    let h_async = b.register("storm-async", move |_ctx, mut m| {
        let st = s1.clone();
        async move {
            let src = m.source().0;
            let seq = {
                let mut s = st.borrow_mut();
                let q = s.expected_seq[src as usize];
                s.expected_seq[src as usize] += 1;
                q
            };
            let mut ck = Checker::new(src, me, seq, m.len());
            let mut buf = vec![0u8; 7919];
            let mut chunk = 1 + (seq as usize * 131) % buf.len();
            while m.remaining() > 0 {
                let off = m.len() - m.remaining();
                let n = m.receive(&mut buf[..chunk.min(m.remaining())]).await?;
                if let Err(e) = ck.feed(off, &buf[..n]) {
                    st.borrow_mut().error.get_or_insert(e);
                }
                chunk = 1 + (chunk * 7 + 3) % buf.len();
            }
            let mut s = st.borrow_mut();
            if !ck.done() {
                s.error
                    .get_or_insert(format!("message {seq} from {src} ended early"));
            }
            s.received += 1;
            Ok(())
        }
    });
    // Plain-function handler: checks each piece as it arrives.
    let s2 = st.clone();
    let ck2: Rc<RefCell<Vec<Option<Checker>>>> =
        Rc::new(RefCell::new((0..ranks).map(|_| None).collect()));
    let h_fn = b.register_fn("storm-fn", move |_ctx, p| {
        let src = p.source().0;
        let mut cks = ck2.borrow_mut();
        let mut s = s2.borrow_mut();
        if p.is_first() {
            let seq = s.expected_seq[src as usize];
            s.expected_seq[src as usize] += 1;
            cks[src as usize] = Some(Checker::new(src, me, seq, p.message_len()));
        }
        let ck = cks[src as usize].as_mut().expect("first piece seen");
        if let Err(e) = ck.feed(p.offset(), p.data()) {
            s.error.get_or_insert(e);
        }
        if p.is_last() {
            s.received += 1;
        }
        Ok(())
    });
    let mut ep = b.start()?;
    let mut seqs = vec![0u64; ranks as usize];
    for p in plan(ranks, me, msgs, max_len, seed) {
        let seq = seqs[p.dst as usize];
        seqs[p.dst as usize] += 1;
        let data = message(me, p.dst, seq, p.len);
        let h = if seq % 2 == 0 { h_async } else { h_fn };
        let mut w = ep.begin_message(Rank(p.dst), p.len, h)?;
        let mut g = Mix(p.split);
        let mut off = 0;
        while off < data.len() {
            let n = (1 + g.below(data.len() as u64 / 3 + 64) as usize).min(data.len() - off);
            w.send_piece(&data[off..off + n])?;
            off += n;
        }
        w.end()?;
    }
    ep.wait_until(|| st.borrow().received >= expect || st.borrow().error.is_some())?;
    if let Some(e) = st.borrow().error.clone() {
        panic!("rank {me}: {e}");
    }
    ep.close()?;
    let received = st.borrow().received;
    Ok(received)
}

fn run_storm(ranks: u32, queues: Option<u32>, msgs: usize, max_len: usize) {
    let got = threads::run(
        ranks,
        |c| {
            c.shm.queues = queues;
            c.timeout = std::time::Duration::from_secs(120);
        },
        |b| storm_rank(b, msgs, max_len, 0x5eed),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let total: usize = got.iter().sum();
    assert_eq!(total, ranks as usize * msgs, "every message delivered once");
}

#[test]
fn storm_4_ranks_dedicated_queues() {
    run_storm(4, None, 2000, 256 << 10);
}

#[test]
fn storm_4_ranks_one_shared_queue() {
    run_storm(4, Some(1), 2000, 256 << 10);
}

#[test]
fn storm_8_ranks_on_2_cores_dedicated_queues() {
    run_storm(8, None, 1000, 256 << 10);
}

#[test]
fn storm_8_ranks_on_2_cores_shared_queues() {
    run_storm(8, Some(1), 1000, 256 << 10);
}

#[test]
fn storm_odd_queue_count() {
    // 5 ranks over 2 queues: queue 0 has 3 senders, queue 1 has 2.
    run_storm(5, Some(2), 600, 64 << 10);
}

/// The rank program for the multi-process run: does nothing unless started
/// by `fmrun` (which sets FASTMSG_RANK).
#[test]
fn storm_process_rank() {
    if std::env::var("FASTMSG_RANK").is_err() {
        return;
    }
    let b = EndpointBuilder::from_env().expect("fmrun environment");
    storm_rank(b, 1500, 256 << 10, 0xfeed).expect("storm rank");
}

#[test]
fn storm_4_processes_through_fmrun() {
    for queues in ["4", "1"] {
        let exe = std::env::current_exe().unwrap();
        let status = std::process::Command::new(env!("CARGO_BIN_EXE_fmrun"))
            .args(["-n", "4", "--queues", queues, "--timeout", "120"])
            .arg(&exe)
            .args([
                "storm_process_rank",
                "--exact",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .status()
            .expect("run fmrun");
        assert!(
            status.success(),
            "fmrun storm with {queues} queue(s) failed: {status}"
        );
    }
}
