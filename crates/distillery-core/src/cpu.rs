//! CPU time of the calling thread and of the whole process (`clock_gettime` with
//! `CLOCK_THREAD_CPUTIME_ID` / `CLOCK_PROCESS_CPUTIME_ID`), and laps of the monotonic clock
//! ([`WallLap`]) for steps too short to read a CPU clock around.
//!
//! Stages use them to say where their time goes: unlike wall time, a thread's CPU time does
//! not grow while another thread has its core, so phases measured on different threads of a
//! busy machine add up to the CPU the stage used. A read is a system call (under a
//! microsecond): measure phases, not single records, and time shorter steps with
//! [`WallLap`].

use std::time::Duration;

use rustix::time::{ClockId, Timespec, clock_gettime};

fn duration(t: Timespec) -> Duration {
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u32::try_from(t.tv_nsec).unwrap_or(0);
    Duration::new(secs, nanos)
}

/// CPU time the calling thread has used so far.
pub fn thread_time() -> Duration {
    duration(clock_gettime(ClockId::ThreadCPUTime))
}

/// Laps of the calling thread's CPU time: each [`Lap::lap`] is the time since the start or
/// the lap before. Use it on one thread, with no `.await` in between (a task may move threads).
#[derive(Debug, Clone, Copy)]
pub struct Lap {
    last: Duration,
}

impl Lap {
    pub fn start() -> Lap {
        Lap {
            last: thread_time(),
        }
    }

    /// The thread's CPU time since the start or the previous lap.
    pub fn lap(&mut self) -> Duration {
        let now = thread_time();
        let d = now.saturating_sub(self.last);
        self.last = now;
        d
    }
}

/// Laps of the monotonic clock ([`std::time::Instant`]: usually no system call, unlike the
/// CPU clocks): for phases too short and too many to read the thread's CPU clock around each
/// one. A caller that wants CPU time multiplies them by the thread's CPU-to-wall ratio over a
/// longer interval ([`Lap`] against the wall clock).
#[derive(Debug, Clone, Copy)]
pub struct WallLap {
    last: std::time::Instant,
}

impl WallLap {
    pub fn start() -> WallLap {
        WallLap {
            last: std::time::Instant::now(),
        }
    }

    /// The time since the start or the previous lap.
    pub fn lap(&mut self) -> Duration {
        let now = std::time::Instant::now();
        let d = now.saturating_duration_since(self.last);
        self.last = now;
        d
    }
}

/// CPU time the process has used so far, all its threads together.
pub fn process_time() -> Duration {
    duration(clock_gettime(ClockId::ProcessCPUTime))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spinning raises the thread's CPU time and the process's at least as much; sleeping
    /// does not raise the thread's by the time slept.
    #[test]
    fn clocks_count_cpu_not_waiting() {
        // The process's interval encloses the thread's.
        let p0 = process_time();
        let t0 = thread_time();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let t1 = thread_time();
        let p1 = process_time();
        assert!(t1 > t0, "{t0:?} -> {t1:?}");
        // Ten milliseconds of slack: with CPU timers armed the kernel may read the process
        // clock from an accumulator that lags by a tick.
        let (process, thread) = (p1 - p0, t1 - t0);
        assert!(
            process + Duration::from_millis(10) >= thread,
            "process {process:?} < thread {thread:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
        let slept = thread_time() - t1;
        assert!(
            slept < Duration::from_millis(100),
            "a sleep counted {slept:?}"
        );
    }
}
