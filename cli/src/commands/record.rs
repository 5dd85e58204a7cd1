//! `iommutop record`.

use crate::cli::RecordArgs;
use crate::exit::Outcome;
use std::process::ExitCode;

pub fn run(_args: &RecordArgs) -> Outcome<ExitCode> {
    Err(anyhow::anyhow!("record is not built yet").into())
}
