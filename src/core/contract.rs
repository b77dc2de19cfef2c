//! Tool contracts (R1, R2): what a tool promises about retries, evidence and loss, and therefore
//! what an unknown outcome leads to.

use crate::fingerprint::FingerprintSpec;
use serde::{Deserialize, Serialize};

/// How safely a tool's call can be repeated (R1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolClass {
    /// A pure read: nothing is recorded; call and retry freely.
    Read,
    /// A naturally idempotent write (set-to-value): executing it again has the same effect.
    Natural,
    /// Idempotent through the operation key, which the external system honours or can be queried by.
    Keyed,
    /// Cannot be replayed safely and cannot be queried.
    Unsafe,
}

impl ToolClass {
    /// Every class, in the order the config's help lists them.
    pub const ALL: [Self; 4] = [Self::Read, Self::Natural, Self::Keyed, Self::Unsafe];

    /// The class named `name` by [`as_str`](Self::as_str).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }

    /// The stable lower-case name used in config, answers and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Natural => "natural",
            Self::Keyed => "keyed",
            Self::Unsafe => "unsafe",
        }
    }
}

/// How bad a duplicate or a lost side effect would be (R2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossLevel {
    /// A duplicate is a nuisance.
    Low,
    /// Payments, outbound messages, irreversible permission changes.
    High,
}

impl LossLevel {
    /// Every level, lowest first.
    pub const ALL: [Self; 2] = [Self::Low, Self::High];

    /// The level named `name` by [`as_str`](Self::as_str).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.as_str() == name)
    }

    /// The stable lower-case name used in config and answers.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::High => "high",
        }
    }
}

/// What the ledger does when nobody knows whether a recorded operation's side effect happened:
/// its holder reported `unknown`, or its lease lapsed and someone else asks to execute it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownPolicy {
    /// Executing again is harmless: the key is released to the next claimant.
    Reexecute,
    /// Ask the external system first (R17): the operation waits as `outcome_unknown`.
    Investigate,
    /// Only a person can decide (R18): the operation goes to the operator queue as `manual`.
    Operator,
}

/// A tool's contract as the ledger needs it. Read from config by the shell; the terms that drive
/// decisions are copied into every claim event ([`ContractTerms`]) so that replaying the log never
/// depends on today's config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolContract {
    /// The tool's name, e.g. `payments.charge`.
    pub name: String,
    /// Its retry class.
    pub class: ToolClass,
    /// Its loss level.
    pub loss: LossLevel,
    /// How long an executor holds the operation before the lease lapses, in milliseconds.
    pub lease_ms: u64,
    /// How long a finished record is kept for replay, in milliseconds.
    pub retention_ms: u64,
    /// The status query URL template, if the external system can be asked (`{operation_id}`).
    pub status_url: Option<String>,
    /// The compensating tool, if there is one.
    pub compensation: Option<String>,
    /// Whether a low-loss `unsafe` tool accepts re-execution after an unknown outcome (R1).
    pub accept_unknown_risk: bool,
    /// Which request fields enter the fingerprint, by category.
    pub fingerprint: FingerprintSpec,
}

/// Why a contract is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    /// A lease of zero would lapse at once.
    #[error("tool `{0}`: lease must be longer than zero")]
    ZeroLease(String),
    /// Only a low-loss tool may accept the risk of running twice.
    #[error("tool `{0}`: accept_unknown_risk is only allowed with loss = \"low\"")]
    RiskOnHighLoss(String),
    /// Accepting the risk only makes sense for `unsafe` tools.
    #[error("tool `{0}`: accept_unknown_risk is only meaningful for class = \"unsafe\"")]
    RiskOnSafeClass(String),
    /// A status URL must say where the operation id goes.
    #[error("tool `{0}`: status_url must contain {{operation_id}}")]
    StatusUrlWithoutId(String),
}

impl ContractError {
    /// The config setting the rule is about, as `[[tool]]` spells it.
    pub fn setting(&self) -> &'static str {
        match self {
            Self::ZeroLease(_) => "lease",
            Self::RiskOnHighLoss(_) | Self::RiskOnSafeClass(_) => "accept_unknown_risk",
            Self::StatusUrlWithoutId(_) => "status_url",
        }
    }
}

impl ToolContract {
    /// Checks the contract's internal consistency: every rule it breaks, in a fixed order.
    pub fn validate(&self) -> Result<(), Vec<ContractError>> {
        let name = || self.name.clone();
        let mut broken = Vec::new();
        if self.lease_ms == 0 {
            broken.push(ContractError::ZeroLease(name()));
        }
        if self.accept_unknown_risk && self.loss == LossLevel::High {
            broken.push(ContractError::RiskOnHighLoss(name()));
        }
        if self.accept_unknown_risk && self.class != ToolClass::Unsafe {
            broken.push(ContractError::RiskOnSafeClass(name()));
        }
        if let Some(url) = &self.status_url
            && !url.contains("{operation_id}")
        {
            broken.push(ContractError::StatusUrlWithoutId(name()));
        }
        if broken.is_empty() {
            Ok(())
        } else {
            Err(broken)
        }
    }

    /// Whether claims for this tool are recorded at all (`read` tools are not).
    pub fn is_recorded(&self) -> bool {
        self.class != ToolClass::Read
    }

    /// The terms that go into a claim event.
    pub fn terms(&self) -> ContractTerms {
        ContractTerms {
            class: self.class,
            loss: self.loss,
            lease_ms: self.lease_ms,
            retention_ms: self.retention_ms,
            queryable: self.status_url.is_some(),
            accept_unknown_risk: self.accept_unknown_risk,
        }
    }
}

/// The decision-relevant part of a contract, frozen into the claim event and the operation record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContractTerms {
    /// Retry class.
    pub class: ToolClass,
    /// Loss level.
    pub loss: LossLevel,
    /// Lease length in milliseconds.
    pub lease_ms: u64,
    /// Replay retention in milliseconds.
    pub retention_ms: u64,
    /// Whether the external system can be asked about the operation.
    pub queryable: bool,
    /// Whether a low-loss unsafe tool accepts running twice.
    pub accept_unknown_risk: bool,
}

impl ContractTerms {
    /// What an unknown outcome leads to, by class (R1, R17, R18).
    pub fn unknown_policy(&self) -> UnknownPolicy {
        match self.class {
            ToolClass::Read | ToolClass::Natural => UnknownPolicy::Reexecute,
            ToolClass::Unsafe if self.accept_unknown_risk && self.loss == LossLevel::Low => {
                UnknownPolicy::Reexecute
            }
            ToolClass::Keyed if self.queryable => UnknownPolicy::Investigate,
            ToolClass::Keyed | ToolClass::Unsafe => UnknownPolicy::Operator,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn loss_levels_are_named_as_the_config_spells_them() {
        assert_eq!(
            super::LossLevel::ALL.map(super::LossLevel::as_str),
            ["low", "high"]
        );
        for loss in super::LossLevel::ALL {
            let spelled = serde_json::to_value(loss).expect("serialises");
            assert_eq!(spelled, loss.as_str());
            assert_eq!(super::LossLevel::from_name(loss.as_str()), Some(loss));
        }
        assert_eq!(super::LossLevel::from_name("medium"), None);
    }

    use super::*;

    fn terms(class: ToolClass, loss: LossLevel, queryable: bool, risk: bool) -> ContractTerms {
        ContractTerms {
            class,
            loss,
            lease_ms: 1_000,
            retention_ms: 10_000,
            queryable,
            accept_unknown_risk: risk,
        }
    }

    #[test]
    fn class_names_are_pinned_and_only_read_tools_go_unrecorded() {
        let classes = ToolClass::ALL;
        assert_eq!(
            classes.map(ToolClass::as_str),
            ["read", "natural", "keyed", "unsafe"]
        );
        for class in classes {
            assert_eq!(ToolClass::from_name(class.as_str()), Some(class));
            let recorded = ToolContract {
                class,
                ..contract()
            }
            .is_recorded();
            assert_eq!(recorded, class != ToolClass::Read, "{}", class.as_str());
        }
        assert_eq!(ToolClass::from_name("Keyed"), None, "names are exact");
    }

    #[test]
    fn unknown_policy_follows_the_class() {
        use LossLevel::*;
        use ToolClass::*;
        use UnknownPolicy::*;
        let table = [
            (terms(Natural, High, false, false), Reexecute),
            (terms(Keyed, High, true, false), Investigate),
            (terms(Keyed, Low, true, false), Investigate),
            (terms(Keyed, High, false, false), Operator),
            (terms(Keyed, Low, false, false), Operator),
            (terms(Unsafe, High, false, false), Operator),
            (terms(Unsafe, Low, false, false), Operator),
            (terms(Unsafe, Low, false, true), Reexecute),
            (terms(Unsafe, High, false, true), Operator),
        ];
        for (t, expected) in table {
            assert_eq!(t.unknown_policy(), expected, "{t:?}");
        }
    }

    fn contract() -> ToolContract {
        ToolContract {
            name: "t".into(),
            class: ToolClass::Unsafe,
            loss: LossLevel::Low,
            lease_ms: 1,
            retention_ms: 1,
            status_url: None,
            compensation: None,
            accept_unknown_risk: true,
            fingerprint: FingerprintSpec::default(),
        }
    }

    #[test]
    fn given_inconsistent_contracts_when_validated_then_each_is_rejected_with_its_reason() {
        assert_eq!(contract().validate(), Ok(()));
        let one = |c: ToolContract| c.validate().map_err(|mut e| (e.len(), e.remove(0)));
        let mut c = contract();
        c.lease_ms = 0;
        assert_eq!(one(c), Err((1, ContractError::ZeroLease("t".into()))));
        let mut c = contract();
        c.loss = LossLevel::High;
        assert_eq!(one(c), Err((1, ContractError::RiskOnHighLoss("t".into()))));
        let mut c = contract();
        c.class = ToolClass::Keyed;
        assert_eq!(one(c), Err((1, ContractError::RiskOnSafeClass("t".into()))));
        let mut c = contract();
        c.status_url = Some("http://x/status".into());
        assert_eq!(
            one(c),
            Err((1, ContractError::StatusUrlWithoutId("t".into())))
        );
    }

    #[test]
    fn given_a_contract_breaking_every_rule_then_each_is_named_with_its_setting() {
        let c = ToolContract {
            lease_ms: 0,
            class: ToolClass::Keyed,
            loss: LossLevel::High,
            status_url: Some("http://x/status".into()),
            ..contract()
        };
        let broken = c.validate().expect_err("inconsistent");
        let settings: Vec<&str> = broken.iter().map(ContractError::setting).collect();
        assert_eq!(
            settings,
            [
                "lease",
                "accept_unknown_risk",
                "accept_unknown_risk",
                "status_url"
            ]
        );
    }
}
