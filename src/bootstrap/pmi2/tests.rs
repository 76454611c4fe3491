//! The PMI-2 client against a scripted server that answers like Slurm's
//! mpi/pmi2 plugin.

use super::client::Client;
use crate::bootstrap::kvs::KeyValue;
use std::collections::HashMap;
use std::io::BufRead;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// A PMI-2 server for one rank of a `size`-rank job, answering like
/// Slurm's mpi/pmi2 plugin; `fence_rc` is what the fence returns
/// (`SILENT`: the fence never completes, as when a rank never comes).
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
            "kvs-fence" if fence_rc == SILENT => {
                // Wait for the client to hang up.
                let mut rest = Vec::new();
                let _ = r.read_to_end(&mut rest);
                return;
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

const SILENT: u32 = u32::MAX;

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
    assert_eq!(e.call, "PMI-2 kvs-fence");
    assert!(e.why.contains("rc 14"), "{e}");
    drop(c);
    t.join().unwrap();
}

#[test]
fn a_rank_the_launcher_disowns_is_refused() {
    let (a, t) = pair(2, 0);
    // The server echoes our rank; a size of 2 with rank 5 is wrong.
    let e = Client::open(a, 5, "7").unwrap_err();
    assert_eq!(e.call, "PMI-2 fullinit");
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
    assert_eq!(e.call, "PMI-2 init");
    assert!(e.why.contains("garbage"), "{e}");
    t.join().unwrap();
}

#[test]
fn a_launcher_that_hangs_up_is_an_error_not_a_hang() {
    let (a, b) = UnixStream::pair().unwrap();
    drop(b);
    assert!(Client::open(a, 0, "7").is_err());
}

#[test]
fn a_fence_that_never_completes_is_a_typed_timeout() {
    let (a, t) = pair(2, SILENT);
    a.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut c = Client::open(a, 0, "7").unwrap();
    let e = c.fence_raw().unwrap_err();
    assert_eq!(e.call, "PMI-2 kvs-fence");
    assert!(e.why.contains("start-up timeout"), "{e}");
    drop(c);
    t.join().unwrap();
}
