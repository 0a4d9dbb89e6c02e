//! Settings from the environment and a TOML file, for the serving commands (`floe dev`,
//! `floe metadata`, `floe agent`): every flag may also be given as `FLOE_<FLAG>` (upper case,
//! `-` as `_`: `FLOE_KAFKA_ADDR`) or as a key of the file named by `--config` (or
//! `FLOE_CONFIG`). A flag on the command line wins over the environment, the environment over
//! the file, the file over the built-in default.
//!
//! The file's top-level keys are the flags' long names (`kafka-addr = "0.0.0.0:9092"`); a
//! `[agent]`, `[metadata]` or `[dev]` table holds keys for that command only and wins over the
//! top level, so one file can serve every command of a host. A top-level key applies to the
//! commands that have the flag; a key no serving command has (or, in a section, that command
//! lacks) is an error, as a misspelt flag is.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::CommandFactory;
use clap::parser::ValueSource;

use crate::cli::Cli;

/// The environment variable naming the file when `--config` is not given.
pub(crate) const CONFIG_ENV: &str = "FLOE_CONFIG";
/// The commands settings apply to.
const SERVING: [&str; 3] = ["dev", "metadata", "agent"];
/// Largest configuration file read.
const CONFIG_BYTES_MAX: u64 = 1024 * 1024;

/// The command line, with the environment and the configuration file applied.
pub(crate) fn parse() -> anyhow::Result<Cli> {
    use clap::FromArgMatches;
    let argv: Vec<OsString> = std::env::args_os().collect();
    // The versions an upgrade depends on, for operators and the upgrade test.
    let version = format!(
        "{} (metadata format {}, metadata protocol {})",
        env!("CARGO_PKG_VERSION"),
        floe_metadata::FORMAT_VERSION,
        floe_metadata::raft::network::PROTOCOL_VERSION,
    );
    let mut command = with_environment(Cli::command()).version(version);
    if let Some(name) = argv.get(1).and_then(|a| a.to_str()).filter(|a| SERVING.contains(a))
        && let Some(path) = config_path(&argv)
    {
        let file = Settings::read(&path)?;
        command = file.apply(command, name, &path)?.0;
    }
    let matches = command.get_matches_from(argv);
    Ok(Cli::from_arg_matches(&matches)?)
}

/// `FLOE_<FLAG>` for every flag of the serving commands, and `--config`.
fn with_environment(mut command: clap::Command) -> clap::Command {
    for name in SERVING {
        command = command.mut_subcommand(name, |sub| {
            let ids: Vec<(String, String)> = sub
                .get_arguments()
                .filter_map(|arg| arg.get_long().map(|long| (arg.get_id().to_string(), long.to_owned())))
                .collect();
            let mut sub = sub.arg(
                clap::Arg::new("config")
                    .long("config")
                    .env(CONFIG_ENV)
                    .value_name("FILE")
                    .value_parser(clap::value_parser!(PathBuf))
                    .help("TOML file of settings: keys are flag names; flags and FLOE_* variables win over it"),
            );
            for (id, long) in ids {
                sub = sub.mut_arg(id, |arg| arg.env(env_name(&long)));
            }
            sub
        });
    }
    command
}

/// `FLOE_KAFKA_ADDR` for `kafka-addr`.
fn env_name(long: &str) -> String {
    format!("FLOE_{}", long.to_ascii_uppercase().replace('-', "_"))
}

/// The file `--config FILE`, `--config=FILE` or `FLOE_CONFIG` names.
fn config_path(argv: &[OsString]) -> Option<PathBuf> {
    let mut args = argv.iter().skip(2);
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy();
        if text == "--" {
            break;
        }
        if text == "--config" {
            return args.next().map(PathBuf::from);
        }
        if let Some(path) = text.strip_prefix("--config=") {
            return Some(PathBuf::from(path));
        }
    }
    std::env::var_os(CONFIG_ENV).map(PathBuf::from)
}

/// A configuration file's settings: flag long name to its value(s), per command.
#[derive(Debug, Default)]
pub(crate) struct Settings {
    common: BTreeMap<String, Vec<String>>,
    per_command: BTreeMap<String, BTreeMap<String, Vec<String>>>,
}

impl Settings {
    pub(crate) fn read(path: &Path) -> anyhow::Result<Self> {
        let size = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?.len();
        if size > CONFIG_BYTES_MAX {
            bail!("{}: {size} bytes, larger than a configuration file may be ({CONFIG_BYTES_MAX})", path.display());
        }
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("{} is not a valid configuration file", path.display()))
    }

    fn parse(text: &str) -> anyhow::Result<Self> {
        let table: toml::Table = toml::from_str(text)?;
        let mut settings = Self::default();
        for (key, value) in table {
            match value {
                toml::Value::Table(inner) if SERVING.contains(&key.as_str()) => {
                    let mut values = BTreeMap::new();
                    for (key, value) in inner {
                        let value = values_of(&key, value)?;
                        values.insert(key, value);
                    }
                    settings.per_command.insert(key, values);
                }
                toml::Value::Table(_) => {
                    bail!("[{key}] is not a section: sections are [{}]", SERVING.join("], ["))
                }
                value => {
                    let value = values_of(&key, value)?;
                    settings.common.insert(key, value);
                }
            }
        }
        Ok(settings)
    }

    /// The settings of command `name`: the top level, then its own section over it; each
    /// with whether it is the command's own (from its section).
    fn of(&self, name: &str) -> BTreeMap<&str, (&[String], bool)> {
        let mut merged: BTreeMap<&str, (&[String], bool)> =
            self.common.iter().map(|(key, value)| (key.as_str(), (value.as_slice(), false))).collect();
        if let Some(own) = self.per_command.get(name) {
            merged.extend(own.iter().map(|(key, value)| (key.as_str(), (value.as_slice(), true))));
        }
        merged
    }

    /// `command` with the settings of subcommand `name` as its flags' defaults; the flags set.
    pub(crate) fn apply(
        &self,
        command: clap::Command,
        name: &str,
        path: &Path,
    ) -> anyhow::Result<(clap::Command, Vec<String>)> {
        let has = |command: &clap::Command, key: &str| {
            command
                .get_arguments()
                .find(|arg| arg.get_long() == Some(key) && key != "config")
                .map(|arg| arg.get_id().to_string())
        };
        let Some(sub) = command.find_subcommand(name) else { bail!("no command {name}") };
        let mut owned: Vec<(String, Vec<String>)> = Vec::new();
        for (key, (values, own)) in self.of(name) {
            match has(sub, key) {
                Some(id) => owned.push((id, values.to_vec())),
                // Another command's flag, at the top level: not this command's business.
                None if !own
                    && SERVING
                        .iter()
                        .filter_map(|other| command.find_subcommand(other))
                        .any(|c| has(c, key).is_some()) => {}
                None => {
                    bail!("{}: `{key}` is not a setting of `floe {name}` (see `floe {name} --help`)", path.display())
                }
            }
        }
        let set = owned.iter().map(|(id, _)| id.clone()).collect();
        let command = command.mut_subcommand(name, |mut sub| {
            for (id, values) in owned {
                sub = sub.mut_arg(id, |arg| arg.default_values(values).required(false));
            }
            sub
        });
        Ok((command, set))
    }
}

/// A TOML value as flag values: an array gives one each, a table none (an error).
fn values_of(key: &str, value: toml::Value) -> anyhow::Result<Vec<String>> {
    let one = |value: toml::Value| -> anyhow::Result<String> {
        Ok(match value {
            toml::Value::String(text) => text,
            toml::Value::Integer(number) => number.to_string(),
            toml::Value::Float(number) => number.to_string(),
            toml::Value::Boolean(flag) => flag.to_string(),
            other => bail!("`{key}`: a {} cannot be a flag's value", other.type_str()),
        })
    };
    match value {
        toml::Value::Array(items) => items.into_iter().map(one).collect(),
        value => Ok(vec![one(value)?]),
    }
}

/// Names of flags whose values are secrets, redacted when printed. Floe takes secrets from
/// files (`--operator-token-file`), so only a value given inline is hidden.
fn is_secret(long: &str) -> bool {
    !long.ends_with("-file") && ["password", "secret", "token"].iter().any(|word| long.contains(word))
}

/// `floe config check FILE --command NAME`: the effective settings of `floe NAME` with this
/// file and this environment (every flag, its value and where it came from), or what is wrong.
pub(crate) fn check(path: &Path, name: &str, json: bool) -> anyhow::Result<()> {
    if !SERVING.contains(&name) {
        bail!("settings apply to `floe {}`, not `floe {name}`", SERVING.join("`, `floe "));
    }
    let file = Settings::read(path)?;
    let (command, from_file) = file.apply(with_environment(Cli::command()), name, path)?;
    let matches = command
        .try_get_matches_from(["floe", name])
        .map_err(|e| anyhow::anyhow!("{}", e.render().to_string().trim_end()))?;
    let (_, sub_matches) = matches.subcommand().context("no command")?;
    let Some(sub) = Cli::command().find_subcommand(name).cloned() else { bail!("no command {name}") };
    let mut rows = Vec::new();
    for arg in sub.get_arguments() {
        let (Some(long), id) = (arg.get_long(), arg.get_id().as_str()) else { continue };
        if matches!(long, "help" | "version") {
            continue;
        }
        let values: Vec<String> = sub_matches
            .get_raw(id)
            .map(|raw| raw.map(|v| v.to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        let source = match sub_matches.value_source(id) {
            Some(ValueSource::EnvVariable) => "environment",
            Some(ValueSource::DefaultValue) if from_file.iter().any(|f| f == id) => "file",
            Some(ValueSource::DefaultValue) => "default",
            Some(ValueSource::CommandLine) => "command line",
            _ => "unset",
        };
        let shown = if is_secret(long) && !values.is_empty() { vec!["<redacted>".to_owned()] } else { values };
        rows.push((long.to_owned(), shown, source));
    }
    if json {
        let out: Vec<_> = rows
            .iter()
            .map(|(key, values, source)| serde_json::json!({"setting": key, "values": values, "source": source}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("# effective settings of `floe {name}` with {}", path.display());
        for (key, values, source) in rows {
            let value = match values.as_slice() {
                [] => "(unset)".to_owned(),
                [one] => format!("{one:?}"),
                many => format!("{many:?}"),
            };
            println!("{key} = {value}  # {source}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_override_the_top_level_and_arrays_give_several_values() {
        let settings = Settings::parse(
            "kafka-addr = \"0.0.0.0:9092\"\nmetadata = [\"a:9093\", \"b:9093\"]\n[agent]\nkafka-addr = \"0.0.0.0:19092\"\n",
        )
        .unwrap();
        let agent = settings.of("agent");
        assert_eq!(agent["kafka-addr"].0, ["0.0.0.0:19092"]);
        assert_eq!(agent["metadata"].0, ["a:9093", "b:9093"]);
        assert_eq!(settings.of("dev")["kafka-addr"].0, ["0.0.0.0:9092"]);
    }

    #[test]
    fn unknown_keys_sections_and_values_are_refused() {
        assert!(Settings::parse("[agnet]\nzone = \"a\"\n").is_err());
        assert!(Settings::parse("zone = { name = \"a\" }\n").is_err());
        let settings = Settings::parse("kafka-adr = \"x\"\n").unwrap();
        let error = settings.apply(with_environment(Cli::command()), "agent", Path::new("f.toml")).unwrap_err();
        assert!(error.to_string().contains("`kafka-adr` is not a setting of `floe agent`"), "{error}");
        // A metadata node's flag at the top level is left to metadata nodes; in [agent] it is wrong.
        let shared = Settings::parse("peers = [\"1=a:9093\"]\n").unwrap();
        assert!(shared.apply(with_environment(Cli::command()), "agent", Path::new("f.toml")).is_ok());
        let misplaced = Settings::parse("[agent]\npeers = [\"1=a:9093\"]\n").unwrap();
        assert!(misplaced.apply(with_environment(Cli::command()), "agent", Path::new("f.toml")).is_err());
    }

    #[test]
    fn a_flag_beats_the_file_which_beats_the_default() {
        use clap::FromArgMatches;
        let settings = Settings::parse(
            "kafka-addr = \"127.0.0.1:19092\"\nzone = \"z1\"\nobject-store = \"memory://\"\nmetadata = \"m:9093\"\n",
        )
        .unwrap();
        let (command, set) = settings.apply(with_environment(Cli::command()), "agent", Path::new("f.toml")).unwrap();
        assert_eq!(set.len(), 4);
        let matches = command.try_get_matches_from(["floe", "agent", "--zone", "z2"]).unwrap();
        let cli = Cli::from_arg_matches(&matches).unwrap();
        let crate::cli::Command::Agent(agent) = cli.command else { panic!("not agent") };
        assert_eq!(agent.placement.zone.as_deref(), Some("z2"), "the flag wins");
        assert_eq!(agent.agent.kafka_addr.to_string(), "127.0.0.1:19092", "the file beats the default");
        assert_eq!(agent.metadata, ["m:9093"], "a required flag may come from the file");
    }

    #[test]
    fn environment_names_and_secrets() {
        assert_eq!(env_name("kafka-addr"), "FLOE_KAFKA_ADDR");
        assert!(is_secret("s3-secret"));
        assert!(!is_secret("operator-token-file"));
        assert!(!is_secret("kafka-addr"));
    }
}
