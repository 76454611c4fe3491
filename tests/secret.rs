//! The job secret is on no command line: fmrun takes it
//! from a private file (`--secret-file`) or the environment and hands it to
//! its ranks by environment; `--secret` is refused; a file others can read
//! is refused naming its mode.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Rank program: join a TCP job (the secret is used), then look through
/// every process's arguments for the secret: status 7 if found, else 0.
#[test]
fn secret_rank() {
    if std::env::var("FASTMSG_RANK").is_err() {
        return;
    }
    let secret = std::env::var("FASTMSG_SECRET").expect("the secret by environment");
    if std::env::var("EXPECT_SECRET").is_ok_and(|e| e != secret) {
        eprintln!("rank got another secret than the file's");
        std::process::exit(8);
    }
    let mut b = fastmsg::EndpointBuilder::from_env().expect("env");
    b.register_fn("unused", |_c, _p| Ok(()));
    let ep = b.start().expect("start");
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(args) = std::fs::read(e.path().join("cmdline")) {
            if args.windows(secret.len()).any(|w| w == secret.as_bytes()) {
                found.push(name);
            }
        }
    }
    ep.close().expect("close");
    // Positive control: the same search finds it in our environment.
    let env = std::fs::read("/proc/self/environ").unwrap();
    assert!(
        env.windows(secret.len()).any(|w| w == secret.as_bytes()),
        "the search cannot see the secret where it is"
    );
    if !found.is_empty() {
        eprintln!("the secret is in the arguments of pids {found:?}");
        std::process::exit(7);
    }
    std::process::exit(0);
}

fn secret_file(tag: &str, mode: u32, secret: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("fastmsg-secret-{tag}-{}", std::process::id()));
    std::fs::write(&p, format!("{secret}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    p
}

fn fmrun(args: &[&str], expect: Option<&str>) -> Output {
    common::fmrun::run(fmrun_command(args, expect), Duration::from_secs(60))
}

/// fmrun running this binary's `secret_rank` as each rank, with no secret
/// in its environment (a caller may add one).
fn fmrun_command(args: &[&str], expect: Option<&str>) -> Command {
    let mut c = common::fmrun::fmrun(args, "secret_rank");
    if let Some(e) = expect {
        c.env("EXPECT_SECRET", e);
    }
    c.env_remove("FASTMSG_SECRET")
        .env_remove("FASTMSG_SECRET_FILE")
        .env("FASTMSG_TIMEOUT", "30")
        .stdin(Stdio::null());
    c
}

fn fresh() -> String {
    let mut b = [0u8; 12];
    getrandom::fill(&mut b).unwrap();
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn a_secret_file_reaches_the_ranks_by_environment_only() {
    let s = fresh();
    let f = secret_file("ok", 0o600, &s);
    let file = f.to_str().unwrap();
    let out = fmrun(
        &["-n", "3", "--net", "tcp", "--secret-file", file],
        Some(&s),
    );
    std::fs::remove_file(&f).unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_secret_on_the_command_line_is_refused() {
    let out = fmrun(&["-n", "2", "--net", "tcp", "--secret", "visible"], None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--secret-file"), "{err}");
}

#[test]
fn a_secret_file_others_can_read_is_refused() {
    let f = secret_file("open", 0o644, &fresh());
    let file = f.to_str().unwrap();
    let out = fmrun(&["-n", "2", "--net", "tcp", "--secret-file", file], None);
    std::fs::remove_file(&f).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("0644") && err.contains("chmod 600"), "{err}");
}

#[test]
fn fmrun_takes_fastmsg_secret_file_from_its_environment() {
    let s = fresh();
    let f = secret_file("env", 0o600, &s);
    let mut c = fmrun_command(&["-n", "2", "--net", "tcp"], Some(&s));
    c.env("FASTMSG_SECRET_FILE", &f);
    let out = common::fmrun::run(c, Duration::from_secs(60));
    std::fs::remove_file(&f).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
