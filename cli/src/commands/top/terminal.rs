//! The terminal while the view is up: raw mode and the alternate screen, given back on drop, on
//! panic and after a signal; stderr captured meanwhile.

use crate::exit::Outcome;
use anyhow::Context;
use ratatui::crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::crossterm::{cursor, execute};
use ratatui::prelude::CrosstermBackend;
use ratatui::Terminal;
use std::io::{Read, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Once;

/// What was captured on stderr while the view was up is printed afterwards, at most this much.
const CAPTURED_MAX: u64 = 64 << 10;

/// Whether the terminal is in raw mode on the alternate screen (so that restoring is done once,
/// by whichever of `Drop`, the panic hook or `leave` comes first).
static TERMINAL_TAKEN: AtomicBool = AtomicBool::new(false);

/// The real stderr while the view is up (-1: not redirected).
static SAVED_STDERR: AtomicI32 = AtomicI32::new(-1);

static PANIC_HOOK: Once = Once::new();

/// The terminal, taken: raw mode, alternate screen, hidden cursor, stderr captured. Given back
/// by [`Screen::leave`], on drop, or by the panic hook.
pub(super) struct Screen {
    pub(super) terminal: Terminal<CrosstermBackend<std::io::Stdout>>,
    pub(super) captured: Option<std::fs::File>,
}

impl Screen {
    pub(super) fn enter() -> Outcome<Screen> {
        PANIC_HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                give_back_terminal();
                previous(info);
            }));
        });
        let captured = capture_stderr();
        let taken = Screen::take_terminal();
        if taken.is_err() {
            give_back_terminal();
        }
        Ok(Screen {
            terminal: taken?,
            captured,
        })
    }

    pub(super) fn take_terminal() -> Outcome<Terminal<CrosstermBackend<std::io::Stdout>>> {
        enable_raw_mode().context("switching the terminal to raw mode")?;
        TERMINAL_TAKEN.store(true, Ordering::SeqCst);
        execute!(std::io::stdout(), EnterAlternateScreen, cursor::Hide)
            .context("switching to the alternate screen")?;
        Ok(Terminal::new(CrosstermBackend::new(std::io::stdout()))
            .context("setting up the terminal")?)
    }

    /// Gives the terminal back and prints what was said on stderr meanwhile. Idempotent.
    pub(super) fn leave(&mut self) {
        give_back_terminal();
        if let Some(mut file) = self.captured.take() {
            let mut text = String::new();
            let length = file.seek(std::io::SeekFrom::End(0)).unwrap_or(0);
            let start = length.saturating_sub(CAPTURED_MAX);
            if file.seek(std::io::SeekFrom::Start(start)).is_ok() {
                let _ = file.take(CAPTURED_MAX).read_to_string(&mut text);
            }
            if !text.is_empty() {
                let mut stderr = std::io::stderr().lock();
                let _ = stderr.write_all(text.as_bytes());
                let _ = stderr.flush();
            }
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        self.leave();
    }
}

/// Leaves the alternate screen and raw mode, shows the cursor, puts stderr back. Idempotent,
/// and never panics: it runs from `Drop` and from the panic hook.
pub(super) fn give_back_terminal() {
    if TERMINAL_TAKEN.swap(false, Ordering::SeqCst) {
        let _ = execute!(std::io::stdout(), LeaveAlternateScreen, cursor::Show);
        let _ = disable_raw_mode();
    }
    let saved = SAVED_STDERR.swap(-1, Ordering::SeqCst);
    if saved >= 0 {
        // SAFETY: `saved` is the descriptor capture_stderr() duplicated from fd 2 and nobody
        // else closes it; dup2 onto 2 and close are plain syscalls on descriptors we own.
        unsafe {
            libc::dup2(saved, libc::STDERR_FILENO);
            libc::close(saved);
        }
    }
}

/// Points fd 2 at a memory file (children inherit it too) and returns that file, or `None`
/// (stderr left alone) if the kernel refuses.
pub(super) fn capture_stderr() -> Option<std::fs::File> {
    // SAFETY: memfd_create takes a NUL-terminated name and flags; it returns a new descriptor
    // or -1.
    let memfd = unsafe { libc::memfd_create(c"iommutop-top-stderr".as_ptr(), libc::MFD_CLOEXEC) };
    if memfd < 0 {
        return None;
    }
    // SAFETY: memfd is a descriptor we just created and own alone.
    let file = unsafe { std::fs::File::from_raw_fd(memfd) };
    // SAFETY: dup of fd 2 returns a new descriptor (or -1); we own it until give_back_terminal.
    let saved = unsafe { libc::fcntl(libc::STDERR_FILENO, libc::F_DUPFD_CLOEXEC, 3) };
    if saved < 0 {
        return None;
    }
    // SAFETY: both descriptors are open; dup2 replaces fd 2 with a copy of the memory file's.
    if unsafe { libc::dup2(file.as_raw_fd(), libc::STDERR_FILENO) } < 0 {
        // SAFETY: saved is ours and unused.
        unsafe { libc::close(saved) };
        return None;
    }
    SAVED_STDERR.store(saved, Ordering::SeqCst);
    Some(file)
}
