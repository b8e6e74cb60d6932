//! The seed-001 figures of a report (placeholder until the figures land).
