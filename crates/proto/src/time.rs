//! Virtual-or-real time as seen by the protocol core.
//!
//! The core never reads a clock: every call takes an [`Instant`] from the caller. It is a plain
//! count of nanoseconds since an epoch the driver picks, so the simulator can run in virtual
//! time and the same inputs always give the same outputs.

use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in time, in nanoseconds since a driver-chosen epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The epoch itself.
    pub const ZERO: Instant = Instant(0);

    pub const fn from_nanos(nanos: u64) -> Self {
        Instant(nanos)
    }

    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time elapsed since `earlier`, or zero when `earlier` is later than `self`.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    pub fn checked_sub(self, d: Duration) -> Option<Instant> {
        self.0.checked_sub(duration_nanos(d)).map(Instant)
    }
}

fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(duration_nanos(d)))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(duration_nanos(d)))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating: an earlier minus a later instant is zero.
    fn sub(self, other: Instant) -> Duration {
        self.saturating_duration_since(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let a = Instant::from_nanos(1_000);
        assert_eq!(a + Duration::from_nanos(5), Instant::from_nanos(1_005));
        assert_eq!(a - Duration::from_secs(1), Instant::ZERO);
        assert_eq!(Instant::ZERO - a, Duration::ZERO);
        assert_eq!(a - Instant::ZERO, Duration::from_nanos(1_000));
    }
}
