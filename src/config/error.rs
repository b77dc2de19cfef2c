//! What is wrong with a config, and where: the file, the line, the setting.
//!
//! Validation names a [`Setting`]; [`locate`] turns it into a line of the text with
//! `toml_edit`'s spans, so every error points at what to edit. Messages never echo a token:
//! a type error drops the value (a token may be written as a number), and every other message
//! quotes only values of settings that are no secret.

use std::fmt;
use std::path::PathBuf;

/// What is wrong with a config, said once with where and what is allowed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The text is not TOML, or a value has the wrong type or an unknown name.
    #[error("{place}: {message}")]
    Syntax {
        /// Where (boxed: errors stay small on the happy path).
        place: Box<Place>,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// A setting has a value that is not allowed.
    #[error("{place}: {message}")]
    Invalid {
        /// Where (boxed: errors stay small on the happy path).
        place: Box<Place>,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// Several settings are wrong: each, in the file's order once placed (those without a line
    /// last, in the order the sections are checked).
    #[error("{} errors:\n  {}", .0.len(), .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  "))]
    Several(Vec<ConfigError>),
}

impl ConfigError {
    /// A setting's value is not allowed: `message` names the setting, its value (if no
    /// secret) and what is allowed.
    pub(super) fn invalid(at: Setting, message: impl Into<String>) -> Self {
        ConfigError::Invalid {
            place: Box::new(Place {
                at: Some(at),
                ..Place::default()
            }),
            message: message.into(),
        }
    }

    /// `errors` as one error: the only one, or all of them (none: a bug of the caller's).
    pub(super) fn all(errors: Vec<ConfigError>) -> Self {
        let mut errors: Vec<ConfigError> = errors
            .into_iter()
            .flat_map(|e| match e {
                ConfigError::Several(inner) => inner,
                e => vec![e],
            })
            .collect();
        match errors.len() {
            1 => errors.remove(0),
            _ => ConfigError::Several(errors),
        }
    }

    /// The line of the file this error is on, once placed.
    fn line(&self) -> Option<usize> {
        match self {
            ConfigError::Syntax { place, .. } | ConfigError::Invalid { place, .. } => place.line,
            _ => None,
        }
    }

    /// The same error, placed in `text` (the line of its setting) read from `path`.
    pub(super) fn placed(mut self, text: Option<&str>, path: Option<&std::path::Path>) -> Self {
        if let ConfigError::Several(errors) = self {
            let mut placed: Vec<ConfigError> =
                errors.into_iter().map(|e| e.placed(text, path)).collect();
            placed.sort_by_key(|e| e.line().unwrap_or(usize::MAX));
            return ConfigError::Several(placed);
        }
        if let ConfigError::Syntax { place, .. } | ConfigError::Invalid { place, .. } = &mut self {
            if let (Some(text), None, Some(at)) = (text, place.line, &place.at) {
                place.line = locate(text, at);
            }
            if let Some(path) = path {
                place.path = Some(path.to_owned());
            }
        }
        self
    }
}

/// Where an error is: the file (if read from one), the line and column (if known).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Place {
    /// The file.
    pub path: Option<PathBuf>,
    /// The line, from 1.
    pub line: Option<usize>,
    /// The column, from 1.
    pub column: Option<usize>,
    /// The setting, to find its line.
    pub at: Option<Setting>,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(path) => write!(f, "config file {}", path.display())?,
            None => f.write_str("config")?,
        }
        if let Some(line) = self.line {
            write!(f, ", line {line}")?;
            if let Some(column) = self.column {
                write!(f, ", column {column}")?;
            }
        }
        Ok(())
    }
}

/// A setting in the file: `key` of table `table` (`""` for the top level, `"log"`), or of the
/// `index`th entry of an array of tables (`[[tool]]`; the key may be dotted into its tables,
/// `fingerprint.price`). An empty key names the table or entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setting {
    /// A key of a table.
    Key(&'static str, &'static str),
    /// A key of one entry of an array of tables.
    Entry(&'static str, usize, String),
}

/// The line `at` is on in `text`, if it is there (a setting left out has none).
fn locate(text: &str, at: &Setting) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let root = doc.as_table() as &dyn toml_edit::TableLike;
    let (table, key): (&dyn toml_edit::TableLike, &str) = match at {
        Setting::Key(table, key) => (descend(root, table)?, key),
        Setting::Entry(array, index, key) => {
            let (parent, name) = array.rsplit_once('.').unwrap_or(("", array));
            let entry = descend(root, parent)?
                .get(name)?
                .as_array_of_tables()?
                .get(*index)?;
            let (tables, key) = key.rsplit_once('.').unwrap_or(("", key));
            (descend(entry, tables)?, key)
        }
    };
    let span = match table.get_key_value(key) {
        Some((k, item)) => k.span().or_else(|| item.span()),
        // The setting is not written: point at its table, when that is.
        None => table_span(table),
    }?;
    Some(text[..span.start.min(text.len())].matches('\n').count() + 1)
}

fn descend<'a>(
    root: &'a dyn toml_edit::TableLike,
    path: &str,
) -> Option<&'a dyn toml_edit::TableLike> {
    let mut table = root;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        table = table.get(part)?.as_table_like()?;
    }
    Some(table)
}

fn table_span(table: &dyn toml_edit::TableLike) -> Option<std::ops::Range<usize>> {
    table.iter().find_map(|(key, _)| table.key(key)?.span())
}

/// Names a config file may use, as keys or tables. Only these are ever repeated back from the
/// text: a line that fails to parse may be a pasted token that merely looks like a key.
const KNOWN_NAMES: &[&str] = &[
    "accept_unknown_risk",
    "advertise",
    "allowed_hosts",
    "amount",
    "backend",
    "body",
    "body_bytes_max",
    "body_read_timeout",
    "brokers",
    "burst",
    "call_timeout",
    "cert",
    "class",
    "command",
    "compensation",
    "concurrency",
    "connections_max",
    "data_dir",
    "derived_key_window",
    "enabled",
    "fingerprint",
    "header_read_timeout",
    "id",
    "ignore",
    "key",
    "lease",
    "librdkafka",
    "limits",
    "listen",
    "log",
    "loss",
    "mcp",
    "member_timeout",
    "members_topic",
    "name",
    "other",
    "partitions",
    "peer_secret",
    "principal",
    "projection_cache_mb",
    "query_timeout",
    "rate",
    "recipient",
    "recovery",
    "replication_factor",
    "required",
    "result_bytes_max",
    "retention",
    "roles",
    "scan_batch",
    "send_timeout",
    "shutdown_grace",
    "status_url",
    "target",
    "tick",
    "tls",
    "token",
    "token_sha256",
    "tool",
    "tools",
    "topic",
    "upstream",
    "url",
    "writer_threads",
];

/// The setting written on `line` (from 1) of `text`, with its table: `[log] partitions`,
/// `[[tool]] lease`. Only names this file format knows, never a value nor anything else
/// written there.
pub(super) fn setting_on_line(text: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let written = lines.get(line.checked_sub(1)?)?;
    let key = written.split_once('=')?.0.trim();
    if !KNOWN_NAMES.contains(&key) {
        return None;
    }
    let table = lines[..line - 1]
        .iter()
        .rev()
        .map(|l| l.trim())
        .find(|l| l.starts_with('['))
        .filter(|t| {
            t.trim_matches(|c| c == '[' || c == ']')
                .split('.')
                .all(|part| KNOWN_NAMES.contains(&part))
        });
    Some(match table {
        Some(table) => format!("{table} {key}"),
        None => key.to_owned(),
    })
}

/// A parser's type error in words a user of the file knows: `expected u32` says "a whole
/// number"; serde's quoted value is dropped (it may be a token written as a number).
pub(super) fn humane(message: &str) -> String {
    // `invalid type: string "…", expected …`: the text may be a token in the wrong place.
    let message = match message.strip_prefix("invalid type: string ") {
        Some(rest) => match rest.rfind(", expected") {
            Some(at) => format!("invalid type: text{}", &rest[at..]),
            None => "invalid type: text".to_owned(),
        },
        None => message.to_owned(),
    };
    // The value quoted before "expected" may be a token; what follows is the parser's own
    // vocabulary (`expected `.`, `]``), kept as it is.
    let (value, hint) = message.split_at(message.find("expected").unwrap_or(message.len()));
    let value = if value.starts_with("invalid ") {
        value
            .split('`')
            .enumerate()
            .map(|(i, part)| if i % 2 == 1 { "…" } else { part })
            .collect::<Vec<_>>()
            .join("`")
    } else {
        value.to_owned()
    };
    // One line; a table where the file has a Rust type name.
    let mut message = format!("{value}{hint}").replace('\n', ": ");
    if let Some(at) = message.find("expected struct Raw") {
        let end = message[at..]
            .find(|c: char| !c.is_alphanumeric() && c != ' ')
            .map_or(message.len(), |n| at + n);
        message.replace_range(at..end, "expected a table");
    }
    for (rust, words) in [
        (
            "expected path string",
            "expected a path in quotes, like \"opledger-data\"",
        ),
        ("expected u8", "expected a whole number from 0 to 255"),
        ("expected u16", "expected a whole number from 0 to 65535"),
        (
            "expected u32",
            "expected a whole number from 0 to 4294967295",
        ),
        ("expected u64", "expected a whole number of at least 0"),
        ("expected usize", "expected a whole number of at least 0"),
        ("expected a boolean", "expected true or false"),
        ("expected a string", "expected text in quotes"),
        (
            "expected a sequence",
            "expected a list, like [\"a\", \"b\"]",
        ),
    ] {
        if let Some(at) = message.find(rust)
            && !message[at + rust.len()..].starts_with(|c: char| c.is_alphanumeric())
        {
            message.replace_range(at..at + rust.len(), words);
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "data_dir = \"d\"\n\n[log]\npartitions = 0\n\n[[tool]]\nname = \"a\"\n\n[[tool]]\nname = \"b\"\nlease = \"x\"\n[tool.fingerprint]\nprice = [\"p\"]\n";

    #[test]
    fn a_setting_is_found_on_its_line_or_its_tables() {
        let entry = |index, key: &str| Setting::Entry("tool", index, key.to_owned());
        assert_eq!(locate(TEXT, &Setting::Key("", "data_dir")), Some(1));
        assert_eq!(locate(TEXT, &Setting::Key("log", "partitions")), Some(4));
        assert_eq!(locate(TEXT, &entry(1, "lease")), Some(11));
        assert_eq!(locate(TEXT, &entry(0, "lease")), Some(7), "its entry");
        assert_eq!(
            locate(TEXT, &Setting::Key("tool", "x")),
            None,
            "not a table"
        );
        assert_eq!(locate(TEXT, &entry(2, "name")), None);
        assert_eq!(locate(TEXT, &Setting::Key("limits", "x")), None);
        assert_eq!(locate(TEXT, &entry(1, "fingerprint")), Some(12));
        assert_eq!(locate(TEXT, &entry(1, "fingerprint.price")), Some(13));
        assert_eq!(locate("not toml [", &Setting::Key("", "x")), None);
    }

    #[test]
    fn a_placed_error_says_file_line_and_message_once() {
        let e = ConfigError::invalid(Setting::Key("log", "partitions"), "[log] partitions = 0 …")
            .placed(Some(TEXT), Some(std::path::Path::new("/etc/o.toml")));
        assert_eq!(
            e.to_string(),
            "config file /etc/o.toml, line 4: [log] partitions = 0 …"
        );
        let e = ConfigError::invalid(Setting::Key("limits", "x"), "m").placed(Some(TEXT), None);
        assert_eq!(e.to_string(), "config: m");
    }

    #[test]
    fn the_setting_on_a_line_is_named_with_its_table_and_without_its_value() {
        assert_eq!(setting_on_line(TEXT, 1).as_deref(), Some("data_dir"));
        assert_eq!(
            setting_on_line(TEXT, 4).as_deref(),
            Some("[log] partitions")
        );
        assert_eq!(setting_on_line(TEXT, 11).as_deref(), Some("[[tool]] lease"));
        assert_eq!(setting_on_line(TEXT, 3), None, "a table header");
        assert_eq!(setting_on_line(TEXT, 99), None);
        assert_eq!(setting_on_line(TEXT, 0), None);
        assert_eq!(setting_on_line("a b c = 1", 1), None, "not a key");
        // A pasted token that parses as a key is never repeated back, nor a table's name.
        assert_eq!(
            setting_on_line("[[principal]]\nc2VjcmV0dG9rZW4= 1", 2),
            None
        );
        assert_eq!(
            setting_on_line("[c2VjcmV0]\nlisten = 5", 2).as_deref(),
            Some("listen")
        );
    }

    #[test]
    fn type_errors_are_said_in_the_files_words_without_the_value() {
        assert_eq!(
            humane("invalid type: string \"four\", expected u32"),
            "invalid type: text, expected a whole number from 0 to 4294967295"
        );
        assert_eq!(
            humane("invalid type: integer `98765`, expected path string"),
            "invalid type: integer `…`, expected a path in quotes, like \"opledger-data\""
        );
        assert_eq!(humane("expected u320"), "expected u320");
        // The parser's own hints stay; a type name becomes words.
        assert_eq!(
            humane("invalid table header\nexpected `.`, `]`"),
            "invalid table header: expected `.`, `]`"
        );
        assert_eq!(
            humane("invalid type: integer `4`, expected struct RawLog"),
            "invalid type: integer `…`, expected a table"
        );
        assert_eq!(humane("unknown field `x`"), "unknown field `x`");
    }
}
