//! What a seed-001 point (`[multiparty]`) measured beyond its rows: retrieval times per client, the server's
//! responses per second, cryptographic operations and the shared path's per-link counts — everything Figs.
//! 7-9 and Table III need, and the arithmetic the findings and figures read off it.

use serde::{Deserialize, Serialize};

/// Cryptographic operations performed (Table III's rows).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ops {
    pub aead: u64,
    pub signatures: u64,
    pub hmac: u64,
}

impl std::ops::AddAssign for Ops {
    fn add_assign(&mut self, o: Ops) {
        self.aead += o.aead;
        self.signatures += o.signatures;
        self.hmac += o.hmac;
    }
}

/// What a seed-001 point measured beyond its rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MpStats {
    pub deployment: String,
    pub requests: u32,
    pub interval_s: f64,
    /// Per client (index 0 = client 1): content retrieval times of successful requests, ms, sorted.
    pub times_ms: Vec<Vec<f64>>,
    /// Requests each client sent.
    pub sent: Vec<u32>,
    /// Responses the server sent in each second of the run.
    pub server_per_s: Vec<u32>,
    pub client_ops: Ops,
    pub server_ops: Ops,
    /// Requests and responses received on the shared path's links, index i = link f_{i+1} → f_{i+2}
    /// (the last: f7 → server) for requests, the reverse direction for responses.
    pub link_requests: Vec<u64>,
    pub link_responses: Vec<u64>,
    /// Copies of requests the server's message layer answered from its store, when the point counts them
    /// as responses (`[multiparty] count_copies`); 0 otherwise.
    #[serde(default)]
    pub server_copies: u64,
}

impl MpStats {
    /// Successful requests of client `c` (1-based), % of those sent.
    pub fn success(&self, c: usize) -> f64 {
        let sent = self.sent.get(c - 1).copied().unwrap_or(0);
        crate::stats::percent(self.times_ms.get(c - 1).map_or(0, Vec::len) as u64, u64::from(sent))
    }

    pub fn successes(&self) -> u64 {
        self.times_ms.iter().map(|t| t.len() as u64).sum()
    }

    /// Mean server responses per second over the request phase (requests × interval).
    pub fn server_rate(&self) -> f64 {
        let total: u64 = self.server_per_s.iter().map(|&x| u64::from(x)).sum::<u64>() + self.server_copies;
        total as f64 / (f64::from(self.requests) * self.interval_s)
    }

    /// Median of the retrieval times below 1 s of the given clients (1-based), ms.
    pub fn subsecond_median(&self, clients: &[usize]) -> f64 {
        let mut v: Vec<f64> = clients
            .iter()
            .filter_map(|c| self.times_ms.get(c - 1))
            .flat_map(|t| t.iter().copied().filter(|x| *x < 1000.0))
            .collect();
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            f64::NAN
        } else {
            v[v.len() / 2]
        }
    }

    /// Operations per successful retrieval: (client, server).
    pub fn per_success(&self, f: fn(&Ops) -> u64) -> (f64, f64) {
        let s = self.successes() as f64;
        if s == 0.0 {
            return (f64::NAN, f64::NAN);
        }
        (f(&self.client_ops) as f64 / s, f(&self.server_ops) as f64 / s)
    }

    /// Requests (or responses) per link scaled to the paper's 1000 requests per client.
    pub fn per_thousand(&self, v: &[u64]) -> Vec<f64> {
        v.iter().map(|&x| x as f64 * 1000.0 / f64::from(self.requests.max(1))).collect()
    }
}
