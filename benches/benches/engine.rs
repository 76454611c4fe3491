//! Criterion micro-benchmarks of the engine's building blocks, each in
//! isolation on one core (no cross-core traffic): `cargo bench -p
//! fastmsg-benches` (add `-- extract` etc. to pick a group).
//!
//! - `extract/empty/<transports>`: an empty `Endpoint::extract` on a
//!   1-rank endpoint (threads bootstrap), per transport set-up in
//!   `fastmsg_benches::suite::EXTRACT` (the network transports join there).
//! - `queue/free_list_claim_release`: the shared queue's frame claim
//!   (fetch-and-increment + test-and-set) and release;
//!   `queue/claim_publish_pop_release`: the whole shared-mode fragment
//!   cycle (frame claim, position claim, publish, pop, recycle, release).
//! - `queue/publish_pop/{dedicated,shared}`: one receive-queue slot
//!   published and popped (the shared mode adds the claim and recycle).
//! - `frame/encode` and `frame/decode_check`: filling a slot descriptor
//!   with a header and inline payload; reading one and validating its
//!   header ([`FragHeader::check`]).
//! - `flow/credit_return`: a receiver releasing a batch of 16 fragments
//!   and publishing the count, the sender reading it back and taking
//!   credit again.
//! - `copy/<strategy>/<bytes>`: the frame-copy strategies of `src/copy.rs`
//!   on hot caches (the pipeline probe, `fmbench tune-copy`, measures them
//!   across cores), and `copy/copy_to_frame/<bytes>`, the hot path with
//!   the stored plan (its overhead over `copy/plain` at small sizes is the
//!   plan check); `copy_distance/<strategy>/<d>`: 8 KiB copies whose
//!   destination lies `d` bytes (mod 4096) past the source's page offset.

// The copy strategies are unsafe functions (raw frame pointers).
#![allow(unsafe_code)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fastmsg::bootstrap::{fresh_job_id, JobInfo, Launcher};
use fastmsg::internal::flow::{CreditLine, CreditReturn, CreditWindow};
use fastmsg::internal::frame::{FragFlags, FragHeader};
use fastmsg::internal::queue::{FrameStore, FreeList, RecvQueue, Slot, SlotBody, NO_FRAME};
use fastmsg::{Config, EndpointBuilder};
use fastmsg_benches::copy::{self, kernel::detect_kernel, Strategy};
use std::hint::black_box;
use std::sync::atomic::{AtomicU32, AtomicU64};

fn extract(c: &mut Criterion) {
    for setup in fastmsg_benches::suite::EXTRACT {
        // A 1-rank job built on this thread, exactly as `threads::run(1, …)`
        // builds its rank (criterion cannot move to another thread).
        let job = fresh_job_id();
        let mut cfg = Config::new(JobInfo::single_host(0, 1, &job, Launcher::Threads));
        (setup.configure)(&mut cfg);
        let mut ep = EndpointBuilder::new(cfg).start().expect("1-rank endpoint");
        c.bench_function(&format!("extract/empty/{}", setup.name), |b| {
            // One field, not the whole result: see `fastmsg_run::empty_extract`.
            b.iter(|| {
                ep.extract(usize::MAX)
                    .map(|x| x.fragments)
                    .unwrap_or(usize::MAX)
            })
        });
        ep.close().expect("close");
    }
}

/// Frames in ordinary memory, as the loom models use.
struct VecFrames {
    in_use: Vec<AtomicU32>,
    cap: usize,
}

impl FrameStore for VecFrames {
    fn count(&self) -> u32 {
        self.in_use.len() as u32
    }
    fn capacity(&self) -> usize {
        self.cap
    }
    fn in_use(&self, frame: u32) -> &AtomicU32 {
        &self.in_use[frame as usize]
    }
    fn write(&self, _frame: u32, _offset: usize, _src: &[u8]) {
        unreachable!("not used by the free-list benchmark")
    }
    fn read(&self, _frame: u32, _offset: usize, _dst: &mut [u8]) {
        unreachable!("not used by the free-list benchmark")
    }
}

fn body(len: u32) -> SlotBody {
    SlotBody {
        header: FragHeader {
            src: 1,
            handler: 3,
            len,
            flags: (FragFlags::FIRST | FragFlags::LAST).0,
            total: u64::from(len),
        },
        frame: NO_FRAME,
        inline: [7; 28],
    }
}

fn queue(c: &mut Criterion) {
    let frames = VecFrames {
        in_use: (0..64).map(|_| AtomicU32::new(0)).collect(),
        cap: 8192,
    };
    let head = AtomicU64::new(0);
    let fl = FreeList::new(&head, &frames);
    c.bench_function("queue/free_list_claim_release", |b| {
        b.iter(|| {
            let f = fl.claim(|| false).expect("sound frames");
            fl.release(black_box(f));
        })
    });
    // The whole shared-mode fragment cycle of seed 004 §5: claim a frame
    // (fetch-and-increment + test-and-set), claim a queue position,
    // publish the descriptor, pop it, recycle the slot, release the frame.
    {
        let slots: Vec<Slot> = (0..64).map(Slot::new).collect();
        let tail = AtomicU64::new(0);
        let q = RecvQueue::new(&slots, &tail, true);
        let mut b0 = body(8);
        c.bench_function("queue/claim_publish_pop_release", |b| {
            b.iter(|| {
                b0.frame = fl.claim(|| false).expect("sound frames");
                let p = q.claim();
                q.publish(p, black_box(&b0), || false).expect("sound queue");
                let got = q.try_pop(p).expect("not corrupt").expect("published");
                fl.release(got.frame);
                black_box(got.header.len)
            })
        });
    }
    for shared in [false, true] {
        let slots: Vec<Slot> = (0..64).map(Slot::new).collect();
        let tail = AtomicU64::new(0);
        let q = RecvQueue::new(&slots, &tail, shared);
        let mut pos = 0u64;
        let name = if shared { "shared" } else { "dedicated" };
        let b0 = body(8);
        c.bench_function(&format!("queue/publish_pop/{name}"), |b| {
            b.iter(|| {
                let p = if shared { q.claim() } else { pos };
                if shared {
                    q.publish(p, black_box(&b0), || false).expect("sound queue");
                } else {
                    q.publish_dedicated(p, black_box(&b0));
                }
                let got = q.try_pop(p).expect("not corrupt").expect("published");
                pos += 1;
                black_box(got)
            })
        });
    }
    // As the transport publishes: the body written in place, field by
    // field (`publish_dedicated_with`), not copied from a built one. In
    // one thread this costs more than the copy above: the pop's wide loads
    // of the body follow the narrow stores at once and cannot be forwarded
    // from the store buffer. A consumer on another core reads the line
    // after the stores have drained and pays nothing of the kind (the
    // two-process figures: BENCHMARKS.md, engine overheads).
    {
        let slots: Vec<Slot> = (0..64).map(Slot::new).collect();
        let tail = AtomicU64::new(0);
        let q = RecvQueue::new(&slots, &tail, false);
        let mut pos = 0u64;
        let h = body(8).header;
        c.bench_function("queue/publish_in_place_pop/dedicated", |b| {
            b.iter(|| {
                let h = black_box(h);
                q.publish_dedicated_with(pos, |b| {
                    b.header.src = h.src;
                    b.header.handler = h.handler;
                    b.header.len = h.len;
                    b.header.flags = h.flags;
                    b.header.total = h.total;
                    b.frame = NO_FRAME;
                });
                let got = q.try_pop(pos).expect("not corrupt").expect("published");
                pos += 1;
                black_box(got.header.len)
            })
        });
    }
}

fn frame(c: &mut Criterion) {
    let payload = [9u8; 20];
    c.bench_function("frame/encode", |b| {
        b.iter(|| {
            let mut s = body(0);
            let p = black_box(&payload);
            s.header.len = p.len() as u32;
            s.header.total = p.len() as u64;
            s.inline[..p.len()].copy_from_slice(p);
            black_box(s)
        })
    });
    let good = body(20);
    c.bench_function("frame/decode_check", |b| {
        b.iter(|| {
            let s = black_box(&good);
            let h = s.header;
            black_box(h.check(black_box(4), black_box(8192)).is_ok() && s.frame == NO_FRAME)
        })
    });
}

fn flow(c: &mut Criterion) {
    let line = CreditLine::new();
    let mut ret = CreditReturn::default();
    let mut win = CreditWindow::new(32);
    c.bench_function("flow/credit_return", |b| {
        b.iter(|| {
            for _ in 0..16 {
                assert!(win.try_take());
            }
            for _ in 0..16 {
                ret.release();
            }
            if let Some(n) = ret.take_publish() {
                line.publish(n);
            }
            black_box(win.update(line.read()))
        })
    });
}

fn copy_strategies(c: &mut Criterion) {
    let kernel = detect_kernel();
    let src = vec![5u8; 1 << 16];
    let mut dst = vec![0u8; 1 << 16];
    let mut g = c.benchmark_group("copy");
    for n in [64usize, 1024, 8192, 65536] {
        g.throughput(Throughput::Bytes(n as u64));
        // The hot path itself: the plan check (one load, one compare)
        // plus whatever the stored plan picks for this size.
        let _ = copy::plan();
        g.bench_with_input(BenchmarkId::new("copy_to_frame", n), &n, |b, &n| {
            b.iter(|| {
                // SAFETY: n <= 65536, both buffers hold 65536 bytes and
                // are distinct.
                unsafe { copy::copy_to_frame(dst.as_mut_ptr(), src.as_ptr(), n) };
                black_box(&dst);
            })
        });
        for s in [Strategy::Plain, Strategy::Vector, Strategy::Stream] {
            g.bench_with_input(BenchmarkId::new(s.name(), n), &n, |b, &n| {
                b.iter(|| {
                    // SAFETY: n <= 65536, both buffers hold 65536 bytes and
                    // are distinct; `kernel` was detected on this CPU.
                    unsafe { copy::copy_with(s, dst.as_mut_ptr(), src.as_ptr(), n, kernel) };
                    black_box(&dst);
                })
            });
        }
    }
    g.finish();
    // 8 KiB copies at several distances (mod 4096) between source and
    // destination: the C library's `rep movsb` path is fast at some and
    // ~50× slower at others on this machine; a frame's distance from the
    // user's buffer is whatever it happens to be.
    let buf = vec![3u8; 1 << 18];
    let mut g = c.benchmark_group("copy_distance");
    g.throughput(Throughput::Bytes(8192));
    for dist in [0usize, 16, 64, 2048] {
        for s in [Strategy::Plain, Strategy::Vector] {
            let mut dst = buf.clone();
            let src = &buf[..];
            // Same page offset as `src`, plus `dist`.
            let at = (4096 - (dst.as_ptr() as usize) % 4096 + (src.as_ptr() as usize) % 4096)
                % 4096
                + dist;
            g.bench_with_input(BenchmarkId::new(s.name(), dist), &dist, |b, _| {
                b.iter(|| {
                    // SAFETY: at < 4096 + 2048 and at + 8192 < 2^18 = dst's
                    // length; src holds 2^18 bytes; distinct buffers.
                    unsafe {
                        copy::copy_with(s, dst.as_mut_ptr().add(at), src.as_ptr(), 8192, kernel)
                    };
                    black_box(&dst);
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, extract, queue, frame, flow, copy_strategies);
criterion_main!(benches);
