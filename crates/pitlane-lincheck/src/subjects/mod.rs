//! Named subjects that `pitlane lincheck SUBJECT` can run.
//!
//! Each [`Entry`] ties a name to a function that runs the [`Runner`](crate::Runner) on one
//! structure against its specification. [`Registry::builtin`] holds the subjects of this
//! crate: two built on `std` that must pass, and two broken on purpose (`broken-*`) that
//! exist to show the checker catches what it should. Crates that bring structures of their
//! own add entries with [`Registry::add`].

mod broken;
mod std_mutex;

use std::fmt;

use crate::runner::{Settings, SettingsError, Summary};

/// A named subject: what it is and how to run it.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// The name on the command line (`kebab-case`).
    pub name: &'static str,
    /// One line on what it is and what it is checked against.
    pub about: &'static str,
    /// Whether it is broken on purpose (and so expected to fail).
    pub broken: bool,
    run: fn(&Settings) -> Result<Summary, SettingsError>,
}

impl Entry {
    /// An entry that runs with `run`.
    pub const fn new(
        name: &'static str,
        about: &'static str,
        broken: bool,
        run: fn(&Settings) -> Result<Summary, SettingsError>,
    ) -> Self {
        Entry {
            name,
            about,
            broken,
            run,
        }
    }

    /// Runs the subject with `settings`.
    ///
    /// # Errors
    ///
    /// A [`SettingsError`] when the settings are out of range.
    pub fn run(&self, settings: &Settings) -> Result<Summary, SettingsError> {
        (self.run)(settings)
    }
}

/// The name is taken already.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DuplicateName(pub &'static str);

impl fmt::Display for DuplicateName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a subject named `{}` is registered already", self.0)
    }
}

impl std::error::Error for DuplicateName {}

/// A list of named subjects.
///
/// # Examples
///
/// ```
/// use pitlane_lincheck::Settings;
/// use pitlane_lincheck::subjects::Registry;
///
/// let registry = Registry::builtin();
/// let queue = registry.get("std-mutex-vecdeque").unwrap();
/// let summary = queue.run(&Settings { rounds: 20, ..Settings::default() })?;
/// assert!(summary.failure.is_none());
/// # Ok::<(), pitlane_lincheck::SettingsError>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct Registry {
    entries: Vec<Entry>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The subjects of this crate.
    pub fn builtin() -> Self {
        let mut registry = Registry::new();
        for entry in std_mutex::ENTRIES.iter().chain(broken::ENTRIES) {
            registry
                .add(*entry)
                .expect("built-in subject names are distinct");
        }
        registry
    }

    /// Adds an entry.
    ///
    /// # Errors
    ///
    /// [`DuplicateName`] when an entry of that name is registered already.
    pub fn add(&mut self, entry: Entry) -> Result<(), DuplicateName> {
        if self.get(entry.name).is_some() {
            return Err(DuplicateName(entry.name));
        }
        self.entries.push(entry);
        Ok(())
    }

    /// The entry named `name`.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// All entries, in the order they were added.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_names_are_listed_once() {
        let registry = Registry::builtin();
        let names: Vec<&str> = registry.entries().iter().map(|e| e.name).collect();
        assert_eq!(
            names,
            [
                "std-mutex-vecdeque",
                "std-mutex-vec-stack",
                "broken-racy-tail-queue",
                "broken-lost-push-stack"
            ]
        );
        let mut again = registry.clone();
        assert_eq!(
            again.add(registry.entries()[0]),
            Err(DuplicateName("std-mutex-vecdeque"))
        );
        for entry in registry.entries() {
            assert_eq!(entry.broken, entry.name.starts_with("broken-"));
        }
    }
}
