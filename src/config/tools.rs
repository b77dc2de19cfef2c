//! `[[tool]]`: tool contracts, their fingerprint specs and durations.

use super::ConfigError;
use super::raw::RawTool;
use crate::core::contract::ToolContract;
use crate::core::fingerprint::{Category, FingerprintSpec};
use std::collections::HashMap;

pub(super) fn validate_tools(
    raw: Vec<RawTool>,
) -> Result<HashMap<String, ToolContract>, ConfigError> {
    let mut tools = HashMap::new();
    for t in raw {
        if t.name.is_empty()
            || t.name.len() > 128
            || !t
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        {
            return Err(ConfigError::Invalid(format!(
                "tool name {:?} must be 1-128 characters of A-Z a-z 0-9 . _ -",
                t.name
            )));
        }
        let mut spec = FingerprintSpec {
            ignore: t.ignore,
            required: t.required,
            ..FingerprintSpec::default()
        };
        for (category, fields) in t.fingerprint {
            let category: Category = category.parse().map_err(|_| {
                ConfigError::Invalid(format!(
                    "tool `{}`: fingerprint category {category:?} is not one of amount, recipient, target, body, other",
                    t.name
                ))
            })?;
            if category == Category::Upstream {
                return Err(ConfigError::Invalid(format!(
                    "tool `{}`: the `upstream` fingerprint category is filled by the server from the parent operation",
                    t.name
                )));
            }
            spec.fields.insert(category, fields);
        }
        spec.validate().map_err(|e| {
            ConfigError::Invalid(format!(
                "tool `{}`: fingerprint, ignore or required: {e}",
                t.name
            ))
        })?;
        let contract = ToolContract {
            lease_ms: parse_duration_ms(&t.name, "lease", &t.lease)?,
            retention_ms: parse_duration_ms(&t.name, "retention", &t.retention)?,
            name: t.name.clone(),
            class: t.class,
            loss: t.loss,
            status_url: t.status_url,
            compensation: t.compensation,
            accept_unknown_risk: t.accept_unknown_risk,
            fingerprint: spec,
        };
        contract
            .validate()
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        if tools.insert(t.name.clone(), contract).is_some() {
            return Err(ConfigError::Invalid(format!(
                "tool `{}` is declared twice",
                t.name
            )));
        }
    }
    for contract in tools.values() {
        if let Some(comp) = &contract.compensation
            && !tools.contains_key(comp)
        {
            return Err(ConfigError::Invalid(format!(
                "tool `{}`: compensation = {comp:?} names no declared tool",
                contract.name
            )));
        }
    }
    Ok(tools)
}

fn parse_duration_ms(tool: &str, setting: &str, text: &str) -> Result<u64, ConfigError> {
    let d = humantime::parse_duration(text).map_err(|e| {
        ConfigError::Invalid(format!(
            "tool `{tool}`: {setting} = {text:?} is not a duration like \"30s\" or \"48h\": {e}"
        ))
    })?;
    u64::try_from(d.as_millis())
        .map_err(|_| ConfigError::Invalid(format!("tool `{tool}`: {setting} is too long")))
}
