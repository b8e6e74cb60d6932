//! Who may ask for what: the role a request needs under the access policy, the proof of address a source
//! beyond loopback owes before the EM works or changes anything for it (see "Proof of address" in the
//! module docs of [`super`]), and the limits on what a client below `manage` may ask a use for. The role
//! and the limits read the entity table (`impl Table`); the proof needs only the configuration
//! (`impl EmConfig`).

use super::requests::is_profile_document;
use super::{EmConfig, Fail, Table, MAX_READER_DELAY_MS};
use crate::policy::{AccessPolicy, ClientIdentity, Role};
use crate::profile::UseOverrides;
use corral_proto::wire::Code;
use corral_proto::{Context, IncomingRequest};

impl Table {
    /// The role a request needs (see [`Role`]), checked against the access policy: the client's role, or
    /// 4.03 with the reason.
    pub(super) fn authorise(
        &self,
        access: &AccessPolicy,
        inb: &IncomingRequest,
        m: Code,
        parts: &[&str],
    ) -> Result<Role, Fail> {
        let needed = match (m, parts) {
            (Code::GET, _) => Role::Read,
            (Code::PUT, [name]) if self.contains_key(*name) && !is_profile_document(&inb.request) => Role::Actuate,
            (Code::POST, [_]) => Role::Actuate,
            (Code::POST | Code::PUT | Code::DELETE, _) => Role::Manage,
            _ => Role::Read,
        };
        let client = ClientIdentity::new(inb.from).with_psk(inb.peer_identity.clone());
        match access.role_of(&client) {
            Some(r) if r >= needed => Ok(r),
            Some(r) => Err((
                Code::FORBIDDEN,
                format!(
                    "{} may {} entities, not {} them (the gateway's access policy)",
                    client.describe(),
                    r.as_str(),
                    needed.as_str()
                ),
            )),
            None => Err((
                Code::FORBIDDEN,
                format!("{} may not use this gateway (the gateway's access policy)", client.describe()),
            )),
        }
    }

    /// A client that may not manage entities may not make a use hold the quotas longer than the entity's
    /// profile does: `delay` at most [`MAX_READER_DELAY_MS`] and `timeout` at most MAX_TRANSMIT_WAIT,
    /// unless the profile sets more. 4.03 says what to ask for instead.
    pub(super) fn check_reader_overrides(
        &self,
        config: &EmConfig,
        cx: &Context<'_>,
        name: &str,
        o: &UseOverrides,
    ) -> Result<(), Fail> {
        let Some(e) = self.get(name) else { return Ok(()) };
        let p = &e.stored.profile;
        let n = e.items.len();
        let (s, r) = (config.response_size, config.rate);
        let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        if let Some(asked) = o.delay.map(|d| ms(d.resolve(n, s, r))) {
            let limit = ms(p.delay.resolve(n, s, r)).max(MAX_READER_DELAY_MS);
            if asked > limit {
                return Err((
                    Code::FORBIDDEN,
                    format!("delay={asked}: a client that may not manage entities may ask for at most {limit} ms (the entity's profile may set more)"),
                ));
            }
        }
        if let Some(asked) = o.timeout {
            let mtw = cx.endpoint().config().params.max_transmit_wait().as_millis();
            let limit = p.timeout.unwrap_or(0).max(mtw);
            if asked > limit {
                return Err((
                    Code::FORBIDDEN,
                    format!("timeout={asked}: a client that may not manage entities may ask for at most {limit} ms (the entity's profile may set more)"),
                ));
            }
        }
        Ok(())
    }
}

impl EmConfig {
    /// Whether `inb` must first prove its source address (see [`EmConfig::challenge_unverified`]). A use
    /// needs a source that proved its address once ([`IncomingRequest::verified`]); a change or an
    /// actuation needs this very request to carry the Echo value its source was just given
    /// ([`IncomingRequest::echoed`]), since a blind spoofer may guess the address and port of a manager
    /// that proved itself earlier. Listing and reading profiles need nothing. A loopback source cannot be
    /// spoofed from the network (the kernel drops such datagrams arriving on other interfaces); a
    /// rendering of a notification replays a registration that was served.
    pub(super) fn must_prove_address(&self, inb: &IncomingRequest, m: Code, parts: &[&str]) -> bool {
        if !self.challenge_unverified || inb.notification || crate::policy::canonical(inb.from.ip()).is_loopback() {
            return false;
        }
        match (m, parts) {
            (Code::GET, [_]) => !inb.verified,
            (Code::GET, _) => false,
            _ => !inb.echoed,
        }
    }
}
