//! Groups in the directory (issue 32, RFC 9176 Appendix A): a gateway with `--rd` registers each multicast
//! entity's group as an endpoint of type `core.rd-group` whose base is the group's multicast URI, so a
//! client finds the group by name and reaches its members with one multicast request; the registration
//! goes with the entity. Real sockets, the real binary.

use crate::common;

use common::*;
use std::process::Command;
use std::time::{Duration, Instant};

/// `corral get URI` until its output satisfies `ok`, for at most `wait`; the last output.
fn get_until(uri: &str, wait: Duration, ok: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let out = stdout(&corral(&["get", uri]));
        if ok(&out) || start.elapsed() > wait {
            return out;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_multicast_entitys_group_is_found_in_the_directory_and_reached_directly() {
    let data = tempfile::tempdir().unwrap();
    let port = free_udp_port();
    let bind = format!("127.0.0.1:{port}");
    let (_gw, j) = spawn_json(Command::new(CORRAL).args([
        "gateway",
        "--bind",
        &bind,
        "--testbed",
        "2",
        "--testbed-from",
        "127.0.74.1:0",
        "--leisure",
        "0.3",
        "--rd",
        "--json",
        "--data",
        data.path().to_str().unwrap(),
    ]));
    let gw = j["uri"].as_str().unwrap().to_string();
    let members: Vec<String> =
        j["devices"].as_array().unwrap().iter().map(|d| format!("coap://{}/s/t", d.as_str().unwrap())).collect();
    let mut args = vec!["entity", "-g", &gw, "create", "floor"];
    args.extend(members.iter().map(String::as_str));
    args.extend(["--ect", "multicast"]);
    let o = corral(&args);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let show: serde_json::Value =
        serde_json::from_str(&stdout(&corral(&["entity", "-g", &gw, "show", "floor", "--json"]))).unwrap();
    let mcst = show["profile"]["mcstURI"].as_str().expect("a multicast entity has mcstURI").to_string();
    let base = mcst.trim_end_matches("/s/t").to_string();

    // The group is an endpoint of type core.rd-group, named after the entity, based at its group.
    let groups = get_until(&format!("{gw}/rd-lookup/ep?et=core.rd-group"), Duration::from_secs(10), |o| {
        o.contains("ep=\"floor\"")
    });
    assert!(groups.contains("ep=\"floor\"") && groups.contains(&format!("base=\"{base}\"")), "{groups}");
    assert!(groups.contains("et=\"core.rd-group\""), "{groups}");
    // Its resource, looked up by the group's name, is the multicast URI.
    let res = stdout(&corral(&["get", &format!("{gw}/rd-lookup/res?ep=floor")]));
    assert!(res.contains(&format!("<{mcst}>")), "{res}");
    // And one multicast request to it reaches both members.
    let o = corral(&["get", &mcst, "--mcast-if", "127.0.0.1", "-B", "1.5", "--json"]);
    let answers = stdout(&o);
    for d in j["devices"].as_array().unwrap() {
        let host = d.as_str().unwrap().rsplit_once(':').unwrap().0.to_string();
        assert!(answers.contains(&host), "{host} answered the group: {answers} {}", stderr(&o));
    }

    // The registration goes with the entity.
    let o = corral(&["entity", "-g", &gw, "delete", "floor"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let groups = get_until(&format!("{gw}/rd-lookup/ep?et=core.rd-group"), Duration::from_secs(10), |o| {
        !o.contains("ep=\"floor\"")
    });
    assert!(!groups.contains("ep=\"floor\""), "{groups}");
}
