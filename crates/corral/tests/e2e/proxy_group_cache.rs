//! `corral proxy --allow-group` caches each member's answer to a group request
//! (draft-ietf-core-groupcomm-proxy -07 §7), on real sockets: three `corral device`s in a group, two
//! clients one after another within the answers' Max-Age (the devices' default, 60 s). The proxy does not
//! know the group's members, so the draft has it send the second request to the group too (§7.1: only a
//! proxy that knows every member may answer from its cache alone) — two multicast datagrams, counted in the
//! devices' request logs — and relay from its cache the answer of a member that does not answer this time
//! (here: it left the group), near the end of the client's Multicast-Timeout. Purged, the cache has
//! nothing for that member any more.

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
    let (_p, proxy) = proxy(&["--allow-group", "239.255.77.37", "--mcast-if", "127.0.0.1"]);
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
