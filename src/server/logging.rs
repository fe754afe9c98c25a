//! Log set-up: `--log-format text|json`, level from `RUST_LOG` or `--log-level`.

use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// `--log-format` and `--log-level`, shared by `serve` and `reap`.
#[derive(Debug, Clone, clap::Args)]
pub struct LogArgs {
    /// Log line format.
    #[arg(
        long,
        env = "PRESTOP_INJECTOR_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,
    /// Log level or filter (RUST_LOG wins when set). `debug` logs every review.
    #[arg(long, env = "PRESTOP_INJECTOR_LOG_LEVEL", default_value = "info")]
    pub log_level: String,
}

impl LogArgs {
    /// [`init`] with these flags.
    pub fn init(&self) -> anyhow::Result<()> {
        init(self.log_format, &self.log_level)
    }
}

/// Installs the global subscriber. `RUST_LOG`, when set, wins over `level` so an operator
/// can raise one module's level without a new flag.
pub fn init(format: LogFormat, level: &str) -> anyhow::Result<()> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.trim().is_empty() => EnvFilter::try_new(directives)?,
        _ => EnvFilter::try_new(level)
            .map_err(|e| anyhow::anyhow!("invalid --log-level {level:?}: {e}"))?,
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let result = match format {
        LogFormat::Text => builder.with_target(false).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    result.map_err(|e| anyhow::anyhow!("cannot install the logger: {e}"))
}
