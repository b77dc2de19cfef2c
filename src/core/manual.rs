//! Why an operation was handed to a person: the reason a history shows for a move to `manual`.
//!
//! The state's [`UnknownCause`] says why nobody knows whether the effect happened; the reason for
//! the move can be something else — recovery gave up asking, or an operator took the case over —
//! so it is worked out from the states before and after the event, not stored in the record.

use crate::operation::{OpState, UnknownCause};

/// Why the event that turned one state into another sent the operation to a person.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ManualReason {
    /// The state machine moved it because of this cause (its tool's contract sends such cases to
    /// a person).
    Unknown(UnknownCause),
    /// Recovery asked the external system as often as it may and never got a conclusive answer.
    RecoveryGaveUp,
    /// An operator took it over before anything else moved it.
    TakenOver,
}

impl ManualReason {
    /// Every reason, in a fixed order.
    pub const ALL: [Self; 6] = [
        Self::Unknown(UnknownCause::LeaseLapsed),
        Self::Unknown(UnknownCause::HolderReported),
        Self::Unknown(UnknownCause::EvidenceMismatch),
        Self::Unknown(UnknownCause::ResourceChanged),
        Self::RecoveryGaveUp,
        Self::TakenOver,
    ];

    /// Why the event that turned `before` into `after` sent the operation to a person, if it
    /// did: it is `manual` now and was not (or did not exist) before. Staying manual — a
    /// takeover of a case already there, a late report that settles nothing — is no move.
    pub fn of_move(before: Option<&OpState>, after: &OpState) -> Option<Self> {
        let OpState::Manual { cause, operator } = after else {
            return None;
        };
        match before {
            Some(OpState::Manual { .. }) => None,
            _ if operator.is_some() => Some(Self::TakenOver),
            // Recovery is the one step that leaves an unknown outcome for a person with the
            // same cause: it ran out of queries.
            Some(OpState::OutcomeUnknown { cause: earlier }) if earlier == cause => {
                Some(Self::RecoveryGaveUp)
            }
            _ => Some(Self::Unknown(*cause)),
        }
    }

    /// The stable name used in histories, exports and answers.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown(cause) => cause.as_str(),
            Self::RecoveryGaveUp => "recovery_gave_up",
            Self::TakenOver => "taken_over",
        }
    }

    /// The reason named `name` by [`as_str`](Self::as_str).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// What happened, in words for the person who now decides.
    pub fn explanation(self) -> &'static str {
        match self {
            Self::Unknown(cause) => cause.explanation(),
            Self::RecoveryGaveUp => {
                "recovery asked the external system as often as it may and never got a \
                 conclusive answer"
            }
            Self::TakenOver => "an operator took it over; only they settle it now",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manual(cause: UnknownCause, operator: Option<&str>) -> OpState {
        OpState::Manual {
            cause,
            operator: operator.map(str::to_owned),
        }
    }

    #[test]
    fn reason_names_are_pinned_and_read_back() {
        let names: Vec<&str> = ManualReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            names,
            [
                "lease_lapsed",
                "holder_reported",
                "evidence_mismatch",
                "resource_changed",
                "recovery_gave_up",
                "taken_over"
            ]
        );
        for reason in ManualReason::ALL {
            assert_eq!(ManualReason::from_name(reason.as_str()), Some(reason));
        }
        assert_eq!(ManualReason::from_name("manual"), None);
        let cause = UnknownCause::HolderReported;
        assert_eq!(
            ManualReason::Unknown(cause).explanation(),
            cause.explanation()
        );
        assert!(
            ManualReason::RecoveryGaveUp
                .explanation()
                .contains("never got a conclusive answer")
        );
        assert!(
            ManualReason::TakenOver
                .explanation()
                .contains("operator took it over")
        );
    }

    #[test]
    fn given_a_state_when_an_event_makes_it_manual_then_that_is_a_move_with_its_cause() {
        let processing = OpState::Processing {
            lease_expires_at_ms: 5,
        };
        let unknown = OpState::OutcomeUnknown {
            cause: UnknownCause::LeaseLapsed,
        };
        let lapsed = manual(UnknownCause::LeaseLapsed, None);
        assert_eq!(
            ManualReason::of_move(Some(&processing), &lapsed),
            Some(ManualReason::Unknown(UnknownCause::LeaseLapsed))
        );
        assert_eq!(
            ManualReason::of_move(
                Some(&unknown),
                &manual(UnknownCause::EvidenceMismatch, None)
            ),
            Some(ManualReason::Unknown(UnknownCause::EvidenceMismatch))
        );
        // Created straight into a person's hands (a compensation of a changed resource).
        assert_eq!(
            ManualReason::of_move(None, &manual(UnknownCause::ResourceChanged, None)),
            Some(ManualReason::Unknown(UnknownCause::ResourceChanged))
        );
    }

    #[test]
    fn given_an_unknown_outcome_when_it_turns_manual_with_its_cause_then_recovery_gave_up() {
        let unknown = OpState::OutcomeUnknown {
            cause: UnknownCause::HolderReported,
        };
        assert_eq!(
            ManualReason::of_move(Some(&unknown), &manual(UnknownCause::HolderReported, None)),
            Some(ManualReason::RecoveryGaveUp)
        );
    }

    #[test]
    fn given_a_case_when_an_operator_takes_it_over_then_the_reason_is_the_takeover() {
        let unknown = OpState::OutcomeUnknown {
            cause: UnknownCause::LeaseLapsed,
        };
        let lapsed_lease = OpState::Processing {
            lease_expires_at_ms: 5,
        };
        let taken = manual(UnknownCause::LeaseLapsed, Some("ops"));
        for before in [&unknown, &lapsed_lease] {
            assert_eq!(
                ManualReason::of_move(Some(before), &taken),
                Some(ManualReason::TakenOver)
            );
        }
    }

    #[test]
    fn given_a_manual_state_when_it_stays_manual_or_leaves_then_nothing_moved() {
        let lapsed = manual(UnknownCause::LeaseLapsed, None);
        let taken = manual(UnknownCause::LeaseLapsed, Some("ops"));
        assert_eq!(ManualReason::of_move(Some(&lapsed), &taken), None);
        assert_eq!(ManualReason::of_move(Some(&lapsed), &lapsed), None);
        let failed = OpState::Failed {
            code: "declined".into(),
        };
        assert_eq!(ManualReason::of_move(Some(&lapsed), &failed), None);
        assert_eq!(ManualReason::of_move(None, &failed), None);
        let processing = OpState::Processing {
            lease_expires_at_ms: 5,
        };
        assert_eq!(ManualReason::of_move(Some(&failed), &processing), None);
    }
}
