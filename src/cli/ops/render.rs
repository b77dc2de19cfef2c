//! How `opledger ops` shows the API's answers in a terminal: aligned tables and a timeline.

use super::super::text::{counted, duration};
use serde_json::Value;

/// `rows` under `header`, each column as wide as its widest cell.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(header.iter().map(|h| (*h).to_owned()).collect());
    for row in rows {
        out.push_str(&line(row.clone()));
    }
    out
}

/// A field as text (`-` when absent).
fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn items(value: &Value) -> &[Value] {
    value["items"].as_array().map_or(&[], Vec::as_slice)
}

/// A page of `GET /v1/operations`.
pub fn list(page: &Value) -> String {
    let rows: Vec<Vec<String>> = items(page)
        .iter()
        .map(|i| {
            vec![
                text(&i["created_at"]),
                text(&i["operation_id"]),
                text(&i["tool"]),
                text(&i["principal"]),
                text(&i["state"]),
                text(&i["cause"]),
            ]
        })
        .collect();
    let mut out = table(
        &[
            "CREATED",
            "OPERATION",
            "TOOL",
            "PRINCIPAL",
            "STATE",
            "CAUSE",
        ],
        &rows,
    );
    match page["next_cursor"].as_str() {
        Some(cursor) => out.push_str(&format!(
            "{} shown; more: repeat the command (with the same filters) and --cursor {cursor}\n",
            counted(rows.len(), "operation")
        )),
        None => out.push_str(&format!(
            "{} shown, the last page\n",
            counted(rows.len(), "operation")
        )),
    }
    out
}

/// `GET /v1/reconciliation`: each case, then what to do about it.
pub fn queue(queue: &Value) -> String {
    let rows: Vec<Vec<String>> = items(queue)
        .iter()
        .map(|i| {
            vec![
                text(&i["requested_at"]),
                text(&i["operation_id"]),
                text(&i["target"]["tool"]),
                text(&i["target"]["principal"]),
                text(&i["taken_over_by"]),
            ]
        })
        .collect();
    let mut out = table(
        &[
            "REQUESTED",
            "OPERATION",
            "TOOL",
            "PRINCIPAL",
            "TAKEN OVER BY",
        ],
        &rows,
    );
    for i in items(queue) {
        out.push_str(&format!(
            "\n{}:\n  {}\n",
            text(&i["operation_id"]),
            text(&i["guidance"])
        ));
    }
    out.push_str(&format!(
        "{} shown of {} waiting{}\n",
        rows.len(),
        text(&queue["total"]),
        if queue["truncated"] == true {
            "; more than shown"
        } else {
            ""
        }
    ));
    out
}

/// `GET /v1/tools`.
pub fn tools(tools: &Value) -> String {
    let rows: Vec<Vec<String>> = items(tools)
        .iter()
        .map(|t| {
            let categories: Vec<String> = t["fingerprint_categories"]
                .as_array()
                .map_or_else(Vec::new, |c| c.iter().map(text).collect());
            vec![
                text(&t["name"]),
                text(&t["class"]),
                text(&t["loss"]),
                duration(t["lease_ms"].as_u64().unwrap_or(0)),
                duration(t["retention_ms"].as_u64().unwrap_or(0)),
                if t["queryable"] == true { "yes" } else { "no" }.to_owned(),
                text(&t["unknown_outcome"]),
                if categories.is_empty() {
                    "whole request".to_owned()
                } else {
                    categories.join(",")
                },
                text(&t["compensation"]),
                if t["may_claim"] == true { "yes" } else { "no" }.to_owned(),
            ]
        })
        .collect();
    table(
        &[
            "TOOL",
            "CLASS",
            "LOSS",
            "LEASE",
            "RETENTION",
            "QUERYABLE",
            "UNKNOWN OUTCOME",
            "FINGERPRINT",
            "COMPENSATION",
            "MAY CLAIM",
        ],
        &rows,
    )
}

/// One line naming an operation, for confirmations.
pub fn summary(op: &Value) -> String {
    format!(
        "operation {} (tool {}, principal {}, state {}{})",
        text(&op["operation_id"]),
        text(&op["tool"]),
        text(&op["principal"]),
        text(&op["state"]),
        op["taken_over_by"]
            .as_str()
            .map_or(String::new(), |o| format!(", taken over by {o}"))
    )
}

/// The answer to an action: its decision and where the operation stands now.
pub fn decided(answer: &Value) -> String {
    let mut out = format!(
        "{}: {}, now {} (version {})\n",
        text(&answer["operation_id"]),
        text(&answer["decision"]),
        text(&answer["state"]),
        text(&answer["version"])
    );
    if let Some(original) = answer["compensates"].as_str() {
        out.push_str(&format!(
            "  a compensation of {original}: its executor runs it and reports, as for any claim\n"
        ));
    }
    out
}

/// Who acted in an event, as far as its fields say.
fn who(event: &Value) -> String {
    for at in [
        &event["holder"],
        &event["by"]["holder"],
        &event["by"]["operator"],
        &event["recoverer"],
        &event["owner"],
    ] {
        if let Some(name) = at.as_str() {
            return name.to_owned();
        }
    }
    "-".to_owned()
}

/// One operation, and its timeline when the token may read it.
pub fn operation(op: &Value, history: Option<&Value>) -> String {
    let mut out = format!("{}\n", summary(op));
    for (name, field) in [
        ("created", "created_at"),
        ("updated", "updated_at"),
        ("holder", "holder"),
        ("version", "version"),
    ] {
        out.push_str(&format!("  {name}: {}\n", text(&op[field])));
    }
    for (name, field) in [
        ("result", "result"),
        ("failure", "failure"),
        ("lease", "lease"),
        ("recovery", "recovery"),
        ("taken over by", "taken_over_by"),
    ] {
        if !op[field].is_null() {
            out.push_str(&format!("  {name}: {}\n", text(&op[field])));
        }
    }
    if op["result_withheld"] == true {
        out.push_str("  result: withheld (this token may not use the tool)\n");
    }
    let Some(history) = history else {
        out.push_str("timeline: needs the auditor, operator or viewer role\n");
        return out;
    };
    let rows: Vec<Vec<String>> = history["events"]
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .map(|e| {
            let note = match e["type"].as_str() {
                Some("moved_to_manual") => {
                    format!("{}: {}", text(&e["reason"]), text(&e["explanation"]))
                }
                // What recovery asked the external system and was told, or why an
                // operator acted.
                _ => match (&e["event"]["evidence"], reason(&e["event"])) {
                    (Value::Null, Some(why)) => format!("reason: {why}"),
                    (Value::Null, None) => String::new(),
                    (told, _) => format!("the external system said {told}"),
                },
            };
            vec![
                text(&e["at"]),
                text(&e["offset"]),
                text(&e["type"]),
                text(&e["decision"]),
                who(&e["event"]),
                note,
            ]
        })
        .collect();
    out.push_str("timeline:\n");
    out.push_str(&table(
        &["AT", "OFFSET", "EVENT", "DECISION", "WHO", "NOTE"],
        &rows,
    ));
    if history["truncated"] == true {
        out.push_str("(more events than shown)\n");
    }
    out
}

/// The reason an operator gave, on a takeover (`reason`) or a resolution (`by.reason`).
fn reason(event: &Value) -> Option<&str> {
    event["reason"]
        .as_str()
        .or_else(|| event["by"]["reason"].as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_table_aligns_its_columns_and_absent_fields_show_as_a_dash() {
        let page = json!({"items": [
            {"created_at": "2026-12-07T10:00:00.000Z", "operation_id": "a", "tool": "payments.charge", "principal": "p", "state": "manual", "cause": "lease_lapsed"},
            {"created_at": "2026-12-07T09:00:00.000Z", "operation_id": "bb", "tool": "t", "principal": "p", "state": "completed", "cause": null},
        ], "next_cursor": "5_x"});
        let shown = list(&page);
        let lines: Vec<&str> = shown.lines().collect();
        assert!(lines[0].starts_with("CREATED"), "{shown}");
        let column = lines[0].find("TOOL").expect("a TOOL column");
        assert_eq!(lines[1].find("payments.charge"), Some(column), "{shown}");
        assert_eq!(lines[2].find("t "), Some(column), "{shown}");
        assert!(lines[2].ends_with("completed  -"), "{shown}");
        assert_eq!(
            lines[3],
            "2 operations shown; more: repeat the command (with the same filters) and --cursor 5_x"
        );
    }

    #[test]
    fn who_acted_is_found_wherever_the_event_names_it() {
        assert_eq!(who(&json!({"holder": "w1"})), "w1");
        assert_eq!(who(&json!({"by": {"operator": "ops"}})), "ops");
        assert_eq!(who(&json!({"by": {"holder": "w2"}})), "w2");
        assert_eq!(who(&json!({})), "-");
    }
}
