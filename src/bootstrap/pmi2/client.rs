//! The PMI-2 protocol over one stream: a PMI-1 style opening (`cmd=init
//! pmi_version=2 pmi_subversion=0\n` → `cmd=response_to_init rc=0 …\n`),
//! then commands and replies framed by a 6-character, left-justified
//! decimal length and made of `key=value;` pairs
//! (`cmd=kvs-put;key=K;value=V;`). Slurm never escapes values, so a `;`
//! (or `=`, or a newline) in a key or value is refused here. PMI-2's key
//! space is one per job, so each rank's keys carry its rank. Every failure
//! is a [`Pmi2Error`] naming the command.

use crate::bootstrap::kvs::KeyValue;
use crate::error::{Pmi2Error, StartError};
use std::io::{Read, Write};
use std::time::Duration;

/// The longest reply accepted (the length field has 6 digits).
const MAX_REPLY: usize = 999_999;

pub(super) fn err(call: &str, why: impl Into<String>) -> Pmi2Error {
    Pmi2Error {
        call: format!("PMI-2 {call}"),
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

    /// Send one command, read its reply (within the stream's read timeout:
    /// the start-up timeout), check `cmd` and `rc`.
    fn call(&mut self, name: &str, body: &str) -> Result<Pairs, Pmi2Error> {
        let reading = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => err(
                name,
                "no reply within the start-up timeout (FASTMSG_TIMEOUT); did every rank start?",
            ),
            _ => err(name, format!("reading the reply: {e}")),
        };
        let frame = format!("{:<6}{body}", body.len());
        self.stream
            .write_all(frame.as_bytes())
            .map_err(|e| err(name, e.to_string()))?;
        let mut len = [0u8; 6];
        self.stream.read_exact(&mut len).map_err(reading)?;
        let n: usize = std::str::from_utf8(&len)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .filter(|&n| n <= MAX_REPLY)
            .ok_or_else(|| err(name, format!("a reply length field of {len:?}")))?;
        let mut buf = vec![0u8; n];
        self.stream.read_exact(&mut buf).map_err(reading)?;
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

    pub(super) fn put_raw(&mut self, key: &str, value: &str) -> Result<(), Pmi2Error> {
        Self::field("kvs-put", "key", key)?;
        Self::field("kvs-put", "value", value)?;
        self.call("kvs-put", &format!("cmd=kvs-put;key={key};value={value};"))
            .map(drop)
    }

    pub(super) fn get_raw(&mut self, key: &str) -> Result<String, Pmi2Error> {
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

    pub(super) fn fence_raw(&mut self) -> Result<(), Pmi2Error> {
        self.call("kvs-fence", "cmd=kvs-fence;").map(drop)
    }

    /// Tell the launcher this rank is done with PMI.
    pub(super) fn finalize(&mut self) -> Result<(), Pmi2Error> {
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
