//! The application seam: what runs on top of an [`Endpoint`], independent of what moves its
//! datagrams. The simulator (`qfec-lab`'s node) and the socket driver (`qfec-io`) both call
//! the same [`Application`], so a workload written once runs in virtual time and on real
//! sockets.

use std::ops::ControlFlow;

use crate::{Endpoint, Instant};

/// An application driving an endpoint's connections: it reads their events and moves stream
/// and datagram data. Drivers call [`poll`](Application::poll) after every batch of input and
/// whenever a timer fired.
pub trait Application {
    /// Moves the application forward at `now`. `Break` says the application has finished
    /// (a client that got everything); a driver then stops running it, or, in a simulation,
    /// counts the node as done while still delivering its packets.
    fn poll(&mut self, now: Instant, endpoint: &mut Endpoint) -> ControlFlow<()>;

    /// The next time the application wants [`poll`](Application::poll) even without input.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
}
