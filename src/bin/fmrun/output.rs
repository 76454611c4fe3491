//! Forwarding the ranks' output line by line.
//!
//! Each rank's stdout and stderr is a pipe. Two threads read them all
//! (`poll(2)`): one the stdout pipes, one the stderr pipes. A job of N
//! ranks costs fmrun two threads, not 2N (each with its own stack: 256
//! ranks once took 512 threads, and under a memory limit the ones that
//! could not start dropped their pipes and the ranks' messages with
//! them). One per stream, so that a reader of fmrun's stdout that stalls
//! (`| less`, a paused terminal) holds back the ranks' stdout only, never
//! their error messages. A complete line (or, at the end, the
//! unterminated rest with a newline added) goes to fmrun's stdout or
//! stderr in one write under the stream's lock, so lines of different
//! ranks never interleave mid-line. With `--tag-output` each line starts
//! with `[rank] `. Lines longer than [`MAX_LINE`] are cut into pieces of
//! that length (each tagged).
//!
//! If the threads cannot start, [`Forwarders::start`] says so and fmrun
//! lets the ranks write to its own streams directly (untagged, lines
//! possibly interleaved): nothing is lost.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::time::{Duration, Instant};

/// The longest piece forwarded in one write.
const MAX_LINE: usize = 64 * 1024;

/// How often the threads look for pipes added meanwhile (only while the
/// ranks are being started: [`Forwarders::all_added`]).
const ADD_EVERY_MS: i32 = 10;

/// Which of fmrun's streams a pipe feeds.
#[derive(Clone, Copy)]
pub enum Stream {
    /// stdout.
    Out,
    /// stderr.
    Err,
}

/// One rank's pipe and what it has sent of a line so far.
struct Pipe {
    rank: u32,
    file: std::fs::File,
    to: Stream,
    tag: Option<String>,
    partial: Vec<u8>,
}

/// The job's forwarding threads.
pub struct Forwarders {
    /// Where new pipes go, per stream (`None` once every rank started).
    add: Option<[Sender<Pipe>; 2]>,
    /// One message from each thread when it is done.
    done: Receiver<()>,
    /// A rank's number each time one of its pipes ends.
    ended: Receiver<u32>,
    /// Per rank: pipes added, pipes seen ended.
    pipes: HashMap<u32, (u32, u32)>,
}

impl Forwarders {
    /// Start the forwarding threads.
    ///
    /// # Errors
    /// A thread could not be started (the caller then lets the ranks
    /// inherit fmrun's streams).
    pub fn start() -> std::io::Result<Forwarders> {
        let (done_tx, done) = std::sync::mpsc::channel();
        let (ended_tx, ended) = std::sync::mpsc::channel();
        let mut add = Vec::new();
        for name in ["fmrun-stdout", "fmrun-stderr"] {
            let (tx, pipes) = std::sync::mpsc::channel();
            let (done_tx, ended_tx) = (done_tx.clone(), ended_tx.clone());
            std::thread::Builder::new()
                .name(name.into())
                .stack_size(256 * 1024)
                .spawn(move || {
                    forward_all(&pipes, &ended_tx);
                    let _ = done_tx.send(());
                })?;
            add.push(tx);
        }
        let add: [Sender<Pipe>; 2] = add.try_into().expect("two streams");
        Ok(Forwarders {
            add: Some(add),
            done,
            ended,
            pipes: HashMap::new(),
        })
    }

    /// Forward `pipe` of `rank` to `to`, each line tagged with `tag` if
    /// given.
    pub fn add(&mut self, rank: u32, pipe: impl Into<OwnedFd>, to: Stream, tag: Option<String>) {
        let Some(add) = &self.add else {
            return;
        };
        self.pipes.entry(rank).or_default().0 += 1;
        let _ = add[to as usize].send(Pipe {
            rank,
            file: std::fs::File::from(pipe.into()),
            to,
            tag,
            partial: Vec::new(),
        });
    }

    /// Every rank has been started: the threads stop looking for new
    /// pipes (until then they look every few milliseconds) and end once
    /// every pipe has.
    pub fn all_added(&mut self) {
        self.add = None;
    }

    /// Wait (at most `limit`) until everything `rank` wrote has been
    /// forwarded: its pipes have ended (it exited). So fmrun's line about
    /// a failed rank comes after the rank's own last words.
    pub fn drained(&mut self, rank: u32, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self
            .pipes
            .get(&rank)
            .is_some_and(|&(added, ended)| ended < added)
        {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.ended.recv_timeout(left) {
                Ok(r) => {
                    if let Some(p) = self.pipes.get_mut(&r) {
                        p.1 += 1;
                    }
                }
                Err(_) => return,
            }
        }
    }

    /// Wait (at most `limit`) for every pipe to reach its end: the ranks
    /// have exited, but a process they started may still hold a pipe.
    pub fn finish(mut self, limit: Duration) {
        self.all_added();
        let deadline = Instant::now() + limit;
        for _ in 0..2 {
            let left = deadline.saturating_duration_since(Instant::now());
            if self.done.recv_timeout(left).is_err() {
                return;
            }
        }
    }
}

/// The thread: read every pipe as it becomes readable until all have
/// ended and no more can be added.
fn forward_all(added: &Receiver<Pipe>, ended: &Sender<u32>) {
    let mut pipes: Vec<Pipe> = Vec::new();
    let mut adding = true;
    let mut buf = vec![0u8; MAX_LINE];
    loop {
        while adding {
            match added.try_recv() {
                Ok(p) => pipes.push(p),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => adding = false,
            }
        }
        if pipes.is_empty() && !adding {
            return;
        }
        let mut fds: Vec<libc::pollfd> = pipes
            .iter()
            .map(|p| libc::pollfd {
                fd: p.file.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let wait = if adding { ADD_EVERY_MS } else { -1 };
        // SAFETY: `fds` is a live array of `fds.len()` pollfd entries for
        // the duration of the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait) };
        if n <= 0 {
            continue; // time to look for added pipes, or EINTR
        }
        // From the back, so that a pipe removed (its place taken by the
        // last, already looked at) leaves the others' indices unchanged.
        for k in (0..fds.len()).rev() {
            if fds[k].revents == 0 {
                continue;
            }
            // Readable, hung up or failed: one read says which (a pipe
            // reported ready does not block).
            let end = match pipes[k].file.read(&mut buf) {
                Ok(0) => true,
                Ok(n) => {
                    pipes[k].take(&buf[..n]);
                    false
                }
                Err(e) => e.kind() != ErrorKind::Interrupted,
            };
            if end {
                let p = pipes.swap_remove(k);
                let rank = p.rank;
                p.flush_rest();
                let _ = ended.send(rank);
            }
        }
    }
}

impl Pipe {
    /// `bytes` arrived: write every complete line (and every piece of
    /// [`MAX_LINE`]), keep the rest.
    fn take(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.partial.push(b);
            if b == b'\n' || self.partial.len() == MAX_LINE {
                self.emit();
            }
        }
    }

    /// The pipe ended: the unterminated rest, if any, with a newline.
    fn flush_rest(mut self) {
        if !self.partial.is_empty() {
            self.emit();
        }
    }

    /// Write the held line (tagged, newline-terminated) in one write and
    /// empty it. A closed stream (fmrun | head) only discards: the pipe
    /// keeps being drained so the rank never blocks on it.
    fn emit(&mut self) {
        let mut line = Vec::with_capacity(self.partial.len() + 16);
        if let Some(t) = &self.tag {
            line.extend_from_slice(t.as_bytes());
        }
        line.append(&mut self.partial);
        if line.last() != Some(&b'\n') {
            line.push(b'\n'); // the end, or a piece of an over-long line
        }
        let _ = match self.to {
            Stream::Out => {
                let mut o = std::io::stdout().lock();
                o.write_all(&line).and_then(|()| o.flush())
            }
            Stream::Err => std::io::stderr().lock().write_all(&line),
        };
    }
}
