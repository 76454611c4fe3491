//! Answers keep their order under credit pressure across processes: 8
//! ranks (more than cores) make hundreds of thousands of calls each to
//! random owners, then quiesce. A rank that reaches its quiesce early
//! flushes its answer buffers from the main loop, waiting for credit,
//! while the handlers that wait runs keep answering others' calls into
//! the next buffers to the same callers: those must not overtake it
//! (answers are matched to calls by their order). Every completion is
//! checked: token in order per owner, the owner's answer. Processes
//! started by hand, killed if they outlive a generous limit.

mod common;

use fastmsg::{EndpointBuilder, Rank};
use fastmsg_handlers::aggregate::{AggConfig, Aggregator};
use std::cell::Cell;
use std::time::Duration;

const RANKS: u32 = 8;
const CALLS: u64 = 1 << 19;

/// The rank program (runs only as a child of the test below).
#[test]
fn rpc_order_rank() {
    if std::env::var_os("RPC_ORDER").is_none() {
        return;
    }
    let mut b = EndpointBuilder::from_env().expect("env");
    let agg = Aggregator::new(&mut b, AggConfig::default());
    let (rpc, (next, bad)) = common::ordered_rpc(&agg, &mut b);
    let me = b.rank().0;
    let n = b.size();
    let mut ep = b.start().expect("start");
    let ctx = ep.ctx();
    let mut sent = vec![0u64; n as usize];
    let mut s = 0x2545_f491_4f6c_dd1d_u64 ^ u64::from(me);
    for _ in 0..CALLS {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let d = (s % u64::from(n)) as usize;
        rpc.send(&ctx, Rank(d as u32), sent[d], sent[d])
            .expect("send");
        sent[d] += 1;
    }
    agg.quiesce(&mut ep).expect("quiesce");
    let got: Vec<u64> = next.iter().map(Cell::get).collect();
    assert_eq!(bad.get(), 0, "rank {me}: answers out of order or wrong");
    assert_eq!(got, sent, "rank {me}: calls not completed by quiesce");
    ep.close().expect("close");
}

#[test]
fn answers_keep_their_order_under_credit_pressure() {
    let env = [("RPC_ORDER", "1"), ("FASTMSG_TIMEOUT", "60")];
    let mut ranks = common::spawn_ranks("rpc_order_rank", "rpcorder", RANKS, &env);
    let status = common::wait_bounded(&mut ranks, Duration::from_secs(120));
    for (k, s) in status.into_iter().enumerate() {
        let s = s.unwrap_or_else(|| panic!("rank {k} hung"));
        assert!(s.success(), "rank {k} failed: {s}");
    }
}
