//! The message of a panic, for tests that check what a panic says.
//!
//! ```
//! let message = pitlane_testkit::panics::message_of(|| panic!("at {}", 3));
//! assert_eq!(message, "at 3");
//! ```

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// The text of a panic's payload: the `&str` of `panic!("literal")` or the `String` of a
/// formatted `panic!`; `None` for any other payload.
pub fn message(payload: &(dyn Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

/// Runs `f`, which must panic, and returns its panic's message (empty when the payload is not
/// text).
///
/// # Panics
///
/// When `f` returns without panicking.
pub fn message_of(f: impl FnOnce()) -> String {
    let payload = catch_unwind(AssertUnwindSafe(f)).expect_err("a panic");
    message(&*payload).unwrap_or_default().to_owned()
}
