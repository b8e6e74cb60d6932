//! FIB rules whose next hops follow a Resource Directory (issue 32), with the real binary on real sockets:
//! `corral rd`, `corral device --rd` devices, and `corral proxy --rd` with a rule `next = ["rd:…"]`. A
//! device that registers becomes a next hop (the next request fans out to it too), one that leaves is no
//! longer asked; `/proxy` and `/proxy/fib` show the rule as the directory's.

use crate::common;
use common::*;
use std::process::Command;
use std::time::{Duration, Instant};

/// `corral rd` on a free port with a data directory of its own: (the directory, the process, its URI).
fn directory() -> (tempfile::TempDir, Proc, String) {
    let data = tempfile::tempdir().unwrap();
    let rd = spawn_with_port(
        Command::new(CORRAL).args(["rd", "--bind", "127.0.0.1:0", "--data", data.path().to_str().unwrap()]),
        banner_port,
    );
    let uri = format!("coap://127.0.0.1:{}", rd.port);
    (data, rd, uri)
}

/// `corral device --rd RD` at `bind` (lifetime 60 s).
fn device(bind: &str, rd: &str) -> Proc {
    let args = ["device", "--bind", bind, "--rd", rd, "--rd-lifetime", "60", "--json"];
    spawn_json(Command::new(CORRAL).args(args)).0
}

/// The next hops `/proxy` lists for the directory's rule, sorted.
fn next_hops(proxy: &str) -> Vec<String> {
    let status = proxy_status(proxy);
    let mut next: Vec<String> = status["directory"][0]["next"]
        .as_array()
        .map(|a| a.iter().filter_map(|h| h.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    next.sort();
    next
}

/// Polls `/proxy` (every 0.3 s, at most 20 s) until the rule's next hops are `want`.
fn wait_hops(proxy: &str, want: &[String]) -> Vec<String> {
    let start = Instant::now();
    loop {
        let hops = next_hops(proxy);
        if hops == want || start.elapsed() > Duration::from_secs(20) {
            return hops;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Requests sent to each hop so far (`/proxy`'s per-hop counters).
fn asked(proxy: &str, hop: &str) -> u64 {
    proxy_status(proxy)["stats"]["per_hop"][hop]["requests"].as_u64().unwrap_or(0)
}

#[test]
fn a_rules_next_hops_follow_the_devices_that_register_and_leave() {
    let (_data, _rd, rd_uri) = directory();
    let port = free_udp_port();
    let hop = |host: &str| format!("coap://{host}:{port}");
    let a = device(&format!("127.0.72.2:{port}"), &rd_uri);
    let b = device(&format!("127.0.72.3:{port}"), &rd_uri);

    let (_files, paths) = write_files(&[("fib.toml", "[[rule]]\nmatch = \"/s/t\"\nnext = [\"rd:rt=temperature\"]\n")]);
    let args = ["proxy", "--bind", "127.0.0.1:0", "--fib", &paths[0], "--rd", &rd_uri, "--json"];
    let (_proxy, j) = spawn_json(Command::new(CORRAL).args(args));
    let proxy = j["proxy_uri"].as_str().expect("the proxy's URI").to_string();
    let two = vec![hop("127.0.72.2"), hop("127.0.72.3")];
    assert_eq!(wait_hops(&proxy, &two), two, "the devices registered before the proxy started");
    let fib = stdout(&corral(&["get", &format!("{proxy}/proxy/fib")]));
    assert!(fib.contains("\"rd\": \"rt=temperature\""), "{fib}");

    // Each request goes to a target of its own (no cache hit): every next hop gets a copy.
    let mut n = 0;
    let mut ask = || {
        n += 1;
        let o = corral(&["get", &format!("coap://127.0.72.200:{port}/s/t?n={n}"), "-P", &proxy]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    };
    ask();
    assert_eq!((asked(&proxy, &hop("127.0.72.2")), asked(&proxy, &hop("127.0.72.3"))), (1, 1));

    // A third device registers: the next request fans out to it too.
    let _c = device(&format!("127.0.72.4:{port}"), &rd_uri);
    let three = vec![hop("127.0.72.2"), hop("127.0.72.3"), hop("127.0.72.4")];
    assert_eq!(wait_hops(&proxy, &three), three);
    ask();
    assert_eq!(asked(&proxy, &hop("127.0.72.4")), 1);

    // One leaves (a clean stop removes its registration): it is no longer asked.
    let pid = b.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let two = vec![hop("127.0.72.2"), hop("127.0.72.4")];
    assert_eq!(wait_hops(&proxy, &two), two);
    ask();
    assert_eq!(asked(&proxy, &hop("127.0.72.3")), 2, "the device that left was not asked again");
    assert_eq!((asked(&proxy, &hop("127.0.72.2")), asked(&proxy, &hop("127.0.72.4"))), (3, 2));
    drop(a);
}

#[test]
fn a_directory_rule_without_a_directory_is_a_usage_error() {
    let (_files, paths) = write_files(&[("fib.toml", "[[rule]]\nmatch = \"/s/t\"\nnext = [\"rd:rt=temperature\"]\n")]);
    let o = corral(&["proxy", "--bind", "127.0.0.1:0", "--fib", &paths[0]]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("--rd URI"), "{}", stderr(&o));
}

/// A forger's responder at `at`: answers every CON request at once with `2.05 "66.6"` and Max-Age 3600,
/// and counts the requests it got.
fn forger(at: &str) -> std::sync::Arc<std::sync::atomic::AtomicUsize> {
    use corral_proto::wire::{Code, Message, MessageType, OptionNumber};
    let sock = std::net::UdpSocket::bind(at).expect("the forger's socket");
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = asked.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            let Ok(req) = Message::parse(&buf[..n]) else { continue };
            if req.mtype != MessageType::Con || !req.code.is_request() {
                continue;
            }
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut r = Message::new(MessageType::Ack, Code::CONTENT, req.mid, req.token);
            r.options.set_uint(OptionNumber::MAX_AGE, 3600);
            r.payload = b"66.6".to_vec();
            let _ = sock.send_to(&r.encode(), from);
        }
    });
    asked
}

/// Issue 41 item 7: anyone who may register adds a next hop to an `rd:` rule. The proxy here admits clients
/// from other hosts (`--allow … 192.0.2.0/24`) and forwards for them to 127.0.76.0/24 on the devices' port
/// only; a registrant adds `base=coap://127.0.77.9:PORT` (this host, outside those networks, where its own
/// responder forges `66.6` with Max-Age 3600) and `base=coap://127.0.76.9:22` (a refused port). Neither
/// becomes a next hop (the rule's note names both), nothing is sent to them, and what clients get — and
/// what the cache keeps — is the device's reading.
#[test]
fn a_registrant_cannot_steer_the_proxy_where_its_destination_policy_refuses() {
    let (_data, _rd, rd_uri) = directory();
    let port = free_udp_port();
    let forged = forger(&format!("127.0.77.9:{port}"));
    for (ep, base) in [("evil", format!("coap://127.0.77.9:{port}")), ("evil22", "coap://127.0.76.9:22".into())] {
        let reg = format!("{rd_uri}/rd?ep={ep}&lt=600&base={base}");
        let o = corral(&["post", &reg, "-t", "link", "-e", "</s/t>;rt=temperature"]);
        assert_eq!(code(&o), 0, "{}", described(&o));
    }
    let _device = device(&format!("127.0.76.2:{port}"), &rd_uri);

    let (_files, paths) = write_files(&[("fib.toml", "[[rule]]\nmatch = \"/s/t\"\nnext = [\"rd:rt=temperature\"]\n")]);
    let port_s = port.to_string();
    let args = [
        "proxy",
        "--bind",
        "127.0.0.1:0",
        "--fib",
        &paths[0],
        "--rd",
        &rd_uri,
        "--allow",
        "127.0.0.0/8,192.0.2.0/24",
        "--dest-this-host",
        "--dest-net",
        "127.0.76.0/24",
        "--dest-port",
        &port_s,
        "--json",
    ];
    let (_proxy, j) = spawn_json(Command::new(CORRAL).args(args));
    let proxy = j["proxy_uri"].as_str().expect("the proxy's URI").to_string();
    let device_hop = format!("coap://127.0.76.2:{port}");
    let hops = wait_hops(&proxy, std::slice::from_ref(&device_hop));
    let status = proxy_status(&proxy);
    assert_eq!(hops, std::slice::from_ref(&device_hop), "only the device is a next hop: {status}");
    let note = status["directory"][0]["note"].as_str().unwrap_or_default().to_string();
    assert!(note.contains(&format!("127.0.77.9:{port}/s/t")) && note.contains("127.0.76.9:22/s/t"), "{status}");

    for client in 0..2 {
        let o = corral(&["get", &format!("coap://127.0.76.200:{port}/s/t"), "-P", &proxy]);
        assert_eq!(code(&o), 0, "{}", described(&o));
        assert!(!stdout(&o).contains("66.6"), "client {client} got the forger's answer: {}", stdout(&o));
    }
    assert_eq!(forged.load(std::sync::atomic::Ordering::Relaxed), 0, "the forger's responder was asked");
    assert_eq!(asked(&proxy, "coap://127.0.76.9:22"), 0, "port 22 was asked");
    assert_eq!(asked(&proxy, &device_hop), 1, "the device answered the first client, the cache the second");
    let cache = stdout(&corral(&["get", &format!("{proxy}/proxy/cache")]));
    assert!(!cache.contains("66.6"), "{cache}");
}
