//! `corral wait URI…`: waits until a server started in the background is up, so that a script (and every
//! page of the docs, pasted into a shell) uses it only once it answers, instead of sleeping and hoping.
//!
//! A URI without a path asks whether something listens there, by the cheapest answer its transport has:
//! a CoAP ping over UDP (an Empty CON, answered with RST; RFC 7252 §4.3), an accepted connection over TCP
//! (coap+tcp://, coaps+tcp://), a DTLS ClientHello answered at all (coaps://: a server answers a
//! ClientHello without a cookie with a HelloVerifyRequest before it keeps any state or knows a key, RFC
//! 6347 §4.2.1). A URI with a path (or a query) is a GET that must answer 2.xx, and with `--for TEXT` a
//! payload containing TEXT: a directory that lists a device, an entity with its members.
//!
//! Owns: the probes and the retry loop (port unreachable and silence are retried until `-B`). Never
//! sends anything but those probes and GETs; never prints on success unless asked (`-v`).

use crate::cli::exit::{ExitCode, Failure};
use crate::cli::units;
use clap::Args;
use corral_tokio::corral_proto::wire::{Message, MessageId, MessageType};
use corral_tokio::uri::{Host, Scheme, Uri};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::time::{Duration, Instant};

pub const AFTER_HELP: &str = "\
A URI without a path waits until something listens there: a CoAP ping answered (coap://), a TCP \
connection accepted (coap+tcp://, coaps+tcp://), a DTLS ClientHello answered (coaps://; no key is \
needed). A URI with a path waits until a GET of it answers 2.xx, and with --for TEXT until the payload \
contains TEXT. Port unreachable and silence are retried until -B; then the exit status is 3 and the \
line names what did not answer.

Examples:
  corral serve --bind 127.0.0.1:5701 -q & server=$!
  corral wait coap://127.0.0.1:5701                 # the server answers: go on
  corral wait coaps://127.0.0.1:5684 coap+tcp://127.0.0.1 -B 30s
  # a directory that lists the device dev-127.0.0.3-5683:
  corral wait 'coap://127.0.0.1:5690/rd-lookup/ep' --for dev-127.0.0.3-5683";

#[derive(Args, Debug)]
pub struct WaitArgs {
    /// What to wait for: coap://, coap+tcp://, coaps:// or coaps+tcp:// HOST[:PORT], with a path for a
    /// GET that must answer 2.xx.
    #[arg(required = true, value_name = "URI")]
    pub uris: Vec<String>,
    /// How long to wait for all of them, e.g. 10s, 500ms, 2m (a bare number is seconds).
    #[arg(short = 'B', long, visible_alias = "wait", value_name = "DURATION", default_value = "10",
          value_parser = units::secs(units::Range::positive(units::DAY)))]
    pub timeout: f64,
    /// With a path: wait until the GET's payload contains TEXT (e.g. a device's name in a directory lookup).
    #[arg(long = "for", value_name = "TEXT")]
    pub contains: Option<String>,
}

/// How long one probe waits for its answer before it is sent again.
const PROBE_WAIT: Duration = Duration::from_millis(250);
/// The pause after a probe that failed at once (port unreachable, connection refused).
const RETRY_PAUSE: Duration = Duration::from_millis(50);

pub fn run(args: WaitArgs, v: crate::cli::Verbosity) -> Result<(), Failure> {
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(args.timeout);
    let mut targets = Vec::new();
    for text in &args.uris {
        let uri = corral_tokio::parse_uri(text).map_err(|e| Failure::usage(e.to_string()))?;
        let get = !uri.path.is_empty() || !uri.query.is_empty();
        if !get && args.contains.is_some() {
            return Err(Failure::usage(format!("--for needs a URI with a path to GET; {text} has none")));
        }
        if get && matches!(uri.scheme, Scheme::Coaps | Scheme::CoapsTcp) {
            return Err(Failure::usage(format!(
                "{text}: wait GETs over coap:// and coap+tcp:// only (a secure GET needs keys); give no path \
                 to wait until the port answers"
            )));
        }
        targets.push((text, uri, get));
    }
    for (text, uri, get) in targets {
        let result = if get { wait_get(text, &args, deadline) } else { wait_listening(&uri, deadline) };
        result.map_err(|last| {
            let how = match (get, &args.contains) {
                (true, Some(t)) => format!("answered no 2.xx containing `{t}`"),
                (true, None) => "answered no 2.xx".to_string(),
                (false, _) => "did not answer".to_string(),
            };
            Failure::new(
                ExitCode::Timeout,
                format!("{text} {how} within {} (last: {last})", units::show_secs(args.timeout)),
            )
        })?;
        if v.verbose > 0 {
            say!("{text} answered after {}", units::show(start.elapsed()));
        }
    }
    Ok(())
}

/// Probes `uri`'s port until something answers; Err with the last failure at `deadline`.
fn wait_listening(uri: &Uri, deadline: Instant) -> Result<(), String> {
    let mut last = "nothing tried".to_string();
    while Instant::now() < deadline {
        let outcome = resolve(uri).and_then(|addr| match uri.scheme {
            Scheme::Coap => udp_probe(addr, &ping(), deadline),
            Scheme::Coaps => udp_probe(addr, &client_hello(), deadline),
            Scheme::CoapTcp | Scheme::CoapsTcp => {
                let wait = deadline.saturating_duration_since(Instant::now()).min(PROBE_WAIT);
                TcpStream::connect_timeout(&addr, wait.max(Duration::from_millis(1)))
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
        });
        match outcome {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
        std::thread::sleep(RETRY_PAUSE.min(deadline.saturating_duration_since(Instant::now())));
    }
    Err(last)
}

/// The first address of the URI's host and port.
fn resolve(uri: &Uri) -> Result<SocketAddr, String> {
    let host = match &uri.host {
        Host::Ip(ip) => return Ok(SocketAddr::new(*ip, uri.port)),
        Host::Name(n) => n.as_str(),
    };
    (host, uri.port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host} has no address"))
}

/// Sends `probe` and waits up to PROBE_WAIT for any datagram back: Ok when one comes, the error when the
/// port is unreachable (the kernel reports ICMP on a connected socket) or nothing came.
fn udp_probe(addr: SocketAddr, probe: &[u8], deadline: Instant) -> Result<(), String> {
    let local: SocketAddr =
        if addr.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { (std::net::Ipv6Addr::UNSPECIFIED, 0).into() };
    let socket = UdpSocket::bind(local).map_err(|e| format!("cannot open a UDP socket: {e}"))?;
    socket.connect(addr).map_err(|e| format!("cannot reach {addr}: {e}"))?;
    let wait = deadline.saturating_duration_since(Instant::now()).min(PROBE_WAIT).max(Duration::from_millis(1));
    socket.set_read_timeout(Some(wait)).map_err(|e| e.to_string())?;
    socket.send(probe).map_err(|e| format!("{addr}: {e}"))?;
    let mut buf = [0u8; 2048];
    match socket.recv(&mut buf) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Err(format!("{addr}: port unreachable")),
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
            Err(format!("{addr}: no answer"))
        }
        Err(e) => Err(format!("{addr}: {e}")),
    }
}

/// A CoAP ping: an Empty CON, which an endpoint answers with RST (RFC 7252 §4.3).
fn ping() -> Vec<u8> {
    Message::empty(MessageType::Con, MessageId(corral_tokio::os_seed() as u16)).encode()
}

/// A DTLS 1.2 ClientHello without a cookie (RFC 6347 §4.2.1): any DTLS server answers it statelessly with
/// a HelloVerifyRequest (or an alert), before it looks at keys or suites. It offers RFC 7252 §9's suites.
fn client_hello() -> Vec<u8> {
    const DTLS_1_2: [u8; 2] = [0xfe, 0xfd];
    let mut body = DTLS_1_2.to_vec();
    for _ in 0..4 {
        body.extend_from_slice(&corral_tokio::os_seed().to_be_bytes()); // 32 bytes of ClientHello.random
    }
    body.push(0); // session_id: empty
    body.push(0); // cookie: empty
                  // TLS_PSK_WITH_AES_128_CCM_8, TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8
    body.extend_from_slice(&[0x00, 0x04, 0xc0, 0xa8, 0xc0, 0xae]);
    body.extend_from_slice(&[0x01, 0x00]); // compression: null
    let len = (body.len() as u32).to_be_bytes();
    // Handshake header: client_hello (1), length, message_seq 0, fragment_offset 0, fragment_length.
    let mut handshake = vec![0x01, len[1], len[2], len[3], 0x00, 0x00, 0x00, 0x00, 0x00, len[1], len[2], len[3]];
    handshake.extend_from_slice(&body);
    // Record header: handshake (22), version, epoch 0, sequence number 0, length.
    let rec_len = (handshake.len() as u16).to_be_bytes();
    let mut record = vec![0x16, DTLS_1_2[0], DTLS_1_2[1], 0, 0, 0, 0, 0, 0, 0, 0, rec_len[0], rec_len[1]];
    record.extend_from_slice(&handshake);
    record
}

/// GETs `text` until it answers 2.xx (with `--for`'s text in its payload); Err with the last answer.
fn wait_get(text: &str, args: &WaitArgs, deadline: Instant) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    rt.block_on(async {
        let client = corral_tokio::Client::bind("[::]:0").await;
        let client = match client {
            Ok(c) => c,
            Err(_) => {
                corral_tokio::Client::bind("0.0.0.0:0").await.map_err(|e| format!("cannot open a UDP socket: {e}"))?
            }
        };
        let mut last = "nothing tried".to_string();
        while Instant::now() < deadline {
            let wait = deadline
                .saturating_duration_since(Instant::now())
                .clamp(Duration::from_millis(1), Duration::from_secs(2));
            match client.get(text).timeout(wait).send().await {
                Ok(r)
                    if r.code.is_success() && args.contains.as_deref().is_none_or(|t| r.payload_text().contains(t)) =>
                {
                    return Ok(());
                }
                Ok(r) => {
                    last = format!("{:#}: {}", r.code, r.payload_text().trim()).trim_end_matches([':', ' ']).to_string()
                }
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(RETRY_PAUSE.min(deadline.saturating_duration_since(Instant::now()))).await;
        }
        Err(last)
    })
}
