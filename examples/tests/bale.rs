//! The Bale kernels' example programs (histogram and index-gather in
//! every form, permutation, transpose) run under `fmrun` at small sizes,
//! on 2 and 3 ranks, and must report that their result checked out.
//!
//! The programs and `fmrun` are found next to this test binary (in the
//! target directory of the same profile): `cargo test -p fastmsg-examples`
//! builds the examples, `cargo build -p fastmsg --bin fmrun` the launcher;
//! a test whose programs are not built skips with a message.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The target directory of this profile (`target/debug`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/debug/deps/bale-<hash>
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary lies in <target>/<profile>/deps")
        .to_owned()
}

/// Run `fmrun -n ranks <example> args…` to its end (killed past a
/// minute); its stdout, or `None` (with a message) when a program is not
/// built.
fn run_example(example: &str, ranks: u32, args: &[&str]) -> Option<String> {
    let dir = profile_dir();
    let (fmrun, prog) = (dir.join("fmrun"), dir.join("examples").join(example));
    for p in [&fmrun, &prog] {
        if !p.exists() {
            println!(
                "skipped: {} is not built (cargo build -p fastmsg --bin fmrun -p fastmsg-examples --example {example})",
                p.display()
            );
            return None;
        }
    }
    let mut child = Command::new(fmrun)
        .arg("-n")
        .arg(ranks.to_string())
        .arg(prog)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fmrun starts");
    let t = Instant::now();
    while child.try_wait().expect("wait for fmrun").is_none() {
        if t.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{example} on {ranks} ranks did not finish within a minute");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("fmrun's output");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{example} on {ranks} ranks failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Some(stdout)
}

/// Every `--json` line of `out` (one per repetition) says `"ok":true` and
/// carries a positive rate `field`.
fn check_json(out: &str, kernel: &str, field: &str, reps: usize) {
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with('{')).collect();
    assert_eq!(lines.len(), reps, "one JSON line per repetition in:\n{out}");
    for l in lines {
        assert!(l.contains(&format!("\"kernel\":\"{kernel}\"")), "{l}");
        assert!(l.contains("\"ok\":true"), "the check failed: {l}");
        let rate = l
            .split(&format!("\"{field}\":"))
            .nth(1)
            .and_then(|v| v.split([',', '}']).next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {field} in {l}"));
        assert!(rate > 0.0, "{l}");
    }
}

/// Dart throwing with many bounces and small buffers (so that answers
/// and rethrows cross full buffers waiting for credit), two repetitions.
#[test]
fn permute_checks_out_on_2_and_3_ranks() {
    for ranks in [2, 3] {
        let args = [
            "--json",
            "--log-darts",
            "17",
            "--buffer",
            "1024",
            "--reps",
            "2",
        ];
        if let Some(out) = run_example("permute", ranks, &args) {
            check_json(&out, "permute", "darts_per_s", 2);
        }
    }
}

/// The transpose of a small matrix, compared column by column with a
/// sequential recomputation, two repetitions.
#[test]
fn transpose_checks_out_on_2_and_3_ranks() {
    for ranks in [2, 3] {
        let args = [
            "--json",
            "--log-rows",
            "10",
            "--nonzeros",
            "12",
            "--buffer",
            "1024",
            "--reps",
            "2",
        ];
        if let Some(out) = run_example("transpose", ranks, &args) {
            check_json(&out, "transpose", "nonzeros_per_s", 2);
        }
    }
}

/// `example` in each of `forms` on 2 and 3 ranks at a small size
/// (`--log-table 12`, `size_flag` 14, 1 KiB buffers): each run checks out
/// and names its form.
fn check_forms(example: &str, forms: &[&str], size_flag: &str, field: &str) {
    for &form in forms {
        for ranks in [2, 3] {
            let args = [
                "--json",
                "--form",
                form,
                "--log-table",
                "12",
                size_flag,
                "14",
                "--buffer",
                "1024",
            ];
            if let Some(out) = run_example(example, ranks, &args) {
                check_json(&out, example, field, 1);
                assert!(out.contains(&format!("\"form\":\"{form}\"")), "{out}");
            }
        }
    }
}

/// The histogram in every form (channel, remote adds at the owner, CPU
/// atomics, everything through the owner), checked against the
/// sequential recount the program makes.
#[test]
fn histogram_checks_out_in_every_form() {
    let forms = [
        "channel",
        "atomic",
        "atomic-direct",
        "atomic-owner",
        "atomic-owned",
    ];
    check_forms("histo", &forms, "--log-updates", "updates_per_s");
}

/// Index-gather in every form (two channels, remote reads, reads through
/// the owner, calls), every answer checked.
#[test]
fn index_gather_checks_out_in_every_form() {
    let forms = ["channel", "get", "get-owner", "rpc"];
    check_forms("ig", &forms, "--log-requests", "requests_per_s");
}
