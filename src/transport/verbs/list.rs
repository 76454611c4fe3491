//! The RDMA devices this host offers, for the configuration report.

use crate::error::VerbsError;

/// Names of the RDMA devices `ibv_get_device_list` finds.
///
/// # Errors
/// [`VerbsError::NotBuilt`] in a build without the `verbs` feature.
#[cfg(not(feature = "verbs"))]
pub fn devices() -> Result<Vec<String>, VerbsError> {
    Err(VerbsError::NotBuilt)
}

/// Names of the RDMA devices `ibv_get_device_list` finds.
///
/// # Errors
/// [`VerbsError::NoDevice`] when the list cannot be read (kernels without
/// InfiniBand support).
#[cfg(feature = "verbs")]
#[allow(unsafe_code)]
pub fn devices() -> Result<Vec<String>, VerbsError> {
    use rdma_sys::{ibv_free_device_list, ibv_get_device_list, ibv_get_device_name};
    use std::ffi::CStr;
    let mut n = 0;
    // SAFETY: `n` is a valid out-pointer; the list is freed below.
    let list = unsafe { ibv_get_device_list(&mut n) };
    if list.is_null() {
        return Err(VerbsError::NoDevice {
            why: std::io::Error::last_os_error().to_string(),
        });
    }
    let names = (0..n.max(0) as usize)
        .map(|i| {
            // SAFETY: the list holds `n` valid device pointers, each with a
            // NUL-terminated name.
            unsafe { CStr::from_ptr(ibv_get_device_name(*list.add(i))) }
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    // SAFETY: freeing the list we got; the names were copied out.
    unsafe { ibv_free_device_list(list) };
    Ok(names)
}
