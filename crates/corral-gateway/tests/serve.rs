//! What `corral serve` runs, started in-process with `Serve::start` on port 0: its resources over UDP and
//! over TCP are one node's (a PUT over one is read back over the other), its mount hook reaches every
//! worker, and `stop` releases the port.

use corral_gateway::serve::{check_workers, MountServe, Serve, ServeConfig};
use corral_gateway::Error;
use corral_proto::Node;
use corral_tokio::{Client, Code, ContentFormat};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_started_as_a_library_answers_over_udp_and_tcp_from_one_set_of_resources() {
    let mounted = Arc::new(AtomicUsize::new(0));
    let counter = mounted.clone();
    let mount: MountServe = Arc::new(move |i: usize, _node: &mut Node| {
        assert_eq!(i, 0, "one worker, numbered 0");
        counter.fetch_add(1, Ordering::SeqCst);
    });
    let config =
        ServeConfig { tcp: Some(None), mount: Some(mount), ..ServeConfig::new("127.0.0.1:0".parse().unwrap()) };
    let serve = Serve::start(config).expect("serve starts");
    let local = serve.local_addr();
    assert_ne!(local.port(), 0, "the handle reports the port it bound");
    assert_eq!(serve.tcp_local_addr(), Some(local), "TCP on the UDP address and port");
    assert_eq!((serve.tls_local_addr(), serve.dtls_local_addr()), (None, None));

    let client = Client::builder().timeout(Duration::from_secs(5)).bind("127.0.0.1:0").await.expect("a client");
    let hello = client.get(&format!("coap://{local}/hello")).await.expect("an answer");
    assert_eq!((hello.code, hello.payload_text()), (Code::CONTENT, "Hello from corral!".into()));
    assert_eq!(mounted.load(Ordering::SeqCst), 1, "the mount hook ran on the worker's node");

    let put = client
        .put(&format!("coap://{local}/test"))
        .payload("written over UDP")
        .content_format(ContentFormat::TEXT_PLAIN)
        .await
        .expect("an answer");
    assert_eq!(put.code, Code::CHANGED);
    let read = client.get(&format!("coap+tcp://{local}/test")).await.expect("an answer over TCP");
    assert_eq!((read.code, read.payload_text()), (Code::CONTENT, "written over UDP".into()));

    serve.stop().await;
    // The port is free again: a second serve binds it.
    let again = Serve::start(ServeConfig::new(local)).expect("the port was released");
    again.stop().await;
}

#[test]
fn several_workers_refuse_what_one_endpoint_must_own() {
    let group = ["224.0.1.187".parse().unwrap()];
    assert!(check_workers(1, true, &group).is_ok());
    let Err(Error::Config(m)) = check_workers(2, true, &[]) else { panic!("OSCORE on two workers accepted") };
    assert!(m.contains("--credentials"), "{m}");
    let Err(Error::Config(m)) = check_workers(2, false, &group) else { panic!("a group on two workers accepted") };
    assert!(m.contains("--join"), "{m}");
    let config = ServeConfig { workers: 2, join: group.to_vec(), ..ServeConfig::new("127.0.0.1:0".parse().unwrap()) };
    assert!(matches!(Serve::start(config), Err(Error::Config(_))), "refused before anything is bound");
}
