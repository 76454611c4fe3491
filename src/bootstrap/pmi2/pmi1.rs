//! The PMI-1 wire protocol ("simple PMI") over one stream, as MPICH's
//! Hydra (`mpiexec`) serves it at `PMI_FD`: one command per line, made
//! of space-separated `key=value` fields (`cmd=put kvsname=K key=k
//! value=v`), one reply line each (`cmd=put_result rc=0`). The opening is
//! `cmd=init pmi_version=1 pmi_subversion=1`; then `get_maxes` (the
//! server's key and value length limits), `get_my_kvsname` (the job's key
//! space), puts, `barrier_in` / `barrier_out` (the fence), gets, and
//! `finalize` / `finalize_ack` at exit. Nothing is escaped in PMI-1, so a
//! space, `=` or newline in a key or value is refused here, as is one
//! longer than the server's limits. Keys carry the rank (one key space
//! per job). Every failure is a [`Pmi2Error`] naming the command.

use crate::bootstrap::kvs::KeyValue;
use crate::error::{Pmi2Error, StartError};
use std::io::{Read, Write};
use std::time::Duration;

/// The longest reply line accepted.
const MAX_LINE: usize = 64 * 1024;

type Fields = Vec<(String, String)>;

fn err(call: &str, why: impl Into<String>) -> Pmi2Error {
    Pmi2Error {
        call: format!("PMI-1 {call}"),
        why: why.into(),
    }
}

fn field<'a>(f: &'a Fields, key: &str) -> Option<&'a str> {
    f.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// One PMI-1 connection.
#[derive(Debug)]
pub(crate) struct Client<S> {
    stream: S,
    rank: u32,
    kvsname: String,
    key_max: usize,
    value_max: usize,
}

impl<S: Read + Write> Client<S> {
    /// Open the conversation on `stream` as rank `rank`: `init`,
    /// `get_maxes`, `get_my_kvsname`.
    ///
    /// # Errors
    /// [`Pmi2Error`]: I/O, a refusal (`rc` ≠ 0), or replies that are not
    /// PMI-1.
    pub(crate) fn open(stream: S, rank: u32) -> Result<Self, Pmi2Error> {
        let mut c = Client {
            stream,
            rank,
            kvsname: String::new(),
            key_max: 64,
            value_max: 256,
        };
        let r = c.call(
            "init",
            "cmd=init pmi_version=1 pmi_subversion=1\n",
            "response_to_init",
        )?;
        if field(&r, "pmi_version") != Some("1") {
            return Err(err(
                "init",
                format!("the launcher answered {r:?}, not PMI-1"),
            ));
        }
        let r = c.call("get_maxes", "cmd=get_maxes\n", "maxes")?;
        let num = |k: &str| -> Result<usize, Pmi2Error> {
            field(&r, k)
                .and_then(|v| v.parse().ok())
                .filter(|&n| n > 1)
                .ok_or_else(|| err("get_maxes", format!("no number {k} in the reply {r:?}")))
        };
        // The limits count the terminating NUL of the server's buffers.
        c.key_max = num("keylen_max")? - 1;
        c.value_max = num("vallen_max")? - 1;
        let r = c.call("get_my_kvsname", "cmd=get_my_kvsname\n", "my_kvsname")?;
        c.kvsname = field(&r, "kvsname")
            .filter(|k| !k.is_empty())
            .ok_or_else(|| err("get_my_kvsname", format!("no kvsname in the reply {r:?}")))?
            .to_owned();
        Ok(c)
    }

    /// The job's key space, as the launcher named it.
    pub(crate) fn kvsname(&self) -> &str {
        &self.kvsname
    }

    fn read_line(&mut self, name: &str) -> Result<String, Pmi2Error> {
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        loop {
            self.stream.read_exact(&mut b).map_err(|e| match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => err(
                    name,
                    "no reply within the start-up timeout (FASTMSG_TIMEOUT); did every rank start?",
                ),
                _ => err(name, format!("reading the reply: {e}")),
            })?;
            if b[0] == b'\n' {
                break;
            }
            line.push(b[0]);
            if line.len() > MAX_LINE {
                return Err(err(name, "a reply line of over 64 KiB"));
            }
        }
        String::from_utf8(line).map_err(|_| err(name, "a reply that is not UTF-8"))
    }

    /// Send `line`, read one reply, check its `cmd` is `want` and its `rc`
    /// (when present) is 0.
    fn call(&mut self, name: &str, line: &str, want: &str) -> Result<Fields, Pmi2Error> {
        self.stream
            .write_all(line.as_bytes())
            .map_err(|e| err(name, e.to_string()))?;
        let text = self.read_line(name)?;
        let fields: Fields = text
            .split_whitespace()
            .map(|kv| match kv.split_once('=') {
                Some((k, v)) => (k.to_owned(), v.to_owned()),
                None => (kv.to_owned(), String::new()),
            })
            .collect();
        if field(&fields, "cmd") != Some(want) {
            return Err(err(
                name,
                format!("the reply {text:?} where cmd={want} belongs"),
            ));
        }
        match field(&fields, "rc") {
            None | Some("0") => Ok(fields),
            Some(rc) => Err(err(
                name,
                format!(
                    "refused (rc {rc}{})",
                    field(&fields, "msg")
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                ),
            )),
        }
    }

    fn check(name: &str, what: &str, s: &str, max: usize) -> Result<(), Pmi2Error> {
        if s.is_empty() || s.contains([' ', '=', '\n', '\t', '\r']) || s.len() > max {
            return Err(err(
                name,
                format!("the {what} {s:?} cannot travel in PMI-1 (at most {max} bytes, no space or '=')"),
            ));
        }
        Ok(())
    }

    pub(super) fn put_raw(&mut self, key: &str, value: &str) -> Result<(), Pmi2Error> {
        Self::check("put", "key", key, self.key_max)?;
        Self::check("put", "value", value, self.value_max)?;
        let line = format!("cmd=put kvsname={} key={key} value={value}\n", self.kvsname);
        self.call("put", &line, "put_result").map(drop)
    }

    pub(super) fn get_raw(&mut self, key: &str) -> Result<String, Pmi2Error> {
        Self::check("get", "key", key, self.key_max)?;
        let line = format!("cmd=get kvsname={} key={key}\n", self.kvsname);
        let r = self.call("get", &line, "get_result")?;
        field(&r, "value")
            .map(str::to_owned)
            .ok_or_else(|| err("get", format!("no value under {key}")))
    }

    pub(super) fn barrier(&mut self) -> Result<(), Pmi2Error> {
        self.call("barrier_in", "cmd=barrier_in\n", "barrier_out")
            .map(drop)
    }

    /// Tell the launcher this rank is done with PMI.
    pub(super) fn finalize(&mut self) -> Result<(), Pmi2Error> {
        self.call("finalize", "cmd=finalize\n", "finalize_ack")
            .map(drop)
    }
}

impl<S: Read + Write> KeyValue for Client<S> {
    fn put(&mut self, key: &str, value: &str) -> Result<(), StartError> {
        let k = format!("{key}.{}", self.rank);
        Ok(self.put_raw(&k, value)?)
    }

    fn fence(&mut self, _timeout: Duration) -> Result<(), StartError> {
        Ok(self.barrier()?)
    }

    fn get(&mut self, rank: u32, key: &str) -> Result<String, StartError> {
        Ok(self.get_raw(&format!("{key}.{rank}"))?)
    }
}
