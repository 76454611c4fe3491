//! A safe face on the PMIx client calls the wire-up needs: connect to the
//! launcher's PMIx server once per process ([`session`]), read job-level
//! and per-rank keys, publish strings, and fence. Every failure is a
//! [`PmixError`] naming the call, the key and PMIx's status.
//!
//! The library is loaded at run time (`ffi::lib`), on the first use.
//!
//! The session is disconnected (`PMIx_Finalize`) when the process exits:
//! the server (mpirun, slurmstepd) counts a rank that connected and left
//! without finalizing as having failed.

#![allow(unsafe_code)]

use super::ffi;
use crate::error::PmixError;
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::OnceLock;
use std::time::Duration;

/// This process's connection to the PMIx server.
pub(crate) struct Session {
    me: ffi::pmix_proc_t,
    lib: &'static ffi::Lib,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("namespace", &self.namespace())
            .field("rank", &self.me.rank)
            .finish()
    }
}

/// A value read from PMIx.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    /// `PMIX_STRING`.
    Str(String),
    /// Any unsigned or non-negative integer type.
    Num(u64),
}

fn status_text(lib: &ffi::Lib, status: ffi::pmix_status_t) -> String {
    // SAFETY: PMIx_Error_string returns a pointer to a static,
    // NUL-terminated string (or NULL) for any status value.
    let p = unsafe { (lib.error_string)(status) };
    if p.is_null() {
        return "no text".into();
    }
    // SAFETY: non-NULL, NUL-terminated and static (above).
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn check(
    lib: &ffi::Lib,
    call: impl FnOnce() -> String,
    status: ffi::pmix_status_t,
) -> Result<(), PmixError> {
    if status == ffi::PMIX_SUCCESS {
        Ok(())
    } else {
        Err(PmixError::Call {
            call: call(),
            status,
            text: status_text(lib, status),
        })
    }
}

fn key_name(key: &CStr) -> String {
    key.to_string_lossy().into_owned()
}

extern "C" fn finalize_at_exit() {
    let Ok(lib) = ffi::lib() else { return };
    // SAFETY: registered only after PMIx_Init succeeded; runs once, at
    // exit, after every caller of the session is done. NULL/0: no info.
    let _ = unsafe { (lib.finalize)(std::ptr::null(), 0) };
}

/// The version string of the PMIx library (`PMIx_Get_version`), loading
/// it if needed.
///
/// # Errors
/// [`PmixError::NoLibrary`] or [`PmixError::Symbol`] if it cannot be
/// loaded.
pub(crate) fn version() -> Result<String, PmixError> {
    let lib = ffi::lib()?;
    // SAFETY: PMIx_Get_version returns a static NUL-terminated string
    // (or NULL), callable before PMIx_Init.
    let p = unsafe { (lib.get_version)() };
    if p.is_null() {
        return Ok("unknown".into());
    }
    // SAFETY: non-NULL, NUL-terminated and static (above).
    Ok(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// The process's PMIx session, connected on first use.
///
/// # Errors
/// [`PmixError::NoLibrary`] if the library cannot be loaded;
/// [`PmixError::Call`] if `PMIx_Init` fails (no server, or one that
/// refuses us); the same error on every later call.
pub(crate) fn session() -> Result<&'static Session, PmixError> {
    static SESSION: OnceLock<Result<Session, PmixError>> = OnceLock::new();
    SESSION
        .get_or_init(|| {
            let lib = ffi::lib()?;
            let mut me = ffi::pmix_proc_t::default();
            // SAFETY: `me` is a valid pmix_proc_t for PMIx_Init to fill;
            // NULL/0: no info. PMIx_Init is thread-safe and may be called
            // more than once (OnceLock calls it once anyway).
            let status = unsafe { (lib.init)(&mut me, std::ptr::null_mut(), 0) };
            check(lib, || "PMIx_Init".into(), status)?;
            // SAFETY: `finalize_at_exit` is a plain extern "C" fn with no
            // captured state.
            if unsafe { libc::atexit(finalize_at_exit) } != 0 {
                eprintln!("fastmsg: could not register PMIx_Finalize at exit");
            }
            Ok(Session { me, lib })
        })
        .as_ref()
        .map_err(Clone::clone)
}

impl Session {
    /// This process's rank in its namespace.
    pub(crate) fn rank(&self) -> u32 {
        self.me.rank
    }

    /// The namespace (job) name.
    pub(crate) fn namespace(&self) -> String {
        // SAFETY: PMIx_Init NUL-terminates the namespace within its
        // PMIX_MAX_NSLEN + 1 bytes.
        unsafe { CStr::from_ptr(self.me.nspace.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    fn proc_of(&self, rank: ffi::pmix_rank_t) -> ffi::pmix_proc_t {
        ffi::pmix_proc_t {
            nspace: self.me.nspace,
            rank,
        }
    }

    /// Read `key` of `rank` in our namespace ([`ffi::RANK_WILDCARD`]: a
    /// job-level key).
    ///
    /// # Errors
    /// [`PmixError::Call`] if the get fails (key not found, timeout),
    /// [`PmixError::Value`] if the value has a type we do not read.
    pub(crate) fn get(&self, rank: ffi::pmix_rank_t, key: &CStr) -> Result<Value, PmixError> {
        let who = || {
            if rank == ffi::RANK_WILDCARD {
                "the job".to_string()
            } else {
                format!("rank {rank}")
            }
        };
        let call = || format!("PMIx_Get({}, {})", key_name(key), who());
        let p = self.proc_of(rank);
        let mut v: *mut ffi::pmix_value_t = std::ptr::null_mut();
        // SAFETY: `p` and `key` are valid for the call; NULL/0: no info;
        // on success PMIx stores a malloc'd pmix_value_t in `v`, which we
        // own (released below).
        let status = unsafe { (self.lib.get)(&p, key.as_ptr(), std::ptr::null(), 0, &mut v) };
        check(self.lib, call, status)?;
        if v.is_null() {
            return Err(PmixError::Value {
                call: call(),
                what: "no value".into(),
            });
        }
        // SAFETY: `v` is the valid value PMIx_Get returned; the union
        // member read is the one its `type_` names.
        let out = unsafe {
            let d = &(*v).data;
            match (*v).type_ {
                ffi::PMIX_STRING if !d.string.is_null() => Ok(Value::Str(
                    CStr::from_ptr(d.string).to_string_lossy().into_owned(),
                )),
                ffi::PMIX_UINT32 => Ok(Value::Num(u64::from(d.uint32))),
                ffi::PMIX_PROC_RANK => Ok(Value::Num(u64::from(d.rank))),
                ffi::PMIX_UINT16 => Ok(Value::Num(u64::from(d.uint16))),
                ffi::PMIX_UINT8 => Ok(Value::Num(u64::from(d.uint8))),
                ffi::PMIX_UINT => Ok(Value::Num(u64::from(d.uint))),
                ffi::PMIX_SIZE => Ok(Value::Num(d.size as u64)),
                ffi::PMIX_INT if d.integer >= 0 => Ok(Value::Num(d.integer as u64)),
                ffi::PMIX_INT32 if d.int32 >= 0 => Ok(Value::Num(d.int32 as u64)),
                t => Err(PmixError::Value {
                    call: call(),
                    what: format!("a value of PMIx type {t}"),
                }),
            }
        };
        // SAFETY: `v` came from PMIx_Get (PMIX_VALUE_RELEASE: destruct
        // the contents, then free the malloc'd struct); not used after.
        unsafe {
            (self.lib.value_destruct)(v);
            libc::free(v.cast());
        }
        out
    }

    /// Read a numeric `key` of `rank`.
    ///
    /// # Errors
    /// As [`get`](Self::get); [`PmixError::Value`] if it is a string or
    /// does not fit a `u32`.
    pub(crate) fn get_u32(&self, rank: ffi::pmix_rank_t, key: &CStr) -> Result<u32, PmixError> {
        match self.get(rank, key)? {
            Value::Num(n) => u32::try_from(n).map_err(|_| PmixError::Value {
                call: format!("PMIx_Get({})", key_name(key)),
                what: format!("{n}, which is too large"),
            }),
            Value::Str(s) => Err(PmixError::Value {
                call: format!("PMIx_Get({})", key_name(key)),
                what: format!("the string {s:?} where a number belongs"),
            }),
        }
    }

    /// Read a string `key` of `rank`.
    ///
    /// # Errors
    /// As [`get`](Self::get); [`PmixError::Value`] if it is a number.
    pub(crate) fn get_str(&self, rank: ffi::pmix_rank_t, key: &CStr) -> Result<String, PmixError> {
        match self.get(rank, key)? {
            Value::Str(s) => Ok(s),
            Value::Num(n) => Err(PmixError::Value {
                call: format!("PMIx_Get({}, rank {rank})", key_name(key)),
                what: format!("the number {n} where a string belongs"),
            }),
        }
    }

    /// Publish `value` under `key` to the whole job (after
    /// [`commit`](Self::commit) and a [`fence`](Self::fence)).
    ///
    /// # Errors
    /// [`PmixError::Call`] if the put fails; [`PmixError::Value`] if the
    /// value holds a NUL byte.
    pub(crate) fn put_str(&self, key: &CStr, value: &str) -> Result<(), PmixError> {
        let call = || format!("PMIx_Put({})", key_name(key));
        let s = CString::new(value).map_err(|_| PmixError::Value {
            call: call(),
            what: "a value with a NUL byte".into(),
        })?;
        let mut v = ffi::pmix_value_t {
            type_: ffi::PMIX_STRING,
            data: ffi::pmix_value_data {
                string: s.as_ptr() as *mut c_char,
            },
        };
        // SAFETY: `key` is NUL-terminated; `v` is a valid string value
        // whose string `s` outlives the call; PMIx_Put copies the value
        // (it neither keeps nor frees our pointer).
        let status = unsafe { (self.lib.put)(ffi::PMIX_GLOBAL, key.as_ptr(), &mut v) };
        check(self.lib, call, status)
    }

    /// Push the puts so far to the local server.
    ///
    /// # Errors
    /// [`PmixError::Call`].
    pub(crate) fn commit(&self) -> Result<(), PmixError> {
        // SAFETY: no arguments; requires a connected session (we are one).
        check(self.lib, || "PMIx_Commit".into(), unsafe {
            (self.lib.commit)()
        })
    }

    /// Wait until every rank of the job has fenced, collecting everybody's
    /// committed data on the way (so the gets that follow are local);
    /// give up after `timeout` (whole seconds, at least one).
    ///
    /// # Errors
    /// [`PmixError::Call`]: the fence failed or timed out (a rank died or
    /// never came).
    pub(crate) fn fence(&self, timeout: Duration) -> Result<(), PmixError> {
        let collect = true;
        let secs: libc::c_int = timeout.as_secs().clamp(1, i32::MAX as u64) as libc::c_int;
        let mut info = [ffi::pmix_info_t::default(), ffi::pmix_info_t::default()];
        // SAFETY: each `info` entry is a valid, zeroed pmix_info_t; the
        // keys are NUL-terminated constants; the data pointers point at a
        // bool (PMIX_BOOL) and a C int (PMIX_INT), which PMIx_Info_load
        // copies. Scalars allocate nothing, so no destruct is needed.
        unsafe {
            check(
                self.lib,
                || "PMIx_Info_load(PMIX_COLLECT_DATA)".into(),
                (self.lib.info_load)(
                    &mut info[0],
                    ffi::PMIX_COLLECT_DATA.as_ptr(),
                    (&collect as *const bool).cast::<c_void>(),
                    ffi::PMIX_BOOL,
                ),
            )?;
            check(
                self.lib,
                || "PMIx_Info_load(PMIX_TIMEOUT)".into(),
                (self.lib.info_load)(
                    &mut info[1],
                    ffi::PMIX_TIMEOUT.as_ptr(),
                    (&secs as *const libc::c_int).cast::<c_void>(),
                    ffi::PMIX_INT,
                ),
            )?;
        }
        // SAFETY: NULL/0 procs: every process of our namespace; `info`
        // holds 2 valid entries for the duration of the call.
        let status = unsafe { (self.lib.fence)(std::ptr::null(), 0, info.as_ptr(), info.len()) };
        check(
            self.lib,
            || format!("PMIx_Fence (collecting data, timeout {secs} s)"),
            status,
        )
    }
}
