//! Seed 001's effect claim must fail without its cause (quick run with 300 requests a client, seed 1): client 9's sub-second
//! retrieval time falls from ~100 ms to ≈ 25 ms in the aware deployments because the forwarders answer
//! from their caches; with the caches removed (the scenario's *no caches* variant, aggregation only) it must
//! not. Client 1's success (at least the paper's 96 %, one hop from the server) holds because that hop loses
//! little: with the *lossy links* variant's outages made three times as frequent (30 % mean loss in bursts
//! of 10 frames; at the variant's 10 % three MAC retries still carry client 1's requests in the quick run)
//! it must not.

use crate::causes;

#[test]
fn client9_subsecond_latency_gain_needs_the_forwarders_caches() {
    // 300 requests a client: the quick run's 60 leave the caches' effect to a handful of retrievals.
    let r = causes::run(
        "seed001-multiparty",
        &[
            ("quick_requests = 60\n", "quick_requests = 300\n"),
            ("model = \"gilbert\", mean_loss = 0.1,", "model = \"gilbert\", mean_loss = 0.3,"),
        ],
    );
    causes::cause_matters("seed001-multiparty", &r, "mp_subsecond_latency", "no caches");
    causes::cause_matters("seed001-multiparty", &r, "mp_client1_success", "lossy links");
}
