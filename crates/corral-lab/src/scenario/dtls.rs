//! `[dtls]` in a scenario: a client and a server `hops` IEEE 802.15.4 hops apart, one request, secured
//! by DTLS (a handshake first), by OSCORE, or not at all (run by `crate::family::dtls`).

use super::point::AxisValue;
use super::{err, ScenarioError};
use serde::{Deserialize, Serialize};

/// `[dtls]`: the client on the chain's root (the border router's side) asks a device `hops` hops away
/// for one resource, with `security`; the `security` and `hops` axes override the fields, `[usage.NAME]`
/// profiles (the `usage` axis) set the links' loss.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct DtlsSpec {
    /// `none`, `oscore`, `dtls-psk`, `dtls-rpk` or `dtls-cert`.
    pub security: String,
    /// Radio hops between the client and the server (a chain), 1-16.
    pub hops: u32,
    /// The largest datagram DTLS sends, bytes (dimpl fragments handshake messages to fit): at most the
    /// UDP payload an IPv6 MTU of 1280 leaves (1232); smaller keeps a record out of 6LoWPAN fragmentation.
    pub mtu: usize,
    /// How long a point may run before its request counts as unanswered, s.
    pub limit_s: u64,
}

impl Default for DtlsSpec {
    /// A PSK handshake over three hops, records up to 1232 bytes (IPv6's minimum MTU), 300 s at most.
    fn default() -> DtlsSpec {
        DtlsSpec { security: "dtls-psk".into(), hops: 3, mtu: 1232, limit_s: 300 }
    }
}

impl DtlsSpec {
    /// The sweep axes of `[dtls]`: `security` and `hops`.
    pub const AXES: &'static [&'static str] = &["security", "hops"];

    pub(super) fn apply_axis(&mut self, axis: &str, v: &AxisValue) -> Result<(), ScenarioError> {
        match axis {
            "security" => self.security = v.to_string(),
            _ => self.hops = v.whole(axis)?,
        }
        Ok(())
    }
}

/// How the request is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Security {
    /// Plain CoAP: the cost every secured point is compared with.
    None,
    /// OSCORE (RFC 8613) with a pre-established context: no handshake.
    Oscore,
    /// DTLS 1.2 with a pre-shared key (`TLS_PSK_WITH_AES_128_CCM_8`).
    DtlsPsk,
    /// DTLS 1.2 with raw public keys on both sides (RFC 7250; `TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8`, P-256).
    DtlsRpk,
    /// DTLS 1.2 with X.509 certificates on both sides (`TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8`, P-256).
    DtlsCert,
}

impl Security {
    /// The names a scenario writes, in the order a report lists them.
    pub const NAMES: &'static [&'static str] = &["none", "oscore", "dtls-psk", "dtls-rpk", "dtls-cert"];

    pub fn parse(s: &str) -> Result<Security, ScenarioError> {
        match s {
            "none" => Ok(Security::None),
            "oscore" => Ok(Security::Oscore),
            "dtls-psk" => Ok(Security::DtlsPsk),
            "dtls-rpk" => Ok(Security::DtlsRpk),
            "dtls-cert" => Ok(Security::DtlsCert),
            other => err(format!("dtls.security / security {other:?}: one of {}", Security::NAMES.join(", "))),
        }
    }

    /// Whether a DTLS handshake runs before the request.
    pub fn is_dtls(self) -> bool {
        matches!(self, Security::DtlsPsk | Security::DtlsRpk | Security::DtlsCert)
    }
}

/// The resolved `[dtls]` of a point.
#[derive(Debug, Clone, PartialEq)]
pub struct DtlsSetup {
    pub security: Security,
    pub hops: u32,
    pub mtu: usize,
    pub limit_s: u64,
}

impl DtlsSetup {
    pub(super) fn resolve(spec: &DtlsSpec) -> Result<DtlsSetup, ScenarioError> {
        let s = DtlsSetup {
            security: Security::parse(&spec.security)?,
            hops: spec.hops,
            mtu: spec.mtu,
            limit_s: spec.limit_s,
        };
        Ok(s)
    }
}
