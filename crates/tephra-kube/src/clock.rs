//! The controller manager's clock, for the controllers whose decisions depend on the time of
//! day (the CronJob controller): the system's, or one that a test or the simulator drives
//! and that tells the controllers when it moves.

use std::sync::Arc;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use tokio::sync::watch;

/// A clock: cheap to clone, all clones read the same time.
#[derive(Clone, Debug)]
pub struct Clock(Arc<Source>);

#[derive(Debug)]
enum Source {
    System,
    Driven(watch::Sender<Timestamp>),
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

impl Clock {
    /// The system's clock.
    pub fn system() -> Self {
        Self(Arc::new(Source::System))
    }

    /// A clock that stands at `start` until [`Clock::set`] or [`Clock::advance`] moves it.
    pub fn driven(start: Timestamp) -> Self {
        Self(Arc::new(Source::Driven(watch::Sender::new(start))))
    }

    /// The time now.
    pub fn now(&self) -> Timestamp {
        match &*self.0 {
            Source::System => Timestamp::now(),
            Source::Driven(t) => *t.borrow(),
        }
    }

    /// Moves a driven clock to `t` (backwards too, as a system clock may be stepped); the
    /// system clock is not moved, and `false` says so.
    pub fn set(&self, t: Timestamp) -> bool {
        match &*self.0 {
            Source::System => false,
            Source::Driven(s) => {
                s.send_replace(t);
                true
            }
        }
    }

    /// Moves a driven clock on by `d`; `false` for the system clock.
    pub fn advance(&self, d: SignedDuration) -> bool {
        match self.now().checked_add(d) {
            Ok(t) => self.set(t),
            Err(_) => false,
        }
    }

    /// Tells of each move of a driven clock; `None` for the system clock, which moves by
    /// itself.
    pub fn moves(&self) -> Option<watch::Receiver<Timestamp>> {
        match &*self.0 {
            Source::System => None,
            Source::Driven(s) => Some(s.subscribe()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn a_driven_clock_moves_only_when_told_and_says_so() {
        let start: Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
        let c = Clock::driven(start);
        let mut moves = c.moves().unwrap();
        assert_eq!(c.clone().now(), start);
        assert!(c.advance(SignedDuration::from_mins(5)));
        moves.changed().await.unwrap();
        assert_eq!(*moves.borrow(), "2026-12-01T10:05:00Z".parse().unwrap());
        assert_eq!(c.now(), "2026-12-01T10:05:00Z".parse().unwrap());
        let sys = Clock::system();
        assert!(!sys.set(start) && sys.moves().is_none());
        assert!(
            sys.now() > "2020-01-01T00:00:00Z".parse().unwrap(),
            "the system's time"
        );
    }
}
