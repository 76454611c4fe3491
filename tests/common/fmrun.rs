//! Running the calling test binary's rank program under `fmrun`, bounded
//! in time.

use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// `fmrun ARGS <this test binary> RANK_TEST --exact --nocapture
/// --test-threads 1`: every rank runs the test `rank_test` of the calling
/// binary (a rank program returns at once when not started by fmrun). The
/// caller adds environment and standard streams.
pub fn fmrun(args: &[&str], rank_test: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fmrun"));
    c.args(args).arg(std::env::current_exe().unwrap()).args([
        rank_test,
        "--exact",
        "--nocapture",
        "--test-threads",
        "1",
    ]);
    c
}

/// Wait for `child` for at most `limit`; past it, kill it and panic.
pub fn wait_timeout(child: &mut Child, limit: Duration) -> ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            panic!("fmrun did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Run `cmd` to its end within `limit`, collecting its output; past the
/// limit, kill it (SIGKILL) and panic.
pub fn run(mut cmd: Command, limit: Duration) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let t = Instant::now();
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("job did not finish within {:?}", t.elapsed());
        }
    }
}
