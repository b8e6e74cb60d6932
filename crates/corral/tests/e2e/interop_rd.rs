//! corral's devices (`corral device --rd`) against the Resource Directories of libcoap (`coap-rd-notls`)
//! and aiocoap (`aiocoap-rd`): each finds the directory's registration resource (RFC 9176 §4.3: libcoap's
//! is `/rd`, aiocoap's `/resourcedirectory/`), registers, shows up in the directory's lookups, and — with
//! aiocoap's — removes its registration when it stops. (The other way round, libcoap's and aiocoap's
//! clients against `corral rd`, is in `rd.rs`.)
//!
//! libcoap 4.3.1's `coap-rd` aborts ("double free detected") on any DELETE of a registration, its own
//! client's too (`coap-client-notls -m delete coap://…/rd/LOC`), so the removal is checked against
//! aiocoap's directory only and the libcoap test stops its devices with SIGKILL.

use crate::common;
use common::*;
use std::process::{Command, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

/// Waits (at most 15 s) until a GET of `uri` (by corral's client) satisfies `ok`; the last answer.
fn wait_for(uri: &str, ok: impl Fn(&str) -> bool) -> String {
    let mut last = String::new();
    for _ in 0..30 {
        last = stdout(&corral(&["get", uri, "-B", "3"]));
        if ok(&last) {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    last
}

/// A directory started by `cmd` on `port`, once its `/.well-known/core` answers.
fn directory(cmd: &mut Command, port: u16) -> Proc {
    let child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).spawn().expect("start the directory");
    let p = Proc { child, port };
    let up = wait_for(&format!("coap://127.0.0.1:{port}/.well-known/core"), |t| t.contains("core.rd"));
    assert!(up.contains("core.rd"), "the directory did not come up: {up}");
    p
}

/// Two corral devices registering with the directory at `port`; their port.
fn devices(port: u16) -> (Proc, String) {
    let (dev, j) = rd_devices(&format!("coap://127.0.0.1:{port}"), 2);
    let port = j["devices"][0].as_str().unwrap().rsplit_once(':').unwrap().1.to_string();
    (dev, port)
}

#[test]
fn corral_devices_register_with_aiocoap_rd_and_leave_it_when_they_stop() {
    if !interop_enabled(&["aiocoap-rd"]) {
        return;
    }
    let port = free_udp_port();
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = Command::new("aiocoap-rd");
    cmd.args(["--bind", &format!("127.0.0.1:{port}")]).stderr(log.reopen().unwrap());
    let _rd = directory(&mut cmd, port);
    let (mut dev, dport) = devices(port);
    let eps = wait_for(&format!("coap://127.0.0.1:{port}/endpoint-lookup/"), |t| t.matches("ep=\"dev-").count() == 2);
    assert_eq!(eps.matches("ep=\"dev-").count(), 2, "{eps}");
    assert!(eps.contains(&format!("base=\"coap://127.0.0.1:{dport}\"")), "{eps}");
    let res = stdout(&corral(&["get", &format!("coap://127.0.0.1:{port}/resource-lookup/?rt=temperature")]));
    assert!(res.contains(&format!("<coap://127.0.0.1:{dport}/s/t>")), "{res}");
    // The registration went where the directory said, not to a guessed /rd.
    let said = std::fs::read_to_string(log.path()).unwrap();
    assert!(!said.contains("unannounced"), "aiocoap-rd: {said}");
    // A graceful stop removes both registrations.
    assert!(Command::new("kill").args(["-TERM", &dev.child.id().to_string()]).status().unwrap().success());
    assert_eq!(dev.child.wait().unwrap().code(), Some(0));
    let eps = wait_for(&format!("coap://127.0.0.1:{port}/endpoint-lookup/"), |t| !t.contains("ep=\"dev-"));
    assert!(!eps.contains("ep=\"dev-"), "removed on the way out: {eps}");
}

#[test]
fn corral_devices_register_with_libcoap_rd() {
    if !interop_enabled(&["coap-rd-notls", "coap-client-notls"]) {
        return;
    }
    let port = free_udp_port();
    let mut cmd = Command::new("coap-rd-notls");
    cmd.args(["-A", "127.0.0.1", "-p", &port.to_string()]).stderr(Stdio::null());
    let _rd = directory(&mut cmd, port);
    let (dev, _) = devices(port);
    // libcoap's directory (an early draft of RFC 9176) has no lookup interface: each registration is a
    // resource of its own, listed in its /.well-known/core, whose representation is the registered links.
    let wkc = wait_for(&format!("coap://127.0.0.1:{port}/.well-known/core"), |t| t.matches("</rd/").count() == 2);
    let regs: Vec<&str> = wkc.split(',').filter_map(|l| l.strip_prefix("</rd/")?.split('>').next()).collect();
    assert_eq!(regs.len(), 2, "{wkc}");
    let o = run(Command::new("coap-client-notls").arg(format!("coap://127.0.0.1:{port}/rd/{}", regs[0])), LIMIT);
    let links = stdout(&o);
    assert!(links.contains("</s/t>;rt=\"temperature\"") && links.contains("</mc>"), "{links}");
    drop(dev);
}
