//! Bale histogram, written the natural way: one aggregated active message
//! per update.
//!
//! `fmrun -n N target/release/examples/histo [--json] [--reps 3] [--form channel|atomic|atomic-direct|atomic-owner|atomic-owned]`
//!
//! Every rank draws `2^log-updates` random entries of a table of
//! `2^log-table` u64 counters spread in blocks over the ranks, one call
//! per update, in one of five forms:
//! - `channel` (default): one `u32` (the entry's local index) to the
//!   owner; the owner's handler increments the counter;
//! - `atomic`: a remote atomic add (`RemoteWords::add`) of 1 to the
//!   owner's word — by default a one-way 4-byte item to the owner's
//!   handler, which applies it with a CPU atomic, whichever host the
//!   owner is on;
//! - `atomic-direct`: the same adds with `RemoteWords::direct_adds`: a
//!   CPU atomic on the shared segment for an owner on this host;
//! - `atomic-owner`: the same adds with `RemoteWords::through_owner`
//!   (every operation through the owner's handler);
//! - `atomic-owned`: the same adds on `RemoteWords::owner_only` words
//!   (every rank's operations through the owner's handler, which, as the
//!   words' only writer, applies them without locked atomics).
//!
//! `Aggregator::quiesce` ends the phase.
//! The same parameters and random streams as the MPI version of this
//! kernel that `fmbench` compares with (splitmix64), so both print the same table hash. Verified
//! against a sequential recomputation of this rank's block. `--json`: one
//! line per run with `max_rss_mib` (the largest peak resident memory of
//! any rank, MiB), `kernel`, `form`, `ranks`, `ok`, `updates_per_s`,
//! `time_s`, `hash`, `rep`.

use clap::{Parser, ValueEnum};
use fastmsg::{EndpointBuilder, Rank};
use fastmsg_examples::bale;
use fastmsg_examples::report::{Figure, Repetition, Reporter};
use fastmsg_handlers::aggregate::{AggConfig, Aggregator};
use fastmsg_handlers::memory::RemoteWords;
use fastmsg_handlers::{CollConfig, Collectives, Op};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

#[derive(Parser, Debug)]
struct Args {
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    /// log2 of the table's entries (all ranks together).
    #[arg(long, default_value_t = 20)]
    log_table: u32,
    /// log2 of the updates per rank.
    #[arg(long, default_value_t = 22)]
    log_updates: u32,
    /// Repetitions (one line each).
    #[arg(long, default_value_t = 1)]
    reps: usize,
    /// Aggregation buffer bytes per destination.
    #[arg(long, default_value_t = AggConfig::default().buffer_bytes)]
    buffer: usize,
    /// How an update is written.
    #[arg(long, value_enum, default_value_t = Form::Channel)]
    form: Form,
}

/// How an update is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Form {
    /// An aggregated item to the owner's handler.
    Channel,
    /// A remote atomic add (to the owner's handler).
    Atomic,
    /// A remote atomic add, a CPU atomic for an owner on this host.
    AtomicDirect,
    /// A remote atomic add applied by the owner's handler.
    AtomicOwner,
    /// A remote add to words only their owner updates.
    AtomicOwned,
}

impl Form {
    fn name(self) -> &'static str {
        match self {
            Form::Channel => "channel",
            Form::Atomic => "atomic",
            Form::AtomicDirect => "atomic-direct",
            Form::AtomicOwner => "atomic-owner",
            Form::AtomicOwned => "atomic-owned",
        }
    }
}

fn main() -> Result<(), fastmsg::Error> {
    let args = Args::parse();
    let mut b = EndpointBuilder::from_env()?;
    let (me, n) = (b.rank().0, b.size());
    let coll = Collectives::register(&mut b, CollConfig::default());
    let agg = Aggregator::new(&mut b, AggConfig::default().with_buffer_bytes(args.buffer));
    let t = 1u64 << args.log_table;
    let l = 1u64 << args.log_updates;
    let (per, lo, hi) = bale::block(t, n, me);
    // Cells: the handler increments a counter without a borrow flag.
    let table: Rc<Vec<Cell<u64>>> = Rc::new((lo..hi).map(|_| Cell::new(0)).collect());
    let tb = Rc::clone(&table);
    let hist = agg.channel::<u32, _>(&mut b, "histo", move |_ctx, _src, i| {
        // A bad index from a peer is an error, not a panic.
        let c = tb.get(i as usize).ok_or("histogram index out of range")?;
        c.set(c.get() + 1);
        Ok(())
    });
    // The atomic forms' table: `per` words on every rank.
    let mut words = if args.form == Form::AtomicOwned {
        RemoteWords::owner_only(&agg, &mut b, "histo-words", per as usize)
    } else {
        RemoteWords::new(&agg, &mut b, "histo-words", per as usize)
    };
    match args.form {
        Form::AtomicOwner => words = words.through_owner(),
        Form::AtomicDirect => words = words.direct_adds(),
        Form::Channel | Form::Atomic | Form::AtomicOwned => {}
    }
    let mut ep = b.start()?;
    let ctx = ep.ctx();
    let mut report = Reporter::new(args.json);
    for rep in 0..args.reps {
        table.iter().for_each(|c| c.set(0));
        for k in 0..hi - lo {
            words.set_local(&ctx, k, 0)?;
        }
        coll.barrier(&mut ep)?;
        let t0 = Instant::now();
        let mut s = bale::seed(me, 1);
        match args.form {
            Form::Channel => {
                for _ in 0..l {
                    let g = bale::next(&mut s) & (t - 1);
                    let d = (g / per) as u32;
                    hist.send(&ctx, Rank(d), (g - per * u64::from(d)) as u32)?;
                }
            }
            Form::Atomic | Form::AtomicDirect | Form::AtomicOwner | Form::AtomicOwned => {
                for _ in 0..l {
                    let g = bale::next(&mut s) & (t - 1);
                    let d = (g / per) as u32;
                    words.add(&ctx, Rank(d), g - per * u64::from(d), 1)?;
                }
            }
        }
        agg.quiesce(&mut ep)?;
        let mut worst = [t0.elapsed().as_secs_f64()];
        coll.allreduce(&mut ep, &mut worst, Op::Max)?;
        // Verify: this rank's block against a sequential recomputation.
        let mut expect = vec![0u64; (hi - lo) as usize];
        for r in 0..n {
            let mut s2 = bale::seed(r, 1);
            for _ in 0..l {
                let g = bale::next(&mut s2) & (t - 1);
                if (lo..hi).contains(&g) {
                    expect[(g - lo) as usize] += 1;
                }
            }
        }
        let mut loc = [0u64; 3];
        for (k, (cell, &want)) in table.iter().zip(&expect).enumerate() {
            let got = match args.form {
                Form::Channel => cell.get(),
                Form::Atomic | Form::AtomicDirect | Form::AtomicOwner | Form::AtomicOwned => {
                    words.local(&ctx, k as u64)?
                }
            };
            loc[0] += got;
            loc[1] += u64::from(got != want);
            loc[2] = loc[2].wrapping_add(got.wrapping_mul(bale::value(lo + k as u64)));
        }
        coll.allreduce(&mut ep, &mut loc, Op::Sum)?;
        let line = Repetition {
            kernel: "histo",
            form: Some(args.form.name()),
            size: format!(
                "table=2^{} updates/rank=2^{}",
                args.log_table, args.log_updates
            ),
            unit: "updates",
            work: u64::from(n) * l,
            time_s: worst[0],
            buffer: args.buffer,
            index: rep,
            ok: loc[0] == u64::from(n) * l && loc[1] == 0,
            text: &[
                ("sum", Figure::Count(loc[0])),
                ("bad_counters", Figure::Count(loc[1])),
                ("hash", Figure::Hash(loc[2])),
            ],
            json: &[("hash", Figure::Hash(loc[2]))],
        };
        report.report(&coll, &mut ep, &line)?;
    }
    report.finish(ep)
}
