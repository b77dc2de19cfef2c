//! Random histories against the invariants every history must keep (printed seed on
//! failure by proptest).
use super::*;
use proptest::prelude::*;

fn body(
    kind: u8,
    holder: &str,
    amount: u8,
    terms: ContractTerms,
    version: Option<u64>,
) -> EventBody {
    match kind {
        0 | 1 => claim_by(holder, terms, amount),
        2 => EventBody::Heartbeat(by(holder, version)),
        3 => EventBody::Completed(Completion {
            by: by(holder, version),
            result: result(&format!("r-{holder}")),
        }),
        4 => EventBody::Failed(Failure {
            by: by(holder, version),
            kind: if amount == 0 {
                FailureKind::Definite
            } else {
                FailureKind::NotAccepted
            },
            code: "c".into(),
        }),
        5 => EventBody::UnknownReported(by(holder, version)),
        8 => EventBody::RecoveryStarted(RecoveryStart {
            recoverer: holder.into(),
            lease_ms: 300,
        }),
        9 => EventBody::EvidenceReported(EvidenceReport {
            recoverer: holder.into(),
            evidence: match amount {
                0 => Evidence::Absent,
                _ => Evidence::Inconclusive {
                    reason: "timeout".into(),
                    retry_after_ms: version,
                },
            },
        }),
        10 => EventBody::EvidenceReported(EvidenceReport {
            recoverer: holder.into(),
            evidence: Evidence::Found {
                result: result("found"),
                fields: None,
            },
        }),
        6 => EventBody::TakenOver(OperatorAction {
            operator: holder.into(),
            expected_version: version,
            reason: None,
        }),
        7 => EventBody::Resolved(Resolution {
            by: OperatorAction {
                operator: holder.into(),
                expected_version: version,
                reason: None,
            },
            outcome: if amount == 0 {
                ResolvedOutcome::NotExecuted
            } else {
                ResolvedOutcome::Completed(result(&format!("op-{holder}")))
            },
        }),
        11 => EventBody::ExpiryRequested,
        _ => EventBody::Heartbeat(by(holder, version)),
    }
}

proptest! {
    #[test]
    fn every_history_keeps_the_invariants(
        class in prop_oneof![Just(ToolClass::Natural), Just(ToolClass::Keyed), Just(ToolClass::Unsafe)],
        queryable in any::<bool>(),
        steps in proptest::collection::vec((0u8..12, 0usize..3, 0u64..3000, 0u8..2, proptest::option::of(0u64..4)), 1..80),
    ) {
        let t = terms(class, queryable);
        let holders = ["w0", "w1", "w2"];
        let run = |s: &mut Scenario| -> Vec<Decision> {
            let mut at = 0;
            steps.iter().map(|&(kind, h, dt, amount, version)| {
                at += dt;
                s.when(at, body(kind, holders[h], amount, t, version))
            }).collect()
        };
        let mut s = Scenario::new(t);
        let mut at = 0;
        for &(kind, h, dt, amount, version) in &steps {
            at += dt;
            let before = s.record.clone();
            let ev = body(kind, holders[h], amount, t, version);
            let decision = s.when(at, ev);
            let after = s.record.clone();
            match (&before, &after) {
                (None, Some(r)) => prop_assert_eq!(r.version, 1),
                (Some(b), Some(a)) => {
                    prop_assert!(a.version == b.version || a.version == b.version + 1);
                    let expired = matches!(b.state, OpState::Expired { .. });
                    if !expired {
                        // Only an expired key starts a new intent with a new fingerprint.
                        prop_assert_eq!(&a.fingerprint, &b.fingerprint, "first fingerprint kept");
                    }
                    prop_assert_eq!((a.id, a.scope, &a.principal), (b.id, b.scope, &b.principal));
                    if b.state.is_terminal() && !matches!(a.state, OpState::Expired { .. }) {
                        prop_assert_eq!(&a.state, &b.state, "terminal states change only by expiring");
                    }
                }
                (Some(_), None) => prop_assert!(false, "a record never disappears"),
                (None, None) => {}
            }
            match &decision {
                Decision::Execute => {
                    let r = after.as_ref().expect("execute leaves a record");
                    let processing = matches!(r.state, OpState::Processing { .. });
                    prop_assert!(processing, "execute leaves the operation processing");
                    prop_assert_eq!(&r.holder, holders[h]);
                }
                Decision::Rejected(_) | Decision::Conflict { .. } | Decision::InProgress
                | Decision::Replay | Decision::Unchanged => {
                    prop_assert_eq!(&before, &after, "{:?} changes nothing", decision);
                }
                _ => {}
            }
            if let (Decision::Conflict { categories }, Some(b)) = (&decision, &before) {
                prop_assert_eq!(categories.clone(), b.fingerprint.differing_categories(&fingerprint(amount)));
            }
        }
        // Deterministic: the same history gives the same decisions and the same record.
        let (mut a, mut b) = (Scenario::new(t), Scenario::new(t));
        prop_assert_eq!(run(&mut a), run(&mut b));
        prop_assert_eq!(a.record, b.record);
    }
}
