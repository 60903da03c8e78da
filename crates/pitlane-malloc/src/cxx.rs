//! The C++ `operator new` and `operator delete` family, under their Itanium C++ ABI names
//! (`size_t` is `unsigned long`, mangled `m`; `std::align_val_t` is passed as a `size_t`; a
//! `const std::nothrow_t&` as a pointer nobody reads).
//!
//! The throwing forms follow [new.delete.single]: on failure, call the new-handler if one is
//! installed and try again; with none, throw `std::bad_alloc`. Both come from the C++ runtime
//! already in the process (`std::get_new_handler` and libstdc++'s `std::__throw_bad_alloc`),
//! looked up once with `dlsym`; these functions are `extern "C-unwind"` so that the exception
//! may pass through them. A process without a C++ runtime cannot have called `operator new`
//! through C++ code; if one calls it anyway and it fails, the process aborts with a message,
//! the only thing left to do.

#![allow(non_snake_case, reason = "the Itanium C++ ABI names of the operators")]

use core::ffi::{c_char, c_void};
use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};

use super::MALLOC_ALIGN;
use pitlane_alloc::raw;

type NewHandler = Option<unsafe extern "C-unwind" fn()>;

/// A function of the C++ runtime, found by name on first use (null: not there).
struct Runtime {
    name: &'static [u8],
    found: AtomicPtr<c_void>,
}

/// Marks a lookup that found nothing, so that it is not repeated.
const MISSING: *mut c_void = ptr::without_provenance_mut(1);

impl Runtime {
    const fn new(name: &'static [u8]) -> Self {
        Self {
            name,
            found: AtomicPtr::new(ptr::null_mut()),
        }
    }

    fn get(&self) -> Option<*mut c_void> {
        let mut found = self.found.load(Ordering::Acquire);
        if found.is_null() {
            // SAFETY: `name` is a NUL-terminated C string; `dlsym` may allocate, through us,
            // which is fine: no lock of ours is held here.
            found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, self.name.as_ptr().cast::<c_char>()) };
            if found.is_null() {
                found = MISSING;
            }
            self.found.store(found, Ordering::Release);
        }
        (found != MISSING).then_some(found)
    }
}

static GET_NEW_HANDLER: Runtime = Runtime::new(b"_ZSt15get_new_handlerv\0");
static THROW_BAD_ALLOC: Runtime = Runtime::new(b"_ZSt17__throw_bad_allocv\0");

/// The allocation loop of the throwing forms: `None` means "throw".
#[inline]
fn new_or_handle(size: usize, align: usize) -> *mut c_void {
    if align <= MALLOC_ALIGN {
        let block = raw::malloc_fast(size);
        if !block.is_null() {
            return block.cast();
        }
    }
    new_slow(size, align)
}

/// `operator new` beyond the fast path, as `malloc_slow` is for `malloc`.
#[inline(never)]
fn new_slow(size: usize, align: usize) -> *mut c_void {
    let block = raw::malloc(size, align);
    if !block.is_null() {
        return block.cast();
    }
    retry_with_handler(size, align)
}

#[cold]
#[inline(never)]
fn retry_with_handler(size: usize, align: usize) -> *mut c_void {
    loop {
        let handler: NewHandler = match GET_NEW_HANDLER.get() {
            // SAFETY: `std::get_new_handler` has this signature in every C++ runtime.
            Some(get) => unsafe {
                let get: unsafe extern "C-unwind" fn() -> NewHandler = core::mem::transmute(get);
                get()
            },
            None => None,
        };
        let Some(handler) = handler else {
            throw_bad_alloc();
        };
        // SAFETY: the program's new-handler, called as the C++ standard says; it may throw.
        unsafe { handler() };
        let block = raw::malloc(size, align);
        if !block.is_null() {
            return block.cast();
        }
    }
}

#[cold]
fn throw_bad_alloc() -> ! {
    if let Some(throw) = THROW_BAD_ALLOC.get() {
        // SAFETY: libstdc++'s `std::__throw_bad_alloc()` takes nothing and throws.
        unsafe {
            let throw: unsafe extern "C-unwind" fn() -> ! = core::mem::transmute(throw);
            throw()
        }
    }
    let message =
        b"pitlane-malloc: operator new failed and no C++ runtime can throw std::bad_alloc\n";
    // SAFETY: writes our buffer to standard error, then ends the process.
    unsafe {
        libc::write(2, message.as_ptr().cast(), message.len());
        libc::abort()
    }
}

/// `nothrow` forms: null on failure, with `errno` set as `malloc` would.
#[inline]
fn new_nothrow(size: usize, align: usize) -> *mut c_void {
    super::allocate(size, align)
}

/// `std::align_val_t` as an allocation alignment (a power of two by the C++ standard; any
/// other value fails the allocation).
#[inline]
fn alignment(align: usize) -> usize {
    align.max(MALLOC_ALIGN)
}

/// Every `operator delete`: `free`'s fast path, and its slow path as a tail call.
#[inline]
fn delete(block: *mut c_void) {
    // SAFETY: as in `free`: by the C++ contract `block` is null or a live block of ours.
    unsafe { super::free(block) }
}

macro_rules! throwing_new {
    ($($name:ident($($align:ident)?): $what:literal;)*) => {$(
        #[doc = concat!("`", $what, "`: throws `std::bad_alloc` on failure.")]
        ///
        /// # Safety
        /// As `malloc`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C-unwind" fn $name(size: usize $(, $align: usize)?) -> *mut c_void {
            let align = MALLOC_ALIGN $(.max(alignment($align)))?;
            new_or_handle(size, align)
        }
    )*};
}

macro_rules! nothrow_new {
    ($($name:ident($($align:ident)?): $what:literal;)*) => {$(
        #[doc = concat!("`", $what, "`: null on failure.")]
        ///
        /// # Safety
        /// As `malloc`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(size: usize $(, $align: usize)?, _nothrow: *const c_void) -> *mut c_void {
            let align = MALLOC_ALIGN $(.max(alignment($align)))?;
            new_nothrow(size, align)
        }
    )*};
}

throwing_new! {
    _Znwm(): "operator new(size_t)";
    _Znam(): "operator new[](size_t)";
    _ZnwmSt11align_val_t(align): "operator new(size_t, std::align_val_t)";
    _ZnamSt11align_val_t(align): "operator new[](size_t, std::align_val_t)";
}

nothrow_new! {
    _ZnwmRKSt9nothrow_t(): "operator new(size_t, const std::nothrow_t&)";
    _ZnamRKSt9nothrow_t(): "operator new[](size_t, const std::nothrow_t&)";
    _ZnwmSt11align_val_tRKSt9nothrow_t(align): "operator new(size_t, std::align_val_t, const std::nothrow_t&)";
    _ZnamSt11align_val_tRKSt9nothrow_t(align): "operator new[](size_t, std::align_val_t, const std::nothrow_t&)";
}

macro_rules! delete_forms {
    ($($name:ident($($extra:ident),*): $what:literal;)*) => {$(
        #[doc = concat!("`", $what, "`.")]
        ///
        /// # Safety
        /// As `free`.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(block: *mut c_void $(, $extra: usize)*) {
            $(let _ = $extra;)*
            delete(block);
        }
    )*};
}

delete_forms! {
    _ZdlPv(): "operator delete(void*)";
    _ZdaPv(): "operator delete[](void*)";
    _ZdlPvm(size): "operator delete(void*, size_t)";
    _ZdaPvm(size): "operator delete[](void*, size_t)";
    _ZdlPvSt11align_val_t(align): "operator delete(void*, std::align_val_t)";
    _ZdaPvSt11align_val_t(align): "operator delete[](void*, std::align_val_t)";
    _ZdlPvmSt11align_val_t(size, align): "operator delete(void*, size_t, std::align_val_t)";
    _ZdaPvmSt11align_val_t(size, align): "operator delete[](void*, size_t, std::align_val_t)";
    _ZdlPvRKSt9nothrow_t(nothrow): "operator delete(void*, const std::nothrow_t&)";
    _ZdaPvRKSt9nothrow_t(nothrow): "operator delete[](void*, const std::nothrow_t&)";
    _ZdlPvSt11align_val_tRKSt9nothrow_t(align, nothrow): "operator delete(void*, std::align_val_t, const std::nothrow_t&)";
    _ZdaPvSt11align_val_tRKSt9nothrow_t(align, nothrow): "operator delete[](void*, std::align_val_t, const std::nothrow_t&)";
}
