//! Standard output for what the commands print, and how the process ends early.
//!
//! Every command prints through [`outln!`] / [`out!`] or [`Stdout`], never `println!`: a
//! reader that stops early (`zipflow inspect f.zf | head`) closes the pipe, and the next
//! write then ends the process quietly with status [`CLOSED_STDOUT`] instead of a panic.
//! SIGINT, SIGTERM and SIGHUP end it with 128 + the signal's number. Both ways delete the
//! temporary files still being written ([`zipflow_format::cleanup`]).

use std::io::Write;

static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Sets `--quiet`: no progress bars and no reports on standard error, only errors.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, std::sync::atomic::Ordering::Relaxed);
}

/// Whether `--quiet` was given.
pub fn quiet() -> bool {
    QUIET.load(std::sync::atomic::Ordering::Relaxed)
}

/// Exit status when standard output was closed before everything was printed: 141, what a
/// shell reports for a process ended by SIGPIPE.
pub const CLOSED_STDOUT: i32 = 141;

/// Ends the process for a failed write to standard output: quietly with [`CLOSED_STDOUT`]
/// when the reader went away, otherwise with the error and status 1.
pub fn fail(e: &std::io::Error) -> ! {
    if e.kind() != std::io::ErrorKind::BrokenPipe {
        eprintln!("error: writing to standard output: {e}");
        zipflow_format::cleanup::remove_all_and_exit(1);
    }
    zipflow_format::cleanup::remove_all_and_exit(CLOSED_STDOUT)
}

/// Writes formatted text to standard output (see [`fail`] for errors).
pub fn print(args: std::fmt::Arguments<'_>) {
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        fail(&e);
    }
}

/// `print!` through [`print()`].
macro_rules! out {
    ($($arg:tt)*) => { $crate::out::print(format_args!($($arg)*)) };
}

/// `println!` through [`print()`].
macro_rules! outln {
    () => { $crate::out::print(format_args!("\n")) };
    ($($arg:tt)*) => {{
        $crate::out::print(format_args!($($arg)*));
        $crate::out::print(format_args!("\n"));
    }};
}

pub(crate) use {out, outln};

/// Buffered standard output for large outputs (query results, tables streamed to `-`);
/// write errors end the process as [`fail`] says, so its methods never return one.
pub struct Stdout {
    inner: std::io::BufWriter<std::io::Stdout>,
}

impl Stdout {
    /// A writer with a 64 KiB buffer.
    pub fn new() -> Stdout {
        Stdout {
            inner: std::io::BufWriter::with_capacity(1 << 16, std::io::stdout()),
        }
    }
}

impl Default for Stdout {
    fn default() -> Self {
        Stdout::new()
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf).or_else(|e| fail(&e))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush().or_else(|e| fail(&e))
    }
}

impl Drop for Stdout {
    fn drop(&mut self) {
        if let Err(e) = self.inner.flush() {
            fail(&e);
        }
    }
}

/// Whether an error came from writing to a closed pipe.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Whether `signal` was ignored when the process started (`nohup`, a shell's background job,
/// `trap '' INT`): such a signal stays ignored, as the parent asked.
fn ignored_at_start(signal: i32) -> bool {
    // SAFETY: with a null new action, sigaction only writes the current disposition into
    // `old`, a zeroed sigaction owned by this frame.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_IGN
    }
}

/// Starts a thread that, on SIGINT, SIGTERM or SIGHUP (those not ignored at start), deletes
/// the listed temporary files and exits with 128 + the signal's number.
pub fn handle_signals() -> anyhow::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let wanted: Vec<i32> = [SIGINT, SIGTERM, SIGHUP]
        .into_iter()
        .filter(|&s| !ignored_at_start(s))
        .collect();
    let mut signals = signal_hook::iterator::Signals::new(wanted)?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                zipflow_format::cleanup::remove_all_and_exit(128 + signal);
            }
        })?;
    Ok(())
}
