//! `corral proxy --allow-group` caches each member's answer to a group request
//! (draft-ietf-core-groupcomm-proxy -07 §7), on real sockets: three `corral device`s in a group, two
//! clients one after another within the answers' Max-Age (the devices' default, 60 s). The proxy does not
//! know the group's members, so the draft has it send the second request to the group too (§7.1: only a
//! proxy that knows every member may answer from its cache alone) — two multicast datagrams, counted in the
//! devices' request logs — and relay from its cache the answer of a member that does not answer this time
//! (here: it left the group), near the end of the client's Multicast-Timeout. Purged, the cache has
//! nothing for that member any more. A forger on the link that answers once (issue 41 item 9) is heard by
//! the client that asked, and by no later one.

use crate::common;
use common::group::*;
use common::*;
use std::collections::BTreeSet;

fn members_of(o: &std::process::Output) -> Vec<serde_json::Value> {
    assert_eq!(o.status.code(), Some(0), "{}", out(o));
    serde_json::from_slice::<serde_json::Value>(&o.stdout).expect("a JSON array").as_array().unwrap().clone()
}

fn from(answers: &[serde_json::Value]) -> BTreeSet<String> {
    answers.iter().map(|a| a["from"].as_str().unwrap().to_string()).collect()
}

fn max_age(answer: &serde_json::Value) -> Option<u64> {
    let options = answer["options"].as_array().unwrap();
    options.iter().find(|o| o["name"] == "Max-Age").and_then(|o| o["value"].as_u64())
}

#[test]
fn a_second_client_within_max_age_hears_every_member_and_the_request_still_goes_to_the_group() {
    let m = Members::start("127.0.82.2", [239, 255, 77, 37]);
    let members = ["--group-member", "127.0.82.0/24"];
    let (_p, proxy) = proxy(&[&["--allow-group", "239.255.77.37", "--mcast-if", "127.0.0.1"][..], &members].concat());
    let group = format!("coap://239.255.77.37:{}/s/t", m.port);
    let all: BTreeSet<String> = m.addrs.iter().cloned().collect();

    let first = members_of(&get_via(&proxy, &group, &["--mc-timeout", "2", "--json"]));
    assert_eq!(from(&first), all, "{first:?}");
    let gone = m.addrs[2].clone();
    m.leave(&gone);

    let second = members_of(&get_via(&proxy, &group, &["--mc-timeout", "2", "--json"]));
    assert_eq!(from(&second), all, "every member's answer, the one that left from the cache: {second:?}");
    let cached: Vec<_> = second.iter().filter(|a| a["from"] == gone.as_str()).collect();
    assert_eq!(cached.len(), 1, "{second:?}");
    assert!(max_age(cached[0]).is_some_and(|age| age < 60), "with the Max-Age it has left: {:?}", cached[0]);
    assert_eq!(cached[0]["payload"], first.iter().find(|a| a["from"] == gone.as_str()).unwrap()["payload"]);

    // Two multicast datagrams left the proxy (one per client); the member that left saw only the first.
    let seen = m.group_requests();
    let datagrams: BTreeSet<u64> = seen.iter().map(|(_, _, mid)| *mid).collect();
    assert_eq!(datagrams.len(), 2, "{seen:?}");
    assert_eq!(seen.len(), 5, "3 members, then 2: {seen:?}");
    let s = proxy_status(&proxy);
    assert_eq!(
        (s["stats"]["group_requests"].as_u64(), s["stats"]["group_cache_hits"].as_u64()),
        (Some(2), Some(1)),
        "{s}"
    );
    assert_eq!(s["group_cache"]["entries"], 3, "one entry per member: {s}");

    // Purged, the cache no longer speaks for the member that left.
    let coap = Coap::new();
    let r = coap.request(corral_tokio::Code::DELETE, &format!("{proxy}/proxy/cache"), None, None);
    assert_eq!(r.code, corral_tokio::Code::DELETED, "{}", r.payload_text());
    let third = members_of(&get_via(&proxy, &group, &["--mc-timeout", "2", "--json"]));
    assert_eq!(from(&third).len(), 2, "{third:?}");
    assert!(!from(&third).contains(&gone), "{third:?}");
}

/// A forger on the link: a socket joined to `group` on loopback that answers each request to it once, with
/// a unicast `2.05 "phantom"` and Max-Age 4294967295 from `from`, until `stop` is set.
fn forger(group: [u8; 4], port: u16, from: &str, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use corral_proto::wire::{Code, Message, MessageType, OptionNumber};
    use socket2::{Domain, Protocol, Socket, Type};
    let group = std::net::Ipv4Addr::from(group);
    let listen = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
    listen.set_reuse_address(true).unwrap();
    listen.bind(&std::net::SocketAddr::from((group, port)).into()).unwrap();
    listen.join_multicast_v4(&group, &std::net::Ipv4Addr::LOCALHOST).unwrap();
    let listen: std::net::UdpSocket = listen.into();
    listen.set_read_timeout(Some(std::time::Duration::from_millis(200))).unwrap();
    let answer = std::net::UdpSocket::bind(from).unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let Ok((n, to)) = listen.recv_from(&mut buf) else { continue };
            let Ok(req) = Message::parse(&buf[..n]) else { continue };
            let mut r = Message::new(MessageType::Non, Code::CONTENT, req.mid, req.token);
            r.options.set_uint(OptionNumber::MAX_AGE, u64::from(u32::MAX));
            r.payload = b"phantom".to_vec();
            let _ = answer.send_to(&r.encode(), to);
        }
    });
}

/// Issue 41 item 9 on real sockets: while a forger on the link answers, the client that asked hears it;
/// once it is gone, the next client gets the members' answers and nothing of the forger's from the cache
/// (it had answered with Max-Age 4294967295, and no address had answered this group before).
#[test]
fn a_forger_on_the_link_is_relayed_once_and_not_cached() {
    let group = [239, 255, 77, 38];
    let m = Members::start("127.0.84.2", group);
    let (_p, proxy) = proxy(&["--allow-group", "239.255.77.38", "--mcast-if", "127.0.0.1"]);
    let uri = format!("coap://239.255.77.38:{}/s/t", m.port);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    forger(group, m.port, "127.0.85.66:0", stop.clone());

    let first = members_of(&get_via(&proxy, &uri, &["--mc-timeout", "2", "--json"]));
    assert!(first.iter().any(|a| a["payload"] == "phantom"), "the client that asked hears it: {first:?}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    std::thread::sleep(std::time::Duration::from_millis(400));

    let second = members_of(&get_via(&proxy, &uri, &["--mc-timeout", "2", "--json"]));
    assert!(second.iter().all(|a| a["payload"] != "phantom"), "the forger's answer came from the cache: {second:?}");
    let all: BTreeSet<String> = m.addrs.iter().cloned().collect();
    assert_eq!(from(&second), all, "{second:?}");
    let s = proxy_status(&proxy);
    assert_eq!(s["stats"]["group_cache_hits"], 0, "{s}");
    assert_eq!(s["group_cache"]["entries"], 3, "the members, heard before the second request: {s}");
}

/// Issue 41's caveat, closed: with the members named (`--group-member`), an address outside them earns
/// nothing by being heard. A forger that answers every request was "heard answering an earlier request" from
/// the second on, so its answer was kept (Max-Age capped at 60 s) and a later client got it from the cache
/// after the forger had left; now it is relayed to the clients that asked while it answered, and never kept.
#[test]
fn a_forger_that_answers_every_request_is_never_cached_when_members_are_named() {
    let group = [239, 255, 77, 39];
    let m = Members::start("127.0.86.2", group);
    let members = ["--group-member", "127.0.86.0/24"];
    let (_p, proxy) = proxy(&[&["--allow-group", "239.255.77.39", "--mcast-if", "127.0.0.1"][..], &members].concat());
    let uri = format!("coap://239.255.77.39:{}/s/t", m.port);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    forger(group, m.port, "127.0.87.66:0", stop.clone());
    for round in 0..2 {
        let heard = members_of(&get_via(&proxy, &uri, &["--mc-timeout", "2", "--json"]));
        assert!(heard.iter().any(|a| a["payload"] == "phantom"), "round {round}: the client hears it: {heard:?}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    std::thread::sleep(std::time::Duration::from_millis(400));
    let after = members_of(&get_via(&proxy, &uri, &["--mc-timeout", "2", "--json"]));
    assert!(after.iter().all(|a| a["payload"] != "phantom"), "the forger's answer came from the cache: {after:?}");
    let all: BTreeSet<String> = m.addrs.iter().cloned().collect();
    assert_eq!(from(&after), all, "{after:?}");
    let s = proxy_status(&proxy);
    assert_eq!(s["group_cache"]["entries"], 3, "the named members only: {s}");
    assert!(s["stats"]["group_answers_untrusted"].as_u64() >= Some(2), "both forged answers refused: {s}");
}
