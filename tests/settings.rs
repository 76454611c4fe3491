//! Every setting, at its edges and beyond, gives a typed error naming it
//! (or works): never a panic, an abort allocating a terabyte, an overflow,
//! or a SIGBUS. Each row runs a 2-rank job under fmrun
//! with the setting in the environment and checks the exit status and the
//! message.

mod common;

use common::fmrun::run;
use std::process::Command;
use std::time::Duration;

/// Rank program: start (the settings are checked here), close, exit 0; a
/// start error is printed and exits with status 2.
#[test]
fn settings_rank() {
    if std::env::var("FASTMSG_RANK").is_err() {
        return;
    }
    let mut b = match fastmsg::EndpointBuilder::from_env() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("START-ERROR: {e}");
            std::process::exit(2);
        }
    };
    b.register_fn("unused", |_c, _p| Ok(()));
    match b.start() {
        Ok(ep) => {
            ep.close().expect("close");
            std::process::exit(0);
        }
        Err(e) => {
            eprintln!("START-ERROR: {e}");
            std::process::exit(2);
        }
    }
}

fn fmrun_job(ranks: &str, env: &[(&str, &str)]) -> Command {
    fmrun_job_with(ranks, &[], env)
}

fn fmrun_job_with(ranks: &str, args: &[&str], env: &[(&str, &str)]) -> Command {
    let all: Vec<&str> = ["-n", ranks, "--grace", "1"]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    let mut c = common::fmrun::fmrun(&all, "settings_rank");
    c.env_remove("FASTMSG_SECRET")
        .env_remove("FASTMSG_SECRET_FILE")
        .env_remove("FASTMSG_SHM_DIR")
        .envs(env.iter().copied());
    c
}

/// What 65536 slots of 16 MiB ask for per rank in a 2-rank job: a ring,
/// a credit line and a staging slot for its one peer.
const TB_ASK: u64 = 65536 * 16_777_216 + 64 + 16_777_216;

/// (environment, expected exit status, text the error must contain)
type Row<'a> = (&'a [(&'a str, &'a str)], i32, &'a str);

#[test]
fn every_setting_is_validated_with_a_typed_error() {
    let tb = TB_ASK.to_string();
    let rows: &[Row] = &[
        (&[], 0, ""),
        (&[("FASTMSG_TIMEOUT", "31536000")], 0, ""),
        (
            &[("FASTMSG_TIMEOUT", "18446744073709551615")],
            2,
            "invalid setting FASTMSG_TIMEOUT",
        ),
        (
            &[("FASTMSG_CLOSE_WARN", "18446744073709551615")],
            2,
            "invalid setting FASTMSG_CLOSE_WARN",
        ),
        (
            &[("FASTMSG_TIMEOUT", "0")],
            2,
            "invalid setting FASTMSG_TIMEOUT: 0 s",
        ),
        (
            &[("FASTMSG_TIMEOUT", "soon")],
            2,
            "FASTMSG_TIMEOUT=\"soon\"",
        ),
        (
            &[
                ("FASTMSG_NET", "tcp"),
                ("FASTMSG_NET_SLOTS", "65536"),
                ("FASTMSG_NET_SLOT_SIZE", "16777216"),
            ],
            2,
            &tb,
        ),
        (
            &[("FASTMSG_NET", "tcp"), ("FASTMSG_NET_SLOTS", "3")],
            2,
            "FASTMSG_NET_SLOTS",
        ),
        (
            &[("FASTMSG_NET_SLOT_SIZE", "4294967296")],
            2,
            "FASTMSG_NET_SLOT_SIZE",
        ),
        (
            &[
                ("FASTMSG_NET", "tcp"),
                ("FASTMSG_NET_DEAD_AFTER_MS", "1500"),
            ],
            0,
            "",
        ),
        (
            &[("FASTMSG_NET_DEAD_AFTER_MS", "0")],
            2,
            "invalid setting FASTMSG_NET_DEAD_AFTER_MS",
        ),
        (
            &[("FASTMSG_NET_DEAD_AFTER_MS", "999")],
            2,
            "invalid setting FASTMSG_NET_DEAD_AFTER_MS: 999 ms; must be 1000 ..=",
        ),
        (
            &[("FASTMSG_SHM_INLINE", "2")],
            2,
            "FASTMSG_SHM_INLINE=\"2\" is invalid: expected 0 or 1",
        ),
        (&[("FASTMSG_SHM_INLINE", "1")], 0, ""),
        (
            &[("FASTMSG_VERBOSE_ENV", "7")],
            2,
            "FASTMSG_VERBOSE_ENV=\"7\" is invalid: expected 0 or 1",
        ),
        (
            &[("FASTMSG_NET_DEAD_AFTER_MS", "2147483648")],
            2,
            "invalid setting FASTMSG_NET_DEAD_AFTER_MS",
        ),
        (&[("FASTMSG_CREDITS", "0")], 2, "FASTMSG_CREDITS"),
        (&[("FASTMSG_CREDITS", "4294967296")], 2, "FASTMSG_CREDITS"),
        (&[("FASTMSG_FRAME_SIZE", "100")], 2, "FASTMSG_FRAME_SIZE"),
        (&[("FASTMSG_QUEUES", "3")], 2, "FASTMSG_QUEUES"),
        (&[("FASTMSG_COPY", "vectr")], 2, "FASTMSG_COPY=\"vectr\""),
        (
            &[("FASTMSG_WAIT", "spinn")],
            2,
            "FASTMSG_WAIT=\"spinn\" is invalid: expected spin, yield, sleep or auto",
        ),
        (
            &[("FASTMSG_NET", "tpc")],
            2,
            "FASTMSG_NET=\"tpc\" is invalid: expected auto or a provider",
        ),
        (
            &[("FASTMSG_CONNECT", "eagre")],
            2,
            "FASTMSG_CONNECT=\"eagre\" is invalid: expected lazy or eager",
        ),
        (
            &[("FASTMSG_STATS", "7")],
            2,
            "FASTMSG_STATS=\"7\" is invalid: expected 0 or 1",
        ),
        (&[("FASTMSG_STATS", "0")], 0, ""),
        (&[("FASTMSG_COPY", "stream:4096")], 0, ""),
        (
            &[
                ("FASTMSG_CREDITS", "65536"),
                ("FASTMSG_FRAME_SIZE", "16777216"),
            ],
            2,
            "layout too large",
        ),
        (
            &[("FASTMSG_SECRET_FILE", "/nonexistent/secret")],
            2,
            "secret file /nonexistent/secret",
        ),
    ];
    for &(env, status, text) in rows {
        let out = run(fmrun_job("2", env), Duration::from_secs(60));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(status),
            "{env:?}: expected status {status}, stderr:\n{err}"
        );
        assert!(err.contains(text), "{env:?}: no {text:?} in:\n{err}");
        assert!(!err.contains("panicked"), "{env:?}: a panic:\n{err}");
    }
}

/// A segment directory too small for the segment (a 1 MiB tmpfs, mounted
/// in a mount namespace of the test's own) is a typed error naming the
/// bytes needed and the directory, not a SIGBUS.
#[test]
fn a_small_segment_directory_is_a_typed_error() {
    if !common::netns::is_root() {
        eprintln!("skipped: needs root to mount a small tmpfs (unshare --mount)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("fastmsg-small-shm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap().to_owned();
    // 4096 credits: 16 queues of 4096 slot stamps (4 MiB) that the creator
    // writes at once, so a sparse segment that does not fit gets a SIGBUS
    // at start-up rather than only under traffic.
    let job = fmrun_job_with("4", &["--shm-dir", &d], &[("FASTMSG_CREDITS", "4096")]);
    let mut line = format!("mount -t tmpfs -o size=1m fastmsg-test {d} && exec");
    line.push_str(&format!(" {:?}", job.get_program()));
    for a in job.get_args() {
        line.push_str(&format!(" {a:?}"));
    }
    let mut c = Command::new("unshare");
    c.args(["--mount", "--propagation", "private", "sh", "-c", &line]);
    for (k, v) in job.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    let out = run(c, Duration::from_secs(60));
    let _ = std::fs::remove_dir(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("unshare failed") || err.contains("mount:") {
        eprintln!("skipped: cannot mount a tmpfs here: {err}");
        return;
    }
    assert_eq!(out.status.code(), Some(2), "stderr:\n{err}");
    assert!(err.contains("needs"), "{err}");
    assert!(
        err.contains(&format!("but {d} cannot provide them")),
        "{err}"
    );
}
