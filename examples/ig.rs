//! Bale index-gather, written the natural way: one aggregated request per
//! read, answered from the owner's handler.
//!
//! `fmrun -n N target/release/examples/ig [--json] [--reps 3] [--form channel|get|get-owner|rpc]`
//!
//! Every rank reads `2^log-requests` random entries of a distributed table
//! of `2^log-table` u64 values, one call per read, in one of four forms:
//! - `channel` (default): one request (slot, local index) to the owner,
//!   whose handler sends the value back on a reply channel (from inside
//!   the handler); the reply handler stores it in the slot;
//! - `get`: a remote read (`RemoteWords::get`) of the owner's word, the
//!   slot as its token; the completion stores the value — for an owner on
//!   this host the word is prefetched and read from the shared segment
//!   a few reads later (their cache misses overlap), an aggregated
//!   request answered by the owner's handler otherwise;
//! - `get-owner`: the same reads, every one answered by the owner's
//!   handler (the path across hosts, measured on one host);
//! - `rpc`: a call (`Rpc::send`) of the local index, the slot as its
//!   token; the owner's handler returns the value, the completion stores
//!   it.
//!
//! `Aggregator::quiesce` ends the phase (answers included). The same
//! parameters and random streams as the MPI version of this kernel that
//! `fmbench` compares with (splitmix64); every value read is checked against the
//! table's formula. `--json`: one line per run with `max_rss_mib` (the largest peak
//! resident memory of any rank), `kernel`, `form`, `ranks`,
//! `ok`, `requests_per_s`, `time_s`, `rep`.

use bytemuck::{Pod, Zeroable};
use clap::{Parser, ValueEnum};
use fastmsg::{EndpointBuilder, Rank};
use fastmsg_examples::bale;
use fastmsg_examples::report::{Figure, Repetition, Reporter};
use fastmsg_handlers::aggregate::{AggConfig, Aggregator, Channel};
use fastmsg_handlers::memory::RemoteWords;
use fastmsg_handlers::rpc::RpcError;
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
    /// log2 of the requests per rank.
    #[arg(long, default_value_t = 21)]
    log_requests: u32,
    /// Repetitions (one line each).
    #[arg(long, default_value_t = 1)]
    reps: usize,
    /// Aggregation buffer bytes per destination.
    #[arg(long, default_value_t = AggConfig::default().buffer_bytes)]
    buffer: usize,
    /// How a read is written.
    #[arg(long, value_enum, default_value_t = Form::Channel)]
    form: Form,
}

/// How a read is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Form {
    /// A request channel and a reply channel.
    Channel,
    /// A remote read.
    Get,
    /// A remote read answered by the owner's handler.
    GetOwner,
    /// A request/response call.
    Rpc,
}

impl Form {
    fn name(self) -> &'static str {
        match self {
            Form::Channel => "channel",
            Form::Get => "get",
            Form::GetOwner => "get-owner",
            Form::Rpc => "rpc",
        }
    }
}

/// A request: where the answer goes, and which local entry.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Req {
    slot: u32,
    idx: u32,
}

/// A reply: the slot and the value.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Rep {
    slot: u32,
    pad: u32,
    val: u64,
}

fn main() -> Result<(), fastmsg::Error> {
    let args = Args::parse();
    let mut b = EndpointBuilder::from_env()?;
    let (me, n) = (b.rank().0, b.size());
    let coll = Collectives::register(&mut b, CollConfig::default());
    let agg = Aggregator::new(&mut b, AggConfig::default().with_buffer_bytes(args.buffer));
    let t = 1u64 << args.log_table;
    let l = 1u64 << args.log_requests;
    let (per, lo, hi) = bale::block(t, n, me);
    let table: Rc<Vec<u64>> = Rc::new((lo..hi).map(bale::value).collect());
    // Cells: the reply handler writes a slot without a borrow flag.
    let out: Rc<Vec<Cell<u64>>> = Rc::new((0..l).map(|_| Cell::new(0)).collect());
    let o = Rc::clone(&out);
    let reply: Channel<Rep> = agg.channel(&mut b, "ig-reply", move |_ctx, _src, r: Rep| {
        o.get(r.slot as usize)
            .ok_or("reply slot out of range")?
            .set(r.val);
        Ok(())
    });
    let tb = Rc::clone(&table);
    let rp = reply.clone();
    let request: Channel<Req> = agg.channel(&mut b, "ig-request", move |ctx, src, q: Req| {
        let val = *tb.get(q.idx as usize).ok_or("request index out of range")?;
        rp.send(
            ctx,
            src,
            Rep {
                slot: q.slot,
                pad: 0,
                val,
            },
        )?;
        Ok(())
    });
    // Answers of the get and rpc forms that came back as errors.
    let failures = Rc::new(Cell::new(0u64));
    let store = |out: &Rc<Vec<Cell<u64>>>, failures: &Rc<Cell<u64>>| {
        let (o, f) = (Rc::clone(out), Rc::clone(failures));
        move |_: &fastmsg::Ctx, _: Rank, token: u64, r: Result<u64, RpcError>| match (
            r,
            o.get(token as usize),
        ) {
            (Ok(v), Some(c)) => c.set(v),
            _ => f.set(f.get() + 1),
        }
    };
    // The get forms' table: the same values in `per` words on every rank.
    let mut words = RemoteWords::new(&agg, &mut b, "ig-words", per as usize);
    if args.form == Form::GetOwner {
        words = words.through_owner();
    }
    words.on_complete(store(&out, &failures));
    let tb = Rc::clone(&table);
    let call = agg.rpc(&mut b, "ig-call", move |_ctx, _src, idx: u32| {
        tb.get(idx as usize)
            .copied()
            .ok_or("request index out of range")
    });
    call.on_complete(store(&out, &failures));
    let mut ep = b.start()?;
    let ctx = ep.ctx();
    for (k, &v) in table.iter().enumerate() {
        words.set_local(&ctx, k as u64, v)?;
    }
    let mut report = Reporter::new(args.json);
    for rep in 0..args.reps {
        out.iter().for_each(|c| c.set(0));
        failures.set(0);
        coll.barrier(&mut ep)?;
        let t0 = Instant::now();
        let mut s = bale::seed(me, 2);
        for i in 0..l {
            let g = bale::next(&mut s) & (t - 1);
            let d = (g / per) as u32;
            let idx = g - per * u64::from(d);
            match args.form {
                Form::Channel => {
                    let q = Req {
                        slot: i as u32,
                        idx: idx as u32,
                    };
                    request.send(&ctx, Rank(d), q)?;
                }
                Form::Get | Form::GetOwner => words.get(&ctx, Rank(d), idx, i)?,
                Form::Rpc => call.send(&ctx, Rank(d), idx as u32, i)?,
            }
        }
        agg.quiesce(&mut ep)?;
        let mut worst = [t0.elapsed().as_secs_f64()];
        coll.allreduce(&mut ep, &mut worst, Op::Max)?;
        let mut s2 = bale::seed(me, 2);
        let bad = out
            .iter()
            .filter(|v| v.get() != bale::value(bale::next(&mut s2) & (t - 1)))
            .count();
        let mut gbad = [bad as u64 + failures.get()];
        coll.allreduce(&mut ep, &mut gbad, Op::Sum)?;
        let line = Repetition {
            kernel: "ig",
            form: Some(args.form.name()),
            size: format!(
                "table=2^{} requests/rank=2^{}",
                args.log_table, args.log_requests
            ),
            unit: "requests",
            work: u64::from(n) * l,
            time_s: worst[0],
            buffer: args.buffer,
            index: rep,
            ok: gbad[0] == 0,
            text: &[("bad", Figure::Count(gbad[0]))],
            json: &[],
        };
        report.report(&coll, &mut ep, &line)?;
    }
    report.finish(ep)
}
