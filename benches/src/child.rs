//! Child processes with a time limit, their output kept in files so a
//! failed step can be read afterwards.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A measurement program did not give a usable result.
#[derive(Debug, thiserror::Error)]
pub enum ChildRunError {
    /// It could not be started.
    #[error("{prog}: cannot start: {source}")]
    Spawn {
        /// The program.
        prog: String,
        /// Why.
        source: std::io::Error,
    },
    /// It ran past its time limit and was killed.
    #[error("{prog}: still running after {secs} s; killed (output in {log})")]
    Timeout {
        /// The program.
        prog: String,
        /// The limit.
        secs: u64,
        /// Its output file.
        log: String,
    },
    /// It exited with a failure status.
    #[error("{prog}: exited with {status} (output in {log})")]
    Failed {
        /// The program.
        prog: String,
        /// Its exit status.
        status: String,
        /// Its output file.
        log: String,
    },
    /// Its output file could not be written or read.
    #[error("{log}: {source}")]
    Io {
        /// The output file.
        log: String,
        /// Why.
        source: std::io::Error,
    },
}

/// Run `cmd` for at most `limit`, stdout to `log`, stderr to `log`.err;
/// returns stdout.
///
/// # Errors
/// [`ChildRunError`] naming the program and the log to read.
pub fn run(mut cmd: Command, limit: Duration, log: &Path) -> Result<String, ChildRunError> {
    let prog = format!("{:?}", cmd.get_program());
    let log_s = log.display().to_string();
    let io = |source| ChildRunError::Io {
        log: log_s.clone(),
        source,
    };
    let out = std::fs::File::create(log).map_err(io)?;
    let err = std::fs::File::create(log.with_extension("err")).map_err(io)?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|source| ChildRunError::Spawn {
            prog: prog.clone(),
            source,
        })?;
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().map_err(io)? {
            break s;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ChildRunError::Timeout {
                prog,
                secs: limit.as_secs(),
                log: log_s,
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if !status.success() {
        return Err(ChildRunError::Failed {
            prog,
            status: status.to_string(),
            log: log_s,
        });
    }
    std::fs::read_to_string(log).map_err(io)
}
