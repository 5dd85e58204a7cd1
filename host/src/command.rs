//! Running a short command (`ip`) quietly, its last error line kept for the message.

use crate::error::HostError;
use std::process::{Command, Stdio};

/// Runs `argv` with no input; its standard output on success, its last error line otherwise.
pub fn run_quiet(argv: &[&str]) -> Result<String, HostError> {
    let Some((program, args)) = argv.split_first() else {
        return Err(HostError::Command {
            program: "(none)".into(),
            message: "empty command".into(),
        });
    };
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| HostError::Command {
            program: program.to_string(),
            message: format!("cannot start `{program}`: {e}"),
        })?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let said = String::from_utf8_lossy(&output.stderr);
    Err(HostError::Command {
        program: program.to_string(),
        message: format!(
            "`{}`: {}",
            shlex::try_join(argv.iter().copied()).unwrap_or_else(|_| argv.join(" ")),
            said.trim().lines().last().unwrap_or("failed")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_command_names_itself() {
        let e = run_quiet(&["sh", "-c", "echo bad >&2; exit 3"])
            .unwrap_err()
            .to_string();
        // Quoted as a shell reads it back: the script is one word.
        assert_eq!(e, "sh failed: `sh -c 'echo bad >&2; exit 3'`: bad");
        assert_eq!(run_quiet(&["echo", "hi"]).unwrap(), "hi\n");
        assert!(run_quiet(&[]).is_err());
    }
}
