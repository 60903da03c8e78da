//! Scratch directories for tests that make files.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A fresh directory under the temporary directory, named for the process, a counter and the
/// test's `name`, removed (with what it holds) on drop.
///
/// ```
/// let dir = pitlane_testkit::scratch::Scratch::new("doc");
/// std::fs::write(dir.path("f"), b"x").unwrap();
/// let kept = dir.dir().to_path_buf();
/// drop(dir);
/// assert!(!kept.exists());
/// ```
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    /// Makes the directory.
    ///
    /// # Panics
    /// If it cannot be made.
    pub fn new(name: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "pitlane-test-{}-{}-{name}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        Scratch(dir)
    }

    /// The path of `name` inside the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// The directory itself.
    pub fn dir(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
