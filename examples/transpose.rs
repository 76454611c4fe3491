//! Bale sparse-matrix transpose, written the natural way: one aggregated
//! message per nonzero, first to count, then to place.
//!
//! `fmrun -n N target/release/examples/transpose [--json] [--reps 3]`
//!
//! A random square sparse matrix of `ranks · 2^log-rows` rows with
//! `--nonzeros` distinct columns in every row (drawn from each rank's
//! splitmix64 stream, salt 4, as in the MPI version of this kernel that
//! `fmbench` compares with), its rows in blocks over the ranks, is
//! transposed into the same distribution: row `c` of the transpose
//! (column `c` of the matrix) lives on the rank that owns row `c`. Every
//! nonzero `(r, c)` first sends `c`'s local index to its owner, whose
//! handler counts it; after `Aggregator::quiesce` each rank turns its
//! counts into offsets (a prefix sum per local column, and an `exscan` of
//! the ranks' nonzeros for where its block starts in the whole
//! transpose); then every nonzero sends `(c, r)` to the owner, whose
//! handler places `r` at the next free position of column `c`.
//!
//! Verified against a sequential recomputation: each rank draws every
//! rank's rows again, builds its block of the transpose and compares it
//! with what arrived, column by column (entries sorted: their arrival
//! order varies). `--json`: one line per run with `kernel`, `ranks`, `ok`,
//! `nonzeros_per_s`, `time_s`, `hash` (the same as the MPI program's),
//! `rep`, `buffer`, `max_rss_mib`.

use bytemuck::{Pod, Zeroable};
use clap::Parser;
use fastmsg::{EndpointBuilder, Rank};
use fastmsg_examples::bale;
use fastmsg_examples::report::{Figure, Repetition, Reporter};
use fastmsg_handlers::aggregate::{AggConfig, Aggregator, Channel};
use fastmsg_handlers::{CollConfig, Collectives, Op};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

#[derive(Parser, Debug)]
struct Args {
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    /// log2 of the rows per rank.
    #[arg(long, default_value_t = 16)]
    log_rows: u32,
    /// Nonzeros per row (distinct columns).
    #[arg(long, default_value_t = 16)]
    nonzeros: u32,
    /// Repetitions (one line each).
    #[arg(long, default_value_t = 1)]
    reps: usize,
    /// Aggregation buffer bytes per destination.
    #[arg(long, default_value_t = AggConfig::default().buffer_bytes)]
    buffer: usize,
}

/// A nonzero on its way to its column's owner.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Entry {
    /// The column's local index on the owner.
    col: u32,
    /// The global row.
    row: u32,
}

/// The matrix rows of `rank` (`per` rows of `nz` distinct columns of
/// `cols` each), row after row: what both this program and the MPI one
/// draw.
fn rows_of(rank: u32, per: u64, nz: u32, cols: u64) -> Vec<u32> {
    let mut s = bale::seed(rank, 4);
    let mut out = Vec::with_capacity((per * u64::from(nz)) as usize);
    for _ in 0..per {
        let row = out.len();
        while out.len() < row + nz as usize {
            let c = (bale::next(&mut s) % cols) as u32;
            if !out[row..].contains(&c) {
                out.push(c);
            }
        }
    }
    out
}

fn main() -> Result<(), fastmsg::Error> {
    let args = Args::parse();
    if args.log_rows > 28 || args.nonzeros == 0 {
        return Err(fastmsg::Error::other(
            "--log-rows must be at most 28 and --nonzeros at least 1",
        ));
    }
    let mut b = EndpointBuilder::from_env()?;
    let (me, n) = (b.rank().0, b.size());
    let coll = Collectives::register(&mut b, CollConfig::default());
    let agg = Aggregator::new(&mut b, AggConfig::default().with_buffer_bytes(args.buffer));
    let per = 1u64 << args.log_rows;
    let nr = per * u64::from(n);
    let nz = args.nonzeros;
    if nr > u64::from(u32::MAX) || u64::from(nz) > nr {
        return Err(fastmsg::Error::other(
            "the rows must fit in 32 bits and --nonzeros must not pass the columns",
        ));
    }
    let first = per * u64::from(me);
    // Per local column: nonzeros counted, then the next free position.
    let counts: Rc<Vec<Cell<u32>>> = Rc::new((0..per).map(|_| Cell::new(0)).collect());
    let next: Rc<Vec<Cell<u32>>> = Rc::new((0..per).map(|_| Cell::new(0)).collect());
    let ends: Rc<Vec<Cell<u32>>> = Rc::new((0..per).map(|_| Cell::new(0)).collect());
    // The rows of the local columns, column after column (resized once
    // the counts are known, between the phases).
    let placed: Rc<RefCell<Vec<Cell<u32>>>> = Rc::new(RefCell::new(Vec::new()));
    let cn = Rc::clone(&counts);
    let count: Channel<u32> = agg.channel(&mut b, "transpose-count", move |_ctx, _src, c| {
        let k = cn.get(c as usize).ok_or("column out of range")?;
        k.set(k.get() + 1);
        Ok(())
    });
    let (nx, en, pl) = (Rc::clone(&next), Rc::clone(&ends), Rc::clone(&placed));
    let place: Channel<Entry> =
        agg.channel(&mut b, "transpose-place", move |_ctx, _src, e: Entry| {
            let at = nx.get(e.col as usize).ok_or("column out of range")?;
            let end = en[e.col as usize].get();
            if at.get() >= end {
                return Err("more nonzeros in a column than were counted".into());
            }
            // A shared borrow: the main loop resizes only between phases.
            pl.borrow()
                .get(at.get() as usize)
                .ok_or("a nonzero came before its column's offsets")?
                .set(e.row);
            at.set(at.get() + 1);
            Ok(())
        });
    let mine = rows_of(me, per, nz, nr);
    let mut ep = b.start()?;
    let ctx = ep.ctx();
    let mut report = Reporter::new(args.json);
    for rep in 0..args.reps {
        counts.iter().for_each(|c| c.set(0));
        coll.barrier(&mut ep)?;
        let t0 = Instant::now();
        // Count the nonzeros of every column at its owner.
        for &c in &mine {
            let d = u64::from(c) / per;
            count.send(&ctx, Rank(d as u32), (u64::from(c) - d * per) as u32)?;
        }
        agg.quiesce(&mut ep)?;
        // Offsets: a prefix sum over the local columns, and where this
        // rank's block starts in the whole transpose.
        let mut total = 0u32;
        for (k, c) in counts.iter().enumerate() {
            next[k].set(total);
            total += c.get();
            ends[k].set(total);
        }
        let base = coll
            .exscan(&mut ep, &[u64::from(total)], Op::Sum)?
            .map_or(0, |s| s[0]);
        {
            let mut p = placed.borrow_mut();
            p.clear();
            p.resize_with(total as usize, || Cell::new(u32::MAX));
        }
        // Every rank's offsets are in place before any nonzero arrives
        // (the exscan alone does not wait for the ranks after this one).
        coll.barrier(&mut ep)?;
        // Place every nonzero at its column's owner.
        for (i, &c) in mine.iter().enumerate() {
            let d = u64::from(c) / per;
            let e = Entry {
                col: (u64::from(c) - d * per) as u32,
                row: (first + i as u64 / u64::from(nz)) as u32,
            };
            place.send(&ctx, Rank(d as u32), e)?;
        }
        agg.quiesce(&mut ep)?;
        let mut worst = [t0.elapsed().as_secs_f64()];
        coll.allreduce(&mut ep, &mut worst, Op::Max)?;

        // Verify: this rank's columns, recomputed from every rank's rows.
        let mut want: Vec<Vec<u32>> = vec![Vec::new(); per as usize];
        for r in 0..n {
            let rows = if r == me {
                mine.clone()
            } else {
                rows_of(r, per, nz, nr)
            };
            for (i, &c) in rows.iter().enumerate() {
                if (first..first + per).contains(&u64::from(c)) {
                    let row = per * u64::from(r) + i as u64 / u64::from(nz);
                    want[(u64::from(c) - first) as usize].push(row as u32);
                }
            }
        }
        let got = placed.borrow();
        let (mut bad, mut hash, mut start) = (0u64, 0u64, 0usize);
        for (k, w) in want.iter().enumerate() {
            let end = ends[k].get() as usize;
            let mut g: Vec<u32> = got[start..end].iter().map(Cell::get).collect();
            g.sort_unstable();
            bad += u64::from(g != *w);
            for &row in &g {
                let col = first + k as u64;
                hash = hash.wrapping_add(bale::value(u64::from(row) * nr + col));
            }
            start = end;
        }
        drop(got);
        let mut loc = [u64::from(total), bad, hash];
        coll.allreduce(&mut ep, &mut loc, Op::Sum)?;
        let mut last = [base + u64::from(total)];
        coll.allreduce(&mut ep, &mut last, Op::Max)?;
        let nnz = nr * u64::from(nz);
        let line = Repetition {
            kernel: "transpose",
            form: None,
            size: format!("rows/rank=2^{} nonzeros/row={nz}", args.log_rows),
            unit: "nonzeros",
            work: nnz,
            time_s: worst[0],
            buffer: args.buffer,
            index: rep,
            ok: loc[0] == nnz && loc[1] == 0 && last[0] == nnz,
            text: &[
                ("nonzeros", Figure::Count(loc[0])),
                ("bad_columns", Figure::Count(loc[1])),
                ("hash", Figure::Hash(loc[2])),
            ],
            json: &[("hash", Figure::Hash(loc[2]))],
        };
        report.report(&coll, &mut ep, &line)?;
    }
    report.finish(ep)
}
