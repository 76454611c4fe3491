//! The job secret fmrun hands its ranks (by environment only): from
//! `--secret-file`, `FASTMSG_SECRET`, `FASTMSG_SECRET_FILE`, or fresh.

use fastmsg::internal::launcher::{read_secret_file, secret_from_env};
use std::path::Path;

/// A fresh job secret: 128 random bits, hex.
fn fresh_secret() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random source");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The secret, or a message for the user. `network`: the job meets over
/// the network across hosts, so every host must bring the same secret.
pub fn resolve(flag: Option<&str>, file: Option<&str>, network: bool) -> Result<String, String> {
    if flag.is_some() {
        return Err("--secret puts the secret on the command line, where every local user can read it (ps, /proc/PID/cmdline); use --secret-file FILE (owned by you, chmod 600) or export FASTMSG_SECRET".into());
    }
    if let Some(f) = file {
        return read_secret_file(Path::new(f)).map_err(|e| e.to_string());
    }
    match secret_from_env().map_err(|e| e.to_string())? {
        Some(s) => Ok(s),
        None if network => Err(
            "a network job needs --secret-file FILE (or FASTMSG_SECRET), the same on every host"
                .into(),
        ),
        None => Ok(fresh_secret()),
    }
}
