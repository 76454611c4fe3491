//! PMI-2 over the launcher's socket (`PMI_FD`), in Rust: what `srun
//! --mpi=pmi2` (and MPICH's hydra) serve. Used only for the wire-up of a
//! job that needs the network (`kvs`), when no `FASTMSG_ROOT` is given:
//! rank, size and local ranks come from the launcher's environment as
//! before (`env`), so a job that stays on one host never touches the
//! socket. The process then owns the PMI-2 connection: do not combine with
//! an MPI library that also initialises PMI-2 in the same process.
//!
//! Wire format: a PMI-1 style opening (`cmd=init pmi_version=2
//! pmi_subversion=0\n` → `cmd=response_to_init rc=0 …\n`), then commands
//! and replies framed by a 6-character, left-justified decimal length and
//! made of `key=value;` pairs (`cmd=kvs-put;key=K;value=V;`). Values are
//! never escaped by Slurm, so a `;` in a key or value is refused here.
//! PMI-2's key space is one per job, so each rank's keys carry its rank.

use super::kvs::KeyValue;
use crate::error::{Pmi2Error, StartError};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Mutex;
use std::time::Duration;

/// How long a reply may take (a fence is given the job's timeout).
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest reply accepted (the length field has 6 digits).
const MAX_REPLY: usize = 999_999;

fn err(call: &str, why: impl Into<String>) -> Pmi2Error {
    Pmi2Error {
        call: call.into(),
        why: why.into(),
    }
}

/// One PMI-2 connection.
#[derive(Debug)]
pub(crate) struct Client<S> {
    stream: S,
    rank: u32,
    size: u32,
    jobid: String,
}

type Pairs = Vec<(String, String)>;

fn value<'a>(pairs: &'a Pairs, key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

impl<S: Read + Write> Client<S> {
    /// Open the conversation on `stream` as rank `rank` of job `jobid`
    /// (`PMI_RANK`, `PMI_JOBID`): the version handshake, then `fullinit`.
    ///
    /// # Errors
    /// [`Pmi2Error`]: I/O, a refusal (`rc` ≠ 0), or a reply that is not
    /// PMI-2.
    pub(crate) fn open(mut stream: S, rank: u32, jobid: &str) -> Result<Self, Pmi2Error> {
        stream
            .write_all(b"cmd=init pmi_version=2 pmi_subversion=0\n")
            .map_err(|e| err("init", e.to_string()))?;
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while b[0] != b'\n' {
            stream
                .read_exact(&mut b)
                .map_err(|e| err("init", format!("reading the reply: {e}")))?;
            line.push(b[0]);
            if line.len() > 1024 {
                return Err(err("init", "a reply line of over 1 KiB"));
            }
        }
        let text = String::from_utf8_lossy(&line);
        let pairs: Pairs = text
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        if value(&pairs, "cmd") != Some("response_to_init")
            || value(&pairs, "rc") != Some("0")
            || value(&pairs, "pmi_version") != Some("2")
        {
            return Err(err(
                "init",
                format!("the launcher answered {:?}, not PMI-2", text.trim()),
            ));
        }
        let mut c = Client {
            stream,
            rank,
            size: 0,
            jobid: jobid.to_owned(),
        };
        let reply = c.call(
            "fullinit",
            &format!("cmd=fullinit;pmijobid={jobid};pmirank={rank};threaded=FALSE;"),
        )?;
        let num = |k: &str| -> Result<u32, Pmi2Error> {
            value(&reply, k)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| err("fullinit", format!("no number {k} in the reply {reply:?}")))
        };
        let (got, size) = (num("rank")?, num("size")?);
        if got != rank || size == 0 || rank >= size {
            return Err(err(
                "fullinit",
                format!("we are rank {rank}, the launcher says rank {got} of {size}"),
            ));
        }
        c.size = size;
        Ok(c)
    }

    /// Ranks in the job, as the launcher said.
    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// Send one command, read its reply, check `cmd` and `rc`.
    fn call(&mut self, name: &str, body: &str) -> Result<Pairs, Pmi2Error> {
        let frame = format!("{:<6}{body}", body.len());
        self.stream
            .write_all(frame.as_bytes())
            .map_err(|e| err(name, e.to_string()))?;
        let mut len = [0u8; 6];
        self.stream
            .read_exact(&mut len)
            .map_err(|e| err(name, format!("reading the reply: {e}")))?;
        let n: usize = std::str::from_utf8(&len)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .filter(|&n| n <= MAX_REPLY)
            .ok_or_else(|| err(name, format!("a reply length field of {len:?}")))?;
        let mut buf = vec![0u8; n];
        self.stream
            .read_exact(&mut buf)
            .map_err(|e| err(name, format!("reading the reply: {e}")))?;
        let text = String::from_utf8(buf).map_err(|_| err(name, "a reply that is not UTF-8"))?;
        let pairs: Pairs = text
            .split(';')
            .filter(|s| !s.is_empty())
            .map(|kv| {
                kv.split_once('=')
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .ok_or_else(|| err(name, format!("a reply field {kv:?} without '='")))
            })
            .collect::<Result<_, _>>()?;
        let want = format!("{name}-response");
        if value(&pairs, "cmd") != Some(want.as_str()) {
            return Err(err(
                name,
                format!("the reply {text:?} where {want} belongs"),
            ));
        }
        match value(&pairs, "rc") {
            Some("0") => Ok(pairs),
            rc => Err(err(
                name,
                format!(
                    "refused (rc {}{})",
                    rc.unwrap_or("missing"),
                    value(&pairs, "errmsg")
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                ),
            )),
        }
    }

    fn field(name: &str, what: &str, s: &str) -> Result<(), Pmi2Error> {
        if s.contains([';', '=', '\n']) || s.is_empty() {
            return Err(err(
                name,
                format!("the {what} {s:?} cannot travel in PMI-2"),
            ));
        }
        Ok(())
    }

    fn put_raw(&mut self, key: &str, value: &str) -> Result<(), Pmi2Error> {
        Self::field("kvs-put", "key", key)?;
        Self::field("kvs-put", "value", value)?;
        self.call("kvs-put", &format!("cmd=kvs-put;key={key};value={value};"))
            .map(drop)
    }

    fn get_raw(&mut self, key: &str) -> Result<String, Pmi2Error> {
        Self::field("kvs-get", "key", key)?;
        let jobid = self.jobid.clone();
        let r = self.call(
            "kvs-get",
            &format!("cmd=kvs-get;jobid={jobid};srcid=-1;key={key};"),
        )?;
        match (value(&r, "found"), value(&r, "value")) {
            (Some(f), Some(v)) if f.eq_ignore_ascii_case("true") => Ok(v.to_owned()),
            _ => Err(err("kvs-get", format!("no value under {key}"))),
        }
    }

    fn fence_raw(&mut self) -> Result<(), Pmi2Error> {
        self.call("kvs-fence", "cmd=kvs-fence;").map(drop)
    }

    /// Tell the launcher this rank is done with PMI.
    fn finalize(&mut self) -> Result<(), Pmi2Error> {
        self.call("finalize", "cmd=finalize;").map(drop)
    }
}

impl<S: Read + Write> KeyValue for Client<S> {
    fn put(&mut self, key: &str, value: &str) -> Result<(), StartError> {
        let k = format!("{key}.{}", self.rank);
        Ok(self.put_raw(&k, value)?)
    }

    fn fence(&mut self, _timeout: Duration) -> Result<(), StartError> {
        Ok(self.fence_raw()?)
    }

    fn get(&mut self, rank: u32, key: &str) -> Result<String, StartError> {
        Ok(self.get_raw(&format!("{key}.{rank}"))?)
    }
}

/// The launcher's connection, opened once.
static CONNECTION: Mutex<Option<Client<UnixStream>>> = Mutex::new(None);

/// Whether a PMI-2 (or PMI-1) launcher gave us a socket.
pub(crate) fn available() -> bool {
    std::env::var_os("PMI_FD").is_some()
}

extern "C" fn finalize_at_exit() {
    let mut g = CONNECTION.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = g.as_mut() {
        let _ = c.finalize();
    }
}

/// Run the wire-up over the launcher's PMI-2 socket (opened on first use,
/// `finalize` sent at exit).
///
/// # Errors
/// [`StartError::Pmi2`]: no usable `PMI_FD`, a refusal, a timeout, or a
/// launcher that does not speak PMI-2; the wire-up's own errors.
pub(crate) fn wire_up(
    config: &crate::endpoint::Config,
    job: &super::JobInfo,
) -> Result<super::kvs::WireUp, StartError> {
    let mut g = CONNECTION.lock().unwrap_or_else(|p| p.into_inner());
    if g.is_none() {
        let fd: std::os::fd::RawFd = std::env::var("PMI_FD")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .filter(|&fd| fd >= 0)
            .ok_or_else(|| err("init", "PMI_FD is not a file descriptor number"))?;
        // Refuse a descriptor that is not an open socket rather than take
        // ownership of something else.
        let meta = std::fs::metadata(format!("/proc/self/fd/{fd}"));
        let is_socket = meta.is_ok_and(|m| {
            use std::os::unix::fs::FileTypeExt;
            m.file_type().is_socket()
        });
        if !is_socket {
            return Err(err("init", format!("PMI_FD={fd} is not an open socket")).into());
        }
        #[allow(unsafe_code)]
        // SAFETY: `fd` is an open socket (checked above) that the launcher
        // handed this process for PMI; nothing else in this process uses
        // it (it is taken once, under this lock, and kept for the life of
        // the process).
        let stream = unsafe { <UnixStream as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        stream
            .set_read_timeout(Some(REPLY_TIMEOUT.max(config.timeout)))
            .map_err(|e| err("init", e.to_string()))?;
        let jobid = std::env::var("PMI_JOBID").unwrap_or_else(|_| "0".into());
        let c = Client::open(stream, job.rank.0, &jobid)?;
        if c.size() != job.size {
            return Err(err(
                "fullinit",
                format!(
                    "the launcher says {} ranks, the environment {}",
                    c.size(),
                    job.size
                ),
            )
            .into());
        }
        *g = Some(c);
        #[allow(unsafe_code)]
        // SAFETY: a plain extern "C" fn with no captured state.
        if unsafe { libc::atexit(finalize_at_exit) } != 0 {
            eprintln!("fastmsg: could not register the PMI-2 finalize at exit");
        }
    }
    let c = g.as_mut().expect("opened above");
    super::kvs::wire_up(c, config, job)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::io::BufRead;

    /// A PMI-2 server for one rank of a `size`-rank job, answering like
    /// Slurm's mpi/pmi2 plugin; `fence_rc` is what the fence returns.
    fn server(mut s: UnixStream, size: u32, fence_rc: u32) {
        let mut r = std::io::BufReader::new(s.try_clone().unwrap());
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert_eq!(line, "cmd=init pmi_version=2 pmi_subversion=0\n");
        s.write_all(b"cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n")
            .unwrap();
        let mut kvs = HashMap::new();
        loop {
            let mut len = [0u8; 6];
            if r.read_exact(&mut len).is_err() {
                return;
            }
            let n: usize = std::str::from_utf8(&len).unwrap().trim().parse().unwrap();
            let mut body = vec![0u8; n];
            r.read_exact(&mut body).unwrap();
            let body = String::from_utf8(body).unwrap();
            let f: HashMap<&str, &str> = body
                .split(';')
                .filter(|x| !x.is_empty())
                .map(|kv| kv.split_once('=').unwrap())
                .collect();
            let reply = match f["cmd"] {
                "fullinit" => format!(
                    "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank={};size={size};appnum=-1;debugged=FALSE;pmiverbose=FALSE;",
                    f["pmirank"]
                ),
                "kvs-put" => {
                    kvs.insert(f["key"].to_owned(), f["value"].to_owned());
                    "cmd=kvs-put-response;rc=0;".into()
                }
                "kvs-fence" => format!("cmd=kvs-fence-response;rc={fence_rc};"),
                "kvs-get" => match kvs.get(f["key"]) {
                    Some(v) => format!("cmd=kvs-get-response;rc=0;found=TRUE;value={v};"),
                    None => "cmd=kvs-get-response;rc=0;found=FALSE;".into(),
                },
                "finalize" => "cmd=finalize-response;rc=0;".into(),
                c => panic!("unexpected command {c}"),
            };
            s.write_all(format!("{:<6}{reply}", reply.len()).as_bytes())
                .unwrap();
        }
    }

    fn pair(size: u32, fence_rc: u32) -> (UnixStream, std::thread::JoinHandle<()>) {
        let (a, b) = UnixStream::pair().unwrap();
        a.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        (a, std::thread::spawn(move || server(b, size, fence_rc)))
    }

    #[test]
    fn put_fence_get_round_trip() {
        let (a, t) = pair(1, 0);
        let mut c = Client::open(a, 0, "7").unwrap();
        assert_eq!(c.size(), 1);
        KeyValue::put(&mut c, "fastmsg.1.addr", "10.0.0.1:4000").unwrap();
        KeyValue::fence(&mut c, Duration::from_secs(1)).unwrap();
        assert_eq!(
            KeyValue::get(&mut c, 0, "fastmsg.1.addr").unwrap(),
            "10.0.0.1:4000"
        );
        // Another rank's key that nobody put: a typed error naming it.
        let e = KeyValue::get(&mut c, 3, "fastmsg.1.addr").unwrap_err();
        assert!(e.to_string().contains("fastmsg.1.addr.3"), "{e}");
        c.finalize().unwrap();
        drop(c);
        t.join().unwrap();
    }

    #[test]
    fn a_refused_fence_is_a_typed_error_with_the_code() {
        let (a, t) = pair(2, 14);
        let mut c = Client::open(a, 1, "7").unwrap();
        let e = c.fence_raw().unwrap_err();
        assert_eq!(e.call, "kvs-fence");
        assert!(e.why.contains("rc 14"), "{e}");
        drop(c);
        t.join().unwrap();
    }

    #[test]
    fn a_rank_the_launcher_disowns_is_refused() {
        let (a, t) = pair(2, 0);
        // The server echoes our rank; a size of 2 with rank 5 is wrong.
        let e = Client::open(a, 5, "7").unwrap_err();
        assert_eq!(e.call, "fullinit");
        t.join().unwrap();
    }

    #[test]
    fn a_value_with_a_separator_is_refused_before_sending() {
        let (a, t) = pair(1, 0);
        let mut c = Client::open(a, 0, "7").unwrap();
        let e = c.put_raw("k", "a;b").unwrap_err();
        assert!(e.why.contains("cannot travel"), "{e}");
        drop(c);
        t.join().unwrap();
    }

    #[test]
    fn a_launcher_that_is_not_pmi2_is_named() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            let _ = b.read(&mut buf);
            b.write_all(b"garbage\n").unwrap();
        });
        let e = Client::open(a, 0, "7").unwrap_err();
        assert_eq!(e.call, "init");
        assert!(e.why.contains("garbage"), "{e}");
        t.join().unwrap();
    }

    #[test]
    fn a_launcher_that_hangs_up_is_an_error_not_a_hang() {
        let (a, b) = UnixStream::pair().unwrap();
        drop(b);
        assert!(Client::open(a, 0, "7").is_err());
    }
}
