//! A throwaway PostgreSQL server for tests (feature `testing`): Debian's `postgresql` binaries, a cluster
//! made by `initdb` in a temporary directory, listening only on a Unix socket in that directory (no TCP
//! port to collide with anything), stopped and removed when the value is dropped. Run as root, the server
//! runs as the `postgres` user (PostgreSQL refuses root). A test that needs the database to go away stops
//! it ([`TempPostgres::stop`]) and starts it again ([`TempPostgres::start`]) with the same data.
//!
//! Owns: the server's directory and process. Must never: touch a server it did not start.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where Debian puts the server's binaries (`postgresql-15` and later).
fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop()
}

/// Whether this machine can start a [`TempPostgres`]. Tests skip with a note when it cannot, unless
/// `CORRAL_INTEROP=1` (the test command, which installs the server first), where they fail instead.
pub fn available() -> bool {
    bin_dir().is_some()
}

/// A server for a test, or `None` with a note on stderr when this machine has none. Under
/// `CORRAL_INTEROP=1` (the test command, which installs PostgreSQL first) a missing server panics instead,
/// so the test command never passes by skipping.
pub fn for_test() -> Option<TempPostgres> {
    if !available() {
        assert!(
            std::env::var("CORRAL_INTEROP").is_err(),
            "CORRAL_INTEROP=1 but PostgreSQL is not installed: run scripts/install-peers.sh"
        );
        eprintln!("skipped: PostgreSQL is not installed (apt-get install postgresql, or scripts/install-peers.sh)");
        return None;
    }
    Some(TempPostgres::start_new().expect("a throwaway PostgreSQL starts"))
}

/// A PostgreSQL server of a test's own. See the module docs.
pub struct TempPostgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    /// The port number names the socket file (`.s.PGSQL.<port>`); nothing listens on TCP.
    port: u16,
    running: bool,
}

impl TempPostgres {
    /// Makes a cluster and starts it, with a database `corral`. Fails with what the tools said.
    pub fn start_new() -> Result<TempPostgres, String> {
        let bin = bin_dir().ok_or("PostgreSQL is not installed (apt-get install postgresql)")?;
        let dir = tempfile::Builder::new().prefix("corral-pg-").tempdir().map_err(|e| e.to_string())?;
        let root = is_root();
        if root {
            // The server's user must own the directory and reach it.
            chown_postgres(dir.path())?;
        }
        let data = dir.path().join("data");
        run(&bin, "initdb", root, &["-D", path(&data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])?;
        // A port number only names the socket; pick one from the process id so parallel tests differ.
        let port = 20_000 + (std::process::id() % 20_000) as u16;
        let mut pg = TempPostgres { dir, bin, port, running: false };
        pg.start()?;
        run(
            &pg.bin,
            "createdb",
            root,
            &["-h", path(pg.dir.path()), "-p", &pg.port.to_string(), "-U", "postgres", "corral"],
        )?;
        Ok(pg)
    }

    /// Starts the server again (after [`TempPostgres::stop`]) on the same data.
    pub fn start(&mut self) -> Result<(), String> {
        let opts = format!("-k {} -p {} -c listen_addresses='' -c fsync=off", self.dir.path().display(), self.port);
        run(
            &self.bin,
            "pg_ctl",
            is_root(),
            &[
                "-D",
                path(&self.dir.path().join("data")),
                "-o",
                &opts,
                "-l",
                path(&self.dir.path().join("log")),
                "-w",
                "start",
            ],
        )?;
        self.running = true;
        Ok(())
    }

    /// Stops the server at once (`immediate`: as if it crashed; the data stays for [`TempPostgres::start`]).
    pub fn stop(&mut self) -> Result<(), String> {
        if !self.running {
            return Ok(());
        }
        self.running = false;
        run(
            &self.bin,
            "pg_ctl",
            is_root(),
            &["-D", path(&self.dir.path().join("data")), "-m", "immediate", "-w", "stop"],
        )
    }

    /// The connection string of database `corral` (key=value form, over the Unix socket).
    pub fn url(&self) -> String {
        format!("host={} port={} user=postgres dbname=corral", self.dir.path().display(), self.port)
    }

    /// Runs `sql` as the superuser, for a test's setup (a schema of a newer corral, a broken row).
    pub fn psql(&self, sql: &str) -> Result<(), String> {
        run(
            &self.bin,
            "psql",
            is_root(),
            &[
                "-h",
                path(self.dir.path()),
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                "corral",
                "-v",
                "ON_ERROR_STOP=1",
                "-q",
                "-c",
                sql,
            ],
        )
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

fn is_root() -> bool {
    // The effective user id, without libc: /proc/self/status's "Uid:" line (real, effective, …).
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("Uid:")).and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

fn chown_postgres(dir: &Path) -> Result<(), String> {
    let out = Command::new("chown").args(["postgres:postgres", path(dir)]).output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("chown postgres {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr)))
    }
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap_or_default()
}

/// Runs one of the server's tools, as `postgres` when we are root; its output on failure.
fn run(bin: &Path, tool: &str, as_postgres: bool, args: &[&str]) -> Result<(), String> {
    let exe = bin.join(tool);
    let mut cmd = if as_postgres {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    let out = cmd.args(args).stdin(Stdio::null()).output().map_err(|e| format!("{tool}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{tool} {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
