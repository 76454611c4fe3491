//! `FASTMSG_NET=ofi` where the provider cannot be had: `start` fails at
//! once with a typed error — `OfiError::NoProvider` naming the provider
//! when `FI_PROVIDER` names none libfabric has (in a build with the `ofi`
//! feature), `OfiError::NotBuilt` without the feature. Nothing is waited
//! for: the error comes before the rendezvous.
//!
//! One test in this file: it sets `FI_PROVIDER` for the whole process.

use fastmsg::error::{OfiError, StartError};
use fastmsg::threads;
use fastmsg::{Error, NetMode};
use std::time::{Duration, Instant};

#[test]
fn a_provider_that_does_not_exist_is_a_typed_start_error() {
    std::env::set_var("FI_PROVIDER", "no_such_provider");
    let t0 = Instant::now();
    let r = threads::run(
        2,
        |c| {
            c.net.mode = NetMode::named("ofi").expect("a provider of every build");
            c.net.secret = Some("s".into());
            c.timeout = Duration::from_secs(20);
        },
        |b| b.start().map(drop).map_err(Error::from),
    );
    let e = r.expect_err("no such provider").error;
    let Error::Start(StartError::Ofi(o)) = &e else {
        panic!("expected a libfabric start error, got {e}");
    };
    if cfg!(feature = "ofi") {
        let OfiError::NoProvider { provider, .. } = o else {
            panic!("expected NoProvider, got {o}");
        };
        assert_eq!(provider, "no_such_provider");
        assert!(e.to_string().contains("FI_PROVIDER"), "{e}");
    } else {
        assert_eq!(*o, OfiError::NotBuilt);
    }
    assert!(t0.elapsed() < Duration::from_secs(10), "failed at once");
}
