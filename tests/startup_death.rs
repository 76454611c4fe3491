//! A rank that dies during start-up, after it has attached to the host's
//! segment and armed its lifeline, is reported by every rank still
//! starting — by its rank, within about a second — instead of at the
//! start-up time-out as "a rank never came".
//!
//! A four-rank job started by hand: ranks 0, 1 and 2 start, rank 3 never
//! does, so the three wait for it in start-up. Rank 1 prints (at `debug`
//! level) that its lifeline is armed; once it has, it is killed with
//! SIGKILL. Ranks 0 and 2 must then end with a start error naming rank 1.
//! Their time from the kill is printed; a rank still running 5 s after it
//! (the time-out is 20 s) fails the test.

mod common;

use common::procs::{self, Spawner};
use fastmsg::EndpointBuilder;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Exit status of a rank whose start failed (the error printed).
const START_FAILED: i32 = 3;
/// A survivor still running this long after the kill has hung.
const HUNG_AFTER: Duration = Duration::from_secs(5);

/// The rank program: start, print the error and exit `START_FAILED`.
#[test]
fn startup_death_rank() {
    if std::env::var("STARTUP_DEATH").is_err() {
        return;
    }
    let b = EndpointBuilder::from_env().expect("env");
    match b.start() {
        Ok(_) => std::process::exit(0),
        Err(e) => {
            eprintln!("start failed: {e}");
            std::process::exit(START_FAILED);
        }
    }
}

/// Wait until `child`'s stderr says its lifeline is armed (false if it
/// ends or `limit` passes first); the rest of its output is drained.
fn wait_armed(child: &mut Child, limit: Duration) -> bool {
    let err = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines() {
            let Ok(line) = line else { return };
            if line.contains("lifeline armed") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(limit).is_ok()
}

#[test]
fn a_rank_killed_after_attaching_is_named_by_every_starting_rank() {
    let dir = procs::private_shm_dir("startdeath");
    let sp = Spawner {
        rank_test: "startup_death_rank",
        size: 4,
        job: format!("startdeath-{}", std::process::id()),
        env: vec![
            ("STARTUP_DEATH".into(), "1".into()),
            ("FASTMSG_SHM_DIR".into(), dir.to_string_lossy().into_owned()),
        ],
    };
    let survivor = |r: u32| {
        sp.command(r, &[], &[])
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn rank")
    };
    let mut ranks = vec![survivor(0), survivor(2)];
    let mut victim = sp
        .command(
            1,
            &[],
            &[("FASTMSG_LOG", "fastmsg::transport::shm=debug".into())],
        )
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rank 1");
    let armed = wait_armed(&mut victim, Duration::from_secs(20));
    let _ = victim.kill(); // SIGKILL
    let killed = Instant::now();
    let _ = victim.wait();
    let mut outcome = Vec::new();
    for child in &mut ranks {
        let status = procs::wait_until(child, killed + HUNG_AFTER);
        let after = killed.elapsed();
        let mut text = String::new();
        let _ = child.stderr.take().unwrap().read_to_string(&mut text);
        outcome.push((status, after, text));
    }
    let left: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(armed, "rank 1 never said its lifeline was armed");
    for ((status, after, text), r) in outcome.iter().zip([0, 2]) {
        println!("rank {r} ended {after:?} after rank 1 was killed: {status:?}; {text}");
        let status = status.unwrap_or_else(|| {
            panic!("rank {r} still starting {HUNG_AFTER:?} after rank 1 was killed (hung; killed)")
        });
        assert_eq!(status.code(), Some(START_FAILED), "rank {r}: {text}");
        assert!(
            text.contains("rank 1 ") && text.contains("killed or crashed during start-up"),
            "rank {r} does not name rank 1's death: {text}"
        );
    }
    assert!(left.is_empty(), "left in the segment directory: {left:?}");
}
