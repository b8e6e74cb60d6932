//! A scenario's validation and the expansion of its sweep axes into points, each resolved into the
//! [`Setup`] of one run (see the parent module's "Sweep order").

use super::entity::Follow;
use super::figure::Metric;
use super::point::{AxisValue, Point, AXES};
use super::proxy::Forwarding;
use super::setup::{
    Common, Cpu, EntitySetup, Experiment, Family, Floor, NetworkSetup, ProxySetup, Queries, Setup, Wifi,
};
use super::{err, Scenario, ScenarioError, TopologyKind};

impl Scenario {
    /// Parses and validates a scenario file.
    pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        let s: Scenario = toml::from_str(text).map_err(|e| ScenarioError::Format(e.to_string()))?;
        s.validate()?;
        Ok(s)
    }

    /// The experiment family: the one family section the file has, or the Entity Manager's queries.
    pub fn family(&self) -> Result<Family, ScenarioError> {
        let given: Vec<Family> = [
            (self.proxy.is_some(), Family::Proxy),
            (self.stream.is_some(), Family::Stream),
            (self.emulated.is_some(), Family::Emulated),
            (self.baseline.is_some(), Family::Baseline),
            (self.multiparty.is_some(), Family::Multiparty),
            (self.churn.is_some(), Family::Churn),
            (self.dtls.is_some(), Family::Dtls),
        ]
        .into_iter()
        .filter_map(|(present, f)| present.then_some(f))
        .collect();
        match given[..] {
            [] => Ok(Family::Entity),
            [f] => Ok(f),
            _ => err(format!(
                "{}: a scenario runs one experiment family",
                given.iter().map(|f| format!("[{}]", f.section())).collect::<Vec<_>>().join(" and ")
            )),
        }
    }

    fn validate(&self) -> Result<(), ScenarioError> {
        self.family()?;
        super::procedure::validate(&self.procedure)?;
        if self.name.is_empty() || !self.name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
            return err(format!("name {:?}: use letters, digits, - _ .", self.name));
        }
        for (axis, values) in &self.sweep {
            if !AXES.contains(&axis.as_str()) {
                return err(format!("sweep.{axis}: unknown axis (known: {})", AXES.join(", ")));
            }
            if values.is_empty() {
                return err(format!("sweep.{axis}: no values"));
            }
            for v in values {
                AxisValue::from_toml(axis, v)?;
            }
        }
        for axis in self.workload.quick_sweep.keys() {
            if !self.sweep.contains_key(axis) {
                return err(format!("workload.quick_sweep.{axis}: not a sweep axis of this scenario"));
            }
        }
        if self.workload.repetitions == 0 || self.workload.quick_repetitions == 0 {
            return err("workload: repetitions must be at least 1");
        }
        if self.network.gateways == 0 || self.network.gateways > self.network.channels.len() {
            return err("network.gateways: between 1 and the number of network.channels");
        }
        for f in &self.figures {
            if !matches!(f.kind.as_str(), "line" | "box") {
                return err(format!("figure {}: kind must be line or box", f.id));
            }
            if f.kind == "line" && !self.sweep.contains_key(&f.x) && f.x != "replicate" {
                return err(format!("figure {}: x = {:?} is not a sweep axis", f.id, f.x));
            }
            for a in f.series.iter().chain(f.filter.keys()) {
                if !self.sweep.contains_key(a) {
                    return err(format!("figure {}: {a:?} is not a sweep axis", f.id));
                }
            }
            Metric::parse(&f.metric)?;
        }
        for f in &self.findings {
            for r in &f.reason {
                if !self.sensitivity.iter().any(|v| &v.name == r) {
                    let known: Vec<String> = self.sensitivity.iter().map(|v| format!("{:?}", v.name)).collect();
                    return err(format!(
                        "finding {:?}: reason {r:?} is no [[sensitivity]] variant of this scenario (variants: {})",
                        f.check,
                        if known.is_empty() { "none".into() } else { known.join(", ") }
                    ));
                }
            }
        }
        if self.sweep.contains_key("replicate") {
            return err("sweep.replicate: replicates come from workload.replicates, not from the sweep");
        }
        // Every point must resolve.
        for p in self.points(false).iter().chain(self.points(true).iter()) {
            self.setup(p, false)?;
        }
        Ok(())
    }

    /// Every sweep point (all of them, or those of `--quick`), indexed in the full sweep's order.
    pub fn points(&self, quick: bool) -> Vec<Point> {
        let mut axes: Vec<(&str, Vec<AxisValue>)> = AXES
            .iter()
            .filter_map(|a| {
                let values = self.sweep.get(*a)?;
                Some((*a, values.iter().filter_map(|v| AxisValue::from_toml(a, v).ok()).collect()))
            })
            .collect();
        let replicates = self.replicates(quick);
        if replicates > 1 {
            axes.push(("replicate", (1..=replicates).map(|r| AxisValue::Num(r as f64)).collect()));
        }
        let mut out = Vec::new();
        let total: usize = axes.iter().map(|(_, v)| v.len()).product();
        for index in 0..total {
            let mut rest = index;
            let mut values = vec![(String::new(), AxisValue::Num(0.0)); axes.len()];
            for (k, (a, vs)) in axes.iter().enumerate().rev() {
                values[k] = (a.to_string(), vs[rest % vs.len()].clone());
                rest /= vs.len();
            }
            let p = Point { index, values };
            if quick && !self.in_quick(&p) {
                continue;
            }
            out.push(p);
        }
        out
    }

    /// Whether a point of the `follow` axis observes (its members' sensors then notify).
    fn observes(&self) -> bool {
        self.sweep.get("follow").is_some_and(|vs| vs.iter().any(|v| v.as_str() == Some("observe")))
    }

    /// Replicates per point: `workload.replicates`, or `quick_replicates` with `--quick`.
    pub fn replicates(&self, quick: bool) -> usize {
        if quick { self.workload.quick_replicates } else { self.workload.replicates }.max(1)
    }

    fn in_quick(&self, p: &Point) -> bool {
        self.workload.quick_sweep.iter().all(|(axis, keep)| {
            let keep: Vec<AxisValue> = keep.iter().filter_map(|v| AxisValue::from_toml(axis, v).ok()).collect();
            p.get(axis).is_none_or(|v| keep.contains(v))
        })
    }

    /// The resolved parameters of one point.
    pub fn setup(&self, p: &Point, quick: bool) -> Result<Setup, ScenarioError> {
        let n = &self.network;
        let mut common = Common {
            network: NetworkSetup {
                topology: n.topology,
                group: n.group,
                layers: n.layers.clone(),
                gateways: n.gateways,
                channels: n.channels.clone(),
                // Each replicate of a floor scenario is another random floor of the same size and density.
                floor: Floor {
                    width: n.width,
                    height: n.height,
                    radius: n.radius,
                    seed: n.topology_seed + p.get("replicate").and_then(AxisValue::num).map_or(0, |r| r as u64 - 1),
                },
                wired_delay_ms: n.wired_delay_ms,
                link: n.link,
            },
            wifi: Wifi {
                channel: self.interference.wifi_channel,
                schedule: if self.interference.schedule.is_empty() {
                    vec![(0.0, self.interference.mbps)]
                } else {
                    self.interference.schedule.clone()
                },
                cca_busy_prob: self.calibration.cca_busy_prob,
                corruption_prob: self.calibration.corruption_prob,
            },
            cpu: Cpu {
                processing_delay_ms: self.calibration.processing_delay_ms,
                rx_queue: u16::try_from(self.calibration.rx_queue).ok(),
            },
            transmission: self.transmission.clone(),
        };
        let queries = Queries {
            repetitions: if quick { self.workload.quick_repetitions } else { self.workload.repetitions },
            pause_ms: self.workload.pause_ms,
            query_limit_s: self.workload.query_limit_s,
        };
        let mut stream = self.stream.clone();
        let mut emulated = self.emulated.clone().map(|mut e| {
            if quick {
                e.duration_s = e.quick_duration_s;
            }
            e
        });
        let mut baseline = self.baseline.clone().map(|mut b| {
            if quick {
                b.count = b.quick_count;
            }
            b
        });
        let mut multiparty = self.multiparty.clone().map(|mut m| {
            if quick {
                m.requests = m.quick_requests;
            }
            m
        });
        let mut proxy = match &self.proxy {
            Some(p) => Some(ProxySetup {
                queries,
                resource: self.entity.resource.clone(),
                mode: Forwarding::parse(&p.forwarding)?,
                consumers: p.consumers,
                cache_entries: p.cache_entries,
                forwarders: p.forwarders.clone(),
                rules: p.rule.clone(),
            }),
            None => None,
        };
        let mut lifetime_s = self.churn.as_ref().map(|c| c.lifetime_s);
        let mut dtls = self.dtls.clone();
        let mut follow = None;
        let mut ect = self.entity.ect.clone();
        let mut delay = self.entity.delay.clone();
        let mut layout = self.entity.layout.clone();
        for (axis, v) in &p.values {
            let num = || v.num().ok_or_else(|| ScenarioError::invalid(format!("sweep.{axis}: {v} is not a number")));
            match axis.as_str() {
                "layout" => layout = v.to_string(),
                "mode" => ect = v.to_string(),
                "usage" => {
                    let name = v.to_string();
                    let Some(u) = self.usage.get(&name) else {
                        return err(format!("sweep.usage: no [usage.{name}] profile"));
                    };
                    if let Some(m) = u.wifi_mbps {
                        common.wifi.schedule = vec![(0.0, m)];
                    }
                    if let Some(l) = u.link {
                        common.network.link = l;
                    }
                    if let Some(p) = u.cca_busy_prob {
                        common.wifi.cca_busy_prob = p;
                    }
                    if let Some(p) = u.corruption_prob {
                        common.wifi.corruption_prob = p;
                    }
                }
                "group" => common.network.group = num()? as usize,
                "ack_timeout_ms" => common.transmission.ack_timeout_ms = num()? as u64,
                "leisure_ms" => common.transmission.leisure_ms = num()? as u64,
                "processing_delay_ms" => common.cpu.processing_delay_ms = num()?,
                "rx_queue" => common.cpu.rx_queue = u16::try_from(num()? as i64).ok(),
                "cca_busy_prob" => common.wifi.cca_busy_prob = num()?,
                "corruption_prob" => common.wifi.corruption_prob = num()?,
                "wifi_mbps" => common.wifi.schedule = vec![(0.0, num()?)],
                "follow" => {
                    follow = Some(match v {
                        AxisValue::Text(t) if t == "observe" => Follow::Observe,
                        AxisValue::Num(x) if *x > 0.0 => Follow::Poll { period_ms: (x * 1000.0).round() as u64 },
                        other => return err(format!("sweep.follow: {other} is not \"observe\" or a period in s > 0")),
                    })
                }
                "delay" => {
                    delay = match v {
                        AxisValue::Num(x) => toml::Value::Integer(*x as i64),
                        AxisValue::Text(t) => toml::Value::String(t.clone()),
                    }
                }
                "scheme" | "impairment" if emulated.is_some() => {
                    let e = emulated.as_mut().expect("checked");
                    if axis == "scheme" {
                        e.scheme = v.to_string();
                    } else {
                        e.impairment = v.to_string();
                    }
                }
                "scheme" | "payload" | "rate" | "snr_db" if baseline.is_some() => {
                    let b = baseline.as_mut().expect("checked");
                    match axis.as_str() {
                        "scheme" => b.scheme = v.to_string(),
                        "payload" => b.payload = num()? as usize,
                        "rate" => b.rate = num()?,
                        _ => b.snr_db = num()?,
                    }
                }
                "scheme" | "buffer" | "loss" => {
                    let Some(st) = stream.as_mut() else {
                        return err(format!("sweep.{axis}: needs a [stream] section"));
                    };
                    match axis.as_str() {
                        "scheme" => st.scheme = v.to_string(),
                        "buffer" => st.buffer = num()? as u32,
                        _ => st.loss = num()?,
                    }
                }
                "forwarding" | "consumers" => {
                    let Some(f) = proxy.as_mut() else {
                        return err(format!("sweep.{axis}: needs a [proxy] section"));
                    };
                    if axis == "forwarding" {
                        f.mode = Forwarding::parse(&v.to_string())?;
                    } else {
                        f.consumers = num()? as usize;
                    }
                }
                "deployment" | "interval_ms" => {
                    let Some(m) = multiparty.as_mut() else {
                        return err(format!("sweep.{axis}: needs a [multiparty] section"));
                    };
                    if axis == "deployment" {
                        m.deployment = v.to_string();
                    } else {
                        m.interval_ms = num()? as u64;
                    }
                }
                "lifetime_s" => {
                    if lifetime_s.is_none() {
                        return err("sweep.lifetime_s: needs a [churn] section");
                    }
                    lifetime_s = Some(u32::try_from(num()? as u64).unwrap_or(u32::MAX));
                }
                "security" | "hops" => {
                    let Some(d) = dtls.as_mut() else {
                        return err(format!("sweep.{axis}: needs a [dtls] section"));
                    };
                    if axis == "security" {
                        d.security = v.to_string();
                    } else {
                        d.hops = u32::try_from(num()? as u64).unwrap_or(u32::MAX);
                    }
                }
                // Replicates change the seed (through the point's label) and, on a floor, the floor.
                "replicate" => {}
                _ => return err(format!("sweep.{axis}: unknown axis")),
            }
        }
        let (multicast, repair) = match ect.as_str() {
            "unicast" => (false, false),
            "multicast" => (true, false),
            "multicast+repair" => (true, true),
            other => return err(format!("entity.ect / mode: {other:?} is not unicast, multicast or multicast+repair")),
        };
        let confirmable = match self.entity.emt.as_str() {
            "con" => true,
            "non" => false,
            other => return err(format!("entity.emt: {other:?} is not con or non")),
        } && !multicast;
        let delay_ms = match &delay {
            toml::Value::Integer(d) if *d >= 0 => Some(*d as u64),
            toml::Value::String(a) if a == "auto" => None,
            other => return err(format!("entity.delay / delay: {other} is not a number of ms or \"auto\"")),
        };
        let nested = match layout.as_str() {
            "single" => false,
            "nested" => true,
            other => return err(format!("entity.layout / layout: {other:?} is not single or nested")),
        };
        let net = &common.network;
        if nested && (net.gateways < 2 || multicast) {
            return err("layout = nested needs network.gateways ≥ 2 and unicast child entities");
        }
        if net.group == 0 || net.group > 1000 {
            return err(format!("group {}: between 1 and 1000 members", net.group));
        }
        if net.topology == TopologyKind::Layered && net.layers.iter().sum::<usize>() != net.group {
            return err(format!(
                "network.layers sum to {}, but the group has {}",
                net.layers.iter().sum::<usize>(),
                net.group
            ));
        }
        if net.topology == TopologyKind::Floor
            && !(net.floor.width > 0.0 && net.floor.height > 0.0 && net.floor.radius > 0.0)
        {
            return err("network: a floor topology needs width, height and radius");
        }
        for p in [common.wifi.cca_busy_prob, common.wifi.corruption_prob] {
            if !(0.0..=1.0).contains(&p) {
                return err(format!("calibration: probability {p} outside 0..1"));
            }
        }
        let window_s = if quick { self.workload.quick_duration_s } else { self.workload.duration_s };
        if follow.is_some() && (multicast || nested || window_s == 0) {
            return err("follow: a unicast single entity and workload.duration_s > 0");
        }
        let notify_step = match self.entity.notify_step {
            Some(step) if !(step.is_finite() && step > 0.0) => {
                return err(format!("entity.notify_step {step}: a step > 0 in the unit of entity.resource"));
            }
            Some(_) if corral_group::device::Quantity::at(&self.entity.resource).is_none() => {
                return err(format!(
                    "entity.notify_step: entity.resource {:?} is no sensor (s/t, s/h, s/l)",
                    self.entity.resource
                ));
            }
            Some(_) if !self.observes() => {
                return err("entity.notify_step: only observing members notify; add \"observe\" to sweep.follow");
            }
            step => step.filter(|_| follow == Some(Follow::Observe)),
        };
        if let Some(f) = &proxy {
            f.validate(net.group)?;
            if nested || multicast || follow.is_some() {
                return err("[proxy]: a single unicast layout without follow");
            }
        }
        if let Some(st) = &stream {
            st.validate()?;
        }
        if let Some(e) = &mut emulated {
            e.validate()?;
            e.keep_own_scheme();
        }
        if let Some(b) = &baseline {
            b.validate()?;
        }
        if let Some(m) = &multiparty {
            m.validate()?;
        }
        let churn = match &self.churn {
            Some(spec) => {
                let replicate = p.get("replicate").and_then(AxisValue::num).map_or(1, |r| r as u64);
                let spec = super::ChurnSpec { lifetime_s: lifetime_s.unwrap_or(spec.lifetime_s), ..spec.clone() };
                let c = super::ChurnSetup::resolve(&spec, &self.entity.resource, window_s, replicate)?;
                c.validate(net.group)?;
                if net.topology != TopologyKind::Star || net.gateways != 1 || nested || multicast || follow.is_some() {
                    return err("[churn]: a star around one gateway, a single unicast layout without follow");
                }
                Some(c)
            }
            None => None,
        };
        let t = &common.transmission;
        if t.ack_timeout_ms == 0 || t.ack_random_factor < 1.0 {
            return err("transmission: ack_timeout_ms > 0 and ack_random_factor ≥ 1");
        }
        if let Some(c) = churn {
            return Ok(Setup { common, experiment: Experiment::Churn(c) });
        }
        if let Some(d) = &dtls {
            let d = super::DtlsSetup::resolve(d)?;
            return Ok(Setup { common, experiment: Experiment::Dtls(d) });
        }
        let experiment = match (proxy, stream, emulated, baseline, multiparty) {
            (Some(p), ..) => Experiment::Proxy(p),
            (_, Some(s), ..) => Experiment::Stream(s),
            (_, _, Some(e), ..) => Experiment::Emulated(e),
            (_, _, _, Some(b), _) => Experiment::Baseline(b),
            (.., Some(m)) => Experiment::Multiparty(m),
            (None, None, None, None, None) => Experiment::Entity(EntitySetup {
                queries,
                multicast,
                repair,
                confirmable,
                delay_ms,
                resource: self.entity.resource.clone(),
                timeout_ms: self.entity.timeout_ms,
                nested,
                parent_delay_ms: self.entity.parent_delay_ms,
                follow,
                window_s,
                notify_step,
            }),
        };
        Ok(Setup { common, experiment })
    }

    /// The file text of this scenario as TOML (for the report directory).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }
}
