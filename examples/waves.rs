//! Dependent waves: each wave's requests wait on the previous wave's
//! replies, and `quiesce` ends every wave.
//!
//! `fmrun -n N target/release/examples/waves [--json] [--waves W] [--width K]`
//!
//! In each wave every rank sends `width` requests to every other rank; a
//! request's handler answers with a reply carrying the request's value
//! plus one; `quiesce` returns once every request and reply of the wave
//! has been handled everywhere, and each rank checks that it got all its
//! replies with the values it expects before starting the next wave. The
//! time is mostly short waits: for replies, and for the termination
//! round's messages to rank 0 and back. `--json` prints one line:
//! `{"ranks":N,"waves":W,"width":K,"time_s":T,"wave_us":T/W*1e6}` (rank 0).

use clap::Parser;
use fastmsg::{EndpointBuilder, Rank};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

#[derive(Parser, Debug)]
struct Args {
    /// One JSON line with the figures.
    #[arg(long)]
    json: bool,
    /// Waves.
    #[arg(long, default_value_t = 2000)]
    waves: u64,
    /// Requests per wave to each other rank.
    #[arg(long, default_value_t = 4)]
    width: u64,
}

fn main() -> std::process::ExitCode {
    fastmsg_examples::exit_report(run())
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let mut b = EndpointBuilder::from_env()?;
    let (me, n) = (b.rank().0, b.size());
    if n < 2 {
        return Err("waves needs at least 2 ranks (fmrun -n 2 …)".into());
    }
    // Sum of the reply values received in this wave, and their count.
    let (got, sum) = (Rc::new(Cell::new(0u64)), Rc::new(Cell::new(0u64)));
    let reply = {
        let (got, sum) = (got.clone(), sum.clone());
        b.register_fn("reply", move |_ctx, p| {
            let v = u64::from_le_bytes(p.data()[..8].try_into()?);
            got.set(got.get() + 1);
            sum.set(sum.get() + v);
            Ok(())
        })
    };
    let request = b.register_fn("request", move |ctx, p| {
        let v = u64::from_le_bytes(p.data()[..8].try_into()?);
        ctx.send(p.source(), reply, &[&(v + 1).to_le_bytes()])?;
        Ok(())
    });
    let mut ep = b.start()?;
    ep.quiesce()?;
    let t0 = Instant::now();
    for wave in 0..args.waves {
        got.set(0);
        sum.set(0);
        for k in 1..n {
            let dest = Rank((me + k) % n);
            for i in 0..args.width {
                ep.send(dest, request, &[&(wave + i).to_le_bytes()])?;
            }
        }
        ep.quiesce()?;
        let peers = u64::from(n - 1);
        let want_sum = peers * (0..args.width).map(|i| wave + i + 1).sum::<u64>();
        if got.get() != peers * args.width || sum.get() != want_sum {
            return Err(format!(
                "wave {wave}: {} replies summing to {}, expected {} summing to {want_sum}",
                got.get(),
                sum.get(),
                peers * args.width
            )
            .into());
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    if me == 0 {
        let per = secs / args.waves.max(1) as f64 * 1e6;
        if args.json {
            println!(
                "{{\"ranks\":{n},\"waves\":{},\"width\":{},\"time_s\":{secs:.6},\"wave_us\":{per:.2}}}",
                args.waves, args.width
            );
        } else {
            println!(
                "{} waves of {} requests per peer on {n} ranks: {secs:.3} s, {per:.1} µs per wave",
                args.waves, args.width
            );
        }
    }
    ep.close()?;
    Ok(())
}
