//! What a `[churn]` point measures: the answers to the client's queries of both entities, how far each
//! entity's members were from the devices present (integrated over time), how long a device took to join
//! and to leave the following entity, and the radio cost of the directory against that of the queries.

use serde::{Deserialize, Serialize};

/// A `[churn]` point's facts (see `crate::family::churn`). Member-seconds are sampled every second of the
/// window; a time is NaN when no device gave one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ChurnFacts {
    /// The lifetime the devices registered with, s.
    pub lifetime_s: f64,
    /// Queries the client sent to each entity.
    pub queries: u64,
    /// Answers with a value from every device present when the query left, and with some but not all.
    pub follow_full: u64,
    pub follow_partial: u64,
    pub fixed_full: u64,
    pub fixed_partial: u64,
    /// Member-seconds an entity listed a device that was gone (stale), and lacked one that was present
    /// (missing).
    pub follow_stale_s: f64,
    pub follow_missing_s: f64,
    pub fixed_stale_s: f64,
    pub fixed_missing_s: f64,
    /// From a device's arrival to its membership of the following entity: mean and maximum, s.
    pub join_mean_s: f64,
    pub join_max_s: f64,
    /// From a clean departure (DELETE) to the device's removal, the longest, s.
    pub clean_leave_max_s: f64,
    /// From a silent departure to the device's removal, the longest over the devices removed, s.
    pub vanish_leave_max_s: f64,
    /// Devices that left without a word more than `lifetime × 1.1 + 30 s` before the end and were still
    /// members at the end.
    pub vanish_unremoved: u64,
    /// IEEE 802.15.4 frames (MAC retries included) and their bytes on the air carrying the directory's
    /// traffic (registrations, refreshes, removals and their answers) and the queries' member traffic.
    pub rd_frames: u64,
    pub rd_bytes: u64,
    pub query_frames: u64,
    pub query_bytes: u64,
    /// Lookup notifications (and lookup answers) the directory sent the Entity Manager: on the gateway,
    /// so over loopback, never on the air.
    pub notifications: u64,
}

impl ChurnFacts {
    /// Nothing measured (what a reader starts from).
    pub fn empty() -> ChurnFacts {
        ChurnFacts {
            lifetime_s: f64::NAN,
            queries: 0,
            follow_full: 0,
            follow_partial: 0,
            fixed_full: 0,
            fixed_partial: 0,
            follow_stale_s: f64::NAN,
            follow_missing_s: f64::NAN,
            fixed_stale_s: f64::NAN,
            fixed_missing_s: f64::NAN,
            join_mean_s: f64::NAN,
            join_max_s: f64::NAN,
            clean_leave_max_s: f64::NAN,
            vanish_leave_max_s: f64::NAN,
            vanish_unremoved: 0,
            rd_frames: 0,
            rd_bytes: 0,
            query_frames: 0,
            query_bytes: 0,
            notifications: 0,
        }
    }
}
