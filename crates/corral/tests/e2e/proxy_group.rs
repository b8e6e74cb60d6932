//! `corral proxy --allow-group` on real sockets: one unicast request to a group
//! (draft-ietf-core-groupcomm-proxy). Three `corral device`s on their own loopback addresses join a group
//! through `/mc`; `corral get -P` to the group's URI prints every member's answer with the member's
//! address (from the proxy's Reply-From), and the devices' request logs show ONE multicast datagram from
//! the proxy. A client that does not send Multicast-Timeout gets 4.00 naming it, a group the operator did
//! not allow is refused with 4.03, and in neither case does a member see a request.

use crate::common;
use common::group::*;
use common::*;
use std::collections::BTreeSet;
use std::time::Duration;

#[test]
fn one_request_to_a_group_is_one_multicast_datagram_and_every_member_answers_with_its_address() {
    let m = Members::start("127.0.77.2", [239, 255, 77, 31]);
    let (_p, proxy) = proxy(&["--allow-group", "239.255.77.31", "--mcast-if", "127.0.0.1"]);
    let group = format!("coap://239.255.77.31:{}/s/t", m.port);

    let o = get_via(&proxy, &group, &["--mc-timeout", "2", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("a JSON array");
    let answers = j.as_array().unwrap();
    let from: BTreeSet<String> = answers.iter().map(|a| a["from"].as_str().unwrap().to_string()).collect();
    assert_eq!(from, m.addrs.iter().cloned().collect(), "one answer per member, named by its address: {j}");
    assert_eq!(answers.len(), 3, "{j}");
    for a in answers {
        assert_eq!(a["code"], "2.05", "{a}");
        assert!(a["options"].as_array().unwrap().iter().any(|o| o["name"] == "Reply-From"), "{a}");
    }

    // One datagram left the proxy: every member got the request on the group address, from the proxy's
    // one socket, with one message ID.
    let seen = m.group_requests();
    assert_eq!(seen.len(), 3, "each member saw the request once: {seen:?}");
    let sources: BTreeSet<(&String, u64)> = seen.iter().map(|(_, from, mid)| (from, *mid)).collect();
    assert_eq!(sources.len(), 1, "one sender and one message ID: {seen:?}");
    assert_eq!(sources.first().unwrap().0, &proxy.trim_start_matches("coap://").to_string(), "{seen:?}");
    let s = proxy_status(&proxy);
    assert_eq!(s["stats"]["group_requests"], 1, "{s}");
    assert_eq!(s["stats"]["group_answers"], 3, "{s}");

    // The text form: one line per member, its address first.
    let o = get_via(&proxy, &group, &["--mc-timeout", "2"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let lines: BTreeSet<String> =
        stdout(&o).lines().map(|l| l.split_whitespace().next().unwrap().to_string()).collect();
    assert_eq!(lines, m.addrs.iter().cloned().collect(), "{}", out(&o));
    assert!(stderr(&o).contains("3 response(s)"), "{}", out(&o));
}

#[test]
fn the_same_group_request_from_two_clients_within_the_window_is_sent_once() {
    let m = Members::start("127.0.78.2", [239, 255, 77, 32]);
    let (_p, proxy) = proxy(&["--allow-group", "239.255.77.0/24", "--mcast-if", "127.0.0.1"]);
    let group = format!("coap://239.255.77.32:{}/s/h", m.port);
    let first = {
        let (proxy, group) = (proxy.clone(), group.clone());
        std::thread::spawn(move || get_via(&proxy, &group, &["--mc-timeout", "3", "--json"]))
    };
    std::thread::sleep(Duration::from_millis(1000));
    let second = get_via(&proxy, &group, &["--mc-timeout", "2", "--json"]);
    let first = first.join().unwrap();
    for o in [&first, &second] {
        assert_eq!(o.status.code(), Some(0), "{}", out(o));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let from: BTreeSet<String> =
            j.as_array().unwrap().iter().map(|a| a["from"].as_str().unwrap().to_string()).collect();
        assert_eq!(from, m.addrs.iter().cloned().collect(), "each client hears every member: {j}");
    }
    assert_eq!(m.group_requests().len(), 3, "the members saw one request: {:?}", m.group_requests());
    let s = proxy_status(&proxy);
    assert_eq!((s["stats"]["group_requests"].as_u64(), s["stats"]["aggregated"].as_u64()), (Some(1), Some(1)), "{s}");
}

#[test]
fn a_client_without_multicast_timeout_gets_4_00_naming_it_and_the_group_hears_nothing() {
    let m = Members::start("127.0.79.2", [239, 255, 77, 33]);
    let (_p, proxy) = proxy(&["--allow-group", "239.255.77.33", "--mcast-if", "127.0.0.1"]);
    let group = format!("coap://239.255.77.33:{}/s/t", m.port);
    let coap = Coap::new();
    let r = coap
        .rt
        .block_on(coap.client.request(corral_tokio::Code::GET, &group).via_proxy(&proxy).send())
        .expect("an answer");
    assert_eq!(r.code, corral_tokio::Code::BAD_REQUEST, "{}", r.payload_text());
    assert!(r.payload_text().contains("Multicast-Timeout"), "{}", r.payload_text());
    let signal = r.options.get(corral_tokio::OptionNumber::MULTICAST_TIMEOUT);
    assert_eq!(signal, Some(&[][..]), "the 4.00 carries an empty Multicast-Timeout (the draft's §5.2.1)");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(m.group_requests(), vec![], "no member was asked");
}

#[test]
fn a_group_the_operator_did_not_allow_is_refused_and_hears_nothing() {
    let m = Members::start("127.0.80.2", [239, 255, 77, 34]);
    let group = format!("coap://239.255.77.34:{}/s/t", m.port);
    for allow in [&[][..], &["--allow-group", "239.255.77.35", "--mcast-if", "127.0.0.1"][..]] {
        let (_p, proxy) = proxy(allow);
        let o = get_via(&proxy, &group, &["--mc-timeout", "1"]);
        assert_eq!(o.status.code(), Some(4), "{}", out(&o));
        assert!(stderr(&o).contains("4.03") && stderr(&o).contains("--allow-group"), "{}", out(&o));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(m.group_requests(), vec![], "no member was asked");
}

#[test]
fn a_fib_rule_naming_a_group_carries_a_request_for_a_name_to_its_members() {
    let m = Members::start("127.0.81.2", [239, 255, 77, 36]);
    let dir = tempfile::tempdir().unwrap();
    let fib = dir.path().join("fib.toml");
    let rule = format!(
        "[[rule]]\nmatch = \"coap://floor1/**\"\nnext = [{{ to = \"coap://239.255.77.36:{}\", send_host = false }}]\n",
        m.port
    );
    std::fs::write(&fib, rule).unwrap();
    let (_p, proxy) =
        proxy(&["--fib", fib.to_str().unwrap(), "--allow-group", "239.255.77.36", "--mcast-if", "127.0.0.1"]);
    let o = get_via(&proxy, "coap://floor1/s/l", &["--mc-timeout", "2", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let from: BTreeSet<String> =
        j.as_array().unwrap().iter().map(|a| a["from"].as_str().unwrap().to_string()).collect();
    assert_eq!(from, m.addrs.iter().cloned().collect(), "{j}");
    assert_eq!(m.group_requests().len(), 3, "{:?}", m.group_requests());
}
