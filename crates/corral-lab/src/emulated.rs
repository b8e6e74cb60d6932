//! Scenarios with an `[emulated]` section: seed 004's experiment with real programs. For each point,
//! `corral link run` joins two network namespaces by an impaired link, a server runs in one (`corral
//! serve`, or `python3 -m http.server` with one file), a client loops in the other for the point's duration
//! (`corral get -N`, or `curl`), and the link counts the bytes it carried both ways — seed 004's
//! "cumulative bytes received over the period … divided by" the period (its Wireshark capture saw both
//! directions on the link).
//!
//! Real time and root are needed; the run calls the `corral` executable that is running the lab.

use crate::run::{LinkRow, Network, NodeRow, PointResult, PointRow, QueryRow, TracedPoint};
use crate::scenario::EmulatedSpec;
use corral_sim::{NodeId, NodeSpec, Role, Sim, SimConfig, Topology};
use std::process::Command;

fn shell_loop(secs: u64, cmd: &str) -> Vec<String> {
    vec![
        "timeout".into(),
        secs.to_string(),
        "sh".into(),
        "-c".into(),
        format!("while true; do {cmd} >/dev/null 2>&1; done"),
    ]
}

pub(crate) fn run(em: &EmulatedSpec, index: usize, seed: u64) -> Result<TracedPoint, String> {
    let corral = std::env::current_exe().map_err(|e| format!("cannot find the corral executable: {e}"))?;
    if corral.file_stem().and_then(|s| s.to_str()) != Some("corral") {
        return Err("emulated scenarios run real programs through `corral link`: run them with `corral lab run`".into());
    }
    let corral = corral.to_string_lossy().into_owned();
    let (delay_ms, loss) = em.impairment().map_err(|e| e.0)?;
    let dir = std::env::temp_dir().join(format!("corral-emulated-{}-{index}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let body: String = (0..em.http_bytes).map(|i| (b'a' + (i % 26) as u8) as char).collect();
    std::fs::write(dir.join("data.txt"), body).map_err(|e| e.to_string())?;
    let (server, client): (Vec<String>, Vec<String>) = match em.scheme.as_str() {
        "http" => (
            vec![
                "python3".into(),
                "-m".into(),
                "http.server".into(),
                "8080".into(),
                "--bind".into(),
                "0.0.0.0".into(),
                "--directory".into(),
                dir.to_string_lossy().into_owned(),
            ],
            shell_loop(em.duration_s, "curl -s -o /dev/null --max-time 10 http://10.213.0.1:8080/data.txt"),
        ),
        _ => (
            vec![corral.clone(), "serve".into(), "--bind".into(), "0.0.0.0:5683".into(), "-q".into()],
            shell_loop(em.duration_s, &format!("{corral} get -N -B 5 coap://10.213.0.1/test")),
        ),
    };
    let mut args: Vec<String> = vec![
        "link".into(),
        "run".into(),
        "--delay".into(),
        format!("{delay_ms}ms"),
        "--loss".into(),
        format!("{}%", loss * 100.0),
        "--seed".into(),
        (seed % 1_000_000).to_string(),
        "--settle".into(),
        "1s".into(),
        "--json".into(),
        "--".into(),
    ];
    args.extend(server);
    args.push(":::".into());
    args.extend(client);
    let out = Command::new(&corral).args(&args).output().map_err(|e| format!("cannot run corral link: {e}"))?;
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let json: serde_json::Value = stderr
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok().filter(|v: &serde_json::Value| v.get("server_to_client").is_some()))
        .ok_or_else(|| format!("corral link did not report its counters (is this root?): {}", stderr.trim()))?;
    let dir_bytes = |k: &str| json[k]["forwarded_bytes"].as_u64().unwrap_or(0);
    let dir_packets = |k: &str| json[k]["forwarded"].as_u64().unwrap_or(0);
    let bytes = dir_bytes("server_to_client") + dir_bytes("client_to_server");
    let throughput = bytes as f64 / em.duration_s as f64;

    let mut topo = Topology::new();
    topo.add(NodeSpec::new(Role::Gateway, None));
    let sim = Sim::from_topology(SimConfig::new(seed), &topo);
    let query = QueryRow {
        point: index,
        rep: 0,
        seed,
        start_s: 0.0,
        response_ms: f64::NAN,
        code: "2.05".into(),
        replies: 1,
        members: 1,
        coap_retx: 0,
        frames: dir_packets("server_to_client") + dir_packets("client_to_server"),
        mac_retries: 0,
    };
    let link = |from: u32, to: u32, k: &str| LinkRow {
        point: index,
        from,
        to,
        frames: dir_packets(k),
        retransmissions: 0,
        received: dir_packets(k),
    };
    let node = |n: u32, role: &'static str, sent: &str, got: &str| NodeRow {
        point: index,
        node: n,
        role,
        hops: 1,
        frames_sent: dir_packets(sent),
        frames_received: dir_packets(got),
        datagrams_forwarded: 0,
    };
    let point = PointRow {
        frames: dir_packets("server_to_client") + dir_packets("client_to_server"),
        drops_mac: json["server_to_client"]["dropped"].as_u64().unwrap_or(0)
            + json["client_to_server"]["dropped"].as_u64().unwrap_or(0),
        max_link_frames: dir_packets("server_to_client").max(dir_packets("client_to_server")),
        max_link: "link".into(),
        window_s: em.duration_s as f64,
        throughput,
        ..PointRow::blank(index, seed)
    };
    let result = PointResult {
        queries: vec![query],
        point,
        links: vec![link(0, 1, "server_to_client"), link(1, 0, "client_to_server")],
        nodes: vec![
            node(0, "server", "server_to_client", "client_to_server"),
            node(1, "client", "client_to_server", "server_to_client"),
        ],
        multiparty: None,
    };
    let network = Network { topology: topo, gateways: vec![0], members: vec![Vec::new()], host: 0 };
    let client = corral_proto::Node::new(corral_proto::Endpoint::new(sim.endpoint_config(NodeId(0))))
        .mount("unused", crate::client::LabClient::new());
    Ok(TracedPoint { result, sim, network, client })
}
