//! The driver loop: the one loop every tokio driver of a sans-IO machine runs — the client's and server's
//! `driver`, a multicast group member ([`crate::group_node::GroupNode`]) and the load generator's
//! emulated clients ([`crate::load`]).
//!
//! Each turn: read the clock; if the machine's timer is due, `handle_timeout`; [`Drive::flush`] its
//! outputs (`poll_command`, `poll_event`, `poll_transmit`); then sleep until the next input
//! ([`Drive::input`]: a socket ready, a command, a stop) or the next timer, whichever comes first, and
//! [`Drive::handle`] the input. What differs between drivers — their sockets, group sockets, channels,
//! request logs, a load generator — is the [`Drive`] implementation's.
//!
//! Owns: the order of a turn and the timer that wakes it. Must never: read a socket or implement protocol
//! behaviour itself (the implementation's and corral-proto's).

use crate::Clock;
use corral_proto::Instant;
use std::ops::ControlFlow;

/// A sans-IO machine and the I/O around it, as the driver loop ([`run`]) runs them.
///
/// The futures are awaited by [`run`] only; none has to be `Send` for the loop's sake (a driver that is
/// spawned on a multi-threaded runtime is `Send` when its implementation's futures are).
#[allow(async_fn_in_trait)]
pub trait Drive {
    /// What one wake-up brings (a socket ready to read, a command, a stop).
    type Input;
    /// What the loop returns when the driver stops.
    type Output;
    /// The clock the machine's time is read from.
    fn clock(&self) -> Clock;
    /// The machine's next timer (`poll_timeout`).
    fn poll_timeout(&self) -> Option<Instant>;
    /// The machine's `handle_timeout`: called when [`Drive::poll_timeout`] is due.
    fn handle_timeout(&mut self, now: Instant);
    /// A time the driver itself must wake at even with no timer of the machine's (a shutdown's grace, the
    /// end of a benchmark run); [`Drive::flush`] decides what it means.
    fn deadline(&self) -> Option<Instant> {
        None
    }
    /// Drains the machine's outputs: commands, events, datagrams. `Break` stops the loop.
    async fn flush(&mut self, now: Instant) -> ControlFlow<Self::Output>;
    /// Waits for the next input. Cancel-safe: the loop drops it when a timer is due.
    async fn input(&mut self) -> Self::Input;
    /// Handles one input (and flushes what it produced, if it reads in several batches). `Break` stops the
    /// loop.
    async fn handle(&mut self, input: Self::Input) -> ControlFlow<Self::Output>;
}

/// Runs `d` until its [`Drive::flush`] or [`Drive::handle`] says stop: `poll_timeout → handle_timeout →
/// flush (poll_command, poll_event, poll_transmit)`, then the next input or timer.
pub async fn run<D: Drive>(d: &mut D) -> D::Output {
    let clock = d.clock();
    let sleep = tokio::time::sleep_until(tokio::time::Instant::now());
    tokio::pin!(sleep);
    let mut armed: Option<Instant> = None;
    loop {
        let now = clock.now();
        if d.poll_timeout().is_some_and(|t| t <= now) {
            d.handle_timeout(now);
        }
        if let ControlFlow::Break(out) = d.flush(now).await {
            return out;
        }
        let mut wake = d.poll_timeout();
        if let Some(deadline) = d.deadline() {
            wake = Some(wake.map_or(deadline, |w| w.min(deadline)));
        }
        if wake != armed {
            if let Some(t) = wake {
                sleep.as_mut().reset(clock.to_std(t).into());
            }
            armed = wake;
        }
        tokio::select! {
            biased;
            input = d.input() => {
                if let ControlFlow::Break(out) = d.handle(input).await {
                    return out;
                }
            }
            _ = &mut sleep, if armed.is_some() => {}
        }
    }
}
