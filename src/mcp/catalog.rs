//! Which ledger contract an upstream tool gets: the config's `[[tool]]` entry for its exposed
//! name where there is one (annotations never relax it), else a default chosen by its
//! annotations — hints, which an untrusted server may get wrong, so only the cautious reading
//! of them counts: `readOnlyHint: true` → `read`, `idempotentHint: true` → `natural`,
//! anything else → `unsafe` with high loss.

use crate::core::contract::{LossLevel, ToolClass, ToolContract};
use crate::core::fingerprint::FingerprintSpec;
use std::time::Duration;

/// What an upstream tool's annotations say (absent hints are `false`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Hints {
    /// `readOnlyHint`.
    pub read_only: bool,
    /// `idempotentHint`.
    pub idempotent: bool,
}

/// How long a finished operation of a tool without a `[[tool]]` entry is kept for replay.
const RETENTION_DEFAULT: Duration = Duration::from_secs(48 * 3600);

/// The contract of the tool exposed as `exposed`. A default contract's lease outlasts the
/// upstream call (`call_timeout`) by a margin, so a slow call that still answers in time is
/// never taken for a lapsed one.
pub(super) fn contract(
    exposed: &str,
    configured: Option<&ToolContract>,
    hints: Hints,
    call_timeout: Duration,
) -> ToolContract {
    if let Some(configured) = configured {
        return configured.clone();
    }
    let class = if hints.read_only {
        ToolClass::Read
    } else if hints.idempotent {
        ToolClass::Natural
    } else {
        ToolClass::Unsafe
    };
    let lease = call_timeout + Duration::from_secs(10);
    ToolContract {
        name: exposed.to_owned(),
        class,
        loss: LossLevel::High,
        lease_ms: u64::try_from(lease.as_millis()).unwrap_or(u64::MAX),
        retention_ms: u64::try_from(RETENTION_DEFAULT.as_millis()).unwrap_or(u64::MAX),
        status_url: None,
        compensation: None,
        accept_unknown_risk: false,
        // Every argument counts (as `other`): a changed argument is a conflict, never a replay.
        fingerprint: FingerprintSpec::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(5);

    fn hints(read_only: bool, idempotent: bool) -> Hints {
        Hints {
            read_only,
            idempotent,
        }
    }

    #[test]
    fn given_no_entry_then_annotations_choose_and_anything_else_is_unsafe() {
        let class = |h| contract("pay.x", None, h, TIMEOUT).class;
        assert_eq!(class(hints(true, false)), ToolClass::Read);
        assert_eq!(class(hints(true, true)), ToolClass::Read);
        assert_eq!(class(hints(false, true)), ToolClass::Natural);
        assert_eq!(class(Hints::default()), ToolClass::Unsafe);
        let unsafe_one = contract("pay.x", None, Hints::default(), TIMEOUT);
        assert_eq!(unsafe_one.loss, LossLevel::High);
        assert!(!unsafe_one.accept_unknown_risk);
        assert_eq!(unsafe_one.name, "pay.x");
        assert_eq!(unsafe_one.lease_ms, 15_000, "the call timeout and a margin");
        assert!(unsafe_one.validate().is_ok());
    }

    #[test]
    fn given_an_entry_then_annotations_never_relax_it() {
        let configured = ToolContract {
            class: ToolClass::Keyed,
            ..contract("pay.charge", None, Hints::default(), TIMEOUT)
        };
        for h in [hints(true, false), hints(false, true), Hints::default()] {
            assert_eq!(
                contract("pay.charge", Some(&configured), h, TIMEOUT),
                configured
            );
        }
    }
}
