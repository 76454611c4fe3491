//! The fastmsg demo: several ranks exchange messages through handlers.
//!
//! `fmrun -n 4 target/release/examples/demo`
//!
//! 1. **Ring**: a token travels rank 0 → 1 → … → 0 for a number of laps;
//!    each handler adds one and forwards it from inside the handler.
//! 2. **All-to-all**: every rank streams a 64 KiB message to every rank
//!    (itself included) in uneven pieces; an async handler receives it in
//!    chunks and checks a checksum carried in the first 8 bytes.
//! 3. **Report**: every rank sends its counters to rank 0, which prints a
//!    table and exits non-zero if any check failed.

use clap::Parser;
use fastmsg::{EndpointBuilder, Rank};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

#[derive(Parser, Debug)]
struct Args {
    /// Laps of the ring.
    #[arg(long, default_value_t = 1000)]
    laps: u64,
    /// Bytes of each all-to-all message.
    #[arg(long, default_value_t = 65536)]
    bytes: usize,
}

/// FNV-1a, the all-to-all checksum.
fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

#[derive(Default, Clone, Copy)]
struct Counters {
    sent: u64,
    received: u64,
    bytes_in: u64,
    bad: u64,
}

impl Counters {
    fn encode(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        for (i, v) in [self.sent, self.received, self.bytes_in, self.bad]
            .iter()
            .enumerate()
        {
            b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    fn decode(b: &[u8]) -> Counters {
        let w = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
        Counters {
            sent: w(0),
            received: w(1),
            bytes_in: w(2),
            bad: w(3),
        }
    }
}

fn main() -> std::process::ExitCode {
    fastmsg_examples::exit_report(run())
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let mut b = EndpointBuilder::from_env()?;
    let (me, n) = (b.rank().0, b.size());
    let stats = Rc::new(Cell::new(Counters::default()));
    let bump = {
        let stats = stats.clone();
        move |f: &dyn Fn(&mut Counters)| {
            let mut c = stats.get();
            f(&mut c);
            stats.set(c);
        }
    };

    // 1. Ring: the handler adds one and forwards, from inside the handler.
    let ring_done = Rc::new(Cell::new(None::<u64>));
    let laps = args.laps;
    let ring = {
        let (done, bump) = (ring_done.clone(), bump.clone());
        b.register_fn("ring", move |ctx, p| {
            let mut t = [0u8; 8];
            t.copy_from_slice(&p.data()[..8]);
            let token = u64::from_le_bytes(t) + 1;
            bump(&|c| {
                c.received += 1;
                c.bytes_in += 8;
            });
            let me = ctx.rank().0;
            if me == 0 && token >= laps * u64::from(ctx.size()) {
                done.set(Some(token));
                return Ok(());
            }
            let next = Rank((me + 1) % ctx.size());
            ctx.send(next, p.handler(), &[&token.to_le_bytes()])?;
            bump(&|c| c.sent += 1);
            Ok(())
        })
    };

    // 2. All-to-all: streamed receive, checksum in the first 8 bytes.
    let a2a_got = Rc::new(Cell::new(0u32));
    let a2a = {
        let (got, bump) = (a2a_got.clone(), bump.clone());
        // Every rank sends the same size: a longer message is a peer's
        // error, refused before it sizes an allocation.
        let want = args.bytes.max(8);
        b.register("all-to-all", move |_ctx, mut m| {
            let (got, bump) = (got.clone(), bump.clone());
            async move {
                if m.len() != want {
                    return Err(format!(
                        "all-to-all message of {} bytes, expected {want}",
                        m.len()
                    )
                    .into());
                }
                let mut head = [0u8; 8];
                m.receive(&mut head).await?;
                let mut body = vec![0u8; m.remaining()];
                let mut off = 0;
                while off < body.len() {
                    let end = (off + 5000).min(body.len());
                    off += m.receive(&mut body[off..end]).await?;
                }
                let ok = fnv(&body) == u64::from_le_bytes(head);
                bump(&|c| {
                    c.received += 1;
                    c.bytes_in += 8 + body.len() as u64;
                    c.bad += u64::from(!ok);
                });
                got.set(got.get() + 1);
                Ok(())
            }
        })
    };

    // 3. Report, gathered at rank 0.
    let reports = Rc::new(RefCell::new(vec![None::<Counters>; n as usize]));
    let report = {
        let reports = reports.clone();
        b.register_fn("report", move |_ctx, p| {
            reports.borrow_mut()[p.source().index()] = Some(Counters::decode(p.data()));
            Ok(())
        })
    };

    // What this run uses, for the banner (the launcher's settings applied).
    let wait = b.config().wait;
    let net = b.config().net.mode;
    let mut ep = b.start()?;
    let here = ep.local_ranks().len();

    // Ring.
    let t0 = Instant::now();
    if me == 0 {
        ep.send(Rank(1 % n), ring, &[&0u64.to_le_bytes()])?;
        bump(&|c| c.sent += 1);
        ep.wait_until(|| ring_done.get().is_some())?;
    }
    let ring_time = t0.elapsed();

    // All-to-all, to every rank including ourselves, in uneven pieces.
    let mut body = vec![0u8; args.bytes.saturating_sub(8)];
    for (i, x) in body.iter_mut().enumerate() {
        *x = (i as u32 ^ me.wrapping_mul(2_654_435_761)) as u8;
    }
    let sum = fnv(&body).to_le_bytes();
    for dest in 0..n {
        let mut w = ep.begin_message(Rank(dest), 8 + body.len(), a2a)?;
        w.send_piece(&sum)?;
        for piece in body.chunks(7777) {
            w.send_piece(piece)?;
        }
        w.end()?;
        bump(&|c| c.sent += 1);
    }
    ep.wait_until(|| a2a_got.get() == n)?;

    // Report to rank 0.
    ep.send(Rank(0), report, &[&stats.get().encode()])?;
    if me == 0 {
        ep.wait_until(|| reports.borrow().iter().all(Option::is_some))?;
    }
    ep.close()?;

    if me != 0 {
        return Ok(());
    }
    let token = ring_done.get().unwrap_or(0);
    let hops = laps * u64::from(n);
    let over = match net {
        fastmsg::NetMode::Auto if here == n as usize => {
            "over shared memory on this host".to_owned()
        }
        fastmsg::NetMode::Auto => format!(
            "over shared memory within a host ({here} on rank 0's), the network between hosts"
        ),
        mode => format!("every pair over the network ({mode})"),
    };
    println!("fastmsg demo: {n} ranks {over}, wait policy {wait:?}");
    println!(
        "ring        : {laps} laps x {n} hops, token = {token} (expected {hops}), {:.2} us per hop",
        ring_time.as_secs_f64() * 1e6 / hops as f64
    );
    println!(
        "all-to-all  : every rank streamed {} bytes to each of {n} ranks in pieces of 7777",
        8 + body.len()
    );
    println!();
    println!(
        "{:>5} {:>10} {:>10} {:>14} {:>8}",
        "rank", "sent", "received", "bytes in", "checks"
    );
    let mut bad = 0;
    for (r, c) in reports.borrow().iter().enumerate() {
        let c = c.unwrap_or_default();
        bad += c.bad;
        let status = if c.bad == 0 { "ok" } else { "FAILED" };
        println!(
            "{r:>5} {:>10} {:>10} {:>14} {:>8}",
            c.sent, c.received, c.bytes_in, status
        );
    }
    if token != hops || bad != 0 {
        eprintln!("demo: checks FAILED (token {token}, expected {hops}; {bad} bad checksums)");
        std::process::exit(1);
    }
    println!("\nall checks passed");
    Ok(())
}
