//! One module per subcommand.

pub mod compare;
pub mod diagnose;
pub mod probes;
pub mod record;
