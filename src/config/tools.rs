//! `[[tool]]`: tool contracts, their fingerprint specs and durations.

use super::raw::RawTool;
use super::{ConfigError, Setting};
use crate::core::contract::{LossLevel, ToolClass, ToolContract};
use crate::core::fingerprint::{Category, FingerprintError, FingerprintSpec};
use std::collections::HashMap;

pub(super) fn validate_tools(
    raw: Vec<RawTool>,
) -> Result<HashMap<String, ToolContract>, ConfigError> {
    let mut tools = HashMap::new();
    let mut entries = Vec::new();
    let mut errors = Vec::new();
    // A compensation may name a tool whose own entry is wrong: that one error is enough.
    let mut declared = std::collections::HashSet::new();
    for (index, t) in raw.into_iter().enumerate() {
        let name = t.name.clone();
        // Said whether or not either entry is valid otherwise.
        let twice = !declared.insert(name.clone());
        if twice {
            errors.push(ConfigError::invalid(
                Setting::Entry("tool", index, "name".into()),
                format!("tool `{name}` is declared twice"),
            ));
        }
        match validate_tool(index, t) {
            Ok(contract) if !twice => {
                tools.insert(name.clone(), contract);
                entries.push((index, name));
            }
            Ok(_) => {}
            Err(e) => errors.push(e),
        }
    }
    // In the file's order, so that the errors are too.
    for (index, name) in &entries {
        if let Some(comp) = &tools[name].compensation
            && !declared.contains(comp)
        {
            errors.push(ConfigError::invalid(
                Setting::Entry("tool", *index, "compensation".into()),
                format!("tool `{name}`: compensation = {comp:?} names no declared tool"),
            ));
        }
    }
    if errors.is_empty() {
        Ok(tools)
    } else {
        Err(ConfigError::all(errors))
    }
}

/// One `[[tool]]` entry (the `index`-th) as a contract, or every error found in it.
fn validate_tool(index: usize, t: RawTool) -> Result<ToolContract, ConfigError> {
    let invalid = |key: &str, m: String| {
        ConfigError::invalid(Setting::Entry("tool", index, key.to_owned()), m)
    };
    if t.name.is_empty()
        || t.name.len() > 128
        || !t
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        // Every other message names the tool: one without a usable name is reported alone.
        return Err(invalid(
            "name",
            format!(
                "tool name {:?} must be 1-128 characters of A-Z a-z 0-9 . _ -",
                t.name
            ),
        ));
    }
    let name = &t.name;
    let mut errors = Vec::new();
    let class = ToolClass::from_name(&t.class);
    if class.is_none() {
        let names: Vec<&str> = ToolClass::ALL.map(ToolClass::as_str).to_vec();
        errors.push(invalid(
            "class",
            format!(
                "tool `{name}`: class = {:?} is not one of {}",
                t.class,
                names.join(", ")
            ),
        ));
    }
    let loss = LossLevel::from_name(&t.loss);
    if loss.is_none() {
        errors.push(invalid(
            "loss",
            format!("tool `{name}`: loss = {:?} is not one of low, high", t.loss),
        ));
    }
    let lease_ms = parse_duration_ms(name, "lease", &t.lease)
        .map_err(|m| errors.push(invalid("lease", m)))
        .ok();
    let retention_ms = parse_duration_ms(name, "retention", &t.retention)
        .map_err(|m| errors.push(invalid("retention", m)))
        .ok();
    let mut spec = FingerprintSpec {
        ignore: t.ignore,
        required: t.required,
        ..FingerprintSpec::default()
    };
    let mut categories_ok = true;
    for (category, fields) in t.fingerprint {
        match category.parse::<Category>() {
            Ok(Category::Upstream) => {
                categories_ok = false;
                errors.push(invalid(
                    "fingerprint",
                    format!(
                        "tool `{name}`: the `upstream` fingerprint category is filled by the server from the parent operation"
                    ),
                ));
            }
            Ok(category) => {
                spec.fields.insert(category, fields);
            }
            Err(_) => {
                categories_ok = false;
                errors.push(invalid(&format!("fingerprint.{category}"), format!(
                    "tool `{name}`: fingerprint category {category:?} is not one of amount, recipient, target, body, other"
                )));
            }
        }
    }
    // The field paths are judged only once every category is known, or one mistake reads as two.
    if categories_ok && let Err(e) = spec.validate() {
        // Name the list the path is in, so the line is the right one.
        let key = match &e {
            FingerprintError::InvalidFieldPath { path, .. }
            | FingerprintError::DuplicateFieldPath(path)
                if spec.required.contains(path) && !spec.ignore.contains(path) =>
            {
                "required"
            }
            FingerprintError::InvalidFieldPath { path, .. }
            | FingerprintError::DuplicateFieldPath(path)
                if spec.ignore.contains(path) =>
            {
                "ignore"
            }
            _ => "fingerprint",
        };
        errors.push(invalid(
            key,
            format!("tool `{name}`: fingerprint, ignore or required: {e}"),
        ));
    }
    let (Some(class), Some(loss), Some(lease_ms), Some(retention_ms)) =
        (class, loss, lease_ms, retention_ms)
    else {
        return Err(ConfigError::all(errors));
    };
    let contract = ToolContract {
        lease_ms,
        retention_ms,
        name: t.name.clone(),
        class,
        loss,
        status_url: t.status_url,
        compensation: t.compensation,
        accept_unknown_risk: t.accept_unknown_risk,
        fingerprint: spec,
    };
    // The rules between settings, judged once the settings themselves read.
    if let Err(broken) = contract.validate() {
        errors.extend(
            broken
                .into_iter()
                .map(|e| invalid(e.setting(), e.to_string())),
        );
    }
    if errors.is_empty() {
        Ok(contract)
    } else {
        Err(ConfigError::all(errors))
    }
}

/// A duration setting of a tool in ms, or what is wrong with it.
fn parse_duration_ms(tool: &str, setting: &str, text: &str) -> Result<u64, String> {
    let d = humantime::parse_duration(text).map_err(|_| {
        format!("tool `{tool}`: {setting} = {text:?} is not a duration like \"30s\" or \"48h\"")
    })?;
    u64::try_from(d.as_millis()).map_err(|_| format!("tool `{tool}`: {setting} is too long"))
}
