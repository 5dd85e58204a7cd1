//! One module per subcommand.

pub mod diagnose;
pub mod probes;
pub mod record;
