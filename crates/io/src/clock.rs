//! Maps the wall clock onto the protocol core's [`Instant`].

use qfec_proto::Instant;

/// Nanoseconds since the clock was created, as the core's time.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    base: std::time::Instant,
}

impl Clock {
    pub fn new() -> Self {
        Clock {
            base: std::time::Instant::now(),
        }
    }

    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.base.elapsed().as_nanos() as u64)
    }

    pub fn to_std(&self, t: Instant) -> std::time::Instant {
        self.base + std::time::Duration::from_nanos(t.as_nanos())
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}
