//! One gateway per data directory: an exclusive `flock` on `DIR/gateway.lock`, which holds the PID of the
//! gateway that took it.
//!
//! Two gateways on one database would each keep their own copy of the entities, allocate the same multicast
//! groups and undo each other's memberships; SQLite's own locking only serialises their writes. The lock
//! is advisory and belongs to the open file: the kernel releases it when the process ends, however it
//! ends (kill -9 included), so a stale lock file never blocks a restart. Must never: remove the file (a
//! second gateway may be waiting to read whose it is).

use crate::Error;
use std::path::Path;

/// The lock, held while this value lives.
pub struct DataLock {
    #[cfg(unix)]
    _held: nix::fcntl::Flock<std::fs::File>,
}

impl DataLock {
    /// Takes the lock of `dir`, or fails with one line naming the gateway that holds it.
    #[cfg(unix)]
    pub fn take(dir: &Path) -> Result<DataLock, Error> {
        use nix::fcntl::{Flock, FlockArg};
        use std::io::{Read, Seek, Write};
        let path = dir.join("gateway.lock");
        let cannot = |e: std::io::Error| Error::Start(format!("cannot open {}: {e}", path.display()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(cannot)?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(mut held) => {
                held.set_len(0).map_err(cannot)?;
                held.rewind().map_err(cannot)?;
                writeln!(held, "{}", std::process::id()).map_err(cannot)?;
                Ok(DataLock { _held: held })
            }
            Err((mut file, nix::errno::Errno::EWOULDBLOCK)) => {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let by = match pid.trim() {
                    "" => "another process".to_string(),
                    pid => format!("PID {pid}"),
                };
                Err(Error::Start(format!(
                    "the data directory {} is already in use by {by} (another corral gateway); stop it or give this one \
                     another --data",
                    dir.display()
                )))
            }
            Err((_, e)) => Err(Error::Start(format!("cannot lock {}: {e}", path.display()))),
        }
    }

    /// Elsewhere there is no lock (documented: run one gateway per directory).
    #[cfg(not(unix))]
    pub fn take(_dir: &Path) -> Result<DataLock, Error> {
        Ok(DataLock {})
    }
}
