//! Finding an operation by what its agent knows — the tool and the client key — without
//! claiming it: nothing is appended.

use super::{Ledger, LedgerError};
use crate::config::Principal;
use crate::core::key::{ClientKey, ScopedHash};
use crate::core::operation::OperationRecord;
use crate::partition::Lookup;

impl Ledger {
    /// The caller's operation of `tool` under `key`, as a claim of it would address it (the
    /// key scoped by principal and tool); `NotFound` if nobody claimed it. The tool must be
    /// declared; a principal that lost its grant still finds its own operations, as it still
    /// reads them by id.
    pub async fn lookup(
        &self,
        principal: &Principal,
        tool: &str,
        key: &str,
    ) -> Result<OperationRecord, LedgerError> {
        if !self.tools.contains_key(tool) {
            let usable = self.tools.keys().filter(|t| principal.may_use(t));
            return Err(LedgerError::unknown_tool_among(
                tool,
                usable.map(String::as_str),
            ));
        }
        let scope = ScopedHash::of(&principal.id, tool, &ClientKey::parse(key)?);
        let partition = self.router.partition(self.router.of_scope(&scope))?;
        // By scope, not by id: an operation of an earlier id layout is found too.
        let record = partition.read(Lookup::Scope(scope)).await?;
        record
            .filter(|r| r.principal == principal.id)
            .ok_or(LedgerError::NotFound)
    }
}
