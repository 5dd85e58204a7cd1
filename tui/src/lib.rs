//! iommutop's live view: a [`State`], the [`Action`]s that change it through [`update`], and
//! [`render`], which draws a state into a ratatui frame. Depends on the data model and ratatui
//! only (no terminal, no threads, no BPF), so that every screen is tested with ratatui's
//! `TestBackend`; the `iommutop top` command owns the terminal and the sampler and feeds this.

pub mod batch;
pub mod columns;
pub mod format;
pub mod history;
pub mod rows;
pub mod state;
pub mod totals;
mod view;

pub use columns::{Column, UnknownColumn};
pub use state::{
    update, Action, Effect, HostSummary, Input, Key, OpProbe, State, WorkloadEvent, WorkloadView,
    INTERVALS,
};
pub use view::render;
