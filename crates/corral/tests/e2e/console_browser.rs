//! The gateway's web console in a real browser: Debian's chromium driven through chromedriver (WebDriver)
//! by Python's selenium. The page loads, an entity is created with the form, and its live value (a
//! server-sent event stream fed by observing the entity) changes when its member's reading changes. The
//! screenshot is kept as an artifact (its path is printed).
//!
//! Needs chromium, chromium-driver and selenium (scripts/install-peers.sh installs them); without them the
//! test prints `skipped:`, unless CORRAL_INTEROP=1 says they must be there.

use crate::common;

use common::*;
use std::process::Command;
use std::time::Duration;

const SCRIPT: &str = r##"
import subprocess, sys, time
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

base, member, corral, shot = sys.argv[1:5]
opts = webdriver.ChromeOptions()
for a in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=420,900"]:
    opts.add_argument(a)
d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
try:
    d.get(base + "/")
    assert "corral gateway" in d.title, d.title
    d.find_element(By.NAME, "name").send_keys("hall")
    eo = d.find_element(By.NAME, "eo"); eo.clear(); eo.send_keys("avg")
    d.find_element(By.NAME, "er").send_keys(member)
    d.find_element(By.CSS_SELECTOR, "#create button").click()
    live = lambda drv: drv.find_element(By.CSS_SELECTOR, 'output[data-live="hall"]').text
    WebDriverWait(d, 30).until(lambda drv: live(drv) == "0")
    print("before:", live(d), flush=True)
    subprocess.run([corral, "put", member, "-e", "42", "-t", "text"], check=True, capture_output=True)
    WebDriverWait(d, 30).until(lambda drv: live(drv) == "42")
    print("after:", live(d), flush=True)
    d.save_screenshot(shot)
finally:
    d.quit()
"##;

fn browser_available() -> bool {
    let have = |c: &str| Command::new("sh").arg("-c").arg(c).output().is_ok_and(|o| o.status.success());
    let ok = have("command -v chromium && test -x /usr/bin/chromedriver") && have("python3 -c 'import selenium'");
    if !ok {
        assert!(
            std::env::var("CORRAL_INTEROP").as_deref() != Ok("1"),
            "CORRAL_INTEROP=1 but chromium, chromium-driver or selenium is missing: run scripts/install-peers.sh"
        );
        println!("skipped: chromium, chromium-driver or Python's selenium is not installed (scripts/install-peers.sh)");
    }
    ok
}

#[test]
fn console_creates_an_entity_and_shows_its_value_change_live() {
    if !browser_available() {
        return;
    }
    // The member: corral serve's /obs, observable, which a PUT changes (its period long enough not to).
    let server = corral_serve("127.0.0.1", &["--obs-period", "1h"]);
    let member = format!("coap://127.0.0.1:{}/obs", server.port);
    let port = server.port.to_string();
    let (_gw, j, _d) = corral_testbed(1, 88, &["--http", "127.0.0.1:0", "--member-port", &port]);
    let base = format!("http://{}", j["http"].as_str().expect("http address"));
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-browser.png");
    let _ = std::fs::remove_file(&shot);
    let out = run(
        Command::new("python3").args(["-c", SCRIPT, &base, &member, CORRAL, &shot.display().to_string()]),
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "the browser session failed:\n{}\n{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("before: 0") && stdout(&out).contains("after: 42"), "{}", stdout(&out));
    assert!(shot.metadata().is_ok_and(|m| m.len() > 1000), "a screenshot at {}", shot.display());
    println!("screenshot: {}", shot.display());
}
