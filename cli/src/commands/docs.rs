//! `iommutop completions SHELL` and `iommutop man DIR`: what the shell and `man` need, generated
//! from the same clap definition as the parser, so they cannot drift from it (a test checks
//! that docs/man/ is what `iommutop man` writes).

use crate::cli::Cli;
use crate::exit::{Failure, Outcome};
use anyhow::{anyhow, Context};
use clap::CommandFactory;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

pub fn completions(shell: clap_complete::Shell) -> Outcome<ExitCode> {
    let mut command = Cli::command();
    // Into memory first: clap_complete panics when its writer fails (`| head`).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "iommutop", &mut script);
    match std::io::stdout().write_all(&script) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Failure::from(anyhow!("writing the completion script: {e}")))
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// Writes `iommutop.1` and one `iommutop-COMMAND.1` per command into `dir`.
pub fn man_pages(dir: &Path) -> Outcome<ExitCode> {
    if !dir.is_dir() {
        return Err(Failure::usage(anyhow!(
            "{}: not a directory (give the directory to write the manual pages into)",
            dir.display()
        )));
    }
    for (name, page) in render_man_pages().context("rendering the manual pages")? {
        let path = dir.join(name);
        std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// File name and roff of every page: `iommutop(1)` and `iommutop-COMMAND(1)`.
pub fn render_man_pages() -> std::io::Result<Vec<(String, Vec<u8>)>> {
    // The package version alone: a page naming the commit would change with every commit.
    let command = Cli::command().version(env!("CARGO_PKG_VERSION"));
    let mut pages = Vec::new();
    let mut top = Vec::new();
    clap_mangen::Man::new(command.clone()).render(&mut top)?;
    pages.push(("iommutop.1".to_string(), top));
    for sub in command.get_subcommands().filter(|c| !c.is_hide_set()) {
        let name = format!("iommutop-{}", sub.get_name());
        let mut page = Vec::new();
        clap_mangen::Man::new(sub.clone().name(name.clone())).render(&mut page)?;
        pages.push((format!("{name}.1"), page));
    }
    Ok(pages)
}
