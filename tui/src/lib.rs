//! iommutop TUI.
