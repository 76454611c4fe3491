//! Ranks that call one collective with different arguments — a shorter
//! buffer, another operator or element type, another collective — get a
//! typed error, on every rank, with every algorithm (message and one-sided
//! alike): never `Ok` with different values on different ranks, never one
//! rank's error while the others hang. For rooted collectives a rank may
//! also finish with the right result (the root's data; its own buffer),
//! never with a wrong one — and then its next collective call fails.
//!
//! Each case runs in a child process (this binary, re-executed on the
//! `mismatch_case` test) so that a hang is a failure after a bounded time,
//! not a stuck test run.

mod common;

use fastmsg::threads;
use fastmsg::Rank;
use fastmsg_handlers::{AllreduceAlgo, BarrierAlgo, CollConfig, CollError, Collectives, Op};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What one rank's call gave (the texts are read through `Debug`, in
/// failure messages).
#[derive(Debug)]
#[allow(dead_code)]
enum Outcome {
    /// A typed mismatch error (or the abort of a member that found one).
    Mismatch(String),
    /// Ok with a result the test judges right.
    Right,
    /// Ok with a wrong result, or an error of another kind.
    Wrong(String),
}

fn judge(r: Result<bool, CollError>) -> Outcome {
    match r {
        Ok(true) => Outcome::Right,
        Ok(false) => Outcome::Wrong("Ok with a wrong result".into()),
        Err(
            e @ (CollError::LengthMismatch { .. }
            | CollError::ArgsMismatch { .. }
            | CollError::Mismatch { .. }
            | CollError::Aborted { .. }),
        ) => Outcome::Mismatch(e.to_string()),
        Err(e) => Outcome::Wrong(format!("{e:?}")),
    }
}

fn allreduce_algo(s: &str) -> AllreduceAlgo {
    s.parse().expect("allreduce algorithm")
}

fn barrier_algo(s: &str) -> BarrierAlgo {
    s.parse().expect("barrier algorithm")
}

/// One rank's part of case `case` (the last rank is the odd one out).
fn call(coll: &Collectives, ep: &mut fastmsg::Endpoint, case: &str) -> Result<bool, CollError> {
    let me = ep.rank().0;
    let odd = me + 1 == ep.size();
    let (what, algo) = case.split_once(':').unwrap_or((case, ""));
    match what {
        // A shorter buffer on the odd rank.
        "len" => {
            let mut x = vec![1.5f64; if odd { 1 } else { 2 }];
            coll.allreduce_with(ep, &mut x, Op::Sum, allreduce_algo(algo))?;
            Ok(false)
        }
        // MAX on the odd rank, SUM elsewhere.
        "op" => {
            let mut x = [2.0f64, 3.0];
            let op = if odd { Op::Max } else { Op::Sum };
            coll.allreduce_with(ep, &mut x, op, allreduce_algo(algo))?;
            Ok(false)
        }
        // u64 on the odd rank, f64 elsewhere (the same byte length).
        "type" => {
            if odd {
                let mut x = [2u64, 3];
                coll.allreduce_with(ep, &mut x, Op::Sum, allreduce_algo(algo))?;
            } else {
                let mut x = [2.0f64, 3.0];
                coll.allreduce_with(ep, &mut x, Op::Sum, allreduce_algo(algo))?;
            }
            Ok(false)
        }
        // A barrier (algorithm after '/') on the odd rank, an allreduce
        // elsewhere.
        "kind" => {
            let (ar, ba) = algo.split_once('/').expect("allreduce/barrier");
            if odd {
                coll.barrier_with(ep, barrier_algo(ba))?;
            } else {
                let mut x = [1.0f64];
                coll.allreduce_with(ep, &mut x, Op::Sum, allreduce_algo(ar))?;
            }
            Ok(false)
        }
        // Two barrier algorithms.
        "barrier" => {
            let (a, b) = algo.split_once('/').expect("a/b");
            coll.barrier_with(ep, barrier_algo(if odd { b } else { a }))?;
            Ok(false)
        }
        "allgather" => {
            let mine = vec![me; if odd { 1 } else { 2 }];
            coll.allgather(ep, &mine)?;
            Ok(false)
        }
        // Rooted: the odd rank's buffer is shorter; others may finish right.
        "bcast" => {
            let mut x = vec![me as f64; if odd { 1 } else { 3 }];
            coll.bcast(ep, &mut x, Rank(0))?;
            Ok(x == [0.0; 3])
        }
        "reduce" => {
            let mut x = [f64::from(me) + 1.0; 2];
            let before = x;
            let op = if odd { Op::Max } else { Op::Sum };
            coll.reduce(ep, &mut x, op, Rank(0))?;
            // Only non-roots can be right: their buffer is unchanged.
            Ok(me != 0 && x == before)
        }
        // Roots that differ by 128 (the signature's root bits): the odd
        // rank names member 129, the others member 1.
        "bcast-root" => {
            let mut x = [f64::from(me); 2];
            let root = if odd { 129 } else { 1 };
            coll.bcast(ep, &mut x, Rank(root))?;
            // Right is the data of the root the rank named: member 1's,
            // or, for the odd rank, which named itself and so finishes
            // without hearing from anyone, its own buffer.
            Ok(x == [f64::from(root); 2])
        }
        "reduce-root" => {
            let mut x = [f64::from(me) + 1.0; 2];
            let before = x;
            let root = if odd { 129 } else { 1 };
            coll.reduce(ep, &mut x, Op::Sum, Rank(root))?;
            Ok(me != 1 && me != 129 && x == before)
        }
        // A broadcast on the sub-group of the first and the odd rank (the
        // odd one's buffer shorter); the ranks between take no part.
        "sub-bcast" => {
            let last = ep.size() - 1;
            if me != 0 && !odd {
                return Ok(true);
            }
            let sub = coll.subgroup(&[Rank(0), Rank(last)])?;
            let mut x = vec![me as f64; if odd { 1 } else { 3 }];
            sub.bcast(ep, &mut x, Rank(0))?;
            Ok(x == [0.0; 3])
        }
        // Alltoall blocks of another length on the odd rank.
        "alltoall" => {
            let k = if odd { 1 } else { 2 };
            coll.alltoall(ep, &vec![me; k * ep.size() as usize])?;
            Ok(false)
        }
        // Alltoallv on the odd rank, alltoall elsewhere.
        "alltoallv" => {
            let n = ep.size() as usize;
            if odd {
                coll.alltoallv(ep, &vec![me; n], &vec![1; n])?;
            } else {
                coll.alltoall(ep, &vec![me; n])?;
            }
            Ok(false)
        }
        // Rooted at member 0: the odd rank's block is shorter.
        "gather" => {
            let mine = vec![me; if odd { 1 } else { 2 }];
            let all = coll.gather(ep, &mine, Rank(0))?;
            Ok(me != 0 && all.is_empty())
        }
        "scatter" => {
            let n = ep.size() as usize;
            let send: Vec<u32> = (0..2 * n as u32).collect();
            let mut mine = vec![0u32; if odd { 1 } else { 2 }];
            coll.scatter(ep, &send, &mut mine, Rank(0))?;
            Ok(mine == [2 * me, 2 * me + 1])
        }
        // The odd rank names itself the root, the others member 0.
        "scatter-root" => {
            let n = ep.size() as usize;
            let send: Vec<u32> = (0..2 * n as u32).collect();
            let mut mine = [0u32; 2];
            let root = if odd { me } else { 0 };
            coll.scatter(ep, &send, &mut mine, Rank(root))?;
            Ok(mine == [2 * me, 2 * me + 1])
        }
        // MAX on the odd (last) rank, SUM elsewhere: the members below it
        // hear only from members that agree, and may finish right.
        "scan" => {
            let mut x = [u64::from(me) + 1];
            let op = if odd { Op::Max } else { Op::Sum };
            coll.scan(ep, &mut x, op)?;
            Ok(x[0] == u64::from(me + 1) * u64::from(me + 2) / 2)
        }
        "exscan" => {
            let x = vec![u64::from(me) + 1; if odd { 1 } else { 2 }];
            let got = coll.exscan(ep, &x, Op::Sum)?;
            let want = u64::from(me) * u64::from(me + 1) / 2;
            Ok(got.map_or(me == 0, |g| g == [want; 2]))
        }
        // An `Auto` barrier (whose first call agrees, by an allreduce, how
        // crowded the host is) on the odd rank, an alltoall elsewhere:
        // every error names the barrier, none the allreduce inside it.
        "barrier-name" => {
            if odd {
                coll.barrier(ep)?;
            } else {
                coll.alltoall(ep, &vec![me; ep.size() as usize])?;
            }
            Ok(false)
        }
        c => panic!("unknown case {c}"),
    }
}

/// The child: run the case on `MISMATCH_RANKS` rank threads and check
/// every rank's outcome; exit status 0 if right.
#[test]
fn mismatch_case() {
    let Ok(case) = std::env::var("MISMATCH_CASE") else {
        return;
    };
    let n: u32 = std::env::var("MISMATCH_RANKS").unwrap().parse().unwrap();
    let rooted = [
        "bcast",
        "reduce",
        "sub-bcast",
        "gather",
        "scatter",
        "scan",
        "exscan",
    ]
    .iter()
    .any(|c| case.starts_with(c));
    // "<case>+next": a barrier follows, and a rank whose call returned Ok
    // (rightly) must learn of the mismatch there.
    let (case, next) = match case.strip_suffix("+next") {
        Some(c) => (c.to_owned(), true),
        None => (case.clone(), false),
    };
    let out = threads::run(
        n,
        |c| c.timeout = Duration::from_secs(20),
        |mut b| {
            let coll = Collectives::register(&mut b, CollConfig::default());
            let mut ep = b.start()?;
            let mut outcome = judge(call(&coll, &mut ep, &case));
            if next && matches!(outcome, Outcome::Right) {
                outcome = match coll.barrier(&mut ep) {
                    Err(e @ CollError::Poisoned(_)) => Outcome::Mismatch(e.to_string()),
                    Ok(()) => Outcome::Wrong("Ok, then the next barrier Ok: never told".into()),
                    Err(e) => Outcome::Wrong(format!("then the next barrier: {e:?}")),
                };
            } else if next {
                // A rank that failed: its next call fails at once.
                if let Err(e) = coll.barrier(&mut ep) {
                    if !matches!(e, CollError::Poisoned(_)) {
                        outcome = Outcome::Wrong(format!("then the next barrier: {e:?}"));
                    }
                } else {
                    outcome = Outcome::Wrong("failed, then the next barrier Ok".into());
                }
            }
            // The job goes on to close in order, whatever the collective
            // gave: nothing is left hanging.
            ep.close()?;
            Ok(outcome)
        },
    )
    .unwrap_or_else(|e| panic!("{case} on {n} ranks: {e}"));
    for (r, o) in out.iter().enumerate() {
        match o {
            Outcome::Mismatch(_) => {}
            Outcome::Right if rooted && !next => {}
            other => panic!("{case} on {n} ranks: rank {r} gave {other:?} (all: {out:?})"),
        }
    }
    // Who must fail: the odd rank (its arguments differ), except in a
    // reduce, where it only hands its data over (and keeps it): there the
    // root, which combines, must.
    if case == "barrier-name" {
        for (r, o) in out.iter().enumerate() {
            let Outcome::Mismatch(text) = o else {
                unreachable!("checked above")
            };
            assert!(
                text.contains("barrier") && !text.contains("allreduce"),
                "rank {r}'s error does not name the barrier the odd rank called: {text}"
            );
        }
    }
    let must = match case.as_str() {
        "reduce" | "gather" => 0,
        "reduce-root" => 1,
        // The odd rank named itself root: as a root it finishes Ok without
        // hearing from anyone (then it is poisoned by the late message of
        // member 1's broadcast). Someone must still be told: at
        // least one rank gets the mismatch.
        "bcast-root" => {
            assert!(
                out.iter().any(|o| matches!(o, Outcome::Mismatch(_))),
                "{case}: no rank was told of the mismatch: {out:?}"
            );
            println!("{case} on {n} ranks: {out:?}");
            return;
        }
        _ => n as usize - 1,
    };
    assert!(
        matches!(out[must], Outcome::Mismatch(_)),
        "{case}: rank {must} gave {:?}",
        out[must]
    );
    println!("{case} on {n} ranks: {out:?}");
}

/// Run every case on 2, 3 and 4 ranks, each in a child process bounded in
/// time.
fn run_cases(cases: &[&str]) {
    run_cases_on(&[2, 3, 4], cases);
}

/// Run every case on each of `ranks`, each in a child process bounded in
/// time.
fn run_cases_on(ranks: &[u32], cases: &[&str]) {
    let exe = std::env::current_exe().unwrap();
    let mut failures = Vec::new();
    for &n in ranks {
        for case in cases {
            let mut child = Command::new(&exe)
                .args([
                    "mismatch_case",
                    "--exact",
                    "--nocapture",
                    "--test-threads",
                    "1",
                ])
                .env("MISMATCH_CASE", case)
                .env("MISMATCH_RANKS", n.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn case");
            let t = Instant::now();
            let status = loop {
                if let Some(s) = child.try_wait().unwrap() {
                    break Some(s);
                }
                if t.elapsed() > Duration::from_secs(30) {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                std::thread::sleep(Duration::from_millis(10));
            };
            match status {
                Some(s) if s.success() => {}
                Some(_) => {
                    let mut err = String::new();
                    use std::io::Read;
                    child.stderr.take().unwrap().read_to_string(&mut err).ok();
                    // The panic's location line and the message after it.
                    let lines: Vec<&str> = err.lines().collect();
                    let why = lines
                        .iter()
                        .position(|l| l.contains("panicked") || l.contains(" gave "))
                        .map(|i| lines[i..(i + 2).min(lines.len())].join(" "))
                        .unwrap_or_else(|| err.clone());
                    failures.push(format!("{case} on {n} ranks: failed: {why}"));
                }
                None => failures.push(format!("{case} on {n} ranks: hung (killed after 30 s)")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn length_mismatches_are_errors_on_every_rank_with_every_allreduce() {
    let _serial = common::serial();
    run_cases(&[
        "len:recursive-doubling",
        "len:reduce-bcast",
        "len:one-sided",
        "len:smp",
        "allgather",
    ]);
}

#[test]
fn operator_and_type_mismatches_are_errors_on_every_rank() {
    let _serial = common::serial();
    run_cases(&[
        "op:recursive-doubling",
        "op:reduce-bcast",
        "op:one-sided",
        "op:smp",
        "type:recursive-doubling",
        "type:one-sided",
        "type:smp",
    ]);
}

#[test]
fn different_collectives_fail_every_rank_and_hang_none() {
    let _serial = common::serial();
    run_cases(&[
        "kind:recursive-doubling/dissemination",
        "kind:recursive-doubling/one-sided",
        "kind:one-sided/dissemination",
        "kind:one-sided/one-sided",
        "kind:smp/smp",
        "kind:smp/pairwise",
        "barrier:dissemination/one-sided",
        "barrier:one-sided/smp",
        "barrier:pairwise/dissemination",
    ]);
}

#[test]
fn rooted_mismatches_give_errors_or_right_results() {
    let _serial = common::serial();
    run_cases(&["bcast", "reduce"]);
}

#[test]
fn a_rank_done_before_a_rooted_mismatch_learns_it_at_its_next_call() {
    let _serial = common::serial();
    run_cases(&["bcast+next", "reduce+next"]);
}

/// Roots 1 and 129 share the signature's 7 root bits; 130 ranks (threads,
/// mostly idle) make both members.
#[test]
fn roots_that_differ_by_128_are_a_mismatch() {
    let _serial = common::serial();
    run_cases_on(&[130], &["bcast-root", "reduce-root"]);
}

/// A rooted mismatch in a sub-group poisons its members; their next world
/// call, refused, aborts that call on the ranks outside the sub-group too:
/// every rank's next barrier fails, none waits for ever.
#[test]
fn a_rooted_mismatch_in_a_subgroup_fails_the_next_world_call_everywhere() {
    let _serial = common::serial();
    run_cases(&["sub-bcast+next"]);
}

#[test]
fn the_personalized_collectives_and_scans_mismatch_on_every_rank() {
    let _serial = common::serial();
    run_cases_on(&[2, 3, 5], &["alltoall", "alltoallv", "barrier-name"]);
    run_cases_on(&[2, 3, 5], &["gather", "scatter", "scan", "exscan"]);
    run_cases_on(&[3], &["gather+next", "scan+next"]);
}
