//! The one retry policy of the project: exponential backoff with jitter (`backon`), capped,
//! and a server's `Retry-After` (seconds or an HTTP date) taking the place of the next delay.
//! The teacher client, the triple fitter's token counts and the worker's register and report
//! calls all wait through it, so a restarted coordinator or server is not hit by every
//! client at the same instant.

use std::time::{Duration, SystemTime};

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

/// How long to wait between tries: `base` doubling up to `max`, each delay stretched by a
/// random share of itself (up to 2x).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    pub base: Duration,
    pub max: Duration,
}

impl RetryPolicy {
    pub const fn new(base: Duration, max: Duration) -> RetryPolicy {
        RetryPolicy { base, max }
    }

    /// The delays of one sequence of tries.
    pub fn delays(&self) -> Delays {
        let max = self.max.max(self.base);
        Delays {
            backoff: ExponentialBuilder::default()
                .with_min_delay(self.base)
                // The jitter can stretch a delay up to 2x: cap before it so `max` holds.
                .with_max_delay(max / 2)
                .with_jitter()
                .without_max_times()
                .build(),
            max,
        }
    }
}

/// The delays of one sequence of tries (see [`RetryPolicy::delays`]).
#[derive(Debug)]
pub struct Delays {
    backoff: ExponentialBackoff,
    max: Duration,
}

impl Delays {
    /// The wait before the next try: what the server asked for (capped at the policy's
    /// maximum), or the next backoff delay.
    pub fn next_delay(&mut self, retry_after: Option<Duration>) -> Duration {
        let backoff = self.backoff.next().unwrap_or(self.max).min(self.max);
        retry_after.map_or(backoff, |d| d.min(self.max))
    }
}

/// A `Retry-After` header's wait (RFC 9110 §10.2.3): delay-seconds, or an HTTP date (a date
/// already past waits nothing). `None` when it is neither.
pub fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    if let Ok(s) = v.parse::<f64>() {
        return (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_with_jitter_and_stay_capped() {
        let p = RetryPolicy::new(Duration::from_millis(100), Duration::from_secs(2));
        let mut d = p.delays();
        let first: Vec<Duration> = (0..12).map(|_| d.next_delay(None)).collect();
        assert!(first[0] >= Duration::from_millis(100) && first[0] < Duration::from_millis(200));
        assert!(first.iter().all(|x| *x <= Duration::from_secs(2)));
        assert!(first[5] > first[0]);
        // Two sequences differ: the jitter spreads clients apart.
        let other: Vec<Duration> = {
            let mut d = p.delays();
            (0..12).map(|_| d.next_delay(None)).collect()
        };
        assert_ne!(first, other);
        // The server's wait replaces the backoff, capped.
        assert_eq!(
            d.next_delay(Some(Duration::from_millis(250))),
            Duration::from_millis(250)
        );
        assert_eq!(
            d.next_delay(Some(Duration::from_secs(60))),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let now = httpdate::parse_http_date("Sun, 06 Dec 2026 21:00:00 GMT").unwrap();
        assert_eq!(retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(retry_after(" 0.5 ", now), Some(Duration::from_millis(500)));
        assert_eq!(
            retry_after("Sun, 06 Dec 2026 21:00:07 GMT", now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after("Sun, 06 Dec 2026 20:59:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after("-1", now), None);
        assert_eq!(retry_after("soon", now), None);
    }
}
