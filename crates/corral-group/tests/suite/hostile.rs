//! Whatever a client sends the Entity Manager — any method, path, query, format, payload, Observe, in any
//! order — it answers every request, never panics, leaves no job behind and keeps every stored entity
//! readable. Members that vanish mid-request are part of the mix.

use crate::common;

use common::*;
use corral_proto::wire::{Code, ContentFormat, OptionNumber};
use corral_proto::{Duration, Outcome, Request};
use proptest::prelude::*;
use serde_json::json;

fn method() -> impl Strategy<Value = Code> {
    prop_oneof![
        4 => Just(Code::GET),
        3 => Just(Code::PUT),
        3 => Just(Code::POST),
        2 => Just(Code::DELETE),
        1 => Just(Code::FETCH),
        1 => Just(Code::IPATCH),
        1 => (1u8..=31).prop_map(Code),
    ]
}

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("room".to_string()),
        Just("floor".to_string()),
        Just("lights".to_string()),
        Just("profile".to_string()),
        Just("..".to_string()),
        Just(String::new()),
        "[a-z0-9_.-]{1,70}",
        any::<String>(),
    ]
}

fn query() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("eo=avg".to_string()),
        Just("eo=lst".to_string()),
        Just("eo=bogus".to_string()),
        Just("enr=0".to_string()),
        Just("enr=1".to_string()),
        Just("enr=99".to_string()),
        Just("delay=auto".to_string()),
        Just("delay=-5".to_string()),
        Just("delay=30".to_string()),
        Just("timeout=0".to_string()),
        Just("timeout=200".to_string()),
        Just("emt=non".to_string()),
        Just("ect=multicast".to_string()),
        Just("repair=unicast".to_string()),
        Just("er=coap://192.0.2.100/s/t".to_string()),
        "[a-z]{1,6}=[ -~]{0,12}",
        any::<String>(),
    ]
}

fn format() -> impl Strategy<Value = Option<u16>> {
    prop_oneof![
        Just(None),
        Just(Some(0)),
        Just(Some(40)),
        Just(Some(50)),
        Just(Some(60)),
        Just(Some(110)),
        Just(Some(112)),
        any::<u16>().prop_map(Some),
    ]
}

/// Member URIs: devices of the lab (0-2), one that never answers, nested entities, nonsense.
fn member() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => (0usize..3).prop_map(|i| format!("coap://192.0.2.{}/s/t", 100 + i)),
        2 => (0usize..3).prop_map(|i| format!("coap://192.0.2.{}/a/light", 100 + i)),
        1 => Just("coap://192.0.2.99/s/t".to_string()),
        2 => Just("/em/room".to_string()),
        2 => Just("/em/floor".to_string()),
        1 => Just("coap://192.0.2.1/em/lights".to_string()),
        1 => Just("http://example.com/".to_string()),
        1 => Just("coap://[::1/".to_string()),
        1 => any::<String>(),
    ]
}

/// A JSON profile document: mostly plausible, sometimes wrong in one field.
fn profile_doc() -> impl Strategy<Value = Vec<u8>> {
    (
        prop_oneof![1 => Just(Vec::new()), 6 => prop::collection::vec(member(), 1..5)],
        prop::option::of(prop_oneof![4 => Just("unicast"), 4 => Just("multicast"), 1 => Just("broadcast")]),
        prop::option::of(prop_oneof![3 => 1i64..4, 1 => -2i64..8]),
        prop::option::of(prop::collection::vec(
            prop_oneof![3 => Just("avg"), 3 => Just("lst"), 2 => Just("max"), 1 => Just("x")],
            1..3,
        )),
    )
        .prop_map(|(er, ect, enr, eo)| {
            let mut p = json!({ "er": er });
            if let Some(ect) = ect {
                p["ect"] = json!(ect);
            }
            if let Some(enr) = enr {
                p["enr"] = json!(enr);
            }
            if let Some(eo) = eo {
                p["eo"] = json!(eo);
            }
            p.to_string().into_bytes()
        })
}

fn link_doc() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(member(), 0..4)
        .prop_map(|m| m.iter().map(|u| format!("<{u}>")).collect::<Vec<_>>().join(",").into_bytes())
}

fn payload() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => profile_doc(),
        1 => link_doc(),
        1 => prop_oneof![Just(b"on".to_vec()), Just(b"close".to_vec()), Just(b"42".to_vec())],
        1 => prop::collection::vec(any::<u8>(), 0..64),
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop_oneof![Just("room"), Just("floor"), Just("lights"), Just("a")].prop_map(String::from),
        1 => segment(),
    ]
}

/// A request with the given method, path below `/em`, queries and options.
fn build(
    m: Code,
    segs: &[String],
    qs: &[String],
    cf: Option<u16>,
    accept: Option<u16>,
    payload: Vec<u8>,
    observe: Option<u64>,
) -> Request {
    let mut r = Request::new(m);
    r.options.push_str(OptionNumber::URI_PATH, "em");
    for s in segs {
        r.options.push_str(OptionNumber::URI_PATH, s);
    }
    for q in qs {
        r.options.push_str(OptionNumber::URI_QUERY, q);
    }
    if let Some(cf) = cf {
        r = r.with_content_format(ContentFormat(cf));
    }
    if let Some(a) = accept {
        r = r.with_accept(ContentFormat(a));
    }
    if let Some(o) = observe {
        r.options.set_uint(OptionNumber::OBSERVE, o);
    }
    r.payload = payload;
    r
}

fn queries() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(query(), 0..3)
}

/// Mostly the requests a client means to send (create, use, observe, actuate, profile, delete) with
/// hostile details; sometimes anything at all.
fn request() -> impl Strategy<Value = Request> {
    let create = prop_oneof![
        4 => (name(), profile_doc()).prop_map(|(n, p)| build(Code::PUT, &[n], &[], Some(50), None, p, None)),
        1 => (name(), link_doc()).prop_map(|(n, p)| build(Code::PUT, &[n], &[], Some(40), None, p, None)),
        2 => (name(), queries(), format(), payload()).prop_map(|(n, q, cf, p)| build(Code::PUT, &[n], &q, cf, None, p, None)),
    ];
    let generated = (queries(), payload()).prop_map(|(q, p)| build(Code::POST, &[], &q, Some(50), None, p, None));
    let read = (name(), queries(), prop_oneof![3 => Just(None), 1 => format()], prop::option::of(0u64..3))
        .prop_map(|(n, q, a, o)| build(Code::GET, &[n], &q, None, a, Vec::new(), o));
    let actuate = (prop_oneof![Just(Code::PUT), Just(Code::POST)], name(), format(), payload())
        .prop_map(|(m, n, cf, p)| build(m, &[n], &[], cf, None, p, None));
    let profile =
        (prop_oneof![Just(Code::GET), Just(Code::PUT), Just(Code::POST)], name(), queries(), format(), payload())
            .prop_map(|(m, n, q, cf, p)| build(m, &[n, "profile".into()], &q, cf, None, p, None));
    let delete = name().prop_map(|n| build(Code::DELETE, &[n], &[], None, None, Vec::new(), None));
    let anything = (
        method(),
        prop::collection::vec(segment(), 0..3),
        queries(),
        format(),
        format(),
        payload(),
        prop::option::of(0u64..3),
    )
        .prop_map(|(m, segs, qs, cf, accept, payload, observe)| build(m, &segs, &qs, cf, accept, payload, observe));
    prop_oneof![4 => create, 1 => generated, 4 => read, 2 => actuate, 2 => profile, 2 => delete, 2 => anything]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_request_is_answered_and_nothing_is_left_behind(
        reqs in prop::collection::vec((request(), 0u64..3), 1..10),
        lose_device in prop::option::of(0usize..3),
    ) {
        let mut lab = lab_with(LabConfig { devices: 3, observable: true, ..LabConfig::default() });
        let er = lab.uris(0..3, "s/t");
        prop_assert_eq!(lab.create("room", json!({ "er": er })).code, Code::CREATED);
        if let Some(d) = lose_device {
            let dead = dev_addr(d, false);
            lab.net.set_drop(move |r| r.to == dead || r.from == dead);
        }
        // Each request goes out 0, 1 or 2 s after the previous one, answered or not: changes race uses,
        // observations and each other.
        let mut sent = Vec::new();
        for (req, gap_s) in reqs {
            let shown = format!("{} {} {:?}", req.method, req.options.path(), req.options);
            sent.push((lab.send(req), shown));
            lab.net.run_for(Duration::from_secs(gap_s));
        }
        let limit = lab.net.now + Duration::from_secs(300);
        while sent.iter().any(|(id, _)| lab.outcome(*id).is_none()) && lab.net.step(limit) {}
        for (id, shown) in &sent {
            match lab.outcome(*id) {
                Some((_, Outcome::Response { response, .. })) => {
                    prop_assert!(response.code.is_response(), "{}: answered {}", shown, response.code);
                    prop_assert!(response.code != Code::INTERNAL_SERVER_ERROR, "{}: {}", shown, response.payload_text());
                }
                other => prop_assert!(false, "{}: no answer ({:?})", shown, other),
            }
        }
        lab.net.run_for(Duration::from_secs(600));
        prop_assert_eq!(lab.em().jobs_in_progress(), 0);
        for name in lab.em().entity_names() {
            let r = lab.get(&format!("em/{name}/profile"), &[], None);
            prop_assert_eq!(r.code, Code::CONTENT, "entity {} unreadable: {}", name, r.payload_text());
        }
    }
}
