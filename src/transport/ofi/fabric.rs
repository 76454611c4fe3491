//! [`Fabric`]: one libfabric provider opened for this rank — fabric,
//! domain, address vector, completion queue and an RDM endpoint, closed on
//! drop — and [`Mr`], a memory registration. Every failure is an
//! [`OfiError`] naming the call and the provider.

#![allow(unsafe_code)]

use super::sys::{self, FidMr, FmOfi, FmOfiAttr};
use crate::error::OfiError;
use std::ffi::{CStr, CString};
use std::ptr;

/// libfabric's message for a (negative) return code.
pub(crate) fn strerror(code: isize) -> String {
    // SAFETY: fi_strerror returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(sys::fm_ofi_strerror(code as libc::c_int)) }
        .to_string_lossy()
        .into_owned()
}

fn text(b: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = b
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// An opened provider with its endpoint.
#[derive(Debug)]
pub(crate) struct Fabric {
    pub(crate) raw: *mut FmOfi,
    pub(crate) attr: FmOfiAttr,
    /// The provider's name, as libfabric reports it (`tcp;ofi_rxm`).
    pub(crate) provider: String,
    /// The domain (interface) it runs on.
    pub(crate) domain: String,
}

impl Fabric {
    /// Open `provider` with an endpoint bound to address `node` (the
    /// interface peers reach this rank on; `None`: libfabric's choice).
    ///
    /// # Errors
    /// [`OfiError::NoProvider`] when nothing matches; [`OfiError::Call`]
    /// when a set-up call fails.
    pub(crate) fn open(
        provider: &str,
        node: Option<&str>,
        cq_size: usize,
    ) -> Result<Fabric, OfiError> {
        let bad = |why: &str| OfiError::NoProvider {
            provider: provider.into(),
            why: why.into(),
        };
        let prov = CString::new(provider).map_err(|_| bad("a NUL byte in the name"))?;
        let node = node
            .map(CString::new)
            .transpose()
            .map_err(|_| bad("a NUL byte in the address"))?;
        let mut raw = ptr::null_mut();
        // SAFETY: an all-zero attribute block is valid (integers, arrays).
        let mut attr: FmOfiAttr = unsafe { std::mem::zeroed() };
        let mut what: *const libc::c_char = ptr::null();
        // SAFETY: valid C strings and out-pointers; the shim sets `what`
        // to a static string before any call that can fail.
        let r = unsafe {
            sys::fm_ofi_open(
                prov.as_ptr(),
                node.as_ref().map_or(ptr::null(), |n| n.as_ptr()),
                cq_size,
                &mut raw,
                &mut attr,
                &mut what,
            )
        };
        if r != 0 {
            let call = if what.is_null() {
                "fi_getinfo".to_string()
            } else {
                // SAFETY: a static NUL-terminated string from the shim.
                unsafe { CStr::from_ptr(what) }
                    .to_string_lossy()
                    .into_owned()
            };
            let why = strerror(r as isize);
            if call == "fi_getinfo" && -r == sys::FI_ENODATA {
                return Err(OfiError::NoProvider {
                    provider: provider.into(),
                    why: format!("fi_getinfo: {why}"),
                });
            }
            return Err(OfiError::Call {
                call,
                provider: provider.into(),
                why,
            });
        }
        // SAFETY: a plain size query.
        let entry = unsafe { sys::fm_ofi_cq_entry_size() };
        let f = Fabric {
            raw,
            provider: text(&attr.prov_name),
            domain: text(&attr.domain_name),
            attr,
        };
        if entry != std::mem::size_of::<sys::CqDataEntry>() {
            return Err(OfiError::Call {
                call: "fi_cq_read".into(),
                provider: f.provider.clone(),
                why: format!(
                    "libfabric's completion entry has {entry} bytes, not the {} this build expects",
                    std::mem::size_of::<sys::CqDataEntry>()
                ),
            });
        }
        Ok(f)
    }

    pub(crate) fn call(&self, call: &str, code: isize) -> OfiError {
        OfiError::Call {
            call: call.into(),
            provider: self.provider.clone(),
            why: strerror(code),
        }
    }

    /// The endpoint's address.
    pub(crate) fn name(&self) -> Result<Vec<u8>, OfiError> {
        let mut buf = vec![0u8; 256];
        let mut len = buf.len();
        // SAFETY: a live endpoint; `buf` holds `len` bytes.
        let r = unsafe { sys::fm_ofi_getname(self.raw, buf.as_mut_ptr().cast(), &mut len) };
        if r != 0 {
            return Err(self.call("fi_getname", r as isize));
        }
        buf.truncate(len);
        Ok(buf)
    }

    /// Insert a peer's address; its handle for writes.
    pub(crate) fn insert(&self, name: &[u8]) -> Result<u64, OfiError> {
        let mut addr = 0;
        // SAFETY: a live address vector; the provider reads the address
        // format's length from `name` (checked by the caller to be as long
        // as ours).
        let r = unsafe { sys::fm_ofi_av_insert(self.raw, name.as_ptr().cast(), &mut addr) };
        if r != 0 {
            return Err(self.call("fi_av_insert", r as isize));
        }
        Ok(addr)
    }

    /// Register `len` bytes at `base` for local and remote writes.
    pub(crate) fn register(&self, base: *mut u8, len: usize) -> Result<Mr, OfiError> {
        let mut mr = ptr::null_mut();
        let mut key = 0;
        let mut desc = ptr::null_mut();
        // SAFETY: the caller keeps the memory alive while registered (the
        // registration is dropped before it).
        let r = unsafe {
            sys::fm_ofi_mr_reg(
                self.raw,
                base.cast(),
                len.max(1),
                &mut mr,
                &mut key,
                &mut desc,
            )
        };
        if r != 0 {
            return Err(self.call("fi_mr_reg", r as isize));
        }
        let remote_base = if self.attr.mr_mode & sys::FI_MR_VIRT_ADDR != 0 {
            base as u64
        } else {
            0
        };
        Ok(Mr {
            raw: mr,
            key,
            desc,
            remote_base,
        })
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        // SAFETY: the registrations made on it are dropped first (field
        // order of the wire).
        unsafe { sys::fm_ofi_close(self.raw) };
    }
}

/// A memory registration.
#[derive(Debug)]
pub(crate) struct Mr {
    raw: *mut FidMr,
    /// The key peers write with.
    pub(crate) key: u64,
    /// The local descriptor (for `FI_MR_LOCAL` providers).
    pub(crate) desc: *mut libc::c_void,
    /// What a peer adds its offsets to: the base address under
    /// `FI_MR_VIRT_ADDR`, else 0.
    pub(crate) remote_base: u64,
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: our own live registration.
        unsafe { sys::fm_ofi_mr_close(self.raw) };
    }
}
