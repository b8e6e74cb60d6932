//! OSCORE (RFC 8613) for the client: a security context shared by requests, and the two steps around
//! sending — protect the request, verify the response. [`crate::RequestBuilder::oscore`] uses them; so
//! can a load generator that drives endpoints itself (`corral bench --credentials`).

use crate::client::Error;
use corral_proto::wire::OptionNumber;
use corral_proto::{Request, Response};

/// An OSCORE security context several requests share (its sequence number and its file).
pub type SharedContext = std::sync::Arc<std::sync::Mutex<corral_oscore::store::ContextDir>>;

fn oscore_error(e: corral_oscore::Error) -> Error {
    Error::Oscore(e.to_string())
}

/// Protects `plain` with the shared context, persisting a sequence number reservation first.
pub fn protect(ctx: &SharedContext, plain: &Request) -> Result<(Request, corral_oscore::RequestBinding), Error> {
    let mut dir = ctx.lock().map_err(|_| Error::Oscore("the security context is poisoned".into()))?;
    dir.reserve().map_err(oscore_error)?;
    let send_kid_context = dir.context.params().id_context.is_some();
    let p = corral_oscore::Plain { code: plain.method, options: plain.options.clone(), payload: plain.payload.clone() };
    let (outer, binding) = dir.context.protect_request(&p, send_kid_context).map_err(oscore_error)?;
    Ok((Request { method: outer.code, options: outer.options, payload: outer.payload }, binding))
}

/// Verifies a response to the request `binding` describes; an unprotected one is the server's refusal.
pub fn verify(
    ctx: &SharedContext,
    binding: &corral_oscore::RequestBinding,
    response: Response,
) -> Result<(Response, Option<u64>), Error> {
    if !response.options.contains(OptionNumber::OSCORE) {
        return Err(Error::Oscore(format!(
            "the server answered without OSCORE: {:#} {}",
            response.code,
            response.payload_text()
        )));
    }
    let mut dir = ctx.lock().map_err(|_| Error::Oscore("the security context is poisoned".into()))?;
    let outer = corral_oscore::Plain { code: response.code, options: response.options, payload: response.payload };
    let (inner, number) = dir.context.unprotect_response(binding, &outer).map_err(oscore_error)?;
    Ok((Response { code: inner.code, options: inner.options, payload: inner.payload }, number))
}
