//! Virtual constrained devices: the lab's sensors and actuators, as sans-IO services (seed 000 used
//! Contiki nodes running Erbium).
//!
//! - [`Sensors`] (mount at `s`): `/s/t` temperature (°C), `/s/h` relative humidity (%RH), `/s/l` light
//!   (lx). Values are deterministic functions of the device seed and `cx.now()` ([`sample`]): a seeded
//!   base, a slow sine and a little seeded noise, sampled once per virtual second — no clock, no RNG state.
//! - [`Actuators`] (mount at `a`): `/a/shutter` (position 0 = open … 100 = closed) and `/a/light`
//!   (on/off). GET reads the state, PUT/POST sets it; bad payloads get 4.00 naming the accepted values.
//! - [`mount_device`] puts sensors, actuators and the `/mc` resource on a node in one call.
//!
//! Representations (by Accept): text/plain (default), JSON (a bare number or boolean), CBOR, SenML JSON and
//! SenML CBOR (one record). Must never: read a clock or keep per-request state — these run by the
//! thousand in the simulator, so every request is answered at once from a few arithmetic operations.

use crate::mc::McResource;
use crate::senml::{self, Record};
use corral_proto::wire::{Code, ContentFormat};
use corral_proto::{Context, IncomingRequest, Instant, Node, ResourceLink, Response, Rng, Service, ServiceHandle};

/// A sensed quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    Temperature,
    Humidity,
    Light,
}

impl Quantity {
    fn params(self) -> (f64, f64, f64, f64, f64, f64, &'static str, &'static str) {
        // (base, base spread, amplitude, period s, noise, lower bound, SenML unit, name)
        match self {
            Quantity::Temperature => (21.0, 2.0, 1.5, 3600.0, 0.05, -40.0, "Cel", "temperature"),
            Quantity::Humidity => (45.0, 5.0, 5.0, 5400.0, 0.2, 0.0, "%RH", "humidity"),
            Quantity::Light => (300.0, 100.0, 200.0, 7200.0, 5.0, 0.0, "lx", "light"),
        }
    }

    fn stream(self) -> u64 {
        match self {
            Quantity::Temperature => 0x7e,
            Quantity::Humidity => 0x4d,
            Quantity::Light => 0x11,
        }
    }

    pub fn unit(self) -> &'static str {
        self.params().6
    }

    pub fn name(self) -> &'static str {
        self.params().7
    }

    /// The quantity behind a sensor's path (`s/t`, `/s/h`, `s/l`: the sensors mounted at `s`).
    pub fn at(path: &str) -> Option<Quantity> {
        match path.trim_matches('/') {
            "s/t" => Some(Quantity::Temperature),
            "s/h" => Some(Quantity::Humidity),
            "s/l" => Some(Quantity::Light),
            _ => None,
        }
    }
}

/// How far a reading must move from the value observers last saw before observable sensors notify them
/// (RFC 7641 §4.2 leaves when to notify to the server). A step at or below the sensors' resolution
/// (0.01) notifies every reading that changed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NotifySteps {
    /// °C.
    pub temperature: f64,
    /// %RH.
    pub humidity: f64,
    /// lx.
    pub light: f64,
}

impl Default for NotifySteps {
    /// 0.2 °C, 1 %RH, 10 lx.
    fn default() -> NotifySteps {
        NotifySteps { temperature: 0.2, humidity: 1.0, light: 10.0 }
    }
}

impl NotifySteps {
    /// The step of `q`.
    pub fn of(&self, q: Quantity) -> f64 {
        match q {
            Quantity::Temperature => self.temperature,
            Quantity::Humidity => self.humidity,
            Quantity::Light => self.light,
        }
    }

    /// These steps with `q`'s set to `step`.
    pub fn with(mut self, q: Quantity, step: f64) -> NotifySteps {
        match q {
            Quantity::Temperature => self.temperature = step,
            Quantity::Humidity => self.humidity = step,
            Quantity::Light => self.light = step,
        }
        self
    }
}

/// The value a device with `seed` reports for `q` at `now`, rounded to 2 decimals. Constant within each
/// virtual second (the sensor samples once per second), so the same request time gives the same value.
pub fn sample(seed: u64, q: Quantity, now: Instant) -> f64 {
    let (base, spread, amp, period, noise, lower, _, _) = q.params();
    let sec = now.as_secs();
    let mut fixed = Rng::stream(seed, q.stream());
    let offset = (fixed.f64() * 2.0 - 1.0) * spread;
    let phase = fixed.f64() * std::f64::consts::TAU;
    let jitter = (Rng::stream(seed ^ sec.wrapping_mul(0x9e37_79b9_7f4a_7c15), q.stream()).f64() * 2.0 - 1.0) * noise;
    let v = base + offset + amp * (std::f64::consts::TAU * sec as f64 / period + phase).sin() + jitter;
    let v = v.max(lower);
    let v = if q == Quantity::Humidity { v.min(100.0) } else { v };
    (v * 100.0).round() / 100.0
}

/// Configuration of a virtual device.
#[derive(Debug, Clone, Default)]
pub struct DeviceConfig {
    /// Seed of the sensor values; `None`: the node's seed.
    pub seed: Option<u64>,
    /// Add `obs` to the sensors' links, for drivers that put an Observe layer in front of them.
    pub advertise_obs: bool,
    /// Observable sensors (RFC 7641, implies `advertise_obs`): GET responses register observers, and once
    /// one registered the sensors look at their value every second and notify when it moved by its step
    /// (`notify_steps`). Off by default: it costs a timer per device, and the simulator runs thousands of
    /// devices that nobody observes.
    pub observable: bool,
    /// The steps of observable sensors: 0.2 °C, 1 %RH, 10 lx unless set.
    pub notify_steps: NotifySteps,
    /// Slots of `/mc`; `None`: [`crate::mc::DEFAULT_SLOTS`].
    pub mc_slots: Option<usize>,
    /// Who may change the device's memberships through `/mc` (see [`McResource::managed_by`]); empty:
    /// anyone.
    pub managers: Vec<crate::policy::Prefix>,
    /// A membership change from a source beyond loopback waits for proof of its address (see
    /// [`McResource::verifying`]).
    pub verify_managers: bool,
}

const SENSOR_FORMATS: &str = "0 50 60 110 112";

fn cbor_bytes(v: &ciborium::Value) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = ciborium::into_writer(v, &mut out);
    out
}

/// A representation of one value by Accept; 4.06 for anything else.
fn represent(
    accept: Option<ContentFormat>,
    text: String,
    json: serde_json::Value,
    cbor: ciborium::Value,
    rec: Record,
) -> Response {
    match accept.map(|c| c.0) {
        None | Some(0) => Response::content(ContentFormat::TEXT_PLAIN, text),
        Some(50) => Response::content(ContentFormat::JSON, json.to_string()),
        Some(60) => Response::content(ContentFormat::CBOR, cbor_bytes(&cbor)),
        Some(110) => Response::content(ContentFormat::SENML_JSON, senml::encode_json(&[rec])),
        Some(112) => Response::content(ContentFormat::SENML_CBOR, senml::encode_cbor(&[rec])),
        Some(other) => {
            Response::error(Code::NOT_ACCEPTABLE, format!("content format {other} not offered ({SENSOR_FORMATS})"))
        }
    }
}

/// The sensors `/s/t`, `/s/h`, `/s/l`. Mount at `s`.
#[derive(Debug, Clone, Default)]
pub struct Sensors {
    config: DeviceConfig,
    /// Observable sensors: the value last served per quantity (a notification re-runs the handler, so
    /// this is also the value observers last saw), and where the sensors are mounted (learnt from the
    /// first registration: a service does not know its mount point before a request names it).
    watch: Option<Watch>,
}

#[derive(Debug, Clone)]
struct Watch {
    prefix: String,
    last: [Option<f64>; 3],
    /// The next look at the values; `None` while nobody observes.
    next: Option<Instant>,
}

const QUANTITIES: [(Quantity, &str); 3] =
    [(Quantity::Temperature, "t"), (Quantity::Humidity, "h"), (Quantity::Light, "l")];

impl Sensors {
    pub fn new(config: DeviceConfig) -> Sensors {
        Sensors { config, watch: None }
    }

    fn seed(&self, cx: &Context<'_>) -> u64 {
        self.config.seed.unwrap_or(cx.endpoint().config().seed)
    }

    /// The next whole second after `now`: sensors sample once per second.
    fn next_second(now: Instant) -> Instant {
        Instant::from_secs(now.as_secs() + 1)
    }
}

impl Service for Sensors {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let sub = cx.subpath(&req.request);
        let q = match sub.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
            ["t"] => Quantity::Temperature,
            ["h"] => Quantity::Humidity,
            ["l"] => Quantity::Light,
            _ => return cx.respond(req.id, Response::error(Code::NOT_FOUND, "sensors are s/t, s/h and s/l")),
        };
        if req.request.method != Code::GET {
            return cx.respond(req.id, Response::error(Code::METHOD_NOT_ALLOWED, "sensors are read-only (GET)"));
        }
        let v = sample(self.seed(cx), q, cx.now());
        let observable = self.config.observable;
        if observable {
            let watch = self.watch.get_or_insert_with(|| {
                let depth = cx.mount_depth();
                let prefix: Vec<String> = req.request.path_segments().take(depth).map(|s| s.into_owned()).collect();
                Watch { prefix: prefix.join("/"), last: [None; 3], next: None }
            });
            if req.request.options.observe() == Some(0) && watch.next.is_none() {
                watch.next = Some(Sensors::next_second(cx.now()));
            }
            if let Some(i) = QUANTITIES.iter().position(|(qq, _)| *qq == q) {
                watch.last[i] = Some(v);
            }
        }
        let rec = Record { n: Some(q.name().into()), u: Some(q.unit().into()), v: Some(v), ..Record::default() };
        let resp = represent(
            req.request.options.accept(),
            format!("{v}"),
            serde_json::json!(v),
            ciborium::Value::Float(v),
            rec,
        );
        let resp = if observable && resp.code == Code::CONTENT { resp.observable() } else { resp };
        cx.respond(req.id, resp);
    }

    fn handle_timeout(&mut self, cx: &mut Context<'_>) {
        let seed = self.seed(cx);
        let steps = self.config.notify_steps;
        let Some(watch) = self.watch.as_mut() else { return };
        if watch.next.is_none_or(|t| cx.now() < t) {
            return;
        }
        let mut observed = false;
        for (i, (q, sub)) in QUANTITIES.iter().enumerate() {
            let path = if watch.prefix.is_empty() { format!("/{sub}") } else { format!("/{}/{sub}", watch.prefix) };
            if cx.observer_count(&path) == 0 {
                continue;
            }
            observed = true;
            let Some(last) = watch.last[i] else { continue };
            if (sample(seed, *q, cx.now()) - last).abs() >= steps.of(*q) {
                // The notification re-runs handle_request, which records the value sent.
                cx.changed(&path);
            }
        }
        watch.next = observed.then(|| Sensors::next_second(cx.now()));
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.watch.as_ref().and_then(|w| w.next)
    }

    fn links(&self) -> Vec<ResourceLink> {
        [("t", "temperature", "Cel"), ("h", "humidity", "%RH"), ("l", "light", "lx")]
            .into_iter()
            .map(|(p, rt, _u)| {
                let l = ResourceLink::new(p).attr("rt", rt).attr("if", "core.s").attr("ct", SENSOR_FORMATS);
                if self.config.advertise_obs || self.config.observable {
                    l.flag("obs")
                } else {
                    l
                }
            })
            .collect()
    }
}

/// The actuators `/a/shutter` and `/a/light`. Mount at `a`.
#[derive(Debug, Clone, Default)]
pub struct Actuators {
    shutter: u8,
    light: bool,
}

/// A payload read as a word or a number, whatever its content format; `None` when unreadable.
enum Setting {
    Word(String),
    Num(f64),
    Bool(bool),
}

/// A setting an actuator does not take: the actuator's help and what was given (`None`: a value of the
/// wrong kind), for the 4.00 answer's diagnostic.
struct BadSetting {
    help: &'static str,
    given: Option<String>,
}

impl std::fmt::Display for BadSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.given {
            Some(given) => write!(f, "{}, not {given}", self.help),
            None => f.write_str(self.help),
        }
    }
}

fn read_setting(cf: Option<ContentFormat>, payload: &[u8]) -> Result<Setting, Response> {
    let from_json = |j: serde_json::Value| match j {
        serde_json::Value::Number(n) => n.as_f64().map(Setting::Num),
        serde_json::Value::Bool(b) => Some(Setting::Bool(b)),
        serde_json::Value::String(s) => Some(Setting::Word(s.to_ascii_lowercase())),
        _ => None,
    };
    let s = match cf.map(|c| c.0) {
        None | Some(0) => {
            let t = String::from_utf8_lossy(payload).trim().to_ascii_lowercase();
            match t.parse::<f64>() {
                Ok(v) => Some(Setting::Num(v)),
                Err(_) => Some(Setting::Word(t)),
            }
        }
        Some(50) => serde_json::from_slice(payload).ok().and_then(from_json),
        Some(60) => match ciborium::from_reader::<ciborium::Value, _>(payload) {
            Ok(ciborium::Value::Integer(i)) => Some(Setting::Num(i128::from(i) as f64)),
            Ok(ciborium::Value::Float(f)) => Some(Setting::Num(f)),
            Ok(ciborium::Value::Bool(b)) => Some(Setting::Bool(b)),
            Ok(ciborium::Value::Text(t)) => Some(Setting::Word(t.to_ascii_lowercase())),
            _ => None,
        },
        Some(other) => {
            return Err(Response::error(
                Code::UNSUPPORTED_CONTENT_FORMAT,
                format!("content format {other} not accepted (text/plain, JSON or CBOR)"),
            ))
        }
    };
    s.ok_or_else(|| Response::error(Code::BAD_REQUEST, "unreadable payload"))
}

impl Actuators {
    pub fn new() -> Actuators {
        Actuators::default()
    }

    /// Shutter position: 0 open … 100 closed.
    pub fn shutter(&self) -> u8 {
        self.shutter
    }

    pub fn light(&self) -> bool {
        self.light
    }

    fn set_shutter(&mut self, s: Setting) -> Result<(), BadSetting> {
        const HELP: &str = "shutter expects open, close, stop or a position 0 (open) to 100 (closed)";
        self.shutter = match s {
            Setting::Word(w) => match w.as_str() {
                "open" | "up" => 0,
                "close" | "closed" | "down" => 100,
                "stop" => self.shutter,
                _ => return Err(BadSetting { help: HELP, given: Some(format!("{w:?}")) }),
            },
            Setting::Num(v) if (0.0..=100.0).contains(&v) && v.fract() == 0.0 => v as u8,
            Setting::Num(v) => return Err(BadSetting { help: HELP, given: Some(v.to_string()) }),
            Setting::Bool(_) => return Err(BadSetting { help: HELP, given: None }),
        };
        Ok(())
    }

    fn set_light(&mut self, s: Setting) -> Result<(), BadSetting> {
        const HELP: &str = "light expects on, off, toggle, 1, 0, true or false";
        self.light = match s {
            Setting::Bool(b) => b,
            Setting::Num(v) if v == 0.0 || v == 1.0 => v == 1.0,
            Setting::Word(w) => match w.as_str() {
                "on" | "true" => true,
                "off" | "false" => false,
                "toggle" => !self.light,
                _ => return Err(BadSetting { help: HELP, given: Some(format!("{w:?}")) }),
            },
            Setting::Num(v) => return Err(BadSetting { help: HELP, given: Some(v.to_string()) }),
        };
        Ok(())
    }
}

impl Service for Actuators {
    fn handle_request(&mut self, cx: &mut Context<'_>, req: IncomingRequest) {
        let sub = cx.subpath(&req.request);
        let which = match sub.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
            ["shutter"] => true,
            ["light"] => false,
            _ => return cx.respond(req.id, Response::error(Code::NOT_FOUND, "actuators are a/shutter and a/light")),
        };
        let r = &req.request;
        let resp = match r.method {
            Code::GET => {
                let accept = r.options.accept();
                if which {
                    let p = self.shutter;
                    let rec = Record {
                        n: Some("shutter".into()),
                        u: Some("%".into()),
                        v: Some(f64::from(p)),
                        ..Record::default()
                    };
                    represent(accept, p.to_string(), serde_json::json!(p), ciborium::Value::Integer(p.into()), rec)
                } else {
                    let on = self.light;
                    let rec = Record { n: Some("light".into()), vb: Some(on), ..Record::default() };
                    let text = if on { "on" } else { "off" };
                    represent(accept, text.into(), serde_json::json!(on), ciborium::Value::Bool(on), rec)
                }
            }
            Code::PUT | Code::POST => match read_setting(r.options.content_format(), &r.payload) {
                Err(resp) => resp,
                Ok(s) => {
                    let res = if which { self.set_shutter(s) } else { self.set_light(s) };
                    match res {
                        Ok(()) => Response::new(Code::CHANGED),
                        Err(why) => Response::error(Code::BAD_REQUEST, why.to_string()),
                    }
                }
            },
            _ => Response::error(Code::METHOD_NOT_ALLOWED, "actuators support GET, PUT and POST"),
        };
        cx.respond(req.id, resp);
    }

    fn links(&self) -> Vec<ResourceLink> {
        vec![
            ResourceLink::new("shutter").attr("rt", "shutter").attr("if", "core.a").attr("ct", SENSOR_FORMATS),
            ResourceLink::new("light").attr("rt", "light").attr("if", "core.a").attr("ct", SENSOR_FORMATS),
        ]
    }
}

/// The services [`mount_device`] mounted, to look at them later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceHandles {
    pub sensors: ServiceHandle,
    pub actuators: ServiceHandle,
    pub mc: ServiceHandle,
}

/// Mounts a virtual device on a node: sensors at `s`, actuators at `a`, `/mc` at `mc`.
pub fn mount_device(node: &mut Node, config: DeviceConfig) -> DeviceHandles {
    let slots = config.mc_slots.unwrap_or(crate::mc::DEFAULT_SLOTS);
    let mc = McResource::new(slots).managed_by(config.managers.clone()).verifying(config.verify_managers);
    DeviceHandles {
        sensors: node.mount("s", Sensors::new(config)),
        actuators: node.mount("a", Actuators::new()),
        mc: node.mount(crate::mc::PATH, mc),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_deterministic_plausible_and_vary_slowly() {
        for seed in 0..50 {
            let a = sample(seed, Quantity::Temperature, Instant::from_millis(1_200));
            assert_eq!(a, sample(seed, Quantity::Temperature, Instant::from_millis(1_900)), "constant within a second");
            assert!((15.0..27.0).contains(&a), "{a}");
            let later = sample(seed, Quantity::Temperature, Instant::from_secs(61));
            assert!((a - later).abs() < 0.5, "slow: {a} then {later}");
            let h = sample(seed, Quantity::Humidity, Instant::ZERO);
            assert!((0.0..=100.0).contains(&h));
            assert!(sample(seed, Quantity::Light, Instant::ZERO) >= 0.0);
            assert_eq!(format!("{a}").parse::<f64>().unwrap(), a, "text form reads back exactly");
        }
        assert_ne!(sample(1, Quantity::Temperature, Instant::ZERO), sample(2, Quantity::Temperature, Instant::ZERO));
    }
}
