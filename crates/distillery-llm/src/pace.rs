//! How many requests a client keeps in flight: fixed, or set by the client itself between
//! `min_concurrency` and `max_concurrency` from what the server's answers show.
//!
//! The adaptive pace climbs the throughput curve (answers per second against requests in
//! flight) instead of guessing the server's capacity from latency alone, which would stop a
//! batching server like vLLM long before it is full. Time is cut into rounds of three times
//! the limit in answers (after a change of the limit, once the answers to requests sent under
//! the old one have passed), and each round's rate is kept per limit:
//!
//! - **start**: the limit doubles each round while the rate grows by 10% or more; when it
//!   stops growing, the limit goes back to the better of the last two;
//! - **hold**: a few rounds at the limit, then a **probe up** (the limit +25%, at least +1):
//!   kept, and climbed again, when the rate grows by 5% or more; otherwise a **probe down**
//!   (−20%) is kept, and tried again, while it loses no more than 3% (fewer requests queued
//!   in the server for the same throughput), and the last limit comes back when it loses
//!   more;
//! - **overload** (429, 503 or another 5xx, a timeout, a refused or broken connection): the
//!   limit drops to 70% at once, at most once per window of requests in flight (those sent
//!   before the cut answer with what they met then), and the rates learned so far are
//!   forgotten; so are they when the rate at an unchanged limit moves by more than 25% (the
//!   server changed);
//! - a round in which fewer requests than the limit were waiting or in flight tells nothing
//!   about a higher limit, and only holds.
//!
//! [`Controller`] is the decision logic alone, driven by explicit timestamps so it is
//! tested without a clock; [`Pace`] applies its limit to a semaphore.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Instant;

use tokio::sync::{Semaphore, SemaphorePermit};

/// What one request's answer says about the server's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Answered.
    Ok,
    /// Too busy: 429, 5xx, a timeout, a refused or broken connection.
    Overload,
    /// Failed for a reason that says nothing about load (a 4xx other than 429, a bad body).
    Neutral,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Start { prev: Option<(usize, f64)> },
    Hold { rounds: u32 },
    ProbeUp { base: usize },
    ProbeDown { base: usize },
}

/// The adaptive limit's decisions (see the module docs).
#[derive(Debug, Clone)]
pub struct Controller {
    min: usize,
    max: usize,
    limit: usize,
    phase: Phase,
    round_start: Option<Instant>,
    /// Answers still to let pass before the round is measured: after a change of the limit,
    /// those sent under the old one.
    round_warm: usize,
    round_done: usize,
    round_peak: usize,
    /// Answers and refusals since the last cut, and the limit the cut was made from: one
    /// cut per window of requests in flight.
    since_cut: usize,
    cut_from: usize,
    /// Smoothed answers per second at each limit, since the last overload.
    rates: BTreeMap<usize, f64>,
}

const GROW: f64 = 1.10;
const PROBE_GAIN: f64 = 1.05;
const PROBE_LOSS: f64 = 0.97;
const CUT: f64 = 0.7;

impl Controller {
    /// A controller between `min` and `max` (both at least 1), starting at 4 within them.
    pub fn new(min: usize, max: usize) -> Controller {
        let min = min.max(1);
        let max = max.max(min);
        Controller {
            min,
            max,
            limit: 4.clamp(min, max),
            phase: Phase::Start { prev: None },
            round_start: None,
            round_warm: 0,
            round_done: 0,
            round_peak: 0,
            since_cut: 0,
            cut_from: 0,
            rates: BTreeMap::new(),
        }
    }

    /// The limit now.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Requests waiting or in flight when one more asked: whether the limit is what holds
    /// them back.
    pub fn demand(&mut self, now: Instant, wanted: usize) {
        self.round_start.get_or_insert(now);
        self.round_peak = self.round_peak.max(wanted);
    }

    fn up(&self, from: usize) -> usize {
        (from + 1).max(from * 5 / 4).min(self.max)
    }

    fn down(&self, from: usize) -> usize {
        (from.saturating_sub(1)).min(from * 4 / 5).max(self.min)
    }

    fn new_round(&mut self, now: Instant, changed: bool) {
        self.round_start = Some(now);
        self.round_warm = if changed { self.limit } else { 0 };
        self.round_done = 0;
        self.round_peak = 0;
    }

    /// One answer arrived at `now`; returns the limit from now on.
    pub fn done(&mut self, now: Instant, signal: Signal) -> usize {
        let start = *self.round_start.get_or_insert(now);
        self.since_cut += 1;
        if signal == Signal::Overload {
            // The requests in flight when the last cut was made answer with what they met
            // then: one cut per window of them.
            if self.since_cut > self.cut_from {
                self.cut_from = self.limit;
                self.since_cut = 0;
                self.limit = ((self.limit as f64 * CUT) as usize).max(self.min);
                self.phase = Phase::Hold { rounds: 3 };
                self.rates.clear();
                self.new_round(now, true);
            }
            return self.limit;
        }
        if self.round_warm > 0 {
            self.round_warm -= 1;
            if self.round_warm == 0 {
                self.round_start = Some(now);
                self.round_peak = 0;
            }
            return self.limit;
        }
        self.round_done += 1;
        if self.round_done < (3 * self.limit).max(8) {
            return self.limit;
        }
        let secs = now.saturating_duration_since(start).as_secs_f64().max(1e-6);
        let rate = self.round_done as f64 / secs;
        let saturated = self.round_peak >= self.limit;
        let at = self.limit;
        if !saturated {
            self.phase = Phase::Hold { rounds: 2 };
            self.new_round(now, false);
            return self.limit;
        }
        match self.rates.get_mut(&at) {
            // The same limit a quarter faster or slower than before: the server changed, and
            // what was learned of it is forgotten.
            Some(seen) if (rate - *seen).abs() > 0.25 * *seen => {
                self.rates.clear();
                self.rates.insert(at, rate);
            }
            Some(seen) => *seen = 0.5 * *seen + 0.5 * rate,
            None => {
                self.rates.insert(at, rate);
            }
        }
        let rate_at = |r: &BTreeMap<usize, f64>, l: usize| r.get(&l).copied().unwrap_or(0.0);
        self.phase = match self.phase {
            Phase::Start { prev } => match prev {
                Some((l, r)) if rate < r * GROW => {
                    self.limit = l;
                    Phase::Hold { rounds: 4 }
                }
                _ => {
                    let next = (at * 2).min(self.max);
                    if next == at {
                        Phase::Hold { rounds: 4 }
                    } else {
                        self.limit = next;
                        Phase::Start {
                            prev: Some((at, rate)),
                        }
                    }
                }
            },
            Phase::Hold { rounds } if rounds > 1 => Phase::Hold { rounds: rounds - 1 },
            Phase::Hold { .. } => {
                if at < self.max {
                    self.limit = self.up(at);
                    Phase::ProbeUp { base: at }
                } else if at > self.min {
                    self.limit = self.down(at);
                    Phase::ProbeDown { base: at }
                } else {
                    Phase::Hold { rounds: 8 }
                }
            }
            Phase::ProbeUp { base } => {
                if rate > rate_at(&self.rates, base) * PROBE_GAIN {
                    if at < self.max {
                        self.limit = self.up(at);
                        Phase::ProbeUp { base: at }
                    } else {
                        Phase::Hold { rounds: 8 }
                    }
                } else if base > self.min {
                    self.limit = self.down(base);
                    Phase::ProbeDown { base }
                } else {
                    self.limit = base;
                    Phase::Hold { rounds: 8 }
                }
            }
            Phase::ProbeDown { base } => {
                if rate >= rate_at(&self.rates, base) * PROBE_LOSS {
                    // As fast with fewer in flight: try fewer still.
                    if at > self.min {
                        self.limit = self.down(at);
                        Phase::ProbeDown { base: at }
                    } else {
                        Phase::Hold { rounds: 4 }
                    }
                } else {
                    self.limit = base;
                    Phase::Hold { rounds: 8 }
                }
            }
        };
        self.new_round(now, self.limit != at);
        self.limit
    }
}

#[derive(Debug)]
struct State {
    ctl: Option<Controller>,
    /// Permits in existence (free and held) above the limit, to forget as they come back.
    debt: usize,
    /// Requests waiting for a permit or holding one.
    wanted: usize,
}

/// The requests a client keeps in flight.
#[derive(Debug)]
pub struct Pace {
    sem: Semaphore,
    state: Mutex<State>,
    fixed: usize,
}

/// A slot for one request; give it back with [`Ticket::done`] (dropped, it counts as
/// [`Signal::Neutral`]).
#[derive(Debug)]
pub struct Ticket<'a> {
    pace: &'a Pace,
    permit: Option<SemaphorePermit<'a>>,
}

impl Pace {
    /// `max` in flight always.
    pub fn fixed(max: usize) -> Pace {
        let max = max.max(1);
        Pace {
            sem: Semaphore::new(max),
            state: Mutex::new(State {
                ctl: None,
                debt: 0,
                wanted: 0,
            }),
            fixed: max,
        }
    }

    /// Between `min` and `max`, set by a [`Controller`].
    pub fn adaptive(min: usize, max: usize) -> Pace {
        let ctl = Controller::new(min, max);
        Pace {
            sem: Semaphore::new(ctl.limit()),
            state: Mutex::new(State {
                ctl: Some(ctl),
                debt: 0,
                wanted: 0,
            }),
            fixed: 0,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The limit now.
    pub fn limit(&self) -> usize {
        self.lock()
            .ctl
            .as_ref()
            .map_or(self.fixed, Controller::limit)
    }

    /// Waits for a slot.
    pub async fn acquire(&self) -> Option<Ticket<'_>> {
        {
            let mut st = self.lock();
            st.wanted += 1;
            let wanted = st.wanted;
            if let Some(c) = st.ctl.as_mut() {
                c.demand(Instant::now(), wanted);
            }
        }
        let permit = self.sem.acquire().await;
        if permit.is_err() {
            self.lock().wanted -= 1;
        }
        Some(Ticket {
            pace: self,
            permit: Some(permit.ok()?),
        })
    }

    fn release(&self, permit: SemaphorePermit<'_>, signal: Signal) {
        let mut st = self.lock();
        st.wanted = st.wanted.saturating_sub(1);
        let Some(ctl) = st.ctl.as_mut() else {
            drop(permit);
            return;
        };
        let before = ctl.limit();
        let after = ctl.done(Instant::now(), signal);
        if after > before {
            let grow = after - before;
            let paid = grow.min(st.debt);
            st.debt -= paid;
            self.sem.add_permits(grow - paid);
        } else {
            st.debt += before - after;
            // Free permits go at once, so no new request starts above the new limit.
            while st.debt > 0 {
                match self.sem.try_acquire() {
                    Ok(p) => {
                        p.forget();
                        st.debt -= 1;
                    }
                    Err(_) => break,
                }
            }
        }
        if st.debt > 0 {
            st.debt -= 1;
            permit.forget();
        } else {
            drop(permit);
        }
    }
}

impl Ticket<'_> {
    /// The request ended with `signal`: the slot goes back (or is retired when the limit
    /// shrank).
    pub fn done(mut self, signal: Signal) {
        if let Some(p) = self.permit.take() {
            self.pace.release(p, signal);
        }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.permit.take() {
            self.pace.release(p, Signal::Neutral);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Drives a controller against a server model: `capacity(t)` requests served at once,
    /// each taking `service` seconds, answers per second = min(limit, capacity) / service;
    /// over `capacity + queue` in flight, every request is refused at once. Returns the
    /// limit at the end of each simulated second and the answers within it.
    fn simulate(
        ctl: &mut Controller,
        seconds: u32,
        service: f64,
        capacity: impl Fn(f64) -> usize,
        queue: usize,
    ) -> Vec<(usize, u32)> {
        let t0 = Instant::now();
        let mut t = 0.0;
        let mut out = Vec::new();
        let mut answers = 0;
        let mut next_second = 1.0;
        while t < f64::from(seconds) {
            let l = ctl.limit();
            let cap = capacity(t);
            ctl.demand(t0 + Duration::from_secs_f64(t), l + 10);
            if l > cap + queue {
                t += 0.001;
                ctl.done(t0 + Duration::from_secs_f64(t), Signal::Overload);
            } else {
                t += service / l.min(cap) as f64;
                ctl.done(t0 + Duration::from_secs_f64(t), Signal::Ok);
                answers += 1;
            }
            while t >= next_second {
                out.push((ctl.limit(), answers));
                answers = 0;
                next_second += 1.0;
            }
        }
        out
    }

    /// The share of the server's best throughput over seconds `from..to`, and the share of
    /// those seconds whose limit was within `lo..=hi`.
    fn window(
        s: &[(usize, u32)],
        from: usize,
        to: usize,
        best: f64,
        lo: usize,
        hi: usize,
    ) -> (f64, f64) {
        let got: u32 = s[from..to].iter().map(|x| x.1).sum();
        let inside = s[from..to]
            .iter()
            .filter(|x| (lo..=hi).contains(&x.0))
            .count();
        (
            f64::from(got) / (best * (to - from) as f64),
            inside as f64 / (to - from) as f64,
        )
    }

    #[test]
    fn the_limit_climbs_to_the_capacity_and_follows_it_down_and_up() {
        let mut c = Controller::new(1, 256);
        let cap = |t: f64| {
            if t < 60.0 {
                32
            } else if t < 120.0 {
                6
            } else {
                48
            }
        };
        let s = simulate(&mut c, 180, 0.2, cap, 1000);
        // Settled in each regime: at least 90% of the best throughput, without keeping far
        // more in flight than the server serves at once.
        for (from, to, cap) in [(30, 60, 32), (90, 120, 6), (150, 180, 48)] {
            let (share, inside) = window(&s, from, to, cap as f64 / 0.2, cap, cap * 5 / 2);
            assert!(
                share >= 0.9 && inside >= 0.7,
                "{from}..{to}: {share} {inside} {s:?}"
            );
        }
    }

    #[test]
    fn overload_cuts_the_limit_once_a_round_and_stays_within_bounds() {
        let mut c = Controller::new(2, 40);
        let t0 = Instant::now();
        c.demand(t0, 100);
        let before = c.limit();
        let a = c.done(t0, Signal::Overload);
        assert_eq!(a, ((before as f64 * CUT) as usize).max(2));
        // A burst of 503s from the same moment cuts once.
        assert_eq!(c.done(t0, Signal::Overload), a);
        // A full server's 503s with no answers between them: never below the minimum.
        let mut c = Controller::new(2, 40);
        for i in 0..50 {
            let t = t0 + Duration::from_millis(i);
            c.demand(t, 100);
            for _ in 0..(2 * c.limit()).max(6) {
                c.done(t, Signal::Neutral);
            }
            c.done(t, Signal::Overload);
        }
        assert_eq!(c.limit(), 2);
        // And never above the maximum, however fast the answers.
        let mut c = Controller::new(1, 7);
        let s = simulate(&mut c, 30, 0.05, |_| 1000, 0);
        assert!(s.iter().all(|x| x.0 <= 7), "{s:?}");
        assert!(window(&s, 20, 30, 7.0 / 0.05, 0, 7).0 >= 0.9, "{s:?}");
    }

    #[test]
    fn a_server_with_a_short_queue_is_not_kept_full() {
        // Capacity 16 and 4 queue places: over 20 in flight every request is refused.
        let mut c = Controller::new(1, 256);
        let s = simulate(&mut c, 120, 0.1, |_| 16, 4);
        let (share, inside) = window(&s, 60, 120, 160.0, 12, 20);
        assert!(share >= 0.9 && inside >= 0.8, "{share} {inside} {s:?}");
    }

    #[test]
    fn a_round_below_the_limit_holds() {
        // The caller never has more than 3 requests: the limit does not climb past 4.
        let mut c = Controller::new(1, 64);
        let t0 = Instant::now();
        for i in 0..500 {
            let t = t0 + Duration::from_millis(i * 10);
            c.demand(t, 3);
            c.done(t, Signal::Ok);
        }
        assert_eq!(c.limit(), 4);
    }

    #[tokio::test]
    async fn a_shrinking_limit_retires_permits_and_a_growing_one_adds_them() {
        let p = Pace::adaptive(1, 64);
        assert_eq!(p.limit(), 4);
        let tickets: Vec<Ticket<'_>> = futures::future::join_all((0..4).map(|_| p.acquire()))
            .await
            .into_iter()
            .map(Option::unwrap)
            .collect();
        assert_eq!(p.sem.available_permits(), 0);
        // An overload: 4 → 2, two permits retired as they come back.
        let mut it = tickets.into_iter();
        it.next().unwrap().done(Signal::Overload);
        assert_eq!(p.limit(), 2);
        for t in it {
            t.done(Signal::Ok);
        }
        assert_eq!(p.sem.available_permits(), 2);
        // A cut while permits are free retires them at once: one request in flight of 4,
        // refused, leaves 2 free, not 3.
        let q = Pace::adaptive(1, 64);
        q.acquire().await.unwrap().done(Signal::Overload);
        assert_eq!((q.limit(), q.sem.available_permits()), (2, 2));
        let fixed = Pace::fixed(3);
        let t = fixed.acquire().await.unwrap();
        t.done(Signal::Overload);
        assert_eq!((fixed.limit(), fixed.sem.available_permits()), (3, 3));
    }
}
