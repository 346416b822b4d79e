//! The lock that ties a run of an SQLite journal to its process: a file per run, locked
//! (`flock`) for as long as the run lives. The kernel drops the lock when the process ends,
//! however it ends (SIGKILL included), so another process can tell at once, by trying the lock
//! itself, that a run is gone and its claims are in doubt, without waiting out a lease.
//!
//! `flock`, not `fcntl` record locks: a record lock belongs to the process (two runs in one
//! process would not exclude each other, and closing any descriptor of the file drops it),
//! while a `flock` belongs to the open file description.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

/// The lock of this process's run, released when dropped.
pub(crate) struct RunLock {
    file: Option<File>,
    path: PathBuf,
}

/// Where the lock files of a journal's runs are: beside it, by its real path (a journal opened
/// through a link is one journal with one folder of locks).
pub(crate) fn lock_dir(journal: &Path) -> PathBuf {
    let real = std::fs::canonicalize(journal).unwrap_or_else(|_| journal.to_owned());
    let mut name = real.into_os_string();
    name.push(".runs");
    PathBuf::from(name)
}

fn lock_path(dir: &Path, run_id: &str) -> PathBuf {
    dir.join(format!("{run_id}.lock"))
}

impl RunLock {
    /// Creates and locks the lock file of `run_id`. Taken before the run records itself, so a
    /// recorded run always has its lock.
    pub(crate) fn acquire(dir: &Path, run_id: &str) -> io::Result<RunLock> {
        std::fs::create_dir_all(dir)?;
        let path = lock_path(dir, run_id);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        if !try_lock(&file, true)? {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is locked by another process", path.display()),
            ));
        }
        Ok(RunLock {
            file: Some(file),
            path,
        })
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Removed first, then unlocked (closing the file): a reader that opens the path meanwhile
        // finds it locked, or gone; both mean what they should.
        let _ = std::fs::remove_file(&self.path);
        drop(self.file.take());
    }
}

/// Whether the run `run_id` still holds its lock. A missing lock file is a run that ended (or
/// whose journal moved without it): not alive. A lock file that cannot be read (another user's,
/// a file system error) says nothing: taken for alive, the safe reading (its lease still ends
/// it).
pub(crate) fn is_alive(dir: &Path, run_id: &str) -> bool {
    let file = match File::open(lock_path(dir, run_id)) {
        Ok(file) => file,
        Err(error) => return error.kind() != io::ErrorKind::NotFound,
    };
    // A shared lock we can take means nobody holds the exclusive one: the run is gone.
    !matches!(try_lock(&file, false), Ok(true))
}

/// Tries a `flock` on `file` without waiting: `Ok(true)` taken, `Ok(false)` held by someone.
#[cfg(unix)]
fn try_lock(file: &File, exclusive: bool) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    let kind = if exclusive {
        libc::LOCK_EX
    } else {
        libc::LOCK_SH
    };
    // SAFETY: a plain system call on a descriptor `file` owns for the duration of the call.
    let done = unsafe { libc::flock(file.as_raw_fd(), kind | libc::LOCK_NB) };
    if done == 0 {
        return Ok(true);
    }
    let error = io::Error::last_os_error();
    if error.kind() == io::ErrorKind::WouldBlock {
        Ok(false)
    } else {
        Err(error)
    }
}

/// Elsewhere (Windows: `LockFileEx`), the standard library's file locks, which the system also
/// drops when the process ends. (Answering "held" here made every run's own lock fail to be
/// taken, so no campaign with a journal could start on Windows; the core's tests under wine
/// found it.)
#[cfg(not(unix))]
fn try_lock(file: &File, exclusive: bool) -> io::Result<bool> {
    let taken = if exclusive {
        file.try_lock()
    } else {
        file.try_lock_shared()
    };
    match taken {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(error)) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_held_lock_is_alive_and_a_dropped_one_is_not() {
        let dir = std::env::temp_dir().join(format!("bizmsg-lock-{}", uuid::Uuid::new_v4()));
        let lock = RunLock::acquire(&dir, "run-1").unwrap();
        assert!(is_alive(&dir, "run-1"));
        assert!(RunLock::acquire(&dir, "run-1").is_err());
        assert!(!is_alive(&dir, "run-2"));
        drop(lock);
        assert!(!is_alive(&dir, "run-1"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_journal_reached_through_a_link_has_the_same_locks() {
        let dir = std::env::temp_dir().join(format!("bizmsg-lock-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let journal = dir.join("real.db");
        std::fs::write(&journal, b"").unwrap();
        let link = dir.join("link.db");
        std::os::unix::fs::symlink(&journal, &link).unwrap();
        assert_eq!(lock_dir(&journal), lock_dir(&link));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
