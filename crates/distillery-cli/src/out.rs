//! Standard output that stops quietly when its reader goes away
//! (`distillery inspect OUT | head`): `println!` would panic on the broken pipe. Every line the
//! binary prints for the user goes through [`outln!`] or [`out!`]; logs go to stderr through
//! `tracing`.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// The reader of stdout has gone: nothing more is written.
static GONE: AtomicBool = AtomicBool::new(false);

/// Writes `args` to stdout. Once the reader has closed the pipe, writes nothing more and
/// returns: the command goes on and exits with the status it would have had (a failed
/// `hseq verify | head` still exits non-zero). Any other write error ends the process with
/// status 1.
pub fn write(args: std::fmt::Arguments<'_>) {
    if GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_fmt(args).and_then(|()| o.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            GONE.store(true, Ordering::Relaxed);
            return;
        }
        eprintln!("error: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

/// `print!` through [`write`].
macro_rules! out {
    ($($t:tt)*) => {
        $crate::out::write(format_args!($($t)*))
    };
}

/// `println!` through [`write`].
macro_rules! outln {
    () => {
        $crate::out::write(format_args!("\n"))
    };
    ($($t:tt)*) => {
        $crate::out::write(format_args!("{}\n", format_args!($($t)*)))
    };
}

pub(crate) use {out, outln};
