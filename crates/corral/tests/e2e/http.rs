//! The operator's window (`--http`): curl against a gateway with a testbed, the metrics through
//! Prometheus' own text-format parser (Python's prometheus_client), the admin API, the cross-proxy and
//! who may use them.

use crate::common;

use common::*;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

/// `curl -s -i` (status line and headers, then the body) with `extra` arguments.
fn curl(extra: &[&str]) -> (u16, String, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "-i", "--max-time", "40"]).args(extra);
    let out = run(&mut cmd, Duration::from_secs(45));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head.to_ascii_lowercase(), body.to_string())
}

/// `curl -X PUT` of a JSON body to `url`.
fn put_json(url: &str, body: &str) -> (u16, String, String) {
    curl(&["-X", "PUT", "-H", "Content-Type: application/json", "-d", body, url])
}

/// The URIs of `path` on every device of a testbed gateway's summary.
fn members(j: &Value, path: &str) -> Vec<String> {
    j["devices"].as_array().unwrap().iter().map(|d| format!("coap://{}{path}", d.as_str().unwrap())).collect()
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| l.strip_prefix(&format!("{name}: "))).map(str::trim)
}

/// A testbed gateway with `--http 127.0.0.1:0` and `extra`; its base URL and CoAP contact.
fn gateway(subnet: u8, extra: &[&str]) -> (Proc, String, Value, tempfile::TempDir) {
    let mut args = vec!["--http", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let (p, j, d) = corral_testbed(3, subnet, &args);
    let http = j["http"].as_str().unwrap_or_else(|| panic!("no http address in the summary: {j}")).to_string();
    (p, format!("http://{http}"), j, d)
}

/// The samples of a scrape, through prometheus_client's OpenMetrics parser: `name{labels} value` lines.
fn parse_metrics(text: &str) -> Vec<String> {
    let script = "import sys\nfrom prometheus_client.openmetrics.parser import text_string_to_metric_families as p\n\
                  for f in p(sys.stdin.read()):\n  for s in f.samples:\n    \
                  print(s.name, ','.join(f'{k}={v}' for k, v in sorted(s.labels.items())), s.value)\n";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the Prometheus parser refused the scrape: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

fn sample(samples: &[String], name: &str, labels: &str) -> Option<f64> {
    samples.iter().find_map(|l| {
        let mut p = l.splitn(3, ' ');
        (p.next()? == name && p.next()? == labels).then(|| p.next()?.parse().ok()).flatten()
    })
}

fn parser_available() -> bool {
    let ok =
        Command::new("python3").args(["-c", "import prometheus_client"]).output().is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("CORRAL_INTEROP").as_deref() != Ok("1"),
            "CORRAL_INTEROP=1 but Python's prometheus_client is missing: run scripts/install-peers.sh"
        );
        println!("skipped: Python's prometheus_client is not installed (scripts/install-peers.sh)");
    }
    ok
}

#[test]
fn metrics_parse_as_prometheus_text_and_count_member_exchanges() {
    if !parser_available() {
        return;
    }
    let (_gw, base, j, _d) = gateway(81, &[]);
    let devs = members(&j, "/s/t");
    let profile = serde_json::json!({ "er": devs, "eo": ["avg"] }).to_string();
    let (s, _, body) = put_json(&format!("{base}/api/entities/room1"), &profile);
    assert_eq!(s, 201, "create: {body}");
    let (s, _, body) = curl(&[&format!("{base}/api/entities/room1/value?eo=avg")]);
    assert_eq!(s, 200, "use: {body}");
    // Snapshots are published every 0.5 s: wait for one that has the use in it.
    let mut samples = Vec::new();
    for _ in 0..40 {
        let (s, head, text) = curl(&[&format!("{base}/metrics")]);
        assert_eq!(s, 200);
        assert!(header(&head, "content-type").is_some_and(|c| c.starts_with("application/openmetrics-text")), "{head}");
        samples = parse_metrics(&text);
        if sample(&samples, "corral_em_member_answers_total", "worker=0").unwrap_or(0.0) >= 6.0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // Validation asked each of the 3 members once, the use once more.
    assert_eq!(sample(&samples, "corral_em_member_requests_total", "worker=0"), Some(6.0), "{samples:#?}");
    assert_eq!(sample(&samples, "corral_em_member_answers_total", "worker=0"), Some(6.0));
    assert_eq!(sample(&samples, "corral_em_entities", "worker=0"), Some(1.0));
    assert_eq!(sample(&samples, "corral_em_member_latency_seconds_count", "worker=0"), Some(6.0));
    assert_eq!(sample(&samples, "corral_em_member_latency_seconds_bucket", "le=+Inf,worker=0"), Some(6.0));
    assert!(sample(&samples, "corral_coap_requests_received_total", "worker=0").unwrap_or(0.0) >= 2.0);
    assert_eq!(sample(&samples, "corral_up", "worker=0"), Some(1.0));
    let first = devs[0].trim_start_matches("coap://").trim_end_matches("/s/t");
    assert_eq!(
        sample(&samples, "corral_em_member_requests_by_member_total", &format!("member={first},worker=0")),
        Some(2.0)
    );
}

#[test]
fn health_and_readiness_answer() {
    let (_gw, base, _j, _d) = gateway(82, &[]);
    let (s, _, body) = curl(&[&format!("{base}/healthz")]);
    assert_eq!((s, body.as_str()), (200, "ok\n"));
    let mut ready = (0, String::new());
    for _ in 0..20 {
        let (s, _, body) = curl(&[&format!("{base}/readyz")]);
        ready = (s, body);
        if s == 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(ready.0, 200, "{}", ready.1);
    let r: Value = serde_json::from_str(&ready.1).unwrap();
    assert_eq!(r["ready"], true);
    assert_eq!(r["workers"][0]["alive"], true);
    assert_eq!(r["store"]["open"], true);
}

#[test]
fn admin_api_creates_uses_and_deletes_an_entity() {
    let (_gw, base, j, _d) = gateway(83, &[]);
    let devs = members(&j, "/s/t");
    let profile = serde_json::json!({ "er": devs, "eo": ["avg", "lst"] }).to_string();
    let url = format!("{base}/api/entities/hall");
    let (s, head, body) = put_json(&url, &profile);
    assert_eq!(s, 201, "{body}");
    assert_eq!(header(&head, "content-type"), Some("application/json"));
    // A second creation of the name is the Entity Manager's 4.12, as a problem document.
    let (s, head, body) = put_json(&url, &profile);
    assert_eq!(s, 412, "{body}");
    assert_eq!(header(&head, "content-type"), Some("application/problem+json"));
    let p: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(p["coap_code"], "4.12");
    let (s, _, body) = curl(&[&format!("{base}/api/entities")]);
    assert_eq!(s, 200);
    let list: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list[0]["name"], "hall");
    assert_eq!(list[0]["profile"]["er"].as_array().map(Vec::len), Some(3));
    let (s, _, body) = curl(&[&format!("{url}/value?eo=avg")]);
    assert_eq!(s, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert!(v["v"].as_f64().is_some(), "an average: {v}");
    let (s, _, _) = curl(&["-X", "DELETE", &url]);
    assert_eq!(s, 204);
    let (s, head, body) = curl(&[&url]);
    assert_eq!(s, 404, "{body}");
    assert_eq!(header(&head, "content-type"), Some("application/problem+json"));
    let (s, _, body) = curl(&[&format!("{base}/api/openapi.json")]);
    assert_eq!(s, 200);
    let doc: Value = serde_json::from_str(&body).unwrap();
    assert!(doc["paths"]["/api/entities/{name}"]["put"].is_object());
}

#[test]
fn cross_proxy_reads_a_sensor_with_its_content_type() {
    let (_gw, base, j, _d) = gateway(84, &[]);
    let dev = j["devices"][0].as_str().unwrap();
    let (s, head, body) = curl(&[&format!("{base}/hc/coap://{dev}/s/t")]);
    assert_eq!(s, 200, "{body}");
    assert_eq!(header(&head, "content-type"), Some("text/plain; charset=utf-8"), "{head}");
    assert!(body.trim().parse::<f64>().is_ok(), "a temperature: {body:?}");
    assert!(header(&head, "cache-control").is_some_and(|c| c.starts_with("max-age=")), "{head}");
    // A missing resource: the device's 4.04 as a problem document.
    let (s, head, body) = curl(&[&format!("{base}/hc/coap://{dev}/no/such")]);
    assert_eq!(s, 404, "{body}");
    assert_eq!(header(&head, "content-type"), Some("application/problem+json"));
    assert!(body.contains("\"coap_code\":\"4.04\""), "{body}");
}

#[test]
fn cross_proxy_refuses_a_forbidden_member_network_with_a_problem() {
    // Members may be on 127.0.85.0/24 only: 127.0.86.9 is outside, and so is the gateway itself.
    let (_gw, base, j, _d) = gateway(85, &["--member-net", "127.0.85.0/24"]);
    let (s, head, body) = curl(&[&format!("{base}/hc/coap://127.0.86.9/s/t")]);
    assert_eq!(s, 403, "{body}");
    assert_eq!(header(&head, "content-type"), Some("application/problem+json"));
    let p: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(p["status"], 403);
    assert!(p["detail"].as_str().unwrap().contains("outside the allowed member networks"), "{p}");
    let gw = j["gateway"].as_str().unwrap();
    let (s, _, body) = curl(&[&format!("{base}/hc/coap://{gw}/em")]);
    assert_eq!(s, 403, "the gateway is no relay to itself: {body}");
    // The admin API refuses such a member as the Entity Manager does: 4.03 with its diagnostic.
    let profile = serde_json::json!({ "er": ["coap://127.0.86.9/s/t"] }).to_string();
    let (s, _, body) = put_json(&format!("{base}/api/entities/out"), &profile);
    assert_eq!(s, 403, "{body}");
    let p: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(p["coap_code"], "4.03");
}

#[test]
fn admin_routes_need_the_bearer_token_when_one_is_set() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret-token\n").unwrap();
    let token = token.display().to_string();
    let (_gw, base, _j, _d) = gateway(86, &["--http-token-file", &token]);
    let (s, head, _) = curl(&[&format!("{base}/api/entities")]);
    assert_eq!(s, 401);
    assert_eq!(header(&head, "www-authenticate"), Some("bearer"), "headers are lowercased here");
    let (s, _, _) = curl(&["-H", "Authorization: Bearer wrong-token!", &format!("{base}/api/entities")]);
    assert_eq!(s, 401);
    let (s, _, body) = curl(&["-H", "Authorization: Bearer s3cret-token", &format!("{base}/api/entities")]);
    assert_eq!(s, 200, "{body}");
    // Metrics are not an admin route.
    let (s, _, _) = curl(&[&format!("{base}/metrics")]);
    assert_eq!(s, 200);
}

#[test]
fn http_clients_get_the_gateways_access_roles() {
    // Loopback may only read: reads pass, a creation is refused before it reaches the Entity Manager.
    let (_gw, base, _j, _d) = gateway(87, &["--allow", "read=127.0.0.0/8"]);
    let (s, _, body) = curl(&[&format!("{base}/api/entities")]);
    assert_eq!(s, 200, "{body}");
    let (s, head, body) = put_json(&format!("{base}/api/entities/x"), "{\"er\":[]}");
    assert_eq!(s, 403, "{body}");
    assert_eq!(header(&head, "content-type"), Some("application/problem+json"));
    assert!(body.contains("needs the role manage"), "{body}");
}

/// An HTTP client with the manage role manages through the window even when the window's own loopback
/// address may only read: the Entity Manager trusts the window's socket, whose guard checked the role.
#[test]
fn an_http_manager_elsewhere_manages_though_loopback_may_only_read() {
    let (_gw, base, j, _d) = gateway(88, &["--allow", "read=127.0.0.0/8", "--allow", "manage=127.0.0.2/32"]);
    let profile = serde_json::json!({ "er": members(&j, "/s/t") }).to_string();
    let from = |addr: &str, url: &str| {
        curl(&["--interface", addr, "-X", "PUT", "-H", "Content-Type: application/json", "-d", &profile, url])
    };
    let (s, _, body) = from("127.0.0.2", &format!("{base}/api/entities/room1"));
    assert_eq!(s, 201, "{body}");
    // A reader from loopback is still refused by the window's guard, and CoAP from loopback still reads only.
    let (s, _, body) = from("127.0.0.1", &format!("{base}/api/entities/room2"));
    assert_eq!(s, 403, "{body}");
    let gw = j["gateway"].as_str().unwrap();
    let o = corral(&["delete", &format!("coap://{gw}/em/room1")]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
}

#[test]
fn serve_and_proxy_have_metrics_on_http() {
    let (_p, j) =
        spawn_json(Command::new(CORRAL).args(["serve", "--bind", "127.0.0.1:0", "--json", "--http", "127.0.0.1:0"]));
    let http = j["http"].as_str().unwrap_or_else(|| panic!("{j}"));
    let (s, _, text) = curl(&[&format!("http://{http}/metrics")]);
    assert_eq!(s, 200);
    assert!(text.contains("corral_coap_datagrams_received_total{worker=\"0\"}"), "{text}");
    let (_p, j) =
        spawn_json(Command::new(CORRAL).args(["proxy", "--bind", "127.0.0.1:0", "--json", "--http", "127.0.0.1:0"]));
    let http = j["http"].as_str().unwrap_or_else(|| panic!("{j}"));
    let (s, _, text) = curl(&[&format!("http://{http}/metrics")]);
    assert_eq!(s, 200);
    assert!(text.contains("corral_proxy_cache_bytes{worker=\"0\"} 0"), "{text}");
    // The admin API is the gateway's alone.
    let (s, _, _) = curl(&[&format!("http://{http}/api/entities")]);
    assert_eq!(s, 404);
}

#[test]
fn the_proxy_window_lists_and_purges_its_cache_and_shows_it_on_a_console() {
    let (_origin, j) = spawn_json(Command::new(CORRAL).args(["serve", "--bind", "127.0.0.1:0", "--json"]));
    let origin = j["udp"].as_str().unwrap_or_else(|| panic!("{j}")).to_string();
    let (_p, j) =
        spawn_json(Command::new(CORRAL).args(["proxy", "--bind", "127.0.0.1:0", "--json", "--http", "127.0.0.1:0"]));
    let (proxy, http) = (j["proxy_uri"].as_str().unwrap().to_string(), j["http"].as_str().unwrap().to_string());
    let target = format!("coap://{origin}/hello");
    let o = corral(&["get", &target, "-P", &proxy]);
    assert_eq!(stdout(&o), "Hello from corral!\n");
    let (s, head, body) = curl(&[&format!("http://{http}/api/proxy/cache")]);
    assert_eq!(s, 200, "{head}{body}");
    let cache: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(cache["entries"], 1, "{cache}");
    assert_eq!(cache["listed"][0]["target"], target.as_str(), "{cache}");
    let (s, _, body) = curl(&[&format!("http://{http}/api/proxy/fib")]);
    assert!(s == 200 && body.contains("\"rules\""), "{body}");
    let (s, _, body) = curl(&[&format!("http://{http}/api/openapi.json")]);
    let doc: Value = serde_json::from_str(&body).unwrap();
    assert!(s == 200 && doc["paths"]["/api/proxy/cache"]["delete"].is_object(), "{body}");
    let (s, _, page) = curl(&[&format!("http://{http}/")]);
    assert_eq!(s, 200);
    assert!(page.contains("<h1>corral proxy") && page.contains(&format!("<td>{target}</td>")), "{page}");
    let (s, _, _) = curl(&["-X", "DELETE", &format!("http://{http}/api/proxy/cache")]);
    assert_eq!(s, 204);
    let (_, _, body) = curl(&[&format!("http://{http}/api/proxy")]);
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["cache"]["entries"], 0, "purged: {status}");
}
