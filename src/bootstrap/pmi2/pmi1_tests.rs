//! The PMI-1 client against a scripted server that answers like MPICH's
//! Hydra proxy (`pmip_pmi_v1.c`).

use super::pmi1::Client;
use crate::bootstrap::kvs::KeyValue;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// How the scripted server misbehaves, if it does.
#[derive(Clone, Copy, PartialEq)]
enum Script {
    Hydra,
    /// Answers the opening as a PMI-2 server would.
    Pmi2Only,
    /// Refuses the barrier.
    BarrierRefused,
}

fn server(s: UnixStream, script: Script) {
    let mut r = std::io::BufReader::new(s.try_clone().unwrap());
    let mut w = s;
    let mut kvs = HashMap::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let f: HashMap<&str, &str> = line
            .split_whitespace()
            .map(|kv| kv.split_once('=').unwrap())
            .collect();
        let reply = match f["cmd"] {
            "init" if script == Script::Pmi2Only => {
                "cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n".to_string()
            }
            "init" => {
                assert_eq!(f["pmi_version"], "1");
                "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n".into()
            }
            "get_maxes" => "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n".into(),
            "get_my_kvsname" => "cmd=my_kvsname kvsname=kvs_4242_0\n".into(),
            "put" => {
                assert_eq!(f["kvsname"], "kvs_4242_0");
                kvs.insert(f["key"].to_owned(), f["value"].to_owned());
                "cmd=put_result rc=0 msg=success\n".into()
            }
            "barrier_in" if script == Script::BarrierRefused => {
                "cmd=barrier_out rc=-1 msg=a_rank_died\n".into()
            }
            "barrier_in" => "cmd=barrier_out\n".into(),
            "get" => match kvs.get(f["key"]) {
                Some(v) => format!("cmd=get_result rc=0 msg=success value={v}\n"),
                None => "cmd=get_result rc=-1 msg=key_not_found\n".into(),
            },
            "finalize" => "cmd=finalize_ack\n".into(),
            c => panic!("unexpected command {c}"),
        };
        w.write_all(reply.as_bytes()).unwrap();
    }
}

fn pair(script: Script) -> (UnixStream, std::thread::JoinHandle<()>) {
    let (a, b) = UnixStream::pair().unwrap();
    a.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    (a, std::thread::spawn(move || server(b, script)))
}

#[test]
fn put_barrier_get_round_trip() {
    let (a, t) = pair(Script::Hydra);
    let mut c = Client::open(a, 3).unwrap();
    assert_eq!(c.kvsname(), "kvs_4242_0");
    KeyValue::put(&mut c, "fastmsg.1.addr", "10.0.0.1:4000").unwrap();
    KeyValue::fence(&mut c, Duration::from_secs(1)).unwrap();
    assert_eq!(
        KeyValue::get(&mut c, 3, "fastmsg.1.addr").unwrap(),
        "10.0.0.1:4000"
    );
    let e = KeyValue::get(&mut c, 2, "fastmsg.1.addr").unwrap_err();
    assert!(e.to_string().contains("key_not_found"), "{e}");
    c.finalize().unwrap();
    drop(c);
    t.join().unwrap();
}

#[test]
fn values_that_cannot_travel_are_refused() {
    let (a, t) = pair(Script::Hydra);
    let mut c = Client::open(a, 0).unwrap();
    for bad in ["a b", "a=b", "", &"x".repeat(1024)] {
        let e = KeyValue::put(&mut c, "k", bad).unwrap_err();
        assert!(e.to_string().contains("cannot travel in PMI-1"), "{e}");
    }
    let e = KeyValue::put(&mut c, &"k".repeat(64), "v").unwrap_err();
    assert!(e.to_string().contains("key"), "{e}");
    drop(c);
    t.join().unwrap();
}

#[test]
fn a_pmi2_answer_is_named() {
    let (a, t) = pair(Script::Pmi2Only);
    let e = Client::open(a, 0).unwrap_err();
    assert!(e.to_string().contains("not PMI-1"), "{e}");
    t.join().unwrap();
}

#[test]
fn a_refused_barrier_is_an_error_with_the_message() {
    let (a, t) = pair(Script::BarrierRefused);
    let mut c = Client::open(a, 0).unwrap();
    let e = KeyValue::fence(&mut c, Duration::from_secs(1)).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("PMI-1 barrier_in") && text.contains("a_rank_died"),
        "{text}"
    );
    drop(c);
    t.join().unwrap();
}
