//! Helpers shared by the command-line and interop tests: run the built `corral` binary and peers with
//! time limits, and start servers on ephemeral ports.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const CORRAL: &str = env!("CARGO_BIN_EXE_corral");

/// Runs a command to completion, killing it if it exceeds `limit` (then the test fails loudly). Output is
/// read while the command runs, so a command that prints megabytes does not block on a full pipe.
pub fn run(cmd: &mut Command, limit: Duration) -> Output {
    let desc = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {desc}: {e}"));
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("stdout is piped")));
    let err = drain(Box::new(child.stderr.take().expect("stderr is piped")));
    let start = Instant::now();
    let status = loop {
        match child.try_wait().expect("wait on child") {
            Some(status) => break status,
            None if start.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                let (out, err) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
                panic!(
                    "{desc} did not finish within {limit:?}\nstdout: {}\nstderr: {}",
                    String::from_utf8_lossy(&out[..out.len().min(4096)]),
                    String::from_utf8_lossy(&err)
                );
            }
            None => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    Output { status, stdout: out.join().unwrap_or_default(), stderr: err.join().unwrap_or_default() }
}

/// `corral ARGS…` with a 20-second limit.
pub fn corral(args: &[&str]) -> Output {
    run(Command::new(CORRAL).args(args), Duration::from_secs(20))
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A server process that is killed when dropped.
pub struct Proc {
    pub child: Child,
    pub port: u16,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    /// Resident memory of the process in KiB (Linux), for memory-bound checks.
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }
}

/// Starts `corral serve --bind ADDR:0 EXTRA…` and reads its port from the banner.
pub fn corral_serve(bind_host: &str, extra: &[&str]) -> Proc {
    let bind = format!("{bind_host}:0");
    let mut args = vec!["serve", "--bind", bind.as_str()];
    args.extend_from_slice(extra);
    spawn_with_port(Command::new(CORRAL).args(&args), |line| {
        let addr = line.strip_prefix("corral serve: listening on ")?;
        let addr = addr.split_whitespace().next()?;
        addr.rsplit_once(':')?.1.parse().ok()
    })
}

/// Spawns a server and waits (at most 20 s) for a stdout line from which `port_of` extracts its port.
pub fn spawn_with_port(cmd: &mut Command, port_of: impl Fn(&str) -> Option<u16> + Send + 'static) -> Proc {
    let desc = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {desc}: {e}"));
    let stdout = child.stdout.take().expect("stdout is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(p) = port_of(&line) {
                let _ = tx.send(p);
            }
        }
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(port) => Proc { child, port },
        Err(_) => {
            let _ = child.kill();
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("{desc} did not report its port within 20 s; stderr: {err}");
        }
    }
}

/// A UDP port that was free a moment ago (for peers that cannot bind port 0 and report it).
pub fn free_udp_port() -> u16 {
    let s = std::net::UdpSocket::bind("[::]:0").expect("bind an ephemeral port");
    s.local_addr().expect("local address").port()
}
