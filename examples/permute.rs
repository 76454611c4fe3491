//! Bale random permutation (dart throwing), written the natural way: one
//! call per dart, answered by the slot's owner.
//!
//! `fmrun -n N target/release/examples/permute [--json] [--reps 3]`
//!
//! The job permutes the ids `0..N`, `N = ranks · 2^log-darts`, each rank
//! owning a block of them. There are `M = 2N` target slots, `2 · 2^log-darts`
//! per rank. Every rank throws each of its ids (a dart) at a uniformly
//! random global slot: one request (local slot, id) to the slot's owner,
//! whose handler answers "landed" when the slot was empty (and keeps the id
//! there) or "bounced" when it was taken. The completion of a bounced dart
//! throws it again at a new random slot (from inside the completion).
//! `Aggregator::quiesce` ends the phase once every dart has landed; then an
//! `exscan` of the occupied slots per rank gives each rank where its
//! occupied slots start in the permutation, and the rank compacts them in
//! slot order.
//!
//! Random slots come from each rank's splitmix64 stream (salt 3), as in the
//! MPI version of this kernel that `fmbench` compares with; which darts
//! bounce depends on arrival order, so the permutation itself may differ
//! run to run. Verified: every id is sent to its owner, who counts it; the
//! check passes only if the ranks hold `N` entries in all and every id was
//! counted exactly once. `--json`: one line per run with `kernel`, `ranks`,
//! `ok`, `darts_per_s` (ids permuted per second), `time_s`, `throws`
//! (darts thrown, bounces included), `rep`, `buffer`, `max_rss_mib`.

use bytemuck::{Pod, Zeroable};
use clap::Parser;
use fastmsg::{EndpointBuilder, Rank};
use fastmsg_examples::bale;
use fastmsg_examples::report::{Figure, Repetition, Reporter};
use fastmsg_handlers::aggregate::{AggConfig, Aggregator, Channel};
use fastmsg_handlers::rpc::{Rpc, RpcError};
use fastmsg_handlers::{CollConfig, Collectives, Op};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

#[derive(Parser, Debug)]
struct Args {
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    /// log2 of the ids (darts) per rank.
    #[arg(long, default_value_t = 20)]
    log_darts: u32,
    /// Repetitions (one line each).
    #[arg(long, default_value_t = 1)]
    reps: usize,
    /// Aggregation buffer bytes per destination.
    #[arg(long, default_value_t = AggConfig::default().buffer_bytes)]
    buffer: usize,
}

/// A dart: the owner's local slot and the id thrown.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Dart {
    slot: u32,
    id: u32,
}

/// An empty slot.
const EMPTY: u32 = u32::MAX;

/// Where a throw goes: a uniformly random global slot of `m`, as (owner,
/// local slot) with `per_slots` slots per rank.
#[inline(always)]
fn aim(stream: &Cell<u64>, m: u64, per_slots: u64) -> (Rank, u32) {
    let mut s = stream.get();
    let g = bale::next(&mut s) % m;
    stream.set(s);
    let d = g / per_slots;
    (Rank(d as u32), (g - d * per_slots) as u32)
}

fn main() -> Result<(), fastmsg::Error> {
    let args = Args::parse();
    if args.log_darts > 30 {
        return Err(fastmsg::Error::other("--log-darts must be at most 30"));
    }
    let mut b = EndpointBuilder::from_env()?;
    let (me, n) = (b.rank().0, b.size());
    let coll = Collectives::register(&mut b, CollConfig::default());
    let agg = Aggregator::new(&mut b, AggConfig::default().with_buffer_bytes(args.buffer));
    let per = 1u64 << args.log_darts;
    let total = per * u64::from(n);
    if total > u64::from(u32::MAX) {
        return Err(fastmsg::Error::other(
            "ranks · 2^log-darts ids must fit in 32 bits",
        ));
    }
    let (per_slots, m) = (2 * per, 2 * total);
    // Cells: handlers and completions write without a borrow flag.
    let slots: Rc<Vec<Cell<u32>>> = Rc::new((0..per_slots).map(|_| Cell::new(EMPTY)).collect());
    let sl = Rc::clone(&slots);
    let throw: Rpc<Dart, u8> = agg.rpc(&mut b, "permute-dart", move |_ctx, _src, d: Dart| {
        let c = sl.get(d.slot as usize).ok_or("dart slot out of range")?;
        if c.get() != EMPTY {
            return Ok::<u8, &str>(0);
        }
        c.set(d.id);
        Ok(1)
    });
    // The rank's random stream, shared by the main loop and the rethrows.
    let stream = Rc::new(Cell::new(0u64));
    let throws = Rc::new(Cell::new(0u64));
    let failure: Rc<RefCell<Option<RpcError>>> = Rc::new(RefCell::new(None));
    let (again, st, th, fail) = (
        throw.clone(),
        Rc::clone(&stream),
        Rc::clone(&throws),
        Rc::clone(&failure),
    );
    throw.on_complete(move |ctx, _owner, id, landed| {
        let result = landed.and_then(|landed| {
            if landed == 1 {
                return Ok(());
            }
            // Bounced: throw the same id again at a new slot.
            let (d, slot) = aim(&st, m, per_slots);
            th.set(th.get() + 1);
            again.send(
                ctx,
                d,
                Dart {
                    slot,
                    id: id as u32,
                },
                id,
            )
        });
        if let Err(e) = result {
            fail.borrow_mut().get_or_insert(e);
        }
    });
    // The check: every id goes to its owner, who counts it.
    let seen: Rc<Vec<Cell<u32>>> = Rc::new((0..per).map(|_| Cell::new(0)).collect());
    let se = Rc::clone(&seen);
    let check: Channel<u32> = agg.channel(&mut b, "permute-check", move |_ctx, _src, i: u32| {
        let c = se.get(i as usize).ok_or("checked id out of range")?;
        c.set(c.get() + 1);
        Ok(())
    });
    let mut ep = b.start()?;
    let ctx = ep.ctx();
    let mut report = Reporter::new(args.json);
    let mut perm: Vec<u32> = Vec::with_capacity(per_slots as usize);
    for rep in 0..args.reps {
        slots.iter().for_each(|c| c.set(EMPTY));
        seen.iter().for_each(|c| c.set(0));
        stream.set(bale::seed(me, 3));
        throws.set(per);
        perm.clear();
        coll.barrier(&mut ep)?;
        let t0 = Instant::now();
        let first = per * u64::from(me);
        for id in first..first + per {
            let (d, slot) = aim(&stream, m, per_slots);
            throw.send(
                &ctx,
                d,
                Dart {
                    slot,
                    id: id as u32,
                },
                id,
            )?;
        }
        agg.quiesce(&mut ep)?;
        if let Some(e) = failure.borrow_mut().take() {
            return Err(e.into());
        }
        // Compact: this rank's occupied slots, in order, start at the
        // occupied slots of the ranks before it.
        perm.extend(slots.iter().map(Cell::get).filter(|&v| v != EMPTY));
        let start = coll
            .exscan(&mut ep, &[perm.len() as u64], Op::Sum)?
            .map_or(0, |s| s[0]);
        let mut worst = [t0.elapsed().as_secs_f64()];
        coll.allreduce(&mut ep, &mut worst, Op::Max)?;

        // Verify: N entries in all, every id counted once by its owner.
        for &id in &perm {
            let d = u64::from(id) / per;
            check.send(&ctx, Rank(d as u32), (u64::from(id) - d * per) as u32)?;
        }
        agg.quiesce(&mut ep)?;
        let wrong = seen.iter().filter(|c| c.get() != 1).count() as u64;
        let mut loc = [perm.len() as u64, wrong, throws.get()];
        coll.allreduce(&mut ep, &mut loc, Op::Sum)?;
        let mut last = [start + perm.len() as u64];
        coll.allreduce(&mut ep, &mut last, Op::Max)?;
        let line = Repetition {
            kernel: "permute",
            form: None,
            size: format!("darts/rank=2^{}", args.log_darts),
            unit: "darts",
            work: total,
            time_s: worst[0],
            buffer: args.buffer,
            index: rep,
            ok: loc[0] == total && loc[1] == 0 && last[0] == total,
            text: &[
                ("throws", Figure::Count(loc[2])),
                ("entries", Figure::Count(loc[0])),
                ("ids_not_once", Figure::Count(loc[1])),
            ],
            json: &[("throws", Figure::Count(loc[2]))],
        };
        report.report(&coll, &mut ep, &line)?;
    }
    report.finish(ep)
}
