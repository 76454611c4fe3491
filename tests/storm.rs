//! All-to-all storm: every rank sends thousands of messages of random sizes
//! (0 … 256 KiB, log-uniform) split into random pieces to random peers,
//! alternately to an async (FM 2.x streamed) handler and a plain-function
//! handler. Every byte is checked and per-pair order is verified through
//! the sequence number each receiver expects next from each sender.
//! Run as threads (4 and 8 ranks on this 2-core machine, M = 1 and M = N)
//! and as processes through `fmrun`.

mod common;

use common::storm::storm_rank;
use fastmsg::threads;
use fastmsg::EndpointBuilder;

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
