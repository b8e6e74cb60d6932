//! The client verbs (`get`, `post`, …, modelled on libcoap's coap-client) and `discover`.

use crate::exit::{ExitCode, Failure};
use crate::output;
use clap::Args;
use corral_tokio::uri::Host;
use corral_tokio::{Client, Code, ContentFormat, OptionNumber, Response, Token, Uri};
use serde_json::json;
use std::io::{IsTerminal, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

pub const AFTER_HELP: &str = "\
Examples:
  corral get coap://[::1]/hello
  corral get coap://127.0.0.1:5683/multi-format -A xml
  corral put coap://[::1]/test -e 'mode=on' -t text
  echo -n '{\"on\":true}' | corral post coap://[::1]/echo -f - -t json --json
  corral get coap://[::1]/test -O 2048,0xcafe -T a1b2 -N -v
  corral get coap://224.0.1.187/.well-known/core --mcast-if 192.168.1.10   # every server answers

Formats (-t, -A): a number or a name: text, link, xml, octet-stream, json, cbor, senml+json, …
Exit status: 0 for 2.xx, 4 for 4.xx, 5 for 5.xx, 3 timeout/unreachable, 2 usage, 1 other.";

pub const DISCOVER_HELP: &str = "\
Examples:
  corral discover coap://[::1]
  corral discover 'coap://[::1]?rt=Type1'      # RFC 6690 filtering on the server
  corral discover coap://127.0.0.1:5683 --json";

#[derive(Debug, Clone, Copy)]
pub struct Verbosity {
    pub verbose: u8,
    pub quiet: bool,
}

#[derive(Args, Debug)]
pub struct RequestArgs {
    /// coap://host[:port]/path?query (IPv6 literals in brackets: coap://[::1]/x).
    pub uri: String,
    /// Payload text.
    #[arg(short = 'e', long, value_name = "TEXT")]
    pub payload: Option<String>,
    /// Payload from a file, or `-` for standard input.
    #[arg(short = 'f', long, value_name = "PATH|-", conflicts_with = "payload")]
    pub file: Option<String>,
    /// Content-Format of the payload: a number or a name (text, json, cbor, link, xml, octet-stream, …).
    #[arg(short = 't', long = "content-format", value_name = "FMT", value_parser = parse_format)]
    pub content_format: Option<ContentFormat>,
    /// Accept: the Content-Format wanted in the response.
    #[arg(short = 'A', long, value_name = "FMT", value_parser = parse_format)]
    pub accept: Option<ContentFormat>,
    /// Send a NON (non-confirmable) request instead of CON.
    #[arg(short = 'N', long)]
    pub non: bool,
    /// A raw option: NUM,TEXT or NUM,0xHEX (NUM may be a name such as Uri-Query). Repeatable.
    #[arg(short = 'O', long = "option", value_name = "NUM,VALUE", value_parser = parse_raw_option)]
    pub options: Vec<(OptionNumber, Vec<u8>)>,
    /// Token, in hex (up to 8 bytes).
    #[arg(short = 'T', long, value_name = "HEX", value_parser = parse_token)]
    pub token: Option<Token>,
    /// Give up after this many seconds (for multicast: how long responses are collected).
    #[arg(short = 'B', long, value_name = "SECONDS", default_value = "10", value_parser = parse_seconds)]
    pub timeout: f64,
    /// Print the whole response as JSON on stdout (code, options, payload as text or base64).
    #[arg(long)]
    pub json: bool,
    /// For multicast URIs: the IPv4 address of the interface to send from (default: the routing table's).
    #[arg(long, value_name = "ADDR")]
    pub mcast_if: Option<Ipv4Addr>,
}

#[derive(Args, Debug)]
pub struct DiscoverArgs {
    /// The server: coap://host[:port] (a query such as ?rt=foo filters on the server).
    pub uri: String,
    /// Give up after this many seconds.
    #[arg(short = 'B', long, value_name = "SECONDS", default_value = "10", value_parser = parse_seconds)]
    pub timeout: f64,
    /// Print the links as JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_format(s: &str) -> Result<ContentFormat, String> {
    ContentFormat::parse(s)
        .ok_or_else(|| format!("unknown content format `{s}` (use a number or e.g. text, json, cbor)"))
}

fn parse_token(s: &str) -> Result<Token, String> {
    Token::from_hex(s).ok_or_else(|| format!("`{s}` is not a token: give up to 8 bytes in hex, e.g. a1b2"))
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!("`{s}` is not a number of seconds between 0 and 86400")),
    }
}

fn parse_raw_option(s: &str) -> Result<(OptionNumber, Vec<u8>), String> {
    let (num, value) = s.split_once(',').unwrap_or((s, ""));
    let number = match num.trim().parse::<u16>() {
        Ok(n) => OptionNumber(n),
        Err(_) => OptionNumber::from_name(num.trim())
            .ok_or_else(|| format!("`{num}` is neither an option number nor a known option name"))?,
    };
    let bytes = match value.strip_prefix("0x") {
        Some(hex) if !hex.is_empty() => {
            if hex.len() % 2 != 0 {
                return Err(format!("hex value `{value}` has an odd number of digits"));
            }
            (0..hex.len() / 2)
                .map(|i| hex.get(2 * i..2 * i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
                .collect::<Option<Vec<u8>>>()
                .ok_or_else(|| format!("`{value}` is not valid hex"))?
        }
        _ => value.as_bytes().to_vec(),
    };
    Ok((number, bytes))
}

/// The largest payload one UDP datagram carries; block-wise transfer is not available yet.
const MAX_PAYLOAD: usize = 64_000;

fn read_payload(args: &RequestArgs) -> Result<Option<Vec<u8>>, Failure> {
    let data = match (&args.payload, &args.file) {
        (Some(p), _) => p.clone().into_bytes(),
        (None, Some(f)) if f == "-" => {
            let mut buf = Vec::new();
            std::io::stdin()
                .take(MAX_PAYLOAD as u64 + 1)
                .read_to_end(&mut buf)
                .map_err(|e| Failure::other(format!("cannot read standard input: {e}")))?;
            buf
        }
        (None, Some(f)) => std::fs::read(f).map_err(|e| Failure::other(format!("cannot read `{f}`: {e}")))?,
        (None, None) => return Ok(None),
    };
    if data.len() > MAX_PAYLOAD {
        return Err(Failure::usage(format!(
            "payload larger than {MAX_PAYLOAD} bytes does not fit one datagram (block-wise transfer is not supported yet)"
        )));
    }
    Ok(Some(data))
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::other(format!("cannot start the runtime: {e}")))
}

/// A client socket of a family that can reach `uri`: dual-stack when the host is a name.
async fn client_for(uri: &Uri, timeout: Duration, mcast_if: Option<Ipv4Addr>) -> Result<Client, Failure> {
    let mut builder = Client::builder().timeout(timeout);
    if let Some(ifaddr) = mcast_if {
        builder = builder.multicast_interface_v4(ifaddr);
    }
    let v4_only = matches!(uri.host, Host::Ip(IpAddr::V4(_)));
    let first = if v4_only { "0.0.0.0:0" } else { "[::]:0" };
    match builder.clone().bind(first).await {
        Ok(c) => Ok(c),
        Err(_) if !v4_only => {
            builder.bind("0.0.0.0:0").await.map_err(|e| Failure::other(format!("cannot open a UDP socket: {e}")))
        }
        Err(e) => Err(Failure::other(format!("cannot open a UDP socket: {e}"))),
    }
}

pub fn run(method: Code, args: RequestArgs, v: Verbosity) -> Result<(), Failure> {
    let uri = corral_tokio::parse_uri(&args.uri).map_err(|e| Failure::usage(format!("invalid URI: {e}")))?;
    let payload = read_payload(&args)?;
    let timeout = Duration::from_secs_f64(args.timeout);
    runtime()?.block_on(async move {
        let client = client_for(&uri, timeout, args.mcast_if).await?;
        let mut req = client.request(method, &args.uri);
        for (n, value) in &args.options {
            req = req.option(*n, value);
        }
        if let Some(cf) = args.content_format {
            req = req.content_format(cf);
        }
        if let Some(cf) = args.accept {
            req = req.accept(cf);
        }
        if let Some(p) = payload {
            req = req.payload(p);
        }
        if let Some(t) = args.token {
            req = req.token(t);
        }
        if args.non {
            req = req.non();
        }
        let multicast = matches!(uri.host, Host::Ip(ip) if ip.is_multicast());
        if multicast {
            let responses = req
                .multicast_window(timeout)
                .multicast()
                .await
                .map_err(|e| Failure::from_client(e, args.timeout))?
                .collect()
                .await
                .map_err(|e| Failure::from_client(e, args.timeout))?;
            return show_multicast(&responses, &args, v);
        }
        let (from, response) = req.send_from().await.map_err(|e| Failure::from_client(e, args.timeout))?;
        show(from, &response, &args, v)
    })
}

fn show(from: SocketAddr, r: &Response, args: &RequestArgs, v: Verbosity) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let _ = writeln!(stdout, "{}", output::response_json(Some(from), r));
    } else if v.verbose > 0 {
        say!("{}\n  (from {from})", output::response_head(r));
    }
    if r.code.is_error() {
        return Err(Failure::from_response(r.code, &r.payload));
    }
    if !args.json {
        write_payload(&mut stdout, &r.payload);
    }
    Ok(())
}

fn write_payload(out: &mut impl Write, payload: &[u8]) {
    let _ = out.write_all(payload);
    if std::io::stdout().is_terminal() && !payload.is_empty() && !payload.ends_with(b"\n") {
        let _ = out.write_all(b"\n");
    }
    let _ = out.flush();
}

fn show_multicast(responses: &[(SocketAddr, Response)], args: &RequestArgs, v: Verbosity) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let all: Vec<_> = responses.iter().map(|(from, r)| output::response_json(Some(*from), r)).collect();
        let _ = writeln!(stdout, "{}", serde_json::Value::Array(all));
    } else {
        for (from, r) in responses {
            if v.verbose > 0 {
                say!("{}\n  (from {from})", output::response_head(r));
            }
            let _ = writeln!(stdout, "{from} {:#}: {}", r.code, r.payload_text());
        }
    }
    if responses.is_empty() {
        return Err(Failure::new(
            ExitCode::Timeout,
            format!("no response to the multicast request within {} s", args.timeout),
        ));
    }
    if !v.quiet && !args.json {
        say!("{} response(s)", responses.len());
    }
    Ok(())
}

pub fn discover(args: DiscoverArgs, v: Verbosity) -> Result<(), Failure> {
    let base = corral_tokio::parse_uri(&args.uri).map_err(|e| Failure::usage(format!("invalid URI: {e}")))?;
    let uri = Uri { path: vec![".well-known".into(), "core".into()], ..base };
    let timeout = Duration::from_secs_f64(args.timeout);
    let (from, r) = runtime()?.block_on(async {
        let client = client_for(&uri, timeout, None).await?;
        client.get(&uri.to_string()).send_from().await.map_err(|e| Failure::from_client(e, args.timeout))
    })?;
    if v.verbose > 0 {
        say!("{}\n  (from {from})", output::response_head(&r));
    }
    if r.code.is_error() {
        return Err(Failure::from_response(r.code, &r.payload));
    }
    if r.options.content_format().is_some_and(|cf| cf != ContentFormat::LINK_FORMAT) {
        return Err(Failure::other(format!(
            "{uri} answered with {} instead of application/link-format",
            r.options.content_format().map(|c| c.to_string()).unwrap_or_default()
        )));
    }
    let links = crate::linkformat::parse(&r.payload_text());
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let all: Vec<_> = links
            .iter()
            .map(|l| {
                let attrs: serde_json::Map<String, serde_json::Value> = l
                    .attributes
                    .iter()
                    .map(|(n, v)| (n.clone(), v.clone().map_or(json!(true), |v| json!(v))))
                    .collect();
                json!({ "path": l.target, "attributes": attrs })
            })
            .collect();
        let _ = writeln!(stdout, "{}", serde_json::Value::Array(all));
        return Ok(());
    }
    let header = ["PATH", "RT", "IF", "CT", "OBS", "TITLE"];
    let rows: Vec<[String; 6]> = links
        .iter()
        .map(|l| {
            [
                l.target.clone(),
                l.attr("rt").unwrap_or_default(),
                l.attr("if").unwrap_or_default(),
                l.attr("ct").unwrap_or_default(),
                if l.has("obs") { "yes".into() } else { String::new() },
                l.attr("title").unwrap_or_default(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}  "));
            }
        }
        s.trim_end().to_string()
    };
    let _ = writeln!(stdout, "{}", line(&header.map(String::from)));
    for row in &rows {
        let _ = writeln!(stdout, "{}", line(row));
    }
    if rows.is_empty() && !v.quiet {
        say!("(no resources listed)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_options() {
        assert_eq!(parse_raw_option("2048,0xcafe").unwrap(), (OptionNumber(2048), vec![0xca, 0xfe]));
        assert_eq!(parse_raw_option("15,a=b").unwrap(), (OptionNumber::URI_QUERY, b"a=b".to_vec()));
        assert_eq!(parse_raw_option("uri-query,x").unwrap(), (OptionNumber::URI_QUERY, b"x".to_vec()));
        assert_eq!(parse_raw_option("5").unwrap(), (OptionNumber::IF_NONE_MATCH, vec![]));
        assert!(parse_raw_option("nope,1").is_err());
        assert!(parse_raw_option("1,0xabc").is_err());
        assert!(parse_raw_option("70000,x").is_err());
    }
}
