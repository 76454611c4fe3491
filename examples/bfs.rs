//! Level-synchronous breadth-first search, written the natural way: one
//! aggregated active message per edge of the frontier, one `quiesce` per
//! level.
//!
//! `fmrun -n N target/release/examples/bfs [--json] [--scale 16] [--edge-factor 16] [--reps 3]`
//!
//! The graph is R-MAT (Graph500's parameters a = 0.57, b = c = 0.19) with
//! `2^scale` vertices and `edge-factor × 2^scale` undirected edges, drawn
//! from one splitmix64 stream (`common.h`'s, salt 3) that every rank
//! replays; vertices are spread in blocks over the ranks and each rank
//! keeps the adjacency of its own. From the root (the first edge's source)
//! each level sends, for every edge of every frontier vertex, one
//! `(vertex, parent)` item to the vertex's owner, whose handler sets its
//! level and adds it to the next frontier; `Aggregator::quiesce` ends the
//! level, an allreduce of the next frontier's size decides whether to go
//! on. Every level is checked against a sequential BFS of the whole graph.
//! `teps`: undirected edges of the root's component per second.

use bytemuck::{Pod, Zeroable};
use clap::Parser;
use fastmsg::{EndpointBuilder, Rank};
use fastmsg_examples::bale;
use fastmsg_handlers::aggregate::{AggConfig, Aggregator};
use fastmsg_handlers::{CollConfig, Collectives, Op};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Instant;

#[derive(Parser, Debug)]
struct Args {
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    /// log2 of the vertices.
    #[arg(long, default_value_t = 16)]
    scale: u32,
    /// Edges per vertex.
    #[arg(long, default_value_t = 16)]
    edge_factor: u64,
    /// Repetitions (one line each).
    #[arg(long, default_value_t = 1)]
    reps: usize,
}

/// A visit: the owner's local index of the vertex, and its parent.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Visit {
    local: u32,
    parent: u32,
}

const UNSEEN: u32 = u32::MAX;

/// The R-MAT edge list: `ef × 2^scale` pairs.
fn rmat(scale: u32, ef: u64) -> Vec<(u32, u32)> {
    let mut s = bale::seed(0, 3);
    let unit = |x: u64| (x >> 11) as f64 / (1u64 << 53) as f64;
    (0..ef << scale)
        .map(|_| {
            let (mut u, mut v) = (0u32, 0u32);
            for bit in 0..scale {
                let r = unit(bale::next(&mut s));
                let (du, dv) = if r < 0.57 {
                    (0, 0)
                } else if r < 0.76 {
                    (0, 1)
                } else if r < 0.95 {
                    (1, 0)
                } else {
                    (1, 1)
                };
                u |= du << bit;
                v |= dv << bit;
            }
            (u, v)
        })
        .collect()
}

/// Compressed adjacency of the vertices in `[lo, hi)`.
fn adjacency(edges: &[(u32, u32)], lo: u64, hi: u64) -> (Vec<usize>, Vec<u32>) {
    let n = (hi - lo) as usize;
    let mut deg = vec![0usize; n + 1];
    let mine = |x: u32| (lo..hi).contains(&u64::from(x));
    for &(u, v) in edges {
        if mine(u) {
            deg[(u64::from(u) - lo) as usize + 1] += 1;
        }
        if mine(v) {
            deg[(u64::from(v) - lo) as usize + 1] += 1;
        }
    }
    for i in 0..n {
        deg[i + 1] += deg[i];
    }
    let mut fill = deg.clone();
    let mut adj = vec![0u32; deg[n]];
    for &(u, v) in edges {
        for (a, b) in [(u, v), (v, u)] {
            if mine(a) {
                let i = (u64::from(a) - lo) as usize;
                adj[fill[i]] = b;
                fill[i] += 1;
            }
        }
    }
    (deg, adj)
}

/// Levels of every vertex from `root` (sequential BFS of the whole graph),
/// and the undirected edges of the root's component.
fn reference(edges: &[(u32, u32)], v: u64, root: u32) -> (Vec<u32>, u64) {
    let (off, adj) = adjacency(edges, 0, v);
    let mut level = vec![UNSEEN; v as usize];
    level[root as usize] = 0;
    let mut q = VecDeque::from([root]);
    while let Some(u) = q.pop_front() {
        for &w in &adj[off[u as usize]..off[u as usize + 1]] {
            if level[w as usize] == UNSEEN {
                level[w as usize] = level[u as usize] + 1;
                q.push_back(w);
            }
        }
    }
    let m = edges
        .iter()
        .filter(|&&(a, _)| level[a as usize] != UNSEEN)
        .count() as u64;
    (level, m)
}

fn main() -> Result<(), fastmsg::Error> {
    let args = Args::parse();
    let mut b = EndpointBuilder::from_env()?;
    let (me, n) = (b.rank().0, b.size());
    let coll = Collectives::register(&mut b, CollConfig::default());
    let agg = Aggregator::new(&mut b, AggConfig::default());
    let v = 1u64 << args.scale;
    let edges = rmat(args.scale, args.edge_factor);
    let root = edges[0].0;
    let (per, lo, hi) = bale::block(v, n, me);
    let (off, adj) = adjacency(&edges, lo, hi);
    let level = Rc::new(RefCell::new(vec![UNSEEN; (hi - lo) as usize]));
    let next = Rc::new(RefCell::new(Vec::<u32>::new()));
    let depth = Rc::new(Cell::new(0u32));
    let (lv, nx, dp) = (Rc::clone(&level), Rc::clone(&next), Rc::clone(&depth));
    let visit = agg.channel::<Visit, _>(&mut b, "bfs-visit", move |_ctx, _src, x| {
        let mut lv = lv.borrow_mut();
        let slot = lv
            .get_mut(x.local as usize)
            .ok_or("visit of a vertex out of range")?;
        if *slot == UNSEEN {
            *slot = dp.get() + 1;
            nx.borrow_mut().push(x.local);
        }
        Ok(())
    });
    let mut ep = b.start()?;
    let ctx = ep.ctx();
    let (want, m) = reference(&edges, v, root);
    let mut failed = false;
    for rep in 0..args.reps {
        level.borrow_mut().fill(UNSEEN);
        next.borrow_mut().clear();
        depth.set(0);
        let mut frontier: Vec<u32> = Vec::new();
        if (lo..hi).contains(&u64::from(root)) {
            let r = (u64::from(root) - lo) as u32;
            level.borrow_mut()[r as usize] = 0;
            frontier.push(r);
        }
        coll.barrier(&mut ep)?;
        let t0 = Instant::now();
        let mut levels = 0u32;
        loop {
            for &u in &frontier {
                let parent = (lo + u64::from(u)) as u32;
                for &w in &adj[off[u as usize]..off[u as usize + 1]] {
                    let d = (u64::from(w) / per) as u32;
                    let local = (u64::from(w) - per * u64::from(d)) as u32;
                    visit.send(&ctx, Rank(d), Visit { local, parent })?;
                }
            }
            agg.quiesce(&mut ep)?;
            frontier = std::mem::take(&mut *next.borrow_mut());
            let mut size = [frontier.len() as u64];
            coll.allreduce(&mut ep, &mut size, Op::Sum)?;
            levels += 1;
            if size[0] == 0 {
                break;
            }
            depth.set(depth.get() + 1);
        }
        let mut worst = [t0.elapsed().as_secs_f64()];
        coll.allreduce(&mut ep, &mut worst, Op::Max)?;
        let bad = level
            .borrow()
            .iter()
            .enumerate()
            .filter(|&(i, &l)| l != want[lo as usize + i])
            .count();
        let mut gbad = [bad as u64];
        coll.allreduce(&mut ep, &mut gbad, Op::Sum)?;
        let ok = gbad[0] == 0;
        failed |= !ok;
        let teps = m as f64 / worst[0];
        if me == 0 {
            if args.json {
                println!(
                    "{{\"kernel\":\"bfs\",\"ranks\":{n},\"ok\":{ok},\"teps\":{teps:.4e},\"time_s\":{:.4},\"levels\":{levels},\"edges\":{m},\"rep\":{rep}}}",
                    worst[0]
                );
            } else {
                println!(
                    "bfs-fastmsg ranks={n} scale={} edge_factor={} rep={rep} time_s={:.4} levels={levels} edges={m} teps={teps:.4e} bad_levels={} {}",
                    args.scale, args.edge_factor, worst[0], gbad[0],
                    if ok { "OK" } else { "FAILED" }
                );
            }
        }
    }
    ep.close()?;
    if failed {
        std::process::exit(1);
    }
    Ok(())
}
