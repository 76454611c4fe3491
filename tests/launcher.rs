//! Launcher manners, logging and the configuration report, seen from
//! outside: processes started with a controlled environment (no launcher,
//! a Slurm batch shell, a typo), each bounded in time.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The environment with every launcher's and fastmsg's variables removed.
fn bare(cmd: &mut Command) -> &mut Command {
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        let launcher = ["FASTMSG_", "SLURM_", "OMPI_", "PMI_", "PMIX_", "MPI_"]
            .iter()
            .any(|p| k.starts_with(p));
        if launcher {
            cmd.env_remove(&k);
        }
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
}

/// Run `cmd` to completion within `limit` (killed and failed past it).
fn run_within(cmd: &mut Command, limit: Duration) -> (Output, Duration) {
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn");
    loop {
        if child.try_wait().unwrap().is_some() {
            return (child.wait_with_output().unwrap(), start.elapsed());
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// This test binary, running only the rank program `test`.
fn rank_program(test: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([test, "--exact", "--nocapture", "--test-threads", "1"]);
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The rank program: a one-rank job started without any launcher sends
/// itself a message, receives it and closes. Does nothing unless the
/// scenario variable asks for it (so the ordinary test run passes by).
#[test]
fn singleton_rank_program() {
    if std::env::var("FASTMSG_TEST_SCENARIO").as_deref() != Ok("singleton") {
        return;
    }
    let mut b = fastmsg::EndpointBuilder::from_env().expect("a singleton job");
    assert_eq!((b.rank().0, b.size()), (0, 1));
    let got = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let g = got.clone();
    let h = b.register("self", move |_ctx, mut msg| {
        let g = g.clone();
        async move {
            *g.borrow_mut() = msg.receive_vec().await?;
            Ok(())
        }
    });
    let mut ep = b.start().expect("start a singleton");
    ep.send(fastmsg::Rank(0), h, &[b"to myself"]).unwrap();
    ep.wait_until(|| !got.borrow().is_empty()).unwrap();
    assert_eq!(&got.borrow()[..], b"to myself");
    ep.close().unwrap();
    println!("SINGLETON-OK");
}

#[test]
fn a_program_started_by_hand_runs_as_one_rank() {
    let (out, _) = run_within(
        bare(&mut rank_program("singleton_rank_program"))
            .env("FASTMSG_TEST_SCENARIO", "singleton")
            .env("FASTMSG_LOG", "info"),
        Duration::from_secs(60),
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("SINGLETON-OK"), "{stdout}");
    // FASTMSG_LOG=info shows the start-up line, tagged with the rank.
    assert!(
        stderr.contains("fastmsg[rank 0] INFO fastmsg::endpoint::startup: rank 0 of 1 started"),
        "{stderr}"
    );
}

#[test]
fn the_default_log_level_hides_info() {
    let (out, _) = run_within(
        bare(&mut rank_program("singleton_rank_program")).env("FASTMSG_TEST_SCENARIO", "singleton"),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("INFO"), "{}", text(&out.stderr));
}

/// The batch shell of `sbatch -n 4` without `srun`.
fn batch_shell(cmd: &mut Command) -> &mut Command {
    bare(cmd)
        .env("SLURM_JOB_ID", "4242")
        .env("SLURM_PROCID", "0")
        .env("SLURM_NTASKS", "4")
        .env("SLURM_LOCALID", "0")
        .env("SLURM_NTASKS_PER_NODE", "4")
}

#[test]
fn a_batch_shell_without_srun_fails_at_once_naming_srun() {
    let (out, took) = run_within(
        batch_shell(&mut rank_program("singleton_rank_program"))
            .env("FASTMSG_TEST_SCENARIO", "singleton"),
        Duration::from_secs(30),
    );
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("SlurmOutsideStep"), "{stderr}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    // The same through a binary that prints errors for people.
    let (out, _) = run_within(
        batch_shell(&mut Command::new(env!("CARGO_BIN_EXE_fastmsg-info"))),
        Duration::from_secs(30),
    );
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("not by srun") && stderr.contains("`srun prog`"),
        "{stderr}"
    );
    assert!(!stderr.contains("SlurmOutsideStep"), "Debug text: {stderr}");
}

#[test]
fn a_slurm_step_is_a_job() {
    let (out, _) = run_within(
        batch_shell(&mut Command::new(env!("CARGO_BIN_EXE_fastmsg-info")))
            .env("SLURM_STEP_ID", "0"),
        Duration::from_secs(30),
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("rank 0 of 4") && stdout.contains("launcher: slurm"),
        "{stdout}"
    );
}

#[test]
fn info_reports_values_sources_and_typos() {
    let (out, _) = run_within(
        bare(&mut Command::new(env!("CARGO_BIN_EXE_fastmsg-info")))
            .env("FASTMSG_CREDITS", "8")
            .env("FASTMSG_WIAT", "yield"),
        Duration::from_secs(30),
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("rank 0 of 1") && stdout.contains("singleton"),
        "{stdout}"
    );
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .unwrap_or_else(|| panic!("{name} missing:\n{stdout}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(line("FASTMSG_CREDITS "), "FASTMSG_CREDITS 8 environment");
    assert_eq!(line("FASTMSG_WAIT "), "FASTMSG_WAIT auto default");
    assert!(stdout.contains("affinity mask"), "{stdout}");
    assert!(stdout.contains("shm "), "{stdout}");
    let warnings: Vec<_> = stderr
        .lines()
        .filter(|l| l.contains("FASTMSG_WIAT"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].contains("did you mean FASTMSG_WAIT?"),
        "{stderr}"
    );
}

/// Rank program: a program that installs its own subscriber (INFO, into a
/// buffer) before building an endpoint keeps it: fastmsg's start-up line
/// reaches it although fastmsg's own default would filter INFO out.
#[test]
fn own_subscriber_rank_program() {
    if std::env::var("FASTMSG_TEST_SCENARIO").as_deref() != Ok("own-subscriber") {
        return;
    }
    use std::sync::{Arc, Mutex};
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buf = Buf::default();
    let writer = buf.clone();
    tracing::subscriber::set_global_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || writer.clone())
            .finish(),
    )
    .unwrap();
    let ep = fastmsg::EndpointBuilder::from_env()
        .unwrap()
        .start()
        .unwrap();
    ep.close().unwrap();
    let text = String::from_utf8_lossy(&buf.0.lock().unwrap()).into_owned();
    assert!(text.contains("rank 0 of 1 started"), "{text:?}");
    println!("OWN-SUBSCRIBER-OK");
}

#[test]
fn a_subscriber_the_program_installed_is_kept() {
    let (out, _) = run_within(
        bare(&mut rank_program("own_subscriber_rank_program"))
            .env("FASTMSG_TEST_SCENARIO", "own-subscriber"),
        Duration::from_secs(60),
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("OWN-SUBSCRIBER-OK"), "{stdout}");
    // fastmsg's own subscriber would have written here.
    assert!(!stderr.contains("fastmsg[rank 0]"), "{stderr}");
}

#[test]
fn fmrun_names_the_failed_rank_once() {
    let (out, took) = run_within(
        bare(&mut Command::new(env!("CARGO_BIN_EXE_fmrun"))).args([
            "-n",
            "3",
            "--grace",
            "1",
            "sh",
            "-c",
            r#"[ "$FASTMSG_RANK" = 1 ] && exit 3; exec sleep 20"#,
        ]),
        Duration::from_secs(30),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let lines: Vec<_> = stderr.lines().filter(|l| l.contains("rank")).collect();
    assert_eq!(
        lines,
        ["fmrun ERROR: rank 1 exited with status 3; stopping the other ranks"],
        "{stderr}"
    );
}

/// Run the singleton rank program with `env`; its stderr.
fn singleton_stderr(env: &[(&str, &str)]) -> String {
    let (out, _) = run_within(
        bare(&mut rank_program("singleton_rank_program"))
            .env("FASTMSG_TEST_SCENARIO", "singleton")
            .envs(env.iter().copied()),
        Duration::from_secs(60),
    );
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    stderr
}

#[test]
fn the_log_filter_works_per_module() {
    let start = "INFO fastmsg::endpoint::startup: rank 0 of 1 started";
    let on = singleton_stderr(&[("FASTMSG_LOG", "warn,fastmsg::endpoint::startup=info")]);
    assert!(on.contains(start), "{on}");
    let off = singleton_stderr(&[("FASTMSG_LOG", "warn,fastmsg::copy=info")]);
    assert!(!off.contains(start), "{off}");
    // A filter that does not parse is reported, and the default applies.
    let bad = singleton_stderr(&[("FASTMSG_LOG", "fastmsg=loud")]);
    assert!(
        bad.contains("FASTMSG_LOG=\"fastmsg=loud\" is not a valid filter"),
        "{bad}"
    );
    assert!(!bad.contains(start), "{bad}");
}

#[test]
fn verbose_env_prints_the_report_at_start() {
    let stderr = singleton_stderr(&[("FASTMSG_VERBOSE_ENV", "1"), ("FASTMSG_WAIT", "yield")]);
    assert!(stderr.contains("launcher: none (singleton)"), "{stderr}");
    let wait = stderr
        .lines()
        .find(|l| l.trim_start().starts_with("FASTMSG_WAIT "))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert_eq!(
        wait.split_whitespace().collect::<Vec<_>>(),
        ["FASTMSG_WAIT", "yield", "environment"]
    );
}
