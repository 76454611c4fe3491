//! `FASTMSG_NET=verbs` on a host without RDMA: `start` fails at once with a
//! typed error — `VerbsError::NoDevice` in a build with the `verbs`
//! feature (these machines have no RDMA device and no InfiniBand in the
//! kernel: `ibv_get_device_list` fails), `VerbsError::NotBuilt` without it.
//! Nothing is waited for: the error comes before the rendezvous.

use fastmsg::error::{StartError, VerbsError};
use fastmsg::threads;
use fastmsg::{Error, NetMode};
use std::time::{Duration, Instant};

#[test]
fn verbs_without_a_device_is_a_typed_start_error() {
    let t0 = Instant::now();
    let r = threads::run(
        2,
        |c| {
            c.net.mode = NetMode::named("verbs").expect("a provider of every build");
            c.net.secret = Some("s".into());
            c.timeout = Duration::from_secs(20);
        },
        |b| b.start().map(drop).map_err(Error::from),
    );
    let e = r.expect_err("no RDMA device here").error;
    let Error::Start(StartError::Verbs(v)) = &e else {
        panic!("expected a verbs start error, got {e}");
    };
    if cfg!(feature = "verbs") {
        assert!(matches!(v, VerbsError::NoDevice { .. }), "{v}");
        assert!(e.to_string().contains("no RDMA device"), "{e}");
    } else {
        assert_eq!(*v, VerbsError::NotBuilt);
    }
    assert!(e.to_string().contains("FASTMSG_NET=tcp") || *v == VerbsError::NotBuilt);
    assert!(t0.elapsed() < Duration::from_secs(10), "failed at once");
}
