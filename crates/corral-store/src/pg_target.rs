//! Where a PostgreSQL store connects: what an operator gives (`--store postgres://…`) turned into a
//! connection, as libpq would take it.
//!
//! Owns: reading a connection string (a URL `postgresql://user:password@host:port/db?…` or libpq's
//! `key=value` pairs), filling what it leaves out from libpq's environment variables (`PGHOST`,
//! `PGPORT`, `PGUSER`, `PGDATABASE`, `PGPASSWORD`, `PGCONNECT_TIMEOUT`) and a password file, and the
//! form every message names the server by: a URL **without the password** ([`PgTarget::shown`]).
//! Must never: print or log a password.
//!
//! TLS to the server is not offered (the connection is plain, as on a Unix socket or a trusted network):
//! `sslmode=require` is refused at connection time with the driver's words.

use postgres::config::Host;
use postgres::{Client, Config, NoTls};
use std::path::Path;
use std::time::Duration;

/// How long a connection attempt waits for the server unless `connect_timeout`/`PGCONNECT_TIMEOUT` say.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A PostgreSQL server and database to connect to. See the module docs.
#[derive(Clone)]
pub struct PgTarget {
    config: Config,
    shown: String,
}

impl std::fmt::Debug for PgTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl PgTarget {
    /// `conninfo` (a URL or key=value pairs; `postgres://` alone takes everything from the environment),
    /// completed from the `PG*` environment variables, with the password of `password_file` (its first
    /// line) if given. An error says what is wrong, without the password.
    pub fn new(conninfo: &str, password_file: Option<&Path>) -> Result<PgTarget, String> {
        let password = match password_file {
            Some(p) => Some(read_password(p)?),
            None => None,
        };
        PgTarget::with_env(conninfo, password, |k| std::env::var(k).ok().filter(|v| !v.is_empty()))
    }

    /// [`PgTarget::new`] with the environment (and a password already read) given.
    pub fn with_env(
        conninfo: &str,
        password: Option<String>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<PgTarget, String> {
        let mut config: Config = conninfo
            .parse()
            .map_err(|e| format!("`{}` is not a PostgreSQL connection string: {e}", redacted(conninfo)))?;
        if config.get_hosts().is_empty() {
            match env("PGHOST") {
                Some(h) => {
                    config.host(&h);
                }
                // libpq's default: Debian's socket directory if there is one, else TCP on localhost.
                None if Path::new("/var/run/postgresql").is_dir() => {
                    config.host_path("/var/run/postgresql");
                }
                None => {
                    config.host("localhost");
                }
            }
        }
        if config.get_ports().is_empty() {
            if let Some(p) = env("PGPORT") {
                let port = p.parse::<u16>().map_err(|_| format!("PGPORT={p} is not a port number"))?;
                config.port(port);
            }
        }
        if config.get_user().is_none() {
            // libpq's default is the operating system's user name.
            let user = env("PGUSER").or_else(|| env("USER")).unwrap_or_else(|| "postgres".into());
            config.user(&user);
        }
        if config.get_dbname().is_none() {
            if let Some(db) = env("PGDATABASE") {
                config.dbname(&db);
            }
        }
        match password {
            Some(p) => {
                config.password(p);
            }
            None if config.get_password().is_none() => {
                if let Some(p) = env("PGPASSWORD") {
                    config.password(p);
                }
            }
            None => {}
        }
        if config.get_connect_timeout().is_none() {
            let secs = match env("PGCONNECT_TIMEOUT") {
                Some(s) => s.parse::<u64>().map_err(|_| format!("PGCONNECT_TIMEOUT={s} is not a number of seconds"))?,
                None => CONNECT_TIMEOUT.as_secs(),
            };
            config.connect_timeout(Duration::from_secs(secs.max(1)));
        }
        let shown = show(&config);
        Ok(PgTarget { config, shown })
    }

    /// The server and database as a URL without the password: what every message names.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// A connection (plain, see the module docs). Blocking: call it off any async runtime.
    pub fn connect(&self) -> Result<Client, postgres::Error> {
        self.config.connect(NoTls)
    }
}

/// The first line of `path`: a password file holds the password alone (as Docker's and systemd's
/// credentials do), with or without a newline.
fn read_password(path: &Path) -> Result<String, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read the password file {}: {e}", path.display()))?;
    let line = text.lines().next().unwrap_or_default().trim_end_matches('\r');
    if line.is_empty() {
        return Err(format!("the password file {} is empty", path.display()));
    }
    Ok(line.to_string())
}

/// `postgresql://user@host:port/db` (a Unix socket directory as `?host=`), never with the password.
fn show(c: &Config) -> String {
    let user = c.get_user().unwrap_or_default();
    let db = c.get_dbname().unwrap_or(user);
    let port = c.get_ports().first().copied().unwrap_or(5432);
    match c.get_hosts().first() {
        Some(Host::Tcp(h)) if h.contains(':') => format!("postgresql://{user}@[{h}]:{port}/{db}"),
        Some(Host::Tcp(h)) => format!("postgresql://{user}@{h}:{port}/{db}"),
        Some(Host::Unix(dir)) => format!("postgresql://{user}@/{db}?host={}&port={port}", dir.display()),
        None => format!("postgresql://{user}@localhost:{port}/{db}"),
    }
}

/// `url` with its password (if any) replaced by `***`, for messages and logs.
pub fn redacted(url: &str) -> String {
    // URL form: scheme://user:password@host…
    if let Some((scheme, rest)) = url.split_once("://") {
        if let Some((userinfo, host)) = rest.split_once('@') {
            if let Some((user, _)) = userinfo.split_once(':') {
                return format!("{scheme}://{user}:***@{host}");
            }
        }
        return url.to_string();
    }
    // key=value form: password=… (possibly quoted) becomes password=***.
    url.split_whitespace()
        .map(|kv| if kv.starts_with("password=") { "password=***" } else { kv })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn a_url_is_shown_without_its_password() {
        let t = PgTarget::with_env("postgres://corral:s3cret@db.example:5433/em", None, env(&[])).unwrap();
        assert_eq!(t.shown(), "postgresql://corral@db.example:5433/em");
        assert!(!format!("{t:?}").contains("s3cret"));
        let t = PgTarget::with_env("host=/tmp/pg port=7000 user=u password=s3cret dbname=c", None, env(&[])).unwrap();
        assert_eq!(t.shown(), "postgresql://u@/c?host=/tmp/pg&port=7000");
    }

    #[test]
    fn what_the_url_leaves_out_comes_from_libpq_s_variables_and_the_password_file_wins() {
        let vars: &[(&str, &str)] = &[
            ("PGHOST", "db.example"),
            ("PGPORT", "6543"),
            ("PGUSER", "gw"),
            ("PGDATABASE", "corral"),
            ("PGPASSWORD", "env"),
        ];
        let t = PgTarget::with_env("postgres://", None, env(vars)).unwrap();
        assert_eq!(t.shown(), "postgresql://gw@db.example:6543/corral");
        assert_eq!(t.config.get_password(), Some(&b"env"[..]));
        let t = PgTarget::with_env("postgres://", Some("file".into()), env(vars)).unwrap();
        assert_eq!(t.config.get_password(), Some(&b"file"[..]));
        // What the URL says beats the environment; a URL that names a host names its port (5432 unless
        // given), as the driver reads it.
        let t = PgTarget::with_env("postgres://other@h2/x", None, env(vars)).unwrap();
        assert_eq!(t.shown(), "postgresql://other@h2:5432/x");
    }

    #[test]
    fn a_bad_string_or_variable_is_named_without_the_password() {
        let e = PgTarget::with_env("postgres://u:s3cret@h:notaport/x", None, env(&[])).unwrap_err();
        assert!(e.contains("not a PostgreSQL connection string") && !e.contains("s3cret"), "{e}");
        let e = PgTarget::with_env("postgres://", None, env(&[("PGPORT", "x")])).unwrap_err();
        assert!(e.contains("PGPORT=x"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "").unwrap();
        let e = PgTarget::new("postgres://", Some(&file)).unwrap_err();
        assert!(e.contains("is empty"), "{e}");
        std::fs::write(&file, "pa ss\n").unwrap();
        assert_eq!(read_password(&file).unwrap(), "pa ss");
    }

    #[test]
    fn a_password_never_reaches_a_message() {
        assert_eq!(
            redacted("postgresql://corral:s3cret@db.example:5432/corral"),
            "postgresql://corral:***@db.example:5432/corral"
        );
        assert_eq!(redacted("postgresql://corral@db.example/corral"), "postgresql://corral@db.example/corral");
        assert_eq!(
            redacted("host=/tmp/x user=corral password=s3cret dbname=c"),
            "host=/tmp/x user=corral password=*** dbname=c"
        );
    }
}
