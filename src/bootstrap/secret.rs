//! The job secret, kept off every command line.
//!
//! Any local user can read any process's arguments (`ps`, `/proc/PID/
//! cmdline`), but only the owner (and root) can read its environment
//! (`/proc/PID/environ` is mode 0400). So the secret comes from
//! `FASTMSG_SECRET` in the environment, or from a file named by
//! `FASTMSG_SECRET_FILE` (`fmrun --secret-file`) that only its owner can
//! read: owned by the effective user, no group or other permission bits.
//! `fmrun` reads the file itself and hands the secret to its ranks by
//! environment.

use crate::error::ConfigError;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Longest secret file accepted, bytes.
const MAX_SECRET_FILE: u64 = 4096;

/// Read the secret from `path`: a regular file owned by the effective user
/// with no group or other permission bits, holding a non-empty secret (one
/// trailing newline and surrounding white space are dropped).
///
/// # Errors
/// [`ConfigError::SecretFile`] naming the file and what was wrong (its
/// owner and mode when they are the problem).
pub fn read_secret_file(path: &Path) -> Result<String, ConfigError> {
    let bad = |why: String| ConfigError::SecretFile {
        path: path.to_path_buf(),
        why,
    };
    let mut file = std::fs::File::open(path).map_err(|e| bad(format!("cannot open it: {e}")))?;
    let meta = file
        .metadata()
        .map_err(|e| bad(format!("cannot stat it: {e}")))?;
    if !meta.is_file() {
        return Err(bad("it is not a regular file".into()));
    }
    // SAFETY: geteuid cannot fail and touches no memory.
    #[allow(unsafe_code)]
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(bad(format!(
            "it is owned by uid {}, not by this user (uid {me}); the secret must be your own file",
            meta.uid()
        )));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(bad(format!(
            "its mode is {mode:04o}: group or other users may read or change it; run `chmod 600 {}`",
            path.display()
        )));
    }
    if meta.len() > MAX_SECRET_FILE {
        return Err(bad(format!(
            "it is {} bytes; a secret file holds at most {MAX_SECRET_FILE}",
            meta.len()
        )));
    }
    let mut s = String::new();
    file.by_ref()
        .take(MAX_SECRET_FILE)
        .read_to_string(&mut s)
        .map_err(|e| bad(format!("cannot read it as UTF-8 text: {e}")))?;
    let s = s.trim();
    if s.is_empty() {
        return Err(bad("it is empty".into()));
    }
    Ok(s.to_owned())
}

/// The secret from the environment: `FASTMSG_SECRET`, else the file named
/// by `FASTMSG_SECRET_FILE` (see [`read_secret_file`]); `None` if neither
/// is set.
///
/// # Errors
/// [`ConfigError::SecretFile`] for an unusable file;
/// [`ConfigError::Invalid`] if both variables are set (which one is meant
/// would be a guess).
pub fn secret_from_env() -> Result<Option<String>, ConfigError> {
    let var = |n| {
        crate::settings::var(n)
            .ok()
            .filter(|v: &String| !v.is_empty())
    };
    match (var("FASTMSG_SECRET"), var("FASTMSG_SECRET_FILE")) {
        (Some(_), Some(_)) => Err(ConfigError::Invalid {
            what: "FASTMSG_SECRET / FASTMSG_SECRET_FILE",
            why: "both are set; set one".into(),
        }),
        (Some(s), None) => Ok(Some(s)),
        (None, Some(f)) => read_secret_file(Path::new(&f)).map(Some),
        (None, None) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn file(tag: &str, mode: u32, body: &str) -> std::path::PathBuf {
        let p =
            std::env::temp_dir().join(format!("fastmsg-secret-test-{tag}-{}", std::process::id()));
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    #[test]
    fn a_private_file_gives_its_trimmed_contents() {
        let p = file("ok", 0o600, "s3cret\n");
        assert_eq!(read_secret_file(&p).unwrap(), "s3cret");
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn a_readable_file_is_refused_with_its_mode() {
        for mode in [0o640, 0o604, 0o660] {
            let p = file(&format!("mode{mode:o}"), mode, "s3cret");
            let e = read_secret_file(&p).unwrap_err();
            assert!(
                e.to_string().contains(&format!("{mode:04o}")),
                "mode {mode:o}: {e}"
            );
            std::fs::remove_file(p).unwrap();
        }
    }

    #[test]
    fn empty_missing_and_directory_are_refused() {
        let p = file("empty", 0o600, "\n");
        assert!(read_secret_file(&p)
            .unwrap_err()
            .to_string()
            .contains("empty"));
        std::fs::remove_file(&p).unwrap();
        assert!(read_secret_file(&p)
            .unwrap_err()
            .to_string()
            .contains("cannot open"));
        assert!(read_secret_file(Path::new("/"))
            .unwrap_err()
            .to_string()
            .contains("not a regular file"));
    }
}
