//! One fixed event, for fixtures and tests here and in the crates that carry events
//! (`test-support` feature).

use super::*;
use crate::contract::{LossLevel, ToolClass};
use crate::fingerprint::Category;

/// A fixed claim envelope: the base of the frozen event fixtures and of the fixtures of
/// messages that carry an event.
pub fn sample_claim() -> Envelope {
    Envelope {
        scope: ScopedHash([7; 32]),
        operation_id: OperationId([9; 16]),
        reply_to: Some(ReplyTo {
            node: 1,
            request: 2,
        }),
        body: EventBody::Claimed(Claim {
            principal: "agent-a".into(),
            tool: "payments.charge".into(),
            holder: "worker-7".into(),
            fingerprint: Fingerprint {
                version: 1,
                parts: vec![(Category::Amount, [1; 32])],
            },
            parent: None,
            terms: ContractTerms {
                class: ToolClass::Keyed,
                loss: LossLevel::High,
                lease_ms: 30_000,
                retention_ms: 172_800_000,
                queryable: true,
                accept_unknown_risk: false,
            },
            intake: None,
        }),
    }
}
