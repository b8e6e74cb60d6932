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
    let (mut child, desc) = spawn_piped(cmd);
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

/// Starts `cmd` with no stdin and its output piped; the child and the command as the failures name it.
fn spawn_piped(cmd: &mut Command) -> (Child, String) {
    let desc = format!("{cmd:?}");
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {desc}: {e}"));
    (child, desc)
}

/// When [`interrupt`] sends its signal.
pub enum Once {
    /// The command's standard output has a line.
    Line,
    /// This long after the start.
    After(Duration),
    /// This returns true (asked every 100 ms).
    Ready(Box<dyn FnMut() -> bool>),
}

/// Runs `cmd` and interrupts it as Ctrl-C does (SIGINT) once it is under way (`once`, within 20 s), then
/// waits (at most 20 s) for it to end. Its output and status.
pub fn interrupt(cmd: &mut Command, once: Once) -> Output {
    let (mut child, desc) = spawn_piped(cmd);
    let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (sink, mut stdout) = (out.clone(), child.stdout.take().expect("stdout is piped"));
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().expect("output buffer").extend_from_slice(&buf[..n]);
        }
    });
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf
    });
    let start = Instant::now();
    match once {
        Once::After(d) => std::thread::sleep(d),
        Once::Line => {
            while !out.lock().expect("output buffer").contains(&b'\n') {
                assert!(start.elapsed() < Duration::from_secs(20), "{desc} printed no line within 20 s");
                assert!(child.try_wait().expect("wait on child").is_none(), "{desc} ended before it printed a line");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Once::Ready(mut ready) => {
            while !ready() {
                assert!(start.elapsed() < Duration::from_secs(20), "{desc} was not ready within 20 s");
                assert!(child.try_wait().expect("wait on child").is_none(), "{desc} ended before it was ready");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    let sent = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
    assert!(sent.is_ok_and(|s| s.success()), "kill -INT {desc}");
    let signalled = Instant::now();
    let status = loop {
        match child.try_wait().expect("wait on child") {
            Some(status) => break status,
            None if signalled.elapsed() > Duration::from_secs(20) => {
                let _ = child.kill();
                panic!("{desc} did not end within 20 s of SIGINT");
            }
            None => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    let _ = reader.join();
    let stdout = std::mem::take(&mut *out.lock().expect("output buffer"));
    Output { status, stdout, stderr: err.join().unwrap_or_default() }
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

/// Starts `corral serve --bind ADDR:0 --json EXTRA…` and reads its port from the summary line (which `-q`
/// leaves, unlike the banner).
pub fn corral_serve(bind_host: &str, extra: &[&str]) -> Proc {
    let bind = format!("{bind_host}:0");
    let mut args = vec!["serve", "--bind", bind.as_str(), "--json"];
    args.extend_from_slice(extra);
    spawn_with_port(Command::new(CORRAL).args(&args), json_port)
}

/// The UDP port in a server's `--json` summary line (`{"udp":"ADDR:PORT",…}`).
pub fn json_port(line: &str) -> Option<u16> {
    let j: serde_json::Value = serde_json::from_str(line).ok()?;
    j["udp"].as_str()?.rsplit_once(':')?.1.parse().ok()
}

/// Spawns a server and waits (at most 20 s) for a stdout line from which `port_of` extracts its port.
pub fn spawn_with_port(cmd: &mut Command, port_of: impl Fn(&str) -> Option<u16> + Send + 'static) -> Proc {
    let (child, port) = spawn_until(cmd, "its port", port_of);
    Proc { child, port }
}

/// Spawns a process and waits (at most 20 s) for the first stdout line `pick` accepts. Both pipes stay
/// drained afterwards, so a long-running server never blocks on a full pipe; stderr is kept (up to
/// 64 KiB) for the panic message when nothing came.
fn spawn_until<T: Send + 'static>(
    cmd: &mut Command,
    what: &str,
    mut pick: impl FnMut(&str) -> Option<T> + Send + 'static,
) -> (Child, T) {
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
        let mut tx = Some(tx);
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(v) = tx.as_ref().and_then(|_| pick(&line)) {
                let _ = tx.take().map(|t| t.send(v));
            }
        }
    });
    let stderr = child.stderr.take().expect("stderr is piped");
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let sink = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(mut l) = sink.lock() {
                if l.len() < 1 << 16 {
                    l.push_str(&line);
                    l.push('\n');
                }
            }
        }
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(v) => (child, v),
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            std::thread::sleep(Duration::from_millis(100));
            let err = log.lock().map(|l| l.clone()).unwrap_or_default();
            panic!("{desc} did not report {what} within 20 s; stderr: {err}");
        }
    }
}

/// A UDP port that was free a moment ago (for peers that cannot bind port 0 and report it).
pub fn free_udp_port() -> u16 {
    let s = std::net::UdpSocket::bind("[::]:0").expect("bind an ephemeral port");
    s.local_addr().expect("local address").port()
}

/// Starts a process whose first stdout line is a JSON summary (`corral gateway --json`,
/// `corral device --json`, `corral serve --json`) and waits (at most 20 s) for it.
pub fn spawn_json(cmd: &mut Command) -> (Proc, serde_json::Value) {
    let desc = format!("{cmd:?}");
    let mut first = true;
    let (child, line) = spawn_until(cmd, "a summary", move |l| std::mem::take(&mut first).then(|| l.to_string()));
    let j = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{desc}: summary is not JSON ({e}): {line}"));
    (Proc { child, port: 0 }, j)
}

/// `corral gateway --testbed n` on loopback subnet 127.0.`subnet`.x, ephemeral ports, a scratch data
/// directory and a 0.3 s multicast leisure; returns the gateway, its summary and the directory.
pub fn corral_testbed(n: usize, subnet: u8, extra: &[&str]) -> (Proc, serde_json::Value, tempfile::TempDir) {
    let data = tempfile::tempdir().expect("temporary directory");
    let (n, from, dir) = (n.to_string(), format!("127.0.{subnet}.1:0"), data.path().display().to_string());
    let mut args = vec!["gateway", "--bind", "127.0.0.1:0", "--testbed", &n, "--testbed-from", &from];
    args.extend(["--leisure", "0.3", "--json", "--data", &dir]);
    args.extend_from_slice(extra);
    let (p, j) = spawn_json(Command::new(CORRAL).args(&args));
    (p, j, data)
}

/// A throwaway network namespace with a bridge `br0` that carries `addrs` (IPv6 multicast needs an
/// interface that does multicast; loopback does not). Deleted on drop.
pub struct Netns {
    pub name: String,
    /// The bridge's interface index, for `--mcast-if6`.
    pub br0_index: String,
}

impl Netns {
    /// `None` when namespaces are unavailable (not root, no iproute2): the caller skips its test.
    pub fn new(tag: &str, addrs: &[&str]) -> Option<Netns> {
        // Unique within the process too: the tests of one binary run two at a time and may share a tag.
        static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("corral-{tag}-{}-{n}", std::process::id());
        let ok = Command::new("ip").args(["netns", "add", &name]).output().is_ok_and(|o| o.status.success());
        if !ok {
            println!("skipped: cannot create a network namespace (needs root and iproute2)");
            return None;
        }
        let mut ns = Netns { name, br0_index: String::new() };
        let ip = |args: &[&str]| run(Command::new("ip").arg("-n").arg(&ns.name).args(args), Duration::from_secs(10));
        let mut steps: Vec<Vec<&str>> = vec![
            vec!["link", "set", "lo", "up"],
            vec!["link", "add", "br0", "type", "bridge"],
            vec!["link", "set", "br0", "up"],
        ];
        let with_prefix: Vec<String> = addrs.iter().map(|a| format!("{a}/64")).collect();
        steps.extend(with_prefix.iter().map(|a| vec!["addr", "add", a.as_str(), "dev", "br0", "nodad"]));
        for args in steps {
            let o = ip(&args);
            assert!(o.status.success(), "ip -n {} {args:?}: {}", ns.name, stderr(&o));
        }
        let index = run(ns.command("cat").arg("/sys/class/net/br0/ifindex"), Duration::from_secs(10));
        ns.br0_index = String::from_utf8_lossy(&index.stdout).trim().to_string();
        Some(ns)
    }

    /// `program` run inside the namespace (`ip netns exec` execs it: the child's pid is the program's).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

/// A blocking CoAP client for the test's own requests.
pub struct Coap {
    pub rt: tokio::runtime::Runtime,
    pub client: corral_tokio::Client,
}

impl Coap {
    pub fn new() -> Coap {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let client = rt
            .block_on(corral_tokio::Client::builder().timeout(Duration::from_secs(15)).bind("0.0.0.0:0"))
            .expect("client socket");
        Coap { rt, client }
    }

    pub fn request(
        &self,
        method: corral_tokio::Code,
        uri: &str,
        accept: Option<corral_tokio::ContentFormat>,
        payload: Option<&[u8]>,
    ) -> corral_tokio::Response {
        self.rt.block_on(async {
            let mut req = self.client.request(method, uri);
            if let Some(a) = accept {
                req = req.accept(a);
            }
            if let Some(p) = payload {
                req = req.payload(p.to_vec());
            }
            req.await.unwrap_or_else(|e| panic!("{method} {uri}: {e}"))
        })
    }

    pub fn get(&self, uri: &str, accept: Option<corral_tokio::ContentFormat>) -> corral_tokio::Response {
        self.request(corral_tokio::Code::GET, uri, accept, None)
    }
}

/// Whether interop tests run (`CORRAL_INTEROP=1`, as scripts/test.sh sets); panics if they should but a
/// peer is missing.
pub fn interop_enabled(peers: &[&str]) -> bool {
    if std::env::var("CORRAL_INTEROP").as_deref() != Ok("1") {
        println!("skipped: set CORRAL_INTEROP=1 to run interop tests (scripts/test.sh does)");
        return false;
    }
    for peer in peers {
        let found =
            Command::new("sh").arg("-c").arg(format!("command -v {peer}")).output().is_ok_and(|o| o.status.success());
        assert!(found, "CORRAL_INTEROP=1 but `{peer}` is not installed: run scripts/install-peers.sh");
    }
    true
}

/// libcoap's `coap-server-notls -p PORT EXTRA…` on a port free for UDP and TCP a moment ago (it cannot
/// report an ephemeral port), once it answers.
pub fn libcoap_server_with(extra: &[&str]) -> Proc {
    for _ in 0..5 {
        let port = free_udp_port();
        if std::net::TcpListener::bind(("::", port)).is_err() {
            continue;
        }
        let child = spawn_libcoap_server("coap-server-notls", port, extra);
        let server = Proc { child, port };
        let o = corral(&["get", &format!("coap://127.0.0.1:{port}/"), "-B", "3"]);
        if o.status.code().is_some_and(|c| c == 0 || c == 4 || c == 5) {
            return server;
        }
    }
    panic!("coap-server-notls did not come up");
}

/// Two throwaway network namespaces joined by a veth pair — two hosts on one network: `a` has
/// 10.`net`.0.1/24 and `b` 10.`net`.0.2/24 (plus `extra_b`, more addresses of `b`'s, e.g. a victim's for
/// spoofing). `None` (the caller skips) without root.
pub fn netns_pair(tag: &str, net: u8, extra_b: &[&str]) -> Option<(Netns, Netns)> {
    let a = Netns::new(&format!("{tag}a"), &[])?;
    let b = Netns::new(&format!("{tag}b"), &[])?;
    let ip = |ns: &Netns, args: &[&str]| {
        let o = run(Command::new("ip").arg("-n").arg(&ns.name).args(args), Duration::from_secs(10));
        assert!(o.status.success(), "ip -n {} {args:?}: {}", ns.name, stderr(&o));
    };
    ip(&a, &["link", "add", "v0", "type", "veth", "peer", "name", "v1", "netns", &b.name]);
    let (addr_a, addr_b) = (format!("10.{net}.0.1/24"), format!("10.{net}.0.2/24"));
    ip(&a, &["addr", "add", &addr_a, "dev", "v0"]);
    ip(&a, &["link", "set", "v0", "up"]);
    ip(&b, &["addr", "add", &addr_b, "dev", "v1"]);
    for extra in extra_b {
        ip(&b, &["addr", "add", &format!("{extra}/24"), "dev", "v1"]);
    }
    ip(&b, &["link", "set", "v1", "up"]);
    Some((a, b))
}

/// The port in a server's first banner line, `corral NAME: listening on ADDR:PORT…` (serve, proxy,
/// stream recv), for `spawn_with_port` when the server is started some other way than `corral_serve`.
pub fn banner_port(line: &str) -> Option<u16> {
    let (_, rest) = line.split_once(": listening on ")?;
    rest.split([' ', ',']).next()?.rsplit_once(':')?.1.parse().ok()
}

/// A process's exit status (panics if a signal ended it).
pub fn code(o: &Output) -> i32 {
    o.status.code().expect("exited normally, not by a signal")
}

/// Writes UDP datagrams with any IPv4 source address (IP_HDRINCL).
pub struct Spoofer {
    sock: socket2::Socket,
    /// CoAP bytes sent so far.
    pub sent: usize,
}

impl Spoofer {
    /// `None` (and `skipped: …` printed) without a raw socket (not root).
    pub fn new() -> Option<Spoofer> {
        use socket2::{Domain, Protocol, Socket, Type};
        match Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::from(255))) {
            Ok(sock) => Some(Spoofer { sock, sent: 0 }),
            Err(e) => {
                println!("skipped: no raw socket ({e}); spoofing needs root");
                None
            }
        }
    }

    /// One datagram `payload` from `src` to `dst`, as if `src` had sent it.
    pub fn send(&mut self, src: std::net::SocketAddrV4, dst: std::net::SocketAddrV4, payload: &[u8]) {
        let total = 20 + 8 + payload.len();
        let mut p = Vec::with_capacity(total);
        p.extend_from_slice(&[0x45, 0, (total >> 8) as u8, total as u8, 0, 0, 0x40, 0, 64, 17, 0, 0]);
        p.extend_from_slice(&src.ip().octets());
        p.extend_from_slice(&dst.ip().octets());
        let udp_len = (8 + payload.len()) as u16;
        p.extend_from_slice(&src.port().to_be_bytes());
        p.extend_from_slice(&dst.port().to_be_bytes());
        p.extend_from_slice(&udp_len.to_be_bytes());
        p.extend_from_slice(&[0, 0]); // no UDP checksum (allowed over IPv4)
        p.extend_from_slice(payload);
        let to = socket2::SockAddr::from(std::net::SocketAddrV4::new(*dst.ip(), 0));
        self.sock.send_to(&p, &to).expect("raw send");
        self.sent += payload.len();
    }
}

/// A test PKI made with the openssl CLI in `dir`: a CA, a server certificate (CN and SAN 127.0.0.1)
/// and a client certificate (CN client) it signed, and a rogue CA with a server and a client
/// certificate of its own; P-256 keys in PEM (SEC1). Paths as strings.
pub struct Pki {
    pub ca: String,
    pub server: (String, String),
    pub client: (String, String),
    pub rogue_server: (String, String),
    pub rogue_client: (String, String),
}

pub fn test_pki(dir: &std::path::Path) -> Pki {
    let path = |name: &str| dir.join(name).display().to_string();
    let openssl = |args: &[&str]| {
        let o = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl is installed");
        assert!(o.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    let key = |name: &str| openssl(&["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", name]);
    for ca in ["ca", "rogue-ca"] {
        key(&format!("{ca}.key"));
        let subj = format!("/CN=corral test {ca}");
        let (k, p) = (format!("{ca}.key"), format!("{ca}.pem"));
        openssl(&["req", "-x509", "-new", "-key", &k, "-subj", &subj, "-days", "30", "-sha256", "-out", &p]);
    }
    std::fs::write(dir.join("server.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    std::fs::write(dir.join("client.ext"), "subjectAltName=DNS:client.example\n").unwrap();
    let leaf = |name: &str, cn: &str, ca: &str, ext: &str| {
        let (k, csr, pem) = (format!("{name}.key"), format!("{name}.csr"), format!("{name}.pem"));
        key(&k);
        openssl(&["req", "-new", "-key", &k, "-subj", &format!("/CN={cn}"), "-out", &csr]);
        let (ca_pem, ca_key) = (format!("{ca}.pem"), format!("{ca}.key"));
        openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_pem,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "30",
            "-sha256",
            "-extfile",
            ext,
            "-out",
            &pem,
        ]);
        (path(&pem), path(&k))
    };
    Pki {
        ca: path("ca.pem"),
        server: leaf("server", "127.0.0.1", "ca", "server.ext"),
        client: leaf("client", "client", "ca", "client.ext"),
        rogue_server: leaf("rogue-server", "127.0.0.1", "rogue-ca", "server.ext"),
        rogue_client: leaf("rogue-client", "client", "rogue-ca", "client.ext"),
    }
}

/// libcoap's DTLS server `server` (coap-server-gnutls, -openssl) with `extra` options (credentials), on a
/// port free a moment ago, once it answers; its DTLS port (libcoap's `-p` port + 1).
pub fn libcoap_dtls_server(server: &str, extra: &[&str]) -> Proc {
    for _ in 0..5 {
        let port = free_udp_port();
        if std::net::UdpSocket::bind(("127.0.0.1", port + 1)).is_err()
            || std::net::TcpListener::bind(("::", port)).is_err()
        {
            continue;
        }
        let child = spawn_libcoap_server(server, port, extra);
        let proc = Proc { child, port: port + 1 };
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(100));
            let o = corral(&["get", &format!("coap://127.0.0.1:{port}/"), "-B", "1"]);
            if o.status.code().is_some_and(|c| c == 0 || c == 4 || c == 5) {
                // The plain endpoint answers; the DTLS one is up only if its port is taken now. Another
                // test's socket may have taken it since it was found free, and libcoap then serves
                // without it (the client meets "port unreachable"): try another port.
                if std::net::UdpSocket::bind(("127.0.0.1", port + 1)).is_err() {
                    return proc;
                }
                break;
            }
        }
    }
    panic!("{server} did not come up");
}

/// A libcoap server `server -p PORT EXTRA…`, quiet.
fn spawn_libcoap_server(server: &str, port: u16, extra: &[&str]) -> Child {
    Command::new(server)
        .args(["-p", &port.to_string()])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {server}: {e}"))
}

/// `corral serve` with plain CoAP on an ephemeral port and coaps:// (PSK `alice` / `secretPSK`) on
/// another; the PSK file's directory lives as long as the returned guard.
pub fn corral_dtls_server() -> (tempfile::TempDir, Proc) {
    let dir = tempfile::tempdir().unwrap();
    let psk = dir.path().join("psk.json");
    std::fs::write(&psk, r#"{"alice": "secretPSK"}"#).unwrap();
    let s = coaps_serve(psk.to_str().unwrap());
    (dir, s)
}

/// Writes `files` (name, contents) into a fresh directory that lives as long as the returned guard; their
/// paths, in order.
pub fn write_files(files: &[(&str, &str)]) -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let paths = files
        .iter()
        .map(|(name, text)| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path.display().to_string()
        })
        .collect();
    (dir, paths)
}

/// `corral serve` with plain CoAP and coaps:// (PSK file `psk`) on ephemeral loopback ports; the
/// returned `Proc`'s port is the coaps:// one.
pub fn coaps_serve(psk: &str) -> Proc {
    let mut cmd = Command::new(CORRAL);
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--dtls", "127.0.0.1:0", "--psk-file", psk]);
    spawn_with_port(&mut cmd, |line| {
        line.strip_prefix("corral serve: coaps:// (DTLS 1.2, PSK) on ")?.rsplit_once(':')?.1.parse().ok()
    })
}

/// `corral device --count COUNT --rd RD --rd-lifetime 60 --json` on loopback: the devices and their summary.
pub fn rd_devices(rd: &str, count: u32) -> (Proc, serde_json::Value) {
    let count = count.to_string();
    let args = ["device", "--bind", "127.0.0.1:0", "--count", &count, "--rd", rd, "--rd-lifetime", "60", "--json"];
    spawn_json(Command::new(CORRAL).args(args))
}

/// A command's outcome for an assertion's message: its status, stdout and stderr.
pub fn described(o: &Output) -> String {
    format!("status {:?}\nstdout: {}\nstderr: {}", o.status.code(), stdout(o), stderr(o))
}

/// The proxy's status (`GET /proxy`, JSON).
pub fn proxy_status(proxy: &str) -> serde_json::Value {
    let o = corral(&["get", &format!("{proxy}/proxy")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).expect("status is JSON")
}

/// Group members and a group-forwarding proxy (`--allow-group`).
pub mod group;

/// Raw public keys (RFC 7250) made with the openssl CLI in `dir`: for `server`, `client` and `rogue`,
/// a P-256 private key (PEM, SEC1, as libcoap's -M takes it) and its public key (PEM PUBLIC KEY, as
/// --peer-key takes it). Paths as strings, (private, public).
pub struct RpkKeys {
    pub server: (String, String),
    pub client: (String, String),
    pub rogue: (String, String),
}

pub fn test_rpk_keys(dir: &std::path::Path) -> RpkKeys {
    let openssl = |args: &[&str]| {
        let o = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl is installed");
        assert!(o.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    let pair = |name: &str| {
        let (key, public) = (format!("{name}.key"), format!("{name}.pub"));
        openssl(&["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", &key]);
        openssl(&["ec", "-in", &key, "-pubout", "-out", &public]);
        (dir.join(key).display().to_string(), dir.join(public).display().to_string())
    };
    RpkKeys { server: pair("server"), client: pair("client"), rogue: pair("rogue") }
}

/// `corral serve --tls` at `at` with `server` (certificate, key) and, with `ca`, client certificates
/// required (that CA's); plain CoAP on an ephemeral loopback port. The `Proc`'s port is the coaps+tcp://
/// one.
pub fn corral_tls_server(at: &str, server: &(String, String), ca: Option<&str>, extra: &[&str]) -> Proc {
    let mut cmd = Command::new(CORRAL);
    cmd.args(["serve", "--bind", "127.0.0.1:0", "--tls", at, "--cert", &server.0, "--key", &server.1]);
    if let Some(ca) = ca {
        cmd.args(["--ca", ca]);
    }
    cmd.args(extra);
    spawn_with_port(&mut cmd, |line| {
        line.strip_prefix("corral serve: coaps+tcp:// (TLS, ")?.rsplit_once(':')?.1.parse().ok()
    })
}
