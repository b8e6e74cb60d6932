//! A finished job's answer: the replies combined into a client's response, or into the result a parent
//! job's slot takes.

use crate::em::jobs::{Job, JobCx, Jobs, Kind, Res, Sink, Slot};
use crate::em::MIN_REPLIES;
use crate::output;
use crate::output::{Gap, MemberError, MemberReport, UseResult};
use crate::profile::Op;
use corral_proto::wire::{Code, ContentFormat};
use corral_proto::Response;
use serde_json::json;

impl Jobs {
    pub(in crate::em) fn finish_use(&mut self, j: &mut JobCx<'_, '_>, job: Job, timed_out: bool) {
        let n = job.slots.len();
        let (code, payload_for, res_for_parent) = if let Kind::Actuate { .. } = job.spec.kind {
            let mut reports = Vec::with_capacity(n);
            let mut all_ok = true;
            let mut silent = false;
            for (it, slot) in job.spec.items.iter().zip(&job.slots) {
                let text = match slot {
                    Slot::Done(r) => {
                        all_ok &= r.ok();
                        silent |= r.code.is_none();
                        r.describe()
                    }
                    _ => "not asked".into(),
                };
                reports.push(MemberReport { member: it.label.clone(), steps: vec![("result".into(), text)] });
            }
            let code = if all_ok {
                Code::CHANGED
            } else if silent || timed_out {
                Code::GATEWAY_TIMEOUT
            } else {
                Code::BAD_GATEWAY
            };
            let head =
                json!({ "entity": job.spec.entity, "message": format!("{code:#}: {} of {n} members changed", job.ok) });
            let text = format!("{code:#}: {} of {n} members changed", job.ok);
            (code, Some((head, reports)), Res::answered(code, Vec::new(), text))
        } else {
            let result = build_use_result(&job);
            match result {
                Err(msg) => {
                    let code = Code::BAD_REQUEST;
                    if let Sink::Client { id, .. } = job.spec.sink {
                        self.client_done();
                        j.cx.respond(id, Response::error(code, msg.to_string()));
                        return;
                    }
                    (code, None, Res::answered(code, Vec::new(), format!("{code:#}: {msg}")))
                }
                Ok(r) => {
                    let code = if r.replies >= r.enr || (job.cut.is_none() && r.replies >= MIN_REPLIES) {
                        Code::CONTENT
                    } else if job.slots.iter().any(|s| matches!(s, Slot::Done(Res { code: None, .. }))) || timed_out {
                        Code::GATEWAY_TIMEOUT
                    } else {
                        Code::BAD_GATEWAY
                    };
                    if let Sink::Client { id, accept } = job.spec.sink {
                        self.client_done();
                        // Not enough replies: JSON and CBOR carry the errors in the document; text and SenML
                        // cannot, so those get a diagnostic payload (RFC 7252 §5.5.2) naming each failure.
                        let structured = matches!(accept.0, 50 | 60);
                        let resp = if code == Code::CONTENT || structured {
                            Response::new(code).with_content_format(accept).with_payload(r.render(accept))
                        } else {
                            Response::new(code).with_payload(r.diagnostic(code))
                        };
                        let resp = if job.observable && code == Code::CONTENT { resp.observable() } else { resp };
                        j.cx.respond(id, resp);
                        return;
                    }
                    let text = if code == Code::CONTENT {
                        format!("{code:#} ({} of {} replies)", r.replies, r.members)
                    } else {
                        r.diagnostic(code).replace('\n', "; ")
                    };
                    let readings = if code.is_success() { r.into_readings() } else { Vec::new() };
                    (code, None, Res::answered(code, readings, text))
                }
            }
        };
        match job.spec.sink {
            Sink::Client { id, accept } => {
                self.client_done();
                let (head, reports) = payload_for.unwrap_or((json!({}), Vec::new()));
                let accept = if output::REPORT_FORMATS.contains(&accept) || accept.0 >= 110 {
                    accept
                } else {
                    ContentFormat::TEXT_PLAIN
                };
                let resp = Response::new(code)
                    .with_content_format(accept)
                    .with_payload(output::render_reports(&head, &reports, accept));
                j.cx.respond(id, resp);
            }
            Sink::Parent { job: parent, slot } => self.push_ready(parent, slot, res_for_parent),
            Sink::Flow => {}
        }
    }
}

/// Members that answered with non-numeric values under an arithmetic operation: the operation and the
/// members, which the 4.00 answer names.
pub(in crate::em) struct NonNumeric {
    op: Op,
    members: Vec<String>,
}

impl std::fmt::Display for NonNumeric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "eo={} needs numeric values, but {} answered with non-numeric representations",
            self.op,
            self.members.join(", ")
        )
    }
}

/// Combines a read job's replies. `Err` names members with non-numeric values under an arithmetic op.
pub(in crate::em) fn build_use_result(job: &Job) -> Result<UseResult, NonNumeric> {
    let done = || {
        job.spec.items.iter().zip(&job.slots).filter_map(|(it, s)| match s {
            Slot::Done(r) => Some((it, r)),
            _ => None,
        })
    };
    let replies = done().filter(|(_, r)| r.ok()).count();
    // A use answers with what arrived when at least MIN_REPLIES members answered (unless it was cut short:
    // its entity changed or went away), as when `enr` did.
    let success = replies >= job.spec.enr || (job.cut.is_none() && replies >= MIN_REPLIES);
    let mut numbers = Vec::new();
    if success && job.spec.op.is_arithmetic() {
        numbers.reserve(replies);
        let mut non_numeric = Vec::new();
        for (it, r) in done().filter(|(_, r)| r.ok()) {
            match output::single_number(&r.readings) {
                Some(v) => numbers.push(v),
                None => non_numeric.push(it.label.clone()),
            }
        }
        if !non_numeric.is_empty() {
            return Err(NonNumeric { op: job.spec.op, members: non_numeric });
        }
    }
    let errors: Vec<MemberError> = done()
        .filter(|(_, r)| !r.ok())
        .map(|(it, r)| MemberError {
            member: it.label.clone(),
            error: r.describe(),
            gap: match (r.code, r.silent) {
                (Some(_), _) => Gap::Failed,
                (None, true) => Gap::Silent,
                (None, false) => Gap::Skipped,
            },
        })
        .collect();
    let aggregate = match job.spec.op {
        _ if !success => None,
        Op::Lst => None,
        Op::Count => Some(replies as f64),
        op => output::aggregate(op, &numbers).map(|v| output::round_to_members(v, &numbers)),
    };
    // Values are listed for `lst` and for a partial answer (what did arrive).
    let mut values = Vec::new();
    if aggregate.is_none() {
        for (it, r) in done().filter(|(_, r)| r.ok()) {
            for rd in &r.readings {
                let mut rd = rd.clone();
                rd.name.insert(0, it.label.clone());
                values.push(rd);
            }
        }
    }
    Ok(UseResult {
        changed: job.note.as_deref().map(<[String]>::to_vec).unwrap_or_default(),
        entity: job.spec.entity.clone(),
        op: job.spec.op,
        enr: job.spec.enr,
        members: job.slots.len(),
        replies,
        aggregate,
        values,
        errors,
    })
}

/// A member's response as a slot result; `parse`: read its value (reads and validation).
pub(in crate::em) fn member_result(parse: bool, response: &Response) -> Res {
    let readings = if parse && response.code.is_success() {
        output::parse_reply(response.options.content_format(), &response.payload)
    } else {
        Vec::new()
    };
    let text =
        if response.code.is_success() { String::new() } else { output::code_text(response.code, &response.payload) };
    Res::answered(response.code, readings, text)
}
