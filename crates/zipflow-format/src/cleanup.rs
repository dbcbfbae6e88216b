//! Paths that must not outlive an interrupted run: temporary files being written and
//! scratch directories.
//!
//! Each writer registers its temporary path before creating it and holds the returned
//! [`Registered`] until the file is renamed onto its target or removed; dropping it takes the
//! path off the list. A process stopped early (a signal, a closed standard output) calls
//! [`remove_all_and_exit`], which deletes what is still listed: destructors do not run when
//! a process exits from another thread, so the list is what makes "a failed run leaves
//! nothing behind" hold there too.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What a listed path is, so it is removed the right way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
}

/// Listed paths, each with a registration number so a drop removes only its own entry.
struct Live {
    next: u64,
    entries: Vec<(u64, PathBuf, Kind)>,
}

static LIVE: Mutex<Live> = Mutex::new(Live {
    next: 0,
    entries: Vec::new(),
});

fn live() -> std::sync::MutexGuard<'static, Live> {
    // The list stays consistent even if a holder panicked: every update is one push or one
    // retain.
    LIVE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A path on the list; dropping it takes the path off (it does not delete it).
#[derive(Debug)]
#[must_use = "the path is taken off the list when this is dropped"]
pub struct Registered {
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        live().entries.retain(|(id, _, _)| *id != self.id);
    }
}

fn add(path: &Path, kind: Kind) -> Registered {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut live = live();
    let id = live.next;
    live.next += 1;
    live.entries.push((id, path, kind));
    Registered { id }
}

/// Lists a temporary file (call before creating it, so no moment exists when it is on disk
/// and unlisted).
pub fn register_file(path: &Path) -> Registered {
    add(path, Kind::File)
}

/// Lists a scratch directory; [`remove_all_and_exit`] removes it with everything in it, so
/// list only directories this process created for itself.
pub fn register_dir(path: &Path) -> Registered {
    add(path, Kind::Dir)
}

/// The listed paths, oldest first.
pub fn registered() -> Vec<PathBuf> {
    live().entries.iter().map(|(_, p, _)| p.clone()).collect()
}

/// Deletes every listed path (newest first: files before the directories that hold them)
/// and exits the process with `code`. The list stays locked until the exit, so no writer
/// can create a new temporary file in between.
pub fn remove_all_and_exit(code: i32) -> ! {
    let live = live();
    for (_, path, kind) in live.entries.iter().rev() {
        // Nothing more can be done about a path that cannot be removed while exiting.
        let _ = match kind {
            Kind::File => std::fs::remove_file(path),
            Kind::Dir => std::fs::remove_dir_all(path),
        };
    }
    std::process::exit(code)
}

/// Flushes a directory's entries to disk, so a file renamed into it survives a crash; the
/// data of the file itself must be synced before the rename.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    std::fs::File::open(dir)?.sync_all()
}

/// Flushes the directory that holds `path` (see [`sync_dir`]).
pub fn sync_parent(path: &Path) -> std::io::Result<()> {
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropping_takes_only_its_own_entry_off() {
        let a = register_file(Path::new("/nonexistent/a"));
        let b = register_file(Path::new("/nonexistent/a"));
        let count = || {
            registered()
                .iter()
                .filter(|p| p.as_path() == Path::new("/nonexistent/a"))
                .count()
        };
        assert_eq!(count(), 2);
        drop(a);
        assert_eq!(count(), 1);
        drop(b);
        assert_eq!(count(), 0);
    }
}
