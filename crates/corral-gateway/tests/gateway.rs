//! The gateway the binary runs, started in-process with `Gateway::start` on port 0: a testbed of virtual
//! devices, an entity made of them through plain CoAP, its values, and the entity kept across a restart on
//! the same data directory (the database and the directory lock are released by `stop`).

use corral_gateway::gateway::Testbed;
use corral_gateway::{Gateway, GatewayConfig};
use corral_tokio::{Client, Code, ContentFormat};
use std::net::SocketAddr;
use std::time::Duration;

/// A gateway on 127.0.0.1 (any port) with `n` testbed devices on 127.0.`subnet`.1 … (any port).
fn config(data: &std::path::Path, n: usize, subnet: u8) -> GatewayConfig {
    let mut config = GatewayConfig::new("127.0.0.1:0".parse().unwrap(), data);
    config.testbed = Some(Testbed {
        count: n,
        first: Some(SocketAddr::from(([127, 0, subnet, 1], 0))),
        mc_slots: 4,
        seed: 7,
        managers: corral_group::Prefix::loopback().to_vec(),
        request_log: None,
    });
    config.leisure = Some(Duration::from_millis(300));
    config
}

async fn number(client: &Client, uri: &str) -> f64 {
    let r = client.get(uri).await.expect("an answer");
    assert_eq!(r.code, Code::CONTENT, "{uri}: {}", String::from_utf8_lossy(&r.payload));
    String::from_utf8_lossy(&r.payload).trim().parse().unwrap_or_else(|_| panic!("{uri}: not a number"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_started_as_a_library_serves_an_entity_of_its_testbed_and_keeps_it_across_a_restart() {
    let data = tempfile::tempdir().expect("temporary directory");
    let gateway = Gateway::start(config(data.path(), 3, 41)).await.expect("the gateway starts");
    let local = gateway.local_addr();
    assert_ne!(local.port(), 0, "the handle reports the port it bound");
    assert_eq!(gateway.devices().len(), 3);
    assert!(gateway.entities().is_empty());
    assert_eq!(gateway.database(), data.path().join("em.db"));
    // Its member policy names its own port (a member there is one of its entities) and the testbed's.
    assert_eq!(gateway.members().gateway_port, local.port());
    assert!(gateway.members().ports.is_empty(), "members on loopback at any port: {:?}", gateway.members().ports);

    let client = Client::builder().timeout(Duration::from_secs(5)).bind("127.0.0.1:0").await.expect("a client");
    let members: Vec<String> = gateway.devices().iter().map(|d| format!("coap://{d}/s/t")).collect();
    let profile = serde_json::json!({ "er": members, "eo": ["avg", "min", "max"] }).to_string();
    let uri = format!("{}/em/room", gateway.uri());
    let r = client.put(&uri).content_format(ContentFormat::JSON).payload(profile).await.expect("an answer");
    assert_eq!(r.code, Code::CREATED, "{}", String::from_utf8_lossy(&r.payload));

    // The combined values are the devices' own (read around them: the sensors drift slowly).
    let mut before = Vec::new();
    for m in &members {
        before.push(number(&client, m).await);
    }
    let (min, max) = (number(&client, &format!("{uri}?eo=min")).await, number(&client, &format!("{uri}?eo=max")).await);
    let avg = number(&client, &format!("{uri}?eo=avg")).await;
    let mut after = Vec::new();
    for m in &members {
        after.push(number(&client, m).await);
    }
    let lowest = before.iter().chain(&after).copied().fold(f64::INFINITY, f64::min);
    let highest = before.iter().chain(&after).copied().fold(f64::NEG_INFINITY, f64::max);
    assert!(
        lowest - 0.5 <= min && max <= highest + 0.5,
        "min {min}, max {max}: devices between {lowest} and {highest}"
    );
    assert!(min <= avg && avg <= max, "avg {avg} outside [{min}, {max}]");

    // A second gateway on the same data directory is refused while the first runs.
    let Err(e) = Gateway::start(config(data.path(), 1, 42)).await else { panic!("two gateways on one directory") };
    assert!(e.to_string().contains("already in use"), "{e}");

    gateway.stop().await;
    let again = Gateway::start(config(data.path(), 3, 41)).await.expect("the gateway starts again");
    assert_eq!(again.entities(), ["room"]);
    again.stop().await;
}
