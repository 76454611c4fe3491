//! Forwarding the ranks' output line by line.
//!
//! Each rank's stdout and stderr is a pipe read by a thread of its own;
//! a complete line (or, at the end, the unterminated rest with a newline
//! added) goes to fmrun's stdout or stderr in one write under the stream's
//! lock, so lines of different ranks never interleave mid-line. With
//! `--tag-output` each line starts with `[rank] `. Lines longer than
//! [`MAX_LINE`] are cut into pieces of that length (each tagged).

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

/// The longest piece forwarded in one write.
const MAX_LINE: usize = 64 * 1024;

/// Which of fmrun's streams a pipe feeds.
#[derive(Clone, Copy)]
pub enum Stream {
    /// stdout.
    Out,
    /// stderr.
    Err,
}

/// The forwarding threads of a job.
pub struct Forwarders {
    done_tx: Sender<()>,
    done_rx: Receiver<()>,
    running: usize,
}

impl Forwarders {
    pub fn new() -> Self {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        Forwarders {
            done_tx,
            done_rx,
            running: 0,
        }
    }

    /// Forward `pipe` to `to`, each line tagged with `tag` if given.
    pub fn spawn(&mut self, pipe: impl Read + Send + 'static, to: Stream, tag: Option<String>) {
        let done = self.done_tx.clone();
        let started = std::thread::Builder::new()
            .name("fmrun-output".into())
            .spawn(move || {
                forward(pipe, to, tag.as_deref());
                let _ = done.send(());
            });
        if started.is_ok() {
            self.running += 1;
        }
    }

    /// Wait (at most `limit`) for every pipe to reach its end: the ranks
    /// have exited, but a process they started may still hold a pipe.
    pub fn finish(mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.running > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if self.done_rx.recv_timeout(left).is_err() {
                return;
            }
            self.running -= 1;
        }
    }
}

fn forward(pipe: impl Read, to: Stream, tag: Option<&str>) {
    let mut r = BufReader::with_capacity(MAX_LINE, pipe);
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        if let Some(t) = tag {
            line.extend_from_slice(t.as_bytes());
        }
        let head = line.len();
        match (&mut r).take(MAX_LINE as u64).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.last() != Some(&b'\n') {
            line.push(b'\n'); // the end, or a piece of an over-long line
        }
        debug_assert!(line.len() > head);
        // One write of the whole line under the stream's lock; a closed
        // stream (fmrun | head) only discards: keep draining the pipe so
        // the rank never blocks on it.
        let _ = match to {
            Stream::Out => {
                let mut o = std::io::stdout().lock();
                o.write_all(&line).and_then(|()| o.flush())
            }
            Stream::Err => std::io::stderr().lock().write_all(&line),
        };
    }
}
