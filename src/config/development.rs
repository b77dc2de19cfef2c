//! The built-in development default: sample tools and one all-powerful `dev` principal, used
//! when no config file is given.

use super::Config;

impl Config {
    /// The development default: sample tools and one `dev` principal (agent, operator, auditor)
    /// with the given token.
    pub fn development(dev_token: &str) -> Self {
        let text = format!(
            "{DEVELOPMENT_TOOLS}\n[[principal]]\nid = \"dev\"\ntoken = \"{dev_token}\"\nroles = [\"agent\", \"operator\", \"auditor\"]\ntools = [\"*\"]\n"
        );
        // The embedded text is fixed and tested, so it always validates.
        Self::parse(&text).expect("the built-in development config is valid")
    }
}

/// The sample tool set of the development default (also shown in the README).
pub const DEVELOPMENT_TOOLS: &str = r#"
[[tool]]
name = "payments.charge"
class = "keyed"
loss = "high"
lease = "30s"
retention = "48h"
required = ["amount", "currency", "customer"]
ignore = ["trace_id"]
[tool.fingerprint]
amount = ["amount"]
other = ["currency"]
recipient = ["customer"]
body = ["description"]

[[tool]]
name = "tickets.create"
class = "keyed"
loss = "low"
lease = "30s"
[tool.fingerprint]
target = ["project"]
body = ["title", "body"]

[[tool]]
name = "messages.send"
class = "unsafe"
loss = "high"
lease = "15s"
[tool.fingerprint]
recipient = ["to"]
body = ["text"]

[[tool]]
name = "profile.set_email"
class = "natural"
loss = "low"
[tool.fingerprint]
target = ["user"]
body = ["email"]

[[tool]]
name = "search.lookup"
class = "read"
loss = "low"
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Role, token_hash};
    use std::collections::HashSet;

    #[test]
    fn the_development_default_validates_and_has_every_class() {
        let c = Config::development("dev-token-123");
        let classes: HashSet<_> = c.tools.values().map(|t| t.class).collect();
        assert_eq!(classes.len(), 4);
        let p = &c.principals_by_token[&token_hash("dev-token-123")];
        assert_eq!(p.id, "dev");
        assert!(p.roles.contains(&Role::Operator));
    }
}
